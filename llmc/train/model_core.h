/*
What every model on this runtime holds besides its own math, once: the flags it was built
with, its ranks, the memory plan (device and pinned host arenas), the parameter store, the
activation plan and its offload, the tensor- and context-parallel contexts its operations
run on, the stream and profile, and the step's loss. A model derives from it
(struct Llama : ModelCore), so its functions read m->st, m->tpc, m->att directly, and the
runner (runner.h) sees a ModelCore and none of the model's types.

A model's build is its own plan between these calls, in the order its plan prints:
    model_core_begin       the flags, the tensor table, both arenas, the parameter store
    model_core_staging     --comm mpi's pinned staging, for the largest collective
    model_core_plan_acts   the activation plan and its offload (model_core_plan_work: the shared work buffer)
    model_core_allocate    once, then the model sets its own views into the arenas
    model_core_bind_rope   the RoPE table on the device, the attention operation bound
In the step, the loss: each rank adds what its rows gave (model_core_add_losses on the
device, model_core_add_loss on the host) and model_core_take_loss reduces it over the
ranks whose rows differ, named once at build (model_core_loss_rows).
*/
#pragma once
#include "../core/common.h"
#include "../core/arena.h"
#include "../parallel/comm.h"
#include "../parallel/parallel_args.h"
#include "../parallel/param_store.h"
#include "../parallel/tensor_parallel.h"
#include "../parallel/attention_op.h"
#include "../parallel/pipeline.h"
#include "memory_flags.h"
#include "fit_memory.h"
#include "trainer.h"

#define MODEL_MAX_TENSORS 32
#define NOT_ON_RANK ((size_t)-1)  // a tensor this rank holds no part of (the vocabulary split over DP)

struct ModelCore {
    MemoryFlags flags;
    ParallelFlags par;
    Comm* comm;                  // ranks and groups (one process: a world of one)
    int L, n_tensors;
    int allocated;               // 0: only the plan exists
    int micro_steps;             // micro-batches per optimizer step (the plan's communication bytes)
    int tokens_per_item;         // tokens of one unit of --total-batch (a token: 1; a clip: its tokens)
    ParamSpec spec[MODEL_MAX_TENSORS];                                     // the tensor table
    size_t param_sizes[MODEL_MAX_TENSORS], param_off[MODEL_MAX_TENSORS];   // the reference layout
    size_t num_params;

    Arena dev, host;             // the memory plan (device and pinned host)
    ParamStore st;               // this rank's parameters, gradients and optimizer state
    size_t* local_off;           // [n_tensors * L]: where tensor t (its layer l; 0 for a whole-model tensor) starts
    void* comm_staging;          // --comm mpi (CUDA): pinned host staging of the collectives
    size_t staging_bytes;
    ActPlan acts;                // the activation fields and where each lives
    Offload off;                 // where each layer's saved block lives
    ActBlock work;               // the fields that are not saved, shared by all layers
    int work_handle;
    int gathered_view[2][2];     // (own field, kept gathered field) pairs: the own rows are a view of the kept copy
    int rows_cur;                // the rows of the micro-batch in flight (residual stream, all TP ranks)
    PpSplit split;               // --pp: the stages' layers (llmc/parallel/pipeline.h)
    Pipeline pipe;               // --pp: this stage's schedule and its executor
    int* act_index;              // [L]: layer l's block in its chunk's slot (-1: another stage's)
    int* act_base;               // [virt]: the first block of chunk c's slots (each slot the chunk's layers)
    int act_layers;              // the stage's layers
    int micro_cur;               // --pp: the micro-batch whose activations the layers use (its slot)
    int head_micro;              // --pp: whose head gradient the working gradient holds (-1: none; core_take_head_grad)
    TpContext tpc;               // tensor parallelism's collectives and recycled buffers
    CpContext cpx;               // context parallelism's layout and buffers
    Attention att;               // the attention operation over it
    float *rope_cos, *rope_sin;  // the RoPE table by position
    float* loss_dev;             // the device sum of per-token losses since the last take (NULL: host sums only)
    double loss_host, loss_count;
    CommGroup loss_group;        // the ranks whose losses differ
    stream_t stream;
    Profile prof;                // --profile-step (llmc/kernels/profile.h)
};

// parameters of tensor t in layer l (l = 0 for a whole-model tensor), or NULL when not on
// this rank; under full sharding a layer's exist only while it runs (param_store_layer_begin)
static inline floatX* core_w(const ModelCore* c, int t, int l) {
    size_t o = c->local_off[(size_t)t * c->L + l];
    return o == NOT_ON_RANK ? NULL : param_store_param_at(&c->st, c->spec[t].per_layer ? l : -1, o);
}
static inline floatX* core_dw(const ModelCore* c, int t, int l) {
    size_t o = c->local_off[(size_t)t * c->L + l];
    return o == NOT_ON_RANK ? NULL : param_store_grad_at(&c->st, c->spec[t].per_layer ? l : -1, o);
}


// The flags, the tensor table (spec[i] for i < n, the reference layout's order), both
// arenas and the parameter store's entries.
static inline void model_core_begin(ModelCore* c, const ParamSpec* spec, int n, int L, Comm* comm, const MemoryFlags* f,
                                    const ParallelFlags* par, int shard_vocab) {
    if (n > MODEL_MAX_TENSORS) FAIL("model_core_begin: %d tensors, at most %d", n, MODEL_MAX_TENSORS);
    c->flags = *f; c->par = *par; c->comm = comm; c->L = L; c->n_tensors = n; c->tokens_per_item = 1;
    c->head_micro = -1;
    memcpy(c->spec, spec, (size_t)n * sizeof(ParamSpec));
    c->num_params = 0;
    for (int i = 0; i < n; i++) {
        c->param_sizes[i] = param_spec_size(&spec[i], L);
        c->param_off[i] = c->num_params;
        c->num_params += c->param_sizes[i];
    }
    // the pipeline: the stages' layers, this stage's schedule (its slots size the activation plan)
    double layer = 0, ends[2] = {0, 0};  // the parameters of a layer, and those only the first or the last stage holds
    for (int i = 0; i < n; i++) {
        if (spec[i].per_layer) layer += (double)spec[i].rows * spec[i].cols;
        else for (int e = 0; e < 2; e++) if (spec[i].stages & (e ? STAGE_LAST : STAGE_FIRST)) ends[e] += (double)spec[i].rows * spec[i].cols;
    }
    pp_split_build(&c->split, L, comm->pp, par->pp_virtual, par->pp_layers, ends[0] / layer, ends[1] / layer);
    pipeline_plan(&c->pipe, comm, (PpScheduleKind)par->pp_schedule, par->pp_virtual, par->micro_steps);
    // a micro-batch slot of chunk c holds its layers' blocks: slot k of chunk c from block act_base[c] + k * its layers
    c->act_index = (int*)xmalloc((size_t)L * sizeof(int));
    c->act_base = (int*)xmalloc((size_t)(par->pp_virtual + 1) * sizeof(int));
    for (int l = 0; l < L; l++) c->act_index[l] = -1;
    c->act_layers = 0; c->act_base[0] = 0;
    for (int k = 0; k < par->pp_virtual; k++) {
        int l0, l1;
        pp_chunk_layers(&c->split, comm->pp_rank, k, &l0, &l1);
        for (int l = l0; l < l1; l++) c->act_index[l] = l - l0;
        c->act_layers += l1 - l0;
        c->act_base[k + 1] = c->act_base[k] + (l1 - l0) * c->pipe.chunk_slots[k];
    }
    param_store_layout(&c->st, c->spec, n, L, comm, par->zero, shard_vocab, par->grad_fp32, &c->split);
    c->st.keep = par->zero >= 3 && !par->zero_reshard;  // (--zero-reshard 0: the layers' parameters kept for backward)
    arena_init(&c->dev, "device");
    arena_init(&c->host, "host (pinned)");
    param_store_plan(&c->st, &c->dev, &c->host, HAVE_MASTER_WEIGHTS, par->offload_optim);
    c->st.tpc = &c->tpc;  // the store's TP reductions follow the model's sequence-parallel decision
}

// --comm mpi in the CUDA build: the largest collective passes through pinned host memory,
// the largest of a bucket, the attention's exchanges, a pipeline transfer's halves (each
// boundary tensor of pipeline_plan_tensors) and the model's own (most elements)
static inline void model_core_staging(ModelCore* c, size_t most) {
    size_t bucket = param_store_largest_bucket(&c->st), att = attention_staging_elements(&c->att);
    size_t pp = c->comm->pp > 1 ? COMM_P2P_MAX * c->pipe.elems : 0;
    most = pp > most ? pp : most;
    most = bucket > most ? bucket : most;
    most = att > most ? att : most;
    c->staging_bytes = comm_staging_needed(c->comm) ? most * sizeof(floatX) : 0;
    arena_add_to(&c->host, "comm staging (--comm mpi)", "comm", c->staging_bytes, &c->comm_staging);
}

// The activation plan's saved blocks (n_offload of the L on the host). Under --pp the stage's
// layers for each micro-batch each chunk holds at once, and --offload-act N offloads the first
// N layers of every chunk's slot; -1 all of them but on the model's last piece its last layer,
// whose backward starts as soon as its forward ends (Megatron-LM #1752's rule).
static inline void model_core_plan_acts(ModelCore* c, ActPlan acts, int n_offload) {
    c->acts = acts;
    if (c->comm->pp == 1) { offload_plan(&c->off, &c->dev, &c->host, c->L, n_offload, acts.block_bytes); return; }
    int n = c->act_base[c->pipe.virt], flag = c->flags.offload_act, per = 0;
    unsigned char* off = (unsigned char*)xmalloc((size_t)(n > 0 ? n : 1) * 2);
    for (int k = 0; k < c->pipe.virt; k++) {
        int l0, l1;
        pp_chunk_layers(&c->split, c->comm->pp_rank, k, &l0, &l1);
        int Lc = l1 - l0, last = pp_last_piece(&c->split, c->comm->pp_rank, k);
        int N = flag == -1 ? Lc - last : flag < Lc ? flag : Lc;
        per += N;
        for (int slot = 0; slot < c->pipe.chunk_slots[k]; slot++)
            for (int i = 0; i < Lc; i++) {
                int u = c->act_base[k] + slot * Lc + i;
                off[u] = i < N; off[n + u] = (unsigned char)(i % 2);
            }
    }
    offload_plan_blocks(&c->off, &c->dev, &c->host, n, off, off + n, per, acts.block_bytes);
    free(off);
}

static inline void model_core_plan_work(ModelCore* c, const char* name) {
    c->work_handle = arena_add(&c->dev, name, "scratch", c->acts.work_bytes);
}

// own_f of the layer is a view of its kept gathered copy kept_f (--tp-recompute-allgather 0)
static inline void model_core_gathered_view(ModelCore* c, int i, int own_f, int kept_f) {
    c->gathered_view[i][0] = own_f; c->gathered_view[i][1] = kept_f;
}

// Allocates the plan once and binds what lives in it: the offload blocks, the work
// buffer, the parameters' offsets, the stream, the store and the TP context. norm_scratch:
// one device float for the gradient norm, planned by the model.
static inline void model_core_allocate(ModelCore* c, float** norm_scratch) {
    c->allocated = 1;
    arena_allocate(&c->dev, dev_malloc);
    arena_allocate(&c->host, host_malloc_pinned);
    offload_bind(&c->off, &c->dev, &c->host);
    act_plan_layout(&c->acts, ACT_IN_WORK, (char*)arena_ptr(&c->dev, c->work_handle), &c->work);
    size_t n = (size_t)c->n_tensors * c->L;
    c->local_off = (size_t*)xmalloc(n * sizeof(size_t));
    for (size_t i = 0; i < n; i++) c->local_off[i] = NOT_ON_RANK;
    for (int i = c->st.lay.n_seg - 1; i >= 0; i--) {  // backwards: a tensor cut in groups starts at its first
        const Segment* sg = &c->st.lay.seg[i];
        c->local_off[(size_t)sg->tensor * c->L + (sg->layer < 0 ? 0 : sg->layer)] = sg->local_off;
    }
    c->stream = stream_create();
    c->pipe.stream = c->stream;
    c->pipe.staging = c->comm_staging; c->pipe.staging_bytes = c->staging_bytes;
    matmul_setup();
    param_store_bind(&c->st, c->stream, &c->prof, *norm_scratch, c->comm_staging, c->staging_bytes);
    tp_context_bind(&c->tpc, c->stream, c->comm_staging, c->staging_bytes);
    cp_bind_staging(&c->cpx, c->comm_staging, c->staging_bytes);
}

// the RoPE table (cos then sin, n values each, host; freed here) to the device, and the
// attention operation bound to it
static inline void model_core_bind_rope(ModelCore* c, float* table, size_t n) {
    dev_memcpy_h2d(c->rope_cos, table, 2 * n * sizeof(float), c->stream);
    c->rope_sin = c->rope_cos + n;
    attention_bind(&c->att, c->rope_cos, c->rope_sin, &c->prof, c->stream);
    stream_synchronize(c->stream);
    free(table);
}

static inline void model_core_free(ModelCore* c) {
    free(c->act_index); c->act_index = NULL;
    free(c->act_base); c->act_base = NULL;
    pipeline_free(&c->pipe);
    if (c->allocated) {
        host_optim_free(&c->st.host);  // its copy stream idle before the arenas it copies go
        trainer_release(c->stream, &c->prof, &c->off, &c->dev, &c->host);
        free(c->local_off);
    }
    param_store_free(&c->st);
}

// layer l's saved block for the micro-batch in flight (llmc/parallel/offload.h's block id)
static inline int core_block(const ModelCore* c, int l) {
    int i = c->act_index[l], k = pp_layer_piece(&c->split, l) / c->split.pp, l0, l1;
    if (i < 0) FAIL("layer %d's activations asked for on pipeline stage %d, which does not hold it", l, c->comm->pp_rank);
    pp_chunk_layers(&c->split, c->comm->pp_rank, k, &l0, &l1);
    return c->act_base[k] + pipeline_slot(&c->pipe, c->micro_cur, k) * (l1 - l0) + i;
}
// is layer l + 1 in layer l's chunk (the model's next layer on this stage, not another piece's)?
static inline int core_next_in_chunk(const ModelCore* c, int l) {
    return l + 1 < c->L && pp_layer_piece(&c->split, l + 1) == pp_layer_piece(&c->split, l);
}
// the block a backward of layer l needs next: layer l - 1's in the same chunk (-1: l is its first)
static inline int core_block_below(const ModelCore* c, int l) {
    return l > 0 && pp_layer_piece(&c->split, l - 1) == pp_layer_piece(&c->split, l) ? core_block(c, l - 1) : -1;
}

// the saved activations of layer l (the dropped fields from the work buffer), the own rows
// of the gathered views pointing into their kept copies
static inline ActBlock core_layer_acts(const ModelCore* c, int l) {
    ActBlock a = act_block_at(&c->acts, offload_block(&c->off, core_block(c, l)), &c->work);
    if (c->tpc.keep_gathered) {
        size_t own = tp_own_row0(&c->tpc, c->rows_cur) * c->tpc.width;
        for (int i = 0; i < 2; i++) a.f[c->gathered_view[i][0]] = ACT(a, c->gathered_view[i][1]) + own;
    }
    return a;
}

// where layer l's output goes: layer l + 1's input (field in_field), or past the chunk's last
// layer (under --pp) or the model's, `last` (the head's input, or what the stage sends on)
static inline floatX* core_layer_output(const ModelCore* c, int l, int in_field, floatX* last) {
    return core_next_in_chunk(c, l) ? ACT(core_layer_acts(c, l + 1), in_field) : last;
}

// A backward of micro-batch `micro` through the last piece (ends) starts from the head's
// gradient, which its forward left in the working gradient (named `grad` in the message): under
// --pp another micro-batch's forward must not have run the head since.
static inline void core_take_head_grad(ModelCore* c, int micro, int ends, const char* grad) {
    if (ends && c->head_micro != micro)
        FAIL("pipeline: micro-batch %d's backward on the last stage, but %s holds micro-batch %d's head gradient", micro,
             grad, c->head_micro);
    c->head_micro = -1;
}

// What a step sends outside the model's own tensor parallelism, for a micro-batch of B
// samples: each layer's attention forward (again in backward under --recompute 2) and
// backward over the CP group, data parallelism's buckets and norm (over dp x cp), and under
// --pp the activations forward and the gradients back.
static inline void model_core_comm_bytes(const ModelCore* c, CommBytes* cb, int B) {
    double layers = (double)c->micro_steps * c->act_layers;
    attention_comm_bytes(&c->att, cb, B, layers * (1 + (c->flags.recompute >= 2)), layers);
    param_store_comm_bytes(&c->st, cb, c->micro_steps);
    pipeline_comm_bytes(&c->pipe, cb);
}

// a candidate's cost for --fit-memory and the rank plans (a model built without allocating):
// its plan's bytes, both arenas, the layers offloaded; seconds (the memory flags' and the
// ZeRO stage's) and base as fit_memory.h defines them
static inline FitCost model_core_fit_cost(const ModelCore* c, double seconds, double base, const CostModel* cm) {
    double unit = (double)param_store_largest_layer(&c->st) * sizeof(floatX);
    seconds += fit_zero_seconds(c->st.zero, c->L, unit, comm_grad_ranks(c->comm), base, cm);
    seconds += fit_offload_optim_seconds(c->par.offload_optim, c->st.lay.n_opt, c->L + 1, HAVE_MASTER_WEIGHTS, c->micro_steps, cm);
    FitCost f = {fit_plan_bytes(&c->dev, &c->host), seconds, base, c->off.layers_offloaded, (double)c->dev.total,
                 (double)c->host.total};
    return f;
}

// Where chunk `chunk`'s boundary tensors are for micro-batch `micro` (llmc/parallel/pipeline.h):
// its output (the model's stage output buffer), its input gradient (the model's working
// gradient), the received output gradient, and its input: field `in_field` of the chunk's
// first layer block in the micro-batch's slot, whose offload slot the receive takes first.
static inline floatX* core_pp_tensor(ModelCore* c, int micro, int chunk, int which, floatX* out, floatX* din, int in_field) {
    if (which == PP_OUT) return out;
    if (which == PP_DIN) return din;
    if (which == PP_DOUT) return pipeline_output_grad(&c->pipe);
    int l0, l1, was = c->micro_cur;
    pp_chunk_layers(&c->split, c->comm->pp_rank, chunk, &l0, &l1);
    c->micro_cur = micro;
    offload_before_write(&c->off, core_block(c, l0), c->stream);
    floatX* x = ACT(core_layer_acts(c, l0), in_field);
    c->micro_cur = was;
    return x;
}

// A pass of the model over n_micro micro-batches outside the runner's step (the test
// programs, validation, sampling), on the model's pipeline hooks: training (train = 1), the
// micro-batches' forwards and backwards, under --pp through the stage's schedule, then the
// gradients several stages hold summed and the rest reduced; evaluation, each micro-batch's
// forward alone (under --pp through every stage in turn).
static inline void model_core_pass(ModelCore* c, const PpHooks* h, int n_micro, int train) {
    if (c->comm->pp > 1 && train) {
        if (n_micro != c->pipe.micro)
            FAIL("a pass of %d micro-batches, but the pipeline's schedule was planned for %d", n_micro, c->pipe.micro);
        pipeline_run_step(&c->pipe, h);
        param_store_pipeline_done(&c->st);
        return;
    }
    for (int j = 0; j < n_micro; j++) {
        if (c->comm->pp > 1) { pipeline_forward_only(&c->pipe, h, j); continue; }
        h->forward(h->ctx, j, 0);
        if (train) h->backward(h->ctx, j, 0, j == n_micro - 1);
    }
}

// ----------------------------------------------------------------------------
// the state and the update

static inline void model_core_set_params(ModelCore* c, const float* host_params) {
    param_store_set_state(&c->st, host_params, NULL, NULL);
}

// How a tensor starts: zeros, ones, normal(0, a), or uniform(-a, a) (xavier: a = sqrt(6 / (fan_in + fan_out)))
typedef enum { INIT_ZERO, INIT_ONES, INIT_NORMAL, INIT_UNIFORM } InitKind;
typedef struct { InitKind kind; float a; } ParamInit;

static inline ParamInit init_xavier(size_t fan_in, size_t fan_out) {
    ParamInit p = {INIT_UNIFORM, sqrtf(6.0f / (float)(fan_in + fan_out))};
    return p;
}

// Fresh parameters, tensor by tensor in the table's order (init[i] for tensor i), from one
// sequential stream of draws: a seed gives one model on every machine, drawn on every
// thread with the serial loop's bits (llmc/core/rand.h). The moments start at zero.
static inline void model_core_init_params(ModelCore* c, const ParamInit* init, uint64_t seed) {
    float* h = (float*)xmalloc((c->num_params ? c->num_params : 1) * sizeof(float));
    Rng rng; rng_init(&rng, seed);
    for (int i = 0; i < c->n_tensors; i++) {
        float* t = h + c->param_off[i];
        size_t n = c->param_sizes[i];
        if (init[i].kind == INIT_NORMAL) rng_fill_normal(&rng, t, n, init[i].a, 0);
        else if (init[i].kind == INIT_UNIFORM) rng_fill_uniform_symmetric(&rng, t, n, init[i].a, 0);
        else for (size_t j = 0; j < n; j++) t[j] = init[i].kind == INIT_ONES ? 1.0f : 0.0f;
    }
    model_core_set_params(c, h);
    free(h);
}

// clipping and one AdamW step with the gradient norm given (the runner's step)
static inline void model_core_apply_update(ModelCore* c, const TrainLoopArgs* l, float lr, float norm, int step) {
    param_store_apply_update(&c->st, lr, l->beta1, l->beta2, l->adam_eps, l->weight_decay, l->grad_clip, norm, step);
}

// the norm, clipping and one AdamW step (the test programs); returns the norm before clipping
static inline float model_core_update(ModelCore* c, float lr, float beta1, float beta2, float eps, float weight_decay,
                                      float grad_clip, int step) {
    float norm = param_store_grad_norm(&c->st);
    param_store_apply_update(&c->st, lr, beta1, beta2, eps, weight_decay, grad_clip, norm, step);
    return norm;
}

// ----------------------------------------------------------------------------
// the loss

// Whose losses differ: the gradient group's ranks (dp x cp) always; the TP ranks too when
// each computed the loss of its own rows (sequence parallelism) rather than all of them.
// loss_sum: one device float (NULL: the model adds host sums only).
static inline void model_core_loss_rows(ModelCore* c, int differ_over_tp, float* loss_sum) {
    // (under --pp only the last stage has losses: the sums and counts of the others are zero)
    c->loss_group = differ_over_tp || c->comm->pp > 1 ? GROUP_WORLD : GROUP_GRAD;
    c->loss_dev = loss_sum;
    if (loss_sum && c->allocated) dev_memset(loss_sum, 0, sizeof(float), c->stream);
}

// the per-token losses of n rows (device), summed on the device: no wait per micro-batch
static inline void model_core_add_losses(ModelCore* c, const float* losses, size_t n) {
    sum_accumulate(c->loss_dev, losses, n, c->stream);
    c->loss_count += (double)n;
}

// a host sum of count values' losses
static inline void model_core_add_loss(ModelCore* c, double sum, double count) {
    c->loss_host += sum;
    c->loss_count += count;
}

// The mean loss over everything added since the last call, over the ranks whose rows
// differ: the step's one read of a device value and wait for the device. Resets the sums.
static inline float model_core_take_loss(ModelCore* c) {
    float dev = 0.0f;
    if (c->loss_dev) {
        dev_memcpy_d2h(&dev, c->loss_dev, sizeof(float), c->stream);
        dev_memset(c->loss_dev, 0, sizeof(float), c->stream);
    }
    comm_synchronize(c->comm);  // bounded: a dead peer ends here with a message
    stream_synchronize(c->stream);
    double v[2] = {dev + c->loss_host, c->loss_count};
    c->loss_host = 0.0; c->loss_count = 0.0;
    comm_host_all_reduce(c->comm, c->loss_group, v, 2, COMM_SUM);
    return v[1] > 0 ? (float)(v[0] / v[1]) : NAN;
}
