/*
The runner: everything train_llama and train_dit do alike, once, driven by a small table
of the model's operations (ModelOps). llm.c's train_gpt2.cu main loop, with what a
cluster run needs around it:

    parse (the trainer)  ->  the world  ->  every rank's flags compared (same_config.h)
    ->  the groups  ->  --fit-memory  ->  the batch  ->  the run directory (run_open.h: locked,
    judged)  ->  the device  ->  build (the plan)
    ->  config and plan printed (--plan-only / --plan-json: every rank's plan summarised, then exit)
    ->  resume | init-from | init  ->  the step loop:
            zero grads; per micro-batch: next batch, the model (units, forward + backward, or fused);
            the loss over the ranks; grad norm;
            stop if not finite; update; log, validate, metrics, checkpoint,
            stop (a signal every rank agreed on: the step's checkpoint, exit 75), sample
    ->  the last validation and sample of a run with nothing to train  ->  done

The model is the trainer's: ModelOps' functions take the trainer's context (t), which
holds its arguments, the model and its data. The runner never sees the model's types;
it sees the ModelCore the model derives from (model_core.h: the parameter store, arenas,
activation plan, the loss), which build returns: the loss reduction, the update and the
step line's throughput are the runner's, the same for every model.

Hooks for what is coming (docs/design.md 10): a micro-batch unit by unit (train_dit's
step); forward and backward as separate entries, which a pipeline stage runs per
micro-batch (train_llama's step); and
the plan of every rank, built with plan_cost on a Comm laid out as that
rank (runner_rank_plans), so that a stage or shard whose plan differs is reported beside
rank 0's.
*/
#pragma once
#include "../core/common.h"
#include "../core/logger.h"
#include "../core/signals.h"
#include "../parallel/comm.h"
#include "../parallel/parallel_args.h"
#include "../parallel/param_store.h"
#include "train_args.h"
#include "fit_memory.h"
#include "same_config.h"
#include "run_log.h"
#include "step_loop.h"
#include "state_checkpoint.h"
#include "run_open.h"
#include "trainer.h"
#include "model_core.h"

typedef struct {
    const char* program;  // "train_llama": the logs and the cross-rank check
    const char* unit;     // what the plan calls a layer: "layer", "block"
    const char* fresh;    // what --init-from starts afresh ("optimizer state and step")
    const char* item;     // what --total-batch counts when not tokens ("clips": the step line gives clips/s), or NULL
    const char* data_flag;  // the flag naming the training data ("train-data"): part of what run.json says a run is
    int fit_most, fit_cap;  // --fit-memory without --batch: the micro-batches tried (fit_batches)

    // the model: built as planned (allocate 0: the plan only) for micro-batches of B, with
    // the flags given; free gives back all of it
    ModelCore* (*build)(void* t, Comm* comm, const MemoryFlags* mem, const ParallelFlags* pf, int B, int allocate);
    void (*free)(void* t);
    void (*init_params)(void* t, uint64_t seed);
    // checkpoints (llmc/train/state_checkpoint.h), read and written here: the format; the
    // model's shape in the header; extra (NULL: none) adds the trainer's own header fields
    // and fills the extra block (returns its bytes); restore (NULL: nothing to restore, as
    // when the data order is a function of the seed and the step) takes them back and
    // returns 0 when the data's position does not apply, and then data_restart continues
    // on a new order; check reads a header (run_open's --resume auto)
    const CkptFormat* ckpt;
    CkptShape (*ckpt_shape)(void* t);
    size_t (*ckpt_extra)(void* t, int header[256], unsigned char extra[CKPT_EXTRA_MAX]);
    int (*ckpt_restore)(void* t, const int* header, const unsigned char* extra, size_t extra_bytes);
    void (*data_restart)(void* t, int step, Logger* lg);
    const char* (*ckpt_check)(const char* path, void* ci);

    // one optimizer step: for each micro-batch next_batch, then the model, in the first of
    // these a model provides: unit by unit (units: how many; a unit is a layer, or the
    // input or the head; a pipeline stage's units are its layers), forward then backward
    // (a stage's per micro-batch), or forward_backward (fused). Full sharding gathers a
    // layer's parameters inside the model, where the layer runs (param_store_layer_begin),
    // since validation, sampling and the test programs run layers too. Each adds its
    // losses to the ModelCore, which the runner reduces over the ranks (model_core_take_loss).
    // Under --pp the runner runs the stage's schedule (llmc/parallel/pipeline.h) on forward
    // and backward of each chunk (a rank's layers; one chunk but under --pp-schedule
    // interleaved), next_batch before a micro-batch's first chunk, and pp_tensor says where
    // a chunk's boundary tensors are (PP_IN, PP_OUT, PP_DIN, PP_DOUT).
    void (*next_batch)(void* t, int step, int micro);
    int (*units)(void* t);
    void (*unit_forward)(void* t, int u);
    void (*unit_backward)(void* t, int u, int last);
    void (*forward)(void* t, int micro, int chunk);
    void (*backward)(void* t, int micro, int chunk, int last);
    void (*forward_backward)(void* t, int micro, int last);
    floatX* (*pp_tensor)(void* t, int micro, int chunk, int which);

    // the trainer's own: its batch (returns micro-batches per step; before the device);
    // what opens before the device (NULL: nothing); its data and samplers after the plan;
    // validation (final: of a run with nothing to train) and its metrics; samples; what
    // start opened, closed
    int (*resolve_batch)(void* t, Comm* comm);
    void (*prepare)(void* t, Comm* comm);
    void (*start)(void* t, Comm* comm, Logger* lg);
    void (*validate)(void* t, Logger* lg, int step, int final);
    void (*val_metrics)(void* t, Logger* lg);
    void (*sample)(void* t, Logger* lg, int step);
    void (*finish)(void* t);

    // the plan: the config lines (between the program's line and the runtime's); lines between the plan's head and tail (NULL: none); lines
    // of --plan-only alone (NULL: none); the bytes a step sends by the model's formula; the
    // model's JSON fields (returns 1 when the JSON carries the comm bytes)
    void (*print_config)(void* t, Logger* lg);
    void (*plan_lines)(void* t, Logger* lg);
    void (*plan_only_lines)(void* t, Logger* lg);
    CommBytes (*comm_bytes)(void* t);
    int (*plan_json)(void* t, char* out, size_t n);
    // a candidate's plan and predicted cost (bytes < 0: not a valid layout), built on comm
    // (--fit-memory's search; every rank's plan, with comm laid out as that rank)
    FitCost (*plan_cost)(void* t, Comm* comm, const FitFlags* f, const CostModel* cm);
} ModelOps;

// ----------------------------------------------------------------------------
// --fit-memory: the search (llmc/train/fit_memory.h) over the trainer's plan_cost

// stage: under --pp the stage whose plan is the cost (--fit-per-stage), -1 every stage's, the
// largest bytes and the slowest (the pipeline moves at its slowest stage's pace)
typedef struct { const ModelOps* ops; void* t; Comm* comm; int stage; } RunnerFit;

// a Comm laid out as rank `rank` of comm's world, for its plan alone (no collective may be called)
static inline void runner_plan_comm(const Comm* comm, int rank, Comm* rc) {
    comm_init_plan(rc, comm->dp, comm->tp, comm->cp, comm->ulysses, comm->pp);
    comm_set_layout(rc, comm->size, rank, comm->tp, comm->cp, comm->ulysses, comm->pp);
    rc->cp_mode = comm->cp_mode;
}

static inline FitCost runner_fit_cost(void* ctx, const FitFlags* f, const CostModel* cm) {
    const RunnerFit* x = (const RunnerFit*)ctx;
    if (x->comm->pp == 1) return x->ops->plan_cost(x->t, x->comm, f, cm);
    FitCost most = {-1.0, 0.0, 0.0, 0, 0.0, 0.0};
    for (int s = 0; s < x->comm->pp; s++) {
        if (x->stage >= 0 && s != x->stage) continue;
        Comm rc;
        runner_plan_comm(x->comm, s * x->comm->cp * x->comm->tp, &rc);  // (the stage's first rank: TP rank 0, the largest)
        FitCost c = x->ops->plan_cost(x->t, &rc, f, cm);
        if (c.bytes < 0) return c;
        double secs = most.seconds > c.seconds ? most.seconds : c.seconds, base = most.base > c.base ? most.base : c.base;
        if (c.bytes > most.bytes) most = c;
        most.seconds = secs; most.base = base;
    }
    return most;
}

// unit: the --total-batch units one row of --batch counts (tokens of a sample, 1 clip). Under
// --pp every stage's plan must fit; with --fit-per-stage each stage then searches its own
// memory flags at the batch and --zero chosen for all (every rank runs every stage's search,
// a plan-only computation, and takes its own stage's).
static inline void runner_fit_memory(const ModelOps* ops, void* t, RunArgs* a, Comm* comm, int unit, int L) {
    RunnerFit ctx = {ops, t, comm, -1};
    FitSearch* s = &a->fit_search;
    s->L = L; s->ctx = &ctx; s->cost = runner_fit_cost;
    s->zero_max = comm->dp * comm->cp > 1 ? 3 : 0;  // the stages differ only where the parameters' group has ranks
    if (comm->pp > 1 && s->zero_max > 1) s->zero_max = 1;  // (--zero 2 and 3 are refused with pipeline stages)
    fit_memory_choose(s, a->total_batch, (long long)unit * comm->dp, ops->fit_most, ops->fit_cap, &a->fit, comm->rank);
    if (!a->fit.per_stage || comm->pp == 1) return;
    s->n_stages = comm->pp;
    s->stage_mem = (MemoryFlags*)xmalloc((size_t)comm->pp * sizeof(MemoryFlags));
    s->stage_report = (char*)xmalloc((size_t)comm->pp * FIT_STAGE_REPORT);
    FitArgs quiet = a->fit;
    quiet.candidates = NULL;  // (--fit-candidates holds the search for all stages)
    for (int st = 0; st < comm->pp; st++) {
        FitSearch one = *s;
        one.given.B = *s->B; one.given.zero = *s->zero; one.given.offload_optim = *s->offload_optim;
        one.fixed_B = one.fixed_zero = one.fixed_offload_optim = 1;
        one.batches[0] = *s->B; one.n_batches = 1;
        RunnerFit sc = {ops, t, comm, st};
        one.ctx = &sc;
        s->stage_mem[st] = fit_memory_search(&one, &quiet, comm->rank, s->stage_report + (size_t)st * FIT_STAGE_REPORT,
                                             FIT_STAGE_REPORT).mem;
    }
    *s->mem = s->stage_mem[comm->pp_rank];
}

// ----------------------------------------------------------------------------
// --attention auto: the fastest kernel measured on a GPU whose plan fits
// (llmc/kernels/attention_select.h). A faster candidate's extra memory is its workspace, in
// the plan: it is kept when the plan plus --fit-memory's reserve (the CUDA context, the
// libraries, cuBLASLt's workspace) is within the device's memory and the plan within what is
// free now; otherwise the next one, down to the one that adds nothing. Every rank takes the
// slowest any rank needs, so that the ranks run one kernel. Under --fit-memory auto takes
// that last one before the search (which weighs memory flags, not attention kernels).
// --plan-only has no device: it keeps the fastest. why: the log's line ("" if nothing to say).
static inline void runner_attention_auto(const ModelOps* ops, void* t, RunArgs* a, Comm* comm, char* why, size_t n) {
    why[0] = 0;
    if (attention_auto_fallbacks() == 0) return;
    const AttentionImpl fastest = g_attention_impl;
    if (a->fit.budget_gib > 0.0f) {
        while (attention_auto_fallbacks() > 0) attention_auto_step_down();
        snprintf(why, n, "under --fit-memory auto takes %s, which adds no memory (%s was timed faster)\n",
                 attention_impl_name(g_attention_impl), attention_impl_name(fastest));
        return;
    }
    if (a->loop.plan_only) {
        snprintf(why, n, "a device that cannot hold this plan with %s takes the next of auto's candidates, down to %s\n",
                 attention_impl_name(fastest), attention_impl_name(g_attention_auto[g_attention_auto_n - 1]));
        return;
    }
#ifndef LLMC_CPU
    size_t free_b = 0, total_b = 0;
    cudaCheck(cudaMemGetInfo(&free_b, &total_b));
    CostModel cm = cost_model_default();
    if (a->fit.reserve_mib >= 0) cm.reserve = a->fit.reserve_mib * 1048576.0;
    RunnerFit ctx = {ops, t, comm, -1};
    FitFlags f = {a->B, a->mem, a->par.zero, a->par.offload_optim};
    double fastest_plan = -1.0;
    while (attention_auto_fallbacks() > 0) {
        double plan = runner_fit_cost(&ctx, &f, &cm).bytes;
        if (fastest_plan < 0) fastest_plan = plan;
        if (plan >= 0 && plan + cm.reserve <= (double)total_b && plan <= (double)free_b) break;
        attention_auto_step_down();
    }
    const int mine = g_attention_auto_at;
    double at = mine;
    comm_host_all_reduce(comm, GROUP_WORLD, &at, 1, COMM_MAX);
    while (g_attention_auto_at < (int)at) attention_auto_step_down();
    if (mine > 0)
        snprintf(why, n, "%s's plan (%.0f MiB, + %.0f MiB reserve) does not fit this device (%.0f MiB, %.0f free): "
                 "auto takes %s\n", attention_impl_name(fastest), fastest_plan / 1048576.0, cm.reserve / 1048576.0,
                 total_b / 1048576.0, free_b / 1048576.0, attention_impl_name(g_attention_impl));
    else if (g_attention_impl != fastest)
        snprintf(why, n, "another rank's device cannot hold its plan with %s: auto takes %s on every rank\n",
                 attention_impl_name(fastest), attention_impl_name(g_attention_impl));
#else
    (void)ops; (void)t; (void)comm;
#endif
}

// ----------------------------------------------------------------------------
// the plan of every rank: rank 0's is printed in full; the ranks' plans differ under TP (a
// hidden size split unevenly), the sharded vocabulary, ZeRO's padding and CP, so each
// distinct one is summarised, and the largest named

#define RUNNER_MAX_PLANS 16

typedef struct {
    int n;                                  // distinct plans
    double dev[RUNNER_MAX_PLANS], host[RUNNER_MAX_PLANS];
    int first[RUNNER_MAX_PLANS], count[RUNNER_MAX_PLANS];  // the first rank with it, how many
    int stage[RUNNER_MAX_PLANS];            // --pp: the pipeline stage of its ranks (-1: ranks of several stages)
    int pp;
    char ranks[RUNNER_MAX_PLANS][256];      // "0, 2-3"
    int largest;                            // the rank whose device plan is the largest (the first such)
    double largest_dev;
    int size;                               // the ranks planned
    int unlisted;                           // ranks whose plan is none of the first RUNNER_MAX_PLANS distinct ones
} RankPlans;

static inline void rank_list_add(char* out, size_t n, int* last, int* run, int r) {
    if (*last >= 0 && r == *last + 1) { (*run)++; *last = r; return; }
    if (*run > 0) snprintf(out + strlen(out), n - strlen(out), "-%d", *last);
    snprintf(out + strlen(out), n - strlen(out), "%s%d", out[0] ? ", " : "", r);
    *last = r; *run = 0;
}

// stage_mem: under --fit-per-stage each stage's memory flags (NULL: mem on every rank)
static inline void runner_rank_plans(const ModelOps* ops, void* t, const Comm* comm, int B, const MemoryFlags* mem,
                                     const MemoryFlags* stage_mem, int zero, int offload_optim, RankPlans* p) {
    FitFlags f = {B, *mem, zero, offload_optim};
    memset(p, 0, sizeof(*p));
    p->size = comm->size; p->pp = comm->pp;
    int last[RUNNER_MAX_PLANS], run[RUNNER_MAX_PLANS];
    CostModel cm = cost_model_default();
    for (int r = 0; r < comm->size; r++) {
        Comm rc;
        runner_plan_comm(comm, r, &rc);
        if (stage_mem) f.mem = stage_mem[rc.pp_rank];
        FitCost c = ops->plan_cost(t, &rc, &f, &cm);
        int i = 0;
        while (i < p->n && !(p->dev[i] == c.dev && p->host[i] == c.host)) i++;
        if (r == 0 || c.dev > p->largest_dev) { p->largest = r; p->largest_dev = c.dev; }
        if (i == p->n && p->n == RUNNER_MAX_PLANS) { p->unlisted++; continue; }  // still counted for the largest
        if (i == p->n) {
            p->dev[i] = c.dev; p->host[i] = c.host; p->first[i] = r; last[i] = -1; run[i] = 0; p->stage[i] = rc.pp_rank; p->n++;
        }
        if (p->stage[i] != rc.pp_rank) p->stage[i] = -1;
        p->count[i]++;
        rank_list_add(p->ranks[i], sizeof(p->ranks[i]), &last[i], &run[i], r);
    }
    for (int i = 0; i < p->n; i++)
        if (run[i] > 0) snprintf(p->ranks[i] + strlen(p->ranks[i]), sizeof(p->ranks[i]) - strlen(p->ranks[i]), "-%d", last[i]);
}

static inline void rank_plans_log(Logger* lg, const RankPlans* p) {
    logf_(lg, "the plans of all %d ranks: %d distinct; the largest is rank %d's (device %.1f MiB)\n", p->size, p->n,
          p->largest, p->largest_dev / 1048576.0);
    for (int i = 0; i < p->n; i++) {
        char stage[32] = "";
        if (p->pp > 1 && p->stage[i] >= 0) snprintf(stage, sizeof(stage), " (pipeline stage %d)", p->stage[i]);
        logf_(lg, "  rank%s %s%s: device %.1f MiB, host %.1f MiB\n", p->count[i] > 1 ? "s" : "", p->ranks[i], stage,
              p->dev[i] / 1048576.0, p->host[i] / 1048576.0);
    }
    if (p->unlisted) logf_(lg, "  %d more ranks in further distinct plans, not listed (the largest above counts them)\n", p->unlisted);
}

// the JSON field (docs/formats.md): "rank_plans": {"ranks": N, "largest": R, "plans": [...]}
static inline void rank_plans_json(char* out, size_t n, const RankPlans* p) {
    snprintf(out, n, "\"rank_plans\": {\"ranks\": %d, \"largest\": %d, \"plans\": [", p->size, p->largest);
    for (int i = 0; i < p->n; i++)
        snprintf(out + strlen(out), n - strlen(out), "%s{\"ranks\": \"%s\", \"first\": %d, \"count\": %d, \"stage\": %d, "
                 "\"device\": %.0f, \"host\": %.0f}", i ? ", " : "", p->ranks[i], p->first[i], p->count[i], p->stage[i],
                 p->dev[i], p->host[i]);
    snprintf(out + strlen(out), n - strlen(out), "], \"unlisted\": %d}", p->unlisted);
}

// ----------------------------------------------------------------------------
// the run

static inline void runner_print_plan(const ModelOps* ops, void* t, Logger* lg, const Comm* comm, const ModelCore* v) {
    if (lg->quiet) return;
    log_plan_head(lg, comm, &v->dev, &v->host);
    if (ops->plan_lines) ops->plan_lines(t, lg);
    host_optim_log_plan(lg, &v->st.host, v->st.lay.n_opt, HAVE_MASTER_WEIGHTS);
    log_plan_tail(lg, &v->acts, ops->unit, ops->comm_bytes(t));
}

static inline void runner_write_plan_json(const ModelOps* ops, void* t, const ModelCore* v, const RankPlans* rp,
                                          const char* path) {
    char extra[8192];
    int with_comm = ops->plan_json(t, extra, sizeof(extra) - 4096);
    size_t len = strlen(extra);
    snprintf(extra + len, sizeof(extra) - len, "%s", len ? ", " : "");
    rank_plans_json(extra + strlen(extra), sizeof(extra) - strlen(extra), rp);
    CommBytes cb = ops->comm_bytes(t);
    trainer_plan_json(path, &v->acts, &v->off, v->num_params, extra, with_comm ? &cb : NULL, &v->dev, &v->host);
}

// A checkpoint of the model's state, NAME in the run directory (a collective: every rank
// writes its own pieces)
static inline void runner_ckpt_write(const ModelOps* ops, void* t, ModelCore* v, const RunDir* rd, const char* name, int step) {
    int h[256] = {0};
    unsigned char extra[CKPT_EXTRA_MAX] = {0};
    CkptShape shape = ops->ckpt_shape(t);
    ckpt_shape_put(&shape, h);
    size_t n = ops->ckpt_extra ? ops->ckpt_extra(t, h, extra) : 0;
    ckpt_state_write(&v->st, ops->ckpt, rd, name, h, step, v->num_params, extra, n);
}

// the value of the string flag `name` of the table (NULL: no such flag)
static inline const char* runner_flag_string(const RunArgs* a, const char* name) {
    for (int i = 0; name && i < a->nflags; i++)
        if (a->flags[i].type == 's' && strcmp(a->flags[i].name, name) == 0) return *(const char**)a->flags[i].ptr;
    return NULL;
}

// Loads a checkpoint written by any layout into this one, after every rank has checked it
// and its shape; returns its step. params_only (--init-from): the parameters alone, the
// moments at zero, the data untouched. *restored: whether the data's position came back.
static inline int runner_ckpt_read(const ModelOps* ops, void* t, ModelCore* v, const char* path, int params_only,
                                   int* restored) {
    CkptInfo ci;
    ckpt_check_all_ranks(v->comm, path, ops->ckpt_check, &ci, sizeof(ci));
    CkptShape shape = ops->ckpt_shape(t);
    ckpt_shape_check(&shape, path, ci.header);
    unsigned char extra[CKPT_EXTRA_MAX];
    ckpt_state_read(&v->st, path, &ci, v->num_params, params_only, extra);
    *restored = params_only || !ops->ckpt_restore || ops->ckpt_restore(t, ci.header, extra, ci.extra_bytes);
    return ci.header[ops->ckpt->step_at];
}

// one micro-batch of the step: the data, then the model (see ModelOps)
static inline void runner_micro_step(const ModelOps* ops, void* t, int step, int micro, int last) {
    ops->next_batch(t, step, micro);
    if (ops->unit_forward) {
        int n = ops->units(t);
        for (int u = 0; u < n; u++) ops->unit_forward(t, u);
        for (int u = n - 1; u >= 0; u--) ops->unit_backward(t, u, last);
    } else if (ops->forward) {
        ops->forward(t, micro, 0);
        ops->backward(t, micro, 0, last);
    } else {
        ops->forward_backward(t, micro, last);
    }
}

// --pp: the step as the stage's schedule runs it, each micro-batch's data read before its first chunk
typedef struct { const ModelOps* ops; void* t; int step; } RunnerStage;

static inline void runner_stage_forward(void* ctx, int micro, int chunk) {
    RunnerStage* x = (RunnerStage*)ctx;
    if (chunk == 0) x->ops->next_batch(x->t, x->step, micro);
    x->ops->forward(x->t, micro, chunk);
}
static inline void runner_stage_backward(void* ctx, int micro, int chunk, int last) {
    RunnerStage* x = (RunnerStage*)ctx;
    x->ops->backward(x->t, micro, chunk, last);
}
static inline floatX* runner_stage_tensor(void* ctx, int micro, int chunk, int which) {
    RunnerStage* x = (RunnerStage*)ctx;
    return x->ops->pp_tensor(x->t, micro, chunk, which);
}

// one optimizer step's micro-batches: the loop, or under --pp the stage's schedule, after
// which the tensors several stages hold are summed and the rest reduced (param_store_pipeline_done)
static inline void runner_step_micro_batches(const ModelOps* ops, void* t, ModelCore* v, int step, int micro_steps) {
    if (v->comm->pp == 1) {
        for (int micro = 0; micro < micro_steps; micro++) runner_micro_step(ops, t, step, micro, micro == micro_steps - 1);
        return;
    }
    RunnerStage x = {ops, t, step};
    PpHooks h = {&x, runner_stage_forward, runner_stage_backward, runner_stage_tensor};
    pipeline_run_step(&v->pipe, &h);
    param_store_pipeline_done(&v->st);
}

// the entries every model gives (the others may be NULL): a missing one is a trainer's bug,
// named at start rather than found as a crash at its first call
static inline void runner_check_ops(const ModelOps* o) {
    const struct { const char* name; int given; } need[] = {
        {"build", o->build != NULL}, {"free", o->free != NULL}, {"init_params", o->init_params != NULL},
        {"ckpt", o->ckpt != NULL}, {"ckpt_shape", o->ckpt_shape != NULL}, {"ckpt_check", o->ckpt_check != NULL},
        {"next_batch", o->next_batch != NULL},
        {"forward_backward, forward + backward or units + unit_forward + unit_backward",
         o->forward_backward || (o->forward && o->backward) || (o->units && o->unit_forward && o->unit_backward)},
        {"resolve_batch", o->resolve_batch != NULL}, {"start", o->start != NULL}, {"validate", o->validate != NULL},
        {"val_metrics", o->val_metrics != NULL}, {"sample", o->sample != NULL}, {"finish", o->finish != NULL},
        {"print_config", o->print_config != NULL}, {"comm_bytes", o->comm_bytes != NULL},
        {"plan_json", o->plan_json != NULL}, {"plan_cost", o->plan_cost != NULL},
    };
    for (size_t i = 0; i < sizeof(need) / sizeof(need[0]); i++)
        if (!need[i].given) FAIL("%s's ModelOps has no %s (llmc/train/runner.h)", o->program, need[i].name);
}

// The whole run of a trainer whose arguments a holds (parsed and checked by the trainer),
// unit and L as runner_fit_memory takes them. Returns the exit status.
static inline int runner_main(const ModelOps* ops, void* t, RunArgs* a, int unit, int L) {
    const TrainLoopArgs* l = &a->loop;
    runner_check_ops(ops);
    if (l->plan_only) signals_stop_default();  // no step loop, nothing to save: a stop signal just ends it
    Comm comm;
    parallel_comm_world(&comm, &a->par, l->plan_only);
    same_config_check(&comm, ops->program, a->flags, a->nflags);  // before the flags split the world into groups
    parallel_comm_groups(&comm, &a->par, l->plan_only);
    char auto_why[400] = "";
    if (a->fit.budget_gib > 0.0f) runner_attention_auto(ops, t, a, &comm, auto_why, sizeof(auto_why));
    if (a->fit.budget_gib > 0.0f) runner_fit_memory(ops, t, a, &comm, unit, L);
    a->grad_accum = ops->resolve_batch(t, &comm);
    ParallelFlags pf = parallel_flags_resolve(&a->par, a->shard_vocab, a->grad_accum);
    Logger lg = logger_for_rank(l->plan_only ? 0 : comm.rank);  // (--plan-only is one process, whichever rank it plans)
    // the run directory, locked and judged before the data, the device and the plan's memory: a run
    // refused there costs nothing (llmc/train/run_open.h)
    RunStart rs;
    CkptShape shape = ops->ckpt_shape(t);
    const char* resume = run_open(&rs, &comm, &lg, l, l->start_over, l->keep_last, ops->program, &shape,
                                  runner_flag_string(a, ops->data_flag), ops->ckpt, ops->ckpt_check);
    if (ops->prepare && !l->plan_only) ops->prepare(t, &comm);  // --plan-only: no data, no device, no run directory
    parallel_device_setup(&comm, l->plan_only);
    if (!(a->fit.budget_gib > 0.0f)) runner_attention_auto(ops, t, a, &comm, auto_why, sizeof(auto_why));
    if (comm.pp > 1 && !(ops->forward && ops->backward && ops->pp_tensor))
        FAIL("%s has no pipeline stages (its ModelOps lacks forward, backward or pp_tensor): run it without --pp", ops->program);
    ModelCore* v = ops->build(t, &comm, &a->mem, &pf, a->B, !l->plan_only);
    v->micro_steps = a->grad_accum;  // (the plan's communication bytes)
    logf_(&lg, "%s | %s | %s | %s\n", ops->program, v->allocated ? dev_name() : "plan only", PRECISION_NAME, l->model);
    ops->print_config(t, &lg);
    if (comm.pp > 1) {
        char line[2048];
        pipeline_describe(&v->pipe, &v->split, line, sizeof(line));
        logf_(&lg, "%s", line);
    }
    log_runtime(&lg, l->attention, auto_why);
    logf_(&lg, "%s", a->fit_search.report);
    for (int st = 0; st < a->fit_search.n_stages; st++)  // (--fit-per-stage)
        logf_(&lg, "  pipeline stage %d, its own flags: %s", st, a->fit_search.stage_report + (size_t)st * FIT_STAGE_REPORT);
    runner_print_plan(ops, t, &lg, &comm, v);
    if ((l->plan_only || l->plan_json) && !lg.quiet) {
        RankPlans rp;
        runner_rank_plans(ops, t, &comm, a->B, &a->mem, a->fit_search.stage_mem, a->par.zero, a->par.offload_optim, &rp);
        if (l->plan_only && comm.size > 1) rank_plans_log(&lg, &rp);
        if (l->plan_only && ops->plan_only_lines) ops->plan_only_lines(t, &lg);
        if (l->plan_json) runner_write_plan_json(ops, t, v, &rp, l->plan_json);
    }
    if (l->plan_only) { ops->free(t); return 0; }
    if (l->profile_step > 0) profile_setup(&v->prof, v->stream);
    ops->start(t, &comm, &lg);

    int start = 0;
    if (resume) {
        int restored = 0;
        start = runner_ckpt_read(ops, t, v, resume, 0, &restored);
        ckpt_log_resumed(&lg, resume, start, l->run_dir);
        if (!restored && ops->data_restart) ops->data_restart(t, start, &lg);
    } else if (l->init_from) {
        int restored = 0, was = runner_ckpt_read(ops, t, v, l->init_from, 1, &restored);
        logf_(&lg, "parameters from %s (its step %d); %s start fresh\n", l->init_from, was, ops->fresh);
    } else {
        ops->init_params(t, (uint64_t)l->seed);
    }
    run_start(&rs, &lg);  // the inputs are accepted: from here on the run directory is written
    // tests only: the state just loaded, written again at once, so that a file written by
    // one layout can be compared byte for byte with the same state written by another
    if (resume && getenv("LLMC_TEST_CKPT_AT_RESUME")) runner_ckpt_write(ops, t, v, &rs.rd, ckpt_step_name(start).s, start);
    // the starting point of a run, for a PyTorch peer to start from the same weights
    if (a->save_init && !resume) {
        runner_ckpt_write(ops, t, v, &rs.rd, ckpt_step_name(0).s, 0);
        logf_(&lg, "initial weights written to %s/%s\n", l->run_dir, ckpt_step_name(0).s);
    }

    StepLoop sl;
    step_loop_init(&sl, l, &comm, &v->prof, &lg, start, resume != NULL);
    PipelineStats pstats = {0, 0, 0, 0, 0, 0};  // --pp: the bubble measured (the first step, warming up, left out)
    for (int step = start + 1; step <= l->steps; step++) {
        step_begin(&sl, step);
        float lr = lr_at_step(step, l->steps, l->warmup, l->lr, l->min_lr_frac);
        param_store_zero_grads(&v->st);
        runner_step_micro_batches(ops, t, v, step, a->grad_accum);
        if (step > start + 1) pipeline_stats_add(&pstats, &v->pipe);
        double loss = model_core_take_loss(v);
        float norm = param_store_grad_norm(&v->st);
        stop_if_not_finite(step, loss, norm, l->run_dir, sl.last_ckpt);
        model_core_apply_update(v, l, lr, norm, step);
        double ms = step_end(&sl, step);
        StepRate rate = {a->total_batch, v->tokens_per_item, ops->item};
        char line[160];
        step_rate_format(&rate, ms, step, line, sizeof(line));
        step_log(&sl, step, loss, lr, norm, ms, "%s", line);
        if (step_due(&sl, step, l->val_every)) ops->validate(t, &lg, step, 0);
        step_metrics(&sl, step, loss, lr, norm, ms);
        step_rate_metrics(&rate, &lg, ms, step);
        step_metrics_memory(&sl, v->dev.total);
        ops->val_metrics(t, &lg);
        metrics_end(&lg);
        // the checkpoint first: whatever sampling meets, the step's state is on disk
        if (step_ckpt_due(&sl, step, &v->st)) {
            runner_ckpt_write(ops, t, v, &rs.rd, ckpt_step_name(step).s, step);
            step_ckpt_written(&sl, step);
            run_keep_last(&rs, &lg);
        }
        // a stop signal every rank agreed on at step_end: this step's checkpoint, then exit 75
        if (int due = step_stop_due(&sl, step, &v->st)) {
            signals_stop_under_way();
            if (due == 2) {
                runner_ckpt_write(ops, t, v, &rs.rd, ckpt_step_name(step).s, step);
                step_ckpt_written(&sl, step);
                run_keep_last(&rs, &lg);
            }
            step_stop_log(&sl, step);
            ops->finish(t);
            logger_close(&lg);
            run_close(&rs);
            ops->free(t);
            comm_finalize(&comm);
            return EXIT_STOPPED;
        }
        if (step_due(&sl, step, a->sample_every)) ops->sample(t, &lg, step);
    }
    if (start >= l->steps) {  // nothing to train (--steps 0, or a finished run resumed): evaluate and sample it
        if (l->val_every > 0) ops->validate(t, &lg, start, 1);
        if (a->sample_every > 0) ops->sample(t, &lg, start);
    }
    char which[64];
    snprintf(which, sizeof(which), "steps %d-%d", start + 2, l->steps);
    pipeline_stats_log(&pstats, &v->pipe, &lg, which, (double)v->dev.total);
    step_loop_done(&sl, v->dev.total);
    ops->finish(t);
    logger_close(&lg);
    run_close(&rs);
    ops->free(t);
    comm_finalize(&comm);
    return 0;
}
