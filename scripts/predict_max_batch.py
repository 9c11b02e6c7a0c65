#!/usr/bin/env python3
"""The largest micro-batch the memory PLAN says fits on a card, per flag set.

    python3 scripts/predict_max_batch.py [--binary build/train_llama] [--gib 77]

Runs `BINARY --plan-only 1` (no GPU needed) and bisects the micro-batch so that the
planned device arena stays within --gib GiB and the pinned host buffers of offload
within --host-gib GiB (default 77: an 80 GB H100 shows about
79 GiB, minus ~1 GiB for the CUDA context, cuBLASLt workspace and allocator slack,
which the plan does not own). This is a prediction; scripts/sweep_memory.py
--find-max-batch measures the real one on a GPU.
"""
import argparse
import json
import os
import subprocess
import tempfile

FLAG_SETS = [
    ("off", []),
    ("ce 8", ["--ce-chunks", "8"]),
    ("ffn 4 + ce 8 + recompute 1", ["--ffn-chunks", "4", "--ce-chunks", "8", "--recompute", "1"]),
    ("ffn 4 + ce 8 + offload -1 + recompute 1",
     ["--ffn-chunks", "4", "--ce-chunks", "8", "--offload-act", "-1", "--recompute", "1"]),
    ("ffn 4 + ce 8 + recompute 2", ["--ffn-chunks", "4", "--ce-chunks", "8", "--recompute", "2"]),
]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--binary", default="build/train_llama")
    ap.add_argument("--gib", type=float, default=77.0)
    ap.add_argument("--host-gib", type=float, default=100.0,
                    help="pinned host memory the offloaded activations may take (default 100 of a 128 GiB host)")
    ap.add_argument("--configs", default="stories110M:1024,llama3-1B:2048")
    args = ap.parse_args()
    budget = args.gib * 2**30
    path = os.path.join(tempfile.mkdtemp(), "plan.json")

    def plan(model, T, B, flags):
        subprocess.run([args.binary, "--model", model, "--seq", str(T), "--batch", str(B), "--plan-only", "1",
                        "--plan-json", path] + flags, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(path))

    def total(model, T, B, flags):
        return plan(model, T, B, flags)["device"]["total"]

    def fits(model, T, B, flags):
        p = plan(model, T, B, flags)
        return p["device"]["total"] <= budget and p["host"]["total"] <= args.host_gib * 2**30

    print(f"| model | flags | largest B (device {args.gib:g} GiB, host {args.host_gib:g} GiB) | plan at B=1 (GiB) | per extra sequence (GiB) |")
    print("|---|---|---|---|---|")
    for cfg in args.configs.split(","):
        model, T = cfg.split(":")
        T = int(T)
        for name, flags in FLAG_SETS:
            lo, hi = 0, 1
            while fits(model, T, hi, flags):
                lo, hi = hi, hi * 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(model, T, mid, flags) else (lo, mid)
            t1, t2 = total(model, T, 1, flags), total(model, T, 2, flags)
            print(f"| {model} T={T} | {name} | {lo} | {t1 / 2**30:.2f} | {(t2 - t1) / 2**30:.3f} |")


if __name__ == "__main__":
    main()
