/*
A trainer's checkpoint: a header of 256 int32, the whole model's fp32 parameters, AdamW m
and v in the reference layout, then an optional extra block the trainer names (the data
loader's position), written and checked through llmc/io/checkpoint.h (atomic, checksummed).
Byte layouts: docs/formats.md; outside tools read them, so what is written here must not
change.

The ParamStore gathers the state from any layout (ranks, --zero, sharded vocabulary) and
scatters it back into any other, so one file serves every layout. The trainer fills and
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

// A collective: every rank calls it (the store gathers), rank 0 writes NAME into the run
// directory (rd: rank 0's). header holds the model's fields; the format's common fields are
// filled in here. A file system without room for the whole file is found out before a byte
// is written: the run stops with the checkpoints already there untouched.
static inline void ckpt_state_write(ParamStore* st, const CkptFormat* fmt, const RunDir* rd, const char* name,
                                    const int model_header[256], int step, size_t num_params, const void* extra,
                                    size_t extra_bytes) {
    size_t n = num_params;
    int root = param_store_comm(st)->rank == 0;
    float* buf = root ? (float*)xmalloc(3 * n * sizeof(float)) : NULL;
    param_store_get_state(st, buf, root ? buf + n : NULL, root ? buf + 2 * n : NULL);
    if (!root) return;
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
    CkptWriter w;
    ckpt_writer_open(&w, rd, name);
    ckpt_write(&w, header, sizeof(header));
    for (int k = 0; k < 3; k++) ckpt_write(&w, buf + k * n, n * sizeof(float));
    ckpt_write(&w, extra, extra_bytes);
    ckpt_writer_close(&w);
    free(buf);
}

// Loads a checkpoint that ckpt_check_all_ranks has accepted into ci, whatever the layout
// that wrote it: the parameters, and unless params_only (--init-from) the AdamW moments and
// the extra block (ci->extra_bytes of it into extra, CKPT_EXTRA_MAX bytes at least) on
// every rank. Rank 0 reads, every rank gets it.
static inline void ckpt_state_read(ParamStore* st, const char* path, const CkptInfo* ci, size_t num_params,
                                   int params_only, void* extra) {
    if (ci->num_params != num_params) FAIL("%s: %zu parameters, the model has %zu", path, ci->num_params, num_params);
    Comm* cm = param_store_comm(st);
    FILE* f = cm->rank == 0 ? xinput_fopen(path, "checkpoint") : NULL;
    if (f) fseek(f, 1024, SEEK_SET);
    param_store_read_state(st, f, path, params_only);
    if (!params_only && ci->extra_bytes) {
        if (f) xfread(extra, 1, ci->extra_bytes, f, path);
        comm_host_broadcast(cm, GROUP_WORLD, extra, ci->extra_bytes, 0);
    }
    if (f) fclose(f);
}

// the name of step's checkpoint in a run directory (what --resume auto looks for)
typedef struct { char s[32]; } CkptName;
static inline CkptName ckpt_step_name(int step) {
    CkptName n;
    snprintf(n.s, sizeof(n.s), "ckpt_%06d.bin", step);
    return n;
}
