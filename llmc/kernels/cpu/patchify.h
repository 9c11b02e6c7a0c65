/*
CPU twin of llmc/kernels/patchify.cuh: x [B, C, Fr, Hi, Wi] <-> tokens [B, N, P] (docs/design.md 9.1).
Token n = (ft*Hn + hy)*Wn + wx, value p = ((c*pt + dt)*ph + dy)*pw + dx, taken from
x[b, c, ft*pt + dt, hy*ph + dy, wx*pw + dx]. Written from the token side, as the
definition reads: for each token and each value, one copy of a run of pw elements.
*/
#pragma once
#include "../../core/common.h"

static inline void patch_check_shape(const char* who, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw) {
    if (B < 0 || C <= 0 || Fr <= 0 || Hi <= 0 || Wi <= 0)
        FAIL("%s: bad clip shape B=%d C=%d Fr=%d Hi=%d Wi=%d (all must be positive)", who, B, C, Fr, Hi, Wi);
    if (pt <= 0 || ph <= 0 || pw <= 0 || Fr % pt || Hi % ph || Wi % pw)
        FAIL("%s: patch %d x %d x %d (pt x ph x pw) does not divide the clip %d x %d x %d (Fr x Hi x Wi)", who, pt, ph, pw,
             Fr, Hi, Wi);
}

// to_tokens = 1: dst is tokens, src is x (patchify); 0: dst is x, src is tokens (unpatchify)
static inline void patch_copy(floatX* dst, const floatX* src, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw,
                              int to_tokens) {
    int Tn = Fr / pt, Hn = Hi / ph, Wn = Wi / pw;
    size_t P = (size_t)C * pt * ph * pw, N = (size_t)Tn * Hn * Wn;
    #pragma omp parallel for collapse(2) schedule(static)
    for (int b = 0; b < B; b++)
        for (int ft = 0; ft < Tn; ft++)
            for (int hy = 0; hy < Hn; hy++)
                for (int wx = 0; wx < Wn; wx++) {
                    size_t n = ((size_t)ft * Hn + hy) * Wn + wx;
                    size_t tok = ((size_t)b * N + n) * P;
                    for (int c = 0; c < C; c++)
                        for (int dt = 0; dt < pt; dt++)
                            for (int dy = 0; dy < ph; dy++) {
                                size_t p = tok + (((size_t)c * pt + dt) * ph + dy) * pw;
                                size_t xi = ((((size_t)b * C + c) * Fr + ft * pt + dt) * Hi + hy * ph + dy) * Wi + (size_t)wx * pw;
                                for (int dx = 0; dx < pw; dx++) {
                                    if (to_tokens) dst[p + dx] = src[xi + dx];
                                    else dst[xi + dx] = src[p + dx];
                                }
                            }
                }
}

// out [B, N, P] from x [B, C, Fr, Hi, Wi]
static inline void patchify(floatX* out, const floatX* x, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw,
                            stream_t s) {
    (void)s;
    patch_check_shape("patchify", B, C, Fr, Hi, Wi, pt, ph, pw);
    patch_copy(out, x, B, C, Fr, Hi, Wi, pt, ph, pw, 1);
}

// x [B, C, Fr, Hi, Wi] (written whole) from inp [B, N, P]
static inline void unpatchify(floatX* x, const floatX* inp, int B, int C, int Fr, int Hi, int Wi, int pt, int ph, int pw,
                              stream_t s) {
    (void)s;
    patch_check_shape("unpatchify", B, C, Fr, Hi, Wi, pt, ph, pw);
    patch_copy(x, inp, B, C, Fr, Hi, Wi, pt, ph, pw, 0);
}
