/*
CPU twin of llmc/kernels/flow.cuh (rectified flow). flow_prepare: xt = (1 - t_b) x0 + t_b noise,
v = noise - x0 per sample b. mse_forward_backward: sq[b] = sum of (pred - target)^2 over
sample b, and dpred = 2 dscale (pred - target) when dpred != NULL.
The sum is in fp32 in a fixed order whatever the number of threads: each sample is cut
into MSE_CHUNKS contiguous chunks (a constant), each chunk summed in order, then the
chunk sums added in chunk order.
*/
#pragma once
#include "../../core/common.h"

static inline void flow_prepare(floatX* xt, floatX* v, const floatX* x0, const floatX* noise, const float* t, int B,
                                size_t per_sample, stream_t s) {
    (void)s;
    if (B < 0) FAIL("flow_prepare: batch %d", B);
    size_t n = (size_t)B * per_sample;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float tb = t[i / per_sample];
        float a = x0[i], e = noise[i];
        xt[i] = (1.0f - tb) * a + tb * e;
        v[i] = e - a;
    }
}

#define MSE_CHUNKS 64

static inline void mse_forward_backward(float* sq, floatX* dpred, const floatX* pred, const floatX* target, int B,
                                        size_t per_sample, float dscale, stream_t s) {
    (void)s;
    if (B < 0) FAIL("mse_forward_backward: batch %d", B);
    float grad_scale = 2.0f * dscale;
    size_t per_chunk = ceil_div(per_sample, MSE_CHUNKS);
    for (int b = 0; b < B; b++) {
        size_t base = (size_t)b * per_sample;
        float chunk_sums[MSE_CHUNKS];
        #pragma omp parallel for schedule(static)
        for (int k = 0; k < MSE_CHUNKS; k++) {
            size_t lo = k * per_chunk, hi = lo + per_chunk < per_sample ? lo + per_chunk : per_sample;
            float acc = 0.0f;
            for (size_t j = lo; j < hi; j++) {
                float d = pred[base + j] - target[base + j];
                acc += d * d;
                if (dpred) dpred[base + j] = grad_scale * d;
            }
            chunk_sums[k] = acc;
        }
        float total = 0.0f;
        for (int k = 0; k < MSE_CHUNKS; k++) total += chunk_sums[k];
        sq[b] = total;
    }
}
