/*
The flags every trainer has, one definition for both: the optimizer and its schedule,
validation and checkpoint cadence, the run directory, resume, the memory flags shared
by train_llama and train_dit, and the memory plan. A trainer sets its own defaults in
TrainLoopArgs, then appends these entries to its own flag table.
*/
#pragma once
#include "../core/flags.h"
#include "../parallel/parallel_args.h"  // the parallel flags (--zero, --tp, --comm, ...)
#include "memory_flags.h"   // --ffn-chunks, --ffn-chunk-dim, --ce-chunks, --offload-act, --recompute
#include "fit_memory.h"     // --fit-memory's flags

typedef struct {
    int steps, warmup, val_every, ckpt_every, log_every, plan_only, profile_step;
    int start_over, keep_last;  // --start-over: a fresh run in a used run directory; --keep-last N checkpoints
    int test_nan_update;  // tests only: the update of this step leaves a NaN (the guard must stop the run)
    float lr, min_lr_frac, weight_decay, beta1, beta2, adam_eps, grad_clip;
    long long seed;
    const char *run_dir, *resume, *init_from, *plan_json;
    const char* model;          // the preset's name (the trainer's own --model entry sets it)
    const char* attention;      // "auto" | "fp32" | "tc" | "tc2" | "cudnn" (llmc/kernels/attention_select.h)
    char help[9][112];  // the entries whose help names a trainer's own default
} TrainLoopArgs;

// The defaults both trainers share, and each trainer's own run directory, steps, weight decay
// and beta2 (the model is the trainer's; the other fields start at zero).
static inline void train_loop_defaults(TrainLoopArgs* l, const char* run_dir, int steps, float weight_decay, float beta2) {
    l->run_dir = run_dir; l->steps = steps; l->weight_decay = weight_decay; l->beta2 = beta2;
    l->attention = "auto";
    l->warmup = 20; l->val_every = 50; l->ckpt_every = 0; l->log_every = 1;
    l->lr = 1e-3f; l->min_lr_frac = 0.1f; l->beta1 = 0.9f; l->adam_eps = 1e-8f; l->grad_clip = 1.0f; l->seed = 1337;
}

// --ffn-chunks K along the hidden dimension: a chunk's width, ceil(F/K) rounded up to a
// multiple of 64 when it is at least 64. cuBLASLt's fast bf16 kernels want the GEMM's
// dimensions aligned (a width of 2731 for F=8192, K=3 falls to slower tiles: 2752 does
// not); K such chunks may then cover F with fewer, and the trailing chunks are empty.
// Narrower chunks (the small test models) stay as they are, so that K still splits.
static inline int ffn_chunk_width(int F, int K) {
    int w = (F + K - 1) / K;
    if (w < 64) return w;
    int r = (w + 63) / 64 * 64;
    return r < F ? r : F;
}

// appends the entries to out; returns how many
static inline int train_loop_flags(Flag* out, TrainLoopArgs* a) {
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
        {"start-over", 'i', &a->start_over, "1: a fresh run in a --run-dir that holds another run moves that run's files to "
                                            "RUN_DIR/set_aside/N/ first (nothing is deleted); else such a run is refused"},
        {"keep-last", 'i', &a->keep_last, "keep only the newest N checkpoints of --run-dir (0 = all; the newest and the "
                                          "initial weights are never removed)"},
        {"init-from", 's', &a->init_from, "checkpoint whose parameters start a new run (step 0, fresh optimizer state)"},
        {"log-every", 'i', &a->log_every, "print a step line every N steps (metrics.jsonl gets every step)"},
        {"attention", 's', &a->attention, "auto | fp32 | tc | tc2 | cudnn: the attention kernels (tc: bf16 CUDA builds, "
                                          "head dims 32..256 in steps of 8; tc2: the same on FlashAttention-2's design, "
                                          "a one-pass backward with a planned fp32 dQ workspace; cudnn: cuDNN's fused "
                                          "attention, bf16 builds made with `make USE_CUDNN=1`; auto = the fastest that "
                                          "passed on a GPU by the speeds measured there whose plan fits the device, "
                                          "down to tc (which adds no memory) where it passed, else fp32)"},
        {"cudnn-deterministic", 'i', &g_cudnn_deterministic, CUDNN_DETERMINISTIC_HELP},
        {"plan-only", 'i', &a->plan_only, "1: print the memory plan and exit (no device needed)"},
        {"plan-json", 's', &a->plan_json, "write the memory plan as JSON to this file"},
        {"profile-step", 'i', &a->profile_step, "print the time of each launch group in step N (0 = off; llmc/kernels/profile.h)"},
        {"test-nan-update", 'i', &a->test_nan_update, "tests only: step N's update leaves a NaN (no checkpoint may hold it)"},
    };
    int n = (int)(sizeof(f) / sizeof(f[0]));
    memcpy(out, f, sizeof(f));
    return n;
}

// the checks of these values that do not depend on the trainer
static inline void train_loop_validate(const TrainLoopArgs* a) {
    attention_impl_parse(a->attention);  // fails on anything but auto, fp32, tc, tc2, cudnn
    // the ranges are llmc/core/flags.h's; what remains is how the values relate
    if (a->steps == 0 && !a->init_from && !a->resume)
        FAIL("--steps must be >= 1 (0 only with --init-from or --resume: evaluate and sample a checkpoint, no training)");
    if (!a->run_dir[0]) FAIL("--run-dir must name a directory (got an empty string)");
    if (a->start_over && a->resume)
        FAIL("--start-over 1 and --resume both given: --resume continues the run of --run-dir, --start-over moves it "
             "aside to start a new one; pick one");
    if (a->init_from && a->resume && strcmp(a->resume, "auto") != 0)
        FAIL("--init-from and --resume both given: --resume continues a run (with its optimizer state), --init-from "
             "starts a new one from a checkpoint's weights; pick one");
}

#define TRAIN_MAX_FLAGS 96

// The options every trainer has, typed: the loop's, the memory flags, the parallel
// layout, --fit-memory, the batch, and the table they were parsed from (the cross-rank
// check compares every entry of it: llmc/train/same_config.h). A trainer's own
// arguments hold one and add the model's.
typedef struct {
    TrainLoopArgs loop;    // optimizer, schedule, cadence, run directory, resume, plan
    MemoryFlags mem;       // the memory flags (llmc/train/memory_flags.h)
    ParallelArgs par;      // --comm, --zero, --tp, --cp, ... (llmc/parallel/parallel_args.h)
    FitArgs fit;           // --fit-memory and its model (llmc/train/fit_memory.h)
    FitSearch fit_search;  // the flags --fit-memory must keep (those given) and its report
    int B;                 // micro-batch per rank: rows (train_llama) or clips (train_dit)
    int total_batch;       // per optimizer step over all ranks, in the trainer's unit; 0: one micro-batch a rank
    int grad_accum;        // micro-batches per optimizer step (resolved by the trainer from the above)
    int shard_vocab;       // --shard-vocab (train_llama; 0 elsewhere)
    int sample_every, save_init;
    Flag flags[TRAIN_MAX_FLAGS];
    int given[TRAIN_MAX_FLAGS];  // 1: on the command line
    int nflags;
} RunArgs;

// A trainer's whole command line: its own entries (own), the parallel flags (tp_help and
// cp_help: what --tp and --cp must divide in this model), --fit-memory's, the loop's and the
// memory flags (with_ce: the model has an output head; recompute_help: what each level drops
// in it), all parsed into a->flags and checked. a->loop carries the trainer's defaults; the
// rest start at theirs (mem: every flag off, unless the trainer set it before).
static inline void train_flags_parse(int argc, char** argv, const Flag* own, int n_own, RunArgs* a, const char* tp_help,
                                     const char* cp_help, int with_ce, const char* recompute_help,
                                     void (*usage)(const Flag*, int)) {
    a->par = parallel_args_default();
    a->fit = fit_args_default();
    if (n_own + 48 > TRAIN_MAX_FLAGS) FAIL("train_flags_parse: %d flags of the trainer's own, raise TRAIN_MAX_FLAGS", n_own);
    Flag* f = a->flags;
    memcpy(f, own, (size_t)n_own * sizeof(Flag));
    int n = n_own;
    n += parallel_flags(f + n, &a->par, tp_help, cp_help);
    n += fit_flags(f + n, &a->fit);
    n += train_loop_flags(f + n, &a->loop);
    n += memory_flag_entries(f + n, &a->mem, with_ce, recompute_help);
    a->nflags = n;
    flags_parse(argc, argv, f, n, a->given, usage);
    train_loop_validate(&a->loop);
    parallel_args_validate(&a->par);
    fit_args_validate(&a->fit);
    fit_fixed_from_flags(&a->fit_search, &a->B, &a->mem, &a->par.zero, &a->par.offload_optim, with_ce, f, n, a->given);  // the flags --fit-memory chooses
}
