/*
AdamW update and the squared global gradient norm. CPU twin: llmc/kernels/cpu/adamw.h.

adamw_update: the formula of torch.optim.AdamW (decoupled weight decay, bias
correction, eps added after the bias-corrected sqrt), exactly as the CPU twin
writes it; one thread per element, grid-stride with size_t indices. The bias
corrections are computed on the host, as in the twin (adamw_bias_terms). When master != NULL (bf16
build) the fp32 master copy is updated and the parameter is written rounded to
nearest; otherwise the parameter itself is the fp32 value.

global_norm_squared: out[0] += sum of g^2, deterministic. GNORM_BLOCKS blocks (a
constant, not the SM count) each walk a fixed grid-stride slice in double and
reduce it in a fixed tree order, writing one partial to a static __device__
array; then one warp adds the partials in a fixed order and adds the total (as
float) to out[0]. n may be anything up to 2^40 and beyond (size_t). The static
array means two calls must not run concurrently on different streams. The tree and the
final warp are those of sum_accumulate (reduce_partials, reduce_final).
*/
#pragma once
#include "../core/common.h"
#include "reduce.cuh"  // reduce_partials, reduce_final

// One element of AdamW: p the parameter (its fp32 master where the build has one), g
// the scaled gradient, m and v its moments; returns the new p, m and v (by value: the
// caller stores them, so no pointer into device memory crosses a call). Shared
// by the kernel and --offload-optim's update on the CPU (llmc/parallel/host_optimizer.h),
// and every multiply-add is an explicit fmaf: left to themselves, nvcc contracts the
// kernel's and the host compiler its own way, and the two results differ in the last
// bits. Division and sqrtf are IEEE-rounded on both (no --use_fast_math).
typedef struct { float p, m, v; } AdamwElement;
__host__ __device__ static inline AdamwElement adamw_element(float p, float g, float m, float v, float keep, float beta1,
                                                             float beta2, float eps, float step_size, float bc2_sqrt) {
    AdamwElement r;
    r.m = fmaf(beta1, m, (1.0f - beta1) * g);
    r.v = fmaf(beta2, v, (1.0f - beta2) * g * g);
    r.p = fmaf(p, keep, -(step_size * r.m / (sqrtf(r.v) / bc2_sqrt + eps)));
    return r;
}

__global__ void __launch_bounds__(256, 8) adamw_kernel(floatX* param, float* master, const floatX* grad, float* m, float* v, size_t n, float lr,
                             float beta1, float beta2, float eps, float weight_decay, float grad_scale,
                             float step_size, float bc2_sqrt) {
    float keep = fmaf(-lr, weight_decay, 1.0f);  // 1 - lr * weight_decay
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        AdamwElement e = adamw_element(master ? master[i] : (float)param[i], (float)grad[i] * grad_scale, m[i], v[i], keep,
                                       beta1, beta2, eps, step_size, bc2_sqrt);
        m[i] = e.m;
        v[i] = e.v;
        if (master) master[i] = e.p;
        param[i] = (floatX)e.p;  // round to nearest (bf16) or exact (fp32)
    }
}

// the bias corrections of step t, on the host: the step size lr / (1 - beta1^t) and sqrt(1 - beta2^t)
static inline void adamw_bias_terms(float lr, float beta1, float beta2, int t, float* step_size, float* bc2_sqrt) {
    *step_size = lr / (1.0f - powf(beta1, (float)t));
    *bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
}

static inline void adamw_update(floatX* param, float* master, const floatX* grad, float* m, float* v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                         stream_t s) {
    if (n == 0) return;
    float step_size, bc2_sqrt;
    adamw_bias_terms(lr, beta1, beta2, t, &step_size, &bc2_sqrt);
    const int block = 256;
    size_t blocks = ceil_div(n, block);
    if (blocks > 65536) blocks = 65536;
    adamw_kernel<<<(unsigned)blocks, block, 0, s>>>(param, master, grad, m, v, n, lr, beta1, beta2, eps, weight_decay,
                                                    grad_scale, step_size, bc2_sqrt);
    cudaCheck(cudaGetLastError());
}

#define GNORM_BLOCKS 1024
#define GNORM_THREADS 256
static __device__ double gnorm_partials[GNORM_BLOCKS];

__global__ void __launch_bounds__(GNORM_THREADS) gnorm_partial_kernel(const floatX* g, size_t n) {
    __shared__ double red[GNORM_THREADS];
    reduce_partials<GNORM_BLOCKS, GNORM_THREADS, true>(gnorm_partials, red, g, n);
}

// one warp: lane l sums partials l, l+32, ... in order, then a fixed xor tree
__global__ void gnorm_final_kernel(float* out) { reduce_final<GNORM_BLOCKS>(out, gnorm_partials); }

// out[0] += sum of squares of g
static inline void global_norm_squared(float* out, const floatX* g, size_t n, stream_t s) {
    gnorm_partial_kernel<<<GNORM_BLOCKS, GNORM_THREADS, 0, s>>>(g, n);
    cudaCheck(cudaGetLastError());
    gnorm_final_kernel<<<1, 32, 0, s>>>(out);
    cudaCheck(cudaGetLastError());
}
