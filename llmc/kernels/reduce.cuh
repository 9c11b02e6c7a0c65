/*
Sums on the device, deterministic. CPU twin: llmc/kernels/cpu/reduce.h.

sum_accumulate: acc[0] += sum of x[0..n), so that a training step can add up its
micro-steps' per-token losses on the device and read one float once per step,
instead of a copy and a stream synchronisation per micro-step.

The summation order is fixed, independent of timing and of the GPU, and the twin
follows it exactly, so the two agree bit for bit:
  1. SUM_BLOCKS x SUM_THREADS = 16384 lanes; lane L = b * SUM_THREADS + t sums
     x[L], x[L + 16384], x[L + 2*16384], ... in that order, in double, from 0.0;
  2. block b adds its 256 lane sums by a halving tree (s[t] += s[t + h] for
     h = 128, 64, ..., 1) into partial b, written to a static __device__ array;
  3. one warp: lane l adds partials l and l + 32 (0.0 + p[l] + p[l + 32]), then the 32
     lane values are added by a halving tree (an xor butterfly, whose lane 0 computes
     exactly that tree because each addition is commutative);
  4. acc[0] += (float)total (one rounding to float, then one float addition).
n == 0 leaves acc untouched and launches nothing.

Like global_norm_squared (llmc/kernels/adamw.cuh), the partials live in a static
__device__ array: no allocation and no setup call, but two calls must not run
concurrently on different streams. 64 blocks are plenty for the B*T losses of a
micro-step (a PREDICTION: two launches of a few microseconds each; never measured).

Steps 1-2 (reduce_partials) and 3-4 (reduce_final) are shared with global_norm_squared,
whose order is the same with 1024 blocks and x^2 for x.
*/
#pragma once
#include "../core/common.h"

// steps 1 and 2, by block b of a grid of NB blocks of NT threads (NT a power of two):
// lane L = b NT + t adds x[L], x[L + NB NT], ... (squared when SQUARE) to 0.0 in double;
// then red[NT] in shared memory, s[t] += s[t + h] for h = NT / 2, ..., 1, and thread 0
// writes the block's total to partials[b]
template <int NB, int NT, bool SQUARE, typename T>
static __device__ __forceinline__ void reduce_partials(double* partials, double* red, const T* x, size_t n) {
    double a = 0.0;
    for (size_t i = (size_t)blockIdx.x * NT + threadIdx.x; i < n; i += (size_t)NB * NT) {
        const double v = (double)(float)x[i];
        a += SQUARE ? v * v : v;
    }
    red[threadIdx.x] = a;
    __syncthreads();
    for (int half = NT / 2; half > 0; half >>= 1) {
        if ((int)threadIdx.x < half) red[threadIdx.x] += red[threadIdx.x + half];
        __syncthreads();
    }
    if (threadIdx.x == 0) partials[blockIdx.x] = red[0];
}
// steps 3 and 4, by one warp: lane l adds p[l], p[l + 32], ... to 0.0 in that order, the
// 32 lane values are added by an xor butterfly, and lane 0 adds the total, rounded to
// float, to acc[0]
template <int NP>
static __device__ __forceinline__ void reduce_final(float* acc, const double* p) {
    double a = 0.0;
    for (int b = threadIdx.x; b < NP; b += 32) a += p[b];
    for (int off = 16; off > 0; off >>= 1) a += __shfl_xor_sync(0xffffffffu, a, off);
    if (threadIdx.x == 0) acc[0] += (float)a;
}

#define SUM_BLOCKS 64
#define SUM_THREADS 256
static __device__ double sum_partials[SUM_BLOCKS];

__global__ void __launch_bounds__(SUM_THREADS) sum_partial_kernel(const float* x, size_t n) {
    __shared__ double red[SUM_THREADS];
    reduce_partials<SUM_BLOCKS, SUM_THREADS, false>(sum_partials, red, x, n);
}

__global__ void sum_final_kernel(float* acc) { reduce_final<SUM_BLOCKS>(acc, sum_partials); }

// acc[0] += sum of x[0..n), in the fixed order above
static inline void sum_accumulate(float* acc, const float* x, size_t n, stream_t s) {
    if (n == 0) return;
    sum_partial_kernel<<<SUM_BLOCKS, SUM_THREADS, 0, s>>>(x, n);
    cudaCheck(cudaGetLastError());
    sum_final_kernel<<<1, 32, 0, s>>>(acc);
    cudaCheck(cudaGetLastError());
}
