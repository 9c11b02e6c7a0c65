/*
Command-line flags, the same way in every program: --name value pairs described by one
table (name, type, where the value goes, help), and every numeric flag's range in one
table of bounds (FLAG_BOUNDS). A bad number, a value out of its range, an unknown flag
or a missing value is an error with a message, never a silent default; -h / --help
prints the table.
*/
#pragma once
#include "common.h"

// 'i' int, 'l' long long, 'f' float, 's' string, 'e' one of `names` (a NULL-ended list),
// stored as its index in an int: a mode is parsed once, where the command line is read,
// and the code past the parser sees an enum, never the string
typedef struct { const char* name; char type; void* ptr; const char* help; const char* const* names = NULL; } Flag;

// the index of v in a NULL-ended list of names; -1 when it is not there
static inline int flag_name_index(const char* const* names, const char* v) {
    for (int i = 0; names[i]; i++) if (strcmp(names[i], v) == 0) return i;
    return -1;
}

static inline int parse_enum(const char* flag, const char* const* names, const char* v) {
    int i = flag_name_index(names, v);
    if (i >= 0) return i;
    char known[256] = "";
    for (int j = 0; names[j]; j++)
        snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", j == 0 ? "" : names[j + 1] ? ", " : " or ",
                 names[j]);
    FAIL("--%s must be %s, got '%s'", flag, known, v);
    return -1;
}

static inline int parse_int(const char* flag, const char* v) {
    char* end; errno = 0;
    long x = strtol(v, &end, 10);
    if (*v == 0 || *end != 0 || errno || x < -2147483647L || x > 2147483647L) FAIL("--%s expects an integer, got '%s'", flag, v);
    return (int)x;
}

static inline float parse_float(const char* flag, const char* v) {
    char* end; errno = 0;
    float x = strtof(v, &end);
    if (*v == 0 || *end != 0 || errno || !isfinite(x)) FAIL("--%s expects a number, got '%s'", flag, v);
    return x;
}

// The range of every numeric flag of every program (train_llama, train_dit, test_llama,
// test_dit), by name: one table, so a flag means the same range wherever it appears, and
// none escapes a check (flags_parse fails on a numeric flag that has no row here, whether
// or not it was given). Counts stop far short of 2^31 so that the products the programs
// form from them can be checked in 64 bits where they are formed (the batch of a step, a
// model's sizes); 0/1 switches are [0, 1]. ends: "[]" closed, "(]" lo excluded, "[)" hi excluded.
typedef struct { const char* name; double lo, hi; const char* ends; } FlagBound;
#define FLAG_COUNT_MAX (1 << 20)  // a count of rows, chunks, clips, samples
#define FLAG_STEPS_MAX (1 << 30)  // a number of steps
static const FlagBound FLAG_BOUNDS[] = {
    // the optimizer and its schedule
    {"steps", 0, FLAG_STEPS_MAX, "[]"}, {"warmup", 0, FLAG_STEPS_MAX, "[]"}, {"lr", 0, 10, "(]"},
    {"min-lr-frac", 0, 1, "[]"},
    {"weight-decay", 0, 100, "[]"}, {"beta1", 0, 1, "[)"}, {"beta2", 0, 1, "[)"}, {"adam-eps", 0, 1, "(]"},
    {"grad-clip", 0, 3.4e38, "[]"}, {"seed", 0, 2147483647.0, "[]"},
    // cadence and the loop
    {"val-every", 0, FLAG_STEPS_MAX, "[]"}, {"ckpt-every", 0, FLAG_STEPS_MAX, "[]"},
    {"log-every", 1, FLAG_STEPS_MAX, "[]"},
    {"profile-step", 0, FLAG_STEPS_MAX, "[]"}, {"plan-only", 0, 1, "[]"}, {"cudnn-deterministic", 0, 1, "[]"}, {"save-init", 0, 1, "[]"},
    {"start-over", 0, 1, "[]"}, {"keep-last", 0, FLAG_COUNT_MAX, "[]"},
    {"sample-every", 0, FLAG_STEPS_MAX, "[]"}, {"val-batches", 1, FLAG_COUNT_MAX, "[]"},
    {"val-clips", 1, FLAG_COUNT_MAX, "[]"},
    // the batch (per rank; the step's batch over all ranks is checked where it is formed)
    {"batch", 1, 65536, "[]"}, {"seq", 1, FLAG_COUNT_MAX, "[]"}, {"total-batch", 1, 2147483647.0, "[]"},
    {"grad-accum", 1, FLAG_COUNT_MAX, "[]"}, {"micro-batch", 1, 65536, "[]"},
    // the memory flags
    {"ffn-chunks", 1, FLAG_COUNT_MAX, "[]"}, {"ce-chunks", 1, FLAG_COUNT_MAX, "[]"}, {"offload-act", -1, 1024, "[]"},
    {"recompute", 0, 2, "[]"}, {"test-skip-prefetch", 0, 1, "[]"}, {"test-nan-update", 0, FLAG_STEPS_MAX, "[]"},
    // the parallel layout
    {"zero", 0, 3, "[]"}, {"offload-optim", 0, 1, "[]"}, {"shard-vocab", 0, 1, "[]"}, {"fp32-grad-accum", -1, 1, "[]"}, {"tp", 1, 4096, "[]"}, {"cp", 1, 4096, "[]"}, {"cp-ulysses", 0, 4096, "[]"}, {"pp", 1, 1024, "[]"}, {"plan-rank", 0, 1 << 30, "[]"}, {"pp-virtual", 1, 1024, "[]"},
    {"tp-recompute-allgather", 0, 1, "[]"}, {"dp", 1, FLAG_COUNT_MAX, "[]"}, {"comm-timeout", 0, 1e6, "(]"},
    {"startup-timeout", 0, 1e6, "(]"},
    {"test-plant-tp-bug", 0, 1, "[]"}, {"test-plant-cp-bug", 0, 1, "[]"}, {"test-plant-zero-bug", 0, 1, "[]"}, {"test-plant-pp-bug", 0, 1, "[]"}, {"zero-reshard", 0, 1, "[]"},
    {"fit-memory", 0, 1e6, "[]"}, {"fit-link-gbs", 0, 1e6, "(]"}, {"fit-dp-gbs", 0, 1e6, "(]"}, {"fit-reserve", 0, 1e9, "[]"}, {"fit-per-stage", 0, 1, "[]"},
    // model dimensions (both trainers; each model checks its own products)
    {"V", 2, 1 << 24, "[]"}, {"D", 1, 65536, "[]"}, {"L", 1, 1024, "[]"}, {"H", 1, 4096, "[]"}, {"KV", 1, 4096, "[]"},
    {"F", 1, FLAG_COUNT_MAX, "[]"}, {"FF", 1, FLAG_COUNT_MAX, "[]"}, {"max-seq-len", 1, FLAG_COUNT_MAX, "[]"},
    {"tied", 0, 1, "[]"},
    {"rope-theta", 0, 1e9, "(]"}, {"norm-eps", 0, 1, "(]"}, {"NC", 1, 65535, "[]"},
    {"channels", 1, 4096, "[]"}, {"frames", 1, 65536, "[]"}, {"height", 1, 65536, "[]"}, {"width", 1, 65536, "[]"},
    {"pt", 1, 4096, "[]"}, {"ph", 1, 4096, "[]"}, {"pw", 1, 4096, "[]"},
    // sampling
    {"sample-len", 1, FLAG_COUNT_MAX, "[]"}, {"temperature", 0, 100, "[]"}, {"sample-steps", 1, 65536, "[]"},
    {"sample-clips", 1, 256, "[]"}, {"cfg-scale", 0, 1000, "[]"}, {"label-dropout", 0, 1, "[]"}, {"gif-scale", 1, 1024, "[]"},
};

static inline const FlagBound* flag_bound(const char* name) {
    for (size_t i = 0; i < sizeof(FLAG_BOUNDS) / sizeof(FLAG_BOUNDS[0]); i++)
        if (strcmp(FLAG_BOUNDS[i].name, name) == 0) return &FLAG_BOUNDS[i];
    return NULL;
}

// fails unless x is in the flag's range, with the range in the message
static inline void flag_check_bound(const Flag* f, double x, const char* text) {
    const FlagBound* b = flag_bound(f->name);
    if (!b) FAIL("--%s: a numeric flag without a range in llmc/core/flags.h's FLAG_BOUNDS (add its row)", f->name);
    if ((b->ends[0] == '(' ? x > b->lo : x >= b->lo) && (b->ends[1] == ')' ? x < b->hi : x <= b->hi)) return;
    if (b->lo == 0 && b->hi == 1 && f->type != 'f') FAIL("--%s must be 0 or 1, got '%s'", f->name, text);
    FAIL("--%s must be in %c%.9g, %.9g%c, got '%s'", f->name, b->ends[0], b->lo, b->hi, b->ends[1], text);
}

// the table, each numeric flag with its range
static inline void flags_print(const Flag* flags, int n) {
    for (int i = 0; i < n; i++) {
        const FlagBound* b = flags[i].type == 's' || flags[i].type == 'e' ? NULL : flag_bound(flags[i].name);
        char range[64] = "";
        if (b) snprintf(range, sizeof(range), " %c%.9g, %.9g%c", b->ends[0], b->lo, b->hi, b->ends[1]);
        printf("  --%-18s %s%s\n", flags[i].name, flags[i].help, range);
    }
}

// Fills the table's targets from argv. given (n ints, or NULL) gets 1 for every flag on
// the command line, so a caller can tell a default from a choice. On -h / --help it
// calls usage (which prints and may add its own lines) and exits 0.
static inline void flags_parse(int argc, char** argv, const Flag* flags, int n, int* given,
                               void (*usage)(const Flag* flags, int n)) {
    if (given) memset(given, 0, (size_t)n * sizeof(int));
    for (int j = 0; j < n; j++)  // every numeric flag has a range, given or not
        if (flags[j].type != 's' && flags[j].type != 'e' && !flag_bound(flags[j].name))
            FAIL("--%s: a numeric flag without a range in llmc/core/flags.h's FLAG_BOUNDS (add its row)", flags[j].name);
    for (int i = 1; i < argc; i++) {
        if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) { usage(flags, n); exit(0); }
        if (strncmp(argv[i], "--", 2) != 0) FAIL("unexpected argument '%s' (flags look like --name value; see --help)", argv[i]);
        int j = 0;
        while (j < n && strcmp(argv[i] + 2, flags[j].name) != 0) j++;
        if (j == n) FAIL("unknown flag '%s' (see --help)", argv[i]);
        if (i + 1 >= argc) FAIL("flag '%s' needs a value", argv[i]);
        const Flag* f = &flags[j];
        const char* v = argv[++i];
        if (given) given[j] = 1;
        switch (f->type) {
            case 'i': *(int*)f->ptr = parse_int(f->name, v); flag_check_bound(f, *(int*)f->ptr, v); break;
            case 'l': *(long long*)f->ptr = parse_int(f->name, v); flag_check_bound(f, (double)*(long long*)f->ptr, v); break;
            case 'f': *(float*)f->ptr = parse_float(f->name, v); flag_check_bound(f, *(float*)f->ptr, v); break;
            case 'e': *(int*)f->ptr = parse_enum(f->name, f->names, v); break;
            default: *(const char**)f->ptr = v; break;
        }
    }
}

// A flag's value as text, as the command line would give it (the cross-rank check compares
// these: llmc/train/same_config.h); a string flag never given prints as "".
static inline void flag_value_text(const Flag* f, char* out, size_t n) {
    switch (f->type) {
        case 'i': snprintf(out, n, "%d", *(const int*)f->ptr); break;
        case 'l': snprintf(out, n, "%lld", *(const long long*)f->ptr); break;
        case 'f': snprintf(out, n, "%.9g", *(const float*)f->ptr); break;
        case 'e': snprintf(out, n, "%s", f->names[*(const int*)f->ptr]); break;
        default: snprintf(out, n, "%s", *(const char* const*)f->ptr ? *(const char* const*)f->ptr : ""); break;
    }
}

// whether the flag that writes to ptr was on the command line
static inline int flag_given(const Flag* flags, int n, const int* given, const void* ptr) {
    for (int j = 0; j < n; j++) if (flags[j].ptr == ptr) return given[j];
    return 0;
}

// the value of --name in argv, or NULL (for the flags that must be read before the table
// is built, such as --model, whose preset gives the other flags their defaults)
static inline const char* flag_peek(int argc, char** argv, const char* name) {
    const char* v = NULL;
    for (int i = 1; i + 1 < argc; i++) if (strncmp(argv[i], "--", 2) == 0 && strcmp(argv[i] + 2, name) == 0) v = argv[i + 1];
    return v;
}

// --model: the index of the preset called name in a table of n presets whose first field
// is the name (stride: the size of one entry); an unknown name stops with the known ones.
static inline int flag_preset(const void* table, size_t stride, int n, const char* name) {
    char known[512] = "";
    for (int i = 0; i < n; i++) {
        const char* preset = *(const char* const*)((const char*)table + (size_t)i * stride);
        if (strcmp(preset, name) == 0) return i;
        snprintf(known + strlen(known), sizeof(known) - strlen(known), "%s%s", i ? ", " : "", preset);
    }
    FAIL("unknown --model '%s' (known: %s)", name, known);
    return -1;
}
