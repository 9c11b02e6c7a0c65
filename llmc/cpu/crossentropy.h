/*
CPU twin of llmc/crossentropy.cuh: softmax, cross-entropy and dlogits fused, in place.
losses[i] = logsumexp(logits_i) - logits_i[target_i]. With write_dlogits, the logits
are overwritten by dloss * (softmax - onehot): the [N, V] buffer is used only once.
*/
#pragma once
#include "../common.h"

static inline void crossentropy_forward_backward(float* losses, floatX* logits, const int* targets, int N, int V, float dloss,
                                          int write_dlogits, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float* x = logits + (size_t)i * V;
        float m = -INFINITY;
        for (int j = 0; j < V; j++) m = x[j] > m ? x[j] : m;
        float sum = 0.0f;
        for (int j = 0; j < V; j++) sum += expf(x[j] - m);
        float lse = m + logf(sum);
        int tgt = targets[i];
        losses[i] = lse - x[tgt];
        if (write_dlogits) {
            for (int j = 0; j < V; j++) x[j] = expf(x[j] - lse) * dloss;
            x[tgt] -= dloss;
        }
    }
}
