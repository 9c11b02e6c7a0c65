/*
Checks every llmc CUDA launcher, run in the host emulator (emu.h), against its CPU twin
(llmc/kernels/cpu/*.h) on random data at odd sizes. Built twice by dev/emu/run.sh: with
-DENABLE_FP32 (floatX = float) and without (floatX = bf16, emulated by include/cuda_bf16.h).

Each check runs in a child process (a crash, a FAIL() of a launcher, an emulator error
or a hang is that check's FAIL, never the end of the run) and prints one line:
    PASS <build>.<launcher>[<sizes>]        or      FAIL <build>.<launcher>[<sizes>]: why
Details (errors, tolerances, worst err/tol per output) go to stderr. Every check:
  1. runs the launcher under the "fwd" schedule (threads and blocks in increasing order)
     and under the "rev" schedule (decreasing); the two results must be bitwise equal
     (the kernels are documented as deterministic; a missing barrier or an
     order-dependent reduction shows up here);
  2. compares the fwd result with the CPU twin, element by element, with the
     tolerance below;
  3. checks the 4 KiB guard zones around every device buffer (out-of-bounds writes);
     fresh device buffers and shared memory are 0xFF (NaN), so elements a kernel should
     write but does not, and shared memory read before it is written, show up as NaN.
After all checks, every __global__ kernel of the files kernels.h includes must have been
launched at least once (the table comes from transform.py): a new kernel without a check
is a FAIL.

Tolerances. Inputs are random values already representable in floatX, so the CPU twin
(fp32) and the kernel see the same numbers. For each output element the tolerance is
    tol = R * |ref| + (1 + R) * E
  R: the final rounding of a floatX output: 0 in the fp32 build, 2^-8 in the bf16 build
     (round to nearest even to 8 significant bits is within half an ulp = 2^-8 |x|,
     and every kernel here computes in fp32 and rounds once when it stores);
     R = 0 for fp32 outputs (rstd, lse, losses, AdamW state).
  E: how far two fp32 evaluations that differ only in the order of operations (tree vs
     sequential sums, tiles, online softmax) can be apart: E = 2 * U * B, U = 2^-24 and
     U * B a first-order running-error bound of one evaluation, B computed in double
     from the absolute values of the same terms (for a sum of n terms B = n * sum|t| plus
     the bounds of the terms; for a product |a| B(b) + |b| B(a) + |ab|; exp and the
     libm functions are given 2 ulp, CUDA's documented maximum for expf/logf).
     Worst-case bounds: typical errors are far below them (the log shows err/tol), yet
     a missing term, a wrong index or a wrong rounding is many times above them.
  Where the code promises the same operations in the same order as the CPU twin (the
  encoder), the check is exact: equal in fp32, equal to the twin rounded once in bf16.
*/
#include "kernels.h"  // the transformed llmc/kernels/*.cuh (OUT_DIR/kernels first on the include path)
#include "emu_kernels.inc"
#include "smem_banks.h"  // dev/emu/include: the bank-conflict counts of the tensor-core kernels

#include <sys/wait.h>
#include <signal.h>
#include <array>
#include <functional>
#include <random>
#include <string>
#include <algorithm>
#include <vector>

// The CPU twins, compiled in fp32 in a namespace of their own, next to the CUDA launchers
// of the same names.
namespace cpu {
typedef float floatX;
typedef int stream_t;
#include "cpu/matmul.h"
#include "cpu/encoder.h"
#include "cpu/rmsnorm.h"
#include "cpu/rope.h"
#include "cpu/swiglu.h"
#include "cpu/attention.h"
#include "cpu/crossentropy.h"
#include "cpu/adamw.h"
#include "cpu/adaln.h"
#include "cpu/bias.h"
#include "cpu/activation.h"
#include "cpu/patchify.h"
#include "cpu/timestep.h"
#include "cpu/flow.h"
#include "cpu/grad_accum.h"
#include "cpu/reduce.h"
#include "cpu/attention_merge.h"
#include "cpu/copy2d.h"
}  // namespace cpu

#ifndef EMU_SHIM_CUDA_RUNTIME
#error "the real CUDA headers were picked up: put dev/emu/include first on the include path"
#endif

#ifdef ENABLE_FP32
static const char* BUILD = "fp32";
static const double R = 0.0;
#else
static const char* BUILD = "bf16";
static const double R = 1.0 / 256;
#endif
static const double U = 1.0 / (1 << 24);
static const int CHECK_TIMEOUT_S = 60;

// ---------------------------------------------------------------------------------
// one check = one child process
static std::string g_name;
static std::vector<std::string> g_problems;
static bool g_verbose = false;

static void problem(const char* fmt, ...) {
    char b[1024];
    va_list ap; va_start(ap, fmt); vsnprintf(b, sizeof b, fmt, ap); va_end(ap);
    g_problems.push_back(b);
    fprintf(stderr, "    problem: %s\n", b);
}
static void on_emu_error(const char* msg) {
    fprintf(stderr, "    emulator error: %s\n", msg);
    printf("FAIL %s: emulator: %s\n", g_name.c_str(), msg);
    fflush(stdout); fflush(stderr);
    _exit(10);
}

// Shared-memory bank conflicts of the check's tensor-core kernels (include/smem_banks.h
// counts them per kernel and call site): every count goes to the log; ldmatrix and
// cp.async must be conflict-free, because the design says so (llmc/kernels/attention_tc.cuh:
// "rows are padded to hd + 8 bf16 ... cover all 32 banks once; the same holds for a
// cp.async phase of 8 lanes writing 16 bytes each"; attention_tc_backward.cuh: "no bank
// conflicts, plain or .trans"). The stores and casted loads have no such claim: their
// counts are reported, not judged.
static void smem_bank_verdict() {
    if (emu::banks::table().empty()) return;
    emu::banks::print(stderr);
    std::string v = emu::banks::first_violation(
        [](const emu::banks::Stat& s) { return s.kind == emu::banks::LDMATRIX || s.kind == emu::banks::CP_ASYNC; });
    if (!v.empty()) problem("%s", v.c_str());
}

struct Check { std::string name; std::function<void()> fn; };
static std::vector<Check> g_checks;
static void add(const std::string& name, std::function<void()> fn) { g_checks.push_back({std::string(BUILD) + "." + name, fn}); }

static int run_check(const Check& c) {  // 1 if passed
    fflush(stdout); fflush(stderr);
    int pfd[2];
    if (pipe(pfd) != 0) { perror("pipe"); exit(2); }
    pid_t pid = fork();
    if (pid < 0) { perror("fork"); exit(2); }
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        close(pfd[1]);
        alarm(CHECK_TIMEOUT_S);
        g_name = c.name;
        emu::error_handler = on_emu_error;
        fprintf(stderr, "== %s\n", c.name.c_str());
        c.fn();
        std::string g = emu::check_guards();
        if (!g.empty()) problem("%s", g.c_str());
        smem_bank_verdict();
        if (g_problems.empty()) printf("PASS %s\n", c.name.c_str());
        else printf("FAIL %s: %s%s\n", c.name.c_str(), g_problems[0].c_str(),
                    g_problems.size() > 1 ? (" (+" + std::to_string(g_problems.size() - 1) + " more, see log)").c_str() : "");
        fflush(stdout); fflush(stderr);
        _exit(g_problems.empty() ? 0 : 10);
    }
    close(pfd[1]);
    std::string err;
    char buf[4096];
    ssize_t k;
    while ((k = read(pfd[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)k);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    fputs(err.c_str(), stderr);
    if (g_verbose) fputs(err.c_str(), stdout);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 0) return 1;
    if (WIFEXITED(st) && WEXITSTATUS(st) == 10) return 0;  // the child printed its FAIL line
    // the child died without a verdict: say why, with the last error message it printed
    std::string why;
    if (WIFSIGNALED(st)) {
        int sg = WTERMSIG(st);
        why = sg == SIGALRM ? "timed out after " + std::to_string(CHECK_TIMEOUT_S) + " s (hang or deadlock)"
                            : std::string("crashed with signal ") + std::to_string(sg) + " (" + strsignal(sg) + ")";
    } else {
        why = "exited with status " + std::to_string(WEXITSTATUS(st));
    }
    size_t p = err.rfind("error:");
    if (p != std::string::npos) {
        size_t e = err.find('\n', p);
        why += ": " + err.substr(p, e == std::string::npos ? std::string::npos : e - p);
    }
    printf("FAIL %s: %s\n", c.name.c_str(), why.c_str());
    fflush(stdout);
    return 0;
}

// ---------------------------------------------------------------------------------
// data
struct Rng {
    std::mt19937_64 g;
    explicit Rng(const std::string& name) {
        uint64_t h = 1469598103934665603ull;  // FNV-1a: the same seed on every platform
        for (char ch : name) h = (h ^ (unsigned char)ch) * 1099511628211ull;
        g.seed(h);
    }
    float uni(float lo, float hi) { return lo + (hi - lo) * (float)((g() >> 11) * (1.0 / 9007199254740992.0)); }
    int below(int n) { return (int)(g() % (uint64_t)n); }
    // n values in [lo, hi), each representable in floatX
    std::vector<float> vec(size_t n, float lo, float hi) {
        std::vector<float> v(n);
        for (auto& x : v) x = (float)(floatX)uni(lo, hi);
        return v;
    }
};
static float rx(float x) { return (float)(floatX)x; }  // round to floatX (RNE in bf16)
static std::vector<float> absv(std::vector<float> v) { for (auto& x : v) x = fabsf(x); return v; }

// device buffers through the real device.cuh helpers (dev_malloc, dev_upload_floats, ...)
struct DX {  // floatX
    floatX* p; size_t n;
    explicit DX(size_t n_) : n(n_) { p = (floatX*)dev_malloc(n * sizeof(floatX)); }  // left 0xFF: NaN
    explicit DX(const std::vector<float>& h) : DX(h.size()) { dev_upload_floats(p, h.data(), n); }
    std::vector<float> get() const { std::vector<float> h(n); dev_download_floats(h.data(), p, n); return h; }
    ~DX() { dev_free(p); }
    DX(const DX&) = delete;
};
struct DF {  // float
    float* p; size_t n;
    explicit DF(size_t n_) : n(n_) { p = (float*)dev_malloc(n * sizeof(float)); }
    explicit DF(const std::vector<float>& h) : DF(h.size()) { dev_memcpy_h2d(p, h.data(), n * sizeof(float), 0); }
    std::vector<float> get() const { std::vector<float> h(n); dev_memcpy_d2h(h.data(), p, n * sizeof(float), 0); return h; }
    ~DF() { dev_free(p); }
    DF(const DF&) = delete;
};
struct DI {  // int
    int* p; size_t n;
    explicit DI(const std::vector<int>& h) : n(h.size()) { p = (int*)dev_malloc(n * sizeof(int)); dev_memcpy_h2d(p, h.data(), n * sizeof(int), 0); }
    ~DI() { dev_free(p); }
    DI(const DI&) = delete;
};

// ---------------------------------------------------------------------------------
// comparisons
typedef std::vector<std::pair<std::string, std::vector<float>>> Outs;

// run f (which uploads, launches and downloads) under the fwd and the rev schedule;
// the results must be bitwise equal; returns the fwd result
static Outs both_schedules(const std::function<Outs()>& f) {
    emu::sched_reverse = false;
    Outs a = f();
    std::string g = emu::check_guards();
    if (!g.empty()) problem("fwd schedule: %s", g.c_str());
    emu::sched_reverse = true;
    Outs b = f();
    g = emu::check_guards();
    if (!g.empty()) problem("rev schedule: %s", g.c_str());
    emu::sched_reverse = false;
    for (size_t i = 0; i < a.size(); i++) {
        const auto& x = a[i].second; const auto& y = b[i].second;
        for (size_t j = 0; j < x.size(); j++)
            if (memcmp(&x[j], &y[j], sizeof(float)) != 0) {
                problem("%s depends on the thread/block schedule: element %zu is %.9g in fwd order, %.9g in rev order",
                        a[i].first.c_str(), j, x[j], y[j]);
                break;
            }
    }
    return a;
}

// got vs ref with a per-element tolerance
static void expect(const char* what, const std::vector<float>& got, const std::vector<float>& ref, const std::vector<double>& tol) {
    if (got.size() != ref.size() || tol.size() != ref.size()) { problem("%s: internal size mismatch", what); return; }
    size_t bad = 0, first = 0, worst_i = 0;
    double worst = 0.0, max_err = 0.0;
    for (size_t i = 0; i < got.size(); i++) {
        double e = fabs((double)got[i] - (double)ref[i]);
        bool ok = e <= tol[i];  // false for NaN
        double ratio = e != e ? INFINITY : tol[i] > 0 ? e / tol[i] : (e == 0 ? 0.0 : INFINITY);
        if (!ok) { if (!bad) first = i; bad++; }
        if (ratio > worst) { worst = ratio; worst_i = i; }
        if (e > max_err || e != e) max_err = e;
    }
    fprintf(stderr, "    %-12s n=%-7zu max|err| %.3e  worst err/tol %.3g (at %zu)%s\n", what, got.size(), max_err, worst, worst_i,
            bad ? "  <-- FAIL" : "");
    if (bad)
        problem("%s: %zu of %zu elements off; first at %zu: got %.9g, expected %.9g (tol %.3g)", what, bad, got.size(), first,
                got[first], ref[first], tol[first]);
}
static void expect_exact(const char* what, const std::vector<float>& got, const std::vector<float>& ref) {
    expect(what, got, ref, std::vector<double>(ref.size(), 0.0));
}
// tolerance of a floatX output from the fp32 bound E of each element (see the header)
static std::vector<double> tol_x(const std::vector<float>& ref, const std::vector<double>& E) {
    std::vector<double> t(ref.size());
    for (size_t i = 0; i < t.size(); i++) t[i] = R * fabs((double)ref[i]) + (1 + R) * E[i];
    return t;
}
static std::vector<double> tol_f(const std::vector<double>& E) { return E; }
static std::vector<float> round_x(std::vector<float> v) { for (auto& x : v) x = rx(x); return v; }
static std::string sz(const char* fmt, ...) {
    char b[256];
    va_list ap; va_start(ap, fmt); vsnprintf(b, sizeof b, fmt, ap); va_end(ap);
    return b;
}

// ---------------------------------------------------------------------------------
// matmul: the three launchers, via the fallback kernel (cuBLASLt finds no algorithm)
// and via the cuBLASLt model (include/cublasLt.h), which checks the launchers' mapping
// onto column-major cuBLASLt calls. E = 2 U B, B = (K + 2) sum_k |a b| + |d0| (accumulate).
struct MM { int N, C, OC, ldw, c0; };
static void check_matmul(const MM& s, int path, int which) {
    static const char* names[3] = {"matmul_forward", "matmul_backward_input", "matmul_backward_weight"};
    const int N = s.N, C = s.C, OC = s.OC, ldw = s.ldw, c0 = s.c0;
    std::string name = sz("%s[%s,N=%d,C=%d,OC=%d,ldw=%d,c0=%d]", names[which], path ? "cublaslt-model" : "fallback", N, C, OC, ldw, c0);
    add(name, [=] {
        Rng r(name);
        emu::lt_mode = path;
        matmul_setup();
        size_t nw = (size_t)OC * ldw;
        auto w = r.vec(nw, -1, 1), inp = r.vec((size_t)N * C, -1, 1), dout = r.vec((size_t)N * OC, -1, 1);
        for (int acc = 0; acc <= (which == 2 ? 0 : 1); acc++) {
            std::vector<float> d0, ref, S;
            size_t K;
            if (which == 0) {
                d0 = r.vec((size_t)N * OC, -1, 1);
                ref = d0; S = absv(d0);
                cpu::matmul_forward(ref.data(), inp.data(), w.data() + c0, N, C, OC, ldw, acc, 0);
                cpu::matmul_forward(S.data(), absv(inp).data(), absv(w).data() + c0, N, C, OC, ldw, acc, 0);
                K = C;
            } else if (which == 1) {
                d0 = r.vec((size_t)N * C, -1, 1);
                ref = d0; S = absv(d0);
                cpu::matmul_backward_input(ref.data(), dout.data(), w.data() + c0, N, C, OC, ldw, acc, 0);
                cpu::matmul_backward_input(S.data(), absv(dout).data(), absv(w).data() + c0, N, C, OC, ldw, acc, 0);
                K = OC;
            } else {
                d0 = r.vec(nw, -1, 1);
                ref = d0; S = absv(d0);
                cpu::matmul_backward_weight(ref.data() + c0, dout.data(), inp.data(), N, C, OC, ldw, 0);
                cpu::matmul_backward_weight(S.data() + c0, absv(dout).data(), absv(inp).data(), N, C, OC, ldw, 0);
                K = N;
            }
            unsigned long long lt0 = emu::lt_matmul_calls, l0 = emu::n_launches;
            Outs o = both_schedules([&] {
                DX W(w), I(inp), DO(dout), D(d0);
                if (which == 0) matmul_forward(D.p, I.p, W.p + c0, N, C, OC, ldw, acc, 0);
                else if (which == 1) matmul_backward_input(D.p, DO.p, W.p + c0, N, C, OC, ldw, acc, 0);
                else matmul_backward_weight(D.p + c0, DO.p, I.p, N, C, OC, ldw, 0);
                return Outs{{"out", D.get()}};
            });
            bool work = N > 0 && C > 0 && OC > 0;
            if (work && path == 0 && (emu::n_launches == l0 || emu::lt_matmul_calls != lt0))
                problem("acc=%d: the fallback kernel was not the path taken", acc);
            if (work && path == 1 && (emu::lt_matmul_calls == lt0 || emu::n_launches != l0))
                problem("acc=%d: cublasLtMatmul (model) was not the path taken", acc);
            std::vector<double> E(ref.size());
            for (size_t i = 0; i < E.size(); i++) E[i] = 2 * U * ((K + 2) * (double)S[i]);
            std::vector<double> tol = tol_x(ref, E);
            if (which == 2)  // elements of dW outside the column slice [c0, c0 + C) must not change
                for (int o2 = 0; o2 < OC; o2++)
                    for (int c = 0; c < ldw; c++)
                        if (c < c0 || c >= c0 + C) tol[(size_t)o2 * ldw + c] = 0;
            expect(sz("acc=%d", acc).c_str(), o[0].second, ref, tol);
        }
        matmul_teardown();
    });
}

// matmul_forward_residual: out = res + inp . W^T, one product with C = res and D = out
// (cuBLASLt model: beta = 1 with separate C and D pointers; fallback: the kernel's C
// input). variant 0: out and res separate; 1: out == res (in place); 2: res starts one
// element into its allocation (2- or 4-byte alignment, D 256-byte aligned), so the C
// alignment that the launcher declares is checked on its own. E as check_matmul with
// d0 = res; res must come back unchanged when it is not out.
static void check_matmul_residual(const MM& s, int path, int variant) {
    const int N = s.N, C = s.C, OC = s.OC, ldw = s.ldw, c0 = s.c0;
    static const char* vn[3] = {"separate", "in-place", "res+1"};
    std::string name = sz("matmul_forward_residual[%s,%s,N=%d,C=%d,OC=%d,ldw=%d,c0=%d]", path ? "cublaslt-model" : "fallback",
                          vn[variant], N, C, OC, ldw, c0);
    add(name, [=] {
        Rng r(name);
        emu::lt_mode = path;
        matmul_setup();
        size_t nw = (size_t)OC * ldw, no = (size_t)N * OC;
        auto w = r.vec(nw, -1, 1), inp = r.vec((size_t)N * C, -1, 1), res = r.vec(no, -1, 1);
        std::vector<float> ref(no), S(no);
        cpu::matmul_forward_residual(ref.data(), res.data(), inp.data(), w.data() + c0, N, C, OC, ldw, 0);
        auto ares = absv(res);
        cpu::matmul_forward_residual(S.data(), ares.data(), absv(inp).data(), absv(w).data() + c0, N, C, OC, ldw, 0);
        unsigned long long lt0 = emu::lt_matmul_calls, l0 = emu::n_launches;
        int roff = variant == 2 ? 1 : 0;
        Outs o = both_schedules([&] {
            std::vector<float> rp(roff, 7.0f);
            rp.insert(rp.end(), res.begin(), res.end());
            DX W(w), I(inp), R(rp), D(no);
            floatX* out = variant == 1 ? R.p : D.p;
            matmul_forward_residual(out, R.p + roff, I.p, W.p + c0, N, C, OC, ldw, 0);
            std::vector<float> rr = R.get();
            rr.erase(rr.begin(), rr.begin() + roff);
            return Outs{{"out", variant == 1 ? rr : D.get()}, {"res", rr}};
        });
        bool work = N > 0 && C > 0 && OC > 0;
        if (work && path == 0 && (emu::n_launches == l0 || emu::lt_matmul_calls != lt0))
            problem("the fallback kernel was not the path taken");
        if (work && path == 1 && (emu::lt_matmul_calls == lt0 || emu::n_launches != l0))
            problem("cublasLtMatmul (model) was not the path taken");
        std::vector<double> E(no);
        for (size_t i = 0; i < no; i++) E[i] = 2 * U * ((C + 2) * (double)S[i]);
        expect("out", o[0].second, ref, tol_x(ref, E));
        if (variant != 1) expect_exact("res kept", o[1].second, res);
        matmul_teardown();
    });
}

// The cuBLASLt algorithm cache of llmc/kernels/matmul.cuh: a problem is queried once
// (cublasLtMatmulAlgoGetHeuristic, counted by the shim), its repeats are not; C = D and a
// separate C are different keys; a full table (matmul_algo_cache_cap lowered) queries on
// every call and still computes the right product; matmul_teardown empties the table.
// In the fallback mode the cached answer is "no algorithm": the repeats go straight to
// the fallback kernel, still without a query. Every result against the twin (E as
// check_matmul); the cached repeat must equal the first call bit for bit.
static void check_matmul_cache(int path) {
    std::string name = sz("matmul_algo_cache[%s]", path ? "cublaslt-model" : "fallback");
    add(name, [=] {
        Rng r(name);
        emu::lt_mode = path;
        const int N = 9, C = 20, OC = 12;
        auto w = r.vec((size_t)OC * C, -1, 1), inp = r.vec((size_t)N * C, -1, 1), res = r.vec((size_t)N * OC, -1, 1);
        auto w2 = r.vec((size_t)C * C, -1, 1);
        std::vector<float> ref((size_t)N * OC), S((size_t)N * OC), ref2((size_t)N * C), S2((size_t)N * C);
        cpu::matmul_forward(ref.data(), inp.data(), w.data(), N, C, OC, C, 0, 0);
        cpu::matmul_forward(S.data(), absv(inp).data(), absv(w).data(), N, C, OC, C, 0, 0);
        cpu::matmul_forward(ref2.data(), inp.data(), w2.data(), N, C, C, C, 0, 0);
        cpu::matmul_forward(S2.data(), absv(inp).data(), absv(w2).data(), N, C, C, C, 0, 0);
        std::vector<float> refr((size_t)N * OC), Sr((size_t)N * OC);
        cpu::matmul_forward_residual(refr.data(), res.data(), inp.data(), w.data(), N, C, OC, C, 0);
        cpu::matmul_forward_residual(Sr.data(), absv(res).data(), absv(inp).data(), absv(w).data(), N, C, OC, C, 0);
        auto E = [](const std::vector<float>& Sv, int K) {
            std::vector<double> e(Sv.size());
            for (size_t i = 0; i < e.size(); i++) e[i] = 2 * U * ((K + 2) * (double)Sv[i]);
            return e;
        };
        matmul_setup();
        DX W(w), W2(w2), I(inp), R(res), O1((size_t)N * OC), O2((size_t)N * OC), O3((size_t)N * OC), O4((size_t)N * C);
        unsigned long long h0 = emu::lt_heuristic_calls;
        matmul_forward(O1.p, I.p, W.p, N, C, OC, C, 0, 0);
        matmul_forward(O2.p, I.p, W.p, N, C, OC, C, 0, 0);           // repeat: cached
        if (emu::lt_heuristic_calls - h0 != 1) problem("a repeated product queried the heuristic again (%llu queries)", emu::lt_heuristic_calls - h0);
        matmul_forward_residual(O3.p, R.p, I.p, W.p, N, C, OC, C, 0);  // beta = 1, separate C: a new key
        if (emu::lt_heuristic_calls - h0 != 2) problem("the residual product shared the beta = 0 entry (%llu queries)", emu::lt_heuristic_calls - h0);
        if (matmul_algo_cache_n != 2 || matmul_algo_cache_hits != 1 || matmul_algo_cache_misses != 2)
            problem("cache: %d entries, %llu hits, %llu misses (expected 2, 1, 2)", matmul_algo_cache_n, matmul_algo_cache_hits, matmul_algo_cache_misses);
        expect_exact("repeat = first", O2.get(), O1.get());
        expect("forward", O1.get(), ref, tol_x(ref, E(S, C)));
        expect("residual", O3.get(), refr, tol_x(refr, E(Sr, C)));
        // the table full: a new shape is queried on every call, and still right
        matmul_algo_cache_cap = matmul_algo_cache_n;
        unsigned long long h1 = emu::lt_heuristic_calls;
        matmul_forward(O4.p, I.p, W2.p, N, C, C, C, 0, 0);
        matmul_forward(O4.p, I.p, W2.p, N, C, C, C, 0, 0);
        if (emu::lt_heuristic_calls - h1 != 2 || matmul_algo_uncached != 2 || matmul_algo_cache_n != 2)
            problem("full table: %llu queries, %llu uncached calls, %d entries (expected 2, 2, 2)", emu::lt_heuristic_calls - h1,
                    matmul_algo_uncached, matmul_algo_cache_n);
        expect("uncached", O4.get(), ref2, tol_x(ref2, E(S2, C)));
        matmul_forward(O1.p, I.p, W.p, N, C, OC, C, 0, 0);  // a cached shape still hits
        if (emu::lt_heuristic_calls - h1 != 2) problem("a cached shape was queried again once the table was full");
        matmul_algo_cache_cap = MATMUL_ALGO_CACHE_SIZE;
        matmul_teardown();
        if (matmul_algo_cache_n != 0) problem("matmul_teardown left %d cache entries", matmul_algo_cache_n);
        matmul_setup();
        unsigned long long h2 = emu::lt_heuristic_calls;
        matmul_forward(O2.p, I.p, W.p, N, C, OC, C, 0, 0);
        if (emu::lt_heuristic_calls - h2 != 1) problem("after teardown and setup, the first product was not queried");
        expect_exact("after setup again", O2.get(), O1.get());
        matmul_teardown();
    });
}

// ---------------------------------------------------------------------------------
// encoder: forward is a copy (exact); backward adds the rows of dout of each token in
// token order in fp32 starting from dwte and rounds once, the same additions in the same
// order as the CPU twin: exact in fp32, equal to the twin's result rounded once in bf16.
static void check_encoder(int N, int D, int V, int pattern) {
    std::string base = sz("N=%d,D=%d,V=%d%s", N, D, V, pattern == 1 ? ",one-token" : pattern == 2 ? ",repeats" : "");
    auto tokens_for = [=](Rng& r) {
        std::vector<int> tok(N);
        for (int i = 0; i < N; i++) tok[i] = r.below(V);
        if (pattern == 1) for (auto& t : tok) t = V / 2;
        if (pattern == 2) for (int i = 0; i < N; i += 2) tok[i] = tok[0];
        tok[N - 1] = V - 1;
        if (N > 1) tok[0] = 0;
        return tok;
    };
    std::string n1 = "encoder_forward[" + base + "]";
    add(n1, [=] {
        Rng r(n1);
        auto tok = tokens_for(r);
        auto wte = r.vec((size_t)V * D, -1, 1);
        std::vector<float> ref((size_t)N * D);
        cpu::encoder_forward(ref.data(), tok.data(), wte.data(), N, D, 0);
        Outs o = both_schedules([&] {
            DI T(tok); DX W(wte), O((size_t)N * D);
            encoder_forward(O.p, T.p, W.p, N, D, 0);
            return Outs{{"out", O.get()}};
        });
        expect_exact("out", o[0].second, ref);
    });
    std::string n2 = "encoder_backward[" + base + "]";
    add(n2, [=] {
        Rng r(n2);
        auto tok = tokens_for(r);
        auto dout = r.vec((size_t)N * D, -1, 1), dwte0 = r.vec((size_t)V * D, -1, 1);
        auto ref = dwte0;
        cpu::encoder_backward(ref.data(), dout.data(), tok.data(), N, D, 0);
        Outs o = both_schedules([&] {
            DI T(tok); DX DO(dout), G(dwte0);
            encoder_backward(G.p, DO.p, T.p, N, D, 0);
            return Outs{{"dwte", G.get()}};
        });
        expect_exact("dwte", o[0].second, round_x(ref));
    });
}

// encoder_forward_range / encoder_backward_range (the vocab-parallel embedding): wte and
// dwte hold rows v0 ... v0 + n - 1 only (a token t reads/updates row t - v0), tokens
// outside the window give a zero row and no update. Exact as check_encoder. The tokens
// span [0, V) and the window cuts through them; the guard zones around the n-row buffers
// catch a write to a row outside the window.
static void check_encoder_range(int N, int D, int V, int v0, int n) {
    std::string base = sz("N=%d,D=%d,V=%d,v0=%d,n=%d", N, D, V, v0, n);
    auto tokens_for = [=](Rng& r) {
        std::vector<int> tok(N);
        for (int i = 0; i < N; i++) tok[i] = r.below(V);
        for (int i = 0; i < N; i += 3) tok[i] = tok[0];  // repeats
        if (n > 0 && N > 2 && v0 < V) { tok[1] = v0; tok[2] = v0 + n - 1 < V ? v0 + n - 1 : V - 1; }  // the window's edges
        if (N > 3) tok[3] = v0 > 0 ? v0 - 1 : V - 1;  // just below the window (or above it)
        return tok;
    };
    std::string n1 = "encoder_forward_range[" + base + "]";
    add(n1, [=] {
        Rng r(n1);
        auto tok = tokens_for(r);
        auto wte = r.vec((size_t)n * D, -1, 1);
        std::vector<float> ref((size_t)N * D, 7.0f);
        cpu::encoder_forward_range(ref.data(), tok.data(), wte.data(), N, D, v0, n, 0);
        for (int i = 0; i < N; i++)  // the twin against the definition
            for (int c = 0; c < D; c++) {
                int rr = tok[i] - v0;
                float want = rr >= 0 && rr < n ? wte[(size_t)rr * D + c] : 0.0f;
                if (memcmp(&want, &ref[(size_t)i * D + c], sizeof(float)) != 0) { problem("twin: row %d col %d", i, c); return; }
            }
        Outs o = both_schedules([&] {
            DI T(tok); DX W(std::max<size_t>((size_t)n * D, 1)), O((size_t)N * D);
            if (n) dev_upload_floats(W.p, wte.data(), (size_t)n * D);
            encoder_forward_range(O.p, T.p, W.p, N, D, v0, n, 0);
            return Outs{{"out", O.get()}};
        });
        expect_exact("out", o[0].second, ref);
    });
    std::string n2 = "encoder_backward_range[" + base + "]";
    add(n2, [=] {
        Rng r(n2);
        auto tok = tokens_for(r);
        auto dout = r.vec((size_t)N * D, -1, 1), dwte0 = r.vec(std::max<size_t>((size_t)n * D, 1), -1, 1);
        auto ref = dwte0;
        cpu::encoder_backward_range(ref.data(), dout.data(), tok.data(), N, D, v0, n, 0);
        Outs o = both_schedules([&] {
            DI T(tok); DX DO(dout), G(dwte0);
            encoder_backward_range(G.p, DO.p, T.p, N, D, v0, n, 0);
            return Outs{{"dwte", G.get()}};
        });
        expect_exact("dwte", o[0].second, round_x(ref));
    });
}

// The vocabulary split over tp ranks as the trainer splits it: Vs = ceil(V / tp), shard r
// holds rows r*Vs ... (the last one fewer, possibly none). Forward: the shards' outputs
// summed (one row, zeros elsewhere: exact) equal encoder_forward on the whole table.
// Backward: each shard's encoder_backward_range equals its rows of encoder_backward on the
// whole table, bit for bit (the same fp32 additions in the same order, one rounding).
static void check_encoder_shards(int N, int D, int V, int tp) {
    std::string name = sz("encoder_range_shards[N=%d,D=%d,V=%d,tp=%d]", N, D, V, tp);
    add(name, [=] {
        Rng r(name);
        std::vector<int> tok(N);
        for (int i = 0; i < N; i++) tok[i] = r.below(V);
        for (int i = 0; i < N; i += 4) tok[i] = tok[1];
        tok[0] = V - 1;
        auto wte = r.vec((size_t)V * D, -1, 1), dout = r.vec((size_t)N * D, -1, 1), dwte0 = r.vec((size_t)V * D, -1, 1);
        const int Vs = (V + tp - 1) / tp;
        Outs o = both_schedules([&] {
            DI T(tok);
            DX W(wte), O((size_t)N * D), DO(dout), G(dwte0);
            encoder_forward(O.p, T.p, W.p, N, D, 0);
            encoder_backward(G.p, DO.p, T.p, N, D, 0);
            std::vector<float> sum((size_t)N * D, 0.0f), gcat;
            for (int k = 0; k < tp; k++) {
                int v0 = k * Vs, nv = std::max(0, std::min(Vs, V - v0));
                size_t rows = std::max(nv, 1);
                DX Ws(rows * D), Os((size_t)N * D), Gs(rows * D);
                if (nv) {
                    dev_upload_floats(Ws.p, wte.data() + (size_t)v0 * D, (size_t)nv * D);
                    dev_upload_floats(Gs.p, dwte0.data() + (size_t)v0 * D, (size_t)nv * D);
                }
                encoder_forward_range(Os.p, T.p, Ws.p, N, D, v0, nv, 0);
                encoder_backward_range(Gs.p, DO.p, T.p, N, D, v0, nv, 0);
                std::vector<float> os = Os.get(), gs = Gs.get();
                for (size_t j = 0; j < sum.size(); j++) sum[j] += os[j];
                gcat.insert(gcat.end(), gs.begin(), gs.begin() + (size_t)nv * D);
            }
            return Outs{{"forward", O.get()}, {"sum over shards", sum}, {"backward", G.get()}, {"shards", gcat}};
        });
        expect_exact("fwd shards", o[1].second, o[0].second);
        expect_exact("bwd shards", o[3].second, o[2].second);
        std::vector<float> ref((size_t)N * D), gref = dwte0;
        cpu::encoder_forward(ref.data(), tok.data(), wte.data(), N, D, 0);
        cpu::encoder_backward(gref.data(), dout.data(), tok.data(), N, D, 0);
        expect_exact("forward", o[0].second, ref);
        expect_exact("backward", o[2].second, round_x(gref));
    });
}

// ---------------------------------------------------------------------------------
// rmsnorm. forward: ss = sum x^2 (C positive terms), r = 1/sqrt(ss/C + eps), y = x r w:
// B(r) = (C + 8) r, B(y) = (C + 8) |y|. backward: dinp = dinp0 + r w dy - k x with
// k = r^3/C sum dy w x: B = (C + 8) (|dinp0| + r |w dy| + r^3/C sum|dy w x| |x|);
// dw = dw0 + sum_i dy x r over N rows: B = (N + 8) (|dw0| + sum_i |dy x| r) (any order
// of the N + 1 terms, the fused kernel's tree of row slots, blocks and groups included:
// empty slots add exact zeros).
// off > 0: every floatX buffer starts `off` elements into its allocation, so no row is
// 16-byte aligned and the kernels take their element-by-element path; they promise the
// same arithmetic as the 16-byte path, so the result must equal, bit for bit, the same
// launch on aligned buffers (also run). Sizes are picked in main() to reach every
// variant: chunks per lane kept in registers 1, 2, 4, 8 and none; 1 to 32 rows per warp;
// more than 16 blocks (two groups in the backward's reduction tree); C > 24576 (the
// backward's two-kernel path).
static void check_rmsnorm(int N, int C, int off = 0) {
    const float eps = 1e-5f;
    std::string tag = off ? sz(",off=%d", off) : std::string();
    auto pad = [off](const std::vector<float>& v) {  // off leading elements that no kernel may use
        std::vector<float> p(off, 7.0f);
        p.insert(p.end(), v.begin(), v.end());
        return p;
    };
    auto unpad = [off](std::vector<float> v) { v.erase(v.begin(), v.begin() + off); return v; };
    std::string n1 = sz("rmsnorm_forward[N=%d,C=%d%s]", N, C, tag.c_str());
    add(n1, [=] {
        Rng r(n1);
        auto x = r.vec((size_t)N * C, -2, 2), w = r.vec(C, 0.5, 1.5);
        std::vector<float> ref((size_t)N * C), rstd(N);
        cpu::rmsnorm_forward(ref.data(), rstd.data(), x.data(), w.data(), N, C, eps, 0);
        Outs o = both_schedules([&] {
            DX X(pad(x)), W(pad(w)), O((size_t)N * C + off); DF RS(N);
            rmsnorm_forward(O.p + off, RS.p, X.p + off, W.p + off, N, C, eps, 0);
            Outs out{{"out", unpad(O.get())}, {"rstd", RS.get()}};
            if (off) {
                DX X0(x), W0(w), O0((size_t)N * C); DF RS0(N);
                rmsnorm_forward(O0.p, RS0.p, X0.p, W0.p, N, C, eps, 0);
                out.push_back({"out (aligned)", O0.get()});
                out.push_back({"rstd (aligned)", RS0.get()});
            }
            return out;
        });
        std::vector<double> Eo(ref.size()), Er(N);
        for (size_t i = 0; i < ref.size(); i++) Eo[i] = 2 * U * (C + 8) * fabs((double)ref[i]);
        for (int i = 0; i < N; i++) Er[i] = 2 * U * (C + 8) * fabs((double)rstd[i]);
        expect("out", o[0].second, ref, tol_x(ref, Eo));
        expect("rstd", o[1].second, rstd, tol_f(Er));
        if (off) {
            expect_exact("out = aligned", o[0].second, o[2].second);
            expect_exact("rstd = aligned", o[1].second, o[3].second);
        }
    });
    std::string n2 = sz("rmsnorm_backward[N=%d,C=%d%s]", N, C, tag.c_str());
    add(n2, [=] {
        Rng r(n2);
        auto x = r.vec((size_t)N * C, -2, 2), w = r.vec(C, 0.5, 1.5), dout = r.vec((size_t)N * C, -1, 1);
        auto dinp0 = r.vec((size_t)N * C, -1, 1), dw0 = r.vec(C, -1, 1);
        std::vector<float> y((size_t)N * C), rstd(N);
        cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, eps, 0);
        auto rdinp = dinp0, rdw = dw0;
        cpu::rmsnorm_backward(rdinp.data(), rdw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C, 0);
        Outs o = both_schedules([&] {
            DX X(pad(x)), W(pad(w)), DO(pad(dout)), DI_(pad(dinp0)), DW(pad(dw0)); DF RS(rstd);
            rmsnorm_backward(DI_.p + off, DW.p + off, DO.p + off, X.p + off, W.p + off, RS.p, N, C, 0);
            Outs out{{"dinp", unpad(DI_.get())}, {"dw", unpad(DW.get())}};
            if (off) {
                DX X0(x), W0(w), DO0(dout), DI0(dinp0), DW0(dw0);
                rmsnorm_backward(DI0.p, DW0.p, DO0.p, X0.p, W0.p, RS.p, N, C, 0);
                out.push_back({"dinp (aligned)", DI0.get()});
                out.push_back({"dw (aligned)", DW0.get()});
            }
            return out;
        });
        std::vector<double> Ei((size_t)N * C), Ew(C);
        for (int i = 0; i < N; i++) {
            double rr = rstd[i], sabs = 0;
            for (int c = 0; c < C; c++) sabs += fabs((double)dout[(size_t)i * C + c] * w[c] * x[(size_t)i * C + c]);
            for (int c = 0; c < C; c++) {
                size_t j = (size_t)i * C + c;
                Ei[j] = 2 * U * (C + 8) * (fabs(dinp0[j]) + rr * fabs((double)w[c] * dout[j]) + rr * rr * rr / C * sabs * fabs(x[j]));
            }
        }
        for (int c = 0; c < C; c++) {
            double s = fabs(dw0[c]);
            for (int i = 0; i < N; i++) s += fabs((double)dout[(size_t)i * C + c] * x[(size_t)i * C + c]) * rstd[i];
            Ew[c] = 2 * U * (N + 8) * s;
        }
        expect("dinp", o[0].second, rdinp, tol_x(rdinp, Ei));
        expect("dw", o[1].second, rdw, tol_x(rdw, Ew));
        if (off) {
            expect_exact("dinp = aligned", o[0].second, o[2].second);
            expect_exact("dw = aligned", o[1].second, o[3].second);
        }
    });
}

// ---------------------------------------------------------------------------------
// RoPE tables [T + 5, hd/2] (theta 10000): longer than T, as in the trainer
static void rope_tables(int T, int hd, std::vector<float>& ct, std::vector<float>& st) {
    const int half = hd / 2, S = T + 5;
    ct.assign((size_t)S * half, 0.0f);
    st.assign((size_t)S * half, 0.0f);
    for (int t = 0; t < S; t++)
        for (int i = 0; i < half; i++) {
            double a = t * pow(10000.0, -2.0 * i / hd);
            ct[(size_t)t * half + i] = (float)cos(a);
            st[(size_t)t * half + i] = (float)sin(a);
        }
}
// rope: a rotation of each pair. B = 8 (|x0 c| + |x1 s| + |x0 s| + |x1 c|).
// mode 0: out of place, 1: in place (rope_forward / _backward on q), 2: q and k in place in
// one launch (rope_qk_*). off > 0: q and k start off elements into their allocations (not
// 16-byte aligned: the pair path), the results equal to the aligned launch's bit for bit.
// pos0 > 0: the tables from that position on, as context parallelism hands a chunk's.
static void check_rope(int B, int T, int H, int KV, int hd, int backward, int mode, int off = 0, int pos0 = 0) {
    if (mode != 2) KV = 0;
    std::string name = sz("%s[B=%d,T=%d,H=%d,KV=%d,hd=%d,%s%s%s]", backward ? "rope_backward" : "rope_forward", B, T, H,
                          KV, hd, mode == 2 ? "qk" : mode == 1 ? "in-place" : "out-of-place",
                          off ? sz(",off=%d", off).c_str() : "", pos0 ? sz(",pos0=%d", pos0).c_str() : "");
    add(name, [=] {
        Rng r(name);
        const int half = hd / 2;
        std::vector<float> ct, st;
        rope_tables(T + pos0, hd, ct, st);
        const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, toff = (size_t)pos0 * half;
        auto x = r.vec(nq + off, -2, 2), y = r.vec(nk + off, -2, 2);
        auto tail = [off](std::vector<float> v) { v.erase(v.begin(), v.begin() + off); return v; };
        auto x0 = tail(x), y0 = tail(y);
        auto twin = [&](const std::vector<float>& in, int nh) {
            std::vector<float> out(in.size());
            if (backward) cpu::rope_backward(out.data(), in.data(), ct.data() + toff, st.data() + toff, B, T, nh, hd, 0);
            else cpu::rope_forward(out.data(), in.data(), ct.data() + toff, st.data() + toff, B, T, nh, hd, 0);
            return out;
        };
        auto bound = [&](const std::vector<float>& in, int nh) {
            std::vector<double> E(in.size());
            for (size_t p = 0; p < in.size() / 2; p++) {
                int i = (int)(p % half), t = (int)((p / ((size_t)half * nh)) % T);
                double c = ct[toff + (size_t)t * half + i], sn = st[toff + (size_t)t * half + i];
                double m = fabs(in[2 * p] * c) + fabs(in[2 * p + 1] * sn) + fabs(in[2 * p] * sn) + fabs(in[2 * p + 1] * c);
                E[2 * p] = E[2 * p + 1] = 2 * U * 8 * m;
            }
            return E;
        };
        auto launch = [&](floatX* q, floatX* k, floatX* out) {
            DF CT(ct), ST(st);
            const float *c = CT.p + toff, *sn = ST.p + toff;
            if (mode == 2 && backward) rope_qk_backward(q, k, c, sn, B, T, H, KV, hd, 0);
            else if (mode == 2) rope_qk_forward(q, k, c, sn, B, T, H, KV, hd, 0);
            else if (backward) rope_backward(out, q, c, sn, B, T, H, hd, 0);
            else rope_forward(out, q, c, sn, B, T, H, hd, 0);
        };
        Outs o = both_schedules([&] {
            Outs out;
            for (int aligned = 0; aligned <= (off ? 1 : 0); aligned++) {
                const int o1 = aligned ? 0 : off;
                DX X(aligned ? x0 : x), Y(nq + o1);
                if (mode == 2) {
                    DX K(aligned ? y0 : y);
                    launch(X.p + o1, K.p + o1, nullptr);
                    auto kg = K.get();
                    kg.erase(kg.begin(), kg.begin() + o1);
                    out.push_back({"k", kg});
                } else {
                    launch(X.p + o1, nullptr, mode == 1 ? X.p + o1 : Y.p + o1);
                }
                auto qg = (mode == 0 ? Y : X).get(), xg = X.get();
                qg.erase(qg.begin(), qg.begin() + o1);
                xg.erase(xg.begin(), xg.begin() + o1);
                out.push_back({"q", qg});
                out.push_back({"inp", xg});
            }
            return out;
        });
        auto rq = twin(x0, H);
        size_t j = mode == 2 ? 1 : 0;  // q's output in o; k's (mode 2) at j - 1
        expect("q", o[j].second, rq, tol_x(rq, bound(x0, H)));
        if (mode == 0) expect_exact("inp kept", o[j + 1].second, x0);
        if (mode == 2) {
            auto rk = twin(y0, KV);
            expect("k", o[0].second, rk, tol_x(rk, bound(y0, KV)));
        }
        if (off) {
            size_t per = mode == 2 ? 3 : 2;
            for (size_t m = 0; m < per; m++)
                if (o[m].first != "inp") expect_exact((o[m].first + " = aligned").c_str(), o[m].second, o[per + m].second);
        }
    });
}

// ---------------------------------------------------------------------------------
// swiglu: elementwise. forward silu(a) b: B = 8 |y|. backward: dh3 = g silu(a): B = 8 |dh3|;
// dh1 = g b sig (1 + a (1 - sig)): B = 8 |g b sig| (1 + 2 |a|) (1 - sig cancels for large a).
// off > 0: the buffers start `off` elements into their allocations (not 16-byte aligned:
// the element-by-element path); the result must equal the aligned launch's bit for bit.
static void check_swiglu(size_t n, int backward, int alias, int off = 0) {
    std::string name = sz("%s[n=%zu%s%s]", backward ? "swiglu_backward" : "swiglu_forward", n, alias ? ",dh1=dout" : "",
                          off ? sz(",off=%d", off).c_str() : "");
    add(name, [=] {
        Rng r(name);
        auto a = r.vec(n + off, -9, 9), b = r.vec(n + off, -2, 2), g = r.vec(n + off, -1, 1);
        auto tail = [off](std::vector<float> v) { v.erase(v.begin(), v.begin() + off); return v; };
        auto a0 = tail(a), b0 = tail(b), g0 = tail(g);
        if (!backward) {
            std::vector<float> ref(n);
            cpu::swiglu_forward(ref.data(), a0.data(), b0.data(), n, 0);
            Outs o = both_schedules([&] {
                DX A(a), Bb(b), O(n + off);
                swiglu_forward(O.p + off, A.p + off, Bb.p + off, n, 0);
                Outs out{{"out", tail(O.get())}};
                if (off) {
                    DX A0(a0), B0(b0), O0(n);
                    swiglu_forward(O0.p, A0.p, B0.p, n, 0);
                    out.push_back({"out (aligned)", O0.get()});
                }
                return out;
            });
            std::vector<double> E(n);
            for (size_t i = 0; i < n; i++) E[i] = 2 * U * 8 * fabs((double)ref[i]);
            expect("out", o[0].second, ref, tol_x(ref, E));
            if (off) expect_exact("out = aligned", o[0].second, o[1].second);
        } else {
            std::vector<float> r1(n), r3(n);
            cpu::swiglu_backward(r1.data(), r3.data(), g0.data(), a0.data(), b0.data(), n, 0);
            Outs o = both_schedules([&] {
                DX A(a), Bb(b), G(g), D1(n + off), D3(n + off);
                swiglu_backward(alias ? G.p + off : D1.p + off, D3.p + off, G.p + off, A.p + off, Bb.p + off, n, 0);
                Outs out{{"dh1", tail(alias ? G.get() : D1.get())}, {"dh3", tail(D3.get())}};
                if (off) {
                    DX A0(a0), B0(b0), G0(g0), D10(n), D30(n);
                    swiglu_backward(alias ? G0.p : D10.p, D30.p, G0.p, A0.p, B0.p, n, 0);
                    out.push_back({"dh1 (aligned)", alias ? G0.get() : D10.get()});
                    out.push_back({"dh3 (aligned)", D30.get()});
                }
                return out;
            });
            std::vector<double> E1(n), E3(n);
            for (size_t i = 0; i < n; i++) {
                double sig = 1.0 / (1.0 + exp(-(double)a0[i]));
                E1[i] = 2 * U * 8 * fabs((double)g0[i] * b0[i] * sig) * (1 + 2 * fabs((double)a0[i]));
                E3[i] = 2 * U * 8 * fabs((double)r3[i]);
            }
            expect("dh1", o[0].second, r1, tol_x(r1, E1));
            expect("dh3", o[1].second, r3, tol_x(r3, E3));
            if (off) {
                expect_exact("dh1 = aligned", o[0].second, o[2].second);
                expect_exact("dh3 = aligned", o[1].second, o[3].second);
            }
        }
    });
}

// ---------------------------------------------------------------------------------
// crossentropy. lse = m + log(sum_j exp(x_j - m)): V positive terms <= 1 with sum >= 1,
// so B(lse) = (V + 8)(1 + |m| + |lse|); loss = lse - x_t: B = B(lse) + 8 |x_t|;
// p_j = exp(x_j - lse) dloss has relative bound B(lse) + 8 (1 + |x_j|), and the target
// element subtracts dloss: + 8 |dloss|.
// off > 0: the logits start `off` elements into their allocation (not 16-byte aligned: the
// element-by-element path); losses and dlogits must equal the aligned launch's bit for bit.
static void check_crossentropy(int N, int V, float spread, int off = 0) {
    std::string name = sz("crossentropy_forward_backward[N=%d,V=%d%s%s]", N, V, spread > 10 ? ",large-logits" : "",
                          off ? sz(",off=%d", off).c_str() : "");
    add(name, [=] {
        Rng r(name);
        auto lg = r.vec((size_t)N * V, -spread, spread);
        std::vector<int> tg(N);
        for (auto& t : tg) t = r.below(V);
        tg[0] = V - 1;
        if (N > 1) tg[1] = 0;
        float dloss = 1.0f / N;
        std::vector<double> Else(N), Ell(N);
        for (int i = 0; i < N; i++) {
            double m = -INFINITY, s = 0;
            for (int j = 0; j < V; j++) m = fmax(m, lg[(size_t)i * V + j]);
            for (int j = 0; j < V; j++) s += exp(lg[(size_t)i * V + j] - m);
            double lse = m + log(s);
            Else[i] = (V + 8) * (1 + fabs(m) + fabs(lse));
            Ell[i] = 2 * U * (Else[i] + 8 * fabs((double)lg[(size_t)i * V + tg[i]]));
        }
        for (int wd = 0; wd <= 1; wd++) {
            std::vector<float> rl(N), rlg = lg;
            cpu::crossentropy_forward_backward(rl.data(), rlg.data(), tg.data(), N, V, dloss, wd, 0);
            Outs o = both_schedules([&] {
                std::vector<float> padded(off, 7.0f);
                padded.insert(padded.end(), lg.begin(), lg.end());
                DX L(padded); DI T(tg); DF LS(N);
                crossentropy_forward_backward(LS.p, L.p + off, T.p, N, V, dloss, wd, 0);
                std::vector<float> got = L.get();
                got.erase(got.begin(), got.begin() + off);
                Outs out{{"losses", LS.get()}, {"logits", got}};
                if (off) {
                    DX L0(lg); DF LS0(N);
                    crossentropy_forward_backward(LS0.p, L0.p, T.p, N, V, dloss, wd, 0);
                    out.push_back({"losses (aligned)", LS0.get()});
                    out.push_back({"logits (aligned)", L0.get()});
                }
                return out;
            });
            if (off) {
                expect_exact("losses = aligned", o[0].second, o[2].second);
                expect_exact("logits = aligned", o[1].second, o[3].second);
            }
            expect(sz("losses wd=%d", wd).c_str(), o[0].second, rl, tol_f(Ell));
            if (!wd) { expect_exact("logits kept", o[1].second, lg); continue; }
            std::vector<double> E((size_t)N * V);
            for (int i = 0; i < N; i++)
                for (int j = 0; j < V; j++) {
                    size_t k = (size_t)i * V + j;
                    double p = fabs((double)rlg[k] + (j == tg[i] ? dloss : 0.0f));
                    E[k] = 2 * U * ((Else[i] + 8 * (1 + fabs((double)lg[k]))) * p + (j == tg[i] ? 8 * dloss : 0.0));
                }
            expect("dlogits", o[1].second, rlg, tol_x(rlg, E));
        }
    });
}

// ---------------------------------------------------------------------------------
// vocab-parallel cross-entropy (crossentropy_vp_max / _sums / _finish). A shard [N, Vs]
// of columns v0 ... v0 + Vs - 1 whose first n_valid are logits; the padding columns hold
// large values (20..30, above every logit), so a kernel that reads them into the max or
// the sums is far off, and must come back exactly 0 in the dlogits.
// equal: exact equality that also holds for -inf (the max of an empty shard)
static void expect_equal(const char* what, const std::vector<float>& got, const std::vector<float>& ref) {
    size_t bad = 0, first = 0;
    for (size_t i = 0; i < ref.size(); i++)
        if (!(got[i] == ref[i])) { if (!bad) first = i; bad++; }
    fprintf(stderr, "    %-12s n=%-7zu %s\n", what, ref.size(), bad ? "<-- FAIL" : "exact");
    if (bad) problem("%s: %zu of %zu elements differ; first at %zu: got %.9g, expected %.9g", what, bad, ref.size(), first,
                     got[first], ref[first]);
}
// a shard: valid columns in [-spread, spread), padding in [20, 30)
static std::vector<float> vp_shard(Rng& r, int N, int Vs, int n_valid, float spread) {
    std::vector<float> x((size_t)N * Vs);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < Vs; j++) x[(size_t)i * Vs + j] = rx(j < n_valid ? r.uni(-spread, spread) : r.uni(20, 30));
    return x;
}
// Each launcher against its twin, on the same inputs. max: exact. sums: the inputs' M is a
// "global" max (the shard's own max plus 0..3 on odd rows, as if another rank held a larger
// logit; any value when the shard is empty), so every term exp(x - M) <= 1: n terms with
// the argument rounded (|x - M| U) and expf's 2 ulp, summed in another order:
// B = sum_j t_j (n + 8 + |x_j| + |M|); the target logit: exact. finish: S is the shard's sum
// plus 0.5..3 on odd rows (other ranks' terms), x_target any value; loss = log S + M - x_t:
// B = 8 (|log S| + |M| + |x_t| + |loss|); p = exp(x - M) (dloss / S):
// B = (|x| + |M| + 8) |p| + 8 |p - dloss [target]|; padding exactly 0.
// off > 0: the shard starts off elements into its allocation (the element path); every
// output must equal the aligned launch's bit for bit.
static void check_crossentropy_vp(int N, int Vs, int n_valid, int v0, int off = 0) {
    std::string name = sz("crossentropy_vp[N=%d,Vs=%d,n_valid=%d,v0=%d%s]", N, Vs, n_valid, v0, off ? sz(",off=%d", off).c_str() : "");
    add(name, [=] {
        Rng r(name);
        auto lg = vp_shard(r, N, Vs, n_valid, 4.0f);
        std::vector<int> tg(N);
        for (auto& t : tg) t = std::max(0, v0 - 4) + r.below(Vs + 8);  // below, in and above the shard
        tg[0] = n_valid > 0 ? v0 + n_valid - 1 : v0;                // in (or, for an empty shard, its first column)
        if (N > 1) tg[1] = v0 - 1;                                   // the previous shard's last column
        if (N > 2) tg[2] = v0 + n_valid;                             // just past the valid columns (padding or the next shard)
        const float dloss = 1.0f / N;
        // pass 1
        std::vector<float> rmax(N);
        cpu::crossentropy_vp_max(rmax.data(), lg.data(), N, Vs, n_valid, 0);
        std::vector<float> M(N), rsums(2 * (size_t)N);
        for (int i = 0; i < N; i++) M[i] = n_valid ? rmax[i] + (i & 1 ? r.uni(0, 3) : 0.0f) : r.uni(-4, 4);
        cpu::crossentropy_vp_sums(rsums.data(), lg.data(), M.data(), tg.data(), N, Vs, v0, n_valid, 0);
        std::vector<float> S(2 * (size_t)N);
        for (int i = 0; i < N; i++) {
            S[i] = n_valid ? rsums[i] + (i & 1 ? r.uni(0.5f, 3) : 0.0f) : r.uni(1, 5);
            int t = tg[i] - v0;
            S[N + i] = t >= 0 && t < n_valid ? rsums[N + i] : r.uni(-4, 4);
        }
        for (int wd = 0; wd <= 1; wd++) {
            std::vector<float> rl(N), rlg = lg;
            cpu::crossentropy_vp_finish(rl.data(), rlg.data(), M.data(), S.data(), tg.data(), N, Vs, v0, n_valid, dloss, wd, 0);
            auto launch = [&](int o, Outs& out, const char* tag) {
                std::vector<float> padded(o, 7.0f);
                padded.insert(padded.end(), lg.begin(), lg.end());
                DX L(padded); DI T(tg); DF MX(N), DM(M), SU(2 * (size_t)N), DS(S), LS(N);
                crossentropy_vp_max(MX.p, L.p + o, N, Vs, n_valid, 0);
                crossentropy_vp_sums(SU.p, L.p + o, DM.p, T.p, N, Vs, v0, n_valid, 0);
                crossentropy_vp_finish(LS.p, L.p + o, DM.p, DS.p, T.p, N, Vs, v0, n_valid, dloss, wd, 0);
                std::vector<float> got = L.get();
                got.erase(got.begin(), got.begin() + o);
                out.push_back({sz("rowmax%s", tag), MX.get()});
                out.push_back({sz("sums%s", tag), SU.get()});
                out.push_back({sz("losses%s", tag), LS.get()});
                out.push_back({sz("logits%s", tag), got});
            };
            Outs o = both_schedules([&] {
                Outs out;
                launch(off, out, "");
                if (off) launch(0, out, " (aligned)");
                return out;
            });
            if (off)
                for (int k = 0; k < 4; k++) expect_exact((o[k].first + " = aligned").c_str(), o[k].second, o[k + 4].second);
            if (wd == 0) expect_equal("rowmax", o[0].second, rmax);
            std::vector<double> Es(N), El(N);
            for (int i = 0; i < N; i++) {
                double b = 0;
                for (int j = 0; j < n_valid; j++) {
                    double x = lg[(size_t)i * Vs + j];
                    b += exp(x - M[i]) * (n_valid + 8 + fabs(x) + fabs((double)M[i]));
                }
                Es[i] = 2 * U * b;
                El[i] = 2 * U * 8 * (fabs(log((double)S[i])) + fabs((double)M[i]) + fabs((double)S[N + i]) + fabs((double)rl[i]));
            }
            if (wd == 0) {
                expect("sums", std::vector<float>(o[1].second.begin(), o[1].second.begin() + N), std::vector<float>(rsums.begin(), rsums.begin() + N), Es);
                expect_exact("target logit", std::vector<float>(o[1].second.begin() + N, o[1].second.end()), std::vector<float>(rsums.begin() + N, rsums.end()));
            }
            expect(sz("losses wd=%d", wd).c_str(), o[2].second, rl, El);
            if (!wd) { expect_exact("logits kept", o[3].second, lg); continue; }
            std::vector<double> E((size_t)N * Vs, 0.0);
            for (int i = 0; i < N; i++)
                for (int j = 0; j < n_valid; j++) {  // padding: E = 0 and ref = 0, so tol = 0
                    size_t k = (size_t)i * Vs + j;
                    bool is_t = tg[i] - v0 == j;
                    double p = fabs((double)rlg[k] + (is_t ? dloss : 0.0f));
                    E[k] = 2 * U * ((fabs((double)lg[k]) + fabs((double)M[i]) + 8) * p + 8 * fabs((double)rlg[k]));
                }
            expect("dlogits", o[3].second, rlg, tol_x(rlg, E));
        }
    });
}

// The composition, as the trainer runs it over a TP group of tp ranks: a random [N, V]
// logit matrix cut into shards of Vs = ceil(V / tp) columns (the last one padded, possibly
// empty); max on each shard, MAX over the shards on the host, sums on each, their SUM on
// the host, finish on each. The losses (every rank's) and the concatenated dlogits must
// equal crossentropy_forward_backward on the whole matrix at that check's bounds (the
// same sum of V terms in another order; exp(x - M) dloss / S instead of exp(x - lse) dloss:
// within the same relative bound), the padding columns exactly 0. Done with the emulated
// kernels and with the CPU twins (fp32, tol E only).
static void check_crossentropy_vp_composition(int N, int V, int tp, float spread) {
    std::string name = sz("crossentropy_vp_composition[N=%d,V=%d,tp=%d%s]", N, V, tp, spread > 10 ? ",large-logits" : "");
    add(name, [=] {
        Rng r(name);
        const int Vs = (V + tp - 1) / tp;
        auto lg = r.vec((size_t)N * V, -spread, spread);
        std::vector<int> tg(N);
        for (auto& t : tg) t = r.below(V);
        tg[0] = V - 1;
        if (N > 1) tg[1] = 0;
        if (N > 2) tg[2] = Vs;  // the first column of the second shard
        const float dloss = 1.0f / N;
        std::vector<float> rl(N), rlg = lg;
        cpu::crossentropy_forward_backward(rl.data(), rlg.data(), tg.data(), N, V, dloss, 1, 0);
        std::vector<double> Ell(N), E((size_t)N * V);
        for (int i = 0; i < N; i++) {  // as check_crossentropy
            double m = -INFINITY, s = 0;
            for (int j = 0; j < V; j++) m = fmax(m, lg[(size_t)i * V + j]);
            for (int j = 0; j < V; j++) s += exp(lg[(size_t)i * V + j] - m);
            double Else = (V + 8) * (1 + fabs(m) + fabs(m + log(s)));
            Ell[i] = 2 * U * (Else + 8 * fabs((double)lg[(size_t)i * V + tg[i]]));
            for (int j = 0; j < V; j++) {
                size_t k = (size_t)i * V + j;
                double p = fabs((double)rlg[k] + (j == tg[i] ? dloss : 0.0f));
                E[k] = 2 * U * ((Else + 8 * (1 + fabs((double)lg[k]))) * p + (j == tg[i] ? 8 * dloss : 0.0));
            }
        }
        std::vector<std::vector<float>> shards(tp);
        for (int k = 0; k < tp; k++) {
            int v0 = k * Vs, nv = std::max(0, std::min(Vs, V - v0));
            shards[k] = vp_shard(r, N, Vs, nv, 1.0f);  // the padding
            for (int i = 0; i < N; i++)
                for (int j = 0; j < nv; j++) shards[k][(size_t)i * Vs + j] = lg[(size_t)i * V + v0 + j];
        }
        // run: device (1) or CPU twins (0); returns every rank's losses, then the dlogits
        // of every shard's valid columns as [N, V] and their padding columns
        auto run = [&](bool dev) {
            std::vector<std::vector<float>> x = shards;
            std::vector<float> M(N, -INFINITY), S(2 * (size_t)N, 0.0f), part(2 * (size_t)N);
            Outs out;
            for (int pass = 0; pass < 3; pass++)
                for (int k = 0; k < tp; k++) {
                    int v0 = k * Vs, nv = std::max(0, std::min(Vs, V - v0));
                    if (dev) {
                        DX L(x[k]); DI T(tg); DF DM(M), DS(S), P(2 * (size_t)N), LS(N);
                        if (pass == 0) crossentropy_vp_max(P.p, L.p, N, Vs, nv, 0);
                        if (pass == 1) crossentropy_vp_sums(P.p, L.p, DM.p, T.p, N, Vs, v0, nv, 0);
                        if (pass == 2) crossentropy_vp_finish(LS.p, L.p, DM.p, DS.p, T.p, N, Vs, v0, nv, dloss, 1, 0);
                        part = P.get();
                        if (pass == 2) { out.push_back({sz("losses rank %d", k), LS.get()}); x[k] = L.get(); }
                    } else {
                        std::vector<float> ls(N);
                        if (pass == 0) cpu::crossentropy_vp_max(part.data(), x[k].data(), N, Vs, nv, 0);
                        if (pass == 1) cpu::crossentropy_vp_sums(part.data(), x[k].data(), M.data(), tg.data(), N, Vs, v0, nv, 0);
                        if (pass == 2) {
                            cpu::crossentropy_vp_finish(ls.data(), x[k].data(), M.data(), S.data(), tg.data(), N, Vs, v0, nv, dloss, 1, 0);
                            out.push_back({sz("losses rank %d", k), ls});
                        }
                    }
                    // the all-reduces, in rank order
                    if (pass == 0) for (int i = 0; i < N; i++) M[i] = std::max(M[i], part[i]);
                    if (pass == 1) for (int i = 0; i < 2 * N; i++) S[i] += part[i];
                }
            std::vector<float> cat((size_t)N * V), pad;
            for (int k = 0; k < tp; k++) {
                int v0 = k * Vs, nv = std::max(0, std::min(Vs, V - v0));
                for (int i = 0; i < N; i++)
                    for (int j = 0; j < Vs; j++) {
                        float vv = x[k][(size_t)i * Vs + j];
                        if (j < nv) cat[(size_t)i * V + v0 + j] = vv;
                        else pad.push_back(vv);
                    }
            }
            out.push_back({"dlogits", cat});
            out.push_back({"padding", pad});
            return out;
        };
        Outs o = both_schedules([&] { return run(true); });
        Outs c = run(false);
        for (int k = 0; k < tp; k++) {
            expect_exact(sz("rank %d = rank 0", k).c_str(), o[k].second, o[0].second);
            expect(sz("losses (twins) rank %d", k).c_str(), c[k].second, rl, tol_f(Ell));
        }
        expect("losses", o[0].second, rl, tol_f(Ell));
        expect("dlogits", o[tp].second, rlg, tol_x(rlg, E));
        expect("dlogits (twins)", c[tp].second, rlg, tol_f(E));
        expect_exact("padding = 0", o[tp + 1].second, std::vector<float>(o[tp + 1].second.size(), 0.0f));
        expect_exact("padding = 0 (twins)", c[tp + 1].second, std::vector<float>(c[tp + 1].second.size(), 0.0f));
    });
}

// ---------------------------------------------------------------------------------
// adamw: elementwise, the same formula as the twin. m' = b1 m + (1-b1) g: B = 8 (|b1 m| + |(1-b1) g|);
// v' likewise with g^2; p' = p (1 - lr wd) - step m'/(sqrt(v')/bc2 + eps):
// B = 8 (|p (1 - lr wd)| + step B(m')/8 / (sqrt(v')/bc2 + eps)) + the update's own roundings.
// The stored param is the new value rounded once: with a master copy it must equal
// round(master) exactly.
static void check_adamw(size_t n, int with_master, int t) {
    std::string name = sz("adamw_update[n=%zu,%s,t=%d]", n, with_master ? "master" : "no-master", t);
    add(name, [=] {
        Rng r(name);
        const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 0.5f;
        auto p0 = r.vec(n, -1, 1), g = r.vec(n, -1, 1), m0 = r.vec(n, -0.1f, 0.1f), v0 = r.vec(n, 0, 0.01f);
        auto rp = p0, rmaster = p0, rm = m0, rv = v0;
        cpu::adamw_update(rp.data(), with_master ? rmaster.data() : nullptr, g.data(), rm.data(), rv.data(), n, lr, b1, b2, eps,
                          wd, gs, t, 0);
        Outs o = both_schedules([&] {
            DX P(p0), G(g); DF M(m0), Vv(v0), MS(p0);
            adamw_update(P.p, with_master ? MS.p : nullptr, G.p, M.p, Vv.p, n, lr, b1, b2, eps, wd, gs, t, 0);
            return Outs{{"param", P.get()}, {"m", M.get()}, {"v", Vv.get()}, {"master", MS.get()}};
        });
        double bc1 = 1.0 - pow(b1, t), bc2 = sqrt(1.0 - pow(b2, t)), step = lr / bc1;
        std::vector<double> Em(n), Ev(n), Ep(n);
        for (size_t i = 0; i < n; i++) {
            double gg = (double)g[i] * gs;
            double bm = 8 * (fabs(b1 * (double)m0[i]) + fabs((1 - b1) * gg));
            double bv = 8 * (fabs(b2 * (double)v0[i]) + fabs((1 - b2) * gg * gg));
            double den = sqrt((double)rv[i]) / bc2 + eps;
            double upd = step * fabs((double)rm[i]) / den;
            Em[i] = 2 * U * bm;
            Ev[i] = 2 * U * bv;
            Ep[i] = 2 * U * (8 * fabs((double)p0[i] * (1 - lr * wd)) + step * bm / den + upd * (8 + bv / (2 * rv[i] + 1e-30)));
        }
        expect("m", o[1].second, rm, tol_f(Em));
        expect("v", o[2].second, rv, tol_f(Ev));
        if (with_master) {
            expect("master", o[3].second, rmaster, tol_f(Ep));
            expect_exact("param=round(master)", o[0].second, round_x(o[3].second));
        } else {
            expect("param", o[0].second, rp, tol_x(rp, Ep));
            expect_exact("master untouched", o[3].second, p0);
        }
    });
}

// global_norm_squared: out += sum g^2, in double on both sides, then one float rounding
// and the float addition: B = 8 (|out0| + sum g^2).
static void check_gnorm(size_t n) {
    std::string name = sz("global_norm_squared[n=%zu]", n);
    add(name, [=] {
        Rng r(name);
        auto g = r.vec(n, -3, 3);
        std::vector<float> ref = {1.5f};
        cpu::global_norm_squared(ref.data(), g.data(), n, 0);
        Outs o = both_schedules([&] {
            DX G(g); DF O(std::vector<float>{1.5f});
            global_norm_squared(O.p, G.p, n, 0);
            return Outs{{"out", O.get()}};
        });
        double s = 1.5;
        for (float x : g) s += (double)x * x;
        expect("out", o[0].second, ref, {2 * U * 8 * s});
    });
}

// ---------------------------------------------------------------------------------
// attention: the bound B of each output is built in double from the same terms (see the
// file header): s = scale q.k: B = (hd + 2) scale sum|q k|; p = exp(s - lse):
// B = p (B(s) + B(lse) + |s - lse| + 2); out = sum_j p_j v_j / l: B = sum |v| B(p) +
// (T + 4) sum p |v|; backward: dp = dO.v, delta = dO.O (hd terms), dS = p (dp - delta) scale,
// dv = sum_r p dO, dk = sum_r dS q, dq = sum_j dS k (each: sum |x| B(y) + (n + 2) sum |x y|).
// causal: row t sums over the keys u <= t; full (attention_full_*): over all T keys.
struct Att { int B, T, H, KV, hd; };
static std::string att_sz(const Att& a) { return sz("B=%d,T=%d,H=%d,KV=%d,hd=%d", a.B, a.T, a.H, a.KV, a.hd); }
// every shape of a list in both modes, causal first
static void add_att_both_modes(const std::vector<Att>& shapes, void (*check)(const Att&, bool)) {
    for (const Att& a : shapes)
        for (int causal = 1; causal >= 0; causal--) check(a, causal);
}
static void attention_bounds(const Att& a, bool causal, const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const std::vector<float>& dout, const std::vector<float>& out,
                             const std::vector<float>& lse, std::vector<double>& Bo, std::vector<double>& Bl,
                             std::vector<double>& Bq, std::vector<double>& Bk, std::vector<double>& Bv) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd, group = H / KV;
    const double scale = 1.0 / sqrt((double)hd);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    Bo.assign(nq, 0); Bl.assign((size_t)B * H * T, 0); Bq.assign(nq, 0); Bk.assign(nk, 0); Bv.assign(nk, 0);
    std::vector<double> s(T), Bs(T), p(T), Bp(T), ds(T), Bds(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++) {
            int kvh = h / group;
            for (int t = 0; t < T; t++) {
                const float* qt = &q[(((size_t)b * T + t) * H + h) * hd];
                const float* dot_ = &dout[(((size_t)b * T + t) * H + h) * hd];
                const float* ot = &out[(((size_t)b * T + t) * H + h) * hd];
                const int nu = causal ? t + 1 : T;  // the keys row t sees
                double m = -INFINITY, Bm = 0;
                for (int u = 0; u < nu; u++) {
                    const float* ku = &k[(((size_t)b * T + u) * KV + kvh) * hd];
                    double d = 0, da = 0;
                    for (int e = 0; e < hd; e++) { d += (double)qt[e] * ku[e]; da += fabs((double)qt[e] * ku[e]); }
                    s[u] = d * scale; Bs[u] = (hd + 2) * da * scale;
                    if (s[u] > m) m = s[u];
                    Bm = fmax(Bm, Bs[u]);
                }
                double l = 0, Bll = 0;
                for (int u = 0; u < nu; u++) {
                    double pt = exp(s[u] - m);
                    l += pt;
                    Bll += pt * (Bs[u] + Bm + fabs(s[u] - m) + 2 + 4 * (T + 1));  // + online-softmax rescaling
                }
                Bll += nu * l;
                double L = m + log(l);
                double BL = Bm + Bll / l + fabs(log(l)) + fabs(L);
                Bl[((size_t)b * H + h) * T + t] = BL;
                // forward output: p_u = exp(s_u - L)
                for (int u = 0; u < nu; u++) {
                    p[u] = exp(s[u] - L);
                    Bp[u] = p[u] * (Bs[u] + BL + fabs(s[u] - L) + 2);
                }
                for (int e = 0; e < hd; e++) {
                    double acc = 0;
                    for (int u = 0; u < nu; u++) {
                        double vv = fabs((double)v[(((size_t)b * T + u) * KV + kvh) * hd + e]);
                        acc += vv * Bp[u] + (T + 4) * p[u] * vv;
                    }
                    Bo[(((size_t)b * T + t) * H + h) * hd + e] = acc;
                }
                // backward: with the given (fp32) lse, exact on both sides
                double Lg = lse[((size_t)b * H + h) * T + t], delta = 0, Bdelta = 0;
                for (int e = 0; e < hd; e++) { delta += (double)dot_[e] * ot[e]; Bdelta += (hd + 1) * fabs((double)dot_[e] * ot[e]); }
                for (int u = 0; u < nu; u++) {
                    const float* vu = &v[(((size_t)b * T + u) * KV + kvh) * hd];
                    double dp = 0, Bdp = 0;
                    for (int e = 0; e < hd; e++) { dp += (double)dot_[e] * vu[e]; Bdp += (hd + 1) * fabs((double)dot_[e] * vu[e]); }
                    double pg = exp(s[u] - Lg), Bpg = pg * (Bs[u] + fabs(s[u] - Lg) + 2);
                    p[u] = pg; Bp[u] = Bpg;
                    ds[u] = pg * (dp - delta) * scale;
                    Bds[u] = scale * (fabs(dp - delta) * Bpg + pg * (Bdp + Bdelta + fabs(dp - delta))) + 2 * fabs(ds[u]);
                }
                for (int e = 0; e < hd; e++) {
                    double accq = 0;
                    for (int u = 0; u < nu; u++) {
                        size_t ki = (((size_t)b * T + u) * KV + kvh) * hd + e;
                        double kk = fabs((double)k[ki]);
                        accq += kk * Bds[u] + (T + 2) * fabs(ds[u]) * kk;
                        // dk and dv of key u sum over the rows that see it, of every head of the group
                        double qq = fabs((double)qt[e]), gg = fabs((double)dot_[e]);
                        Bk[ki] += qq * Bds[u] + (group * T + 2) * fabs(ds[u]) * qq;
                        Bv[ki] += gg * Bp[u] + (group * T + 2) * p[u] * gg;
                    }
                    Bq[(((size_t)b * T + t) * H + h) * hd + e] = accq;
                }
            }
        }
}

static std::vector<double> att_E(const std::vector<double>& Bb) {  // E = 2 U B
    std::vector<double> e(Bb.size());
    for (size_t i = 0; i < e.size(); i++) e[i] = 2 * U * Bb[i];
    return e;
}

// causal: attention_forward / attention_backward; full: attention_full_forward / attention_full_backward
static void check_attention(const Att& a, bool causal) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd;
    std::string base = att_sz(a);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const auto cpu_fwd = causal ? cpu::attention_forward : cpu::attention_full_forward;
    const auto cpu_bwd = causal ? cpu::attention_backward : cpu::attention_full_backward;
    const auto gpu_fwd = causal ? attention_forward : attention_full_forward;
    const auto gpu_bwd = causal ? attention_backward : attention_full_backward;
    for (int bwd = 0; bwd <= 1; bwd++) {
        std::string name = std::string("attention_") + (causal ? "" : "full_") + (bwd ? "backward[" : "forward[") + base + "]";
        add(name, [=] {
            Rng r("attention" + base);  // the same inputs for forward and backward
            auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
            std::vector<float> out(nq), lse(nl);
            cpu_fwd(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H, KV, hd, 0);
            std::vector<double> Bo, Bl, Bq, Bk, Bv;
            auto out_x = round_x(out);  // what the backward gets as out: a floatX tensor
            attention_bounds(a, causal, q, k, v, dout, out_x, lse, Bo, Bl, Bq, Bk, Bv);
            if (!bwd) {
                Outs o = both_schedules([&] {
                    DX Q(q), K(k), Vv(v), O(nq); DF L(nl);
                    gpu_fwd(O.p, L.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
                    return Outs{{"out", O.get()}, {"lse", L.get()}};
                });
                expect("out", o[0].second, out, tol_x(out, att_E(Bo)));
                expect("lse", o[1].second, lse, tol_f(att_E(Bl)));
            } else {
                std::vector<float> dq(nq), dk(nk), dv(nk);
                cpu_bwd(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out_x.data(), lse.data(),
                        B, T, H, KV, hd, 0);
                Outs o = both_schedules([&] {
                    DX Q(q), K(k), Vv(v), DO(dout), O(out_x), DQ(nq), DK(nk), DV(nk); DF L(lse);
                    gpu_bwd(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, B, T, H, KV, hd, 0);
                    return Outs{{"dq", DQ.get()}, {"dk", DK.get()}, {"dv", DV.get()}};
                });
                expect("dq", o[0].second, dq, tol_x(dq, att_E(Bq)));
                expect("dk", o[1].second, dk, tol_x(dk, att_E(Bk)));
                expect("dv", o[2].second, dv, tol_x(dv, att_E(Bv)));
            }
        });
    }
}

// The CPU twin itself against the definition: a naive O(T^2) softmax attention in double
// (each row's softmax at once: no tiles, no online rescaling, no polynomial exp). The
// checks above compare the CUDA kernels with the twin; this one verifies the twin. The
// backward is the gradient given out and lse (the contract of attention_backward; they
// are the twin's own forward outputs, as in training), in double: P = exp(s - lse),
// delta = dO.O, dS = P (dO.v - delta) scale. The twin is fp32 in both builds, so the
// tolerance is the one-evaluation bound E of attention_bounds with no floatX rounding.
static void check_attention_twin(const Att& a, bool causal) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd, group = H / KV;
    std::string base = att_sz(a);
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    add(sz("attention_cpu_twin_vs_fp64[%s,%s]", causal ? "causal" : "full", base.c_str()), [=] {
        Rng r("attention-twin" + base);
        auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
        std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
        (causal ? cpu::attention_forward : cpu::attention_full_forward)(out.data(), lse.data(), q.data(), k.data(), v.data(),
                                                                        B, T, H, KV, hd, 0);
        (causal ? cpu::attention_backward : cpu::attention_full_backward)(dq.data(), dk.data(), dv.data(), dout.data(), q.data(),
                                                                          k.data(), v.data(), out.data(), lse.data(), B, T, H,
                                                                          KV, hd, 0);
        const double scale = 1.0 / sqrt((double)hd);
        std::vector<double> r_out(nq), r_lse(nl), r_dq(nq, 0.0), r_dk(nk, 0.0), r_dv(nk, 0.0), s(T);
        for (int b = 0; b < B; b++)
            for (int h = 0; h < H; h++)
                for (int t = 0; t < T; t++) {
                    const int kvh = h / group, nu = causal ? t + 1 : T;
                    const size_t qi = (((size_t)b * T + t) * H + h) * hd, li = ((size_t)b * H + h) * T + t;
                    auto kv_at = [&](const std::vector<float>& x, int u, int e) { return (double)x[(((size_t)b * T + u) * KV + kvh) * hd + e]; };
                    double m = -INFINITY, l = 0;
                    for (int u = 0; u < nu; u++) {
                        double d = 0;
                        for (int e = 0; e < hd; e++) d += (double)q[qi + e] * kv_at(k, u, e);
                        s[u] = d * scale;
                        m = fmax(m, s[u]);
                    }
                    for (int u = 0; u < nu; u++) l += exp(s[u] - m);
                    r_lse[li] = m + log(l);
                    for (int e = 0; e < hd; e++) {
                        double o = 0;
                        for (int u = 0; u < nu; u++) o += exp(s[u] - r_lse[li]) * kv_at(v, u, e);
                        r_out[qi + e] = o;
                    }
                    double delta = 0;  // with the given out and lse, as the twin
                    for (int e = 0; e < hd; e++) delta += (double)dout[qi + e] * out[qi + e];
                    for (int u = 0; u < nu; u++) {
                        double dp = 0;
                        for (int e = 0; e < hd; e++) dp += (double)dout[qi + e] * kv_at(v, u, e);
                        const double p = exp(s[u] - (double)lse[li]), ds = p * (dp - delta) * scale;
                        for (int e = 0; e < hd; e++) {
                            const size_t ki = (((size_t)b * T + u) * KV + kvh) * hd + e;
                            r_dq[qi + e] += ds * k[ki];
                            r_dk[ki] += ds * q[qi + e];
                            r_dv[ki] += p * dout[qi + e];
                        }
                    }
                }
        std::vector<double> Bo, Bl, Bq, Bk, Bv;
        attention_bounds(a, causal, q, k, v, dout, out, lse, Bo, Bl, Bq, Bk, Bv);
        auto to_f = [](const std::vector<double>& x) { return std::vector<float>(x.begin(), x.end()); };
        expect("out", out, to_f(r_out), tol_f(att_E(Bo)));
        expect("lse", lse, to_f(r_lse), tol_f(att_E(Bl)));
        expect("dq", dq, to_f(r_dq), tol_f(att_E(Bq)));
        expect("dk", dk, to_f(r_dk), tol_f(att_E(Bk)));
        expect("dv", dv, to_f(r_dv), tol_f(att_E(Bv)));
    });
}

// ---------------------------------------------------------------------------------
// adaLN (llmc/kernels/adaln.cuh). Activations [B*N, C]; the modulation vectors are the columns
// [off, off + C) of [B, ld] tensors, as the DiT slices one [B, 6D] matmul output. All
// bounds are in units of U, per evaluation (see the header):
// layernorm_modulate_forward: m = sum x / C: Bm = (C + 2) sum|x| / C, absolute. var is
// flat in m to first order, so rstd has relative bound Br = C + 8 (as rmsnorm) plus the
// second-order C dm^2 / (C var) <= 4 U Bm^2 / var; xhat = (x - m) rstd:
// Bx = rstd ((Br + 2) |x - m| + Bm); y = xhat (1 + sc) + sh: B = |1 + sc| Bx + 2 |xhat (1 + sc)| + |y|.
// layernorm_modulate_backward, on the twin's mean and rstd: with S1 = sum|dxhat| / C,
// S2 = sum|dxhat xhat| / C: dinp = dinp0 + rstd (dxhat - s1 - xhat s2):
// B = |dinp0| + (C + 20) rstd (|dxhat| + S1 + |xhat| S2); dshift = sum_n dout:
// B = (N + 2) sum|dout|; dscale = sum_n dout xhat: B = (N + 4) sum|dout xhat|.
// gated_residual: out = res + g y: B = 2 (|res| + |g y|); dy = g dout: B = |dy|;
// dgate = [dgate0] + sum_n dout y: B = (N + 4) ([|dgate0|] + sum|dout y|).
// Elements of a [B, ld] gradient outside its C columns must not change (exact).
struct Ada { int B, N, C, ld, off_a, off_b; };  // off_a: shift / gate columns, off_b: scale columns
static std::string ada_sz(const Ada& a) {
    return sz("B=%d,N=%d,C=%d,ld=%d,off=%d/%d", a.B, a.N, a.C, a.ld, a.off_a, a.off_b);
}
// tolerance of a [B, ld] gradient: E in the columns [off, off + C), exact elsewhere
static std::vector<double> tol_cols(const Ada& a, int off, const std::vector<float>& ref, const std::vector<double>& E) {
    std::vector<double> t = tol_x(ref, E);
    for (int b = 0; b < a.B; b++)
        for (int j = 0; j < a.ld; j++)
            if (j < off || j >= off + a.C) t[(size_t)b * a.ld + j] = 0;
    return t;
}

// The backward gets scratch (adaln_backward_scratch_floats: the two-stage column sums when
// N > ADALN_CHUNK) unless no_scratch (the one-stage kernel at any N).
static void check_layernorm_modulate(const Ada& a, int backward, float center, int no_scratch = 0) {
    const float eps = 1e-6f;
    const int B = a.B, N = a.N, C = a.C, ld = a.ld, rows = a.B * a.N;
    std::string name = sz("%s[%s%s%s]", backward ? "layernorm_modulate_backward" : "layernorm_modulate_forward",
                          ada_sz(a).c_str(), center != 0 ? sz(",mean=%g", center).c_str() : "", no_scratch ? ",no-scratch" : "");
    add(name, [=] {
        Rng r(name);
        size_t n = (size_t)rows * C;
        auto x = r.vec(n, center - 2, center + 2), ada = r.vec((size_t)B * ld, -1, 1);
        std::vector<float> y(n), mean(rows), rstd(rows);
        cpu::layernorm_modulate_forward(y.data(), mean.data(), rstd.data(), x.data(), ada.data() + a.off_a,
                                        ada.data() + a.off_b, ld, B, N, C, eps, 0);
        auto sc_at = [&](int i, int c) { return (double)ada[(size_t)(i / N) * ld + a.off_b + c]; };
        if (!backward) {
            Outs o = both_schedules([&] {
                DX X(x), A(ada), O(n); DF M(rows), RS(rows);
                layernorm_modulate_forward(O.p, M.p, RS.p, X.p, A.p + a.off_a, A.p + a.off_b, ld, B, N, C, eps, 0);
                return Outs{{"out", O.get()}, {"mean", M.get()}, {"rstd", RS.get()}, {"inp", X.get()}};
            });
            std::vector<double> Eo(n), Em(rows), Er(rows);
            for (int i = 0; i < rows; i++) {
                const float* xr = &x[(size_t)i * C];
                double sabs = 0, m = 0, var = 0;
                for (int c = 0; c < C; c++) { sabs += fabs(xr[c]); m += xr[c]; }
                m /= C;
                for (int c = 0; c < C; c++) var += (xr[c] - m) * (xr[c] - m);
                var /= C;
                double Bm = (C + 2) * sabs / C, Br = (C + 8) + 4 * U * Bm * Bm / (var + eps), rs = rstd[i];
                Em[i] = 2 * U * Bm;
                Er[i] = 2 * U * Br * rs;
                for (int c = 0; c < C; c++) {
                    size_t j = (size_t)i * C + c;
                    double xm = fabs((double)xr[c] - mean[i]), g = fabs(1.0 + sc_at(i, c));
                    double Bx = rs * ((Br + 2) * xm + Bm);
                    Eo[j] = 2 * U * (g * Bx + 2 * xm * rs * g + fabs(y[j]));
                }
            }
            expect("out", o[0].second, y, tol_x(y, Eo));
            expect("mean", o[1].second, mean, tol_f(Em));
            expect("rstd", o[2].second, rstd, tol_f(Er));
            expect_exact("inp kept", o[3].second, x);
            return;
        }
        auto dout = r.vec(n, -1, 1), dinp0 = r.vec(n, -1, 1);
        auto dsh0 = r.vec((size_t)B * ld, -1, 1), dsc0 = r.vec((size_t)B * ld, -1, 1);
        auto rdinp = dinp0, rdsh = dsh0, rdsc = dsc0;
        cpu::layernorm_modulate_backward(rdinp.data(), rdsh.data() + a.off_a, rdsc.data() + a.off_b, dout.data(), x.data(),
                                         mean.data(), rstd.data(), ada.data() + a.off_b, ld, B, N, C, nullptr, 0);
        Outs o = both_schedules([&] {
            DX X(x), A(ada), DO(dout), DIN(dinp0), DSH(dsh0), DSC(dsc0); DF M(mean), RS(rstd);
            DF SCR(adaln_backward_scratch_floats(B, N, C));  // exactly the size asked for
            layernorm_modulate_backward(DIN.p, DSH.p + a.off_a, DSC.p + a.off_b, DO.p, X.p, M.p, RS.p, A.p + a.off_b, ld, B,
                                        N, C, no_scratch ? nullptr : SCR.p, 0);
            return Outs{{"dinp", DIN.get()}, {"dshift", DSH.get()}, {"dscale", DSC.get()}};
        });
        std::vector<double> Ei(n), Esh((size_t)B * ld, 0.0), Esc((size_t)B * ld, 0.0);
        for (int i = 0; i < rows; i++) {
            double rs = rstd[i], S1 = 0, S2 = 0;
            for (int c = 0; c < C; c++) {
                size_t j = (size_t)i * C + c;
                double dxh = dout[j] * (1.0 + sc_at(i, c)), xh = ((double)x[j] - mean[i]) * rs;
                S1 += fabs(dxh) / C;
                S2 += fabs(dxh * xh) / C;
                Esh[(size_t)(i / N) * ld + a.off_a + c] += fabs((double)dout[j]);
                Esc[(size_t)(i / N) * ld + a.off_b + c] += fabs(dout[j] * xh);
            }
            for (int c = 0; c < C; c++) {
                size_t j = (size_t)i * C + c;
                double dxh = dout[j] * (1.0 + sc_at(i, c)), xh = ((double)x[j] - mean[i]) * rs;
                Ei[j] = 2 * U * (fabs(dinp0[j]) + (C + 20) * rs * (fabs(dxh) + S1 + fabs(xh) * S2));
            }
        }
        for (auto& e : Esh) e *= 2 * U * (N + 2);
        for (auto& e : Esc) e *= 2 * U * (N + 4);
        expect("dinp", o[0].second, rdinp, tol_x(rdinp, Ei));
        expect("dshift", o[1].second, rdsh, tol_cols(a, a.off_a, rdsh, Esh));
        expect("dscale", o[2].second, rdsc, tol_cols(a, a.off_b, rdsc, Esc));
    });
}

// forward: mode 1 = in place (out == res). backward: mode 0 = dy and dgate, 1 = dgate
// only (dy NULL), 2 = dy only (dgate NULL).
static void check_gated_residual(const Ada& a, int backward, int mode, int accumulate, int no_scratch = 0) {
    const int B = a.B, N = a.N, C = a.C, ld = a.ld, rows = a.B * a.N;
    static const char* bmodes[3] = {"dy+dgate", "dgate-only", "dy-only"};
    std::string name = backward ? sz("gated_residual_backward[%s,%s,accumulate=%d%s]", ada_sz(a).c_str(), bmodes[mode], accumulate,
                                     no_scratch ? ",no-scratch" : "")
                                : sz("gated_residual_forward[%s,%s]", ada_sz(a).c_str(), mode ? "in-place" : "out-of-place");
    add(name, [=] {
        Rng r(name);
        size_t n = (size_t)rows * C;
        auto ada = r.vec((size_t)B * ld, -1, 1), yv = r.vec(n, -2, 2);
        auto g_at = [&](size_t j) { return (double)ada[(j / C / N) * ld + a.off_a + j % C]; };
        if (!backward) {
            auto res = r.vec(n, -2, 2);
            std::vector<float> ref(n);
            cpu::gated_residual_forward(ref.data(), res.data(), yv.data(), ada.data() + a.off_a, ld, B, N, C, 0);
            Outs o = both_schedules([&] {
                DX RS(res), Y(yv), A(ada), O(n);
                floatX* out = mode ? RS.p : O.p;
                gated_residual_forward(out, RS.p, Y.p, A.p + a.off_a, ld, B, N, C, 0);
                return Outs{{"out", mode ? RS.get() : O.get()}, {"y", Y.get()}, {"res", RS.get()}};
            });
            std::vector<double> E(n);
            for (size_t j = 0; j < n; j++) E[j] = 2 * U * 2 * (fabs(res[j]) + fabs(g_at(j) * yv[j]));
            expect("out", o[0].second, ref, tol_x(ref, E));
            expect_exact("y kept", o[1].second, yv);
            if (!mode) expect_exact("res kept", o[2].second, res);
            return;
        }
        auto dout = r.vec(n, -1, 1), dg0 = r.vec((size_t)B * ld, -1, 1);
        const bool with_dy = mode != 1, with_dgate = mode != 2;
        std::vector<float> rdy(n), rdg = dg0;
        cpu::gated_residual_backward(with_dy ? rdy.data() : nullptr, with_dgate ? rdg.data() + a.off_a : nullptr, dout.data(),
                                     yv.data(), ada.data() + a.off_a, ld, B, N, C, accumulate, nullptr, 0);
        Outs o = both_schedules([&] {
            DX DO(dout), Y(yv), A(ada), DY(n), DG(dg0);  // DY left 0xFF: every element must be written
            DF SCR(adaln_backward_scratch_floats(B, N, C));
            gated_residual_backward(with_dy ? DY.p : nullptr, with_dgate ? DG.p + a.off_a : nullptr, DO.p, Y.p, A.p + a.off_a,
                                    ld, B, N, C, accumulate, no_scratch ? nullptr : SCR.p, 0);
            return Outs{{"dy", with_dy ? DY.get() : std::vector<float>()}, {"dgate", DG.get()}, {"dout", DO.get()}};
        });
        if (with_dy) {
            std::vector<double> E(n);
            for (size_t j = 0; j < n; j++) E[j] = 2 * U * fabs((double)rdy[j]);
            expect("dy", o[0].second, rdy, tol_x(rdy, E));
        }
        std::vector<double> Eg((size_t)B * ld, 0.0);
        if (with_dgate) {
            for (int b = 0; b < B; b++)
                for (int c = 0; c < C; c++) {
                    double s = accumulate ? fabs(dg0[(size_t)b * ld + a.off_a + c]) : 0.0;
                    for (int k = 0; k < N; k++) {
                        size_t j = ((size_t)b * N + k) * C + c;
                        s += fabs((double)dout[j] * yv[j]);
                    }
                    Eg[(size_t)b * ld + a.off_a + c] = 2 * U * (N + 4) * s;
                }
            expect("dgate", o[1].second, rdg, tol_cols(a, a.off_a, rdg, Eg));
        } else {
            expect_exact("dgate kept", o[1].second, dg0);
        }
        expect_exact("dout kept", o[2].second, dout);
    });
}

// ---------------------------------------------------------------------------------
// bias (llmc/kernels/bias.cuh). forward out = out0 + bias: B = |out0| + |bias|.
// backward dbias = dbias0 + sum_r dout: B = (N + 2) (|dbias0| + sum|dout|).
static void check_bias(int N, int OC, int backward, int no_scratch = 0) {
    std::string name = sz("%s[N=%d,OC=%d%s]", backward ? "bias_backward" : "bias_forward", N, OC, no_scratch ? ",no-scratch" : "");
    add(name, [=] {
        Rng r(name);
        size_t n = (size_t)N * OC;
        if (!backward) {
            auto out0 = r.vec(n, -2, 2), bias = r.vec(OC, -1, 1);
            auto ref = out0;
            cpu::bias_forward(ref.data(), bias.data(), N, OC, 0);
            Outs o = both_schedules([&] {
                DX O(out0), Bi(bias);
                bias_forward(O.p, Bi.p, N, OC, 0);
                return Outs{{"out", O.get()}};
            });
            std::vector<double> E(n);
            for (size_t j = 0; j < n; j++) E[j] = 2 * U * (fabs(out0[j]) + fabs(bias[j % OC]));
            expect("out", o[0].second, ref, tol_x(ref, E));
            return;
        }
        auto dout = r.vec(n, -1, 1), d0 = r.vec(OC, -1, 1);
        auto ref = d0;
        cpu::bias_backward(ref.data(), dout.data(), N, OC, nullptr, 0);
        Outs o = both_schedules([&] {
            DX DO(dout), D(d0); DF SCR(bias_backward_scratch_floats(N, OC));  // exactly the size asked for
            bias_backward(D.p, DO.p, N, OC, no_scratch ? nullptr : SCR.p, 0);
            return Outs{{"dbias", D.get()}};
        });
        std::vector<double> E(OC);
        for (int c = 0; c < OC; c++) {
            double s = fabs(d0[c]);
            for (int i = 0; i < N; i++) s += fabs(dout[(size_t)i * OC + c]);
            E[c] = 2 * U * (N + 2) * s;
        }
        expect("dbias", o[0].second, ref, tol_x(ref, E));
    });
}

// The loops that only wrap beyond 65535 blocks (rows of the elementwise kernels, samples
// of the column sums), with a small grid chosen here (as check_gridstride).
static void check_gridstride_adaln() {
    const Ada a = {5, 3, 40, 83, 3, 41};  // 15 rows, C > 32 threads: both loops wrap
    add("gated_residual_forward_kernel[grid-stride," + ada_sz(a) + ",grid=4x32]", [a] {
        Rng r("gs-gres");
        size_t n = (size_t)a.B * a.N * a.C;
        auto res = r.vec(n, -2, 2), yv = r.vec(n, -2, 2), ada = r.vec((size_t)a.B * a.ld, -1, 1);
        std::vector<float> ref(n);
        cpu::gated_residual_forward(ref.data(), res.data(), yv.data(), ada.data() + a.off_a, a.ld, a.B, a.N, a.C, 0);
        Outs o = both_schedules([&] {
            DX RS(res), Y(yv), A(ada), O(n);
            ::emu::launch("gated_residual_forward_kernel", __FILE__, __LINE__, dim3(4), dim3(32), 0, 0,
                          gated_residual_forward_kernel, O.p, RS.p, Y.p, A.p + a.off_a, a.ld, a.N, a.B * a.N, a.C);
            return Outs{{"out", O.get()}};
        });
        std::vector<double> E(n);
        for (size_t j = 0; j < n; j++) E[j] = 2 * U * 2 * (2.0 + 2.0);  // |res|, |y| < 2, |gate| < 1
        expect("out", o[0].second, ref, tol_x(ref, E));
    });
    add("gated_residual_backward_dy_kernel[grid-stride," + ada_sz(a) + ",grid=4x32]", [a] {
        Rng r("gs-gres-dy");
        size_t n = (size_t)a.B * a.N * a.C;
        auto dout = r.vec(n, -1, 1), yv = r.vec(n, -2, 2), ada = r.vec((size_t)a.B * a.ld, -1, 1);
        std::vector<float> ref(n);
        cpu::gated_residual_backward(ref.data(), nullptr, dout.data(), yv.data(), ada.data() + a.off_a, a.ld, a.B, a.N, a.C, 0, nullptr, 0);
        Outs o = both_schedules([&] {
            DX DO(dout), A(ada), DY(n);
            ::emu::launch("gated_residual_backward_dy_kernel", __FILE__, __LINE__, dim3(4), dim3(32), 0, 0,
                          gated_residual_backward_dy_kernel, DY.p, DO.p, A.p + a.off_a, a.ld, a.N, a.B * a.N, a.C);
            return Outs{{"dy", DY.get()}};
        });
        expect("dy", o[0].second, ref, tol_x(ref, std::vector<double>(n, 2 * U)));  // |dy| < 1
    });
    add("gated_residual_backward_dgate_kernel[grid-stride," + ada_sz(a) + ",grid=2x2]", [a] {
        Rng r("gs-gres-dgate");
        size_t n = (size_t)a.B * a.N * a.C;
        auto dout = r.vec(n, -1, 1), yv = r.vec(n, -2, 2), ada = r.vec((size_t)a.B * a.ld, -1, 1), dg0 = r.vec((size_t)a.B * a.ld, -1, 1);
        auto ref = dg0;
        cpu::gated_residual_backward(nullptr, ref.data() + a.off_a, dout.data(), yv.data(), ada.data() + a.off_a, a.ld, a.B, a.N, a.C, 1, nullptr, 0);
        Outs o = both_schedules([&] {
            DX DO(dout), Y(yv), DG(dg0);
            ::emu::launch("gated_residual_backward_dgate_kernel", __FILE__, __LINE__, dim3(2, 2), dim3(ADALN_COL_CH, ADALN_COL_SLICES),
                          0, 0, gated_residual_backward_dgate_kernel, DG.p + a.off_a, DO.p, Y.p, a.ld, a.B, a.N, a.C, 1);
            return Outs{{"dgate", DG.get()}};
        });
        std::vector<double> E(ref.size(), 2 * U * (a.N + 4) * (1.0 + 2.0 * a.N));
        expect("dgate", o[0].second, ref, tol_cols(a, a.off_a, ref, E));
    });
    add("layernorm_modulate_backward_colsum_kernel[grid-stride," + ada_sz(a) + ",grid=2x2]", [a] {
        Rng r("gs-lnmod-colsum");
        const int rows = a.B * a.N;
        size_t n = (size_t)rows * a.C;
        auto x = r.vec(n, -2, 2), dout = r.vec(n, -1, 1), ada = r.vec((size_t)a.B * a.ld, -1, 1);
        auto dsh0 = r.vec((size_t)a.B * a.ld, -1, 1), dsc0 = r.vec((size_t)a.B * a.ld, -1, 1);
        std::vector<float> y(n), mean(rows), rstd(rows), dinp(n, 0.0f);
        cpu::layernorm_modulate_forward(y.data(), mean.data(), rstd.data(), x.data(), ada.data() + a.off_a, ada.data() + a.off_b,
                                        a.ld, a.B, a.N, a.C, 1e-6f, 0);
        auto rsh = dsh0, rsc = dsc0;
        cpu::layernorm_modulate_backward(dinp.data(), rsh.data() + a.off_a, rsc.data() + a.off_b, dout.data(), x.data(), mean.data(),
                                         rstd.data(), ada.data() + a.off_b, a.ld, a.B, a.N, a.C, nullptr, 0);
        Outs o = both_schedules([&] {
            DX X(x), DO(dout), DSH(dsh0), DSC(dsc0); DF M(mean), RS(rstd);
            ::emu::launch("layernorm_modulate_backward_colsum_kernel", __FILE__, __LINE__, dim3(2, 2),
                          dim3(ADALN_COL_CH, ADALN_COL_SLICES), 0, 0, layernorm_modulate_backward_colsum_kernel, DSH.p + a.off_a,
                          DSC.p + a.off_b, DO.p, X.p, M.p, RS.p, a.ld, a.B, a.N, a.C);
            return Outs{{"dshift", DSH.get()}, {"dscale", DSC.get()}};
        });
        // |dout| < 1 and |xhat| <= sqrt(C) (a LayerNorm output): N terms each
        std::vector<double> Esh(rsh.size(), 2 * U * (a.N + 2) * a.N), Esc(rsc.size(), 2 * U * (a.N + 4) * a.N * sqrt((double)a.C));
        expect("dshift", o[0].second, rsh, tol_cols(a, a.off_a, rsh, Esh));
        expect("dscale", o[1].second, rsc, tol_cols(a, a.off_b, rsc, Esc));
    });
    add("bias_forward_kernel[grid-stride,N=9,OC=61,grid=2x32]", [] {
        Rng r("gs-bias");
        const int N = 9, OC = 61;
        size_t n = (size_t)N * OC;
        auto out0 = r.vec(n, -2, 2), bias = r.vec(OC, -1, 1);
        auto ref = out0;
        cpu::bias_forward(ref.data(), bias.data(), N, OC, 0);
        Outs o = both_schedules([&] {
            DX O(out0), Bi(bias);
            ::emu::launch("bias_forward_kernel", __FILE__, __LINE__, dim3(2), dim3(32), 0, 0, bias_forward_kernel, O.p, Bi.p, N, OC);
            return Outs{{"out", O.get()}};
        });
        expect("out", o[0].second, ref, tol_x(ref, std::vector<double>(n, 2 * U * 3.0)));
    });
}

// ---------------------------------------------------------------------------------
// the DiT's elementwise kernels: activations, patchify, timestep embedding, rectified flow

// gelu_tanh. u = k (x + c x^3) (5 roundings, no cancellation): B(u) = 6 |u|; t = tanh u
// (2 ulp <= 4 U |t|, plus the propagated error of u): B(t) = 4 |t| + sech^2(u) B(u).
// forward 0.5 x (1 + t): B = 0.5 |x| (B(t) + 4 (1 + |t|)) (1 + t cancels for x << 0: its
// absolute error is what counts). backward g (0.5 (1 + t) + 0.5 x (1 - t^2) du) with
// du = k (1 + 3 c x^2): B(du) = 6 |du|, B(1 - t^2) = 2 |t| B(t) + 2 t^2 + |1 - t^2|, then
// the products and the sum: each term's bound plus 3 roundings of its magnitude.
static void gelu_bounds(double x, double g, double* Bf, double* Bb) {
    const double k = 0.7978845608028654, c = 0.044715;
    double u = k * (x + c * x * x * x), t = tanh(u), sech2 = 1.0 - t * t;
    double Bt = 4 * fabs(t) + sech2 * 6 * fabs(u);
    *Bf = 0.5 * fabs(x) * (Bt + 4 * (1 + fabs(t)));
    double du = k * (1 + 3 * c * x * x), Bdu = 6 * fabs(du);
    double B1mt2 = 2 * fabs(t) * Bt + 2 * t * t + sech2;
    double term2 = 0.5 * fabs(x) * sech2 * fabs(du);
    double Bterm2 = 0.5 * fabs(x) * (B1mt2 * fabs(du) + sech2 * Bdu) + 3 * term2;
    double first = 0.5 * (1 + t), Bfirst = 0.5 * (Bt + 2 * (1 + fabs(t)));
    double d = first + 0.5 * x * sech2 * du;
    double Bd = Bfirst + Bterm2 + fabs(first) + term2;
    *Bb = fabs(g) * Bd + 2 * fabs(g * d);
}
// silu: x / (1 + exp(-x)): B = 8 |y|; backward as swiglu's dh1: B = 8 |g sig| (1 + 2 |x|)
static void silu_bounds(double x, double g, double* Bf, double* Bb) {
    double sig = 1.0 / (1.0 + exp(-x));
    *Bf = 8 * fabs(x * sig);
    *Bb = 8 * fabs(g * sig) * (1 + 2 * fabs(x));
}

// kind 0: gelu_tanh, 1: silu; backward with dinp == dout when alias
static void check_activation(int kind, size_t n, int backward, int alias) {
    const char* fn = kind == 0 ? (backward ? "gelu_tanh_backward" : "gelu_tanh_forward")
                               : (backward ? "silu_backward" : "silu_forward");
    std::string name = sz("%s[n=%zu%s]", fn, n, alias ? ",dinp=dout" : "");
    add(name, [=] {
        Rng r(name);
        auto x = r.vec(n, -9, 9), g = r.vec(n, -1, 1);
        for (size_t i = 0; i < n && i < 9; i++) x[i] = rx((float)i - 4.0f);  // x = -4 .. 4, including 0
        std::vector<float> ref(n);
        if (kind == 0 && !backward) cpu::gelu_tanh_forward(ref.data(), x.data(), n, 0);
        if (kind == 0 && backward) cpu::gelu_tanh_backward(ref.data(), g.data(), x.data(), n, 0);
        if (kind == 1 && !backward) cpu::silu_forward(ref.data(), x.data(), n, 0);
        if (kind == 1 && backward) cpu::silu_backward(ref.data(), g.data(), x.data(), n, 0);
        Outs o = both_schedules([&] {
            DX X(x), G(g), O(n);
            floatX* dst = alias ? G.p : O.p;
            if (kind == 0 && !backward) gelu_tanh_forward(dst, X.p, n, 0);
            if (kind == 0 && backward) gelu_tanh_backward(dst, G.p, X.p, n, 0);
            if (kind == 1 && !backward) silu_forward(dst, X.p, n, 0);
            if (kind == 1 && backward) silu_backward(dst, G.p, X.p, n, 0);
            return Outs{{"out", alias ? G.get() : O.get()}, {"inp", X.get()}};
        });
        std::vector<double> E(n);
        for (size_t i = 0; i < n; i++) {
            double Bf, Bb;
            if (kind == 0) gelu_bounds(x[i], g[i], &Bf, &Bb);
            else silu_bounds(x[i], g[i], &Bf, &Bb);
            E[i] = 2 * U * (backward ? Bb : Bf);
        }
        expect(backward ? "dinp" : "out", o[0].second, ref, tol_x(ref, E));
        expect_exact("inp kept", o[1].second, x);
    });
}

// n = 0: nothing is launched and nothing is written
static void check_activation_empty() {
    add("activations[n=0]", [] {
        Outs o = both_schedules([&] {
            DX X(std::vector<float>{0.5f}), O(std::vector<float>{7.0f});
            gelu_tanh_forward(O.p, X.p, 0, 0);
            gelu_tanh_backward(O.p, O.p, X.p, 0, 0);
            silu_forward(O.p, X.p, 0, 0);
            silu_backward(O.p, O.p, X.p, 0, 0);
            return Outs{{"out", O.get()}};
        });
        expect_exact("out untouched", o[0].second, {7.0f});
    });
}

// a call that must end in FAIL(): run it in a grandchild; it must exit with status 1 and
// print a message that contains `needle`
static void expect_fail(const char* what, const std::function<void()>& call, const char* needle) {
    fflush(stdout); fflush(stderr);
    int pfd[2];
    if (pipe(pfd) != 0) { problem("%s: pipe failed", what); return; }
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        call();
        _exit(0);
    }
    close(pfd[1]);
    std::string err;
    char buf[1024];
    ssize_t k;
    while ((k = read(pfd[0], buf, sizeof buf)) > 0) err.append(buf, (size_t)k);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    bool exited1 = WIFEXITED(st) && WEXITSTATUS(st) == 1;
    fprintf(stderr, "    %-12s exit %d, message: %s", what, WIFEXITED(st) ? WEXITSTATUS(st) : -1, err.c_str());
    if (!exited1 || err.find(needle) == std::string::npos)
        problem("%s: expected FAIL() with '%s', got exit status %d and '%s'", what, needle, WIFEXITED(st) ? WEXITSTATUS(st) : -1,
                err.c_str());
}

// patchify / unpatchify: copies, so exact. The twin is checked against the definition
// itself (DESIGN 9.1, written out here independently), the launchers against the twin,
// and unpatchify(patchify(x)) must give x back bit for bit.
struct Patch { int B, C, Fr, Hi, Wi, pt, ph, pw; };
static std::vector<float> patchify_by_definition(const Patch& s, const std::vector<float>& x) {
    int Tn = s.Fr / s.pt, Hn = s.Hi / s.ph, Wn = s.Wi / s.pw;
    size_t N = (size_t)Tn * Hn * Wn, P = (size_t)s.C * s.pt * s.ph * s.pw;
    std::vector<float> out((size_t)s.B * N * P);
    for (int b = 0; b < s.B; b++)
        for (size_t n = 0; n < N; n++)
            for (size_t p = 0; p < P; p++) {
                int ft = (int)(n / ((size_t)Hn * Wn)), hy = (int)(n / Wn % Hn), wx = (int)(n % Wn);
                int dx = (int)(p % s.pw), dy = (int)(p / s.pw % s.ph), dt = (int)(p / ((size_t)s.pw * s.ph) % s.pt);
                int c = (int)(p / ((size_t)s.pw * s.ph * s.pt));
                size_t xi = ((((size_t)b * s.C + c) * s.Fr + ft * s.pt + dt) * s.Hi + hy * s.ph + dy) * s.Wi + wx * s.pw + dx;
                out[((size_t)b * N + n) * P + p] = x[xi];
            }
    return out;
}
static void check_patchify(const Patch& s) {
    std::string base = sz("B=%d,C=%d,Fr=%d,Hi=%d,Wi=%d,pt=%d,ph=%d,pw=%d", s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw);
    size_t nx = (size_t)s.B * s.C * s.Fr * s.Hi * s.Wi;
    for (int inverse = 0; inverse <= 1; inverse++) {
        std::string name = std::string(inverse ? "unpatchify[" : "patchify[") + base + "]";
        add(name, [=] {
            Rng r(name);
            auto x = r.vec(nx, -1, 1);
            auto tokens = patchify_by_definition(s, x);
            std::vector<float> ref(nx);
            if (!inverse) {
                cpu::patchify(ref.data(), x.data(), s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
                expect_exact("twin = definition", ref, tokens);
            } else {
                cpu::unpatchify(ref.data(), tokens.data(), s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
                expect_exact("twin = inverse of the definition", ref, x);
            }
            Outs o = both_schedules([&] {
                DX X(x), T(tokens), O(nx);
                if (!inverse) patchify(O.p, X.p, s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
                else unpatchify(O.p, T.p, s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
                return Outs{{"out", O.get()}, {"inp", inverse ? T.get() : X.get()}};
            });
            expect_exact(inverse ? "x" : "tokens", o[0].second, ref);
            expect_exact("inp kept", o[1].second, inverse ? tokens : x);
        });
    }
    std::string name = "patchify_roundtrip[" + base + "]";
    add(name, [=] {
        Rng r(name);
        auto x = r.vec(nx, -3, 3);
        Outs o = both_schedules([&] {
            DX X(x), T(nx), Y(nx);  // T and Y start as NaN: every element must be written
            patchify(T.p, X.p, s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
            unpatchify(Y.p, T.p, s.B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
            return Outs{{"x", Y.get()}};
        });
        expect_exact("x back", o[0].second, x);
    });
}
static void check_patchify_bad_shapes() {
    add("patchify[bad patch sizes: FAIL()]", [] {
        DX X(4 * 6 * 10), T(4 * 6 * 10);
        expect_fail("ph=4|Hi=6", [&] { patchify(T.p, X.p, 1, 1, 4, 6, 10, 2, 4, 5, 0); }, "does not divide the clip");
        expect_fail("pt=3|Fr=4", [&] { unpatchify(X.p, T.p, 1, 1, 4, 6, 10, 3, 3, 5, 0); }, "does not divide the clip");
        expect_fail("pw=0", [&] { patchify(T.p, X.p, 1, 1, 4, 6, 10, 2, 3, 0, 0); }, "does not divide the clip");
        std::vector<float> hx(240), ht(240);
        expect_fail("twin pw=4|Wi=10", [&] { cpu::patchify(ht.data(), hx.data(), 1, 1, 4, 6, 10, 2, 3, 4, 0); }, "does not divide the clip");
        expect_fail("twin unpatchify", [&] { cpu::unpatchify(hx.data(), ht.data(), 1, 1, 4, 6, 10, 2, 5, 5, 0); }, "does not divide the clip");
    });
}

// timestep_embedding: double angles a = 1000 t f_i (|a| <= 1000), cos and sin in double
// (a few ulp of the angle: E = 2^-53 * 16 (|a| + 1) absolute), each rounded to floatX
// once. Two such values within E of each other round to floatX values at most one ulp
// apart (ulp <= 2^-23 |x| in fp32, 2^-7 |x| in bf16): tol = ulp + 2 E. The twin is
// also checked against the definition in long double, to the same tolerance.
static double ulp_x() { return R > 0 ? 2 * R : ldexp(1.0, -23); }  // one ulp of floatX, relative
static void check_timestep(int B, int dim) {
    std::string name = sz("timestep_embedding[B=%d,dim=%d]", B, dim);
    add(name, [=] {
        Rng r(name);
        std::vector<float> t(B);
        for (int b = 0; b < B; b++) t[b] = b == 0 ? 1.0f : b == 1 ? 0.0f : r.uni(0, 1);
        int half = dim / 2;
        size_t n = (size_t)B * dim;
        std::vector<float> ref(n), def(n);
        std::vector<double> E2(n);
        for (int b = 0; b < B; b++)
            for (int i = 0; i < half; i++) {
                long double a = 1000.0L * t[b] * expl(-logl(10000.0L) * i / half);
                def[(size_t)b * dim + i] = (float)cosl(a);
                def[(size_t)b * dim + half + i] = (float)sinl(a);
                E2[(size_t)b * dim + i] = E2[(size_t)b * dim + half + i] = 2 * ldexp(16.0, -53) * (double)(fabsl(a) + 1);
            }
        cpu::timestep_embedding(ref.data(), t.data(), B, dim, 0);
        std::vector<double> tol_def(n), tol(n);
        for (size_t i = 0; i < n; i++) {
            tol_def[i] = ldexp(1.0, -23) * fabs((double)def[i]) + E2[i];  // the twin is fp32
            tol[i] = ulp_x() * fabs((double)ref[i]) + E2[i];
        }
        expect("twin = definition", ref, def, tol_def);
        Outs o = both_schedules([&] {
            DF T(t); DX O(n);
            timestep_embedding(O.p, T.p, B, dim, 0);
            return Outs{{"out", O.get()}};
        });
        expect("out", o[0].second, ref, tol);
    });
}
static void check_timestep_bad_dim() {
    add("timestep_embedding[odd dim: FAIL()]", [] {
        DF T(std::vector<float>{0.5f}); DX O(8);
        expect_fail("dim=7", [&] { timestep_embedding(O.p, T.p, 1, 7, 0); }, "must be positive and even");
        std::vector<float> t = {0.5f}, out(8);
        expect_fail("twin dim=7", [&] { cpu::timestep_embedding(out.data(), t.data(), 1, 7, 0); }, "must be positive and even");
    });
}

// flow_prepare: xt = (1 - t) x0 + t e: B = 8 (|(1 - t) x0| + |t e|); v = e - x0: B = 8 |v|.
// alias: xt written over x0 and v over noise.
static void check_flow_prepare(int B, size_t per_sample, int alias) {
    std::string name = sz("flow_prepare[B=%d,per_sample=%zu%s]", B, per_sample, alias ? ",xt=x0,v=noise" : "");
    add(name, [=] {
        Rng r(name);
        size_t n = (size_t)B * per_sample;
        auto x0 = r.vec(n, -1, 1), e = r.vec(n, -3, 3);
        std::vector<float> t(B);
        for (int b = 0; b < B; b++) t[b] = b == 0 ? 1.0f : b == 1 ? 0.0f : r.uni(0, 1);  // fp32 t: not rounded to floatX
        std::vector<float> rxt(n), rv(n);
        cpu::flow_prepare(rxt.data(), rv.data(), x0.data(), e.data(), t.data(), B, per_sample, 0);
        Outs o = both_schedules([&] {
            DX X0(x0), N(e), XT(n), V(n); DF T(t);
            floatX* xt = alias ? X0.p : XT.p;
            floatX* v = alias ? N.p : V.p;
            flow_prepare(xt, v, X0.p, N.p, T.p, B, per_sample, 0);
            return Outs{{"xt", alias ? X0.get() : XT.get()}, {"v", alias ? N.get() : V.get()}};
        });
        std::vector<double> Ext(n), Ev(n);
        for (size_t i = 0; i < n; i++) {
            double tb = t[i / per_sample];
            Ext[i] = 2 * U * 8 * (fabs((1 - tb) * x0[i]) + fabs(tb * e[i]));
            Ev[i] = 2 * U * 8 * fabs((double)rv[i]);
        }
        expect("xt", o[0].second, rxt, tol_x(rxt, Ext));
        expect("v", o[1].second, rv, tol_x(rv, Ev));
    });
}

// mse_forward_backward: sq[b] = sum of d^2 over per_sample values in fp32, the kernel and
// the twin in different fixed orders: B = (per_sample + 80) sum d^2 (a sum of positive
// terms; d = pred - target is computed the same way on both sides). dpred = 2 dscale d:
// B = 4 |dpred|. grad: 0 none (dpred = NULL), 1 into a buffer of its own, 2 over pred.
static void check_mse(int B, size_t per_sample, int grad) {
    std::string name = sz("mse_forward_backward[B=%d,per_sample=%zu,%s]", B, per_sample,
                          grad == 0 ? "no-dpred" : grad == 1 ? "dpred" : "dpred=pred");
    add(name, [=] {
        Rng r(name);
        size_t n = (size_t)B * per_sample;
        auto pred = r.vec(n, -2, 2), target = r.vec(n, -2, 2);
        float dscale = 1.0f / (float)(n ? n : 1);
        std::vector<float> rsq(B), rdp(n);
        cpu::mse_forward_backward(rsq.data(), grad ? rdp.data() : nullptr, pred.data(), target.data(), B, per_sample, dscale, 0);
        Outs o = both_schedules([&] {
            DX P(pred), T(target), D(n ? n : 1); DF S(B);
            floatX* dp = grad == 0 ? nullptr : grad == 1 ? D.p : P.p;
            mse_forward_backward(S.p, dp, P.p, T.p, B, per_sample, dscale, 0);
            std::vector<float> dpg = grad == 1 ? D.get() : P.get();
            dpg.resize(n);
            return Outs{{"sq", S.get()}, {"dpred", dpg}};
        });
        std::vector<double> Es(B), Ed(n);
        for (int b = 0; b < B; b++) {
            double s = 0;
            for (size_t j = 0; j < per_sample; j++) { double d = (double)pred[b * per_sample + j] - target[b * per_sample + j]; s += d * d; }
            Es[b] = 2 * U * (per_sample + 80) * s;
        }
        for (size_t i = 0; i < n; i++) Ed[i] = 2 * U * 4 * fabs((double)rdp[i]);
        expect("sq", o[0].second, rsq, tol_f(Es));
        if (grad) expect("dpred", o[1].second, rdp, tol_x(rdp, Ed));
        else expect_exact("pred kept", o[1].second, pred);
    });
}
// The bound above is worst-case and grows with per_sample: it would not see one small
// term missing from a long sum. With pred and target multiples of 1/8 in [-1, 1], every
// d^2 is a multiple of 1/64 and at most 4 (256/64), so with per_sample <= 2^16 every
// partial sum is a multiple of 1/64 below 2^18, exact in fp32 whatever the order: sq
// must equal the sum exactly.
static void check_mse_exact(int B, size_t per_sample) {
    std::string name = sz("mse_forward_backward[B=%d,per_sample=%zu,exact-sums]", B, per_sample);
    add(name, [=] {
        Rng r(name);
        size_t n = (size_t)B * per_sample;
        std::vector<float> pred(n), target(n), exact(B, 0.0f);
        for (size_t i = 0; i < n; i++) { pred[i] = (r.below(17) - 8) / 8.0f; target[i] = (r.below(17) - 8) / 8.0f; }
        for (int b = 0; b < B; b++) {
            double s = 0;
            for (size_t j = 0; j < per_sample; j++) { double d = (double)pred[b * per_sample + j] - target[b * per_sample + j]; s += d * d; }
            exact[b] = (float)s;
        }
        std::vector<float> rsq(B);
        cpu::mse_forward_backward(rsq.data(), nullptr, pred.data(), target.data(), B, per_sample, 1.0f, 0);
        expect_exact("twin sq", rsq, exact);
        Outs o = both_schedules([&] {
            DX P(pred), T(target); DF S(B);
            mse_forward_backward(S.p, nullptr, P.p, T.p, B, per_sample, 1.0f, 0);
            return Outs{{"sq", S.get()}};
        });
        expect_exact("sq", o[0].second, exact);
    });
}

// the grid-stride loops of the DiT's elementwise kernels, with a small grid (see
// check_gridstride below)
static void check_dit_gridstride() {
    add("gelu_tanh_forward_kernel+silu_backward_kernel[grid-stride,n=1001,grid=3x64]", [] {
        Rng r("gs-act");
        size_t n = 1001;
        auto x = r.vec(n, -9, 9), g = r.vec(n, -1, 1);
        std::vector<float> rg(n), rs(n);
        cpu::gelu_tanh_forward(rg.data(), x.data(), n, 0);
        cpu::silu_backward(rs.data(), g.data(), x.data(), n, 0);
        Outs o = both_schedules([&] {
            DX X(x), G(g), O(n), D(n);
            ::emu::launch("gelu_tanh_forward_kernel", __FILE__, __LINE__, dim3(3), dim3(64), 0, 0, gelu_tanh_forward_kernel, O.p, X.p, n);
            ::emu::launch("silu_backward_kernel", __FILE__, __LINE__, dim3(3), dim3(64), 0, 0, silu_backward_kernel, D.p, G.p, X.p, n);
            return Outs{{"gelu", O.get()}, {"dsilu", D.get()}};
        });
        std::vector<double> Eg(n), Es(n);
        for (size_t i = 0; i < n; i++) {
            double Bf, Bb, Sf, Sb;
            gelu_bounds(x[i], g[i], &Bf, &Bb);
            silu_bounds(x[i], g[i], &Sf, &Sb);
            Eg[i] = 2 * U * Bf; Es[i] = 2 * U * Sb;
        }
        expect("gelu", o[0].second, rg, tol_x(rg, Eg));
        expect("dsilu", o[1].second, rs, tol_x(rs, Es));
    });
    add("patchify_kernel+unpatchify_kernel[grid-stride,B=2,C=3,Fr=4,Hi=6,Wi=10,grid=5x32]", [] {
        Rng r("gs-patch");
        Patch s = {2, 3, 4, 6, 10, 2, 3, 5};
        size_t nx = (size_t)s.B * s.C * s.Fr * s.Hi * s.Wi;
        auto x = r.vec(nx, -1, 1);
        auto tokens = patchify_by_definition(s, x);
        PatchShape sh = {s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw};
        Outs o = both_schedules([&] {
            DX X(x), T(nx), Y(nx);
            ::emu::launch("patchify_kernel", __FILE__, __LINE__, dim3(5), dim3(32), 0, 0, patchify_kernel, T.p, X.p, nx, sh);
            ::emu::launch("unpatchify_kernel", __FILE__, __LINE__, dim3(5), dim3(32), 0, 0, unpatchify_kernel, Y.p, T.p, nx, sh);
            return Outs{{"tokens", T.get()}, {"x", Y.get()}};
        });
        expect_exact("tokens", o[0].second, tokens);
        expect_exact("x back", o[1].second, x);
    });
    add("timestep_embedding_kernel+flow_prepare_kernel[grid-stride,grid=3x32]", [] {
        Rng r("gs-flow");
        int B = 3, dim = 64;
        size_t per = 333, n = (size_t)B * per;
        std::vector<float> t = {0.25f, 1.0f, 0.625f};
        auto x0 = r.vec(n, -1, 1), e = r.vec(n, -3, 3);
        std::vector<float> remb((size_t)B * dim), rxt(n), rv(n);
        cpu::timestep_embedding(remb.data(), t.data(), B, dim, 0);
        cpu::flow_prepare(rxt.data(), rv.data(), x0.data(), e.data(), t.data(), B, per, 0);
        Outs o = both_schedules([&] {
            DF T(t); DX EMB((size_t)B * dim), X0(x0), N(e), XT(n), V(n);
            ::emu::launch("timestep_embedding_kernel", __FILE__, __LINE__, dim3(3), dim3(32), 0, 0, timestep_embedding_kernel, EMB.p, T.p, B,
                          dim / 2);
            ::emu::launch("flow_prepare_kernel", __FILE__, __LINE__, dim3(3), dim3(32), 0, 0, flow_prepare_kernel, XT.p, V.p, X0.p, N.p, T.p,
                          per, n);
            return Outs{{"emb", EMB.get()}, {"xt", XT.get()}, {"v", V.get()}};
        });
        std::vector<double> Te(remb.size()), Ext(n), Ev(n);
        for (size_t i = 0; i < Te.size(); i++) Te[i] = ulp_x() * fabs((double)remb[i]) + 2 * ldexp(16.0, -53) * 1001;
        for (size_t i = 0; i < n; i++) {
            double tb = t[i / per];
            Ext[i] = 2 * U * 8 * (fabs((1 - tb) * x0[i]) + fabs(tb * e[i]));
            Ev[i] = 2 * U * 8 * fabs((double)rv[i]);
        }
        expect("emb", o[0].second, remb, Te);
        expect("xt", o[1].second, rxt, tol_x(rxt, Ext));
        expect("v", o[2].second, rv, tol_x(rv, Ev));
    });
}

static void add_dit_elementwise_checks() {
    for (size_t n : {(size_t)1, (size_t)427, (size_t)1001, (size_t)4099})
        for (int kind = 0; kind <= 1; kind++) {
            check_activation(kind, n, 0, 0);
            check_activation(kind, n, 1, 0);
            check_activation(kind, n, 1, 1);
        }
    check_activation_empty();
    for (const Patch& p : std::vector<Patch>{{2, 3, 4, 6, 10, 2, 3, 5},    // odd sizes, every patch side > 1
                                             {2, 3, 4, 6, 10, 1, 1, 1},    // one pixel per token
                                             {1, 4, 5, 7, 9, 5, 7, 3},     // one token per column strip
                                             {2, 4, 3, 8, 12, 1, 2, 2},    // the DiT's usual 1 x 2 x 2 patches
                                             {1, 16, 2, 4, 4, 2, 2, 2}})   // P = 128
        check_patchify(p);
    check_patchify_bad_shapes();
    check_timestep(5, 256);
    check_timestep(3, 6);
    check_timestep(1, 2);
    check_timestep_bad_dim();
    for (int alias = 0; alias <= 1; alias++) {
        check_flow_prepare(3, 1001, alias);
        check_flow_prepare(2, 1, alias);
    }
    check_flow_prepare(1, 4099, 0);
    for (int grad = 0; grad <= 2; grad++) {
        check_mse(3, 1001, grad);
        check_mse(2, 70001, grad);  // > 512 threads x 128: long strided partial sums
    }
    check_mse(1, 1, 1);
    check_mse(4, 0, 1);             // empty samples: sq = 0
    check_mse(5, 33, 2);
    check_mse_exact(3, 30001);
    check_mse_exact(2, 777);
    check_dit_gridstride();
}

// ---------------------------------------------------------------------------------
// grad_accumulate (llmc/kernels/grad_accum.cuh): a chain of micro-steps, last == 0 each time
// except, when with_last, the final call. Elementwise fp32 additions of the same values
// in the same order as the twin, so exact: acc equal bit for bit in both builds, the
// stored gradient equal to the twin's fp32 value rounded once (itself in fp32; in bf16
// this is stricter than the bf16 bound). Each last == 0 call must leave grad all zero,
// a last == 1 call acc all zero; elements around the slice must keep their values.
// acc_off and grad_off are the slice starts (elements): equal, or differing by a
// multiple of the vector width, take the vector path after a scalar head; otherwise
// the scalar fallback.
static void check_grad_accum(size_t n, int acc_off, int grad_off, int calls, int with_last) {
    std::string name = sz("grad_accumulate[n=%zu,acc+%d,grad+%d,calls=%d,%s]", n, acc_off, grad_off, calls,
                          with_last ? "last" : "no-last");
    add(name, [=] {
        Rng r(name);
        const size_t pad = 9;  // values after the slice that must stay as they were
        std::vector<float> acc_all(n + acc_off + pad);
        for (auto& x : acc_all) x = r.uni(-4, 4);  // fp32 state, not floatX-rounded
        std::vector<std::vector<float>> grads;
        for (int k = 0; k < calls; k++) grads.push_back(r.vec(n + grad_off + pad, -1, 1));
        std::vector<float> racc = acc_all, rgrad;
        for (int k = 0; k < calls; k++) {
            rgrad = grads[k];
            cpu::grad_accumulate(racc.data() + acc_off, rgrad.data() + grad_off, n, with_last && k == calls - 1, 0);
        }
        Outs o = both_schedules([&] {
            DF A(acc_all); DX G(grads[0].size());
            Outs out;
            for (int k = 0; k < calls; k++) {
                dev_upload_floats(G.p, grads[k].data(), G.n);
                int last = with_last && k == calls - 1;
                grad_accumulate(A.p + acc_off, G.p + grad_off, n, last, 0);
                if (!last) out.push_back({sz("grad after call %d", k), G.get()});
            }
            out.push_back({"acc", A.get()});
            out.push_back({"grad", G.get()});
            return out;
        });
        // the twin's zeroing is part of its semantics: the check compares with it, and
        // with the definition (grad 0 after last == 0, acc 0 after last == 1)
        for (size_t j = 0; j + 2 < o.size(); j++) {
            std::vector<float> want = grads[j];
            for (size_t i = 0; i < n; i++) want[grad_off + i] = 0.0f;
            expect_exact(o[j].first.c_str(), o[j].second, want);
        }
        expect_exact("acc", o[o.size() - 2].second, racc);
        expect_exact("grad", o.back().second, round_x(rgrad));
        for (size_t i = 0; i < n; i++) {  // the twin itself, against the definition
            float s = acc_all[acc_off + i];
            for (int k = 0; k < calls; k++) s = s + grads[k][grad_off + i];
            float want_acc = with_last ? 0.0f : s, want_grad = with_last ? s : 0.0f;
            if (racc[acc_off + i] != want_acc || rgrad[grad_off + i] != want_grad) {
                problem("twin: element %zu: acc %.9g grad %.9g, expected %.9g %.9g", i, racc[acc_off + i],
                        rgrad[grad_off + i], want_acc, want_grad);
                break;
            }
        }
    });
}

// sum_accumulate (llmc/kernels/reduce.cuh): acc[0] += sum x. The kernel and the twin promise
// the same additions in the same order: equal bit for bit. The twin is checked against
// a long-double sum at the fp32 bound of one float rounding of the double total plus
// the float addition: B = 8 (|acc0| + sum |x|), as for global_norm_squared.
// cancel: two pairs +-2^45..2^60 at random places among values in (-3, 7), so that the
// double sum keeps, rounds or absorbs the small terms and partials depending on the
// order of the additions: a kernel whose order differs from the documented one, even
// only inside the double partials, differs from the twin.
static void check_sum_accumulate(size_t n, int cancel) {
    std::string name = sz("sum_accumulate[n=%zu%s]", n, cancel ? ",cancel" : "");
    add(name, [=] {
        Rng r(name);
        std::vector<float> x(n);
        for (auto& v : x) v = r.uni(-3, 7);  // per-token losses are positive; some sign changes anyway
        for (int k = 0; cancel && k < 2; k++) {
            float big = ldexpf(1.0f, 45 + r.below(16));
            x[r.below((int)n)] = big;
            x[r.below((int)n)] = -big;
        }
        const float acc0 = 1.5f;
        std::vector<float> ref = {acc0};
        cpu::sum_accumulate(ref.data(), x.data(), n, 0);
        Outs o = both_schedules([&] {
            DF X(n ? x : std::vector<float>{0.0f}), A(std::vector<float>{acc0});
            sum_accumulate(A.p, X.p, n, 0);
            return Outs{{"acc", A.get()}};
        });
        expect_exact("acc", o[0].second, ref);
        long double s = acc0, sa = fabsf(acc0);
        for (float v : x) { s += v; sa += fabsf(v); }
        expect("twin vs long double", ref, {(float)s}, {2 * U * 8 * (double)sa});
        if (n == 0 && memcmp(&ref[0], &acc0, sizeof(float)) != 0) problem("n = 0 changed acc: %.9g", ref[0]);
    });
}

// the two grad_accumulate paths with a small grid (3 x 32 threads), so that the
// grid-stride loops wrap: 16-byte vectors from offset 0 with a scalar tail, and all
// scalar (the fallback of unaligned slices); the launch of the real kernel, only the
// grid and the split are chosen here
static void check_grad_accum_gridstride() {
    for (int vec = 0; vec <= 1; vec++)
        for (int last = 0; last <= 1; last++) {
            std::string name = sz("grad_accumulate_kernel[grid-stride,n=1001,%s,last=%d,grid=3x32]", vec ? "vector" : "scalar", last);
            add(name, [=] {
                Rng r(name);
                size_t n = 1001, V = GRAD_ACCUM_VEC, nvec = vec ? n / V : 0, head = vec ? 0 : n;
                std::vector<float> a(n);
                for (auto& x : a) x = r.uni(-4, 4);
                auto g = r.vec(n, -1, 1);
                auto ra = a, rg = g;
                cpu::grad_accumulate(ra.data(), rg.data(), n, last, 0);
                Outs o = both_schedules([&] {
                    DF A(a); DX G(g);
                    ::emu::launch("grad_accumulate_kernel", __FILE__, __LINE__, dim3(3), dim3(32), 0, 0, grad_accumulate_kernel,
                                  A.p, G.p, n, head, nvec, last);
                    return Outs{{"acc", A.get()}, {"grad", G.get()}};
                });
                expect_exact("acc", o[0].second, ra);
                expect_exact("grad", o[1].second, round_x(rg));
            });
        }
}

// grad_add (llmc/kernels/grad_accum.cuh): dst += src, rounded to floatX, over a slice of
// a larger buffer (offsets that break any alignment), with a small grid so the
// grid-stride loop wraps. One fp32 addition of two floatX values per element, as in the
// twin (an fp32 twin here, so the kernel's result is its sum rounded once): equal bit for
// bit; the elements around the slice keep their values.
static void check_grad_add(size_t n, int off, int small_grid) {
    std::string name = sz("grad_add[n=%zu,+%d%s]", n, off, small_grid ? ",grid=3x32" : "");
    add(name, [=] {
        Rng r(name);
        const size_t pad = 5;
        std::vector<float> d = round_x(r.vec(n + off + pad, -2, 2)), src = round_x(r.vec(n + off + pad, -1, 1));
        std::vector<float> want = d;
        cpu::grad_add(want.data() + off, src.data() + off, n, 0);
        Outs o = both_schedules([&] {
            DX D(d), S(src);
            if (small_grid)
                ::emu::launch("grad_add_kernel", __FILE__, __LINE__, dim3(3), dim3(32), 0, 0, grad_add_kernel, D.p + off,
                              (const floatX*)S.p + off, n);
            else grad_add(D.p + off, S.p + off, n, 0);
            return Outs{{"dst", D.get()}};
        });
        expect_exact("dst", o[0].second, round_x(want));
        for (size_t i = 0; i < n; i++)  // the twin itself, against the definition
            if (want[off + i] != d[off + i] + src[off + i]) { problem("twin: element %zu", i); break; }
    });
}

static void add_step_checks() {
    for (size_t n : {(size_t)0, (size_t)1, (size_t)7, (size_t)1001, (size_t)4099})
        for (auto off : std::vector<std::pair<int, int>>{{0, 0}, {1, 1}, {3, 3}, {0, 1}, {5, 2}, {4, 12}}) {
            check_grad_accum(n, off.first, off.second, 1, 1);
            if (n == 1001 || n == 7) {
                check_grad_accum(n, off.first, off.second, 4, 1);  // three micro-steps into acc, then the last
                check_grad_accum(n, off.first, off.second, 2, 0);  // the state between micro-steps
            }
        }
    check_grad_accum_gridstride();
    for (size_t n : {(size_t)0, (size_t)1, (size_t)1001}) for (int off : {0, 3}) check_grad_add(n, off, 0);
    check_grad_add(1001, 1, 1);
    for (size_t n : {(size_t)0, (size_t)1, (size_t)1000, ((size_t)1 << 20) + 3}) check_sum_accumulate(n, 0);
    for (size_t n : {(size_t)1000, ((size_t)1 << 20) + 3}) check_sum_accumulate(n, 1);
}

// ---------------------------------------------------------------------------------
// context parallelism's kernels (llmc/parallel/context_parallel.h): attention_merge and
// float_accumulate (llmc/kernels/attention_merge.cuh), copy_2d (llmc/kernels/copy2d.cuh)

// got vs ref where ref may hold -inf (an lse row that saw no key): those entries must be
// -inf in got too, exactly; the others as expect()
static void expect_with_inf(const char* what, std::vector<float> got, std::vector<float> ref, const std::vector<double>& tol) {
    size_t bad = 0, first = 0, infs = 0;
    for (size_t i = 0; i < ref.size() && i < got.size(); i++)
        if (std::isinf(ref[i]) || std::isinf(got[i])) {
            infs++;
            if (!(got[i] == ref[i])) { if (!bad) first = i; bad++; }
            got[i] = ref[i] = 0.0f;
        }
    if (bad)
        problem("%s: %zu of %zu infinite entries differ; first at %zu: got %.9g, expected %.9g", what, bad, infs, first,
                got[first], ref[first]);
    fprintf(stderr, "    %-12s %zu entries -inf in the twin%s\n", what, infs, bad ? "  <-- FAIL" : "");
    expect(what, got, ref, tol);
}

// attention_merge: `steps` merges in a chain, as the ring does them: the first with
// first = 1 (from_first; the running state is then NaN poison, which it must not read),
// or all with first = 0 onto a random running state (o_acc fp32, lse_acc); out (floatX)
// written at the last merge when with_out, else NULL. o_p is floatX, lse_p fp32, both
// random; lse values spread over [-4, 12], plus rows where one side is ~100 above the
// other (its weight exp(-100) underflows in fp32). infs: -inf rows on either side (a
// block that saw no key: lse_p -inf keeps the running state, a running lse at -inf is
// replaced by the partial, both -inf stays empty with lse -inf), in every step.
// Bound of one evaluation, step by step in units of U (E = 2 U B), with B(l_acc) and
// B(o_acc) carried from the step before (the partial's are 0: exact inputs):
//   m = max(l_a, l_b): B(l_a); d = l - m: B(l_a) + |d|; e = exp(d): e (B(d) + 2)
//   s = e_a + e_b: B(e_a) + B(e_b) + s;  l' = m + log s: B(l_a) + B(s)/s + 2 |log s| + |l'|
//   w = exp(l - l'): w (B(l) + B(l') + |l - l'| + 2)
//   o' = w_a o + w_b p: w_a B(o) + |o| B(w_a) + |p| B(w_b) + 2 (|w_a o| + |w_b p|)
// first = 1 and rows with both lse -inf are copies: B = 0, exact. lse is fp32 (R = 0);
// out is o_acc rounded once to floatX (tol_x).
struct MergeShape { int B, T, H, hd; };
static void check_attention_merge(const MergeShape& m, int steps, int from_first, int with_out, int infs) {
    std::string name = sz("attention_merge[B=%d,T=%d,H=%d,hd=%d,steps=%d,%s,%s%s]", m.B, m.T, m.H, m.hd, steps,
                          from_first ? "first" : "onto-running", with_out ? "out" : "out=NULL", infs ? ",-inf" : "");
    add(name, [=] {
        Rng r(name);
        const int B = m.B, T = m.T, H = m.H, hd = m.hd;
        const size_t rows = (size_t)B * T * H, n = rows * hd;
        std::vector<float> o0(n), l0(rows);
        for (auto& x : o0) x = from_first ? NAN : r.uni(-2, 2);  // fp32 running state (not floatX-rounded)
        for (auto& x : l0) x = from_first ? NAN : r.uni(-4, 12);
        std::vector<std::vector<float>> op, lp;
        for (int k = 0; k < steps; k++) {
            op.push_back(r.vec(n, -2, 2));
            std::vector<float> l(rows);
            for (auto& x : l) x = r.uni(-4, 12);
            for (size_t i = 6; i < rows; i += 13) l[i] = 100.0f + r.uni(0, 8);   // far above the running lse
            for (size_t i = 9; i < rows; i += 13) l[i] = -100.0f - r.uni(0, 8);  // far below
            if (infs)
                for (size_t i = 0; i < rows; i++)
                    if (i % 7 == (size_t)(3 + k) % 7 || i % 11 == 4) l[i] = -INFINITY;
            lp.push_back(l);
        }
        if (infs && !from_first)
            for (size_t i = 0; i < rows; i++)
                if (i % 5 == 2 || i % 11 == 4) l0[i] = -INFINITY;  // i % 11 == 4: both sides, every step
        // the twin, step by step, and the bound
        std::vector<float> ro = o0, rl = l0, rout(n, NAN);
        std::vector<double> Bo(n, 0.0), Bl(rows, 0.0);
        auto ex = [](double x, double Bx, double* Be) { double e = exp(x); *Be = e == 0 ? 0 : e * (Bx + 2); return e; };
        for (int k = 0; k < steps; k++) {
            int first = from_first && k == 0;
            for (int b = 0; b < B; b++)
                for (int t = 0; t < T; t++)
                    for (int h = 0; h < H; h++) {
                        size_t row = ((size_t)b * T + t) * H + h, li = ((size_t)b * H + h) * T + t;
                        if (first) { Bl[li] = 0; for (int d = 0; d < hd; d++) Bo[row * hd + d] = 0; continue; }
                        double la = rl[li], lb = lp[k][li], Bla = Bl[li], mx = fmax(la, lb);
                        if (mx == -INFINITY) continue;  // both empty: o_acc and lse_acc stay
                        double Bea, Beb, Bwa, Bwb;
                        double ea = ex(la - mx, Bla + fabs(la - mx), &Bea), eb = ex(lb - mx, Bla + fabs(lb - mx), &Beb);
                        double s = ea + eb, Bs = Bea + Beb + s, ln = mx + log(s);
                        double Bln = Bla + Bs / s + 2 * fabs(log(s)) + fabs(ln);
                        double wa = ex(la - ln, Bla + Bln + fabs(la - ln), &Bwa), wb = ex(lb - ln, Bln + fabs(lb - ln), &Bwb);
                        Bl[li] = Bln;
                        for (int d = 0; d < hd; d++) {
                            size_t i = row * hd + d;
                            double o = ro[i], p = op[k][i];
                            Bo[i] = wa * Bo[i] + fabs(o) * Bwa + fabs(p) * Bwb + 2 * (fabs(wa * o) + fabs(wb * p));
                        }
                    }
            cpu::attention_merge(ro.data(), rl.data(), with_out && k == steps - 1 ? rout.data() : nullptr, op[k].data(),
                                 lp[k].data(), B, T, H, hd, first, 0);
        }
        Outs o = both_schedules([&] {
            DF O(o0), L(l0), LP(rows); DX P(n), OUT(n);  // OUT stays NaN poison unless written
            for (int k = 0; k < steps; k++) {
                dev_upload_floats(P.p, op[k].data(), n);
                dev_memcpy_h2d(LP.p, lp[k].data(), rows * sizeof(float), 0);
                attention_merge(O.p, L.p, with_out && k == steps - 1 ? OUT.p : nullptr, P.p, LP.p, B, T, H, hd,
                                from_first && k == 0, 0);
            }
            Outs out{{"o_acc", O.get()}, {"lse_acc", L.get()}};
            if (with_out) out.push_back({"out", OUT.get()});
            return out;
        });
        std::vector<double> Eo(n), El(rows);
        for (size_t i = 0; i < n; i++) Eo[i] = 2 * U * Bo[i];
        for (size_t i = 0; i < rows; i++) El[i] = 2 * U * Bl[i];
        expect("o_acc", o[0].second, ro, tol_f(Eo));
        expect_with_inf("lse_acc", o[1].second, rl, tol_f(El));
        if (with_out) expect("out", o[2].second, rout, tol_x(rout, Eo));
        // the twin against the definition, in double, for the single merge onto a running state
        if (steps == 1 && !from_first) {
            size_t bad = 0;
            for (size_t row = 0; row < rows && bad == 0; row++) {
                size_t b = row / ((size_t)T * H), t = row / H % T, h = row % H, li = (b * H + h) * T + t;
                double la = l0[li], lb = lp[0][li], mx = fmax(la, lb);
                double ln = mx == -INFINITY ? -INFINITY : mx + log(exp(la - mx) + exp(lb - mx));
                if (!(std::isinf(ln) ? rl[li] == ln : fabs(rl[li] - ln) <= El[li])) bad++;
                for (int d = 0; d < hd && !bad && !std::isinf(ln); d++) {
                    size_t i = row * hd + d;
                    double want = exp(la - ln) * o0[i] + exp(lb - ln) * op[0][i];
                    if (!(fabs(ro[i] - want) <= Eo[i])) bad++;
                }
                if (bad) problem("twin vs definition: row %zu (lse %.9g and %.9g): lse %.9g, expected %.9g", row, la, lb, rl[li], ln);
            }
        }
    });
}

// float_accumulate (the ring's fp32 dQ, dK, dV sums): acc[i] += x[i] in fp32, the same
// addition as the twin: exact in both builds. off: the slice start in both buffers; the
// elements around the slice must keep their values.
static void check_float_accumulate(size_t n, int off) {
    std::string name = sz("float_accumulate[n=%zu,off=%d]", n, off);
    add(name, [=] {
        Rng r(name);
        const size_t pad = 5, all = n + off + pad;
        std::vector<float> a(all), x(all);
        for (auto& v : a) v = r.uni(-4, 4);
        for (auto& v : x) v = r.uni(-1, 1);
        std::vector<float> ref = a;
        cpu::float_accumulate(ref.data() + off, x.data() + off, n, 0);
        Outs o = both_schedules([&] {
            DF A(a), X(x);
            float_accumulate(A.p + off, X.p + off, n, 0);
            return Outs{{"acc", A.get()}, {"x", X.get()}};
        });
        expect_exact("acc", o[0].second, ref);
        expect_exact("x", o[1].second, x);  // an input: unchanged
        for (size_t i = 0; i < all; i++) {  // the twin against the definition
            float want = i >= (size_t)off && i < off + n ? a[i] + x[i] : a[i];
            if (memcmp(&want, &ref[i], sizeof(float)) != 0) { problem("twin: element %zu is %.9g, expected %.9g", i, ref[i], want); break; }
        }
    });
}

// copy_2d: height rows of width elements, source rows spitch apart, destination rows dpitch
// apart (odd pitches and widths), add = 0 (a copy: exact) or 1 (added into dst in fp32 and
// rounded once: the twin's fp32 sum rounded to floatX, exact). dst starts at doff, src at
// soff, into buffers that hold random values everywhere else: the elements between rows and
// around the block must keep theirs. The twin is also checked against the definition.
struct Copy2D { size_t width, height, dpitch, spitch; int doff, soff; };
static void check_copy_2d(const Copy2D& c, int add_) {
    std::string name = sz("copy_2d[width=%zu,height=%zu,dpitch=%zu,spitch=%zu,dst+%d,src+%d,add=%d]", c.width, c.height, c.dpitch,
                          c.spitch, c.doff, c.soff, add_);
    add(name, [=] {
        Rng r(name);
        const size_t pad = 7, nd = c.doff + c.height * c.dpitch + pad, ns = c.soff + c.height * c.spitch + pad;
        auto d0 = r.vec(nd, -3, 3), s0 = r.vec(ns, -3, 3);
        std::vector<float> ref = d0;
        cpu::copy_2d(ref.data() + c.doff, c.dpitch, s0.data() + c.soff, c.spitch, c.width, c.height, add_, 0);
        ref = round_x(ref);  // the twin (fp32 here) rounds the sum to floatX once, as the kernel does
        Outs o = both_schedules([&] {
            DX D(d0), S(s0);
            copy_2d(D.p + c.doff, c.dpitch, S.p + c.soff, c.spitch, c.width, c.height, add_, 0);
            return Outs{{"dst", D.get()}, {"src", S.get()}};
        });
        expect_exact("dst", o[0].second, ref);
        expect_exact("src", o[1].second, s0);
        std::vector<float> def = d0;
        for (size_t y = 0; y < c.height; y++)
            for (size_t x = 0; x < c.width; x++) {
                float s = s0[c.soff + y * c.spitch + x], &d = def[c.doff + y * c.dpitch + x];
                d = add_ ? rx(d + s) : s;
            }
        expect_exact("twin vs def", ref, def);
    });
}

// the grid-stride loops with a small grid: float_accumulate caps its grid at 4096 blocks
// and copy_2d at 8192 (of 256 threads), so the launchers' loops wrap only beyond 2^20 and
// 2^21 elements (float_accumulate[n=1048579] above wraps through its launcher)
static void check_cp_gridstride() {
    add("float_accumulate_kernel[grid-stride,n=1001,grid=3x32]", [] {
        Rng r("gs-float-acc");
        size_t n = 1001;
        std::vector<float> a(n), x(n);
        for (auto& v : a) v = r.uni(-4, 4);
        for (auto& v : x) v = r.uni(-1, 1);
        auto ref = a;
        cpu::float_accumulate(ref.data(), x.data(), n, 0);
        Outs o = both_schedules([&] {
            DF A(a), X(x);
            ::emu::launch("float_accumulate_kernel", __FILE__, __LINE__, dim3(3), dim3(32), 0, 0, float_accumulate_kernel, A.p, X.p, n);
            return Outs{{"acc", A.get()}};
        });
        expect_exact("acc", o[0].second, ref);
    });
    for (int add_ = 0; add_ <= 1; add_++)
        add(sz("copy_2d_kernel[grid-stride,width=37,height=29,dpitch=41,spitch=53,grid=3x32,add=%d]", add_), [add_] {
            Rng r("gs-copy2d");
            size_t w = 37, h = 29, dp = 41, sp = 53;
            auto d0 = r.vec(h * dp, -3, 3), s0 = r.vec(h * sp, -3, 3);
            auto ref = d0;
            cpu::copy_2d(ref.data(), dp, s0.data(), sp, w, h, add_, 0);
            ref = round_x(ref);
            Outs o = both_schedules([&] {
                DX D(d0), S(s0);
                ::emu::launch("copy_2d_kernel", __FILE__, __LINE__, dim3(3), dim3(32), 0, 0, copy_2d_kernel, D.p, dp, S.p, sp, w,
                              w * h, add_);
                return Outs{{"dst", D.get()}};
            });
            expect_exact("dst", o[0].second, ref);
        });
}

static void add_context_parallel_checks() {
    // hd < 32 (idle lanes), = 32, > 32 and not a multiple of it (33, 45, 70: a second pass of
    // some lanes), 64 and 128 (the models'); rows = B T H not a multiple of the 8 warps of
    // a block (the last block has warps past the end); T = 1
    for (const MergeShape& m : std::vector<MergeShape>{{1, 7, 4, 6}, {2, 9, 3, 45}, {1, 5, 2, 32}, {2, 3, 2, 70},
                                                       {3, 5, 1, 33}, {1, 1, 1, 1}, {2, 13, 4, 128}, {1, 37, 2, 64}}) {
        for (int out = 0; out <= 1; out++) {
            check_attention_merge(m, 1, 1, out, 1);  // first = 1: a copy (lse_p -inf rows included)
            check_attention_merge(m, 1, 0, out, 1);  // first = 0 onto a running state, -inf rows on both sides
        }
        check_attention_merge(m, 1, 0, 1, 0);  // no -inf row
        check_attention_merge(m, 4, 1, 1, 1);  // a ring of 4 blocks: first, two merges, the last with out
    }
    for (size_t n : {(size_t)0, (size_t)1, (size_t)7, (size_t)1001, (size_t)4099, ((size_t)1 << 20) + 3})
        for (int off : {0, 3}) check_float_accumulate(n, off);
    for (const Copy2D& c : std::vector<Copy2D>{{37, 29, 41, 53, 0, 0},    // odd widths and pitches
                                               {37, 29, 53, 41, 3, 1},    // unaligned starts
                                               {1, 1, 1, 1, 0, 0},
                                               {1, 9, 3, 5, 1, 2},        // a column
                                               {300, 5, 301, 300, 0, 0},  // contiguous source, > 256 per row
                                               {64, 7, 64, 192, 0, 64},   // contiguous destination (a head block)
                                               {72, 3, 216, 72, 144, 0},  // a ring chunk into ring-local order
                                               {5, 300, 7, 5, 0, 0},      // many short rows
                                               {0, 5, 3, 3, 0, 0},        // nothing to copy
                                               {7, 0, 9, 9, 0, 0}})
        for (int a = 0; a <= 1; a++) check_copy_2d(c, a);
    check_cp_gridstride();
}

// ---------------------------------------------------------------------------------
// grid-stride loops: the launchers cap the grid at 65536 blocks, so their loops wrap only
// beyond 2^24 elements, too many to emulate. These checks launch the kernels themselves
// with a small grid (the launch of a real llmc kernel, only the grid is chosen here).
static void check_gridstride() {
    // vec = 1: 125 (bf16) or 250 (fp32) chunks and a tail of 1 on 192 threads: both loops wrap
    for (int vec = 0; vec <= 1; vec++)
        add(sz("swiglu_forward_kernel[grid-stride,n=1001,grid=3x64,vec=%d]", vec), [vec] {
            Rng r("gs-swiglu");
            size_t n = 1001;
            auto a = r.vec(n, -9, 9), b = r.vec(n, -2, 2);
            std::vector<float> ref(n);
            cpu::swiglu_forward(ref.data(), a.data(), b.data(), n, 0);
            Outs o = both_schedules([&] {
                DX A(a), Bb(b), O(n);
                ::emu::launch("swiglu_forward_kernel", __FILE__, __LINE__, dim3(3), dim3(64), 0, 0, swiglu_forward_kernel, O.p, A.p, Bb.p, n, vec);
                return Outs{{"out", O.get()}};
            });
            std::vector<double> E(n);
            for (size_t i = 0; i < n; i++) E[i] = 2 * U * 8 * fabs((double)ref[i]);
            expect("out", o[0].second, ref, tol_x(ref, E));
        });
    add("swiglu_backward_kernel[grid-stride,n=1001,grid=2x32,vec=1]", [] {
        Rng r("gs-swiglu-bwd");
        size_t n = 1001;
        auto a = r.vec(n, -9, 9), b = r.vec(n, -2, 2), g = r.vec(n, -1, 1);
        std::vector<float> r1(n), r3(n);
        cpu::swiglu_backward(r1.data(), r3.data(), g.data(), a.data(), b.data(), n, 0);
        Outs o = both_schedules([&] {
            DX A(a), Bb(b), G(g), D1(n), D3(n);
            ::emu::launch("swiglu_backward_kernel", __FILE__, __LINE__, dim3(2), dim3(32), 0, 0, swiglu_backward_kernel, D1.p, D3.p,
                          G.p, A.p, Bb.p, n, 1);
            return Outs{{"dh1", D1.get()}, {"dh3", D3.get()}};
        });
        std::vector<double> E1(n), E3(n);
        for (size_t i = 0; i < n; i++) {
            double sig = 1.0 / (1.0 + exp(-(double)a[i]));
            E1[i] = 2 * U * 8 * fabs((double)g[i] * b[i] * sig) * (1 + 2 * fabs((double)a[i]));
            E3[i] = 2 * U * 8 * fabs((double)r3[i]);
        }
        expect("dh1", o[0].second, r1, tol_x(r1, E1));
        expect("dh3", o[1].second, r3, tol_x(r3, E3));
    });
    add("encoder_forward_kernel[grid-stride,N=37,D=24,grid=5x32,v0=10,n=40]", [] {
        Rng r("gs-enc");
        int N = 37, D = 24, V = 67, v0 = 10, n = 40;  // a vocabulary range: some rows are zeros
        std::vector<int> tok(N);
        for (auto& t : tok) t = r.below(V);
        auto wte = r.vec((size_t)n * D, -1, 1);
        std::vector<float> ref((size_t)N * D);
        cpu::encoder_forward_range(ref.data(), tok.data(), wte.data(), N, D, v0, n, 0);
        Outs o = both_schedules([&] {
            DI Tk(tok); DX W(wte), O((size_t)N * D);
            ::emu::launch("encoder_forward_kernel", __FILE__, __LINE__, dim3(5), dim3(32), 0, 0, encoder_forward_kernel, O.p, Tk.p, W.p, N, D, v0, n);
            return Outs{{"out", O.get()}};
        });
        expect_exact("out", o[0].second, ref);
    });
    // rope's kernels walk the rows grid-stride (past 65535 row blocks): 6 rows a step over
    // T = 9, so the positions wrap; q and k in one launch
    for (int vec = 0; vec <= 1; vec++)
        add(sz("%s[grid-stride,B=2,T=9,H=3,KV=2,hd=8,grid=1x2,block=32x3]", vec ? "rope_vec_kernel" : "rope_pair_kernel"), [vec] {
            Rng r(vec ? "gs-rope-vec" : "gs-rope");
            int B = 2, T = 9, H = 3, KV = 2, hd = 8, half = hd / 2, P = vec ? ROPE_PAIRS : 1;
            std::vector<float> ct((size_t)T * half), st((size_t)T * half);
            for (int t = 0; t < T; t++)
                for (int i = 0; i < half; i++) { double an = t * pow(10000.0, -2.0 * i / hd); ct[(size_t)t * half + i] = (float)cos(an); st[(size_t)t * half + i] = (float)sin(an); }
            size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
            auto x = r.vec(nq, -2, 2), y = r.vec(nk, -2, 2);
            std::vector<float> rq(nq), rk(nk);
            cpu::rope_forward(rq.data(), x.data(), ct.data(), st.data(), B, T, H, hd, 0);
            cpu::rope_forward(rk.data(), y.data(), ct.data(), st.data(), B, T, KV, hd, 0);
            Outs o = both_schedules([&] {
                DX X(x), K(y); DF CT(ct), ST(st);
                int uq = H * half / P, uk = KV * half / P, uph = half / P;
                if (vec) ::emu::launch("rope_vec_kernel", __FILE__, __LINE__, dim3(1, 2), dim3(32, 3), 0, 0, rope_vec_kernel, X.p, X.p, K.p, K.p, CT.p, ST.p, B * T, T, uq, uk, uph, half, 1.0f);
                else ::emu::launch("rope_pair_kernel", __FILE__, __LINE__, dim3(1, 2), dim3(32, 3), 0, 0, rope_pair_kernel, X.p, X.p, K.p, K.p, CT.p, ST.p, B * T, T, uq, uk, uph, half, 1.0f);
                return Outs{{"q", X.get()}, {"k", K.get()}};
            });
            std::vector<double> Eq(nq, 2 * U * 8 * 4.0), Ek(nk, 2 * U * 8 * 4.0);  // |x| < 2, |cos|,|sin| <= 1: terms < 4
            expect("q", o[0].second, rq, tol_x(rq, Eq));
            expect("k", o[1].second, rk, tol_x(rk, Ek));
        });
    add("adamw_kernel[grid-stride,n=777,grid=3x64]", [] {
        Rng r("gs-adamw");
        size_t n = 777;
        const float lr = 1e-3f, b1 = 0.9f, b2 = 0.95f, eps = 1e-8f, wd = 0.1f, gs = 1.0f;
        const int t = 2;
        auto p0 = r.vec(n, -1, 1), g = r.vec(n, -1, 1), m0 = r.vec(n, -0.1f, 0.1f), v0 = r.vec(n, 0.001f, 0.01f);
        auto rp = p0, rmaster = p0, rm = m0, rv = v0;
        cpu::adamw_update(rp.data(), rmaster.data(), g.data(), rm.data(), rv.data(), n, lr, b1, b2, eps, wd, gs, t, 0);
        float bc1 = 1.0f - powf(b1, (float)t), bc2s = sqrtf(1.0f - powf(b2, (float)t)), step = lr / bc1;
        Outs o = both_schedules([&] {
            DX P(p0), G(g); DF M(m0), Vv(v0), MS(p0);
            ::emu::launch("adamw_kernel", __FILE__, __LINE__, dim3(3), dim3(64), 0, 0, adamw_kernel, P.p, MS.p, G.p, M.p, Vv.p, n, lr, b1, b2,
                          eps, wd, gs, step, bc2s);
            return Outs{{"master", MS.get()}, {"m", M.get()}};
        });
        std::vector<double> E(n), Em(n);
        for (size_t i = 0; i < n; i++) { E[i] = 2 * U * 64 * (fabs(p0[i]) + step * 10); Em[i] = 2 * U * 16 * (fabs(m0[i]) + fabs(g[i])); }
        expect("master", o[0].second, rmaster, tol_f(E));
        expect("m", o[1].second, rm, tol_f(Em));
    });
}

// ---------------------------------------------------------------------------------
// the check `name` of a tensor-core launcher: `check` in the bf16 build; in an ENABLE_FP32
// build, where the kernels are not compiled, that `call` (the launcher on buffers of the
// shape) FAILs naming the build
template <class Call, class Check> static void add_att_tc(const std::string& name, Call call, Check check) {
#ifdef ENABLE_FP32
    (void)check;
    add(name, [=] { expect_fail("launcher", call, "ENABLE_FP32 build"); });
#else
    (void)call;
    add(name, check);
#endif
}

// ---------------------------------------------------------------------------------
// attention on tensor cores, forward (llmc/kernels/attention_tc.cuh): attention_tc_forward and
// attention_tc_full_forward against the same CPU twin as the fp32 kernels, in the bf16
// build (in the fp32 build the launchers must FAIL, and the kernels are not compiled).
// The kernel differs from the twin in three ways, each bounded per element on top of the
// bound E = 2 U B of attention_bounds (order of the fp32 sums: the emulator's mma sums
// exact bf16 products in fp32 in a fixed order, not the tensor cores' order):
//  - p = exp2(fma(s_raw, scale log2e, -m scale log2e)) instead of exp(s - m): the
//    argument's roundings, relative to p: X = 2 |s| + 2 |m| + |s - m| + 4 units of U
//    (s, m scaled); added as U X (|out| + sum_u p_u |v_u|) to out and U X to lse, X the
//    row's largest;
//  - P enters the P V product rounded to bf16 (relative 2^-8 = R) while l sums the fp32
//    p (as FlashAttention-2): out is off by up to R sum_u p_u |v_u| (p_u = exp(s_u - lse),
//    normalised) before its own final rounding;
//  - out is rounded once to bf16 (R |out|, as for every floatX output).
// So tol(out) = R |ref| + (1 + R) (E + U X (|ref| + S) + R S), S = sum_u p_u |v_u|, and
// tol(lse) = E + 2 U X (lse is fp32: no R). A wrong fragment mapping, mask or softmax
// bookkeeping is off by O(|out|), far above this.
static void attention_tc_extra(const Att& a, bool causal, const std::vector<float>& q, const std::vector<float>& k,
                               const std::vector<float>& v, std::vector<double>& S, std::vector<double>& X) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd, group = H / KV;
    const double scale = 1.0 / sqrt((double)hd);
    S.assign((size_t)B * T * H * hd, 0.0);
    X.assign((size_t)B * H * T, 0.0);
    std::vector<double> s(T);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const int kvh = h / group, nu = causal ? t + 1 : T;
                const float* qt = &q[(((size_t)b * T + t) * H + h) * hd];
                double m = -INFINITY, l = 0, x = 0;
                for (int u = 0; u < nu; u++) {
                    const float* ku = &k[(((size_t)b * T + u) * KV + kvh) * hd];
                    double d = 0;
                    for (int e = 0; e < hd; e++) d += (double)qt[e] * ku[e];
                    s[u] = d * scale;
                    m = fmax(m, s[u]);
                }
                for (int u = 0; u < nu; u++) {
                    l += exp(s[u] - m);
                    x = fmax(x, 2 * fabs(s[u]) + 2 * fabs(m) + fabs(s[u] - m) + 4);
                }
                X[((size_t)b * H + h) * T + t] = x;
                for (int u = 0; u < nu; u++) {
                    const double p = exp(s[u] - m) / l;
                    const float* vu = &v[(((size_t)b * T + u) * KV + kvh) * hd];
                    for (int e = 0; e < hd; e++) S[(((size_t)b * T + t) * H + h) * hd + e] += p * fabs((double)vu[e]);
                }
            }
}
// q or k as the attention sees it when RoPE is fused: rotated by the twin and rounded to
// floatX, as rope_forward's output is in the unfused composition
static std::vector<float> att_rope_x(const std::vector<float>& x, const std::vector<float>& ct,
                                     const std::vector<float>& st, int B, int T, int nh, int hd) {
    std::vector<float> y(x.size());
    cpu::rope_forward(y.data(), x.data(), ct.data(), st.data(), B, T, nh, hd, 0);
    return round_x(y);
}
// rope: attention_tc_forward_rope / attention_tc_full_forward_rope on the unrotated q, k:
// the same bound, on the rotated (and rounded) q, k the twin is given; then bit for bit
// against the unfused composition on the GPU (rope_forward on q and k, then the plain
// kernel)
static void att_tc_forward_check(const Att& a, bool causal, bool rope) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd;
    std::string base = att_sz(a);
    std::string name = std::string(causal ? "attention_tc_forward" : "attention_tc_full_forward") + (rope ? "_rope[" : "[") +
                       base + "]";
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const auto gpu_fwd = causal ? attention_tc_forward : attention_tc_full_forward;
    const auto gpu_fwd_rope = causal ? attention_tc_forward_rope : attention_tc_full_forward_rope;
    std::vector<float> ct, st;
    rope_tables(T, hd, ct, st);
    add_att_tc(name, [=] {
        DX Q(nq), K(nk), Vv(nk), O(nq); DF L(nl), CT(ct), ST(st);
        if (rope) gpu_fwd_rope(O.p, L.p, Q.p, K.p, Vv.p, CT.p, ST.p, B, T, H, KV, hd, 0);
        else gpu_fwd(O.p, L.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
    }, [=] {
        Rng r((rope ? "attention_tc_rope" : "attention_tc") + base);
        auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
        const auto qa = rope ? att_rope_x(q, ct, st, B, T, H, hd) : q, ka = rope ? att_rope_x(k, ct, st, B, T, KV, hd) : k;
        std::vector<float> out(nq), lse(nl);
        (causal ? cpu::attention_forward : cpu::attention_full_forward)(out.data(), lse.data(), qa.data(), ka.data(),
                                                                        v.data(), B, T, H, KV, hd, 0);
        std::vector<double> Bo, Bl, Bq, Bk, Bv, S, X;
        attention_bounds(a, causal, qa, ka, v, dout, round_x(out), lse, Bo, Bl, Bq, Bk, Bv);
        attention_tc_extra(a, causal, qa, ka, v, S, X);
        Outs o = both_schedules([&] {
            DX Q(q), K(k), Vv(v), O(nq); DF L(nl), CT(ct), ST(st);
            if (rope) gpu_fwd_rope(O.p, L.p, Q.p, K.p, Vv.p, CT.p, ST.p, B, T, H, KV, hd, 0);
            else gpu_fwd(O.p, L.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
            return Outs{{"out", O.get()}, {"lse", L.get()}, {"q", Q.get()}};
        });
        std::vector<double> to(nq), tl(nl);
        for (size_t i = 0; i < nq; i++) {
            const double x = X[((size_t)(i / ((size_t)H * hd) / T) * H + (i / hd) % H) * T + (i / ((size_t)H * hd)) % T];
            to[i] = R * fabs((double)out[i]) + (1 + R) * (2 * U * Bo[i] + U * x * (fabs((double)out[i]) + S[i]) + R * S[i]);
        }
        for (size_t i = 0; i < nl; i++) tl[i] = 2 * U * (Bl[i] + X[i]);
        expect("out", o[0].second, out, to);
        expect("lse", o[1].second, lse, tl);
        if (rope) {
            expect_exact("q kept", o[2].second, q);  // the rotation happens in shared memory only
            DX Q(q), K(k), Qr(nq), Kr(nk), Vv(v), O(nq); DF L(nl), CT(ct), ST(st);
            rope_forward(Qr.p, Q.p, CT.p, ST.p, B, T, H, hd, 0);
            rope_forward(Kr.p, K.p, CT.p, ST.p, B, T, KV, hd, 0);
            gpu_fwd(O.p, L.p, Qr.p, Kr.p, Vv.p, B, T, H, KV, hd, 0);
            expect_exact("out = unfused", o[0].second, O.get());
            expect_exact("lse = unfused", o[1].second, L.get());
        }
    });
}
static void check_attention_tc_forward(const Att& a, bool causal) { att_tc_forward_check(a, causal, false); }
static void check_attention_tc_forward_rope(const Att& a, bool causal) { att_tc_forward_check(a, causal, true); }
// what a tensor-core launcher's refusal must name: in an ENABLE_FP32 build it refuses
// every call for the build, before looking at anything else
static const char* att_tc_refusal(const char* bf16_reason) {
#ifdef ENABLE_FP32
    (void)bf16_reason;
    return "ENABLE_FP32 build";
#else
    return bf16_reason;
#endif
}
// the launchers' and the selection's refusals, with the reason named
static void check_attention_tc_refusals() {
    add("attention_tc_forward[refuses:hd=100,hd=264,hd=24,rope-hd=72,unaligned]", [] {
        for (int hd : {100, 264, 24})
            expect_fail(sz("hd=%d", hd).c_str(), [hd] {
                DX Q(2 * 4 * hd), K(2 * 4 * hd), Vv(2 * 4 * hd), O(2 * 4 * hd); DF L(8);
                attention_tc_forward(O.p, L.p, Q.p, K.p, Vv.p, 1, 2, 4, 4, hd, 0);
            }, hd > 256 ? "head dim 264" : att_tc_refusal(sz("head dim %d", hd).c_str()));  // > 256: att_check_args, every build
        expect_fail("rope hd=72", [] {
            DX Q(2 * 72), K(2 * 72), Vv(2 * 72), O(2 * 72); DF L(2), CT(2 * 36), ST(2 * 36);
            attention_tc_forward_rope(O.p, L.p, Q.p, K.p, Vv.p, CT.p, ST.p, 1, 2, 1, 1, 72, 0);
        }, att_tc_refusal("RoPE fused runs at head dims 64 and 128 only"));
        expect_fail("unaligned", [] {
            DX Q(2 * 64 + 8), K(2 * 64), Vv(2 * 64), O(2 * 64); DF L(2);
            attention_tc_full_forward(O.p, L.p, Q.p + 1, K.p, Vv.p, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("not 16-byte aligned"));
    });
    add("attention_select[parse,resolve]", [] {
        if (attention_impl_parse("auto") != ATTENTION_AUTO || attention_impl_parse("fp32") != ATTENTION_FP32 ||
            attention_impl_parse("tc") != ATTENTION_TC || attention_impl_parse("cudnn") != ATTENTION_CUDNN)
            problem("attention_impl_parse: a valid name was misread");
#ifdef ENABLE_FP32
        if (attention_impl_resolve(ATTENTION_AUTO, 64) != ATTENTION_FP32) problem("auto must mean fp32 in an FP32 build");
#else
        // tc passed on an H200 (docs/results/gpu_h200_2026-11-26.md, -30.md): auto's memory-free
        // candidate is tc at the head dims that passed there, fp32 at those that did not
        for (int hd : {32, 64, 72, 128, 256})
            if (attention_impl_resolve(ATTENTION_AUTO, hd) != ATTENTION_TC) problem("auto must mean tc at hd %d (bf16)", hd);
        for (int hd : {12, 88})  // 88: tc runs it, no GPU has
            if (attention_impl_resolve(ATTENTION_AUTO, hd) != ATTENTION_FP32) problem("auto must fall back to fp32 at hd %d", hd);
#endif
        if (attention_impl_resolve(ATTENTION_FP32, 96) != ATTENTION_FP32) problem("fp32 must take any head dim");
        expect_fail("parse", [] { attention_impl_parse("flash"); }, "expected auto, fp32, tc, tc2 or cudnn");
        // the emulator never builds with USE_CUDNN: cudnn is refused, naming the build that has it
#ifdef ENABLE_FP32
        expect_fail("tc in fp32", [] { attention_impl_resolve(ATTENTION_TC, 64); }, "ENABLE_FP32 build");
        expect_fail("cudnn in fp32", [] { attention_impl_resolve(ATTENTION_CUDNN, 64); }, "ENABLE_FP32 build");
#else
        expect_fail("cudnn without USE_CUDNN", [] { attention_impl_resolve(ATTENTION_CUDNN, 64); }, "make USE_CUDNN=1");
        if (attention_impl_resolve(ATTENTION_TC, 128) != ATTENTION_TC) problem("tc with hd 128 refused");
        // tc runs at every multiple of 8 from 32 to 256; auto only where a GPU passed it
        for (int hd : {32, 56, 72, 96, 104, 200, 256}) {
            if (attention_impl_resolve(ATTENTION_TC, hd) != ATTENTION_TC) problem("tc with hd %d refused", hd);
            const bool passed = hd != 56 && hd != 104;
            if ((attention_impl_resolve(ATTENTION_AUTO, hd) == ATTENTION_FP32) == passed)
                problem("auto at hd %d: %s (a GPU %s tc there)", hd,
                        attention_impl_name(attention_impl_resolve(ATTENTION_AUTO, hd)), passed ? "passed" : "never ran");
        }
        expect_fail("tc hd=100", [] { attention_impl_resolve(ATTENTION_TC, 100); }, "head dim 100");
        // auto's ranking by att_measured (this build has no cuDNN): tc2 first where it was timed
        // faster than tc in the same call, then tc; tc alone where tc2 was slower or not timed
        struct { int hd, causal; std::vector<AttentionImpl> want; } ranks[] = {
            {64, 1, {ATTENTION_TC2, ATTENTION_TC}}, {64, 0, {ATTENTION_TC}}, {72, 0, {ATTENTION_TC2, ATTENTION_TC}},
            {72, 1, {ATTENTION_TC2, ATTENTION_TC}}, {128, 1, {ATTENTION_TC2, ATTENTION_TC}}, {128, 0, {ATTENTION_TC2, ATTENTION_TC}},
            {96, 1, {ATTENTION_TC}}, {88, 1, {ATTENTION_FP32}}};
        for (auto& r : ranks) {
            AttentionImpl got[3];
            int n = attention_auto_candidates(r.hd, r.causal, got);
            if (n != (int)r.want.size() || !std::equal(r.want.begin(), r.want.end(), got))
                problem("auto's candidates at hd %d %s: %d, the first %s", r.hd, r.causal ? "causal" : "full", n,
                        attention_impl_name(got[0]));
        }
        // selecting auto runs the first; stepping down reaches the memory-free one, then refuses
        attention_select(ATTENTION_AUTO, 64, 1);
        if (g_attention_impl != ATTENTION_TC2 || attention_auto_fallbacks() != 1) problem("auto at hd 64 causal: not tc2 first");
        attention_auto_step_down();
        if (g_attention_impl != ATTENTION_TC || attention_auto_fallbacks() != 0) problem("auto's step down: not tc");
        expect_fail("step down past the last", [] { attention_auto_step_down(); }, "no candidate left");
        attention_select(ATTENTION_TC2, 64, 1);
        if (attention_auto_fallbacks() != 0) problem("a kernel asked for by name has no fallbacks");
        g_attention_impl = ATTENTION_AUTO;
#endif
        expect_fail("no select", [] {
            g_attention_impl = ATTENTION_AUTO;
            DX Q(64), K(64), Vv(64), O(64); DF L(1);
            attention_dispatch_forward(O.p, L.p, Q.p, K.p, Vv.p, 1, 1, 1, 1, 64, 0);
        }, "attention_select() was not called");
    });
    // the dispatch runs what was selected: tc and fp32 give different roundings of the same attention
#ifndef ENABLE_FP32
    add("attention_select[dispatch_forward,B=1,T=70,H=2,KV=1,hd=64]", [] {
        Rng r("attention_dispatch");
        const int B = 1, T = 70, H = 2, KV = 1, hd = 64;
        auto q = r.vec((size_t)B * T * H * hd, -1.5, 1.5), k = r.vec((size_t)B * T * KV * hd, -1.5, 1.5),
             v = r.vec((size_t)B * T * KV * hd, -1, 1);
        std::vector<float> got[3], want[3];
        const AttentionImpl impls[3] = {ATTENTION_FP32, ATTENTION_TC, ATTENTION_TC2};
        for (int impl = 0; impl < 3; impl++) {
            DX Q(q), K(k), Vv(v), O(q.size()), O2(q.size()); DF L(B * H * T), L2(B * H * T);
            attention_select(impls[impl], hd, 1);
            attention_dispatch_full_forward(O.p, L.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
            (impl == 2 ? attention_tc2_full_forward : impl ? attention_tc_full_forward : attention_full_forward)(
                O2.p, L2.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
            got[impl] = O.get(); want[impl] = O2.get();
        }
        expect_exact("fp32 selected", got[0], want[0]);
        expect_exact("tc selected", got[1], want[1]);
        expect_exact("tc2 selected", got[2], want[2]);
        if (got[0] == got[1]) problem("fp32 and tc gave bitwise equal outputs: the dispatch does not switch");
        // tc2's 128-key tile at hd 64 rescales once where tc's two 64-key tiles rescale twice
        if (got[1] == got[2]) problem("tc and tc2 gave bitwise equal outputs: the dispatch does not switch");
    });
#endif
}
// The tensor-core attention at the head dims other than 64 and 128 (every multiple of 8
// from 32 to 256; one kernel per compiled width att_tc_hdp(hd)): make test runs with
// EMU_HARNESS_SAMPLE=1 and checks a sample (40: the zero-padded k16 slice and the copy map
// over the padding; 72: dit-XL; 200: the second configuration, with its split dK/dV and
// smaller key tiles); make test-full checks them all. Each head dim gets one shape in
// each mode, the same in both runs, T and the GQA ratio rotating with hd / 8 over ragged
// tiles (T = 130, 63, 200, 65, 1: the causal diagonal across a ragged last tile, inside
// one tile, several tiles, one past a tile, T = 1; hd 72 gets T = 130).
static bool emu_harness_sample() {
    const char* e = getenv("EMU_HARNESS_SAMPLE");
    return e && strcmp(e, "1") == 0;
}
static std::vector<int> att_tc_new_hds() {
    if (emu_harness_sample()) return {40, 72, 200};
    std::vector<int> v;
    for (int hd = 32; hd <= 256; hd += 8)
        if (hd != 64 && hd != 128) v.push_back(hd);
    return v;
}
static std::vector<Att> att_tc_new_shapes(bool backward) {
    // B, T, H, KV (GQA 1, 2, 4, 3); the backward's shapes are smaller where they can be (it runs 3 kernels)
    const Att fwd[] = {{2, 130, 4, 2, 0}, {2, 63, 4, 1, 0}, {1, 200, 2, 2, 0}, {2, 65, 4, 1, 0}, {1, 1, 3, 1, 0}};
    const Att bwd[] = {{1, 130, 4, 2, 0}, {2, 63, 4, 1, 0}, {1, 200, 2, 2, 0}, {2, 65, 3, 1, 0}, {2, 1, 4, 2, 0}};
    std::vector<Att> v;
    for (int hd : att_tc_new_hds()) {
        Att a = (backward ? bwd : fwd)[(hd / 8 + 1) % 5];
        a.hd = hd;
        v.push_back(a);
    }
    return v;
}
// the kernels named PREFIX..._hd{HDP}... of the compiled widths a sampled run leaves out, given
// the head dims it checks besides 64 and 128 (the coverage check skips them)
static bool att_sampled_out(const char* kernel, const char* prefix, const std::vector<int>& hds) {
    if (!emu_harness_sample() || strncmp(kernel, prefix, strlen(prefix)) != 0) return false;
    const char* p = strstr(kernel, "_hd");
    if (!p) return false;
    const int hdp = atoi(p + 3);
    if (hdp == 64 || hdp == 128) return false;
    for (int hd : hds)
        if (att_tc_hdp(hd) == hdp) return false;
    return true;
}
static void add_attention_tc_forward_checks() {
    // hd 64 and 128; T = 1, 63, 65, 130, 200 (not multiples of the 64-row tiles, one tile,
    // the diagonal crossing a ragged last tile); GQA ratios 1, 2 and 4; B = 2
    add_att_both_modes({{2, 1, 4, 2, 64}, {2, 1, 2, 2, 128}, {2, 63, 2, 2, 64}, {2, 63, 4, 1, 128}, {2, 65, 4, 2, 64},
                        {2, 65, 2, 2, 128}, {2, 130, 4, 1, 64}, {2, 130, 4, 2, 128}, {2, 200, 4, 4, 64},
                        {2, 200, 4, 1, 128}},
                       check_attention_tc_forward);
    // RoPE fused: hd 64 and 128, T = 1 and ragged, GQA 1, 2, 4
    add_att_both_modes({{2, 1, 2, 2, 64}, {2, 63, 4, 1, 128}, {1, 130, 4, 2, 64}, {1, 200, 2, 1, 128}},
                       check_attention_tc_forward_rope);
    add_att_both_modes(att_tc_new_shapes(false), check_attention_tc_forward);
    check_attention_tc_refusals();
}

// ---------------------------------------------------------------------------------
// the second-generation forward (llmc/kernels/attention_tc2.cuh): attention_tc2_forward and
// attention_tc2_full_forward at v6's bound (attention_tc_extra above: the same roundings, P
// to bf16 for P V while l sums the fp32 p, in another tile order) against the same CPU twin,
// fwd and rev schedules bitwise. Its shapes cross its 128-row query tiles (T = 1, 63, 129,
// 130, 200, 257: one partial tile, a tile and one row, three tiles, the causal diagonal in
// each of a tile's warps), with GQA 1, 2, 4 and MQA. Every compiled width: hd 64 and 128 with
// several shapes, every other multiple of 8 with one (make test's EMU_HARNESS_SAMPLE=1: 32 and
// 40, the pipelined widths with Q in registers and not, 72 and 200), T and GQA rotating.
static void att_tc2_forward_check(const Att& a, bool causal) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd;
    const std::string base = att_sz(a);
    const std::string name = std::string(causal ? "attention_tc2_forward[" : "attention_tc2_full_forward[") + base + "]";
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const auto gpu_fwd = causal ? attention_tc2_forward : attention_tc2_full_forward;
    add_att_tc(name, [=] {
        DX Q(nq), K(nk), Vv(nk), O(nq); DF L(nl);
        gpu_fwd(O.p, L.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
    }, [=] {
        Rng r("attention_tc2" + base);
        auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
        std::vector<float> out(nq), lse(nl);
        (causal ? cpu::attention_forward : cpu::attention_full_forward)(out.data(), lse.data(), q.data(), k.data(),
                                                                        v.data(), B, T, H, KV, hd, 0);
        std::vector<double> Bo, Bl, Bq, Bk, Bv, S, X;
        attention_bounds(a, causal, q, k, v, dout, round_x(out), lse, Bo, Bl, Bq, Bk, Bv);
        attention_tc_extra(a, causal, q, k, v, S, X);
        Outs o = both_schedules([&] {
            DX Q(q), K(k), Vv(v), O(nq); DF L(nl);
            gpu_fwd(O.p, L.p, Q.p, K.p, Vv.p, B, T, H, KV, hd, 0);
            return Outs{{"out", O.get()}, {"lse", L.get()}};
        });
        std::vector<double> to(nq), tl(nl);
        for (size_t i = 0; i < nq; i++) {
            const double x = X[((size_t)(i / ((size_t)H * hd) / T) * H + (i / hd) % H) * T + (i / ((size_t)H * hd)) % T];
            to[i] = R * fabs((double)out[i]) + (1 + R) * (2 * U * Bo[i] + U * x * (fabs((double)out[i]) + S[i]) + R * S[i]);
        }
        for (size_t i = 0; i < nl; i++) tl[i] = 2 * U * (Bl[i] + X[i]);
        expect("out", o[0].second, out, to);
        expect("lse", o[1].second, lse, tl);
    });
}
static void check_attention_tc2_forward(const Att& a, bool causal) { att_tc2_forward_check(a, causal); }
static std::vector<int> att_tc2_hds() {
    if (emu_harness_sample()) return {32, 40, 72, 200};
    std::vector<int> v;
    for (int hd = 32; hd <= 256; hd += 8)
        if (hd != 64 && hd != 128) v.push_back(hd);
    return v;
}
static void add_attention_tc2_forward_checks() {
    add_att_both_modes({{2, 1, 4, 2, 64}, {2, 63, 2, 2, 64}, {1, 129, 4, 1, 64}, {2, 130, 4, 4, 64}, {1, 257, 2, 1, 64},
                        {2, 1, 2, 2, 128}, {1, 130, 4, 2, 128}, {1, 200, 4, 1, 128}, {1, 257, 2, 2, 128}},
                       check_attention_tc2_forward);
    // B, T, H, KV (GQA 2, 4, 1, 3, 4)
    const Att sh[] = {{2, 130, 4, 2, 0}, {1, 257, 4, 1, 0}, {1, 200, 2, 2, 0}, {2, 129, 3, 1, 0}, {2, 63, 4, 1, 0}};
    std::vector<Att> v;
    for (int hd : att_tc2_hds()) {
        Att a = sh[(hd / 8) % 5];
        a.hd = hd;
        v.push_back(a);
    }
    add_att_both_modes(v, check_attention_tc2_forward);
    add("attention_tc2_forward[refuses:hd=100,hd=24,unaligned]", [] {
        for (int hd : {100, 24})
            expect_fail(sz("hd=%d", hd).c_str(), [hd] {
                DX Q(2 * 4 * hd), K(2 * 4 * hd), Vv(2 * 4 * hd), O(2 * 4 * hd); DF L(8);
                attention_tc2_forward(O.p, L.p, Q.p, K.p, Vv.p, 1, 2, 4, 4, hd, 0);
            }, att_tc_refusal(sz("head dim %d", hd).c_str()));
        expect_fail("unaligned", [] {
            DX Q(2 * 64 + 8), K(2 * 64), Vv(2 * 64), O(2 * 64); DF L(2);
            attention_tc2_full_forward(O.p, L.p, Q.p + 1, K.p, Vv.p, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("not 16-byte aligned"));
    });
}

// ---------------------------------------------------------------------------------
// attention on tensor cores, backward (llmc/kernels/attention_tc_backward.cuh):
// attention_tc_backward and attention_tc_full_backward against the same CPU twin as the
// fp32 kernels, on inputs made as check_attention makes them, in the bf16 build (in the
// fp32 build the launchers must FAIL, and the kernels are not compiled). The bound is
// that of attention_bounds (E = 2 U B: the order of the fp32 sums; the emulator's mma sums
// exact bf16 products in fp32 in a fixed order) plus what the kernels do that the twin
// does not:
//  (1) P and dS (unscaled) enter the products P^T dO, dS^T Q and dS K as bf16 operands
//      (the tensor cores take bf16, as in FlashAttention-2): one more rounding of at most
//      2^-8 relative per term: 2^-8 X with X = sum |p dO| (dv), sum |dS q| (dk),
//      sum |dS k| (dq), over the same terms as the outputs;
//  (2) p = exp2(s_raw c - lse log2e) with c = scale log2e and lse log2e rounded to fp32:
//      p is off by at most (|s| + |lse| + 4) U p more than exp(s - lse) (a relative error
//      d in the exponent of 2 is d ln 2 in p), carried first-order into dv, dS, dk, dq: F.
// tol = R |ref| + (1 + R) (2 U B + 2 F + 2^-8 X). (1) dominates; it is a bound per element,
// so a dropped tile, a wrong mask or a wrong fragment row is still many times above it.
static void att_tc_bwd_extra(const Att& a, bool causal, const std::vector<float>& q, const std::vector<float>& k,
                             const std::vector<float>& v, const std::vector<float>& dout, const std::vector<float>& out,
                             const std::vector<float>& lse, std::vector<double>& Xq, std::vector<double>& Xk,
                             std::vector<double>& Xv) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd, group = H / KV;
    const double scale = 1.0 / sqrt((double)hd), r8 = 1.0 / 256;
    Xq.assign((size_t)B * T * H * hd, 0); Xk.assign((size_t)B * T * KV * hd, 0); Xv.assign(Xk.size(), 0);
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                const int kvh = h / group, nu = causal ? t + 1 : T;
                const size_t qi = (((size_t)b * T + t) * H + h) * hd;
                const double L = lse[((size_t)b * H + h) * T + t];
                double delta = 0;
                for (int e = 0; e < hd; e++) delta += (double)dout[qi + e] * out[qi + e];
                for (int u = 0; u < nu; u++) {
                    const size_t ki = (((size_t)b * T + u) * KV + kvh) * hd;
                    double s = 0, dp = 0;
                    for (int e = 0; e < hd; e++) { s += (double)q[qi + e] * k[ki + e]; dp += (double)dout[qi + e] * v[ki + e]; }
                    s *= scale;
                    const double p = exp(s - L), fp = p * (fabs(s) + fabs(L) + 4) * U;  // F of p
                    const double xds = r8 * p * fabs(dp - delta) * scale + 2 * fp * fabs(dp - delta) * scale;
                    const double xp = r8 * p + 2 * fp;
                    for (int e = 0; e < hd; e++) {
                        Xv[ki + e] += xp * fabs((double)dout[qi + e]);
                        Xk[ki + e] += xds * fabs((double)q[qi + e]);
                        Xq[qi + e] += xds * fabs((double)k[ki + e]);
                    }
                }
            }
}

// the tolerance of a gradient that rope_backward rotates back from the rotated frame: ref_rot
// (tolerance tol_rot, which includes its rounding to floatX: both the fused kernel and the
// unfused composition round before the rotation) -> ref; each output mixes its pair's two
// errors by |c| and |s|, plus the rotation's fp32 roundings (8 U as in check_rope) and the
// final rounding
static std::vector<double> rope_back_tol(const std::vector<float>& ref, const std::vector<float>& ref_rot,
                                         const std::vector<double>& tol_rot, const std::vector<float>& ct,
                                         const std::vector<float>& st, int T, int nh, int hd) {
    const int half = hd / 2;
    std::vector<double> E(ref.size());
    for (size_t p = 0; p < ref.size() / 2; p++) {
        const int i = (int)(p % half), t = (int)((p / ((size_t)half * nh)) % T);
        const double c = fabs((double)ct[(size_t)t * half + i]), sn = fabs((double)st[(size_t)t * half + i]);
        const double e0 = tol_rot[2 * p], e1 = tol_rot[2 * p + 1];
        const double a0 = fabs((double)ref_rot[2 * p]) + e0, a1 = fabs((double)ref_rot[2 * p + 1]) + e1;
        E[2 * p] = c * e0 + sn * e1 + 2 * U * 8 * (c * a0 + sn * a1);
        E[2 * p + 1] = sn * e0 + c * e1 + 2 * U * 8 * (sn * a0 + c * a1);
    }
    return tol_x(ref, E);
}

// both schedules bitwise equal (as in every check: run to run, in two block and thread
// orders) and against the twin; then the overwrite contract: one more call, into outputs
// and a delta scratch that hold numbers instead of the NaN of fresh buffers, must give the
// same bits. rope: attention_tc_backward_rope / _full_ on the unrotated q, k; the twin's
// backward on the rotated (and rounded) q, k, then cpu::rope_backward on its dq, dk; and bit
// for bit against the unfused composition on the GPU (rope_forward, the plain backward,
// rope_backward on dq and dk)
static void att_tc_backward_check(const Att& a, bool causal, bool rope) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd;
    std::string base = att_sz(a);
    std::string name = std::string(causal ? "attention_tc_backward" : "attention_tc_full_backward") +
                       (rope ? "_rope[" : "[") + base + "]";
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const auto gpu_bwd = causal ? attention_tc_backward : attention_tc_full_backward;
    const auto gpu_bwd_rope = causal ? attention_tc_backward_rope : attention_tc_full_backward_rope;
    std::vector<float> ct, st;
    rope_tables(T, hd, ct, st);
    add_att_tc(name, [=] {
        DX Q(nq), K(nk), Vv(nk), DO(nq), O(nq), DQ(nq), DK(nk), DV(nk); DF L(nl), D(nl), CT(ct), ST(st);
        if (rope) gpu_bwd_rope(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, CT.p, ST.p, B, T, H, KV, hd, 0);
        else gpu_bwd(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, B, T, H, KV, hd, 0);
    }, [=] {
        Rng r((rope ? "attention_rope" : "attention") + base);  // without rope: the inputs of check_attention at this shape
        auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
        const auto qa = rope ? att_rope_x(q, ct, st, B, T, H, hd) : q, ka = rope ? att_rope_x(k, ct, st, B, T, KV, hd) : k;
        std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
        (causal ? cpu::attention_forward : cpu::attention_full_forward)(out.data(), lse.data(), qa.data(), ka.data(),
                                                                        v.data(), B, T, H, KV, hd, 0);
        auto out_x = round_x(out);  // what the backward gets as out: a floatX tensor
        (causal ? cpu::attention_backward : cpu::attention_full_backward)(dq.data(), dk.data(), dv.data(), dout.data(),
                                                                          qa.data(), ka.data(), v.data(), out_x.data(),
                                                                          lse.data(), B, T, H, KV, hd, 0);
        auto run = [&](const std::vector<float>* fill) {
            DX Q(q), K(k), Vv(v), DO(dout), O(out_x), DQ(nq), DK(nk), DV(nk); DF L(lse), D(attention_tc_delta_floats(B, H, T));
            DF CT(ct), ST(st);
            if (fill) {  // outputs and scratch that hold numbers, not the NaN of fresh buffers
                dev_upload_floats(DQ.p, fill->data(), nq);
                dev_upload_floats(DK.p, fill->data(), nk);
                dev_upload_floats(DV.p, fill->data() + 1, nk);
                dev_memcpy_h2d(D.p, fill->data() + 2, nl * sizeof(float), 0);
            }
            if (rope) gpu_bwd_rope(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, CT.p, ST.p, B, T, H, KV, hd, 0);
            else gpu_bwd(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, B, T, H, KV, hd, 0);
            return Outs{{"dq", DQ.get()}, {"dk", DK.get()}, {"dv", DV.get()}};
        };
        Outs o = both_schedules([&] { return run(nullptr); });
        std::vector<double> Bo, Bl, Bq, Bk, Bv, Xq, Xk, Xv;
        attention_bounds(a, causal, qa, ka, v, dout, out_x, lse, Bo, Bl, Bq, Bk, Bv);
        att_tc_bwd_extra(a, causal, qa, ka, v, dout, out_x, lse, Xq, Xk, Xv);
        auto E = [](const std::vector<double>& Bb, const std::vector<double>& X) {
            std::vector<double> e = att_E(Bb);
            for (size_t i = 0; i < e.size(); i++) e[i] += X[i];
            return e;
        };
        std::vector<double> tq = tol_x(dq, E(Bq, Xq)), tk = tol_x(dk, E(Bk, Xk));
        if (rope) {  // the reference rotated back, and its tolerance with it
            std::vector<float> dq0(nq), dk0(nk);
            cpu::rope_backward(dq0.data(), dq.data(), ct.data(), st.data(), B, T, H, hd, 0);
            cpu::rope_backward(dk0.data(), dk.data(), ct.data(), st.data(), B, T, KV, hd, 0);
            tq = rope_back_tol(dq0, dq, tq, ct, st, T, H, hd);
            tk = rope_back_tol(dk0, dk, tk, ct, st, T, KV, hd);
            dq = dq0;
            dk = dk0;
        }
        expect("dq", o[0].second, dq, tq);
        expect("dk", o[1].second, dk, tk);
        expect("dv", o[2].second, dv, tol_x(dv, E(Bv, Xv)));
        auto junk = r.vec(nq + 2, -3, 3);
        Outs o3 = run(&junk);
        for (size_t i = 0; i < o.size(); i++) expect_exact((o[i].first + " over numbers").c_str(), o3[i].second, o[i].second);
        if (rope) {
            DX Q(q), K(k), Qr(nq), Kr(nk), Vv(v), DO(dout), O(out_x), DQ(nq), DK(nk), DV(nk); DF L(lse), D(nl), CT(ct), ST(st);
            rope_forward(Qr.p, Q.p, CT.p, ST.p, B, T, H, hd, 0);
            rope_forward(Kr.p, K.p, CT.p, ST.p, B, T, KV, hd, 0);
            gpu_bwd(DQ.p, DK.p, DV.p, DO.p, Qr.p, Kr.p, Vv.p, O.p, L.p, D.p, B, T, H, KV, hd, 0);
            rope_backward(DQ.p, DQ.p, CT.p, ST.p, B, T, H, hd, 0);
            rope_backward(DK.p, DK.p, CT.p, ST.p, B, T, KV, hd, 0);
            expect_exact("dq = unfused", o[0].second, DQ.get());
            expect_exact("dk = unfused", o[1].second, DK.get());
            expect_exact("dv = unfused", o[2].second, DV.get());
        }
    });
}
static void check_attention_tc_backward(const Att& a, bool causal) { att_tc_backward_check(a, causal, false); }
static void check_attention_tc_backward_rope(const Att& a, bool causal) { att_tc_backward_check(a, causal, true); }
// RoPE fused: the launchers refuse a missing or unaligned table; the dispatch fuses only
// with tc selected (and then runs exactly the fused kernels), and refuses otherwise
static void check_attention_tc_rope_refusals_dispatch() {
    add("attention_tc_forward_rope[refuses:one-table,unaligned-table]", [] {
        expect_fail("one table", [] {
            DX X(2 * 64); DF L(2), CT(64);
            attention_tc_forward_rope(X.p, L.p, X.p, X.p, X.p, CT.p, nullptr, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("needs both tables"));
        expect_fail("unaligned", [] {
            DX X(2 * 128); DF L(2), CT(2 * 64 + 4);
            attention_tc_backward_rope(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, L.p, L.p, CT.p, CT.p + 1, 1, 2, 1, 1, 128, 0);
        }, att_tc_refusal("not 16-byte aligned"));
    });
    add("attention_select[rope:refused-without-tc]", [] {
        attention_select(ATTENTION_FP32, 64, 1);
        if (attention_fuses_rope()) problem("attention_fuses_rope() with fp32 selected");
        expect_fail("forward", [] {
            attention_select(ATTENTION_FP32, 64, 1);
            DX X(64); DF L(1), CT(64);
            attention_dispatch_forward_rope(X.p, L.p, X.p, X.p, X.p, CT.p, CT.p, 1, 1, 1, 1, 64, 0);
        }, "only with --attention tc");
        expect_fail("full backward", [] {
            attention_select(ATTENTION_FP32, 64, 1);
            DX X(64); DF L(1), CT(64);
            attention_dispatch_full_backward_rope(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, L.p, L.p, CT.p, CT.p, 1, 1, 1, 1, 64, 0);
        }, "only with --attention tc");
    });
#ifndef ENABLE_FP32
    add("attention_select[rope:dispatch,B=1,T=70,H=2,KV=1,hd=64]", [] {
        const int B = 1, T = 70, H = 2, KV = 1, hd = 64, nq = B * T * H * hd, nk = nq / (H / KV), nl = B * H * T;
        std::vector<float> ct, st;
        rope_tables(T, hd, ct, st);
        attention_select(ATTENTION_TC, hd, 1);
#if !ATTENTION_TC_FUSE_ROPE  // the fusion is off (slower on the H200): tc must not claim it, the fused dispatch refuses
        if (attention_fuses_rope()) problem("attention_fuses_rope() true with ATTENTION_TC_FUSE_ROPE 0");
        DX X(64); DF L(1), C1(64);
        expect_fail("fusion off", [&] {
            attention_dispatch_forward_rope(X.p, L.p, X.p, X.p, X.p, C1.p, C1.p, 1, 1, 1, 1, 64, 0);
        }, "ATTENTION_TC_FUSE_ROPE");
        return;
#endif
        if (!attention_fuses_rope()) problem("attention_fuses_rope() false with tc selected");
        Rng r("attention_dispatch_rope");
        DX Q(r.vec(nq, -1.5, 1.5)), K(r.vec(nk, -1.5, 1.5)), Vv(r.vec(nk, -1, 1)), DO(r.vec(nq, -1, 1));
        DX O1(nq), O2(nq), G1(nq), G2(nk), G3(nk), W1(nq), W2(nk), W3(nk);
        DF L1(nl), L2(nl), D(nl), CT(ct), ST(st);
        attention_dispatch_forward_rope(O1.p, L1.p, Q.p, K.p, Vv.p, CT.p, ST.p, B, T, H, KV, hd, 0);
        attention_tc_forward_rope(O2.p, L2.p, Q.p, K.p, Vv.p, CT.p, ST.p, B, T, H, KV, hd, 0);
        expect_exact("out", O1.get(), O2.get());
        expect_exact("lse", L1.get(), L2.get());
        attention_dispatch_full_backward_rope(G1.p, G2.p, G3.p, DO.p, Q.p, K.p, Vv.p, O1.p, L1.p, D.p, CT.p, ST.p, B, T,
                                              H, KV, hd, 0);
        attention_tc_full_backward_rope(W1.p, W2.p, W3.p, DO.p, Q.p, K.p, Vv.p, O1.p, L1.p, D.p, CT.p, ST.p, B, T, H, KV,
                                        hd, 0);
        expect_exact("dq", G1.get(), W1.get());
        expect_exact("dk", G2.get(), W2.get());
        expect_exact("dv", G3.get(), W3.get());
    });
#endif
}
static void add_attention_tc_backward_checks() {
    // hd 64 and 128; T = 1, 63, 65, 130, 200 (one tile; not multiples of the 64-key, 64- and
    // 32-row tiles; the causal diagonal crossing a ragged last tile); GQA ratios 1, 2, 4; B = 2
    // (H = 2 at the larger T: each check runs the kernels 3 times in the emulator)
    add_att_both_modes({{2, 1, 2, 2, 64}, {2, 1, 4, 1, 128}, {2, 63, 4, 1, 64}, {2, 63, 2, 2, 128}, {2, 65, 4, 2, 64},
                        {2, 65, 4, 1, 128}, {2, 130, 2, 2, 64}, {2, 130, 2, 1, 128}, {2, 200, 2, 1, 64},
                        {2, 200, 2, 2, 128}},
                       check_attention_tc_backward);
    // RoPE fused: hd 64 and 128, T = 1 and ragged, GQA 1, 2, 4
    add_att_both_modes({{2, 1, 2, 1, 128}, {2, 63, 4, 2, 64}, {1, 130, 2, 2, 128}, {1, 200, 4, 1, 64}},
                       check_attention_tc_backward_rope);
    add_att_both_modes(att_tc_new_shapes(true), check_attention_tc_backward);
    add("attention_tc_backward[refuses:hd=100,unaligned,no-delta]", [] {
        expect_fail("hd=100", [] {
            DX X(2 * 4 * 100); DF L(8), D(8);
            attention_tc_backward(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, L.p, D.p, 1, 2, 4, 4, 100, 0);
        }, att_tc_refusal("head dim 100"));
        expect_fail("unaligned", [] {
            DX X(2 * 64 + 8); DF L(2), D(2);
            attention_tc_full_backward(X.p, X.p, X.p, X.p, X.p, X.p + 1, X.p, X.p, L.p, D.p, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("not 16-byte aligned"));
        expect_fail("no delta", [] {
            DX X(2 * 64); DF L(2);
            attention_tc_backward(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, L.p, nullptr, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("no delta scratch"));
    });
    // the dispatch runs the selected backward, with the scratch it asks for (fp32: none; tc: the
    // delta rows; tc2: its workspace, the larger of the two modes' sizes)
#ifndef ENABLE_FP32
    add("attention_select[dispatch_backward,B=1,T=70,H=2,KV=1,hd=64]", [] {
        Rng r("attention_dispatch_backward");
        const int B = 1, T = 70, H = 2, KV = 1, hd = 64;
        const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
        auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
        std::vector<float> out(nq), lse(nl);
        cpu::attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H, KV, hd, 0);
        const AttentionImpl impls[3] = {ATTENTION_FP32, ATTENTION_TC, ATTENTION_TC2};
        const char* names[3] = {"fp32", "tc", "tc2"};
        const size_t tc2_ws = std::max(attention_tc2_workspace_floats(B, T, H, KV, hd, true),
                                       attention_tc2_workspace_floats(B, T, H, KV, hd, false));
        const size_t expect_ns[3] = {0, nl, tc2_ws};
        std::vector<float> got[3][3], want[3][3];
        size_t written_past_delta[3] = {0, 0, 0};  // scratch floats past tc's delta rows that hold numbers
        for (int impl = 0; impl < 3; impl++) {
            attention_select(impls[impl], hd, 1);
            const size_t ns = attention_dispatch_scratch_floats(B, T, H, KV, hd);
            if (ns != expect_ns[impl]) problem("%s: scratch of %zu floats, expected %zu", names[impl], ns, expect_ns[impl]);
            DX Q(q), K(k), Vv(v), DO(dout), O(round_x(out)), G1(nq), G2(nk), G3(nk), W1(nq), W2(nk), W3(nk); DF L(lse), D(tc2_ws);
            attention_dispatch_backward(G1.p, G2.p, G3.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, ns ? D.p : nullptr, B, T, H, KV, hd, 0);
            const std::vector<float> scratch = D.get();
            for (size_t i = nl; i < scratch.size(); i++) written_past_delta[impl] += std::isfinite(scratch[i]) ? 1 : 0;
            if (impl == 2) attention_tc2_backward(W1.p, W2.p, W3.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, B, T, H, KV, hd, 0);
            else if (impl == 1) attention_tc_backward(W1.p, W2.p, W3.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, B, T, H, KV, hd, 0);
            else attention_backward(W1.p, W2.p, W3.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, B, T, H, KV, hd, 0);
            got[impl][0] = G1.get(); got[impl][1] = G2.get(); got[impl][2] = G3.get();
            want[impl][0] = W1.get(); want[impl][1] = W2.get(); want[impl][2] = W3.get();
        }
        for (int impl = 0; impl < 3; impl++)
            for (int i = 0; i < 3; i++) expect_exact(sz("%s %s", names[impl], i == 0 ? "dq" : i == 1 ? "dk" : "dv").c_str(), got[impl][i], want[impl][i]);
        if (got[0][1] == got[1][1]) problem("fp32 and tc gave bitwise equal dk: the dispatch does not switch");
        // at this shape tc2's dq, dk, dv are tc's bit for bit (one 128-key tile adds the same k16
        // products in the same order as tc's two of 64), so the switch shows in the scratch: only
        // tc2 writes its dQ slots past the delta rows (the rest stays the allocation's NaN)
        if (written_past_delta[1] != 0 || written_past_delta[2] == 0)
            problem("scratch past the delta rows written: tc %zu floats, tc2 %zu: the dispatch does not switch",
                    written_past_delta[1], written_past_delta[2]);
    });
#endif
    check_attention_tc_rope_refusals_dispatch();
}

// ---------------------------------------------------------------------------------
// the one-pass tensor-core backward (llmc/kernels/attention_tc2_backward.cuh):
// attention_tc2_backward and attention_tc2_full_backward against the CPU twin at
// attention_tc_backward's bound (att_tc_bwd_extra: the same roundings, P and dS as bf16
// operands; dq's fp32 sums go through the workspace in another order, which E covers, and so
// do dk's and dv's with GQA: the G heads' fp32 partials summed by the dk/dv reduce); both
// schedules bitwise; the overwrite contract (outputs and workspace holding numbers, not NaN);
// without GQA, dk and dv bit for bit attention_tc_backward's (each warp adds the same products
// in the same order, and the fully masked query tiles a 128-key tile visits before a warp's
// keys add exact zeros); dq, dk, dv bit for bit the same with chunks of 1 and 2 key tiles (the
// running sum carried from launch to launch) as with the rule's chunk
static void att_tc2_backward_check(const Att& a, bool causal) {
    const int B = a.B, T = a.T, H = a.H, KV = a.KV, hd = a.hd;
    std::string base = att_sz(a);
    std::string name = std::string(causal ? "attention_tc2_backward[" : "attention_tc2_full_backward[") + base + "]";
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const auto gpu_bwd = causal ? attention_tc2_backward : attention_tc2_full_backward;
    const auto gpu_tc = causal ? attention_tc_backward : attention_tc_full_backward;
    const size_t nw = attention_tc2_workspace_floats(B, T, H, KV, hd, causal);
    add_att_tc(name, [=] {
        DX Q(nq), K(nk), Vv(nk), DO(nq), O(nq), DQ(nq), DK(nk), DV(nk); DF L(nl), Wk(nw);
        gpu_bwd(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, Wk.p, B, T, H, KV, hd, 0);
    }, [=] {
        Rng r("attention" + base);  // the inputs of check_attention at this shape
        auto q = r.vec(nq, -1.5, 1.5), k = r.vec(nk, -1.5, 1.5), v = r.vec(nk, -1, 1), dout = r.vec(nq, -1, 1);
        std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
        (causal ? cpu::attention_forward : cpu::attention_full_forward)(out.data(), lse.data(), q.data(), k.data(),
                                                                        v.data(), B, T, H, KV, hd, 0);
        auto out_x = round_x(out);  // what the backward gets as out: a floatX tensor
        (causal ? cpu::attention_backward : cpu::attention_full_backward)(dq.data(), dk.data(), dv.data(), dout.data(),
                                                                          q.data(), k.data(), v.data(), out_x.data(),
                                                                          lse.data(), B, T, H, KV, hd, 0);
        // chunk 0: the launcher's rule (attention_tc2_[full_]backward); else that many key tiles a chunk
        auto run = [&](const std::vector<float>* fill, int chunk) {
            const size_t nws = chunk ? att_tc2_workspace_floats_chunked(B, T, H, KV, hd, chunk) : nw;
            DX Q(q), K(k), Vv(v), DO(dout), O(out_x), DQ(nq), DK(nk), DV(nk); DF L(lse), Wk(nws);
            if (fill) {  // outputs and workspace that hold numbers, not the NaN of fresh buffers
                dev_upload_floats(DQ.p, fill->data(), nq);
                dev_upload_floats(DK.p, fill->data(), nk);
                dev_upload_floats(DV.p, fill->data() + 1, nk);
                std::vector<float> wj(nws);
                for (size_t i = 0; i < nws; i++) wj[i] = (*fill)[i % fill->size()];
                dev_memcpy_h2d(Wk.p, wj.data(), nws * sizeof(float), 0);
            }
            if (chunk) att_tc2_launch_backward(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, Wk.p, B, T, H, KV, hd,
                                               causal, chunk, 0, "attention_tc2 (chunked)");
            else gpu_bwd(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, Wk.p, B, T, H, KV, hd, 0);
            return Outs{{"dq", DQ.get()}, {"dk", DK.get()}, {"dv", DV.get()}};
        };
        Outs o = both_schedules([&] { return run(nullptr, 0); });
        std::vector<double> Bo, Bl, Bq, Bk, Bv, Xq, Xk, Xv;
        attention_bounds(a, causal, q, k, v, dout, out_x, lse, Bo, Bl, Bq, Bk, Bv);
        att_tc_bwd_extra(a, causal, q, k, v, dout, out_x, lse, Xq, Xk, Xv);
        auto E = [](const std::vector<double>& Bb, const std::vector<double>& X) {
            std::vector<double> e = att_E(Bb);
            for (size_t i = 0; i < e.size(); i++) e[i] += X[i];
            return e;
        };
        expect("dq", o[0].second, dq, tol_x(dq, E(Bq, Xq)));
        expect("dk", o[1].second, dk, tol_x(dk, E(Bk, Xk)));
        expect("dv", o[2].second, dv, tol_x(dv, E(Bv, Xv)));
        auto junk = r.vec(nq + 2, -3, 3);
        Outs o3 = run(&junk, 0);
        for (size_t i = 0; i < o.size(); i++) expect_exact((o[i].first + " over numbers").c_str(), o3[i].second, o[i].second);
        const int bk = att_tc2_bk(att_tc_hdp(hd)), n_kt = (T + bk - 1) / bk;
        for (int c : {1, 2})
            if (c < n_kt) {
                Outs oc = run(&junk, c);
                for (size_t i = 0; i < o.size(); i++)
                    expect_exact(sz("%s, chunks of %d key tile(s)", o[i].first.c_str(), c).c_str(), oc[i].second, o[i].second);
            }
        if (H == KV) {  // with GQA the G heads' partials are fp32 sums of another association
            DX Q(q), K(k), Vv(v), DO(dout), O(out_x), DQ(nq), DK(nk), DV(nk); DF L(lse), D(attention_tc_delta_floats(B, H, T));
            gpu_tc(DQ.p, DK.p, DV.p, DO.p, Q.p, K.p, Vv.p, O.p, L.p, D.p, B, T, H, KV, hd, 0);
            expect_exact("dk = attention_tc_backward's", o[1].second, DK.get());
            expect_exact("dv = attention_tc_backward's", o[2].second, DV.get());
        }
    });
}
static void check_attention_tc2_backward(const Att& a, bool causal) { att_tc2_backward_check(a, causal); }
static void add_attention_tc2_backward_checks() {
    // attention_tc_backward's shapes: hd 64 and 128, T = 1, 63, 65, 130, 200 (one tile; ragged
    // 128-key and 64-, 32-row tiles; 2 key tiles at 130 and 200: the chunked runs), GQA 1, 2, 4,
    // B = 2; and every other compiled width (att_tc_new_shapes: EMU_HARNESS_SAMPLE=1 samples them)
    add_att_both_modes({{2, 1, 2, 2, 64}, {2, 1, 4, 1, 128}, {2, 63, 4, 1, 64}, {2, 63, 2, 2, 128}, {2, 65, 4, 2, 64},
                        {2, 65, 4, 1, 128}, {2, 130, 2, 2, 64}, {2, 130, 2, 1, 128}, {2, 200, 2, 1, 64},
                        {2, 200, 2, 2, 128}},
                       check_attention_tc2_backward);
    add_att_both_modes(att_tc_new_shapes(true), check_attention_tc2_backward);
    // the launch's chunk (att_tc2_chunk_for_waves): never above the plan's, its layout (the slots
    // and A) inside the planned workspace, fewest waves; the shapes the H200 measured
    add("attention_tc2_backward[chunk_for_waves]", [] {
        auto want = [](const char* what, int got, int exp) { if (got != exp) problem("%s: %d key tiles a chunk, expected %d", what, got, exp); };
        want("dit-B, 132 SMs", att_tc2_chunk_for_waves(1, 12, 128, att_tc2_chunk(1, 12, 128), 132), 11);
        want("dit-XL, 132 SMs", att_tc2_chunk_for_waves(1, 16, 128, att_tc2_chunk(1, 16, 128), 132), 16);
        want("llama3-1B B=4, 132 SMs", att_tc2_chunk_for_waves(4, 32, 16, att_tc2_chunk(4, 32, 16), 132), 4);
        want("one chunk of 3, 1 SM", att_tc2_chunk_for_waves(1, 2, 3, 3, 1), 3);  // a single launch is never beaten
        for (int B : {1, 2, 3, 4, 8})
            for (int H : {1, 2, 3, 8, 12, 16, 24, 32, 40})
                for (int T : {1, 100, 128, 129, 700, 2048, 5000, 16384})
                    for (int sms : {1, 7, 78, 114, 132, 144}) {
                        const int hd = 64, bk = att_tc2_bk(att_tc_hdp(hd)), n_kt = (T + bk - 1) / bk;
                        const int plan = att_tc2_chunk(B, H, n_kt), c = att_tc2_chunk_for_waves(B, H, n_kt, plan, sms);
                        if (c < 1 || c > plan) problem("B %d H %d T %d on %d SMs: chunk %d outside 1..%d", B, H, T, sms, c, plan);
                        if (att_tc2_workspace_floats_chunked(B, T, H, H, hd, c) > attention_tc2_workspace_floats(B, T, H, H, hd, false))
                            problem("B %d H %d T %d on %d SMs: chunks of %d need more workspace than the plan's %d", B, H, T, sms, c, plan);
                    }
    });
    add("attention_tc2_backward[refuses:hd=100,unaligned,no-workspace,unaligned-workspace]", [] {
        expect_fail("hd=100", [] {
            DX X(2 * 4 * 100); DF W(64);
            attention_tc2_backward(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, W.p, W.p, 1, 2, 4, 4, 100, 0);
        }, att_tc_refusal("head dim 100"));
        expect_fail("unaligned", [] {
            DX X(2 * 64 + 8); DF W(attention_tc2_workspace_floats(1, 2, 1, 1, 64, false));
            attention_tc2_full_backward(X.p, X.p, X.p, X.p, X.p, X.p + 1, X.p, X.p, W.p, W.p, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("not 16-byte aligned"));
        expect_fail("no workspace", [] {
            DX X(2 * 64); DF L(2);
            attention_tc2_backward(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, L.p, nullptr, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("no workspace"));
        expect_fail("unaligned workspace", [] {
            DX X(2 * 64); DF W(attention_tc2_workspace_floats(1, 2, 1, 1, 64, true) + 4);
            attention_tc2_backward(X.p, X.p, X.p, X.p, X.p, X.p, X.p, X.p, W.p, W.p + 1, 1, 2, 1, 1, 64, 0);
        }, att_tc_refusal("workspace at"));
    });
    // the rule's worked numbers in the header of attention_tc2_backward.cuh (what the memory plan cites)
    add("attention_tc2_workspace_floats[worked-numbers]", [] {
        const size_t l1 = attention_tc2_workspace_floats(4, 2048, 32, 8, 64, true);
        const size_t db = attention_tc2_workspace_floats(1, 16384, 12, 12, 64, false);
        const size_t dx = attention_tc2_workspace_floats(1, 16384, 16, 16, 72, false);
        if (l1 != 117702656u) problem("llama3-1B: %zu floats, the header says 117,702,656", l1);
        if (db != 214106112u) problem("dit-B: %zu floats, the header says 214,106,112", db);
        if (dx != 321126400u) problem("dit-XL: %zu floats, the header says 321,126,400", dx);
        if (attention_tc2_workspace_floats(1, 16384, 16, 16, 72, true) != dx) problem("causal and full differ");
        // the bound: 17 N + B H T without GQA, 19 N + B H T with (C = 16 needs B H <= 16)
        const size_t n1 = (size_t)1 * 8192 * 16 * 64, w1 = attention_tc2_workspace_floats(1, 8192, 16, 16, 64, true);
        const size_t w4 = attention_tc2_workspace_floats(1, 8192, 16, 4, 64, true);
        if (w1 != 17 * n1 + 16 * 8192) problem("B H 16, G 1: %zu floats, the rule says 17 N + B H T", w1);
        if (w4 != 19 * n1 + 16 * 8192) problem("B H 16, G 4: %zu floats, the rule says 19 N + B H T", w4);
    });
}

int main(int argc, char** argv) {
    const char* filter = nullptr;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "--filter") && i + 1 < argc) filter = argv[++i];
        else if (!strcmp(argv[i], "--list")) list = true;
        else if (!strcmp(argv[i], "--verbose")) g_verbose = true;
        else { fprintf(stderr, "usage: %s [--filter SUBSTRING] [--list] [--verbose]\n", argv[0]); return 2; }
    }
    const int nk = (int)(sizeof emu_kernel_list / sizeof emu_kernel_list[0]);
    emu::kernel_table = emu_kernel_list;
    emu::kernel_table_n = nk;
    // coverage flags in memory shared with the check processes
    emu::covered = (unsigned char*)mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (emu::covered == MAP_FAILED || nk > 4096) { fprintf(stderr, "coverage map failed\n"); return 2; }

    // sizes: odd ones, and those of the test references (D=24, V=67, F=61, hd=6/8/12,
    // T=7/9/16/20, GQA H=4 KV=2, MQA H=6 KV=1), plus shapes that cross tile edges
    const std::vector<MM> mms = {
        {14, 24, 67, 24, 0},   // lm head: B*T=14, D=24 -> V=67
        {9, 61, 24, 61, 0},    // FFN down: F=61 -> D=24
        {20, 24, 61, 24, 0},   // FFN up
        {16, 20, 24, 61, 21},  // a hidden chunk: W2[:, 21:41] in place (row stride 61, unaligned start)
        {33, 17, 35, 19, 1},   // every size crosses the 16-tile edge, ldw > C + c0
        {1, 1, 1, 1, 0},
        {5, 0, 3, 4, 0},       // empty inner dimension for the forward: out = 0 or unchanged
        {4, 3, 0, 3, 0},       // empty inner dimension for backward_input
    };
    for (const MM& m : mms)
        for (int path = 0; path <= 1; path++)
            for (int which = 0; which < 3; which++) check_matmul(m, path, which);
    for (const MM& m : std::vector<MM>{{14, 24, 67, 24, 0}, {16, 20, 24, 61, 21}, {33, 17, 35, 19, 1}, {5, 0, 3, 4, 0}})
        for (int path = 0; path <= 1; path++)
            for (int variant = 0; variant < 3; variant++) check_matmul_residual(m, path, variant);
    for (int path = 0; path <= 1; path++) check_matmul_cache(path);
    check_encoder(14, 24, 67, 2);
    check_encoder(7, 24, 67, 1);
    check_encoder(300, 40, 10000, 0);  // > 256 tokens (several chunks), > 256 vocabulary tiles
    check_encoder(64, 300, 5, 2);      // D > 256: two channel blocks, the second partial
    // the grouped backward: a group of 600 rows (three rounds of 256 positions), one channel
    // a thread (D = 13), more tokens than a rank tile (2100 > 2048); above ENC_SORT_MAX
    // (16400 tokens) the tile kernel
    check_encoder(600, 16, 67, 1);
    check_encoder(50, 13, 67, 2);
    check_encoder(2100, 8, 500, 0);
    check_encoder(ENC_SORT_MAX + 16, 8, 50, 2);
    // vocabulary ranges (the vocab-parallel embedding): windows through the token set, at
    // the top of it, empty, hit by no token; > 256 tiles of the range; D > 256
    check_encoder_range(14, 24, 67, 20, 25);
    check_encoder_range(7, 24, 67, 0, 30);
    check_encoder_range(20, 24, 67, 60, 7);
    check_encoder_range(9, 24, 67, 30, 0);
    check_encoder_range(5, 24, 67, 67, 10);
    check_encoder_range(300, 40, 10000, 1000, 9000);
    check_encoder_range(64, 300, 67, 10, 40);
    check_encoder_shards(14, 24, 67, 3);
    check_encoder_shards(300, 40, 10000, 4);
    check_encoder_shards(20, 24, 9, 4);  // Vs = 3: the last shard is empty
    check_encoder_shards(64, 300, 67, 2);
    for (auto nc : std::vector<std::pair<int, int>>{{14, 24}, {9, 61}, {65, 24}, {37, 33}, {20, 67}, {1, 1}}) check_rmsnorm(nc.first, nc.second);
    // rmsnorm's variants (see check_rmsnorm), aligned and not: C = 8 (32 rows per warp), 64 (the
    // DiT's q/k norm), 136, 264, 520, 1032, 2056 (registers per lane: 1, 2, 4, 8, none in bf16;
    // 1, 2, 4, 8, none in fp32); N = 700 at C = 264 and N = 2000 at C = 24: more than 16
    // blocks in the backward; C = 24600: the two-kernel backward; C >= 264 aligned: the
    // forward's streaming kernel (its unaligned twin, the per-row kernel, must give the same
    // bits), N = 2300: more rows than its grid of 2 blocks of 8 warps on each of 132 SMs;
    // the same for the backward's streaming kernel (C from 264 to 2048 in bf16, 136 to 520 in
    // fp32), which streams several rows a warp at N = 700 and 2300 (2 chunks a lane in
    // bf16), 200 at C = 1032 (5 of 8) and 150 at C = 2048 (8; fp32: the per-row kernel)
    for (auto nc : std::vector<std::pair<int, int>>{{37, 8}, {19, 64}, {9, 136}, {13, 264}, {5, 520}, {3, 1032}, {3, 2056},
                                                    {700, 264}, {2000, 24}, {3, 24600}, {2300, 264}, {200, 1032},
                                                    {150, 2048}})
        for (int off = 0; off <= 1; off++) check_rmsnorm(nc.first, nc.second, off);
    check_rmsnorm(9, 61, 1);
    // rope: hd 6 (the pair path), 8 (16-byte chunks), 12 (chunks in fp32, pairs in bf16),
    // 16; q and k in one launch with KV < H, KV = 1 and more units a row than a block
    // (H 40 + KV 8 at hd 64: 384 chunks in bf16, 768 in fp32); unaligned (off 1) and
    // offset tables (pos0 3)
    for (auto s : std::vector<std::array<int, 4>>{{2, 7, 4, 6}, {1, 9, 6, 8}, {1, 16, 2, 12}, {2, 20, 1, 8}})
        for (int bwd = 0; bwd <= 1; bwd++) {
            for (int mode = 0; mode <= 1; mode++) check_rope(s[0], s[1], s[2], 0, s[3], bwd, mode);
            check_rope(s[0], s[1], s[2], 0, s[3], bwd, 0, 1);
        }
    for (auto s : std::vector<std::array<int, 5>>{{2, 7, 4, 2, 16}, {1, 9, 3, 1, 8}, {2, 5, 6, 2, 12}, {1, 3, 2, 2, 6},
                                                  {1, 3, 40, 8, 64}})
        for (int bwd = 0; bwd <= 1; bwd++) {
            check_rope(s[0], s[1], s[2], s[3], s[4], bwd, 2);
            check_rope(s[0], s[1], s[2], s[3], s[4], bwd, 2, 1, 3);
        }
    for (size_t n : {(size_t)1, (size_t)427, (size_t)1001, (size_t)4099}) {
        check_swiglu(n, 0, 0);
        check_swiglu(n, 1, 0);
        check_swiglu(n, 1, 1);
        if (n > 1) {  // not 16-byte aligned: the element-by-element path, equal to the 16-byte one
            check_swiglu(n, 0, 0, 1);
            check_swiglu(n, 1, 1, 1);
        }
    }
    check_crossentropy(14, 67, 4);
    check_crossentropy(3, 1000, 4);   // V > 512 threads
    check_crossentropy(2, 1, 4);      // V = 1
    check_crossentropy(5, 513, 40);   // logits far from 0: the max must be subtracted
    check_crossentropy(4, 1000, 4, 1);  // 16-byte chunks, logits not 16-byte aligned: the element path, bit-equal
    check_crossentropy(3, 4104, 40, 1); // more than 512 chunks: threads take several, the max rises later in a row
    check_crossentropy(3, 4104, 4);
    check_crossentropy(5, 13, 4, 1);    // V < one chunk per thread, a partial last chunk
    check_crossentropy(64, 24, 1, 1);   // logits near 0, lse ~ 3: a different order of the sums shows in the last bit
    // vocab-parallel cross-entropy: each launcher against its twin on a shard of rank 2
    // (v0 = 2 Vs), full, with 3 padding columns, empty; Vs = 1000 and 64 take the 16-byte
    // path (off=1: the element path, bit-equal); 4104 > 512 chunks
    for (int N : {1, 3, 14})
        for (int Vs : {1, 7, 67, 1000})
            for (int nv : {Vs, Vs - 3, 0})
                if (nv >= 0) check_crossentropy_vp(N, Vs, nv, 2 * Vs);
    check_crossentropy_vp(3, 1000, 1000, 2000, 1);
    check_crossentropy_vp(3, 1000, 997, 2000, 1);
    check_crossentropy_vp(5, 64, 61, 64);
    check_crossentropy_vp(5, 64, 61, 64, 1);
    check_crossentropy_vp(2, 4104, 4100, 4104);
    check_crossentropy_vp_composition(14, 67, 3, 4);    // Vs = 23, the last shard 21 columns
    check_crossentropy_vp_composition(3, 1000, 3, 4);   // Vs = 334
    check_crossentropy_vp_composition(4, 1023, 2, 4);   // Vs = 512: the 16-byte path with a padding column
    check_crossentropy_vp_composition(5, 9, 4, 4);      // Vs = 3: the last shard empty
    check_crossentropy_vp_composition(3, 513, 4, 40);   // logits far from 0
    check_crossentropy_vp_composition(2, 67, 1, 4);     // tp = 1: one shard, the whole vocabulary
    for (size_t n : {(size_t)1, (size_t)1001})
        for (int ms = 0; ms <= 1; ms++) check_adamw(n, ms, ms ? 7 : 1);
    check_gnorm(1);
    check_gnorm(1000);
    check_gnorm(300001);  // > 1024 blocks x 256 threads: the grid-stride loop wraps
    add_att_both_modes({{2, 7, 4, 2, 6},     // GQA H=4 KV=2
                        {1, 9, 6, 1, 8},     // MQA H=6 KV=1
                        {1, 16, 4, 4, 12},   // MHA
                        {2, 20, 6, 2, 8},
                        {1, 33, 4, 2, 8},    // two tiles of 32
                        {1, 65, 2, 1, 12},   // three tiles
                        {1, 1, 1, 1, 2},     // T = 1
                        {2, 45, 4, 2, 10},   // hd = 10 (not a multiple of 4), GQA, a ragged second tile
                        {1, 37, 2, 2, 130}}, // hd > 128 (5 dims per lane); > 48 KiB of shared memory
                       check_attention);
    // the twin against fp64 softmax attention: T = 150 and hd = 130 (56-key tiles) cross the twin's tiles
    add_att_both_modes({{2, 9, 4, 2, 10}, {1, 150, 2, 1, 12}, {1, 70, 2, 2, 130}, {1, 1, 1, 1, 2}}, check_attention_twin);
    add_attention_tc_forward_checks();  // llmc/kernels/attention_tc.cuh: attention_tc_forward[...], attention_tc_full_forward[...]
    add_attention_tc2_forward_checks();  // llmc/kernels/attention_tc2.cuh: attention_tc2_forward[...], attention_tc2_full_forward[...]
    add_attention_tc_backward_checks();  // llmc/kernels/attention_tc_backward.cuh: attention_tc_backward[...], attention_tc_full_backward[...]
    add_attention_tc2_backward_checks();  // llmc/kernels/attention_tc2_backward.cuh: attention_tc2_backward[...], attention_tc2_full_backward[...]
    check_gridstride();
    add_dit_elementwise_checks();  // activations, patchify, timestep embedding, rectified flow
    // adaLN and gated residual: the DiT's ld = 6D with shift/gate at 0 and scale at D;
    // odd ld and unaligned column offsets; N = 1; C = 1 (shift and scale the same
    // column); N > 16 row slices; C > 256 (several column blocks, 10 columns per lane)
    for (const Ada& a : std::vector<Ada>{{2, 7, 24, 144, 0, 24},
                                         {3, 5, 33, 101, 1, 67},
                                         {1, 1, 1, 1, 0, 0},
                                         {2, 1, 7, 9, 2, 0},
                                         {1, 65, 61, 61, 0, 0},
                                         {2, 37, 300, 301, 1, 0}}) {
        for (int bwd = 0; bwd <= 1; bwd++) check_layernorm_modulate(a, bwd, 0.0f);
        for (int ip = 0; ip <= 1; ip++) check_gated_residual(a, 0, ip, 0);
        for (int acc = 0; acc <= 1; acc++) {
            check_gated_residual(a, 1, 0, acc);
            check_gated_residual(a, 1, 1, acc);
        }
        check_gated_residual(a, 1, 2, 0);
    }
    check_layernorm_modulate({2, 9, 61, 366, 0, 61}, 0, 10.0f);  // |mean| >> std: needs the two-pass variance
    check_layernorm_modulate({2, 9, 61, 366, 0, 61}, 1, 10.0f);
    // the paths of adaln.cuh: rows in registers at every vector count (bf16 / fp32: C = 24
    // nv 1/1, 256 1/2, 512 2/4, 1024 4/8, 2048 8/16, 4096 16/none: the scalar kernels);
    // the two-stage column sums (N over ADALN_CHUNK = 256 rows: 2 and 3 chunks, the last
    // partial), with vectors and without (odd C and ld, unaligned columns), and the
    // one-stage kernel at the same N without scratch
    for (const Ada& a : std::vector<Ada>{{1, 3, 256, 1536, 0, 256},
                                         {1, 2, 512, 3072, 512, 1024},
                                         {1, 2, 1024, 1024, 0, 0},
                                         {1, 2, 2048, 2048, 0, 0},
                                         {1, 2, 4096, 4096, 0, 0}})
        for (int bwd = 0; bwd <= 1; bwd++) check_layernorm_modulate(a, bwd, 0.0f);
    for (const Ada& a : std::vector<Ada>{{1, 530, 48, 288, 48, 96}, {2, 300, 33, 101, 1, 67}}) {
        for (int ns = 0; ns <= 1; ns++) {
            check_layernorm_modulate(a, 1, 0.0f, ns);
            check_gated_residual(a, 1, 0, 1, ns);
            check_gated_residual(a, 1, 1, 0, ns);
        }
        check_layernorm_modulate(a, 0, 0.0f);
        check_gated_residual(a, 0, 1, 0);
    }
    // bias: OC = 24 and 48 take the vector forward (bf16 and fp32), 61 and 67 not; N = 300
    // and 530 the two-stage backward (and without scratch, the one-stage kernel)
    for (auto nc : std::vector<std::pair<int, int>>{{14, 24}, {9, 61}, {1, 1}, {300, 67}, {37, 300}, {5, 7}, {530, 48}})
        for (int bwd = 0; bwd <= 1; bwd++) check_bias(nc.first, nc.second, bwd);
    check_bias(300, 67, 1, 1);
    check_bias(530, 48, 1, 1);
    check_gridstride_adaln();
    add_step_checks();  // grad_accumulate (fp32 gradient accumulation), sum_accumulate (the loss on the device)
    add_context_parallel_checks();  // attention_merge, float_accumulate, copy_2d (llmc/parallel/context_parallel.h)

    int passed = 0, failed = 0;
    for (const Check& c : g_checks) {
        if (filter && c.name.find(filter) == std::string::npos) continue;
        if (list) { printf("%s\n", c.name.c_str()); continue; }
        if (run_check(c)) passed++; else failed++;
    }
    if (list) return 0;
    if (!filter) {
        std::string missing;
        int bf16_only = 0, sampled_out = 0;
        for (int i = 0; i < nk; i++) {
#ifdef ENABLE_FP32
            // the tensor-core attention kernels are bf16 only: not compiled in this build
            // (their launchers FAIL, checked above); the bf16 build covers them
            if (strncmp(emu_kernel_list[i].name, "attention_tc_", 13) == 0 ||
                strncmp(emu_kernel_list[i].name, "attention_tc2_", 14) == 0) { bf16_only++; continue; }
#endif
#ifndef ENABLE_FP32
            // each family against the head dims its checks sample (tc2's backward runs tc's shapes)
            if (att_sampled_out(emu_kernel_list[i].name, "attention_tc_", att_tc_new_hds()) ||
                att_sampled_out(emu_kernel_list[i].name, "attention_tc2_forward_", att_tc2_hds()) ||
                att_sampled_out(emu_kernel_list[i].name, "attention_tc2_bwd_", att_tc_new_hds())) { sampled_out++; continue; }
#endif
            if (!emu::covered[i]) missing += std::string(missing.empty() ? "" : ", ") + emu_kernel_list[i].name;
        }
        if (missing.empty()) {
            if (bf16_only) printf("PASS %s.coverage[all %d kernels of llmc/kernels/*.cuh launched; %d bf16-only attention_tc_* and attention_tc2_* kernels are not compiled in this build]\n", BUILD, nk - bf16_only, bf16_only);
            else if (sampled_out) printf("PASS %s.coverage[all %d kernels of llmc/kernels/*.cuh launched but the %d attention_tc_* and attention_tc2_* kernels of the head dims EMU_HARNESS_SAMPLE=1 leaves out]\n", BUILD, nk - sampled_out, sampled_out);
            else printf("PASS %s.coverage[all %d kernels of llmc/kernels/*.cuh launched]\n", BUILD, nk);
            passed++;
        }
        else { printf("FAIL %s.coverage: kernels never launched by any check (add a check to dev/emu/harness.cpp): %s\n", BUILD, missing.c_str()); failed++; }
    }
    fflush(stdout);
    fprintf(stderr, "emu %s: %d passed, %d failed\n", BUILD, passed, failed);
    return failed ? 1 : 0;
}
