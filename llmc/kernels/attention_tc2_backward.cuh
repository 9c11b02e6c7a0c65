/*
Flash-attention BACKWARD on tensor cores, second generation ("tc2"): one pass,
FlashAttention-2's five matmuls, bitwise reproducible. Same operands, fragments and helpers as
llmc/kernels/attention_tc_backward.cuh (v6, "tc": mma.sync m16n8k16 + ldmatrix + cp.async through
llmc/kernels/tensorcore.cuh, tile rows of hd values zero-padded to the compiled width HDP with
row stride HDP + 8), whose kernels this file does not change: `--attention tc` stays bit for
bit. dev/cuda/attention.cu version 7 is its ladder, with the traffic analysis and the
predictions (H200).

Contract: attention_tc_backward's (q, out, dout, dq [B, T, H, hd]; k, v, dk, dv [B, T, KV, hd];
lse [B, H, T] from any of our forwards; GQA; dq, dk, dv overwritten), with one scratch
argument, `workspace`, of attention_tc2_workspace_floats(B, T, H, KV, hd, causal) floats
(16-byte aligned), planned by the caller, overwritten. bf16 builds only (FAILs in ENABLE_FP32
builds), every head dim attention_tc_supported_hd accepts.

Workspace rule. Let N = B T H hd (one fp32 copy of dq), G = H / KV, BK the key tile (128 up
to HDP 128, 64 above), n_kt = ceil(T / BK) and C = min(n_kt, clamp(ceil(256 / (B H)), 4, 16))
the key tiles of a chunk (a key tile launches B H CTAs, one per q head; 256: about two CTAs
for each of an H100's or H200's 132 SMs, so that a chunk's launch fills the GPU; the clamp
keeps W at most 16 copies of dq whatever T and B H). Then
    floats = C N  (the chunk's slots W[0..C-1])
           + N    (the fp32 running sum A, only when there is more than one chunk)
           + 2 N  (the dK and dV partials, G B T KV hd = N floats each, only when G > 1)
           + B H T (delta)
at most 17 N + B H T without GQA, 19 N + B H T with, independent of T beyond N itself.
Worked numbers:
    llama3-1B, B=4 T=2048 H=32 KV=8 hd 64 causal: N = 16,777,216; BK 128, n_kt 16, B H 128 ->
        C = 4, 4 chunks, G = 4: 7 N + 262,144 = 117,702,656 floats = 471 MB
    dit-B, B=1 T=16384 H=12 KV=12 hd 64 full: N = 12,582,912; n_kt 128, B H 12 -> C = 16,
        8 chunks, G = 1: 17 N + 196,608 = 214,106,112 floats = 856 MB
    dit-XL, B=1 T=16384 H=16 KV=16 hd 72 full (HDP 80, BK 128): N = 18,874,368; n_kt 128,
        C = 16, 8 chunks, G = 1: 17 N + 262,144 = 321,126,400 floats = 1.28 GB
(Unchunked, dit-XL would need n_kt N = 9.7 GB.) The launches may use fewer key tiles a chunk
than C, to fill the device's waves (att_tc2_chunk_for_waves: dit-B on a 132-SM H200 runs 11;
a smaller chunk needs A, and C - 1 slots leave room for it). The result does not depend on C: every
element of dq is A + W[0] + W[1] + ... in increasing kt whatever the chunk boundaries, and
every element of dK, dV has one key tile, filled in one chunk.

Kernels (no atomics anywhere):
  attention_tc_delta_kernel (the v6 file's): delta = rowsum(dO * O), fp32, into the workspace.
  attention_tc2_bwd_hd{HDP}_kernel: one CTA per (q head, batch, key tile of the chunk), 8
    warps (256 threads), the key tile the grid's slowest index so that, causal, the key tiles
    with the most query tiles are launched first. With GQA a CTA takes one q head of its kv
    head's group rather than looping over the group (B KV CTAs a key tile gave few long CTAs:
    at B=1 T=2048 llama3-1B's 128 CTAs on 132 SMs, the first key tiles' 4 times the longest),
    and so holds only that head's share of dK, dV: G > 1 stores it unscaled, fp32, into the
    partials P[h % G] (layout [B, T, KV, hd] each, dK's G then dV's G); G = 1 writes dk, dv
    itself, as before the split (bit for bit: the same CTAs doing the same work). Warp w owns keys 16 (w % KG) .. + 15 of the
    tile and HDP / CS columns of dK and dV: up to HDP 128, CS = 1, KG = 8: 128-key tiles; above,
    CS = 2 (as v6's second configuration: warps w and w + 4 compute the same S^T, dP^T and
    split dK's and dV's columns), 64-key tiles. K and V stay in shared memory; the CTA loops
    over its head's query tiles at or after the key tile (causal; full: all), Q / dO tiles double-buffered by cp.async, BQ = 64 rows up to HDP
    80 (hd 72's width: v6 takes 32 there), 32 above (the registers of dK, dV: at HDP 96, 64
    rows take all 255 registers). Per query tile, as v6's dK/dV kernel:
      S^T = K Q^T, dP^T = V dO^T; P^T = exp2(S^T scale log2e - lse log2e), dS^T = P^T (dP^T
      - delta), fp32 in registers; dV += P^T dO, dK += dS^T Q (P^T, dS^T rounded to bf16 as
      A operands, as FlashAttention-2 does);
    and then, the step v6 did in a second kernel that recomputed S and dP:
      dS^T goes to shared memory (bf16, the same rounding as the A operand of dK's product;
      rows of BQ + 8, (BQ + 8) / 8 odd: conflict-free 4-byte stores and ldmatrix .trans reads); after
      a barrier the 8 warps compute dQ_kt = dS K (BQ x HDP, k = the tile's keys in one pass:
      warp w the 16 rows w % (BQ / 16) and the n8 column tiles w / (BQ / 16) + i 8 / (BQ / 16),
      dS read as A by ldmatrix x4.trans, K as B by x2.trans) and store it, fp32, to the
      chunk slot W[kt - c0] (layout [B, T, H, hd] a slot; rows >= T and columns >= hd are not
      written). Two barriers per query tile, as v6's kernel had.
    lse and delta of the next query tile are loaded into registers when its cp.async is issued
    and stored to shared memory only at the end of the current tile, so that their latency
    hides behind the tile's math (the loads are 4-byte and unaligned: lse rows of T floats).
  attention_tc2_dq_reduce_kernel: per 4 consecutive elements of dq, s = (first chunk ? 0 :
    A) + W[0] + W[1] + ... over the slots whose key tile the row sees (causal: kt BK <= t), in
    that order; the last chunk writes dq = bf16(scale s), the others s to A.
  attention_tc2_dkv_reduce_kernel (G > 1): per 4 consecutive elements of dk or dv, s = P[0] +
    P[1] + ... + P[G - 1] in increasing head order; dk = bf16(scale s), dv = bf16(s), rounded
    once. (The fp32 sums associate differently from a CTA adding the G heads' products in one
    accumulator, so dk, dv are no longer bit for bit --attention tc's when G > 1.)
Launch order on one stream: delta, then per chunk the fill kernel and the dq reduce kernel,
then (G > 1) the dk/dv reduce.

Why one pass: v6's backward computes S and dP twice (7 matmuls); here the workspace's traffic,
8 bytes per element of dq per key tile, replaces the two recomputed matmuls, a gain only with
128-key tiles (dev/cuda/attention.cu version 7). Memory O(N) per chunk, nothing T x T. The
GQA split adds 16 bytes per element of dk and dv per head (the partials written and read)
for CTAs that fill the SMs when B KV is small (version 7's note on it has the prediction).

Registers per thread by HDP (ptxas, CUDA 13, sm_90, -O3, __launch_bounds__(256); no spills, no
stack frame): 32: 185, 48: 199, 64: 239, 80: 245, 96: 225, 112: 242, 128: 246, 160: 178,
192: 227, 224: 236, 256: 245; the dq reduce 34, the dk/dv reduce 38. Up to 248 registers, 8 warps fit an SM's 65536
(248 x 256 = 63488): one CTA an SM, the 8 warps of v6's two CTAs of 4. The fp32 accumulators:
dK, dV HDP / (2 CS) each, S^T, dP^T BQ / 2 each, dQ_kt 4 NDQ (live only after dK's product). Shared
memory (att_tc2_smem): sK, sV [BK][HDP + 8], sQ, sdO [2][BQ][HDP + 8], sdS [BK][BQ + 8] bf16,
lse and delta [2][BQ] fp32: HDP 64: 93,184 bytes, HDP 80: 109,568, HDP 128: 115,200, HDP 256:
140,800.

Checked in the host emulator (dev/emu: attention_tc2_backward[...], attention_tc2_full_backward[...]
in dev/emu/harness.cpp at every compiled width, and the ladder's version 7); nothing here has
run on a GPU.
*/
#pragma once
#include "../core/common.h"
#include "attention_tc_backward.cuh"  // attention_tc_delta_kernel, the tile and fragment helpers, att_tc_check

#define ATT_TC2_WARPS 8
#define ATT_TC2_THREADS (32 * ATT_TC2_WARPS)
#define ATT_TC2_REDUCE_THREADS 256
#define ATT_TC2_CTAS 256       // CTAs a chunk's launch aims at: about two for each of 132 SMs
#define ATT_TC2_CHUNK_MIN 4    // key tiles a chunk holds, at least (unless T has fewer)
#define ATT_TC2_CHUNK_MAX 16   // and at most: the workspace is at most 17 fp32 copies of dq (19 with GQA)

// keys per tile (AttTc2<HDP>::BK), host side
static inline int att_tc2_bk(int hdp) { return hdp <= 128 ? 128 : 64; }
// key tiles per chunk (the rule in the header): a key tile launches B H CTAs (one per q head,
// GQA or not); depends only on the arguments
static inline int att_tc2_chunk(int B, int H, int n_kt) {
    const long long bh = (long long)B * H, want = (ATT_TC2_CTAS + bh - 1) / bh;
    const int c = want < ATT_TC2_CHUNK_MIN ? ATT_TC2_CHUNK_MIN : want > ATT_TC2_CHUNK_MAX ? ATT_TC2_CHUNK_MAX : (int)want;
    return c < n_kt ? c : n_kt;
}

// The key tiles a chunk holds at run time: at most the plan's c_max (the workspace has c_max
// slots; fewer leave room for A), and among 1..c_max the one whose launches take the fewest
// waves of one CTA a multiprocessor (8 warps of 181-246 registers: one fits an SM), the
// larger on a tie (fewer launches). A chunk of nc key tiles launches B H nc CTAs of equal work
// without a causal mask: ceil(B H nc / sms) waves. dit-B at 16K tokens on an H200 (B H = 12,
// 128 key tiles, 132 SMs): the plan's 16 took 8 launches of 2 waves, 1.45 of them filled
// (122.5 TFLOP/s in the trainer against the ladder's 160 at B H = 16, 2026-11-30); 11 take
// 11 launches of one full wave and one of 7 tiles: 12 waves against 16. The result does not
// depend on the choice (the header).
static inline int att_tc2_chunk_for_waves(int B, int H, int n_kt, int c_max, int sms) {
    const long long bh = (long long)B * H, per = sms > 0 ? sms : 1;
    int best = c_max;
    long long best_waves = -1;
    for (int c = c_max; c >= 1; c--) {
        const long long rest = n_kt % c;
        const long long waves = (long long)(n_kt / c) * ((bh * c + per - 1) / per) + (rest ? (bh * rest + per - 1) / per : 0);
        if (best_waves < 0 || waves < best_waves) { best_waves = waves; best = c; }
    }
    return best;
}

// floats of workspace with chunks of c key tiles (c >= 1): the slots, the running sum A
// (more than one chunk), the dK and dV partials of the G = H / KV heads (G > 1: G B T KV hd
// floats each, 2 N together), delta
static inline size_t att_tc2_workspace_floats_chunked(int B, int T, int H, int KV, int hd, int c) {
    const int bk = att_tc2_bk(att_tc_hdp(hd)), n_kt = (T + bk - 1) / bk;
    if (c > n_kt) c = n_kt;
    const int n_ch = (n_kt + c - 1) / c;
    const size_t n = (size_t)B * T * H * hd;
    return (size_t)c * n + (n_ch > 1 ? n : 0) + (H > KV ? 2 * n : 0) + (size_t)B * H * T;
}
// floats of workspace the backward needs (delta included); host arithmetic only, the same
// value for any call with these arguments (the rule and worked numbers: the header)
static inline size_t attention_tc2_workspace_floats(int B, int T, int H, int KV, int hd, bool causal) {
    (void)causal;  // the slots hold whole [B, T, H, hd] copies in both modes
    if (B <= 0 || T <= 0 || H <= 0 || KV <= 0 || hd <= 0) return 0;
    const int bk = att_tc2_bk(att_tc_hdp(hd)), n_kt = (T + bk - 1) / bk;
    return att_tc2_workspace_floats_chunked(B, T, H, KV, hd, att_tc2_chunk(B, H, n_kt));
}

#ifndef ENABLE_FP32

// the tiles of the one-pass kernel: 8 warps; a warp owns 16 keys and HDP / CS columns of dK
// and dV. CS = 1 up to HDP 128 (128-key tiles), CS = 2 above (64-key tiles, two warps per 16
// keys computing the same S^T, dP^T). BQ query rows per tile: 64 up to HDP 80, 32 above (the
// registers of dK, dV: HDP / CS floats a thread; HDP 96 with 64 rows reaches 255 registers).
template <int HDP> struct AttTc2 {
    static constexpr int CS = HDP <= 128 ? 1 : 2;
    static constexpr int KG = ATT_TC2_WARPS / CS;  // warps along the keys
    static constexpr int BK = 16 * KG;
    static constexpr int BQ = HDP <= 80 ? 64 : 32;
    static constexpr int LDS = BQ + 8;               // dS^T row stride (LDS / 8 odd)
    static constexpr int MT = BQ / 16;               // m16 tiles of dQ_kt
    static constexpr int NG = ATT_TC2_WARPS / MT;    // warps along dQ_kt's columns
    static constexpr int NDQ = (HDP / 8 + NG - 1) / NG;  // n8 tiles of dQ_kt a warp, at most
};
template <int HDP> static inline size_t att_tc2_smem() {
    constexpr int BK = AttTc2<HDP>::BK, BQ = AttTc2<HDP>::BQ;
    return (size_t)(2 * BK + 4 * BQ) * (HDP + 8) * sizeof(att_bf16) + (size_t)BK * AttTc2<HDP>::LDS * sizeof(att_bf16) +
           4 * BQ * sizeof(float);
}

// A operand (16 x 16) of a matrix stored transposed, [k][m] at base with row stride LD, by
// ldmatrix x4.trans: lane l gives row k = (l % 8) + 8 (l / 16), column m = 8 ((l / 8) % 2),
// so that the matrices come in the order a[0..3] wants: (m 0-7, k 0-7), (m 8-15, k 0-7),
// (m 0-7, k 8-15), (m 8-15, k 8-15)
template <int LD>
static __device__ __forceinline__ void att_tc2_load_a_t(tc_u32 a[4], const att_bf16* base, int lane) {
    tc_ldmatrix_x4_trans(a, base + ((lane & 7) + (lane >> 4) * 8) * LD + ((lane >> 3) & 1) * 8);
}

// an m16 x (8 ND) fp32 C fragment (rows r_lo, r_lo + 8 of head h, columns col0 + ...) stored as
// it is, fp32: att_tc_store_c's addressing without the rounding
template <int ND>
static __device__ __forceinline__ void att_tc2_store_f32(float* x, const float (&acc)[ND][4], int b, int r_lo, int T,
                                                         int nh, int h, int t4, int hd, int col0) {
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = r_lo + half * 8;
        if (r >= T) continue;
        const size_t base = (((size_t)b * T + r) * nh + h) * hd + col0 + 2 * t4;
        #pragma unroll
        for (int i = 0; i < ND; i++) {
            if (col0 + 8 * i >= hd) break;
            *(float2*)(x + base + i * 8) = make_float2(acc[i][2 * half], acc[i][2 * half + 1]);
        }
    }
}

template <int HDP>
static __device__ __forceinline__ void att_tc2_bwd(unsigned char* smem, att_bf16* dk, att_bf16* dv, float* W,
                                                  float* P, const att_bf16* dout, const att_bf16* q, const att_bf16* k,
                                                  const att_bf16* v, const float* lse, const float* delta, int T,
                                                  int H, int KV, int hd, float scale, bool causal, int c0) {
    using C = AttTc2<HDP>;
    constexpr int BK = C::BK, BQ = C::BQ, KG = C::KG, LDS = C::LDS, MT = C::MT, NG = C::NG, NDQ = C::NDQ;
    constexpr int LD = AttTcRow<HDP>::LD, NTH = ATT_TC2_THREADS;
    constexpr int KS = HDP / 16;           // k16 steps over the head dim
    constexpr int NQ = BQ / 8;             // n8 tiles of queries in S^T, dP^T
    constexpr int ND = HDP / 8 / C::CS;    // n8 tiles of the head dim in this warp's dK, dV
    constexpr int NT8 = HDP / 8;           // n8 tiles of the head dim in dQ_kt
    static_assert(ND % 2 == 0, "att_tc_mma_pb takes n8 tiles in pairs");
    static_assert(BK % BQ == 0, "a key tile starts on a query tile boundary");
    att_bf16* sK = (att_bf16*)smem;           // [BK][LD]
    att_bf16* sV = sK + BK * LD;              // [BK][LD]
    att_bf16* sQ = sV + BK * LD;              // [2][BQ][LD]
    att_bf16* sdO = sQ + 2 * BQ * LD;         // [2][BQ][LD]
    att_bf16* sdS = sdO + 2 * BQ * LD;        // [BK][LDS]: dS^T of the current query tile
    float* sL = (float*)(sdS + BK * LDS);     // [2][BQ]: lse * log2e
    float* sD = sL + 2 * BQ;                  // [2][BQ]: delta

    const int h = blockIdx.x, b = blockIdx.y, slot = blockIdx.z, kt = c0 + slot;
    const int B = gridDim.y, group = H / KV, kvh = h / group, k0 = kt * BK;
    const int n_qt = (T + BQ - 1) / BQ;
    const int qt_first = causal ? k0 / BQ : 0;  // the first query tile that sees a key of this tile
    const int n_jobs = n_qt - qt_first;         // this head's query tiles, >= 1: k0 < T
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const int kw = warp % KG, col0 = (warp / KG) * ND * 8;  // this warp's 16 keys and first column
    const float sc2 = scale * ATT_TC_LOG2E;
    float* Ws = W + (size_t)slot * ((size_t)B * T * H * hd);  // this key tile's slot

    // job j -> Q, dO into buffer j & 1 (cp.async)
    auto issue = [&](int j) {
        const int q0 = (qt_first + j) * BQ, buf = j & 1;
        att_tc_load_rows<HDP, NTH>(sQ + buf * BQ * LD, q, b, q0, BQ, T, H, h, hd);
        att_tc_load_rows<HDP, NTH>(sdO + buf * BQ * LD, dout, b, q0, BQ, T, H, h, hd);
    };
    // job j's lse and delta: loaded into registers by threads < BQ (fetch), stored into buffer
    // j & 1 later (stash), so that the loads' latency passes while the current tile computes
    float f_l = 0.0f, f_d = 0.0f;
    auto fetch = [&](int j) {
        const int t = (qt_first + j) * BQ + (int)threadIdx.x;
        if (threadIdx.x < BQ && t < T) {
            const size_t li = ((size_t)b * H + h) * T + t;
            f_l = lse[li];
            f_d = delta[li];
        } else {
            f_l = 0.0f;
            f_d = 0.0f;
        }
    };
    auto stash = [&](int j) {
        if (threadIdx.x < BQ) {
            sL[(j & 1) * BQ + threadIdx.x] = f_l * ATT_TC_LOG2E;
            sD[(j & 1) * BQ + threadIdx.x] = f_d;
        }
    };
    att_tc_load_rows<HDP, NTH>(sK, k, b, k0, BK, T, KV, kvh, hd);
    att_tc_load_rows<HDP, NTH>(sV, v, b, k0, BK, T, KV, kvh, hd);
    issue(0);
    tc_cp_async_commit();
    fetch(0);
    stash(0);

    float acc_dk[ND][4], acc_dv[ND][4];
    att_tc_zero(acc_dk);
    att_tc_zero(acc_dv);
    const int u_lo = k0 + kw * 16 + g;  // this lane's keys: u_lo (C rows g) and u_lo + 8
    const int mi = warp % MT, ng = warp / MT;  // this warp's rows and first n8 tile of dQ_kt

    for (int j = 0; j < n_jobs; j++) {
        const int buf = j & 1;
        // buffer buf ^ 1 was last read in iteration j - 1, before its second barrier
        if (j + 1 < n_jobs) {
            issue(j + 1);
            fetch(j + 1);
        }
        tc_cp_async_commit();   // possibly empty: one group per iteration keeps wait<1> right
        tc_cp_async_wait<1>();  // this thread's copies of job j (and of K, V) have landed
        __syncthreads();        // everyone's have, and job j's lse, delta are stashed
        const int q0 = (qt_first + j) * BQ;
        const att_bf16* Qs = sQ + buf * BQ * LD;
        const att_bf16* dOs = sdO + buf * BQ * LD;
        const float* Ls = sL + buf * BQ;
        const float* Ds = sD + buf * BQ;

        // S^T = K Q^T, dP^T = V dO^T: this warp's 16 keys x BQ queries
        float s[NQ][4], dp[NQ][4];
        att_tc_mma_abt2<LD, KS>(s, dp, sK + kw * 16 * LD, Qs, sV + kw * 16 * LD, dOs, lane);
        // P^T and dS^T (without the scale) in place; C element e of n-tile i is key
        // u_lo + 8 (e / 2), query q0 + 8 i + 2 t4 + e % 2
        const bool need_mask = (causal && q0 < k0 + BK - 1) || q0 + BQ > T || k0 + BK > T;  // uniform
        #pragma unroll
        for (int i = 0; i < NQ; i++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                const int col = i * 8 + 2 * t4 + (e & 1);
                float p = exp2f(s[i][e] * sc2 - Ls[col]);
                if (need_mask) {
                    const int t = q0 + col, u = u_lo + (e >> 1) * 8;
                    if (t >= T || u >= T || (causal && u > t)) p = 0.0f;
                }
                s[i][e] = p;
                dp[i][e] = p * (dp[i][e] - Ds[col]);
            }
        // dS^T to shared memory for dQ_kt, rounded as att_tc_mma_pb rounds it for dK (the
        // warps of the second column half hold the same values and skip the store)
        if (warp < KG) {
            #pragma unroll
            for (int i = 0; i < NQ; i++) {
                att_bf16* row = sdS + (kw * 16 + g) * LDS + i * 8 + 2 * t4;
                *(tc_u32*)row = tc_pack_bf16x2(dp[i][0], dp[i][1]);
                *(tc_u32*)(row + 8 * LDS) = tc_pack_bf16x2(dp[i][2], dp[i][3]);
            }
        }
        // dV += P^T dO, dK += dS^T Q: k = queries, n = head dim
        att_tc_mma_pb<LD>(acc_dv, s, dOs + col0, lane);
        att_tc_mma_pb<LD>(acc_dk, dp, Qs + col0, lane);
        __syncthreads();  // dS^T complete; buffer buf and its lse, delta read by every warp

        // dQ_kt = dS K (BQ x HDP, k = the BK keys): rows 16 mi .. 16 mi + 15, n8 tiles ng + NG i
        float acc_q[NDQ][4];
        att_tc_zero(acc_q);
        #pragma unroll
        for (int ks = 0; ks < BK / 16; ks++) {
            tc_u32 a[4];
            att_tc2_load_a_t<LDS>(a, sdS + ks * 16 * LDS + mi * 16, lane);
            #pragma unroll
            for (int i = 0; i < NDQ; i++) {
                const int nt = ng + NG * i;
                if (nt < NT8) {  // uniform over the warp
                    tc_u32 bf[2];
                    tc_ldmatrix_x2_trans(bf, sK + (ks * 16 + (lane & 15)) * LD + nt * 8);
                    tc_mma_bf16_16816(acc_q[i], a, bf);
                }
            }
        }
        #pragma unroll
        for (int half = 0; half < 2; half++) {
            const int t = q0 + mi * 16 + g + half * 8;
            if (t >= T) continue;
            float* wrow = Ws + (((size_t)b * T + t) * H + h) * hd + 2 * t4;
            #pragma unroll
            for (int i = 0; i < NDQ; i++) {
                const int nt = ng + NG * i;
                if (nt < NT8 && nt * 8 < hd) *(float2*)(wrow + nt * 8) = make_float2(acc_q[i][2 * half], acc_q[i][2 * half + 1]);
            }
        }
        // job j + 1's lse, delta into buffer buf ^ 1, last read in iteration j - 1
        if (j + 1 < n_jobs) stash(j + 1);
    }

    if (group == 1) {  // the head's own dK, dV (no partials: G = 1 asks for no workspace of them)
        att_tc_store_c<false>(dk, acc_dk, scale, b, u_lo, T, KV, kvh, t4, hd, col0);
        att_tc_store_c<false>(dv, acc_dv, 1.0f, b, u_lo, T, KV, kvh, t4, hd, col0);
    } else {  // head h % G's partials, unscaled: attention_tc2_dkv_reduce_kernel sums the G in order
        const size_t nkv = (size_t)B * T * KV * hd;
        att_tc2_store_f32(P + (size_t)(h % group) * nkv, acc_dk, b, u_lo, T, KV, kvh, t4, hd, col0);
        att_tc2_store_f32(P + (size_t)(group + h % group) * nkv, acc_dv, b, u_lo, T, KV, kvh, t4, hd, col0);
    }
}

// one kernel per compiled width (att_tc_hdp), so that the fragment arrays have compile-time
// sizes (and the emulator's kernel table names each without template arguments)
#define ATT_TC2_BWD_ARGS                                                                                            \
    att_bf16 *dk, att_bf16 *dv, float *W, float *P, const att_bf16 *dout, const att_bf16 *q, const att_bf16 *k,              \
        const att_bf16 *v, const float *lse, const float *delta, int T, int H, int KV, int hd, float scale,        \
        bool causal, int c0

__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd32_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem32[];
    att_tc2_bwd<32>(att_tc2_smem32, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd48_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem48[];
    att_tc2_bwd<48>(att_tc2_smem48, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd64_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem64[];
    att_tc2_bwd<64>(att_tc2_smem64, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd80_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem80[];
    att_tc2_bwd<80>(att_tc2_smem80, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd96_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem96[];
    att_tc2_bwd<96>(att_tc2_smem96, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd112_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem112[];
    att_tc2_bwd<112>(att_tc2_smem112, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd128_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem128[];
    att_tc2_bwd<128>(att_tc2_smem128, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd160_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem160[];
    att_tc2_bwd<160>(att_tc2_smem160, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd192_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem192[];
    att_tc2_bwd<192>(att_tc2_smem192, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd224_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem224[];
    att_tc2_bwd<224>(att_tc2_smem224, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}
__global__ void __launch_bounds__(ATT_TC2_THREADS) attention_tc2_bwd_hd256_kernel(ATT_TC2_BWD_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc2_smem256[];
    att_tc2_bwd<256>(att_tc2_smem256, dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal, c0);
}

// dq from the chunk's slots: 4 consecutive elements (one row: hd % 8 == 0) a thread; s = (first
// chunk ? 0 : A) + W[0] + W[1] + ... over the slots whose key tile the row sees, in that
// order; the last chunk writes dq = bf16(scale s), the others s back to A
__global__ void __launch_bounds__(ATT_TC2_REDUCE_THREADS)
    attention_tc2_dq_reduce_kernel(att_bf16* dq, float* A, const float* W, int B, int T, int H, int hd, int bk, int c0,
                                   int nc, bool causal, bool first, bool last, float scale) {
    const size_t n = (size_t)B * T * H * hd;
    const size_t i = ((size_t)blockIdx.x * ATT_TC2_REDUCE_THREADS + threadIdx.x) * 4;
    if (i >= n) return;
    const int t = (int)((i / ((size_t)H * hd)) % T);
    const int ns = causal ? min(nc, t / bk - c0 + 1) : nc;  // causal: key tiles kt with kt bk <= t
    if (!last && ns <= 0) return;                            // A stays as it is
    float4 s = first ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : *(const float4*)(A + i);
    for (int j = 0; j < ns; j++) {
        const float4 w = *(const float4*)(W + (size_t)j * n + i);
        s.x += w.x;
        s.y += w.y;
        s.z += w.z;
        s.w += w.w;
    }
    if (last) {
        *(__nv_bfloat162*)(dq + i) = __floats2bfloat162_rn(s.x * scale, s.y * scale);
        *(__nv_bfloat162*)(dq + i + 2) = __floats2bfloat162_rn(s.z * scale, s.w * scale);
    } else {
        *(float4*)(A + i) = s;
    }
}

// dk, dv from the G = H / KV heads' partials (G > 1): 4 consecutive elements a thread, the first
// B T KV hd / 4 threads dk's, the rest dv's; s = P[0] + P[1] + ... + P[G - 1] in that order,
// dk = bf16(scale s), dv = bf16(s)
__global__ void __launch_bounds__(ATT_TC2_REDUCE_THREADS)
    attention_tc2_dkv_reduce_kernel(att_bf16* dk, att_bf16* dv, const float* P, size_t nkv, int group, float scale) {
    size_t i = ((size_t)blockIdx.x * ATT_TC2_REDUCE_THREADS + threadIdx.x) * 4;
    if (i >= 2 * nkv) return;
    const bool is_v = i >= nkv;
    if (is_v) i -= nkv;
    const float* p = P + (is_v ? (size_t)group * nkv : 0) + i;
    float4 s = *(const float4*)p;
    for (int g = 1; g < group; g++) {
        const float4 w = *(const float4*)(p + (size_t)g * nkv);
        s.x += w.x;
        s.y += w.y;
        s.z += w.z;
        s.w += w.w;
    }
    const float mul = is_v ? 1.0f : scale;
    att_bf16* x = (is_v ? dv : dk) + i;
    *(__nv_bfloat162*)x = __floats2bfloat162_rn(s.x * mul, s.y * mul);
    *(__nv_bfloat162*)(x + 2) = __floats2bfloat162_rn(s.z * mul, s.w * mul);
}

// the fill kernel of compiled width hdp on one chunk (grid (H, B, key tiles of the chunk))
static inline void att_tc2_launch_fill(int hdp, dim3 grid, att_bf16* dk, att_bf16* dv, float* W, float* P,
                                       const att_bf16* dout,
                                       const att_bf16* q, const att_bf16* k, const att_bf16* v, const float* lse,
                                       const float* delta, int T, int H, int KV, int hd, float scale, bool causal,
                                       int c0, stream_t s, const char* who) {
    const int nth = ATT_TC2_THREADS;
    switch (hdp) {
    case 32: {
        const size_t sm = att_tc2_smem<32>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd32_kernel, sm, who);
        attention_tc2_bwd_hd32_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 48: {
        const size_t sm = att_tc2_smem<48>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd48_kernel, sm, who);
        attention_tc2_bwd_hd48_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 64: {
        const size_t sm = att_tc2_smem<64>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd64_kernel, sm, who);
        attention_tc2_bwd_hd64_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 80: {
        const size_t sm = att_tc2_smem<80>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd80_kernel, sm, who);
        attention_tc2_bwd_hd80_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 96: {
        const size_t sm = att_tc2_smem<96>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd96_kernel, sm, who);
        attention_tc2_bwd_hd96_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 112: {
        const size_t sm = att_tc2_smem<112>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd112_kernel, sm, who);
        attention_tc2_bwd_hd112_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 128: {
        const size_t sm = att_tc2_smem<128>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd128_kernel, sm, who);
        attention_tc2_bwd_hd128_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 160: {
        const size_t sm = att_tc2_smem<160>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd160_kernel, sm, who);
        attention_tc2_bwd_hd160_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 192: {
        const size_t sm = att_tc2_smem<192>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd192_kernel, sm, who);
        attention_tc2_bwd_hd192_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 224: {
        const size_t sm = att_tc2_smem<224>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd224_kernel, sm, who);
        attention_tc2_bwd_hd224_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    case 256: {
        const size_t sm = att_tc2_smem<256>();
        att_prepare_smem((const void*)attention_tc2_bwd_hd256_kernel, sm, who);
        attention_tc2_bwd_hd256_kernel<<<grid, nth, sm, s>>>(dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale,
                                                          causal, c0);
        break;
    }
    default: FAIL("%s: head dim %d: no compiled width %d", who, hd, hdp);
    }
    cudaCheck(cudaGetLastError());
}

#endif  // !ENABLE_FP32

// ---------------------------------------------------------------------------------
// host side

static inline void att_tc2_launch_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                           const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                           float* workspace, int B, int T, int H, int KV, int hd, bool causal,
                                           int chunk, stream_t s, const char* who) {
    att_check_args(who, B, T, H, KV, hd);
    // cp.async and the delta kernel read 16 bytes at a time (dout, q, k, v, out); dq, dk,
    // dv are written 4 bytes at a time, and asked for 16 like every tensor here
    const void* ptrs[8] = {dout, q, k, v, out, dq, dk, dv};
    att_tc_check(who, hd, ptrs, 8);
#if defined(ENABLE_FP32)
    (void)lse; (void)workspace; (void)causal; (void)s;
#else
    if (B == 0 || T == 0) return;
    if (!workspace)
        FAIL("%s: no workspace (attention_tc2_workspace_floats(B, T, H, KV, hd, causal) floats, planned by the caller)",
             who);
    if ((uintptr_t)workspace % 16 != 0)
        FAIL("%s: workspace at %p is not 16-byte aligned (the reduce reads it 16 bytes at a time)", who, (void*)workspace);
    const float scale = 1.0f / sqrtf((float)hd);
    const int hdp = att_tc_hdp(hd), bk = att_tc2_bk(hdp), n_kt = (T + bk - 1) / bk;
    // chunk > 0: that many key tiles a chunk (the harness's checks that the result does not
    // depend on it; the workspace is then att_tc2_workspace_floats_chunked's), else the plan's
    // rule, lowered to fill the device's waves
    const int c = chunk > 0 ? (chunk < n_kt ? chunk : n_kt)
                            : att_tc2_chunk_for_waves(B, H, n_kt, att_tc2_chunk(B, H, n_kt), device_sm_count()),
              n_ch = (n_kt + c - 1) / c;
    const int group = H / KV;
    const size_t n = (size_t)B * T * H * hd, nkv = (size_t)B * T * KV * hd;
    // the layout attention_tc2_workspace_floats counts: the slots, A (more than one chunk), the
    // dK and dV partials (G > 1), delta
    float* W = workspace;
    float* A = W + (size_t)c * n;
    float* P = A + (n_ch > 1 ? n : 0);
    float* delta = P + (group > 1 ? 2 * n : 0);
    const size_t rows_per_block = att_tc_delta_rows_per_block(hd);
    attention_tc_delta_kernel<<<(unsigned)ceil_div((size_t)B * T * H, rows_per_block), ATT_TC_DELTA_THREADS, 0, s>>>(
        delta, dout, out, B, T, H, hd);
    cudaCheck(cudaGetLastError());
    const unsigned reduce_blocks = (unsigned)ceil_div(n / 4, (size_t)ATT_TC2_REDUCE_THREADS);
    for (int ch = 0; ch < n_ch; ch++) {
        const int c0 = ch * c, nc = n_kt - c0 < c ? n_kt - c0 : c;
        att_tc2_launch_fill(hdp, dim3(H, B, nc), dk, dv, W, P, dout, q, k, v, lse, delta, T, H, KV, hd, scale, causal,
                            c0, s, who);
        attention_tc2_dq_reduce_kernel<<<reduce_blocks, ATT_TC2_REDUCE_THREADS, 0, s>>>(
            dq, A, W, B, T, H, hd, bk, c0, nc, causal, ch == 0, ch == n_ch - 1, scale);
        cudaCheck(cudaGetLastError());
    }
    if (group > 1) {
        attention_tc2_dkv_reduce_kernel<<<(unsigned)ceil_div(2 * nkv / 4, (size_t)ATT_TC2_REDUCE_THREADS),
                                          ATT_TC2_REDUCE_THREADS, 0, s>>>(dk, dv, P, nkv, group, scale);
        cudaCheck(cudaGetLastError());
    }
#endif
}

// causal (Llama). dq, dk, dv and the workspace (attention_tc2_workspace_floats(B, T, H, KV, hd,
// true) floats, 16-byte aligned) are overwritten.
static inline void attention_tc2_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                          const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                          float* workspace, int B, int T, int H, int KV, int hd, stream_t s) {
    att_tc2_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, workspace, B, T, H, KV, hd, true, 0, s,
                            "attention_tc2_backward");
}
// non-causal (the video DiT); workspace: attention_tc2_workspace_floats(B, T, H, KV, hd, false)
static inline void attention_tc2_full_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                               const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                               float* workspace, int B, int T, int H, int KV, int hd, stream_t s) {
    att_tc2_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, workspace, B, T, H, KV, hd, false, 0, s,
                            "attention_tc2_full_backward");
}
