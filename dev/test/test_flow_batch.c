/*
Unit test of llmc/train/flow_batch.h's label dropout (train_dit --label-dropout): the
batches of flow_batch_train over the moving-digits source (llmc/io/video_data.h), one process.

  g++ -O2 -x c++ -DLLMC_CPU -Wall -Wextra -Wno-unused-function -I. dev/test/test_flow_batch.c -o build/test_flow_batch -lm
  ./build/test_flow_batch      # one line per check: PASS name / FAIL name: why; exit status non-zero on any failure

Checks, over 400 steps of 50 clips (20000 labels, NC = 10, null class 10):
  - p = 0: no label is the null class, every label is the source's own;
  - p = 1: every label is the null class;
  - p = 0.25: the null fraction is within 5 binomial sigmas of 0.25 (sigma = sqrt(p(1-p)/n) = 0.0031),
    and each kept label is the source's own;
  - p = 0.1 drops a subset of p = 0.25's clips (one uniform u per clip, null when u < p,
    as scripts/pytorch_dit.py draws it);
  - the dropout changes nothing but the labels (the clips, noise and t of p = 0 and p = 1 are equal);
  - the same seed gives the same labels, noise and t (a second pass over the same steps),
    another seed other labels;
  - the labels of a step are those of the step's clips whatever the DP layout (dp = 2: each
    rank's half of the dp = 1 batch).
*/
#include "llmc/kernels/cpu/device.h"  // the stream and event calls llmc/parallel/comm.h names (as in train_dit.cu)
#include "llmc/train/flow_batch.h"

static int g_fail = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) printf("PASS %s\n", name);
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

enum { NC = 10, B = 50, STEPS = 400, N = B * STEPS, C = 1, FR = 1, HI = 8, WI = 6 };
static const size_t CLIP = (size_t)C * FR * HI * WI;

// every label (and, when given, the noise and t) of STEPS steps of flow_batch_train at dropout p
static void draw(ClipSource* src, const Comm* comm, uint64_t seed, float p, int* y, float* noise, float* t) {
    FlowBatch b;
    flow_batch_alloc(&b, B, CLIP);
    for (int step = 1; step <= STEPS; step++) {
        flow_batch_train(&b, src, step, 0, 1, comm, seed, p, NC);
        size_t at = (size_t)(step - 1) * B;
        memcpy(y + at, b.y, B * sizeof(int));
        if (noise) memcpy(noise + at * CLIP, b.noise, B * CLIP * sizeof(float));
        if (t) memcpy(t + at, b.t, B * sizeof(float));
    }
    flow_batch_free(&b);
}

static int count_null(const int* y, int n) {
    int k = 0;
    for (int i = 0; i < n; i++) k += y[i] == NC;
    return k;
}

// each label that is not the null class is the source's own label of that clip (clip i of the run is source clip i)
static int kept_are_source(ClipSource* src, const int* y, int n, char* why, size_t whylen) {
    float* clip = (float*)xmalloc(CLIP * sizeof(float));
    int ok = 1;
    for (int i = 0; i < n && ok; i++) {
        int label;
        clipsource_get(src, (uint64_t)i, clip, &label);
        if (y[i] != NC && y[i] != label) { snprintf(why, whylen, "clip %d has label %d, the source's is %d", i, y[i], label); ok = 0; }
        if (label < 0 || label >= NC) { snprintf(why, whylen, "clip %d: source label %d outside [0, %d)", i, label, NC); ok = 0; }
    }
    free(clip);
    return ok;
}

int main(void) {
    ClipSource src;
    clipsource_init_synthetic(&src, C, FR, HI, WI, NC, 1337, 0);
    Comm comm;
    comm_init_plan(&comm, 1, 1, 1, 1, 1);  // one process: dp = 1, rank 0 (flow_batch_train reads dp and dp_rank only)
    const uint64_t seed = 1337;
    int *y0 = (int*)xmalloc(N * sizeof(int)), *y1 = (int*)xmalloc(N * sizeof(int)), *yq = (int*)xmalloc(N * sizeof(int));
    int *yq2 = (int*)xmalloc(N * sizeof(int)), *ys = (int*)xmalloc(N * sizeof(int)), *y10 = (int*)xmalloc(N * sizeof(int));
    float *n0 = (float*)xmalloc((size_t)N * CLIP * sizeof(float)), *n1 = (float*)xmalloc((size_t)N * CLIP * sizeof(float));
    float *t0 = (float*)xmalloc(N * sizeof(float)), *t1 = (float*)xmalloc(N * sizeof(float));
    char why[512];

    // p = 0: nothing dropped, the source's labels
    draw(&src, &comm, seed, 0.0f, y0, n0, t0);
    int k = count_null(y0, N);
    snprintf(why, sizeof why, "%d of %d labels are the null class %d", k, N, NC);
    check("dropout_0_no_null", k == 0, why);
    why[0] = 0;
    check("dropout_0_source_labels", kept_are_source(&src, y0, N, why, sizeof why), why);

    // p = 1: everything dropped
    draw(&src, &comm, seed, 1.0f, y1, n1, t1);
    k = count_null(y1, N);
    snprintf(why, sizeof why, "%d of %d labels are the null class %d", k, N, NC);
    check("dropout_1_all_null", k == N, why);
    int same = memcmp(n0, n1, (size_t)N * CLIP * sizeof(float)) == 0 && memcmp(t0, t1, N * sizeof(float)) == 0;
    check("dropout_changes_only_labels", same, "the noise or t of p = 0 and p = 1 differ");

    // p = 0.25: a binomial count
    const double p = 0.25;
    draw(&src, &comm, seed, (float)p, yq, n1, t1);
    k = count_null(yq, N);
    double sigma = sqrt(N * p * (1.0 - p)), z = (k - N * p) / sigma;
    snprintf(why, sizeof why, "%d of %d null (fraction %.4f), %.1f sigma from %.2f (bound 5)", k, N, (double)k / N, z, p);
    check("dropout_0.25_fraction", fabs(z) <= 5.0, why);
    printf("  (p = 0.25: %d of %d null, fraction %.4f, %+.2f sigma)\n", k, N, (double)k / N, z);
    why[0] = 0;
    check("dropout_0.25_kept_labels", kept_are_source(&src, yq, N, why, sizeof why), why);

    // p = 0.1 drops a subset of the clips p = 0.25 drops, and fewer of them
    draw(&src, &comm, seed, 0.1f, y10, NULL, NULL);
    int subset = 1, k10 = count_null(y10, N);
    for (int i = 0; i < N; i++) subset &= y10[i] != NC || yq[i] == NC;
    snprintf(why, sizeof why, "p = 0.1 drops %d clips, not all among p = 0.25's %d (one uniform per clip: null when u < p)", k10, k);
    check("dropout_monotone_in_p", subset && k10 < k, why);

    // determinism: the same seed, the same numbers (the draws of another FlowBatch, after other draws)
    draw(&src, &comm, seed, (float)p, yq2, n0, t0);
    same = memcmp(yq, yq2, N * sizeof(int)) == 0;
    check("same_seed_same_labels", same, "a second pass with the same seed drew other labels");
    same = memcmp(n0, n1, (size_t)N * CLIP * sizeof(float)) == 0 && memcmp(t0, t1, N * sizeof(float)) == 0;
    check("same_seed_same_noise_t", same, "a second pass with the same seed drew other noise or t");
    draw(&src, &comm, seed + 1, (float)p, ys, NULL, NULL);
    int differ = 0;
    for (int i = 0; i < N; i++) differ += (ys[i] == NC) != (yq[i] == NC);
    snprintf(why, sizeof why, "seed %llu and %llu drop the same clips", (unsigned long long)seed, (unsigned long long)seed + 1);
    check("other_seed_other_labels", differ > N / 10, why);

    // the DP layout: two ranks of 25 clips each draw the labels of the one-process batch of 50
    {
        FlowBatch half;
        flow_batch_alloc(&half, B / 2, CLIP);
        Comm two = comm;
        two.dp = 2;
        int ok = 1;
        for (int step = 1; step <= 20 && ok; step++)
            for (int r = 0; r < 2; r++) {
                two.dp_rank = r;
                flow_batch_train(&half, &src, step, 0, 1, &two, seed, (float)p, NC);
                ok &= memcmp(half.y, yq + (size_t)(step - 1) * B + r * (B / 2), (B / 2) * sizeof(int)) == 0;
            }
        flow_batch_free(&half);
        check("dropout_same_for_dp2", ok, "dp = 2 ranks drew other labels than the dp = 1 batch");
    }

    free(y0); free(y1); free(yq); free(yq2); free(ys); free(y10); free(n0); free(n1); free(t0); free(t1);
    clipsource_free(&src);
    return g_fail ? 1 : 0;
}
