/*
CPU twin of llmc/kernels/adamw.cuh: AdamW as torch.optim.AdamW computes it (decoupled weight
decay, bias correction, eps added after the bias-corrected sqrt), and the squared
global gradient norm. master is the fp32 copy of the parameters in a bf16 GPU build;
it is NULL where params are already fp32 (the CPU build).
*/
#pragma once
#include "../../core/common.h"

static inline void adamw_update(floatX* param, float* master, const floatX* grad, float* m, float* v, size_t n, float lr,
                         float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t,
                         stream_t s) {
    (void)s;
    float bc1 = 1.0f - powf(beta1, (float)t);
    float bc2_sqrt = sqrtf(1.0f - powf(beta2, (float)t));
    float step_size = lr / bc1;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float g = grad[i] * grad_scale;
        float p = master ? master[i] : param[i];
        p *= 1.0f - lr * weight_decay;
        float mi = beta1 * m[i] + (1.0f - beta1) * g;
        float vi = beta2 * v[i] + (1.0f - beta2) * g * g;
        m[i] = mi; v[i] = vi;
        p -= step_size * mi / (sqrtf(vi) / bc2_sqrt + eps);
        if (master) master[i] = p;
        param[i] = p;
    }
}

// out[0] += sum of squares of g. Fixed blocks summed in double, then added in order,
// so the result does not depend on the thread count.
#define NORM_BLOCKS 64
static inline void global_norm_squared(float* out, const floatX* g, size_t n, stream_t s) {
    (void)s;
    double part[NORM_BLOCKS];
    size_t per = (n + NORM_BLOCKS - 1) / NORM_BLOCKS;
    #pragma omp parallel for schedule(static)
    for (int blk = 0; blk < NORM_BLOCKS; blk++) {
        size_t lo = blk * per, hi = lo + per < n ? lo + per : n;
        double acc = 0.0;
        for (size_t i = lo; i < hi; i++) acc += (double)g[i] * g[i];
        part[blk] = acc;
    }
    double total = 0.0;
    for (int blk = 0; blk < NORM_BLOCKS; blk++) total += part[blk];
    out[0] += (float)total;
}
