/*
The comparisons of the test programs (test_llama, test_dit): a tensor against its
reference by relative L2 error, a scalar by relative error; each prints one line and
counts into checks / failures, which the program reports at the end.
*/
#pragma once
#include "common.h"

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
