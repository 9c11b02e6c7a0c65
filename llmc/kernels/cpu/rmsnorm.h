/* CPU twin of llmc/kernels/rmsnorm.cuh. y = x * rstd * w with rstd = 1/sqrt(mean(x^2) + eps), in fp32.
The row sums (sum x^2, sum dy w x) in cpu_vrow_sum's fixed order (llmc/kernels/cpu/vmath.h): eight
partial sums side by side rather than one chain of C dependent adds. */
#pragma once
#include "../../core/common.h"
#include "vmath.h"  // cpu_vrow_sum

static inline void rmsnorm_forward(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C, float eps,
                            stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        float ss = cpu_vrow_sum(C, [&](int c) { return x[c] * x[c]; });
        float r = 1.0f / sqrtf(ss / C + eps);
        float* y = out + (size_t)i * C;
        for (int c = 0; c < C; c++) y[c] = x[c] * r * w[c];
        rstd[i] = r;
    }
}

// The CUDA backward keeps its dw partials in a static device array; the CPU needs none.
static inline size_t rmsnorm_scratch_bytes(void) { return 0; }

// dinp += dL/dx (the residual stream's gradient accumulates), dw += dL/dw
static inline void rmsnorm_backward(floatX* dinp, floatX* dw, const floatX* dout, const floatX* inp, const floatX* w,
                             const float* rstd, int N, int C, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* x = inp + (size_t)i * C;
        const float* dy = dout + (size_t)i * C;
        float r = rstd[i];
        float dot = cpu_vrow_sum(C, [&](int c) { return dy[c] * w[c] * x[c]; });  // sum_k dy_k w_k x_k
        float k = dot * r * r * r / C;
        float* dx = dinp + (size_t)i * C;
        for (int c = 0; c < C; c++) dx[c] += r * w[c] * dy[c] - k * x[c];
    }
    const int CB = 64;
    #pragma omp parallel for schedule(static)
    for (int cb = 0; cb < C; cb += CB) {
        int cend = cb + CB < C ? cb + CB : C;
        for (int i = 0; i < N; i++) {
            const float* x = inp + (size_t)i * C;
            const float* dy = dout + (size_t)i * C;
            for (int c = cb; c < cend; c++) dw[c] += dy[c] * x[c] * rstd[i];
        }
    }
}
