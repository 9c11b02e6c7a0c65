/*
Matrix multiplies of the Linear layers, on cuBLASLt. CPU twin: llmc/kernels/cpu/matmul.h
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

Algorithm cache: the descriptors, the layouts and the algorithm that
cublasLtMatmulAlgoGetHeuristic returns are kept in a fixed table of
MATMUL_ALGO_CACHE_SIZE entries, one per (m, n, k, transposes, lda/ldb/ldd, the four
pointer alignments, beta = 0 / beta = 1 with C = D / separate C), filled on first use
and emptied by matmul_teardown(). The key holds everything that the descriptors and
the heuristic see, so an entry never goes stale. "No algorithm" is cached too (such
shapes go straight to the fallback kernel). The table is a static array: nothing is
allocated on the device, and on the host only what cuBLASLt allocates for a
descriptor, once per shape. When the table is full, further shapes are queried on
every call, as before (one warning). Predicted gain, a PREDICTION (never measured):
the heuristic query costs host time of the order of 10-50 us per call; a llama3-1B step
makes ~350 GEMM calls, so ~5-15 ms of host time per step goes away. The GPU time does
not change, and it only matters where the host, not the GPU, sets the pace (small
models, short sequences).

Residual products: matmul_forward_residual(out, residual, ...) computes
out = residual + inp . W^T through cuBLASLt's separate C (residual, beta = 1) and D
(out) matrices, so the trainers need no device copy of the residual stream before an
accumulating GEMM. out may be residual itself (C = D, which cuBLASLt allows when both
have the same layout, as here). Predicted gain at llama3-1B, B=4 T=2048 (a PREDICTION):
one [8192, 2048] bf16 copy (32 MiB read + 32 MiB written) is ~22 us at ~2.9 TB/s;
two per layer and 16 layers: ~0.7 ms per forward (and again in each recompute).

Alignment: cuBLASLt's heuristic assumes 256-byte aligned pointers unless told
otherwise; our weight slices (w + c0) and arena offsets can be aligned to as little
as one element, so the actual alignment of every pointer is passed as a preference.
If the heuristic finds no algorithm at all (it should not), a simple tiled kernel
does the product instead (one warning printed), so odd sizes always work.

Split-K: the heuristic may split the inner dimension of a product whose output has too
few tiles to fill the GPU (the small outputs of the tests; at llama3-1B the [512 x 2048]
k and v weight gradients). Only the scheme that sums the parts in fp32 in the workspace
is allowed (CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE), so that every product is rounded to
bf16 once (the "in place" scheme adds the parts up in D's type). The profile prints each
shape's algorithm (matmul_algo_line).

In-place accumulation on the H200 (C = D, beta = 1: dW, forward/backward-input with
accumulate, the residual in place): the dev/cuda ladder's failed checks at 64x96 and
130x192, where all four pointers and lda/ldb/ldd are 16-byte aligned, are reproduced bit
for bit (bad count, first bad element, max abs/rel, worst err/tol, both runs) by
D = round(C + round(A B)), the product rounded to bf16 before C is added, and by nothing
else tried (split-K parts summed in bf16, a k-range lost or doubled, C lost). A separate C
(the residual into another buffer) passed at the same shapes with one rounding, and the
split-K restriction above left the numbers unchanged. The extra rounding is at most half
a bf16 step of |A B| (it shows only where C + A B cancels), the error of a bf16 product
added to C in bf16, but not the one-rounding product this file promises. The emulator's
cuBLASLt model reproduces it (EMU_LT_MODE=2); the ladder diagnoses each such failure on
the GPU (its algorithm, every candidate with C = D against a separate C, split-K
forbidden, lower alignment preferences), which says which choice of algorithm avoids it.

The handle and the 32 MiB workspace are created once by matmul_setup() (reference
counted, so paired setup/teardown calls may nest) and freed by matmul_teardown().
The workspace is shared: matmuls must not run concurrently on two streams.
*/
#pragma once
#include "../core/common.h"
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

// The algorithm cache (see the header). The key is everything the descriptors and the
// heuristic query see; c_mode: 0 beta = 0, 1 beta = 1 with C = D, 2 beta = 1 with C != D.
struct MatmulAlgoKey {
    int m, n, k, transa, transb, c_mode;
    int64_t lda, ldb, ldd;
    uint32_t al_a, al_b, al_c, al_d;
};
struct MatmulAlgoEntry {
    MatmulAlgoKey key;
    int found;  // 0: cuBLASLt has no algorithm for it (descriptors not kept)
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, ld;
    cublasLtMatmulAlgo_t algo;
    unsigned long long calls;  // products run with it (the profile's GEMM table)
};
#define MATMUL_ALGO_CACHE_SIZE 128
static MatmulAlgoEntry matmul_algo_cache[MATMUL_ALGO_CACHE_SIZE];
static int matmul_algo_cache_n = 0;
// entries in use at most: MATMUL_ALGO_CACHE_SIZE; tests and the dev/cuda ladder lower it
// (0: query on every call, the behaviour before the cache)
static int matmul_algo_cache_cap = MATMUL_ALGO_CACHE_SIZE;
static int matmul_algo_cache_full_warned = 0;
static unsigned long long matmul_algo_cache_hits = 0, matmul_algo_cache_misses = 0, matmul_algo_uncached = 0;

static inline void matmul_algo_cache_clear(void) {
    for (int i = 0; i < matmul_algo_cache_n; i++) {
        MatmulAlgoEntry* e = &matmul_algo_cache[i];
        if (!e->found) continue;
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->ld));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->lb));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->la));
        cublasLtCheck(cublasLtMatmulDescDestroy(e->op));
    }
    matmul_algo_cache_n = 0;
}

static inline void matmul_setup(void) {
    if (matmul_refcount++ > 0) return;
    cublasLtCheck(cublasLtCreate(&matmul_handle));
    cudaCheck(cudaMalloc(&matmul_workspace, MATMUL_WORKSPACE_BYTES));
    matmul_algo_cache_n = 0;
}

static inline void matmul_teardown(void) {
    if (matmul_refcount <= 0) return;
    if (--matmul_refcount > 0) return;
    matmul_algo_cache_clear();  // its descriptors belong to this handle
    cudaCheck(cudaFree(matmul_workspace));
    cublasLtCheck(cublasLtDestroy(matmul_handle));
    matmul_workspace = NULL;
    matmul_handle = NULL;
}

static inline size_t matmul_workspace_bytes(void) { return MATMUL_WORKSPACE_BYTES; }

// ---------------------------------------------------------------------------------
// Fallback: a plain 16x16 shared-memory tiled product, fp32 accumulation, written in
// row-major terms with explicit strides so that one kernel serves all three launchers:
//   D[i * ldd + j] = [C[i * ldd + j] +] sum_k A[i * a_i + k * a_k] * B[k * b_k + j * b_j]
// for i < M, j < Ncol, k < K; C (same layout as D) is NULL for a plain product, D to
// accumulate, or a residual. Used only if cuBLASLt offers no algorithm.
// Row tiles go along grid.x (up to 2^31 - 1 blocks), column tiles along grid.y (at most
// 65535: Ncol up to 1048560): the rows are the long side (B*T tokens; a video DiT's 2^20 rows
// and more, which as grid.y stopped the launch at 65536 tiles = 1048576 rows).
#define MATMUL_FB_TILE 16
__global__ void matmul_fallback_kernel(floatX* d, const floatX* c, const floatX* a, const floatX* b, int M, int Ncol,
                                       int K, size_t a_i, size_t a_k, size_t b_k, size_t b_j, size_t ldd) {
    __shared__ float as[MATMUL_FB_TILE][MATMUL_FB_TILE + 1];
    __shared__ float bs[MATMUL_FB_TILE][MATMUL_FB_TILE + 1];
    int tx = threadIdx.x, ty = threadIdx.y;
    int i = blockIdx.x * MATMUL_FB_TILE + ty;  // output row
    int j = blockIdx.y * MATMUL_FB_TILE + tx;  // output column
    float acc = 0.0f;
    for (int k0 = 0; k0 < K; k0 += MATMUL_FB_TILE) {
        int ka = k0 + tx, kb = k0 + ty;
        int ia = blockIdx.x * MATMUL_FB_TILE + ty;
        int jb = blockIdx.y * MATMUL_FB_TILE + tx;
        as[ty][tx] = (ia < M && ka < K) ? (float)a[(size_t)ia * a_i + (size_t)ka * a_k] : 0.0f;
        bs[ty][tx] = (kb < K && jb < Ncol) ? (float)b[(size_t)kb * b_k + (size_t)jb * b_j] : 0.0f;
        __syncthreads();
        for (int kk = 0; kk < MATMUL_FB_TILE; kk++) acc += as[ty][kk] * bs[kk][tx];
        __syncthreads();
    }
    if (i < M && j < Ncol) {
        size_t at = (size_t)i * ldd + j;
        float y = c ? (float)c[at] + acc : acc;  // c may be d: this thread reads its element first
        d[at] = (floatX)y;
    }
}

static inline void matmul_fallback_c(floatX* d, const floatX* c, const floatX* a, const floatX* b, int M, int Ncol, int K,
                                     size_t a_i, size_t a_k, size_t b_k, size_t b_j, size_t ldd, stream_t s) {
    dim3 block(MATMUL_FB_TILE, MATMUL_FB_TILE);
    size_t col_tiles = ceil_div((size_t)Ncol, MATMUL_FB_TILE);
    if (col_tiles > 65535)
        FAIL("matmul fallback: %d output columns are more than its grid holds (65535 tiles of %d)", Ncol, MATMUL_FB_TILE);
    dim3 grid((unsigned)ceil_div((size_t)M, MATMUL_FB_TILE), (unsigned)col_tiles);
    matmul_fallback_kernel<<<grid, block, 0, s>>>(d, c, a, b, M, Ncol, K, a_i, a_k, b_k, b_j, ldd);
    cudaCheck(cudaGetLastError());
}
static inline void matmul_fallback(floatX* d, const floatX* a, const floatX* b, int M, int Ncol, int K, size_t a_i,
                                   size_t a_k, size_t b_k, size_t b_j, size_t ldd, int accumulate, stream_t s) {
    matmul_fallback_c(d, accumulate ? d : NULL, a, b, M, Ncol, K, a_i, a_k, b_k, b_j, ldd, s);
}

// largest power of two (capped at 256) that divides the address
static inline uint32_t matmul_alignment(const void* p) {
    uintptr_t x = (uintptr_t)p;
    uint32_t al = 256;
    while (al > 1 && (x % al) != 0) al >>= 1;
    return al;
}

// The descriptors of one problem and the heuristic's first `want` algorithms, best first
// (cuBLASLt's order). Returns how many it found (0: nothing to destroy, the descriptors are
// already gone); the caller destroys the descriptors otherwise. The cache keeps the first;
// dev/cuda/matmul.cu times them all. reductions: the split-K reduction schemes allowed.
static inline int matmul_lt_candidates(MatmulAlgoEntry* e, cublasLtMatmulHeuristicResult_t* heur, int want,
                                       uint32_t reductions = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE) {
    const MatmulAlgoKey& kk = e->key;
    cublasLtMatmulPreference_t pref;
    cublasOperation_t ta = kk.transa ? CUBLAS_OP_T : CUBLAS_OP_N, tb = kk.transb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasLtCheck(cublasLtMatmulDescCreate(&e->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
    cublasLtCheck(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof(ta)));
    cublasLtCheck(cublasLtMatmulDescSetAttribute(e->op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof(tb)));
    cublasLtCheck(cublasLtMatrixLayoutCreate(&e->la, MATMUL_CUDA_TYPE, kk.transa ? kk.k : kk.m, kk.transa ? kk.m : kk.k, kk.lda));
    cublasLtCheck(cublasLtMatrixLayoutCreate(&e->lb, MATMUL_CUDA_TYPE, kk.transb ? kk.n : kk.k, kk.transb ? kk.k : kk.n, kk.ldb));
    cublasLtCheck(cublasLtMatrixLayoutCreate(&e->ld, MATMUL_CUDA_TYPE, kk.m, kk.n, kk.ldd));  // C and D share it
    cublasLtCheck(cublasLtMatmulPreferenceCreate(&pref));
    uint64_t ws = MATMUL_WORKSPACE_BYTES;
    uint32_t al_c = kk.c_mode == 2 ? kk.al_c : kk.al_d;
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof(ws)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &kk.al_a, sizeof(kk.al_a)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &kk.al_b, sizeof(kk.al_b)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &al_c, sizeof(al_c)));
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &kk.al_d, sizeof(kk.al_d)));
    // split-K only with its parts summed in fp32 in the workspace (one rounding at the end):
    // the "in place" scheme adds the parts up in D's type. A mask of 0 (NONE) forbids
    // split-K, which the dev/cuda ladder's diagnosis uses.
    cublasLtCheck(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &reductions, sizeof(reductions)));
    int found = 0;
    // CUBLAS_STATUS_NOT_SUPPORTED here means "no algorithm": treated like found == 0
    cublasStatus_t hst = cublasLtMatmulAlgoGetHeuristic(matmul_handle, e->op, e->la, e->lb, e->ld, e->ld, pref, want, heur, &found);
    if (hst != CUBLAS_STATUS_SUCCESS && hst != CUBLAS_STATUS_NOT_SUPPORTED)
        FAIL("cuBLASLt: cublasLtMatmulAlgoGetHeuristic failed with status %d (%s) (m=%d n=%d k=%d)", (int)hst,
             cublasLtGetStatusString(hst), kk.m, kk.n, kk.k);
    cublasLtCheck(cublasLtMatmulPreferenceDestroy(pref));
    int n = 0;  // the usable ones, in order
    if (hst == CUBLAS_STATUS_SUCCESS)
        for (int i = 0; i < found; i++)
            if (heur[i].state == CUBLAS_STATUS_SUCCESS) heur[n++] = heur[i];
    if (n == 0) {
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->ld));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->lb));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->la));
        cublasLtCheck(cublasLtMatmulDescDestroy(e->op));
    }
    return n;
}

// The descriptors and the heuristic's choice for one problem. Returns 1 and fills e
// (descriptors and algo) if cuBLASLt has an algorithm; 0 otherwise (nothing to destroy).
static inline int matmul_lt_prepare(MatmulAlgoEntry* e) {
    cublasLtMatmulHeuristicResult_t heur;
    e->calls = 0;
    e->found = matmul_lt_candidates(e, &heur, 1) > 0;
    if (e->found) {
        e->algo = heur.algo;
    } else if (!matmul_fallback_warned) {
        const MatmulAlgoKey& kk = e->key;
        matmul_fallback_warned = 1;
        fprintf(stderr, "warning: cuBLASLt found no algorithm for m=%d n=%d k=%d (alignments %u/%u/%u/%u bytes); "
                        "using the slow fallback kernel for such shapes\n", kk.m, kk.n, kk.k, kk.al_a, kk.al_b,
                kk.c_mode == 2 ? kk.al_c : kk.al_d, kk.al_d);
    }
    return e->found;
}

// How cuBLASLt configured an algorithm (ids of cublasLt.h's enums; a tile id up to 35 by
// its name), one line: the qkv and wo products ran 15-25% below the FFN's on the H200, and
// this line, next to each shape's time, tells whether the heuristic's tile, stages, split-K
// or cluster shape is why.
static inline void matmul_algo_config_text(const cublasLtMatmulAlgo_t* algo, char* buf, size_t n) {
    static const char* tiles[] = {"?", "8x8", "8x16", "16x8", "8x32", "16x16", "32x8", "8x64", "16x32", "32x16",
                                  "64x8", "32x32", "32x64", "64x32", "32x128", "64x64", "128x32", "64x128", "128x64",
                                  "64x256", "128x128", "256x64", "64x512", "128x256", "256x128", "512x64", "64x96",
                                  "96x64", "96x128", "128x160", "160x128", "192x128", "128x192", "128x96", "32x256",
                                  "256x32"};
    int32_t id = 0, splitk = 0;
    uint32_t tile = 0, stages = 0, swizzle = 0, reduction = 0;
    uint16_t cluster = 0;
    size_t w = 0;
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_ID, &id, sizeof id, &w));
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof tile, &w));
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_STAGES_ID, &stages, sizeof stages, &w));
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splitk, sizeof splitk, &w));
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &reduction, sizeof reduction, &w));
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING, &swizzle, sizeof swizzle, &w));
    cublasLtCheck(cublasLtMatmulAlgoConfigGetAttribute(algo, CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID, &cluster, sizeof cluster, &w));
    char tname[16];
    if (tile < sizeof tiles / sizeof tiles[0]) snprintf(tname, sizeof tname, "%s", tiles[tile]);
    else snprintf(tname, sizeof tname, "#%u", tile);
    snprintf(buf, n, "algo %d tile %s stages #%u split-k %d%s swizzle %u cluster #%u", id, tname, stages, splitk,
             reduction == 1 ? " (in place)" : reduction == 2 ? " (fp32)" : reduction == 4 ? " (output type)" : "", swizzle,
             (unsigned)cluster);
}

// Line i of the GEMM table the profile prints (0 past the last cached shape): the shape in
// cuBLASLt's column-major terms, how many products used it, and the algorithm.
static inline int matmul_algo_line(int i, char* buf, size_t n) {
    if (i < 0 || i >= matmul_algo_cache_n) return 0;
    const MatmulAlgoEntry* e = &matmul_algo_cache[i];
    const MatmulAlgoKey& k = e->key;
    static const char* beta[3] = {"D = AB", "D += AB", "D = C + AB"};
    int len = snprintf(buf, n, "m %6d n %6d k %6d %c%c %-10s calls %6llu  ", k.m, k.n, k.k, k.transa ? 'T' : 'N',
                       k.transb ? 'T' : 'N', beta[k.c_mode], e->calls);
    if (len < 0 || (size_t)len >= n) return 1;
    if (e->found) matmul_algo_config_text(&e->algo, buf + len, n - (size_t)len);
    else snprintf(buf + len, n - (size_t)len, "no cuBLASLt algorithm: the fallback kernel");
    return 1;
}

// The last product handed to cuBLASLt, as handed (C is D when beta = 0): the dev/cuda
// ladder diagnoses a wrong result from what was called, not from its own idea of the call.
struct MatmulLtCall {
    MatmulAlgoKey key;
    cublasLtMatmulAlgo_t algo;
    const void *a, *b, *c;
    void* d;
    float alpha, beta;
    unsigned long long seq;  // products so far
};
static MatmulLtCall matmul_last_lt_call;

// The cache key of one product (arguments as matmul_cublaslt takes them).
static inline MatmulAlgoKey matmul_algo_key(const void* d, const void* c, const void* a, const void* b, int m, int n, int k,
                                            int transa, int transb, int64_t lda, int64_t ldb, int64_t ldd) {
    MatmulAlgoKey key;
    memset(&key, 0, sizeof key);  // padding too: keys are compared with memcmp
    key.m = m; key.n = n; key.k = k; key.transa = transa; key.transb = transb;
    key.c_mode = c == NULL ? 0 : c == d ? 1 : 2;
    key.lda = lda; key.ldb = ldb; key.ldd = ldd;
    key.al_a = matmul_alignment(a); key.al_b = matmul_alignment(b); key.al_d = matmul_alignment(d);
    key.al_c = key.c_mode == 2 ? matmul_alignment(c) : 0;
    return key;
}

// The cached entry of a key, or NULL.
static inline MatmulAlgoEntry* matmul_algo_find(const MatmulAlgoKey* key) {
    for (int i = 0; i < matmul_algo_cache_n; i++)
        if (memcmp(&matmul_algo_cache[i].key, key, sizeof *key) == 0) return &matmul_algo_cache[i];
    return NULL;
}

// Column-major D (m x n, ld ldd) = op(A) op(B) [+ C], with op(A) m x k and op(B) k x n.
// A is stored (transa ? k x m : m x k) with ld lda; B is stored (transb ? n x k : k x n)
// with ld ldb; C (NULL: beta = 0) has D's layout and may be D. Returns 0 if cuBLASLt has
// no algorithm for it (the caller falls back).
static inline int matmul_cublaslt(floatX* d, const floatX* c, const floatX* a, const floatX* b, int m, int n, int k,
                                  int transa, int transb, int64_t lda, int64_t ldb, int64_t ldd, stream_t s) {
    if (!matmul_handle) FAIL("matmul: matmul_setup() was not called before the first matmul");
    MatmulAlgoKey key = matmul_algo_key(d, c, a, b, m, n, k, transa, transb, lda, ldb, ldd);
    MatmulAlgoEntry* e = matmul_algo_find(&key);
    MatmulAlgoEntry local;
    int cached = 1;
    if (e) {
        matmul_algo_cache_hits++;
    } else if (matmul_algo_cache_n < matmul_algo_cache_cap && matmul_algo_cache_n < MATMUL_ALGO_CACHE_SIZE) {
        matmul_algo_cache_misses++;
        e = &matmul_algo_cache[matmul_algo_cache_n++];
        e->key = key;
        matmul_lt_prepare(e);
    } else {
        if (!matmul_algo_cache_full_warned && matmul_algo_cache_cap > 0) {
            matmul_algo_cache_full_warned = 1;
            fprintf(stderr, "warning: matmul: the cuBLASLt algorithm cache is full (%d shapes); further shapes are "
                            "queried on every call (host time, not GPU time)\n", matmul_algo_cache_n);
        }
        matmul_algo_uncached++;
        cached = 0;
        e = &local;
        e->key = key;
        matmul_lt_prepare(e);
    }
    if (!e->found) return 0;
    e->calls++;
    const float alpha = 1.0f, beta = c ? 1.0f : 0.0f;
    matmul_last_lt_call.key = key; matmul_last_lt_call.algo = e->algo;
    matmul_last_lt_call.a = a; matmul_last_lt_call.b = b; matmul_last_lt_call.c = c ? c : d; matmul_last_lt_call.d = d;
    matmul_last_lt_call.alpha = alpha; matmul_last_lt_call.beta = beta; matmul_last_lt_call.seq++;
    cublasLtCheck(cublasLtMatmul(matmul_handle, e->op, &alpha, a, e->la, b, e->lb, &beta, c ? c : d, e->ld, d, e->ld,
                                 &e->algo, matmul_workspace, MATMUL_WORKSPACE_BYTES, s));
    if (!cached) {
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->ld));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->lb));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e->la));
        cublasLtCheck(cublasLtMatmulDescDestroy(e->op));
    }
    return 1;
}

// A product with an empty inner dimension is zero: out = 0, or unchanged when accumulating.
static inline void matmul_zero_rows(floatX* d, int rows, int cols, size_t ld_elems, int accumulate, stream_t s) {
    if (accumulate || rows == 0 || cols == 0) return;
    cudaCheck(cudaMemset2DAsync(d, ld_elems * sizeof(floatX), 0, (size_t)cols * sizeof(floatX), rows, s));
}

// out[N, OC] = [res[N, OC] +] inp[N, C] . W^T   (res NULL, out, or another buffer)
// Column-major mapping: out^T (OC x N, ld OC) = W_cm^T . inp_cm, where
//   W_cm   = W read column-major   = (C x OC, ld ldw)  -> A, transa = T
//   inp_cm = inp read column-major = (C x N,  ld C)    -> B, transb = N
//   m = OC, n = N, k = C; D = out read column-major (OC x N, ld OC); C = res, same layout.
static inline void matmul_forward_impl(floatX* out, const floatX* res, const floatX* inp, const floatX* w, int N, int C,
                                       int OC, int ldw, stream_t s, const char* who) {
    if (N <= 0 || OC <= 0) return;
    if (ldw < C) FAIL("%s: ldw (%d) < C (%d)", who, ldw, C);
    if (C <= 0) {  // empty inner dimension: out = res, or 0
        if (res == NULL) matmul_zero_rows(out, N, OC, OC, 0, s);
        else if (res != out)
            cudaCheck(cudaMemcpyAsync(out, res, (size_t)N * OC * sizeof(floatX), cudaMemcpyDeviceToDevice, s));
        return;
    }
    if (!matmul_cublaslt(out, res, w, inp, OC, N, C, 1, 0, ldw, C, OC, s))
        matmul_fallback_c(out, res, inp, w, N, OC, C, /*a_i*/ C, /*a_k*/ 1, /*b_k*/ 1, /*b_j*/ ldw, OC, s);
}

// out[N, OC] (+)= inp[N, C] . W^T
static inline void matmul_forward(floatX* out, const floatX* inp, const floatX* w, int N, int C, int OC, int ldw,
                                  int accumulate, stream_t s) {
    matmul_forward_impl(out, accumulate ? out : NULL, inp, w, N, C, OC, ldw, s, "matmul_forward");
}

// out[N, OC] = residual[N, OC] + inp[N, C] . W^T, in one GEMM (C = residual, D = out).
// out may be residual (then it is matmul_forward with accumulate = 1); a partial overlap
// of the two is not allowed.
static inline void matmul_forward_residual(floatX* out, const floatX* residual, const floatX* inp, const floatX* w, int N,
                                           int C, int OC, int ldw, stream_t s) {
    if (residual == NULL) FAIL("matmul_forward_residual: residual is NULL");
    matmul_forward_impl(out, residual, inp, w, N, C, OC, ldw, s, "matmul_forward_residual");
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
    const floatX* c = accumulate ? dinp : NULL;
    if (!matmul_cublaslt(dinp, c, w, dout, C, N, OC, 0, 0, ldw, OC, C, s))
        matmul_fallback_c(dinp, c, dout, w, N, C, OC, /*a_i*/ OC, /*a_k*/ 1, /*b_k*/ ldw, /*b_j*/ 1, C, s);
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
    if (!matmul_cublaslt(dw, dw, inp, dout, C, OC, N, 0, 1, C, OC, ldw, s))
        matmul_fallback_c(dw, dw, dout, inp, OC, C, N, /*a_i*/ 1, /*a_k*/ OC, /*b_k*/ C, /*b_j*/ 1, ldw, s);
}
