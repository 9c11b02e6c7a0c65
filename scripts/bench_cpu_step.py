#!/usr/bin/env python3
"""The CPU build's training step against the machine's sgemm, before and after BLAS.

    python3 scripts/bench_cpu_step.py OUT_MD [--steps 6] [--models stories15M,tiny]

Builds, into build/bench/, the CPU trainer twice from the same source: with the blocked
loops of llmc/cpu/matmul.h (BLAS=0, "before") and with OpenBLAS (USE_BLAS, "after"), and
dev/bench/sgemm_bench.c. For each model it trains B=8, T=256 for a few steps on a
synthetic shard and takes the mean step time of the steps after the first; achieved
FLOP/s = tok/s * (6N + 6*L*D*T) (N parameters, tied embeddings counted once), against
sgemm's FLOP/s on the step's largest GEMM (the head: M = B*T, N = V, K = D) measured in
the same run. All on the threads the machine has (OMP_NUM_THREADS and OpenBLAS's
default). Writes OUT_MD (markdown, with machine, commit and commands) and OUT_MD .jsonl.
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


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_md")
    ap.add_argument("--steps", type=int, default=6)
    ap.add_argument("--models", default="stories15M,tiny")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=256)
    a = ap.parse_args()
    flags = sh(["make", "-s", "--no-print-directory", "-f", "Makefile", "print-cpu-flags"]).split("\n")
    cflags, blas_cflags, blas_libs = flags[0].split(), flags[1].split(), flags[2].split()
    if not blas_libs:
        sys.exit("bench_cpu_step: no OpenBLAS found (make info; apt-get install libopenblas-dev)")
    os.makedirs(os.path.join(ROOT, "build/bench"), exist_ok=True)
    cflags = [f for f in cflags if not (f == "-DUSE_MPI" or "MPICXX" in f or "openmpi" in f)]  # one process
    loops = [f for f in cflags if f != "-DUSE_BLAS" and f not in blas_cflags]
    sh(["g++"] + loops + ["-x", "c++", "train_llama.cu", "-o", "build/bench/train_llama_cpu_loops", "-lm"])
    sh(["g++"] + cflags + ["-x", "c++", "train_llama.cu", "-o", "build/bench/train_llama_cpu_blas", "-lm"] + blas_libs)
    sh(["gcc", "-O2"] + blas_cflags + ["dev/bench/sgemm_bench.c", "-o", "build/bench/sgemm_bench"] + blas_libs)
    tmp = tempfile.mkdtemp(prefix="benchcpu_")
    rows = []
    B, T = a.batch, a.seq
    for model in a.models.split(","):
        V, D, L, H, KV, F, tied = PRESETS[model]
        shard = os.path.join(tmp, "train_V%d.bin" % V)  # token ids below the model's vocabulary
        if not os.path.exists(shard):
            sh([sys.executable, "scripts/write_toy_shard.py", shard, "300000", "1", str(V)])
        N = num_params(V, D, L, H, KV, F, tied)
        flop_tok = 6 * N + 6 * L * D * T
        out = sh(["build/bench/sgemm_bench", str(B * T), str(V), str(D), "5"])
        sgemm = float(re.search(r"([0-9.]+) GFLOP/s", out).group(1))
        for label, binary in (("before (blocked loops)", "train_llama_cpu_loops"), ("after (OpenBLAS)", "train_llama_cpu_blas")):
            rd = os.path.join(tmp, "%s_%s" % (model, binary))
            cmd = ["build/bench/" + binary, "--model", model, "--batch", str(B), "--seq", str(T), "--steps", str(a.steps),
                   "--warmup", "1", "--val-every", "0", "--train-data", shard, "--run-dir", rd]
            sh(cmd)
            m = [json.loads(l) for l in open(os.path.join(rd, "metrics.jsonl"))]
            ms = sum(r["ms"] for r in m[1:]) / max(1, len(m) - 1)
            tok_s = B * T / (ms / 1e3)
            gf = tok_s * flop_tok / 1e9
            rows.append({"model": model, "impl": label, "params": N, "flop_per_token": flop_tok, "ms_per_step": ms,
                         "tok_per_s": tok_s, "gflops": gf, "sgemm_gflops": sgemm, "fraction_of_sgemm": gf / sgemm,
                         "loss_last": m[-1]["loss"], "command": " ".join(cmd[:-4])})
            print("bench_cpu_step: %s %s: %.1f ms/step, %.0f tok/s, %.1f GFLOP/s = %.0f%% of sgemm %.1f" % (
                model, label, ms, tok_s, gf, 100 * gf / sgemm, sgemm), file=sys.stderr, flush=True)
    base = os.path.splitext(a.out_md)[0]
    with open(base + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=ROOT).stdout.strip()
    lines = ["# The CPU step at BLAS speed", "",
             "Machine: %s, %d cores (`nproc`), no GPU; threads: OpenMP and OpenBLAS defaults (all cores). Commit %s; "
             "the working tree may hold uncommitted edits of the same change." % (platform.machine(), os.cpu_count(), commit), "",
             "Command: `python3 scripts/bench_cpu_step.py %s --steps %d --models %s` (B=%d, T=%d; a step's time is the mean "
             "of steps 2..%d; FLOP per token = 6N + 6LDT; the yardstick is `build/bench/sgemm_bench B*T V D`, the head's "
             "forward GEMM, measured in the same run)." % (a.out_md, a.steps, a.models, B, T, a.steps), "",
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
