/*
Recycled communication buffers (docs/design.md 4.4, 8.5): a few named device buffers that every layer
borrows in turn for tensor parallelism's all-gathered inputs and reduce-scatter staging,
sized by the memory plan, so that their memory does not grow with the number of layers.

The rules that keep them safe (the bug of nanotron #203 broke the second one: a
column-parallel GEMM's all-gathered input, saved for its weight gradient, was
overwritten by the next layer's gather):
  1. A buffer has one holder at a time. recycled_take on a buffer that is held fails at
     once, naming both holders: two buffers alive at the same time must have different
     names.
  2. Nothing backward reads lives in one. A holder gives the buffer back before its
     function returns, and saved activations are planned in their own blocks
     (activations.h): backward that needs a gathered input gathers it again into a
     buffer it takes itself (--tp-recompute-allgather 1) or reads a planned saved copy (0).
In TESTING builds a buffer given back is poisoned with NaN bytes (0xFF), so a stale
pointer into it shows up as a NaN in test_llama's gradient check.
*/
#pragma once
#include "../core/common.h"
#include "../core/arena.h"
#include "../kernels/kernels.h"

#define RECYCLED_MAX 8

typedef struct {
    const char* name;
    floatX* ptr;
    size_t bytes;
    const char* holder;  // NULL while free
} RecycledBuffer;

typedef struct {
    RecycledBuffer buf[RECYCLED_MAX];
    int n;
} RecycledPool;

// adds a named buffer to the plan (arena kind "comm", or kind); returns its id. 0 bytes: not used
// by this configuration (taking it is then an error)
static inline int recycled_plan_as(RecycledPool* p, Arena* a, const char* name, const char* kind, size_t bytes) {
    if (p->n >= RECYCLED_MAX) FAIL("recycled buffers: more than %d", RECYCLED_MAX);
    RecycledBuffer* b = &p->buf[p->n];
    b->name = name; b->bytes = bytes; b->holder = NULL; b->ptr = NULL;
    arena_add_to(a, name, kind, bytes, &b->ptr);
    return p->n++;
}
static inline int recycled_plan(RecycledPool* p, Arena* a, const char* name, size_t bytes) {
    return recycled_plan_as(p, a, name, "comm", bytes);
}

static inline floatX* recycled_take(RecycledPool* p, int id, const char* holder, size_t bytes) {
    RecycledBuffer* b = &p->buf[id];
    if (b->holder)
        FAIL("recycled buffer '%s' is taken by '%s' while '%s' still holds it (two buffers alive at the same time "
             "must have different names)", b->name, holder, b->holder);
    if (bytes > b->bytes || !b->ptr)
        FAIL("recycled buffer '%s': %s needs %zu bytes, the plan gave it %zu", b->name, holder, bytes, b->bytes);
    b->holder = holder;
    return b->ptr;
}

// after the work on stream s that reads it
static inline void recycled_give_back(RecycledPool* p, int id, stream_t s) {
    RecycledBuffer* b = &p->buf[id];
    if (!b->holder) FAIL("recycled buffer '%s' given back but nobody holds it", b->name);
    b->holder = NULL;
#ifdef TESTING
    dev_memset(b->ptr, 0xFF, b->bytes, s);
#else
    (void)s;
#endif
}
