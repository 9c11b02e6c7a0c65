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
        {"attention", 's', &t->attention, "auto | fp32 | tc (as the trainer)"},
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
