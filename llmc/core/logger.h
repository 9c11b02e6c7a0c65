/*
The run directory: main.log (everything printed, as printed) and metrics.jsonl (one
JSON object per step), and the pieces of a training loop's progress output that every
trainer prints the same way (durations, ETA, the memory plan). Lines are flushed as
written so a crashed run keeps its log. Nothing is written into the run directory until
the trainer has accepted its inputs (logger_start): what is logged before is held in
memory, so a run refused at start (a bad checkpoint, data file or flag) leaves a run
directory that already holds a run exactly as it was.
*/
#pragma once
#include "common.h"
#include "arena.h"
#include "run_dir.h"
#include <signal.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <time.h>

// quiet: a rank other than 0 of a multi-process run, which prints and writes nothing
typedef struct {
    FILE* log; FILE* metrics; int quiet; const char* run_dir;
    int append;                           // the files are appended to (a resumed run), else rewritten
    char* held; size_t held_len, held_cap; // main.log's lines until logger_start (logger_open: held != NULL)
} Logger;

// a job's logger: rank 0 prints and writes the run directory, the other ranks stay quiet
static inline Logger logger_for_rank(int rank) {
    Logger lg;
    memset(&lg, 0, sizeof(lg));
    lg.quiet = rank != 0;
    return lg;
}

// append = 1 when resuming, so one run directory holds the whole history. (SIGXFSZ, which
// would kill the process at a write past a file-size limit, is ignored from main's first
// statement on: llmc/core/signals.h.)
// The files open at logger_start; until then main.log's lines are held here.
static void logger_open(Logger* lg, const char* run_dir, int append) {
    lg->run_dir = run_dir;
    lg->append = append;
    lg->held_cap = 1 << 16; lg->held_len = 0;
    lg->held = (char*)xmalloc(lg->held_cap);
}

static void logger_check(Logger* lg, FILE** f, const char* name);

// The inputs are accepted and the run begins: main.log and metrics.jsonl are opened in the
// run directory rd (locked by run_open: appended to when resuming, else new; never through a
// link) and the held lines written.
static void logger_start(Logger* lg, const RunDir* rd) {
    if (!lg->held) return;
    lg->log = run_dir_open_write(rd, "main.log", lg->append);
    lg->metrics = run_dir_open_write(rd, "metrics.jsonl", lg->append);
    fwrite(lg->held, 1, lg->held_len, lg->log);
    free(lg->held);
    lg->held = NULL;
    logger_check(lg, &lg->log, "main.log");
}

// A log line that did not reach the disk (full, or past a file-size limit now that SIGXFSZ
// is ignored) stops the run with a message: a run that goes on with a cut main.log or
// metrics.jsonl and exits 0 has lost data without a word. The file is closed first, so the
// message itself is not written into it.
static void logger_check(Logger* lg, FILE** f, const char* name) {
    if (fflush(*f) == 0 && !ferror(*f)) return;
    int err = errno;
    fclose(*f);
    *f = NULL;
    FAIL("writing %s/%s failed: %s (hint: disk full, or over a file-size limit (ulimit -f)?)",
         lg->run_dir ? lg->run_dir : ".", name, strerror(err));
}

// stdout failed (a closed pipe: SIGPIPE is ignored, llmc/core/signals.h; a full disk under
// > file): the run goes on without it, since main.log holds every line stdout would have shown.
// Once gone it is not written again (no EPIPE per line), and main.log says so once, after the
// line being written ends. 0: stdout works; 1: gone; 2: gone, and said.
static int logger_stdout_gone = 0, logger_stdout_errno = 0;

// The printed text's escape state (llmc/core/term.h): one stream per process, the same
// bytes to stdout and main.log, so one state serves both.
static TermEsc logger_esc = {0};

// text (n bytes) to stdout and main.log (or the held lines), escaped in pieces of a stack buffer
static void logger_put(Logger* lg, const char* s, size_t n, int end) {
    char buf[2048];
    for (;;) {
        size_t used = 0, k = n ? term_escape(&logger_esc, s, n, &used, buf, sizeof(buf)) : 0;
        if (!n && end) k = term_escape_end(&logger_esc, buf);
        if (k) {
            if (!logger_stdout_gone) fwrite(buf, 1, k, stdout);
            if (lg && lg->held) {
                while (lg->held_len + k > lg->held_cap) {
                    lg->held_cap *= 2;
                    lg->held = (char*)realloc(lg->held, lg->held_cap);
                    if (!lg->held) FAIL("host realloc of %zu bytes for the held log lines failed", lg->held_cap);
                }
                memcpy(lg->held + lg->held_len, buf, k);
                lg->held_len += k;
            }
            if (lg && lg->log) fwrite(buf, 1, k, lg->log);
        }
        s += used; n -= used;
        if (!n) break;
    }
    if (!logger_stdout_gone && (fflush(stdout) != 0 || ferror(stdout))) {
        logger_stdout_errno = errno; logger_stdout_gone = 1; clearerr(stdout);
    }
    if (lg && lg->log) logger_check(lg, &lg->log, "main.log");
}

// text as it is (a sampled piece, say), to stdout and main.log, escaped
static void logger_text(Logger* lg, const char* s) {
    if (lg && lg->quiet) return;
    logger_put(lg, s, strlen(s), 0);
}

// printf to stdout and main.log; formatted once into a stack buffer (the step line is
// printed every step), escaped on the way out
static void logf_(Logger* lg, const char* fmt, ...) {
    if (lg && lg->quiet) return;
    char buf[4096], *text = buf;
    va_list ap;
    va_start(ap, fmt); int n = vsnprintf(buf, sizeof(buf), fmt, ap); va_end(ap);
    if (n < 0) return;
    if (n >= (int)sizeof(buf)) {
        text = (char*)xmalloc((size_t)n + 1);
        va_start(ap, fmt); vsnprintf(text, (size_t)n + 1, fmt, ap); va_end(ap);
    }
    logger_put(lg, text, (size_t)n, 0);
    if (text != buf) free(text);
    if (logger_stdout_gone == 1 && n > 0 && fmt[strlen(fmt) - 1] == '\n') {  // said once, after a whole line
        logger_stdout_gone = 2;
        logf_(lg, "stdout is gone (%s): the run goes on, main.log holds every line\n", strerror(logger_stdout_errno));
    }
}

// main.log and metrics.jsonl closed, each close checked: the last lines are written at
// the close, and a full disk there would lose them behind an exit 0
static void logger_close(Logger* lg) {
    free(lg->held);
    lg->held = NULL;
    if (!lg->quiet) logger_put(lg, "", 0, 1);  // a 0xc2 still held at the very end
    FILE* files[2] = {lg->log, lg->metrics};
    const char* names[2] = {"main.log", "metrics.jsonl"};
    lg->log = lg->metrics = NULL;
    for (int i = 0; i < 2; i++) {
        if (!files[i]) continue;
        int err = fclose_err(files[i]);
        if (err) FAIL("writing %s/%s failed at its close: %s (hint: disk full, or over a file-size limit (ulimit -f)?)",
                      lg->run_dir ? lg->run_dir : ".", names[i], strerror(err));
    }
}

// metrics.jsonl: metrics_begin(lg, step), then metrics_num / metrics_int, then metrics_end
static void metrics_begin(Logger* lg, int step) { if (lg->metrics) fprintf(lg->metrics, "{\"step\": %d", step); }
static void metrics_num(Logger* lg, const char* key, double v) {
    if (lg->metrics && !isnan(v)) fprintf(lg->metrics, ", \"%s\": %.9g", key, v);  // NaN = not measured this step
}
static void metrics_int(Logger* lg, const char* key, long long v) { if (lg->metrics) fprintf(lg->metrics, ", \"%s\": %lld", key, v); }
static void metrics_end(Logger* lg) { if (lg->metrics) { fprintf(lg->metrics, "}\n"); logger_check(lg, &lg->metrics, "metrics.jsonl"); } }

// 75 s -> "1m15s", 4000 s -> "1h06m"
static void format_duration(char* out, size_t n, double seconds) {
    long s = (long)(seconds + 0.5);
    if (s < 60) snprintf(out, n, "%lds", s);
    else if (s < 3600) snprintf(out, n, "%ldm%02lds", s / 60, s % 60);
    else snprintf(out, n, "%ldh%02ldm", s / 3600, (s % 3600) / 60);
}

static double now_seconds(void) {
    struct timespec ts; clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

// the time left, spreading everything done since loop_start (validation and samples
// included) over the steps done, start+1 .. step
static void format_eta(char* out, size_t n, double loop_start, int step, int start, int steps) {
    double per_step = (now_seconds() - loop_start) / (step - start > 0 ? step - start : 1);
    format_duration(out, n, per_step * (steps - step));
}

// the memory plan's tables (device, and pinned host when it holds anything), to stdout and main.log
static void log_plan(Logger* lg, const Arena* dev, const Arena* host) {
    if (lg->quiet) return;
    arena_print(dev, stdout);
    if (lg->log) arena_print(dev, lg->log);
    if (host->total) { arena_print(host, stdout); if (lg->log) arena_print(host, lg->log); }
}

// A loss or gradient norm that is not finite stops the run before the optimizer applies
// it: a message, a non-zero exit, and the last checkpoint (step last_ckpt, -1 = none) as it was.
static void stop_if_not_finite(int step, double loss, double norm, const char* run_dir, int last_ckpt) {
    if (isfinite(loss) && isfinite(norm)) return;
    if (last_ckpt < 0)
        FAIL("step %d: the loss is %g and the gradient norm %g; a non-finite value stops the run before the optimizer "
             "applies it (no checkpoint was written). Hint: lower --lr, keep --grad-clip on, check the data", step, loss, norm);
    FAIL("step %d: the loss is %g and the gradient norm %g; a non-finite value stops the run before the optimizer "
         "applies it (%s/ckpt_%06d.bin is untouched). Hint: lower --lr, keep --grad-clip on, check the data", step, loss,
         norm, run_dir, last_ckpt);
}

// The same stop when the update itself made the parameters non-finite (finite = 0), checked
// before a checkpoint would be written: the last good one stays the newest.
static void stop_if_params_not_finite(int step, int finite, const char* run_dir, int last_ckpt) {
    if (finite) return;
    if (last_ckpt < 0)
        FAIL("step %d: the optimizer's update made non-finite parameters, so no checkpoint is written (no checkpoint was "
             "written). Hint: lower --lr, or raise --adam-eps", step);
    FAIL("step %d: the optimizer's update made non-finite parameters, so no checkpoint is written (%s/ckpt_%06d.bin is "
         "untouched and stays the newest). Hint: lower --lr, or raise --adam-eps", step, run_dir, last_ckpt);
}
