/*
Flash attention on tensor cores, second generation ("tc2"), forward only: bf16 in, fp32
accumulate, every head dim that is a multiple of 8 from 32 to 256 (attention_tc_supported_hd).
The contract is attention_tc_forward's (llmc/kernels/attention_tc.cuh): q, out [B, T, H, hd];
k, v [B, T, KV, hd]; lse [B, H, T] fp32, natural log of the scaled scores' sum of exps; GQA;
scale 1/sqrt(hd). So either backward (attention_tc_backward, the fp32 one) pairs with it:
  attention_tc2_forward       causal (Llama)
  attention_tc2_full_forward  non-causal (the video DiT)
bf16 builds only: in an ENABLE_FP32 build the kernels are not compiled and the launchers FAIL.
It reuses v6's tiles and fragment helpers (AttTcRow, att_tc_load_rows, att_tc_load_a/_b_nk/
_b_kn, att_tc_c_to_a); what is new is the shape of the work, FlashAttention-2's forward where
the registers allow it. dev/cuda/attention.cu version 8 is this file (and its predictions).

Shape, first configuration (HDP <= 128). One CTA of 4 warps per (128-row query tile, head,
batch); warp w owns query rows 32w .. 32w+31 as two m16 row slices (MS = 2). Every K or V
fragment that ldmatrix loads then feeds two MMAs per n8 tile instead of one: v6 issued one
ldmatrix x4 per 2 MMAs, here per 4 (plus Q's, where Q is not kept in registers), so shared
memory reads per MMA are roughly halved, and a K/V tile in shared memory serves 128 query rows
instead of 64 (half the L2 reads of K and V). Why not 8 warps of 16 rows: they would share
the tile between 128 rows too, but not the fragments (v6's ldmatrix traffic per MMA), and a
256-thread CTA at v6's 128-175 registers is one CTA an SM: the same 8 warps an SM as 2 CTAs
of 4 here. The price of 32 rows a warp is registers: O is HDP fp32 a thread and S is BK, so
the key tile, Q in registers and the pipelining are chosen per width to fit 255 without a
spill (ptxas):
  HDP  rows/warp  BQ  BK   Q in regs  pipelined  registers  dynamic smem (bytes)
   32      32    128  64     yes        yes        240        30,720
   48      32    128  64     no         yes        254        43,008
   64      32    128 128     no         no         255        92,160
   80      32    128  64     yes        no         250        67,584
   96      32    128  64     no         no         250        79,872
  112      32    128  32     no         no         228        61,440
  128      32    128  32     no         no         242        69,632
  160      16     64  32     no         no         128        64,512
  192      16     64  32     no         no         166        76,800
  224      16     64  32     no         no         170        89,088
  256      16     64  32     no         no         238       101,376
(CUDA 13, sm_90, -O3; no spills, no stack frame; at least two CTAs of 128 threads an SM:
255 registers x 128 threads and at most 2 x 101,376 bytes fit an SM.) Tried and dropped:
pipelining at HDP 64 (spills 304 bytes with Q in registers, 88 without), at HDP 48 with Q in
registers (16 bytes); 64-key tiles at HDP 112 and 128 (spill 24 and 60 bytes): there the key
tile is 32, which doubles the O rescales per key against v6 but still halves the fragment
reads per MMA. At HDP 64 the registers allow either 128-key tiles with Q from shared memory
(255) or 64-key tiles with Q in registers (241, no spill): this file takes the 128-key tiles
(FlashAttention-2's hd-64 forward shape): half the barriers, cp.async rounds and O rescales
per key, for ~12% more fragment reads per MMA (Q's) and, causal, ~3% more masked work at
T = 2048 (no warp skips a whole 128-key tile). The other is the one-line variant
(att_tc2_fwd_bk, att_tc2_fwd_qreg) to time against it on a GPU.
Software pipelining (PIPE: HDP 32 and 48): S_{j+1} = Q K_{j+1}^T is issued before the
softmax of tile j, so that the tensor pipe has independent MMAs in flight while the FMA and
MUFU pipes do tile j's exp2/max/sum (mma.sync does not stall the warp until its result is
read). For that K runs one tile ahead of V: the cp.async group of iteration j brings K_{j+2}
and V_{j+1} into the double buffers (K_j's buffer and V_{j-1}'s, both free after the barrier
at the top of iteration j: S_j was computed, and P_{j-1} V_{j-1} done, in iteration j - 1),
and the top-of-iteration wait finds K_{j+1} and V_j landed. The loop runs two iterations a
trip so that the two S tiles swap roles without register copies. Without PIPE the loop is
v6's: S_j, softmax, P_j V_j, with tile j + 1 loading meanwhile.
Q's fragments stay in registers where the table says so; elsewhere they are read from shared
memory again for each key tile (the sums in the same order). P is packed to bf16 A fragments
right after the softmax (half the registers of the fp32 S) before P V.

Second configuration (HDP > 128): O alone is HDP / 2 fp32 a thread for 16 rows a warp, so v6's
shape stays: 64-row query tiles, 16 rows a warp (MS = 1), 32-key tiles, Q from shared memory,
no pipelining (no registers for a second S). What changes there is the grid order below.

Causal. The heaviest query tiles first over the whole grid: the grid is 1-D, the query tile
is its slowest index (rank r -> qt = n_qt - 1 - r), then batch, then head (heads sharing a
kv head adjacent: their K/V tiles meet in L2). v6 ordered tiles longest-first within each
(head, batch) only, so every head ended on its light tiles, and the last wave was a mix;
here the last waves are the lightest tiles of all heads. A query tile visits key tiles
0 .. (q0 + BQ) / BK - 1; a warp skips (warp-uniform branch, no MMA, no softmax) the key tiles
its rows mask whole (with 128-row query tiles and 64-key tiles, warps 0 and 1 on the last
tile; with 32-key tiles, 1 to 3 warps on each of the last three), and masks only on the tiles
that cross its own rows' diagonal or T.
The mask, the online softmax (exp2 with scale log2(e) folded into one fma, the row max and
sum over the 4 lanes of a quad), P rounded to bf16 and fed to P V from the accumulators,
the output through the Q buffer (16-byte coalesced stores) and lse = m scale + log(l) are
v6's; out differs from the CPU twin within the bound dev/emu/harness.cpp derives for v6
(the same roundings, in another order: the key tiles' boundaries differ).
Shared memory (bf16, rows of HDP + 8: conflict-free ldmatrix and cp.async, as v6, with the
same chunk map): the Q tile [BQ][LD] and two buffers each of K and V [BK][LD]: (BQ + 4 BK)
(HDP + 8) 2 bytes (the table).
Deterministic: fixed order everywhere, no atomics. Every copy a thread issues is waited for
by that thread before the barrier that publishes it.
*/
#pragma once
#include "attention_tc.cuh"  // AttTcRow, att_tc_load_rows, fragment helpers, att_tc_check, att_tc_hdp

#define ATT_TC2_FWD_WARPS 4
#define ATT_TC2_FWD_THREADS (32 * ATT_TC2_FWD_WARPS)

// the configuration of a compiled width HDP (att_tc_hdp(hd)), host and device: row slices of
// 16 a warp, keys per K/V tile, Q's fragments in registers, S_{j+1} issued before softmax j.
// Each is what fits 255 registers without a spill (ptxas; the table at the top)
static constexpr int att_tc2_fwd_ms(int hdp) { return hdp <= 128 ? 2 : 1; }
static constexpr int att_tc2_fwd_bk(int hdp) { return hdp == 64 ? 128 : hdp <= 96 ? 64 : 32; }
static constexpr bool att_tc2_fwd_qreg(int hdp) { return hdp == 32 || hdp == 80; }
static constexpr bool att_tc2_fwd_pipe(int hdp) { return hdp <= 48; }
static constexpr int att_tc2_fwd_bq(int hdp) { return ATT_TC2_FWD_WARPS * 16 * att_tc2_fwd_ms(hdp); }
// bytes of dynamic shared memory: Q, and two buffers of K and V, rows padded to hdp + 8
static inline size_t att_tc2_smem_forward(int hd) {
    const int hdp = att_tc_hdp(hd);
    return (size_t)(att_tc2_fwd_bq(hdp) + 4 * att_tc2_fwd_bk(hdp)) * (hdp + 8) * 2;
}

#ifndef ENABLE_FP32
template <int HDP> struct AttTc2Fwd {
    static constexpr int MS = att_tc2_fwd_ms(HDP), BK = att_tc2_fwd_bk(HDP), BQ = att_tc2_fwd_bq(HDP);
    static constexpr bool QREG = att_tc2_fwd_qreg(HDP), PIPE = att_tc2_fwd_pipe(HDP);
};

// S = Q K^T for the warp's MS row slices against one key tile (K stored [key][dim], B's
// [n][k]); sQw: the warp's first Q row; qf: Q's fragments when QREG. Each s element adds its
// k16 slices in increasing order in both loop orders.
template <int HDP, int MS, int BK, bool QREG>
static __device__ __forceinline__ void att_tc2_qk(float (&s)[MS][BK / 8][4], const tc_u32 (&qf)[QREG ? MS : 1][QREG ? HDP / 16 : 1][4],
                                                  const att_bf16* sQw, const att_bf16* cK, int lane) {
    constexpr int LD = AttTcRow<HDP>::LD, KS = HDP / 16, NT = BK / 8;
    #pragma unroll
    for (int ms = 0; ms < MS; ms++) att_tc_zero(s[ms]);
    if (QREG) {
        #pragma unroll
        for (int jp = 0; jp < NT / 2; jp++) {
            #pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                tc_u32 kf[4];
                att_tc_load_b_nk<LD>(kf, cK + jp * 16 * LD + kk * 16, lane);
                #pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    tc_mma_bf16_16816(s[ms][2 * jp], qf[QREG ? ms : 0][QREG ? kk : 0], kf);
                    tc_mma_bf16_16816(s[ms][2 * jp + 1], qf[QREG ? ms : 0][QREG ? kk : 0], kf + 2);
                }
            }
        }
    } else {
        #pragma unroll
        for (int kk = 0; kk < KS; kk++) {
            tc_u32 qa[MS][4];
            #pragma unroll
            for (int ms = 0; ms < MS; ms++) att_tc_load_a<LD>(qa[ms], sQw + ms * 16 * LD + kk * 16, lane);
            #pragma unroll
            for (int jp = 0; jp < NT / 2; jp++) {
                tc_u32 kf[4];
                att_tc_load_b_nk<LD>(kf, cK + jp * 16 * LD + kk * 16, lane);
                #pragma unroll
                for (int ms = 0; ms < MS; ms++) {
                    tc_mma_bf16_16816(s[ms][2 * jp], qa[ms], kf);
                    tc_mma_bf16_16816(s[ms][2 * jp + 1], qa[ms], kf + 2);
                }
            }
        }
    }
}

// the mask (when `mask`), the online softmax of S (raw scores, in place -> p) and
// O = O corr + P V for the warp's MS row slices; r0: the warp's first query row, k0: the
// tile's first key. s[ms][j][e] is (row r0 + 16 ms + g + 8 (e >> 1), key k0 + 8 j + 2 t4 + (e & 1)).
// Every row sees key 0 in tile 0, so m is finite from there on, even for a row that a later
// tile masks whole.
template <int HDP, int MS, int BK>
static __device__ __forceinline__ void att_tc2_softmax_pv(float (&s)[MS][BK / 8][4], float (&o)[MS][HDP / 8][4],
                                                          float (&m_r)[MS][2], float (&l_r)[MS][2], const att_bf16* cV,
                                                          bool mask, bool causal, int r0, int k0, int T, float sl2,
                                                          int lane) {
    constexpr int LD = AttTcRow<HDP>::LD, NT = BK / 8, DT = HDP / 8;
    const int g = lane >> 2, t4 = lane & 3;
    if (mask) {
        #pragma unroll
        for (int ms = 0; ms < MS; ms++)
            #pragma unroll
            for (int j = 0; j < NT; j++)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int u = k0 + j * 8 + 2 * t4 + (e & 1), t = r0 + ms * 16 + g + (e >> 1) * 8;
                    if (u >= T || (causal && u > t)) s[ms][j][e] = -INFINITY;
                }
    }
    #pragma unroll
    for (int ms = 0; ms < MS; ms++)
        #pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float mx = -INFINITY;
            #pragma unroll
            for (int j = 0; j < NT; j++) mx = fmaxf(mx, fmaxf(s[ms][j][2 * hr], s[ms][j][2 * hr + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_r[ms][hr], mx);
            // a row with no visible key so far keeps p = 0 and corr = 0 instead of NaN
            const float msc = m_new == -INFINITY ? 0.0f : m_new * sl2;
            const float corr = exp2f(m_r[ms][hr] * sl2 - msc);  // 0 while nothing was accumulated
            m_r[ms][hr] = m_new;
            float rs = 0.0f;
            #pragma unroll
            for (int j = 0; j < NT; j++)
                #pragma unroll
                for (int e = 2 * hr; e < 2 * hr + 2; e++) {
                    const float p = exp2f(fmaf(s[ms][j][e], sl2, -msc));
                    s[ms][j][e] = p;
                    rs += p;
                }
            l_r[ms][hr] = l_r[ms][hr] * corr + rs;  // this lane's keys; the quad is summed at the end
            #pragma unroll
            for (int d = 0; d < DT; d++) { o[ms][d][2 * hr] *= corr; o[ms][d][2 * hr + 1] *= corr; }
        }
    // P to bf16 A fragments all at once (half the registers of the fp32 S, which dies here:
    // the P V product below runs beside O with the smaller P)
    tc_u32 pa[MS][NT / 2][4];
    #pragma unroll
    for (int ms = 0; ms < MS; ms++)
        #pragma unroll
        for (int kk = 0; kk < NT / 2; kk++) att_tc_c_to_a(pa[ms][kk], s[ms][2 * kk], s[ms][2 * kk + 1]);
    // O += P V (V stored [key][dim], B's [k][n]): one V fragment feeds the MS slices; each O
    // element adds its k16 slices of keys in increasing order
    #pragma unroll
    for (int kk = 0; kk < NT / 2; kk++) {
        #pragma unroll
        for (int nd = 0; nd < DT / 2; nd++) {
            tc_u32 bf[4];
            att_tc_load_b_kn<LD>(bf, cV + kk * 16 * LD + nd * 16, lane);
            #pragma unroll
            for (int ms = 0; ms < MS; ms++) {
                tc_mma_bf16_16816(o[ms][2 * nd], pa[ms][kk], bf);
                tc_mma_bf16_16816(o[ms][2 * nd + 1], pa[ms][kk], bf + 2);
            }
        }
    }
}

// one iteration kt of the pipelined loop (PIPE): on entry s_cur holds S_kt (raw), computed in
// the previous iteration (or before the loop); K_{kt+1} and V_kt are in flight in the last
// committed group. Leaves S_{kt+1} in s_next.
template <int HDP>
static __device__ __forceinline__ void att_tc2_pipe_step(
    float (&s_cur)[AttTc2Fwd<HDP>::MS][AttTc2Fwd<HDP>::BK / 8][4], float (&s_next)[AttTc2Fwd<HDP>::MS][AttTc2Fwd<HDP>::BK / 8][4],
    float (&o)[AttTc2Fwd<HDP>::MS][HDP / 8][4], float (&m_r)[AttTc2Fwd<HDP>::MS][2], float (&l_r)[AttTc2Fwd<HDP>::MS][2],
    const tc_u32 (&qf)[AttTc2Fwd<HDP>::QREG ? AttTc2Fwd<HDP>::MS : 1][AttTc2Fwd<HDP>::QREG ? HDP / 16 : 1][4],
    const att_bf16* sQw, att_bf16* sK, att_bf16* sV, const att_bf16* k, const att_bf16* v, int kt, int n_kt, int b,
    int kvh, int T, int KV, int hd, int r0, bool causal, float sl2, int lane) {
    constexpr int MS = AttTc2Fwd<HDP>::MS, BK = AttTc2Fwd<HDP>::BK, NTH = ATT_TC2_FWD_THREADS;
    constexpr bool QREG = AttTc2Fwd<HDP>::QREG;
    constexpr int LD = AttTcRow<HDP>::LD;
    tc_cp_async_wait<0>();  // this thread's copies of K_{kt+1} and V_kt
    __syncthreads();        // everyone's; and every warp is done with K_kt (S_kt) and V_{kt-1} (P V)
    if (kt + 1 < n_kt) {
        att_tc_load_rows<HDP, NTH>(sV + ((kt + 1) & 1) * BK * LD, v, b, (kt + 1) * BK, BK, T, KV, kvh, hd);
        if (kt + 2 < n_kt) att_tc_load_rows<HDP, NTH>(sK + (kt & 1) * BK * LD, k, b, (kt + 2) * BK, BK, T, KV, kvh, hd);
        tc_cp_async_commit();
    }
    const int last = r0 + MS * 16 - 1;  // the warp's last query row
    // S_{kt+1} first: its MMAs are in flight while the softmax of tile kt runs
    if (kt + 1 < n_kt && !(causal && (kt + 1) * BK > last))
        att_tc2_qk<HDP, MS, BK, QREG>(s_next, qf, sQw, sK + ((kt + 1) & 1) * BK * LD, lane);
    const int k0 = kt * BK;
    if (!(causal && k0 > last)) {
        const bool mask = k0 + BK > T || (causal && k0 + BK - 1 > r0);
        att_tc2_softmax_pv<HDP, MS, BK>(s_cur, o, m_r, l_r, sV + (kt & 1) * BK * LD, mask, causal, r0, k0, T, sl2, lane);
    }
}

// the forward. HDP: the compiled width (att_tc_hdp(hd)); hd <= HDP the runtime head dim.
// A 1-D grid of n_qt * B * H CTAs: block x -> (rank r, batch b, head h), r slowest.
template <int HDP>
static __device__ __forceinline__ void att_tc2_forward_body(floatX* smem, floatX* out, float* lse, const floatX* q,
                                                            const floatX* k, const floatX* v, int B, int T, int H, int KV,
                                                            int hd, float scale, bool causal) {
    constexpr int MS = AttTc2Fwd<HDP>::MS, BK = AttTc2Fwd<HDP>::BK, BQ = AttTc2Fwd<HDP>::BQ, NTH = ATT_TC2_FWD_THREADS;
    constexpr bool QREG = AttTc2Fwd<HDP>::QREG, PIPE = AttTc2Fwd<HDP>::PIPE;
    constexpr int LD = AttTcRow<HDP>::LD, KS = HDP / 16, NT = BK / 8, DT = HDP / 8;
    static_assert(BQ % BK == 0, "a query tile ends on a key tile boundary");
    floatX* sQ = smem;              // [BQ][LD]
    floatX* sK = sQ + BQ * LD;      // [2][BK][LD]
    floatX* sV = sK + 2 * BK * LD;  // [2][BK][LD]
    const int n_qt = (T + BQ - 1) / BQ;
    const int bh = blockIdx.x % (B * H), rank = blockIdx.x / (B * H);
    const int h = bh % H, b = bh / H, kvh = h / (H / KV);
    const int qt = causal ? n_qt - 1 - rank : rank;  // causal: the heaviest tiles first, over all heads
    const int q0 = qt * BQ;
    const int n_kt_all = (T + BK - 1) / BK;
    // causal: the key tiles up to the query tile's last row
    const int n_kt = causal ? min(n_kt_all, (q0 + BQ) / BK) : n_kt_all;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const int r0 = q0 + warp * MS * 16;  // the warp's first query row
    const floatX* sQw = sQ + warp * MS * 16 * LD;
    const float sl2 = scale * ATT_TC_LOG2E;  // exp(x scale) = exp2(x sl2)

    tc_u32 qf[QREG ? MS : 1][QREG ? KS : 1][4];
    float o[MS][DT][4];
    float m_r[MS][2], l_r[MS][2];  // rows g and g + 8 of each slice: raw max, sum
    #pragma unroll
    for (int ms = 0; ms < MS; ms++) {
        att_tc_zero(o[ms]);
        m_r[ms][0] = m_r[ms][1] = -INFINITY;
        l_r[ms][0] = l_r[ms][1] = 0.0f;
    }

    if (PIPE) {
        // group 1: Q and K_0; group 2: K_1 and V_0 (K runs a tile ahead of V)
        att_tc_load_rows<HDP, NTH>(sQ, q, b, q0, BQ, T, H, h, hd);
        att_tc_load_rows<HDP, NTH>(sK, k, b, 0, BK, T, KV, kvh, hd);
        tc_cp_async_commit();
        if (n_kt > 1) att_tc_load_rows<HDP, NTH>(sK + BK * LD, k, b, BK, BK, T, KV, kvh, hd);
        att_tc_load_rows<HDP, NTH>(sV, v, b, 0, BK, T, KV, kvh, hd);
        tc_cp_async_commit();
        tc_cp_async_wait<1>();  // this thread's Q and K_0
        __syncthreads();
        if (QREG) {
            #pragma unroll
            for (int ms = 0; ms < MS; ms++)
                #pragma unroll
                for (int kk = 0; kk < KS; kk++)
                    att_tc_load_a<LD>(qf[QREG ? ms : 0][QREG ? kk : 0], sQw + ms * 16 * LD + kk * 16, lane);
        }
        float sa[MS][NT][4], sb[MS][NT][4];
        att_tc2_qk<HDP, MS, BK, QREG>(sa, qf, sQw, sK, lane);  // tile 0: every row sees key 0
        // two iterations a trip, so that S_kt and S_{kt+1} swap roles without register copies
        for (int kt = 0; kt < n_kt; kt += 2) {
            att_tc2_pipe_step<HDP>(sa, sb, o, m_r, l_r, qf, sQw, sK, sV, k, v, kt, n_kt, b, kvh, T, KV, hd, r0, causal,
                                   sl2, lane);
            if (kt + 1 < n_kt)
                att_tc2_pipe_step<HDP>(sb, sa, o, m_r, l_r, qf, sQw, sK, sV, k, v, kt + 1, n_kt, b, kvh, T, KV, hd, r0,
                                       causal, sl2, lane);
        }
    } else {
        att_tc_load_rows<HDP, NTH>(sQ, q, b, q0, BQ, T, H, h, hd);
        att_tc_load_rows<HDP, NTH>(sK, k, b, 0, BK, T, KV, kvh, hd);
        att_tc_load_rows<HDP, NTH>(sV, v, b, 0, BK, T, KV, kvh, hd);
        tc_cp_async_commit();
        const int last = r0 + MS * 16 - 1;
        for (int kt = 0; kt < n_kt; kt++) {
            tc_cp_async_wait<0>();  // this thread's copies of tile kt (and of Q)
            __syncthreads();        // everyone's; and every warp is done with the buffer the next tile goes to
            if (kt + 1 < n_kt) {
                const int nb = (kt + 1) & 1;
                att_tc_load_rows<HDP, NTH>(sK + nb * BK * LD, k, b, (kt + 1) * BK, BK, T, KV, kvh, hd);
                att_tc_load_rows<HDP, NTH>(sV + nb * BK * LD, v, b, (kt + 1) * BK, BK, T, KV, kvh, hd);
                tc_cp_async_commit();
            }
            if (QREG && kt == 0) {
                #pragma unroll
                for (int ms = 0; ms < MS; ms++)
                    #pragma unroll
                    for (int kk = 0; kk < KS; kk++)
                        att_tc_load_a<LD>(qf[QREG ? ms : 0][QREG ? kk : 0], sQw + ms * 16 * LD + kk * 16, lane);
            }
            const int k0 = kt * BK;
            if (causal && k0 > last) continue;  // the warp's rows mask this tile whole (warp-uniform)
            float s[MS][NT][4];
            att_tc2_qk<HDP, MS, BK, QREG>(s, qf, sQw, sK + (kt & 1) * BK * LD, lane);
            const bool mask = k0 + BK > T || (causal && k0 + BK - 1 > r0);
            att_tc2_softmax_pv<HDP, MS, BK>(s, o, m_r, l_r, sV + (kt & 1) * BK * LD, mask, causal, r0, k0, T, sl2, lane);
        }
    }

    // out = O / l through this warp's own rows of sQ (read only by this warp: its Q fragments)
    #pragma unroll
    for (int ms = 0; ms < MS; ms++)
        #pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            l_r[ms][hr] += __shfl_xor_sync(0xffffffffu, l_r[ms][hr], 1);
            l_r[ms][hr] += __shfl_xor_sync(0xffffffffu, l_r[ms][hr], 2);
        }
    // the warp's ldmatrix reads of these rows before any lane overwrites them
    __syncwarp();
    #pragma unroll
    for (int ms = 0; ms < MS; ms++) {
        const float inv0 = 1.0f / l_r[ms][0], inv1 = 1.0f / l_r[ms][1];
        floatX* orow = sQ + (warp * MS * 16 + ms * 16 + g) * LD + 2 * t4;
        #pragma unroll
        for (int d = 0; d < DT; d++) {
            orow[d * 8] = (floatX)(o[ms][d][0] * inv0);
            orow[d * 8 + 1] = (floatX)(o[ms][d][1] * inv0);
            orow[8 * LD + d * 8] = (floatX)(o[ms][d][2] * inv1);
            orow[8 * LD + d * 8 + 1] = (floatX)(o[ms][d][3] * inv1);
        }
    }
    __syncwarp();
    constexpr int CPR = AttTcRow<HDP>::CPR;  // the copies' chunk map: conflict-free 16-byte reads
    for (int c = lane; c < MS * 16 * CPR; c += 32) {
        const int r = c / CPR, col = (c % CPR) * 8, t = r0 + r;
        if (t < T && col < hd)
            *(uint4*)(out + (((size_t)b * T + t) * H + h) * hd + col) = *(const uint4*)(sQw + r * LD + col);
    }
    if (t4 == 0) {
        #pragma unroll
        for (int ms = 0; ms < MS; ms++)
            #pragma unroll
            for (int hr = 0; hr < 2; hr++) {
                const int t = r0 + ms * 16 + g + 8 * hr;
                if (t < T) lse[((size_t)b * H + h) * T + t] = m_r[ms][hr] * scale + logf(l_r[ms][hr]);
            }
    }
}

// one kernel per compiled width (not a template: the emulator's kernel table names kernels
// without template arguments); all are att_tc2_forward_body
#define ATT_TC2_FWD_ARGS                                                                                          \
    floatX *out, float *lse, const floatX *q, const floatX *k, const floatX *v, int B, int T, int H, int KV,       \
        int hd, float scale, bool causal
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd32_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<32>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd48_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<48>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd64_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<64>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd80_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<80>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd96_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<96>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd112_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<112>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd128_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<128>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd160_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<160>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd192_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<192>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd224_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<224>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC2_FWD_THREADS) attention_tc2_forward_hd256_kernel(ATT_TC2_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc2_smem[];
    att_tc2_forward_body<256>((floatX*)att_tc2_smem, out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
}
#endif  // !ENABLE_FP32

static inline void att_tc2_launch_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                          int B, int T, int H, int KV, int hd, bool causal, stream_t s, const char* who) {
    att_check_args(who, B, T, H, KV, hd);
    const void* ptrs[4] = {out, q, k, v};
    att_tc_check(who, hd, ptrs, 4);
#ifndef ENABLE_FP32
    if (B == 0 || T == 0) return;
    const int hdp = att_tc_hdp(hd);
    const size_t smem = att_tc2_smem_forward(hd);
    const size_t n_blocks = ceil_div((size_t)T, (size_t)att_tc2_fwd_bq(hdp)) * B * H;
    if (n_blocks > 0x7fffffffu) FAIL("%s: %zu CTAs: over the grid's limit (B T H too large)", who, n_blocks);
    const dim3 grid((unsigned)n_blocks);
    const float scale = 1.0f / sqrtf((float)hd);
    switch (hdp) {
    case 32:
        att_prepare_smem((const void*)attention_tc2_forward_hd32_kernel, smem, who);
        attention_tc2_forward_hd32_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 48:
        att_prepare_smem((const void*)attention_tc2_forward_hd48_kernel, smem, who);
        attention_tc2_forward_hd48_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 64:
        att_prepare_smem((const void*)attention_tc2_forward_hd64_kernel, smem, who);
        attention_tc2_forward_hd64_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 80:
        att_prepare_smem((const void*)attention_tc2_forward_hd80_kernel, smem, who);
        attention_tc2_forward_hd80_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 96:
        att_prepare_smem((const void*)attention_tc2_forward_hd96_kernel, smem, who);
        attention_tc2_forward_hd96_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 112:
        att_prepare_smem((const void*)attention_tc2_forward_hd112_kernel, smem, who);
        attention_tc2_forward_hd112_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 128:
        att_prepare_smem((const void*)attention_tc2_forward_hd128_kernel, smem, who);
        attention_tc2_forward_hd128_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 160:
        att_prepare_smem((const void*)attention_tc2_forward_hd160_kernel, smem, who);
        attention_tc2_forward_hd160_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 192:
        att_prepare_smem((const void*)attention_tc2_forward_hd192_kernel, smem, who);
        attention_tc2_forward_hd192_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 224:
        att_prepare_smem((const void*)attention_tc2_forward_hd224_kernel, smem, who);
        attention_tc2_forward_hd224_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    case 256:
        att_prepare_smem((const void*)attention_tc2_forward_hd256_kernel, smem, who);
        attention_tc2_forward_hd256_kernel<<<grid, ATT_TC2_FWD_THREADS, smem, s>>>(out, lse, q, k, v, B, T, H, KV, hd, scale, causal);
        break;
    default: FAIL("%s: head dim %d: no compiled width %d", who, hd, hdp);
    }
    cudaCheck(cudaGetLastError());
#else
    (void)out; (void)lse; (void)q; (void)k; (void)v; (void)causal; (void)s;
#endif
}

// causal (attention_forward's contract)
static inline void attention_tc2_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B,
                                         int T, int H, int KV, int hd, stream_t s) {
    att_tc2_launch_forward(out, lse, q, k, v, B, T, H, KV, hd, true, s, "attention_tc2_forward");
}
// non-causal (attention_full_forward's contract)
static inline void attention_tc2_full_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                              int B, int T, int H, int KV, int hd, stream_t s) {
    att_tc2_launch_forward(out, lse, q, k, v, B, T, H, KV, hd, false, s, "attention_tc2_full_forward");
}
