/*
Pipeline parallelism (--pp N, docs/design.md 8.9): the model's layers cut into stages, one
stage a rank of the pipeline group (GROUP_PP, llmc/parallel/comm.h), and a step's
micro-batches flowing through them, each stage sending its output activation forward and
its input gradient back. This file is the engine: the split of the layers, the stage's
schedule of the step (llmc/parallel/pipeline_schedule.h: 1f1b or interleaved, as op lists
proven by dev/test/test_pp_schedule.c), and the executor that runs it. A model gives three
hooks and knows nothing of the order:

    forward(ctx, micro, chunk)         micro-batch `micro` through this rank's chunk: its
                                       input is in tensor(PP_IN) (received, or the
                                       embedding on the first piece); its output left in
                                       tensor(PP_OUT) (the last piece: the head and loss,
                                       whose backward runs with it)
    backward(ctx, micro, chunk, last)  the same chunk's backward, from the received gradient
                                       (pipeline_output_grad; the last piece: the head's),
                                       leaving the input's gradient in tensor(PP_DIN);
                                       last: the step's last backward of this chunk
    tensor(ctx, micro, chunk, which)   where a chunk's boundary tensors are (rows x D
                                       elements of floatX, `elems`)

A micro-batch's activations on a stage live in its slot (micro % slots): the schedule
says how many micro-batches a chunk holds at once (1f1b: min(pp - s, M) on stage s), and
the model plans that many blocks of each of its layers (llmc/train/model_core.h). The
boundary buffers the executor sends from or receives into are checked against the op that
wrote or reads them: the output sent must be the last forward's, the input gradient the last
backward's, and a received output gradient lives in a recycled buffer from its receive to the
end of its backward (llmc/parallel/recycled.h: one holder, poisoned on release), so that a
schedule which would reuse a buffer too early stops with a message instead of sending or
reading stale values.

Transfers block (comm_p2p_batch: every half of an op posted, then all waited for, each wait
bounded by --comm-timeout: a dead stage ends the job with a message). The host time spent in
them is counted (idle_s): on the CPU build, where compute is synchronous, it is the time a
stage waited for its neighbours, the bubble included.
*/
#pragma once
#include "../core/common.h"
#include "comm.h"
#include "param_layout.h"
#include "pipeline_schedule.h"
#include "recycled.h"
#include "../core/logger.h"

enum { PP_IN, PP_OUT, PP_DIN, PP_DOUT };  // a chunk's input, output, input gradient, output gradient

// --test-plant-pp-bug 1 (the test programs): every micro-batch's activations in slot 0, so a
// stage holding several micro-batches (1f1b's warmup) overwrites the saved activations of
// those still waiting for their backward; the gradient checks must fail
static int pp_test_plant_bug = 0;

typedef struct {
    void* ctx;
    void (*forward)(void* ctx, int micro, int chunk);
    void (*backward)(void* ctx, int micro, int chunk, int last);
    floatX* (*tensor)(void* ctx, int micro, int chunk, int which);
} PpHooks;

typedef struct {
    Comm* comm;
    int pp, stage, virt, micro;  // stages, this rank's, chunks a rank, micro-batches a step
    PpSchedule sched;            // this rank's step (pp > 1)
    PpScheduleKind kind;
    int slots;                   // micro-batches whose activations one chunk holds at once: the most of any chunk
    int* chunk_slots;            // [virt]: chunk c's
    size_t elems;                // elements of one boundary tensor (pipeline_plan_tensors)
    stream_t stream;             // the model's compute stream (model_core_allocate)
    // the received output gradient lives in a recycled buffer (llmc/parallel/recycled.h): taken
    // by its receive, given back (poisoned in TESTING builds) when its backward is done, so a
    // second receive before that, or a backward reading it after, fails or reads NaN
    RecycledPool bufs;
    int dy_id;
    char dy_holder[64];
    void* staging; size_t staging_bytes;  // --comm mpi in the CUDA build: the model's pinned host staging
    double idle_s, step_s;       // this step: host seconds in transfers, and in the whole schedule
    double fwd_s, bwd_s;         // this step: host seconds in the forwards and in the backwards
} Pipeline;

// The layers of pp stages (virt chunks each): as --pp-layers says, or by default balanced
// with the model's first piece carrying the embedding and its last the head, each counted as
// w_first and w_last layers' worth of parameters (a layer counts 1): their weights, gradients
// and optimizer state are a stage's static memory, and llama3-70B's embedding alone is 1.2
// layers (Megatron's account_for_embedding/loss_in_pipeline_split count one layer each).
// Layer l sits at [w_first + l, w_first + l + 1) of the model's U = L + w_first + w_last,
// and each of the P pieces takes U / P of it, at least one layer each.
static inline void pp_split_build(PpSplit* sp, int L, int pp, int virt, const char* custom, double w_first, double w_last) {
    if ((long long)pp * virt > PP_MAX_PIECES)
        FAIL("--pp %d x --pp-virtual %d = %lld pieces; this build cuts the layers into at most %d", pp, virt,
             (long long)pp * virt, PP_MAX_PIECES);
    memset(sp, 0, sizeof(*sp));
    sp->pp = pp; sp->virt = virt;
    int P = pp_split_layers(L, pp, virt, custom, sp->first);  // (the checks; the even split)
    if ((custom && *custom) || P == 1) return;
    double U = L + w_first + w_last;
    for (int p = 1; p < P; p++) {
        int b = (int)floor(p * U / P - w_first + 0.5);
        int lo = sp->first[p - 1] + 1, hi = L - (P - p);
        sp->first[p] = b < lo ? lo : b > hi ? hi : b;
    }
    sp->first[P] = L;
}

// chunk c of stage s: layers [*l0, *l1), and whether it is the model's first or last piece
static inline void pp_chunk_layers(const PpSplit* sp, int s, int c, int* l0, int* l1) {
    int p = pp_piece(sp->pp, s, c);
    *l0 = sp->first[p]; *l1 = sp->first[p + 1];
}
static inline int pp_first_piece(const PpSplit* sp, int s, int c) { return pp_piece(sp->pp, s, c) == 0; }
static inline int pp_last_piece(const PpSplit* sp, int s, int c) { return pp_piece(sp->pp, s, c) == sp->pp * sp->virt - 1; }

// The schedule of this rank's stage for steps of `micro` micro-batches (pp = 1: none; one
// slot). Before the model's plan: it sizes the slots.
static inline void pipeline_plan(Pipeline* pl, Comm* comm, PpScheduleKind kind, int virt, int micro) {
    memset(pl, 0, sizeof(*pl));
    pl->comm = comm; pl->pp = comm->pp; pl->stage = comm->pp_rank; pl->virt = virt; pl->micro = micro; pl->slots = 1;
    pl->kind = kind;
    pl->chunk_slots = (int*)xmalloc((size_t)virt * sizeof(int));
    for (int c = 0; c < virt; c++) pl->chunk_slots[c] = 1;
    if (pl->pp == 1) return;
    pp_schedule_build(&pl->sched, kind, pl->pp, virt, micro, pl->stage);
    // a chunk's micro-batches in flight are consecutive (forwards and backwards each in order),
    // so micro % slots never names a slot still in use
    int live[PP_MAX_PIECES] = {0};
    for (int i = 0; i < pl->sched.n; i++) {
        const PpOp* op = &pl->sched.ops[i];
        if (op->kind == PP_FORWARD && ++live[op->chunk] > pl->chunk_slots[op->chunk]) pl->chunk_slots[op->chunk] = live[op->chunk];
        if (op->kind == PP_BACKWARD) live[op->chunk]--;
    }
    for (int c = 0; c < virt; c++) pl->slots = pl->chunk_slots[c] > pl->slots ? pl->chunk_slots[c] : pl->slots;
}

// the model's plan: a boundary tensor's elements (this rank's rows of the residual stream x D)
static inline void pipeline_plan_tensors(Pipeline* pl, size_t elems) { pl->elems = elems; }

// the received gradient's buffer in the plan (none at pp 1)
static inline void pipeline_plan_buffers(Pipeline* pl, Arena* d) {
    pl->bufs.n = 0;
    pl->dy_id = pl->pp > 1 ? recycled_plan_as(&pl->bufs, d, "d stage output (--pp, received)", "comm", pl->elems * sizeof(floatX)) : -1;
}

// the gradient at the chunk's output a backward starts from (held from its receive to the
// end of that backward)
static inline floatX* pipeline_output_grad(const Pipeline* pl) {
    const RecycledBuffer* b = &pl->bufs.buf[pl->dy_id < 0 ? 0 : pl->dy_id];
    if (pl->dy_id < 0 || !b->holder) FAIL("pipeline: stage %d's backward reads a received output gradient nobody holds", pl->stage);
    return b->ptr;
}

static inline void pipeline_free(Pipeline* pl) {
    pp_schedule_free(&pl->sched);
    free(pl->chunk_slots); pl->chunk_slots = NULL;
}

// the slot of micro-batch `micro`'s activations in chunk `chunk` (its data's: chunk 0's,
// from the embedding's forward to its backward)
static inline int pipeline_slot(const Pipeline* pl, int micro, int chunk) {
    return pp_test_plant_bug ? 0 : micro % pl->chunk_slots[chunk];
}

// one op's transfers, posted together
static inline void pipeline_transfer(Pipeline* pl, const PpHooks* h, const PpOp* op, int last_fwd[2], int last_bwd[2],
                                     int dout[2]) {
    CommP2p x[PP_HALVES];
    int k = 0;
    for (int half = 0; half < PP_HALVES; half++) {
        if (!(op->comm >> half & 1)) continue;
        const PpXfer* t = &op->x[half];
        int which = half == PP_SEND_FORWARD ? PP_OUT : half == PP_RECV_FORWARD ? PP_IN : half == PP_SEND_BACKWARD ? PP_DIN : PP_DOUT;
        if (half == PP_SEND_FORWARD && (t->micro != last_fwd[0] || t->chunk != last_fwd[1]))
            FAIL("pipeline: stage %d sends micro-batch %d chunk %d's output, but its last forward was micro-batch %d "
                 "chunk %d (the schedule reuses the output buffer too early)", pl->stage, t->micro, t->chunk, last_fwd[0], last_fwd[1]);
        if (half == PP_SEND_BACKWARD && (t->micro != last_bwd[0] || t->chunk != last_bwd[1]))
            FAIL("pipeline: stage %d sends micro-batch %d chunk %d's input gradient, but its last backward was "
                 "micro-batch %d chunk %d", pl->stage, t->micro, t->chunk, last_bwd[0], last_bwd[1]);
        if (half == PP_RECV_BACKWARD) {  // (a second one before the last one's backward: recycled_take fails, naming both)
            snprintf(pl->dy_holder, sizeof(pl->dy_holder), "micro-batch %d chunk %d's output gradient", t->micro, t->chunk);
            x[k].buf = recycled_take(&pl->bufs, pl->dy_id, pl->dy_holder, pl->elems * sizeof(floatX));
            dout[0] = t->micro; dout[1] = t->chunk;
        } else {
            x[k].buf = h->tensor(h->ctx, t->micro, t->chunk, which);
        }
        x[k].peer = t->peer; x[k].send = !(half & 1); x[k].tag = half >= PP_SEND_BACKWARD;
        k++;
    }
    double t0 = comm_now();
    comm_set_staging(pl->comm, pl->staging, pl->staging_bytes);  // (the comm is shared: the last user set its own)
    comm_p2p_batch(pl->comm, GROUP_PP, x, k, pl->elems, COMM_FLOATX, pl->stream);
    comm_join(pl->comm, pl->stream);
    pl->idle_s += comm_now() - t0;
}

// One optimizer step of this stage: its schedule, op by op.
static inline void pipeline_run_step(Pipeline* pl, const PpHooks* h) {
    int last_fwd[2] = {-1, -1}, last_bwd[2] = {-1, -1}, dout[2] = {-1, -1};
    int* left = (int*)xmalloc((size_t)pl->virt * sizeof(int));  // backwards still to run, per chunk
    for (int c = 0; c < pl->virt; c++) left[c] = pl->micro;
    pl->idle_s = pl->fwd_s = pl->bwd_s = 0.0;
    double t0 = comm_now();
    for (int i = 0; i < pl->sched.n; i++) {
        const PpOp* op = &pl->sched.ops[i];
        double t = comm_now();
        if (op->kind == PP_FORWARD) {
            h->forward(h->ctx, op->micro, op->chunk);
            last_fwd[0] = op->micro; last_fwd[1] = op->chunk;
            pl->fwd_s += comm_now() - t;
        } else if (op->kind == PP_BACKWARD) {
            int last_piece = pl->stage == pl->pp - 1 && op->chunk == pl->virt - 1;
            if (!last_piece && (dout[0] != op->micro || dout[1] != op->chunk))
                FAIL("pipeline: stage %d runs micro-batch %d chunk %d's backward without its output gradient", pl->stage,
                     op->micro, op->chunk);
            h->backward(h->ctx, op->micro, op->chunk, --left[op->chunk] == 0);
            if (!last_piece) recycled_give_back(&pl->bufs, pl->dy_id, pl->stream);
            dout[0] = dout[1] = -1;
            last_bwd[0] = op->micro; last_bwd[1] = op->chunk;
            pl->bwd_s += comm_now() - t;
        } else {
            pipeline_transfer(pl, h, op, last_fwd, last_bwd, dout);
        }
    }
    free(left);
    pl->step_s = comm_now() - t0;
}

// A micro-batch's forward alone through every chunk of this stage, in model order, with the
// transfers between: validation, sampling and the test programs' evaluation (no backward,
// so nothing is held: slot 0). Every stage of the pipeline calls it for the same micro-batch.
static inline void pipeline_forward_only(Pipeline* pl, const PpHooks* h, int micro) {
    if (pl->pp == 1) { h->forward(h->ctx, micro, 0); return; }
    int s = pl->stage, pp = pl->pp;
    comm_set_staging(pl->comm, pl->staging, pl->staging_bytes);
    for (int c = 0; c < pl->virt; c++) {
        int from = s > 0 ? s - 1 : pp - 1, to = s < pp - 1 ? s + 1 : 0;
        if (s > 0 || c > 0) {
            CommP2p x = {h->tensor(h->ctx, micro, c, PP_IN), from, 0, 0};
            comm_p2p_batch(pl->comm, GROUP_PP, &x, 1, pl->elems, COMM_FLOATX, pl->stream);
            comm_join(pl->comm, pl->stream);
        }
        h->forward(h->ctx, micro, c);
        if (s < pp - 1 || c < pl->virt - 1) {
            CommP2p x = {h->tensor(h->ctx, micro, c, PP_OUT), to, 1, 0};
            comm_p2p_batch(pl->comm, GROUP_PP, &x, 1, pl->elems, COMM_FLOATX, pl->stream);
            comm_join(pl->comm, pl->stream);
        }
    }
}

// The pipeline as planned, one line for the log: the schedule, the layers of each stage (each
// chunk's under interleaving), the bubble the formula predicts, and how many micro-batches' (a
// chunk's: micro-batch x chunk) activations each stage holds at once (1f1b: stage 0 the most)
static inline void pipeline_describe(const Pipeline* pl, const PpSplit* sp, char* out, size_t n) {
    PpScheduleKind kind = pl->kind;
    if (pl->pp == 1) { snprintf(out, n, "pipeline: none (--pp 1)\n"); return; }
    size_t u = (size_t)snprintf(out, n, "pipeline: pp %d, --pp-schedule %s", pl->pp, PP_SCHEDULE_NAMES[kind]);
    if (pl->virt > 1 && u < n) u += (size_t)snprintf(out + u, n - u, " --pp-virtual %d", pl->virt);
    if (u < n) u += (size_t)snprintf(out + u, n - u, ", %d micro-batches a step | layers a %s:", pl->micro, pl->virt > 1 ? "chunk" : "stage");
    for (int p = 0; p < pl->pp * pl->virt && u < n; p++) u += (size_t)snprintf(out + u, n - u, "%s%d", p ? "," : " ", sp->first[p + 1] - sp->first[p]);
    if (u < n) u += (size_t)snprintf(out + u, n - u, " | bubble predicted %.3f of the ideal step (%.1f%% of the step) | "
                                     "micro-batch%s in flight per stage:", pp_bubble_fraction(kind, pl->pp, pl->virt, pl->micro),
                                     100.0 * pp_bubble_share(kind, pl->pp, pl->virt, pl->micro), pl->virt > 1 ? " x chunks" : "es");
    for (int s = 0; s < pl->pp && u < n; s++)
        u += (size_t)snprintf(out + u, n - u, " %d", pp_max_in_flight(kind, pl->pp, pl->virt, pl->micro, s));
    if (u < n) u += (size_t)snprintf(out + u, n - u, "\n");
    if (pl->micro < pl->pp && u < n)
        snprintf(out + u, n - u, "warning: %d micro-batches a step through %d pipeline stages: the bubble is %.0f%% of the "
                 "step; a --total-batch of at least %d micro-batches fills the pipeline\n", pl->micro, pl->pp,
                 100.0 * pp_bubble_share(kind, pl->pp, pl->virt, pl->micro), pl->pp);
}

// The bubble as measured, against the schedule's prediction, over the steps of a run: each
// rank's host seconds in its forwards, its backwards and its transfers (on the CPU build,
// where compute is synchronous, the transfers' time is the time it waited for its
// neighbours). The prediction runs the stages' op lists with those measured costs
// (pp_simulate): the step's time and each stage's wait. The uniform formula (every stage
// as slow as the slowest, pp_bubble_fraction) is printed beside it.
// Each stage's memory too: its measured peak (the driver's or, on the CPU, the resident set,
// after each step) beside its plan, whose stages differ by the micro-batches they hold.
typedef struct { double idle, step, fwd, bwd, peak; int steps; } PipelineStats;

static inline void pipeline_stats_add(PipelineStats* st, const Pipeline* pl) {
    st->idle += pl->idle_s; st->step += pl->step_s; st->fwd += pl->fwd_s; st->bwd += pl->bwd_s; st->steps++;
    double now = (double)dev_peak_bytes_measured();
    st->peak = now > st->peak ? now : st->peak;
}

// a collective over the world: rank 0 logs the step and each stage's wait, measured (averaged
// over the stage's ranks and the steps) and predicted
static inline void pipeline_stats_log(const PipelineStats* st, const Pipeline* pl, Logger* lg, const char* which,
                                      double planned) {
    if (pl->pp == 1 || st->steps == 0) return;
    Comm* c = pl->comm;
    int pp = pl->pp;
    enum { K = 7 };  // each rank's: idle step fwd bwd (a step's) peak planned stage
    double k = 1.0 / st->steps, mine[K] = {st->idle * k, st->step * k, st->fwd * k, st->bwd * k, st->peak, planned, (double)pl->stage};
    double* all = (double*)xmalloc((size_t)c->size * K * sizeof(double));
    comm_host_gather(c, GROUP_WORLD, mine, sizeof(mine), all);
    if (c->rank == 0) {
        double* v = (double*)calloc((size_t)pp * 9, sizeof(double));  // per stage: the ranks' idle step fwd bwd, most peak, planned, n
        for (int r = 0; r < c->size; r++) {
            const double* a = all + (size_t)K * r;
            double* x = v + (size_t)a[6] * 9;
            for (int j = 0; j < 4; j++) x[j] += a[j];
            x[4] += 1;
            x[5] = a[4] > x[5] ? a[4] : x[5];
            x[6] = a[5] > x[6] ? a[5] : x[6];
        }
        double tf[PP_MAX_PIECES], tb[PP_MAX_PIECES], idle[PP_MAX_PIECES], own[PP_MAX_PIECES], span = 0, slowest = 0;
        double per = (double)pl->micro * pl->virt;  // chunk passes a step
        for (int s = 0; s < pp; s++) {
            double* x = v + s * 9;
            for (int j = 0; j < 4; j++) x[j] /= x[4];
            tf[s] = x[2] / per; tb[s] = x[3] / per;
            span = x[1] > span ? x[1] : span;
            slowest = x[2] + x[3] > slowest ? x[2] + x[3] : slowest;
        }
        double predicted = pp_simulate(pl->kind, pp, pl->virt, pl->micro, tf, tb, idle, own);
        double bubble = pp_bubble_fraction(pl->kind, pp, pl->virt, pl->micro);
        logf_(lg, "pipeline, measured over %s: step %.2f ms, the schedule with the measured costs predicts %.2f ms (ratio "
              "%.3f; the uniform formula: slowest stage's compute %.2f ms x (1 + %.3f) = %.2f ms) | waiting in transfers, "
              "measured (predicted) by stage:", which, 1e3 * span, 1e3 * predicted, span / predicted, 1e3 * slowest, bubble,
              1e3 * slowest * (1 + bubble));
        for (int s = 0; s < pp; s++) logf_(lg, " %.1f%% (%.1f%%)", 100.0 * v[s * 9] / v[s * 9 + 1], 100.0 * idle[s] / own[s]);
        logf_(lg, " of its schedule\n");
        logf_(lg, "pipeline memory by stage, the peak measured (%s, its largest rank) against its plan (arena):", dev_measured_name());
        for (int s = 0; s < pp; s++) logf_(lg, " %.1f (%.1f) MiB", v[s * 9 + 5] / 1048576.0, v[s * 9 + 6] / 1048576.0);
        logf_(lg, "\n");
        free(v);
    }
    free(all);
}

// the bytes this stage sends in one step (comm_bytes_add's count): each chunk's output for
// every micro-batch but from the model's last piece, each input gradient but from the first
static inline void pipeline_comm_bytes(const Pipeline* pl, CommBytes* cb) {
    if (pl->pp == 1) return;
    double per = (double)pl->elems * sizeof(floatX);
    for (int c = 0; c < pl->virt; c++) {
        int p = pp_piece(pl->pp, pl->stage, c), last = pl->pp * pl->virt - 1;
        comm_bytes_add(cb, pl->comm, GROUP_PP, KIND_SEND_RECV, (double)pl->micro * per * ((p < last) + (p > 0)));
    }
}
