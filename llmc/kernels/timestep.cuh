/*
The sinusoidal timestep embedding of the DiT (docs/design.md 9.3). CPU twin: llmc/kernels/cpu/timestep.h.
out [B, dim] (dim even; 256 in the model), half = dim/2, s = 1000 t[b],
f_i = exp(-ln(10000) i / half), out[b] = [cos(s f_0) .. cos(s f_{half-1}), sin(s f_0) ..
sin(s f_{half-1})] (cos first). Computed in double and rounded to floatX once: the
angles reach 1000 rad, where fp32 angles (ulp 6e-5 there) would be off by ~1e-4, and
their cos and sin by as much. One thread per (b, i) writes both the cos and the sin;
there are only B*dim values, so the double math costs nothing measurable.
Elementwise, so deterministic.
*/
#pragma once
#include "../core/common.h"

#define TIMESTEP_LN_10000 9.210340371976184  // ln(10000), the same double on the host and the device

__global__ void timestep_embedding_kernel(floatX* out, const float* t, int B, int half) {
    size_t n = (size_t)B * half;
    for (size_t k = (size_t)blockIdx.x * blockDim.x + threadIdx.x; k < n; k += (size_t)gridDim.x * blockDim.x) {
        size_t b = k / half;
        int i = (int)(k % half);
        double freq = exp(-TIMESTEP_LN_10000 * i / half);
        double angle = 1000.0 * (double)t[b] * freq;
        out[b * 2 * half + i] = (floatX)cos(angle);
        out[b * 2 * half + half + i] = (floatX)sin(angle);
    }
}

static inline void timestep_embedding(floatX* out, const float* t, int B, int dim, stream_t s) {
    if (dim <= 0 || dim % 2) FAIL("timestep_embedding: dim %d must be positive and even", dim);
    if (B < 0) FAIL("timestep_embedding: batch %d", B);
    size_t n = (size_t)B * (dim / 2);
    if (n == 0) return;
    size_t blocks = ceil_div(n, 256);
    if (blocks > 65536) blocks = 65536;
    timestep_embedding_kernel<<<(unsigned)blocks, 256, 0, s>>>(out, t, B, dim / 2);
    cudaCheck(cudaGetLastError());
}
