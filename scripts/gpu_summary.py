#!/usr/bin/env python3
"""The summary of one scripts/gpu_check.sh call, rewritten after every benchmark row.

    python3 scripts/gpu_summary.py STEPS_TSV ROWS_JSONL EXTRA_MD SUMMARY_MD BENCH_JSONL PEAK_FLOPS HEADER

STEPS_TSV: name, status, seconds, note per step. ROWS_JSONL: one throughput row per line
(config, model, T, impl, status, kind, path, data), where kind says how to read the file at
path: ours (train_llama's metrics.jsonl), torch (scripts/pytorch_llama.py --out), dit_ours
(train_dit's metrics.jsonl), dit_torch (scripts/pytorch_dit.py --out). EXTRA_MD: tables
folded in as they are (profiles, the loss gap, sweeps). Writes SUMMARY_MD and BENCH_JSONL.

MFU = tok/s x FLOPs per token / PEAK_FLOPS: the Llama's 6N + 6LDT from
scripts/pytorch_llama.py; the DiT's from the PyTorch peer's summary of the same config
(the same model), so the two trainers' rows use one formula.
"""
import json
import os
import sys


def jl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out


def gib(x):
    return "%.2f GiB" % (x / 2**30) if isinstance(x, (int, float)) and x > 0 else "n/a"


def ours_numbers(lines):
    """tok/s (the mean of the steps after the first three, the start-up excluded) and the peak."""
    st = [l for l in lines if isinstance(l.get("tok_per_s"), (int, float)) and "step" in l]
    tok = None
    if st:
        tail = st[3:] if len(st) > 4 else st[1:] if len(st) > 1 else st
        tail = tail[-10:]
        tok = sum(l["tok_per_s"] for l in tail) / len(tail)
    mems = [l.get("peak_mem") for l in lines if isinstance(l.get("peak_mem"), (int, float))]
    return tok, (max(mems) if mems else None)


def main():
    steps_tsv, rows_jsonl, extra_md, summary_md, bench_jsonl, peak, header = sys.argv[1:8]
    peak = float(peak)
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__))))
    try:
        import pytorch_llama as P
    except Exception as e:  # noqa: BLE001 (torch missing: no MFU for train_llama)
        P = None
        print("gpu_summary: cannot import scripts/pytorch_llama.py (%s): no MFU for train_llama" % e, file=sys.stderr)

    steps = [l.rstrip("\n").split("\t") for l in open(steps_tsv) if l.strip()]
    n_bad = sum(1 for s in steps if s[1] != "PASS")
    rows = jl(rows_jsonl)
    # the DiT's FLOPs per token, from the PyTorch peer's summary of the same config
    dit_flops = {}
    for r in rows:
        if r["kind"] == "dit_torch":
            for l in jl(r["path"]):
                if l.get("summary") and l.get("flops_per_token"):
                    dit_flops[r["config"]] = l["flops_per_token"]

    table = ["| config | impl | data | tok/s | MFU | peak memory | status |", "|---|---|---|---|---|---|---|"]
    bench = []
    for r in rows:
        tok = mfu = mem = None
        memtxt = "n/a"
        lines = jl(r["path"])
        if r["kind"] in ("ours", "dit_ours"):
            tok, mem = ours_numbers(lines)
            memtxt = gib(mem) + " (measured)" if mem else "n/a"
            if tok and r["kind"] == "ours" and P is not None and r["model"] in P.PRESETS:
                mfu = tok * P.flops_per_token(P.preset_cfg(r["model"]), int(r["T"])) / peak
            if tok and r["kind"] == "dit_ours" and r["config"] in dit_flops:
                mfu = tok * dit_flops[r["config"]] / peak
        else:
            summ = [l for l in lines if l.get("summary")]
            if summ:
                s = summ[-1]
                tok = s.get("tok_per_s")
                mfu = tok * s["flops_per_token"] / peak if tok and s.get("flops_per_token") else None
                mem = s.get("peak_mem_reserved")
                memtxt = "%s alloc / %s reserved" % (gib(s.get("peak_mem_allocated")), gib(mem))
                if s.get("compile") == 0 and "compile" in r["impl"]:
                    r["impl"] += " (torch.compile unavailable: ran eager)"
        status = r["status"] if tok else (r["status"] if r["status"] != "PASS" else "FAIL (no tok/s)")
        table.append("| %s | %s | %s | %s | %s | %s | %s |" % (
            r["config"], r["impl"], r.get("data", ""),
            "%.0f" % tok if tok else ("SKIP" if r["status"] == "SKIP" else "FAIL"),
            "%.1f%%" % (100 * mfu) if mfu else "n/a", memtxt, status))
        if tok:
            bench.append({"name": "%s %s" % (r["config"], r["impl"]), "tok_per_s": tok, "peak_mem_bytes": mem, "mfu": mfu,
                          "config": r["config"], "impl": r["impl"], "data": r.get("data"), "status": r["status"]})

    md = [header, "", "## throughput (MFU = tok/s x FLOPs per token / %.4g FLOP/s)" % peak, ""] + table
    md += ["", "## checks (%d steps, %d not PASS)" % (len(steps), n_bad), "", "| step | status | seconds | note |",
           "|---|---|---|---|"]
    md += ["| %s | %s | %s | %s |" % tuple((s + ["", "", "", ""])[:4]) for s in steps]
    if os.path.exists(extra_md):
        extra = open(extra_md).read().strip()
        if extra:
            md += ["", extra]
    title = "# gpu_check %s" % os.path.basename(summary_md).replace("summary_", "").replace(".md", "")
    tmp = summary_md + ".part"
    with open(tmp, "w") as f:
        f.write("\n".join([title, ""] + md) + "\n")
    os.replace(tmp, summary_md)  # a call cut off mid-write keeps the previous summary whole
    with open(bench_jsonl + ".part", "w") as f:
        for b in bench:
            f.write(json.dumps(b) + "\n")
    os.replace(bench_jsonl + ".part", bench_jsonl)


if __name__ == "__main__":
    main()
