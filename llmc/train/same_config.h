/*
Every rank must run the same configuration: the program and the value of every flag in
its table (llmc/core/flags.h's Flag entries, as RunArgs holds them), generated from the
table so that no flag is left out, compared on the world communicator before any group
is formed (a --cp or --cp-mode that differs would otherwise break the group split
first). A mismatch stops every rank at start, naming the flag and which ranks have which
value (comm_check_same_config in llmc/parallel/comm.h). Values are hashed whole, paths of any length
included; the message shows each value's start.

A flag that may differ between ranks by design would be listed in FLAGS_PER_RANK; today
none does (even --run-dir: rank 0 writes it, the others read its checkpoints).
*/
#pragma once
#include "../parallel/comm.h"
#include "../core/flags.h"

static const char* const FLAGS_PER_RANK[] = {NULL};

static inline int flag_is_per_rank(const char* name) {
    for (int i = 0; FLAGS_PER_RANK[i]; i++) if (strcmp(FLAGS_PER_RANK[i], name) == 0) return 1;
    return 0;
}

// A flag's value as text, compared whole: a string (a path) is the flag's own string, never
// a copy cut to a buffer (two paths that differ only after the first kilobyte are two
// values); a number is formatted into num, whose 32 bytes hold any int, long long or %.9g.
#define SAME_CONFIG_NUM 32
static inline const char* same_config_value(const Flag* f, char* num) {
    switch (f->type) {
        case 'i': case 'l': case 'f': flag_value_text(f, num, SAME_CONFIG_NUM); return num;
        case 'e': return f->names[*(const int*)f->ptr];
        default: { const char* v = *(const char* const*)f->ptr; return v ? v : ""; }
    }
}

// program first (a launch of two programs is caught by the first, fixed-size exchange),
// then "--name" and the value of every flag of the table
static inline void same_config_check(Comm* comm, const char* program, const Flag* flags, int n) {
    if (comm->size == 1) return;
    const char** names = (const char**)xmalloc((size_t)(n + 1) * sizeof(char*));
    char (*num)[SAME_CONFIG_NUM] = (char (*)[SAME_CONFIG_NUM])xmalloc((size_t)(n + 1) * SAME_CONFIG_NUM);
    char (*label)[64] = (char (*)[64])xmalloc((size_t)(n + 1) * 64);
    const char** values = (const char**)xmalloc((size_t)(n + 1) * sizeof(char*));
    int k = 0;
    names[k] = "program"; values[k] = program; k++;
    for (int i = 0; i < n; i++) {
        if (flag_is_per_rank(flags[i].name)) continue;
        snprintf(label[k], 64, "--%s", flags[i].name);
        names[k] = label[k];
        values[k] = same_config_value(&flags[i], num[k]);
        k++;
    }
    comm_check_same_config(comm, names, values, k);
    free(names); free(num); free(label); free(values);
}
