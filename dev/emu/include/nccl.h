/*
Shim for host emulation (dev/emu): the NCCL API subset that llmc/parallel/comm.h uses, so that the
`--comm nccl` path of the CUDA build runs under the emulator, several ranks under mpirun.
Each rank is a process of its own and the emulator's "device" memory is host memory, so the
data moves through MPI between the processes. It is NOT NCCL: no algorithms, no rings or
channels, no performance, no GPU. What it checks is how the caller drives NCCL's
NON-BLOCKING mode (ncclConfig_t.blocking = 0), the mode comm.h uses so that every wait can
time out and abort. See dev/emu/README.md, "NCCL (include/nccl.h)".

The model
  - Calls complete LATER. A call on a non-blocking communicator (init, a collective,
    finalize) returns ncclInProgress and completes after a random number (0 to
    EMU_NCCL_POLLS=N, default 3, or A to B with EMU_NCCL_POLLS=A-B; seeded by EMU_NCCL_SEED
    and the rank) of polls of
    ncclCommGetAsyncError; 0 polls means it completed in the call, which returns ncclSuccess.
    Completing a collective is what NCCL calls enqueuing it: its work is then put on its
    CUDA stream (emu.h's stream model), and it runs in stream order when the emulated
    stream runs it, reading its input then, so a collective that is not ordered after
    the kernels producing its input (or a consumer not ordered after it) sees stale data.
  - Running a collective: every rank first exchanges a header (kind, count, type,
    operation, root, its sequence number on the communicator) and the run stops with an
    error if the ranks disagree; then the data moves by non-blocking MPI, waited for at
    most EMU_NCCL_TIMEOUT seconds (default 120). Reductions are computed the same way on
    every rank, in rank order, in fp32 with the result rounded to the element type after
    each addition (bf16: as NCCL's ring does it; with 2 ranks a single rounding of a + b).
    Types: ncclFloat32, ncclBfloat16; operations ncclSum, ncclMax, ncclMin.
  - Point-to-point (ncclSend, ncclRecv; comm.h's all-to-all and send-recv): the k-th send
    from rank a to rank b on a communicator matches the k-th receive from a on b, and their
    counts and types must agree (an error otherwise). Between ncclGroupStart and the
    outermost ncclGroupEnd the calls are collected; ncclGroupEnd launches them together, as
    one call that completes like a collective (ncclInProgress, polls) and runs on the stream
    as one operation; an ungrouped call is a group of its own. A send completes only once the
    peer's matching receive runs at the same time (NCCL's kernels wait for each other; here
    MPI_Issend), so a ring of sends each issued before its receive, ungrouped, deadlocks as
    it does in NCCL and ends at EMU_NCCL_TIMEOUT in an error naming the call, while the same
    calls grouped run. A send to the rank itself is matched like any other.
  - Errors the caller must be told about are ASYNC: ncclCommGetAsyncError reports them
    (sticky), as NCCL does for a peer that died or a network failure.
Rules (a violation is an emulator error, EMU_ERROR, exit 3; NCCL's documented contract):
  1. After a call returned ncclInProgress, no other NCCL call on that communicator (except
     ncclCommGetAsyncError and ncclCommAbort) before ncclCommGetAsyncError says ncclSuccess.
  2. No use of the call's stream in that time (an operation issued on it, an event recorded
     on it, a synchronisation of it): the collective is not on the stream yet, so that work
     or that event would be ordered before it (emu.h's stream_use_hook).
  3. A communicator is used only once its initialisation completed, never after
     ncclCommFinalize, ncclCommDestroy or ncclCommAbort.
  4. ncclCommDestroy only after ncclCommFinalize has completed (ncclCommGetAsyncError
     returned ncclSuccess after it): NCCL's ncclCommFinalize flushes the issued collectives
     and makes the communicator globally quiescent, so that destroy frees local resources
     without blocking. Destroying without it is an error here.
  5. Buffers are device memory (inside one cudaMalloc allocation), of the sizes the call
     implies; in-place only in the forms NCCL defines (ReduceScatter: recvbuff == sendbuff +
     rank * recvcount; AllGather: sendbuff == recvbuff + rank * sendcount; AllReduce and
     Broadcast: sendbuff == recvbuff), otherwise the buffers must not overlap.
  6. A group of ncclSend/ncclRecv: no receive buffer overlaps another call's buffer; ncclGroupEnd
     only after ncclGroupStart.
Fault injection, so that tests can show the caller's error handling works
(EMU_NCCL_FAULT, on every rank; K counts this process's collective calls and point-to-point
groups from 1):
  call_error:K  the K-th collective fails to enqueue: its completion reports
                ncclRemoteError through ncclCommGetAsyncError (as if a peer had died)
  run_error:K   the K-th collective fails while it runs on the stream: it moves no data,
                leaves its output (a group: every receive buffer) NaN (0xFF bytes) and the communicator reports
                ncclRemoteError from then on
  stuck:K       the K-th collective never completes (ncclCommGetAsyncError says
                ncclInProgress for ever): the caller's timeout and ncclCommAbort must end it
  no_finalize   ncclCommFinalize does nothing (a caller that skips it): rule 4 must fire
At exit (normal or exit(1) from FAIL()) it prints to stderr
  EMU_NCCL comms=N ready=N finalized=N destroyed=N aborted=N calls=N ran=N in_progress=N polls=N groups=N fault=...
(calls: collectives and point-to-point groups enqueued; ran: of them run on their stream;
in_progress: calls that returned ncclInProgress; groups: the point-to-point groups among
calls). run_trainer.sh checks every communicator was destroyed and every collective ran.
Limits: every rank of MPI_COMM_WORLD must call ncclCommInitRankConfig the same number of
times in the same order (it splits MPI_COMM_WORLD; comm.h creates its world, TP and DP
communicators on every rank in that order); groups only of ncclSend/ncclRecv, on one
communicator and one stream (collectives inside a group are an error); no ncclCommSplit; at
most INT_MAX bytes per rank and collective (per call for point-to-point).
*/
#pragma once
#include <mpi.h>
#include <limits.h>
#include <time.h>
#include "cuda_runtime.h"
#include "cuda_bf16.h"

#define NCCL_MAJOR 2
#define NCCL_MINOR 19
#define NCCL_PATCH 3
#define NCCL_VERSION(X, Y, Z) (((X) <= 2 && (Y) <= 8) ? (X) * 1000 + (Y) * 100 + (Z) : (X) * 10000 + (Y) * 100 + (Z))
#define NCCL_VERSION_CODE NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH)

typedef enum {
    ncclSuccess = 0,
    ncclUnhandledCudaError = 1,
    ncclSystemError = 2,
    ncclInternalError = 3,
    ncclInvalidArgument = 4,
    ncclInvalidUsage = 5,
    ncclRemoteError = 6,
    ncclInProgress = 7,
    ncclNumResults = 8
} ncclResult_t;
typedef enum {
    ncclInt8 = 0, ncclChar = 0, ncclUint8 = 1, ncclInt32 = 2, ncclInt = 2, ncclUint32 = 3, ncclInt64 = 4,
    ncclUint64 = 5, ncclFloat16 = 6, ncclHalf = 6, ncclFloat32 = 7, ncclFloat = 7, ncclFloat64 = 8, ncclDouble = 8,
    ncclBfloat16 = 9, ncclNumTypes = 10
} ncclDataType_t;
typedef enum { ncclSum = 0, ncclProd = 1, ncclMax = 2, ncclMin = 3, ncclAvg = 4, ncclNumOps = 5 } ncclRedOp_t;

#define NCCL_UNIQUE_ID_BYTES 128
typedef struct { char internal[NCCL_UNIQUE_ID_BYTES]; } ncclUniqueId;

#define NCCL_CONFIG_UNDEF_INT INT_MIN
#define NCCL_CONFIG_UNDEF_PTR NULL
typedef struct ncclConfig_v21700 {
    size_t size;
    unsigned int magic;
    unsigned int version;
    int blocking;
    int cgaClusterSize;
    int minCTAs;
    int maxCTAs;
    const char* netName;
    int splitShare;
} ncclConfig_t;
#define NCCL_CONFIG_INITIALIZER                                                                                       \
    {                                                                                                                 \
        sizeof(ncclConfig_t), 0xcafebeef, NCCL_VERSION(NCCL_MAJOR, NCCL_MINOR, NCCL_PATCH), NCCL_CONFIG_UNDEF_INT,    \
            NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_INT, NCCL_CONFIG_UNDEF_PTR,               \
            NCCL_CONFIG_UNDEF_INT                                                                                     \
    }

typedef struct ncclComm* ncclComm_t;

struct ncclComm {
    int index;                       // creation order in this process (named in messages)
    MPI_Comm mpi;                    // the ranks of this communicator, split from MPI_COMM_WORLD
    int rank, nranks;
    bool blocking;
    // the call in progress (non-blocking mode): it completes at the polls_left-th poll
    const char* pending;
    int polls_left;
    CUstream_st* pending_stream;     // its stream (a collective's), which must not be used meanwhile
    std::function<ncclResult_t()> complete;
    ncclResult_t async_error;        // sticky, reported by ncclCommGetAsyncError
    bool ready, finalizing, finalized, destroyed, aborted;
    unsigned long long calls, ran;   // collectives and point-to-point groups enqueued on streams / run there
    unsigned long long colls;        // collectives enqueued (their sequence number, the same on every rank)
    unsigned long long p2p_groups;   // point-to-point groups enqueued (a part of calls)
    std::vector<unsigned long long> sends, recvs;  // ncclSend / ncclRecv enqueued, by peer (their MPI tags)
    CUstream_st* last_stream;        // where its last collective was enqueued, and at which position
    unsigned long long last_seq;
};

namespace emu_nccl {
enum Fault { FAULT_NONE, FAULT_CALL_ERROR, FAULT_RUN_ERROR, FAULT_STUCK, FAULT_NO_FINALIZE };
enum Kind { K_ALL_REDUCE, K_REDUCE_SCATTER, K_ALL_GATHER, K_BROADCAST };
inline const char* KIND_NAMES[] = {"ncclAllReduce", "ncclReduceScatter", "ncclAllGather", "ncclBroadcast"};

// a ncclSend or ncclRecv, from its call until it has run on its stream
struct P2P {
    bool send;
    const void* sbuf;                // ncclSend's
    void* rbuf;                      // ncclRecv's
    size_t count;
    ncclDataType_t type;
    int peer;
    ncclComm* c;
    cudaStream_t stream;
    unsigned long long k;            // its number among this rank's sends to (receives from) peer on c: the MPI tags
};

struct State {
    std::vector<ncclComm*> comms;    // every communicator created (kept after destroy, to catch use after it)
    int ids_made = 0;                // ncclGetUniqueId calls in this process
    unsigned long long calls = 0;    // collective calls in this process (EMU_NCCL_FAULT's K)
    unsigned long long in_progress = 0, polls = 0;
    uint64_t rng = 0;
    int min_polls = 0, max_polls = 3;  // a call completes after min..max polls (EMU_NCCL_POLLS)
    double timeout_s = 120.0;
    Fault fault = FAULT_NONE;
    unsigned long long fault_k = 0;
    const char* fault_text = "none";
    bool configured = false;
    int group_depth = 0;             // ncclGroupStart nesting
    std::vector<struct P2P> group;   // the point-to-point calls of the open group
};
inline State& st() { static State s; return s; }

inline int world_rank() {
    int init = 0, r = -1;
    if (MPI_Initialized(&init) != MPI_SUCCESS || !init) return -1;
    if (MPI_Comm_rank(MPI_COMM_WORLD, &r) != MPI_SUCCESS) return -1;
    return r;
}

#define EMU_MPI(call) do { int e_ = (call); if (e_ != MPI_SUCCESS) { char m_[MPI_MAX_ERROR_STRING]; int l_ = 0; \
    MPI_Error_string(e_, m_, &l_); ::emu::error("emulated NCCL: %s failed: %s", #call, m_); } } while (0)

inline void report();
// the environment, read at the first NCCL call (MPI is initialised by then: the seed uses the rank)
inline void configure() {
    State& s = st();
    if (s.configured) return;
    s.configured = true;
    const char* p = getenv("EMU_NCCL_POLLS");
    if (p && *p) {
        int n = sscanf(p, "%d-%d", &s.min_polls, &s.max_polls);
        if (n == 1) { s.max_polls = s.min_polls; s.min_polls = 0; }
        if (n < 1 || s.min_polls < 0 || s.max_polls < s.min_polls)
            ::emu::error("emulated NCCL: EMU_NCCL_POLLS must be N (0 to N polls) or A-B (A to B polls), got '%s'", p);
    }
    const char* t = getenv("EMU_NCCL_TIMEOUT");
    if (t && *t) { s.timeout_s = atof(t); if (!(s.timeout_s > 0)) ::emu::error("emulated NCCL: EMU_NCCL_TIMEOUT must be > 0"); }
    const char* seed = getenv("EMU_NCCL_SEED");
    s.rng = (seed && *seed ? strtoull(seed, NULL, 10) : 1) * 0x9E3779B97F4A7C15ull + (uint64_t)(world_rank() + 1) * 0xD1B54A32D192ED03ull;
    if (!s.rng) s.rng = 1;
    const char* f = getenv("EMU_NCCL_FAULT");
    if (f && *f) {
        s.fault_text = f;
        unsigned long long k = 0;
        if (sscanf(f, "call_error:%llu", &k) == 1) s.fault = FAULT_CALL_ERROR;
        else if (sscanf(f, "run_error:%llu", &k) == 1) s.fault = FAULT_RUN_ERROR;
        else if (sscanf(f, "stuck:%llu", &k) == 1) s.fault = FAULT_STUCK;
        else if (strcmp(f, "no_finalize") == 0) s.fault = FAULT_NO_FINALIZE;
        else ::emu::error("emulated NCCL: EMU_NCCL_FAULT must be call_error:K, run_error:K, stuck:K or no_finalize, got '%s'", f);
        if (s.fault != FAULT_NO_FINALIZE && k < 1) ::emu::error("emulated NCCL: EMU_NCCL_FAULT's K counts from 1, got '%s'", f);
        s.fault_k = k;
    }
    (void)s.comms;  // constructed before atexit(report), so destroyed after it runs
    atexit(report);
}
inline int draw_polls() {
    State& s = st();
    s.rng ^= s.rng << 13; s.rng ^= s.rng >> 7; s.rng ^= s.rng << 17;
    return s.min_polls + (int)(s.rng % (uint64_t)(s.max_polls - s.min_polls + 1));
}

inline void report() {
    State& s = st();
    int ready = 0, fin = 0, des = 0, ab = 0;
    unsigned long long calls = 0, ran = 0, groups = 0;
    for (ncclComm* c : s.comms) {
        ready += c->ready; fin += c->finalized; des += c->destroyed; ab += c->aborted; calls += c->calls; ran += c->ran;
        groups += c->p2p_groups;
    }
    fflush(stdout);
    fprintf(stderr, "EMU_NCCL comms=%zu ready=%d finalized=%d destroyed=%d aborted=%d calls=%llu ran=%llu in_progress=%llu polls=%llu groups=%llu fault=%s\n",
            s.comms.size(), ready, fin, des, ab, calls, ran, s.in_progress, s.polls, groups, s.fault_text);
    fflush(stderr);
}

inline ncclComm* find(ncclComm_t c) {
    for (ncclComm* k : st().comms) if (k == c) return k;
    return nullptr;
}
// rule 3, and rule 1 for every call but ncclCommGetAsyncError and ncclCommAbort
inline ncclComm* usable(ncclComm_t c, const char* what) {
    configure();
    ncclComm* k = find(c);
    if (!k) ::emu::error("emulated NCCL: %s on %p, which is not a communicator ncclCommInitRankConfig created", what, (void*)c);
    if (k->destroyed) ::emu::error("emulated NCCL: %s on communicator %d after ncclCommDestroy", what, k->index);
    if (k->aborted) ::emu::error("emulated NCCL: %s on communicator %d after ncclCommAbort", what, k->index);
    if (k->pending)
        ::emu::error("emulated NCCL: %s on communicator %d while its %s is still in progress: in non-blocking mode poll "
                     "ncclCommGetAsyncError until it returns ncclSuccess before the next call", what, k->index, k->pending);
    if (!k->ready)
        ::emu::error("emulated NCCL: %s on communicator %d before its initialisation completed (poll ncclCommGetAsyncError "
                     "until ncclSuccess after ncclCommInitRankConfig)", what, k->index);
    if (k->finalizing || k->finalized)
        ::emu::error("emulated NCCL: %s on communicator %d after ncclCommFinalize", what, k->index);
    return k;
}

// rule 2: nothing may use the stream of a collective that is still in progress
inline void on_stream_use(CUstream_st* s, const char* what) {
    for (ncclComm* c : st().comms)
        if (c->pending && c->pending_stream == s && !c->aborted)
            ::emu::error("emulated NCCL: %s on stream %d while %s on it (communicator %d) is still in progress: NCCL has "
                         "not enqueued the collective yet, so this would be ordered before it; poll ncclCommGetAsyncError "
                         "until ncclSuccess first", what, s->id, c->pending, c->index);
}

// starts a call: completes now (0 polls, or a blocking communicator) or at a later poll
inline ncclResult_t start(ncclComm* c, const char* what, CUstream_st* stream, bool stuck, std::function<ncclResult_t()> take) {
    int polls = c->blocking ? 0 : draw_polls();
    if (stuck) polls = INT_MAX;  // never completes: only the caller's timeout ends it
    if (polls == 0) {
        ncclResult_t r = take();
        if (r != ncclSuccess) c->async_error = r;
        return r;
    }
    c->pending = what; c->polls_left = polls; c->pending_stream = stream; c->complete = std::move(take);
    st().in_progress++;
    return ncclInProgress;
}

inline size_t type_bytes(ncclDataType_t t, const char* what) {
    if (t == ncclFloat32) return 4;
    if (t == ncclBfloat16) return 2;
    ::emu::error("emulated NCCL: %s with data type %d: only ncclFloat32 and ncclBfloat16 are emulated", what, (int)t);
}
inline float load(const void* p, size_t i, ncclDataType_t t) {
    return t == ncclFloat32 ? ((const float*)p)[i] : __bfloat162float(((const __nv_bfloat16*)p)[i]);
}
inline void store(void* p, size_t i, ncclDataType_t t, float v) {
    if (t == ncclFloat32) ((float*)p)[i] = v;
    else ((__nv_bfloat16*)p)[i] = __float2bfloat16(v);
}
// out[i] = contributions of rank 0, 1, ... combined in that order, rounded to the type after each step
inline void reduce(void* out, const char* parts, size_t stride_bytes, int nranks, size_t n, ncclDataType_t t, ncclRedOp_t op) {
    for (size_t i = 0; i < n; i++) {
        float acc = load(parts, i, t);
        for (int r = 1; r < nranks; r++) {
            float v = load(parts + (size_t)r * stride_bytes, i, t);
            acc = op == ncclSum ? acc + v : op == ncclMax ? fmaxf(acc, v) : fminf(acc, v);
            if (t == ncclBfloat16) acc = __bfloat162float(__float2bfloat16(acc));
        }
        store(out, i, t, acc);
    }
}

// a non-blocking MPI request, waited for at most EMU_NCCL_TIMEOUT (a peer that never runs
// the same collective would otherwise hang the run)
inline void wait(MPI_Request* req, ncclComm* c, const char* what, unsigned long long seq) {
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spins = 0;; spins++) {
        int done = 0;
        EMU_MPI(MPI_Test(req, &done, MPI_STATUS_IGNORE));
        if (done) return;
        if (spins > 1000) { struct timespec ts = {0, 200000}; nanosleep(&ts, NULL); }  // leave the core to the peer
        struct timespec t1; clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec) > st().timeout_s)
            ::emu::error("emulated NCCL: %s #%llu of communicator %d (rank %d of %d) did not complete within %g s "
                         "(EMU_NCCL_TIMEOUT): a peer never ran the matching collective (it died, hangs, or its "
                         "streams have not reached it)", what, seq, c->index, c->rank, c->nranks, st().timeout_s);
    }
}

struct Coll {
    Kind kind;
    const void* send;
    void* recv;
    size_t count;  // AllReduce, Broadcast: elements; ReduceScatter: recvcount; AllGather: sendcount
    ncclDataType_t type;
    ncclRedOp_t op;
    int root;
};
struct Header { long long kind, count, type, op, root, seq; };

inline void describe(char* buf, size_t n, const Header& h) {
    snprintf(buf, n, "%s #%lld of %lld elements, type %lld, op %lld, root %lld", KIND_NAMES[h.kind], h.seq, h.count, h.type,
             h.op, h.root);
}

// runs on the collective's stream, when the emulated stream reaches it
inline void run(ncclComm* c, Coll x, unsigned long long seq, unsigned long long nth) {
    const char* what = KIND_NAMES[x.kind];
    if (c->aborted) return;  // ncclCommAbort drops what was enqueued
    size_t es = x.type == ncclFloat32 ? 4 : 2, bytes = x.count * es;
    size_t out_bytes = (x.kind == K_ALL_GATHER ? (size_t)c->nranks : 1) * bytes;
    if (st().fault == FAULT_RUN_ERROR && nth == st().fault_k) {
        memset(x.recv, 0xFF, out_bytes);  // whatever reads it sees NaN
        c->async_error = ncclRemoteError;
        c->ran++;
        return;
    }
    // the ranks must run the same collective (NCCL would hang or mix up data)
    Header mine = {x.kind, (long long)x.count, x.type, x.kind == K_ALL_GATHER ? -1 : x.op, x.kind == K_BROADCAST ? x.root : -1,
                   (long long)seq};
    std::vector<Header> all(c->nranks);
    MPI_Request req;
    EMU_MPI(MPI_Iallgather(&mine, (int)sizeof(Header), MPI_BYTE, all.data(), (int)sizeof(Header), MPI_BYTE, c->mpi, &req));
    wait(&req, c, what, seq);
    for (int r = 0; r < c->nranks; r++)
        if (memcmp(&all[r], &mine, sizeof(Header)) != 0) {
            char a[200], b[200];
            describe(a, sizeof a, mine); describe(b, sizeof b, all[r]);
            ::emu::error("emulated NCCL: the ranks of communicator %d run different collectives: rank %d runs %s, rank %d "
                         "runs %s", c->index, c->rank, a, r, b);
        }
    if (bytes == 0) { c->ran++; return; }
    int ib = (int)bytes;
    switch (x.kind) {
        case K_ALL_REDUCE: {
            std::vector<char> parts((size_t)c->nranks * bytes);
            EMU_MPI(MPI_Iallgather(x.send, ib, MPI_BYTE, parts.data(), ib, MPI_BYTE, c->mpi, &req));
            wait(&req, c, what, seq);
            reduce(x.recv, parts.data(), bytes, c->nranks, x.count, x.type, x.op);
            break;
        }
        case K_REDUCE_SCATTER: {
            // block r of every rank's send buffer goes to rank r
            std::vector<char> parts((size_t)c->nranks * bytes);
            EMU_MPI(MPI_Ialltoall(x.send, ib, MPI_BYTE, parts.data(), ib, MPI_BYTE, c->mpi, &req));
            wait(&req, c, what, seq);
            reduce(x.recv, parts.data(), bytes, c->nranks, x.count, x.type, x.op);
            break;
        }
        case K_ALL_GATHER: {
            std::vector<char> parts((size_t)c->nranks * bytes);
            EMU_MPI(MPI_Iallgather(x.send, ib, MPI_BYTE, parts.data(), ib, MPI_BYTE, c->mpi, &req));
            wait(&req, c, what, seq);
            memcpy(x.recv, parts.data(), parts.size());
            break;
        }
        case K_BROADCAST: {
            std::vector<char> buf(bytes);
            if (c->rank == x.root) memcpy(buf.data(), x.send, bytes);
            EMU_MPI(MPI_Ibcast(buf.data(), ib, MPI_BYTE, x.root, c->mpi, &req));
            wait(&req, c, what, seq);
            memcpy(x.recv, buf.data(), bytes);
            break;
        }
    }
    c->ran++;
}

inline bool overlap(const void* a, size_t na, const void* b, size_t nb) {
    return na && nb && (const char*)a < (const char*)b + nb && (const char*)b < (const char*)a + na;
}
// rule 5 and the checks every collective makes, then the call itself
inline ncclResult_t collective(ncclComm_t comm, Coll x, cudaStream_t stream) {
    const char* what = KIND_NAMES[x.kind];
    ncclComm* c = usable(comm, what);
    if (st().group_depth > 0)
        ::emu::error("emulated NCCL: %s inside ncclGroupStart/ncclGroupEnd: groups of collectives are not emulated (only of "
                     "ncclSend and ncclRecv)", what);
    if (!::emu::valid_stream(stream)) ::emu::error("emulated NCCL: %s on an invalid or destroyed stream", what);
    size_t es = type_bytes(x.type, what);
    if (x.kind != K_ALL_GATHER && x.op != ncclSum && x.op != ncclMax && x.op != ncclMin)
        ::emu::error("emulated NCCL: %s with reduction %d: only ncclSum, ncclMax and ncclMin are emulated", what, (int)x.op);
    if (x.kind == K_BROADCAST && (x.root < 0 || x.root >= c->nranks))
        ::emu::error("emulated NCCL: ncclBroadcast from root %d of a communicator of %d ranks", x.root, c->nranks);
    if (x.count > (size_t)INT_MAX / es / (size_t)c->nranks)
        ::emu::error("emulated NCCL: %s of %zu elements: more than the shim moves at once (INT_MAX bytes)", what, x.count);
    size_t in = (x.kind == K_REDUCE_SCATTER ? (size_t)c->nranks : 1) * x.count * es;
    size_t out = (x.kind == K_ALL_GATHER ? (size_t)c->nranks : 1) * x.count * es;
    bool needs_send = x.kind != K_BROADCAST || c->rank == x.root;
    if (in && needs_send && !::emu::is_device(x.send, in))
        ::emu::error("emulated NCCL: %s: sendbuff %p (%zu bytes) is not inside one device allocation", what, x.send, in);
    if (out && !::emu::is_device(x.recv, out))
        ::emu::error("emulated NCCL: %s: recvbuff %p (%zu bytes) is not inside one device allocation", what, x.recv, out);
    const char* s = (const char*)x.send;
    char* r = (char*)x.recv;
    bool in_place = (x.kind == K_REDUCE_SCATTER) ? r == s + (size_t)c->rank * x.count * es
                  : (x.kind == K_ALL_GATHER) ? s == r + (size_t)c->rank * x.count * es
                  : s == r;
    if (needs_send && !in_place && overlap(s, in, r, out))
        ::emu::error("emulated NCCL: %s: sendbuff and recvbuff overlap but are not in place the way NCCL defines it", what);
    State& g = st();
    unsigned long long nth = ++g.calls;
    unsigned long long seq = c->colls;  // its position among the communicator's collectives (the same on every rank)
    CUstream_st* cs = ::emu::stream_of(stream);
    bool fail_now = g.fault == FAULT_CALL_ERROR && nth == g.fault_k;
    auto take = [c, x, stream, cs, seq, nth, fail_now]() -> ncclResult_t {
        c->pending = nullptr;
        if (fail_now) return ncclRemoteError;  // the collective never reaches the stream
        ::emu::submit(stream, [c, x, seq, nth]() { run(c, x, seq, nth); });
        c->calls++;
        c->colls++;
        c->last_stream = cs; c->last_seq = cs->enq;
        return ncclSuccess;
    };
    return start(c, what, cs, g.fault == FAULT_STUCK && nth == g.fault_k, take);
}

// ---- point-to-point (ncclSend, ncclRecv) and groups (ncclGroupStart, ncclGroupEnd)
// NCCL matches the k-th ncclSend from rank a to rank b on a communicator with the k-th
// ncclRecv from a on b; counts and types must agree. A send completes only when the peer's
// receive runs at the same time (NCCL's kernels wait for each other), so two ranks that each
// issue a send to the other before the matching receive deadlock unless the calls are in one
// group: ncclGroupEnd launches the group's calls together. Here each call is two MPI messages
// on the communicator with tags from k: a header (count, type) and the data, sent with
// MPI_Issend, which completes only once the peer has posted the matching receive, the
// receiver posting the data receive only after it has run the header check. So a send whose
// receive is never running at the same time (ungrouped pairs in a ring) never completes:
// after EMU_NCCL_TIMEOUT the run stops with an error naming it.
struct P2PHeader { long long count, type, k; };

inline const char* p2p_name(const P2P& o) { return o.send ? "ncclSend" : "ncclRecv"; }

// runs on the stream when the emulated stream reaches the group: every call of the group at once
inline void run_p2p(ncclComm* c, std::vector<P2P> ops, unsigned long long nth) {
    if (c->aborted) return;  // ncclCommAbort drops what was enqueued
    if (st().fault == FAULT_RUN_ERROR && nth == st().fault_k) {
        for (const P2P& o : ops)
            if (!o.send) memset(o.rbuf, 0xFF, o.count * (o.type == ncclFloat32 ? 4 : 2));  // whatever reads it sees NaN
        c->async_error = ncclRemoteError;
        c->ran++;
        return;
    }
    size_t n = ops.size();
    std::vector<P2PHeader> hs(n);
    std::vector<MPI_Request> hreq(n, MPI_REQUEST_NULL), dreq(n, MPI_REQUEST_NULL);
    std::vector<char> hdone(n, 0), ddone(n, 0), posted(n, 0);
    for (size_t i = 0; i < n; i++) {
        const P2P& o = ops[i];
        int tag = (int)(o.k % 16384) * 2;  // 2 tags a call, within the 32767 MPI guarantees
        size_t bytes = o.count * (o.type == ncclFloat32 ? 4 : 2);
        if (o.send) {
            hs[i] = {(long long)o.count, (long long)o.type, (long long)o.k};
            EMU_MPI(MPI_Isend(&hs[i], (int)sizeof(P2PHeader), MPI_BYTE, o.peer, tag, c->mpi, &hreq[i]));
            EMU_MPI(MPI_Issend(o.sbuf, (int)bytes, MPI_BYTE, o.peer, tag + 1, c->mpi, &dreq[i]));
            posted[i] = 1;
        } else {
            EMU_MPI(MPI_Irecv(&hs[i], (int)sizeof(P2PHeader), MPI_BYTE, o.peer, tag, c->mpi, &hreq[i]));
        }
    }
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    for (long spins = 0;; spins++) {
        bool all = true;
        for (size_t i = 0; i < n; i++) {
            const P2P& o = ops[i];
            int done = 0;
            if (!hdone[i]) { EMU_MPI(MPI_Test(&hreq[i], &done, MPI_STATUS_IGNORE)); hdone[i] = (char)done; }
            if (hdone[i] && !posted[i]) {  // a receive: its header has come
                if (hs[i].count != (long long)o.count || hs[i].type != (long long)o.type)
                    ::emu::error("emulated NCCL: ncclRecv of %zu elements of type %d from rank %d (communicator %d, rank %d of "
                                 "%d; its receive #%llu from that rank), but rank %d sent %lld elements of type %lld: a send "
                                 "and its receive must have the same count and type", o.count, (int)o.type, o.peer, c->index,
                                 c->rank, c->nranks, o.k + 1, o.peer, hs[i].count, hs[i].type);
                EMU_MPI(MPI_Irecv(o.rbuf, (int)(o.count * (o.type == ncclFloat32 ? 4 : 2)), MPI_BYTE, o.peer,
                                  (int)(o.k % 16384) * 2 + 1, c->mpi, &dreq[i]));
                posted[i] = 1;
            }
            if (posted[i] && !ddone[i]) { EMU_MPI(MPI_Test(&dreq[i], &done, MPI_STATUS_IGNORE)); ddone[i] = (char)done; }
            all = all && hdone[i] && ddone[i];
        }
        if (all) break;
        if (spins > 1000) { struct timespec ts = {0, 200000}; nanosleep(&ts, NULL); }  // leave the core to the peer
        struct timespec t1; clock_gettime(CLOCK_MONOTONIC, &t1);
        if ((t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec) > st().timeout_s) {
            size_t i = 0;
            while (i < n && hdone[i] && ddone[i]) i++;
            const P2P& o = ops[i];
            ::emu::error("emulated NCCL: %s of %zu elements %s rank %d (communicator %d, rank %d of %d; its %s #%llu %s that "
                         "rank, in a group of %zu calls) did not complete within %g s (EMU_NCCL_TIMEOUT): rank %d never ran the "
                         "matching %s at the same time (it died, hangs, its streams have not reached it, or it waits itself: a "
                         "send and a receive that two ranks issue to each other must be in one ncclGroupStart/ncclGroupEnd, "
                         "or they deadlock)", p2p_name(o), o.count, o.send ? "to" : "from", o.peer, c->index, c->rank,
                         c->nranks, o.send ? "send" : "receive", o.k + 1, o.send ? "to" : "from", n, st().timeout_s, o.peer,
                         o.send ? "ncclRecv" : "ncclSend");
        }
    }
    c->ran++;
}

// ncclGroupEnd (or an ungrouped call): the group's calls enqueued together, completing
// like a collective (now, or after some polls of ncclCommGetAsyncError)
inline ncclResult_t group_launch(const char* what) {
    State& g = st();
    std::vector<P2P> ops = std::move(g.group);
    g.group.clear();
    if (ops.empty()) return ncclSuccess;
    ncclComm* c = usable(ops[0].c, what);
    CUstream_st* cs = ::emu::stream_of(ops[0].stream);
    cudaStream_t stream = ops[0].stream;
    for (const P2P& o : ops)
        if (o.c != c || ::emu::stream_of(o.stream) != cs)
            ::emu::error("emulated NCCL: %s of calls on more than one communicator or stream: not emulated (comm.h groups "
                         "the sends and receives of one communicator on one stream)", what);
    // a receive buffer must not overlap another call's buffer (NCCL defines no in-place point-to-point)
    for (size_t i = 0; i < ops.size(); i++)
        for (size_t j = 0; j < ops.size(); j++) {
            if (i == j || ops[i].send) continue;
            size_t bi = ops[i].count * type_bytes(ops[i].type, what), bj = ops[j].count * type_bytes(ops[j].type, what);
            if (overlap(ops[i].rbuf, bi, ops[j].send ? ops[j].sbuf : ops[j].rbuf, bj))
                ::emu::error("emulated NCCL: %s: the receive buffer of ncclRecv from rank %d overlaps the buffer of %s %s rank %d "
                             "in the same group", what, ops[i].peer, p2p_name(ops[j]), ops[j].send ? "to" : "from", ops[j].peer);
        }
    unsigned long long nth = ++g.calls;
    bool fail_now = g.fault == FAULT_CALL_ERROR && nth == g.fault_k;
    auto take = [c, ops, stream, cs, nth, fail_now]() mutable -> ncclResult_t {
        c->pending = nullptr;
        if (fail_now) return ncclRemoteError;  // the group never reaches the stream
        for (P2P& o : ops) o.k = o.send ? c->sends[o.peer]++ : c->recvs[o.peer]++;
        ::emu::submit(stream, [c, ops, nth]() { run_p2p(c, ops, nth); });
        c->calls++;
        c->p2p_groups++;
        c->last_stream = cs; c->last_seq = cs->enq;
        return ncclSuccess;
    };
    return start(c, what, cs, g.fault == FAULT_STUCK && nth == g.fault_k, take);
}

// ncclSend / ncclRecv: checked at the call, added to the open group, or a group of their own
inline ncclResult_t p2p_call(bool send, const void* sbuf, void* rbuf, size_t count, ncclDataType_t type, int peer, ncclComm_t comm,
                             cudaStream_t stream) {
    const char* what = send ? "ncclSend" : "ncclRecv";
    ncclComm* c = usable(comm, what);
    if (!::emu::valid_stream(stream)) ::emu::error("emulated NCCL: %s on an invalid or destroyed stream", what);
    size_t es = type_bytes(type, what);
    if (peer < 0 || peer >= c->nranks)
        ::emu::error("emulated NCCL: %s with peer %d on communicator %d of %d ranks", what, peer, c->index, c->nranks);
    if (count > (size_t)INT_MAX / es)
        ::emu::error("emulated NCCL: %s of %zu elements: more than the shim moves at once (INT_MAX bytes)", what, count);
    const void* buf = send ? sbuf : rbuf;
    if (count && !::emu::is_device(buf, count * es))
        ::emu::error("emulated NCCL: %s: %s %p (%zu bytes) is not inside one device allocation", what,
                     send ? "sendbuff" : "recvbuff", buf, count * es);
    State& g = st();
    g.group.push_back({send, sbuf, rbuf, count, type, peer, c, stream, 0});
    if (g.group_depth > 0) return ncclSuccess;  // launched by the ncclGroupEnd that closes the group
    return group_launch(what);
}
}  // namespace emu_nccl

static inline const char* ncclGetErrorString(ncclResult_t r) {
    switch (r) {
        case ncclSuccess: return "no error";
        case ncclUnhandledCudaError: return "unhandled cuda error (run with NCCL_DEBUG=INFO for details)";
        case ncclSystemError: return "unhandled system error (run with NCCL_DEBUG=INFO for details)";
        case ncclInternalError: return "internal error - please report this issue to the NCCL developers";
        case ncclInvalidArgument: return "invalid argument (run with NCCL_DEBUG=WARN for details)";
        case ncclInvalidUsage: return "invalid usage (run with NCCL_DEBUG=WARN for details)";
        case ncclRemoteError: return "remote process exited or there was a network error";
        case ncclInProgress: return "NCCL operation in progress";
        default: return "unknown result code";
    }
}

static inline ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
    emu_nccl::configure();
    int wr = emu_nccl::world_rank();
    if (wr < 0) ::emu::error("emulated NCCL: ncclGetUniqueId needs MPI (the shim moves data through it): run under mpirun");
    if (!id) ::emu::error("emulated NCCL: ncclGetUniqueId(NULL)");
    // the id names its creator and its number there: every rank given it joins the same MPI group
    memset(id, 0, sizeof *id);
    int parts[3] = {0x454d4e43 /* "EMNC" */, wr, emu_nccl::st().ids_made++};
    memcpy(id->internal, parts, sizeof parts);
    return ncclSuccess;
}

static inline ncclResult_t ncclCommInitRankConfig(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank, ncclConfig_t* config) {
    emu_nccl::configure();
    ::emu::stream_use_hook = emu_nccl::on_stream_use;
    if (!comm) ::emu::error("emulated NCCL: ncclCommInitRankConfig with comm NULL");
    int parts[3];
    memcpy(parts, id.internal, sizeof parts);
    if (parts[0] != 0x454d4e43)
        ::emu::error("emulated NCCL: ncclCommInitRankConfig with an id that ncclGetUniqueId did not make (was it shared with every rank?)");
    if (nranks < 1 || rank < 0 || rank >= nranks)
        ::emu::error("emulated NCCL: ncclCommInitRankConfig with rank %d of %d", rank, nranks);
    if (config && (config->magic != 0xcafebeef || config->size != sizeof(ncclConfig_t)))
        ::emu::error("emulated NCCL: ncclCommInitRankConfig with a config not set up by NCCL_CONFIG_INITIALIZER");
    if (parts[2] >= 1 << 16) ::emu::error("emulated NCCL: more than 65536 unique ids from one rank");
    // every world rank splits MPI_COMM_WORLD here (see Limits): the id's creator and number pick the group
    MPI_Comm m;
    EMU_MPI(MPI_Comm_split(MPI_COMM_WORLD, parts[1] * (1 << 16) + parts[2], rank, &m));
    int mr = -1, ms = -1;
    EMU_MPI(MPI_Comm_rank(m, &mr));
    EMU_MPI(MPI_Comm_size(m, &ms));
    if (ms != nranks || mr != rank)
        ::emu::error("emulated NCCL: ncclCommInitRankConfig as rank %d of %d, but %d ranks joined with this id and this "
                     "one is rank %d of them (ranks disagree on nranks, or two passed the same rank)", rank, nranks, ms, mr);
    ncclComm* c = new ncclComm();
    c->index = (int)emu_nccl::st().comms.size();
    c->mpi = m; c->rank = rank; c->nranks = nranks;
    c->sends.assign(nranks, 0); c->recvs.assign(nranks, 0);
    c->blocking = !config || config->blocking == NCCL_CONFIG_UNDEF_INT || config->blocking != 0;
    c->async_error = ncclSuccess;
    emu_nccl::st().comms.push_back(c);
    *comm = c;
    return emu_nccl::start(c, "ncclCommInitRankConfig", nullptr, false, [c]() { c->pending = nullptr; c->ready = true; return ncclSuccess; });
}

static inline ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
    return ncclCommInitRankConfig(comm, nranks, id, rank, NULL);
}

// the state of the communicator; completes the call in progress at its last poll
static inline ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* state) {
    emu_nccl::configure();
    ncclComm* c = emu_nccl::find(comm);
    if (!c) ::emu::error("emulated NCCL: ncclCommGetAsyncError on %p, which is not a communicator", (void*)comm);
    if (c->destroyed || c->aborted)
        ::emu::error("emulated NCCL: ncclCommGetAsyncError on communicator %d after %s", c->index, c->destroyed ? "ncclCommDestroy" : "ncclCommAbort");
    if (!state) ::emu::error("emulated NCCL: ncclCommGetAsyncError with state NULL");
    emu_nccl::st().polls++;
    if (c->async_error != ncclSuccess) { *state = c->async_error; return ncclSuccess; }
    if (c->pending) {
        if (--c->polls_left > 0) { *state = ncclInProgress; return ncclSuccess; }
        std::function<ncclResult_t()> f = std::move(c->complete);
        c->complete = nullptr;
        ncclResult_t r = f();
        c->pending = nullptr;
        if (r != ncclSuccess) c->async_error = r;
        *state = r;
        return ncclSuccess;
    }
    *state = ncclSuccess;
    return ncclSuccess;
}

static inline ncclResult_t ncclAllReduce(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, ncclRedOp_t op,
                                         ncclComm_t comm, cudaStream_t stream) {
    return emu_nccl::collective(comm, {emu_nccl::K_ALL_REDUCE, sendbuff, recvbuff, count, datatype, op, 0}, stream);
}
static inline ncclResult_t ncclReduceScatter(const void* sendbuff, void* recvbuff, size_t recvcount, ncclDataType_t datatype,
                                             ncclRedOp_t op, ncclComm_t comm, cudaStream_t stream) {
    return emu_nccl::collective(comm, {emu_nccl::K_REDUCE_SCATTER, sendbuff, recvbuff, recvcount, datatype, op, 0}, stream);
}
static inline ncclResult_t ncclAllGather(const void* sendbuff, void* recvbuff, size_t sendcount, ncclDataType_t datatype,
                                         ncclComm_t comm, cudaStream_t stream) {
    return emu_nccl::collective(comm, {emu_nccl::K_ALL_GATHER, sendbuff, recvbuff, sendcount, datatype, ncclSum, 0}, stream);
}
static inline ncclResult_t ncclBroadcast(const void* sendbuff, void* recvbuff, size_t count, ncclDataType_t datatype, int root,
                                         ncclComm_t comm, cudaStream_t stream) {
    return emu_nccl::collective(comm, {emu_nccl::K_BROADCAST, sendbuff, recvbuff, count, datatype, ncclSum, root}, stream);
}

// point-to-point: matched with the peer's ncclRecv / ncclSend by order (see emu_nccl::run_p2p)
static inline ncclResult_t ncclSend(const void* sendbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                    cudaStream_t stream) {
    return emu_nccl::p2p_call(true, sendbuff, nullptr, count, datatype, peer, comm, stream);
}
static inline ncclResult_t ncclRecv(void* recvbuff, size_t count, ncclDataType_t datatype, int peer, ncclComm_t comm,
                                    cudaStream_t stream) {
    return emu_nccl::p2p_call(false, nullptr, recvbuff, count, datatype, peer, comm, stream);
}
// ncclSend and ncclRecv between them are collected; the outermost ncclGroupEnd launches them
// together (returns ncclInProgress on a non-blocking communicator until its polls are done)
static inline ncclResult_t ncclGroupStart() {
    emu_nccl::configure();
    emu_nccl::st().group_depth++;
    return ncclSuccess;
}
static inline ncclResult_t ncclGroupEnd() {
    emu_nccl::configure();
    emu_nccl::State& g = emu_nccl::st();
    if (g.group_depth == 0) ::emu::error("emulated NCCL: ncclGroupEnd without ncclGroupStart");
    if (--g.group_depth > 0) return ncclSuccess;
    return emu_nccl::group_launch("ncclGroupEnd");
}

// flushes the collectives issued on the communicator (runs its stream up to the last one)
// and completes, like the others, after some polls
static inline ncclResult_t ncclCommFinalize(ncclComm_t comm) {
    ncclComm* c = emu_nccl::usable(comm, "ncclCommFinalize");
    if (emu_nccl::st().fault == emu_nccl::FAULT_NO_FINALIZE) return ncclSuccess;  // planted: as if never called
    c->finalizing = true;
    return emu_nccl::start(c, "ncclCommFinalize", nullptr, false, [c]() {
        c->pending = nullptr;
        if (c->last_stream) ::emu::flush(c->last_stream, c->last_seq);
        if (c->ran != c->calls)
            ::emu::error("emulated NCCL: ncclCommFinalize of communicator %d: %llu of its %llu collectives have not run", c->index,
                         c->calls - c->ran, c->calls);
        c->finalizing = false;
        c->finalized = true;
        return c->async_error;
    });
}

// rule 4: only after ncclCommFinalize completed
static inline ncclResult_t ncclCommDestroy(ncclComm_t comm) {
    emu_nccl::configure();
    ncclComm* c = emu_nccl::find(comm);
    if (!c) ::emu::error("emulated NCCL: ncclCommDestroy of %p, which is not a communicator", (void*)comm);
    if (c->destroyed) ::emu::error("emulated NCCL: ncclCommDestroy of communicator %d twice", c->index);
    if (c->aborted) ::emu::error("emulated NCCL: ncclCommDestroy of communicator %d after ncclCommAbort (which frees it)", c->index);
    if (c->pending)
        ::emu::error("emulated NCCL: ncclCommDestroy of communicator %d while its %s is still in progress (poll "
                     "ncclCommGetAsyncError until ncclSuccess first)", c->index, c->pending);
    if (!c->finalized)
        ::emu::error("emulated NCCL: ncclCommDestroy of communicator %d (rank %d of %d) without ncclCommFinalize: in "
                     "non-blocking mode call ncclCommFinalize, poll ncclCommGetAsyncError until ncclSuccess (the "
                     "issued collectives are flushed and the ranks quiescent), then ncclCommDestroy", c->index, c->rank,
                     c->nranks);
    EMU_MPI(MPI_Comm_free(&c->mpi));
    c->destroyed = true;
    return ncclSuccess;
}

// allowed at any time, also while a call is in progress: drops what it enqueued
static inline ncclResult_t ncclCommAbort(ncclComm_t comm) {
    emu_nccl::configure();
    ncclComm* c = emu_nccl::find(comm);
    if (!c) ::emu::error("emulated NCCL: ncclCommAbort of %p, which is not a communicator", (void*)comm);
    if (c->destroyed || c->aborted)
        ::emu::error("emulated NCCL: ncclCommAbort of communicator %d after %s", c->index, c->destroyed ? "ncclCommDestroy" : "ncclCommAbort");
    c->aborted = true;
    c->pending = nullptr;
    c->complete = nullptr;
    // its MPI communicator is left alone: a peer may still be inside a collective on it
    return ncclSuccess;
}
