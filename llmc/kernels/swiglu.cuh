/*
SwiGLU, the gated unit of the Llama FFN: g = silu(h1) * h3. CPU twin:
llmc/kernels/cpu/swiglu.h. Elementwise, fp32 math, expf (not the fast intrinsic).
When every pointer is 16-byte aligned, a thread handles 16-byte chunks (8 bf16 or
4 fp32 elements: one load per input and one store per output), grid-stride with
size_t indices, and the n % chunk elements left at the end go one per thread in the
same launch; otherwise every element goes one per thread (any size, any alignment:
the hidden-chunked FFN hands in arbitrary slices). The per-element formula is the
same on both paths, so the results are bitwise the same.
swiglu_backward allows dh1 == dout: each thread reads its elements of dout, h1 and h3
before it writes them in dh1 and dh3.

Predicted gain at llama3-1B, B=4 T=2048 (n = 8192 x 8192 = 67M elements, bf16), H100
SXM at an achievable ~2.9 TB/s. Predicted before the first GPU run; measured on an H200 (docs/results/gpu_h200_2026-11-26.md section 3):
forward 3.94 TB/s (92% of copy), backward 4.25 TB/s (100%), faster than predicted. The prediction:
  forward: 403 MB (h1, h3 read, g written) either way; 2-byte accesses reach perhaps
    60-70% of that bandwidth: ~200 us -> ~140 us with 16-byte accesses.
  backward: 671 MB (dout, h1, h3 read, dh1, dh3 written): ~330 us -> ~230 us.
*/
#pragma once
#include "../core/common.h"

#define SWIGLU_VEC (16 / (int)sizeof(floatX))  // elements per 16-byte chunk
#define SWIGLU_THREADS 256
struct alignas(16) SwChunk { floatX v[SWIGLU_VEC]; };

static __device__ __forceinline__ float swiglu_f(float a, float b) { return a / (1.0f + expf(-a)) * b; }
// d/dh1 and d/dh3 of silu(a) * b, times g
static __device__ __forceinline__ void swiglu_df(float a, float b, float g, float* d1, float* d3) {
    float sig = 1.0f / (1.0f + expf(-a));
    float silu = a * sig;
    *d3 = g * silu;
    *d1 = g * b * sig * (1.0f + a * (1.0f - sig));
}

// vec: chunks [0, n / SWIGLU_VEC) as 16-byte accesses, then the rest one element per thread
__global__ void swiglu_forward_kernel(floatX* out, const floatX* h1, const floatX* h3, size_t n, int vec) {
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t nvec = vec ? n / SWIGLU_VEC : 0;
    for (size_t i = tid; i < nvec; i += stride) {
        SwChunk a = ((const SwChunk*)h1)[i], b = ((const SwChunk*)h3)[i], o;
#pragma unroll
        for (int k = 0; k < SWIGLU_VEC; k++) o.v[k] = (floatX)swiglu_f((float)a.v[k], (float)b.v[k]);
        ((SwChunk*)out)[i] = o;
    }
    for (size_t i = nvec * SWIGLU_VEC + tid; i < n; i += stride) out[i] = (floatX)swiglu_f((float)h1[i], (float)h3[i]);
}

__global__ void swiglu_backward_kernel(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1,
                                       const floatX* h3, size_t n, int vec) {
    size_t tid = (size_t)blockIdx.x * blockDim.x + threadIdx.x, stride = (size_t)gridDim.x * blockDim.x;
    size_t nvec = vec ? n / SWIGLU_VEC : 0;
    for (size_t i = tid; i < nvec; i += stride) {
        SwChunk a = ((const SwChunk*)h1)[i], b = ((const SwChunk*)h3)[i], g = ((const SwChunk*)dout)[i], o1, o3;
#pragma unroll
        for (int k = 0; k < SWIGLU_VEC; k++) {
            float d1, d3;
            swiglu_df((float)a.v[k], (float)b.v[k], (float)g.v[k], &d1, &d3);
            o1.v[k] = (floatX)d1;
            o3.v[k] = (floatX)d3;
        }
        ((SwChunk*)dh3)[i] = o3;
        ((SwChunk*)dh1)[i] = o1;
    }
    for (size_t i = nvec * SWIGLU_VEC + tid; i < n; i += stride) {
        float d1, d3;
        swiglu_df((float)h1[i], (float)h3[i], (float)dout[i], &d1, &d3);
        dh3[i] = (floatX)d3;
        dh1[i] = (floatX)d1;
    }
}

static inline int swiglu_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

// blocks for `units` work items (chunks or elements), grid-stride beyond 65536 blocks
static inline unsigned swiglu_blocks(size_t units, int block) {
    size_t blocks = ceil_div(units ? units : 1, block);
    return (unsigned)(blocks > 65536 ? 65536 : blocks);
}

static inline void swiglu_forward(floatX* out, const floatX* h1, const floatX* h3, size_t n, stream_t s) {
    if (n == 0) return;
    int vec = swiglu_aligned16(out) && swiglu_aligned16(h1) && swiglu_aligned16(h3);
    // the tail (< SWIGLU_VEC elements) needs no blocks of its own
    size_t units = vec ? (n / SWIGLU_VEC > 0 ? n / SWIGLU_VEC : n) : n;
    swiglu_forward_kernel<<<swiglu_blocks(units, SWIGLU_THREADS), SWIGLU_THREADS, 0, s>>>(out, h1, h3, n, vec);
    cudaCheck(cudaGetLastError());
}

// dh1 may alias dout (each element is read before it is written)
static inline void swiglu_backward(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1, const floatX* h3, size_t n,
                                   stream_t s) {
    if (n == 0) return;
    int vec = swiglu_aligned16(dh1) && swiglu_aligned16(dh3) && swiglu_aligned16(dout) && swiglu_aligned16(h1) &&
              swiglu_aligned16(h3);
    size_t units = vec ? (n / SWIGLU_VEC > 0 ? n / SWIGLU_VEC : n) : n;
    swiglu_backward_kernel<<<swiglu_blocks(units, SWIGLU_THREADS), SWIGLU_THREADS, 0, s>>>(dh1, dh3, dout, h1, h3, n, vec);
    cudaCheck(cudaGetLastError());
}
