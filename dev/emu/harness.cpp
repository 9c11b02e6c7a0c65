/*
Checks every llmc CUDA launcher, run in the host emulator (emu.h), against its CPU twin
(llmc/cpu/*.h) on random data at odd sizes. Built twice by dev/emu/run.sh: with
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
#include "kernels.h"  // the transformed llmc/*.cuh (OUT_DIR first on the include path)
#include "emu_kernels.inc"

#include <sys/wait.h>
#include <signal.h>
#include <array>
#include <functional>
#include <random>
#include <string>
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

// ---------------------------------------------------------------------------------
// rmsnorm. forward: ss = sum x^2 (C positive terms), r = 1/sqrt(ss/C + eps), y = x r w:
// B(r) = (C + 8) r, B(y) = (C + 8) |y|. backward: dinp = dinp0 + r w dy - k x with
// k = r^3/C sum dy w x: B = (C + 8) (|dinp0| + r |w dy| + r^3/C sum|dy w x| |x|);
// dw = dw0 + sum_i dy x r over N rows: B = (N + 8) (|dw0| + sum_i |dy x| r).
static void check_rmsnorm(int N, int C) {
    const float eps = 1e-5f;
    std::string n1 = sz("rmsnorm_forward[N=%d,C=%d]", N, C);
    add(n1, [=] {
        Rng r(n1);
        auto x = r.vec((size_t)N * C, -2, 2), w = r.vec(C, 0.5, 1.5);
        std::vector<float> ref((size_t)N * C), rstd(N);
        cpu::rmsnorm_forward(ref.data(), rstd.data(), x.data(), w.data(), N, C, eps, 0);
        Outs o = both_schedules([&] {
            DX X(x), W(w), O((size_t)N * C); DF RS(N);
            rmsnorm_forward(O.p, RS.p, X.p, W.p, N, C, eps, 0);
            return Outs{{"out", O.get()}, {"rstd", RS.get()}};
        });
        std::vector<double> Eo(ref.size()), Er(N);
        for (size_t i = 0; i < ref.size(); i++) Eo[i] = 2 * U * (C + 8) * fabs((double)ref[i]);
        for (int i = 0; i < N; i++) Er[i] = 2 * U * (C + 8) * fabs((double)rstd[i]);
        expect("out", o[0].second, ref, tol_x(ref, Eo));
        expect("rstd", o[1].second, rstd, tol_f(Er));
    });
    std::string n2 = sz("rmsnorm_backward[N=%d,C=%d]", N, C);
    add(n2, [=] {
        Rng r(n2);
        auto x = r.vec((size_t)N * C, -2, 2), w = r.vec(C, 0.5, 1.5), dout = r.vec((size_t)N * C, -1, 1);
        auto dinp0 = r.vec((size_t)N * C, -1, 1), dw0 = r.vec(C, -1, 1);
        std::vector<float> y((size_t)N * C), rstd(N);
        cpu::rmsnorm_forward(y.data(), rstd.data(), x.data(), w.data(), N, C, eps, 0);
        auto rdinp = dinp0, rdw = dw0;
        cpu::rmsnorm_backward(rdinp.data(), rdw.data(), dout.data(), x.data(), w.data(), rstd.data(), N, C, 0);
        Outs o = both_schedules([&] {
            DX X(x), W(w), DO(dout), DI_(dinp0), DW(dw0); DF RS(rstd);
            rmsnorm_backward(DI_.p, DW.p, DO.p, X.p, W.p, RS.p, N, C, 0);
            return Outs{{"dinp", DI_.get()}, {"dw", DW.get()}};
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
    });
}

// ---------------------------------------------------------------------------------
// rope: a rotation of each pair, in place or not. B = 8 (|x0 c| + |x1 s|).
static void check_rope(int B, int T, int nh, int hd, int backward, int in_place) {
    std::string name = sz("%s[B=%d,T=%d,nh=%d,hd=%d,%s]", backward ? "rope_backward" : "rope_forward", B, T, nh, hd,
                          in_place ? "in-place" : "out-of-place");
    add(name, [=] {
        Rng r(name);
        int half = hd / 2, S = T + 5;  // the table is longer than T, as in the trainer
        std::vector<float> ct((size_t)S * half), st((size_t)S * half);
        for (int t = 0; t < S; t++)
            for (int i = 0; i < half; i++) {
                double a = t * pow(10000.0, -2.0 * i / hd);
                ct[(size_t)t * half + i] = (float)cos(a);
                st[(size_t)t * half + i] = (float)sin(a);
            }
        size_t n = (size_t)B * T * nh * hd;
        auto x = r.vec(n, -2, 2);
        std::vector<float> ref(n);
        if (backward) cpu::rope_backward(ref.data(), x.data(), ct.data(), st.data(), B, T, nh, hd, 0);
        else cpu::rope_forward(ref.data(), x.data(), ct.data(), st.data(), B, T, nh, hd, 0);
        Outs o = both_schedules([&] {
            DX X(x), Y(n); DF CT(ct), ST(st);
            floatX* out = in_place ? X.p : Y.p;
            if (backward) rope_backward(out, X.p, CT.p, ST.p, B, T, nh, hd, 0);
            else rope_forward(out, X.p, CT.p, ST.p, B, T, nh, hd, 0);
            return Outs{{"out", in_place ? X.get() : Y.get()}, {"inp", X.get()}};
        });
        std::vector<double> E(n);
        for (size_t p = 0; p < n / 2; p++) {
            int i = (int)(p % half), t = (int)((p / ((size_t)half * nh)) % T);
            double m = fabs((double)x[2 * p] * ct[(size_t)t * half + i]) + fabs((double)x[2 * p + 1] * st[(size_t)t * half + i]);
            m += fabs((double)x[2 * p] * st[(size_t)t * half + i]) + fabs((double)x[2 * p + 1] * ct[(size_t)t * half + i]);
            E[2 * p] = E[2 * p + 1] = 2 * U * 8 * m;
        }
        expect("out", o[0].second, ref, tol_x(ref, E));
        if (!in_place) expect_exact("inp kept", o[1].second, x);
    });
}

// ---------------------------------------------------------------------------------
// swiglu: elementwise. forward silu(a) b: B = 8 |y|. backward: dh3 = g silu(a): B = 8 |dh3|;
// dh1 = g b sig (1 + a (1 - sig)): B = 8 |g b sig| (1 + 2 |a|) (1 - sig cancels for large a).
static void check_swiglu(size_t n, int backward, int alias) {
    std::string name = sz("%s[n=%zu%s]", backward ? "swiglu_backward" : "swiglu_forward", n, alias ? ",dh1=dout" : "");
    add(name, [=] {
        Rng r(name);
        auto a = r.vec(n, -9, 9), b = r.vec(n, -2, 2), g = r.vec(n, -1, 1);
        if (!backward) {
            std::vector<float> ref(n);
            cpu::swiglu_forward(ref.data(), a.data(), b.data(), n, 0);
            Outs o = both_schedules([&] {
                DX A(a), Bb(b), O(n);
                swiglu_forward(O.p, A.p, Bb.p, n, 0);
                return Outs{{"out", O.get()}};
            });
            std::vector<double> E(n);
            for (size_t i = 0; i < n; i++) E[i] = 2 * U * 8 * fabs((double)ref[i]);
            expect("out", o[0].second, ref, tol_x(ref, E));
        } else {
            std::vector<float> r1(n), r3(n);
            cpu::swiglu_backward(r1.data(), r3.data(), g.data(), a.data(), b.data(), n, 0);
            Outs o = both_schedules([&] {
                DX A(a), Bb(b), G(g), D1(n), D3(n);
                swiglu_backward(alias ? G.p : D1.p, D3.p, G.p, A.p, Bb.p, n, 0);
                return Outs{{"dh1", alias ? G.get() : D1.get()}, {"dh3", D3.get()}};
            });
            std::vector<double> E1(n), E3(n);
            for (size_t i = 0; i < n; i++) {
                double sig = 1.0 / (1.0 + exp(-(double)a[i]));
                E1[i] = 2 * U * 8 * fabs((double)g[i] * b[i] * sig) * (1 + 2 * fabs((double)a[i]));
                E3[i] = 2 * U * 8 * fabs((double)r3[i]);
            }
            expect("dh1", o[0].second, r1, tol_x(r1, E1));
            expect("dh3", o[1].second, r3, tol_x(r3, E3));
        }
    });
}

// ---------------------------------------------------------------------------------
// crossentropy. lse = m + log(sum_j exp(x_j - m)): V positive terms <= 1 with sum >= 1,
// so B(lse) = (V + 8)(1 + |m| + |lse|); loss = lse - x_t: B = B(lse) + 8 |x_t|;
// p_j = exp(x_j - lse) dloss has relative bound B(lse) + 8 (1 + |x_j|), and the target
// element subtracts dloss: + 8 |dloss|.
static void check_crossentropy(int N, int V, float spread) {
    std::string name = sz("crossentropy_forward_backward[N=%d,V=%d%s]", N, V, spread > 10 ? ",large-logits" : "");
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
                DX L(lg); DI T(tg); DF LS(N);
                crossentropy_forward_backward(LS.p, L.p, T.p, N, V, dloss, wd, 0);
                return Outs{{"losses", LS.get()}, {"logits", L.get()}};
            });
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
    std::string base = sz("B=%d,T=%d,H=%d,KV=%d,hd=%d", B, T, H, KV, hd);
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
    std::string base = sz("B=%d,T=%d,H=%d,KV=%d,hd=%d", B, T, H, KV, hd);
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
// adaLN (llmc/adaln.cuh). Activations [B*N, C]; the modulation vectors are the columns
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

static void check_layernorm_modulate(const Ada& a, int backward, float center) {
    const float eps = 1e-6f;
    const int B = a.B, N = a.N, C = a.C, ld = a.ld, rows = a.B * a.N;
    std::string name = sz("%s[%s%s]", backward ? "layernorm_modulate_backward" : "layernorm_modulate_forward",
                          ada_sz(a).c_str(), center != 0 ? sz(",mean=%g", center).c_str() : "");
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
                                         mean.data(), rstd.data(), ada.data() + a.off_b, ld, B, N, C, 0);
        Outs o = both_schedules([&] {
            DX X(x), A(ada), DO(dout), DIN(dinp0), DSH(dsh0), DSC(dsc0); DF M(mean), RS(rstd);
            layernorm_modulate_backward(DIN.p, DSH.p + a.off_a, DSC.p + a.off_b, DO.p, X.p, M.p, RS.p, A.p + a.off_b, ld, B,
                                        N, C, 0);
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
static void check_gated_residual(const Ada& a, int backward, int mode, int accumulate) {
    const int B = a.B, N = a.N, C = a.C, ld = a.ld, rows = a.B * a.N;
    static const char* bmodes[3] = {"dy+dgate", "dgate-only", "dy-only"};
    std::string name = backward ? sz("gated_residual_backward[%s,%s,accumulate=%d]", ada_sz(a).c_str(), bmodes[mode], accumulate)
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
                                     yv.data(), ada.data() + a.off_a, ld, B, N, C, accumulate, 0);
        Outs o = both_schedules([&] {
            DX DO(dout), Y(yv), A(ada), DY(n), DG(dg0);  // DY left 0xFF: every element must be written
            gated_residual_backward(with_dy ? DY.p : nullptr, with_dgate ? DG.p + a.off_a : nullptr, DO.p, Y.p, A.p + a.off_a,
                                    ld, B, N, C, accumulate, 0);
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
// bias (llmc/bias.cuh). forward out = out0 + bias: B = |out0| + |bias|.
// backward dbias = dbias0 + sum_r dout: B = (N + 2) (|dbias0| + sum|dout|).
static void check_bias(int N, int OC, int backward) {
    std::string name = sz("%s[N=%d,OC=%d]", backward ? "bias_backward" : "bias_forward", N, OC);
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
        cpu::bias_backward(ref.data(), dout.data(), N, OC, 0);
        Outs o = both_schedules([&] {
            DX DO(dout), D(d0);
            bias_backward(D.p, DO.p, N, OC, 0);
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
        cpu::gated_residual_backward(ref.data(), nullptr, dout.data(), yv.data(), ada.data() + a.off_a, a.ld, a.B, a.N, a.C, 0, 0);
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
        cpu::gated_residual_backward(nullptr, ref.data() + a.off_a, dout.data(), yv.data(), ada.data() + a.off_a, a.ld, a.B, a.N, a.C, 1, 0);
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
                                         rstd.data(), ada.data() + a.off_b, a.ld, a.B, a.N, a.C, 0);
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
// grid-stride loops: the launchers cap the grid at 65536 blocks, so their loops wrap only
// beyond 2^24 elements, too many to emulate. These checks launch the kernels themselves
// with a small grid (the launch of a real llmc kernel, only the grid is chosen here).
static void check_gridstride() {
    add("swiglu_forward_kernel[grid-stride,n=1001,grid=3x64]", [] {
        Rng r("gs-swiglu");
        size_t n = 1001;
        auto a = r.vec(n, -9, 9), b = r.vec(n, -2, 2);
        std::vector<float> ref(n);
        cpu::swiglu_forward(ref.data(), a.data(), b.data(), n, 0);
        Outs o = both_schedules([&] {
            DX A(a), Bb(b), O(n);
            ::emu::launch("swiglu_forward_kernel", __FILE__, __LINE__, dim3(3), dim3(64), 0, 0, swiglu_forward_kernel, O.p, A.p, Bb.p, n);
            return Outs{{"out", O.get()}};
        });
        std::vector<double> E(n);
        for (size_t i = 0; i < n; i++) E[i] = 2 * U * 8 * fabs((double)ref[i]);
        expect("out", o[0].second, ref, tol_x(ref, E));
    });
    add("encoder_forward_kernel[grid-stride,N=37,D=24,grid=5x32]", [] {
        Rng r("gs-enc");
        int N = 37, D = 24, V = 67;
        std::vector<int> tok(N);
        for (auto& t : tok) t = r.below(V);
        auto wte = r.vec((size_t)V * D, -1, 1);
        std::vector<float> ref((size_t)N * D);
        cpu::encoder_forward(ref.data(), tok.data(), wte.data(), N, D, 0);
        Outs o = both_schedules([&] {
            DI Tk(tok); DX W(wte), O((size_t)N * D);
            ::emu::launch("encoder_forward_kernel", __FILE__, __LINE__, dim3(5), dim3(32), 0, 0, encoder_forward_kernel, O.p, Tk.p, W.p, N, D);
            return Outs{{"out", O.get()}};
        });
        expect_exact("out", o[0].second, ref);
    });
    add("rope_kernel[grid-stride,B=2,T=9,nh=3,hd=8,grid=2x32]", [] {
        Rng r("gs-rope");
        int B = 2, T = 9, nh = 3, hd = 8, half = hd / 2;
        std::vector<float> ct((size_t)T * half), st((size_t)T * half);
        for (int t = 0; t < T; t++)
            for (int i = 0; i < half; i++) { double an = t * pow(10000.0, -2.0 * i / hd); ct[(size_t)t * half + i] = (float)cos(an); st[(size_t)t * half + i] = (float)sin(an); }
        size_t n = (size_t)B * T * nh * hd;
        auto x = r.vec(n, -2, 2);
        std::vector<float> ref(n);
        cpu::rope_forward(ref.data(), x.data(), ct.data(), st.data(), B, T, nh, hd, 0);
        Outs o = both_schedules([&] {
            DX X(x), Y(n); DF CT(ct), ST(st);
            ::emu::launch("rope_kernel", __FILE__, __LINE__, dim3(2), dim3(32), 0, 0, rope_kernel, Y.p, X.p, CT.p, ST.p, T, nh, half, n / 2, 1.0f);
            return Outs{{"out", Y.get()}};
        });
        std::vector<double> E(n);
        for (size_t i = 0; i < n; i++) E[i] = 2 * U * 8 * 4.0;  // |x| < 2, |cos|,|sin| <= 1: sum of the terms < 4
        expect("out", o[0].second, ref, tol_x(ref, E));
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
    check_encoder(14, 24, 67, 2);
    check_encoder(7, 24, 67, 1);
    check_encoder(300, 40, 10000, 0);  // > 256 tokens (several chunks), > 256 vocabulary tiles
    check_encoder(64, 300, 5, 2);      // D > 256: two channel blocks, the second partial
    for (auto nc : std::vector<std::pair<int, int>>{{14, 24}, {9, 61}, {65, 24}, {37, 33}, {20, 67}, {1, 1}}) check_rmsnorm(nc.first, nc.second);
    for (auto s : std::vector<std::array<int, 4>>{{2, 7, 4, 6}, {1, 9, 6, 8}, {1, 16, 2, 12}, {2, 20, 1, 8}})
        for (int bwd = 0; bwd <= 1; bwd++)
            for (int ip = 0; ip <= 1; ip++) check_rope(s[0], s[1], s[2], s[3], bwd, ip);
    for (size_t n : {(size_t)1, (size_t)427, (size_t)1001, (size_t)4099}) {
        check_swiglu(n, 0, 0);
        check_swiglu(n, 1, 0);
        check_swiglu(n, 1, 1);
    }
    check_crossentropy(14, 67, 4);
    check_crossentropy(3, 1000, 4);   // V > 512 threads
    check_crossentropy(2, 1, 4);      // V = 1
    check_crossentropy(5, 513, 40);   // logits far from 0: the max must be subtracted
    for (size_t n : {(size_t)1, (size_t)1001})
        for (int ms = 0; ms <= 1; ms++) check_adamw(n, ms, ms ? 7 : 1);
    check_gnorm(1);
    check_gnorm(1000);
    check_gnorm(300001);  // > 1024 blocks x 256 threads: the grid-stride loop wraps
    for (const Att& a : std::vector<Att>{{2, 7, 4, 2, 6},     // GQA H=4 KV=2
                                         {1, 9, 6, 1, 8},     // MQA H=6 KV=1
                                         {1, 16, 4, 4, 12},   // MHA
                                         {2, 20, 6, 2, 8},
                                         {1, 33, 4, 2, 8},    // two tiles of 32
                                         {1, 65, 2, 1, 12},   // three tiles
                                         {1, 1, 1, 1, 2},     // T = 1
                                         {2, 45, 4, 2, 10},   // hd = 10 (not a multiple of 4), GQA, a ragged second tile
                                         {1, 37, 2, 2, 130}}) // hd > 128 (5 dims per lane); > 48 KiB of shared memory
        for (int causal = 1; causal >= 0; causal--) check_attention(a, causal);
    // the twin against fp64 softmax attention: T = 150 and hd = 130 (56-key tiles) cross the twin's tiles
    for (const Att& a : std::vector<Att>{{2, 9, 4, 2, 10}, {1, 150, 2, 1, 12}, {1, 70, 2, 2, 130}, {1, 1, 1, 1, 2}})
        for (int causal = 1; causal >= 0; causal--) check_attention_twin(a, causal);
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
    for (auto nc : std::vector<std::pair<int, int>>{{14, 24}, {9, 61}, {1, 1}, {300, 67}, {37, 300}, {5, 7}})
        for (int bwd = 0; bwd <= 1; bwd++) check_bias(nc.first, nc.second, bwd);
    check_gridstride_adaln();

    int passed = 0, failed = 0;
    for (const Check& c : g_checks) {
        if (filter && c.name.find(filter) == std::string::npos) continue;
        if (list) { printf("%s\n", c.name.c_str()); continue; }
        if (run_check(c)) passed++; else failed++;
    }
    if (list) return 0;
    if (!filter) {
        std::string missing;
        for (int i = 0; i < nk; i++)
            if (!emu::covered[i]) missing += std::string(missing.empty() ? "" : ", ") + emu_kernel_list[i].name;
        if (missing.empty()) { printf("PASS %s.coverage[all %d kernels of llmc/*.cuh launched]\n", BUILD, nk); passed++; }
        else { printf("FAIL %s.coverage: kernels never launched by any check (add a check to dev/emu/harness.cpp): %s\n", BUILD, missing.c_str()); failed++; }
    }
    fflush(stdout);
    fprintf(stderr, "emu %s: %d passed, %d failed\n", BUILD, passed, failed);
    return failed ? 1 : 0;
}
