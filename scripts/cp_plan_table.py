#!/usr/bin/env python3
"""Per-rank memory and bytes sent under context parallelism, from the trainers' own plans.

    python3 scripts/cp_plan_table.py [--binary ./build/train_llama] [--gpu-gb 80] [--out FILE.md]

Runs `--plan-only 1 --plan-json` (no GPU, no MPI) for hunyuan-13B at 118,800 tokens (720p,
129 frames) and llama3-8B at 131,072 tokens (--max-seq-len 131072), B 1, --zero 1 over the
dp x cp gradient group, at cp 1, 2, 4, 8,
16, 32 in each --cp-mode (hybrid with min(8, cp/2) Ulysses ways inside: at most an
NVLink node, at least 2 ring members), without and with the memory flags, and prints per
rank the plan's total, its saved activations and CP's buffers, the bytes a rank sends per
step in CP's exchanges (the gradient reduction over dp x cp comes on top), and whether the
plan plus the reserve fits the card (docs/memory.md section 11.4). A layout that cannot
exist says why (the trainer's own refusal) instead of a number.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

GiB = 2.0 ** 30
FLAGS_LLAMA = ["--recompute", "2", "--ffn-chunks", "8", "--ffn-chunk-dim", "seq", "--ce-chunks", "16"]
MODELS = {
    "hunyuan-13B": dict(binary="./build/train_dit", args=["--model", "hunyuan-13B", "--batch", "1", "--zero", "1"],
                        flags=FLAGS_LLAMA[:6]),
    "llama3-8B": dict(binary="./build/train_llama", args=["--model", "llama3-8B", "--seq", "131072", "--max-seq-len", "131072",
                                                          "--batch", "1", "--zero", "1"], flags=FLAGS_LLAMA),
}
CPS = [1, 2, 4, 8, 16, 32]
MODES = ["ring", "ulysses", "hybrid"]  # hybrid: min(8, cp/2) Ulysses ways inside (a node), at least 2 ring members


def plan(binary, args, path):
    r = subprocess.run([binary, "--plan-only", "1", "--plan-json", path] + args, stdout=subprocess.DEVNULL,
                       stderr=subprocess.PIPE, text=True)
    if r.returncode != 0:
        msg = (r.stderr.strip().splitlines() or ["(no message)"])[0]
        return None, msg.replace("error: ", "").strip()
    with open(path) as f:
        return json.load(f), None


def short_reason(why):
    """the trainer's refusal, in a table cell"""
    import re
    m = re.search(r"the (\d+) query heads .* over the (\d+) Ulysses ways", why)
    if m:
        return f"{m.group(1)} heads do not split over {m.group(2)} ways"
    m = re.search(r"(\d+) tokens must split into (\d+) equal chunks", why)
    if m:
        return f"{m.group(1)} tokens do not split into {m.group(2)}"
    return why[:80]


def cell(p, reserve_gib, gpu_gb):
    dev = p["device"]
    total = dev["total"] / GiB
    acts = sum(e["bytes"] for e in dev["entries"] if e["kind"] == "activations") / GiB
    cp = sum(e["bytes"] for e in dev["entries"] if e["name"].startswith("cp ")) / GiB
    sent = sum(v for k, v in p.get("comm_bytes_per_step", {}).items() if k.startswith(("ulysses", "ring"))) / GiB
    fits = total + reserve_gib <= gpu_gb * 1e9 / GiB
    return total, acts, cp, sent, fits


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=None, help="the trainer (default: the bf16 CUDA build ./build/train_llama)")
    ap.add_argument("--gpu-gb", type=float, default=80.0, help="the card's memory in GB (1e9 bytes)")
    ap.add_argument("--reserve-gib", type=float, default=1.0, help="outside the plan: CUDA context, cuBLASLt, NCCL")
    ap.add_argument("--out", default=None, help="also write the table to this file")
    a = ap.parse_args()
    lines = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, m in MODELS.items():
            binary = a.binary or m["binary"]
            if not os.access(binary, os.X_OK):
                sys.exit(f"cp_plan_table: {binary} is not built (make {binary.lstrip('./')})")
            for fl in ([], m["flags"]):
                fname = " ".join(fl) if fl else "no memory flags"
                lines.append(f"\n{name}, {' '.join(m['args'])}, {fname}: per rank, GiB (plan total | saved activations | "
                             f"CP buffers | CP sent per step); fits = plan + {a.reserve_gib:g} GiB <= {a.gpu_gb:g} GB\n")
                lines.append("| cp | " + " | ".join(MODES) + " |")
                lines.append("|---|" + "---|" * len(MODES))
                smallest = {}
                for cp in CPS:
                    row = [str(cp)]
                    for mode in MODES:
                        if cp == 1 and mode != "ring":
                            row.append("(as cp 1)")
                            continue
                        extra = ["--cp-ulysses", str(min(8, cp // 2))] if mode == "hybrid" else []
                        p, why = plan(binary, m["args"] + fl + ["--cp", str(cp), "--cp-mode", mode] + extra,
                                      os.path.join(tmp, "p.json"))
                        if p is None:
                            row.append("cannot: " + short_reason(why))
                            continue
                        total, acts, cpb, sent, fits = cell(p, a.reserve_gib, a.gpu_gb)
                        row.append(f"{total:.1f} \\| {acts:.1f} \\| {cpb:.2f} \\| {sent:.0f}{' **fits**' if fits else ''}")
                        if fits and mode not in smallest:
                            smallest[mode] = cp
                    lines.append("| " + " | ".join(row) + " |")
                lines.append("\nsmallest cp that fits: " + ", ".join(f"{mode} {smallest.get(mode, 'none up to 32')}"
                                                                     for mode in MODES))
    text = "\n".join(lines)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()
