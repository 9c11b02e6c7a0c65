/*
Ladder for llmc/kernels/bias.cuh (nn.Linear biases of the video DiT).
  version 1: the former llmc launchers (the baseline): forward by blocks of rows, scalar loads; backward by
             blocks of 32 columns x 16 row slices, no scratch.
  version 2: the llmc launchers (moved there as measured on an H200, docs/results/
             gpu_h200_2026-11-26_call2.log). Written as candidates for many rows and few columns (dbias of a [B*N, D] activation
             with B*N ~ 10^5 tokens, D ~ 10^3: v1 has ceil(D/32) blocks, 36 for D = 1152,
             each walking N/16 rows, on a 132-SM GPU):
             - backward in two stages: stage 1 has a block per (32 columns, chunk of
               BIAS2_CHUNK rows), fixed-order partials in fp32 scratch; stage 2 adds
               the chunk partials of each column in chunk order and accumulates into
               dbias. Deterministic (the partition is fixed by constants). Needs scratch
               (bias_backward_scratch_floats), planned once by the caller: the scratch
               argument of llmc's bias_backward.
             - forward with 16-byte vectors when OC is a multiple of the vector width and
               the pointers are 16-byte aligned (else v1's kernel).
Validated against the CPU twin (llmc/kernels/cpu/bias.h via cpu_reference) on random data at odd
sizes (N = 1, OC = 1, N over several chunks with the last partial); the backward
accumulates into random dbias. Determinism: each backward run twice, bitwise.
*/
#include "ladder.h"
#include "../../llmc/kernels/bias.cuh"

// Version 2 has been llmc's launchers since it was moved there (llmc/kernels/bias.cuh, with
// the scratch argument); version 1 launches the kernels that were llmc's before, which llmc
// keeps as its fallbacks (unaligned or odd widths, one chunk of rows, no scratch).
static void forward(int version, floatX* out, const floatX* bias, int N, int OC) {
    if (version == 2) {
        bias_forward(out, bias, N, OC, 0);
        return;
    }
    if (N == 0 || OC == 0) return;
    unsigned grid = (unsigned)(N < BIAS_MAX_GRID ? N : BIAS_MAX_GRID);
    bias_forward_kernel<<<grid, bias_block(OC)>>>(out, bias, N, OC);
    cudaCheck(cudaGetLastError());
}
static void backward(int version, floatX* dbias, const floatX* dout, int N, int OC, float* scratch) {
    bias_backward(dbias, dout, N, OC, version == 2 ? scratch : nullptr, 0);  // no scratch: version 1's kernel
}

static void run_version(int version, int N, int OC, uint64_t seed) {
    size_t n = (size_t)N * OC;
    std::vector<float> out0 = rand_floatX(n, -2.0f, 2.0f, seed + 1), bias = rand_floatX(OC, -1.0f, 1.0f, seed + 2);
    std::vector<float> dout = rand_floatX(n, -1.0f, 1.0f, seed + 3), db0 = rand_floatX(OC, -1.0f, 1.0f, seed + 4);
    floatX *d_out = upload_x(out0), *d_bias = upload_x(bias), *d_dout = upload_x(dout), *d_db = upload_x(db0);
    float* d_scratch = (float*)dev_malloc(bias_backward_scratch_floats(N, OC) * sizeof(float));
    std::vector<float> r_out = out0, r_db = db0;
    ref_bias_forward(r_out.data(), bias.data(), N, OC);
    ref_bias_backward(r_db.data(), dout.data(), N, OC);
    printf("  v%d N=%d OC=%d\n", version, N, OC);
    // Tolerances: forward is one fp32 addition rounded once: bf16 <= 2^-8 relative ->
    // rtol 2^-7 (atol for results near 0 after cancellation: 2^-7 * 0.1 * rms); fp32:
    // exact but for FMA-free ordering -> 1e-6. backward: N terms |dout| < 1 summed in
    // another order: fp32 error <= N 2^-24 sum|terms| ~ N^2 2^-24 worst case, ~sqrt(N) N 2^-24
    // typical; we allow N 2^-20 plus bf16's rounding of the result.
    double rt = LADDER_FP32 ? 1e-6 : ldexp(1.0, -7);
    forward(version, d_out, d_bias, N, OC);
    check("forward out", download_x(d_out, n), r_out, rt * 0.1 * rms_of(r_out), rt);
    backward(version, d_db, d_dout, N, OC, d_scratch);
    std::vector<float> g_db = download_x(d_db, OC);
    check("backward dbias", g_db, r_db, rt * rms_of(r_db) + N * ldexp(1.0, -20), rt);
    upload_x_to(d_db, db0);
    backward(version, d_db, d_dout, N, OC, d_scratch);
    check_same("backward dbias", download_x(d_db, OC), g_db);
    dev_free(d_out); dev_free(d_bias); dev_free(d_dout); dev_free(d_db); dev_free(d_scratch);
}

static void bench_version(int version, int N, int OC) {
    size_t n = (size_t)N * OC;
    floatX *d_out = upload_x(rand_floatX(n, -2.0f, 2.0f, 1)), *d_bias = upload_x(rand_floatX(OC, -1.0f, 1.0f, 2));
    floatX* d_db = upload_x(rand_floatX(OC, -1.0f, 1.0f, 3));
    float* d_scratch = (float*)dev_malloc(bias_backward_scratch_floats(N, OC) * sizeof(float));
    float tf = bench_ms([&] { forward(version, d_out, d_bias, N, OC); }, 20);
    float tb = bench_ms([&] { backward(version, d_db, d_out, N, OC, d_scratch); }, 20);
    double e = (double)n * sizeof(floatX);
    printf("  v%d bench N=%d OC=%d: forward %.3f ms (%.0f GB/s r+w), backward %.3f ms (%.0f GB/s)\n", version, N, OC, tf,
           2 * e / tf * 1e-6, tb, e / tb * 1e-6);
    dev_free(d_out); dev_free(d_bias); dev_free(d_db); dev_free(d_scratch);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "bias", 2);
    const int shapes[][2] = {{7, 24}, {1, 1}, {65, 61}, {1, 40}, {300, 67}, {530, 48}, {37, 300}, {200, 1152}};
    for (int version = 1; version <= 2; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version,
               version == 1 ? "rows x columns forward, 32x16 column blocks backward (llmc)"
                            : "16-byte vector forward, two-stage backward");
        uint64_t seed = 900;
        for (auto& s : shapes) run_version(version, s[0], s[1], seed += 10);
        if (ladder_quick()) continue;
        bench_version(version, 32768, 1152);
        bench_version(version, 32768, 4608);  // fc1 of D = 1152 (FF = 4D)
    }
    return ladder_finish("bias");
}
