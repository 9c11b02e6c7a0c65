/*
--fit-memory GiB: the cheapest memory flags that fit a budget, chosen from the plan alone,
for either trainer (docs/memory.md section 8).

The search space: --ffn-chunks 1..16 and, for a model with an output head, --ce-chunks
1..64 (powers of two), --recompute 0..2, --offload-act 0..L, the ZeRO stage --zero 0..3
where the parameters' group has more than one rank, --offload-optim 0..1 (the CUDA build),
and, when --batch is not
given, the micro-batch (powers of two; the largest that fits wins, since a bigger
micro-batch uses the device better and needs fewer accumulation steps). A flag given on
the command line stays fixed. The trainer says what a candidate costs through one
callback: its plan's bytes (the model built without allocating: the same bytes a run
allocates) and its predicted extra time per micro-step from the cost model below. The
constants are assumptions of the model, not measurements: they rank the candidates, they
do not promise a step time.
*/
#pragma once
#include "../core/common.h"
#include "../core/flags.h"
#include "../core/arena.h"
#include "memory_flags.h"
#include "../parallel/parallel_args.h"

typedef struct {
    double flops;      // achieved matmul FLOP/s
    double mem_bw;     // bytes/s of the memory-bound kernels (norms, activations)
    double link_bw;    // bytes/s of one direction of the host link (--fit-link-gbs)
    double launch_s;   // fixed cost of one kernel launch or copy
    double reserve;    // bytes the plan does not own (CUDA context, cuBLASLt workspace; the process on the CPU)
    double dp_bw;      // bytes/s one rank sends in an all-gather over the parameters' group (--fit-dp-gbs)
    double host_bw;    // bytes/s the CPU streams through in --offload-optim's update (all threads)
} CostModel;

static inline CostModel cost_model_default(void) {
#ifdef LLMC_CPU
    CostModel cm = {50e9, 10e9, 10e9, 2e-6, 64.0 * 1048576, 5e9, 10e9};
#else
    CostModel cm = {400e12, 2.5e12, 25e9, 5e-6, 1024.0 * 1048576 + (double)matmul_workspace_bytes(), 100e9, 20e9};
#endif
    return cm;
}

// --zero 3: the part of each layer's parameter gathers that its compute cannot hide, per
// micro-step. A layer's forward (a third of the flag-free micro-step's base seconds, over
// L layers) overlaps the next layer's gather; its backward (twice that) overlaps the gather
// of the layer below and its own reduce-scatter. layer_bytes: the largest layer bucket on
// this rank; g: the ranks of the parameters' group. The other stages' reductions run once
// a micro-step or step under the backward as --zero 1's do: no cost over the flag-free step.
static inline double fit_zero_seconds(int zero, int L, double layer_bytes, int g, double base, const CostModel* cm) {
    if (zero < 3 || g < 2 || L < 1) return 0.0;
    double fwd = base / 3.0 / L, bwd = 2.0 * fwd, move = layer_bytes * (g - 1) / g / cm->dp_bw;
    return L * ((move > fwd ? move - fwd : 0.0) + (2.0 * move > bwd ? 2.0 * move - bwd : 0.0) + 4.0 * cm->launch_s);
}

// the part of each offload copy (out during the next layer's forward, back during
// backward) that the neighbouring layer's compute cannot hide, and its launches
static inline double fit_offload_seconds(int n_offload, size_t act_block_bytes, double layer_fwd_flops,
                                         const CostModel* cm, double* launches) {
    double copy = (double)act_block_bytes / cm->link_bw, fwd = layer_fwd_flops / cm->flops, exposed = 0.0;
    for (int l = 0; l < n_offload; l++) {
        exposed += (copy > fwd ? copy - fwd : 0.0) + (copy > 2.0 * fwd ? copy - 2.0 * fwd : 0.0);
        *launches += 4.0;  // two copies, their events
    }
    return exposed;
}

// A model's memory flags in the terms both trainers price them in: a layer's forward FLOPs of its
// attention half and of its FFN (--recompute 2 runs both again, the FFN's also with --ffn-chunks), the
// bytes of the memory-bound work each layer redoes (norm: --recompute 1's norms; act: the FFN's
// activation, which --ffn-chunks redoes as well), the extra launches, and the forward FLOPs of a layer
// that hide its offload copy.
typedef struct { double attn_flops, ffn_flops, norm_bytes, act_bytes, launches, layer_flops; } FitRecompute;

// the predicted seconds per micro-step that the flags f add to the flag-free step over L layers:
// recomputed FLOPs and memory traffic, extra launches, the exposed part of the offload copies
static inline double fit_recompute_seconds(const FitRecompute* w, const MemoryFlags* f, int L, int n_offload,
                                           size_t act_block_bytes, const CostModel* cm) {
    double flops = 0.0, bytes = 0.0, launches = w->launches;
    if (f->recompute >= 2) flops += L * w->attn_flops;
    if (f->recompute >= 2 || f->ffn_chunks > 1) flops += L * w->ffn_flops;
    if (f->recompute >= 1) bytes += L * w->norm_bytes;
    if (f->recompute >= 1 || f->ffn_chunks > 1) bytes += L * w->act_bytes;
    double exposed = fit_offload_seconds(n_offload, act_block_bytes, w->layer_flops, cm, &launches);
    return flops / cm->flops + bytes / cm->mem_bw + launches * cm->launch_s + exposed;
}

// --offload-optim 1: AdamW on the CPU over the rank's n_opt owned elements, per micro-step
// (the update is once a step). It starts when backward ends (clipping needs the global norm),
// streams its bytes per element through host memory (fp32 master, m, v read and written, the
// gradient read and the parameter written), and the upload of its last group (of `groups`,
// each uploaded while the next is updated) follows it; the gradients' copies to the host
// overlap backward. The CPU build's "host" is the device's memory and its update the same
// loop: no cost there.
static inline double fit_offload_optim_seconds(int on, size_t n_opt, int groups, int have_master, int micro_steps,
                                               const CostModel* cm) {
#ifdef LLMC_CPU
    (void)on; (void)n_opt; (void)groups; (void)have_master; (void)micro_steps; (void)cm;
    return 0.0;
#else
    if (!on) return 0.0;
    double per = 4.0 * (2 + have_master) * 2 + 2.0 * sizeof(floatX);
    double last_upload = (double)n_opt / (groups > 0 ? groups : 1) * sizeof(floatX) / cm->link_bw;
    return (n_opt * per / cm->host_bw + last_upload) / (micro_steps > 0 ? micro_steps : 1);
#endif
}

// the flags --fit-memory adds to a trainer's table
typedef struct {
    float budget_gib, link_gbs, reserve_mib;  // --fit-memory (0 = off), --fit-link-gbs, --fit-reserve (-1: the default)
    float dp_gbs;                             // --fit-dp-gbs
    const char* candidates;                   // --fit-candidates FILE
    int per_stage;                            // --fit-per-stage: under --pp each stage's memory flags of its own
} FitArgs;

static inline FitArgs fit_args_default(void) {
#ifdef LLMC_CPU
    FitArgs f = {0.0f, 10.0f, -1.0f, 5.0f, NULL, 0};
#else
    FitArgs f = {0.0f, 25.0f, -1.0f, 100.0f, NULL, 0};
#endif
    return f;
}

static inline int fit_flags(Flag* out, FitArgs* f) {
    const Flag t[] = {
        {"fit-memory", 'f', &f->budget_gib, "GiB: choose the memory flags (and the batch, unless given) that fit at the least predicted cost"},
        {"fit-link-gbs", 'f', &f->link_gbs, "GB/s of the host link in --fit-memory's cost of offload (default 25; CPU build 10)"},
        {"fit-reserve", 'f', &f->reserve_mib, "MiB --fit-memory and --attention auto leave outside the plan (default 1024 + cuBLASLt workspace; CPU 64)"},
        {"fit-dp-gbs", 'f', &f->dp_gbs, "GB/s a rank sends in --zero 3's gathers, in --fit-memory's cost (default 100: NVLink; "
         "about 40 across nodes; CPU build 5)"},
        {"fit-candidates", 's', &f->candidates, "write every plan --fit-memory tried as JSON lines to this file"},
        {"fit-per-stage", 'i', &f->per_stage, "1: under --pp, each pipeline stage's own --ffn-chunks, --ce-chunks, --recompute "
                                              "and --offload-act for the budget (the batch and --zero chosen for all stages first)"},
    };
    memcpy(out, t, sizeof(t));
    return (int)(sizeof(t) / sizeof(t[0]));
}

static inline void fit_args_validate(const FitArgs* f) {
    if (f->candidates && !(f->budget_gib > 0.0f)) FAIL("--fit-candidates needs --fit-memory");
    if (f->per_stage && !(f->budget_gib > 0.0f)) FAIL("--fit-per-stage needs --fit-memory");
}

// one candidate: the micro-batch and the memory flags the search sets, and what the
// trainer's callback says of it (its plan: dev and host, the arenas' bytes)
typedef struct { int B; MemoryFlags mem; int zero, offload_optim; } FitFlags;
typedef struct { double bytes, seconds, base; int n_offload; double dev, host; } FitCost;  // bytes < 0: not a valid layout

// a candidate's parallel flags: the run's, with the candidate's ZeRO stage and --offload-optim
static inline ParallelFlags fit_parallel_flags(const ParallelArgs* p, int shard_vocab, int micro_steps,
                                               const FitFlags* f) {
    ParallelFlags pf = parallel_flags_resolve(p, shard_vocab, micro_steps);
    pf.zero = f->zero;
    pf.offload_optim = f->offload_optim;
    return pf;
}

typedef struct {
    // The flags --fit-memory chooses, as places in a trainer's arguments (set with the fixed
    // flags by fit_fixed_from_flags). The search starts from their values, keeps the ones the
    // command line gave, and writes its choice back.
    int* B;
    MemoryFlags* mem;
    int* zero;              // --zero
    int zero_max;           // the stages to try: 0..zero_max, or the given one (set by the runner: 3 with a group to shard over)
    int* offload_optim;     // --offload-optim (tried both ways in the CUDA build)
    int L;                  // --offload-act 0..L
    int with_ce;            // the model has an output head: search --ce-chunks too (else it stays 1)
    FitFlags given;         // the flags' values on the command line (the defaults otherwise)
    int fixed_B, fixed_ffn, fixed_ce, fixed_recompute, fixed_offload, fixed_zero, fixed_offload_optim;  // given on the command line
    int batches[16], n_batches;  // the micro-batches to try, largest first
    const char* batch_unit;      // "rows" or "clips", for the messages
    void* ctx;
    FitCost (*cost)(void* ctx, const FitFlags* f, const CostModel* cm);
    char report[1200];           // what the search did, for the log ("" before it runs)
    // --fit-per-stage under --pp: stage s's memory flags (stage_mem[s]) and what its search did
    int n_stages;
    MemoryFlags* stage_mem;
    char* stage_report;          // n_stages x FIT_STAGE_REPORT
} FitSearch;
#define FIT_STAGE_REPORT 640

// Without --batch: the largest micro-batch that fits, up to what the step batch allows
// (it must stay a multiple of B*per_B; at most `cap`) or, when that is not given either,
// up to `most`, so that the optimizer's batch does not silently grow without bound.
static inline void fit_batches(FitSearch* s, int total, long long per_B, int most, int cap) {
    s->n_batches = 0;
    if (s->fixed_B) { s->batches[s->n_batches++] = s->given.B; return; }
    for (int b = total ? cap : most; b >= 1 && s->n_batches < 16; b /= 2)
        if (!total || total % ((long long)b * per_B) == 0) s->batches[s->n_batches++] = b;
    if (s->n_batches == 0) FAIL("--fit-memory: no micro-batch divides the step's batch of %d into whole micro-batches", total);
}

static inline void fit_describe(char* out, size_t n, const FitFlags* f, const FitCost* c, int with_ce, const CostModel* cm) {
    char ce[32] = "";
    if (with_ce) snprintf(ce, sizeof(ce), " --ce-chunks %d", f->mem.ce_chunks);
    snprintf(out, n, "--batch %d --ffn-chunks %d%s --recompute %d --offload-act %d --zero %d --offload-optim %d: plan %.1f MiB "
             "(+%.0f MiB reserve), predicted +%.1f%% over the flag-free step", f->B, f->mem.ffn_chunks, ce, f->mem.recompute,
             f->mem.offload_act, f->zero, f->offload_optim, c->bytes / 1048576.0, cm->reserve / 1048576.0,
             100.0 * c->seconds / c->base);
}

// Picks the flags (and the batch unless given) for the budget; writes what it did into
// report. Exits with the smallest budget that would fit when none does.
static inline FitFlags fit_memory_search(const FitSearch* s, const FitArgs* a, int rank, char* report, size_t report_n) {
    CostModel cm = cost_model_default();
    cm.link_bw = a->link_gbs * 1e9;
    cm.dp_bw = a->dp_gbs * 1e9;
    if (a->reserve_mib >= 0) cm.reserve = a->reserve_mib * 1048576.0;
    double budget = a->budget_gib * 1073741824.0;
    static const int ffn_opts[] = {1, 2, 4, 8, 16}, ce_opts[] = {1, 2, 4, 8, 16, 32, 64};
    // a FIFO without a reader fails at once instead of blocking; writes and the close are checked
    FILE* dump = a->candidates && rank == 0 ? xoutput_fopen(a->candidates, "--fit-candidates") : NULL;
    FitFlags best_f, second_f, small_f;
    FitCost best, second, small;
    memset(&best_f, 0, sizeof(best_f)); second_f = small_f = best_f;
    memset(&best, 0, sizeof(best)); second = small = best;
    best.seconds = second.seconds = INFINITY; small.bytes = INFINITY;
    int searched = 0, fitting = 0, n_ce = s->with_ce ? 7 : 1;
    for (int ib = 0; ib < s->n_batches && !isfinite(best.seconds); ib++) {
        second.seconds = INFINITY;
#ifdef LLMC_CPU
        const int n_oo = 1;  // (host and device are one memory: the flag moves nothing)
#else
        const int n_oo = 2;
#endif
        for (int oo = 0; oo < n_oo; oo++)
        for (int z = 0; z <= s->zero_max; z++)
        for (int fi = 0; fi < 5; fi++) for (int ci = 0; ci < n_ce; ci++) for (int r = 0; r <= 2; r++)
        for (int off = 0; off <= s->L; off++) {
            FitFlags f = s->given;
            f.B = s->batches[ib];
            if (!s->fixed_zero && s->zero_max > 0) f.zero = z; else if (z) continue;
            if (!s->fixed_offload_optim) f.offload_optim = oo; else if (oo) continue;
            if (!s->fixed_ffn) f.mem.ffn_chunks = ffn_opts[fi]; else if (fi) continue;
            if (s->with_ce && !s->fixed_ce) f.mem.ce_chunks = ce_opts[ci]; else if (ci) continue;
            if (!s->fixed_recompute) f.mem.recompute = r; else if (r) continue;
            if (!s->fixed_offload) f.mem.offload_act = off; else if (off) continue;
            FitCost c = s->cost(s->ctx, &f, &cm);
            if (c.bytes < 0) continue;
            int fits = c.bytes + cm.reserve <= budget;
            searched++; fitting += fits;
            if (dump && fprintf(dump, "{\"B\": %d, \"ffn_chunks\": %d, \"ce_chunks\": %d, \"recompute\": %d, \"offload_act\": %d, "
                                "\"zero\": %d, \"offload_optim\": %d, \"bytes\": %.0f, \"seconds\": %.9g, \"fits\": %d}\n",
                                f.B, f.mem.ffn_chunks, f.mem.ce_chunks, f.mem.recompute, f.mem.offload_act, f.zero,
                                f.offload_optim, c.bytes, c.seconds, fits) < 0)
                FAIL("--fit-candidates: writing '%s' failed: %s (hint: disk full?)", a->candidates, strerror(errno));
            if (c.bytes < small.bytes) { small = c; small_f = f; }
            if (!fits) continue;
            if (c.seconds < best.seconds) { second = best; second_f = best_f; best = c; best_f = f; }
            else if (c.seconds < second.seconds) { second = c; second_f = f; }
        }
    }
    if (dump) xfclose(dump, a->candidates, "--fit-candidates");
    char line[400];
    if (!isfinite(best.seconds)) {
        fit_describe(line, sizeof(line), &small_f, &small, s->with_ce, &cm);
        FAIL("--fit-memory %.3g GiB: nothing in the search space fits (%d plans tried). The smallest is %s; it needs a "
             "budget of at least %.3f GiB (plan + reserve; --fit-reserve sets the reserve)", a->budget_gib, searched, line,
             ceil((small.bytes + cm.reserve) / 1073741824.0 * 1000.0) / 1000.0);
    }
    fit_describe(line, sizeof(line), &best_f, &best, s->with_ce, &cm);
    int n = snprintf(report, report_n, "--fit-memory %.3g GiB: %d plans tried, %d fit; chose %s\n", a->budget_gib, searched,
                     fitting, line);
    if (isfinite(second.seconds)) {
        fit_describe(line, sizeof(line), &second_f, &second, s->with_ce, &cm);
        snprintf(report + n, report_n - n, "  runner-up: %s\n", line);
    } else {
        snprintf(report + n, report_n - n, "  runner-up: none (only one plan fits)\n");
    }
    return best_f;
}

// The places the search writes (B, mem; with_ce: --ce-chunks too), and which of them the
// command line gave (train_flags_parse's `given`): those stay fixed.
static inline void fit_fixed_from_flags(FitSearch* s, int* B, MemoryFlags* mem, int* zero, int* offload_optim, int with_ce,
                                        const Flag* flags, int n, const int* given) {
    s->B = B; s->mem = mem; s->zero = zero; s->offload_optim = offload_optim; s->with_ce = with_ce;
    s->fixed_zero = flag_given(flags, n, given, zero);
    s->fixed_offload_optim = flag_given(flags, n, given, offload_optim);
    s->fixed_B = flag_given(flags, n, given, B);
    s->fixed_ffn = flag_given(flags, n, given, &mem->ffn_chunks);
    s->fixed_ce = with_ce ? flag_given(flags, n, given, &mem->ce_chunks) : 0;
    s->fixed_recompute = flag_given(flags, n, given, &mem->recompute);
    s->fixed_offload = flag_given(flags, n, given, &mem->offload_act);
}

// Runs the search (s: its targets and fixed flags, L, ctx and cost filled in by the trainer;
// the micro-batches as fit_batches takes them), writes the chosen flags into the targets
// and what it did into s->report.
static inline void fit_memory_choose(FitSearch* s, int total, long long per_B, int most, int cap, const FitArgs* a,
                                     int rank) {
    FitFlags given = {*s->B, *s->mem, *s->zero, *s->offload_optim};
    if (!s->with_ce) given.mem.ce_chunks = 1;
    s->given = given;
    fit_batches(s, total, per_B, most, cap);
    FitFlags best = fit_memory_search(s, a, rank, s->report, sizeof(s->report));
    *s->B = best.B; *s->mem = best.mem; *s->zero = best.zero; *s->offload_optim = best.offload_optim;
}

// What a plan may use: the device arena, plus the host arena on the CPU build, where
// "device" and host are the same memory (offload saves nothing there).
static inline double fit_plan_bytes(const Arena* dev, const Arena* host) {
#ifdef LLMC_CPU
    return (double)dev->total + (double)host->total;
#else
    (void)host;
    return (double)dev->total;
#endif
}
