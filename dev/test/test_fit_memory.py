#!/usr/bin/env python3
"""Holds train_llama's --fit-memory to its promise (docs/memory.md section 8).

    python3 dev/test/test_fit_memory.py ./train_llama_cpu

For several model shapes and budgets (fractions of the flag-free plan), runs
`BINARY --plan-only 1 --fit-memory GiB --fit-candidates F` and checks, against
numbers computed here and not read from the C code:
  - every candidate's cost is the cost model of docs/memory.md section 8, computed
    here from the shape, the flags and the activation block of
    dev/test/check_memory_plan.py's formulas;
  - a sample of candidates' bytes equal the plan a plain --plan-only run of those
    flags writes (so the search ranks the plans a run would allocate);
  - the choice fits the budget, no cheaper candidate of its batch fits, and, when the
    batch was left to the search, no larger batch fits at all;
  - a budget that nothing fits is an error that names the smallest budget that would
    fit, and that budget does fit.
Prints PASS/FAIL lines; exits non-zero on any failure.
"""
import json
import os
import random
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from check_memory_plan import expected_plan, run_plan  # noqa: E402

FAILS = 0


def report(ok, what):
    global FAILS
    print(("PASS " if ok else "FAIL ") + what)
    FAILS += 0 if ok else 1


# the cost model's constants of the CPU build (train_llama.cu cost_model_default)
CPU_MODEL = dict(flops=50e9, mem_bw=10e9, link_bw=10e9, launch_s=2e-6, reserve=64 * 1048576)


def cost_seconds(c, B, T, f, block, s, cm):
    """predicted extra seconds per micro-step (docs/memory.md section 8)"""
    BT, D, F, L = B * T, c["D"], c["F"], c["L"]
    hd = D // c["H"]
    qd, kvd = c["H"] * hd, c["KV"] * hd
    attn_fwd = 2 * BT * (D * qd + 2 * D * kvd + qd * D) + 2 * BT * T * qd
    ffn_hidden = 4 * BT * D * F
    layer_fwd = attn_fwd + ffn_hidden + 2 * BT * F * D
    K, r = f["ffn_chunks"], f["recompute"]
    flops = (L * attn_fwd if r >= 2 else 0) + (L * ffn_hidden if (r >= 2 or K > 1) else 0)
    mem = (L * 4 * BT * D * s if r >= 1 else 0) + (L * 3 * BT * F * s if (r >= 1 or K > 1) else 0)
    launches = L * (K - 1) * 13 + (L * K * 3 if K > 1 else 0) + (f["ce_chunks"] - 1) * 4
    n_off = L - 1 if f["offload"] == -1 else f["offload"]
    copy, fwd = block / cm["link_bw"], layer_fwd / cm["flops"]
    exposed = n_off * (max(0.0, copy - fwd) + max(0.0, copy - 2 * fwd))
    launches += 4 * n_off
    return flops / cm["flops"] + mem / cm["mem_bw"] + launches * cm["launch_s"] + exposed


def shape_flags(c):
    return ["--V", str(c["V"]), "--D", str(c["D"]), "--L", str(c["L"]), "--H", str(c["H"]), "--KV", str(c["KV"]),
            "--F", str(c["F"]), "--max-seq-len", str(c["T"]), "--seq", str(c["T"])]


def fit(binary, c, gib, extra, tmp):
    dump = os.path.join(tmp, "cand.jsonl")
    if os.path.exists(dump):
        os.remove(dump)
    cmd = [binary, "--plan-only", "1", "--fit-memory", repr(gib), "--fit-candidates", dump] + shape_flags(c) + extra
    r = subprocess.run(cmd, capture_output=True, text=True)
    rows = [json.loads(x) for x in open(dump)] if os.path.exists(dump) else []
    return r, rows


def chosen_of(stdout):
    m = re.search(r"chose --batch (\d+) --ffn-chunks (\d+) --ce-chunks (\d+) --recompute (\d+) --offload-act (-?\d+)",
                  stdout)
    return None if not m else dict(zip(["B", "ffn_chunks", "ce_chunks", "recompute", "offload_act"], map(int, m.groups())))


def key(row):
    return (row["B"], row["ffn_chunks"], row["ce_chunks"], row["recompute"], row["offload_act"])


def flags_of(row):
    return dict(ffn_chunks=row["ffn_chunks"], ffn_seq=0, ce_chunks=row["ce_chunks"], offload=row["offload_act"],
                recompute=row["recompute"])


def cost_model(extra):
    """the CPU build's cost model with --fit-link-gbs (GB/s) and --fit-reserve (MiB) applied"""
    cm = dict(CPU_MODEL)
    if "--fit-link-gbs" in extra:
        cm["link_bw"] = float(extra[extra.index("--fit-link-gbs") + 1]) * 1e9
    if "--fit-reserve" in extra:
        cm["reserve"] = float(extra[extra.index("--fit-reserve") + 1]) * 1048576
    return cm


def check_case(binary, name, c, fraction, extra, tmp, rng):
    cm = cost_model(extra)
    batch_given = "--batch" in extra
    # the budget: a fraction of the flag-free plan at the given (or largest searched) batch
    B0 = int(extra[extra.index("--batch") + 1]) if batch_given else 4
    base_plan, err = run_plan(binary, dict(c, B=B0), dict(ffn_chunks=1, ffn_seq=0, ce_chunks=1, offload=0, recompute=0),
                              os.path.join(tmp, "base.json"))
    if err:
        report(False, f"{name}: flag-free plan: {err}")
        return
    gib = round((base_plan["device"]["total"] + base_plan["host"]["total"] + cm["reserve"]) * fraction / 2**30, 6)
    r, rows = fit(binary, c, gib, extra, tmp)
    label = f"{name} budget {gib:.4f} GiB ({fraction:.2f} of the flag-free plan)"
    if not rows:
        report(False, f"{label}: no candidates written (exit {r.returncode}: {r.stderr.strip()[:200]})")
        return
    s = base_plan["sizeof_floatX"]
    bad = [row for row in rows
           if abs(cost_seconds(c, row["B"], c["T"], flags_of(row), expected_plan(c, row["B"], c["T"], flags_of(row), s)[0],
                               s, cm) - row["seconds"]) > 1e-9 + 1e-6 * row["seconds"]]
    report(not bad, f"{label}: the cost of all {len(rows)} candidates is the documented model"
           + (f" (first mismatch {bad[0]})" if bad else ""))
    sample = rng.sample(rows, min(6, len(rows)))
    mism = []
    for i, row in enumerate(sample):
        plan, err = run_plan(binary, dict(c, B=row["B"]), flags_of(row), os.path.join(tmp, f"s{i}.json"))
        got = None if err else plan["device"]["total"] + plan["host"]["total"]
        if got != row["bytes"]:
            mism.append((key(row), row["bytes"], got, err))
    report(not mism, f"{label}: {len(sample)} sampled candidates' bytes equal their --plan-only plans"
           + (f" (mismatch {mism[0]})" if mism else ""))
    budget = gib * 2**30
    fitting = [row for row in rows if row["bytes"] + cm["reserve"] <= budget]
    flags_ok = all(row["fits"] == (row["bytes"] + cm["reserve"] <= budget) for row in rows)
    report(flags_ok, f"{label}: every candidate's 'fits' agrees with bytes + reserve <= budget")
    if not fitting:
        m = re.search(r"needs a budget of at least ([0-9.]+) GiB", r.stderr)
        smallest = min(row["bytes"] for row in rows if row["B"] == min(x["B"] for x in rows)) + cm["reserve"]
        ok = r.returncode != 0 and m is not None and float(m.group(1)) * 2**30 >= smallest
        report(ok, f"{label}: nothing fits: a clear error naming the smallest budget ({r.stderr.strip()[:160]})")
        if m:
            r2, _ = fit(binary, c, float(m.group(1)), extra, tmp)
            report(r2.returncode == 0 and chosen_of(r2.stdout) is not None,
                   f"{label}: the budget the error names ({m.group(1)} GiB) fits")
        return
    ch = chosen_of(r.stdout)
    if r.returncode != 0 or ch is None:
        report(False, f"{label}: candidates fit but the run failed (exit {r.returncode}: {r.stderr.strip()[:200]})")
        return
    row = next((x for x in rows if key(x) == tuple(ch.values())), None)
    report(row is not None and row["bytes"] + cm["reserve"] <= budget, f"{label}: the choice {ch} fits")
    if row is None:
        return
    if not batch_given:
        larger = [x for x in fitting if x["B"] > row["B"]]
        report(not larger, f"{label}: no larger micro-batch fits" + (f" ({key(larger[0])} does)" if larger else ""))
    cheaper = [x for x in fitting if x["B"] == row["B"] and x["seconds"] < row["seconds"]]
    report(not cheaper, f"{label}: no cheaper candidate of batch {row['B']} fits"
           + (f" ({key(cheaper[0])} does)" if cheaper else ""))


CASES = [
    # name, shape, --fit-memory extra flags
    ("small untied-style", dict(V=1000, D=96, L=3, H=6, KV=3, F=250, T=64), ["--batch", "4"]),
    ("tiny, batch searched", dict(V=32000, D=64, L=4, H=4, KV=2, F=176, T=128), ["--total-batch", "8192"]),
    ("stories15M", dict(V=32000, D=288, L=6, H=6, KV=6, F=768, T=256), ["--batch", "8"]),
    ("llama3-1B shape", dict(V=128256, D=2048, L=16, H=32, KV=8, F=8192, T=2048), ["--batch", "2"]),
    # a slow host link (offload's copies exposed) and a larger reserve: both enter the search
    ("stories15M, link 0.5 GB/s, reserve 96 MiB", dict(V=32000, D=288, L=6, H=6, KV=6, F=768, T=256),
     ["--batch", "8", "--fit-link-gbs", "0.5", "--fit-reserve", "96"]),
]
FRACTIONS = [1.2, 0.9, 0.75, 0.6, 0.3]


def main():
    binary = sys.argv[1] if len(sys.argv) > 1 else "./train_llama_cpu"
    rng = random.Random(1234)
    with tempfile.TemporaryDirectory() as tmp:
        for name, c, extra in CASES:
            for fr in FRACTIONS:
                check_case(binary, name, c, fr, extra, tmp, rng)
        # a flag given on the command line stays as given
        c = CASES[0][1]
        r, rows = fit(binary, c, 1.0, ["--batch", "4", "--recompute", "1"], tmp)
        report(r.returncode == 0 and rows and all(x["recompute"] == 1 for x in rows),
               "an explicit --recompute 1 is held fixed by the search")
    print(f"fit-memory: {'ALL PASSED' if FAILS == 0 else f'{FAILS} FAILED'}")
    sys.exit(1 if FAILS else 0)


if __name__ == "__main__":
    main()
