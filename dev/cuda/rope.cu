/*
Ladder for llmc/kernels/rope.cuh.
  version 1: llmc's kernel until 2026-11-29, kept here: one thread per rotated pair, 2-byte
             accesses, a 64-bit division and modulo per pair, q and k in two launches.
  version 2: llmc's launchers since: 16-byte chunks where hd and the pointers allow
             (else one pair a thread, the same formula), 32-bit indices (a row's position
             follows by addition), q and k in one launch (rope_qk_*).
Validated against the CPU twin (llmc/kernels/cpu/rope.h) on random data and the real
table (theta = 10000), out of place and in place, forward and backward, one tensor and
q with k; the benchmark runs llama3-1B's q and k (B=4, T=2048, H=32, KV=8, hd=64).

Prediction for version 2 at that shape, written before it ran on a GPU (H200, copy
4.27 TB/s; version 1 measured 1.13-1.21 TB/s in the trainer's profile): ~80-90% of copy,
3.4-3.8 TB/s, 22-25 us a call of 83.9 MB (version 1: ~70 us).
*/
#include "ladder.h"
#include "../../llmc/kernels/rope.cuh"

__global__ void rope_v1_kernel(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int T, int nh,
                               int half, size_t n_pairs, float sign) {
    for (size_t p = (size_t)blockIdx.x * blockDim.x + threadIdx.x; p < n_pairs; p += (size_t)gridDim.x * blockDim.x) {
        int i = (int)(p % half);
        int t = (int)((p / ((size_t)half * nh)) % T);
        size_t e = 2 * p;
        float c = cos_t[(size_t)t * half + i], sn = sign * sin_t[(size_t)t * half + i];
        float x0 = (float)inp[e], x1 = (float)inp[e + 1];
        out[e] = (floatX)(x0 * c - x1 * sn);
        out[e + 1] = (floatX)(x0 * sn + x1 * c);
    }
}
static void rope_v1(floatX* out, const floatX* inp, const float* cos_t, const float* sin_t, int B, int T, int nh, int hd,
                    float sign) {
    int half = hd / 2;
    size_t n_pairs = (size_t)B * T * nh * half;
    if (n_pairs == 0) return;
    size_t blocks = ceil_div(n_pairs, 256);
    if (blocks > 65536) blocks = 65536;
    rope_v1_kernel<<<(unsigned)blocks, 256>>>(out, inp, cos_t, sin_t, T, nh, half, n_pairs, sign);
    cudaCheck(cudaGetLastError());
}
// one tensor, out of place or in place
static void rope_one(int version, floatX* out, const floatX* inp, const float* cs, const float* sn, int B, int T, int nh,
                     int hd, int backward) {
    if (version == 1) rope_v1(out, inp, cs, sn, B, T, nh, hd, backward ? -1.0f : 1.0f);
    else if (backward) rope_backward(out, inp, cs, sn, B, T, nh, hd, 0);
    else rope_forward(out, inp, cs, sn, B, T, nh, hd, 0);
}
// q and k in place
static void rope_pair(int version, floatX* q, floatX* k, const float* cs, const float* sn, int B, int T, int H, int KV,
                      int hd, int backward) {
    if (version == 1) {
        rope_v1(q, q, cs, sn, B, T, H, hd, backward ? -1.0f : 1.0f);
        rope_v1(k, k, cs, sn, B, T, KV, hd, backward ? -1.0f : 1.0f);
    } else if (backward) rope_qk_backward(q, k, cs, sn, B, T, H, KV, hd, 0);
    else rope_qk_forward(q, k, cs, sn, B, T, H, KV, hd, 0);
}

static void make_table(std::vector<float>& cs, std::vector<float>& sn, int T, int hd, double theta) {
    int half = hd / 2;
    cs.resize((size_t)T * half);
    sn.resize((size_t)T * half);
    for (int t = 0; t < T; t++)
        for (int i = 0; i < half; i++) {  // as train_llama.cu builds it
            double ang = (double)t * pow(theta, -2.0 * (double)i / (double)hd);
            cs[(size_t)t * half + i] = (float)cos(ang);
            sn[(size_t)t * half + i] = (float)sin(ang);
        }
}

static void run_version(int version, int B, int T, int nh, int KV, int hd, uint64_t seed) {
    size_t n = (size_t)B * T * nh * hd, nk = (size_t)B * T * KV * hd;
    std::vector<float> cs, sn;
    make_table(cs, sn, T + 5, hd, 10000.0);  // table longer than T, as max_seq_len > T
    std::vector<float> x = rand_floatX(n, -2.0f, 2.0f, seed + 1), g = rand_floatX(n, -1.0f, 1.0f, seed + 2);
    std::vector<float> xk = rand_floatX(nk, -2.0f, 2.0f, seed + 3), gk = rand_floatX(nk, -1.0f, 1.0f, seed + 4);
    float *d_cs = upload_f(cs), *d_sn = upload_f(sn);
    floatX *d_x = upload_x(x), *d_g = upload_x(g), *d_xk = upload_x(xk), *d_gk = upload_x(gk);
    floatX* d_y = (floatX*)dev_malloc(n * sizeof(floatX));
    std::vector<float> r_y(n), r_dx(n), r_yk(nk), r_dxk(nk);
    ref_rope_forward(r_y.data(), x.data(), cs.data(), sn.data(), B, T, nh, hd);
    ref_rope_backward(r_dx.data(), g.data(), cs.data(), sn.data(), B, T, nh, hd);
    ref_rope_forward(r_yk.data(), xk.data(), cs.data(), sn.data(), B, T, KV, hd);
    ref_rope_backward(r_dxk.data(), gk.data(), cs.data(), sn.data(), B, T, KV, hd);
    printf("  v%d B=%d T=%d nh=%d KV=%d hd=%d\n", version, B, T, nh, KV, hd);
    // Tolerance: two products and a sum in fp32 from identical inputs (FMA contraction
    // may differ: ~2^-23 of the terms); bf16 builds then round once (<= 2^-8 relative; rtol 2^-7);
    // cancellation in x0*c - x1*s is covered by atol = rtol * rms.
    double rt = LADDER_FP32 ? 1e-6 : ldexp(1.0, -7);
    rope_one(version, d_y, d_x, d_cs, d_sn, B, T, nh, hd, 0);
    check("forward", download_x(d_y, n), r_y, rt * rms_of(r_y), rt);
    rope_one(version, d_y, d_g, d_cs, d_sn, B, T, nh, hd, 1);
    check("backward", download_x(d_y, n), r_dx, rt * rms_of(r_dx), rt);
    floatX *d_x2 = upload_x(x), *d_g2 = upload_x(g);
    rope_one(version, d_x2, d_x2, d_cs, d_sn, B, T, nh, hd, 0);  // in place
    check("forward in place", download_x(d_x2, n), r_y, rt * rms_of(r_y), rt);
    rope_one(version, d_g2, d_g2, d_cs, d_sn, B, T, nh, hd, 1);
    check("backward in place", download_x(d_g2, n), r_dx, rt * rms_of(r_dx), rt);
    rope_pair(version, d_x, d_xk, d_cs, d_sn, B, T, nh, KV, hd, 0);  // q and k
    check("forward q", download_x(d_x, n), r_y, rt * rms_of(r_y), rt);
    check("forward k", download_x(d_xk, nk), r_yk, rt * rms_of(r_yk), rt);
    rope_pair(version, d_g, d_gk, d_cs, d_sn, B, T, nh, KV, hd, 1);
    check("backward q", download_x(d_g, n), r_dx, rt * rms_of(r_dx), rt);
    check("backward k", download_x(d_gk, nk), r_dxk, rt * rms_of(r_dxk), rt);
    dev_free(d_cs); dev_free(d_sn); dev_free(d_x); dev_free(d_g); dev_free(d_xk); dev_free(d_gk); dev_free(d_y);
    dev_free(d_x2); dev_free(d_g2);
}

// llama3-1B's q and k in place, forward and backward
static void bench_version(int version) {
    const int B = 4, T = 2048, H = 32, KV = 8, hd = 64;
    size_t n = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd;
    std::vector<float> cs, sn;
    make_table(cs, sn, T, hd, 500000.0);
    float *d_cs = upload_f(cs), *d_sn = upload_f(sn);
    floatX *d_q = upload_x(rand_floatX(n, -1.0f, 1.0f, 1)), *d_k = upload_x(rand_floatX(nk, -1.0f, 1.0f, 2));
    float tf = bench_ms([&] { rope_pair(version, d_q, d_k, d_cs, d_sn, B, T, H, KV, hd, 0); }, 20);
    float tb = bench_ms([&] { rope_pair(version, d_q, d_k, d_cs, d_sn, B, T, H, KV, hd, 1); }, 20);
    double bytes = 2.0 * (n + nk) * sizeof(floatX);
    printf("  v%d bench B=%d T=%d H=%d KV=%d hd=%d q and k in place: fwd %.3f ms (%.0f GB/s), bwd %.3f ms (%.0f GB/s)\n",
           version, B, T, H, KV, hd, tf, bytes / tf * 1e-6, tb, bytes / tb * 1e-6);
    dev_free(d_cs); dev_free(d_sn); dev_free(d_q); dev_free(d_k);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "rope", 2);
    // hd 6: pairs; 8, 16, 48, 64, 256: 16-byte chunks; 12: chunks in fp32, pairs in bf16;
    // {1, 3, 40, 8, 64}: more units a row than a block
    const int shapes[][5] = {{2, 7, 3, 1, 6}, {1, 33, 5, 1, 48}, {3, 17, 2, 2, 64}, {1, 5, 4, 2, 8},
                             {2, 9, 3, 3, 12}, {1, 3, 1, 1, 256}, {1, 3, 40, 8, 64}, {2, 4, 4, 2, 16}};
    const char* names[] = {"", "thread per pair, two launches (llmc before)", "16-byte chunks, q and k in one launch (llmc)"};
    for (int v = 1; v <= 2; v++) {
        if (!want(v)) continue;
        printf("version %d: %s\n", v, names[v]);
        uint64_t seed = 400;
        for (auto& s : shapes) run_version(v, s[0], s[1], s[2], s[3], s[4], seed++);
        if (!ladder_quick()) bench_version(v);
    }
    return ladder_finish("rope");
}
