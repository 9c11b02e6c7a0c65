/*
test_dit: checks train_dit against a DiT reference state file (DREF, docs/design.md 9.4) written
by dev/ref/reference_dit.py, an independent PyTorch implementation in float64.

  test_dit --ref FILE [--ffn-chunks K] [--ffn-chunk-dim hidden|seq] [--offload-act N]
                      [--recompute 0|1|2] [--test-skip-prefetch 1] [--zero 0|1]
                      [--micro-batch R] [--fp32-grad-accum 0|1] [--comm nccl|mpi] [--comm-timeout S] [--startup-timeout S]
                      [--tp N] [--tp-mode allreduce|reducescatter] [--tp-recompute-allgather 0|1]
                      [--test-plant-tp-bug 1] [--pp N] [--pp-schedule 1f1b|interleaved]
                      [--pp-virtual V] [--pp-layers a,b,...] [--test-plant-pp-bug 1]

Under mpirun the file's batch is split over the DP ranks (B must be a multiple of dp):
each rank runs its B/dp clips, in micro-steps of --micro-batch clips whose gradients
add up; rank 0 gathers the reduced gradients and every v_pred and compares them. With
--tp N each TP group runs its clips together (under --tp-mode reducescatter each rank
holds 1/N of their tokens in the residual stream). --test-plant-tp-bug 1 plants nanotron
#203's bug (llmc/parallel/tensor_parallel.h tp_test_plant_bug): the run must fail. With
--pp N the blocks are cut into N stages and each rank's clips run as micro-batches (of one
clip unless --micro-batch says) through the stage's schedule; rank 0 takes v_pred from the
last stage. --test-plant-pp-bug 1 puts every micro-batch in slot 0: the run must fail.

Loads the parameters, runs forward and backward on the file's (x0, noise, t, y) and
compares v_pred, the loss and every gradient tensor (max abs error and
||got-ref||/||ref||), then runs the file's AdamW steps comparing each loss. With any
memory flag it also runs the flag-off model in the same process: flags that keep the
arithmetic order (offload, recompute) must give bitwise the same gradients and losses;
FFN chunking must agree within the reference tolerance. Exits non-zero on any failure.
*/
#define TESTING
#include "train_dit.cu"
#include "llmc/core/check.h"
#include "llmc/train/test_args.h"

// Per-tensor relative error ||got - ref|| / ||ref||, as test_llama: fp32 lands near
// 1e-7..1e-6 on these small models; bf16 rounds every stored value to 2^-9.
#if defined(LLMC_CPU) || defined(ENABLE_FP32)
static const double TOL_VPRED = 1e-5, TOL_GRADS = 1e-5, TOL_LOSS = 1e-5, TOL_STEP_LOSS = 1e-5;
#else
static const double TOL_VPRED = 2e-2, TOL_GRADS = 5e-2, TOL_LOSS = 1e-2, TOL_STEP_LOSS = 2e-2;
#endif

#define DREF_MAGIC 20261124
#define DREF_VERSION 1

typedef struct {
    DitConfig cfg;
    int B;
    RefSteps steps;
    size_t num_params, clip;
    float *params, *x0, *noise, *t, *vpred, *grads, *losses;
    int* y;
    float loss;
} Reference;

static void dref_read(Reference* r, const char* path) {
    memset(r, 0, sizeof(*r));
    int h[256];
    long file_bytes;
    FILE* f = ref_open(path, "DREF", DREF_MAGIC, DREF_VERSION, 16, 32, h, &file_bytes);
    const float* hf = (const float*)h;
    DitConfig c = {h[2], h[3], h[4], h[5], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13], hf[32]};
    dit_config_validate(&c);
    r->cfg = c; r->B = h[14];
    if (r->B < 1 || h[15] < 0) FAIL("%s: bad batch B=%d or n_steps=%d", path, r->B, h[15]);
    r->steps = ref_steps(path, h, h[15], 33);
    ParamSpec spec[NUM_DIT_TENSORS];
    dit_param_specs(&c, spec);
    for (int i = 0; i < NUM_DIT_TENSORS; i++) r->num_params += param_spec_size(&spec[i], c.L);
    size_t np = r->num_params, nx = (size_t)r->B * dit_clip_size(&c), B = r->B;
    r->clip = dit_clip_size(&c);
    size_t want = 1024 + 4 * (np + 3 * nx + 2 * B + 1 + np + r->steps.n);
    if ((size_t)file_bytes != want)
        FAIL("%s: file has %ld bytes but its header (C=%d Fr=%d Hi=%d Wi=%d patch %dx%dx%d D=%d L=%d H=%d FF=%d NC=%d "
             "B=%d n_steps=%d) implies %zu (truncated or not a DREF file)", path, file_bytes, c.C, c.Fr, c.Hi, c.Wi,
             c.pt, c.ph, c.pw, c.D, c.L, c.H, c.FF, c.NC, r->B, r->steps.n, want);
    r->params = (float*)xmalloc(np * sizeof(float));
    r->x0 = (float*)xmalloc(nx * sizeof(float));
    r->noise = (float*)xmalloc(nx * sizeof(float));
    r->t = (float*)xmalloc(B * sizeof(float));
    r->y = (int*)xmalloc(B * sizeof(int));
    r->vpred = (float*)xmalloc(nx * sizeof(float));
    r->grads = (float*)xmalloc(np * sizeof(float));
    r->losses = (float*)xmalloc((r->steps.n + 1) * sizeof(float));
    xfread(r->params, sizeof(float), np, f, path);
    xfread(r->x0, sizeof(float), nx, f, path);
    xfread(r->noise, sizeof(float), nx, f, path);
    xfread(r->t, sizeof(float), B, f, path);
    xfread(r->y, sizeof(int), B, f, path);
    xfread(r->vpred, sizeof(float), nx, f, path);
    xfread(&r->loss, sizeof(float), 1, f, path);
    xfread(r->grads, sizeof(float), np, f, path);
    xfread(r->losses, sizeof(float), r->steps.n, f, path);
    fclose(f);
    RefArray arrays[] = {{"parameters", r->params, np}, {"x0", r->x0, nx}, {"noise", r->noise, nx}, {"t", r->t, B},
                         {"v_pred", r->vpred, nx}, {"loss", &r->loss, 1}, {"gradients", r->grads, np},
                         {"step losses", r->losses, (size_t)r->steps.n}};
    ref_require_finite(path, arrays, (int)(sizeof(arrays) / sizeof(arrays[0])));
    for (size_t i = 0; i < B; i++)
        if (r->y[i] < 0 || r->y[i] > c.NC)
            FAIL("%s: class %d of clip %zu is outside [0, %d] (%d = the null class)", path, r->y[i], i, c.NC, c.NC);
}

static void dref_free(Reference* r) {
    free(r->params); free(r->x0); free(r->noise); free(r->t); free(r->y); free(r->vpred); free(r->grads); free(r->losses);
}

// One forward/backward on the file's batch, this rank's B/dp clips of it, in micro-steps of
// m->B clips (under --pp through the stage's schedule); on rank 0 the reduced gradients and
// every v_pred (optional) in file order. Returns the loss over the whole batch.
static float run_step(Dit* m, const Reference* r, float* grads_out, float* vpred_out) {
    int dp = m->comm->dp, Bl = r->B / dp, micro = m->B, n_micro = Bl / micro;
    size_t clip = r->clip, c0 = (size_t)m->comm->dp_rank * Bl;
    float* mine = vpred_out ? (float*)xmalloc((size_t)Bl * clip * sizeof(float)) : NULL;
    param_store_zero_grads(&m->st);
    DitPass p = {m, r->x0 + c0 * clip, r->noise + c0 * clip, r->t + c0, r->y + c0, micro, MODE_TRAIN,
                 1.0f / (float)((double)r->B * clip), NULL, mine};
    dit_pass(&p, n_micro);
    float loss = model_core_take_loss(m);  // over every rank's rows
    if (grads_out) param_store_get_grads(&m->st, grads_out);
    if (mine) {
        // world rank q is DP rank q / (pp cp tp), pipeline stage q / (cp tp) % pp (dp x pp x cp x tp),
        // and DP rank order is clip order; only the last stage computed v_pred, which the ranks of its
        // TP group and the members of its CP group hold alike: the first of them gives it
        size_t world = m->comm->size, inner = (size_t)m->comm->cp * m->comm->tp, pp = m->comm->pp;
        size_t bytes = (size_t)Bl * clip * sizeof(float);
        float* all = m->comm->rank == 0 ? (float*)xmalloc(bytes * world) : NULL;  // the gather's root
        comm_host_gather(m->comm, GROUP_WORLD, mine, bytes, all);
        for (size_t q = 0; all && q < world; q++)
            if (q % inner == 0 && q / inner % pp == pp - 1)
                memcpy((char*)vpred_out + q / (inner * pp) * bytes, (char*)all + q * bytes, bytes);
        free(all);
        free(mine);
    }
    return loss;
}

static void run_steps(Dit* m, const Reference* r, float* losses) {
    param_store_set_state(&m->st, r->params, NULL, NULL);
    for (int i = 0; i < r->steps.n; i++) {
        losses[i] = run_step(m, r, NULL, NULL);
        float norm = param_store_grad_norm(&m->st);
        const RefSteps* a = &r->steps;
        param_store_apply_update(&m->st, a->lr, a->beta1, a->beta2, a->eps, a->weight_decay, a->grad_clip, norm, i + 1);
    }
}

int main(int argc, char** argv) {
    signals_ignore_io();  // first: a closed stdout or a file-size limit is an error, not a silent death (llmc/core/signals.h)
    MemoryFlags flags = memory_flags_default();
    TestArgs t;
    const Flag own[] = {
        {"test-plant-tp-bug", 'i', &tp_test_plant_bug, "1: plant the sequence-parallel bug (the check must fail)"},
        {"test-plant-cp-bug", 'i', &cp_test_plant_bug, "1: plant the ring's overwritten-block bug (the check must fail)"},
    };
    test_args_parse(argc, argv, "test_dit", "DREF file (dev/ref/reference_dit.py)", own, (int)(sizeof(own) / sizeof(own[0])), &t, &flags, 0,
                    "context-parallel group size (as the trainer)");
    const ParallelArgs* pa = &t.par;
    int micro_batch = t.micro_batch;

    Comm comm;
    parallel_comm_init(&comm, pa, 0);
    if (comm.rank != 0 && !freopen("/dev/null", "w", stdout)) FAIL("cannot silence rank %d", comm.rank);  // rank 0 reports
    Reference r;
    dref_read(&r, t.ref);
    const DitConfig* c = &r.cfg;
    attention_select(attention_impl_parse(t.attention), c->D / c->H, 0);
    char ref_shown[1024];  // the user's path, escaped (llmc/core/term.h)
    printf("test_dit %s | %s | clip %dx%dx%dx%d patch %dx%dx%d | D=%d L=%d H=%d FF=%d NC=%d B=%d n_steps=%d\n",
           term_escape_str(t.ref, ref_shown, sizeof(ref_shown)), PRECISION_NAME, c->C, c->Fr, c->Hi, c->Wi, c->pt, c->ph, c->pw, c->D, c->L, c->H, c->FF, c->NC,
           r.B, r.steps.n);
    if (r.B % comm.dp != 0)
        FAIL("the reference batch B=%d cannot be split over %d DP ranks: B must be a multiple of the number of ranks "
             "(divided by --tp %d)", r.B, comm.dp, comm.tp);
    int Bl = r.B / comm.dp;
    if (micro_batch == 0) micro_batch = comm.pp > 1 ? 1 : Bl;  // (a pipeline: a micro-batch of one clip by default)
    if (micro_batch < 1 || Bl % micro_batch != 0)
        FAIL("--micro-batch %d must divide the %d clips each rank runs (B=%d over %d DP ranks)", micro_batch, Bl, r.B, comm.dp);
    int n_micro = Bl / micro_batch;
    ParallelFlags par = parallel_flags_resolve(pa, 0, n_micro);
    char cudnn[160];
    attention_cudnn_describe(cudnn, sizeof(cudnn));
    printf("flags: --ffn-chunks %d --ffn-chunk-dim %s --offload-act %d --recompute %d | attention %s%s | dp %d (%d clips "
           "each, micro-batch %d) --zero %d --offload-optim %d --fp32-grad-accum %d\n", flags.ffn_chunks, FFN_CHUNK_DIM_NAMES[flags.ffn_chunk_seq], flags.offload_act,
           flags.recompute, attention_impl_name(g_attention_impl), cudnn, comm.dp, Bl, micro_batch, par.zero, par.offload_optim, par.grad_fp32);
    printf("tensor parallelism: tp %d --tp-mode %s --tp-recompute-allgather %d%s\n", comm.tp, TP_MODE_NAMES[pa->tp_mode], pa->tp_regather,
           tp_test_plant_bug ? " | PLANTED BUG (must fail)" : "");
    printf("context parallelism: cp %d --cp-mode %s (%d Ulysses ways x %d ring members)%s\n", comm.cp, CP_MODE_NAMES[pa->cp_mode],
           comm.ulysses, comm.cp / comm.ulysses, cp_test_plant_bug ? " | PLANTED BUG (must fail)" : "");
    printf("pipeline parallelism: pp %d --pp-schedule %s --pp-virtual %d --pp-layers %s%s\n", comm.pp,
           PP_SCHEDULE_NAMES[pa->pp_schedule], pa->pp_virtual, pa->pp_layers ? pa->pp_layers : "(even)",
           pp_test_plant_bug ? " | PLANTED BUG (must fail)" : "");
    dev_select(comm_device_index(&comm, dev_count()));
    comm_setup_device(&comm);

    Dit m;
    dit_build(&m, c, &flags, &par, &comm, micro_batch, 1);
    m.keep_vpred = 1;
    param_store_set_state(&m.st, r.params, NULL, NULL);
    size_t np = m.num_params, nx = (size_t)r.B * r.clip;
    float* grads = (float*)xmalloc(np * sizeof(float));
    float* vpred = (float*)xmalloc(nx * sizeof(float));
    for (size_t i = 0; i < np; i++) grads[i] = NAN;
    float loss = run_step(&m, &r, grads, vpred);

    printf("forward:\n");
    compare("v_pred", vpred, r.vpred, nx, TOL_VPRED);
    check_scalar("loss", loss, r.loss, TOL_LOSS);
    printf("gradients:\n");
    for (int i = 0; i < NUM_DIT_TENSORS; i++)
        compare(m.spec[i].name, grads + m.param_off[i], r.grads + m.param_off[i], m.param_sizes[i], TOL_GRADS);

    MemoryFlags off_flags = memory_flags_default();
    ParallelFlags off_par = par;  // the optimizer on the device
    off_par.offload_optim = 0;
    if (memcmp(&flags, &off_flags, sizeof(flags)) != 0 || par.offload_optim) {
        int same_order = flags.ffn_chunks == 1;  // offload and recompute change no sum
        Dit base;
        // the same layout and micro-steps (--zero, --micro-batch, --fp32-grad-accum as given), no memory flag
        dit_build(&base, c, &off_flags, &off_par, &comm, micro_batch, 1);
        param_store_set_state(&base.st, r.params, NULL, NULL);
        float* base_grads = (float*)xmalloc(np * sizeof(float));
        float base_loss = run_step(&base, &r, base_grads, NULL);
        check_flag_off_grads(grads, base_grads, np, loss, base_loss, same_order);
        print_flag_off_plan(&m.dev, &m.host, &base.dev);
        if (r.steps.n > 0) {
            float* l_on = (float*)xmalloc(r.steps.n * sizeof(float));
            float* l_off = (float*)xmalloc(r.steps.n * sizeof(float));
            run_steps(&m, &r, l_on);
            run_steps(&base, &r, l_off);
            check_flag_off_steps(l_on, l_off, r.steps.n, same_order);
            if (par.offload_optim && same_order) check_offload_state(&m.st, &base.st, np);
            free(l_on); free(l_off);
        }
        free(base_grads);
        dit_free(&base);
    }

    if (r.steps.n > 0) {
        float* losses = (float*)xmalloc(r.steps.n * sizeof(float));
        run_steps(&m, &r, losses);
        check_step_losses(losses, r.losses, &r.steps, TOL_STEP_LOSS);
        free(losses);
    }
    dit_free(&m);
    printf("%s: %d checks, %d failed\n", failures ? "FAIL" : "PASS", checks, failures);
    free(grads); free(vpred);
    dref_free(&r);
    int rc = comm.rank == 0 && failures ? 1 : 0;  // only rank 0 holds the gathered results it compared
    comm_finalize(&comm);
    return rc;
}
