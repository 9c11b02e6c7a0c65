/*
Checkpoint files, whatever the model: written atomically and checked on the way in.

A checkpoint is a sequence of blocks (a header of 256 int32, then the blocks the trainer
names), followed by an 8-byte checksum over all of them. The writer goes to a temporary
name (PATH.tmp.<random>, created with O_EXCL, never through a link) and renames it to
PATH only when everything is on disk, so a crash or a full disk never leaves a
half-written file under a checkpoint's name; a failed write removes its temporary file and
stops with a message. The reader checks the size the header implies (a truncated file is
rejected) and the checksum (a file with flipped bytes is rejected) before any of it is
used.

The checksum: per block, 64-bit words (the tail zero-padded) folded as
h = (h ^ word) * 0x100000001b3, starting from 0xcbf29ce484222325. Any change of a
single word changes h (xor and the odd multiply are bijections).
*/
#pragma once
#include "../core/common.h"
#include "../core/logger.h"
#include "../core/run_dir.h"
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

// Writes NAME in the run directory: to a temporary name only this process knows (created
// with O_EXCL | O_NOFOLLOW: llmc/core/run_dir.h), renamed to NAME when whole and synced.
typedef struct {
    FILE* f;
    const RunDir* rd;
    char *name, *tmp;  // heap
    uint64_t hash;
} CkptWriter;

static inline void ckpt_write_fail(CkptWriter* w, const char* what) {
    int e = errno;
    if (w->f) fclose(w->f);
    w->f = NULL;
    unlinkat(w->rd->fd, w->tmp, 0);
    FAIL("checkpoint %s/%s: %s failed: %s (the temporary file was removed; the previous checkpoints are untouched; "
         "hint: disk full, or over a file-size limit (ulimit -f)?)", w->rd->path, w->name, what, strerror(e));
}

static inline void ckpt_writer_open(CkptWriter* w, const RunDir* rd, const char* name) {
    memset(w, 0, sizeof(*w));
    w->rd = rd;
    w->name = str_printf("%s", name);
    w->hash = CKPT_HASH_INIT;
    int fd = run_dir_create_tmp(rd, name, &w->tmp);
    if (fd < 0) FAIL("checkpoint: cannot create a temporary file for %s/%s: %s", rd->path, name, strerror(errno));
    w->f = fdopen(fd, "wb");
    if (!w->f) FAIL("checkpoint: cannot open %s/%s: %s", rd->path, w->tmp, strerror(errno));
}

// one block; write it in one call, or in pieces of multiples of 8 bytes but the last
static inline void ckpt_write(CkptWriter* w, const void* p, size_t bytes) {
    if (bytes && fwrite(p, 1, bytes, w->f) != bytes) ckpt_write_fail(w, "write");
    w->hash = ckpt_hash(w->hash, p, bytes);
}

// the checksum, then on disk under its name (the directory synced too, so the rename
// survives a crash of the machine)
static inline void ckpt_writer_close(CkptWriter* w) {
    if (fwrite(&w->hash, 8, 1, w->f) != 1) ckpt_write_fail(w, "write");
    if (fflush(w->f) != 0) ckpt_write_fail(w, "flush");
    if (fsync(fileno(w->f)) != 0) ckpt_write_fail(w, "fsync");
    if (fclose(w->f) != 0) { w->f = NULL; ckpt_write_fail(w, "close"); }
    w->f = NULL;
    if (renameat(w->rd->fd, w->tmp, w->rd->fd, w->name) != 0) ckpt_write_fail(w, "rename");
    fsync(w->rd->fd);
    free(w->name); free(w->tmp);
    w->name = w->tmp = NULL;
}

// NULL, or why path cannot be a checkpoint file before anything is read: a directory
// (a run directory given to --resume, say) is named as one, not as a truncated file, and
// anything else that is not a regular file (a FIFO named ckpt_000003.bin, which an open
// would wait on forever) is named for what it is (--resume auto refuses the run on it before
// this: llmc/train/run_open.h)
static inline const char* ckpt_path_problem(const char* path) {
    static char why[PATH_MAX + 512];  // (a path is at most PATH_MAX: no message is cut)
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
    static char why[PATH_MAX + 512];  // (a path is at most PATH_MAX: no message is cut)
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

// whether name is a checkpoint's, ckpt_NNNNNN.bin (six digits at least: step 1234567 is
// ckpt_1234567.bin); its step in *step
static inline int ckpt_name_step(const char* name, int* step) {
    char expect[64];
    if (sscanf(name, "ckpt_%d.bin", step) != 1 || *step < 0) return 0;
    snprintf(expect, sizeof(expect), "ckpt_%06d.bin", *step);
    return strcmp(expect, name) == 0;
}

static inline int ckpt_step_desc(const void* a, const void* b) {
    int x = *(const int*)a, y = *(const int*)b;
    return x < y ? 1 : x > y ? -1 : 0;
}

// Every checkpoint ckpt_NNNNNN.bin of a run directory, however many, newest (highest step)
// first; temporary files are never listed. Returns how many; *steps (heap) holds them.
static inline int ckpt_list(const RunDir* rd, int** steps) {
    int fd = dup(rd->fd);
    DIR* d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) FAIL("cannot list the run directory %s: %s", rd->path, strerror(errno));
    rewinddir(d);
    int n = 0, cap = 64;
    *steps = (int*)xmalloc((size_t)cap * sizeof(int));
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        int step;
        if (!ckpt_name_step(e->d_name, &step)) continue;
        if (n == cap) {
            cap *= 2;
            *steps = (int*)realloc(*steps, (size_t)cap * sizeof(int));
            if (!*steps) FAIL("host realloc for %d checkpoint names failed", cap);
        }
        (*steps)[n++] = step;
    }
    closedir(d);
    qsort(*steps, (size_t)n, sizeof(int), ckpt_step_desc);
    return n;
}
