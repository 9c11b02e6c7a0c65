/*
The memory flags, one struct for both trainers, --fit-memory and the test programs:
what each model's plan reads (llmc/train/activations.h places the fields by them), what
--fit-memory searches and writes back, what the test programs check against the
reference. One table of entries (memory_flag_entries) parses them everywhere.
*/
#pragma once
#include "../core/flags.h"

typedef struct {
    int ffn_chunks;     // 1 = off
    int ffn_chunk_seq;  // --ffn-chunk-dim: 0 hidden (split the FFN's hidden size), 1 seq (split the tokens)
    int ce_chunks;      // 1 = off (the output head of train_llama; a model without one keeps 1)
    int offload_act;    // layers whose saved activations go to host; -1 = all but the last
    int recompute;      // 0, 1, 2
} MemoryFlags;

[[maybe_unused]] static const char* const FFN_CHUNK_DIM_NAMES[3] = {"hidden", "seq", NULL};

// every flag off, or the given ones on top (for the per-flag tables)
static inline MemoryFlags memory_flags(int ffn_chunks, int recompute) {
    MemoryFlags f;
    memset(&f, 0, sizeof(f));
    f.ffn_chunks = ffn_chunks; f.ce_chunks = 1; f.recompute = recompute;
    return f;
}
static inline MemoryFlags memory_flags_default(void) { return memory_flags(1, 0); }

// Appends the entries to out, --ce-chunks when the model has an output head (with_ce);
// recompute_help says what each level drops in this model. Returns how many.
static inline int memory_flag_entries(Flag* out, MemoryFlags* m, int with_ce, const char* recompute_help) {
    const Flag f[] = {
        {"ffn-chunks", 'i', &m->ffn_chunks, "split the FFN into K chunks, recomputed in backward (default 1)", NULL},
        {"ffn-chunk-dim", 'e', &m->ffn_chunk_seq, "hidden | seq: what --ffn-chunks splits (default hidden)", FFN_CHUNK_DIM_NAMES},
        {"offload-act", 'i', &m->offload_act, "offload the saved activations of N layers to host, -1 = all but the last", NULL},
        {"recompute", 'i', &m->recompute, recompute_help, NULL},
        {"ce-chunks", 'i', &m->ce_chunks, "output projection + cross-entropy in K row chunks (default 1)", NULL},
    };
    int n = (int)(sizeof(f) / sizeof(f[0])) - (with_ce ? 0 : 1);
    memcpy(out, f, (size_t)n * sizeof(Flag));
    return n;
}
