/*
CPU twin of llmc/kernels/bias.cuh: the bias of an nn.Linear (matmul_forward has none), for
the video DiT (docs/design.md 9.2). out is [N, OC] row-major.
bias_backward sums each column over the rows in row order, whatever the thread count:
one task per block of columns.
*/
#pragma once
#include "../../core/common.h"

static inline void bias_check_sizes(const char* who, int N, int OC) {
    if (N < 0 || OC < 0) FAIL("%s: negative size (N=%d OC=%d)", who, N, OC);
}

#define BIAS_CPU_COLS 64  // columns per task of bias_backward

// The CUDA backward sums in two stages through fp32 scratch that the caller plans
// (llmc/kernels/bias.cuh); the twin takes the same argument and ignores it. Same size on
// both backends, so that both plan the same memory.
#define BIAS_CHUNK 256  // rows per stage-1 block (CUDA)
static inline size_t bias_backward_scratch_floats(int N, int OC) {
    return (size_t)(N > 0 ? (N + BIAS_CHUNK - 1) / BIAS_CHUNK : 1) * OC;
}

// out[r, oc] += bias[oc]
static inline void bias_forward(floatX* out, const floatX* bias, int N, int OC, stream_t s) {
    (void)s;
    bias_check_sizes("bias_forward", N, OC);
    #pragma omp parallel for schedule(static)
    for (int r = 0; r < N; r++) {
        float* o = out + (size_t)r * OC;
        for (int c = 0; c < OC; c++) o[c] += bias[c];
    }
}

// dbias[oc] += sum_r dout[r, oc]  (accumulates, like matmul_backward_weight)
static inline void bias_backward(floatX* dbias, const floatX* dout, int N, int OC, float* scratch, stream_t s) {
    (void)s; (void)scratch;
    bias_check_sizes("bias_backward", N, OC);
    int ncb = (OC + BIAS_CPU_COLS - 1) / BIAS_CPU_COLS;
    #pragma omp parallel for schedule(static)
    for (int cb = 0; cb < ncb; cb++) {
        int c0 = cb * BIAS_CPU_COLS, c1 = c0 + BIAS_CPU_COLS < OC ? c0 + BIAS_CPU_COLS : OC;
        float acc[BIAS_CPU_COLS] = {0};
        for (int r = 0; r < N; r++) {
            const float* d = dout + (size_t)r * OC;
            for (int c = c0; c < c1; c++) acc[c - c0] += d[c];
        }
        for (int c = c0; c < c1; c++) dbias[c] += acc[c - c0];
    }
}
