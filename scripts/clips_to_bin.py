#!/usr/bin/env python3
"""Converts a folder of clips into the clip file of docs/formats.md, which train_dit reads.

    python3 scripts/clips_to_bin.py IN_DIR --out clips.bin [--frames F --height H --width W]
        [--channels 1|3] [--encoding uint8|float32] [--layout fhwc|cfhw] [--resize area|nearest]
    python3 scripts/clips_to_bin.py --synthetic-demo DIR     # a few tiny .npy clips to try it on

IN_DIR holds one subfolder per class; the class of a clip is the index of its subfolder
in sorted order (num_classes = number of subfolders). A subfolder holds
  - .npy arrays: [Fr, Hi, Wi, C] (or [Fr, Hi, Wi], grey), or [C, Fr, Hi, Wi] with
    --layout cfhw; uint8 (0..255), or float in [-1, 1] or in [0, 255] (--float-range:
    auto picks [-1, 1] when every value is in it, else [0, 255]);
  - videos (.mp4 .avi .mov .mkv .webm .gif) when imageio can be imported (.mp4 needs
    imageio-ffmpeg too); .gif also through PIL without imageio.
Other files are skipped with a note.

Each clip, in this order (numpy only):
  frames   every --frame-step'th frame; with --frames F, the F frames in the middle (a clip
           with fewer frames is an error);
  channels RGBA loses alpha; --channels 1 makes grey of RGB (0.299 R + 0.587 G + 0.114 B),
           --channels 3 repeats grey three times;
  space    with --height/--width (either one alone keeps the other side), the centred
           crop of the target's aspect ratio, resized by exact area averaging (--resize
           area) or nearest neighbour;
  values   to [-1, 1], stored as uint8 round((v + 1) * 127.5) (half up; the reader gives
           back byte/127.5 - 1) or as float32.
Without resizing options every clip must already have the same shape. The clips are
written in a shuffled order (--seed; --no-shuffle keeps class, then file name order), so
that the file's last clips, which train_dit holds out for validation, mix the classes.
--list FILE writes "index label path" for every clip of the output.

The output is written to OUT.tmp and renamed, so a failed run leaves no half file.
"""
import argparse
import os
import struct
import sys

import numpy as np

MAGIC, VERSION, HEADER_INTS = 20261125, 1, 256
ENCODINGS = {"uint8": 0, "float32": 1}
VIDEO_EXT = (".mp4", ".avi", ".mov", ".mkv", ".webm", ".gif")


class ClipError(Exception):
    pass


# ----------------------------------------------------------------------------
# reading

def to_unit_range(a, path, float_range):
    """Any accepted array -> float64 in [-1, 1]."""
    if a.dtype == np.uint8:
        return (2.0 * a.astype(np.float64) - 255.0) / 255.0
    if a.dtype.kind in "iu":
        if a.size and (a.min() < 0 or a.max() > 255):
            raise ClipError("%s: integer values in [%d, %d]; integers must be in [0, 255]" % (path, a.min(), a.max()))
        return (2.0 * a.astype(np.float64) - 255.0) / 255.0
    if a.dtype.kind != "f":
        raise ClipError("%s: dtype %s; expected uint8 or float" % (path, a.dtype))
    a = a.astype(np.float64)
    if not np.isfinite(a).all():
        raise ClipError("%s: has NaN or infinite values" % path)
    lo, hi = (a.min(), a.max()) if a.size else (0.0, 0.0)
    if float_range == "auto":
        float_range = "pm1" if lo >= -1.0 and hi <= 1.0 else "255"
    if float_range == "pm1":
        if lo < -1.0 or hi > 1.0:
            raise ClipError("%s: float values in [%g, %g], outside [-1, 1] (--float-range pm1)" % (path, lo, hi))
        return a
    if lo < 0.0 or hi > 255.0:
        raise ClipError("%s: float values in [%g, %g], neither in [-1, 1] nor in [0, 255]" % (path, lo, hi))
    return a / 127.5 - 1.0


def read_npy(path, layout, float_range):
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:
        raise ClipError("%s: cannot read as .npy: %s" % (path, e))
    if a.ndim == 3 and layout == "fhwc":
        a = a[..., None]
    if a.ndim != 4:
        raise ClipError("%s: shape %s; expected [Fr, Hi, Wi, C] or [Fr, Hi, Wi] (--layout fhwc) or [C, Fr, Hi, Wi] "
                        "(--layout cfhw)" % (path, a.shape))
    if layout == "fhwc":
        a = np.transpose(a, (3, 0, 1, 2))
    return to_unit_range(a, path, float_range)  # [C, Fr, Hi, Wi]


def read_video(path):
    """[C, Fr, Hi, Wi] in [-1, 1] from a video file, through imageio or (GIF) PIL."""
    frames = None
    try:
        import imageio
    except ImportError:
        imageio = None
    try:
        if imageio is not None:
            frames = [np.asarray(f) for f in imageio.mimread(path, memtest=False)]
        elif path.lower().endswith(".gif"):
            from PIL import Image, ImageSequence
            with Image.open(path) as im:
                frames = [np.asarray(f.convert("RGB")) for f in ImageSequence.Iterator(im)]
        else:
            raise ClipError("%s: reading videos needs imageio (pip install imageio imageio-ffmpeg), which is not "
                            "installed; or convert the clips to .npy" % path)
    except ClipError:
        raise
    except Exception as e:
        raise ClipError("%s: cannot read the video: %s" % (path, e))
    if not frames:
        raise ClipError("%s: no frames" % path)
    if len({f.shape for f in frames}) != 1:
        raise ClipError("%s: frames of different sizes %s" % (path, sorted({f.shape for f in frames})))
    a = np.stack(frames)
    if a.ndim == 3:
        a = a[..., None]
    return to_unit_range(np.transpose(a, (3, 0, 1, 2)), path, "auto")


# ----------------------------------------------------------------------------
# shaping

def resize_matrix(n_in, n_out, mode):
    """[n_out, n_in] weights: exact area averaging, or nearest neighbour."""
    m = np.zeros((n_out, n_in))
    s = n_in / n_out
    if mode == "nearest":
        m[np.arange(n_out), np.minimum((np.arange(n_out) * s + s / 2).astype(int), n_in - 1)] = 1.0
        return m
    for i in range(n_out):
        lo, hi = i * s, (i + 1) * s
        for j in range(int(np.floor(lo)), min(n_in, int(np.ceil(hi)))):
            m[i, j] = (min(hi, j + 1) - max(lo, j)) / s
    return m


def centre_crop(x, H, W):
    """Crops [C, F, h, w] to the aspect ratio H:W, keeping the middle."""
    h, w = x.shape[2:]
    if h * W > w * H:  # too tall
        nh = max(1, round(w * H / W))
        t = (h - nh) // 2
        return x[:, :, t:t + nh]
    nw = max(1, round(h * W / H))
    l = (w - nw) // 2
    return x[:, :, :, l:l + nw]


def shape_clip(x, path, args):
    """[C, F, h, w] in [-1, 1] -> the requested frames, channels and size."""
    x = x[:, ::args.frame_step]
    if args.frames:
        if x.shape[1] < args.frames:
            raise ClipError("%s: %d frames (after --frame-step %d); --frames %d needs at least that many"
                            % (path, x.shape[1], args.frame_step, args.frames))
        t = (x.shape[1] - args.frames) // 2
        x = x[:, t:t + args.frames]
    if x.shape[0] == 4:
        x = x[:3]  # RGBA: the alpha channel is not part of the picture
    if args.channels == 1 and x.shape[0] == 3:
        x = (0.299 * x[0] + 0.587 * x[1] + 0.114 * x[2])[None]
    elif args.channels == 3 and x.shape[0] == 1:
        x = np.repeat(x, 3, axis=0)
    elif args.channels and x.shape[0] != args.channels:
        raise ClipError("%s: %d channels; --channels %d converts only between 1 and 3" % (path, x.shape[0], args.channels))
    if args.height or args.width:
        H, W = args.height or x.shape[2], args.width or x.shape[3]
        x = centre_crop(x, H, W)
        my = resize_matrix(x.shape[2], H, args.resize)
        mx = resize_matrix(x.shape[3], W, args.resize)
        x = np.einsum("yh,cfhw,xw->cfyx", my, x, mx)
    return np.clip(x, -1.0, 1.0)


def encode(x, encoding):
    if encoding == "uint8":
        return np.floor((x + 1.0) * 127.5 + 0.5).clip(0, 255).astype(np.uint8).tobytes()
    return x.astype("<f4").tobytes()


# ----------------------------------------------------------------------------
# the folder

def list_clips(in_dir):
    """[(label, path)] in class, then name order, and the class names."""
    if not os.path.isdir(in_dir):
        raise ClipError("%s: not a folder" % in_dir)
    classes = sorted(d for d in os.listdir(in_dir) if os.path.isdir(os.path.join(in_dir, d)) and not d.startswith("."))
    if not classes:
        raise ClipError("%s: no class subfolders; expected one subfolder per class (class = index in sorted order), "
                        "each holding .npy clips or videos" % in_dir)
    clips = []
    for label, name in enumerate(classes):
        folder = os.path.join(in_dir, name)
        found = []
        for f in sorted(os.listdir(folder)):
            p = os.path.join(folder, f)
            if f.startswith(".") or not os.path.isfile(p):
                continue
            if f.lower().endswith(".npy") or f.lower().endswith(VIDEO_EXT):
                found.append(p)
            else:
                print("clips_to_bin: skipping %s (not .npy or a video)" % p, file=sys.stderr)
        if not found:
            raise ClipError("%s: no clips (.npy or videos) in class folder '%s'" % (folder, name))
        clips += [(label, p) for p in found]
    return clips, classes


def convert(args):
    clips, classes = list_clips(args.in_dir)
    if not args.no_shuffle:
        order = np.random.RandomState(args.seed).permutation(len(clips))
        clips = [clips[i] for i in order]
    tmp = args.out + ".tmp"
    shape, first = None, None
    try:
        with open(tmp, "wb") as f:
            f.write(b"\0" * (4 * HEADER_INTS))  # the header, once the shape is known
            for label, path in clips:
                x = read_npy(path, args.layout, args.float_range) if path.lower().endswith(".npy") else read_video(path)
                x = shape_clip(x, path, args)
                if shape is None:
                    shape, first = x.shape, path
                elif x.shape != shape:
                    raise ClipError("%s: shape [C, Fr, Hi, Wi] = %s after conversion, but %s has %s; give --frames, "
                                    "--height, --width and --channels to bring every clip to one shape"
                                    % (path, list(x.shape), first, list(shape)))
                f.write(struct.pack("<i", label))
                f.write(encode(x, args.encoding))
            if any(d >= 2 ** 31 for d in shape) or int(np.prod(shape)) >= 2 ** 31:
                raise ClipError("a clip of %s values is too large for the format" % list(shape))
            header = [MAGIC, VERSION, len(clips)] + list(shape) + [len(classes), ENCODINGS[args.encoding]]
            f.seek(0)
            f.write(struct.pack("<%di" % HEADER_INTS, *(header + [0] * (HEADER_INTS - len(header)))))
        os.replace(tmp, args.out)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise
    if args.list:
        with open(args.list, "w") as f:
            for i, (label, path) in enumerate(clips):
                f.write("%d %d %s\n" % (i, label, path))
    C, Fr, Hi, Wi = shape
    counts = np.bincount([l for l, _ in clips], minlength=len(classes))
    print("clips_to_bin: %d clips of C=%d Fr=%d Hi=%d Wi=%d (%s), %d classes -> %s" % (
        len(clips), C, Fr, Hi, Wi, args.encoding, len(classes), args.out))
    for i, name in enumerate(classes):
        print("  class %d  %-20s %d clips" % (i, name, counts[i]))


# ----------------------------------------------------------------------------
# a demo folder

def synthetic_demo(out_dir):
    """Three classes of tiny clips [Fr=5, Hi=12, Wi=16, C=3], each class in another dtype
    (uint8; float32 in [-1, 1]; float64 in [0, 255]), so every reading path is used."""
    rng = np.random.RandomState(0)
    Fr, Hi, Wi = 5, 12, 16
    yy, xx = np.mgrid[0:Hi, 0:Wi]
    for label, name in enumerate(["bar", "dot", "ring"]):
        os.makedirs(os.path.join(out_dir, name), exist_ok=True)
        for k in range(3):
            clip = np.zeros((Fr, Hi, Wi, 3))
            colour = rng.uniform(0.4, 1.0, size=3)
            for f in range(Fr):
                cy, cx = 3 + (f + k) % (Hi - 6), 3 + (2 * f + k) % (Wi - 6)
                r = np.hypot(yy - cy, xx - cx)
                mask = [np.abs(xx - cx) <= 1, r <= 2.5, np.abs(r - 2.5) <= 0.8][label]
                clip[f] = mask[..., None] * colour + rng.uniform(0, 0.1, size=(Hi, Wi, 3))
            clip = clip.clip(0, 1)
            if label == 0:
                arr = np.round(clip * 255).astype(np.uint8)
            elif label == 1:
                arr = (clip * 2 - 1).astype(np.float32)
            else:
                arr = clip * 255.0
            np.save(os.path.join(out_dir, name, "clip_%d.npy" % k), arr)
    print("clips_to_bin: wrote 9 demo clips [Fr=%d, Hi=%d, Wi=%d, C=3] in 3 class folders under %s" % (Fr, Hi, Wi, out_dir))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("in_dir", nargs="?", help="one subfolder per class")
    ap.add_argument("--out", help="the clip file to write")
    ap.add_argument("--frames", type=int, default=0)
    ap.add_argument("--frame-step", type=int, default=1)
    ap.add_argument("--height", type=int, default=0)
    ap.add_argument("--width", type=int, default=0)
    ap.add_argument("--channels", type=int, default=0, choices=[0, 1, 3], help="0: keep")
    ap.add_argument("--encoding", choices=sorted(ENCODINGS), default="uint8")
    ap.add_argument("--layout", choices=["fhwc", "cfhw"], default="fhwc", help="axis order of the .npy arrays")
    ap.add_argument("--float-range", choices=["auto", "pm1", "255"], default="auto")
    ap.add_argument("--resize", choices=["area", "nearest"], default="area")
    ap.add_argument("--seed", type=int, default=0, help="seed of the clip order in the file")
    ap.add_argument("--no-shuffle", action="store_true")
    ap.add_argument("--list", help="write 'index label path' per output clip")
    ap.add_argument("--synthetic-demo", metavar="DIR", help="write demo .npy clips into DIR and exit")
    args = ap.parse_args()
    try:
        if args.synthetic_demo:
            synthetic_demo(args.synthetic_demo)
            return 0
        if not args.in_dir or not args.out:
            ap.error("IN_DIR and --out are needed (or --synthetic-demo DIR)")
        for name in ("frames", "height", "width"):
            if getattr(args, name) < 0:
                ap.error("--%s must be >= 1" % name)
        if args.frame_step < 1:
            ap.error("--frame-step must be >= 1")
        convert(args)
    except ClipError as e:
        print("clips_to_bin: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
