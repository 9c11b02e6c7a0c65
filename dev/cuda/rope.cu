/*
Ladder for llmc/kernels/rope.cuh.
  version 1: one thread per rotated pair (llmc); in place is allowed
Elementwise and memory-bound: a faster version would only vectorise the loads,
which the hidden odd head dims (hd = 6) make fiddly for little gain, so the ladder
has one rung. Validated against the CPU twin (llmc/kernels/cpu/rope.h) on random data and
the real table (theta = 10000), out of place and in place, forward and backward.
*/
#include "ladder.h"
#include "../../llmc/kernels/rope.cuh"

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

static void run_version(int version, int B, int T, int nh, int hd, uint64_t seed) {
    size_t n = (size_t)B * T * nh * hd;
    std::vector<float> cs, sn;
    make_table(cs, sn, T + 5, hd, 10000.0);  // table longer than T, as max_seq_len > T
    std::vector<float> x = rand_floatX(n, -2.0f, 2.0f, seed + 1), g = rand_floatX(n, -1.0f, 1.0f, seed + 2);
    float *d_cs = upload_f(cs), *d_sn = upload_f(sn);
    floatX *d_x = upload_x(x), *d_g = upload_x(g);
    floatX* d_y = (floatX*)dev_malloc(n * sizeof(floatX));
    std::vector<float> r_y(n), r_dx(n);
    ref_rope_forward(r_y.data(), x.data(), cs.data(), sn.data(), B, T, nh, hd);
    ref_rope_backward(r_dx.data(), g.data(), cs.data(), sn.data(), B, T, nh, hd);
    printf("  v%d B=%d T=%d nh=%d hd=%d\n", version, B, T, nh, hd);
    // Tolerance: two products and a sum in fp32 from identical inputs (FMA contraction
    // may differ: ~2^-23 of the terms); bf16 builds then round once (<= 2^-8 relative; rtol 2^-7);
    // cancellation in x0*c - x1*s is covered by atol = rtol * rms.
    double rt = LADDER_FP32 ? 1e-6 : ldexp(1.0, -7);
    rope_forward(d_y, d_x, d_cs, d_sn, B, T, nh, hd, 0);
    check("forward", download_x(d_y, n), r_y, rt * rms_of(r_y), rt);
    rope_backward(d_y, d_g, d_cs, d_sn, B, T, nh, hd, 0);
    check("backward", download_x(d_y, n), r_dx, rt * rms_of(r_dx), rt);
    rope_forward(d_x, d_x, d_cs, d_sn, B, T, nh, hd, 0);  // in place
    check("forward in place", download_x(d_x, n), r_y, rt * rms_of(r_y), rt);
    rope_backward(d_g, d_g, d_cs, d_sn, B, T, nh, hd, 0);
    check("backward in place", download_x(d_g, n), r_dx, rt * rms_of(r_dx), rt);
    dev_free(d_cs); dev_free(d_sn); dev_free(d_x); dev_free(d_g); dev_free(d_y);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "rope", 1);
    const int shapes[][4] = {{2, 7, 3, 6}, {1, 33, 5, 48}, {3, 17, 2, 64}, {1, 5, 4, 8}, {2, 9, 3, 12}, {1, 3, 1, 256}};
    if (want(1)) {
        printf("version 1: thread per pair (llmc)\n");
        uint64_t seed = 400;
        for (auto& s : shapes) run_version(1, s[0], s[1], s[2], s[3], seed++);
        if (!ladder_quick()) {
            int B = 4, T = 1024, nh = 32, hd = 64;
            size_t n = (size_t)B * T * nh * hd;
            std::vector<float> cs, sn;
            make_table(cs, sn, T, hd, 500000.0);
            float *d_cs = upload_f(cs), *d_sn = upload_f(sn);
            floatX* d_x = upload_x(rand_floatX(n, -1.0f, 1.0f, 1));
            float t = bench_ms([&] { rope_forward(d_x, d_x, d_cs, d_sn, B, T, nh, hd, 0); }, 20);
            printf("  v1 bench B=%d T=%d nh=%d hd=%d in place: %.3f ms (%.0f GB/s)\n", B, T, nh, hd, t,
                   2.0 * n * sizeof(floatX) / t * 1e-6);
            dev_free(d_cs); dev_free(d_sn); dev_free(d_x);
        }
    }
    return ladder_finish("rope");
}
