/*
A layer's saved activations: named fields laid out one after the other in one block of
memory, each rounded up to the arena's alignment. A trainer says, per field, its size
and whether the flags keep it (the block that backward reads, and that offload moves)
or drop it (then it lives in a work buffer shared by all layers and is recomputed).
One layout function serves both, so the plan and the pointers can never disagree.
*/
#pragma once
#include "common.h"
#include "arena.h"

#define ACT_MAX_FIELDS 32

typedef struct { void* f[ACT_MAX_FIELDS]; } ActBlock;

#define ACT(a, field) ((floatX*)(a).f[field])
#define ACTF(a, field) ((float*)(a).f[field])

// Lays out the fields i < n with take[i] set from base (NULL: sizes only); the others get
// NULL. Returns the block's bytes.
static inline size_t act_layout(const size_t* bytes, const int* take, int n, char* base, ActBlock* out) {
    if (n > ACT_MAX_FIELDS) FAIL("act_layout: %d fields, at most %d", n, ACT_MAX_FIELDS);
    size_t off = 0;
    for (int i = 0; i < n; i++) {
        if (out) out->f[i] = take[i] && base ? base + off : NULL;
        if (take[i]) off += ceil_div(bytes[i], ARENA_ALIGN) * ARENA_ALIGN;
    }
    return off;
}

// fills in the fields a block does not hold from the shared work buffer's
static inline void act_fill_from(ActBlock* a, const ActBlock* work, int n) {
    for (int i = 0; i < n; i++) if (!a->f[i]) a->f[i] = work->f[i];
}
