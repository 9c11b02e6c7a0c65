/*
The attention operation of both trainers: q, k, v of this rank's tokens and heads in, the
output and log-sum-exp out, with RoPE by each token's position in its sample. It owns the
choice a model would otherwise branch on at every call:
  --cp N (ring, ulysses, hybrid)  llmc/parallel/context_parallel.h: the exchanges, RoPE of each
                                  local chunk from its own first position, and which tokens
                                  of a sample this rank holds (the token slicing below)
  one process, fused RoPE         the tensor-core kernels rotating q and k in their tile loads
                                  (attention_fuses_rope(): --attention tc in a build with
                                  ATTENTION_TC_FUSE_ROPE 1, off in every build by measurement,
                                  llmc/kernels/attention_select.h); q and k are then saved unrotated
  one process                     rope_forward / rope_backward around attention_dispatch_*
The math a caller writes is the same for all three: RoPE on q and k (a no-op when the
kernels fuse it), attention_forward; attention_backward (which rotates dq and dk back).
The operation times its launches in the profile's "rope fwd", "attention fwd",
"attention bwd" and "rope bwd" groups (llmc/kernels/profile.h), with their nominal work;
attention_rope alone is untimed, for a caller that times it within its own group.

The CP layout (CpContext) stays the model's: its plan and its bytes-sent formula are read
beside the model, and test_llama gathers rows by it.
*/
#pragma once
#include "context_parallel.h"
#include "../kernels/profile.h"

typedef struct {
    CpContext* cp;             // the token split over the CP group (cp 1: every token here)
    int causal, H, KV, hd;     // this TP rank's query and key/value heads
    const float *cos, *sin;    // the RoPE table by position [positions, hd/2]
    float* delta;              // the tensor-core backward's scratch (one process)
    void* ws;                  // cuDNN's workspace (--attention cudnn), ws_bytes of it
    size_t ws_bytes;
    Profile* prof;
    stream_t stream;
} Attention;

// The layout for micro-batches of up to B samples of T tokens (cp_setup's checks)
static inline void attention_setup(Attention* a, CpContext* cp, Comm* comm, int causal, int B, int T, int H, int KV,
                                   int hd) {
    memset(a, 0, sizeof(*a));
    a->cp = cp; a->causal = causal; a->H = H; a->KV = KV; a->hd = hd;
    cp_setup(cp, comm, causal, B, T, H, KV, hd);
}

// the floatX elements of its largest exchange (for --comm mpi's staging)
static inline size_t attention_staging_elements(const Attention* a) { return cp_staging_elements(a->cp); }

// the exchanges' recycled buffers and fp32 scratch (none at cp 1)
static inline void attention_plan(Attention* a, Arena* d) { cp_plan(a->cp, d); }

// the bytes n_fwd forwards and n_bwd backwards of micro-batches of B samples send (none at cp 1)
static inline void attention_comm_bytes(const Attention* a, CommBytes* cb, int B, double n_fwd, double n_bwd) {
    cp_bytes_add(a->cp, cb, B, n_fwd, n_bwd);
}

// the plan's words for the CP layout ("" at cp 1): "cp 4 (--cp-mode hybrid: ...) x ", each member
// holding `tokens` of a sample (what a sample is: "a sample", "a clip")
static inline void attention_describe_cp(const Attention* a, char* out, size_t n, int tokens, const char* sample) {
    const CpContext* x = a->cp;
    out[0] = 0;
    if (x->cp > 1)
        snprintf(out, n, "cp %d (--cp-mode %s: %d Ulysses ways x %d ring members, %d tokens %s each) x ", x->cp,
                 CP_MODE_NAMES[x->mode], x->U, x->R, tokens, sample);
}

// the tensor-core backward's scratch (tc: delta; tc2: delta and the dQ partials) for one process's
// B samples of T tokens (CP plans its own),
// and cuDNN's workspace for the largest call this rank makes: its whole micro-batch at cp 1,
// else the heads and tokens of the CP layout's calls (a ring chunk, or the whole sample under
// Ulysses alone), as the CP scratch is sized
static inline void attention_plan_scratch(Attention* a, Arena* d, int B, int T) {
    size_t n = a->cp->cp > 1 ? 0 : attention_dispatch_scratch_floats(B, T, a->H, a->KV, a->hd) * sizeof(float);
    arena_add_to(d, "attention backward scratch (tc, tc2)", "scratch", n, &a->delta);
    const CpContext* x = a->cp;
    a->ws_bytes = x->cp > 1 ? attention_workspace_bytes(x->B, x->R > 1 ? x->Cr : x->T, x->Hu, x->KVu, a->hd)
                            : attention_workspace_bytes(B, T, a->H, a->KV, a->hd);
    arena_add_to(d, "attention workspace (cudnn)", "scratch", a->ws_bytes, &a->ws);
}

static inline void attention_bind(Attention* a, const float* rope_cos, const float* rope_sin, Profile* prof, stream_t s) {
    a->cos = rope_cos; a->sin = rope_sin; a->prof = prof; a->stream = s;
}

// FlashAttention's count for this rank's queries against all T cp keys: 4 B H T^2 hd
// over the whole sample, halved when causal
static inline double attention_flops(const Attention* a, int B, int T) {
    return (a->causal ? 2.0 : 4.0) * B * a->H * (double)T * T * a->cp->cp * a->hd;
}
static inline double attention_rope_bytes(const Attention* a, int B, int T) {
    return 2.0 * B * T * (a->H + a->KV) * (double)a->hd * SX;
}

// RoPE on q or k (nh heads) of B samples of T tokens (this rank's), or its backward on dq
// or dk: each token by its position in the sample
static inline void attention_rope(const Attention* a, floatX* qk, int nh, int B, int T, int backward) {
    if (a->cp->cp > 1) cp_rope(a->cp, qk, nh, nullptr, 0, a->cos, a->sin, B, backward, a->stream);
    else if (attention_fuses_rope()) return;  // done in the attention kernels
    else if (backward) rope_backward(qk, qk, a->cos, a->sin, B, T, nh, a->hd, a->stream);
    else rope_forward(qk, qk, a->cos, a->sin, B, T, nh, a->hd, a->stream);
}

// the same on q (H heads) and k (KV heads) together: one launch a chunk of rows
static inline void attention_rope_pair(const Attention* a, floatX* q, floatX* k, int B, int T, int backward) {
    if (a->cp->cp > 1) cp_rope(a->cp, q, a->H, k, a->KV, a->cos, a->sin, B, backward, a->stream);
    else if (attention_fuses_rope()) return;
    else if (backward) rope_qk_backward(q, k, a->cos, a->sin, B, T, a->H, a->KV, a->hd, a->stream);
    else rope_qk_forward(q, k, a->cos, a->sin, B, T, a->H, a->KV, a->hd, a->stream);
}

// RoPE on q and k, in the profile's "rope fwd" group
static inline void attention_rope_qk(const Attention* a, floatX* q, floatX* k, int B, int T) {
    PROF(a->prof, "rope fwd", 0, attention_rope_bytes(a, B, T), a->stream) {
        attention_rope_pair(a, q, k, B, T, 0);
    }
}

static inline void attention_forward(Attention* a, floatX* out, float* lse, const floatX* q, const floatX* k,
                                     const floatX* v, int B, int T) {
    attention_use_workspace(a->ws, a->ws_bytes);
    PROF(a->prof, "attention fwd", attention_flops(a, B, T), 0, a->stream) {
        if (a->cp->cp > 1) cp_attention_forward(a->cp, out, lse, q, k, v, B, a->stream);
        else if (attention_fuses_rope())
            att_dispatch_forward_rope(out, lse, q, k, v, a->cos, a->sin, B, T, a->H, a->KV, a->hd, a->causal, a->stream);
        else att_dispatch_forward(out, lse, q, k, v, B, T, a->H, a->KV, a->hd, a->causal, a->stream);
    }
}

// dq, dk, dv overwritten; dq and dk are the gradients at q and k before RoPE
static inline void attention_backward(Attention* a, floatX* dq, floatX* dk, floatX* dv, const floatX* dout,
                                      const floatX* q, const floatX* k, const floatX* v, const floatX* out,
                                      const float* lse, int B, int T) {
    attention_use_workspace(a->ws, a->ws_bytes);
    PROF(a->prof, "attention bwd", 2.5 * attention_flops(a, B, T), 0, a->stream) {  // FlashAttention's: 2.5 x forward
        if (a->cp->cp > 1) cp_attention_backward(a->cp, dq, dk, dv, dout, q, k, v, out, lse, B, a->stream);
        else if (attention_fuses_rope())
            att_dispatch_backward_rope(dq, dk, dv, dout, q, k, v, out, lse, a->delta, a->cos, a->sin, B, T, a->H, a->KV,
                                       a->hd, a->causal, a->stream);
        else att_dispatch_backward(dq, dk, dv, dout, q, k, v, out, lse, a->delta, B, T, a->H, a->KV, a->hd, a->causal,
                                   a->stream);
    }
    PROF(a->prof, "rope bwd", 0, attention_rope_bytes(a, B, T), a->stream) {
        attention_rope_pair(a, dq, dk, B, T, 1);
    }
}

// ----------------------------------------------------------------------------
// the token slicing: which tokens of a sample this rank holds, and the sums and gathers
// over the ranks that split a sample

// the tokens of a sample this rank holds
static inline int attention_local_tokens(const Attention* a, int T) { return T / a->cp->cp; }

// this rank's token ids (or targets) of B samples ([B, T] row-major) in its row order
static inline void attention_slice_tokens(const Attention* a, int* dst, const int* src, int B) {
    cp_local_tokens(a->cp, dst, src, B);
}

// A micro-batch of B samples of T tokens (inputs and, when given, targets: [B, T] each) as
// this rank holds it: the arrays themselves at cp 1; under cp its T/cp tokens of each sample
// in its order, sliced into local ([2, B, T/cp] ints), the whole planned sample required.
// Returns the tokens of a sample this rank holds.
static inline int attention_stage_tokens(const Attention* a, int* local, const int** inputs, const int** targets, int B,
                                         int T) {
    const CpContext* x = a->cp;
    if (x->cp == 1) return T;
    if (T != x->T) FAIL("--cp %d: a micro-batch of %d tokens a sample, the plan has %d", x->cp, T, x->T);
    int n = T / x->cp;
    cp_local_tokens(x, local, *inputs, B);
    *inputs = local;
    if (*targets) { cp_local_tokens(x, local + (size_t)B * n, *targets, B); *targets = local + (size_t)B * n; }
    return n;
}

// Does this rank hold token `pos` of a one-sample micro-batch? Then *row is its row.
static inline int attention_holds_token(const Attention* a, int pos, size_t* row) {
    if (a->cp->cp == 1) { *row = (size_t)pos; return 1; }
    return cp_holds_token(a->cp, pos, row);
}

// every rank gets the holder of token pos's bytes (host, blocking)
static inline void attention_share_token(const Attention* a, int pos, void* buf, size_t bytes) {
    if (a->cp->cp > 1) cp_share_from_holder(a->cp, pos, buf, bytes);
}

// A non-causal model's rows (one chunk a rank: tokens [k n, (k+1) n) of each sample on CP
// member k, n = T / cp): this rank's rows of B whole samples of T rows of `width` elements
static inline void attention_slice_rows(const Attention* a, floatX* local, const floatX* all, int B, size_t width) {
    const CpContext* x = a->cp;
    size_t n = (size_t)x->T / x->cp * width;
    copy_2d(local, n, all + (size_t)x->comm->cp_rank * n, (size_t)x->T * width, n, B, 0, a->stream);
}

// The reverse: every member's rows into all[B, T, width] on every member (`staging`:
// [cp][B][n][width])
static inline void attention_gather_rows(const Attention* a, floatX* all, floatX* staging, const floatX* local, int B,
                                         size_t width) {
    cp_all_gather_tokens(a->cp, all, staging, local, B, width, a->stream);
}

// n per-sample sums (host) over the ranks that split the samples' tokens
static inline void attention_sum_samples(const Attention* a, double* v, int n) {
    if (a->cp->cp > 1) cp_host_sum(a->cp, v, n);
}
