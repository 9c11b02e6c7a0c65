/*
CPU twin of llmc/kernels/matmul.cuh. Weights are stored as nn.Linear stores them, [OC, C]
row-major, with a row stride ldw so that a slice of columns (w2[:, c0:c1] in the
hidden-chunked FFN) is addressed in place: pass w + c0 and ldw = F.
Summation order is fixed (8 explicit lanes, then a fixed tree), so results do not
depend on the number of OpenMP threads: resume and offload stay bit-exact.

With USE_DNNL or USE_BLAS (the Makefile defines one when it finds the library: oneDNN's
dnnl_sgemm, chosen by measurement in docs/results/cpu_blas_choice.md, else OpenBLAS's
cblas_sgemm) the three products are one sgemm call each instead: the same contract,
5-10x the speed on this kind of machine. With a fixed number of threads each library
gives the same bits on every call and every run (dev/bench/blas_compare.c checks it), so
resume and offload stay bit-exact; unlike the loops, oneDNN and OpenBLAS may give other
bits (within rounding) on another number of threads. The blocked loops below remain the
fallback and are what the emulator (dev/emu) and the dev/cuda ladders hold the CUDA
kernels against.
*/
#pragma once
#include "../../core/common.h"

#if defined(USE_BLAS) || defined(USE_DNNL)
// One row-major sgemm, C[M, N] = A . B (each operand transposed or not) + beta C, on the
// library the Makefile found (`make info` names it):
//   USE_DNNL                   oneDNN's dnnl_sgemm
//   USE_BLAS                   a cblas_sgemm: Debian's OpenBLAS (OpenMP build) or BLIS
//   USE_BLAS + USE_BLIS        BLIS: its thread count set from OpenMP's on the first call
//   BLAS_SYMBOL_PREFIX=p       an OpenBLAS whose symbols carry a prefix (PyPI's scipy-openblas32:
//                              scipy_cblas_sgemm); its pkg-config file defines the macro
// None of them is told the processor type: each detects it itself (OPENBLAS_CORETYPE is
// never set: older OpenBLAS builds compute wrong results or crash on some processors).
#ifdef USE_DNNL
#include <oneapi/dnnl/dnnl.h>
#define MATMUL_BACKEND "oneDNN dnnl_sgemm"
#else
#include <cblas.h>
#ifdef USE_BLIS
#include <blis.h>
#define MATMUL_BACKEND "BLIS sgemm"
#else
#define MATMUL_BACKEND "OpenBLAS sgemm"
#endif
#ifdef BLAS_SYMBOL_PREFIX
#define LLMC_BLAS_CAT_(a, b) a##b
#define LLMC_BLAS_CAT(a, b) LLMC_BLAS_CAT_(a, b)
#define llmc_cblas_sgemm LLMC_BLAS_CAT(BLAS_SYMBOL_PREFIX, cblas_sgemm)
#else
#define llmc_cblas_sgemm cblas_sgemm
#endif
#endif
#ifdef _OPENMP
#include <omp.h>
#endif

static inline void matmul_sgemm(int trans_a, int trans_b, int M, int N, int K, const float* a, int lda, const float* b,
                                int ldb, float beta, float* c, int ldc) {
#ifdef USE_DNNL
    dnnl_status_t st = dnnl_sgemm(trans_a ? 'T' : 'N', trans_b ? 'T' : 'N', M, N, K, 1.0f, a, lda, b, ldb, beta, c, ldc);
    if (st != dnnl_success) FAIL("dnnl_sgemm(M=%d, N=%d, K=%d) failed with status %d", M, N, K, (int)st);
#else
#ifdef USE_BLIS
    // BLIS runs on 1 thread unless told otherwise (BLIS_NUM_THREADS, or OMP_NUM_THREADS set
    // in the environment): here, as many as OpenMP's parallel regions use
    static int blis_threads = 0;
    if (!blis_threads) {
#ifdef _OPENMP
        blis_threads = omp_get_max_threads();
#else
        blis_threads = 1;
#endif
        bli_thread_set_num_threads(blis_threads);
    }
#endif
    llmc_cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans, trans_b ? CblasTrans : CblasNoTrans, M, N, K, 1.0f,
                     a, lda, b, ldb, beta, c, ldc);
#endif
}

static inline void matmul_forward(floatX* out, const floatX* inp, const floatX* w, int N, int C, int OC, int ldw,
                                  int accumulate, stream_t s) {
    (void)s;
    if (N <= 0 || OC <= 0) return;
    matmul_sgemm(0, 1, N, OC, C, inp, C, w, ldw, accumulate ? 1.0f : 0.0f, out, OC);
}

static inline void matmul_backward_input(floatX* dinp, const floatX* dout, const floatX* w, int N, int C, int OC, int ldw,
                                         int accumulate, stream_t s) {
    (void)s;
    if (N <= 0 || C <= 0) return;
    matmul_sgemm(0, 0, N, C, OC, dout, OC, w, ldw, accumulate ? 1.0f : 0.0f, dinp, C);
}

static inline void matmul_backward_weight(floatX* dw, const floatX* dout, const floatX* inp, int N, int C, int OC, int ldw,
                                          stream_t s) {
    (void)s;
    if (N <= 0 || OC <= 0) return;
    matmul_sgemm(1, 0, OC, C, N, dout, OC, inp, C, 1.0f, dw, ldw);
}

static inline const char* matmul_backend_name(void) { return MATMUL_BACKEND; }
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

#endif  // USE_BLAS || USE_DNNL

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
// the CUDA build's table of cuBLASLt algorithms per shape: the CPU build has none
static inline int matmul_algo_line(int i, char* buf, size_t n) { (void)i; (void)buf; (void)n; return 0; }
static inline size_t matmul_workspace_bytes(void) { return 0; }
