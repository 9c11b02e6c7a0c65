/*
CPU twin of llmc/kernels/encoder.cuh: token embedding lookup and its (deterministic) backward,
on a vocabulary range: wte/dwte point at rows v0 ... v0 + n - 1 of the table; tokens
outside the range give a zero row (forward) and no update (backward). encoder_forward /
encoder_backward are the range versions with v0 = 0, n = INT_MAX.
*/
#pragma once
#include <limits.h>
#include "../../core/common.h"

// out[i] = wte[tokens[i] - v0] for tokens in [v0, v0 + n), zeros otherwise
static inline void encoder_forward_range(floatX* out, const int* tokens, const floatX* wte, int N, int D, int v0, int n,
                                         stream_t s) {
    (void)s;
    if (N <= 0 || D <= 0) return;
    if (v0 < 0 || n < 0) FAIL("encoder_forward_range: range v0 = %d, n = %d", v0, n);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        int r = tokens[i] - v0;
        if (r >= 0 && r < n) memcpy(out + (size_t)i * D, wte + (size_t)r * D, D * sizeof(floatX));
        else memset(out + (size_t)i * D, 0, D * sizeof(floatX));
    }
}

static inline void encoder_forward(floatX* out, const int* tokens, const floatX* wte, int N, int D, stream_t s) {
    encoder_forward_range(out, tokens, wte, N, D, 0, INT_MAX, s);
}

// dwte[tokens[i] - v0] += dout[i] for tokens in the range, visited in order so repeated
// tokens sum the same way every run
static inline void encoder_backward_range(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, int v0, int n,
                                          stream_t s) {
    (void)s;
    if (N <= 0 || D <= 0) return;
    if (v0 < 0 || n < 0) FAIL("encoder_backward_range: range v0 = %d, n = %d", v0, n);
    const int CB = 64;
    #pragma omp parallel for schedule(static)
    for (int cb = 0; cb < D; cb += CB) {
        int cend = cb + CB < D ? cb + CB : D;
        for (int i = 0; i < N; i++) {
            int r = tokens[i] - v0;
            if (r < 0 || r >= n) continue;
            float* g = dwte + (size_t)r * D;
            const float* dy = dout + (size_t)i * D;
            for (int c = cb; c < cend; c++) g[c] += dy[c];
        }
    }
}

static inline void encoder_backward(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, stream_t s) {
    encoder_backward_range(dwte, dout, tokens, N, D, 0, INT_MAX, s);
}
