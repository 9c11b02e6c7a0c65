/*
A trainer's checkpoint: a header of 256 int32, the whole model's fp32 parameters, AdamW m
and v in the reference layout, then an optional extra block the trainer names (the data
loader's position), written and checked through llmc/io/checkpoint.h (atomic, checksummed).
Byte layouts: docs/formats.md; outside tools read them, so what is written here must not
change.

No rank ever holds the whole model to write or read one (llama3-8B's three arrays are 96
GB): each rank moves the pieces of the state it owns (ParamStore's Pieces) between the
store and their offsets in the one file, a bounded chunk at a time, whatever the layout
(ranks, --zero, TP shards, the sharded vocabulary). So one file serves every layout, and
the run directory must be on a file system every rank sees. The trainer fills and
compares its model's header fields; the fields every trainer has (magic, version, step,
parameter count, extra bytes) sit where its CkptFormat says and are written and checked
here, so the two trainers cannot drift apart in how they guard a file.
*/
#pragma once
#include "../io/checkpoint.h"
#include "../core/flags.h"
#include "../parallel/param_store.h"
#include "train_args.h"

// the largest extra block a header may claim (a data loader's state is far smaller)
#define CKPT_EXTRA_MAX 512

typedef struct {
    const char* program;  // "train_llama": named when a file is some other program's
    int magic, version;
    int step_at;          // header slots: the step,
    int params_at;        // the parameter count (low 31 bits; the rest in the next slot),
    int extra_at;         // the extra block's bytes, or -1: no extra block
    int dp_at;            // the writer's DP ranks (at least 1), or -1: not recorded
} CkptFormat;

typedef struct { int header[256]; size_t num_params, extra_bytes; } CkptInfo;

// Reads and checks the header and the checksum; returns NULL, or why the file cannot be used.
// Not inlined: inlined into run_open.h's --resume auto through the trainer's check, gcc can no longer
// see how long a path may be and warns of truncations that cannot happen.
__attribute__((noinline)) static const char* ckpt_state_header(const char* path, const CkptFormat* fmt, CkptInfo* ci) {
    static char why[PATH_MAX + 512];  // (a path is at most PATH_MAX: no message is cut)
    memset(ci, 0, sizeof(*ci));
    if (ckpt_path_problem(path)) return ckpt_path_problem(path);
    char reason[1300];
    FILE* f = input_fopen_try(path, reason, sizeof(reason));  // a regular file, never a blocking open
    if (!f) { snprintf(why, sizeof(why), "checkpoint: %s", reason); return why; }
    int ok = fread(ci->header, sizeof(int), 256, f) == 256;
    fclose(f);
    const int* h = ci->header;
    if (!ok) { snprintf(why, sizeof(why), "%s: too short for a checkpoint header (truncated)", path); return why; }
    if (h[0] != fmt->magic) {
        snprintf(why, sizeof(why), "%s is not a %s checkpoint (magic %d, expected %d)", path, fmt->program, h[0], fmt->magic);
        return why;
    }
    if (h[1] != fmt->version) {
        snprintf(why, sizeof(why), "%s: checkpoint version %d, this build reads %d", path, h[1], fmt->version);
        return why;
    }
    int extra = fmt->extra_at >= 0 ? h[fmt->extra_at] : 0, step = h[fmt->step_at];
    if ((fmt->dp_at >= 0 && h[fmt->dp_at] < 1) || extra < 0 || extra > CKPT_EXTRA_MAX || h[fmt->params_at] < 0 ||
        h[fmt->params_at + 1] < 0) {
        snprintf(why, sizeof(why), "%s: malformed checkpoint header", path);
        return why;
    }
    if (step < 0 || step > FLAG_STEPS_MAX) { snprintf(why, sizeof(why), "%s: malformed checkpoint header (step %d)", path, step); return why; }
    ci->num_params = (size_t)h[fmt->params_at] | ((size_t)h[fmt->params_at + 1] << 31);
    if (ci->num_params > CKPT_MAX_PARAMS) {
        snprintf(why, sizeof(why), "%s: malformed checkpoint header (%zu parameters)", path, ci->num_params);
        return why;
    }
    ci->extra_bytes = (size_t)extra;
    size_t blocks[4] = {ci->num_params * sizeof(float), ci->num_params * sizeof(float), ci->num_params * sizeof(float),
                        ci->extra_bytes};
    return ckpt_verify(path, blocks, fmt->extra_at >= 0 ? 4 : 3);
}

// The model's shape in a header: ints at h[2 + i], floats at h[32 + j] (compared by their
// bits: the same shape with another RoPE base is another model). A checkpoint loads only
// into the shape that wrote it; hint says what to pass when the shapes differ.
#define CKPT_SHAPE_MAX 16
typedef struct {
    int n_int, n_float;
    const char* int_names[CKPT_SHAPE_MAX];
    int ints[CKPT_SHAPE_MAX];
    const char* float_names[4];
    float floats[4];
    const char* hint;
} CkptShape;

static inline void ckpt_shape_put(const CkptShape* s, int h[256]) {
    memcpy(h + 2, s->ints, (size_t)s->n_int * sizeof(int));
    memcpy(h + 32, s->floats, (size_t)s->n_float * sizeof(float));
}

static inline void ckpt_shape_check(const CkptShape* s, const char* path, const int h[256]) {
    for (int i = 0; i < s->n_int; i++)
        if (h[2 + i] != s->ints[i])
            FAIL("%s: the checkpoint has %s=%d but this run has %s=%d (%s)", path, s->int_names[i], h[2 + i],
                 s->int_names[i], s->ints[i], s->hint);
    const float* hf = (const float*)h;
    for (int j = 0; j < s->n_float; j++)
        if (memcmp(&hf[32 + j], &s->floats[j], sizeof(float)) != 0)
            FAIL("%s: the checkpoint has %s=%.9g but this run has %s=%.9g (%s)", path, s->float_names[j], hf[32 + j],
                 s->float_names[j], s->floats[j], s->hint);
}

// the bytes of a checkpoint file of n parameters and an extra block
static inline long long ckpt_file_bytes(size_t n, size_t extra_bytes) {
    return 1024 + 3 * (long long)n * (long long)sizeof(float) + (long long)extra_bytes + 8;
}

// this host's name, for the messages that say which rank could not reach the file
typedef struct { char s[256]; } CkptHost;
static inline CkptHost ckpt_host(void) {
    CkptHost h;
    memset(&h, 0, sizeof(h));
    if (gethostname(h.s, sizeof(h.s) - 1) != 0) snprintf(h.s, sizeof(h.s), "(unknown: %s)", strerror(errno));
    return h;
}

// the most floats a rank moves between the store and a checkpoint file at once: its host
// buffer for a write or a read, whatever the model's size
#define CKPT_CHUNK_FLOATS ((size_t)1 << 20)

// Moves this rank's pieces of one array of the file fd (part: 0 the parameters, 1 AdamW
// m, 2 AdamW v) through buf (CKPT_CHUNK_FLOATS): to the file, the pieces this rank writes
// (each element has one writer); or from it, every owned piece, *bad lowered to the
// reference index of the first non-finite value read. A piece lies in one segment: in the
// reference layout, runs of its rows (TP's column shards are strided). 0, or the errno.
static inline int ckpt_pieces_io(ParamStore* st, int fd, int part, int writing, float* buf, int64_t* bad) {
    const ParamLayout* lay = &st->lay;
    off_t base = 1024 + (off_t)part * (off_t)lay->num_params * (off_t)sizeof(float);
    for (int i = 0; i < st->n_pieces; i++) {
        const Piece* pc = &st->pieces[i];
        if (writing && !param_store_piece_writer(st, pc)) continue;
        const Segment* g = layout_segment_at(lay, pc->local_off);
        for (size_t done = 0; done < pc->n;) {
            size_t k = pc->n - done < CKPT_CHUNK_FLOATS ? pc->n - done : CKPT_CHUNK_FLOATS;
            size_t j = pc->local_off - g->local_off + done;  // the chunk's first element in its segment
            if (writing) param_store_owned_read(st, part, pc->opt_off + done, k, buf);
            for (size_t a = 0; a < k;) {
                size_t run = segment_run(g, j + a, k - a);
                off_t at = base + (off_t)segment_ref(g, j + a) * (off_t)sizeof(float);
                int err = writing ? ckpt_pwrite(fd, buf + a, run * sizeof(float), at) : ckpt_pread(fd, buf + a, run * sizeof(float), at);
                if (err) return err;
                a += run;
            }
            if (!writing) {
                for (size_t a = 0; a < k; a++)  // a segment's reference offsets grow with its elements
                    if (!isfinite(buf[a])) {
                        int64_t r = (int64_t)segment_ref(g, j + a);
                        if (*bad < 0 || r < *bad) *bad = r;
                        break;
                    }
                param_store_owned_write(st, part, pc->opt_off + done, k, buf);
            }
            done += k;
        }
    }
    return 0;
}

// A collective: every rank calls it. Rank 0 creates NAME's temporary file in the run
// directory (rd: rank 0's), every rank writes its pieces into it, and once all have
// succeeded rank 0 adds the extra block and the checksum and renames it; a failure on any
// rank removes the file and stops every rank, naming that rank. header holds the model's
// fields; the format's common fields are filled in here. A file system without room for
// the whole file is found out before a byte is written: the run stops with the checkpoints
// already there untouched.
static inline void ckpt_state_write(ParamStore* st, const CkptFormat* fmt, const RunDir* rd, const char* name,
                                    const int model_header[256], int step, size_t num_params, const void* extra,
                                    size_t extra_bytes) {
    size_t n = num_params;
    Comm* cm = param_store_comm(st);
    int root = cm->rank == 0;
    CkptWriter w;
    char* path = NULL;  // the temporary file, as every rank opens it
    long long len = 0;
    if (root) {
        if (extra_bytes > CKPT_EXTRA_MAX || (extra_bytes && fmt->extra_at < 0))
            FAIL("checkpoint %s/%s: an extra block of %zu bytes does not fit the format", rd->path, name, extra_bytes);
        long long need = ckpt_file_bytes(n, extra_bytes), have = run_dir_free_bytes(rd);
        if (have >= 0 && need + (1 << 20) > have)
            FAIL("checkpoint %s/%s of step %d needs %.1f MiB but its file system has %.1f MiB free: not written, and the "
                 "checkpoints already there are untouched (hint: free space, or --keep-last N, then --resume auto)",
                 rd->path, name, step, need / 1048576.0, have / 1048576.0);
        int header[256];
        memcpy(header, model_header, sizeof(header));
        header[0] = fmt->magic; header[1] = fmt->version; header[fmt->step_at] = step;
        header[fmt->params_at] = (int)(n & 0x7fffffff); header[fmt->params_at + 1] = (int)(n >> 31);
        if (fmt->extra_at >= 0) header[fmt->extra_at] = (int)extra_bytes;
        ckpt_writer_open(&w, rd, name, header, need);
        char* dir = realpath(rd->path, NULL);  // (a relative --run-dir would be relative to each rank's own directory)
        path = str_printf("%s/%s", dir ? dir : rd->path, w.tmp);
        free(dir);
        len = (long long)strlen(path) + 1;
    }
    comm_host_broadcast(cm, GROUP_WORLD, &len, sizeof(len), 0);
    if (!root) path = (char*)xmalloc((size_t)len);
    comm_host_broadcast(cm, GROUP_WORLD, path, (size_t)len, 0);

    // every rank its own pieces, through a descriptor of its own; what fails is told to all
    char failure[PATH_MAX + 1024] = "";
    CkptHost host = ckpt_host();
    const char* unseen = getenv("LLMC_TEST_CKPT_UNSEEN_RANK");  // tests only: a rank that sees another file system
    char* open_path = unseen && atoi(unseen) == cm->rank && !root ? str_printf("%s.unseen", path) : NULL;
    int fd = root ? w.fd : open(open_path ? open_path : path, O_WRONLY | O_NOFOLLOW | O_CLOEXEC);
    free(open_path);
    if (fd < 0) {
        snprintf(failure, sizeof(failure), "rank %d on host %s cannot open the temporary file %s that rank 0 created: %s. "
                 "Every rank writes its own part of a checkpoint into the one file, so --run-dir must be on a file system "
                 "that every rank sees under the same path (a shared one: Lustre, GPFS, NFS)", cm->rank, host.s, path,
                 strerror(errno));
    } else {
        float* buf = (float*)xmalloc(CKPT_CHUNK_FLOATS * sizeof(float));
        int err = 0;
        const char* what = "write";
        for (int k = 0; k < 3 && !err; k++) err = ckpt_pieces_io(st, fd, k, 1, buf, NULL);
        if (!err && fsync(fd) != 0) { err = errno; what = "fsync"; }
        if (!root && close(fd) != 0 && !err) { err = errno; what = "close"; }
        if (err)
            snprintf(failure, sizeof(failure), "%s of %s failed on rank %d (host %s): %s (hint: disk full, or over a "
                     "file-size limit (ulimit -f)?)", what, path, cm->rank, host.s, strerror(err));
        free(buf);
    }
    double first = failure[0] ? (double)(cm->size - cm->rank) : 0;  // the lowest rank that failed
    comm_host_all_reduce(cm, GROUP_WORLD, &first, 1, COMM_MAX);
    if (first > 0) {
        comm_host_broadcast(cm, GROUP_WORLD, failure, sizeof(failure), cm->size - (int)first);
        if (root) { close(w.fd); unlinkat(rd->fd, w.tmp, 0); }
        comm_host_broadcast(cm, GROUP_WORLD, &first, sizeof(first), 0);  // no rank stops (and ends the job) before that
        FAIL("checkpoint %s of step %d: %s (the temporary file was removed; the previous checkpoints are untouched)",
             name, step, failure);
    }
    if (root) {
        size_t blocks[3] = {n * sizeof(float), n * sizeof(float), n * sizeof(float)};
        ckpt_writer_close(&w, blocks, 3, extra, extra_bytes);
    }
    // no rank goes on before the file is under its name: a rank that ends the job next
    // (a stop signal's exit) would end rank 0 too
    comm_host_broadcast(cm, GROUP_WORLD, &len, sizeof(len), 0);
    free(path);
}

// Loads a checkpoint that ckpt_check_all_ranks has accepted into ci, whatever the layout
// that wrote it: the parameters, and unless params_only (--init-from) the AdamW moments and
// the extra block (ci->extra_bytes of it into extra, CKPT_EXTRA_MAX bytes at least) on
// every rank. Every rank reads its own pieces; the parameters it holds but does not own
// then come from their owners (param_store_sync_params).
static inline void ckpt_state_read(ParamStore* st, const char* path, const CkptInfo* ci, size_t num_params,
                                   int params_only, void* extra) {
    if (ci->num_params != num_params) FAIL("%s: %zu parameters, the model has %zu", path, ci->num_params, num_params);
    Comm* cm = param_store_comm(st);
    char why[PATH_MAX + 512];
    CkptHost host = ckpt_host();
    int fd = input_open_try(path, why, sizeof(why));
    if (fd < 0)
        FAIL("checkpoint: rank %d on host %s: %s (every rank reads its own part of a checkpoint: the file must be on a "
             "file system every rank sees, under the same path)", cm->rank, host.s, why);
    float* buf = (float*)xmalloc(CKPT_CHUNK_FLOATS * sizeof(float));
    for (int k = 0; k < 3; k++) {
        if (params_only && k > 0) {  // a fresh start's moments: zero
            memset(buf, 0, CKPT_CHUNK_FLOATS * sizeof(float));
            for (size_t off = 0; off < st->lay.n_opt; off += CKPT_CHUNK_FLOATS)
                param_store_owned_write(st, k, off, st->lay.n_opt - off < CKPT_CHUNK_FLOATS ? st->lay.n_opt - off : CKPT_CHUNK_FLOATS, buf);
            continue;
        }
        int64_t bad = -1;  // never resume from NaN: the first non-finite element, the smallest over the ranks
        int err = ckpt_pieces_io(st, fd, k, 0, buf, &bad);
        if (err) FAIL("checkpoint %s: read failed on rank %d (host %s): %s", path, cm->rank, host.s, strerror(err));
        double first = bad >= 0 ? (double)(CKPT_MAX_PARAMS - (uint64_t)bad) : 0;  // exact: indices are below 2^40
        comm_host_all_reduce(cm, GROUP_WORLD, &first, 1, COMM_MAX);
        if (first > 0)
            FAIL("%s holds a non-finite %s at element %lld (a run that diverged wrote it; resume from an earlier "
                 "checkpoint)", path, k == 0 ? "parameter" : k == 1 ? "AdamW m" : "AdamW v",
                 (long long)(CKPT_MAX_PARAMS - (uint64_t)first));
    }
    free(buf);
    param_store_sync_params(st);
    if (!params_only && ci->extra_bytes) {
        int err = cm->rank == 0 ? ckpt_pread(fd, extra, ci->extra_bytes, (off_t)(1024 + 3 * (long long)num_params * 4)) : 0;
        if (err) FAIL("checkpoint %s: read failed: %s", path, strerror(err));
        comm_host_broadcast(cm, GROUP_WORLD, extra, ci->extra_bytes, 0);
    }
    close(fd);
}

// the name of step's checkpoint in a run directory (what --resume auto looks for)
typedef struct { char s[32]; } CkptName;
static inline CkptName ckpt_step_name(int step) {
    CkptName n;
    snprintf(n.s, sizeof(n.s), "ckpt_%06d.bin", step);
    return n;
}
