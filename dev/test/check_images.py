#!/usr/bin/env python3
"""Checks the GIFs and PNG strips of llmc/io/image_write.h with PIL, an independent decoder.

  ./build/test_video_data --images DIR && python3 dev/test/check_images.py DIR

DIR/manifest.txt has one line per case: NAME C Fr Hi Wi scale gap delay_cs, with the raw
clip in NAME.f32 ([C, Fr, Hi, Wi] float32) and the pictures in NAME.gif and NAME.png.
For each picture: the frame count, size, loop and delay, every pixel against the clip
(grey: within half a level of (v + 1) * 127.5; RGB GIF: the palette entry nearest to the
clip's levels, from the palette the header of llmc/io/image_write.h documents), and, for the
PNG, every chunk's CRC-32 and the zlib stream's Adler-32 checked by hand. Prints one line
PASS name / FAIL name: why per picture; exit status non-zero on any failure.
"""
import os
import struct
import sys
import zlib

import numpy as np
from PIL import Image

failures = 0


def report(name, problems):
    global failures
    if problems:
        failures += 1
        print("FAIL %s: %s" % (name, "; ".join(problems[:3])))
    else:
        print("PASS %s" % name)
    sys.stdout.flush()


def ideal_levels(x):
    """(v + 1) * 127.5 clamped to [0, 255], NaN as 0: the exact level before rounding."""
    x = x.astype(np.float64)
    x = np.where(np.isnan(x), -1.0, x)
    return np.clip((x + 1.0) * 127.5, 0.0, 255.0)


def rounded_levels(x):
    """The level the writer must store, as the header says: floor((v + 1) * 127.5 + 0.5)."""
    return np.floor(ideal_levels(x) + 0.5).astype(np.int64)


def palette(C):
    if C != 3:
        return np.array([[i, i, i] for i in range(256)], dtype=np.int64)
    cube = [[51 * r, 51 * g, 51 * b] for r in range(6) for g in range(6) for b in range(6)]
    greys = [[round(255 * (j + 1) / 41)] * 3 for j in range(40)]
    return np.array(cube + greys, dtype=np.int64)


def upscale(frame, scale):
    """[..., H, W] -> [..., H*scale, W*scale], nearest neighbour."""
    return np.repeat(np.repeat(frame, scale, axis=-2), scale, axis=-1)


def check_grey(pixels, clip_frame, scale, where):
    """pixels [H*s, W*s] integers against one channel of the clip [H, W]."""
    want = upscale(ideal_levels(clip_frame), scale)
    err = np.abs(pixels.astype(np.float64) - want)
    if pixels.shape != want.shape:
        return ["%s: %s pixels, expected %s" % (where, pixels.shape, want.shape)]
    if err.max() > 0.5 + 1e-3:
        y, x = np.unravel_index(np.argmax(err), err.shape)
        return ["%s: pixel (%d, %d) is %d, the clip's level is %.3f" % (where, y, x, pixels[y, x], want[y, x])]
    return []


def check_gif(path, clip, C, Fr, Hi, Wi, scale, delay):
    problems = []
    im = Image.open(path)
    if im.format != "GIF" or im.info.get("version") != b"GIF89a":
        return ["not a GIF89a: %s %s" % (im.format, im.info.get("version"))]
    if im.n_frames != Fr:
        problems.append("%d frames, expected %d" % (im.n_frames, Fr))
    if im.size != (Wi * scale, Hi * scale):
        problems.append("size %s, expected %s" % (im.size, (Wi * scale, Hi * scale)))
    if im.info.get("loop") != 0:
        problems.append("loop %s, expected 0 (forever)" % im.info.get("loop"))
    # the global colour table, read from the file (PIL turns a grey ramp into mode L)
    head = open(path, "rb").read(13 + 768)
    if head[10] != 0xF7:
        problems.append("screen descriptor flags 0x%02x, expected a 256-entry global table (0xf7)" % head[10])
    pal = np.frombuffer(head[13:], dtype=np.uint8).astype(np.int64).reshape(256, 3)
    if not np.array_equal(pal, palette(C)):
        problems.append("the global palette is not the documented one")
    if problems:
        return problems
    P = palette(C)
    for f in range(Fr):
        im.seek(f)
        if im.info.get("duration") != delay * 10:
            problems.append("frame %d: duration %s ms, expected %d" % (f, im.info.get("duration"), delay * 10))
        rgb = np.array(im.convert("RGB"), dtype=np.int64)
        if C != 3:
            if not (np.array_equal(rgb[..., 0], rgb[..., 1]) and np.array_equal(rgb[..., 0], rgb[..., 2])):
                problems.append("frame %d: not grey" % f)
            problems += check_grey(rgb[..., 0], clip[0, f], scale, "frame %d" % f)
            continue
        want = np.moveaxis(upscale(rounded_levels(clip[:, f]), scale), 0, -1)  # [H*s, W*s, 3]
        # the chosen entry must be a nearest palette entry to the pixel's levels
        got_d = ((rgb - want) ** 2).sum(-1)
        best_d = ((want[:, :, None, :] - P[None, None, :, :]) ** 2).sum(-1).min(-1)
        bad = got_d != best_d
        if bad.any():
            y, x = np.argwhere(bad)[0]
            problems.append("frame %d pixel (%d, %d): %s for levels %s, a nearer palette entry is %d away (squared) instead of %d"
                            % (f, y, x, rgb[y, x].tolist(), want[y, x].tolist(), best_d[y, x], got_d[y, x]))
        ideal = np.moveaxis(upscale(ideal_levels(clip[:, f]), scale), 0, -1)
        dist = np.sqrt(((rgb - ideal) ** 2).sum(-1)).max()
        if dist > 25.5 * 3 ** 0.5 + 0.5 * 3 ** 0.5 + 1e-6:
            problems.append("frame %d: a colour is %.1f levels from the clip's" % (f, dist))
    return problems


def png_chunks(path):
    """Every chunk with its CRC-32 checked; the IDAT bytes inflated (zlib checks Adler-32)."""
    data = open(path, "rb").read()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError("bad PNG signature")
    at, chunks = 8, []
    while at < len(data):
        n, kind = struct.unpack(">I4s", data[at:at + 8])
        body = data[at + 8:at + 8 + n]
        crc = struct.unpack(">I", data[at + 8 + n:at + 12 + n])[0]
        if zlib.crc32(kind + body) & 0xFFFFFFFF != crc:
            raise ValueError("chunk %s: CRC-32 mismatch" % kind)
        chunks.append((kind, body))
        at += 12 + n
    if [k for k, _ in chunks][0] != b"IHDR" or chunks[-1][0] != b"IEND":
        raise ValueError("chunks %s: IHDR first and IEND last expected" % [k for k, _ in chunks])
    raw = zlib.decompress(b"".join(b for k, b in chunks if k == b"IDAT"))  # raises on a bad Adler-32
    return chunks, raw


def check_png(path, clip, C, Fr, Hi, Wi, scale, gap):
    try:
        chunks, raw = png_chunks(path)
    except (ValueError, zlib.error, struct.error) as e:
        return [str(e)]
    ch = 3 if C == 3 else 1
    W, H = Fr * Wi * scale + (Fr - 1) * gap, Hi * scale
    if len(raw) != H * (1 + W * ch):
        return ["%d bytes of image data, expected %d" % (len(raw), H * (1 + W * ch))]
    im = Image.open(path)
    if im.size != (W, H) or im.mode != ("RGB" if ch == 3 else "L"):
        return ["%s %s, expected %s %s" % (im.mode, im.size, "RGB" if ch == 3 else "L", (W, H))]
    px = np.array(im, dtype=np.int64).reshape(H, W, ch)
    problems = []
    for f in range(Fr):
        x0 = f * (Wi * scale + gap)
        for c in range(ch):
            problems += check_grey(px[:, x0:x0 + Wi * scale, c], clip[c, f], scale, "frame %d channel %d" % (f, c))
        if f + 1 < Fr and not (px[:, x0 + Wi * scale:x0 + Wi * scale + gap] == 255).all():
            problems.append("the gap after frame %d is not white" % f)
    return problems


def guarded(check, path, *args):
    """A file PIL cannot decode is a failed check, not a crash of the checker."""
    try:
        return check(path, *args)
    except Exception as e:  # PIL raises OSError, SyntaxError, ValueError... on broken files
        return ["%s: %s: %s" % (os.path.basename(path), type(e).__name__, e)]


def main():
    d = sys.argv[1]
    cases = [l.split() for l in open(os.path.join(d, "manifest.txt")) if l.strip()]
    if not cases:
        print("FAIL manifest: no cases")
        return 1
    for name, *dims in cases:
        C, Fr, Hi, Wi, scale, gap, delay = map(int, dims)
        clip = np.fromfile(os.path.join(d, name + ".f32"), dtype=np.float32).reshape(C, Fr, Hi, Wi)
        left = [f for f in (name + ".gif.tmp", name + ".png.tmp") if os.path.exists(os.path.join(d, f))]
        report("gif_" + name, guarded(check_gif, os.path.join(d, name + ".gif"), clip, C, Fr, Hi, Wi, scale, delay)
               + ["%s left behind" % f for f in left])
        report("png_" + name, guarded(check_png, os.path.join(d, name + ".png"), clip, C, Fr, Hi, Wi, scale, gap))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
