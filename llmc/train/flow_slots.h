/*
A micro-batch of rectified-flow training on the device (docs/design.md 9.3), between the host
batches of flow_batch.h and a model of clips: its times t and classes y, the noised x_t the
model reads, the target v = noise - x0 its loss reads, and each clip's squared error back on
the host. Under --pp a micro-batch's inputs live in its slot (llmc/parallel/pipeline.h's
pipeline_slot) until its backward: t and y on every stage (the conditioning, recomputed at
backward), the target on the last (the loss, which under interleaving runs chunks after its
staging). x_t needs no slot: the first stage reads it as soon as it is staged, into slots of
the model's own (its patches). The model's plan holds the buffers (their names are lines of
its plan); flow_slots_bind points the rest into them.
*/
#pragma once
#include "../core/common.h"
#include "../kernels/kernels.h"

typedef struct {
    floatX *x0, *noise, *xt;  // B clips each: the staged clips and noise; x_t (first stage)
    floatX *vt_slots;         // the target v of every slot (last stage)
    float* ty_slots;          // every slot's t, then every slot's y, then the per-clip squared errors
    floatX* vtarget;          // the selected slot's target v
    float *t, *sq;            // the selected slot's t; the per-clip squared errors
    int* y;                   // the selected slot's classes
    float* host_sq;           // the squared errors on the host, and as doubles for the sums over ranks
    double* host_sq_sum;
    int B, slots, first, last, null_class;  // planned clips; this stage makes x_t (first), the target (last)
    size_t clip;              // values per clip
} FlowSlots;

static inline void flow_slots_bind(FlowSlots* s, int B, int slots, int first, int last, int null_class, size_t clip) {
    s->B = B; s->slots = slots; s->first = first; s->last = last; s->null_class = null_class; s->clip = clip;
    s->sq = s->ty_slots + 2 * (size_t)slots * B;
    s->host_sq = (float*)xmalloc((size_t)B * sizeof(float));
    s->host_sq_sum = (double*)xmalloc((size_t)B * sizeof(double));
}

static inline void flow_slots_free(FlowSlots* s) { free(s->host_sq); free(s->host_sq_sum); }

// the slot whose inputs the model reads next
static inline void flow_slots_select(FlowSlots* s, int slot) {
    s->t = s->ty_slots + (size_t)slot * s->B;
    s->y = (int*)(s->ty_slots + (size_t)s->slots * s->B) + (size_t)slot * s->B;
    if (s->last) s->vtarget = s->vt_slots + (size_t)slot * s->B * s->clip;
}

// the times t and classes y of B clips (host arrays) into the selected slot
static inline void flow_slots_stage(FlowSlots* s, int B, const float* t, const int* y, stream_t st) {
    for (int i = 0; i < B; i++)
        if (y[i] < 0 || y[i] > s->null_class)
            FAIL("class %d of clip %d is outside [0, %d] (%d = the null class)", y[i], i, s->null_class, s->null_class);
    dev_memcpy_h2d(s->t, t, (size_t)B * sizeof(float), st);
    dev_memcpy_h2d(s->y, y, (size_t)B * sizeof(int), st);
}

// B clips x0 with their noise (host arrays), after their t: the first stage makes the noised
// x_t (the patch embedding's input), the last the target v = noise - x0 (its loss); a stage
// between the ends needs no clip
static inline void flow_slots_stage_clips(FlowSlots* s, int B, const float* x0, const float* noise, stream_t st) {
    if (!s->first && !s->last) return;
    dev_upload_floats(s->x0, x0, (size_t)B * s->clip);
    dev_upload_floats(s->noise, noise, (size_t)B * s->clip);
    // (flow_prepare's outputs may alias its inputs: the one a stage does not use lands on them)
    flow_prepare(s->first ? s->xt : s->x0, s->last ? s->vtarget : s->noise, s->x0, s->noise, s->t, B, s->clip, st);
}

// the squared errors of B clips on the host, as doubles in host_sq_sum for the sums over the
// ranks that hold each clip's rows; returns their sum
static inline double flow_slots_losses(FlowSlots* s, int B, stream_t st) {
    dev_memcpy_d2h(s->host_sq, s->sq, (size_t)B * sizeof(float), st);
    stream_synchronize(st);
    double sum = 0.0;
    for (int i = 0; i < B; i++) { s->host_sq_sum[i] = s->host_sq[i]; sum += s->host_sq_sum[i]; }
    return sum;
}
