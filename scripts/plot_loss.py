#!/usr/bin/env python3
"""Overlays the training-loss curves of two or more metrics.jsonl files in one PNG and
reports the largest absolute gap between any two curves at their common steps.

  python3 scripts/plot_loss.py RUN/metrics.jsonl torch.jsonl --labels train_llama pytorch \\
      --out loss.png [--title TEXT] [--skip-first N]

Input: JSON lines; every line with "step" and "loss" is a point of the curve (later lines
win for a repeated step, as when a run is resumed into the same file); lines with
"val_loss" (train_llama's) also give a dashed validation curve. Other lines (summaries)
are ignored. train_llama writes step, loss and sometimes val_loss; scripts/pytorch_llama.py
writes step, loss.

Output: the PNG, and on stdout one line per pair of curves and a last line
  max_abs_gap G at step S between A and B (N common steps)
which is also in the plot's title. Exit status 0, or 1 when a file has no loss points or
two curves share no step, or 3 when matplotlib is missing (the gap is still printed).
"""

import argparse
import json
import math
import os
import sys

sys.dont_write_bytecode = True


def read_curves(path):
    loss, val = {}, {}
    with open(path) as f:
        for ln, line in enumerate(f, 1):
            line = line.strip()
            if not line:
                continue
            try:
                d = json.loads(line)
            except ValueError:
                print("plot_loss: warning: %s:%d is not JSON; skipped" % (path, ln), file=sys.stderr)
                continue
            if not isinstance(d, dict) or "step" not in d or d.get("summary"):
                continue
            step = int(d["step"])
            if isinstance(d.get("loss"), (int, float)):
                loss[step] = float(d["loss"])
            if isinstance(d.get("val_loss"), (int, float)):
                val[step] = float(d["val_loss"])
    return loss, val


def gaps(curves, labels, skip_first=0):
    """Per pair: (max gap, step, n common); and the overall maximum."""
    pairs, best = [], None
    for i in range(len(curves)):
        for j in range(i + 1, len(curves)):
            common = sorted(s for s in set(curves[i]) & set(curves[j]) if s > skip_first)
            common = [s for s in common if math.isfinite(curves[i][s]) and math.isfinite(curves[j][s])]
            if not common:
                pairs.append((labels[i], labels[j], None, None, 0))
                continue
            g, s = max((abs(curves[i][s] - curves[j][s]), s) for s in common)
            pairs.append((labels[i], labels[j], g, s, len(common)))
            if best is None or g > best[2]:
                best = (labels[i], labels[j], g, s, len(common))
    return pairs, best


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("files", nargs="+", help="metrics JSONL files (two or more)")
    ap.add_argument("--labels", nargs="+", default=None, help="one label per file (default: file names)")
    ap.add_argument("--out", default="loss.png", help="PNG to write (default %(default)s)")
    ap.add_argument("--title", default=None)
    ap.add_argument("--skip-first", dest="skip_first", type=int, default=0,
                    help="leave steps <= N out of the gap (the curves are still drawn)")
    a = ap.parse_args()
    if len(a.files) < 2:
        ap.error("give two or more metrics files")
    labels = a.labels or [os.path.basename(os.path.dirname(os.path.abspath(p))) + "/" + os.path.basename(p)
                          for p in a.files]
    if len(labels) != len(a.files):
        ap.error("--labels needs one label per file (%d files, %d labels)" % (len(a.files), len(labels)))
    if len(set(labels)) != len(labels):
        labels = ["%d:%s" % (i, l) for i, l in enumerate(labels)]

    curves, vals, rc = [], [], 0
    for p, l in zip(a.files, labels):
        try:
            loss, val = read_curves(p)
        except OSError as e:
            print("plot_loss: error: cannot read %s: %s" % (p, e), file=sys.stderr)
            return 1
        if not loss:
            print("plot_loss: error: %s has no lines with step and loss" % p, file=sys.stderr)
            rc = 1
        curves.append(loss)
        vals.append(val)
        print("%s: %d loss points (steps %s..%s), %d val points%s" % (
            l, len(loss), min(loss) if loss else "-", max(loss) if loss else "-", len(val),
            ", last loss %.4f" % loss[max(loss)] if loss else ""))

    pairs, best = gaps(curves, labels, a.skip_first)
    for li, lj, g, s, n in pairs:
        if g is None:
            print("gap %s vs %s: no common steps" % (li, lj))
            rc = 1
        else:
            print("gap %s vs %s: max |diff| %.4f at step %d (%d common steps)" % (li, lj, g, s, n))
    if best is None:
        gap_text = "max |loss gap|: no common steps"
        print("max_abs_gap none")
    else:
        gap_text = "max |loss gap| %.4f at step %d (%s vs %s)" % (best[2], best[3], best[0], best[1])
        print("max_abs_gap %.6f at step %d between %s and %s (%d common steps)" % (best[2], best[3], best[0],
                                                                                 best[1], best[4]))

    try:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        print("plot_loss: matplotlib is not importable, so no PNG was written. Install it with\n"
              "  sudo apt-get install python3-matplotlib     (Debian/Ubuntu system python)\n"
              "  or: python3 -m pip install matplotlib", file=sys.stderr)
        return 3

    fig, ax = plt.subplots(figsize=(9, 5.5))
    for i, (loss, val, l) in enumerate(zip(curves, vals, labels)):
        color = "C%d" % i
        if loss:
            st = sorted(loss)
            ax.plot(st, [loss[s] for s in st], color=color, lw=1.2, alpha=0.9, label="%s loss" % l)
        if val:
            st = sorted(val)
            ax.plot(st, [val[s] for s in st], color=color, lw=1.5, ls="--", marker="o", ms=3,
                    label="%s val_loss" % l)
    ax.set_xlabel("step")
    ax.set_ylabel("loss")
    ax.grid(True, alpha=0.3)
    ax.legend()
    title = (a.title + "\n" if a.title else "") + gap_text
    ax.set_title(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(a.out, dpi=110)
    print("wrote %s" % a.out)
    return rc


if __name__ == "__main__":
    sys.exit(main())
