// The host side of a fresh start at scale, without a GPU (the CPU build's model of
// llama3-1B would need 24 GB): the work train_llama does on the host between the seed and
// the first step, timed phase by phase on the threads it is given.
//
//   make build/init_bench
//   OMP_NUM_THREADS=T build/init_bench [N] [--layout]   (N floats, default 1.24e9: llama3-1B)
//
//   touch     the first touch of the N floats that llama_init_params fills (all threads
//             writing zeros): the kernel's page faults, timed apart because they depend on
//             the machine more than on the code (0.3 to 1.3 GB/s on one thread of this
//             project's 2-core VM); in the trainer the fill does this touch
//   fill      llama_init_params' normals: rng_fill_normal (llmc/core/rand.h) into the touched array
//   layout    with --layout, llama_local_from_ref: a calloc'd array filled by all threads
//             in blocks of 2^18 floats, first touch included (a second N floats of memory).
//             Only TP layouts build it; one process, DP and ZeRO upload from the
//             reference array itself
//   bf16      dev_upload_floats' host side: chunks of 16M floats converted to bf16 by all
//             threads into two alternating 32 MiB staging buffers (pageable here: pinned
//             memory needs the CUDA driver), with cuda_bf16.h's own __float2bfloat16 when
//             the CUDA Toolkit is found (make passes its include directory)
//   fp32      the master weights' upload: the same chunks copied as fp32
// The DMA itself, which overlaps the conversion on a GPU machine, is not here.
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <omp.h>
#include "llmc/core/rand.h"
#if __has_include(<cuda_bf16.h>)
#include <cuda_bf16.h>
typedef __nv_bfloat16 bf16;
static inline bf16 to_bf16(float x) { return __float2bfloat16(x); }
#define BF16_FROM "cuda_bf16.h's __float2bfloat16"
#else
// round to nearest even on the bits, as __float2bfloat16 does (NaN kept a quiet NaN)
typedef unsigned short bf16;
static inline bf16 to_bf16(float x) {
    unsigned int u; memcpy(&u, &x, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (bf16)((u >> 16) | 0x40);
    return (bf16)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}
#define BF16_FROM "a bit-level round-to-nearest-even (no CUDA Toolkit found)"
#endif

#define STAGE_BYTES ((size_t)32 << 20)  // llmc/kernels/device.cuh's DEV_STAGE_BYTES
#define PARALLEL_MIN ((size_t)1 << 16)  // and DEV_STAGE_PARALLEL_MIN

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
// the CPU time of the whole process (every thread, user and system): on a machine whose
// cores other work shares, wall time says little, but CPU time / threads is the wall time
// the phase would take on free cores when its work is split evenly (it is, here)
static double cpu_now(void) { struct timespec t; clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }
static double g_cpu0;
static void phase(const char* name, double wall, int threads, const char* rate) {
    double c = cpu_now() - g_cpu0;
    printf("%-8s %7.2f s wall  %7.2f s CPU (%6.2f s per thread)  %s\n", name, wall, c, c / threads, rate);
    g_cpu0 = cpu_now();
}
static char g_rate[64];

int main(int argc, char** argv) {
    size_t n = 1240000000;
    int layout = 0;
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "--layout") == 0) layout = 1;
        else n = (size_t)strtod(argv[i], NULL);
    }
    int threads = omp_get_max_threads();
    printf("init_bench: %zu floats (%.2f GB fp32) on %d threads; bf16 from %s\n", n, n * 4e-9, threads, BF16_FROM);

    g_cpu0 = cpu_now();
    double t0 = now();
    float* h = (float*)malloc(n * sizeof(float));
    if (!h) { fprintf(stderr, "init_bench: cannot allocate %zu floats\n", n); return 1; }
    #pragma omp parallel for schedule(static)
    for (size_t j = 0; j < n; j++) h[j] = 0.0f;
    double t_touch = now() - t0;
    snprintf(g_rate, sizeof g_rate, "%.2f GB/s", n * 4e-9 / t_touch);
    phase("touch", t_touch, threads, g_rate);

    t0 = now();
    Rng rng; rng_init(&rng, 1337);
    rng_fill_normal(&rng, h, n, 0.02f, 0);
    double t_fill = now() - t0;
    snprintf(g_rate, sizeof g_rate, "%.1f ns CPU per normal", 1e9 * (cpu_now() - g_cpu0) / (double)n);
    phase("fill", t_fill, threads, g_rate);

    double t_layout = 0.0;
    if (layout) {
        t0 = now();
        float* local = (float*)calloc(n, sizeof(float));
        if (!local) { fprintf(stderr, "init_bench: cannot allocate a second %zu floats (leave out --layout)\n", n); return 1; }
        const size_t block = (size_t)1 << 18;
        size_t items = (n + block - 1) / block;
        #pragma omp parallel for schedule(static)
        for (size_t k = 0; k < items; k++) {
            size_t c0 = k * block, w = n - c0 < block ? n - c0 : block;
            memcpy(local + c0, h + c0, w * sizeof(float));
        }
        t_layout = now() - t0;
        snprintf(g_rate, sizeof g_rate, "%.2f GB/s", n * 4e-9 / t_layout);
        phase("layout", t_layout, threads, g_rate);
        free(local);
        g_cpu0 = cpu_now();  // the free's unmapping is not the layout's
    }

    char* stage[2] = {(char*)malloc(STAGE_BYTES), (char*)malloc(STAGE_BYTES)};
    if (!stage[0] || !stage[1]) { fprintf(stderr, "init_bench: cannot allocate the staging buffers\n"); return 1; }
    memset(stage[0], 0, STAGE_BYTES); memset(stage[1], 0, STAGE_BYTES);  // as pinned memory is: resident
    g_cpu0 = cpu_now();
    double check = 0.0;
    t0 = now();
    size_t chunk = STAGE_BYTES / sizeof(bf16);
    for (size_t i = 0, k = 0; i < n; i += chunk, k++) {
        size_t m = n - i < chunk ? n - i : chunk;
        bf16* to = (bf16*)stage[k & 1];
        const float* from = h + i;
        #pragma omp parallel for schedule(static) if (m >= PARALLEL_MIN)
        for (size_t j = 0; j < m; j++) to[j] = to_bf16(from[j]);
        unsigned short bits; memcpy(&bits, &to[m - 1], 2); check += bits;
    }
    double t_bf16 = now() - t0;
    snprintf(g_rate, sizeof g_rate, "%.2f GB/s of fp32 read", n * 4e-9 / t_bf16);
    phase("bf16", t_bf16, threads, g_rate);

    t0 = now();
    chunk = STAGE_BYTES / sizeof(float);
    for (size_t i = 0, k = 0; i < n; i += chunk, k++) {
        size_t m = n - i < chunk ? n - i : chunk;
        float* to = (float*)stage[k & 1];
        const float* from = h + i;
        #pragma omp parallel for schedule(static) if (m >= PARALLEL_MIN)
        for (size_t j = 0; j < m; j++) to[j] = from[j];
        check += to[m - 1];
    }
    double t_fp32 = now() - t0;
    snprintf(g_rate, sizeof g_rate, "%.2f GB/s", n * 4e-9 / t_fp32);
    phase("fp32", t_fp32, threads, g_rate);
    printf("total    %7.2f s  on %d threads (checksum %g)\n", t_touch + t_fill + t_layout + t_bf16 + t_fp32, threads, check);
    free(stage[0]); free(stage[1]); free(h);
    return 0;
}
