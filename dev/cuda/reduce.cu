/*
Ladder for llmc/kernels/reduce.cuh: acc[0] += sum of x[0..n) (the per-token losses of a
micro-step, summed on the device so that the host reads one float per step).
  version 1: one block of 1024 threads, strided double sums, a shared-memory tree
  version 2: 64 blocks x 256 threads into double partials, one warp adds them in a
             fixed order (llmc); the CPU twin (llmc/kernels/cpu/reduce.h) follows the same
             order, so the two must agree bit for bit
Both are deterministic. Validated on random data at odd sizes (out starts at 1.5, so
the accumulation is checked too), against the twin and against a long-double sum,
and run twice (bitwise the same).
*/
#include "ladder.h"
#include "../../llmc/kernels/reduce.cuh"

#define V1_THREADS 1024
__global__ void __launch_bounds__(V1_THREADS) sum_v1_kernel(float* acc, const float* x, size_t n) {
    __shared__ double red[V1_THREADS];
    double a = 0.0;
    for (size_t i = threadIdx.x; i < n; i += V1_THREADS) a += (double)x[i];
    red[threadIdx.x] = a;
    __syncthreads();
    for (int half = V1_THREADS / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) acc[0] += (float)red[0];
}

static void sum(int version, float* acc, const float* x, size_t n) {
    if (version == 2) { sum_accumulate(acc, x, n, 0); return; }
    if (n == 0) return;
    sum_v1_kernel<<<1, V1_THREADS>>>(acc, x, n);
    cudaCheck(cudaGetLastError());
}

static void run_version(int version, size_t n, uint64_t seed) {
    std::vector<float> x = rand_f32(n, -3.0f, 7.0f, seed);
    float* d_x = upload_f(x);
    const std::vector<float> acc0 = {1.5f};
    float* d_acc = upload_f(acc0);
    std::vector<float> r = acc0;
    ref_sum_accumulate(r.data(), x.data(), n);
    long double s = acc0[0], sa = fabsl((long double)acc0[0]);
    for (float v : x) { s += v; sa += fabsl((long double)v); }
    printf("  v%d n=%zu (acc starts at 1.5)\n", version, n);
    sum(version, d_acc, d_x, n);
    std::vector<float> got = download_f(d_acc, 1);
    // Every version sums in double (error ~ n 2^-53 sum|x|, negligible) and then rounds
    // the total to float and adds it to acc: two float roundings, each within 2^-24 of
    // a magnitude at most |acc0| + sum|x|; atol twice that.
    double atol = ldexp(1.0, -23) * (double)sa;
    check("sum vs long double", got, std::vector<float>{(float)s}, atol, 0.0);
    check("sum vs twin", got, r, atol, 0.0);
    if (version == 2) check("sum = twin, exact", got, r, 0.0, 0.0);  // the same order by construction
    upload_f_to(d_acc, acc0);
    sum(version, d_acc, d_x, n);
    check_same("sum", download_f(d_acc, 1), got);
    dev_free(d_x); dev_free(d_acc);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "reduce", 2);
    const size_t sizes[] = {1, 1000, 65536, ((size_t)1 << 20) + 3};
    for (int version = 1; version <= 2; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, version == 1 ? "one block of 1024 threads" : "64 blocks, fixed-order final warp (llmc)");
        uint64_t seed = 1100;
        for (size_t n : sizes) run_version(version, n, seed++);
        if (ladder_quick()) continue;
        // a micro-step's B*T losses (8 x 256, 64 x 1024), then a large n for bandwidth
        const size_t bn[] = {2048, 65536, (size_t)1 << 28};
        float* d_acc = upload_f(std::vector<float>{0.0f});
        for (size_t n : bn) {
            float* d_x = (float*)dev_malloc(n * sizeof(float));
            cudaCheck(cudaMemset(d_x, 0, n * sizeof(float)));
            float t = bench_ms([&] { sum(version, d_acc, d_x, n); }, 50);
            printf("  v%d bench n=%zu: %.2f us (%.0f GB/s)\n", version, n, t * 1e3, n * sizeof(float) / t * 1e-6);
            dev_free(d_x);
        }
        dev_free(d_acc);
    }
    return ladder_finish("reduce");
}
