/*
Pipeline parallelism's schedules (--pp N, --pp-schedule, --pp-virtual V), as plain host-side
op lists: which forward and backward a pipeline rank runs, and which activations and gradients
it sends and receives, in the order it must do them. The executor runs one rank's list strictly
in order with blocking point-to-point transfers; everything about ordering lives here, where
dev/test/test_pp_schedule.c can run all ranks' lists together in a simulation and show that
they never deadlock, respect every data dependency, hold no more activations than claimed and
leave the idle time the formulas below predict.

The model's L layers are cut into pp x V pieces (pp_split_layers); rank s holds V of them, its
chunks, chunk c being piece c*pp + s. A micro-batch's forward visits the pieces in model order
(rank 0 chunk 0, rank 1 chunk 0, ..., rank pp-1 chunk 0, rank 0 chunk 1, ...), its backward in
the reverse order. An optimizer step runs M micro-batches.

Two schedules, both as Megatron-LM runs them (megatron/core/pipeline_parallel/schedules.py), so
that its measurements and the paper's formulas (Narayanan et al. 2021, "Efficient Large-Scale
Language Model Training on GPU Clusters", sec. 2.2) carry over:
  1f1b         (PipeDream-flush; forward_backward_pipelining_without_interleaving), V = 1:
               stage s runs warmup = min(pp - s - 1, M) forwards, then M - warmup pairs of one
               forward and one backward, then warmup backwards. The first stage holds the
               most activations: min(pp, M) micro-batches.
  interleaved  (forward_backward_pipelining_with_interleaving), V >= 2 chunks a rank: the
               micro-batches go in groups of pp, each group through chunk 0, then chunk 1, ...
               (the backward through chunk V-1 first); warmup = (pp - s - 1) * 2 + (V - 1) * pp
               forwards (at most M*V), then one forward and one backward at a time, then the
               remaining backwards. The bubble shrinks V-fold for V-fold more transfers.
               Needs M a multiple of pp, as Megatron did before it allowed other group sizes.

The transfers are ops of their own (PP_COMM), with Megatron's grouping: an op posts all its
halves (send activation to the next rank, receive activation from the previous one, send
gradient to the previous rank, receive gradient from the next one) and completes when all of
them have (MPI Isend/Irecv then Waitall; NCCL send/recv in one group). Grouping matters: the
same transfers as separate blocking calls can deadlock, since two neighbours may each wait in a
send for the other's receive.
*/
#pragma once
#include "../core/common.h"

// --pp-schedule
typedef enum { PP_SCHEDULE_1F1B = 0, PP_SCHEDULE_INTERLEAVED = 1 } PpScheduleKind;
[[maybe_unused]] static const char* const PP_SCHEDULE_NAMES[3] = {"1f1b", "interleaved", NULL};

typedef enum { PP_FORWARD = 0, PP_BACKWARD = 1, PP_COMM = 2 } PpOpKind;

// The halves a PP_COMM op may post: index into PpOp.x, bit (1 << half) of PpOp.comm. An executor
// without message tags (NCCL) posts them in this order; the test checks that this order pairs
// every send with its receive even when next and previous rank are the same (pp 2, interleaved).
enum { PP_SEND_FORWARD = 0, PP_RECV_FORWARD = 1, PP_SEND_BACKWARD = 2, PP_RECV_BACKWARD = 3, PP_HALVES = 4 };

// One half of a transfer. micro and chunk are this rank's own: the chunk whose output (or input
// gradient) is sent, the chunk whose input (or output gradient) is received. Under interleaving
// they differ from the peer's at the wrap: rank pp-1's chunk c output is rank 0's chunk c+1 input.
typedef struct { int micro, chunk, peer; } PpXfer;

typedef struct {
    PpOpKind kind;
    int micro, chunk;     // PP_FORWARD, PP_BACKWARD: which micro-batch through which chunk
    int comm;             // PP_COMM: the halves posted, bits (1 << PP_SEND_FORWARD) ...
    PpXfer x[PP_HALVES];  // PP_COMM: each posted half (peer: rank in the pipeline group)
} PpOp;

typedef struct {
    PpScheduleKind kind;
    int pp, virt, micro, stage;
    int warmup;         // forwards before the first backward
    int n, cap;
    PpOp* ops;
    int max_in_flight;  // most (micro-batch, chunk) activations held at once on this rank, from the list
} PpSchedule;

// the piece of the model (0 .. pp*virt - 1, in layer order) that rank `stage` holds as chunk `chunk`
static inline int pp_piece(int pp, int stage, int chunk) { return chunk * pp + stage; }

static inline const char* pp_op_name(const PpOp* op) {
    // indexed by the comm bits: forward halves before backward ones, sends before receives
    static const char* const COMM[16] = {
        "comm_none", "send_forward", "recv_forward", "send_forward_recv_forward",
        "send_backward", "send_forward_backward", "send_backward_recv_forward", "send_forward_backward_recv_forward",
        "recv_backward", "send_forward_recv_backward", "recv_forward_backward", "send_forward_recv_forward_backward",
        "send_backward_recv_backward", "send_forward_backward_recv_backward", "send_backward_recv_forward_backward",
        "send_forward_backward_recv_forward_backward"};
    if (op->kind == PP_FORWARD) return "forward";
    if (op->kind == PP_BACKWARD) return "backward";
    return COMM[op->comm & 15];
}

// an op in a line of a log: "forward m3 c1", "send_forward_recv_backward [sf m3 c0 ->2] [rb m1 c0 <-2]"
static inline void pp_op_format(const PpOp* op, char* buf, size_t size) {
    static const char* const HALF[PP_HALVES] = {"sf", "rf", "sb", "rb"};
    int n = snprintf(buf, size, "%s", pp_op_name(op));
    if (op->kind != PP_COMM) { if (n >= 0 && (size_t)n < size) snprintf(buf + n, size - n, " m%d c%d", op->micro, op->chunk); return; }
    for (int h = 0; h < PP_HALVES; h++) {
        if (!(op->comm >> h & 1) || n < 0 || (size_t)n >= size) continue;
        const PpXfer* x = &op->x[h];
        n += snprintf(buf + n, size - n, " [%s m%d c%d %s%d]", HALF[h], x->micro, x->chunk, (h & 1) ? "<-" : "->", x->peer);
    }
}

static inline void pp__push(PpSchedule* s, const PpOp* op) {
    if (s->n == s->cap) {
        int cap = s->cap ? 2 * s->cap : 64;
        PpOp* ops = (PpOp*)xmalloc((size_t)cap * sizeof(PpOp));
        if (s->n) memcpy(ops, s->ops, (size_t)s->n * sizeof(PpOp));
        free(s->ops);
        s->ops = ops; s->cap = cap;
    }
    s->ops[s->n++] = *op;
}

static inline void pp__compute(PpSchedule* s, PpOpKind kind, int micro, int chunk) {
    PpOp op;
    memset(&op, 0, sizeof(op));
    op.kind = kind; op.micro = micro; op.chunk = chunk;
    pp__push(s, &op);
}

static inline PpOp pp__comm_op(void) {
    PpOp op;
    memset(&op, 0, sizeof(op));
    op.kind = PP_COMM; op.micro = op.chunk = -1;
    return op;
}

static inline void pp__half(PpOp* op, int half, int micro, int chunk, int peer) {
    op->comm |= 1 << half;
    op->x[half].micro = micro; op->x[half].chunk = chunk; op->x[half].peer = peer;
}

// an op without halves is a first or last stage's nothing to send or receive: left out
static inline void pp__push_comm(PpSchedule* s, const PpOp* op) { if (op->comm) pp__push(s, op); }

// Megatron's interleaved order: virtual step k of M*V runs micro-batch `*micro` through chunk
// `*chunk`; groups of pp micro-batches go through chunk 0, then 1, ... (backward: V-1 first)
static inline void pp__virtual(int pp, int virt, int k, int backward, int* micro, int* chunk) {
    int group = k / (pp * virt), in = k % (pp * virt);
    *micro = group * pp + in % pp;
    *chunk = backward ? virt - 1 - in / pp : in / pp;
}

static inline int pp__warmup(PpScheduleKind kind, int pp, int virt, int micro, int stage) {
    int w = kind == PP_SCHEDULE_1F1B ? pp - stage - 1 : (pp - stage - 1) * 2 + (virt - 1) * pp;
    return w < micro * virt ? w : micro * virt;
}

static inline void pp__check(PpScheduleKind kind, int pp, int virt, int micro, int stage) {
    if (pp < 1) FAIL("--pp %d: the pipeline needs at least one stage", pp);
    if (micro < 1) FAIL("--pp %d: a step needs at least one micro-batch, got %d", pp, micro);
    if (stage < 0 || stage >= pp) FAIL("pipeline stage %d is outside --pp %d's stages 0..%d", stage, pp, pp - 1);
    if (kind == PP_SCHEDULE_1F1B) {
        if (virt != 1) FAIL("--pp-virtual %d needs --pp-schedule interleaved (1f1b runs one chunk a rank)", virt);
    } else if (kind == PP_SCHEDULE_INTERLEAVED) {
        // with one stage there is nothing to interleave with, and with one chunk the schedule is 1f1b
        if (pp < 2) FAIL("--pp-schedule interleaved needs --pp of at least 2, got --pp %d (one stage: leave --pp-virtual at 1)", pp);
        if (virt < 2) FAIL("--pp-schedule interleaved needs --pp-virtual of at least 2, got %d (with 1 it is --pp-schedule 1f1b)", virt);
        if (micro % pp != 0)
            FAIL("--pp %d --pp-virtual %d: the interleaved schedule runs micro-batches in groups of --pp, but a step has %d "
                 "micro-batches, not a multiple of %d (hint: change --grad-accum, or --total-batch over --batch)", pp, virt, micro, pp);
    } else {
        FAIL("unknown pipeline schedule %d", (int)kind);
    }
}

// Rank `stage`'s forward (or backward) input at virtual step k+1 of the interleaved schedule is
// received at step k; false when it comes from no rank (the data, the loss) or k is the last.
// The leading rank (0 forward, pp-1 backward) takes its input from the ring's other end, which
// produced it pp-1 steps earlier; any other rank from its neighbour one step earlier.
static inline int pp__interleaved_recv(int pp, int virt, int micro, int stage, int k, int backward, int* m, int* c) {
    int total = micro * virt, leading = backward ? pp - 1 : 0;
    if (stage != leading) {
        if (k + 1 >= total) return 0;
        pp__virtual(pp, virt, k + 1, backward, m, c);
        return 1;
    }
    int j = k - (pp - 1);
    if (j < 0) return 0;
    pp__virtual(pp, virt, j, backward, m, c);
    if (*c == (backward ? 0 : virt - 1)) return 0;  // the model's first or last piece feeds no one
    *c += backward ? -1 : 1;
    return 1;
}

static inline void pp__build_1f1b(PpSchedule* s) {
    int pp = s->pp, M = s->micro, st = s->stage, first = st == 0, last = st == pp - 1;
    int W = s->warmup, R = M - W;
    for (int i = 0; i < W; i++) {
        PpOp op = pp__comm_op();
        if (!first) pp__half(&op, PP_RECV_FORWARD, i, 0, st - 1);
        pp__push_comm(s, &op);
        pp__compute(s, PP_FORWARD, i, 0);
        op = pp__comm_op();
        if (!last) pp__half(&op, PP_SEND_FORWARD, i, 0, st + 1);
        pp__push_comm(s, &op);
    }
    if (R > 0 && !first) {
        PpOp op = pp__comm_op();
        pp__half(&op, PP_RECV_FORWARD, W, 0, st - 1);
        pp__push(s, &op);
    }
    for (int i = 0; i < R; i++) {
        pp__compute(s, PP_FORWARD, W + i, 0);
        PpOp op = pp__comm_op();
        if (!last) { pp__half(&op, PP_SEND_FORWARD, W + i, 0, st + 1); pp__half(&op, PP_RECV_BACKWARD, i, 0, st + 1); }
        pp__push_comm(s, &op);
        pp__compute(s, PP_BACKWARD, i, 0);
        op = pp__comm_op();
        if (!first) {
            pp__half(&op, PP_SEND_BACKWARD, i, 0, st - 1);
            if (i < R - 1) pp__half(&op, PP_RECV_FORWARD, W + i + 1, 0, st - 1);
        }
        pp__push_comm(s, &op);
    }
    for (int i = 0; i < W; i++) {
        PpOp op = pp__comm_op();
        if (!last) pp__half(&op, PP_RECV_BACKWARD, R + i, 0, st + 1);
        pp__push_comm(s, &op);
        pp__compute(s, PP_BACKWARD, R + i, 0);
        op = pp__comm_op();
        if (!first) pp__half(&op, PP_SEND_BACKWARD, R + i, 0, st - 1);
        pp__push_comm(s, &op);
    }
}

// Megatron's interleaved loop without p2p overlap: after each forward (warmup) or forward and
// backward (steady) or backward (cooldown), one op sends what was computed and receives the
// next step's inputs. Transfers go round a ring: rank pp-1 feeds rank 0's next chunk.
static inline void pp__build_interleaved(PpSchedule* s) {
    int pp = s->pp, V = s->virt, M = s->micro, st = s->stage, first = st == 0, last = st == pp - 1;
    int total = M * V, W = s->warmup, R = total - W;
    int next = (st + 1) % pp, prev = (st + pp - 1) % pp;
    int m, c, rm, rc;
    if (!first) {
        PpOp op = pp__comm_op();
        pp__half(&op, PP_RECV_FORWARD, 0, 0, prev);
        pp__push(s, &op);
    }
    for (int k = 0; k < W; k++) {
        pp__virtual(pp, V, k, 0, &m, &c);
        pp__compute(s, PP_FORWARD, m, c);
        PpOp op = pp__comm_op();
        if (!(last && c == V - 1)) pp__half(&op, PP_SEND_FORWARD, m, c, next);
        if (pp__interleaved_recv(pp, V, M, st, k, 0, &rm, &rc)) pp__half(&op, PP_RECV_FORWARD, rm, rc, prev);
        // the first backward's gradient rides with the last warmup transfer
        if (k == W - 1 && R > 0 && !last) { pp__virtual(pp, V, 0, 1, &rm, &rc); pp__half(&op, PP_RECV_BACKWARD, rm, rc, next); }
        pp__push_comm(s, &op);
    }
    for (int k = 0; k < R; k++) {
        int bm, bc;
        pp__virtual(pp, V, W + k, 0, &m, &c);
        pp__virtual(pp, V, k, 1, &bm, &bc);
        pp__compute(s, PP_FORWARD, m, c);
        pp__compute(s, PP_BACKWARD, bm, bc);
        PpOp op = pp__comm_op();
        if (!(last && c == V - 1)) pp__half(&op, PP_SEND_FORWARD, m, c, next);
        if (pp__interleaved_recv(pp, V, M, st, W + k, 0, &rm, &rc)) pp__half(&op, PP_RECV_FORWARD, rm, rc, prev);
        if (!(first && bc == 0)) pp__half(&op, PP_SEND_BACKWARD, bm, bc, prev);
        if (pp__interleaved_recv(pp, V, M, st, k, 1, &rm, &rc)) pp__half(&op, PP_RECV_BACKWARD, rm, rc, next);
        pp__push_comm(s, &op);
    }
    for (int k = R; k < total; k++) {
        if (k == 0 && !last) {  // all forwards were warmup: the first gradient has not come yet
            PpOp op = pp__comm_op();
            pp__virtual(pp, V, 0, 1, &rm, &rc);
            pp__half(&op, PP_RECV_BACKWARD, rm, rc, next);
            pp__push(s, &op);
        }
        pp__virtual(pp, V, k, 1, &m, &c);
        pp__compute(s, PP_BACKWARD, m, c);
        PpOp op = pp__comm_op();
        if (!(first && c == 0)) pp__half(&op, PP_SEND_BACKWARD, m, c, prev);
        if (pp__interleaved_recv(pp, V, M, st, k, 1, &rm, &rc)) pp__half(&op, PP_RECV_BACKWARD, rm, rc, next);
        pp__push_comm(s, &op);
    }
}

// The most (micro-batch, chunk) activations rank `stage` holds at once: the warmup's forwards
// and one more, since the steady state runs a forward before the backward that frees one (all
// M*V when the warmup is the whole step). 1f1b: min(pp - stage, M) micro-batches. Interleaved,
// counted in chunks (1/V of a stage's layers each): stage 0 holds up to pp*V + pp - 1 of them,
// pp + (pp - 1)/V stages' worth against 1f1b's pp.
static inline int pp_max_in_flight(PpScheduleKind kind, int pp, int virt, int micro, int stage) {
    pp__check(kind, pp, virt, micro, stage);
    int w = pp__warmup(kind, pp, virt, micro, stage), total = micro * virt;
    return w < total ? w + 1 : total;
}

static inline void pp_schedule_free(PpSchedule* s) {
    free(s->ops);
    s->ops = NULL; s->n = s->cap = 0;
}

// Rank `stage`'s op list for one optimizer step of `micro` micro-batches; FAILs on input no
// schedule can run (virt must be 1 for 1f1b). s is overwritten (free it first if reused).
static inline void pp_schedule_build(PpSchedule* s, PpScheduleKind kind, int pp, int virt, int micro, int stage) {
    pp__check(kind, pp, virt, micro, stage);
    memset(s, 0, sizeof(*s));
    s->kind = kind; s->pp = pp; s->virt = virt; s->micro = micro; s->stage = stage;
    s->warmup = pp__warmup(kind, pp, virt, micro, stage);
    if (kind == PP_SCHEDULE_1F1B) pp__build_1f1b(s);
    else pp__build_interleaved(s);
    int live = 0;
    for (int i = 0; i < s->n; i++) {
        if (s->ops[i].kind == PP_FORWARD && ++live > s->max_in_flight) s->max_in_flight = live;
        if (s->ops[i].kind == PP_BACKWARD) live--;
    }
}

// The pipeline bubble, with tf and tb a whole stage's forward and backward time for one
// micro-batch (a chunk's being tf/V, tb/V) and transfers free (Narayanan et al. 2021, sec. 2.2):
// the step takes the ideal M*(tf + tb) plus a bubble of (pp - 1)*(tf + tb)/V, whatever tf/tb.
// pp_bubble_fraction: bubble time over ideal time, (pp - 1)/(V*M), the paper's figure; with
// fewer micro-batches than stages it exceeds 1.
static inline double pp_bubble_fraction(PpScheduleKind kind, int pp, int virt, int micro) {
    pp__check(kind, pp, virt, micro, 0);
    return (double)(pp - 1) / ((double)virt * micro);
}

// pp_bubble_share: the bubble's share of the whole step, the time each rank idles,
// (pp - 1)/(V*M + pp - 1): below 1 always (0.375 over ideal is 0.27 of the step).
static inline double pp_bubble_share(PpScheduleKind kind, int pp, int virt, int micro) {
    pp__check(kind, pp, virt, micro, 0);
    return (double)(pp - 1) / ((double)virt * micro + pp - 1);
}

// The layers of each piece, pp*virt pieces in model order (piece c*pp + s is rank s's chunk c):
// piece p holds layers first_layer[p] .. first_layer[p+1] - 1 (first_layer has pieces + 1
// entries). custom NULL or "": as even as can be, the first L % pieces pieces one layer more
// (Megatron asks for L divisible by the pieces instead; the extra layers go to the front since
// the last piece also carries the output head and the loss). custom "a,b,c" (--pp-layers): the
// counts themselves, one per piece, each at least 1, summing to L. Returns the piece count.
static inline int pp_split_layers(int L, int pp, int virt, const char* custom, int* first_layer) {
    if (pp < 1 || virt < 1) FAIL("--pp %d --pp-virtual %d: both must be at least 1", pp, virt);
    int pieces = pp * virt;
    char what[64];
    if (virt > 1) snprintf(what, sizeof what, "--pp %d x --pp-virtual %d = %d pieces", pp, virt, pieces);
    else snprintf(what, sizeof what, "--pp %d stages", pp);
    if (!custom || !*custom) {
        if (L < pieces) FAIL("%s need at least one layer each, but the model has %d layers (hint: a smaller --pp or --pp-virtual)", what, L);
        first_layer[0] = 0;
        for (int p = 0; p < pieces; p++) first_layer[p + 1] = first_layer[p] + L / pieces + (p < L % pieces);
        return pieces;
    }
    int n = 0, sum = 0;
    const char* q = custom;
    first_layer[0] = 0;
    for (;;) {
        const char* start = q;
        long v = 0;
        while (*q >= '0' && *q <= '9') { v = v * 10 + (*q - '0'); if (v > 1000000) break; q++; }
        if (q == start || v > 1000000 || (*q != ',' && *q != '\0'))
            FAIL("--pp-layers '%s': entry %d is not a whole number of layers (hint: counts separated by commas, e.g. '4,4,3,3')", custom, n + 1);
        if (v < 1) FAIL("--pp-layers '%s': entry %d is %ld, but every piece needs at least one layer", custom, n + 1, v);
        if (n == pieces) FAIL("--pp-layers '%s' has more than %d entries; %s need exactly %d (one per piece, in layer order)", custom, pieces, what, pieces);
        sum += (int)v;
        first_layer[n + 1] = sum;
        n++;
        if (*q == '\0') break;
        q++;
    }
    if (n != pieces) FAIL("--pp-layers '%s' has %d entries; %s need exactly %d (one per piece, in layer order)", custom, n, what, pieces);
    if (sum != L) FAIL("--pp-layers '%s' sums to %d layers, but the model has %d", custom, sum, L);
    return pieces;
}

// The schedule's own prediction of a step with measured costs: every stage's op list run
// together as the executor runs them (compute ops take tf[s] or tb[s], stage s's forward
// and backward of one chunk of one micro-batch; a transfer takes no time but blocks: it
// ends once every peer it exchanges with has reached its side, MPI's Isend/Irecv and
// Waitall), the sends and receives paired in order per (sender, receiver, activation or
// gradient) as MPI's tags pair them. Fills each stage's time waiting in transfers and its
// own time to the end of its list, and returns the step's (the last stage's end). Stages
// whose costs differ (the embedding on the first, the head on the last) wait more or less
// than the uniform formula says (dev/test/test_pp_schedule.c checks it against its own
// simulation).
static inline double pp_simulate(PpScheduleKind kind, int pp, int virt, int micro, const double* tf, const double* tb,
                                 double* idle, double* own) {
    PpSchedule* s = (PpSchedule*)xmalloc((size_t)pp * sizeof(PpSchedule));
    for (int r = 0; r < pp; r++) pp_schedule_build(&s[r], kind, pp, virt, micro, r);
    // partner[r][i][h]: the (rank, op) that half h of rank r's op i pairs with; start[r][i]: when op i began
    int** partner = (int**)xmalloc((size_t)pp * sizeof(int*));
    double** start = (double**)xmalloc((size_t)pp * sizeof(double*));
    for (int r = 0; r < pp; r++) {
        partner[r] = (int*)xmalloc((size_t)s[r].n * PP_HALVES * 2 * sizeof(int));
        start[r] = (double*)xmalloc((size_t)(s[r].n + 1) * sizeof(double));
    }
    for (int a = 0; a < pp; a++)
        for (int b = 0; b < pp; b++)
            for (int tag = 0; tag < 2; tag++) {
                int send = tag ? PP_SEND_BACKWARD : PP_SEND_FORWARD, recv = send + 1, i = 0, j = 0;
                for (;;) {  // the k-th send from a to b pairs with the k-th receive at b from a
                    while (i < s[a].n && !(s[a].ops[i].kind == PP_COMM && (s[a].ops[i].comm >> send & 1) && s[a].ops[i].x[send].peer == b)) i++;
                    while (j < s[b].n && !(s[b].ops[j].kind == PP_COMM && (s[b].ops[j].comm >> recv & 1) && s[b].ops[j].x[recv].peer == a)) j++;
                    if (i == s[a].n || j == s[b].n) break;
                    int* pa = partner[a] + (i * PP_HALVES + send) * 2;
                    int* pb = partner[b] + (j * PP_HALVES + recv) * 2;
                    pa[0] = b; pa[1] = j; pb[0] = a; pb[1] = i;
                    i++; j++;
                }
            }
    int* at = (int*)xmalloc((size_t)pp * sizeof(int));
    for (int r = 0; r < pp; r++) { at[r] = 0; start[r][0] = 0.0; idle[r] = 0.0; }
    for (int left = 1; left;) {
        int moved = 0;
        left = 0;
        for (int r = 0; r < pp; r++) {
            while (at[r] < s[r].n) {
                int i = at[r];
                const PpOp* op = &s[r].ops[i];
                double t = start[r][i];
                if (op->kind != PP_COMM) t += op->kind == PP_FORWARD ? tf[r] : tb[r];
                else {
                    int blocked = 0;
                    for (int h = 0; h < PP_HALVES && !blocked; h++) {
                        if (!(op->comm >> h & 1)) continue;
                        const int* p = partner[r] + (i * PP_HALVES + h) * 2;
                        if (at[p[0]] < p[1]) blocked = 1;  // the peer has not reached its side
                        else if (start[p[0]][p[1]] > t) t = start[p[0]][p[1]];
                    }
                    if (blocked) break;
                    idle[r] += t - start[r][i];
                }
                start[r][++at[r]] = t;
                moved = 1;
            }
            left |= at[r] < s[r].n;
        }
        if (left && !moved) FAIL("pp_simulate: the %s schedule of %d stages deadlocks", PP_SCHEDULE_NAMES[kind], pp);
    }
    double span = 0.0;
    for (int r = 0; r < pp; r++) {
        own[r] = start[r][s[r].n];
        span = own[r] > span ? own[r] : span;
        free(partner[r]); free(start[r]);
        pp_schedule_free(&s[r]);
    }
    free(partner); free(start); free(s); free(at);
    return span;
}
