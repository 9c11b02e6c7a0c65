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
#include "memory_flags.h"
#include "../parallel/parallel_args.h"
#include "../parallel/param_layout.h"
#ifdef _OPENMP
#include <omp.h>
#endif

// the model's tensors and their sizes (the ones of size 0, absent from this model, left out)
static inline void log_param_sizes(Logger* lg, const ParamSpec* spec, const size_t* sizes, int n) {
    logf_(lg, "parameters:");
    for (int i = 0; i < n; i++) if (sizes[i]) logf_(lg, " %s %zu", spec[i].name, sizes[i]);
    logf_(lg, "\n");
}

// the memory flags as the plan resolved them (n_offload of the unit's layers offloaded); with_ce: the
// model has an output head (--ce-chunks); grads: how micro-steps sum the gradients (NULL: not said)
static inline void log_memory_flags(Logger* lg, const MemoryFlags* f, int n_offload, const char* units, int with_ce,
                                    const char* grads) {
    logf_(lg, "memory flags: --ffn-chunks %d --ffn-chunk-dim %s", f->ffn_chunks, FFN_CHUNK_DIM_NAMES[f->ffn_chunk_seq]);
    if (with_ce) logf_(lg, " --ce-chunks %d", f->ce_chunks);
    logf_(lg, " --offload-act %d (%d %s) --recompute %d", f->offload_act, n_offload, units, f->recompute);
    if (grads) logf_(lg, " | gradients summed over micro-steps in %s", grads);
    logf_(lg, "\n");
}

// which attention the run uses (--attention resolved; auto_why: what auto's choice depended on,
// or ""), how many threads it has and, in the CPU build, which library runs its matrix products
static inline void log_runtime(Logger* lg, const char* attention_flag, const char* auto_why) {
    char cudnn[160], ranked[400];
    attention_cudnn_describe(cudnn, sizeof(cudnn));
    attention_auto_describe(ranked, sizeof(ranked));
    logf_(lg, "attention: %s (--attention %s%s)\n", attention_impl_name(g_attention_impl), attention_flag, cudnn);
    if (ranked[0]) logf_(lg, "  %s\n", ranked);
    if (auto_why[0]) logf_(lg, "  %s", auto_why);
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
    char whose[96] = "";
    if (comm->pp > 1 || comm->rank > 0)  // (--plan-rank; the stages' plans differ: the summary below has them all)
        snprintf(whose, sizeof(whose), " of rank %d%s", comm->rank, comm->pp > 1 ? "" : " (--plan-rank)");
    if (comm->pp > 1) snprintf(whose + strlen(whose), sizeof(whose) - strlen(whose), " (pipeline stage %d)", comm->pp_rank);
    logf_(lg, "memory plan%s (everything allocated before the first step):\n",
          whose[0] ? whose : comm->tp > 1 ? " of rank 0, the largest per rank" : comm->size > 1 ? " per rank" : "");
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

// What a model's unit keeps for backward at long sequences under each memory flag that
// changes it (--plan-only's table: the plan itself is for this run's N only). unit_bytes
// gives one unit's saved bytes for the flags and N tokens a sample; `sample` names what N
// counts the tokens of, n_now its own N.
typedef size_t (*UnitActBytes)(const void* ctx, const MemoryFlags* f, size_t N);

static inline void log_activation_table(Logger* lg, const char* unit, const char* sample, int L, int B, int n_now,
                                        UnitActBytes unit_bytes, const void* ctx) {
    static const struct { const char* name; MemoryFlags f; } rows[] = {
        {"no flag", memory_flags(1, 0)}, {"--ffn-chunks 4", memory_flags(4, 0)}, {"--recompute 1", memory_flags(1, 1)},
        {"--ffn-chunks 4 --recompute 1", memory_flags(4, 1)}, {"--recompute 2", memory_flags(1, 2)}};
    char all[64];
    snprintf(all, sizeof(all), "all %ss", unit);
    logf_(lg, "saved activations per %s and for all %d %ss (GiB), B=%d, at token counts N (this %s: %d):\n", unit, L,
          unit, B, sample, n_now);
    logf_(lg, "| %-30s |", "flags \\ N");
    for (int e = 14; e <= 17; e++) logf_(lg, " N=%-6d per %s | %12s |", 1 << e, unit, all);
    logf_(lg, "\n");
    for (size_t r = 0; r < sizeof(rows) / sizeof(rows[0]); r++) {
        logf_(lg, "| %-30s |", rows[r].name);
        for (int e = 14; e <= 17; e++) {
            double u = (double)unit_bytes(ctx, &rows[r].f, (size_t)1 << e) / 1073741824.0;
            logf_(lg, " %18.3f | %12.2f |", u, u * L);
        }
        logf_(lg, "\n");
    }
}

// the peak memory measured so far on the rank that has the most (a collective). stop (NULL:
// none): in, this rank's stop signal (0: none); out, the largest over the ranks, so that every
// rank stops after the same step (llmc/core/signals.h); a second value of the same all-reduce
// rather than a collective of its own every step.
static inline size_t peak_bytes_all_ranks(Comm* comm, int* stop) {
    double v[2] = {(double)dev_peak_bytes_measured(), stop ? (double)*stop : 0.0};
    comm_host_all_reduce(comm, GROUP_WORLD, v, stop ? 2 : 1, COMM_MAX);
    if (stop) *stop = (int)v[1];
    return (size_t)v[0];
}
