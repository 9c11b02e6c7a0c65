/*
CPU twin of llmc/kernels/crossentropy.cuh: softmax, cross-entropy and dlogits fused, in place.
losses[i] = logsumexp(logits_i) - logits_i[target_i]. With write_dlogits, the logits
are overwritten by dloss * (softmax - onehot): the [N, V] buffer is used only once.
*/
#pragma once
#include "../../core/common.h"
#include "vmath.h"  // cpu_vexp and the fixed-order row reductions (vectorised)

static inline void crossentropy_forward_backward(float* losses, floatX* logits, const int* targets, int N, int V, float dloss,
                                          int write_dlogits, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float* x = logits + (size_t)i * V;
        float m = cpu_vrow_max(x, V);
        float lse = m + logf(cpu_vexp_sum(x, V, m));
        int tgt = targets[i];
        losses[i] = lse - x[tgt];
        if (write_dlogits) {
            for (int j = 0; j < V; j++) x[j] = cpu_vexp(x[j] - lse) * dloss;
            x[tgt] -= dloss;
        }
    }
}

/*
Vocabulary-parallel cross-entropy: the twins of crossentropy_vp_max / _sums / _finish
(llmc/kernels/crossentropy.cuh, which explains the three passes and the all-reduces between them).
The shard is [N, Vs] with row stride Vs; its first n_valid columns are the vocabulary
entries v0 ... v0 + n_valid - 1, the rest padding.
*/
static inline void crossentropy_vp_check(const char* who, int Vs, int n_valid) {
    if (Vs <= 0 || n_valid < 0 || n_valid > Vs)
        FAIL("%s: shard of %d columns with %d valid (need Vs >= 1, 0 <= n_valid <= Vs)", who, Vs, n_valid);
}

static inline void crossentropy_vp_max(float* rowmax, const floatX* logits, int N, int Vs, int n_valid, stream_t s) {
    (void)s;
    if (N <= 0) return;
    crossentropy_vp_check("crossentropy_vp_max", Vs, n_valid);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* x = logits + (size_t)i * Vs;
        rowmax[i] = cpu_vrow_max(x, n_valid);
    }
}

static inline void crossentropy_vp_sums(float* sums, const floatX* logits, const float* rowmax, const int* targets, int N,
                                        int Vs, int v0, int n_valid, stream_t s) {
    (void)s;
    if (N <= 0) return;
    crossentropy_vp_check("crossentropy_vp_sums", Vs, n_valid);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        const float* x = logits + (size_t)i * Vs;
        int t = targets[i] - v0;
        sums[i] = cpu_vexp_sum(x, n_valid, rowmax[i]);
        sums[N + i] = t >= 0 && t < n_valid ? x[t] : 0.0f;
    }
}

static inline void crossentropy_vp_finish(float* losses, floatX* logits, const float* rowmax, const float* sums,
                                          const int* targets, int N, int Vs, int v0, int n_valid, float dloss,
                                          int write_dlogits, stream_t s) {
    (void)s;
    if (N <= 0) return;
    crossentropy_vp_check("crossentropy_vp_finish", Vs, n_valid);
    #pragma omp parallel for schedule(static)
    for (int i = 0; i < N; i++) {
        float M = rowmax[i], S = sums[i];
        losses[i] = logf(S) + M - sums[N + i];
        if (!write_dlogits) continue;
        float* x = logits + (size_t)i * Vs;
        float b = dloss / S;
        for (int j = 0; j < n_valid; j++) x[j] = cpu_vexp(x[j] - M) * b;
        for (int j = n_valid; j < Vs; j++) x[j] = 0.0f;  // padded weight rows: no gradient
        int t = targets[i] - v0;
        if (t >= 0 && t < n_valid) x[t] -= dloss;
    }
}
