// Shim for host emulation (dev/emu): the part of CUDA's cooperative groups that the emulator
// models. this_cluster() (sm_90 thread-block clusters; see emu.h, "Thread-block clusters")
// and this_thread_block(). Every other cooperative-groups type or function is missing on
// purpose, so that a kernel using one fails to compile instead of running unmodeled.
// Barrier call sites are taken with __builtin_FILE/__builtin_LINE, so that divergence is
// checked by call site as for __syncthreads.
#pragma once
#include "cuda_runtime.h"

namespace cooperative_groups {

class thread_block {
  public:
    static void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { ::emu::syncthreads(file, line); }
    static unsigned thread_rank() { return threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z); }
    static unsigned num_threads() { return blockDim.x * blockDim.y * blockDim.z; }
    static unsigned size() { return num_threads(); }
    static dim3 group_index() { return dim3(blockIdx.x, blockIdx.y, blockIdx.z); }
    static dim3 thread_index() { return dim3(threadIdx.x, threadIdx.y, threadIdx.z); }
    static dim3 dim_threads() { return blockDim; }
};
inline thread_block this_thread_block() { return thread_block(); }

class cluster_group {
  public:
    struct arrival_token { unsigned phase; };
    static void sync(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { ::emu::cluster_sync(file, line); }
    // the split barrier: arrive, other work, then wait with the token
    static arrival_token barrier_arrive(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::cluster_arrive("cluster.barrier_arrive", file, line);
        return {::emu::cl_phase};
    }
    static void barrier_wait(arrival_token&&, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::cluster_wait("cluster.barrier_wait", file, line);
    }
    static void barrier_wait(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::cluster_wait("cluster.barrier_wait", file, line);
    }
    static unsigned block_rank(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::need_cluster("cluster.block_rank", file, line);
        return ::emu::cluster_rank_of(::emu::cur_block);
    }
    static unsigned num_blocks(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::need_cluster("cluster.num_blocks", file, line);
        return (unsigned)::emu::cluster_n;
    }
    static dim3 dim_blocks(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::need_cluster("cluster.dim_blocks", file, line);
        return ::emu::cluster_dim;
    }
    static dim3 block_index(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        ::emu::need_cluster("cluster.block_index", file, line);
        const dim3 c = ::emu::cluster_dim;
        return dim3(blockIdx.x % c.x, blockIdx.y % c.y, blockIdx.z % c.z);
    }
    static unsigned num_threads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        return num_blocks(file, line) * blockDim.x * blockDim.y * blockDim.z;
    }
    static unsigned size(const char* file = __builtin_FILE(), int line = __builtin_LINE()) { return num_threads(file, line); }
    static unsigned thread_rank(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        return block_rank(file, line) * (blockDim.x * blockDim.y * blockDim.z) + thread_block::thread_rank();
    }
    template <class T>
    static T* map_shared_rank(T* addr, unsigned rank, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        return (T*)::emu::cluster_map((const void*)addr, rank, file, line);
    }
    static unsigned query_shared_rank(const void* addr, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
        return ::emu::cluster_query_rank(addr, file, line);
    }
    static bool is_valid() { return ::emu::cluster_active; }
};
inline cluster_group this_cluster() { return cluster_group(); }

}  // namespace cooperative_groups
