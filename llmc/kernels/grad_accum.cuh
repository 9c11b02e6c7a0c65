/*
Gradient accumulation in fp32 across the micro-steps of one optimizer step. CPU
twin: llmc/kernels/cpu/grad_accum.h.

Why: with bf16 gradients accumulated in place (beta = 1 in the backward GEMMs), the
running sum is rounded to 8 significant bits after every micro-step, so once it has
grown, a late micro-step's small contribution is partly or wholly lost. Here each
micro-step's bf16 gradient is moved into an fp32 accumulator instead, and the bf16
buffer is zeroed in the same pass, so the next micro-step starts from 0:
  last == 0: acc[i] += (float)grad[i]; grad[i] = 0
  last == 1: grad[i] = (floatX)(acc[i] + (float)grad[i]); acc[i] = 0
The last micro-step rounds the fp32 sum once into grad, which the DP reduction, the
norm and AdamW then read unchanged; the accumulator is left zeroed for the next step.

Elementwise, so bitwise deterministic and bitwise equal to the twin in fp32 (in bf16
the stored gradient is the twin's fp32 value rounded once to nearest). Grid-stride,
size_t indices. 16-byte vectors (8 bf16 or 4 fp32 of grad, with the matching 32 or
16 bytes of acc) where a scalar head of fewer than 16/sizeof(floatX) elements brings
both pointers to 16 bytes; a scalar tail after them. When no head aligns both (acc
and grad offset by element counts that differ modulo the vector width) every
element takes the scalar path. n may be 0.

Cost (a PREDICTION, never measured: no GPU has run this): bytes moved per element
are grad read + acc read + acc written + grad written = 2 + 4 + 4 + 2 = 12 in bf16
(16 in fp32 builds). For 1.24e9 elements (a 1.24B-parameter model) that is 14.9 GB
per call; at ~3 TB/s of achieved H100 HBM bandwidth that predicts ~5 ms per call,
one call per micro-step.

grad_add: dst[i] = (floatX)((float)dst[i] + (float)src[i]), one thread per element,
grid-stride. Where a gradient shard is summed over micro-steps after each one's
reduction (ZeRO-2 and 3) without the fp32 accumulator: the sum rounded per micro-step,
as beta = 1 accumulation in the backward GEMMs rounds it. Memory-bound (6 bytes an
element in bf16) and called on a rank's shard only.
*/
#pragma once
#include "../core/common.h"

#define GRAD_ACCUM_VEC (16 / (int)sizeof(floatX))
struct alignas(16) GradAccumVecX { floatX v[GRAD_ACCUM_VEC]; };

// elements [0, head) and [head + nvec*VEC, n) one at a time; [head, head + nvec*VEC)
// as nvec vectors (acc + head and grad + head are 16-byte aligned)
__global__ void grad_accumulate_kernel(float* acc, floatX* grad, size_t n, size_t head, size_t nvec, int last) {
    const int VEC = GRAD_ACCUM_VEC, F4 = GRAD_ACCUM_VEC / 4;  // float4s of acc per vector
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    GradAccumVecX* gv = (GradAccumVecX*)(grad + head);
    float4* av = (float4*)(acc + head);
    for (size_t v = tid; v < nvec; v += stride) {
        GradAccumVecX g = gv[v];
        float a[GRAD_ACCUM_VEC];
        #pragma unroll
        for (int j = 0; j < F4; j++) {
            float4 t = av[v * F4 + j];
            a[4 * j] = t.x; a[4 * j + 1] = t.y; a[4 * j + 2] = t.z; a[4 * j + 3] = t.w;
        }
        #pragma unroll
        for (int k = 0; k < VEC; k++) a[k] += (float)g.v[k];
        GradAccumVecX go;
        if (last) {
            #pragma unroll
            for (int k = 0; k < VEC; k++) go.v[k] = (floatX)a[k];
            #pragma unroll
            for (int j = 0; j < F4; j++) av[v * F4 + j] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        } else {
            #pragma unroll
            for (int k = 0; k < VEC; k++) go.v[k] = (floatX)0.0f;
            #pragma unroll
            for (int j = 0; j < F4; j++) av[v * F4 + j] = make_float4(a[4 * j], a[4 * j + 1], a[4 * j + 2], a[4 * j + 3]);
        }
        gv[v] = go;
    }
    size_t tail0 = head + nvec * VEC, nscalar = head + (n - tail0);
    for (size_t r = tid; r < nscalar; r += stride) {
        size_t i = r < head ? r : tail0 + (r - head);
        float a = acc[i] + (float)grad[i];
        if (last) { grad[i] = (floatX)a; acc[i] = 0.0f; }
        else { acc[i] = a; grad[i] = (floatX)0.0f; }
    }
}

// last == 0: acc += grad, grad = 0.  last == 1: grad = round(acc + grad), acc = 0.
static inline void grad_accumulate(float* acc, floatX* grad, size_t n, int last, stream_t s) {
    if (n == 0) return;
    const size_t VEC = GRAD_ACCUM_VEC;
    uintptr_t ga = (uintptr_t)grad, aa = (uintptr_t)acc;
    size_t head = ((16 - (ga & 15)) & 15) / sizeof(floatX), nvec = 0;  // elements until grad is 16-byte aligned
    if (head < n && ((aa + head * sizeof(float)) & 15) == 0 && (ga & (sizeof(floatX) - 1)) == 0) nvec = (n - head) / VEC;
    else head = n;  // no common alignment: all scalar
    size_t work = nvec > head + (n - head - nvec * VEC) ? nvec : head + (n - head - nvec * VEC);
    const int block = 256;
    size_t blocks = ceil_div(work, block);
    if (blocks > 65536) blocks = 65536;
    grad_accumulate_kernel<<<(unsigned)blocks, block, 0, s>>>(acc, grad, n, head, nvec, last);
    cudaCheck(cudaGetLastError());
}

__global__ void grad_add_kernel(floatX* dst, const floatX* src, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        dst[i] = (floatX)((float)dst[i] + (float)src[i]);
}

static inline void grad_add(floatX* dst, const floatX* src, size_t n, stream_t s) {
    if (n == 0) return;
    const int block = 256;
    size_t blocks = ceil_div(n, block);
    if (blocks > 65536) blocks = 65536;
    grad_add_kernel<<<(unsigned)blocks, block, 0, s>>>(dst, src, n);
    cudaCheck(cudaGetLastError());
}
