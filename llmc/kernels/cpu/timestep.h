/*
CPU twin of llmc/kernels/timestep.cuh: out [B, dim] = [cos(s f_i) for i < dim/2, sin(s f_i) for
i < dim/2], s = 1000 t[b], f_i = exp(-ln(10000) i / (dim/2)); in double, rounded once.
*/
#pragma once
#include "../../core/common.h"

#define TIMESTEP_LN_10000 9.210340371976184  // ln(10000), the same double on the host and the device

static inline void timestep_embedding(floatX* out, const float* t, int B, int dim, stream_t s) {
    (void)s;
    if (dim <= 0 || dim % 2) FAIL("timestep_embedding: dim %d must be positive and even", dim);
    if (B < 0) FAIL("timestep_embedding: batch %d", B);
    int half = dim / 2;
    #pragma omp parallel for schedule(static)
    for (int b = 0; b < B; b++)
        for (int i = 0; i < half; i++) {
            double freq = exp(-TIMESTEP_LN_10000 * i / half);
            double angle = 1000.0 * (double)t[b] * freq;
            out[(size_t)b * dim + i] = (floatX)cos(angle);
            out[(size_t)b * dim + half + i] = (floatX)sin(angle);
        }
}
