#!/usr/bin/env python3
"""
train_dit --cfg-scale end to end: the samples' classifier-free guidance, v = v_null + s (v_y - v_null)
(llmc/train/clip_sampler.h), on a tiny model trained for a few steps.

    python3 dev/test/check_dit_cfg.py TRAIN_DIT_CPU DIR     one line per check (PASS name / FAIL name: why);
                                                           exit status non-zero on any failure

The sampler's noise is seeded by the class and the clip's number, so no two classes start from
the same noise; the class enters only through v_y. Hence the properties checked, with one Euler
step (--sample-steps 1: x = x0 - (v_null + s (v_y - v_null)), all at x0 and t = 1):
  - cfg0_ignores_class: --cfg-scale 0 samples only the null-class velocity: a copy of the
    checkpoint whose real classes' embedding rows (class_emb rows 0..NC-1, not the null row NC)
    are replaced samples exactly the same bytes (samples/step_N.clips);
  - cfg1_follows_class: the same two checkpoints sample different clips at --cfg-scale 1 (the
    replaced rows do reach the samples when guidance uses the class);
  - scales_differ: --cfg-scale 0, 1 and 3 give three different sets of samples;
  - scale_is_linear: the samples are affine in s with the slope of s: x(3) - x(1) = 2 (x(1) - x(0))
    on every value that none of the three clamped to [-1, 1] (the clip file's range), to float
    rounding, with a slope well above that rounding.
Five runs of train_dit_cpu, 2-9 s in all on 2 shared cores: 8 training steps, then 4 runs that only sample
its checkpoint (--steps 0 --init-from); the --cfg-scale 3 clips are the training run's own samples at its
last step, from the weights its checkpoint holds. Standard library only.
"""
import os
import struct
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from nan_checkpoint import fold  # llmc/io/checkpoint.h's block checksum

SHAPE = ["--D", "24", "--L", "2", "--H", "2", "--FF", "40", "--frames", "4", "--height", "8", "--width", "8",
         "--NC", "3", "--batch", "2"]
STEPS = 8
TEMB_DIM = 256  # train_dit.cu's sinusoidal timestep embedding
TOL = 2e-5      # float rounding of x0 - (vn + s (vy - vn)) for values of a few units
failed = 0


def report(name, ok, why=""):
    global failed
    print(("PASS %s" % name) if ok else ("FAIL %s: %s" % (name, why)), flush=True)
    failed += not ok


def run(trainer, args, log):
    with open(log, "w") as f:
        r = subprocess.run([trainer, *SHAPE, *args], stdout=f, stderr=subprocess.STDOUT)
    if r.returncode != 0:
        sys.exit("FAIL cfg_runs: %s %s exited %d (see %s)" % (trainer, " ".join(args), r.returncode, log))


def read_clips(path):
    """labels and values of a clip file (docs/formats.md; float32)"""
    raw = open(path, "rb").read()
    h = struct.unpack("<256i", raw[:1024])
    n, C, Fr, Hi, Wi, enc = h[2], h[3], h[4], h[5], h[6], h[8]
    assert h[0] == 20261125 and enc == 1, "%s: not a float32 clip file" % path
    clip = C * Fr * Hi * Wi
    labels, values, at = [], [], 1024
    for _ in range(n):
        labels.append(struct.unpack("<i", raw[at:at + 4])[0])
        values.extend(struct.unpack("<%df" % clip, raw[at + 4:at + 4 + 4 * clip]))
        at += 4 + 4 * clip
    assert at == len(raw), "%s: %d bytes, expected %d" % (path, len(raw), at)
    return labels, values


def replace_class_rows(src, dst):
    """a copy of a train_dit checkpoint with class_emb rows 0..NC-1 replaced (the null row NC kept),
    its checksum made to hold (docs/formats.md: header, parameters, AdamW m, v, checksum)"""
    raw = bytearray(open(src, "rb").read())
    h = struct.unpack("<256i", raw[:1024])
    C, pt, ph, pw, D, L, H, FF, NC = h[2], h[6], h[7], h[8], h[9], h[10], h[11], h[12], h[13]
    n = h[15] | (h[16] << 31)
    P, hd = C * pt * ph * pw, D // H
    # the parameter order of docs/design.md 9.2 (train_dit.cu's dit_param_specs), counted to check the layout
    before = D * P + D + D * TEMB_DIM + D + D * D + D            # patch_w, patch_b, t1_w, t1_b, t2_w, t2_b
    per_layer = 6 * D * D + 6 * D + 3 * D * D + 3 * D + 2 * hd + D * D + D + FF * D + FF + D * FF + D
    total = before + (NC + 1) * D + L * per_layer + 2 * D * D + 2 * D + P * D + P
    if total != n or len(raw) != 1024 + 12 * n + 8:
        sys.exit("FAIL cfg_checkpoint: %s holds %d parameters, the layout this check knows gives %d" % (src, n, total))
    at = 1024 + 4 * before
    rows = list(struct.unpack("<%df" % (NC * D), raw[at:at + 4 * NC * D]))
    new = [-3.0 * v + 0.05 * ((i % 7) - 3) for i, v in enumerate(rows)]  # other embeddings for every real class
    raw[at:at + 4 * NC * D] = struct.pack("<%df" % (NC * D), *new)
    c = 0xCBF29CE484222325
    c = fold(c, bytes(raw[:1024]))
    for b in range(3):
        c = fold(c, bytes(raw[1024 + 4 * n * b:1024 + 4 * n * (b + 1)]))
    raw[-8:] = struct.pack("<Q", c)
    open(dst, "wb").write(raw)


def main():
    trainer, d = sys.argv[1], sys.argv[2]
    os.makedirs(d, exist_ok=True)
    train = os.path.join(d, "train")
    run(trainer, ["--steps", str(STEPS), "--warmup", "1", "--lr", "1e-2", "--val-every", "0", "--ckpt-every", str(STEPS),
                  "--sample-every", str(STEPS), "--sample-steps", "1", "--cfg-scale", "3", "--run-dir", train],
        train + ".log")
    ckpt = os.path.join(train, "ckpt_%06d.bin" % STEPS)
    other = os.path.join(d, "other_classes.bin")
    replace_class_rows(ckpt, other)
    clips = {("orig", 3): os.path.join(train, "samples", "step_%06d.clips" % STEPS)}
    for name, c in (("orig", ckpt), ("other", other)):
        for s in (0, 1):
            rd = os.path.join(d, "%s_cfg%d" % (name, s))
            run(trainer, ["--steps", "0", "--init-from", c, "--val-every", "0", "--sample-every", "1", "--sample-steps",
                          "1", "--cfg-scale", str(s), "--run-dir", rd], rd + ".log")
            clips[(name, s)] = os.path.join(rd, "samples", "step_000000.clips")
    data = {k: open(p, "rb").read() for k, p in clips.items()}

    report("cfg0_ignores_class", data[("orig", 0)] == data[("other", 0)],
           "--cfg-scale 0 samples changed with the real classes' embeddings (the class leaks past v_null)")
    report("cfg1_follows_class", data[("orig", 1)] != data[("other", 1)],
           "--cfg-scale 1 samples did not change with the real classes' embeddings (the class is not used)")
    x = {s: read_clips(clips[("orig", s)]) for s in (0, 1, 3)}
    same = [(a, b) for a, b in ((0, 1), (1, 3), (0, 3)) if x[a][1] == x[b][1]]
    report("scales_differ", not same, "equal samples at --cfg-scale " + ", ".join("%d and %d" % p for p in same))
    labels_ok = all(x[s][0] == [0, 1, 2] for s in x)
    inside = [i for i in range(len(x[0][1])) if all(abs(x[s][1][i]) < 1.0 for s in (0, 1, 3))]
    err = max((abs((x[3][1][i] - x[1][1][i]) - 2.0 * (x[1][1][i] - x[0][1][i])) for i in inside), default=0.0)
    slope = max((abs(x[1][1][i] - x[0][1][i]) for i in inside), default=0.0)
    print("  (%d of %d values unclamped at s = 0, 1, 3; largest |x(3) - x(1) - 2 (x(1) - x(0))| %.3g, largest "
          "|x(1) - x(0)| %.3g)" % (len(inside), len(x[0][1]), err, slope))
    report("scale_is_linear", labels_ok and len(inside) >= 100 and err <= TOL and slope >= 100 * TOL,
           "labels %s; %d unclamped values; deviation from x(3) - x(1) = 2 (x(1) - x(0)) %.3g (bound %g), slope %.3g "
           "(at least %g)" % ([x[s][0] for s in x], len(inside), err, TOL, slope, 100 * TOL))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
