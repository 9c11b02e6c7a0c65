/*
Token shard dataloader (header-only, plain C; compiles as C++ with g++ and with nvcc).

Shard format (docs/design.md 5.1, llm.c's): a header of 256 int32 (little-endian):
  [0] magic 20240520, [1] version 1, [2] number of tokens, then uint16 tokens; or
  [0] magic 20240801, [1] version 7, [2] number of tokens, then uint32 tokens.
Shards of both kinds may be mixed under one pattern.

All shards matching the glob pattern (sorted by name) are opened at init (one file
descriptor each, held until dataloader_free) and validated (magic/version, header token
count vs file size, at least T+1 tokens). Each batch row is a window of T+1 consecutive
tokens of one shard, read with pread: inputs = window[0..T-1], targets = window[1..T].

Why pread and not mmap: a mapped shard that shrinks while training reads it (truncated,
rewritten in place by a data job, a network file system that drops it) kills the process
with SIGBUS at the next touch of a page past the new end: no message, no file named. A
SIGBUS handler around the mapped reads (sigsetjmp/siglongjmp) could catch it, but it is
process-wide state that collides with the handlers MPI and CUDA install, it is not
thread-safe, and siglongjmp out of C++ skips destructors. pread turns the same event
into a short read, an ordinary error naming the file. Its cost: a row is one small
window (T+1 tokens, 2-4 KiB for T = 1024), one system call that copies it from the page
cache. Measured on a shared 2-core x86 VM (100 MB shard in the page cache, random
windows, B = 64, T = 1024), two sessions: 1.3-1.6 us a row both ways in one, 2.1-2.4
against 1.2-1.9 us from a warm mapping in the other; at worst under 0.1 ms a batch,
nothing beside a training step. dataloader_validate_vocab reads the shard in 1 MiB
pieces: 37-55 ms per 100 MB both ways, once at start-up.

Sequential mode (random_windows = 0, used for validation):
  the windows of a shard are [j*T, j*T+T] for j = 0 .. (n-1)/T - 1 (non-overlapping
  inputs; the last target of a window is the first input of the next). Windows are
  numbered globally over the shards in order: g = 0 .. num_windows-1. Rank r of world w
  reads the windows g = r, r+w, r+2w, ... (disjoint between ranks), B per batch, and
  wraps around to its first window after its last one. With world = 1 the batches
  cover every shard's tokens in order (the tail of fewer than T+1 tokens of each
  shard is never read).

Random mode (random_windows = 1, used for training):
  every shard is cut into world contiguous regions; rank r owns region r of every
  shard, [floor(n*r/w), floor(n*(r+1)/w)), so ranks read disjoint tokens. Each row is
  a window whose start is drawn uniformly over all start positions of the rank's
  regions that keep the whole window inside the region (so shards are weighted by
  size). The RNG is splitmix64 seeded from (seed, rank); the draw is unbiased
  (rejection sampling). Same seed, rank and world -> same batches.

Checkpointing: dataloader_get_state/set_state write/read DATALOADER_STATE_SIZE bytes,
16 little-endian uint64: magic "LLMCDL01", state version, B, T, rank, world,
random_windows, seed, num_shards, num_tokens, rng state, next window index (sequential
mode, within this rank's list), batches served, and 3 reserved zeros. set_state checks
that the loader was initialized with the same B, T, rank, world, mode, seed and data
(number of shards and tokens) and exits with a clear message otherwise.

Errors (bad pattern, bad/truncated/short shard, token >= vocab, a shard that shrank or
failed to read after init) print a message naming the file and the problem on stderr and
exit(1).
*/
#ifndef LLMC_DATALOADER_H
#define LLMC_DATALOADER_H

#include <stdio.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <errno.h>
#include <glob.h>
#include <fcntl.h>
#include <unistd.h>
#include <sys/stat.h>
#include "../core/term.h"
#include "../core/files.h"

#define DATALOADER_HEADER_INTS 256
#define DATALOADER_HEADER_BYTES (DATALOADER_HEADER_INTS * 4)
#define DATALOADER_MAGIC_U16 20240520
#define DATALOADER_VERSION_U16 1
#define DATALOADER_MAGIC_U32 20240801
#define DATALOADER_VERSION_U32 7
#define DATALOADER_STATE_WORDS 16
#define DATALOADER_STATE_SIZE (DATALOADER_STATE_WORDS * 8)
#define DATALOADER_STATE_MAGIC 0x31304C44434D4C4CULL /* "LLMCDL01" as little-endian bytes */
#define DATALOADER_STATE_VERSION 1

typedef struct {
    char* path;             // file name (owned)
    int fd;                 // open for reading until dataloader_free (-1: closed)
    size_t file_bytes;      // the size at init: header + num_tokens * token_bytes
    size_t num_tokens;
    int token_bytes;        // 2 (version 1) or 4 (version 7)
    // sequential mode: windows of this shard are global windows [win_begin, win_begin + num_windows)
    size_t num_windows;
    size_t win_begin;
    // random mode: this rank's region and its number of window starts
    size_t region_lo;
    size_t region_starts;   // starts in [region_lo, region_lo + region_starts)
    size_t start_begin;     // prefix sum of region_starts over the earlier shards
} DataLoaderShard;

typedef struct {
    // configuration
    int B, T, rank, world, random_windows;
    unsigned long long seed;
    // data
    int num_shards;
    DataLoaderShard* shards;
    size_t num_tokens;          // total tokens over all shards
    size_t num_windows;         // sequential: windows over all shards (all ranks)
    size_t rank_windows;        // sequential: windows of this rank per epoch
    size_t rank_starts;         // random: window starts available to this rank
    // state
    unsigned long long rng_state;
    size_t next_window;         // sequential: index into this rank's window list
    size_t batches;             // batches served since init/reset
    // output of the last dataloader_next_batch
    int* inputs;                // [B*T]
    int* targets;               // [B*T]
    int* row_shard;             // [B] shard index of each row's window (for tests/debugging)
    size_t* row_offset;         // [B] token offset of each row's window in its shard
    unsigned char* window;      // [(T+1) * 4] the raw bytes of one row's window
} DataLoader;

// ----------------------------------------------------------------------------
// helpers

// the message names the user's files: escaped (llmc/core/term.h)
static inline void dataloader_fail_(const char* fmt, ...) {
    char msg[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    fprintf(stderr, "dataloader: error: ");
    term_fputs(stderr, msg);
    fprintf(stderr, "\n");
    fflush(stderr);
    exit(1);
}

static inline void* dataloader_malloc_(size_t bytes) {
    void* p = malloc(bytes > 0 ? bytes : 1);
    if (p == NULL) {
        fprintf(stderr, "dataloader: error: out of memory allocating %zu bytes\n", bytes);
        exit(1);
    }
    return p;
}

static inline unsigned long long dataloader_splitmix64_(unsigned long long* s) {
    unsigned long long z = (*s += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
}

// uniform in [0, n), n > 0, unbiased
static inline unsigned long long dataloader_rand_below_(unsigned long long* s, unsigned long long n) {
    unsigned long long threshold = (0ULL - n) % n; // 2^64 mod n: reject the first values
    unsigned long long r;
    do { r = dataloader_splitmix64_(s); } while (r < threshold);
    return r % n;
}

static inline unsigned long long dataloader_initial_rng_(unsigned long long seed, int rank) {
    unsigned long long s = seed ^ 0x243F6A8885A308D3ULL;
    unsigned long long a = dataloader_splitmix64_(&s);
    unsigned long long t = (unsigned long long)rank * 0xD1B54A32D192ED03ULL + a;
    return dataloader_splitmix64_(&t);
}

// Reads bytes [pos, pos + n) of the shard into buf, or exits with a message naming the
// file: a short read means the file shrank after init (it was validated whole then).
static inline void dataloader_pread_(const DataLoaderShard* sh, void* buf, size_t n, size_t pos) {
    size_t done = 0;
    while (done < n) {
        ssize_t r = pread(sh->fd, (char*)buf + done, n - done, (off_t)(pos + done));
        if (r < 0 && errno == EINTR) { continue; }
        if (r < 0) {
            dataloader_fail_("reading shard %s failed (bytes %zu..%zu): %s", sh->path, pos, pos + n, strerror(errno));
        }
        if (r == 0) {
            struct stat st;
            long long now = fstat(sh->fd, &st) == 0 ? (long long)st.st_size : -1;
            dataloader_fail_("shard %s ended early: reading bytes %zu..%zu, but the file now has %lld bytes (it had "
                             "%zu when training started): truncated or rewritten while training read it",
                             sh->path, pos, pos + n, now, sh->file_bytes);
        }
        done += (size_t)r;
    }
}

// opens and validates one shard; T+1 tokens at least
static inline void dataloader_open_shard_(DataLoaderShard* sh, const char* path, int T) {
    char buf[256];
    memset(sh, 0, sizeof(*sh));
    sh->fd = -1;
    size_t plen = strlen(path);
    sh->path = (char*)dataloader_malloc_(plen + 1);
    memcpy(sh->path, path, plen + 1);
    // a regular file, opened without blocking: a FIFO is refused, not waited on (llmc/core/files.h)
    char why[1400];
    int fd = input_open_try(path, why, sizeof(why));
    if (fd < 0) {
        dataloader_fail_("shard: %s%s", why,
                         errno == EMFILE ? " (every shard stays open while training: raise ulimit -n)" : "");
    }
    sh->fd = fd;
    struct stat st;
    if (fstat(fd, &st) != 0) { dataloader_fail_("cannot stat shard %s: %s", path, strerror(errno)); }
    size_t bytes = (size_t)st.st_size;
    if (bytes < DATALOADER_HEADER_BYTES) {
        snprintf(buf, sizeof(buf), "%zu bytes, smaller than the %d-byte header (truncated or not a shard)",
                 bytes, DATALOADER_HEADER_BYTES);
        dataloader_fail_("bad shard %s: %s", path, buf);
    }
    sh->file_bytes = bytes;
    int32_t h[DATALOADER_HEADER_INTS];
    dataloader_pread_(sh, h, DATALOADER_HEADER_BYTES, 0);
    int magic = h[0], version = h[1];
    if (magic == DATALOADER_MAGIC_U16) {
        if (version != DATALOADER_VERSION_U16) {
            snprintf(buf, sizeof(buf), "unsupported version %d for magic %d (expected %d)",
                     version, magic, DATALOADER_VERSION_U16);
            dataloader_fail_("bad shard %s: %s", path, buf);
        }
        sh->token_bytes = 2;
    } else if (magic == DATALOADER_MAGIC_U32) {
        if (version != DATALOADER_VERSION_U32) {
            snprintf(buf, sizeof(buf), "unsupported version %d for magic %d (expected %d)",
                     version, magic, DATALOADER_VERSION_U32);
            dataloader_fail_("bad shard %s: %s", path, buf);
        }
        sh->token_bytes = 4;
    } else {
        snprintf(buf, sizeof(buf), "bad magic number %d (expected %d for uint16 or %d for uint32 tokens)",
                 magic, DATALOADER_MAGIC_U16, DATALOADER_MAGIC_U32);
        dataloader_fail_("bad shard %s: %s", path, buf);
    }
    if (h[2] < 0) {
        snprintf(buf, sizeof(buf), "negative token count %d in the header", h[2]);
        dataloader_fail_("bad shard %s: %s", path, buf);
    }
    size_t n = (size_t)h[2];
    size_t expect = DATALOADER_HEADER_BYTES + n * (size_t)sh->token_bytes;
    if (bytes < expect) {
        snprintf(buf, sizeof(buf), "truncated: header says %zu tokens (%zu bytes) but the file has %zu bytes",
                 n, expect, bytes);
        dataloader_fail_("bad shard %s: %s", path, buf);
    }
    if (bytes > expect) {
        snprintf(buf, sizeof(buf), "size mismatch: header says %zu tokens (%zu bytes) but the file has %zu bytes",
                 n, expect, bytes);
        dataloader_fail_("bad shard %s: %s", path, buf);
    }
    if (n < (size_t)T + 1) {
        snprintf(buf, sizeof(buf), "too short: %zu tokens, shorter than T+1 = %d", n, T + 1);
        dataloader_fail_("bad shard %s: %s", path, buf);
    }
    sh->num_tokens = n;
}

// fills batch row b with the window starting at token off of shard s
static inline void dataloader_fill_row_(DataLoader* dl, int b, int s, size_t off) {
    const DataLoaderShard* sh = &dl->shards[s];
    int T = dl->T;
    int* in = dl->inputs + (size_t)b * T;
    int* tg = dl->targets + (size_t)b * T;
    size_t tb = (size_t)sh->token_bytes;
    dataloader_pread_(sh, dl->window, ((size_t)T + 1) * tb, DATALOADER_HEADER_BYTES + off * tb);
    if (tb == 2) {
        const uint16_t* p = (const uint16_t*)dl->window;
        for (int t = 0; t < T; t++) { in[t] = (int)p[t]; tg[t] = (int)p[t + 1]; }
    } else {
        const uint32_t* p = (const uint32_t*)dl->window;
        for (int t = 0; t < T; t++) { in[t] = (int)p[t]; tg[t] = (int)p[t + 1]; }
    }
    dl->row_shard[b] = s;
    dl->row_offset[b] = off;
}

// ----------------------------------------------------------------------------
// API

static inline void dataloader_reset(DataLoader* dl) {
    dl->rng_state = dataloader_initial_rng_(dl->seed, dl->rank);
    dl->next_window = 0;
    dl->batches = 0;
}

// The same shards on another data order: the loader dataloader_init makes with this seed,
// at its first batch.
static inline void dataloader_reseed(DataLoader* dl, unsigned long long seed) {
    dl->seed = seed;
    dataloader_reset(dl);
}

static inline void dataloader_init(DataLoader* dl, const char* pattern, int B, int T, int rank, int world,
                                   int random_windows, unsigned long long seed) {
    char buf[512];
    memset(dl, 0, sizeof(*dl));
    if (pattern == NULL || pattern[0] == '\0') { dataloader_fail_("empty shard pattern"); }
    if (B <= 0 || T <= 0 || world <= 0 || rank < 0 || rank >= world) {
        snprintf(buf, sizeof(buf), "B=%d T=%d rank=%d world=%d (need B,T >= 1 and 0 <= rank < world)",
                 B, T, rank, world);
        dataloader_fail_("invalid arguments for pattern %s: %s", pattern, buf);
    }
    dl->B = B; dl->T = T; dl->rank = rank; dl->world = world;
    dl->random_windows = random_windows ? 1 : 0;
    dl->seed = seed;

    glob_t g;
    memset(&g, 0, sizeof(g));
    int gr = glob(pattern, 0, NULL, &g);
    if (gr == GLOB_NOMATCH || (gr == 0 && g.gl_pathc == 0)) {
        globfree(&g);
        dataloader_fail_("no files match pattern %s (run data/prepare_tinystories.py to make shards?)",
                         pattern);
    }
    if (gr != 0) {
        globfree(&g);
        dataloader_fail_("glob failed for pattern %s", pattern);
    }
    dl->num_shards = (int)g.gl_pathc;
    dl->shards = (DataLoaderShard*)dataloader_malloc_(sizeof(DataLoaderShard) * g.gl_pathc);
    for (size_t i = 0; i < g.gl_pathc; i++) { // glob sorts the names
        dataloader_open_shard_(&dl->shards[i], g.gl_pathv[i], T);
    }
    globfree(&g);

    size_t win = 0, starts = 0, tokens = 0;
    for (int s = 0; s < dl->num_shards; s++) {
        DataLoaderShard* sh = &dl->shards[s];
        size_t n = sh->num_tokens;
        tokens += n;
        sh->num_windows = (n - 1) / (size_t)T;
        sh->win_begin = win;
        win += sh->num_windows;
        size_t lo = (size_t)((unsigned long long)n * (unsigned long long)rank / (unsigned long long)world);
        size_t hi = (size_t)((unsigned long long)n * (unsigned long long)(rank + 1) / (unsigned long long)world);
        sh->region_lo = lo;
        sh->region_starts = (hi - lo > (size_t)T) ? (hi - lo - (size_t)T) : 0;
        sh->start_begin = starts;
        starts += sh->region_starts;
    }
    dl->num_tokens = tokens;
    dl->num_windows = win;
    dl->rank_windows = (win > (size_t)rank) ? (win - (size_t)rank + (size_t)world - 1) / (size_t)world : 0;
    dl->rank_starts = starts;
    if (!dl->random_windows && dl->rank_windows == 0) {
        snprintf(buf, sizeof(buf), "%zu windows of T+1 = %d tokens in all, none left for rank %d of %d",
                 win, T + 1, rank, world);
        dataloader_fail_("too little data for pattern %s: %s", pattern, buf);
    }
    if (dl->random_windows && starts == 0) {
        snprintf(buf, sizeof(buf), "rank %d of %d owns 1/%d of each shard, shorter than T+1 = %d tokens in every shard",
                 rank, world, world, T + 1);
        dataloader_fail_("too little data for pattern %s: %s", pattern, buf);
    }
    dl->inputs = (int*)dataloader_malloc_(sizeof(int) * (size_t)B * (size_t)T);
    dl->targets = (int*)dataloader_malloc_(sizeof(int) * (size_t)B * (size_t)T);
    dl->row_shard = (int*)dataloader_malloc_(sizeof(int) * (size_t)B);
    dl->row_offset = (size_t*)dataloader_malloc_(sizeof(size_t) * (size_t)B);
    dl->window = (unsigned char*)dataloader_malloc_(((size_t)T + 1) * 4);
    dataloader_reset(dl);
}

// shard index whose [begin, begin + count) range holds x (binary search over a prefix sum)
static inline int dataloader_find_shard_(const DataLoader* dl, size_t x, int by_starts) {
    int lo = 0, hi = dl->num_shards - 1;
    while (lo < hi) {
        int mid = (lo + hi + 1) / 2;
        size_t begin = by_starts ? dl->shards[mid].start_begin : dl->shards[mid].win_begin;
        if (begin <= x) { lo = mid; } else { hi = mid - 1; }
    }
    // skip shards contributing nothing (equal begins): move forward to the one that holds x
    while (lo < dl->num_shards - 1) {
        const DataLoaderShard* sh = &dl->shards[lo];
        size_t begin = by_starts ? sh->start_begin : sh->win_begin;
        size_t count = by_starts ? sh->region_starts : sh->num_windows;
        if (x < begin + count) { break; }
        lo++;
    }
    return lo;
}

static inline void dataloader_next_batch(DataLoader* dl) {
    for (int b = 0; b < dl->B; b++) {
        if (dl->random_windows) {
            size_t x = (size_t)dataloader_rand_below_(&dl->rng_state, (unsigned long long)dl->rank_starts);
            int s = dataloader_find_shard_(dl, x, 1);
            const DataLoaderShard* sh = &dl->shards[s];
            dataloader_fill_row_(dl, b, s, sh->region_lo + (x - sh->start_begin));
        } else {
            if (dl->next_window >= dl->rank_windows) { dl->next_window = 0; } // wrap around
            size_t gw = (size_t)dl->rank + dl->next_window * (size_t)dl->world;
            int s = dataloader_find_shard_(dl, gw, 0);
            const DataLoaderShard* sh = &dl->shards[s];
            dataloader_fill_row_(dl, b, s, (gw - sh->win_begin) * (size_t)dl->T);
            dl->next_window++;
        }
    }
    dl->batches++;
}

static inline void dataloader_validate_vocab(DataLoader* dl, int V) {
    const size_t chunk_tokens = 1 << 18;  // 1 MiB of uint32 tokens per read
    uint32_t* buf = NULL;
    for (int s = 0; s < dl->num_shards; s++) {
        const DataLoaderShard* sh = &dl->shards[s];
        if (sh->token_bytes == 2 && V > 65535) { continue; } // every uint16 fits
        if (!buf) { buf = (uint32_t*)dataloader_malloc_(chunk_tokens * 4); }
        for (size_t i0 = 0; i0 < sh->num_tokens; i0 += chunk_tokens) {
            size_t k = sh->num_tokens - i0 < chunk_tokens ? sh->num_tokens - i0 : chunk_tokens;
            dataloader_pread_(sh, buf, k * (size_t)sh->token_bytes,
                              DATALOADER_HEADER_BYTES + i0 * (size_t)sh->token_bytes);
            unsigned int top = 0;  // the largest id of the piece (a loop the compiler vectorizes), then the first bad one
            if (sh->token_bytes == 2) {
                for (size_t j = 0; j < k; j++) { unsigned int id = ((const uint16_t*)buf)[j]; top = id > top ? id : top; }
            } else {
                for (size_t j = 0; j < k; j++) { top = buf[j] > top ? buf[j] : top; }
            }
            if (V > 0 && top < (unsigned int)V) { continue; }
            for (size_t j = 0; j < k; j++) {
                unsigned int id = sh->token_bytes == 2 ? ((const uint16_t*)buf)[j] : buf[j];
                if (V <= 0 || id >= (unsigned int)V) {
                    char msg[256];
                    snprintf(msg, sizeof(msg), "token id %u at token position %zu is out of range for vocab size %d",
                             id, i0 + j, V);
                    dataloader_fail_("bad shard %s: %s", sh->path, msg);
                }
            }
        }
    }
    free(buf);
}

static inline size_t dataloader_state_size(void) { return DATALOADER_STATE_SIZE; }

static inline void dataloader_put_u64_(unsigned char* p, unsigned long long v) {
    for (int i = 0; i < 8; i++) { p[i] = (unsigned char)(v >> (8 * i)); }
}

static inline unsigned long long dataloader_get_u64_(const unsigned char* p) {
    unsigned long long v = 0;
    for (int i = 0; i < 8; i++) { v |= (unsigned long long)p[i] << (8 * i); }
    return v;
}

static inline void dataloader_get_state(const DataLoader* dl, void* out) {
    unsigned long long w[DATALOADER_STATE_WORDS];
    memset(w, 0, sizeof(w));
    w[0] = DATALOADER_STATE_MAGIC;
    w[1] = DATALOADER_STATE_VERSION;
    w[2] = (unsigned long long)dl->B;
    w[3] = (unsigned long long)dl->T;
    w[4] = (unsigned long long)dl->rank;
    w[5] = (unsigned long long)dl->world;
    w[6] = (unsigned long long)dl->random_windows;
    w[7] = dl->seed;
    w[8] = (unsigned long long)dl->num_shards;
    w[9] = (unsigned long long)dl->num_tokens;
    w[10] = dl->rng_state;
    w[11] = (unsigned long long)dl->next_window;
    w[12] = (unsigned long long)dl->batches;
    for (int i = 0; i < DATALOADER_STATE_WORDS; i++) { dataloader_put_u64_((unsigned char*)out + 8 * i, w[i]); }
}

static inline void dataloader_set_state(DataLoader* dl, const void* in) {
    unsigned long long w[DATALOADER_STATE_WORDS];
    for (int i = 0; i < DATALOADER_STATE_WORDS; i++) { w[i] = dataloader_get_u64_((const unsigned char*)in + 8 * i); }
    if (w[0] != DATALOADER_STATE_MAGIC || w[1] != DATALOADER_STATE_VERSION) {
        dataloader_fail_("bad dataloader state: wrong magic or version (not a dataloader state?)");
    }
    const char* names[8] = {"B", "T", "rank", "world", "random_windows", "seed", "num_shards", "num_tokens"};
    unsigned long long mine[8] = {(unsigned long long)dl->B, (unsigned long long)dl->T,
                                  (unsigned long long)dl->rank, (unsigned long long)dl->world,
                                  (unsigned long long)dl->random_windows, dl->seed,
                                  (unsigned long long)dl->num_shards, (unsigned long long)dl->num_tokens};
    for (int i = 0; i < 8; i++) {
        if (w[2 + i] != mine[i]) {
            fprintf(stderr, "dataloader: error: saved state does not match this loader: %s is %llu in the state "
                    "but %llu here (resume with the same B, T, ranks, seed and data)\n",
                    names[i], w[2 + i], mine[i]);
            exit(1);
        }
    }
    if (w[11] > (unsigned long long)dl->rank_windows) {
        dataloader_fail_("bad dataloader state: window index out of range");
    }
    dl->rng_state = w[10];
    dl->next_window = (size_t)w[11];
    dl->batches = (size_t)w[12];
}

static inline void dataloader_free(DataLoader* dl) {
    for (int s = 0; s < dl->num_shards; s++) {
        if (dl->shards[s].fd >= 0) { close(dl->shards[s].fd); }
        free(dl->shards[s].path);
    }
    free(dl->shards);
    free(dl->inputs);
    free(dl->targets);
    free(dl->row_shard);
    free(dl->row_offset);
    free(dl->window);
    memset(dl, 0, sizeof(*dl));
}

#endif // LLMC_DATALOADER_H
