/*
Opening the files a user names, so that no open blocks and no write is lost unseen.

Inputs (data shards, clip files, tokenizers, checkpoints, reference files) must be regular
files. A plain open(2) of a FIFO waits for a writer forever (under mpirun only
--comm-timeout would end it), and a device or a socket has no size to check a file
against. So an input is opened with O_NONBLOCK (which makes the open of a FIFO return at
once), checked with fstat, and refused unless it is a regular file: "'PATH' is a FIFO, not
a regular file". O_NONBLOCK is then cleared, so reads behave as usual.

  input_open_try(path, why, n)        fd, or -1 with the reason in why (path named in it):
                                      for callers that skip a bad file (--resume auto,
                                      the tokenizer's warning)
  input_fopen_try(path, why, n)       the same as a FILE* ("rb"), or NULL
  xinput_open(path, what)             (common.h) fd, or FAIL naming what (the flag or kind of file)
  xinput_fopen(path, what)            (common.h) the same as a FILE* ("rb")
  file_kind(mode)                     "a FIFO", "a directory", ... for messages

Outputs a user names outside the run directory (--plan-json, --fit-candidates, the test
programs' --dump): opened with O_NONBLOCK too, so a FIFO without a reader fails at once
with ENXIO instead of blocking, and refused unless a regular file or a character device
(/dev/null, a terminal, /dev/stdout when it is one; /dev/stdout through a pipe is a FIFO
and is refused: write to a file and read that). Every write is checked by the caller, and
the close by xfclose, which FAILs naming the file: on /dev/full or a full disk the error
shows at the fflush/fclose that writes the buffered bytes, and a program that ignored it
would exit 0 with the file lost.

  output_fopen_try(path, why, n)      a FILE* ("w"), or NULL with the reason in why
  xoutput_fopen(path, what)           (common.h) the same, or FAIL naming what and the reason
  fclose_err(f)                       fflush + fclose: 0 or the errno
  xfclose(f, path, what)              (common.h) the same, or FAIL naming what, the file and the reason

Only the C library here, so the plain-C readers (tokenizer.h, dataloader.h, built alone by
their unit tests) use it too; the forms that FAIL are in common.h, beside xfopen.
*/
#pragma once
#include <stdio.h>
#include <string.h>
#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

static inline const char* file_kind(mode_t m) {
    if (S_ISREG(m)) return "a regular file";
    if (S_ISDIR(m)) return "a directory";
    if (S_ISFIFO(m)) return "a FIFO";
    if (S_ISCHR(m)) return "a character device";
    if (S_ISBLK(m)) return "a block device";
    if (S_ISSOCK(m)) return "a socket";
    return "not a regular file";
}

// clears O_NONBLOCK of fd; 0, or -1 (errno set)
static inline int fd_clear_nonblock(int fd) {
    int fl = fcntl(fd, F_GETFL);
    return fl < 0 ? -1 : fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
}

static inline int input_open_try(const char* path, char* why, size_t n) {
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0) { snprintf(why, n, "cannot open '%s': %s", path, strerror(errno)); return -1; }
    struct stat st;
    if (fstat(fd, &st) != 0) { snprintf(why, n, "cannot stat '%s': %s", path, strerror(errno)); close(fd); return -1; }
    if (!S_ISREG(st.st_mode)) {
        snprintf(why, n, "'%s' is %s, not a regular file", path, file_kind(st.st_mode));
        close(fd);
        return -1;
    }
    if (fd_clear_nonblock(fd) != 0) { snprintf(why, n, "cannot use '%s': %s", path, strerror(errno)); close(fd); return -1; }
    return fd;
}

static inline FILE* input_fopen_try(const char* path, char* why, size_t n) {
    int fd = input_open_try(path, why, n);
    if (fd < 0) return NULL;
    FILE* f = fdopen(fd, "rb");
    if (!f) { snprintf(why, n, "cannot open '%s': %s", path, strerror(errno)); close(fd); }
    return f;
}

// An output's FILE* ("w"), or NULL with the reason in why (path named in it)
static inline FILE* output_fopen_try(const char* path, char* why, size_t n) {
    int fd = open(path, O_WRONLY | O_CREAT | O_NONBLOCK | O_CLOEXEC, 0644);
    if (fd < 0) {
        int e = errno;
        snprintf(why, n, "cannot write '%s': %s%s", path, strerror(e),
                 e == ENXIO ? " (a FIFO that no process reads)" : "");
        return NULL;
    }
    struct stat st;
    if (fstat(fd, &st) != 0) { snprintf(why, n, "cannot stat '%s': %s", path, strerror(errno)); close(fd); return NULL; }
    if (!S_ISREG(st.st_mode) && !S_ISCHR(st.st_mode)) {
        snprintf(why, n, "'%s' is %s, not a regular file", path, file_kind(st.st_mode));
        close(fd);
        return NULL;
    }
    // truncated only now: O_TRUNC at the open would empty a file before it was checked
    if ((S_ISREG(st.st_mode) && ftruncate(fd, 0) != 0) || fd_clear_nonblock(fd) != 0) {
        snprintf(why, n, "cannot write '%s': %s", path, strerror(errno));
        close(fd);
        return NULL;
    }
    FILE* f = fdopen(fd, "w");
    if (!f) { snprintf(why, n, "cannot write '%s': %s", path, strerror(errno)); close(fd); }
    return f;
}

// fflush + fclose: 0, or the errno of the failure (a full disk, /dev/full, EFBIG, EIO)
static inline int fclose_err(FILE* f) {
    errno = 0;
    int err = 0;
    if (fflush(f) != 0 || ferror(f)) err = errno ? errno : EIO;
    if (fclose(f) != 0 && !err) err = errno ? errno : EIO;
    return err;
}
