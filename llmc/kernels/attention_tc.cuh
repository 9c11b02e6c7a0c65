/*
Flash attention on tensor cores (FlashAttention-2 style), forward: bf16 in, fp32
accumulate, every head dim that is a multiple of 8 from 32 to 256. Same launchers' signatures and semantics as
llmc/kernels/attention.cuh (q, out [B, T, H, hd]; k, v [B, T, KV, hd]; lse [B, H, T] fp32,
natural-log log-sum-exp; GQA: kv head j serves q heads j*H/KV .. (j+1)*H/KV - 1; scale
1/sqrt(hd)), so that either forward pairs with either backward:
  attention_tc_forward       causal (Llama)
  attention_tc_full_forward  non-causal (the video DiT)
CPU twin: llmc/kernels/cpu/attention.h (cpu::attention_forward / attention_full_forward), the
same as the fp32 kernels'. Which implementation a trainer runs is chosen in
llmc/kernels/attention_select.h (--attention auto|fp32|tc). bf16 builds only: in an ENABLE_FP32
build the kernels are not compiled and the launchers FAIL saying so.

Shape. One CTA of 4 warps per (64-row query tile, head, batch); warp w owns query rows
16w .. 16w+15 of the tile. Keys come in tiles of 64 (32 above HDP 128). Shared memory
(bf16): the Q tile and two buffers each of K and V ([BK][HDP + 8]), filled by cp.async (16 bytes a thread
and a copy): the Q tile and key tile 0 first, then at the top of each iteration the next
key tile into the other buffer, so that its load overlaps this tile's math (double
buffering, one __syncthreads per tile). Rows and keys past T are zero-filled by the
copies (src-size 0), never read from global memory.
Per key tile, in registers: S = Q K^T (mma.m16n8k16: Q as A fragments, loaded once by
ldmatrix x4 and kept for all tiles; K as B fragments by ldmatrix x4, since K is stored
[key][dim], which is B in the "col" layout); the mask, only on the tile that needs one
(the causal diagonal, and the last tile when T is not a multiple of 64): keys u > t and
u >= T get -inf; the online softmax on the accumulators (a lane holds rows g and g+8 of
its warp's 16: the row max and sum reduce over the 4 lanes of a quad, shfl_xor 1 and 2),
with exp2 and scale * log2(e) folded into one fma; P rounded to bf16 and fed straight
into the P V product (the C layout of two adjacent n8 tiles of S is the A layout of one
k16 slice of P: no shared memory); V as B fragments by ldmatrix x4.trans (V is stored
[key][dim], the transpose of the "col" layout B needs); O accumulated in fp32 registers.
Causal: a query tile visits key tiles 0 .. its own index (the diagonal) and no further;
query tiles are scheduled longest-first, as in the fp32 kernel.
The row sum l adds the fp32 probabilities while the P V product uses them rounded to
bf16 (as FlashAttention-2 does): out differs from the twin by up to about 2^-8 of
sum_j p_j |v_j| / l beyond the final rounding, the bound dev/emu/harness.cpp checks.
End: l is summed over the quad, out = O / l is written through the warp's own rows of
the Q buffer (no longer needed: Q lives in registers) so that the global stores are
16-byte and coalesced, and lse = m * scale + log(l) (m: the raw row max).

Head dims. A head dim runs on the kernel compiled for HDP = att_tc_hdp(hd): hd rounded up
to 16 (32 above 128), 11 kernels for the 29 head dims. Tile rows hold hd values and zeros
up to HDP (cp.async zero-fills them: src-size 0), so the k16 slices of S = Q K^T add
nothing for the padding and the padded columns of O are computed but never stored; the
tensor work is HDP / hd of the counted FLOPs (hd 72: 80 / 72 = 1.11). At 64 and 128, HDP =
hd and the kernels compute what they computed when they took only those two, bit for
bit (hd is now a runtime argument of the address arithmetic: 127 / 175 registers instead of
128 / 175). Above 128, the second configuration: O alone takes HDP / 2 registers a thread,
so Q's fragments are read from shared memory again for each key tile (ldmatrix; the sums in
the same order) and key tiles are 32, so that two CTAs still fit an SM's shared memory.
Bank conflicts: rows are padded to HDP + 8 bf16 (HDP*2 + 16 bytes, LD / 8 odd), so the 8
row addresses of one 8x8 ldmatrix matrix start 16 bytes apart modulo 128 and cover all 32
banks once. cp.async: 8 lanes a phase, 16 bytes each; the chunk map (AttTcRow) puts them on
128 contiguous bytes: a row's own chunks when HDP is a multiple of 64, else chunks running
over whole padded rows (LD / 8 a row, the pad slots zero-filled). The emulator counts the
conflicts of every ldmatrix and cp.async at every compiled width (dev/emu/harness.cpp).
Registers per thread (hd 128): Q fragments 32, O 64, S 32, plus addresses. ptxas (CUDA 13,
sm_90, -O3), no spills anywhere, forward registers by HDP: 32: 78, 48: 108, 64: 127, 80: 134,
96: 158, 112: 167, 128: 175, 160: 128, 192: 165, 224: 166, 256: 233; RoPE fused (hd 64 and
128 only): 128 / 176.
RoPE fused (attention_tc_forward_rope, attention_tc_full_forward_rope): q and k come
unrotated and each thread rotates the 16-byte chunks of the Q and K tiles it copied
itself, right after its own cp.async wait and before the barrier that publishes the tile
(att_tc_rope_rows), with rope_forward's formula (fp32, rounded to bf16), so that out and
lse are those of rope_forward on q and k followed by attention_tc_forward. This replaces
the two rope_forward passes, which read and write q and k once each: 2 N (H + KV) hd 2
bytes (N = B T) no longer moved; llama3-1B (H 32, KV 8, hd 64) at B 4, T 2048: ~84 MB
per layer in the forward and as much in the backward (the backward file), ~2.7 GB per
step over 16 layers, ~0.9 ms on an H100 at ~3 TB/s (a PREDICTION, docs/kernel_predictions.md;
nothing here has run on a GPU). The price: the rotation's shared-memory pass over each
K tile (once per q head that reads it) and 2 x 16 bytes of cos/sin per chunk from L2.
Memory O(T): nothing of size T x T exists. Deterministic: fixed order everywhere, no
atomics. All copies a thread issues are waited for by that thread before the barrier that
publishes them.
*/
#pragma once
#include "../core/common.h"
#include "tensorcore.cuh"
#include "attention.cuh"  // att_check_args, att_prepare_smem

#define ATT_TC_FWD_BQ 64                        // query rows per CTA
#define ATT_TC_FWD_BK 64                        // keys per K/V tile
#define ATT_TC_FWD_WARPS (ATT_TC_FWD_BQ / 16)   // a warp owns 16 query rows
#define ATT_TC_FWD_THREADS (32 * ATT_TC_FWD_WARPS)
#define ATT_TC_LOG2E 1.4426950408889634f

// every multiple of 8 from 32 to 256; RoPE fused only at 64 and 128 (it is off in the trainers)
static inline bool attention_tc_supported_hd(int hd) { return hd >= 32 && hd <= 256 && hd % 8 == 0; }
static inline bool attention_tc_rope_supported_hd(int hd) { return hd == 64 || hd == 128; }
// the compiled width a head dim runs at (its kernels' HDP): the next multiple of 16 up to
// 128, of 32 above (the second configuration, whose kernels are heavier to instantiate)
static inline int att_tc_hdp(int hd) { return hd <= 128 ? (hd + 15) / 16 * 16 : (hd + 31) / 32 * 32; }
// keys per K/V tile of the forward (AttTcFwd<HDP>::BK): above 128 the O accumulators take
// the registers, and two CTAs an SM need the shared memory that 64-key tiles would take
static inline int att_tc_fwd_bk(int hdp) { return hdp <= 128 ? ATT_TC_FWD_BK : 32; }
// bytes of dynamic shared memory: Q, and two buffers of K and V, rows padded to hdp + 8
static inline size_t att_tc_smem_forward(int hd) {
    const int hdp = att_tc_hdp(hd);
    return (size_t)(ATT_TC_FWD_BQ + 4 * att_tc_fwd_bk(hdp)) * (hdp + 8) * 2;
}

#ifndef ENABLE_FP32
static_assert(sizeof(floatX) == 2, "the tensor-core attention needs bf16 activations");

typedef __nv_bfloat16 att_bf16;

// ---------------------------------------------------------------------------------
// tiles and fragments, shared with the backward (llmc/kernels/attention_tc_backward.cuh). Trip
// counts are template parameters or array sizes, so that every loop unrolls and the
// fragment arrays stay in registers.

// A tile row in shared memory holds hd bf16, zeros up to HDP (a multiple of 16: the k16
// slices of S = Q K^T and dP = dO V^T read them, and zero times zero adds nothing), and
// 8 more of padding: row stride LD = HDP + 8, so that LD / 8 is odd and the 8 row
// addresses of an 8x8 ldmatrix matrix fall in 8 distinct 16-byte bank groups.
// The 16-byte chunks of a tile are spread over the threads chunk c -> (row c / CPR, column
// 8 (c % CPR)). When HDP is a multiple of 64 a row has a multiple of 8 chunks and a
// cp.async phase (8 lanes) writes 128 contiguous bytes: CPR = HDP / 8 (the map the 64 and
// 128 kernels always had). Otherwise CPR = LD / 8 covers the padding too, so that 8
// consecutive chunks are 8 consecutive 16-byte slots of shared memory, conflict-free at
// any stride; the slots past hd are zero-filled (src-size 0, nothing read).
template <int HDP> struct AttTcRow {
    static_assert(HDP % 16 == 0, "HDP: a multiple of 16");
    static constexpr int LD = HDP + 8;
    static constexpr int CPR = HDP % 64 == 0 ? HDP / 8 : LD / 8;
};

// rows [r0, r0 + nrows) of head h of x ([B, T, nh, hd]) into dst [nrows][LD] by
// cp.async, 16 bytes a copy, by the NTHREADS threads of the block; rows at or past T and
// columns at or past hd are zero-filled and not read
template <int HDP, int NTHREADS>
static __device__ __forceinline__ void att_tc_load_rows(att_bf16* dst, const att_bf16* x, int b, int r0, int nrows,
                                                        int T, int nh, int h, int hd) {
    constexpr int LD = AttTcRow<HDP>::LD, CPR = AttTcRow<HDP>::CPR;
    for (int c = threadIdx.x; c < nrows * CPR; c += NTHREADS) {
        const int r = c / CPR, col = (c % CPR) * 8, t = r0 + r;
        const bool ok = t < T && col < hd;
        tc_cp_async_16(dst + r * LD + col, ok ? x + (((size_t)b * T + t) * nh + h) * hd + col : x, ok);
    }
}

// A operand (16x16, row-major in shared memory at `base`, row stride LD) by ldmatrix x4:
// lane l gives row (l % 8) + 8 ((l / 8) % 2), column 8 (l / 16): the quadrants (rows 0-7,
// cols 0-7), (8-15, 0-7), (0-7, 8-15), (8-15, 8-15), in the order a[0..3] wants
template <int LD>
static __device__ __forceinline__ void att_tc_load_a(tc_u32 a[4], const att_bf16* base, int lane) {
    tc_ldmatrix_x4(a, base + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8);
}
// B operands of two n8 tiles (n, n+8) x k16 from a matrix stored [n][k] (row = n):
// lane l gives row n = (l % 8) + 8 (l / 16), column k = 8 ((l / 8) % 2);
// r[0..1] = b of n-tile 0, r[2..3] = b of n-tile 1
template <int LD>
static __device__ __forceinline__ void att_tc_load_b_nk(tc_u32 r[4], const att_bf16* base, int lane) {
    tc_ldmatrix_x4(r, base + ((lane & 7) + (lane >> 4) * 8) * LD + ((lane >> 3) & 1) * 8);
}
// the same from a matrix stored [k][n] (row = k), transposed by ldmatrix .trans:
// lane l gives row k = (l % 8) + 8 ((l / 8) % 2), column n = 8 (l / 16)
template <int LD>
static __device__ __forceinline__ void att_tc_load_b_kn(tc_u32 r[4], const att_bf16* base, int lane) {
    tc_ldmatrix_x4_trans(r, base + ((lane & 7) + ((lane >> 3) & 1) * 8) * LD + (lane >> 4) * 8);
}
// the C layout of n8 tiles 2j and 2j+1 is the A layout of k16 slice j (rounded to bf16)
static __device__ __forceinline__ void att_tc_c_to_a(tc_u32 a[4], const float c0[4], const float c1[4]) {
    a[0] = tc_pack_bf16x2(c0[0], c0[1]);
    a[1] = tc_pack_bf16x2(c0[2], c0[3]);
    a[2] = tc_pack_bf16x2(c1[0], c1[1]);
    a[3] = tc_pack_bf16x2(c1[2], c1[3]);
}
template <int N>
static __device__ __forceinline__ void att_tc_zero(float (&c)[N][4]) {
    #pragma unroll
    for (int i = 0; i < N; i++) c[i][0] = c[i][1] = c[i][2] = c[i][3] = 0.0f;
}
// acc += P B for one warp: P (16 x 8 NP, fp32 in the C layout of NP n8 tiles, as an mma
// left it) goes to bf16 A fragments without shared memory; B (8 NP x 8 ND) is stored
// [k][n] at Bs, row stride LD (V in the forward; dO, Q, K in the backward). Each acc
// element adds its k16 slices in increasing order.
template <int LD, int NP, int ND>
static __device__ __forceinline__ void att_tc_mma_pb(float (&acc)[ND][4], const float (&p)[NP][4], const att_bf16* Bs,
                                                     int lane) {
    #pragma unroll
    for (int kk = 0; kk < NP / 2; kk++) {
        tc_u32 a[4];
        att_tc_c_to_a(a, p[2 * kk], p[2 * kk + 1]);
        #pragma unroll
        for (int nd = 0; nd < ND / 2; nd++) {
            tc_u32 bf[4];
            att_tc_load_b_kn<LD>(bf, Bs + kk * 16 * LD + nd * 16, lane);
            tc_mma_bf16_16816(acc[2 * nd], a, bf);
            tc_mma_bf16_16816(acc[2 * nd + 1], a, bf + 2);
        }
    }
}

// RoPE of one pair (x0, x1) = (x[2i], x[2i+1]) in fp32, written as rope_kernel (llmc/kernels/rope.cuh)
// writes it, so that the fused rotation rounds as rope_forward (sign +1) and rope_backward
// (sign -1, the transpose) do
static __device__ __forceinline__ void att_tc_rope_pair(float& y0, float& y1, float x0, float x1, float c, float s,
                                                        float sign) {
    const float sn = sign * s;
    y0 = x0 * c - x1 * sn;
    y1 = x0 * sn + x1 * c;
}
// RoPE (forward rotation, rounded to bf16) in place on the tile att_tc_load_rows<HD,
// NTHREADS> filled from rows [r0, r0 + nrows): row r is position r0 + r, pair i of it
// takes cos/sin [r0 + r][i] of the [positions, HD/2] tables. Each thread rotates exactly
// the 16-byte chunks it copied itself (the same chunk -> thread map as att_tc_load_rows),
// so it needs only its own tc_cp_async_wait before, and the barrier that publishes the
// tile publishes it rotated: no barrier of its own. Rows at or past T stay zero (the
// table need not have them).
template <int HD, int NTHREADS>
static __device__ __forceinline__ void att_tc_rope_rows(att_bf16* tile, int r0, int nrows, int T, const float* rope_cos,
                                                        const float* rope_sin) {
    // runs only at hd 64 and 128 (att_tc_check_rope), where hd = HDP and CPR = hd / 8
    constexpr int LD = AttTcRow<HD>::LD, CH = AttTcRow<HD>::CPR, HALF = HD / 2;
    for (int c = threadIdx.x; c < nrows * CH; c += NTHREADS) {
        const int r = c / CH, col = (c % CH) * 8, t = r0 + r;
        if (t >= T) continue;
        uint4* p = (uint4*)(tile + r * LD + col);
        const uint4 w = *p;
        const size_t ti = (size_t)t * HALF + col / 2;  // 4 pairs: 16 bytes of each table, aligned
        const float4 c4 = *(const float4*)(rope_cos + ti), s4 = *(const float4*)(rope_sin + ti);
        const float cs[4] = {c4.x, c4.y, c4.z, c4.w}, sn[4] = {s4.x, s4.y, s4.z, s4.w};
        unsigned u[4] = {w.x, w.y, w.z, w.w};
        #pragma unroll
        for (int i = 0; i < 4; i++) {  // bf16 -> fp32 is exact: the bf16 bits are the high half of the float
            float y0, y1;
            att_tc_rope_pair(y0, y1, __uint_as_float(u[i] << 16), __uint_as_float(u[i] & 0xffff0000u), cs[i], sn[i], 1.0f);
            u[i] = tc_pack_bf16x2(y0, y1);
        }
        uint4 o;
        o.x = u[0]; o.y = u[1]; o.z = u[2]; o.w = u[3];
        *p = o;
    }
}

// ---------------------------------------------------------------------------------
// the forward; ROPE: q and k are rotated in the tiles (rope_cos, rope_sin: the tables).
// HDP: the compiled width (att_tc_hdp(hd)); hd <= HDP the runtime head dim.
// Up to HDP 128 (first configuration) the Q fragments stay in registers for all key tiles;
// above, O alone takes HDP / 2 registers a thread, so Q's fragments are read from sQ again
// for every key tile (the sums are the same, in the same order), and key tiles are 32.
template <int HDP> struct AttTcFwd {
    static constexpr int BK = HDP <= 128 ? ATT_TC_FWD_BK : 32;
    static constexpr bool QREG = HDP <= 128;
};
template <int HDP, bool ROPE>
static __device__ __forceinline__ void att_tc_forward_body(floatX* smem, floatX* out, float* lse, const floatX* q,
                                                           const floatX* k, const floatX* v, const float* rope_cos,
                                                           const float* rope_sin, int T, int H, int KV, int hd,
                                                           float scale, bool causal) {
    constexpr int BQ = ATT_TC_FWD_BQ, BK = AttTcFwd<HDP>::BK, NTH = ATT_TC_FWD_THREADS;
    constexpr bool QREG = AttTcFwd<HDP>::QREG;
    constexpr int LD = AttTcRow<HDP>::LD;  // padded row, in bf16 elements
    constexpr int KS = HDP / 16;   // k16 slices of the head dim (S = Q K^T)
    constexpr int NT = BK / 8;     // n8 tiles of keys in S
    constexpr int DT = HDP / 8;    // n8 tiles of dims in O
    static_assert(BQ % BK == 0, "a query tile ends on a key tile boundary");
    floatX* sQ = smem;                     // [BQ][LD]
    floatX* sK = sQ + BQ * LD;             // [2][BK][LD]
    floatX* sV = sK + 2 * BK * LD;         // [2][BK][LD]
    const int n_qt = gridDim.x;
    const int qt = causal ? n_qt - 1 - blockIdx.x : blockIdx.x;  // causal: longest tiles first
    const int h = blockIdx.y, b = blockIdx.z, kvh = h / (H / KV);
    const int q0 = qt * BQ;
    const int n_kt_all = (T + BK - 1) / BK;
    // causal: the key tiles up to the query tile's last row (BK == BQ: the diagonal tile is qt)
    const int n_kt = causal ? min(n_kt_all, (q0 + BQ) / BK) : n_kt_all;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t4 = lane & 3;
    const float sl2 = scale * ATT_TC_LOG2E;  // exp(x scale) = exp2(x sl2)

    att_tc_load_rows<HDP, NTH>(sQ, q, b, q0, BQ, T, H, h, hd);
    att_tc_load_rows<HDP, NTH>(sK, k, b, 0, BK, T, KV, kvh, hd);
    att_tc_load_rows<HDP, NTH>(sV, v, b, 0, BK, T, KV, kvh, hd);
    tc_cp_async_commit();

    tc_u32 qf[QREG ? KS : 1][4];
    float o[DT][4];
    att_tc_zero(o);
    float m_r[2] = {-INFINITY, -INFINITY}, l_r[2] = {0.0f, 0.0f};  // rows g and g + 8 of the warp: raw max, sum

    for (int kt = 0; kt < n_kt; kt++) {
        tc_cp_async_wait<0>();  // this thread's copies of tile kt (and of Q)
        if (ROPE) {  // this thread's own chunks; buffer kt & 1 was last read at kt - 2, before the last barrier
            if (kt == 0) att_tc_rope_rows<HDP, NTH>(sQ, q0, BQ, T, rope_cos, rope_sin);
            att_tc_rope_rows<HDP, NTH>(sK + (kt & 1) * BK * LD, kt * BK, BK, T, rope_cos, rope_sin);
        }
        __syncthreads();        // everyone's; and every warp is done with the buffer the next tile goes to
        if (kt + 1 < n_kt) {
            const int nb = (kt + 1) & 1;
            att_tc_load_rows<HDP, NTH>(sK + nb * BK * LD, k, b, (kt + 1) * BK, BK, T, KV, kvh, hd);
            att_tc_load_rows<HDP, NTH>(sV + nb * BK * LD, v, b, (kt + 1) * BK, BK, T, KV, kvh, hd);
            tc_cp_async_commit();
        }
        if (QREG && kt == 0) {
            #pragma unroll
            for (int kk = 0; kk < KS; kk++) att_tc_load_a<LD>(qf[QREG ? kk : 0], sQ + warp * 16 * LD + kk * 16, lane);
        }
        const floatX* cK = sK + (kt & 1) * BK * LD;
        const floatX* cV = sV + (kt & 1) * BK * LD;

        // S = Q K^T; K is stored [key][dim], B's [n][k]. Either loop order adds each s[j]'s
        // k16 slices in increasing order.
        float s[NT][4];
        att_tc_zero(s);
        if (QREG) {
            #pragma unroll
            for (int jp = 0; jp < NT / 2; jp++) {
                #pragma unroll
                for (int kk = 0; kk < KS; kk++) {
                    tc_u32 kf[4];
                    att_tc_load_b_nk<LD>(kf, cK + jp * 16 * LD + kk * 16, lane);
                    tc_mma_bf16_16816(s[2 * jp], qf[QREG ? kk : 0], kf);
                    tc_mma_bf16_16816(s[2 * jp + 1], qf[QREG ? kk : 0], kf + 2);
                }
            }
        } else {
            #pragma unroll
            for (int kk = 0; kk < KS; kk++) {
                att_tc_load_a<LD>(qf[0], sQ + warp * 16 * LD + kk * 16, lane);
                #pragma unroll
                for (int jp = 0; jp < NT / 2; jp++) {
                    tc_u32 kf[4];
                    att_tc_load_b_nk<LD>(kf, cK + jp * 16 * LD + kk * 16, lane);
                    tc_mma_bf16_16816(s[2 * jp], qf[0], kf);
                    tc_mma_bf16_16816(s[2 * jp + 1], qf[0], kf + 2);
                }
            }
        }

        // the mask, on the tiles that need one; s[j][e] is (row g + 8 (e >> 1), key 8 j + 2 t4 + (e & 1))
        const int k0 = kt * BK;
        if (k0 + BK > T || (causal && k0 + BK - 1 > q0)) {
            #pragma unroll
            for (int j = 0; j < NT; j++)
                #pragma unroll
                for (int e = 0; e < 4; e++) {
                    const int u = k0 + j * 8 + 2 * t4 + (e & 1), t = q0 + warp * 16 + g + (e >> 1) * 8;
                    if (u >= T || (causal && u > t)) s[j][e] = -INFINITY;
                }
        }

        // online softmax of rows g (hr = 0) and g + 8 (hr = 1). Every row sees key 0 in
        // tile 0, so m is finite from there on, even for a row that a later tile masks whole.
        #pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            float mx = -INFINITY;
            #pragma unroll
            for (int j = 0; j < NT; j++) mx = fmaxf(mx, fmaxf(s[j][2 * hr], s[j][2 * hr + 1]));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
            mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
            const float m_new = fmaxf(m_r[hr], mx);
            // a row with no visible key so far keeps p = 0 and corr = 0 instead of NaN
            const float ms = m_new == -INFINITY ? 0.0f : m_new * sl2;
            const float corr = exp2f(m_r[hr] * sl2 - ms);  // 0 while nothing was accumulated
            m_r[hr] = m_new;
            float rs = 0.0f;
            #pragma unroll
            for (int j = 0; j < NT; j++)
                #pragma unroll
                for (int e = 2 * hr; e < 2 * hr + 2; e++) {
                    const float p = exp2f(fmaf(s[j][e], sl2, -ms));
                    s[j][e] = p;
                    rs += p;
                }
            l_r[hr] = l_r[hr] * corr + rs;  // this lane's keys; the quad is summed at the end
            #pragma unroll
            for (int d = 0; d < DT; d++) { o[d][2 * hr] *= corr; o[d][2 * hr + 1] *= corr; }
        }

        // O += P V (V is stored [key][dim], B's [k][n])
        att_tc_mma_pb<LD>(o, s, cV, lane);
    }

    // out = O / l through this warp's own rows of sQ (read only by this warp: at kt == 0,
    // or, above HDP 128, at every tile)
    #pragma unroll
    for (int hr = 0; hr < 2; hr++) {
        l_r[hr] += __shfl_xor_sync(0xffffffffu, l_r[hr], 1);
        l_r[hr] += __shfl_xor_sync(0xffffffffu, l_r[hr], 2);
    }
    const float inv0 = 1.0f / l_r[0], inv1 = 1.0f / l_r[1];
    // the warp's ldmatrix reads of these rows (its Q fragments) before any lane overwrites them:
    // compute-sanitizer racecheck on the H200 reported the read/write pair without this
    __syncwarp();
    floatX* orow = sQ + (warp * 16 + g) * LD + 2 * t4;
    #pragma unroll
    for (int d = 0; d < DT; d++) {
        orow[d * 8] = (floatX)(o[d][0] * inv0);
        orow[d * 8 + 1] = (floatX)(o[d][1] * inv0);
        orow[8 * LD + d * 8] = (floatX)(o[d][2] * inv1);
        orow[8 * LD + d * 8 + 1] = (floatX)(o[d][3] * inv1);
    }
    __syncwarp();
    constexpr int CPR = AttTcRow<HDP>::CPR;  // the copies' chunk map: conflict-free 16-byte reads
    for (int c = lane; c < 16 * CPR; c += 32) {
        const int r = c / CPR, col = (c % CPR) * 8, t = q0 + warp * 16 + r;
        if (t < T && col < hd)
            *(uint4*)(out + (((size_t)b * T + t) * H + h) * hd + col) = *(const uint4*)(sQ + (warp * 16 + r) * LD + col);
    }
    if (t4 == 0) {
        #pragma unroll
        for (int hr = 0; hr < 2; hr++) {
            const int t = q0 + warp * 16 + g + 8 * hr;
            if (t < T) lse[((size_t)b * H + h) * T + t] = m_r[hr] * scale + logf(l_r[hr]);
        }
    }
}

// one kernel per compiled width and RoPE or not (not a template: the emulator's kernel table
// names kernels without template arguments); all are att_tc_forward_body
#define ATT_TC_FWD_ARGS                                                                                           \
    floatX *out, float *lse, const floatX *q, const floatX *k, const floatX *v, int T, int H, int KV, int hd,      \
        float scale, bool causal
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd32_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<32, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd48_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<48, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd64_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<64, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd80_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<80, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd96_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<96, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd112_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<112, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd128_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<128, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd160_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<160, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd192_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<192, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd224_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<224, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_hd256_kernel(ATT_TC_FWD_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<256, false>((floatX*)att_tc_smem, out, lse, q, k, v, nullptr, nullptr, T, H, KV, hd, scale, causal);
}
#define ATT_TC_FWD_ROPE_ARGS                                                                                      \
    floatX *out, float *lse, const floatX *q, const floatX *k, const floatX *v, const float *rope_cos,             \
        const float *rope_sin, int T, int H, int KV, float scale, bool causal
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_rope_hd64_kernel(ATT_TC_FWD_ROPE_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<64, true>((floatX*)att_tc_smem, out, lse, q, k, v, rope_cos, rope_sin, T, H, KV, 64, scale, causal);
}
__global__ void __launch_bounds__(ATT_TC_FWD_THREADS) attention_tc_forward_rope_hd128_kernel(ATT_TC_FWD_ROPE_ARGS) {
    extern __shared__ __align__(16) unsigned char att_tc_smem[];
    att_tc_forward_body<128, true>((floatX*)att_tc_smem, out, lse, q, k, v, rope_cos, rope_sin, T, H, KV, 128, scale,
                                   causal);
}
#endif  // !ENABLE_FP32

// what the tensor-core kernels, forward and backward, require beyond att_check_args: a bf16
// build, a supported head dim, 16-byte aligned tensors; FAILs naming the reason
static inline void att_tc_check(const char* who, int hd, const void* const* ptrs, int n) {
#ifdef ENABLE_FP32
    (void)hd; (void)ptrs; (void)n;
    FAIL("%s: the tensor-core attention needs bf16 activations; this is an ENABLE_FP32 build (use --attention fp32)",
         who);
#else
    if (!attention_tc_supported_hd(hd))
        FAIL("%s: head dim %d: the tensor-core attention supports multiples of 8 from 32 to 256 (use --attention fp32)",
             who, hd);
    for (int i = 0; i < n; i++)
        if ((uintptr_t)ptrs[i] % 16 != 0)
            FAIL("%s: tensor %d at %p is not 16-byte aligned (cp.async and the 16-byte loads and stores need it)", who,
                 i, ptrs[i]);
#endif
}

// the RoPE tables of the fused variants: both given (or both NULL: no RoPE), 16-byte
// aligned (read 16 bytes at a time); FAILs naming the reason. They must hold a row for
// every position < T, as for rope_forward.
static inline void att_tc_check_rope(const char* who, const float* rope_cos, const float* rope_sin, int hd) {
    if (!rope_cos && !rope_sin) return;
    if (!attention_tc_rope_supported_hd(hd))
        FAIL("%s: head dim %d: RoPE fused runs at head dims 64 and 128 only (rope_forward, then the unfused kernel)", who,
             hd);
    if (!rope_cos || !rope_sin)
        FAIL("%s: RoPE needs both tables (cos %p, sin %p)", who, (const void*)rope_cos, (const void*)rope_sin);
    const void* ptrs[2] = {rope_cos, rope_sin};
    for (int i = 0; i < 2; i++)
        if ((uintptr_t)ptrs[i] % 16 != 0)
            FAIL("%s: RoPE table %s at %p is not 16-byte aligned (read 16 bytes at a time)", who, i ? "sin" : "cos", ptrs[i]);
}

// rope_cos, rope_sin NULL: q, k as given; else q, k are rotated in the tiles (RoPE fused)
static inline void att_tc_launch_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                         const float* rope_cos, const float* rope_sin, int B, int T, int H, int KV,
                                         int hd, bool causal, stream_t s, const char* who) {
    att_check_args(who, B, T, H, KV, hd);
    const void* ptrs[4] = {out, q, k, v};
    att_tc_check(who, hd, ptrs, 4);
    att_tc_check_rope(who, rope_cos, rope_sin, hd);
#ifndef ENABLE_FP32
    if (B == 0 || T == 0) return;
    const size_t smem = att_tc_smem_forward(hd);
    const dim3 grid((unsigned)ceil_div((size_t)T, ATT_TC_FWD_BQ), H, B);
    const float scale = 1.0f / sqrtf((float)hd);
    if (rope_cos) {
        if (hd == 64) {
            att_prepare_smem((const void*)attention_tc_forward_rope_hd64_kernel, smem, who);
            attention_tc_forward_rope_hd64_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, rope_cos, rope_sin,
                                                                                         T, H, KV, scale, causal);
        } else {
            att_prepare_smem((const void*)attention_tc_forward_rope_hd128_kernel, smem, who);
            attention_tc_forward_rope_hd128_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, rope_cos,
                                                                                          rope_sin, T, H, KV, scale, causal);
        }
        cudaCheck(cudaGetLastError());
        return;
    }
    switch (att_tc_hdp(hd)) {
    case 32:
        att_prepare_smem((const void*)attention_tc_forward_hd32_kernel, smem, who);
        attention_tc_forward_hd32_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 48:
        att_prepare_smem((const void*)attention_tc_forward_hd48_kernel, smem, who);
        attention_tc_forward_hd48_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 64:
        att_prepare_smem((const void*)attention_tc_forward_hd64_kernel, smem, who);
        attention_tc_forward_hd64_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 80:
        att_prepare_smem((const void*)attention_tc_forward_hd80_kernel, smem, who);
        attention_tc_forward_hd80_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 96:
        att_prepare_smem((const void*)attention_tc_forward_hd96_kernel, smem, who);
        attention_tc_forward_hd96_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 112:
        att_prepare_smem((const void*)attention_tc_forward_hd112_kernel, smem, who);
        attention_tc_forward_hd112_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 128:
        att_prepare_smem((const void*)attention_tc_forward_hd128_kernel, smem, who);
        attention_tc_forward_hd128_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 160:
        att_prepare_smem((const void*)attention_tc_forward_hd160_kernel, smem, who);
        attention_tc_forward_hd160_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 192:
        att_prepare_smem((const void*)attention_tc_forward_hd192_kernel, smem, who);
        attention_tc_forward_hd192_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 224:
        att_prepare_smem((const void*)attention_tc_forward_hd224_kernel, smem, who);
        attention_tc_forward_hd224_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    case 256:
        att_prepare_smem((const void*)attention_tc_forward_hd256_kernel, smem, who);
        attention_tc_forward_hd256_kernel<<<grid, ATT_TC_FWD_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, scale, causal);
        break;
    default: FAIL("%s: head dim %d: no compiled width %d", who, hd, att_tc_hdp(hd));
    }
    cudaCheck(cudaGetLastError());
#else
    (void)out; (void)lse; (void)q; (void)k; (void)v; (void)causal; (void)s;
#endif
}

// causal (attention_forward's contract)
static inline void attention_tc_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B,
                                        int T, int H, int KV, int hd, stream_t s) {
    att_tc_launch_forward(out, lse, q, k, v, nullptr, nullptr, B, T, H, KV, hd, true, s, "attention_tc_forward");
}
// non-causal (attention_full_forward's contract)
static inline void attention_tc_full_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                             int B, int T, int H, int KV, int hd, stream_t s) {
    att_tc_launch_forward(out, lse, q, k, v, nullptr, nullptr, B, T, H, KV, hd, false, s, "attention_tc_full_forward");
}
// RoPE fused: q [B, T, H, hd] and k [B, T, KV, hd] NOT rotated; rope_cos, rope_sin the
// [>= T, hd/2] tables of rope_forward (16-byte aligned). out and lse are those of
// rope_forward on q and k followed by attention_tc_forward (resp. _full_); q and k are not
// changed.
static inline void attention_tc_forward_rope(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                             const float* rope_cos, const float* rope_sin, int B, int T, int H, int KV,
                                             int hd, stream_t s) {
    att_tc_launch_forward(out, lse, q, k, v, rope_cos, rope_sin, B, T, H, KV, hd, true, s, "attention_tc_forward_rope");
}
static inline void attention_tc_full_forward_rope(floatX* out, float* lse, const floatX* q, const floatX* k,
                                                  const floatX* v, const float* rope_cos, const float* rope_sin, int B,
                                                  int T, int H, int KV, int hd, stream_t s) {
    att_tc_launch_forward(out, lse, q, k, v, rope_cos, rope_sin, B, T, H, KV, hd, false, s,
                          "attention_tc_full_forward_rope");
}

// the backward on tensor cores is llmc/kernels/attention_tc_backward.cuh (attention_tc_backward,
// attention_tc_full_backward), which includes this file for the helpers above
