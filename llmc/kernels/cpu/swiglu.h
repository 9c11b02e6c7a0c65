/* CPU twin of llmc/kernels/swiglu.cuh: g = silu(h1) * h3, the gated unit of the Llama FFN. */
#pragma once
#include "../../core/common.h"
#include "vmath.h"  // cpu_vexp (vectorised)

static inline void swiglu_forward(floatX* out, const floatX* h1, const floatX* h3, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float a = h1[i];
        out[i] = a / (1.0f + cpu_vexp(-a)) * h3[i];
    }
}

// dh1 may alias dout (each element is read before it is written)
static inline void swiglu_backward(floatX* dh1, floatX* dh3, const floatX* dout, const floatX* h1, const floatX* h3, size_t n,
                            stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float a = h1[i], b = h3[i], g = dout[i];
        float sig = 1.0f / (1.0f + cpu_vexp(-a));
        float silu = a * sig;
        dh3[i] = g * silu;
        dh1[i] = g * b * sig * (1.0f + a * (1.0f - sig));
    }
}
