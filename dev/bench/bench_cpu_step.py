#!/usr/bin/env python3
"""The CPU build's training step against the machine's sgemm, before and after BLAS.

    python3 dev/bench/bench_cpu_step.py OUT_MD [--steps 9] [--models stories15M,tiny]
                                      [--blas-libs onednn,openblas] [--rounds 1] [--rt]
                                      [--yardstick] [--yard-repeats 9] [--no-loops] [--threads T]
                                      [--profile-step N] [--dit-batch 16]

Builds, into build/bench/, the CPU trainer from the same source with the blocked loops of
llmc/kernels/cpu/matmul.h (BLAS=0, "before") and with each BLAS library named (the Makefile's
BLAS_LIB names; by default the one `make` links), and dev/bench/sgemm_bench.c against each
cblas library. For each model it trains B=8, T=256 for a few steps on a synthetic shard
and takes the median step time of the steps after the first (not their mean: under --rt the
kernel's real-time throttling, sched_rt_runtime_us 950000 of every 1000000, stops the run for
about 50 ms once a second, and a mean of a few short steps takes that stop in whole; the
yardstick below is a median of its calls for the same reason; the mean is kept in the .jsonl);
with --rounds R the binaries
run R times each, interleaved, and the best round counts (other processes may share the
machine: the load average before and after is written down; --rt runs each measurement
under SCHED_RR, chrt -r 10, 2 s apart, so that they do not time-slice it). Achieved FLOP/s = tok/s *
(6N + 6*L*D*T) (N parameters, tied embeddings counted once), against sgemm's FLOP/s on the
step's largest GEMM (the head: M = B*T, N = V, K = D) measured in the same run with the
same library. All on the threads the machine has (OMP_NUM_THREADS and the libraries'
defaults). Writes OUT_MD (markdown, with machine, commit and commands) and OUT_MD .jsonl.

Models: the train_llama presets below (B x T tokens a step) and dit-tiny (train_dit,
--dit-batch clips of 256 tokens; FLOP per clip = 6 x the per-token weight multiply-adds x
tokens + 12 L N^2 D, N tokens a clip, the per-clip adaLN and conditioning not counted);
dit-tiny's same-library sgemm is the yardstick shape below.

--yardstick: one fixed sgemm, M 2048 N 32000 K 288 (stories15M's head
forward), measured with EVERY installed library, in the same run as the steps and between
them: before each model's runs in each round, build/bench/blas_compare --yardstick R times
it with each library it can load (Debian's OpenMP OpenBLAS, OpenMP BLIS, oneDNN; PyPI's
scipy-openblas32 and MKL where dev/bench/bench_blas.sh put them into build/blas_cands), and
each Python with numpy (/usr/bin/python3, this python3, `python3` on PATH) times
numpy.matmul(a, b.T, out=c) on the same shape; random inputs, two warm-up calls, R timed
calls, on --threads threads (default: every core, as the trainers run). A library's speed is
the median of all its timed calls in the run; the yardstick is the fastest library's.
Each model's step FLOP/s (the median over the rounds of a round's median step time) is then
reported as a fraction of it, against the project's target (stories15M 0.70, other models
0.40), with the load average around every measurement. --no-loops leaves out the blocked
loops build; --profile-step N runs each model once more with --profile-step N
(llmc/kernels/profile.h) and reports where its step's time goes (GEMM groups, attention, the rest).
"""
import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # dev/bench/..
PRESETS = {  # V, D, L, H, KV, F, tied (train_llama.cu's MODEL_PRESETS)
    "tiny": (32000, 64, 4, 4, 2, 176, 1),
    "stories260K": (512, 64, 5, 8, 4, 172, 1),
    "stories15M": (32000, 288, 6, 6, 6, 768, 1),
    "stories42M": (32000, 512, 8, 8, 8, 1376, 1),
}
DIT_PRESETS = {  # C, Fr, Hi, Wi, pt, ph, pw, D, L, H, FF, NC (train_dit.cu's DIT_PRESETS)
    "dit-tiny": (1, 8, 16, 16, 2, 2, 2, 64, 4, 4, 256, 10),
}
YARD_MNK = (2048, 32000, 288)  # the yardstick: stories15M's head forward at B*T = 2048
TARGETS = {"stories15M": 0.70}  # the project's targets; every other model: DEFAULT_TARGET
DEFAULT_TARGET = 0.40


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    if p.returncode != 0:
        sys.exit("bench_cpu_step: %s failed (exit %d):\n%s" % (" ".join(map(shlex.quote, cmd)), p.returncode,
                                                              (p.stdout + p.stderr)[-3000:]))
    return p.stdout


def num_params(V, D, L, H, KV, F, tied):
    hd = D // H
    return V * D * (1 if tied else 2) + D + L * (2 * D + D * H * hd + 2 * D * KV * hd + H * hd * D + 3 * D * F)


def dit_flop_per_token(C, Fr, Hi, Wi, pt, ph, pw, D, L, H, FF, NC):
    """6 x the per-token weight multiply-adds (patch embed, qkv, proj, fc1, fc2, final) + the
    attention's 12 L N^2 D per clip spread over its N tokens; adaLN and conditioning (per clip) not counted."""
    P, N = C * pt * ph * pw, (Fr // pt) * (Hi // ph) * (Wi // pw)
    macs = P * D + L * (3 * D * D + D * D + 2 * D * FF) + D * P
    return 6 * macs + 12 * L * N * D, N


NUMPY_YARD = r"""
import json, os, sys, time
import numpy as np
M, N, K, R = (int(x) for x in sys.argv[1:5])
rng = np.random.default_rng(1)
a = rng.standard_normal((M, K), dtype=np.float32)
b = rng.standard_normal((N, K), dtype=np.float32)
c = np.empty((M, N), dtype=np.float32)
for _ in range(2):
    np.matmul(a, b.T, out=c)
t = []
for _ in range(R):
    t0 = time.perf_counter()
    np.matmul(a, b.T, out=c)
    t.append((time.perf_counter() - t0) * 1e3)
i = rng.integers(0, M, 256); j = rng.integers(0, N, 256)
ref = np.einsum("ik,ik->i", a[i].astype(np.float64), b[j].astype(np.float64))
err = float(np.max(np.abs(c[i, j] - ref)) / max(np.max(np.abs(ref)), 1e-30))
libs = sorted({l.split()[-1] for l in open("/proc/self/maps") if len(l.split()) > 5 and
               any(k in os.path.basename(l.split()[-1]) for k in ("blas", "blis", "mkl", "dnnl"))})
s = sorted(t); med = s[R // 2] if R % 2 else 0.5 * (s[R // 2 - 1] + s[R // 2])
fl = 2.0 * M * N * K
print(json.dumps({"median_gflops": fl / med / 1e6, "best_gflops": fl / s[0] / 1e6, "max_rel_err": err, "times_ms": t,
                  "info": "numpy %s on %s" % (np.__version__, ", ".join(os.path.realpath(l) for l in libs) or "?")}))
"""


def yard_candidates():
    """The libraries the yardstick is measured with: (label, kind, path) for blas_compare, and the numpy Pythons."""
    arch = subprocess.run(["gcc", "-print-multiarch"], capture_output=True, text=True).stdout.strip() or "x86_64-linux-gnu"
    L = "/usr/lib/" + arch
    libs = [("debian-openblas", "openblas", L + "/openblas-openmp/libopenblas.so.0"),
            ("debian-blis", "blis", L + "/blis-openmp/libblis.so.4"),
            ("debian-onednn", "dnnl", L + "/libdnnl.so.2"),
            ("scipy-openblas32", "scipy-openblas", os.path.join(ROOT, "build/blas_cands/pypi/scipy_openblas32/lib/libscipy_openblas.so")),
            ("pypi-mkl", "mkl", os.path.join(ROOT, "build/blas_cands/mkl/lib/libmkl_rt.so.3"))]
    libs = [c for c in libs if os.path.exists(c[2])]
    pys, seen = [], set()
    for py in ["/usr/bin/python3", sys.executable, shutil.which("python3") or ""]:
        if not py or not os.path.exists(py):
            continue
        # a pyenv shim is a script: ask the interpreter itself where it lives
        real = subprocess.run([py, "-c", "import sys; print(sys.executable)"], capture_output=True, text=True).stdout.strip()
        real = os.path.realpath(real or py)
        if real in seen:
            continue
        seen.add(real)
        if subprocess.run([real, "-c", "import numpy"], capture_output=True).returncode == 0:
            pys.append(real)
    return libs, pys


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def median(xs):
    return statistics.median(xs) if xs else float("nan")


def parse_profile(out):
    """The --profile-step table: (wall ms, [(group, ms, share)])."""
    head = re.search(r"profile of step \d+: ([0-9.]+) ms wall", out)
    rows = [(m.group(1).strip(), float(m.group(2)), float(m.group(3)))
            for m in re.finditer(r"^\| ([a-z0-9 ()]+?) +\| +\d+ \| +([0-9.]+) \| +([0-9.]+)% \|", out, re.M)]
    return (float(head.group(1)) if head else float("nan")), rows


def group_kind(g):
    if "matmul" in g or g.startswith(("patch embed", "final layer")):
        return "GEMM"
    return "attention" if g.startswith("attention") else "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_md")
    ap.add_argument("--steps", type=int, default=9,
                    help="steps a run; a round's time is the median of steps 2..N (default 9: eight steps, whose median leaves out a throttling stop)")
    ap.add_argument("--models", default="stories15M,tiny")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--dit-batch", type=int, default=16, help="clips per step for dit-tiny (make dit's batch)")
    ap.add_argument("--blas-libs", default="", help="the Makefile's BLAS_LIB names, comma-separated (default: what make links)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--rt", action="store_true",
                    help="run every measurement under SCHED_RR (chrt -r 10, root), 2 s apart: on a machine other sessions load")
    ap.add_argument("--yardstick", action="store_true",
                    help="also the fixed sgemm M2048 N32000 K288 with every installed library, between the steps (see above)")
    ap.add_argument("--yard-repeats", type=int, default=9, help="timed calls per library per yardstick measurement")
    ap.add_argument("--no-loops", action="store_true", help="leave out the blocked loops build")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1,
                    help="OMP_NUM_THREADS (and the BLAS libraries' thread counts) for every measurement (default: every core)")
    ap.add_argument("--profile-step", type=int, default=0, help="then one more run per model with --profile-step N")
    a = ap.parse_args()
    rt = ["chrt", "-r", "10"] if a.rt else []
    t = str(a.threads)
    env = dict(os.environ, OMP_NUM_THREADS=t, OPENBLAS_NUM_THREADS=t, BLIS_NUM_THREADS=t, MKL_NUM_THREADS=t)
    models = a.models.split(",")
    for model in models:
        if model not in PRESETS and model not in DIT_PRESETS:
            sys.exit("bench_cpu_step: unknown model %s (known: %s)" % (model, ", ".join(list(PRESETS) + list(DIT_PRESETS))))
    progs = ([("train_llama.cu", "train_llama_cpu")] if any(m in PRESETS for m in models) else []) + \
            ([("train_dit.cu", "train_dit_cpu")] if any(m in DIT_PRESETS for m in models) else [])

    def make_flags(lib):
        extra = ["BLAS_LIB=" + lib] if lib else []
        f = sh(["make", "-s", "--no-print-directory", "-f", "Makefile", "print-cpu-flags"] + extra).split("\n")
        return f[0].split(), f[1].split(), f[2].split(), f[3].strip()

    cflags, blas_cflags, blas_libs, used = make_flags("")
    libs = [l for l in a.blas_libs.split(",") if l] or [used]
    if not used and not a.blas_libs:
        sys.exit("bench_cpu_step: no BLAS library found (make info; scripts/ensure_build_deps.sh)")
    os.makedirs(os.path.join(ROOT, "build/bench"), exist_ok=True)
    one = lambda fl: [f for f in fl if not (f == "-DUSE_MPI" or "MPICXX" in f or "openmpi" in f)]  # one process
    loops = [f for f in one(cflags) if f not in ("-DUSE_BLAS", "-DUSE_BLIS", "-DUSE_DNNL") and f not in blas_cflags]
    variants = []  # (label, binary suffix, same-library sgemm_bench)
    if not a.no_loops:
        for src, prog in progs:
            sh(["g++"] + loops + ["-x", "c++", src, "-o", "build/bench/%s_loops" % prog, "-lm"])
        variants.append(("before (blocked loops)", "loops", None))
    for lib in libs:
        cf, bcf, bl, u = make_flags(lib)
        if u != lib:
            sys.exit("bench_cpu_step: BLAS_LIB=%s is not installed (make info BLAS_LIB=%s)" % (lib, lib))
        for src, prog in progs:
            sh(["g++"] + one(cf) + ["-x", "c++", src, "-x", "none", "-o", "build/bench/%s_%s" % (prog, lib), "-lm"] + bl)
        yard = "build/bench/sgemm_bench_" + lib
        sh(["gcc", "-O2"] + bcf + ["dev/bench/sgemm_bench.c", "-o", yard] + bl)
        variants.append(("after (%s)" % lib, lib, yard))

    yard_libs, yard_pys = [], []
    yard_times, yard_info, yard_meas = {}, {}, []  # label -> every timed call (ms); label -> what it is; every measurement
    if a.yardstick:
        sh(["g++", "-O3", "-march=native", "-fopenmp", "-std=c++17", "-DLLMC_CPU", "-Wall", "-Wextra", "-Wno-unused-function",
            "-I.", "-x", "c++", "dev/bench/blas_compare.c", "-o", "build/bench/blas_compare", "-ldl", "-lm"])
        yard_libs, yard_pys = yard_candidates()
        if not yard_libs and not yard_pys:
            sys.exit("bench_cpu_step: --yardstick: no BLAS library and no numpy found")

    def measure_yard(rnd, model):
        """The yardstick with every library, now; appends to yard_times / yard_meas; returns {label: median GFLOP/s}."""
        got = {}
        l0 = loadavg()
        if yard_libs:
            if a.rt:
                time.sleep(2)
            out = sh(rt + ["build/bench/blas_compare", "--yardstick", str(a.yard_repeats), "--threads", t] +
                     (["--pause", "2"] if a.rt else []) + ["%s@%s=%s" % c for c in yard_libs], env=env)
            for line in out.splitlines():
                if line.startswith("{"):
                    r = json.loads(line)
                    got[r["candidate"]] = r
        for py in yard_pys:
            if a.rt:
                time.sleep(2)
            r = json.loads(sh(rt + [py, "-c", NUMPY_YARD] + [str(x) for x in YARD_MNK] + [str(a.yard_repeats)], env=env)
                           .strip().splitlines()[-1])
            r["candidate"] = "numpy (%s)" % py
            got[r["candidate"]] = r
        l1 = loadavg()
        res = {}
        for label, r in got.items():
            if "error" in r:
                print("bench_cpu_step: yardstick %s failed: %s" % (label, r["error"]), file=sys.stderr, flush=True)
                continue
            yard_times.setdefault(label, []).extend(r["times_ms"])
            yard_info[label] = {"info": r["info"], "max_rel_err": max(r["max_rel_err"], yard_info.get(label, {}).get("max_rel_err", 0))}
            res[label] = r["median_gflops"]
            yard_meas.append({"kind": "yardstick_measurement", "round": rnd + 1, "before_model": model, "library": label,
                              "median_gflops": r["median_gflops"], "best_gflops": r["best_gflops"], "times_ms": r["times_ms"],
                              "max_rel_err": r["max_rel_err"], "load_before": l0, "load_after": l1})
        print("bench_cpu_step: yardstick before %s round %d: %s (load %.2f -> %.2f)" % (
            model, rnd + 1, ", ".join("%s %.1f" % (k, v) for k, v in sorted(res.items(), key=lambda x: -x[1])), l0, l1),
            file=sys.stderr, flush=True)
        if not res:
            sys.exit("bench_cpu_step: the yardstick failed with every library")
        return res

    tmp = tempfile.mkdtemp(prefix="benchcpu_")
    rows, yrows, prows = [], [], []
    load0 = loadavg()
    date0 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    for model in models:
        if model in PRESETS:
            V, D, L, H, KV, F, tied = PRESETS[model]
            B, T = a.batch, a.seq
            shard = os.path.join(tmp, "train_V%d.bin" % V)  # token ids below the model's vocabulary
            if not os.path.exists(shard):
                sh([sys.executable, "dev/test/write_toy_shard.py", shard, "300000", "1", str(V)])
            N = num_params(V, D, L, H, KV, F, tied)
            flop_tok = 6 * N + 6 * L * D * T
            tokens = B * T
            prog = "train_llama_cpu"
            args = ["--model", model, "--batch", str(B), "--seq", str(T), "--val-every", "0", "--train-data", shard]
            sg_shape = [B * T, V, D]
        else:
            cfg = DIT_PRESETS[model]
            flop_tok, ntok = dit_flop_per_token(*cfg)
            N = None
            tokens = a.dit_batch * ntok
            prog = "train_dit_cpu"
            args = ["--model", model, "--batch", str(a.dit_batch), "--val-every", "0", "--sample-every", "0"]
            sg_shape = list(YARD_MNK)
        best, every, paired, steps_every = {}, {}, [], {}
        for rnd in range(a.rounds):
            yard_now = measure_yard(rnd, model) if a.yardstick else None
            for label, suffix, yard in variants:
                if a.rt:
                    time.sleep(2)  # the cores back to the other processes for a while
                if yard:
                    out = sh(rt + [yard] + [str(x) for x in sg_shape] + ["5"], env=env)
                    g = float(re.search(r"([0-9.]+) GFLOP/s", out).group(1))
                    best.setdefault(("sgemm", yard), 0.0)
                    best[("sgemm", yard)] = max(best[("sgemm", yard)], g)
                rd = os.path.join(tmp, "%s_%s_%d" % (model, suffix, rnd))
                cmd = ["build/bench/%s_%s" % (prog, suffix)] + args + ["--steps", str(a.steps), "--warmup", "1", "--run-dir", rd]
                l0 = loadavg()
                sh(rt + cmd, env=env)
                m = [json.loads(l) for l in open(os.path.join(rd, "metrics.jsonl"))]
                steps_ms = [r["ms"] for r in m[1:]] or [r["ms"] for r in m]
                ms = median(steps_ms)  # the median, not the mean (see the top: the stops of real-time throttling)
                ms_mean = sum(steps_ms) / len(steps_ms)
                print("bench_cpu_step: %s %s round %d: %.1f ms/step (median; mean %.1f; load %.2f)"
                      % (model, label, rnd + 1, ms, ms_mean, loadavg()), file=sys.stderr, flush=True)
                steps_every.setdefault(suffix, []).append(steps_ms)
                every.setdefault(suffix, []).append(ms)
                if yard_now and suffix != "loops":
                    paired.append({"impl": label, "round": rnd + 1, "ms": ms, "ms_mean": ms_mean, "steps_ms": steps_ms,
                                   "load_before": l0, "load_after": loadavg(),
                                   "yard_gflops": max(yard_now.values()),
                                   "fraction": tokens / (ms / 1e3) * flop_tok / 1e9 / max(yard_now.values())})
                prev = best.get(suffix)
                if prev is None or ms < prev[0]:
                    best[suffix] = (ms, m[-1]["loss"], cmd)
        default_yard = next((y for _, _, y in variants if y), None)
        for label, suffix, yard in variants:
            ms, loss, cmd = best[suffix]
            sgemm = best[("sgemm", yard or default_yard)] if (yard or default_yard) else float("nan")
            tok_s = tokens / (ms / 1e3)
            gf = tok_s * flop_tok / 1e9
            row = {"model": model, "impl": label, "params": N, "flop_per_token": flop_tok, "ms_per_step": ms,
                   "tok_per_s": tok_s, "gflops": gf, "sgemm_gflops": sgemm, "fraction_of_sgemm": gf / sgemm,
                   "loss_last": loss, "rounds": a.rounds, "command": " ".join(cmd[:-4])}
            if a.yardstick:
                row = dict({"kind": "step"}, **row)
            rows.append(row)
            print("bench_cpu_step: %s %s: %.1f ms/step, %.0f tok/s, %.1f GFLOP/s = %.0f%% of sgemm %.1f" % (
                model, label, ms, tok_s, gf, 100 * gf / sgemm, sgemm), file=sys.stderr, flush=True)
            if a.yardstick and suffix != "loops":
                yrows.append({"kind": "step_vs_yardstick", "model": model, "impl": label, "params": N,
                              "flop_per_token": flop_tok, "tokens_per_step": tokens, "rounds_ms": every[suffix],
                              "ms_per_step": median(every[suffix]), "loss_last": loss, "command": " ".join(cmd[:-2]),
                              "rounds_steps_ms": steps_every[suffix],
                              "ms_per_step_of_means": median([sum(x) / len(x) for x in steps_every[suffix]]),
                              "paired": [p for p in paired if p["impl"] == label]})
        if a.profile_step > 0 and variants:
            label, suffix, _ = variants[-1]
            if a.rt:
                time.sleep(2)
            rd = os.path.join(tmp, "%s_%s_profile" % (model, suffix))
            cmd = ["build/bench/%s_%s" % (prog, suffix)] + args + ["--steps", str(a.profile_step + 1), "--warmup", "1",
                                                                   "--profile-step", str(a.profile_step), "--run-dir", rd]
            wall, groups = parse_profile(sh(rt + cmd, env=env))
            kinds = {}
            for g, gms, _ in groups:
                kinds[group_kind(g)] = kinds.get(group_kind(g), 0.0) + gms
            prows.append({"kind": "profile", "model": model, "impl": label, "step": a.profile_step, "wall_ms": wall,
                          "by_kind_ms": kinds, "groups": [{"group": g, "ms": gms, "share": sh_} for g, gms, sh_ in groups],
                          "command": " ".join(cmd[:-2])})
    load1 = loadavg()
    date1 = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())

    ylib = []
    if a.yardstick:
        fl = 2.0 * YARD_MNK[0] * YARD_MNK[1] * YARD_MNK[2]
        for label, ts in yard_times.items():
            ylib.append({"kind": "yardstick_library", "library": label, "info": yard_info[label]["info"],
                         "max_rel_err": yard_info[label]["max_rel_err"], "calls": len(ts), "median_ms": median(ts),
                         "median_gflops": fl / median(ts) / 1e6, "best_gflops": fl / min(ts) / 1e6,
                         "M": YARD_MNK[0], "N": YARD_MNK[1], "K": YARD_MNK[2], "threads": a.threads})
        ylib.sort(key=lambda r: -r["median_gflops"])
        win = ylib[0]
        for r in yrows:
            tok_s = r["tokens_per_step"] / (r["ms_per_step"] / 1e3)
            gf = tok_s * r["flop_per_token"] / 1e9
            frac = gf / win["median_gflops"]
            target = TARGETS.get(r["model"], DEFAULT_TARGET)
            r.update({"tok_per_s": tok_s, "gflops": gf, "yard_gflops": win["median_gflops"], "yard_library": win["library"],
                      "fraction": frac, "paired_fraction_median": median([p["fraction"] for p in r["paired"]]),
                      "fraction_of_means": r["tokens_per_step"] / (r["ms_per_step_of_means"] / 1e3) * r["flop_per_token"] / 1e9
                      / win["median_gflops"],
                      "target": target, "met": frac >= target})

    base = os.path.splitext(a.out_md)[0]
    with open(base + ".jsonl", "w") as f:
        for r in rows + ylib + yrows + yard_meas + prows:
            f.write(json.dumps(r) + "\n")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    cpu = ""
    try:
        ls = dict(l.split(":", 1) for l in subprocess.run(["lscpu"], capture_output=True, text=True).stdout.splitlines() if ":" in l)
        ls = {k.strip(): v.strip() for k, v in ls.items()}
        cpu = "%s, family %s model %s" % (ls.get("Model name", "?"), ls.get("CPU family", "?"), ls.get("Model", "?"))
    except OSError:
        pass
    cmdline = "python3 dev/bench/bench_cpu_step.py %s --steps %d --models %s%s%s%s%s%s%s%s%s" % (
        a.out_md, a.steps, a.models, " --blas-libs " + a.blas_libs if a.blas_libs else "",
        " --rounds %d" % a.rounds if a.rounds > 1 else "", " --rt" if a.rt else "",
        " --yardstick --yard-repeats %d" % a.yard_repeats if a.yardstick else "", " --no-loops" if a.no_loops else "",
        " --threads %d" % a.threads if a.threads != (os.cpu_count() or 1) else "",
        " --profile-step %d" % a.profile_step if a.profile_step else "",
        " --dit-batch %d" % a.dit_batch if a.dit_batch != 16 else "")
    if not a.yardstick:
        lines = ["# The CPU step at BLAS speed", "",
                 "Machine: %s, %d cores (`nproc`), no GPU; threads: OpenMP and the BLAS libraries' defaults (all cores). Commit %s; "
                 "the working tree may hold uncommitted edits of the same change. Load average (1 min) before %.2f, after %.2f."
                 % (platform.machine(), os.cpu_count(), commit, load0, load1), ""]
    else:
        lines = ["# The CPU step against the best sgemm of any installed library", "",
                 "Machine: %s (`lscpu`), %s, %d cores (`nproc`), no GPU; %d threads (OMP_NUM_THREADS and every BLAS "
                 "library's thread count) for the trainers and the yardstick alike. %s to %s; commit %s (the working tree may hold "
                 "uncommitted edits of the same change). Load average (1 min) before %.2f, after %.2f; around every measurement "
                 "in the .jsonl." % (cpu or "?", platform.machine(), os.cpu_count(), a.threads, date0, date1, commit, load0, load1), ""]
    lines += ["Command: `%s` (llama: B=%d, T=%d; dit-tiny: %d clips of 256 tokens; a step's time is the median "
              "of steps 2..%d%s; FLOP per token = 6N + 6LDT (Llama), 6 x weight multiply-adds per token + 12 L N^2 D / N "
              "(DiT); the same-library sgemm is `build/bench/sgemm_bench B*T V D`, the head's forward GEMM (dit-tiny: M2048 "
              "N32000 K288), measured in the same run with the same library, best of the rounds)."
              % (cmdline, a.batch, a.seq, a.dit_batch, a.steps,
                 (", the best of %d interleaved rounds" % a.rounds if a.rounds > 1 else "")
                 + ("; every run under SCHED_RR, chrt -r 10, 2 s apart" if a.rt else "")), ""]
    if a.yardstick:
        lines += ["## The step as a fraction of the yardstick", "",
                  "Yardstick: sgemm M %d N %d K %d (C = A . B^T, stories15M's head forward), random inputs, %d threads; each "
                  "library timed before every model's runs in every round (%d measurements of %d calls after 2 warm-up calls); "
                  "a library's speed is the median of all its calls; the yardstick is the fastest library's. A step's time: "
                  "the median over the %d rounds of a round's median step time. Fraction = the step's FLOP/s / the yardstick; "
                  "\"paired\": the median over the rounds of the step against the yardstick measured just before it; "
                  "\"by means\": the fraction with each round's mean step time instead of its median (every step's time: the "
                  ".jsonl's rounds_steps_ms)."
                  % (YARD_MNK + (a.threads, len(models) * a.rounds, a.yard_repeats, a.rounds)), "",
                  "| model | matmul | ms/step | tok/s | step GFLOP/s | yardstick GFLOP/s (library) | fraction | paired | by means "
                  "| target | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in yrows:
            verdict = "met" if r["met"] else "missed by %.2f (the step %.2fx too slow)" % (
                r["target"] - r["fraction"], r["target"] / r["fraction"])
            lines.append("| %s | %s | %.1f | %.0f | %.1f | %.1f (%s) | %.2f | %.2f | %.2f | %.2f | %s |" % (
                r["model"], r["impl"], r["ms_per_step"], r["tok_per_s"], r["gflops"], r["yard_gflops"], r["yard_library"],
                r["fraction"], r["paired_fraction_median"], r["fraction_of_means"], r["target"], verdict))
        lines += ["", "The yardstick by library (median of every call in the run; 'max rel. err': 256 sampled outputs against "
                  "double-precision dot products):", "",
                  "| library | what it is | calls | median GFLOP/s | best GFLOP/s | max rel. err |", "|---|---|---|---|---|---|"]
        for r in ylib:
            lines.append("| %s | %s | %d | %.1f | %.1f | %.1e |" % (r["library"], r["info"], r["calls"], r["median_gflops"],
                                                                   r["best_gflops"], r["max_rel_err"]))
        lines += ["", "Every step and every library, as the table below them: the .jsonl.", ""]
    if prows:
        lines += ["## Where the step's time goes (--profile-step %d)" % a.profile_step, "",
                  "| model | matmul | step ms (profiled) | GEMM groups | attention | the rest | the largest groups |",
                  "|---|---|---|---|---|---|---|"]
        for p in prows:
            k, w = p["by_kind_ms"], p["wall_ms"]
            pct = lambda x: "%.1f ms (%.0f%%)" % (x, 100 * x / w)
            top = ", ".join("%s %.0f%%" % (g["group"], g["share"]) for g in p["groups"][:5])
            lines.append("| %s | %s | %.1f | %s | %s | %s | %s |" % (p["model"], p["impl"], w, pct(k.get("GEMM", 0)),
                                                                    pct(k.get("attention", 0)), pct(k.get("other", 0)), top))
        lines += ["", "GEMM groups: the groups named `matmul`, `patch embed`, `final layer` (the DiT's final layer includes "
                  "its LayerNorm and modulation); attention: `attention fwd`, `attention bwd`; the rest: norms, RoPE, "
                  "SwiGLU / GELU, cross-entropy, AdamW, ...", ""]
    if a.yardstick:
        lines += ["## Every build, best round, against its own library's sgemm", ""]
    lines += ["| model | matmul | ms/step | tok/s | GFLOP/s | sgemm GFLOP/s | fraction of sgemm |",
              "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %.1f | %.0f | %.1f | %.1f | %.0f%% |" % (r["model"], r["impl"], r["ms_per_step"], r["tok_per_s"],
                                                                       r["gflops"], r["sgemm_gflops"], 100 * r["fraction_of_sgemm"]))
    lines.append("")
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
