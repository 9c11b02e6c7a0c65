/*
Where each parameter lives on one rank, for any model described by a table of tensors.

The reference layout (docs/design.md 5.2, 9.2) is tensor-major: each tensor of the
table in order, a per-layer tensor as its L layers one after the other. That is the
layout of checkpoints, reference files and test dumps. On the device a rank holds its
tensor-parallel share of each tensor, laid out in buckets: one per layer (that layer's
slice of every per-layer tensor, in table order), then one for the rest, so that a
layer's gradients are one contiguous range that data parallelism reduces as soon as the
layer's backward is done. With --zero 1 every bucket is padded to a multiple of dp and
DP rank r owns part r of each: the fp32 master weights and AdamW moments exist only
for the owned parts (the optimizer layout), and shard boundaries cut across tensors.

A tensor's split over the TP group (Megatron-LM's):
  PARAM_REPLICATED  every TP rank holds it whole (norm weights, biases added once)
  PARAM_SPLIT_ROWS  column-parallel: rank r holds its block of the output rows, cut in
                    whole units (a head's hd rows); `groups` stacked blocks (a fused
                    q|k|v weight) are each cut so, parts differing by at most one unit
  PARAM_SPLIT_COLS  row-parallel: the matching block of the input columns
  PARAM_VOCAB       the vocabulary rows: with --shard-vocab 1 and tp > 1 rank r holds
                    rows [r*Vs, (r+1)*Vs), Vs = ceil(V/tp) (the last shard's rows past V
                    are zero padding); with --shard-vocab 1 and tp = 1 the tensor leaves
                    the buckets and DP rank r keeps rows [r*Vs, ...) of it, Vs = ceil(V/dp),
                    gathered at use (FSDP-style); otherwise replicated.

A replicated tensor's gradient over the TP group (tp_grad), by what each rank's backward
saw of the work:
  TP_GRAD_ROWS   the rows it runs: the whole gradient in allreduce mode, where every rank
                 runs all rows, and only its own rows' part under sequence parallelism
                 (norm weights, biases, a replicated vocabulary): summed over TP there
  TP_GRAD_HEADS  its own heads in any mode (the DiT's QK norms): summed over TP always
  TP_GRAD_WHOLE  computed from inputs every TP rank holds whole in any mode (the DiT's
                 conditioning, whose adaLN gradients are summed over TP before they
                 reach it): never summed

Under pipeline parallelism (--pp) a rank holds its stage's layers only (llmc/parallel/pipeline.h):
the buckets of the other layers are empty, so that layer indices stay the model's. A
whole-model tensor says which stages hold it (`stages`): the first (Llama's embedding, the
DiT's patch embedding), the last (the final norm and output, the DiT's final layer), both
ends (a tied embedding, used at both: Megatron's embedding group), or every stage (the DiT's
conditioning, which each stage recomputes). A tensor held by several stages is shared:
its gradients are summed over those stages, and stage 0's copy is the one counted by the
gradient norm and written to checkpoints.

A segment is a piece of one tensor, contiguous in the local buffer; in the reference
layout it is `rows` runs of n/rows elements, ref_stride apart (a row-parallel shard is
a block of columns).
*/
#pragma once
#include "../core/common.h"

enum { PARAM_REPLICATED, PARAM_SPLIT_ROWS, PARAM_SPLIT_COLS, PARAM_VOCAB };
enum { TP_GRAD_ROWS, TP_GRAD_HEADS, TP_GRAD_WHOLE };
enum { STAGE_EVERY = 0, STAGE_FIRST = 1, STAGE_LAST = 2, STAGE_ENDS = 3 };  // which pipeline stages hold a whole-model tensor

// How the layers are cut into pipeline stages: pieces p = c * pp + s (model chunk c of
// stage s; one chunk a stage but under --pp-schedule interleaved) hold layers
// [first[p], first[p + 1]). pp = 1: one piece, every layer.
#define PP_MAX_PIECES 1024
typedef struct { int pp, virt; int first[PP_MAX_PIECES + 1]; } PpSplit;

static inline int pp_layer_piece(const PpSplit* sp, int l) {
    int p = 0;
    while (l >= sp->first[p + 1]) p++;
    return p;
}
static inline int pp_layer_stage(const PpSplit* sp, int l) { return sp ? pp_layer_piece(sp, l) % sp->pp : 0; }
// does stage s of pp hold a whole-model tensor of these stages?
static inline int pp_stage_holds(int stages, int s, int pp) {
    return stages == STAGE_EVERY || ((stages & STAGE_FIRST) && s == 0) || ((stages & STAGE_LAST) && s == pp - 1);
}
// is it held by more than one stage (its gradients summed over them)?
static inline int pp_shared(int stages, int pp) { return pp > 1 && (stages == STAGE_EVERY || stages == STAGE_ENDS); }

typedef struct {
    const char* name;
    int per_layer;       // 1: L stacked copies in the layer buckets; 0: one, in the last bucket
    size_t rows, cols;   // one copy's [rows, cols] (nn.Linear's [out, in]; a vector is [n, 1]); 0 rows: absent
    int split;           // PARAM_REPLICATED, _SPLIT_ROWS, _SPLIT_COLS, _VOCAB
    size_t unit;         // the split dimension is cut in whole units of this many rows or columns (>= 1)
    int groups;          // PARAM_SPLIT_ROWS: stacked blocks, each cut (>= 1)
    int decays;          // AdamW applies weight decay to it
    int tp_grad;         // a replicated tensor's gradient on one TP rank: TP_GRAD_ROWS (0), _HEADS, _WHOLE
    int stages;          // a whole-model tensor's pipeline stages: STAGE_EVERY (0), _FIRST, _LAST, _ENDS
} ParamSpec;

// Part r of n units split over tp ranks: the first n % tp parts get one unit more.
static inline void split_part(size_t n, int tp, int r, size_t* start, size_t* count) {
    size_t q = n / tp, extra = n % tp, rr = (size_t)r;
    *count = q + (rr < extra);
    *start = rr * q + (rr < extra ? rr : extra);
}

// What one rank of a TP group holds of a transformer (Megatron-LM's split): its query heads
// and kv heads, whole ones (KV > 0: grouped kv heads, so each GQA group stays on one rank;
// KV = 0: none of their own), and its FFN hidden units, part `rank` of F (named f_name in
// the messages; F need not divide by tp, parts differ by at most one). Fmax is the largest
// rank's part, which every rank cuts its chunks from (collectives pair up).
typedef struct { int Hl, KVl, Fl, Fmax; } TpShard;

static inline TpShard tp_shard(int H, int KV, int F, const char* f_name, int tp, int rank) {
    if (tp < 1) FAIL("--tp must be >= 1 (got %d)", tp);
    if (KV > 0 && (H % tp != 0 || KV % tp != 0))
        FAIL("--tp %d must divide the number of heads H=%d and of kv heads KV=%d (each rank holds whole GQA groups)",
             tp, H, KV);
    if (KV == 0 && H % tp != 0)
        FAIL("--tp %d must divide the number of heads H=%d (each rank holds whole heads)", tp, H);
    if (F < tp) FAIL("--tp %d exceeds the FFN hidden size %s=%d", tp, f_name, F);
    size_t f0, n;
    split_part((size_t)F, tp, rank, &f0, &n);
    TpShard s = {H / tp, KV > 0 ? KV / tp : H / tp, (int)n, (int)ceil_div((size_t)F, (size_t)tp)};
    return s;
}

typedef struct {
    int tensor, layer;   // layer -1 for the tensors outside the layers
    size_t ref_off;      // offset in the reference layout
    size_t local_off;    // offset in this rank's parameter (and gradient) buffer
    size_t n, rows, ref_stride;
} Segment;

typedef struct { size_t start, padded; } Bucket;  // a range of the local buffer; padded % dp == 0 under --zero 1

typedef struct {
    const ParamSpec* spec; int n_spec, L;
    int tp, tp_rank, dp, rank, zero, shard_vocab;
    const PpSplit* split;                       // the pipeline's stages (NULL: one)
    int pp, stage;                              // this rank's stage of pp
    int vocab_tp;                               // --shard-vocab 1 with tp > 1: vocab-parallel over TP
    size_t vs, v0, v_valid;                     // vocab_tp: rows per shard, this shard's first row, its real rows
    int n_seg, n_buckets;
    Segment* seg;
    int* seg_bucket;                            // -1: the owned vocabulary region
    Bucket* bucket;                             // L + 1
    size_t* ref_base;                           // [n_spec]: each tensor's offset in the reference layout
    size_t num_params;                          // the whole model
    size_t vocab_start, vocab_rows;             // tp = 1: owned vocabulary region; Vs rows per tensor
    size_t n_local;                             // elements of the local parameter buffer
    size_t n_opt;                               // elements of the optimizer state (owned)
} ParamLayout;

static inline size_t param_spec_size(const ParamSpec* s, int L) { return (s->per_layer ? (size_t)L : 1) * s->rows * s->cols; }

// is replicated tensor t's gradient on one TP rank a part that the TP group sums (sp:
// sequence parallelism on)?
static inline int param_tp_grad_partial(const ParamLayout* p, int t, int sp) {
    int g = p->spec[t].tp_grad;
    return g == TP_GRAD_HEADS || (sp && g == TP_GRAD_ROWS);
}

// is tensor t the same on every rank of the TP group?
static inline int param_tp_replicated(const ParamLayout* p, int t) {
    int s = p->spec[t].split;
    return s == PARAM_REPLICATED || (s == PARAM_VOCAB && !p->vocab_tp);
}

// what this rank owns of bucket b: [lo, lo + n) of the local buffer
static inline void bucket_owned(const ParamLayout* p, int b, size_t* lo, size_t* n) {
    const Bucket* k = &p->bucket[b];
    if (p->zero) { *n = k->padded / p->dp; *lo = k->start + (size_t)p->rank * *n; }
    else { *n = k->padded; *lo = k->start; }
}

static inline void param_layout_free(ParamLayout* p) {
    free(p->seg); free(p->seg_bucket); free(p->bucket); free(p->ref_base);
    memset(p, 0, sizeof(*p));
}

typedef struct { ParamLayout* p; size_t cur; } LayoutCursor;

static inline void layout_add_segment(LayoutCursor* c, int tensor, int layer, size_t ref_off, size_t rows, size_t cols,
                                      size_t stride, int bucket) {
    ParamLayout* p = c->p;
    Segment* s = &p->seg[p->n_seg];
    s->tensor = tensor; s->layer = layer; s->ref_off = ref_off; s->local_off = c->cur;
    s->rows = rows; s->n = rows * cols; s->ref_stride = stride;
    p->seg_bucket[p->n_seg++] = bucket;
    c->cur += s->n;
}

// tensor t's copy at ref (layer l, or -1), this TP rank's share of it, into bucket b
static inline void layout_add_tensor(LayoutCursor* c, int t, int l, size_t ref, int b) {
    ParamLayout* p = c->p;
    const ParamSpec* s = &p->spec[t];
    size_t start, count;
    if (s->split == PARAM_SPLIT_ROWS) {
        size_t per = s->rows / s->groups;
        split_part(per / s->unit, p->tp, p->tp_rank, &start, &count);
        for (int g = 0; g < s->groups; g++)
            layout_add_segment(c, t, l, ref + (g * per + start * s->unit) * s->cols, 1, count * s->unit * s->cols, 0, b);
    } else if (s->split == PARAM_SPLIT_COLS) {
        split_part(s->cols / s->unit, p->tp, p->tp_rank, &start, &count);
        layout_add_segment(c, t, l, ref + start * s->unit, s->rows, count * s->unit, s->cols, b);
    } else if (s->split == PARAM_VOCAB && p->vocab_tp) {
        layout_add_segment(c, t, l, ref + p->v0 * s->cols, 1, p->v_valid * s->cols, 0, b);
        c->cur += (p->vs - p->v_valid) * s->cols;  // the padding rows: zero for good
    } else {
        layout_add_segment(c, t, l, ref, 1, s->rows * s->cols, 0, b);
    }
}

static inline void layout_close_bucket(LayoutCursor* c, int b) {
    ParamLayout* p = c->p;
    size_t len = c->cur - p->bucket[b].start;
    p->bucket[b].padded = p->zero ? ceil_div(len, p->dp) * p->dp : len;
    c->cur = p->bucket[b].start + p->bucket[b].padded;
}

// is tensor t (of layer l; -1 outside the layers) on this rank's pipeline stage?
static inline int param_on_stage(const ParamLayout* p, int t, int l) {
    if (!p->split) return 1;
    return l >= 0 ? pp_layer_stage(p->split, l) == p->stage : pp_stage_holds(p->spec[t].stages, p->stage, p->pp);
}

// is tensor t's copy on this rank one that the gradient norm and checkpoints skip (a
// shared tensor's, counted on stage 0)?
static inline int param_stage_copy(const ParamLayout* p, int t) {
    return p->stage != 0 && !p->spec[t].per_layer && pp_shared(p->spec[t].stages, p->pp);
}

// The layout of TP rank tp_rank, gradient-group rank `rank` (of dp), pipeline stage `stage`
// of split (NULL: one stage). The model checks beforehand that its splits make sense (whole
// heads per rank, no empty part).
static inline void param_layout_build(ParamLayout* p, const ParamSpec* spec, int n_spec, int L, int tp, int tp_rank, int dp,
                                      int rank, int zero, int shard_vocab, const PpSplit* split, int stage) {
    memset(p, 0, sizeof(*p));
    p->spec = spec; p->n_spec = n_spec; p->L = L;
    p->split = split && split->pp > 1 ? split : NULL; p->pp = p->split ? split->pp : 1; p->stage = p->split ? stage : 0;
    p->tp = tp; p->tp_rank = tp_rank; p->dp = dp; p->rank = rank; p->zero = zero; p->shard_vocab = shard_vocab;
    p->vocab_tp = shard_vocab && tp > 1;
    size_t max_seg = 1;
    p->ref_base = (size_t*)xmalloc((size_t)n_spec * sizeof(size_t));
    size_t V = 0;
    for (int t = 0; t < n_spec; t++) {
        p->ref_base[t] = p->num_params;
        p->num_params += param_spec_size(&spec[t], L);
        max_seg += (size_t)(spec[t].per_layer ? L : 1) * (spec[t].split == PARAM_SPLIT_ROWS ? spec[t].groups : 1);
        if (spec[t].split == PARAM_VOCAB && spec[t].rows) V = spec[t].rows;
    }
    p->seg = (Segment*)xmalloc(max_seg * sizeof(Segment));
    p->seg_bucket = (int*)xmalloc(max_seg * sizeof(int));
    p->bucket = (Bucket*)xmalloc((size_t)(L + 1) * sizeof(Bucket));
    if (p->vocab_tp) {
        p->vs = ceil_div(V, tp); p->v0 = (size_t)tp_rank * p->vs;
        p->v_valid = p->v0 < V ? (V - p->v0 < p->vs ? V - p->v0 : p->vs) : 0;
    }
    LayoutCursor c = {p, 0};
    for (int l = 0; l < L; l++) {
        p->bucket[l].start = c.cur;
        for (int t = 0; t < n_spec; t++)
            if (spec[t].per_layer && spec[t].rows && param_on_stage(p, t, l))
                layout_add_tensor(&c, t, l, p->ref_base[t] + (size_t)l * spec[t].rows * spec[t].cols, l);
        layout_close_bucket(&c, l);
    }
    int rest = L, dp_vocab = shard_vocab && !p->vocab_tp;
    p->bucket[rest].start = c.cur;
    for (int t = 0; t < n_spec; t++)
        if (!spec[t].per_layer && spec[t].rows && !(dp_vocab && spec[t].split == PARAM_VOCAB) && param_on_stage(p, t, -1))
            layout_add_tensor(&c, t, -1, p->ref_base[t], rest);
    layout_close_bucket(&c, rest);
    p->n_buckets = L + 1;
    p->vocab_start = c.cur;
    if (dp_vocab) {
        size_t Vs = ceil_div(V, dp);
        size_t r0 = (size_t)rank * Vs, r1 = r0 + Vs < V ? r0 + Vs : V;
        size_t rows = r1 > r0 ? r1 - r0 : 0;
        p->vocab_rows = Vs;
        for (int t = 0; t < n_spec; t++) {
            if (spec[t].split != PARAM_VOCAB || !spec[t].rows || !param_on_stage(p, t, -1)) continue;
            size_t start = c.cur;
            layout_add_segment(&c, t, -1, p->ref_base[t] + r0 * spec[t].cols, 1, rows * spec[t].cols, 0, -1);
            c.cur = start + Vs * spec[t].cols;  // padding rows of the last shard stay zero
        }
    }
    p->n_local = c.cur;
    size_t opt = 0;
    for (int b = 0; b < p->n_buckets; b++) { size_t lo, n; bucket_owned(p, b, &lo, &n); opt += n; }
    p->n_opt = opt + (p->n_local - p->vocab_start);
}

// copies segment g between the reference layout and a local buffer, both fp32
static inline void segment_copy(const Segment* g, float* local, float* ref, int to_local) {
    if (g->n == 0) return;
    size_t cols = g->n / g->rows;
    for (size_t r = 0; r < g->rows; r++) {
        float* l = local + g->local_off + r * cols;
        float* f = ref + g->ref_off + r * g->ref_stride;
        memcpy(to_local ? l : f, to_local ? f : l, cols * sizeof(float));
    }
}

// The segment that holds element off of the local buffer (NULL: none, as in padding).
static inline const Segment* layout_segment_at(const ParamLayout* lay, size_t off) {
    for (int i = 0; i < lay->n_seg; i++)
        if (off >= lay->seg[i].local_off && off < lay->seg[i].local_off + lay->seg[i].n) return &lay->seg[i];
    return NULL;
}

// element j of segment g: its offset in the reference layout, and how many of the n
// elements from it are one run there (to the end of its row when the rows are strided)
static inline size_t segment_ref(const Segment* g, size_t j) {
    size_t cols = g->n / g->rows;
    return g->ref_off + j / cols * g->ref_stride + j % cols;
}
static inline size_t segment_run(const Segment* g, size_t j, size_t n) {
    size_t cols = g->n / g->rows, left = cols - j % cols;
    return g->rows == 1 || g->ref_stride == cols || n < left ? n : left;
}

// A range of the local buffer that this rank owns, inside one tensor: its place in the
// local buffer and in the optimizer state. param_layout_pieces lists them in optimizer
// order; AdamW, the gradient norm and the state moves walk that list.
typedef struct { int tensor; size_t local_off, opt_off, n; } Piece;

// at most one piece per segment and bucket boundary
static inline size_t param_layout_max_pieces(const ParamLayout* p) { return 2 * (size_t)p->n_seg + 8; }

static inline int param_layout_pieces(const ParamLayout* p, Piece* out) {
    int np = 0;
    size_t opt = 0;
    for (int b = 0; b < p->n_buckets; b++) {
        size_t lo, n; bucket_owned(p, b, &lo, &n);
        for (int i = 0; i < p->n_seg; i++) {
            if (p->seg_bucket[i] != b) continue;
            const Segment* s = &p->seg[i];
            size_t a = s->local_off > lo ? s->local_off : lo;
            size_t e = s->local_off + s->n < lo + n ? s->local_off + s->n : lo + n;
            if (e <= a) continue;
            Piece q = {s->tensor, a, opt + (a - lo), e - a};
            out[np++] = q;
        }
        opt += n;
    }
    for (int i = 0; i < p->n_seg; i++) {
        if (p->seg_bucket[i] != -1 || p->seg[i].n == 0) continue;
        const Segment* s = &p->seg[i];
        Piece q = {s->tensor, s->local_off, opt + (s->local_off - p->vocab_start), s->n};
        out[np++] = q;
    }
    return np;
}

// Is every segment one run of the reference layout? Then the uploads read the reference
// array itself, with no local copy: at llama3-1B a copy is 5 GB of fresh host memory to
// fault in and fill. Only TP's column shards (row-parallel weights) are strided.
static inline int segments_contiguous(const ParamLayout* lay) {
    for (int i = 0; i < lay->n_seg; i++) {
        const Segment* g = &lay->seg[i];
        if (g->n && g->rows > 1 && g->ref_stride != g->n / g->rows) return 0;
    }
    return 1;
}

// This rank's local array of the whole model's fp32 array `ref` (reference layout), zero
// where no segment lands (bucket padding, padded vocabulary rows), for layouts with
// strided segments. calloc hands out zero pages, and all threads copy, the rows cut into
// blocks so that one large tensor (llama3-1B's embedding) is not one thread's work.
static inline float* layout_local_from_ref(const ParamLayout* lay, const float* ref) {
    float* local = (float*)calloc(lay->n_local ? lay->n_local : 1, sizeof(float));
    if (!local) FAIL("host calloc of %zu floats failed (hint: not enough RAM)", lay->n_local);
    const size_t block = (size_t)1 << 18;
    for (int i = 0; i < lay->n_seg; i++) {
        const Segment* g = &lay->seg[i];
        if (g->n == 0) continue;
        size_t cols = g->n / g->rows, per_row = ceil_div(cols, block), items = g->rows * per_row;
        #pragma omp parallel for schedule(static) if (g->n >= block)
        for (size_t k = 0; k < items; k++) {
            size_t r = k / per_row, c0 = (k % per_row) * block, w = cols - c0 < block ? cols - c0 : block;
            memcpy(local + g->local_off + r * cols + c0, ref + g->ref_off + r * g->ref_stride + c0, w * sizeof(float));
        }
    }
    return local;
}

// Where element `off` of the local layout is on the host: in the local copy when there is
// one, else in `ref`, through the (contiguous) segment that holds it
static inline const float* layout_local_element(const ParamLayout* lay, const float* ref, const float* local, size_t off) {
    if (local) return local + off;
    const Segment* g = layout_segment_at(lay, off);
    if (!g) FAIL("local element %zu lies in no segment", off);
    return ref + g->ref_off + (off - g->local_off);
}
