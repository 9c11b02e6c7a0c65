/*
Softmax + cross-entropy + dlogits, fused and in place. CPU twin:
llmc/cpu/crossentropy.h. losses[i] = logsumexp(logits_i) - logits_i[target_i]
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
H100 SXM at an achievable ~2.9 TB/s. PREDICTIONS, nothing here has run on a GPU:
  before: three passes (max, sum, write) with 2-byte loads: 3 reads + 1 write = 8.4 GB
    from HBM at worst: ~3-4 ms;
  after: 2 reads + 1 write = 6.3 GB at worst, ~2.2 ms. A block's row (250 KB) is read
    again right after pass 1, while 132 SMs x a few rows (~35-100 MB) are in flight
    against 50 MB of L2, so part of the second read may come from L2: ~1.5-2.2 ms.
  The expf work (2 per logit, ~2.1e9) is ~0.6 ms of SFU time at most and overlaps.
*/
#pragma once
#include "common.h"

#define CE_THREADS 512
#define CE_VEC (16 / (int)sizeof(floatX))  // elements per 16-byte chunk
struct alignas(16) CeChunk { floatX v[CE_VEC]; };

// combine two (max, sum of exp(x - max)) pairs; an empty pair is (-inf, 0)
static __device__ __forceinline__ void ce_combine(float& m, float& s, float mo, float so) {
    float mn = fmaxf(m, mo);
    s = (m == -INFINITY ? 0.0f : s * expf(m - mn)) + (mo == -INFINITY ? 0.0f : so * expf(mo - mn));
    m = mn;
}

template <bool VEC>
static __device__ void ce_row(float* losses, floatX* logits, const int* targets, int V, float dloss, int write_dlogits,
                              float* sm, float* ss) {
    int i = blockIdx.x, lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    floatX* x = logits + (size_t)i * V;
    int nch = (V + CE_VEC - 1) / CE_VEC;
    float m = -INFINITY, s = 0.0f;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) {
        int valid = VEC ? CE_VEC : (V - q * CE_VEC < CE_VEC ? V - q * CE_VEC : CE_VEC);
        float f[CE_VEC];
        if (VEC) {
            CeChunk c = *(const CeChunk*)(x + (size_t)q * CE_VEC);
            for (int k = 0; k < CE_VEC; k++) f[k] = (float)c.v[k];
        } else {
            for (int k = 0; k < CE_VEC; k++) f[k] = k < valid ? (float)x[(size_t)q * CE_VEC + k] : -INFINITY;
        }
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
    if (!write_dlogits) return;
    for (int q = threadIdx.x; q < nch; q += blockDim.x) {
        int valid = VEC ? CE_VEC : (V - q * CE_VEC < CE_VEC ? V - q * CE_VEC : CE_VEC);
        floatX* p = x + (size_t)q * CE_VEC;
        CeChunk c;
        if (VEC) c = *(const CeChunk*)p;
        else
            for (int k = 0; k < CE_VEC; k++) if (k < valid) c.v[k] = p[k];
        for (int k = 0; k < CE_VEC; k++) {
            if (k >= valid) continue;
            float pk = expf((float)c.v[k] - lse) * dloss;
            c.v[k] = (floatX)(q * CE_VEC + k == tgt ? pk - dloss : pk);
        }
        if (VEC) *(CeChunk*)p = c;
        else
            for (int k = 0; k < CE_VEC; k++) if (k < valid) p[k] = c.v[k];
    }
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
