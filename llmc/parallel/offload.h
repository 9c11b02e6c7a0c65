/*
Activation offload to pinned host memory, with async copies and prefetch (docs/design.md 4.3),
for any model made of layers whose saved activations are one block of the same size per
layer (train_llama, train_dit).

The saved activations are blocks: one per layer, or under pipeline parallelism one per layer
of a stage and micro-batch slot (llmc/train/model_core.h: block = its chunk's first block +
slot x the chunk's layers + the layer's place in the chunk). Some blocks are offloaded (the
first n of each chunk's layers: --offload-act); the others stay resident. An offloaded block
is computed in one of two device slots, picked by its layer's parity in the chunk. As soon as
its layer's forward is done, the block is copied to the host on the offload stream, and the
slot is free again once that copy is done. In backward, which runs a chunk from its last
layer down, a block comes back into its slot on the prefetch stream, the one below it
prefetched while the layer above computes, so the copy overlaps the compute. Two slots are
enough: the slot the layer below lands in was last used by the layer above it, whose
backward is done. Each slot keeps its tenant (the block that last used it) and an event
recorded when the tenant released it (its copy to the host done, or its backward done);
whoever takes the slot next waits for that event. That is what a pipeline schedule needs:
forwards and backwards of different micro-batches interleave on a stage, each taking the
slots from whichever op used them last.

The trainer calls four hooks, all of them on its compute stream, with block ids:
  offload_before_write(o, u, s)          before anything writes block u in forward (the
                                         slot's previous tenant must have released it)
  offload_after_forward(o, u, s)         once layer u's forward has written its whole block
  offload_before_backward(o, u, below, s) before block u's backward reads it; `below` is
                                         the block the backward needs next (-1: none), whose
                                         prefetch starts now
  offload_after_backward(o, u, s)        once block u's backward has read it for the last time
and offload_block(o, u) for where block u is.
In TESTING builds a slot whose block went to the host is poisoned with NaN bytes (0xFF),
so a backward that reads it without the prefetch fails the gradient check instead of
reading the next layer's values; offload_test_skip_prefetch simulates exactly that bug.
*/
#pragma once
#include "../core/common.h"
#include "../core/arena.h"
#include "../kernels/kernels.h"

#define OFFLOAD_MAX_LAYERS 1024   // the model's layers (train_dit's config check)
#define OFFLOAD_MAX_BLOCKS 4096   // a stage's layers x the micro-batches it holds

typedef struct {
    int n_blocks, n_offload;          // blocks; of them, on the host
    int layers_offloaded;             // of one micro-batch's layers (the cost model's count)
    size_t block_bytes;
    int h_resident, h_slots, h_host;  // arena handles
    char* block[OFFLOAD_MAX_BLOCKS];  // device block (resident, or its slot)
    char* host[OFFLOAD_MAX_BLOCKS];   // pinned host copy of each offloaded block
    unsigned char offloaded[OFFLOAD_MAX_BLOCKS], slot[OFFLOAD_MAX_BLOCKS];
    int prefetched[OFFLOAD_MAX_BLOCKS];
    int tenant[2];                    // the block that last used each slot (-1: none yet)
    stream_t copy_stream, prefetch_stream;
    event_t fwd_done[OFFLOAD_MAX_BLOCKS], prefetch_done[OFFLOAD_MAX_BLOCKS];
    event_t released[2];              // each slot's tenant has let it go
    int bound;
} Offload;

#ifdef TESTING
static int offload_test_skip_prefetch = 0;  // simulates a missing prefetch: the poisoned slot must fail the check
#endif

// --offload-act N: -1 means every layer but the last (its backward comes first, so
// offloading it would only add a round trip)
static inline int offload_resolve(int flag, int L) {
    if (flag < -1 || flag > L)
        FAIL("--offload-act must be -1 (all but the last layer), 0 (off) or a layer count up to L=%d (got %d)", L, flag);
    return flag == -1 ? L - 1 : flag;
}

// Adds n_blocks blocks to the plan, block u offloaded where offloaded[u] (its slot: slot[u]):
// the resident blocks and the slots on the device, the offloaded blocks on the host.
static inline void offload_plan_blocks(Offload* o, Arena* dev, Arena* host, int n_blocks, const unsigned char* offloaded,
                                       const unsigned char* slot, int layers_offloaded, size_t block_bytes) {
    memset(o, 0, sizeof(*o));
    if (n_blocks > OFFLOAD_MAX_BLOCKS)
        FAIL("%d blocks of saved activations (a stage's layers x the micro-batches it holds); this build holds at most %d",
             n_blocks, OFFLOAD_MAX_BLOCKS);
    o->n_blocks = n_blocks; o->block_bytes = block_bytes; o->layers_offloaded = layers_offloaded;
    for (int u = 0; u < n_blocks; u++) {
        o->offloaded[u] = offloaded[u]; o->slot[u] = slot[u];
        o->n_offload += offloaded[u];
    }
    int n_slots = o->n_offload < 2 ? o->n_offload : 2;
    o->h_resident = arena_add(dev, "saved activations (layers)", "activations", (size_t)(n_blocks - o->n_offload) * block_bytes);
    o->h_slots = arena_add(dev, "offload slots", "offload", (size_t)n_slots * block_bytes);
    o->h_host = arena_add(host, "offloaded activations", "offload", (size_t)o->n_offload * block_bytes);
}

// one block a layer, the first n_offload offloaded (one process: the model's L layers)
static inline void offload_plan(Offload* o, Arena* dev, Arena* host, int L, int n_offload, size_t block_bytes) {
    unsigned char* off = (unsigned char*)xmalloc((size_t)(L > 0 ? L : 1) * 2);
    for (int l = 0; l < L; l++) { off[l] = l < n_offload; off[L + l] = (unsigned char)(l % 2); }
    offload_plan_blocks(o, dev, host, L, off, off + L, n_offload, block_bytes);
    free(off);
}

static inline int offload_is(const Offload* o, int u) { return u >= 0 && o->offloaded[u]; }

// after both arenas are allocated: the blocks, the two copy streams and the events
static inline void offload_bind(Offload* o, const Arena* dev, const Arena* host) {
    char* resident = (char*)arena_ptr(dev, o->h_resident);
    char* slots = (char*)arena_ptr(dev, o->h_slots);
    char* hb = (char*)arena_ptr(host, o->h_host);
    int r = 0, h = 0;
    for (int u = 0; u < o->n_blocks; u++) {
        if (offload_is(o, u)) {
            o->block[u] = slots + (size_t)o->slot[u] * o->block_bytes;
            o->host[u] = hb + (size_t)(h++) * o->block_bytes;
        } else {
            o->block[u] = resident + (size_t)(r++) * o->block_bytes;
        }
    }
    o->copy_stream = stream_create();
    o->prefetch_stream = stream_create();
    for (int u = 0; u < o->n_blocks; u++) { o->fwd_done[u] = event_create(); o->prefetch_done[u] = event_create(); }
    for (int k = 0; k < 2; k++) { o->released[k] = event_create(); o->tenant[k] = -1; }
    o->bound = 1;
}

static inline void offload_free(Offload* o) {
    if (!o->bound) return;
    stream_synchronize(o->copy_stream);
    stream_synchronize(o->prefetch_stream);
    for (int u = 0; u < o->n_blocks; u++) { event_destroy(o->fwd_done[u]); event_destroy(o->prefetch_done[u]); }
    for (int k = 0; k < 2; k++) event_destroy(o->released[k]);
    stream_destroy(o->copy_stream);
    stream_destroy(o->prefetch_stream);
    o->bound = 0;
}

static inline char* offload_block(const Offload* o, int u) { return o->block[u]; }

// stream s waits until the slot of block u is free, and u takes it
static inline void offload_take_slot(Offload* o, int u, stream_t s) {
    int k = o->slot[u];
    if (o->tenant[k] >= 0) stream_wait_event(s, o->released[k]);  // (itself too: its copy to the host must be done)
    o->tenant[k] = u;
}

static inline void offload_before_write(Offload* o, int u, stream_t s) {
    if (offload_is(o, u)) offload_take_slot(o, u, s);
}

static inline void offload_after_forward(Offload* o, int u, stream_t s) {
    if (!offload_is(o, u)) return;
    event_record(o->fwd_done[u], s);
    stream_wait_event(o->copy_stream, o->fwd_done[u]);
    dev_memcpy_d2h(o->host[u], o->block[u], o->block_bytes, o->copy_stream);
#ifdef TESTING
    dev_memset(o->block[u], 0xFF, o->block_bytes, o->copy_stream);
#endif
    event_record(o->released[o->slot[u]], o->copy_stream);
    o->prefetched[u] = 0;
}

// brings block u back into its slot, on the prefetch stream, once its last tenant let it go
static inline void offload_prefetch(Offload* o, int u) {
    offload_take_slot(o, u, o->prefetch_stream);
#ifdef TESTING
    if (!offload_test_skip_prefetch)
#endif
    dev_memcpy_h2d(o->block[u], o->host[u], o->block_bytes, o->prefetch_stream);
    event_record(o->prefetch_done[u], o->prefetch_stream);
    o->prefetched[u] = 1;
}

static inline void offload_before_backward(Offload* o, int u, int below, stream_t s) {
    if (offload_is(o, u)) {
        if (!o->prefetched[u]) offload_prefetch(o, u);
        stream_wait_event(s, o->prefetch_done[u]);
    }
    if (offload_is(o, below)) offload_prefetch(o, below);  // overlaps with block u's compute
}

static inline void offload_after_backward(Offload* o, int u, stream_t s) {
    if (offload_is(o, u)) { event_record(o->released[o->slot[u]], s); o->prefetched[u] = 0; }
}
