/*
The parallel flags both trainers share, one definition for both: the communicator
(--comm, --comm-timeout), ZeRO-1 (--zero), the optimizer on the host (--offload-optim), the fp32 gradient accumulator
(--fp32-grad-accum), the plan of a cluster without one (--dp with --plan-only), and
tensor parallelism (--tp, --tp-mode, --tp-recompute-allgather) and context parallelism
(--cp, --cp-mode, --cp-ulysses) where the trainer has them, and pipeline parallelism (--pp,
--pp-schedule, --pp-virtual, --pp-layers). The world is dp x pp x cp x tp, tp innermost
(llmc/parallel/comm.h).
*/
#pragma once
#include "../core/flags.h"
#include "comm.h"
#include "../core/logger.h"
#include "pipeline_schedule.h"

// --tp-mode: allreduce, or reducescatter (sequence parallelism); --comm
typedef enum { TP_ALLREDUCE = 0, TP_REDUCESCATTER = 1 } TpMode;
[[maybe_unused]] static const char* const TP_MODE_NAMES[3] = {"allreduce", "reducescatter", NULL};
typedef enum { COMM_FLAG_NCCL = 0, COMM_FLAG_MPI = 1 } CommFlag;
[[maybe_unused]] static const char* const COMM_FLAG_NAMES[3] = {"nccl", "mpi", NULL};

typedef struct {
    int tp, tp_regather, zero, zero_reshard, dp_plan, fp32_grad_accum, cp, cp_ulysses, offload_optim;
    int plan_rank;     // --plan-rank with --plan-only: whose plan to print in full (another stage's, TP rank's)
    float comm_timeout;
    float startup_timeout;  // MPI start-up's own bound (start-up across many nodes can outlast a collective's)
    int comm_backend;  // CommFlag
    int tp_mode;       // TpMode
    int cp_mode;       // CpMode as given (parallel_cp_resolve: as it runs)
    int pp, pp_virtual, pp_schedule;  // pipeline stages, model chunks per stage, PpScheduleKind
    const char* pp_layers;            // --pp-layers "a,b,...": layers per stage (NULL: as even as possible)
} ParallelArgs;

static inline ParallelArgs parallel_args_default(void) {
    ParallelArgs p;
    memset(&p, 0, sizeof(p));
    p.tp = 1; p.tp_regather = 1; p.zero_reshard = 1; p.fp32_grad_accum = -1; p.comm_timeout = 300.0f; p.startup_timeout = 300.0f; p.tp_mode = TP_ALLREDUCE;
    p.cp = 1; p.cp_mode = CP_RING; p.cp_ulysses = 0;
    p.pp = 1; p.pp_virtual = 1; p.pp_schedule = PP_SCHEDULE_1F1B; p.pp_layers = NULL;
#ifdef LLMC_CPU
    p.comm_backend = COMM_FLAG_MPI;
#else
    p.comm_backend = COMM_FLAG_NCCL;
#endif
    return p;
}

// appends the entries to out (the TP ones when tp_help names what --tp must divide, the
// CP ones when cp_help names what --cp must divide); returns how many
static inline int parallel_flags(Flag* out, ParallelArgs* p, const char* tp_help, const char* cp_help) {
    const Flag f[] = {
        {"zero", 'i', &p->zero, "ZeRO stage over the DP ranks: 1 shards master weights and AdamW state, 2 the layers' "
         "gradients too, 3 the layers' parameters too (gathered where each layer runs)"},
        {"zero-reshard", 'i', &p->zero_reshard, "--zero 3: 1 gathers a layer's parameters again for its backward (default); "
         "0 keeps them from its forward to its backward (every layer's held at once: no second gather)"},
        {"offload-optim", 'i', &p->offload_optim, "1: this rank's master weights and AdamW state in pinned host memory, "
                                                  "AdamW on the CPU (any --zero)"},
        {"comm", 'e', &p->comm_backend, "nccl | mpi: how a CUDA build's ranks talk (mpi: staged via host, GPUs may be shared)",
         COMM_FLAG_NAMES},
        {"comm-timeout", 'f', &p->comm_timeout, "seconds a collective may wait before the job is aborted (default 300)"},
        {"startup-timeout", 'f', &p->startup_timeout, "seconds MPI start-up (every rank arriving, the flags' check, the "
                                                      "groups) may take before the job is ended (default 300)"},
        {"dp", 'i', &p->dp_plan, "with --plan-only: plan for this many DP ranks (a run takes dp from the launcher)"},
        {"plan-rank", 'i', &p->plan_rank, "with --plan-only: print this rank's plan in full (default 0; the others are "
                                          "summarised), e.g. the last pipeline stage's"},
        {"fp32-grad-accum", 'i', &p->fp32_grad_accum, "1: sum micro-steps' gradients in fp32 (+4 B/param), 0: in the "
                                                       "gradient buffer; default -1 = on when bf16 and > 1 micro-step"},
        {"tp", 'i', &p->tp, tp_help},
        {"tp-mode", 'e', &p->tp_mode, "allreduce | reducescatter (sequence parallelism: 1/tp of the tokens per rank in the residual stream)",
         TP_MODE_NAMES},
        {"tp-recompute-allgather", 'i', &p->tp_regather, "1: backward gathers the norm outputs again (default); 0: keep the gathered copies"},
        {"pp", 'i', &p->pp, "pipeline stages: the layers split into pp stages of consecutive ranks' groups (world = dp x pp "
                            "x cp x tp); a step's micro-batches (--total-batch) flow through them (default 1)"},
        {"pp-schedule", 'e', &p->pp_schedule, "1f1b (default) | interleaved (with --pp-virtual V chunks a stage)",
         PP_SCHEDULE_NAMES},
        {"pp-virtual", 'i', &p->pp_virtual, "--pp-schedule interleaved: model chunks per stage (default 1)"},
        {"pp-layers", 's', &p->pp_layers, "layers per stage (per chunk under interleaving), comma-separated, e.g. 3,5 "
                                          "(default: as even as possible, the first stages one more)"},
    };
    const Flag fc[] = {
        {"cp", 'i', &p->cp, cp_help},
        {"cp-mode", 'e', &p->cp_mode, "ring (default) | ulysses | hybrid: how attention sees the tokens of the other CP ranks",
         CP_MODE_NAMES},
        {"cp-ulysses", 'i', &p->cp_ulysses, "with --cp-mode hybrid: the Ulysses ways inside each ring member (divides --cp)"},
    };
    int n = (int)(sizeof(f) / sizeof(f[0])) - (tp_help ? 0 : 3 + 4);
    memcpy(out, f, (size_t)n * sizeof(Flag));
    if (cp_help) {
        memcpy(out + n, fc, sizeof(fc));
        n += (int)(sizeof(fc) / sizeof(fc[0]));
    }
    return n;
}

// The mode and the Ulysses ways U of the CP group as they run, resolved here once: U = cp
// (ulysses), 1 (ring), --cp-ulysses (hybrid); a hybrid of one way is a ring, of cp ways
// Ulysses, and one member runs as a ring.
static inline CpMode parallel_cp_resolve(const ParallelArgs* p, int* U) {
    *U = p->cp_mode == CP_ULYSSES ? p->cp : p->cp_mode == CP_HYBRID ? p->cp_ulysses : 1;
    if (p->cp == 1 || *U == 1) return CP_RING;
    return p->cp / *U == 1 ? CP_ULYSSES : CP_HYBRID;
}

// how the values relate (the ranges are llmc/core/flags.h's, the names the parser's)
static inline void parallel_args_validate(const ParallelArgs* p) {
    if (p->cp_mode == CP_HYBRID && (p->cp_ulysses < 1 || p->cp % p->cp_ulysses != 0))
        FAIL("--cp-mode hybrid needs --cp-ulysses U dividing --cp %d (U-way Ulysses inside, cp/U-way ring across), got %d",
             p->cp, p->cp_ulysses);
    if (p->cp_mode != CP_HYBRID && p->cp_ulysses != 0)
        FAIL("--cp-ulysses %d is for --cp-mode hybrid (this run: %s)", p->cp_ulysses, CP_MODE_NAMES[p->cp_mode]);
    if (p->pp < 1) FAIL("--pp must be >= 1 (got %d)", p->pp);
    if (p->pp_virtual < 1) FAIL("--pp-virtual must be >= 1 (got %d)", p->pp_virtual);
    if (p->pp_schedule == PP_SCHEDULE_1F1B && p->pp_virtual != 1)
        FAIL("--pp-virtual %d is for --pp-schedule interleaved (this run: 1f1b, one chunk a stage)", p->pp_virtual);
    if (p->pp == 1 && (p->pp_schedule != PP_SCHEDULE_1F1B || p->pp_layers))
        FAIL("--pp-schedule and --pp-layers are for --pp > 1 (this run has one stage)");
}

// The world from the launcher (mpirun, srun; one process: a world of one), before any
// group is formed: a run compares its ranks' flags on it first (llmc/train/same_config.h).
// --plan-only has none: its world is made whole by parallel_comm_groups.
static inline void parallel_comm_world(Comm* comm, const ParallelArgs* p, int plan_only) {
    if (plan_only) { memset(comm, 0, sizeof(*comm)); comm->size = 1; return; }
    comm_init_world(comm, p->comm_timeout, p->startup_timeout);
}

// The groups: of the launcher's world, or for --plan-only the plan of rank 0 of
// --dp x --pp x --cp x --tp ranks, with no launcher and no device.
static inline void parallel_comm_groups(Comm* comm, const ParallelArgs* p, int plan_only) {
    int U;
    CpMode mode = parallel_cp_resolve(p, &U);
    if (plan_only) {
        comm_init_plan(comm, p->dp_plan > 0 ? p->dp_plan : 1, p->tp, p->cp, U, p->pp);
        if (p->plan_rank < 0 || p->plan_rank >= comm->size)
            FAIL("--plan-rank %d: the planned world has ranks 0..%d (--dp x --pp x --cp x --tp)", p->plan_rank, comm->size - 1);
        comm_set_layout(comm, comm->size, p->plan_rank, p->tp, p->cp, U, p->pp);
    }
    else comm_init_groups(comm, p->tp, p->cp, U, p->pp, p->comm_backend == COMM_FLAG_NCCL);
    comm->cp_mode = mode;
    if (!plan_only && p->plan_rank != 0) FAIL("--plan-rank %d is for --plan-only", p->plan_rank);
    if (!plan_only && p->dp_plan > 0 && p->dp_plan != comm->dp)
        FAIL("--dp %d is for --plan-only; this run has dp = %d ranks (from the launcher)", p->dp_plan, comm->dp);
}

// both, for programs that compare no flags across ranks first
static inline void parallel_comm_init(Comm* comm, const ParallelArgs* p, int plan_only) {
    parallel_comm_world(comm, p, plan_only);
    parallel_comm_groups(comm, p, plan_only);
}

// this rank's device (comm_device_index) and the communication's set-up on it; none for --plan-only
static inline void parallel_device_setup(Comm* comm, int plan_only) {
    if (plan_only) return;
    dev_select(comm_device_index(comm, dev_count()));
    comm_setup_device(comm);
}

// What a model needs of the parallel layout beyond its ranks (llmc/parallel/comm.h), resolved
// from the flags: the trainers' memory flags live in their own structs.
typedef struct {
    int zero;         // ZeRO stage: 1 optimizer state (fp32 master, AdamW m and v) sharded over DP, 2 the layers' gradients, 3 their parameters
    int shard_vocab;  // 1: embedding and output projection split over the vocabulary (train_llama)
    int grad_fp32;    // 1: micro-steps accumulate the gradients in an fp32 buffer (resolved from --fp32-grad-accum)
    int tp_sp;        // --tp-mode reducescatter: sequence parallelism (the residual stream holds 1/tp of the rows)
    int tp_regather;  // --tp-recompute-allgather 1: backward gathers the norm outputs again instead of keeping them
    int zero_reshard; // --zero 3 --zero-reshard 1: backward gathers a layer's parameters again instead of keeping them
    int offload_optim;  // 1: the owned optimizer state on the host, AdamW on the CPU (llmc/parallel/host_optimizer.h)
    int pp_schedule, pp_virtual;  // the pipeline's schedule and model chunks a stage (llmc/parallel/pipeline.h)
    int micro_steps;              // micro-batches a step (the pipeline's schedule)
    const char* pp_layers;        // --pp-layers (NULL: the even split)
} ParallelFlags;

static inline int grad_fp32_resolve(int flag, int micro_steps);

// the flags of a run whose optimizer steps have micro_steps micro-batches
static inline ParallelFlags parallel_flags_resolve(const ParallelArgs* p, int shard_vocab, int micro_steps) {
    ParallelFlags f = {p->zero, shard_vocab, grad_fp32_resolve(p->fp32_grad_accum, micro_steps),
                       p->tp_mode == TP_REDUCESCATTER, p->tp_regather, p->zero_reshard, p->offload_optim,
                       p->pp_schedule, p->pp_virtual, micro_steps, p->pp_layers};
    return f;
}

static inline void parallel_flags_validate(const ParallelFlags* f) {
    if (f->zero < 0 || f->zero > 3) FAIL("--zero must be 0, 1, 2 or 3 (got %d)", f->zero);
    if (f->shard_vocab != 0 && f->shard_vocab != 1) FAIL("--shard-vocab must be 0 or 1 (got %d)", f->shard_vocab);
    if (f->grad_fp32 != 0 && f->grad_fp32 != 1) FAIL("grad_fp32 must be resolved to 0 or 1 (got %d)", f->grad_fp32);
    if (f->tp_sp != 0 && f->tp_sp != 1) FAIL("tp_sp must be 0 or 1 (got %d)", f->tp_sp);
    if (f->tp_regather != 0 && f->tp_regather != 1) FAIL("--tp-recompute-allgather must be 0 or 1 (got %d)", f->tp_regather);
    if (f->zero_reshard != 0 && f->zero_reshard != 1) FAIL("--zero-reshard must be 0 or 1 (got %d)", f->zero_reshard);
    if (!f->zero_reshard && f->zero < 3)
        FAIL("--zero-reshard 0 keeps the parameters --zero 3 gathers; under --zero %d every rank holds them whole already "
             "(pass --zero 3, or leave --zero-reshard out)", f->zero);
    if (f->offload_optim != 0 && f->offload_optim != 1)
        FAIL("--offload-optim must be 0 (the optimizer state on the device) or 1 (on the host, AdamW on the CPU); got %d",
             f->offload_optim);
}

// --fp32-grad-accum -1 (auto): on when a step has more than one micro-step and the
// gradients are stored in bf16, where adding many micro-steps with beta = 1 in bf16
// loses the small late contributions (docs/memory.md: its 4 bytes per parameter; the
// emulator's bf16 test_llama run shows the error it removes). In fp32 builds the
// gradients are fp32 already and auto leaves it off; 1 still runs the path.
static inline int grad_fp32_resolve(int flag, int micro_steps) {
    if (flag != -1 && flag != 0 && flag != 1) FAIL("--fp32-grad-accum must be -1 (auto), 0 or 1 (got %d)", flag);
    return flag == -1 ? (micro_steps > 1 && sizeof(floatX) < sizeof(float)) : flag;
}

// the bytes a step sends (llmc/parallel/comm.h's count), predicted or counted, as one log line
static inline void comm_bytes_log(Logger* lg, const char* what, const double b[NUM_GROUPS][NUM_COMM_KINDS]) {
    char line[1024];
    comm_bytes_format(line, sizeof(line), what, b);
    logf_(lg, "%s", line);
}
