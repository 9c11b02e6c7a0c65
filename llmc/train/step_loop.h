/*
The bookkeeping around a training step that is the same for every model: the step's
wall time, the first step's counted communication (printed beside the plan's prediction,
and make test holds them equal), the --profile-step report, the largest rank's measured
peak memory, the step's log line (--log-every, ETA) and the metrics fields every trainer
writes, the cadence of validation and samples, the --ckpt-every cadence with its guard (a
model whose parameters are no longer finite is not written: the run stops naming the
last good checkpoint), and the run's last line. The step itself (data, forward,
backward, update, the model's throughput and validation) stays in the trainer's main loop.
*/
#pragma once
#include <stdarg.h>
#include "../core/common.h"
#include "../kernels/kernels.h"
#include "../core/logger.h"
#include "../core/signals.h"
#include "../kernels/profile.h"
#include "train_args.h"
#include "../parallel/parallel_args.h"
#include "../parallel/param_store.h"
#include "run_log.h"
#include "state_checkpoint.h"

typedef struct {
    const TrainLoopArgs* loop;
    Comm* comm;
    Profile* prof;
    Logger* lg;
    int start;          // the step the run continues from (0: a fresh run)
    int last_ckpt;      // the step of the newest checkpoint on disk, -1: none
    size_t peak;        // the largest rank's measured peak memory so far
    int stop_signal;    // a stop signal every rank has agreed on at step_end (0: none; llmc/core/signals.h)
    double loop_start;  // when the first step began (the ETA spreads everything since)
    double t0;          // when this step began
} StepLoop;

// resumed: the run continues from a checkpoint of step start, which is then on disk
static inline void step_loop_init(StepLoop* s, const TrainLoopArgs* loop, Comm* comm, Profile* prof, Logger* lg, int start,
                                  int resumed) {
    memset(s, 0, sizeof(*s));
    s->loop = loop; s->comm = comm; s->prof = prof; s->lg = lg; s->start = start;
    s->last_ckpt = resumed ? start : -1;
    s->loop_start = now_seconds();
}

static inline void step_begin(StepLoop* s, int step) {
    s->t0 = now_seconds();
    if (step == s->start + 1) memset(s->comm->sent, 0, sizeof(s->comm->sent));  // what the plan's formula predicts, counted
    if (step == s->loop->profile_step) profile_start_step(s->prof);
}

// after the update: returns the step's milliseconds; a collective (the peak memory, and
// whether any rank got a stop signal: s->stop_signal, the same on every rank)
static inline double step_end(StepLoop* s, int step) {
    double ms = (now_seconds() - s->t0) * 1e3;
    if (step == s->start + 1) comm_bytes_log(s->lg, "comm per step, counted in this step (bytes this rank sent)", s->comm->sent);
    if (step == s->loop->profile_step) {
        profile_report(s->prof, s->lg, step, ms);
        char line[256];
        for (int i = 0; matmul_algo_line(i, line, sizeof line); i++)
            logf_(s->lg, "%s%s\n", i == 0 ? "GEMM algorithms (cuBLASLt's first choice per shape, column-major terms; calls: products so far):\n  " : "  ", line);
    }
    s->stop_signal = g_stop_signal;
    size_t measured = peak_bytes_all_ranks(s->comm, &s->stop_signal);  // the largest rank's
    s->peak = measured > s->peak ? measured : s->peak;
    return ms;
}

// The step's line, every --log-every steps, the first and the last: its loss, lr, gradient
// norm and time, the trainer's throughput (rate_fmt: printf's format and arguments), the
// ETA and the largest rank's peak memory so far.
__attribute__((format(printf, 7, 8))) static inline void step_log(const StepLoop* s, int step, double loss, double lr,
                                                                  double norm, double ms, const char* rate_fmt, ...) {
    if (step % s->loop->log_every != 0 && step != s->loop->steps && step != s->start + 1) return;
    char eta[32], rate[160];
    format_eta(eta, sizeof(eta), s->loop_start, step, s->start, s->loop->steps);
    va_list ap;
    va_start(ap, rate_fmt);
    vsnprintf(rate, sizeof(rate), rate_fmt, ap);
    va_end(ap);
    logf_(s->lg, "step %5d/%d | loss %.6f | lr %.3e | norm %.4f | %.1f ms | %s | ETA %s | peak %.1f MiB%s\n", step,
          s->loop->steps, loss, lr, norm, ms, rate, eta, s->peak / 1048576.0, s->comm->size > 1 ? " (largest rank)" : "");
}

// The metrics.jsonl fields of every trainer's step: step_metrics opens the step's line with
// its loss, lr, gradient norm and time; the trainer adds its throughput; step_metrics_memory
// the largest rank's measured peak and the planned arena; the trainer its validation, then
// metrics_end.
static inline void step_metrics(const StepLoop* s, int step, double loss, double lr, double norm, double ms) {
    metrics_begin(s->lg, step);
    metrics_num(s->lg, "loss", loss); metrics_num(s->lg, "lr", lr); metrics_num(s->lg, "grad_norm", norm);
    metrics_num(s->lg, "ms", ms);
}

static inline void step_metrics_memory(const StepLoop* s, size_t arena_bytes) {
    metrics_int(s->lg, "peak_mem", (long long)s->peak); metrics_int(s->lg, "arena_bytes", (long long)arena_bytes);
}

// The step line's throughput: per_step units of --total-batch a step, each of
// tokens_per_item tokens. Counted in tokens (item NULL): the rate and the tokens seen; in
// items ("clips"): items/s and tok/s.
typedef struct { long long per_step; int tokens_per_item; const char* item; } StepRate;

static inline void step_rate_format(const StepRate* r, double ms, int step, char* out, size_t n) {
    double per_s = r->per_step / (ms / 1e3), seen = (double)step * r->per_step;
    if (r->item) snprintf(out, n, "%.1f %s/s %.0f tok/s", per_s, r->item, per_s * r->tokens_per_item);
    else snprintf(out, n, "%.0f tok/s | %.*f%s tok", per_s, seen < 1e6 ? 1 : 2, seen < 1e6 ? seen / 1e3 : seen / 1e6,
                  seen < 1e6 ? "K" : "M");
}

static inline void step_rate_metrics(const StepRate* r, Logger* lg, double ms, int step) {
    double per_s = r->per_step / (ms / 1e3);
    if (r->item) {
        char key[64];
        snprintf(key, sizeof(key), "%s_per_s", r->item);
        metrics_num(lg, key, per_s); metrics_num(lg, "tok_per_s", per_s * r->tokens_per_item);
    } else {
        metrics_num(lg, "tok_per_s", per_s); metrics_int(lg, "tokens", (long long)step * r->per_step);
    }
}

// whether something done every N steps (validation, samples; 0 = never) is done at this
// step: every N steps and at the last
static inline int step_due(const StepLoop* s, int step, int every) {
    return every > 0 && (step % every == 0 || step == s->loop->steps);
}

// --ckpt-every (the last step too): whether this step writes a checkpoint (ckpt_step_name).
// A collective: the parameters are checked to be finite on every rank first. Tests only:
// --test-nan-update plants its NaN here, after the step's update and metrics, for the
// guard to catch.
static inline int step_ckpt_due(StepLoop* s, int step, ParamStore* st) {
    const TrainLoopArgs* l = s->loop;
    if (step == l->test_nan_update) param_store_plant_nan(st);
    if (l->ckpt_every <= 0 || (step % l->ckpt_every != 0 && step != l->steps)) return 0;
    stop_if_params_not_finite(step, param_store_params_finite(st), l->run_dir, s->last_ckpt);
    return 1;
}

static inline void step_ckpt_written(StepLoop* s, int step) {
    s->last_ckpt = step;
    logf_(s->lg, "checkpoint: %s/%s\n", s->loop->run_dir, ckpt_step_name(step).s);
}

// A stop signal, agreed at this step's step_end: whether the run stops after this step, and
// then 2: this step's checkpoint (ckpt_step_name) is still to be written, or 1 when it was just
// written by --ckpt-every. Written whatever --ckpt-every says (0 included): the user asked to
// stop, the state must survive. A signal during the last step stops nothing: the run is
// complete and ends as usual (exit 0).
static inline int step_stop_due(StepLoop* s, int step, ParamStore* st) {
    if (!s->stop_signal || step >= s->loop->steps) return 0;
    if (s->last_ckpt == step) return 1;
    stop_if_params_not_finite(step, param_store_params_finite(st), s->loop->run_dir, s->last_ckpt);
    return 2;
}

// the stop's message (stdout and main.log; the other ranks stay quiet): the signal, the step,
// the checkpoint and what continues it. The caller then ends the run with EXIT_STOPPED.
static inline void step_stop_log(const StepLoop* s, int step) {
    logf_(s->lg, "stopped by %s%s after step %d of %d: checkpoint %s/%s written; --resume auto continues from it "
          "(exit %d)\n", signal_name(s->stop_signal), s->comm->size > 1 ? " (on at least one rank)" : "", step,
          s->loop->steps, s->loop->run_dir, ckpt_step_name(step).s, EXIT_STOPPED);
}

// The run's last line: the largest rank's measured peak against the planned arena. A
// collective; a run that trained nothing (a finished run resumed, --steps 0) measures here.
static inline void step_loop_done(StepLoop* s, size_t arena_bytes) {
    if (s->start >= s->loop->steps) s->peak = peak_bytes_all_ranks(s->comm, NULL);
    logf_(s->lg, "done: peak memory measured %.1f MiB (%s%s), arena %.1f MiB planned%s\n", s->peak / 1048576.0,
          dev_measured_name(), s->comm->size > 1 ? ", largest rank" : "", arena_bytes / 1048576.0,
          s->comm->size > 1 ? " per rank" : "");
}
