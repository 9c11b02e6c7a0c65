#!/usr/bin/env python3
"""Per-rank memory of tensor parallelism, planned against measured (CPU build).

    python3 dev/bench/measure_tp_memory.py BINARY OUT_MD [--model stories15M --shape "--H 8 --KV 8"]
        [--batch 32] [--seq 256] [--steps 2] [--malloc default,fixed]

Runs BINARY for a few steps on a synthetic shard in each configuration of CONFIGS (tp 2
and 4 under mpirun, --tp-mode allreduce and reducescatter, --tp-recompute-allgather 0/1,
the vocab-parallel head or a replicated one, tp 2 x dp 2 with ZeRO-1; at most 4 ranks, one
OpenMP thread each) and once as one process, and reads: rank 0's plan (--plan-json; TP rank
0 holds the most hidden units, so its plan is the largest of its group) and the measured
per-rank peak (the largest rank's resident set sampled after each step). The table gives
planned, measured and their difference, and the saving of each configuration against the
allreduce one of the same layout, planned and measured (the constant the plan does not own
cancels there). Writes OUT_MD (markdown, with the command, machine and commit) and OUT_MD
with .jsonl.

The launching, the malloc modes and the reading of a run are dev/bench/measure_dp_memory.py's
(imported, see its docstring for the two malloc modes).
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

import measure_dp_memory as dpm  # launch, measure, toy_shard, commit, machine

# (ranks, tp, dp, --tp-mode, --tp-recompute-allgather, --shard-vocab, --zero); tp 1 is the
# one-process run the others divide
CONFIGS = [
    (1, 1, 1, "allreduce", 1, 0, 0),
    (2, 2, 1, "allreduce", 1, 1, 0),
    (2, 2, 1, "reducescatter", 0, 1, 0),
    (2, 2, 1, "reducescatter", 1, 1, 0),
    (4, 4, 1, "allreduce", 1, 1, 0),
    (4, 4, 1, "reducescatter", 0, 1, 0),
    (4, 4, 1, "reducescatter", 1, 1, 0),
    (4, 4, 1, "reducescatter", 1, 0, 0),
    (4, 2, 2, "allreduce", 1, 1, 1),
    (4, 2, 2, "reducescatter", 1, 1, 1),
]


def comm_line(stdout, what):
    """the printed 'comm per step, <what> ...: ... total N B' line, without its prefix"""
    for line in stdout.splitlines():
        if line.startswith("comm per step, " + what):
            return line.split(":", 1)[1].strip()
    return None


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out_md")
    ap.add_argument("--model", default="stories15M")
    ap.add_argument("--shape", default="--H 8 --KV 8", help="shape flags after --model (tp 4 must divide H and KV)")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--malloc", default=",".join(dpm.MALLOC_MODES))
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="tpmem_")
    shard = dpm.toy_shard(tmp)
    # every run uses one copy of the binary: a rebuild during the measurement cannot mix two builds
    binary = os.path.join(tmp, os.path.basename(a.binary))
    shutil.copy2(a.binary, binary)
    sha = hashlib.sha256(open(binary, "rb").read()).hexdigest()[:16]
    rows = []
    for mode in a.malloc.split(","):
        for np, tp, dp, tpm, rg, sv, zero in CONFIGS:
            name = "%s_tp%d_dp%d_%s_rg%d_sv%d_z%d" % (mode, tp, dp, tpm, rg, sv, zero)
            rd = os.path.join(tmp, name)
            plan = os.path.join(tmp, name + ".plan.json")
            args = [binary, "--model", a.model] + shlex.split(a.shape) + [
                "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps), "--val-every", "0",
                "--train-data", shard, "--run-dir", rd, "--plan-json", plan, "--tp", str(tp), "--tp-mode", tpm,
                "--tp-recompute-allgather", str(rg), "--shard-vocab", str(sv), "--zero", str(zero)]
            print("measure_tp_memory: %s" % name, file=sys.stderr, flush=True)
            r = dpm.measure(args, np, mode, rd, plan)
            k = r["kinds"]
            predicted, counted = comm_line(r["stdout"], "predicted"), comm_line(r["stdout"], "counted")
            rows.append({"malloc": mode, "np": np, "tp": tp, "dp": dp, "tp_mode": tpm, "tp_regather": rg,
                         "shard_vocab": sv, "zero": zero, "planned": r["planned"] + r["planned_host"],
                         "planned_activations": k.get("activations", 0), "planned_comm": k.get("comm", 0),
                         "planned_static": sum(k.get(x, 0) for x in ("parameters", "gradients", "optimizer")),
                         "act_block_bytes": r["plan"]["act_block_bytes"], "measured": r["measured"],
                         "loss_last": r["loss_last"], "comm_counted_equals_predicted": predicted is not None and predicted == counted})
    with open(os.path.splitext(a.out_md)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mib = lambda b: "%.1f" % (b / 1048576.0)
    # savings against the allreduce run of the same layout (ranks, tp, dp): the constant cancels
    base = {(r["malloc"], r["np"], r["tp"], r["dp"]): r for r in rows if r["tp_mode"] == "allreduce"}
    cmd = "python3 dev/bench/measure_tp_memory.py %s %s --model %s --shape '%s' --batch %d --seq %d --steps %d --malloc %s" % (
        a.binary, a.out_md, a.model, a.shape, a.batch, a.seq, a.steps, a.malloc)
    # the trainer's sources may be ahead of the commit: say so rather than name a commit that did not run
    dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--", "train_llama.cu", "llmc"],
                           cwd=dpm.ROOT, stderr=subprocess.DEVNULL).returncode
    lines = ["# Tensor parallelism: per-rank memory, planned and measured (CPU build)", "",
             "Machine: %s (CPU build: \"device\" memory is host memory; measured = the largest rank's resident set "
             "sampled after each step). Commit %s%s." % (dpm.machine(), dpm.commit(),
                                                         " with uncommitted changes to train_llama.cu and llmc/" if dirty else ""), "",
             "Command: `%s` (tp x dp ranks under `mpirun -np`, one OpenMP thread per rank; B=%d x T=%d tokens per "
             "micro-batch, %d steps; every run from one copy of the binary, sha256 %s...)." % (
                 cmd, a.batch, a.seq, a.steps, sha), "",
             "| malloc | ranks | tp | dp | --tp-mode | regather | --shard-vocab | --zero | layer MiB | activations MiB | "
             "recycled + vocab MiB | planned MiB | measured MiB | measured - planned MiB | %% | saving planned MiB | "
             "saving measured MiB | R | comm counted = predicted | loss step %d |" % a.steps,
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = base[(r["malloc"], r["np"], r["tp"], r["dp"])]
        ps, ms = b["planned"] - r["planned"], b["measured"] - r["measured"]
        ratio = "%.2f" % (ms / ps) if abs(ps) > 1 << 20 else "-"
        diff = r["measured"] - r["planned"]
        lines.append("| %s | %d | %d | %d | %s | %s | %d | %d | %s | %s | %s | %s | %s | %s | %.1f | %s | %s | %s | %s | %.6f |" % (
            r["malloc"], r["np"], r["tp"], r["dp"], r["tp_mode"] if r["tp"] > 1 else "-",
            r["tp_regather"] if r["tp_mode"] == "reducescatter" else "-", r["shard_vocab"], r["zero"],
            mib(r["act_block_bytes"]), mib(r["planned_activations"]), mib(r["planned_comm"]), mib(r["planned"]),
            mib(r["measured"]), mib(diff), 100.0 * diff / r["planned"], mib(ps) if r is not b else "-",
            mib(ms) if r is not b else "-", ratio if r is not b else "-",
            ("yes" if r["comm_counted_equals_predicted"] else "NO") if r["np"] > 1 else "-", r["loss_last"]))
    lines += ["", "layer = the saved activations of one layer (rank 0's plan); activations = all layers and x_final; "
              "recycled + vocab = the plan's comm entries (the three recycled TP buffers under reducescatter, the two "
              "gathered vocabulary buffers with --shard-vocab at tp 1). Saving: against the allreduce run of the same "
              "ranks, tp and dp; R = measured / planned saving. comm counted = predicted: the bytes llmc/parallel/comm.h "
              "counted in the first step equal the plan's formula (docs/memory.md 10.4), as printed by rank 0. "
              "malloc = default: glibc as it is; fixed: MALLOC_MMAP_THRESHOLD_=131072 (dev/bench/measure_dp_memory.py's "
              "docstring).", ""]
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
