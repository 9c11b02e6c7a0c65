/*
Attention with grouped-query heads, flash-style. CPU twin: llmc/kernels/cpu/attention.h (same
signatures and semantics).
q, out: [B, T, H, hd]; k, v: [B, T, KV, hd]; lse: [B, H, T] fp32. Scale 1/sqrt(hd).
KV head j serves q heads j*H/KV .. (j+1)*H/KV - 1.
Two modes of the same kernels, chosen by their `causal` argument:
  attention_forward / attention_backward: causal, query t sees keys u <= t (Llama);
  attention_full_forward / attention_full_backward: non-causal, every query sees all T
  keys (the video DiT, docs/design.md 9.3).
The mode is a kernel argument, not a template parameter: it is uniform over the grid,
so its branches cost a few integer instructions per score next to an hd-long dot
product, and there stays one kernel per job (the emulator's coverage check names
kernels without template arguments). Full mode differs only in its loop bounds, its
tile order and its mask; it costs twice the causal FLOPs.

Why this shape: memory must be O(T) (no [T, T] buffer ever exists), and the
backward must be deterministic (no float atomics), so that resume and offload
stay bit-exact. All math is fp32 on CUDA cores; tiles of 32 queries x 32 keys
live in shared memory (fp32, rows padded to hd + 1 floats so that reading a
column across lanes hits 32 different banks). 256 threads = 8 warps per block;
warp w always owns rows w, w+8, w+16, w+24 of a tile, and lane = key index
within the key tile when computing scores. Any hd up to 256 works (the row loops
stride by 32 lanes); shared memory is sized from hd at launch.

forward (attention_forward_kernel): one block per (query tile, head, batch),
query tiles scheduled longest-first (full mode: every tile is equally long, in grid
order). For each key tile 0..diagonal (full mode: every key tile): load K, V;
each warp computes its rows' scores (lane = key), masks u > t (causal) and u >= T,
does the online-softmax update (running max m and sum l in registers of the owning
warp), writes P to shared memory and rescales + accumulates its rows of O (lane = dim).
Writes out = O / l and lse = m + log(l).

backward, two kernels, no atomics, both deterministic:
  attention_backward_dkdv_kernel: one block per (key tile, kv head, batch). It
    keeps K, V and fp32 accumulators dK, dV in shared memory and loops over the
    q heads of the group and over the query tiles at or after the key tile (full
    mode: every query tile), in that fixed order. Per query tile: load Q, dO;
    delta_r = dO_r . O_r; P = exp(S*scale - lse) recomputed, dP = dO V^T,
    dS = P (dP - delta) scale; then dV_j += sum_r P_rj dO_r and dK_j += sum_r dS_rj Q_r
    (thread = (key, dim)).
  attention_backward_dq_kernel: one block per (query tile, head, batch); loops
    over key tiles 0..diagonal (full mode: all) recomputing P and dS,
    dQ_r += sum_j dS_rj K_j.
  dq, dk, dv are overwritten, as in the CPU twin.
The recomputation of S and dP in both kernels is the price of no atomics.
The tensor-core version (bf16, head dims 32..256 in steps of 8) is llmc/kernels/attention_tc.cuh, chosen by
--attention tc (llmc/kernels/attention_select.h); auto picks tc only at the head dims where it has passed on a
GPU (64 and 128) and these otherwise.
*/
#pragma once
#include "../core/common.h"

#define ATT_TILE 32    // queries per tile = keys per tile = warp size
#define ATT_THREADS 256
#define ATT_WARPS (ATT_THREADS / 32)
#define ATT_ROWS_PER_WARP (ATT_TILE / ATT_WARPS)  // 4
#define ATT_MAX_HD 256

static __device__ __forceinline__ float att_warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1) v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}
static __device__ __forceinline__ float att_warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

// rows [t0, t0 + ATT_TILE) of one head of x ([B, T, nh, hd]) into dst [ATT_TILE][hp], zeros past T
static __device__ __forceinline__ void att_load_tile(float* dst, const floatX* x, int b, int t0, int T, int nh, int h,
                                                     int hd, int hp) {
    for (int idx = threadIdx.x; idx < ATT_TILE * hd; idx += blockDim.x) {
        int r = idx / hd, d = idx % hd, t = t0 + r;
        dst[r * hp + d] = t < T ? (float)x[(((size_t)b * T + t) * nh + h) * hd + d] : 0.0f;
    }
}

// ---------------------------------------------------------------------------------
// forward
__global__ void __launch_bounds__(ATT_THREADS) attention_forward_kernel(floatX* out, float* lse, const floatX* q,
                                                                        const floatX* k, const floatX* v, int T, int H,
                                                                        int KV, int hd, float scale, bool causal) {
    extern __shared__ float smem[];
    const int hp = hd + 1;
    float* sQ = smem;                    // [TILE][hp]
    float* sK = sQ + ATT_TILE * hp;      // [TILE][hp]
    float* sV = sK + ATT_TILE * hp;      // [TILE][hp]
    float* sO = sV + ATT_TILE * hp;      // [TILE][hp]
    float* sP = sO + ATT_TILE * hp;      // [TILE][TILE]
    const int n_t = gridDim.x;           // query tiles = key tiles
    const int qt = causal ? n_t - 1 - blockIdx.x : blockIdx.x;  // causal: longest tiles first
    const int kt_last = causal ? qt : n_t - 1;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (H / KV);
    const int q0 = qt * ATT_TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    att_load_tile(sQ, q, b, q0, T, H, h, hd, hp);
    for (int idx = threadIdx.x; idx < ATT_TILE * hp; idx += blockDim.x) sO[idx] = 0.0f;
    float m[ATT_ROWS_PER_WARP], l[ATT_ROWS_PER_WARP];
    #pragma unroll
    for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) { m[rr] = -INFINITY; l[rr] = 0.0f; }

    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();  // sQ/sO initialised; the previous tile's sK/sV no longer read
        att_load_tile(sK, k, b, k0, T, KV, kvh, hd, hp);
        att_load_tile(sV, v, b, k0, T, KV, kvh, hd, hp);
        __syncthreads();
        #pragma unroll
        for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
            const int r = warp + rr * ATT_WARPS, t = q0 + r;
            const int j = lane, u = k0 + j;
            const float* qr = sQ + r * hp;
            const float* kj = sK + j * hp;
            float sc = 0.0f;
            for (int d = 0; d < hd; d++) sc += qr[d] * kj[d];
            sc *= scale;
            const bool valid = u < T && (!causal || u <= t);
            const float m_tile = att_warp_max(valid ? sc : -INFINITY);
            const float m_new = fmaxf(m[rr], m_tile);
            const float p = valid ? expf(sc - m_new) : 0.0f;
            // corr rescales what was accumulated under the old max; 0 when nothing was
            const float corr = m[rr] == -INFINITY ? 0.0f : expf(m[rr] - m_new);
            l[rr] = l[rr] * corr + att_warp_sum(p);
            m[rr] = m_new;
            sP[r * ATT_TILE + j] = p;
            __syncwarp();
            float* orow = sO + r * hp;
            const float* prow = sP + r * ATT_TILE;
            for (int d = lane; d < hd; d += 32) {
                float acc = orow[d] * corr;
                for (int jj = 0; jj < ATT_TILE; jj++) acc += prow[jj] * sV[jj * hp + d];
                orow[d] = acc;
            }
            __syncwarp();
        }
    }
    #pragma unroll
    for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
        const int r = warp + rr * ATT_WARPS, t = q0 + r;
        if (t >= T) continue;  // uniform in the warp
        const float inv = 1.0f / l[rr];
        floatX* o = out + (((size_t)b * T + t) * H + h) * hd;
        for (int d = lane; d < hd; d += 32) o[d] = (floatX)(sO[r * hp + d] * inv);
        if (lane == 0) lse[((size_t)b * H + h) * T + t] = m[rr] + logf(l[rr]);
    }
}

// ---------------------------------------------------------------------------------
// backward, part 1: dK and dV
__global__ void __launch_bounds__(ATT_THREADS) attention_backward_dkdv_kernel(
    floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k, const floatX* v, const floatX* out,
    const float* lse, int T, int H, int KV, int hd, float scale, bool causal) {
    extern __shared__ float smem[];
    const int hp = hd + 1, PP = ATT_TILE + 1;
    float* sK = smem;                    // [TILE][hp]
    float* sV = sK + ATT_TILE * hp;
    float* sQ = sV + ATT_TILE * hp;
    float* sdO = sQ + ATT_TILE * hp;
    float* sdK = sdO + ATT_TILE * hp;
    float* sdV = sdK + ATT_TILE * hp;
    float* sP = sdV + ATT_TILE * hp;     // [TILE rows r][PP]: P[r][j]
    float* sdS = sP + ATT_TILE * PP;     // [TILE rows r][PP]: dS[r][j]
    float* sLse = sdS + ATT_TILE * PP;   // [TILE]
    float* sDelta = sLse + ATT_TILE;     // [TILE]
    const int kt = blockIdx.x, kvh = blockIdx.y, b = blockIdx.z;
    const int group = H / KV, k0 = kt * ATT_TILE;
    const int n_qt = (T + ATT_TILE - 1) / ATT_TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    att_load_tile(sK, k, b, k0, T, KV, kvh, hd, hp);
    att_load_tile(sV, v, b, k0, T, KV, kvh, hd, hp);
    for (int idx = threadIdx.x; idx < ATT_TILE * hp; idx += blockDim.x) { sdK[idx] = 0.0f; sdV[idx] = 0.0f; }

    for (int h = kvh * group; h < (kvh + 1) * group; h++) {
        for (int qt = causal ? kt : 0; qt < n_qt; qt++) {  // the query tiles that see this key tile
            const int q0 = qt * ATT_TILE;
            __syncthreads();  // previous iteration done with sQ, sdO, sP, sdS
            att_load_tile(sQ, q, b, q0, T, H, h, hd, hp);
            att_load_tile(sdO, dout, b, q0, T, H, h, hd, hp);
            __syncthreads();
            // per row: lse and delta = dO . O
            #pragma unroll
            for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
                const int r = warp + rr * ATT_WARPS, t = q0 + r;
                float dl = 0.0f;
                if (t < T) {
                    const floatX* orow = out + (((size_t)b * T + t) * H + h) * hd;
                    for (int d = lane; d < hd; d += 32) dl += sdO[r * hp + d] * (float)orow[d];
                }
                dl = att_warp_sum(dl);
                if (lane == 0) {
                    sDelta[r] = dl;
                    sLse[r] = t < T ? lse[((size_t)b * H + h) * T + t] : 0.0f;
                }
            }
            __syncwarp();
            // P and dS (thread = (row r, key j = lane)); each warp reads only its own rows' sLse/sDelta
            #pragma unroll
            for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
                const int r = warp + rr * ATT_WARPS, t = q0 + r;
                const int j = lane, u = k0 + j;
                const float* qr = sQ + r * hp;
                const float* dor = sdO + r * hp;
                const float* kj = sK + j * hp;
                const float* vj = sV + j * hp;
                float sc = 0.0f, dp = 0.0f;
                for (int d = 0; d < hd; d++) { sc += qr[d] * kj[d]; dp += dor[d] * vj[d]; }
                const bool valid = t < T && u < T && (!causal || u <= t);
                const float p = valid ? expf(sc * scale - sLse[r]) : 0.0f;
                sP[r * PP + j] = p;
                sdS[r * PP + j] = p * (dp - sDelta[r]) * scale;
            }
            __syncthreads();
            // dV_j += sum_r P_rj dO_r, dK_j += sum_r dS_rj Q_r (thread = (key j, dim d))
            #pragma unroll
            for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
                const int j = warp + rr * ATT_WARPS;
                for (int d = lane; d < hd; d += 32) {
                    float av = 0.0f, ak = 0.0f;
                    for (int r = 0; r < ATT_TILE; r++) {
                        av += sP[r * PP + j] * sdO[r * hp + d];
                        ak += sdS[r * PP + j] * sQ[r * hp + d];
                    }
                    sdV[j * hp + d] += av;
                    sdK[j * hp + d] += ak;
                }
            }
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < ATT_TILE * hd; idx += blockDim.x) {
        int j = idx / hd, d = idx % hd, u = k0 + j;
        if (u < T) {
            size_t gi = (((size_t)b * T + u) * KV + kvh) * hd + d;
            dk[gi] = (floatX)sdK[j * hp + d];
            dv[gi] = (floatX)sdV[j * hp + d];
        }
    }
}

// ---------------------------------------------------------------------------------
// backward, part 2: dQ
__global__ void __launch_bounds__(ATT_THREADS) attention_backward_dq_kernel(
    floatX* dq, const floatX* dout, const floatX* q, const floatX* k, const floatX* v, const floatX* out,
    const float* lse, int T, int H, int KV, int hd, float scale, bool causal) {
    extern __shared__ float smem[];
    const int hp = hd + 1, PP = ATT_TILE + 1;
    float* sQ = smem;                    // [TILE][hp]
    float* sdO = sQ + ATT_TILE * hp;
    float* sK = sdO + ATT_TILE * hp;
    float* sV = sK + ATT_TILE * hp;
    float* sdQ = sV + ATT_TILE * hp;
    float* sdS = sdQ + ATT_TILE * hp;    // [TILE rows r][PP]
    const int n_t = gridDim.x;           // query tiles = key tiles
    const int qt = causal ? n_t - 1 - blockIdx.x : blockIdx.x;  // causal: longest tiles first
    const int kt_last = causal ? qt : n_t - 1;
    const int h = blockIdx.y, b = blockIdx.z;
    const int kvh = h / (H / KV), q0 = qt * ATT_TILE;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;

    att_load_tile(sQ, q, b, q0, T, H, h, hd, hp);
    att_load_tile(sdO, dout, b, q0, T, H, h, hd, hp);
    for (int idx = threadIdx.x; idx < ATT_TILE * hp; idx += blockDim.x) sdQ[idx] = 0.0f;
    __syncthreads();
    // lse and delta of this warp's rows, kept in registers of the owning warp
    float row_lse[ATT_ROWS_PER_WARP], row_delta[ATT_ROWS_PER_WARP];
    #pragma unroll
    for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
        const int r = warp + rr * ATT_WARPS, t = q0 + r;
        float dl = 0.0f;
        if (t < T) {
            const floatX* orow = out + (((size_t)b * T + t) * H + h) * hd;
            for (int d = lane; d < hd; d += 32) dl += sdO[r * hp + d] * (float)orow[d];
        }
        row_delta[rr] = att_warp_sum(dl);
        row_lse[rr] = t < T ? lse[((size_t)b * H + h) * T + t] : 0.0f;
    }

    for (int kt = 0; kt <= kt_last; kt++) {
        const int k0 = kt * ATT_TILE;
        __syncthreads();  // the previous tile's sK no longer read
        att_load_tile(sK, k, b, k0, T, KV, kvh, hd, hp);
        att_load_tile(sV, v, b, k0, T, KV, kvh, hd, hp);
        __syncthreads();
        #pragma unroll
        for (int rr = 0; rr < ATT_ROWS_PER_WARP; rr++) {
            const int r = warp + rr * ATT_WARPS, t = q0 + r;
            const int j = lane, u = k0 + j;
            const float* qr = sQ + r * hp;
            const float* dor = sdO + r * hp;
            const float* kj = sK + j * hp;
            const float* vj = sV + j * hp;
            float sc = 0.0f, dp = 0.0f;
            for (int d = 0; d < hd; d++) { sc += qr[d] * kj[d]; dp += dor[d] * vj[d]; }
            const bool valid = t < T && u < T && (!causal || u <= t);
            const float p = valid ? expf(sc * scale - row_lse[rr]) : 0.0f;
            sdS[r * PP + j] = p * (dp - row_delta[rr]) * scale;
            __syncwarp();
            // dQ_r += sum_j dS_rj K_j (thread = (row r, dim d)); row r belongs to this warp
            const float* dsr = sdS + r * PP;
            for (int d = lane; d < hd; d += 32) {
                float acc = 0.0f;
                for (int jj = 0; jj < ATT_TILE; jj++) acc += dsr[jj] * sK[jj * hp + d];
                sdQ[r * hp + d] += acc;
            }
            __syncwarp();
        }
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < ATT_TILE * hd; idx += blockDim.x) {
        int r = idx / hd, d = idx % hd, t = q0 + r;
        if (t < T) dq[(((size_t)b * T + t) * H + h) * hd + d] = (floatX)sdQ[r * hp + d];
    }
}

// ---------------------------------------------------------------------------------
// host side

static inline size_t att_smem_forward(int hd) { return (size_t)(4 * ATT_TILE * (hd + 1) + ATT_TILE * ATT_TILE) * sizeof(float); }
static inline size_t att_smem_dkdv(int hd) {
    return (size_t)(6 * ATT_TILE * (hd + 1) + 2 * ATT_TILE * (ATT_TILE + 1) + 2 * ATT_TILE) * sizeof(float);
}
static inline size_t att_smem_dq(int hd) { return (size_t)(5 * ATT_TILE * (hd + 1) + ATT_TILE * (ATT_TILE + 1)) * sizeof(float); }

static inline void att_check_args(const char* who, int B, int T, int H, int KV, int hd) {
    if (B < 0 || T < 0 || H <= 0 || KV <= 0 || hd <= 0) FAIL("%s: bad sizes B=%d T=%d H=%d KV=%d hd=%d", who, B, T, H, KV, hd);
    if (H % KV != 0) FAIL("%s: H (%d) is not a multiple of KV (%d)", who, H, KV);
    if (hd > ATT_MAX_HD) FAIL("%s: head dim %d > %d is not supported", who, hd, ATT_MAX_HD);
    if (H > 65535 || KV > 65535 || B > 65535) FAIL("%s: B, H or KV over 65535 (grid limit)", who);
}

// Opts a kernel in to more than 48 KiB of dynamic shared memory when it needs it.
// Called before every launch (a cheap host call); fails clearly if the device has too little.
static inline void att_prepare_smem(const void* kernel, size_t bytes, const char* who) {
    if (bytes <= 48 * 1024) return;
    int dev = 0, optin = 0;
    cudaCheck(cudaGetDevice(&dev));
    cudaCheck(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, dev));
    if (bytes > (size_t)optin)
        FAIL("%s: needs %zu bytes of shared memory per block, the device allows %d (head dim too large)", who, bytes,
             optin);
    cudaCheck(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes));
}

// both modes: causal (attention_forward) or full (attention_full_forward)
static inline void att_launch_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B,
                                      int T, int H, int KV, int hd, bool causal, stream_t s, const char* who) {
    att_check_args(who, B, T, H, KV, hd);
    if (B == 0 || T == 0) return;
    size_t smem = att_smem_forward(hd);
    att_prepare_smem((const void*)attention_forward_kernel, smem, who);
    dim3 grid((unsigned)ceil_div((size_t)T, ATT_TILE), H, B);
    attention_forward_kernel<<<grid, ATT_THREADS, smem, s>>>(out, lse, q, k, v, T, H, KV, hd, 1.0f / sqrtf((float)hd),
                                                             causal);
    cudaCheck(cudaGetLastError());
}

static inline void att_launch_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                       const floatX* k, const floatX* v, const floatX* out, const float* lse, int B,
                                       int T, int H, int KV, int hd, bool causal, stream_t s, const char* who) {
    att_check_args(who, B, T, H, KV, hd);
    if (B == 0 || T == 0) return;
    const float scale = 1.0f / sqrtf((float)hd);
    const unsigned n_t = (unsigned)ceil_div((size_t)T, ATT_TILE);
    size_t smem1 = att_smem_dkdv(hd);
    att_prepare_smem((const void*)attention_backward_dkdv_kernel, smem1, who);
    attention_backward_dkdv_kernel<<<dim3(n_t, KV, B), ATT_THREADS, smem1, s>>>(dk, dv, dout, q, k, v, out, lse, T, H,
                                                                                KV, hd, scale, causal);
    cudaCheck(cudaGetLastError());
    size_t smem2 = att_smem_dq(hd);
    att_prepare_smem((const void*)attention_backward_dq_kernel, smem2, who);
    attention_backward_dq_kernel<<<dim3(n_t, H, B), ATT_THREADS, smem2, s>>>(dq, dout, q, k, v, out, lse, T, H, KV, hd,
                                                                             scale, causal);
    cudaCheck(cudaGetLastError());
}

static inline void attention_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B, int T,
                                     int H, int KV, int hd, stream_t s) {
    att_launch_forward(out, lse, q, k, v, B, T, H, KV, hd, true, s, "attention_forward");
}

// dq, dk, dv are overwritten
static inline void attention_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q, const floatX* k,
                                      const floatX* v, const floatX* out, const float* lse, int B, int T, int H, int KV,
                                      int hd, stream_t s) {
    att_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, true, s, "attention_backward");
}

// non-causal (the video DiT, docs/design.md 9.3): every query attends to every key
static inline void attention_full_forward(floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v, int B,
                                          int T, int H, int KV, int hd, stream_t s) {
    att_launch_forward(out, lse, q, k, v, B, T, H, KV, hd, false, s, "attention_full_forward");
}

static inline void attention_full_backward(floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                           const floatX* k, const floatX* v, const floatX* out, const float* lse, int B,
                                           int T, int H, int KV, int hd, stream_t s) {
    att_launch_backward(dq, dk, dv, dout, q, k, v, out, lse, B, T, H, KV, hd, false, s, "attention_full_backward");
}
