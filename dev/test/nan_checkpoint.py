#!/usr/bin/env python3
"""Writes a copy of a checkpoint (llmc/io/checkpoint.h) with one parameter set to NaN and a
checksum that holds, so that only the reader's finite check can refuse it.

    python3 dev/test/nan_checkpoint.py IN OUT [ARRAY FRACTION...]

Blocks (docs/formats.md): the 1024-byte header; the parameters, AdamW m and v (three equal
fp32 arrays); for train_llama then the dataloader state (header word 15 bytes); then the
8-byte checksum. Each block is hashed on its own (64-bit little-endian words, the tail
padded with zeros, h = (h ^ w) * 0x100000001b3 from 0xcbf29ce484222325). The first
parameter (the first float after the header) becomes NaN; with ARRAY (params, m or v) and
fractions of the array instead the elements there, int(FRACTION * n) each, and the index
of the first of them is printed (the reader must name it, whichever rank reads it).
"""
import struct
import sys

MASK = (1 << 64) - 1


def fold(h, data):
    data = data + b"\0" * (-len(data) % 8)
    for (w,) in struct.iter_unpack("<Q", data):
        h = ((h ^ w) * 0x100000001B3) & MASK
    return h


def main():
    src, dst = sys.argv[1], sys.argv[2]
    raw = bytearray(open(src, "rb").read())
    body = raw[1024:-8]
    magic, loader_bytes = struct.unpack("<i", raw[0:4])[0], struct.unpack("<i", raw[60:64])[0]
    extra = loader_bytes if magic == 20261123 else 0  # train_llama's checkpoint ends with the loader state
    arrays = len(body) - extra
    assert arrays % 12 == 0, "not three equal fp32 arrays"
    n = arrays // 12
    array = ["params", "m", "v"].index(sys.argv[3]) if len(sys.argv) > 3 else 0
    at = [int(float(f) * n) for f in sys.argv[4:]] or [0]
    for i in at:
        o = 1024 + 4 * (array * n + i)
        raw[o:o + 4] = struct.pack("<f", float("nan"))
    if len(sys.argv) > 3:
        print(min(at))
    h = 0xCBF29CE484222325
    h = fold(h, bytes(raw[:1024]))
    at = 1024
    for size in [4 * n] * 3 + ([extra] if extra else []):
        h = fold(h, bytes(raw[at:at + size]))
        at += size
    raw[-8:] = struct.pack("<Q", h)
    open(dst, "wb").write(raw)


if __name__ == "__main__":
    main()
