/*
The full-size index probe: the FIRST and the LAST blocks of llama3-8B-sized grids (and of
a large video DiT), run in the emulator over reserved, unbacked memory. dev/emu/run.sh
builds it (bf16, -fwrapv) from the transformed llmc/kernels/*.cuh and runs it after the harness.

Why. The harness checks every launcher at small, odd sizes, where no index comes near
2^31. At llama3-8B sizes (D 4096, F 14336, V 128256, H 32, KV 8, hd 128, B*T = 4 x 8192
rows) the logits [B*T, V] hold 4.2e9 elements and the parameters 8.03e9: an index kept
in 32 bits wraps there. On the GPU that is a write to a wrong address: an illegal-address
fault, or silently wrong rows. Here:
  - emu::reserve_allocs makes cudaMalloc map every buffer MAP_NORESERVE between 64 GiB
    PROT_NONE regions: a 9 GiB logits buffer costs memory only where a block touches it,
    and an address wrapped below a buffer faults (each probe runs in a child process, so
    a fault is that probe's FAIL);
  - emu::block_filter runs only the chosen blocks of a launch: per kernel the first block
    and the block(s) owning the last rows or elements (for a grid-stride loop over u:
    block (u mod (G bd)) / bd of the launch's actual grid G, found by a dry run that
    records the launch and runs nothing);
  - before the run the probe writes random inputs exactly where those blocks read, and
    NaN (0xFF) exactly where they must write; after it, every element they must write is
    compared with the CPU twin (llmc/kernels/cpu/, on just those rows or elements; the attention
    and a few sums by their definition, in double) at a bound that catches wrong data,
    NaN and zeros (not the harness's tight numerics: that is the harness's job);
  - nothing else may have been written: every page of every buffer that holds a nonzero
    byte must lie in a region the probe initialised or expected (untouched memory reads
    as zeros, and read-only pages stay zero).
An index that wraps then faults (below the buffer), writes elsewhere (a stray page), or
leaves the expected rows NaN. The build uses -fwrapv, so that an int product that
overflows wraps as the GPU's 32-bit multiply does, instead of being optimised on the
assumption that it cannot (undefined behaviour in C++).

Each probe prints one line,  PASS probe.<name>[...]  or  FAIL probe.<name>: why,  and
its details (elements checked, max |err|) go to stderr. `probe.catches_int_index` runs
a copy of the cross-entropy row addressing with the row offset in int and must FAIL
(the probe machinery can still see the bug it is for). Options: --list, --filter S.
*/
#include "kernels.h"  // the transformed llmc/kernels/*.cuh
#include <sys/mman.h>
#include <sys/wait.h>
#include <signal.h>
#include <algorithm>
#include <functional>
#include <map>
#include <string>
#include <vector>

namespace cpu {
typedef float floatX;
typedef int stream_t;
#include "cpu/encoder.h"
#include "cpu/rmsnorm.h"
#include "cpu/rope.h"
#include "cpu/swiglu.h"
#include "cpu/crossentropy.h"
#include "cpu/adamw.h"
#include "cpu/adaln.h"
#include "cpu/bias.h"
#include "cpu/matmul.h"
}  // namespace cpu

#ifndef EMU_SHIM_CUDA_RUNTIME
#error "the real CUDA headers were picked up: put dev/emu/include first on the include path"
#endif
#ifdef ENABLE_FP32
#error "the probe is built in bf16 (the tensor-core attention exists only there)"
#endif

typedef unsigned long long ull;

// llama3-8B
static const int B = 4, T = 8192, BT = B * T, D = 4096, F = 14336, V = 128256, H = 32, KV = 8, HD = 128;
static const size_t NPARAM = 8030261248ull;
// a large video DiT: 16 clips of 65536 tokens, width 3072 (rows x width = 3.2e9 > 2^31)
static const int DB = 16, DN = 65536, DC = 3072, DLD = 6 * DC;
static const int DROWS = DB * DN;

// ---------------------------------------------------------------------------------
// one probe = one child process
static std::vector<std::string> g_problems;
static void problem(const char* fmt, ...) {
    char b[1024];
    va_list ap; va_start(ap, fmt); vsnprintf(b, sizeof b, fmt, ap); va_end(ap);
    g_problems.push_back(b);
    fprintf(stderr, "    problem: %s\n", b);
}
static std::string g_name;
static void on_emu_error(const char* msg) {
    printf("FAIL probe.%s: emulator: %s\n", g_name.c_str(), msg);
    fprintf(stderr, "    emulator error: %s\n", msg);
    fflush(stdout); fflush(stderr);
    _exit(10);
}

// ---------------------------------------------------------------------------------
// reserved buffers and the pages the probe expects to hold data
struct Buf { std::string name; char* p; size_t bytes; std::vector<unsigned char> ok; };
static std::vector<Buf> g_bufs;
template <class T> static T* rbuf(const char* name, size_t n) {
    void* p = nullptr;
    cudaCheck(cudaMalloc(&p, n * sizeof(T)));
    g_bufs.push_back({name, (char*)p, n * sizeof(T), std::vector<unsigned char>((n * sizeof(T) + 4095) / 4096, 0)});
    return (T*)p;
}
static Buf* buf_of(const void* p) {
    for (Buf& b : g_bufs)
        if ((const char*)p >= b.p && (const char*)p < b.p + b.bytes) return &b;
    fprintf(stderr, "probe: %p is in no buffer\n", p);
    exit(2);
}
// [p, p + bytes) may hold data after the run (it was initialised, or must be written)
static void allow(const void* p, size_t bytes) {
    if (!bytes) return;
    Buf* b = buf_of(p);
    size_t o = (size_t)((const char*)p - b->p);
    for (size_t pg = o / 4096; pg <= (o + bytes - 1) / 4096; pg++) b->ok[pg] = 1;
}
// pages with a nonzero byte outside every allowed region: a write the probe did not expect
static void check_strays() {
    for (Buf& b : g_bufs) {
        size_t np = b.ok.size(), strays = 0, first = 0;
        std::vector<unsigned char> res(np);
        if (mincore(b.p, b.bytes, res.data()) != 0) { problem("mincore of %s failed", b.name.c_str()); continue; }
        for (size_t k = 0; k < np; k++) {
            if (!(res[k] & 1) || b.ok[k]) continue;
            const unsigned char* q = (const unsigned char*)b.p + k * 4096;
            size_t len = std::min((size_t)4096, b.bytes - k * 4096);
            bool nz = false;
            for (size_t i = 0; i < len && !nz; i++) nz = q[i] != 0;
            if (nz && strays++ == 0) first = k;
        }
        if (strays)
            problem("%s: %zu pages written outside the regions the chosen blocks own (first at byte %zu of %zu)",
                    b.name.c_str(), strays, first * 4096, b.bytes);
    }
}

static uint64_t g_rng = 0x9E3779B97F4A7C15ull;
static float rnd(float lo = -1.0f, float hi = 1.0f) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return lo + (hi - lo) * (float)((g_rng >> 11) * (1.0 / 9007199254740992.0));
}
static int rnd_int(int n) { rnd(); return (int)(g_rng % (uint64_t)n); }
template <class T> static void put(T* p, size_t i, float v) { p[i] = (T)v; allow(p + i, sizeof(T)); }
template <class T> static void fill(T* p, size_t i, size_t n, float lo = -1.0f, float hi = 1.0f) {
    for (size_t k = 0; k < n; k++) p[i + k] = (T)rnd(lo, hi);
    allow(p + i, n * sizeof(T));
}
template <class T> static void poison(T* p, size_t i, size_t n) { memset(p + i, 0xFF, n * sizeof(T)); allow(p + i, n * sizeof(T)); }
template <class T> static std::vector<float> get(const T* p, size_t i, size_t n) {
    std::vector<float> v(n);
    for (size_t k = 0; k < n; k++) v[k] = (float)p[i + k];
    return v;
}

// element comparisons: |got - ref| <= rel |ref| + abs (NaN never passes)
struct Cmp {
    std::string what;
    double rel, abs;
    size_t n = 0, bad = 0;
    double max_err = 0;
    bool used = true;  // false: this probe has nothing of this kind to compare
    Cmp(const std::string& w, double r, double a) : what(w), rel(r), abs(a) {}
    void operator()(size_t i, float got, double ref) {
        n++;
        double e = fabs((double)got - ref);
        if (!(e <= rel * fabs(ref) + abs)) {
            if (bad++ < 3) fprintf(stderr, "    %s[%zu]: got %.7g, expected %.7g\n", what.c_str(), i, got, ref);
        } else if (e > max_err) max_err = e;
    }
    ~Cmp() {
        if (!used) return;
        fprintf(stderr, "    %s: %zu elements checked, max |err| %.3g\n", what.c_str(), n, max_err);
        if (n == 0) problem("%s: nothing checked", what.c_str());
        if (bad) problem("%s: %zu of %zu elements wrong (NaN: never written, or written elsewhere)", what.c_str(), bad, n);
    }
};
// bf16 outputs: one rounding (2^-8) plus the twin's other order of sums
static const double REL = 1.0 / 64;

// ---------------------------------------------------------------------------------
// which blocks run
struct Shape { std::string kernel; dim3 grid, block; ull nb() const { return (ull)grid.x * grid.y * grid.z; } };
// the launches fn makes, none of them run (a dry run)
static std::vector<Shape> shapes(const std::function<void()>& fn) {
    std::vector<Shape> v;
    emu::block_filter = [&v](ull b, ull) {
        if (b == 0) v.push_back({emu::cur_kernel, emu::cur_grid_dim, emu::cur_block_dim});
        return false;
    };
    fn();
    emu::block_filter = nullptr;
    return v;
}
static const Shape& shape_of(const std::vector<Shape>& v, const char* kernel) {
    for (const Shape& s : v) if (s.kernel == kernel) return s;
    fprintf(stderr, "probe: no launch of %s\n", kernel);
    exit(2);
}
typedef std::map<std::string, std::vector<ull>> Pick;
// runs fn with only the picked blocks of each kernel (a kernel of at most 4 blocks that is
// not named runs whole: the one-block reductions that finish a partial kernel)
static void run_picked(const Pick& pick, const std::function<void()>& fn) {
    const char* last_name = nullptr;
    const std::vector<ull>* last = nullptr;
    emu::block_filter = [&](ull b, ull nb) {
        if (emu::cur_kernel != last_name) {
            last_name = emu::cur_kernel;
            auto it = pick.find(emu::cur_kernel);
            last = it == pick.end() ? nullptr : &it->second;
            if (!last && nb > 4) emu::error("probe: a launch of %s (%llu blocks) that the probe chose no blocks for", emu::cur_kernel, nb);
        }
        if (!last) return true;
        for (ull x : *last) if (x == b) return true;
        return false;
    };
    fn();
    emu::block_filter = nullptr;
}
static std::vector<ull> uniq(std::vector<ull> v) { std::sort(v.begin(), v.end()); v.erase(std::unique(v.begin(), v.end()), v.end()); return v; }
static ull lin(const Shape& s, unsigned x, unsigned y, unsigned z) { return x + (ull)s.grid.x * (y + (ull)s.grid.y * z); }
// grid-stride loops: unit u is processed by block (u mod (G bd)) / bd
static ull gs_owner(size_t u, const Shape& s) { return (u % ((size_t)s.nb() * s.block.x)) / s.block.x; }
static std::vector<size_t> gs_units(size_t n, const Shape& s, const std::vector<ull>& blocks, size_t per_thread = 1) {
    std::vector<size_t> out;
    size_t bd = s.block.x, stride = (size_t)s.nb() * bd;
    for (ull b : blocks)
        for (size_t base = b * bd; base < n; base += stride)
            for (size_t t = 0; t < bd && base + t < n; t++)
                for (size_t k = 0; k < per_thread; k++) out.push_back((base + t) * per_thread + k);
    std::sort(out.begin(), out.end());
    return out;
}
static std::string blocks_text(const std::vector<ull>& v) {
    std::string s;
    for (ull b : v) s += (s.empty() ? "" : ",") + std::to_string(b);
    return s;
}

// ---------------------------------------------------------------------------------
// the probes

// encoder_forward over [B*T, D] from a [V, D] table: grid-stride over elements
static std::string probe_encoder_forward() {
    const size_t n = (size_t)BT * D;
    int* tok = rbuf<int>("tokens", BT);
    floatX* wte = rbuf<floatX>("wte", (size_t)V * D);
    floatX* out = rbuf<floatX>("out", n);
    for (int i = 0; i < BT; i++) put(tok, i, (float)rnd_int(V));
    tok[0] = 0; tok[BT - 1] = V - 1;  // the first and the last row of the table
    auto run = [&] { encoder_forward(out, tok, wte, BT, D, 0); };
    Shape s = shape_of(shapes(run), "encoder_forward_kernel");
    std::vector<ull> blocks = uniq({0, s.nb() - 1, gs_owner(n - 1, s)});
    std::vector<size_t> S = gs_units(n, s, blocks);
    for (size_t u : S) { put(wte, (size_t)tok[u / D] * D + u % D, rnd()); poison(out, u, 1); }
    run_picked({{"encoder_forward_kernel", blocks}}, run);
    Cmp c("out", 0, 0);  // a copy: exact
    std::map<size_t, std::vector<size_t>> rows;
    for (size_t u : S) rows[u / D].push_back(u % D);
    for (auto& r : rows) {
        int t = tok[r.first];
        std::vector<float> w = get(wte, (size_t)t * D, D), ref(D);
        cpu::encoder_forward_range(ref.data(), &t, w.data(), 1, D, t, 1, 0);  // a one-row table starting at row t
        for (size_t cc : r.second) c(r.first * D + cc, (float)out[r.first * D + cc], ref[cc]);
    }
    return "grid " + std::to_string(s.nb()) + ", blocks " + blocks_text(blocks) + ", " + std::to_string(S.size()) + " elements";
}

// encoder_backward: blocks (x, y) walk vocabulary tiles x, x + gridDim.x, ... for channels y
static std::string probe_encoder_backward() {
    floatX* dwte = rbuf<floatX>("dwte", (size_t)V * D);
    floatX* dout = rbuf<floatX>("dout", (size_t)BT * D);
    int* tok = rbuf<int>("tokens", BT);
    for (int i = 0; i < BT; i++) put(tok, i, (float)rnd_int(V));
    tok[0] = 0; tok[BT - 1] = V - 1; tok[BT / 2] = V - 1;
    auto run = [&] { encoder_backward(dwte, dout, tok, BT, D, 0); };
    Shape s = shape_of(shapes(run), "encoder_backward_kernel");
    const int VT = ENC_VT, CT = ENC_CT, last_tile = (V - 1) / VT;
    // the first block, the last, and the one that owns the last tile (and so the last row)
    std::vector<ull> blocks = uniq({0, s.nb() - 1, lin(s, last_tile % s.grid.x, s.grid.y - 1, 0)});
    std::vector<std::pair<int, int>> rc;  // (row, channel block) pairs the blocks own
    for (ull b : blocks) {
        unsigned x = (unsigned)(b % s.grid.x), y = (unsigned)(b / s.grid.x);
        for (int tile = (int)x; tile <= last_tile; tile += (int)s.grid.x)
            for (int v = tile * VT; v < tile * VT + VT && v < V; v++) rc.push_back({v, (int)y});
    }
    std::map<int, std::vector<int>> ych;  // row -> channel blocks
    for (auto& p : rc) ych[p.first].push_back(p.second);
    for (auto& p : rc) fill(dwte, (size_t)p.first * D + (size_t)p.second * CT, CT);
    for (int i = 0; i < BT; i++)
        if (ych.count(tok[i]))
            for (int y : ych[tok[i]]) fill(dout, (size_t)i * D + (size_t)y * CT, CT);
    std::map<std::pair<int, int>, std::vector<float>> acc;  // the twin's sums: dwte + dout rows in token order, fp32
    for (auto& p : rc) acc[p] = get(dwte, (size_t)p.first * D + (size_t)p.second * CT, CT);
    for (int i = 0; i < BT; i++)
        if (ych.count(tok[i]))
            for (int y : ych[tok[i]]) {
                std::vector<float>& a = acc[{tok[i], y}];
                for (int k = 0; k < CT; k++) a[k] += (float)dout[(size_t)i * D + (size_t)y * CT + k];
            }
    run_picked({{"encoder_backward_kernel", blocks}}, run);
    Cmp c("dwte", 0, 0);  // the same fp32 additions in the same order, rounded once: exact
    for (auto& p : acc)
        for (int k = 0; k < CT; k++) {
            size_t i = (size_t)p.first.first * D + (size_t)p.first.second * CT + k;
            c(i, (float)dwte[i], (float)(floatX)p.second[k]);
        }
    return "grid " + std::to_string(s.grid.x) + "x" + std::to_string(s.grid.y) + ", blocks " + blocks_text(blocks) + ", " +
           std::to_string(rc.size()) + " rows x " + std::to_string(CT) + " channels";
}

// rmsnorm_forward: consecutive rows per block; the first and the last block
static std::string probe_rmsnorm_forward() {
    floatX* out = rbuf<floatX>("out", (size_t)BT * D);
    float* rstd = rbuf<float>("rstd", BT);
    floatX* inp = rbuf<floatX>("inp", (size_t)BT * D);
    floatX* w = rbuf<floatX>("w", D);
    fill(w, 0, D);
    auto run = [&] { rmsnorm_forward(out, rstd, inp, w, BT, D, 1e-5f, 0); };
    Shape s = shape_of(shapes(run), "rmsnorm_forward_kernel");
    const int R = 128;  // candidate rows at each end (a block owns far fewer): each must be all NaN or right
    std::vector<int> cand;
    for (int i = 0; i < R; i++) { cand.push_back(i); cand.push_back(BT - R + i); }
    for (int i : cand) { fill(inp, (size_t)i * D, D); poison(out, (size_t)i * D, D); poison(rstd, i, 1); }
    run_picked({{"rmsnorm_forward_kernel", uniq({0, s.nb() - 1})}}, run);
    Cmp c("out", REL, 1e-3), cr("rstd", 1e-5, 0);
    int written = 0;
    std::vector<float> wf = get(w, 0, D);
    for (int i : cand) {
        if (isnan((float)out[(size_t)i * D]) && isnan(rstd[i])) continue;  // a row no chosen block owns
        written++;
        std::vector<float> x = get(inp, (size_t)i * D, D), y(D);
        float r;
        cpu::rmsnorm_forward(y.data(), &r, x.data(), wf.data(), 1, D, 1e-5f, 0);
        for (int k = 0; k < D; k++) c((size_t)i * D + k, (float)out[(size_t)i * D + k], y[k]);
        cr(i, rstd[i], r);
    }
    if (isnan(rstd[0]) || isnan(rstd[BT - 1])) problem("row 0 or row %d not written", BT - 1);
    return "grid " + std::to_string(s.nb()) + ", blocks 0 and " + std::to_string(s.nb() - 1) + ": " + std::to_string(written) + " rows";
}

// rmsnorm_backward (fused): a fixed grid walks row groups grid-stride; dw is a reduction
// over every block, which a subset cannot finish: only dinp is checked
static std::string probe_rmsnorm_backward() {
    floatX* dinp = rbuf<floatX>("dinp", (size_t)BT * D);
    floatX* dw = rbuf<floatX>("dw", D);
    floatX* dout = rbuf<floatX>("dout", (size_t)BT * D);
    floatX* inp = rbuf<floatX>("inp", (size_t)BT * D);
    floatX* w = rbuf<floatX>("w", D);
    float* rstd = rbuf<float>("rstd", BT);
    fill(w, 0, D);
    fill(dw, 0, D);
    auto run = [&] { rmsnorm_backward(dinp, dw, dout, inp, w, rstd, BT, D, 0); };
    std::vector<Shape> L = shapes(run);
    Shape s = shape_of(L, "rmsnorm_backward_kernel");
    // row groups of rpw rows per warp: block b's warps take groups b*nwarps + w, + G*nwarps, ...
    const int L_ = rms_lanes((D + RMS_VEC - 1) / RMS_VEC), rpw = 32 / L_, nwarps = (int)s.block.x / 32;
    Shape g = s; g.block.x = nwarps;  // grid-stride over row groups, nwarps groups per block
    size_t ngroups = ((size_t)BT + rpw - 1) / rpw;
    std::vector<ull> blocks = uniq({0, s.nb() - 1, gs_owner(ngroups - 1, g)});
    std::vector<size_t> rows = gs_units(ngroups, g, blocks, rpw);
    rows.erase(std::remove_if(rows.begin(), rows.end(), [](size_t r) { return r >= (size_t)BT; }), rows.end());
    for (size_t i : rows) {
        fill(dinp, i * D, D); fill(dout, i * D, D); fill(inp, i * D, D);
        put(rstd, i, rnd(0.5f, 2.0f));
    }
    std::map<size_t, std::vector<float>> ref;
    std::vector<float> wf = get(w, 0, D), dwf(D);
    for (size_t i : rows) {
        std::vector<float> dx = get(dinp, i * D, D), dy = get(dout, i * D, D), x = get(inp, i * D, D);
        cpu::rmsnorm_backward(dx.data(), dwf.data(), dy.data(), x.data(), wf.data(), rstd + i, 1, D, 0);
        ref[i] = dx;
    }
    allow(dw, D * sizeof(floatX));
    run_picked({{"rmsnorm_backward_kernel", blocks}}, run);
    Cmp c("dinp", REL, 1e-3);
    for (auto& r : ref)
        for (int k = 0; k < D; k++) c(r.first * D + k, (float)dinp[r.first * D + k], r.second[k]);
    if (rows.empty() || rows.back() != (size_t)BT - 1) problem("the chosen blocks do not own row %d", BT - 1);
    return "grid " + std::to_string(s.nb()) + ", blocks " + blocks_text(blocks) + ": " + std::to_string(rows.size()) + " rows";
}

// rope over q [Bp, Tp, Hp, hd] and k [Bp, Tp, KVp, hd] in one launch: block (x, y) takes
// units x*bx .. of each row y*by + ty, + gridDim.y*by, ... (q's units first, then k's)
static std::string probe_rope(bool backward, int Bp = B, int Tp = T, int Hp = H, int KVp = KV, int hd = HD) {
    const int half = hd / 2;
    const size_t rows = (size_t)Bp * Tp;
    floatX* q = rbuf<floatX>("q", rows * Hp * hd);
    floatX* k = rbuf<floatX>("k", rows * KVp * hd);
    float* cs = rbuf<float>("cos", (size_t)Tp * half);
    float* sn = rbuf<float>("sin", (size_t)Tp * half);
    fill(cs, 0, (size_t)Tp * half); fill(sn, 0, (size_t)Tp * half);
    auto run = [&] {
        if (backward) rope_qk_backward(q, k, cs, sn, Bp, Tp, Hp, KVp, hd, 0);
        else rope_qk_forward(q, k, cs, sn, Bp, Tp, Hp, KVp, hd, 0);
    };
    std::vector<Shape> L = shapes(run);
    Shape s = L.at(0);
    const int P = s.kernel == "rope_vec_kernel" ? ROPE_PAIRS : 1, nq = Hp * half / P, nk = KVp * half / P;
    const size_t stride = (size_t)s.grid.y * s.block.y;
    // the first block, the last, and the one owning the last row's last units
    std::vector<ull> blocks = uniq({0, s.nb() - 1, lin(s, s.grid.x - 1, (unsigned)(((rows - 1) % stride) / s.block.y), 0)});
    struct Unit { floatX* base; size_t e; int t, i; };  // P pairs at base + e, position t, first pair i
    std::vector<Unit> S;
    for (ull b : blocks) {
        unsigned gx = (unsigned)(b % s.grid.x), gy = (unsigned)(b / s.grid.x);
        for (unsigned ty = 0; ty < s.block.y; ty++)
            for (unsigned tx = 0; tx < s.block.x; tx++) {
                int u = (int)(gx * s.block.x + tx);
                if (u >= nq + nk) continue;
                floatX* base = u < nq ? q : k;
                int uu = u < nq ? u : u - nq, width = (u < nq ? nq : nk) * 2 * P;
                for (size_t row = (size_t)gy * s.block.y + ty; row < rows; row += stride)
                    S.push_back({base, row * width + (size_t)uu * 2 * P, (int)(row % Tp), (uu % (half / P)) * P});
            }
    }
    // in place: no poison; a unit left unwritten keeps its input, which the comparison catches
    std::vector<std::vector<float>> x;
    for (auto& u : S) { fill(u.base, u.e, 2 * P); x.push_back(get(u.base, u.e, 2 * P)); }
    run_picked({{s.kernel.c_str(), blocks}}, run);
    Cmp c(backward ? "dq, dk" : "q, k", REL, 1e-3);
    bool last = false;
    for (size_t j = 0; j < S.size(); j++) {
        const Unit& u = S[j];
        if (u.base == k && u.e + 2 * P == rows * KVp * hd) last = true;
        for (int p = 0; p < P; p++) {
            std::vector<float> y(2), xp = {x[j][2 * p], x[j][2 * p + 1]};
            // the twin on one pair: head dim 2 and the tables' entry (t, i + p)
            size_t ti = (size_t)u.t * half + u.i + p;
            if (backward) cpu::rope_backward(y.data(), xp.data(), cs + ti, sn + ti, 1, 1, 1, 2, 0);
            else cpu::rope_forward(y.data(), xp.data(), cs + ti, sn + ti, 1, 1, 1, 2, 0);
            c(u.e + 2 * p, (float)u.base[u.e + 2 * p], y[0]);
            c(u.e + 2 * p + 1, (float)u.base[u.e + 2 * p + 1], y[1]);
        }
    }
    if (!last) problem("the chosen blocks do not own k's last unit");
    return "grid " + std::to_string(s.grid.x) + "x" + std::to_string(s.grid.y) + ", blocks " + blocks_text(blocks) + ", " +
           std::to_string(S.size()) + " units of " + std::to_string(P) + " pairs";
}

// swiglu over [B*T, F]: grid-stride over 16-byte chunks
static std::string probe_swiglu(bool backward) {
    const size_t n = (size_t)BT * F;
    floatX* h1 = rbuf<floatX>("h1", n);
    floatX* h3 = rbuf<floatX>("h3", n);
    floatX* o1 = rbuf<floatX>(backward ? "dh1" : "out", n);
    floatX* o3 = backward ? rbuf<floatX>("dh3", n) : nullptr;
    floatX* g = backward ? rbuf<floatX>("dout", n) : nullptr;
    auto run = [&] {
        if (backward) swiglu_backward(o1, o3, g, h1, h3, n, 0);
        else swiglu_forward(o1, h1, h3, n, 0);
    };
    const char* k = backward ? "swiglu_backward_kernel" : "swiglu_forward_kernel";
    Shape s = shape_of(shapes(run), k);
    const size_t nvec = n / SWIGLU_VEC;  // n is a multiple of the chunk: no tail
    std::vector<ull> blocks = uniq({0, s.nb() - 1, gs_owner(nvec - 1, s)});
    std::vector<size_t> S = gs_units(nvec, s, blocks, SWIGLU_VEC);
    for (size_t i : S) {
        fill(h1, i, 1, -4, 4); fill(h3, i, 1); poison(o1, i, 1);
        if (backward) { fill(g, i, 1); poison(o3, i, 1); }
    }
    run_picked({{k, blocks}}, run);
    Cmp c1(backward ? "dh1" : "out", REL, 1e-3), c3("dh3", REL, 1e-3);
    for (size_t i : S) {
        float a = (float)h1[i], b = (float)h3[i], y1, y3;
        if (backward) {
            float gg = (float)g[i];
            cpu::swiglu_backward(&y1, &y3, &gg, &a, &b, 1, 0);
            c1(i, (float)o1[i], y1); c3(i, (float)o3[i], y3);
        } else {
            cpu::swiglu_forward(&y1, &a, &b, 1, 0);
            c1(i, (float)o1[i], y1);
        }
    }
    c3.used = backward;
    return "grid " + std::to_string(s.nb()) + ", blocks " + blocks_text(blocks) + ", " + std::to_string(S.size()) + " elements";
}

// crossentropy_forward_backward over logits [B*T, V] (4.2e9 elements): one block per row
static std::string probe_crossentropy() {
    floatX* logits = rbuf<floatX>("logits", (size_t)BT * V);
    float* losses = rbuf<float>("losses", BT);
    int* tgt = rbuf<int>("targets", BT);
    for (int i = 0; i < BT; i++) put(tgt, i, (float)rnd_int(V));
    tgt[BT - 1] = V - 1;
    poison(losses, 0, BT);
    const int rows[2] = {0, BT - 1};
    for (int i : rows) fill(logits, (size_t)i * V, V, -4, 4);
    std::vector<std::vector<float>> ref;
    std::vector<float> ref_loss;
    for (int i : rows) {
        std::vector<float> x = get(logits, (size_t)i * V, V);
        float l;
        cpu::crossentropy_forward_backward(&l, x.data(), tgt + i, 1, V, 1.0f / BT, 1, 0);
        ref.push_back(x); ref_loss.push_back(l);
    }
    auto run = [&] { crossentropy_forward_backward(losses, logits, tgt, BT, V, 1.0f / BT, 1, 0); };
    run_picked({{"crossentropy_kernel", {0, (ull)BT - 1}}}, run);
    Cmp cl("losses", 1e-5, 1e-5), cd("dlogits", REL, 1e-9);
    for (int k = 0; k < 2; k++) {
        int i = rows[k];
        cl(i, losses[i], ref_loss[k]);
        for (int j = 0; j < V; j++) cd((size_t)i * V + j, (float)logits[(size_t)i * V + j], ref[k][j]);
    }
    for (int i = 1; i < BT - 1; i++)
        if (!isnan(losses[i])) { problem("losses[%d] written: no chosen block owns row %d", i, i); break; }
    return "rows 0 and " + std::to_string(BT - 1) + " of " + std::to_string(BT) + " x " + std::to_string(V);
}

// the vocabulary-parallel passes, rank 1 of tp 2 (v0 = Vs), over a shard [N, Vs] with
// N = 2 B*T (8 x 8192 rows) so that it too holds more than 2^31 elements
static std::string probe_crossentropy_vp() {
    const int N = 2 * BT, Vs = V / 2, v0 = Vs, nv = Vs;
    floatX* logits = rbuf<floatX>("logits", (size_t)N * Vs);
    float* rowmax = rbuf<float>("rowmax", N);
    float* sums = rbuf<float>("sums", 2 * (size_t)N);
    float* losses = rbuf<float>("losses", N);
    int* tgt = rbuf<int>("targets", N);
    for (int i = 0; i < N; i++) put(tgt, i, (float)rnd_int(V));
    tgt[N - 1] = V - 1; tgt[0] = v0;  // both in this shard: its last column and its first
    const int rows[2] = {0, N - 1};
    poison(rowmax, 0, N); poison(sums, 0, 2 * (size_t)N); poison(losses, 0, N);
    for (int i : rows) fill(logits, (size_t)i * Vs, Vs, -4, 4);
    std::vector<std::vector<float>> ref;
    std::vector<float> rm, sm, st, ls;
    for (int i : rows) {
        std::vector<float> x = get(logits, (size_t)i * Vs, Vs);
        float m, sv[2], l;
        cpu::crossentropy_vp_max(&m, x.data(), 1, Vs, nv, 0);
        cpu::crossentropy_vp_sums(sv, x.data(), &m, tgt + i, 1, Vs, v0, nv, 0);
        cpu::crossentropy_vp_finish(&l, x.data(), &m, sv, tgt + i, 1, Vs, v0, nv, 1.0f / N, 1, 0);
        rm.push_back(m); sm.push_back(sv[0]); st.push_back(sv[1]); ls.push_back(l); ref.push_back(x);
    }
    // one rank: the all-reduces between the passes are the identity
    auto run = [&] {
        crossentropy_vp_max(rowmax, logits, N, Vs, nv, 0);
        crossentropy_vp_sums(sums, logits, rowmax, tgt, N, Vs, v0, nv, 0);
        crossentropy_vp_finish(losses, logits, rowmax, sums, tgt, N, Vs, v0, nv, 1.0f / N, 1, 0);
    };
    std::vector<ull> blocks = {0, (ull)N - 1};
    run_picked({{"crossentropy_vp_max_kernel", blocks}, {"crossentropy_vp_sums_kernel", blocks},
                {"crossentropy_vp_finish_kernel", blocks}}, run);
    Cmp cm("rowmax", 0, 0), cs("sums", 1e-5, 1e-6), cl("losses", 1e-5, 1e-5), cd("dlogits", REL, 1e-9);
    for (int k = 0; k < 2; k++) {
        int i = rows[k];
        cm(i, rowmax[i], rm[k]);
        cs(i, sums[i], sm[k]);
        cs((size_t)N + i, sums[(size_t)N + i], st[k]);
        cl(i, losses[i], ls[k]);
        for (int j = 0; j < Vs; j++) cd((size_t)i * Vs + j, (float)logits[(size_t)i * Vs + j], ref[k][j]);
    }
    return "rows 0 and " + std::to_string(N - 1) + " of " + std::to_string(N) + " x " + std::to_string(Vs) + ", v0 " + std::to_string(v0);
}

// adamw_update over the 8.03e9 parameters of llama3-8B (bf16 with fp32 master): grid-stride
static std::string probe_adamw() {
    const size_t n = NPARAM;
    floatX* param = rbuf<floatX>("param", n);
    float* master = rbuf<float>("master", n);
    floatX* grad = rbuf<floatX>("grad", n);
    float* m = rbuf<float>("m", n);
    float* v = rbuf<float>("v", n);
    auto run = [&] { adamw_update(param, master, grad, m, v, n, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 3, 0); };
    Shape s = shape_of(shapes(run), "adamw_kernel");
    std::vector<ull> blocks = uniq({0, s.nb() - 1, gs_owner(n - 1, s)});
    std::vector<size_t> S = gs_units(n, s, blocks);
    for (size_t i : S) {
        fill(master, i, 1); put(param, i, master[i]); fill(grad, i, 1); fill(m, i, 1, -0.1f, 0.1f); fill(v, i, 1, 0.0f, 0.01f);
    }
    std::vector<float> rp(S.size()), rm(S.size()), rv(S.size());
    for (size_t k = 0; k < S.size(); k++) {
        size_t i = S[k];
        float p = master[i], g = (float)grad[i], mm = m[i], vv = v[i], pp;
        cpu::adamw_update(&pp, &p, &g, &mm, &vv, 1, 3e-4f, 0.9f, 0.95f, 1e-8f, 0.1f, 1.0f, 3, 0);
        rp[k] = p; rm[k] = mm; rv[k] = vv;
    }
    run_picked({{"adamw_kernel", blocks}}, run);
    // m' = b1 m + (1-b1) g may cancel: the bound of the harness's adamw check, 8 u (|b1 m| + |(1-b1) g|)
    // with |m| < 0.1 and |g| < 1 here, 9.1e-8 (the kernel rounds it once, an fmaf; the twin twice)
    Cmp cp("master", 1e-6, 1e-7), cm("m", 1e-6, 1e-7), cv("v", 1e-6, 1e-12), cb("param", REL, 1e-6);
    for (size_t k = 0; k < S.size(); k++) {
        size_t i = S[k];
        cp(i, master[i], rp[k]); cm(i, m[i], rm[k]); cv(i, v[i], rv[k]); cb(i, (float)param[i], rp[k]);
    }
    return "n " + std::to_string(n) + ", grid " + std::to_string(s.nb()) + ", blocks " + blocks_text(blocks) + ", " +
           std::to_string(S.size()) + " elements";
}

// global_norm_squared over the 8.03e9 gradients: the partial blocks chosen, the final
// one-warp sum whole (the partials of blocks that did not run are the static array's zeros)
static std::string probe_global_norm() {
    const size_t n = NPARAM;
    floatX* g = rbuf<floatX>("grad", n);
    float* out = rbuf<float>("out", 1);
    put(out, 0, 0.5f);
    auto run = [&] { global_norm_squared(out, g, n, 0); };
    Shape s = shape_of(shapes(run), "gnorm_partial_kernel");
    // (each chosen block reads 7.8e6 elements, a page per stride)
    std::vector<ull> blocks = uniq({0, gs_owner(n - 1, s)});
    // values in the first and the last two strides of each chosen block (the rest of what
    // it reads is zero): the wrapped reads of a 32-bit index would miss the last ones
    size_t stride = (size_t)s.nb() * s.block.x;
    std::vector<size_t> S;
    for (ull b : blocks) {
        size_t b0 = b * s.block.x, kmax = (n - 1 - b0) / stride;  // b0 < n: n is far larger than the grid
        for (size_t k : {(size_t)0, kmax > 1 ? kmax - 2 : 0, kmax > 0 ? kmax - 1 : 0, kmax})
            for (size_t i = b0 + k * stride; i < b0 + k * stride + s.block.x && i < n; i++) S.push_back(i);
    }
    std::sort(S.begin(), S.end());
    S.erase(std::unique(S.begin(), S.end()), S.end());
    double sum = 0.5;
    for (size_t i : S) { fill(g, i, 1); double x = (double)(float)g[i]; sum += x * x; }
    size_t used = S.size();
    run_picked({{"gnorm_partial_kernel", blocks}}, run);
    Cmp c("out", 1e-6, 0);
    c(0, out[0], (double)(float)sum);
    return "n " + std::to_string(n) + ", blocks " + blocks_text(blocks) + ", " + std::to_string(used) + " nonzero values";
}

// ---------------------------------------------------------------------------------
// attention (B 4, T 8192, H 32, KV 8, hd 128), causal. The reference is the definition in
// double, row by row. Candidate rows: all T rows of (batch 0, head 0) and (batch B-1,
// head H-1) are NaN before the run; afterwards each row must be NaN (no chosen block owns
// it) or right, and the first rows of the first head and the last of the last must be
// written. Blocks: the (query tile, head, batch) blocks x = 0 and x = last of those two.
struct Att {
    floatX *q, *k, *v, *out, *dout, *dq, *dk, *dv;
    float *lse, *delta;
    size_t at(int b, int t, int nh, int h) const { return (((size_t)b * T + t) * nh + h) * HD; }
};
static const float ATT_SCALE = 0.08838834764831845f;  // 1/sqrt(128)
// p[u] = exp(s_u - lse) for u <= t (lse: given, or computed when NaN); returns lse
static double att_probs(const Att& a, int b, int t, int h, double lse, std::vector<double>& p) {
    int kvh = h / (H / KV);
    p.assign(t + 1, 0.0);
    double mx = -1e300;
    for (int u = 0; u <= t; u++) {
        double s = 0;
        for (int d = 0; d < HD; d++) s += (double)(float)a.q[a.at(b, t, H, h) + d] * (double)(float)a.k[a.at(b, u, KV, kvh) + d];
        p[u] = s * ATT_SCALE;
        mx = std::max(mx, p[u]);
    }
    if (std::isnan(lse)) {
        double l = 0;
        for (int u = 0; u <= t; u++) l += exp(p[u] - mx);
        lse = mx + log(l);
    }
    for (int u = 0; u <= t; u++) p[u] = exp(p[u] - lse);
    return lse;
}
static Att att_alloc(bool bwd) {
    Att a{};
    size_t nq = (size_t)BT * H * HD, nk = (size_t)BT * KV * HD;
    a.q = rbuf<floatX>("q", nq); a.k = rbuf<floatX>("k", nk); a.v = rbuf<floatX>("v", nk);
    a.out = rbuf<floatX>("out", nq); a.lse = rbuf<float>("lse", (size_t)B * H * T);
    if (bwd) {
        a.dout = rbuf<floatX>("dout", nq); a.dq = rbuf<floatX>("dq", nq);
        a.dk = rbuf<floatX>("dk", nk); a.dv = rbuf<floatX>("dv", nk); a.delta = rbuf<float>("delta", (size_t)B * H * T);
    }
    return a;
}
static const int ATT_BH[2][2] = {{0, 0}, {B - 1, H - 1}};  // (batch, head) of the candidate rows
// the reference (the definition in double, O(T hd) per row) runs on 4 rows of every 32;
// the other written rows are checked to be written (no NaN)
static bool att_sampled(int t) { return t % 32 < 2 || t % 32 >= 30; }

// tc2: attention_tc2_forward (llmc/kernels/attention_tc2.cuh), whose 1-D grid puts the query
// tile rank slowest: the heaviest tile of the last (batch, head) is block B H - 1, the lightest
// of the first is the first block of the last rank
static std::string probe_attention_forward(bool tc, bool tc2 = false) {
    Att a = att_alloc(false);
    for (auto& bh : ATT_BH) {
        int b = bh[0], h = bh[1], kvh = h / (H / KV);
        for (int t = 0; t < T; t++) {
            // the short tile of the first head reads rows < 64, the long one of the last head
            // its own rows (>= T - 64) and every key
            if (b == 0 ? t < 128 : t >= T - 128) fill(a.q, a.at(b, t, H, h), HD);
            if (b != 0 || t < 128) { fill(a.k, a.at(b, t, KV, kvh), HD); fill(a.v, a.at(b, t, KV, kvh), HD); }
            poison(a.out, a.at(b, t, H, h), HD); poison(a.lse, ((size_t)b * H + h) * T + t, 1);
        }
    }
    auto run = [&] {
        if (tc2) attention_tc2_forward(a.out, a.lse, a.q, a.k, a.v, B, T, H, KV, HD, 0);
        else if (tc) attention_tc_forward(a.out, a.lse, a.q, a.k, a.v, B, T, H, KV, HD, 0);
        else attention_forward(a.out, a.lse, a.q, a.k, a.v, B, T, H, KV, HD, 0);
    };
    const char* kn = tc2 ? "attention_tc2_forward_hd128_kernel" : tc ? "attention_tc_forward_hd128_kernel" : "attention_forward_kernel";
    Shape s = shape_of(shapes(run), kn);
    std::vector<ull> blocks = tc2 ? uniq({lin(s, s.grid.x - B * H, 0, 0), lin(s, B * H - 1, 0, 0)})
                                  : uniq({lin(s, s.grid.x - 1, 0, 0), lin(s, 0, H - 1, B - 1)});
    run_picked({{kn, blocks}}, run);
    tc = tc || tc2;
    Cmp co("out", tc ? 0.03 : REL, tc ? 0.01 : 2e-3), cl("lse", 1e-4, 1e-4);
    int rows = 0;
    for (auto& bh : ATT_BH) {
        int b = bh[0], h = bh[1], kvh = h / (H / KV);
        for (int t = 0; t < T; t++) {
            size_t li = ((size_t)b * H + h) * T + t;
            if (isnan(a.lse[li]) && isnan((float)a.out[a.at(b, t, H, h)])) continue;
            rows++;
            if (!att_sampled(t)) {  // written rows are whole; the values are compared on a sample of them
                for (int d = 0; d < HD; d++) co(a.at(b, t, H, h) + d, isnan((float)a.out[a.at(b, t, H, h) + d]) ? NAN : 0.0f, 0.0);
                continue;
            }
            std::vector<double> p;
            double lse = att_probs(a, b, t, h, NAN, p);
            cl(li, a.lse[li], lse);
            for (int d = 0; d < HD; d++) {
                double o = 0;
                for (int u = 0; u <= t; u++) o += p[u] * (double)(float)a.v[a.at(b, u, KV, kvh) + d];
                co(a.at(b, t, H, h) + d, (float)a.out[a.at(b, t, H, h) + d], o);
            }
        }
    }
    if (isnan(a.lse[0]) || isnan(a.lse[(size_t)B * H * T - 1])) problem("the first row of head 0 or the last of head %d not written", H - 1);
    return std::string(kn) + " grid " + std::to_string(s.grid.x) + "x" + std::to_string(s.grid.y) + "x" + std::to_string(s.grid.z) +
           ", blocks " + blocks_text(blocks) + ": " + std::to_string(rows) + " rows";
}

// backward: inputs consistent with a forward (lse from the definition, out random: delta
// = dout . out is whatever out is). dq of the candidate rows as above; dk, dv of all T rows
// of (batch 0, kv head 0) and (batch B-1, kv head KV-1) likewise, from the dK/dV blocks
// x = last (the last key tile: cheap under causality) of those two. tc: the delta kernel's
// first and last blocks, and delta of every row the chosen blocks read set here (so that
// what they read does not depend on delta blocks that did not run).
static std::string probe_attention_backward(bool tc) {
    Att a = att_alloc(true);
    const int G = H / KV;
    std::vector<std::pair<int, int>> heads;  // (batch, head) whose rows the chosen blocks may read
    for (int h = 0; h < G; h++) heads.push_back({0, h});
    for (int h = H - G; h < H; h++) heads.push_back({B - 1, h});
    auto needed = [](int t) { return t < 128 || t >= T - 128; };
    for (auto& bh : heads) {
        int b = bh.first, h = bh.second, kvh = h / G;
        for (int t = 0; t < T; t++) {
            if (needed(t)) { fill(a.q, a.at(b, t, H, h), HD); fill(a.dout, a.at(b, t, H, h), HD); fill(a.out, a.at(b, t, H, h), HD); }
            // every key of the last group (its long dQ tile reads them all); the first group's
            // blocks read the first and the last tiles
            if (h % G == 0 && (b != 0 || needed(t))) { fill(a.k, a.at(b, t, KV, kvh), HD); fill(a.v, a.at(b, t, KV, kvh), HD); }
        }
    }
    // lse and delta of the rows the chosen blocks read (the first tile, the last tiles). The
    // kernels take lse as given: log(t + 1) keeps exp(s - lse) near a softmax (|s| < 1 here)
    // without the cost of the true one; delta = dout . out
    for (auto& bh : heads)
        for (int t = 0; t < T; t++)
            if (needed(t)) {
                size_t li = ((size_t)bh.first * H + bh.second) * T + t;
                put(a.lse, li, logf((float)t + 1.0f));
                double dl = 0;
                for (int d = 0; d < HD; d++)
                    dl += (double)(float)a.dout[a.at(bh.first, t, H, bh.second) + d] * (double)(float)a.out[a.at(bh.first, t, H, bh.second) + d];
                put(a.delta, li, (float)dl);
            }
    for (auto& bh : ATT_BH)
        for (int t = 0; t < T; t++) {
            poison(a.dq, a.at(bh[0], t, H, bh[1]), HD);
            int kvh = bh[1] / G;
            poison(a.dk, a.at(bh[0], t, KV, kvh), HD); poison(a.dv, a.at(bh[0], t, KV, kvh), HD);
        }
    auto run = [&] {
        if (tc) attention_tc_backward(a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, a.delta, B, T, H, KV, HD, 0);
        else attention_backward(a.dq, a.dk, a.dv, a.dout, a.q, a.k, a.v, a.out, a.lse, B, T, H, KV, HD, 0);
    };
    std::vector<Shape> L = shapes(run);
    const char* k1 = tc ? "attention_tc_dkdv_hd128_kernel" : "attention_backward_dkdv_kernel";
    const char* k2 = tc ? "attention_tc_dq_hd128_kernel" : "attention_backward_dq_kernel";
    Shape s1 = shape_of(L, k1), s2 = shape_of(L, k2);
    Pick pick = {{k1, uniq({lin(s1, s1.grid.x - 1, 0, 0), lin(s1, s1.grid.x - 1, KV - 1, B - 1)})},
                 {k2, uniq({lin(s2, s2.grid.x - 1, 0, 0), lin(s2, 0, H - 1, B - 1)})}};
    std::vector<float> delta_set;
    if (tc) {
        Shape s0 = shape_of(L, "attention_tc_delta_kernel");
        pick["attention_tc_delta_kernel"] = uniq({0, s0.nb() - 1});
        // the delta kernel's first and last blocks own rows (b, t, h) = (0, 0, 0..7) and
        // (B-1, T-1, H-8..H-1) (8 rows of 16 lanes each): their dout and out set, their
        // delta NaN, checked below; the dQ and dK/dV blocks run after them and read them
        for (int h = 0; h < 8; h++) {
            int bt[2][2] = {{0, 0}, {B - 1, T - 1}};
            for (auto& x : bt) {
                int hh = x[0] == 0 ? h : H - 8 + h;
                fill(a.dout, a.at(x[0], x[1], H, hh), HD); fill(a.out, a.at(x[0], x[1], H, hh), HD);
                poison(a.delta, ((size_t)x[0] * H + hh) * T + x[1], 1);
            }
        }
    }
    run_picked(pick, run);
    Cmp cq("dq", tc ? 0.05 : REL, tc ? 0.02 : 2e-3), ck("dk", tc ? 0.05 : REL, tc ? 0.02 : 2e-3),
        cv("dv", tc ? 0.05 : REL, tc ? 0.02 : 2e-3), cd("delta", 0.01, 1e-3);
    int qrows = 0, krows = 0;
    for (auto& bh : ATT_BH) {
        int b = bh[0], h = bh[1], kvh = h / G;
        for (int t = 0; t < T; t++) {
            if (isnan((float)a.dq[a.at(b, t, H, h)])) continue;
            qrows++;
            if (!att_sampled(t)) {
                for (int d = 0; d < HD; d++) cq(a.at(b, t, H, h) + d, isnan((float)a.dq[a.at(b, t, H, h) + d]) ? NAN : 0.0f, 0.0);
                continue;
            }
            size_t li = ((size_t)b * H + h) * T + t;
            std::vector<double> p;
            att_probs(a, b, t, h, a.lse[li], p);
            std::vector<double> dq(HD, 0.0);
            for (int u = 0; u <= t; u++) {
                double dp = 0;
                for (int d = 0; d < HD; d++) dp += (double)(float)a.dout[a.at(b, t, H, h) + d] * (double)(float)a.v[a.at(b, u, KV, kvh) + d];
                double ds = p[u] * (dp - a.delta[li]) * ATT_SCALE;
                for (int d = 0; d < HD; d++) dq[d] += ds * (double)(float)a.k[a.at(b, u, KV, kvh) + d];
            }
            for (int d = 0; d < HD; d++) cq(a.at(b, t, H, h) + d, (float)a.dq[a.at(b, t, H, h) + d], dq[d]);
        }
        for (int j = 0; j < T; j++) {
            if (isnan((float)a.dk[a.at(b, j, KV, kvh)])) continue;
            krows++;
            if (!att_sampled(j)) {
                for (int d = 0; d < HD; d++) {
                    ck(a.at(b, j, KV, kvh) + d, isnan((float)a.dk[a.at(b, j, KV, kvh) + d]) ? NAN : 0.0f, 0.0);
                    cv(a.at(b, j, KV, kvh) + d, isnan((float)a.dv[a.at(b, j, KV, kvh) + d]) ? NAN : 0.0f, 0.0);
                }
                continue;
            }
            std::vector<double> dk(HD, 0.0), dv(HD, 0.0);
            for (int hh = kvh * G; hh < (kvh + 1) * G; hh++)
                for (int t = j; t < T; t++) {
                    size_t li = ((size_t)b * H + hh) * T + t;
                    double s = 0, dp = 0;
                    for (int d = 0; d < HD; d++) {
                        s += (double)(float)a.q[a.at(b, t, H, hh) + d] * (double)(float)a.k[a.at(b, j, KV, kvh) + d];
                        dp += (double)(float)a.dout[a.at(b, t, H, hh) + d] * (double)(float)a.v[a.at(b, j, KV, kvh) + d];
                    }
                    double pp = exp(s * ATT_SCALE - a.lse[li]), ds = pp * (dp - a.delta[li]) * ATT_SCALE;
                    for (int d = 0; d < HD; d++) {
                        dk[d] += ds * (double)(float)a.q[a.at(b, t, H, hh) + d];
                        dv[d] += pp * (double)(float)a.dout[a.at(b, t, H, hh) + d];
                    }
                }
            for (int d = 0; d < HD; d++) {
                ck(a.at(b, j, KV, kvh) + d, (float)a.dk[a.at(b, j, KV, kvh) + d], dk[d]);
                cv(a.at(b, j, KV, kvh) + d, (float)a.dv[a.at(b, j, KV, kvh) + d], dv[d]);
            }
        }
    }
    if (tc) {  // the delta kernel's first and last rows, from dout . out in double
        auto chk = [&](int b, int t, int h) {
            size_t li = ((size_t)b * H + h) * T + t;
            double dl = 0;
            for (int d = 0; d < HD; d++) dl += (double)(float)a.dout[a.at(b, t, H, h) + d] * (double)(float)a.out[a.at(b, t, H, h) + d];
            cd(li, a.delta[li], dl);
        };
        for (int h = 0; h < 8; h++) chk(0, 0, h);
        for (int h = H - 8; h < H; h++) chk(B - 1, T - 1, h);
    } else cd.used = false;
    if (isnan((float)a.dq[0]) || isnan((float)a.dq[(size_t)BT * H * HD - 1])) problem("dq: the first row of head 0 or the last of head %d not written", H - 1);
    if (isnan((float)a.dk[(size_t)BT * KV * HD - 1])) problem("dk: the last row not written");
    return std::to_string(qrows) + " dq rows, " + std::to_string(krows) + " dk/dv rows (blocks " + blocks_text(pick[k1]) + " of " + k1 +
           ", " + blocks_text(pick[k2]) + " of " + k2 + ")";
}

// ---------------------------------------------------------------------------------
// the DiT's row kernels at 2^20 rows of width 3072 (3.2e9 elements)
static std::string probe_layernorm_modulate(bool backward) {
    const size_t n = (size_t)DROWS * DC;
    floatX* inp = rbuf<floatX>("inp", n);
    floatX* mod = rbuf<floatX>("mod", (size_t)DB * DLD);  // [B, 6C]: shift = +0, scale = +C
    float* mean = rbuf<float>("mean", DROWS);
    float* rstd = rbuf<float>("rstd", DROWS);
    floatX* out = rbuf<floatX>(backward ? "dinp" : "out", n);
    floatX* dout = backward ? rbuf<floatX>("dout", n) : nullptr;
    floatX* dmod = backward ? rbuf<floatX>("dmod", (size_t)DB * DLD) : nullptr;
    fill(mod, 0, (size_t)DB * DLD, -0.5f, 0.5f);
    auto run = [&] {
        // no scratch: the one-stage column sums, whose blocks walk whole samples (the two-stage
        // kernels' chunks are checked by the harness)
        if (backward) layernorm_modulate_backward(out, dmod, dmod + DC, dout, inp, mean, rstd, mod + DC, DLD, DB, DN, DC, nullptr, 0);
        else layernorm_modulate_forward(out, mean, rstd, inp, mod, mod + DC, DLD, DB, DN, DC, 1e-6f, 0);
    };
    std::vector<Shape> L = shapes(run);
    // C = 3072 in bf16: 12 vectors per lane, the rows in registers (16 of them)
    const char* kr = backward ? "lnmod_dinp_nv16_kernel" : "lnmod_forward_nv16_kernel";
    Shape s = shape_of(L, kr);
    const int R = 64;
    std::vector<int> cand;
    for (int i = 0; i < R; i++) { cand.push_back(i); cand.push_back(DROWS - R + i); }
    for (int i : cand) {
        fill(inp, (size_t)i * DC, DC, 5.0f, 7.0f);  // mean 6: the two-pass variance matters
        if (backward) { fill(dout, (size_t)i * DC, DC); fill(out, (size_t)i * DC, DC); put(mean, i, 6.0f); put(rstd, i, rnd(1.0f, 2.0f)); }
        else { poison(out, (size_t)i * DC, DC); poison(mean, i, 1); poison(rstd, i, 1); }
    }
    Pick pick = {{kr, uniq({0, s.nb() - 1})}};
    std::map<int, std::vector<float>> before;
    if (backward) {
        for (int i : cand) before[i] = get(out, (size_t)i * DC, DC);
        // the column sums: the last block (the last columns of the last sample: every one of its
        // 65536 rows is a page of its own to read, so one block)
        Shape sc = shape_of(L, "layernorm_modulate_backward_colsum_kernel");
        pick["layernorm_modulate_backward_colsum_kernel"] = {sc.nb() - 1};
        poison(dmod, 0, (size_t)DB * DLD);
    }
    run_picked(pick, run);
    Cmp c(backward ? "dinp" : "out", REL, 2e-3), cs("mean/rstd", 1e-5, 1e-6), cc("dshift/dscale", REL, 1e-3);
    int written = 0;
    for (int i : cand) {
        int b = i / DN;
        if (!backward && isnan(mean[i])) continue;  // a row no chosen block owns
        std::vector<float> x = get(inp, (size_t)i * DC, DC), y(DC), sh = get(mod, (size_t)b * DLD, DLD);
        if (!backward) {
            float mm, rs;
            cpu::layernorm_modulate_forward(y.data(), &mm, &rs, x.data(), sh.data(), sh.data() + DC, DLD, 1, 1, DC, 1e-6f, 0);
            cs(i, mean[i], mm); cs(i, rstd[i], rs);
        } else {
            // a row no chosen block owns keeps its initial values exactly
            std::vector<float> dy = get(dout, (size_t)i * DC, DC), ds(DLD);
            y = before[i];
            cpu::layernorm_modulate_backward(y.data(), ds.data(), ds.data() + DC, dy.data(), x.data(), mean + i, rstd + i,
                                             sh.data() + DC, DLD, 1, 1, DC, nullptr, 0);
            bool same = true;
            for (int k = 0; k < DC && same; k++) same = (float)out[(size_t)i * DC + k] == (float)(floatX)before[i][k];
            if (same) continue;
        }
        written++;
        for (int k = 0; k < DC; k++) c((size_t)i * DC + k, (float)out[(size_t)i * DC + k], y[k]);
    }
    cs.used = !backward; cc.used = backward;
    if (backward) {
        // column sums of the first columns of sample 0 and the last of sample B-1: only the
        // candidate rows are nonzero
        Shape sc = shape_of(L, "layernorm_modulate_backward_colsum_kernel");
        int cols[1][2] = {{(int)sc.grid.x - 1, DB - 1}};  // (column block, sample)
        for (auto& cb : cols)
            for (int j = cb[0] * 32; j < cb[0] * 32 + 32 && j < DC; j++) {
                double s1 = 0, s2 = 0;
                for (int i : cand)
                    if (i / DN == cb[1]) {
                        size_t e = (size_t)i * DC + j;
                        double d = (float)dout[e];
                        s1 += d; s2 += d * (((float)inp[e] - mean[i]) * rstd[i]);
                    }
                cc((size_t)cb[1] * DLD + j, (float)dmod[(size_t)cb[1] * DLD + j], s1);
                cc((size_t)cb[1] * DLD + DC + j, (float)dmod[(size_t)cb[1] * DLD + DC + j], s2);
            }
    }
    if (written < 2) problem("only %d candidate rows written", written);
    return std::string(kr) + " grid " + std::to_string(s.nb()) + ": " + std::to_string(written) + " rows";
}

// gated residual: blocks walk rows grid-stride (65535 blocks)
static std::string probe_gated_residual(bool backward) {
    const size_t n = (size_t)DROWS * DC;
    floatX* y = rbuf<floatX>("y", n);
    floatX* gate = rbuf<floatX>("gate", (size_t)DB * DLD);
    floatX* a = rbuf<floatX>(backward ? "dout" : "res", n);
    floatX* o = rbuf<floatX>(backward ? "dy" : "out", n);
    floatX* dgate = backward ? rbuf<floatX>("dgate", (size_t)DB * DLD) : nullptr;
    fill(gate, 0, (size_t)DB * DLD);
    auto run = [&] {
        if (backward) gated_residual_backward(o, dgate, a, y, gate, DLD, DB, DN, DC, 0, nullptr, 0);  // one-stage dgate
        else gated_residual_forward(o, a, y, gate, DLD, DB, DN, DC, 0);
    };
    std::vector<Shape> L = shapes(run);
    const char* kr = backward ? "gated_residual_backward_dy_vec_kernel" : "gated_residual_forward_vec_kernel";  // aligned rows
    Shape s = shape_of(L, kr), r1 = s;
    r1.block.x = 1;  // rows grid-stride: row r by block r mod G
    std::vector<ull> blocks = uniq({0, s.nb() - 1, gs_owner(DROWS - 1, r1)});
    std::vector<size_t> rows = gs_units(DROWS, r1, blocks);
    for (size_t i : rows) { fill(y, i * DC, DC); fill(a, i * DC, DC); poison(o, i * DC, DC); }
    Pick pick = {{kr, blocks}};
    if (backward) {
        Shape sg = shape_of(L, "gated_residual_backward_dgate_kernel");
        pick["gated_residual_backward_dgate_kernel"] = {sg.nb() - 1};  // as the layernorm's column sums
        poison(dgate, 0, (size_t)DB * DLD);
    }
    run_picked(pick, run);
    Cmp c(backward ? "dy" : "out", REL, 1e-3), cg("dgate", REL, 1e-3);
    for (size_t i : rows) {
        int b = (int)(i / DN);
        std::vector<float> yy = get(y, i * DC, DC), aa = get(a, i * DC, DC), g = get(gate, (size_t)b * DLD, DLD), out(DC);
        if (backward) cpu::gated_residual_backward(out.data(), nullptr, aa.data(), yy.data(), g.data(), DLD, 1, 1, DC, 0, nullptr, 0);
        else cpu::gated_residual_forward(out.data(), aa.data(), yy.data(), g.data(), DLD, 1, 1, DC, 0);
        for (int k = 0; k < DC; k++) c(i * DC + k, (float)o[i * DC + k], out[k]);
    }
    cg.used = backward;
    if (backward) {
        Shape sg = shape_of(L, "gated_residual_backward_dgate_kernel");
        int cols[1][2] = {{(int)sg.grid.x - 1, DB - 1}};
        for (auto& cb : cols)
            for (int j = cb[0] * 32; j < cb[0] * 32 + 32 && j < DC; j++) {
                double sum = 0;
                for (size_t i : rows)
                    if ((int)(i / DN) == cb[1]) sum += (double)(float)a[i * DC + j] * (double)(float)y[i * DC + j];
                cg((size_t)cb[1] * DLD + j, (float)dgate[(size_t)cb[1] * DLD + j], sum);
            }
    }
    return std::string(kr) + " grid " + std::to_string(s.nb()) + ", blocks " + blocks_text(blocks) + ": " + std::to_string(rows.size()) + " rows";
}

// bias of a DiT FFN up-projection: forward over out [2^20, 4 x 3072] (grid-stride rows);
// backward (a block sums every row of its 32 columns: each row is a page of its own to read)
// over [2^17, 8 x 3072], the last block (the last columns), 3.2e9 elements either way
static std::string probe_bias(bool backward) {
    const int OC = backward ? 8 * DC : 4 * DC, N = backward ? DROWS / 8 : DROWS;
    const size_t n = (size_t)N * OC;
    floatX* x = rbuf<floatX>(backward ? "dout" : "out", n);
    floatX* bias = rbuf<floatX>(backward ? "dbias" : "bias", OC);
    auto run = [&] {
        if (backward) bias_backward(bias, x, N, OC, nullptr, 0);  // one stage: a block walks every row
        else bias_forward(x, bias, N, OC, 0);
    };
    const char* k = backward ? "bias_backward_kernel" : "bias_forward_vec_kernel";  // OC a multiple of 8: vectors
    Shape s = shape_of(shapes(run), k);
    fill(bias, 0, OC);
    std::vector<float> b0 = get(bias, 0, OC);
    Cmp c(backward ? "dbias" : "out", REL, 1e-3);
    std::string what;
    if (!backward) {
        Shape r1 = s; r1.block.x = 1;
        std::vector<ull> blocks = uniq({0, s.nb() - 1, gs_owner(N - 1, r1)});
        std::vector<size_t> rows = gs_units(N, r1, blocks);
        std::map<size_t, std::vector<float>> ref;
        for (size_t i : rows) {
            fill(x, i * OC, OC);
            std::vector<float> r = get(x, i * OC, OC);
            cpu::bias_forward(r.data(), b0.data(), 1, OC, 0);
            ref[i] = r;
        }
        run_picked({{k, blocks}}, run);
        for (auto& r : ref)
            for (int j = 0; j < OC; j++) c(r.first * OC + j, (float)x[r.first * OC + j], r.second[j]);
        what = "blocks " + blocks_text(blocks) + ": " + std::to_string(rows.size()) + " rows";
    } else {
        // the first and the last 64 rows hold values; the block of the last columns
        std::vector<ull> blocks = {s.nb() - 1};
        std::vector<int> rows;
        for (int i = 0; i < 64; i++) { rows.push_back(i); rows.push_back(N - 64 + i); }
        for (int i : rows) fill(x, (size_t)i * OC, OC);
        run_picked({{k, blocks}}, run);
        for (ull b : blocks)
            for (int j = (int)b * 32; j < (int)b * 32 + 32; j++) {
                double sum = b0[j];
                for (int i : rows) sum += (double)(float)x[(size_t)i * OC + j];
                c(j, (float)bias[j], sum);
            }
        what = "blocks " + blocks_text(blocks) + " (every block reads all " + std::to_string(N) + " rows)";
    }
    return std::string(k) + " grid " + std::to_string(s.nb()) + ", " + what;
}

// llmc's fallback matmul kernel (cuBLASLt "finds no algorithm") at the LM head, N x C -> OC
// = B*T x D -> V: logits [N, OC] = x [N, C] W^T (which 0), dx = dlogits W (1), dW += dlogits^T x
// (2); and the forward of a DiT linear layer over 2^20 rows. 16x16 tiles: the first tile and
// the last
static std::string probe_matmul(int which, int N = BT, int C = D, int OC = V) {
    emu::lt_mode = 0;
    matmul_setup();
    floatX* x = rbuf<floatX>("x", (size_t)N * C);
    floatX* w = rbuf<floatX>("W", (size_t)OC * C);
    floatX* lg = rbuf<floatX>("out", (size_t)N * OC);
    floatX* o = which == 0 ? lg : which == 1 ? x : w;  // the output
    auto run = [&] {
        if (which == 0) matmul_forward(lg, x, w, N, C, OC, C, 0, 0);
        else if (which == 1) matmul_backward_input(x, lg, w, N, C, OC, C, 0, 0);
        else matmul_backward_weight(w, lg, x, N, C, OC, C, 0);
    };
    Shape s = shape_of(shapes(run), "matmul_fallback_kernel");
    const int TL = MATMUL_FB_TILE;
    // the forward sums over D: the first tile and the last; the backward ones over V or B*T
    // (one page per entry to read): the last tile
    std::vector<ull> blocks = which == 0 ? uniq({0, s.nb() - 1}) : std::vector<ull>{s.nb() - 1};
    int NC = which == 0 ? OC : C, K = which == 2 ? N : which == 1 ? OC : C;
    size_t ld = NC;
    // the summed dimension: all of it in the forward (D); the first and the last 256 entries
    // otherwise (V or B*T long: the rest reads as zeros)
    auto kin = [&](int kk) { return which == 0 || kk < 256 || kk >= K - 256; };
    Cmp c(which == 0 ? "out" : which == 1 ? "dx" : "dW", REL, 1e-3);
    std::vector<std::pair<int, int>> tiles;  // (row tile, column tile)
    for (ull b : blocks) tiles.push_back({(int)(b % s.grid.x), (int)(b / s.grid.x)});  // row tiles along x
    std::map<size_t, double> ref;
    for (auto& tt : tiles) {
        int i0 = tt.first * TL, j0 = tt.second * TL;
        for (int i = i0; i < i0 + TL; i++)
            for (int kk = 0; kk < K; kk++) if (kin(kk)) {
                // A[i, k]: x[i, k] (fwd), dlogits[i, k] (dx), dlogits[k, i] (dW)
                if (which == 0) put(x, (size_t)i * C + kk, rnd());
                else if (which == 1) put(lg, (size_t)i * OC + kk, rnd());
                else put(lg, (size_t)kk * OC + i, rnd());
            }
        for (int j = j0; j < j0 + TL; j++)
            for (int kk = 0; kk < K; kk++) if (kin(kk)) {
                // B[k, j]: W[j, k] (fwd), W[k, j] (dx), x[k, j] (dW)
                if (which == 0) put(w, (size_t)j * C + kk, rnd());
                else if (which == 1) put(w, (size_t)kk * C + j, rnd());
                else put(x, (size_t)kk * C + j, rnd());
            }
        for (int i = i0; i < i0 + TL; i++)
            for (int j = j0; j < j0 + TL; j++) {
                if (which == 2) put(w, (size_t)i * C + j, rnd());  // dW accumulates
                else poison(o, (size_t)i * ld + j, 1);
            }
    }
    for (auto& tt : tiles) {  // the twin, on the tile's rows and columns (zeros where nothing was set)
        int i0 = tt.first * TL, j0 = tt.second * TL;
        std::vector<float> A((size_t)TL * K), Bt((size_t)TL * K), out((size_t)TL * TL);
        for (int i = 0; i < TL; i++)
            for (int kk = 0; kk < K; kk++) {
                A[(size_t)i * K + kk] = which == 0 ? (float)x[(size_t)(i0 + i) * C + kk] : which == 1 ? (float)lg[(size_t)(i0 + i) * OC + kk]
                                                                                            : (float)lg[(size_t)kk * OC + i0 + i];
                Bt[(size_t)i * K + kk] = which == 0 ? (float)w[(size_t)(j0 + i) * C + kk] : which == 1 ? (float)w[(size_t)kk * C + j0 + i]
                                                                                             : (float)x[(size_t)kk * C + j0 + i];
            }
        if (which == 2)
            for (int i = 0; i < TL; i++)
                for (int j = 0; j < TL; j++) out[(size_t)i * TL + j] = (float)w[(size_t)(i0 + i) * C + j0 + j];
        cpu::matmul_forward(out.data(), A.data(), Bt.data(), TL, K, TL, K, which == 2, 0);  // out (+)= A Bt^T
        for (int i = 0; i < TL; i++)
            for (int j = 0; j < TL; j++) ref[(size_t)(i0 + i) * ld + j0 + j] = out[(size_t)i * TL + j];
    }
    run_picked({{"matmul_fallback_kernel", blocks}}, run);
    for (auto& r : ref) c(r.first, (float)o[r.first], r.second);
    matmul_teardown();
    return "grid " + std::to_string(s.grid.x) + "x" + std::to_string(s.grid.y) + ", blocks " + blocks_text(blocks);
}

// ---------------------------------------------------------------------------------
// the probe must be able to fail: the cross-entropy row addressing with the row offset in
// int (x = logits + i * V), as a kernel written without size_t would have it. From row
// 16744 on, i * V passes 2^31 and wraps negative: the last row is addressed 185 MB before
// the buffer (a fault here; an illegal address or a wrong row on the GPU).
static void planted_int_row_kernel(floatX* logits, int V_) {
    int i = (int)blockIdx.x;
    floatX* x = logits + i * V_;  // the bug: an int product (-fwrapv: it wraps as on the GPU)
    for (int c = (int)threadIdx.x; c < V_; c += (int)blockDim.x) x[c] = (floatX)((float)x[c] * 0.5f);
}
static std::string probe_planted_int_index() {
    floatX* logits = rbuf<floatX>("logits", (size_t)BT * V);
    const int rows[2] = {0, BT - 1};
    for (int i : rows) fill(logits, (size_t)i * V, V);
    std::vector<std::vector<float>> before;
    for (int i : rows) before.push_back(get(logits, (size_t)i * V, V));
    auto run = [&] { ::emu::launch("planted_int_row_kernel", __FILE__, __LINE__, dim3(BT), dim3(512), 0, (cudaStream_t)0,
                                   planted_int_row_kernel, logits, V); };
    run_picked({{"planted_int_row_kernel", {0, (ull)BT - 1}}}, run);
    Cmp c("logits", 0, 0);
    for (int k = 0; k < 2; k++)
        for (int j = 0; j < V; j++) c((size_t)rows[k] * V + j, (float)logits[(size_t)rows[k] * V + j], 0.5 * before[k][j]);
    return "rows 0 and " + std::to_string(BT - 1);
}

// ---------------------------------------------------------------------------------
struct Probe { std::string name; std::function<std::string()> fn; bool must_fail; };
static std::vector<Probe> probes() {
    return {
        {"encoder_forward[N=32768,D=4096,V=128256]", probe_encoder_forward, false},
        {"encoder_backward[N=32768,D=4096,V=128256]", probe_encoder_backward, false},
        {"rmsnorm_forward[N=32768,C=4096]", probe_rmsnorm_forward, false},
        {"rmsnorm_backward[N=32768,C=4096]", probe_rmsnorm_backward, false},
        {"rope_forward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_rope(false); }, false},
        {"rope_backward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_rope(true); }, false},
        // more rows than the grid's 65535 x 8: the last block walks rows and wraps positions
        {"rope_forward[B=80,T=8192,H=1,KV=1,hd=8]", [] { return probe_rope(false, 80, 8192, 1, 1, 8); }, false},
        {"swiglu_forward[n=32768x14336]", [] { return probe_swiglu(false); }, false},
        {"swiglu_backward[n=32768x14336]", [] { return probe_swiglu(true); }, false},
        {"matmul_fallback_forward[lm_head:N=32768,C=4096,OC=128256]", [] { return probe_matmul(0); }, false},
        {"matmul_fallback_backward_input[lm_head]", [] { return probe_matmul(1); }, false},
        {"matmul_fallback_backward_weight[lm_head]", [] { return probe_matmul(2); }, false},
        {"matmul_fallback_forward[dit:N=1048576,C=3072,OC=3072]", [] { return probe_matmul(0, DROWS, DC, DC); }, false},
        {"crossentropy[N=32768,V=128256]", probe_crossentropy, false},
        {"crossentropy_vp[N=65536,Vs=64128,v0=64128]", probe_crossentropy_vp, false},
        {"adamw[n=8030261248]", probe_adamw, false},
        {"global_norm_squared[n=8030261248]", probe_global_norm, false},
        {"attention_forward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_attention_forward(false); }, false},
        {"attention_backward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_attention_backward(false); }, false},
        {"attention_tc_forward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_attention_forward(true); }, false},
        {"attention_tc_backward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_attention_backward(true); }, false},
        {"attention_tc2_forward[B=4,T=8192,H=32,KV=8,hd=128]", [] { return probe_attention_forward(true, true); }, false},
        {"layernorm_modulate_forward[B=16,N=65536,C=3072]", [] { return probe_layernorm_modulate(false); }, false},
        {"layernorm_modulate_backward[B=16,N=65536,C=3072]", [] { return probe_layernorm_modulate(true); }, false},
        {"gated_residual_forward[B=16,N=65536,C=3072]", [] { return probe_gated_residual(false); }, false},
        {"gated_residual_backward[B=16,N=65536,C=3072]", [] { return probe_gated_residual(true); }, false},
        {"bias_forward[N=1048576,OC=12288]", [] { return probe_bias(false); }, false},
        {"bias_backward[N=131072,OC=24576]", [] { return probe_bias(true); }, false},
        {"catches_int_index[crossentropy-style row offset in int, N=32768,V=128256]", probe_planted_int_index, true},
    };
}

static const int PROBE_TIMEOUT_S = 60;
// the child: runs the probe, writes "OK what" or "BAD why" (or an emulator error's FAIL line)
// to out, its details to err
static void child(const Probe& p, FILE* out, FILE* err) {
    dup2(fileno(out), 1);
    dup2(fileno(err), 2);
    alarm(PROBE_TIMEOUT_S);
    g_name = p.name;
    emu::error_handler = on_emu_error;
    emu::reserve_allocs = true;
    fprintf(stderr, "== probe.%s\n", p.name.c_str());
    std::string what = p.fn();
    check_strays();
    if (g_problems.empty()) printf("OK %s\n", what.c_str());
    else printf("BAD %s%s\n", g_problems[0].c_str(),
                g_problems.size() > 1 ? (" (+" + std::to_string(g_problems.size() - 1) + " more, see the log)").c_str() : "");
    fflush(stdout); fflush(stderr);
    _exit(0);
}
static std::string slurp(FILE* f) {
    std::string s;
    char buf[4096];
    size_t k;
    rewind(f);
    while ((k = fread(buf, 1, sizeof buf, f)) > 0) s.append(buf, k);
    fclose(f);
    return s;
}
// the PASS/FAIL line of a finished child
static std::string verdict(const Probe& p, int st, std::string out, bool* pass) {
    while (!out.empty() && out.back() == '\n') out.pop_back();
    std::string why;  // why it failed, or empty
    if (out.rfind("OK ", 0) == 0) why = "";
    else if (out.rfind("BAD ", 0) == 0) why = out.substr(4);
    else if (out.rfind("FAIL ", 0) == 0) why = out.substr(out.find(": ") + 2);  // an emulator error
    else if (WIFSIGNALED(st)) {
        int sg = WTERMSIG(st);
        why = sg == SIGALRM ? "timed out after " + std::to_string(PROBE_TIMEOUT_S) + " s"
                            : std::string("crashed with signal ") + std::to_string(sg) + " (" + strsignal(sg) + ")";
    } else why = "exited with status " + std::to_string(WEXITSTATUS(st)) + " without a verdict";
    *pass = p.must_fail ? !why.empty() : why.empty();
    if (p.must_fail)
        return why.empty() ? "FAIL probe." + p.name + ": the planted int index was NOT caught (" + out.substr(3) + ")"
                           : "PASS probe." + p.name + "[caught: " + why + "]";
    return why.empty() ? "PASS probe." + p.name + "[" + out.substr(3) + "]" : "FAIL probe." + p.name + ": " + why;
}

int main(int argc, char** argv) {
    const char* filter = nullptr;
    bool list = false;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--list") == 0) list = true;
        else if (strcmp(argv[i], "--filter") == 0 && i + 1 < argc) filter = argv[++i];
        else { fprintf(stderr, "usage: index_probe [--list] [--filter S]   (EMU_PROBE_JOBS: probes at a time, default 2)\n"); return 2; }
    }
    std::vector<Probe> sel;
    for (const Probe& p : probes())
        if (!filter || p.name.find(filter) != std::string::npos) sel.push_back(p);
    if (list) { for (const Probe& p : sel) printf("%s\n", p.name.c_str()); return 0; }
    // children side by side (each is one OS thread), the lines printed in the table's order
    const char* j = getenv("EMU_PROBE_JOBS");
    int jobs = j && atoi(j) > 0 ? atoi(j) : 2;
    struct Running { size_t idx; FILE *out, *err; };
    std::map<pid_t, Running> running;
    std::vector<std::string> lines(sel.size()), logs(sel.size());
    int np = 0, nf = 0;
    size_t next = 0;
    while (next < sel.size() || !running.empty()) {
        while (next < sel.size() && (int)running.size() < jobs) {
            FILE* out = tmpfile();
            FILE* err = tmpfile();
            if (!out || !err) { perror("tmpfile"); return 2; }
            fflush(stdout); fflush(stderr);
            pid_t pid = fork();
            if (pid < 0) { perror("fork"); return 2; }
            if (pid == 0) child(sel[next], out, err);
            running[pid] = {next++, out, err};
        }
        int st = 0;
        pid_t pid = waitpid(-1, &st, 0);
        if (pid < 0) { perror("waitpid"); return 2; }
        auto it = running.find(pid);
        if (it == running.end()) continue;
        bool pass = false;
        lines[it->second.idx] = verdict(sel[it->second.idx], st, slurp(it->second.out), &pass);
        logs[it->second.idx] = slurp(it->second.err);
        (pass ? np : nf)++;
        running.erase(it);
    }
    for (size_t i = 0; i < sel.size(); i++) { fputs(logs[i].c_str(), stderr); printf("%s\n", lines[i].c_str()); }
    fprintf(stderr, "index_probe: %d passed, %d failed\n", np, nf);
    return nf ? 1 : 0;
}
