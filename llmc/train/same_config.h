/*
The configuration every rank must share (comm_check_same_config in llmc/parallel/comm.h): a
trainer lists its fields by name and printed value, and the job stops at start when
one rank's differ. The groups of fields every trainer has are listed here, in one order,
so that each trainer checks them alike. The first field is the program's name.
*/
#pragma once
#include <stdarg.h>
#include "../parallel/comm.h"
#include "train_args.h"
#include "../parallel/parallel_args.h"

#define CONFIG_MAX_FIELDS 64

typedef struct {
    int n;
    const char* names[CONFIG_MAX_FIELDS];
    char values[CONFIG_MAX_FIELDS][COMM_CONFIG_VALUE_BYTES];
} ConfigFields;

__attribute__((format(printf, 3, 4))) static inline void config_field(ConfigFields* cf, const char* name, const char* fmt, ...) {
    if (cf->n >= CONFIG_MAX_FIELDS) FAIL("configuration check: more than %d fields", CONFIG_MAX_FIELDS);
    cf->names[cf->n] = name;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cf->values[cf->n], COMM_CONFIG_VALUE_BYTES, fmt, ap);
    va_end(ap);
    cf->n++;
}

// the optimizer, its schedule and the seed
static inline void config_optimizer_fields(ConfigFields* cf, const TrainLoopArgs* l) {
    config_field(cf, "steps", "%d", l->steps); config_field(cf, "lr", "%.9g", l->lr);
    config_field(cf, "min-lr-frac", "%.9g", l->min_lr_frac); config_field(cf, "warmup", "%d", l->warmup);
    config_field(cf, "weight-decay", "%.9g", l->weight_decay); config_field(cf, "beta1", "%.9g", l->beta1);
    config_field(cf, "beta2", "%.9g", l->beta2); config_field(cf, "adam-eps", "%.9g", l->adam_eps);
    config_field(cf, "grad-clip", "%.9g", l->grad_clip); config_field(cf, "seed", "%lld", l->seed);
}

// tensor parallelism's layout
static inline void config_tp_fields(ConfigFields* cf, const ParallelArgs* p) {
    config_field(cf, "tp", "%d", p->tp); config_field(cf, "tp-mode", "%s", p->tp_mode);
    config_field(cf, "tp-recompute-allgather", "%d", p->tp_regather);
}

// where the run writes, and what it starts from
static inline void config_run_fields(ConfigFields* cf, const TrainLoopArgs* l) {
    config_field(cf, "run-dir", "%s", l->run_dir); config_field(cf, "resume", "%s", l->resume ? l->resume : "");
    config_field(cf, "init-from", "%s", l->init_from ? l->init_from : "");
}

static inline void config_fields_check(Comm* comm, const ConfigFields* cf) {
    const char* values[CONFIG_MAX_FIELDS];
    for (int i = 0; i < cf->n; i++) values[i] = cf->values[i];
    comm_check_same_config(comm, cf->names, values, cf->n);
}
