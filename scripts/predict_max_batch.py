#!/usr/bin/env python3
"""The largest micro-batch the memory PLAN says fits on a card, per flag set.

    python3 scripts/predict_max_batch.py [--binary build/train_llama] [--gib 77]
    python3 scripts/predict_max_batch.py --configs llama3-1B:2048 --dp 8 --zero 1 --shard-vocab 1 \
        --flag-set off --flag-set "ffn 4 + ce 8 + recompute 1"

Runs `BINARY --plan-only 1` (no GPU needed) and bisects the micro-batch so that the
planned device arena stays within --gib GiB and the pinned host buffers of offload
within --host-gib GiB (default 77: an 80 GB H100 shows about
79 GiB, minus ~1 GiB for the CUDA context, cuBLASLt workspace and allocator slack,
which the plan does not own). This is a prediction; scripts/sweep_memory.py
--find-max-batch measures the real one on a GPU.

--dp, --zero and --shard-vocab are passed to --plan-only: the plan is then the one of
rank 0 of dp data-parallel ranks, the micro-batch is per rank and both budgets are per
rank (one card each; with several ranks on one host, --host-gib is each one's share).
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
    ap.add_argument("--dp", type=int, default=1, help="plan rank 0 of this many data-parallel ranks (--plan-only --dp)")
    ap.add_argument("--zero", type=int, default=0, choices=[0, 1], help="1: ZeRO-1, optimizer state sharded over dp")
    ap.add_argument("--shard-vocab", type=int, default=0, choices=[0, 1],
                    help="1: embedding and output projection as 1/dp row shards")
    ap.add_argument("--flag-set", action="append", choices=[n for n, _ in FLAG_SETS],
                    help="only this memory-flag set (repeatable; default: all)")
    args = ap.parse_args()
    dp_flags = []
    if args.dp != 1 or args.zero or args.shard_vocab:
        dp_flags = ["--dp", str(args.dp), "--zero", str(args.zero), "--shard-vocab", str(args.shard_vocab)]
    dp_name = " + ".join(([f"zero {args.zero}"] if args.zero else []) + (["shard-vocab 1"] if args.shard_vocab else []))
    budget = args.gib * 2**30
    path = os.path.join(tempfile.mkdtemp(), "plan.json")

    def plan(model, T, B, flags):
        subprocess.run([args.binary, "--model", model, "--seq", str(T), "--batch", str(B), "--plan-only", "1",
                        "--plan-json", path] + dp_flags + flags, check=True, stdout=subprocess.DEVNULL)
        return json.load(open(path))

    def total(model, T, B, flags):
        return plan(model, T, B, flags)["device"]["total"]

    def fits(model, T, B, flags):
        p = plan(model, T, B, flags)
        return p["device"]["total"] <= budget and p["host"]["total"] <= args.host_gib * 2**30

    per = f"per rank of dp {args.dp}, " if dp_flags else ""
    print(f"| model | flags | largest B ({per}device {args.gib:g} GiB, host {args.host_gib:g} GiB) | plan at B=1 (GiB) | per extra sequence (GiB) |")
    print("|---|---|---|---|---|")
    for cfg in args.configs.split(","):
        model, T = cfg.split(":")
        T = int(T)
        for name, flags in FLAG_SETS:
            if args.flag_set and name not in args.flag_set:
                continue
            label = name if not dp_name else dp_name if name == "off" else f"{dp_name} + {name}"
            lo, hi = 0, 1
            while fits(model, T, hi, flags):
                lo, hi = hi, hi * 2
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (mid, hi) if fits(model, T, mid, flags) else (lo, mid)
            t1, t2 = total(model, T, 1, flags), total(model, T, 2, flags)
            print(f"| {model} T={T} | {label} | {lo} | {t1 / 2**30:.2f} | {(t2 - t1) / 2**30:.3f} |")


if __name__ == "__main__":
    main()
