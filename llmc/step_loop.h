/*
The bookkeeping around a training step that is the same for every model: the step's
wall time, the first step's counted communication (printed beside the plan's prediction,
and make test holds them equal), the --profile-step report, the largest rank's measured
peak memory, the --log-every cadence and ETA, and the --ckpt-every cadence with its guard
(a model whose parameters are no longer finite is not written: the run stops naming the
last good checkpoint). The step itself (data, forward, backward, update, the model's own
log line and metrics) stays in the trainer's main loop.
*/
#pragma once
#include "common.h"
#include "kernels.h"
#include "logger.h"
#include "profile.h"
#include "train_args.h"
#include "parallel_args.h"
#include "param_store.h"
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

// after the update: returns the step's milliseconds; a collective (the peak memory)
static inline double step_end(StepLoop* s, int step) {
    double ms = (now_seconds() - s->t0) * 1e3;
    if (step == s->start + 1) comm_bytes_log(s->lg, "comm per step, counted in this step (bytes this rank sent)", s->comm->sent);
    if (step == s->loop->profile_step) profile_report(s->prof, s->lg, step, ms);
    size_t measured = peak_bytes_all_ranks(s->comm);  // the largest rank's
    s->peak = measured > s->peak ? measured : s->peak;
    return ms;
}

// whether the step prints its line: every --log-every steps, the first and the last
static inline int step_logs(const StepLoop* s, int step) {
    return step % s->loop->log_every == 0 || step == s->loop->steps || step == s->start + 1;
}

static inline void step_eta(const StepLoop* s, int step, char* out, size_t n) {
    format_eta(out, n, s->loop_start, step, s->start, s->loop->steps);
}

// --ckpt-every (the last step too): whether this step writes a checkpoint, to path. A
// collective: the parameters are checked to be finite on every rank first.
static inline int step_ckpt_due(StepLoop* s, int step, ParamStore* st, char* path, size_t n) {
    const TrainLoopArgs* l = s->loop;
    if (l->ckpt_every <= 0 || (step % l->ckpt_every != 0 && step != l->steps)) return 0;
    ckpt_step_path(path, n, l->run_dir, step);
    stop_if_params_not_finite(step, param_store_params_finite(st), l->run_dir, s->last_ckpt);
    return 1;
}

static inline void step_ckpt_written(StepLoop* s, int step, const char* path) {
    s->last_ckpt = step;
    logf_(s->lg, "checkpoint: %s\n", path);
}
