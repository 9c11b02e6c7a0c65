/*
Softmax + cross-entropy + dlogits, fused and in place. CPU twin:
llmc/cpu/crossentropy.h. losses[i] = logsumexp(logits_i) - logits_i[target_i]
(fp32). With write_dlogits the row is overwritten by dloss * (softmax - onehot),
so the [N, V] buffer is used only once.

One block (512 threads) per row, fp32 math: pass 1 the row max, pass 2 the sum of
exp(x - max) (block reductions through shared memory in a fixed tree order, so
deterministic), then lse = max + log(sum); thread 0 reads x[target] and writes
the loss before the __syncthreads that precedes pass 3, which overwrites the row.
*/
#pragma once
#include "common.h"

#define CE_THREADS 512

// block-wide reduction (op = 0: sum, 1: max); every thread gets the result
static __device__ float ce_block_reduce(float v, int op, float* shared /* [32] */) {
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nwarps = blockDim.x >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = op ? fmaxf(v, o) : v + o;
    }
    __syncthreads();  // shared may still be read by a previous reduction
    if (lane == 0) shared[warp] = v;
    __syncthreads();
    v = shared[0];
    for (int w = 1; w < nwarps; w++) v = op ? fmaxf(v, shared[w]) : v + shared[w];
    return v;
}

__global__ void __launch_bounds__(CE_THREADS) crossentropy_kernel(float* losses, floatX* logits, const int* targets,
                                                                  int V, float dloss, int write_dlogits) {
    __shared__ float red[32];
    int i = blockIdx.x;
    floatX* x = logits + (size_t)i * V;
    float m = -INFINITY;
    for (int j = threadIdx.x; j < V; j += blockDim.x) m = fmaxf(m, (float)x[j]);
    m = ce_block_reduce(m, 1, red);
    float sum = 0.0f;
    for (int j = threadIdx.x; j < V; j += blockDim.x) sum += expf((float)x[j] - m);
    sum = ce_block_reduce(sum, 0, red);
    float lse = m + logf(sum);
    int tgt = targets[i];
    if (threadIdx.x == 0) losses[i] = lse - (float)x[tgt];
    __syncthreads();  // x[tgt] is read above before anyone overwrites it
    if (write_dlogits) {
        for (int j = threadIdx.x; j < V; j += blockDim.x) {
            float p = expf((float)x[j] - lse) * dloss;
            x[j] = (floatX)(j == tgt ? p - dloss : p);
        }
    }
}

static inline void crossentropy_forward_backward(float* losses, floatX* logits, const int* targets, int N, int V, float dloss,
                                          int write_dlogits, stream_t s) {
    if (N <= 0) return;
    if (V <= 0) FAIL("crossentropy: vocabulary size %d", V);
    crossentropy_kernel<<<N, CE_THREADS, 0, s>>>(losses, logits, targets, V, dloss, write_dlogits);
    cudaCheck(cudaGetLastError());
}
