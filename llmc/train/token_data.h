/*
A language model's data around the runner (llmc/train/runner.h), as flow_batch.h is the
diffusion model's: the training and validation token shards (llmc/io/dataloader.h),
--total-batch in tokens, the rows of the global batch each rank takes, the validation loop,
and a new data order when a checkpoint's position does not apply.

Data parallelism reads one global batch of B*dp rows (the same loader, seed and position on
every rank) and DP rank r takes rows [r*B, (r+1)*B): the ranks read disjoint windows, and the
data order depends only on the global batch, not on how many ranks share it (dp 1 with B*dp
rows sees the same data as dp ranks with B rows each). The loader's position is therefore the
same on every rank, and a checkpoint carries it to any layout with the same global
micro-batch, sequence and accumulation.
*/
#pragma once
#include "../io/dataloader.h"
#include "../parallel/comm.h"
#include "../core/logger.h"
#include "train_args.h"
#include "state_checkpoint.h"

typedef struct {
    DataLoader train, val;
    int B, T, dp_rank, val_batches, has_val;
    uint64_t seed;
    float val_loss;  // this step's validation loss, NAN when none ran
} TokenData;

// --total-batch in tokens: a multiple of one micro-batch of every DP rank (0: one micro-batch);
// returns the micro-batches of a step
static inline int token_batch_resolve(RunArgs* r, int T, int dp) {
    int B = r->B;
    if ((int64_t)B * T * dp > 2147483647)
        FAIL("--batch %d x --seq %d x %d DP ranks = %lld tokens per micro-step: at most 2^31 - 1 (the counts wrap past that)",
             B, T, dp, (long long)B * T * dp);
    if (r->total_batch == 0) r->total_batch = B * T * dp;
    if (r->total_batch <= 0 || r->total_batch % (B * T * dp) != 0)
        FAIL("--total-batch %d must be a positive multiple of batch*seq*dp = %d*%d*%d", r->total_batch, B, T, dp);
    return r->total_batch / (B * T * dp);
}

// the shards (val: only when validation runs), checked against the vocabulary V
static inline void token_data_open(TokenData* d, const char* train, const char* val, int val_batches, const RunArgs* r,
                                   int T, const Comm* comm, int V, Logger* lg) {
    memset(d, 0, sizeof(*d));
    d->B = r->B; d->T = T; d->dp_rank = comm->dp_rank; d->val_batches = val_batches; d->seed = (uint64_t)r->loop.seed;
    d->has_val = r->loop.val_every > 0; d->val_loss = NAN;
    dataloader_init(&d->train, train, r->B * comm->dp, T, 0, 1, 1, (unsigned long long)r->loop.seed);
    dataloader_validate_vocab(&d->train, V);
    logf_(lg, "train data: %s (%zu tokens)\n", train, d->train.num_tokens);
    if (!d->has_val) return;
    dataloader_init(&d->val, val, r->B * comm->dp, T, 0, 1, 0, 0);
    dataloader_validate_vocab(&d->val, V);
    logf_(lg, "val data: %s (%zu tokens), %d batches per evaluation per rank\n", val, d->val.num_tokens, val_batches);
}

// this rank's rows of a global batch (inputs or targets)
static inline const int* token_rows(const TokenData* d, const int* global) {
    return global + (size_t)d->dp_rank * d->B * d->T;
}

static_assert(DATALOADER_STATE_SIZE <= CKPT_EXTRA_MAX, "the dataloader's state must fit a checkpoint's extra block");

// A checkpoint's record of the data: the global micro-batch (dp ranks of B rows), the sequence
// and the accumulation in header fields 11 to 14, the loader's position (the same on every rank)
// in the extra block, whose bytes it returns
static inline size_t token_data_ckpt_write(const TokenData* d, int h[256], unsigned char extra[CKPT_EXTRA_MAX], int dp,
                                           int grad_accum) {
    h[11] = dp; h[12] = d->B; h[13] = d->T; h[14] = grad_accum;
    dataloader_get_state(&d->train, extra);
    return dataloader_state_size();
}

// the loader reads the global batch (token_rows), so its position carries over to any
// layout with the same global micro-batch B*dp, sequence and accumulation; 0: it does not apply
static inline int token_data_ckpt_read(TokenData* d, const int* h, const unsigned char* extra, size_t bytes, int dp,
                                       int grad_accum) {
    if ((long long)h[11] * h[12] != (long long)dp * d->B || h[13] != d->T || h[14] != grad_accum ||
        bytes != dataloader_state_size()) return 0;
    dataloader_set_state(&d->train, extra);
    return 1;
}

// A checkpoint's position does not apply (another layout wrote it): continue on a new,
// deterministic data order, so that no rank replays the first steps' windows.
static inline void token_data_restart(TokenData* d, int step, Logger* lg) {
    dataloader_reseed(&d->train, (unsigned long long)d->seed ^ (0x9E3779B97F4A7C15ull * (unsigned long long)(step + 1)));
    logf_(lg, "the checkpoint's global micro-batch (dp x batch), sequence or accumulation differs from this run's: "
          "the model and optimizer state carry over, the data order restarts from a seed derived from --seed "
          "and step %d\n", step);
}

// The validation loss of `step` and its log line: val_batches batches of this rank's rows
// through the model (forward: one batch in eval mode, its losses added to the model's sum;
// take: the mean over the ranks).
static inline void token_validate(TokenData* d, Logger* lg, int step, void (*forward)(void* model, const int* inputs,
                                  const int* targets), float (*take)(void* model), void* model) {
    dataloader_reset(&d->val);
    for (int i = 0; i < d->val_batches; i++) {
        dataloader_next_batch(&d->val);
        forward(model, token_rows(d, d->val.inputs), token_rows(d, d->val.targets));
    }
    d->val_loss = take(model);
    logf_(lg, "step %5d | val loss %.6f\n", step, d->val_loss);
}

static inline void token_val_metrics(TokenData* d, Logger* lg) {
    metrics_num(lg, "val_loss", d->val_loss);
    d->val_loss = NAN;
}

static inline void token_data_free(TokenData* d) {
    dataloader_free(&d->train);
    if (d->has_val) dataloader_free(&d->val);
}
