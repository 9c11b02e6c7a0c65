/*
A small deterministic random number generator for initialisation and sampling:
xorshift64* for uniform bits, Box-Muller for normals. Same seed, same numbers, on
every machine and in both builds.

Parallel fills (rng_fill_normal, rng_fill_uniform_symmetric): initialising llama3-1B
draws 1.24e9 normals, about 33 s on one core. The fills split the numbers over OpenMP
threads and still write EXACTLY what the sequential loop `out[j] = scale * rng_normal(r)`
writes, whatever the thread count, so that a seed gives the same model everywhere and
checkpoints and tests do not depend on the machine. That is possible because:
  - xorshift64*'s state update is linear over GF(2) (shifts and xors of the 64 state
    bits; the multiplication only scrambles the output), so n updates are one 64x64 bit
    matrix M^n, computed by square-and-multiply in O(64^2 log n): rng_jump;
  - each Box-Muller pair takes exactly two rng_u64 draws (no rejection), and its second
    half (the sin) is the spare that the next call returns, even across tensors: normal
    k of the stream is half k % 2 of pair k / 2, after 2 (k / 2) draws: rng_seek_normal.
Each thread seeks its own copy of the generator to the first number of its range and then
runs the ordinary rng_normal, so the arithmetic is the sequential code's own.
dev/test/test_rand.c checks the bit identity over many (start, length, thread count).
*/
#pragma once
#include <stdint.h>
#include <stddef.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif

typedef struct { uint64_t state; int has_spare; float spare; } Rng;

static inline void rng_init(Rng* r, uint64_t seed) {
    // splitmix64 scrambles the seed so that nearby seeds give unrelated streams
    uint64_t z = seed + 0x9E3779B97F4A7C15ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    r->state = (z ^ (z >> 31)) | 1ull;
    r->has_spare = 0;
    r->spare = 0.0f;
}

// the state update alone: linear over GF(2), which rng_jump relies on
static inline uint64_t rng_xorshift(uint64_t x) {
    x ^= x >> 12;
    x ^= x << 25;
    x ^= x >> 27;
    return x;
}

static inline uint64_t rng_u64(Rng* r) {
    r->state = rng_xorshift(r->state);
    return r->state * 0x2545F4914F6CDD1Dull;
}

// uniform in [0, 1) with 24 random bits
static inline float rng_uniform(Rng* r) { return (float)(rng_u64(r) >> 40) / 16777216.0f; }

static inline float rng_normal(Rng* r) {
    if (r->has_spare) { r->has_spare = 0; return r->spare; }
    double u1 = ((rng_u64(r) >> 11) + 1.0) / 9007199254740993.0;  // (0, 1]
    double u2 = (rng_u64(r) >> 11) / 9007199254740992.0;
    double rad = sqrt(-2.0 * log(u1)), ang = 6.283185307179586 * u2;
    r->spare = (float)(rad * sin(ang));
    r->has_spare = 1;
    return (float)(rad * cos(ang));
}

// ----------------------------------------------------------------------------
// jump-ahead and parallel fills

// A x over GF(2), the 64x64 bit matrix A given by its columns (col[j] = A e_j)
static inline uint64_t gf2_apply(const uint64_t col[64], uint64_t x) {
    uint64_t y = 0;
    for (int j = 0; j < 64; j++) y ^= col[j] & (0ull - ((x >> j) & 1ull));
    return y;
}

// The generator as `draws` calls of rng_u64 would leave it (the spare is not touched,
// as rng_u64 does not touch it): the state times M^draws, M^(2^i) squared up as the bits
// of draws are walked. At most 64 squarings of 64 columns: well under a millisecond.
static inline void rng_jump(Rng* r, uint64_t draws) {
    uint64_t m[64], sq[64];
    for (int j = 0; j < 64; j++) m[j] = rng_xorshift(1ull << j);
    uint64_t s = r->state;
    while (draws) {
        if (draws & 1ull) s = gf2_apply(m, s);
        draws >>= 1;
        if (!draws) break;
        for (int j = 0; j < 64; j++) sq[j] = gf2_apply(m, m[j]);  // (M^2) e_j = M (M e_j)
        for (int j = 0; j < 64; j++) m[j] = sq[j];
    }
    r->state = s;
}

// The generator as k calls of rng_normal would leave it, in O(log k): a pending spare is
// normal 0; then whole pairs are skipped with a jump of two draws each, and an odd
// remainder draws the next pair so that its sin half becomes the spare.
static inline void rng_seek_normal(Rng* r, uint64_t k) {
    if (k == 0) return;
    if (r->has_spare) { r->has_spare = 0; k--; }
    rng_jump(r, 2 * (k / 2));
    if (k & 1) {
        // kept, not dropped: a discarded result could let the compiler evaluate only the
        // sin half (sin instead of sincos), and the spare must be the sequential code's bits
        volatile float cos_half = rng_normal(r);
        (void)cos_half;
    }
}

// The threads a fill of n numbers runs on: `threads` when positive (the tests pin it),
// else every OpenMP thread, but no more than one per RNG_FILL_MIN numbers, so that a
// small tensor does not pay for a team and its jumps.
#define RNG_FILL_MIN ((size_t)1 << 16)
static inline int rng_fill_threads(size_t n, int threads) {
#ifdef _OPENMP
    if (threads > 0) return threads;
    size_t most = n / RNG_FILL_MIN + 1;
    int all = omp_get_max_threads();
    return (size_t)all < most ? all : (int)most;
#else
    (void)n; (void)threads;
    return 1;
#endif
}
static inline int rng_thread_num(void) {
#ifdef _OPENMP
    return omp_get_thread_num();
#else
    return 0;
#endif
}

// out[j] = scale * rng_normal(r) for j < n, bit for bit as that sequential loop writes
// them, and r left as the loop leaves it (a spare carried in is used first, one carried
// out is there for the next tensor). Thread t writes [n t / T, n (t + 1) / T), from its
// own copy of r sought to the range's first normal.
static inline void rng_fill_normal(Rng* r, float* out, size_t n, float scale, int threads) {
    int team = rng_fill_threads(n, threads);
    #pragma omp parallel num_threads(team)
    {
        size_t t = (size_t)rng_thread_num();
        size_t begin = n * t / (size_t)team, end = n * (t + 1) / (size_t)team;
        Rng mine = *r;
        rng_seek_normal(&mine, begin);
        for (size_t j = begin; j < end; j++) out[j] = scale * rng_normal(&mine);
    }
    rng_seek_normal(r, n);
}

// out[j] = bound * (2 * rng_uniform(r) - 1) for j < n: uniform in [-bound, bound), as
// xavier-uniform draws it (train_dit), bit for bit as the sequential loop, r left as it
// leaves it (one draw per number; a pending normal spare stays pending).
static inline void rng_fill_uniform_symmetric(Rng* r, float* out, size_t n, float bound, int threads) {
    int team = rng_fill_threads(n, threads);
    #pragma omp parallel num_threads(team)
    {
        size_t t = (size_t)rng_thread_num();
        size_t begin = n * t / (size_t)team, end = n * (t + 1) / (size_t)team;
        Rng mine = *r;
        rng_jump(&mine, begin);
        for (size_t j = begin; j < end; j++) out[j] = bound * (2.0f * rng_uniform(&mine) - 1.0f);
    }
    rng_jump(r, n);
}
