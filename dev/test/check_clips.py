#!/usr/bin/env python3
"""Checks scripts/clips_to_bin.py against the C reader of llmc/io/video_data.h.

  python3 dev/test/check_clips.py ./build/test_video_data WORKDIR
      converts demo clips (and clips it writes itself) with scripts/clips_to_bin.py, reads
      the files back with `test_video_data --dump` (the C reader) and compares every value
      with what the rules of docs/formats.md and the converter's header give, computed here
      independently (no code of the converter is used); then the converter's errors.
      One line PASS name / FAIL name: why per check; exit status non-zero on any failure.
  python3 dev/test/check_clips.py --make-bad GOOD_FLOAT32.bin OUTDIR
      writes broken copies of a float32 clip file (bad magic, version, reserved word, zero
      clips, truncated, trailing bytes, label, out-of-range and NaN values, encoding) for
      the check_error lines of dev/test/run_tests.sh.
"""
import os
import shutil
import struct
import subprocess
import sys

import numpy as np

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
CONVERTER = os.path.join(ROOT, "scripts", "clips_to_bin.py")
HEADER = 1024
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import checks  # noqa: E402
from checks import report  # noqa: E402


def run(*cmd):
    p = subprocess.run([str(c) for c in cmd], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    return p.returncode, p.stdout


def convert(*args):
    return run(sys.executable, CONVERTER, *args)


def read_header(path):
    h = struct.unpack("<256i", open(path, "rb").read(HEADER))
    return dict(magic=h[0], version=h[1], n=h[2], shape=tuple(h[3:7]), nc=h[7], enc=h[8], reserved=h[9:])


def dump(binary, path, work):
    """Every clip of the file through the C reader: [(label, float32 [C, Fr, Hi, Wi])]."""
    out = os.path.join(work, "dump.f32")
    rc, log = run(binary, "--dump", path, out)
    if rc != 0:
        raise RuntimeError("test_video_data --dump %s: exit %d: %s" % (path, rc, log.strip()[-300:]))
    h = read_header(path)
    n_values = int(np.prod(h["shape"]))
    raw = np.fromfile(out, dtype=np.uint8).reshape(h["n"], 4 + 4 * n_values)
    labels = raw[:, :4].copy().view("<i4")[:, 0]
    values = raw[:, 4:].copy().view("<f4").reshape((h["n"],) + h["shape"])
    return list(zip(labels.tolist(), values))


def read_list(path):
    return [(int(l.split()[1]), l.split(None, 2)[2].strip()) for l in open(path)]


def source_unit(path):
    """A demo .npy ([Fr, Hi, Wi, C]) as float64 [C, Fr, Hi, Wi] in [-1, 1], by the documented rules."""
    a = np.load(path)
    if a.dtype == np.uint8:
        x = a / 127.5 - 1.0
    elif a.min() >= -1.0 and a.max() <= 1.0:
        x = a.astype(np.float64)
    else:
        x = a / 127.5 - 1.0
    return np.transpose(x, (3, 0, 1, 2))


def as_byte(x):
    """The documented uint8 encoding: round((v + 1) * 127.5), half up."""
    return np.floor((x + 1.0) * 127.5 + 0.5).clip(0, 255).astype(np.uint8)


def from_byte(b):
    """What the reader gives back for a byte: byte/127.5 - 1, rounded once to float32."""
    return ((2.0 * b.astype(np.float64) - 255.0) / 255.0).astype(np.float32)


def area_resize(x, axis, n_out):
    """Exact area averaging along one axis, the slow obvious way: repeat every sample n_out
    times, then average blocks of n_in."""
    n_in = x.shape[axis]
    y = np.repeat(x, n_out, axis=axis)
    y = np.moveaxis(y, axis, -1)
    y = y.reshape(y.shape[:-1] + (n_out, n_in)).mean(-1)
    return np.moveaxis(y, -1, axis)


def check_readback(binary, work, demo):
    # uint8 (the default), shuffled with a list of which file each clip came from
    out, lst = os.path.join(work, "u8.bin"), os.path.join(work, "u8.list")
    rc, log = convert(demo, "--out", out, "--list", lst)
    report("convert_uint8", rc == 0, log.strip()[-300:])
    if rc != 0:
        return
    h = read_header(out)
    classes = sorted(os.listdir(demo))
    report("uint8_header", h["magic"] == 20261125 and h["version"] == 1 and h["n"] == 9 and h["shape"] == (3, 5, 12, 16)
           and h["nc"] == 3 and h["enc"] == 0 and not any(h["reserved"]), str(h))
    clips, listed = dump(binary, out, work), read_list(lst)
    ok, why = len(clips) == len(listed) == 9, "9 clips expected"
    for i, ((label, x), (list_label, path)) in enumerate(zip(clips, listed)):
        want_label = classes.index(os.path.basename(os.path.dirname(path)))
        want = from_byte(as_byte(source_unit(path)))
        if label != want_label or list_label != want_label:
            ok, why = False, "clip %d (%s): label %d, list says %d, its folder is class %d" % (i, path, label, list_label, want_label)
        elif not np.array_equal(x, want):
            ok, why = False, "clip %d (%s): %d values differ, max %g" % (i, path, (x != want).sum(), np.abs(x - want).max())
    report("uint8_reads_back_exactly", ok, why)
    report("shuffled_order_mixes_classes", [l for l, _ in listed] != sorted(l for l, _ in listed), "the file is in class order")
    # a uint8 source stays bit-exact: its bytes are the stored bytes
    raw = open(out, "rb").read()
    rec = 4 + 3 * 5 * 12 * 16
    ok = True
    for i, (_, path) in enumerate(listed):
        a = np.load(path)
        if a.dtype == np.uint8:
            ok &= raw[HEADER + i * rec + 4:HEADER + (i + 1) * rec] == np.transpose(a, (3, 0, 1, 2)).tobytes()
    report("uint8_source_bytes_kept", ok, "the stored bytes of a uint8 .npy differ from the array's")

    # float32: every value as float32 of the source
    out32, lst32 = os.path.join(work, "f32.bin"), os.path.join(work, "f32.list")
    rc, log = convert(demo, "--out", out32, "--list", lst32, "--encoding", "float32", "--seed", "3")
    ok, why = rc == 0, log.strip()[-300:]
    if ok:
        for i, ((label, x), (_, path)) in enumerate(zip(dump(binary, out32, work), read_list(lst32))):
            if not np.array_equal(x, source_unit(path).astype(np.float32)):
                ok, why = False, "clip %d (%s) differs" % (i, path)
    report("float32_reads_back_exactly", ok, why)

    # [C, Fr, Hi, Wi] arrays with --layout cfhw give the same file as [Fr, Hi, Wi, C]
    cf = os.path.join(work, "demo_cfhw")
    for cls in classes:
        os.makedirs(os.path.join(cf, cls), exist_ok=True)
        for f in os.listdir(os.path.join(demo, cls)):
            np.save(os.path.join(cf, cls, f), np.transpose(np.load(os.path.join(demo, cls, f)), (3, 0, 1, 2)))
    a, b = os.path.join(work, "fhwc.bin"), os.path.join(work, "cfhw.bin")
    rc1, log1 = convert(demo, "--out", a, "--no-shuffle")
    rc2, log2 = convert(cf, "--out", b, "--no-shuffle", "--layout", "cfhw")
    report("layout_cfhw", rc1 == 0 and rc2 == 0 and open(a, "rb").read() == open(b, "rb").read(),
           (log1 + log2).strip()[-300:] or "the two files differ")

    # frames, grey, crop and area resize, against the slow obvious computation
    out_s, lst_s = os.path.join(work, "small.bin"), os.path.join(work, "small.list")
    rc, log = convert(demo, "--out", out_s, "--list", lst_s, "--frames", "3", "--height", "8", "--width", "8",
                      "--channels", "1", "--encoding", "float32")
    ok, why = rc == 0, log.strip()[-300:]
    if ok:
        h = read_header(out_s)
        ok, why = h["shape"] == (1, 3, 8, 8), "shape %s, expected (1, 3, 8, 8)" % (h["shape"],)
    if ok:
        for i, ((label, x), (_, path)) in enumerate(zip(dump(binary, out_s, work), read_list(lst_s))):
            s = source_unit(path)[:, 1:4]                                # the middle 3 of 5 frames
            s = (0.299 * s[0] + 0.587 * s[1] + 0.114 * s[2])[None]      # grey
            s = s[:, :, :, 2:14]                                         # 12x16 -> the middle 12x12
            s = area_resize(area_resize(s, 2, 8), 3, 8)
            if np.abs(x - s).max() > 1e-6:
                ok, why = False, "clip %d (%s): off by %g" % (i, path, np.abs(x - s).max())
    report("frames_grey_crop_area_resize", ok, why)
    rc, log = convert(demo, "--out", os.path.join(work, "near.bin"), "--height", "6", "--width", "4", "--resize", "nearest",
                      "--channels", "3", "--no-shuffle", "--encoding", "float32")
    ok, why = rc == 0, log.strip()[-300:]
    if ok:
        x = dump(binary, os.path.join(work, "near.bin"), work)[0][1]
        s = source_unit(os.path.join(demo, classes[0], "clip_0.npy"))[:, :, :, 4:12]   # 12x16 -> the middle 12x8 (6:4)
        near = s[:, :, 1::2][:, :, :, 1::2].astype(np.float32)                         # the centre of every 2x2 block
        ok, why = np.array_equal(x, near), "nearest neighbour picks other pixels"
    report("nearest_resize", ok, why)

    # a GIF read without imageio (through PIL), grey frames kept exactly
    try:
        from PIL import Image
        gif_dir = os.path.join(work, "gifs")
        os.makedirs(os.path.join(gif_dir, "a"), exist_ok=True)
        frames = [(np.arange(6 * 7).reshape(6, 7) * 5 + 13 * f).astype(np.uint8) for f in range(4)]
        ims = [Image.fromarray(fr, "L") for fr in frames]
        ims[0].save(os.path.join(gif_dir, "a", "clip.gif"), save_all=True, append_images=ims[1:], duration=100, loop=0)
        out_g = os.path.join(work, "gif.bin")
        rc, log = convert(gif_dir, "--out", out_g, "--channels", "1")
        ok, why = rc == 0, log.strip()[-300:]
        if ok:
            x = dump(binary, out_g, work)[0][1]
            ok, why = np.array_equal(x, from_byte(np.stack(frames)[None])), "the GIF's frames differ"
        report("gif_input", ok, why)
    except ImportError:
        print("(PIL is missing: GIF input not checked)")


def check_errors(work, demo):
    """The converter's bad inputs: a clear message and a non-zero exit, never a traceback."""
    def expect_error(name, words, *args):
        rc, log = convert(*args)
        missing = [w for w in words if w.lower() not in log.lower()]
        report("convert_error_" + name, rc != 0 and not missing and "Traceback" not in log,
               "exit %d, missing %s: %s" % (rc, missing, log.strip()[-200:]))

    def folder(name, files):
        d = os.path.join(work, "bad_" + name)
        for rel, arr in files.items():
            os.makedirs(os.path.dirname(os.path.join(d, rel)), exist_ok=True)
            if isinstance(arr, bytes):
                open(os.path.join(d, rel), "wb").write(arr)
            else:
                np.save(os.path.join(d, rel), arr)
        os.makedirs(d, exist_ok=True)
        return d

    clip = np.zeros((4, 8, 8, 3), np.uint8)
    out = os.path.join(work, "never.bin")
    expect_error("no_class_folders", ["no class subfolders"], folder("empty", {}), "--out", out)
    expect_error("empty_class", ["no clips", "b"], folder("empty_class", {"a/x.npy": clip, "b/readme.txt": b"hi"}), "--out", out)
    expect_error("shapes_differ", ["shape", "--height"], folder("shapes", {"a/x.npy": clip, "b/y.npy": clip[:, :6]}), "--out", out)
    expect_error("unreadable", ["cannot read", "x.npy"], folder("unreadable", {"a/x.npy": b"not numpy at all"}), "--out", out)
    expect_error("too_few_frames", ["frames"], folder("frames", {"a/x.npy": clip}), "--out", out, "--frames", "9")
    expect_error("float_range", ["outside [-1, 1]"], folder("range", {"a/x.npy": np.full((4, 8, 8, 3), 1.5, np.float32)}),
                 "--out", out, "--float-range", "pm1")
    expect_error("nan", ["NaN"], folder("nan", {"a/x.npy": np.full((4, 8, 8, 3), np.nan, np.float32)}), "--out", out)
    expect_error("bad_ndim", ["shape"], folder("ndim", {"a/x.npy": np.zeros((8, 8), np.uint8)}), "--out", out)
    expect_error("channels", ["channels"], folder("ch", {"a/x.npy": np.zeros((4, 8, 8, 2), np.uint8)}), "--out", out, "--channels", "3")
    try:
        import imageio  # noqa: F401
    except ImportError:
        expect_error("video_without_imageio", ["imageio"], folder("video", {"a/x.mp4": b"\0" * 64}), "--out", out)
    report("no_partial_output", not os.path.exists(out) and not os.path.exists(out + ".tmp"), "a failed run left a file")


def make_bad(good, out_dir):
    """Broken copies of a float32 clip file with at least 2 clips."""
    os.makedirs(out_dir, exist_ok=True)
    data = bytearray(open(good, "rb").read())
    h = read_header(good)
    assert h["enc"] == 1 and h["n"] >= 2, "make_bad needs a float32 file with >= 2 clips"
    rec = 4 + 4 * int(np.prod(h["shape"]))

    def variant(name, edit):
        b = bytearray(data)
        b = edit(b) or b
        open(os.path.join(out_dir, name + ".bin"), "wb").write(b)

    def put(offset, fmt, value):
        return lambda b: struct.pack_into(fmt, b, offset, value)

    variant("magic", put(0, "<i", 20240520))
    variant("version", put(4, "<i", 2))
    variant("reserved", put(4 * 100, "<i", 7))
    variant("zero_clips", put(8, "<i", 0))
    variant("negative_width", put(4 * 6, "<i", -3))
    variant("encoding", put(4 * 8, "<i", 2))
    variant("truncated", lambda b: b[:-10])
    variant("trailing", lambda b: b + b"\0" * 4)
    variant("label", put(HEADER + rec, "<i", h["nc"]))            # clip 1's label = NC
    variant("negative_label", put(HEADER, "<i", -1))
    variant("value_range", put(HEADER + rec + 4 + 4 * 5, "<f", 1.5))
    variant("nan", put(HEADER + 4 + 4 * 3, "<f", float("nan")))
    print("wrote 12 broken clip files into %s" % out_dir)


def main():
    if len(sys.argv) == 4 and sys.argv[1] == "--make-bad":
        make_bad(sys.argv[2], sys.argv[3])
        return 0
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    binary, work = sys.argv[1], sys.argv[2]
    os.makedirs(work, exist_ok=True)
    demo = os.path.join(work, "demo")
    shutil.rmtree(demo, ignore_errors=True)
    rc, log = convert("--synthetic-demo", demo)
    n = sum(len(fs) for _, _, fs in os.walk(demo)) if rc == 0 else 0
    report("synthetic_demo", rc == 0 and n == 9, "exit %d, %d files: %s" % (rc, n, log.strip()[-200:]))
    if rc == 0:
        check_readback(binary, work, demo)
    check_errors(work, demo)
    return 1 if checks.failures else 0


if __name__ == "__main__":
    sys.exit(main())
