/*
A layer's saved activations: named fields laid out one after the other in one block of
memory, each rounded up to the arena's alignment. A trainer says, per field, its size
and whether the flags keep it (the block that backward reads, and that offload moves)
or drop it (then it lives in a work buffer shared by all layers and is recomputed).
One layout function serves both, so the plan and the pointers can never disagree.
*/
#pragma once
#include "../core/common.h"
#include "../core/arena.h"
#include "../core/logger.h"

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

// Where a field of a layer lives under the memory flags: in the layer's saved block
// (backward reads it; offload moves it), in the work buffer shared by all layers (it
// is recomputed in backward), or in the FFN chunk scratch at chunk size (--ffn-chunks).
typedef enum { ACT_SAVED, ACT_IN_WORK, ACT_IN_CHUNK } ActHome;

// a trainer's activation fields, sized for its batch, and where each one lives
typedef struct {
    int n;
    const char* const* names;
    size_t bytes[ACT_MAX_FIELDS];
    ActHome home[ACT_MAX_FIELDS];
    size_t block_bytes;   // one layer's saved fields
    size_t work_bytes;    // the shared work buffer
} ActPlan;

// lays out the fields that live in `home` (ACT_SAVED: a layer's block; ACT_IN_WORK: the
// work buffer) from base, NULL for sizes only; returns the bytes
static inline size_t act_plan_layout(const ActPlan* p, ActHome home, char* base, ActBlock* out) {
    int take[ACT_MAX_FIELDS];
    for (int i = 0; i < p->n; i++) take[i] = p->home[i] == home;
    return act_layout(p->bytes, take, p->n, base, out);
}

// the plan's totals, once the trainer has filled n, names, bytes and home
static inline ActPlan act_plan_finish(ActPlan p) {
    p.block_bytes = act_plan_layout(&p, ACT_SAVED, NULL, NULL);
    p.work_bytes = act_plan_layout(&p, ACT_IN_WORK, NULL, NULL);
    return p;
}

// the fields of the layer whose saved block is at `block`; the rest from the work buffer
static inline ActBlock act_block_at(const ActPlan* p, char* block, const ActBlock* work) {
    ActBlock a;
    act_plan_layout(p, ACT_SAVED, block, &a);
    act_fill_from(&a, work, p->n);
    return a;
}

static inline void act_plan_log(Logger* lg, const ActPlan* p, const char* per) {
    logf_(lg, "saved activations per %s: %zu bytes (%.2f MiB):", per, p->block_bytes, p->block_bytes / 1048576.0);
    for (int i = 0; i < p->n; i++) if (p->home[i] == ACT_SAVED && p->bytes[i]) logf_(lg, " %s", p->names[i]);
    logf_(lg, "\n");
}
