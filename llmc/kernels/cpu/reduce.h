/*
CPU twin of llmc/kernels/reduce.cuh: acc[0] += sum of x[0..n), in exactly the order the
CUDA kernels use (documented there), so that both backends give the same bits:
16384 lanes, lane L summing x[L], x[L + 16384], ... in double; each group of 256
lanes added by a halving tree into one of 64 partials; lane l of 32 adding partials
l and l + 32; a halving tree over those 32; one rounding to float; one float
addition to acc[0]. n == 0 leaves acc untouched. O(n + 16384), sequential: it
serves the per-token losses of one micro-step.
*/
#pragma once
#include "../../core/common.h"

#define SUM_BLOCKS 64
#define SUM_THREADS 256

static inline void sum_accumulate(float* acc, const float* x, size_t n, stream_t s) {
    (void)s;
    if (n == 0) return;
    const size_t lanes = (size_t)SUM_BLOCKS * SUM_THREADS;
    double part[SUM_BLOCKS];
    for (int b = 0; b < SUM_BLOCKS; b++) {
        double red[SUM_THREADS];
        for (int t = 0; t < SUM_THREADS; t++) {
            double a = 0.0;
            for (size_t i = (size_t)b * SUM_THREADS + t; i < n; i += lanes) a += (double)x[i];
            red[t] = a;
        }
        for (int half = SUM_THREADS / 2; half > 0; half >>= 1)
            for (int t = 0; t < half; t++) red[t] += red[t + half];
        part[b] = red[0];
    }
    double w[32];
    for (int l = 0; l < 32; l++) {
        double a = 0.0;
        for (int b = l; b < SUM_BLOCKS; b += 32) a += part[b];
        w[l] = a;
    }
    for (int half = 16; half > 0; half >>= 1)
        for (int l = 0; l < half; l++) w[l] += w[l + half];
    acc[0] += (float)w[0];
}
