/*
Column- and row-parallel linears (Megatron-LM's split; nanotron's column_linear and
row_linear are the pattern: the tensor-parallel mode lives inside the operation). A model
writes its GEMMs through these and never sees a collective: they own tensor parallelism's
all-gathers, reductions and reduce-scatters, the recycled buffers they use
(llmc/parallel/recycled.h, through llmc/parallel/tensor_parallel.h's TpContext), the
sequence-parallel decision (--tp-mode), --tp-recompute-allgather, and where a residual or
a bias enters the sum. At tp = 1 every call is the plain GEMM one process runs, bit for bit.

A linear is opened once over all N rows of a micro-batch and then takes any number of
GEMMs, so the GEMMs that share an input (q, k, v; w1, w3) gather it once, and an FFN cut
in chunks (--ffn-chunks, hidden or token dimension) reads the gathered input and adds its
chunks into one row-parallel sum that is reduced once:

  forward                                             backward
  ColumnLinear c = column_forward(tp, slot, ...);     RowLinear r = row_backward(tp, dy, N, dbias);
  column_gemm(&c, y, w, b, r0, nr, out);  (any)       row_gemm_backward(&r, dw, dx, x, w, r0, nr, in, ldw);
  column_done(&c);                                    row_done(&r);
  RowLinear r = row_forward(tp, out, residual, N);    ColumnLinear c = column_backward(tp, slot, ..., dx, N, ...);
  row_gemm(&r, x, w, b, r0, nr, in, ldw, first);      column_gemm_backward(&c, dw, db, dy, w, r0, nr, out, acc);
  row_done(&r);                                       const floatX* dx_own = column_reduce(&c);
                                                      (the norm's backward reads dx_own)  column_done(&c);

column_open is the same for a linear that may be replicated (an output head whose vocabulary
is split over TP or not); replicated_gather_rows gathers the own rows of a replicated
layer's output.

A column-parallel linear's output is this rank's columns of all N rows; its input x is
the model's own rows of a residual-stream tensor (the norm output), gathered under
sequence parallelism. A row-parallel linear's input is this rank's columns of all N rows;
its output, summed over the TP group, lands in this rank's rows of `out`. Rows of the
residual stream are `width` elements (TpContext's), which every input x and output y of
a row-parallel linear has.
*/
#pragma once
#include "tensor_parallel.h"

typedef struct {
    TpContext* tp;
    TpRows x;   // all N rows of the input
    TpRows dx;  // backward: where the partial input gradient of all N rows goes
    int N, split;  // split = 0: a linear replicated over TP (no collective; x and dx as given)
} ColumnLinear;

// The forward of column-parallel GEMMs that read x_own (this rank's rows of the input;
// x_kept its kept gathered copy under --tp-recompute-allgather 0): all N rows, gathered
// once. `slot` names the input for the planted bug of TESTING builds, `name` holds the
// recycled buffer.
static inline ColumnLinear column_forward(TpContext* t, int slot, floatX* x_own, floatX* x_kept, int N, const char* name) {
    ColumnLinear c = {t, tp_column_input(t, slot, x_own, x_kept, N, 0, name), {NULL, -1}, N, 1};
    return c;
}

// Its backward: the input again (gathered again, or the kept copy) and dx_full, or under
// sequence parallelism the reduce-scatter staging, for the partial input gradient.
static inline ColumnLinear column_backward(TpContext* t, int slot, floatX* x_own, floatX* x_kept, floatX* dx_full, int N,
                                           const char* name) {
    ColumnLinear c = {t, tp_column_input(t, slot, x_own, x_kept, N, 1, name), {NULL, -1}, N, 1};
    c.dx = tp_partial_rows(t, dx_full, N);
    return c;
}

// A column-parallel linear whose input is gathered whole into the recycled buffer under
// sequence parallelism and never kept (an output head split over the vocabulary); with
// split = 0 it is replicated over TP and runs on x as it is.
static inline ColumnLinear column_open(TpContext* t, int split, floatX* x_own, floatX* dx, int N, int backward,
                                       const char* name) {
    ColumnLinear c = {t, {x_own, -1}, {dx, -1}, N, split};
    if (split && t->sp) c.x = tp_gather_taken(t, x_own, N, name);
    if (split && backward) c.dx = tp_partial_rows(t, dx, N);
    return c;
}

// rows [r0, r0+nr) of y = x w^T (+ bias): w is [out, width], y [nr, out]
static inline void column_gemm(const ColumnLinear* c, floatX* y, const floatX* w, const floatX* bias, int r0, int nr,
                               int out) {
    int W = (int)c->tp->width;
    matmul_forward(y, c->x.p + (size_t)r0 * W, w, nr, W, out, W, 0, c->tp->stream);
    if (bias) bias_forward(y, bias, nr, out, c->tp->stream);
}

// The backward of column_gemm on rows [r0, r0+nr): dw += dy^T x, dbias += column sums of
// dy, and the input gradient dy w into rows r0.. of c->dx (added to it with accumulate,
// for the GEMMs that share the input)
static inline void column_gemm_backward(const ColumnLinear* c, floatX* dw, floatX* dbias, const floatX* dy,
                                        const floatX* w, int r0, int nr, int out, int accumulate) {
    int W = (int)c->tp->width;
    stream_t s = c->tp->stream;
    matmul_backward_weight(dw, dy, c->x.p + (size_t)r0 * W, nr, W, out, W, s);
    if (dbias) bias_backward(dbias, dy, nr, out, tp_bias_scratch(c->tp, nr, out), s);
    matmul_backward_input(c->dx.p + (size_t)r0 * W, dy, w, nr, W, out, W, accumulate, s);
}

// Backward: gives the input back and sums the partial input gradient over the TP group;
// returns this rank's rows of it (valid until column_done)
static inline const floatX* column_reduce(ColumnLinear* c) {
    tp_give_back(c->tp, &c->x);
    return c->split ? tp_reduce_rows(c->tp, c->dx.p, c->N) : c->dx.p;
}

static inline void column_done(ColumnLinear* c) {
    tp_give_back(c->tp, &c->x);
    tp_give_back(c->tp, &c->dx);
}

typedef struct {
    TpContext* tp;
    TpRows y;             // forward: the partial sums of all N rows; backward: the output gradient of all N rows
    floatX* out;          // forward: where this rank's rows of the sum go
    const floatX* residual;  // forward: added to the sum once (NULL: none)
    int N;
} RowLinear;

// The forward of row-parallel GEMMs whose sum, plus `residual` when given, goes to this
// rank's rows of `out`. With tp = 1 the first GEMM into each row adds the residual itself
// (cuBLASLt's C = residual). With tp > 1 the partial rows are prefilled so that every GEMM
// accumulates: the residual enters once, on TP rank 0 (allreduce mode), or on each rank
// in its own block of the staging (reducescatter).
static inline RowLinear row_forward(TpContext* t, floatX* out, const floatX* residual, int N) {
    RowLinear r = {t, tp_partial_rows(t, out, N), out, residual, N};
    if (residual && t->tp > 1) {
        floatX* mine = r.y.p + tp_own_row0(t, N) * t->width;
        size_t n_own = (size_t)tp_own_rows(t, N) * t->width;
        if (t->sp || t->rank != 0) dev_memset(r.y.p, 0, (size_t)N * t->width * sizeof(floatX), t->stream);
        if (t->sp || t->rank == 0) dev_memcpy_d2d(mine, residual, n_own * sizeof(floatX), t->stream);
    }
    return r;
}

// Adds x w^T of rows [r0, r0+nr) into the sum (x [nr, in], w [width, in] with row stride
// ldw). `first`: the first GEMM into these rows (it writes them; later ones add). A bias
// enters after this GEMM on TP rank 0 only (pass it with one GEMM per row). in = 0 (a
// rank's empty chunk of an uneven split) adds nothing.
static inline void row_gemm(const RowLinear* r, const floatX* x, const floatX* w, const floatX* bias, int r0, int nr,
                            int in, int ldw, int first) {
    TpContext* t = r->tp;
    int W = (int)t->width;
    floatX* y = r->y.p + (size_t)r0 * W;
    if (in == 0) {
        if (first && !r->residual) dev_memset(y, 0, (size_t)nr * W * sizeof(floatX), t->stream);
        return;
    }
    if (r->residual && t->tp == 1 && first)
        matmul_forward_residual(y, r->residual + (size_t)r0 * W, x, w, nr, in, W, ldw, t->stream);
    else
        matmul_forward(y, x, w, nr, in, W, ldw, !first || (r->residual && t->tp > 1), t->stream);
    if (bias && t->rank == 0) bias_forward(y, bias, nr, W, t->stream);
}

// The backward of row-parallel GEMMs from dy_own, the gradient at this rank's rows of their
// output: all N rows of it (gathered under sequence parallelism) in r.y; dbias (a bias
// replicated over TP) gets the column sums of the own rows, which the step's TP reduction
// of such tensors completes.
static inline RowLinear row_backward(TpContext* t, floatX* dy_own, int N, floatX* dbias) {
    if (dbias) {
        int nr = tp_own_rows(t, N), W = (int)t->width;
        bias_backward(dbias, dy_own, nr, W, tp_bias_scratch(t, nr, W), t->stream);
    }
    RowLinear r = {t, tp_grad_rows(t, dy_own, N), NULL, NULL, N};
    return r;
}

// rows [r0, r0+nr): dw += dy^T x (w [width, in], row stride ldw), dx = dy w
static inline void row_gemm_backward(const RowLinear* r, floatX* dw, floatX* dx, const floatX* x, const floatX* w,
                                     int r0, int nr, int in, int ldw) {
    int W = (int)r->tp->width;
    const floatX* dy = r->y.p + (size_t)r0 * W;
    matmul_backward_weight(dw, dy, x, nr, in, W, ldw, r->tp->stream);
    matmul_backward_input(dx, dy, w, nr, in, W, ldw, 0, r->tp->stream);
}

// Forward: the sum over the TP group, this rank's rows of it in out; both directions give
// the recycled rows back.
static inline void row_done(RowLinear* r) {
    TpContext* t = r->tp;
    if (r->out) {
        floatX* mine = tp_reduce_rows(t, r->y.p, r->N);
        if (mine != r->out) dev_memcpy_d2d(r->out, mine, (size_t)tp_own_rows(t, r->N) * t->width * sizeof(floatX), t->stream);
    }
    tp_give_back(t, &r->y);
}

// The N rows of the output of a layer replicated over TP that each rank ran on its own rows
// (`width` elements a row, this rank's already in place in `all`): under sequence
// parallelism all-gathered in place; otherwise every rank ran them all.
static inline void replicated_gather_rows(TpContext* t, floatX* all, int N, size_t width) {
    if (t->sp) tp_all_gather_rows(t, all, (size_t)tp_own_rows(t, N) * width);
}
