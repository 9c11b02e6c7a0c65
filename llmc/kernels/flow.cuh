/*
Rectified flow (docs/design.md 9.3): the noisy input and the velocity target of a training
step, and the loss with its gradient. CPU twin: llmc/kernels/cpu/flow.h.
  flow_prepare: per sample b (per_sample values each) xt = (1 - t_b) x0 + t_b noise and
    v = noise - x0. Elementwise, grid-stride, fp32 math, one rounding per output; each
    thread reads x0 and noise before it writes, so xt may alias x0 and v may alias noise.
  mse_forward_backward: sq[b] = sum over sample b of (pred - target)^2 in fp32, and, when
    dpred != NULL, dpred = 2 dscale (pred - target) (overwritten) in the same pass; the
    trainer's loss is dscale * sum_b sq[b] with dscale = 1 / (values averaged over).
    One block of MSE_THREADS threads per sample: thread k sums elements k, k + 512, ...
    in order, then a warp xor tree and the warps' partials added in warp order: a fixed
    order, so the same bits on every run (no atomics). dpred may alias pred or target
    (each element is read before it is written). One block per sample leaves most SMs
    idle when B is small; dev/cuda/flow.cu has a split version.
*/
#pragma once
#include "../core/common.h"

__global__ void flow_prepare_kernel(floatX* xt, floatX* v, const floatX* x0, const floatX* noise, const float* t,
                                    size_t per_sample, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        float tb = t[i / per_sample];
        float a = (float)x0[i], e = (float)noise[i];
        xt[i] = (floatX)((1.0f - tb) * a + tb * e);
        v[i] = (floatX)(e - a);
    }
}

static inline void flow_prepare(floatX* xt, floatX* v, const floatX* x0, const floatX* noise, const float* t, int B,
                                size_t per_sample, stream_t s) {
    if (B < 0) FAIL("flow_prepare: batch %d", B);
    size_t n = (size_t)B * per_sample;
    if (n == 0) return;
    size_t blocks = ceil_div(n, 256);
    if (blocks > 65536) blocks = 65536;
    flow_prepare_kernel<<<(unsigned)blocks, 256, 0, s>>>(xt, v, x0, noise, t, per_sample, n);
    cudaCheck(cudaGetLastError());
}

#define MSE_THREADS 512

__global__ void __launch_bounds__(MSE_THREADS) mse_kernel(float* sq, floatX* dpred, const floatX* pred,
                                                          const floatX* target, size_t per_sample, float grad_scale) {
    __shared__ float warp_sums[MSE_THREADS / 32];
    size_t base = (size_t)blockIdx.x * per_sample;
    float acc = 0.0f;
    for (size_t j = threadIdx.x; j < per_sample; j += MSE_THREADS) {
        float d = (float)pred[base + j] - (float)target[base + j];
        acc += d * d;
        if (dpred) dpred[base + j] = (floatX)(grad_scale * d);
    }
    for (int off = 16; off > 0; off >>= 1) acc += __shfl_xor_sync(0xffffffffu, acc, off);
    if ((threadIdx.x & 31) == 0) warp_sums[threadIdx.x >> 5] = acc;
    __syncthreads();
    if (threadIdx.x == 0) {
        float total = 0.0f;
        for (int w = 0; w < MSE_THREADS / 32; w++) total += warp_sums[w];
        sq[blockIdx.x] = total;
    }
}

// sq[b] = sum over sample b of (pred - target)^2; dpred = 2 dscale (pred - target) if dpred != NULL
static inline void mse_forward_backward(float* sq, floatX* dpred, const floatX* pred, const floatX* target, int B,
                                        size_t per_sample, float dscale, stream_t s) {
    if (B < 0) FAIL("mse_forward_backward: batch %d", B);
    if (B == 0) return;
    mse_kernel<<<B, MSE_THREADS, 0, s>>>(sq, dpred, pred, target, per_sample, 2.0f * dscale);
    cudaCheck(cudaGetLastError());
}
