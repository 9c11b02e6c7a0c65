#!/usr/bin/env python3
"""Per-rank memory of context parallelism, planned against measured (CPU build).

    python3 dev/bench/measure_cp_memory.py BINARY OUT_MD [--model stories15M --shape "--H 8 --KV 8"]
        [--batch 8] [--seq 1024] [--steps 2] [--malloc fixed]

Runs BINARY (train_llama's CPU build) for a few steps on a synthetic shard at cp 1 (one
process under mpirun, so that every run carries Open MPI's own memory) and at cp 2 and 4
in each --cp-mode, and tp 2 x cp 2 (at most 4 ranks, one OpenMP thread each), and reads
rank 0's plan (--plan-json) and the measured per-rank peak (the largest rank's resident
set sampled after each step). The table gives planned, measured and their difference, the
saved activations against one process's (1/cp of them) and the saving against cp 1,
planned and measured (the constant the plan does not own cancels there). Writes OUT_MD
(markdown, with the command, machine and commit) and OUT_MD with .jsonl.

The launching, the malloc modes and the reading of a run are dev/bench/measure_dp_memory.py's.
"""
import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile

import measure_dp_memory as dpm
from measure_tp_memory import comm_line

# (ranks, cp, --cp-mode, --cp-ulysses, tp)
CONFIGS = [
    (1, 1, "ring", 0, 1),
    (2, 2, "ring", 0, 1),
    (2, 2, "ulysses", 0, 1),
    (4, 4, "ring", 0, 1),
    (4, 4, "ulysses", 0, 1),
    (4, 4, "hybrid", 2, 1),
    (4, 2, "ring", 0, 2),
]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out_md")
    ap.add_argument("--model", default="stories15M")
    ap.add_argument("--shape", default="--H 8 --KV 8", help="shape flags after --model (4 ways must divide H and KV)")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--malloc", default="fixed")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="cpmem_")
    shard = dpm.toy_shard(tmp)
    binary = os.path.join(tmp, os.path.basename(a.binary))  # one copy: a rebuild cannot mix two builds
    shutil.copy2(a.binary, binary)
    rows = []
    for mode in a.malloc.split(","):
        for np, cp, cpm, U, tp in CONFIGS:
            name = "%s_cp%d_%s%s_tp%d" % (mode, cp, cpm, U or "", tp)
            rd, plan = os.path.join(tmp, name), os.path.join(tmp, name + ".plan.json")
            args = [binary, "--model", a.model] + shlex.split(a.shape) + [
                "--batch", str(a.batch), "--seq", str(a.seq), "--max-seq-len", str(a.seq), "--steps", str(a.steps),
                "--val-every", "0", "--sample-every", "0", "--train-data", shard, "--run-dir", rd, "--plan-json", plan,
                "--cp", str(cp), "--cp-mode", cpm, "--tp", str(tp)] + (["--cp-ulysses", str(U)] if U else [])
            print("measure_cp_memory: %s" % name, file=sys.stderr, flush=True)
            # cp 1 under mpirun -np 1 too: the same MPI constant as the others
            one = ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none", "-x", "OMP_NUM_THREADS=1"] + \
                (["-x", "MALLOC_MMAP_THRESHOLD_=131072"] if mode == "fixed" else []) + ["-np", "1"]
            r = dpm.measure(one + args if np == 1 else args, np, mode, rd, plan)
            k = r["kinds"]
            predicted, counted = comm_line(r["stdout"], "predicted"), comm_line(r["stdout"], "counted")
            cp_bytes = sum(e["bytes"] for e in r["plan"]["device"]["entries"] if e["name"].startswith("cp "))
            rows.append({"malloc": mode, "np": np, "cp": cp, "cp_mode": cpm, "cp_ulysses": U, "tp": tp,
                         "planned": r["planned"] + r["planned_host"], "planned_activations": k.get("activations", 0),
                         "planned_cp": cp_bytes, "act_block_bytes": r["plan"]["act_block_bytes"], "measured": r["measured"],
                         "loss_last": r["loss_last"],
                         "comm_counted_equals_predicted": predicted is not None and predicted == counted})
    with open(os.path.splitext(a.out_md)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mib = lambda b: "%.1f" % (b / 1048576.0)
    cmd = "python3 dev/bench/measure_cp_memory.py %s %s --model %s --shape '%s' --batch %d --seq %d --steps %d --malloc %s" % (
        a.binary, a.out_md, a.model, a.shape, a.batch, a.seq, a.steps, a.malloc)
    lines = ["# Context parallelism: per-rank memory, planned and measured (CPU build)", "",
             "Machine: %s (CPU build: \"device\" memory is host memory; measured = the largest rank's resident set "
             "sampled after each step). Commit %s." % (dpm.machine(), dpm.commit()), "",
             "Command: `%s` (cp x tp ranks under `mpirun -np`, one OpenMP thread per rank, cp 1 under `mpirun -np 1`; "
             "B=%d x T=%d tokens per micro-batch, %d steps)." % (cmd, a.batch, a.seq, a.steps), "",
             "| malloc | ranks | cp | --cp-mode | tp | layer MiB | activations MiB | x one process | CP buffers MiB | "
             "planned MiB | measured MiB | measured - planned MiB | %% | saving planned MiB | saving measured MiB | R | "
             "comm counted = predicted | loss step %d |" % a.steps,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = next(x for x in rows if x["malloc"] == r["malloc"] and x["cp"] == 1)
        ps, ms = b["planned"] - r["planned"], b["measured"] - r["measured"]
        first = r is b
        diff = r["measured"] - r["planned"]
        mode = "%s%s" % (r["cp_mode"], " U=%d" % r["cp_ulysses"] if r["cp_ulysses"] else "") if r["cp"] > 1 else "-"
        lines.append("| %s | %d | %d | %s | %d | %s | %s | %.3f | %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %.6f |" % (
            r["malloc"], r["np"], r["cp"], mode, r["tp"], mib(r["act_block_bytes"]), mib(r["planned_activations"]),
            r["planned_activations"] / b["planned_activations"], mib(r["planned_cp"]), mib(r["planned"]), mib(r["measured"]),
            mib(diff), 100.0 * diff / r["planned"], "-" if first else mib(ps), "-" if first else mib(ms),
            "-" if first else "%.3f" % (ms / ps), ("yes" if r["comm_counted_equals_predicted"] else "NO") if r["np"] > 1 else "-",
            r["loss_last"]))
    lines += ["", "layer = the saved activations of one layer (rank 0's plan); activations = all layers and x_final, and "
              "x one process = their ratio to the cp 1 run's (1/cp expected: at tp 2 the layer's replicated fields under "
              "--tp-mode allreduce stay); CP buffers = the plan's `cp ...` entries (docs/memory.md 11.2). Saving: against "
              "cp 1; R = measured / planned saving. comm counted = predicted: the bytes llmc/parallel/comm.h counted in the first "
              "step equal the plan's formula (docs/memory.md 11.3). malloc: dev/bench/measure_dp_memory.py's docstring.", ""]
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
