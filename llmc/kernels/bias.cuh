/*
The bias of an nn.Linear, for the video DiT (docs/design.md 9.2; matmul_forward has none).
CPU twin: llmc/kernels/cpu/bias.h. out is [N, OC] row-major.
  bias_forward:  out[r, oc] += bias[oc]. Blocks walk rows (grid-stride), threads walk
                 columns: no division per element, any OC and any alignment.
  bias_backward: dbias[oc] += sum_r dout[r, oc], accumulated into the gradient like
                 matmul_backward_weight. Deterministic without atomics or scratch: a
                 block owns 32 columns (threadIdx.x) and has 16 row slices
                 (threadIdx.y); slice y adds rows y, y+16, ... in order, then one thread
                 per column adds the 16 partials in order. The partition is fixed by
                 constants, so the sum is the same on every run and every GPU.
                 (dev/cuda/bias.cu has a two-stage variant for many rows, few columns.)
*/
#pragma once
#include "../core/common.h"

static inline void bias_check_sizes(const char* who, int N, int OC) {
    if (N < 0 || OC < 0) FAIL("%s: negative size (N=%d OC=%d)", who, N, OC);
}

#define BIAS_MAX_GRID 65535  // blocks of bias_forward (grid-stride over rows)
#define BIAS_BWD_CH 32       // bias_backward: columns per block (threadIdx.x)
#define BIAS_BWD_SLICES 16   // bias_backward: row slices per block (threadIdx.y)

__global__ void bias_forward_kernel(floatX* out, const floatX* bias, int N, int OC) {
    for (int r = blockIdx.x; r < N; r += gridDim.x) {
        floatX* o = out + (size_t)r * OC;
        for (int c = threadIdx.x; c < OC; c += blockDim.x) o[c] = (floatX)((float)o[c] + (float)bias[c]);
    }
}

static inline void bias_forward(floatX* out, const floatX* bias, int N, int OC, stream_t s) {
    bias_check_sizes("bias_forward", N, OC);
    if (N == 0 || OC == 0) return;
    unsigned block = OC >= 256 ? 256u : (unsigned)ceil_div((size_t)OC, 32) * 32u;
    unsigned grid = (unsigned)(N < BIAS_MAX_GRID ? N : BIAS_MAX_GRID);
    bias_forward_kernel<<<grid, block, 0, s>>>(out, bias, N, OC);
    cudaCheck(cudaGetLastError());
}

__global__ void bias_backward_kernel(floatX* dbias, const floatX* dout, int N, int OC) {
    __shared__ float part[BIAS_BWD_SLICES][BIAS_BWD_CH];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * BIAS_BWD_CH + tx;
    float acc = 0.0f;
    if (c < OC)
        for (int r = ty; r < N; r += BIAS_BWD_SLICES) acc += (float)dout[(size_t)r * OC + c];
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < OC) {
        float sum = 0.0f;
        for (int k = 0; k < BIAS_BWD_SLICES; k++) sum += part[k][tx];
        dbias[c] = (floatX)((float)dbias[c] + sum);
    }
}

// dbias += column sums of dout
static inline void bias_backward(floatX* dbias, const floatX* dout, int N, int OC, stream_t s) {
    bias_check_sizes("bias_backward", N, OC);
    if (N == 0 || OC == 0) return;
    dim3 block(BIAS_BWD_CH, BIAS_BWD_SLICES);
    unsigned grid = (unsigned)ceil_div((size_t)OC, BIAS_BWD_CH);
    bias_backward_kernel<<<grid, block, 0, s>>>(dbias, dout, N, OC);
    cudaCheck(cudaGetLastError());
}
