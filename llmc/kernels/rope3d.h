/*
The angle table of 3-D rotary embedding (docs/design.md 9.3), for video tokens.

The head dimension splits into three even parts, in the order (time, height, width):
dh = dw = 2*floor(hd/6) and dt = hd - dh - dw. Each part rotates the adjacent pairs
(x[2i], x[2i+1]) of its slice by pos * theta^(-2i/d_part), with pos the token's frame,
row or column index in patches. A token's rotation is therefore one angle per pair of
the head, like 1-D RoPE's, only the angle comes from three positions: so this file
builds a [N, hd/2] cos/sin table indexed by token, and the rotation itself is the
rope kernel of llmc/kernels/rope.cuh (and its CPU twin) with T = N. One kernel, checked once,
serves both trainers; only this table differs. rope1d_table is the text models' table
(the position is the token's index in the sequence).
*/
#pragma once
#include "../core/common.h"

// cos_t, sin_t: [Fn*Hn*Wn, hd/2]; token n = (ft*Hn + hy)*Wn + wx
static inline void rope3d_table(float* cos_t, float* sin_t, int Fn, int Hn, int Wn, int hd, float theta) {
    if (hd % 2 != 0) FAIL("rope3d: head dim %d is odd", hd);
    int dh = 2 * (hd / 6), dw = dh, dt = hd - dh - dw;
    int half = hd / 2;
    for (int ft = 0; ft < Fn; ft++)
        for (int hy = 0; hy < Hn; hy++)
            for (int wx = 0; wx < Wn; wx++) {
                size_t n = ((size_t)ft * Hn + hy) * Wn + wx;
                for (int j = 0; j < half; j++) {
                    int pos, i, d;  // which part pair j is in, its index there, the part's size
                    if (2 * j < dt) { pos = ft; i = j; d = dt; }
                    else if (2 * j < dt + dh) { pos = hy; i = j - dt / 2; d = dh; }
                    else { pos = wx; i = j - (dt + dh) / 2; d = dw; }
                    double ang = (double)pos * pow((double)theta, -2.0 * i / (double)d);
                    cos_t[n * half + j] = (float)cos(ang);
                    sin_t[n * half + j] = (float)sin(ang);
                }
            }
}

// cos_t, sin_t: [T, hd/2]; angle t * theta^(-2i/hd) for the adjacent pair (2i, 2i+1)
static inline void rope1d_table(float* cos_t, float* sin_t, int T, int hd, float theta) {
    size_t half = hd / 2;
    for (int t = 0; t < T; t++)
        for (size_t i = 0; i < half; i++) {
            double freq = pow((double)theta, -2.0 * (double)i / (double)hd);
            double ang = (double)t * freq;
            cos_t[t * half + i] = (float)cos(ang);
            sin_t[t * half + i] = (float)sin(ang);
        }
}
