/*
CPU twin of llmc/kernels/attention.cuh: attention with grouped-query heads, computed
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
CPU build).

How, and why. The work is one exp and 4 hd (forward) or 10 hd (backward) flops per
(query, key) pair, and the head dims of the CPU models are small (8 in stories260K, 16 in
dit-tiny, 48 in stories15M): loops over the head dim alone would stay short and scalar,
and a loop that puts keys in the lanes ends every row with sums across lanes. So the
lanes hold eight queries (cpu_v8f of llmc/kernels/cpu/vmath.h, GCC's vector extension: one AVX
register): a block of 8 queries is transposed ([hd][8], qt) and a score is
s_u = sum_d qt[d] * k_u[d], the key's element broadcast, eight keys side by side so that
their FMA chains overlap; every per-row quantity (max, sum of p, lse, delta, the output)
is one vector and needs no reduction across lanes. K and V are read where they are
(row u of kv head j is contiguous), never copied. The exp is cpu_vexp8_le88 (the bits of
cpu_vexp, llmc/kernels/cpu/vmath.h, for arguments <= 88: exp(s - max) and exp(s - lse) are <= 0 up
to rounding). Keys past a query (causal) get the score -inf and so p = 0; so do the
lanes of a last block past T. Every sum has one fixed order, the same for any thread
count and vector width: over d ascending (scores, delta), over keys ascending (l, O, dQ;
dQ per key tile, then the tiles), over queries in (q head, t) order (dK, dV). No heap:
the buffers are on the stack (up to 72 KiB per forward task, 160 KiB per backward
task), which limits the head dim to ATT_CPU_MAX_HD = 1024 (the CUDA kernels stop at 256).

forward: one task per (batch, head, block of 8 queries). Keys are taken ATT_CPU_TILE at a
time (up to the block's last query, causal): the scaled scores of the tile and their
lane-wise max m_new, one correction exp(m - m_new), then for each key in order
p = exp(s - m_new), l = l * corr + sum p and o = o * corr + sum_u p_u v_u (online
softmax; o kept transposed, [hd][8], and updated eight dims of the head at a time).
Writes out = o / l and lse = m + log(l).

backward: one task per (batch, kv head). It owns dk and dv of that kv head, so their
sums over the q heads of the group and over the queries need no atomics and have a
fixed order (heads, then queries, ascending; as in the CUDA dkdv kernel). For each tile
of keys (ATT_CPU_BUF / hd of them: all of T in the small models) it keeps dK and dV of
the tile ([block of 8 keys][hd][8]) and goes over the q heads of the group and the blocks
of 8 queries that see the tile; per block of 8 keys: s and dP = dO . v (lanes: queries),
p = exp(s*scale - lse), dS = p (dP - delta) scale with delta = dO . O; then dQ += dS k
(lanes: queries), and P and dS transposed in registers (lanes: keys) for dV += p dO and
dK += dS q. dq, dk, dv are overwritten.
*/
#pragma once
#include "../../core/common.h"
#include "vmath.h"  // cpu_v8f, cpu_vexp8_le88: eight queries (or keys) a vector, and the exp of the probabilities

#define ATT_CPU_TILE 256   // forward: keys whose scores are kept at once (one online-softmax step)
#define ATT_CPU_BUF 8192   // backward: floats in one tile of dK (and of dV): keys per tile = 8192 / hd rounded up to 8, down to 8
#define ATT_CPU_MAX_HD (ATT_CPU_BUF / 8)  // 1024: at least 8 keys per tile

// backward: keys per tile for this head dim: a multiple of 8, tile <= ATT_CPU_BUF floats with the
// head dim rounded up to a multiple of 8 (1024 keys at hd = 8, 168 at hd = 48, 8 at hd = 1024)
static inline int att_cpu_tile_keys(int hd, const char* who) {
    if (hd <= 0 || hd > ATT_CPU_MAX_HD) FAIL("%s: head dim %d is not in 1..%d", who, hd, ATT_CPU_MAX_HD);
    return (ATT_CPU_BUF / ((hd + 7) / 8 * 8)) / 8 * 8;
}

// x[0..7] := its transpose (x[i][j] := x[j][i]): unpack, shuffle within 128-bit halves, swap halves
static inline void att_cpu_transpose8(cpu_v8f* x) {
#if defined(__clang__)
#define ATT_SHUF(a, b, ...) __builtin_shufflevector(a, b, __VA_ARGS__)
#else
#define ATT_SHUF(a, b, ...) __builtin_shuffle(a, b, cpu_v8i{__VA_ARGS__})
#endif
    cpu_v8f t[8], u[8];
    for (int i = 0; i < 8; i += 2) {
        t[i] = ATT_SHUF(x[i], x[i + 1], 0, 8, 1, 9, 4, 12, 5, 13);
        t[i + 1] = ATT_SHUF(x[i], x[i + 1], 2, 10, 3, 11, 6, 14, 7, 15);
    }
    for (int i = 0; i < 8; i += 4)
        for (int j = 0; j < 2; j++) {
            u[i + 2 * j] = ATT_SHUF(t[i + j], t[i + j + 2], 0, 1, 8, 9, 4, 5, 12, 13);
            u[i + 2 * j + 1] = ATT_SHUF(t[i + j], t[i + j + 2], 2, 3, 10, 11, 6, 7, 14, 15);
        }
    for (int i = 0; i < 4; i++) {
        x[i] = ATT_SHUF(u[i], u[i + 4], 0, 1, 2, 3, 8, 9, 10, 11);
        x[i + 4] = ATT_SHUF(u[i], u[i + 4], 4, 5, 6, 7, 12, 13, 14, 15);
    }
#undef ATT_SHUF
}

// the n <= 8 rows x + i * stride (hd floats each) into xt[d * 8 + i], zeros in the lanes n .. 7
static inline void att_cpu_load_rows_t(float* xt, const floatX* x, size_t stride, int n, int hd) {
    int dg = 0;
    if (n == 8)
        for (; dg + 8 <= hd; dg += 8) {  // eight rows by eight dims: a transpose in registers
            cpu_v8f r[8];
            for (int i = 0; i < 8; i++) r[i] = cpu_v8_load(x + i * stride + dg);
            att_cpu_transpose8(r);
            for (int d = 0; d < 8; d++) cpu_v8_store(xt + 8 * (dg + d), r[d]);
        }
    for (int d = dg; d < hd; d++)
        for (int i = 0; i < 8; i++) xt[d * 8 + i] = i < n ? x[i * stride + d] : 0.0f;
}

// rows x + i * stride, i < n <= 8, += xt's lanes (xt[d * 8 + i] to row i's element d)
static inline void att_cpu_add_rows_t(floatX* x, const float* xt, size_t stride, int n, int hd) {
    int dg = 0;
    if (n == 8)
        for (; dg + 8 <= hd; dg += 8) {
            cpu_v8f r[8];
            for (int d = 0; d < 8; d++) r[d] = cpu_v8_load(xt + 8 * (dg + d));
            att_cpu_transpose8(r);
            for (int i = 0; i < 8; i++) cpu_v8_store(x + i * stride + dg, cpu_v8_load(x + i * stride + dg) + r[i]);
        }
    for (int i = 0; i < n; i++)
        for (int d = dg; d < hd; d++) x[i * stride + d] += xt[8 * d + i];
}

// s[j] = x . r_j for NJ rows r_j = r0 + j * stride (keys), x transposed (xt[d * 8 + i]: query i):
// lane i of s[j] sums x_i[d] r_j[d] over d in order, from 0
template <int NJ>
static inline void att_cpu_dots(cpu_v8f* s, const float* xt, const floatX* r0, size_t stride, int hd) {
    for (int j = 0; j < NJ; j++) s[j] = cpu_v8_set1(0.0f);
    for (int d = 0; d < hd; d++) {
        const cpu_v8f xd = cpu_v8_load(xt + 8 * d);
        for (int j = 0; j < NJ; j++) s[j] += xd * r0[j * stride + d];
    }
}

// s[j] = x . r_j for the n rows of a block (n <= 8): eight sums side by side, so that their FMAs
// (four cycles each, two a cycle) never wait for one another
static inline void att_cpu_dots_n(cpu_v8f* s, const float* xt, const floatX* r0, size_t stride, int n, int hd) {
    if (n == 8) { att_cpu_dots<8>(s, xt, r0, stride, hd); return; }
    int j = 0;
    for (; j + 4 <= n; j += 4) att_cpu_dots<4>(s + j, xt, r0 + j * stride, stride, hd);
    for (; j < n; j++) att_cpu_dots<1>(s + j, xt, r0 + j * stride, stride, hd);
}

// acc[dd] (lanes: queries) for dd < ND += sum_j w[j] r_j[dg + dd] over rows j < n, in order;
// acc is read from and written back to at (8 floats per dd)
template <int ND>
static inline void att_cpu_accum(float* at, const cpu_v8f* w, const floatX* r0, size_t stride, int n) {
    cpu_v8f acc[ND];
    for (int dd = 0; dd < ND; dd++) acc[dd] = cpu_v8_load(at + 8 * dd);
    for (int j = 0; j < n; j++) {
        const floatX* r = r0 + j * stride;
        for (int dd = 0; dd < ND; dd++) acc[dd] += w[j] * r[dd];
    }
    for (int dd = 0; dd < ND; dd++) cpu_v8_store(at + 8 * dd, acc[dd]);
}

// att_cpu_accum over all of the head dim, eight at a time (a template for each count of the last group)
static inline void att_cpu_accum_hd(float* at, const cpu_v8f* w, const floatX* r0, size_t stride, int n, int hd) {
    int dg = 0;
    for (; dg + 8 <= hd; dg += 8) att_cpu_accum<8>(at + 8 * dg, w, r0 + dg, stride, n);
    switch (hd - dg) {
        case 7: att_cpu_accum<7>(at + 8 * dg, w, r0 + dg, stride, n); break;
        case 6: att_cpu_accum<6>(at + 8 * dg, w, r0 + dg, stride, n); break;
        case 5: att_cpu_accum<5>(at + 8 * dg, w, r0 + dg, stride, n); break;
        case 4: att_cpu_accum<4>(at + 8 * dg, w, r0 + dg, stride, n); break;
        case 3: att_cpu_accum<3>(at + 8 * dg, w, r0 + dg, stride, n); break;
        case 2: att_cpu_accum<2>(at + 8 * dg, w, r0 + dg, stride, n); break;
        case 1: att_cpu_accum<1>(at + 8 * dg, w, r0 + dg, stride, n); break;
        default: break;
    }
}

// forward, one tile of nk keys (rows of v from v0, stride vs) for a block of queries:
// o[dg + dd] (transposed, lanes: queries) = o corr + sum_u p_u v_u[dg + dd]; FIRST: p_u = exp(s_u - m),
// from the scores in sp, is computed, written back to sp and summed into l = l corr + sum_u p_u
template <int ND, bool FIRST>
CPU_V8_FN void att_cpu_fwd_pv(float* ot, float* sp, const floatX* v0, size_t vs, int nk, const cpu_v8f& m, const cpu_v8f& corr,
                                  cpu_v8f* l) {
    cpu_v8f acc[ND];
    for (int dd = 0; dd < ND; dd++) acc[dd] = cpu_v8_load(ot + 8 * dd) * corr;
    cpu_v8f ls = *l * corr;
    for (int u = 0; u < nk; u++) {
        cpu_v8f p;
        if (FIRST) {
            p = cpu_vexp8_le88(cpu_v8_load(sp + 8 * u) - m);
            cpu_v8_store(sp + 8 * u, p);
            ls += p;
        } else {
            p = cpu_v8_load(sp + 8 * u);
        }
        const floatX* vr = v0 + u * vs;
        for (int dd = 0; dd < ND; dd++) acc[dd] += p * vr[dd];
    }
    for (int dd = 0; dd < ND; dd++) cpu_v8_store(ot + 8 * dd, acc[dd]);
    if (FIRST) *l = ls;
}

template <bool FIRST>
CPU_V8_FN void att_cpu_fwd_pv_n(int nd, float* ot, float* sp, const floatX* v0, size_t vs, int nk, const cpu_v8f& m, const cpu_v8f& corr,
                                    cpu_v8f* l) {
    switch (nd) {
        case 8: att_cpu_fwd_pv<8, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        case 7: att_cpu_fwd_pv<7, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        case 6: att_cpu_fwd_pv<6, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        case 5: att_cpu_fwd_pv<5, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        case 4: att_cpu_fwd_pv<4, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        case 3: att_cpu_fwd_pv<3, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        case 2: att_cpu_fwd_pv<2, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
        default: att_cpu_fwd_pv<1, FIRST>(ot, sp, v0, vs, nk, m, corr, l); break;
    }
}

// lane i of the result: 0 .. 7
CPU_V8_FN cpu_v8i att_cpu_iota(void) { return cpu_v8i{0, 1, 2, 3, 4, 5, 6, 7}; }

// the forward of both modes (see the header: CAUSAL is compiled in, never tested at run time)
template <bool CAUSAL>
static inline void att_cpu_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T,
                                   int H, int KV, int hd, const char* who) {
    const float scale = 1.0f / sqrtf((float)hd);
    const int group = H / KV;
    (void)att_cpu_tile_keys(hd, who);  // the head dim's check
    const int n_qv = (T + 7) / 8;      // blocks of 8 queries
    const size_t qs = (size_t)H * hd, ks = (size_t)KV * hd;  // from one query (key) to the next
    #pragma omp parallel for collapse(3) schedule(static)
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int qv = 0; qv < n_qv; qv++) {
                const int kvh = h / group;
                const int t0 = qv * 8;
                const int nq = T - t0 < 8 ? T - t0 : 8;
                alignas(32) float qt[ATT_CPU_MAX_HD * 8], ot[ATT_CPU_MAX_HD * 8];  // q and o of the block, [hd][8]
                alignas(32) float sp[ATT_CPU_TILE * 8];  // the scores of a tile of keys, then their probabilities
                att_cpu_load_rows_t(qt, q + ((size_t)b * T + t0) * qs + (size_t)h * hd, qs, nq, hd);
                for (int i = 0; i < 8 * hd; i++) ot[i] = 0.0f;
                const floatX* kb = k + (size_t)b * T * ks + (size_t)kvh * hd;
                const floatX* vb = v + (size_t)b * T * ks + (size_t)kvh * hd;
                const cpu_v8i lane_t = t0 + att_cpu_iota();  // the query of each lane
                cpu_v8f m = cpu_v8_set1(-INFINITY), l = cpu_v8_set1(0.0f);
                const int u_end = CAUSAL ? t0 + nq : T;  // causal: the keys up to the block's last query
                for (int k0 = 0; k0 < u_end; k0 += ATT_CPU_TILE) {
                    const int nk = u_end - k0 < ATT_CPU_TILE ? u_end - k0 : ATT_CPU_TILE;
                    // scores, scaled; causal: -inf for the keys after a lane's query; their lane-wise max
                    cpu_v8f mx = cpu_v8_set1(-INFINITY);
                    for (int u = 0; u < nk; u += 8) {
                        const int n = nk - u < 8 ? nk - u : 8;
                        cpu_v8f s[8];
                        att_cpu_dots_n(s, qt, kb + (size_t)(k0 + u) * ks, ks, n, hd);
                        for (int j = 0; j < n; j++) {
                            cpu_v8f x = s[j] * scale;
                            if (CAUSAL && k0 + u + j > t0) x = k0 + u + j <= lane_t ? x : -INFINITY;
                            cpu_v8_store(sp + 8 * (u + j), x);
                            mx = x > mx ? x : mx;
                        }
                    }
                    const cpu_v8f m_new = mx > m ? mx : m;
                    const cpu_v8f corr = cpu_vexp8_le88(m - m_new);  // 0 on the first tile (m = -inf)
                    // p = exp(s - m_new), l += p and o += p v, eight dims of the head at a time
                    for (int dg = 0; dg < hd; dg += 8) {
                        const int nd = hd - dg < 8 ? hd - dg : 8;
                        const floatX* v0 = vb + (size_t)k0 * ks + dg;
                        if (dg == 0) att_cpu_fwd_pv_n<true>(nd, ot, sp, v0, ks, nk, m_new, corr, &l);
                        else att_cpu_fwd_pv_n<false>(nd, ot + 8 * dg, sp, v0, ks, nk, m_new, corr, &l);
                    }
                    m = m_new;
                }
                const cpu_v8f inv = 1.0f / l;
                for (int i = 0; i < nq; i++) {
                    floatX* o = out + ((size_t)b * T + t0 + i) * qs + (size_t)h * hd;
                    for (int d = 0; d < hd; d++) o[d] = ot[8 * d + i] * inv[i];
                    lse[((size_t)b * H + h) * T + t0 + i] = m[i] + logf(l[i]);
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
    const int hdp = (hd + 7) / 8 * 8;
    const int n_qv = (T + 7) / 8;
    const size_t qs = (size_t)H * hd, ks = (size_t)KV * hd;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int kvh = 0; kvh < KV; kvh++) {
            alignas(32) float dkt[ATT_CPU_BUF], dvt[ATT_CPU_BUF];  // a tile's dK, dV: [key block][hdp][8 keys]
            alignas(32) float qt[ATT_CPU_MAX_HD * 8], gt[ATT_CPU_MAX_HD * 8], dqt[ATT_CPU_MAX_HD * 8];  // [hd][8 queries]
            const floatX* kb = k + (size_t)b * T * ks + (size_t)kvh * hd;
            const floatX* vb = v + (size_t)b * T * ks + (size_t)kvh * hd;
            for (int h = kvh * group; h < (kvh + 1) * group; h++)
                for (int t = 0; t < T; t++) memset(dq + ((size_t)b * T + t) * qs + (size_t)h * hd, 0, hd * sizeof(floatX));
            for (int k0 = 0; k0 < T; k0 += TK) {
                const int nk = T - k0 < TK ? T - k0 : TK;
                const int nkb = (nk + 7) / 8;  // blocks of 8 keys
                for (int i = 0; i < nkb * hdp * 8; i++) { dkt[i] = 0.0f; dvt[i] = 0.0f; }
                for (int h = kvh * group; h < (kvh + 1) * group; h++)
                    for (int qv = CAUSAL ? k0 / 8 : 0; qv < n_qv; qv++) {  // the queries that see the tile
                        const int t0 = qv * 8;
                        const int nq = T - t0 < 8 ? T - t0 : 8;
                        const size_t row0 = ((size_t)b * T + t0) * qs + (size_t)h * hd;
                        const float* lrow = lse + ((size_t)b * H + h) * T + t0;
                        att_cpu_load_rows_t(qt, q + row0, qs, nq, hd);
                        att_cpu_load_rows_t(gt, dout + row0, qs, nq, hd);
                        att_cpu_load_rows_t(dqt, out + row0, qs, nq, hd);  // O, for delta (dqt is zeroed after)
                        cpu_v8f lq = cpu_v8_set1(0.0f), delta = cpu_v8_set1(0.0f);  // delta = sum_d dO O = sum_u P_u dP_u
                        for (int d = 0; d < hd; d++) delta += cpu_v8_load(gt + 8 * d) * cpu_v8_load(dqt + 8 * d);
                        if (nq == 8) lq = cpu_v8_load(lrow);
                        else
                            for (int i = 0; i < nq; i++) lq[i] = lrow[i];
                        for (int i = 0; i < 8 * hd; i++) dqt[i] = 0.0f;
                        const cpu_v8i lane_t = t0 + att_cpu_iota();
                        const cpu_v8i lane_ok = att_cpu_iota() < nq;  // the lanes that hold a query
                        // causal: the key blocks up to the one of the block's last query
                        const int kb_end = CAUSAL && (t0 + nq - 1 - k0) / 8 + 1 < nkb ? (t0 + nq - 1 - k0) / 8 + 1 : nkb;
                        for (int kbi = 0; kbi < kb_end; kbi++) {
                            const int u0 = k0 + 8 * kbi;
                            const int n = k0 + nk - u0 < 8 ? k0 + nk - u0 : 8;  // keys in the block
                            cpu_v8f p[8], ds[8];
                            att_cpu_dots_n(p, qt, kb + (size_t)u0 * ks, ks, n, hd);   // s
                            att_cpu_dots_n(ds, gt, vb + (size_t)u0 * ks, ks, n, hd);  // dP
                            if (n == 8 && nq == 8 && (!CAUSAL || u0 + 7 <= t0)) {  // no key past a query, no empty lane
                                for (int j = 0; j < 8; j++) {
                                    p[j] = cpu_vexp8_le88(p[j] * scale - lq);
                                    ds[j] = p[j] * (ds[j] - delta) * scale;
                                }
                            } else {
                                for (int j = 0; j < 8; j++) {
                                    if (j >= n) { p[j] = cpu_v8_set1(0.0f); ds[j] = p[j]; continue; }
                                    cpu_v8f x = p[j] * scale - lq;
                                    const cpu_v8i ok = CAUSAL ? lane_ok & (u0 + j <= lane_t) : lane_ok;
                                    x = ok ? x : -INFINITY;
                                    p[j] = cpu_vexp8_le88(x);
                                    ds[j] = p[j] * (ds[j] - delta) * scale;
                                }
                            }
                            // dq += dS k (lanes: queries)
                            att_cpu_accum_hd(dqt, ds, kb + (size_t)u0 * ks, ks, n, hd);
                            // dV += P dO and dK += dS q (lanes: keys), the block's queries in order
                            att_cpu_transpose8(p);
                            att_cpu_transpose8(ds);
                            att_cpu_accum_hd(dvt + (size_t)kbi * hdp * 8, p, dout + row0, qs, nq, hd);
                            att_cpu_accum_hd(dkt + (size_t)kbi * hdp * 8, ds, q + row0, qs, nq, hd);
                        }
                        att_cpu_add_rows_t(dq + row0, dqt, qs, nq, hd);
                    }
                for (int kbi = 0; kbi < nkb; kbi++) {
                    const int n = nk - 8 * kbi < 8 ? nk - 8 * kbi : 8;
                    const size_t ki = ((size_t)b * T + k0 + 8 * kbi) * ks + (size_t)kvh * hd;
                    for (int j = 0; j < n; j++)
                        for (int d = 0; d < hd; d++) {
                            dk[ki + j * ks + d] = dkt[(size_t)kbi * hdp * 8 + 8 * d + j];
                            dv[ki + j * ks + d] = dvt[(size_t)kbi * hdp * 8 + 8 * d + j];
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
