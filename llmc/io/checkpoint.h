/*
Checkpoint files, whatever the model: written atomically and checked on the way in.

A checkpoint is a sequence of blocks (a header of 256 int32, then the blocks the trainer
names), followed by an 8-byte checksum over all of them. The writer goes to a temporary
name (PATH.tmp.<random>, created with O_EXCL, never through a link), which the ranks
fill at their offsets, and renames it to PATH only when everything is on disk, so a
crash or a full disk never leaves a half-written file under a checkpoint's name; a
failed write removes its temporary file and stops with a message. The reader checks the size the header implies (a truncated file is
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

// whole transfers at an offset, retried when cut short; 0, or the errno of the failure (EIO
// for an end of file where the bytes should be)
static inline int ckpt_pwrite(int fd, const void* p, size_t n, off_t at) {
    for (const char* b = (const char*)p; n;) {
        ssize_t k = pwrite(fd, b, n, at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        b += k; n -= (size_t)k; at += k;
    }
    return 0;
}
static inline int ckpt_pread(int fd, void* p, size_t n, off_t at) {
    for (char* b = (char*)p; n;) {
        ssize_t k = pread(fd, b, n, at);
        if (k < 0 && errno == EINTR) continue;
        if (k <= 0) return k < 0 ? errno : EIO;
        b += k; n -= (size_t)k; at += k;
    }
    return 0;
}

// Folds the checksum over a file's 1024-byte header and the blocks after it, reading a
// bounded chunk at a time (the fold is sequential: it cannot be combined from pieces
// written elsewhere). 0, or the errno of a failed read.
static inline int ckpt_hash_file(int fd, const size_t* block_bytes, int n_blocks, uint64_t* h) {
    size_t chunk = 1 << 22;  // a multiple of 8, as ckpt_hash needs within a block
    unsigned char* buf = (unsigned char*)xmalloc(chunk);
    int err = 0;
    off_t at = 0;
    for (int i = -1; i < n_blocks && !err; i++)
        for (size_t left = i < 0 ? 1024 : block_bytes[i]; left && !err;) {
            size_t k = left < chunk ? left : chunk;
            if ((err = ckpt_pread(fd, buf, k, at)) == 0) *h = ckpt_hash(*h, buf, k);
            at += (off_t)k; left -= k;
        }
    free(buf);
    return err;
}

// Writes NAME in the run directory, several processes at once. Rank 0 creates it under a
// temporary name only this run knows (O_EXCL | O_NOFOLLOW: llmc/core/run_dir.h) with its
// header and at its whole size; every rank then writes its own ranges of the blocks with
// pwrite on a descriptor of its own (ckpt_pwrite: llmc/train/state_checkpoint.h does); rank
// 0 last reads the file back for the checksum, appends the last block and the checksum,
// syncs and renames it to NAME. A failure removes the temporary file.
typedef struct {
    int fd;             // rank 0's descriptor of the temporary file (-1: none)
    const RunDir* rd;
    char *name, *tmp;   // heap
    long long bytes;    // the whole file, checksum included
} CkptWriter;

static inline void ckpt_writer_fail(CkptWriter* w, const char* what, int err) {
    if (w->fd >= 0) close(w->fd);
    w->fd = -1;
    unlinkat(w->rd->fd, w->tmp, 0);
    FAIL("checkpoint %s/%s: %s failed: %s (the temporary file was removed; the previous checkpoints are untouched; "
         "hint: disk full, or over a file-size limit (ulimit -f)?)", w->rd->path, w->name, what, strerror(err));
}

// rank 0: the temporary file, its 1024-byte header written and its size set to bytes (a
// sparse file: the ranks fill it)
static inline void ckpt_writer_open(CkptWriter* w, const RunDir* rd, const char* name, const int header[256], long long bytes) {
    memset(w, 0, sizeof(*w));
    w->rd = rd;
    w->name = str_printf("%s", name);
    w->bytes = bytes;
    w->fd = run_dir_create_tmp(rd, name, &w->tmp);
    if (w->fd < 0) FAIL("checkpoint: cannot create a temporary file for %s/%s: %s", rd->path, name, strerror(errno));
    int err = ckpt_pwrite(w->fd, header, 1024, 0);
    if (err) ckpt_writer_fail(w, "write", err);
    if (ftruncate(w->fd, (off_t)bytes) != 0) ckpt_writer_fail(w, "write", errno);  // (a file-size limit shows here)
}

// rank 0, once every rank's writes are on disk: the checksum over the header and the blocks
// of block_bytes as the file holds them, the last block `last` after them, the
// checksum, then on disk under its name (the directory synced too, so the rename
// survives a crash of the machine). The descriptor is opened afresh: on a network file
// system an open is what makes the other hosts' writes visible.
static inline void ckpt_writer_close(CkptWriter* w, const size_t* block_bytes, int n_blocks, const void* last, size_t last_bytes) {
    if (close(w->fd) != 0) { w->fd = -1; ckpt_writer_fail(w, "close", errno); }
    w->fd = openat(w->rd->fd, w->tmp, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (w->fd < 0) ckpt_writer_fail(w, "reopening the temporary file", errno);
    uint64_t h = CKPT_HASH_INIT;
    int err = ckpt_hash_file(w->fd, block_bytes, n_blocks, &h);
    if (err) ckpt_writer_fail(w, "reading back for the checksum", err);
    h = ckpt_hash(h, last, last_bytes);
    off_t at = (off_t)(w->bytes - 8 - (long long)last_bytes);
    if ((err = ckpt_pwrite(w->fd, last, last_bytes, at)) || (err = ckpt_pwrite(w->fd, &h, 8, at + (off_t)last_bytes)))
        ckpt_writer_fail(w, "write", err);
    if (fsync(w->fd) != 0) ckpt_writer_fail(w, "fsync", errno);
    if (close(w->fd) != 0) { w->fd = -1; ckpt_writer_fail(w, "close", errno); }
    w->fd = -1;
    if (renameat(w->rd->fd, w->tmp, w->rd->fd, w->name) != 0) ckpt_writer_fail(w, "rename", errno);
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
    uint64_t h = CKPT_HASH_INIT, stored = 0;
    int err = ckpt_hash_file(fileno(f), block_bytes, n_blocks, &h);
    if (!err) err = ckpt_pread(fileno(f), &stored, 8, (off_t)(want - 8));
    fclose(f);
    if (err) { snprintf(why, sizeof(why), "%s: read failed: %s", path, strerror(err)); return why; }
    if (stored != h) {
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
