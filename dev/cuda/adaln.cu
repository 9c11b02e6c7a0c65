/*
Ladder for llmc/kernels/adaln.cuh (adaLN-Zero of the video DiT: layernorm_modulate_* and
gated_residual_*). Activations [B*N, C]; shift/scale/gate are columns of [B, ld].
  version 1: the former llmc launchers (the baseline): one warp per row, scalar loads; per-sample column
             sums (dshift, dscale, dgate) by blocks of 32 columns x 16 row slices of
             one sample, no scratch.
  version 2: the llmc launchers (moved there as measured on an H200, docs/results/
             gpu_h200_2026-11-26_call2.log); version 1 launches llmc's fallback kernels directly.
             Written as candidates for long sequences (N up to ~10^5 tokens per sample):
             - rows held in registers as 16-byte vectors (8 bf16 / 4 fp32 per load), one
               warp per row: x is read from memory once in the forward, x and dout once
               in the backward's dinp (v1 reads them 3 and 2 times, through L1/L2);
             - the column sums in two stages: stage 1 splits every sample into chunks
               of ADALN2_CHUNK rows (a block per (32 columns, sample, chunk), fixed-order
               partials in fp32 scratch), stage 2 adds a sample's chunk partials in
               chunk order. v1 has only ceil(C/32) * B blocks, each walking N/16 rows:
               for B = 1, C = 1152 that is 36 blocks on a 132-SM GPU. The partition is
               fixed by constants: deterministic. Needs scratch
               (adaln_backward_scratch_floats), planned once by the caller: the
               scratch argument of llmc's backward launchers.
             - gated residual: 16-byte vectors.
             Register use (nvcc 13.0, sm_90): up to 168 in the forward and 255 in dinp
             at 16 vectors per lane in bf16 (C > 2048), where dinp spills 44 bytes.
             The vector paths need C, ld and the column offsets multiples of the vector
             width and 16-byte aligned pointers; otherwise v2 falls back to v1's row
             kernels (the two-stage sums work for any shape).
Validated against the CPU twin (llmc/kernels/cpu/adaln.h via cpu_reference) on random data: odd
C and ld, unaligned column offsets, N = 1, C = 1, N over a chunk, C = 1152 and 4096
(the register paths' largest case in bf16). The [B, ld] gradient buffers are checked
whole (columns outside the slice must keep their values). Determinism: each backward
run twice, bitwise.
*/
#include "ladder.h"
#include "../../llmc/kernels/adaln.cuh"

// ---------------------------------------------------------------------------------
// the versions behind one interface. Version 2 has been llmc's launchers since it was moved
// there (llmc/kernels/adaln.cuh: the vector rows and the two-stage sums, with the scratch
// argument); version 1 launches the kernels that were llmc's before, which llmc keeps as
// its fallbacks (unaligned or odd widths, rows too wide for registers, no scratch).
struct Shape { int B, N, C, ld, off_a, off_b; };

static void ln_forward(int version, floatX* out, float* mean, float* rstd, const floatX* inp, const floatX* shift,
                       const floatX* scale, int ld, int B, int N, int C, float eps) {
    if (version == 2) {
        layernorm_modulate_forward(out, mean, rstd, inp, shift, scale, ld, B, N, C, eps, 0);
        return;
    }
    int rows = B * N;
    if (rows == 0 || C == 0) return;
    unsigned grid = (unsigned)ceil_div((size_t)rows, ADALN_ROWS_PER_BLOCK);
    layernorm_modulate_forward_kernel<<<grid, 32 * ADALN_ROWS_PER_BLOCK>>>(out, mean, rstd, inp, shift, scale, ld, N,
                                                                           rows, C, eps);
    cudaCheck(cudaGetLastError());
}

static void ln_backward(int version, floatX* dinp, floatX* dshift, floatX* dscale, const floatX* dout,
                        const floatX* inp, const float* mean, const float* rstd, const floatX* scale, int ld, int B,
                        int N, int C, float* scratch) {
    // version 1: llmc's launcher without scratch, with the scalar row kernel
    if (version == 2) {
        layernorm_modulate_backward(dinp, dshift, dscale, dout, inp, mean, rstd, scale, ld, B, N, C, scratch, 0);
        return;
    }
    int rows = B * N;
    if (B == 0 || C == 0) return;
    if (rows > 0) {
        unsigned grid = (unsigned)ceil_div((size_t)rows, ADALN_ROWS_PER_BLOCK);
        layernorm_modulate_backward_dinp_kernel<<<grid, 32 * ADALN_ROWS_PER_BLOCK>>>(dinp, dout, inp, mean, rstd, scale,
                                                                                   ld, N, rows, C);
        cudaCheck(cudaGetLastError());
    }
    layernorm_modulate_backward_colsum_kernel<<<adaln_colsum_grid(B, C), dim3(ADALN_COL_CH, ADALN_COL_SLICES)>>>(
        dshift, dscale, dout, inp, mean, rstd, ld, B, N, C);
    cudaCheck(cudaGetLastError());
}

static void gres_forward(int version, floatX* out, const floatX* res, const floatX* y, const floatX* gate, int ld,
                         int B, int N, int C) {
    if (version == 2) {
        gated_residual_forward(out, res, y, gate, ld, B, N, C, 0);
        return;
    }
    int rows = B * N;
    if (rows == 0 || C == 0) return;
    unsigned grid, block;
    adaln_rows_launch_dims(rows, C, &grid, &block);
    gated_residual_forward_kernel<<<grid, block>>>(out, res, y, gate, ld, N, rows, C);
    cudaCheck(cudaGetLastError());
}

static void gres_backward(int version, floatX* dy, floatX* dgate, const floatX* dout, const floatX* y,
                          const floatX* gate, int ld, int B, int N, int C, int accumulate, float* scratch) {
    if (version == 2) {
        gated_residual_backward(dy, dgate, dout, y, gate, ld, B, N, C, accumulate, scratch, 0);
        return;
    }
    int rows = B * N;
    if (B == 0 || C == 0) return;
    if (dy && rows > 0) {
        unsigned grid, block;
        adaln_rows_launch_dims(rows, C, &grid, &block);
        gated_residual_backward_dy_kernel<<<grid, block>>>(dy, dout, gate, ld, N, rows, C);
        cudaCheck(cudaGetLastError());
    }
    if (dgate) {
        gated_residual_backward_dgate_kernel<<<adaln_colsum_grid(B, C), dim3(ADALN_COL_CH, ADALN_COL_SLICES)>>>(
            dgate, dout, y, ld, B, N, C, accumulate);
        cudaCheck(cudaGetLastError());
    }
}

// ---------------------------------------------------------------------------------
// validation
static void run_version(int version, const Shape& sh, uint64_t seed) {
    const int B = sh.B, N = sh.N, C = sh.C, ld = sh.ld, rows = B * N;
    const float eps = 1e-6f;
    size_t n = (size_t)rows * C, na = (size_t)B * ld;
    std::vector<float> x = rand_floatX(n, -2.0f, 2.0f, seed + 1), ada = rand_floatX(na, -1.0f, 1.0f, seed + 2);
    std::vector<float> dout = rand_floatX(n, -1.0f, 1.0f, seed + 3), dinp0 = rand_floatX(n, -1.0f, 1.0f, seed + 4);
    std::vector<float> dada0 = rand_floatX(na, -1.0f, 1.0f, seed + 5), dada1 = rand_floatX(na, -1.0f, 1.0f, seed + 6);
    std::vector<float> res = rand_floatX(n, -2.0f, 2.0f, seed + 7);
    floatX *d_x = upload_x(x), *d_ada = upload_x(ada), *d_dout = upload_x(dout), *d_dinp = upload_x(dinp0);
    floatX *d_da0 = upload_x(dada0), *d_da1 = upload_x(dada1), *d_res = upload_x(res);
    floatX* d_out = (floatX*)dev_malloc(n * sizeof(floatX));
    float *d_mean = (float*)dev_malloc(rows * sizeof(float)), *d_rstd = (float*)dev_malloc(rows * sizeof(float));
    float* d_scratch = (float*)dev_malloc(adaln_backward_scratch_floats(B, N, C) * sizeof(float));
    const float *shift = ada.data() + sh.off_a, *scale = ada.data() + sh.off_b;

    std::vector<float> r_out(n), r_mean(rows), r_rstd(rows), r_dinp = dinp0, r_dsh = dada0, r_dsc = dada1;
    ref_layernorm_modulate_forward(r_out.data(), r_mean.data(), r_rstd.data(), x.data(), shift, scale, ld, B, N, C, eps);
    ref_layernorm_modulate_backward(r_dinp.data(), r_dsh.data() + sh.off_a, r_dsc.data() + sh.off_b, dout.data(),
                                    x.data(), r_mean.data(), r_rstd.data(), scale, ld, B, N, C);
    std::vector<float> r_gout(n), r_dy(n), r_dg = dada0;
    ref_gated_residual_forward(r_gout.data(), res.data(), x.data(), shift, ld, B, N, C);
    ref_gated_residual_backward(r_dy.data(), r_dg.data() + sh.off_a, dout.data(), x.data(), shift, ld, B, N, C, 1);

    printf("  v%d B=%d N=%d C=%d ld=%d off=%d/%d\n", version, B, N, C, ld, sh.off_a, sh.off_b);
    // Tolerances, as the rmsnorm ladder: bf16 builds round every output once (<= 2^-8
    // relative) -> rtol 2^-7, atol 2^-7 * rms for the cancellations (dinp, x - mean); fp32
    // builds differ by summation order and FMA contraction -> 1e-5. mean and rstd are fp32
    // sums of C terms in another order: 2e-5 (rstd relative; mean absolute on |x| < 2).
    // Column sums of N rows in another order: + N 2^-22 (terms below 1, |xhat| below ~3).
    double rt = LADDER_FP32 ? 1e-5 : ldexp(1.0, -7), col = N * ldexp(1.0, -22) * 3;
    ln_forward(version, d_out, d_mean, d_rstd, d_x, d_ada + sh.off_a, d_ada + sh.off_b, ld, B, N, C, eps);
    check("lnmod forward out", download_x(d_out, n), r_out, rt * rms_of(r_out), rt);
    check("lnmod forward mean", download_f(d_mean, rows), r_mean, 2e-5, 0.0);
    check("lnmod forward rstd", download_f(d_rstd, rows), r_rstd, 0.0, 2e-5);
    upload_f_to(d_mean, r_mean);  // the backward is checked on the CPU's statistics
    upload_f_to(d_rstd, r_rstd);
    ln_backward(version, d_dinp, d_da0 + sh.off_a, d_da1 + sh.off_b, d_dout, d_x, d_mean, d_rstd, d_ada + sh.off_b, ld,
                B, N, C, d_scratch);
    std::vector<float> g_dinp = download_x(d_dinp, n), g_dsh = download_x(d_da0, na), g_dsc = download_x(d_da1, na);
    check("lnmod backward dinp", g_dinp, r_dinp, rt * rms_of(r_dinp), rt);
    check("lnmod backward dshift", g_dsh, r_dsh, rt * rms_of(r_dsh) + col, rt);
    check("lnmod backward dscale", g_dsc, r_dsc, rt * rms_of(r_dsc) + col, rt);
    upload_x_to(d_dinp, dinp0);
    upload_x_to(d_da0, dada0);
    upload_x_to(d_da1, dada1);
    ln_backward(version, d_dinp, d_da0 + sh.off_a, d_da1 + sh.off_b, d_dout, d_x, d_mean, d_rstd, d_ada + sh.off_b, ld,
                B, N, C, d_scratch);
    check_same("lnmod backward dinp", download_x(d_dinp, n), g_dinp);
    check_same("lnmod backward dshift", download_x(d_da0, na), g_dsh);
    check_same("lnmod backward dscale", download_x(d_da1, na), g_dsc);

    // gated residual, in place (out == res) as the trainer uses it; y = x, gate = shift's columns
    gres_forward(version, d_res, d_res, d_x, d_ada + sh.off_a, ld, B, N, C);
    check("gres forward (in place)", download_x(d_res, n), r_gout, rt * 0.1 * rms_of(r_gout), rt);
    upload_x_to(d_da0, dada0);
    gres_backward(version, d_out, d_da0 + sh.off_a, d_dout, d_x, d_ada + sh.off_a, ld, B, N, C, 1, d_scratch);
    std::vector<float> g_dg = download_x(d_da0, na);
    check("gres backward dy", download_x(d_out, n), r_dy, rt * 0.1 * rms_of(r_dy), rt);
    check("gres backward dgate (acc)", g_dg, r_dg, rt * rms_of(r_dg) + col, rt);
    upload_x_to(d_da0, dada0);
    gres_backward(version, nullptr, d_da0 + sh.off_a, d_dout, d_x, d_ada + sh.off_a, ld, B, N, C, 1, d_scratch);
    check_same("gres backward dgate", download_x(d_da0, na), g_dg);

    dev_free(d_x); dev_free(d_ada); dev_free(d_dout); dev_free(d_dinp); dev_free(d_da0); dev_free(d_da1);
    dev_free(d_res); dev_free(d_out); dev_free(d_mean); dev_free(d_rstd); dev_free(d_scratch);
}

static void bench_version(int version, int B, int N, int C) {
    const int ld = 6 * C, rows = B * N;
    size_t n = (size_t)rows * C;
    floatX *d_x = upload_x(rand_floatX(n, -2.0f, 2.0f, 1)), *d_ada = upload_x(rand_floatX((size_t)B * ld, -1.0f, 1.0f, 2));
    floatX *d_dout = upload_x(rand_floatX(n, -1.0f, 1.0f, 3)), *d_dinp = upload_x(rand_floatX(n, -1.0f, 1.0f, 4));
    floatX* d_dada = upload_x(rand_floatX((size_t)B * ld, -1.0f, 1.0f, 5));
    floatX* d_out = (floatX*)dev_malloc(n * sizeof(floatX));
    float *d_mean = (float*)dev_malloc(rows * sizeof(float)), *d_rstd = (float*)dev_malloc(rows * sizeof(float));
    float* d_scratch = (float*)dev_malloc(adaln_backward_scratch_floats(B, N, C) * sizeof(float));
    float tf = bench_ms([&] { ln_forward(version, d_out, d_mean, d_rstd, d_x, d_ada, d_ada + C, ld, B, N, C, 1e-6f); }, 20);
    float tb = bench_ms([&] {
        ln_backward(version, d_dinp, d_dada, d_dada + C, d_dout, d_x, d_mean, d_rstd, d_ada + C, ld, B, N, C, d_scratch);
    }, 20);
    float tg = bench_ms([&] { gres_forward(version, d_out, d_out, d_x, d_ada + 2 * C, ld, B, N, C); }, 20);
    float tgb = bench_ms([&] {
        gres_backward(version, d_dinp, d_dada + 2 * C, d_dout, d_x, d_ada + 2 * C, ld, B, N, C, 0, d_scratch);
    }, 20);
    // bytes that must move at least once: fwd x in, y out; bwd x, dout in (twice: rows and
    // columns), dinp in and out; gres fwd res, y in, out; gres bwd dout, y in, dy out
    double e = (double)n * sizeof(floatX);
    printf("  v%d bench B=%d N=%d C=%d: lnmod fwd %.3f ms (%.0f GB/s), bwd %.3f ms (%.0f GB/s); gres fwd %.3f ms "
           "(%.0f GB/s), bwd %.3f ms (%.0f GB/s)\n",
           version, B, N, C, tf, 2 * e / tf * 1e-6, tb, 6 * e / tb * 1e-6, tg, 3 * e / tg * 1e-6, tgb, 3 * e / tgb * 1e-6);
    dev_free(d_x); dev_free(d_ada); dev_free(d_dout); dev_free(d_dinp); dev_free(d_dada); dev_free(d_out);
    dev_free(d_mean); dev_free(d_rstd); dev_free(d_scratch);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "adaln", 2);
    const Shape shapes[] = {
        {2, 7, 24, 144, 0, 24},        // ld = 6D, shift at 0, scale at D: the vector path
        {3, 5, 33, 101, 1, 67},        // odd C and ld, unaligned columns: v2 falls back to v1's row kernels
        {1, 1, 1, 1, 0, 0},            // N = 1, C = 1
        {2, 1, 40, 240, 0, 40},        // N = 1, vector path
        {2, 300, 64, 384, 0, 64},      // N over one chunk (two-stage sums with 2 chunks)
        {1, 530, 48, 288, 48, 96},     // 3 chunks, the last partial
        {3, 11, 512, 3072, 0, 512},    // 2 vectors per lane in bf16, 4 in fp32
        {1, 13, 1024, 1024, 0, 0},     // 4 in bf16, 8 in fp32; shift and scale the same columns
        {1, 200, 1152, 6912, 0, 1152}, // DiT-XL width: 5 vectors per lane in bf16 (8 in registers), 9 in fp32 (16)
        {2, 9, 4096, 24576, 0, 4096},  // the widest row of the register path (bf16)
    };
    for (int version = 1; version <= 2; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version,
               version == 1 ? "warp per row, column sums 32x16 per sample (llmc)"
                            : "rows in registers (16-byte vectors), two-stage column sums");
        uint64_t seed = 700;
        for (const Shape& s : shapes) run_version(version, s, seed += 10);
        if (ladder_quick()) continue;
        bench_version(version, 2, 16384, 1152);
        bench_version(version, 1, 32768, 3072);
    }
    return ladder_finish("adaln");
}
