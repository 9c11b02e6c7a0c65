#!/usr/bin/env python3
"""Can a person name the digits in train_dit's samples? A measured answer: a small classifier
of the moving-digits generator's real clips (llmc/io/video_data.h, ported in scripts/pytorch_dit.py)
labels each sampled clip, and its accuracy on held-out REAL clips is shown first, so that a low
score on the samples is the model's, not the classifier's.

    python3 scripts/dit_digits.py check --Fr 8 --Hi 16 --Wi 16 [--C 1 --NC 10]
        the classifier on held-out real clips: accuracy per class; exit 1 below --min-real (0.95)
    python3 scripts/dit_digits.py classify RUN_DIR/samples/step_002000.clips [--min-real 0.95]
        per-class accuracy of the labelled sampled clips in a clip file (docs/formats.md; train_dit
        writes one per sample step), beside the classifier's accuracy on real clips of that shape
    python3 scripts/dit_digits.py classify RUN_DIR/samples/step_002000_class_*.gif
        the same from GIFs (one clip each, the class from the name 'class_K'; the pixel size of the
        GIF is found from --Hi/--Wi, default the clip file's or 16 x 16)
    --json FILE writes the numbers; --self-test plants a shuffled-label check that must fail.

The classifier, in numpy only: each frame's brightness (values in [-1, 1] -> [0, 1], channels
averaged) is shifted by whole pixels so that its centre of mass sits in the middle of a canvas
twice the frame's size (the digits move; this takes the position out), then compared by cosine
similarity with one template per class, the mean of the centred frames of 200 real training
clips of that class. A clip's label is the class with the largest similarity summed over its
frames. Real clips come from the generator's training stream (seed --seed, indices 0..), the
held-out ones from other indices (10^6 + i), so the check never sees its training clips.
"""
import argparse
import glob
import json
import os
import re
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def die(msg, code=2):
    print("dit_digits: " + msg, file=sys.stderr)
    sys.exit(code)


def generator(C, Fr, Hi, Wi, NC, seed):
    try:
        from pytorch_dit import MovingDigits  # the exact port of llmc/io/video_data.h's ClipGenerator
    except ImportError as e:
        die("needs scripts/pytorch_dit.py's imports (numpy, torch): %s" % e)
    return MovingDigits(C, Fr, Hi, Wi, NC, seed)


def centred_frames(x):
    """x [C, Fr, Hi, Wi] in [-1, 1] -> [Fr, 2 Hi, 2 Wi]: each frame's brightness, centre of mass
    moved to the canvas' centre by whole pixels."""
    w = np.clip((x.mean(axis=0) + 1.0) * 0.5, 0.0, 1.0)  # [Fr, Hi, Wi]
    Fr, Hi, Wi = w.shape
    out = np.zeros((Fr, 2 * Hi, 2 * Wi), dtype=np.float64)
    ys, xs = np.arange(Hi)[:, None], np.arange(Wi)[None, :]
    for f in range(Fr):
        m = w[f].sum()
        cy, cx = ((w[f] * ys).sum() / m, (w[f] * xs).sum() / m) if m > 1e-6 else ((Hi - 1) / 2, (Wi - 1) / 2)
        oy, ox = int(round(Hi - cy)), int(round(Wi - cx))  # frame pixel (cy, cx) lands on (Hi, Wi)
        y0, x0 = max(oy, 0), max(ox, 0)
        y1, x1 = min(oy + Hi, 2 * Hi), min(ox + Wi, 2 * Wi)
        out[f, y0:y1, x0:x1] = w[f, y0 - oy:y1 - oy, x0 - ox:x1 - ox]
    return out


class Classifier:
    def __init__(self, C, Fr, Hi, Wi, NC, seed, per_class=200):
        self.shape, self.NC = (C, Fr, Hi, Wi), NC
        gen = generator(C, Fr, Hi, Wi, NC, seed)
        sums = np.zeros((NC, 2 * Hi, 2 * Wi))
        counts = np.zeros(NC, dtype=np.int64)
        i = 0
        while counts.min() < per_class:
            x, y = gen.clip(i)
            i += 1
            if counts[y] < per_class:
                sums[y] += centred_frames(x).sum(axis=0)
                counts[y] += Fr
        t = sums / counts[:, None, None]
        t -= t.mean(axis=(1, 2), keepdims=True)
        self.templates = t.reshape(NC, -1) / np.linalg.norm(t.reshape(NC, -1), axis=1, keepdims=True)
        self.gen = gen

    def scores(self, x):
        """[NC]: the summed cosine similarity of the clip's centred frames with each template."""
        fr = centred_frames(x)
        fr = fr - fr.mean(axis=(1, 2), keepdims=True)
        v = fr.reshape(fr.shape[0], -1)
        v = v / np.maximum(np.linalg.norm(v, axis=1, keepdims=True), 1e-12)
        return (v @ self.templates.T).sum(axis=0)

    def label(self, x):
        return int(np.argmax(self.scores(x)))

    def real_accuracy(self, n=1000, start=1000000):
        """per-class accuracy on n held-out real clips (generator indices start..start+n-1)."""
        right, total = np.zeros(self.NC, dtype=np.int64), np.zeros(self.NC, dtype=np.int64)
        for i in range(start, start + n):
            x, y = self.gen.clip(i)
            total[y] += 1
            right[y] += self.label(x) == y
        return right, total


def read_clip_file(path):
    """(clips [n, C, Fr, Hi, Wi] float32 in [-1, 1], labels [n]) of a clip file (docs/formats.md),
    checked and decoded by scripts/pytorch_dit.py's reader."""
    try:
        from pytorch_dit import clip_file_header, decode_clip_values
    except ImportError as e:
        die("needs scripts/pytorch_dit.py's imports (numpy, torch): %s" % e)
    n, C, Fr, Hi, Wi, NC, dt, rec = clip_file_header(path)
    raw = np.fromfile(path, dtype="u1", offset=1024).reshape(n, rec)
    labels = raw[:, :4].copy().view("<i4").reshape(n)
    x = decode_clip_values(raw[:, 4:].copy().view(dt), dt).reshape(n, C, Fr, Hi, Wi)
    if labels.min() < 0 or labels.max() >= NC:
        die("%s: a label outside [0, %d)" % (path, NC), 1)
    return x, labels, NC


def read_gifs(paths, Hi, Wi):
    try:
        from PIL import Image
    except ImportError:
        die("reading GIFs needs Pillow (python3-pil); a clip file needs nothing")
    clips, labels = [], []
    for p in paths:
        m = re.search(r"class_(\d+)", os.path.basename(p))
        if not m:
            die("%s: no 'class_K' in the name to take the label from" % p)
        im = Image.open(p)
        frames = []
        try:
            while True:
                g = np.asarray(im.convert("L"), dtype=np.float32)
                if g.shape[0] % Hi or g.shape[1] % Wi:
                    die("%s: %dx%d pixels is not a multiple of the clip's %dx%d (give --Hi --Wi)" % (p, g.shape[1], g.shape[0], Wi, Hi))
                s = g.shape[0] // Hi
                g = g.reshape(Hi, s, Wi, g.shape[1] // Wi).mean(axis=(1, 3))  # each clip pixel was s x s GIF pixels
                frames.append(g / 127.5 - 1.0)
                im.seek(im.tell() + 1)
        except EOFError:
            pass
        clips.append(np.stack(frames)[None])  # [1, Fr, Hi, Wi]
        labels.append(int(m.group(1)))
    return clips, np.array(labels)


def table(name, right, total):
    rows = ["| class | " + " | ".join(str(k) for k in range(len(total))) + " | all |",
            "|---" * (len(total) + 2) + "|",
            "| %s | " % name + " | ".join(("%d/%d" % (r, t)) if t else "-" for r, t in zip(right, total))
            + " | %.3f |" % (right.sum() / max(total.sum(), 1))]
    return "\n".join(rows)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("mode", choices=["check", "classify"])
    ap.add_argument("inputs", nargs="*")
    ap.add_argument("--C", type=int, default=None)
    ap.add_argument("--Fr", type=int, default=None)
    ap.add_argument("--Hi", type=int, default=None)
    ap.add_argument("--Wi", type=int, default=None)
    ap.add_argument("--NC", type=int, default=None)
    ap.add_argument("--seed", type=int, default=1337, help="the generator's seed for the real clips")
    ap.add_argument("--real-clips", type=int, default=1000, help="held-out real clips for the classifier's accuracy")
    ap.add_argument("--min-real", type=float, default=0.95, help="the classifier must reach this on real clips")
    ap.add_argument("--json", default=None)
    ap.add_argument("--self-test", action="store_true",
                    help="also score real clips with shuffled labels: that accuracy must be near chance")
    a = ap.parse_args()

    clips, labels, NC = None, None, a.NC
    if a.mode == "classify":
        if not a.inputs:
            die("classify needs a clip file or GIFs")
        if len(a.inputs) == 1 and not a.inputs[0].endswith(".gif"):
            x, labels, NC_file = read_clip_file(a.inputs[0])
            NC = NC or NC_file
            clips = list(x)
            C, Fr, Hi, Wi = x.shape[1:]
        else:
            Hi, Wi = a.Hi or 16, a.Wi or 16
            clips, labels = read_gifs(sorted(a.inputs), Hi, Wi)
            C, Fr = 1, clips[0].shape[1]
            NC = NC or 10
    else:
        C, Fr, Hi, Wi = a.C or 1, a.Fr or 8, a.Hi or 16, a.Wi or 16
        NC = NC or 10
    C, Fr, Hi, Wi = a.C or C, a.Fr or Fr, a.Hi or Hi, a.Wi or Wi

    clf = Classifier(C, Fr, Hi, Wi, NC, a.seed)
    right, total = clf.real_accuracy(a.real_clips)
    real_acc = right.sum() / total.sum()
    print("classifier on %d held-out real clips (C=%d Fr=%d Hi=%d Wi=%d, %d classes):" % (total.sum(), C, Fr, Hi, Wi, NC))
    print(table("real", right, total))
    result = {"real_accuracy": real_acc, "real_per_class": [int(r) for r in right], "real_total": [int(t) for t in total],
              "shape": [int(C), int(Fr), int(Hi), int(Wi)], "NC": int(NC)}
    ok = real_acc >= a.min_real
    if not ok:
        print("dit_digits: the classifier scores %.3f on real clips, below --min-real %.2f: its labels of samples "
              "would mean little" % (real_acc, a.min_real))
    if a.self_test:
        rng = np.random.default_rng(0)
        xs = [clf.gen.clip(2000000 + i) for i in range(300)]
        wrong = rng.integers(0, NC, size=len(xs))
        acc = np.mean([clf.label(x) == w for (x, _), w in zip(xs, wrong)])
        print("self-test: accuracy against shuffled labels %.3f (chance %.3f)" % (acc, 1.0 / NC))
        result["shuffled_accuracy"] = acc
        if acc > 2.0 / NC:
            print("dit_digits: self-test FAILED: shuffled labels should score near chance")
            ok = False
    if a.mode == "classify":
        sr, st = np.zeros(NC, dtype=np.int64), np.zeros(NC, dtype=np.int64)
        got = []
        for x, y in zip(clips, labels):
            k = clf.label(np.asarray(x, dtype=np.float32))
            got.append(k)
            st[y] += 1
            sr[y] += k == y
        print("sampled clips (%d), labelled by the classifier:" % len(got))
        print(table("samples", sr, st))
        print("samples_accuracy %.3f (classifier on real clips %.3f)" % (sr.sum() / st.sum(), real_acc))
        result.update({"samples_accuracy": sr.sum() / st.sum(), "samples_per_class": [int(r) for r in sr],
                       "samples_total": [int(t) for t in st], "labels_given": [int(v) for v in labels],
                       "labels_read": got})
    if a.json:
        with open(a.json, "w") as f:
            json.dump(result, f, indent=1, default=float)
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
