// The machine's sgemm speed on one GEMM shape, the yardstick of the CPU step's FLOP/s:
//
//   build/sgemm_bench M N K [repeats]     C[M,N] = A[M,K] . B[N,K]^T (the shape of the head's
//                                         forward: M = B*T tokens, N = V, K = D)
//
// Prints "sgemm M N K: X GFLOP/s (best of R)". Uses the sgemm it is built with (the
// Makefile's BLAS, `make print-cpu-flags`: oneDNN's dnnl_sgemm with -DUSE_DNNL, else a
// cblas_sgemm: OpenBLAS, BLIS) with the threads it is given (OMP_NUM_THREADS,
// OPENBLAS_NUM_THREADS, BLIS_NUM_THREADS; else every core), on random data.
// dev/bench/blas_compare.c compares the libraries themselves.
#ifdef USE_DNNL
#include <oneapi/dnnl/dnnl.h>
#else
#include <cblas.h>
#endif
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#ifdef USE_BLIS
#include <blis.h>
#include <unistd.h>
#endif

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }

int main(int argc, char** argv) {
    if (argc < 4) { fprintf(stderr, "usage: sgemm_bench M N K [repeats]\n"); return 2; }
    int M = atoi(argv[1]), N = atoi(argv[2]), K = atoi(argv[3]), R = argc > 4 ? atoi(argv[4]) : 5;
    if (M < 1 || N < 1 || K < 1 || R < 1) { fprintf(stderr, "sgemm_bench: sizes must be positive\n"); return 2; }
#ifdef USE_BLIS
    // BLIS runs on 1 thread unless told: as many as OpenMP would use, as llmc/kernels/cpu/matmul.h does
    if (!getenv("BLIS_NUM_THREADS")) {
        long nt = getenv("OMP_NUM_THREADS") ? atol(getenv("OMP_NUM_THREADS")) : sysconf(_SC_NPROCESSORS_ONLN);
        bli_thread_set_num_threads(nt > 0 ? nt : 1);
    }
#endif
    float* a = (float*)malloc((size_t)M * K * sizeof(float));
    float* b = (float*)malloc((size_t)N * K * sizeof(float));
    float* c = (float*)malloc((size_t)M * N * sizeof(float));
    if (!a || !b || !c) { fprintf(stderr, "sgemm_bench: out of memory\n"); return 1; }
    unsigned s = 1;
    for (size_t i = 0; i < (size_t)M * K; i++) { s = s * 1664525u + 1013904223u; a[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    for (size_t i = 0; i < (size_t)N * K; i++) { s = s * 1664525u + 1013904223u; b[i] = (float)(s >> 8) / 16777216.0f - 0.5f; }
    double best = 1e30;
    for (int r = 0; r <= R; r++) {  // the first call warms up
        double t0 = now();
#ifdef USE_DNNL
        if (dnnl_sgemm('N', 'T', M, N, K, 1.0f, a, K, b, K, 0.0f, c, N) != dnnl_success) { fprintf(stderr, "dnnl_sgemm failed\n"); return 1; }
#else
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f, a, K, b, K, 0.0f, c, N);
#endif
        double t = now() - t0;
        if (r > 0 && t < best) best = t;
    }
    printf("sgemm %d %d %d: %.1f GFLOP/s (best of %d, %.1f ms)\n", M, N, K, 2.0 * M * N * K / best / 1e9, R, best * 1e3);
    free(a); free(b); free(c);
    return 0;
}
