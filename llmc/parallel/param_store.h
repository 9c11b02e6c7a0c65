/*
One rank's parameters, gradients and optimizer state, laid out by llmc/parallel/param_layout.h,
and what data parallelism does with them: the gradient reduction of a bucket (an
all-reduce, or with --zero 1 a reduce-scatter leaving each rank the sum over its own
part), the fp32 accumulation of micro-steps, the global gradient norm over shards,
AdamW over the owned pieces with the all-gather of ZeRO-1 (with --offload-optim 1 on the
CPU, the state in pinned host memory: llmc/parallel/host_optimizer.h), full sharding
(--zero 2: a layer's gradients kept only as this rank's shard; --zero 3: its parameters
too, gathered where the layer runs; docs/design.md 8.8), and the moves of the whole state
to and from the reference layout (reference files, test dumps; a checkpoint moves each
rank's own pieces instead: llmc/train/state_checkpoint.h).

A model fills a table of ParamSpec, then:
    param_store_layout   the layout of this rank (before planning)
    param_store_plan     the arena entries (parameters, gradients, fp32 accumulator,
                         master weights, AdamW moments), sized by the layout
    param_store_bind     after allocation: the stream, the profile, zeroed buffers
and in the step: param_store_layer_begin / _end around each layer's run (forward,
backward, validation, sampling: under --zero 3 the gathers, under 2 and 3 the backward's
gradient buffer), param_store_bucket_done as backward completes each bucket (reductions
start on the communication stream, overlapping the layers below), param_store_grad_norm,
param_store_apply_update.
*/
#pragma once
#include <limits.h>
#include "../core/common.h"
#include "../kernels/kernels.h"
#include "../core/arena.h"
#include "comm.h"
#include "../kernels/profile.h"
#include "param_layout.h"
#include "tensor_parallel.h"
#include "recycled.h"
#include "host_optimizer.h"
#include "../io/checkpoint.h"

// --test-plant-zero-bug 1 (TESTING builds: the test programs): a --zero 3 layer's
// parameter buffer is given back as soon as the layer begins, and the layer computes on it
// all the same. Given back, a buffer is poisoned (llmc/parallel/recycled.h), so the
// gradient check must fail: the proof that the check sees a unit computing on a released buffer.
static int zero_test_plant_bug = 0;

typedef struct {
    ParamLayout lay;
    Piece* pieces; int n_pieces;       // what this rank owns, in optimizer order
    floatX *params, *grads;            // the local buffers: [n_local], or from param_base / grad_base on (below)
    // --zero 2 keeps the layers' gradients, --zero 3 their parameters too, only as this
    // rank's shard: the local buffers then start at the first element outside the layers
    // (the rest bucket and the vocabulary kept whole, as under --zero 1), and a layer's
    // whole bucket exists only while the layer runs, in one of two recycled buffers
    // (the layer's parity picks it: the next layer's fills while this one computes).
    int zero;
    size_t param_base, grad_base;      // local element param_base is params[0] (0, or bucket[L].start)
    size_t opt_layers;                 // the owned elements of the layer buckets: the shards' length
    size_t* bucket_opt;                // [n_buckets]: where bucket b's owned part starts in optimizer order
    floatX *param_shard, *grad_shard;  // [opt_layers]: the owned part of the layer buckets (else NULL)
    RecycledPool units;                // the layer buckets' buffers
    int param_buf[2], grad_buf[2];     // their pool ids
    floatX **param_held, **grad_held;  // [L]: layer l's whole bucket while it runs, else NULL
    int param_in[2];                   // the layer whose parameters buffer i holds or gathers (-1 none)
    // --zero-reshard 0: every layer's parameters stay gathered from its forward to its
    // backward, each in its own place of one buffer (the layers' local layout) instead of
    // the two recycled ones; gathered[l]: layer l's gather has been issued and not released
    int keep;
    floatX* kept;
    int* gathered;
    int grad_reducing[2];              // the layer whose gradients buffer i reduces (-1 none)
    event_t param_gathered[2], grad_reduced[2];
    char param_holder[2][48], grad_holder[2][48];  // the holders' names (llmc/parallel/recycled.h)
    float *master, *adam_m, *adam_v;   // [n_opt]; master only where HAVE_MASTER_WEIGHTS; on the host with --offload-optim 1
    HostOptim host;                    // --offload-optim: the staging, copy stream and CPU update of that state
    float* grad_acc;                   // --fp32-grad-accum: the fp32 sum of the step's micro-steps [n_local]
    float* norm_scratch;               // one float on the device, planned by the model
    int grad_fp32;
    Comm* comm;
    void* staging; size_t staging_bytes;  // --comm mpi (CUDA): pinned host staging, planned by the model
    stream_t stream;
    Profile* prof;
    const TpContext* tpc;              // the model's TP context: whether sequence parallelism is on
    unsigned version;                  // bumped whenever the parameters change (an update, a load): caches compare it
} ParamStore;

// The layout of this rank (comm's DP, TP and pipeline ranks; split: the stages' layers,
// NULL for one stage) for the model's tensor table.
static inline void param_store_layout(ParamStore* ps, const ParamSpec* spec, int n_spec, int L, Comm* comm, int zero,
                                      int shard_vocab, int grad_fp32, const PpSplit* split) {
    memset(ps, 0, sizeof(*ps));
    ps->comm = comm; ps->grad_fp32 = grad_fp32;
    if (comm->pp > 1 && zero >= 2)
        FAIL("--zero %d with --pp %d: the layers' gradients (and parameters) are reduced (and gathered) every micro-step, "
             "and under a pipeline schedule the micro-steps of different micro-batches interleave on a stage; as in "
             "DeepSpeed, ZeRO-2 and ZeRO-3 are not combined with pipeline stages: use --zero 1 (each stage's optimizer "
             "state sharded over its DP group)", zero, comm->pp);
    param_layout_build(&ps->lay, spec, n_spec, L, comm->tp, comm->tp_rank, comm_grad_ranks(comm), comm_grad_rank(comm), zero,
                       shard_vocab, split, comm->pp_rank);
    ps->pieces = (Piece*)xmalloc(param_layout_max_pieces(&ps->lay) * sizeof(Piece));
    ps->n_pieces = param_layout_pieces(&ps->lay, ps->pieces);
    const ParamLayout* lay = &ps->lay;
    ps->zero = zero;
    ps->bucket_opt = (size_t*)xmalloc((size_t)lay->n_buckets * sizeof(size_t));
    size_t opt = 0;
    for (int b = 0; b < lay->n_buckets; b++) { size_t lo, n; bucket_owned(lay, b, &lo, &n); ps->bucket_opt[b] = opt; opt += n; }
    ps->opt_layers = ps->bucket_opt[lay->L];
    size_t rest = lay->bucket[lay->L].start;
    ps->grad_base = zero >= 2 ? rest : 0;
    ps->param_base = zero >= 3 ? rest : 0;
}

// the largest layer bucket, in elements: the size of a recycled unit buffer
static inline size_t param_store_largest_layer(const ParamStore* ps) {
    size_t most = 0;
    for (int b = 0; b < ps->lay.L; b++) most = ps->lay.bucket[b].padded > most ? ps->lay.bucket[b].padded : most;
    return most;
}

// offload_optim: the optimizer state in the pinned host arena h instead of the device's
static inline void param_store_plan(ParamStore* ps, Arena* d, Arena* h, int have_master, int offload_optim) {
    size_t n_local = ps->lay.n_local, n_opt = ps->lay.n_opt, unit = param_store_largest_layer(ps) * sizeof(floatX);
    size_t sharded = ps->opt_layers * sizeof(floatX), n_grads = n_local - ps->grad_base;
    int zero = ps->zero, two = ps->lay.L > 1;  // one layer needs one buffer
    arena_add_to(d, zero >= 3 ? "parameters (outside the layers)" : "parameters", "parameters",
                 (n_local - ps->param_base) * sizeof(floatX), &ps->params);
    arena_add_to(d, "parameter shard (layers)", "parameters", zero >= 3 ? sharded : 0, &ps->param_shard);
    ps->units.n = 0;
    int keep = zero >= 3 && ps->keep;
    ps->param_buf[0] = recycled_plan_as(&ps->units, d, "layer parameters (even layers)", "parameters", zero >= 3 && !keep ? unit : 0);
    ps->param_buf[1] = recycled_plan_as(&ps->units, d, "layer parameters (odd layers)", "parameters",
                                        zero >= 3 && !keep && two ? unit : 0);
    arena_add_to(d, "layer parameters (kept for backward)", "parameters",
                 keep ? ps->lay.bucket[ps->lay.L].start * sizeof(floatX) : 0, &ps->kept);
    arena_add_to(d, zero >= 2 ? "gradients (outside the layers)" : "gradients", "gradients", n_grads * sizeof(floatX), &ps->grads);
    arena_add_to(d, "gradient shard (layers)", "gradients", zero >= 2 ? sharded : 0, &ps->grad_shard);
    ps->grad_buf[0] = recycled_plan_as(&ps->units, d, "layer gradients (even layers)", "gradients", zero >= 2 ? unit : 0);
    ps->grad_buf[1] = recycled_plan_as(&ps->units, d, "layer gradients (odd layers)", "gradients", zero >= 2 && two ? unit : 0);
    // the fp32 sums: of the local buffer, or under --zero 2/3 of its whole part and then of the shard
    arena_add_to(d, "gradient accumulator (fp32)", "gradients",
                 ps->grad_fp32 ? (n_grads + (zero >= 2 ? ps->opt_layers : 0)) * sizeof(float) : 0, &ps->grad_acc);
    Arena* opt = offload_optim ? h : d;
    arena_add_to(opt, "master weights (fp32)", "optimizer", have_master ? n_opt * sizeof(float) : 0, &ps->master);
    arena_add_to(opt, "adam m", "optimizer", n_opt * sizeof(float), &ps->adam_m);
    arena_add_to(opt, "adam v", "optimizer", n_opt * sizeof(float), &ps->adam_v);
    host_optim_plan(&ps->host, h, n_opt, offload_optim);
}

// the largest bucket, in elements: what --comm mpi stages through host memory at most
static inline size_t param_store_largest_bucket(const ParamStore* ps) {
    size_t most = 0;
    for (int b = 0; b < ps->lay.n_buckets; b++) most = ps->lay.bucket[b].padded > most ? ps->lay.bucket[b].padded : most;
    return most;
}

// bucket padding and the padded vocabulary rows stay zero for good
static inline void param_store_bind(ParamStore* ps, stream_t s, Profile* prof, float* norm_scratch, void* staging,
                                    size_t staging_bytes) {
    ps->stream = s; ps->prof = prof; ps->norm_scratch = norm_scratch;
    ps->staging = staging; ps->staging_bytes = staging_bytes;
    host_optim_bind(&ps->host, &ps->lay, ps->pieces, ps->n_pieces);
    size_t n = ps->lay.n_local, ng = n - ps->grad_base, L = (size_t)ps->lay.L;
    dev_memset(ps->params, 0, (n - ps->param_base) * sizeof(floatX), s);
    dev_memset(ps->grads, 0, ng * sizeof(floatX), s);
    if (ps->grad_acc) dev_memset(ps->grad_acc, 0, (ng + (ps->grad_shard ? ps->opt_layers : 0)) * sizeof(float), s);
    if (ps->param_shard) dev_memset(ps->param_shard, 0, ps->opt_layers * sizeof(floatX), s);
    if (ps->grad_shard) dev_memset(ps->grad_shard, 0, ps->opt_layers * sizeof(floatX), s);
    ps->param_held = (floatX**)xmalloc((L ? L : 1) * sizeof(floatX*));
    ps->grad_held = (floatX**)xmalloc((L ? L : 1) * sizeof(floatX*));
    ps->gathered = (int*)xmalloc((L ? L : 1) * sizeof(int));
    for (size_t l = 0; l < L; l++) { ps->param_held[l] = ps->grad_held[l] = NULL; ps->gathered[l] = 0; }
    for (int i = 0; i < 2; i++) {
        ps->param_in[i] = ps->grad_reducing[i] = -1;
        ps->param_gathered[i] = event_create();
        ps->grad_reduced[i] = event_create();
    }
}

static inline void param_store_free(ParamStore* ps) {
    if (ps->comm && ps->comm->staging == ps->staging && ps->staging) comm_set_staging(ps->comm, NULL, 0);  // never left dangling
    host_optim_free(&ps->host);
    param_layout_free(&ps->lay);
    free(ps->pieces); free(ps->bucket_opt); free(ps->param_held); free(ps->grad_held); free(ps->gathered);
    ps->pieces = NULL; ps->bucket_opt = NULL; ps->param_held = ps->grad_held = NULL; ps->gathered = NULL;
    if (ps->stream) for (int i = 0; i < 2; i++) { event_destroy(ps->param_gathered[i]); event_destroy(ps->grad_reduced[i]); }
}

// The communicator, with this store's staging buffer attached: the staging belongs to
// the model's plan, and a process may hold two models (a test's flag-off run).
static inline Comm* param_store_comm(ParamStore* ps) {
    comm_set_staging(ps->comm, ps->staging, ps->staging_bytes);
    return ps->comm;
}

// Where this rank's owned part of piece pc lives: its gradient (after the reduction)
// and its parameters (what AdamW updates). In the local buffer, or in a shard of its
// own where the local copy is not kept whole.
static inline floatX* param_store_owned_grad(const ParamStore* ps, const Piece* pc) {
    return pc->local_off < ps->grad_base ? ps->grad_shard + pc->opt_off : ps->grads + (pc->local_off - ps->grad_base);
}
static inline floatX* param_store_owned_param(const ParamStore* ps, const Piece* pc) {
    return pc->local_off < ps->param_base ? ps->param_shard + pc->opt_off : ps->params + (pc->local_off - ps->param_base);
}

// Local element off (of layer l's bucket, or l = -1 outside the layers): its parameters
// or gradient. Under --zero 3 (2 for gradients) a layer's element exists only between
// param_store_layer_begin and the layer's end: reaching it at any other time is a
// trainer's bug, stopped here rather than left to read another layer's values.
static inline floatX* param_store_param_at(const ParamStore* ps, int l, size_t off) {
    if (l < 0 || off >= ps->param_base) return ps->params + (off - ps->param_base);
    if (!ps->param_held[l])
        FAIL("--zero 3: layer %d's parameters used outside param_store_layer_begin/end (no buffer holds them)", l);
    return ps->param_held[l] + (off - ps->lay.bucket[l].start);
}
static inline floatX* param_store_grad_at(const ParamStore* ps, int l, size_t off) {
    if (l < 0 || off >= ps->grad_base) return ps->grads + (off - ps->grad_base);
    if (!ps->grad_held[l])
        FAIL("--zero %d: layer %d's gradients used outside its backward (no buffer holds them)", ps->zero, l);
    return ps->grad_held[l] + (off - ps->lay.bucket[l].start);
}

// The owned fp32 state, n floats from optimizer offset opt_off, to or from the host:
// part 0 the parameters (the master weights where the build has them, else the
// parameters themselves), 1 AdamW m, 2 AdamW v. What checkpoints and reference files
// move, a rank's own share at a time.
static inline float* param_store_state_array(const ParamStore* ps, int part) {
    return part == 0 ? ps->master : part == 1 ? ps->adam_m : ps->adam_v;
}
static inline void param_store_owned_read(ParamStore* ps, int part, size_t opt_off, size_t n, float* out) {
    float* arr = param_store_state_array(ps, part);
    comm_join(ps->comm, ps->stream);
    stream_synchronize(ps->stream);
    if (arr) { host_optim_state_get(&ps->host, out, arr + opt_off, n); return; }
    for (int i = 0; i < ps->n_pieces; i++) {  // the parameters themselves, piece by piece
        const Piece* pc = &ps->pieces[i];
        size_t a = pc->opt_off > opt_off ? pc->opt_off : opt_off;
        size_t e = pc->opt_off + pc->n < opt_off + n ? pc->opt_off + pc->n : opt_off + n;
        if (e > a) dev_download_floats(out + (a - opt_off), param_store_owned_param(ps, pc) + (a - pc->opt_off), e - a);
    }
}
static inline void param_store_owned_write(ParamStore* ps, int part, size_t opt_off, size_t n, const float* in) {
    float* arr = param_store_state_array(ps, part);
    stream_synchronize(ps->stream);
    if (arr) host_optim_state_put(&ps->host, arr + opt_off, in, n);
    if (part != 0) return;
    for (int i = 0; i < ps->n_pieces; i++) {  // the parameters, from the fp32 values
        const Piece* pc = &ps->pieces[i];
        size_t a = pc->opt_off > opt_off ? pc->opt_off : opt_off;
        size_t e = pc->opt_off + pc->n < opt_off + n ? pc->opt_off + pc->n : opt_off + n;
        if (e > a) dev_upload_floats(param_store_owned_param(ps, pc) + (a - pc->opt_off), in + (a - opt_off), e - a);
    }
}

static inline void param_store_zero_grads(ParamStore* ps) {
    host_optim_step_begin(&ps->host, ps->stream);
    dev_memset(ps->grads, 0, (ps->lay.n_local - ps->grad_base) * sizeof(floatX), ps->stream);
    if (ps->grad_shard) dev_memset(ps->grad_shard, 0, ps->opt_layers * sizeof(floatX), ps->stream);
}

// The gradients of [lo, lo + n) (kept whole on this rank) are complete for this
// micro-step. With --fp32-grad-accum they move into the fp32 accumulator (the floatX
// buffer is zeroed for the next micro-step), and on the last micro-step the sum comes
// back, rounded once, for the reduction, the norm and AdamW.
static inline void param_store_micro_step_done(ParamStore* ps, size_t lo, size_t n, int last) {
    if (!ps->grad_acc || n == 0) return;
    int k = prof_begin(ps->prof, "grad accumulate (fp32)", ps->stream);
    grad_accumulate(ps->grad_acc + (lo - ps->grad_base), param_store_grad_at(ps, -1, lo), n, last, ps->stream);
    prof_end(ps->prof, k, 0, n * (2.0 * sizeof(floatX) + 8.0), ps->stream);
}

// The TP all-reduce of the gradients of tensors every TP rank holds whole but computed
// from only part of the work (param_tp_grad_partial): its own rows under sequence
// parallelism (norm weights, biases, a replicated vocabulary), its own heads in any mode,
// for the segments of one layer (-1: the rest). Once per step on the accumulated sums,
// or per micro-step where a layer's gradients are reduced per micro-step (--zero 2, 3).
static inline void param_store_reduce_tp_replicated(ParamStore* ps, int layer) {
    const ParamLayout* lay = &ps->lay;
    if (lay->tp == 1) return;
    int sp = ps->tpc && ps->tpc->sp;
    for (int i = 0; i < lay->n_seg; i++) {
        const Segment* g = &lay->seg[i];
        if (g->layer != layer || !param_tp_replicated(lay, g->tensor) || g->n == 0) continue;
        if (!param_tp_grad_partial(lay, g->tensor, sp)) continue;
        comm_all_reduce(param_store_comm(ps), GROUP_TP, param_store_grad_at(ps, layer, g->local_off), g->n, COMM_FLOATX,
                        COMM_SUM, ps->stream);
    }
}

// Starts the DP reduction of bucket b's gradients (kept whole) on the communication
// stream, after the work already on the compute stream.
static inline void param_store_reduce_bucket(ParamStore* ps, int b) {
    const Bucket* k = &ps->lay.bucket[b];
    floatX* g = param_store_grad_at(ps, -1, k->start);
    if (ps->lay.zero) comm_reduce_scatter(param_store_comm(ps), GROUP_GRAD, g, k->padded / comm_grad_ranks(ps->comm), COMM_FLOATX, ps->stream);
    else comm_all_reduce(param_store_comm(ps), GROUP_GRAD, g, k->padded, COMM_FLOATX, COMM_SUM, ps->stream);
}

// --zero 2, 3: gradient buffer i's reduction has been waited for: the compute stream may reuse it
static inline void param_store_retire_grad_buffer(ParamStore* ps, int i) {
    if (ps->grad_reducing[i] < 0) return;
    stream_wait_event(ps->stream, ps->grad_reduced[i]);
    recycled_give_back(&ps->units, ps->grad_buf[i], ps->stream);
    ps->grad_reducing[i] = -1;
}

// --zero 2, 3: layer l's gradients are complete for this micro-step. They are reduced
// at once (TP for the replicated tensors, then the DP reduce-scatter) and this rank's
// part is added to its shard (in the fp32 accumulator with --fp32-grad-accum, rounded
// into the shard on the last micro-step), where the result of the collective is ready,
// so the layers below run meanwhile; the buffer is taken again two layers on.
static inline void param_store_reduce_layer(ParamStore* ps, int l, int last) {
    const ParamLayout* lay = &ps->lay;
    const Bucket* k = &lay->bucket[l];
    int i = l & 1;
    floatX* buf = ps->grad_held[l];
    if (!buf) FAIL("--zero %d: layer %d's gradients are done but its backward never began (param_store_layer_begin)", ps->zero, l);
    param_store_reduce_tp_replicated(ps, l);
    size_t lo, n; bucket_owned(lay, l, &lo, &n);
    Comm* cm = param_store_comm(ps);
    comm_reduce_scatter(cm, GROUP_GRAD, buf, n, COMM_FLOATX, ps->stream);
    stream_t rs = comm_result_stream(cm, ps->stream);
    floatX *mine = buf + (lo - k->start), *shard = ps->grad_shard + ps->bucket_opt[l];
    int p = prof_begin(ps->prof, "grad shard accumulate", rs);
    if (ps->grad_acc) {
        grad_accumulate(ps->grad_acc + (lay->n_local - ps->grad_base) + ps->bucket_opt[l], mine, n, last, rs);
        if (last) dev_memcpy_d2d(shard, mine, n * sizeof(floatX), rs);
    } else grad_add(shard, mine, n, rs);
    prof_end(ps->prof, p, 0, n * (ps->grad_acc ? 2.0 * sizeof(floatX) + 8.0 : 3.0 * sizeof(floatX)), rs);
    event_record(ps->grad_reduced[i], rs);
    ps->grad_reducing[i] = l;
    ps->grad_held[l] = NULL;
}

// Bucket b's gradients are complete for this micro-step (b = L: the rest). Kept whole,
// on the last micro-step its reductions start: TP for the replicated tensors under
// sequence parallelism, then DP. A layer's under --zero 2 and 3: reduced now, every
// micro-step. The rest comes last in backward: no layer buffer is held after it.
static inline void param_store_fetch_owned(ParamStore* ps, int g);
static inline void param_store_bucket_done(ParamStore* ps, int b, int last) {
    const Bucket* k = &ps->lay.bucket[b];
    if (b < ps->lay.L && ps->grad_shard) {
        param_store_reduce_layer(ps, b, last);
        if (last) param_store_fetch_owned(ps, b);
        return;
    }
    param_store_micro_step_done(ps, k->start, k->padded, last);
    if (last && !(b == ps->lay.L && ps->lay.pp > 1)) {  // (a stage's rest: param_store_pipeline_done)
        param_store_reduce_tp_replicated(ps, b < ps->lay.L ? b : -1);
        param_store_reduce_bucket(ps, b);
        param_store_fetch_owned(ps, b);  // --offload-optim: its shard to the host as soon as it is reduced
    }
    if (b == ps->lay.L) for (int i = 0; i < 2; i++) param_store_retire_grad_buffer(ps, i);
}

// A pipeline stage's step is done (every micro-batch's backward has run). The tensors several
// stages hold (a tied embedding at both ends, the DiT's conditioning on every stage) have
// each stage's part of their gradients: summed over those stages first, on what this rank
// holds of them (the whole rest bucket's segment, or its owned vocabulary rows, already
// reduced over DP each micro-step), so that every copy takes the same update. Then the
// rest bucket's reductions, held back until now: a stage's last backward ends before its
// neighbours' do, and a collective between stages inside it would wait for stages still
// waiting on it.
static inline void param_store_pipeline_done(ParamStore* ps) {
    const ParamLayout* lay = &ps->lay;
    if (lay->pp == 1) return;
    for (int i = 0; i < lay->n_seg; i++) {
        const Segment* g = &lay->seg[i];
        if (g->layer >= 0 || g->n == 0 || !pp_shared(lay->spec[g->tensor].stages, lay->pp)) continue;
        CommGroup grp = lay->spec[g->tensor].stages == STAGE_ENDS ? GROUP_PP_ENDS : GROUP_PP;
        comm_all_reduce(param_store_comm(ps), grp, param_store_grad_at(ps, -1, g->local_off), g->n, COMM_FLOATX, COMM_SUM,
                        ps->stream);
    }
    comm_join(ps->comm, ps->stream);
    param_store_reduce_tp_replicated(ps, -1);
    param_store_reduce_bucket(ps, lay->L);
    param_store_fetch_owned(ps, lay->L);
}

// --offload-optim: group g's owned gradients (and parameters, where the host keeps no master
// copy) start for the host, after its reduction (llmc/parallel/host_optimizer.h)
static inline void param_store_fetch_owned(ParamStore* ps, int g) {
    HostOptim* h = &ps->host;
    if (!host_optim_fetch_begin(h, g, ps->comm, ps->stream)) return;
    for (int i = h->first[g]; i < h->first[g + 1]; i++) {
        const Piece* pc = &ps->pieces[i];
        host_optim_fetch(h, param_store_owned_grad(ps, pc), ps->master ? NULL : param_store_owned_param(ps, pc), pc->opt_off, pc->n);
    }
    host_optim_fetch_end(h, g);
}

// --zero 3: starts the gather of layer l's parameters into buffer l & 1 (its own part
// from the shard, then the all-gather on the communication stream), unless it is there
// already (prefetched). The buffer's previous layer must have ended.
static inline void param_store_gather_layer(ParamStore* ps, int l) {
    int i = l & 1;
    const ParamLayout* lay = &ps->lay;
    const Bucket* k = &lay->bucket[l];
    floatX* buf;
    if (ps->keep) {  // (its own place: gathered once a micro-step, released after its backward)
        if (ps->gathered[l]) return;
        buf = ps->kept + k->start;
        ps->gathered[l] = 1;
    } else {
        if (ps->param_in[i] == l) return;
        if (ps->param_in[i] >= 0)
            FAIL("--zero 3: layer %d's parameters are wanted in the buffer of layer %d's, which has not ended "
                 "(param_store_layer_end)", l, ps->param_in[i]);
        snprintf(ps->param_holder[i], sizeof(ps->param_holder[i]), "layer %d's parameters", l);
        buf = recycled_take(&ps->units, ps->param_buf[i], ps->param_holder[i], k->padded * sizeof(floatX));
    }
    size_t lo, n; bucket_owned(lay, l, &lo, &n);
    dev_memcpy_d2d(buf + (lo - k->start), ps->param_shard + ps->bucket_opt[l], n * sizeof(floatX), ps->stream);
    Comm* cm = param_store_comm(ps);
    comm_all_gather(cm, GROUP_GRAD, buf, n, COMM_FLOATX, ps->stream);
    event_record(ps->param_gathered[i], comm_result_stream(cm, ps->stream));
    if (!ps->keep) ps->param_in[i] = l;
}

// Layer l is about to run, its forward (backward = 0) or its backward (which may
// recompute its forward first). Under --zero 3 its parameters are gathered, or were
// prefetched, and the compute stream waits for them; the gather of layer `next` (-1:
// none) starts now, overlapping this layer's work. Under --zero 2 and 3 its backward
// gets a zeroed gradient buffer. Without full sharding: nothing.
static inline void param_store_layer_begin(ParamStore* ps, int l, int next, int backward) {
    if (ps->param_shard) {
        param_store_gather_layer(ps, l);
        if (next >= 0 && next < ps->lay.L && next != l) param_store_gather_layer(ps, next);
        // (kept from its forward, the event is an older gather's, long done: the wait costs nothing)
        stream_wait_event(ps->stream, ps->param_gathered[l & 1]);
        ps->param_held[l] = ps->keep ? ps->kept + ps->lay.bucket[l].start : ps->units.buf[ps->param_buf[l & 1]].ptr;
        if (zero_test_plant_bug && !ps->keep) recycled_give_back(&ps->units, ps->param_buf[l & 1], ps->stream);  // the planted bug
    }
    if (backward && ps->grad_shard) {
        int i = l & 1;
        param_store_retire_grad_buffer(ps, i);
        snprintf(ps->grad_holder[i], sizeof(ps->grad_holder[i]), "layer %d's gradients", l);
        size_t bytes = ps->lay.bucket[l].padded * sizeof(floatX);
        ps->grad_held[l] = recycled_take(&ps->units, ps->grad_buf[i], ps->grad_holder[i], bytes);
        dev_memset(ps->grad_held[l], 0, bytes, ps->stream);
    }
}

// Layer l's work is on the compute stream: under --zero 3 its parameter buffer goes
// back (a layer's gradient buffer goes with its reduction: param_store_bucket_done),
// unless backward_follows (a training forward) and --zero-reshard 0 keeps it for the
// layer's backward.
static inline void param_store_layer_end(ParamStore* ps, int l, int backward_follows) {
    if (!ps->param_shard) return;
    int i = l & 1;
    if (!ps->param_held[l] || (!ps->keep && ps->param_in[i] != l)) FAIL("--zero 3: layer %d ended but never began", l);
    if (ps->keep) {
        if (backward_follows) return;
        ps->param_held[l] = NULL;
        ps->gathered[l] = 0;
#ifdef TESTING  // given back: poisoned, as a recycled buffer is (llmc/parallel/recycled.h)
        dev_memset(ps->kept + ps->lay.bucket[l].start, 0xFF, ps->lay.bucket[l].padded * sizeof(floatX), ps->stream);
#endif
        return;
    }
    ps->param_held[l] = NULL;
    ps->param_in[i] = -1;
    if (!zero_test_plant_bug) recycled_give_back(&ps->units, ps->param_buf[i], ps->stream);
}

// The global gradient norm (before clipping), once the reductions are done: each rank
// sums the squares of what it owns, then one all-reduce. Owned ranges, not tensors: the
// padding of a bucket holds zero gradients, so it adds nothing, and the norm takes one
// call per owned range (one for all the buckets when they are replicated, counted once,
// on DP rank 0) instead of one per tensor. Under TP the pieces of what this rank owns
// are summed instead, the TP-replicated ones on TP rank 0 only, and the all-reduce
// spans the world.
static inline float param_store_norm_of(ParamStore* ps, int grads, const char* group);
static inline float param_store_grad_norm(ParamStore* ps) { return param_store_norm_of(ps, 1, "grad norm"); }

// Are the parameters finite? Their norm, by the same owned ranges: checked before every
// checkpoint, so that an update that made NaN or Inf (a huge --lr) stops the run
// with the last good checkpoint on disk instead of writing a bad one over it.
static inline int param_store_params_finite(ParamStore* ps) {
    return isfinite(param_store_norm_of(ps, 0, "parameter check"));
}

// tests only (--test-nan-update): a NaN in this rank's first owned parameter, as an update
// gone wrong would leave it
static inline void param_store_plant_nan(ParamStore* ps) {
    float nan = NAN;
    if (ps->n_pieces > 0) dev_upload_floats(param_store_owned_param(ps, &ps->pieces[0]), &nan, 1);
}

static inline int param_store_piece_writer(const ParamStore* ps, const Piece* pc);

// the norm of the gradients (grads = 1) or the parameters over what each rank owns
static inline float param_store_norm_of(ParamStore* ps, int grads, const char* group) {
    stream_t s = ps->stream;
    const ParamLayout* lay = &ps->lay;
    Comm* cm = ps->comm;
    comm_join(cm, s);
    int k = prof_begin(ps->prof, group, s);
    dev_memset(ps->norm_scratch, 0, sizeof(float), s);
    if (lay->tp > 1 || lay->pp > 1) {  // (a shared tensor's copies beyond stage 0: not counted)
        for (int i = 0; i < ps->n_pieces; i++) {
            const Piece* pc = &ps->pieces[i];
            if (!param_store_piece_writer(ps, pc)) continue;
            global_norm_squared(ps->norm_scratch, grads ? param_store_owned_grad(ps, pc) : param_store_owned_param(ps, pc),
                                pc->n, s);
        }
    } else {
        // a range of the local buffer kept whole, or a layer bucket's owned part in the shard
        floatX* whole = grads ? ps->grads : ps->params;
        size_t base = grads ? ps->grad_base : ps->param_base;
        floatX* shard = grads ? ps->grad_shard : ps->param_shard;
        if (lay->zero) {
            for (int b = 0; b < lay->n_buckets; b++) {
                size_t lo, n; bucket_owned(lay, b, &lo, &n);
                global_norm_squared(ps->norm_scratch, lo < base ? shard + ps->bucket_opt[b] : whole + (lo - base), n, s);
            }
        } else if (comm_grad_rank(cm) == 0) {
            global_norm_squared(ps->norm_scratch, whole, lay->vocab_start, s);
        }
        if (lay->n_local > lay->vocab_start)  // the owned vocabulary rows
            global_norm_squared(ps->norm_scratch, whole + (lay->vocab_start - base), lay->n_local - lay->vocab_start, s);
    }
    prof_end(ps->prof, k, 0, (double)lay->n_opt * sizeof(floatX), s);
    comm_all_reduce(param_store_comm(ps), GROUP_WORLD, ps->norm_scratch, 1, COMM_FLOAT, COMM_SUM, s);
    comm_join(cm, s);
    float norm2 = 0.0f;
    dev_memcpy_d2h(&norm2, ps->norm_scratch, sizeof(float), s);
    comm_synchronize(cm);
    stream_synchronize(s);
    return sqrtf(norm2);
}

// The factor of global-norm clipping, as torch.nn.utils.clip_grad_norm_: grad_clip /
// (norm + 1e-6) when that is below 1, else 1 (and 1 when clipping is off, grad_clip 0).
static inline float grad_clip_scale(float grad_clip, float norm) {
    if (grad_clip <= 0.0f) return 1.0f;
    float coef = grad_clip / (norm + 1e-6f);
    return coef < 1.0f ? coef : 1.0f;
}

// The parameters this rank holds but does not own, from their owners, once the owned
// ones have changed (an update, a load through param_store_owned_write): with --zero 1
// and 2 the all-gather of each bucket, with 3 of the bucket outside the layers (a layer's
// is gathered where it runs); without, every rank owns all it holds (its vocabulary
// rows under --shard-vocab too), and nothing moves.
static inline void param_store_sync_params(ParamStore* ps) {
    stream_t s = ps->stream;
    if (ps->lay.zero)  // (a fully sharded layer is gathered where it runs: param_store_layer_begin)
        for (int b = 0; b < ps->lay.n_buckets; b++)
            if (ps->lay.bucket[b].start >= ps->param_base)
                comm_all_gather(param_store_comm(ps), GROUP_GRAD, param_store_param_at(ps, -1, ps->lay.bucket[b].start),
                                ps->lay.bucket[b].padded / comm_grad_ranks(ps->comm), COMM_FLOATX, s);
    comm_join(ps->comm, s);
    comm_synchronize(ps->comm);
    stream_synchronize(s);
    ps->version++;
}

// Does this rank write owned piece pc to a checkpoint? Each element of the file has one
// writer, as each has one term in param_store_norm_of: what DP replicates (no --zero) is
// DP rank 0's, what TP replicates TP rank 0's, the vocabulary rows --shard-vocab
// spreads over DP each rank's own, and what several pipeline stages hold stage 0's.
static inline int param_store_piece_writer(const ParamStore* ps, const Piece* pc) {
    const ParamLayout* lay = &ps->lay;
    if (param_stage_copy(lay, pc->tensor)) return 0;
    if (pc->local_off >= lay->vocab_start) return 1;
    if (!lay->zero && lay->rank != 0) return 0;
    return !(param_tp_replicated(lay, pc->tensor) && lay->tp_rank != 0);
}

// Global-norm clipping (as torch.nn.utils.clip_grad_norm_) and one AdamW step on what
// this rank owns (weight decay on the tensors whose spec says so); with --zero 1 the
// updated parts are then all-gathered.
static inline void param_store_apply_update(ParamStore* ps, float lr, float beta1, float beta2, float eps, float weight_decay,
                                            float grad_clip, float norm, int t) {
    stream_t s = ps->stream;
    for (int l = 0; ps->keep && l < ps->lay.L; l++)  // a kept copy would outlive the update it predates
        if (ps->gathered[l]) FAIL("--zero-reshard 0: layer %d's parameters are still kept at the update (a training forward "
                                  "whose backward never ran)", l);
    float scale = grad_clip_scale(grad_clip, norm);
    int k = prof_begin(ps->prof, "adamw", s);
    HostOptim* h = &ps->host;
    if (h->on) {
        // on the CPU, group by group in the order backward started their copies (the rest
        // now): a group's upload overlaps the next group's update
        for (int g = 0; g < h->n_groups; g++) param_store_fetch_owned(ps, g);
        for (int j = 0; j < h->n_started; j++) {
            int g = h->order[j];
            host_optim_wait(h, g);
            for (int i = h->first[g]; i < h->first[g + 1]; i++) {
                const Piece* pc = &ps->pieces[i];
                float wd = ps->lay.spec[pc->tensor].decays ? weight_decay : 0.0f;
                size_t o = pc->opt_off;
                host_adamw(h->param + o, ps->master ? ps->master + o : NULL, h->grad + o, ps->adam_m + o, ps->adam_v + o, pc->n,
                           lr, beta1, beta2, eps, wd, scale, t);
            }
            for (int i = h->first[g]; i < h->first[g + 1]; i++)
                host_optim_send(h, param_store_owned_param(ps, &ps->pieces[i]), ps->pieces[i].opt_off, ps->pieces[i].n);
        }
        host_optim_done(h, s);
    } else
        for (int i = 0; i < ps->n_pieces; i++) {
            const Piece* pc = &ps->pieces[i];
            float wd = ps->lay.spec[pc->tensor].decays ? weight_decay : 0.0f;
            adamw_update(param_store_owned_param(ps, pc), ps->master ? ps->master + pc->opt_off : NULL, param_store_owned_grad(ps, pc),
                         ps->adam_m + pc->opt_off, ps->adam_v + pc->opt_off, pc->n, lr, beta1, beta2, eps, wd, scale, t, s);
        }
    // per element: parameter and gradient (floatX), moments and master weights (fp32), read and written
    prof_end(ps->prof, k, 0, (double)ps->lay.n_opt * (3.0 * sizeof(floatX) + 4.0 * (2 + (ps->master != NULL)) * 2), s);
    param_store_sync_params(ps);
}

// What data parallelism sends in one step of micro_steps micro-batches (comm_bytes_add's
// count): each bucket once (all-reduce, or with --zero 1 reduce-scatter and all-gather),
// and the squared norm. A fully sharded layer's bucket: its gradients reduce-scattered
// every micro-step (--zero 2, 3), its parameters all-gathered once after the update
// (--zero 2), or before its forward and again before its backward (--zero 3).
static inline void param_store_comm_bytes(const ParamStore* ps, CommBytes* cb, int micro_steps) {
    for (int b = 0; b < ps->lay.n_buckets; b++) {
        double bytes = ps->lay.bucket[b].padded * (double)sizeof(floatX);
        int layer = b < ps->lay.L;
        if (ps->lay.zero) {
            comm_bytes_add(cb, ps->comm, GROUP_GRAD, KIND_REDUCE_SCATTER, (layer && ps->zero >= 2 ? micro_steps : 1) * bytes);
            comm_bytes_add(cb, ps->comm, GROUP_GRAD, KIND_ALL_GATHER,
                           (layer && ps->zero >= 3 ? (ps->keep ? 1 : 2) * micro_steps : 1) * bytes);
        } else comm_bytes_add(cb, ps->comm, GROUP_GRAD, KIND_ALL_REDUCE, bytes);
    }
    for (int i = 0; i < ps->lay.n_seg; i++) {  // --pp: what several stages hold, summed over them (param_store_pipeline_done)
        const Segment* g = &ps->lay.seg[i];
        int stages = ps->lay.spec[g->tensor].stages;
        if (g->layer < 0 && pp_shared(stages, ps->lay.pp))
            comm_bytes_add(cb, ps->comm, stages == STAGE_ENDS ? GROUP_PP_ENDS : GROUP_PP, KIND_ALL_REDUCE, g->n * (double)sizeof(floatX));
    }
    comm_bytes_add(cb, ps->comm, GROUP_WORLD, KIND_ALL_REDUCE, sizeof(float));
}

// ----------------------------------------------------------------------------
// the state in the reference layout

// Writes one part of the state from the whole model's fp32 array in the reference
// layout (the same on every rank) into this rank's layout: part 0 the parameters (and
// this rank's part of the master weights), 1 AdamW m, 2 AdamW v. A part without an
// array (a fresh start's moments) is zeroed on the device: llama3-1B's m and v are
// 10 GB of host zeros otherwise, built and uploaded. Whatever no segment or piece
// covers (bucket padding, padded vocabulary rows) is zero.
static inline void param_store_set_state_part(ParamStore* ps, int part, const float* ref) {
    const ParamLayout* lay = &ps->lay;
    float* dst = part == 0 ? ps->master : part == 1 ? ps->adam_m : ps->adam_v;
    if (part == 0) ps->version++;
    if (part == 0) dev_memset(ps->params, 0, (lay->n_local - ps->param_base) * sizeof(floatX), ps->stream);
    if (part == 0 && ps->param_shard) dev_memset(ps->param_shard, 0, ps->opt_layers * sizeof(floatX), ps->stream);
    if (dst) host_optim_state_zero(&ps->host, dst, lay->n_opt, ps->stream);
    stream_synchronize(ps->stream);  // the uploads below do not run on the stream
    if (!ref) return;
    float* local = segments_contiguous(lay) ? NULL : layout_local_from_ref(lay, ref);
    if (part == 0) {  // the parameters kept whole, then (--zero 3) the owned part of the layers
        for (int i = 0; i < lay->n_seg; i++) {
            const Segment* g = &lay->seg[i];
            if (g->n && g->local_off >= ps->param_base)
                dev_upload_floats(param_store_param_at(ps, -1, g->local_off), layout_local_element(lay, ref, local, g->local_off), g->n);
        }
        for (int i = 0; i < ps->n_pieces; i++) {
            const Piece* pc = &ps->pieces[i];
            if (pc->local_off < ps->param_base)
                dev_upload_floats(param_store_owned_param(ps, pc), layout_local_element(lay, ref, local, pc->local_off), pc->n);
        }
    }
    if (dst)
        for (int i = 0; i < ps->n_pieces;) {
            // the owned pieces, in optimizer order; pieces that follow each other on the
            // host and in the optimizer state (a whole bucket of a local copy) go up as one
            const Piece* first = &ps->pieces[i];
            const float* from = layout_local_element(lay, ref, local, first->local_off);
            size_t n = first->n;
            for (i++; i < ps->n_pieces && ps->pieces[i].opt_off == first->opt_off + n &&
                      layout_local_element(lay, ref, local, ps->pieces[i].local_off) == from + n; i++)
                n += ps->pieces[i].n;
            host_optim_state_put(&ps->host, dst + first->opt_off, from, n);
        }
    free(local);
}

// fresh parameters: the optimizer's moments start at zero
static inline void param_store_set_state(ParamStore* ps, const float* ref_params, const float* ref_m, const float* ref_v) {
    param_store_set_state_part(ps, 0, ref_params);
    param_store_set_state_part(ps, 1, ref_m);
    param_store_set_state_part(ps, 2, ref_v);
}

// Assembles the whole model's view of an owned array (n_opt floats on every rank, in
// optimizer order) in the reference layout, on world rank 0 (ref_out may be NULL
// elsewhere). Rank 0 rebuilds every rank's layout: the gradient group of one stage and TP
// rank together own its whole local buffer, whose segments then land in the reference
// layout (a shared tensor's from stage 0).
static inline void param_store_gather_owned(ParamStore* ps, const float* owned, float* ref_out) {
    Comm* c = ps->comm;
    const ParamLayout* me = &ps->lay;
    double most = (double)me->n_opt;  // ranks differ (a dimension split unevenly, vocabulary padding)
    comm_host_all_reduce(c, GROUP_WORLD, &most, 1, COMM_MAX);
    size_t stride = (size_t)most;
    float* mine = (float*)xmalloc((stride ? stride : 1) * sizeof(float));
    memset(mine, 0, stride * sizeof(float));
    memcpy(mine, owned, me->n_opt * sizeof(float));
    float* all = c->rank == 0 ? (float*)xmalloc((stride ? stride : 1) * c->size * sizeof(float)) : NULL;
    comm_host_gather(c, GROUP_WORLD, mine, stride * sizeof(float), all);
    free(mine);
    if (c->rank != 0) return;
    int G = comm_grad_ranks(c);
    for (int st = 0; st < c->pp; st++)
    for (int t = 0; t < c->tp; t++) {
        float* local = NULL;
        for (int q = 0; q < G; q++) {  // gradient-group rank q = d * cp + k: world rank ((d * pp + st) * cp + k) * tp + t
            int world = ((q / c->cp * c->pp + st) * c->cp + q % c->cp) * c->tp + t;
            ParamLayout lay;
            param_layout_build(&lay, me->spec, me->n_spec, me->L, c->tp, t, G, q, me->zero, me->shard_vocab, me->split, st);
            if (!local) { local = (float*)xmalloc((lay.n_local ? lay.n_local : 1) * sizeof(float)); memset(local, 0, lay.n_local * sizeof(float)); }
            Piece* pieces = (Piece*)xmalloc(param_layout_max_pieces(&lay) * sizeof(Piece));
            int np = param_layout_pieces(&lay, pieces);
            const float* src = all + (size_t)world * stride;
            for (int i = 0; i < np; i++) memcpy(local + pieces[i].local_off, src + pieces[i].opt_off, pieces[i].n * sizeof(float));
            for (int i = 0; i < lay.n_seg; i++)  // FSDP vocabulary rows: each DP rank's own segments
                if (lay.seg_bucket[i] == -1 && !param_stage_copy(&lay, lay.seg[i].tensor)) segment_copy(&lay.seg[i], local, ref_out, 0);
            if (q == G - 1)
                for (int i = 0; i < lay.n_seg; i++)
                    if (lay.seg_bucket[i] != -1 && !param_stage_copy(&lay, lay.seg[i].tensor)) segment_copy(&lay.seg[i], local, ref_out, 0);
            free(pieces);
            param_layout_free(&lay);
        }
        free(local);
    }
    free(all);
}

// The fp32 parameters (master weights where the build has them), AdamW m and v of the
// whole model in the reference layout, on world rank 0 (the pointers are not used on
// the other ranks). A collective: every rank calls it. For small models (test programs,
// reference files): a checkpoint never gathers (llmc/train/state_checkpoint.h).
static inline void param_store_get_state(ParamStore* ps, float* ref_params, float* ref_m, float* ref_v) {
    size_t n_opt = ps->lay.n_opt;
    float* owned = (float*)xmalloc((n_opt ? n_opt : 1) * sizeof(float));
    float* ref[3] = {ref_params, ref_m, ref_v};
    for (int part = 0; part < 3; part++) {
        param_store_owned_read(ps, part, 0, n_opt, owned);
        param_store_gather_owned(ps, owned, ref[part]);
    }
    free(owned);
}

// the DP-reduced gradients of the whole model in the reference layout, on world rank 0
static inline void param_store_get_grads(ParamStore* ps, float* ref_grads) {
    float* owned = (float*)xmalloc((ps->lay.n_opt ? ps->lay.n_opt : 1) * sizeof(float));
    comm_join(ps->comm, ps->stream);
    stream_synchronize(ps->stream);
    for (int i = 0; i < ps->n_pieces; i++)
        dev_download_floats(owned + ps->pieces[i].opt_off, param_store_owned_grad(ps, &ps->pieces[i]), ps->pieces[i].n);
    param_store_gather_owned(ps, owned, ref_grads);
    free(owned);
}

// The line that says which checkpoint a run continues from; a checkpoint outside --run-dir
// is said to be so, since this run's logs and checkpoints go to run_dir, not beside it.
static inline void ckpt_log_resumed(Logger* lg, const char* path, int step, const char* run_dir) {
    logf_(lg, "resumed from %s at step %d\n", path, step);
    char* dir = strdup(path);
    char* slash = dir ? strrchr(dir, '/') : NULL;
    if (slash) *slash = 0;
    char *here = realpath(slash ? dir : ".", NULL), *real_dir = realpath(run_dir, NULL);  // (heap: paths of any length)
    if (here && real_dir && strcmp(here, real_dir) != 0)
        logf_(lg, "note: %s is outside --run-dir %s: this run's logs and new checkpoints go to %s, and a later "
              "--resume auto there continues from those\n", path, run_dir, run_dir);
    free(dir); free(here); free(real_dir);
}

// Rank 0 checks a checkpoint (check fills info, info_bytes long); every rank gets info,
// or every rank stops with rank 0's reason.
static inline void ckpt_check_all_ranks(Comm* cm, const char* path, const char* (*check)(const char* path, void* info),
                                        void* info, size_t info_bytes) {
    char why[PATH_MAX + 512] = {0};  // (a path is at most PATH_MAX: no message is cut)
    if (cm->rank == 0) { const char* w = check(path, info); if (w) snprintf(why, sizeof(why), "%s", w); }
    comm_host_broadcast(cm, GROUP_WORLD, why, sizeof(why), 0);
    if (why[0]) FAIL("%s", why);
    comm_host_broadcast(cm, GROUP_WORLD, info, info_bytes, 0);
}
