// The CPU attention (llmc/kernels/cpu/attention.h): accuracy of its exp, agreement with a
// double-precision reference, determinism, and speed on the stories260K and stories15M
// shapes. Built like the CPU trainer (C++, the trainer's flags):
//
//   mkdir -p build/bench
//   g++ -O3 -march=native -fopenmp -std=c++17 -DLLMC_CPU -I. -x c++ dev/bench/attention_cpu_bench.c
//       -o build/bench/attention_cpu_bench
//   build/bench/attention_cpu_bench [--exp-all] [--reps N] [--time-only] [--full] [--wide] [--vtanh]
//
// --vtanh: only llmc/kernels/cpu/vmath.h's cpu_vtanh (GELU's tanh) against tanhf and tanh in double, on
//    every float of [-12, 12] (beyond, both round to +-1), and its edges; then exit.
// 1. cpu_vexp (llmc/kernels/cpu/vmath.h) against glibc's expf and against exp in double (error in ulps of the
//    float result), on every float in [-87.33, 88.72] with --exp-all, else on every 16th;
//    and its edge cases (-inf, below ln(FLT_MIN), 0, NaN, overflow); cpu_vexp8_le88 (the
//    attention's eight-lane exp) bit for bit against cpu_vexp on those floats up to 88, and its edges.
// 2. forward and backward on random inputs against a double-precision reference
//    (largest error relative to the largest value of each output), for several shapes
//    (GQA, MQA, T not a multiple of 8, odd head dims, hd = 16, 32, 65, 130, 1024).
// 3. determinism: the outputs bit for bit, run twice, with 1 thread and with all threads.
// 4. time per call (median of --reps, default 7) of forward and backward at B=32 T=256
//    H=8 KV=4 hd=8 (stories260K), B=8 T=256 H=6 KV=6 hd=48 (stories15M) and B=16 T=256
//    H=4 KV=4 hd=16 (dit-tiny; it runs the full mode); --wide adds hd 32 and 64 and T = 512.
// --full: parts 2 to 4 on the non-causal mode (attention_full_forward/backward, the video
//    DiT) instead of the causal one.
//    With -DOLD_ATTENTION='"path.h"', another version of llmc/kernels/cpu/attention.h without its
//    #include lines, is timed too and compared in part 2 (error, and whether it gives the same
//    bits); e.g. the committed one:
//      git show HEAD:llmc/kernels/cpu/attention.h | grep -v '#include "' > /tmp/old_attention.h
//      g++ ... -DOLD_ATTENTION='"/tmp/old_attention.h"' -x c++ dev/bench/attention_cpu_bench.c ...
//    (-DOLD_HAS_FULL=0 for a version from before the full mode).
#include <omp.h>
#include <time.h>
#include <float.h>
#include <vector>
#include <algorithm>
#include "llmc/core/common.h"
#include "llmc/kernels/cpu/attention.h"
#ifdef OLD_ATTENTION
#undef ATT_CPU_TILE  // the old version's own
#undef ATT_CPU_BUF
#undef ATT_CPU_MAX_HD
namespace old {
#include OLD_ATTENTION
}
#ifndef OLD_HAS_FULL
#define OLD_HAS_FULL 1
#endif
#if OLD_HAS_FULL
#define OLD_FULL(f) old::f
#else
#define OLD_FULL(f) f
#endif
#endif

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static float bits_to_float(uint32_t u) { float f; memcpy(&f, &u, 4); return f; }
static uint32_t float_to_bits(float f) { uint32_t u; memcpy(&u, &f, 4); return u; }

// ---------------------------------------------------------------------------------
// 1. the exp
static int check_exp(int all) {
    const float lo = -87.3365402f, hi = 88.7228394f;  // as in cpu_vexp
    const uint32_t step = all ? 1 : 16;
    const int N = 1 << 16;
    std::vector<float> xs(N), ys(N);
    double max_ulp_true = 0, max_ulp_true_expf = 0;
    float worst_x = 0;
    uint32_t max_ulp_expf = 0;
    size_t n = 0, n_diff = 0, n_le88_diff = 0;
    // negative floats from -0 to lo, then positive from +0 to hi, in batches of N
    for (int sign = 0; sign < 2; sign++) {
        // up to lo, and up to the float below hi (exp(hi) overflows)
        uint64_t first = sign ? 0x80000000u : 0u, last = sign ? float_to_bits(lo) : float_to_bits(hi) - 1;
        for (uint64_t u = first; u <= last;) {
            int m = 0;
            for (; m < N && u <= last; m++, u += step) xs[m] = bits_to_float((uint32_t)u);
            for (int i = 0; i < m; i++) ys[i] = cpu_vexp(xs[i]);  // the vectorised loop
            for (int i = 0; i + 8 <= m; i += 8) {  // the eight-lane version, bit for bit
                const cpu_v8f z8 = cpu_vexp8_le88(cpu_v8_load(&xs[i]));
                for (int j = 0; j < 8; j++) n_le88_diff += xs[i + j] <= 88.0f && float_to_bits(z8[j]) != float_to_bits(ys[i + j]);
            }
            for (int i = 0; i < m; i++) {
                float e = expf(xs[i]);
                double t = exp((double)xs[i]);
                double ulp = ldexp(1.0, ilogb(t) - 23);  // ulp of the float nearest t
                double et = fabs((double)ys[i] - t) / ulp, ee = fabs((double)e - t) / ulp;
                if (et > max_ulp_true) { max_ulp_true = et; worst_x = xs[i]; }
                if (ee > max_ulp_true_expf) max_ulp_true_expf = ee;
                uint32_t d = float_to_bits(ys[i]) > float_to_bits(e) ? float_to_bits(ys[i]) - float_to_bits(e)
                                                                     : float_to_bits(e) - float_to_bits(ys[i]);
                if (d > max_ulp_expf) max_ulp_expf = d;
                n_diff += d != 0;
                n++;
            }
        }
    }
    printf("exp: %zu floats in [%.4f, %.4f)%s: cpu_vexp vs expf: at most %u ulp apart (%.2f%% differ); "
           "vs exp in double: max %.3f ulp (at x = %.8g), expf's own: %.3f ulp\n",
           n, lo, hi, all ? " (all)" : " (every 16th)", max_ulp_expf, 100.0 * n_diff / n, max_ulp_true, worst_x,
           max_ulp_true_expf);
    struct { float x; const char* what; } edge[] = {{-INFINITY, "-inf"}, {-1000.0f, "-1000"}, {-88.0f, "-88 (expf: denormal)"},
                                                  {-87.3365479f, "-87.3365479 (expf: denormal)"}, {lo, "-87.3365402"},
                                                  {-0.0f, "-0"}, {0.0f, "0"}, {1.0f, "1"}, {88.5f, "88.5"},
                                                  {hi, "88.7228394"}, {88.7228470f, "88.722847"}, {100.0f, "100"},
                                                  {INFINITY, "inf"}, {NAN, "nan"}};
    int bad = 0;
    for (auto& c : edge) {
        float y = cpu_vexp(c.x);
        printf("  exp(%s) = %.9g (expf: %.9g)\n", c.what, y, expf(c.x));
    }
    bad += cpu_vexp(-INFINITY) != 0.0f || cpu_vexp(-1000.0f) != 0.0f || cpu_vexp(-88.0f) != 0.0f;
    bad += cpu_vexp(0.0f) != 1.0f || cpu_vexp(-0.0f) != 1.0f;
    bad += !(cpu_vexp(INFINITY) == INFINITY) || !(cpu_vexp(NAN) != cpu_vexp(NAN));
    bad += max_ulp_expf > 1 || cpu_vexp(lo) < FLT_MIN || cpu_vexp(-87.3365479f) != 0.0f;
    printf("cpu_vexp8_le88 (eight lanes) vs cpu_vexp: %zu of the floats <= 88 differ\n", n_le88_diff);
    bad += n_le88_diff != 0;
    {
        const cpu_v8f e = cpu_vexp8_le88(cpu_v8f{-INFINITY, -1000.0f, -88.0f, -87.3365479f, -0.0f, 0.0f, 88.0f, NAN});
        bad += e[0] != 0.0f || e[1] != 0.0f || e[2] != 0.0f || e[3] != 0.0f || e[4] != 1.0f || e[5] != 1.0f ||
               e[6] != cpu_vexp(88.0f) || !(e[7] != e[7]);
    }
    printf("%s exp\n", bad ? "FAIL" : "PASS");
    return bad;
}

// cpu_vtanh (llmc/kernels/cpu/vmath.h), as check_exp: ulps against tanhf and against tanh in double
static int check_tanh(void) {
    const int N = 1 << 16;
    std::vector<float> xs(N), ys(N);
    double max_ulp_true = 0, max_ulp_true_tanhf = 0;
    float worst_x = 0;
    uint32_t max_ulp_tanhf = 0;
    size_t n = 0;
    for (int sign = 0; sign < 2; sign++) {
        uint64_t first = sign ? 0x80000000u : 0u, last = float_to_bits(sign ? -12.0f : 12.0f);
        for (uint64_t u = first; u <= last;) {
            int m = 0;
            for (; m < N && u <= last; m++, u++) xs[m] = bits_to_float((uint32_t)u);
            for (int i = 0; i < m; i++) ys[i] = cpu_vtanh(xs[i]);  // the vectorised loop
            for (int i = 0; i < m; i++) {
                float e = tanhf(xs[i]);
                double t = tanh((double)xs[i]);
                if (t == 0.0) { max_ulp_tanhf = ys[i] != 0.0f ? 1000 : max_ulp_tanhf; continue; }
                double ulp = ldexp(1.0, ilogb(t) - 23);
                double et = fabs((double)ys[i] - t) / ulp, ee = fabs((double)e - t) / ulp;
                if (et > max_ulp_true) { max_ulp_true = et; worst_x = xs[i]; }
                if (ee > max_ulp_true_tanhf) max_ulp_true_tanhf = ee;
                uint32_t d = float_to_bits(ys[i]) > float_to_bits(e) ? float_to_bits(ys[i]) - float_to_bits(e)
                                                                     : float_to_bits(e) - float_to_bits(ys[i]);
                if (d > max_ulp_tanhf) max_ulp_tanhf = d;
                n++;
            }
        }
    }
    printf("tanh: %zu floats in [-12, 12]: cpu_vtanh vs tanhf: at most %u ulp apart; vs tanh in double: max %.3f ulp "
           "(at x = %.8g), tanhf's own: %.3f ulp\n", n, max_ulp_tanhf, max_ulp_true, worst_x, max_ulp_true_tanhf);
    int bad = max_ulp_true > 4.0;
    bad += cpu_vtanh(INFINITY) != 1.0f || cpu_vtanh(-INFINITY) != -1.0f || cpu_vtanh(0.0f) != 0.0f;
    bad += !signbit(cpu_vtanh(-0.0f)) || !(cpu_vtanh(NAN) != cpu_vtanh(NAN)) || cpu_vtanh(100.0f) != 1.0f;
    printf("%s tanh (at most 4 ulp from the exact tanh; edges +-inf, +-0, NaN, 100)\n", bad ? "FAIL" : "PASS");
    return bad;
}

// ---------------------------------------------------------------------------------
// 2. against double precision
struct Shape { int B, T, H, KV, hd; };

static void ref_attention(const Shape& a, bool causal, const float* q, const float* k, const float* v, const float* dout,
                          std::vector<double>& out, std::vector<double>& lse, std::vector<double>& dq,
                          std::vector<double>& dk, std::vector<double>& dv) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd, group = H / KV;
    const double scale = 1.0 / sqrt((double)hd);
    out.assign((size_t)B * T * H * hd, 0); dq.assign(out.size(), 0);
    dk.assign((size_t)B * T * KV * hd, 0); dv.assign(dk.size(), 0); lse.assign((size_t)B * H * T, 0);
    std::vector<double> p(T), dp(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                size_t qi = (((size_t)b * T + t) * H + h) * hd;
                const int nu = causal ? t + 1 : T;  // the keys row t sees
                double m = -INFINITY;
                for (int u = 0; u < nu; u++) {
                    const float* ku = k + (((size_t)b * T + u) * KV + kvh) * hd;
                    double s = 0;
                    for (int d = 0; d < hd; d++) s += (double)q[qi + d] * ku[d];
                    p[u] = s * scale;
                    m = std::max(m, p[u]);
                }
                double l = 0;
                for (int u = 0; u < nu; u++) { p[u] = exp(p[u] - m); l += p[u]; }
                for (int u = 0; u < nu; u++) p[u] /= l;
                lse[((size_t)b * H + h) * T + t] = m + log(l);
                for (int d = 0; d < hd; d++) {
                    double o = 0;
                    for (int u = 0; u < nu; u++) o += p[u] * v[(((size_t)b * T + u) * KV + kvh) * hd + d];
                    out[qi + d] = o;
                }
                double delta = 0;
                for (int u = 0; u < nu; u++) {
                    const float* vu = v + (((size_t)b * T + u) * KV + kvh) * hd;
                    dp[u] = 0;
                    for (int d = 0; d < hd; d++) dp[u] += (double)dout[qi + d] * vu[d];
                    delta += p[u] * dp[u];
                }
                for (int u = 0; u < nu; u++) {
                    size_t ki = (((size_t)b * T + u) * KV + kvh) * hd;
                    double ds = p[u] * (dp[u] - delta) * scale;
                    for (int d = 0; d < hd; d++) {
                        dq[qi + d] += ds * k[ki + d];
                        dk[ki + d] += ds * q[qi + d];
                        dv[ki + d] += p[u] * dout[qi + d];
                    }
                }
            }
}

static double rel_err(const std::vector<float>& x, const std::vector<double>& r) {
    double mx = 0, me = 0;
    for (size_t i = 0; i < x.size(); i++) { mx = std::max(mx, fabs(r[i])); me = std::max(me, fabs(x[i] - r[i])); }
    return mx > 0 ? me / mx : me;
}

static void fill(std::vector<float>& x, unsigned& s, float amp) {
    for (auto& e : x) { s = s * 1664525u + 1013904223u; e = amp * ((float)(s >> 8) / 16777216.0f * 2.0f - 1.0f); }
}

typedef void (*fwd_fn)(floatX*, float*, const floatX*, const floatX*, const floatX*, int, int, int, int, int, stream_t);
typedef void (*bwd_fn)(floatX*, floatX*, floatX*, const floatX*, const floatX*, const floatX*, const floatX*, const floatX*,
                       const float*, int, int, int, int, int, stream_t);

struct Run { std::vector<float> out, lse, dq, dk, dv; };
static Run run(fwd_fn f, bwd_fn g, const Shape& a, const std::vector<float>& q, const std::vector<float>& k,
               const std::vector<float>& v, const std::vector<float>& dout) {
    Run r;
    r.out.assign(q.size(), 0); r.lse.assign((size_t)a.B * a.H * a.T, 0);
    r.dq.assign(q.size(), 0); r.dk.assign(k.size(), 0); r.dv.assign(k.size(), 0);
    f(r.out.data(), r.lse.data(), q.data(), k.data(), v.data(), a.B, a.T, a.H, a.KV, a.hd, 0);
    g(r.dq.data(), r.dk.data(), r.dv.data(), dout.data(), q.data(), k.data(), v.data(), r.out.data(), r.lse.data(), a.B,
      a.T, a.H, a.KV, a.hd, 0);
    return r;
}
static bool same(const Run& x, const Run& y) {
    return x.out == y.out && x.lse == y.lse && x.dq == y.dq && x.dk == y.dk && x.dv == y.dv;
}

static int check_accuracy(bool causal) {
    const fwd_fn fwd = causal ? attention_forward : attention_full_forward;
    const bwd_fn bwd = causal ? attention_backward : attention_full_backward;
    const Shape shapes[] = {{2, 7, 4, 2, 6}, {1, 9, 6, 1, 8}, {1, 16, 4, 4, 12}, {2, 200, 8, 4, 8},
                            {1, 300, 6, 6, 48}, {1, 37, 2, 2, 130}, {1, 1, 1, 1, 2}, {1, 129, 2, 1, 64},
                            {2, 150, 4, 4, 16}, {1, 260, 4, 2, 32}, {1, 70, 2, 2, 65}, {1, 33, 3, 1, 1024}};
    int bad = 0;
    for (const Shape& a : shapes) {
        unsigned s = 1234 + a.T;
        std::vector<float> q((size_t)a.B * a.T * a.H * a.hd), k((size_t)a.B * a.T * a.KV * a.hd), v(k.size()), dout(q.size());
        fill(q, s, 3.0f); fill(k, s, 3.0f); fill(v, s, 1.0f); fill(dout, s, 1.0f);
        std::vector<double> ro, rl, rq, rk, rv;
        ref_attention(a, causal, q.data(), k.data(), v.data(), dout.data(), ro, rl, rq, rk, rv);
        Run n1 = run(fwd, bwd, a, q, k, v, dout);
        Run n2 = run(fwd, bwd, a, q, k, v, dout);
        int nt = omp_get_max_threads();
        omp_set_num_threads(1);
        Run n3 = run(fwd, bwd, a, q, k, v, dout);
        omp_set_num_threads(nt);
        double e[5] = {rel_err(n1.out, ro), rel_err(n1.lse, rl), rel_err(n1.dq, rq), rel_err(n1.dk, rk), rel_err(n1.dv, rv)};
        double worst = *std::max_element(e, e + 5);
        bool det = same(n1, n2) && same(n1, n3);
        printf("%s B=%d T=%d H=%d KV=%d hd=%d: error / max|ref| out %.1e lse %.1e dq %.1e dk %.1e dv %.1e; "
               "bitwise identical twice and with 1 vs %d threads: %s",
               causal ? "causal" : "full", a.B, a.T, a.H, a.KV, a.hd, e[0], e[1], e[2], e[3], e[4], nt, det ? "yes" : "NO");
#ifdef OLD_ATTENTION
        if (causal || OLD_HAS_FULL) {  // -DOLD_HAS_FULL=0: the old version predates the full mode
            Run o = run(causal ? old::attention_forward : OLD_FULL(attention_full_forward),
                        causal ? old::attention_backward : OLD_FULL(attention_full_backward), a, q, k, v, dout);
            double eo[5] = {rel_err(o.out, ro), rel_err(o.lse, rl), rel_err(o.dq, rq), rel_err(o.dk, rk), rel_err(o.dv, rv)};
            printf("; old: worst %.1e, bitwise the same as new: %s", *std::max_element(eo, eo + 5), same(o, n1) ? "yes" : "NO");
        }
#endif
        printf("\n");
        bad += worst > 2e-5 || !det;
    }
    printf("%s accuracy and determinism\n", bad ? "FAIL" : "PASS");
    return bad;
}

// ---------------------------------------------------------------------------------
// 4. speed
static double median(std::vector<double> x) { std::sort(x.begin(), x.end()); return x[x.size() / 2]; }
static double minimum(const std::vector<double>& x) { return *std::min_element(x.begin(), x.end()); }

static void time_shape(const char* name, const Shape& a, int reps, bool causal) {
    unsigned s = 99;
    std::vector<float> q((size_t)a.B * a.T * a.H * a.hd), k((size_t)a.B * a.T * a.KV * a.hd), v(k.size()), dout(q.size());
    fill(q, s, 2.0f); fill(k, s, 2.0f); fill(v, s, 1.0f); fill(dout, s, 1.0f);
    std::vector<float> out(q.size()), lse((size_t)a.B * a.H * a.T), dq(q.size()), dk(k.size()), dv(k.size());
    struct Impl { const char* who; fwd_fn f; bwd_fn g; };
    std::vector<Impl> impls = {causal ? Impl{"new", attention_forward, attention_backward}
                                      : Impl{"new, full", attention_full_forward, attention_full_backward}};
#ifdef OLD_ATTENTION
    if (causal) impls.push_back({"old", old::attention_forward, old::attention_backward});
    else if (OLD_HAS_FULL) impls.push_back({"old, full", OLD_FULL(attention_full_forward), OLD_FULL(attention_full_backward)});
#endif
    for (auto& im : impls) {
        std::vector<double> tf, tb;
        for (int r = 0; r <= reps; r++) {  // the first call warms up
            double t0 = now();
            im.f(out.data(), lse.data(), q.data(), k.data(), v.data(), a.B, a.T, a.H, a.KV, a.hd, 0);
            double t1 = now();
            im.g(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), a.B,
                 a.T, a.H, a.KV, a.hd, 0);
            double t2 = now();
            if (r) { tf.push_back(t1 - t0); tb.push_back(t2 - t1); }
        }
        printf("%s B=%d T=%d H=%d KV=%d hd=%d, %d threads, %s: forward %.2f ms, backward %.2f ms (median of %d; "
               "min %.2f, %.2f)\n", name, a.B, a.T, a.H, a.KV, a.hd, omp_get_max_threads(), im.who, 1e3 * median(tf),
               1e3 * median(tb), reps, 1e3 * minimum(tf), 1e3 * minimum(tb));
    }
}

int main(int argc, char** argv) {
    int all = 0, reps = 7, time_only = 0, wide = 0;
    bool causal = true;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--exp-all")) all = 1;
        else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--time-only")) time_only = 1;  // part 4 alone (for a profiler)
        else if (!strcmp(argv[i], "--full")) causal = false;
        else if (!strcmp(argv[i], "--wide")) wide = 1;  // part 4 on head dims 32 and 64 and T = 512 too
        else if (!strcmp(argv[i], "--vtanh")) return check_tanh();
        else { fprintf(stderr, "usage: attention_cpu_bench [--exp-all] [--reps N] [--time-only] [--full] [--wide] [--vtanh]\n"); return 2; }
    }
    if (reps < 1) reps = 1;
    int bad = 0;
    if (!time_only) {
        bad += check_exp(all);
        bad += check_accuracy(causal);
    }
    time_shape("stories260K", Shape{32, 256, 8, 4, 8}, reps, causal);
    time_shape("stories15M", Shape{8, 256, 6, 6, 48}, reps, causal);
    time_shape("dit-tiny", Shape{16, 256, 4, 4, 16}, reps, causal);
    if (wide) {  // the other small head dims
        time_shape("hd32", Shape{16, 256, 4, 4, 32}, reps, causal);
        time_shape("hd64", Shape{8, 256, 4, 4, 64}, reps, causal);
        time_shape("stories260K T=512", Shape{16, 512, 8, 4, 8}, reps, causal);
    }
    return bad ? 1 : 0;
}
