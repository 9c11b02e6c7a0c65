/*
CPU twin of llmc/kernels/device.cuh: memory, copies, streams and events. "Device" memory is
host memory, a stream runs its work inline (so every call is complete when it
returns) and events are always complete. Signatures match the CUDA file exactly.
*/
#pragma once
#include "../../core/common.h"
#include <sys/resource.h>
#include <unistd.h>
#include <time.h>

static inline void* dev_malloc(size_t bytes) { return xmalloc(bytes); }
static inline void dev_free(void* p) { free(p); }
static inline void* host_malloc_pinned(size_t bytes) { return xmalloc(bytes); }
static inline void host_free_pinned(void* p) { free(p); }

static inline void dev_memset(void* p, int byte, size_t bytes, stream_t s) { (void)s; memset(p, byte, bytes); }
static inline void dev_memcpy_h2d(void* dst, const void* src, size_t bytes, stream_t s) { (void)s; memcpy(dst, src, bytes); }
static inline void dev_memcpy_d2h(void* dst, const void* src, size_t bytes, stream_t s) { (void)s; memcpy(dst, src, bytes); }
static inline void dev_memcpy_d2d(void* dst, const void* src, size_t bytes, stream_t s) { (void)s; memmove(dst, src, bytes); }

static inline stream_t stream_create(void) { return 0; }
static inline void stream_destroy(stream_t s) { (void)s; }
static inline void stream_synchronize(stream_t s) { (void)s; }
static inline event_t event_create(void) { return 0; }
static inline void event_destroy(event_t e) { (void)e; }
// Timing events (llmc/kernels/profile.h) are numbered from 1 and stamped with the wall clock
// when recorded: work on a CPU "stream" is complete when its call returns, so the
// stamps bracket it. Plain events are 0 and carry nothing.
#define CPU_TIMING_EVENTS 65536
static double cpu_event_stamp[CPU_TIMING_EVENTS + 1];
static int cpu_timing_events = 0;
static inline event_t timing_event_create(void) {
    if (cpu_timing_events == CPU_TIMING_EVENTS) FAIL("more than %d timing events", CPU_TIMING_EVENTS);
    return ++cpu_timing_events;
}
static inline void event_record(event_t e, stream_t s) {
    (void)s;
    if (e > 0) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); cpu_event_stamp[e] = t.tv_sec + 1e-9 * t.tv_nsec; }
}
static inline float event_elapsed_ms(event_t from, event_t to) { return (float)((cpu_event_stamp[to] - cpu_event_stamp[from]) * 1e3); }
static inline void stream_wait_event(stream_t s, event_t e) { (void)s; (void)e; }
static inline void event_synchronize(event_t e) { (void)e; }
static inline void dev_synchronize(void) {}

static inline void dev_upload_floats(floatX* dst, const float* src, size_t n) { memcpy(dst, src, n * sizeof(float)); }
static inline void dev_download_floats(float* dst, const floatX* src, size_t n) { memcpy(dst, src, n * sizeof(float)); }

// What the operating system says this process holds now (the CPU's analogue of the
// driver's view on a GPU, which is also sampled after each step): the resident set,
// from /proc/self/statm. The trainer keeps the largest value over its steps; start-up
// buffers freed before the first step (the fp32 copy of the initial weights) do not
// count, as they would not on a GPU. Falls back to the high-water mark elsewhere.
static inline size_t dev_peak_bytes_measured(void) {
    FILE* f = fopen("/proc/self/statm", "r");
    if (f) {
        unsigned long long size = 0, resident = 0;
        int ok = fscanf(f, "%llu %llu", &size, &resident) == 2;
        fclose(f);
        if (ok) return (size_t)resident * (size_t)sysconf(_SC_PAGESIZE);
    }
    struct rusage ru; getrusage(RUSAGE_SELF, &ru);
    return (size_t)ru.ru_maxrss * 1024;
}
static inline const char* dev_measured_name(void) { return "process resident set after each step"; }
static inline const char* dev_name(void) { return "CPU"; }
static inline int dev_count(void) { return 1; }
static inline void dev_select(int index) { (void)index; }
