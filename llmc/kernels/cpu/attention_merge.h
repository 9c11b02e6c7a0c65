/*
CPU twin of llmc/kernels/attention_merge.cuh: ring attention's merge of a partial result into
the running one (llmc/parallel/context_parallel.h). o: [B, T, H, hd]; lse: [B, H, T].
  first:  o_acc = o_p, lse_acc = lse_p
  else:   lse' = log(exp(lse_acc) + exp(lse_p)) (computed from their max, so nothing
          overflows), o_acc = o_acc exp(lse_acc - lse') + o_p exp(lse_p - lse')
  out != NULL: out = o_acc rounded to floatX, after the update (the last merge)
A row whose two parts both saw no key (lse -inf) stays empty. Every element is
computed alone in the same float operations as the kernel: any thread count gives the
same bits.

float_accumulate: acc[i] += x[i] in float, the ring's dK, dV and dQ partial sums.
*/
#pragma once
#include "../../core/common.h"

static inline void attention_merge(float* o_acc, float* lse_acc, floatX* out, const floatX* o_p, const float* lse_p,
                                   int B, int T, int H, int hd, int first, stream_t s) {
    (void)s;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int t = 0; t < T; t++)
            for (int h = 0; h < H; h++) {
                size_t row = ((size_t)b * T + t) * H + h, li = ((size_t)b * H + h) * T + t;
                float* o = o_acc + row * hd;
                const floatX* p = o_p + row * hd;
                float wa = 0.0f, wb = 1.0f;
                if (!first) {
                    float la = lse_acc[li], lb = lse_p[li], m = fmaxf(la, lb);
                    if (m == -INFINITY) { wa = 1.0f; wb = 0.0f; }
                    else {
                        float l = m + logf(expf(la - m) + expf(lb - m));
                        wa = expf(la - l); wb = expf(lb - l);
                        lse_acc[li] = l;
                    }
                } else lse_acc[li] = lse_p[li];
                for (int d = 0; d < hd; d++) {
                    float v = first ? (float)p[d] : wa * o[d] + wb * (float)p[d];
                    o[d] = v;
                    if (out) out[row * hd + d] = (floatX)v;
                }
            }
}

static inline void float_accumulate(float* acc, const float* x, size_t n, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) acc[i] += x[i];
}
