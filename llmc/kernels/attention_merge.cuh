/*
Ring attention's merge of a partial result into the running one (llmc/parallel/context_parallel.h).
CPU twin: llmc/kernels/cpu/attention_merge.h, which states the math. o: [B, T, H, hd]; lse: [B, H, T].

One warp per row (b, t, h): its lanes read the row's two log-sum-exps, compute the
same weights, and stride over the head dim; lane 0 writes the new lse after the
warp has read the old one. Memory-bound: per element it reads o_acc (4 B) and o_p
(2 B in bf16) and writes o_acc (4 B) and, on the last merge, out (2 B).
Cost (a PREDICTION, never measured: no GPU has run this): at llama3-8B's heads with
cp 8 at 131,072 tokens (B 1, 16,384 tokens a rank, 32 heads of 128) one merge moves
about 0.8 GB in bf16: some 0.3 ms at 3 TB/s, against about 27 ms of attention for
the block it merges.

float_accumulate: acc[i] += x[i] in float (the ring's partial dQ, dK, dV sums),
grid-stride.
*/
#pragma once
#include "../core/common.h"

__global__ void attention_merge_kernel(float* o_acc, float* lse_acc, floatX* out, const floatX* o_p, const float* lse_p,
                                       int B, int T, int H, int hd, int first) {
    size_t warp = ((size_t)blockIdx.x * blockDim.x + threadIdx.x) / 32;
    int lane = threadIdx.x % 32;
    size_t rows = (size_t)B * T * H;
    if (warp >= rows) return;
    int h = (int)(warp % H), t = (int)((warp / H) % T), b = (int)(warp / ((size_t)H * T));
    size_t li = ((size_t)b * H + h) * T + t;
    float* o = o_acc + warp * hd;
    const floatX* p = o_p + warp * hd;
    float wa = 0.0f, wb = 1.0f, lnew = lse_p[li];
    if (!first) {
        float la = lse_acc[li], lb = lse_p[li], m = fmaxf(la, lb);
        if (m == -INFINITY) { wa = 1.0f; wb = 0.0f; lnew = la; }
        else {
            lnew = m + logf(expf(la - m) + expf(lb - m));
            wa = expf(la - lnew); wb = expf(lb - lnew);
        }
    }
    __syncwarp();  // every lane has read lse_acc[li]
    if (lane == 0) lse_acc[li] = lnew;
    for (int d = lane; d < hd; d += 32) {
        float v = first ? (float)p[d] : wa * o[d] + wb * (float)p[d];
        o[d] = v;
        if (out) out[warp * hd + d] = (floatX)v;
    }
}

__global__ void float_accumulate_kernel(float* acc, const float* x, size_t n) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) acc[i] += x[i];
}

static inline void attention_merge(float* o_acc, float* lse_acc, floatX* out, const floatX* o_p, const float* lse_p,
                                   int B, int T, int H, int hd, int first, stream_t s) {
    size_t rows = (size_t)B * T * H;
    if (rows == 0) return;
    const int threads = 256;
    size_t blocks = ceil_div(rows * 32, (size_t)threads);
    attention_merge_kernel<<<(unsigned)blocks, threads, 0, s>>>(o_acc, lse_acc, out, o_p, lse_p, B, T, H, hd, first);
    cudaCheck(cudaGetLastError());
}

static inline void float_accumulate(float* acc, const float* x, size_t n, stream_t s) {
    if (n == 0) return;
    const int threads = 256;
    size_t blocks = ceil_div(n, (size_t)threads);
    if (blocks > 4096) blocks = 4096;
    float_accumulate_kernel<<<(unsigned)blocks, threads, 0, s>>>(acc, x, n);
    cudaCheck(cudaGetLastError());
}
