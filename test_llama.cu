/*
test_llama: checks train_llama against a reference state file (docs/design.md 5.3) written by
dev/ref/reference_llama.py, an independent PyTorch implementation in float64.

  test_llama --ref FILE [--ffn-chunks K] [--ffn-chunk-dim hidden|seq] [--ce-chunks K]
                        [--offload-act N] [--recompute 0|1|2] [--zero 0|1] [--shard-vocab 0|1]
                        [--micro-batch R] [--fp32-grad-accum 0|1] [--attention auto|fp32|tc|tc2|cudnn]
                        [--tp T] [--tp-mode allreduce|reducescatter] [--tp-recompute-allgather 0|1]
                        [--dump FILE] [--test-plant-tp-bug 1] [--comm nccl|mpi] [--comm-timeout S] [--startup-timeout S]
  mpirun -np N test_llama --ref FILE [...]    the same check with N/T DP ranks of T TP ranks

--micro-batch R runs each rank's rows as micro-steps of R rows whose gradients add up
(gradient accumulation, as --total-batch does in training); --fp32-grad-accum 1 adds
them in an fp32 buffer instead of the gradient buffer.

Under mpirun the file's batch is split over the DP ranks (B must be a multiple of dp =
N/T): each rank runs B/dp rows (the ranks of a TP group the same rows, each its shard of
the model), the gradients are reduced as in training, and rank 0 gathers the logits and
every gradient in the reference layout before comparing them. --dump FILE makes rank 0
write what it compared (logits, loss, gradients, then the step losses; float32) so that
two layouts can be compared bitwise. --test-plant-tp-bug 1 plants nanotron #203's bug
(llmc/parallel/tensor_parallel.h tp_test_plant_bug): the run must fail.

Loads the parameters, runs forward and backward on the file's batch and compares the
logits, the loss and every gradient tensor (max abs error and ||got-ref||/||ref||),
then runs the file's AdamW steps comparing each loss. With any memory flag it also
runs the flag-off model in the same process: flags that keep the arithmetic order
(offload, recompute) must give bitwise the same gradients and losses; the others must
agree within the reference tolerance. Exits non-zero on any failure.
*/
#define TESTING
#include "train_llama.cu"
#include "llmc/core/check.h"
#include "llmc/train/test_args.h"

// Tolerances on the per-tensor relative error ||got - ref|| / ||ref||. The reference is
// float64; an fp32 build of the same math lands near 1e-7..1e-6 on these small
// models, so 1e-5 leaves room for summation order and still catches a wrong term
// (a missing scale, a wrong head mapping, an off-by-one in RoPE are all >= 1e-3).
// bf16 keeps 8 bits of mantissa (relative rounding 2^-9 ~ 2e-3 per stored value):
// activations and gradients are rounded at every layer boundary, so errors of
// 1e-2 relative are expected; 3e-2 still fails any real bug listed above.
#if defined(LLMC_CPU) || defined(ENABLE_FP32)
static const double TOL_LOGITS = 1e-5, TOL_GRADS = 1e-5, TOL_LOSS = 1e-5, TOL_STEP_LOSS = 1e-5;
#else
static const double TOL_LOGITS = 2e-2, TOL_GRADS = 3e-2, TOL_LOSS = 1e-2, TOL_STEP_LOSS = 2e-2;
#endif

#define LREF_MAGIC 20261121
#define LREF_VERSION 1

typedef struct {
    LlamaConfig cfg;
    int B, T;
    RefSteps steps;
    size_t num_params;
    float *params, *logits, *grads, *losses;
    int *inputs, *targets;
    float loss;
} Reference;

static void lref_read(Reference* r, const char* path) {
    memset(r, 0, sizeof(*r));
    int h[256];
    long file_bytes;
    FILE* f = ref_open(path, "LREF", LREF_MAGIC, LREF_VERSION, 13, 32, h, &file_bytes);
    const float* hf = (const float*)h;
    LlamaConfig c = {h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[12], hf[32], hf[33]};
    if (h[12] != 0 && h[12] != 1) FAIL("%s: tied must be 0 or 1 (got %d)", path, h[12]);
    config_validate(&c);
    r->cfg = c; r->B = h[9]; r->T = h[10];
    if (r->B < 1 || r->T < 1 || r->T > c.max_seq_len || h[11] < 0)
        FAIL("%s: bad batch B=%d T=%d (max_seq_len %d) n_steps=%d", path, r->B, r->T, c.max_seq_len, h[11]);
    r->steps = ref_steps(path, h, h[11], 34);
    ParamSpec spec[NUM_PARAM_TENSORS];
    llama_param_specs(&c, spec);
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) r->num_params += param_spec_size(&spec[i], c.L);
    size_t BT = (size_t)r->B * r->T, np = r->num_params;
    size_t want = 1024 + 4 * (np + 2 * BT + BT * c.V + 1 + np + r->steps.n);
    if ((size_t)file_bytes != want)
        FAIL("%s: file has %ld bytes but its header (V=%d D=%d L=%d H=%d KV=%d F=%d B=%d T=%d n_steps=%d tied=%d) "
             "implies %zu (truncated or not an LREF file)", path, file_bytes, c.V, c.D, c.L, c.H, c.KV, c.F, r->B,
             r->T, r->steps.n, c.tied, want);
    r->params = (float*)xmalloc(np * sizeof(float));
    r->inputs = (int*)xmalloc(BT * sizeof(int));
    r->targets = (int*)xmalloc(BT * sizeof(int));
    r->logits = (float*)xmalloc(BT * c.V * sizeof(float));
    r->grads = (float*)xmalloc(np * sizeof(float));
    r->losses = (float*)xmalloc((r->steps.n + 1) * sizeof(float));
    xfread(r->params, sizeof(float), np, f, path);
    xfread(r->inputs, sizeof(int), BT, f, path);
    xfread(r->targets, sizeof(int), BT, f, path);
    xfread(r->logits, sizeof(float), BT * c.V, f, path);
    xfread(&r->loss, sizeof(float), 1, f, path);
    xfread(r->grads, sizeof(float), np, f, path);
    xfread(r->losses, sizeof(float), r->steps.n, f, path);
    fclose(f);
    RefArray arrays[] = {{"parameters", r->params, np}, {"logits", r->logits, BT * c.V}, {"loss", &r->loss, 1},
                         {"gradients", r->grads, np}, {"step losses", r->losses, (size_t)r->steps.n}};
    ref_require_finite(path, arrays, 5);
    for (size_t i = 0; i < BT; i++)
        if (r->inputs[i] < 0 || r->inputs[i] >= c.V || r->targets[i] < 0 || r->targets[i] >= c.V)
            FAIL("%s: token %zu is out of range [0, %d) (input %d, target %d)", path, i, c.V, r->inputs[i], r->targets[i]);
}

// One forward/backward on the reference batch, this rank's B/dp rows of it, in
// micro-steps of m->B rows (--micro-batch) whose gradients add up. On rank 0: the
// reduced gradients in the reference layout and (optionally) all the logits, each
// logit from the rank that computed it (under TP: its rows or its vocabulary columns).
static float run_step(Llama* m, const Reference* r, float* grads_out, float* logits_out) {
    int dp = m->comm->dp, Bl = r->B / dp, micro = m->B, n_micro = Bl / micro, cp = m->comm->cp;
    size_t rows = (size_t)Bl * r->T, off = (size_t)m->comm->dp_rank * rows, V = r->cfg.V;
    size_t my_rows = rows / cp, micro_rows = (size_t)micro * m->Tl;  // this rank's tokens (1/cp of each sample)
    float* mine = logits_out ? (float*)xmalloc(my_rows * V * sizeof(float)) : NULL;
    if (mine) for (size_t i = 0; i < my_rows * V; i++) mine[i] = NAN;  // a chunk that is never written fails
    param_store_zero_grads(&m->st);
    // the micro-steps one after the other, or under --pp through the stage's schedule
    LlamaPass p = {m, r->inputs + off, r->targets + off, micro, r->T, MODE_TRAIN, 1.0f / (float)((size_t)r->B * r->T),
                   mine, micro_rows * V};
    llama_pass(&p, n_micro);
    float loss = model_core_take_loss(m);
    m->capture_logits = NULL;
    if (grads_out) param_store_get_grads(&m->st, grads_out);
    if (mine) {
        size_t n = my_rows * V, world = m->comm->size, tp = m->comm->tp;
        float* all = m->comm->rank == 0 ? (float*)xmalloc(world * n * sizeof(float)) : NULL;
        comm_host_gather(m->comm, GROUP_WORLD, mine, n * sizeof(float), all);
        // world rank q is DP rank q / (tp cp pp), CP member q / tp % cp: its rows (in its token order
        // under cp, llmc/parallel/context_parallel.h); a NaN is a logit that rank did not compute (another
        // TP rank's vocabulary columns, a stage before the last)
        size_t pp = m->comm->pp;
        for (size_t q = 0; all && q < world; q++)
            for (size_t i = 0; i < my_rows; i++) {
                size_t j = i / micro_rows, row = i % micro_rows;  // micro-step, row in it
                size_t tok = cp > 1 ? cp_token_of_row(&m->cpx, (int)(q / tp % cp), micro, row) : row;
                float* dst = logits_out + (q / (tp * cp * pp)) * rows * V + (j * micro_rows * cp + tok) * V;
                for (size_t v = 0; v < V; v++)
                    if (!isnan(all[(q * my_rows + i) * V + v])) dst[v] = all[(q * my_rows + i) * V + v];
            }
        free(all);
        free(mine);
    }
    return loss;
}

// the AdamW steps of the file on its batch; losses[i] before update i
static void run_steps(Llama* m, const Reference* r, float* losses) {
    for (int i = 0; i < r->steps.n; i++) {
        losses[i] = run_step(m, r, NULL, NULL);
        const RefSteps* a = &r->steps;
        model_core_update(m, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->grad_clip, i + 1);
    }
}

int main(int argc, char** argv) {
    signals_ignore_io();  // first: a closed stdout or a file-size limit is an error, not a silent death (llmc/core/signals.h)
    const char* dump = NULL;
    MemoryFlags flags = memory_flags_default();
    int shard_vocab = 0;
    const Flag own[] = {
        {"shard-vocab", 'i', &shard_vocab, "1: embedding and output projection split over the vocabulary"},
        {"dump", 's', &dump, "write the logits, loss and gradients to this file"},
        {"test-plant-tp-bug", 'i', &tp_test_plant_bug, "1: plant the sequence-parallel bug (the check must fail)"},
        {"test-plant-cp-bug", 'i', &cp_test_plant_bug, "1: plant the ring's overwritten-block bug (the check must fail)"},
    };
    TestArgs t;
    test_args_parse(argc, argv, "test_llama", "LREF file (dev/ref/reference_llama.py)", own, (int)(sizeof(own) / sizeof(own[0])),
                    &t, &flags, 1, "context-parallel group size (as the trainer)");
    const ParallelArgs* pa = &t.par;
    int micro_batch = t.micro_batch;
    // test_llama runs one micro-step per row group as given: --fp32-grad-accum 1 runs the
    // fp32 accumulator whatever the count (auto means off here)
    ParallelFlags pf = {pa->zero, shard_vocab, pa->fp32_grad_accum == 1, pa->tp_mode == TP_REDUCESCATTER, pa->tp_regather,
                        pa->zero_reshard, pa->offload_optim, pa->pp_schedule, pa->pp_virtual, 1, pa->pp_layers};
    Comm comm;
    parallel_comm_init(&comm, pa, 0);
    if (comm.rank != 0 && !freopen("/dev/null", "w", stdout)) FAIL("cannot silence rank %d", comm.rank);  // rank 0 reports
    Reference r;
    lref_read(&r, t.ref);
    const LlamaConfig* c = &r.cfg;
    attention_select(attention_impl_parse(t.attention), c->D / c->H, 1);
    if (r.B % comm.dp != 0)
        FAIL("the reference batch B=%d cannot be split over %d DP ranks: B must be a multiple of the number of ranks "
             "(divided by --tp %d x --cp %d)", r.B, comm.dp, comm.tp, comm.cp);
    dev_select(comm_device_index(&comm, dev_count()));
    comm_setup_device(&comm);
    char ref_shown[1024];  // the user's path, escaped (llmc/core/term.h)
    printf("test_llama %s | %s | V=%d D=%d L=%d H=%d KV=%d F=%d T=%d/%d B=%d tied=%d n_steps=%d\n",
           term_escape_str(t.ref, ref_shown, sizeof(ref_shown)),
           PRECISION_NAME, c->V, c->D, c->L, c->H, c->KV, c->F, r.T, c->max_seq_len, r.B, c->tied, r.steps.n);
    int Bl = r.B / comm.dp;
    if (micro_batch == 0) micro_batch = comm.pp > 1 ? 1 : Bl;  // (a pipeline: a micro-batch of one sample by default)
    if (micro_batch < 1 || Bl % micro_batch != 0)
        FAIL("--micro-batch %d must divide the %d rows each rank runs (B=%d over %d DP ranks)", micro_batch, Bl, r.B, comm.dp);
    pf.micro_steps = Bl / micro_batch;
    printf("flags: --ffn-chunks %d --ffn-chunk-dim %s --ce-chunks %d --offload-act %d --recompute %d | dp %d (%d rows "
           "each, %d micro-steps of %d) --zero %d --offload-optim %d --shard-vocab %d --fp32-grad-accum %d\n", flags.ffn_chunks,
           flags.ffn_chunk_seq ? "seq" : "hidden", flags.ce_chunks, flags.offload_act, flags.recompute, comm.dp, Bl,
           Bl / micro_batch, micro_batch, pf.zero, pf.offload_optim, pf.shard_vocab, pf.grad_fp32);
    char cudnn[160];
    attention_cudnn_describe(cudnn, sizeof(cudnn));
    printf("attention: %s%s\n", attention_impl_name(g_attention_impl), cudnn);
    printf("tensor parallelism: tp %d --tp-mode %s --tp-recompute-allgather %d%s\n", comm.tp,
           pf.tp_sp ? "reducescatter" : "allreduce", pf.tp_regather, tp_test_plant_bug ? " | PLANTED BUG (must fail)" : "");
    printf("context parallelism: cp %d --cp-mode %s (%d Ulysses ways x %d ring members)%s\n", comm.cp, CP_MODE_NAMES[pa->cp_mode],
           comm.ulysses, comm.cp / comm.ulysses, cp_test_plant_bug ? " | PLANTED BUG (must fail)" : "");
    printf("pipeline parallelism: pp %d --pp-schedule %s --pp-virtual %d --pp-layers %s\n", comm.pp,
           PP_SCHEDULE_NAMES[pa->pp_schedule], pa->pp_virtual, pa->pp_layers ? pa->pp_layers : "(even)");

    Llama m;
    llama_build(&m, c, &flags, &pf, &comm, micro_batch, r.T, 1);
    model_core_set_params(&m, r.params);
    size_t BT = (size_t)r.B * r.T, np = m.num_params;
    float* logits = (float*)xmalloc(BT * c->V * sizeof(float));
    float* grads = (float*)xmalloc(np * sizeof(float));
    for (size_t i = 0; i < BT * c->V; i++) logits[i] = NAN;
    for (size_t i = 0; i < np; i++) grads[i] = NAN;
    float loss = run_step(&m, &r, grads, logits);

    printf("forward:\n");
    compare("logits", logits, r.logits, BT * c->V, TOL_LOGITS);
    check_scalar("loss", loss, r.loss, TOL_LOSS);
    printf("gradients:\n");
    size_t off = 0;
    for (int i = 0; i < NUM_PARAM_TENSORS; i++) {
        if (m.param_sizes[i] == 0) continue;  // the absent output of a tied model
        compare(m.spec[i].name, grads + off, r.grads + off, m.param_sizes[i], TOL_GRADS);
        off += m.param_sizes[i];
    }

    // the flag-off run in the same process
    // (the same data-parallel layout and micro-steps: --zero, --shard-vocab, --micro-batch and --fp32-grad-accum stay as given)
    MemoryFlags off_flags = memory_flags_default();  // the same layout (ParallelFlags), no memory flag
    ParallelFlags off_pf = pf;  // the optimizer on the device
    off_pf.offload_optim = 0;
    int any_flag = memcmp(&flags, &off_flags, sizeof(flags)) != 0 || pf.offload_optim;
    int same_order = flags.ffn_chunks == 1 && flags.ce_chunks == 1;  // offload and recompute change no sum
    float* base_grads = NULL;
    if (any_flag) {
        Llama base;
        llama_build(&base, c, &off_flags, &off_pf, &comm, micro_batch, r.T, 1);
        model_core_set_params(&base, r.params);
        base_grads = (float*)xmalloc(np * sizeof(float));
        float base_loss = run_step(&base, &r, base_grads, NULL);
        check_flag_off_grads(grads, base_grads, np, loss, base_loss, same_order);
        print_flag_off_plan(&m.dev, &m.host, &base.dev);
        if (r.steps.n > 0) {
            float* l_on = (float*)xmalloc(r.steps.n * sizeof(float));
            float* l_off = (float*)xmalloc(r.steps.n * sizeof(float));
            model_core_set_params(&m, r.params);
            run_steps(&m, &r, l_on);
            run_steps(&base, &r, l_off);
            check_flag_off_steps(l_on, l_off, r.steps.n, same_order);
            if (pf.offload_optim && same_order) check_offload_state(&m.st, &base.st, np);
            free(l_on); free(l_off);
        }
        llama_free(&base);
    }

    float* losses = (float*)xmalloc((r.steps.n + 1) * sizeof(float));
    if (r.steps.n > 0) {
        model_core_set_params(&m, r.params);
        run_steps(&m, &r, losses);
        check_step_losses(losses, r.losses, &r.steps, TOL_STEP_LOSS);
    }
    if (dump && comm.rank == 0) {
        FILE* f = xoutput_fopen(dump, "--dump");  // a FIFO without a reader fails at once, not blocks
        if (fwrite(logits, sizeof(float), BT * c->V, f) != BT * c->V || fwrite(&loss, sizeof(float), 1, f) != 1 ||
            fwrite(grads, sizeof(float), np, f) != np || fwrite(losses, sizeof(float), r.steps.n, f) != (size_t)r.steps.n)
            FAIL("--dump: cannot write %s: %s", dump, strerror(errno));
        xfclose(f, dump, "--dump");
    }
    free(losses);
    llama_free(&m);
    printf("%s: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks, failures);
    fflush(stdout);
    free(logits); free(grads); free(base_grads);
    free(r.params); free(r.inputs); free(r.targets); free(r.logits); free(r.grads); free(r.losses);
    int rc = comm.rank == 0 && failures ? 1 : 0;  // only rank 0 holds the gathered results it compared
    comm_finalize(&comm);
    return rc;
}
