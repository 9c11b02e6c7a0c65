/* CPU twin of llmc/encoder.cuh: token embedding lookup and its (deterministic) backward. */
#pragma once
#include "../common.h"

// out[N, D] = wte[tokens[i]]
static inline void encoder_forward(floatX* out, const int* tokens, const floatX* wte, int N, int D, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) memcpy(out + (size_t)i * D, wte + (size_t)tokens[i] * D, D * sizeof(floatX));
}

// dwte[tokens[i]] += dout[i], tokens visited in order so repeated tokens sum the same way every run
static inline void encoder_backward(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, stream_t s) {
    (void)s;
    const int CB = 64;
    #pragma omp parallel for schedule(static)
    for (int cb = 0; cb < D; cb += CB) {
        int cend = cb + CB < D ? cb + CB : D;
        for (int i = 0; i < N; i++) {
            float* g = dwte + (size_t)tokens[i] * D;
            const float* dy = dout + (size_t)i * D;
            for (int c = cb; c < cend; c++) g[c] += dy[c];
        }
    }
}
