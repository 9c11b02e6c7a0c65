// Unit tests of llmc/parallel/comm.h on the CPU build, under mpirun with any number of ranks:
//
//   mpirun -np 3 build/test_comm              every collective against a sum written here
//   mpirun -np 3 build/test_comm --hang 1     the last rank skips a collective: the others
//                                             must give up after the timeout (1 s), naming it
//
// Data is random (never zeros), sizes are odd and not multiples of the rank count where
// the collective allows it. Prints PASS/FAIL lines on rank 0; exit non-zero on failure.
#ifndef LLMC_CPU
#define LLMC_CPU
#endif
#include "llmc/core/common.h"
#include "llmc/kernels/cpu/device.h"
#include "llmc/parallel/comm.h"

static int failures = 0;
static void check(const Comm* c, const char* what, int ok) {
    // every rank's verdict, so that a wrong result on any rank fails
    double bad = ok ? 0.0 : 1.0;
    comm_host_all_reduce((Comm*)c, GROUP_WORLD, &bad, 1, COMM_SUM);
    if (c->rank == 0) printf("%s %s%s\n", bad == 0.0 ? "PASS" : "FAIL", what, bad == 0.0 ? "" : " (on some rank)");
    failures += bad != 0.0;
}

// a value every rank can compute for any (rank, index)
static float val(int rank, size_t i) { return (float)((rank * 7919 + i * 104729) % 1000) / 37.0f - 13.0f; }

int main(int argc, char** argv) {
    int hang = argc == 3 && strcmp(argv[1], "--hang") == 0 && atoi(argv[2]) == 1;
    Comm c;
    comm_init(&c, 1, 1, 1, 0, hang ? 1.0 : 60.0);
    comm_setup_device(&c);
    int R = c.size, me = c.rank;
    if (c.rank == 0) printf("test_comm: %d ranks (dp %d, tp %d)\n", R, c.dp, c.tp);
    if (hang) {
        float x = 1.0f;
        if (me != R - 1) comm_all_reduce(&c, GROUP_GRAD, &x, 1, COMM_FLOAT, COMM_SUM, c.stream);
        // the last rank never joins: the others must not get here
        if (me != R - 1) printf("FAIL rank %d: a collective that a rank skipped returned\n", me);
        else { struct timespec ts = {10, 0}; nanosleep(&ts, NULL); }
        return 1;
    }
    check(&c, "groups: dp = world with tp = 1", c.dp == R && c.dp_rank == me && c.tp_rank == 0);

    size_t n = 1001;  // odd
    float* x = (float*)xmalloc(n * R * sizeof(float));
    for (size_t i = 0; i < n; i++) x[i] = val(me, i);
    comm_all_reduce(&c, GROUP_GRAD, x, n, COMM_FLOATX, COMM_SUM, c.stream);
    comm_join(&c, c.stream);
    int ok = 1;
    for (size_t i = 0; i < n; i++) {
        double want = 0; for (int r = 0; r < R; r++) want += val(r, i);
        ok &= fabs(x[i] - want) <= 1e-4 * (1 + fabs(want));
    }
    check(&c, "all-reduce sum (1001 elements)", ok);

    for (size_t i = 0; i < n; i++) x[i] = val(me, i);
    comm_all_reduce(&c, GROUP_GRAD, x, n, COMM_FLOAT, COMM_MAX, c.stream);
    ok = 1;
    for (size_t i = 0; i < n; i++) {
        float want = val(0, i); for (int r = 1; r < R; r++) want = fmaxf(want, val(r, i));
        ok &= x[i] == want;
    }
    check(&c, "all-reduce max", ok);

    // reduce-scatter: R blocks of n; block me holds the sum of block me over the ranks
    for (size_t i = 0; i < n * R; i++) x[i] = val(me, i);
    comm_reduce_scatter(&c, GROUP_GRAD, x, n, COMM_FLOATX, c.stream);
    ok = 1;
    for (size_t i = 0; i < n; i++) {
        size_t g = (size_t)me * n + i;
        double want = 0; for (int r = 0; r < R; r++) want += val(r, g);
        ok &= fabs(x[g] - want) <= 1e-4 * (1 + fabs(want));
    }
    check(&c, "reduce-scatter (blocks of 1001, result in this rank's block)", ok);

    // all-gather: block r from rank r
    for (size_t i = 0; i < n * R; i++) x[i] = NAN;
    for (size_t i = 0; i < n; i++) x[(size_t)me * n + i] = val(me, i);
    comm_all_gather(&c, GROUP_GRAD, x, n, COMM_FLOATX, c.stream);
    ok = 1;
    for (int r = 0; r < R; r++) for (size_t i = 0; i < n; i++) ok &= x[(size_t)r * n + i] == val(r, i);
    check(&c, "all-gather (in place)", ok);

    int root = R - 1;
    for (size_t i = 0; i < n; i++) x[i] = val(me, i);
    comm_broadcast(&c, GROUP_GRAD, x, n, COMM_FLOATX, root, c.stream);
    ok = 1;
    for (size_t i = 0; i < n; i++) ok &= x[i] == val(root, i);
    check(&c, "broadcast from the last rank", ok);

    // host gather of unequal content, equal sizes
    char mine[5] = {(char)('a' + me), 'x', 'y', 'z', (char)me};
    char* all = (char*)xmalloc(5 * R);
    comm_host_gather(&c, GROUP_GRAD, mine, 5, all);
    ok = 1;
    if (c.dp_rank == 0) for (int r = 0; r < R; r++) ok &= all[5 * r] == 'a' + r && all[5 * r + 4] == r;
    check(&c, "host gather to rank 0", ok);

    // the configuration check passes when every rank agrees
    const char* names[2] = {"model", "lr"};
    const char* values[2] = {"tiny", "0.001"};
    comm_check_same_config(&c, names, values, 2);
    check(&c, "configuration check: equal on every rank", 1);

    free(x); free(all);
    int rc = failures ? 1 : 0;
    if (c.rank == 0) printf("test_comm: %d failed\n", failures);
    comm_finalize(&c);
    return rc;
}
