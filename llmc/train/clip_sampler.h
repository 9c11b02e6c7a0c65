/*
Video samples during training (--sample-every): K clips per class drawn with the Euler
sampler of rectified flow and classifier-free guidance (docs/design.md 9.3): x from noise
at t = 1 to t = 0 in S steps, v = v_null + s (v_y - v_null). Clip 0 of each class goes to a
GIF and a PNG strip of its frames in DIR/samples, all NC x K clips with their classes to
DIR/samples/step_N.clips (a clip file, docs/formats.md), which scripts/dit_digits.py scores.

The model is behind one callback (the velocity at x_t, t and class y), so any flow model
of clips can use it. Every rank samples the same numbers (a collective where the model is,
and any layout samples alike); rank 0 writes. The noise is seeded by the class and the
clip's number only, so the samples of successive steps are comparable (and clip 0 of each
class is the same for any K).

The host buffers are allocated once at init, so that a --sample-clips too large for host
memory fails before the first step, not at the first sample.
*/
#pragma once
#include "../core/common.h"
#include "../core/logger.h"
#include "../core/rand.h"
#include "../io/image_write.h"

#define SALT_SAMPLE 0x73616d70ull  // separates the samples' noise from the training and validation draws

// v[B, clip] for x_t [B, clip] at times t[B] and classes y[B] (y = NC: the null class)
typedef void (*ClipVelocity)(void* model, const float* xt, const float* t, const int* y, int B, float* v);

typedef struct {
    int n;                       // clips: NC x per_class, clip i = j * NC + k is clip j of class k
    int per_class, NC, C, Fr, Hi, Wi, B, steps, gif_scale;  // B: rows per forward (the model's plan)
    size_t clip;                 // values per clip
    float cfg_scale;
    uint64_t seed;
    float *x, *xin, *v, *t;      // x holds the clips [K][NC]: clip 0 of every class first
    int *y, *labels;
} ClipSampler;

// --gif-scale checked at start: a bad one must not end a run at its first sample
static inline void clip_sampler_check_scale(int C, int Fr, int Hi, int Wi, int gif_scale) {
    const char* no_image = image_clip_fits(C, Fr, Hi, Wi, gif_scale, 2);
    if (no_image) FAIL("--gif-scale %d: %s (choose a smaller --gif-scale)", gif_scale, no_image);
}

// per_class 0: no samples, no buffers
static inline void clip_sampler_init(ClipSampler* s, int per_class, int NC, int C, int Fr, int Hi, int Wi, int B, int steps,
                                     float cfg_scale, int gif_scale, uint64_t seed) {
    memset(s, 0, sizeof(*s));
    if (per_class <= 0) return;
    s->n = NC * per_class; s->per_class = per_class; s->NC = NC;
    s->C = C; s->Fr = Fr; s->Hi = Hi; s->Wi = Wi; s->B = B; s->steps = steps; s->gif_scale = gif_scale;
    s->clip = (size_t)C * Fr * Hi * Wi; s->cfg_scale = cfg_scale; s->seed = seed;
    s->x = (float*)xmalloc((size_t)s->n * s->clip * sizeof(float));
    s->v = (float*)xmalloc(2 * (size_t)s->n * s->clip * sizeof(float));  // row 2i: class, 2i+1: null class
    s->xin = (float*)xmalloc((size_t)B * s->clip * sizeof(float));
    s->t = (float*)xmalloc((size_t)B * sizeof(float));
    s->y = (int*)xmalloc((size_t)B * sizeof(int));
    s->labels = (int*)xmalloc((size_t)s->n * sizeof(int));
}

static inline void clip_sampler_free(ClipSampler* s) { free(s->x); free(s->v); free(s->xin); free(s->t); free(s->y); free(s->labels); }

// the samples of `step` into run_dir/samples; a sample that cannot be written (full disk,
// samples/ unwritable) is a warning: the run and its checkpoints go on
static inline void clip_sample(ClipSampler* s, Logger* lg, const char* run_dir, int rank, int step, ClipVelocity velocity,
                               void* model) {
    const size_t clip = s->clip;
    const int n = s->n, NC = s->NC;
    int rows = 2 * n;  // row 2i: clip i with its class, row 2i+1: the null class on the same x
    float *x = s->x, *xin = s->xin, *v = s->v, *t = s->t;
    int *y = s->y, *labels = s->labels;
    for (int i = 0; i < n; i++) {
        const uint64_t k = (uint64_t)(i % NC), j = (uint64_t)(i / NC);
        Rng r; rng_init(&r, s->seed ^ SALT_SAMPLE ^ (k * 0x9E3779B97F4A7C15ull) ^ (j * 0xD1B54A32D192ED03ull));
        for (size_t e = 0; e < clip; e++) x[(size_t)i * clip + e] = rng_normal(&r);
        labels[i] = (int)k;
    }
    float dt = 1.0f / s->steps;
    for (int i = 0; i < s->steps; i++) {
        for (int r0 = 0; r0 < rows; r0 += s->B) {  // as many rows per forward as the plan holds
            int nr = rows - r0 < s->B ? rows - r0 : s->B;
            for (int q = 0; q < nr; q++) {
                int r = r0 + q;
                memcpy(xin + (size_t)q * clip, x + (size_t)(r / 2) * clip, clip * sizeof(float));
                t[q] = 1.0f - (float)i * dt;
                y[q] = r % 2 ? NC : labels[r / 2];
            }
            velocity(model, xin, t, y, nr, v + (size_t)r0 * clip);
        }
        for (int k = 0; k < n; k++) {
            const float* vy = v + (size_t)(2 * k) * clip;
            const float* vn = vy + clip;
            float* xk = x + (size_t)k * clip;
            for (size_t j = 0; j < clip; j++) xk[j] -= dt * (vn[j] + s->cfg_scale * (vy[j] - vn[j]));
        }
    }
    char *dir = str_printf("%s/samples", run_dir), *path = str_printf("%s/step_%06d.clips", dir, step);
    const char* why = rank != 0 ? NULL : write_class_samples(dir, step, x, NC, s->C, s->Fr, s->Hi, s->Wi, s->gif_scale);
    if (!why && rank == 0) why = try_write_clip_file(path, x, labels, n, s->C, s->Fr, s->Hi, s->Wi, NC);
    if (why) logf_(lg, "warning: the samples of step %d were not written (%s); training goes on\n", step, why);
    else logf_(lg, "samples: %d classes x %d clips, %d Euler steps, guidance %g -> %s/step_%06d_class_*.gif (and .png), "
               "all clips in %s\n", NC, s->per_class, s->steps, s->cfg_scale, dir, step, path);
    free(dir); free(path);
}
