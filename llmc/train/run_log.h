/*
The lines of a training run's log that are the same whatever the model: how its kernels
run, the memory plan's frame and the memory measured across ranks. The model's own
lines (its config, its loss) stay in its trainer.
*/
#pragma once
#include "../core/common.h"
#include "../kernels/kernels.h"
#include "../core/logger.h"
#include "../parallel/comm.h"
#include "../core/arena.h"
#include "activations.h"
#include "../parallel/parallel_args.h"
#ifdef _OPENMP
#include <omp.h>
#endif

// the model's tensors and their sizes (the ones of size 0, absent from this model, left out)
static inline void log_param_sizes(Logger* lg, const char* const* names, const size_t* sizes, int n) {
    logf_(lg, "parameters:");
    for (int i = 0; i < n; i++) if (sizes[i]) logf_(lg, " %s %zu", names[i], sizes[i]);
    logf_(lg, "\n");
}

// which attention the run uses (--attention resolved), how many threads it has and, in the
// CPU build, which library runs its matrix products
static inline void log_runtime(Logger* lg, const char* attention_flag) {
    logf_(lg, "attention: %s (--attention %s)\n", attention_impl_name(g_attention_impl), attention_flag);
#ifdef _OPENMP
    logf_(lg, "threads: %d (OpenMP)\n", omp_get_max_threads());
#endif
#ifdef LLMC_CPU
    logf_(lg, "matmul: %s\n", matmul_backend_name());
#endif
}

// The memory plan's head: whose plan it is (under TP the ranks' plans differ slightly, a
// hidden size split unevenly: rank 0's is the largest), both arenas, and what a GPU holds
// outside them. A trainer adds its own lines, then log_plan_tail.
static inline void log_plan_head(Logger* lg, const Comm* comm, const Arena* dev, const Arena* host) {
    logf_(lg, "memory plan%s (everything allocated before the first step):\n",
          comm->tp > 1 ? " of rank 0, the largest per rank" : comm->size > 1 ? " per rank" : "");
    log_plan(lg, dev, host);
    if (matmul_workspace_bytes())
        logf_(lg, "outside the arena: cuBLASLt workspace %.1f MiB, the CUDA context and library code (the driver's "
              "figure each step includes them)\n", matmul_workspace_bytes() / 1048576.0);
}

// the plan's end: what a layer (unit) keeps for backward, and the bytes a step sends by the
// trainer's formula (the first step prints the counted bytes beside them: step_loop.h)
static inline void log_plan_tail(Logger* lg, const ActPlan* acts, const char* unit, CommBytes cb) {
    act_plan_log(lg, acts, unit);
    comm_bytes_log(lg, "comm per step, predicted (bytes this rank sends)", cb.b);
}

// the peak memory measured so far on the rank that has the most (a collective)
static inline size_t peak_bytes_all_ranks(Comm* comm) {
    double measured = (double)dev_peak_bytes_measured();
    comm_host_all_reduce(comm, GROUP_WORLD, &measured, 1, COMM_MAX);
    return (size_t)measured;
}
