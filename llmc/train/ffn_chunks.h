/*
The chunks of --ffn-chunks K, for both trainers' FFNs: along the hidden units (every row,
a slice of this rank's F units) or along the tokens (--ffn-chunk-dim seq: every unit, a
slice of each sample's rows, never across a sample: a per-sample modulation, the DiT's
gate, reads one vector per chunk). A model plans the chunk scratch from rows x cols and
walks ffn_chunk_at(k) for k < ffn_chunk_count. Chunks past the end of an uneven split are
left out, and a rank holding one unit less than the largest (F split unevenly over TP)
may meet an empty last chunk (nf = 0).
*/
#pragma once
#include "memory_flags.h"
#include "train_args.h"

typedef struct {
    int K, seq;      // --ffn-chunks, --ffn-chunk-dim seq
    int F, Fmax;     // this rank's hidden units; the most any TP rank holds (the chunk width's base)
    int rows, cols;  // one chunk's shape (the scratch's)
} FfnChunks;

// one chunk: rows [r0, r0+nr) in samples [b0, b0+nb) of nper rows each, units [f0, f0+nf);
// first: the first chunk of its rows (a sum over hidden chunks, or a sample's gate, starts there)
typedef struct { int r0, nr, b0, nb, nper, f0, nf, first; } FfnChunk;

// The chunks of B samples of n rows each (a model without samples: B = 1, n = all rows),
// checked against the flag; what names a sample's rows in the error ("a batch", "a clip").
static inline FfnChunks ffn_chunks_plan(const MemoryFlags* f, int B, int n, int F, int Fmax, int tp, const char* what) {
    FfnChunks c = {f->ffn_chunks, f->ffn_chunk_seq, F, Fmax, B * n, F};
    if (c.K < 1) FAIL("--ffn-chunks must be >= 1 (got %d)", c.K);
    if (c.seq && c.K > n) FAIL("--ffn-chunks %d exceeds the %d tokens of %s", c.K, n, what);
    if (!c.seq && c.K > F) {
        if (tp == 1) FAIL("--ffn-chunks %d exceeds the FFN hidden size F=%d", c.K, F);
        FAIL("--ffn-chunks %d exceeds this rank's FFN hidden units (F over --tp %d: %d)", c.K, tp, F);
    }
    if (c.K > 1 && c.seq) c.rows = (int)ceil_div(n, c.K);
    else c.cols = ffn_chunk_width(Fmax, c.K);
    return c;
}

static inline int ffn_chunk_count(const FfnChunks* c, int B, int n) {
    if (c->K == 1) return 1;
    if (!c->seq) return (int)ceil_div(c->Fmax, c->cols);
    int per = (int)ceil_div(n, c->K);
    return B * (int)ceil_div(n, per);
}

static inline FfnChunk ffn_chunk_at(const FfnChunks* c, int B, int n, int k) {
    FfnChunk ch = {0, B * n, 0, B, n, 0, c->F, k == 0};
    if (c->K == 1) return ch;
    if (!c->seq) {
        ch.f0 = k * c->cols;
        ch.nf = c->F - ch.f0 < c->cols ? c->F - ch.f0 : c->cols;
        if (ch.nf < 0) ch.nf = 0;
        return ch;
    }
    int per = (int)ceil_div(n, c->K), per_sample = (int)ceil_div(n, per);
    int b = k / per_sample, n0 = (k % per_sample) * per;
    ch.b0 = b; ch.nb = 1;
    ch.r0 = b * n + n0;
    ch.nr = n - n0 < per ? n - n0 : per;
    ch.nper = ch.nr;
    ch.first = k % per_sample == 0;
    return ch;
}
