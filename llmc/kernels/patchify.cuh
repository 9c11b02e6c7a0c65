/*
Video patches (docs/design.md 9.1): patchify cuts a clip batch x [B, C, Fr, Hi, Wi] into
N = (Fr/pt)(Hi/ph)(Wi/pw) tokens per sample, out [B, N, P], P = C*pt*ph*pw;
unpatchify is the exact inverse. CPU twin: llmc/kernels/cpu/patchify.h.
Token n = (ft*Hn + hy)*Wn + wx (frame-major, then row, then column); inside a token
the values are ordered ((c*pt + dt)*ph + dy)*pw + dx and come from
x[b, c, ft*pt + dt, hy*ph + dy, wx*pw + dx].

Pure copies (no arithmetic), so both directions are exact and deterministic. One
thread per element of x (grid-stride, size_t indices): patchify reads x in order
and scatters into tokens, unpatchify gathers from tokens and writes x in order,
through the same index map. dev/cuda/patchify.cu has the versions that iterate on
the token side and a shared-memory strip transpose.
*/
#pragma once
#include "../core/common.h"

struct PatchShape { int C, Fr, Hi, Wi, pt, ph, pw; };

// where element i of x (flat index of [B, C, Fr, Hi, Wi]) goes in [B, N, P]
__device__ __forceinline__ size_t patch_token_index(size_t i, PatchShape s) {
    int w = (int)(i % s.Wi); size_t r = i / s.Wi;
    int h = (int)(r % s.Hi); r /= s.Hi;
    int f = (int)(r % s.Fr); r /= s.Fr;
    int c = (int)(r % s.C);
    size_t b = r / s.C;
    int Hn = s.Hi / s.ph, Wn = s.Wi / s.pw;
    size_t N = (size_t)(s.Fr / s.pt) * Hn * Wn, P = (size_t)s.C * s.pt * s.ph * s.pw;
    size_t n = ((size_t)(f / s.pt) * Hn + h / s.ph) * Wn + w / s.pw;
    size_t p = (((size_t)c * s.pt + f % s.pt) * s.ph + h % s.ph) * s.pw + w % s.pw;
    return (b * N + n) * P + p;
}

// (256, 8): eight blocks of 256 per SM, every thread slot, as a streaming copy needs for its
// bytes in flight; without the bound ptxas gives patchify 34 registers (six blocks), with
// it 32 and no spill (dev/test/ptxas_gate.py checks both)
__global__ void __launch_bounds__(256, 8) patchify_kernel(floatX* out, const floatX* x, size_t n, PatchShape s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        out[patch_token_index(i, s)] = x[i];
}

__global__ void __launch_bounds__(256, 8) unpatchify_kernel(floatX* x, const floatX* inp, size_t n, PatchShape s) {
    for (size_t i = (size_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
        x[i] = inp[patch_token_index(i, s)];
}

// the shape, checked: every size positive (B may be 0) and each patch side dividing its axis
static inline PatchShape patch_shape(const char* who, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw) {
    if (B < 0 || C <= 0 || Fr <= 0 || Hi <= 0 || Wi <= 0)
        FAIL("%s: bad clip shape B=%d C=%d Fr=%d Hi=%d Wi=%d (all must be positive)", who, B, C, Fr, Hi, Wi);
    if (pt <= 0 || ph <= 0 || pw <= 0 || Fr % pt || Hi % ph || Wi % pw)
        FAIL("%s: patch %d x %d x %d (pt x ph x pw) does not divide the clip %d x %d x %d (Fr x Hi x Wi)", who, pt, ph, pw,
             Fr, Hi, Wi);
    PatchShape s = {C, Fr, Hi, Wi, pt, ph, pw};
    return s;
}

static inline unsigned patch_blocks(size_t n, int block) {
    size_t blocks = ceil_div(n, block);
    return (unsigned)(blocks > 65536 ? 65536 : blocks);
}

// out [B, N, P] from x [B, C, Fr, Hi, Wi]
static inline void patchify(floatX* out, const floatX* x, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw,
                            stream_t s) {
    PatchShape sh = patch_shape("patchify", B, C, Fr, Hi, Wi, pt, ph, pw);
    size_t n = (size_t)B * C * Fr * Hi * Wi;
    if (n == 0) return;
    patchify_kernel<<<patch_blocks(n, 256), 256, 0, s>>>(out, x, n, sh);
    cudaCheck(cudaGetLastError());
}

// x [B, C, Fr, Hi, Wi] (written whole) from inp [B, N, P]
static inline void unpatchify(floatX* x, const floatX* inp, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw,
                              stream_t s) {
    PatchShape sh = patch_shape("unpatchify", B, C, Fr, Hi, Wi, pt, ph, pw);
    size_t n = (size_t)B * C * Fr * Hi * Wi;
    if (n == 0) return;
    unpatchify_kernel<<<patch_blocks(n, 256), 256, 0, s>>>(x, inp, n, sh);
    cudaCheck(cudaGetLastError());
}
