/*
Which BLAS for the CPU build's matrix products: the candidates side by side on the
trainers' own GEMM shapes, in one run (issue 27 item 1; dev/bench/bench_blas.sh installs the
candidates, builds this and runs it; docs/results/cpu_blas_choice.md is its report).

  build/bench/blas_compare [--rounds R] [--threads T] [--min-time S] [--pause S] [--jsonl FILE] [--only MODEL]
                           KIND=PATH ...

KIND is one of openblas (a cblas_sgemm library: Debian's OpenBLAS, any OpenBLAS build),
scipy-openblas (PyPI's scipy-openblas32: scipy_cblas_sgemm), blis (libblis: cblas_sgemm),
dnnl (oneDNN: dnnl_sgemm) or mkl (libmkl_rt: cblas_sgemm on GNU OpenMP threads, as
MKL_THREADING_LAYER=GNU); PATH is the shared library. A KIND may be given a label:
LABEL@KIND=PATH.

Each (round, candidate) runs in a fresh child process (fork, then dlopen of that one
library), so the libraries never meet in one process and a crash of one is reported,
not fatal. Rounds interleave the candidates: round r runs every candidate once, in an
order rotated by r, so a stretch of load from other processes falls on all of them. Every
shape of every GEMM the trainers call (matmul_forward: out = inp . W^T;
matmul_backward_input: dinp = dout . W; matmul_backward_weight: dW += dout^T . inp, the
three cblas_sgemm calls of llmc/kernels/cpu/matmul.h with the same transposes and leading
dimensions) is timed best-of-N within the child after one warm-up call, and the best over
the rounds is reported as GFLOP/s = 2 M N K / time.

Also per candidate and shape:
  - agreement with the blocked loops of llmc/kernels/cpu/matmul.h (built without USE_BLAS, the
    trainers' BLAS=0 build, computed once in a child of its own): max |c - ref| / max |ref|;
  - determinism: every call of a child must give the same bits (a hash of the output), every
    round the same bits as round 1, and one extra child per candidate runs with 1 thread
    (its bits compared with the T-thread bits, its speed reported too);
  - the trainers' pattern: a loop of {an OpenMP parallel-for over an activation-sized buffer,
    one GEMM}, T threads, against the sum of the two timed alone: a BLAS that keeps its own
    pool of threads competes with the OpenMP threads on the same cores ("mixed" rows).
Prints a markdown table; --jsonl writes one line per (candidate, shape). --pause S sleeps
S seconds before each child: run under a real-time policy (dev/bench/bench_blas.sh --rt:
chrt -r) so that other processes on a shared machine do not time-slice the candidates,
it gives them the cores back between children.

  build/bench/blas_compare --yardstick R [--threads T] [--pause S] [LABEL@]KIND=PATH ...

times the yardstick alone (M 2048 N 32000 K 288, the head's forward, NoTrans x Trans, on
the random inputs above), each candidate in a fresh child: two warm-up calls, then R timed
calls; prints one JSON line per candidate ({"candidate", "kind", "path", "info", "threads",
"median_gflops", "best_gflops", "times_ms", "max_rel_err"}, or {"candidate", "error"}), where
max_rel_err compares 256 sampled outputs with double-precision dot products. No loops,
checks of bits or 1-thread child. dev/bench/bench_cpu_step.py --yardstick calls it between
the training steps it times.
*/
#include "llmc/kernels/cpu/matmul.h"  // the blocked loops (this file is compiled without USE_BLAS)
#include <dlfcn.h>
#include <omp.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

// ---------------------------------------------------------------------------------------
// the shapes: (model, layer, op, N rows, C in, OC out) as the trainers call matmul_*

enum { OP_FWD = 0, OP_BWD_IN = 1, OP_BWD_W = 2 };
static const char* OP_NAME[3] = {"fwd", "bwd_in", "bwd_w"};
typedef struct { const char* model; const char* layer; int op, N, C, OC; } Shape;

#define MAX_SHAPES 64
static Shape shapes[MAX_SHAPES];
static int n_shapes = 0;
static const char* only_model = NULL;  // --only MODEL: that model's shapes (and the yardstick's)
static void add3(const char* model, const char* layer, int N, int C, int OC, int ops) {
    if (only_model && strcmp(model, "yardstick") && strcmp(model, only_model)) return;
    for (int op = 0; op < 3; op++)
        if (ops & (1 << op)) shapes[n_shapes++] = (Shape){model, layer, op, N, C, OC};
}
static void make_shapes(void) {
    // the yardstick: M 2048 N 32000 K 288 = stories15M's head forward at B*T = 2048
    add3("yardstick", "head (M2048 N32000 K288)", 2048, 288, 32000, 1);
    // stories15M (D 288, H 6, KV 6, F 768, V 32000) and stories260K (D 64, H 8, KV 4 of head
    // dim 8, F 172, V 512) at B 8, T 256 as dev/bench/bench_cpu_step.py trains them: N = 2048
    add3("stories15M", "wq/wk/wv/wo", 2048, 288, 288, 7);
    add3("stories15M", "w1/w3", 2048, 288, 768, 7);
    add3("stories15M", "w2", 2048, 768, 288, 7);
    add3("stories15M", "head", 2048, 288, 32000, 6);  // its forward is the yardstick
    add3("stories260K", "wq/wo", 2048, 64, 64, 7);
    add3("stories260K", "wk/wv", 2048, 64, 32, 7);
    add3("stories260K", "w1/w3", 2048, 64, 172, 7);
    add3("stories260K", "w2", 2048, 172, 64, 7);
    add3("stories260K", "head", 2048, 64, 512, 7);
    // dit-tiny (D 64, FF 256, 256 tokens of patch dim 8) at make dit's batch 16: B*N = 4096
    add3("dit-tiny", "qkv/proj", 4096, 64, 64, 7);
    add3("dit-tiny", "fc1", 4096, 64, 256, 7);
    add3("dit-tiny", "fc2", 4096, 256, 64, 7);
    add3("dit-tiny", "final", 4096, 64, 8, 7);
    add3("dit-tiny", "patch", 4096, 8, 64, 5);    // no gradient into the clip
    add3("dit-tiny", "adaLN", 16, 64, 384, 7);    // per clip: [B, D] -> [B, 6D]
}
static void gemm_dims(const Shape* s, int* M, int* N, int* K) {
    if (s->op == OP_FWD) { *M = s->N; *N = s->OC; *K = s->C; }
    else if (s->op == OP_BWD_IN) { *M = s->N; *N = s->C; *K = s->OC; }
    else { *M = s->OC; *N = s->C; *K = s->N; }
}
static size_t out_elems(const Shape* s) {
    return s->op == OP_FWD ? (size_t)s->N * s->OC : s->op == OP_BWD_IN ? (size_t)s->N * s->C : (size_t)s->OC * s->C;
}

// ---------------------------------------------------------------------------------------
// the candidates: one sgemm with cblas's row-major arguments, whatever the library

enum { CblasRowMajor_ = 101, CblasNoTrans_ = 111, CblasTrans_ = 112 };
typedef void (*cblas_sgemm_t)(int, int, int, int, int, int, float, const float*, int, const float*, int, float, float*, int);
typedef int (*dnnl_sgemm_t)(char, char, int64_t, int64_t, int64_t, float, const float*, int64_t, const float*, int64_t,
                            float, float*, int64_t);
typedef struct { const char* label; const char* kind; const char* path; } Cand;
#define MAX_CANDS 8
static Cand cands[MAX_CANDS];
static int n_cands = 0;

static cblas_sgemm_t cb;  // in the child: the loaded library's sgemm
static dnnl_sgemm_t dn;
static void* lib;

// out = the product of a shape's operands, with the transposes of llmc/kernels/cpu/matmul.h's cblas calls
static void run_gemm(const Shape* s, const float* inp, const float* w, const float* dout, float* out) {
    int tn = CblasNoTrans_, tt = CblasTrans_;
    if (s->op == OP_FWD) {
        if (cb) cb(CblasRowMajor_, tn, tt, s->N, s->OC, s->C, 1.0f, inp, s->C, w, s->C, 0.0f, out, s->OC);
        else dn('N', 'T', s->N, s->OC, s->C, 1.0f, inp, s->C, w, s->C, 0.0f, out, s->OC);
    } else if (s->op == OP_BWD_IN) {
        if (cb) cb(CblasRowMajor_, tn, tn, s->N, s->C, s->OC, 1.0f, dout, s->OC, w, s->C, 0.0f, out, s->C);
        else dn('N', 'N', s->N, s->C, s->OC, 1.0f, dout, s->OC, w, s->C, 0.0f, out, s->C);
    } else {  // accumulates into out (beta 1), as gradient accumulation does
        if (cb) cb(CblasRowMajor_, tt, tn, s->OC, s->C, s->N, 1.0f, dout, s->OC, inp, s->C, 1.0f, out, s->C);
        else dn('T', 'N', s->OC, s->C, s->N, 1.0f, dout, s->OC, inp, s->C, 1.0f, out, s->C);
    }
}
static void run_loops(const Shape* s, const float* inp, const float* w, const float* dout, float* out) {
    if (s->op == OP_FWD) matmul_forward(out, inp, w, s->N, s->C, s->OC, s->C, 0, 0);
    else if (s->op == OP_BWD_IN) matmul_backward_input(out, dout, w, s->N, s->C, s->OC, s->C, 0, 0);
    else matmul_backward_weight(out, dout, inp, s->N, s->C, s->OC, s->C, 0);
}

static void* sym(const char* name) { return lib ? dlsym(lib, name) : NULL; }

// load the candidate in this (child) process, on `threads` threads; writes what it detected into info
static int load_candidate(const Cand* c, int threads, char* info, size_t ninfo) {
    char t[16];
    snprintf(t, sizeof t, "%d", threads);
    // before the library reads its environment; none of them is told the processor type
    setenv("OMP_NUM_THREADS", t, 1);
    setenv("OPENBLAS_NUM_THREADS", t, 1);
    setenv("BLIS_NUM_THREADS", t, 1);
    setenv("MKL_NUM_THREADS", t, 1);
    if (!strcmp(c->kind, "mkl")) { setenv("MKL_THREADING_LAYER", "GNU", 1); setenv("MKL_INTERFACE_LAYER", "LP64", 1); }
    omp_set_num_threads(threads);
    lib = dlopen(c->path, RTLD_NOW | RTLD_LOCAL);
    if (!lib) { snprintf(info, ninfo, "dlopen failed: %s", dlerror()); return 0; }
    info[0] = 0;
    if (!strcmp(c->kind, "openblas") || !strcmp(c->kind, "scipy-openblas")) {
        const char* p = !strcmp(c->kind, "openblas") ? "" : "scipy_";
        char n[64];
        snprintf(n, sizeof n, "%scblas_sgemm", p); cb = (cblas_sgemm_t)sym(n);
        snprintf(n, sizeof n, "%sopenblas_set_num_threads", p);
        void (*set)(int) = (void (*)(int))sym(n);
        if (set) set(threads);
        snprintf(n, sizeof n, "%sopenblas_get_corename", p);
        char* (*core)(void) = (char* (*)(void))sym(n);
        snprintf(n, sizeof n, "%sopenblas_get_config", p);
        char* (*cfg)(void) = (char* (*)(void))sym(n);
        snprintf(n, sizeof n, "%sopenblas_get_parallel", p);
        int (*par)(void) = (int (*)(void))sym(n);
        snprintf(info, ninfo, "core %s; %s; threading %s", core ? core() : "?", cfg ? cfg() : "?",
                 par ? (par() == 2 ? "OpenMP" : par() == 1 ? "own pthreads" : "serial") : "?");
    } else if (!strcmp(c->kind, "blis")) {
        cb = (cblas_sgemm_t)sym("cblas_sgemm");
        void (*set)(int) = (void (*)(int))sym("bli_thread_set_num_threads");
        if (set) set(threads);  // BLIS reads BLIS_NUM_THREADS/OMP_NUM_THREADS, else runs on 1 thread
        int (*aid)(void) = (int (*)(void))sym("bli_arch_query_id");
        const char* (*astr)(int) = (const char* (*)(int))sym("bli_arch_string");
        const char* (*ver)(void) = (const char* (*)(void))sym("bli_info_get_version_str");
        snprintf(info, ninfo, "BLIS %s, configuration %s", ver ? ver() : "?", aid && astr ? astr(aid()) : "?");
    } else if (!strcmp(c->kind, "dnnl")) {
        dn = (dnnl_sgemm_t)sym("dnnl_sgemm");
        int (*isa)(void) = (int (*)(void))sym("dnnl_get_effective_cpu_isa");
        const char* (*isastr)(int) = (const char* (*)(int))sym("dnnl_cpu_isa2str");
        typedef struct { int major, minor, patch; const char* hash; unsigned cpu_runtime, gpu_runtime; } dv_t;
        const dv_t* (*ver)(void) = (const dv_t* (*)(void))sym("dnnl_version");
        const dv_t* v = ver ? ver() : NULL;
        snprintf(info, ninfo, "oneDNN %d.%d.%d, cpu runtime %s, ISA %s", v ? v->major : 0, v ? v->minor : 0, v ? v->patch : 0,
                 v ? (v->cpu_runtime == 2u ? "OpenMP" : v->cpu_runtime == 4u ? "TBB" : v->cpu_runtime == 1u ? "sequential" : "other") : "?",
                 isa && isastr ? isastr(isa()) : "?");
    } else if (!strcmp(c->kind, "mkl")) {
        cb = (cblas_sgemm_t)sym("cblas_sgemm");
        void (*set)(int) = (void (*)(int))sym("MKL_Set_Num_Threads");
        if (set) set(threads);
        void (*ver)(char*, int) = (void (*)(char*, int))sym("MKL_Get_Version_String");
        char v[256];
        memset(v, 0, sizeof v);
        if (ver) ver(v, 198);  // not NUL-terminated: padded with blanks to the length given
        for (int k = 197; k >= 0 && (v[k] == ' ' || v[k] == 0); k--) v[k] = 0;
        snprintf(info, ninfo, "%s, threading layer GNU OpenMP", v);
    } else {
        snprintf(info, ninfo, "unknown kind '%s'", c->kind);
        return 0;
    }
    if (!cb && !dn) { snprintf(info, ninfo, "no sgemm symbol in %s", c->path); return 0; }
    for (char* p = info; *p; p++) if (*p == '\n' || *p == '|') *p = ' ';
    return 1;
}

// ---------------------------------------------------------------------------------------
// shared between the parent and its children (MAP_SHARED)

typedef struct {
    double best_s;      // best time of one call in this child
    uint64_t hash;      // of the first call's output
    int calls, same;    // calls timed; 1 if every call gave the same bits
    double max_rel;     // against the blocked loops
} Res;
typedef struct { double gemm_s, omp_s, mixed_s; } Mixed;
#define MAX_ROUNDS 32
#define N_MIXED 2
#define MAX_YARD 200
typedef struct {
    Res r[MAX_ROUNDS + 1][MAX_CANDS][MAX_SHAPES];  // [R] is the 1-thread child
    Mixed mixed[MAX_ROUNDS][MAX_CANDS][N_MIXED];
    int ok[MAX_ROUNDS + 1][MAX_CANDS];
    char info[MAX_CANDS][400];
    double loops_s[MAX_SHAPES];
    uint64_t loops_hash[MAX_SHAPES];
    double yard_ms[MAX_CANDS][MAX_YARD];  // --yardstick: every timed call
    double yard_err[MAX_CANDS];
} Shared;
static Shared* sh;
static float* ref[MAX_SHAPES];  // the blocked loops' outputs (shared memory)

static uint64_t hash_floats(const float* x, size_t n) {
    uint64_t h = 1469598103934665603ull;
    const uint32_t* u = (const uint32_t*)x;
    for (size_t i = 0; i < n; i++) h = (h ^ u[i]) * 1099511628211ull;
    return h;
}
static void fill(float* x, size_t n, unsigned seed) {
    unsigned s = seed;
    for (size_t i = 0; i < n; i++) { s = s * 1664525u + 1013904223u; x[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
}

// inputs: shared by all shapes (sized for the largest), written by the parent before any fork
static float *g_inp, *g_w, *g_dout, *g_dw0, *g_out;
static size_t max_in, max_w, max_dout, max_out;

static void prepare_out(const Shape* s, float* out) {
    // backward_weight accumulates: start every call from the same dW
    if (s->op == OP_BWD_W) memcpy(out, g_dw0, out_elems(s) * sizeof(float));
}

static void child_reference(void) {
    omp_set_num_threads(2);
    for (int i = 0; i < n_shapes; i++) {
        const Shape* s = &shapes[i];
        prepare_out(s, ref[i]);
        run_loops(s, g_inp, g_w, g_dout, ref[i]);  // warm-up and the reference at once
        double best = 1e30;
        for (int k = 0; k < 2; k++) {
            prepare_out(s, g_out);
            double t0 = now_s();
            run_loops(s, g_inp, g_w, g_dout, g_out);
            double t = now_s() - t0;
            if (t < best) best = t;
        }
        sh->loops_s[i] = best;
        sh->loops_hash[i] = hash_floats(ref[i], out_elems(s));
    }
}

// an OpenMP pass over an activation-sized buffer, as the trainers' norms, SwiGLU, softmax do
static void omp_pass(float* x, size_t n) {
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) x[i] = x[i] * 0.999f + 0.001f;
}

static void child_candidate(int round, int ci, int threads, double min_time, int do_mixed) {
    char info[400];
    if (!load_candidate(&cands[ci], threads, info, sizeof info)) {
        snprintf(sh->info[ci], sizeof sh->info[ci], "%s", info);
        _exit(3);
    }
    if (round == 0) snprintf(sh->info[ci], sizeof sh->info[ci], "%s", info);
    for (int i = 0; i < n_shapes; i++) {
        const Shape* s = &shapes[i];
        Res* r = &sh->r[round][ci][i];
        size_t n = out_elems(s);
        prepare_out(s, g_out);
        run_gemm(s, g_inp, g_w, g_dout, g_out);  // warm-up, and the bits every later call must give
        r->hash = hash_floats(g_out, n);
        double maxd = 0, maxr = 0;
        for (size_t k = 0; k < n; k++) {
            double d = fabs((double)g_out[k] - ref[i][k]), a = fabs((double)ref[i][k]);
            if (d > maxd || d != d) maxd = d != d ? 1e30 : d;
            if (a > maxr) maxr = a;
        }
        r->max_rel = maxd / (maxr > 0 ? maxr : 1);
        r->same = 1;
        double best = 1e30, spent = 0;
        int calls = 0;
        while (calls < 3 || (spent < min_time && calls < 200)) {
            prepare_out(s, g_out);
            double t0 = now_s();
            run_gemm(s, g_inp, g_w, g_dout, g_out);
            double t = now_s() - t0;
            spent += t;
            calls++;
            if (t < best) best = t;
            if (calls <= 3 && hash_floats(g_out, n) != r->hash) r->same = 0;  // hash the first calls only: time
        }
        r->best_s = best;
        r->calls = calls;
    }
    if (do_mixed) {
        // two GEMM sizes: stories15M's w1 forward (~0.9 GFLOP) and stories260K's (~45 MFLOP)
        const Shape ms[N_MIXED] = {{"mixed", "stories15M w1", OP_FWD, 2048, 288, 768},
                                   {"mixed", "stories260K w1", OP_FWD, 2048, 64, 172}};
        size_t nb = (size_t)2048 * 768;  // the FFN's hidden activation of stories15M
        float* buf = (float*)xmalloc(nb * sizeof(float));
        fill(buf, nb, 7);
        for (int m = 0; m < N_MIXED; m++) {
            const Shape* s = &ms[m];
            const int K = m == 0 ? 20 : 200;
            double bg = 1e30, bo = 1e30, bm = 1e30;
            for (int rep = 0; rep < 3; rep++) {
                double t0 = now_s();
                for (int k = 0; k < K; k++) run_gemm(s, g_inp, g_w, g_dout, g_out);
                double t1 = now_s();
                for (int k = 0; k < K; k++) omp_pass(buf, nb);
                double t2 = now_s();
                for (int k = 0; k < K; k++) { omp_pass(buf, nb); run_gemm(s, g_inp, g_w, g_dout, g_out); }
                double t3 = now_s();
                if (t1 - t0 < bg) bg = t1 - t0;
                if (t2 - t1 < bo) bo = t2 - t1;
                if (t3 - t2 < bm) bm = t3 - t2;
            }
            sh->mixed[round][ci][m] = (Mixed){bg / K, bo / K, bm / K};
        }
        free(buf);
    }
    _exit(0);
}

// --yardstick: the yardstick shape alone, R timed calls after two warm-up calls
static void child_yardstick(int ci, int threads, int repeats) {
    char info[400];
    if (!load_candidate(&cands[ci], threads, info, sizeof info)) {
        snprintf(sh->info[ci], sizeof sh->info[ci], "%s", info);
        _exit(3);
    }
    snprintf(sh->info[ci], sizeof sh->info[ci], "%s", info);
    const Shape* s = &shapes[0];  // the yardstick (make_shapes adds it first)
    for (int k = 0; k < 2; k++) run_gemm(s, g_inp, g_w, g_dout, g_out);
    for (int k = 0; k < repeats; k++) {
        double t0 = now_s();
        run_gemm(s, g_inp, g_w, g_dout, g_out);
        sh->yard_ms[ci][k] = (now_s() - t0) * 1e3;
    }
    // 256 sampled outputs against double-precision dot products (out = inp . W^T)
    double maxd = 0, maxr = 0;
    unsigned r = 12345;
    for (int k = 0; k < 256; k++) {
        r = r * 1664525u + 1013904223u;
        size_t i = (r >> 8) % (size_t)s->N;
        r = r * 1664525u + 1013904223u;
        size_t j = (r >> 8) % (size_t)s->OC;
        double ref = 0;
        for (int c = 0; c < s->C; c++) ref += (double)g_inp[i * s->C + c] * g_w[j * s->C + c];
        double d = fabs(g_out[i * s->OC + j] - ref);
        if (d > maxd || d != d) maxd = d != d ? 1e30 : d;
        if (fabs(ref) > maxr) maxr = fabs(ref);
    }
    sh->yard_err[ci] = maxd / (maxr > 0 ? maxr : 1);
    _exit(0);
}
static int cmp_double(const void* a, const void* b) {
    double x = *(const double*)a, y = *(const double*)b;
    return x < y ? -1 : x > y;
}

static int run_child(void (*fn)(void*), void* arg, const char* what) {
    fflush(stdout); fflush(stderr);
    pid_t p = fork();
    if (p < 0) FAIL("fork failed");
    if (p == 0) { fn(arg); _exit(0); }
    int st = 0;
    waitpid(p, &st, 0);
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "blas_compare: %s: child %s %d\n", what, WIFSIGNALED(st) ? "killed by signal" : "exited with",
                WIFSIGNALED(st) ? WTERMSIG(st) : WEXITSTATUS(st));
        return 0;
    }
    return 1;
}
typedef struct { int round, ci, threads, mixed; double min_time; } Job;
static void job_ref(void* a) { (void)a; child_reference(); }
static int yard_repeats = 0;  // --yardstick R
static void job_yard(void* a) { Job* j = (Job*)a; child_yardstick(j->ci, j->threads, yard_repeats); }
static void job_cand(void* a) { Job* j = (Job*)a; child_candidate(j->round, j->ci, j->threads, j->min_time, j->mixed); }

static double loadavg1(void) {
    double l = -1;
    FILE* f = fopen("/proc/loadavg", "r");
    if (f) { if (fscanf(f, "%lf", &l) != 1) l = -1; fclose(f); }
    return l;
}

int main(int argc, char** argv) {
    int rounds = 5, threads = 2;
    double min_time = 0.3, pause = 0;
    const char* jsonl = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--rounds") && i + 1 < argc) rounds = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--min-time") && i + 1 < argc) min_time = atof(argv[++i]);
        else if (!strcmp(argv[i], "--jsonl") && i + 1 < argc) jsonl = argv[++i];
        else if (!strcmp(argv[i], "--pause") && i + 1 < argc) pause = atof(argv[++i]);
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only_model = argv[++i];
        else if (!strcmp(argv[i], "--yardstick") && i + 1 < argc) { yard_repeats = atoi(argv[++i]); only_model = "yardstick"; }
        else if (strchr(argv[i], '=') && n_cands < MAX_CANDS) {
            char* s = strdup(argv[i]);
            char* eq = strchr(s, '=');
            *eq = 0;
            char* at = strchr(s, '@');
            if (at) { *at = 0; cands[n_cands] = (Cand){s, at + 1, eq + 1}; }
            else cands[n_cands] = (Cand){s, s, eq + 1};
            n_cands++;
        } else {
            fprintf(stderr, "usage: blas_compare [--rounds R] [--threads T] [--min-time S] [--pause S] [--jsonl FILE] [--only MODEL|yardstick] "
                            "[--yardstick R] [LABEL@]KIND=LIBRARY ...  (KIND: openblas scipy-openblas blis dnnl mkl)\n");
            return 2;
        }
    }
    if (n_cands == 0 || rounds < 1 || rounds > MAX_ROUNDS || threads < 1 || yard_repeats < 0 || yard_repeats > MAX_YARD) {
        fprintf(stderr, "blas_compare: bad arguments\n");
        return 2;
    }
    make_shapes();
    for (int i = 0; i < n_shapes; i++) {
        const Shape* s = &shapes[i];
        size_t a = (size_t)s->N * s->C, w = (size_t)s->OC * s->C, d = (size_t)s->N * s->OC, o = out_elems(s);
        if (a > max_in) max_in = a;
        if (w > max_w) max_w = w;
        if (d > max_dout) max_dout = d;
        if (o > max_out) max_out = o;
    }
    if (max_out < (size_t)2048 * 768) max_out = (size_t)2048 * 768;
    if (max_in < (size_t)2048 * 288) max_in = (size_t)2048 * 288;
    if (max_w < (size_t)768 * 288) max_w = (size_t)768 * 288;
    g_inp = (float*)xmalloc(max_in * 4); g_w = (float*)xmalloc(max_w * 4); g_dout = (float*)xmalloc(max_dout * 4);
    g_dw0 = (float*)xmalloc(max_w * 4); g_out = (float*)xmalloc(max_out * 4);
    fill(g_inp, max_in, 1); fill(g_w, max_w, 2); fill(g_dout, max_dout, 3); fill(g_dw0, max_w, 4);
    memset(g_out, 0, max_out * 4);
    sh = (Shared*)mmap(NULL, sizeof(Shared), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (sh == MAP_FAILED) FAIL("mmap");
    memset(sh, 0, sizeof(Shared));
    for (int i = 0; i < n_shapes; i++) {
        ref[i] = (float*)mmap(NULL, out_elems(&shapes[i]) * 4, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
        if (ref[i] == MAP_FAILED) FAIL("mmap");
    }
    if (yard_repeats > 0) {  // the yardstick alone, one child per candidate, one JSON line each
        for (int ci = 0; ci < n_cands; ci++) {
            Job j = {0, ci, threads, 0, 0};
            char what[200];
            snprintf(what, sizeof what, "yardstick %s", cands[ci].label);
            if (pause > 0) usleep((useconds_t)(pause * 1e6));
            int ok = run_child(job_yard, &j, what);
            for (char* p = sh->info[ci]; *p; p++) if (*p == '"' || *p == '\\') *p = '\'';
            if (!ok) {
                printf("{\"candidate\": \"%s\", \"kind\": \"%s\", \"path\": \"%s\", \"error\": \"%s\"}\n", cands[ci].label,
                       cands[ci].kind, cands[ci].path, sh->info[ci][0] ? sh->info[ci] : "child failed");
                continue;
            }
            double* t = sh->yard_ms[ci];
            double sorted[MAX_YARD];
            memcpy(sorted, t, yard_repeats * sizeof(double));
            qsort(sorted, yard_repeats, sizeof(double), cmp_double);
            double med = yard_repeats % 2 ? sorted[yard_repeats / 2] : 0.5 * (sorted[yard_repeats / 2 - 1] + sorted[yard_repeats / 2]);
            double fl = 2.0 * 2048 * 32000 * 288;
            printf("{\"candidate\": \"%s\", \"kind\": \"%s\", \"path\": \"%s\", \"info\": \"%s\", \"M\": 2048, \"N\": 32000, "
                   "\"K\": 288, \"threads\": %d, \"median_gflops\": %.3f, \"best_gflops\": %.3f, \"max_rel_err\": %.3e, \"times_ms\": [",
                   cands[ci].label, cands[ci].kind, cands[ci].path, sh->info[ci], threads, fl / med / 1e6, fl / sorted[0] / 1e6,
                   sh->yard_err[ci]);
            for (int k = 0; k < yard_repeats; k++) printf("%s%.4f", k ? ", " : "", t[k]);
            printf("]}\n");
            fflush(stdout);
        }
        return 0;
    }
    double load0 = loadavg1(), t_start = now_s();
    fprintf(stderr, "blas_compare: %d shapes, %d candidates, %d rounds, %d threads; load average %.2f\n", n_shapes, n_cands,
            rounds, threads, load0);
    if (!run_child(job_ref, NULL, "blocked loops")) return 1;
    for (int r = 0; r <= rounds; r++) {  // round `rounds` is the 1-thread one
        for (int k = 0; k < n_cands; k++) {
            int ci = (k + r) % n_cands;
            Job j = {r, ci, r == rounds ? 1 : threads, r < rounds, min_time};
            char what[200];
            snprintf(what, sizeof what, "round %d %s", r, cands[ci].label);
            if (pause > 0) usleep((useconds_t)(pause * 1e6));  // let other processes run between children (see --pause)
            sh->ok[r][ci] = run_child(job_cand, &j, what);
            fprintf(stderr, "blas_compare: %s %s (%.0f s, load %.2f)\n", what, sh->ok[r][ci] ? "done" : "FAILED",
                    now_s() - t_start, loadavg1());
        }
    }
    double load1 = loadavg1();

    // the report
    printf("Load average (1 min) before %.2f, after %.2f; %d rounds of every candidate, interleaved; %d threads "
           "(the last round: 1 thread); %.0f s in all.\n\n", load0, load1, rounds, threads, now_s() - t_start);
    printf("Candidates (what each detected):\n\n");
    for (int c = 0; c < n_cands; c++) printf("- %s (`%s`): %s\n", cands[c].label, cands[c].path, sh->info[c]);
    printf("\nGFLOP/s, best call over %d rounds (%d threads); the blocked loops: best of 2 calls, 2 threads\n\n", rounds, threads);
    printf("| model | layer | op | M N K | loops |");
    for (int c = 0; c < n_cands; c++) printf(" %s |", cands[c].label);
    printf("\n|---|---|---|---|---|");
    for (int c = 0; c < n_cands; c++) printf("---|");
    printf("\n");
    FILE* jf = jsonl ? fopen(jsonl, "w") : NULL;
    double geo[MAX_CANDS] = {0}, geo1[MAX_CANDS] = {0};
    int ngeo[MAX_CANDS] = {0};
    double worst_rel[MAX_CANDS] = {0};
    int bad_repeat[MAX_CANDS] = {0}, bad_rounds[MAX_CANDS] = {0}, bad_threads[MAX_CANDS] = {0};
    for (int i = 0; i < n_shapes; i++) {
        const Shape* s = &shapes[i];
        int M, N, K;
        gemm_dims(s, &M, &N, &K);
        double fl = 2.0 * M * N * K;
        printf("| %s | %s | %s | %d %d %d | %.1f |", s->model, s->layer, OP_NAME[s->op], M, N, K, fl / sh->loops_s[i] / 1e9);
        for (int c = 0; c < n_cands; c++) {
            double best = 1e30, best1 = 1e30;
            int okr = 0;
            uint64_t h0 = 0;
            for (int r = 0; r < rounds; r++) {
                if (!sh->ok[r][c]) continue;
                Res* x = &sh->r[r][c][i];
                if (!okr) h0 = x->hash;
                else if (x->hash != h0) bad_rounds[c]++;
                okr++;
                if (!x->same) bad_repeat[c]++;
                if (x->best_s < best) best = x->best_s;
                if (x->max_rel > worst_rel[c]) worst_rel[c] = x->max_rel;
            }
            Res* one = &sh->r[rounds][c][i];
            if (sh->ok[rounds][c]) { best1 = one->best_s; if (okr && one->hash != h0) bad_threads[c]++; }
            if (okr) printf(" %.1f |", fl / best / 1e9);
            else printf(" failed |");
            if (okr) { geo[c] += log(fl / best / 1e9); ngeo[c]++; }
            if (okr && sh->ok[rounds][c]) geo1[c] += log(fl / best1 / 1e9);
            if (jf && okr)
                fprintf(jf, "{\"candidate\": \"%s\", \"model\": \"%s\", \"layer\": \"%s\", \"op\": \"%s\", \"M\": %d, \"N\": %d, "
                            "\"K\": %d, \"gflops\": %.2f, \"gflops_1thread\": %.2f, \"loops_gflops\": %.2f, \"max_rel_err\": %.3e, "
                            "\"bitwise_repeat\": %s, \"bitwise_1_vs_%d_threads\": %s}\n",
                        cands[c].label, s->model, s->layer, OP_NAME[s->op], M, N, K, fl / best / 1e9,
                        sh->ok[rounds][c] ? fl / best1 / 1e9 : 0.0, fl / sh->loops_s[i] / 1e9, sh->r[0][c][i].max_rel,
                        sh->r[0][c][i].same ? "true" : "false", threads,
                        sh->ok[rounds][c] ? (one->hash == h0 ? "true" : "false") : "null");
        }
        printf("\n");
    }
    printf("\nPer candidate: geometric mean GFLOP/s over the %d shapes at %d threads and at 1 thread; agreement; determinism\n\n",
           n_shapes, threads);
    printf("| candidate | geomean GFLOP/s | geomean, 1 thread | max rel. error vs loops | same bits every call | "
           "same bits every round | same bits 1 vs %d threads |\n|---|---|---|---|---|---|---|\n", threads);
    for (int c = 0; c < n_cands; c++) {
        if (!ngeo[c]) { printf("| %s | failed | | | | | |\n", cands[c].label); continue; }
        printf("| %s | %.1f | %s%.1f | %.1e | %s | %s | %s |\n", cands[c].label, exp(geo[c] / ngeo[c]), "",
               sh->ok[rounds][c] ? exp(geo1[c] / ngeo[c]) : 0.0, worst_rel[c],
               bad_repeat[c] ? "NO" : "yes", bad_rounds[c] ? "NO" : "yes",
               !sh->ok[rounds][c] ? "?" : bad_threads[c] ? "no" : "yes");
    }
    printf("\nThe trainers' pattern, %d threads: per iteration one OpenMP parallel-for over 2048x768 floats, then one GEMM; "
           "ms per iteration, best of 3 x the rounds; extra = mixed - (GEMM alone + OpenMP pass alone)\n\n", threads);
    printf("| candidate | GEMM | GEMM alone | OpenMP pass alone | mixed | extra |\n|---|---|---|---|---|---|\n");
    for (int c = 0; c < n_cands; c++)
        for (int m = 0; m < N_MIXED; m++) {
            Mixed b = {1e30, 1e30, 1e30};
            int any = 0;
            for (int r = 0; r < rounds; r++) {
                if (!sh->ok[r][c]) continue;
                Mixed x = sh->mixed[r][c][m];
                any = 1;
                if (x.gemm_s < b.gemm_s) b.gemm_s = x.gemm_s;
                if (x.omp_s < b.omp_s) b.omp_s = x.omp_s;
                if (x.mixed_s < b.mixed_s) b.mixed_s = x.mixed_s;
            }
            if (!any) continue;
            double extra = b.mixed_s - b.gemm_s - b.omp_s;
            printf("| %s | %s | %.3f | %.3f | %.3f | %+.3f (%+.0f%%) |\n", cands[c].label,
                   m == 0 ? "stories15M w1 fwd" : "stories260K w1 fwd", b.gemm_s * 1e3, b.omp_s * 1e3, b.mixed_s * 1e3,
                   extra * 1e3, 100 * extra / (b.gemm_s + b.omp_s));
            if (jf)
                fprintf(jf, "{\"candidate\": \"%s\", \"mixed\": \"%s\", \"gemm_ms\": %.4f, \"omp_ms\": %.4f, \"mixed_ms\": %.4f}\n",
                        cands[c].label, m == 0 ? "stories15M w1 fwd" : "stories260K w1 fwd", b.gemm_s * 1e3, b.omp_s * 1e3,
                        b.mixed_s * 1e3);
        }
    if (jf) fclose(jf);
    return 0;
}
