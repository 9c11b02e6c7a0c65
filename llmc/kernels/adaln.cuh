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
  - row kernels: one warp per row (8 rows per 256-thread block); each lane walks a
    strided slice of the row, xor-shuffle trees combine the lanes (fixed order);
  - per-sample column sums: a block owns 32 columns (threadIdx.x) of one sample
    (blockIdx.y) and has 16 row slices (threadIdx.y); slice y adds rows y, y+16, ...
    of the sample in order, then one thread per column adds the 16 partials in order.
    The partition is fixed by constants, so the result does not depend on the GPU.
    No scratch. (dev/cuda/adaln.cu has a two-stage variant with more parallelism for
    long sequences and few columns.)
  - elementwise (gated residual): blocks walk rows (grid-stride), threads walk columns,
    so the sample index is one int division per row.
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

// out must not alias inp; mean, rstd: [B*N] fp32, for the backward
static inline void layernorm_modulate_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                              const floatX* scale, int ld, int B, int N, int C, float eps, stream_t s) {
    adaln_check_sizes("layernorm_modulate_forward", ld, B, N, C);
    if (out == inp && C > 0 && B > 0 && N > 0) FAIL("layernorm_modulate_forward: out must not alias inp");
    int rows = B * N;
    if (rows == 0 || C == 0) return;
    unsigned grid = (unsigned)ceil_div((size_t)rows, ADALN_ROWS_PER_BLOCK);
    layernorm_modulate_forward_kernel<<<grid, 32 * ADALN_ROWS_PER_BLOCK, 0, s>>>(out, mean, rstd, inp, shift, scale, ld,
                                                                                 N, rows, C, eps);
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

static inline dim3 adaln_colsum_grid(int B, int C) {
    return dim3((unsigned)ceil_div((size_t)C, ADALN_COL_CH), (unsigned)(B < ADALN_MAX_GRID ? B : ADALN_MAX_GRID));
}

// dinp += dL/dx (the residual stream's gradient accumulates); dshift, dscale overwritten
static inline void layernorm_modulate_backward(floatX* dinp, floatX* dshift, floatX* dscale, const floatX* dout,
                                               const floatX* inp, const float* mean, const float* rstd,
                                               const floatX* scale, int ld, int B, int N, int C, stream_t s) {
    adaln_check_sizes("layernorm_modulate_backward", ld, B, N, C);
    int rows = B * N;
    if (B == 0 || C == 0) return;
    if (rows > 0) {
        unsigned grid = (unsigned)ceil_div((size_t)rows, ADALN_ROWS_PER_BLOCK);
        layernorm_modulate_backward_dinp_kernel<<<grid, 32 * ADALN_ROWS_PER_BLOCK, 0, s>>>(dinp, dout, inp, mean, rstd,
                                                                                           scale, ld, N, rows, C);
        cudaCheck(cudaGetLastError());
    }
    dim3 block(ADALN_COL_CH, ADALN_COL_SLICES);
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
    adaln_rows_launch_dims(rows, C, &grid, &block);
    gated_residual_forward_kernel<<<grid, block, 0, s>>>(out, res, y, gate, ld, N, rows, C);
    cudaCheck(cudaGetLastError());
}

// dy (may be NULL) = gate * dout, overwritten; dy must not alias dout (dgate reads dout afterwards).
// dgate (may be NULL) = (accumulate ? dgate : 0) + per-sample column sums of dout * y.
static inline void gated_residual_backward(floatX* dy, floatX* dgate, const floatX* dout, const floatX* y,
                                           const floatX* gate, int ld, int B, int N, int C, int accumulate, stream_t s) {
    adaln_check_sizes("gated_residual_backward", ld, B, N, C);
    if (dy && dy == dout && B > 0 && N > 0 && C > 0) FAIL("gated_residual_backward: dy must not alias dout");
    int rows = B * N;
    if (B == 0 || C == 0) return;
    if (dy && rows > 0) {
        unsigned grid, block;
        adaln_rows_launch_dims(rows, C, &grid, &block);
        gated_residual_backward_dy_kernel<<<grid, block, 0, s>>>(dy, dout, gate, ld, N, rows, C);
        cudaCheck(cudaGetLastError());
    }
    if (dgate) {
        dim3 block(ADALN_COL_CH, ADALN_COL_SLICES);
        gated_residual_backward_dgate_kernel<<<adaln_colsum_grid(B, C), block, 0, s>>>(dgate, dout, y, ld, B, N, C,
                                                                                       accumulate);
        cudaCheck(cudaGetLastError());
    }
}
