/*
Host emulation of the CUDA execution model, for checking the llmc kernels without a GPU.
Included (through the shim include/cuda_runtime.h) by every transformed llmc/kernels/*.cuh.
See dev/emu/README.md for what is and is not emulated.

Model
  - A launch runs its blocks one after another (grid order x, then y, then z; reversed
    when the schedule is "rev"). Blocks never overlap.
  - The threads of a block are cooperative fibers on ONE OS thread, each with its own
    stack. A thread runs uninterrupted until it reaches a synchronisation point
    (__syncthreads, __syncwarp, a shuffle, a vote) or returns; then the next runnable
    thread runs. So between two synchronisation points each thread runs its whole
    segment in one go, in thread order 0..n-1 ("fwd") or n-1..0 ("rev"). A kernel
    that relies on ordering that no barrier guarantees gives different results under
    the two schedules (the harness compares them bitwise) or reads poison.
  - Warp collectives (shuffles, ballot, __syncwarp) are barriers of the 32 lanes of a
    warp: only the full mask 0xffffffff is supported, every lane of the warp must be
    alive, and all lanes must be at the same call site; anything else is reported as
    an error (it is undefined behaviour or a hang on the GPU).
  - __syncthreads: all live threads of the block must arrive at the same call site
    (file:line); threads that have returned are not waited for (as on sm_70+).
    Divergent barriers and deadlocks are reported as errors, never silently matched.
  - Shared memory (static __shared__, templates' included, and the dynamic extern
    __shared__ buffer) is filled with 0xFF bytes (NaN as float and as bf16, -1 as int) before every block,
    so reading shared memory that no thread wrote shows up. The dynamic buffer ends
    at a PROT_NONE page (overruns fault) and its alignment slack is canary-checked.
  - "Device" memory is host memory; cudaMalloc'ed buffers are filled with 0xFF and
    have 4 KiB guard zones (0xFF) on both sides, checked by emu::check_guards().
  - Launch configuration is validated as CUDA does: block size <= 1024 and the
    per-dimension limits, grid limits, __launch_bounds__, dynamic shared memory
    above 48 KiB only after cudaFuncSetAttribute(MaxDynamicSharedMemorySize), and
    at most the H100 opt-in limit (227 KiB). A bad launch is reported through
    cudaGetLastError(), as on the GPU, and the kernel does not run.
  - Thread-block clusters (sm_90), launched with cudaLaunchKernelEx and the attribute
    cudaLaunchAttributeClusterDimension (__cluster_dims__ is refused by transform.py). The
    launch is validated as CUDA does: the grid a whole number of clusters in every
    dimension, at most 8 blocks a cluster (16 after cudaFuncSetAttribute(
    cudaFuncAttributeNonPortableClusterSizeAllowed, 1)); else cudaErrorInvalidClusterSize
    through cudaGetLastError and the return value, and nothing runs. Clusters run one after
    another (reversed under "rev"); the blocks of one cluster run TOGETHER: each block runs
    as far as it can (until its threads wait for the cluster barrier or return), then the
    next block in rank order (reversed under "rev"), round after round. So a remote read
    that no cluster barrier orders after its write sees the write in one schedule and the
    poison in the other. Each block keeps its own __syncthreads scope and its own shared
    memory, poisoned per block. cooperative_groups::this_cluster(): sync() is a barrier of
    all live threads of all the cluster's blocks, checked like __syncthreads (one call site
    a phase; divergence and deadlock are errors); barrier_arrive()/barrier_wait() and the
    builtins __cluster_barrier_arrive()/__cluster_barrier_wait() are the split form (a wait
    without its arrive, or two arrives without a wait, is an error); map_shared_rank(p, r)
    gives the same offset in block r's shared memory (r >= the cluster size is an error,
    and so is another block's rank before the cluster's first barrier has completed: the
    block may not have started). When a block's last thread returns its shared memory is
    poisoned, and map_shared_rank to it is an error (on the GPU: undefined, the memory is
    gone). The cluster API in a launch without the attribute is an error (not modeled as
    a cluster of one block). The tensor-core model (include/tensorcore_emu.h) keeps its
    cp.async copies in flight, and include/smem_banks.h its bank-conflict records, per block
    of the running cluster: a block's copies land only at its own events and waits, seeded
    per block as in a plain launch; remote (map_shared_rank) accesses are not bank-checked.
    Static __shared__ variables of templates, which GCC leaves outside the section,
    are registered by EMU_STATIC_SHARED (transform.py) and poisoned and kept per block
    like the section.
*/
#pragma once
#define EMU_HOST_EMULATION 1

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <unistd.h>
#include <sys/mman.h>
#include <tuple>
#include <utility>
#include <type_traits>
#include <map>
#include <vector>
#include <string>
#include <deque>
#include <functional>
#include <memory>
#if !(defined(__x86_64__) && defined(__linux__)) || defined(EMU_UCONTEXT)
#include <ucontext.h>
#endif

// ---------------------------------------------------------------------------------
// CUDA language keywords
#define __global__
#define __device__
#define __host__
#define __constant__
#define __forceinline__ inline
#define __noinline__ __attribute__((noinline))
#define __launch_bounds__(...)
#define __align__(n) __attribute__((aligned(n)))
// static storage in a section of its own, so that the emulator can poison all of it
// before each block (the linker provides __start_emu_smem / __stop_emu_smem)
#define __shared__ static __attribute__((section("emu_smem")))
// GCC ignores that section attribute for the static locals of a template instantiation
// (they go to a COMDAT section of their own), so transform.py follows every static
// __shared__ declaration with EMU_STATIC_SHARED(name): the first time a thread passes it,
// a variable outside the section is registered, and from then on it is poisoned before
// every block and kept per block in a cluster like the section (a no-op for the others)
#define EMU_CAT_(a, b) a##b
#define EMU_CAT(a, b) EMU_CAT_(a, b)
#define EMU_STATIC_SHARED(v) \
    static const bool EMU_CAT(emu_static_shared_, __COUNTER__) __attribute__((unused)) = \
        ::emu::static_shared((void*)&(v), sizeof(v))
namespace emu { inline bool static_shared(void* p, size_t n); }

// ---------------------------------------------------------------------------------
// vector types and the built-in index variables
struct uint3 { unsigned x, y, z; };
struct dim3 {
    unsigned x, y, z;
    constexpr dim3(unsigned x_ = 1, unsigned y_ = 1, unsigned z_ = 1) : x(x_), y(y_), z(z_) {}
    constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
};
struct __attribute__((aligned(8))) float2 { float x, y; };
struct __attribute__((aligned(16))) float4 { float x, y, z, w; };
struct __attribute__((aligned(8))) int2 { int x, y; };
struct __attribute__((aligned(16))) int4 { int x, y, z, w; };
struct __attribute__((aligned(8))) uint2 { unsigned x, y; };
struct __attribute__((aligned(16))) uint4 { unsigned x, y, z, w; };
static inline float2 make_float2(float x, float y) { return {x, y}; }
static inline float4 make_float4(float x, float y, float z, float w) { return {x, y, z, w}; }
static inline int2 make_int2(int x, int y) { return {x, y}; }
static inline int4 make_int4(int x, int y, int z, int w) { return {x, y, z, w}; }
static inline uint3 make_uint3(unsigned x, unsigned y, unsigned z) { return {x, y, z}; }

namespace emu {
inline uint3 cur_thread, cur_block;
inline dim3 cur_block_dim, cur_grid_dim;
}
static const uint3& threadIdx = emu::cur_thread;
static const uint3& blockIdx = emu::cur_block;
static const dim3& blockDim = emu::cur_block_dim;
static const dim3& gridDim = emu::cur_grid_dim;
static const int warpSize = 32;

// ---------------------------------------------------------------------------------
// device math: host libm (CUDA's expf/logf are within 2 ulp of it; see README)
static inline int max(int a, int b) { return a > b ? a : b; }
static inline int min(int a, int b) { return a < b ? a : b; }
static inline unsigned max(unsigned a, unsigned b) { return a > b ? a : b; }
static inline unsigned min(unsigned a, unsigned b) { return a < b ? a : b; }
static inline long long max(long long a, long long b) { return a > b ? a : b; }
static inline long long min(long long a, long long b) { return a < b ? a : b; }
static inline unsigned long long max(unsigned long long a, unsigned long long b) { return a > b ? a : b; }
static inline unsigned long long min(unsigned long long a, unsigned long long b) { return a < b ? a : b; }
static inline float max(float a, float b) { return fmaxf(a, b); }
static inline float min(float a, float b) { return fminf(a, b); }
static inline double max(double a, double b) { return fmax(a, b); }
static inline double min(double a, double b) { return fmin(a, b); }
static inline float rsqrtf(float x) { return 1.0f / sqrtf(x); }
// __expf and __logf: glibc declares functions of these names that compute expf/logf
static inline float __fdividef(float a, float b) { return a / b; }
static inline float __saturatef(float x) { return x < 0.0f ? 0.0f : (x > 1.0f ? 1.0f : x); }
static inline int __float_as_int(float f) { int i; memcpy(&i, &f, 4); return i; }
static inline unsigned __float_as_uint(float f) { unsigned i; memcpy(&i, &f, 4); return i; }
static inline float __int_as_float(int i) { float f; memcpy(&f, &i, 4); return f; }
static inline float __uint_as_float(unsigned i) { float f; memcpy(&f, &i, 4); return f; }
static inline int __popc(unsigned x) { return __builtin_popcount(x); }
static inline int __popcll(unsigned long long x) { return __builtin_popcountll(x); }
static inline int __clz(int x) { return x ? __builtin_clz((unsigned)x) : 32; }
static inline int __ffs(int x) { return __builtin_ffs(x); }
template <class T> static inline T __ldg(const T* p) { return *p; }
static inline void __threadfence(void) {}
static inline void __threadfence_block(void) {}
// one OS thread runs everything, so atomics are atomic; their ORDER follows the schedule
// (the fwd/rev comparison exposes order-dependent float atomics)
static inline float atomicAdd(float* p, float v) { float o = *p; *p = o + v; return o; }
static inline double atomicAdd(double* p, double v) { double o = *p; *p = o + v; return o; }
static inline int atomicAdd(int* p, int v) { int o = *p; *p = o + v; return o; }
static inline unsigned atomicAdd(unsigned* p, unsigned v) { unsigned o = *p; *p = o + v; return o; }
static inline unsigned long long atomicAdd(unsigned long long* p, unsigned long long v) { auto o = *p; *p = o + v; return o; }
static inline int atomicMax(int* p, int v) { int o = *p; if (v > o) *p = v; return o; }
static inline int atomicMin(int* p, int v) { int o = *p; if (v < o) *p = v; return o; }
static inline int atomicExch(int* p, int v) { int o = *p; *p = v; return o; }
static inline int atomicCAS(int* p, int cmp, int v) { int o = *p; if (o == cmp) *p = v; return o; }
static inline unsigned atomicCAS(unsigned* p, unsigned cmp, unsigned v) { unsigned o = *p; if (o == cmp) *p = v; return o; }

// ---------------------------------------------------------------------------------
// CUDA runtime types (the subset llmc uses)
typedef enum cudaError {
    cudaSuccess = 0,
    cudaErrorInvalidValue = 1,
    cudaErrorMemoryAllocation = 2,
    cudaErrorInvalidConfiguration = 9,
    cudaErrorInvalidResourceHandle = 400,
    cudaErrorNotReady = 600,
    cudaErrorLaunchOutOfResources = 701,
    cudaErrorLaunchFailure = 719,
    cudaErrorInvalidClusterSize = 912,
} cudaError_t;
typedef struct CUstream_st* cudaStream_t;
typedef struct CUevent_st* cudaEvent_t;
enum cudaMemcpyKind { cudaMemcpyHostToHost = 0, cudaMemcpyHostToDevice = 1, cudaMemcpyDeviceToHost = 2, cudaMemcpyDeviceToDevice = 3, cudaMemcpyDefault = 4 };
enum cudaDeviceAttr { cudaDevAttrMaxSharedMemoryPerBlock = 8, cudaDevAttrMultiProcessorCount = 16, cudaDevAttrMaxSharedMemoryPerBlockOptin = 97 };
enum cudaFuncAttribute { cudaFuncAttributeMaxDynamicSharedMemorySize = 8, cudaFuncAttributePreferredSharedMemoryCarveout = 9,
                         cudaFuncAttributeNonPortableClusterSizeAllowed = 14 };
// cudaLaunchKernelEx: only the cluster dimension is modeled (other attributes are an emulator error)
enum cudaLaunchAttributeID { cudaLaunchAttributeIgnore = 0, cudaLaunchAttributeAccessPolicyWindow = 1, cudaLaunchAttributeCooperative = 2,
                             cudaLaunchAttributeSynchronizationPolicy = 3, cudaLaunchAttributeClusterDimension = 4,
                             cudaLaunchAttributeClusterSchedulingPolicyPreference = 5 };
union cudaLaunchAttributeValue {
    char pad[64];
    struct { unsigned int x, y, z; } clusterDim;
    int cooperative;
};
struct cudaLaunchAttribute_st { cudaLaunchAttributeID id; char pad[8 - sizeof(cudaLaunchAttributeID)]; cudaLaunchAttributeValue val; };
typedef cudaLaunchAttribute_st cudaLaunchAttribute;
struct cudaLaunchConfig_st {
    dim3 gridDim, blockDim;
    size_t dynamicSmemBytes;
    struct CUstream_st* stream;
    cudaLaunchAttribute* attrs;
    unsigned int numAttrs;
};
typedef cudaLaunchConfig_st cudaLaunchConfig_t;
#define cudaStreamDefault 0x00
#define cudaStreamNonBlocking 0x01
#define cudaEventDefault 0x00
#define cudaEventDisableTiming 0x02
struct cudaDeviceProp {
    char name[256];
    size_t totalGlobalMem, sharedMemPerBlock, sharedMemPerBlockOptin;
    int multiProcessorCount, major, minor, warpSize, maxThreadsPerBlock;
};

// Streams and events (see "Streams and events" below). In the default SYNCHRONOUS model
// (emu::lazy_streams == false) every operation runs when it is issued. In the LAZY model
// an operation is queued on its stream and runs only when something forces it.
struct CUstream_st {
    int id;                                   // 0: the legacy default stream
    unsigned flags;                           // cudaStreamNonBlocking or 0 (blocking)
    bool destroyed, flushing;
    bool eager;                               // lazy model: this stream runs its work when issued
    std::deque<std::function<void()>> q;      // queued operations (lazy model)
    unsigned long long enq, done;             // operations issued / executed so far
    unsigned long long compute = 0;           // of which kernel launches and cuBLASLt products
};
struct CUevent_st {
    CUstream_st* s;                           // stream of the last cudaEventRecord
    unsigned long long seq;                   // it completes when s has executed seq operations
    bool recorded, destroyed;
};

// section bounds of the static __shared__ variables (provided by the linker)
extern "C" char __start_emu_smem[] __attribute__((weak));
extern "C" char __stop_emu_smem[] __attribute__((weak));

namespace emu {

// ---------------------------------------------------------------------------------
// errors: the harness installs a handler (prints a FAIL line and exits the check)
inline void (*error_handler)(const char* msg) = nullptr;
inline const char* cur_kernel = "(no kernel)";
[[noreturn]] inline void error(const char* fmt, ...) {
    char msg[2048];
    va_list ap; va_start(ap, fmt); vsnprintf(msg, sizeof msg, fmt, ap); va_end(ap);
    char full[2600];
    snprintf(full, sizeof full, "%s [kernel %s, block (%u,%u,%u), thread (%u,%u,%u)]", msg, cur_kernel, cur_block.x,
             cur_block.y, cur_block.z, cur_thread.x, cur_thread.y, cur_thread.z);
    if (error_handler) error_handler(full);
    fprintf(stderr, "emu error: %s\n", full);
    fflush(stderr);
    _exit(3);
}

// ---------------------------------------------------------------------------------
// configuration and statistics
inline bool sched_reverse = false;        // thread and block order: false = fwd, true = rev
inline unsigned long long n_launches = 0, n_fibers = 0, n_switches = 0;
inline cudaError_t last_error = cudaSuccess;
inline char last_error_msg[512] = "";
inline cudaError_t set_launch_error(cudaError_t e, const char* fmt, ...) {
    va_list ap; va_start(ap, fmt); vsnprintf(last_error_msg, sizeof last_error_msg, fmt, ap); va_end(ap);
    fprintf(stderr, "emu: launch of %s failed: %s\n", cur_kernel, last_error_msg);
    last_error = e;
    return e;
}
inline const int OPTIN_SMEM = 232448;     // H100: 227 KiB of dynamic shared memory per block (opt-in)
inline const int DEFAULT_SMEM = 48 * 1024;
inline std::map<const void*, int>& func_max_dyn_smem() { static std::map<const void*, int> m; return m; }
// kernels given cudaFuncAttributeNonPortableClusterSizeAllowed = 1 (clusters of up to 16 blocks)
inline std::map<const void*, int>& func_nonportable_cluster() { static std::map<const void*, int> m; return m; }
inline const int PORTABLE_CLUSTER = 8, MAX_CLUSTER = 16;

// Kernels found by transform.py (name, __launch_bounds__ max threads or 0); the harness
// fills this from the generated table and points `covered` at shared memory.
struct KernelInfo { const char* name; int max_threads; };
inline const KernelInfo* kernel_table = nullptr;
inline int kernel_table_n = 0;
inline unsigned char* covered = nullptr;
// __launch_bounds__ registered next to a kernel's body (transform.py --ladders does this
// for the dev/cuda ladders, whose bounds may name constants of the kernel's namespace)
inline std::map<std::string, int>& registered_bounds() { static std::map<std::string, int> m; return m; }
struct BoundReg { BoundReg(const char* name, int bound) { registered_bounds()[name] = bound; } };

// ---------------------------------------------------------------------------------
// fibers
#if defined(__x86_64__) && defined(__linux__) && !defined(EMU_UCONTEXT)
// save callee-saved registers + SSE/x87 control words on the current stack, store sp,
// switch to the other stack, restore, return there
extern "C" void emu_ctx_switch(void** save_sp, void* new_sp);
extern "C" void emu_ctx_entry(void);
asm(R"(
    .text
    .globl emu_ctx_switch
    .type emu_ctx_switch,@function
emu_ctx_switch:
    pushq %rbp
    pushq %rbx
    pushq %r12
    pushq %r13
    pushq %r14
    pushq %r15
    subq $8, %rsp
    stmxcsr (%rsp)
    fnstcw 4(%rsp)
    movq %rsp, (%rdi)
    movq %rsi, %rsp
    ldmxcsr (%rsp)
    fldcw 4(%rsp)
    addq $8, %rsp
    popq %r15
    popq %r14
    popq %r13
    popq %r12
    popq %rbx
    popq %rbp
    ret
    .size emu_ctx_switch, .-emu_ctx_switch
    .globl emu_ctx_entry
    .type emu_ctx_entry,@function
emu_ctx_entry:
    movq %r12, %rdi
    callq *%r13
    ud2
    .size emu_ctx_entry, .-emu_ctx_entry
)");
#define EMU_ASM_FIBERS 1
#endif

enum FiberState : unsigned char { F_READY, F_WAIT_BLOCK, F_WAIT_WARP, F_DONE, F_WAIT_CLUSTER };
struct Fiber {
#ifdef EMU_ASM_FIBERS
    void* sp;
#else
    ucontext_t uc;
#endif
    uint3 tid;
    FiberState state;
    const char* wait_file;
    int wait_line;
    const char* wait_what;
    bool cl_arrived;       // cluster launches: arrived at the cluster barrier, not yet waited
    unsigned cl_phase;     // the barrier phase of that arrival
};
struct WarpState {
    int nlanes;            // lanes that exist (32 except a partial last warp)
    unsigned exited;       // lanes that returned
    int arrived;
    unsigned gen;
    const char* file; int line; const char* what;
    uint64_t buf[2][32];   // values deposited by the lanes, double-buffered by generation parity
};

inline const size_t STACK_BYTES = 256 * 1024, GUARD_BYTES = 4096;
inline const int MAX_THREADS = 1024;
inline char* stack_region = nullptr;
inline Fiber* fibers = nullptr;
inline WarpState* warps = nullptr;
inline int n_threads = 0, n_live = 0, cur_fiber = -1;
inline int blk_arrived = 0;
inline const char* blk_file = nullptr;
inline int blk_line = 0;
#ifdef EMU_ASM_FIBERS
inline void* sched_sp = nullptr;
#else
inline ucontext_t sched_uc;
#endif
inline void (*body_fn)(void*) = nullptr;
inline void* body_ctx = nullptr;
// called after every block (include/tensorcore_emu.h: cp.async copies still in flight are
// an error, and its per-thread state is cleared)
inline void (*block_end_hook)() = nullptr;

inline void init_stacks() {
    if (stack_region) return;
    size_t per = STACK_BYTES + GUARD_BYTES;
    void* p = mmap(nullptr, per * MAX_THREADS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) { fprintf(stderr, "emu: cannot map fiber stacks\n"); _exit(3); }
    stack_region = (char*)p;
    for (int i = 0; i < MAX_THREADS; i++) mprotect(stack_region + i * per, GUARD_BYTES, PROT_NONE);  // overflow faults
    fibers = new Fiber[MAX_THREADS];
    warps = new WarpState[MAX_THREADS / 32];
}

inline void switch_to_scheduler() {
    n_switches++;
    Fiber& f = fibers[cur_fiber];
#ifdef EMU_ASM_FIBERS
    emu_ctx_switch(&f.sp, sched_sp);
#else
    swapcontext(&f.uc, &sched_uc);
#endif
}

inline void thread_exit();
// set only while a cluster launch runs (the cluster barrier stops counting the thread)
inline void (*cluster_exit_hook)() = nullptr;
extern "C" inline void emu_fiber_main(void*) {
    body_fn(body_ctx);
    thread_exit();
    fibers[cur_fiber].state = F_DONE;
    switch_to_scheduler();
    abort();  // never resumed
}
#ifndef EMU_ASM_FIBERS
inline void fiber_main_uc() { emu_fiber_main(nullptr); }
#endif

inline void fiber_init(int i) {
    char* lo = stack_region + (size_t)i * (STACK_BYTES + GUARD_BYTES) + GUARD_BYTES;
    char* top = lo + STACK_BYTES;
#ifdef EMU_ASM_FIBERS
    uint64_t* sp = (uint64_t*)(((uintptr_t)top - 128) & ~(uintptr_t)15);
    sp -= 8;  // [csr][r15][r14][r13][r12][rbx][rbp][ret]; after ret rsp is 16-aligned
    uint32_t mxcsr; uint16_t fpucw;
    asm volatile("stmxcsr %0" : "=m"(mxcsr));
    asm volatile("fnstcw %0" : "=m"(fpucw));
    sp[0] = (uint64_t)mxcsr | ((uint64_t)fpucw << 32);
    sp[1] = 0; sp[2] = 0;                        // r15, r14
    sp[3] = (uint64_t)(void*)&emu_fiber_main;    // r13: function
    sp[4] = 0;                                   // r12: argument
    sp[5] = 0; sp[6] = 0;                        // rbx, rbp
    sp[7] = (uint64_t)(void*)&emu_ctx_entry;     // ret
    fibers[i].sp = sp;
#else
    getcontext(&fibers[i].uc);
    fibers[i].uc.uc_stack.ss_sp = lo;
    fibers[i].uc.uc_stack.ss_size = STACK_BYTES;
    fibers[i].uc.uc_link = nullptr;
    makecontext(&fibers[i].uc, (void (*)())fiber_main_uc, 0);
#endif
}

inline void resume(int i) {
    cur_fiber = i;
    cur_thread = fibers[i].tid;
    n_switches++;
#ifdef EMU_ASM_FIBERS
    emu_ctx_switch(&sched_sp, fibers[i].sp);
#else
    swapcontext(&sched_uc, &fibers[i].uc);
#endif
}

inline void block_barrier_complete() {
    for (int i = 0; i < n_threads; i++)
        if (fibers[i].state == F_WAIT_BLOCK) fibers[i].state = F_READY;
    blk_arrived = 0;
    blk_file = nullptr;
}

inline void thread_exit() {
    Fiber& f = fibers[cur_fiber];
    int t = cur_fiber, w = t >> 5, lane = t & 31;
    WarpState& W = warps[w];
    if (W.arrived > 0)
        error("thread exited while other lanes of its warp wait at %s (%s:%d): undefined behaviour on the GPU",
              W.what, W.file, W.line);
    W.exited |= 1u << lane;
    n_live--;
    (void)f;
    if (blk_arrived > 0 && blk_arrived == n_live) block_barrier_complete();
    if (cluster_exit_hook) cluster_exit_hook();
}

// __syncthreads at file:line
inline void syncthreads(const char* file, int line) {
    Fiber& f = fibers[cur_fiber];
    if (blk_arrived == 0) { blk_file = file; blk_line = line; }
    else if (blk_line != line || (blk_file != file && strcmp(blk_file, file) != 0))
        error("divergent __syncthreads: this thread is at %s:%d, others wait at %s:%d", file, line, blk_file, blk_line);
    f.state = F_WAIT_BLOCK; f.wait_file = file; f.wait_line = line; f.wait_what = "__syncthreads";
    if (++blk_arrived == n_live) block_barrier_complete();
    switch_to_scheduler();
}

// a warp collective: deposit v, wait for the 32 lanes, return the deposit of lane src(lane).
// on_complete(deposits) runs once, when the 32nd lane arrives: every lane is then blocked
// inside this call, so the 32 deposits (and anything they point to on the lanes' stacks)
// are valid (the wmma shim, include/mma.h, computes a fragment operation there once per warp)
struct NoCompletion { void operator()(const uint64_t*) const {} };
template <class F, class G = NoCompletion>
inline uint64_t warp_collective(unsigned mask, uint64_t v, const char* what, const char* file, int line, F src_of,
                                G on_complete = G()) {
    int t = cur_fiber, w = t >> 5, lane = t & 31;
    WarpState& W = warps[w];
    if (mask != 0xffffffffu)
        error("%s with mask 0x%08x at %s:%d: the emulator supports only full-warp masks", what, mask, file, line);
    if (W.nlanes != 32) error("%s at %s:%d in a partial warp (block size not a multiple of 32)", what, file, line);
    if (W.exited)
        error("%s with full mask at %s:%d after lanes 0x%08x of the warp returned: undefined behaviour on the GPU", what,
              file, line, W.exited);
    if (W.arrived == 0) { W.file = file; W.line = line; W.what = what; }
    else if (W.line != line || (W.file != file && strcmp(W.file, file) != 0) || (W.what != what && strcmp(W.what, what) != 0))
        error("divergent warp collective: lane %d at %s (%s:%d), other lanes at %s (%s:%d)", lane, what, file, line,
              W.what, W.file, W.line);
    unsigned g = W.gen;
    W.buf[g & 1][lane] = v;
    Fiber& f = fibers[cur_fiber];
    f.state = F_WAIT_WARP; f.wait_file = file; f.wait_line = line; f.wait_what = what;
    if (++W.arrived == 32) {
        on_complete(W.buf[g & 1]);
        W.arrived = 0; W.gen++;
        for (int l = 0; l < 32; l++) fibers[w * 32 + l].state = F_READY;
    }
    switch_to_scheduler();
    return W.buf[g & 1][src_of(lane)];
}

template <class T> inline uint64_t to_bits(T v) {
    static_assert(sizeof(T) <= 8 && std::is_trivially_copyable<T>::value, "shuffle of a type over 8 bytes");
    uint64_t x = 0; memcpy(&x, &v, sizeof(T)); return x;
}
template <class T> inline T from_bits(uint64_t x) { T v; memcpy(&v, &x, sizeof(T)); return v; }

// the static __shared__ variables outside the section (EMU_STATIC_SHARED), in the order
// they were registered; off: the variable's place in a cluster block's backing buffer
struct ExtraSmem { char* p; size_t n, off; };
inline std::vector<ExtraSmem>& extra_smem() { static std::vector<ExtraSmem> v; return v; }
inline size_t extra_smem_bytes = 0;
// a fixed capacity: a remote pointer into another block's backing buffer must stay valid
// when a variable is registered later in the same cluster
inline const size_t EXTRA_SMEM_MAX = 1 << 20;
inline bool in_extra_smem(const void* p, size_t n) {
    const char* c = (const char*)p;
    for (const ExtraSmem& e : extra_smem())
        if (c >= e.p && c + n <= e.p + e.n) return true;
    return false;
}

// dynamic shared memory of the current launch
inline char* dyn_smem = nullptr;
inline size_t dyn_smem_bytes = 0, dyn_smem_span = 0;
inline char* dyn_map = nullptr;
inline size_t dyn_map_bytes = 0;

// Block subset, for the index probe (dev/emu/index_probe.cpp: the last blocks of grids far too
// large to emulate whole). When set, a launch runs only the blocks whose linear id b (x
// fastest, then y, then z; nb blocks in the grid) it accepts; the others never start. It
// is called with cur_kernel, cur_grid_dim and cur_block_dim describing the launch, so a
// filter that accepts nothing records a launch's shape without running it.
inline std::function<bool(unsigned long long b, unsigned long long nb)> block_filter;

inline void run_grid(dim3 grid, dim3 block) {
    init_stacks();
    int nt = (int)(block.x * block.y * block.z);
    n_threads = nt;
    unsigned long long nb = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long bi = 0; bi < nb; bi++) {
        unsigned long long b = sched_reverse ? nb - 1 - bi : bi;
        if (block_filter && !block_filter(b, nb)) continue;
        cur_block = {(unsigned)(b % grid.x), (unsigned)((b / grid.x) % grid.y), (unsigned)(b / ((unsigned long long)grid.x * grid.y))};
        // fresh shared memory: poison everything
        if ((uintptr_t)__start_emu_smem && (uintptr_t)__stop_emu_smem > (uintptr_t)__start_emu_smem)
            memset(__start_emu_smem, 0xFF, (uintptr_t)__stop_emu_smem - (uintptr_t)__start_emu_smem);
        for (const ExtraSmem& e : extra_smem()) memset(e.p, 0xFF, e.n);
        if (dyn_smem_span) {
            memset(dyn_smem, 0xFF, dyn_smem_bytes);
            memset(dyn_smem + dyn_smem_bytes, 0xA5, dyn_smem_span - dyn_smem_bytes);
        }
        for (int i = 0; i < nt; i++) {
            fibers[i].tid = {(unsigned)(i % block.x), (unsigned)((i / block.x) % block.y), (unsigned)(i / (block.x * block.y))};
            fibers[i].state = F_READY;
            fiber_init(i);
        }
        for (int w = 0; w < (nt + 31) / 32; w++) {
            WarpState& W = warps[w];
            W.nlanes = nt - 32 * w < 32 ? nt - 32 * w : 32;
            W.exited = W.nlanes == 32 ? 0u : ~0u << W.nlanes;
            W.arrived = 0; W.gen = 0;
        }
        n_live = nt; blk_arrived = 0; blk_file = nullptr;
        n_fibers += nt;
        for (;;) {
            bool progressed = false;
            for (int k = 0; k < nt; k++) {
                int i = sched_reverse ? nt - 1 - k : k;
                if (fibers[i].state == F_READY) { resume(i); progressed = true; }
            }
            if (n_live == 0) break;
            if (!progressed) {
                // every live thread waits for something that cannot happen
                char where[1024]; size_t o = 0;
                for (int i = 0; i < nt && o < sizeof where - 100; i++)
                    if (fibers[i].state == F_WAIT_BLOCK || fibers[i].state == F_WAIT_WARP) {
                        bool first = true;
                        for (int j = 0; j < i; j++)
                            if (fibers[j].state == fibers[i].state && fibers[j].wait_line == fibers[i].wait_line &&
                                fibers[j].wait_file == fibers[i].wait_file) { first = false; break; }
                        if (first) o += snprintf(where + o, sizeof where - o, " thread %d at %s (%s:%d);", i,
                                                 fibers[i].wait_what, fibers[i].wait_file, fibers[i].wait_line);
                    }
                cur_thread = {0, 0, 0};
                error("deadlock: %d live threads, none can proceed:%s", n_live, where);
            }
        }
        if (dyn_smem_span)
            for (size_t i = dyn_smem_bytes; i < dyn_smem_span; i++)
                if ((unsigned char)dyn_smem[i] != 0xA5)
                    error("write past the end of dynamic shared memory (%zu bytes requested; byte %zu written)",
                          dyn_smem_bytes, i);
        if (block_end_hook) block_end_hook();
    }
    cur_fiber = -1;
}

// ---------------------------------------------------------------------------------
// Thread-block clusters (sm_90; see "Model" above). The blocks of one cluster run together:
// their fibers are scheduled in passes, block by block in rank order (reversed under "rev"),
// so that a cluster barrier can wait for all of them. Each block keeps its own fibers,
// warps, __syncthreads state and shared memory. Static __shared__ variables have one
// address for every block (one linker section), so the section holds the RUNNING block's
// copy and is swapped on every switch between blocks; the other blocks' copies live in
// backing buffers, which is where map_shared_rank sends a remote access. The dynamic buffer
// is one mapping per block (a pointer a thread took stays in its own block's buffer).
inline bool cluster_active = false;       // a cluster launch is running
inline dim3 cluster_dim(1, 1, 1);
inline int cluster_n = 0, cluster_cur = -1;  // blocks per cluster; the block whose state is loaded
struct ClusterBlock {
    uint3 block;
    Fiber* fibers; WarpState* warps; char* stacks;
    int n_live, blk_arrived; const char* blk_file; int blk_line;
    char* dyn_map; size_t dyn_map_bytes; char* dyn_smem;
    char* static_smem;  // this block's static __shared__ section while another block runs
    char* extra_smem;   // the same for the variables outside the section (EXTRA_SMEM_MAX bytes)
    bool exited;
};
inline ClusterBlock cl_blocks[MAX_CLUSTER];
inline char* cl_stacks[MAX_CLUSTER];
inline Fiber* cl_fibers[MAX_CLUSTER];
inline WarpState* cl_warps[MAX_CLUSTER];
// the cluster barrier: live threads of the whole cluster, arrivals in the current phase
inline int cl_live = 0, cl_arrived = 0;
inline unsigned cl_phase = 0;
inline const char* cl_file = nullptr;
inline int cl_line = 0;
inline const char* cl_what = nullptr;

inline size_t static_smem_bytes() {
    if ((uintptr_t)__start_emu_smem && (uintptr_t)__stop_emu_smem > (uintptr_t)__start_emu_smem)
        return (uintptr_t)__stop_emu_smem - (uintptr_t)__start_emu_smem;
    return 0;
}
inline void cluster_save(int r) {
    ClusterBlock& B = cl_blocks[r];
    B.n_live = n_live; B.blk_arrived = blk_arrived; B.blk_file = blk_file; B.blk_line = blk_line;
    size_t sb = static_smem_bytes();
    if (sb && !B.exited) memcpy(B.static_smem, __start_emu_smem, sb);
    if (!B.exited)
        for (const ExtraSmem& e : extra_smem()) memcpy(B.extra_smem + e.off, e.p, e.n);
}
inline void cluster_load(int r) {
    ClusterBlock& B = cl_blocks[r];
    fibers = B.fibers; warps = B.warps; stack_region = B.stacks;
    n_live = B.n_live; blk_arrived = B.blk_arrived; blk_file = B.blk_file; blk_line = B.blk_line;
    cur_block = B.block; dyn_smem = B.dyn_smem;
    size_t sb = static_smem_bytes();
    if (sb) memcpy(__start_emu_smem, B.static_smem, sb);
    for (const ExtraSmem& e : extra_smem()) memcpy(e.p, B.extra_smem + e.off, e.n);
    cluster_cur = r;
}
inline void cluster_switch(int r) {
    if (r == cluster_cur) return;
    if (cluster_cur >= 0) cluster_save(cluster_cur);
    cluster_load(r);
}
inline void need_cluster(const char* what, const char* file, int line) {
    if (!cluster_active)
        error("%s at %s:%d in a launch without a cluster: the emulator models the cluster API only in launches with "
              "cudaLaunchAttributeClusterDimension (on sm_90 a plain launch is a cluster of one block)", what, file, line);
}
inline void cluster_barrier_complete() {
    cl_phase++; cl_arrived = 0; cl_file = nullptr;
    for (int r = 0; r < cluster_n; r++) {
        if (cl_blocks[r].exited) continue;
        Fiber* f = cl_blocks[r].fibers;
        for (int i = 0; i < n_threads; i++)
            if (f[i].state == F_WAIT_CLUSTER) f[i].state = F_READY;
    }
}
// barrier.cluster.arrive: every arrival of a phase must come from the same call site, as
// for __syncthreads (a divergent cluster barrier is undefined behaviour or a hang)
inline void cluster_arrive(const char* what, const char* file, int line) {
    need_cluster(what, file, line);
    Fiber& f = fibers[cur_fiber];
    if (f.cl_arrived)
        error("%s at %s:%d: this thread arrived at the cluster barrier before and has not waited since "
              "(an arrive must be followed by a wait before the next arrive)", what, file, line);
    if (cl_arrived == 0) { cl_file = file; cl_line = line; cl_what = what; }
    else if (cl_line != line || (cl_file != file && strcmp(cl_file, file) != 0))
        error("divergent cluster barrier: this thread arrives at %s (%s:%d), others of the cluster at %s (%s:%d)", what, file,
              line, cl_what, cl_file, cl_line);
    f.cl_arrived = true; f.cl_phase = cl_phase;
    if (++cl_arrived == cl_live) cluster_barrier_complete();
}
// barrier.cluster.wait: returns once every live thread of the cluster has arrived in the
// phase of this thread's arrive
inline void cluster_wait(const char* what, const char* file, int line) {
    need_cluster(what, file, line);
    Fiber& f = fibers[cur_fiber];
    if (!f.cl_arrived) error("%s at %s:%d without an arrive on the cluster barrier before it", what, file, line);
    f.cl_arrived = false;
    if (f.cl_phase != cl_phase) return;  // the phase has completed already
    f.state = F_WAIT_CLUSTER; f.wait_file = file; f.wait_line = line; f.wait_what = what;
    switch_to_scheduler();
}
inline void cluster_sync(const char* file, int line) {
    cluster_arrive("cluster.sync", file, line);
    cluster_wait("cluster.sync", file, line);
}
// a thread that returns no longer counts for the cluster barrier (nor its pending arrival)
inline void cluster_on_thread_exit() {
    Fiber& f = fibers[cur_fiber];
    cl_live--;
    if (f.cl_arrived) {
        if (f.cl_phase == cl_phase) cl_arrived--;
        f.cl_arrived = false;
    }
    if (cl_arrived == 0) cl_file = nullptr;
    else if (cl_arrived == cl_live) cluster_barrier_complete();
}
inline unsigned cluster_rank_of(uint3 b) {
    return b.x % cluster_dim.x + cluster_dim.x * (b.y % cluster_dim.y + cluster_dim.y * (b.z % cluster_dim.z));
}
// cluster.map_shared_rank(p, rank): the same offset in block `rank`'s shared memory. p may
// be an address in any block of the cluster (the running one's, or one mapped before)
inline void* cluster_map(const void* p, unsigned rank, const char* file, int line) {
    need_cluster("map_shared_rank", file, line);
    if (rank >= (unsigned)cluster_n)
        error("map_shared_rank(%p, %u) at %s:%d: rank %u is outside the cluster of %d blocks", p, rank, file, line, rank, cluster_n);
    const char* c = (const char*)p;
    size_t sb = static_smem_bytes(), off = 0;
    int kind = -1;
    if (sb && c >= __start_emu_smem && c < __start_emu_smem + sb) { kind = 0; off = (size_t)(c - __start_emu_smem); }
    for (const ExtraSmem& e : extra_smem())
        if (kind < 0 && c >= e.p && c < e.p + e.n) { kind = 2; off = e.off + (size_t)(c - e.p); }
    for (int r = 0; r < cluster_n && kind < 0; r++) {
        const ClusterBlock& B = cl_blocks[r];
        if (dyn_smem_bytes && c >= B.dyn_smem && c < B.dyn_smem + dyn_smem_bytes) { kind = 1; off = (size_t)(c - B.dyn_smem); }
        else if (r != cluster_cur && sb && c >= B.static_smem && c < B.static_smem + sb) { kind = 0; off = (size_t)(c - B.static_smem); }
        else if (r != cluster_cur && c >= B.extra_smem && c < B.extra_smem + extra_smem_bytes) { kind = 2; off = (size_t)(c - B.extra_smem); }
    }
    if (kind < 0)
        error("map_shared_rank(%p, %u) at %s:%d: %p is not a shared memory address of this cluster", p, rank, file, line, p);
    // CUDA guarantees that the other blocks of a cluster exist only once a cluster barrier
    // has completed (hence the cluster.sync() at the start of DSMEM kernels); checked at the
    // mapping, which the emulator sees, not at the access, which it does not
    if ((int)rank != cluster_cur && cl_phase == 0)
        error("map_shared_rank(%p, %u) at %s:%d before the cluster's first barrier completed: block rank %u may not have "
              "started yet (undefined behaviour on the GPU; a cluster.sync() first)", p, rank, file, line, rank);
    ClusterBlock& T = cl_blocks[rank];
    if (T.exited)
        error("map_shared_rank(%p, %u) at %s:%d: block rank %u of the cluster has exited, and its shared memory with it "
              "(undefined behaviour on the GPU: a block must not exit while another may still access its shared memory; "
              "a cluster.sync before the exit)", p, rank, file, line, rank);
    if (kind == 1) return T.dyn_smem + off;
    if (kind == 2) {
        if ((int)rank != cluster_cur) return T.extra_smem + off;
        for (const ExtraSmem& e : extra_smem())
            if (off >= e.off && off < e.off + e.n) return e.p + (off - e.off);
    }
    return (int)rank == cluster_cur ? __start_emu_smem + off : T.static_smem + off;
}
inline unsigned cluster_query_rank(const void* p, const char* file, int line) {
    need_cluster("query_shared_rank", file, line);
    const char* c = (const char*)p;
    size_t sb = static_smem_bytes();
    if (sb && c >= __start_emu_smem && c < __start_emu_smem + sb) return (unsigned)cluster_cur;
    if (in_extra_smem(c, 1)) return (unsigned)cluster_cur;
    for (int r = 0; r < cluster_n; r++) {
        const ClusterBlock& B = cl_blocks[r];
        if (dyn_smem_bytes && c >= B.dyn_smem && c < B.dyn_smem + dyn_smem_bytes) return (unsigned)r;
        if (r != cluster_cur && sb && c >= B.static_smem && c < B.static_smem + sb) return (unsigned)r;
        if (r != cluster_cur && c >= B.extra_smem && c < B.extra_smem + extra_smem_bytes) return (unsigned)r;
    }
    error("query_shared_rank(%p) at %s:%d: not a shared memory address of this cluster", p, file, line);
}

// the block's last thread returned: its shared memory ends (poisoned, and map_shared_rank
// to it is an error from now on)
inline void cluster_block_exit(int r, size_t smem, size_t span) {
    ClusterBlock& B = cl_blocks[r];
    for (size_t i = smem; i < span; i++)
        if ((unsigned char)B.dyn_smem[i] != 0xA5)
            error("write past the end of dynamic shared memory (%zu bytes requested; byte %zu written)", smem, i);
    if (block_end_hook) block_end_hook();
    B.exited = true;
    size_t sb = static_smem_bytes();
    if (sb) memset(B.static_smem, 0xFF, sb);
    memset(B.extra_smem, 0xFF, extra_smem_bytes);
    memset(B.dyn_smem, 0xFF, smem);
}

inline void run_clusters(dim3 grid, dim3 block, dim3 cdim) {
    init_stacks();
    if (!cl_fibers[0]) { cl_stacks[0] = stack_region; cl_fibers[0] = fibers; cl_warps[0] = warps; }
    int nt = (int)(block.x * block.y * block.z);
    int cn = (int)(cdim.x * cdim.y * cdim.z);
    size_t per = STACK_BYTES + GUARD_BYTES;
    for (int r = 1; r < cn; r++)
        if (!cl_fibers[r]) {
            void* p = mmap(nullptr, per * MAX_THREADS, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
            if (p == MAP_FAILED) { fprintf(stderr, "emu: cannot map fiber stacks\n"); _exit(3); }
            cl_stacks[r] = (char*)p;
            for (int i = 0; i < MAX_THREADS; i++) mprotect(cl_stacks[r] + i * per, GUARD_BYTES, PROT_NONE);
            cl_fibers[r] = new Fiber[MAX_THREADS];
            cl_warps[r] = new WarpState[MAX_THREADS / 32];
        }
    n_threads = nt;
    size_t smem = dyn_smem_bytes, span = dyn_smem_span, page = 4096;
    size_t mapped = (span + page - 1) / page * page + page, sb = static_smem_bytes();
    for (int r = 0; r < cn; r++) {
        ClusterBlock& B = cl_blocks[r];
        B.fibers = cl_fibers[r]; B.warps = cl_warps[r]; B.stacks = cl_stacks[r];
        B.dyn_map = (char*)mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (B.dyn_map == (char*)MAP_FAILED) { fprintf(stderr, "emu: mmap failed\n"); _exit(3); }
        B.dyn_map_bytes = mapped;
        mprotect(B.dyn_map + mapped - page, page, PROT_NONE);
        B.dyn_smem = B.dyn_map + mapped - page - span;
        B.static_smem = (char*)malloc(sb ? sb : 1);
        B.extra_smem = (char*)malloc(EXTRA_SMEM_MAX);
    }
    cluster_active = true; cluster_dim = cdim; cluster_n = cn;
    cluster_exit_hook = cluster_on_thread_exit;
    dim3 cg(grid.x / cdim.x, grid.y / cdim.y, grid.z / cdim.z);
    unsigned long long ncl = (unsigned long long)cg.x * cg.y * cg.z, nb = (unsigned long long)grid.x * grid.y * grid.z;
    for (unsigned long long ci = 0; ci < ncl; ci++) {
        unsigned long long c = sched_reverse ? ncl - 1 - ci : ci;
        uint3 c0 = {(unsigned)(c % cg.x) * cdim.x, (unsigned)((c / cg.x) % cg.y) * cdim.y, (unsigned)(c / ((unsigned long long)cg.x * cg.y)) * cdim.z};
        bool wanted = !block_filter;
        for (int r = 0; r < cn; r++) {
            ClusterBlock& B = cl_blocks[r];
            B.block = {c0.x + r % cdim.x, c0.y + (r / cdim.x) % cdim.y, c0.z + r / (cdim.x * cdim.y)};
            if (block_filter && block_filter(B.block.x + (unsigned long long)grid.x * (B.block.y + (unsigned long long)grid.y * B.block.z), nb))
                wanted = true;
        }
        if (!wanted) continue;  // a cluster runs whole or not at all: its blocks coexist
        for (int r = 0; r < cn; r++) {
            ClusterBlock& B = cl_blocks[r];
            if (sb) memset(B.static_smem, 0xFF, sb);
            memset(B.extra_smem, 0xFF, extra_smem_bytes);
            if (span) { memset(B.dyn_smem, 0xFF, smem); memset(B.dyn_smem + smem, 0xA5, span - smem); }
            stack_region = B.stacks;
            for (int i = 0; i < nt; i++) {
                B.fibers[i].tid = {(unsigned)(i % block.x), (unsigned)((i / block.x) % block.y), (unsigned)(i / (block.x * block.y))};
                B.fibers[i].state = F_READY;
                B.fibers[i].cl_arrived = false;
                fibers = B.fibers;
                fiber_init(i);
            }
            for (int w = 0; w < (nt + 31) / 32; w++) {
                WarpState& W = B.warps[w];
                W.nlanes = nt - 32 * w < 32 ? nt - 32 * w : 32;
                W.exited = W.nlanes == 32 ? 0u : ~0u << W.nlanes;
                W.arrived = 0; W.gen = 0;
            }
            B.n_live = nt; B.blk_arrived = 0; B.blk_file = nullptr; B.blk_line = 0; B.exited = false;
        }
        n_fibers += (unsigned long long)nt * cn;
        cl_live = nt * cn; cl_arrived = 0; cl_phase = 0; cl_file = nullptr;
        cluster_cur = -1;
        for (;;) {
            bool progressed = false, all_done = true;
            for (int k = 0; k < cn; k++) {
                int r = sched_reverse ? cn - 1 - k : k;
                if (cl_blocks[r].exited) continue;
                cluster_switch(r);
                // the block runs as far as it can (until its threads wait for other blocks or
                // return), as a block of a plain launch runs to its end: the other blocks of
                // the cluster then see all of its writes or none
                for (bool any = true; any;) {
                    any = false;
                    for (int kk = 0; kk < nt; kk++) {
                        int i = sched_reverse ? nt - 1 - kk : kk;
                        if (fibers[i].state == F_READY) { resume(i); any = progressed = true; }
                    }
                }
                if (n_live == 0) cluster_block_exit(r, smem, span);
                else all_done = false;
            }
            if (all_done) break;
            if (!progressed) {
                char where[1500]; size_t o = 0;
                for (int r = 0; r < cn && o < sizeof where - 120; r++) {
                    const ClusterBlock& B = cl_blocks[r];
                    if (B.exited) continue;
                    Fiber* f = B.fibers;
                    for (int i = 0; i < nt && o < sizeof where - 120; i++)
                        if (f[i].state == F_WAIT_BLOCK || f[i].state == F_WAIT_WARP || f[i].state == F_WAIT_CLUSTER) {
                            bool first = true;
                            for (int j = 0; j < i; j++)
                                if (f[j].state == f[i].state && f[j].wait_line == f[i].wait_line && f[j].wait_file == f[i].wait_file) { first = false; break; }
                            if (first) o += snprintf(where + o, sizeof where - o, " block rank %d thread %d at %s (%s:%d);", r, i,
                                                     f[i].wait_what, f[i].wait_file, f[i].wait_line);
                        }
                }
                cur_thread = {0, 0, 0};
                error("deadlock in a cluster: %d live threads, none can proceed:%s", cl_live, where);
            }
        }
    }
    for (int r = 0; r < cn; r++) {
        munmap(cl_blocks[r].dyn_map, cl_blocks[r].dyn_map_bytes);
        free(cl_blocks[r].static_smem);
        free(cl_blocks[r].extra_smem);
        cl_blocks[r] = ClusterBlock{};
    }
    cluster_active = false; cluster_exit_hook = nullptr; cluster_n = 0; cluster_cur = -1;
    fibers = cl_fibers[0]; warps = cl_warps[0]; stack_region = cl_stacks[0];
    cur_fiber = -1;
}

// EMU_STATIC_SHARED: the variable is reached for the first time, before any thread used
// it (it cannot be named before its declaration), so poisoning it now is poisoning it at
// the block's start; in a running cluster the other blocks' copies start poisoned too
inline bool static_shared(void* p, size_t n) {
    char* c = (char*)p;
    const size_t sb = static_smem_bytes();
    if (sb && c >= __start_emu_smem && c + n <= __start_emu_smem + sb) return false;  // in the section
    if (in_extra_smem(c, n)) return false;
    if (extra_smem_bytes + n > EXTRA_SMEM_MAX)
        error("more than %zu bytes of static __shared__ variables outside the shared-memory section (template statics)",
              EXTRA_SMEM_MAX);
    extra_smem().push_back({c, n, extra_smem_bytes});
    memset(c, 0xFF, n);
    if (cluster_active)
        for (int r = 0; r < cluster_n; r++)
            if (!cl_blocks[r].exited) memset(cl_blocks[r].extra_smem + extra_smem_bytes, 0xFF, n);
    extra_smem_bytes += n;
    return true;
}

inline int kernel_index(const char* name) {
    for (int i = 0; i < kernel_table_n; i++)
        if (strcmp(kernel_table[i].name, name) == 0) return i;
    return -1;
}

// ---------------------------------------------------------------------------------
// Streams and events.
//  SYNCHRONOUS model (lazy_streams == false, the default; the kernel harness and the ladders
//    use it): every operation runs when it is issued, so stream order is program order and
//    events are trivially complete.
//  LAZY model (lazy_streams == true; run_trainer.sh turns it on with EMU_STREAMS=lazy): an
//    operation is queued on its stream and runs only when something forces it: a
//    synchronisation of its stream, of an event recorded after it or of the device, a
//    cudaStreamWaitEvent op of another stream that is itself being run, a synchronous copy
//    or memset on the legacy stream (which runs the legacy stream and the BLOCKING streams
//    first, not the non-blocking ones), cudaFree/cudaFreeHost (they synchronise the device),
//    cudaStreamDestroy (its work completes), or the end of the program. This is one
//    schedule that CUDA allows -- every stream as late as the dependencies permit -- so a
//    missing cudaStreamWaitEvent or stream synchronisation becomes an operation that runs
//    too late (stale or poisoned data), and the results differ. It is ONE legal schedule,
//    not all of them: concurrency (two streams at once) is never emulated.
//  Copies from pageable host memory are staged when issued (the source is read at once);
//  copies to pageable host memory complete before cudaMemcpyAsync returns (their stream
//  is run first), as the CUDA documentation of API synchronisation behaviour says.
//  Copies to and from pinned memory (cudaMallocHost) are queued like kernels.
inline bool lazy_streams = false;
// EMU_H2D_ASYNC (lazy model only): a SYNCHRONOUS cudaMemcpy from pageable host memory to the
// device returns once the source is staged, before the copy has landed, and the copy is
// queued on the legacy stream, which non-blocking streams do not wait for. CUDA documents
// this ("the DMA to final destination may not have completed"). On unless EMU_H2D_ASYNC=0.
inline bool pageable_h2d_async = !(getenv("EMU_H2D_ASYNC") && strcmp(getenv("EMU_H2D_ASYNC"), "0") == 0);
//  In the lazy model, the streams whose ids (1, 2, ... in creation order) are in eager_ids
//  run their work when it is issued instead (after forcing what it waits for): with the
//  compute stream lazy and a copy stream eager, a copy that lacks its wait on the compute
//  stream runs before the data it copies exists.
inline std::vector<int> eager_ids;
inline CUstream_st* legacy_stream() { static CUstream_st s{0, 0, false, false, false, {}, 0, 0}; return &s; }
inline std::vector<CUstream_st*>& created_streams() { static std::vector<CUstream_st*> v; return v; }
inline CUstream_st* stream_of(cudaStream_t s) { return s ? s : legacy_stream(); }
inline unsigned long long n_deferred = 0, n_stream_waits = 0;
// runs the first `upto` operations of s (and, through their waits, what they depend on)
inline void flush(CUstream_st* s, unsigned long long upto) {
    if (s->done >= upto) return;
    if (s->flushing)
        error("stream dependency cycle: stream %d must run past operation %llu while it is running operation %llu", s->id,
              upto, s->done);
    s->flushing = true;
    while (s->done < upto && !s->q.empty()) {
        std::function<void()> op = std::move(s->q.front());
        s->q.pop_front();
        op();
        s->done++;
    }
    s->flushing = false;
}
inline void flush_all(CUstream_st* s) { flush(s, s->enq); }
inline void device_synchronize() {
    for (CUstream_st* s : created_streams()) flush_all(s);
    flush_all(legacy_stream());
}
// what an operation on the legacy stream waits for: its own earlier work and the blocking streams'
inline void legacy_synchronize() {
    for (CUstream_st* s : created_streams())
        if (!(s->flags & 0x01) && !s->destroyed) flush_all(s);
    flush_all(legacy_stream());
}
// called with the stream of every operation issued, event recorded or stream synchronised
// (include/nccl.h: NCCL forbids using a stream while a non-blocking call on it is in progress)
inline void (*stream_use_hook)(CUstream_st* s, const char* what) = nullptr;
// issues an operation on stream s
inline void submit(cudaStream_t stream, std::function<void()> op) {
    CUstream_st* s = stream_of(stream);
    if (stream_use_hook) stream_use_hook(s, "an operation issued");
    if (s->destroyed) error("an operation issued on a destroyed stream (%d)", s->id);
    if (!lazy_streams) { op(); s->enq++; s->done++; return; }
    if (s->eager) {
        if (!(s->flags & 0x01)) flush_all(legacy_stream());  // a blocking stream follows the legacy stream
        flush_all(s);
        s->flushing = true;
        op();
        s->flushing = false;
        s->enq++; s->done++;
        return;
    }
    n_deferred++;
    if (s->id == 0) {
        // the legacy stream waits for the blocking streams' earlier work
        std::vector<std::pair<CUstream_st*, unsigned long long>> deps;
        for (CUstream_st* b : created_streams())
            if (!(b->flags & 0x01) && !b->destroyed && b->enq > b->done) deps.push_back({b, b->enq});
        if (!deps.empty()) {
            s->q.push_back([deps]() { for (auto& d : deps) flush(d.first, d.second); });
            s->enq++;
        }
    } else if (!(s->flags & 0x01)) {
        // a blocking stream waits for the legacy stream's earlier work
        CUstream_st* l = legacy_stream();
        if (l->enq > l->done) {
            unsigned long long upto = l->enq;
            s->q.push_back([l, upto]() { flush(l, upto); });
            s->enq++;
        }
    }
    s->q.push_back(std::move(op));
    s->enq++;
}

// pinned host allocations (cudaMallocHost), and a lookup of device allocations by address
inline std::map<char*, size_t>& pinned() { static std::map<char*, size_t> m; return m; }
// is [p, p + n) inside one pinned allocation?
inline bool is_pinned(const void* p, size_t n = 1) {
    auto it = pinned().upper_bound((char*)p);
    if (it == pinned().begin()) return false;
    --it;
    return (char*)p >= it->first && (char*)p + n <= it->first + (it->second ? it->second : 1);
}

// a launch: validate like the CUDA runtime, then run every block
// cluster: the cluster dimensions of a cluster launch (cudaLaunchKernelEx with
// cudaLaunchAttributeClusterDimension), nullptr for a plain launch
template <class... P, class... A>
inline cudaError_t launch_impl(const char* name, const char* file, int line, dim3 grid, dim3 block, size_t smem,
                               cudaStream_t stream, const dim3* cluster, void (*k)(P...), A&&... args) {
    cur_kernel = name;
    n_launches++;
    unsigned long long nt = (unsigned long long)block.x * block.y * block.z;
    if (block.x == 0 || block.y == 0 || block.z == 0 || block.x > 1024 || block.y > 1024 || block.z > 64 || nt > 1024)
        return set_launch_error(cudaErrorInvalidConfiguration, "invalid block (%u,%u,%u) at %s:%d", block.x, block.y, block.z, file, line);
    if (grid.x == 0 || grid.y == 0 || grid.z == 0 || grid.x > 2147483647u || grid.y > 65535 || grid.z > 65535)
        return set_launch_error(cudaErrorInvalidConfiguration, "invalid grid (%u,%u,%u) at %s:%d", grid.x, grid.y, grid.z, file, line);
    int ki = kernel_index(name);
    if (ki >= 0 && kernel_table[ki].max_threads > 0 && nt > (unsigned long long)kernel_table[ki].max_threads)
        return set_launch_error(cudaErrorLaunchOutOfResources, "%llu threads per block > __launch_bounds__(%d) at %s:%d", nt,
                                kernel_table[ki].max_threads, file, line);
    int allowed = DEFAULT_SMEM;
    auto it = func_max_dyn_smem().find((const void*)k);
    if (it != func_max_dyn_smem().end()) allowed = it->second;
    if (smem > (size_t)allowed)
        return set_launch_error(cudaErrorInvalidValue, "%zu bytes of dynamic shared memory > %d allowed (%s) at %s:%d", smem,
                                allowed, allowed == DEFAULT_SMEM ? "no cudaFuncSetAttribute" : "cudaFuncSetAttribute", file, line);
    // by value: under the lazy stream model the launch runs after the caller has returned
    const dim3 cdim = cluster ? *cluster : dim3(1, 1, 1);
    const bool in_clusters = cluster != nullptr;
    if (cluster) {
        unsigned long long cn = (unsigned long long)cdim.x * cdim.y * cdim.z;
        auto np = func_nonportable_cluster().find((const void*)k);
        int limit = np != func_nonportable_cluster().end() && np->second ? MAX_CLUSTER : PORTABLE_CLUSTER;
        if (cdim.x == 0 || cdim.y == 0 || cdim.z == 0 || grid.x % cdim.x || grid.y % cdim.y || grid.z % cdim.z)
            return set_launch_error(cudaErrorInvalidClusterSize, "grid (%u,%u,%u) is not a whole number of clusters (%u,%u,%u) at %s:%d",
                                    grid.x, grid.y, grid.z, cdim.x, cdim.y, cdim.z, file, line);
        if (cn > (unsigned long long)limit)
            return set_launch_error(cudaErrorInvalidClusterSize, "cluster (%u,%u,%u) of %llu blocks > %d (%s) at %s:%d", cdim.x, cdim.y,
                                    cdim.z, cn, limit, limit == MAX_CLUSTER ? "the non-portable maximum"
                                    : "the portable maximum; 16 needs cudaFuncAttributeNonPortableClusterSizeAllowed", file, line);
    }
    if (ki < 0 && kernel_table)
        error("launch of %s at %s:%d: kernel not in the table transform.py generated", name, file, line);
    if (ki >= 0 && covered) covered[ki] = 1;

    // kernel arguments are converted to the parameter types once, as a launch does; the
    // launch then runs on its stream (now, or later in the lazy stream model)
    std::tuple<std::decay_t<P>...> params(std::forward<A>(args)...);
    cur_kernel = "(no kernel)";
    stream_of(stream)->compute++;
    submit(stream, [=]() mutable {
        cur_kernel = name;
        auto invoke = [](void* ctx) {
            auto* pp = (std::pair<void (*)(P...), std::tuple<std::decay_t<P>...>*>*)ctx;
            std::apply(pp->first, *pp->second);
        };
        std::pair<void (*)(P...), std::tuple<std::decay_t<P>...>*> ctx(k, &params);
        body_fn = invoke; body_ctx = &ctx;

        // dynamic shared memory ends at a PROT_NONE page; the slack below it is canary-checked
        size_t span = (smem + 127) / 128 * 128;
        size_t page = 4096, mapped = (span + page - 1) / page * page + page;
        dyn_map = (char*)mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (dyn_map == (char*)MAP_FAILED) { fprintf(stderr, "emu: mmap failed\n"); _exit(3); }
        dyn_map_bytes = mapped;
        mprotect(dyn_map + mapped - page, page, PROT_NONE);
        dyn_smem = dyn_map + mapped - page - span;
        dyn_smem_bytes = smem; dyn_smem_span = span;

        cur_block_dim = block; cur_grid_dim = grid;
        if (in_clusters) run_clusters(grid, block, cdim);
        else run_grid(grid, block);

        munmap(dyn_map, dyn_map_bytes);
        dyn_map = nullptr; dyn_smem = nullptr; dyn_smem_bytes = dyn_smem_span = 0;
        cur_kernel = "(no kernel)";
    });
    return cudaSuccess;
}
template <class... P, class... A>
inline void launch(const char* name, const char* file, int line, dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                   void (*k)(P...), A&&... args) {
    (void)launch_impl(name, file, line, grid, block, smem, stream, nullptr, k, std::forward<A>(args)...);
}

// ---------------------------------------------------------------------------------
// "device" allocations: 0xFF-filled, with 0xFF guard zones checked by check_guards()
inline const size_t ALLOC_GUARD = 4096;
struct Alloc { size_t bytes; bool reserved; };
inline std::map<char*, Alloc>& allocs() { static std::map<char*, Alloc> m; return m; }
// Reserved allocations, for the index probe (dev/emu/index_probe.cpp: buffers of llama3-8B size,
// logits of 8 GiB and more). With reserve_allocs set, cudaMalloc maps the allocation
// MAP_NORESERVE (a page costs memory only once touched; untouched memory reads as zeros:
// NOT poisoned, the probe poisons what it checks), page-aligned, between PROT_NONE regions
// of RESERVE_GUARD bytes, so that an address that a 32-bit index wrapped below the buffer
// or far beyond it faults instead of landing in another buffer. The bytes between the end
// and the next page must stay 0 (check_one).
inline bool reserve_allocs = false;
inline const size_t RESERVE_GUARD = (size_t)64 << 30, PAGE = 4096;
inline size_t reserved_span(size_t n) { return (n + PAGE - 1) / PAGE * PAGE; }
inline void* dev_alloc(size_t n) {
    if (reserve_allocs) {
        size_t span = reserved_span(n ? n : 1);
        char* base = (char*)mmap(nullptr, 2 * RESERVE_GUARD + span, PROT_NONE,
                                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (base == (char*)MAP_FAILED) return nullptr;
        if (mprotect(base + RESERVE_GUARD, span, PROT_READ | PROT_WRITE) != 0) { munmap(base, 2 * RESERVE_GUARD + span); return nullptr; }
        char* p = base + RESERVE_GUARD;
        allocs()[p] = {n, true};
        return p;
    }
    size_t tot = ALLOC_GUARD + (n + 255) / 256 * 256 + ALLOC_GUARD;
    char* base = (char*)aligned_alloc(256, tot);
    if (!base) return nullptr;
    memset(base, 0xFF, tot);
    char* p = base + ALLOC_GUARD;
    allocs()[p] = {n, false};
    return p;
}
// returns a description of the first damaged guard zone, or empty
inline std::string check_one(char* p, const Alloc& a) {
    if (a.reserved) {  // the guards fault; the slack up to the page end must still be zeros
        for (size_t i = a.bytes; i < reserved_span(a.bytes ? a.bytes : 1); i++)
            if (p[i] != 0) {
                char m[200]; snprintf(m, sizeof m, "out-of-bounds write at byte %zu of a %zu-byte reserved allocation", i, a.bytes);
                return m;
            }
        return "";
    }
    size_t tot = ALLOC_GUARD + (a.bytes + 255) / 256 * 256 + ALLOC_GUARD;
    char* base = p - ALLOC_GUARD;
    for (size_t i = 0; i < ALLOC_GUARD; i++)
        if ((unsigned char)base[i] != 0xFF) {
            char m[200]; snprintf(m, sizeof m, "out-of-bounds write %zu bytes before a %zu-byte allocation", ALLOC_GUARD - i, a.bytes);
            return m;
        }
    for (size_t i = ALLOC_GUARD + a.bytes; i < tot; i++)
        if ((unsigned char)base[i] != 0xFF) {
            char m[200]; snprintf(m, sizeof m, "out-of-bounds write at byte %zu of a %zu-byte allocation", i - ALLOC_GUARD, a.bytes);
            return m;
        }
    return "";
}
inline std::string check_guards() {
    for (auto& kv : allocs()) { std::string s = check_one(kv.first, kv.second); if (!s.empty()) return s; }
    return "";
}
// is [p, p + n) inside one device allocation? (false for host memory)
inline bool is_device(const void* p, size_t n = 1) {
    auto it = allocs().upper_bound((char*)p);
    if (it == allocs().begin()) return false;
    --it;
    return (char*)p >= it->first && (char*)p + n <= it->first + (it->second.bytes ? it->second.bytes : 1);
}
inline bool touches_device(const void* p) {  // p inside a device allocation or its guard zones
    auto it = allocs().upper_bound((char*)p + ALLOC_GUARD);
    if (it == allocs().begin()) return false;
    --it;
    return (char*)p >= it->first - ALLOC_GUARD && (char*)p < it->first + (it->second.bytes + 255) / 256 * 256 + ALLOC_GUARD;
}
inline bool dev_free(void* p) {
    auto it = allocs().find((char*)p);
    if (it == allocs().end()) return false;
    std::string s = check_one(it->first, it->second);
    if (!s.empty()) error("cudaFree: %s", s.c_str());
    if (it->second.reserved) munmap((char*)p - RESERVE_GUARD, 2 * RESERVE_GUARD + reserved_span(it->second.bytes ? it->second.bytes : 1));
    else free((char*)p - ALLOC_GUARD);
    allocs().erase(it);
    return true;
}

}  // namespace emu

// ---------------------------------------------------------------------------------
// what kernels call
#define __syncthreads() ::emu::syncthreads(__FILE__, __LINE__)
#define __syncwarp(...) ((void)::emu::warp_collective(emu_mask_or_full(__VA_ARGS__), 0, "__syncwarp", __FILE__, __LINE__, [](int l) { return l; }))
static inline unsigned emu_mask_or_full(unsigned m = 0xffffffffu) { return m; }
template <class T> static inline T emu_shfl_xor(unsigned mask, T v, int lm, int width, const char* file, int line) {
    return emu::from_bits<T>(emu::warp_collective(mask, emu::to_bits(v), "__shfl_xor_sync", file, line, [=](int l) {
        int s = l ^ lm;
        return s >= ((l / width) + 1) * width ? l : s;
    }));
}
template <class T> static inline T emu_shfl(unsigned mask, T v, int src, int width, const char* file, int line) {
    return emu::from_bits<T>(emu::warp_collective(mask, emu::to_bits(v), "__shfl_sync", file, line,
                                                  [=](int l) { return (l / width) * width + (src % width); }));
}
template <class T> static inline T emu_shfl_down(unsigned mask, T v, unsigned d, int width, const char* file, int line) {
    return emu::from_bits<T>(emu::warp_collective(mask, emu::to_bits(v), "__shfl_down_sync", file, line,
                                                  [=](int l) { return (l % width) + (int)d >= width ? l : l + (int)d; }));
}
template <class T> static inline T emu_shfl_up(unsigned mask, T v, unsigned d, int width, const char* file, int line) {
    return emu::from_bits<T>(emu::warp_collective(mask, emu::to_bits(v), "__shfl_up_sync", file, line,
                                                  [=](int l) { return (l % width) < (int)d ? l : l - (int)d; }));
}
static inline unsigned emu_ballot(unsigned mask, int pred, const char* what, const char* file, int line) {
    // every lane deposits its predicate; each then reads all 32 deposits of this generation
    int t = emu::cur_fiber, w = t >> 5;
    unsigned g = emu::warps[w].gen;
    emu::warp_collective(mask, pred ? 1 : 0, what, file, line, [](int l) { return l; });
    unsigned m = 0;
    for (int l = 0; l < 32; l++) if (emu::warps[w].buf[g & 1][l]) m |= 1u << l;
    return m;
}
#define __shfl_xor_sync(mask, v, lm, ...) emu_shfl_xor((mask), (v), (lm), emu_width(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_sync(mask, v, src, ...) emu_shfl((mask), (v), (src), emu_width(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_down_sync(mask, v, d, ...) emu_shfl_down((mask), (v), (d), emu_width(__VA_ARGS__), __FILE__, __LINE__)
#define __shfl_up_sync(mask, v, d, ...) emu_shfl_up((mask), (v), (d), emu_width(__VA_ARGS__), __FILE__, __LINE__)
static inline int emu_width(int w = 32) { return w; }
#define __ballot_sync(mask, pred) emu_ballot((mask), (pred), "__ballot_sync", __FILE__, __LINE__)
#define __any_sync(mask, pred) (emu_ballot((mask), (pred), "__any_sync", __FILE__, __LINE__) != 0u)
#define __all_sync(mask, pred) (emu_ballot((mask), (pred), "__all_sync", __FILE__, __LINE__) == 0xffffffffu)
static inline void* emu_dyn_smem() { return emu::dyn_smem; }

// ---------------------------------------------------------------------------------
// CUDA runtime API (the subset llmc and the trainer use); memory is host memory; streams follow
// the model chosen above (synchronous by default, lazy for run_trainer.sh)
static inline cudaError_t cudaGetLastError(void) { cudaError_t e = emu::last_error; emu::last_error = cudaSuccess; return e; }
static inline cudaError_t cudaPeekAtLastError(void) { return emu::last_error; }
static inline const char* cudaGetErrorString(cudaError_t e) {
    static char buf[600];
    snprintf(buf, sizeof buf, "emulated CUDA error %d (%s)", (int)e, emu::last_error_msg);
    return buf;
}
static inline cudaError_t cudaMalloc(void** p, size_t n) { *p = emu::dev_alloc(n); return *p ? cudaSuccess : cudaErrorMemoryAllocation; }
template <class T> static inline cudaError_t cudaMalloc(T** p, size_t n) { return cudaMalloc((void**)p, n); }
// cudaFree and cudaFreeHost synchronise the device first (as CUDA does)
static inline cudaError_t cudaFree(void* p) {
    if (!p) return cudaSuccess;
    emu::device_synchronize();
    return emu::dev_free(p) ? cudaSuccess : cudaErrorInvalidValue;
}
// pinned host memory: host memory, registered so that copies to and from it are queued
// like kernels (truly asynchronous); filled with 0xFF like device memory
static inline cudaError_t cudaMallocHost(void** p, size_t n) {
    *p = malloc(n ? n : 1);
    if (!*p) return cudaErrorMemoryAllocation;
    memset(*p, 0xFF, n ? n : 1);
    emu::pinned()[(char*)*p] = n;
    return cudaSuccess;
}
template <class T> static inline cudaError_t cudaMallocHost(T** p, size_t n) { return cudaMallocHost((void**)p, n); }
static inline cudaError_t cudaFreeHost(void* p) {
    if (!p) return cudaSuccess;
    emu::device_synchronize();
    auto it = emu::pinned().find((char*)p);
    if (it == emu::pinned().end()) { fprintf(stderr, "emu: cudaFreeHost of %p, which cudaMallocHost did not return\n", p); return cudaErrorInvalidValue; }
    emu::pinned().erase(it);
    free(p);
    return cudaSuccess;
}
namespace emu {
// FNV-1a hash of every byte copied device -> pageable host memory (the results a program
// reads; copies into pinned memory, such as activation offload, are left out):
// run_ladders.sh compares it between the fwd and rev schedules (equal hashes: every
// result the program downloaded is bitwise equal), run_trainer.sh between stream models
inline uint64_t d2h_hash = 0xcbf29ce484222325ull;
inline unsigned long long d2h_bytes = 0;
inline void d2h_note(const void* p, size_t n, cudaMemcpyKind k) {
    if (k != cudaMemcpyDeviceToHost || is_pinned(p, n)) return;
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) d2h_hash = (d2h_hash ^ b[i]) * 0x100000001b3ull;
    d2h_bytes += n;
}
inline cudaError_t api_error(cudaError_t e, const char* fmt, ...) {
    va_list ap; va_start(ap, fmt); vsnprintf(last_error_msg, sizeof last_error_msg, fmt, ap); va_end(ap);
    fprintf(stderr, "emu: %s\n", last_error_msg);
    return e;
}
// the direction of a copy: cudaMemcpyDefault is resolved from the pointers; an explicit
// kind must match them, and the device side must lie inside one cudaMalloc allocation
inline cudaError_t check_copy(void* d, const void* s, size_t n, cudaMemcpyKind* k, const char* what) {
    if (n == 0) return cudaSuccess;
    bool dd = touches_device(d), sd = touches_device(s);
    if (*k == cudaMemcpyDefault) *k = sd ? (dd ? cudaMemcpyDeviceToDevice : cudaMemcpyDeviceToHost) : (dd ? cudaMemcpyHostToDevice : cudaMemcpyHostToHost);
    bool want_dd = *k == cudaMemcpyHostToDevice || *k == cudaMemcpyDeviceToDevice;
    bool want_sd = *k == cudaMemcpyDeviceToHost || *k == cudaMemcpyDeviceToDevice;
    if (dd != want_dd || sd != want_sd)
        return api_error(cudaErrorInvalidValue, "%s of %zu bytes, kind %d: the destination %p is %s memory and the source %p is %s memory",
                         what, n, (int)*k, d, dd ? "device" : "host", s, sd ? "device" : "host");
    if (dd && !is_device(d, n)) return api_error(cudaErrorInvalidValue, "%s: %zu bytes at destination %p run past the end of its device allocation", what, n, d);
    if (sd && !is_device(s, n)) return api_error(cudaErrorInvalidValue, "%s: %zu bytes at source %p run past the end of its device allocation", what, n, s);
    return cudaSuccess;
}
inline cudaError_t check_set(void* p, size_t n, const char* what) {
    if (n == 0) return cudaSuccess;
    if (!is_device(p, n)) return api_error(cudaErrorInvalidValue, "%s: %zu bytes at %p are not inside one device allocation", what, n, p);
    return cudaSuccess;
}
inline bool valid_stream(cudaStream_t s) {
    if (!s) return true;
    for (CUstream_st* c : created_streams()) if (c == s) return !c->destroyed;
    return false;
}
}  // namespace emu
// a synchronous copy runs on the legacy stream and returns when it is done (except under
// EMU_H2D_ASYNC, above)
static inline cudaError_t cudaMemcpy(void* d, const void* s, size_t n, cudaMemcpyKind k) {
    cudaError_t e = emu::check_copy(d, s, n, &k, "cudaMemcpy");
    if (e != cudaSuccess) return e;
    if (emu::lazy_streams && emu::pageable_h2d_async && k == cudaMemcpyHostToDevice && !emu::is_pinned(s, n)) {
        emu::legacy_synchronize();
        auto buf = std::make_shared<std::vector<char>>((const char*)s, (const char*)s + n);
        emu::submit(0, [=]() { memmove(d, buf->data(), n); });
        return cudaSuccess;
    }
    emu::submit(0, [=]() { memmove(d, s, n); emu::d2h_note(d, n, k); });
    emu::legacy_synchronize();
    return cudaSuccess;
}
static inline cudaError_t cudaMemcpyAsync(void* d, const void* s, size_t n, cudaMemcpyKind k, cudaStream_t st = 0) {
    cudaError_t e = emu::check_copy(d, s, n, &k, "cudaMemcpyAsync");
    if (e != cudaSuccess) return e;
    if (!emu::valid_stream(st)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaMemcpyAsync on an invalid stream");
    bool to_host = k == cudaMemcpyDeviceToHost || k == cudaMemcpyHostToHost;
    bool from_host = k == cudaMemcpyHostToDevice || k == cudaMemcpyHostToHost;
    if (to_host && !emu::is_pinned(d, n)) {
        // to pageable memory: returns once the copy is done (its stream's earlier work first)
        emu::submit(st, [=]() { memmove(d, s, n); emu::d2h_note(d, n, k); });
        emu::flush_all(emu::stream_of(st));
    } else if (from_host && !emu::is_pinned(s, n)) {
        // from pageable memory: the source is staged now, the copy runs in stream order
        auto buf = std::make_shared<std::vector<char>>((const char*)s, (const char*)s + n);
        emu::submit(st, [=]() { memmove(d, buf->data(), n); });
    } else {
        emu::submit(st, [=]() { memmove(d, s, n); emu::d2h_note(d, n, k); });
    }
    return cudaSuccess;
}
static inline cudaError_t cudaMemset(void* p, int v, size_t n) {
    cudaError_t e = emu::check_set(p, n, "cudaMemset");
    if (e != cudaSuccess) return e;
    emu::submit(0, [=]() { memset(p, v, n); });  // asynchronous for device memory
    return cudaSuccess;
}
static inline cudaError_t cudaMemsetAsync(void* p, int v, size_t n, cudaStream_t st = 0) {
    cudaError_t e = emu::check_set(p, n, "cudaMemsetAsync");
    if (e != cudaSuccess) return e;
    if (!emu::valid_stream(st)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaMemsetAsync on an invalid stream");
    emu::submit(st, [=]() { memset(p, v, n); });
    return cudaSuccess;
}
static inline cudaError_t cudaMemset2DAsync(void* p, size_t pitch, int v, size_t w, size_t h, cudaStream_t st = 0) {
    if (w > pitch && h > 1) return cudaErrorInvalidValue;
    if (h > 0 && w > 0) {
        cudaError_t e = emu::check_set(p, (h - 1) * pitch + w, "cudaMemset2DAsync");
        if (e != cudaSuccess) return e;
    }
    if (!emu::valid_stream(st)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaMemset2DAsync on an invalid stream");
    emu::submit(st, [=]() { for (size_t r = 0; r < h; r++) memset((char*)p + r * pitch, v, w); });
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* s, unsigned flags) {
    static int next_id = 1;
    int id = next_id++;
    bool eager = false;
    for (int e : emu::eager_ids) eager |= e == id;
    *s = new CUstream_st{id, flags, false, false, eager, {}, 0, 0};
    emu::created_streams().push_back(*s);
    return cudaSuccess;
}
static inline cudaError_t cudaStreamCreate(cudaStream_t* s) { return cudaStreamCreateWithFlags(s, cudaStreamDefault); }
// the stream's pending work completes; the object is kept (events may still name it)
static inline cudaError_t cudaStreamDestroy(cudaStream_t s) {
    if (!s || !emu::valid_stream(s)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaStreamDestroy of an invalid or destroyed stream");
    emu::flush_all(s);
    s->destroyed = true;
    return cudaSuccess;
}
static inline cudaError_t cudaStreamSynchronize(cudaStream_t s) {
    if (!emu::valid_stream(s)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaStreamSynchronize of an invalid stream");
    if (emu::stream_use_hook) emu::stream_use_hook(emu::stream_of(s), "cudaStreamSynchronize");
    if (s) emu::flush_all(s);
    else emu::legacy_synchronize();
    return cudaSuccess;
}
static inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* e, unsigned) { *e = new CUevent_st{nullptr, 0, false, false}; return cudaSuccess; }
static inline cudaError_t cudaEventCreate(cudaEvent_t* e) { return cudaEventCreateWithFlags(e, cudaEventDefault); }
static inline cudaError_t cudaEventDestroy(cudaEvent_t e) {
    if (!e || e->destroyed) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaEventDestroy of an invalid or destroyed event");
    e->destroyed = true;  // kept: waits already issued hold their own copy of what to wait for
    return cudaSuccess;
}
// the event completes when the work issued on the stream so far has run
static inline cudaError_t cudaEventRecord(cudaEvent_t e, cudaStream_t s = 0) {
    if (!e || e->destroyed) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaEventRecord of an invalid or destroyed event");
    if (!emu::valid_stream(s)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaEventRecord on an invalid stream");
    if (emu::stream_use_hook) emu::stream_use_hook(emu::stream_of(s), "cudaEventRecord");
    e->s = emu::stream_of(s); e->seq = e->s->enq; e->recorded = true;
    return cudaSuccess;
}
static inline cudaError_t cudaEventSynchronize(cudaEvent_t e) {
    if (!e || e->destroyed) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaEventSynchronize of an invalid or destroyed event");
    if (e->recorded) emu::flush(e->s, e->seq);
    return cudaSuccess;
}
static inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t, cudaEvent_t) { *ms = 0.0f; return cudaSuccess; }
// cudaErrorNotReady while the work before the event's record has not run. A GPU makes
// progress while the host polls, but the lazy model runs work only when forced: so the
// first query of a pending record answers cudaErrorNotReady (a polling loop must cope with
// that) and the next one runs the stream up to the record, as a synchronisation would
// (llmc/parallel/comm.h's comm_synchronize polls an event this way between NCCL error checks)
static inline cudaError_t cudaEventQuery(cudaEvent_t e) {
    if (!e || e->destroyed) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaEventQuery of an invalid or destroyed event");
    if (!e->recorded || e->s->done >= e->seq) return cudaSuccess;
    static CUevent_st* polled = nullptr;  // the event whose record was last found pending
    static unsigned long long polled_seq = 0;
    if (polled != e || polled_seq != e->seq) { polled = e; polled_seq = e->seq; return cudaErrorNotReady; }
    emu::flush(e->s, e->seq);
    return cudaSuccess;
}
// later work on s waits for the event's most recent record (a no-op if it was never recorded)
static inline cudaError_t cudaStreamWaitEvent(cudaStream_t s, cudaEvent_t e, unsigned = 0) {
    if (!e || e->destroyed) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent on an invalid or destroyed event");
    if (!emu::valid_stream(s)) return emu::api_error(cudaErrorInvalidResourceHandle, "cudaStreamWaitEvent of an invalid stream");
    if (!e->recorded) return cudaSuccess;
    CUstream_st* es = e->s;
    unsigned long long seq = e->seq;
    emu::submit(s, [es, seq]() { emu::n_stream_waits++; emu::flush(es, seq); });
    return cudaSuccess;
}
static inline cudaError_t cudaDeviceSynchronize(void) { emu::device_synchronize(); return cudaSuccess; }
// an 80 GiB device; what is in use is what cudaMalloc handed out
static inline cudaError_t cudaMemGetInfo(size_t* f, size_t* t) {
    size_t used = 0;
    for (auto& kv : emu::allocs()) used += (kv.second.bytes + 255) / 256 * 256;
    *t = (size_t)80 << 30;
    *f = *t - used;
    return cudaSuccess;
}
static inline cudaError_t cudaGetDevice(int* d) { *d = 0; return cudaSuccess; }
static inline cudaError_t cudaSetDevice(int) { return cudaSuccess; }
static inline cudaError_t cudaGetDeviceCount(int* n) { *n = 1; return cudaSuccess; }
static inline cudaError_t cudaDeviceGetAttribute(int* v, cudaDeviceAttr a, int) {
    switch (a) {
        case cudaDevAttrMaxSharedMemoryPerBlockOptin: *v = emu::OPTIN_SMEM; return cudaSuccess;
        case cudaDevAttrMaxSharedMemoryPerBlock: *v = emu::DEFAULT_SMEM; return cudaSuccess;
        case cudaDevAttrMultiProcessorCount: *v = 132; return cudaSuccess;  // an H100 or H200 SXM
    }
    return cudaErrorInvalidValue;
}
static inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* p, int) {
    memset(p, 0, sizeof *p);
    strcpy(p->name, "HOST EMULATION (dev/emu)");
    p->totalGlobalMem = (size_t)80 << 30; p->sharedMemPerBlock = emu::DEFAULT_SMEM; p->sharedMemPerBlockOptin = emu::OPTIN_SMEM;
    p->multiProcessorCount = 132; p->major = 9; p->minor = 0; p->warpSize = 32; p->maxThreadsPerBlock = 1024;
    return cudaSuccess;
}
static inline cudaError_t cudaFuncSetAttribute(const void* f, cudaFuncAttribute a, int v) {
    if (a == cudaFuncAttributeMaxDynamicSharedMemorySize) {
        if (v < 0 || v > emu::OPTIN_SMEM) return cudaErrorInvalidValue;
        emu::func_max_dyn_smem()[f] = v;
    }
    if (a == cudaFuncAttributeNonPortableClusterSizeAllowed) {
        if (v != 0 && v != 1) return cudaErrorInvalidValue;
        emu::func_nonportable_cluster()[f] = v;
    }
    return cudaSuccess;
}
template <class T> static inline cudaError_t cudaFuncSetAttribute(T* f, cudaFuncAttribute a, int v) { return cudaFuncSetAttribute((const void*)f, a, v); }

// ---------------------------------------------------------------------------------
// cudaLaunchKernelEx (the C++ template form): the launch attribute
// cudaLaunchAttributeClusterDimension makes it a cluster launch; without it, it is a plain
// launch. A macro, so that the kernel's name (the text of the argument) reaches the launch
// as it does for <<<>>> (the kernel table, coverage, messages).
namespace emu {
inline const char* kernel_name_of(const char* text) {
    static std::map<std::string, std::string> names;  // the names must outlive the launch
    std::string t(text);
    int depth = 0;
    size_t e = 0;
    for (; e < t.size(); e++) {
        char c = t[e];
        if (c == '(' || c == '<' || c == '[') depth++;
        else if (c == ')' || c == '>' || c == ']') depth--;
        else if (c == ',' && depth == 0) break;
    }
    std::string n = t.substr(0, e);
    while (!n.empty() && (n.back() == ' ' || n.back() == '\t' || n.back() == '\n')) n.pop_back();
    size_t b = n.find_first_not_of(" \t\n&");
    n = b == std::string::npos ? "" : n.substr(b);
    auto it = names.find(n);
    if (it == names.end()) it = names.emplace(n, n).first;
    return it->second.c_str();
}
template <class... P, class... A>
inline cudaError_t launch_ex(const char* text, const char* file, int line, const cudaLaunchConfig_t* cfg, void (*k)(P...),
                             A&&... args) {
    const char* name = kernel_name_of(text);
    if (!cfg) { cur_kernel = name; return set_launch_error(cudaErrorInvalidValue, "cudaLaunchKernelEx without a configuration at %s:%d", file, line); }
    dim3 cluster(1, 1, 1);
    bool has_cluster = false;
    for (unsigned i = 0; i < cfg->numAttrs; i++) {
        const cudaLaunchAttribute& a = cfg->attrs[i];
        if (a.id == cudaLaunchAttributeIgnore) continue;
        if (a.id != cudaLaunchAttributeClusterDimension)
            error("cudaLaunchKernelEx of %s at %s:%d: launch attribute %d is not modeled by the emulator (only "
                  "cudaLaunchAttributeClusterDimension)", name, file, line, (int)a.id);
        cluster = dim3(a.val.clusterDim.x, a.val.clusterDim.y, a.val.clusterDim.z);
        has_cluster = true;
    }
    return launch_impl(name, file, line, cfg->gridDim, cfg->blockDim, cfg->dynamicSmemBytes, cfg->stream,
                       has_cluster ? &cluster : nullptr, k, std::forward<A>(args)...);
}
}  // namespace emu
#define cudaLaunchKernelEx(cfg, ...) ::emu::launch_ex(#__VA_ARGS__, __FILE__, __LINE__, (cfg), __VA_ARGS__)

// the cluster barrier's builtins (the relaxed arrive orders no memory on the GPU; the
// emulator has no weak memory, so it is the arrive)
#define __cluster_barrier_arrive() ::emu::cluster_arrive("__cluster_barrier_arrive", __FILE__, __LINE__)
#define __cluster_barrier_arrive_relaxed() ::emu::cluster_arrive("__cluster_barrier_arrive", __FILE__, __LINE__)
#define __cluster_barrier_wait() ::emu::cluster_wait("__cluster_barrier_wait", __FILE__, __LINE__)
