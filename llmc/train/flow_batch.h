/*
The batches of rectified-flow training (docs/design.md 9.3) and its held-out validation,
for any model of clips: clips from a ClipSource (llmc/io/video_data.h) with their noise,
t = sigmoid(n) and the label dropout, every draw a function of (seed, the clip's global
index), so a resumed run sees the same numbers. The model is behind one callback for
validation (each clip's loss); its training step reads the batch itself.

scripts/pytorch_dit.py draws the same numbers (its SALT_TRAIN is the one here).
*/
#pragma once
#include "../core/common.h"
#include "../core/rand.h"
#include "../core/logger.h"
#include "../parallel/comm.h"
#include "../io/video_data.h"
#include "../parallel/parallel_args.h"
#include "train_args.h"

#define SALT_TRAIN 0x7261696eull  // separates the training draws from validation's
#define SALT_VAL 0x76616c21ull

// B clips x0 [B, clip] with their noise [B, clip], times t [B] and classes y [B]
typedef struct { float *x0, *noise, *t; int* y; int B; size_t clip; } FlowBatch;

static inline void flow_batch_alloc(FlowBatch* b, int B, size_t clip) {
    b->B = B; b->clip = clip;
    b->x0 = (float*)xmalloc((size_t)B * clip * sizeof(float));
    b->noise = (float*)xmalloc((size_t)B * clip * sizeof(float));
    b->t = (float*)xmalloc((size_t)B * sizeof(float));
    b->y = (int*)xmalloc((size_t)B * sizeof(int));
}
static inline void flow_batch_free(FlowBatch* b) { free(b->x0); free(b->noise); free(b->t); free(b->y); }

// clip i of the batch is the source's clip first + i; salt separates training from validation
static inline void flow_batch_fill(FlowBatch* b, ClipSource* src, uint64_t first, uint64_t seed, uint64_t salt,
                                   float label_dropout, int null_class) {
    const size_t clip = b->clip;
    for (int i = 0; i < b->B; i++) {
        uint64_t index = first + (uint64_t)i;
        clipsource_get(src, index, b->x0 + (size_t)i * clip, &b->y[i]);
        Rng r; rng_init(&r, seed ^ salt ^ (index * 0x9E3779B97F4A7C15ull));
        for (size_t j = 0; j < clip; j++) b->noise[(size_t)i * clip + j] = rng_normal(&r);
        b->t[i] = 1.0f / (1.0f + expf(-rng_normal(&r)));
        if (rng_uniform(&r) < label_dropout) b->y[i] = null_class;
    }
}

// Micro-batch `micro` of step `step` (counted from 1) on this DP rank: a global micro-batch
// is B x dp clips in a row of the source, DP rank r taking B of them from its r-th place,
// so the clips of a step do not depend on the layout.
static inline void flow_batch_train(FlowBatch* b, ClipSource* src, int step, int micro, int grad_accum, const Comm* comm,
                                    uint64_t seed, float label_dropout, int null_class) {
    uint64_t first = (((uint64_t)(step - 1) * grad_accum + micro) * comm->dp + comm->dp_rank) * b->B;
    flow_batch_fill(b, src, first, seed, SALT_TRAIN, label_dropout, null_class);
}

// the validation loss on the fixed held-out set, overall and per t bucket (NaN: not evaluated)
typedef struct { double all, bucket[3]; int count[3]; } ValLoss;

static inline ValLoss val_loss_none(void) {
    ValLoss v = {NAN, {NAN, NAN, NAN}, {0, 0, 0}};
    return v;
}

// per_clip[b->B] gets the loss of each clip of b (no gradients)
typedef void (*ClipLosses)(void* model, const FlowBatch* b, float* per_clip);

// The held-out set in chunks of b->B clips, chunk k on DP rank k % dp. Each clip's loss and
// t land in its own slot of one array (zero elsewhere), summed over the ranks (x + 0 is
// exact) and then added up in clip order: the same numbers as one process with the same
// --batch, whatever the number of ranks.
// The held-out clips in batches, batch k on DP rank k % dp. lockstep: the model's forward
// is a collective over the DP ranks (--zero 3 gathers each block's parameters), so every
// rank runs as many forwards: one left without a batch of its own runs the first again,
// its losses unused.
static inline ValLoss flow_validate(Comm* comm, ClipSource* val, FlowBatch* b, int n_clips, uint64_t seed, int null_class,
                                    ClipLosses losses, void* model, int lockstep) {
    ValLoss r = {0.0, {0.0, 0.0, 0.0}, {0, 0, 0}};
    float* per = (float*)xmalloc((size_t)b->B * sizeof(float));
    double* slots = (double*)xmalloc(2 * (size_t)n_clips * sizeof(double));  // loss, t of each clip
    memset(slots, 0, 2 * (size_t)n_clips * sizeof(double));
    int batches = (int)ceil_div(n_clips, b->B), rounds = (int)ceil_div(batches, comm->dp);
    for (int round = 0; round < rounds; round++) {
        int k = round * comm->dp + comm->dp_rank, spare = k >= batches;
        if (spare && !lockstep) break;
        int done = spare ? 0 : k * b->B, n = n_clips - done < b->B ? n_clips - done : b->B;
        FlowBatch part = *b; part.B = n;
        flow_batch_fill(&part, val, (uint64_t)done, seed, SALT_VAL, 0.0f, null_class);
        losses(model, &part, per);  // (every member of a CP group runs it; member 0's numbers are written, once)
        for (int i = 0; i < n && comm->cp_rank == 0 && !spare; i++) { slots[2 * (done + i)] = per[i]; slots[2 * (done + i) + 1] = part.t[i]; }
    }
    comm_host_all_reduce(comm, GROUP_GRAD, slots, 2 * (size_t)n_clips, COMM_SUM);
    for (int i = 0; i < n_clips; i++) {
        float loss = (float)slots[2 * i], t = (float)slots[2 * i + 1];
        int k = t < 1.0f / 3.0f ? 0 : t < 2.0f / 3.0f ? 1 : 2;
        r.all += loss; r.bucket[k] += loss; r.count[k]++;
    }
    r.all /= n_clips;
    for (int k = 0; k < 3; k++) r.bucket[k] = r.count[k] ? r.bucket[k] / r.count[k] : NAN;
    free(per); free(slots);
    return r;
}

// the step's validation line (with each bucket's clip count) and its metrics fields
static inline void val_loss_log(Logger* lg, int step, const ValLoss* v) {
    logf_(lg, "step %5d | val loss %.6f | by t: low noise (t<1/3) %.6f (%d), middle %.6f (%d), high noise "
          "(t>=2/3) %.6f (%d)\n", step, v->all, v->bucket[0], v->count[0], v->bucket[1], v->count[1], v->bucket[2],
          v->count[2]);
}

static inline void val_loss_metrics(Logger* lg, const ValLoss* v) {
    metrics_num(lg, "val_loss", v->all); metrics_num(lg, "val_loss_low_t", v->bucket[0]);
    metrics_num(lg, "val_loss_mid_t", v->bucket[1]); metrics_num(lg, "val_loss_high_t", v->bucket[2]);
}

// ----------------------------------------------------------------------------
// A diffusion model's data around the runner (llmc/train/runner.h), as token_data.h is a
// language model's: the training and held-out clips, the batch, --total-batch in clips
// (--grad-accum its alias in micro-batches), the validation and its metrics.

typedef struct {
    ClipSource train, val;
    FlowBatch batch;
    const Comm* comm;
    int grad_accum, val_clips, null_class;
    int lockstep;  // the model's forward is a collective over DP (flow_validate)
    float label_dropout;
    uint64_t seed;
    ValLoss vl;  // this step's validation, val_loss_none() when none ran
} FlowData;

// --total-batch in clips over all ranks (0: one micro-batch, or --grad-accum of them); returns
// the micro-batches of a step. Under sequence parallelism the last, smaller batches of
// validation (val_clips) and of sampling (2 x NC rows) must split over TP too.
static inline int flow_batch_resolve(RunArgs* r, const Comm* comm, int tokens_per_clip, int val_clips, int NC) {
    int dp = comm->dp, per_micro = r->B * dp;
    if ((int64_t)per_micro * (r->grad_accum ? r->grad_accum : 1) > (1 << 30))
        FAIL("--batch %d x %d DP ranks x --grad-accum %d clips per step: at most 2^30 (the counts wrap past that)", r->B, dp,
             r->grad_accum);
    if (r->total_batch == 0) r->total_batch = per_micro * (r->grad_accum ? r->grad_accum : 1);
    if (r->total_batch > (1 << 30)) FAIL("--total-batch %d clips per step: at most 2^30 (the counts wrap past that)", r->total_batch);
    if (r->total_batch % per_micro != 0)
        FAIL("--total-batch %d must be a positive multiple of batch*dp = %d*%d", r->total_batch, r->B, dp);
    if (r->grad_accum && r->total_batch != per_micro * r->grad_accum)
        FAIL("--total-batch %d and --grad-accum %d disagree: batch*dp*grad-accum = %d (give one of them)", r->total_batch,
             r->grad_accum, per_micro * r->grad_accum);
    if (comm->tp > 1 && r->par.tp_mode == TP_REDUCESCATTER) {
        int rests[2] = {r->loop.val_every > 0 ? val_clips % r->B : 0, r->sample_every > 0 ? 2 * NC % r->B : 0};
        const char* what[2] = {"--val-clips", "the sampler's 2 x NC rows"};
        for (int i = 0; i < 2; i++)
            if (((size_t)rests[i] * tokens_per_clip) % comm->tp)
                FAIL("--tp-mode reducescatter: %s leave a last batch of %d clips (%zu tokens), which does not split into "
                     "%d equal blocks; choose them a multiple of --batch %d", what[i], rests[i],
                     (size_t)rests[i] * tokens_per_clip, comm->tp, r->B);
    }
    return r->total_batch / per_micro;
}

// the clips of `data` ("synthetic" or a clip file), opened before the device: a bad clip file
// ends the run before anything is set up
static inline void flow_data_open(FlowData* d, const char* data, int C, int Fr, int Hi, int Wi, int NC, int val_clips,
                                  uint64_t seed) {
    memset(d, 0, sizeof(*d));
    clipsource_open(&d->train, &d->val, data, C, Fr, Hi, Wi, NC, val_clips, seed);
    d->val_clips = val_clips; d->null_class = NC; d->seed = seed; d->vl = val_loss_none();
}

static inline void flow_data_start(FlowData* d, const char* data, const RunArgs* r, const Comm* comm, size_t clip,
                                   float label_dropout, Logger* lg) {
    logf_(lg, "data: %s | validation: %d held-out clips, each with its own fixed t and noise\n",
          strcmp(data, "synthetic") == 0 ? "moving digits, generated (llmc/io/video_data.h)" : data, d->val_clips);
    flow_batch_alloc(&d->batch, r->B, clip);
    d->comm = comm; d->grad_accum = r->grad_accum; d->label_dropout = label_dropout;
}

// each micro-batch's clips with their noise, t and label dropout drawn from (seed, the clip's global index)
static inline void flow_data_next(FlowData* d, int step, int micro) {
    flow_batch_train(&d->batch, &d->train, step, micro, d->grad_accum, d->comm, d->seed, d->label_dropout, d->null_class);
}

// the validation of `step` and its line (final: of a run with nothing to train, the short form)
static inline void flow_data_validate(FlowData* d, Logger* lg, int step, int final, ClipLosses losses, void* model) {
    d->vl = flow_validate((Comm*)d->comm, &d->val, &d->batch, d->val_clips, d->seed, d->null_class, losses, model, d->lockstep);
    if (!final) val_loss_log(lg, step, &d->vl);
    else logf_(lg, "step %5d | val loss %.6f | by t: low %.6f, middle %.6f, high %.6f\n", step, d->vl.all,
               d->vl.bucket[0], d->vl.bucket[1], d->vl.bucket[2]);
}

static inline void flow_data_val_metrics(FlowData* d, Logger* lg) {
    val_loss_metrics(lg, &d->vl);
    d->vl = val_loss_none();
}

static inline void flow_data_free(FlowData* d) {
    flow_batch_free(&d->batch);
    clipsource_free(&d->train);
    clipsource_free(&d->val);
}
