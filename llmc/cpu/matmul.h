/*
CPU twin of llmc/matmul.cuh. Weights are stored as nn.Linear stores them, [OC, C]
row-major, with a row stride ldw so that a slice of columns (w2[:, c0:c1] in the
hidden-chunked FFN) is addressed in place: pass w + c0 and ldw = F.
Summation order is fixed (8 explicit lanes, then a fixed tree), so results do not
depend on the number of OpenMP threads: resume and offload stay bit-exact.

With USE_BLAS (the Makefile defines it when it finds OpenBLAS) the three products are
cblas_sgemm calls instead: the same contract, 5-10x the speed on this kind of machine.
OpenBLAS splits an sgemm over threads by rows and columns of the output, never along
the summed dimension, so each element is summed in the same order on every run: resume
and offload stay bit-exact. The blocked loops below remain the fallback and are what the
emulator (dev/emu) and the dev/cuda ladders hold the CUDA kernels against.
*/
#pragma once
#include "../common.h"

#ifdef USE_BLAS
#include <cblas.h>

static inline void matmul_forward(floatX* out, const floatX* inp, const floatX* w, int N, int C, int OC, int ldw,
                                  int accumulate, stream_t s) {
    (void)s;
    if (N <= 0 || OC <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, N, OC, C, 1.0f, inp, C, w, ldw, accumulate ? 1.0f : 0.0f, out, OC);
}

static inline void matmul_backward_input(floatX* dinp, const floatX* dout, const floatX* w, int N, int C, int OC, int ldw,
                                         int accumulate, stream_t s) {
    (void)s;
    if (N <= 0 || C <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, N, C, OC, 1.0f, dout, OC, w, ldw, accumulate ? 1.0f : 0.0f,
                dinp, C);
}

static inline void matmul_backward_weight(floatX* dw, const floatX* dout, const floatX* inp, int N, int C, int OC, int ldw,
                                          stream_t s) {
    (void)s;
    if (N <= 0 || OC <= 0) return;
    cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, OC, C, N, 1.0f, dout, OC, inp, C, 1.0f, dw, ldw);
}

static inline const char* matmul_backend_name(void) { return "OpenBLAS sgemm"; }
#else
static inline const char* matmul_backend_name(void) { return "blocked loops (no BLAS found)"; }

// out[N, OC] (+)= inp[N, C] . W^T
static inline void matmul_forward(floatX* out, const floatX* inp, const floatX* w, int N, int C, int OC, int ldw,
                           int accumulate, stream_t s) {
    (void)s;
    const int RB = 4, OB = 32;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int ib = 0; ib < N; ib += RB) {
        for (int ob = 0; ob < OC; ob += OB) {
            int iend = ib + RB < N ? ib + RB : N;
            int oend = ob + OB < OC ? ob + OB : OC;
            for (int o = ob; o < oend; o++) {
                const float* wr = w + (size_t)o * ldw;
                for (int i = ib; i < iend; i++) {
                    const float* xr = inp + (size_t)i * C;
                    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
                    int c = 0;
                    for (; c + 8 <= C; c += 8)
                        for (int k = 0; k < 8; k++) lane[k] += xr[c + k] * wr[c + k];
                    float sum = ((lane[0] + lane[1]) + (lane[2] + lane[3])) + ((lane[4] + lane[5]) + (lane[6] + lane[7]));
                    for (; c < C; c++) sum += xr[c] * wr[c];
                    float* y = out + (size_t)i * OC + o;
                    *y = accumulate ? *y + sum : sum;
                }
            }
        }
    }
}

// dinp[N, C] (+)= dout[N, OC] . W
// Rows in blocks and W in tiles of rows, so a tile of W is reused from cache by a
// whole block of rows; each row still sums over o in increasing order.
static inline void matmul_backward_input(floatX* dinp, const floatX* dout, const floatX* w, int N, int C, int OC, int ldw,
                                  int accumulate, stream_t s) {
    (void)s;
    const int RB = 16, OT = 128;
    #pragma omp parallel for schedule(static)
    for (int ib = 0; ib < N; ib += RB) {
        int iend = ib + RB < N ? ib + RB : N;
        if (!accumulate)
            for (int i = ib; i < iend; i++) memset(dinp + (size_t)i * C, 0, C * sizeof(floatX));
        for (int ot = 0; ot < OC; ot += OT) {
            int oend = ot + OT < OC ? ot + OT : OC;
            for (int i = ib; i < iend; i++) {
                float* dx = dinp + (size_t)i * C;
                const float* dy = dout + (size_t)i * OC;
                for (int o = ot; o < oend; o++) {
                    float a = dy[o];
                    const float* wr = w + (size_t)o * ldw;
                    for (int c = 0; c < C; c++) dx[c] += a * wr[c];
                }
            }
        }
    }
}

// dW[OC, C] += dout[N, OC]^T . inp[N, C]   (always accumulates: gradient accumulation)
// A block of W's rows stays in cache while every input row streams past it once;
// each element sums over i in increasing order.
static inline void matmul_backward_weight(floatX* dw, const floatX* dout, const floatX* inp, int N, int C, int OC, int ldw,
                                   stream_t s) {
    (void)s;
    const int OB = 16;
    #pragma omp parallel for schedule(static)
    for (int ob = 0; ob < OC; ob += OB) {
        int oend = ob + OB < OC ? ob + OB : OC;
        for (int i = 0; i < N; i++) {
            const float* x = inp + (size_t)i * C;
            const float* dy = dout + (size_t)i * OC;
            for (int o = ob; o < oend; o++) {
                float a = dy[o];
                float* g = dw + (size_t)o * ldw;
                for (int c = 0; c < C; c++) g[c] += a * x[c];
            }
        }
    }
}

#endif  // USE_BLAS

// out[N, OC] = residual[N, OC] + inp[N, C] . W^T. out may be residual; a partial overlap
// is not allowed. The CUDA build does this in one GEMM (cuBLASLt's C = residual, D = out);
// here it is the residual copied into out, then the accumulating product: each element
// is residual + (its fp32 sum), as there.
static inline void matmul_forward_residual(floatX* out, const floatX* residual, const floatX* inp, const floatX* w, int N,
                                           int C, int OC, int ldw, stream_t s) {
    if (residual == NULL) FAIL("matmul_forward_residual: residual is NULL");
    if (N <= 0 || OC <= 0) return;
    if (out != residual) memcpy(out, residual, (size_t)N * OC * sizeof(floatX));
    if (C > 0) matmul_forward(out, inp, w, N, C, OC, ldw, 1, s);
}

// The CUDA build creates its cuBLASLt handle and workspace here; nothing to do on the CPU.
static inline void matmul_setup(void) {}
static inline void matmul_teardown(void) {}
static inline size_t matmul_workspace_bytes(void) { return 0; }
