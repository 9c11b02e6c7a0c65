#!/usr/bin/env python3
"""The CPU build's training step against the machine's sgemm, before and after BLAS.

    python3 scripts/bench_cpu_step.py OUT_MD [--steps 6] [--models stories15M,tiny]
                                      [--blas-libs onednn,openblas] [--rounds 1] [--rt]

Builds, into build/bench/, the CPU trainer from the same source with the blocked loops of
llmc/cpu/matmul.h (BLAS=0, "before") and with each BLAS library named (the Makefile's
BLAS_LIB names; by default the one `make` links), and dev/bench/sgemm_bench.c against each
cblas library. For each model it trains B=8, T=256 for a few steps on a synthetic shard
and takes the mean step time of the steps after the first; with --rounds R the binaries
run R times each, interleaved, and the best round counts (other processes may share the
machine: the load average before and after is written down; --rt runs each measurement
under SCHED_RR, chrt -r 10, 2 s apart, so that they do not time-slice it). Achieved FLOP/s = tok/s *
(6N + 6*L*D*T) (N parameters, tied embeddings counted once), against sgemm's FLOP/s on the
step's largest GEMM (the head: M = B*T, N = V, K = D) measured in the same run with the
same library. All on the threads the machine has (OMP_NUM_THREADS and the libraries'
defaults). Writes OUT_MD (markdown, with machine, commit and commands) and OUT_MD .jsonl.
"""
import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
PRESETS = {  # V, D, L, H, KV, F, tied (train_llama.cu's MODEL_PRESETS)
    "tiny": (32000, 64, 4, 4, 2, 176, 1),
    "stories260K": (512, 64, 5, 8, 4, 172, 1),
    "stories15M": (32000, 288, 6, 6, 6, 768, 1),
    "stories42M": (32000, 512, 8, 8, 8, 1376, 1),
}


def sh(cmd, **kw):
    p = subprocess.run(cmd, capture_output=True, text=True, cwd=ROOT, **kw)
    if p.returncode != 0:
        sys.exit("bench_cpu_step: %s failed (exit %d):\n%s" % (" ".join(map(shlex.quote, cmd)), p.returncode,
                                                              (p.stdout + p.stderr)[-3000:]))
    return p.stdout


def num_params(V, D, L, H, KV, F, tied):
    hd = D // H
    return V * D * (1 if tied else 2) + D + L * (2 * D + D * H * hd + 2 * D * KV * hd + H * hd * D + 3 * D * F)


def loadavg():
    try:
        return float(open("/proc/loadavg").read().split()[0])
    except (OSError, ValueError, IndexError):
        return -1.0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_md")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--models", default="stories15M,tiny")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--blas-libs", default="", help="the Makefile's BLAS_LIB names, comma-separated (default: what make links)")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--rt", action="store_true",
                    help="run every measurement under SCHED_RR (chrt -r 10, root), 2 s apart: on a machine other sessions load")
    a = ap.parse_args()
    rt = ["chrt", "-r", "10"] if a.rt else []

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
    sh(["g++"] + loops + ["-x", "c++", "train_llama.cu", "-o", "build/bench/train_llama_cpu_loops", "-lm"])
    variants = [("before (blocked loops)", "train_llama_cpu_loops", None)]
    for lib in libs:
        cf, bcf, bl, u = make_flags(lib)
        if u != lib:
            sys.exit("bench_cpu_step: BLAS_LIB=%s is not installed (make info BLAS_LIB=%s)" % (lib, lib))
        sh(["g++"] + one(cf) + ["-x", "c++", "train_llama.cu", "-x", "none", "-o", "build/bench/train_llama_cpu_" + lib, "-lm"] + bl)
        yard = "build/bench/sgemm_bench_" + lib
        sh(["gcc", "-O2"] + bcf + ["dev/bench/sgemm_bench.c", "-o", yard] + bl)
        variants.append(("after (%s)" % lib, "train_llama_cpu_" + lib, yard))
    tmp = tempfile.mkdtemp(prefix="benchcpu_")
    rows = []
    B, T = a.batch, a.seq
    load0 = loadavg()
    for model in a.models.split(","):
        V, D, L, H, KV, F, tied = PRESETS[model]
        shard = os.path.join(tmp, "train_V%d.bin" % V)  # token ids below the model's vocabulary
        if not os.path.exists(shard):
            sh([sys.executable, "scripts/write_toy_shard.py", shard, "300000", "1", str(V)])
        N = num_params(V, D, L, H, KV, F, tied)
        flop_tok = 6 * N + 6 * L * D * T
        best = {}
        for rnd in range(a.rounds):
            for label, binary, yard in variants:
                if a.rt:
                    time.sleep(2)  # the cores back to the other processes for a while
                if yard:
                    out = sh(rt + [yard, str(B * T), str(V), str(D), "5"])
                    g = float(re.search(r"([0-9.]+) GFLOP/s", out).group(1))
                    best.setdefault(("sgemm", yard), 0.0)
                    best[("sgemm", yard)] = max(best[("sgemm", yard)], g)
                rd = os.path.join(tmp, "%s_%s_%d" % (model, binary, rnd))
                cmd = ["build/bench/" + binary, "--model", model, "--batch", str(B), "--seq", str(T), "--steps", str(a.steps),
                       "--warmup", "1", "--val-every", "0", "--train-data", shard, "--run-dir", rd]
                sh(rt + cmd)
                m = [json.loads(l) for l in open(os.path.join(rd, "metrics.jsonl"))]
                ms = sum(r["ms"] for r in m[1:]) / max(1, len(m) - 1)
                print("bench_cpu_step: %s %s round %d: %.1f ms/step (load %.2f)" % (model, label, rnd + 1, ms, loadavg()),
                      file=sys.stderr, flush=True)
                prev = best.get(binary)
                if prev is None or ms < prev[0]:
                    best[binary] = (ms, m[-1]["loss"], cmd)
        default_yard = next((y for _, _, y in variants if y), None)
        for label, binary, yard in variants:
            ms, loss, cmd = best[binary]
            sgemm = best[("sgemm", yard or default_yard)] if (yard or default_yard) else float("nan")
            tok_s = B * T / (ms / 1e3)
            gf = tok_s * flop_tok / 1e9
            rows.append({"model": model, "impl": label, "params": N, "flop_per_token": flop_tok, "ms_per_step": ms,
                         "tok_per_s": tok_s, "gflops": gf, "sgemm_gflops": sgemm, "fraction_of_sgemm": gf / sgemm,
                         "loss_last": loss, "rounds": a.rounds, "command": " ".join(cmd[:-4])})
            print("bench_cpu_step: %s %s: %.1f ms/step, %.0f tok/s, %.1f GFLOP/s = %.0f%% of sgemm %.1f" % (
                model, label, ms, tok_s, gf, 100 * gf / sgemm, sgemm), file=sys.stderr, flush=True)
    load1 = loadavg()
    base = os.path.splitext(a.out_md)[0]
    with open(base + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    lines = ["# The CPU step at BLAS speed", "",
             "Machine: %s, %d cores (`nproc`), no GPU; threads: OpenMP and the BLAS libraries' defaults (all cores). Commit %s; "
             "the working tree may hold uncommitted edits of the same change. Load average (1 min) before %.2f, after %.2f."
             % (platform.machine(), os.cpu_count(), commit, load0, load1), "",
             "Command: `python3 scripts/bench_cpu_step.py %s --steps %d --models %s%s%s%s` (B=%d, T=%d; a step's time is the mean "
             "of steps 2..%d%s; FLOP per token = 6N + 6LDT; the yardstick is `build/bench/sgemm_bench B*T V D`, the head's "
             "forward GEMM, measured in the same run with the same library, best of the rounds)."
             % (a.out_md, a.steps, a.models, " --blas-libs " + a.blas_libs if a.blas_libs else "",
                " --rounds %d" % a.rounds if a.rounds > 1 else "", " --rt" if a.rt else "", B, T, a.steps,
                (", the best of %d interleaved rounds" % a.rounds if a.rounds > 1 else "")
                + ("; every run under SCHED_RR, chrt -r 10, 2 s apart" if a.rt else "")), "",
             "| model | matmul | ms/step | tok/s | GFLOP/s | sgemm GFLOP/s | fraction of sgemm |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append("| %s | %s | %.1f | %.0f | %.1f | %.1f | %.0f%% |" % (r["model"], r["impl"], r["ms_per_step"], r["tok_per_s"],
                                                                       r["gflops"], r["sgemm_gflops"], 100 * r["fraction_of_sgemm"]))
    lines.append("")
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
