/*
Shim for host emulation (dev/emu): cuBLASLt is NOT emulated. What this file provides:

  mode 0 (emu::lt_mode = 0, the default): cublasLtMatmulAlgoGetHeuristic finds no
    algorithm (CUBLAS_STATUS_NOT_SUPPORTED), so llmc/kernels/matmul.cuh takes its own fallback
    path: the tiled matmul_fallback_kernel runs in the emulator. This is what checks
    the matmul kernel code.

  mode 1 (emu::lt_mode = 1): a MODEL of the documented cublasLtMatmul contract, used to
    check how the launchers of llmc/kernels/matmul.cuh map their row-major products onto
    cuBLASLt's column-major one (m, n, k, transposes, leading dimensions, beta, the
    alignments they declare). The model validates the descriptors (shapes consistent
    with the transposes, ld >= rows, one data type for A/B/C/D, fp32 compute and scale,
    attribute sizes, pointers aligned as declared in the preference, workspace) and
    computes D = alpha op(A) op(B) + beta C in double, rounding once to the output type;
    C is not read when beta == 0. C and D as cuBLASLt documents them for cublasLtMatmul:
    in place (C == D) only with Cdesc describing the same layout as Ddesc (type, rows,
    cols, ld: the model has no order or batch attributes, so those are column-major and
    1), otherwise CUBLAS_STATUS_INVALID_VALUE ("parameters in conflict"); out of place
    (C != D) with the same type, rows and cols, any ld for C (0 broadcasts), and C and D
    not overlapping. It says nothing about cuBLASLt's own algorithms,
    accuracy, speed, or which shapes have an algorithm on a real GPU.

  mode 2: mode 1 plus what cuBLASLt did on the H200 (the dev/cuda matmul ladder's
    failures): an in-place (C == D) bf16 product with beta != 0 whose four pointers and
    lda/ldb/ldd are all 16-byte aligned comes back as round(C + round(A B)), the product
    rounded to bf16 before C is added. This reproduces every failed check of that ladder
    in the H200 runs bit for bit (count, first bad element, max abs/rel, worst err/tol)
    and every check that passed there; it shows what the ladder's diagnosis prints for
    such a failure (EMU_LT_MODE=2 on the ladder).
*/
#pragma once
#define EMU_SHIM_CUBLASLT 1
#include "cuda_runtime.h"
#include "cuda_bf16.h"

typedef enum {
    CUBLAS_STATUS_SUCCESS = 0,
    CUBLAS_STATUS_NOT_INITIALIZED = 1,
    CUBLAS_STATUS_ALLOC_FAILED = 3,
    CUBLAS_STATUS_INVALID_VALUE = 7,
    CUBLAS_STATUS_ARCH_MISMATCH = 8,
    CUBLAS_STATUS_MAPPING_ERROR = 11,
    CUBLAS_STATUS_EXECUTION_FAILED = 13,
    CUBLAS_STATUS_INTERNAL_ERROR = 14,
    CUBLAS_STATUS_NOT_SUPPORTED = 15,
} cublasStatus_t;
typedef enum { CUBLAS_OP_N = 0, CUBLAS_OP_T = 1, CUBLAS_OP_C = 2 } cublasOperation_t;
typedef enum cudaDataType_t { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 } cudaDataType;
typedef enum {
    CUBLAS_COMPUTE_16F = 64,
    CUBLAS_COMPUTE_32F = 68,
    CUBLAS_COMPUTE_64F = 70,
    CUBLAS_COMPUTE_32F_FAST_16F = 74,
    CUBLAS_COMPUTE_32F_FAST_16BF = 75,
    CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
} cublasComputeType_t;
typedef enum {
    CUBLASLT_MATMUL_DESC_COMPUTE_TYPE = 0,
    CUBLASLT_MATMUL_DESC_SCALE_TYPE = 1,
    CUBLASLT_MATMUL_DESC_POINTER_MODE = 2,
    CUBLASLT_MATMUL_DESC_TRANSA = 3,
    CUBLASLT_MATMUL_DESC_TRANSB = 4,
    CUBLASLT_MATMUL_DESC_TRANSC = 5,
    CUBLASLT_MATMUL_DESC_EPILOGUE = 7,
    CUBLASLT_MATMUL_DESC_BIAS_POINTER = 8,
} cublasLtMatmulDescAttributes_t;
typedef enum {
    CUBLASLT_MATMUL_PREF_SEARCH_MODE = 0,
    CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES = 1,
    CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK = 3,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES = 5,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES = 6,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES = 7,
    CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES = 8,
} cublasLtMatmulPreferenceAttributes_t;
typedef enum { CUBLASLT_EPILOGUE_DEFAULT = 1 } cublasLtEpilogue_t;

struct cublasLtMatmulAlgo_t { uint64_t data[8]; };
struct cublasLtMatmulHeuristicResult_t {
    cublasLtMatmulAlgo_t algo;
    size_t workspaceSize;
    cublasStatus_t state;
    float wavesCount;
    int reserved[4];
};

namespace emu {
inline int lt_mode = 0;                        // 0: no algorithm (fallback kernel), 1: the model, 2: + the H200's in place
inline unsigned long long lt_matmul_calls = 0, lt_heuristic_calls = 0;
inline const uint32_t LT_MAGIC = 0x4c54454du;
struct LtHandle { uint32_t magic; };
struct LtDesc { uint32_t magic; int compute, scale; int transa, transb; int epilogue; };
struct LtLayout { uint32_t magic; int type; uint64_t rows, cols; int64_t ld; };
struct LtPref { uint32_t magic; uint64_t max_ws; uint32_t align[4]; };
inline void lt_complain(const char* fmt, ...) {
    va_list ap; va_start(ap, fmt);
    fprintf(stderr, "emu cuBLASLt model: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, "\n");
    va_end(ap);
}
inline size_t lt_elem(int type) { return type == CUDA_R_32F ? 4 : type == CUDA_R_16BF || type == CUDA_R_16F ? 2 : type == CUDA_R_64F ? 8 : 0; }
// checks the problem; fills m, n, k. Returns a status.
inline cublasStatus_t lt_check(const LtDesc* op, const LtLayout* a, const LtLayout* b, const LtLayout* c, const LtLayout* d,
                               uint64_t* m, uint64_t* n, uint64_t* k) {
    if (!op || op->magic != LT_MAGIC || !a || a->magic != LT_MAGIC || !b || b->magic != LT_MAGIC || !c ||
        c->magic != LT_MAGIC || !d || d->magic != LT_MAGIC) { lt_complain("a descriptor is missing, destroyed or invalid"); return CUBLAS_STATUS_INVALID_VALUE; }
    if (op->compute != CUBLAS_COMPUTE_32F || op->scale != CUDA_R_32F) { lt_complain("only COMPUTE_32F with fp32 scale is modelled"); return CUBLAS_STATUS_NOT_SUPPORTED; }
    if (op->epilogue != CUBLASLT_EPILOGUE_DEFAULT) { lt_complain("epilogues are not modelled"); return CUBLAS_STATUS_NOT_SUPPORTED; }
    if (a->type != b->type || a->type != c->type || a->type != d->type || (a->type != CUDA_R_32F && a->type != CUDA_R_16BF)) {
        lt_complain("A/B/C/D types %d/%d/%d/%d: only one type for all, fp32 or bf16, is modelled", a->type, b->type, c->type, d->type);
        return CUBLAS_STATUS_NOT_SUPPORTED;
    }
    if (d->rows != c->rows || d->cols != c->cols) {
        lt_complain("C is %llux%llu, D is %llux%llu: they must have the same rows and columns", (unsigned long long)c->rows,
                    (unsigned long long)c->cols, (unsigned long long)d->rows, (unsigned long long)d->cols);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    uint64_t am = op->transa ? a->cols : a->rows, ak = op->transa ? a->rows : a->cols;
    uint64_t bk = op->transb ? b->cols : b->rows, bn = op->transb ? b->rows : b->cols;
    if (am != d->rows || bn != d->cols || ak != bk) {
        lt_complain("shape mismatch: op(A) is %llux%llu, op(B) %llux%llu, D %llux%llu", (unsigned long long)am, (unsigned long long)ak,
                    (unsigned long long)bk, (unsigned long long)bn, (unsigned long long)d->rows, (unsigned long long)d->cols);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    const LtLayout* ls[4] = {a, b, c, d};
    const char* nm = "ABCD";
    for (int i = 0; i < 4; i++)
        if (ls[i]->ld < (int64_t)(ls[i]->rows ? ls[i]->rows : 1) && !(i == 2 && ls[i]->ld == 0)) {  // C: ld 0 broadcasts
            lt_complain("%c: leading dimension %lld < rows %llu (column-major)", nm[i], (long long)ls[i]->ld, (unsigned long long)ls[i]->rows);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    *m = d->rows; *n = d->cols; *k = ak;
    return CUBLAS_STATUS_SUCCESS;
}
// C and D as pointers: the same matrix needs the same layout (in place), a separate one
// must not overlap D (the documentation knows only C == D and C != D)
inline cublasStatus_t lt_check_cd(const void* C, const LtLayout* c, const void* D, const LtLayout* d) {
    if (C == D) {
        if (c->type != d->type || c->rows != d->rows || c->cols != d->cols || c->ld != d->ld) {
            lt_complain("C == D (in place) needs Cdesc == Ddesc, but C is type %d %llux%llu ld %lld and D type %d %llux%llu "
                        "ld %lld", c->type, (unsigned long long)c->rows, (unsigned long long)c->cols, (long long)c->ld, d->type,
                        (unsigned long long)d->rows, (unsigned long long)d->cols, (long long)d->ld);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
        return CUBLAS_STATUS_SUCCESS;
    }
    if (!c->rows || !c->cols) return CUBLAS_STATUS_SUCCESS;
    auto span = [](const void* p, const LtLayout* l) {  // first and one-past-last byte, column-major
        const uintptr_t b = (uintptr_t)p;
        return std::make_pair(b, b + ((l->cols - 1) * (uint64_t)l->ld + l->rows) * lt_elem(l->type));
    };
    auto sc = span(C, c), sd = span(D, d);
    if (sc.first < sd.second && sd.first < sc.second) {
        lt_complain("C = %p and D = %p overlap without being the same matrix (in place needs C == D)", C, D);
        return CUBLAS_STATUS_INVALID_VALUE;
    }
    return CUBLAS_STATUS_SUCCESS;
}
}  // namespace emu

typedef emu::LtHandle* cublasLtHandle_t;
typedef emu::LtDesc* cublasLtMatmulDesc_t;
typedef emu::LtLayout* cublasLtMatrixLayout_t;
typedef emu::LtPref* cublasLtMatmulPreference_t;

static inline const char* cublasLtGetStatusString(cublasStatus_t s) {
    switch (s) {
        case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
        case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
        case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
        default: return "CUBLAS_STATUS_(emulated error)";
    }
}
static inline size_t cublasLtGetVersion(void) { return 0; }  // the model: no library version
static inline cublasStatus_t cublasLtCreate(cublasLtHandle_t* h) { *h = new emu::LtHandle{emu::LT_MAGIC}; return CUBLAS_STATUS_SUCCESS; }
static inline cublasStatus_t cublasLtDestroy(cublasLtHandle_t h) {
    if (!h || h->magic != emu::LT_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    h->magic = 0; delete h; return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescCreate(cublasLtMatmulDesc_t* d, cublasComputeType_t ct, cudaDataType_t st) {
    *d = new emu::LtDesc{emu::LT_MAGIC, (int)ct, (int)st, 0, 0, CUBLASLT_EPILOGUE_DEFAULT};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescDestroy(cublasLtMatmulDesc_t d) {
    if (!d || d->magic != emu::LT_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    d->magic = 0; delete d; return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulDescSetAttribute(cublasLtMatmulDesc_t d, cublasLtMatmulDescAttributes_t a, const void* v, size_t sz) {
    if (!d || d->magic != emu::LT_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    switch (a) {
        case CUBLASLT_MATMUL_DESC_TRANSA:
        case CUBLASLT_MATMUL_DESC_TRANSB: {
            if (sz != sizeof(int32_t)) { emu::lt_complain("TRANSA/TRANSB attribute of %zu bytes (expected 4)", sz); return CUBLAS_STATUS_INVALID_VALUE; }
            int32_t t; memcpy(&t, v, 4);
            if (t != CUBLAS_OP_N && t != CUBLAS_OP_T) return CUBLAS_STATUS_NOT_SUPPORTED;
            (a == CUBLASLT_MATMUL_DESC_TRANSA ? d->transa : d->transb) = t == CUBLAS_OP_T;
            return CUBLAS_STATUS_SUCCESS;
        }
        case CUBLASLT_MATMUL_DESC_EPILOGUE: {
            if (sz != sizeof(int32_t)) return CUBLAS_STATUS_INVALID_VALUE;
            int32_t e; memcpy(&e, v, 4); d->epilogue = e; return CUBLAS_STATUS_SUCCESS;
        }
        default: emu::lt_complain("descriptor attribute %d is not modelled", (int)a); return CUBLAS_STATUS_NOT_SUPPORTED;
    }
}
static inline cublasStatus_t cublasLtMatrixLayoutCreate(cublasLtMatrixLayout_t* l, cudaDataType t, uint64_t rows, uint64_t cols, int64_t ld) {
    if (emu::lt_elem(t) == 0) return CUBLAS_STATUS_NOT_SUPPORTED;
    *l = new emu::LtLayout{emu::LT_MAGIC, (int)t, rows, cols, ld};
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatrixLayoutDestroy(cublasLtMatrixLayout_t l) {
    if (!l || l->magic != emu::LT_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    l->magic = 0; delete l; return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceCreate(cublasLtMatmulPreference_t* p) {
    *p = new emu::LtPref{emu::LT_MAGIC, 0, {256, 256, 256, 256}};  // cuBLASLt assumes 256-byte alignment by default
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceDestroy(cublasLtMatmulPreference_t p) {
    if (!p || p->magic != emu::LT_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    p->magic = 0; delete p; return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmulPreferenceSetAttribute(cublasLtMatmulPreference_t p, cublasLtMatmulPreferenceAttributes_t a, const void* v, size_t sz) {
    if (!p || p->magic != emu::LT_MAGIC) return CUBLAS_STATUS_INVALID_VALUE;
    if (a == CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES) {
        if (sz != sizeof(uint64_t)) { emu::lt_complain("MAX_WORKSPACE_BYTES of %zu bytes (expected 8)", sz); return CUBLAS_STATUS_INVALID_VALUE; }
        memcpy(&p->max_ws, v, 8); return CUBLAS_STATUS_SUCCESS;
    }
    if (a >= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES && a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES) {
        if (sz != sizeof(uint32_t)) { emu::lt_complain("MIN_ALIGNMENT of %zu bytes (expected 4)", sz); return CUBLAS_STATUS_INVALID_VALUE; }
        memcpy(&p->align[a - CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES], v, 4); return CUBLAS_STATUS_SUCCESS;
    }
    if (a == CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK) {  // the model never splits K: any valid mask is fine
        uint32_t mask = 0;
        if (sz != sizeof(uint32_t)) { emu::lt_complain("REDUCTION_SCHEME_MASK of %zu bytes (expected 4)", sz); return CUBLAS_STATUS_INVALID_VALUE; }
        memcpy(&mask, v, 4);
        if (mask & ~7u) { emu::lt_complain("REDUCTION_SCHEME_MASK 0x%x has bits beyond the three schemes", mask); return CUBLAS_STATUS_INVALID_VALUE; }
        return CUBLAS_STATUS_SUCCESS;
    }
    emu::lt_complain("preference attribute %d is not modelled", (int)a);
    return CUBLAS_STATUS_NOT_SUPPORTED;
}
static inline cublasStatus_t cublasLtMatmulAlgoGetHeuristic(cublasLtHandle_t h, cublasLtMatmulDesc_t op, cublasLtMatrixLayout_t a,
                                                            cublasLtMatrixLayout_t b, cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
                                                            cublasLtMatmulPreference_t pref, int requested,
                                                            cublasLtMatmulHeuristicResult_t* res, int* found) {
    emu::lt_heuristic_calls++;
    *found = 0;
    if (!h || h->magic != emu::LT_MAGIC || !pref || pref->magic != emu::LT_MAGIC || requested < 1) return CUBLAS_STATUS_INVALID_VALUE;
    uint64_t m, n, k;
    cublasStatus_t st = emu::lt_check(op, a, b, c, d, &m, &n, &k);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (emu::lt_mode == 0) return CUBLAS_STATUS_NOT_SUPPORTED;  // "no algorithm": the caller must fall back
    for (int i = 0; i < 4; i++) {
        uint32_t al = pref->align[i];
        if (al == 0 || (al & (al - 1)) != 0) { emu::lt_complain("alignment preference %u is not a power of two", al); return CUBLAS_STATUS_INVALID_VALUE; }
    }
    memset(&res[0], 0, sizeof res[0]);
    for (int i = 0; i < 4; i++) res[0].algo.data[i] = pref->align[i];  // the algorithm assumes these alignments
    res[0].algo.data[4] = emu::LT_MAGIC;
    res[0].state = CUBLAS_STATUS_SUCCESS;
    res[0].workspaceSize = 0;
    *found = 1;
    return CUBLAS_STATUS_SUCCESS;
}
// An algorithm's configuration, as the profile's GEMM table reads it. The model's single
// "algorithm" has no tile or stages: every attribute reads as 0 (cuBLASLt's "undefined"),
// after the same checks of the algorithm and the buffer size the library makes.
typedef enum {
    CUBLASLT_REDUCTION_SCHEME_NONE = 0,
    CUBLASLT_REDUCTION_SCHEME_INPLACE = 1,
    CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE = 2,
    CUBLASLT_REDUCTION_SCHEME_OUTPUT_TYPE = 4,
} cublasLtReductionScheme_t;
typedef enum {
    CUBLASLT_ALGO_CONFIG_ID = 0,
    CUBLASLT_ALGO_CONFIG_TILE_ID = 1,
    CUBLASLT_ALGO_CONFIG_SPLITK_NUM = 2,
    CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME = 3,
    CUBLASLT_ALGO_CONFIG_CTA_SWIZZLING = 4,
    CUBLASLT_ALGO_CONFIG_STAGES_ID = 6,
    CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID = 8,
} cublasLtMatmulAlgoConfigAttributes_t;
static inline cublasStatus_t cublasLtMatmulAlgoConfigGetAttribute(const cublasLtMatmulAlgo_t* algo,
                                                                  cublasLtMatmulAlgoConfigAttributes_t a, void* buf,
                                                                  size_t sz, size_t* written) {
    if (!algo || algo->data[4] != emu::LT_MAGIC) { emu::lt_complain("algorithm not from cublasLtMatmulAlgoGetHeuristic"); return CUBLAS_STATUS_INVALID_VALUE; }
    size_t want = a == CUBLASLT_ALGO_CONFIG_CLUSTER_SHAPE_ID ? 2 : 4;
    if (written) *written = want;
    if (!buf || sz != want) { emu::lt_complain("config attribute %d read into %zu bytes (it has %zu)", (int)a, sz, want); return CUBLAS_STATUS_INVALID_VALUE; }
    memset(buf, 0, sz);
    return CUBLAS_STATUS_SUCCESS;
}
static inline cublasStatus_t cublasLtMatmul(cublasLtHandle_t h, cublasLtMatmulDesc_t op, const void* alpha, const void* A,
                                            cublasLtMatrixLayout_t la, const void* B, cublasLtMatrixLayout_t lb, const void* beta,
                                            const void* C, cublasLtMatrixLayout_t lc, void* D, cublasLtMatrixLayout_t ld,
                                            const cublasLtMatmulAlgo_t* algo, void* ws, size_t ws_bytes, cudaStream_t stream) {
    emu::lt_matmul_calls++;
    if (!h || h->magic != emu::LT_MAGIC) return CUBLAS_STATUS_NOT_INITIALIZED;
    uint64_t m, n, k;
    cublasStatus_t st = emu::lt_check(op, la, lb, lc, ld, &m, &n, &k);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    st = emu::lt_check_cd(C, lc, D, ld);
    if (st != CUBLAS_STATUS_SUCCESS) return st;
    if (!algo || algo->data[4] != emu::LT_MAGIC) { emu::lt_complain("algorithm not from cublasLtMatmulAlgoGetHeuristic"); return CUBLAS_STATUS_INVALID_VALUE; }
    if (ws_bytes > 0 && !ws) { emu::lt_complain("workspace size %zu with a null workspace", ws_bytes); return CUBLAS_STATUS_INVALID_VALUE; }
    const void* ptr[4] = {A, B, C, D};
    const char* nm = "ABCD";
    size_t es = emu::lt_elem(la->type);
    for (int i = 0; i < 4; i++) {
        uintptr_t p = (uintptr_t)ptr[i];
        if (p % es != 0 || p % algo->data[i] != 0) {
            emu::lt_complain("%c = %p is not aligned to %llu bytes, the alignment the algorithm was chosen for", nm[i], ptr[i],
                             (unsigned long long)algo->data[i]);
            return CUBLAS_STATUS_INVALID_VALUE;
        }
    }
    // alpha and beta (host pointers) and the descriptors are read now, as cuBLASLt does;
    // the product runs on the stream (now, or later in the emulator's lazy stream model)
    float al, be;
    memcpy(&al, alpha, 4);
    memcpy(&be, beta, 4);
    bool bf = la->type == CUDA_R_16BF;
    bool ta = op->transa, tb = op->transb;
    int64_t lda = la->ld, ldb = lb->ld, ldc = lc->ld, ldd = ld->ld;
    bool al16 = true;  // mode 2: the H200's in-place rounding needs everything 16-byte aligned
    for (int i = 0; i < 4; i++) al16 = al16 && (uintptr_t)ptr[i] % 16 == 0;
    for (int64_t l : {lda, ldb, ldd}) al16 = al16 && (l * (int64_t)es) % 16 == 0;
    const bool round_ab = emu::lt_mode == 2 && bf && C == D && be != 0.0f && al16;
    emu::stream_of(stream)->compute++;
    emu::submit(stream, [=]() {
        auto rd = [bf](const void* base, uint64_t r, uint64_t c, int64_t ldm) -> double {
            uint64_t i = r + c * (uint64_t)ldm;
            return bf ? (double)(float)((const __nv_bfloat16*)base)[i] : (double)((const float*)base)[i];
        };
        for (uint64_t j = 0; j < n; j++)
            for (uint64_t i = 0; i < m; i++) {
                double s = 0.0;
                for (uint64_t kk = 0; kk < k; kk++) {
                    double av = ta ? rd(A, kk, i, lda) : rd(A, i, kk, lda);
                    double bv = tb ? rd(B, j, kk, ldb) : rd(B, kk, j, ldb);
                    s += av * bv;
                }
                s *= al;
                if (round_ab) s = (double)(float)__nv_bfloat16((float)s);
                if (be != 0.0f) s += (double)be * rd(C, i, j, ldc);  // C is not read when beta == 0
                uint64_t di = i + j * (uint64_t)ldd;
                if (bf) ((__nv_bfloat16*)D)[di] = __nv_bfloat16(s);
                else ((float*)D)[di] = (float)s;
            }
    });
    return CUBLAS_STATUS_SUCCESS;
}
