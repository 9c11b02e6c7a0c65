/*
Text samples during training (--sample-every): a story from BOS, one token at a time,
decoded with a llama2.c tokenizer and printed by rank 0. The model is behind one
callback (the logits of the next token after T tokens), so any language model can use
it; every rank must call story_sample when the model's forward is a collective (a
sharded head), and each draws the same tokens from the same generator.

The buffers are allocated once at init, sized by the longest sample.
*/
#pragma once
#include "../core/common.h"
#include "../core/logger.h"
#include "../core/rand.h"
#include "../io/tokenizer.h"

// host_logits[V] of the token after tokens[0..T); pad_scratch holds max_T ints for the model
typedef void (*NextTokenLogits)(void* model, const int* tokens, int T, float* host_logits, int* pad_scratch);

typedef struct {
    Tokenizer tok;
    int ready;          // a tokenizer is loaded: samples are taken
    int len, V;         // tokens per sample, vocabulary
    float temperature;  // 0: greedy
    uint64_t seed;      // --seed: each sample's generator is seeded by it and the step
    int *tokens, *pad;
    float* logits;
} StorySampler;

// every: --sample-every (0: never); tokenizer_given: the user named the file, so it must
// work (the default may be absent: samples are then skipped, with tokenizer_init's warning)
static inline void story_sampler_init(StorySampler* s, int every, const char* tokenizer, int tokenizer_given, int V,
                                      int len, int max_T, float temperature, uint64_t seed) {
    memset(s, 0, sizeof(*s));
    s->ready = every > 0 && tokenizer_init(&s->tok, tokenizer, V) == 0;
    if (every > 0 && !s->ready && tokenizer_given)
        FAIL("--tokenizer %s cannot be used (the warning above says why) and --sample-every %d asks for samples: give a "
             "llama2.c tokenizer.bin for V=%d, or --sample-every 0", tokenizer, every, V);
    s->len = len; s->V = V; s->temperature = temperature; s->seed = seed;
    s->tokens = (int*)xmalloc((size_t)len * sizeof(int));
    s->pad = (int*)xmalloc((size_t)max_T * sizeof(int));
    s->logits = (float*)xmalloc((size_t)V * sizeof(float));
}

static inline void story_sampler_free(StorySampler* s) {
    if (s->ready) tokenizer_free(&s->tok);
    free(s->tokens); free(s->pad); free(s->logits);
}

// the next token from logits: the most likely at temperature 0 (the first on ties),
// else drawn from softmax(logits / temperature)
static inline int pick_token(float* logits, int V, float temperature, Rng* rng) {
    int best = 0;
    for (int j = 1; j < V; j++) if (logits[j] > logits[best]) best = j;
    if (temperature == 0.0f) return best;
    float mx = logits[best] / temperature;
    double sum = 0.0;
    for (int j = 0; j < V; j++) { logits[j] /= temperature; sum += exp(logits[j] - mx); }
    double u = rng_uniform(rng) * sum, acc = 0.0;
    for (int j = 0; j < V; j++) { acc += exp(logits[j] - mx); if (acc > u) return j; }
    return V - 1;
}

// the sample of `step`: a story from BOS, drawn with its own generator seeded by the seed
// and the step, so that a resumed run prints the same samples as an uninterrupted one
static inline void story_sample(StorySampler* s, Logger* lg, int step, NextTokenLogits next_logits, void* model) {
    Rng rng; rng_init(&rng, s->seed * 1000003ull + (uint64_t)step);
    s->tokens[0] = 1;  // BOS
    logf_(lg, "--- sample ---\n");
    for (int t = 1; t < s->len; t++) {
        next_logits(model, s->tokens, t, s->logits, s->pad);
        int next = pick_token(s->logits, s->V, s->temperature, &rng);
        s->tokens[t] = next;
        if (next == 1) break;  // BOS starts the next story
        if (lg->quiet) continue;  // every rank samples (the sharded head is a collective); rank 0 prints
        // escaped on the way to stdout and main.log alike: a tokenizer file's pieces are data
        const char* piece = tokenizer_decode(&s->tok, s->tokens[t - 1], next);
        if (tokenizer_piece_shown(piece)) logger_text(lg, piece);
    }
    logf_(lg, "\n--------------\n");
}
