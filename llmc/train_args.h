/*
The flags every trainer has, one definition for both: the optimizer and its schedule,
validation and checkpoint cadence, the run directory, resume, the memory flags shared
by train_llama and train_dit, and the memory plan. A trainer sets its own defaults in
TrainLoopArgs, then appends these entries to its own flag table.
*/
#pragma once
#include "flags.h"

typedef struct {
    int steps, warmup, val_every, ckpt_every, log_every, plan_only;
    float lr, min_lr_frac, weight_decay, beta1, beta2, adam_eps, grad_clip;
    long long seed;
    const char *run_dir, *resume, *init_from, *plan_json;
    char help[9][112];  // the entries whose help names a trainer's own default
} TrainLoopArgs;

// the memory flags both trainers share, with train_llama's and train_dit's meaning
typedef struct { int* ffn_chunks; const char** ffn_chunk_dim; int* offload_act; int* recompute; const char* recompute_help; } MemoryFlagRefs;

// appends the entries to out; returns how many
static inline int train_loop_flags(Flag* out, TrainLoopArgs* a, MemoryFlagRefs mem) {
    snprintf(a->help[0], sizeof(a->help[0]), "optimizer steps (default %d)", a->steps);
    snprintf(a->help[1], sizeof(a->help[1]), "peak learning rate (default %g)", a->lr);
    snprintf(a->help[2], sizeof(a->help[2]), "linear warmup steps (default %d)", a->warmup);
    snprintf(a->help[3], sizeof(a->help[3]), "AdamW weight decay on the weight matrices (default %g)", a->weight_decay);
    snprintf(a->help[4], sizeof(a->help[4]), "AdamW beta2 (default %g)", a->beta2);
    snprintf(a->help[5], sizeof(a->help[5]), "validation every N steps and at the end, 0 = never (default %d)", a->val_every);
    snprintf(a->help[6], sizeof(a->help[6]), "directory for main.log, metrics.jsonl, checkpoints (default %s)", a->run_dir);
    const Flag f[] = {
        {"steps", 'i', &a->steps, a->help[0]},
        {"lr", 'f', &a->lr, a->help[1]},
        {"min-lr-frac", 'f', &a->min_lr_frac, "final lr as a fraction of the peak (default 0.1)"},
        {"warmup", 'i', &a->warmup, a->help[2]},
        {"weight-decay", 'f', &a->weight_decay, a->help[3]},
        {"beta1", 'f', &a->beta1, "AdamW beta1 (default 0.9)"},
        {"beta2", 'f', &a->beta2, a->help[4]},
        {"adam-eps", 'f', &a->adam_eps, "AdamW epsilon (default 1e-8)"},
        {"grad-clip", 'f', &a->grad_clip, "global-norm clipping, 0 = off (default 1.0)"},
        {"seed", 'l', &a->seed, "initialisation, data order and noise (default 1337)"},
        {"val-every", 'i', &a->val_every, a->help[5]},
        {"run-dir", 's', &a->run_dir, a->help[6]},
        {"ckpt-every", 'i', &a->ckpt_every, "checkpoint every N steps and at the end, 0 = never"},
        {"resume", 's', &a->resume, "checkpoint file to continue from, or 'auto': the newest good one of --run-dir, if any"},
        {"init-from", 's', &a->init_from, "checkpoint whose parameters start a new run (step 0, fresh optimizer state)"},
        {"log-every", 'i', &a->log_every, "print a step line every N steps (metrics.jsonl gets every step)"},
        {"ffn-chunks", 'i', mem.ffn_chunks, "split the FFN into K chunks, recomputed in backward (default 1)"},
        {"ffn-chunk-dim", 's', mem.ffn_chunk_dim, "hidden | seq: what --ffn-chunks splits (default hidden)"},
        {"offload-act", 'i', mem.offload_act, "offload the saved activations of N layers to host, -1 = all but the last"},
        {"recompute", 'i', mem.recompute, mem.recompute_help},
        {"plan-only", 'i', &a->plan_only, "1: print the memory plan and exit (no device needed)"},
        {"plan-json", 's', &a->plan_json, "write the memory plan as JSON to this file"},
    };
    int n = (int)(sizeof(f) / sizeof(f[0]));
    memcpy(out, f, sizeof(f));
    return n;
}

// the checks of these values that do not depend on the trainer
static inline void train_loop_validate(const TrainLoopArgs* a, const char* ffn_chunk_dim, int* ffn_chunk_seq) {
    if (strcmp(ffn_chunk_dim, "hidden") == 0) *ffn_chunk_seq = 0;
    else if (strcmp(ffn_chunk_dim, "seq") == 0) *ffn_chunk_seq = 1;
    else FAIL("--ffn-chunk-dim must be 'hidden' or 'seq', got '%s'", ffn_chunk_dim);
    if (a->steps < 0 || (a->steps == 0 && !a->init_from && !a->resume))
        FAIL("--steps must be >= 1 (0 only with --init-from or --resume: evaluate and sample a checkpoint, no training)");
    if (a->warmup < 0) FAIL("--warmup must be >= 0");
    if (a->val_every < 0 || a->ckpt_every < 0 || a->log_every < 1)
        FAIL("--val-every and --ckpt-every must be >= 0, --log-every >= 1");
    if (a->init_from && a->resume && strcmp(a->resume, "auto") != 0)
        FAIL("--init-from and --resume both given: --resume continues a run (with its optimizer state), --init-from "
             "starts a new one from a checkpoint's weights; pick one");
}
