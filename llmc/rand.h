/*
A small deterministic random number generator for initialisation and sampling:
xorshift64* for uniform bits, Box-Muller for normals. Same seed, same numbers, on
every machine and in both builds.
*/
#pragma once
#include <stdint.h>
#include <math.h>

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

static inline uint64_t rng_u64(Rng* r) {
    r->state ^= r->state >> 12;
    r->state ^= r->state << 25;
    r->state ^= r->state >> 27;
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
