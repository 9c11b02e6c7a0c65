/*
Softmax + cross-entropy + dlogits, fused and in place. CPU twin:
llmc/kernels/cpu/crossentropy.h. losses[i] = logsumexp(logits_i) - logits_i[target_i]
(fp32). With write_dlogits the row is overwritten by dloss * (softmax - onehot),
so the [N, V] buffer is used only once.

One block (CE_THREADS) per row, fp32 math, two passes over the row:
  1. online max and sum: the row is cut into 16-byte chunks (CE_VEC = 8 bf16 or 4 fp32;
     the last may be partial); thread t takes chunks t, t + CE_THREADS, ... and keeps a
     running max m and a sum s of exp(x - m), rescaled by exp(m_old - m_new) when a
     chunk raises the max. The (m, s) pairs are combined by a xor-shuffle tree in each
     warp, then warp by warp in warp order: a fixed order, so deterministic.
     lse = m + log(s); thread 0 reads x[target] and writes the loss before the
     __syncthreads that precedes pass 2, which overwrites the row.
  2. (write_dlogits) p = exp(x - lse) * dloss, minus dloss at the target, stored over x.
When V is a multiple of CE_VEC and the logits are 16-byte aligned, each chunk is one
16-byte load (and store); otherwise the same chunks are read element by element. Both
paths do the same arithmetic in the same order: bitwise the same result.

Predicted gain at llama3-1B, B=4 T=2048 (N = 8192 rows, V = 128256, bf16 logits: 2.1 GB),
H100 SXM at an achievable ~2.9 TB/s. Predicted before the first GPU run; measured on an H200 (docs/results/gpu_h200_2026-11-26.md section 3):
2.05 ms, on the prediction but at 2.06 TB/s, 48% of that machine's copy rate. The prediction:
  before: three passes (max, sum, write) with 2-byte loads: 3 reads + 1 write = 8.4 GB
    from HBM at worst: ~3-4 ms;
  after: 2 reads + 1 write = 6.3 GB at worst, ~2.2 ms. A block's row (250 KB) is read
    again right after pass 1, while 132 SMs x a few rows (~35-100 MB) are in flight
    against 50 MB of L2, so part of the second read may come from L2: ~1.5-2.2 ms.
  The expf work (2 per logit, ~2.1e9) is ~0.6 ms of SFU time at most and overlaps.
*/
#pragma once
#include "../core/common.h"

#define CE_THREADS 512
#define CE_VEC (16 / (int)sizeof(floatX))  // elements per 16-byte chunk
struct alignas(16) CeChunk { floatX v[CE_VEC]; };

// combine two (max, sum of exp(x - max)) pairs; an empty pair is (-inf, 0)
static __device__ __forceinline__ void ce_combine(float& m, float& s, float mo, float so) {
    float mn = fmaxf(m, mo);
    s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (mo == -INFINITY ? 0.0f : so * expf(mo - mn));
    m = mn;
}

// chunk q of a row whose first n_valid columns are logits: f[k] for k < the returned
// count. VEC: one 16-byte load of the whole chunk (the row holds it: its length is a
// multiple of CE_VEC); the columns past n_valid are loaded but never used. Otherwise
// element loads of the valid columns only. Both give the caller the same numbers.
template <bool VEC>
static __device__ __forceinline__ int ce_load_chunk(float* f, const floatX* x, int q, int n_valid) {
    int valid = n_valid - q * CE_VEC < CE_VEC ? n_valid - q * CE_VEC : CE_VEC;
    if (VEC) {
        CeChunk c = *(const CeChunk*)(x + (size_t)q * CE_VEC);
        for (int k = 0; k < CE_VEC; k++) f[k] = (float)c.v[k];
    } else {
        for (int k = 0; k < CE_VEC; k++) f[k] = k < valid ? (float)x[(size_t)q * CE_VEC + k] : -INFINITY;
    }
    return valid;
}

// dlogits over a row of Vs columns whose first n_valid are logits, written over them:
// expf(x - a) * b, minus dloss at column tgt; the padding columns n_valid..Vs-1 get an
// exact 0 (so padded weight rows get no gradient). The whole-vocabulary kernel passes
// (a, b) = (lse, dloss), the vocab-parallel one (M, dloss / S).
template <bool VEC>
static __device__ void ce_write_dlogits(floatX* x, int Vs, int n_valid, float a, float b, int tgt, float dloss) {
    int nch = (Vs + CE_VEC - 1) / CE_VEC;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) {
        int here = Vs - q * CE_VEC < CE_VEC ? Vs - q * CE_VEC : CE_VEC;  // columns of the row in this chunk
        int valid = n_valid - q * CE_VEC;                                 // of which logits: k < valid
        floatX* p = x + (size_t)q * CE_VEC;
        CeChunk c;
        if (VEC) c = *(const CeChunk*)p;
        else
            for (int k = 0; k < CE_VEC; k++) if (k < here && k < valid) c.v[k] = p[k];
        for (int k = 0; k < CE_VEC; k++) {  // fixed bounds: unrolled, c stays in registers
            if (k >= here) continue;
            if (k >= valid) { c.v[k] = (floatX)0.0f; continue; }
            float pk = expf((float)c.v[k] - a) * b;
            c.v[k] = (floatX)(q * CE_VEC + k == tgt ? pk - dloss : pk);
        }
        if (VEC) *(CeChunk*)p = c;
        else
            for (int k = 0; k < CE_VEC; k++) if (k < here) p[k] = c.v[k];
    }
}

template <bool VEC>
static __device__ void ce_row(float* losses, floatX* logits, const int* targets, int V, float dloss, int write_dlogits,
                              float* sm, float* ss) {
    int i = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    floatX* x = logits + (size_t)i * V;
    int nch = (V + CE_VEC - 1) / CE_VEC;
    float m = -INFINITY, s = 0.0f;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) {
        float f[CE_VEC];
        int valid = ce_load_chunk<VEC>(f, x, q, V);
        float cm = f[0];
        for (int k = 1; k < CE_VEC; k++) if (k < valid) cm = fmaxf(cm, f[k]);
        if (cm > m) {  // the first chunk, or a new max: rescale what was summed so far
            s = m == -INFINITY ? 0.0f : s * expf(m - cm);
            m = cm;
        }
        for (int k = 0; k < CE_VEC; k++) if (k < valid) s += expf(f[k] - m);
    }
    for (int off = 16; off > 0; off >>= 1) {
        float mo = __shfl_xor_sync(0xffffffffu, m, off), so = __shfl_xor_sync(0xffffffffu, s, off);
        ce_combine(m, s, mo, so);
    }
    if (lane == 0) { sm[warp] = m; ss[warp] = s; }
    __syncthreads();
    m = sm[0]; s = ss[0];
    for (int w = 1; w < nwarps; w++) ce_combine(m, s, sm[w], ss[w]);
    float lse = m + logf(s);
    int tgt = targets[i];
    if (threadIdx.x == 0) losses[i] = lse - (float)x[tgt];
    __syncthreads();  // x[tgt] is read above before anyone overwrites it
    if (write_dlogits) ce_write_dlogits<VEC>(x, V, V, lse, dloss, tgt, dloss);
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_kernel(float* losses, floatX* logits, const int* targets,
                                                                  int V, float dloss, int write_dlogits, int vec) {
    __shared__ float sm[32], ss[32];
    if (vec) ce_row<true>(losses, logits, targets, V, dloss, write_dlogits, sm, ss);
    else ce_row<false>(losses, logits, targets, V, dloss, write_dlogits, sm, ss);
}

static inline void crossentropy_forward_backward(float* losses, floatX* logits, const int* targets, int N, int V, float dloss,
                                                 int write_dlogits, stream_t s) {
    if (N <= 0) return;
    if (V <= 0) FAIL("crossentropy: vocabulary size %d", V);
    int vec = V % CE_VEC == 0 && ((uintptr_t)logits & 15) == 0;
    crossentropy_kernel<<<N, CE_THREADS, 0, s>>>(losses, logits, targets, V, dloss, write_dlogits, vec);
    cudaCheck(cudaGetLastError());
}

/*
Vocabulary-parallel cross-entropy (--shard-vocab 1 --tp N). Rank r holds the logit shard
[N, Vs] of columns v0 = r*Vs ... v0+Vs-1 (row stride Vs); its first n_valid columns are
vocabulary entries, the rest (the end of the last shard) padding. No rank holds a whole
row, so the row statistics are assembled by the trainer's all-reduces between three
launches:
  crossentropy_vp_max     rowmax[i] = max of the shard's row (-inf for an empty shard)
      -> all-reduce MAX: the global row max M_i
  crossentropy_vp_sums    sums[i] = sum of exp(x - M_i) over the shard, sums[N + i] = the
                          target logit if the target is in this shard, else 0
      -> all-reduce SUM of the 2N floats: S_i and x_target
  crossentropy_vp_finish  losses[i] = log(S_i) + M_i - x_target (every rank, the same),
                          and dlogits = dloss * (exp(x - M_i) / S_i - onehot) in place,
                          0 in the padding columns.
Why not one online pass like crossentropy_kernel: the sums need the GLOBAL max, which only
exists after the first all-reduce, so the shard is read twice (max, sums) plus once to
write; with Vs = V / tp each pass costs 1/tp of the whole-vocabulary kernel's.
Layout of each kernel as crossentropy_kernel: one block per row, 16-byte chunks when Vs is
a multiple of CE_VEC and the shard is 16-byte aligned, element loads otherwise (the same
numbers in the same order: bitwise the same result), fp32 math, block reductions in a
fixed order (deterministic).
*/

// v over the block: a xor-shuffle tree in each warp, then the warps in warp order (a
// fixed order: deterministic); every thread gets the result. sh: 32 floats of shared
// memory, used once per kernel (a second call would need a barrier before it).
template <bool MAX>
static __device__ __forceinline__ float ce_block_reduce(float v, float* sh) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = MAX ? fmaxf(v, o) : v + o;
    }
    if (lane == 0) sh[warp] = v;
    __syncthreads();
    v = sh[0];
    for (int w = 1; w < nwarps; w++) v = MAX ? fmaxf(v, sh[w]) : v + sh[w];
    return v;
}

// pass 1 (MAX) or pass 2 (sum of exp(x - M)) over the valid columns of this block's row
template <bool VEC, bool MAX>
static __device__ float ce_vp_reduce_row(const floatX* x, int n_valid, float M, float* sh) {
    int nch = (n_valid + CE_VEC - 1) / CE_VEC;
    float v = MAX ? -INFINITY : 0.0f;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) {
        float f[CE_VEC];
        int valid = ce_load_chunk<VEC>(f, x, q, n_valid);
        for (int k = 0; k < CE_VEC; k++)
            if (k < valid) v = MAX ? fmaxf(v, f[k]) : v + expf(f[k] - M);
    }
    return ce_block_reduce<MAX>(v, sh);
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_vp_max_kernel(float* rowmax, const floatX* logits, int Vs,
                                                                         int n_valid, int vec) {
    __shared__ float sh[32];
    const floatX* x = logits + (size_t)blockIdx.x * Vs;
    float m = vec ? ce_vp_reduce_row<true, true>(x, n_valid, 0.0f, sh) : ce_vp_reduce_row<false, true>(x, n_valid, 0.0f, sh);
    if (threadIdx.x == 0) rowmax[blockIdx.x] = m;
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_vp_sums_kernel(float* sums, const floatX* logits,
                                                                          const float* rowmax, const int* targets, int N,
                                                                          int Vs, int v0, int n_valid, int vec) {
    __shared__ float sh[32];
    int i = blockIdx.x;
    const floatX* x = logits + (size_t)i * Vs;
    float M = rowmax[i];
    float s = vec ? ce_vp_reduce_row<true, false>(x, n_valid, M, sh) : ce_vp_reduce_row<false, false>(x, n_valid, M, sh);
    if (threadIdx.x == 0) {
        int t = targets[i] - v0;  // the target's column in this shard
        sums[i] = s;
        sums[N + i] = t >= 0 && t < n_valid ? (float)x[t] : 0.0f;
    }
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_vp_finish_kernel(float* losses, floatX* logits,
                                                                            const float* rowmax, const float* sums,
                                                                            const int* targets, int N, int Vs, int v0,
                                                                            int n_valid, float dloss, int write_dlogits,
                                                                            int vec) {
    int i = blockIdx.x;
    float M = rowmax[i], S = sums[i];
    if (threadIdx.x == 0) losses[i] = logf(S) + M - sums[N + i];
    if (!write_dlogits) return;
    int t = targets[i] - v0;
    if (t < 0 || t >= n_valid) t = -1;  // not in this shard: no column gets the -dloss
    floatX* x = logits + (size_t)i * Vs;
    float b = dloss / S;  // one division per row instead of one per logit
    if (vec) ce_write_dlogits<true>(x, Vs, n_valid, M, b, t, dloss);
    else ce_write_dlogits<false>(x, Vs, n_valid, M, b, t, dloss);
}

// checks the shard's shape; 1 when the 16-byte path applies
static inline int crossentropy_vp_vec(const char* who, const floatX* logits, int Vs, int n_valid) {
    if (Vs <= 0 || n_valid < 0 || n_valid > Vs)
        FAIL("%s: shard of %d columns with %d valid (need Vs >= 1, 0 <= n_valid <= Vs)", who, Vs, n_valid);
    return Vs % CE_VEC == 0 && ((uintptr_t)logits & 15) == 0;
}

// rowmax[i] = max over the shard's valid columns of row i (-inf when n_valid == 0)
static inline void crossentropy_vp_max(float* rowmax, const floatX* logits, int N, int Vs, int n_valid, stream_t s) {
    if (N <= 0) return;
    int vec = crossentropy_vp_vec("crossentropy_vp_max", logits, Vs, n_valid);
    crossentropy_vp_max_kernel<<<N, CE_THREADS, 0, s>>>(rowmax, logits, Vs, n_valid, vec);
    cudaCheck(cudaGetLastError());
}

// rowmax: the GLOBAL row max (all-reduced). sums[i] = sum over the valid columns of
// exp(x - M_i); sums[N + i] = the target logit when v0 <= t < v0 + n_valid, else 0
static inline void crossentropy_vp_sums(float* sums, const floatX* logits, const float* rowmax, const int* targets, int N,
                                        int Vs, int v0, int n_valid, stream_t s) {
    if (N <= 0) return;
    int vec = crossentropy_vp_vec("crossentropy_vp_sums", logits, Vs, n_valid);
    crossentropy_vp_sums_kernel<<<N, CE_THREADS, 0, s>>>(sums, logits, rowmax, targets, N, Vs, v0, n_valid, vec);
    cudaCheck(cudaGetLastError());
}

// rowmax, sums: all-reduced. losses[i] = log(S_i) + M_i - x_target; with write_dlogits the
// shard becomes dloss * (exp(x - M_i) / S_i - onehot), exactly 0 in the padding columns
static inline void crossentropy_vp_finish(float* losses, floatX* logits, const float* rowmax, const float* sums,
                                          const int* targets, int N, int Vs, int v0, int n_valid, float dloss,
                                          int write_dlogits, stream_t s) {
    if (N <= 0) return;
    int vec = crossentropy_vp_vec("crossentropy_vp_finish", logits, Vs, n_valid);
    crossentropy_vp_finish_kernel<<<N, CE_THREADS, 0, s>>>(losses, logits, rowmax, sums, targets, N, Vs, v0, n_valid,
                                                           dloss, write_dlogits, vec);
    cudaCheck(cudaGetLastError());
}
