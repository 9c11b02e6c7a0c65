/*
Flash-attention BACKWARD on tensor cores (FlashAttention-2 style): bf16 operands, fp32
accumulation, mma.sync m16n8k16 and ldmatrix through the wrappers of llmc/kernels/tensorcore.cuh.
The forward is llmc/kernels/attention_tc.cuh, whose tile and fragment helpers (att_tc_load_rows,
att_tc_load_a / _b_nk / _b_kn, att_tc_mma_pb) and checks (att_tc_check) this file uses.

Contract: that of attention_backward / attention_full_backward (llmc/kernels/attention.cuh, CPU
twin llmc/kernels/cpu/attention.h): q, out, dout, dq [B, T, H, hd]; k, v, dk, dv [B, T, KV, hd];
lse [B, H, T] fp32 in natural log (either forward's lse works); scale 1/sqrt(hd); GQA: kv
head j serves q heads j*H/KV .. (j+1)*H/KV - 1; dq, dk, dv are overwritten. One more
argument: `delta`, a scratch buffer of attention_tc_delta_floats(B, H, T) floats that the
caller provides (planned memory: nothing is allocated here), overwritten. bf16 builds
only, every head dim that is a multiple of 8 from 32 to 256 (attention_tc_supported_hd),
each on the kernels of its compiled width HDP (att_tc_hdp; the forward's file says how
the padding up to HDP and the bank-conflict-free row stride HDP + 8 work).

Three kernels, no atomics, so every result is bitwise the same run to run:
  attention_tc_delta_kernel: delta[b, h, t] = sum_d dO * O in fp32, once (the fp32 kernels
    of attention.cuh recompute it in every (key tile, query tile) pair).
  attention_tc_dkdv_hd{HDP}_kernel: one CTA per (64-key tile, kv head, batch), 4 warps,
    warp w owns keys 16w..16w+15 of the tile (above HDP 128, the second configuration:
    32-key tiles, warps w and w + 2 own the same 16 keys and half of dK's and dV's
    columns each, both computing the same S^T and dP^T: see AttTcDkdv). K and V stay in shared memory; the CTA
    loops over the q heads of the group (outer) and the query tiles at or after the key
    tile (causal; full mode: all), in that fixed order, with cp.async double buffering
    of the Q / dO tiles. Per query tile, everything transposed (rows = keys) so that no
    intermediate goes through shared memory:
      S^T = K Q^T and dP^T = V dO^T (mma, fp32 in registers, C layout);
      P^T = exp2(S^T scale log2e - lse log2e), dS^T = P^T (dP^T - delta) (fp32);
      dV += P^T dO and dK += dS^T Q, where P^T and dS^T go from the C layout of two n8
      tiles straight into the A layout of one k16 slice (rounded to bf16 there, as
      FlashAttention-2 does), and dO, Q are B operands read with ldmatrix .trans.
    dK is multiplied by the scale once, at the end; dK and dV stay in fp32 registers
    until then.
  attention_tc_dq_hd{HDP}_kernel: one CTA per (64-row query tile, head, batch), 4 warps
    of 16 rows; loops over key tiles (64 keys; 32 above HDP 128, 16 above 192) 0..diagonal (full mode: all) with cp.async double
    buffering of K / V: S = Q K^T, dP = dO V^T, dS = P (dP - delta), dQ += dS K (K read
    with ldmatrix .trans), scale at the end.
Masks: only tiles that need one pay for it: in causal mode the tiles that cross the
diagonal, and the last (ragged) tiles when T is not a multiple of the tile: keys u > t
and rows or keys >= T get P = 0. Loads past T are zero-filled by cp.async (no read).

Shared memory: bf16 tiles with rows of hd values, zeros up to HDP and a 16-byte pad (row
stride HDP + 8 elements, LD / 8 odd): the 8 row addresses of one 8x8 ldmatrix matrix are
then 16 bytes apart modulo 128 bytes, so they fall in 8 distinct 16-byte bank groups: no
bank conflicts, plain or .trans, with no swizzle to get wrong (the emulator counts them at
every compiled width).

Register budget (fp32 accumulators per thread, 128 threads): dK/dV kernel hd 64: dK, dV
2 x 32, S^T, dP^T 2 x 32 (64-row query tiles); hd 128: dK, dV 2 x 64 and S^T, dP^T
2 x 16 (32-row query tiles, to stay clear of spills); dQ kernel: dQ hd/2, S, dP 2 x 32.
ptxas (CUDA 13, sm_90, -O3) reports no spills anywhere; registers by HDP, dK/dV / dQ:
32: 149 / 128, 48: 168 / 126, 64: 177 / 164, 80: 168 / 166, 96: 168 / 168, 112: 224 / 162,
128: 234 / 168, 160: 172 / 166, 192: 168 / 170, 224: 224 / 168, 256: 240 / 229; delta 23.
At 240, two CTAs still fit an SM. With RoPE fused (hd 64 and 128 only): 190 / 242 for
dK/dV, 164 / 166 for dQ.

RoPE fused (attention_tc_backward_rope, attention_tc_full_backward_rope): q and k come
unrotated; both kernels rotate the Q and K tiles they load as the forward does
(att_tc_rope_rows, each thread its own chunks, before the barrier that publishes the
tile), compute dQ and dK with respect to the rotated q and k as above, and apply the
inverse rotation (rope_backward's formula) in the registers of the final store: the pair
(2i, 2i+1) of a C-layout row sits in one lane (columns 8 n + 2 t4, + 1), so no shuffle.
The stored values are first rounded to bf16, as attention_tc_backward's output is before
rope_backward reads it, so that the result is that composition's, bit for bit (one
rounding more than needed, kept for that equality). This replaces the two rope_backward
passes over dq and dk (read and written once each): ~84 MB per layer at llama3-1B, B 4,
T 2048, half of the ~0.9 ms per step PREDICTED in llmc/kernels/attention_tc.cuh.

Ran on an H200 (docs/results/gpu_h200_2026-11-26.md): the unfused kernels passed test_llama
and test_dit at head dims 64 and 128 and ran at 106 TFLOP/s in a llama3-1B step (127 in
the dev/cuda ladder); the fused-rope variants (off in every build) ran there only in the
ladder, as version 5, slower than the unfused pair (llmc/kernels/attention_select.h). The
host emulator (dev/emu, the tensor-core model of dev/emu/include/tensorcore_emu.h) checks
every variant against the CPU twin: attention_tc_backward[...] and
attention_tc_full_backward[...] in dev/emu/harness.cpp.
*/
#pragma once
#include "../core/common.h"
#include "attention_tc.cuh"  // the shared helpers, att_tc_check; attention.cuh's att_check_args, att_prepare_smem

#define ATT_TC_BK 64               // keys per tile (both kernels)
#define ATT_TC_BQ_DQ 64            // query rows per tile of the dQ kernel
#define ATT_TC_BWD_THREADS 128     // 4 warps: 16 keys (dK/dV) or 16 query rows (dQ) each
#define ATT_TC_DELTA_THREADS 256   // the delta kernel

#ifndef ENABLE_FP32  // bf16 builds only: in an ENABLE_FP32 build the launchers FAIL saying so

// the dK/dV kernel's tiles. A warp owns 16 keys and HDP / CS columns of dK and dV (2 HDP /
// CS fp32 accumulators a thread). Up to HDP 128, CS = 1: 4 warps own the 64 keys of a tile.
// Above (the second configuration), CS = 2: 32-key tiles, warps 0-1 and 2-3 own the same
// keys and split the columns; both compute the same S^T and dP^T (their sums in the same
// order: the same bits), 1.5x the tensor work of the split products, which keeps P^T and
// dS^T in registers. BQ: query rows per tile (see the register budget above).
template <int HDP> struct AttTcDkdv {
    static constexpr int CS = HDP <= 128 ? 1 : 2;
    static constexpr int KG = 4 / CS;  // warps along the keys
    static constexpr int BK = 16 * KG;
    static constexpr int BQ = HDP <= 64 ? 64 : 32;
};
// the dQ kernel's tiles: 64 query rows (4 warps of 16); key tiles of 64 up to HDP 128, then
// smaller so that two CTAs an SM keep their shared memory (Q, dO and two K/V buffers)
template <int HDP> struct AttTcDq {
    static constexpr int BQ = ATT_TC_BQ_DQ;
    static constexpr int BK = HDP <= 128 ? ATT_TC_BK : (HDP <= 192 ? 32 : 16);
};

// c1 = A1 B1^T and c2 = A2 B2^T for one warp, both products in one pass over the KS k16
// steps (S and dP in both kernels): A1, A2 are 16 x 16 KS, row-major at a1, a2; B1, B2
// are 8 N x 16 KS, stored [n][k] at b1, b2; row stride LD; c1, c2 (fp32, C layout of N
// n8 tiles) are overwritten
template <int LD, int KS, int N>
static __device__ __forceinline__ void att_tc_mma_abt2(float (&c1)[N][4], float (&c2)[N][4], const att_bf16* a1,
                                                       const att_bf16* b1, const att_bf16* a2, const att_bf16* b2,
                                                       int lane) {
    att_tc_zero(c1);
    att_tc_zero(c2);
    #pragma unroll
    for (int ks = 0; ks < KS; ks++) {
        tc_u32 f1[4], f2[4];
        att_tc_load_a<LD>(f1, a1 + ks * 16, lane);
        att_tc_load_a<LD>(f2, a2 + ks * 16, lane);
        #pragma unroll
        for (int np = 0; np < N / 2; np++) {
            tc_u32 g1[4], g2[4];
            att_tc_load_b_nk<LD>(g1, b1 + np * 16 * LD + ks * 16, lane);
            att_tc_load_b_nk<LD>(g2, b2 + np * 16 * LD + ks * 16, lane);
            tc_mma_bf16_16816(c1[2 * np], f1, g1);
            tc_mma_bf16_16816(c1[2 * np + 1], f1, g1 + 2);
            tc_mma_bf16_16816(c2[2 * np], f2, g2);
            tc_mma_bf16_16816(c2[2 * np + 1], f2, g2 + 2);
        }
    }
}

// a warp's 16 x 8 ND result (C layout, this lane: rows r_lo and r_lo + 8, columns col0 + 8 i
// + 2 t4 and + 1 of n-tile i) times mul, rounded to bf16, into the rows r of head h of x
// ([B, T, nh, hd]); rows >= T and columns >= hd (the zero padding up to HDP) are not
// written. ROPE: then rotated back by rope_backward's formula (row r = position r, the
// lane's pair col0 / 2 + 4 i + t4) and rounded again.
template <bool ROPE, int ND>
static __device__ __forceinline__ void att_tc_store_c(att_bf16* x, const float (&acc)[ND][4], float mul, int b,
                                                      int r_lo, int T, int nh, int h, int t4, int hd, int col0,
                                                      const float* rope_cos = nullptr, const float* rope_sin = nullptr) {
    #pragma unroll
    for (int half = 0; half < 2; half++) {
        const int r = r_lo + half * 8;
        if (r >= T) continue;
        const size_t base = (((size_t)b * T + r) * nh + h) * hd + col0 + 2 * t4;
        #pragma unroll
        for (int i = 0; i < ND; i++) {
            if (col0 + 8 * i >= hd) break;
            __nv_bfloat162 y = __floats2bfloat162_rn(acc[i][2 * half] * mul, acc[i][2 * half + 1] * mul);
            if (ROPE) {
                const size_t ti = (size_t)r * (hd / 2) + col0 / 2 + 4 * i + t4;
                float y0, y1;
                att_tc_rope_pair(y0, y1, __bfloat162float(y.x), __bfloat162float(y.y), rope_cos[ti], rope_sin[ti], -1.0f);
                y = __floats2bfloat162_rn(y0, y1);
            }
            *(__nv_bfloat162*)(x + base + i * 8) = y;
        }
    }
}

// ---------------------------------------------------------------------------------
// delta = rowsum(dO * O), fp32. hd / 8 = cpr chunks of 16 bytes of dO and O a row. When
// cpr is a power of two (hd 32, 64, 128, 256), cpr lanes take a (b, t, h) row, so that a
// warp covers 32 / cpr whole rows and every lane loads; otherwise a warp takes one row and
// lanes >= cpr add nothing. The lanes of a row then add in a fixed tree.
__global__ void __launch_bounds__(ATT_TC_DELTA_THREADS) attention_tc_delta_kernel(float* delta, const att_bf16* dout,
                                                                                  const att_bf16* out, int B, int T,
                                                                                  int H, int hd) {
    const int cpr = hd / 8, lpr = (cpr & (cpr - 1)) == 0 ? cpr : 32, lane = threadIdx.x & 31;  // lpr: lanes a row
    const size_t warp_id = (size_t)blockIdx.x * (ATT_TC_DELTA_THREADS / 32) + (threadIdx.x >> 5);
    const size_t row = warp_id * (32 / lpr) + lane / lpr, n_rows = (size_t)B * T * H;
    float s = 0.0f;
    if (row < n_rows && lane % lpr < cpr) {
        const size_t off = row * hd + (lane % lpr) * 8;
        const uint4 va = *(const uint4*)(dout + off), vo = *(const uint4*)(out + off);
        const unsigned wa[4] = {va.x, va.y, va.z, va.w}, wo[4] = {vo.x, vo.y, vo.z, vo.w};
        #pragma unroll
        for (int i = 0; i < 4; i++) {  // bf16 -> fp32 is exact: the bf16 bits are the high half of the float
            s += __uint_as_float(wa[i] << 16) * __uint_as_float(wo[i] << 16);
            s += __uint_as_float(wa[i] & 0xffff0000u) * __uint_as_float(wo[i] & 0xffff0000u);
        }
    }
    for (int o = lpr / 2; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffffu, s, o);  // stays inside the row's lanes
    if (row < n_rows && lane % lpr == 0) {
        const int h = (int)(row % H), t = (int)((row / H) % T), b = (int)(row / ((size_t)H * T));
        delta[((size_t)b * H + h) * T + t] = s;
    }
}
// rows a delta block covers
static inline size_t att_tc_delta_rows_per_block(int hd) {
    const int cpr = hd / 8, lpr = (cpr & (cpr - 1)) == 0 ? cpr : 32;
    return (size_t)(ATT_TC_DELTA_THREADS / 32) * (32 / lpr);
}

// ---------------------------------------------------------------------------------
// dK, dV: CTA per (key tile, kv head, batch)
template <int HDP, bool ROPE>
static __device__ __forceinline__ void att_tc_dkdv(unsigned char* smem, att_bf16* dk, att_bf16* dv,
                                                   const att_bf16* dout, const att_bf16* q, const att_bf16* k,
                                                   const att_bf16* v, const float* lse, const float* delta,
                                                   const float* rope_cos, const float* rope_sin, int T, int H, int KV,
                                                   int hd, float scale, bool causal) {
    constexpr int BK = AttTcDkdv<HDP>::BK, BQ = AttTcDkdv<HDP>::BQ, KG = AttTcDkdv<HDP>::KG;
    constexpr int LD = AttTcRow<HDP>::LD, NTH = ATT_TC_BWD_THREADS;
    constexpr int KS = HDP / 16;                      // k16 steps over the head dim
    constexpr int NQ = BQ / 8;                        // n8 tiles of queries in S^T, dP^T
    constexpr int ND = HDP / 8 / AttTcDkdv<HDP>::CS;  // n8 tiles of the head dim in this warp's dK, dV
    static_assert(ND % 2 == 0, "att_tc_mma_pb takes n8 tiles in pairs");
    att_bf16* sK = (att_bf16*)smem;           // [BK][LD]
    att_bf16* sV = sK + BK * LD;              // [BK][LD]
    att_bf16* sQ = sV + BK * LD;              // [2][BQ][LD]
    att_bf16* sdO = sQ + 2 * BQ * LD;         // [2][BQ][LD]
    float* sL = (float*)(sdO + 2 * BQ * LD);  // [2][BQ]: lse * log2e
    float* sD = sL + 2 * BQ;                  // [2][BQ]: delta

    const int kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int group = H / KV, k0 = kt * BK;
    const int n_qt = (T + BQ - 1) / BQ;
    const int qt_first = causal ? k0 / BQ : 0;  // the first query tile that sees a key of this tile
    const int nq = n_qt - qt_first;             // >= 1: k0 < T
    const int n_jobs = group * nq;              // (head, query tile), heads outer
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const int kw = warp % KG, col0 = (warp / KG) * ND * 8;  // this warp's 16 keys and first column
    const float sc2 = scale * ATT_TC_LOG2E;

    // job j -> Q, dO into buffer j & 1, lse, delta next to them (plain loads: lse rows of
    // T floats are not 16-byte aligned in general)
    auto issue = [&](int j) {
        const int h = kvh * group + j / nq, q0 = (qt_first + j % nq) * BQ, buf = j & 1;
        att_tc_load_rows<HDP, NTH>(sQ + buf * BQ * LD, q, b, q0, BQ, T, H, h, hd);
        att_tc_load_rows<HDP, NTH>(sdO + buf * BQ * LD, dout, b, q0, BQ, T, H, h, hd);
        for (int r = threadIdx.x; r < BQ; r += NTH) {
            const int t = q0 + r;
            const size_t li = ((size_t)b * H + h) * T + t;
            sL[buf * BQ + r] = t < T ? lse[li] * ATT_TC_LOG2E : 0.0f;
            sD[buf * BQ + r] = t < T ? delta[li] : 0.0f;
        }
    };
    att_tc_load_rows<HDP, NTH>(sK, k, b, k0, BK, T, KV, kvh, hd);
    att_tc_load_rows<HDP, NTH>(sV, v, b, k0, BK, T, KV, kvh, hd);
    issue(0);
    tc_cp_async_commit();

    float acc_dk[ND][4], acc_dv[ND][4];
    att_tc_zero(acc_dk);
    att_tc_zero(acc_dv);
    const int u_lo = k0 + kw * 16 + g;  // this lane's keys: u_lo (C rows g) and u_lo + 8

    for (int j = 0; j < n_jobs; j++) {
        const int buf = j & 1;
        // buffer buf ^ 1 was last read in iteration j - 1, which ended with a barrier
        if (j + 1 < n_jobs) issue(j + 1);
        tc_cp_async_commit();  // possibly empty: one group per iteration keeps wait<1> right
        tc_cp_async_wait<1>();  // this thread's copies of job j (and of K, V) have landed
        const int q0 = (qt_first + j % nq) * BQ;
        if (ROPE) {  // this thread's own chunks; buffer buf was last read at j - 2, before a barrier
            if (j == 0) att_tc_rope_rows<HDP, NTH>(sK, k0, BK, T, rope_cos, rope_sin);
            att_tc_rope_rows<HDP, NTH>(sQ + buf * BQ * LD, q0, BQ, T, rope_cos, rope_sin);
        }
        __syncthreads();        // everyone's have
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
        // dV += P^T dO, dK += dS^T Q: k = queries, n = head dim
        att_tc_mma_pb<LD>(acc_dv, s, dOs + col0, lane);
        att_tc_mma_pb<LD>(acc_dk, dp, Qs + col0, lane);
        __syncthreads();  // buffer buf is refilled by the next iteration's issue
    }

    att_tc_store_c<ROPE>(dk, acc_dk, scale, b, u_lo, T, KV, kvh, t4, hd, col0, rope_cos, rope_sin);
    att_tc_store_c<false>(dv, acc_dv, 1.0f, b, u_lo, T, KV, kvh, t4, hd, col0);
}

// ---------------------------------------------------------------------------------
// dQ: CTA per (query tile, head, batch)
template <int HDP, bool ROPE>
static __device__ __forceinline__ void att_tc_dq(unsigned char* smem, att_bf16* dq, const att_bf16* dout,
                                                 const att_bf16* q, const att_bf16* k, const att_bf16* v,
                                                 const float* lse, const float* delta, const float* rope_cos,
                                                 const float* rope_sin, int T, int H, int KV, int hd, float scale,
                                                 bool causal) {
    constexpr int BK = AttTcDq<HDP>::BK, BQ = AttTcDq<HDP>::BQ, LD = AttTcRow<HDP>::LD, NTH = ATT_TC_BWD_THREADS;
    constexpr int KS = HDP / 16, NK = BK / 8, ND = HDP / 8;
    static_assert(BQ % BK == 0, "a query tile ends on a key tile boundary");
    att_bf16* sQ = (att_bf16*)smem;  // [BQ][LD]
    att_bf16* sdO = sQ + BQ * LD;    // [BQ][LD]
    att_bf16* sK = sdO + BQ * LD;    // [2][BK][LD]
    att_bf16* sV = sK + 2 * BK * LD; // [2][BK][LD]

    const int n_t = gridDim.x;
    const int qt = causal ? n_t - 1 - blockIdx.x : blockIdx.x;  // causal: longest tiles first
    // causal: up to the key tile of the query tile's last row (BK == BQ: the diagonal tile qt)
    const int kt_last = causal ? min((T + BK - 1) / BK, (qt + 1) * (BQ / BK)) - 1 : (T + BK - 1) / BK - 1;
    const int h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KV), q0 = qt * BQ;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const float sc2 = scale * ATT_TC_LOG2E;

    att_tc_load_rows<HDP, NTH>(sQ, q, b, q0, BQ, T, H, h, hd);
    att_tc_load_rows<HDP, NTH>(sdO, dout, b, q0, BQ, T, H, h, hd);
    att_tc_load_rows<HDP, NTH>(sK, k, b, 0, BK, T, KV, kvh, hd);
    att_tc_load_rows<HDP, NTH>(sV, v, b, 0, BK, T, KV, kvh, hd);
    tc_cp_async_commit();

    // this lane's rows: t_lo (C rows g) and t_lo + 8
    const int t_lo = q0 + warp * 16 + g;
    float row_l[2], row_d[2];
    #pragma unroll
    for (int hf = 0; hf < 2; hf++) {
        const int t = t_lo + hf * 8;
        const size_t li = ((size_t)b * H + h) * T + t;
        row_l[hf] = t < T ? lse[li] * ATT_TC_LOG2E : 0.0f;
        row_d[hf] = t < T ? delta[li] : 0.0f;
    }
    float acc[ND][4];
    att_tc_zero(acc);

    for (int kt = 0; kt <= kt_last; kt++) {
        const int buf = kt & 1, k0 = kt * BK;
        if (kt < kt_last) {  // buffer buf ^ 1 was last read in iteration kt - 1, which ended with a barrier
            att_tc_load_rows<HDP, NTH>(sK + (buf ^ 1) * BK * LD, k, b, k0 + BK, BK, T, KV, kvh, hd);
            att_tc_load_rows<HDP, NTH>(sV + (buf ^ 1) * BK * LD, v, b, k0 + BK, BK, T, KV, kvh, hd);
        }
        tc_cp_async_commit();
        tc_cp_async_wait<1>();
        if (ROPE) {  // this thread's own chunks; buffer buf was last read at kt - 2, before a barrier
            if (kt == 0) att_tc_rope_rows<HDP, NTH>(sQ, q0, BQ, T, rope_cos, rope_sin);
            att_tc_rope_rows<HDP, NTH>(sK + buf * BK * LD, k0, BK, T, rope_cos, rope_sin);
        }
        __syncthreads();
        const att_bf16* Ks = sK + buf * BK * LD;
        const att_bf16* Vs = sV + buf * BK * LD;

        // S = Q K^T, dP = dO V^T: this warp's 16 rows x BK keys
        float s[NK][4], dp[NK][4];
        att_tc_mma_abt2<LD, KS>(s, dp, sQ + warp * 16 * LD, Ks, sdO + warp * 16 * LD, Vs, lane);
        // dS (without the scale) in dp; C element e of n-tile i is row t_lo + 8 (e / 2),
        // key k0 + 8 i + 2 t4 + e % 2
        const bool need_mask = (causal && k0 + BK - 1 > q0) || k0 + BK > T || q0 + BQ > T;  // uniform
        #pragma unroll
        for (int i = 0; i < NK; i++)
            #pragma unroll
            for (int e = 0; e < 4; e++) {
                float p = exp2f(s[i][e] * sc2 - row_l[e >> 1]);
                if (need_mask) {
                    const int t = t_lo + (e >> 1) * 8, u = k0 + i * 8 + 2 * t4 + (e & 1);
                    if (t >= T || u >= T || (causal && u > t)) p = 0.0f;
                }
                dp[i][e] = p * (dp[i][e] - row_d[e >> 1]);
            }
        // dQ += dS K: k = keys, n = head dim
        att_tc_mma_pb<LD>(acc, dp, Ks, lane);
        __syncthreads();  // buffer buf is refilled by the next iteration
    }

    att_tc_store_c<ROPE>(dq, acc, scale, b, t_lo, T, H, h, t4, hd, 0, rope_cos, rope_sin);
}

// one kernel per compiled width (att_tc_hdp) and RoPE or not, so that the fragment arrays
// have compile-time sizes (and the emulator's kernel table names each without template
// arguments)
#define ATT_TC_BWD_ARGS_DKDV                                                                                        \
    att_bf16 *dk, att_bf16 *dv, const att_bf16 *dout, const att_bf16 *q, const att_bf16 *k, const att_bf16 *v,    \
        const float *lse, const float *delta, int T, int H, int KV, float scale, bool causal
#define ATT_TC_BWD_ARGS_DQ                                                                                          \
    att_bf16 *dq, const att_bf16 *dout, const att_bf16 *q, const att_bf16 *k, const att_bf16 *v, const float *lse, \
        const float *delta, int T, int H, int KV, float scale, bool causal
#define ATT_TC_ROPE_ARGS const float *rope_cos, const float *rope_sin

__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd32_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv32[];
    att_tc_dkdv<32, false>(att_tc_smem_dkdv32, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd32_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq32[];
    att_tc_dq<32, false>(att_tc_smem_dq32, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd48_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv48[];
    att_tc_dkdv<48, false>(att_tc_smem_dkdv48, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd48_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq48[];
    att_tc_dq<48, false>(att_tc_smem_dq48, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd64_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv64[];
    att_tc_dkdv<64, false>(att_tc_smem_dkdv64, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd64_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq64[];
    att_tc_dq<64, false>(att_tc_smem_dq64, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd80_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv80[];
    att_tc_dkdv<80, false>(att_tc_smem_dkdv80, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd80_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq80[];
    att_tc_dq<80, false>(att_tc_smem_dq80, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd96_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv96[];
    att_tc_dkdv<96, false>(att_tc_smem_dkdv96, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd96_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq96[];
    att_tc_dq<96, false>(att_tc_smem_dq96, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd112_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv112[];
    att_tc_dkdv<112, false>(att_tc_smem_dkdv112, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd112_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq112[];
    att_tc_dq<112, false>(att_tc_smem_dq112, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd128_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv128[];
    att_tc_dkdv<128, false>(att_tc_smem_dkdv128, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd128_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq128[];
    att_tc_dq<128, false>(att_tc_smem_dq128, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd160_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv160[];
    att_tc_dkdv<160, false>(att_tc_smem_dkdv160, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd160_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq160[];
    att_tc_dq<160, false>(att_tc_smem_dq160, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd192_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv192[];
    att_tc_dkdv<192, false>(att_tc_smem_dkdv192, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd192_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq192[];
    att_tc_dq<192, false>(att_tc_smem_dq192, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd224_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv224[];
    att_tc_dkdv<224, false>(att_tc_smem_dkdv224, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd224_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq224[];
    att_tc_dq<224, false>(att_tc_smem_dq224, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dkdv_hd256_kernel(ATT_TC_BWD_ARGS_DKDV, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv256[];
    att_tc_dkdv<256, false>(att_tc_smem_dkdv256, dk, dv, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale,
                           causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS) attention_tc_dq_hd256_kernel(ATT_TC_BWD_ARGS_DQ, int hd) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq256[];
    att_tc_dq<256, false>(att_tc_smem_dq256, dq, dout, q, k, v, lse, delta, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
// RoPE fused (hd 64 and 128): the same bodies with ROPE = true, the tables as two more arguments
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS)
    attention_tc_dkdv_rope_hd64_kernel(ATT_TC_BWD_ARGS_DKDV, ATT_TC_ROPE_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv64r[];
    att_tc_dkdv<64, true>(att_tc_smem_dkdv64r, dk, dv, dout, q, k, v, lse, delta, rope_cos, rope_sin, T, H, KV, 64, scale,
                          causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS)
    attention_tc_dq_rope_hd64_kernel(ATT_TC_BWD_ARGS_DQ, ATT_TC_ROPE_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq64r[];
    att_tc_dq<64, true>(att_tc_smem_dq64r, dq, dout, q, k, v, lse, delta, rope_cos, rope_sin, T, H, KV, 64, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS)
    attention_tc_dkdv_rope_hd128_kernel(ATT_TC_BWD_ARGS_DKDV, ATT_TC_ROPE_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dkdv128r[];
    att_tc_dkdv<128, true>(att_tc_smem_dkdv128r, dk, dv, dout, q, k, v, lse, delta, rope_cos, rope_sin, T, H, KV, 128, scale,
                          causal);
}
__global__ void __launch_bounds__(ATT_TC_BWD_THREADS)
    attention_tc_dq_rope_hd128_kernel(ATT_TC_BWD_ARGS_DQ, ATT_TC_ROPE_ARGS) {
    extern __shared__ __align__(128) unsigned char att_tc_smem_dq128r[];
    att_tc_dq<128, true>(att_tc_smem_dq128r, dq, dout, q, k, v, lse, delta, rope_cos, rope_sin, T, H, KV, 128, scale, causal);
}

// bytes of dynamic shared memory (the layouts at the top of att_tc_dkdv and att_tc_dq)
template <int HDP> static inline size_t att_tc_smem_dkdv() {
    constexpr int BQ = AttTcDkdv<HDP>::BQ;
    return (size_t)(2 * AttTcDkdv<HDP>::BK + 4 * BQ) * (HDP + 8) * sizeof(att_bf16) + 4 * BQ * sizeof(float);
}
template <int HDP> static inline size_t att_tc_smem_dq() {
    return (size_t)(2 * AttTcDq<HDP>::BQ + 4 * AttTcDq<HDP>::BK) * (HDP + 8) * sizeof(att_bf16);
}

#endif  // !ENABLE_FP32

// ---------------------------------------------------------------------------------
// host side

// the size of the `delta` scratch buffer the backward needs, in floats
static inline size_t attention_tc_delta_floats(int B, int H, int T) { return (size_t)B * H * T; }

// rope_cos, rope_sin NULL: q, k as given; else q, k are rotated in the tiles and dq, dk
// rotated back (RoPE fused)
static inline void att_tc_launch_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                          const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                          float* delta, const float* rope_cos, const float* rope_sin, int B, int T,
                                          int H, int KV, int hd, bool causal, stream_t s, const char* who) {
    att_check_args(who, B, T, H, KV, hd);
    // cp.async and the delta kernel read 16 bytes at a time (dout, q, k, v, out); dq, dk,
    // dv are written 4 bytes at a time, and asked for 16 like every tensor here
    const void* ptrs[8] = {dout, q, k, v, out, dq, dk, dv};
    att_tc_check(who, hd, ptrs, 8);
    att_tc_check_rope(who, rope_cos, rope_sin, hd);
#if defined(ENABLE_FP32)
    (void)lse; (void)delta; (void)causal; (void)s;
#else
    if (B == 0 || T == 0) return;
    if (!delta) FAIL("%s: no delta scratch (attention_tc_delta_floats(B, H, T) floats, planned by the caller)", who);
    const float scale = 1.0f / sqrtf((float)hd);
    const size_t rows_per_block = att_tc_delta_rows_per_block(hd);
    attention_tc_delta_kernel<<<(unsigned)ceil_div((size_t)B * T * H, rows_per_block), ATT_TC_DELTA_THREADS, 0, s>>>(
        delta, dout, out, B, T, H, hd);
    cudaCheck(cudaGetLastError());
    const int nth = ATT_TC_BWD_THREADS;
    const unsigned nqt = (unsigned)ceil_div((size_t)T, ATT_TC_BQ_DQ);
    if (rope_cos) {  // hd 64 or 128 (att_tc_check_rope)
        const dim3 g1((unsigned)ceil_div((size_t)T, ATT_TC_BK), KV, B), g2(nqt, H, B);
        if (hd == 64) {
            const size_t s1 = att_tc_smem_dkdv<64>(), s2 = att_tc_smem_dq<64>();
            att_prepare_smem((const void*)attention_tc_dkdv_rope_hd64_kernel, s1, who);
            att_prepare_smem((const void*)attention_tc_dq_rope_hd64_kernel, s2, who);
            attention_tc_dkdv_rope_hd64_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal,
                                                                   rope_cos, rope_sin);
            cudaCheck(cudaGetLastError());
            attention_tc_dq_rope_hd64_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal,
                                                                 rope_cos, rope_sin);
        } else {
            const size_t s1 = att_tc_smem_dkdv<128>(), s2 = att_tc_smem_dq<128>();
            att_prepare_smem((const void*)attention_tc_dkdv_rope_hd128_kernel, s1, who);
            att_prepare_smem((const void*)attention_tc_dq_rope_hd128_kernel, s2, who);
            attention_tc_dkdv_rope_hd128_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal,
                                                                    rope_cos, rope_sin);
            cudaCheck(cudaGetLastError());
            attention_tc_dq_rope_hd128_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal,
                                                                  rope_cos, rope_sin);
        }
        cudaCheck(cudaGetLastError());
        return;
    }
    switch (att_tc_hdp(hd)) {
    case 32: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<32>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<32>(), s2 = att_tc_smem_dq<32>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd32_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd32_kernel, s2, who);
        attention_tc_dkdv_hd32_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd32_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 48: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<48>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<48>(), s2 = att_tc_smem_dq<48>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd48_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd48_kernel, s2, who);
        attention_tc_dkdv_hd48_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd48_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 64: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<64>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<64>(), s2 = att_tc_smem_dq<64>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd64_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd64_kernel, s2, who);
        attention_tc_dkdv_hd64_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd64_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 80: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<80>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<80>(), s2 = att_tc_smem_dq<80>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd80_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd80_kernel, s2, who);
        attention_tc_dkdv_hd80_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd80_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 96: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<96>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<96>(), s2 = att_tc_smem_dq<96>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd96_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd96_kernel, s2, who);
        attention_tc_dkdv_hd96_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd96_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 112: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<112>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<112>(), s2 = att_tc_smem_dq<112>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd112_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd112_kernel, s2, who);
        attention_tc_dkdv_hd112_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd112_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 128: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<128>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<128>(), s2 = att_tc_smem_dq<128>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd128_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd128_kernel, s2, who);
        attention_tc_dkdv_hd128_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd128_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 160: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<160>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<160>(), s2 = att_tc_smem_dq<160>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd160_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd160_kernel, s2, who);
        attention_tc_dkdv_hd160_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd160_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 192: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<192>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<192>(), s2 = att_tc_smem_dq<192>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd192_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd192_kernel, s2, who);
        attention_tc_dkdv_hd192_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd192_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 224: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<224>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<224>(), s2 = att_tc_smem_dq<224>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd224_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd224_kernel, s2, who);
        attention_tc_dkdv_hd224_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd224_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    case 256: {
        const dim3 g1((unsigned)ceil_div((size_t)T, AttTcDkdv<256>::BK), KV, B), g2(nqt, H, B);
        const size_t s1 = att_tc_smem_dkdv<256>(), s2 = att_tc_smem_dq<256>();
        att_prepare_smem((const void*)attention_tc_dkdv_hd256_kernel, s1, who);
        att_prepare_smem((const void*)attention_tc_dq_hd256_kernel, s2, who);
        attention_tc_dkdv_hd256_kernel<<<g1, nth, s1, s>>>(dk, dv, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        cudaCheck(cudaGetLastError());
        attention_tc_dq_hd256_kernel<<<g2, nth, s2, s>>>(dq, dout, q, k, v, lse, delta, T, H, KV, scale, causal, hd);
        break;
    }
    default: FAIL("%s: head dim %d: no compiled width %d", who, hd, att_tc_hdp(hd));
    }
    cudaCheck(cudaGetLastError());
#endif
}

// causal (Llama). dq, dk, dv and delta (attention_tc_delta_floats(B, H, T) floats of
// scratch) are overwritten.
static inline void attention_tc_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                         const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                         float* delta, int B, int T, int H, int KV, int hd, stream_t s) {
    att_tc_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta, nullptr, nullptr, B, T, H, KV, hd, true, s,
                           "attention_tc_backward");
}
// non-causal (the video DiT)
static inline void attention_tc_full_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                              const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                              float* delta, int B, int T, int H, int KV, int hd, stream_t s) {
    att_tc_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta, nullptr, nullptr, B, T, H, KV, hd, false, s,
                           "attention_tc_full_backward");
}
// RoPE fused: q and k NOT rotated (as given to attention_tc_forward_rope); rope_cos,
// rope_sin the [>= T, hd/2] tables (16-byte aligned). dq, dk are the gradients with
// respect to the unrotated q, k: those of attention_tc_backward on the rotated q, k
// followed by rope_backward on dq and dk, bit for bit; dv as attention_tc_backward's.
static inline void attention_tc_backward_rope(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                              const floatX* k, const floatX* v, const floatX* out, const float* lse,
                                              float* delta, const float* rope_cos, const float* rope_sin, int B, int T,
                                              int H, int KV, int hd, stream_t s) {
    att_tc_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta, rope_cos, rope_sin, B, T, H, KV, hd, true, s,
                           "attention_tc_backward_rope");
}
static inline void attention_tc_full_backward_rope(floatX* dq, floatX* dk, floatX* dv, const floatX* dout,
                                                   const floatX* q, const floatX* k, const floatX* v, const floatX* out,
                                                   const float* lse, float* delta, const float* rope_cos,
                                                   const float* rope_sin, int B, int T, int H, int KV, int hd,
                                                   stream_t s) {
    att_tc_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, delta, rope_cos, rope_sin, B, T, H, KV, hd, false, s,
                           "attention_tc_full_backward_rope");
}
