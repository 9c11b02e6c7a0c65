/*
The per-kernel profile of one training step (--profile-step N): timers around each
group of launchers (the QKV projections, attention forward, the FFN GEMMs, RMSNorm,
AdamW, ...), printed after step N as a table: milliseconds, share of the step, and
what the group achieved (TFLOP/s for the GEMM-like groups, GB/s for the memory-bound
ones) against the peaks this machine measured at start (one large GEMM, one large
copy). On a GPU the timers are CUDA events on the compute stream, so a group's time
is what the stream spent between its first and last launch, without host overhead;
on the CPU build kernels run inline, and the timers are wall-clock time stamps.

A group is timed by bracketing its launches, in one scoped form:
    PROF(&m->prof, "attention fwd", flops, bytes, s) attention_forward(...);
(or a block after it; prof_begin and prof_end are the two halves it expands to).
The counts (flops, bytes) are the nominal work of the call from the shapes, not
measured: a group's TFLOP/s is flops / time. When no step is being profiled,
prof_begin returns -1 and both calls cost a branch.

Everything is allocated when the profile is set up (events, the peak-measurement
buffers), before the first step; nothing is allocated in the step loop.
*/
#pragma once
#include "../core/common.h"
#include "kernels.h"
#include "../core/logger.h"

#define PROFILE_MAX_GROUPS 48
#define PROFILE_MAX_MARKS 16384   // bracketed calls in one step (launch groups x layers x micro-steps)

typedef struct {
    const char* name;
    double flops, bytes;   // nominal work of all the calls in the profiled step
    double ms;
    int calls;
} ProfileGroup;

typedef struct {
    int active;                        // recording the current step
    int setup;                         // events created
    int n_groups, n_marks;
    ProfileGroup group[PROFILE_MAX_GROUPS];
    int mark_group[PROFILE_MAX_MARKS];
    event_t* ev;                       // 2 per mark: begin, end
    double peak_tflops, peak_gbs;      // measured at set-up
    int dropped;                       // marks beyond PROFILE_MAX_MARKS (reported, not timed)
} Profile;

// n values uniform in [-1, 1) (xorshift32 from seed) into d. The peak GEMM runs on these,
// not on zeros: on Hopper a GEMM of zeros runs faster than one of real data (its tensor
// cores switch fewer bits, draw less power and keep higher clocks), so every "of peak"
// would read low. Uploaded from a small host buffer a chunk at a time rather than written
// by a fill kernel: it is set-up work, and a kernel would need a CPU twin and an emulator
// check for the one call.
static void profile_fill_random(floatX* d, size_t n, uint32_t seed) {
    const size_t chunk = (size_t)1 << 20;
    float* buf = (float*)xmalloc(chunk * sizeof(float));
    uint32_t x = seed;
    for (size_t i = 0; i < n; i += chunk) {
        size_t m = n - i < chunk ? n - i : chunk;
        for (size_t j = 0; j < m; j++) {
            x ^= x << 13; x ^= x >> 17; x ^= x << 5;
            buf[j] = (float)(x >> 8) * (2.0f / 16777216.0f) - 1.0f;
        }
        dev_upload_floats(d + i, buf, m);  // returns when the copy has landed: buf can be refilled
    }
    free(buf);
}

// Measures the two peaks the table compares against: a square GEMM of size n in the
// build's precision on random operands, and a device-to-device copy of `bytes` (read +
// write counted).
static void profile_measure_peaks(Profile* p, int n, size_t copy_bytes, stream_t s) {
    floatX* a = (floatX*)dev_malloc((size_t)n * n * sizeof(floatX));
    floatX* b = (floatX*)dev_malloc((size_t)n * n * sizeof(floatX));
    floatX* c = (floatX*)dev_malloc((size_t)n * n * sizeof(floatX));
    char* x = (char*)dev_malloc(copy_bytes);
    char* y = (char*)dev_malloc(copy_bytes);
    profile_fill_random(a, (size_t)n * n, 0x9e3779b9u);
    profile_fill_random(b, (size_t)n * n, 0x85ebca6bu);
    dev_memset(x, 0, copy_bytes, s);
    event_t e0 = timing_event_create(), e1 = timing_event_create();
    const int reps = 3;
    matmul_forward(c, a, b, n, n, n, n, 0, s);  // warm-up (and cuBLASLt's algorithm choice)
    event_record(e0, s);
    for (int r = 0; r < reps; r++) matmul_forward(c, a, b, n, n, n, n, 0, s);
    event_record(e1, s);
    event_synchronize(e1);
    p->peak_tflops = reps * 2.0 * n * (double)n * n / (event_elapsed_ms(e0, e1) * 1e-3) / 1e12;
    dev_memcpy_d2d(y, x, copy_bytes, s);
    event_record(e0, s);
    for (int r = 0; r < reps; r++) dev_memcpy_d2d(y, x, copy_bytes, s);
    event_record(e1, s);
    event_synchronize(e1);
    p->peak_gbs = reps * 2.0 * copy_bytes / (event_elapsed_ms(e0, e1) * 1e-3) / 1e9;
    event_destroy(e0); event_destroy(e1);
    // read one element of each result: without it a compiler may drop the CPU build's
    // copies (and a plain-loop GEMM) as dead stores to memory that is freed unread
    volatile char probe[2];
    dev_memcpy_d2h((char*)&probe[0], y + copy_bytes - 1, 1, s);
    dev_memcpy_d2h((char*)&probe[1], (char*)c, 1, s);
    stream_synchronize(s);
    dev_free(a); dev_free(b); dev_free(c); dev_free(x); dev_free(y);
}

// Creates the events and measures the peaks (sizes: CPU build small, GPU large).
static void profile_setup(Profile* p, stream_t s) {
    memset(p, 0, sizeof(*p));
    p->ev = (event_t*)xmalloc(2 * PROFILE_MAX_MARKS * sizeof(event_t));
    for (int i = 0; i < 2 * PROFILE_MAX_MARKS; i++) p->ev[i] = timing_event_create();
    p->setup = 1;
#ifdef LLMC_CPU
    profile_measure_peaks(p, 1024, (size_t)64 << 20, s);
#else
    profile_measure_peaks(p, 8192, (size_t)1 << 30, s);
#endif
}

static void profile_free(Profile* p) {
    if (!p->setup) return;
    for (int i = 0; i < 2 * PROFILE_MAX_MARKS; i++) event_destroy(p->ev[i]);
    free(p->ev);
    p->setup = 0;
}

// starts recording a step: the groups' counts begin at zero
static void profile_start_step(Profile* p) {
    if (!p->setup) return;
    p->active = 1; p->n_groups = 0; p->n_marks = 0; p->dropped = 0;
}

static int prof_group_index(Profile* p, const char* name) {
    for (int i = 0; i < p->n_groups; i++) if (strcmp(p->group[i].name, name) == 0) return i;
    if (p->n_groups == PROFILE_MAX_GROUPS) FAIL("profile: more than %d launch groups", PROFILE_MAX_GROUPS);
    ProfileGroup g = {name, 0.0, 0.0, 0.0, 0};
    p->group[p->n_groups] = g;
    return p->n_groups++;
}

static inline int prof_begin(Profile* p, const char* group, stream_t s) {
    if (!p->active) return -1;
    if (p->n_marks == PROFILE_MAX_MARKS) { p->dropped++; return -1; }
    int k = p->n_marks++;
    p->mark_group[k] = prof_group_index(p, group);
    event_record(p->ev[2 * k], s);
    return k;
}

static inline void prof_end(Profile* p, int k, double flops, double bytes, stream_t s) {
    if (k < 0) return;
    event_record(p->ev[2 * k + 1], s);
    ProfileGroup* g = &p->group[p->mark_group[k]];
    g->flops += flops; g->bytes += bytes; g->calls++;
}

// The nominal work of the launch groups: FLOPs of a GEMM, bytes of the memory-bound
// kernels (each tensor read or written once; SX bytes per floatX value).
static inline double gemm_flops(double M, double N, double K) { return 2.0 * M * N * K; }
#define SX ((double)sizeof(floatX))

// Times the statement or block that follows as one call of launch group `group`, with
// its nominal work (evaluated after the body):
//     PROF(P, "rmsnorm fwd", 0, 2.0 * rows * D * SX, s) rmsnorm_forward(...);
// The body must not return, break or continue (prof_end would be skipped).
#define PROF(P, group, flops, bytes, s) \
    for (int prof_k_ = prof_begin(P, group, s), prof_once_ = 1; prof_once_; \
         prof_once_ = 0, prof_end(P, prof_k_, flops, bytes, s))

// Ends the step's recording (after the step has completed on the device) and prints the
// table, largest group first; step_ms is the step's wall time.
static void profile_report(Profile* p, Logger* lg, int step, double step_ms) {
    if (!p->active) return;
    p->active = 0;
    if (p->n_marks) event_synchronize(p->ev[2 * p->n_marks - 1]);
    for (int k = 0; k < p->n_marks; k++) p->group[p->mark_group[k]].ms += event_elapsed_ms(p->ev[2 * k], p->ev[2 * k + 1]);
    int order[PROFILE_MAX_GROUPS];
    for (int i = 0; i < p->n_groups; i++) order[i] = i;
    for (int i = 1; i < p->n_groups; i++)  // insertion sort by time, descending
        for (int j = i; j > 0 && p->group[order[j]].ms > p->group[order[j - 1]].ms; j--) {
            int t = order[j]; order[j] = order[j - 1]; order[j - 1] = t;
        }
    double total = 0.0;
    for (int i = 0; i < p->n_groups; i++) total += p->group[i].ms;
    logf_(lg, "profile of step %d: %.3f ms wall, %.3f ms in the timed groups; peaks measured here: %.3g TFLOP/s "
          "(GEMM), %.3g GB/s (copy)\n", step, step_ms, total, p->peak_tflops, p->peak_gbs);
    logf_(lg, "| %-24s | %6s | %10s | %6s | %12s | %7s |\n", "group", "calls", "ms", "share", "achieved", "of peak");
    logf_(lg, "|--------------------------|--------|------------|--------|--------------|---------|\n");
    for (int i = 0; i < p->n_groups; i++) {
        const ProfileGroup* g = &p->group[order[i]];
        double s = g->ms * 1e-3;
        char ach[32] = "-", pct[16] = "-";
        // a group with FLOPs is judged by them (GEMMs, attention); otherwise by its bytes
        if (g->flops > 0 && s > 0) {
            snprintf(ach, sizeof(ach), "%.2f TFLOP/s", g->flops / s / 1e12);
            snprintf(pct, sizeof(pct), "%.0f%%", 100.0 * g->flops / s / 1e12 / p->peak_tflops);
        } else if (g->bytes > 0 && s > 0) {
            snprintf(ach, sizeof(ach), "%.1f GB/s", g->bytes / s / 1e9);
            snprintf(pct, sizeof(pct), "%.0f%%", 100.0 * g->bytes / s / 1e9 / p->peak_gbs);
        }
        logf_(lg, "| %-24s | %6d | %10.3f | %5.1f%% | %12s | %7s |\n", g->name, g->calls, g->ms,
              step_ms > 0 ? 100.0 * g->ms / step_ms : 0.0, ach, pct);
    }
    if (p->dropped) logf_(lg, "(%d calls beyond the %d timers were not timed)\n", p->dropped, PROFILE_MAX_MARKS);
}
