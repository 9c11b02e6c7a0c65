/*
Activation offload to pinned host memory, with async copies and prefetch (docs/design.md 4.3),
for any model made of L layers whose saved activations are one block of the same size
per layer (train_llama, train_dit).

The first n_offload layers are offloaded; the others keep their block resident. An
offloaded layer computes its forward in one of two device slots (layer l uses slot
l % 2). As soon as its forward is done, the block is copied to the host on the offload
stream, and the slot is free again once that copy is done. In backward, which runs
from the last layer down, layer l's block is brought back into its slot on the prefetch
stream. Layer l-1's prefetch starts while layer l computes, so the copy overlaps the
compute. Two slots are enough: the slot layer l-1 lands in was last used by layer l+1,
whose backward is done.

The trainer calls five hooks, all of them on its compute stream:
  offload_before_write(o, l, s)   before anything writes layer l's block in forward (its
                                  slot's previous tenant, layer l-2, must be on the host)
  offload_after_forward(o, l, s)  once layer l's forward has written its whole block
  offload_before_backward(o, l, s) before layer l's backward reads its block
  offload_after_backward(o, l, s)  once layer l's backward has read it for the last time
and offload_block(o, l) for where layer l's block is.

In TESTING builds a slot whose block went to the host is poisoned with NaN bytes (0xFF),
so a backward that reads it without the prefetch fails the gradient check instead of
reading the next layer's values; offload_test_skip_prefetch simulates exactly that bug.
*/
#pragma once
#include "../core/common.h"
#include "../core/arena.h"
#include "../kernels/kernels.h"

#define OFFLOAD_MAX_LAYERS 1024

enum { OFF_FWD_DONE, OFF_COPY_DONE, OFF_PREFETCH_DONE, OFF_BWD_DONE, OFF_NUM_EVENTS };

typedef struct {
    int L, n_offload;
    size_t block_bytes;
    int h_resident, h_slots, h_host;  // arena handles
    char* block[OFFLOAD_MAX_LAYERS];  // device block of each layer (resident, or its slot)
    char* host[OFFLOAD_MAX_LAYERS];   // pinned host copy of each offloaded layer
    int prefetched[OFFLOAD_MAX_LAYERS];
    stream_t copy_stream, prefetch_stream;
    event_t events[OFF_NUM_EVENTS][OFFLOAD_MAX_LAYERS];
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

// Adds the saved activations of all layers to the plan: the resident blocks and the
// slots on the device, the offloaded blocks on the host.
static inline void offload_plan(Offload* o, Arena* dev, Arena* host, int L, int n_offload, size_t block_bytes) {
    memset(o, 0, sizeof(*o));
    if (L > OFFLOAD_MAX_LAYERS) FAIL("config: L=%d layers; this build supports at most %d", L, OFFLOAD_MAX_LAYERS);
    o->L = L; o->n_offload = n_offload; o->block_bytes = block_bytes;
    int n_slots = n_offload < 2 ? n_offload : 2;
    o->h_resident = arena_add(dev, "saved activations (layers)", "activations", (size_t)(L - n_offload) * block_bytes);
    o->h_slots = arena_add(dev, "offload slots", "offload", (size_t)n_slots * block_bytes);
    o->h_host = arena_add(host, "offloaded activations", "offload", (size_t)n_offload * block_bytes);
}

static inline int offload_is(const Offload* o, int l) { return l < o->n_offload; }

// after both arenas are allocated: the blocks, the two copy streams and the events
static inline void offload_bind(Offload* o, const Arena* dev, const Arena* host) {
    char* resident = (char*)arena_ptr(dev, o->h_resident);
    char* slots = (char*)arena_ptr(dev, o->h_slots);
    char* hb = (char*)arena_ptr(host, o->h_host);
    for (int l = 0; l < o->L; l++) {
        if (offload_is(o, l)) {
            o->block[l] = slots + (size_t)(l % 2) * o->block_bytes;
            o->host[l] = hb + (size_t)l * o->block_bytes;
        } else {
            o->block[l] = resident + (size_t)(l - o->n_offload) * o->block_bytes;
        }
    }
    o->copy_stream = stream_create();
    o->prefetch_stream = stream_create();
    for (int e = 0; e < OFF_NUM_EVENTS; e++)
        for (int l = 0; l < o->L; l++) o->events[e][l] = event_create();
    o->bound = 1;
}

static inline void offload_free(Offload* o) {
    if (!o->bound) return;
    stream_synchronize(o->copy_stream);
    stream_synchronize(o->prefetch_stream);
    for (int e = 0; e < OFF_NUM_EVENTS; e++)
        for (int l = 0; l < o->L; l++) event_destroy(o->events[e][l]);
    stream_destroy(o->copy_stream);
    stream_destroy(o->prefetch_stream);
    o->bound = 0;
}

static inline char* offload_block(const Offload* o, int l) { return o->block[l]; }

static inline void offload_before_write(Offload* o, int l, stream_t s) {
    if (offload_is(o, l) && l >= 2) stream_wait_event(s, o->events[OFF_COPY_DONE][l - 2]);
}

static inline void offload_after_forward(Offload* o, int l, stream_t s) {
    if (!offload_is(o, l)) return;
    event_record(o->events[OFF_FWD_DONE][l], s);
    stream_wait_event(o->copy_stream, o->events[OFF_FWD_DONE][l]);
    dev_memcpy_d2h(o->host[l], o->block[l], o->block_bytes, o->copy_stream);
#ifdef TESTING
    dev_memset(o->block[l], 0xFF, o->block_bytes, o->copy_stream);
#endif
    event_record(o->events[OFF_COPY_DONE][l], o->copy_stream);
    o->prefetched[l] = 0;
}

// brings layer l's block back into its slot, on the prefetch stream
static inline void offload_prefetch(Offload* o, int l) {
    // the slot's last tenant was layer l+2 (its backward is done) or, at the start of
    // backward, whatever forward left there (all copies are done once the last one is)
    stream_wait_event(o->prefetch_stream, o->events[OFF_COPY_DONE][o->n_offload - 1]);
    if (l + 2 < o->n_offload) stream_wait_event(o->prefetch_stream, o->events[OFF_BWD_DONE][l + 2]);
#ifdef TESTING
    if (!offload_test_skip_prefetch)
#endif
    dev_memcpy_h2d(o->block[l], o->host[l], o->block_bytes, o->prefetch_stream);
    event_record(o->events[OFF_PREFETCH_DONE][l], o->prefetch_stream);
    o->prefetched[l] = 1;
}

static inline void offload_before_backward(Offload* o, int l, stream_t s) {
    if (offload_is(o, l)) {
        if (!o->prefetched[l]) offload_prefetch(o, l);
        stream_wait_event(s, o->events[OFF_PREFETCH_DONE][l]);
    }
    if (l >= 1 && offload_is(o, l - 1)) offload_prefetch(o, l - 1);  // overlaps with layer l's compute
}

static inline void offload_after_backward(Offload* o, int l, stream_t s) {
    if (offload_is(o, l)) event_record(o->events[OFF_BWD_DONE][l], s);
}
