#!/usr/bin/env python3
"""Plots peak memory against throughput for a sweep of flag combinations: one labelled
point per combination.

  python3 scripts/plot_memory.py sweep.jsonl [more.jsonl ...] --out memory.png [--title TEXT]

Input: JSON lines with "name", "tok_per_s" and "peak_mem_bytes" (one line per flag
combination); lines missing one of them, or with a non-positive value, are reported and
skipped. Output: the PNG (x: tok/s, y: peak memory in GiB) and a table on stdout.
Exit status 0, 1 when no line is usable, 3 when matplotlib is missing (the table is
still printed).
"""

import argparse
import json
import sys

sys.dont_write_bytecode = True

GIB = float(1 << 30)


def read_points(paths):
    pts = []
    for p in paths:
        with open(p) as f:
            for ln, line in enumerate(f, 1):
                line = line.strip()
                if not line:
                    continue
                try:
                    d = json.loads(line)
                except ValueError:
                    print("plot_memory: warning: %s:%d is not JSON; skipped" % (p, ln), file=sys.stderr)
                    continue
                ok = isinstance(d, dict) and isinstance(d.get("name"), str)
                ok = ok and all(isinstance(d.get(k), (int, float)) and d.get(k) > 0
                                for k in ("tok_per_s", "peak_mem_bytes"))
                if not ok:
                    print("plot_memory: warning: %s:%d lacks name / tok_per_s / peak_mem_bytes (> 0); skipped"
                          % (p, ln), file=sys.stderr)
                    continue
                pts.append((d["name"], float(d["tok_per_s"]), float(d["peak_mem_bytes"])))
    return pts


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="sweep JSONL files")
    ap.add_argument("--out", default="memory.png", help="PNG to write (default %(default)s)")
    ap.add_argument("--title", default="peak memory vs throughput")
    ap.add_argument("--logx", action="store_true", help="log scale for tok/s")
    a = ap.parse_args()
    try:
        pts = read_points(a.files)
    except OSError as e:
        print("plot_memory: error: %s" % e, file=sys.stderr)
        return 1
    if not pts:
        print("plot_memory: error: no usable lines in %s" % " ".join(a.files), file=sys.stderr)
        return 1
    w = max(len(n) for n, _, _ in pts)
    print("%-*s  %14s  %12s" % (w, "name", "tok/s", "peak GiB"))
    for n, t, m in pts:
        print("%-*s  %14.0f  %12.2f" % (w, n, t, m / GIB))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_memory: matplotlib is not importable, so no PNG was written. Install it with\n"
              "  sudo apt-get install python3-matplotlib     (Debian/Ubuntu system python)\n"
              "  or: python3 -m pip install matplotlib", file=sys.stderr)
        return 3

    fig, ax = plt.subplots(figsize=(9, 6))
    for i, (n, t, m) in enumerate(pts):
        ax.scatter([t], [m / GIB], color="C%d" % (i % 10), s=40, zorder=3)
        ax.annotate(n, (t, m / GIB), textcoords="offset points", xytext=(6, 4), fontsize=8)
    if a.logx:
        ax.set_xscale("log")
    else:
        ax.set_xlim(left=0, right=max(t for _, t, _ in pts) * 1.25)
    ax.set_xlabel("throughput (tok/s)")
    ax.set_ylabel("peak memory (GiB)")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    ax.set_title(a.title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote %s" % a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
