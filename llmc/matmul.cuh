/*
Matrix multiplies of the Linear layers, on cuBLASLt. CPU twin: llmc/cpu/matmul.h
(same signatures, same semantics). Why cuBLASLt: it is the fastest GEMM we can get
on an H100 without writing one, it takes bf16 inputs/outputs with an fp32
accumulator (CUBLAS_COMPUTE_32F), and beta = 1 gives gradient accumulation for free.

Weights are stored as nn.Linear stores them, W [OC, C] row-major with a row stride
ldw (ldw >= C), so a column slice W[:, c0:c1] is addressed in place (w + c0, ldw).
inp, out and dout are contiguous row-major. cuBLAS thinks in column-major, so each
launcher below maps its row-major product onto a column-major one; the rule used
everywhere: a row-major matrix X [R, Cc] with row stride ld is, read column-major,
the matrix X^T of shape (Cc x R) with leading dimension ld.

Precision: bf16 in/out with fp32 accumulate; with -DENABLE_FP32 everything is fp32
and the compute type is CUBLAS_COMPUTE_32F (not ..._FAST_TF32), so no TF32 is used
and FP32 builds can be compared tightly with the CPU.

Cost note: matmul descriptors, layouts and the heuristic query are created per call
(a few microseconds of host time each). Nothing that depends on sizes is cached, so
there is nothing to invalidate; the GPU time of the GEMMs dominates at real sizes.

Alignment: cuBLASLt's heuristic assumes 256-byte aligned pointers unless told
otherwise; our weight slices (w + c0) and arena offsets can be aligned to as little
as one element, so the actual alignment of every pointer is passed as a preference.
If the heuristic finds no algorithm at all (it should not), a simple tiled kernel
does the product instead (one warning printed), so odd sizes always work.

The handle and the 32 MiB workspace are created once by matmul_setup() (reference
counted, so paired setup/teardown calls may nest) and freed by matmul_teardown().
The workspace is shared: matmuls must not run concurrently on two streams.
*/
#pragma once
#include "common.h"
#include <cublasLt.h>

#define cublasLtCheck(call) do { cublasStatus_t st_ = (call); if (st_ != CUBLAS_STATUS_SUCCESS) { \
    FAIL("cuBLASLt: %s failed with status %d (%s)", #call, (int)st_, cublasLtGetStatusString(st_)); } } while (0)

#if defined(ENABLE_FP32)
#define MATMUL_CUDA_TYPE CUDA_R_32F
#else
#define MATMUL_CUDA_TYPE CUDA_R_16BF
#endif

#define MATMUL_WORKSPACE_BYTES ((size_t)32 << 20)
static cublasLtHandle_t matmul_handle = NULL;
static void* matmul_workspace = NULL;
static int matmul_refcount = 0;
static int matmul_fallback_warned = 0;

static inline void matmul_setup(void) {
    if (matmul_refcount++ > 0) return;
    cublasLtCheck(cublasLtCreate(&matmul_handle));
    cudaCheck(cudaMalloc(&matmul_workspace, MATMUL_WORKSPACE_BYTES));
}

static inline void matmul_teardown(void) {
    if (matmul_refcount <= 0) return;
    if (--matmul_refcount > 0) return;
    cudaCheck(cudaFree(matmul_workspace));
    cublasLtCheck(cublasLtDestroy(matmul_handle));
    matmul_workspace = NULL;
    matmul_handle = NULL;
}

static inline size_t matmul_workspace_bytes(void) { return MATMUL_WORKSPACE_BYTES; }

// ---------------------------------------------------------------------------------
// Fallback: a plain 16x16 shared-memory tiled product, fp32 accumulation, written in
// row-major terms with explicit strides so that one kernel serves all three launchers:
//   D[i * ldd + j] (+)= sum_k A[i * a_i + k * a_k] * B[k * b_k + j * b_j]
// for i < M, j < Ncol, k < K. Used only if cuBLASLt offers no algorithm.
#define MATMUL_FB_TILE 16
__global__ void matmul_fallback_kernel(floatX* d, const floatX* a, const floatX* b, int M, int Ncol, int K,
                                       size_t a_i, size_t a_k, size_t b_k, size_t b_j, size_t ldd, int accumulate) {
    __shared__ float as[MATMUL_FB_TILE][MATMUL_FB_TILE + 1];
    __shared__ float bs[MATMUL_FB_TILE][MATMUL_FB_TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.y * MATMUL_FB_TILE + ty;  // output row
    int j = blockIdx.x * MATMUL_FB_TILE + tx;  // output column
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += MATMUL_FB_TILE) {
        int ka = k0 + tx, kb = k0 + ty;
        int ia = blockIdx.y * MATMUL_FB_TILE + ty;
        int jb = blockIdx.x * MATMUL_FB_TILE + tx;
        as[ty][tx] = (ia < M && ka < K) ? (float)a[(size_t)ia * a_i + (size_t)ka * a_k] : 0.0f;
        bs[ty][tx] = (kb < K && jb < Ncol) ? (float)b[(size_t)kb * b_k + (size_t)jb * b_j] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < MATMUL_FB_TILE; kk++) acc += as[ty][kk] * bs[kk][tx];
        __syncthreads();
    }
    if (i < M && j < Ncol) {
        floatX* y = d + (size_t)i * ldd + j;
        *y = (floatX)(accumulate ? (float)*y + acc : acc);
    }
}

static inline void matmul_fallback(floatX* d, const floatX* a, const floatX* b, int M, int Ncol, int K, size_t a_i,
                            size_t a_k, size_t b_k, size_t b_j, size_t ldd, int accumulate, stream_t s) {
    dim3 block(MATMUL_FB_TILE, MATMUL_FB_TILE);
    dim3 grid((unsigned)ceil_div((size_t)Ncol, MATMUL_FB_TILE), (unsigned)ceil_div((size_t)M, MATMUL_FB_TILE));
    matmul_fallback_kernel<<<grid, block, 0, s>>>(d, a, b, M, Ncol, K, a_i, a_k, b_k, b_j, ldd, accumulate);
    cudaCheck(cudaGetLastError());
}

// largest power of two (capped at 256) that divides the address
static inline uint32_t matmul_alignment(const void* p) {
    uintptr_t x = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (x % al) != 0) al >>= 1;
    return al;
}

// Column-major D (m x n, ld ldd) = op(A) op(B) + beta D, with op(A) m x k and op(B) k x n.
// A is stored (transa ? k x m : m x k) with ld lda; B is stored (transb ? n x k : k x n)
// with ld ldb. Returns 0 if cuBLASLt has no algorithm for it (the caller falls back).
static inline int matmul_cublaslt(floatX* d, const floatX* a, const floatX* b, int m, int n, int k, int transa, int transb,
                           int64_t lda, int64_t ldb, int64_t ldd, int accumulate, stream_t s) {
    if (!matmul_handle) FAIL("matmul: matmul_setup() was not called before the first matmul");
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulPreference_t pref;
    cublasOperation_t ta = transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtCheck(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasLtCheck(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtCheck(cublasLtMatrixLayoutCreate(&la, MATMUL_CUDA_TYPE, transa ? k : m, transa ? m : k, lda));
    cublasLtCheck(cublasLtMatrixLayoutCreate(&lb, MATMUL_CUDA_TYPE, transb ? n : k, transb ? k : n, ldb));
    cublasLtCheck(cublasLtMatrixLayoutCreate(&ld, MATMUL_CUDA_TYPE, m, n, ldd));  // C and D share it
    cublasLtCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = MATMUL_WORKSPACE_BYTES;
    uint32_t al_a = matmul_alignment(a), al_b = matmul_alignment(b), al_d = matmul_alignment(d);
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &al_a, sizeof(al_a)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &al_b, sizeof(al_b)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_d, sizeof(al_d)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &al_d, sizeof(al_d)));
    cublasLtMatmulHeuristicResult_t heur;
    int found = 0;
    // CUBLAS_STATUS_NOT_SUPPORTED here means "no algorithm": treated like found == 0
    cublasStatus_t hst = cublasLtMatmulAlgoGetHeuristic(matmul_handle, op, la, lb, ld, ld, pref, 1, &heur, &found);
    if (hst != CUBLAS_STATUS_SUCCESS && hst != CUBLAS_STATUS_NOT_SUPPORTED)
        FAIL("cuBLASLt: cublasLtMatmulAlgoGetHeuristic failed with status %d (%s) (m=%d n=%d k=%d)", (int)hst,
             cublasLtGetStatusString(hst), m, n, k);
    if (hst == CUBLAS_STATUS_SUCCESS && found > 0 && heur.state == CUBLAS_STATUS_SUCCESS) {
        const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
        cublasLtCheck(cublasLtMatmul(matmul_handle, op, &alpha, a, la, b, lb, &beta, d, ld, d, ld, &heur.algo,
                                     matmul_workspace, MATMUL_WORKSPACE_BYTES, s));
    } else {
        found = 0;
    }
    cublasLtCheck(cublasLtMatmulPreferenceDestroy(pref));
    cublasLtCheck(cublasLtMatrixLayoutDestroy(ld));
    cublasLtCheck(cublasLtMatrixLayoutDestroy(lb));
    cublasLtCheck(cublasLtMatrixLayoutDestroy(la));
    cublasLtCheck(cublasLtMatmulDescDestroy(op));
    if (!found && !matmul_fallback_warned) {
        matmul_fallback_warned = 1;
        fprintf(stderr, "warning: cuBLASLt found no algorithm for m=%d n=%d k=%d (alignments %u/%u/%u bytes); "
                        "using the slow fallback kernel for such shapes\n", m, n, k, al_a, al_b, al_d);
    }
    return found > 0;
}

// A product with an empty inner dimension is zero: out = 0, or unchanged when accumulating.
static inline void matmul_zero_rows(floatX* d, int rows, int cols, size_t ld_elems, int accumulate, stream_t s) {
    if (accumulate || rows == 0 || cols == 0) return;
    cudaCheck(cudaMemset2DAsync(d, ld_elems * sizeof(floatX), 0, (size_t)cols * sizeof(floatX), rows, s));
}

// out[N, OC] (+)= inp[N, C] . W^T
// Column-major mapping: out^T (OC x N, ld OC) = W_cm^T . inp_cm, where
//   W_cm   = W read column-major   = (C x OC, ld ldw)  -> A, transa = T
//   inp_cm = inp read column-major = (C x N,  ld C)    -> B, transb = N
//   m = OC, n = N, k = C; D = out read column-major (OC x N, ld OC).
static inline void matmul_forward(floatX* out, const floatX* inp, const floatX* w, int N, int C, int OC, int ldw,
                           int accumulate, stream_t s) {
    if (N <= 0 || OC <= 0) return;
    if (ldw < C) FAIL("matmul_forward: ldw (%d) < C (%d)", ldw, C);
    if (C <= 0) { matmul_zero_rows(out, N, OC, OC, accumulate, s); return; }
    if (!matmul_cublaslt(out, w, inp, OC, N, C, 1, 0, ldw, C, OC, accumulate, s))
        matmul_fallback(out, inp, w, N, OC, C, /*a_i*/ C, /*a_k*/ 1, /*b_k*/ 1, /*b_j*/ ldw, OC, accumulate, s);
}

// dinp[N, C] (+)= dout[N, OC] . W
// Column-major mapping: dinp^T (C x N, ld C) = W_cm . dout_cm, where
//   W_cm    = (C x OC, ld ldw) -> A, transa = N
//   dout_cm = (OC x N, ld OC)  -> B, transb = N
//   m = C, n = N, k = OC; D = dinp read column-major (C x N, ld C).
static inline void matmul_backward_input(floatX* dinp, const floatX* dout, const floatX* w, int N, int C, int OC, int ldw,
                                  int accumulate, stream_t s) {
    if (N <= 0 || C <= 0) return;
    if (ldw < C) FAIL("matmul_backward_input: ldw (%d) < C (%d)", ldw, C);
    if (OC <= 0) { matmul_zero_rows(dinp, N, C, C, accumulate, s); return; }
    if (!matmul_cublaslt(dinp, w, dout, C, N, OC, 0, 0, ldw, OC, C, accumulate, s))
        matmul_fallback(dinp, dout, w, N, C, OC, /*a_i*/ OC, /*a_k*/ 1, /*b_k*/ ldw, /*b_j*/ 1, C, accumulate, s);
}

// dW[OC, C] (row stride ldw) += dout[N, OC]^T . inp[N, C]   (always accumulates)
// Column-major mapping: dW_cm (C x OC, ld ldw) += inp_cm . dout_cm^T, where
//   inp_cm  = (C x N,  ld C)  -> A, transa = N
//   dout_cm = (OC x N, ld OC) -> B, transb = T
//   m = C, n = OC, k = N; D = dW read column-major (C x OC, ld ldw), beta = 1.
static inline void matmul_backward_weight(floatX* dw, const floatX* dout, const floatX* inp, int N, int C, int OC, int ldw,
                                   stream_t s) {
    if (C <= 0 || OC <= 0 || N <= 0) return;  // N == 0 adds nothing
    if (ldw < C) FAIL("matmul_backward_weight: ldw (%d) < C (%d)", ldw, C);
    if (!matmul_cublaslt(dw, inp, dout, C, OC, N, 0, 1, C, OC, ldw, 1, s))
        matmul_fallback(dw, dout, inp, OC, C, N, /*a_i*/ 1, /*a_k*/ OC, /*b_k*/ C, /*b_j*/ 1, ldw, 1, s);
}
