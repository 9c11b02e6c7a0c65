#!/usr/bin/env python3
"""Per-rank memory of train_dit on a cluster, planned against measured (CPU build).

    python3 dev/bench/measure_dit_parallel_memory.py BINARY OUT_MD [--shape "..."] [--batch 2] [--steps 2]

Runs BINARY (train_dit_cpu) for a few steps in each layout of CONFIGS (one process; dp 2
and 4, with and without ZeRO-1; tp 2 and 4 and tp 2 x dp 2 with ZeRO-1, each also with
sequence parallelism (--tp-mode reducescatter): at most 4 ranks,
one OpenMP thread each) and reads rank 0's plan (--plan-json; TP rank 0 holds the most FFN
units, so its plan is its group's largest) and the measured per-rank peak (the largest
rank's resident set sampled after each step: train_dit's peak_mem). The table gives
planned, measured, their difference, and each layout's saving against one process,
planned and measured (the constant the plan does not own cancels there), with the bytes
llmc/parallel/comm.h counted in the first step against the plan's formula (docs/memory.md 9.8).
glibc's mmap threshold is fixed (dev/bench/measure_dp_memory.py's docstring says why).
Writes OUT_MD (markdown, with the command, machine and commit) and OUT_MD with .jsonl.
"""
import argparse
import hashlib
import json
import os
import shlex
import shutil
import subprocess
import sys
import tempfile

import measure_dp_memory as dpm  # launch, measure, commit, machine

# (ranks, tp, dp, --zero, sequence parallelism: --tp-mode reducescatter)
CONFIGS = [(1, 1, 1, 0, 0), (2, 1, 2, 0, 0), (2, 1, 2, 1, 0), (4, 1, 4, 1, 0), (2, 2, 1, 0, 0), (4, 4, 1, 0, 0),
           (4, 2, 2, 1, 0), (2, 2, 1, 0, 1), (4, 4, 1, 0, 1), (4, 2, 2, 1, 1)]
SHAPE = "--channels 3 --frames 8 --height 32 --width 32 --pt 1 --ph 2 --pw 2 --D 256 --L 6 --H 8 --FF 1024 --NC 10"


def comm_line(stdout, what):
    for line in stdout.splitlines():
        if line.startswith("comm per step, " + what):
            return line.split(":", 1)[1].strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out_md")
    ap.add_argument("--shape", default=SHAPE, help="model and clip flags (tp 4 must divide H)")
    ap.add_argument("--batch", type=int, default=2, help="clips per micro-batch per DP rank")
    ap.add_argument("--steps", type=int, default=2)
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="ditmem_")
    binary = os.path.join(tmp, os.path.basename(a.binary))  # one copy: a rebuild cannot mix two builds
    shutil.copy2(a.binary, binary)
    sha = hashlib.sha256(open(binary, "rb").read()).hexdigest()[:16]
    rows = []
    for np, tp, dp, zero, sp in CONFIGS:
        name = "tp%d_dp%d_z%d%s" % (tp, dp, zero, "_sp" if sp else "")
        rd, plan = os.path.join(tmp, name), os.path.join(tmp, name + ".plan.json")
        args = [binary] + shlex.split(a.shape) + ["--batch", str(a.batch), "--steps", str(a.steps), "--val-every", "0",
                                                  "--run-dir", rd, "--plan-json", plan, "--tp", str(tp), "--zero", str(zero),
                                                  "--tp-mode", "reducescatter" if sp else "allreduce"]
        print("measure_dit_parallel_memory: %s" % name, file=sys.stderr, flush=True)
        r = dpm.measure(args, np, "fixed", rd, plan)
        k = r["kinds"]
        pred, got = comm_line(r["stdout"], "predicted"), comm_line(r["stdout"], "counted")
        rows.append({"np": np, "tp": tp, "dp": dp, "zero": zero, "sp": sp, "planned": r["planned"] + r["planned_host"],
                     "planned_static": sum(k.get(x, 0) for x in ("parameters", "gradients", "optimizer")),
                     "planned_activations": k.get("activations", 0), "act_block_bytes": r["plan"]["act_block_bytes"],
                     "measured": r["measured"], "loss_last": r["loss_last"],
                     "comm_counted_equals_predicted": pred is not None and pred == got})
    with open(os.path.splitext(a.out_md)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mib = lambda b: "%.1f" % (b / 1048576.0)
    one = rows[0]
    cmd = "python3 dev/bench/measure_dit_parallel_memory.py %s %s --shape '%s' --batch %d --steps %d" % (
        a.binary, a.out_md, a.shape, a.batch, a.steps)
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "train_dit.cu", "llmc"],
                           cwd=dpm.ROOT, stderr=subprocess.DEVNULL).returncode
    lines = ["# train_dit on a cluster: per-rank memory, planned and measured (CPU build)", "",
             "Machine: %s (CPU build: \"device\" memory is host memory; measured = the largest rank's resident set "
             "sampled after each step). Commit %s%s." % (dpm.machine(), dpm.commit(),
                                                         " with uncommitted changes to train_dit.cu and llmc/" if dirty else ""), "",
             "Command: `%s` (tp x dp ranks under `mpirun -np`, one OpenMP thread per rank, glibc's mmap threshold fixed; "
             "%d clips per micro-batch per DP rank, %d steps; every run from one copy of the binary, sha256 %s...)." % (
                 cmd, a.batch, a.steps, sha), "",
             "| ranks | tp | dp | --zero | SP | static MiB | block MiB | activations MiB | planned MiB | measured MiB | "
             "measured - planned MiB | %% | saving planned MiB | saving measured MiB | R | comm counted = predicted | "
             "loss step %d |" % a.steps,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ps, ms = one["planned"] - r["planned"], one["measured"] - r["measured"]
        diff = r["measured"] - r["planned"]
        ratio = "%.2f" % (ms / ps) if abs(ps) > 1 << 20 else "-"
        lines.append("| %d | %d | %d | %d | %s | %s | %s | %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %.6f |" % (
            r["np"], r["tp"], r["dp"], r["zero"], "yes" if r["sp"] else "-", mib(r["planned_static"]), mib(r["act_block_bytes"]),
            mib(r["planned_activations"]), mib(r["planned"]), mib(r["measured"]), mib(diff), 100.0 * diff / r["planned"],
            mib(ps) if r is not one else "-", mib(ms) if r is not one else "-", ratio if r is not one else "-",
            ("yes" if r["comm_counted_equals_predicted"] else "NO") if r["np"] > 1 else "-", r["loss_last"]))
    lines += ["", "static = parameters, gradients and optimizer state of rank 0's plan; block = one block's saved "
              "activations; activations = all blocks, h_final and the adaLN vectors. Saving: against the one-process "
              "run (the same clips per rank); R = measured / planned saving. comm counted = predicted: the bytes "
              "llmc/parallel/comm.h counted in the first step equal the plan's formula (docs/memory.md 9.8), as rank 0 prints "
              "them. The losses of the layouts differ where their batches do: dp ranks each take --batch clips, so a "
              "dp 2 step sees twice one process's clips.", ""]
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
