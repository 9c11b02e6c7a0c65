/*
The run directory: main.log (everything printed, as printed) and metrics.jsonl (one
JSON object per step). Lines are flushed as written so a crashed run keeps its log.
*/
#pragma once
#include "common.h"
#include <sys/stat.h>
#include <sys/types.h>

// quiet: a rank other than 0 of a multi-process run, which prints and writes nothing
typedef struct { FILE* log; FILE* metrics; int quiet; } Logger;

static void mkdir_p(const char* path) {
    char buf[1024];
    snprintf(buf, sizeof(buf), "%s", path);
    for (char* p = buf + 1; *p; p++) {
        if (*p == '/') { *p = 0; mkdir(buf, 0755); *p = '/'; }
    }
    if (mkdir(buf, 0755) != 0 && errno != EEXIST) FAIL("cannot create directory '%s': %s", path, strerror(errno));
}

// append = 1 when resuming, so one run directory holds the whole history
static void logger_open(Logger* lg, const char* run_dir, int append) {
    mkdir_p(run_dir);
    char path[1100];
    snprintf(path, sizeof(path), "%s/main.log", run_dir);
    lg->log = xfopen(path, append ? "a" : "w");
    snprintf(path, sizeof(path), "%s/metrics.jsonl", run_dir);
    lg->metrics = xfopen(path, append ? "a" : "w");
}

// printf to stdout and main.log
static void logf_(Logger* lg, const char* fmt, ...) {
    if (lg && lg->quiet) return;
    va_list ap;
    va_start(ap, fmt); vprintf(fmt, ap); va_end(ap);
    fflush(stdout);
    if (lg && lg->log) { va_start(ap, fmt); vfprintf(lg->log, fmt, ap); va_end(ap); fflush(lg->log); }
}

static void logger_close(Logger* lg) {
    if (lg->log) fclose(lg->log);
    if (lg->metrics) fclose(lg->metrics);
    lg->log = lg->metrics = NULL;
}
