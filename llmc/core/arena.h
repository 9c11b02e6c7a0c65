/*
The memory plan and the arena that carries it out (docs/design.md 4.1). Every buffer is added
to the plan by name, with its kind and its size computed from the config and the
flags, before anything is allocated; then one allocation per space (device, pinned
host) holds them all. Nothing is allocated after that. The plan is printed at start
and can be written as JSON, so tests can hold it against the formulas of
docs/memory.md.
*/
#pragma once
#include "common.h"

#define ARENA_MAX_ENTRIES 96
#define ARENA_ALIGN 256

typedef struct {
    char name[48];
    const char* kind;   // "parameters", "gradients", "optimizer", "activations", "offload", "scratch", ...
    size_t bytes;
    size_t offset;
    void* dst;          // arena_add_to: the address of the pointer that receives the buffer's address
} ArenaEntry;

typedef struct {
    const char* space;  // "device" or "host (pinned)"
    ArenaEntry entries[ARENA_MAX_ENTRIES];
    int n;
    size_t total;
    char* base;
} Arena;

static inline void arena_init(Arena* a, const char* space) { memset(a, 0, sizeof(*a)); a->space = space; }

// adds a buffer to the plan; returns its handle
static inline int arena_add(Arena* a, const char* name, const char* kind, size_t bytes) {
    if (a->base) FAIL("arena '%s': '%s' added after allocation (everything must be planned up front)", a->space, name);
    if (a->n == ARENA_MAX_ENTRIES) FAIL("arena '%s' is full: raise ARENA_MAX_ENTRIES", a->space);
    ArenaEntry* e = &a->entries[a->n];
    snprintf(e->name, sizeof(e->name), "%s", name);
    e->kind = kind;
    e->bytes = bytes;
    e->offset = a->total;
    a->total += ceil_div(bytes, ARENA_ALIGN) * ARENA_ALIGN;
    return a->n++;
}

// Adds a buffer and names the pointer that receives its address when the arena is
// allocated (NULL for an empty buffer, and untouched in a plan-only run), so that a
// trainer lists each buffer once and the plan and its pointers cannot disagree.
// dst is the address of any object pointer (floatX**, float**, int**, ...).
static inline int arena_add_to(Arena* a, const char* name, const char* kind, size_t bytes, void* dst) {
    int h = arena_add(a, name, kind, bytes);
    a->entries[h].dst = dst;
    return h;
}

// A run of buffers of one kind as a table, in the plan's order: {name, bytes, &pointer} each
// (ARENA_ADD_ALL(arena, kind, {...}, {...}, ...)), so that a model's plan reads as a table.
typedef struct { const char* name; size_t bytes; void* dst; } ArenaBuf;

static inline void arena_add_all(Arena* a, const char* kind, const ArenaBuf* b, int n) {
    for (int i = 0; i < n; i++) arena_add_to(a, b[i].name, kind, b[i].bytes, b[i].dst);
}
#define ARENA_ADD_ALL(a, kind, ...)                                                      \
    do {                                                                                 \
        const ArenaBuf arena_bufs_[] = {__VA_ARGS__};                                    \
        arena_add_all(a, kind, arena_bufs_, (int)(sizeof(arena_bufs_) / sizeof(arena_bufs_[0]))); \
    } while (0)

static inline void arena_allocate(Arena* a, void* (*alloc)(size_t)) {
    a->base = a->total ? (char*)alloc(a->total) : NULL;
    for (int i = 0; i < a->n; i++) {
        if (!a->entries[i].dst) continue;
        // through memcpy: dst points at a typed pointer (floatX*, int*, ...), which must
        // not be written through a void** (strict aliasing); all object pointers share one
        // representation on the platforms this builds for
        char* p = a->entries[i].bytes ? a->base + a->entries[i].offset : NULL;
        memcpy(a->entries[i].dst, &p, sizeof(p));
    }
}

static inline void* arena_ptr(const Arena* a, int handle) {
    if (handle < 0 || a->entries[handle].bytes == 0) return NULL;
    return a->base + a->entries[handle].offset;
}

static inline size_t arena_kind_bytes(const Arena* a, const char* kind) {
    size_t sum = 0;
    for (int i = 0; i < a->n; i++) if (strcmp(a->entries[i].kind, kind) == 0) sum += a->entries[i].bytes;
    return sum;
}

static inline void arena_print(const Arena* a, FILE* f) {
    fprintf(f, "| %-28s | %-12s | %14s | %10s |\n", a->space, "kind", "bytes", "MiB");
    fprintf(f, "|------------------------------|--------------|----------------|------------|\n");
    for (int i = 0; i < a->n; i++) {
        const ArenaEntry* e = &a->entries[i];
        if (e->bytes == 0) continue;
        fprintf(f, "| %-28s | %-12s | %14zu | %10.2f |\n", e->name, e->kind, e->bytes, e->bytes / 1048576.0);
    }
    fprintf(f, "| %-28s | %-12s | %14zu | %10.2f |\n", "total (aligned)", "", a->total, a->total / 1048576.0);
}

static inline void arena_write_json(const Arena* a, FILE* f) {
    fprintf(f, "{\"space\": \"%s\", \"total\": %zu, \"entries\": [", a->space, a->total);
    for (int i = 0; i < a->n; i++)
        fprintf(f, "%s{\"name\": \"%s\", \"kind\": \"%s\", \"bytes\": %zu}", i ? ", " : "", a->entries[i].name,
                a->entries[i].kind, a->entries[i].bytes);
    fprintf(f, "]}");
}

// The plan as one JSON object: the caller's own fields (a string of "key": value pairs,
// or "") and both spaces, for tests that hold the plan against the formulas.
static inline void plan_write_json(const char* path, const char* fields, const Arena* dev, const Arena* host) {
    // a FIFO without a reader fails at once instead of blocking; the close is checked (/dev/full)
    FILE* f = xoutput_fopen(path, "--plan-json");
    // one buffer for the whole plan, written by the checked close: a write that fails inside an
    // fprintf (a plan past stdio's 4 KiB) would leave no errno for the close to report
    char* buf = (char*)xmalloc((size_t)1 << 20);  // (glibc takes the size only with a buffer given)
    setvbuf(f, buf, _IOFBF, (size_t)1 << 20);
    fprintf(f, "{%s%s\"device\": ", fields, fields[0] ? ", " : "");
    arena_write_json(dev, f);
    fprintf(f, ", \"host\": ");
    arena_write_json(host, f);
    fprintf(f, "}\n");
    xfclose(f, path, "--plan-json");
    free(buf);
}
