// Appended by dev/emu/run_trainer.sh to the copies of train_llama.cu, test_llama.cu,
// train_dit.cu and test_dit.cu that it builds against the host emulator (after their last
// line, so line numbers are unchanged; #pragma once makes the second include a no-op when
// test_X.cu includes train_X.cu). It installs the kernel table that transform.py generated (so launches
// are checked against __launch_bounds__ and an unknown kernel is an error), reads the
// environment, and reports at exit.
//
// Environment:
//   EMU_SCHEDULE=fwd|rev   thread and block order (default fwd)
//   EMU_LT_MODE=0|1        cuBLASLt shim: 1 (default here) = the MODEL of the documented
//                          cublasLtMatmul contract (include/cublasLt.h; it is NOT cuBLASLt),
//                          0 = no algorithm, so llmc/kernels/matmul.cuh runs its fallback kernel
//   EMU_STREAMS=lazy|sync  stream model (emu.h, "Streams and events"): lazy (default here) runs
//                          every operation as late as its stream's dependencies allow, so a
//                          missing wait or synchronisation reads stale or poisoned data;
//                          sync runs every operation when it is issued
//   EMU_EAGER_STREAMS=2,3  lazy model: these streams (ids in creation order, from 1) run their
//                          work when it is issued (per model, llmc/parallel/offload.h creates the
//                          offload copy stream and the prefetch stream, then the trainer its
//                          compute stream; test_llama creates its communication stream first)
// At exit (normal, exit(1) from FAIL() included) it prints to stderr
//   EMU_REPORT streams=lazy|sync launches=N lt_matmul=N lt_heuristic=N deferred=N waits=N
//              pending=N eager_ops=N eager_compute=N d2h_bytes=N d2h_hash=H live_allocs=N
//              guards=ok|<damage> covered=k1,k2,...
// pending: operations still queued at exit (work the program issued and never waited for).
// eager_ops, eager_compute: operations issued on the EMU_EAGER_STREAMS streams, and how many
// of them were kernels or cuBLASLt products (0 when those streams are the copy streams).
// d2h_hash: FNV-1a of every byte downloaded into pageable host memory, in program order.
// and on an emulator error (deadlock, divergent barrier, bad launch config caught as an
// error, out-of-bounds write found by cudaFree...)
//   EMU_ERROR <message>
// followed by the EMU_REPORT line, before exiting with status 3.
#pragma once
#include <string>
#include "emu_kernels.inc"

namespace emu_trainer {
inline unsigned char covered[4096];

inline void report() {
    fflush(stdout);
    std::string cov;
    int n = (int)(sizeof emu_kernel_list / sizeof emu_kernel_list[0]);
    for (int i = 0; i < n; i++)
        if (covered[i]) cov += std::string(cov.empty() ? "" : ",") + emu_kernel_list[i].name;
    std::string g = emu::check_guards();
    unsigned long long pending = emu::legacy_stream()->q.size();
    unsigned long long eager_ops = 0, eager_compute = 0;
    for (CUstream_st* st : emu::created_streams()) {
        pending += st->q.size();
        if (st->eager) { eager_ops += st->enq; eager_compute += st->compute; }
    }
    fprintf(stderr, "EMU_REPORT streams=%s%s launches=%llu lt_matmul=%llu lt_heuristic=%llu deferred=%llu waits=%llu pending=%llu "
            "eager_ops=%llu eager_compute=%llu d2h_bytes=%llu d2h_hash=%016llx live_allocs=%zu guards=%s covered=%s\n",
            emu::lazy_streams ? "lazy" : "sync", emu::eager_ids.empty() ? "" : "+eager", emu::n_launches, emu::lt_matmul_calls, emu::lt_heuristic_calls,
            emu::n_deferred, emu::n_stream_waits, pending, eager_ops, eager_compute, emu::d2h_bytes,
            (unsigned long long)emu::d2h_hash, emu::allocs().size(), g.empty() ? "ok" : g.c_str(), cov.c_str());
    fflush(stderr);
}
inline void on_error(const char* msg) {
    fflush(stdout);
    fprintf(stderr, "EMU_ERROR %s\n", msg);
    report();  // emu::error() then _exits: atexit handlers do not run
}
inline int setup() {
    int n = (int)(sizeof emu_kernel_list / sizeof emu_kernel_list[0]);
    if (n > (int)sizeof covered) { fprintf(stderr, "trainer_emu: kernel table too large\n"); exit(2); }
    emu::kernel_table = emu_kernel_list;
    emu::kernel_table_n = n;
    emu::covered = covered;
    emu::error_handler = on_error;
    const char* s = getenv("EMU_SCHEDULE");
    if (s && strcmp(s, "rev") == 0) emu::sched_reverse = true;
    else if (s && s[0] && strcmp(s, "fwd") != 0) { fprintf(stderr, "trainer_emu: EMU_SCHEDULE must be fwd or rev\n"); exit(2); }
    const char* st = getenv("EMU_STREAMS");
    if (!st || !st[0] || strcmp(st, "lazy") == 0) emu::lazy_streams = true;
    else if (strcmp(st, "sync") != 0) { fprintf(stderr, "trainer_emu: EMU_STREAMS must be lazy or sync\n"); exit(2); }
    if (const char* es = getenv("EMU_EAGER_STREAMS"))
        for (const char* q = es; *q;) {
            char* end;
            long id = strtol(q, &end, 10);
            if (end == q || id < 1) { fprintf(stderr, "trainer_emu: EMU_EAGER_STREAMS must be a comma-separated list of stream ids >= 1\n"); exit(2); }
            emu::eager_ids.push_back((int)id);
            q = *end == ',' ? end + 1 : end;
        }
    const char* lt = getenv("EMU_LT_MODE");
    emu::lt_mode = (lt && lt[0]) ? atoi(lt) : 1;
    // the emulator's function-local statics must be constructed before atexit(report), so
    // that they are destroyed after report runs
    (void)emu::allocs(); (void)emu::pinned(); (void)emu::created_streams(); (void)emu::legacy_stream();
    atexit(report);
    return 0;
}
static const int setup_done = setup();
}  // namespace emu_trainer
