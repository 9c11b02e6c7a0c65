/*
Ladder for llmc/kernels/patchify.cuh: x [B, C, Fr, Hi, Wi] <-> tokens [B, N, P] (docs/design.md 9.1).
  version 1: the llmc kernels: one thread per element of x. patchify reads x in order
             (coalesced) and writes runs of pw values P apart; unpatchify the reverse
  version 2: one thread per element of the tokens: patchify writes in order
             (coalesced writes), reads runs of pw values of x; unpatchify the reverse
  version 3: one block per strip (b, ft, hy): the strip's C*pt*ph rows of x (Wi values
             each, contiguous) and its Wn tokens (Wn*P values, contiguous) are the same
             values, so the block loads one side with coalesced accesses into shared
             memory and stores the other side with coalesced accesses. Strips above
             48 KiB (C*pt*ph*Wi values) take version 2.
Pure copies: every version must equal the CPU twin (llmc/kernels/cpu/patchify.h) exactly, and
unpatchify(patchify(x)) must be x, at odd shapes (C=3, Fr=4, Hi=6, Wi=10 with 2x3x5
patches, 1x1x1 patches, one token per strip) and at a DiT-like 1x2x2.
*/
#include "ladder.h"
#include "../../llmc/kernels/patchify.cuh"

// where element j of the tokens [B, N, P] comes from in x (the inverse of patch_token_index)
__device__ __forceinline__ size_t patch_pixel_index(size_t j, PatchShape s) {
    int Tn = s.Fr / s.pt, Hn = s.Hi / s.ph, Wn = s.Wi / s.pw;
    size_t P = (size_t)s.C * s.pt * s.ph * s.pw, N = (size_t)Tn * Hn * Wn;
    size_t p = j % P, r = j / P;
    size_t n = r % N, b = r / N;
    int dx = (int)(p % s.pw); p /= s.pw;
    int dy = (int)(p % s.ph); p /= s.ph;
    int dt = (int)(p % s.pt);
    int c = (int)(p / s.pt);
    int wx = (int)(n % Wn), hy = (int)(n / Wn % Hn), ft = (int)(n / ((size_t)Wn * Hn));
    return ((((b * s.C + c) * s.Fr + ft * s.pt + dt) * s.Hi + hy * s.ph + dy) * s.Wi) + (size_t)wx * s.pw + dx;
}

__global__ void patchify_v2_kernel(floatX* out, const floatX* x, size_t n, PatchShape s) {
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x)
        out[j] = x[patch_pixel_index(j, s)];
}
__global__ void unpatchify_v2_kernel(floatX* x, const floatX* inp, size_t n, PatchShape s) {
    for (size_t j = (size_t)blockIdx.x * blockDim.x + threadIdx.x; j < n; j += (size_t)gridDim.x * blockDim.x)
        x[patch_pixel_index(j, s)] = inp[j];
}

// strip (b, ft, hy) = blockIdx.x: its first token, and the first element of its row r =
// (c*pt + dt)*ph + dy in x; shared memory holds the strip as rows: strip[r*Wi + w]
struct Strip { size_t tok0, b; int ft, hy; };
__device__ __forceinline__ Strip strip_of_block(PatchShape s) {
    int Tn = s.Fr / s.pt, Hn = s.Hi / s.ph, Wn = s.Wi / s.pw;
    size_t P = (size_t)s.C * s.pt * s.ph * s.pw, N = (size_t)Tn * Hn * Wn;
    Strip st;
    st.hy = (int)(blockIdx.x % Hn);
    st.ft = (int)(blockIdx.x / Hn % Tn);
    st.b = blockIdx.x / ((size_t)Hn * Tn);
    st.tok0 = (st.b * N + ((size_t)st.ft * Hn + st.hy) * Wn) * P;
    return st;
}
__device__ __forceinline__ size_t strip_row_start(PatchShape s, Strip st, int r) {
    int dy = r % s.ph, dt = r / s.ph % s.pt, c = r / (s.ph * s.pt);
    return (((st.b * s.C + c) * s.Fr + st.ft * s.pt + dt) * s.Hi + st.hy * s.ph + dy) * s.Wi;
}
// token value o of the strip (o < Wn*P) lives at strip[strip_slot(o)]
__device__ __forceinline__ int strip_slot(PatchShape s, int o) {
    int P = s.C * s.pt * s.ph * s.pw;
    int wx = o / P, p = o % P;
    return (p / s.pw) * s.Wi + wx * s.pw + p % s.pw;
}

__global__ void patchify_strip_kernel(floatX* out, const floatX* x, PatchShape s) {
    extern __shared__ __align__(16) unsigned char patch_strip_smem[];
    floatX* strip = (floatX*)patch_strip_smem;
    Strip st = strip_of_block(s);
    int S = s.C * s.pt * s.ph * s.Wi;
    for (int k = threadIdx.x; k < S; k += blockDim.x) strip[k] = x[strip_row_start(s, st, k / s.Wi) + k % s.Wi];
    __syncthreads();
    for (int o = threadIdx.x; o < S; o += blockDim.x) out[st.tok0 + o] = strip[strip_slot(s, o)];
}
__global__ void unpatchify_strip_kernel(floatX* x, const floatX* inp, PatchShape s) {
    extern __shared__ __align__(16) unsigned char patch_strip_smem[];
    floatX* strip = (floatX*)patch_strip_smem;
    Strip st = strip_of_block(s);
    int S = s.C * s.pt * s.ph * s.Wi;
    for (int o = threadIdx.x; o < S; o += blockDim.x) strip[strip_slot(s, o)] = inp[st.tok0 + o];
    __syncthreads();
    for (int k = threadIdx.x; k < S; k += blockDim.x) x[strip_row_start(s, st, k / s.Wi) + k % s.Wi] = strip[k];
}

#define STRIP_MAX_BYTES (48 * 1024)  // without cudaFuncSetAttribute

static size_t strip_bytes(const PatchShape& s) { return (size_t)s.C * s.pt * s.ph * s.Wi * sizeof(floatX); }

// inverse = 0: patchify (dst = tokens, src = x); 1: unpatchify (dst = x, src = tokens)
static void run(int version, int inverse, floatX* dst, const floatX* src, int B, const PatchShape& s) {
    size_t n = (size_t)B * s.C * s.Fr * s.Hi * s.Wi;
    if (version == 3 && strip_bytes(s) > STRIP_MAX_BYTES) version = 2;
    if (version == 1) {
        if (!inverse) patchify(dst, src, B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
        else unpatchify(dst, src, B, s.C, s.Fr, s.Hi, s.Wi, s.pt, s.ph, s.pw, 0);
        return;
    }
    if (n == 0) return;
    if (version == 2) {
        if (!inverse) patchify_v2_kernel<<<patch_blocks(n, 256), 256>>>(dst, src, n, s);
        else unpatchify_v2_kernel<<<patch_blocks(n, 256), 256>>>(dst, src, n, s);
    } else {
        unsigned strips = (unsigned)((size_t)B * (s.Fr / s.pt) * (s.Hi / s.ph));
        if (!inverse) patchify_strip_kernel<<<strips, 256, strip_bytes(s)>>>(dst, src, s);
        else unpatchify_strip_kernel<<<strips, 256, strip_bytes(s)>>>(dst, src, s);
    }
    cudaCheck(cudaGetLastError());
}

struct Shape { int B, C, Fr, Hi, Wi, pt, ph, pw; };

static void run_version(int version, const Shape& sh, uint64_t seed) {
    PatchShape s = patch_shape("ladder", sh.B, sh.C, sh.Fr, sh.Hi, sh.Wi, sh.pt, sh.ph, sh.pw);
    size_t n = (size_t)sh.B * sh.C * sh.Fr * sh.Hi * sh.Wi;
    std::vector<float> x = rand_floatX(n, -1.0f, 1.0f, seed);
    std::vector<float> r_tok(n), r_x(n);
    ref_patchify(r_tok.data(), x.data(), sh.B, sh.C, sh.Fr, sh.Hi, sh.Wi, sh.pt, sh.ph, sh.pw);
    ref_unpatchify(r_x.data(), r_tok.data(), sh.B, sh.C, sh.Fr, sh.Hi, sh.Wi, sh.pt, sh.ph, sh.pw);
    printf("  v%d B=%d C=%d Fr=%d Hi=%d Wi=%d pt=%d ph=%d pw=%d%s\n", version, sh.B, sh.C, sh.Fr, sh.Hi, sh.Wi, sh.pt,
           sh.ph, sh.pw, version == 3 && strip_bytes(s) > STRIP_MAX_BYTES ? " (strip too large: v2)" : "");
    floatX *d_x = upload_x(x), *d_tok = (floatX*)dev_malloc(n * sizeof(floatX)), *d_y = (floatX*)dev_malloc(n * sizeof(floatX));
    cudaCheck(cudaMemset(d_tok, 0xFF, n * sizeof(floatX)));  // NaN: an element never written shows
    cudaCheck(cudaMemset(d_y, 0xFF, n * sizeof(floatX)));
    // copies: exact (atol = rtol = 0)
    run(version, 0, d_tok, d_x, sh.B, s);
    check("patchify", download_x(d_tok, n), r_tok, 0.0, 0.0);
    run(version, 1, d_y, d_tok, sh.B, s);
    check("unpatchify(patchify)", download_x(d_y, n), x, 0.0, 0.0);
    check("unpatchify vs twin", download_x(d_y, n), r_x, 0.0, 0.0);
    dev_free(d_x); dev_free(d_tok); dev_free(d_y);
}

static void bench(int version, const Shape& sh) {
    PatchShape s = patch_shape("ladder", sh.B, sh.C, sh.Fr, sh.Hi, sh.Wi, sh.pt, sh.ph, sh.pw);
    size_t n = (size_t)sh.B * sh.C * sh.Fr * sh.Hi * sh.Wi;
    floatX *x = upload_x(rand_floatX(n, -1.0f, 1.0f, 3)), *tok = (floatX*)dev_malloc(n * sizeof(floatX));
    float tf = bench_ms([&] { run(version, 0, tok, x, sh.B, s); }, 50);
    float tb = bench_ms([&] { run(version, 1, x, tok, sh.B, s); }, 50);
    printf("  v%d bench B=%d C=%d Fr=%d Hi=%d Wi=%d patch %dx%dx%d%s: patchify %.3f ms (%.0f GB/s), unpatchify %.3f ms "
           "(%.0f GB/s)\n", version, sh.B, sh.C, sh.Fr, sh.Hi, sh.Wi, sh.pt, sh.ph, sh.pw,
           version == 3 && strip_bytes(s) > STRIP_MAX_BYTES ? " (v2: strip too large)" : "", tf,
           2.0 * n * sizeof(floatX) / tf * 1e-6, tb, 2.0 * n * sizeof(floatX) / tb * 1e-6);
    dev_free(x); dev_free(tok);
}

int main(int argc, char** argv) {
    ladder_init(argc, argv, "patchify", 3);
    const Shape shapes[] = {
        {2, 3, 4, 6, 10, 2, 3, 5},   // odd sizes, every patch side > 1
        {2, 3, 4, 6, 10, 1, 1, 1},   // one pixel per token
        {1, 4, 5, 7, 9, 5, 7, 3},    // one strip per sample
        {3, 16, 3, 16, 24, 1, 2, 2}, // the DiT's 1x2x2 patches on a 16-channel latent
        {1, 5, 2, 4, 400, 2, 4, 1},  // a strip of 5*2*4*400 values: above 48 KiB in fp32 (v3 takes v2), below in bf16
    };
    const Shape bench_shapes[] = {
        {2, 16, 21, 60, 104, 1, 2, 2},  // a Wan-like 480p latent (81 frames, 8x VAE): 32760 tokens per sample
        {1, 3, 16, 256, 256, 2, 8, 8},  // pixel space, 2x8x8 patches (P = 384)
    };
    const char* what[4] = {"", "thread per element of x (llmc)", "thread per token element",
                           "shared-memory strip transpose"};
    for (int version = 1; version <= 3; version++) {
        if (!want(version)) continue;
        printf("version %d: %s\n", version, what[version]);
        uint64_t seed = 900;
        for (const Shape& sh : shapes) run_version(version, sh, seed++);
        if (ladder_quick()) continue;
        for (const Shape& sh : bench_shapes) bench(version, sh);
    }
    return ladder_finish("patchify");
}
