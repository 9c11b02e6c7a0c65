#!/usr/bin/env python3
"""Per-rank memory of the ZeRO stages, planned against measured (CPU build), both trainers.

    python3 dev/bench/measure_zero_memory.py OUT_MD [--steps 3] [--dps 2,4]

For each trainer (train_llama_cpu, train_dit_cpu: a model of 16 layers, so that the
layers' parameters and gradients dominate the static memory) and dp in --dps, runs
--zero 1, 2 and 3 for a few steps under mpirun (one OpenMP thread per rank) and reads
rank 0's plan (--plan-json) and the measured peak (the largest rank's resident set
sampled after each step: peak_mem of metrics.jsonl). The table gives, per stage, the
planned arena, the measured peak and the saving against --zero 1 at the same dp,
planned and measured (what the plan does not own, the program, libraries and MPI's
buffers, cancels there), with R = measured / planned saving, and the bytes
llmc/parallel/comm.h counted in a step against the plan's formula. glibc's mmap
threshold is fixed (dev/bench/measure_dp_memory.py's docstring says why). Writes OUT_MD
(markdown, with the commands, machine and commit) and OUT_MD with .jsonl.
"""
import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile

import measure_dp_memory as dpm  # launch, measure, commit, machine, toy_shard
from measure_dit_parallel_memory import comm_line  # the run's predicted and counted bytes lines

LLAMA = "--V 32000 --D 512 --L 16 --H 8 --KV 8 --F 1376 --max-seq-len 128 --seq 128 --batch 1"
DIT = "--channels 1 --frames 4 --height 16 --width 16 --pt 1 --ph 2 --pw 2 --D 256 --L 16 --H 4 --FF 1024 --NC 10 --batch 2"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("out_md")
    ap.add_argument("--steps", type=int, default=3)
    ap.add_argument("--dps", default="2,4")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="zeromem_")
    shard = dpm.toy_shard(tmp)
    rows, cmds = [], []
    for prog, shape in (("train_llama_cpu", LLAMA), ("train_dit_cpu", DIT)):
        binary = os.path.join(tmp, prog)  # one copy: a rebuild cannot mix two builds
        shutil.copy2(os.path.join(dpm.ROOT, prog), binary)
        for dp in [int(x) for x in a.dps.split(",")]:
            for zero in (1, 2, 3):
                name = "%s_dp%d_z%d" % (prog, dp, zero)
                rd, plan = os.path.join(tmp, name), os.path.join(tmp, name + ".plan.json")
                args = [binary] + shlex.split(shape) + ["--steps", str(a.steps), "--val-every", "0", "--sample-every", "0",
                                                        "--run-dir", rd, "--plan-json", plan, "--zero", str(zero)]
                if prog == "train_llama_cpu":
                    args += ["--train-data", shard]
                cmds.append("mpirun -np %d %s" % (dp, " ".join(args[1:]).replace(tmp + "/", "")))
                print("measure_zero_memory: %s" % name, file=sys.stderr, flush=True)
                r = dpm.measure(args, dp, "fixed", rd, plan)
                rows.append({"program": prog, "dp": dp, "zero": zero, "planned": r["planned"], "measured": r["measured"],
                             "params_grads": r["kinds"].get("parameters", 0) + r["kinds"].get("gradients", 0),
                             "predicted_comm": comm_line(r["stdout"], "predicted"),
                             "counted_comm": comm_line(r["stdout"], "counted"), "loss_last": r["loss_last"]})
    with open(os.path.splitext(a.out_md)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mib = lambda b: "%.1f" % (b / 1048576.0)
    base = {(r["program"], r["dp"]): r for r in rows if r["zero"] == 1}
    lines = ["# ZeRO stages: per-rank memory, planned and measured (CPU build)", "",
             "Machine: %s (CPU build: \"device\" memory is host memory; measured = the largest rank's resident set "
             "sampled after each step, glibc's mmap threshold fixed at 128 KiB). Commit %s." % (dpm.machine(), dpm.commit()), "",
             "Command: `python3 dev/bench/measure_zero_memory.py %s --steps %d --dps %s`, which runs:" % (a.out_md, a.steps, a.dps), ""]
    lines += ["    " + c for c in cmds]
    lines += ["", "| program | dp | --zero | planned arena MiB | params + grads MiB | measured peak MiB | planned saving "
              "vs --zero 1 MiB | measured saving MiB | R | last loss | comm counted = predicted |",
              "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = base[(r["program"], r["dp"])]
        ps, ms = b["planned"] - r["planned"], b["measured"] - r["measured"]
        ratio = "%.3f" % (ms / ps) if abs(ps) > 1 << 20 else "-"
        same = r["predicted_comm"] is not None and r["predicted_comm"] == r["counted_comm"]
        lines.append("| %s | %d | %d | %s | %s | %s | %s | %s | %s | %.6f | %s |" % (
            r["program"].replace("_cpu", ""), r["dp"], r["zero"], mib(r["planned"]), mib(r["params_grads"]),
            mib(r["measured"]), mib(ps), mib(ms), ratio, r["loss_last"], "yes" if same else "NO"))
    lines += ["", "R = measured / planned saving against --zero 1 at the same dp. The last loss is the same at every "
              "stage of one dp (one micro-step a step: the same arithmetic, bit for bit).", ""]
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
