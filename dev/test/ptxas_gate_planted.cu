/*
Kernels with one planted defect each, for `dev/test/ptxas_gate.py --planted NVCC` (make
test): the gate must report every defect, each under its rule, and nothing about the
clean kernels, so that its passing on llmc/kernels/*.cuh means something. Compiled to a cubin
only (nvcc -cubin -Xptxas -v), never linked or run. The block sizes and occupancies the
gate checks against are PLANTED_KERNELS in the checker.
*/
#include <cuda_runtime.h>

// clean: a streaming copy, few registers, no frame
__global__ void planted_clean_kernel(float* out, const float* in, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[i] = 2.0f * in[i];
}

// spill: 64 accumulators live across a loop, under __launch_bounds__(256, 8), which caps
// the kernel at 32 registers
__global__ void __launch_bounds__(256, 8) planted_spill_kernel(float* out, const float* in, int n) {
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; j++) acc[j] = in[threadIdx.x + j * 256];
    for (int i = 0; i < n; i++) {
        float x = in[i];
#pragma unroll
        for (int j = 0; j < 64; j++) acc[j] = acc[j] * x + acc[(j + 1) % 64];
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 64; j++) s += acc[j] * (float)j;
    out[threadIdx.x] = s;
}

// stack frame: a local array indexed by a value known only at run time lives in local memory
// (written and read at such indices, so that ptxas cannot turn it into selects)
__global__ void planted_stack_kernel(float* out, const float* in, const int* idx) {
    float buf[32];
#pragma unroll
    for (int j = 0; j < 32; j++) buf[j] = in[threadIdx.x * 32 + j];
    for (int i = 0; i < 4; i++) buf[idx[4 * threadIdx.x + i] & 31] += 1.0f;
    out[threadIdx.x] = buf[idx[threadIdx.x] & 31];
}

// registers: the same 64 accumulators without a cap: far more than the 32 registers that
// the 8 blocks of 256 threads its table entry assumes leave
__global__ void planted_registers_kernel(float* out, const float* in, int n) {
    float acc[64];
#pragma unroll
    for (int j = 0; j < 64; j++) acc[j] = in[threadIdx.x + j * 256];
    for (int i = 0; i < n; i++) {
        float x = in[i];
#pragma unroll
        for (int j = 0; j < 64; j++) acc[j] = acc[j] * x + acc[(j + 1) % 64];
    }
    float s = 0.0f;
#pragma unroll
    for (int j = 0; j < 64; j++) s += acc[j] * (float)j;
    out[threadIdx.x] = s;
}

// dynamic shared memory above 48 KB: planted_smem_kernel is launched with 64 KB and
// never opted in; planted_smem_ok_kernel is, through a helper and a variable, as
// llmc/attention*.cuh do
__global__ void planted_smem_kernel(float* out) {
    extern __shared__ float dyn[];
    dyn[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = dyn[255 - threadIdx.x];
}
__global__ void planted_smem_ok_kernel(float* out) {
    extern __shared__ float dyn_ok[];
    dyn_ok[threadIdx.x] = (float)threadIdx.x;
    __syncthreads();
    out[threadIdx.x] = dyn_ok[255 - threadIdx.x];
}
static void planted_opt_in(const void* kernel, size_t bytes) {
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes);
}

// block size: launched with more threads than its __launch_bounds__
__global__ void __launch_bounds__(128) planted_bounds_kernel(float* out) { out[threadIdx.x] = 1.0f; }

// coverage: a kernel with no table entry, and one never compiled (a template no one instantiates)
__global__ void planted_unlisted_kernel(float* out) { out[threadIdx.x] = 0.0f; }
template <int N> __global__ void planted_uncompiled_kernel(float* out) { out[threadIdx.x] = (float)N; }

void planted_launch(float* out, const float* in, const int* idx, size_t n, cudaStream_t s) {
    const int block = 256;
    planted_clean_kernel<<<64, block, 0, s>>>(out, in, n);
    planted_spill_kernel<<<1, 256, 0, s>>>(out, in, (int)n);
    planted_stack_kernel<<<1, 256, 0, s>>>(out, in, idx);
    planted_registers_kernel<<<1, 256, 0, s>>>(out, in, (int)n);
    planted_smem_kernel<<<1, 256, 64 * 1024, s>>>(out);
    const void* k = (const void*)planted_smem_ok_kernel;
    planted_opt_in(k, 64 * 1024);
    planted_smem_ok_kernel<<<1, 256, 64 * 1024, s>>>(out);
    planted_bounds_kernel<<<1, 256, 0, s>>>(out);
    planted_unlisted_kernel<<<1, 256, 0, s>>>(out);
}
