/*
The building blocks every trainer's host code stands on, included in one place:
the kernels of the chosen backend, the memory plan and its arena, activation blocks and
their offload, checkpoints, logging and metrics, the learning-rate schedule, the flags
every trainer shares. A trainer adds what is its own (a tokenizer, video data, ...).

HAVE_MASTER_WEIGHTS: the bf16 CUDA build keeps fp32 master weights next to the bf16
parameters; the fp32 builds (CPU, PRECISION=FP32) update the parameters themselves.
*/
#pragma once
#include <time.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include "../core/common.h"
#include "../kernels/kernels.h"
#include "../core/arena.h"
#include "../core/rand.h"
#include "../core/logger.h"
#include "schedule.h"
#include "../io/checkpoint.h"
#include "../parallel/offload.h"
#include "../core/flags.h"
#include "activations.h"
#include "../kernels/profile.h"
#include "train_args.h"

#if !defined(LLMC_CPU) && !defined(ENABLE_FP32)
#define HAVE_MASTER_WEIGHTS 1
#else
#define HAVE_MASTER_WEIGHTS 0
#endif

// a step's bytes per group and kind as JSON fields: "tp all-gather": 123, ...
static inline void comm_bytes_json(char* out, size_t n, const CommBytes* cb) {
    out[0] = 0;
    for (int g = 0; g < NUM_GROUPS; g++)
        for (int k = 0; k < NUM_COMM_KINDS; k++)
            snprintf(out + strlen(out), n - strlen(out), "%s\"%s %s\": %.0f", out[0] ? ", " : "", GROUP_NAMES[g],
                     COMM_KIND_NAMES[k], cb->b[g][k]);
}

// The memory plan as JSON for the tests that hold it against docs/memory.md: the fields
// every trainer has, then the trainer's own (`extra`: "key": value pairs, or ""), the bytes
// a step sends by the trainer's formula (cb; NULL: not written), then both arenas.
static inline void trainer_plan_json(const char* path, const ActPlan* acts, const Offload* off, size_t num_params,
                                     const char* extra, const CommBytes* cb, const Arena* dev, const Arena* host) {
    char fields[6144], comm[2048];
    int n = snprintf(fields, sizeof(fields), "\"act_block_bytes\": %zu, \"n_offload\": %d, \"num_params\": %zu, "
                     "\"sizeof_floatX\": %zu, \"master\": %d%s%s", acts->block_bytes, off->n_offload, num_params,
                     sizeof(floatX), HAVE_MASTER_WEIGHTS, extra[0] ? ", " : "", extra);
    if (cb) {
        comm_bytes_json(comm, sizeof(comm), cb);
        snprintf(fields + n, sizeof(fields) - n, ", \"comm_bytes_per_step\": {%s}", comm);
    }
    plan_write_json(path, fields, dev, host);
}

// What a trainer's build set up, given back: the stream's work finished first, then the
// profile's timers, the offload streams and events, the GEMM library, both arenas.
static inline void trainer_release(stream_t stream, Profile* prof, Offload* off, Arena* dev, Arena* host) {
    stream_synchronize(stream);
    profile_free(prof);
    offload_free(off);
    stream_destroy(stream);
    matmul_teardown();
    if (dev->base) dev_free(dev->base);
    if (host->base) host_free_pinned(host->base);
}
