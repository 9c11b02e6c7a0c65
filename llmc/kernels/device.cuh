/*
Memory, copies, streams and events on the GPU. The CPU twin is llmc/kernels/cpu/device.h.
Copies are asynchronous on the given stream; host memory used for overlap
(activation offload) must come from host_malloc_pinned.
*/
#pragma once
#include "../core/common.h"

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
// events that carry a time stamp, for the per-kernel profile (llmc/kernels/profile.h) only: the
// others skip timing, which makes recording them cheaper
static inline event_t timing_event_create(void) { cudaEvent_t e; cudaCheck(cudaEventCreate(&e)); return e; }
static inline float event_elapsed_ms(event_t from, event_t to) { float ms = 0.0f; cudaCheck(cudaEventElapsedTime(&ms, from, to)); return ms; }

// fp32 host arrays to and from floatX device arrays. Used at start-up, in tests, for
// checkpoints and for train_dit's clips; converts through bounded host buffers. Both end
// (upload) or start (download) with a device-wide synchronisation: the copies run on the
// legacy stream, which neither waits for nor is waited for by the trainer's non-blocking
// streams, and a cudaMemcpy from pageable memory may return before its DMA lands.
#define DEV_CONVERT_CHUNK (1u << 20)

// Uploads go through two pinned staging buffers: a DMA from pageable memory is staged by
// the driver through its own small buffers, serially, at a fraction of the link's speed,
// and llama3-1B's weights are 2.5 GB of bf16 plus 5 GB of fp32 master weights. All
// threads convert (or copy) chunk i + 1 into one buffer while chunk i's DMA reads the
// other. Allocated on the first upload and kept for the life of the process (64 MiB of
// page-locked memory), so that train_dit's per-step clip uploads pay no allocation.
#define DEV_STAGE_BYTES ((size_t)32 << 20)
#define DEV_STAGE_PARALLEL_MIN ((size_t)1 << 16)  // smaller chunks convert on one thread: a team costs more
static char* dev_stage_buf[2];
static cudaEvent_t dev_stage_free[2];  // recorded after the DMA that last read the buffer

// n floats of src to dst as elements of elem_bytes: 2 converts to bf16 (round to nearest
// even, __float2bfloat16), 4 copies fp32
static inline void dev_upload_staged(void* dst, const float* src, size_t n, size_t elem_bytes) {
    if (!dev_stage_buf[0])
        for (int b = 0; b < 2; b++) {
            cudaCheck(cudaMallocHost((void**)&dev_stage_buf[b], DEV_STAGE_BYTES));
            cudaCheck(cudaEventCreateWithFlags(&dev_stage_free[b], cudaEventDisableTiming));
        }
    size_t chunk = DEV_STAGE_BYTES / elem_bytes;
    for (size_t i = 0, k = 0; i < n; i += chunk, k++) {
        size_t m = n - i < chunk ? n - i : chunk;
        int b = (int)(k & 1);
        cudaCheck(cudaEventSynchronize(dev_stage_free[b]));  // chunk k - 2's DMA is done with this buffer
        const float* from = src + i;
        if (elem_bytes == sizeof(__nv_bfloat16)) {
            __nv_bfloat16* to = (__nv_bfloat16*)dev_stage_buf[b];
            #pragma omp parallel for schedule(static) if (m >= DEV_STAGE_PARALLEL_MIN)
            for (size_t j = 0; j < m; j++) to[j] = __float2bfloat16(from[j]);
        } else {
            float* to = (float*)dev_stage_buf[b];
            #pragma omp parallel for schedule(static) if (m >= DEV_STAGE_PARALLEL_MIN)
            for (size_t j = 0; j < m; j++) to[j] = from[j];
        }
        cudaCheck(cudaMemcpyAsync((char*)dst + i * elem_bytes, dev_stage_buf[b], m * elem_bytes, cudaMemcpyHostToDevice, 0));
        cudaCheck(cudaEventRecord(dev_stage_free[b], 0));
    }
    cudaCheck(cudaDeviceSynchronize());  // before any stream reads dst
}
static inline void dev_upload_floats(floatX* dst, const float* src, size_t n) { dev_upload_staged(dst, src, n, sizeof(floatX)); }
#if !defined(ENABLE_FP32)
// fp32 device arrays (the master weights, AdamW's moments) in the bf16 build; in the fp32
// build and the CPU build floatX is float and the function above is this one
static inline void dev_upload_floats(float* dst, const float* src, size_t n) { dev_upload_staged(dst, src, n, sizeof(float)); }
#endif
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

#if !defined(ENABLE_FP32)
// an fp32 device array (the master weights, AdamW's moments) in the bf16 build
static inline void dev_download_floats(float* dst, const float* src, size_t n) {
    cudaCheck(cudaDeviceSynchronize());
    cudaCheck(cudaMemcpy(dst, src, n * sizeof(float), cudaMemcpyDeviceToHost));
}
#endif

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
