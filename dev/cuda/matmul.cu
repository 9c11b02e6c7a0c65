/*
Ladder for llmc/kernels/matmul.cuh (forward, backward_input, backward_weight, forward_residual).
  version 1: the 16x16 shared-memory tiled kernel (matmul_fallback in
             llmc/kernels/matmul.cuh, used there only when cuBLASLt offers no algorithm)
  version 2: cuBLASLt through the launchers of llmc/kernels/matmul.cuh with the algorithm
             cache off (matmul_algo_cache_cap = 0): descriptors and the heuristic query
             on every call, as before the cache
  version 3: the llmc launchers as the trainers use them: the algorithm cache on, and
             matmul_forward_residual (out = res + inp W^T as one GEMM, C = res, D = out),
             checked with out separate from res and in place
  version 4: no new kernel: the products train_llama issues for llama3-1B (B 4, T 2048: the
             q, k, v, wo and FFN shapes, each forward, backward-input and
             backward-weight as the launchers map them), each with cuBLASLt's first 8
             heuristic candidates timed one by one (the configuration of each printed) and
             checked against the first. On the H200 the qkv and wo groups ran at 604-672
             TFLOP/s against 740-806 for the FFN and head. PREDICTION, to be measured: the k
             and v products (512 output columns) are the slow ones, too few output tiles
             for 132 SMs (backward-weight [512 x 2048] is 32 tiles of 128x256 with K = 8192,
             unless the heuristic splits K), and one [8192 x 3072] product for q, k and v
             together would run at the FFN's rate; the wo forward (C = residual) and the
             backward-input products that accumulate (beta = 1) pay the extra read of C
             (32 MB, ~8 us of ~105 us). If another candidate is more than 5% faster than the
             heuristic's first at a shape, the fix is to pick it (a timed choice at the first
             use of a shape); if all are alike, the fix is the fused product, which needs q,
             k, v in one row-strided buffer.
Validated against the CPU twin (llmc/kernels/cpu/matmul.h) on random data, with a weight
slice (w + c0, ldw > C) like the hidden-chunked FFN uses, each shape with and without
accumulation (C = D, beta = 1) and with aligned pointers and pointer offsets that are
not 16-byte aligned; the whole weight buffer is compared, so writes outside the slice
would show. Version 3 also runs each product twice (the second from the cache) and
requires the same bits. A failed check of versions 2 and 3 is diagnosed on the spot
(matmul_diagnose: the call, its algorithm, where the bad elements are, the other
candidates, C = D against a separate C); LADDER_MATMUL_DIAG=1 diagnoses every check.
Build: make -C dev/cuda matmul; run: ./build/bf16/matmul [version]
*/
#include "ladder.h"
#include "../../llmc/kernels/matmul.cuh"
#include <chrono>

static double ladder_wall_seconds(void) {
    return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

struct Shape { int N, C, OC, ldw, c0; };

// Tolerance. Inputs are identical (rounded to floatX before the CPU sees them), so
// products are exact in fp32 and the only differences are (a) the fp32 summation
// order, bounded by K * 2^-24 * sum|a_k b_k| <= K * 2^-24 * K * max|a| max|b| (we use
// the smaller K * 2^-22 * max|a|max|b| * sqrt(K): random signs), and (b) in bf16
// builds the final rounding of the output to bf16, <= 2^-8 relative (8 significant bits).
// So rtol = 2^-7 (bf16, 2x margin) or 0, atol from (a). In fp32 builds the comparison is tight.
static void tol_for(int K, double amax, double bmax, double* atol, double* rtol) {
    *atol = (double)K * sqrt((double)K) * ldexp(1.0, -22) * amax * bmax + 1e-7;
    *rtol = LADDER_FP32 ? 1e-6 : ldexp(1.0, -7);
}

// -------- diagnosis of a failed cuBLASLt check (versions 2 and 3)
// A wrong cuBLASLt result is reported with what pins its cause in one GPU run: the call as
// the launcher made it (matmul_last_lt_call) and its algorithm; where the bad elements lie
// in cuBLASLt's column-major D (m x n); which model of a wrong computation reproduces them
// bit for bit; and the same product again with each of the heuristic's candidates, with
// split-K forbidden and with the 2-byte alignment preferences that the offset=1 checks get,
// each with C = D, with a separate C (same values) and with beta = 0. A product that is
// right with a separate C and wrong with C = D under one algorithm is cuBLASLt's in-place
// path, not the launchers' mapping (which C does not enter). Prints nothing for a passing
// check; LADDER_MATMUL_DIAG=1 diagnoses every cuBLASLt check, which runs this code where
// everything passes (the emulator).
static bool matmul_diag_always(void) {
    const char* e = getenv("LADDER_MATMUL_DIAG");
    return e && e[0] && e[0] != '0';
}

// elements from the first to one past the last of a column-major rows x cols matrix
static size_t lt_span(int64_t rows, int64_t cols, int64_t ld) { return rows > 0 && cols > 0 ? (size_t)((cols - 1) * ld + rows) : 0; }

// a device copy of h whose address has p's alignment modulo 256 bytes: an algorithm is
// chosen for its pointers' alignments
struct DiagBuf { floatX* base; floatX* p; };
static DiagBuf diag_buf_like(const void* p, const std::vector<float>& h) {
    const size_t slack = 256 / sizeof(floatX);
    DiagBuf b;
    b.base = (floatX*)dev_malloc((h.size() + slack) * sizeof(floatX));
    size_t i = 0;
    while (i < slack && ((uintptr_t)(b.base + i)) % 256 != ((uintptr_t)p) % 256) i++;
    b.p = b.base + i;
    if (!h.empty()) dev_upload_floats(b.p, h.data(), h.size());
    return b;
}

struct DiagProblem {
    MatmulLtCall call;
    int m, n, k;
    std::vector<float> a, b, c0;  // A and B as stored, C's values before the product (D's layout)
    std::vector<double> ab;       // op(A) op(B), m x n, ld m, in double (exact for floatX inputs)
    double atol, rtol;
};

// bad elements of got (D's layout) against ref (m x n, ld m), and the worst err/tol
struct DiagScore { size_t bad; double worst; };
static DiagScore diag_score(const DiagProblem& P, const std::vector<float>& got, const std::vector<double>& ref,
                            std::vector<char>* badmask) {
    DiagScore s = {0, 0.0};
    if (badmask) badmask->assign((size_t)P.m * P.n, 0);
    for (int j = 0; j < P.n; j++)
        for (int i = 0; i < P.m; i++) {
            double g = got[(size_t)j * P.call.key.ldd + i], r = ref[(size_t)j * P.m + i];
            double tol = P.atol + P.rtol * fabs(r), err = isfinite(g) ? fabs(g - r) : INFINITY;
            if (err / tol > s.worst) s.worst = err / tol;
            if (err > tol) { s.bad++; if (badmask) (*badmask)[(size_t)j * P.m + i] = 1; }
        }
    return s;
}

// one product with an algorithm, from C's values before the launcher's product. mode 0:
// C = D (one buffer, as the launcher's C = D call); 1: C = D pointer with a Cdesc of its own
// (identical values); 2: C separate, D starting at 0; 3: beta = 0 (scored against AB alone).
// Returns 0 with *st set when cuBLASLt refuses the call.
static int diag_run(const DiagProblem& P, MatmulAlgoEntry& e, const cublasLtMatmulAlgo_t* algo, int mode,
                    std::vector<float>* got, cublasStatus_t* st) {
    const MatmulLtCall& L = P.call;
    const size_t nd = lt_span(P.m, P.n, L.key.ldd);
    std::vector<float> zeros(nd, 0.0f);
    DiagBuf d = diag_buf_like(L.d, mode <= 1 ? P.c0 : zeros);
    DiagBuf c = diag_buf_like(L.c != L.d ? L.c : L.d, mode == 2 ? P.c0 : std::vector<float>());
    const float alpha = 1.0f, beta = mode == 3 ? 0.0f : 1.0f;
    const void* cp = mode <= 1 ? (const void*)d.p : mode == 2 ? (const void*)c.p : (const void*)d.p;
    cublasLtMatrixLayout_t lc = e.ld, own = NULL;
    if (mode == 1) {
        cublasLtCheck(cublasLtMatrixLayoutCreate(&own, MATMUL_CUDA_TYPE, P.m, P.n, L.key.ldd));
        lc = own;
    }
    *st = cublasLtMatmul(matmul_handle, e.op, &alpha, L.a, e.la, L.b, e.lb, &beta, cp, lc, d.p, e.ld, algo,
                         matmul_workspace, MATMUL_WORKSPACE_BYTES, 0);
    cudaCheck(cudaDeviceSynchronize());
    if (*st == CUBLAS_STATUS_SUCCESS) *got = download_x(d.p, nd);
    if (own) cublasLtCheck(cublasLtMatrixLayoutDestroy(own));
    dev_free(d.base); dev_free(c.base);
    return *st == CUBLAS_STATUS_SUCCESS;
}

// "C = D FAIL 11.75 (108 bad)" for one algorithm and mode
static void diag_mode_text(const DiagProblem& P, const std::vector<double>& ref_c, MatmulAlgoEntry& e,
                           const cublasLtMatmulAlgo_t* algo, int mode, char* buf, size_t n, std::vector<float>* keep) {
    static const char* names[4] = {"C = D", "C = D own Cdesc", "C separate", "beta 0"};
    std::vector<float> got;
    cublasStatus_t st;
    if (!diag_run(P, e, algo, mode, &got, &st)) { snprintf(buf, n, "%s: status %d", names[mode], (int)st); return; }
    DiagScore s = diag_score(P, got, mode == 3 ? P.ab : ref_c, NULL);
    if (s.bad) snprintf(buf, n, "%s FAIL %.2f (%zu bad)", names[mode], s.worst, s.bad);
    else snprintf(buf, n, "%s PASS %.2f", names[mode], s.worst);
    if (keep) *keep = got;
}

// one line per algorithm: its configuration and the four modes
static void diag_algo_line(const DiagProblem& P, const std::vector<double>& ref_c, MatmulAlgoEntry& e,
                           const cublasLtMatmulAlgo_t* algo, const char* label, size_t ws) {
    char cfg[160], m[4][64], wst[32] = "";
    matmul_algo_config_text(algo, cfg, sizeof cfg);
    for (int mode = 0; mode < 4; mode++) diag_mode_text(P, ref_c, e, algo, mode, m[mode], sizeof m[mode], NULL);
    bool launched = memcmp(algo, &P.call.algo, sizeof *algo) == 0;
    if (ws != (size_t)-1) snprintf(wst, sizeof wst, " ws %zu", ws);
    printf("      diag %-4s %s%s%s: %s | %s | %s | %s\n", label, cfg, wst, launched ? " (the launcher's)" : "", m[0], m[1],
           m[2], m[3]);
}

// the heuristic's candidates for the launcher's problem with other preferences (reduction
// mask, alignments), each run in the four modes
// (alignment preferences: al_ab for A and B, al_cd for C and D; 0 keeps the launcher's)
static void diag_candidates(const DiagProblem& P, const std::vector<double>& ref_c, const char* title, uint32_t reductions,
                            uint32_t al_ab, uint32_t al_cd, int want_n) {
    MatmulAlgoEntry e;
    memset(&e, 0, sizeof e);
    e.key = P.call.key;
    if (al_ab) e.key.al_a = e.key.al_a < al_ab ? e.key.al_a : al_ab, e.key.al_b = e.key.al_b < al_ab ? e.key.al_b : al_ab;
    if (al_cd) {
        e.key.al_d = e.key.al_d < al_cd ? e.key.al_d : al_cd;
        if (e.key.c_mode == 2) e.key.al_c = e.key.al_c < al_cd ? e.key.al_c : al_cd;
    }
    cublasLtMatmulHeuristicResult_t heur[8];
    int n = matmul_lt_candidates(&e, heur, want_n < 8 ? want_n : 8, reductions);
    printf("      diag %s: %d candidate(s)\n", title, n);
    for (int i = 0; i < n; i++) {
        char label[8];
        snprintf(label, sizeof label, "#%d", i);
        diag_algo_line(P, ref_c, e, &heur[i].algo, label, heur[i].workspaceSize);
    }
    if (n > 0) {
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e.ld));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e.lb));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e.la));
        cublasLtCheck(cublasLtMatmulDescDestroy(e.op));
    }
}

// "a b c ..." counts of bad elements per block of `block` along an axis of length len
static void diag_hist_text(const std::vector<size_t>& h, char* buf, size_t n) {
    size_t len = 0;
    buf[0] = 0;
    for (size_t i = 0; i < h.size() && len + 12 < n; i++) len += snprintf(buf + len, n - len, "%s%zu", i ? " " : "", h[i]);
}

// call: the launcher's cuBLASLt call; before: the host values of the buffer C points into
// before the product, C at element c_at of it. got: the launcher's result is read from D.
static void matmul_diagnose(const char* what, const MatmulLtCall& call, const std::vector<float>& before, size_t c_at) {
    DiagProblem P;
    P.call = call;
    const MatmulAlgoKey& K = call.key;
    P.m = K.m; P.n = K.n; P.k = K.k;
    const size_t na = K.transa ? lt_span(K.k, K.m, K.lda) : lt_span(K.m, K.k, K.lda);
    const size_t nb = K.transb ? lt_span(K.n, K.k, K.ldb) : lt_span(K.k, K.n, K.ldb);
    const size_t nd = lt_span(K.m, K.n, K.ldd);
    const bool has_c = call.beta != 0.0f;
    P.a = download_x((const floatX*)call.a, na);
    P.b = download_x((const floatX*)call.b, nb);
    std::vector<float> got = download_x((const floatX*)call.d, nd);
    P.c0.assign(nd, 0.0f);
    if (has_c) {
        if (c_at + nd > before.size()) FAIL("matmul_diagnose %s: C's values before the product are too short", what);
        std::copy(before.begin() + c_at, before.begin() + c_at + nd, P.c0.begin());
    }
    auto A = [&](int i, int kk) { return (double)(K.transa ? P.a[(size_t)i * K.lda + kk] : P.a[(size_t)kk * K.lda + i]); };
    auto B = [&](int kk, int j) { return (double)(K.transb ? P.b[(size_t)kk * K.ldb + j] : P.b[(size_t)j * K.ldb + kk]); };
    P.ab.assign((size_t)P.m * P.n, 0.0);
    for (int j = 0; j < P.n; j++)
        for (int i = 0; i < P.m; i++) {
            double s = 0.0;
            for (int kk = 0; kk < P.k; kk++) s += A(i, kk) * B(kk, j);
            P.ab[(size_t)j * P.m + i] = s;
        }
    std::vector<double> ref((size_t)P.m * P.n);
    for (int j = 0; j < P.n; j++)
        for (int i = 0; i < P.m; i++)
            ref[(size_t)j * P.m + i] = P.ab[(size_t)j * P.m + i] + (has_c ? P.c0[(size_t)j * K.ldd + i] : 0.0);
    tol_for(P.k, 1.0, 1.0, &P.atol, &P.rtol);
    P.atol += 1e-7;

    // the call
    auto al = [](const void* p) { return matmul_alignment(p); };
    printf("      diag %s: cublasLtMatmul m %d n %d k %d op(A) %c op(B) %c lda %lld ldb %lld ldc %lld ldd %lld alpha %g beta %g "
           "%s, alignment A/B/C/D %u/%u/%u/%u bytes (queried with %u/%u/%u/%u), workspace %zu MiB, cuBLASLt %zu\n",
           what, K.m, K.n, K.k, K.transa ? 'T' : 'N', K.transb ? 'T' : 'N', (long long)K.lda, (long long)K.ldb,
           (long long)K.ldd, (long long)K.ldd, call.alpha, call.beta,
           !has_c ? "no C" : call.c == call.d ? "C == D" : "C != D", al(call.a), al(call.b), al(call.c), al(call.d),
           K.al_a, K.al_b, K.c_mode == 2 ? K.al_c : K.al_d, K.al_d, (size_t)(MATMUL_WORKSPACE_BYTES >> 20),
           (size_t)cublasLtGetVersion());

    // where the bad elements are
    std::vector<char> bad;
    DiagScore s = diag_score(P, got, ref, &bad);
    const int blk = (P.m > 16 * 24 || P.n > 16 * 24) ? 64 : 16;
    std::vector<size_t> by_i((P.m + blk - 1) / blk, 0), by_j((P.n + blk - 1) / blk, 0), by_lane(8, 0);
    int shown = 0;
    char first[3][96] = {"", "", ""};
    for (int j = 0; j < P.n; j++)
        for (int i = 0; i < P.m; i++)
            if (bad[(size_t)j * P.m + i]) {
                by_i[i / blk]++; by_j[j / blk]++; by_lane[i % 8]++;
                if (shown < 3)
                    snprintf(first[shown++], sizeof first[0], "(%d,%d) got %.6g ref %.6g C %.6g AB %.6g", i, j,
                             got[(size_t)j * K.ldd + i], ref[(size_t)j * P.m + i], has_c ? P.c0[(size_t)j * K.ldd + i] : 0.0,
                             P.ab[(size_t)j * P.m + i]);
            }
    char hi[256], hj[256], hl[128];
    diag_hist_text(by_i, hi, sizeof hi); diag_hist_text(by_j, hj, sizeof hj); diag_hist_text(by_lane, hl, sizeof hl);
    printf("      diag where: %zu of %d bad (worst err/tol %.2f); by %d-row block of m: %s; by %d-column block of n: %s; "
           "by row mod 8: %s\n", s.bad, P.m * P.n, s.worst, blk, hi, blk, hj, hl);
    if (shown) printf("      diag first bad (row i of m, column j of n): %s%s%s%s%s\n", first[0], shown > 1 ? "; " : "",
                      first[1], shown > 2 ? "; " : "", first[2]);

    // which wrong computation reproduces the bad elements: bit for bit for the roundings
    // (fp32 builds round nothing, these then reproduce nothing), within the tolerance for
    // a missing or doubled k-range
    if (s.bad) {
        size_t m_pre = 0, m_noc = 0, m_c2 = 0, m_split[3] = {0, 0, 0}, m_chunk[3] = {0, 0, 0};
        const int chunks[3] = {16, 32, 64};
        for (int j = 0; j < P.n; j++)
            for (int i = 0; i < P.m; i++) {
                if (!bad[(size_t)j * P.m + i]) continue;
                const float g = got[(size_t)j * K.ldd + i];
                const double cv = has_c ? P.c0[(size_t)j * K.ldd + i] : 0.0, abv = P.ab[(size_t)j * P.m + i];
                const double r = ref[(size_t)j * P.m + i];
                if (round_floatX((float)(cv + round_floatX((float)abv))) == g) m_pre++;  // AB rounded, then + C
                if (round_floatX((float)abv) == g) m_noc++;                              // C left out
                if (round_floatX((float)(2.0 * cv + abv)) == g) m_c2++;                  // C added twice
                for (int parts = 2; parts <= 4; parts++) {  // k in equal parts, summed in D's type
                    int step = (P.k + parts - 1) / parts;
                    float acc = round_floatX((float)cv);
                    for (int k0 = 0; k0 < P.k; k0 += step) {
                        double p = 0.0;
                        for (int kk = k0; kk < k0 + step && kk < P.k; kk++) p += A(i, kk) * B(kk, j);
                        acc = round_floatX((float)(acc + p));
                    }
                    if (acc == g) m_split[parts - 2]++;
                }
                for (int c = 0; c < 3; c++) {
                    if (chunks[c] >= P.k) continue;
                    bool hit = false;
                    for (int k0 = 0; k0 < P.k && !hit; k0 += chunks[c]) {
                        double p = 0.0;
                        for (int kk = k0; kk < k0 + chunks[c] && kk < P.k; kk++) p += A(i, kk) * B(kk, j);
                        for (int sgn = -1; sgn <= 1; sgn += 2) {
                            double pred = r + sgn * p;
                            if (fabs(g - pred) <= P.atol + P.rtol * fabs(pred)) hit = true;
                        }
                    }
                    if (hit) m_chunk[c]++;
                }
            }
        printf("      diag models of the %zu bad: (C + round(AB)) rounded %zu, C left out %zu, C twice %zu; k in 2/3/4 parts "
               "summed in D's type %zu/%zu/%zu; one k-range of 16/32/64 missing or doubled %zu/%zu/%zu\n",
               s.bad, m_pre, m_noc, m_c2, m_split[0], m_split[1], m_split[2], m_chunk[0], m_chunk[1], m_chunk[2]);
    }

    // the launcher's algorithm again (twice in place: a race shows as different bits), then
    // the other candidates: once per call (versions 2 and 3 make the same calls)
    static std::vector<MatmulAlgoKey> swept;
    for (const MatmulAlgoKey& seen : swept)
        if (memcmp(&seen, &K, sizeof K) == 0) {
            printf("      diag algorithms: as above for this call\n");
            return;
        }
    swept.push_back(K);
    {
        MatmulAlgoEntry e;
        memset(&e, 0, sizeof e);
        e.key = K;
        cublasLtMatmulHeuristicResult_t heur[1];
        if (matmul_lt_candidates(&e, heur, 1) > 0) {  // descriptors only: the algorithm is the launcher's
            diag_algo_line(P, ref, e, &call.algo, "used", (size_t)-1);
            std::vector<float> g1, g2;
            cublasStatus_t st1, st2;
            int ok = diag_run(P, e, &call.algo, has_c && call.c == call.d ? 0 : has_c ? 2 : 3, &g1, &st1) &&
                     diag_run(P, e, &call.algo, has_c && call.c == call.d ? 0 : has_c ? 2 : 3, &g2, &st2);
            bool same_launch = ok && g1.size() == got.size() && memcmp(g1.data(), got.data(), got.size() * sizeof(float)) == 0;
            bool same_twice = ok && memcmp(g1.data(), g2.data(), g1.size() * sizeof(float)) == 0;
            printf("      diag used again as launched: %s the launcher's bits, %s on a second run\n",
                   same_launch ? "the same as" : "NOT the same as", same_twice ? "the same bits" : "DIFFERENT bits");
            cublasLtCheck(cublasLtMatrixLayoutDestroy(e.ld));
            cublasLtCheck(cublasLtMatrixLayoutDestroy(e.lb));
            cublasLtCheck(cublasLtMatrixLayoutDestroy(e.la));
            cublasLtCheck(cublasLtMatmulDescDestroy(e.op));
        }
    }
    const uint32_t red = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
    diag_candidates(P, ref, "heuristic candidates (as the launchers query)", red, 0, 0, 8);
    diag_candidates(P, ref, "split-K forbidden (reduction mask NONE)", CUBLASLT_REDUCTION_SCHEME_NONE, 0, 0, 2);
    // a cheap way out if only the epilogue's kind of C/D access decides: C and D declared
    // 8-byte aligned, A and B as they are (their loads keep their speed)
    diag_candidates(P, ref, "C/D at 8-byte alignment preferences", red, 0, 8, 2);
    char title[96];
    snprintf(title, sizeof title, "all at %zu-byte alignment preferences (what offset=1 queries)", sizeof(floatX));
    diag_candidates(P, ref, title, red, sizeof(floatX), sizeof(floatX), 1);
}

static void run_version(int version, const Shape& sh, int accumulate, int off, uint64_t seed) {
    const int N = sh.N, C = sh.C, OC = sh.OC, ldw = sh.ldw, c0 = sh.c0;
    // W_full is [OC, ldw] (plus slack) and w = W_full + c0 is the column slice
    // [c0, c0 + C) of it, as the hidden-chunked FFN addresses w2; the columns outside
    // the slice must come back untouched by backward_weight.
    if (c0 + C > ldw) FAIL("bad test shape: c0 + C > ldw");
    size_t nw = (size_t)OC * ldw + 8;
    std::vector<float> w = rand_floatX(nw, -1.0f, 1.0f, seed + 1);
    std::vector<float> inp = rand_floatX((size_t)N * C + 1, -1.0f, 1.0f, seed + 2);   // +1: offset test below
    std::vector<float> dout = rand_floatX((size_t)N * OC + 1, -1.0f, 1.0f, seed + 3);
    std::vector<float> out0 = rand_floatX((size_t)N * OC + 1, -1.0f, 1.0f, seed + 4);
    std::vector<float> dinp0 = rand_floatX((size_t)N * C + 1, -1.0f, 1.0f, seed + 5);
    std::vector<float> dw0 = rand_floatX(nw, -1.0f, 1.0f, seed + 6);

    floatX* d_w = upload_x(w);
    floatX* d_inp = upload_x(inp);
    floatX* d_dout = upload_x(dout);
    floatX* d_out = upload_x(out0);
    floatX* d_dinp = upload_x(dinp0);
    floatX* d_dw = upload_x(dw0);
    // element offset 1 makes inp/dout/out/dinp 2-byte (bf16) or 4-byte (fp32) aligned only
    std::vector<float> r_out = out0, r_dinp = dinp0, r_dw = dw0;
    ref_matmul_forward(r_out.data() + off, inp.data() + off, w.data() + c0, N, C, OC, ldw, accumulate);
    ref_matmul_backward_input(r_dinp.data() + off, dout.data() + off, w.data() + c0, N, C, OC, ldw, accumulate);
    ref_matmul_backward_weight(r_dw.data() + c0, dout.data() + off, inp.data() + off, N, C, OC, ldw);

    stream_t s = 0;
    matmul_algo_cache_cap = version == 2 ? 0 : MATMUL_ALGO_CACHE_SIZE;
    if (version == 1) {
        matmul_fallback(d_out + off, d_inp + off, d_w + c0, N, OC, C, C, 1, 1, ldw, OC, accumulate, s);
        matmul_fallback(d_dinp + off, d_dout + off, d_w + c0, N, C, OC, OC, 1, ldw, 1, C, accumulate, s);
        matmul_fallback(d_dw + c0, d_dout + off, d_inp + off, OC, C, N, 1, OC, C, 1, ldw, 1, s);
    }
    // the cuBLASLt call each launcher made (seq unchanged: it fell back), for the diagnosis
    MatmulLtCall lt_fwd = {}, lt_bin = {}, lt_bw = {};
    auto lt_called = [](auto&& launch, MatmulLtCall* call) {
        unsigned long long seq = matmul_last_lt_call.seq;
        launch();
        *call = matmul_last_lt_call;
        if (call->seq == seq) call->seq = 0;
    };
    if (version >= 2) {
        lt_called([&] { matmul_forward(d_out + off, d_inp + off, d_w + c0, N, C, OC, ldw, accumulate, s); }, &lt_fwd);
        lt_called([&] { matmul_backward_input(d_dinp + off, d_dout + off, d_w + c0, N, C, OC, ldw, accumulate, s); }, &lt_bin);
        lt_called([&] { matmul_backward_weight(d_dw + c0, d_dout + off, d_inp + off, N, C, OC, ldw, s); }, &lt_bw);
    }
    // a failed check of a cuBLASLt product is diagnosed (C's values before: `before` from c_at)
    const bool always = matmul_diag_always();
    auto diag = [&](int failed, const char* what, const MatmulLtCall& call, const std::vector<float>& before, size_t c_at) {
        if ((failed || always) && call.seq) matmul_diagnose(what, call, before, c_at);
    };
    printf("  v%d N=%d C=%d OC=%d ldw=%d c0=%d offset=%d accumulate=%d\n", version, N, C, OC, ldw, c0, off, accumulate);
    double atol, rtol;
    tol_for(C, 1.0, 1.0, &atol, &rtol);
    diag(check("forward out", download_x(d_out, out0.size()), r_out, atol + (accumulate ? 1e-7 : 0), rtol), "forward",
         lt_fwd, out0, off);
    tol_for(OC, 1.0, 1.0, &atol, &rtol);
    diag(check("backward_input dinp", download_x(d_dinp, dinp0.size()), r_dinp, atol, rtol), "backward_input", lt_bin,
         dinp0, off);
    tol_for(N, 1.0, 1.0, &atol, &rtol);
    diag(check("backward_weight dW", download_x(d_dw, dw0.size()), r_dw, atol, rtol), "backward_weight", lt_bw, dw0, c0);
    if (version == 3) {
        // the products again, now from the algorithm cache: the same bits
        std::vector<float> g_out = download_x(d_out, out0.size()), g_dinp = download_x(d_dinp, dinp0.size());
        upload_x_to(d_out, out0);
        upload_x_to(d_dinp, dinp0);
        matmul_forward(d_out + off, d_inp + off, d_w + c0, N, C, OC, ldw, accumulate, s);
        matmul_backward_input(d_dinp + off, d_dout + off, d_w + c0, N, C, OC, ldw, accumulate, s);
        check_same("forward out (cached)", download_x(d_out, out0.size()), g_out);
        check_same("backward_input (cached)", download_x(d_dinp, dinp0.size()), g_dinp);
        // out = res + inp W^T: into a separate buffer (res = out0), then in place
        std::vector<float> r_res = out0;
        ref_matmul_forward(r_res.data() + off, inp.data() + off, w.data() + c0, N, C, OC, ldw, 1);
        floatX* d_res = upload_x(out0);
        floatX* d_o2 = upload_x(out0);  // everything outside [off, off + N OC) must stay as out0
        MatmulLtCall lt_res = {}, lt_inplace = {};
        lt_called([&] { matmul_forward_residual(d_o2 + off, d_res + off, d_inp + off, d_w + c0, N, C, OC, ldw, s); }, &lt_res);
        tol_for(C, 1.0, 1.0, &atol, &rtol);
        diag(check("residual out", download_x(d_o2, out0.size()), r_res, atol + 1e-7, rtol), "residual out", lt_res, out0, off);
        check("residual res kept", download_x(d_res, out0.size()), out0, 0.0, 0.0);
        lt_called([&] { matmul_forward_residual(d_res + off, d_res + off, d_inp + off, d_w + c0, N, C, OC, ldw, s); },
                  &lt_inplace);
        diag(check("residual in place", download_x(d_res, out0.size()), r_res, atol + 1e-7, rtol), "residual in place",
             lt_inplace, out0, off);
        dev_free(d_res); dev_free(d_o2);
    }
    dev_free(d_w); dev_free(d_inp); dev_free(d_dout); dev_free(d_out); dev_free(d_dinp); dev_free(d_dw);
}

// host time per call of a tiny product (the GPU time is negligible): what the heuristic
// query and the descriptor setup cost, with (version 3) and without (version 2) the cache
static void bench_host_overhead(int version) {
    if (version == 1) return;
    const int N = 64, C = 64, OC = 64;
    floatX* d_w = upload_x(rand_floatX((size_t)OC * C, -1.0f, 1.0f, 21));
    floatX* d_inp = upload_x(rand_floatX((size_t)N * C, -1.0f, 1.0f, 22));
    floatX* d_out = (floatX*)dev_malloc((size_t)N * OC * sizeof(floatX));
    matmul_algo_cache_cap = version == 2 ? 0 : MATMUL_ALGO_CACHE_SIZE;
    matmul_forward(d_out, d_inp, d_w, N, C, OC, C, 0, 0);
    cudaCheck(cudaDeviceSynchronize());
    const int reps = 2000;
    double t0 = ladder_wall_seconds();
    for (int i = 0; i < reps; i++) matmul_forward(d_out, d_inp, d_w, N, C, OC, C, 0, 0);
    double t1 = ladder_wall_seconds();
    cudaCheck(cudaDeviceSynchronize());
    printf("  v%d host time per matmul_forward call (64x64x64, issue only): %.2f us\n", version, (t1 - t0) / reps * 1e6);
    dev_free(d_w); dev_free(d_inp); dev_free(d_out);
}

static void bench_version(int version, int N, int C, int OC) {
    floatX* d_w = upload_x(rand_floatX((size_t)OC * C, -1.0f, 1.0f, 11));
    floatX* d_inp = upload_x(rand_floatX((size_t)N * C, -1.0f, 1.0f, 12));
    floatX* d_dout = upload_x(rand_floatX((size_t)N * OC, -1.0f, 1.0f, 13));
    floatX* d_out = (floatX*)dev_malloc((size_t)N * OC * sizeof(floatX));
    floatX* d_dinp = (floatX*)dev_malloc((size_t)N * C * sizeof(floatX));
    floatX* d_dw = (floatX*)dev_malloc((size_t)OC * C * sizeof(floatX));
    cudaCheck(cudaMemset(d_dw, 0, (size_t)OC * C * sizeof(floatX)));
    int reps = version == 1 ? 2 : 20;
    double flop = 2.0 * N * C * OC;
    float t1 = bench_ms([&] {
        if (version == 1) matmul_fallback(d_out, d_inp, d_w, N, OC, C, C, 1, 1, C, OC, 0, 0);
        else matmul_forward(d_out, d_inp, d_w, N, C, OC, C, 0, 0);
    }, reps);
    float t2 = bench_ms([&] {
        if (version == 1) matmul_fallback(d_dinp, d_dout, d_w, N, C, OC, OC, 1, C, 1, C, 0, 0);
        else matmul_backward_input(d_dinp, d_dout, d_w, N, C, OC, C, 0, 0);
    }, reps);
    float t3 = bench_ms([&] {
        if (version == 1) matmul_fallback(d_dw, d_dout, d_inp, OC, C, N, 1, OC, C, 1, C, 1, 0);
        else matmul_backward_weight(d_dw, d_dout, d_inp, N, C, OC, C, 0);
    }, reps);
    printf("  v%d bench N=%d C=%d OC=%d: forward %.3f ms (%.1f TFLOP/s), backward_input %.3f ms (%.1f TFLOP/s), "
           "backward_weight %.3f ms (%.1f TFLOP/s)\n", version, N, C, OC, t1, flop / t1 * 1e-9, t2,
           flop / t2 * 1e-9, t3, flop / t3 * 1e-9);
    dev_free(d_w); dev_free(d_inp); dev_free(d_dout); dev_free(d_out); dev_free(d_dinp); dev_free(d_dw);
}

// version 4: one of train_llama's products, in the launchers' column-major terms
struct TrainerGemm { const char* name; int m, n, k, transa, transb; int64_t lda, ldb, ldd; int c_mode; };

// fwd: m = OC, n = N, k = C (A = W, T); bwd input: m = C, n = N, k = OC; bwd weight: m = C,
// n = OC, k = N (B = dout, T), always D += (see llmc/kernels/matmul.cuh)
static TrainerGemm gemm_fwd(const char* nm, int N, int C, int OC, int c_mode) { return {nm, OC, N, C, 1, 0, C, C, OC, c_mode}; }
static TrainerGemm gemm_bwd_input(const char* nm, int N, int C, int OC, int acc) { return {nm, C, N, OC, 0, 0, C, OC, C, acc}; }
static TrainerGemm gemm_bwd_weight(const char* nm, int N, int C, int OC) { return {nm, C, OC, N, 0, 1, C, OC, C, 1}; }

static void time_candidates(const TrainerGemm& g) {
    const int want_n = 8;
    size_t na = (size_t)(g.transa ? g.m : g.k) * g.lda, nb = (size_t)(g.transb ? g.k : g.n) * g.ldb, nd = (size_t)g.n * g.ldd;
    floatX* a = upload_x(rand_floatX(na, -1.0f, 1.0f, 31));
    floatX* b = upload_x(rand_floatX(nb, -1.0f, 1.0f, 32));
    std::vector<float> c0 = rand_floatX(nd, -1.0f, 1.0f, 33);
    floatX* c = upload_x(c0);
    floatX* d = upload_x(c0);
    MatmulAlgoEntry e;
    memset(&e, 0, sizeof e);
    e.key.m = g.m; e.key.n = g.n; e.key.k = g.k; e.key.transa = g.transa; e.key.transb = g.transb;
    e.key.c_mode = g.c_mode; e.key.lda = g.lda; e.key.ldb = g.ldb; e.key.ldd = g.ldd;
    e.key.al_a = matmul_alignment(a); e.key.al_b = matmul_alignment(b); e.key.al_d = matmul_alignment(d);
    e.key.al_c = g.c_mode == 2 ? matmul_alignment(c) : 0;
    cublasLtMatmulHeuristicResult_t heur[want_n];
    int n = matmul_lt_candidates(&e, heur, want_n);
    double flop = 2.0 * g.m * g.n * g.k;
    printf("  v4 %-26s m %5d n %5d k %5d %c%c %s: %d candidates\n", g.name, g.m, g.n, g.k, g.transa ? 'T' : 'N',
           g.transb ? 'T' : 'N', g.c_mode == 0 ? "D = AB" : g.c_mode == 1 ? "D += AB" : "D = C + AB", n);
    const float alpha = 1.0f, beta = g.c_mode ? 1.0f : 0.0f;
    const floatX* cc = g.c_mode == 2 ? c : d;
    // what the launchers compute (the cached algorithm): candidate 0 must give its bits
    upload_x_to(d, c0);
    if (!matmul_cublaslt(d, g.c_mode == 0 ? NULL : g.c_mode == 1 ? d : c, a, b, g.m, g.n, g.k, g.transa, g.transb, g.lda,
                         g.ldb, g.ldd, 0))
        printf("    (no cuBLASLt algorithm: the launchers fall back)\n");
    std::vector<float> launched = download_x(d, nd);
    std::vector<float> first;
    double atol, rtol;
    tol_for(g.k, 1.0, 1.0, &atol, &rtol);
    float best = 0.0f, t_first = 0.0f;
    for (int i = 0; i < n; i++) {
        auto run = [&] {
            cublasLtCheck(cublasLtMatmul(matmul_handle, e.op, &alpha, a, e.la, b, e.lb, &beta, cc, e.ld, d, e.ld,
                                         &heur[i].algo, matmul_workspace, MATMUL_WORKSPACE_BYTES, 0));
        };
        // one product from the same start for the check, then the timing (which accumulates
        // into d when beta = 1: the time is the same, the values no longer matter)
        upload_x_to(d, c0);
        run();
        std::vector<float> got = download_x(d, nd);
        char what[48];
        snprintf(what, sizeof what, "candidate %d vs first", i);
        if (i == 0) first = got, check_same("candidate 0 vs cached", got, launched);
        else check(what, got, first, 2 * atol, 2 * rtol);
        float ms = bench_ms(run, ladder_quick() ? 1 : 20);
        if (i == 0) t_first = ms;
        if (best == 0.0f || ms < best) best = ms;
        char cfg[160];
        matmul_algo_config_text(&heur[i].algo, cfg, sizeof cfg);
        printf("    #%d %-70s %8.4f ms %7.1f TFLOP/s\n", i, cfg, ms, flop / ms * 1e-9);
    }
    if (n > 0 && best > 0.0f)
        printf("    %s: the heuristic's first %.1f TFLOP/s, the best of %d %.1f (%+.1f%%)\n", g.name, flop / t_first * 1e-9, n,
               flop / best * 1e-9, 100.0 * (t_first / best - 1.0));
    if (n > 0) {
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e.ld));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e.lb));
        cublasLtCheck(cublasLtMatrixLayoutDestroy(e.la));
        cublasLtCheck(cublasLtMatmulDescDestroy(e.op));
    }
    dev_free(a); dev_free(b); dev_free(c); dev_free(d);
}

// llama3-1B at B 4, T 2048 (its head ran at the GEMM peak: left out); with LADDER_QUICK the
// same products at a toy size, which checks this code (the candidates, their descriptions)
static void trainer_shapes(bool toy) {
    const int N = toy ? 72 : 4 * 2048, D = toy ? 48 : 2048, KVD = toy ? 16 : 512, F = toy ? 96 : 8192;
    const TrainerGemm gs[] = {
        gemm_fwd("q fwd", N, D, D, 0), gemm_fwd("k (v) fwd", N, D, KVD, 0), gemm_fwd("q|k|v fused fwd", N, D, D + 2 * KVD, 0),
        gemm_fwd("wo fwd (C = residual)", N, D, D, 2), gemm_fwd("w1 (w3) fwd", N, D, F, 0), gemm_fwd("w2 fwd (C = residual)", N, F, D, 2),
        gemm_bwd_input("q bwd input", N, D, D, 0), gemm_bwd_input("k (v) bwd input (+=)", N, D, KVD, 1),
        gemm_bwd_input("q|k|v fused bwd input", N, D, D + 2 * KVD, 0), gemm_bwd_input("wo bwd input", N, D, D, 0),
        gemm_bwd_input("w1 bwd input", N, D, F, 0), gemm_bwd_input("w2 bwd input", N, F, D, 0),
        gemm_bwd_weight("q bwd weight", N, D, D), gemm_bwd_weight("k (v) bwd weight", N, D, KVD),
        gemm_bwd_weight("q|k|v fused bwd weight", N, D, D + 2 * KVD), gemm_bwd_weight("wo bwd weight", N, D, D),
        gemm_bwd_weight("w1 bwd weight", N, D, F), gemm_bwd_weight("w2 bwd weight", N, F, D),
    };
    for (const TrainerGemm& g : gs) time_candidates(g);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "matmul", 4);
    matmul_setup();
    // odd sizes from the test references (D=24, V=67, F=61), a slice with c0 > 0 and
    // ldw > C (hidden-chunked w2), GQA-like shapes, a size that is a multiple of 64
    const Shape shapes[] = {
        {7, 24, 67, 24, 0}, {33, 61, 24, 61, 0}, {33, 20, 24, 61, 21}, {64, 48, 96, 48, 0},
        {5, 3, 2, 9, 5},    {130, 64, 192, 64, 0}, {257, 128, 96, 200, 33},
    };
    for (int version = 1; version <= 3; version++) {
        if (!want(version)) continue;
        static const char* names[3] = {"tiled shared-memory kernel (fallback)", "cuBLASLt, heuristic queried on every call",
                                       "cuBLASLt, algorithm cache, residual as C (llmc)"};
        printf("version %d: %s\n", version, names[version - 1]);
        // every shape with accumulate 0/1 and offset 0/1: the trainers accumulate (C = D) into
        // aligned buffers. The seeds of accumulate == offset are those of the runs before.
        for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++)
            for (int acc = 0; acc <= 1; acc++)
                for (int off = 0; off <= 1; off++)
                    run_version(version, shapes[si], acc, off, 100 + 2 * si + acc + (acc == off ? 0 : 1000));
        if (version >= 2 && matmul_fallback_warned) printf("  note: cuBLASLt fell back to the tiled kernel for some shape\n");
        if (!ladder_quick()) {
            bench_version(version, 8192, 2048, 8192);
            bench_host_overhead(version);
        }
    }
    if (want(4)) {
        printf("version 4: train_llama's products at llama3-1B's shapes, cuBLASLt's candidates timed\n");
        if (ladder_quick()) printf("  (LADDER_QUICK: the toy sizes)\n");
        trainer_shapes(ladder_quick());
    }
    matmul_teardown();
    return ladder_finish("matmul");
}
