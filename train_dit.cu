/*
train_dit: trains a class-conditional video diffusion transformer (docs/design.md 9), in one
file of host code beside train_llama.cu, on the same runtime (llmc/). Clips x0 [C, Fr, Hi, Wi]
are cut into N patches of pt x ph x pw, embedded, and run through L single-stream blocks
(adaLN-Zero modulation from the timestep and the class, QK RMSNorm, 3-D RoPE, full
attention, GELU-tanh FFN), trained with rectified flow: x_t = (1 - t) x0 + t e, the model
predicts v = e - x0, loss = mean (v_pred - v)^2.

As train_llama: two builds of one file (nvcc; g++ -DLLMC_CPU with the kernels' CPU twins),
memory flags that leave the mathematics unchanged, dp x pp x cp x tp ranks through the
operations of llmc/parallel/ (linear.h, attention_op.h, adaln_op.h, pipeline.h), every buffer
planned before the loop (--plan-only prints it). Each flag: README.md and --help.

Under --pp the blocks are cut into stages (llmc/parallel/pipeline.h). The patch embedding lives
on the first stage, the final adaLN and layer on the last, and the conditioning (the timestep
MLP and the class embedding) on every stage: each recomputes c from the micro-batch's t and y,
a few [B, D] products, rather than receive it, and its gradients, each stage's part from its
own blocks' adaLN (and the last's final layer), are summed over the stages at the step's end
(param_store_pipeline_done). Every stage reads every micro-batch (dit_stage_clips).
*/
#include "llmc/train/runner.h"          // the runner, and the model core, checkpoints, plans and logs it drives
#include "llmc/train/ffn_chunks.h"      // --ffn-chunks: the chunks' geometry
#include "llmc/parallel/linear.h"       // column- and row-parallel linears: TP, sequence parallelism, recycled buffers
#include "llmc/parallel/attention_op.h" // attention: --cp (each rank holds 1/cp of every clip's tokens), RoPE
#include "llmc/parallel/adaln_op.h"     // adaLN on own rows: clip-aligned segments, per-clip gradients over TP
#include "llmc/kernels/rope3d.h"        // the 3-D RoPE table
#include "llmc/train/flow_batch.h"      // clips (llmc/io/video_data.h), rectified-flow batches, the validation by t
#include "llmc/train/flow_slots.h"      // a micro-batch of them on the device: t, y, x_t, the target, the clips' losses
#include "llmc/train/clip_sampler.h"    // --sample-every: clips sampled per class, GIFs and PNGs (llmc/io/image_write.h)

#define TEMB_DIM 256      // the sinusoidal timestep embedding (docs/design.md 9.3)
#define DIT_EPS 1e-6f     // LayerNorm and QK RMSNorm

// ----------------------------------------------------------------------------
// the model's configuration

typedef struct {
    int C, Fr, Hi, Wi;    // clip: channels, frames, height, width
    int pt, ph, pw;       // patch
    int D, L, H, FF, NC;  // width, blocks, heads, FFN hidden size, classes (row NC is the null class)
    float rope_theta;
} DitConfig;

typedef struct { const char* name; DitConfig cfg; const char* note; } DitPreset;

// DiT-S/B/XL: the widths, depths, heads and FFN ratio 4 of Peebles & Xie (2023), on
// moving-digit clips. hunyuan-13B: HunyuanVideo's single-stream width 3072, 24 heads,
// FFN 4x, its 20 + 40 blocks counted as 60 single-stream ones, rope theta 256, on its
// 16-channel latent of a 720p, 129-frame video (33 x 90 x 160) with patch 1 x 2 x 2:
// 118,800 tokens. It is for --plan-only; no CPU trains it.
static const DitPreset DIT_PRESETS[] = {
    {"dit-tiny", {1, 8, 16, 16, 2, 2, 2, 64, 4, 4, 256, 10, 10000.0f}, "sized for the CPU"},
    {"dit-S", {3, 16, 32, 32, 1, 2, 2, 384, 12, 6, 1536, 10, 10000.0f}, "DiT-S"},
    {"dit-B", {3, 16, 32, 32, 1, 2, 2, 768, 12, 12, 3072, 10, 10000.0f}, "DiT-B"},
    {"dit-XL", {3, 16, 32, 32, 1, 2, 2, 1152, 28, 16, 4608, 10, 10000.0f}, "DiT-XL"},
    {"hunyuan-13B", {16, 33, 90, 160, 1, 2, 2, 3072, 60, 24, 12288, 1, 256.0f}, "HunyuanVideo 720p x 129 frames"},
};
#define NUM_DIT_PRESETS ((int)(sizeof(DIT_PRESETS) / sizeof(DIT_PRESETS[0])))

static int dit_tokens(const DitConfig* c) { return (c->Fr / c->pt) * (c->Hi / c->ph) * (c->Wi / c->pw); }
static int dit_patch_dim(const DitConfig* c) { return c->C * c->pt * c->ph * c->pw; }
static size_t dit_clip_size(const DitConfig* c) { return (size_t)c->C * c->Fr * c->Hi * c->Wi; }

static void dit_config_validate(const DitConfig* c) {
    if (c->C < 1 || c->Fr < 1 || c->Hi < 1 || c->Wi < 1 || c->pt < 1 || c->ph < 1 || c->pw < 1)
        FAIL("config: clip C=%d Fr=%d Hi=%d Wi=%d and patch %dx%dx%d must be positive", c->C, c->Fr, c->Hi, c->Wi,
             c->pt, c->ph, c->pw);
    if (c->Fr % c->pt || c->Hi % c->ph || c->Wi % c->pw)
        FAIL("config: the patch %dx%dx%d must divide the clip's frames, height and width (%d, %d, %d)", c->pt, c->ph,
             c->pw, c->Fr, c->Hi, c->Wi);
    if (c->D < 1 || c->L < 1 || c->H < 1 || c->FF < 1 || c->NC < 1)
        FAIL("config: D=%d L=%d H=%d FF=%d NC=%d must be positive", c->D, c->L, c->H, c->FF, c->NC);
    if (c->D % c->H) FAIL("config: D=%d is not a multiple of H=%d", c->D, c->H);
    if ((c->D / c->H) % 2) FAIL("config: head dim D/H = %d must be even (RoPE rotates pairs)", c->D / c->H);
    if (!(c->rope_theta > 0.0f) || !isfinite(c->rope_theta)) FAIL("config: rope_theta must be positive and finite (got %g)", c->rope_theta);
    if (c->L > OFFLOAD_MAX_LAYERS) FAIL("config: L=%d layers; this build supports at most %d", c->L, OFFLOAD_MAX_LAYERS);
    // every size product, in 64 bits before any int holds it: the tokens of a clip, a patch,
    // a clip, and what one clip's tensors hold, each within an int
    int64_t N = (int64_t)(c->Fr / c->pt) * (c->Hi / c->ph) * (c->Wi / c->pw), P = (int64_t)c->C * c->pt * c->ph * c->pw,
            clip = (int64_t)c->C * c->Fr * c->Hi * c->Wi, lim = 2147483647;
    int64_t prods[6] = {N * c->D, N * c->FF, N * P, clip, N * c->H, (int64_t)c->FF * c->D};
    const char* what[6] = {"tokens x D", "tokens x FF", "tokens x patch size", "values of a clip", "tokens x heads", "FF x D"};
    if (N > (1 << 24) || P > (1 << 24))
        FAIL("config: %lld tokens of %lld values per clip (clip %dx%dx%dx%d, patch %dx%dx%d): this build holds at most %d of "
             "each", (long long)N, (long long)P, c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, 1 << 24);
    for (int i = 0; i < 6; i++)
        if (prods[i] > lim) FAIL("config: %s = %lld exceeds 2^31 - 1 (clip %dx%dx%dx%d, patch %dx%dx%d, D=%d FF=%d H=%d)",
                                 what[i], (long long)prods[i], c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, c->D, c->FF, c->H);
}

// ----------------------------------------------------------------------------
// parameters (docs/design.md 9.2: tensor-major, nn.Linear layout [out, in]; per-layer tensors
// [L, ...]). One process holds the whole model in exactly this layout.

enum {
    W_PATCH, B_PATCH, W_T1, B_T1, W_T2, B_T2, W_CLASS, W_ADA, B_ADA, W_QKV, B_QKV, W_QNORM, W_KNORM, W_PROJ, B_PROJ,
    W_FC1, B_FC1, W_FC2, B_FC2, W_FADA, B_FADA, W_FINAL, B_FINAL, NUM_DIT_TENSORS
};
// The tensor table: shapes ([out, in]; a vector is [n, 1]), weight decay on the weight matrices and the class
// embedding (docs/design.md 9.2), and each tensor's Megatron split over a TP group: qkv column-parallel by heads
// (q, k, v each cut), proj row-parallel, fc1 column-parallel, fc2 row-parallel; the row-parallel layers' biases,
// the QK norms, the adaLN and the layers outside the blocks replicated. Per-layer tensors come first in each
// block's bucket, in this order. The last column: what a replicated tensor's gradient on one TP rank covers
// (llmc/parallel/param_layout.h): the rows it ran (patch embedding, row-parallel biases, final layer: its own
// rows under sequence parallelism), its heads (QK norms), or the whole (the conditioning and adaLN weights,
// from the clips' adaLN gradients summed over TP).
static void dit_param_specs(const DitConfig* c, ParamSpec s[NUM_DIT_TENSORS]) {
    size_t D = c->D, P = dit_patch_dim(c), hd = c->D / c->H, FF = c->FF, NC1 = (size_t)c->NC + 1;
    const int R = PARAM_REPLICATED, ROWS = PARAM_SPLIT_ROWS, COLS = PARAM_SPLIT_COLS;
    const int RW = TP_GRAD_ROWS, HD = TP_GRAD_HEADS, WH = TP_GRAD_WHOLE;
    const ParamSpec table[NUM_DIT_TENSORS] = {
        {"patch_w", 0, D, P, R, 1, 1, 1, RW, STAGE_FIRST}, {"patch_b", 0, D, 1, R, 1, 1, 0, RW, STAGE_FIRST},
        {"t1_w", 0, D, TEMB_DIM, R, 1, 1, 1, WH, STAGE_EVERY}, {"t1_b", 0, D, 1, R, 1, 1, 0, WH, STAGE_EVERY},
        {"t2_w", 0, D, D, R, 1, 1, 1, WH, STAGE_EVERY}, {"t2_b", 0, D, 1, R, 1, 1, 0, WH, STAGE_EVERY},
        {"class_emb", 0, NC1, D, R, 1, 1, 1, WH, STAGE_EVERY},
        {"ada_w", 1, 6 * D, D, R, 1, 1, 1, WH, 0}, {"ada_b", 1, 6 * D, 1, R, 1, 1, 0, WH, 0},
        {"qkv_w", 1, 3 * D, D, ROWS, hd, 3, 1, RW, 0}, {"qkv_b", 1, 3 * D, 1, ROWS, hd, 3, 0, RW, 0},
        {"q_norm", 1, hd, 1, R, 1, 1, 0, HD, 0}, {"k_norm", 1, hd, 1, R, 1, 1, 0, HD, 0},  // applied to this rank's heads
        {"proj_w", 1, D, D, COLS, hd, 1, 1, RW, 0}, {"proj_b", 1, D, 1, R, 1, 1, 0, RW, 0},
        {"fc1_w", 1, FF, D, ROWS, 1, 1, 1, RW, 0}, {"fc1_b", 1, FF, 1, ROWS, 1, 1, 0, RW, 0},
        {"fc2_w", 1, D, FF, COLS, 1, 1, 1, RW, 0}, {"fc2_b", 1, D, 1, R, 1, 1, 0, RW, 0},
        {"fada_w", 0, 2 * D, D, R, 1, 1, 1, WH, STAGE_LAST}, {"fada_b", 0, 2 * D, 1, R, 1, 1, 0, WH, STAGE_LAST},
        {"final_w", 0, P, D, R, 1, 1, 1, RW, STAGE_LAST}, {"final_b", 0, P, 1, R, 1, 1, 0, RW, STAGE_LAST},
    };
    memcpy(s, table, sizeof(table));
}

// what one rank of a TP group holds: its heads and its FFN hidden units (llmc/parallel/param_layout.h)
static TpShard dit_shard(const DitConfig* c, int tp, int rank) { return tp_shard(c->H, 0, c->FF, "FF", tp, rank); }

// ----------------------------------------------------------------------------
// activations: what one block keeps for backward, field by field (docs/memory.md 9).
// The fields a flag drops are computed into the shared work buffer (and recomputed).

enum {
    A_H,       // block input, the residual stream                 [BN, D]
    A_MEAN1,   // LayerNorm statistics of h                        [BN] fp32
    A_RSTD1,   //                                                  [BN] fp32
    A_A1,      // LN(h)(1 + scale1) + shift1, the qkv input        [BN, D]
    A_QP,      // q before its RMSNorm                             [BN, D]
    A_KP,      // k before its RMSNorm                             [BN, D]
    A_QRSTD,   // 1/rms of each head of q                          [BN*H] fp32
    A_KRSTD,   // 1/rms of each head of k                          [BN*H] fp32
    A_Q,       // q after RMSNorm and 3-D RoPE (RoPE: not with --attention tc) [BN, D]
    A_K,       // k after RMSNorm and 3-D RoPE (RoPE: not with --attention tc) [BN, D]
    A_V,       // v                                                [BN, D]
    A_O,       // attention output                                 [BN, D]
    A_LSE,     // log-sum-exp of each attention row                [B, H, N] fp32
    A_Y1,      // o proj_w^T + proj_b (gate1's input)              [BN, D]
    A_HMID,    // h + gate1 y1                                     [BN, D]
    A_MEAN2,   //                                                  [BN] fp32
    A_RSTD2,   //                                                  [BN] fp32
    A_A2,      // LN(hmid)(1 + scale2) + shift2, the FFN input     [BN, D]
    A_U,       // a2 fc1_w^T + fc1_b                               [BN, FF]
    A_G,       // gelu_tanh(u)                                     [BN, FF]
    A_Y2,      // g fc2_w^T + fc2_b (gate2's input)                [BN, D]
    A_A1G,     // a1 all-gathered, kept (--tp-recompute-allgather 0) [BN, D]
    A_A2G,     // a2 all-gathered, kept                            [BN, D]
    NUM_DIT_ACTS
};
[[maybe_unused]] static const char* DIT_ACT_NAMES[NUM_DIT_ACTS] = {
    "h", "mean1", "rstd1", "a1", "qp", "kp", "qrstd", "krstd", "q", "k", "v", "o", "lse", "y1", "hmid", "mean2",
    "rstd2", "a2", "u", "g", "y2", "a1 gathered", "a2 gathered"};

// The bytes of one field on one rank: under TP its heads' q, k, v, o and its FFN units
// (of all BN rows); under sequence parallelism the residual stream's fields (h, hmid, the
// LayerNorm statistics, a1, a2, y1, y2) of its BN/tp own rows, a1 and a2 views of their
// gathered copies when those are kept.
static size_t dit_act_field_bytes(const DitConfig* c, const TpShard* t, const TpContext* tpc, int B, size_t N, int field) {
    size_t BN = (size_t)B * N, Dl = (size_t)t->Hl * (c->D / c->H), own = tpc->sp ? BN / tpc->tp : BN;
    switch (field) {
        case A_MEAN1: case A_RSTD1: case A_MEAN2: case A_RSTD2: return own * sizeof(float);
        case A_QRSTD: case A_KRSTD: case A_LSE: return BN * t->Hl * sizeof(float);
        case A_QP: case A_KP: case A_Q: case A_K: case A_V: case A_O: return BN * Dl * sizeof(floatX);
        case A_U: case A_G: return BN * t->Fl * sizeof(floatX);
        case A_A1: case A_A2: return tpc->keep_gathered ? 0 : own * c->D * sizeof(floatX);
        case A_A1G: case A_A2G: return tpc->keep_gathered ? BN * c->D * sizeof(floatX) : 0;
        default: return own * c->D * sizeof(floatX);  // h, y1, hmid, y2
    }
}

typedef ActBlock DitActs;

// the one place that says where each field of a block lives under the flags (sp: sequence
// parallelism, which keeps a chunked FFN's y2, 1/tp of the rows, for gate2's gradient)
static ActHome dit_act_home(const MemoryFlags* f, int sp, int field) {
    if (field == A_A1G || field == A_A2G) return ACT_SAVED;  // 0 bytes unless kept
    if (f->ffn_chunks > 1 && (field == A_U || field == A_G || (field == A_Y2 && !sp))) return ACT_IN_CHUNK;
    if (f->recompute >= 2) return field == A_H ? ACT_SAVED : ACT_IN_WORK;
    int recomputed = field == A_A1 || field == A_A2 || field == A_G || field == A_Q || field == A_K;
    return f->recompute >= 1 && recomputed ? ACT_IN_WORK : ACT_SAVED;
}

static ActPlan dit_act_plan(const DitConfig* c, const TpShard* t, const TpContext* tpc, int B, size_t N, const MemoryFlags* fl) {
    ActPlan p = {NUM_DIT_ACTS, DIT_ACT_NAMES, {0}, {}, 0, 0};
    for (int i = 0; i < NUM_DIT_ACTS; i++) { p.bytes[i] = dit_act_field_bytes(c, t, tpc, B, N, i); p.home[i] = dit_act_home(fl, tpc->sp, i); }
    return act_plan_finish(p);
}

// ----------------------------------------------------------------------------
typedef enum { MODE_TRAIN, MODE_EVAL, MODE_SAMPLE } RunMode;

// the model: what the runtime holds for every model (llmc/train/model_core.h: the flags,
// ranks, plan, parameter store, activations, the TP and CP contexts, the loss), then its own
struct Dit : ModelCore {
    DitConfig cfg;
    TpShard sh;                   // this rank's heads and FFN units (all of them at tp 1)
    AdaLN adaln;                  // adaLN on this rank's rows (llmc/parallel/adaln_op.h)
    int B, N, P;                  // planned batch (clips per rank), tokens per clip on this rank, patch size
    int Nt;                       // tokens per clip (N = Nt / cp)
    size_t clip;                  // values per clip
    floatX *cp_patches, *cp_gathered;  // --cp: every token's patches of the micro-batch; the members' rows gathered
    int keep_vpred;               // test_dit: v_pred of every clip on every rank in training too (a gather under sp)
    floatX* h_final;              // the last block's output [BN, D]
    FfnChunks fc;                 // --ffn-chunks (llmc/train/ffn_chunks.h)
    floatX *ffn_u, *ffn_g, *ffn_y2, *ffn_dg;  // u, g, y2 of one chunk (chunked); d(g) of one chunk (always)
    floatX *dh, *da, *dy, *dout_att, *dq, *dk, *dv, *dqp, *dkp;  // backward scratch
    float *mean_scratch, *rstd_scratch, *qk_rstd_scratch;
    FlowSlots fs;                 // the micro-batch's t, y, x_t, target v and losses (llmc/train/flow_slots.h)
    floatX *vpred, *dvpred, *xp, *hout, *dhout, *xf;  // head
    float *meanf, *rstdf;
    // --pp: a micro-batch's patches live in its slot (pipeline_slot) on the first stage until
    // its backward (the patch embedding's), as its inputs in fs do. One slot but under --pp; xp
    // points into the selected micro-batch's (dit_select_micro).
    floatX* xp_slots;
    int first_stage, last_stage;  // this rank's stage holds the patch embedding, the final layer (both but under --pp)
    floatX *temb, *e1, *s1, *cvec, *sc, *ada, *fada;  // conditioning
    floatX *dsc, *dc, *ds1, *dada, *dfada;
    float* norm_scratch;
};

// this rank's rows of the residual stream of B clips (all but under sequence parallelism), the first
static int own_rows(const Dit* m, int B) { return tp_own_rows(&m->tpc, B * m->N); }
static size_t own_row0(const Dit* m, int B) { return tp_own_row0(&m->tpc, B * m->N); }

// Plans every buffer from the config and the flags, then (allocate = 1) allocates once.
// With allocate = 0 only the plan exists, so a CUDA build can plan without a GPU.
static void dit_build(Dit* m, const DitConfig* cfg, const MemoryFlags* flags, const ParallelFlags* par, Comm* comm, int B,
                      int allocate) {
    memset(m, 0, sizeof(*m));
    dit_config_validate(cfg);
    m->cfg = *cfg; m->B = B;
    const DitConfig* c = cfg;
    m->Nt = dit_tokens(c); m->P = dit_patch_dim(c); m->clip = dit_clip_size(c);
    if (B < 1) FAIL("batch: B=%d must be positive", B);
    parallel_flags_validate(par);
    int tp = comm->tp;
    m->sh = dit_shard(c, tp, comm->tp_rank);
    tp_context_init(&m->tpc, comm, par, flags->recompute, (size_t)c->D);
    // context parallelism (non-causal: a plain split, no zigzag): from here on N is this rank's tokens of a clip
    attention_setup(&m->att, &m->cpx, comm, 0, B, m->Nt, m->sh.Hl, m->sh.Hl, c->D / c->H);
    m->N = attention_local_tokens(&m->att, m->Nt);
    // sequence parallelism cuts the B*N rows of a micro-batch into tp equal blocks (a ragged
    // last block would need padding rows in every collective: refused instead)
    if (m->tpc.sp && ((size_t)B * m->N) % tp != 0)
        FAIL("--tp-mode reducescatter splits the %zu tokens of a micro-batch (batch %d x %d tokens per clip) into %d "
             "equal blocks: choose a batch (or clip) whose tokens --tp divides, or --tp-mode allreduce",
             (size_t)B * m->N, B, m->N, tp);
    if (flags->recompute < 0 || flags->recompute > 2) FAIL("--recompute must be 0, 1 or 2 (got %d)", flags->recompute);
    m->fc = ffn_chunks_plan(flags, B, m->N, m->sh.Fl, m->sh.Fmax, tp, "a clip");
    int n_offload = offload_resolve(flags->offload_act, c->L);
    size_t BN = (size_t)B * m->N, D = c->D, hd = c->D / c->H, P = m->P, Hl = m->sh.Hl, Dl = Hl * hd;
    size_t own = tp_own_rows(&m->tpc, (int)BN);  // this rank's rows of the residual stream

    ParamSpec spec[NUM_DIT_TENSORS];
    dit_param_specs(c, spec);
    model_core_begin(m, spec, NUM_DIT_TENSORS, c->L, comm, flags, par, 0);
    m->tokens_per_item = m->Nt;
    Arena* d = &m->dev;
    // the largest TP collective: [BN, D] rows, [BN, P] patches, [B, 6D] adaLN; of CP, the patches' gather (sampling, test_dit)
    size_t tp_most = BN * (D > P ? D : P) > (size_t)B * 6 * D ? BN * (D > P ? D : P) : (size_t)B * 6 * D;
    size_t cp_most = comm->cp > 1 ? (size_t)B * m->Nt * P : 0;
    pipeline_plan_tensors(&m->pipe, own * D);  // --pp: what a stage sends on: this rank's rows of the residual stream
    model_core_staging(m, tp > 1 && tp_most > cp_most ? tp_most : cp_most);
    tp_context_plan(&m->tpc, BN, d);  // the recycled buffers of sequence parallelism (allreduce mode: none)
    m->adaln = adaln_setup(&m->tpc, m->N, c->D, DIT_EPS);
    attention_plan(&m->att, d);       // context parallelism's recycled buffers and fp32 scratch (none at cp 1)
    model_core_plan_acts(m, dit_act_plan(c, &m->sh, &m->tpc, B, m->N, flags), n_offload);
    model_core_gathered_view(m, 0, A_A1, A_A1G);
    model_core_gathered_view(m, 1, A_A2, A_A2G);
    arena_add_to(d, "saved activations (h_final)", "activations", own * D * sizeof(floatX), &m->h_final);
    model_core_plan_work(m, "block work (not saved)");
    // under --pp the patch embedding's buffers on the first stage only, the final layer's and
    // the loss's on the last, a micro-batch's inputs in as many slots as the stage holds
    int s = comm->pp_rank;
    m->first_stage = pp_stage_holds(STAGE_FIRST, s, comm->pp); m->last_stage = pp_stage_holds(STAGE_LAST, s, comm->pp);
    size_t first = m->first_stage, last = m->last_stage, ends = first || last, slots = m->pipe.chunk_slots[0];

    // the scratch: one chunk of the FFN (chunked: its y2 too in allreduce mode; sequence
    // parallelism sums them in the reduce-scatter staging), the backward's gradients (the
    // residual stream's: this rank's rows; the attention's: its heads), the norm statistics
    // of --recompute 1 (the q and k RMSNorms one after the other into the same BN*H floats),
    // the clips and their patches, the final layer, the conditioning
    size_t chunk = (size_t)m->fc.rows * m->fc.cols * sizeof(floatX), y2 = (size_t)m->fc.rows * D * sizeof(floatX);
    size_t act = own * D * sizeof(floatX), heads = BN * Dl * sizeof(floatX), bd = (size_t)B * D * sizeof(floatX);
    size_t xbytes = (size_t)B * m->clip * sizeof(floatX), pbytes = BN * P * sizeof(floatX);
    int chunked = flags->ffn_chunks > 1;
    ARENA_ADD_ALL(d, "scratch", {"ffn chunk u", chunked ? chunk : 0, &m->ffn_u}, {"ffn chunk g", chunked ? chunk : 0, &m->ffn_g},
        {"ffn chunk y2", chunked && !m->tpc.sp ? y2 : 0, &m->ffn_y2}, {"ffn d(g), d(u)", chunk, &m->ffn_dg},
        {"d residual", act, &m->dh}, {"d modulated input", act, &m->da}, {"d gated branch", act, &m->dy},
        {"d attention output", heads, &m->dout_att}, {"dq", heads, &m->dq}, {"dk", heads, &m->dk}, {"dv", heads, &m->dv},
        {"dq before norm", heads, &m->dqp}, {"dk before norm", heads, &m->dkp},
        {"norm statistics (recompute)", flags->recompute == 1 ? (2 * own + BN * Hl) * sizeof(float) : 0, &m->mean_scratch},
        {"clips x0", ends * xbytes, &m->fs.x0}, {"noise", ends * xbytes, &m->fs.noise}, {"x_t", first * xbytes, &m->fs.xt},
        {slots > 1 ? "target v (a slot each)" : "target v", last * slots * xbytes, &m->fs.vt_slots},
        {"v_pred", last * xbytes, &m->vpred}, {"d v_pred", last * xbytes, &m->dvpred},
        {slots > 1 ? "patches of x_t (a slot each)" : "patches of x_t", first * slots * pbytes, &m->xp_slots},
        {"final layer output", last * pbytes, &m->hout}, {"d final layer output", last * pbytes, &m->dhout},
        {"final norm output", last * act, &m->xf}, {"final norm statistics", last * 2 * own * sizeof(float), &m->meanf},
        {slots > 1 ? "t, y (a slot each), per-clip losses" : "t, y, per-clip losses", (2 * slots + 1) * B * sizeof(float),
         &m->fs.ty_slots},
        {"conditioning (t emb, c)", (size_t)B * TEMB_DIM * sizeof(floatX) + 4 * bd, &m->temb});
    arena_add_to(d, "adaLN vectors (all blocks)", "activations", (size_t)c->L * 6 * bd + 2 * bd, &m->ada);
    arena_add_to(d, "d conditioning", "scratch", 3 * bd + 6 * bd + 2 * bd, &m->dsc);
    pipeline_plan_buffers(&m->pipe, d);  // --pp: the received gradient's recycled buffer
    if (comm->cp > 1 && ends) {  // every token's patches (the patchify of whole clips; v_pred's gather)
        arena_add_to(d, "cp patches (whole clips)", "scratch", (size_t)B * m->Nt * P * sizeof(floatX), &m->cp_patches);
        arena_add_to(d, "cp gathered patches", "comm", (size_t)B * m->Nt * P * sizeof(floatX), &m->cp_gathered);
    }
    ARENA_ADD_ALL(d, "scratch", {"rope3d cos + sin", 2 * (size_t)m->Nt * (hd / 2) * sizeof(float), &m->rope_cos},
                  {"grad norm", sizeof(float), &m->norm_scratch});
    attention_plan_scratch(&m->att, d, B, m->N);
    // the column sums' partials: biases over up to all BN rows of D, Dl, FFl or P columns
    size_t wide = D > Dl ? D : Dl, wide2 = (size_t)m->sh.Fl > P ? (size_t)m->sh.Fl : P;
    tp_colsum_plan(&m->tpc, d, BN, wide > wide2 ? wide : wide2, B, m->N, (int)D);

    if (!allocate) return;
    model_core_allocate(m, &m->norm_scratch);
    if (flags->recompute == 1) { m->rstd_scratch = m->mean_scratch + own; m->qk_rstd_scratch = m->rstd_scratch + own; }
    if (last) m->rstdf = m->meanf + own;
    flow_slots_bind(&m->fs, B, (int)slots, (int)first, (int)last, c->NC, m->clip);
    size_t bn = (size_t)B * D;  // the conditioning's vectors, one after the other in their buffers
    m->e1 = m->temb + (size_t)B * TEMB_DIM; m->s1 = m->e1 + bn; m->cvec = m->s1 + bn; m->sc = m->cvec + bn;
    m->fada = m->ada + (size_t)c->L * 6 * bn;
    m->dc = m->dsc + bn; m->ds1 = m->dc + bn; m->dada = m->ds1 + bn; m->dfada = m->dada + 6 * bn;
    model_core_loss_rows(m, m->tpc.sp, NULL);  // the loss: the TP ranks' rows differ under sequence parallelism
    size_t n_rope = (size_t)m->Nt * (hd / 2);
    float* tab = (float*)xmalloc(2 * n_rope * sizeof(float));
    rope3d_table(tab, tab + n_rope, c->Fr / c->pt, c->Hi / c->ph, c->Wi / c->pw, (int)hd, c->rope_theta);
    model_core_bind_rope(m, tab, n_rope);
}

static void dit_free(Dit* m) {
    flow_slots_free(&m->fs);
    model_core_free(m);
}

// Initialisation of DiT's adaLN-Zero (docs/design.md 9.3): xavier-uniform weights and zero biases
// for patch, qkv, proj, fc1, fc2; normal(0, 0.02) for t1, t2 and class_emb; zeros for
// ada, fada and final; ones for q_norm and k_norm. So each block starts as the identity.
static void dit_init_params(Dit* m, uint64_t seed) {
    const DitConfig* c = &m->cfg;
    size_t D = c->D, P = m->P, FF = c->FF;
    ParamInit init[NUM_DIT_TENSORS], zero = {INIT_ZERO, 0}, ones = {INIT_ONES, 0}, normal = {INIT_NORMAL, 0.02f};
    for (int t = 0; t < NUM_DIT_TENSORS; t++) init[t] = zero;  // biases, ada, fada, final
    init[W_PATCH] = init_xavier(P, D); init[W_QKV] = init_xavier(D, 3 * D); init[W_PROJ] = init_xavier(D, D);
    init[W_FC1] = init_xavier(D, FF); init[W_FC2] = init_xavier(FF, D);
    init[W_T1] = init[W_T2] = init[W_CLASS] = normal;
    init[W_QNORM] = init[W_KNORM] = ones;
    model_core_init_params(m, init, seed);
}

// ----------------------------------------------------------------------------
// forward and backward

// the adaLN vectors of block l: shift1 scale1 gate1 shift2 scale2 gate2, each [B, D] with row stride 6D
static floatX* ada_part(const Dit* m, floatX* base, int part) { return base + (size_t)part * m->cfg.D; }

// t, class -> c, silu(c), and (final_layer: where the final layer runs) its adaLN vectors (each block makes
// its own: block_adaln_forward)
static void conditioning_forward(Dit* m, int B, int final_layer) {
    const DitConfig* c = &m->cfg;
    int D = c->D;
    stream_t s = m->stream;
    PROF(&m->prof, "conditioning fwd", gemm_flops(B, D, TEMB_DIM + D + 2.0 * D), 0, s) {
    timestep_embedding(m->temb, m->fs.t, B, TEMB_DIM, s);
    matmul_forward(m->e1, m->temb, core_w(m, W_T1, 0), B, TEMB_DIM, D, TEMB_DIM, 0, s);
    bias_forward(m->e1, core_w(m, B_T1, 0), B, D, s);
    silu_forward(m->s1, m->e1, (size_t)B * D, s);
    encoder_forward(m->cvec, m->fs.y, core_w(m, W_CLASS, 0), B, D, s);
    matmul_forward(m->cvec, m->s1, core_w(m, W_T2, 0), B, D, D, D, 1, s);
    bias_forward(m->cvec, core_w(m, B_T2, 0), B, D, s);
    silu_forward(m->sc, m->cvec, (size_t)B * D, s);
    if (final_layer) {
        matmul_forward(m->fada, m->sc, core_w(m, W_FADA, 0), B, D, 2 * D, D, 0, s);
        bias_forward(m->fada, core_w(m, B_FADA, 0), B, 2 * D, s);
    }
    }
}

// from d silu(c) (accumulated by every adaLN) to the class embedding and the timestep MLP
static void conditioning_backward(Dit* m, int B) {
    int D = m->cfg.D;
    stream_t s = m->stream;
    PROF(&m->prof, "conditioning bwd", 2 * gemm_flops(B, D, TEMB_DIM + D), 0, s) {
    silu_backward(m->dc, m->dsc, m->cvec, (size_t)B * D, s);
    encoder_backward(core_dw(m, W_CLASS, 0), m->dc, m->fs.y, B, D, s);
    matmul_backward_weight(core_dw(m, W_T2, 0), m->dc, m->s1, B, D, D, D, s);
    bias_backward(core_dw(m, B_T2, 0), m->dc, B, D, NULL, s);  // B rows, one chunk: no scratch (one-stage sums)
    matmul_backward_input(m->ds1, m->dc, core_w(m, W_T2, 0), B, D, D, D, 0, s);
    silu_backward(m->ds1, m->ds1, m->e1, (size_t)B * D, s);
    matmul_backward_weight(core_dw(m, W_T1, 0), m->ds1, m->temb, B, TEMB_DIM, D, TEMB_DIM, s);
    bias_backward(core_dw(m, B_T1, 0), m->ds1, B, D, NULL, s);
    }
}

// q or k of block l from its projection: RMSNorm over each head, then 3-D RoPE (by each
// token's position in its clip: llmc/parallel/attention_op.h)
static void qk_norm_rope(Dit* m, int l, int which, floatX* out, float* rstd, const floatX* in, int B) {
    const DitConfig* c = &m->cfg;
    int hd = c->D / c->H, Hl = m->sh.Hl;
    rmsnorm_forward(out, rstd, in, core_w(m, which, l), B * m->N * Hl, hd, DIT_EPS, m->stream);
    attention_rope(&m->att, out, Hl, B, m->N, 0);
}

// The column-parallel linears of block l's attention (which = 0: they read a1) or FFN (1: a2), on all B*N rows;
// in backward with the partial gradient at their input in m->da (or the reduce-scatter staging under sequence
// parallelism) (llmc/parallel/linear.h)
static ColumnLinear norm_linear(Dit* m, int l, DitActs a, int which, int B, int backward) {
    int own_f = which ? A_A2 : A_A1, kept_f = which ? A_A2G : A_A1G, slot = 2 * l + which;
    if (backward) return column_backward(&m->tpc, slot, ACT(a, own_f), ACT(a, kept_f), m->da, B * m->N, DIT_ACT_NAMES[own_f]);
    return column_forward(&m->tpc, slot, ACT(a, own_f), ACT(a, kept_f), B * m->N, DIT_ACT_NAMES[own_f]);
}

// the attention half of block l: a1, q, k, v, o, y1 and hmid = h + gate1 y1. Under TP this rank's heads (qkv
// column-parallel, proj row-parallel): y1 is summed over the group before gate1 multiplies it; the norm and the
// gated residual run on this rank's rows.
static void attention_block_forward(Dit* m, int l, DitActs a, int B) {
    const DitConfig* c = &m->cfg;
    int N = m->N, D = c->D, BN = B * N, nr = own_rows(m, B), hd = D / c->H, Hl = m->sh.Hl, Dl = Hl * hd;
    stream_t s = m->stream;
    floatX* ada = m->ada + (size_t)l * B * 6 * D;
    const floatX* wqkv = core_w(m, W_QKV, l);
    const floatX* bqkv = core_w(m, B_QKV, l);
    Profile* P = &m->prof;
    PROF(P, "layernorm modulate fwd", 0, 2.0 * nr * D * SX, s)
        adaln_modulate_forward(&m->adaln, ACT(a, A_A1), ACTF(a, A_MEAN1), ACTF(a, A_RSTD1), ACT(a, A_H),
                               ada_part(m, ada, 0), ada_part(m, ada, 1), 6 * D, B);
    ColumnLinear qkv = norm_linear(m, l, a, 0, B, 0);
    floatX* proj[3] = {ACT(a, A_QP), ACT(a, A_KP), ACT(a, A_V)};
    PROF(P, "qkv matmul fwd", gemm_flops(BN, 3.0 * Dl, D), 0, s)
        for (int i = 0; i < 3; i++)  // q, k, v: the three row blocks of qkv_w (this rank's heads of each)
            column_gemm(&qkv, proj[i], wqkv + (size_t)i * Dl * D, bqkv + (size_t)i * Dl, 0, BN, Dl);
    column_done(&qkv);
    PROF(P, "qk norm rope fwd", 0, 4.0 * BN * Dl * SX, s) {
        qk_norm_rope(m, l, W_QNORM, ACT(a, A_Q), ACTF(a, A_QRSTD), ACT(a, A_QP), B);
        qk_norm_rope(m, l, W_KNORM, ACT(a, A_K), ACTF(a, A_KRSTD), ACT(a, A_KP), B);
    }
    attention_forward(&m->att, ACT(a, A_O), ACTF(a, A_LSE), ACT(a, A_Q), ACT(a, A_K), ACT(a, A_V), B, N);
    RowLinear y1 = row_forward(&m->tpc, ACT(a, A_Y1), NULL, BN);
    PROF(P, "proj matmul fwd", gemm_flops(BN, D, Dl), 0, s)
        row_gemm(&y1, ACT(a, A_O), core_w(m, W_PROJ, l), core_w(m, B_PROJ, l), 0, BN, Dl, Dl, 1);
    row_done(&y1);
    PROF(P, "gated residual fwd", 0, 3.0 * nr * D * SX, s)
        adaln_gate_forward(&m->adaln, ACT(a, A_HMID), ACT(a, A_H), ACT(a, A_Y1), ada_part(m, ada, 2), 6 * D, B);
    PROF(P, "layernorm modulate fwd", 0, 2.0 * nr * D * SX, s)
        adaln_modulate_forward(&m->adaln, ACT(a, A_A2), ACTF(a, A_MEAN2), ACTF(a, A_RSTD2), ACT(a, A_HMID),
                               ada_part(m, ada, 3), ada_part(m, ada, 4), 6 * D, B);
}

// u and g of one chunk (fc1 and GELU) from a2 (all rows)
static void ffn_chunk_hidden(Dit* m, int l, const ColumnLinear* a2, FfnChunk ch, floatX* u, floatX* g) {
    int D = m->cfg.D;
    stream_t s = m->stream;
    if (ch.nf == 0) return;  // a rank's empty last hidden chunk (FF split unevenly)
    PROF(&m->prof, "ffn fc1 matmul fwd", gemm_flops(ch.nr, ch.nf, D), 0, s)
        column_gemm(a2, u, core_w(m, W_FC1, l) + (size_t)ch.f0 * D, core_w(m, B_FC1, l) + ch.f0, ch.r0, ch.nr, ch.nf);
    PROF(&m->prof, "gelu fwd", 0, 2.0 * ch.nr * ch.nf * SX, s) gelu_tanh_forward(g, u, (size_t)ch.nr * ch.nf, s);
}

// u, g and this chunk's share of the FFN output y2, added into rows r0.. of the row-parallel sum (first: the
// first chunk into those rows). The bias belongs to the first hidden chunk (and under TP to rank 0's: row_gemm).
static void ffn_chunk_forward(Dit* m, int l, const ColumnLinear* a2, FfnChunk ch, floatX* u, floatX* g, RowLinear* y2,
                              int r0, int first) {
    ffn_chunk_hidden(m, l, a2, ch, u, g);
    PROF(&m->prof, "ffn fc2 matmul fwd", gemm_flops(ch.nr, m->cfg.D, ch.nf), 0, m->stream)
        row_gemm(y2, g, core_w(m, W_FC2, l) + ch.f0, ch.f0 == 0 ? core_w(m, B_FC2, l) : NULL, r0, ch.nr, ch.nf, m->sh.Fl,
                 first);
}

// The FFN's output y2 = FFN(a2) of block l, summed over the TP group, this rank's rows of it into y2: its chunks
// (hidden chunks add into one sum, token chunks each write their rows) into one row-parallel sum. Not for the
// token chunks of allreduce mode, which each finish their own rows (ffn_forward).
static void ffn_output(Dit* m, int l, DitActs a, int B, floatX* y2) {
    int chunked = m->flags.ffn_chunks > 1, seq = chunked && m->flags.ffn_chunk_seq;
    ColumnLinear x = norm_linear(m, l, a, 1, B, 0);
    RowLinear out = row_forward(&m->tpc, y2, NULL, B * m->N);
    for (int k = 0; k < ffn_chunk_count(&m->fc, B, m->N); k++) {
        FfnChunk ch = ffn_chunk_at(&m->fc, B, m->N, k);
        ffn_chunk_forward(m, l, &x, ch, chunked ? m->ffn_u : ACT(a, A_U), chunked ? m->ffn_g : ACT(a, A_G), &out,
                          seq ? ch.r0 : 0, seq || k == 0);
    }
    column_done(&x);
    row_done(&out);
}

// out = hmid + gate2 * FFN(a2); chunked, only a2 (and hmid) stay (and under sequence
// parallelism y2, 1/tp of the rows)
static void ffn_forward(Dit* m, int l, DitActs a, int B, floatX* out) {
    int D = m->cfg.D, nr = own_rows(m, B);
    stream_t s = m->stream;
    floatX* gate = ada_part(m, m->ada + (size_t)l * B * 6 * D, 5);
    if (m->flags.ffn_chunks > 1 && m->flags.ffn_chunk_seq && !m->tpc.sp) {  // token chunks, each summed on its own
        ColumnLinear x = norm_linear(m, l, a, 1, B, 0);
        for (int k = 0; k < ffn_chunk_count(&m->fc, B, m->N); k++) {
            FfnChunk ch = ffn_chunk_at(&m->fc, B, m->N, k);
            RowLinear y2 = row_forward(&m->tpc, m->ffn_y2, NULL, ch.nr);
            ffn_chunk_forward(m, l, &x, ch, m->ffn_u, m->ffn_g, &y2, 0, 1);
            row_done(&y2);
            PROF(&m->prof, "gated residual fwd", 0, 3.0 * ch.nr * D * SX, s)
                gated_residual_forward(out + (size_t)ch.r0 * D, ACT(a, A_HMID) + (size_t)ch.r0 * D, m->ffn_y2,
                                       gate + (size_t)ch.b0 * 6 * D, 6 * D, 1, ch.nr, D, s);
        }
        column_done(&x);
        return;
    }
    // y2: the block's field, or in allreduce mode the hidden chunks' sum (not kept)
    floatX* y2 = m->flags.ffn_chunks > 1 && !m->tpc.sp ? m->ffn_y2 : ACT(a, A_Y2);
    ffn_output(m, l, a, B, y2);
    PROF(&m->prof, "gated residual fwd", 0, 3.0 * nr * D * SX, s)
        adaln_gate_forward(&m->adaln, out, ACT(a, A_HMID), y2, gate, 6 * D, B);
}

// The FFN's backward from m->dh (dL/d block output, this rank's rows): gate2's gradient into dada, the FFN
// weights' gradients; returns its input linear with the partial gradient at a2 (all rows), for the caller to
// reduce. The chunks of allreduce mode keep no y2: each is recomputed whole and summed over TP for gate2's
// gradient; the other layouts read the kept y2.
static ColumnLinear ffn_backward(Dit* m, int l, DitActs a, int B) {
    const DitConfig* c = &m->cfg;
    int D = c->D, FFl = m->sh.Fl, nr = own_rows(m, B);
    stream_t s = m->stream;
    floatX* gate = ada_part(m, m->ada + (size_t)l * B * 6 * D, 5);
    floatX* dgate = ada_part(m, m->dada, 5);
    int chunked = m->flags.ffn_chunks > 1, recompute_y2 = chunked && !m->tpc.sp;
    // dy2 = gate2 * dh (this rank's rows), then all of them
    PROF(&m->prof, "gated residual bwd", 0, 3.0 * nr * D * SX, s)
        adaln_gate_backward(&m->adaln, m->dy, recompute_y2 ? NULL : dgate, m->dh, ACT(a, A_Y2), gate, 6 * D, B);
    RowLinear fc2 = row_backward(&m->tpc, m->dy, B * m->N, core_dw(m, B_FC2, l));
    ColumnLinear x = norm_linear(m, l, a, 1, B, 1);
    int nc = ffn_chunk_count(&m->fc, B, m->N);
    for (int k = 0; k < nc; k++) {
        FfnChunk ch = ffn_chunk_at(&m->fc, B, m->N, k);
        floatX *u = ACT(a, A_U), *g = ACT(a, A_G);
        if (chunked) u = m->ffn_u, g = m->ffn_g;
        if (recompute_y2) {  // recompute the chunk, and its share of gate2's gradient (the chunk's y2 summed over TP)
            RowLinear y2 = row_forward(&m->tpc, m->ffn_y2, NULL, ch.nr);
            ffn_chunk_forward(m, l, &x, ch, u, g, &y2, 0, 1);
            row_done(&y2);
            gated_residual_backward(NULL, dgate + (size_t)ch.b0 * 6 * D, m->dh + (size_t)ch.r0 * D, m->ffn_y2,
                                    gate + (size_t)ch.b0 * 6 * D, 6 * D, ch.nb, ch.nper, D, !ch.first,
                                    tp_adaln_scratch(&m->tpc, ch.nb, ch.nper, D), s);
        } else if (chunked) {
            ffn_chunk_hidden(m, l, &x, ch, u, g);
        }
        if (ch.nf == 0) continue;  // a rank's empty last hidden chunk
        PROF(&m->prof, "ffn fc2 matmul bwd", 2 * gemm_flops(ch.nr, D, ch.nf), 0, s)
            row_gemm_backward(&fc2, core_dw(m, W_FC2, l) + ch.f0, m->ffn_dg, g, core_w(m, W_FC2, l) + ch.f0, ch.r0, ch.nr,
                              ch.nf, FFl);
        PROF(&m->prof, "gelu bwd", 0, 3.0 * ch.nr * ch.nf * SX, s)
            gelu_tanh_backward(m->ffn_dg, m->ffn_dg, u, (size_t)ch.nr * ch.nf, s);
        PROF(&m->prof, "ffn fc1 matmul bwd", 2 * gemm_flops(ch.nr, ch.nf, D), 0, s)  // hidden chunks add into d a2
            column_gemm_backward(&x, core_dw(m, W_FC1, l) + (size_t)ch.f0 * D, core_dw(m, B_FC1, l) + ch.f0, m->ffn_dg,
                                 core_w(m, W_FC1, l) + (size_t)ch.f0 * D, ch.r0, ch.nr, ch.nf,
                                 !m->flags.ffn_chunk_seq && k > 0);
    }
    row_done(&fc2);
    return x;
}

// block l's adaLN vectors: ada = silu(c) ada_w^T + ada_b, kept for its backward (a block's own weights, so
// they are made where the block runs: under --zero 3 its parameters exist only then)
static void block_adaln_forward(Dit* m, int l, int B) {
    int D = m->cfg.D;
    floatX* ada = m->ada + (size_t)l * B * 6 * D;
    PROF(&m->prof, "adaln matmul fwd", gemm_flops(B, 6.0 * D, D), 0, m->stream) {
        matmul_forward(ada, m->sc, core_w(m, W_ADA, l), B, D, 6 * D, D, 0, m->stream);
        bias_forward(ada, core_w(m, B_ADA, l), B, 6 * D, m->stream);
    }
}

static void layer_forward(Dit* m, int l, int B, RunMode mode) {
    DitActs a = core_layer_acts(m, l);
    block_adaln_forward(m, l, B);
    attention_block_forward(m, l, a, B);
    // the output lands in the next block's (possibly offloaded) slot
    if (mode == MODE_TRAIN && core_next_in_chunk(m, l)) offload_before_write(&m->off, core_block(m, l + 1), m->stream);
    ffn_forward(m, l, a, B, core_layer_output(m, l, A_H, m->h_final));
    if (mode == MODE_TRAIN) offload_after_forward(&m->off, core_block(m, l), m->stream);
}

// m->dh holds dL/d(block output) on entry and dL/d(block input) on return (this rank's rows of them); the
// block's adaLN gradients go to its ada weights and add into d silu(c)
static void layer_backward(Dit* m, int l, int B) {
    const DitConfig* c = &m->cfg;
    int N = m->N, D = c->D, BN = B * N, nr = own_rows(m, B), hd = D / c->H, Hl = m->sh.Hl, Dl = Hl * hd;
    stream_t s = m->stream;
    Profile* P = &m->prof;
    PROF(P, "offload wait", 0, 0, s) offload_before_backward(&m->off, core_block(m, l), core_block_below(m, l), s);
    DitActs a = core_layer_acts(m, l);
    floatX* ada = m->ada + (size_t)l * B * 6 * D;

    // recompute what was not kept: the same launchers on the same inputs give the same bits
    if (m->flags.recompute >= 2) {
        attention_block_forward(m, l, a, B);
        // gate2's gradient reads the summed y2 (allreduce mode's chunks: ffn_backward)
        if (m->flags.ffn_chunks == 1 || m->tpc.sp) ffn_output(m, l, a, B, ACT(a, A_Y2));
    } else if (m->flags.recompute == 1) {
        PROF(P, "layernorm modulate fwd", 0, 4.0 * nr * D * SX, s) {
            adaln_modulate_forward(&m->adaln, ACT(a, A_A1), m->mean_scratch, m->rstd_scratch, ACT(a, A_H),
                                   ada_part(m, ada, 0), ada_part(m, ada, 1), 6 * D, B);
            adaln_modulate_forward(&m->adaln, ACT(a, A_A2), m->mean_scratch, m->rstd_scratch, ACT(a, A_HMID),
                                   ada_part(m, ada, 3), ada_part(m, ada, 4), 6 * D, B);
        }
        PROF(P, "qk norm rope fwd", 0, 4.0 * BN * Dl * SX, s) {
            qk_norm_rope(m, l, W_QNORM, ACT(a, A_Q), m->qk_rstd_scratch, ACT(a, A_QP), B);
            qk_norm_rope(m, l, W_KNORM, ACT(a, A_K), m->qk_rstd_scratch, ACT(a, A_KP), B);
        }
        if (m->flags.ffn_chunks == 1)
            PROF(P, "gelu fwd", 0, 2.0 * BN * m->sh.Fl * SX, s) gelu_tanh_forward(ACT(a, A_G), ACT(a, A_U), (size_t)BN * m->sh.Fl, s);
    }
    adaln_grads_begin(&m->adaln, m->dada, (size_t)B * 6 * D);

    // FFN, then its modulated norm: dh is the gradient at the block output and, through
    // the residual, at hmid; the norm's backward adds the FFN path into it (the FFN input's
    // gradient summed over TP: this rank's rows)
    ColumnLinear ffn_in = ffn_backward(m, l, a, B);
    const floatX* da = column_reduce(&ffn_in);
    PROF(P, "layernorm modulate bwd", 0, 4.0 * nr * D * SX, s)
        adaln_modulate_backward(&m->adaln, m->dh, ada_part(m, m->dada, 3), ada_part(m, m->dada, 4), da, ACT(a, A_HMID),
                                ACTF(a, A_MEAN2), ACTF(a, A_RSTD2), ada_part(m, ada, 4), 6 * D, B);
    column_done(&ffn_in);
    // attention: hmid = h + gate1 y1
    PROF(P, "gated residual bwd", 0, 3.0 * nr * D * SX, s)
        adaln_gate_backward(&m->adaln, m->dy, ada_part(m, m->dada, 2), m->dh, ACT(a, A_Y1), ada_part(m, ada, 2), 6 * D,
                            B);
    RowLinear y1 = row_backward(&m->tpc, m->dy, BN, core_dw(m, B_PROJ, l));
    PROF(P, "proj matmul bwd", 2 * gemm_flops(BN, D, Dl), 0, s)
        row_gemm_backward(&y1, core_dw(m, W_PROJ, l), m->dout_att, ACT(a, A_O), core_w(m, W_PROJ, l), 0, BN, Dl, Dl);
    row_done(&y1);
    attention_backward(&m->att, m->dq, m->dk, m->dv, m->dout_att, ACT(a, A_Q), ACT(a, A_K), ACT(a, A_V), ACT(a, A_O),
                       ACTF(a, A_LSE), B, N);
    PROF(P, "qk norm bwd", 0, 6.0 * BN * Dl * SX, s) {
        dev_memset(m->dqp, 0, (size_t)BN * Dl * sizeof(floatX), s);
        dev_memset(m->dkp, 0, (size_t)BN * Dl * sizeof(floatX), s);
        rmsnorm_backward(m->dqp, core_dw(m, W_QNORM, l), m->dq, ACT(a, A_QP), core_w(m, W_QNORM, l), ACTF(a, A_QRSTD),
                         BN * Hl, hd, s);
        rmsnorm_backward(m->dkp, core_dw(m, W_KNORM, l), m->dk, ACT(a, A_KP), core_w(m, W_KNORM, l), ACTF(a, A_KRSTD),
                         BN * Hl, hd, s);
    }
    const floatX* dproj[3] = {m->dqp, m->dkp, m->dv};
    ColumnLinear qkv = norm_linear(m, l, a, 0, B, 1);
    PROF(P, "qkv matmul bwd", 2 * gemm_flops(BN, 3.0 * Dl, D), 0, s)
        for (int i = 0; i < 3; i++)
            column_gemm_backward(&qkv, core_dw(m, W_QKV, l) + (size_t)i * Dl * D, core_dw(m, B_QKV, l) + (size_t)i * Dl,
                                 dproj[i], core_w(m, W_QKV, l) + (size_t)i * Dl * D, 0, BN, Dl, i > 0);
    da = column_reduce(&qkv);
    PROF(P, "layernorm modulate bwd", 0, 4.0 * nr * D * SX, s)
        adaln_modulate_backward(&m->adaln, m->dh, ada_part(m, m->dada, 0), ada_part(m, m->dada, 1), da, ACT(a, A_H),
                                ACTF(a, A_MEAN1), ACTF(a, A_RSTD1), ada_part(m, ada, 1), 6 * D, B);
    column_done(&qkv);
    offload_after_backward(&m->off, core_block(m, l), s);
    // the block's adaLN: ada = silu(c) ada_w^T + ada_b
    adaln_grads_finish(&m->adaln, m->dada, (size_t)B * 6 * D);
    PROF(P, "adaln matmul bwd", 2 * gemm_flops(B, 6.0 * D, D), 0, s) {
        matmul_backward_weight(core_dw(m, W_ADA, l), m->dada, m->sc, B, D, 6 * D, D, s);
        bias_backward(core_dw(m, B_ADA, l), m->dada, B, 6 * D, NULL, s);
        matmul_backward_input(m->dsc, m->dada, core_w(m, W_ADA, l), B, D, 6 * D, D, 1, s);
    }
}

// The patches of B clips x ([B, clip] values) into out: all N of each clip, or under cp this rank's N of the Nt
// (tokens [k N, (k+1) N) of each clip on CP member k)
static void dit_patches(Dit* m, floatX* out, const floatX* x, int B) {
    const DitConfig* c = &m->cfg;
    floatX* all = m->comm->cp > 1 ? m->cp_patches : out;
    patchify(all, x, B, c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, m->stream);
    if (all != out) attention_slice_rows(&m->att, out, all, B, (size_t)m->P);
}

// The final adaLN and linear layer, unpatchify and the loss; in training their backward
// at once, leaving dL/d h_final in m->dh and the first part of d silu(c) in m->dsc. On this
// rank's rows under sequence parallelism or cp: the loss in patch space (each clip's sum over
// the rows here: dit_clip_losses), v_pred only when wanted (sampling, test_dit), gathered.
static void head_forward_backward(Dit* m, int B, RunMode mode, float dscale) {
    const DitConfig* c = &m->cfg;
    int D = c->D, P = m->P, nr = own_rows(m, B), sp = m->tpc.sp, cp = m->comm->cp;
    int rowwise = sp || cp > 1;  // the loss on this rank's rows, in patch space
    stream_t s = m->stream;
    floatX* hout = m->hout + own_row0(m, B) * P;  // this rank's rows
    PROF(&m->prof, "final layer fwd", gemm_flops(nr, P, D), 0, s) {
        adaln_modulate_forward(&m->adaln, m->xf, m->meanf, m->rstdf, m->h_final, m->fada, m->fada + D, 2 * D, B);
        matmul_forward(hout, m->xf, core_w(m, W_FINAL, 0), nr, D, P, D, 0, s);
        bias_forward(hout, core_w(m, B_FINAL, 0), nr, P, s);
        if (!rowwise || mode == MODE_SAMPLE || m->keep_vpred) {
            replicated_gather_rows(&m->tpc, m->hout, B * m->N, (size_t)P);
            const floatX* all = m->hout;  // every token's output (under cp gathered from the CP group)
            if (cp > 1) {
                attention_gather_rows(&m->att, m->cp_patches, m->cp_gathered, m->hout, B, (size_t)P);
                all = m->cp_patches;
            }
            unpatchify(m->vpred, all, B, c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, s);
        }
    }
    if (mode == MODE_SAMPLE) return;
    floatX* dhout = m->dhout + own_row0(m, B) * P;
    PROF(&m->prof, "loss", 0, 3.0 * B * m->clip * SX, s) {
        if (!rowwise) {
            mse_forward_backward(m->fs.sq, mode == MODE_TRAIN ? m->dvpred : NULL, m->vpred, m->fs.vtarget, B, m->clip,
                                 dscale, s);
            if (mode == MODE_TRAIN) patchify(m->dhout, m->dvpred, B, c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, s);
        } else {  // the target's patches (this rank's tokens under cp); the gradient overwrites this rank's rows of them
            dit_patches(m, m->dhout, m->fs.vtarget, B);
            own_rows_mse(&m->adaln, m->fs.sq, mode == MODE_TRAIN ? dhout : NULL, hout, dhout, B, (size_t)P, dscale);
        }
    }
    if (mode != MODE_TRAIN) return;
    PROF(&m->prof, "final layer bwd", 2 * gemm_flops(nr, P, D), 0, s) {
    matmul_backward_weight(core_dw(m, W_FINAL, 0), dhout, m->xf, nr, D, P, D, s);
    bias_backward(core_dw(m, B_FINAL, 0), dhout, nr, P, tp_bias_scratch(&m->tpc, nr, P), s);
    matmul_backward_input(m->da, dhout, core_w(m, W_FINAL, 0), nr, D, P, D, 0, s);
    dev_memset(m->dh, 0, (size_t)nr * D * sizeof(floatX), s);
    adaln_grads_begin(&m->adaln, m->dfada, (size_t)B * 2 * D);
    adaln_modulate_backward(&m->adaln, m->dh, m->dfada, m->dfada + D, m->da, m->h_final, m->meanf, m->rstdf, m->fada + D,
                            2 * D, B);
    adaln_grads_finish(&m->adaln, m->dfada, (size_t)B * 2 * D);
    matmul_backward_weight(core_dw(m, W_FADA, 0), m->dfada, m->sc, B, D, 2 * D, D, s);
    bias_backward(core_dw(m, B_FADA, 0), m->dfada, B, 2 * D, NULL, s);
    matmul_backward_input(m->dsc, m->dfada, core_w(m, W_FADA, 0), B, D, 2 * D, D, 0, s);
    }
}

// the micro-batch whose inputs and activations the model uses next (B clips): its slot, one but under --pp
static void dit_select_micro(Dit* m, int micro, int B) {
    size_t slot = (size_t)pipeline_slot(&m->pipe, micro, 0);
    m->micro_cur = micro;
    m->rows_cur = B * m->N;
    flow_slots_select(&m->fs, (int)slot);
    if (m->first_stage) m->xp = m->xp_slots + slot * m->B * m->N * m->P;
}

// the patch embedding of the staged x_t into block 0's input (under sequence parallelism on this rank's
// rows of the replicated patches), and its backward from m->dh
static void patch_embed_forward(Dit* m, int B) {
    int D = m->cfg.D, nr = own_rows(m, B), P = m->P;
    floatX* h0 = ACT(core_layer_acts(m, 0), A_H);
    PROF(&m->prof, "patch embed fwd", gemm_flops(nr, D, P), 0, m->stream) {
        dit_patches(m, m->xp, m->fs.xt, B);
        matmul_forward(h0, m->xp + own_row0(m, B) * P, core_w(m, W_PATCH, 0), nr, P, D, P, 0, m->stream);
        bias_forward(h0, core_w(m, B_PATCH, 0), nr, D, m->stream);
    }
}
static void patch_embed_backward(Dit* m, int B) {
    int D = m->cfg.D, nr = own_rows(m, B), P = m->P;
    PROF(&m->prof, "patch embed bwd", gemm_flops(nr, D, P), 0, m->stream) {
        matmul_backward_weight(core_dw(m, W_PATCH, 0), m->dh, m->xp + own_row0(m, B) * P, nr, P, D, P, m->stream);
        bias_backward(core_dw(m, B_PATCH, 0), m->dh, nr, D, tp_bias_scratch(&m->tpc, nr, D), m->stream);
    }
}

// block l under its parameters' gathering (--zero 3: the gather of block `next` starts meanwhile, -1: none)
static void block_forward(Dit* m, int l, int next, int B, RunMode mode) {
    param_store_layer_begin(&m->st, l, next, 0);
    layer_forward(m, l, B, mode);
    param_store_layer_end(&m->st, l, mode == MODE_TRAIN);
}
// Block l's backward, its bucket's reductions started on the step's last micro-batch. Under --pp
// the forwards of other micro-batches ran since this one's and overwrote the block's adaLN
// vectors: made again (the same launch on the same inputs, the same bits).
static void block_backward(Dit* m, int l, int next, int B, int last) {
    param_store_layer_begin(&m->st, l, next, 1);
    if (m->comm->pp > 1) block_adaln_forward(m, l, B);
    layer_backward(m, l, B);
    param_store_layer_end(&m->st, l, 0);
    param_store_bucket_done(&m->st, l, last);  // its reductions overlap the blocks below
}

// The model in the runner's units (llmc/train/runner.h; one process, no pipeline): 0 the input
// (the conditioning and the patch embedding), 1..L the blocks, L+1 the final layer and the loss,
// whose backward runs with its forward (leaving dL/d h_final in m->dh). Each unit's backward
// adds into the gradients and, on the step's last micro-batch (last = 1), starts its bucket's
// reductions at once. The same pieces in the same order as one chunk of dit_chunk_forward and
// dit_chunk_backward, so both give the same bits.
static void dit_unit_forward(Dit* m, int u, int B, RunMode mode, float dscale) {
    if (u > m->cfg.L) { head_forward_backward(m, B, mode, dscale); return; }
    if (u > 0) { block_forward(m, u - 1, u < m->cfg.L ? u : -1, B, mode); return; }
    m->rows_cur = B * m->N;
    conditioning_forward(m, B, 1);
    if (mode == MODE_TRAIN) offload_before_write(&m->off, core_block(m, 0), m->stream);  // (the patch embedding writes block 0)
    patch_embed_forward(m, B);
}

static void dit_unit_backward(Dit* m, int u, int B, int last) {
    if (u > m->cfg.L) return;  // (the head's ran with its forward)
    if (u > 0) { block_backward(m, u - 1, u - 2, B, last); return; }
    patch_embed_backward(m, B);
    conditioning_backward(m, B);
    param_store_bucket_done(&m->st, m->cfg.L, last);  // (bucket L: the rest, outside the blocks)
}

// The forward of the selected micro-batch (B clips staged: dit_stage_clips) through chunk `chunk` of
// this stage (without --pp: the whole model). The conditioning runs on every stage: each recomputes
// c and silu(c) from the micro-batch's t and y, since every block's adaLN reads them, rather than
// receiving them from the first stage; the conditioning's weights are on every stage (STAGE_EVERY)
// and each stage's part of their gradients is summed over the pipeline at the step's end
// (param_store_pipeline_done). The patch embedding on the model's first piece, the chunk's blocks,
// and on the last piece the final layer and the loss, whose backward runs with them (training),
// leaving dL/d h_final in m->dh and the final layer's part of d silu(c) in m->dsc. Under --pp a
// chunk's input was received into its first block's input field and its output is left in
// h_final to be sent on (llmc/parallel/pipeline.h). The loss's sums: dit_clip_losses, by the caller.
static void dit_chunk_forward(Dit* m, int micro, int chunk, int B, RunMode mode, float dscale) {
    int s = m->comm->pp_rank, l0, l1, ends = pp_last_piece(&m->split, s, chunk);
    dit_select_micro(m, micro, B);
    pp_chunk_layers(&m->split, s, chunk, &l0, &l1);
    conditioning_forward(m, B, ends);
    if (mode == MODE_TRAIN) offload_before_write(&m->off, core_block(m, l0), m->stream);  // (the chunk's input's block)
    if (pp_first_piece(&m->split, s, chunk)) patch_embed_forward(m, B);
    for (int l = l0; l < l1; l++) block_forward(m, l, l + 1 < l1 ? l + 1 : -1, B, mode);
    if (ends) {
        head_forward_backward(m, B, mode, dscale);
        m->head_micro = mode == MODE_TRAIN ? micro : -1;
    }
}

// The backward of chunk `chunk` for micro-batch `micro`, from the gradient at its output (the
// head's, left in m->dh by the forward, on the model's last piece; else received into a recycled buffer: pipeline_output_grad)
// down to its input (m->dh, sent back), or on the first piece through the patch embedding; then
// the conditioning's backward on every stage for the part of d silu(c) its blocks (and the final
// layer) produced. Under --pp the conditioning is computed again first (another micro-batch's
// forward overwrote it) and the rest bucket's reductions wait for param_store_pipeline_done.
// last: this chunk's last backward of the step.
static void dit_chunk_backward(Dit* m, int micro, int chunk, int B, int last) {
    int s = m->comm->pp_rank, l0, l1, ends = pp_last_piece(&m->split, s, chunk);
    dit_select_micro(m, micro, B);
    pp_chunk_layers(&m->split, s, chunk, &l0, &l1);
    core_take_head_grad(m, micro, ends, "m->dh");
    if (m->comm->pp > 1) conditioning_forward(m, B, 0);
    if (!ends) {  // no final layer here: d silu(c) is the blocks' alone
        dev_memcpy_d2d(m->dh, pipeline_output_grad(&m->pipe), (size_t)own_rows(m, B) * m->cfg.D * sizeof(floatX), m->stream);
        dev_memset(m->dsc, 0, (size_t)B * m->cfg.D * sizeof(floatX), m->stream);
    }
    for (int l = l1 - 1; l >= l0; l--) block_backward(m, l, l - 1 >= l0 ? l - 1 : -1, B, last);
    if (pp_first_piece(&m->split, s, chunk)) patch_embed_backward(m, B);
    conditioning_backward(m, B);
    // every chunk adds into the rest (the conditioning); chunk 0's last backward is the stage's last
    param_store_bucket_done(&m->st, m->cfg.L, last && chunk == 0);
}

// where chunk `chunk`'s boundary tensors are for micro-batch `micro` (llmc/parallel/pipeline.h)
static floatX* dit_pp_tensor(Dit* m, int micro, int chunk, int which) {
    return core_pp_tensor(m, micro, chunk, which, m->h_final, m->dh, A_H);
}

// checks a micro-batch of B clips against the plan and stages their times t and classes y (host arrays)
// into the selected micro-batch's slot
static void dit_stage(Dit* m, int B, const float* t, const int* y) {
    if (B < 1 || B > m->B) FAIL("batch of %d clips; the plan holds 1 .. %d", B, m->B);
    if (m->tpc.sp && ((size_t)B * m->N) % m->tpc.tp != 0)
        FAIL("--tp-mode reducescatter: a micro-batch of %d clips (%zu tokens) does not split into %d equal blocks", B,
             (size_t)B * m->N, m->tpc.tp);
    flow_slots_stage(&m->fs, B, t, y, m->stream);
}

// micro-batch `micro`'s clips x0 with noise, t and classes y (host arrays) staged in its slot. Every
// stage reads the micro-batch (under --pp each runs next_batch) and stages what it uses of it
// (llmc/train/flow_slots.h): t and y for the conditioning, x_t on the first, the target on the last.
static void dit_stage_clips(Dit* m, int micro, const float* x0, const float* noise, const float* t, const int* y, int B) {
    dit_select_micro(m, micro, B);
    dit_stage(m, B, t, y);
    flow_slots_stage_clips(&m->fs, B, x0, noise, m->stream);
}

// The squared errors of this rank's rows: to the step's loss (model_core_take_loss reduces
// them over the ranks), or (validation) each clip's mean squared error into per_clip, summed
// over the ranks that hold its rows (the TP group under sequence parallelism, the CP group).
// Only where the loss ran: the last stage under --pp.
static void dit_clip_losses(Dit* m, int B, float* per_clip) {
    double sum = flow_slots_losses(&m->fs, B, m->stream), *sq = m->fs.host_sq_sum;
    if (!per_clip) { model_core_add_loss(m, sum, (double)own_rows(m, B) * m->P); return; }
    own_rows_sum(&m->adaln, sq, B);
    attention_sum_samples(&m->att, sq, B);
    for (int i = 0; i < B; i++) per_clip[i] = (float)sq[i] / (float)m->clip;
}

// A pass of the model over micro-batches held in host arrays (the test program, validation,
// sampling): training, micro-batches of B clips forward and backward, under --pp through the
// stage's schedule; evaluation and sampling, forward only, under --pp through every stage.
typedef struct {
    Dit* m;
    const float *x0, *noise, *t;  // micro-batch j's clips start at clip j * B (x0 NULL: staged by the caller)
    const int* y;
    int B;
    RunMode mode;
    float dscale;                 // 1 / values in the whole step, all ranks
    float* per_clip;              // evaluation: each clip's loss (NULL: the losses to the step's)
    float* vpred;                 // micro-batch j's v_pred at vpred + j * B * clip (NULL: none; the last stage's)
} DitPass;

static void pass_forward(void* ctx, int micro, int chunk) {
    DitPass* p = (DitPass*)ctx;
    Dit* m = p->m;
    size_t k = (size_t)micro * p->B;
    if (chunk == 0 && p->x0) dit_stage_clips(m, micro, p->x0 + k * m->clip, p->noise + k * m->clip, p->t + k, p->y + k, p->B);
    dit_chunk_forward(m, micro, chunk, p->B, p->mode, p->dscale);
    if (!pp_last_piece(&m->split, m->comm->pp_rank, chunk)) return;
    if (p->mode != MODE_SAMPLE) dit_clip_losses(m, p->B, p->per_clip);
    if (p->vpred) dev_download_floats(p->vpred + k * m->clip, m->vpred, (size_t)p->B * m->clip);
}
static void pass_backward(void* ctx, int micro, int chunk, int last) {
    DitPass* p = (DitPass*)ctx;
    dit_chunk_backward(p->m, micro, chunk, p->B, last);
}
static floatX* pass_tensor(void* ctx, int micro, int chunk, int which) {
    return dit_pp_tensor(((DitPass*)ctx)->m, micro, chunk, which);
}

static void dit_pass(DitPass* p, int n_micro) {
    PpHooks h = {p, pass_forward, pass_backward, pass_tensor};
    model_core_pass(p->m, &h, n_micro, p->mode == MODE_TRAIN);
}

// each clip's loss of one batch in eval mode (validation): under --pp the last stage's, to every stage
// (each then sums the same numbers over its gradient group: llmc/train/flow_batch.h)
static void dit_evaluate(Dit* m, const float* x0, const float* noise, const float* t, const int* y, int B, float* per_clip) {
    DitPass p = {m, x0, noise, t, y, B, MODE_EVAL, 0.0f, per_clip, NULL};
    dit_pass(&p, 1);
    comm_host_broadcast(m->comm, GROUP_PP, per_clip, (size_t)B * sizeof(float), m->comm->pp - 1);
}

// v_pred for x_t at times t and classes y (host arrays): the model behind llmc/train/clip_sampler.h's
// samples. Under --pp the last stage's prediction goes to every stage, each of which then takes the
// same sampler step.
static void dit_velocity(void* model, const float* xt, const float* t, const int* y, int B, float* v) {
    Dit* m = (Dit*)model;
    dit_select_micro(m, 0, B);
    dit_stage(m, B, t, y);
    if (m->first_stage) dev_upload_floats(m->fs.xt, xt, (size_t)B * m->clip);
    DitPass p = {m, NULL, NULL, NULL, NULL, B, MODE_SAMPLE, 0.0f, NULL, NULL};
    dit_pass(&p, 1);
    if (m->last_stage) {
        stream_synchronize(m->stream);
        dev_download_floats(v, m->vpred, (size_t)B * m->clip);
    }
    comm_host_broadcast(m->comm, GROUP_PP, v, (size_t)B * m->clip * sizeof(float), m->comm->pp - 1);
}
// ----------------------------------------------------------------------------
// checkpoints (docs/formats.md): header, fp32 parameters, AdamW m and v, written and read by
// the runner (llmc/train/runner.h, state_checkpoint.h: atomic, checksummed). The data order and every random draw are
// functions of (seed, step), so nothing else is needed to continue bit-exactly.

static const CkptFormat DIT_CKPT = {"train_dit", 20261126, 1, /*step*/ 14, /*params*/ 15, /*extra*/ -1, /*dp*/ -1};

static const char* dit_checkpoint_check(const char* path, void* ci) { return ckpt_state_header(path, &DIT_CKPT, (CkptInfo*)ci); }

// ----------------------------------------------------------------------------
// the trainer (left out of test_dit, which includes this file with TESTING): the model's
// flags and its operations for the runner (llmc/train/runner.h), which does the rest
#ifndef TESTING

typedef struct {
    RunArgs run;  // what every trainer has: loop, memory, parallel, --fit-memory, batch (llmc/train/train_args.h)
    DitConfig cfg;
    int val_clips, sample_steps, sample_clips, gif_scale;
    float cfg_scale, label_dropout;
    const char* data;
} TrainArgs;

typedef struct {
    TrainArgs a;
    Dit m;
    FlowData data;  // the clips, their batches and the validation (llmc/train/flow_batch.h)
    ClipSampler smp;
    float dscale;   // 1 / (the values of a step over all ranks)
} Trainer;

static void usage(const Flag* flags, int n) {
    printf("usage: train_dit [--flag value]...\n\n");
    flags_print(flags, n);
    printf("\nmodels:");
    for (int i = 0; i < NUM_DIT_PRESETS; i++) {
        const DitConfig* c = &DIT_PRESETS[i].cfg;
        printf("\n  %-12s D=%d L=%d H=%d FF=%d, clip %dx%dx%dx%d, patch %dx%dx%d (%d tokens): %s", DIT_PRESETS[i].name,
               c->D, c->L, c->H, c->FF, c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, dit_tokens(c), DIT_PRESETS[i].note);
    }
    printf("\n");
}

static void parse_args(int argc, char** argv, TrainArgs* a) {
    *a = TrainArgs();  // zeroed (value-initialised: Flag has a default member)
    RunArgs* r = &a->run;
    r->loop.model = flag_peek(argc, argv, "model") ? flag_peek(argc, argv, "model") : "dit-tiny";
    a->cfg = DIT_PRESETS[flag_preset(DIT_PRESETS, sizeof(DIT_PRESETS[0]), NUM_DIT_PRESETS, r->loop.model)].cfg;
    r->mem = memory_flags_default();
    train_loop_defaults(&r->loop, "runs/train_dit", 300, 0.0f, 0.999f);
    r->B = 8; a->val_clips = 48; a->sample_steps = 24; a->sample_clips = 1; a->gif_scale = 4; a->cfg_scale = 3.0f;
    a->label_dropout = 0.1f; a->data = "synthetic";  // (the rest: 0)
    const Flag own[] = {
        {"model", 's', &r->loop.model, "dit-tiny | dit-S | dit-B | dit-XL | hunyuan-13B (default dit-tiny)"},
        {"channels", 'i', &a->cfg.C, "clip channels C (overrides the preset)"},
        {"frames", 'i', &a->cfg.Fr, "clip frames Fr"},
        {"height", 'i', &a->cfg.Hi, "clip height Hi"},
        {"width", 'i', &a->cfg.Wi, "clip width Wi"},
        {"pt", 'i', &a->cfg.pt, "patch size along frames"},
        {"ph", 'i', &a->cfg.ph, "patch size along height"},
        {"pw", 'i', &a->cfg.pw, "patch size along width"},
        {"D", 'i', &a->cfg.D, "model width"},
        {"L", 'i', &a->cfg.L, "blocks"},
        {"H", 'i', &a->cfg.H, "attention heads"},
        {"FF", 'i', &a->cfg.FF, "FFN hidden size"},
        {"NC", 'i', &a->cfg.NC, "classes (the null class is added)"},
        {"rope-theta", 'f', &a->cfg.rope_theta, "3-D RoPE base"},
        {"data", 's', &a->data, "'synthetic' (moving digits, generated) or a clip file (docs/formats.md)"},
        {"batch", 'i', &r->B, "clips per micro-batch per rank (default 8)"},
        {"total-batch", 'i', &r->total_batch, "clips per optimizer step over all ranks; a multiple of batch*dp (default batch*dp)"},
        {"grad-accum", 'i', &r->grad_accum, "micro-batches per optimizer step: --total-batch = batch*dp*grad-accum (default 1)"},
        {"label-dropout", 'f', &a->label_dropout, "probability that a clip's class becomes the null class (default 0.1)"},
        {"val-clips", 'i', &a->val_clips, "held-out (clip, t, noise) triples per validation (default 48)"},
        {"sample-every", 'i', &r->sample_every, "write one GIF per class every N steps and at the end, 0 = never"},
        {"sample-steps", 'i', &a->sample_steps, "Euler steps of the sampler (default 24)"},
        {"sample-clips", 'i', &a->sample_clips, "clips sampled per class (default 1; all go to samples/step_N.clips, "
                                                "which scripts/dit_digits.py scores)"},
        {"cfg-scale", 'f', &a->cfg_scale, "classifier-free guidance scale of the samples (default 3)"},
        {"gif-scale", 'i', &a->gif_scale, "pixels per clip pixel in the GIFs and PNGs (default 4)"},
        {"save-init", 'i', &r->save_init, "1: write the initial weights as ckpt_000000.bin (scripts/pytorch_dit.py --init-from)"},
    };
    train_flags_parse(argc, argv, own, (int)(sizeof(own) / sizeof(own[0])), r, "tensor-parallel group size: consecutive "
                      "ranks; must divide the ranks and H (default 1)", "context-parallel group size: each rank holds "
                      "1/cp of every clip's tokens; tp x cp must divide the ranks (default 1)", 0,
                      "0 keep all, 1 recompute norms, normed q/k and GELU, 2 keep only block inputs", usage);
    if (!a->data[0]) FAIL("--data must be 'synthetic' or a clip file (got an empty string)");  // even for --plan-only
}

static void print_config(void* t, Logger* lg) {
    const TrainArgs* a = &((Trainer*)t)->a;
    const Dit* m = &((Trainer*)t)->m;
    const TrainLoopArgs* l = &a->run.loop;
    const DitConfig* c = &m->cfg;
    logf_(lg, "model: D=%d L=%d H=%d (hd %d) FF=%d NC=%d rope_theta=%g | clip C=%d Fr=%d Hi=%d Wi=%d, patch %dx%dx%d: "
          "N=%d tokens of P=%d | %.2fM parameters\n", c->D, c->L, c->H, c->D / c->H, c->FF, c->NC, c->rope_theta, c->C,
          c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, m->Nt, m->P, m->num_params / 1e6);
    logf_(lg, "batch: %d clips x %d micro-steps x %d DP ranks = %d clips (%d tokens) per step | steps %d, lr %g warmup %d, "
          "wd %g, clip %g | label dropout %g\n", a->run.B, a->run.grad_accum, m->comm->dp, a->run.total_batch,
          a->run.total_batch * m->Nt, l->steps, l->lr, l->warmup, l->weight_decay, l->grad_clip, a->label_dropout);
    char cp[160], pp[160] = "";
    attention_describe_cp(&m->att, cp, sizeof(cp), m->N, "a clip");
    if (m->comm->pp > 1)  // (this rank's stage: its blocks and the micro-batches it holds at once)
        snprintf(pp, sizeof(pp), "pp %d (--pp-schedule %s --pp-virtual %d: stage %d, %d blocks, %d micro-batch slots) x ",
                 m->comm->pp, PP_SCHEDULE_NAMES[a->run.par.pp_schedule], a->run.par.pp_virtual, m->comm->pp_rank,
                 m->act_layers, m->pipe.slots);
    logf_(lg, "parallel: world %d = dp %d x %s%stp %d (--tp-mode %s --tp-recompute-allgather %d: %d heads, %d FFN units, %d of "
          "%d tokens per micro-batch on this rank) | --zero %d --offload-optim %d | --fp32-grad-accum %d | comm %s, timeout %g s\n",
          m->comm->size, m->comm->dp, pp, cp, m->comm->tp, TP_MODE_NAMES[a->run.par.tp_mode], a->run.par.tp_regather, m->sh.Hl,
          m->sh.Fl, own_rows(m, m->B), m->B * m->Nt, m->par.zero, m->par.offload_optim, m->par.grad_fp32,
          comm_backend_name(m->comm), a->run.par.comm_timeout);
    log_memory_flags(lg, &m->flags, m->off.layers_offloaded, "blocks", 0, NULL);
}

// What one step sends, by the count of llmc/parallel/comm.h: TP's collectives per block and
// micro-step in each mode (the all-reduces of allreduce mode; the gathers, reduce-scatters
// and adaLN sums of sequence parallelism), with what --recompute 2 and the FFN chunks add,
// and the once-a-step sums of the replicated tensors (derived in docs/memory.md 9.8); then
// the attention's CP exchanges and data parallelism's buckets.
static CommBytes comm_bytes(void* t) {
    const Dit* m = &((Trainer*)t)->m;
    CommBytes cb = {};
    const DitConfig* c = &m->cfg;
    // (under --pp this stage's: its blocks, the patch embedding on the first, the final layer on the last)
    double sx = sizeof(floatX), D = c->D, L = m->act_layers, P = m->P, hd = (double)c->D / c->H, B = m->B;
    double first = m->first_stage, last = m->last_stage;
    double per = m->st.zero >= 2 ? m->micro_steps : 1;  // a block's replicated gradients: summed every micro-step under --zero 2, 3
    if (m->comm->tp > 1 && !m->tpc.sp) {
        double S = B * m->N * D * sx, chunked = m->flags.ffn_chunks > 1;
        double per_block = 4 + (m->flags.recompute >= 2) * (1 + !chunked);
        if (chunked) per_block += m->flags.ffn_chunk_seq ? 1 : ffn_chunk_count(&m->fc, m->B, m->N);
        comm_bytes_add(&cb, m->comm, GROUP_TP, KIND_ALL_REDUCE, m->micro_steps * L * per_block * S);
        comm_bytes_add(&cb, m->comm, GROUP_TP, KIND_ALL_REDUCE, per * 2.0 * L * hd * sx);
    } else if (m->comm->tp > 1) {
        double S = B * m->N * D * sx, re2 = m->flags.recompute >= 2, regather = !m->tpc.keep_gathered;
        comm_bytes_add(&cb, m->comm, GROUP_TP, KIND_ALL_GATHER, m->micro_steps * L * (4 + 2 * regather + 2 * re2) * S);
        comm_bytes_add(&cb, m->comm, GROUP_TP, KIND_REDUCE_SCATTER, m->micro_steps * L * (4 + 2 * re2) * S);
        comm_bytes_add(&cb, m->comm, GROUP_TP, KIND_ALL_REDUCE, m->micro_steps * (L * 6 + 2 * last) * B * D * sx);
        comm_bytes_add(&cb, m->comm, GROUP_TP, KIND_ALL_REDUCE,
                       ((first + last) * D * P + first * D + last * P + per * (2 * L * D + 2 * L * hd)) * sx);
    }
    model_core_comm_bytes(m, &cb, m->B);  // context, data and pipeline parallelism (llmc/train/model_core.h)
    return cb;
}

static int plan_json(void* t, char* out, size_t n) {
    const Dit* m = &((Trainer*)t)->m;
    snprintf(out, n, "\"N\": %d, \"P\": %d, \"dp\": %d, \"tp\": %d, \"tp_sp\": %d, \"keep_gathered\": %d, "
             "\"zero\": %d, \"offload_optim\": %d, \"grad_fp32\": %d, \"cp\": %d, \"cp_ulysses\": %d, \"n_local\": %zu, "
             "\"n_opt\": %zu", m->N, m->P, m->comm->dp, m->comm->tp, m->tpc.sp, m->tpc.keep_gathered, m->par.zero,
             m->par.offload_optim, m->par.grad_fp32, m->comm->cp, m->comm->ulysses, m->st.lay.n_local, m->st.lay.n_opt);
    return m->comm->cp > 1;
}

// a block's saved activations under flags f at N tokens a clip (llmc/train/run_log.h's table)
static size_t block_act_bytes(const void* t, const MemoryFlags* f, size_t N) {
    const Trainer* x = (const Trainer*)t;
    return dit_act_plan(&x->a.cfg, &x->m.sh, &x->m.tpc, x->a.run.B, N, f).block_bytes;
}

static void plan_only_lines(void* t, Logger* lg) {
    const Trainer* x = (const Trainer*)t;
    const DitConfig* c = &x->a.cfg;
    log_activation_table(lg, "block", "clip", c->L, x->a.run.B, dit_tokens(c), block_act_bytes, x);
    logf_(lg, "the FFN intermediate (u and g, 2 x FF) against its input (a2, D): %.1fx; --ffn-chunks K keeps only the "
          "input and holds 1/K of the intermediate at a time\n", 2.0 * c->FF / c->D);
}

// ----------------------------------------------------------------------------
// --fit-memory and every rank's plan (llmc/train/runner.h): a candidate's memory is its plan
// (dit_build without allocating); its cost the predicted extra time per micro-step
// (docs/memory.md 9.9): recomputed FLOPs (--recompute 2: the attention half; it or chunks:
// the FFN) and memory traffic (the modulated and QK norms, RoPE, GELU), the extra launches,
// and the part of each offload copy the neighbouring block cannot hide.
static double dit_fit_cost_seconds(const Dit* m, const CostModel* cm) {
    const DitConfig* c = &m->cfg;
    const MemoryFlags* f = &m->flags;
    double BN = (double)m->B * m->N, D = c->D, hd = (double)c->D / c->H, Dl = m->sh.Hl * hd, FFl = m->sh.Fl;
    double sx = sizeof(floatX), L = c->L;
    double attn_fwd = 2.0 * BN * 4.0 * Dl * D + 4.0 * m->B * m->sh.Hl * (double)m->N * m->N * hd;  // qkv, proj, attention
    double ffn_fwd = 2.0 * 2.0 * BN * D * FFl;                                                  // fc1 and fc2
    int K = f->ffn_chunks;
    FitRecompute w = {attn_fwd, ffn_fwd, (2.0 * 2.0 * BN * D + 4.0 * BN * Dl) * sx,  // two modulated norms, q and k
                      2.0 * BN * FFl * sx,                                        // GELU: read u, write g
                      L * (K - 1) * 12.0 + (K > 1 ? L * K * 5.0 : 0.0),           // per extra chunk; the chunk recompute
                      attn_fwd + ffn_fwd};
    return fit_recompute_seconds(&w, f, (int)L, m->off.layers_offloaded, m->acts.block_bytes, cm);
}

static FitCost plan_cost(void* t, Comm* comm, const FitFlags* ff, const CostModel* cm) {
    const TrainArgs* a = &((Trainer*)t)->a;
    int B = ff->B;
    const MemoryFlags* f = &ff->mem;
    FitCost c = {-1.0, 0.0, 0.0, 0, 0.0, 0.0};
    TpShard sh = dit_shard(&a->cfg, comm->tp, comm->tp_rank);
    if (f->ffn_chunks > (f->ffn_chunk_seq ? dit_tokens(&a->cfg) : sh.Fl)) return c;
    int dp = comm->dp, micro = a->run.total_batch ? a->run.total_batch / (B * dp) : 1;
    ParallelFlags par = fit_parallel_flags(&a->run.par, 0, micro, ff);
    if (comm->tp > 1 && par.tp_sp && ((size_t)B * dit_tokens(&a->cfg)) % comm->tp) return c;  // rows do not split
    Dit m;
    dit_build(&m, &a->cfg, f, &par, comm, B, 0);
    m.micro_steps = micro;
    // the flag-free micro-step: 6 FLOPs per parameter and token, and the attention's 12 L N^2 D per clip
    c = model_core_fit_cost(&m, dit_fit_cost_seconds(&m, cm),
                            (6.0 * m.num_params * m.N + 12.0 * a->cfg.L * (double)m.N * m.N * a->cfg.D) * B / cm->flops, cm);
    dit_free(&m);
    return c;
}

// ----------------------------------------------------------------------------
// the runner's operations

static ModelCore* build(void* t, Comm* comm, const MemoryFlags* mem, const ParallelFlags* pf, int B, int allocate) {
    dit_build(&((Trainer*)t)->m, &((Trainer*)t)->a.cfg, mem, pf, comm, B, allocate);
    return &((Trainer*)t)->m;
}

static void model_free(void* t) { dit_free(&((Trainer*)t)->m); }
static void init_params(void* t, uint64_t seed) { dit_init_params(&((Trainer*)t)->m, seed); }

static CkptShape ckpt_shape(void* t) {
    const DitConfig* c = &((Trainer*)t)->a.cfg;
    CkptShape s = {12, 1, {"C", "frames", "height", "width", "pt", "ph", "pw", "D", "L", "H", "FF", "NC"},
                   {c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, c->D, c->L, c->H, c->FF, c->NC}, {"rope_theta"},
                   {c->rope_theta}, "pass the checkpoint's model and clip dimensions"};
    return s;
}

static int resolve_batch(void* t, Comm* comm) {
    TrainArgs* a = &((Trainer*)t)->a;
    return flow_batch_resolve(&a->run, comm, dit_tokens(&a->cfg), a->val_clips, a->cfg.NC);
}

static void prepare(void* t, Comm*) {
    const TrainArgs* a = &((Trainer*)t)->a;
    flow_data_open(&((Trainer*)t)->data, a->data, a->cfg.C, a->cfg.Fr, a->cfg.Hi, a->cfg.Wi, a->cfg.NC, a->val_clips,
                   (uint64_t)a->run.loop.seed);
}

static void start(void* t, Comm* comm, Logger* lg) {
    Trainer* x = (Trainer*)t;
    const TrainArgs* a = &x->a;
    flow_data_start(&x->data, a->data, &a->run, comm, x->m.clip, a->label_dropout, lg);
    // every block's forward gathers over DP. (Under --pp the stages of a pipeline share their DP
    // index, so they run the same validation batches, the same forwards through the pipeline.)
    x->data.lockstep = x->m.st.zero >= 3;
    clip_sampler_init(&x->smp, a->run.sample_every > 0 ? a->sample_clips : 0, a->cfg.NC, a->cfg.C, a->cfg.Fr, a->cfg.Hi,
                      a->cfg.Wi, a->run.B, a->sample_steps, a->cfg_scale, a->gif_scale, (uint64_t)a->run.loop.seed);
    x->dscale = 1.0f / (float)((double)a->run.total_batch * x->m.clip);
}

static void next_batch(void* t, int step, int micro) { flow_data_next(&((Trainer*)t)->data, step, micro); }

// the step's micro-batch unit by unit, as full sharding will run it (the runner's units; one process)
static int units(void* t) { return ((Trainer*)t)->m.cfg.L + 2; }
static void unit_forward(void* t, int u) {
    Trainer* x = (Trainer*)t;
    FlowBatch* b = &x->data.batch;
    if (u == 0) dit_stage_clips(&x->m, 0, b->x0, b->noise, b->t, b->y, x->a.run.B);
    dit_unit_forward(&x->m, u, x->a.run.B, MODE_TRAIN, x->dscale);
}
static void unit_backward(void* t, int u, int last) {
    Trainer* x = (Trainer*)t;
    dit_unit_backward(&x->m, u, x->a.run.B, last);
    if (u == 0) dit_clip_losses(&x->m, x->a.run.B, NULL);
}

// --pp: the step's micro-batch through a chunk of the stage, as its schedule orders them (the
// runner's forward, backward and pp_tensor entries); next_batch read it on every stage before
// its chunk 0 forward, which stages it (dit_stage_clips: what each stage takes of it)
static void forward(void* t, int micro, int chunk) {
    Trainer* x = (Trainer*)t;
    FlowBatch* b = &x->data.batch;
    int B = x->a.run.B;
    if (chunk == 0) dit_stage_clips(&x->m, micro, b->x0, b->noise, b->t, b->y, B);
    dit_chunk_forward(&x->m, micro, chunk, B, MODE_TRAIN, x->dscale);
    if (pp_last_piece(&x->m.split, x->m.comm->pp_rank, chunk)) dit_clip_losses(&x->m, B, NULL);
}
static void backward(void* t, int micro, int chunk, int last) {
    Trainer* x = (Trainer*)t;
    dit_chunk_backward(&x->m, micro, chunk, x->a.run.B, last);
}
static floatX* pp_tensor(void* t, int micro, int chunk, int which) { return dit_pp_tensor(&((Trainer*)t)->m, micro, chunk, which); }

// the model behind llmc/train/flow_batch.h's validation
static void clip_losses(void* m, const FlowBatch* b, float* per_clip) {
    dit_evaluate((Dit*)m, b->x0, b->noise, b->t, b->y, b->B, per_clip);
}
static void validate(void* t, Logger* lg, int step, int final) { flow_data_validate(&((Trainer*)t)->data, lg, step, final, clip_losses, &((Trainer*)t)->m); }
static void val_metrics(void* t, Logger* lg) { flow_data_val_metrics(&((Trainer*)t)->data, lg); }


static void sample(void* t, Logger* lg, int step) {
    Trainer* x = (Trainer*)t;
    clip_sample(&x->smp, lg, x->a.run.loop.run_dir, x->m.comm->rank, step, dit_velocity, &x->m);
}

static void finish(void* t) {
    flow_data_free(&((Trainer*)t)->data);
    clip_sampler_free(&((Trainer*)t)->smp);
}

static const ModelOps DIT_OPS = {
    // program, plan unit, what --init-from starts afresh, what --total-batch counts, the data flag,
    // --fit-memory's batches (this build: 128 clips at most)
    "train_dit", "block", "optimizer state and step", "clips", "data", 64, 128,
    // the model and its checkpoints
    build, model_free, init_params, &DIT_CKPT, ckpt_shape, NULL, NULL, NULL, dit_checkpoint_check,
    // a step (next_batch; units, unit_forward/backward; forward, backward; fused; the pipeline's tensors)
    next_batch, units, unit_forward, unit_backward, forward, backward, NULL, pp_tensor,
    // the trainer's own: batch, data, validation, samples
    resolve_batch, prepare, start, validate, val_metrics, sample, finish,
    // the plan and --fit-memory
    print_config, NULL, plan_only_lines, comm_bytes, plan_json, plan_cost,
};

int main(int argc, char** argv) {
    signals_install();  // first: a signal may come at any instant, MPI's start-up included (llmc/core/signals.h)
    static Trainer x;
    TrainArgs* a = &x.a;
    parse_args(argc, argv, a);
    dit_config_validate(&a->cfg);
    attention_select(attention_impl_parse(a->run.loop.attention), a->cfg.D / a->cfg.H, 0);  // full
    if (a->run.B > 128) FAIL("--batch %d: at most 128 clips per micro-batch in this build", a->run.B);
    clip_sampler_check_scale(a->cfg.C, a->cfg.Fr, a->cfg.Hi, a->cfg.Wi, a->gif_scale);
    return runner_main(&DIT_OPS, &x, &a->run, 1, a->cfg.L);
}
#endif  // TESTING
