/*
Ladder for llmc/kernels/attention.cuh (GQA attention, forward keeps out and lse), in both of
its modes: causal (attention_forward/backward) and full, non-causal
(attention_full_forward/backward, the video DiT). Every version takes the mode as an
argument (a `causal` kernel argument, as in llmc) and is validated in both.
  version 1: naive. Forward: one thread per (b, h, query row), online softmax over
             keys 0..t (full: 0..T-1), accumulator in local memory. Backward: one
             thread per (b, h, query row) for dq; one thread per (b, kv head, key)
             for dk, dv, looping over the group's heads and the rows t >= u (full:
             all rows). Deterministic.
  version 2: the llmc kernels (32x32 fp32 tiles in shared memory, online softmax;
             backward = dK/dV kernel per key tile + dQ kernel per query tile, no
             atomics). Deterministic.
  version 3: tensor cores (WMMA bf16 16x16x16, fp32 accumulate), 64x64 tiles, one
             warp per 16 rows (or 16 keys in dK/dV). S = Q K^T and dP = dO V^T are
             stored to shared memory in fp32, the softmax / dS math is fp32, P and dS
             are rounded to bf16 for the P V, P^T dO, dS^T Q and dS K products (as
             FlashAttention-2 does). Same structure as v2, no atomics. bf16 builds only,
             hd % 16 == 0 and hd <= 128.
             *** NOT YET VALIDATED ON A GPU: written without one. Its logic (tiling,
             indices, masks, synchronisation) passes the host emulator (dev/emu, a wmma
             shim with bf16 tolerances), which says nothing of the tensor cores'
             numerics or speed. It stays here until this ladder passes on an H100; only
             then may it move to llmc. ***
  version 4: tensor cores through the PTX wrappers of llmc/kernels/tensorcore.cuh, FlashAttention-2
             style (llmc/kernels/attention_tc.cuh: mma.sync m16n8k16 + ldmatrix, cp.async double
             buffering of 64-key K/V tiles, S/P/O in registers, exp2, only the diagonal
             and ragged tiles masked; backward: llmc/kernels/attention_tc_backward.cuh, which needs
             a delta scratch of attention_tc_delta_floats(B, H, T) floats). bf16 builds,
             hd 64 and 128 only. *** NOT YET VALIDATED ON A GPU: checked by the host
             emulator's model of the documented fragment layouts (dev/emu/include/
             tensorcore_emu.h), which says nothing of the hardware's numerics or speed.
             The trainers run it only with --attention tc (llmc/kernels/attention_select.h). ***
  version 5: version 4 with RoPE fused (attention_tc_forward_rope / _backward_rope): q and
             k come unrotated; the kernels rotate the Q and K tiles in shared memory after
             their cp.async lands and rotate dq, dk back in the registers of the final
             store, instead of two rope_forward launches before and two rope_backward
             launches after (PREDICTED saving ~84 MB of traffic per layer each way at
             llama3-1B, B 4, T 2048; see llmc/kernels/attention_tc.cuh). Validated against the
             CPU reference composed (ref_rope_forward on q, k rounded to floatX, the
             attention, ref_rope_backward on dq, dk) and bit for bit against the unfused
             composition on the device (rope_forward, version 4, rope_backward); timed
             next to that composition. Same *** NOT YET VALIDATED ON A GPU *** as v4.
  version 6: version 4 at every head dim that is a multiple of 8 from 32 to 256 (the same
             launchers of llmc/kernels/attention_tc*.cuh, which now take them; version 4 here
             stays at 64 and 128, where v6 is v4, bit for bit). A head dim runs on the kernel
             compiled for HDP = hd rounded up to 16 (32 above 128): tile rows hold hd
             values and zeros up to HDP, so the k16 slices of S and dP add nothing for the
             padding, with row stride HDP + 8 (LD / 8 odd: ldmatrix conflict-free) and
             cp.async spread over whole padded rows where HDP is not a multiple of 64 (8
             lanes = 128 contiguous bytes: conflict-free). Above 128 a second configuration:
             forward 32-key tiles with Q's fragments read from shared memory per tile; dK/dV
             32-key tiles, two warps per 16 keys splitting dK, dV's columns (each computes the
             same S^T, dP^T: 1.5x the tensor work of dK/dV's products); dQ 32-key tiles (16
             above 192). ptxas: no spills; registers per thread in llmc/kernels/attention_tc*.cuh.
             PREDICTED (written before any GPU run; H200, TFLOP/s counted at the true hd, as
             the bench prints, forward / backward):
               llama3-1B's shape, causal B=4 T=2048 H=32 KV=8:  hd 72: 165 / 105   hd 128: 155 / 100
               dit-XL's shape, full B=1 T=16384 H=16 KV=16:     hd 72: 190 / 135   hd 128: 195 / 160
             Why: hd 128 is v4's code (v4 measured causal 148 / 94 at B=2 H=16, full 191 / 155;
             4x the CTAs at B=4 H=32 shorten the causal tail, +5%). hd 72 runs HDP 80: 1.25x the
             tensor work of hd 64 for 1.125x the counted FLOPs, the softmax's exp work per tile
             unchanged; with ~60% of hd 64's time in the MMAs, time 1.15x hd 64's: v4's hd-64
             181.6 / 127.3 (llama3-1B shape) x 1.125 / 1.15 = 178 / 125, less ~7% forward for
             3 CTAs an SM instead of 4 (134 registers) and ~15% backward for the 32-row query
             tiles of dK/dV (hd 128's config, which ran 94 against hd 64's 127): 165 / 105.
             dit-XL: the trainer's dit-B attention (hd 64, full, 16K tokens) ran 211 / 158,
             scaled the same way: 190 / 135. The issue's target (hd 72 within 15% of hd 64's
             rate) is met by this prediction forward, not backward.
  version 7: "tc2 backward" (llmc/kernels/attention_tc2_backward.cuh: attention_tc2_backward,
             attention_tc2_full_backward; the forward for its checks is v6's, the lse contract is
             shared): one pass, FlashAttention-2's five matmuls instead of v4's seven, bitwise
             reproducible (no atomics, no spin-wait between CTAs). The CTA of key tile kt (8
             warps; 128 keys up to HDP 128, 64 above) loops over the group's heads and the query
             tiles as v4's dK/dV kernel does, and also computes dQ_kt = dS K for each query tile
             (dS^T through shared memory, as FlashAttention-2 does) and stores it, fp32, into the
             caller's workspace W[kt][rows]; a reduce kernel then sums, for every query row,
             W[0..kt_last] in increasing kt (a fixed order) and writes dq = scale * sum, rounded
             once. Key tiles are filled and reduced in chunks (the reduce carrying an fp32 sum
             across chunks in the same order), so W stays a fixed multiple of one fp32 copy of
             dq (the rule and worked numbers: the header of the .cuh). Causal: key tiles with
             the most query tiles are launched first (kt is the grid's slowest index).
             The trade, from the design note this replaces: per (b, h), W is written and read
             once, 2 (T / BK) T hd 4 bytes (causal: half), against the 2 matmuls saved, 4 T^2 hd
             FLOPs (causal: half): per T^2 hd, saved 4 / R_mma, added 8 / (BK R_mem); with
             R_mma ~150 TFLOP/s and R_mem ~4 TB/s it gains only with BK > ~75, hence 128-key
             tiles (8 warps of 16 keys), and it loses again once the kernel is much faster.
             (A cluster/DSMEM reduction of dQ across 8 key tiles would divide W's traffic by 8;
             the emulator now models clusters, DSMEM and cp.async inside them (dev/emu/README.md,
             "Thread-block clusters and distributed shared memory"): that kernel is the next
             version, not written yet.)
             PREDICTED (written before the kernel and before any GPU run; H200, backward TFLOP/s
             counted at the true hd, the bench's convention):
               llama3-1B's shape, causal B=4 T=2048 H=32 KV=8 hd 64:  140  (v4 measured 127.3)
               hd 128 full B=2 T=2048 H=16 KV=4:                      170  (v4 measured 155.3)
               dit-XL's shape, full B=1 T=16384 H=16 KV=16 hd 72:     150  (v6 predicted 135)
               llama3-1B's shape, causal hd 72:                      115  (v6 predicted 105)
             Why, in units of 1e-12 s per T^2 hd (10 FLOPs per T^2 hd counted): hd 64 causal:
             v4's 10 / 127 = 0.079, minus the two matmuls saved 4 / 150 = 0.027, plus W's
             traffic 8 / (128 x 4) = 0.016, plus ~0.004 for the chunked reduce's extra pass,
             the dS round trip through shared memory and the causal chunks' tails: 0.072 ->
             140 (+10%). hd 128 full: v4's 10 / 155 = 0.065, minus 4 / 185 = 0.022 (hd 128's
             matmuls run faster), plus 0.016 + 0.003: 0.062 -> ~160-170; one chunk of 128 CTAs
             (B KV = 8) on 132 SMs, 1 CTA an SM. The issue's target, 250, is NOT predicted:
             mma.sync with 16 keys a warp and fp32 dK, dV in registers keeps ~40% of the
             tensor peak; FlashAttention-2's ~300 comes with larger warp tiles and wgmma is
             FA3's. hd 72 (HDP 80): v6's padding and 32-row query tiles scale hd 64's rate by
             ~0.83-0.85: 174 x 0.86 = 150 (dit-XL, from dit-B's measured 158 at hd 64 taken
             through the same model: 0.063 - 0.0235 + 0.016 + 0.002 = 0.058 -> 174), 140 x
             0.82 = 115 causal. So hd 72 stays ~15-18% below hd 64 (the target: within 15%).
             (Written after these predictions, which stand as written: HDP 80, hd 72's width, got
             64-row query tiles, as HDP 64 has, since ptxas fits them in 239 registers; the
             prediction assumed v6's 32.)
             Then (2026-11-29, PREDICTED before the change was coded): GQA heads split across
             CTAs. With G = H / KV > 1 a CTA takes one q head instead of looping over the G heads
             of its kv head (grid (H, B, key tiles), kt still the slowest index) and writes its
             dK, dV contributions, fp32, into 2 G B T KV hd = 2 N floats of workspace that a
             second reduce kernel sums in increasing head order (rounded once); the chunk rule
             counts B H CTAs per key tile (llama3-1B B=4: chunks of 4 key tiles, 512 CTAs a
             launch, instead of 8 and 256). llama3-1B causal hd 64 B=4 T=2048: a list-scheduling
             model of the causal work (one unit per query tile, 132 SMs, 1 CTA an SM) gives the
             same makespan both ways, 272 units against an ideal 264 (the heaviest-first order
             already hides the causal tail at 256 CTAs; 512 CTAs of a quarter the work each end
             no earlier, and the 4 launches instead of 2 add their own tails): no gain from
             wave quantization or the tail. The cost: the partials, 2 x 4 x B T KV hd x 4 bytes
             = 134 MB written and read, ~70 us at ~4 TB/s against the ~1.23 ms of 140 TFLOP/s,
             plus G times the K, V tile loads (from L2): predicted 132-135 (-3 to -6%), i.e. a
             small LOSS at this shape. The split is for small B KV: at B=1 (T=2048) the model
             gives 70 units against today's 130 (128 CTAs, one per SM, the kt = 0 ones 4 times
             the longest): ~1.8x there; at B=1 T=8192, 1048 against 1288 (+20%).
  version 8: tc2 forward (llmc/kernels/attention_tc2.cuh: attention_tc2_forward,
             attention_tc2_full_forward; the backward here is version 6's, which takes the same
             lse): FlashAttention-2's forward shape where registers allow. Up to HDP 128: 128-row
             query tiles, 4 warps of 32 rows (two m16 row slices a warp, so each K or V fragment
             that ldmatrix loads feeds two MMAs: half v6's shared-memory reads per MMA), 64-key
             tiles, Q's fragments in registers where they fit, and S_{j+1} = Q K_{j+1}^T issued
             before the softmax of tile j (software pipelining; K runs one tile ahead of V in
             the double buffers); above 128, v6's shape (64-row tiles, 16 rows a warp, 32-key
             tiles). Causal: the heaviest query tiles of every head first in grid order (the
             query tile is the slowest index of a 1-D grid, not per head as in v6), and a warp
             skips the key tiles that its rows mask whole. Same *** NOT YET VALIDATED ON A GPU ***
             as v4. PREDICTED (written before the kernel, H200, forward TFLOP/s at the true hd):
               llama3-1B's shape, causal B=4 T=2048 H=32 KV=8:  hd 64: 215   hd 72: 195
               hd 128 full B=2 T=2048 H=16 KV=16 (or 4):         240
               dit-XL's shape, full B=1 T=16384 H=16 KV=16:     hd 72: 225
             Why: v4/v6 measured 181.6 (hd 64 causal, llama3-1B's shape) and 191.1 (hd 128
             full). Their inner loop issues one ldmatrix x4 (512 bytes a warp, 4 cycles of the
             SM's 128 bytes/cycle) per 2 MMAs m16n8k16 (~2 x 4 cycles of mma.sync issue at the
             dense rate): shared memory is busy ~half the MMA time and the two contend with the
             softmax's exp2/fma for issue slots. Two row slices a warp halve the K and V reads
             per MMA (Q in registers), and the pipelined S_{j+1} keeps the tensor pipe fed while
             the FMA/MUFU pipes run tile j's softmax: +15% at hd 128 (MMA-bound already), +20%
             at hd 64 where the softmax is a larger share (exp work per tile is independent of
             hd). The causal grid order removes v6's per-head tail (a wave of 132 x 2 CTAs ends
             on light tiles), +3% causal. So hd 64 causal 181.6 x 1.18 ~ 215; hd 128 full 191.1
             x 1.25 ~ 240 (registers: O 128 + S 64 a thread leave Q in shared memory at HDP 128,
             so less gain there than the shape promises); hd 72 runs HDP 80 (1.11x the counted
             FLOPs in tensor work, exp work as hd 64's): ~0.9 of hd 64's rate, 195 causal, and
             full at 16K tokens without a causal tail or masks, 225 (v6 predicted 190 there).
             The issue's 300 at hd 128 full is NOT predicted to be reached by this step:
             FlashAttention-2 gets there with the same shape and mma.sync, so the remaining
             gap would be instruction scheduling that only a profile on the GPU can show.
             As built (after these predictions, what 255 registers allowed without a spill;
             the table at the top of llmc/kernels/attention_tc2.cuh): the pipelining only at HDP
             32 and 48; Q in registers at 32 and 80; 128-key tiles at HDP 64 (Q from shared
             memory), 64-key tiles at the other widths up to 96 and 32-key tiles at 112 and 128
             (O's 128 fp32 a thread); above 128 v6's shape with the new grid order. Against
             the reasoning above this is less at hd 64 (no pipelining there) and at hd 128
             (32-key tiles: twice the O rescales per key); the predicted numbers are left as
             written.
ATTENTION_LADDER_HDS=64,72,128 (a comma list): only the validation shapes and benchmarks of
those head dims (scripts/gpu_check.sh's first call runs version 6 so, before anything else
of the ladder), version 6's benchmarks at each of them.
Validated against the CPU twin (llmc/kernels/cpu/attention.h, ref_attention[_full]_* of
cpu_reference) on random q, k, v, dout at odd sizes, in both modes: T not a multiple
of any tile, GQA ratios 1, 2, 3, 4 and MQA, hd from 6 to 256. Determinism: each
backward run twice, bitwise. Timed in both modes (full: twice the FLOPs of causal).
*/
#include "ladder.h"
#include "../../llmc/kernels/attention.cuh"
#include "../../llmc/kernels/attention_tc.cuh"           // version 4, forward
#include "../../llmc/kernels/attention_tc_backward.cuh"  // version 4, backward
#include "../../llmc/kernels/attention_tc2_backward.cuh" // version 7, backward
#include "../../llmc/kernels/rope.cuh"                   // version 5's unfused twin (rope_forward, rope_backward)
#include "../../llmc/kernels/attention_tc2.cuh"          // version 8, forward
#include <mma.h>
#include <algorithm>

// ---------------------------------------------------------------------------------
// version 1
__global__ void att_fwd_v1(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T,
                           int H, int KV, int hd, float scale, bool causal) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * H * T) return;
    int t = idx % T, h = (idx / T) % H, b = idx / (T * H);
    int kvh = h / (H / KV);
    const floatX* qt = q + (((size_t)b * T + t) * H + h) * hd;
    float o[ATT_MAX_HD];
    for (int d = 0; d < hd; d++) o[d] = 0.0f;
    float m = -INFINITY, l = 0.0f;
    const int n_keys = causal ? t + 1 : T;
    for (int u = 0; u < n_keys; u++) {
        const floatX* ku = k + (((size_t)b * T + u) * KV + kvh) * hd;
        const floatX* vu = v + (((size_t)b * T + u) * KV + kvh) * hd;
        float sc = 0.0f;
        for (int d = 0; d < hd; d++) sc += (float)qt[d] * (float)ku[d];
        sc *= scale;
        float m_new = fmaxf(m, sc);
        float corr = expf(m - m_new), p = expf(sc - m_new);
        l = l * corr + p;
        for (int d = 0; d < hd; d++) o[d] = o[d] * corr + p * (float)vu[d];
        m = m_new;
    }
    floatX* ot = out + (((size_t)b * T + t) * H + h) * hd;
    for (int d = 0; d < hd; d++) ot[d] = (floatX)(o[d] / l);
    lse[((size_t)b * H + h) * T + t] = m + logf(l);
}

__global__ void att_bwd_dq_v1(floatX* dq, const floatX* dout, const floatX* q, const floatX* k, const floatX* v,
                              const floatX* out, const float* lse, int B, int T, int H, int KV, int hd, float scale,
                              bool causal) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * H * T) return;
    int t = idx % T, h = (idx / T) % H, b = idx / (T * H);
    int kvh = h / (H / KV);
    size_t qi = (((size_t)b * T + t) * H + h) * hd;
    float delta = 0.0f;
    for (int d = 0; d < hd; d++) delta += (float)dout[qi + d] * (float)out[qi + d];
    float l = lse[((size_t)b * H + h) * T + t];
    float acc[ATT_MAX_HD];
    for (int d = 0; d < hd; d++) acc[d] = 0.0f;
    const int n_keys = causal ? t + 1 : T;
    for (int u = 0; u < n_keys; u++) {
        size_t ki = (((size_t)b * T + u) * KV + kvh) * hd;
        float sc = 0.0f, dp = 0.0f;
        for (int d = 0; d < hd; d++) {
            sc += (float)q[qi + d] * (float)k[ki + d];
            dp += (float)dout[qi + d] * (float)v[ki + d];
        }
        float p = expf(sc * scale - l);
        float ds = p * (dp - delta) * scale;
        for (int d = 0; d < hd; d++) acc[d] += ds * (float)k[ki + d];
    }
    for (int d = 0; d < hd; d++) dq[qi + d] = (floatX)acc[d];
}

__global__ void att_bwd_dkdv_v1(floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k,
                                const floatX* v, const floatX* out, const float* lse, int B, int T, int H, int KV,
                                int hd, float scale, bool causal) {
    int idx = blockIdx.x * blockDim.x + threadIdx.x;
    if (idx >= B * KV * T) return;
    int u = idx % T, kvh = (idx / T) % KV, b = idx / (T * KV);
    int group = H / KV;
    size_t ki = (((size_t)b * T + u) * KV + kvh) * hd;
    float ak[ATT_MAX_HD], av[ATT_MAX_HD];
    for (int d = 0; d < hd; d++) { ak[d] = 0.0f; av[d] = 0.0f; }
    for (int h = kvh * group; h < (kvh + 1) * group; h++)
        for (int t = causal ? u : 0; t < T; t++) {
            size_t qi = (((size_t)b * T + t) * H + h) * hd;
            float delta = 0.0f, sc = 0.0f, dp = 0.0f;
            for (int d = 0; d < hd; d++) {
                delta += (float)dout[qi + d] * (float)out[qi + d];
                sc += (float)q[qi + d] * (float)k[ki + d];
                dp += (float)dout[qi + d] * (float)v[ki + d];
            }
            float p = expf(sc * scale - lse[((size_t)b * H + h) * T + t]);
            float ds = p * (dp - delta) * scale;
            for (int d = 0; d < hd; d++) {
                av[d] += p * (float)dout[qi + d];
                ak[d] += ds * (float)q[qi + d];
            }
        }
    for (int d = 0; d < hd; d++) { dk[ki + d] = (floatX)ak[d]; dv[ki + d] = (floatX)av[d]; }
}

// ---------------------------------------------------------------------------------
// version 3: WMMA tensor cores (bf16 builds only). NOT YET VALIDATED ON A GPU.
#if !defined(ENABLE_FP32)
namespace v3 {
using namespace nvcuda;
typedef __nv_bfloat16 bf16;
constexpr int TQ = 64, TK = 64, WARPS = 4, THREADS = 32 * WARPS;  // warp w: rows (or keys) 16w .. 16w+15
constexpr int SS = TK + 4;   // fp32 score tile row stride (multiple of 4 for wmma float)
constexpr int PS = TK + 8;   // bf16 P / dS tile row stride (multiple of 8 for wmma bf16)
static_assert(TQ == TK, "the causal tile loops assume square tiles");
typedef wmma::fragment<wmma::matrix_a, 16, 16, 16, bf16, wmma::row_major> FragA;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::row_major> FragBr;
typedef wmma::fragment<wmma::matrix_b, 16, 16, 16, bf16, wmma::col_major> FragBc;
typedef wmma::fragment<wmma::accumulator, 16, 16, 16, float> FragC;

// Layout of the dynamic shared memory: every array starts at a multiple of 128 bytes
// and every 16x16 fragment pointer is a multiple of 32 bytes (wmma's requirement):
// rows are 16 apart, and row strides of (hd + 8) bf16 or (hd + 4), 68 floats give
// 16-row offsets that are multiples of 32 bytes when hd % 16 == 0.
struct Carve {
    unsigned char* p;
    template <class T> __device__ T* take(size_t n) {
        T* r = (T*)p;
        p += (n * sizeof(T) + 127) / 128 * 128;
        return r;
    }
};
static size_t rup(size_t b) { return (b + 127) / 128 * 128; }

__device__ __forceinline__ void load_tile_bf16(bf16* dst, int ld, const bf16* x, int b, int t0, int T, int nh, int h,
                                               int hd, int rows) {
    for (int idx = threadIdx.x; idx < rows * hd; idx += blockDim.x) {
        int r = idx / hd, d = idx % hd, t = t0 + r;
        dst[r * ld + d] = t < T ? x[(((size_t)b * T + t) * nh + h) * hd + d] : __float2bfloat16(0.0f);
    }
}
__device__ __forceinline__ float wsum(float v) {
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}
__device__ __forceinline__ float wmax(float v) {
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

// C (16 x 16, fp32, row-major in shared memory at c, ld ldc) = sum over kk of
// A[16 x 16 block kk] B[block kk]; A row-major; B row- or col-major per template
template <class FragB>
__device__ __forceinline__ void mma_tile(float* c, int ldc, const bf16* a, int lda, int a_step, const bf16* bm, int ldb,
                                         int b_step, int ksteps, bool accumulate) {
    FragC acc;
    if (accumulate) wmma::load_matrix_sync(acc, c, ldc, wmma::mem_row_major);
    else wmma::fill_fragment(acc, 0.0f);
    for (int kk = 0; kk < ksteps; kk++) {
        FragA fa;
        FragB fb;
        wmma::load_matrix_sync(fa, a + kk * a_step, lda);
        wmma::load_matrix_sync(fb, bm + kk * b_step, ldb);
        wmma::mma_sync(acc, fa, fb, acc);
    }
    wmma::store_matrix_sync(c, acc, ldc, wmma::mem_row_major);
}

static size_t smem_fwd(int hd) {
    int QS = hd + 8, OS = hd + 4;
    return 3 * rup((size_t)TQ * QS * 2) + rup((size_t)TQ * SS * 4) + rup((size_t)TQ * PS * 2) + rup((size_t)TQ * OS * 4) +
           3 * rup(TQ * 4);
}

__global__ void __launch_bounds__(THREADS) fwd_kernel(bf16* out, float* lse, const bf16* q, const bf16* k,
                                                      const bf16* v, int T, int H, int KV, int hd, float scale,
                                                      bool causal) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const int QS = hd + 8, OS = hd + 4;
    Carve cv{smem_raw};
    bf16* sQ = cv.take<bf16>((size_t)TQ * QS);
    bf16* sK = cv.take<bf16>((size_t)TK * QS);
    bf16* sV = cv.take<bf16>((size_t)TK * QS);
    float* sS = cv.take<float>((size_t)TQ * SS);
    bf16* sP = cv.take<bf16>((size_t)TQ * PS);
    float* sO = cv.take<float>((size_t)TQ * OS);
    float* sM = cv.take<float>(TQ);
    float* sL = cv.take<float>(TQ);
    float* sC = cv.take<float>(TQ);
    const int qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest tiles first
    const int kt_last = causal ? qt : gridDim.x - 1, h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (H / KV), q0 = qt * TQ;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, r0 = 16 * w;

    load_tile_bf16(sQ, QS, q, b, q0, T, H, h, hd, TQ);
    for (int i = threadIdx.x; i < TQ * OS; i += blockDim.x) sO[i] = 0.0f;
    for (int i = threadIdx.x; i < TQ; i += blockDim.x) { sM[i] = -INFINITY; sL[i] = 0.0f; }
    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * TK;
        __syncthreads();
        load_tile_bf16(sK, QS, k, b, k0, T, KV, kvh, hd, TK);
        load_tile_bf16(sV, QS, v, b, k0, T, KV, kvh, hd, TK);
        __syncthreads();
        // S[rows r0..r0+15][keys] = Q K^T: K^T read as a col-major matrix_b from sK
        for (int j = 0; j < TK / 16; j++)
            mma_tile<FragBc>(sS + r0 * SS + 16 * j, SS, sQ + r0 * QS, QS, 16, sK + 16 * j * QS, QS, 16, hd / 16, false);
        __syncwarp();
        for (int rr = 0; rr < 16; rr++) {
            const int r = r0 + rr, t = q0 + r;
            float s[2], p[2];
            bool valid[2];
            float mt = -INFINITY;
            for (int x = 0; x < 2; x++) {
                int j = lane + 32 * x, u = k0 + j;
                valid[x] = u < T && (!causal || u <= t);
                s[x] = sS[r * SS + j] * scale;
                if (valid[x]) mt = fmaxf(mt, s[x]);
            }
            mt = wmax(mt);
            const float m_old = sM[r], m_new = fmaxf(m_old, mt);
            float ps = 0.0f;
            for (int x = 0; x < 2; x++) {
                p[x] = valid[x] ? expf(s[x] - m_new) : 0.0f;
                ps += p[x];
                sP[r * PS + lane + 32 * x] = __float2bfloat16(p[x]);
            }
            ps = wsum(ps);
            const float corr = m_old == -INFINITY ? 0.0f : expf(m_old - m_new);
            __syncwarp();  // every lane has read sM[r] before lane 0 rewrites it
            if (lane == 0) { sM[r] = m_new; sL[r] = sL[r] * corr + ps; sC[r] = corr; }
        }
        __syncwarp();
        for (int rr = 0; rr < 16; rr++) {
            const int r = r0 + rr;
            const float corr = sC[r];
            for (int d = lane; d < hd; d += 32) sO[r * OS + d] *= corr;
        }
        __syncwarp();
        // O[rows][d] += P V: V read row-major [key][d]
        for (int n = 0; n < hd / 16; n++)
            mma_tile<FragBr>(sO + r0 * OS + 16 * n, OS, sP + r0 * PS, PS, 16, sV + 16 * n, QS, 16 * QS, TK / 16, true);
        __syncwarp();
    }
    for (int rr = 0; rr < 16; rr++) {
        const int r = r0 + rr, t = q0 + r;
        if (t >= T) continue;
        const float inv = 1.0f / sL[r];
        bf16* o = out + (((size_t)b * T + t) * H + h) * hd;
        for (int d = lane; d < hd; d += 32) o[d] = __float2bfloat16(sO[r * OS + d] * inv);
        if (lane == 0) lse[((size_t)b * H + h) * T + t] = sM[r] + logf(sL[r]);
    }
}

// lse and delta = dO . O of rows q0 .. q0+TQ-1 into sLse, sDelta (warp w: rows 16w..)
__device__ __forceinline__ void row_stats(float* sLse, float* sDelta, const bf16* sdO, int QS, const bf16* out,
                                          const float* lse, int b, int q0, int T, int H, int h, int hd) {
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5;
    for (int rr = 0; rr < 16; rr++) {
        const int r = 16 * w + rr, t = q0 + r;
        float dl = 0.0f;
        if (t < T) {
            const bf16* orow = out + (((size_t)b * T + t) * H + h) * hd;
            for (int d = lane; d < hd; d += 32) dl += __bfloat162float(sdO[r * QS + d]) * __bfloat162float(orow[d]);
        }
        dl = wsum(dl);
        if (lane == 0) { sDelta[r] = dl; sLse[r] = t < T ? lse[((size_t)b * H + h) * T + t] : 0.0f; }
    }
}

static size_t smem_dkdv(int hd) {
    int QS = hd + 8, OS = hd + 4;
    return 4 * rup((size_t)TQ * QS * 2) + 2 * rup((size_t)TK * SS * 4) + 2 * rup((size_t)TK * PS * 2) +
           2 * rup((size_t)TK * OS * 4) + 2 * rup(TQ * 4);
}

__global__ void __launch_bounds__(THREADS) dkdv_kernel(bf16* dk, bf16* dv, const bf16* dout, const bf16* q,
                                                       const bf16* k, const bf16* v, const bf16* out, const float* lse,
                                                       int T, int H, int KV, int hd, float scale, bool causal) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const int QS = hd + 8, OS = hd + 4;
    Carve cv{smem_raw};
    bf16* sK = cv.take<bf16>((size_t)TK * QS);
    bf16* sV = cv.take<bf16>((size_t)TK * QS);
    bf16* sQ = cv.take<bf16>((size_t)TQ * QS);
    bf16* sdO = cv.take<bf16>((size_t)TQ * QS);
    float* sSt = cv.take<float>((size_t)TK * SS);   // S^T [key][row]
    float* sdPt = cv.take<float>((size_t)TK * SS);  // dP^T [key][row]
    bf16* sPt = cv.take<bf16>((size_t)TK * PS);
    bf16* sdSt = cv.take<bf16>((size_t)TK * PS);
    float* sdK = cv.take<float>((size_t)TK * OS);
    float* sdV = cv.take<float>((size_t)TK * OS);
    float* sLse = cv.take<float>(TQ);
    float* sDelta = cv.take<float>(TQ);
    const int kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int group = H / KV, k0 = kt * TK, n_qt = (T + TQ - 1) / TQ;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, j0 = 16 * w;  // this warp's keys

    load_tile_bf16(sK, QS, k, b, k0, T, KV, kvh, hd, TK);
    load_tile_bf16(sV, QS, v, b, k0, T, KV, kvh, hd, TK);
    for (int i = threadIdx.x; i < TK * OS; i += blockDim.x) { sdK[i] = 0.0f; sdV[i] = 0.0f; }
    for (int h = kvh * group; h < (kvh + 1) * group; h++)
        for (int qt = causal ? kt : 0; qt < n_qt; qt++) {
            const int q0 = qt * TQ;
            __syncthreads();
            load_tile_bf16(sQ, QS, q, b, q0, T, H, h, hd, TQ);
            load_tile_bf16(sdO, QS, dout, b, q0, T, H, h, hd, TQ);
            __syncthreads();
            row_stats(sLse, sDelta, sdO, QS, out, lse, b, q0, T, H, h, hd);
            __syncthreads();
            // S^T[keys j0..][rows] = K Q^T and dP^T = V dO^T (Q^T, dO^T: col-major matrix_b)
            for (int n = 0; n < TQ / 16; n++) {
                mma_tile<FragBc>(sSt + j0 * SS + 16 * n, SS, sK + j0 * QS, QS, 16, sQ + 16 * n * QS, QS, 16, hd / 16, false);
                mma_tile<FragBc>(sdPt + j0 * SS + 16 * n, SS, sV + j0 * QS, QS, 16, sdO + 16 * n * QS, QS, 16, hd / 16,
                                 false);
            }
            __syncwarp();
            for (int jj = 0; jj < 16; jj++) {
                const int j = j0 + jj, u = k0 + j;
                for (int x = 0; x < 2; x++) {
                    const int r = lane + 32 * x, t = q0 + r;
                    const bool valid = t < T && u < T && (!causal || u <= t);
                    const float p = valid ? expf(sSt[j * SS + r] * scale - sLse[r]) : 0.0f;
                    const float ds = p * (sdPt[j * SS + r] - sDelta[r]) * scale;
                    sPt[j * PS + r] = __float2bfloat16(p);
                    sdSt[j * PS + r] = __float2bfloat16(ds);
                }
            }
            __syncwarp();
            // dV[keys][d] += P^T dO, dK[keys][d] += dS^T Q (dO, Q row-major [row][d])
            for (int n = 0; n < hd / 16; n++) {
                mma_tile<FragBr>(sdV + j0 * OS + 16 * n, OS, sPt + j0 * PS, PS, 16, sdO + 16 * n, QS, 16 * QS, TQ / 16, true);
                mma_tile<FragBr>(sdK + j0 * OS + 16 * n, OS, sdSt + j0 * PS, PS, 16, sQ + 16 * n, QS, 16 * QS, TQ / 16, true);
            }
        }
    __syncthreads();
    for (int i = threadIdx.x; i < TK * hd; i += blockDim.x) {
        int j = i / hd, d = i % hd, u = k0 + j;
        if (u < T) {
            size_t gi = (((size_t)b * T + u) * KV + kvh) * hd + d;
            dk[gi] = __float2bfloat16(sdK[j * OS + d]);
            dv[gi] = __float2bfloat16(sdV[j * OS + d]);
        }
    }
}

static size_t smem_dq(int hd) {
    int QS = hd + 8, OS = hd + 4;
    return 4 * rup((size_t)TQ * QS * 2) + 2 * rup((size_t)TQ * SS * 4) + rup((size_t)TQ * PS * 2) +
           rup((size_t)TQ * OS * 4) + 2 * rup(TQ * 4);
}

__global__ void __launch_bounds__(THREADS) dq_kernel(bf16* dq, const bf16* dout, const bf16* q, const bf16* k,
                                                     const bf16* v, const bf16* out, const float* lse, int T, int H,
                                                     int KV, int hd, float scale, bool causal) {
    extern __shared__ __align__(128) unsigned char smem_raw[];
    const int QS = hd + 8, OS = hd + 4;
    Carve cv{smem_raw};
    bf16* sQ = cv.take<bf16>((size_t)TQ * QS);
    bf16* sdO = cv.take<bf16>((size_t)TQ * QS);
    bf16* sK = cv.take<bf16>((size_t)TK * QS);
    bf16* sV = cv.take<bf16>((size_t)TK * QS);
    float* sS = cv.take<float>((size_t)TQ * SS);
    float* sdP = cv.take<float>((size_t)TQ * SS);
    bf16* sdS = cv.take<bf16>((size_t)TQ * PS);
    float* sdQ = cv.take<float>((size_t)TQ * OS);
    float* sLse = cv.take<float>(TQ);
    float* sDelta = cv.take<float>(TQ);
    const int qt = causal ? gridDim.x - 1 - blockIdx.x : blockIdx.x;  // causal: longest tiles first
    const int kt_last = causal ? qt : gridDim.x - 1, h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (H / KV), q0 = qt * TQ;
    const int lane = threadIdx.x & 31, w = threadIdx.x >> 5, r0 = 16 * w;

    load_tile_bf16(sQ, QS, q, b, q0, T, H, h, hd, TQ);
    load_tile_bf16(sdO, QS, dout, b, q0, T, H, h, hd, TQ);
    for (int i = threadIdx.x; i < TQ * OS; i += blockDim.x) sdQ[i] = 0.0f;
    __syncthreads();
    row_stats(sLse, sDelta, sdO, QS, out, lse, b, q0, T, H, h, hd);  // each warp its own rows
    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * TK;
        __syncthreads();
        load_tile_bf16(sK, QS, k, b, k0, T, KV, kvh, hd, TK);
        load_tile_bf16(sV, QS, v, b, k0, T, KV, kvh, hd, TK);
        __syncthreads();
        for (int j = 0; j < TK / 16; j++) {
            mma_tile<FragBc>(sS + r0 * SS + 16 * j, SS, sQ + r0 * QS, QS, 16, sK + 16 * j * QS, QS, 16, hd / 16, false);
            mma_tile<FragBc>(sdP + r0 * SS + 16 * j, SS, sdO + r0 * QS, QS, 16, sV + 16 * j * QS, QS, 16, hd / 16, false);
        }
        __syncwarp();
        for (int rr = 0; rr < 16; rr++) {
            const int r = r0 + rr, t = q0 + r;
            for (int x = 0; x < 2; x++) {
                const int j = lane + 32 * x, u = k0 + j;
                const bool valid = t < T && u < T && (!causal || u <= t);
                const float p = valid ? expf(sS[r * SS + j] * scale - sLse[r]) : 0.0f;
                sdS[r * PS + j] = __float2bfloat16(p * (sdP[r * SS + j] - sDelta[r]) * scale);
            }
        }
        __syncwarp();
        // dQ[rows][d] += dS K (K row-major [key][d])
        for (int n = 0; n < hd / 16; n++)
            mma_tile<FragBr>(sdQ + r0 * OS + 16 * n, OS, sdS + r0 * PS, PS, 16, sK + 16 * n, QS, 16 * QS, TK / 16, true);
    }
    __syncthreads();
    for (int i = threadIdx.x; i < TQ * hd; i += blockDim.x) {
        int r = i / hd, d = i % hd, t = q0 + r;
        if (t < T) dq[(((size_t)b * T + t) * H + h) * hd + d] = __float2bfloat16(sdQ[r * OS + d]);
    }
}

static bool supported(int hd) { return hd % 16 == 0 && hd <= 128; }

static void forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T, int H,
                    int KV, int hd, bool causal) {
    size_t smem = smem_fwd(hd);
    att_prepare_smem((const void*)fwd_kernel, smem, "attention v3 forward");
    dim3 grid((unsigned)ceil_div(T, TQ), H, B);
    fwd_kernel<<<grid, THREADS, smem>>>(out, lse, q, k, v, T, H, KV, hd, 1.0f / sqrtf((float)hd), causal);
    cudaCheck(cudaGetLastError());
}
static void backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k,
                     const floatX* v, const floatX* out, const float* lse, int B, int T, int H, int KV, int hd,
                     bool causal) {
    const float scale = 1.0f / sqrtf((float)hd);
    unsigned nt = (unsigned)ceil_div(T, TQ);
    size_t s1 = smem_dkdv(hd), s2 = smem_dq(hd);
    att_prepare_smem((const void*)dkdv_kernel, s1, "attention v3 dkdv");
    dkdv_kernel<<<dim3(nt, KV, B), THREADS, s1>>>(dk, dv, dout, q, k, v, out, lse, T, H, KV, hd, scale, causal);
    cudaCheck(cudaGetLastError());
    att_prepare_smem((const void*)dq_kernel, s2, "attention v3 dq");
    dq_kernel<<<dim3(nt, H, B), THREADS, s2>>>(dq, dout, q, k, v, out, lse, T, H, KV, hd, scale, causal);
    cudaCheck(cudaGetLastError());
}
}  // namespace v3
#endif

// ---------------------------------------------------------------------------------
// version 8: the tc2 forward (llmc/kernels/attention_tc2.cuh); its backward is version 6's
namespace v8 {
static bool supported(int hd) {
#if defined(ENABLE_FP32)
    (void)hd;
    return false;
#else
    return attention_tc_supported_hd(hd);
#endif
}
static void forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T, int H,
                    int KV, int hd, bool causal) {
    if (causal) attention_tc2_forward(out, lse, q, k, v, B, T, H, KV, hd, 0);
    else attention_tc2_full_forward(out, lse, q, k, v, B, T, H, KV, hd, 0);
}
}  // namespace v8

// ---------------------------------------------------------------------------------
static bool version_supports(int version, int hd) {
#if defined(ENABLE_FP32)
    (void)hd;
    return version < 3;  // tensor-core bf16 versions: not in fp32 builds
#else
    if (version == 4) return hd == 64 || hd == 128;  // the head dims it had on the H200
    if (version == 5) return attention_tc_rope_supported_hd(hd);
    if (version == 6 || version == 7) return attention_tc_supported_hd(hd);
    if (version == 8) return v8::supported(hd);
    return version != 3 || v3::supported(hd);
#endif
}
// floats of scratch a version's backward needs (version 4: delta = rowsum(dO * O); version 7:
// its workspace, delta included, the same in both modes)
static size_t scratch_floats(int version, int B, int T, int H, int KV, int hd) {
#if !defined(ENABLE_FP32)
    if (version == 7) return attention_tc2_workspace_floats(B, T, H, KV, hd, true);
    if (version >= 4) return attention_tc_delta_floats(B, H, T);
#endif
    (void)version; (void)B; (void)T; (void)H; (void)KV; (void)hd;
    return 0;
}

// version 5's RoPE tables [T, hd/2] on the device (set by run_version / bench_version)
static float *g_rope_cos = nullptr, *g_rope_sin = nullptr;
// cos/sin of t * 10000^(-2i/hd) (the trainer's tables) for t < T, uploaded to g_rope_cos/sin
static void rope_tables_upload(int T, int hd, std::vector<float>& ct, std::vector<float>& st) {
    const int half = hd / 2;
    ct.assign((size_t)T * half, 0.0f);
    st.assign((size_t)T * half, 0.0f);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {
            const double a = t * pow(10000.0, -2.0 * i / hd);
            ct[(size_t)t * half + i] = (float)cos(a);
            st[(size_t)t * half + i] = (float)sin(a);
        }
    g_rope_cos = upload_f(ct);
    g_rope_sin = upload_f(st);
}
static void rope_tables_free() {
    dev_free(g_rope_cos);
    dev_free(g_rope_sin);
    g_rope_cos = g_rope_sin = nullptr;
}

// causal: attention_forward / attention_backward; else the full (non-causal) mode,
// attention_full_forward / attention_full_backward
static void fwd(int version, bool causal, floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                int B, int T, int H, int KV, int hd) {
    if (version == 1) {
        int n = B * H * T;
        att_fwd_v1<<<(unsigned)ceil_div(n, 128), 128>>>(out, lse, q, k, v, B, T, H, KV, hd, 1.0f / sqrtf((float)hd),
                                                         causal);
        cudaCheck(cudaGetLastError());
    } else if (version == 2) {
        if (causal) attention_forward(out, lse, q, k, v, B, T, H, KV, hd, 0);
        else attention_full_forward(out, lse, q, k, v, B, T, H, KV, hd, 0);
    } else if (version == 3) {
#if !defined(ENABLE_FP32)
        v3::forward(out, lse, q, k, v, B, T, H, KV, hd, causal);
#endif
    } else if (version == 8) {
        v8::forward(out, lse, q, k, v, B, T, H, KV, hd, causal);
    } else if (version == 4 || version == 6 || version == 7) {  // 7: its backward's checks and bench on v6's forward
        if (causal) attention_tc_forward(out, lse, q, k, v, B, T, H, KV, hd, 0);
        else attention_tc_full_forward(out, lse, q, k, v, B, T, H, KV, hd, 0);
    } else {
        if (causal) attention_tc_forward_rope(out, lse, q, k, v, g_rope_cos, g_rope_sin, B, T, H, KV, hd, 0);
        else attention_tc_full_forward_rope(out, lse, q, k, v, g_rope_cos, g_rope_sin, B, T, H, KV, hd, 0);
    }
}
static void bwd(int version, bool causal, floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                const floatX* k, const floatX* v, const floatX* out, const float* lse, float* scratch, int B, int T, int H,
                int KV, int hd) {
    if (version == 1) {
        float scale = 1.0f / sqrtf((float)hd);
        att_bwd_dq_v1<<<(unsigned)ceil_div(B * H * T, 128), 128>>>(dq, dout, q, k, v, out, lse, B, T, H, KV, hd, scale,
                                                                    causal);
        cudaCheck(cudaGetLastError());
        att_bwd_dkdv_v1<<<(unsigned)ceil_div(B * KV * T, 128), 128>>>(dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd,
                                                                      scale, causal);
        cudaCheck(cudaGetLastError());
    } else if (version == 2) {
        if (causal) attention_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, 0);
        else attention_full_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, 0);
    } else if (version == 3) {
#if !defined(ENABLE_FP32)
        v3::backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, causal);
#endif
    } else if (version == 4 || version == 6 || version == 8) {  // v8: v6's backward (the same lse)
        if (causal) attention_tc_backward(dq, dk, dv, dout, q, k, v, out, lse, scratch, B, T, H, KV, hd, 0);
        else attention_tc_full_backward(dq, dk, dv, dout, q, k, v, out, lse, scratch, B, T, H, KV, hd, 0);
    } else if (version == 7) {
        if (causal) attention_tc2_backward(dq, dk, dv, dout, q, k, v, out, lse, scratch, B, T, H, KV, hd, 0);
        else attention_tc2_full_backward(dq, dk, dv, dout, q, k, v, out, lse, scratch, B, T, H, KV, hd, 0);
    } else {
        if (causal)
            attention_tc_backward_rope(dq, dk, dv, dout, q, k, v, out, lse, scratch, g_rope_cos, g_rope_sin, B, T, H, KV,
                                       hd, 0);
        else
            attention_tc_full_backward_rope(dq, dk, dv, dout, q, k, v, out, lse, scratch, g_rope_cos, g_rope_sin, B, T, H,
                                            KV, hd, 0);
    }
}

struct Shape { int B, T, H, KV, hd; };

static void run_version(int version, bool causal, const Shape& s, uint64_t seed) {
    const int B = s.B, T = s.T, H = s.H, KV = s.KV, hd = s.hd;
    const char* mode = causal ? "causal" : "full";
    if (!version_supports(version, hd)) {
        printf(version >= 4 ? "  v%d %s B=%d T=%d H=%d KV=%d hd=%d: skipped (v4, v5 need a bf16 build, hd 64 or 128; "
                              "v6, v7, v8 a multiple of 8 from 32 to 256)\n"
                            : "  v%d %s B=%d T=%d H=%d KV=%d hd=%d: skipped (v3 needs a bf16 build, hd %% 16 == 0, hd <= 128)\n",
               version, mode, B, T, H, KV, hd);
        return;
    }
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    // scores q.k*scale have std ~ 0.6 with uniform(-1.5, 1.5): the softmax is neither flat nor one-hot
    std::vector<float> q = rand_floatX(nq, -1.5f, 1.5f, seed + 1), k = rand_floatX(nk, -1.5f, 1.5f, seed + 2);
    std::vector<float> v = rand_floatX(nk, -1.0f, 1.0f, seed + 3), dout = rand_floatX(nq, -1.0f, 1.0f, seed + 4);
    std::vector<float> r_out(nq), r_lse(nl), r_dq(nq), r_dk(nk), r_dv(nk);
    // version 5 takes q, k unrotated: the reference attends over them rotated and rounded to
    // floatX (what rope_forward would have stored)
    std::vector<float> qa = q, ka = k, ct, st;
    if (version == 5) {
        rope_tables_upload(T, hd, ct, st);
        ref_rope_forward(qa.data(), q.data(), ct.data(), st.data(), B, T, H, hd);
        ref_rope_forward(ka.data(), k.data(), ct.data(), st.data(), B, T, KV, hd);
        for (auto& x : qa) x = round_floatX(x);
        for (auto& x : ka) x = round_floatX(x);
    }
    (causal ? ref_attention_forward : ref_attention_full_forward)(r_out.data(), r_lse.data(), qa.data(), ka.data(),
                                                                  v.data(), B, T, H, KV, hd);
    floatX *d_q = upload_x(q), *d_k = upload_x(k), *d_v = upload_x(v), *d_dout = upload_x(dout);
    floatX* d_out = (floatX*)dev_malloc(nq * sizeof(floatX));
    float* d_lse = (float*)dev_malloc(nl * sizeof(float));
    floatX *d_dq = (floatX*)dev_malloc(nq * sizeof(floatX)), *d_dk = (floatX*)dev_malloc(nk * sizeof(floatX));
    floatX* d_dv = (floatX*)dev_malloc(nk * sizeof(floatX));
    const size_t ns = scratch_floats(version, B, T, H, KV, hd);
    float* d_scratch = ns ? (float*)dev_malloc(ns * sizeof(float)) : nullptr;
    // poison the outputs: every element must be written
    cudaCheck(cudaMemset(d_out, 0xff, nq * sizeof(floatX)));
    cudaCheck(cudaMemset(d_lse, 0xff, nl * sizeof(float)));
    cudaCheck(cudaMemset(d_dq, 0xff, nq * sizeof(floatX)));
    cudaCheck(cudaMemset(d_dk, 0xff, nk * sizeof(floatX)));
    cudaCheck(cudaMemset(d_dv, 0xff, nk * sizeof(floatX)));

    printf("  v%d %s B=%d T=%d H=%d KV=%d hd=%d\n", version, mode, B, T, H, KV, hd);
    fwd(version, causal, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
    // Tolerances. Inputs are identical (floatX-rounded). fp32 builds: sums over up to
    // T*group terms in another order and expf differences: ~1e-6 relative, 1e-4 with
    // margin. bf16 builds: outputs are rounded once (<= 2^-8 relative, 8 significant
    // bits) -> rtol = atol/rms = 2^-7 for v1/v2; v3 also rounds P and dS to bf16 before
    // the tensor-core products: noise of std ~0.5% of the rms on top of the final
    // rounding (measured on a host emulation of this kernel), max over 10^4 elements
    // ~4 sigma -> 3e-2.
    // v4 rounds P (and in its backward dS) to bf16 as v3 does: the same tolerances
    double rt = LADDER_FP32 ? 1e-4 : (version >= 3 ? 3e-2 : ldexp(1.0, -7));
    std::vector<float> g_out = download_x(d_out, nq);
    check("forward out", g_out, r_out, rt * rms_of(r_out), rt);
    // lse is fp32 in every build: max + log(sum), sum of exp in another order (1e-5);
    // v3's scores come from tensor-core fp32 accumulation: 1e-4
    double lt = version >= 3 ? 1e-4 : 1e-5;
    check("forward lse", download_f(d_lse, nl), r_lse, lt, lt);
    if (version == 8) {  // a second run, bitwise (no atomics, a fixed order)
        const std::vector<float> g_lse = download_f(d_lse, nl);
        fwd(version, causal, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd);
        check_same("forward out", download_x(d_out, nq), g_out);
        check_same("forward lse", download_f(d_lse, nl), g_lse);
    }
    // the backward is checked on the GPU's own out and lse (what training uses); the
    // CPU reference is given the same out (floatX-rounded) and the CPU lse
    (causal ? ref_attention_backward : ref_attention_full_backward)(r_dq.data(), r_dk.data(), r_dv.data(), dout.data(),
                                                                    qa.data(), ka.data(), v.data(), g_out.data(),
                                                                    r_lse.data(), B, T, H, KV, hd);
    if (version == 5) {  // back to the unrotated q, k (in place is allowed)
        ref_rope_backward(r_dq.data(), r_dq.data(), ct.data(), st.data(), B, T, H, hd);
        ref_rope_backward(r_dk.data(), r_dk.data(), ct.data(), st.data(), B, T, KV, hd);
    }
    bwd(version, causal, d_dq, d_dk, d_dv, d_dout, d_q, d_k, d_v, d_out, d_lse, d_scratch, B, T, H, KV, hd);
    std::vector<float> g_dq = download_x(d_dq, nq), g_dk = download_x(d_dk, nk), g_dv = download_x(d_dv, nk);
    // + 1e-5: with T = 1 the exact dq and dk are 0 (dP - delta cancels), and the GPU sums
    // dP and delta in different orders, leaving ~1e-8
    check("backward dq", g_dq, r_dq, rt * rms_of(r_dq) + 1e-5, rt);
    check("backward dk", g_dk, r_dk, rt * rms_of(r_dk) + 1e-5, rt);
    check("backward dv", g_dv, r_dv, rt * rms_of(r_dv) + 1e-5, rt);
    bwd(version, causal, d_dq, d_dk, d_dv, d_dout, d_q, d_k, d_v, d_out, d_lse, d_scratch, B, T, H, KV, hd);
    check_same("backward dq", download_x(d_dq, nq), g_dq);
    check_same("backward dk", download_x(d_dk, nk), g_dk);
    check_same("backward dv", download_x(d_dv, nk), g_dv);
    if (version == 5) {  // the unfused composition on the device (rope_forward, version 4, rope_backward): the
        // forward bit for bit; dq and dk within one bf16 rounding (2^-7 relative at most), because
        // the fused backward rotates them in fp32 and rounds once where the unfused one rounds,
        // rotates and rounds again (seen on the H200: 1 element in 10^4 differs by one bf16 step)
        floatX *d_qr = (floatX*)dev_malloc(nq * sizeof(floatX)), *d_kr = (floatX*)dev_malloc(nk * sizeof(floatX));
        rope_forward(d_qr, d_q, g_rope_cos, g_rope_sin, B, T, H, hd, 0);
        rope_forward(d_kr, d_k, g_rope_cos, g_rope_sin, B, T, KV, hd, 0);
        fwd(4, causal, d_out, d_lse, d_qr, d_kr, d_v, B, T, H, KV, hd);
        check("unfused out (exact)", download_x(d_out, nq), g_out, 0.0, 0.0);
        bwd(4, causal, d_dq, d_dk, d_dv, d_dout, d_qr, d_kr, d_v, d_out, d_lse, d_scratch, B, T, H, KV, hd);
        rope_backward(d_dq, d_dq, g_rope_cos, g_rope_sin, B, T, H, hd, 0);
        rope_backward(d_dk, d_dk, g_rope_cos, g_rope_sin, B, T, KV, hd, 0);
        const double one_rounding = LADDER_FP32 ? 0.0 : ldexp(1.0, -7);
        check("unfused dq (one rounding)", download_x(d_dq, nq), g_dq, 0.0, one_rounding);
        check("unfused dk (one rounding)", download_x(d_dk, nk), g_dk, 0.0, one_rounding);
        check("unfused dv (exact)", download_x(d_dv, nk), g_dv, 0.0, 0.0);
        dev_free(d_qr); dev_free(d_kr);
        rope_tables_free();
    }
    dev_free(d_q); dev_free(d_k); dev_free(d_v); dev_free(d_dout); dev_free(d_out); dev_free(d_lse);
    dev_free(d_dq); dev_free(d_dk); dev_free(d_dv);
    if (d_scratch) dev_free(d_scratch);
}

static void bench_version(int version, bool causal, int B, int T, int H, int KV, int hd) {
    if (!version_supports(version, hd)) return;
    size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    floatX *d_q = upload_x(rand_floatX(nq, -1.5f, 1.5f, 1)), *d_k = upload_x(rand_floatX(nk, -1.5f, 1.5f, 2));
    floatX *d_v = upload_x(rand_floatX(nk, -1.0f, 1.0f, 3)), *d_dout = upload_x(rand_floatX(nq, -1.0f, 1.0f, 4));
    floatX* d_out = (floatX*)dev_malloc(nq * sizeof(floatX));
    float* d_lse = (float*)dev_malloc(nl * sizeof(float));
    floatX *d_dq = (floatX*)dev_malloc(nq * sizeof(floatX)), *d_dk = (floatX*)dev_malloc(nk * sizeof(floatX));
    floatX* d_dv = (floatX*)dev_malloc(nk * sizeof(floatX));
    const size_t ns = scratch_floats(version, B, T, H, KV, hd);
    float* d_scratch = ns ? (float*)dev_malloc(ns * sizeof(float)) : nullptr;
    std::vector<float> ct, st;
    if (version == 5) rope_tables_upload(T, hd, ct, st);
    int reps = version == 1 ? 1 : 10;
    float tf = bench_ms([&] { fwd(version, causal, d_out, d_lse, d_q, d_k, d_v, B, T, H, KV, hd); }, reps);
    float tb = bench_ms(
        [&] { bwd(version, causal, d_dq, d_dk, d_dv, d_dout, d_q, d_k, d_v, d_out, d_lse, d_scratch, B, T, H, KV, hd); },
        reps);
    // 4*B*H*T*T*hd for QK^T and PV, half of it when causal; backward counted as 2.5x forward (FA2 convention)
    double flop = (causal ? 2.0 : 4.0) * B * H * (double)T * T * hd;
    printf("  v%d bench %s B=%d T=%d H=%d KV=%d hd=%d: forward %.3f ms (%.2f TFLOP/s), backward %.3f ms (%.2f TFLOP/s)\n",
           version, causal ? "causal" : "full", B, T, H, KV, hd, tf, flop / tf * 1e-9, tb, 2.5 * flop / tb * 1e-9);
    if (version == 5) {  // what it replaces: rope_forward on q, k + version 4; version 4 + rope_backward on dq, dk
        floatX *d_qr = (floatX*)dev_malloc(nq * sizeof(floatX)), *d_kr = (floatX*)dev_malloc(nk * sizeof(floatX));
        float uf = bench_ms([&] {
            rope_forward(d_qr, d_q, g_rope_cos, g_rope_sin, B, T, H, hd, 0);
            rope_forward(d_kr, d_k, g_rope_cos, g_rope_sin, B, T, KV, hd, 0);
            fwd(4, causal, d_out, d_lse, d_qr, d_kr, d_v, B, T, H, KV, hd);
        }, reps);
        float ub = bench_ms([&] {
            bwd(4, causal, d_dq, d_dk, d_dv, d_dout, d_qr, d_kr, d_v, d_out, d_lse, d_scratch, B, T, H, KV, hd);
            rope_backward(d_dq, d_dq, g_rope_cos, g_rope_sin, B, T, H, hd, 0);
            rope_backward(d_dk, d_dk, g_rope_cos, g_rope_sin, B, T, KV, hd, 0);
        }, reps);
        printf("  v5 bench %s B=%d T=%d H=%d KV=%d hd=%d: unfused (rope launches + v4): forward %.3f ms, backward %.3f ms; "
               "fused saves %.3f + %.3f ms\n", causal ? "causal" : "full", B, T, H, KV, hd, uf, ub, uf - tf, ub - tb);
        dev_free(d_qr); dev_free(d_kr);
        rope_tables_free();
    }
    dev_free(d_q); dev_free(d_k); dev_free(d_v); dev_free(d_dout); dev_free(d_out); dev_free(d_lse);
    dev_free(d_dq); dev_free(d_dk); dev_free(d_dv);
    if (d_scratch) dev_free(d_scratch);
}

// ATTENTION_LADDER_HDS (see the top): the head dims to run, empty for all
static std::vector<int> ladder_hds() {
    std::vector<int> v;
    const char* e = getenv("ATTENTION_LADDER_HDS");
    for (const char* p = e; p && *p;) {
        char* end;
        const long x = strtol(p, &end, 10);
        if (end == p || x <= 0) { fprintf(stderr, "ATTENTION_LADDER_HDS=%s: expected head dims like 64,72,128\n", e); exit(2); }
        v.push_back((int)x);
        p = *end == ',' ? end + 1 : end;
    }
    return v;
}
static bool hd_wanted(const std::vector<int>& hds, int hd) {
    return hds.empty() || std::find(hds.begin(), hds.end(), hd) != hds.end();
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "attention", 8);
    const std::vector<int> hds = ladder_hds();
    const Shape shapes[] = {
        {1, 7, 4, 2, 6},    {2, 33, 6, 2, 8},  {1, 65, 4, 1, 12},  {2, 100, 6, 3, 48}, {1, 70, 2, 2, 64},
        {1, 40, 2, 1, 256}, {1, 37, 2, 2, 130}, {1, 130, 4, 2, 64}, {2, 64, 2, 1, 16},  {1, 200, 2, 2, 128},
        {1, 1, 1, 1, 2},
        // small and ragged T at head sizes version 3 accepts (hd % 16 == 0), GQA ratio 3
        {1, 1, 1, 1, 16},   {2, 7, 4, 2, 16},  {1, 33, 2, 1, 32},  {1, 63, 2, 2, 80}, {1, 129, 3, 1, 112},
        // head sizes version 4 accepts (64, 128): T = 1, ragged tiles, GQA ratio 4
        {1, 1, 2, 1, 64},   {2, 65, 4, 1, 128}, {1, 63, 4, 1, 64},
        // version 6's: dit-XL's 72, 40, 96, and the second configuration (136, 200) with
        // ragged T, GQA 2, 3 and 4 (48, 80, 112 and 256 are above)
        {2, 130, 4, 2, 72}, {1, 65, 3, 1, 40},  {1, 100, 4, 1, 96}, {1, 97, 2, 1, 136}, {2, 70, 4, 2, 200},
    };
    const char* names[] = {"", "naive, thread per row", "flash tiles fp32 (llmc)",
                           "WMMA bf16 tensor cores",
                           "mma.sync/ldmatrix/cp.async tensor cores, FlashAttention-2 style (llmc/kernels/attention_tc.cuh)",
                           "version 4 with RoPE fused into the tile loads and stores (slower than v4 + rope launches on the H200: off in the trainers)",
                           "version 4 at every head dim that is a multiple of 8 from 32 to 256 (zero-padded to 16, second configuration above 128)",
                           "tc2 backward: one pass, five matmuls, dQ through an fp32 workspace reduced in key-tile order (llmc/kernels/attention_tc2_backward.cuh; forward: v6's)",
                           "tc2 forward: 128-row query tiles, two row slices a warp, S_{j+1} before softmax j where registers allow (llmc/kernels/attention_tc2.cuh); v6's backward"};
    for (int version = 1; version <= 8; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, names[version]);
        for (int causal = 1; causal >= 0; causal--) {
            uint64_t seed = 800;  // the same inputs in both modes
            for (const Shape& s : shapes) {
                if (hd_wanted(hds, s.hd)) run_version(version, causal, s, seed);
                seed++;
            }
        }
        if (!ladder_quick() && !hds.empty()) {  // only the head dims asked for, at version 6's shapes
            for (int hd : hds) {
                if (version < 4) break;  // the naive and fp32 versions would take minutes at T = 16384
                bench_version(version, true, 4, 2048, 32, 8, hd);
                bench_version(version, false, 1, 16384, 16, 16, hd);
            }
        } else if (!ladder_quick()) {
            bench_version(version, true, 4, 1024, 32, 8, 64);
            bench_version(version, false, 4, 1024, 32, 8, 64);
            if (version >= 2 && version < 6) {  // llama3-1B-like heads (hd 64, GQA 4) at T = 2048, and hd 128
                bench_version(version, true, 4, 2048, 32, 8, 64);
                bench_version(version, true, 2, 2048, 16, 4, 128);
                bench_version(version, false, 2, 2048, 16, 4, 128);
            }
            if (version == 6)  // its predictions (the header): llama3-1B's and dit-XL's shapes at hd 72 and 128
                for (int hd : {72, 128}) {
                    bench_version(version, true, 4, 2048, 32, 8, hd);
                    bench_version(version, false, 1, 16384, 16, 16, hd);
                }
            if (version == 8)  // its predictions (the header), each beside version 6 at the same shape
                for (int v : {8, 6}) {
                    bench_version(v, true, 4, 2048, 32, 8, 64);
                    bench_version(v, true, 4, 2048, 32, 8, 72);
                    bench_version(v, false, 2, 2048, 16, 16, 128);
                    bench_version(v, false, 2, 2048, 16, 4, 128);
                    bench_version(v, false, 1, 16384, 16, 16, 72);
                }
            if (version == 7) {  // its predictions (the header), and v4's hd-128 shapes
                bench_version(version, true, 4, 2048, 32, 8, 64);
                bench_version(version, true, 2, 2048, 16, 4, 128);
                bench_version(version, false, 2, 2048, 16, 4, 128);
                bench_version(version, false, 1, 16384, 16, 16, 72);
                bench_version(version, true, 4, 2048, 32, 8, 72);
            }
        }
    }
    return ladder_finish("attention");
}
