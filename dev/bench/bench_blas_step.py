#!/usr/bin/env python3
"""The BLAS candidates inside the trainers: a training step's time with each library.

    python3 dev/bench/bench_blas_step.py OUT_MD [--rounds 3] [--steps 9] [--models stories15M,stories260K,dit-tiny]
                                       [--rt] LABEL='CFLAGS;LIBS' ...

dev/bench/bench_blas.sh --step calls it with the candidates it installed. Each LABEL builds
train_llama.cu and train_dit.cu (one process, no MPI) with the Makefile's CPU flags less
its BLAS flags, plus CFLAGS and LIBS (e.g. "-DUSE_BLAS -DUSE_BLIS -isystem DIR;-LDIR -lblis");
LABEL "loops" with empty flags is the blocked loops. Then, for each model, R rounds in
which every build trains a few steps (llama: B 8, T 256 on a synthetic shard; dit-tiny:
batch 16 of make dit), interleaved so that load from other processes falls on all of
them; a run's time is the median of its steps after the first (see bench_cpu_step.py),
the best round counts. The load average before and after is written down. This measures
the whole step: the GEMMs with the trainers' OpenMP regions between them (norms, attention,
SwiGLU, AdamW), on the same 2 threads, which is where a BLAS with its own pool of threads
loses.
"""
import argparse
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time

from bench_cpu_step import loadavg  # the 1-minute load average, -1 when unknown

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # dev/bench/..
LLAMA = {"stories15M": 32000, "stories260K": 512, "tiny": 32000}  # vocabulary of the synthetic shard


def sh(cmd):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT)
    if p.returncode != 0:
        sys.exit("bench_blas_step: %s failed (exit %d):\n%s" % (" ".join(map(shlex.quote, cmd)), p.returncode,
                                                               (p.stdout + p.stderr)[-3000:]))
    return p.stdout


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_md")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--steps", type=int, default=9)  # the median of steps 2..9 (see bench_cpu_step.py)
    ap.add_argument("--models", default="stories15M,stories260K,dit-tiny")
    ap.add_argument("--rt", action="store_true", help="run the trainers under SCHED_RR (chrt -r 10), 2 s apart")
    ap.add_argument("cands", nargs="+", help="LABEL='CFLAGS;LIBS'")
    a = ap.parse_args()
    flags = sh(["make", "-s", "--no-print-directory", "-f", "Makefile", "print-cpu-flags"]).split("\n")
    blas_cflags = flags[1].split()
    base = [f for f in flags[0].split() if f not in blas_cflags and not (f == "-DUSE_MPI" or "MPICXX" in f or "openmpi" in f)]
    os.makedirs(os.path.join(ROOT, "build/bench"), exist_ok=True)
    cands = []
    for c in a.cands:
        label, spec = c.split("=", 1)
        cf, libs = (spec.split(";", 1) + [""])[:2]
        for src, prog in (("train_llama.cu", "llama"), ("train_dit.cu", "dit")):
            out = "build/bench/%s_%s" % (prog, label)
            sh(["g++"] + base + cf.split() + ["-x", "c++", src, "-x", "none", "-o", out, "-lm"] + libs.split())
        cands.append(label)
    tmp = tempfile.mkdtemp(prefix="benchblasstep_")
    load0 = loadavg()
    rows = []
    for model in a.models.split(","):
        if model in LLAMA:
            shard = os.path.join(tmp, "train_V%d.bin" % LLAMA[model])
            if not os.path.exists(shard):
                sh([sys.executable, "dev/test/write_toy_shard.py", shard, "300000", "1", str(LLAMA[model])])
            args = ["--model", model, "--batch", "8", "--seq", "256", "--train-data", shard, "--val-every", "0"]
            prog = "llama"
        else:
            args = ["--model", model, "--batch", "16", "--val-every", "0", "--sample-every", "0"]
            prog = "dit"
        best = {}
        for rnd in range(a.rounds):
            for k in range(len(cands)):
                label = cands[(k + rnd) % len(cands)]
                rd = os.path.join(tmp, "%s_%s_%d" % (model, label, rnd))
                cmd = ["build/bench/%s_%s" % (prog, label)] + args + ["--steps", str(a.steps), "--warmup", "1", "--run-dir", rd]
                if a.rt:
                    time.sleep(2)  # the cores back to the other processes for a while
                sh((["chrt", "-r", "10"] if a.rt else []) + cmd)
                m = [json.loads(l) for l in open(os.path.join(rd, "metrics.jsonl"))]
                # the median of the steps after the first, as bench_cpu_step.py takes it (under --rt the real-time
                # throttling stops a run for ~50 ms once a second, which a mean of a few steps takes in whole)
                ms = statistics.median([r["ms"] for r in m[1:]] or [r["ms"] for r in m])
                print("bench_blas_step: %s %s round %d: %.1f ms/step (load %.2f)" % (model, label, rnd + 1, ms, loadavg()),
                      file=sys.stderr, flush=True)
                every = best[label]["all"] if label in best else []
                every.append(round(ms, 1))
                if label not in best or ms < best[label]["ms"]:
                    best[label] = {"ms": ms, "loss": m[-1]["loss"], "cmd": " ".join(cmd[:-2])}
                best[label]["all"] = every
        for label in cands:
            b = best[label]
            rows.append({"model": model, "blas": label, "ms_per_step": b["ms"], "rounds_ms": b["all"], "loss_last": b["loss"],
                         "command": b["cmd"]})
    load1 = loadavg()
    with open(os.path.splitext(a.out_md)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    lines = ["Load average (1 min) before %.2f, after %.2f; %d interleaved rounds, the best counts; %d steps a run, the "
             "median of steps 2..%d%s." % (load0, load1, a.rounds, a.steps, a.steps,
                                        "; every run under SCHED_RR (chrt -r 10), 2 s apart" if a.rt else ""), "",
             "| model | BLAS | ms/step (best round) | every round | speed vs %s | loss after %d steps |" % (cands[0], a.steps),
             "|---|---|---|---|---|---|"]
    for r in rows:
        ref = next(x for x in rows if x["model"] == r["model"] and x["blas"] == cands[0])
        lines.append("| %s | %s | %.1f | %s | %.2fx | %.6f |" % (r["model"], r["blas"], r["ms_per_step"],
                                                               " ".join("%.0f" % v for v in r["rounds_ms"]),
                                                               ref["ms_per_step"] / r["ms_per_step"], r["loss_last"]))
    lines.append("")
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
