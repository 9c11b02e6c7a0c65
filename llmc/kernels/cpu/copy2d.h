/*
CPU twin of llmc/kernels/copy2d.cuh: height rows of width elements from src (rows spitch
apart) to dst (rows dpitch apart), pitches and width in elements; add = 1 adds them to
dst instead (in float, rounded once: the kernel's arithmetic). Context
parallelism's packing around its all-to-alls (llmc/parallel/context_parallel.h).
*/
#pragma once
#include "../../core/common.h"

static inline void copy_2d(floatX* dst, size_t dpitch, const floatX* src, size_t spitch, size_t width, size_t height,
                           int add, stream_t s) {
    (void)s;
    #pragma omp parallel for schedule(static)
    for (size_t r = 0; r < height; r++) {
        if (!add) { memcpy(dst + r * dpitch, src + r * spitch, width * sizeof(floatX)); continue; }
        for (size_t c = 0; c < width; c++) dst[r * dpitch + c] = (floatX)((float)dst[r * dpitch + c] + (float)src[r * spitch + c]);
    }
}
