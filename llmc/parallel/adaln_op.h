/*
The adaLN operations of a diffusion transformer on this rank's rows of the residual stream:
the modulated LayerNorm, LN(x)(1 + scale) + shift, and the gated residual, res + gate y, with
their backward. Their kernels read one modulation row per sample (its shift, scale and gate,
from its timestep and class), so one launch covers a run of whole samples. Under sequence
parallelism a rank's own rows may start and end inside a sample: each operation runs its
kernel once per sample-aligned segment of them (tp_own_segments, at most three), and no
kernel knows of TP. Without it every call is one launch over all rows, bit for bit the plain
kernel.

The backward's gradients at the modulation rows (d shift, d scale, d gate) are per-sample
column sums, which under sequence parallelism cover only this rank's rows: adaln_grads_begin
zeroes them before the kernels overwrite the samples this rank touches, adaln_grads_finish
sums them over the TP group, so that every rank holds the whole gradient of the replicated
conditioning they flow into (docs/memory.md 9.8).

The per-sample loss on this rank's rows has the same shape (a sample's sum over the rows
held here) and is here too: own_rows_mse, and own_rows_sum, which sums such per-sample values
over the TP group.
*/
#pragma once
#include "tensor_parallel.h"

typedef struct {
    TpContext* tp;  // the residual stream's split (its stream runs the kernels)
    int n;          // rows of a sample on this rank (under --cp this rank's tokens of it)
    int D;          // elements of a row
    float eps;      // the LayerNorm's
} AdaLN;

static inline AdaLN adaln_setup(TpContext* tp, int n, int D, float eps) {
    AdaLN a = {tp, n, D, eps};
    return a;
}

// The modulation vectors of sample b sit at shift + b ld (likewise scale and gate) in every
// call below; B is the micro-batch's samples.

// out = LN(x)(1 + scale) + shift, keeping the LayerNorm's mean and rstd of each row
static inline void adaln_modulate_forward(const AdaLN* a, floatX* out, float* mean, float* rstd, const floatX* x,
                                          const floatX* shift, const floatX* scale, int ld, int B) {
    TpSegment sg[3];
    int ns = tp_own_segments(a->tp, B, a->n, sg);
    size_t D = a->D;
    for (int i = 0; i < ns; i++) {
        size_t r = sg[i].row, v = (size_t)sg[i].b * ld;
        layernorm_modulate_forward(out + r * D, mean + r, rstd + r, x + r * D, shift + v, scale + v, ld, sg[i].nb,
                                   sg[i].per, (int)D, a->eps, a->tp->stream);
    }
}

// dx += the norm's input gradient; dshift, dscale: the samples' column sums (adaln_grads_begin)
static inline void adaln_modulate_backward(const AdaLN* a, floatX* dx, floatX* dshift, floatX* dscale, const floatX* dout,
                                           const floatX* x, const float* mean, const float* rstd, const floatX* scale,
                                           int ld, int B) {
    TpSegment sg[3];
    int ns = tp_own_segments(a->tp, B, a->n, sg);
    size_t D = a->D;
    for (int i = 0; i < ns; i++) {
        size_t r = sg[i].row, v = (size_t)sg[i].b * ld;
        float* scratch = tp_adaln_scratch(a->tp, sg[i].nb, sg[i].per, (int)D);
        layernorm_modulate_backward(dx + r * D, dshift + v, dscale + v, dout + r * D, x + r * D, mean + r, rstd + r,
                                    scale + v, ld, sg[i].nb, sg[i].per, (int)D, scratch, a->tp->stream);
    }
}

// out = res + gate y
static inline void adaln_gate_forward(const AdaLN* a, floatX* out, const floatX* res, const floatX* y, const floatX* gate,
                                      int ld, int B) {
    TpSegment sg[3];
    int ns = tp_own_segments(a->tp, B, a->n, sg);
    size_t D = a->D;
    for (int i = 0; i < ns; i++) {
        size_t r = sg[i].row;
        gated_residual_forward(out + r * D, res + r * D, y + r * D, gate + (size_t)sg[i].b * ld, ld, sg[i].nb, sg[i].per,
                               (int)D, a->tp->stream);
    }
}

// dy = gate dout (NULL: not wanted); dgate: the samples' column sums of dout y (NULL: not wanted)
static inline void adaln_gate_backward(const AdaLN* a, floatX* dy, floatX* dgate, const floatX* dout, const floatX* y,
                                       const floatX* gate, int ld, int B) {
    TpSegment sg[3];
    int ns = tp_own_segments(a->tp, B, a->n, sg);
    size_t D = a->D;
    for (int i = 0; i < ns; i++) {
        size_t r = sg[i].row, v = (size_t)sg[i].b * ld;
        float* scratch = tp_adaln_scratch(a->tp, sg[i].nb, sg[i].per, (int)D);
        gated_residual_backward(dy ? dy + r * D : NULL, dgate ? dgate + v : NULL, dout + r * D, y + r * D, gate + v, ld,
                                sg[i].nb, sg[i].per, (int)D, 0, scratch, a->tp->stream);
    }
}

// around the backward kernels of a set of modulation rows (n elements: B samples' vectors)
static inline void adaln_grads_begin(const AdaLN* a, floatX* dmod, size_t n) { tp_sample_sums_begin(a->tp, dmod, n); }
static inline void adaln_grads_finish(const AdaLN* a, floatX* dmod, size_t n) { tp_sample_sums_end(a->tp, dmod, n); }

// sq[b] = the squared error of sample b over this rank's rows of it (0 for the samples it
// holds none of; the caller sums them over the ranks), rows of `width` values; dpred (NULL:
// not wanted) = 2 dscale (pred - target), which may overwrite target
static inline void own_rows_mse(const AdaLN* a, float* sq, floatX* dpred, const floatX* pred, const floatX* target, int B,
                                size_t width, float dscale) {
    dev_memset(sq, 0, (size_t)B * sizeof(float), a->tp->stream);
    TpSegment sg[3];
    int ns = tp_own_segments(a->tp, B, a->n, sg);
    for (int i = 0; i < ns; i++) {
        size_t r = (size_t)sg[i].row * width;
        mse_forward_backward(sq + sg[i].b, dpred ? dpred + r : NULL, pred + r, target + r, sg[i].nb,
                             (size_t)sg[i].per * width, dscale, a->tp->stream);
    }
}

// per-sample sums of this rank's rows (host, n of them) summed over the TP group, which under
// sequence parallelism split the samples' rows (the CP group's: attention_sum_samples)
static inline void own_rows_sum(const AdaLN* a, double* v, int n) {
    if (a->tp->sp) comm_host_all_reduce(a->tp->comm, GROUP_TP, v, n, COMM_SUM);
}
