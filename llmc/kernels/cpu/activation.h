/*
CPU twin of llmc/kernels/activation.cuh: gelu_tanh and silu, forward and backward, in fp32
with the same formulas (and the same order of operations) as the kernels; tanh and exp are
llmc/kernels/cpu/vmath.h's vectorised ones, within a few ulp of the kernels' tanhf and expf.
The backward overwrites dinp and allows dinp == dout.
*/
#pragma once
#include "../../core/common.h"
#include "vmath.h"  // cpu_vtanh, cpu_vexp: vectorised (libm's are calls that keep a loop scalar)

#define GELU_SQRT_2_OVER_PI 0.7978845608028654f
#define GELU_CUBIC 0.044715f

static inline void gelu_tanh_forward(floatX* out, const floatX* inp, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        float t = cpu_vtanh(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x));
        out[i] = 0.5f * x * (1.0f + t);
    }
}

// dinp = dout * gelu_tanh'(inp), overwritten; dinp may alias dout
static inline void gelu_tanh_backward(floatX* dinp, const floatX* dout, const floatX* inp, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], g = dout[i];
        float t = cpu_vtanh(GELU_SQRT_2_OVER_PI * (x + GELU_CUBIC * x * x * x));
        float du = GELU_SQRT_2_OVER_PI * (1.0f + 3.0f * GELU_CUBIC * x * x);
        dinp[i] = g * (0.5f * (1.0f + t) + 0.5f * x * (1.0f - t * t) * du);
    }
}

static inline void silu_forward(floatX* out, const floatX* inp, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i];
        out[i] = x / (1.0f + cpu_vexp(-x));
    }
}

// dinp = dout * silu'(inp), overwritten; dinp may alias dout
static inline void silu_backward(floatX* dinp, const floatX* dout, const floatX* inp, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        float x = inp[i], g = dout[i];
        float sig = 1.0f / (1.0f + cpu_vexp(-x));
        dinp[i] = g * sig * (1.0f + x * (1.0f - sig));
    }
}
