/*
Checkpoint files, whatever the model: written atomically and checked on the way in.

A checkpoint is a sequence of blocks (a header of 256 int32, then the blocks the
trainer names), followed by an 8-byte checksum over all of them. The writer goes to
PATH.tmp and renames it to PATH only when everything is on disk, so a crash or a full
disk never leaves a half-written file under a checkpoint's name; a failed write
removes its temporary file and stops with a message. The reader checks the size the
header implies (a truncated file is rejected) and the checksum (a file with flipped
bytes is rejected) before any of it is used.

The checksum: per block, 64-bit words (the tail zero-padded) folded as
h = (h ^ word) * 0x100000001b3, starting from 0xcbf29ce484222325. Any change of a
single word changes h (xor and the odd multiply are bijections).
*/
#pragma once
#include "../core/common.h"
#include "../core/logger.h"
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

#define CKPT_HASH_INIT 0xcbf29ce484222325ull

// chunks within a block must be multiples of 8 bytes, except the block's last
static inline uint64_t ckpt_hash(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    size_t i = 0;
    for (; i + 8 <= n; i += 8) { uint64_t w; memcpy(&w, b + i, 8); h = (h ^ w) * 0x100000001b3ull; }
    if (i < n) { uint64_t w = 0; memcpy(&w, b + i, n - i); h = (h ^ w) * 0x100000001b3ull; }
    return h;
}

typedef struct {
    FILE* f;
    char path[1100], tmp[1200];
    uint64_t hash;
} CkptWriter;

static inline void ckpt_write_fail(CkptWriter* w, const char* what) {
    int e = errno;
    if (w->f) fclose(w->f);
    w->f = NULL;
    unlink(w->tmp);
    FAIL("checkpoint %s: %s failed: %s (the temporary file was removed; the previous checkpoints are untouched; "
         "hint: disk full, or over a file-size limit (ulimit -f)?)", w->path, what, strerror(e));
}

static inline void ckpt_writer_open(CkptWriter* w, const char* path) {
    memset(w, 0, sizeof(*w));
    snprintf(w->path, sizeof(w->path), "%s", path);
    snprintf(w->tmp, sizeof(w->tmp), "%s.tmp", path);
    w->hash = CKPT_HASH_INIT;
    w->f = fopen(w->tmp, "wb");
    if (!w->f) FAIL("checkpoint: cannot create %s: %s", w->tmp, strerror(errno));
}

// one block; write it in one call, or in pieces of multiples of 8 bytes but the last
static inline void ckpt_write(CkptWriter* w, const void* p, size_t bytes) {
    if (bytes && fwrite(p, 1, bytes, w->f) != bytes) ckpt_write_fail(w, "write");
    w->hash = ckpt_hash(w->hash, p, bytes);
}

static inline void ckpt_writer_close(CkptWriter* w) {
    if (fwrite(&w->hash, 8, 1, w->f) != 1) ckpt_write_fail(w, "write");
    if (fflush(w->f) != 0) ckpt_write_fail(w, "flush");
    if (fsync(fileno(w->f)) != 0) ckpt_write_fail(w, "fsync");
    if (fclose(w->f) != 0) { w->f = NULL; ckpt_write_fail(w, "close"); }
    w->f = NULL;
    if (rename(w->tmp, w->path) != 0) ckpt_write_fail(w, "rename");
}

// NULL, or why path cannot be a checkpoint file before anything is read: a directory
// (a run directory given to --resume, say) is named as one, not as a truncated file, and
// anything else that is not a regular file (a FIFO named ckpt_000003.bin, which an open
// would wait on forever) is named for what it is, so --resume auto skips it with a warning
static inline const char* ckpt_path_problem(const char* path) {
    static char why[1300];
    struct stat st;
    if (stat(path, &st) == 0 && S_ISDIR(st.st_mode)) {
        snprintf(why, sizeof(why), "%s is a directory, not a checkpoint file (give its ckpt_NNNNNN.bin, or --resume auto "
                 "with --run-dir %s)", path, path);
        return why;
    }
    if (stat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
        snprintf(why, sizeof(why), "%s is %s, not a regular file (a checkpoint is one)", path, file_kind(st.st_mode));
        return why;
    }
    return NULL;
}

// The most parameters a checkpoint header may claim (2^40): past it a header is malformed,
// and the sizes it implies would wrap 64 bits.
#define CKPT_MAX_PARAMS (1ull << 40)

// Checks a checkpoint whose blocks (after the 1024-byte header) have the given sizes:
// returns NULL when it is whole and its checksum holds, else the reason.
static inline const char* ckpt_verify(const char* path, const size_t* block_bytes, int n_blocks) {
    static char why[1400];
    FILE* f = input_fopen_try(path, why, sizeof(why));  // a regular file, never a blocking open
    if (!f) return why;
    fseek(f, 0, SEEK_END);
    long long have = ftell(f);
    fseek(f, 0, SEEK_SET);
    long long want = 1024 + 8;
    for (int i = 0; i < n_blocks; i++) want += (long long)block_bytes[i];
    if (have != want) {
        fclose(f);
        snprintf(why, sizeof(why), "%s has %lld bytes but its header implies %lld: truncated or not a complete "
                 "checkpoint", path, have, want);
        return why;
    }
    size_t chunk = 1 << 24;
    unsigned char* buf = (unsigned char*)xmalloc(chunk);
    uint64_t h = CKPT_HASH_INIT;
    for (int i = -1; i < n_blocks; i++) {
        size_t left = i < 0 ? 1024 : block_bytes[i];
        while (left) {
            size_t k = left < chunk ? left : chunk;
            if (fread(buf, 1, k, f) != k) { free(buf); fclose(f); snprintf(why, sizeof(why), "%s: read failed", path); return why; }
            h = ckpt_hash(h, buf, k);
            left -= k;
        }
    }
    uint64_t stored = 0;
    int ok = fread(&stored, 8, 1, f) == 1;
    free(buf);
    fclose(f);
    if (!ok || stored != h) {
        snprintf(why, sizeof(why), "%s: checksum mismatch (stored %016llx, computed %016llx): the file is corrupted",
                 path, (unsigned long long)stored, (unsigned long long)h);
        return why;
    }
    return NULL;
}

// The checkpoints ckpt_NNNNNN.bin of a run directory, newest (highest step) first;
// temporary files are never listed. Returns how many (at most max).
static inline int ckpt_list(const char* dir, int* steps, int max) {
    DIR* d = opendir(dir);
    if (!d) return 0;
    int n = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL && n < max) {
        int step; char expect[64];
        if (sscanf(e->d_name, "ckpt_%d.bin", &step) != 1 || step < 0) continue;
        snprintf(expect, sizeof(expect), "ckpt_%06d.bin", step);
        if (strcmp(expect, e->d_name) == 0)
            steps[n++] = step;
    }
    closedir(d);
    for (int i = 1; i < n; i++)  // insertion sort, descending
        for (int j = i; j > 0 && steps[j] > steps[j - 1]; j--) { int t = steps[j]; steps[j] = steps[j - 1]; steps[j - 1] = t; }
    return n;
}

// For --resume auto: the newest checkpoint of the run directory that check() accepts
// (check returns NULL, or why the file cannot be used: truncated, corrupted, another
// trainer's). Rejected files are named in a warning and skipped. Returns 0 when there is
// none. A good checkpoint of another model is taken and then refused by the reader with
// the dimensions that differ: a run directory is not silently started over.
static inline int ckpt_find_latest(const char* dir, const char* (*check)(const char* path, void* ctx), void* ctx,
                                   Logger* lg, char* out, size_t n) {
    int steps[4096];
    int count = ckpt_list(dir, steps, 4096);
    for (int i = 0; i < count; i++) {
        snprintf(out, n, "%s/ckpt_%06d.bin", dir, steps[i]);
        const char* why = check(out, ctx);
        if (!why) return 1;
        logf_(lg, "warning: --resume auto skips %s\n", why);
    }
    out[0] = 0;
    return 0;
}
