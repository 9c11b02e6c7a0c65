/*
Elementwise math for the CPU twins that GCC vectorises (-O3 -march=native, no -ffast-math):
cpu_vexp (the cross-entropy's softmax, SiLU; cpu_vexp8_le88, an eight-lane form, the
attention's probabilities) and cpu_vtanh (GELU). libm's expf and tanhf are calls that keep
their loops scalar: on the Zen 3 development machine the dit-tiny step spent 41% of its time in GELU's tanhf and stories15M
20% in the cross-entropy's expf (docs/results/cpu_step_yardstick.md). Results differ from
libm's in the last bits only (bounds below), so the twins' results stay within their tests'
tolerances; they are deterministic, and the same in every loop that uses them.
*/
#pragma once
#include <stdint.h>
#include <string.h>
#include <math.h>

/*
exp(x), written so that GCC vectorises a loop of it
(glibc's vector expf, libmvec, is only used under -ffast-math). Range reduction
x = n ln2 + r with n = round(x / ln2), |r| <= ln2/2 (ln2 in two parts, Cody-Waite, so
that n * the first part is exact); exp(r) ~ 1 + r + r^2 P(r) with the degree-5
polynomial P of Cephes' expf; then the result times 2^n, as 2^(n/2) 2^(n - n/2) so
that both factors are normal floats for every n in [-126, 128].
Accuracy, measured at every float in [-87.34, 88.72) by dev/bench/attention_cpu_bench.c
(--exp-all): at most 1 ulp from glibc's expf (0.8% of the inputs differ from it), and at
most 1.01 ulp from the exact exp (expf: 0.502), both with FMA contraction (-march=native)
and without (0.99 ulp). Edges: x below ln(FLT_MIN) = -87.3365, and -inf, give exactly 0
(never a denormal; expf gives denormals down to -103.97); x above ln(FLT_MAX) gives +inf;
NaN gives NaN. exp(0) = 1 exactly.
The edges are applied with bit masks rather than ?:, because GCC (without -ffast-math)
turns a ?: after the arithmetic into a branch around the polynomial, and a loop with a
branch is not vectorised.
*/
static inline uint32_t cpu_vbits(float f) { uint32_t u; memcpy(&u, &f, sizeof u); return u; }
static inline float cpu_vfloat(uint32_t u) { float f; memcpy(&f, &u, sizeof f); return f; }

static inline float cpu_vexp(float x) {
    const float lo = -87.3365402f;  // the float just above ln(FLT_MIN): exp(lo) >= FLT_MIN
    const float hi = 88.7228394f;   // ln(FLT_MAX)
    // n = round(x / ln2): adding 1.5 * 2^23 rounds x / ln2 to an integer, which is then in
    // the low bits of t (for |x| < 2^21; larger x are caught by the masks below)
    const float t = x * 1.44269504088896341f + 12582912.0f;
    const float fn = t - 12582912.0f;
    const int32_t n = (int32_t)(cpu_vbits(t) - cpu_vbits(12582912.0f));
    float r = x - fn * 0.693359375f;  // ln2 = 0.693359375 - 2.12194440e-4
    r = r + fn * 2.12194440e-4f;
    float p = 1.9875691500e-4f;
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    float y = p * (r * r) + r + 1.0f;  // exp(r)
    const int32_t n1 = n >> 1;
    y = y * cpu_vfloat((uint32_t)(n1 + 127) << 23) * cpu_vfloat((uint32_t)(n - n1 + 127) << 23);
    // the edges: all ones in `below` when x < lo, and so on (all zeros otherwise)
    const uint32_t below = 0u - (uint32_t)(x < lo), above = 0u - (uint32_t)(x > hi), nan = 0u - (uint32_t)(x != x);
    const uint32_t bits = (cpu_vbits(y) & ~(below | above | nan)) | (cpu_vbits(INFINITY) & above) |
                          (cpu_vbits(x) & nan);
    return cpu_vfloat(bits);
}

/*
Eight floats as one value (GCC's vector extension: an AVX register with -march=native on
x86-64, two SSE registers without AVX, NEON pairs on arm64): the attention twin's loops are
written on it so that they keep their partial sums in registers. Every operation is lane by
lane IEEE arithmetic, as in a scalar loop, and is contracted to FMA exactly where the same
expression on scalars is. Without AVX (the emulator's build) GCC warns, at the end of the
file, that returning these changes the ABI: -Wpsabi is off from here to the end of the
including file, and the functions that return them are always inlined, never called (none
takes one by value: that draws a note no pragma turns off).
*/
#pragma GCC diagnostic ignored "-Wpsabi"
#define CPU_V8_FN static inline __attribute__((always_inline))
typedef float cpu_v8f __attribute__((vector_size(32)));
typedef uint32_t cpu_v8u __attribute__((vector_size(32)));
typedef int32_t cpu_v8i __attribute__((vector_size(32)));

CPU_V8_FN cpu_v8f cpu_v8_load(const float* p) { cpu_v8f v; memcpy(&v, p, sizeof v); return v; }
// a statement, not a function: a function would have to take the vector by value (by reference,
// GCC keeps the arrays of sums that are stored from in memory) and without AVX GCC notes that
// this changes the ABI
#define cpu_v8_store(p, v) do { const cpu_v8f cpu_v8_store_v_ = (v); memcpy((p), &cpu_v8_store_v_, sizeof(cpu_v8f)); } while (0)
CPU_V8_FN cpu_v8f cpu_v8_set1(float x) { return cpu_v8f{x, x, x, x, x, x, x, x}; }

// cpu_vexp on eight lanes, for x <= 88 (the attention's exp(s - max) and exp(s - lse): x <= 0 up
// to rounding): the same bits as cpu_vexp for every x in [-inf, 88] (attention_cpu_bench checks
// every float it checks cpu_vexp on), NaN for NaN. There n = round(x / ln2) <= 127, so 2^n is one
// normal float (n >= -126 wherever the result is not flushed to 0) and one product y 2^n rounds
// as cpu_vexp's two do (y 2^(n/2) is exact); no +inf or NaN lanes to blend in: about 40% fewer
// operations than cpu_vexp.
CPU_V8_FN cpu_v8f cpu_vexp8_le88(const cpu_v8f& x) {
    const float lo = -87.3365402f;  // as in cpu_vexp
    const cpu_v8f t = x * 1.44269504088896341f + 12582912.0f;
    const cpu_v8f fn = t - 12582912.0f;
    cpu_v8f r = x - fn * 0.693359375f;
    r = r + fn * 2.12194440e-4f;
    cpu_v8f p = cpu_v8_set1(1.9875691500e-4f);
    p = p * r + 1.3981999507e-3f;
    p = p * r + 8.3334519073e-3f;
    p = p * r + 4.1665795894e-2f;
    p = p * r + 1.6666665459e-1f;
    p = p * r + 5.0000001201e-1f;
    const cpu_v8f y = p * (r * r) + r + 1.0f;
    // 2^n: the bits of t are those of 1.5 * 2^23 plus n, so (n + 127) << 23 is (t's bits << 23) plus a constant
    const cpu_v8u two_n = ((cpu_v8u)t << 23) + (uint32_t)((127u - cpu_vbits(12582912.0f)) << 23);
    return (cpu_v8f)((cpu_v8u)(y * (cpu_v8f)two_n) & ~(cpu_v8u)(x < lo));
}

/*
tanh(u) = sign(u) (1 - e) / (1 + e) with e = exp(-2|u|) (no overflow for any u; +-inf give
+-1, NaN gives NaN), written 1 - 2e / (1 + e) from |u| = 0.55 on; for |u| < 0.25, where 1 - e
would lose bits to cancellation, the odd Taylor polynomial to u^11 (its first omitted term is
below 2e-10 relative there). Measured on
every float of [-12, 12] (dev/bench/attention_cpu_bench.c --vtanh): at most 2.54 ulp from the
exact tanh (glibc's tanhf: 2.19) and 3 ulp from tanhf. The two results are
blended with a bit mask, as in cpu_vexp, so that the loop keeps no branch.
*/
static inline float cpu_vtanh(float u) {
    const float a = fabsf(u);
    const float e = cpu_vexp(-2.0f * a);
    const float mid = (1.0f - e) / (1.0f + e);
    // from |u| = 0.55 (tanh >= 0.5) on: 1 - 2e / (1 + e) rounds once near +-1, where (1 - e) / (1 + e)
    // is off by up to 2 ulp, so that 1 + tanh (GELU's backward takes it at u << 0) keeps its bits
    const float big = 1.0f - 2.0f * e / (1.0f + e);
    const float a2 = a * a;
    // the odd series a - a^3/3 + 2a^5/15 - 17a^7/315 + 62a^9/2835 - 1382a^11/155925, by Horner in a^2
    float p = -1382.0f / 155925.0f;
    p = p * a2 + 62.0f / 2835.0f;
    p = p * a2 - 17.0f / 315.0f;
    p = p * a2 + 2.0f / 15.0f;
    p = p * a2 - 1.0f / 3.0f;
    const float small = a + a * a2 * p;
    const uint32_t use_small = 0u - (uint32_t)(a < 0.25f), use_big = 0u - (uint32_t)(a >= 0.55f);
    const uint32_t use_mid = ~(use_small | use_big);  // and NaN, which fails both comparisons
    const uint32_t r = (cpu_vbits(small) & use_small) | (cpu_vbits(mid) & use_mid) | (cpu_vbits(big) & use_big);
    return copysignf(cpu_vfloat(r), u);
}

/*
Row reductions (the softmax of the cross-entropy, the statistics of RMSNorm and LayerNorm): 8
interleaved partial sums over the multiple-of-8 part (the loop GCC vectorises), the tail in
order, then a fixed tree: the same result for any vector width and thread count.
*/
static inline float cpu_vrow_max(const float* x, int n) {
    float acc[8] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY, -INFINITY};
    const int n8 = n & ~7;
    for (int j = 0; j < n8; j += 8)
        for (int i = 0; i < 8; i++) acc[i] = x[j + i] > acc[i] ? x[j + i] : acc[i];  // a NaN is skipped, as before
    float m = -INFINITY;
    for (int i = 0; i < 8; i++) m = acc[i] > m ? acc[i] : m;
    for (int j = n8; j < n; j++) m = x[j] > m ? x[j] : m;
    return m;
}

// sum_j f(j) for j < n (f: a lambda of the index, inlined into the loop)
template <class F>
static inline float cpu_vrow_sum(int n, F f) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    const int n8 = n & ~7;
    for (int j = 0; j < n8; j += 8)
        for (int i = 0; i < 8; i++) acc[i] += f(j + i);
    float s = ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
    for (int j = n8; j < n; j++) s += f(j);
    return s;
}

// sum_j exp(x[j] - m)
static inline float cpu_vexp_sum(const float* x, int n, float m) {
    return cpu_vrow_sum(n, [&](int j) { return cpu_vexp(x[j] - m); });
}
