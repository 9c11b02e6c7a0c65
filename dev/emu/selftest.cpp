/*
Self-test of the host emulator (emu.h and the bf16 shim): small kernels with known bugs
must be caught, correct ones must pass. If one of these fails, the emulator itself can
no longer be trusted to catch the same bug in llmc's kernels. One line per case:
    PASS emu.selftest.<case>     or     FAIL emu.selftest.<case>: why
Each case runs in a child process (emulator errors end the process).
*/
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#include <mma.h>
#include "tensorcore.cuh"  // llmc/kernels/tensorcore.cuh as transformed: the model include/tensorcore_emu.h
#include <cublasLt.h>      // the cuBLASLt model
#include <cooperative_groups.h>
#include <sys/wait.h>
#include <signal.h>
#include <functional>
#include <random>
#include <string>
#include <vector>

#ifndef EMU_SHIM_CUDA_RUNTIME
#error "the real CUDA headers were picked up: put dev/emu/include first on the include path"
#endif

#define LAUNCH(k, grid, block, smem, ...) ::emu::launch(#k, __FILE__, __LINE__, dim3(grid), dim3(block), (size_t)(smem), (cudaStream_t)0, k, __VA_ARGS__)

static int passed = 0, failed = 0;

// runs fn in a child; fn returns "" for success or a reason. With `expect`, the child must
// instead die with an emulator error (or crash) whose message contains `expect`.
static void run_case(const std::string& name, std::function<std::string()> fn, const char* expect = nullptr) {
    fflush(stdout); fflush(stderr);
    int pfd[2];
    if (pipe(pfd) != 0) exit(2);
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        dup2(pfd[1], 2);
        alarm(60);
        emu::error_handler = [](const char* msg) { fprintf(stderr, "EMU-ERROR %s\n", msg); fflush(stderr); _exit(20); };
        std::string why = fn();
        fprintf(stderr, "%s\n", why.c_str());
        fflush(stderr);
        _exit(why.empty() ? 0 : 1);
    }
    close(pfd[1]);
    std::string out; char buf[4096]; ssize_t k;
    while ((k = read(pfd[0], buf, sizeof buf)) > 0) out.append(buf, (size_t)k);
    close(pfd[0]);
    int st = 0;
    waitpid(pid, &st, 0);
    fprintf(stderr, "== %s\n%s", name.c_str(), out.c_str());
    std::string fail;
    if (!expect) {
        if (!(WIFEXITED(st) && WEXITSTATUS(st) == 0)) {
            size_t e = out.find_last_not_of("\n");
            size_t b = out.rfind('\n', e);
            fail = out.empty() ? "child died" : out.substr(b == std::string::npos ? 0 : b + 1, e - (b == std::string::npos ? 0 : b + 1) + 1);
        }
    } else {
        bool died = (WIFEXITED(st) && WEXITSTATUS(st) == 20) || WIFSIGNALED(st);
        if (!died) fail = "the bug was not caught (expected an error containing \"" + std::string(expect) + "\")";
        else if (*expect && out.find(expect) == std::string::npos) fail = "caught, but the message lacks \"" + std::string(expect) + "\"";
    }
    if (fail.empty()) { printf("PASS emu.selftest.%s\n", name.c_str()); passed++; }
    else { printf("FAIL emu.selftest.%s: %s\n", name.c_str(), fail.c_str()); failed++; }
}

// ---------------------------------------------------------------------------------
// bf16 conversion against an independent reference: the two bf16 neighbours of f, the
// nearer one, ties to the even one
static unsigned short ref_f2bf(float f) {
    uint32_t u; memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return 0x7fff;
    if ((u & 0x7fffffffu) == 0x7f800000u) return (unsigned short)(u >> 16);
    uint32_t lo = u & 0xffff0000u;
    float flo; memcpy(&flo, &lo, 4);
    int e = (int)((u >> 23) & 0xff);
    double ulp = ldexp(1.0, (e ? e : 1) - 127 - 7);
    double dlo = fabs((double)f - (double)flo), dhi = ulp - dlo;
    unsigned short b = (unsigned short)(lo >> 16);
    if (dhi < dlo || (dhi == dlo && (b & 1))) b++;
    return b;
}
static std::string bf16_rounding() {
    std::mt19937_64 g(1);
    auto check = [](float f) -> std::string {
        unsigned short got = __float2bfloat16(f).__x, want = ref_f2bf(f);
        if (got != want) {
            uint32_t u; memcpy(&u, &f, 4);
            char b[200]; snprintf(b, sizeof b, "float 0x%08x (%g): got 0x%04x, want 0x%04x", u, f, got, want);
            return b;
        }
        return "";
    };
    const uint32_t special[] = {0x00000000u, 0x80000000u, 0x3f800000u, 0x3f808000u, 0x3f818000u, 0x3f817fffu, 0x3f818001u,
                                0x7f7fffffu, 0x7f7f8000u, 0x7f7f7fffu, 0xff7f8000u, 0x7f800000u, 0xff800000u, 0x7fc00000u,
                                0x00000001u, 0x00008000u, 0x00018000u, 0x007fffffu, 0x00800000u};
    for (uint32_t u : special) { float f; memcpy(&f, &u, 4); std::string s = check(f); if (!s.empty()) return s; }
    for (int i = 0; i < (1 << 22); i++) {
        uint32_t u = (uint32_t)g();
        if (i & 1) u = (u & 0xffff0000u) | 0x8000u | (i & 2 ? 0 : (u & 0x7fffu));  // many exact ties
        float f; memcpy(&f, &u, 4);
        std::string s = check(f);
        if (!s.empty()) return s;
    }
    // known values, and double -> bf16 rounded once (1 + 2^-8 + 2^-40 is above the tie)
    if (__float2bfloat16(1.0f).__x != 0x3f80 || __float2bfloat16(1.0f + 1.0f / 256).__x != 0x3f80 ||
        __float2bfloat16(1.0f + 3.0f / 256).__x != 0x3f82 || __float2bfloat16(NAN).__x != 0x7fff)
        return "known values";
    if (__nv_bfloat16(1.0 + 1.0 / 256 + ldexp(1.0, -40)).__x != 0x3f81) return "double -> bf16 rounds twice";
    if ((float)__ushort_as_bfloat16(0x3f81) != 1.0f + 1.0f / 128) return "bf16 -> float";
    return "";
}

// ---------------------------------------------------------------------------------
// warp collectives: values against the CUDA definitions
__global__ void shuffles_kernel(int* out) {
    int t = threadIdx.x, lane = t & 31;
    int v = 1000 * (t >> 5) + lane;
    out[t * 8 + 0] = __shfl_xor_sync(0xffffffffu, v, 5);
    out[t * 8 + 1] = __shfl_down_sync(0xffffffffu, v, 3);
    out[t * 8 + 2] = __shfl_up_sync(0xffffffffu, v, 2);
    out[t * 8 + 3] = __shfl_sync(0xffffffffu, v, 7);
    out[t * 8 + 4] = __shfl_xor_sync(0xffffffffu, v, 4, 8);
    out[t * 8 + 5] = __shfl_down_sync(0xffffffffu, v, 3, 8);
    out[t * 8 + 6] = (int)__ballot_sync(0xffffffffu, lane % 3 == 0);
    out[t * 8 + 7] = __any_sync(0xffffffffu, lane == 17) + 2 * __all_sync(0xffffffffu, lane < 31);
}
static std::string shuffles() {
    std::vector<int> out(64 * 8, -7);
    LAUNCH(shuffles_kernel, 1, 64, 0, out.data());
    unsigned ballot = 0;
    for (int l = 0; l < 32; l++) if (l % 3 == 0) ballot |= 1u << l;
    for (int t = 0; t < 64; t++) {
        int w = t >> 5, l = t & 31, base = 1000 * w;
        int want[8] = {base + (l ^ 5), base + (l + 3 < 32 ? l + 3 : l), base + (l >= 2 ? l - 2 : l), base + 7,
                       base + (l ^ 4), base + ((l % 8) + 3 < 8 ? l + 3 : l), (int)ballot, 1};
        for (int j = 0; j < 8; j++)
            if (out[t * 8 + j] != want[j]) return "thread " + std::to_string(t) + " op " + std::to_string(j) + ": got " +
                                                  std::to_string(out[t * 8 + j]) + ", want " + std::to_string(want[j]);
    }
    return "";
}

// ---------------------------------------------------------------------------------
// a neighbour exchange through shared memory, with and without the barrier
template <int SYNC>
__global__ void neighbour_kernel(float* out) {
    __shared__ float s[128];
    int t = threadIdx.x;
    s[t] = (float)t;
    if (SYNC) __syncthreads();
    out[t] = s[(t + 1) % blockDim.x] + s[(t + blockDim.x - 1) % blockDim.x];
}
template <int SYNC>
static std::string neighbour() {
    std::string bad;
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        std::vector<float> out(128);
        LAUNCH(neighbour_kernel<SYNC>, 1, 128, 0, out.data());
        for (int t = 0; t < 128; t++)
            if (out[t] != (float)((t + 1) % 128 + (t + 127) % 128)) { bad = "wrong value"; break; }
    }
    emu::sched_reverse = false;
    if (SYNC) return bad;
    if (bad.empty()) return "a missing __syncthreads went unnoticed";
    emu::error("missing __syncthreads detected: %s", bad.c_str());
}

// reading shared memory that nobody wrote gives the 0xFF poison (NaN)
__global__ void uninit_smem_kernel(float* out) {
    __shared__ float s[64];
    if (threadIdx.x < 32) s[threadIdx.x] = 1.0f;
    __syncthreads();
    out[threadIdx.x] = s[threadIdx.x];
}
static std::string uninit_smem() {
    std::vector<float> out(64);
    LAUNCH(uninit_smem_kernel, 1, 64, 0, out.data());
    for (int t = 0; t < 32; t++) if (out[t] != 1.0f) return "written part wrong";
    for (int t = 32; t < 64; t++) if (!isnan(out[t])) return "unwritten shared memory is not poisoned";
    return "";
}

__global__ void divergent_kernel(float* out) {
    if (threadIdx.x < 16) __syncthreads();
    else __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void partial_warp_shuffle_kernel(float* out) {
    if ((threadIdx.x & 31) >= 16) return;
    out[threadIdx.x] = __shfl_xor_sync(0xffffffffu, 1.0f, 1);
}
__global__ void deadlock_kernel(float* out) {
    if (threadIdx.x == 0) __syncwarp();
    else __syncthreads();
    out[threadIdx.x] = 1;
}
__global__ void oob_kernel(float* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) out[i] = 1.0f;  // off by one
}
static std::string oob() {
    float* d;
    cudaMalloc(&d, 100 * sizeof(float));
    LAUNCH(oob_kernel, 1, 128, 0, d, 100);
    std::string g = emu::check_guards();
    if (g.empty()) return "an out-of-bounds write went unnoticed";
    emu::error("%s", g.c_str());
}
__global__ void dyn_smem_kernel(float* out, int n) {
    float* smem = (float*)emu_dyn_smem();  // what transform.py makes of "extern __shared__ float smem[];"
    smem[threadIdx.x] = 1.0f;  // n floats requested, blockDim.x written
    __syncthreads();
    out[threadIdx.x] = smem[threadIdx.x];
    (void)n;
}
static std::string dyn_smem_overrun() {
    std::vector<float> out(32);
    LAUNCH(dyn_smem_kernel, 1, 32, 25 * sizeof(float), out.data(), 25);
    return "an overrun of dynamic shared memory went unnoticed";
}
static std::string smem_limit() {
    std::vector<float> out(32);
    size_t big = 64 * 1024;
    LAUNCH(dyn_smem_kernel, 1, 32, big, out.data(), 32);
    cudaError_t e = cudaGetLastError();
    if (e == cudaSuccess) return "64 KiB of dynamic shared memory without cudaFuncSetAttribute was accepted";
    if (cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)big) != cudaSuccess) return "attribute refused";
    LAUNCH(dyn_smem_kernel, 1, 32, big, out.data(), 32);
    if (cudaGetLastError() != cudaSuccess) return "refused after cudaFuncSetAttribute";
    if (cudaFuncSetAttribute(dyn_smem_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, 300 * 1024) == cudaSuccess)
        return "300 KiB accepted (H100 allows 227 KiB)";
    return "";
}
__global__ void __launch_bounds__(128) bounded_kernel(float* out) { out[threadIdx.x] = 1; }
static std::string launch_bounds() {
    static const emu::KernelInfo table[] = {{"bounded_kernel", 128}};
    emu::kernel_table = table; emu::kernel_table_n = 1;
    std::vector<float> out(256);
    LAUNCH(bounded_kernel, 1, 128, 0, out.data());
    if (cudaGetLastError() != cudaSuccess) return "a launch within the bounds failed";
    LAUNCH(bounded_kernel, 1, 256, 0, out.data());
    if (cudaGetLastError() == cudaSuccess) return "256 threads > __launch_bounds__(128) accepted";
    LAUNCH(bounded_kernel, 1, 2048, 0, out.data());
    if (cudaGetLastError() == cudaSuccess) return "a block of 2048 threads accepted";
    return "";
}
// float atomics in schedule order: the fwd/rev comparison sees the order dependence
__global__ void atomic_sum_kernel(float* acc, const float* x) { atomicAdd(acc, x[blockIdx.x * blockDim.x + threadIdx.x]); }
static std::string atomics_order() {
    std::vector<float> x(256);
    for (int i = 0; i < 256; i++) x[i] = (i % 2 ? 1e8f : 1.0f) * (i % 4 < 2 ? 1 : -1) + 0.37f * i;
    float r[2];
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        r[rev] = 0;
        LAUNCH(atomic_sum_kernel, 2, 128, 0, &r[rev], x.data());
    }
    emu::sched_reverse = false;
    if (r[0] == r[1]) return "order-dependent float atomics gave the same result in both schedules";
    return "";
}
// two blocks write the same element: the result depends on the block order
__global__ void block_race_kernel(float* out) { if (threadIdx.x == 0) out[0] = (float)blockIdx.x; }
static std::string block_race() {
    float r[2];
    for (int rev = 0; rev <= 1; rev++) { emu::sched_reverse = rev; LAUNCH(block_race_kernel, 3, 32, 0, &r[rev]); }
    emu::sched_reverse = false;
    return r[0] != r[1] ? "" : "a race between blocks gave the same result in both schedules";
}
// a block-wide tree reduction (the pattern of gnorm/crossentropy) is schedule-independent
__global__ void tree_kernel(float* out, const float* x) {
    __shared__ float red[256];
    red[threadIdx.x] = x[threadIdx.x];
    __syncthreads();
    for (int h = 128; h > 0; h >>= 1) {
        if ((int)threadIdx.x < h) red[threadIdx.x] += red[threadIdx.x + h];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[0] = red[0];
}
static std::string tree() {
    std::vector<float> x(256);
    double s = 0;
    for (int i = 0; i < 256; i++) { x[i] = 0.01f * (float)(i * 37 % 101); s += x[i]; }
    float r[2];
    for (int rev = 0; rev <= 1; rev++) { emu::sched_reverse = rev; LAUNCH(tree_kernel, 1, 256, 0, &r[rev], x.data()); }
    emu::sched_reverse = false;
    if (r[0] != r[1]) return "fwd and rev differ";
    if (fabs(r[0] - s) > 1e-3) return "wrong sum";
    return "";
}

// ---- the wmma shim (include/mma.h)
using namespace nvcuda;
// D = A B + C with every layout the shim supports, against an exact reference (small
// integers: every product and sum is exact in fp32)
template <class LA, class LB, int M, int N, int K>
__global__ void wmma_kernel(float* d, const __nv_bfloat16* a, const __nv_bfloat16* b, const float* c, int lda, int ldb,
                            int ldc, int c_col, int d_col) {
    wmma::fragment<wmma::matrix_a, M, N, K, __nv_bfloat16, LA> fa;
    wmma::fragment<wmma::matrix_b, M, N, K, __nv_bfloat16, LB> fb;
    wmma::fragment<wmma::accumulator, M, N, K, float> fc;
    wmma::load_matrix_sync(fa, a, lda);
    wmma::load_matrix_sync(fb, b, ldb);
    wmma::load_matrix_sync(fc, c, ldc, c_col ? wmma::mem_col_major : wmma::mem_row_major);
    wmma::mma_sync(fc, fa, fb, fc);
    wmma::store_matrix_sync(d, fc, ldc, d_col ? wmma::mem_col_major : wmma::mem_row_major);
}
template <class LA, class LB, int M, int N, int K>
static std::string wmma_case(int c_col, int d_col) {
    const int lda = 40, ldb = 48, ldc = 40;  // multiples of 16 bytes, larger than any extent
    alignas(32) static __nv_bfloat16 a[64 * 48], b[64 * 48];
    alignas(32) static float c[64 * 40], d[64 * 40];
    bool acol = std::is_same<LA, wmma::col_major>::value, bcol = std::is_same<LB, wmma::col_major>::value;
    auto A = [&](int i, int k) { return (float)((i * 7 + k * 3) % 11 - 5); };
    auto Bm = [&](int k, int j) { return (float)((k * 5 + j * 2) % 9 - 4); };
    auto C = [&](int i, int j) { return (float)((i + 3 * j) % 13 - 6); };
    for (int i = 0; i < M; i++) for (int k = 0; k < K; k++) a[acol ? k * lda + i : i * lda + k] = A(i, k);
    for (int k = 0; k < K; k++) for (int j = 0; j < N; j++) b[bcol ? j * ldb + k : k * ldb + j] = Bm(k, j);
    for (int i = 0; i < M; i++) for (int j = 0; j < N; j++) c[c_col ? j * ldc + i : i * ldc + j] = C(i, j);
    LAUNCH((wmma_kernel<LA, LB, M, N, K>), 1, 32, 0, d, a, b, c, lda, ldb, ldc, c_col, d_col);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < N; j++) {
            float ref = C(i, j);
            for (int k = 0; k < K; k++) ref += A(i, k) * Bm(k, j);
            float got = d[d_col ? j * ldc + i : i * ldc + j];
            if (got != ref) {
                char m[200];
                snprintf(m, sizeof m, "m%dn%dk%d a_col=%d b_col=%d: D[%d][%d] = %g, expected %g", M, N, K, acol, bcol, i, j, got, ref);
                return m;
            }
        }
    return "";
}
static std::string wmma_layouts() {
    std::string r;
    for (int cc = 0; cc <= 1; cc++)
        for (int dc = 0; dc <= 1; dc++) {
            if (r.empty()) r = wmma_case<wmma::row_major, wmma::row_major, 16, 16, 16>(cc, dc);
            if (r.empty()) r = wmma_case<wmma::row_major, wmma::col_major, 16, 16, 16>(cc, dc);
            if (r.empty()) r = wmma_case<wmma::col_major, wmma::row_major, 16, 16, 16>(cc, dc);
            if (r.empty()) r = wmma_case<wmma::col_major, wmma::col_major, 16, 16, 16>(cc, dc);
            if (r.empty()) r = wmma_case<wmma::row_major, wmma::col_major, 32, 8, 16>(cc, dc);
            if (r.empty()) r = wmma_case<wmma::col_major, wmma::row_major, 8, 32, 16>(cc, dc);
        }
    return r;
}
// lanes read what store_matrix_sync wrote without a __syncwarp: some lane reads another
// lane's share before that lane has written it (poison, NaN) in one of the schedules
template <int SYNC>
__global__ void wmma_store_then_read_kernel(float* out) {
    __shared__ __align__(32) float tile[16 * 16];
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
    wmma::fill_fragment(f, 1.0f);
    wmma::store_matrix_sync(tile, f, 16, wmma::mem_row_major);
    if (SYNC) __syncwarp();
    out[threadIdx.x] = tile[(threadIdx.x * 8 + 7) % 256];
}
template <int SYNC>
static std::string wmma_store_then_read() {
    bool bad = false;
    for (int rev = 0; rev <= 1; rev++) {
        float o[32];
        emu::sched_reverse = rev;
        LAUNCH(wmma_store_then_read_kernel<SYNC>, 1, 32, 0, o);
        for (float x : o) bad |= x != 1.0f;
    }
    emu::sched_reverse = false;
    if (SYNC) return bad ? "a correct __syncwarp after store_matrix_sync still read wrong values" : "";
    return bad ? "" : "a read of another lane's store_matrix_sync share without __syncwarp was not seen";
}
__global__ void wmma_bad_args_kernel(float* p, int what) {
    wmma::fragment<wmma::accumulator, 16, 16, 16, float> f;
    if (what == 0) wmma::load_matrix_sync(f, p + (threadIdx.x == 5 ? 16 : 0), 16, wmma::mem_row_major);  // lane-dependent
    if (what == 1) wmma::load_matrix_sync(f, p + 4, 16, wmma::mem_row_major);                             // 16-byte aligned
    if (what == 2) wmma::load_matrix_sync(f, p, 18, wmma::mem_row_major);                                 // ldm 72 bytes
}
static std::string wmma_bad_args(int what) {
    alignas(32) static float buf[64 * 64];
    LAUNCH(wmma_bad_args_kernel, 1, 32, 0, buf, what);
    return "not caught";
}

// ---- the tensor-core wrappers (llmc/kernels/tensorcore.cuh, replaced by include/tensorcore_emu.h)
// One m16n8k16 product D = A B + C of small integers (exact in fp32) against an exact
// reference, its fragments built three ways: by hand from the documented layout (path 0),
// through ldmatrix x4 / x2 from row-major A and n-major B in shared memory (path 1), and
// through ldmatrix x4.trans / x2.trans from k-major copies (path 2: A^T, B as [k][n]).
// BUG = 1 stores d[1] as row g+8 instead of row g, BUG = 2 swaps a[1] and a[2] (rows g+8
// and columns 2t+8 mixed up): the kinds of wrong fragment mapping the model exists to catch.
// (runtime flags, not template parameters: GCC puts the static __shared__ arrays of a template
// instance outside the emu_smem section, where the model's shared-memory check rejects them)
__global__ void tc_mma_kernel(float* d, const __nv_bfloat16* a, const __nv_bfloat16* bt, const float* c, int path, int BUG) {
    __shared__ __align__(16) __nv_bfloat16 sA[16][24], sAt[16][24], sBt[8][24], sB[16][16];  // padded rows
    const int l = threadIdx.x, g = l >> 2, t = l & 3;
    for (int i = l; i < 256; i += 32) {
        sA[i / 16][i % 16] = a[i];
        sAt[i % 16][i / 16] = a[i];
    }
    for (int i = l; i < 128; i += 32) {
        sBt[i / 16][i % 16] = bt[i];  // bt: [n][k]
        sB[i % 16][i / 16] = bt[i];   // [k][n]
    }
    __syncwarp();
    auto A = [&](int r, int k) { return (float)a[r * 16 + k]; };
    auto B = [&](int k, int n) { return (float)bt[n * 16 + k]; };
    tc_u32 fa[4], fb[2];
    if (path == 0) {
        fa[0] = tc_pack_bf16x2(A(g, 2 * t), A(g, 2 * t + 1));
        fa[1] = tc_pack_bf16x2(A(g + 8, 2 * t), A(g + 8, 2 * t + 1));
        fa[2] = tc_pack_bf16x2(A(g, 2 * t + 8), A(g, 2 * t + 9));
        fa[3] = tc_pack_bf16x2(A(g + 8, 2 * t + 8), A(g + 8, 2 * t + 9));
        fb[0] = tc_pack_bf16x2(B(2 * t, g), B(2 * t + 1, g));
        fb[1] = tc_pack_bf16x2(B(2 * t + 8, g), B(2 * t + 9, g));
    } else if (path == 1) {
        // matrices (rows 0-7, cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15): a[0..3]
        tc_ldmatrix_x4(fa, &sA[(l & 7) + ((l >> 3) & 1) * 8][(l >> 4) * 8]);
        tc_ldmatrix_x2(fb, &sBt[l & 7][((l >> 3) & 1) * 8]);
    } else {
        // the transposes: a[1] = (rows 8-15, cols 0-7) of A = (rows 0-7, cols 8-15) of A^T
        tc_ldmatrix_x4_trans(fa, &sAt[(l >> 4) * 8 + (l & 7)][((l >> 3) & 1) * 8]);
        tc_ldmatrix_x2_trans(fb, &sB[(l & 7) + ((l >> 3) & 1) * 8][0]);
    }
    if (BUG == 2) { tc_u32 x = fa[1]; fa[1] = fa[2]; fa[2] = x; }
    float acc[4] = {c[g * 8 + 2 * t], c[g * 8 + 2 * t + 1], c[(g + 8) * 8 + 2 * t], c[(g + 8) * 8 + 2 * t + 1]};
    tc_mma_bf16_16816(acc, fa, fb);
    d[g * 8 + 2 * t] = acc[0];
    d[(BUG == 1 ? g + 8 : g) * 8 + 2 * t + 1] = acc[1];
    d[(g + 8) * 8 + 2 * t] = acc[2];
    if (BUG != 1) d[(g + 8) * 8 + 2 * t + 1] = acc[3];
}
template <int BUG>
static std::string tc_mma_case() {
    std::mt19937 r(7);
    std::vector<__nv_bfloat16> a(256), bt(128);
    std::vector<float> c(128), d(128), want(128);
    for (auto& x : a) x = __nv_bfloat16((float)((int)(r() % 9) - 4));
    for (auto& x : bt) x = __nv_bfloat16((float)((int)(r() % 9) - 4));
    for (auto& x : c) x = (float)((int)(r() % 21) - 10);
    for (int i = 0; i < 16; i++)
        for (int j = 0; j < 8; j++) {
            float s = c[i * 8 + j];
            for (int k = 0; k < 16; k++) s += (float)a[i * 16 + k] * (float)bt[j * 16 + k];
            want[i * 8 + j] = s;
        }
    std::string bad;
    for (int path = 0; path < 3 && bad.empty(); path++)
        for (int rev = 0; rev <= 1 && bad.empty(); rev++) {
            emu::sched_reverse = rev;
            std::fill(d.begin(), d.end(), NAN);
            LAUNCH(tc_mma_kernel, 1, 32, 0, d.data(), a.data(), bt.data(), c.data(), path, BUG);
            for (int i = 0; i < 128; i++)
                if (!(d[i] == want[i])) {
                    bad = "path " + std::to_string(path) + (rev ? " (rev)" : "") + ": D[" + std::to_string(i / 8) + "][" +
                          std::to_string(i % 8) + "] = " + std::to_string(d[i]) + ", want " + std::to_string(want[i]);
                    break;
                }
        }
    emu::sched_reverse = false;
    if (!BUG) return bad;
    if (bad.empty()) return "a wrong fragment mapping gave the right product: the fragment layout is not modelled";
    emu::error("wrong fragment mapping detected: %s", bad.c_str());
}
// ldmatrix of rows that other lanes wrote: right after __syncwarp, poison without it
__global__ void tc_ldmatrix_sync_kernel(float* out, int SYNC) {
    __shared__ __align__(16) __nv_bfloat16 s[32][8];
    const int l = threadIdx.x;
    for (int j = 0; j < 8; j++) s[(l + 1) % 32][j] = __nv_bfloat16((float)((l + 1) % 32 * 8 + j));
    if (SYNC) __syncwarp();
    tc_u32 r[4];
    tc_ldmatrix_x4(r, &s[l][0]);
    for (int i = 0; i < 4; i++) {  // matrix i = rows 8i..8i+7: (row l>>2, cols 2(l%4), +1)
        out[l * 8 + 2 * i] = emu::tc::lo(r[i]);
        out[l * 8 + 2 * i + 1] = emu::tc::hi(r[i]);
    }
}
template <int SYNC>
static std::string tc_ldmatrix_sync() {
    bool bad = false;
    for (int rev = 0; rev <= 1; rev++) {
        std::vector<float> o(256);
        emu::sched_reverse = rev;
        LAUNCH(tc_ldmatrix_sync_kernel, 1, 32, 0, o.data(), SYNC);
        for (int l = 0; l < 32; l++)
            for (int i = 0; i < 4; i++)
                for (int e = 0; e < 2; e++)
                    bad |= o[l * 8 + 2 * i + e] != (float)((8 * i + (l >> 2)) * 8 + 2 * (l & 3) + e);
    }
    emu::sched_reverse = false;
    if (SYNC) return bad ? "ldmatrix after __syncwarp read wrong values" : "";
    return bad ? "" : "an ldmatrix of rows other lanes wrote without __syncwarp was not seen";
}
// cp.async: two groups of 16-byte copies (a zero-filled one among them); WAIT = 0 waits
// for both before reading, WAIT = 1 only for the first (a wrong wait_group count: the
// second tile must read as poison), WAIT = 2 never waits (an error at the end of the block)
__global__ void tc_cp_async_kernel(float* out, const __nv_bfloat16* src, int WAIT) {
    __shared__ __align__(16) __nv_bfloat16 s[2][64 * 8];
    const int t = threadIdx.x;  // 64 threads, one 16-byte row each per tile
    tc_cp_async_16(&s[0][t * 8], src + t * 8, t != 5);
    tc_cp_async_commit();
    tc_cp_async_16(&s[1][t * 8], src + 512 + t * 8, true);
    tc_cp_async_commit();
    if (WAIT == 0) tc_cp_async_wait<0>();
    if (WAIT == 1) tc_cp_async_wait<1>();
    __syncthreads();
    for (int i = t; i < 1024; i += 64) out[i] = (float)s[i / 512][i % 512];
    if (WAIT == 1) {  // everyone has read before a thread's late wait lands its copies
        __syncthreads();
        tc_cp_async_wait<0>();
    }
}
template <int WAIT>
static std::string tc_cp_async() {
    __nv_bfloat16* src;
    cudaMalloc(&src, 1024 * sizeof(__nv_bfloat16));
    std::vector<__nv_bfloat16> h(1024);
    for (int i = 0; i < 1024; i++) h[i] = __nv_bfloat16((float)(i % 200 + 1));
    cudaMemcpy(src, h.data(), sizeof(__nv_bfloat16) * 1024, cudaMemcpyHostToDevice);
    std::vector<float> o(1024);
    LAUNCH(tc_cp_async_kernel, 1, 64, 0, o.data(), src, WAIT);
    bool first_ok = true, second_ok = true;
    for (int i = 0; i < 1024; i++) {
        float want = i >= 40 && i < 48 ? 0.0f : (float)h[i];  // thread 5's row of tile 0 is zero-filled
        (i < 512 ? first_ok : second_ok) &= o[i] == want;
    }
    if (WAIT == 0) return first_ok && second_ok ? "" : "cp.async with wait_group 0 delivered wrong data";
    if (!first_ok) return "the group that wait_group 1 completed is wrong";
    if (second_ok) return "tile 1 read before its group completed was not poisoned";
    for (int i = 512; i < 1024; i++)  // each copy landed at a random point, or not yet: data or poison
        if (!isnan(o[i]) && o[i] != (float)h[i]) return "tile 1 read before its group completed: garbage at " + std::to_string(i);
    return "";
}
// cp.async lands at a random point between the call and its wait (different points under
// fwd and rev). READ: every thread reads another thread's row after a barrier but before
// any wait: poison or data, depending on the seed. WRITE: every thread stores into its own
// destination between the call and the wait (a write-after-write race with the copy):
// the store survives when the copy landed before it, which the old model (copies land at
// the wait) never showed. Both must be caught; the correct protocol (wait, then barrier,
// then read) must give the data under both schedules.
__global__ void tc_cp_async_race_kernel(float* out, const __nv_bfloat16* src, int what) {
    __shared__ __align__(16) __nv_bfloat16 s[64 * 8];
    const int t = threadIdx.x;
    tc_cp_async_16(&s[t * 8], src + t * 8, true);
    tc_cp_async_commit();
    if (what == 1) s[t * 8] = __nv_bfloat16(-1.0f);  // bug: written while the copy is in flight
    if (what != 0) tc_cp_async_wait<0>();
    __syncthreads();
    for (int j = 0; j < 8; j++) out[t * 8 + j] = (float)s[((t + 1) % 64) * 8 + j];  // what == 0: bug, no wait before
    if (what == 0) tc_cp_async_wait<0>();
}
static std::string tc_cp_async_race(int what) {
    __nv_bfloat16* src;
    cudaMalloc(&src, 512 * sizeof(__nv_bfloat16));
    std::vector<__nv_bfloat16> h(512);
    for (int i = 0; i < 512; i++) h[i] = __nv_bfloat16((float)(i % 100 + 1));
    cudaMemcpy(src, h.data(), sizeof(__nv_bfloat16) * 512, cudaMemcpyHostToDevice);
    std::vector<float> o[2];
    int wrong[2] = {0, 0};
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        o[rev].assign(512, 0.0f);
        LAUNCH(tc_cp_async_race_kernel, 1, 64, 0, o[rev].data(), (const __nv_bfloat16*)src, what);
        for (int i = 0; i < 512; i++) wrong[rev] += !(o[rev][i] == (float)h[(i + 8) % 512]);
    }
    emu::sched_reverse = false;
    bool differ = memcmp(o[0].data(), o[1].data(), 512 * sizeof(float)) != 0;
    if (what == 2) return wrong[0] || wrong[1] ? "the correct wait / barrier / read protocol read wrong values" : "";
    if (!wrong[0] && !wrong[1] && !differ) return "not caught: every value right in both schedules";
    emu::error("cp.async %s caught: %d and %d of 512 values wrong under fwd and rev, the schedules %s",
               what == 0 ? "destination read before its wait" : "destination written before its wait", wrong[0], wrong[1],
               differ ? "differ" : "agree");
}

// ---- shared-memory bank conflicts (include/smem_banks.h): exact counts on known layouts
// ldmatrix x4 of 32 rows `stride` bytes apart, cp.async 16 bytes a lane `cstride` bytes
// apart, float stores `fstride` words apart, bf16 stores to consecutive elements (two
// lanes a word: no conflict). The stores are written as transform.py writes a kernel's.
__global__ void banks_kernel(int stride, int cstride, int fstride, const __nv_bfloat16* g) {
    __shared__ __align__(128) unsigned char s[32 * 1024 + 64];
    const int l = threadIdx.x;
    for (int i = l; i < (int)sizeof s; i += 32) s[i] = 0;
    __syncwarp();
    tc_u32 r[4];
    tc_ldmatrix_x4(r, s + l * stride);
    __syncwarp();
    tc_cp_async_16(s + l * cstride, g, true);
    tc_cp_async_commit();
    tc_cp_async_wait<0>();
    __syncwarp();
    EMU_SMEM_STORE(((float*)s)[l * fstride]) = 1.0f;
    EMU_SMEM_STORE(((__nv_bfloat16*)s)[l]) = __nv_bfloat16(2.0f);
}
static std::string bank_counts() {
    __nv_bfloat16* g;
    cudaMalloc(&g, 16);
    cudaMemset(g, 0, 16);
    struct Case { int stride, cstride, fstride; unsigned ld, cp, st; } cases[] = {
        {144, 16, 1, 4, 4, 1},   // rows padded to 144 bytes, contiguous 16-byte copies, consecutive floats
        {128, 32, 2, 32, 8, 2},  // unpadded 128-byte rows: 8 rows of a matrix in one bank group (8-way);
                                 // 16-byte copies 32 bytes apart: 2-way in each phase; floats 2 words apart: 2-way
        {64, 128, 32, 16, 32, 32},  // 64-byte rows: 4-way; copies 128 bytes apart: 8-way; floats 32 words apart: 32-way
    };
    for (const Case& c : cases) {
        emu::banks::table().clear();
        LAUNCH(banks_kernel, 1, 32, 0, c.stride, c.cstride, c.fstride, (const __nv_bfloat16*)g);
        unsigned got[4] = {0, 0, 0, 0}, want[4] = {c.ld, c.cp, c.st, 1}, ideal[4] = {4, 4, 1, 1};
        int n = 0;
        for (const emu::banks::Stat& st : emu::banks::table()) {
            int i = st.kind == emu::banks::LDMATRIX ? 0 : st.kind == emu::banks::CP_ASYNC ? 1 : st.width == 4 ? 2 : 3;
            got[i] = (unsigned)st.wavefronts;
            if (st.ideal != ideal[i] || st.requests != 1) return "site " + std::to_string(st.line) + ": wrong request or ideal count";
            n++;
        }
        if (n != 4) return "expected 4 sites, counted " + std::to_string(n);
        for (int i = 0; i < 4; i++)
            if (got[i] != want[i]) {
                char m[200];
                snprintf(m, sizeof m, "stride %d/%d/%d: access %d took %u wavefronts, expected %u", c.stride, c.cstride,
                         c.fstride, i, got[i], want[i]);
                return m;
            }
    }
    return "";
}
// the harness's verdict (ldmatrix and cp.async must be conflict-free) on a kernel whose
// ldmatrix rows are not padded
static std::string bank_conflict_caught() {
    __nv_bfloat16* g;
    cudaMalloc(&g, 16);
    cudaMemset(g, 0, 16);
    LAUNCH(banks_kernel, 1, 32, 0, 144, 16, 1, (const __nv_bfloat16*)g);
    auto required = [](const emu::banks::Stat& s) { return s.kind == emu::banks::LDMATRIX || s.kind == emu::banks::CP_ASYNC; };
    if (!emu::banks::first_violation(required).empty()) return "the padded layout was reported as conflicting";
    LAUNCH(banks_kernel, 1, 32, 0, 128, 16, 1, (const __nv_bfloat16*)g);
    std::string v = emu::banks::first_violation(required);
    if (v.empty()) return "not caught";
    emu::error("%s", v.c_str());
}

// ---- the cuBLASLt model (include/cublasLt.h): C and D as cublasLtMatmul documents them
static cublasStatus_t lt_gemm(float* C, int64_t ldc, float* D, int64_t ldd, float beta) {
    const int m = 3, n = 2, k = 2;
    static float A[6] = {1, 2, 3, 4, 5, 6}, B[4] = {1, 0, 0, 1};  // A 3x2 column-major, B = I
    cublasLtHandle_t h;
    cublasLtMatmulDesc_t op;
    cublasLtMatrixLayout_t la, lb, lc, ld;
    cublasLtMatmulPreference_t pref;
    cublasLtCreate(&h);
    cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F);
    cublasLtMatrixLayoutCreate(&la, CUDA_R_32F, m, k, m);
    cublasLtMatrixLayoutCreate(&lb, CUDA_R_32F, k, n, k);
    cublasLtMatrixLayoutCreate(&lc, CUDA_R_32F, m, n, ldc);
    cublasLtMatrixLayoutCreate(&ld, CUDA_R_32F, m, n, ldd);
    cublasLtMatmulPreferenceCreate(&pref);
    uint32_t al = 4;
    for (int a = CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES; a <= CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES; a++)
        cublasLtMatmulPreferenceSetAttribute(pref, (cublasLtMatmulPreferenceAttributes_t)a, &al, sizeof al);
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    cublasStatus_t st = cublasLtMatmulAlgoGetHeuristic(h, op, la, lb, lc, ld, pref, 1, &res, &found);
    float alpha = 1.0f;
    if (st == CUBLAS_STATUS_SUCCESS) st = cublasLtMatmul(h, op, &alpha, A, la, B, lb, &beta, C, lc, D, ld, &res.algo, nullptr, 0, 0);
    return st;
}
static std::string inplace_gemm(int bad) {
    emu::lt_mode = 1;
    float* buf;
    cudaMalloc(&buf, 64 * sizeof(float));
    auto fill = [&] { std::vector<float> v(64); for (int i = 0; i < 64; i++) v[i] = (float)(100 + i); cudaMemcpy(buf, v.data(), sizeof(float) * 64, cudaMemcpyHostToDevice); };
    auto get = [&](int i) { float x; cudaMemcpy(&x, buf + i, sizeof x, cudaMemcpyDeviceToHost); return x; };
    // in place, identical layouts (separate descriptor objects): D = A + C
    fill();
    if (lt_gemm(buf, 3, buf, 3, 1.0f) != CUBLAS_STATUS_SUCCESS) return "in place with equal descriptors was rejected";
    if (get(0) != 101.0f || get(5) != 6.0f + 105.0f) return "in place: wrong result";
    // out of place, C with another leading dimension than D (documented as allowed): D = A + C
    fill();
    if (lt_gemm(buf + 32, 5, buf, 3, 1.0f) != CUBLAS_STATUS_SUCCESS) return "out of place with ldc != ldd was rejected";
    if (get(0) != 1.0f + 132.0f || get(3) != 4.0f + 137.0f) return "out of place: wrong result";
    // C overlapping D without being D
    if (lt_gemm(buf + 1, 3, buf, 3, 1.0f) == CUBLAS_STATUS_SUCCESS) return "overlapping C and D were accepted";
    if (!bad) return "";
    cublasStatus_t st = lt_gemm(buf, 4, buf, 3, 1.0f);  // in place, Cdesc's ld 4 against Ddesc's 3
    if (st == CUBLAS_STATUS_SUCCESS) return "not caught: in place with mismatched descriptors was accepted";
    emu::error("in-place GEMM (C == D) with mismatched descriptors rejected: %s", cublasLtGetStatusString(st));
}

// misuse that must be an error: ldmatrix from global memory, a misaligned row address,
// a cp.async reading past the end of its allocation
__global__ void tc_bad_kernel(int what, const __nv_bfloat16* g) {
    __shared__ __align__(16) __nv_bfloat16 s[64 * 8 + 8];
    const int l = threadIdx.x;
    for (int i = l; i < 64 * 8 + 8; i += 32) s[i] = __nv_bfloat16(1.0f);
    __syncwarp();
    tc_u32 r[4];
    if (what == 0) tc_ldmatrix_x4(r, g + l * 8);
    if (what == 1) tc_ldmatrix_x4(r, &s[l * 8 + (l == 9 ? 4 : 0)]);
    if (what == 2) {
        tc_cp_async_16(&s[l * 8], g + l * 8 + 8, true);  // g holds 256 elements: lane 31 reads 8 past the end
        tc_cp_async_commit();
        tc_cp_async_wait<0>();
    }
}
static std::string tc_bad(int what) {
    __nv_bfloat16* g;
    cudaMalloc(&g, 256 * sizeof(__nv_bfloat16));
    cudaMemset(g, 0, 256 * sizeof(__nv_bfloat16));
    LAUNCH(tc_bad_kernel, 1, 32, 0, what, (const __nv_bfloat16*)g);
    return "not caught";
}

// ---- thread-block clusters and distributed shared memory (cooperative_groups::this_cluster)
namespace cg = cooperative_groups;
// a cluster launch as real code writes it: cudaLaunchKernelEx with the cluster attribute
struct ClusterLaunch {
    cudaLaunchAttribute attr[1];
    cudaLaunchConfig_t cfg;
    ClusterLaunch(dim3 grid, dim3 block, dim3 cluster, size_t smem = 0) {
        memset(attr, 0, sizeof attr);
        attr[0].id = cudaLaunchAttributeClusterDimension;
        attr[0].val.clusterDim.x = cluster.x; attr[0].val.clusterDim.y = cluster.y; attr[0].val.clusterDim.z = cluster.z;
        cfg = cudaLaunchConfig_t{grid, block, smem, 0, attr, 1};
    }
};
// Each block reduces its n elements (strided per thread, then a tree in static shared
// memory) and keeps the result in static (partial[0]) and dynamic shared memory (2x);
// rank 0 of the cluster adds the partials in rank order through DSMEM. SYNC1: the
// cluster.sync between the partials' writes and their remote reads (SYNC0: one at the
// start, so that the remote reads are legal without it); SYNC2: the one that
// keeps every block alive until rank 0 has read it. SPLIT: the barriers as arrive/wait
// pairs (the cooperative-groups token form, then the builtins).
__global__ void cluster_reduce_kernel(const float* x, float* out, unsigned* info, int n, int SYNC0, int SYNC1, int SYNC2, int SPLIT) {
    cg::cluster_group cluster = cg::this_cluster();
    if (SYNC0) cluster.sync();  // every block of the cluster has started
    __shared__ float red[64];
    __shared__ float partial[2];  // [1] is never written: a remote read of it must be poison
    float* dyn = (float*)emu_dyn_smem();
    const int t = threadIdx.x;
    const unsigned b = blockIdx.x + gridDim.x * blockIdx.y;
    float v = 0.0f;
    for (int i = t; i < n; i += 64) v += x[(size_t)b * n + i];
    red[t] = v;
    __syncthreads();
    for (int h = 32; h > 0; h >>= 1) {
        if (t < h) red[t] += red[t + h];
        __syncthreads();
    }
    const unsigned rank = cluster.block_rank();
    const dim3 cd = cluster.dim_blocks(), bi = cluster.block_index();
    if (t == 0) {
        partial[0] = red[0];
        dyn[0] = 2.0f * red[0];
        unsigned* I = info + 6 * b;
        I[0] = rank; I[1] = cluster.num_blocks(); I[2] = cd.x; I[3] = cd.y; I[4] = bi.x; I[5] = bi.y;
    }
    if (SYNC1) {
        if (SPLIT) {
            auto token = cluster.barrier_arrive();
            red[t] = 0.0f;  // work between arrive and wait: this block's own memory only
            cluster.barrier_wait(std::move(token));
        } else {
            cluster.sync();
        }
    }
    if (rank == 0 && t == 0) {
        float s = 0.0f, s2 = 0.0f;
        int poisoned = 1;
        for (unsigned r = 0; r < cluster.num_blocks(); r++) {
            const float* p = cluster.map_shared_rank(partial, r);
            s += p[0];
            s2 += cluster.map_shared_rank(dyn, r)[0];
            poisoned &= isnan(p[1]) ? 1 : 0;
        }
        unsigned cid = blockIdx.x / cd.x + (gridDim.x / cd.x) * (blockIdx.y / cd.y);
        out[3 * cid] = s; out[3 * cid + 1] = s2; out[3 * cid + 2] = (float)poisoned;
    }
    if (SYNC2) {
        if (SPLIT) { __cluster_barrier_arrive(); __cluster_barrier_wait(); }
        else cluster.sync();
    }
}
// runs the kernel on a grid of clusters under both schedules; "" if every result is bitwise
// the CPU's (same order of operations), else what differed
template <int SYNC0, int SYNC1, int SYNC2, int SPLIT>
static std::string cluster_reduce(dim3 grid, dim3 cl, bool nonportable = false) {
    const int n = 100;
    const unsigned nb = grid.x * grid.y, cn = cl.x * cl.y, ncl = nb / cn;
    std::vector<float> x((size_t)nb * n);
    for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 7919) % 1000) * (i % 3 ? 1e-3f : 1.7f) - 300.0f;
    // the CPU reference: each block's tree, then the partials in rank order
    std::vector<float> part(nb);
    for (unsigned b = 0; b < nb; b++) {
        float red[64];
        for (int t = 0; t < 64; t++) { float v = 0.0f; for (int i = t; i < n; i += 64) v += x[(size_t)b * n + i]; red[t] = v; }
        for (int h = 32; h > 0; h >>= 1) for (int t = 0; t < h; t++) red[t] += red[t + h];
        part[b] = red[0];
    }
    std::vector<float> want(3 * ncl);
    for (unsigned c = 0; c < ncl; c++) {
        unsigned cx = c % (grid.x / cl.x), cy = c / (grid.x / cl.x);
        float s = 0.0f, s2 = 0.0f;
        for (unsigned r = 0; r < cn; r++) {
            unsigned b = (cx * cl.x + r % cl.x) + grid.x * (cy * cl.y + r / cl.x);
            s += part[b]; s2 += 2.0f * part[b];
        }
        want[3 * c] = s; want[3 * c + 1] = s2; want[3 * c + 2] = 1.0f;
    }
    if (nonportable && cudaFuncSetAttribute(cluster_reduce_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess)
        return "cudaFuncAttributeNonPortableClusterSizeAllowed refused";
    std::string bad;
    std::vector<float> got[2];
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        got[rev].assign(3 * ncl, -1.0f);
        std::vector<unsigned> info(6 * nb, 99999);
        ClusterLaunch L(grid, 64, cl, sizeof(float));
        cudaError_t e = cudaLaunchKernelEx(&L.cfg, cluster_reduce_kernel, x.data(), got[rev].data(), info.data(), n, SYNC0, SYNC1, SYNC2, SPLIT);
        if (e != cudaSuccess) return std::string("launch refused: ") + emu::last_error_msg;
        for (unsigned b = 0; b < nb && bad.empty(); b++) {
            unsigned bx = b % grid.x, by = b / grid.x;
            unsigned w[6] = {bx % cl.x + cl.x * (by % cl.y), cn, cl.x, cl.y, bx % cl.x, by % cl.y};
            for (int j = 0; j < 6; j++)
                if (info[6 * b + j] != w[j]) { bad = "block " + std::to_string(b) + " cluster query " + std::to_string(j) + ": got " + std::to_string(info[6 * b + j]) + ", want " + std::to_string(w[j]); break; }
        }
        for (unsigned i = 0; i < 3 * ncl && bad.empty(); i++)
            if (memcmp(&got[rev][i], &want[i], 4) != 0)
                bad = std::string(rev ? "rev" : "fwd") + ": cluster " + std::to_string(i / 3) + " value " + std::to_string(i % 3) + ": got " + std::to_string(got[rev][i]) + ", want " + std::to_string(want[i]);
    }
    emu::sched_reverse = false;
    if (bad.empty() && memcmp(got[0].data(), got[1].data(), 4 * got[0].size()) != 0) bad = "fwd and rev differ";
    return bad;
}
static std::string cluster_reduce_ok() {
    std::string s = cluster_reduce<0, 1, 1, 0>(dim3(8, 1), dim3(4, 1));
    if (s.empty()) s = cluster_reduce<1, 1, 1, 0>(dim3(4, 4), dim3(2, 4));  // clusters of 8 in 2-D
    if (s.empty()) s = cluster_reduce<0, 1, 1, 0>(dim3(16, 2), dim3(16, 1), true);  // 16: non-portable
    return s;
}
static std::string cluster_split_ok() { return cluster_reduce<0, 1, 1, 1>(dim3(8, 2), dim3(4, 2)); }
template <int SYNC0, int SYNC1, int SYNC2>
static std::string cluster_bug() {
    std::string s = cluster_reduce<SYNC0, SYNC1, SYNC2, 0>(dim3(8, 1), dim3(4, 1));
    if (s.empty()) return "the bug went unnoticed";
    emu::error("missing cluster.sync detected: %s", s.c_str());
}

// The shape of a split-K reduction of a tile across a cluster: every block fills a tile of
// its dynamic shared memory; after the barrier, rank r adds slice r of the tile over all
// ranks in rank order (every block reads every other block) and writes it out; the last
// barrier keeps every block's tile alive until all slices are read (SYNC2).
__global__ void cluster_slices_kernel(const float* x, float* out, int tile, int SYNC2) {
    cg::cluster_group cluster = cg::this_cluster();
    float* buf = (float*)emu_dyn_smem();
    const int nthr = blockDim.x * blockDim.y, t = threadIdx.x + blockDim.x * threadIdx.y;
    const unsigned b = blockIdx.x + gridDim.x * blockIdx.y, rank = cluster.block_rank(), cn = cluster.num_blocks();
    for (int i = t; i < tile; i += nthr) buf[i] = x[(size_t)b * tile + i] * 1.5f + (float)rank;
    cluster.sync();
    const dim3 cd = cluster.dim_blocks();
    const unsigned cid = blockIdx.x / cd.x + (gridDim.x / cd.x) * (blockIdx.y / cd.y);
    const int lo = tile * rank / cn, hi = tile * (rank + 1) / cn;
    for (int i = lo + t; i < hi; i += nthr) {
        float s = 0.0f;
        for (unsigned q = 0; q < cn; q++) s += cluster.map_shared_rank(buf, q)[i];
        out[(size_t)cid * tile + i] = s;
    }
    if (SYNC2) cluster.sync();
}
static std::string cluster_slices(int sync2, bool lazy = false) {
    const dim3 grid(4, 2), cl(2, 2), block(32, 2);
    const int tile = 203, nb = 8, cn = 4, ncl = 2;
    std::vector<float> x((size_t)nb * tile);
    for (size_t i = 0; i < x.size(); i++) x[i] = (float)((i * 104729) % 2003) * (i % 5 ? 1e-4f : 3.1f) - 7.0f;
    std::vector<float> want((size_t)ncl * tile);
    for (int c = 0; c < ncl; c++)
        for (int i = 0; i < tile; i++) {
            float s = 0.0f;
            for (int r = 0; r < cn; r++) {
                int b = (c * 2 + r % 2) + 4 * (r / 2);  // cluster c covers x in [2c, 2c+2), all of y
                s += x[(size_t)b * tile + i] * 1.5f + (float)r;
            }
            want[(size_t)c * tile + i] = s;
        }
    std::vector<float> got[2];
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        got[rev].assign(want.size(), -1.0f);
        cudaStream_t st = 0;
        if (lazy) { emu::lazy_streams = true; cudaStreamCreate(&st); }
        auto issue = [&]() {  // the configuration is gone when a lazy launch runs
            ClusterLaunch L(grid, block, cl, tile * sizeof(float));
            L.cfg.stream = st;
            return cudaLaunchKernelEx(&L.cfg, cluster_slices_kernel, x.data(), got[rev].data(), tile, sync2);
        };
        if (issue() != cudaSuccess) return std::string("launch refused: ") + emu::last_error_msg;
        if (lazy) {
            if (got[rev][0] != -1.0f) return "the lazy stream ran the launch when it was issued";
            cudaStreamSynchronize(st);
        }
        for (size_t i = 0; i < want.size(); i++)
            if (memcmp(&got[rev][i], &want[i], 4) != 0) {
                emu::sched_reverse = false;
                return std::string(rev ? "rev" : "fwd") + ": element " + std::to_string(i) + ": got " + std::to_string(got[rev][i]) + ", want " + std::to_string(want[i]);
            }
    }
    emu::sched_reverse = false;
    return "";
}

__global__ void cluster_rank_oob_kernel(float* out) {
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ float s[32];
    s[threadIdx.x] = 1.0f;
    cluster.sync();
    out[threadIdx.x] = *cluster.map_shared_rank(&s[threadIdx.x], cluster.num_blocks());  // one past the last rank
    cluster.sync();
}
__global__ void cluster_divergent_kernel(float* out) {
    cg::cluster_group cluster = cg::this_cluster();
    if (cluster.block_rank() == 0) cluster.sync();
    else cluster.sync();
    out[threadIdx.x] = 1.0f;
}
__global__ void cluster_deadlock_kernel(float* out) {
    cg::cluster_group cluster = cg::this_cluster();
    if (cluster.block_rank() == 1 && threadIdx.x != 0) __syncthreads();  // waits for thread 0, which waits for the cluster
    else cluster.sync();
    out[threadIdx.x] = 1.0f;
}
__global__ void cluster_wait_without_arrive_kernel(float* out) {
    cg::cluster_group cluster = cg::this_cluster();
    cluster.barrier_wait();
    out[threadIdx.x] = 1.0f;
}
__global__ void cluster_api_plain_kernel(float* out) { out[threadIdx.x] = (float)cg::this_cluster().block_rank(); }
__global__ void cluster_plain_ok_kernel(float* out) { out[blockIdx.x * blockDim.x + threadIdx.x] = 1.0f; }
template <class K>
static std::string cluster_misuse(K kernel, dim3 grid, dim3 cl) {
    std::vector<float> out(32 * grid.x * grid.y, 0.0f);
    ClusterLaunch L(grid, 32, cl);
    cudaLaunchKernelEx(&L.cfg, kernel, out.data());
    return "not caught";
}
static std::string cluster_grid_not_divisible() {
    std::vector<float> out(32 * 6, 0.0f);
    ClusterLaunch L(dim3(6), 32, dim3(4));
    cudaError_t e = cudaLaunchKernelEx(&L.cfg, cluster_plain_ok_kernel, out.data());
    cudaError_t l = cudaGetLastError();
    for (float v : out) if (v != 0.0f) return "the refused launch ran";
    if (e == cudaSuccess || l != e) return "a grid of 6 blocks in clusters of 4 was accepted";
    emu::error("cluster launch refused: %s", emu::last_error_msg);
}
// the launch rules besides divisibility: 8 blocks portable, 16 only with the attribute,
// never 32; an indivisible y; cudaLaunchKernelEx without attributes is a plain launch
static std::string cluster_limits() {
    std::vector<float> out(32 * 32, 0.0f);
    auto run = [&](dim3 grid, dim3 cl) {
        ClusterLaunch L(grid, 32, cl);
        cudaError_t e = cudaLaunchKernelEx(&L.cfg, cluster_plain_ok_kernel, out.data());
        cudaGetLastError();
        return e;
    };
    if (run(dim3(8), dim3(8)) != cudaSuccess) return "a cluster of 8 refused";
    if (run(dim3(16), dim3(16)) == cudaSuccess) return "a cluster of 16 accepted without cudaFuncAttributeNonPortableClusterSizeAllowed";
    if (run(dim3(4, 3), dim3(2, 2)) == cudaSuccess) return "grid.y = 3 accepted in clusters of height 2";
    if (cudaFuncSetAttribute(cluster_plain_ok_kernel, cudaFuncAttributeNonPortableClusterSizeAllowed, 1) != cudaSuccess) return "attribute refused";
    if (run(dim3(16), dim3(16)) != cudaSuccess) return "a cluster of 16 refused with the attribute";
    if (run(dim3(32), dim3(32)) == cudaSuccess) return "a cluster of 32 accepted";
    cudaLaunchConfig_t plain = {dim3(3), dim3(32), 0, 0, nullptr, 0};
    std::vector<float> o2(96, 0.0f);
    if (cudaLaunchKernelEx(&plain, cluster_plain_ok_kernel, o2.data()) != cudaSuccess) return "a plain cudaLaunchKernelEx refused";
    for (float v : o2) if (v != 1.0f) return "a plain cudaLaunchKernelEx did not run every block";
    return "";
}

// ---- cp.async and bank counting inside a cluster: each block has its own copies in flight
// and its own records. Every block streams NT tiles of 64 rows x 8 bf16 through a double
// buffer in STATIC shared memory (which the emulator swaps between the cluster's blocks):
// tile k+1 is issued, then wait_group 1 completes tile k; each thread adds up its
// neighbour's row (so the barrier matters) into the tile's partial, and after a
// cluster.sync rank 0 adds the partials of tile k of every block in rank order through
// DSMEM, as a split-K or dQ reduction does. Tile k+1's copies are in flight across that
// cluster.sync, while the other blocks run. BUG: no wait_group in the loop (one wait for
// everything at the end, so that the block does not end with copies in flight): the
// tiles are read while their copies are still in flight.
__global__ void cluster_cpasync_kernel(const __nv_bfloat16* src, float* out, int NT, int BUG) {
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ __align__(16) __nv_bfloat16 buf[2][64 * 8];
    __shared__ float part[2][64];  // double-buffered: one cluster.sync a tile suffices
    const int t = threadIdx.x;
    const unsigned b = blockIdx.x + gridDim.x * blockIdx.y, rank = cluster.block_rank();
    const dim3 cd = cluster.dim_blocks();
    const unsigned cid = blockIdx.x / cd.x + (gridDim.x / cd.x) * (blockIdx.y / cd.y);
    const __nv_bfloat16* g = src + (size_t)b * NT * 512;
    tc_cp_async_16(&buf[0][t * 8], g + t * 8, true);
    tc_cp_async_commit();
    for (int k = 0; k < NT; k++) {
        if (k + 1 < NT) tc_cp_async_16(&buf[(k + 1) & 1][t * 8], g + (size_t)(k + 1) * 512 + t * 8, true);
        tc_cp_async_commit();  // an empty group at the last tile keeps the count of wait_group 1 right
        if (!BUG) tc_cp_async_wait<1>();
        __syncthreads();
        float acc = 0.0f;
        for (int j = 0; j < 8; j++) acc += (float)buf[k & 1][((t + 1) % 64) * 8 + j];
        part[k & 1][t] = acc;
        cluster.sync();  // the partials are complete; buf[k & 1] is read by all before its refill
        if (rank == 0) {
            float s = 0.0f;
            for (unsigned r = 0; r < cluster.num_blocks(); r++) s += cluster.map_shared_rank(part[k & 1], r)[t];
            out[((size_t)cid * NT + k) * 64 + t] = s;
        }
    }
    if (BUG) tc_cp_async_wait<0>();
    cluster.sync();  // every block's partials stay alive until rank 0 has read them
}
// grid 4x2 in clusters of 2x2, under both schedules; EMU_CPASYNC_SEED = seed (the model
// reads it at the first copy of the process, and every case runs in a child of its own).
// "" if the results are bitwise the CPU's; with bug, an error when the bug was seen
static std::string cluster_cpasync(const char* seed, int bug) {
    setenv("EMU_CPASYNC_SEED", seed, 1);
    const int NT = 5, nb = 8, cn = 4, ncl = 2;
    const dim3 grid(4, 2), cl(2, 2);
    __nv_bfloat16* src;
    cudaMalloc(&src, sizeof(__nv_bfloat16) * nb * NT * 512);
    std::vector<__nv_bfloat16> h((size_t)nb * NT * 512);
    for (size_t i = 0; i < h.size(); i++) h[i] = __nv_bfloat16((float)((i * 7919) % 251) * 0.25f - 20.0f);
    cudaMemcpy(src, h.data(), sizeof(__nv_bfloat16) * h.size(), cudaMemcpyHostToDevice);
    std::vector<float> want((size_t)ncl * NT * 64);
    for (int c = 0; c < ncl; c++)
        for (int k = 0; k < NT; k++)
            for (int t = 0; t < 64; t++) {
                float s = 0.0f;
                for (int r = 0; r < cn; r++) {
                    const int b = (c * 2 + r % 2) + 4 * (r / 2);
                    float acc = 0.0f;
                    for (int j = 0; j < 8; j++) acc += (float)h[((size_t)b * NT + k) * 512 + ((t + 1) % 64) * 8 + j];
                    s += acc;
                }
                want[((size_t)c * NT + k) * 64 + t] = s;
            }
    std::vector<float> got[2];
    int wrong[2] = {0, 0};
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        got[rev].assign(want.size(), -1.0f);
        ClusterLaunch L(grid, 64, cl);
        if (cudaLaunchKernelEx(&L.cfg, cluster_cpasync_kernel, (const __nv_bfloat16*)src, got[rev].data(), NT, bug) != cudaSuccess)
            return std::string("launch refused: ") + emu::last_error_msg;
        for (size_t i = 0; i < want.size(); i++) wrong[rev] += memcmp(&got[rev][i], &want[i], 4) != 0;
    }
    emu::sched_reverse = false;
    const bool differ = memcmp(got[0].data(), got[1].data(), 4 * want.size()) != 0;
    if (!bug) return wrong[0] || wrong[1] ? "wrong sums: " + std::to_string(wrong[0]) + " (fwd), " + std::to_string(wrong[1]) + " (rev) of " + std::to_string(want.size()) : "";
    if (!wrong[0] && !wrong[1] && !differ) return "not caught: every sum right in both schedules";
    emu::error("cp.async missing wait_group in a cluster caught (seed %s): %d and %d of %zu sums wrong under fwd and rev, "
               "the schedules %s", seed, wrong[0], wrong[1], want.size(), differ ? "differ" : "agree");
}
// the bank counts of banks_kernel in clusters of 2 (grid 4): each block's requests are
// grouped from its own records, so every count is 4 times the one-block count; with
// conflict = 1 the cp.async destinations are 32 bytes apart (2-way), which the harness's
// verdict must report as in a plain launch
static std::string cluster_banks(int conflict) {
    __nv_bfloat16* g;
    cudaMalloc(&g, 16);
    cudaMemset(g, 0, 16);
    emu::banks::table().clear();
    ClusterLaunch L(dim3(4), 32, dim3(2));
    if (cudaLaunchKernelEx(&L.cfg, banks_kernel, 144, conflict ? 32 : 16, 2, (const __nv_bfloat16*)g) != cudaSuccess)
        return std::string("launch refused: ") + emu::last_error_msg;
    unsigned want[4] = {4, conflict ? 8u : 4u, 2, 1}, ideal[4] = {4, 4, 1, 1};
    int n = 0;
    for (const emu::banks::Stat& st : emu::banks::table()) {
        int i = st.kind == emu::banks::LDMATRIX ? 0 : st.kind == emu::banks::CP_ASYNC ? 1 : st.width == 4 ? 2 : 3;
        if (st.requests != 4 || st.ideal != 4 * ideal[i] || st.wavefronts != 4 * want[i] || st.launches != 1) {
            char m[200];
            snprintf(m, sizeof m, "site %d: %llu requests, %llu wavefronts (conflict-free %llu), %llu launches; expected 4, %u (%u), 1",
                     st.line, st.requests, st.wavefronts, st.ideal, st.launches, 4 * want[i], 4 * ideal[i]);
            return m;
        }
        n++;
    }
    if (n != 4) return "expected 4 sites, counted " + std::to_string(n);
    auto required = [](const emu::banks::Stat& s) { return s.kind == emu::banks::LDMATRIX || s.kind == emu::banks::CP_ASYNC; };
    std::string v = emu::banks::first_violation(required);
    if (!conflict) return v.empty() ? "" : "a conflict-free layout reported: " + v;
    if (v.empty()) return "not caught";
    emu::error("%s", v.c_str());
}

// ---- static __shared__ of a template: GCC leaves a template instantiation's static locals
// outside the poisoned section; transform.py follows every static __shared__ declaration
// with EMU_STATIC_SHARED (written out here as it writes it), which registers such a
// variable with the emulator. Block 1 reads v before any thread of it wrote v (the
// planted bug): that must be poison, not what block 0 left there.
template <int N>
__global__ void tmpl_static_smem_kernel(float* out) {
    __shared__ float v[N]; EMU_STATIC_SHARED(v);
    const int t = threadIdx.x;
    if (blockIdx.x == 1) out[N + t] = v[t];
    v[t] = (float)(blockIdx.x + 1) * 10.0f + (float)t;
    __syncthreads();
    if (blockIdx.x == 0) out[t] = v[(t + 1) % N];
}
static std::string tmpl_static_smem() {
    std::vector<float> o(64, -1.0f);
    LAUNCH(tmpl_static_smem_kernel<32>, 2, 32, 0, o.data());
    for (int t = 0; t < 32; t++)
        if (o[t] != 10.0f + (float)((t + 1) % 32)) return "block 0 read a wrong value at " + std::to_string(t);
    for (int t = 0; t < 32; t++)
        if (!isnan(o[32 + t])) return "block 1 read " + std::to_string(o[32 + t]) + " (block 0's value?) before writing, not poison";
    if (emu::extra_smem().empty()) return "the template's static __shared__ is in the section: this test no longer tests anything";
    return "";
}
// the same variable in clusters of 2 (grid 4): one copy per block, poisoned at the start of
// each cluster (read before written: NaN), reachable through map_shared_rank
template <int N>
__global__ void cluster_tmpl_static_smem_kernel(float* out) {
    cg::cluster_group cluster = cg::this_cluster();
    __shared__ float v[N]; EMU_STATIC_SHARED(v);
    const int t = threadIdx.x;
    const unsigned rank = cluster.block_rank(), cid = blockIdx.x / cluster.dim_blocks().x;
    float* o = out + cid * 3 * N;
    if (rank == 1) o[2 * N + t] = isnan(v[t]) ? 1.0f : 0.0f;
    v[t] = (float)(rank * 100 + cid * 1000 + t);
    cluster.sync();
    if (rank == 0)
        for (unsigned r = 0; r < 2; r++) o[r * N + t] = cluster.map_shared_rank(v, r)[t];
    cluster.sync();
}
static std::string cluster_tmpl_static_smem() {
    for (int rev = 0; rev <= 1; rev++) {
        emu::sched_reverse = rev;
        std::vector<float> o(2 * 3 * 32, -1.0f);
        ClusterLaunch L(dim3(4), 32, dim3(2));
        if (cudaLaunchKernelEx(&L.cfg, cluster_tmpl_static_smem_kernel<32>, o.data()) != cudaSuccess)
            return std::string("launch refused: ") + emu::last_error_msg;
        for (int c = 0; c < 2; c++)
            for (int t = 0; t < 32; t++) {
                for (int r = 0; r < 2; r++)
                    if (o[c * 96 + r * 32 + t] != (float)(r * 100 + c * 1000 + t))
                        return std::string(rev ? "rev" : "fwd") + ": cluster " + std::to_string(c) + " rank " + std::to_string(r) +
                               " element " + std::to_string(t) + ": got " + std::to_string(o[c * 96 + r * 32 + t]);
                if (o[c * 96 + 64 + t] != 1.0f) return std::string(rev ? "rev" : "fwd") + ": cluster " + std::to_string(c) + " rank 1 read a stale value before writing";
            }
    }
    emu::sched_reverse = false;
    return "";
}

int main() {
    run_case("bf16_round_to_nearest_even", bf16_rounding);
    run_case("warp_shuffles_and_votes", shuffles);
    run_case("barrier_exchange_correct", neighbour<1>);
    run_case("catches_missing_syncthreads", neighbour<0>, "missing __syncthreads");
    run_case("poisons_unwritten_shared_memory", uninit_smem);
    run_case("catches_divergent_syncthreads", [] { std::vector<float> o(64); LAUNCH(divergent_kernel, 1, 64, 0, o.data()); return std::string("not caught"); }, "divergent __syncthreads");
    run_case("catches_shuffle_after_lanes_exit", [] { std::vector<float> o(64); LAUNCH(partial_warp_shuffle_kernel, 1, 64, 0, o.data()); return std::string("not caught"); }, "undefined behaviour on the GPU");
    run_case("catches_deadlock", [] { std::vector<float> o(64); LAUNCH(deadlock_kernel, 1, 64, 0, o.data()); return std::string("not caught"); }, "deadlock");
    run_case("catches_out_of_bounds_write", oob, "out-of-bounds write");
    run_case("catches_dynamic_smem_overrun", dyn_smem_overrun, "past the end of dynamic shared memory");
    run_case("enforces_dynamic_smem_limits", smem_limit);
    run_case("enforces_launch_bounds", launch_bounds);
    run_case("schedules_expose_atomic_order", atomics_order);
    run_case("schedules_expose_block_race", block_race);
    run_case("tree_reduction_schedule_independent", tree);
    run_case("wmma_layouts_and_mma_exact", wmma_layouts);
    run_case("wmma_store_syncwarp_read_correct", wmma_store_then_read<1>);
    run_case("catches_wmma_read_without_syncwarp", wmma_store_then_read<0>);
    run_case("catches_wmma_lane_dependent_pointer", [] { return wmma_bad_args(0); }, "warp-uniform");
    run_case("catches_wmma_misaligned_pointer", [] { return wmma_bad_args(1); }, "32-byte");
    run_case("catches_wmma_bad_ldm", [] { return wmma_bad_args(2); }, "multiple of 16 bytes");
    run_case("tc_mma_fragments_ldmatrix_exact", tc_mma_case<0>);
    run_case("catches_tc_wrong_fragment_mapping", tc_mma_case<1>, "wrong fragment mapping");
    run_case("catches_tc_swapped_a_fragments", tc_mma_case<2>, "wrong fragment mapping");
    run_case("tc_ldmatrix_syncwarp_read_correct", tc_ldmatrix_sync<1>);
    run_case("catches_tc_ldmatrix_without_syncwarp", tc_ldmatrix_sync<0>);
    run_case("tc_cp_async_groups_correct", tc_cp_async<0>);
    run_case("catches_tc_cp_async_read_before_wait", tc_cp_async<1>);
    run_case("catches_tc_cp_async_never_waited", tc_cp_async<2>, "never completed");
    run_case("catches_tc_ldmatrix_from_global", [] { return tc_bad(0); }, "not in shared memory");
    run_case("catches_tc_ldmatrix_misaligned", [] { return tc_bad(1); }, "16-byte aligned");
    run_case("catches_tc_cp_async_out_of_bounds", [] { return tc_bad(2); }, "not inside one device allocation");
    run_case("tc_cp_async_wait_barrier_read_correct", [] { return tc_cp_async_race(2); });
    run_case("catches_cpasync_read_before_wait", [] { return tc_cp_async_race(0); }, "read before its wait caught");
    run_case("catches_cpasync_write_before_wait", [] { return tc_cp_async_race(1); }, "written before its wait caught");
    run_case("smem_bank_counts_exact", bank_counts);
    run_case("catches_bank_conflict", bank_conflict_caught, "bank conflict: ldmatrix");
    run_case("cublaslt_model_c_d_contract", [] { return inplace_gemm(0); });
    run_case("catches_inplace_gemm_mismatched_descriptors", [] { return inplace_gemm(1); }, "CUBLAS_STATUS_INVALID_VALUE");
    run_case("cluster_dsmem_ordered_reduction", cluster_reduce_ok);
    run_case("cluster_split_barrier_correct", cluster_split_ok);
    run_case("cluster_dsmem_distributed_slices", [] { return cluster_slices(1); });
    run_case("cluster_launch_on_lazy_stream", [] { return cluster_slices(1, true); });
    run_case("catches_dsmem_slices_without_final_sync", [] { return cluster_slices(0); }, "has exited");
    run_case("enforces_cluster_launch_limits", cluster_limits);
    run_case("catches_missing_cluster_sync", cluster_bug<1, 0, 1>, "missing cluster.sync detected");
    run_case("catches_dsmem_before_first_cluster_sync", cluster_bug<0, 0, 1>, "before the cluster's first barrier");
    run_case("catches_dsmem_read_after_remote_exit", cluster_bug<0, 1, 0>, "has exited");
    run_case("catches_map_shared_rank_out_of_range", [] { return cluster_misuse(cluster_rank_oob_kernel, dim3(4), dim3(4)); }, "outside the cluster");
    run_case("catches_cluster_grid_not_divisible", cluster_grid_not_divisible, "not a whole number of clusters");
    run_case("catches_divergent_cluster_sync", [] { return cluster_misuse(cluster_divergent_kernel, dim3(4), dim3(2)); }, "divergent cluster barrier");
    run_case("catches_cluster_deadlock", [] { return cluster_misuse(cluster_deadlock_kernel, dim3(2), dim3(2)); }, "deadlock in a cluster");
    run_case("catches_cluster_wait_without_arrive", [] { return cluster_misuse(cluster_wait_without_arrive_kernel, dim3(2), dim3(2)); }, "without an arrive");
    run_case("catches_cluster_api_in_plain_launch", [] { std::vector<float> o(32); LAUNCH(cluster_api_plain_kernel, 1, 32, 0, o.data()); return std::string("not caught"); }, "launch without a cluster");
    run_case("cluster_cpasync_double_buffer_reduction", [] { return cluster_cpasync("0", 0); });
    run_case("cluster_cpasync_double_buffer_reduction_seed7", [] { return cluster_cpasync("7", 0); });
    run_case("catches_cluster_cpasync_missing_wait", [] { return cluster_cpasync("0", 1); }, "missing wait_group in a cluster caught");
    run_case("catches_cluster_cpasync_missing_wait_seed7", [] { return cluster_cpasync("7", 1); }, "missing wait_group in a cluster caught");
    run_case("cluster_smem_bank_counts_per_block", [] { return cluster_banks(0); });
    run_case("catches_bank_conflict_in_cluster", [] { return cluster_banks(1); }, "bank conflict: cp.async");
    run_case("poisons_template_static_shared", tmpl_static_smem);
    run_case("cluster_template_static_shared_per_block", cluster_tmpl_static_smem);
    fprintf(stderr, "emu selftest: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
