#!/usr/bin/env python3
"""Holds train_llama's memory plan against the formulas of docs/memory.md.

    python3 scripts/check_memory_plan.py ./train_llama_cpu [./build/train_llama ...]

For a grid of model shapes and memory flags, runs `BINARY --plan-only 1 --plan-json F`
(no allocation, no GPU needed) and compares every activation, offload and scratch
entry of the plan with the formula written here from the document, independently of
the C code. A change that silently keeps a buffer alive, or drops one the formula
says must exist, fails. Also checks that each flag lowers the device bytes it claims
to. Prints one line per configuration and exits non-zero on any mismatch.
"""
import itertools
import json
import os
import subprocess
import sys
import tempfile

ALIGN = 256


def al(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def cdiv(a, b):
    return (a + b - 1) // b


def field_bytes(c, B, T, s):
    """bytes of each per-layer activation field (docs/memory.md, table 1)"""
    BT, hd = B * T, c["D"] // c["H"]
    return {
        "x": BT * c["D"] * s, "rstd1": BT * 4, "xn1": BT * c["D"] * s,
        "q": BT * c["H"] * hd * s, "k": BT * c["KV"] * hd * s, "v": BT * c["KV"] * hd * s,
        "att": BT * c["H"] * hd * s, "lse": BT * c["H"] * 4,
        "xmid": BT * c["D"] * s, "rstd2": BT * 4, "xn2": BT * c["D"] * s,
        "h1": BT * c["F"] * s, "h3": BT * c["F"] * s, "g": BT * c["F"] * s,
    }


def saved_fields(f):
    """what one layer keeps for backward (docs/memory.md, table 2)"""
    all_f = ["x", "rstd1", "xn1", "q", "k", "v", "att", "lse", "xmid", "rstd2", "xn2", "h1", "h3", "g"]
    if f["recompute"] == 2:
        return ["x"]
    keep = list(all_f)
    if f["recompute"] == 1:
        keep = [x for x in keep if x not in ("xn1", "xn2", "g")]
    if f["ffn_chunks"] > 1:
        keep = [x for x in keep if x not in ("h1", "h3", "g")]
    return keep


def expected_plan(c, B, T, f, s):
    fb = field_bytes(c, B, T, s)
    keep = saved_fields(f)
    block = sum(al(fb[x]) for x in keep)
    work_fields = [x for x in fb if x not in keep and not (f["ffn_chunks"] > 1 and x in ("h1", "h3", "g"))]
    work = sum(al(fb[x]) for x in work_fields)
    L, BT = c["L"], B * T
    N = L - 1 if f["offload"] == -1 else f["offload"]
    if f["ffn_chunks"] > 1 and f["ffn_seq"]:
        chunk = cdiv(BT, f["ffn_chunks"]) * c["F"] * s
    else:
        chunk = BT * cdiv(c["F"], f["ffn_chunks"]) * s
    chunked = f["ffn_chunks"] > 1
    return block, {
        "saved activations (layers)": (L - N) * block,
        "saved activations (x_final)": BT * c["D"] * s,
        "offload slots": min(N, 2) * block,
        "layer work (not saved)": work,
        "ffn chunk h1": chunk if chunked else 0,
        "ffn chunk h3": chunk if chunked else 0,
        "ffn chunk g": chunk if chunked else 0,
        "ffn d(g), d(h1)": chunk,
        "ffn d(h3)": chunk,
        "logits (one CE chunk)": cdiv(BT, f["ce_chunks"]) * c["V"] * s,
    }, {"offloaded activations": N * block}


MODELS = [
    dict(V=512, D=64, L=4, H=4, KV=2, F=176, B=2, T=32),
    dict(V=1000, D=96, L=5, H=6, KV=3, F=250, B=3, T=17),
    dict(V=32000, D=288, L=6, H=6, KV=6, F=768, B=4, T=256),           # stories15M
    dict(V=128256, D=2048, L=16, H=32, KV=8, F=8192, B=1, T=2048),     # llama3-1B
]
FLAGS = [dict(ffn_chunks=k, ffn_seq=sq, ce_chunks=ce, offload=o, recompute=r)
         for k, sq, ce, o, r in itertools.product([1, 3], [0, 1], [1, 4], [0, 2, -1], [0, 1, 2]) if not (k == 1 and sq)]


def run_plan(binary, c, f, path):
    cmd = [binary, "--plan-only", "1", "--plan-json", path, "--V", str(c["V"]), "--D", str(c["D"]), "--L", str(c["L"]),
           "--H", str(c["H"]), "--KV", str(c["KV"]), "--F", str(c["F"]), "--max-seq-len", str(max(c["T"], 8)),
           "--batch", str(c["B"]), "--seq", str(c["T"]), "--ffn-chunks", str(f["ffn_chunks"]),
           "--ffn-chunk-dim", "seq" if f["ffn_seq"] else "hidden", "--ce-chunks", str(f["ce_chunks"]),
           "--offload-act", str(f["offload"]), "--recompute", str(f["recompute"])]
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
    return json.load(open(path))


def main():
    binaries = sys.argv[1:] or ["./train_llama_cpu"]
    bad = 0
    total = 0
    with tempfile.TemporaryDirectory() as tmp:
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                print(f"FAIL {binary}: not an executable")
                return 1
            for c, f in itertools.product(MODELS, FLAGS):
                plan = run_plan(binary, c, f, os.path.join(tmp, "plan.json"))
                s = plan["sizeof_floatX"]
                block, dev_want, host_want = expected_plan(c, c["B"], c["T"], f, s)
                got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
                got_host = {e["name"]: e["bytes"] for e in plan["host"]["entries"]}
                errs = [f"{k}: plan {got.get(k)} formula {v}" for k, v in dev_want.items() if got.get(k) != v]
                errs += [f"host {k}: plan {got_host.get(k)} formula {v}" for k, v in host_want.items() if got_host.get(k) != v]
                if plan["act_block_bytes"] != block:
                    errs.append(f"per-layer block: plan {plan['act_block_bytes']} formula {block}")
                total += 1
                if errs:
                    bad += 1
                    print(f"FAIL {os.path.basename(binary)} {c} {f}:\n    " + "\n    ".join(errs))
            print(f"{os.path.basename(binary)} (floatX {s} bytes): {total} plans checked")
    print(f"memory plan vs formula: {total - bad} agree, {bad} differ")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
