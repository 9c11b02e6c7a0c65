/*
Command-line flags, the same way in every program: --name value pairs described by one
table (name, type, where the value goes, help). A bad number, an unknown flag or a
missing value is an error with a message, never a silent default; -h / --help prints
the table.
*/
#pragma once
#include "common.h"

// 'i' int, 'l' long long, 'f' float, 's' string
typedef struct { const char* name; char type; void* ptr; const char* help; } Flag;

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

static inline void flags_print(const Flag* flags, int n) {
    for (int i = 0; i < n; i++) printf("  --%-18s %s\n", flags[i].name, flags[i].help);
}

// Fills the table's targets from argv. given (n ints, or NULL) gets 1 for every flag on
// the command line, so a caller can tell a default from a choice. On -h / --help it
// calls usage (which prints and may add its own lines) and exits 0.
static inline void flags_parse(int argc, char** argv, const Flag* flags, int n, int* given,
                               void (*usage)(const Flag* flags, int n)) {
    if (given) memset(given, 0, (size_t)n * sizeof(int));
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
            case 'i': *(int*)f->ptr = parse_int(f->name, v); break;
            case 'l': *(long long*)f->ptr = parse_int(f->name, v); break;
            case 'f': *(float*)f->ptr = parse_float(f->name, v); break;
            default: *(const char**)f->ptr = v; break;
        }
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
