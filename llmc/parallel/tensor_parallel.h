/*
Tensor parallelism's collectives around the column- and row-parallel GEMMs (Megatron's
f and g; with sequence parallelism, all-gather and reduce-scatter), for any model whose
residual stream is rows of `width` elements (docs/design.md 8.5): the primitives that the
linears of llmc/parallel/linear.h and the vocab-parallel layers (vocab_parallel.h) are
built on. A model calls those, not these.

One TpContext per model owns every sequence-parallel decision and the recycled
communication buffers (llmc/parallel/recycled.h): the gathered inputs of the column-parallel
GEMMs, the gathered residual gradient (backward needs both at once: two names) and the
staging of the reduce-scatters. A call that puts rows in a recycled buffer returns them
as TpRows; the caller hands that back with tp_give_back once the work that reads the
rows is enqueued, in one place, and no pointer into a recycled buffer outlives it.

Under sequence parallelism (--tp-mode reducescatter) the residual stream of an N-row
micro-batch holds block tp_rank of tp equal blocks on each rank ("own rows").
*/
#pragma once
#include "../core/common.h"
#include "../kernels/kernels.h"
#include "../core/arena.h"
#include "comm.h"
#include "recycled.h"
#include "parallel_args.h"

#ifdef TESTING
// test_llama --test-plant-tp-bug 1: nanotron #203's bug, planted on purpose. Forward keeps
// a pointer into the recycled all-gather buffer as the column-parallel GEMMs' saved input,
// and backward reads it instead of gathering again; the shipped path has no such pointer.
static int tp_test_plant_bug = 0;
#define TP_MAX_SLOTS 2048
#endif

typedef struct {
    Comm* comm;
    void* staging; size_t staging_bytes;  // --comm mpi (CUDA): the model's pinned host staging
    stream_t stream;
    int tp, rank;         // TP group size, this rank's place in it
    int sp;               // sequence parallelism on (tp > 1 and --tp-mode reducescatter)
    int keep_gathered;    // the gathered column inputs are saved copies (--tp-recompute-allgather 0)
    size_t width;         // elements per row of the residual stream
    RecycledPool pool;
    int buf_gather, buf_gather_grad, buf_rs;
    float* colsum; size_t colsum_floats;  // fp32 scratch of the bias and adaLN column sums (tp_colsum_plan; NULL: none)
#ifdef TESTING
    floatX* planted[TP_MAX_SLOTS];  // --test-plant-tp-bug: the pointers nanotron kept (never in the shipped path)
#endif
} TpContext;

// rows of the residual stream and the recycled buffer they live in (-1: none)
typedef struct { floatX* p; int held; } TpRows;

// The one sequence-parallel decision of a model (tp > 1 and --tp-mode reducescatter), made
// here and read by everything else through t->sp: the linears, the adaLN and vocabulary
// ops, the parameter store's TP reductions, the model's row counts. keep_gathered: the
// gathered column inputs are saved copies (--tp-recompute-allgather 0 with nothing recomputed).
static inline void tp_context_init(TpContext* t, Comm* comm, const ParallelFlags* pf, int recompute, size_t width) {
    memset(t, 0, sizeof(*t));
    t->comm = comm; t->tp = comm->tp; t->rank = comm->tp_rank;
    t->sp = comm->tp > 1 && pf->tp_sp;
    t->keep_gathered = t->sp && !pf->tp_regather && recompute == 0;
    t->width = width;
}

// The plan of the recycled buffers for micro-batches of up to max_rows rows: under
// sequence parallelism each holds all of them; allreduce mode reduces in place and
// needs none.
static inline void tp_context_plan(TpContext* t, size_t max_rows, Arena* d) {
    size_t full = t->sp ? max_rows * t->width * sizeof(floatX) : 0;
    t->buf_gather = recycled_plan(&t->pool, d, "tp gathered input", full);
    t->buf_gather_grad = recycled_plan(&t->pool, d, "tp gathered gradient", full);
    t->buf_rs = recycled_plan(&t->pool, d, "tp reduce-scatter staging", full);
}

// The fp32 scratch of the two-stage column sums of the linears' bias backward and the adaLN
// backward (llmc/kernels/bias.cuh, adaln.cuh), sized for the model's largest call: a bias of
// up to `rows` rows and `widest` columns, an adaLN of B samples of N rows and D columns.
// Shared by every such call on this context's stream. A model that plans none gets the
// one-stage kernels.
static inline void tp_colsum_plan(TpContext* t, Arena* d, size_t rows, size_t widest, int B, int N, int D) {
    size_t fb = bias_backward_scratch_floats((int)rows, (int)widest), fa = adaln_backward_scratch_floats(B, N, D);
    t->colsum_floats = fb > fa ? fb : fa;
    arena_add_to(d, "column-sum partials (bias, adaLN backward)", "scratch", t->colsum_floats * sizeof(float), &t->colsum);
}
// the scratch for a call that needs `floats` of it (a call beyond the plan is a bug)
static inline float* tp_colsum(const TpContext* t, size_t floats) {
    if (t->colsum && floats > t->colsum_floats)
        FAIL("column-sum scratch: a call needs %zu floats, the plan has %zu", floats, t->colsum_floats);
    return t->colsum;
}
// the scratch of a bias backward over rows x cols, and of an adaLN backward over B samples of N rows
static inline float* tp_bias_scratch(const TpContext* t, int rows, int cols) {
    return tp_colsum(t, bias_backward_scratch_floats(rows, cols));
}
static inline float* tp_adaln_scratch(const TpContext* t, int B, int N, int D) {
    return tp_colsum(t, adaln_backward_scratch_floats(B, N, D));
}

static inline void tp_context_bind(TpContext* t, stream_t s, void* staging, size_t staging_bytes) {
    t->stream = s; t->staging = staging; t->staging_bytes = staging_bytes;
}

static inline Comm* tp_comm(TpContext* t) {
    comm_set_staging(t->comm, t->staging, t->staging_bytes);
    return t->comm;
}

// the rows of an N-row micro-batch this rank holds in the residual stream, and the first
static inline int tp_own_rows(const TpContext* t, int N) { return t->sp ? N / t->tp : N; }
static inline size_t tp_own_row0(const TpContext* t, int N) { return t->sp ? (size_t)t->rank * (N / t->tp) : 0; }

// This rank's rows of a micro-batch of B samples of n rows each (the rows of a sample
// consecutive), cut where samples begin: kernels that read one vector per sample (the
// DiT's adaLN modulation, a per-sample loss) run once per segment, and own rows may start
// and end inside a sample. At most three: part of a sample, a run of whole samples, part
// of a sample. Segment i covers samples b .. b+nb-1, `per` rows of each (n, or the part
// of the one sample held here), from row `row` of this rank's rows. Without sequence
// parallelism: one segment of all B samples.
typedef struct { int row, b, nb, per; } TpSegment;

static inline int tp_own_segments(const TpContext* t, int B, int n, TpSegment seg[3]) {
    int N = B * n, first = (int)tp_own_row0(t, N), end = first + tp_own_rows(t, N), k = 0;
    for (int r = first; r < end && k < 3;) {
        int off = r % n;
        TpSegment s = {r - first, r / n, 1, n - off < end - r ? n - off : end - r};
        if (off == 0 && end - r >= n) { s.nb = (end - r) / n; s.per = n; }
        seg[k++] = s;
        r += s.nb * s.per;
    }
    return k;
}

// n elements summed over the TP group in place (under sequence parallelism: per-sample
// sums that each rank took over its own rows)
static inline void tp_all_reduce(TpContext* t, floatX* buf, size_t n) {
    if (t->tp == 1) return;
    comm_all_reduce(tp_comm(t), GROUP_TP, buf, n, COMM_FLOATX, COMM_SUM, t->stream);
    comm_join(t->comm, t->stream);
}

// Per-sample sums (n elements) that each rank takes over its own rows: under sequence
// parallelism zeroed before the kernels that write them and summed over the TP group after,
// so that every rank holds the whole; without it the kernels write them whole.
static inline void tp_sample_sums_begin(TpContext* t, floatX* buf, size_t n) {
    if (t->sp) dev_memset(buf, 0, n * sizeof(floatX), t->stream);
}
static inline void tp_sample_sums_end(TpContext* t, floatX* buf, size_t n) {
    if (t->sp) tp_all_reduce(t, buf, n);
}

// Under sequence parallelism: each rank's own rows, `own_n` elements already in its block
// of `all`, all-gathered in place (rows of any width: a model's output patches)
static inline void tp_all_gather_rows(TpContext* t, floatX* all, size_t own_n) {
    comm_all_gather(tp_comm(t), GROUP_TP, all, own_n, COMM_FLOATX, t->stream);
    comm_join(t->comm, t->stream);
}

static inline void tp_give_back(TpContext* t, TpRows* r) {
    if (r->held >= 0) recycled_give_back(&t->pool, r->held, t->stream);
    r->held = -1; r->p = NULL;
}

// The N rows of a sequence-sharded tensor: this rank's rows `own` all-gathered into
// `into` (a recycled buffer or a kept copy; own may already be its block of it).
static inline floatX* tp_gather_rows(TpContext* t, floatX* into, const floatX* own, int N) {
    size_t n = (size_t)tp_own_rows(t, N) * t->width;
    floatX* mine = into + tp_own_row0(t, N) * t->width;
    if (mine != own) dev_memcpy_d2d(mine, own, n * sizeof(floatX), t->stream);
    comm_all_gather(tp_comm(t), GROUP_TP, into, n, COMM_FLOATX, t->stream);
    comm_join(t->comm, t->stream);
    return into;
}

// All N rows of `own` gathered into a recycled buffer (the head, sampling); under
// sequence parallelism only.
static inline TpRows tp_gather_taken(TpContext* t, const floatX* own, int N, const char* holder) {
    TpRows r = {recycled_take(&t->pool, t->buf_gather, holder, (size_t)N * t->width * sizeof(floatX)), t->buf_gather};
    tp_gather_rows(t, r.p, own, N);
    return r;
}

// The input of column-parallel GEMMs that read a norm output: all N rows. Without
// sequence parallelism it is `own` itself. With it, forward gathers into the kept copy
// `kept` (--tp-recompute-allgather 0) or into the recycled buffer (1); backward reads
// the kept copy or gathers again. `slot` names the input (layer and which norm) for the
// planted bug of TESTING builds.
static inline TpRows tp_column_input(TpContext* t, int slot, floatX* own, floatX* kept, int N, int backward,
                                     const char* holder) {
    TpRows r = {own, -1};
    if (!t->sp) return r;
    if (t->keep_gathered) { r.p = backward ? kept : tp_gather_rows(t, kept, own, N); return r; }
#ifdef TESTING
    if (slot >= TP_MAX_SLOTS) FAIL("tensor parallelism: slot %d, at most %d", slot, TP_MAX_SLOTS);
    if (tp_test_plant_bug && backward && t->planted[slot]) { r.p = t->planted[slot]; return r; }  // the bug: a stale pointer
#else
    (void)slot;
#endif
    r = tp_gather_taken(t, own, N, holder);
#ifdef TESTING
    if (tp_test_plant_bug && !backward) t->planted[slot] = r.p;
#endif
    return r;
}

// The residual gradient of all N rows for the backward of a row-parallel GEMM: dx itself,
// or under sequence parallelism its own rows all-gathered into the recycled buffer.
static inline TpRows tp_grad_rows(TpContext* t, floatX* dx_own, int N) {
    TpRows r = {dx_own, -1};
    if (!t->sp) return r;
    r.p = recycled_take(&t->pool, t->buf_gather_grad, "d residual", (size_t)N * t->width * sizeof(floatX));
    r.held = t->buf_gather_grad;
    tp_gather_rows(t, r.p, dx_own, N);
    return r;
}

// Where N rows of partial sums go before their TP reduction (a row-parallel GEMM's output,
// the column-parallel GEMMs' input gradient, a vocab-parallel lookup): `full` itself
// (reduced in place: allreduce mode), or the reduce-scatter staging.
static inline TpRows tp_partial_rows(TpContext* t, floatX* full, int N) {
    TpRows r = {full, -1};
    if (!t->sp) return r;
    r.p = recycled_take(&t->pool, t->buf_rs, "partial sums", (size_t)N * t->width * sizeof(floatX));
    r.held = t->buf_rs;
    return r;
}

// Sums the partial rows over the TP group: all-reduce in place, or reduce-scatter, which
// leaves this rank's own rows summed in its block of the staging; returns those rows.
static inline floatX* tp_reduce_rows(TpContext* t, floatX* part, int N) {
    if (t->tp == 1) return part;
    if (!t->sp) comm_all_reduce(tp_comm(t), GROUP_TP, part, (size_t)N * t->width, COMM_FLOATX, COMM_SUM, t->stream);
    else comm_reduce_scatter(tp_comm(t), GROUP_TP, part, (size_t)tp_own_rows(t, N) * t->width, COMM_FLOATX, t->stream);
    comm_join(t->comm, t->stream);
    return part + tp_own_row0(t, N) * t->width;
}
