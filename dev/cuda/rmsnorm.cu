/*
Ladder for llmc/kernels/rmsnorm.cuh.
  version 1: one thread per row (forward and dinp), one thread per channel walking
             all rows in order for dw: simple, deterministic, little parallelism
  version 2: one warp per row with 2-byte loads, the row read twice; dw by a second
             kernel, 32 channels x 16 row slices per block, the 16 partials added in a
             fixed order (the llmc kernels before version 3, kept here)
  version 3: 16-byte chunks kept in registers (the row read once), L = 1..32 lanes per
             row, a block per 8 (or more) rows; the backward in one kernel, dw reduced
             through per-block partials and a fixed tree (last block of each group of 16,
             then the last group), no second pass over dy and x (llmc's kernels for rows
             under 32 chunks or not 16-byte aligned; the backward's too over 256 chunks)
  version 4: the llmc kernels: the forward of rows of at least 32 chunks (C >= 256 in
             bf16) on the 16-byte path runs a persistent grid (2 blocks a SM), the weight
             staged once a block in shared memory, and each warp loads its next row
             before it reduces and writes the current one, so two rows a warp are in
             flight and no block is launched per 8 rows (version 3: 1,024 blocks of 8 rows
             at llama3-1B, 3.9 waves, each warp loading, reducing, storing, then exiting).
             The same arithmetic in the same order as version 3: bitwise its results
             (checked). Other shapes and the backward: version 3's kernels.
             Predicted at llama3-1B (N = 8192, C = 2048, bf16) on the H200, before it ran:
             67 MB a call at 3.2-3.6 TB/s (75-85% of copy): 19-21 us against version 3's
             measured 34 us, ~0.45 ms less a step (33 calls). Moved into llmc before a GPU
             measured it (bitwise version 3's results, so the only risk is its speed:
             scripts/gpu_check.sh runs this ladder's benchmark).
  version 5: the llmc kernels: the backward's streaming schedule, for rows of 32 to 256
             chunks on the 16-byte path (256 <= C <= 2048 in bf16, 128 <= C <= 1024 in
             fp32): version 3's grid, row partition, slots and dw tree (so dw is added in
             version 3's order), but a warp keeps its row's dy and x in registers between
             the dot product and the update (version 3 reads rows over 2 chunks a lane
             again), loads the next row's dy and x before it reduces and writes the current
             one, and reads w from shared memory (staged once a block). Two rows of dy and
             x in registers (128 registers at 8 chunks a lane; 235 in all, no spill) leave
             one block of 8 warps a SM: version 3's 256 blocks at llama3-1B run in two
             waves on 132 SMs. The same arithmetic in the same order as version 3: bitwise
             its dinp and dw (checked here on every shape). Other shapes: version 3's.
             Predicted at llama3-1B (N = 8192, C = 2048, bf16) on the H200, before it ran:
             134 MB a call (dy, x, dinp read, dinp written; plus 2 MB of fp32 partials
             through L2). Version 3 measured 72 us (1.86 TB/s, 44% of the 4.25 TB/s copy);
             its rows over 2 chunks a lane are read twice, in loops that issue a chunk of
             each tensor a lane per step, so ~16 KB a SM in flight where Little's law asks
             ~32 KB (4.25 TB/s x ~1 us / 132 SMs). Version 5 has ~64 KB a SM in flight
             through a row (8 warps, each the next row's dy and x, 8 KB) besides the current
             dinp, like the forward's streaming kernel that measured 75-76% of copy; the
             streaming part should run near that, 3.0-3.2 TB/s (42-45 us), less what the
             forward does not pay: two waves, each exposing its first row's loads (~1-2 us
             of a warp's 4 rows), and the tree's ~3 us tail on one SM. Predicted: 46-52 us
             a call (2.6-2.9 TB/s, 61-69% of copy) against 72 us, ~0.7-0.85 ms less a step
             (33 calls). Moved into llmc before a GPU measured it, as version 4 was
             (bitwise version 3's results, so the only risk is its speed:
             scripts/gpu_check.sh runs this ladder's benchmark).
Validated against the CPU twin (llmc/kernels/cpu/rmsnorm.h) on random data, odd C, rows
not a multiple of 8 or 16; the backward accumulates into random dinp and dw.
Shapes with offset=1 start every floatX buffer one element into its allocation: no row
is 16-byte aligned, so version 3 takes its element-by-element path.
Determinism: the backward of versions 2 to 5 runs twice, bitwise.
*/
#include "ladder.h"
#include "../../llmc/kernels/rmsnorm.cuh"

__global__ void rmsnorm_forward_v1_kernel(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C,
                                          float eps) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const floatX* x = inp + (size_t)i * C;
    float ss = 0.0f;
    for (int c = 0; c < C; c++) ss += (float)x[c] * (float)x[c];
    float r = 1.0f / sqrtf(ss / C + eps);
    for (int c = 0; c < C; c++) out[(size_t)i * C + c] = (floatX)((float)x[c] * r * (float)w[c]);
    rstd[i] = r;
}
__global__ void rmsnorm_dinp_v1_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* w,
                                       const float* rstd, int N, int C) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= N) return;
    const floatX* x = inp + (size_t)i * C;
    const floatX* dy = dout + (size_t)i * C;
    float r = rstd[i], dot = 0.0f;
    for (int c = 0; c < C; c++) dot += (float)dy[c] * (float)w[c] * (float)x[c];
    float k = dot * r * r * r / C;
    for (int c = 0; c < C; c++) {
        floatX* dx = dinp + (size_t)i * C + c;
        *dx = (floatX)((float)*dx + r * (float)w[c] * (float)dy[c] - k * (float)x[c]);
    }
}
__global__ void rmsnorm_dw_v1_kernel(floatX* dw, const floatX* dout, const floatX* inp, const float* rstd, int N,
                                     int C) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= C) return;
    float acc = 0.0f;
    for (int i = 0; i < N; i++) acc += (float)dout[(size_t)i * C + c] * (float)inp[(size_t)i * C + c] * rstd[i];
    dw[c] = (floatX)((float)dw[c] + acc);
}

// version 2: one warp per row (8 rows per 256-thread block), scalar loads
__global__ void rmsnorm_forward_v2_kernel(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C,
                                          float eps) {
    int lane = threadIdx.x & 31;
    int i = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (i >= N) return;
    const floatX* x = inp + (size_t)i * C;
    float ss = 0.0f;
    for (int c = lane; c < C; c += 32) {
        float xc = (float)x[c];
        ss += xc * xc;
    }
    for (int off = 16; off > 0; off >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, off);
    float r = 1.0f / sqrtf(ss / C + eps);
    floatX* y = out + (size_t)i * C;
    for (int c = lane; c < C; c += 32) y[c] = (floatX)((float)x[c] * r * (float)w[c]);
    if (lane == 0) rstd[i] = r;
}
__global__ void rmsnorm_dinp_v2_kernel(floatX* dinp, const floatX* dout, const floatX* inp, const floatX* w,
                                       const float* rstd, int N, int C) {
    int lane = threadIdx.x & 31;
    int i = blockIdx.x * 8 + (threadIdx.x >> 5);
    if (i >= N) return;
    const floatX* x = inp + (size_t)i * C;
    const floatX* dy = dout + (size_t)i * C;
    floatX* dx = dinp + (size_t)i * C;
    float r = rstd[i];
    float dot = 0.0f;
    for (int c = lane; c < C; c += 32) dot += (float)dy[c] * (float)w[c] * (float)x[c];
    for (int off = 16; off > 0; off >>= 1) dot += __shfl_xor_sync(0xffffffffu, dot, off);
    float k = dot * r * r * r / C;
    for (int c = lane; c < C; c += 32)
        dx[c] = (floatX)((float)dx[c] + (r * (float)w[c] * (float)dy[c] - k * (float)x[c]));
}
__global__ void rmsnorm_dw_v2_kernel(floatX* dw, const floatX* dout, const floatX* inp, const float* rstd, int N, int C) {
    __shared__ float part[16][32];
    int tx = threadIdx.x, ty = threadIdx.y;
    int c = blockIdx.x * 32 + tx;
    float acc = 0.0f;
    if (c < C)
        for (int i = ty; i < N; i += 16) acc += (float)dout[(size_t)i * C + c] * (float)inp[(size_t)i * C + c] * rstd[i];
    part[ty][tx] = acc;
    __syncthreads();
    if (ty == 0 && c < C) {
        float sum = 0.0f;
        for (int y = 0; y < 16; y++) sum += part[y][tx];
        dw[c] = (floatX)((float)dw[c] + sum);
    }
}

// version 3's forward: the per-row kernel of llmc alone (llmc's rmsnorm_forward now sends rows
// of at least 32 chunks on the 16-byte path to version 4's streaming kernel)
static void rmsnorm_forward_v3(floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C, float eps) {
    int nch = (int)ceil_div((size_t)C, RMS_VEC), L = rms_lanes(nch), npl = rms_npl(nch, L, RMS_MAX_NPL);
    int vec = rms_vec_ok(C, out, inp, w, inp);
    unsigned grid = (unsigned)ceil_div((size_t)N, (size_t)RMS_WARPS * (32 / L));
    rmsnorm_forward_kernel<<<grid, 32 * RMS_WARPS>>>(out, rstd, inp, w, N, C, eps, vec, npl, L);
    cudaCheck(cudaGetLastError());
}

// version 3's backward: llmc's per-row fused kernel alone (llmc's rmsnorm_backward now sends
// rows of 32 to 256 chunks on the 16-byte path to version 5's streaming kernel)
static void rmsnorm_backward_v3(floatX* dinp, floatX* dw, const floatX* dout, const floatX* inp, const floatX* w,
                                const float* rstd, int N, int C) {
    int fused, stream, warps, blocks;
    size_t smem;
    rms_backward_smem_allowed(&fused, &stream);
    rms_backward_shape(N, C, &warps, &blocks, &smem);
    if (N <= 0 || warps == 0 || smem > (size_t)fused) {  // the two-kernel path, as llmc
        rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, 0);
        return;
    }
    int vec = rms_vec_ok(C, dinp, dout, inp, w);
    int nch = (int)ceil_div((size_t)C, RMS_VEC), L = rms_lanes(nch), npl = rms_npl(nch, L, RMS_BWD_MAX_NPL);
    rmsnorm_backward_kernel<<<blocks, 32 * warps, smem>>>(dinp, dw, dout, inp, w, rstd, N, C, vec, npl, L);
    cudaCheck(cudaGetLastError());
}

static void forward(int version, floatX* out, float* rstd, const floatX* inp, const floatX* w, int N, int C, float eps) {
    if (version == 1) {
        rmsnorm_forward_v1_kernel<<<(unsigned)ceil_div(N, 128), 128>>>(out, rstd, inp, w, N, C, eps);
        cudaCheck(cudaGetLastError());
    } else if (version == 2) {
        rmsnorm_forward_v2_kernel<<<(unsigned)ceil_div(N, 8), 256>>>(out, rstd, inp, w, N, C, eps);
        cudaCheck(cudaGetLastError());
    } else if (version == 3) {
        rmsnorm_forward_v3(out, rstd, inp, w, N, C, eps);
    } else {
        rmsnorm_forward(out, rstd, inp, w, N, C, eps, 0);
    }
}
static void backward(int version, floatX* dinp, floatX* dw, const floatX* dout, const floatX* inp, const floatX* w,
                     const float* rstd, int N, int C) {
    if (version == 1) {
        rmsnorm_dinp_v1_kernel<<<(unsigned)ceil_div(N, 128), 128>>>(dinp, dout, inp, w, rstd, N, C);
        cudaCheck(cudaGetLastError());
        rmsnorm_dw_v1_kernel<<<(unsigned)ceil_div(C, 128), 128>>>(dw, dout, inp, rstd, N, C);
        cudaCheck(cudaGetLastError());
    } else if (version == 2) {
        rmsnorm_dinp_v2_kernel<<<(unsigned)ceil_div(N, 8), 256>>>(dinp, dout, inp, w, rstd, N, C);
        cudaCheck(cudaGetLastError());
        rmsnorm_dw_v2_kernel<<<(unsigned)ceil_div(C, 32), dim3(32, 16)>>>(dw, dout, inp, rstd, N, C);
        cudaCheck(cudaGetLastError());
    } else if (version <= 4) {
        rmsnorm_backward_v3(dinp, dw, dout, inp, w, rstd, N, C);
    } else {
        rmsnorm_backward(dinp, dw, dout, inp, w, rstd, N, C, 0);
    }
}

static void run_version(int version, int N, int C, int off, uint64_t seed) {
    const float eps = 1e-5f;
    size_t n = (size_t)N * C;
    std::vector<float> x = rand_floatX(n, -2.0f, 2.0f, seed + 1);
    std::vector<float> w = rand_floatX(C, 0.5f, 1.5f, seed + 2);
    std::vector<float> dout = rand_floatX(n, -1.0f, 1.0f, seed + 3);
    std::vector<float> dinp0 = rand_floatX(n, -1.0f, 1.0f, seed + 4);
    std::vector<float> dw0 = rand_floatX(C, -1.0f, 1.0f, seed + 5);
    // off leading elements in every floatX buffer (never read): rows not 16-byte aligned
    auto padded = [off](const std::vector<float>& v) { std::vector<float> p(off, 3.0f); p.insert(p.end(), v.begin(), v.end()); return p; };
    auto unpad = [off](std::vector<float> v) { v.erase(v.begin(), v.begin() + off); return v; };
    floatX *d_x = upload_x(padded(x)), *d_w = upload_x(padded(w)), *d_dout = upload_x(padded(dout));
    floatX *d_dinp = upload_x(padded(dinp0)), *d_dw = upload_x(padded(dw0));
    floatX* d_out = (floatX*)dev_malloc((n + off) * sizeof(floatX));
    float* d_rstd = (float*)dev_malloc(N * sizeof(float));

    std::vector<float> r_out(n), r_rstd(N), r_dinp = dinp0, r_dw = dw0;
    ref_rmsnorm_forward(r_out.data(), r_rstd.data(), x.data(), w.data(), N, C, eps);
    // the backward is checked on the CPU's rstd, so that it is tested on its own
    ref_rmsnorm_backward(r_dinp.data(), r_dw.data(), dout.data(), x.data(), w.data(), r_rstd.data(), N, C);

    printf("  v%d N=%d C=%d offset=%d\n", version, N, C, off);
    if (version == 4) {  // bitwise version 3's forward
        forward(3, d_out + off, d_rstd, d_x + off, d_w + off, N, C, eps);
        std::vector<float> o3 = unpad(download_x(d_out, n + off)), s3 = download_f(d_rstd, N);
        forward(4, d_out + off, d_rstd, d_x + off, d_w + off, N, C, eps);
        printf("    (versus version 3)\n");
        check_same("forward out", unpad(download_x(d_out, n + off)), o3);
        check_same("forward rstd", download_f(d_rstd, N), s3);
    }
    forward(version, d_out + off, d_rstd, d_x + off, d_w + off, N, C, eps);
    // Tolerances. rstd: fp32 sums of the same C positive squares in another order:
    // typical relative error ~ sqrt(C) * 2^-24 (3e-6 at C = 2048, halved by the
    // rsqrt); we use 2e-5.
    // out, dinp, dw: bf16 builds round the output once (<= 2^-8 relative, 8 significant
    // bits) -> rtol 2^-7, atol 2^-7 * rms for the cancellation in dinp's r*w*dy - k*x and in dw's sums;
    // fp32 builds differ only by summation order and FMA contraction -> 1e-5.
    double rt = LADDER_FP32 ? 1e-5 : ldexp(1.0, -7);
    check("forward out", unpad(download_x(d_out, n + off)), r_out, rt * rms_of(r_out), rt);
    check("forward rstd", download_f(d_rstd, N), r_rstd, 0.0, 2e-5);
    upload_f_to(d_rstd, r_rstd);
    if (version == 5) {  // bitwise version 3's backward
        backward(3, d_dinp + off, d_dw + off, d_dout + off, d_x + off, d_w + off, d_rstd, N, C);
        std::vector<float> i3 = unpad(download_x(d_dinp, n + off)), w3 = unpad(download_x(d_dw, C + off));
        upload_x_to(d_dinp, padded(dinp0));
        upload_x_to(d_dw, padded(dw0));
        backward(5, d_dinp + off, d_dw + off, d_dout + off, d_x + off, d_w + off, d_rstd, N, C);
        printf("    (versus version 3)\n");
        check_same("backward dinp", unpad(download_x(d_dinp, n + off)), i3);
        check_same("backward dw", unpad(download_x(d_dw, C + off)), w3);
        upload_x_to(d_dinp, padded(dinp0));
        upload_x_to(d_dw, padded(dw0));
    }
    backward(version, d_dinp + off, d_dw + off, d_dout + off, d_x + off, d_w + off, d_rstd, N, C);
    std::vector<float> g_dinp = unpad(download_x(d_dinp, n + off)), g_dw = unpad(download_x(d_dw, C + off));
    check("backward dinp", g_dinp, r_dinp, rt * rms_of(r_dinp), rt);
    // dw sums N terms in an order other than the CPU's: fp32 error ~ N * 2^-24 * sum|terms|
    check("backward dw", g_dw, r_dw, rt * rms_of(r_dw) + N * ldexp(1.0, -22), rt);
    if (version >= 2) {
        upload_x_to(d_dinp, padded(dinp0));
        upload_x_to(d_dw, padded(dw0));
        backward(version, d_dinp + off, d_dw + off, d_dout + off, d_x + off, d_w + off, d_rstd, N, C);
        check_same("backward dinp", unpad(download_x(d_dinp, n + off)), g_dinp);
        check_same("backward dw", unpad(download_x(d_dw, C + off)), g_dw);
    }
    dev_free(d_x); dev_free(d_w); dev_free(d_dout); dev_free(d_dinp); dev_free(d_dw); dev_free(d_out);
    dev_free(d_rstd);
}

static void bench_version(int version, int N, int C) {
    size_t n = (size_t)N * C;
    floatX *d_x = upload_x(rand_floatX(n, -2.0f, 2.0f, 1)), *d_w = upload_x(rand_floatX(C, 0.5f, 1.5f, 2));
    floatX *d_dout = upload_x(rand_floatX(n, -1.0f, 1.0f, 3)), *d_dinp = upload_x(rand_floatX(n, -1.0f, 1.0f, 4));
    floatX* d_dw = upload_x(rand_floatX(C, -1.0f, 1.0f, 5));
    floatX* d_out = (floatX*)dev_malloc(n * sizeof(floatX));
    float* d_rstd = (float*)dev_malloc(N * sizeof(float));
    float tf = bench_ms([&] { forward(version, d_out, d_rstd, d_x, d_w, N, C, 1e-5f); }, 20);
    float tb = bench_ms([&] { backward(version, d_dinp, d_dw, d_dout, d_x, d_w, d_rstd, N, C); }, 20);
    // the bytes each pass must move at least: forward x read, y written; backward dy, x,
    // dinp read, dinp written (version 2 moves ~6 n: its dw kernel reads dy and x again)
    double bf = 2.0 * n * sizeof(floatX), bb = 4.0 * n * sizeof(floatX);
    printf("  v%d bench N=%d C=%d: forward %.3f ms (%.0f GB/s), backward %.3f ms (%.0f GB/s)\n", version, N, C, tf,
           bf / tf * 1e-6, tb, bb / tb * 1e-6);
    dev_free(d_x); dev_free(d_w); dev_free(d_dout); dev_free(d_dinp); dev_free(d_dw); dev_free(d_out);
    dev_free(d_rstd);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "rmsnorm", 5);
    // {N, C, offset}: odd C; C = 2048 (llama3-1B's D); N = 1000 at C = 264: more than 16
    // blocks in version 3's backward tree; C = 24600: version 3's two-kernel backward;
    // offset 1: no 16-byte aligned row (version 3's element path); N = 2200 at C = 256 and
    // 2300 at C = 1032: more rows than version 4's persistent grid holds (2 blocks of 8
    // warps on each of the emulator's 132 SMs: 2112), with 1 and 5 chunks a lane; version 5
    // streams about 4 rows a warp (version 3's grid: a block per 32 rows) at 1 (C = 256), 2
    // (264), 3 of 4 (768), 5 of 8 (1032) and 8 (2048) chunks a lane
    const int shapes[][3] = {{7, 24, 0}, {65, 61, 0}, {300, 48, 0}, {1, 1, 0}, {129, 2048, 0}, {37, 33, 0},
                             {19, 64, 0}, {1000, 264, 0}, {3, 24600, 0}, {129, 2048, 1}, {65, 61, 1}, {19, 64, 1},
                             {2200, 256, 0}, {2300, 1032, 0}, {200, 768, 0}, {300, 2048, 0}};
    static const char* names[5] = {"thread per row / per channel", "warp per row, separate blocked dw kernel",
                                   "16-byte chunks, row in registers, fused backward with a fixed-order dw tree (llmc)",
                                   "forward: persistent warps, next row in flight, weight in shared memory; backward v3",
                                   "backward: row in registers, next row's dy and x in flight, weight in shared memory"};
    for (int version = 1; version <= 5; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, names[version - 1]);
        uint64_t seed = 300;
        for (auto& sh : shapes) run_version(version, sh[0], sh[1], sh[2], seed++);
        if (!ladder_quick()) {
            bench_version(version, 8192, 2048);    // llama3-1B at B=4, T=2048
            bench_version(version, 262144, 64);    // a DiT's q/k norm: 16K tokens x 16 heads, hd = 64
        }
    }
    return ladder_finish("rmsnorm");
}
