/*
Unit test of llmc/io/dataloader.h. Writes its own small shards to a temp dir.

  g++ -O2 -x c++ -Wall -Wextra -I. dev/test/test_dataloader.c -o test_dataloader
  ./test_dataloader                        # all checks: one line PASS name / FAIL name: why
  ./test_dataloader --open PATTERN B T [V] # just init a loader (and validate vocab V), print OK;
                                           # used by dev/test/bad_shards.sh for bad-input checks
  ./test_dataloader --truncate SHARD B T BYTES
                                           # init a random-window loader on SHARD, then cut the
                                           # file to BYTES (as a data job might while training
                                           # reads it) and read 1000 batches: must end with a
                                           # message naming the file and exit(1), not SIGBUS
                                           # (make test's bad-input section)
Exit status: non-zero on any failure.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <unistd.h>
#include "llmc/io/dataloader.h"

static int g_fail = 0, g_pass = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

// ----------------------------------------------------------------------------
// test data: shards the test writes itself and keeps a copy of

#define MAX_SHARDS 8
typedef struct {
    int n;                    // shards
    char paths[MAX_SHARDS][512];
    uint32_t* data[MAX_SHARDS];
    size_t len[MAX_SHARDS];
    char pattern[512];
} ShardSet;

static uint64_t g_rng = 0x1234567ULL;
static uint32_t rnd(uint32_t n) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (uint32_t)(g_rng % n);
}

static char g_dir[256];
static char g_files[64][512];
static int g_nfiles = 0;

static void write_shard(const char* path, const uint32_t* tok, size_t n, int u32) {
    int32_t header[256];
    memset(header, 0, sizeof(header));
    header[0] = u32 ? 20240801 : 20240520;
    header[1] = u32 ? 7 : 1;
    header[2] = (int32_t)n;
    FILE* f = fopen(path, "wb");
    if (!f) { fprintf(stderr, "cannot write %s\n", path); exit(2); }
    fwrite(header, sizeof(header), 1, f);
    for (size_t i = 0; i < n; i++) {
        if (u32) { uint32_t v = tok[i]; fwrite(&v, 4, 1, f); }
        else { uint16_t v = (uint16_t)tok[i]; fwrite(&v, 2, 1, f); }
    }
    fclose(f);
    snprintf(g_files[g_nfiles++], 512, "%s", path);
}

static void make_set(ShardSet* s, const char* prefix, const size_t* lens, int n, uint32_t max_id, int u32) {
    memset(s, 0, sizeof(*s));
    s->n = n;
    for (int i = 0; i < n; i++) {
        snprintf(s->paths[i], 512, "%s/%s_%03d.bin", g_dir, prefix, i);
        s->len[i] = lens[i];
        s->data[i] = (uint32_t*)malloc(sizeof(uint32_t) * lens[i]);
        for (size_t j = 0; j < lens[i]; j++) { s->data[i][j] = rnd(max_id); }
        if (u32) { s->data[i][lens[i] / 2] = max_id - 1; } // make sure big ids occur
        write_shard(s->paths[i], s->data[i], lens[i], u32);
    }
    snprintf(s->pattern, 512, "%s/%s_*.bin", g_dir, prefix);
}

static void free_set(ShardSet* s) {
    for (int i = 0; i < s->n; i++) { free(s->data[i]); }
}

// does the last batch match the data at the reported windows? returns 1 if all good
static int batch_matches(const DataLoader* dl, const ShardSet* s, int shard_offset, char* why, size_t whylen) {
    int B = dl->B, T = dl->T;
    for (int b = 0; b < B; b++) {
        int sh = dl->row_shard[b] - shard_offset;
        size_t off = dl->row_offset[b];
        if (sh < 0 || sh >= s->n) { snprintf(why, whylen, "row %d: shard %d out of range", b, sh); return 0; }
        if (off + (size_t)T + 1 > s->len[sh]) {
            snprintf(why, whylen, "row %d: window at %zu+%d+1 past the end of shard %d (%zu tokens)",
                     b, off, T, sh, s->len[sh]);
            return 0;
        }
        for (int t = 0; t < T; t++) {
            if ((uint32_t)dl->inputs[b * T + t] != s->data[sh][off + t]) {
                snprintf(why, whylen, "row %d pos %d: input %d != shard %d token %zu = %u",
                         b, t, dl->inputs[b * T + t], sh, off + t, s->data[sh][off + t]);
                return 0;
            }
            if ((uint32_t)dl->targets[b * T + t] != s->data[sh][off + t + 1]) {
                snprintf(why, whylen, "row %d pos %d: target %d != shard %d token %zu = %u",
                         b, t, dl->targets[b * T + t], sh, off + t + 1, s->data[sh][off + t + 1]);
                return 0;
            }
            if (t + 1 < T && dl->targets[b * T + t] != dl->inputs[b * T + t + 1]) {
                snprintf(why, whylen, "row %d pos %d: targets are not inputs shifted by one", b, t);
                return 0;
            }
        }
    }
    return 1;
}

static int same_batch(const DataLoader* a, const DataLoader* b) {
    size_t n = (size_t)a->B * a->T;
    return memcmp(a->inputs, b->inputs, n * sizeof(int)) == 0 &&
           memcmp(a->targets, b->targets, n * sizeof(int)) == 0;
}

// ----------------------------------------------------------------------------

static int open_mode(int argc, char** argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s --open FILE_OR_PATTERN B T [V]\n", argv[0]);
        return 2;
    }
    DataLoader dl;
    dataloader_init(&dl, argv[2], atoi(argv[3]), atoi(argv[4]), 0, 1, 0, 1337);
    if (argc > 5) { dataloader_validate_vocab(&dl, atoi(argv[5])); }
    dataloader_next_batch(&dl);
    printf("OK num_tokens=%zu shards=%d\n", dl.num_tokens, dl.num_shards);
    dataloader_free(&dl);
    return 0;
}

static int truncate_mode(int argc, char** argv) {
    if (argc != 6) {
        fprintf(stderr, "usage: %s --truncate SHARD B T BYTES\n", argv[0]);
        return 2;
    }
    DataLoader dl;
    dataloader_init(&dl, argv[2], atoi(argv[3]), atoi(argv[4]), 0, 1, 1, 1337);
    dataloader_next_batch(&dl);  // reads fine before the cut
    if (truncate(argv[2], (off_t)atoll(argv[5])) != 0) {
        fprintf(stderr, "truncate %s: %s\n", argv[2], strerror(errno));
        return 2;
    }
    for (int i = 0; i < 1000; i++) { dataloader_next_batch(&dl); }
    printf("read 1000 batches after %s was cut to %s bytes, without an error\n", argv[2], argv[5]);
    dataloader_free(&dl);
    return 0;
}

int main(int argc, char** argv) {
    if (argc > 1 && strcmp(argv[1], "--open") == 0) { return open_mode(argc, argv); }
    if (argc > 1 && strcmp(argv[1], "--truncate") == 0) { return truncate_mode(argc, argv); }

    snprintf(g_dir, sizeof(g_dir), "/tmp/test_dataloader_XXXXXX");
    if (!mkdtemp(g_dir)) { fprintf(stderr, "mkdtemp failed\n"); return 2; }

    const int B = 4, T = 16;
    char why[512];
    ShardSet A, W;  // uint16 shards of different sizes; uint32 (version 7) shards
    const size_t lensA[4] = {1000, 2537, 777, 150};
    const size_t lensW[2] = {900, 1301};
    make_set(&A, "a", lensA, 4, 32000, 0);
    make_set(&W, "w", lensW, 2, 100000, 1);

    // expected sequential windows of set A, in order
    size_t nwin = 0;
    int win_shard[1024];
    size_t win_off[1024];
    size_t total = 0;
    for (int s = 0; s < A.n; s++) {
        total += A.len[s];
        for (size_t j = 0; j < (A.len[s] - 1) / T; j++) { win_shard[nwin] = s; win_off[nwin] = j * T; nwin++; }
    }

    // --- init
    DataLoader dl;
    dataloader_init(&dl, A.pattern, B, T, 0, 1, 0, 42);
    snprintf(why, sizeof(why), "num_tokens %zu, num_shards %d; expected %zu, %d", dl.num_tokens, dl.num_shards,
             total, A.n);
    check("init_counts", dl.num_tokens == total && dl.num_shards == A.n, why);

    // --- sequential: windows of the shards, in order, wrapping around
    {
        int match_ok = 1, order_ok = 1;
        char why2[512] = "";
        size_t rows = 0, nb = (size_t)(2.5 * nwin / B) + 1;
        for (size_t i = 0; i < nb && match_ok && order_ok; i++) {
            dataloader_next_batch(&dl);
            if (!batch_matches(&dl, &A, 0, why, sizeof(why))) { match_ok = 0; break; }
            for (int b = 0; b < B; b++, rows++) {
                size_t k = rows % nwin;
                if (dl.row_shard[b] != win_shard[k] || dl.row_offset[b] != win_off[k]) {
                    snprintf(why2, sizeof(why2), "row %zu: window (shard %d, %zu), expected (shard %d, %zu)", rows,
                             dl.row_shard[b], dl.row_offset[b], win_shard[k], win_off[k]);
                    order_ok = 0;
                    break;
                }
            }
        }
        check("sequential_windows_match_shards", match_ok, why);
        if (order_ok && rows <= 2 * nwin) { snprintf(why2, sizeof(why2), "covered too little"); order_ok = 0; }
        check("sequential_in_order_and_wraps", match_ok && order_ok, why2);
    }

    // --- reset
    {
        DataLoader d2;
        dataloader_init(&d2, A.pattern, B, T, 0, 1, 0, 42);
        dataloader_reset(&dl);
        int ok = 1;
        for (int i = 0; i < 10 && ok; i++) {
            dataloader_next_batch(&dl);
            dataloader_next_batch(&d2);
            ok = same_batch(&dl, &d2);
        }
        check("reset_sequential", ok, "batches after reset differ from a fresh loader");
        dataloader_free(&d2);
    }
    dataloader_free(&dl);

    // --- random: in range, windows of the data, all shards used
    {
        DataLoader r;
        dataloader_init(&r, A.pattern, B, T, 0, 1, 1, 1234);
        int ok = 1, hit[4] = {0, 0, 0, 0};
        for (int i = 0; i < 300 && ok; i++) {
            dataloader_next_batch(&r);
            ok = batch_matches(&r, &A, 0, why, sizeof(why));
            for (int b = 0; b < B; b++) { hit[r.row_shard[b]]++; }
        }
        check("random_windows_in_range_and_match", ok, why);
        snprintf(why, sizeof(why), "rows per shard %d %d %d %d", hit[0], hit[1], hit[2], hit[3]);
        check("random_uses_all_shards", hit[0] && hit[1] && hit[2] && hit[3] && hit[1] > hit[3], why);

        // same seed -> same batches, other seed -> other batches
        DataLoader r1, r2, r3;
        dataloader_init(&r1, A.pattern, B, T, 0, 1, 1, 1234);
        dataloader_init(&r2, A.pattern, B, T, 0, 1, 1, 1234);
        dataloader_init(&r3, A.pattern, B, T, 0, 1, 1, 1235);
        int same = 1, differ = 0;
        for (int i = 0; i < 50; i++) {
            dataloader_next_batch(&r1);
            dataloader_next_batch(&r2);
            dataloader_next_batch(&r3);
            if (!same_batch(&r1, &r2)) { same = 0; }
            if (!same_batch(&r1, &r3)) { differ = 1; }
        }
        check("random_deterministic_for_seed", same, "two loaders with the same seed gave different batches");
        check("random_seed_changes_batches", differ, "seeds 1234 and 1235 gave the same 50 batches");

        // reset in random mode
        dataloader_reset(&r1);
        DataLoader r4;
        dataloader_init(&r4, A.pattern, B, T, 0, 1, 1, 1234);
        same = 1;
        for (int i = 0; i < 20; i++) {
            dataloader_next_batch(&r1);
            dataloader_next_batch(&r4);
            if (!same_batch(&r1, &r4)) { same = 0; }
        }
        check("reset_random", same, "batches after reset differ from a fresh loader");
        dataloader_free(&r);
        dataloader_free(&r1);
        dataloader_free(&r2);
        dataloader_free(&r3);
        dataloader_free(&r4);
    }

    // --- rank/world, sequential: disjoint windows whose union is all windows
    for (int world = 2; world <= 5; world += 3) {
        static int owner[1024];
        for (size_t k = 0; k < nwin; k++) { owner[k] = -1; }
        int ok = 1;
        why[0] = '\0';
        for (int rank = 0; rank < world && ok; rank++) {
            DataLoader d;
            dataloader_init(&d, A.pattern, 1, T, rank, world, 0, 7);
            size_t first_shard = 0, first_off = 0;
            for (size_t i = 0; i < d.rank_windows && ok; i++) {
                dataloader_next_batch(&d);
                if (!batch_matches(&d, &A, 0, why, sizeof(why))) { ok = 0; break; }
                if (i == 0) { first_shard = (size_t)d.row_shard[0]; first_off = d.row_offset[0]; }
                size_t k = 0;
                while (k < nwin && !(win_shard[k] == d.row_shard[0] && win_off[k] == d.row_offset[0])) { k++; }
                if (k == nwin) { snprintf(why, sizeof(why), "rank %d read a window not on the grid", rank); ok = 0; }
                else if (owner[k] != -1) {
                    snprintf(why, sizeof(why), "world %d: window %zu read by ranks %d and %d", world, k, owner[k], rank);
                    ok = 0;
                } else { owner[k] = rank; }
            }
            dataloader_next_batch(&d); // wraps to this rank's first window
            if (ok && ((size_t)d.row_shard[0] != first_shard || d.row_offset[0] != first_off)) {
                snprintf(why, sizeof(why), "rank %d of %d does not wrap to its first window", rank, world);
                ok = 0;
            }
            dataloader_free(&d);
        }
        for (size_t k = 0; k < nwin && ok; k++) {
            if (owner[k] == -1) { snprintf(why, sizeof(why), "world %d: window %zu read by no rank", world, k); ok = 0; }
        }
        char name[64];
        snprintf(name, sizeof(name), "sequential_ranks_disjoint_world%d", world);
        check(name, ok, why);
    }

    // --- rank/world, random: each rank stays inside its own region of every shard
    {
        int world = 3, ok = 1;
        for (int rank = 0; rank < world && ok; rank++) {
            DataLoader d;
            dataloader_init(&d, A.pattern, B, T, rank, world, 1, 99);
            for (int i = 0; i < 100 && ok; i++) {
                dataloader_next_batch(&d);
                if (!batch_matches(&d, &A, 0, why, sizeof(why))) { ok = 0; break; }
                for (int b = 0; b < B; b++) {
                    size_t n = A.len[d.row_shard[b]];
                    size_t lo = n * rank / world, hi = n * (rank + 1) / world;
                    if (d.row_offset[b] < lo || d.row_offset[b] + T + 1 > hi) {
                        snprintf(why, sizeof(why), "rank %d window [%zu, %zu] outside its region [%zu, %zu)", rank,
                                 d.row_offset[b], d.row_offset[b] + T, lo, hi);
                        ok = 0;
                    }
                }
            }
            dataloader_free(&d);
        }
        check("random_ranks_disjoint_regions", ok, why);
    }

    // --- checkpoint state: resume reads the same batches
    for (int mode = 0; mode < 2; mode++) {
        DataLoader a, b;
        dataloader_init(&a, A.pattern, B, T, 1, 2, mode, 555);
        for (int i = 0; i < 7; i++) { dataloader_next_batch(&a); }
        size_t sz = dataloader_state_size();
        unsigned char* st = (unsigned char*)malloc(sz);
        dataloader_get_state(&a, st);
        dataloader_init(&b, A.pattern, B, T, 1, 2, mode, 555);
        dataloader_next_batch(&b); // some other position, to be overwritten
        dataloader_set_state(&b, st);
        int ok = 1;
        for (int i = 0; i < 40; i++) { // 40 batches: goes past the sequential wrap of rank 1
            dataloader_next_batch(&a);
            dataloader_next_batch(&b);
            if (!same_batch(&a, &b)) { ok = 0; }
        }
        check(mode ? "state_resume_random" : "state_resume_sequential", ok && sz > 0,
              "the resumed loader read different batches");
        free(st);
        dataloader_free(&a);
        dataloader_free(&b);
    }

    // --- uint32 (version 7) shards
    {
        DataLoader d;
        dataloader_init(&d, W.pattern, B, T, 0, 1, 0, 3);
        int ok = d.num_tokens == W.len[0] + W.len[1], big = 0;
        if (!ok) { snprintf(why, sizeof(why), "num_tokens %zu", d.num_tokens); }
        for (int i = 0; i < 60 && ok; i++) {
            dataloader_next_batch(&d);
            ok = batch_matches(&d, &W, 0, why, sizeof(why));
            for (int k = 0; k < B * T; k++) { if (d.inputs[k] > 65535) { big = 1; } }
        }
        if (ok && !big) { snprintf(why, sizeof(why), "no token id > 65535 seen"); ok = 0; }
        dataloader_validate_vocab(&d, 100000); // exits on failure
        check("uint32_shards_sequential", ok, why);
        dataloader_free(&d);
        dataloader_init(&d, W.pattern, B, T, 0, 1, 1, 3);
        ok = 1;
        for (int i = 0; i < 100 && ok; i++) {
            dataloader_next_batch(&d);
            ok = batch_matches(&d, &W, 0, why, sizeof(why));
        }
        check("uint32_shards_random", ok, why);
        dataloader_free(&d);
    }

    // --- uint16 and uint32 shards under one pattern
    {
        char pat[600];
        snprintf(pat, sizeof(pat), "%s/*.bin", g_dir);
        DataLoader d;
        dataloader_init(&d, pat, B, T, 0, 1, 0, 3);
        check("mixed_versions_one_pattern", d.num_shards == A.n + W.n && d.num_tokens == total + W.len[0] + W.len[1],
              "wrong shard or token count");
        dataloader_validate_vocab(&d, 100000);
        check("validate_vocab_ok", 1, "");
        dataloader_free(&d);
    }

    free_set(&A);
    free_set(&W);
    for (int i = 0; i < g_nfiles; i++) { unlink(g_files[i]); }
    rmdir(g_dir);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    return g_fail ? 1 : 0;
}
