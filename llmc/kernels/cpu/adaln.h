/*
CPU twin of llmc/kernels/adaln.cuh: the adaLN-Zero pieces of a DiT block (docs/design.md 9.3).
Activations are [B*N, C] row-major, sample b owning rows b*N .. b*N+N-1. Each sample
has its own modulation vectors (shift, scale, gate), read as columns of a [B, ld]
tensor (one matmul's [B, 6D] output), so sample b's shift is shift[b*ld + c].
  layernorm_modulate_*: LayerNorm without affine (fp32 two-pass statistics), then
                        x_hat * (1 + scale) + shift
  gated_residual_*:     out = res + gate * y
Sums over the rows of a sample (dshift, dscale, dgate) run in row order for each
column, whatever the thread count: one task per (sample, block of columns). Sums along a
row (the LayerNorm statistics) in cpu_vrow_sum's fixed order (llmc/kernels/cpu/vmath.h).
*/
#pragma once
#include "../../core/common.h"
#include "vmath.h"  // cpu_vrow_sum

// same checks, same messages as the CUDA launchers
static inline void adaln_check_sizes(const char* who, int ld, int B, int N, int C) {
    if (B < 0 || N < 0 || C < 0) FAIL("%s: negative size (B=%d N=%d C=%d)", who, B, N, C);
    if (ld < C) FAIL("%s: ld=%d < C=%d (the modulation rows are [B, ld] with C columns in use)", who, ld, C);
    if ((long long)B * N > 0x7fffffffLL) FAIL("%s: B*N = %lld rows does not fit in an int", who, (long long)B * N);
}

#define ADALN_CPU_COLS 64  // columns per task of the per-sample column sums

// The CUDA backward's column sums run in two stages through fp32 scratch that the caller
// plans (llmc/kernels/adaln.cuh); the twin takes the same argument and ignores it. Same
// size on both backends, so that both plan the same memory.
#define ADALN_CHUNK 256  // rows of a sample per stage-1 block (CUDA)
static inline int adaln_chunks(int N) { return N > 0 ? (N + ADALN_CHUNK - 1) / ADALN_CHUNK : 1; }
// floats of scratch that layernorm_modulate_backward and gated_residual_backward need
static inline size_t adaln_backward_scratch_floats(int B, int N, int C) { return 2 * (size_t)B * adaln_chunks(N) * C; }

static inline void layernorm_modulate_forward(floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                                              const floatX* scale, int ld, int B, int N, int C, float eps, stream_t s) {
    (void)s;
    adaln_check_sizes("layernorm_modulate_forward", ld, B, N, C);
    if (out == inp && C > 0 && B > 0 && N > 0) FAIL("layernorm_modulate_forward: out must not alias inp");
    if (C == 0) return;
    int rows = B * N;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* x = inp + (size_t)r * C;
        const float* sh = shift + (size_t)(r / N) * ld;
        const float* sc = scale + (size_t)(r / N) * ld;
        float m = cpu_vrow_sum(C, [&](int c) { return x[c]; }) / C;
        float ss = cpu_vrow_sum(C, [&](int c) { return (x[c] - m) * (x[c] - m); });
        float rs = 1.0f / sqrtf(ss / C + eps);
        float* y = out + (size_t)r * C;
        for (int c = 0; c < C; c++) y[c] = (x[c] - m) * rs * (1.0f + sc[c]) + sh[c];
        mean[r] = m;
        rstd[r] = rs;
    }
}

// dinp += dL/dx (residual stream); dshift, dscale overwritten with the per-sample sums
static inline void layernorm_modulate_backward(floatX* dinp, floatX* dshift, floatX* dscale, const floatX* dout,
                                               const floatX* inp, const float* mean, const float* rstd,
                                               const floatX* scale, int ld, int B, int N, int C, float* scratch,
                                               stream_t s) {
    (void)s; (void)scratch;
    adaln_check_sizes("layernorm_modulate_backward", ld, B, N, C);
    if (B == 0 || C == 0) return;
    int rows = B * N;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* x = inp + (size_t)r * C;
        const float* dy = dout + (size_t)r * C;
        const float* sc = scale + (size_t)(r / N) * ld;
        float m = mean[r], rs = rstd[r];
        // sum dxhat, sum dxhat * xhat
        float sum_d = cpu_vrow_sum(C, [&](int c) { return dy[c] * (1.0f + sc[c]); });
        float sum_dx = cpu_vrow_sum(C, [&](int c) { return dy[c] * (1.0f + sc[c]) * ((x[c] - m) * rs); });
        float mean_d = sum_d / C, mean_dx = sum_dx / C;
        float* dx = dinp + (size_t)r * C;
        for (int c = 0; c < C; c++) {
            float dxhat = dy[c] * (1.0f + sc[c]);
            float xhat = (x[c] - m) * rs;
            dx[c] += rs * (dxhat - mean_d - xhat * mean_dx);
        }
    }
    int ncb = (C + ADALN_CPU_COLS - 1) / ADALN_CPU_COLS;
    #pragma omp parallel for schedule(static)
    for (int task = 0; task < B * ncb; task++) {
        int b = task / ncb, c0 = (task % ncb) * ADALN_CPU_COLS;
        int c1 = c0 + ADALN_CPU_COLS < C ? c0 + ADALN_CPU_COLS : C;
        float acc_shift[ADALN_CPU_COLS] = {0}, acc_scale[ADALN_CPU_COLS] = {0};
        for (int n = 0; n < N; n++) {
            int r = b * N + n;
            const float* x = inp + (size_t)r * C;
            const float* dy = dout + (size_t)r * C;
            float m = mean[r], rs = rstd[r];
            for (int c = c0; c < c1; c++) {
                acc_shift[c - c0] += dy[c];
                acc_scale[c - c0] += dy[c] * ((x[c] - m) * rs);
            }
        }
        for (int c = c0; c < c1; c++) {
            dshift[(size_t)b * ld + c] = acc_shift[c - c0];
            dscale[(size_t)b * ld + c] = acc_scale[c - c0];
        }
    }
}

// out may alias res
static inline void gated_residual_forward(floatX* out, const floatX* res, const floatX* y, const floatX* gate, int ld,
                                          int B, int N, int C, stream_t s) {
    (void)s;
    adaln_check_sizes("gated_residual_forward", ld, B, N, C);
    int rows = B * N;
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < rows; r++) {
        const float* g = gate + (size_t)(r / N) * ld;
        size_t o = (size_t)r * C;
        for (int c = 0; c < C; c++) out[o + c] = res[o + c] + g[c] * y[o + c];
    }
}

// dy = gate * dout (dy may be NULL; must not alias dout); dgate = (accumulate ? dgate : 0) + per-sample sum of
// dout * y (dgate may be NULL)
static inline void gated_residual_backward(floatX* dy, floatX* dgate, const floatX* dout, const floatX* y,
                                           const floatX* gate, int ld, int B, int N, int C, int accumulate,
                                           float* scratch, stream_t s) {
    (void)s; (void)scratch;
    adaln_check_sizes("gated_residual_backward", ld, B, N, C);
    if (dy && dy == dout && B > 0 && N > 0 && C > 0) FAIL("gated_residual_backward: dy must not alias dout");
    if (B == 0 || C == 0) return;
    int rows = B * N;
    if (dy) {
        #pragma omp parallel for schedule(static)
        for (int r = 0; r < rows; r++) {
            const float* g = gate + (size_t)(r / N) * ld;
            size_t o = (size_t)r * C;
            for (int c = 0; c < C; c++) dy[o + c] = g[c] * dout[o + c];
        }
    }
    if (!dgate) return;
    int ncb = (C + ADALN_CPU_COLS - 1) / ADALN_CPU_COLS;
    #pragma omp parallel for schedule(static)
    for (int task = 0; task < B * ncb; task++) {
        int b = task / ncb, c0 = (task % ncb) * ADALN_CPU_COLS;
        int c1 = c0 + ADALN_CPU_COLS < C ? c0 + ADALN_CPU_COLS : C;
        float acc[ADALN_CPU_COLS] = {0};
        for (int n = 0; n < N; n++) {
            size_t o = (size_t)(b * N + n) * C;
            for (int c = c0; c < c1; c++) acc[c - c0] += dout[o + c] * y[o + c];
        }
        for (int c = c0; c < c1; c++) {
            float* dg = dgate + (size_t)b * ld + c;
            *dg = accumulate ? *dg + acc[c - c0] : acc[c - c0];
        }
    }
}
