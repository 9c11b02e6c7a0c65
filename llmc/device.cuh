/*
Memory, copies, streams and events on the GPU. The CPU twin is llmc/cpu/device.h.
Copies are asynchronous on the given stream; host memory used for overlap
(activation offload) must come from host_malloc_pinned.
*/
#pragma once
#include "common.h"

static inline void* dev_malloc(size_t bytes) { void* p = NULL; cudaCheck(cudaMalloc(&p, bytes ? bytes : 1)); return p; }
static inline void dev_free(void* p) { cudaCheck(cudaFree(p)); }
static inline void* host_malloc_pinned(size_t bytes) { void* p = NULL; cudaCheck(cudaMallocHost(&p, bytes ? bytes : 1)); return p; }
static inline void host_free_pinned(void* p) { cudaCheck(cudaFreeHost(p)); }

static inline void dev_memset(void* p, int byte, size_t bytes, stream_t s) { cudaCheck(cudaMemsetAsync(p, byte, bytes, s)); }
static inline void dev_memcpy_h2d(void* dst, const void* src, size_t bytes, stream_t s) { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, s)); }
static inline void dev_memcpy_d2h(void* dst, const void* src, size_t bytes, stream_t s) { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, s)); }
static inline void dev_memcpy_d2d(void* dst, const void* src, size_t bytes, stream_t s) { cudaCheck(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s)); }

static inline stream_t stream_create(void) { cudaStream_t s; cudaCheck(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking)); return s; }
static inline void stream_destroy(stream_t s) { cudaCheck(cudaStreamDestroy(s)); }
static inline void stream_synchronize(stream_t s) { cudaCheck(cudaStreamSynchronize(s)); }
static inline event_t event_create(void) { cudaEvent_t e; cudaCheck(cudaEventCreateWithFlags(&e, cudaEventDisableTiming)); return e; }
static inline void event_destroy(event_t e) { cudaCheck(cudaEventDestroy(e)); }
static inline void event_record(event_t e, stream_t s) { cudaCheck(cudaEventRecord(e, s)); }
static inline void stream_wait_event(stream_t s, event_t e) { cudaCheck(cudaStreamWaitEvent(s, e, 0)); }
static inline void event_synchronize(event_t e) { cudaCheck(cudaEventSynchronize(e)); }
static inline void dev_synchronize(void) { cudaCheck(cudaDeviceSynchronize()); }
// events that carry a time stamp, for the per-kernel profile (llmc/profile.h) only: the
// others skip timing, which makes recording them cheaper
static inline event_t timing_event_create(void) { cudaEvent_t e; cudaCheck(cudaEventCreate(&e)); return e; }
static inline float event_elapsed_ms(event_t from, event_t to) { float ms = 0.0f; cudaCheck(cudaEventElapsedTime(&ms, from, to)); return ms; }

// fp32 host arrays to and from floatX device arrays. Used at start-up, in tests and
// for checkpoints, never in the step loop; converts through a bounded host buffer.
// Both end (upload) or start (download) with a device-wide synchronisation: a cudaMemcpy
// from pageable memory may return before its DMA lands, and the legacy stream it runs on
// neither waits for nor is waited for by the trainer's non-blocking streams.
#define DEV_CONVERT_CHUNK (1u << 20)
static inline void dev_upload_floats(floatX* dst, const float* src, size_t n) {
#if defined(ENABLE_FP32)
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyHostToDevice));
    cudaCheck(cudaDeviceSynchronize());
#else
    floatX* tmp = (floatX*)xmalloc(DEV_CONVERT_CHUNK * sizeof(floatX));
    for (size_t i = 0; i < n; i += DEV_CONVERT_CHUNK) {
        size_t m = n - i < DEV_CONVERT_CHUNK ? n - i : DEV_CONVERT_CHUNK;
        for (size_t j = 0; j < m; j++) tmp[j] = __float2bfloat16(src[i + j]);
        cudaCheck(cudaMemcpy(dst + i, tmp, m * sizeof(floatX), cudaMemcpyHostToDevice));
    }
    cudaCheck(cudaDeviceSynchronize());  // before tmp is freed and before any stream reads dst
    free(tmp);
#endif
}
static inline void dev_download_floats(float* dst, const floatX* src, size_t n) {
    cudaCheck(cudaDeviceSynchronize());
#if defined(ENABLE_FP32)
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
#else
    floatX* tmp = (floatX*)xmalloc(DEV_CONVERT_CHUNK * sizeof(floatX));
    for (size_t i = 0; i < n; i += DEV_CONVERT_CHUNK) {
        size_t m = n - i < DEV_CONVERT_CHUNK ? n - i : DEV_CONVERT_CHUNK;
        cudaCheck(cudaMemcpy(tmp, src + i, m * sizeof(floatX), cudaMemcpyDeviceToHost));
        for (size_t j = 0; j < m; j++) dst[i + j] = __bfloat162float(tmp[j]);
    }
    free(tmp);
#endif
}

// What the driver says is in use on the device (cuBLASLt workspace, NCCL buffers and
// the context included), sampled after each step; the peak is tracked by the caller.
static inline size_t dev_peak_bytes_measured(void) {
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    return total_b - free_b;
}
static inline const char* dev_measured_name(void) { return "driver in use (cudaMemGetInfo)"; }
static inline const char* dev_name(void) {
    static cudaDeviceProp prop; static int have = 0;
    if (!have) { int d; cudaCheck(cudaGetDevice(&d)); cudaCheck(cudaGetDeviceProperties(&prop, d)); have = 1; }
    return prop.name;
}
static inline int dev_count(void) { int n = 0; cudaError_t e = cudaGetDeviceCount(&n); return e == cudaSuccess ? n : 0; }
static inline void dev_select(int index) { cudaCheck(cudaSetDevice(index)); }
