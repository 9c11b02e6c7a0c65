/*
The comparisons of the test programs (test_llama, test_dit): a tensor against its
reference by relative L2 error, a scalar by relative error; each prints one line and
counts into checks / failures, which the program reports at the end.
*/
#pragma once
#include "common.h"
#include "arena.h"

static int failures = 0, checks = 0;

// per-tensor comparison; prints one line
static void compare(const char* what, const float* got, const float* ref, size_t n, double tol) {
    double num = 0.0, den = 0.0, maxabs = 0.0;
    int finite = 1;
    for (size_t i = 0; i < n; i++) {
        double d = (double)got[i] - ref[i];
        if (!isfinite(got[i])) finite = 0;
        num += d * d; den += (double)ref[i] * ref[i];
        if (fabs(d) > maxabs) maxabs = fabs(d);
    }
    double rel = den > 0 ? sqrt(num / den) : sqrt(num);
    int ok = finite && rel <= tol;
    checks++; failures += !ok;
    printf("  %-16s n=%-9zu max|err| %.3e  rel %.3e  (tol %.0e)  %s\n", what, n, maxabs, rel, tol,
           ok ? "ok" : (finite ? "FAIL" : "FAIL (not finite)"));
}

static void check_scalar(const char* what, double got, double ref, double tol) {
    double err = fabs(got - ref) / (fabs(ref) > 1.0 ? fabs(ref) : 1.0);
    int ok = isfinite(got) && err <= tol;
    checks++; failures += !ok;
    printf("  %-16s got %.9g ref %.9g  rel %.3e (tol %.0e)  %s\n", what, got, ref, err, tol, ok ? "ok" : "FAIL");
}

// ----------------------------------------------------------------------------
// reference files (LREF, DREF): what both formats share

// the AdamW steps a reference file holds after its forward/backward
typedef struct { int n; float lr, beta1, beta2, eps, weight_decay, grad_clip; } RefSteps;

// Opens a reference file and reads its 1024-byte header into h (int words; the float
// words are the same bytes), checking the magic, the version and that the reserved
// words [zero_from, zero_to) are zero. Returns the file positioned after the header;
// *file_bytes is its size, for the caller's check of the size the header implies.
static FILE* ref_open(const char* path, const char* kind, int magic, int version, int zero_from, int zero_to, int h[256],
                      long* file_bytes) {
    FILE* f = xinput_fopen(path, "--ref: reference file");  // a regular file; a FIFO is refused, not waited on
    fseek(f, 0, SEEK_END);
    *file_bytes = ftell(f);
    fseek(f, 0, SEEK_SET);
    if (*file_bytes < 1024 || fread(h, sizeof(int), 256, f) != 256)
        FAIL("%s: too short for a %s header (%ld bytes, need 1024)", path, kind, *file_bytes);
    if (h[0] != magic) FAIL("%s: bad magic %d (a %s file starts with %d)", path, h[0], kind, magic);
    if (h[1] != version) FAIL("%s: %s version %d, this test reads version %d", path, kind, h[1], version);
    for (int i = zero_from; i < zero_to; i++) if (h[i] != 0) FAIL("%s: header word %d must be zero (got %d)", path, i, h[i]);
    return f;
}

// n steps whose hyper-parameters are the float words w .. w+5 of the header
static RefSteps ref_steps(const char* path, const int h[256], int n, int w) {
    float hf[6];
    memcpy(hf, h + w, sizeof(hf));
    for (int i = 0; i < 6; i++) if (!isfinite(hf[i])) FAIL("%s: hyper-parameter word %d is not finite", path, w + i);
    RefSteps s = {n, hf[0], hf[1], hf[2], hf[3], hf[4], hf[5]};
    return s;
}

// A reference with a NaN or Inf in it checks nothing: rejected with the array's name.
typedef struct { const char* what; const float* x; size_t n; } RefArray;
static void ref_require_finite(const char* path, const RefArray* arrays, int n_arrays) {
    for (int a = 0; a < n_arrays; a++)
        for (size_t i = 0; i < arrays[a].n; i++)
            if (!isfinite(arrays[a].x[i]))
                FAIL("%s: the reference's %s hold a non-finite value (%g at index %zu): not a usable reference", path,
                     arrays[a].what, arrays[a].x[i], i);
}

// ----------------------------------------------------------------------------
// a memory flag against the flag-off run of the same process

// Gradients and loss: flags that keep the arithmetic order (same_order: offload,
// recompute) must be bitwise identical; the others are held to the reference tolerance.
static void check_flag_off_grads(const float* grads, const float* base, size_t n, float loss, float base_loss,
                                 int same_order) {
    double maxdiff = 0.0;
    for (size_t i = 0; i < n; i++) maxdiff = fmax(maxdiff, fabs((double)grads[i] - base[i]));
    int bitwise = memcmp(grads, base, n * sizeof(float)) == 0 && loss == base_loss;
    printf("against the flag-off run: loss %.9g vs %.9g, max |grad diff| %.3e, bitwise %s", loss, base_loss, maxdiff,
           bitwise ? "identical" : "different");
    if (same_order) { checks++; failures += !bitwise; printf(" (required: %s)\n", bitwise ? "ok" : "FAIL"); }
    else printf(" (chunking reorders sums: the reference tolerance applies)\n");
}

static void check_flag_off_steps(const float* on, const float* off, int n, int same_order) {
    int same = memcmp(on, off, (size_t)n * sizeof(float)) == 0;
    printf("AdamW steps against the flag-off run: losses bitwise %s", same ? "identical" : "different");
    if (same_order) { checks++; failures += !same; printf(" (required: %s)\n", same ? "ok" : "FAIL"); }
    else printf("\n");
}

// what the flags did to the plan
static void print_flag_off_plan(const Arena* dev_on, const Arena* host_on, const Arena* dev_off) {
    size_t on = arena_kind_bytes(dev_on, "activations") + arena_kind_bytes(dev_on, "offload");
    printf("plan: device activations %zu -> %zu bytes, device total %zu -> %zu bytes, host %zu bytes\n",
           arena_kind_bytes(dev_off, "activations"), on, dev_off->total, dev_on->total, host_on->total);
}

// the losses of the reference's AdamW steps
static void check_step_losses(const float* got, const float* ref, const RefSteps* s, double tol) {
    printf("AdamW steps (lr %g, betas %g %g, eps %g, wd %g, clip %g):\n", s->lr, s->beta1, s->beta2, s->eps,
           s->weight_decay, s->grad_clip);
    for (int i = 0; i < s->n; i++) {
        char name[32]; snprintf(name, sizeof(name), "step %d loss", i);
        check_scalar(name, got[i], ref[i], tol);
    }
}
