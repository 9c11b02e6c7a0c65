/*
Context parallelism (--cp N, docs/design.md 8.6): the cp ranks of a CP group hold the same
samples and split every sample's tokens, for the whole layer: norms, GEMMs, FFN, residual,
head and loss run on this rank's tokens only; attention alone needs the others' keys and
values, and gets them here. Weights are replicated over CP; gradients are summed over
dp x cp (llmc/parallel/comm.h's GROUP_GRAD) and the loss is divided by the tokens of all ranks once.

The CP group is R rings of U Ulysses ways (cp = U x R; member k = r U + u):
  --cp-mode ulysses  U = cp, R = 1: an all-to-all over the U ways turns this rank's tokens
                     of all heads into all tokens of 1/U of the heads (DeepSpeed-Ulysses);
                     attention runs whole; a second all-to-all brings the output back.
  --cp-mode ring     U = 1, R = cp: each rank keeps its queries; the key/value blocks go
                     round the ring (send-recv to the next member), each step attending
                     the queries to the block in hand and merging the result by its
                     log-sum-exp (llmc/kernels/attention_merge.cuh). Backward sends the blocks
                     round again with their dK, dV sums, which arrive at their owner
                     after the last step.
  --cp-mode hybrid   U = --cp-ulysses, R = cp / U: Ulysses inside a ring member, the ring
                     across members (xDiT's USP): the all-to-all stays among U
                     consecutive members, which with tp x cp inside a node are near.

Which tokens a rank holds. A sample of T tokens is cut into ring chunks of Cr = T / (c R)
tokens, c = 2 for a causal model with a ring (R > 1), else 1. Ring member r holds ring
chunk r, and with c = 2 also ring chunk 2R-1-r (zigzag: the early chunk has few keys to
attend, the late one many, so every member does the same work; the blocks a causal mask
hides entirely are skipped). Each ring chunk is cut again into U pieces of C = Cr / U
tokens, piece u for Ulysses way u. So a rank holds c local chunks of C tokens of each of
the B samples of a micro-batch, in the order (chunk, sample, token): local row
(i B + b) C + t is token pos0(i) + t of sample b, pos0(i) = g(r, i) Cr + u C, and each
local chunk is a contiguous [B, C] block of rows, which the attention kernels take
as they are (T = C). RoPE rotates each chunk by its own first position (cp_rope).

After the all-to-all a ring member's tokens are in ring-local order: c ring chunks of
[B, Cr], the U pieces of a ring chunk side by side, heads [u Hu, (u+1) Hu) of this TP
rank's Hl (Hu = Hl / U). Key/value heads: KVu = KVl / U when U divides KVl; when KVl
divides U (fewer kv heads than ways) each way receives the one kv head its query heads
read (head u KVl / U), the same head on U / KVl ways, whose dK, dV the reverse
all-to-all sums back into the owner. Otherwise an error.

Buffers: the eight named recycled buffers of the pool (llmc/parallel/recycled.h: one holder,
poisoned on release in TESTING builds, never holding what backward reads: backward
gathers the heads again, as --tp-recompute-allgather 1 does) and fp32 scratch for the
running output, dQ and the travelling dK, dV sums. Saved for backward are only what the
trainer saves without CP, at 1/cp of the tokens: q, k, v, the output and the
log-sum-exp (in ring-local order, the same number of floats).

--test-plant-cp-bug 1 (TESTING builds: test_llama) makes ring backward attend each step
to the block just received instead of the one in hand, the bug of a single receive
buffer overwritten before it is read: the gradient check must fail.
*/
#pragma once
#include "../core/common.h"
#include "comm.h"
#include "../core/arena.h"
#include "recycled.h"
#include "../kernels/kernels.h"

// CpMode and CP_MODE_NAMES: llmc/parallel/comm.h (the mode is resolved once, with the groups)

static int cp_test_plant_bug = 0;  // --test-plant-cp-bug (see above)

typedef struct {
    Comm* comm;
    CpMode mode;
    int cp, U, R, u, r;        // the CP group: R rings of U ways; this rank is way u of ring member r
    int causal, chunks;        // chunks: local chunks per sample (2: causal zigzag over a ring, else 1)
    int B, T, C, Cr;           // planned micro-batch: B samples of T tokens; C tokens a local chunk, Cr = U C a ring chunk
    int Hl, KVl, hd, Hu, KVu;  // heads of this TP rank; after the all-to-all
    RecycledPool pool;
    int id_send, id_recv, id_qkv, id_out, id_dqkv, id_kv[2], id_part;
    float *acc, *lse_part, *dkv[3], *delta;  // fp32 scratch (see above)
    void* staging; size_t staging_bytes;     // --comm mpi (CUDA): the model's pinned host staging
} CpContext;

// the model's staging for --comm mpi's exchanges (cp_staging_elements of it at least)
static inline void cp_bind_staging(CpContext* x, void* staging, size_t staging_bytes) {
    x->staging = staging; x->staging_bytes = staging_bytes;
}

// The communicator with this layout's staging attached: the forward's first exchange may come
// before any other collective of the step, and a process may hold two models
static inline Comm* cp_comm(const CpContext* x) {
    comm_set_staging(x->comm, x->staging, x->staging_bytes);
    return x->comm;
}

// the CP layout of a model with Hl query and KVl key/value heads (this TP rank's) of
// dimension hd, for micro-batches of up to B samples of T tokens; FAILs, with the reason,
// when T or the heads do not split
static inline void cp_setup(CpContext* x, Comm* comm, int causal, int B, int T, int Hl, int KVl, int hd) {
    memset(x, 0, sizeof(*x));
    x->comm = comm;
    x->cp = comm->cp; x->U = comm->ulysses; x->R = x->cp / x->U;
    x->u = comm->group_rank[GROUP_ULYSSES]; x->r = comm->group_rank[GROUP_RING];
    x->mode = comm->cp_mode;
    x->causal = causal; x->chunks = causal && x->R > 1 ? 2 : 1;
    x->B = B; x->T = T; x->Hl = Hl; x->KVl = KVl; x->hd = hd;
    long long pieces = (long long)x->chunks * x->cp;
    if (T % pieces != 0)
        FAIL("--cp %d (%s): a sample's %d tokens must split into %lld equal chunks (%s), T %% %lld = %lld", x->cp,
             CP_MODE_NAMES[x->mode], T, pieces, x->chunks == 2 ? "2 x cp: the zigzag of a causal ring" : "cp", pieces,
             T % pieces);
    x->C = (int)(T / pieces); x->Cr = x->C * x->U;
    if (Hl % x->U != 0)
        FAIL("--cp %d (%s): the %d query heads of a TP rank must split over the %d Ulysses ways (tp x ways must divide H)",
             x->cp, CP_MODE_NAMES[x->mode], Hl, x->U);
    x->Hu = Hl / x->U;
    if (KVl % x->U == 0) x->KVu = KVl / x->U;
    else if (x->U % KVl == 0) x->KVu = 1;  // each way gets the one kv head its query heads read
    else FAIL("--cp %d (%s): the %d key/value heads of a TP rank and the %d Ulysses ways must divide one another", x->cp,
              CP_MODE_NAMES[x->mode], KVl, x->U);
}

// the first token of local chunk i within its sample
static inline int cp_chunk_pos0(int R, int r, int u, int Cr, int C, int i) { return (i == 0 ? r : 2 * R - 1 - r) * Cr + u * C; }
static inline int cp_pos0(const CpContext* x, int i) { return cp_chunk_pos0(x->R, x->r, x->u, x->Cr, x->C, i); }

// The token of a sample (b * T + t) that local row `row` of CP member k of a group laid
// out as x's holds, for micro-batches of B samples: tests gather with it.
static inline size_t cp_token_of_row(const CpContext* x, int k, int B, size_t row) {
    size_t per_chunk = (size_t)B * x->C;
    int i = (int)(row / per_chunk), b = (int)(row % per_chunk / x->C), t = (int)(row % x->C);
    return (size_t)b * x->T + cp_chunk_pos0(x->R, k / x->U, k % x->U, x->Cr, x->C, i) + t;
}

// Does this rank hold token `pos` of a one-sample micro-batch? Then *row is its local row.
static inline int cp_holds_token(const CpContext* x, int pos, size_t* row) {
    for (int i = 0; i < x->chunks; i++) {
        int p0 = cp_pos0(x, i);
        if (pos >= p0 && pos < p0 + x->C) { *row = (size_t)i * x->C + (pos - p0); return 1; }
    }
    return 0;
}

// Every member of the CP group gets the bytes of buf that the holder of token `pos`
// has: over the ring from its ring member (among the ways of its u), then over the ways
// of every ring member from way u. Host memory, blocking (sampling).
static inline void cp_share_from_holder(const CpContext* x, int pos, void* buf, size_t bytes) {
    int g = pos / x->Cr, r = g < x->R ? g : 2 * x->R - 1 - g, u = pos % x->Cr / x->C;
    comm_host_broadcast(x->comm, GROUP_RING, buf, bytes, r);
    comm_host_broadcast(x->comm, GROUP_ULYSSES, buf, bytes, u);
}

// Sums n doubles (host) over the whole CP group: over the ring, then over the ways (the
// group is their product, so every member ends with the sum over all cp)
static inline void cp_host_sum(const CpContext* x, double* v, int n) {
    comm_host_all_reduce(x->comm, GROUP_RING, v, n, COMM_SUM);
    comm_host_all_reduce(x->comm, GROUP_ULYSSES, v, n, COMM_SUM);
}

// A model without a ring's zigzag (chunks = 1) holds tokens [k C, (k+1) C) of each sample on
// member k. Gathers every member's rows (B samples of C tokens, `width` elements a token,
// in `local`) into all[B, T, width] on every member; `gathered` ([cp][B][C][width]) is the
// staging. Device buffers, on stream s.
static inline void cp_all_gather_tokens(const CpContext* x, floatX* all, floatX* gathered, const floatX* local, int B,
                                        size_t width, stream_t s) {
    if (x->chunks != 1) FAIL("cp_all_gather_tokens: only for a plain split (no zigzag)");
    size_t blk = (size_t)B * x->C * width;
    floatX* mine = gathered + (size_t)x->comm->cp_rank * blk;
    dev_memcpy_d2d(mine, local, blk * sizeof(floatX), s);
    // over the ways of this ring member (blocks r U .. r U + U-1), then the ring's U-block groups
    comm_all_gather(cp_comm(x), GROUP_ULYSSES, gathered + (size_t)x->r * x->U * blk, blk, COMM_FLOATX, s);
    comm_all_gather(cp_comm(x), GROUP_RING, gathered, x->U * blk, COMM_FLOATX, s);
    comm_join(x->comm, s);
    for (int k = 0; k < x->cp; k++)  // member k's B rows of C tokens: tokens [k C, (k+1) C) of each sample
        copy_2d(all + (size_t)k * x->C * width, (size_t)x->T * width, gathered + k * blk, (size_t)x->C * width,
                (size_t)x->C * width, B, 0, s);
}

// this rank's tokens of B samples ([B, T] row-major: token ids, targets) in local order
static inline void cp_local_tokens(const CpContext* x, int* dst, const int* src, int B) {
    for (int i = 0; i < x->chunks; i++)
        for (int b = 0; b < B; b++)
            memcpy(dst + ((size_t)i * B + b) * x->C, src + (size_t)b * x->T + cp_pos0(x, i), (size_t)x->C * sizeof(int));
}

// RoPE on this rank's rows of q (nh heads) and, when nk > 0, of k (nk heads), in one launch a
// chunk: each chunk from its own first position
static inline void cp_rope(const CpContext* x, floatX* q, int nh, floatX* k, int nk, const float* cos_t,
                           const float* sin_t, int B, int backward, stream_t s) {
    size_t rows = (size_t)B * x->C, half = (size_t)x->hd / 2;
    for (int i = 0; i < x->chunks; i++) {
        floatX* p = q + i * rows * nh * x->hd;
        floatX* pk = nk > 0 ? k + i * rows * nk * x->hd : nullptr;
        size_t off = (size_t)cp_pos0(x, i) * half;
        if (backward) rope_qk_backward(p, pk, cos_t + off, sin_t + off, B, x->C, nh, nk, x->hd, s);
        else rope_qk_forward(p, pk, cos_t + off, sin_t + off, B, x->C, nh, nk, x->hd, s);
    }
}

// sizes, in elements, for micro-batches of B samples
static inline size_t cp_rows_local(const CpContext* x, int B) { return (size_t)x->chunks * B * x->C; }
static inline size_t cp_q_ring(const CpContext* x, int B) { return cp_rows_local(x, B) * x->U * x->Hu * x->hd; }
static inline size_t cp_kv_ring(const CpContext* x, int B) { return cp_rows_local(x, B) * x->U * x->KVu * x->hd; }

// --comm mpi in the CUDA build: the largest exchange passes through the pinned staging
// buffer as its send and receive halves; in floatX elements (0 at cp 1)
static inline size_t cp_staging_elements(const CpContext* x) {
    if (x->cp == 1) return 0;
    size_t qn = cp_q_ring(x, x->B), kvn = cp_kv_ring(x, x->B), n = 0;
    if (x->U > 1) n = 2 * (qn > kvn ? qn : kvn);
    if (x->R > 1) {
        size_t dkv = 2 * 2 * kvn * sizeof(float) / sizeof(floatX);  // the fp32 dK, dV sums
        n = n > dkv ? n : dkv;
    }
    return n;
}

// Plans the buffers (none at cp 1): the recycled ones in `pool` order, the fp32 scratch
static inline void cp_plan(CpContext* x, Arena* dev) {
    if (x->cp == 1) return;
    size_t es = sizeof(floatX), qn = cp_q_ring(x, x->B), kvn = cp_kv_ring(x, x->B);
    size_t qc = qn / x->chunks, kvc = kvn / x->chunks, big = qn > kvn ? qn : kvn;
    int ulysses = x->U > 1, ring = x->R > 1;
    RecycledPool* p = &x->pool;
    x->id_send = recycled_plan(p, dev, "cp all-to-all send", ulysses ? big * es : 0);
    x->id_recv = recycled_plan(p, dev, "cp all-to-all receive", ulysses ? big * es : 0);
    x->id_qkv = recycled_plan(p, dev, "cp heads q|k|v", ulysses ? (qn + 2 * kvn) * es : 0);
    x->id_out = recycled_plan(p, dev, "cp heads out|dout", ulysses ? 2 * qn * es : 0);
    x->id_dqkv = recycled_plan(p, dev, "cp heads dq|dk|dv", ulysses ? (qn + 2 * kvn) * es : 0);
    x->id_kv[0] = recycled_plan(p, dev, "cp ring k|v block A", ring ? 2 * kvn * es : 0);
    x->id_kv[1] = recycled_plan(p, dev, "cp ring k|v block B", ring ? 2 * kvn * es : 0);
    x->id_part = recycled_plan(p, dev, "cp ring partial", ring ? (qc + 2 * kvc) * es : 0);
    if (ring) {
        arena_add_to(dev, "cp ring out|dq sums (fp32)", "comm", qn * sizeof(float), &x->acc);
        arena_add_to(dev, "cp ring partial lse", "comm", (size_t)x->B * x->Hu * x->Cr * sizeof(float), &x->lse_part);
        const char* names[3] = {"cp ring dk|dv sums A (fp32)", "cp ring dk|dv sums B (fp32)", "cp ring dk|dv received (fp32)"};
        for (int i = 0; i < 3; i++) arena_add_to(dev, names[i], "comm", 2 * kvn * sizeof(float), &x->dkv[i]);
    }
    size_t delta = attention_dispatch_scratch_floats(x->B, x->R > 1 ? x->Cr : x->T, x->Hu, x->KVu, x->hd);
    arena_add_to(dev, "cp attention backward scratch", "comm", delta * sizeof(float), &x->delta);
}

// ----------------------------------------------------------------------------
// the all-to-alls: this rank's tokens of all nh heads <-> ring-local tokens of nhu heads

// the first of the nhu heads way w receives of nh (all of them on U / nh ways when nh < U)
static inline int cp_head0(const CpContext* x, int nh, int nhu, int w) { return nhu * x->U == nh ? w * nhu : w * nh / x->U; }

static inline void cp_heads_to_ring(CpContext* x, floatX* dst, const floatX* src, int nh, int nhu, int B, stream_t s) {
    size_t hd = x->hd, rows = cp_rows_local(x, B), blk = rows * nhu * hd, chunk = (size_t)B * x->C * nhu * hd;
    floatX* send = recycled_take(&x->pool, x->id_send, "cp_heads_to_ring", blk * x->U * sizeof(floatX));
    floatX* recv = recycled_take(&x->pool, x->id_recv, "cp_heads_to_ring", blk * x->U * sizeof(floatX));
    for (int w = 0; w < x->U; w++)
        copy_2d(send + w * blk, nhu * hd, src + cp_head0(x, nh, nhu, w) * hd, nh * hd, nhu * hd, rows, 0, s);
    comm_all_to_all(cp_comm(x), GROUP_ULYSSES, send, recv, blk, COMM_FLOATX, s);
    for (int w = 0; w < x->U; w++)  // way w's chunk i: piece w of ring chunk i, B rows of C tokens
        for (int i = 0; i < x->chunks; i++)
            copy_2d(dst + ((size_t)i * B * x->Cr + (size_t)w * x->C) * nhu * hd, (size_t)x->Cr * nhu * hd,
                    recv + w * blk + i * chunk, (size_t)x->C * nhu * hd, (size_t)x->C * nhu * hd, B, 0, s);
    recycled_give_back(&x->pool, x->id_send, s);
    recycled_give_back(&x->pool, x->id_recv, s);
}

// the reverse; heads received from several ways (nh < U) are summed (dK, dV)
static inline void cp_heads_from_ring(CpContext* x, floatX* dst, const floatX* src, int nh, int nhu, int B, stream_t s) {
    size_t hd = x->hd, rows = cp_rows_local(x, B), blk = rows * nhu * hd, chunk = (size_t)B * x->C * nhu * hd;
    floatX* send = recycled_take(&x->pool, x->id_send, "cp_heads_from_ring", blk * x->U * sizeof(floatX));
    floatX* recv = recycled_take(&x->pool, x->id_recv, "cp_heads_from_ring", blk * x->U * sizeof(floatX));
    for (int w = 0; w < x->U; w++)
        for (int i = 0; i < x->chunks; i++)
            copy_2d(send + w * blk + i * chunk, (size_t)x->C * nhu * hd,
                    src + ((size_t)i * B * x->Cr + (size_t)w * x->C) * nhu * hd, (size_t)x->Cr * nhu * hd,
                    (size_t)x->C * nhu * hd, B, 0, s);
    comm_all_to_all(cp_comm(x), GROUP_ULYSSES, send, recv, blk, COMM_FLOATX, s);
    int replicas = nhu * x->U / nh;  // ways that hold each head
    for (int w = 0; w < x->U; w++)
        copy_2d(dst + cp_head0(x, nh, nhu, w) * hd, nh * hd, recv + w * blk, nhu * hd, nhu * hd, rows, w % replicas != 0, s);
    recycled_give_back(&x->pool, x->id_send, s);
    recycled_give_back(&x->pool, x->id_recv, s);
}

// ----------------------------------------------------------------------------
// the ring

typedef enum { CP_PAIR_SKIP, CP_PAIR_CAUSAL, CP_PAIR_FULL } CpPair;

// how ring chunk i of member r attends ring chunk j of member `src`
static inline CpPair cp_pair(const CpContext* x, int r, int i, int src, int j) {
    if (!x->causal) return CP_PAIR_FULL;
    int gq = i == 0 ? r : 2 * x->R - 1 - r, gk = j == 0 ? src : 2 * x->R - 1 - src;
    return gk > gq ? CP_PAIR_SKIP : gk == gq ? CP_PAIR_CAUSAL : CP_PAIR_FULL;
}

// the blocks query chunk i attends over the whole ring (the merge writes the output at the last)
static inline int cp_pairs_of(const CpContext* x, int i) {
    int n = 0;
    for (int src = 0; src < x->R; src++)
        for (int j = 0; j < x->chunks; j++) n += cp_pair(x, x->r, i, src, j) != CP_PAIR_SKIP;
    return n;
}

// Forward over the ring: q, k, v, out in ring-local order; lse [chunk][B, Hu, Cr]
static inline void cp_ring_forward(CpContext* x, floatX* out, float* lse, const floatX* q, const floatX* k, const floatX* v,
                                   int B, stream_t s) {
    size_t es = sizeof(floatX), kvn = cp_kv_ring(x, B), qc = cp_q_ring(x, B) / x->chunks, kvc = kvn / x->chunks;
    size_t lc = (size_t)B * x->Hu * x->Cr;
    int next = (x->r + 1) % x->R, prev = (x->r + x->R - 1) % x->R, seen[2] = {0, 0}, total[2];
    for (int i = 0; i < x->chunks; i++) total[i] = cp_pairs_of(x, i);
    floatX* kv[2] = {recycled_take(&x->pool, x->id_kv[0], "cp_ring_forward", 2 * kvn * es),
                     recycled_take(&x->pool, x->id_kv[1], "cp_ring_forward", 2 * kvn * es)};
    floatX* part = recycled_take(&x->pool, x->id_part, "cp_ring_forward", qc * es);
    dev_memcpy_d2d(kv[0], k, kvn * es, s);
    dev_memcpy_d2d(kv[0] + kvn, v, kvn * es, s);
    for (int st = 0; st < x->R; st++) {
        floatX *cur = kv[st & 1], *nxt = kv[(st + 1) & 1];
        if (st + 1 < x->R) comm_send_recv(cp_comm(x), GROUP_RING, cur, next, nxt, prev, 2 * kvn, COMM_FLOATX, s);
        int src = (x->r - st + x->R) % x->R;
        for (int i = 0; i < x->chunks; i++)
            for (int j = 0; j < x->chunks; j++) {
                CpPair p = cp_pair(x, x->r, i, src, j);
                if (p == CP_PAIR_SKIP) continue;
                const floatX *kj = cur + j * kvc, *vj = cur + kvn + j * kvc;
                if (p == CP_PAIR_CAUSAL) attention_dispatch_forward(part, x->lse_part, q + i * qc, kj, vj, B, x->Cr, x->Hu, x->KVu, x->hd, s);
                else attention_dispatch_full_forward(part, x->lse_part, q + i * qc, kj, vj, B, x->Cr, x->Hu, x->KVu, x->hd, s);
                int first = seen[i]++ == 0;
                attention_merge(x->acc + i * qc, lse + i * lc, seen[i] == total[i] ? out + i * qc : NULL, part, x->lse_part,
                                B, x->Cr, x->Hu, x->hd, first, s);
            }
        if (st + 1 < x->R) comm_join(x->comm, s);
    }
    recycled_give_back(&x->pool, x->id_part, s);
    recycled_give_back(&x->pool, x->id_kv[0], s);
    recycled_give_back(&x->pool, x->id_kv[1], s);
}

// Backward over the ring: dq, dk, dv (ring-local, overwritten) from dout and what the
// forward saved. Each step adds the block's dK, dV into fp32 sums that then go on to the
// next member with the block; after the last step every member holds its own block's.
static inline void cp_ring_backward(CpContext* x, floatX* dq, floatX* dk, floatX* dv, const floatX* dout, const floatX* q,
                                    const floatX* k, const floatX* v, const floatX* out, const float* lse, int B, stream_t s) {
    size_t es = sizeof(floatX), qn = cp_q_ring(x, B), kvn = cp_kv_ring(x, B), qc = qn / x->chunks, kvc = kvn / x->chunks;
    size_t lc = (size_t)B * x->Hu * x->Cr;
    int next = (x->r + 1) % x->R, prev = (x->r + x->R - 1) % x->R;
    floatX* kv[2] = {recycled_take(&x->pool, x->id_kv[0], "cp_ring_backward", 2 * kvn * es),
                     recycled_take(&x->pool, x->id_kv[1], "cp_ring_backward", 2 * kvn * es)};
    floatX* part = recycled_take(&x->pool, x->id_part, "cp_ring_backward", (qc + 2 * kvc) * es);
    floatX *dq_p = part, *dk_p = part + qc, *dv_p = part + qc + kvc;
    float* received = x->dkv[2];
    dev_memcpy_d2d(kv[0], k, kvn * es, s);
    dev_memcpy_d2d(kv[0] + kvn, v, kvn * es, s);
    dev_memset(x->acc, 0, qn * sizeof(float), s);
    dev_memset(part, 0, (qc + 2 * kvc) * es, s);  // grad_accumulate leaves the partials zero after each use
    for (int st = 0; st < x->R; st++) {
        floatX *cur = kv[st & 1], *nxt = kv[(st + 1) & 1];
        if (st + 1 < x->R) comm_send_recv(cp_comm(x), GROUP_RING, cur, next, nxt, prev, 2 * kvn, COMM_FLOATX, s);
        if (cp_test_plant_bug && st + 1 < x->R) {  // the planted bug: the block just received lands on the one in hand
            comm_join(x->comm, s);
            dev_memcpy_d2d(cur, nxt, 2 * kvn * es, s);
        }
        int src = (x->r - st + x->R) % x->R;
        float* mine = x->dkv[st & 1];
        dev_memset(mine, 0, 2 * kvn * sizeof(float), s);
        for (int i = 0; i < x->chunks; i++)
            for (int j = 0; j < x->chunks; j++) {
                CpPair p = cp_pair(x, x->r, i, src, j);
                if (p == CP_PAIR_SKIP) continue;
                const floatX *kj = cur + j * kvc, *vj = cur + kvn + j * kvc;
                if (p == CP_PAIR_CAUSAL)
                    attention_dispatch_backward(dq_p, dk_p, dv_p, dout + i * qc, q + i * qc, kj, vj, out + i * qc, lse + i * lc,
                                                x->delta, B, x->Cr, x->Hu, x->KVu, x->hd, s);
                else
                    attention_dispatch_full_backward(dq_p, dk_p, dv_p, dout + i * qc, q + i * qc, kj, vj, out + i * qc,
                                                     lse + i * lc, x->delta, B, x->Cr, x->Hu, x->KVu, x->hd, s);
                grad_accumulate(x->acc + i * qc, dq_p, qc, 0, s);
                grad_accumulate(mine + j * kvc, dk_p, kvc, 0, s);
                grad_accumulate(mine + kvn + j * kvc, dv_p, kvc, 0, s);
            }
        if (st > 0) {  // the sums of the members that had this block before
            comm_join(x->comm, s);
            float_accumulate(mine, received, 2 * kvn, s);
        }
        comm_send_recv(cp_comm(x), GROUP_RING, mine, next, received, prev, 2 * kvn, COMM_FLOAT, s);
        if (st + 1 < x->R) comm_join(x->comm, s);
    }
    comm_join(x->comm, s);  // `received` now holds this member's own block's sums
    dev_memset(dq, 0, qn * es, s);
    dev_memset(dk, 0, kvn * es, s);
    dev_memset(dv, 0, kvn * es, s);
    grad_accumulate(x->acc, dq, qn, 1, s);
    grad_accumulate(received, dk, kvn, 1, s);
    grad_accumulate(received + kvn, dv, kvn, 1, s);
    recycled_give_back(&x->pool, x->id_part, s);
    recycled_give_back(&x->pool, x->id_kv[0], s);
    recycled_give_back(&x->pool, x->id_kv[1], s);
}

// ----------------------------------------------------------------------------
// attention under CP: this rank's rows of q, k, v (RoPE applied) in, its rows of the
// output and the log-sum-exp (ring-local order) out

static inline void cp_attend_whole(const CpContext* x, floatX* out, float* lse, const floatX* q, const floatX* k,
                                   const floatX* v, int B, stream_t s) {
    if (x->causal) attention_dispatch_forward(out, lse, q, k, v, B, x->T, x->Hu, x->KVu, x->hd, s);
    else attention_dispatch_full_forward(out, lse, q, k, v, B, x->T, x->Hu, x->KVu, x->hd, s);
}

static inline void cp_attention_forward(CpContext* x, floatX* out, float* lse, const floatX* q, const floatX* k,
                                        const floatX* v, int B, stream_t s) {
    if (B > x->B) FAIL("--cp: a micro-batch of %d samples, the plan has %d", B, x->B);
    if (x->U == 1) { cp_ring_forward(x, out, lse, q, k, v, B, s); return; }
    size_t qn = cp_q_ring(x, B), kvn = cp_kv_ring(x, B), es = sizeof(floatX);
    floatX* h = recycled_take(&x->pool, x->id_qkv, "cp_attention_forward", (qn + 2 * kvn) * es);
    floatX* o = recycled_take(&x->pool, x->id_out, "cp_attention_forward", qn * es);
    cp_heads_to_ring(x, h, q, x->Hl, x->Hu, B, s);
    cp_heads_to_ring(x, h + qn, k, x->KVl, x->KVu, B, s);
    cp_heads_to_ring(x, h + qn + kvn, v, x->KVl, x->KVu, B, s);
    if (x->R == 1) cp_attend_whole(x, o, lse, h, h + qn, h + qn + kvn, B, s);
    else cp_ring_forward(x, o, lse, h, h + qn, h + qn + kvn, B, s);
    recycled_give_back(&x->pool, x->id_qkv, s);
    cp_heads_from_ring(x, out, o, x->Hl, x->Hu, B, s);
    recycled_give_back(&x->pool, x->id_out, s);
}

static inline void cp_attention_backward(CpContext* x, floatX* dq, floatX* dk, floatX* dv, const floatX* dout,
                                         const floatX* q, const floatX* k, const floatX* v, const floatX* out,
                                         const float* lse, int B, stream_t s) {
    if (x->U == 1) { cp_ring_backward(x, dq, dk, dv, dout, q, k, v, out, lse, B, s); return; }
    size_t qn = cp_q_ring(x, B), kvn = cp_kv_ring(x, B), es = sizeof(floatX);
    floatX* h = recycled_take(&x->pool, x->id_qkv, "cp_attention_backward", (qn + 2 * kvn) * es);
    floatX* o = recycled_take(&x->pool, x->id_out, "cp_attention_backward", 2 * qn * es);
    floatX* d = recycled_take(&x->pool, x->id_dqkv, "cp_attention_backward", (qn + 2 * kvn) * es);
    cp_heads_to_ring(x, h, q, x->Hl, x->Hu, B, s);  // gathered again: no head-sharded copy is saved
    cp_heads_to_ring(x, h + qn, k, x->KVl, x->KVu, B, s);
    cp_heads_to_ring(x, h + qn + kvn, v, x->KVl, x->KVu, B, s);
    cp_heads_to_ring(x, o, out, x->Hl, x->Hu, B, s);
    cp_heads_to_ring(x, o + qn, dout, x->Hl, x->Hu, B, s);
    if (x->R == 1) {
        if (x->causal)
            attention_dispatch_backward(d, d + qn, d + qn + kvn, o + qn, h, h + qn, h + qn + kvn, o, lse, x->delta, B, x->T,
                                        x->Hu, x->KVu, x->hd, s);
        else
            attention_dispatch_full_backward(d, d + qn, d + qn + kvn, o + qn, h, h + qn, h + qn + kvn, o, lse, x->delta, B,
                                             x->T, x->Hu, x->KVu, x->hd, s);
    } else {
        cp_ring_backward(x, d, d + qn, d + qn + kvn, o + qn, h, h + qn, h + qn + kvn, o, lse, B, s);
    }
    recycled_give_back(&x->pool, x->id_qkv, s);
    recycled_give_back(&x->pool, x->id_out, s);
    cp_heads_from_ring(x, dq, d, x->Hl, x->Hu, B, s);
    cp_heads_from_ring(x, dk, d + qn, x->KVl, x->KVu, B, s);
    cp_heads_from_ring(x, dv, d + qn + kvn, x->KVl, x->KVu, B, s);
    recycled_give_back(&x->pool, x->id_dqkv, s);
}

// The bytes a rank sends in n_fwd attention forwards and n_bwd backwards of micro-batches
// of B samples (llmc/parallel/comm.h's count; docs/memory.md section 10)
static inline void cp_bytes_add(const CpContext* x, CommBytes* cb, int B, double n_fwd, double n_bwd) {
    if (x->cp == 1) return;
    double es = sizeof(floatX), qn = (double)cp_q_ring(x, B), kvn = (double)cp_kv_ring(x, B);
    double U = x->U, R = x->R;
    if (x->U > 1)  // each all-to-all sends U-1 of its U blocks; fwd: q k v out; bwd: q k v out dout dq dk dv
        cb->b[GROUP_ULYSSES][KIND_ALL_TO_ALL] += (U - 1) / U * es * (n_fwd * (2 * qn + 2 * kvn) + n_bwd * (4 * qn + 4 * kvn));
    if (x->R > 1)  // the k|v block R-1 times each way; backward's fp32 dK|dV sums R times
        cb->b[GROUP_RING][KIND_SEND_RECV] += (n_fwd + n_bwd) * (R - 1) * 2 * kvn * es + n_bwd * R * 2 * kvn * sizeof(float);
}
