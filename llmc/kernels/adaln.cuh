/*
adaLN-Zero for the video DiT block (docs/design.md 9.3). CPU twin: llmc/kernels/cpu/adaln.h.
Activations are [B*N, C] row-major: sample b owns rows b*N .. b*N+N-1. Every token of
a sample is modulated by that sample's vectors shift, scale and gate, which are
columns of a [B, ld] tensor (the [B, 6D] output of one matmul: shift = ada + 0,
scale = ada + D, ld = 6D), so sample b's shift is shift[b*ld + c].

  layernorm_modulate_forward:  out = (x - mean) * rstd * (1 + scale_b) + shift_b
      LayerNorm without affine, statistics in fp32 and in two passes (mean, then the
      mean of (x - mean)^2): one pass (E[x^2] - mean^2) cancels catastrophically when
      |mean| >> std, which the residual stream of a deep model can reach.
  layernorm_modulate_backward: dinp += rstd (dxhat - mean(dxhat) - xhat mean(dxhat xhat))
      with dxhat = dout (1 + scale_b); dshift_b, dscale_b = per-sample column sums of
      dout and dout * xhat (overwritten).
  gated_residual_forward:      out = res + gate_b * y   (out may alias res)
  gated_residual_backward:     dy = gate_b * dout; dgate_b (+)= column sums of dout * y

Kernels, all deterministic run to run (no atomics):
  - row kernels: one warp per row (8 rows per 256-thread block), xor-shuffle trees
    combine the lanes (fixed order). When C, ld and the pointers allow 16-byte vectors
    (C and ld multiples of the vector width, 16-byte aligned pointers) and a row fits in
    ADALN_MAX_NV vectors per lane (C <= 4096 in bf16, 2048 in fp32), the row is held in
    registers: x is read from memory once in the forward, x and dout once in the
    backward's dinp (the scalar kernels read them 3 and 2 times, through L1/L2). The
    vector count per lane is a compile-time NV (1, 2, 4, 8, 16: one kernel each, since
    the emulator's kernel table names kernels without template arguments). Otherwise
    the scalar kernels: each lane walks a strided slice of the row.
  - per-sample column sums: a block owns 32 columns (threadIdx.x) of one sample and has
    16 row slices (threadIdx.y); slice y adds rows y, y+16, ... in order, then one
    thread per column adds the 16 partials in order. With scratch
    (adaln_backward_scratch_floats, planned by the caller) and more than one chunk of
    ADALN_CHUNK rows per sample, in two stages: stage 1 has such a block per (32
    columns, sample, chunk) and writes fp32 partials, stage 2 adds a sample's chunk
    partials in chunk order. One stage has only ceil(C/32) * B blocks, each walking N/16
    rows: 24 blocks for dit-B at B = 1 on a 132-SM GPU. Without scratch, with one chunk,
    or beyond 65535 samples or chunks, the one-stage kernel (samples grid-strided). The
    partitions are fixed by constants, so the result does not depend on the GPU.
    Callers of one scratch buffer must stay on one stream.
  - elementwise (gated residual): blocks walk rows (grid-stride), threads walk columns
    (16-byte vectors under the conditions above, else elements), so the sample index is
    one int division per row.
The vector rows, the two-stage sums and the vector gated residual are dev/cuda/adaln.cu's
version 2, moved here as measured on an H200 (docs/results/gpu_h200_2026-11-26_call2.log,
B=2 N=16384 C=1152): layernorm-modulate forward 0.072 -> 0.057 ms, backward 1.556 ->
0.294 ms; gated residual forward 0.114 -> 0.055, backward 0.279 -> 0.096 ms. Register use
(nvcc 13.0, sm_90): dev/test/ptxas_gate.py.
*/
#pragma once
#include "../core/common.h"

static inline void adaln_check_sizes(const char* who, int ld, int B, int N, int C) {
    if (B < 0 || N < 0 || C < 0) FAIL("%s: negative size (B=%d N=%d C=%d)", who, B, N, C);
    if (ld < C) FAIL("%s: ld=%d < C=%d (the modulation rows are [B, ld] with C columns in use)", who, ld, C);
    if ((long long)B * N > 0x7fffffffLL) FAIL("%s: B*N = %lld rows does not fit in an int", who, (long long)B * N);
}

static __device__ __forceinline__ float adaln_warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

#define ADALN_ROWS_PER_BLOCK 8  // row kernels: one warp per row, 256 threads
#define ADALN_COL_CH 32         // column sums: columns per block (threadIdx.x)
#define ADALN_COL_SLICES 16     // column sums: row slices per block (threadIdx.y)
#define ADALN_MAX_GRID 65535    // grid rows (y) of the column sums; blocks of the elementwise kernels
#define ADALN_CHUNK 256         // two-stage column sums: rows of a sample per stage-1 block
#define ADALN_MAX_NV 16         // vector rows: at most 16 vectors per lane in registers
#define ADALN_VEC (16 / (int)sizeof(floatX))
struct alignas(16) AdalnVec { floatX v[ADALN_VEC]; };

static inline int adaln_chunks(int N) { return N > 0 ? (int)ceil_div((size_t)N, ADALN_CHUNK) : 1; }
// floats of scratch that layernorm_modulate_backward (two [B, chunks, C] partial arrays)
// and gated_residual_backward (one) need; the same on the CPU twin
static inline size_t adaln_backward_scratch_floats(int B, int N, int C) { return 2 * (size_t)B * adaln_chunks(N) * C; }
static inline bool adaln_aligned16(const void* p) { return ((uintptr_t)p & 15) == 0; }

__global__ void layernorm_modulate_forward_kernel(floatX* out, float* mean, float* rstd, const floatX* inp,
                                                  const floatX* shift, const floatX* scale, int ld, int N, int rows,
                                                  int C, float eps) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * ADALN_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (r >= rows) return;  // whole warp leaves together
    const floatX* x = inp + (size_t)r * C;
    float sum = 0.0f;
    for (int c = lane; c < C; c += 32) sum += (float)x[c];
    float m = adaln_warp_sum(sum) / C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float d = (float)x[c] - m;
        ss += d * d;
    }
    float rs = 1.0f / sqrtf(adaln_warp_sum(ss) / C + eps);
    const floatX* sh = shift + (size_t)(r / N) * ld;
    const floatX* sc = scale + (size_t)(r / N) * ld;
    floatX* y = out + (size_t)r * C;
    for (int c = lane; c < C; c += 32) y[c] = (floatX)(((float)x[c] - m) * rs * (1.0f + (float)sc[c]) + (float)sh[c]);
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

// ---------------------------------------------------------------------------------
// rows in registers (16-byte vectors): NV vectors per lane, a compile-time count
template <int NV>
__device__ __forceinline__ void lnmod_forward_vec_body(floatX* out, float* mean, float* rstd, const floatX* inp,
                                                       const floatX* shift, const floatX* scale, int ld, int N, int rows,
                                                       int C, float eps) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * ADALN_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (r >= rows) return;
    const int nvec = C / ADALN_VEC;
    const AdalnVec* x = (const AdalnVec*)(inp + (size_t)r * C);
    AdalnVec xv[NV];
    float sum = 0.0f;
    #pragma unroll
    for (int k = 0; k < NV; k++) {
        int v = k * 32 + lane;
        if (v < nvec) {
            xv[k] = x[v];
            for (int e = 0; e < ADALN_VEC; e++) sum += (float)xv[k].v[e];
        }
    }
    float m = adaln_warp_sum(sum) / C;
    float ss = 0.0f;
    #pragma unroll
    for (int k = 0; k < NV; k++)
        if (k * 32 + lane < nvec)
            for (int e = 0; e < ADALN_VEC; e++) {
                float d = (float)xv[k].v[e] - m;
                ss += d * d;
            }
    float rs = 1.0f / sqrtf(adaln_warp_sum(ss) / C + eps);
    const AdalnVec* sh = (const AdalnVec*)(shift + (size_t)(r / N) * ld);
    const AdalnVec* sc = (const AdalnVec*)(scale + (size_t)(r / N) * ld);
    AdalnVec* y = (AdalnVec*)(out + (size_t)r * C);
    #pragma unroll
    for (int k = 0; k < NV; k++) {
        int v = k * 32 + lane;
        if (v < nvec) {
            AdalnVec a = sh[v], g = sc[v], o;
            for (int e = 0; e < ADALN_VEC; e++)
                o.v[e] = (floatX)(((float)xv[k].v[e] - m) * rs * (1.0f + (float)g.v[e]) + (float)a.v[e]);
            y[v] = o;
        }
    }
    if (lane == 0) {
        mean[r] = m;
        rstd[r] = rs;
    }
}

template <int NV>
__device__ __forceinline__ void lnmod_dinp_vec_body(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                                    const float* rstd, const floatX* scale, int ld, int N, int rows,
                                                    int C) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * ADALN_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (r >= rows) return;
    const int nvec = C / ADALN_VEC;
    const AdalnVec* x = (const AdalnVec*)(inp + (size_t)r * C);
    const AdalnVec* dy = (const AdalnVec*)(dout + (size_t)r * C);
    const AdalnVec* sc = (const AdalnVec*)(scale + (size_t)(r / N) * ld);
    float m = mean[r], rs = rstd[r];
    AdalnVec xv[NV], dv[NV];  // scale is not kept: it is the sample's, read again from L1/L2
    float sum_d = 0.0f, sum_dx = 0.0f;
    #pragma unroll
    for (int k = 0; k < NV; k++) {
        int v = k * 32 + lane;
        if (v < nvec) {
            xv[k] = x[v];
            dv[k] = dy[v];
            AdalnVec g = sc[v];
            for (int e = 0; e < ADALN_VEC; e++) {
                float dxhat = (float)dv[k].v[e] * (1.0f + (float)g.v[e]);
                sum_d += dxhat;
                sum_dx += dxhat * (((float)xv[k].v[e] - m) * rs);
            }
        }
    }
    float mean_d = adaln_warp_sum(sum_d) / C, mean_dx = adaln_warp_sum(sum_dx) / C;
    AdalnVec* dx = (AdalnVec*)(dinp + (size_t)r * C);
    #pragma unroll
    for (int k = 0; k < NV; k++) {
        int v = k * 32 + lane;
        if (v < nvec) {
            AdalnVec o = dx[v], g = sc[v];
            for (int e = 0; e < ADALN_VEC; e++) {
                float dxhat = (float)dv[k].v[e] * (1.0f + (float)g.v[e]);
                float xhat = ((float)xv[k].v[e] - m) * rs;
                o.v[e] = (floatX)((float)o.v[e] + rs * (dxhat - mean_d - xhat * mean_dx));
            }
            dx[v] = o;
        }
    }
}

// one kernel per NV, written out: the emulator's kernel table and the ptxas gate name each
__global__ void lnmod_forward_nv1_kernel(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                         const floatX* scale, int ld, int N, int rows, int C, float eps) {
    lnmod_forward_vec_body<1>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps);
}
__global__ void lnmod_forward_nv2_kernel(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                         const floatX* scale, int ld, int N, int rows, int C, float eps) {
    lnmod_forward_vec_body<2>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps);
}
__global__ void lnmod_forward_nv4_kernel(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                         const floatX* scale, int ld, int N, int rows, int C, float eps) {
    lnmod_forward_vec_body<4>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps);
}
__global__ void lnmod_forward_nv8_kernel(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                         const floatX* scale, int ld, int N, int rows, int C, float eps) {
    lnmod_forward_vec_body<8>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps);
}
__global__ void lnmod_forward_nv16_kernel(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                         const floatX* scale, int ld, int N, int rows, int C, float eps) {
    lnmod_forward_vec_body<16>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps);
}
__global__ void lnmod_dinp_nv1_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                      const float* rstd, const floatX* scale, int ld, int N, int rows, int C) {
    lnmod_dinp_vec_body<1>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C);
}
__global__ void lnmod_dinp_nv2_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                      const float* rstd, const floatX* scale, int ld, int N, int rows, int C) {
    lnmod_dinp_vec_body<2>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C);
}
__global__ void lnmod_dinp_nv4_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                      const float* rstd, const floatX* scale, int ld, int N, int rows, int C) {
    lnmod_dinp_vec_body<4>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C);
}
__global__ void lnmod_dinp_nv8_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                      const float* rstd, const floatX* scale, int ld, int N, int rows, int C) {
    lnmod_dinp_vec_body<8>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C);
}
__global__ void lnmod_dinp_nv16_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const float* mean,
                                      const float* rstd, const floatX* scale, int ld, int N, int rows, int C) {
    lnmod_dinp_vec_body<16>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C);
}

// vectors per lane of the register path (1, 2, 4, 8, 16), or 0: the scalar kernels. It
// applies when every row is whole vectors, every pointer and row start is 16-byte
// aligned, and a row fits in ADALN_MAX_NV vectors per lane.
static inline int lnmod_vec_nv(const void* a, const void* b, const void* c, const void* d, int ld, int C) {
    if (C % ADALN_VEC || ld % ADALN_VEC || !adaln_aligned16(a) || !adaln_aligned16(b) || !adaln_aligned16(c) ||
        !adaln_aligned16(d))
        return 0;
    int per_lane = (int)ceil_div((size_t)(C / ADALN_VEC), 32);
    int nv = 1;
    while (nv < per_lane) nv *= 2;
    return nv <= ADALN_MAX_NV ? nv : 0;
}

// out must not alias inp; mean, rstd: [B*N] fp32, for the backward
static inline void layernorm_modulate_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                              const floatX* scale, int ld, int B, int N, int C, float eps, stream_t s) {
    adaln_check_sizes("layernorm_modulate_forward", ld, B, N, C);
    if (out == inp && C > 0 && B > 0 && N > 0) FAIL("layernorm_modulate_forward: out must not alias inp");
    int rows = B * N;
    if (rows == 0 || C == 0) return;
    unsigned grid = (unsigned)ceil_div((size_t)rows, ADALN_ROWS_PER_BLOCK), block = 32 * ADALN_ROWS_PER_BLOCK;
    switch (lnmod_vec_nv(out, inp, shift, scale, ld, C)) {
        case 1: lnmod_forward_nv1_kernel<<<grid, block, 0, s>>>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps); break;
        case 2: lnmod_forward_nv2_kernel<<<grid, block, 0, s>>>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps); break;
        case 4: lnmod_forward_nv4_kernel<<<grid, block, 0, s>>>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps); break;
        case 8: lnmod_forward_nv8_kernel<<<grid, block, 0, s>>>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps); break;
        case 16: lnmod_forward_nv16_kernel<<<grid, block, 0, s>>>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps); break;
        default:
            layernorm_modulate_forward_kernel<<<grid, block, 0, s>>>(out, mean, rstd, inp, shift, scale, ld, N, rows, C, eps);
    }
    cudaCheck(cudaGetLastError());
}

__global__ void layernorm_modulate_backward_dinp_kernel(floatX* dinp, const floatX* dout, const floatX* inp,
                                                        const float* mean, const float* rstd, const floatX* scale,
                                                        int ld, int N, int rows, int C) {
    int lane = threadIdx.x & 31;
    int r = blockIdx.x * ADALN_ROWS_PER_BLOCK + (threadIdx.x >> 5);
    if (r >= rows) return;
    const floatX* x = inp + (size_t)r * C;
    const floatX* dy = dout + (size_t)r * C;
    const floatX* sc = scale + (size_t)(r / N) * ld;
    float m = mean[r], rs = rstd[r];
    float sum_d = 0.0f, sum_dx = 0.0f;  // sum dxhat, sum dxhat * xhat
    for (int c = lane; c < C; c += 32) {
        float dxhat = (float)dy[c] * (1.0f + (float)sc[c]);
        sum_d += dxhat;
        sum_dx += dxhat * (((float)x[c] - m) * rs);
    }
    float mean_d = adaln_warp_sum(sum_d) / C, mean_dx = adaln_warp_sum(sum_dx) / C;
    floatX* dx = dinp + (size_t)r * C;
    for (int c = lane; c < C; c += 32) {
        float dxhat = (float)dy[c] * (1.0f + (float)sc[c]);
        float xhat = ((float)x[c] - m) * rs;
        dx[c] = (floatX)((float)dx[c] + rs * (dxhat - mean_d - xhat * mean_dx));
    }
}

__global__ void layernorm_modulate_backward_colsum_kernel(floatX* dshift, floatX* dscale, const floatX* dout,
                                                          const floatX* inp, const float* mean, const float* rstd,
                                                          int ld, int B, int N, int C) {
    __shared__ float part_shift[ADALN_COL_SLICES][ADALN_COL_CH];
    __shared__ float part_scale[ADALN_COL_SLICES][ADALN_COL_CH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * ADALN_COL_CH + tx;
    for (int b = blockIdx.y; b < B; b += gridDim.y) {
        float acc_shift = 0.0f, acc_scale = 0.0f;
        if (c < C)
            for (int n = ty; n < N; n += ADALN_COL_SLICES) {
                int r = b * N + n;
                size_t i = (size_t)r * C + c;
                float d = (float)dout[i];
                acc_shift += d;
                acc_scale += d * (((float)inp[i] - mean[r]) * rstd[r]);
            }
        part_shift[ty][tx] = acc_shift;
        part_scale[ty][tx] = acc_scale;
        __syncthreads();
        if (ty == 0 && c < C) {
            float s1 = 0.0f, s2 = 0.0f;
            for (int y = 0; y < ADALN_COL_SLICES; y++) {
                s1 += part_shift[y][tx];
                s2 += part_scale[y][tx];
            }
            dshift[(size_t)b * ld + c] = (floatX)s1;
            dscale[(size_t)b * ld + c] = (floatX)s2;
        }
        __syncthreads();  // the partials are rewritten by the next sample
    }
}

// two-stage column sums, 1: block (32 columns, sample blockIdx.y, chunk blockIdx.z); slice ty
// adds rows ty, ty+16, ... of the chunk in order, then the 16 slices in order, into
// part[(sample, chunk), column]
__global__ void lnmod_colsum_partial_kernel(float* part_shift, float* part_scale, const floatX* dout, const floatX* inp,
                                            const float* mean, const float* rstd, int N, int C, int chunks) {
    __shared__ float ps[ADALN_COL_SLICES][ADALN_COL_CH], pc[ADALN_COL_SLICES][ADALN_COL_CH];
    int tx = threadIdx.x, ty = threadIdx.y, b = blockIdx.y, s = blockIdx.z;
    int c = blockIdx.x * ADALN_COL_CH + tx;
    int n1 = min(N, (s + 1) * ADALN_CHUNK);
    float a1 = 0.0f, a2 = 0.0f;
    if (c < C)
        for (int n = s * ADALN_CHUNK + ty; n < n1; n += ADALN_COL_SLICES) {
            int r = b * N + n;
            size_t i = (size_t)r * C + c;
            float d = (float)dout[i];
            a1 += d;
            a2 += d * (((float)inp[i] - mean[r]) * rstd[r]);
        }
    ps[ty][tx] = a1;
    pc[ty][tx] = a2;
    __syncthreads();
    if (ty == 0 && c < C) {
        float s1 = 0.0f, s2 = 0.0f;
        for (int k = 0; k < ADALN_COL_SLICES; k++) {
            s1 += ps[k][tx];
            s2 += pc[k][tx];
        }
        size_t o = ((size_t)b * chunks + s) * C + c;
        part_shift[o] = s1;
        part_scale[o] = s2;
    }
}

// __launch_bounds__: without it ptxas gives this kernel 34 registers, 3 blocks of 512 per SM
// (the ladder's measured version); the column sums assume every thread slot (4 blocks)
__global__ void __launch_bounds__(ADALN_COL_CH * ADALN_COL_SLICES, 4)
    gres_dgate_partial_kernel(float* part, const floatX* dout, const floatX* y, int N, int C, int chunks) {
    __shared__ float p[ADALN_COL_SLICES][ADALN_COL_CH];
    int tx = threadIdx.x, ty = threadIdx.y, b = blockIdx.y, s = blockIdx.z;
    int c = blockIdx.x * ADALN_COL_CH + tx;
    int n1 = min(N, (s + 1) * ADALN_CHUNK);
    float acc = 0.0f;
    if (c < C)
        for (int n = s * ADALN_CHUNK + ty; n < n1; n += ADALN_COL_SLICES) {
            size_t i = (size_t)(b * N + n) * C + c;
            acc += (float)dout[i] * (float)y[i];
        }
    p[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < C) {
        float sum = 0.0f;
        for (int k = 0; k < ADALN_COL_SLICES; k++) sum += p[k][tx];
        part[((size_t)b * chunks + s) * C + c] = sum;
    }
}

// two-stage column sums, 2: one thread per (sample, column) adds the chunk partials in
// chunk order; out[b ld + c] = (accumulate ? out : 0) + sum
__global__ void adaln_colsum_finish_kernel(floatX* out, const float* part, int ld, int B, int C, int chunks,
                                           int accumulate) {
    size_t idx = (size_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= (size_t)B * C) return;
    int b = (int)(idx / C), c = (int)(idx % C);
    float sum = 0.0f;
    for (int s = 0; s < chunks; s++) sum += part[((size_t)b * chunks + s) * C + c];
    floatX* o = out + (size_t)b * ld + c;
    *o = (floatX)(accumulate ? (float)*o + sum : sum);  // no read when overwriting
}

static inline void adaln_colsum_finish(floatX* out, const float* part, int ld, int B, int C, int chunks, int accumulate,
                                       stream_t s) {
    adaln_colsum_finish_kernel<<<(unsigned)ceil_div((size_t)B * C, 256), 256, 0, s>>>(out, part, ld, B, C, chunks,
                                                                                       accumulate);
    cudaCheck(cudaGetLastError());
}

// the two-stage sums apply with scratch, more than one chunk per sample, and a grid that fits
static inline bool adaln_two_stage(const float* scratch, int B, int N) {
    int chunks = adaln_chunks(N);
    return scratch && chunks > 1 && chunks <= ADALN_MAX_GRID && B <= ADALN_MAX_GRID;
}
static inline dim3 adaln_partial_grid(int B, int N, int C) {
    return dim3((unsigned)ceil_div((size_t)C, ADALN_COL_CH), (unsigned)B, (unsigned)adaln_chunks(N));
}

static inline dim3 adaln_colsum_grid(int B, int C) {
    return dim3((unsigned)ceil_div((size_t)C, ADALN_COL_CH), (unsigned)(B < ADALN_MAX_GRID ? B : ADALN_MAX_GRID));
}

// dinp += dL/dx (the residual stream's gradient accumulates); dshift, dscale overwritten.
// scratch: NULL (one-stage column sums) or adaln_backward_scratch_floats(B, N, C) floats of
// the caller's plan, used by no other stream meanwhile
static inline void layernorm_modulate_backward(floatX* dinp, floatX* dshift, floatX* dscale, const floatX* dout,
                                               const floatX* inp, const float* mean, const float* rstd,
                                               const floatX* scale, int ld, int B, int N, int C, float* scratch,
                                               stream_t s) {
    adaln_check_sizes("layernorm_modulate_backward", ld, B, N, C);
    int rows = B * N;
    if (B == 0 || C == 0) return;
    if (rows > 0) {
        unsigned grid = (unsigned)ceil_div((size_t)rows, ADALN_ROWS_PER_BLOCK), block = 32 * ADALN_ROWS_PER_BLOCK;
        switch (lnmod_vec_nv(dinp, dout, inp, scale, ld, C)) {
            case 1: lnmod_dinp_nv1_kernel<<<grid, block, 0, s>>>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C); break;
            case 2: lnmod_dinp_nv2_kernel<<<grid, block, 0, s>>>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C); break;
            case 4: lnmod_dinp_nv4_kernel<<<grid, block, 0, s>>>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C); break;
            case 8: lnmod_dinp_nv8_kernel<<<grid, block, 0, s>>>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C); break;
            case 16: lnmod_dinp_nv16_kernel<<<grid, block, 0, s>>>(dinp, dout, inp, mean, rstd, scale, ld, N, rows, C); break;
            default:
                layernorm_modulate_backward_dinp_kernel<<<grid, block, 0, s>>>(dinp, dout, inp, mean, rstd, scale, ld, N,
                                                                               rows, C);
        }
        cudaCheck(cudaGetLastError());
    }
    dim3 block(ADALN_COL_CH, ADALN_COL_SLICES);
    if (adaln_two_stage(scratch, B, N)) {
        int chunks = adaln_chunks(N);
        float *part_shift = scratch, *part_scale = scratch + (size_t)B * chunks * C;
        lnmod_colsum_partial_kernel<<<adaln_partial_grid(B, N, C), block, 0, s>>>(part_shift, part_scale, dout, inp, mean,
                                                                                  rstd, N, C, chunks);
        cudaCheck(cudaGetLastError());
        adaln_colsum_finish(dshift, part_shift, ld, B, C, chunks, 0, s);
        adaln_colsum_finish(dscale, part_scale, ld, B, C, chunks, 0, s);
        return;
    }
    layernorm_modulate_backward_colsum_kernel<<<adaln_colsum_grid(B, C), block, 0, s>>>(dshift, dscale, dout, inp, mean,
                                                                                        rstd, ld, B, N, C);
    cudaCheck(cudaGetLastError());
}

// ---------------------------------------------------------------------------------
// gated residual

__global__ void gated_residual_forward_kernel(floatX* out, const floatX* res, const floatX* y, const floatX* gate, int ld,
                                              int N, int rows, int C) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const floatX* g = gate + (size_t)(r / N) * ld;
        size_t o = (size_t)r * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x)
            out[o + c] = (floatX)((float)res[o + c] + (float)g[c] * (float)y[o + c]);
    }
}

__global__ void gated_residual_backward_dy_kernel(floatX* dy, const floatX* dout, const floatX* gate, int ld, int N,
                                                  int rows, int C) {
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const floatX* g = gate + (size_t)(r / N) * ld;
        size_t o = (size_t)r * C;
        for (int c = threadIdx.x; c < C; c += blockDim.x) dy[o + c] = (floatX)((float)g[c] * (float)dout[o + c]);
    }
}

__global__ void gated_residual_backward_dgate_kernel(floatX* dgate, const floatX* dout, const floatX* y, int ld, int B,
                                                     int N, int C, int accumulate) {
    __shared__ float part[ADALN_COL_SLICES][ADALN_COL_CH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * ADALN_COL_CH + tx;
    for (int b = blockIdx.y; b < B; b += gridDim.y) {
        float acc = 0.0f;
        if (c < C)
            for (int n = ty; n < N; n += ADALN_COL_SLICES) {
                size_t i = (size_t)(b * N + n) * C + c;
                acc += (float)dout[i] * (float)y[i];
            }
        part[ty][tx] = acc;
        __syncthreads();
        if (ty == 0 && c < C) {
            float sum = 0.0f;
            for (int k = 0; k < ADALN_COL_SLICES; k++) sum += part[k][tx];
            floatX* dg = dgate + (size_t)b * ld + c;
            *dg = (floatX)(accumulate ? (float)*dg + sum : sum);  // no read when overwriting
        }
        __syncthreads();
    }
}

// the same in 16-byte vectors (rows of C / ADALN_VEC vectors)
__global__ void gated_residual_forward_vec_kernel(floatX* out, const floatX* res, const floatX* y, const floatX* gate,
                                                  int ld, int N, int rows, int C) {
    const int nvec = C / ADALN_VEC;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const AdalnVec* g = (const AdalnVec*)(gate + (size_t)(r / N) * ld);
        size_t o = (size_t)r * nvec;
        for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
            AdalnVec a = ((const AdalnVec*)res)[o + v], b = ((const AdalnVec*)y)[o + v], gg = g[v], w;
            for (int e = 0; e < ADALN_VEC; e++) w.v[e] = (floatX)((float)a.v[e] + (float)gg.v[e] * (float)b.v[e]);
            ((AdalnVec*)out)[o + v] = w;
        }
    }
}

__global__ void gated_residual_backward_dy_vec_kernel(floatX* dy, const floatX* dout, const floatX* gate, int ld, int N,
                                                      int rows, int C) {
    const int nvec = C / ADALN_VEC;
    for (int r = blockIdx.x; r < rows; r += gridDim.x) {
        const AdalnVec* g = (const AdalnVec*)(gate + (size_t)(r / N) * ld);
        size_t o = (size_t)r * nvec;
        for (int v = threadIdx.x; v < nvec; v += blockDim.x) {
            AdalnVec d = ((const AdalnVec*)dout)[o + v], gg = g[v], w;
            for (int e = 0; e < ADALN_VEC; e++) w.v[e] = (floatX)((float)gg.v[e] * (float)d.v[e]);
            ((AdalnVec*)dy)[o + v] = w;
        }
    }
}

// the vector kernels apply when rows and modulation rows are whole, aligned vectors
static inline bool gres_vectors(const void* a, const void* b, const void* c, const void* d, int ld, int C) {
    return C % ADALN_VEC == 0 && ld % ADALN_VEC == 0 && adaln_aligned16(a) && adaln_aligned16(b) && adaln_aligned16(c) &&
           adaln_aligned16(d);
}

// rows of C elements: 256 threads, or fewer for narrow rows; at most 65535 blocks (grid-stride)
static inline void adaln_rows_launch_dims(int rows, int C, unsigned* grid, unsigned* block) {
    *block = C >= 256 ? 256u : (unsigned)ceil_div((size_t)C, 32) * 32u;
    *grid = (unsigned)(rows < ADALN_MAX_GRID ? rows : ADALN_MAX_GRID);
}

// out may alias res (each element is read before it is written, by the same thread)
static inline void gated_residual_forward(floatX* out, const floatX* res, const floatX* y, const floatX* gate, int ld,
                                          int B, int N, int C, stream_t s) {
    adaln_check_sizes("gated_residual_forward", ld, B, N, C);
    int rows = B * N;
    if (rows == 0 || C == 0) return;
    unsigned grid, block;
    if (gres_vectors(out, res, y, gate, ld, C)) {
        adaln_rows_launch_dims(rows, C / ADALN_VEC, &grid, &block);
        gated_residual_forward_vec_kernel<<<grid, block, 0, s>>>(out, res, y, gate, ld, N, rows, C);
    } else {
        adaln_rows_launch_dims(rows, C, &grid, &block);
        gated_residual_forward_kernel<<<grid, block, 0, s>>>(out, res, y, gate, ld, N, rows, C);
    }
    cudaCheck(cudaGetLastError());
}

// dy (may be NULL) = gate * dout, overwritten; dy must not alias dout (dgate reads dout afterwards).
// dgate (may be NULL) = (accumulate ? dgate : 0) + per-sample column sums of dout * y.
// scratch: NULL (one-stage column sums) or adaln_backward_scratch_floats(B, N, C) floats of the
// caller's plan (half of it is used), used by no other stream meanwhile
static inline void gated_residual_backward(floatX* dy, floatX* dgate, const floatX* dout, const floatX* y,
                                           const floatX* gate, int ld, int B, int N, int C, int accumulate,
                                           float* scratch, stream_t s) {
    adaln_check_sizes("gated_residual_backward", ld, B, N, C);
    if (dy && dy == dout && B > 0 && N > 0 && C > 0) FAIL("gated_residual_backward: dy must not alias dout");
    int rows = B * N;
    if (B == 0 || C == 0) return;
    if (dy && rows > 0) {
        unsigned grid, block;
        if (gres_vectors(dy, dout, gate, gate, ld, C)) {
            adaln_rows_launch_dims(rows, C / ADALN_VEC, &grid, &block);
            gated_residual_backward_dy_vec_kernel<<<grid, block, 0, s>>>(dy, dout, gate, ld, N, rows, C);
        } else {
            adaln_rows_launch_dims(rows, C, &grid, &block);
            gated_residual_backward_dy_kernel<<<grid, block, 0, s>>>(dy, dout, gate, ld, N, rows, C);
        }
        cudaCheck(cudaGetLastError());
    }
    if (!dgate) return;
    dim3 block(ADALN_COL_CH, ADALN_COL_SLICES);
    if (adaln_two_stage(scratch, B, N)) {
        int chunks = adaln_chunks(N);
        gres_dgate_partial_kernel<<<adaln_partial_grid(B, N, C), block, 0, s>>>(scratch, dout, y, N, C, chunks);
        cudaCheck(cudaGetLastError());
        adaln_colsum_finish(dgate, scratch, ld, B, C, chunks, accumulate, s);
        return;
    }
    gated_residual_backward_dgate_kernel<<<adaln_colsum_grid(B, C), block, 0, s>>>(dgate, dout, y, ld, B, N, C,
                                                                                   accumulate);
    cudaCheck(cudaGetLastError());
}
