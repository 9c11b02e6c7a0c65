/*
The flags test_llama and test_dit share, one definition for both: the reference file,
the memory flags, the attention kernels, the micro-batch and the parallel flags. A test
program adds its own entries (test_llama: --ce-chunks, --shard-vocab, --dump, the
planted TP bug) and gets everything parsed, range-checked (llmc/core/flags.h) and validated.
*/
#pragma once
#include "../core/flags.h"
#include "train_args.h"
#include "memory_flags.h"
#include "../parallel/parallel_args.h"
#include "../parallel/offload.h"
#include "../parallel/param_store.h"
#include "../core/check.h"

typedef struct {
    const char *ref, *attention;
    int micro_batch;  // rows (clips) per micro-step on each rank; 0: all of them in one
    ParallelArgs par;
} TestArgs;

// Parses argv against the shared entries followed by own (n_own of them) into t and the
// memory flags mem (--ce-chunks when with_ce: the model has an output head). `program` and
// `ref_kind` name the usage: "test_llama", "LREF file (dev/ref/reference_llama.py)".
static inline void test_args_parse(int argc, char** argv, const char* program, const char* ref_kind, const Flag* own,
                                   int n_own, TestArgs* t, MemoryFlags* mem, int with_ce, const char* cp_help) {
    static const char* usage_program;
    usage_program = program;
    t->ref = NULL; t->attention = "auto"; t->micro_batch = 0;
    t->par = parallel_args_default();
    const Flag shared[] = {
        {"ref", 's', &t->ref, ref_kind},
        {"test-skip-prefetch", 'i', &offload_test_skip_prefetch, "1: plant a missing prefetch (the check must fail)"},
        {"test-plant-zero-bug", 'i', &zero_test_plant_bug,
         "1: --zero 3 layers compute on a parameter buffer already given back (the check must fail)"},
        {"test-plant-pp-bug", 'i', &pp_test_plant_bug,
         "1: --pp: every micro-batch's activations in one slot, overwritten by the next forward (the check must fail)"},
        {"attention", 's', &t->attention, "auto | fp32 | tc | tc2 | cudnn (as the trainer)"},
        {"cudnn-deterministic", 'i', &g_cudnn_deterministic, CUDNN_DETERMINISTIC_HELP},
        {"micro-batch", 'i', &t->micro_batch, "rows (clips) per micro-step on each rank (default: all of its B/dp)"},
    };
    Flag all[64];
    int n = (int)(sizeof(shared) / sizeof(shared[0]));
    if (n + n_own + 16 > 64) FAIL("test_args_parse: too many flags (%d of the program's own)", n_own);
    memcpy(all, shared, sizeof(shared));
    memcpy(all + n, own, (size_t)n_own * sizeof(Flag));
    n += n_own;
    n += memory_flag_entries(all + n, mem, with_ce, "0, 1, 2");
    n += parallel_flags(all + n, &t->par, "tensor-parallel group size (as the trainer)", cp_help);
    flags_parse(argc, argv, all, n, NULL, [](const Flag* f, int k) {
        printf("usage: %s --ref FILE [flags]\n", usage_program);
        flags_print(f, k);
    });
    parallel_args_validate(&t->par);
    if (!t->ref) FAIL("usage: %s --ref FILE [memory flags] (see --help)", program);
}

// After the same AdamW steps with and without --offload-optim: the whole state (parameters,
// master weights where the build has them, AdamW m and v) bitwise the same, required where
// the host update is the device's own arithmetic. A collective (the state is gathered).
static inline void check_offload_state(ParamStore* on, ParamStore* off, size_t np) {
    float* a[3]; float* b[3];
    for (int k = 0; k < 3; k++) { a[k] = (float*)xmalloc(np * sizeof(float)); b[k] = (float*)xmalloc(np * sizeof(float)); }
    param_store_get_state(on, a[0], a[1], a[2]);
    param_store_get_state(off, b[0], b[1], b[2]);
    const char* what[3] = {"parameters", "AdamW m", "AdamW v"};
    for (int k = 0; k < 3 && on->comm->rank == 0; k++) {  // (rank 0 holds the gathered state)
        int same = memcmp(a[k], b[k], np * sizeof(float)) == 0;
        checks++; failures += !same;
        printf("  %-16s after the steps, --offload-optim 1 against 0: bitwise %s (required: %s)\n", what[k],
               same ? "identical" : "different", same ? "ok" : "FAIL");
    }
    for (int k = 0; k < 3; k++) { free(a[k]); free(b[k]); }
}
