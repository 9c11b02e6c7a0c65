/*
Unit test of the pipeline-parallel schedules (llmc/parallel/pipeline_schedule.h): every rank's op
list of a step, run together in a discrete-event simulation with blocking point-to-point
transfers, must finish without deadlock, respect every data dependency, hold the activations
pp_max_in_flight says and idle for the time pp_bubble_fraction predicts.

The simulation: each rank runs its ops in order. A forward of one chunk takes tf, a backward
tb (constant; tf = 1 and tb = 1, 2, 3), a transfer no time. A PP_COMM op posts all its halves
and completes when each has been matched: a send when the receiving rank has reached the op
holding the matching receive, a receive when the sender has reached its send (rendezvous: no
buffering, the strictest MPI/NCCL behaviour, so whatever runs here runs there). Sends and
receives pair in order on each (sender, receiver, activation or gradient) channel, as MPI
tags would pair them; a second check pairs them on (sender, receiver) alone, in op order and
PpXfer order within an op, as NCCL would. No rank able to move while some have ops left is a
deadlock: the ranks and the ops they wait in are printed.

Checked for each case (1f1b: pp 1, 2, 3, 4, 8 x M 1, 2, 3, 4, 5, 8, 16; interleaved: pp 2, 3, 4,
8 x V 2, 3, 4 x those M that are multiples of pp):
  - every send pairs with a receive of the same kind, and the labels agree: the sender's piece
    followed (activation) or preceded (gradient) in model order by the receiver's, same micro-batch;
  - every (micro-batch, chunk) is forwarded and backwarded exactly once on each rank; a forward
    comes after the receive of its input (unless it is the model's first piece) and starts no
    earlier than the previous piece's forward ended; a backward comes after its own forward and
    after the receive of its gradient (unless it is the last piece), starting no earlier than the
    next piece's backward ended; a send comes after the compute of what it sends;
  - the peak of activations held (forwarded, not yet backwarded) equals pp_max_in_flight and the
    schedule's max_in_flight on every rank, and under 1f1b stage 0 holds the most;
  - the step's makespan: bubble = makespan - M*V*(tf+tb) (each rank's busy time, in chunk units),
    bubble / ideal against pp_bubble_fraction, to 1e-12 for both schedules: with constant costs and
    free transfers both reach the paper's (pp-1)/(V*M) exactly (Narayanan et al. 2021, sec. 2.2),
    the times are whole numbers, and only the final division is floating point. A schedule that
    lost even one chunk's step of overlap would be off by at least 1/(M*V*(tf+tb)) > 1e-3.
Controls show the checks can fail: a swap of a stage's first forward with the receive before it,
a paired transfer split into a blocking send then a blocking receive (the classic deadlock), a
receive dropped, an op list that skips one backward. Bad input (wrong --pp-layers strings,
virtual chunks under 1f1b, M not a multiple of pp) must end with exit 1 and a message naming
the flag: each runs in a forked child.

  make build/test_pp_schedule && build/test_pp_schedule
prints PASS/FAIL lines (dev/test/run_tests.sh counts them); exit status non-zero on failure.
  build/test_pp_schedule --show 1f1b|interleaved PP V M     each rank's op list
  build/test_pp_schedule --split L PP V 'a,b,c'             pp_split_layers on those arguments ('' splits evenly)
*/
#ifndef LLMC_CPU
#define LLMC_CPU
#endif
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include <time.h>
#include <unistd.h>
#include <sys/wait.h>
#include <vector>
#include <string>
#include "llmc/core/common.h"
#include "llmc/parallel/pipeline_schedule.h"

static int g_fail = 0, g_pass = 0;

static void check(const char* name, int ok, const char* why) {
    if (ok) { printf("PASS %s\n", name); g_pass++; }
    else { printf("FAIL %s: %s\n", name, why); g_fail++; }
    fflush(stdout);
}

// the first error of a case, kept for its FAIL line
static char g_why[4096];
static int err(const char* fmt, ...) {
    if (g_why[0]) return 0;
    va_list ap; va_start(ap, fmt); vsnprintf(g_why, sizeof g_why, fmt, ap); va_end(ap);
    return 0;
}

typedef struct { int rank, op; } Where;

struct Sim {
    int pp, V, M;
    std::vector<std::vector<PpOp>> ops;               // [rank][op]
    std::vector<std::vector<Where>> partner;          // [rank][op*4 + half]: the op holding the matching half
    std::vector<std::vector<long long>> start, end;   // [rank][op], simulated times
    long long makespan;
    std::vector<int> in_flight;                       // [rank] peak
};

static const char* HALF_NAME[PP_HALVES] = {"send_forward", "recv_forward", "send_backward", "recv_backward"};

// the piece after (forward) or before (backward) rank s's chunk c in model order: its rank and chunk,
// or 0 when there is none
static int neighbour_piece(int pp, int V, int s, int c, int backward, int* rs, int* rc) {
    int p = pp_piece(pp, s, c) + (backward ? -1 : 1);
    if (p < 0 || p >= pp * V) return 0;
    *rs = p % pp; *rc = p / pp;
    return 1;
}

// Pairs the sends and receives: by (sender, receiver, kind) in op order; checks counts, kinds and
// labels; with `untagged`, also that pairing by (sender, receiver) alone gives the same pairs.
static int pair_transfers(Sim& S, int untagged_check) {
    int pp = S.pp;
    S.partner.assign(pp, std::vector<Where>());
    for (int r = 0; r < pp; r++) S.partner[r].assign(S.ops[r].size() * PP_HALVES, Where{-1, -1});
    // channel (src, dst, kind): the sends and receives in order, as (rank, op, half)
    struct H { int rank, op, half; };
    std::vector<std::vector<H>> sends(pp * pp * 2), recvs(pp * pp * 2), usend(pp * pp), urecv(pp * pp);
    for (int r = 0; r < pp; r++)
        for (int i = 0; i < (int)S.ops[r].size(); i++) {
            const PpOp& op = S.ops[r][i];
            if (op.kind != PP_COMM) continue;
            if (!op.comm) return err("rank %d op %d: a transfer op with nothing to transfer", r, i);
            for (int h = 0; h < PP_HALVES; h++) {
                if (!(op.comm >> h & 1)) continue;
                int peer = op.x[h].peer, kind = h >= PP_SEND_BACKWARD, is_send = !(h & 1);
                if (peer < 0 || peer >= pp || peer == r) return err("rank %d op %d: %s to/from rank %d", r, i, HALF_NAME[h], peer);
                int src = is_send ? r : peer, dst = is_send ? peer : r;
                (is_send ? sends : recvs)[(src * pp + dst) * 2 + kind].push_back(H{r, i, h});
                (is_send ? usend : urecv)[src * pp + dst].push_back(H{r, i, h});
            }
        }
    for (int ch = 0; ch < pp * pp * 2; ch++) {
        int src = ch / 2 / pp, dst = ch / 2 % pp, kind = ch % 2;
        if (sends[ch].size() != recvs[ch].size())
            return err("%zu %s sends from rank %d to rank %d but %zu receives", sends[ch].size(), kind ? "gradient" : "activation", src, dst,
                       recvs[ch].size());
        for (size_t n = 0; n < sends[ch].size(); n++) {
            H a = sends[ch][n], b = recvs[ch][n];
            const PpXfer& xs = S.ops[a.rank][a.op].x[a.half];
            const PpXfer& xr = S.ops[b.rank][b.op].x[b.half];
            int rs, rc;
            if (!neighbour_piece(pp, S.V, src, xs.chunk, kind, &rs, &rc))
                return err("rank %d op %d sends %s of micro %d chunk %d, which has no %s piece", src, a.op, kind ? "a gradient" : "an activation",
                           xs.micro, xs.chunk, kind ? "previous" : "next");
            if (rs != dst || rc != xr.chunk || xs.micro != xr.micro)
                return err("rank %d op %d sends %s of micro %d chunk %d (for rank %d chunk %d), paired with rank %d op %d's receive of micro %d "
                           "chunk %d", src, a.op, kind ? "the gradient" : "the activation", xs.micro, xs.chunk, rs, rc, dst, b.op, xr.micro,
                           xr.chunk);
            S.partner[a.rank][a.op * PP_HALVES + a.half] = Where{b.rank, b.op};
            S.partner[b.rank][b.op * PP_HALVES + b.half] = Where{a.rank, a.op};
        }
    }
    if (untagged_check)
        for (int ch = 0; ch < pp * pp; ch++)
            for (size_t n = 0; n < usend[ch].size() && n < urecv[ch].size(); n++) {
                H a = usend[ch][n], b = urecv[ch][n];
                Where w = S.partner[a.rank][a.op * PP_HALVES + a.half];
                if (w.rank != b.rank || w.op != b.op || (a.half >= PP_SEND_BACKWARD) != (b.half >= PP_SEND_BACKWARD))
                    return err("without tags, rank %d op %d's %s would pair with rank %d op %d's %s", a.rank, a.op, HALF_NAME[a.half], b.rank,
                               b.op, HALF_NAME[b.half]);
            }
    return 1;
}

// Runs every rank's list: compute ops take tf or tb, a transfer op ends when all its halves' peers
// have reached theirs. Times are in chunk units (a chunk's forward tf).
static int simulate(Sim& S, long long tf, long long tb) {
    int pp = S.pp;
    std::vector<int> cur(pp, 0);
    std::vector<long long> now(pp, 0);
    S.start.assign(pp, std::vector<long long>());
    S.end.assign(pp, std::vector<long long>());
    for (int r = 0; r < pp; r++) { S.start[r].assign(S.ops[r].size(), -1); S.end[r].assign(S.ops[r].size(), -1); }
    for (int r = 0; r < pp; r++) if (!S.ops[r].empty()) S.start[r][0] = 0;
    for (;;) {
        int moved = 0, left = 0;
        for (int r = 0; r < pp; r++) {
            while (cur[r] < (int)S.ops[r].size()) {
                int i = cur[r];
                const PpOp& op = S.ops[r][i];
                long long t = S.start[r][i];
                if (op.kind == PP_FORWARD) t += tf;
                else if (op.kind == PP_BACKWARD) t += tb;
                else {
                    int blocked = 0;
                    for (int h = 0; h < PP_HALVES && !blocked; h++) {
                        if (!(op.comm >> h & 1)) continue;
                        Where w = S.partner[r][i * PP_HALVES + h];
                        if (cur[w.rank] < w.op) blocked = 1;
                        else if (S.start[w.rank][w.op] > t) t = S.start[w.rank][w.op];
                    }
                    if (blocked) break;
                }
                S.end[r][i] = t;
                now[r] = t;
                cur[r]++;
                if (cur[r] < (int)S.ops[r].size()) S.start[r][cur[r]] = t;
                moved = 1;
            }
            left += cur[r] < (int)S.ops[r].size();
        }
        if (!left) break;
        if (!moved) {
            std::string msg = "DEADLOCK:";
            for (int r = 0; r < pp; r++) {
                if (cur[r] >= (int)S.ops[r].size()) continue;
                char buf[512];
                pp_op_format(&S.ops[r][cur[r]], buf, sizeof buf);
                msg += " rank " + std::to_string(r) + " waits in op " + std::to_string(cur[r]) + " " + buf + ";";
            }
            return err("%s", msg.c_str());
        }
    }
    S.makespan = 0;
    for (int r = 0; r < pp; r++) if (now[r] > S.makespan) S.makespan = now[r];
    return 1;
}

// the op index of rank r's compute of (m, c), or -1; and the receive op of (m, c)'s input or gradient
static int find_compute(const Sim& S, int r, PpOpKind kind, int m, int c) {
    for (int i = 0; i < (int)S.ops[r].size(); i++)
        if (S.ops[r][i].kind == kind && S.ops[r][i].micro == m && S.ops[r][i].chunk == c) return i;
    return -1;
}
static int find_half(const Sim& S, int r, int half, int m, int c, int* count) {
    int at = -1;
    *count = 0;
    for (int i = 0; i < (int)S.ops[r].size(); i++) {
        const PpOp& op = S.ops[r][i];
        if (op.kind == PP_COMM && (op.comm >> half & 1) && op.x[half].micro == m && op.x[half].chunk == c) { at = i; (*count)++; }
    }
    return at;
}

// the dependency checks, on the op lists and the simulated times
static int check_dependencies(Sim& S) {
    int pp = S.pp, V = S.V, M = S.M;
    S.in_flight.assign(pp, 0);
    for (int r = 0; r < pp; r++) {
        int live = 0, nf = 0, nb = 0;
        for (const PpOp& op : S.ops[r]) {
            if (op.kind == PP_FORWARD) { nf++; if (++live > S.in_flight[r]) S.in_flight[r] = live; }
            if (op.kind == PP_BACKWARD) { nb++; live--; }
            if (op.kind != PP_COMM && (op.micro < 0 || op.micro >= M || op.chunk < 0 || op.chunk >= V))
                return err("rank %d: %s of micro %d chunk %d, outside M %d x V %d", r, pp_op_name(&op), op.micro, op.chunk, M, V);
        }
        if (nf != M * V || nb != M * V) return err("rank %d runs %d forwards and %d backwards, not %d each", r, nf, nb, M * V);
        for (int m = 0; m < M; m++)
            for (int c = 0; c < V; c++) {
                int f = find_compute(S, r, PP_FORWARD, m, c), b = find_compute(S, r, PP_BACKWARD, m, c), n, ps, pc;
                if (f < 0 || b < 0) return err("rank %d never runs the %s of micro %d chunk %d", r, f < 0 ? "forward" : "backward", m, c);
                if (b < f) return err("rank %d: backward of micro %d chunk %d (op %d) before its forward (op %d)", r, m, c, b, f);
                // the forward's input
                if (neighbour_piece(pp, V, r, c, 1, &ps, &pc)) {
                    int rv = find_half(S, r, PP_RECV_FORWARD, m, c, &n);
                    if (n != 1) return err("rank %d receives the input of micro %d chunk %d %d times", r, m, c, n);
                    if (rv > f) return err("rank %d: forward of micro %d chunk %d (op %d) before its input arrives (op %d)", r, m, c, f, rv);
                    int pf = find_compute(S, ps, PP_FORWARD, m, pc);
                    Where w = S.partner[r][rv * PP_HALVES + PP_RECV_FORWARD];
                    if (w.op < pf) return err("rank %d op %d sends micro %d chunk %d's output before computing it (op %d)", ps, w.op, m, pc, pf);
                    if (S.start[r][f] < S.end[ps][pf])
                        return err("rank %d starts the forward of micro %d chunk %d at %lld, before rank %d's forward of chunk %d ends at %lld", r, m,
                                   c, S.start[r][f], ps, pc, S.end[ps][pf]);
                }
                // the backward's gradient
                if (neighbour_piece(pp, V, r, c, 0, &ps, &pc)) {
                    int rv = find_half(S, r, PP_RECV_BACKWARD, m, c, &n);
                    if (n != 1) return err("rank %d receives the gradient of micro %d chunk %d %d times", r, m, c, n);
                    if (rv > b) return err("rank %d: backward of micro %d chunk %d (op %d) before its gradient arrives (op %d)", r, m, c, b, rv);
                    int nb2 = find_compute(S, ps, PP_BACKWARD, m, pc);
                    Where w = S.partner[r][rv * PP_HALVES + PP_RECV_BACKWARD];
                    if (w.op < nb2) return err("rank %d op %d sends micro %d chunk %d's gradient before computing it (op %d)", ps, w.op, m, pc, nb2);
                    if (S.start[r][b] < S.end[ps][nb2])
                        return err("rank %d starts the backward of micro %d chunk %d at %lld, before rank %d's backward of chunk %d ends at %lld", r,
                                   m, c, S.start[r][b], ps, pc, S.end[ps][nb2]);
                }
            }
        // what is sent was computed before, and sent once
        for (int i = 0; i < (int)S.ops[r].size(); i++) {
            const PpOp& op = S.ops[r][i];
            if (op.kind != PP_COMM) continue;
            for (int h = PP_SEND_FORWARD; h <= PP_SEND_BACKWARD; h += 2) {
                if (!(op.comm >> h & 1)) continue;
                int n, at = find_compute(S, r, h == PP_SEND_FORWARD ? PP_FORWARD : PP_BACKWARD, op.x[h].micro, op.x[h].chunk);
                find_half(S, r, h, op.x[h].micro, op.x[h].chunk, &n);
                if (at < 0 || at > i) return err("rank %d op %d: %s of micro %d chunk %d before it is computed", r, i, HALF_NAME[h], op.x[h].micro, op.x[h].chunk);
                if (n != 1) return err("rank %d: %s of micro %d chunk %d %d times", r, HALF_NAME[h], op.x[h].micro, op.x[h].chunk, n);
            }
        }
    }
    return 1;
}

typedef void (*Mutate)(Sim& S);

static void build_all(Sim& S, PpScheduleKind kind, int pp, int V, int M) {
    S.pp = pp; S.V = V; S.M = M;
    S.ops.assign(pp, std::vector<PpOp>());
    for (int r = 0; r < pp; r++) {
        PpSchedule s;
        pp_schedule_build(&s, kind, pp, V, M, r);
        S.ops[r].assign(s.ops, s.ops + s.n);
        pp_schedule_free(&s);
    }
}

// one case: every check at tb = 1, 2, 3; 1 if all hold (the summary in `line`), else 0 (g_why says why)
static int run_case(PpScheduleKind kind, int pp, int V, int M, Mutate mutate, char* line, size_t size) {
    Sim S;
    g_why[0] = 0;
    build_all(S, kind, pp, V, M);
    if (mutate) mutate(S);
    if (!pair_transfers(S, 1)) return 0;
    double predicted = pp_bubble_fraction(kind, pp, V, M), sim[3];
    for (int tb = 1; tb <= 3; tb++) {
        if (!simulate(S, 1, tb)) return 0;
        if (!check_dependencies(S)) return 0;
        long long ideal = (long long)M * V * (1 + tb);
        sim[tb - 1] = (double)(S.makespan - ideal) / (double)ideal;
        // the header's own simulation (pp_simulate, which the trainers' measured bubble is compared with) agrees:
        // the same step, and each stage's time is its compute plus its waits
        std::vector<double> tfs(pp, 1.0), tbs(pp, (double)tb), idle(pp), own(pp);
        double span = pp_simulate(kind, pp, V, M, tfs.data(), tbs.data(), idle.data(), own.data());
        if (span != (double)S.makespan) return err("tb %d: pp_simulate's step %g, this simulation's %lld", tb, span, S.makespan);
        for (int r = 0; r < pp; r++)
            if (own[r] - idle[r] != (double)ideal) return err("tb %d: pp_simulate's stage %d: %g of its own time, %g waiting, compute %lld", tb, r, own[r], idle[r], ideal);
        if (fabs(sim[tb - 1] - predicted) > 1e-12)
            return err("tb %d: simulated bubble %.6f of the ideal time, predicted %.6f (makespan %lld, ideal %lld)", tb, sim[tb - 1], predicted,
                       S.makespan, ideal);
    }
    std::string flight;
    for (int r = 0; r < pp; r++) {
        PpSchedule s;
        pp_schedule_build(&s, kind, pp, V, M, r);
        int formula = pp_max_in_flight(kind, pp, V, M, r);
        // the brief's numbers, independent of the header's warmup: 1f1b min(pp - s, M) (Megatron's warmup
        // pp - s - 1 plus the steady state's one); interleaved Megatron's warmup plus one, at most M*V
        int warm = kind == PP_SCHEDULE_1F1B ? pp - r - 1 : (pp - r - 1) * 2 + (V - 1) * pp;
        int expect = warm + 1 < M * V ? warm + 1 : M * V;
        if (s.warmup != (warm < M * V ? warm : M * V)) return err("stage %d: warmup %d, Megatron's is %d", r, s.warmup, warm < M * V ? warm : M * V);
        if (S.in_flight[r] != expect || s.max_in_flight != expect || formula != expect)
            return err("stage %d holds at most %d activations in the list, max_in_flight says %d, pp_max_in_flight %d, expected %d", r,
                       S.in_flight[r], s.max_in_flight, formula, expect);
        pp_schedule_free(&s);
        if (kind == PP_SCHEDULE_1F1B && S.in_flight[r] > S.in_flight[0]) return err("stage %d holds %d activations, more than stage 0's %d", r, S.in_flight[r], S.in_flight[0]);
        flight += (r ? " " : "") + std::to_string(S.in_flight[r]);
    }
    snprintf(line, size, "%s pp %d V %d M %d: bubble simulated %.4g %.4g %.4g (tb 1 2 3) predicted %.4g (%.3g of the step), in flight %s",
             PP_SCHEDULE_NAMES[kind], pp, V, M, sim[0], sim[1], sim[2], predicted, pp_bubble_share(kind, pp, V, M), flight.c_str());
    return 1;
}

// the controls' mutations
static int first_of(const Sim& S, int r, PpOpKind kind) {
    for (int i = 0; i < (int)S.ops[r].size(); i++) if (S.ops[r][i].kind == kind) return i;
    return -1;
}
static void swap_first_forward(Sim& S) {  // rank 1: its first forward before the receive of its input
    int f = first_of(S, 1, PP_FORWARD);
    std::swap(S.ops[1][f], S.ops[1][f - 1]);
}
static void split_paired(Sim& S) {  // every paired transfer as two blocking ops, sends first
    for (auto& list : S.ops) {
        std::vector<PpOp> out;
        for (const PpOp& op : list) {
            if (op.kind != PP_COMM || __builtin_popcount(op.comm) < 2) { out.push_back(op); continue; }
            for (int h : {PP_SEND_FORWARD, PP_SEND_BACKWARD, PP_RECV_FORWARD, PP_RECV_BACKWARD})
                if (op.comm >> h & 1) { PpOp o = op; o.comm = 1 << h; out.push_back(o); }
        }
        list = out;
    }
}
static void drop_receive(Sim& S) {  // the last rank's last receive of an activation left out
    auto& list = S.ops[S.pp - 1];
    for (int i = (int)list.size() - 1; i >= 0; i--)
        if (list[i].kind == PP_COMM && (list[i].comm >> PP_RECV_FORWARD & 1)) {
            list[i].comm &= ~(1 << PP_RECV_FORWARD);
            if (!list[i].comm) list.erase(list.begin() + i);
            return;
        }
}
static void drop_backward(Sim& S) {  // rank 0 skips its last backward (and what it would send)
    auto& list = S.ops[0];
    for (int i = (int)list.size() - 1; i >= 0; i--)
        if (list[i].kind == PP_BACKWARD) { list.erase(list.begin() + i); return; }
}

// bad input: a forked child runs `fn`, which must exit 1 with every word of `words` in its stderr
static void expect_fail(const char* name, const char* words, void (*fn)(const void*), const void* arg) {
    int fd[2];
    char why[600], out[4096];
    if (pipe(fd) != 0) { check(name, 0, "pipe failed"); return; }
    fflush(stdout); fflush(stderr);
    pid_t pid = fork();
    if (pid == 0) {
        dup2(fd[1], 2); close(fd[0]); close(fd[1]);
        if (!freopen("/dev/null", "w", stdout)) _exit(3);
        fn(arg);
        _exit(0);
    }
    close(fd[1]);
    size_t n = 0;
    ssize_t k;
    while (n < sizeof out - 1 && (k = read(fd[0], out + n, sizeof out - 1 - n)) > 0) n += (size_t)k;
    out[n] = 0;
    close(fd[0]);
    int status = 0;
    waitpid(pid, &status, 0);
    char missing[256] = "";
    char copy[256];
    snprintf(copy, sizeof copy, "%s", words);
    for (char* w = strtok(copy, " "); w; w = strtok(NULL, " "))
        if (!strstr(out, w)) { strncat(missing, " ", sizeof missing - strlen(missing) - 1); strncat(missing, w, sizeof missing - strlen(missing) - 1); }
    int ok = WIFEXITED(status) && WEXITSTATUS(status) == 1 && !missing[0];
    char* nl = strchr(out, '\n');
    if (nl) *nl = 0;
    snprintf(why, sizeof why, "exit %d, missing:%s; %.300s", WIFEXITED(status) ? WEXITSTATUS(status) : -1, missing, out);
    char full[512];
    snprintf(full, sizeof full, "%s [%.200s]", name, out);
    check(ok ? full : name, ok, why);
}

typedef struct { int L, pp, V; const char* custom; } SplitArgs;
static void call_split(const void* a) {
    const SplitArgs* s = (const SplitArgs*)a;
    int first[256];
    pp_split_layers(s->L, s->pp, s->V, s->custom, first);
}
typedef struct { PpScheduleKind kind; int pp, V, M; } BuildArgs;
static void call_build(const void* a) {
    const BuildArgs* b = (const BuildArgs*)a;
    PpSchedule s;
    pp_schedule_build(&s, b->kind, b->pp, b->V, b->M, 0);
}

static void show(PpScheduleKind kind, int pp, int V, int M) {
    for (int r = 0; r < pp; r++) {
        PpSchedule s;
        pp_schedule_build(&s, kind, pp, V, M, r);
        printf("rank %d: warmup %d, at most %d in flight\n", r, s.warmup, s.max_in_flight);
        for (int i = 0; i < s.n; i++) {
            char buf[256];
            pp_op_format(&s.ops[i], buf, sizeof buf);
            printf("  %3d %s\n", i, buf);
        }
        pp_schedule_free(&s);
    }
}

static int parse_kind(const char* s) {
    for (int k = 0; PP_SCHEDULE_NAMES[k]; k++) if (!strcmp(s, PP_SCHEDULE_NAMES[k])) return k;
    FAIL("unknown schedule '%s' (1f1b or interleaved)", s);
    return 0;
}

int main(int argc, char** argv) {
    if (argc == 6 && !strcmp(argv[1], "--show")) { show((PpScheduleKind)parse_kind(argv[2]), atoi(argv[3]), atoi(argv[4]), atoi(argv[5])); return 0; }
    if (argc == 6 && !strcmp(argv[1], "--split")) {
        int L = atoi(argv[2]), pp = atoi(argv[3]), V = atoi(argv[4]);
        std::vector<int> first(pp * V + 1);
        int n = pp_split_layers(L, pp, V, argv[5], first.data());
        for (int p = 0; p < n; p++) printf("piece %d (rank %d chunk %d): layers %d..%d\n", p, p % pp, p / pp, first[p], first[p + 1] - 1);
        return 0;
    }
    if (argc != 1) { fprintf(stderr, "usage: %s [--show 1f1b|interleaved PP V M | --split L PP V 'a,b,c']\n", argv[0]); return 2; }
    struct timespec t0; clock_gettime(CLOCK_MONOTONIC, &t0);
    const int pps[] = {1, 2, 3, 4, 8}, Ms[] = {1, 2, 3, 4, 5, 8, 16};
    char line[1024], name[256];
    for (int pp : pps)
        for (int M : Ms) {
            snprintf(name, sizeof name, "1f1b pp %d V 1 M %d", pp, M);
            if (run_case(PP_SCHEDULE_1F1B, pp, 1, M, NULL, line, sizeof line)) check(line, 1, "");
            else check(name, 0, g_why);
        }
    for (int pp : pps)
        for (int V = 2; V <= 4; V++)
            for (int M : Ms) {
                if (pp < 2 || M % pp) continue;
                snprintf(name, sizeof name, "interleaved pp %d V %d M %d", pp, V, M);
                if (run_case(PP_SCHEDULE_INTERLEAVED, pp, V, M, NULL, line, sizeof line)) check(line, 1, "");
                else check(name, 0, g_why);
            }
    // the controls: each broken schedule must fail, with the reason printed
    struct { const char* what; PpScheduleKind kind; int pp, V, M; Mutate m; const char* expect; } controls[] = {
        {"a forward before the receive of its input", PP_SCHEDULE_1F1B, 4, 1, 8, swap_first_forward, "before its input arrives"},
        {"paired transfers as blocking send then receive", PP_SCHEDULE_1F1B, 4, 1, 8, split_paired, "DEADLOCK"},
        {"paired transfers as blocking send then receive", PP_SCHEDULE_INTERLEAVED, 4, 2, 8, split_paired, "DEADLOCK"},
        {"a receive left out", PP_SCHEDULE_INTERLEAVED, 4, 2, 8, drop_receive, "receives"},
        {"a backward left out", PP_SCHEDULE_1F1B, 3, 1, 5, drop_backward, "backwards"},
    };
    for (auto& c : controls) {
        int ok = run_case(c.kind, c.pp, c.V, c.M, c.m, line, sizeof line);
        snprintf(name, sizeof name, "catches[%s, %s pp %d V %d M %d: %.150s]", c.what, PP_SCHEDULE_NAMES[c.kind], c.pp, c.V, c.M, g_why);
        check(name, !ok && strstr(g_why, c.expect), ok ? "the broken schedule passed" : g_why);
    }
    // layer splits
    {
        int first[17];
        int ok = pp_split_layers(10, 4, 1, NULL, first) == 4 && first[0] == 0 && first[1] == 3 && first[2] == 6 && first[3] == 8 && first[4] == 10;
        ok = ok && pp_split_layers(16, 2, 4, NULL, first) == 8 && first[8] == 16 && first[1] == 2;
        ok = ok && pp_split_layers(10, 3, 1, "2,5,3", first) == 3 && first[1] == 2 && first[2] == 7 && first[3] == 10;
        ok = ok && pp_split_layers(6, 2, 2, "1,2,2,1", first) == 4 && first[4] == 6 && first[3] == 5;
        check("split_layers[even 10 over 4: 3,3,2,2; 16 over 2x4; custom '2,5,3' and '1,2,2,1']", ok, "wrong first layers");
    }
    SplitArgs bad_split[] = {{12, 2, 1, "4,4"}, {12, 3, 1, "4,4"}, {12, 2, 1, "4,4,4"}, {12, 2, 2, "6,6"},
                             {12, 2, 1, "12,0"}, {12, 2, 1, "6,x"}, {12, 2, 1, "6,,6"}, {12, 2, 1, "-6,18"}, {3, 4, 1, NULL}};
    const char* split_words[] = {"--pp-layers sums 12", "--pp-layers 2 entries 3", "--pp-layers more than 2", "--pp-layers --pp-virtual 4",
                                 "--pp-layers at least one", "--pp-layers whole number", "--pp-layers whole number", "--pp-layers whole number",
                                 "--pp 4 3 layers"};
    for (int i = 0; i < (int)(sizeof bad_split / sizeof bad_split[0]); i++) {
        snprintf(name, sizeof name, "bad_split[L %d pp %d V %d '%s']", bad_split[i].L, bad_split[i].pp, bad_split[i].V,
                 bad_split[i].custom ? bad_split[i].custom : "even");
        expect_fail(name, split_words[i], call_split, &bad_split[i]);
    }
    BuildArgs bad_build[] = {{PP_SCHEDULE_1F1B, 4, 2, 8}, {PP_SCHEDULE_INTERLEAVED, 4, 2, 6}, {PP_SCHEDULE_INTERLEAVED, 4, 1, 8},
                             {PP_SCHEDULE_INTERLEAVED, 1, 2, 8}, {PP_SCHEDULE_1F1B, 4, 1, 0}};
    const char* build_words[] = {"--pp-virtual interleaved", "--pp 4 --pp-virtual 2 6 micro-batches multiple", "--pp-virtual at least 2",
                                 "--pp 1", "micro-batch"};
    for (int i = 0; i < (int)(sizeof bad_build / sizeof bad_build[0]); i++) {
        snprintf(name, sizeof name, "bad_schedule[%s pp %d V %d M %d]", PP_SCHEDULE_NAMES[bad_build[i].kind], bad_build[i].pp, bad_build[i].V,
                 bad_build[i].M);
        expect_fail(name, build_words[i], call_build, &bad_build[i]);
    }
    struct timespec t1; clock_gettime(CLOCK_MONOTONIC, &t1);
    printf("%d passed, %d failed\n", g_pass, g_fail);
    fprintf(stderr, "test_pp_schedule: %d passed, %d failed in %.2f s\n", g_pass, g_fail, (t1.tv_sec - t0.tv_sec) + 1e-9 * (t1.tv_nsec - t0.tv_nsec));
    return g_fail ? 1 : 0;
}
