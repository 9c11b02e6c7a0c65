/*
CPU twin of llmc/kernels/grad_accum.cuh: a micro-step's gradient moved into the fp32
accumulator (last == 0: acc += grad, grad = 0), or, on the last micro-step, the fp32
sum written back into the gradient buffer (last == 1: grad = acc + grad, acc = 0).
Elementwise, so the result is the same for any thread count. grad_add: a reduced
gradient shard summed into another (dst += src, rounded to floatX).
*/
#pragma once
#include "../../core/common.h"

static inline void grad_accumulate(float* acc, floatX* grad, size_t n, int last, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float a = acc[i] + (float)grad[i];
        if (last) { grad[i] = (floatX)a; acc[i] = 0.0f; }
        else { acc[i] = a; grad[i] = (floatX)0.0f; }
    }
}

static inline void grad_add(floatX* dst, const floatX* src, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) dst[i] = (floatX)((float)dst[i] + (float)src[i]);
}
