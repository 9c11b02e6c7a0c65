/*
Rotary position embedding, forward and backward. CPU twin: llmc/kernels/cpu/rope.h.
Adjacent pairs (x[2i], x[2i+1]) of each head are rotated by the angle
pos * theta^(-2i/hd) (llama2.c/Meta convention); cos/sin come from a table
[max_seq_len, hd/2] built once at start. x is [B, T, nh, hd].
  rope_qk_forward / rope_qk_backward: q [B, T, H, hd] and k [B, T, KV, hd] in place, in
      one launch (the attention's two tensors share the rows and the table entries);
  rope_forward / rope_backward: one tensor, out of place or in place.

One kernel for both: blockIdx.y (with threadIdx.y) walks the B*T token rows, x the
units of a row, q's first and then k's. A unit is a 16-byte chunk (4 pairs in bf16, 2 in
fp32) when hd is a multiple of the chunk and every pointer is aligned for it (the tables
to the chunk's pairs), else one pair with 2-byte accesses (the test models' odd head
dims, unaligned slices). Indices are 32-bit: a unit's pair within its head is one
modulo per thread, the position t of a row follows the rows by addition (no division per
element, unlike a flat index over the pairs); only a row's element offset is 64-bit, a
multiply. Each thread reads its unit before writing it, so in place is allowed. The
per-pair formula is the same on both paths (bit-equal results). Elementwise: deterministic.

Predicted at llama3-1B (B=4, T=2048, H=32, KV=8, hd=64; bf16) on the H200 (copy rate 4.27
TB/s, docs/results/gpu_h200_2026-11-26.md): a call moves q and k once each way, 2 x (33.6
+ 8.4) = 83.9 MB. One thread per pair with 2-byte accesses and two launches measured 2.30
ms for 32 calls a step (1.17 TB/s, 27% of copy). With 16-byte accesses, swiglu reached
92-100% of copy on the same machine; the table reads here (32 bytes of cos/sin a chunk of
16, hitting L1: one row's 256 bytes are shared by all its heads) should cost a little:
~80-90% of copy, 3.4-3.8 TB/s, ~22-25 us a call, ~0.7-0.8 ms a step (-1.5 ms).
*/
#pragma once
#include <limits.h>
#include "../core/common.h"

#define ROPE_VEC (16 / (int)sizeof(floatX))  // elements per 16-byte chunk
#define ROPE_PAIRS (ROPE_VEC / 2)
#define ROPE_THREADS 256
struct alignas(16) RopeChunk { floatX v[ROPE_VEC]; };
struct alignas(4 * ROPE_PAIRS) RopeTab { float v[ROPE_PAIRS]; };

// P pairs at x (a 16-byte chunk when P = ROPE_PAIRS), rotated into o; c, s: their table entries
template <int P>
__device__ __forceinline__ void rope_unit(floatX* o, const floatX* x, const float* c, const float* s, float sign) {
    float xv[2 * P], cv[P], sv[P];
    if (P == ROPE_PAIRS) {
        RopeChunk a = *(const RopeChunk*)x;
        RopeTab ct = *(const RopeTab*)c, st = *(const RopeTab*)s;
#pragma unroll
        for (int k = 0; k < 2 * P; k++) xv[k] = (float)a.v[k];
#pragma unroll
        for (int k = 0; k < P; k++) { cv[k] = ct.v[k]; sv[k] = st.v[k]; }
    } else {
#pragma unroll
        for (int k = 0; k < 2 * P; k++) xv[k] = (float)x[k];
#pragma unroll
        for (int k = 0; k < P; k++) { cv[k] = c[k]; sv[k] = s[k]; }
    }
    floatX y[2 * P];
#pragma unroll
    for (int k = 0; k < P; k++) {
        float x0 = xv[2 * k], x1 = xv[2 * k + 1], sn = sign * sv[k];
        y[2 * k] = (floatX)(x0 * cv[k] - x1 * sn);
        y[2 * k + 1] = (floatX)(x0 * sn + x1 * cv[k]);
    }
    if (P == ROPE_PAIRS) {
        RopeChunk b;
#pragma unroll
        for (int k = 0; k < 2 * P; k++) b.v[k] = y[k];
        *(RopeChunk*)o = b;
    } else {
#pragma unroll
        for (int k = 0; k < 2 * P; k++) o[k] = y[k];
    }
}

// nq, nk: units of q and k a row (k may have none); uph: units a head; half = hd / 2
template <int P>
__device__ __forceinline__ void rope_body(floatX* oq, const floatX* q, floatX* ok, const floatX* k, const float* cos_t,
                                          const float* sin_t, int rows, int T, int nq, int nk, int uph, int half,
                                          float sign) {
    int u = blockIdx.x * blockDim.x + threadIdx.x;
    if (u >= nq + nk) return;
    floatX* o = oq;
    const floatX* x = q;
    int width = nq * 2 * P;  // elements a row of this tensor
    if (u >= nq) { u -= nq; o = ok; x = k; width = nk * 2 * P; }
    const int i0 = (u % uph) * P, e0 = u * 2 * P;
    const int row0 = blockIdx.y * blockDim.y + threadIdx.y, stride = gridDim.y * blockDim.y;
    int t = row0 % T;
    const int dt = stride % T;
    for (int row = row0; row < rows; row += stride) {
        size_t e = (size_t)row * width + e0;
        rope_unit<P>(o + e, x + e, cos_t + t * half + i0, sin_t + t * half + i0, sign);
        t += dt;
        if (t >= T) t -= T;
    }
}

// sign = +1: forward rotation; sign = -1: the transpose (backward)
__global__ void rope_vec_kernel(floatX* oq, const floatX* q, floatX* ok, const floatX* k, const float* cos_t,
                                const float* sin_t, int rows, int T, int nq, int nk, int uph, int half, float sign) {
    rope_body<ROPE_PAIRS>(oq, q, ok, k, cos_t, sin_t, rows, T, nq, nk, uph, half, sign);
}
__global__ void rope_pair_kernel(floatX* oq, const floatX* q, floatX* ok, const floatX* k, const float* cos_t,
                                 const float* sin_t, int rows, int T, int nq, int nk, int uph, int half, float sign) {
    rope_body<1>(oq, q, ok, k, cos_t, sin_t, rows, T, nq, nk, uph, half, sign);
}

static inline int rope_aligned(const void* p, size_t bytes) { return p == nullptr || ((uintptr_t)p % bytes) == 0; }

// oq = rope(q) ([B, T, H, hd]) and, when KV > 0, ok = rope(k) ([B, T, KV, hd]), one launch
static inline void rope_launch(floatX* oq, const floatX* q, floatX* ok, const floatX* k, const float* cos_t,
                               const float* sin_t, int B, int T, int H, int KV, int hd, float sign, stream_t s) {
    if (hd % 2 != 0) FAIL("rope: head dim %d is odd", hd);
    const int half = hd / 2;
    const size_t rows = (size_t)B * T;
    if (rows == 0 || H + KV == 0 || hd == 0) return;
    const int vec = hd % ROPE_VEC == 0 && rope_aligned(oq, 16) && rope_aligned(q, 16) && rope_aligned(ok, 16) &&
                    rope_aligned(k, 16) && rope_aligned(cos_t, 4 * ROPE_PAIRS) && rope_aligned(sin_t, 4 * ROPE_PAIRS);
    const int P = vec ? ROPE_PAIRS : 1;
    const size_t units = (size_t)(H + KV) * half / P;
    if (rows > INT_MAX || units * 2 * P > INT_MAX) FAIL("rope: %zu rows of %zu units exceed 32-bit indexing", rows, units);
    // x: the fewest warps that cover a row in blocks of at most ROPE_THREADS; y: rows, to fill the block
    size_t bx_n = ceil_div(units, (size_t)ceil_div(units, ROPE_THREADS));
    unsigned bx = (unsigned)ceil_div(bx_n, 32) * 32, by = ROPE_THREADS / bx;
    size_t gy = ceil_div(rows, by);
    if (gy > 65535) gy = 65535;
    dim3 grid((unsigned)ceil_div(units, bx), (unsigned)gy), block(bx, by);
    const int nq = H * half / P, nk = KV * half / P, uph = half / P;
    if (vec) rope_vec_kernel<<<grid, block, 0, s>>>(oq, q, ok, k, cos_t, sin_t, (int)rows, T, nq, nk, uph, half, sign);
    else rope_pair_kernel<<<grid, block, 0, s>>>(oq, q, ok, k, cos_t, sin_t, (int)rows, T, nq, nk, uph, half, sign);
    cudaCheck(cudaGetLastError());
}

static inline void rope_forward(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int B, int T, int nh,
                         int hd, stream_t s) {
    rope_launch(out, inp, nullptr, nullptr, cos_t, sin_t, B, T, nh, 0, hd, 1.0f, s);
}

// the rotation's transpose: rotate the gradient back by -angle
static inline void rope_backward(floatX* dinp, const floatX* dout, const float* cos_t, const float* sin_t, int B, int T,
                          int nh, int hd, stream_t s) {
    rope_launch(dinp, dout, nullptr, nullptr, cos_t, sin_t, B, T, nh, 0, hd, -1.0f, s);
}

// q and k (H and KV heads) in place, in one launch
static inline void rope_qk_forward(floatX* q, floatX* k, const float* cos_t, const float* sin_t, int B, int T, int H,
                                   int KV, int hd, stream_t s) {
    rope_launch(q, q, k, k, cos_t, sin_t, B, T, H, KV, hd, 1.0f, s);
}
static inline void rope_qk_backward(floatX* dq, floatX* dk, const float* cos_t, const float* sin_t, int B, int T, int H,
                                    int KV, int hd, stream_t s) {
    rope_launch(dq, dq, dk, dk, cos_t, sin_t, B, T, H, KV, hd, -1.0f, s);
}
