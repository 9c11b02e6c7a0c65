/*
The communication layer (docs/design.md 8.1, 8.2): ranks, process groups and the collectives the
trainers call, with the same one-program-two-backends rule as the kernels.

  world = dp x pp x cp x tp, tp innermost: rank = ((d * pp + s) * cp + k) * tp + t for DP
  index d, pipeline stage s, CP index k, TP index t. A TP group is tp consecutive ranks; a
  CP group the cp ranks with the same d, s and t (strided by tp), which hold the same
  samples and split their tokens (llmc/parallel/context_parallel.h). GROUP_PP is the pp
  stages with the same d, k and t, which pass a micro-batch's activations and gradients
  along (llmc/parallel/pipeline.h); GROUP_PP_ENDS its first and last stage, which both hold
  a tied embedding (a group of one on the stages between, which never use it). With U Ulysses ways (--cp-mode ulysses: U = cp;
  ring: 1; hybrid: --cp-ulysses), k = r * U + u: GROUP_ULYSSES is the U consecutive
  members of a CP group with the same r (the all-to-all stays among near ranks),
  GROUP_RING the cp/U members with the same u. GROUP_GRAD, the gradient group, is every rank with the
  same s and t: the dp x cp ranks that hold the same shard of the model, over which gradients
  are summed and ZeRO-1 shards (Megatron's data-parallel group "with context
  parallelism"). Without cp it is the DP group. c->dp and c->dp_rank count samples
  (the DP index d); the gradient group's size and index are group_size[GROUP_GRAD] and
  group_rank[GROUP_GRAD] (comm_grad_ranks, comm_grad_rank).

Backends, chosen at build time and by --comm:
  - no MPI in the build (USE_MPI undefined): one process; every collective over a
    group of one is the identity, so the trainer's code is the same.
  - CPU build with MPI: collectives on host memory through MPI.
  - CUDA build, --comm nccl: NCCL communicators for the world, TP and DP groups (the
    unique ids travel over MPI), on a communication stream ordered with events, in
    NCCL's non-blocking mode so that a wait can time out and abort.
  - CUDA build, --comm mpi: device buffers staged through pinned host memory and
    reduced by MPI. Slower, but several ranks can share one GPU (NCCL refuses that),
    so the whole CUDA orchestration can be tested on a single GPU.

A one-process run never calls MPI_Init: MPI is initialised only when a launcher
(mpirun, srun) started the process, so `./train_llama` alone needs no MPI at run time.

Every wait is bounded (--comm-timeout seconds): a rank that died or hangs makes the
others fail with a message naming the collective that did not complete, instead of
waiting forever. Every MPI and NCCL call is checked and fails with file, line, rank
and a hint.

Collectives on "device" buffers are in place and asynchronous with respect to the
host: comm_* enqueues after the work already on stream `after`, and comm_join(c, s)
makes stream s wait for everything enqueued so far. On the CPU and with --comm mpi
they complete before they return.
*/
#pragma once
#include "../core/common.h"
#include "../kernels/kernels.h"
#include <time.h>
#ifdef USE_MPI
#include <mpi.h>
#include <signal.h>
#include <sys/time.h>
#include <unistd.h>
#endif
#if !defined(LLMC_CPU) && defined(USE_NCCL)
#include <nccl.h>
#endif

// GROUP_GRAD: the gradient group, dp x cp ranks (its logs' name stays "dp", as the plans print it)
typedef enum { GROUP_WORLD, GROUP_TP, GROUP_GRAD, GROUP_ULYSSES, GROUP_RING, GROUP_PP, GROUP_PP_ENDS, NUM_GROUPS } CommGroup;
typedef enum { COMM_SUM, COMM_MAX } CommOp;
typedef enum { COMM_FLOATX, COMM_FLOAT } CommDtype;  // element types of device buffers
typedef enum { BACKEND_SINGLE, BACKEND_MPI, BACKEND_NCCL } CommBackend;
typedef enum { KIND_ALL_REDUCE, KIND_REDUCE_SCATTER, KIND_ALL_GATHER, KIND_ALL_TO_ALL, KIND_SEND_RECV, NUM_COMM_KINDS } CommKind;

[[maybe_unused]] static const char* GROUP_NAMES[NUM_GROUPS] = {"world", "tp", "dp", "ulysses", "ring", "pp", "pp-ends"};
[[maybe_unused]] static const char* COMM_KIND_NAMES[NUM_COMM_KINDS] = {"all-reduce", "reduce-scatter", "all-gather",
                                                                        "all-to-all", "send-recv"};

// how a CP group's attention sees the other members' tokens (--cp-mode; the names end with NULL
// for the flag parser), resolved once from the flags (llmc/parallel/parallel_args.h)
typedef enum { CP_RING = 0, CP_ULYSSES = 1, CP_HYBRID = 2 } CpMode;
[[maybe_unused]] static const char* const CP_MODE_NAMES[4] = {"ring", "ulysses", "hybrid", NULL};

typedef struct {
    int rank, size;                   // world
    int tp, dp, cp, pp, tp_rank, dp_rank, cp_rank, pp_rank;  // the four degrees and this rank's index in each
    int ulysses;                      // U: the Ulysses ways of the CP group (GROUP_ULYSSES' size)
    CpMode cp_mode;                   // what U ways of cp mean: ring (U = 1), ulysses (U = cp), hybrid
    int local_rank;                   // position among the ranks of this node (device choice)
    int group_rank[NUM_GROUPS], group_size[NUM_GROUPS];
    CommBackend backend;
    double timeout_s;
    int mpi_initialised;
#ifdef USE_MPI
    MPI_Comm mpi[NUM_GROUPS];
    MPI_Op op_sum_bf16, op_max_bf16;  // reductions of bf16 buffers staged on the host
#endif
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    ncclComm_t nccl[NUM_GROUPS];
#endif
    stream_t stream;                  // the communication stream
    event_t ev_ready, ev_done;
    char* staging;                    // pinned host staging for --comm mpi in the CUDA build
    size_t staging_bytes;
    // bytes this rank has sent in device collectives, by group and kind, counted as a ring
    // algorithm sends them (NCCL's): all-gather and reduce-scatter (g-1)/g of the whole
    // buffer, all-reduce twice that; an all-to-all the g-1 blocks that leave the rank, a
    // send-recv what it sends. The trainer compares them with its formula.
    double sent[NUM_GROUPS][NUM_COMM_KINDS];
} Comm;

// the bytes a rank sends for a collective over a buffer of whole_bytes (the ring
// count above); all-to-all and send-recv are given the bytes that leave the rank
static inline double comm_sent_bytes(int group_size, CommKind k, double whole_bytes) {
    if (k == KIND_ALL_TO_ALL || k == KIND_SEND_RECV) return whole_bytes;
    return (k == KIND_ALL_REDUCE ? 2.0 : 1.0) * (group_size - 1) * whole_bytes / group_size;
}

static inline void comm_count(Comm* c, CommGroup g, CommKind k, double whole_bytes) {
    c->sent[g][k] += comm_sent_bytes(c->group_size[g], k, whole_bytes);
}

// the gradient group (GROUP_GRAD: dp x cp ranks): its size and this rank's index in it
static inline int comm_grad_ranks(const Comm* c) { return c->group_size[GROUP_GRAD]; }
static inline int comm_grad_rank(const Comm* c) { return c->group_rank[GROUP_GRAD]; }

// The bytes a step sends by the same count, predicted from a model's plan (the closed
// forms of docs/memory.md section 10): the trainers print both, make test requires them equal.
typedef struct { double b[NUM_GROUPS][NUM_COMM_KINDS]; } CommBytes;

static inline void comm_bytes_add(CommBytes* cb, const Comm* c, CommGroup g, CommKind k, double whole_bytes) {
    cb->b[g][k] += comm_sent_bytes(c->group_size[g], k, whole_bytes);
}

// "what: group kind N B; ... total N B (M MiB)", the line the tests compare
static inline void comm_bytes_format(char* out, size_t n, const char* what, const double b[NUM_GROUPS][NUM_COMM_KINDS]) {
    size_t used = (size_t)snprintf(out, n, "%s:", what);
    double total = 0;
    for (int g = 0; g < NUM_GROUPS; g++)
        for (int k = 0; k < NUM_COMM_KINDS; k++) {
            if (b[g][k] == 0 || used >= n) continue;
            used += (size_t)snprintf(out + used, n - used, " %s %s %.0f B;", GROUP_NAMES[g], COMM_KIND_NAMES[k], b[g][k]);
            total += b[g][k];
        }
    if (used < n) snprintf(out + used, n - used, " total %.0f B (%.2f MiB)\n", total, total / 1048576.0);
}

// the rank that failures name (common.h prints it)
static inline void comm_set_rank_for_errors(int rank) { llmc_error_rank = rank; }

static inline double comm_now(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

static inline int env_int(const char* name, int fallback) {
    const char* v = getenv(name);
    return v && *v ? atoi(v) : fallback;
}

// started by a launcher? (Open MPI's mpirun, PMI/PMIx as under SLURM's srun)
static inline int comm_launched_by_mpi(void) {
    return getenv("OMPI_COMM_WORLD_SIZE") || getenv("PMIX_RANK") || getenv("PMI_RANK") || getenv("PMI_SIZE") ||
           (getenv("SLURM_PROCID") && env_int("SLURM_NTASKS", 1) > 1) || env_int("LLMC_FORCE_MPI", 0);
}

#ifdef USE_MPI
#define mpiCheck(call) do { int err_ = (call); if (err_ != MPI_SUCCESS) { \
    char msg_[MPI_MAX_ERROR_STRING]; int len_ = 0; MPI_Error_string(err_, msg_, &len_); \
    FAIL("MPI: %s failed: %s (hint: did a rank die? see the other ranks' messages and mpirun's)", #call, msg_); } } while (0)

static inline MPI_Datatype comm_mpi_type(CommDtype t) {
#if defined(LLMC_CPU) || defined(ENABLE_FP32)
    (void)t; return MPI_FLOAT;
#else
    return t == COMM_FLOAT ? MPI_FLOAT : MPI_UINT16_T;
#endif
}

#if !defined(LLMC_CPU) && !defined(ENABLE_FP32)
// MPI has no bf16: sums and maxima of staged bf16 buffers, elementwise through fp32
static void comm_bf16_sum(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    const __nv_bfloat16* a = (const __nv_bfloat16*)in; __nv_bfloat16* b = (__nv_bfloat16*)inout;
    for (int i = 0; i < *len; i++) b[i] = __float2bfloat16(__bfloat162float(a[i]) + __bfloat162float(b[i]));
}
static void comm_bf16_max(void* in, void* inout, int* len, MPI_Datatype* dt) {
    (void)dt;
    const __nv_bfloat16* a = (const __nv_bfloat16*)in; __nv_bfloat16* b = (__nv_bfloat16*)inout;
    for (int i = 0; i < *len; i++) b[i] = __float2bfloat16(fmaxf(__bfloat162float(a[i]), __bfloat162float(b[i])));
}
#endif

static inline MPI_Op comm_mpi_op(const Comm* c, CommDtype t, CommOp op) {
#if !defined(LLMC_CPU) && !defined(ENABLE_FP32)
    if (t == COMM_FLOATX) return op == COMM_SUM ? c->op_sum_bf16 : c->op_max_bf16;
#else
    (void)c; (void)t;
#endif
    return op == COMM_SUM ? MPI_SUM : MPI_MAX;
}

// Waits for a non-blocking MPI request, at most the timeout. On expiry the whole job
// is aborted with a message naming what did not complete.
static inline void comm_mpi_wait(const Comm* c, MPI_Request* req, const char* what, CommGroup g, size_t n) {
    double t0 = comm_now();
    long spins = 0;
    for (;;) {
        int done = 0;
        mpiCheck(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (++spins > 1000) {  // past the first microseconds, stop burning the core other ranks may share
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        if (comm_now() - t0 > c->timeout_s) {
            fprintf(stderr, "error (rank %d): %s of %zu elements over the %s group did not complete within %.0f s "
                    "(--comm-timeout). Another rank died, hangs, or stopped calling the same collectives; "
                    "aborting the job.\n", c->rank, what, n, GROUP_NAMES[g], c->timeout_s);
            fflush(stderr);
            MPI_Abort(MPI_COMM_WORLD, 3);
            exit(3);
        }
    }
}
#endif  // USE_MPI

#if !defined(LLMC_CPU) && defined(USE_NCCL)
#define ncclCheck(call) do { ncclResult_t r_ = (call); if (r_ != ncclSuccess && r_ != ncclInProgress) { \
    FAIL("NCCL: %s failed: %s (hint: NCCL_DEBUG=WARN shows why; two ranks on one GPU need --comm mpi)", #call, \
         ncclGetErrorString(r_)); } } while (0)
static inline ncclDataType_t comm_nccl_type(CommDtype t) {
#if defined(ENABLE_FP32)
    (void)t; return ncclFloat32;
#else
    return t == COMM_FLOAT ? ncclFloat32 : ncclBfloat16;
#endif
}
// In non-blocking mode a call may return before NCCL has finished with it: wait,
// bounded, until the communicator is no longer in progress.
static inline void comm_nccl_settle(const Comm* c, ncclComm_t comm, const char* what) {
    double t0 = comm_now();
    for (long polls = 0;; polls++) {
        ncclResult_t state;
        ncclCheck(ncclCommGetAsyncError(comm, &state));
        if (state == ncclSuccess) return;
        if (state != ncclInProgress) FAIL("NCCL: %s: %s (hint: NCCL_DEBUG=WARN)", what, ncclGetErrorString(state));
        if (polls > 1000) {  // past the first microseconds (an init can take seconds), leave the core to the others
            struct timespec ts = {0, 200000};
            nanosleep(&ts, NULL);
        }
        if (comm_now() - t0 > c->timeout_s) {
            ncclCommAbort(comm);
            FAIL("NCCL: %s did not complete within %.0f s (--comm-timeout); communicator aborted", what, c->timeout_s);
        }
    }
}
#endif

#if !defined(LLMC_CPU) && defined(USE_NCCL)
// a collective on the communication stream, after the work already on `after`; returns
// once NCCL has taken it (non-blocking mode), bounded by the timeout
#define COMM_NCCL(c, g, after, call) do { comm_order_after((c), (after)); ncclCheck(call); \
    comm_nccl_settle((c), (c)->nccl[g], #call); return; } while (0)
#endif

static inline size_t comm_type_bytes(CommDtype t) { return t == COMM_FLOAT ? sizeof(float) : sizeof(floatX); }

// how the ranks talk, for the logs
static inline const char* comm_backend_name(const Comm* c) {
    return c->backend == BACKEND_NCCL ? "nccl" : c->backend == BACKEND_MPI ? "mpi" : c->size > 1 ? "none (plan only)"
                                                                                                : "none (one process)";
}

// the degrees and indices of rank `rank` of a world of `size` = dp x pp x cp x tp ranks
// whose CP groups are cp/U rings of U Ulysses ways
static inline void comm_set_layout(Comm* c, int size, int rank, int tp, int cp, int U, int pp) {
    c->size = size; c->rank = rank; c->tp = tp; c->cp = cp; c->pp = pp; c->ulysses = U; c->dp = size / (tp * cp * pp);
    c->tp_rank = rank % tp; c->cp_rank = (rank / tp) % cp; c->pp_rank = (rank / (tp * cp)) % pp;
    c->dp_rank = rank / (tp * cp * pp);
    c->group_rank[GROUP_WORLD] = rank;          c->group_size[GROUP_WORLD] = size;
    c->group_rank[GROUP_TP] = c->tp_rank;       c->group_size[GROUP_TP] = tp;
    c->group_rank[GROUP_GRAD] = c->dp_rank * cp + c->cp_rank;  c->group_size[GROUP_GRAD] = c->dp * cp;  // d * cp + k of dp x cp
    c->group_rank[GROUP_ULYSSES] = c->cp_rank % U; c->group_size[GROUP_ULYSSES] = U;
    c->group_rank[GROUP_RING] = c->cp_rank / U;    c->group_size[GROUP_RING] = cp / U;
    c->group_rank[GROUP_PP] = c->pp_rank;       c->group_size[GROUP_PP] = pp;
    int end = c->pp_rank == 0 || c->pp_rank == pp - 1;  // (pp 1: the one stage is both ends)
    c->group_rank[GROUP_PP_ENDS] = end && c->pp_rank > 0; c->group_size[GROUP_PP_ENDS] = end && pp > 1 ? 2 : 1;
}

#ifdef USE_MPI
// The start-up watchdog: MPI_Init, the world's split and dup, the flags' check and the group
// splits all block until every rank has arrived, and none of them takes a timeout, so a rank
// that never arrives (stopped, or dead before MPI_Init) would leave the others there forever.
// An interval timer of --startup-timeout seconds is armed before MPI_Init and disarmed once the
// groups exist (comm_init_groups). On expiry the handler writes a message prepared before
// arming (write(2) is async-signal-safe; snprintf is not) and _exit(3)s: MPI_Abort is neither
// async-signal-safe nor usable before MPI_Init has returned, and a rank's exit without
// MPI_Finalize makes the launcher (mpirun, srun --kill-on-bad-exit) end the job.
static char comm_startup_msg[512];
static size_t comm_startup_len = 0;

static void comm_startup_expired(int sig) {
    (void)sig;
    ssize_t w = write(STDERR_FILENO, comm_startup_msg, comm_startup_len);
    (void)w;
    _exit(3);
}

static inline void comm_startup_watchdog(double timeout_s, int arm) {
    struct itimerval it;
    memset(&it, 0, sizeof(it));
    if (arm) {
        const char* r = getenv("OMPI_COMM_WORLD_RANK");
        if (!r) r = getenv("PMIX_RANK");
        if (!r) r = getenv("SLURM_PROCID");
        snprintf(comm_startup_msg, sizeof(comm_startup_msg),
                 "error (rank %s): MPI start-up (MPI_Init, the configuration check and the group splits) did not "
                 "complete within %.0f s (--startup-timeout): another rank never arrived (it died, was stopped or was "
                 "never started; see the launcher's and the other ranks' messages); exit 3\n", r ? r : "?", timeout_s);
        comm_startup_len = strlen(comm_startup_msg);
        struct sigaction sa;
        memset(&sa, 0, sizeof(sa));
        sa.sa_handler = comm_startup_expired;
        sigemptyset(&sa.sa_mask);
        sigaction(SIGALRM, &sa, NULL);
        it.it_value.tv_sec = (time_t)timeout_s;
        it.it_value.tv_usec = (suseconds_t)((timeout_s - (double)(time_t)timeout_s) * 1e6);
        if (it.it_value.tv_sec == 0 && it.it_value.tv_usec == 0) it.it_value.tv_usec = 1;
    }
    setitimer(ITIMER_REAL, &it, NULL);  // all zero: disarmed
    if (!arm) signal(SIGALRM, SIG_DFL);
}
#endif

// The world alone: the launcher's ranks (mpirun, srun; one process: a world of one), with
// no group split yet, so that a check of every rank's flags on the world can run before
// the flags decide the groups (llmc/train/same_config.h). Arms the start-up watchdog.
static inline void comm_init_world(Comm* c, double timeout_s, double startup_s) {
    memset(c, 0, sizeof(*c));
    c->rank = 0; c->size = 1; c->local_rank = 0;
    c->timeout_s = timeout_s > 0 ? timeout_s : 300.0;
    c->backend = BACKEND_SINGLE;
    if (comm_launched_by_mpi()) {
#ifdef USE_MPI
        comm_startup_watchdog(startup_s > 0 ? startup_s : 300.0, 1);
        mpiCheck(MPI_Init(NULL, NULL));
        c->mpi_initialised = 1;
        mpiCheck(MPI_Comm_rank(MPI_COMM_WORLD, &c->rank));
        mpiCheck(MPI_Comm_size(MPI_COMM_WORLD, &c->size));
        comm_set_rank_for_errors(c->rank);
        MPI_Comm node;
        mpiCheck(MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, c->rank, MPI_INFO_NULL, &node));
        mpiCheck(MPI_Comm_rank(node, &c->local_rank));
        mpiCheck(MPI_Comm_free(&node));
        c->backend = BACKEND_MPI;
        c->group_size[GROUP_WORLD] = c->size; c->group_rank[GROUP_WORLD] = c->rank;
        mpiCheck(MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi[GROUP_WORLD]));
#else
        (void)startup_s;
        if (env_int("OMPI_COMM_WORLD_SIZE", 1) > 1 || env_int("PMI_SIZE", 1) > 1 || env_int("SLURM_NTASKS", 1) > 1)
            FAIL("started by an MPI launcher with several ranks, but this build has no MPI (make info; install "
                 "libopenmpi-dev and rebuild)");
#endif
    }
}

// The groups of a world from comm_init_world: tp x cp x pp must divide the world size;
// dp = world / (tp x cp x pp).
static inline void comm_init_groups(Comm* c, int tp, int cp, int U, int pp, int use_nccl) {
    if (tp < 1 || cp < 1 || pp < 1 || c->size % ((long long)tp * cp * pp) != 0) {
        if (cp == 1 && pp == 1)
            FAIL("--tp %d must divide the number of ranks %d (world = dp x tp: start tp x dp processes with mpirun -np or srun)",
                 tp, c->size);
        FAIL("--tp %d x --cp %d x --pp %d must divide the number of ranks %d (world = dp x pp x cp x tp: start "
             "dp x pp x cp x tp processes with mpirun -np or srun)", tp, cp, pp, c->size);
    }
    if (U < 1 || cp % U != 0) FAIL("the Ulysses ways %d must divide --cp %d", U, cp);
    comm_set_layout(c, c->size, c->rank, tp, cp, U, pp);
#ifdef USE_MPI
    if (c->mpi_initialised) {
        int t = c->tp_rank, k = c->cp_rank, s = c->pp_rank, d = c->dp_rank;
        mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, c->rank / tp, t, &c->mpi[GROUP_TP]));
        mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, s * tp + t, c->group_rank[GROUP_GRAD], &c->mpi[GROUP_GRAD]));
        int u = c->group_rank[GROUP_ULYSSES], r = c->group_rank[GROUP_RING], R = c->group_size[GROUP_RING];
        mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, (((d * pp + s) * R + r) * tp + t), u, &c->mpi[GROUP_ULYSSES]));
        mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, (((d * pp + s) * U + u) * tp + t), r, &c->mpi[GROUP_RING]));
        mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, (d * cp + k) * tp + t, s, &c->mpi[GROUP_PP]));
        // the ends of each pipeline together; every stage between in a group of its own
        int ends = c->group_size[GROUP_PP_ENDS] == 2 ? (d * cp + k) * tp + t : c->size + c->rank;
        mpiCheck(MPI_Comm_split(MPI_COMM_WORLD, ends, s, &c->mpi[GROUP_PP_ENDS]));
#if !defined(LLMC_CPU) && !defined(ENABLE_FP32)
        mpiCheck(MPI_Op_create(comm_bf16_sum, 1, &c->op_sum_bf16));
        mpiCheck(MPI_Op_create(comm_bf16_max, 1, &c->op_max_bf16));
#endif
        comm_startup_watchdog(0, 0);  // every rank arrived: from here each wait has its own bound
    }
#endif
#ifdef LLMC_CPU
    (void)use_nccl;
#else
    if (use_nccl && c->size > 1) {
#ifdef USE_NCCL
        c->backend = BACKEND_NCCL;
#else
        FAIL("--comm nccl: this build has no NCCL (make info); use --comm mpi or rebuild with NCCL");
#endif
    }
#endif
}

// both at once, for programs with no flags to compare first (dev/test/test_comm.c)
static inline void comm_init(Comm* c, int tp, int cp, int U, int use_nccl, double timeout_s) {
    comm_init_world(c, timeout_s, timeout_s);
    comm_init_groups(c, tp, cp, U, 1, use_nccl);
}

// A world of dp x pp x cp x tp ranks seen from rank 0, for --plan-only: no launcher, no
// device, and no collective may be called.
static inline void comm_init_plan(Comm* c, int dp, int tp, int cp, int U, int pp) {
    memset(c, 0, sizeof(*c));
    if (dp < 1 || tp < 1 || cp < 1 || pp < 1)
        FAIL("a plan needs dp, tp, cp and pp >= 1 (got dp %d, tp %d, cp %d, pp %d)", dp, tp, cp, pp);
    if (U < 1 || cp % U != 0) FAIL("the Ulysses ways %d must divide --cp %d", U, cp);
    comm_set_layout(c, dp * tp * cp * pp, 0, tp, cp, U, pp);
    c->backend = BACKEND_SINGLE;
    c->timeout_s = 300.0;
}

// Device-side set-up, after the device is chosen: the communication stream, its events
// and (NCCL) the communicators. The staging of --comm mpi is planned by the trainer
// (comm_staging_needed) and handed over with comm_set_staging.
static inline void comm_setup_device(Comm* c) {
    c->stream = stream_create();
    c->ev_ready = event_create();
    c->ev_done = event_create();
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {
        for (int g = 0; g < NUM_GROUPS; g++) {
            ncclUniqueId id;
            if (c->group_rank[g] == 0) ncclCheck(ncclGetUniqueId(&id));
            mpiCheck(MPI_Bcast(&id, sizeof(id), MPI_BYTE, 0, c->mpi[g]));
            ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
            cfg.blocking = 0;  // so that a wait can time out and abort (comm_nccl_settle)
            ncclCheck(ncclCommInitRankConfig(&c->nccl[g], c->group_size[g], id, c->group_rank[g], &cfg));
            comm_nccl_settle(c, c->nccl[g], "ncclCommInitRankConfig");
        }
    }
#endif
}

// does this run stage collectives through host memory (--comm mpi in the CUDA build)?
static inline int comm_staging_needed(const Comm* c) {
#ifdef LLMC_CPU
    (void)c; return 0;
#else
    return c->backend == BACKEND_MPI && c->size > 1;
#endif
}
static inline void comm_set_staging(Comm* c, void* host_pinned, size_t bytes) { c->staging = (char*)host_pinned; c->staging_bytes = bytes; }

// the CUDA device this rank uses: one per rank with NCCL; shared (round robin) with --comm mpi
static inline int comm_device_index(const Comm* c, int device_count) {
    if (device_count < 1) FAIL("no CUDA device found (hint: nvidia-smi; the CPU build is train_llama_cpu)");
    // one visible device per rank (CUDA_VISIBLE_DEVICES set per task, as srun --gpus-per-task does): use it
    if (device_count == 1) return 0;
    if (c->backend == BACKEND_NCCL && c->local_rank >= device_count)
        FAIL("rank %d is local rank %d but this node has %d GPUs: NCCL needs one GPU per rank (use --comm mpi to "
             "share a GPU, or fewer ranks per node)", c->rank, c->local_rank, device_count);
    return c->local_rank % device_count;
}

// ----------------------------------------------------------------------------
// collectives on device buffers, in place

// the comm stream waits for what `after` has enqueued so far
static inline void comm_order_after(Comm* c, stream_t after) {
    event_record(c->ev_ready, after);
    stream_wait_event(c->stream, c->ev_ready);
}

// stream s waits for every collective enqueued so far
static inline void comm_join(Comm* c, stream_t s) {
    event_record(c->ev_done, c->stream);
    stream_wait_event(s, c->ev_done);
}

// the stream on which a collective's result is ready: the communication stream (NCCL), or
// the stream it was ordered after (MPI's results come back through it; the CPU build)
static inline stream_t comm_result_stream(const Comm* c, stream_t after) {
    return c->backend == BACKEND_NCCL ? c->stream : after;
}

#ifdef USE_MPI
// --comm mpi in the CUDA build: device -> pinned host before, host -> device after
static inline void* comm_stage_in(Comm* c, const void* dev, size_t bytes, stream_t after) {
#ifdef LLMC_CPU
    (void)c; (void)bytes; (void)after; return (void*)dev;
#else
    if (bytes > c->staging_bytes) FAIL("comm: a collective of %zu bytes exceeds the planned staging of %zu", bytes, c->staging_bytes);
    dev_memcpy_d2h(c->staging, dev, bytes, after);
    stream_synchronize(after);
    return c->staging;
#endif
}
static inline void comm_stage_out_from(Comm* c, void* dev, size_t bytes, const char* host, stream_t after) {
#ifdef LLMC_CPU
    (void)c; (void)dev; (void)bytes; (void)host; (void)after;
#else
    (void)c;
    dev_memcpy_h2d(dev, host, bytes, after);
#endif
}
static inline void comm_stage_out(Comm* c, void* dev, size_t bytes, stream_t after) {
    comm_stage_out_from(c, dev, bytes, c->staging, after);
}
// out-of-place exchanges (all-to-all, send-recv): the send and receive buffers of `bytes`
// each, on the host; with --comm mpi in the CUDA build the two halves of the staging
// buffer, the send half filled; on the CPU the buffers themselves
static inline void comm_stage_pair_in(Comm* c, const void* send, void* recv, size_t bytes, const char* what, stream_t after,
                                      char** hs, char** hr) {
#ifdef LLMC_CPU
    (void)c; (void)bytes; (void)what; (void)after;
    *hs = (char*)send; *hr = (char*)recv;
#else
    (void)recv;
    if (2 * bytes > c->staging_bytes) FAIL("comm: %s of 2 x %zu bytes exceeds the planned staging of %zu", what, bytes, c->staging_bytes);
    *hs = c->staging; *hr = c->staging + bytes;
    if (send) {
        dev_memcpy_d2h(*hs, send, bytes, after);
        stream_synchronize(after);
    }
#endif
}
#endif

// MPI counts are int: large buffers go in pieces of at most this many elements
#define COMM_MPI_MAX_COUNT (1 << 30)

#ifdef USE_MPI
// all-reduce (root < 0) or broadcast from root of n elements of a host buffer, in place,
// piece by piece, each wait bounded
static inline void comm_mpi_in_pieces(Comm* c, CommGroup g, char* h, size_t n, CommDtype t, CommOp op, int root) {
    size_t es = comm_type_bytes(t);
    for (size_t i = 0; i < n; i += COMM_MPI_MAX_COUNT) {
        int k = (int)(n - i < COMM_MPI_MAX_COUNT ? n - i : COMM_MPI_MAX_COUNT);
        MPI_Request req;
        if (root < 0) mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, h + i * es, k, comm_mpi_type(t), comm_mpi_op(c, t, op), c->mpi[g], &req));
        else mpiCheck(MPI_Ibcast(h + i * es, k, comm_mpi_type(t), root, c->mpi[g], &req));
        comm_mpi_wait(c, &req, root < 0 ? "all-reduce" : "broadcast", g, n);
    }
}
#endif

static inline void comm_all_reduce(Comm* c, CommGroup g, void* buf, size_t n, CommDtype t, CommOp op, stream_t after) {
    if (c->group_size[g] == 1 || n == 0) return;
    comm_count(c, g, KIND_ALL_REDUCE, (double)n * comm_type_bytes(t));
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) COMM_NCCL(c, g, after, ncclAllReduce(buf, buf, n, comm_nccl_type(t), op == COMM_SUM ? ncclSum : ncclMax, c->nccl[g], c->stream));
#endif
#ifdef USE_MPI
    size_t es = comm_type_bytes(t);
    char* h = (char*)comm_stage_in(c, buf, n * es, after);
    comm_mpi_in_pieces(c, g, h, n, t, op, -1);
    comm_stage_out(c, buf, n * es, after);
#else
    (void)buf; (void)t; (void)op; (void)after;
#endif
}

// buf holds group_size blocks of n elements; afterwards block group_rank holds the sum
// of that block over the group (the other blocks are left undefined)
static inline void comm_reduce_scatter(Comm* c, CommGroup g, void* buf, size_t n, CommDtype t, stream_t after) {
    if (c->group_size[g] == 1 || n == 0) return;
    comm_count(c, g, KIND_REDUCE_SCATTER, (double)n * c->group_size[g] * comm_type_bytes(t));
    size_t es = comm_type_bytes(t);
    char* mine = (char*)buf + (size_t)c->group_rank[g] * n * es;
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) COMM_NCCL(c, g, after, ncclReduceScatter(buf, mine, n, comm_nccl_type(t), ncclSum, c->nccl[g], c->stream));
#endif
#ifdef USE_MPI
    if (n > COMM_MPI_MAX_COUNT) FAIL("comm: reduce-scatter blocks of %zu elements exceed MPI's int count", n);
    size_t total = n * c->group_size[g] * es;
    char* h = (char*)comm_stage_in(c, buf, total, after);
    MPI_Request req;
    // MPI_IN_PLACE leaves the result at the start of the buffer; it moves to its block below
    mpiCheck(MPI_Ireduce_scatter_block(MPI_IN_PLACE, h, (int)n, comm_mpi_type(t), comm_mpi_op(c, t, COMM_SUM), c->mpi[g], &req));
    comm_mpi_wait(c, &req, "reduce-scatter", g, n);
    if (c->group_rank[g] != 0) memmove(h + (size_t)c->group_rank[g] * n * es, h, n * es);
#ifdef LLMC_CPU
    (void)mine;
#else
    dev_memcpy_h2d(mine, h + (size_t)c->group_rank[g] * n * es, n * es, after);
#endif
#else
    (void)mine; (void)after;
#endif
}

// buf holds group_size blocks of n elements; block group_rank is this rank's; afterwards
// every rank has every block
static inline void comm_all_gather(Comm* c, CommGroup g, void* buf, size_t n, CommDtype t, stream_t after) {
    if (c->group_size[g] == 1 || n == 0) return;
    comm_count(c, g, KIND_ALL_GATHER, (double)n * c->group_size[g] * comm_type_bytes(t));
    size_t es = comm_type_bytes(t);
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {
        char* mine = (char*)buf + (size_t)c->group_rank[g] * n * es;
        COMM_NCCL(c, g, after, ncclAllGather(mine, buf, n, comm_nccl_type(t), c->nccl[g], c->stream));
    }
#endif
#ifdef USE_MPI
    if (n > COMM_MPI_MAX_COUNT) FAIL("comm: all-gather blocks of %zu elements exceed MPI's int count", n);
    size_t total = n * c->group_size[g] * es;
    char* h = (char*)comm_stage_in(c, buf, total, after);
    MPI_Request req;
    mpiCheck(MPI_Iallgather(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, h, (int)n, comm_mpi_type(t), c->mpi[g], &req));
    comm_mpi_wait(c, &req, "all-gather", g, n);
    comm_stage_out(c, buf, total, after);
#else
    (void)buf; (void)es; (void)after;
#endif
}

static inline void comm_broadcast(Comm* c, CommGroup g, void* buf, size_t n, CommDtype t, int root, stream_t after) {
    if (c->group_size[g] == 1 || n == 0) return;
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) COMM_NCCL(c, g, after, ncclBroadcast(buf, buf, n, comm_nccl_type(t), root, c->nccl[g], c->stream));
#endif
#ifdef USE_MPI
    size_t es = comm_type_bytes(t);
    char* h = (char*)comm_stage_in(c, buf, n * es, after);
    comm_mpi_in_pieces(c, g, h, n, t, COMM_SUM, root);
    comm_stage_out(c, buf, n * es, after);
#else
    (void)buf; (void)t; (void)root; (void)after;
#endif
}

// Context parallelism's exchanges (llmc/parallel/context_parallel.h), out of place.
// all-to-all: send holds group_size blocks of n elements, block r for rank r; afterwards
// recv's block r is what rank r sent to this rank. Counted: the g-1 blocks that leave.
// Unlike the other collectives it completes on `after`: with NCCL, `after` joins the
// communication stream, so work issued on `after` next may read recv and reuse send (its
// callers do at once; with --comm mpi it has completed when it returns).
static inline void comm_all_to_all(Comm* c, CommGroup g, const void* send, void* recv, size_t n, CommDtype t, stream_t after) {
    int gs = c->group_size[g];
    size_t es = comm_type_bytes(t), block = n * es;
    if (gs == 1 || n == 0) {
        if (n) dev_memcpy_d2d(recv, send, block, after);
        return;
    }
    comm_count(c, g, KIND_ALL_TO_ALL, (double)(gs - 1) * block);
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {  // NCCL has no all-to-all: grouped sends and receives
        comm_order_after(c, after);
        ncclCheck(ncclGroupStart());
        for (int r = 0; r < gs; r++) {
            ncclCheck(ncclSend((const char*)send + r * block, n, comm_nccl_type(t), r, c->nccl[g], c->stream));
            ncclCheck(ncclRecv((char*)recv + r * block, n, comm_nccl_type(t), r, c->nccl[g], c->stream));
        }
        ncclCheck(ncclGroupEnd());
        comm_nccl_settle(c, c->nccl[g], "all-to-all");
        comm_join(c, after);  // recv is read, and send refilled, on `after` right away
        return;
    }
#endif
#ifdef USE_MPI
    if (n > COMM_MPI_MAX_COUNT) FAIL("comm: all-to-all blocks of %zu elements exceed MPI's int count", n);
    char *hs, *hr;
    comm_stage_pair_in(c, send, recv, block * gs, "an all-to-all", after, &hs, &hr);
    MPI_Request req;
    mpiCheck(MPI_Ialltoall(hs, (int)n, comm_mpi_type(t), hr, (int)n, comm_mpi_type(t), c->mpi[g], &req));
    comm_mpi_wait(c, &req, "all-to-all", g, n);
    comm_stage_out_from(c, recv, block * gs, hr, after);
#else
    (void)send; (void)recv; (void)after;
#endif
}

// send-recv: sends n elements to group rank `to` and receives n from group rank `from`
// (the ring's step: to = next, from = previous; a pipeline stage's exchange with a
// neighbour: to = from). Either half may be absent (send or recv NULL): a pipeline's lone
// send or receive. Both halves are posted before either is waited for, so two ranks that
// send to each other cannot deadlock. With NCCL it is enqueued on the communication
// stream and returns at once: work on other streams overlaps it until comm_join.
// Counted: the n elements sent.
static inline void comm_send_recv(Comm* c, CommGroup g, const void* send, int to, void* recv, int from, size_t n,
                                  CommDtype t, stream_t after) {
    size_t es = comm_type_bytes(t), bytes = n * es;
    if (n == 0 || (!send && !recv)) return;
    if (c->group_size[g] == 1) { if (send && recv) dev_memcpy_d2d(recv, send, bytes, after); return; }
    if (send) comm_count(c, g, KIND_SEND_RECV, (double)bytes);
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {
        comm_order_after(c, after);
        ncclCheck(ncclGroupStart());
        if (send) ncclCheck(ncclSend(send, n, comm_nccl_type(t), to, c->nccl[g], c->stream));
        if (recv) ncclCheck(ncclRecv(recv, n, comm_nccl_type(t), from, c->nccl[g], c->stream));
        ncclCheck(ncclGroupEnd());
        comm_nccl_settle(c, c->nccl[g], "send-recv");
        return;
    }
#endif
#ifdef USE_MPI
    if (n > COMM_MPI_MAX_COUNT) FAIL("comm: a send-recv of %zu elements exceeds MPI's int count", n);
    char *hs, *hr;
    comm_stage_pair_in(c, send, recv, bytes, "a send-recv", after, &hs, &hr);
    MPI_Request req[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
    if (recv) mpiCheck(MPI_Irecv(hr, (int)n, comm_mpi_type(t), from, 0, c->mpi[g], &req[0]));
    if (send) mpiCheck(MPI_Isend(hs, (int)n, comm_mpi_type(t), to, 0, c->mpi[g], &req[1]));
    if (recv) comm_mpi_wait(c, &req[0], "send-recv (receive)", g, n);
    if (send) comm_mpi_wait(c, &req[1], "send-recv (send)", g, n);
    if (recv) comm_stage_out_from(c, recv, bytes, hr, after);
#else
    (void)to; (void)from; (void)after;
#endif
}

// A batch of point-to-point transfers over group g, all posted before any is waited for
// (MPI Isend/Irecv then a wait on each; NCCL send/recv in one group): a pipeline stage's
// exchange with its neighbours (llmc/parallel/pipeline.h), where two ranks that each send to
// the other must not wait in a send for a receive the other has not posted. n elements each.
#define COMM_P2P_MAX 4
typedef struct { void* buf; int peer, send, tag; } CommP2p;  // tag: which stream of messages (MPI; NCCL pairs by order)

static inline void comm_p2p_batch(Comm* c, CommGroup g, const CommP2p* x, int k, size_t n, CommDtype t, stream_t after) {
    size_t bytes = n * comm_type_bytes(t);
    if (n == 0 || k == 0) return;
    if (k > COMM_P2P_MAX) FAIL("comm: %d transfers in one batch, at most %d", k, COMM_P2P_MAX);
    if (c->group_size[g] == 1) FAIL("comm: point-to-point transfers over the %s group of one rank", GROUP_NAMES[g]);
    for (int i = 0; i < k; i++) if (x[i].send) comm_count(c, g, KIND_SEND_RECV, (double)bytes);
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {
        comm_order_after(c, after);
        ncclCheck(ncclGroupStart());
        for (int i = 0; i < k; i++) {
            if (x[i].send) ncclCheck(ncclSend(x[i].buf, n, comm_nccl_type(t), x[i].peer, c->nccl[g], c->stream));
            else ncclCheck(ncclRecv(x[i].buf, n, comm_nccl_type(t), x[i].peer, c->nccl[g], c->stream));
        }
        ncclCheck(ncclGroupEnd());
        comm_nccl_settle(c, c->nccl[g], "pipeline send-recv");
        return;
    }
#endif
#ifdef USE_MPI
    if (n > COMM_MPI_MAX_COUNT) FAIL("comm: a send-recv of %zu elements exceeds MPI's int count", n);
    char* h[COMM_P2P_MAX];
#ifdef LLMC_CPU
    (void)after;
    for (int i = 0; i < k; i++) h[i] = (char*)x[i].buf;
#else
    if ((size_t)k * bytes > c->staging_bytes)
        FAIL("comm: %d transfers of %zu bytes exceed the planned staging of %zu", k, bytes, c->staging_bytes);
    for (int i = 0; i < k; i++) {
        h[i] = c->staging + (size_t)i * bytes;
        if (x[i].send) dev_memcpy_d2h(h[i], x[i].buf, bytes, after);
    }
    stream_synchronize(after);
#endif
    MPI_Request req[COMM_P2P_MAX];
    for (int i = 0; i < k; i++) {
        if (x[i].send) mpiCheck(MPI_Isend(h[i], (int)n, comm_mpi_type(t), x[i].peer, 1 + x[i].tag, c->mpi[g], &req[i]));
        else mpiCheck(MPI_Irecv(h[i], (int)n, comm_mpi_type(t), x[i].peer, 1 + x[i].tag, c->mpi[g], &req[i]));
    }
    for (int i = 0; i < k; i++) comm_mpi_wait(c, &req[i], x[i].send ? "pipeline send" : "pipeline receive", g, n);
#ifndef LLMC_CPU
    for (int i = 0; i < k; i++) if (!x[i].send) dev_memcpy_h2d(x[i].buf, h[i], bytes, after);
#endif
#else
    (void)x; (void)after; (void)bytes;
#endif
}

// Host waits until every collective enqueued so far has completed, at most the timeout
// (NCCL: polling the done event and the communicators' errors; aborts them on expiry).
// Call it before the host waits on a stream that joined the communication stream, so
// that a dead peer ends in a message instead of a stream synchronisation that never returns.
static inline void comm_synchronize(Comm* c) {
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {
        event_record(c->ev_done, c->stream);
        double t0 = comm_now();
        for (long polls = 0;; polls++) {
            cudaError_t e = cudaEventQuery(c->ev_done);
            if (e == cudaSuccess) return;
            if (e != cudaErrorNotReady) cudaCheck(e);
            if (polls > 1000) { struct timespec ts = {0, 200000}; nanosleep(&ts, NULL); }  // as comm_nccl_settle
            for (int g = 0; g < NUM_GROUPS; g++) {
                ncclResult_t state;
                ncclCheck(ncclCommGetAsyncError(c->nccl[g], &state));
                if (state != ncclSuccess && state != ncclInProgress)
                    FAIL("NCCL: the %s communicator failed: %s", GROUP_NAMES[g], ncclGetErrorString(state));
            }
            if (comm_now() - t0 > c->timeout_s) {
                for (int g = 0; g < NUM_GROUPS; g++) ncclCommAbort(c->nccl[g]);
                FAIL("NCCL: collectives did not complete within %.0f s (--comm-timeout): another rank died or hangs; "
                     "communicators aborted", c->timeout_s);
            }
        }
    }
#endif
    stream_synchronize(c->stream);
}

// ----------------------------------------------------------------------------
// host-side collectives: scalars, configuration, checkpoints (blocking, bounded)

static inline void comm_host_all_reduce(Comm* c, CommGroup g, double* v, int n, CommOp op) {
    if (c->group_size[g] == 1) return;
#ifdef USE_MPI
    MPI_Request req;
    mpiCheck(MPI_Iallreduce(MPI_IN_PLACE, v, n, MPI_DOUBLE, op == COMM_SUM ? MPI_SUM : MPI_MAX, c->mpi[g], &req));
    comm_mpi_wait(c, &req, "host all-reduce", g, (size_t)n);
#else
    (void)v; (void)n; (void)op;
#endif
}

// every rank's `bytes` bytes into recv (group_size * bytes) on the group's rank 0
static inline void comm_host_gather(Comm* c, CommGroup g, const void* send, size_t bytes, void* recv) {
    if (c->group_size[g] == 1) { memcpy(recv, send, bytes); return; }
#ifdef USE_MPI
    // in pieces: MPI counts are int
    size_t piece = COMM_MPI_MAX_COUNT;
    int gs = c->group_size[g];
    char* tmp = c->group_rank[g] == 0 ? (char*)xmalloc(piece < bytes ? piece * gs : bytes * gs) : NULL;
    for (size_t off = 0; off < bytes; off += piece) {
        size_t k = bytes - off < piece ? bytes - off : piece;
        MPI_Request req;
        mpiCheck(MPI_Igather((const char*)send + off, (int)k, MPI_BYTE, tmp, (int)k, MPI_BYTE, 0, c->mpi[g], &req));
        comm_mpi_wait(c, &req, "host gather", g, k);
        if (tmp) for (int r = 0; r < gs; r++) memcpy((char*)recv + r * bytes + off, tmp + r * k, k);
    }
    free(tmp);
#else
    (void)send; (void)bytes; (void)recv;
#endif
}

static inline void comm_host_broadcast(Comm* c, CommGroup g, void* buf, size_t bytes, int root) {
    if (c->group_size[g] == 1) return;
#ifdef USE_MPI
    for (size_t off = 0; off < bytes; off += COMM_MPI_MAX_COUNT) {
        size_t k = bytes - off < COMM_MPI_MAX_COUNT ? bytes - off : COMM_MPI_MAX_COUNT;
        MPI_Request req;
        mpiCheck(MPI_Ibcast((char*)buf + off, (int)k, MPI_BYTE, root, c->mpi[g], &req));
        comm_mpi_wait(c, &req, "host broadcast", g, k);
    }
#else
    (void)buf; (void)bytes; (void)root;
#endif
}

// FNV-1a over bytes: the configuration fingerprint
static inline uint64_t fnv1a64(const void* p, size_t n, uint64_t h) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) { h ^= b[i]; h *= 1099511628211ull; }
    return h;
}

// All ranks must run the same configuration: fields (name, value as text) are hashed
// and compared across the world (only MPI_COMM_WORLD is used: it runs before the groups
// are split); a mismatch fails on every rank, naming the first field that differs and
// which ranks have which value. The
// first field names the program: a launch of two programs (mpirun -np 1 A : -np 1 B)
// has ranks with different field lists, which the first exchange (a fixed size: the
// field count, the program and a hash of everything) catches before any exchange whose
// size depends on the list.
#define COMM_CONFIG_VALUE_BYTES 96

typedef struct { uint64_t n, hash; char program[COMM_CONFIG_VALUE_BYTES]; } CommConfigSummary;

static inline void comm_check_same_config(Comm* c, const char* const* names, const char* const* values, int n) {
    if (c->size == 1 || c->backend == BACKEND_SINGLE) return;  // one process, or a plan of many (comm_init_plan)
    uint64_t* mine = (uint64_t*)xmalloc((size_t)n * sizeof(uint64_t));
    CommConfigSummary me;
    memset(&me, 0, sizeof(me));
    me.n = (uint64_t)n; me.hash = 1469598103934665603ull;
    for (int i = 0; i < n; i++) {
        mine[i] = fnv1a64(values[i], strlen(values[i]), 1469598103934665603ull);
        me.hash = fnv1a64(&mine[i], sizeof(uint64_t), me.hash);
    }
    if (n > 0) memcpy(me.program, values[0], strnlen(values[0], sizeof(me.program) - 1));
    CommConfigSummary* sums = (CommConfigSummary*)xmalloc((size_t)c->size * sizeof(CommConfigSummary));
    uint64_t* all = (uint64_t*)xmalloc((size_t)n * c->size * sizeof(uint64_t));
    char* vals = (char*)xmalloc((size_t)c->size * COMM_CONFIG_VALUE_BYTES);
#ifdef USE_MPI
    MPI_Request req;
    mpiCheck(MPI_Iallgather(&me, sizeof(me), MPI_BYTE, sums, sizeof(me), MPI_BYTE, c->mpi[GROUP_WORLD], &req));
    comm_mpi_wait(c, &req, "configuration check (summary)", GROUP_WORLD, 1);
#endif
    int same = 1;
    for (int r = 1; r < c->size; r++) {
        if (sums[r].n != me.n || strcmp(sums[r].program, sums[0].program) != 0)
            FAIL("the ranks run different programs: rank 0 is '%s' (%d configuration fields), rank %d is '%s' (%d); "
                 "one launch trains one model (every rank the same program and flags)", sums[0].program, (int)sums[0].n,
                 r, sums[r].program, (int)sums[r].n);
        if (sums[r].hash != sums[0].hash) same = 0;
    }
    if (!same) {
#ifdef USE_MPI
        mpiCheck(MPI_Iallgather(mine, n * 8, MPI_BYTE, all, n * 8, MPI_BYTE, c->mpi[GROUP_WORLD], &req));
        comm_mpi_wait(c, &req, "configuration check (all-gather)", GROUP_WORLD, (size_t)n);
#endif
        int bad_field = -1;
        for (int i = 0; i < n && bad_field < 0; i++)
            for (int r = 1; r < c->size; r++)
                if (all[(size_t)r * n + i] != all[i]) { bad_field = i; break; }
        if (bad_field >= 0) {
            // a long value as its start and its end: two paths that differ late show where
            char v[COMM_CONFIG_VALUE_BYTES] = {0};
            size_t len = strlen(values[bad_field]), keep = COMM_CONFIG_VALUE_BYTES - 1;
            if (len <= keep) snprintf(v, sizeof(v), "%s", values[bad_field]);
            else snprintf(v, sizeof(v), "%.40s...%s", values[bad_field], values[bad_field] + len - (keep - 43));
#ifdef USE_MPI
            mpiCheck(MPI_Iallgather(v, COMM_CONFIG_VALUE_BYTES, MPI_BYTE, vals, COMM_CONFIG_VALUE_BYTES, MPI_BYTE,
                                    c->mpi[GROUP_WORLD], &req));
            comm_mpi_wait(c, &req, "configuration check (values)", GROUP_WORLD, 1);
#endif
            // which ranks have which value, the values in the order of their first rank
            char msg[2048] = "";
            int* done = (int*)calloc((size_t)c->size, sizeof(int));
            for (int r = 0; r < c->size; r++) {
                if (done[r]) continue;
                uint64_t h = all[(size_t)r * n + bad_field];
                int count = 0;
                for (int q = r; q < c->size; q++) count += all[(size_t)q * n + bad_field] == h;
                size_t len = strlen(msg);
                snprintf(msg + len, sizeof(msg) - len, "%s'%s' on rank%s", len ? "; " : "",
                         vals + (size_t)r * COMM_CONFIG_VALUE_BYTES, count > 1 ? "s" : "");
                for (int q = r, k = 0; q < c->size; q++) {
                    if (all[(size_t)q * n + bad_field] != h) continue;
                    done[q] = 1;
                    len = strlen(msg);
                    snprintf(msg + len, sizeof(msg) - len, "%s %d", k++ ? "," : "", q);
                }
            }
            free(done);
            FAIL("the ranks disagree on the configuration: %s is %s (every rank must get the same flags, model and batch)",
                 names[bad_field], msg);
        }
    }
    free(mine); free(sums); free(all); free(vals);
}

static inline void comm_finalize(Comm* c) {
    if (c->stream || c->ev_ready) {
        comm_synchronize(c);
        event_destroy(c->ev_ready); event_destroy(c->ev_done); stream_destroy(c->stream);
    }
#if !defined(LLMC_CPU) && defined(USE_NCCL)
    if (c->backend == BACKEND_NCCL) {
        // NCCL's order for a non-blocking communicator: ncclCommFinalize flushes what was
        // issued and returns in progress; once ncclCommGetAsyncError says ncclSuccess the
        // ranks are quiescent and ncclCommDestroy frees local resources without blocking.
        // Destroying without it leaves the flush to destroy, unbounded by --comm-timeout.
        for (int g = 0; g < NUM_GROUPS; g++) {
            ncclCheck(ncclCommFinalize(c->nccl[g]));
            comm_nccl_settle(c, c->nccl[g], "ncclCommFinalize");
        }
        for (int g = 0; g < NUM_GROUPS; g++) ncclCheck(ncclCommDestroy(c->nccl[g]));
    }
#endif
#ifdef USE_MPI
    if (c->mpi_initialised) {
        for (int g = 0; g < NUM_GROUPS; g++) mpiCheck(MPI_Comm_free(&c->mpi[g]));
#if !defined(LLMC_CPU) && !defined(ENABLE_FP32)
        mpiCheck(MPI_Op_free(&c->op_sum_bf16)); mpiCheck(MPI_Op_free(&c->op_max_bf16));
#endif
        mpiCheck(MPI_Finalize());
    }
#endif
    c->mpi_initialised = 0;
}
