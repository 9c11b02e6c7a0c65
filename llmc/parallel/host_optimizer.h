/*
--offload-optim 1: the optimizer of this rank's shard on the host. The fp32 master weights
(where the build has them) and AdamW's moments of the owned elements live in pinned host
memory; AdamW runs on the CPU; the device keeps the parameters and gradients.

The flow of one step, over groups of owned pieces (group b < L + 1: DP bucket b; the last
group: the vocabulary rows that --shard-vocab owns over DP, which are reduced outside the
buckets):
  host_optim_fetch_*   as backward completes a bucket and its reduction is enqueued, the
                       copy stream waits for the compute and communication streams and
                       copies the bucket's reduced gradient shard (and, without master
                       weights, its parameters) into the pinned staging: the copies overlap
                       the backward of the layers below
  host_adamw           in the update, group by group in the order the copies started: wait
                       for the group's copies, AdamW over its pieces on all CPU threads,
                       the updated parameters into the staging
  host_optim_send      then their upload on the copy stream, which overlaps the CPU update
                       of the next group
  host_optim_done      the compute stream waits for the uploads (the all-gather of ZeRO
                       and the next forward read the parameters)
  host_optim_step_begin  at the next step's start (its gradients zeroed): what a backward
                       without an update (a test's gradient check) started is forgotten
The update cannot start before backward ends: global-norm clipping (--grad-clip > 0)
scales every gradient by a factor known only once all of them are reduced, and the
norm is computed on the device, from the same reduced gradients, as without the flag.

The update is spread over all CPU threads (OpenMP) but not SIMD-vectorised: the CPU build
calls the device update itself, whose loop GCC does not vectorise (sqrtf's errno), and the
CUDA build's host code is compiled without -mfma, so fmaf is a call (an FMA instruction
inside glibc). The arithmetic is the device update's: in the CPU build the very function the flag-off
run calls (llmc/kernels/cpu/adamw.h), so the two runs are bitwise identical; in the CUDA
build adamw_element of llmc/kernels/adamw.cuh, which the kernel calls too, with every
multiply-add written as fmaf, so that neither compiler contracts on its own.

This file knows the layout (pieces, buckets) and raw pointers; where the owned
gradients and parameters live is the parameter store's business (its accessors), and it
drives these functions (llmc/parallel/param_store.h).
*/
#pragma once
#include "../core/common.h"
#include "../core/arena.h"
#include "../core/logger.h"
#include "../kernels/kernels.h"
#include "comm.h"
#include "param_layout.h"

typedef struct {
    int on;                   // --offload-optim 1: master, m and v of the store are host arrays
    floatX *grad, *param;     // [n_opt] pinned staging: the reduced gradients in, the parameters out (and in,
                              // without master weights)
    int n_groups;             // buckets + 1 (the vocabulary rows owned over DP)
    int* first;               // [n_groups + 1]: the group's pieces are first[g] .. first[g + 1] - 1
    int* started;             // [n_groups]: this step's copies of the group are enqueued
    int* order;               // [n_groups]: the groups in the order their copies started
    int n_started;
    stream_t copy;
    event_t ready, sent;      // the copy stream waits for the compute stream; the compute stream for the uploads
    event_t* landed;          // [n_groups]: the group's copies to the host are done
    int bound;
} HostOptim;

// pinned host bytes per owned element: master (where the build has them), m and v in
// fp32, and the staging of gradients and parameters
static inline size_t host_optim_bytes_per_element(int have_master) { return 4 * (2 + (size_t)have_master) + 2 * sizeof(floatX); }

// The staging in the host arena (the store plans master, m and v there itself); a plan
// without the flag names no entry of it
static inline void host_optim_plan(HostOptim* h, Arena* host, size_t n_opt, int on) {
    h->on = on;
    if (!on) return;
    arena_add_to(host, "optimizer staging (grads)", "optimizer", n_opt * sizeof(floatX), &h->grad);
    arena_add_to(host, "optimizer staging (params)", "optimizer", n_opt * sizeof(floatX), &h->param);
}

// After allocation: the groups of the owned pieces (in optimizer order: the buckets', then
// the vocabulary rows'), the copy stream and the events.
static inline void host_optim_bind(HostOptim* h, const ParamLayout* lay, const Piece* pieces, int n_pieces) {
    if (!h->on) return;
    h->n_groups = lay->n_buckets + 1;
    h->first = (int*)xmalloc((h->n_groups + 1) * sizeof(int));
    h->started = (int*)xmalloc(h->n_groups * sizeof(int));
    h->order = (int*)xmalloc(h->n_groups * sizeof(int));
    h->landed = (event_t*)xmalloc(h->n_groups * sizeof(event_t));
    size_t end = 0;
    int i = 0;
    for (int g = 0; g < h->n_groups; g++) {
        h->first[g] = i;
        if (g < lay->n_buckets) { size_t lo, n; bucket_owned(lay, g, &lo, &n); end += n; }
        else end = lay->n_opt;
        while (i < n_pieces && pieces[i].opt_off < end) i++;
        h->started[g] = 0;
        h->landed[g] = event_create();
    }
    h->first[h->n_groups] = n_pieces;
    h->n_started = 0;
    h->copy = stream_create();
    h->ready = event_create();
    h->sent = event_create();
    h->bound = 1;
}

static inline void host_optim_free(HostOptim* h) {
    if (!h->bound) return;
    stream_synchronize(h->copy);
    for (int g = 0; g < h->n_groups; g++) event_destroy(h->landed[g]);
    event_destroy(h->ready);
    event_destroy(h->sent);
    stream_destroy(h->copy);
    free(h->first); free(h->started); free(h->order); free(h->landed);
    h->bound = 0;
}

// Starts group g's copies to the host once everything enqueued so far on the compute
// stream s and on the communication stream (the group's reduction) is done. Returns 0
// when there is nothing to start: the flag is off, or the copies already started this step.
static inline int host_optim_fetch_begin(HostOptim* h, int g, Comm* c, stream_t s) {
    if (!h->on || h->started[g]) return 0;
    event_record(h->ready, s);
    stream_wait_event(h->copy, h->ready);
    comm_join(c, h->copy);
    h->started[g] = 1;
    h->order[h->n_started++] = g;
    return 1;
}

// one owned piece: its reduced gradient, and its parameters where there is no master copy to update
static inline void host_optim_fetch(HostOptim* h, const floatX* grad, const floatX* param, size_t opt_off, size_t n) {
    dev_memcpy_d2h(h->grad + opt_off, grad, n * sizeof(floatX), h->copy);
    if (param) dev_memcpy_d2h(h->param + opt_off, param, n * sizeof(floatX), h->copy);
}

static inline void host_optim_fetch_end(HostOptim* h, int g) { event_record(h->landed[g], h->copy); }

// the host waits for group g's copies
static inline void host_optim_wait(HostOptim* h, int g) { event_synchronize(h->landed[g]); }

// AdamW on the CPU over n elements of the host arrays, the same arithmetic as the device update
static inline void host_adamw(floatX* param, float* master, const floatX* grad, float* m, float* v, size_t n, float lr,
                              float beta1, float beta2, float eps, float weight_decay, float grad_scale, int t) {
#ifdef LLMC_CPU
    adamw_update(param, master, grad, m, v, n, lr, beta1, beta2, eps, weight_decay, grad_scale, t, 0);
#else
    float step_size, bc2_sqrt;
    adamw_bias_terms(lr, beta1, beta2, t, &step_size, &bc2_sqrt);
    float keep = fmaf(-lr, weight_decay, 1.0f);  // as the kernel computes it
    #pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; i++) {
        AdamwElement e = adamw_element(master ? master[i] : (float)param[i], (float)grad[i] * grad_scale, m[i], v[i], keep,
                                       beta1, beta2, eps, step_size, bc2_sqrt);
        m[i] = e.m;
        v[i] = e.v;
        if (master) master[i] = e.p;
        param[i] = (floatX)e.p;  // round to nearest even, as the kernel's conversion
    }
#endif
}

// one owned piece's updated parameters back to the device, on the copy stream
static inline void host_optim_send(HostOptim* h, floatX* param, size_t opt_off, size_t n) {
    dev_memcpy_h2d(param, h->param + opt_off, n * sizeof(floatX), h->copy);
}

// The compute stream s waits for the uploads; the next step starts its copies afresh.
static inline void host_optim_done(HostOptim* h, stream_t s) {
    event_record(h->sent, h->copy);
    stream_wait_event(s, h->sent);
    for (int g = 0; g < h->n_groups; g++) h->started[g] = 0;
    h->n_started = 0;
}

// A new step: the copies of a backward that no update followed (a test's gradient check)
// are forgotten, once the compute stream s, about to zero the gradients they read, waits for them
static inline void host_optim_step_begin(HostOptim* h, stream_t s) {
    if (h->on && h->n_started) host_optim_done(h, s);
}

// A state array (master, m or v: n floats) from or to the host, wherever it lives: the
// device's arrays through the converting copies, the host's directly.
static inline void host_optim_state_get(const HostOptim* h, float* out, const float* arr, size_t n) {
    if (!n) return;
    if (h->on) memcpy(out, arr, n * sizeof(float));
    else dev_download_floats(out, arr, n);
}
static inline void host_optim_state_put(const HostOptim* h, float* arr, const float* in, size_t n) {
    if (!n) return;
    if (h->on) memcpy(arr, in, n * sizeof(float));
    else dev_upload_floats(arr, in, n);
}
static inline void host_optim_state_zero(const HostOptim* h, float* arr, size_t n, stream_t s) {
    if (h->on) memset(arr, 0, n * sizeof(float));
    else dev_memset(arr, 0, n * sizeof(float), s);
}

// the plan's line: what the flag moves off the device and what it adds on the host
static inline void host_optim_log_plan(Logger* lg, const HostOptim* h, size_t n_opt, int have_master) {
    if (!h->on) return;
    logf_(lg, "--offload-optim 1: %.1f MiB of optimizer state (%sAdamW m and v of %zu owned elements) off the device; "
          "%.1f MiB pinned host with the staging of gradients and parameters\n",
          n_opt * 4.0 * (2 + have_master) / 1048576.0, have_master ? "fp32 master weights, " : "", n_opt,
          n_opt * (double)host_optim_bytes_per_element(have_master) / 1048576.0);
}
