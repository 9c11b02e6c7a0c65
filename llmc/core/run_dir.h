/*
The run directory: one run per directory, and nothing of it ever lost or written outside it.

- One run at a time. Rank 0 holds flock(2) on the directory itself for the whole run: the
  kernel releases it on any death (kill -9 included), so a second run is refused at once
  and a dead run's lock never needs cleaning. run.lock records the holder (program, host,
  pid and its start time, SLURM job, since when), so the refusal can name it. Where the
  file system gives no such lock (NFS or Lustre mounted without it: flock fails with
  ENOLCK or EOPNOTSUPP), the record is the lock, created with O_EXCL; a record of a
  process that is gone (same host, pid not running or reused) or of this same SLURM job
  (requeued) is taken over with a message, and a live or unknowable one refuses the run.
  So is a record of another host where flock held here: the directory is then on a shared
  file system, whose flock may be each node's own. LLMC_RUN_DIR_NO_FLOCK=1 takes the
  record-only path on any disk (the tests of it).
- Nothing outside it. Every file of the run is opened relative to the directory's own
  descriptor with O_NOFOLLOW, created with O_EXCL under a name no one can predict and
  renamed into place (rename replaces a link, it never follows one): a symbolic link
  where a file of the run should be is refused at start, never written through.
- Paths of any length: names are joined on the heap (str_printf); the kernel's own limit
  (PATH_MAX, NAME_MAX) comes back as ENAMETOOLONG, named in the message.
- Refused runs leave no trace: what run_dir_lock added (run.lock, the directory when it
  did not exist) is removed again at exit until run_dir_started says the run is on.
*/
#pragma once
#include "common.h"
#include <dirent.h>
#include <limits.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

// printf into a fresh heap string (free it)
__attribute__((format(printf, 1, 2))) static inline char* str_printf(const char* fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0) FAIL("str_printf: bad format '%s'", fmt);
    char* s = (char*)xmalloc((size_t)n + 1);
    va_start(ap, fmt);
    vsnprintf(s, (size_t)n + 1, fmt, ap);
    va_end(ap);
    return s;
}

// creates path and its parents; returns 0, or the errno of the failure. *created: whether the
// last component was made here (NULL: not wanted)
static inline int mkdir_p_try2(const char* path, int* created) {
    if (created) *created = 0;
    if (!path[0]) return ENOENT;
    char* buf = str_printf("%s", path);
    for (char* p = buf + 1; *p; p++)
        if (*p == '/') { *p = 0; mkdir(buf, 0755); *p = '/'; }
    int err = 0;
    struct stat st;
    if (mkdir(buf, 0755) == 0) { if (created) *created = 1; }
    else if (!(errno == EEXIST && stat(buf, &st) == 0 && S_ISDIR(st.st_mode))) err = errno ? errno : EEXIST;
    free(buf);
    return err;
}
static inline int mkdir_p_try(const char* path) { return mkdir_p_try2(path, NULL); }

// a random 64-bit value for names no one can plant a file under in advance
static inline uint64_t run_dir_random64(void) {
    uint64_t r = 0;
    if (getrandom(&r, sizeof(r), GRND_NONBLOCK) != (ssize_t)sizeof(r)) {
        struct timespec ts;
        clock_gettime(CLOCK_REALTIME, &ts);
        r = ((uint64_t)ts.tv_nsec << 20) ^ (uint64_t)ts.tv_sec ^ ((uint64_t)getpid() << 40);
    }
    return r;
}

typedef struct {
    char* path;        // as given (heap)
    int fd;            // the directory (-1: not opened, as on ranks other than 0)
    int flock_held;    // the kernel's lock holds; 0: the record alone (NFS, Lustre)
    int created;       // this run made the directory: removed again if a refused run leaves it empty
    int record;        // run.lock is this process's record: removed at exit
    int started;       // the run is on (run_dir_started): nothing is removed at exit but run.lock
    char* note;        // what run_dir_lock did that the log should say (a record taken over), or NULL
} RunDir;

static RunDir* run_dir_at_exit_ = NULL;

// at exit, whatever the cause (FAIL included): the record goes; a directory this run made
// goes too when the run never started and left it empty
static void run_dir_exit_cleanup(void) {
    RunDir* rd = run_dir_at_exit_;
    if (!rd || rd->fd < 0) return;
    if (rd->record) unlinkat(rd->fd, "run.lock", 0);
    rd->record = 0;
    if (rd->created && !rd->started) rmdir(rd->path);  // fails, as it should, when anything is in it
}

// "path/name" on the heap, for messages and the few calls that take paths
static inline char* run_dir_file(const RunDir* rd, const char* name) { return str_printf("%s/%s", rd->path, name); }

// this process's start time in clock ticks since boot (/proc/PID/stat field 22): a pid and
// this tell a live holder from a pid the kernel has given to another process since; 0: unknown
static inline unsigned long long run_dir_proc_start(long pid) {
    char name[64];
    snprintf(name, sizeof(name), "/proc/%ld/stat", pid);
    FILE* f = fopen(name, "r");
    if (!f) return 0;
    char buf[1024];
    size_t n = fread(buf, 1, sizeof(buf) - 1, f);
    fclose(f);
    buf[n] = 0;
    char* p = strrchr(buf, ')');  // the command name may hold spaces and parentheses
    if (!p) return 0;
    unsigned long long start = 0;
    // after ")": state, then fields 4..21, then starttime (22)
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %*u %*u %*d %*d %*d %*d %*d %*d %llu", &start) != 1)
        return 0;
    return start;
}

typedef struct { char host[256], job[64], program[64], since[64]; long pid; unsigned long long start; int valid; } RunLockRecord;

static inline void run_lock_record_self(RunLockRecord* r, const char* program) {
    memset(r, 0, sizeof(*r));
    gethostname(r->host, sizeof(r->host) - 1);
    const char* job = getenv("SLURM_JOB_ID");
    snprintf(r->job, sizeof(r->job), "%s", job ? job : "");
    snprintf(r->program, sizeof(r->program), "%s", program);
    r->pid = (long)getpid();
    r->start = run_dir_proc_start(r->pid);
    time_t now = time(NULL);
    struct tm tm;
    gmtime_r(&now, &tm);
    strftime(r->since, sizeof(r->since), "%Y-%m-%d %H:%M:%S UTC", &tm);
    r->valid = 1;
}

// "train_llama, pid 1234 on host h (SLURM job 55), since 2026-11-29 07:10:03 UTC"
static inline void run_lock_record_text(const RunLockRecord* r, char* out, size_t n) {
    if (!r->valid) { snprintf(out, n, "another run (its run.lock record is unreadable)"); return; }
    snprintf(out, n, "%s, pid %ld on host %s%s%s%s, since %s", r->program, r->pid, r->host, r->job[0] ? " (SLURM job " : "",
             r->job, r->job[0] ? ")" : "", r->since);
}

// reads run.lock (never through a link, never blocking); 0: there is none
static inline int run_lock_read(const RunDir* rd, RunLockRecord* r) {
    memset(r, 0, sizeof(*r));
    int fd = openat(rd->fd, "run.lock", O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return 0;
        if (errno == ELOOP) FAIL("%s/run.lock is a symbolic link: a run directory's own files are never followed (remove it)", rd->path);
        FAIL("cannot read %s/run.lock: %s", rd->path, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) { close(fd); FAIL("%s/run.lock is not a regular file (remove it)", rd->path); }
    char buf[1024];
    ssize_t n = read(fd, buf, sizeof(buf) - 1);
    close(fd);
    buf[n > 0 ? n : 0] = 0;
    char since_date[32] = "", since_time[32] = "";
    r->valid = sscanf(buf, "program=%63s host=%255s pid=%ld start=%llu job=%63s since=%31s %31s", r->program, r->host, &r->pid,
                      &r->start, r->job, since_date, since_time) == 7;
    if (strcmp(r->job, "-") == 0) r->job[0] = 0;
    snprintf(r->since, sizeof(r->since), "%s %s UTC", since_date, since_time);
    return 1;
}

// whether the holder of a record runs now, as far as this host can tell: 1 running, 0 gone,
// -1 cannot be told (another host)
static inline int run_lock_holder_alive(const RunLockRecord* r, const RunLockRecord* self) {
    if (!r->valid) return -1;
    if (strcmp(r->host, self->host) != 0) return -1;
    if (r->pid <= 0 || (kill((pid_t)r->pid, 0) != 0 && errno == ESRCH)) return 0;
    unsigned long long start = run_dir_proc_start(r->pid);
    return start == 0 || r->start == 0 || start == r->start;  // a pid given to another process since: gone
}

static inline void run_lock_refuse(const RunDir* rd, const RunLockRecord* r, const char* why) {
    char who[512];
    run_lock_record_text(r, who, sizeof(who));
    FAIL("--run-dir %s is in use by %s: one run per directory%s. Wait for it or stop it, or give another --run-dir",
         rd->path, who, why);
}

// Opens (creating it and its parents when missing) and locks the run directory; a run that
// holds it already ends this one at once, naming the holder. Rank 0 only.
static inline void run_dir_lock(RunDir* rd, const char* path, const char* program) {
    memset(rd, 0, sizeof(*rd));
    rd->fd = -1;
    rd->path = str_printf("%s", path);
    if (strlen(path) + 32 >= PATH_MAX)  // (its files' names too: checked before any parent is made)
        FAIL("--run-dir is %zu characters long: the system's limit for a path is %d (PATH_MAX), and the run's files "
             "need room for their names; give a shorter one", strlen(path), PATH_MAX);
    int err = mkdir_p_try2(path, &rd->created);
    if (err) FAIL("cannot create the run directory '%s': %s", path, strerror(err));
    rd->fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (rd->fd < 0) FAIL("cannot open the run directory '%s': %s", path, strerror(errno));
    run_dir_at_exit_ = rd;
    static int registered = 0;
    if (!registered) { atexit(run_dir_exit_cleanup); registered = 1; }

    RunLockRecord self, held;
    run_lock_record_self(&self, program);
    const char* no_flock = getenv("LLMC_RUN_DIR_NO_FLOCK");
    if (!(no_flock && strcmp(no_flock, "1") == 0)) {
        if (flock(rd->fd, LOCK_EX | LOCK_NB) == 0) rd->flock_held = 1;
        else if (errno == EWOULDBLOCK) {
            if (!run_lock_read(rd, &held)) memset(&held, 0, sizeof(held));
            run_lock_refuse(rd, &held, "");
        }
        // else: this file system gives no such lock (ENOLCK, EOPNOTSUPP, ...): the record alone
    }
    // the record: created with O_EXCL; one left by a run that is gone is taken over
    for (int attempt = 0;; attempt++) {
        int fd = openat(rd->fd, "run.lock", O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0) {
            char text[1024];
            int n = snprintf(text, sizeof(text), "program=%s host=%s pid=%ld start=%llu job=%s since=%s\n", self.program,
                             self.host, self.pid, self.start, self.job[0] ? self.job : "-", self.since);
            int ok = write(fd, text, (size_t)n) == n;
            ok = close(fd) == 0 && ok;
            rd->record = 1;
            if (!ok) FAIL("cannot write %s/run.lock: %s (hint: disk full?)", rd->path, strerror(errno));
            return;
        }
        if (errno != EEXIST || attempt > 0) FAIL("cannot create %s/run.lock: %s", rd->path, strerror(errno));
        int have = run_lock_read(rd, &held);
        char who[512];
        run_lock_record_text(&held, who, sizeof(who));
        int alive = run_lock_holder_alive(&held, &self);
        if (!have) continue;  // gone between the two calls
        // The kernel's lock was free: on this host's disks that means whoever wrote the record
        // died without removing it. A record of another host means a shared file system, whose
        // flock may be local to each node (NFS with local_lock): that holder is judged as where
        // there is no flock at all.
        if (rd->flock_held && (!held.valid || strcmp(held.host, self.host) == 0)) {
            rd->note = str_printf("note: %s/run.lock was left by %s, which no longer holds the directory: taken over\n", rd->path, who);
        } else if (alive == 0) {
            rd->note = str_printf("note: %s/run.lock was left by %s, which is no longer running: taken over\n", rd->path, who);
        } else if (alive < 0 && held.valid && self.job[0] && strcmp(held.job, self.job) == 0) {
            rd->note = str_printf("note: %s/run.lock was left by this SLURM job (%s) before it was requeued: taken over\n",
                                  rd->path, who);
        } else if (alive > 0) {
            run_lock_refuse(rd, &held, " (this file system gives no kernel lock; the record names a live process)");
        } else {
            run_lock_refuse(rd, &held, " (this file system gives no kernel lock, and whether a process on another host "
                                       "still runs cannot be told from here: if it is gone, remove run.lock)");
        }
        if (unlinkat(rd->fd, "run.lock", 0) != 0 && errno != ENOENT)
            FAIL("cannot remove the stale %s/run.lock: %s", rd->path, strerror(errno));
    }
}

// the run is on: what run_dir_lock made stays (but the record, at exit)
static inline void run_dir_started(RunDir* rd) { rd->started = 1; }

// The run's end: its record removed, the lock released with the descriptor.
static inline void run_dir_close(RunDir* rd) {
    if (rd->fd >= 0) {
        if (rd->record) unlinkat(rd->fd, "run.lock", 0);
        rd->record = 0;
        close(rd->fd);
    }
    rd->fd = -1;
    if (run_dir_at_exit_ == rd) run_dir_at_exit_ = NULL;
    free(rd->path); free(rd->note);
    rd->path = rd->note = NULL;
}

// what a name in the directory is, without following a link: 0 none, else S_IFREG, S_IFLNK, ...
static inline unsigned run_dir_kind(const RunDir* rd, const char* name) {
    struct stat st;
    if (fstatat(rd->fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return 0;
    return st.st_mode & S_IFMT;
}

// A file of the run for writing, never through a link: create (O_EXCL: it must not exist)
// or append (created when missing). It must be a regular file.
static inline FILE* run_dir_open_write(const RunDir* rd, const char* name, int append) {
    int flags = O_WRONLY | O_CREAT | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC | (append ? O_APPEND : O_EXCL);
    int fd = openat(rd->fd, name, flags, 0644);
    if (fd < 0) {
        if (errno == ELOOP)
            FAIL("%s/%s is a symbolic link: a run directory's own files are never followed outside it (remove the link)",
                 rd->path, name);
        FAIL("cannot %s %s/%s: %s", append ? "open" : "create", rd->path, name, strerror(errno));
    }
    struct stat st;
    if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
        close(fd);
        FAIL("%s/%s is not a regular file (remove it)", rd->path, name);
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    FILE* f = fdopen(fd, append ? "a" : "w");
    if (!f) FAIL("cannot open %s/%s: %s", rd->path, name, strerror(errno));
    return f;
}

// A new file under a temporary name only this process knows ("NAME.tmp.<16 hex>", created
// with O_EXCL | O_NOFOLLOW); run_dir_commit renames it to NAME. Returns the descriptor, or
// -1 with errno; *tmp gets the temporary name (heap).
static inline int run_dir_create_tmp(const RunDir* rd, const char* name, char** tmp) {
    for (int attempt = 0; attempt < 8; attempt++) {
        *tmp = str_printf("%s.tmp.%016llx", name, (unsigned long long)run_dir_random64());
        int fd = openat(rd->fd, *tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0644);
        if (fd >= 0 || errno != EEXIST) return fd;
        free(*tmp);
    }
    *tmp = NULL;
    errno = EEXIST;
    return -1;
}

// whether a name is one of run_dir_create_tmp's (or the fixed NAME.tmp of earlier versions)
static inline int run_dir_is_tmp(const char* name) {
    const char* t = strstr(name, ".tmp");
    return t && (t[4] == 0 || strncmp(t + 4, ".", 1) == 0);
}

// the bytes the file system lets this user write in the directory; -1: unknown
static inline long long run_dir_free_bytes(const RunDir* rd) {
    const char* test = getenv("LLMC_TEST_FREE_BYTES");  // tests only: a full disk without filling one
    if (test) return atoll(test);
    struct statvfs s;
    if (fstatvfs(rd->fd, &s) != 0) return -1;
    return (long long)s.f_bavail * (long long)s.f_frsize;
}

// Moves name into the subdirectory sub (made when missing; never a link) under the same name
// (".1", ".2", ... appended when taken). Returns the new name (heap), relative to the directory.
static inline void run_dir_mkdirs(const RunDir* rd, const char* sub) {
    char* p = str_printf("%s", sub);
    for (char* c = p;; c++) {
        char was = *c;
        if (was != '/' && was != 0) continue;
        *c = 0;
        if (mkdirat(rd->fd, p, 0755) != 0 && errno != EEXIST) FAIL("cannot create %s/%s: %s", rd->path, p, strerror(errno));
        if (run_dir_kind(rd, p) != S_IFDIR)
            FAIL("%s/%s is not a directory (a link is never followed): remove it", rd->path, p);
        *c = was;
        if (!was) break;
    }
    free(p);
}

static inline char* run_dir_move_into(const RunDir* rd, const char* sub, const char* name) {
    run_dir_mkdirs(rd, sub);
    char* to = str_printf("%s/%s", sub, name);
    for (int k = 1; faccessat(rd->fd, to, F_OK, AT_SYMLINK_NOFOLLOW) == 0; k++) {
        free(to);
        to = str_printf("%s/%s.%d", sub, name, k);
    }
    if (renameat(rd->fd, name, rd->fd, to) != 0) FAIL("cannot move %s/%s to %s/%s: %s", rd->path, name, rd->path, to, strerror(errno));
    return to;
}

// the first "base/N" (N = 1, 2, ...) that does not exist yet (heap)
static inline char* run_dir_new_subdir(const RunDir* rd, const char* base) {
    for (int n = 1;; n++) {
        char* s = str_printf("%s/%d", base, n);
        if (faccessat(rd->fd, s, F_OK, AT_SYMLINK_NOFOLLOW) != 0) return s;
        free(s);
    }
}
