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
slice (w + c0, ldw > C) like the hidden-chunked FFN uses, and with pointer offsets
that are not 16-byte aligned; the whole weight buffer is compared, so writes
outside the slice would show. Version 3 also runs each product twice (the second
from the cache) and requires the same bits.
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

static void run_version(int version, const Shape& sh, int accumulate, uint64_t seed) {
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
    const int off = (seed & 1) ? 1 : 0;
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
    } else {
        matmul_forward(d_out + off, d_inp + off, d_w + c0, N, C, OC, ldw, accumulate, s);
        matmul_backward_input(d_dinp + off, d_dout + off, d_w + c0, N, C, OC, ldw, accumulate, s);
        matmul_backward_weight(d_dw + c0, d_dout + off, d_inp + off, N, C, OC, ldw, s);
    }
    printf("  v%d N=%d C=%d OC=%d ldw=%d c0=%d offset=%d accumulate=%d\n", version, N, C, OC, ldw, c0, off, accumulate);
    double atol, rtol;
    tol_for(C, 1.0, 1.0, &atol, &rtol);
    check("forward out", download_x(d_out, out0.size()), r_out, atol + (accumulate ? 1e-7 : 0), rtol);
    tol_for(OC, 1.0, 1.0, &atol, &rtol);
    check("backward_input dinp", download_x(d_dinp, dinp0.size()), r_dinp, atol, rtol);
    tol_for(N, 1.0, 1.0, &atol, &rtol);
    check("backward_weight dW", download_x(d_dw, dw0.size()), r_dw, atol, rtol);
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
        matmul_forward_residual(d_o2 + off, d_res + off, d_inp + off, d_w + c0, N, C, OC, ldw, s);
        tol_for(C, 1.0, 1.0, &atol, &rtol);
        check("residual out", download_x(d_o2, out0.size()), r_res, atol + 1e-7, rtol);
        check("residual res kept", download_x(d_res, out0.size()), out0, 0.0, 0.0);
        matmul_forward_residual(d_res + off, d_res + off, d_inp + off, d_w + c0, N, C, OC, ldw, s);
        check("residual in place", download_x(d_res, out0.size()), r_res, atol + 1e-7, rtol);
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
        uint64_t seed = 100;
        for (const Shape& sh : shapes)
            for (int acc = 0; acc <= 1; acc++) run_version(version, sh, acc, seed++);
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
