/*
Unit test of ring attention's log-sum-exp merge on the CPU twins (llmc/kernels/cpu/attention_merge.h,
llmc/kernels/cpu/attention.h): attention computed by blocks and merged must be attention computed
whole, forward and backward, as llmc/parallel/context_parallel.h's ring relies on.

For each shape (B 1-3 samples, T cut into 2..8 equal blocks of C tokens, H query heads
over KV key/value heads with GQA ratios 1, 2, 4, head dims 4..72), causal and not, on
random q, k, v, dout (never zero):
  whole:     attention_forward / attention_full_forward over all T tokens (out, lse), and
             the backward (dq, dk, dv) from that out and lse;
  by blocks: query block i against every key block j it may see, in the ring's order (its
             own block first, then i-1, i-2, ... wrapping round): causal: j < i with the
             full kernel, j = i with the causal kernel, j > i skipped; not causal: every j
             with the full kernel. Each partial (out, lse) is merged into the running fp32
             one by attention_merge (first = 1 for the first, out written at the last).
             The backward runs attention_backward / attention_full_backward on each pair
             with the merged out and lse of block i (what the ring saves), and sums the
             partial dq into block i and dk, dv into block j (float_accumulate).
Both must agree: every element within RTOL (|ref| + rms(ref)), rms over the whole tensor, for out,
lse, dq, dk and dv (errors are those of fp32 sums taken in another order; the worst seen
is printed). Two controls show the comparison can fail: a merge that drops the last
block of the last query block, and a backward that drops one pair's dk, must each FAIL it.

  make build/test_attention_merge && build/test_attention_merge
prints PASS/FAIL lines (dev/test/run_tests.sh counts them); exit status non-zero on failure.
*/
#ifndef LLMC_CPU
#define LLMC_CPU
#endif
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <stdint.h>
#include <time.h>
#include <vector>
#include <omp.h>
#include "llmc/core/common.h"
#include "llmc/kernels/cpu/attention.h"
#include "llmc/kernels/cpu/attention_merge.h"

static const double RTOL = 1e-5;
static int g_fail = 0, g_pass = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

static uint64_t g_rng = 0x2545F4914F6CDD1Dull;
static double uni01(void) {
    g_rng ^= g_rng << 13; g_rng ^= g_rng >> 7; g_rng ^= g_rng << 17;
    return (g_rng >> 11) * (1.0 / 9007199254740992.0);
}
// a random value in +-[lo, hi): never zero
static float nonzero(float lo, float hi) {
    float m = (float)(lo + (hi - lo) * uni01());
    return uni01() < 0.5 ? -m : m;
}
static std::vector<float> rand_vec(size_t n, float lo, float hi) {
    std::vector<float> v(n);
    for (auto& x : v) x = nonzero(lo, hi);
    return v;
}

struct Shape { int B, nblk, C, H, KV, hd; };

// block i (tokens [iC, (i+1)C)) of x [B, T, nh, hd] as a contiguous [B, C, nh, hd]
static std::vector<float> get_block(const std::vector<float>& x, const Shape& s, int nh, int i) {
    int T = s.nblk * s.C;
    size_t row = (size_t)s.C * nh * s.hd;
    std::vector<float> out((size_t)s.B * row);
    for (int b = 0; b < s.B; b++)
        memcpy(out.data() + b * row, x.data() + ((size_t)b * T + (size_t)i * s.C) * nh * s.hd, row * sizeof(float));
    return out;
}
// block i of lse [B, H, T] as [B, H, C]
static std::vector<float> get_lse_block(const std::vector<float>& l, const Shape& s, int i) {
    int T = s.nblk * s.C;
    std::vector<float> out((size_t)s.B * s.H * s.C);
    for (int bh = 0; bh < s.B * s.H; bh++)
        memcpy(out.data() + (size_t)bh * s.C, l.data() + (size_t)bh * T + (size_t)i * s.C, s.C * sizeof(float));
    return out;
}

static double rms(const std::vector<float>& x) {
    double ss = 0;
    for (float r : x) ss += (double)r * r;
    return x.empty() ? 0 : sqrt(ss / x.size());
}
// worst |got - ref| / (|ref| + rms), rms that of the whole tensor (a block's own can be 0:
// the first query of a causal sample has dq = 0); NaN or a size mismatch: infinity
static double worst_rel(const std::vector<float>& got, const std::vector<float>& ref, double rms) {
    if (got.size() != ref.size()) return INFINITY;
    double w = 0;
    for (size_t i = 0; i < ref.size(); i++) {
        double e = fabs((double)got[i] - ref[i]) / (fabs((double)ref[i]) + rms);
        if (!(e == e)) return INFINITY;
        if (e > w) w = e;
    }
    return w;
}

enum { E_OUT, E_LSE, E_DQ, E_DK, E_DV, NE };
static const char* E_NAMES[NE] = {"out", "lse", "dq", "dk", "dv"};

// does query block i see key block j, and with which kernel (1 causal, 2 full, 0 not)
static int pair_kind(int causal, int i, int j) { return !causal ? 2 : j > i ? 0 : j == i ? 1 : 2; }

// worst errors of the blockwise computation against the whole one; plant: 1 drops the
// last merge of the last query block, 2 the dk of one pair
static void run_shape(const Shape& s, int causal, int plant, double err[NE]) {
    const int B = s.B, nblk = s.nblk, C = s.C, H = s.H, KV = s.KV, hd = s.hd, T = nblk * C;
    const size_t nq = (size_t)B * T * H * hd, nk = (size_t)B * T * KV * hd, nl = (size_t)B * H * T;
    const size_t bq = nq / nblk, bk = nk / nblk, bl = nl / nblk;
    auto q = rand_vec(nq, 0.05f, 1.5f), k = rand_vec(nk, 0.05f, 1.5f), v = rand_vec(nk, 0.05f, 1.0f);
    auto dout = rand_vec(nq, 0.05f, 1.0f);
    std::vector<float> out(nq), lse(nl), dq(nq), dk(nk), dv(nk);
    if (causal) attention_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H, KV, hd, 0);
    else attention_full_forward(out.data(), lse.data(), q.data(), k.data(), v.data(), B, T, H, KV, hd, 0);
    if (causal)
        attention_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(), lse.data(), B,
                           T, H, KV, hd, 0);
    else
        attention_full_backward(dq.data(), dk.data(), dv.data(), dout.data(), q.data(), k.data(), v.data(), out.data(),
                                lse.data(), B, T, H, KV, hd, 0);
    std::vector<std::vector<float>> qb(nblk), kb(nblk), vb(nblk), ob(nblk), lb(nblk), db(nblk);
    for (int i = 0; i < nblk; i++) {
        qb[i] = get_block(q, s, H, i); kb[i] = get_block(k, s, KV, i); vb[i] = get_block(v, s, KV, i);
        db[i] = get_block(dout, s, H, i);
    }
    for (int e = 0; e < NE; e++) err[e] = 0;
    // forward: each query block over the key blocks it sees, in the ring's order
    std::vector<float> part(bq), lpart(bl), acc(bq);
    for (int i = 0; i < nblk; i++) {
        int total = 0, seen = 0;
        for (int j = 0; j < nblk; j++) total += pair_kind(causal, i, j) != 0;
        if (plant == 1 && i == nblk - 1) total--;  // the planted bug: the last block is never merged
        ob[i].assign(bq, NAN);
        lb[i].assign(bl, NAN);
        for (int st = 0; st < nblk && seen < total; st++) {
            int j = (i - st + nblk) % nblk, kind = pair_kind(causal, i, j);
            if (!kind) continue;
            if (kind == 1) attention_forward(part.data(), lpart.data(), qb[i].data(), kb[j].data(), vb[j].data(), B, C, H, KV, hd, 0);
            else attention_full_forward(part.data(), lpart.data(), qb[i].data(), kb[j].data(), vb[j].data(), B, C, H, KV, hd, 0);
            seen++;
            attention_merge(acc.data(), lb[i].data(), seen == total ? ob[i].data() : NULL, part.data(), lpart.data(), B, C, H, hd,
                            seen == 1, 0);
        }
        err[E_OUT] = fmax(err[E_OUT], worst_rel(ob[i], get_block(out, s, H, i), rms(out)));
        err[E_LSE] = fmax(err[E_LSE], worst_rel(lb[i], get_lse_block(lse, s, i), rms(lse)));
    }
    if (plant == 1) return;
    // backward: every pair with block i's merged out and lse; partials summed in fp32
    std::vector<std::vector<float>> dqs(nblk, std::vector<float>(bq, 0.0f)), dks(nblk, std::vector<float>(bk, 0.0f)),
        dvs(nblk, std::vector<float>(bk, 0.0f));
    std::vector<float> dq_p(bq), dk_p(bk), dv_p(bk);
    int pairs = 0;
    for (int i = 0; i < nblk; i++)
        for (int st = 0; st < nblk; st++) {
            int j = (i - st + nblk) % nblk, kind = pair_kind(causal, i, j);
            if (!kind) continue;
            if (kind == 1)
                attention_backward(dq_p.data(), dk_p.data(), dv_p.data(), db[i].data(), qb[i].data(), kb[j].data(), vb[j].data(),
                                   ob[i].data(), lb[i].data(), B, C, H, KV, hd, 0);
            else
                attention_full_backward(dq_p.data(), dk_p.data(), dv_p.data(), db[i].data(), qb[i].data(), kb[j].data(),
                                        vb[j].data(), ob[i].data(), lb[i].data(), B, C, H, KV, hd, 0);
            float_accumulate(dqs[i].data(), dq_p.data(), bq, 0);
            if (!(plant == 2 && pairs++ == 0)) float_accumulate(dks[j].data(), dk_p.data(), bk, 0);  // planted: one pair's dk lost
            float_accumulate(dvs[j].data(), dv_p.data(), bk, 0);
        }
    for (int i = 0; i < nblk; i++) {
        err[E_DQ] = fmax(err[E_DQ], worst_rel(dqs[i], get_block(dq, s, H, i), rms(dq)));
        err[E_DK] = fmax(err[E_DK], worst_rel(dks[i], get_block(dk, s, KV, i), rms(dk)));
        err[E_DV] = fmax(err[E_DV], worst_rel(dvs[i], get_block(dv, s, KV, i), rms(dv)));
    }
}

static void shape_name(char* buf, size_t n, const Shape& s, int causal) {
    snprintf(buf, n, "%s,B=%d,T=%d=%dx%d,H=%d,KV=%d,hd=%d", causal ? "causal" : "full", s.B, s.nblk * s.C, s.nblk, s.C, s.H,
             s.KV, s.hd);
}

int main(void) {
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    // tiny shapes: thousands of parallel regions of microseconds each, where more threads only
    // add barrier waits (0.2 s on one thread, 5-10 s on two cores another job keeps busy); the
    // twins give the same bits for any thread count. OMP_NUM_THREADS still decides when set.
    if (!getenv("OMP_NUM_THREADS")) omp_set_num_threads(1);
    // shapes: named ones (blocks of one token, blocks that cross the twin's 8-key groups,
    // a whole T that crosses its 112-key tile at hd 72), then generated ones
    std::vector<Shape> shapes = {{1, 2, 1, 1, 1, 4},   {1, 8, 1, 4, 1, 8},   {2, 3, 5, 4, 2, 12}, {3, 4, 7, 8, 2, 33},
                                 {1, 8, 16, 4, 1, 72}, {2, 5, 9, 2, 2, 64},  {1, 6, 24, 4, 4, 16}, {3, 2, 13, 6, 3, 5},
                                 {2, 7, 3, 8, 4, 48},  {1, 2, 40, 2, 1, 72}};
    const int hds[] = {4, 6, 7, 8, 12, 16, 20, 31, 32, 33, 48, 64, 72};
    const int ratios[] = {1, 2, 4};
    for (int n = 0; n < 40; n++) {
        Shape s;
        s.B = 1 + (int)(uni01() * 3);
        s.nblk = 2 + (int)(uni01() * 7);
        s.C = 1 + (int)(uni01() * 12);
        int ratio = ratios[n % 3];
        s.KV = 1 + (int)(uni01() * 3);
        s.H = s.KV * ratio;
        s.hd = hds[(int)(uni01() * (sizeof hds / sizeof hds[0]))];
        shapes.push_back(s);
    }
    char name[160], why[400];
    for (int causal = 1; causal >= 0; causal--) {
        double worst[NE] = {0, 0, 0, 0, 0};
        int bad_fwd = 0, bad_bwd = 0;
        for (const Shape& s : shapes) {
            double err[NE];
            run_shape(s, causal, 0, err);
            shape_name(name, sizeof name, s, causal);
            for (int e = 0; e < NE; e++) {
                worst[e] = fmax(worst[e], err[e]);
                if (!(err[e] <= RTOL)) {
                    (e <= E_LSE ? bad_fwd : bad_bwd)++;
                    snprintf(why, sizeof why, "%s: worst |blocks - whole| / (|whole| + rms) %.3g > %.0e", E_NAMES[e], err[e], RTOL);
                    char n2[200];
                    snprintf(n2, sizeof n2, "merge_%s[%s]", e <= E_LSE ? "forward" : "backward", name);
                    check(n2, 0, why);
                }
            }
        }
        if (!bad_fwd) {
            snprintf(name, sizeof name, "merge_forward[%s: %zu shapes, out %.2g lse %.2g of rtol %.0e]", causal ? "causal" : "full",
                     shapes.size(), worst[E_OUT], worst[E_LSE], RTOL);
            check(name, 1, "");
        }
        if (!bad_bwd) {
            snprintf(name, sizeof name, "merge_backward[%s: %zu shapes, dq %.2g dk %.2g dv %.2g of rtol %.0e]",
                     causal ? "causal" : "full", shapes.size(), worst[E_DQ], worst[E_DK], worst[E_DV], RTOL);
            check(name, 1, "");
        }
    }
    // the controls: a broken merge or sum must fail the same comparison
    for (int causal = 1; causal >= 0; causal--) {
        double err[NE];
        const Shape s = {2, 3, 5, 4, 2, 12};
        run_shape(s, causal, 1, err);
        snprintf(name, sizeof name, "catches_dropped_block[%s: out %.2g lse %.2g]", causal ? "causal" : "full", err[E_OUT], err[E_LSE]);
        check(name, err[E_OUT] > 100 * RTOL && err[E_LSE] > 100 * RTOL, "a merge without the last block passed the comparison");
        run_shape(s, causal, 2, err);
        snprintf(name, sizeof name, "catches_dropped_dk[%s: dk %.2g]", causal ? "causal" : "full", err[E_DK]);
        check(name, err[E_DK] > 100 * RTOL && err[E_DQ] <= RTOL && err[E_DV] <= RTOL,
              "a backward without one pair's dk passed the comparison (or broke dq, dv)");
    }
    struct timespec t1; clock_gettime(CLOCK_MONOTONIC, &t1);
    fprintf(stderr, "test_attention_merge: %d passed, %d failed in %.2f s\n", g_pass, g_fail,
            (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    return g_fail ? 1 : 0;
}
