/*
Ladder for llmc/kernels/encoder.cuh.
  forward  version 1: one thread per element (llmc)
  backward version 1: one thread per channel walking the tokens in order and
                      adding into dwte directly (deterministic, but in bf16 builds
                      every addition is rounded to bf16)
  backward version 2: llmc's kernel for more than ENC_SORT_MAX tokens (all of them
                      until 2026-11-29; measured 0.88 ms with the forward at llama3-1B on
                      the H200): vocabulary tiles x channel blocks, tokens compacted in
                      order, fp32 sums in shared memory, one rounding (encoder_backward_tiles)
  backward version 4: llmc's kernel up to ENC_SORT_MAX tokens: the tokens grouped by id
                      on the device (ranks of (id, position), an O(N^2) integer count),
                      then a block per group adds its dout rows in position order in fp32,
                      16-byte chunks of channels where D and the pointers allow.
                      Predicted at llama3-1B (N = 8192, D = 2048, V = 128256) on the H200,
                      before it ran: 0.03-0.04 ms (version 2: ~0.8 ms, scanning all 8,192
                      token ids for each of 4,008 tiles).
  version 3:          the vocabulary-range launchers (llmc encoder_forward_range /
                      encoder_backward_range, the kernels of versions 1-2 of the forward
                      and 2 of the backward): the table split into tp shards of
                      ceil(V / tp) rows as --shard-vocab 1 --tp N splits it
Validated against the CPU twin (llmc/kernels/cpu/encoder.h) on random tokens with many
repeats (small V) and with more vocabulary tiles than blocks (V = 10000 > 256 * 32),
D that is not a multiple of the channel block. Determinism: v2 run twice, bitwise.
Version 3: each shard against the twin's range versions, the shards' forward outputs
summed against the whole-table forward, the shards' gradients side by side against the
whole-table backward.
*/
#include "ladder.h"
#include "../../llmc/kernels/encoder.cuh"

// version 1 of the backward: thread c walks tokens in order, read-modify-write in floatX
__global__ void encoder_backward_v1_kernel(floatX* dwte, const floatX* dout, const int* tokens, int N, int D) {
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    if (c >= D) return;
    for (int i = 0; i < N; i++) {
        floatX* g = dwte + (size_t)tokens[i] * D + c;
        *g = (floatX)((float)*g + (float)dout[(size_t)i * D + c]);
    }
}
static void encoder_backward_v1(floatX* dwte, const floatX* dout, const int* tokens, int N, int D, stream_t s) {
    encoder_backward_v1_kernel<<<(unsigned)ceil_div(D, 128), 128, 0, s>>>(dwte, dout, tokens, N, D);
    cudaCheck(cudaGetLastError());
}

static void backward(int version, floatX* dwte, const floatX* dout, const int* tokens, int N, int D) {
    if (version == 1) encoder_backward_v1(dwte, dout, tokens, N, D, 0);
    else if (version == 2) encoder_backward_tiles(dwte, dout, tokens, N, D, 0, INT_MAX, 0);
    else encoder_backward(dwte, dout, tokens, N, D, 0);
}

struct Shape { int N, D, V; };

static void run_version(int version, const Shape& sh, uint64_t seed) {
    const int N = sh.N, D = sh.D, V = sh.V;
    LadderRng r(seed);
    std::vector<int> tokens(N);
    std::vector<int> count(V, 0);
    for (int i = 0; i < N; i++) { tokens[i] = r.below(V); count[tokens[i]]++; }
    tokens[N - 1] = V - 1;  // the largest id is present: the last vocabulary tile is exercised
    int max_rep = 0;
    for (int c : count) max_rep = c > max_rep ? c : max_rep;
    max_rep += 1;
    std::vector<float> wte = rand_floatX((size_t)V * D, -1.0f, 1.0f, seed + 1);
    std::vector<float> dout = rand_floatX((size_t)N * D, -1.0f, 1.0f, seed + 2);
    std::vector<float> dwte0 = rand_floatX((size_t)V * D, -1.0f, 1.0f, seed + 3);
    int* d_tok = upload_i(tokens);
    floatX* d_wte = upload_x(wte);
    floatX* d_dout = upload_x(dout);
    floatX* d_out = (floatX*)dev_malloc((size_t)N * D * sizeof(floatX));
    floatX* d_dwte = upload_x(dwte0);

    std::vector<float> r_out((size_t)N * D), r_dwte = dwte0;
    ref_encoder_forward(r_out.data(), tokens.data(), wte.data(), N, D);
    ref_encoder_backward(r_dwte.data(), dout.data(), tokens.data(), N, D);

    printf("  v%d N=%d D=%d V=%d (a token repeats up to %d times)\n", version, N, D, V, max_rep);
    encoder_forward(d_out, d_tok, d_wte, N, D, 0);
    check("forward out (exact)", download_x(d_out, (size_t)N * D), r_out, 0.0, 0.0);  // a copy: bit-exact
    backward(version, d_dwte, d_dout, d_tok, N, D);
    std::vector<float> got = download_x(d_dwte, dwte0.size());
    // Tolerance. fp32 build: v2 performs the CPU's additions in the CPU's order, so
    // it is exact; v1 too. bf16 build: v2 sums the same bf16 inputs in fp32 (exact
    // order as CPU) and rounds once: <= 2^-8 relative (bf16 has 8 significant bits; rtol 2^-7), plus cancellation against
    // the rms of the terms. v1 rounds after each of up to max_rep additions:
    // <= max_rep * 2^-8 of the running magnitude.
    double rms = rms_of(r_dwte);
    double rtol = LADDER_FP32 ? 0.0 : (version == 1 ? max_rep * ldexp(1.0, -8) : ldexp(1.0, -7));
    check("backward dwte", got, r_dwte, rtol * rms * (version == 1 ? 2.0 : 1.0), rtol);
    if (version >= 2) {
        upload_x_to(d_dwte, dwte0);
        backward(version, d_dwte, d_dout, d_tok, N, D);
        check_same("backward dwte", download_x(d_dwte, dwte0.size()), got);
    }
    dev_free(d_tok); dev_free(d_wte); dev_free(d_dout); dev_free(d_out); dev_free(d_dwte);
}

static void bench_version(int version, int N, int D, int V) {
    LadderRng r(7);
    std::vector<int> tokens(N);
    for (int i = 0; i < N; i++) tokens[i] = r.below(V);
    int* d_tok = upload_i(tokens);
    floatX* d_wte = upload_x(rand_floatX((size_t)V * D, -1.0f, 1.0f, 8));
    floatX* d_dout = upload_x(rand_floatX((size_t)N * D, -1.0f, 1.0f, 9));
    floatX* d_out = (floatX*)dev_malloc((size_t)N * D * sizeof(floatX));
    float tf = bench_ms([&] { encoder_forward(d_out, d_tok, d_wte, N, D, 0); }, 20);
    float tb = bench_ms([&] { backward(version, d_wte, d_dout, d_tok, N, D); }, version == 1 ? 3 : 10);
    double bytes_f = 2.0 * N * D * sizeof(floatX);
    double bytes_b = 3.0 * N * D * sizeof(floatX);  // dout read + (at most) N rows read and written
    printf("  v%d bench N=%d D=%d V=%d: forward %.3f ms (%.0f GB/s), backward %.3f ms (%.0f GB/s upper bound)\n",
           version, N, D, V, tf, bytes_f / tf * 1e-6, tb, bytes_b / tb * 1e-6);
    dev_free(d_tok); dev_free(d_wte); dev_free(d_dout); dev_free(d_out);
}

// version 3: the table in tp shards; shard k holds rows k*Vs ... (the last one fewer, or none)
static void run_range_version(const Shape& sh, int tp, uint64_t seed) {
    const int N = sh.N, D = sh.D, V = sh.V, Vs = (V + tp - 1) / tp;
    LadderRng r(seed);
    std::vector<int> tokens(N);
    for (int i = 0; i < N; i++) tokens[i] = r.below(V);
    tokens[N - 1] = V - 1;
    std::vector<float> wte = rand_floatX((size_t)V * D, -1.0f, 1.0f, seed + 1);
    std::vector<float> dout = rand_floatX((size_t)N * D, -1.0f, 1.0f, seed + 2);
    std::vector<float> dwte0 = rand_floatX((size_t)V * D, -1.0f, 1.0f, seed + 3);
    printf("  v3 N=%d D=%d V=%d tp=%d Vs=%d\n", N, D, V, tp, Vs);
    int* d_tok = upload_i(tokens);
    floatX* d_dout = upload_x(dout);
    floatX* d_out = (floatX*)dev_malloc((size_t)N * D * sizeof(floatX));
    std::vector<float> sum((size_t)N * D, 0.0f), r_sum((size_t)N * D, 0.0f), gcat, r_gcat;
    for (int k = 0; k < tp; k++) {
        int v0 = k * Vs, nv = V - v0 < 0 ? 0 : (V - v0 < Vs ? V - v0 : Vs);
        size_t rows = nv > 0 ? nv : 1;
        std::vector<float> w(wte.begin() + (size_t)v0 * D, wte.begin() + (size_t)(v0 + nv) * D);
        std::vector<float> g(dwte0.begin() + (size_t)v0 * D, dwte0.begin() + (size_t)(v0 + nv) * D);
        floatX* d_w = (floatX*)dev_malloc(rows * D * sizeof(floatX));
        floatX* d_g = (floatX*)dev_malloc(rows * D * sizeof(floatX));
        if (nv) { upload_x_to(d_w, w); upload_x_to(d_g, g); }
        encoder_forward_range(d_out, d_tok, d_w, N, D, v0, nv, 0);
        encoder_backward_range(d_g, d_dout, d_tok, N, D, v0, nv, 0);
        std::vector<float> o = download_x(d_out, (size_t)N * D), ro((size_t)N * D);
        ref_encoder_forward_range(ro.data(), tokens.data(), w.data(), N, D, v0, nv);
        for (size_t j = 0; j < o.size(); j++) { sum[j] += o[j]; r_sum[j] += ro[j]; }
        std::vector<float> gg = download_x(d_g, (size_t)nv * D);
        ref_encoder_backward_range(g.data(), dout.data(), tokens.data(), N, D, v0, nv);
        gcat.insert(gcat.end(), gg.begin(), gg.end());
        r_gcat.insert(r_gcat.end(), g.begin(), g.end());
        dev_free(d_w); dev_free(d_g);
    }
    std::vector<float> r_out((size_t)N * D), r_dwte = dwte0;
    ref_encoder_forward(r_out.data(), tokens.data(), wte.data(), N, D);
    ref_encoder_backward(r_dwte.data(), dout.data(), tokens.data(), N, D);
    // forward: copies and zeros, exact. backward: as version 2 (exact in fp32; one rounding
    // of the same fp32 sums in bf16)
    double rtol = LADDER_FP32 ? 0.0 : ldexp(1.0, -7);
    check("forward shards (exact)", sum, r_sum, 0.0, 0.0);
    check("forward vs whole (exact)", sum, r_out, 0.0, 0.0);
    check("backward shards", gcat, r_gcat, rtol * rms_of(r_gcat), rtol);
    check("backward vs whole", gcat, r_dwte, rtol * rms_of(r_dwte), rtol);
    dev_free(d_tok); dev_free(d_dout); dev_free(d_out);
}

// version 3: one shard of the table at tp = 8 (the last: the fewest rows); the backward
// still scans all N tokens per tile, so its time is not 1/8 of the whole table's
static void bench_range(int N, int D, int V, int tp) {
    const int Vs = (V + tp - 1) / tp, v0 = (tp - 1) * Vs, nv = V - v0;
    LadderRng r(7);
    std::vector<int> tokens(N);
    for (int i = 0; i < N; i++) tokens[i] = r.below(V);
    int* d_tok = upload_i(tokens);
    floatX* d_wte = upload_x(rand_floatX((size_t)nv * D, -1.0f, 1.0f, 8));
    floatX* d_dout = upload_x(rand_floatX((size_t)N * D, -1.0f, 1.0f, 9));
    floatX* d_out = (floatX*)dev_malloc((size_t)N * D * sizeof(floatX));
    float tf = bench_ms([&] { encoder_forward_range(d_out, d_tok, d_wte, N, D, v0, nv, 0); }, 20);
    float tb = bench_ms([&] { encoder_backward_range(d_wte, d_dout, d_tok, N, D, v0, nv, 0); }, 10);
    printf("  v3 bench N=%d D=%d V=%d tp=%d (shard of %d rows): forward %.3f ms, backward %.3f ms\n", N, D, V, tp, nv, tf, tb);
    dev_free(d_tok); dev_free(d_wte); dev_free(d_dout); dev_free(d_out);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "encoder", 4);
    // {3000, 13, 40}: groups longer than 256 positions, one channel a thread
    const Shape shapes[] = {{300, 24, 67}, {64, 48, 5}, {1000, 300, 1000}, {4096, 64, 10000}, {3, 1, 2}, {3000, 13, 4}};
    const char* names[] = {"", "thread per channel, floatX accumulation",
                           "vocab tiles, ordered compaction, fp32 sums (llmc above ENC_SORT_MAX tokens)", "",
                           "tokens grouped by id on the device, a block per group (llmc)"};
    for (int version = 1; version <= 4; version++) {
        if (version == 3 || !want(version)) continue;
        printf("version %d: %s\n", version, names[version]);
        uint64_t seed = 200;
        for (const Shape& sh : shapes) run_version(version, sh, seed++);
        if (!ladder_quick()) bench_version(version, 8192, 2048, 128256);
    }
    if (want(3)) {
        printf("version 3: vocabulary ranges (llmc encoder_forward_range / encoder_backward_range)\n");
        uint64_t seed = 300;
        const int tps[] = {3, 4, 7, 2, 2};  // {64, 48, 5} at tp = 4: Vs = 2, the last shard empty
        for (int k = 0; k < 5; k++) run_range_version(shapes[k], tps[k], seed++);
        if (!ladder_quick()) bench_range(8192, 2048, 32000, 8);
    }
    return ladder_finish("encoder");
}
