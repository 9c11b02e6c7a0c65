/*
CPU twin of llmc/attention.cuh: causal attention with grouped-query heads, computed
the flash way so that memory is O(T): forward keeps only the output and the
log-sum-exp of each row; backward recomputes the probabilities from q, k and lse.
q, out: [B, T, H, hd]; k, v: [B, T, KV, hd]; lse: [B, H, T]. Scale 1/sqrt(hd).
KV head j serves q heads j*H/KV .. (j+1)*H/KV - 1.
*/
#pragma once
#include "../common.h"

static inline void attention_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T,
                              int H, int KV, int hd, stream_t s) {
    (void)s;
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KV;
    #pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int t = 0; t < T; t++) {
                int kvh = h / group;
                const float* qt = q + (((size_t)b * T + t) * H + h) * hd;
                float* o = out + (((size_t)b * T + t) * H + h) * hd;
                for (int d = 0; d < hd; d++) o[d] = 0.0f;
                // online softmax: running max m and running sum l of exp(score - m)
                float m = -INFINITY, l = 0.0f;
                for (int u = 0; u <= t; u++) {
                    const float* ku = k + (((size_t)b * T + u) * KV + kvh) * hd;
                    const float* vu = v + (((size_t)b * T + u) * KV + kvh) * hd;
                    float sc = 0.0f;
                    for (int d = 0; d < hd; d++) sc += qt[d] * ku[d];
                    sc *= scale;
                    float m_new = sc > m ? sc : m;
                    float corr = expf(m - m_new);  // 0 on the first key
                    float p = expf(sc - m_new);
                    l = l * corr + p;
                    for (int d = 0; d < hd; d++) o[d] = o[d] * corr + p * vu[d];
                    m = m_new;
                }
                float inv = 1.0f / l;
                for (int d = 0; d < hd; d++) o[d] *= inv;
                lse[((size_t)b * H + h) * T + t] = m + logf(l);
            }
}

// dq, dk, dv are overwritten. One thread owns one (batch, kv head), so the sums into
// dk and dv over the q heads of its group need no atomics and keep a fixed order.
static inline void attention_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k,
                               const floatX* v, const floatX* out, const float* lse, int B, int T, int H, int KV,
                               int hd, stream_t s) {
    (void)s;
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KV;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < KV; kvh++) {
            for (int t = 0; t < T; t++) {
                memset(dk + (((size_t)b * T + t) * KV + kvh) * hd, 0, hd * sizeof(floatX));
                memset(dv + (((size_t)b * T + t) * KV + kvh) * hd, 0, hd * sizeof(floatX));
            }
            for (int h = kvh * group; h < (kvh + 1) * group; h++)
                for (int t = 0; t < T; t++) {
                    size_t qi = (((size_t)b * T + t) * H + h) * hd;
                    const float* qt = q + qi;
                    const float* dot_ = dout + qi;
                    const float* ot = out + qi;
                    float* dqt = dq + qi;
                    float delta = 0.0f;  // sum_d dO * O = sum_u P_u dP_u
                    for (int d = 0; d < hd; d++) delta += dot_[d] * ot[d];
                    float l = lse[((size_t)b * H + h) * T + t];
                    for (int d = 0; d < hd; d++) dqt[d] = 0.0f;
                    for (int u = 0; u <= t; u++) {
                        size_t ki = (((size_t)b * T + u) * KV + kvh) * hd;
                        const float* ku = k + ki;
                        const float* vu = v + ki;
                        float sc = 0.0f, dp = 0.0f;
                        for (int d = 0; d < hd; d++) { sc += qt[d] * ku[d]; dp += dot_[d] * vu[d]; }
                        float p = expf(sc * scale - l);
                        float ds = p * (dp - delta) * scale;
                        float* dku = dk + ki;
                        float* dvu = dv + ki;
                        for (int d = 0; d < hd; d++) {
                            dvu[d] += p * dot_[d];
                            dqt[d] += ds * ku[d];
                            dku[d] += ds * qt[d];
                        }
                    }
                }
        }
}
