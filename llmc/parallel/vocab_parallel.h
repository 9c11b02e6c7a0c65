/*
The vocabulary split over ranks (--shard-vocab 1, docs/design.md 8.4): the [V, D]
embedding and output projection of a language model, and the cross-entropy over a split
vocabulary.

Over DP (tp = 1, FSDP-style): each rank keeps Vs = ceil(V/dp) rows of each matrix
outside the buckets (llmc/parallel/param_layout.h's vocabulary region); a lookup or the head
all-gathers them into one planned buffer (once per step and matrix: a tied model's lookup
and head share it), and each micro-step's gradient is built whole in a second buffer and
reduce-scattered back onto the owned rows.

Over TP (vocab-parallel, Megatron's): each rank holds its Vs = ceil(V/tp) rows (the last
shard's rows past V are padding) and computes logits for its columns only; the
cross-entropy combines the row maxima and the sums of exponentials over the group, so that
no rank holds a whole row of V logits.
*/
#pragma once
#include "../core/common.h"
#include "../kernels/kernels.h"
#include "../core/arena.h"
#include "comm.h"
#include "param_store.h"
#include "../kernels/profile.h"
#include "tensor_parallel.h"

typedef struct {
    ParamStore* st;            // where the owned rows live (the layout's vocabulary region)
    size_t D;
    int emb, out, tied;        // the tensors' ids in the table; tied: out is emb
    int held;                  // the [V, D] matrices this rank's pipeline stage holds (every one without --pp)
    floatX* gathered;          // over DP: the all-gathered [Vs*dp, D] weights
    floatX* grad;              // over DP: this micro-step's unsharded [Vs*dp, D] gradient
    int which;                 // the tensor `gathered` holds now (-1: none)
    unsigned version;          // the parameters' version it was gathered from (ParamStore.version)
    float *ce_max, *ce_sums;   // over TP: each CE row's max; sums of exponentials and target logits [2 rows]
} VocabShards;

static inline int vocab_over_dp(const VocabShards* v) { return v->st->lay.shard_vocab && !v->st->lay.vocab_tp; }

// the two DP buffers (0 bytes unless the vocabulary is split over DP)
static inline void vocab_plan(VocabShards* v, ParamStore* st, Arena* d, size_t D, int emb, int out, int tied) {
    memset(v, 0, sizeof(*v));
    v->st = st; v->D = D; v->emb = emb; v->out = out; v->tied = tied; v->which = -1;
    v->held = param_on_stage(&st->lay, emb, -1) + (!tied && param_on_stage(&st->lay, out, -1));
    size_t full = vocab_over_dp(v) && v->held ? st->lay.vocab_rows * comm_grad_ranks(st->comm) * D : 0;
    arena_add_to(d, "vocab gather (weights)", "comm", full * sizeof(floatX), &v->gathered);
    arena_add_to(d, "vocab gradient (unsharded)", "comm", full * sizeof(floatX), &v->grad);
}

// the CE statistics of ce_rows rows (0 bytes unless the vocabulary is split over TP)
static inline void vocab_plan_crossentropy(VocabShards* v, Arena* d, size_t ce_rows) {
    arena_add_to(d, "CE row max, sums (vocab-parallel)", "scratch", v->st->lay.vocab_tp ? 3 * ce_rows * sizeof(float) : 0,
                 &v->ce_max);
}

static inline void vocab_bind(VocabShards* v, size_t ce_rows) {
    if (v->ce_max) v->ce_sums = v->ce_max + ce_rows;
    v->which = -1;
}

// the elements a DP collective of the vocabulary moves (for the --comm mpi staging)
static inline size_t vocab_dp_elements(const VocabShards* v) {
    return vocab_over_dp(v) ? v->st->lay.vocab_rows * comm_grad_ranks(v->st->comm) * v->D : 0;
}

// this rank's Vs rows of tensor t: its parameters, or its gradients (grads = 1)
static inline floatX* vocab_rows_of(const VocabShards* v, int grads, int t) {
    // (the output's rows follow the embedding's, where this stage holds both)
    int after_emb = t == v->out && !v->tied && param_on_stage(&v->st->lay, v->emb, -1);
    size_t off = v->st->lay.vocab_start + (after_emb ? v->st->lay.vocab_rows * v->D : 0);
    return grads ? param_store_grad_at(v->st, -1, off) : param_store_param_at(v->st, -1, off);
}

// The [V, D] matrix of tensor t for a lookup or the head: `whole` (the tensor itself;
// vocab-parallel: this rank's shard), or over DP the shards all-gathered.
static inline const floatX* vocab_weights(VocabShards* v, int t, const floatX* whole) {
    if (!vocab_over_dp(v)) return whole;
    int which = v->tied ? v->emb : t;
    if (v->which != which || v->version != v->st->version) {
        ParamStore* st = v->st;
        size_t block = st->lay.vocab_rows * v->D;
        floatX* mine = v->gathered + (size_t)comm_grad_rank(st->comm) * block;
        dev_memcpy_d2d(mine, vocab_rows_of(v, 0, which), block * sizeof(floatX), st->stream);
        comm_all_gather(param_store_comm(st), GROUP_GRAD, v->gathered, block, COMM_FLOATX, st->stream);
        comm_join(st->comm, st->stream);
        v->which = which;
        v->version = st->version;
    }
    return v->gathered;
}

// Where the gradient of tensor t accumulates in this micro-step: `whole` (its own
// gradient), or over DP the unsharded buffer, which starts with this rank's accumulated
// rows in their place and zeros elsewhere, so that vocab_grad_done's reduce-scatter leaves
// (accumulated + this micro-step's sum) there.
static inline floatX* vocab_grad_begin(VocabShards* v, int t, floatX* whole) {
    if (!vocab_over_dp(v)) return whole;
    ParamStore* st = v->st;
    size_t block = st->lay.vocab_rows * v->D;
    dev_memset(v->grad, 0, block * comm_grad_ranks(st->comm) * sizeof(floatX), st->stream);
    dev_memcpy_d2d(v->grad + (size_t)comm_grad_rank(st->comm) * block, vocab_rows_of(v, 1, t), block * sizeof(floatX),
                   st->stream);
    return v->grad;
}

static inline void vocab_grad_done(VocabShards* v, int t) {
    if (!vocab_over_dp(v)) return;
    ParamStore* st = v->st;
    size_t block = st->lay.vocab_rows * v->D;
    comm_reduce_scatter(param_store_comm(st), GROUP_GRAD, v->grad, block, COMM_FLOATX, st->stream);
    comm_join(st->comm, st->stream);
    dev_memcpy_d2d(vocab_rows_of(v, 1, t), v->grad + (size_t)comm_grad_rank(st->comm) * block, block * sizeof(floatX),
                   st->stream);
}

#ifdef TESTING
// test_llama: nr rows of logits ([nr, cols] on the device: the vocabulary or this rank's
// shard of it) into the host's [rows, V] at row0, in this rank's columns
static inline void vocab_capture_logits(const VocabShards* v, float* host, const floatX* logits, size_t row0, int nr,
                                        int cols, int V, stream_t s) {
    stream_synchronize(s);
    float* tmp = (float*)xmalloc((size_t)nr * cols * sizeof(float));
    dev_download_floats(tmp, logits, (size_t)nr * cols);
    int vtp = v->st->lay.vocab_tp;
    size_t c0 = vtp ? v->st->lay.v0 : 0, valid = vtp ? v->st->lay.v_valid : (size_t)cols;
    for (int i = 0; i < nr; i++) memcpy(host + (row0 + i) * V + c0, tmp + (size_t)i * cols, valid * sizeof(float));
    free(tmp);
}
#endif

// The cross-entropy of nr rows whose logits this rank holds a vocabulary shard of
// ([nr, Vs]): the row max, then the sums of exponentials and the target logit, each
// summed over the TP group. The padding columns are masked out.
static inline void vocab_crossentropy(VocabShards* v, float* losses, floatX* logits, const int* targets, int nr, float dloss,
                                      int backward) {
    ParamStore* st = v->st;
    stream_t s = st->stream;
    int Vs = (int)st->lay.vs, v0 = (int)st->lay.v0, nv = (int)st->lay.v_valid;
    crossentropy_vp_max(v->ce_max, logits, nr, Vs, nv, s);
    comm_all_reduce(param_store_comm(st), GROUP_TP, v->ce_max, nr, COMM_FLOAT, COMM_MAX, s);
    comm_join(st->comm, s);
    crossentropy_vp_sums(v->ce_sums, logits, v->ce_max, targets, nr, Vs, v0, nv, s);
    // the sums of exponentials [0, nr) and the target logits [nr, 2 nr): one all-reduce
    comm_all_reduce(param_store_comm(st), GROUP_TP, v->ce_sums, 2 * (size_t)nr, COMM_FLOAT, COMM_SUM, s);
    comm_join(st->comm, s);
    crossentropy_vp_finish(losses, logits, v->ce_max, v->ce_sums, targets, nr, Vs, v0, nv, dloss, backward, s);
}

// What --shard-vocab buys against the same run without it (the store's tensor table and
// --zero), per rank: parameters, gradients and optimizer state of the vocabulary (master:
// fp32 master weights kept). It can be negative (a tied model under --zero 1: docs/memory.md
// section 7), so the log says it.
static inline void vocab_log_savings(Logger* lg, const ParamStore* st, int master, size_t D) {
    const ParamLayout* lay = &st->lay;
    const Comm* comm = st->comm;
    ParamLayout off;
    param_layout_build(&off, lay->spec, lay->n_spec, lay->L, comm->tp, 0, comm_grad_ranks(comm), 0, lay->zero, 0, lay->split, lay->stage);
    double per_opt = 4.0 * (2 + master), per_local = 2.0 * sizeof(floatX) + 4.0 * st->grad_fp32;
    double without = off.n_local * per_local + off.n_opt * per_opt;
    double with = lay->n_local * per_local + lay->n_opt * per_opt +
                  (lay->vocab_tp ? 0.0 : 2.0 * lay->vocab_rows * comm_grad_ranks(comm) * D * sizeof(floatX));
    logf_(lg, "--shard-vocab 1 %s %.1f MiB per rank against --shard-vocab 0 (parameters, gradients and optimizer "
          "state of the vocabulary, %s)\n", without >= with ? "saves" : "COSTS", fabs(without - with) / 1048576.0,
          lay->vocab_tp ? "split over the TP group; not counted: the CE chunk's logits, 1/tp of the columns too"
                        : "less its two gathered buffers");
    param_layout_free(&off);
}

// Over TP: the whole row of V logits on every rank of the group, from each rank's
// vocab_cols of them on the device (the shards in rank order, without the padding).
static inline void vocab_gather_logits(const VocabShards* v, float* host_logits, const floatX* logits, int vocab_cols, int V) {
    Comm* cm = v->st->comm;
    int tp = cm->tp;
    float* mine = (float*)xmalloc((size_t)vocab_cols * sizeof(float));
    float* all = (float*)xmalloc((size_t)vocab_cols * tp * sizeof(float));
    dev_download_floats(mine, logits, vocab_cols);
    comm_host_gather(cm, GROUP_TP, mine, (size_t)vocab_cols * sizeof(float), all);
    comm_host_broadcast(cm, GROUP_TP, all, (size_t)vocab_cols * tp * sizeof(float), 0);
    memcpy(host_logits, all, (size_t)V * sizeof(float));
    free(mine); free(all);
}

// Over DP: what the vocabulary sends per optimizer step (comm_bytes_add's count): the
// weights gathered at use (tied: one gathered copy serves the whole step; untied: the
// lookup and the head take turns in the one buffer), the gradients reduce-scattered.
static inline void vocab_comm_bytes(const VocabShards* v, CommBytes* cb, int micro_steps) {
    if (!vocab_over_dp(v)) return;
    const Comm* cm = v->st->comm;
    double full = (double)v->st->lay.vocab_rows * comm_grad_ranks(cm) * (double)v->D * sizeof(floatX);
    // (under --pp a stage's one matrix stays gathered all step, and is reduce-scattered each micro-step)
    double held = v->tied ? (v->held ? 1 : 0) : v->held;
    comm_bytes_add(cb, cm, GROUP_GRAD, KIND_ALL_GATHER, (held == 2 ? 2.0 * micro_steps : held) * full);
    comm_bytes_add(cb, cm, GROUP_GRAD, KIND_REDUCE_SCATTER, held * micro_steps * full);
}

// The token embedding of N tokens into x (this rank's own rows: tpc says which). emb: the
// table's rows this rank holds. Replicated or over DP, a lookup of the whole table
// (gathered at use); over TP, each rank looks up the tokens in its rows (zeros for the
// others) and the partial rows are summed over the group.
static inline void vocab_embed_forward(VocabShards* v, TpContext* tpc, Profile* prof, floatX* x, const int* inputs,
                                       floatX* emb, int N) {
    const ParamLayout* lay = &v->st->lay;
    stream_t s = v->st->stream;
    int D = (int)v->D, own = tp_own_rows(tpc, N);
    if (!lay->vocab_tp) {
        PROF(prof, "embedding", 0, 2.0 * own * D * SX, s)
            encoder_forward(x, inputs + tp_own_row0(tpc, N), vocab_weights(v, v->emb, emb), own, D, s);
        return;
    }
    TpRows part = tp_partial_rows(tpc, x, N);
    PROF(prof, "embedding", 0, 2.0 * N * D * SX, s)
        encoder_forward_range(part.p, inputs, emb, N, D, (int)lay->v0, (int)lay->v_valid, s);
    floatX* mine = tp_reduce_rows(tpc, part.p, N);
    if (mine != x) dev_memcpy_d2d(x, mine, (size_t)own * D * sizeof(floatX), s);
    tp_give_back(tpc, &part);
}

// its backward: dx (this rank's own rows of the gradient) into demb, the table's gradient
// (over DP the unsharded one of vocab_grad_begin); over TP all N rows' gradient, gathered
static inline void vocab_embed_backward(VocabShards* v, TpContext* tpc, Profile* prof, floatX* demb, floatX* dx,
                                        const int* inputs, int N) {
    const ParamLayout* lay = &v->st->lay;
    stream_t s = v->st->stream;
    int D = (int)v->D;
    PROF(prof, "embedding", 0, 3.0 * N * D * SX, s) {
        if (!lay->vocab_tp) {
            encoder_backward(demb, dx, inputs + tp_own_row0(tpc, N), tp_own_rows(tpc, N), D, s);
        } else {
            TpRows dy = tp_grad_rows(tpc, dx, N);
            encoder_backward_range(demb, dy.p, inputs, N, D, (int)lay->v0, (int)lay->v_valid, s);
            tp_give_back(tpc, &dy);
        }
    }
}
