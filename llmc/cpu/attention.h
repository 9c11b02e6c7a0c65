/*
CPU twin of llmc/attention.cuh: attention with grouped-query heads, computed
the flash way so that memory is O(T): forward keeps only the output and the
log-sum-exp of each row; backward recomputes the probabilities from q, k and lse.
q, out: [B, T, H, hd]; k, v: [B, T, KV, hd]; lse: [B, H, T]. Scale 1/sqrt(hd).
KV head j serves q heads j*H/KV .. (j+1)*H/KV - 1.
Two modes, one set of loops (att_cpu_forward / att_cpu_backward, template <bool CAUSAL>):
  attention_forward / attention_backward: causal, query t sees keys u <= t (Llama);
  attention_full_forward / attention_full_backward: non-causal, every query sees all T
  keys (the video DiT, docs/design.md 9.3).
The mode is a template parameter rather than a run-time flag so that the causal loops
compile to what they were before the full mode existed (this is the hot path of the
CPU build). In full mode the only masked keys are the zero padding of the last tile.

How, and why. As in the CUDA kernels, keys are taken a tile at a time (up to
ATT_CPU_TILE keys, fewer for a large head dim: the tile is kept under ATT_CPU_BUF
floats). A tile of K and V is copied transposed ([hd][keys], zero-padded to a
multiple of 8 keys) into stack buffers, so that every loop over the keys of a tile
is unit-stride and -O3 -march=native vectorises it across keys: the scores, the
exp (cpu_vexp of llmc/cpu/vmath.h: a polynomial that vectorises, unlike libm's expf), and the
sums over keys. The head dim is often small (8 in stories260K, 48 in stories15M),
so loops over it alone would stay short and scalar. A row computes the keys of a
tile up to its causal diagonal (full mode: all of them) rounded up to a multiple of 8;
those past the diagonal or in the padding get the score -inf and so p = 0. Sums over
keys (l, P.V, dS.K) use 8 interleaved partial sums added in a fixed order
(att_cpu_dot), never an order that depends on the thread count or the vector width.
No heap: the tiles are on the stack (two of ATT_CPU_BUF floats per forward task, four
per backward task: 64 and 128 KiB), which limits the head dim to ATT_CPU_MAX_HD = 1024
(the CUDA kernels stop at 256).

forward: one task per (batch, head, block of ATT_CPU_TILE queries). For each key tile
up to the block's diagonal (full mode: every key tile) and each row of the block:
scores s, the tile's max, the running max m_new, one correction exp(m - m_new) per
(row, tile), p = exp(s - m_new) for the tile, then l = l * corr + sum p and
o = o * corr + sum_j p_j v_j (online softmax, one exp per (query, key) pair).
Writes out = o / l and lse = m + log(l).
Each row is computed by one task in a fixed order: identical for any thread count.

backward: one task per (batch, kv head). It owns dk and dv of that kv head, so their
sums over the q heads of the group and over the queries need no atomics and have a
fixed order (heads, then queries, ascending; as in the CUDA dkdv kernel); results
are identical run to run and for any number of OpenMP threads. For each key tile it
keeps dK and dV of the tile (transposed) and goes over the q heads of the group and
the queries t at or after the tile (full mode: every query): s and dP = dO . v for the
tile, p = exp(s*scale - lse), dS = p (dP - delta) scale with delta = dO . O; then
dV += p dO, dK += dS q (vectorised across keys) and dq_t += sum_j dS_j k_j.
dq, dk, dv are overwritten.
*/
#pragma once
#include "../common.h"
#include "vmath.h"  // cpu_vexp: the exp of the probabilities, vectorised

#define ATT_CPU_TILE 128   // keys per tile at most (and queries per forward task)
#define ATT_CPU_BUF 8192   // floats in one transposed tile: keys per tile = min(128, 8192 / hd), a multiple of 8
#define ATT_CPU_MAX_HD (ATT_CPU_BUF / 8)  // 1024: at least 8 keys per tile


// sum_j a[j] * b[j] for n a multiple of 8: 8 interleaved partial sums, then a fixed tree
static inline float att_cpu_dot(const float* a, const float* b, int n) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < n; j += 8)
        for (int i = 0; i < 8; i++) acc[i] += a[j + i] * b[j + i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// sum_j a[j] for n a multiple of 8, in the same fixed order as att_cpu_dot
static inline float att_cpu_sum(const float* a, int n) {
    float acc[8] = {0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f, 0.0f};
    for (int j = 0; j < n; j += 8)
        for (int i = 0; i < 8; i++) acc[i] += a[j + i];
    return ((acc[0] + acc[4]) + (acc[2] + acc[6])) + ((acc[1] + acc[5]) + (acc[3] + acc[7]));
}

// keys per tile for this head dim: a multiple of 8, at most ATT_CPU_TILE, tile <= ATT_CPU_BUF floats
static inline int att_cpu_tile_keys(int hd, const char* who) {
    if (hd <= 0 || hd > ATT_CPU_MAX_HD) FAIL("%s: head dim %d is not in 1..%d", who, hd, ATT_CPU_MAX_HD);
    int tk = (ATT_CPU_BUF / hd) / 8 * 8;
    return tk < ATT_CPU_TILE ? tk : ATT_CPU_TILE;
}

// keys k0 .. k0+nk-1 of kv head kvh of batch b of x ([B, T, KV, hd]) into xt[d * ld + j],
// zeros for the keys nk .. ld-1 (ld: nk rounded up to a multiple of 8)
static inline void att_cpu_load_tile_t(float* xt, const floatX* x, int b, int k0, int nk, int ld, int T, int KV,
                                       int kvh, int hd) {
    for (int j = 0; j < nk; j++) {
        const float* xr = x + (((size_t)b * T + k0 + j) * KV + kvh) * hd;
        for (int d = 0; d < hd; d++) xt[d * ld + j] = xr[d];
    }
    for (int d = 0; d < hd; d++)
        for (int j = nk; j < ld; j++) xt[d * ld + j] = 0.0f;
}

// s[j] = q . k_j for the first nj keys of a transposed tile (row stride ld; sums over d in order)
static inline void att_cpu_scores(float* s, const float* qv, const float* kt, int ld, int nj, int hd) {
    for (int j = 0; j < nj; j++) s[j] = 0.0f;
    for (int d = 0; d < hd; d++) {
        const float qd = qv[d];
        const float* kd = kt + d * ld;
        for (int j = 0; j < nj; j++) s[j] += qd * kd[j];
    }
}

// the forward of both modes (see the header: CAUSAL is compiled in, never tested at run time)
template <bool CAUSAL>
static inline void att_cpu_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T,
                                   int H, int KV, int hd, const char* who) {
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KV;
    const int TK = att_cpu_tile_keys(hd, who);
    const int n_qb = (T + ATT_CPU_TILE - 1) / ATT_CPU_TILE;
    #pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int qb = 0; qb < n_qb; qb++) {
                const int kvh = h / group;
                const int q0 = qb * ATT_CPU_TILE;
                const int nq = T - q0 < ATT_CPU_TILE ? T - q0 : ATT_CPU_TILE;
                float kt[ATT_CPU_BUF], vt[ATT_CPU_BUF];  // K and V of a key tile, [hd][ld]
                float sc[ATT_CPU_TILE], p[ATT_CPU_TILE];
                float m[ATT_CPU_TILE], l[ATT_CPU_TILE];  // per row: running max, running sum of exp(s - m)
                for (int r = 0; r < nq; r++) {
                    m[r] = -INFINITY;
                    l[r] = 0.0f;
                    float* o = out + (((size_t)b * T + q0 + r) * H + h) * hd;
                    for (int d = 0; d < hd; d++) o[d] = 0.0f;
                }
                const int k_end = CAUSAL ? q0 + nq : T;  // causal: up to the block's last query
                for (int k0 = 0; k0 < k_end; k0 += TK) {
                    const int nk = T - k0 < TK ? T - k0 : TK;
                    const int ld = (nk + 7) / 8 * 8;
                    att_cpu_load_tile_t(kt, k, b, k0, nk, ld, T, KV, kvh, hd);
                    att_cpu_load_tile_t(vt, v, b, k0, nk, ld, T, KV, kvh, hd);
                    for (int r = 0; r < nq; r++) {
                        const int t = q0 + r;
                        if (CAUSAL && t < k0) continue;  // the whole tile is after the diagonal
                        // the valid keys of the tile: u <= t (causal), all nk (full)
                        const int nv = CAUSAL && t - k0 + 1 < nk ? t - k0 + 1 : nk;
                        const int nj = (nv + 7) / 8 * 8;  // the keys computed
                        const float* qt = q + (((size_t)b * T + t) * H + h) * hd;
                        float* o = out + (((size_t)b * T + t) * H + h) * hd;
                        att_cpu_scores(sc, qt, kt, ld, nj, hd);
                        for (int j = 0; j < nj; j++) sc[j] = j < nv ? sc[j] * scale : -INFINITY;
                        float mx[8];
                        for (int i = 0; i < 8; i++) mx[i] = sc[i];
                        for (int j = 8; j < nj; j += 8)
                            for (int i = 0; i < 8; i++) mx[i] = sc[j + i] > mx[i] ? sc[j + i] : mx[i];
                        float m_new = m[r];
                        for (int i = 0; i < 8; i++) m_new = mx[i] > m_new ? mx[i] : m_new;
                        const float corr = cpu_vexp(m[r] - m_new);  // 0 on the first tile (m = -inf)
                        for (int j = 0; j < nj; j++) p[j] = cpu_vexp(sc[j] - m_new);
                        l[r] = l[r] * corr + att_cpu_sum(p, nj);
                        for (int d = 0; d < hd; d++) o[d] = o[d] * corr + att_cpu_dot(p, vt + d * ld, nj);
                        m[r] = m_new;
                    }
                }
                for (int r = 0; r < nq; r++) {
                    const int t = q0 + r;
                    float* o = out + (((size_t)b * T + t) * H + h) * hd;
                    const float inv = 1.0f / l[r];
                    for (int d = 0; d < hd; d++) o[d] *= inv;
                    lse[((size_t)b * H + h) * T + t] = m[r] + logf(l[r]);
                }
            }
}

// the backward of both modes (CAUSAL as in att_cpu_forward)
template <bool CAUSAL>
static inline void att_cpu_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k,
                                    const floatX* v, const floatX* out, const float* lse, int B, int T, int H, int KV,
                                    int hd, const char* who) {
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KV;
    const int TK = att_cpu_tile_keys(hd, who);
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < KV; kvh++) {
            float kt[ATT_CPU_BUF], vt[ATT_CPU_BUF], dkt[ATT_CPU_BUF], dvt[ATT_CPU_BUF];  // [hd][ld]
            float sc[ATT_CPU_TILE], dp[ATT_CPU_TILE], p[ATT_CPU_TILE], ds[ATT_CPU_TILE];
            for (int h = kvh * group; h < (kvh + 1) * group; h++)
                for (int t = 0; t < T; t++) memset(dq + (((size_t)b * T + t) * H + h) * hd, 0, hd * sizeof(floatX));
            for (int k0 = 0; k0 < T; k0 += TK) {
                const int nk = T - k0 < TK ? T - k0 : TK;
                const int ld = (nk + 7) / 8 * 8;
                att_cpu_load_tile_t(kt, k, b, k0, nk, ld, T, KV, kvh, hd);
                att_cpu_load_tile_t(vt, v, b, k0, nk, ld, T, KV, kvh, hd);
                for (int i = 0; i < hd * ld; i++) { dkt[i] = 0.0f; dvt[i] = 0.0f; }
                for (int h = kvh * group; h < (kvh + 1) * group; h++)
                    for (int t = CAUSAL ? k0 : 0; t < T; t++) {  // the queries that see the tile
                        const size_t qi = (((size_t)b * T + t) * H + h) * hd;
                        const float* qt = q + qi;
                        const float* dot_ = dout + qi;
                        const float* ot = out + qi;
                        float* dqt = dq + qi;
                        const int nv = CAUSAL && t - k0 + 1 < nk ? t - k0 + 1 : nk;  // keys u <= t (causal)
                        const int nj = (nv + 7) / 8 * 8;                               // the keys computed
                        float delta = 0.0f;  // sum_d dO * O = sum_u P_u dP_u
                        for (int d = 0; d < hd; d++) delta += dot_[d] * ot[d];
                        const float l = lse[((size_t)b * H + h) * T + t];
                        att_cpu_scores(sc, qt, kt, ld, nj, hd);
                        att_cpu_scores(dp, dot_, vt, ld, nj, hd);
                        for (int j = 0; j < nj; j++) {
                            p[j] = cpu_vexp(j < nv ? sc[j] * scale - l : -INFINITY);
                            ds[j] = p[j] * (dp[j] - delta) * scale;
                        }
                        for (int d = 0; d < hd; d++) {
                            const float gd = dot_[d], qd = qt[d];
                            float* dvd = dvt + d * ld;
                            float* dkd = dkt + d * ld;
                            for (int j = 0; j < nj; j++) {
                                dvd[j] += p[j] * gd;
                                dkd[j] += ds[j] * qd;
                            }
                            dqt[d] += att_cpu_dot(ds, kt + d * ld, nj);
                        }
                    }
                for (int j = 0; j < nk; j++) {
                    const size_t ki = (((size_t)b * T + k0 + j) * KV + kvh) * hd;
                    for (int d = 0; d < hd; d++) {
                        dk[ki + d] = dkt[d * ld + j];
                        dv[ki + d] = dvt[d * ld + j];
                    }
                }
            }
        }
}

static inline void attention_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T,
                                     int H, int KV, int hd, stream_t s) {
    (void)s;
    att_cpu_forward<true>(out, lse, q, k, v, B, T, H, KV, hd, "attention_forward");
}

static inline void attention_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k,
                                      const floatX* v, const floatX* out, const float* lse, int B, int T, int H, int KV,
                                      int hd, stream_t s) {
    (void)s;
    att_cpu_backward<true>(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, "attention_backward");
}

// non-causal (the video DiT, docs/design.md 9.3): every query attends to every key
static inline void attention_full_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B,
                                          int T, int H, int KV, int hd, stream_t s) {
    (void)s;
    att_cpu_forward<false>(out, lse, q, k, v, B, T, H, KV, hd, "attention_full_forward");
}

static inline void attention_full_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                           const floatX* k, const floatX* v, const floatX* out, const float* lse, int B,
                                           int T, int H, int KV, int hd, stream_t s) {
    (void)s;
    att_cpu_backward<false>(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, "attention_full_backward");
}
