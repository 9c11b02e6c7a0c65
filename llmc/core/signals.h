/*
Signals, installed by signals_install() as the first statement of every program's main(),
before any flag is parsed and before MPI starts (a rank can get a signal at any instant of
its life, and Open MPI's start-up writes files of its own).

Ignored, so that the failing call returns an error and its caller's message runs:
  - SIGXFSZ: past a file-size limit (ulimit -f, or a file system that enforces one) the kernel
    would kill the process at the write that crosses it, without a message and leaving a
    checkpoint's .tmp behind; ignored, that write fails with EFBIG instead, and the writer's
    own error path runs (llmc/io/checkpoint.h: a message naming the file and the reason, the
    .tmp removed, exit 1, the previous checkpoints untouched; llmc/core/logger.h for main.log
    and metrics.jsonl). Under mpirun it must be ignored before MPI_Init: Open MPI creates its
    shared-memory segment (4 MiB) then, and a limit below that killed the rank silently.
  - SIGPIPE: stdout may be a pipe whose reader went away (`train ... | head`); the write then
    fails with EPIPE, logf_ stops printing to stdout and says so once in main.log, and the run
    goes on: main.log holds everything stdout would have shown.

Stop signals (SIGTERM, SIGINT, SIGHUP, SIGUSR1; SIGUSR1 is what SLURM's --signal=USR1@N sends
before a time limit): the handler only records the signal; the step loop folds it into the
collective every step already runs (peak_bytes_all_ranks: a MAX over the ranks), so every rank
stops after the same step, writes that step's checkpoint, logs why and exits with
EXIT_STOPPED (75, sysexits' EX_TEMPFAIL: "try again later": --resume auto continues from the
checkpoint). A second stop signal ends the process at once: a short message written with
write(2), then _exit(1) (both async-signal-safe; nothing else is), with two exceptions that
keep a scheduler's stop from losing its checkpoint:
  - the same signal again within a second of the first is one stop delivered twice (SLURM can
    reach a task both directly and through its launcher) and is ignored;
  - once every rank has agreed to stop (signals_stop_under_way, at the stopped step's end), a
    further signal is ignored: the checkpoint being written takes seconds, and under srun
    --kill-on-bad-exit the first rank to exit 75 has the launcher signal the others while they
    are still writing theirs. The process exits 75 as soon as it is on disk.
test_llama and test_dit take only the ignored pair (signals_ignore_io): they have no state
worth saving.
*/
#pragma once
#include <signal.h>
#include <string.h>
#include <unistd.h>
#include <time.h>

// the exit status of a run stopped by a signal after writing its checkpoint (EX_TEMPFAIL)
#define EXIT_STOPPED 75

// the first stop signal's number (0: none yet); read by the step loop (llmc/train/step_loop.h)
static volatile sig_atomic_t g_stop_signal = 0;
// 1: every rank agreed to stop after this step; its checkpoint is being written (the top of this file)
static volatile sig_atomic_t g_stop_under_way = 0;
static struct timespec g_stop_first;  // when the first stop signal came (CLOCK_MONOTONIC)

static inline const char* signal_name(int sig) {
    switch (sig) {
        case SIGTERM: return "SIGTERM";
        case SIGINT: return "SIGINT";
        case SIGHUP: return "SIGHUP";
        case SIGUSR1: return "SIGUSR1";
        default: return "a signal";
    }
}

static void signals_on_stop(int sig) {
    if (g_stop_signal && g_stop_under_way) return;
    if (g_stop_signal && sig == g_stop_signal) {
        struct timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);  // (async-signal-safe)
        if ((now.tv_sec - g_stop_first.tv_sec) + 1e-9 * (now.tv_nsec - g_stop_first.tv_nsec) < 1.0) return;
    }
    if (g_stop_signal) {
        static const char msg[] = "\nerror: a second stop signal: ending at once, without a checkpoint of the current "
                                  "step (exit 1; the newest checkpoint on disk is intact: --resume auto takes it)\n";
        ssize_t w = write(STDERR_FILENO, msg, sizeof(msg) - 1);
        (void)w;
        _exit(1);
    }
    clock_gettime(CLOCK_MONOTONIC, &g_stop_first);
    g_stop_signal = sig;
}

// every rank has agreed to stop after this step: from here a stop signal no longer cuts the
// checkpoint short
static inline void signals_stop_under_way(void) { g_stop_under_way = 1; }

static inline void signals_ignore_io(void) {
    signal(SIGXFSZ, SIG_IGN);
    signal(SIGPIPE, SIG_IGN);
}

static inline void signals_install(void) {
    signals_ignore_io();
    // the handler runs on a stack of its own: a signal frame pushed on the interrupted code's
    // stack overwrites what lies below its stack pointer, where oneDNN's JIT GEMMs can keep
    // data, and a stop during dnnl_sgemm then corrupts the heap ("corrupted size vs. prev_size",
    // abort) in the CPU build. sigaltstack is per thread: this is the main thread's; a signal
    // the kernel hands to another thread (an OpenMP worker) still lands on that thread's stack
    static char alt_stack[1 << 16];
    stack_t ss;
    memset(&ss, 0, sizeof(ss));
    ss.ss_sp = alt_stack; ss.ss_size = sizeof(alt_stack);
    sigaltstack(&ss, NULL);
    struct sigaction sa;
    memset(&sa, 0, sizeof(sa));
    sa.sa_handler = signals_on_stop;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART | SA_ONSTACK;  // a read or write the signal interrupts carries on: the loop decides when to stop
    const int stops[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
    for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) sigaction(stops[i], &sa, NULL);
}

// A run with no step loop (--plan-only) has nothing to save: a stop signal ends it as by
// default (killed by the signal, never exit 0), one that already came is delivered again now.
static inline void signals_stop_default(void) {
    const int stops[] = {SIGTERM, SIGINT, SIGHUP, SIGUSR1};
    for (size_t i = 0; i < sizeof(stops) / sizeof(stops[0]); i++) signal(stops[i], SIG_DFL);
    if (g_stop_signal) raise(g_stop_signal);
}
