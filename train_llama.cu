/*
train_llama: trains a Llama-style language model, in one file of host code: the model's
presets, tensor and activation tables, its forward, backward and update, and the table of
operations that llmc/train/runner.h drives (the step loop, plans, checkpoints, logs).

The same file builds two programs (docs/design.md 3): nvcc makes the CUDA trainer, and
g++ -x c++ -fopenmp -DLLMC_CPU makes the CPU one, which runs the exact same
orchestration with the CPU twins of the kernels. It has no kernels of its own.

Every memory technique and every parallel layout is a flag that leaves the mathematics
unchanged (--help lists them; docs/design.md walks them to the code): the FFN, the head's
cross-entropy and the saved activations in chunks, on the host or recomputed; data,
tensor (with sequence parallelism) and context parallelism, ZeRO-1 and the vocabulary
sharded. World = dp x cp x tp (llmc/parallel/comm.h). Every buffer is planned before the
loop (--plan-only prints it, for any --dp --tp --cp); nothing is allocated inside it.
*/
#include "llmc/train/runner.h"            // the runner, and the model core, checkpoints, plans and logs it drives
#include "llmc/train/ffn_chunks.h"        // --ffn-chunks: the chunks' geometry
#include "llmc/parallel/linear.h"         // column- and row-parallel linears: TP, sequence parallelism, recycled buffers
#include "llmc/parallel/attention_op.h"   // attention: --cp (each rank holds 1/cp of every sample's tokens), RoPE
#include "llmc/parallel/vocab_parallel.h" // --shard-vocab: the embedding and output split over the vocabulary
#include "llmc/kernels/rope3d.h"          // the RoPE angle table
#include "llmc/train/token_data.h"        // token shards: the global batch, validation, the data order
#include "llmc/train/story_sampler.h"     // --sample-every: stories decoded with a llama2.c tokenizer

// ----------------------------------------------------------------------------
// model configuration (docs/design.md 5.2)

typedef struct {
    int V, D, L, H, KV, F, max_seq_len, tied;
    float rope_theta, norm_eps;
} LlamaConfig;

typedef struct {
    const char* name;
    LlamaConfig cfg;
} ModelPreset;

// Published shapes. The stories* models are llama2.c's (FFN hidden = 2/3 * 4D rounded
// up to a multiple of 32, embeddings tied; stories260K rounds to a multiple of 4 and
// needs a 512-piece tokenizer: data/prepare_tinystories.py --vocab-size 512); "tiny" is ours, sized so that the CPU
// build shows a falling TinyStories loss in minutes; so is "stories800K", stories260K's tokenizer
// at dim 128, 4 layers, 4 heads, 2 kv heads: the CPU make tinystories' model, of the shapes
// tried the lowest validation loss in 10 minutes of 2 cores (docs/results/cpu_tinystories_800K.md).
static const ModelPreset MODEL_PRESETS[] = {
    {"tiny",        {32000, 64, 4, 4, 2, 176, 256, 1, 10000.0f, 1e-5f}},
    {"stories260K", {512, 64, 5, 8, 4, 172, 512, 1, 10000.0f, 1e-5f}},
    {"stories800K", {512, 128, 4, 4, 2, 344, 512, 1, 10000.0f, 1e-5f}},
    {"stories15M",  {32000, 288, 6, 6, 6, 768, 256, 1, 10000.0f, 1e-5f}},
    {"stories42M",  {32000, 512, 8, 8, 8, 1376, 1024, 1, 10000.0f, 1e-5f}},
    {"stories110M", {32000, 768, 12, 12, 12, 2048, 1024, 1, 10000.0f, 1e-5f}},
    {"llama3-1B",   {128256, 2048, 16, 32, 8, 8192, 8192, 1, 500000.0f, 1e-5f}},
    // Llama 3 8B and 70B (Meta's published configs: untied, GQA with 8 kv heads), for
    // memory plans at scale with --plan-only (docs/memory.md)
    {"llama3-8B",   {128256, 4096, 32, 32, 8, 14336, 8192, 0, 500000.0f, 1e-5f}},
    {"llama3-70B",  {128256, 8192, 80, 64, 8, 28672, 8192, 0, 500000.0f, 1e-5f}},
};
#define NUM_MODEL_PRESETS ((int)(sizeof(MODEL_PRESETS) / sizeof(MODEL_PRESETS[0])))

// the checks every config must pass, with the reason when it does not
static void config_validate(const LlamaConfig* c) {
    if (c->V < 2 || c->D < 1 || c->L < 1 || c->H < 1 || c->KV < 1 || c->F < 1 || c->max_seq_len < 1)
        FAIL("config: every dimension must be positive (V=%d D=%d L=%d H=%d KV=%d F=%d max_seq_len=%d)", c->V, c->D,
             c->L, c->H, c->KV, c->F, c->max_seq_len);
    if (c->D % c->H != 0) FAIL("config: D=%d is not divisible by the number of heads H=%d", c->D, c->H);
    if (c->H % c->KV != 0) FAIL("config: H=%d is not divisible by the number of kv heads KV=%d (GQA groups)", c->H, c->KV);
    if ((c->D / c->H) % 2 != 0) FAIL("config: head dim D/H=%d must be even (RoPE rotates pairs)", c->D / c->H);
    if (!(c->rope_theta > 0.0f) || !isfinite(c->rope_theta)) FAIL("config: rope theta must be > 0 and finite (got %g)", c->rope_theta);
    if (!(c->norm_eps > 0.0f) || !isfinite(c->norm_eps)) FAIL("config: norm eps must be > 0 and finite (got %g)", c->norm_eps);
    // every tensor within 2^31 - 1 elements, checked in 64 bits (a flag or a file header can ask for more)
    int64_t prods[4] = {(int64_t)c->V * c->D, (int64_t)c->F * c->D, (int64_t)c->D * c->D, (int64_t)c->max_seq_len * c->D};
    const char* what[4] = {"V x D (embedding)", "F x D (FFN)", "D x D (attention)", "max_seq_len x D (RoPE table)"};
    for (int i = 0; i < 4; i++)
        if (prods[i] > 2147483647)
            FAIL("config: %s = %lld elements exceeds 2^31 - 1 (V=%d D=%d F=%d max_seq_len=%d)", what[i],
                 (long long)prods[i], c->V, c->D, c->F, c->max_seq_len);
}

// ----------------------------------------------------------------------------
// parameters, tensor-major in the order of docs/design.md 5.2

enum { P_EMB, P_ATTN_NORM, P_WQ, P_WK, P_WV, P_WO, P_FFN_NORM, P_W1, P_W2, P_W3, P_NORM, P_OUT, NUM_PARAM_TENSORS };

// ----------------------------------------------------------------------------
// tensor parallelism: what each rank of a TP group holds (Megatron-LM's split)
//
// Column-parallel wq, wk, wv (rank r: query heads [r*H/tp, (r+1)*H/tp) and kv heads
// [r*KV/tp, ...), so each GQA group stays on one rank) and w1, w3 (hidden units
// [f0, f0 + Fl): F need not divide by tp, parts differ by at most one). Row-parallel wo
// and w2 (the matching columns). Norm weights are replicated. With --shard-vocab 1 the
// embedding and the output projection are split over the vocabulary (llmc/parallel/param_layout.h).

static TpShard llama_shard(const LlamaConfig* c, int tp, int r) { return tp_shard(c->H, c->KV, c->F, "F", tp, r); }

// The tensor table: shapes, TP splits (heads cut in whole heads of hd rows or columns),
// weight decay on the 2-D tensors only. Its order is the reference layout's.
static void llama_param_specs(const LlamaConfig* c, ParamSpec s[NUM_PARAM_TENSORS]) {
    size_t V = c->V, D = c->D, F = c->F, hd = c->D / c->H, qd = c->H * hd, kvd = c->KV * hd;
    const ParamSpec table[NUM_PARAM_TENSORS] = {
        {"tok_embeddings", 0, V, D, PARAM_VOCAB, 1, 1, 1, 0, c->tied ? STAGE_ENDS : STAGE_FIRST},
        {"attn_norm", 1, D, 1, PARAM_REPLICATED, 1, 1, 0, 0, 0},
        {"wq", 1, qd, D, PARAM_SPLIT_ROWS, hd, 1, 1, 0, 0},
        {"wk", 1, kvd, D, PARAM_SPLIT_ROWS, hd, 1, 1, 0, 0},
        {"wv", 1, kvd, D, PARAM_SPLIT_ROWS, hd, 1, 1, 0, 0},
        {"wo", 1, D, qd, PARAM_SPLIT_COLS, hd, 1, 1, 0, 0},
        {"ffn_norm", 1, D, 1, PARAM_REPLICATED, 1, 1, 0, 0, 0},
        {"w1", 1, F, D, PARAM_SPLIT_ROWS, 1, 1, 1, 0, 0},
        {"w2", 1, D, F, PARAM_SPLIT_COLS, 1, 1, 1, 0, 0},
        {"w3", 1, F, D, PARAM_SPLIT_ROWS, 1, 1, 1, 0, 0},
        {"norm", 0, D, 1, PARAM_REPLICATED, 1, 1, 0, 0, STAGE_LAST},
        {"output", 0, c->tied ? 0 : V, D, PARAM_VOCAB, 1, 1, 1, 0, STAGE_LAST},
    };
    memcpy(s, table, sizeof(table));
}

// ----------------------------------------------------------------------------
// activations. What one layer keeps for backward, field by field; the fields a
// flag drops are computed into the shared work buffer instead (and recomputed).
// Under tensor parallelism each rank holds its heads and hidden units; with sequence
// parallelism (--tp-mode reducescatter) the residual stream, the norms and what they
// save hold this rank's B*T/tp rows ("own rows"), and the column-parallel GEMMs read
// the norm outputs all-gathered to all B*T rows.

enum {
    A_X,      // layer input, the residual stream             [rows, D]
    A_RSTD1,  // 1/rms of x                                   [rows] fp32
    A_XN1,    // attn_norm(x)                                 [rows, D]
    A_Q,      // queries after RoPE (before it: --attention tc) [BT, Hl*hd]
    A_K,      // keys after RoPE (before it: --attention tc)    [BT, KVl*hd]
    A_V,      // values                                       [BT, KVl*hd]
    A_ATT,    // attention output, before wo                  [BT, Hl*hd]
    A_LSE,    // log-sum-exp of each attention row            [B, Hl, T] fp32
    A_XMID,   // x + attention                                [rows, D]
    A_RSTD2,  // 1/rms of xmid                                [rows] fp32
    A_XN2,    // ffn_norm(xmid), the FFN input                [rows, D]
    A_H1,     // w1 xn2                                       [BT, Fl]
    A_H3,     // w3 xn2                                       [BT, Fl]
    A_G,      // silu(h1) * h3                                [BT, Fl]
    A_XN1G,   // xn1 all-gathered, kept (--tp-recompute-allgather 0)  [BT, D]
    A_XN2G,   // xn2 all-gathered, kept (--tp-recompute-allgather 0)  [BT, D]
    NUM_ACT_FIELDS
};
[[maybe_unused]] static const char* ACT_NAMES[NUM_ACT_FIELDS] = {"x", "rstd1", "xn1", "q", "k", "v", "att", "lse",
                                                "xmid", "rstd2", "xn2", "h1", "h3", "g", "xn1 gathered", "xn2 gathered"};

static size_t act_field_bytes(const LlamaConfig* c, const TpShard* t, const TpContext* tpc, int B, int T, int field) {
    size_t BT = (size_t)B * T, hd = c->D / c->H, rows = tp_own_rows(tpc, (int)BT);
    switch (field) {
        case A_X: case A_XMID: return rows * c->D * sizeof(floatX);
        case A_XN1: case A_XN2: return tpc->keep_gathered ? 0 : rows * c->D * sizeof(floatX);  // then a view of the gathered copy
        case A_XN1G: case A_XN2G: return tpc->keep_gathered ? BT * c->D * sizeof(floatX) : 0;
        case A_RSTD1: case A_RSTD2: return rows * sizeof(float);
        case A_Q: case A_ATT: return BT * t->Hl * hd * sizeof(floatX);
        case A_K: case A_V: return BT * t->KVl * hd * sizeof(floatX);
        case A_LSE: return BT * t->Hl * sizeof(float);
        default: return BT * t->Fl * sizeof(floatX);  // A_H1, A_H3, A_G
    }
}

// the one place that says where each field of a layer lives under the flags
static ActHome act_field_home(const MemoryFlags* f, int field) {
    int ffn_inner = field == A_H1 || field == A_H3 || field == A_G;
    if (field == A_XN1G || field == A_XN2G) return ACT_SAVED;  // 0 bytes unless kept
    if (f->ffn_chunks > 1 && ffn_inner) return ACT_IN_CHUNK;
    if (f->recompute >= 2) return field == A_X ? ACT_SAVED : ACT_IN_WORK;  // keep the layer input only
    if (f->recompute >= 1 && (field == A_XN1 || field == A_XN2 || field == A_G)) return ACT_IN_WORK;
    return ACT_SAVED;
}

static ActPlan act_plan(const LlamaConfig* c, const TpShard* t, const TpContext* tpc, int B, int T, const MemoryFlags* fl) {
    ActPlan p = {NUM_ACT_FIELDS, ACT_NAMES, {0}, {}, 0, 0};
    for (int i = 0; i < NUM_ACT_FIELDS; i++) { p.bytes[i] = act_field_bytes(c, t, tpc, B, T, i); p.home[i] = act_field_home(fl, i); }
    return act_plan_finish(p);
}

typedef ActBlock LayerActs;
typedef enum { MODE_TRAIN, MODE_EVAL, MODE_FEATURES } RunMode;  // features: eval up to x_final, no head (sampling)

// ----------------------------------------------------------------------------
// the model: what the runtime holds for every model (llmc/train/model_core.h: the flags,
// ranks, plan, parameter store, activations, the TP and CP contexts, the loss), then its own

struct Llama : ModelCore {
    LlamaConfig cfg;
    TpShard sh;                       // this rank's share of the heads and hidden units
    int B, T;                         // the largest batch any call will use (buffers are sized for it); T: a sample's tokens
    int Tl;                           // the tokens of a sample this rank holds: T / cp
    floatX* p[NUM_PARAM_TENSORS];     // whole-model tensors (norm; embedding and output unless sharded)
    floatX* g[NUM_PARAM_TENSORS];
    VocabShards voc;                  // --shard-vocab: the split embedding and output (llmc/parallel/vocab_parallel.h)
    int* cp_tokens;                   // host: a micro-batch's inputs and targets in this rank's token order
    floatX* x_final;                  // output of the last layer [BT, D]
    FfnChunks fc;                     // --ffn-chunks (llmc/train/ffn_chunks.h)
    floatX *ffn_h1, *ffn_h3, *ffn_g, *ffn_dg, *ffn_dh3;  // FFN chunk scratch (chunked) or backward scratch (always)
    floatX *dx, *dxn, *dq, *dk, *dv, *datt;               // backward scratch
    float* rstd_scratch;
    floatX *xf, *dxf, *logits;        // the head
    float *rstdf, *losses;
    int ce_rows;                      // rows per CE chunk
    int *inputs, *targets;            // device copies of the micro-batch in flight (its slot's under --pp)
    int* batch_slots;                 // the slots' inputs and targets (one slot but under --pp)
    float* norm_scratch;              // grad norm, loss sum: two floats on the device
#ifdef TESTING
    float* capture_logits;            // when set, every logits chunk is copied here (host, [BT, V])
#endif
};

// the rows of an N-row micro-batch this rank holds in the residual stream: all of them,
// or under sequence parallelism block tp_rank of tp equal blocks
static int own_rows(const Llama* m, int N) { return tp_own_rows(&m->tpc, N); }
static size_t own_row0(const Llama* m, int N) { return tp_own_row0(&m->tpc, N); }

// Plans every buffer from the config and the flags, then (allocate = 1) allocates once.
// With allocate = 0 only the plan exists: no device is touched, so a CUDA build can
// print its plan on a machine without a GPU.
static void llama_build(Llama* m, const LlamaConfig* cfg, const MemoryFlags* flags, const ParallelFlags* par, Comm* comm,
                        int B, int T, int allocate) {
    memset(m, 0, sizeof(*m));
    m->cfg = *cfg; m->B = B; m->T = T;
    const LlamaConfig* c = cfg;
    config_validate(c);
    if (B < 1 || T < 1) FAIL("batch: B=%d and T=%d must be positive", B, T);
    if (T > c->max_seq_len) FAIL("batch: T=%d exceeds the model's max_seq_len=%d", T, c->max_seq_len);
    if (c->L > 1024) FAIL("config: L=%d layers; this build supports at most 1024", c->L);
    if (flags->ce_chunks < 1) FAIL("--ce-chunks must be >= 1 (got %d)", flags->ce_chunks);
    if (flags->recompute < 0 || flags->recompute > 2) FAIL("--recompute must be 0, 1 or 2 (got %d)", flags->recompute);
    int n_offload = offload_resolve(flags->offload_act, c->L);
    parallel_flags_validate(par);
    int tp = comm->tp;
    m->sh = llama_shard(c, tp, comm->tp_rank);
    tp_context_init(&m->tpc, comm, par, flags->recompute, (size_t)c->D);
    const TpShard* sh = &m->sh;
    // context parallelism: every buffer below that grows with the tokens holds this rank's Tl of each sample
    attention_setup(&m->att, &m->cpx, comm, 1, B, T, sh->Hl, sh->KVl, c->D / c->H);
    m->Tl = attention_local_tokens(&m->att, T);
    size_t BT = (size_t)B * m->Tl, D = c->D, hd = c->D / c->H;
    // sequence parallelism cuts the B*T rows of a micro-batch into tp equal blocks; a
    // ragged last block would need padding rows in every collective: refused instead
    if (m->tpc.sp && BT % tp != 0)
        FAIL("--tp-mode reducescatter splits the %zu tokens of a micro-batch (batch %d x seq %d / cp %d) into %d equal "
             "blocks: choose batch*seq/cp divisible by --tp, or --tp-mode allreduce", BT, B, T, comm->cp, tp);
    size_t rows = tp_own_rows(&m->tpc, (int)BT);  // this rank's rows of the residual stream

    ParamSpec spec[NUM_PARAM_TENSORS];
    llama_param_specs(c, spec);
    model_core_begin(m, spec, NUM_PARAM_TENSORS, c->L, comm, flags, par, par->shard_vocab);
    // under --pp the head's buffers on the last stage only; the received gradient on the others
    size_t head = pp_stage_holds(STAGE_LAST, comm->pp_rank, comm->pp), slots = m->pipe.chunk_slots[0];
    // the head's rows: its own rows when sequence-parallel with a replicated vocabulary
    // (nothing to gather), else all of them; its logits: the vocabulary or this rank's shard
    size_t head_rows = m->tpc.sp && !m->st.lay.vocab_tp ? rows : BT;
    size_t vcols = m->st.lay.vocab_tp ? m->st.lay.vs : (size_t)c->V;

    // the plan
    Arena* d = &m->dev;
    vocab_plan(&m->voc, &m->st, d, D, P_EMB, P_OUT, c->tied);
    // the largest collective of the vocabulary over DP, or of TP: [BT, D] activations, the CE sums (2 BT floats)
    size_t most = vocab_dp_elements(&m->voc), tpmost = BT * D > 2 * BT * sizeof(float) / sizeof(floatX) ? BT * D : 2 * BT * sizeof(float) / sizeof(floatX);
    pipeline_plan_tensors(&m->pipe, rows * D);  // --pp: what a stage sends on: this rank's rows of the residual stream
    model_core_staging(m, tp > 1 && tpmost > most ? tpmost : most);
    model_core_plan_acts(m, act_plan(c, sh, &m->tpc, B, m->Tl, flags), n_offload);
    model_core_gathered_view(m, 0, A_XN1, A_XN1G);
    model_core_gathered_view(m, 1, A_XN2, A_XN2G);
    arena_add_to(d, "saved activations (x_final)", "activations", rows * D * sizeof(floatX), &m->x_final);
    tp_context_plan(&m->tpc, BT, d);  // tensor parallelism's recycled buffers (llmc/parallel/tensor_parallel.h)
    attention_plan(&m->att, d);       // context parallelism's recycled buffers and fp32 scratch (none at cp 1)
    model_core_plan_work(m, "layer work (not saved)");
    m->fc = ffn_chunks_plan(flags, 1, (int)BT, sh->Fl, sh->Fl, tp, "a batch");
    // the scratch: one FFN chunk (and the backward's chunk gradients); the backward's
    // gradients (the residual's: this rank's rows; the column-parallel GEMMs' input
    // gradient, which sequence parallelism builds in the reduce-scatter staging instead)
    size_t chunk = (size_t)m->fc.rows * m->fc.cols * sizeof(floatX), q = BT * sh->Hl * hd * sizeof(floatX);
    size_t kv = BT * sh->KVl * hd * sizeof(floatX), chunked = flags->ffn_chunks > 1;
    ARENA_ADD_ALL(d, "scratch", {"ffn chunk h1", chunked * chunk, &m->ffn_h1}, {"ffn chunk h3", chunked * chunk, &m->ffn_h3},
        {"ffn chunk g", chunked * chunk, &m->ffn_g}, {"ffn d(g), d(h1)", chunk, &m->ffn_dg}, {"ffn d(h3)", chunk, &m->ffn_dh3},
        {"d residual", rows * D * sizeof(floatX), &m->dx}, {"d normed input", m->tpc.sp ? 0 : BT * D * sizeof(floatX), &m->dxn},
        {"dq", q, &m->dq}, {"dk", kv, &m->dk}, {"dv", kv, &m->dv}, {"d attention output", q, &m->datt},
        {"rstd (recompute)", rows * sizeof(float), &m->rstd_scratch});
    attention_plan_scratch(&m->att, d, B, T);
    pipeline_plan_buffers(&m->pipe, d);  // --pp: the received gradient's recycled buffer
    if ((size_t)flags->ce_chunks > head_rows)
        FAIL("--ce-chunks %d exceeds the %zu rows the output head runs on this rank", flags->ce_chunks, head_rows);
    m->ce_rows = (int)ceil_div(head_rows, flags->ce_chunks);
    ARENA_ADD_ALL(d, "scratch", {"final norm output", head * rows * D * sizeof(floatX), &m->xf},
        {"final norm rstd", head * rows * sizeof(float), &m->rstdf},
        {"d final norm output", head * (m->tpc.sp ? rows : BT) * D * sizeof(floatX), &m->dxf},
        {"logits (one CE chunk)", head * m->ce_rows * vcols * sizeof(floatX), &m->logits});
    vocab_plan_crossentropy(&m->voc, d, (size_t)m->ce_rows);
    ARENA_ADD_ALL(d, "scratch", {"per-token losses", head_rows * sizeof(float), &m->losses},
        {slots > 1 ? "inputs + targets (a slot each)" : "inputs + targets", slots * 2 * BT * sizeof(int), &m->batch_slots},
        {"rope cos + sin", 2 * (size_t)c->max_seq_len * (hd / 2) * sizeof(float), &m->rope_cos},
        {"grad norm, loss sum", 2 * sizeof(float), &m->norm_scratch});
    if (!allocate) return;

    model_core_allocate(m, &m->norm_scratch);
    vocab_bind(&m->voc, (size_t)m->ce_rows);
    for (int t = 0; t < NUM_PARAM_TENSORS; t++)
        if (!m->spec[t].per_layer) { m->p[t] = core_w(m, t, 0); m->g[t] = core_dw(m, t, 0); }
    if (c->tied) { m->p[P_OUT] = m->p[P_EMB]; m->g[P_OUT] = m->g[P_EMB]; }
    m->inputs = m->batch_slots; m->targets = m->inputs + BT;
    // the loss: the TP ranks' rows differ when each ran the head on its own rows
    model_core_loss_rows(m, m->tpc.sp && !m->st.lay.vocab_tp, m->norm_scratch + 1);
    m->cp_tokens = comm->cp > 1 ? (int*)xmalloc(2 * BT * sizeof(int)) : NULL;
    size_t n_rope = (size_t)c->max_seq_len * (hd / 2);
    float* tab = (float*)xmalloc(2 * n_rope * sizeof(float));
    rope1d_table(tab, tab + n_rope, c->max_seq_len, (int)hd, c->rope_theta);  // llmc/kernels/rope3d.h
    model_core_bind_rope(m, tab, n_rope);
}

static void llama_free(Llama* m) {
    free(m->cp_tokens);
    model_core_free(m);
}

// Initialisation in the scheme of llama2.c's model.py: normal(0, 0.02) for the embedding
// and every linear weight, normal(0, 0.02/sqrt(2L)) for the two projections that write
// into the residual stream (wo and w2), ones for the norms. llama2.c's code scales w3
// (its up-projection) instead of w2; we scale the output projection its comment means
// (docs/formats.md). llama3-1B's 1.24e9 normals take about 33 s on one core.
static void llama_init_params(Llama* m, uint64_t seed) {
    ParamInit init[NUM_PARAM_TENSORS];
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        ParamInit normal = {INIT_NORMAL, (i == P_WO || i == P_W2) ? 0.02f / sqrtf(2.0f * m->cfg.L) : 0.02f}, ones = {INIT_ONES, 0};
        init[i] = i == P_ATTN_NORM || i == P_FFN_NORM || i == P_NORM ? ones : normal;
    }
    model_core_init_params(m, init, seed);
}

// ----------------------------------------------------------------------------
// forward and backward of one layer. The GEMMs go through the column- and row-parallel
// linears of llmc/parallel/linear.h (tensor parallelism, sequence parallelism and the
// recycled buffers are theirs) and attention through llmc/parallel/attention_op.h (context
// parallelism, RoPE and the fused-RoPE choice are its).

// The column-parallel linears that read a norm output (field own_f, kept_f its kept
// gathered copy): all N rows; in backward with the partial gradient at their input
// (m->dxn, or under sequence parallelism the reduce-scatter staging)
static ColumnLinear norm_linear(Llama* m, int l, LayerActs a, int own_f, int kept_f, int N, int backward) {
    int slot = 2 * l + (own_f == A_XN2);  // names the input for the planted bug of TESTING builds
    if (backward) return column_backward(&m->tpc, slot, ACT(a, own_f), ACT(a, kept_f), m->dxn, N, ACT_NAMES[own_f]);
    return column_forward(&m->tpc, slot, ACT(a, own_f), ACT(a, kept_f), N, ACT_NAMES[own_f]);
}

// attention half of the layer: x -> xmid. Under TP this rank's heads; the norm works on
// this rank's rows of the residual stream (all of them without sequence parallelism).
static void attention_block_forward(Llama* m, int l, LayerActs a, int B, int T, float* rstd1) {
    const LlamaConfig* c = &m->cfg;
    int N = B * T, nr = own_rows(m, N), D = c->D, hd = D / c->H, Hl = m->sh.Hl, KVl = m->sh.KVl;
    int qd = Hl * hd, kvd = KVl * hd;
    stream_t s = m->stream;
    Profile* P = &m->prof;
    PROF(P, "rmsnorm fwd", 0, 2.0 * nr * D * SX, s)
        rmsnorm_forward(ACT(a, A_XN1), rstd1, ACT(a, A_X), core_w(m, P_ATTN_NORM, l), nr, D, c->norm_eps, s);
    ColumnLinear qkv = norm_linear(m, l, a, A_XN1, A_XN1G, N, 0);
    PROF(P, "qkv matmul fwd", gemm_flops(N, qd + 2.0 * kvd, D), 0, s) {
        column_gemm(&qkv, ACT(a, A_Q), core_w(m, P_WQ, l), NULL, 0, N, qd);
        column_gemm(&qkv, ACT(a, A_K), core_w(m, P_WK, l), NULL, 0, N, kvd);
        column_gemm(&qkv, ACT(a, A_V), core_w(m, P_WV, l), NULL, 0, N, kvd);
    }
    column_done(&qkv);
    attention_rope_qk(&m->att, ACT(a, A_Q), ACT(a, A_K), B, T);
    attention_forward(&m->att, ACT(a, A_ATT), ACTF(a, A_LSE), ACT(a, A_Q), ACT(a, A_K), ACT(a, A_V), B, T);
    // the residual add is the GEMM's: xmid = x + att wo^T
    RowLinear wo = row_forward(&m->tpc, ACT(a, A_XMID), ACT(a, A_X), N);
    PROF(P, "wo matmul fwd", gemm_flops(N, D, qd), 0, s)
        row_gemm(&wo, ACT(a, A_ATT), core_w(m, P_WO, l), NULL, 0, N, qd, qd, 1);
    row_done(&wo);
}

// One FFN chunk: rows [r0, r0+nr) of the tokens, hidden units [f0, f0+nf) of this rank's.
// Computes h1, h3 and g for the chunk into the given buffers.
static void ffn_chunk_hidden(Llama* m, int l, const ColumnLinear* x, int r0, int nr, int f0, int nf, floatX* h1,
                             floatX* h3, floatX* g) {
    int D = m->cfg.D;
    stream_t s = m->stream;
    PROF(&m->prof, "ffn w1 w3 matmul fwd", 2 * gemm_flops(nr, nf, D), 0, s) {
        column_gemm(x, h1, core_w(m, P_W1, l) + (size_t)f0 * D, NULL, r0, nr, nf);
        column_gemm(x, h3, core_w(m, P_W3, l) + (size_t)f0 * D, NULL, r0, nr, nf);
    }
    PROF(&m->prof, "swiglu fwd", 0, 3.0 * nr * nf * SX, s)
        swiglu_forward(g, h1, h3, (size_t)nr * nf, s);
}

// FFN with its residual: out = residual + w2(silu(w1 xn2) * w3 xn2), chunk by chunk when
// --ffn-chunks > 1, on all N rows; the chunks' w2 products add into one sum (hidden
// chunks) or each write their rows (token chunks).
static void ffn_forward(Llama* m, int l, LayerActs a, int N, const floatX* residual, floatX* out) {
    int D = m->cfg.D, Fl = m->sh.Fl, chunked = m->flags.ffn_chunks > 1;
    ColumnLinear x = norm_linear(m, l, a, A_XN2, A_XN2G, N, 0);
    RowLinear w2 = row_forward(&m->tpc, out, residual, N);
    for (int k = 0; k < ffn_chunk_count(&m->fc, 1, N); k++) {
        FfnChunk ch = ffn_chunk_at(&m->fc, 1, N, k);
        floatX* g = chunked ? m->ffn_g : ACT(a, A_G);
        ffn_chunk_hidden(m, l, &x, ch.r0, ch.nr, ch.f0, ch.nf, chunked ? m->ffn_h1 : ACT(a, A_H1),
                         chunked ? m->ffn_h3 : ACT(a, A_H3), g);
        PROF(&m->prof, "ffn w2 matmul fwd", gemm_flops(ch.nr, D, ch.nf), 0, m->stream)
            row_gemm(&w2, g, core_w(m, P_W2, l) + ch.f0, NULL, ch.r0, ch.nr, ch.nf, Fl, m->flags.ffn_chunk_seq || k == 0);
    }
    column_done(&x);
    row_done(&w2);
}

// FFN backward on all N rows from m->dx, the gradient at the FFN output (this rank's
// rows). Returns its input linear with the FFN input's gradient, for the caller to reduce.
// With --recompute 2 and one chunk the hidden activations are recomputed here, where the
// gathered input is at hand.
static ColumnLinear ffn_backward(Llama* m, int l, LayerActs a, int N) {
    int D = m->cfg.D, Fl = m->sh.Fl;
    stream_t s = m->stream;
    RowLinear w2 = row_backward(&m->tpc, m->dx, N, NULL);
    ColumnLinear x = norm_linear(m, l, a, A_XN2, A_XN2G, N, 1);
    if (m->flags.recompute >= 2 && m->flags.ffn_chunks == 1)
        ffn_chunk_hidden(m, l, &x, 0, N, 0, Fl, ACT(a, A_H1), ACT(a, A_H3), ACT(a, A_G));
    for (int k = 0; k < ffn_chunk_count(&m->fc, 1, N); k++) {
        FfnChunk ch = ffn_chunk_at(&m->fc, 1, N, k);
        int r0 = ch.r0, nr = ch.nr, f0 = ch.f0, nf = ch.nf;
        floatX *h1, *h3, *g;
        if (m->flags.ffn_chunks == 1) {
            h1 = ACT(a, A_H1); h3 = ACT(a, A_H3); g = ACT(a, A_G);
        } else {  // recompute this chunk's intermediates
            h1 = m->ffn_h1; h3 = m->ffn_h3; g = m->ffn_g;
            ffn_chunk_hidden(m, l, &x, r0, nr, f0, nf, h1, h3, g);
        }
        Profile* P = &m->prof;
        PROF(P, "ffn w2 matmul bwd", 2 * gemm_flops(nr, D, nf), 0, s)
            row_gemm_backward(&w2, core_dw(m, P_W2, l) + f0, m->ffn_dg, g, core_w(m, P_W2, l) + f0, r0, nr, nf, Fl);
        PROF(P, "swiglu bwd", 0, 5.0 * nr * nf * SX, s) {
            swiglu_backward(m->ffn_dg, m->ffn_dh3, m->ffn_dg, h1, h3, (size_t)nr * nf, s);  // ffn_dg now holds d(h1)
        }
        PROF(P, "ffn w1 w3 matmul bwd", 4 * gemm_flops(nr, nf, D), 0, s) {
            int first = m->flags.ffn_chunk_seq || k == 0;  // hidden chunks all add into the same rows
            column_gemm_backward(&x, core_dw(m, P_W1, l) + (size_t)f0 * D, NULL, m->ffn_dg,
                                 core_w(m, P_W1, l) + (size_t)f0 * D, r0, nr, nf, !first);
            column_gemm_backward(&x, core_dw(m, P_W3, l) + (size_t)f0 * D, NULL, m->ffn_dh3,
                                 core_w(m, P_W3, l) + (size_t)f0 * D, r0, nr, nf, 1);
        }
    }
    row_done(&w2);
    return x;
}

static void layer_forward(Llama* m, int l, int B, int T, RunMode mode) {
    const LlamaConfig* c = &m->cfg;
    int N = B * T, nr = own_rows(m, N), D = c->D;
    stream_t s = m->stream;
    LayerActs a = core_layer_acts(m, l);
    attention_block_forward(m, l, a, B, T, ACTF(a, A_RSTD1));
    PROF(&m->prof, "rmsnorm fwd", 0, 2.0 * nr * D * SX, s)
        rmsnorm_forward(ACT(a, A_XN2), ACTF(a, A_RSTD2), ACT(a, A_XMID), core_w(m, P_FFN_NORM, l), nr, D, c->norm_eps, s);
    floatX* out = core_layer_output(m, l, A_X, m->x_final);
    // the output lands in the next layer's block; with offload that block is a slot
    // whose previous tenant (layer l-1) must have reached the host first
    if (mode == MODE_TRAIN && core_next_in_chunk(m, l)) offload_before_write(&m->off, core_block(m, l + 1), s);
    ffn_forward(m, l, a, N, ACT(a, A_XMID), out);
    if (mode == MODE_TRAIN) offload_after_forward(&m->off, core_block(m, l), s);
}

// m->dx holds dL/d(layer output) on entry and dL/d(layer input) on return (this rank's
// rows of them under sequence parallelism)
static void layer_backward(Llama* m, int l, int B, int T) {
    const LlamaConfig* c = &m->cfg;
    int N = B * T, nr = own_rows(m, N), D = c->D, hd = D / c->H, Hl = m->sh.Hl, KVl = m->sh.KVl;
    int qd = Hl * hd, kvd = KVl * hd;
    stream_t s = m->stream;
    Profile* P = &m->prof;
    PROF(P, "offload wait", 0, 0, s)
        offload_before_backward(&m->off, core_block(m, l), core_block_below(m, l), s);
    LayerActs a = core_layer_acts(m, l);

    // recompute what was not kept (bitwise the same values: same launchers, same inputs);
    // the profile counts the recomputed launches in their forward groups
    if (m->flags.recompute >= 2) {  // only x was kept: the forward of the layer again, minus its output
        attention_block_forward(m, l, a, B, T, ACTF(a, A_RSTD1));
        rmsnorm_forward(ACT(a, A_XN2), ACTF(a, A_RSTD2), ACT(a, A_XMID), core_w(m, P_FFN_NORM, l), nr, D, c->norm_eps, s);
        // (the FFN's hidden activations: in ffn_backward, which has the gathered input)
    } else if (m->flags.recompute == 1) {
        PROF(P, "rmsnorm fwd", 0, 4.0 * nr * D * SX, s) {
            rmsnorm_forward(ACT(a, A_XN1), m->rstd_scratch, ACT(a, A_X), core_w(m, P_ATTN_NORM, l), nr, D, c->norm_eps, s);
            rmsnorm_forward(ACT(a, A_XN2), m->rstd_scratch, ACT(a, A_XMID), core_w(m, P_FFN_NORM, l), nr, D, c->norm_eps, s);
        }
        PROF(P, "swiglu fwd", 0, m->flags.ffn_chunks == 1 ? 3.0 * N * m->sh.Fl * SX : 0, s)
            if (m->flags.ffn_chunks == 1) swiglu_forward(ACT(a, A_G), ACT(a, A_H1), ACT(a, A_H3), (size_t)N * m->sh.Fl, s);
    }

    // FFN and its norm: dx is the gradient at the FFN output and also, through the
    // residual, at xmid; the norm's backward adds the FFN path into it
    ColumnLinear ffn_in = ffn_backward(m, l, a, N);
    const floatX* dxn = column_reduce(&ffn_in);
    double norm_bytes = 4.0 * nr * D * SX;  // reads x, dxn, dx; writes dx
    PROF(P, "rmsnorm bwd", 0, norm_bytes, s) {
        rmsnorm_backward(m->dx, core_dw(m, P_FFN_NORM, l), dxn, ACT(a, A_XMID), core_w(m, P_FFN_NORM, l),
                         ACTF(a, A_RSTD2), nr, D, s);
    }
    column_done(&ffn_in);
    // attention
    RowLinear wo = row_backward(&m->tpc, m->dx, N, NULL);
    PROF(P, "wo matmul bwd", 2 * gemm_flops(N, D, qd), 0, s)
        row_gemm_backward(&wo, core_dw(m, P_WO, l), m->datt, ACT(a, A_ATT), core_w(m, P_WO, l), 0, N, qd, qd);
    row_done(&wo);
    attention_backward(&m->att, m->dq, m->dk, m->dv, m->datt, ACT(a, A_Q), ACT(a, A_K), ACT(a, A_V), ACT(a, A_ATT),
                       ACTF(a, A_LSE), B, T);
    ColumnLinear qkv = norm_linear(m, l, a, A_XN1, A_XN1G, N, 1);
    PROF(P, "qkv matmul bwd", 2 * gemm_flops(N, qd + 2.0 * kvd, D), 0, s) {
        column_gemm_backward(&qkv, core_dw(m, P_WQ, l), NULL, m->dq, core_w(m, P_WQ, l), 0, N, qd, 0);
        column_gemm_backward(&qkv, core_dw(m, P_WK, l), NULL, m->dk, core_w(m, P_WK, l), 0, N, kvd, 1);
        column_gemm_backward(&qkv, core_dw(m, P_WV, l), NULL, m->dv, core_w(m, P_WV, l), 0, N, kvd, 1);
    }
    dxn = column_reduce(&qkv);
    PROF(P, "rmsnorm bwd", 0, norm_bytes, s) {
        rmsnorm_backward(m->dx, core_dw(m, P_ATTN_NORM, l), dxn, ACT(a, A_X), core_w(m, P_ATTN_NORM, l),
                         ACTF(a, A_RSTD1), nr, D, s);
    }
    column_done(&qkv);
    offload_after_backward(&m->off, core_block(m, l), s);
}

// ----------------------------------------------------------------------------
// the whole model

// The token embedding of the N rows into layer 0's input (this rank's rows of it under
// sequence parallelism). Vocab-parallel (--shard-vocab 1, tp > 1): each rank looks up
// the ids it owns and writes zeros for the others; the TP sum is the lookup.
static void embed_forward(Llama* m, int N) {
    vocab_embed_forward(&m->voc, &m->tpc, &m->prof, ACT(core_layer_acts(m, 0), A_X), m->inputs, m->p[P_EMB], N);
}
static void embed_backward(Llama* m, floatX* demb, int N) {
    vocab_embed_backward(&m->voc, &m->tpc, &m->prof, demb, m->dx, m->inputs, N);
}

// Final norm, output projection and cross-entropy, --ce-chunks rows at a time. In
// training the backward of this head runs at once, chunk by chunk, so the [BT, V]
// logits never exist: it leaves dL/d(x_final) in m->dx. Under TP: with a replicated
// vocabulary every rank runs the head on its rows of the residual stream; vocab-parallel,
// on all N rows (gathered under sequence parallelism) against its vocabulary shard, and
// the input gradient is summed over the group.
static void head_forward_backward(Llama* m, int N, RunMode mode, float dloss) {
    const LlamaConfig* c = &m->cfg;
    int D = c->D, nr_own = own_rows(m, N), vtp = m->st.lay.vocab_tp;
    int V = vtp ? (int)m->st.lay.vs : c->V;
    int H = vtp ? N : nr_own;  // rows the head runs on
    const int* targets = m->targets + (vtp ? 0 : own_row0(m, N));
    stream_t s = m->stream;
    Profile* P = &m->prof;
    PROF(P, "rmsnorm fwd", 0, 2.0 * nr_own * D * SX, s)
        rmsnorm_forward(m->xf, m->rstdf, m->x_final, m->p[P_NORM], nr_own, D, c->norm_eps, s);
    // a column-parallel linear over the vocabulary when it is split over TP, else replicated
    ColumnLinear out = column_open(&m->tpc, vtp, m->xf, m->dxf, N, mode == MODE_TRAIN, "final norm output");
    const floatX* w_out = vocab_weights(&m->voc, P_OUT, m->p[P_OUT]);
    floatX* dw_out = mode == MODE_TRAIN ? vocab_grad_begin(&m->voc, P_OUT, m->g[P_OUT]) : NULL;
    for (int r0 = 0; r0 < H; r0 += m->ce_rows) {
        int nr = H - r0 < m->ce_rows ? H - r0 : m->ce_rows;
        PROF(P, "head matmul fwd", gemm_flops(nr, V, D), 0, s)
            column_gemm(&out, m->logits, w_out, NULL, r0, nr, V);
#ifdef TESTING
        if (m->capture_logits) vocab_capture_logits(&m->voc, m->capture_logits, m->logits, vtp ? r0 : own_row0(m, N) + r0, nr, V, c->V, s);
#endif
        PROF(P, "crossentropy", 0, (mode == MODE_TRAIN ? 2.0 : 1.0) * nr * V * SX, s) {
            if (vtp) vocab_crossentropy(&m->voc, m->losses + r0, m->logits, targets + r0, nr, dloss, mode == MODE_TRAIN);
            else crossentropy_forward_backward(m->losses + r0, m->logits, targets + r0, nr, V, dloss, mode == MODE_TRAIN, s);
        }
        if (mode == MODE_TRAIN) {
            PROF(P, "head matmul bwd", 2 * gemm_flops(nr, V, D), 0, s)
                column_gemm_backward(&out, dw_out, NULL, m->logits, w_out, r0, nr, V, 0);
        }
    }
    if (mode == MODE_TRAIN) {
        if (!c->tied) vocab_grad_done(&m->voc, P_OUT);  // tied: the embedding's backward adds to it first
        const floatX* dxf_own = column_reduce(&out);
        PROF(P, "rmsnorm bwd", 0, 5.0 * nr_own * D * SX, s) {
            dev_memset(m->dx, 0, (size_t)nr_own * D * sizeof(floatX), s);
            rmsnorm_backward(m->dx, m->g[P_NORM], dxf_own, m->x_final, m->p[P_NORM], m->rstdf, nr_own, D, s);
        }
    }
    column_done(&out);
}

// layers [l0, l1) in order (under --zero 3 each gathers the next one's parameters while it computes)
static void layers_forward(Llama* m, int l0, int l1, int B, int T, RunMode mode) {
    for (int l = l0; l < l1; l++) {
        param_store_layer_begin(&m->st, l, l + 1 < l1 ? l + 1 : -1, 0);
        layer_forward(m, l, B, T, mode);
        param_store_layer_end(&m->st, l, mode == MODE_TRAIN);
    }
}

// the micro-batch whose tokens and activations the model uses next (its slot under --pp)
static void llama_select_micro(Llama* m, int micro) {
    m->micro_cur = micro;
    m->inputs = m->batch_slots + (size_t)pipeline_slot(&m->pipe, micro, 0) * 2 * m->B * m->Tl;
    m->targets = m->inputs + (size_t)m->B * m->Tl;
}

// checks a micro-batch of B samples of T tokens against the plan and stages this rank's
// tokens of it (under cp its Tl of each sample, in its order: llmc/parallel/attention_op.h)
// into the selected micro-batch's slot; returns the tokens of a sample on this rank
static int llama_stage_batch(Llama* m, const int* inputs, const int* targets, int B, int T) {
    if (B * T > m->B * m->T || T > m->T) FAIL("batch %dx%d exceeds the planned %dx%d", B, T, m->B, m->T);
    T = attention_stage_tokens(&m->att, m->cp_tokens, &inputs, &targets, B, T);
    int N = B * T;
    if (m->tpc.sp && N % m->tpc.tp != 0)
        FAIL("--tp-mode reducescatter: a micro-batch of %d tokens does not split into %d equal blocks", N, m->tpc.tp);
    m->rows_cur = N;
    dev_memcpy_h2d(m->inputs, inputs, (size_t)N * sizeof(int), m->stream);
    if (targets) dev_memcpy_h2d(m->targets, targets, (size_t)N * sizeof(int), m->stream);
    return T;
}

// The forward of the staged micro-batch (B samples of T tokens on this rank) through chunk
// `chunk` of this stage (without --pp: the whole model): the embedding on the model's first
// piece, the chunk's layers, and on the last piece the head and its per-token losses. In
// training the head's backward runs with it, chunk by chunk (--ce-chunks: the [BT, V] logits
// never exist), leaving dL/d(x_final) in m->dx (dloss = 1 / (tokens in the whole step, all
// DP ranks)). Under --pp a chunk's input was received into its first layer's block and its
// output left in x_final to be sent on (llmc/parallel/pipeline.h).
static void llama_chunk_forward(Llama* m, int micro, int chunk, int B, int T, RunMode mode, float dloss) {
    int N = B * T, s = m->comm->pp_rank, l0, l1;
    llama_select_micro(m, micro);
    pp_chunk_layers(&m->split, s, chunk, &l0, &l1);
    if (mode == MODE_TRAIN) offload_before_write(&m->off, core_block(m, l0), m->stream);  // (the chunk's input's block)
    if (pp_first_piece(&m->split, s, chunk)) embed_forward(m, N);
    layers_forward(m, l0, l1, B, T, mode);
    if (pp_last_piece(&m->split, s, chunk) && mode != MODE_FEATURES) {
        head_forward_backward(m, N, mode, dloss);
        model_core_add_losses(m, m->losses, (size_t)(m->tpc.sp && !m->st.lay.vocab_tp ? own_rows(m, N) : N));
        m->head_micro = mode == MODE_TRAIN ? micro : -1;
    }
}

// The backward of chunk `chunk` for micro-batch `micro`, from the gradient at its output
// (the head's, left in m->dx by the forward, on the model's last piece; else received into
// a recycled buffer: pipeline_output_grad) down to its input (m->dx, sent back) or on the first piece the embedding, adding
// into the gradients. With last = 1 (this chunk's last backward of the step) each bucket's
// reductions (TP for the replicated tensors under sequence parallelism, then DP) start as
// soon as its gradients are complete.
static void llama_chunk_backward(Llama* m, int micro, int chunk, int B, int T, int last) {
    const LlamaConfig* c = &m->cfg;
    int s = m->comm->pp_rank, l0, l1, first = pp_first_piece(&m->split, s, chunk), ends = pp_last_piece(&m->split, s, chunk);
    llama_select_micro(m, micro);
    pp_chunk_layers(&m->split, s, chunk, &l0, &l1);
    core_take_head_grad(m, micro, ends, "m->dx");
    if (!ends) dev_memcpy_d2d(m->dx, pipeline_output_grad(&m->pipe), (size_t)own_rows(m, B * T) * c->D * sizeof(floatX), m->stream);
    for (int l = l1 - 1; l >= l0; l--) {
        param_store_layer_begin(&m->st, l, l - 1 >= l0 ? l - 1 : -1, 1);
        layer_backward(m, l, B, T);
        param_store_layer_end(&m->st, l, 0);
        param_store_bucket_done(&m->st, l, last);  // its reductions overlap the layers below
    }
    if (first) {
        // a tied, sharded model's unsharded gradient already holds the head's part (where the head is on this stage)
        floatX* demb = vocab_over_dp(&m->voc) && c->tied && ends ? m->voc.grad : vocab_grad_begin(&m->voc, P_EMB, m->g[P_EMB]);
        embed_backward(m, demb, B * T);
        vocab_grad_done(&m->voc, P_EMB);
        const ParamLayout* lay = &m->st.lay;
        param_store_micro_step_done(&m->st, lay->vocab_start, lay->n_local - lay->vocab_start, last);  // --shard-vocab over DP
    }
    if (ends && !first) {  // --pp's last stage: the head's vocabulary gradient is all this stage has of it
        if (c->tied) vocab_grad_done(&m->voc, P_EMB);  // (over DP: reduce-scattered onto its rows; else nothing)
        const ParamLayout* lay = &m->st.lay;
        param_store_micro_step_done(&m->st, lay->vocab_start, lay->n_local - lay->vocab_start, last);
    }
    if (first || ends) param_store_bucket_done(&m->st, c->L, last);  // (under --pp held back to the step's end)
}

// where chunk `chunk`'s boundary tensors are for micro-batch `micro` (llmc/parallel/pipeline.h)
static floatX* llama_pp_tensor(Llama* m, int micro, int chunk, int which) {
    return core_pp_tensor(m, micro, chunk, which, m->x_final, m->dx, A_X);
}

// The update, clipping and AdamW over the parameter store, is the same for every model: the runner calls
// model_core_apply_update (llmc/train/model_core.h) with the gradient norm.

// A pass of the model over micro-batches held in host arrays (the test programs, validation,
// sampling): under --pp through the stage's schedule, or forward only through every stage.
typedef struct {
    Llama* m;
    const int *inputs, *targets;  // micro-batch j's rows start at j * B * T
    int B, T;
    RunMode mode;
    float dloss;
    float* capture;               // TESTING: micro-batch j's logits at capture + j * capture_stride (NULL: none)
    size_t capture_stride;
} LlamaPass;

static void pass_forward(void* ctx, int micro, int chunk) {
    LlamaPass* p = (LlamaPass*)ctx;
    Llama* m = p->m;
    llama_select_micro(m, micro);
    size_t r0 = (size_t)micro * p->B * p->T;
    int T = chunk == 0 ? llama_stage_batch(m, p->inputs + r0, p->targets ? p->targets + r0 : NULL, p->B, p->T) : m->Tl;
#ifdef TESTING
    m->capture_logits = p->capture ? p->capture + micro * p->capture_stride : NULL;
#endif
    llama_chunk_forward(m, micro, chunk, p->B, T, p->mode, p->dloss);
}
static void pass_backward(void* ctx, int micro, int chunk, int last) {
    LlamaPass* p = (LlamaPass*)ctx;
    llama_chunk_backward(p->m, micro, chunk, p->B, p->m->Tl, last);
}
static floatX* pass_tensor(void* ctx, int micro, int chunk, int which) {
    return llama_pp_tensor(((LlamaPass*)ctx)->m, micro, chunk, which);
}

// n_micro micro-batches of one step (training: forward and backward; the last one starts the
// reductions) or one forward (evaluation, n_micro = 1)
static void llama_pass(LlamaPass* p, int n_micro) {
    PpHooks h = {p, pass_forward, pass_backward, pass_tensor};
    model_core_pass(p->m, &h, n_micro, p->mode == MODE_TRAIN);
}

// the forward of one micro-batch in eval mode, its losses added (validation)
static void llama_evaluate(Llama* m, const int* inputs, const int* targets, int B, int T) {
    LlamaPass p = {m, inputs, targets, B, T, MODE_EVAL, 0.0f, NULL, 0};
    llama_pass(&p, 1);
}

// the embedding and the layers of a chunk on the staged tokens, no head (sampling)
static void sample_forward(void* ctx, int micro, int chunk) {
    LlamaPass* p = (LlamaPass*)ctx;
    llama_chunk_forward(p->m, micro, chunk, p->B, p->T, MODE_FEATURES, 0.0f);
}

// Logits of the last position of one sequence (for sampling): the layers on [1, T]
// in eval mode, then the head on one row only. A collective under TP: every rank
// gets all V logits. Sequence parallelism needs T divisible by tp: the sequence is padded
// with token 0 after its end, which causal attention keeps from the rows before it.
static void llama_next_token_logits(Llama* m, const int* tokens, int T, float* host_logits, int* pad_scratch) {
    const LlamaConfig* c = &m->cfg;
    stream_t s = m->stream;
    int tp = m->tpc.tp, cp = m->comm->cp, Tp = cp > 1 ? m->T : m->tpc.sp ? (int)ceil_div(T, tp) * tp : T;
    if (Tp > m->T) FAIL("sampling %d tokens: padded to %d for --tp-mode reducescatter, more than seq %d", T, Tp, m->T);
    memcpy(pad_scratch, tokens, (size_t)T * sizeof(int));
    for (int t = T; t < Tp; t++) pad_scratch[t] = 0;  // (under cp: the whole planned sample, every rank its part)
    llama_select_micro(m, 0);
    llama_stage_batch(m, pad_scratch, NULL, 1, Tp);
    int rows = cp > 1 ? m->Tl : Tp;
    if (m->tpc.sp && rows % tp != 0) FAIL("sampling: %d tokens a rank do not split over --tp %d", rows, tp);
    LlamaPass p = {m, pad_scratch, NULL, 1, rows, MODE_FEATURES, 0.0f, NULL, 0};
    PpHooks h = {&p, sample_forward, pass_backward, pass_tensor};
    pipeline_forward_only(&m->pipe, &h, 0);
    if (!pp_stage_holds(STAGE_LAST, m->comm->pp_rank, m->comm->pp)) {  // the last stage's logits, to every stage
        comm_host_broadcast(m->comm, GROUP_PP, host_logits, (size_t)c->V * sizeof(float), m->comm->pp - 1);
        return;
    }
    // every row (gathered under sequence parallelism), for the last token's
    ColumnLinear xfin = column_open(&m->tpc, 1, m->x_final, NULL, rows, 0, "final hidden states (sampling)");
    int vtp = m->st.lay.vocab_tp, V = vtp ? (int)m->st.lay.vs : c->V;
    size_t last = (size_t)T - 1;  // the row of the last token; under cp one member holds it and shares its logits
    int holder = attention_holds_token(&m->att, T - 1, &last);
    rmsnorm_forward(m->xf, m->rstdf, xfin.x.p + (holder ? last : 0) * c->D, m->p[P_NORM], 1, c->D, c->norm_eps, s);
    matmul_forward(m->logits, m->xf, vocab_weights(&m->voc, P_OUT, m->p[P_OUT]), 1, c->D, V, c->D, 0, s);
    column_done(&xfin);
    comm_synchronize(m->comm);
    stream_synchronize(s);
    if (vtp) vocab_gather_logits(&m->voc, host_logits, m->logits, V, c->V);
    else dev_download_floats(host_logits, m->logits, c->V);
    attention_share_token(&m->att, T - 1, host_logits, (size_t)c->V * sizeof(float));
    comm_host_broadcast(m->comm, GROUP_PP, host_logits, (size_t)c->V * sizeof(float), m->comm->pp - 1);
}

// ----------------------------------------------------------------------------
// checkpoints (format in docs/formats.md): one format whatever the number of ranks and
// the flags, written and read by the runner (llmc/train/runner.h, state_checkpoint.h); the
// trainer adds the model's shape, the writer's layout and the dataloader's position (the
// same on every rank), which a resume restores when the global batch is the one that wrote it.

static const CkptFormat LLAMA_CKPT = {"train_llama", 20261123, 2, /*step*/ 10, /*params*/ 18, /*loader*/ 15, /*dp*/ 11};

static const char* checkpoint_check(const char* path, void* ci) { return ckpt_state_header(path, &LLAMA_CKPT, (CkptInfo*)ci); }

// ----------------------------------------------------------------------------
// the trainer (left out of test_llama, which includes this file with TESTING): the
// model's flags and its operations for the runner (llmc/train/runner.h), which does the rest
#ifndef TESTING

typedef struct {
    RunArgs run;         // what every trainer has: loop, memory, parallel, --fit-memory, batch (llmc/train/train_args.h)
    LlamaConfig cfg;
    int T, val_batches, sample_len, tokenizer_given;
    float temperature;
    const char *train_data, *val_data, *tokenizer;
} TrainArgs;

typedef struct {
    TrainArgs a;
    Llama m;
    TokenData data;  // the training and validation tokens (llmc/train/token_data.h)
    StorySampler sampler;
    float dloss;     // 1 / (the tokens of a step over all ranks)
} Trainer;

static void usage(const Flag* flags, int n) {
    printf("usage: train_llama [--flag value]...\n\n");
    flags_print(flags, n);
    printf("\nmodels: ");
    for (int i = 0; i < NUM_MODEL_PRESETS; i++) printf("%s%s", i ? ", " : "", MODEL_PRESETS[i].name);
    printf("\n");
}

static void parse_args(int argc, char** argv, TrainArgs* a) {
    *a = TrainArgs();  // zeroed (value-initialised: Flag has a default member)
    RunArgs* r = &a->run;
    r->loop.model = "tiny";
    r->mem = memory_flags_default();
    train_loop_defaults(&r->loop, "runs/train_llama", 200, 0.1f, 0.95f);
    r->B = 8; a->T = 256; a->val_batches = 20; a->sample_len = 64; a->temperature = 1.0f;  // (the rest: 0)
    a->train_data = "data/tinystories/tinystories_train_*.bin";
    a->val_data = "data/tinystories/tinystories_val_*.bin";
    a->tokenizer = "../shared/data/tinystories/tokenizer/tokenizer.bin";
    // the preset first, so explicit dimensions override it wherever they stand
    if (flag_peek(argc, argv, "model")) r->loop.model = flag_peek(argc, argv, "model");
    a->cfg = MODEL_PRESETS[flag_preset(MODEL_PRESETS, sizeof(MODEL_PRESETS[0]), NUM_MODEL_PRESETS, r->loop.model)].cfg;
    a->T = a->T < a->cfg.max_seq_len ? a->T : a->cfg.max_seq_len;

    const Flag own[] = {
        {"model", 's', &r->loop.model, "a preset (listed at the end of --help; default tiny)"},
        {"V", 'i', &a->cfg.V, "vocabulary size (overrides the preset)"},
        {"D", 'i', &a->cfg.D, "model width"},
        {"L", 'i', &a->cfg.L, "layers"},
        {"H", 'i', &a->cfg.H, "attention heads"},
        {"KV", 'i', &a->cfg.KV, "key/value heads (GQA)"},
        {"F", 'i', &a->cfg.F, "FFN hidden size"},
        {"max-seq-len", 'i', &a->cfg.max_seq_len, "longest sequence (RoPE table)"},
        {"tied", 'i', &a->cfg.tied, "1: output projection shares the token embedding"},
        {"rope-theta", 'f', &a->cfg.rope_theta, "RoPE base"},
        {"norm-eps", 'f', &a->cfg.norm_eps, "RMSNorm epsilon"},
        {"batch", 'i', &r->B, "micro-batch size B per rank (default 8)"},
        {"seq", 'i', &a->T, "sequence length T (default min(256, max_seq_len))"},
        {"total-batch", 'i', &r->total_batch, "tokens per optimizer step over all ranks; a multiple of B*T*dp (default B*T*dp)"},
        {"train-data", 's', &a->train_data, "glob of training token shards"},
        {"val-data", 's', &a->val_data, "glob of validation token shards"},
        {"val-batches", 'i', &a->val_batches, "batches per validation (default 20)"},
        {"sample-every", 'i', &r->sample_every, "print a sampled story every N steps and at the end, 0 = never"},
        {"sample-len", 'i', &a->sample_len, "tokens per sample (default 64, at most seq)"},
        {"temperature", 'f', &a->temperature, "sampling temperature, 0 = greedy (default 1.0)"},
        {"tokenizer", 's', &a->tokenizer, "llama2.c tokenizer.bin for decoding samples"},
        {"save-init", 'i', &r->save_init, "1: write the initial weights as ckpt_000000.bin"},
        {"shard-vocab", 'i', &r->shard_vocab, "1: embedding and output projection as 1/dp row shards, gathered at use"},
    };
    train_flags_parse(argc, argv, own, (int)(sizeof(own) / sizeof(own[0])), r, "tensor-parallel group size: consecutive "
                      "ranks; must divide the ranks, H and KV (default 1)", "context-parallel group size: each rank holds "
                      "1/cp of every sample's tokens; tp x cp must divide the ranks (default 1)", 1,
                      "0 keep all, 1 recompute norms and SwiGLU, 2 keep only layer inputs", usage);
    a->tokenizer_given = flag_given(r->flags, r->nflags, r->given, &a->tokenizer);
}

static void print_config(void* t, Logger* lg) {
    const TrainArgs* a = &((Trainer*)t)->a;
    const Llama* m = &((Trainer*)t)->m;
    const TrainLoopArgs* l = &a->run.loop;
    const LlamaConfig* c = &m->cfg;
    logf_(lg, "model: V=%d D=%d L=%d H=%d KV=%d F=%d max_seq_len=%d tied=%d rope_theta=%g | %.2fM parameters\n",
          c->V, c->D, c->L, c->H, c->KV, c->F, c->max_seq_len, c->tied, c->rope_theta, m->num_params / 1e6);
    log_param_sizes(lg, m->spec, m->param_sizes, NUM_PARAM_TENSORS);
    logf_(lg, "batch: B=%d T=%d per rank, %d tokens per step (%d micro-steps x %d DP ranks) | steps %d, lr %g warmup %d, "
          "wd %g, clip %g\n", a->run.B, a->T, a->run.total_batch, a->run.grad_accum, m->comm->dp, l->steps, l->lr,
          l->warmup, l->weight_decay, l->grad_clip);
    char cp[192];
    int k = m->comm->pp > 1 ? snprintf(cp, sizeof(cp), "pp %d x ", m->comm->pp) : 0;
    attention_describe_cp(&m->att, cp + k, sizeof(cp) - k, m->Tl, "a sample");
    logf_(lg, "parallel: world %d = dp %d x %stp %d (--tp-mode %s, --tp-recompute-allgather %d) | --zero %d --offload-optim %d "
          "--shard-vocab %d%s | comm %s, timeout %g s\n", m->comm->size, m->comm->dp, cp, m->comm->tp,
          TP_MODE_NAMES[a->run.par.tp_mode], m->par.tp_regather, m->par.zero, m->par.offload_optim, m->par.shard_vocab,
          m->par.shard_vocab ? (m->st.lay.vocab_tp ? " (over TP)" : " (over DP)") : "", comm_backend_name(m->comm),
          a->run.par.comm_timeout);
    log_memory_flags(lg, &m->flags, m->off.layers_offloaded, "layers", 1,
                     m->par.grad_fp32 ? "an fp32 buffer (--fp32-grad-accum)" : sizeof(floatX) < 4 ? "bf16" : "fp32");
}

// The bytes this rank sends per optimizer step in device collectives, by group and
// kind, in the ring convention of comm_count (all-gather and reduce-scatter of a whole
// buffer of S bytes: (g-1)/g S; all-reduce: twice that). The closed form of
// docs/memory.md section 10; a training run prints the counted bytes of its first
// step next to it, and make test requires them equal.
static CommBytes comm_bytes(void* t) {
    const Llama* m = &((Trainer*)t)->m;
    int micro_steps = m->micro_steps;
    CommBytes cb = {};
    const LlamaConfig* c = &m->cfg;
    const ParamLayout* lay = &m->st.lay;
    const Comm* cm = m->comm;
    // (under --pp this stage's: its layers, and the embedding's and the head's where it holds them)
    double sx = sizeof(floatX), N = (double)m->B * m->Tl, D = c->D, S = N * D * sx, L = m->act_layers;
    double first = pp_stage_holds(STAGE_FIRST, cm->pp_rank, cm->pp), last = pp_stage_holds(STAGE_LAST, cm->pp_rank, cm->pp);
    double vocab_held = first + last - (cm->pp == 1 && c->tied);  // [V, D] matrices held (a tied one at each end)
    #define ADD(g, k, bytes) comm_bytes_add(&cb, cm, g, k, bytes)
    if (m->tpc.tp > 1) {
        double re2 = m->flags.recompute >= 2, regather = !m->tpc.keep_gathered, vtp = lay->vocab_tp;
        double ends = first + last;  // the vocabulary-parallel embedding's sum and the head's input gradient
        double ce = 3.0 * N * sizeof(float);  // the CE row max, then the sums of exponentials and target logits
        if (!m->tpc.sp) {  // an all-reduce after each row-parallel GEMM and after each pair of column-parallel input gradients
            ADD(GROUP_TP, KIND_ALL_REDUCE, micro_steps * (L * (4 + re2) * S + vtp * ends * S));
        } else {  // forward: gather xn1, xn2, scatter wo, w2; backward: gather dx twice and the inputs again, scatter dxn twice
            ADD(GROUP_TP, KIND_ALL_GATHER, micro_steps * (L * (4 + re2 + 2 * regather) * S + vtp * ends * S));
            ADD(GROUP_TP, KIND_REDUCE_SCATTER, micro_steps * (L * (4 + re2) * S + vtp * ends * S));
            // once per step (a layer's every micro-step under --zero 2, 3): the gradients of the tensors every TP rank
            // holds whole
            double vocab = vtp ? 0 : vocab_held * (double)c->V * D, per = m->st.zero >= 2 ? micro_steps : 1;
            ADD(GROUP_TP, KIND_ALL_REDUCE, (per * L * 2 * D + last * D + vocab) * sx);
        }
        ADD(GROUP_TP, KIND_ALL_REDUCE, micro_steps * vtp * last * ce);
    }
    model_core_comm_bytes(m, &cb, m->B);          // context, data and pipeline parallelism (llmc/train/model_core.h)
    vocab_comm_bytes(&m->voc, &cb, micro_steps);  // the vocabulary over DP (--shard-vocab 1, tp = 1)
    #undef ADD
    return cb;
}

static void plan_lines(void* t, Logger* lg) {
    const Llama* m = &((Trainer*)t)->m;
    if (m->par.shard_vocab) vocab_log_savings(lg, &m->st, HAVE_MASTER_WEIGHTS, m->cfg.D);
}

static int plan_json(void* t, char* out, size_t n) {
    const Llama* m = &((Trainer*)t)->m;
    snprintf(out, n, "\"dp\": %d, \"tp\": %d, \"tp_sp\": %d, \"tp_regather\": %d, \"zero\": %d, \"offload_optim\": %d, "
             "\"shard_vocab\": %d, \"cp\": %d, \"cp_ulysses\": %d, \"n_local\": %zu, \"n_opt\": %zu", m->comm->dp,
             m->comm->tp, m->par.tp_sp, m->par.tp_regather, m->par.zero, m->par.offload_optim, m->par.shard_vocab, m->comm->cp,
             m->comm->ulysses, m->st.lay.n_local, m->st.lay.n_opt);
    return 1;
}

// ----------------------------------------------------------------------------
// --fit-memory and every rank's plan (llmc/train/runner.h): a candidate's memory is its
// plan (llama_build without allocating); its cost the predicted extra time per micro-step
// (docs/memory.md section 8).

// Predicted seconds per micro-step that the memory flags add to the flag-free step:
// recomputed FLOPs, recomputed memory traffic, extra launches, and the part of each
// offload copy that the neighbouring layer's compute cannot hide.
static double fit_cost_seconds(const LlamaConfig* c, int B, int T, const MemoryFlags* f, int n_offload,
                               size_t act_block_bytes, const CostModel* cm) {
    double BT = (double)B * T, D = c->D, F = c->F, hd = (double)c->D / c->H, qd = c->H * hd, kvd = c->KV * hd;
    double sx = sizeof(floatX), L = c->L;
    double attn_fwd = 2.0 * BT * (D * qd + 2.0 * D * kvd + qd * D) + 2.0 * BT * T * qd;  // GEMMs + causal attention
    double ffn_hidden = 2.0 * BT * D * F * 2.0;                                             // w1 and w3 (recomputed)
    int K = f->ffn_chunks;
    double launches = L * (K - 1) * 13.0;        // per extra FFN chunk: 4 forward, 9 backward launches
    if (K > 1) launches += L * K * 3.0;          // the chunk recompute: two GEMMs and SwiGLU
    launches += (f->ce_chunks - 1) * 4.0;        // per extra CE chunk: GEMM, CE, two backward GEMMs
    FitRecompute w = {attn_fwd, ffn_hidden,
                      4.0 * BT * D * sx,         // the two norms: read x, write xn
                      3.0 * BT * F * sx,         // SwiGLU: read h1, h3, write g
                      launches, attn_fwd + ffn_hidden + 2.0 * BT * F * D};  // a layer's forward: + w2
    return fit_recompute_seconds(&w, f, (int)L, n_offload, act_block_bytes, cm);
}

static FitCost plan_cost(void* t, Comm* comm, const FitFlags* ff, const CostModel* cm) {
    const TrainArgs* a = &((Trainer*)t)->a;
    int T = a->T, dp = comm->dp, B = ff->B;
    const MemoryFlags* f = &ff->mem;
    int micro = a->run.total_batch ? (int)(a->run.total_batch / ((long long)B * T * dp)) : 1;
    ParallelFlags pf = fit_parallel_flags(&a->run.par, a->run.shard_vocab, micro, ff);
    long long BT = (long long)B * T;
    FitCost c = {-1.0, 0.0, 0.0, 0, 0.0, 0.0};
    if ((f->ffn_chunk_seq ? BT : a->cfg.F) < f->ffn_chunks || BT < f->ce_chunks) return c;
    Llama m;
    llama_build(&m, &a->cfg, f, &pf, comm, B, T, 0);
    m.micro_steps = micro;
    c = model_core_fit_cost(&m, fit_cost_seconds(&a->cfg, B, T, f, m.off.layers_offloaded, m.acts.block_bytes, cm),
                            (6.0 * (double)m.num_params + 6.0 * a->cfg.L * (double)a->cfg.D * T) * B * T / cm->flops, cm);  // 6N + 6LDT a token
    llama_free(&m);
    return c;
}

// ----------------------------------------------------------------------------
// the runner's operations

static ModelCore* build(void* t, Comm* comm, const MemoryFlags* mem, const ParallelFlags* pf, int B, int allocate) {
    Trainer* x = (Trainer*)t;
    llama_build(&x->m, &x->a.cfg, mem, pf, comm, B, x->a.T, allocate);
    return &x->m;
}

static void model_free(void* t) { llama_free(&((Trainer*)t)->m); }
static void init_params(void* t, uint64_t seed) { llama_init_params(&((Trainer*)t)->m, seed); }

static CkptShape ckpt_shape(void* t) {
    const LlamaConfig* c = &((Trainer*)t)->a.cfg;
    CkptShape s = {8, 2, {"V", "D", "L", "H", "KV", "F", "max_seq_len", "tied"},
                   {c->V, c->D, c->L, c->H, c->KV, c->F, c->max_seq_len, c->tied}, {"rope_theta", "norm_eps"},
                   {c->rope_theta, c->norm_eps}, "--resume and --init-from need the same model: pass the checkpoint's "
                   "dimensions, --rope-theta and --norm-eps; the number of ranks, --zero and --shard-vocab may differ"};
    return s;
}

// the writer's layout for the record (any layout reads the file), then the data's position (llmc/train/token_data.h)
static size_t ckpt_extra(void* t, int h[256], unsigned char extra[CKPT_EXTRA_MAX]) {
    Trainer* x = (Trainer*)t;
    const Llama* m = &x->m;
    h[16] = m->par.zero; h[17] = m->par.shard_vocab; h[20] = m->comm->tp; h[21] = m->comm->pp;
    return token_data_ckpt_write(&x->data, h, extra, m->comm->dp, x->a.run.grad_accum);
}
static int ckpt_restore(void* t, const int* h, const unsigned char* extra, size_t bytes) {
    Trainer* x = (Trainer*)t;
    return token_data_ckpt_read(&x->data, h, extra, bytes, x->m.comm->dp, x->a.run.grad_accum);
}

static void data_restart(void* t, int start, Logger* lg) { token_data_restart(&((Trainer*)t)->data, start, lg); }
static int resolve_batch(void* t, Comm* comm) { return token_batch_resolve(&((Trainer*)t)->a.run, ((Trainer*)t)->a.T, comm->dp); }

// the training and validation tokens, the story sampler
static void start(void* t, Comm* comm, Logger* lg) {
    Trainer* x = (Trainer*)t;
    const TrainArgs* a = &x->a;
    int T = a->T, tp = a->run.par.tp, sample_len = a->sample_len < T ? a->sample_len : T;
    token_data_open(&x->data, a->train_data, a->val_data, a->val_batches, &a->run, T, comm, a->cfg.V, lg);
    if (x->m.tpc.sp) sample_len = sample_len < T / tp * tp ? sample_len : T / tp * tp;  // padded to a multiple of tp
    story_sampler_init(&x->sampler, a->run.sample_every, a->tokenizer, a->tokenizer_given, a->cfg.V, sample_len, T,
                       a->temperature, (uint64_t)a->run.loop.seed);
    x->dloss = 1.0f / (float)((size_t)a->run.B * T * a->run.grad_accum * comm->dp);
}

static void next_batch(void* t, int, int) { dataloader_next_batch(&((Trainer*)t)->data.train); }

// the step's micro-batch through a chunk (one process: the whole model): the forward (with
// the head's backward), then the backward; under --pp the stage's schedule orders them
// (the runner's forward, backward and pp_tensor entries)
static void forward(void* t, int micro, int chunk) {
    Trainer* x = (Trainer*)t;
    const TokenData* d = &x->data;
    llama_select_micro(&x->m, micro);
    int T = chunk == 0 ? llama_stage_batch(&x->m, token_rows(d, d->train.inputs), token_rows(d, d->train.targets), d->B, d->T)
                       : x->m.Tl;
    llama_chunk_forward(&x->m, micro, chunk, d->B, T, MODE_TRAIN, x->dloss);
}
static void backward(void* t, int micro, int chunk, int last) {
    Trainer* x = (Trainer*)t;
    llama_chunk_backward(&x->m, micro, chunk, x->data.B, x->m.Tl, last);
}
static floatX* pp_tensor(void* t, int micro, int chunk, int which) { return llama_pp_tensor(&((Trainer*)t)->m, micro, chunk, which); }

// the model behind llmc/train/token_data.h's validation
static void eval_batch(void* m, const int* inputs, const int* targets) {
    llama_evaluate((Llama*)m, inputs, targets, ((Llama*)m)->B, ((Llama*)m)->T);
}
static float eval_loss(void* m) { return model_core_take_loss((Llama*)m); }
static void validate(void* t, Logger* lg, int step, int) { token_validate(&((Trainer*)t)->data, lg, step, eval_batch, eval_loss, &((Trainer*)t)->m); }
static void val_metrics(void* t, Logger* lg) { token_val_metrics(&((Trainer*)t)->data, lg); }

// the model behind llmc/train/story_sampler.h's samples
static void next_token_logits(void* m, const int* tokens, int T, float* logits, int* pad) {
    llama_next_token_logits((Llama*)m, tokens, T, logits, pad);
}

static void sample(void* t, Logger* lg, int step) {
    Trainer* x = (Trainer*)t;
    if (x->sampler.ready) story_sample(&x->sampler, lg, step, next_token_logits, &x->m);
}

static void finish(void* t) {
    story_sampler_free(&((Trainer*)t)->sampler);
    token_data_free(&((Trainer*)t)->data);
}

static const ModelOps LLAMA_OPS = {
    // program, plan unit, what --init-from starts afresh, --total-batch in tokens, the data flag, --fit-memory's batches
    "train_llama", "layer", "optimizer state, step and data order", NULL, "train-data", 64, 1024,
    // the model and its checkpoints
    build, model_free, init_params, &LLAMA_CKPT, ckpt_shape, ckpt_extra, ckpt_restore, data_restart, checkpoint_check,
    // a step (next_batch; units, unit_forward/backward; forward, backward; fused; the pipeline's tensors)
    next_batch, NULL, NULL, NULL, forward, backward, NULL, pp_tensor,
    // the trainer's own: batch, data, validation, samples
    resolve_batch, NULL, start, validate, val_metrics, sample, finish,
    // the plan and --fit-memory
    print_config, plan_lines, NULL, comm_bytes, plan_json, plan_cost,
};

int main(int argc, char** argv) {
    signals_install();  // first: a signal may come at any instant, MPI's start-up included (llmc/core/signals.h)
    static Trainer x;
    parse_args(argc, argv, &x.a);
    config_validate(&x.a.cfg);
    attention_select(attention_impl_parse(x.a.run.loop.attention), x.a.cfg.D / x.a.cfg.H, 1);  // causal
    return runner_main(&LLAMA_OPS, &x, &x.a.run, x.a.T, x.a.cfg.L);
}
#endif  // TESTING
