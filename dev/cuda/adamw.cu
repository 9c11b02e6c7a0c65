/*
Ladder for llmc/kernels/adamw.cuh.
  version 1: adamw_update, one thread per element (llmc); global_norm_squared with a
             fixed grid of 1024 blocks, double partials, one ordered final sum (llmc)
Memory-bound and already one pass over the data, so one rung. Validated against the
CPU twin (llmc/kernels/cpu/adamw.h) on random data: with an fp32 master copy (the bf16
configuration) and, in fp32 builds, also without one; the norm at odd sizes, as an
accumulation (out[0] += ...), run twice for determinism, and at n > 2^31 against
an exactly known sum (size_t indexing).
*/
#include "ladder.h"
#include "../../llmc/kernels/adamw.cuh"

__global__ void fill_kernel(floatX* p, size_t n, float val) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        p[i] = (floatX)val;
}

static void run_adamw(size_t n, int use_master, int t, uint64_t seed) {
    const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
    std::vector<float> master = rand_f32(n, -1.0f, 1.0f, seed + 1);
    std::vector<float> param = use_master ? round_all(master) : rand_floatX(n, -1.0f, 1.0f, seed + 1);
    std::vector<float> grad = rand_floatX(n, -1.0f, 1.0f, seed + 2);
    std::vector<float> m = rand_f32(n, -0.1f, 0.1f, seed + 3), v = rand_f32(n, 0.0f, 0.01f, seed + 4);
    floatX *d_p = upload_x(param), *d_g = upload_x(grad);
    float *d_master = use_master ? upload_f(master) : NULL, *d_m = upload_f(m), *d_v = upload_f(v);
    std::vector<float> r_p = use_master ? master : param, r_master = master, r_m = m, r_v = v;
    ref_adamw_update(r_p.data(), use_master ? r_master.data() : NULL, grad.data(), r_m.data(), r_v.data(), n, lr, b1, b2,
                     eps, wd, gs, t);
    adamw_update(d_p, d_master, d_g, d_m, d_v, n, lr, b1, b2, eps, wd, gs, t, 0);
    printf("  adamw n=%zu master=%d t=%d\n", n, use_master, t);
    // m, v, master: the same fp32 formula on the same inputs; the kernel rounds each
    // multiply-add once (fmaf), the twin twice: a few ulp of the terms. m = b1 m + (1-b1) g
    // may cancel, so its bound is on the terms, 8 u (|b1 m| + |(1-b1) g|) <= 8 * 2^-24 *
    // (0.09 + 0.05) = 6.7e-8 here (|m| < 0.1, |g| < 0.5 after the scale); v's terms are both
    // positive (rtol 1e-6, atol 1e-12 near 0); master 1e-7.
    check("m", download_f(d_m, n), r_m, 6.7e-8, 1e-6);
    check("v", download_f(d_v, n), r_v, 1e-12, 1e-6);
    if (use_master) check("master", download_f(d_master, n), r_master, 1e-7, 1e-6);
    // param: in bf16 builds the GPU master rounded to nearest, compared with the CPU's
    // unrounded value: <= 2^-8 relative (bf16 has 8 significant bits) plus the few-ulp
    // fp32 difference -> rtol 2^-7; fp32 builds as the master.
    check("param", download_x(d_p, n), r_p, 1e-7, LADDER_FP32 ? 1e-6 : ldexp(1.0, -7));
    dev_free(d_p); dev_free(d_g); dev_free(d_m); dev_free(d_v);
    if (d_master) dev_free(d_master);
}

static void run_norm(size_t n, uint64_t seed) {
    std::vector<float> g = rand_floatX(n, -3.0f, 3.0f, seed);
    floatX* d_g = upload_x(g);
    std::vector<float> out0 = {1.5f}, r_out = out0;
    float* d_out = upload_f(out0);
    ref_global_norm_squared(r_out.data(), g.data(), n);
    global_norm_squared(d_out, d_g, n, 0);
    printf("  global_norm_squared n=%zu (out starts at 1.5)\n", n);
    // both sum the squares in double (different order) and round once to float: the
    // results agree to the float rounding, 2^-24 relative; rtol 1e-6
    std::vector<float> got = download_f(d_out, 1);
    check("norm^2", got, r_out, 0.0, 1e-6);
    upload_f_to(d_out, out0);
    global_norm_squared(d_out, d_g, n, 0);
    check_same("norm^2", download_f(d_out, 1), got);
    dev_free(d_g); dev_free(d_out);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "adamw", 1);
    if (want(1)) {
        printf("version 1: elementwise AdamW, fixed-grid deterministic norm (llmc)\n");
        uint64_t seed = 700;
        const size_t sizes[] = {1, 1001, 100003};
        for (size_t n : sizes) {
            run_adamw(n, 1, 1, seed++);
            run_adamw(n, 1, 7, seed++);
            if (LADDER_FP32) run_adamw(n, 0, 3, seed++);  // params are fp32 themselves
        }
        const size_t nsizes[] = {1, 1000, 262143, 3000001};
        for (size_t n : nsizes) run_norm(n, seed++);

        // n > 2^31: every element 1/16 (exact in bf16), so the sum is n/256 exactly in double
        size_t big = ((size_t)1 << 31) + 12345;
        floatX* d_big = NULL;
        if (ladder_quick()) {
            printf("  (LADDER_QUICK: skipped the n > 2^31 norm test and the benchmarks)\n");
            return ladder_finish("adamw");
        }
        if (cudaMalloc(&d_big, big * sizeof(floatX)) == cudaSuccess) {
            fill_kernel<<<4096, 256>>>(d_big, big, 0.0625f);
            cudaCheck(cudaGetLastError());
            float* d_out = upload_f(std::vector<float>{0.0f});
            global_norm_squared(d_out, d_big, big, 0);
            std::vector<float> expect = {(float)((double)big / 256.0)};
            printf("  global_norm_squared n=%zu (> 2^31, constant data)\n", big);
            check("norm^2 large n", download_f(d_out, 1), expect, 0.0, 1e-7);
            float t = bench_ms([&] { global_norm_squared(d_out, d_big, big, 0); }, 5);
            printf("  v1 bench global_norm_squared n=%zu: %.3f ms (%.0f GB/s)\n", big, t, big * sizeof(floatX) / t * 1e-6);
            dev_free(d_out);
            dev_free(d_big);
        } else {
            cudaGetLastError();
            printf("  (skipped the n > 2^31 norm test: not enough device memory)\n");
        }

        size_t n = (size_t)1 << 26;
        floatX *d_p = upload_x(rand_floatX(n, -1.0f, 1.0f, 1)), *d_g = upload_x(rand_floatX(n, -1.0f, 1.0f, 2));
        float *d_master = upload_f(rand_f32(n, -1.0f, 1.0f, 3)), *d_m = upload_f(rand_f32(n, -0.1f, 0.1f, 4));
        float* d_v = upload_f(rand_f32(n, 0.0f, 0.01f, 5));
        float t = bench_ms([&] { adamw_update(d_p, d_master, d_g, d_m, d_v, n, 1e-3f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 5, 0); }, 10);
        double bytes = (double)n * (2 * sizeof(floatX) + 6 * sizeof(float));  // g read, p written; master, m, v r/w
        printf("  v1 bench adamw_update n=%zu (with master): %.3f ms (%.0f GB/s)\n", n, t, bytes / t * 1e-6);
        dev_free(d_p); dev_free(d_g); dev_free(d_master); dev_free(d_m); dev_free(d_v);
    }
    return ladder_finish("adamw");
}
