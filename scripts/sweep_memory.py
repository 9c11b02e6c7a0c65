#!/usr/bin/env python3
"""Memory-flag sweep: tok/s, step time, predicted and measured peak memory per flag set.

    python3 scripts/sweep_memory.py --binary ./train_llama --model llama3-1B --seq 2048 --batch 1 \
        --steps 8 --out docs/results/sweep_llama3-1B [--find-max-batch 1]

For each flag combination, runs the trainer for a few steps (no validation, no
samples) and reads back its memory plan (--plan-json) and metrics.jsonl. Writes
OUT.jsonl (one line per combination), OUT.md (a table) and, with matplotlib, OUT.png
(peak memory against tok/s). Columns:
  predicted   the plan's device bytes (the arena; add the CUDA context and cuBLASLt
              workspace, which the plan does not own, to compare with the driver)
  measured    the peak the program measured (driver bytes in use on a GPU, resident set sampled after each step on
              the CPU)
  saving      flag-off minus flag-on, predicted and measured; R = measured / predicted
              (on the CPU host and "device" are the same memory, so offload cannot save
              anything there and R is not meaningful)
  max batch   with --find-max-batch: the largest micro-batch that runs (doubling, then
              bisection; a run that fails to allocate counts as not fitting)
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import time

COMBOS = [
    ("baseline", []),
    ("ffn-chunks 4", ["--ffn-chunks", "4"]),
    ("ffn-chunks 4 seq", ["--ffn-chunks", "4", "--ffn-chunk-dim", "seq"]),
    ("ce-chunks 8", ["--ce-chunks", "8"]),
    ("offload -1", ["--offload-act", "-1"]),
    ("recompute 1", ["--recompute", "1"]),
    ("recompute 2", ["--recompute", "2"]),
    ("best: ffn 4 + ce 8 + offload -1 + recompute 1",
     ["--ffn-chunks", "4", "--ce-chunks", "8", "--offload-act", "-1", "--recompute", "1"]),
    ("smallest: ffn 4 + ce 8 + recompute 2", ["--ffn-chunks", "4", "--ce-chunks", "8", "--recompute", "2"]),
]


def run(args, flags, batch, run_dir, steps):
    # the sweep's own scratch: a run of an earlier sweep there goes first (the trainer refuses a fresh run in a
    # directory that holds another run)
    shutil.rmtree(run_dir, ignore_errors=True)
    os.makedirs(run_dir, exist_ok=True)
    plan_path = os.path.join(run_dir, "plan.json")
    cmd = [args.binary, "--model", args.model, "--seq", str(args.seq), "--batch", str(batch), "--steps", str(steps),
           "--warmup", "1", "--val-every", "0", "--sample-every", "0", "--run-dir", run_dir, "--plan-json", plan_path,
           "--train-data", args.train_data] + args.extra + flags
    p = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    with open(os.path.join(run_dir, "stdout.log"), "w") as f:
        f.write(" ".join(cmd) + "\n" + p.stdout)
    if p.returncode != 0:
        return None, p.stdout[-400:]
    rows = [json.loads(l) for l in open(os.path.join(run_dir, "metrics.jsonl"))]
    plan = json.load(open(plan_path))
    timed = rows[2:] if len(rows) > 3 else rows[1:] or rows  # the first steps warm up
    return {
        "tok_per_s": statistics.median(r["tok_per_s"] for r in timed),
        "ms": statistics.median(r["ms"] for r in timed),
        "peak_mem_bytes": max(r["peak_mem"] for r in rows),
        "predicted_bytes": plan["device"]["total"],
        "host_bytes": plan["host"]["total"],
        "loss_last": rows[-1]["loss"],
    }, None


def device_of(work):
    """the device a run names on its first line ("train_llama | DEVICE | precision | model")"""
    for root, _, files in os.walk(work):
        if "stdout.log" in files:
            for line in open(os.path.join(root, "stdout.log")):
                if line.startswith("train_llama |"):
                    parts = [x.strip() for x in line.split("|")]
                    return " | ".join(parts[1:3])
    return "unknown"


def commit_of():
    try:
        sha = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], capture_output=True,
                               text=True).stdout.strip()
        return sha + (" (with uncommitted changes)" if dirty else "") if sha else "unknown"
    except OSError:
        return "unknown"


def max_batch(args, flags, run_dir):
    fits = lambda b: run(args, flags, b, os.path.join(run_dir, f"b{b}"), 2)[0] is not None
    lo, hi = 0, 1
    while hi <= args.max_batch_limit and fits(hi):
        lo, hi = hi, hi * 2
    hi = min(hi, args.max_batch_limit + 1)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if fits(mid) else (lo, mid)
    return lo


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="./train_llama")
    ap.add_argument("--model", default="stories110M")
    ap.add_argument("--seq", type=int, default=1024)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--steps", type=int, default=8)
    ap.add_argument("--train-data", default="data/tinystories/tinystories_train_*.bin")
    ap.add_argument("--out", required=True, help="output prefix: OUT.jsonl, OUT.md, OUT.png")
    ap.add_argument("--find-max-batch", type=int, default=0)
    ap.add_argument("--max-batch-limit", type=int, default=256)
    ap.add_argument("--only", default="", help="comma-separated combination names to run (default all)")
    ap.add_argument("extra", nargs="*", help="more train_llama flags, after --")
    args = ap.parse_args()
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    work = args.out + "_runs"
    results = []
    base = None
    for name, flags in COMBOS:
        if args.only and name not in args.only.split(","):
            continue
        print(f"[sweep] {args.model} T={args.seq} B={args.batch}: {name}", flush=True)
        r, err = run(args, flags, args.batch, os.path.join(work, name.replace(" ", "_").replace(":", "")), args.steps)
        row = {"name": name, "flags": " ".join(flags), "model": args.model, "seq": args.seq, "batch": args.batch}
        if r is None:
            row["error"] = err.strip().splitlines()[-1] if err.strip() else "failed"
            print(f"[sweep]   failed: {row['error']}", flush=True)
        else:
            row.update(r)
            if base is None and name == "baseline":
                base = r
            if base is not None:
                row["saving_predicted"] = base["predicted_bytes"] - r["predicted_bytes"]
                row["saving_measured"] = base["peak_mem_bytes"] - r["peak_mem_bytes"]
                if row["saving_predicted"] > 0:
                    row["R"] = row["saving_measured"] / row["saving_predicted"]
        if args.find_max_batch:
            row["max_batch"] = max_batch(args, flags, os.path.join(work, "maxb_" + name.replace(" ", "_").replace(":", "")))
            print(f"[sweep]   largest micro-batch: {row['max_batch']}", flush=True)
        results.append(row)
    with open(args.out + ".jsonl", "w") as f:
        for row in results:
            f.write(json.dumps(row) + "\n")
    mib = lambda b: f"{b / 2**20:.1f}" if isinstance(b, (int, float)) else "-"
    lines = [f"| flags | tok/s | step ms | predicted MiB | measured MiB | saving pred. MiB | saving meas. MiB | R |"
             + (" max batch |" if args.find_max_batch else ""),
             "|---|---|---|---|---|---|---|---|" + ("---|" if args.find_max_batch else "")]
    for row in results:
        if "error" in row:
            lines.append(f"| {row['name']} | failed: {row['error'][:60]} |||||||" + ("|" if args.find_max_batch else ""))
            continue
        R = f"{row['R']:.2f}" if "R" in row else "-"
        lines.append(f"| {row['name']} | {row['tok_per_s']:.0f} | {row['ms']:.1f} | {mib(row['predicted_bytes'])} | "
                     f"{mib(row['peak_mem_bytes'])} | {mib(row.get('saving_predicted'))} | {mib(row.get('saving_measured'))} | {R} |"
                     + (f" {row.get('max_batch', '-')} |" if args.find_max_batch else ""))
    table = "\n".join(lines)
    with open(args.out + ".md", "w") as f:
        f.write(f"# Memory flags: tok/s and peak memory, {args.model} T={args.seq} B={args.batch}\n\n")
        f.write(f"- device: {device_of(work)}\n- commit: {commit_of()}\n- date: {time.strftime('%Y-%m-%d')}\n")
        f.write(f"- command: `python3 {' '.join(sys.argv)}`\n- {args.steps} steps per combination; tok/s and step ms "
                f"are medians of the steps after the first two\n- raw: {os.path.basename(args.out)}.jsonl, "
                f"plot: {os.path.basename(args.out)}.png (peak memory against tok/s), run logs: {os.path.basename(work)}/\n\n")
        f.write("predicted = the planned arena (device; the host arena is not in it); measured = what the program "
                "measured (the driver's bytes in use on a GPU, the resident set on the CPU, where host and device are "
                "one memory and offload cannot save anything). R = measured saving / predicted saving.\n\n")
        f.write(table + "\n")
    print(table)
    try:
        subprocess.run([sys.executable, os.path.join(os.path.dirname(__file__), "plot_memory.py"), args.out + ".jsonl",
                        "--out", args.out + ".png", "--title", f"{args.model} T={args.seq} B={args.batch}"], check=False)
    except OSError:
        pass


if __name__ == "__main__":
    main()
