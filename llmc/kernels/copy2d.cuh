/*
height rows of width elements from src (rows spitch apart) to dst (rows dpitch apart),
pitches and width in elements (add = 1: added to dst in float, rounded once): context parallelism's packing around its all-to-alls
(llmc/parallel/context_parallel.h). CPU twin: llmc/kernels/cpu/copy2d.h. A kernel rather than
cudaMemcpy2DAsync because of the add mode, which no copy does; one kernel serves both.
Grid-stride over all elements; a thread's element is (row, column) of the copy.
*/
#pragma once
#include "../core/common.h"

__global__ void copy_2d_kernel(floatX* dst, size_t dpitch, const floatX* src, size_t spitch, size_t width, size_t n, int add) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
        size_t r = i / width, c = i % width;
        floatX v = src[r * spitch + c];
        dst[r * dpitch + c] = add ? (floatX)((float)dst[r * dpitch + c] + (float)v) : v;
    }
}

static inline void copy_2d(floatX* dst, size_t dpitch, const floatX* src, size_t spitch, size_t width, size_t height,
                           int add, stream_t s) {
    size_t n = width * height;
    if (n == 0) return;
    const int threads = 256;
    size_t blocks = ceil_div(n, (size_t)threads);
    if (blocks > 8192) blocks = 8192;
    copy_2d_kernel<<<(unsigned)blocks, threads, 0, s>>>(dst, dpitch, src, spitch, width, n, add);
    cudaCheck(cudaGetLastError());
}
