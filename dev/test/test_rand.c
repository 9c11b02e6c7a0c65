/*
Unit test of llmc/core/rand.h's jump-ahead and parallel fills: every number and the generator
left behind must be bit-identical to the sequential loops they replace (the loops that
llama_init_params and dit_init_params ran before), whatever the start, length and thread
count: odd starts that begin on a pair's sin half, a spare carried into and out of a
fill, normals and uniforms interleaved (train_dit's init), more threads than numbers.

  make build/test_rand
  build/test_rand                       # all checks: one line PASS name / FAIL name: why
  build/test_rand --time N T SECONDS    # fill N normals on T threads; fail if it takes
                                        # longer than SECONDS (make test's time budget)
Exit status: non-zero on any failure.
*/
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include "llmc/core/rand.h"

static int g_fail = 0, g_pass = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + 1e-9 * t.tv_nsec; }

// the test's own choices (sizes, offsets, thread counts): not the generator under test
static uint64_t g_pick = 0x9E3779B97F4A7C15ull;
static uint64_t pick(uint64_t n) {
    g_pick ^= g_pick << 13; g_pick ^= g_pick >> 7; g_pick ^= g_pick << 17;
    return n ? g_pick % n : 0;
}

// rng_normal as it was before the parallel fills, verbatim (with the state update
// written out): the numbers every seed has given so far
static float seq_normal(Rng* r) {
    if (r->has_spare) { r->has_spare = 0; return r->spare; }
    r->state ^= r->state >> 12; r->state ^= r->state << 25; r->state ^= r->state >> 27;
    uint64_t a = r->state * 0x2545F4914F6CDD1Dull;
    r->state ^= r->state >> 12; r->state ^= r->state << 25; r->state ^= r->state >> 27;
    uint64_t b = r->state * 0x2545F4914F6CDD1Dull;
    double u1 = ((a >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
    double u2 = (b >> 11) / 9007199254740992.0;
    double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
    r->spare = (float)(rad * sin(ang));
    r->has_spare = 1;
    return (float)(rad * cos(ang));
}
static float seq_uniform(Rng* r) {
    r->state ^= r->state >> 12; r->state ^= r->state << 25; r->state ^= r->state >> 27;
    return (float)((r->state * 0x2545F4914F6CDD1Dull) >> 40) / 16777216.0f;
}

// the same generator position: state and pending spare (a spare not pending is never read)
static int same_rng(const Rng* a, const Rng* b) {
    if (a->state != b->state || a->has_spare != b->has_spare) return 0;
    return !a->has_spare || memcmp(&a->spare, &b->spare, sizeof(float)) == 0;
}

// the first index where two float arrays differ in their bits, or n
static size_t first_diff(const float* a, const float* b, size_t n) {
    for (size_t i = 0; i < n; i++) if (memcmp(&a[i], &b[i], sizeof(float)) != 0) return i;
    return n;
}

static char g_why[512];

// ----------------------------------------------------------------------------

// rng_normal itself gives the numbers it always gave
static void test_normal_unchanged(void) {
    Rng a, b; rng_init(&a, 1234); rng_init(&b, 1234);
    int ok = 1;
    for (int i = 0; i < 1000000 && ok; i++) {
        float x = rng_normal(&a), y = seq_normal(&b);
        if (memcmp(&x, &y, sizeof(float)) != 0) { ok = 0; snprintf(g_why, sizeof g_why, "normal %d: %.9g vs %.9g", i, x, y); }
    }
    check("rng_normal_unchanged", ok && same_rng(&a, &b), g_why);
}

// rng_jump(n) lands where n rng_u64 calls land: every n below 300, random n up to 2e6,
// one of 1e8, and jumps that add up (a + b == a then b)
static void test_jump(void) {
    int ok = 1;
    Rng seq; rng_init(&seq, 7);
    Rng start = seq;
    for (uint64_t n = 0; n < 300 && ok; n++) {
        Rng j = start; rng_jump(&j, n);
        if (j.state != seq.state) { ok = 0; snprintf(g_why, sizeof g_why, "jump %llu", (unsigned long long)n); }
        rng_u64(&seq);
    }
    for (int c = 0; c < 20 && ok; c++) {
        Rng s; rng_init(&s, 100 + c);
        Rng j = s;
        uint64_t n = pick(2000000);
        for (uint64_t i = 0; i < n; i++) rng_u64(&s);
        rng_jump(&j, n);
        if (j.state != s.state) { ok = 0; snprintf(g_why, sizeof g_why, "seed %d jump %llu", 100 + c, (unsigned long long)n); }
    }
    if (ok) {
        Rng s; rng_init(&s, 99);
        Rng j = s;
        for (uint64_t i = 0; i < 100000000ull; i++) rng_u64(&s);
        rng_jump(&j, 100000000ull);
        if (j.state != s.state) { ok = 0; snprintf(g_why, sizeof g_why, "jump 1e8"); }
    }
    for (int c = 0; c < 50 && ok; c++) {
        uint64_t a = pick(1ull << 62), b = pick(1ull << 62);
        Rng x, y; rng_init(&x, c); y = x;
        rng_jump(&x, a + b);
        rng_jump(&y, a); rng_jump(&y, b);
        if (x.state != y.state) { ok = 0; snprintf(g_why, sizeof g_why, "jump %llu != %llu + %llu", (unsigned long long)(a + b), (unsigned long long)a, (unsigned long long)b); }
    }
    check("jump_matches_sequential_draws", ok, g_why);
}

// rng_seek_normal(k) lands where k rng_normal calls land, from a start with and without a
// pending spare
static void test_seek(void) {
    int ok = 1;
    for (int c = 0; c < 300 && ok; c++) {
        Rng s; rng_init(&s, 1000 + c);
        uint64_t pre = pick(4);                      // 1 or 3: a spare is pending at the start
        for (uint64_t i = 0; i < pre; i++) seq_normal(&s);
        uint64_t k = c < 40 ? (uint64_t)c % 8 : pick(100000);
        Rng j = s;
        for (uint64_t i = 0; i < k; i++) seq_normal(&s);
        rng_seek_normal(&j, k);
        float x = rng_normal(&j), y = seq_normal(&s);  // and the next number agrees
        if (!same_rng(&j, &s) || memcmp(&x, &y, sizeof(float)) != 0) {
            ok = 0; snprintf(g_why, sizeof g_why, "case %d: %llu normals after %llu", c, (unsigned long long)k, (unsigned long long)pre);
        }
    }
    check("seek_matches_sequential_normals", ok, g_why);
}

// rng_fill_normal over random (start, length, threads) against the sequential loop
static void test_fill_normal(void) {
    const size_t most = 100000;
    float* got = (float*)malloc(most * sizeof(float));
    float* want = (float*)malloc(most * sizeof(float));
    int ok = 1, cases = 0;
    for (int c = 0; c < 300 && ok; c++) {
        Rng s; rng_init(&s, 5000 + c);
        uint64_t start = c % 4 == 0 ? pick(8) : pick(30000);           // odd starts: the sin half first
        size_t n = c < 30 ? (size_t)c : c % 5 == 0 ? pick(64) : pick(most);  // 0, 1, fewer than threads, ...
        int threads = 1 + (int)pick(c % 10 == 0 ? 40 : 17);
        float scale = c % 2 ? 0.02f : 0.02f / sqrtf(2.0f * (1 + c % 32));
        for (uint64_t i = 0; i < start; i++) seq_normal(&s);
        Rng p = s;
        for (size_t j = 0; j < n; j++) want[j] = scale * seq_normal(&s);
        rng_fill_normal(&p, got, n, scale, threads);
        size_t d = first_diff(got, want, n);
        if (d < n || !same_rng(&p, &s)) {
            ok = 0;
            if (d < n) snprintf(g_why, sizeof g_why, "start %llu, %zu normals on %d threads: number %zu is %.9g, not %.9g",
                                (unsigned long long)start, n, threads, d, got[d], want[d]);
            else snprintf(g_why, sizeof g_why, "start %llu, %zu normals on %d threads: the numbers agree but the generator "
                          "is left elsewhere", (unsigned long long)start, n, threads);
        }
        cases++;
    }
    // one large start, reached by the sequential loop (about 0.3 s), and the automatic thread count
    if (ok) {
        Rng s; rng_init(&s, 77);
        for (uint64_t i = 0; i < 10000001ull; i++) seq_normal(&s);
        Rng p; rng_init(&p, 77); rng_seek_normal(&p, 10000001ull);
        size_t n = most;
        for (size_t j = 0; j < n; j++) want[j] = 0.02f * seq_normal(&s);
        rng_fill_normal(&p, got, n, 0.02f, 0);
        if (first_diff(got, want, n) < n || !same_rng(&p, &s)) { ok = 0; snprintf(g_why, sizeof g_why, "start 10000001, automatic threads"); }
    }
    free(got); free(want);
    check("fill_normal_matches_sequential", ok, g_why);
}

// Whole initialisations, tensor after tensor, against the loops they replaced: llama's
// (normals with two scales, ones in between, odd sizes so that the spare crosses tensors)
// and train_dit's (normals, uniforms, constants interleaved; the spare crosses uniforms)
static void test_init_sequences(void) {
    int ok = 1;
    for (int c = 0; c < 60 && ok; c++) {
        int tensors = 3 + (int)pick(12);
        size_t size[16], total = 0;
        int kind[16];  // 0 normal, 1 uniform, 2 ones
        for (int t = 0; t < tensors; t++) {
            size[t] = pick(5) == 0 ? pick(4) : 1 + pick(40000);
            kind[t] = c % 2 ? (int)pick(3) : pick(2) ? 0 : 2;  // odd c: train_dit's mix; even: llama's
            total += size[t];
        }
        float* got = (float*)malloc((total + 1) * sizeof(float));
        float* want = (float*)malloc((total + 1) * sizeof(float));
        Rng p, s; rng_init(&p, 9000 + c); rng_init(&s, 9000 + c);
        int threads = (int)pick(9);  // 0: automatic
        size_t off = 0;
        for (int t = 0; t < tensors; t++) {
            float* w = want + off; float* g = got + off;
            size_t n = size[t];
            float scale = t % 2 ? 0.02f : 0.00353553f, bound = 0.1f + 0.01f * t;
            if (kind[t] == 0) {
                for (size_t j = 0; j < n; j++) w[j] = scale * seq_normal(&s);
                rng_fill_normal(&p, g, n, scale, threads);
            } else if (kind[t] == 1) {
                for (size_t j = 0; j < n; j++) w[j] = bound * (2.0f * seq_uniform(&s) - 1.0f);
                rng_fill_uniform_symmetric(&p, g, n, bound, threads);
            } else {
                for (size_t j = 0; j < n; j++) w[j] = g[j] = 1.0f;
            }
            off += n;
        }
        size_t d = first_diff(got, want, total);
        if (d < total || !same_rng(&p, &s)) {
            ok = 0; snprintf(g_why, sizeof g_why, "sequence %d (%d tensors, %zu numbers, threads %d): first difference at %zu", c, tensors, total, threads, d);
        }
        free(got); free(want);
    }
    check("init_sequences_match_sequential", ok, g_why);
}

// --time N T SECONDS: N normals on T threads, the way llama_init_params draws them
static int time_fill(size_t n, int threads, double budget) {
    float* out = (float*)malloc(n * sizeof(float));
    if (!out) { fprintf(stderr, "test_rand: cannot allocate %zu floats\n", n); return 2; }
    Rng r; rng_init(&r, 1337);
    double t0 = now();
    rng_fill_normal(&r, out, n, 0.02f, threads);
    double s = now() - t0;
    double sum = 0.0;
    for (size_t j = 0; j < n; j += 4096) sum += out[j];
    free(out);
    printf("%zu normals on %d threads: %.2f s (%.1f ns per normal per thread; budget %.1f s; checksum %.6f)\n",
           n, threads, s, 1e9 * s * threads / (double)n, budget, sum);
    snprintf(g_why, sizeof g_why, "%.2f s > %.1f s", s, budget);
    check("fill_time_budget", s <= budget, g_why);
    return g_fail ? 1 : 0;
}

int main(int argc, char** argv) {
    if (argc == 5 && strcmp(argv[1], "--time") == 0)
        return time_fill((size_t)strtod(argv[2], NULL), atoi(argv[3]), atof(argv[4]));
    if (argc != 1) { fprintf(stderr, "usage: test_rand [--time N THREADS SECONDS]\n"); return 2; }
    double t0 = now();
    test_normal_unchanged();
    test_jump();
    test_seek();
    test_fill_normal();
    test_init_sequences();
    printf("test_rand: %d passed, %d failed in %.1f s\n", g_pass, g_fail, now() - t0);
    return g_fail ? 1 : 0;
}
