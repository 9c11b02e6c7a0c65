// Host model (dev/emu) of llmc/kernels/tensorcore.cuh: transform.py replaces that file by this
// one (the real one is inline PTX). It implements the DOCUMENTED per-lane fragment layouts
// of mma.m16n8k16 (.bf16, fp32 accumulate) and ldmatrix (PTX ISA), so that a kernel that
// assumes a wrong layout (a wrong row of d[1], a missing .trans, swapped a[1]/a[2])
// computes wrong numbers here as it would on the GPU. The layouts are written out in
// llmc/kernels/tensorcore.cuh. What it checks and what it cannot: dev/emu/README.md, "Tensor
// cores: the mma.sync / ldmatrix / cp.async model".
//
// Model
//   * tc_mma_bf16_16816, tc_ldmatrix_* are warp collectives, like a shuffle: all 32 lanes
//     alive and at the same call site (the wrappers are macros here, so that the site is
//     the kernel's line), or it is an error. Each lane holds only ITS registers (unlike
//     the wmma shim), so the mapping matters.
//   * mma: the 32 lanes' a, b, d registers are assembled into A (16x16), B (16x8) and
//     C (16x8) by the documented layout; D = C + A B with fp32 sums of exact bf16 x bf16
//     products in the fixed order k = 0..15 (as the wmma shim, include/mma.h: the
//     hardware's internal order and rounding are unspecified and NOT reproduced); D is
//     scattered back by the same layout.
//   * ldmatrix: every row address (lanes 0..31 for x4, 0..15 for x2) must be 16-byte
//     aligned and lie in shared memory (static or dynamic), or it is an error. A lane's
//     row is read when that lane ARRIVES, before the other lanes necessarily ran, so a
//     row written by another thread without a barrier in between reads stale data or
//     poison (NaN), as the wmma shim does for load_matrix_sync.
//   * cp.async (per thread, not a collective): the destination must be 16-byte aligned
//     in shared memory; a valid copy's source must be 16-byte aligned and lie inside one
//     cudaMalloc allocation (so an out-of-bounds read at a ragged tile edge is an error,
//     not a silent read of a guard zone). The destination is POISONED (0xFF: NaN in bf16)
//     at the call, and the copy (the source read and the destination written) is queued:
//     it LANDS at a random point between the call and the tc_cp_async_wait<N> that
//     completes its group (groups as committed by this thread; copies not yet committed
//     are not waited for, as in PTX), as the hardware may complete it anywhere in that
//     window. The points are the model's events (any thread's cp.async, commit, wait,
//     ldmatrix, mma, recorded shared store or load); the delay is drawn log-uniform over
//     0 .. 65535 events (1 copy in 8 lands only at its wait), from a generator seeded per
//     block by the launch count, the block and the schedule, so a run is reproducible and
//     the fwd and rev schedules see different landing points (EMU_CPASYNC_SEED=n varies
//     them further). So a read before the wait, or by another thread before its barrier,
//     sees NaN or the data depending on the seed; a store into a destination between the
//     call and the wait survives or not depending on the seed (the fwd/rev comparison
//     shows it); a source written after the call is read late; a buffer that is refilled
//     while another warp still reads it reads NaN. A block that ends with copies never
//     waited for is an error (a missing wait, or a prefetch nobody uses). In a cluster
//     launch every block of the running cluster has all of this state (copies, groups,
//     event clock, generator) to itself, since the blocks interleave at cluster barriers
//     with copies in flight.
//   * Bank conflicts (include/smem_banks.h): ldmatrix's rows, cp.async's destinations and
//     the stores and casted loads that transform.py instruments (EMU_SMEM_STORE /
//     EMU_SMEM_LOAD) are counted per kernel and call site.
#pragma once
#define EMU_SHIM_TENSORCORE 1
#include "cuda_runtime.h"
#include "cuda_bf16.h"
#include "smem_banks.h"
#include <stdint.h>
#include <vector>
#include <algorithm>
#include <functional>

typedef uint32_t tc_u32;  // two bf16, the lower column index in the low 16 bits

namespace emu {
namespace tc {

inline float lo(tc_u32 x) { return (float)__ushort_as_bfloat16((unsigned short)(x & 0xffffu)); }
inline float hi(tc_u32 x) { return (float)__ushort_as_bfloat16((unsigned short)(x >> 16)); }

// [p, p + n) inside the block's shared memory (the dynamic buffer, the static section, or a
// static __shared__ variable outside it: EMU_STATIC_SHARED in emu.h)?
inline bool in_smem(const void* p, size_t n) {
    const char* c = (const char*)p;
    if (dyn_smem && c >= dyn_smem && c + n <= dyn_smem + dyn_smem_bytes) return true;
    if ((uintptr_t)__start_emu_smem && c >= __start_emu_smem && c + n <= __stop_emu_smem) return true;
    return !::emu::extra_smem().empty() && ::emu::in_extra_smem(p, n);
}

inline void cp_event();  // below: an event, at which queued cp.async copies may land

struct MmaOp { float* d; const tc_u32* a; const tc_u32* b; };
inline const MmaOp& mma_of(const uint64_t* dep, int lane) { return *(const MmaOp*)(uintptr_t)dep[lane]; }

inline void mma(float d[4], const tc_u32 a[4], const tc_u32 b[2], const char* file, int line) {
    MmaOp op{d, a, b};
    cp_event();
    ::emu::warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&op, "tc_mma_bf16_16816", file, line, [](int l) { return l; },
                           [&](const uint64_t* dep) {
                               float A[16][16], B[16][8], C[16][8];
                               for (int l = 0; l < 32; l++) {
                                   const MmaOp& o = mma_of(dep, l);
                                   const int g = l >> 2, t = l & 3;
                                   A[g][2 * t] = lo(o.a[0]);         A[g][2 * t + 1] = hi(o.a[0]);
                                   A[g + 8][2 * t] = lo(o.a[1]);     A[g + 8][2 * t + 1] = hi(o.a[1]);
                                   A[g][2 * t + 8] = lo(o.a[2]);     A[g][2 * t + 9] = hi(o.a[2]);
                                   A[g + 8][2 * t + 8] = lo(o.a[3]); A[g + 8][2 * t + 9] = hi(o.a[3]);
                                   B[2 * t][g] = lo(o.b[0]);         B[2 * t + 1][g] = hi(o.b[0]);
                                   B[2 * t + 8][g] = lo(o.b[1]);     B[2 * t + 9][g] = hi(o.b[1]);
                                   C[g][2 * t] = o.d[0];             C[g][2 * t + 1] = o.d[1];
                                   C[g + 8][2 * t] = o.d[2];         C[g + 8][2 * t + 1] = o.d[3];
                               }
                               float D[16][8];
                               for (int i = 0; i < 16; i++)
                                   for (int j = 0; j < 8; j++) {
                                       float acc = C[i][j];
                                       for (int k = 0; k < 16; k++) acc += A[i][k] * B[k][j];  // exact products
                                       D[i][j] = acc;
                                   }
                               for (int l = 0; l < 32; l++) {
                                   float* o = mma_of(dep, l).d;
                                   const int g = l >> 2, t = l & 3;
                                   o[0] = D[g][2 * t]; o[1] = D[g][2 * t + 1];
                                   o[2] = D[g + 8][2 * t]; o[3] = D[g + 8][2 * t + 1];
                               }
                           });
}

// what a lane deposits at an ldmatrix: where its registers go, and the row it supplies
// (read at its arrival)
struct LdOp { tc_u32* r; unsigned short row[8]; uintptr_t addr; };
template <int NM, bool TRANS>
inline void ldmatrix(tc_u32* r, const void* row_addr, const char* what, const char* file, int line) {
    const int lane = ::emu::cur_fiber & 31;
    LdOp op{r, {0}, (uintptr_t)row_addr};
    cp_event();
    if (lane < 8 * NM) {  // x2: the addresses of lanes 16..31 are ignored
        if ((uintptr_t)row_addr % 16 != 0)
            ::emu::error("%s at %s:%d: lane %d's row address %p is not 16-byte aligned", what, file, line, lane, row_addr);
        if (!in_smem(row_addr, 16))
            ::emu::error("%s at %s:%d: lane %d's row address %p (16 bytes) is not in shared memory", what, file, line, lane,
                         row_addr);
        memcpy(op.row, row_addr, 16);
    }
    ::emu::warp_collective(0xffffffffu, (uint64_t)(uintptr_t)&op, what, file, line, [](int l) { return l; },
                           [&](const uint64_t* dep) {
                               uintptr_t rows[32];
                               for (int l = 0; l < 8 * NM; l++) rows[l] = ((const LdOp*)(uintptr_t)dep[l])->addr;
                               ::emu::banks::ldmatrix(NM, rows, what, file, line);
                               auto row_of = [&](int i, int j) { return ((const LdOp*)(uintptr_t)dep[i * 8 + j])->row; };
                               for (int l = 0; l < 32; l++) {
                                   tc_u32* o = ((const LdOp*)(uintptr_t)dep[l])->r;
                                   const int g = l >> 2, t = l & 3;
                                   for (int i = 0; i < NM; i++) {
                                       unsigned lo16, hi16;
                                       if (!TRANS) {  // matrix i, row g, cols 2t and 2t+1
                                           lo16 = row_of(i, g)[2 * t];
                                           hi16 = row_of(i, g)[2 * t + 1];
                                       } else {       // its transpose: rows 2t and 2t+1 of column g
                                           lo16 = row_of(i, 2 * t)[g];
                                           hi16 = row_of(i, 2 * t + 1)[g];
                                       }
                                       o[i] = (tc_u32)lo16 | ((tc_u32)hi16 << 16);
                                   }
                               }
                           });
}

// cp.async: copies in flight, landing at random events (see the header)
struct Copy {
    unsigned char* dst;
    const unsigned char* src;  // nullptr: zero fill (src-size 0)
    long group;                // -1: not committed yet
    bool landed;
};
struct CpBlock {  // the vectors keep their capacity from block to block
    std::vector<Copy> copies;                   // this block's, in issue order
    std::vector<std::vector<uint32_t>> pending; // per thread: its copies not yet waited for
    std::vector<long> committed;                // per thread: groups committed
    std::vector<std::pair<uint64_t, uint32_t>> due;  // (event, copy), a min-heap
    uint64_t now = 0, next = ~0ull, rng = 0;    // next: the earliest due event (~0: none)
    bool seeded = false;
};
// one state per block that can be running: the blocks of a cluster run together, and
// each one's copies land only at its own events, at its waits and at its end (a copy into
// the static section must land while its block's copy of the section is loaded)
inline CpBlock cp_blks[::emu::MAX_CLUSTER];
inline CpBlock& cpb() { return cp_blks[::emu::cluster_cur < 0 ? 0 : ::emu::cluster_cur]; }
inline uint64_t splitmix(uint64_t& x) {
    uint64_t z = (x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}
// seeded at the block's first event: the launch, the block, the schedule (and EMU_CPASYNC_SEED)
inline void cp_seed(CpBlock& b) {
    static const uint64_t base = getenv("EMU_CPASYNC_SEED") ? strtoull(getenv("EMU_CPASYNC_SEED"), nullptr, 10) : 0;
    uint64_t x = base * 0x100000001b3ull ^ ((uint64_t)::emu::n_launches << 32) ^
                 ((uint64_t)::emu::cur_block.x | ((uint64_t)::emu::cur_block.y << 20) | ((uint64_t)::emu::cur_block.z << 40)) ^
                 (::emu::sched_reverse ? 0x5bd1e995ull << 13 : 0);
    splitmix(x);
    b.rng = x;
    if (b.pending.size() < (size_t)::emu::n_threads) b.pending.resize(::emu::n_threads);
    b.committed.assign(::emu::n_threads, 0);
    b.seeded = true;
}
inline void cp_land(Copy& c) {
    if (c.landed) return;
    if (c.src) memcpy(c.dst, c.src, 16);
    else memset(c.dst, 0, 16);
    c.landed = true;
}
inline void cp_event() {
    CpBlock& b = cpb();
    if (++b.now < b.next) return;  // every lane's every ldmatrix and mma passes here
    auto later = std::greater<std::pair<uint64_t, uint32_t>>();
    while (!b.due.empty() && b.due.front().first <= b.now) {
        cp_land(b.copies[b.due.front().second]);
        std::pop_heap(b.due.begin(), b.due.end(), later);
        b.due.pop_back();
    }
    b.next = b.due.empty() ? ~0ull : b.due.front().first;
}

// a block must not end with copies in flight; clears the state for the next block, and
// counts the block's bank conflicts
inline void cp_block_end() {
    CpBlock& b = cpb();
    ::emu::banks::block_end();
    size_t bad = 0, n_bad = 0;
    for (size_t i = 0; i < b.pending.size(); i++) {
        if (!b.pending[i].empty() && !n_bad) { bad = i; n_bad = b.pending[i].size(); }
        b.pending[i].clear();
    }
    b.copies.clear();
    b.committed.clear();
    b.due.clear();
    b.now = 0;
    b.next = ~0ull;
    b.seeded = false;
    if (n_bad)
        ::emu::error("thread %zu of the block ended with %zu cp.async copies never completed by a tc_cp_async_wait "
                     "(a missing wait, or a copy nobody reads)", bad, n_bad);
}
struct CpHookInstall { CpHookInstall() { ::emu::block_end_hook = cp_block_end; } };
inline CpHookInstall cp_hook_install;

inline void cp_async_16(void* dst, const void* src, bool valid, const char* file, int line) {
    if ((uintptr_t)dst % 16 != 0)
        ::emu::error("tc_cp_async_16 at %s:%d: destination %p is not 16-byte aligned", file, line, dst);
    if (!in_smem(dst, 16))
        ::emu::error("tc_cp_async_16 at %s:%d: destination %p (16 bytes) is not in shared memory", file, line, dst);
    if (valid) {
        if ((uintptr_t)src % 16 != 0)
            ::emu::error("tc_cp_async_16 at %s:%d: source %p is not 16-byte aligned", file, line, src);
        if (!::emu::is_device(src, 16))
            ::emu::error("tc_cp_async_16 at %s:%d: source %p (16 bytes) is not inside one device allocation "
                         "(out of bounds?)", file, line, src);
    }
    CpBlock& b = cpb();
    if (!b.seeded) cp_seed(b);
    ::emu::banks::record(::emu::banks::CP_ASYNC, file, line, dst, 16);
    memset(dst, 0xFF, 16);  // in flight: poison until it lands
    const uint32_t i = (uint32_t)b.copies.size();
    b.copies.push_back({(unsigned char*)dst, valid ? (const unsigned char*)src : nullptr, -1, false});
    b.pending[::emu::cur_fiber].push_back(i);
    const uint64_t r = splitmix(b.rng);
    if (r % 8 != 0) {  // else only at its wait; the delay log-uniform, so that short and long windows both see copies land
        const unsigned bits = (unsigned)((r >> 3) % 17);
        const uint64_t at = b.now + (splitmix(b.rng) & ((1ull << bits) - 1));
        b.due.push_back({at, i});
        std::push_heap(b.due.begin(), b.due.end(), std::greater<std::pair<uint64_t, uint32_t>>());
        if (at < b.next) b.next = at;
    }
    cp_event();
}
inline void cp_commit() {
    CpBlock& b = cpb();
    if (!b.seeded) cp_seed(b);
    const int t = ::emu::cur_fiber;
    for (uint32_t i : b.pending[t])
        if (b.copies[i].group < 0) b.copies[i].group = b.committed[t];
    b.committed[t]++;  // an empty group is a group too (PTX)
    cp_event();
}
inline void cp_wait(int n) {
    CpBlock& b = cpb();
    if (!b.seeded) cp_seed(b);
    const int t = ::emu::cur_fiber;
    std::vector<uint32_t> keep;
    for (uint32_t i : b.pending[t]) {
        Copy& c = b.copies[i];
        if (c.group >= 0 && c.group < b.committed[t] - n) cp_land(c);  // the rest, in issue order
        else keep.push_back(i);
    }
    b.pending[t].swap(keep);
    cp_event();
}

// the shared-memory stores and casted loads of the files that use these wrappers, as
// dev/emu/transform.py rewrites them: counted for bank conflicts when they touch shared
// memory (registers and global memory pass through), and an event for cp.async
template <class T>
inline T* smem_access(T* p, int kind, const char* file, int line) {
    if (::emu::cur_fiber >= 0 && in_smem((const void*)p, sizeof(T))) {
        ::emu::banks::record(kind, file, line, (const void*)p, (unsigned)sizeof(T));
        cp_event();
    }
    return p;
}

}  // namespace tc
}  // namespace emu

static inline tc_u32 tc_pack_bf16x2(float lo, float hi) {
    return (tc_u32)__bfloat16_as_ushort(__float2bfloat16_rn(lo)) | ((tc_u32)__bfloat16_as_ushort(__float2bfloat16_rn(hi)) << 16);
}
template <int N>
static inline void tc_cp_async_wait() {
    static_assert(N >= 0, "tc_cp_async_wait<N>: N >= 0");
    ::emu::tc::cp_wait(N);
}
static inline void tc_cp_async_commit() { ::emu::tc::cp_commit(); }

// call sites recorded (file:line), like those of the other warp collectives
#define tc_mma_bf16_16816(d, a, b) ::emu::tc::mma((d), (a), (b), __FILE__, __LINE__)
#define tc_ldmatrix_x4(r, p) ::emu::tc::ldmatrix<4, false>((r), (p), "tc_ldmatrix_x4", __FILE__, __LINE__)
#define tc_ldmatrix_x4_trans(r, p) ::emu::tc::ldmatrix<4, true>((r), (p), "tc_ldmatrix_x4_trans", __FILE__, __LINE__)
#define tc_ldmatrix_x2(r, p) ::emu::tc::ldmatrix<2, false>((r), (p), "tc_ldmatrix_x2", __FILE__, __LINE__)
#define tc_ldmatrix_x2_trans(r, p) ::emu::tc::ldmatrix<2, true>((r), (p), "tc_ldmatrix_x2_trans", __FILE__, __LINE__)
#define tc_cp_async_16(dst, src, valid) ::emu::tc::cp_async_16((dst), (src), (valid), __FILE__, __LINE__)
// what dev/emu/transform.py makes of a store "lvalue = x;" and a load "*(T*)(p)" in the files
// that use the wrappers above
#define EMU_SMEM_STORE(lv) (*::emu::tc::smem_access(&(lv), ::emu::banks::STORE, __FILE__, __LINE__))
#define EMU_SMEM_LOAD(p) ::emu::tc::smem_access((p), ::emu::banks::LOAD, __FILE__, __LINE__)
