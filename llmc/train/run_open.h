/*
A run's start in its run directory, and the rules that keep every run's files: rank 0
locks the directory (llmc/core/run_dir.h), looks at what it holds and decides, before a
byte is written; every rank gets the checkpoint to continue from.

What a directory holds is one run, named in run.json: the program, the model (the shape a
checkpoint header records), --seed and the training data (its flag's value, and a
signature of the files it names: their sizes and first 64 KiB, so a moved copy is the
same data). The rules:

  a fresh run (no --resume)    only into a directory that holds no run (no run.json,
                               main.log, metrics.jsonl, checkpoint or samples/); else
                               refused, unless --start-over 1: the earlier run's files
                               then move to set_aside/N/ (nothing is deleted), so no
                               earlier checkpoint is left behind to be resumed later
  --resume auto                continues the run the directory holds: another program,
                               model, seed or data is refused. The newest checkpoint
                               that reads whole is taken; a newer one of this format
                               that does not (truncated, corrupted; or a file
                               too short for any header) moves to set_aside/N/
                               with a warning, so the run never overwrites
                               it; one that is not this program's or cannot be read
                               (another trainer's, another version, no permission, not
                               a regular file) refuses the run: nothing is ever
                               overwritten because it could not be read. No checkpoint
                               at all: a fresh start, the logs appended to
  --resume FILE                the user's choice: another program or model is refused;
                               another seed or data is said and recorded. Checkpoints
                               of the directory newer than FILE's step move to
                               set_aside/N/ (the run's history forks there)

A symbolic link where a file of the run should be (main.log, metrics.jsonl, run.json,
run.lock, samples, set_aside, a checkpoint) refuses the run. The moves, the removal of
temporary files a killed writer left, run.json and the logs all happen in run_start, once
the trainer has accepted its inputs: a refused run leaves the directory as it was.
*/
#pragma once
#include "../core/run_dir.h"
#include "../core/logger.h"
#include "../io/checkpoint.h"
#include "state_checkpoint.h"
#include "train_args.h"
#include <glob.h>

// ----------------------------------------------------------------------------
// what a run is (run.json)

typedef struct { char *program, *model, *data, *data_sig; long long seed; } RunIdentity;

static inline void run_identity_free(RunIdentity* id) {
    free(id->program); free(id->model); free(id->data); free(id->data_sig);
    memset(id, 0, sizeof(*id));
}

static inline uint64_t fnv64(uint64_t h, const void* p, size_t n) {
    const unsigned char* b = (const unsigned char*)p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

// The files the data flag names (a glob pattern, or one file): their count, bytes and a hash
// of each one's size and first 64 KiB (opened without blocking; what is not a regular file
// is left out). "" when it names none ("synthetic").
static inline char* run_data_signature(const char* data) {
    glob_t g;
    memset(&g, 0, sizeof(g));
    if (glob(data, 0, NULL, &g) != 0 || g.gl_pathc == 0) { globfree(&g); return str_printf("%s", ""); }
    uint64_t h = 0xcbf29ce484222325ull;
    long long bytes = 0;
    size_t files = 0;
    unsigned char* buf = (unsigned char*)xmalloc(1 << 16);
    for (size_t i = 0; i < g.gl_pathc; i++) {
        int fd = open(g.gl_pathv[i], O_RDONLY | O_NONBLOCK | O_CLOEXEC);
        struct stat st;
        if (fd < 0) continue;
        if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); continue; }
        ssize_t n = read(fd, buf, 1 << 16);
        close(fd);
        h = fnv64(h, &st.st_size, sizeof(st.st_size));
        if (n > 0) h = fnv64(h, buf, (size_t)n);
        bytes += st.st_size;
        files++;
    }
    free(buf);
    globfree(&g);
    if (!files) return str_printf("%s", "");
    return str_printf("%zu files, %lld bytes, %016llx", files, bytes, (unsigned long long)h);
}

// "dim=288 n_layers=6 ... rope_theta=10000": the shape a checkpoint header records
static inline char* run_model_text(const CkptShape* s) {
    char* out = str_printf("%s", "");
    for (int i = 0; i < s->n_int + s->n_float; i++) {
        char* next = i < s->n_int ? str_printf("%s%s%s=%d", out, i ? " " : "", s->int_names[i], s->ints[i])
                                  : str_printf("%s%s%s=%.9g", out, i ? " " : "", s->float_names[i - s->n_int],
                                               s->floats[i - s->n_int]);
        free(out);
        out = next;
    }
    return out;
}

static inline RunIdentity run_identity_of(const char* program, const CkptShape* shape, long long seed, const char* data) {
    RunIdentity id;
    id.program = str_printf("%s", program);
    id.model = run_model_text(shape);
    id.seed = seed;
    id.data = str_printf("%s", data ? data : "");
    id.data_sig = run_data_signature(id.data);
    return id;
}

// a JSON string's body: quotes, backslashes and control bytes escaped
static inline char* json_escape(const char* s) {
    size_t n = 0;
    for (const char* p = s; *p; p++) n += (unsigned char)*p < 0x20 || *p == '"' || *p == '\\' ? 6 : 1;
    char* out = (char*)xmalloc(n + 1);
    char* o = out;
    for (const unsigned char* p = (const unsigned char*)s; *p; p++) {
        if (*p == '"' || *p == '\\') { *o++ = '\\'; *o++ = (char)*p; }
        else if (*p < 0x20) o += sprintf(o, "\\u%04x", *p);
        else *o++ = (char)*p;
    }
    *o = 0;
    return out;
}

// the string value of "key" in text written by run_identity_write (heap), or NULL
static inline char* json_string_field(const char* text, const char* key) {
    char* pat = str_printf("\"%s\": \"", key);
    const char* p = strstr(text, pat);
    size_t skip = strlen(pat);
    free(pat);
    if (!p) return NULL;
    p += skip;
    char* out = (char*)xmalloc(strlen(p) + 1);
    char* o = out;
    for (; *p && *p != '"'; p++) {
        if (*p != '\\') { *o++ = *p; continue; }
        p++;
        if (*p == 'u') { unsigned v; if (sscanf(p + 1, "%4x", &v) != 1) break; *o++ = (char)v; p += 4; }
        else if (*p) *o++ = *p;
        else break;
    }
    if (*p != '"') { free(out); return NULL; }
    *o = 0;
    return out;
}

static inline void run_identity_write(const RunDir* rd, const RunIdentity* id) {
    char *p = json_escape(id->program), *m = json_escape(id->model), *d = json_escape(id->data), *s = json_escape(id->data_sig);
    char* text = str_printf("{\"program\": \"%s\", \"model\": \"%s\", \"seed\": \"%lld\", \"data\": \"%s\", "
                            "\"data_signature\": \"%s\"}\n", p, m, id->seed, d, s);
    free(p); free(m); free(d); free(s);
    char* tmp = NULL;
    int fd = run_dir_create_tmp(rd, "run.json", &tmp);
    size_t n = strlen(text);
    int ok = fd >= 0 && write(fd, text, n) == (ssize_t)n;
    ok = fd >= 0 && close(fd) == 0 && ok;
    if (!ok || renameat(rd->fd, tmp, rd->fd, "run.json") != 0) {
        int e = errno;
        if (tmp) unlinkat(rd->fd, tmp, 0);
        FAIL("cannot write %s/run.json: %s (hint: disk full?)", rd->path, strerror(e));
    }
    free(tmp); free(text);
}

// run.json of the directory: 1 read, 0 none, -1 there but unreadable (*why says so)
static inline int run_identity_read(const RunDir* rd, RunIdentity* id, char** why) {
    memset(id, 0, sizeof(*id));
    *why = NULL;
    int fd = openat(rd->fd, "run.json", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT) return 0;
    if (fd < 0) { *why = str_printf("cannot read it: %s", strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size > (1 << 20)) {
        close(fd);
        *why = str_printf("%s", "it is not a regular file of at most 1 MiB");
        return -1;
    }
    char* text = (char*)xmalloc((size_t)st.st_size + 1);
    ssize_t n = read(fd, text, (size_t)st.st_size);
    close(fd);
    text[n > 0 ? n : 0] = 0;
    id->program = json_string_field(text, "program");
    id->model = json_string_field(text, "model");
    id->data = json_string_field(text, "data");
    id->data_sig = json_string_field(text, "data_signature");
    char* seed = json_string_field(text, "seed");
    free(text);
    if (!id->program || !id->model || !id->data || !id->data_sig || !seed || sscanf(seed, "%lld", &id->seed) != 1) {
        free(seed);
        run_identity_free(id);
        *why = str_printf("%s", "it is not one this program wrote");
        return -1;
    }
    free(seed);
    return 1;
}

static inline int run_same_data(const RunIdentity* a, const RunIdentity* b) {
    if (a->data_sig[0] && b->data_sig[0]) return strcmp(a->data_sig, b->data_sig) == 0;
    return strcmp(a->data, b->data) == 0;
}

static inline char* run_identity_text(const RunIdentity* id) {
    return str_printf("%s, model %s, --seed %lld, data '%s'", id->program, id->model, id->seed, id->data);
}

// ----------------------------------------------------------------------------
// what the directory holds

typedef struct {
    int log, metrics, identity, samples;  // present
    int* steps; int n_ckpt;               // checkpoints, newest first
    char** tmps; int n_tmp;               // temporary files a killed writer left
} RunSurvey;

static inline void run_survey_free(RunSurvey* s) {
    free(s->steps);
    for (int i = 0; i < s->n_tmp; i++) free(s->tmps[i]);
    free(s->tmps);
    memset(s, 0, sizeof(*s));
}

static inline int run_survey_used(const RunSurvey* s) { return s->log || s->metrics || s->identity || s->samples || s->n_ckpt; }

// the run's own names: a link there is refused (never written through, never followed)
static inline int run_own_name(const char* name) {
    static const char* const own[] = {"main.log", "metrics.jsonl", "run.json", "run.lock", "samples", "set_aside", NULL};
    int step;
    for (int i = 0; own[i]; i++) if (strcmp(name, own[i]) == 0) return 1;
    return ckpt_name_step(name, &step) || (strncmp(name, "ckpt_", 5) == 0 && run_dir_is_tmp(name)) ||
           (strncmp(name, "run.json", 8) == 0 && run_dir_is_tmp(name));
}

static inline void run_survey(const RunDir* rd, RunSurvey* s) {
    memset(s, 0, sizeof(*s));
    int fd = dup(rd->fd);
    DIR* d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) FAIL("cannot list the run directory %s: %s", rd->path, strerror(errno));
    rewinddir(d);
    int cap = 0;
    struct dirent* e;
    while ((e = readdir(d)) != NULL) {
        const char* n = e->d_name;
        if (!run_own_name(n)) continue;
        if (run_dir_kind(rd, n) == S_IFLNK)
            FAIL("%s/%s is a symbolic link: a run directory's own files are never followed outside it, nor written "
                 "through (remove the link)", rd->path, n);
        if (run_dir_is_tmp(n)) {
            if (s->n_tmp == cap) {
                cap = cap ? 2 * cap : 8;
                s->tmps = (char**)realloc(s->tmps, (size_t)cap * sizeof(char*));
                if (!s->tmps) FAIL("host realloc for %d names failed", cap);
            }
            s->tmps[s->n_tmp++] = str_printf("%s", n);
        }
        s->log |= strcmp(n, "main.log") == 0;
        s->metrics |= strcmp(n, "metrics.jsonl") == 0;
        s->identity |= strcmp(n, "run.json") == 0;
        s->samples |= strcmp(n, "samples") == 0;
    }
    closedir(d);
    s->n_ckpt = ckpt_list(rd, &s->steps);
}

// ----------------------------------------------------------------------------
// the decision, and its execution once the inputs are accepted

typedef struct {
    RunDir rd;            // rank 0's (fd -1 elsewhere)
    RunIdentity id;       // this run's
    int write_identity;   // run.json is (re)written at start
    char** moves; int n_moves;  // names set aside at start, into set_aside/N/
    char* moves_why;
    char** stale; int n_stale;  // temporary files removed at start
    char* resume;         // the checkpoint to continue from (heap), or NULL
    int keep_last;        // --keep-last
    const CkptFormat* fmt;
} RunStart;

static inline void run_start_move(RunStart* r, const char* name) {
    r->moves = (char**)realloc(r->moves, (size_t)(r->n_moves + 1) * sizeof(char*));
    if (!r->moves) FAIL("host realloc for %d names failed", r->n_moves + 1);
    r->moves[r->n_moves++] = str_printf("%s", name);
}

// the first two header words of a regular file, read without blocking; 0 when unreadable
static inline int ckpt_peek_header(const RunDir* rd, const char* name, int h[256]) {
    int fd = openat(rd->fd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) return 0;
    struct stat st;
    int ok = fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, h, 1024) == 1024;
    close(fd);
    return ok;
}

// whether a regular file is shorter than a checkpoint's header: a write cut short, with
// nothing in it to say whose it is or to protect (set aside like a damaged checkpoint)
static inline int ckpt_header_truncated(const RunDir* rd, const char* name) {
    struct stat st;
    return fstatat(rd->fd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISREG(st.st_mode) && st.st_size < 1024;
}

// the hints every refusal ends with
#define RUN_DIR_HINT "Nothing was written. To start a new run there: --start-over 1 (the files there move to " \
                     "set_aside/N/, nothing is deleted); or give another --run-dir"

static inline void run_describe_used(const RunSurvey* s, const RunIdentity* disk, char* out, size_t n) {
    char* who = disk ? run_identity_text(disk) : str_printf("%s", "a run");
    if (s->n_ckpt) snprintf(out, n, "%s, with %d checkpoint%s up to ckpt_%06d.bin", who, s->n_ckpt, s->n_ckpt > 1 ? "s" : "",
                            s->steps[0]);
    else snprintf(out, n, "%s, with %s", who, s->log ? "its main.log" : s->metrics ? "its metrics.jsonl" : s->samples ?
                                             "its samples/" : "its run.json");
    free(who);
}

// --resume (auto or FILE): see the top of this file. disk: run.json's identity (NULL: none);
// unreadable: why run.json cannot be used (NULL: it can, or there is none)
static inline void run_decide_resume(RunStart* r, Logger* lg, const TrainLoopArgs* l, const RunSurvey* s,
                                     const RunIdentity* disk, const char* unreadable, const char* used,
                                     const char* (*check)(const char* path, void* info)) {
    RunDir* rd = &r->rd;
    if (unreadable) FAIL("--run-dir %s holds a run.json this run cannot use (%s). " RUN_DIR_HINT, rd->path, unreadable);
    int automatic = strcmp(l->resume, "auto") == 0;
    if (disk) {
        const char* differs = strcmp(disk->program, r->id.program) != 0 ? "program"
                              : strcmp(disk->model, r->id.model) != 0   ? "model"
                              : disk->seed != r->id.seed                ? "--seed"
                              : !run_same_data(disk, &r->id)            ? "training data"
                                                                        : NULL;
        int hard = differs && (strcmp(differs, "program") == 0 || strcmp(differs, "model") == 0);
        if (differs && (hard || automatic)) {
            char* mine = run_identity_text(&r->id);
            FAIL("--run-dir %s holds another run (its %s differs): %s; this one is %s. %s. " RUN_DIR_HINT, rd->path,
                 differs, used, mine, hard ? "A checkpoint continues only the model and program that wrote it"
                 : "--resume auto continues only the directory's own run (--resume FILE continues it with this run's "
                   "seed and data, said in main.log and run.json)");
        }
        if (differs) {
            char *was = run_identity_text(disk), *now = run_identity_text(&r->id);
            logf_(lg, "note: --resume %s continues the run of %s with another %s (it was %s; now %s)\n", l->resume,
                  rd->path, differs, was, now);
            free(was); free(now);
            r->write_identity = 1;
        }
    }
    if (automatic) {
        for (int i = 0; i < s->n_ckpt && !r->resume; i++) {
            CkptName cn = ckpt_step_name(s->steps[i]);
            const char* name = cn.s;
            char* path = run_dir_file(rd, name);
            if (run_dir_kind(rd, name) != S_IFREG)
                FAIL("--resume auto: %s is not a regular file, so not a checkpoint this run can read, and it is never "
                     "overwritten (remove it). " RUN_DIR_HINT, path);
            CkptInfo info;
            const char* why = check(path, &info);
            if (!why) { r->resume = path; break; }
            int h[256];
            if (!ckpt_header_truncated(rd, name) &&
                (!ckpt_peek_header(rd, name, h) || h[0] != r->fmt->magic || h[1] != r->fmt->version))
                FAIL("--resume auto: %s cannot be used (%s), and nothing is ever overwritten because it could not be "
                     "read. " RUN_DIR_HINT, path, why);
            logf_(lg, "warning: --resume auto skips %s; the file moves to set_aside/ so that this run never overwrites it\n",
                  why);
            run_start_move(r, name);
            free(path);
        }
        if (r->n_moves) r->moves_why = str_printf("%s", "checkpoints of this run that do not read whole");
        if (!r->resume) logf_(lg, "--resume auto: no checkpoint in %s, starting fresh\n", rd->path);
        return;
    }
    // --resume FILE: the directory's checkpoints past FILE's step are another history
    r->resume = str_printf("%s", l->resume);
    int h[256], step = -1, fd = open(l->resume, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    struct stat st;
    if (fd >= 0 && fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && read(fd, h, 1024) == 1024 && h[0] == r->fmt->magic)
        step = h[r->fmt->step_at];
    if (fd >= 0) close(fd);
    for (int i = 0; step >= 0 && i < s->n_ckpt && s->steps[i] > step; i++) run_start_move(r, ckpt_step_name(s->steps[i]).s);
    if (r->n_moves) r->moves_why = str_printf("checkpoints newer than step %d, which this run continues from", step);
}

// Rank 0's decision (see the top of this file); FAILs when the run must not start.
static inline void run_decide(RunStart* r, Logger* lg, const TrainLoopArgs* l, int start_over,
                              const char* (*check)(const char* path, void* info)) {
    RunDir* rd = &r->rd;
    RunSurvey s;
    run_survey(rd, &s);
    RunIdentity disk;
    char* unreadable = NULL;
    int have_id = run_identity_read(rd, &disk, &unreadable);
    char used[2048];
    run_describe_used(&s, have_id > 0 ? &disk : NULL, used, sizeof(used));
    for (int i = 0; i < s.n_tmp; i++) {  // a killed writer's: under the lock, no one else's
        r->stale = (char**)realloc(r->stale, (size_t)(i + 1) * sizeof(char*));
        if (!r->stale) FAIL("host realloc for %d names failed", i + 1);
        r->stale[r->n_stale++] = str_printf("%s", s.tmps[i]);
    }
    r->write_identity = have_id <= 0;
    if (l->resume) {
        run_decide_resume(r, lg, l, &s, have_id > 0 ? &disk : NULL, have_id < 0 ? unreadable : NULL, used, check);
    } else if (run_survey_used(&s) && !start_over) {
        FAIL("--run-dir %s already holds %s: a new run there would overwrite it. To continue it: --resume auto "
             "(with that run's flags). " RUN_DIR_HINT, rd->path, used);
    } else if (run_survey_used(&s)) {  // --start-over: all of the earlier run moves aside
        static const char* const files[] = {"run.json", "main.log", "metrics.jsonl", "samples", NULL};
        for (int i = 0; files[i]; i++) if (run_dir_kind(rd, files[i])) run_start_move(r, files[i]);
        for (int i = 0; i < s.n_ckpt; i++) run_start_move(r, ckpt_step_name(s.steps[i]).s);
        r->moves_why = str_printf("--start-over 1: the earlier run (%s)", used);
        r->write_identity = 1;
    }
    if (have_id > 0) run_identity_free(&disk);
    free(unreadable);
    run_survey_free(&s);
}

// The start of a run (not --plan-only, which writes nothing): rank 0 locks the run directory
// and decides; every rank gets the checkpoint to continue from (NULL: none). main.log's lines
// are held until run_start.
static inline const char* run_open(RunStart* r, Comm* cm, Logger* lg, const TrainLoopArgs* l, int start_over, int keep_last,
                                   const char* program, const CkptShape* shape, const char* data, const CkptFormat* fmt,
                                   const char* (*check)(const char* path, void* info)) {
    memset(r, 0, sizeof(*r));
    r->rd.fd = -1;
    r->keep_last = keep_last;
    r->fmt = fmt;
    if (l->plan_only) return NULL;
    long long len = 0;
    if (cm->rank == 0) {
        logger_open(lg, l->run_dir, l->resume != NULL);
        run_dir_lock(&r->rd, l->run_dir, program);
        if (r->rd.note) logf_(lg, "%s", r->rd.note);
        r->id = run_identity_of(program, shape, l->seed, data);
        run_decide(r, lg, l, start_over, check);
        lg->append = l->resume != NULL;
        len = r->resume ? (long long)strlen(r->resume) + 1 : 0;
    }
    comm_host_broadcast(cm, GROUP_WORLD, &len, sizeof(len), 0);
    if (cm->rank != 0 && len) r->resume = (char*)xmalloc((size_t)len);
    if (len) comm_host_broadcast(cm, GROUP_WORLD, r->resume, (size_t)len, 0);
    return r->resume;
}

// The inputs are accepted: what run_open decided is done (rank 0), then main.log and
// metrics.jsonl open with the lines held so far.
static inline void run_start(RunStart* r, Logger* lg) {
    RunDir* rd = &r->rd;
    if (rd->fd < 0) return;
    run_dir_started(rd);
    if (r->n_moves) {
        char* sub = run_dir_new_subdir(rd, "set_aside");
        for (int i = 0; i < r->n_moves; i++) free(run_dir_move_into(rd, sub, r->moves[i]));
        logf_(lg, "%s: moved to %s/%s/ (%d file%s; nothing was deleted)\n", r->moves_why, rd->path, sub, r->n_moves,
              r->n_moves > 1 ? "s" : "");
        free(sub);
    }
    for (int i = 0; i < r->n_stale; i++)
        if (unlinkat(rd->fd, r->stale[i], 0) == 0)
            logf_(lg, "removed %s/%s, a temporary file an interrupted writer left\n", rd->path, r->stale[i]);
    if (r->write_identity) run_identity_write(rd, &r->id);
    logger_start(lg, rd);
}

// --keep-last N: after a checkpoint, the older ones of this format past the newest N go (the
// initial weights, step 0, stay); the newest, the one a resume needs, is never among them
static inline void run_keep_last(RunStart* r, Logger* lg) {
    if (r->rd.fd < 0 || r->keep_last <= 0) return;
    int* steps;
    int n = ckpt_list(&r->rd, &steps), kept = 0;
    for (int i = 0; i < n; i++) {
        if (steps[i] == 0) continue;
        if (kept++ < r->keep_last) continue;
        const char* name = ckpt_step_name(steps[i]).s;
        int h[256];
        if (!ckpt_peek_header(&r->rd, name, h) || h[0] != r->fmt->magic || h[1] != r->fmt->version) continue;
        if (unlinkat(r->rd.fd, name, 0) == 0) logf_(lg, "removed %s (--keep-last %d)\n", name, r->keep_last);
        else logf_(lg, "warning: cannot remove %s/%s (--keep-last): %s\n", r->rd.path, name, strerror(errno));
    }
    free(steps);
}

static inline void run_close(RunStart* r) {
    run_dir_close(&r->rd);
    run_identity_free(&r->id);
    for (int i = 0; i < r->n_moves; i++) free(r->moves[i]);
    for (int i = 0; i < r->n_stale; i++) free(r->stale[i]);
    free(r->moves); free(r->stale); free(r->moves_why); free(r->resume);
    memset(r, 0, sizeof(*r));
    r->rd.fd = -1;
}
