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

Every row gives tok/s from the mean step and from the median step, computed the same way for
ours (the steps after the first three) and the peer (its steps after --bench-warmup): the
tokens of a step over the step's mean or median time. The peer's rows name the SDPA backend
that ran (its summary's sdpa_backend). A table of ratios then sets each of ours' rows against
every PyTorch row of the same config, all from this one call.

    python3 scripts/gpu_summary.py --fastest-sdpa COMPILED_AUTO EAGER...

prints the SDPA backend of the fastest of the peer's EAGER summaries when it is not the one
the torch.compile run with auto (COMPILED_AUTO) ran, and nothing otherwise: gpu_check.sh then
compiles once more with that backend, so the comparison includes PyTorch's fastest.
"""
import json
import os
import statistics
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
    """(tok/s of the mean step, tok/s of the median step, mean ms, median ms, peak) over the
    steps after the first three (the start-up excluded), at most the last 10."""
    st = [l for l in lines if isinstance(l.get("tok_per_s"), (int, float)) and isinstance(l.get("ms"), (int, float))
          and l["ms"] > 0 and "step" in l]
    tok = med = ms = ms_med = None
    if st:
        tail = st[3:] if len(st) > 4 else st[1:] if len(st) > 1 else st
        tail = tail[-10:]
        tokens = tail[-1]["tok_per_s"] * tail[-1]["ms"] / 1e3  # the same every step
        t = [l["ms"] for l in tail]
        ms, ms_med = sum(t) / len(t), statistics.median(t)
        tok, med = tokens / (ms / 1e3), tokens / (ms_med / 1e3)
    mems = [l.get("peak_mem") for l in lines if isinstance(l.get("peak_mem"), (int, float))]
    return tok, med, ms, ms_med, (max(mems) if mems else None)


def last_summary(path):
    summ = [l for l in jl(path) if l.get("summary")]
    return summ[-1] if summ else None


def fastest_sdpa(compiled_auto, eager):
    """The backend of the fastest eager run, when the compiled run with auto ran another."""
    runs = [s for s in (last_summary(p) for p in eager) if s and s.get("tok_per_s") and s.get("sdpa_backend")]
    comp = last_summary(compiled_auto)
    if not runs or not comp:
        return None
    best = max(runs, key=lambda s: s["tok_per_s"])["sdpa_backend"]
    return best if best != comp.get("sdpa_backend") and best in ("flash", "cudnn", "efficient", "math") else None


def fmt(x, f="%.0f"):
    return f % x if isinstance(x, (int, float)) and x else "n/a"


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--fastest-sdpa":
        best = fastest_sdpa(sys.argv[2], sys.argv[3:])
        if best:
            print(best)
        return
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

    table = ["| config | impl | data | tok/s (mean step) | tok/s (median step) | ms mean / median | MFU | SDPA ran | "
             "peak memory | status |", "|---|---|---|---|---|---|---|---|---|---|"]
    bench = []
    for r in rows:
        tok = med = ms = ms_med = mfu = mem = sdpa = None
        memtxt = "n/a"
        lines = jl(r["path"])
        if r["kind"] in ("ours", "dit_ours"):
            tok, med, ms, ms_med, mem = ours_numbers(lines)
            memtxt = gib(mem) + " (measured)" if mem else "n/a"
            if tok and r["kind"] == "ours" and P is not None and r["model"] in P.PRESETS:
                mfu = tok * P.flops_per_token(P.preset_cfg(r["model"]), int(r["T"])) / peak
            if tok and r["kind"] == "dit_ours" and r["config"] in dit_flops:
                mfu = tok * dit_flops[r["config"]] / peak
        else:
            summ = [l for l in lines if l.get("summary")]
            if summ:
                s = summ[-1]
                tok, med = s.get("tok_per_s"), s.get("tok_per_s_median")
                ms, ms_med, sdpa = s.get("ms_per_step"), s.get("ms_per_step_median"), s.get("sdpa_backend")
                mfu = tok * s["flops_per_token"] / peak if tok and s.get("flops_per_token") else None
                mem = s.get("peak_mem_reserved")
                memtxt = "%s alloc / %s reserved" % (gib(s.get("peak_mem_allocated")), gib(mem))
                if s.get("compile") == 0 and "compile" in r["impl"]:
                    r["impl"] += " (torch.compile unavailable: ran eager)"
        status = r["status"] if tok else (r["status"] if r["status"] != "PASS" else "FAIL (no tok/s)")
        table.append("| %s | %s | %s | %s | %s | %s / %s | %s | %s | %s | %s |" % (
            r["config"], r["impl"], r.get("data", ""),
            "%.0f" % tok if tok else ("SKIP" if r["status"] == "SKIP" else "FAIL"), fmt(med),
            fmt(ms, "%.2f"), fmt(ms_med, "%.2f"), "%.1f%%" % (100 * mfu) if mfu else "n/a",
            sdpa or ("-" if r["kind"] in ("ours", "dit_ours") else "n/a"), memtxt, status))
        if tok:
            bench.append({"name": "%s %s" % (r["config"], r["impl"]), "tok_per_s": tok, "tok_per_s_median": med,
                          "ms_per_step": ms, "ms_per_step_median": ms_med, "sdpa_backend": sdpa, "peak_mem_bytes": mem,
                          "mfu": mfu, "config": r["config"], "impl": r["impl"], "data": r.get("data"),
                          "status": r["status"]})

    # ours against each PyTorch row of the same config: both from this call, on this machine
    ratios = ["| config | ours | PyTorch | SDPA ran | ours / PyTorch, mean step | median step |",
              "|---|---|---|---|---|---|"]
    for o in (b for b in bench if b["impl"].startswith("train_")):
        for t in (b for b in bench if b["config"] == o["config"] and b["impl"].startswith("pytorch")):
            ratios.append("| %s | %s | %s | %s | %.3fx | %s |" % (
                o["config"], o["impl"], t["impl"], t["sdpa_backend"] or "n/a", o["tok_per_s"] / t["tok_per_s"],
                "%.3fx" % (o["tok_per_s_median"] / t["tok_per_s_median"])
                if o["tok_per_s_median"] and t["tok_per_s_median"] else "n/a"))
    if len(ratios) > 2:
        table += ["", "## ours against PyTorch, same call, same machine", ""] + ratios

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
