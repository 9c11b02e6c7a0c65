/*
Shared by every file: the element type of parameters and activations (floatX),
the stream/event types, and the checks that turn a failed call into a message
with file, line and a hint. The CPU build (-DLLMC_CPU, compiled by g++) and the
CUDA build (nvcc) see the same names; everything GPU-specific stays behind them.
*/
#pragma once
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <string.h>
#include <stdarg.h>
#include <math.h>
#include <errno.h>
#include "term.h"
#include "files.h"

#ifdef LLMC_CPU
// The CPU backend computes in fp32; "device" memory is ordinary memory, streams run
// inline and events are trivially complete (docs/design.md 3).
typedef float floatX;
typedef int stream_t;
typedef int event_t;
#define PRECISION_NAME "fp32 (CPU)"
#else
#include <cuda_runtime.h>
#include <cuda_bf16.h>
#if defined(ENABLE_FP32)
typedef float floatX;
#define PRECISION_NAME "fp32"
#else
typedef __nv_bfloat16 floatX;
#define PRECISION_NAME "bf16 (fp32 master weights)"
#endif
typedef cudaStream_t stream_t;
typedef cudaEvent_t event_t;
#endif

// the rank of this process in a multi-process run (-1: one process), named in errors
static int llmc_error_rank = -1;

// A fatal error: message, where, then exit(1). Used for bad input as well as for
// failed library calls, so every failure ends the same way. Under mpirun an exit(1)
// of one rank ends the whole job.
// The message is escaped (llmc/core/term.h): it names files and values the user gave.
static inline void fail_at(const char* file, int line, const char* fmt, ...) {
    char buf[4096], *msg = buf;
    va_list ap; va_start(ap, fmt); int n = vsnprintf(buf, sizeof(buf), fmt, ap); va_end(ap);
    if (n >= (int)sizeof(buf) && (msg = (char*)malloc((size_t)n + 1)) != NULL) {
        va_start(ap, fmt); vsnprintf(msg, (size_t)n + 1, fmt, ap); va_end(ap);
    }
    if (!msg) msg = buf;  // the start of a message beats none
    if (llmc_error_rank >= 0) fprintf(stderr, "error (rank %d): ", llmc_error_rank);
    else fprintf(stderr, "error: ");
    term_fputs(stderr, msg);
    fprintf(stderr, "\n  (at %s:%d)\n", file, line);
    fflush(stderr);
    exit(1);
}
#define FAIL(...) fail_at(__FILE__, __LINE__, __VA_ARGS__)

#ifndef LLMC_CPU
#define cudaCheck(call) do { cudaError_t err_ = (call); if (err_ != cudaSuccess) { \
    FAIL("CUDA: %s failed: %s (hint: out of memory? see the memory plan printed at start; " \
         "a kernel fault? run under compute-sanitizer)", #call, cudaGetErrorString(err_)); } } while (0)

// the multiprocessors of this process's device, for kernels that size their grid in waves
static inline int device_sm_count(void) {
    static int sms = 0;  // asked once: the device does not change under a process
    if (sms == 0) {
        int dev = 0;
        cudaCheck(cudaGetDevice(&dev));
        cudaCheck(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
    }
    return sms;
}
#endif

// host allocation that cannot silently fail
static inline void* xmalloc_at(size_t n, const char* file, int line) {
    void* p = malloc(n ? n : 1);
    if (!p) fail_at(file, line, "host malloc of %zu bytes failed (hint: not enough RAM)", n);
    return p;
}
#define xmalloc(n) xmalloc_at((n), __FILE__, __LINE__)

static inline FILE* xfopen_at(const char* path, const char* mode, const char* file, int line) {
    FILE* f = fopen(path, mode);
    if (!f) fail_at(file, line, "cannot open '%s' (mode %s): %s", path, mode, strerror(errno));
    return f;
}
#define xfopen(p, m) xfopen_at((p), (m), __FILE__, __LINE__)

// The files a user names (llmc/core/files.h): an input must be a regular file and is opened
// without blocking (a FIFO is refused, not waited on); an output refuses a FIFO or socket
// (a FIFO without a reader fails at once); every close of an output is checked.
static inline int xinput_open_at(const char* path, const char* what, const char* file, int line) {
    char why[1400];
    int fd = input_open_try(path, why, sizeof(why));
    if (fd < 0) fail_at(file, line, "%s: %s (hint: give a regular file)", what, why);
    return fd;
}
#define xinput_open(p, what) xinput_open_at((p), (what), __FILE__, __LINE__)

static inline FILE* xinput_fopen_at(const char* path, const char* what, const char* file, int line) {
    char why[1400];
    FILE* f = input_fopen_try(path, why, sizeof(why));
    if (!f) fail_at(file, line, "%s: %s (hint: give a regular file)", what, why);
    return f;
}
#define xinput_fopen(p, what) xinput_fopen_at((p), (what), __FILE__, __LINE__)

static inline FILE* xoutput_fopen_at(const char* path, const char* what, const char* file, int line) {
    char why[1400];
    FILE* f = output_fopen_try(path, why, sizeof(why));
    if (!f) fail_at(file, line, "%s: %s (hint: give a regular file, or a character device such as /dev/null)", what, why);
    return f;
}
#define xoutput_fopen(p, what) xoutput_fopen_at((p), (what), __FILE__, __LINE__)

static inline void xfclose_at(FILE* f, const char* path, const char* what, const char* file, int line) {
    int err = fclose_err(f);
    if (err) fail_at(file, line, "%s: writing '%s' failed: %s (hint: disk full, or over a file-size limit (ulimit -f)?)",
                     what, path, strerror(err));
}
#define xfclose(f, path, what) xfclose_at((f), (path), (what), __FILE__, __LINE__)

static inline void xfread_at(void* p, size_t size, size_t n, FILE* f, const char* what, const char* file, int line) {
    if (fread(p, size, n, f) != n) fail_at(file, line, "%s: file ended early or read failed", what);
}
#define xfread(p, s, n, f, what) xfread_at((p), (s), (n), (f), (what), __FILE__, __LINE__)

static inline void xfwrite_at(const void* p, size_t size, size_t n, FILE* f, const char* what, const char* file, int line) {
    if (fwrite(p, size, n, f) != n) fail_at(file, line, "%s: write failed (disk full?)", what);
}
#define xfwrite(p, s, n, f, what) xfwrite_at((p), (s), (n), (f), (what), __FILE__, __LINE__)

static inline size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }
