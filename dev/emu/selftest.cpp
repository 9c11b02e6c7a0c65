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
    fprintf(stderr, "emu selftest: %d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}
