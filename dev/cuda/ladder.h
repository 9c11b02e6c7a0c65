/*
Shared helpers of the dev/cuda kernel ladders: random data (rounded to floatX so
that the CPU reference and the GPU see exactly the same inputs), upload and
download, the comparison that prints max abs / rel error and PASS/FAIL, timing
with cudaEvents, and the choice of version from argv[1].

Comparison rule, per element: |got - ref| <= atol + rtol * |ref|, and got finite.
Each ladder picks atol/rtol for its outputs and says why next to the call.
*/
#pragma once
#include <vector>
#include <math.h>
#include "../../llmc/core/common.h"
#include "../../llmc/kernels/device.cuh"
#include "cpu_reference.h"

#if defined(ENABLE_FP32)
#define LADDER_FP32 1
#else
#define LADDER_FP32 0
#endif

// -------- random numbers (splitmix64), deterministic per seed
struct LadderRng {
    uint64_t s;
    explicit LadderRng(uint64_t seed) : s(seed * 0x9E3779B97F4A7C15ull + 12345) {}
    uint64_t next() {
        uint64_t z = (s += 0x9E3779B97F4A7C15ull);
        z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
        z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
        return z ^ (z >> 31);
    }
    float uniform(float lo, float hi) { return lo + (hi - lo) * (float)((next() >> 40) * (1.0 / 16777216.0)); }
    int below(int n) { return (int)(next() % (uint64_t)n); }
};

static inline float round_floatX(float x) { return (float)(floatX)x; }

// n uniform numbers in [lo, hi), rounded to floatX (so bf16-exact in bf16 builds)
static inline std::vector<float> rand_floatX(size_t n, float lo, float hi, uint64_t seed) {
    LadderRng r(seed);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = round_floatX(r.uniform(lo, hi));
    return v;
}
// the same, not rounded (for fp32 buffers: lse, rstd, master weights, optimizer state)
static inline std::vector<float> rand_f32(size_t n, float lo, float hi, uint64_t seed) {
    LadderRng r(seed);
    std::vector<float> v(n);
    for (size_t i = 0; i < n; i++) v[i] = r.uniform(lo, hi);
    return v;
}
static inline std::vector<float> round_all(std::vector<float> v) {
    for (auto& x : v) x = round_floatX(x);
    return v;
}

static inline floatX* upload_x(const std::vector<float>& h) {
    floatX* d = (floatX*)dev_malloc(h.size() * sizeof(floatX));
    dev_upload_floats(d, h.data(), h.size());
    return d;
}
static inline void upload_x_to(floatX* d, const std::vector<float>& h) { dev_upload_floats(d, h.data(), h.size()); }
static inline std::vector<float> download_x(const floatX* d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaDeviceSynchronize());
    dev_download_floats(h.data(), d, n);
    return h;
}
static inline float* upload_f(const std::vector<float>& h) {
    float* d = (float*)dev_malloc(h.size() * sizeof(float));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
    return d;
}
static inline void upload_f_to(float* d, const std::vector<float>& h) {
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(float), cudaMemcpyHostToDevice));
}
static inline std::vector<float> download_f(const float* d, size_t n) {
    std::vector<float> h(n);
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(h.data(), d, n * sizeof(float), cudaMemcpyDeviceToHost));
    return h;
}
static inline int* upload_i(const std::vector<int>& h) {
    int* d = (int*)dev_malloc(h.size() * sizeof(int));
    cudaCheck(cudaMemcpy(d, h.data(), h.size() * sizeof(int), cudaMemcpyHostToDevice));
    return d;
}

static inline double rms_of(const std::vector<float>& v) {
    double s = 0.0;
    for (float x : v) s += (double)x * x;
    return v.empty() ? 0.0 : sqrt(s / v.size());
}

// -------- comparison
static int ladder_failures = 0;

// Returns 1 (and counts a failure) when some element is off or not finite.
static inline int check(const char* what, const std::vector<float>& got, const std::vector<float>& ref, double atol,
                 double rtol) {
    if (got.size() != ref.size()) FAIL("check %s: sizes differ (%zu vs %zu)", what, got.size(), ref.size());
    double max_abs = 0.0, max_rel = 0.0, worst = 0.0;  // worst: max of err / (atol + rtol |ref|)
    size_t bad = 0, first_bad = 0;
    for (size_t i = 0; i < got.size(); i++) {
        double g = got[i], r = ref[i], err = fabs(g - r), tol = atol + rtol * fabs(r);
        bool ok = isfinite(g) && err <= tol;
        if (!isfinite(g)) err = INFINITY;
        if (err > max_abs) max_abs = err;
        double rel = err / (fabs(r) > atol ? fabs(r) : (atol > 0 ? atol : 1e-30));
        if (rel > max_rel) max_rel = rel;
        double ratio = tol > 0 ? err / tol : (err > 0 ? INFINITY : 0.0);
        if (ratio > worst) worst = ratio;
        if (!ok) { if (!bad) first_bad = i; bad++; }
    }
    printf("    %-22s n=%-9zu max abs %.3e  max rel %.3e  (atol %.1e rtol %.1e, worst err/tol %.2f)  %s", what,
           got.size(), max_abs, max_rel, atol, rtol, worst, bad ? "FAIL" : "PASS");
    if (bad) printf("  [%zu bad, first at %zu: got %.6g ref %.6g]", bad, first_bad, got[first_bad], ref[first_bad]);
    printf("\n");
    if (bad) ladder_failures++;
    return bad ? 1 : 0;
}

// bitwise equality (determinism checks)
static inline int check_same(const char* what, const std::vector<float>& a, const std::vector<float>& b) {
    bool same = a.size() == b.size() && memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
    printf("    %-22s bitwise identical on a second run: %s\n", what, same ? "PASS" : "FAIL");
    if (!same) ladder_failures++;
    return same ? 0 : 1;
}

// -------- timing: average milliseconds per call over reps calls, after one warm-up call
template <class F>
static inline float bench_ms(F f, int reps) {
    cudaEvent_t a, b;
    cudaCheck(cudaEventCreate(&a));
    cudaCheck(cudaEventCreate(&b));
    f();
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaEventRecord(a, 0));
    for (int i = 0; i < reps; i++) f();
    cudaCheck(cudaEventRecord(b, 0));
    cudaCheck(cudaEventSynchronize(b));
    cudaCheck(cudaGetLastError());
    float ms = 0.0f;
    cudaCheck(cudaEventElapsedTime(&ms, a, b));
    cudaCheck(cudaEventDestroy(a));
    cudaCheck(cudaEventDestroy(b));
    return ms / reps;
}

// -------- version selection: no argument runs every version; "N" runs version N only
static int ladder_selected = 0;
static inline void ladder_init(int argc, char** argv, const char* name, int n_versions) {
    if (argc > 1) {
        ladder_selected = atoi(argv[1]);
        if (ladder_selected < 1 || ladder_selected > n_versions)
            FAIL("%s: version must be 1..%d (got '%s')", name, n_versions, argv[1]);
    }
    int dev = 0;
    cudaDeviceProp p;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaGetDeviceProperties(&p, dev));
    printf("== %s ladder on %s, %s build%s\n", name, p.name, PRECISION_NAME,
           ladder_selected ? "" : " (all versions; pass N to run version N only)");
}
static inline bool want(int version) { return ladder_selected == 0 || ladder_selected == version; }

// LADDER_QUICK=1 in the environment: validation only (no benchmarks, no multi-GB tests)
static inline bool ladder_quick(void) {
    const char* e = getenv("LADDER_QUICK");
    return e && e[0] && e[0] != '0';
}

static inline int ladder_finish(const char* name) {
    cudaCheck(cudaDeviceSynchronize());
    if (ladder_failures) printf("== %s: %d check(s) FAILED\n", name, ladder_failures);
    else printf("== %s: all checks passed\n", name);
    return ladder_failures ? 1 : 0;
}
