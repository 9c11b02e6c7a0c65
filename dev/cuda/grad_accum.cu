/*
Ladder for llmc/kernels/grad_accum.cuh (fp32 gradient accumulation across micro-steps).
  version 1: one thread per element, scalar loads and stores
  version 2: 16-byte vectors of grad (8 bf16 or 4 fp32) with the matching 32 or 16
             bytes of acc after a scalar head that aligns both, scalar tail, scalar
             fallback when no head aligns both (llmc)
Both do the same fp32 addition per element, so they must agree bit for bit with each
other and with the CPU twin (llmc/kernels/cpu/grad_accum.h): acc exactly, the stored gradient
exactly equal to the twin's fp32 value rounded once to floatX. Validated on random data
at odd sizes and offsets, as a chain of micro-steps (last = 0, 0, then 1), with every
intermediate gradient buffer required to be zero.
Memory-bound: 12 bytes per element in bf16 (grad read and written, acc read and
written), 16 in fp32; the benchmark prints the achieved GB/s on that count.
*/
#include "ladder.h"
#include "../../llmc/kernels/grad_accum.cuh"

__global__ void grad_accumulate_v1_kernel(float* acc, floatX* grad, size_t n, int last) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float a = acc[i] + (float)grad[i];
        if (last) { grad[i] = (floatX)a; acc[i] = 0.0f; }
        else { acc[i] = a; grad[i] = (floatX)0.0f; }
    }
}

static void accumulate(int version, float* acc, floatX* grad, size_t n, int last) {
    if (version == 2) { grad_accumulate(acc, grad, n, last, 0); return; }
    if (n == 0) return;
    size_t blocks = ceil_div(n, 256);
    if (blocks > 65536) blocks = 65536;
    grad_accumulate_v1_kernel<<<(unsigned)blocks, 256>>>(acc, grad, n, last);
    cudaCheck(cudaGetLastError());
}

static void run_version(int version, size_t n, int acc_off, int grad_off, uint64_t seed) {
    const int calls = 3;
    std::vector<float> acc0 = rand_f32(n + acc_off, -4.0f, 4.0f, seed);
    float* d_acc = upload_f(acc0);
    floatX* d_g = (floatX*)dev_malloc((n + grad_off) * sizeof(floatX));
    std::vector<float> r_acc(acc0.begin() + acc_off, acc0.end()), r_g;
    printf("  v%d n=%zu acc+%d grad+%d calls=%d\n", version, n, acc_off, grad_off, calls);
    for (int k = 0; k < calls; k++) {
        std::vector<float> g = rand_floatX(n + grad_off, -1.0f, 1.0f, seed + 1 + k);
        upload_x_to(d_g, g);
        r_g.assign(g.begin() + grad_off, g.end());
        int last = k == calls - 1;
        ref_grad_accumulate(r_acc.data(), r_g.data(), n, last);
        accumulate(version, d_acc + acc_off, d_g + grad_off, n, last);
        // zero after a micro-step that is not the last: the twin says 0 exactly
        if (!last) check("grad zeroed", download_x(d_g + grad_off, n), r_g, 0.0, 0.0);
    }
    // Tolerance 0: the same single fp32 addition per element in the same order as the
    // twin (no multiplication, so no FMA contraction can differ); grad is that fp32 value
    // rounded once to floatX, which the reference gets by rounding the twin's value.
    std::vector<float> got_g = download_x(d_g + grad_off, n);
    check("acc (zeroed by last)", download_f(d_acc + acc_off, n), r_acc, 0.0, 0.0);
    check("grad = round(sum)", got_g, round_all(r_g), 0.0, 0.0);
    dev_free(d_acc); dev_free(d_g);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "grad_accum", 2);
    const size_t sizes[] = {1, 61, 7 * 61, 1000003};  // n = 0: dev/emu/harness.cpp
    const int offs[][2] = {{0, 0}, {3, 3}, {0, 1}};  // aligned; a common head; no common alignment
    for (int version = 1; version <= 2; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, version == 1 ? "scalar, thread per element" : "16-byte vectors, scalar head/tail (llmc)");
        uint64_t seed = 900;
        for (size_t n : sizes)
            for (auto& o : offs) { run_version(version, n, o[0], o[1], seed); seed += 10; }
        if (ladder_quick()) continue;
        // 1.24e9 elements: the parameter count of a 1.24B model (7.4 GB in bf16);
        // fewer when the device has not the memory
        size_t n = 1240000000;
        float* acc = NULL;
        floatX* g = NULL;
        while (n >= ((size_t)1 << 24)) {
            if (cudaMalloc(&acc, n * sizeof(float)) == cudaSuccess) {
                if (cudaMalloc(&g, n * sizeof(floatX)) == cudaSuccess) break;
                cudaCheck(cudaFree(acc));
                acc = NULL;
            }
            cudaGetLastError();
            n /= 2;
        }
        if (!g) { printf("  (skipped the benchmark: not enough device memory)\n"); continue; }
        // the data do not change the traffic: acc 0, grad a finite pattern (0x3c3c...)
        cudaCheck(cudaMemset(acc, 0, n * sizeof(float)));
        cudaCheck(cudaMemset(g, 0x3c, n * sizeof(floatX)));
        double bytes = (double)n * (2 * sizeof(floatX) + 2 * sizeof(float));
        float t0 = bench_ms([&] { accumulate(version, acc, g, n, 0); }, 10);
        float t1 = bench_ms([&] { accumulate(version, acc, g, n, 1); }, 10);
        printf("  v%d bench n=%zu: last=0 %.3f ms (%.0f GB/s), last=1 %.3f ms (%.0f GB/s)\n", version, n, t0,
               bytes / t0 * 1e-6, t1, bytes / t1 * 1e-6);
        cudaCheck(cudaFree(acc)); cudaCheck(cudaFree(g));
    }
    return ladder_finish("grad_accum");
}
