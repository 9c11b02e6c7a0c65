#!/usr/bin/env python3
"""A synthetic token shard for tests and benchmarks that need no prepared data.

    python3 dev/test/write_toy_shard.py PATH N SEED MAX_ID

Writes BOS (1) then N token ids drawn uniformly from [2, MAX_ID) with random.Random(SEED),
in the shard format of docs/formats.md: uint16 tokens (magic 20240520, version 1) when
MAX_ID <= 65536, else uint32 tokens (magic 20240801, version 7: llama3's 128,256 ids).
Used by make test, dev/test/check_resume.sh, dev/emu/run_trainer.sh and scripts/gpu_check.sh
(whose benchmarks read the same file in train_llama and in PyTorch).
"""
import array
import random
import struct
import sys

if len(sys.argv) != 5:
    sys.exit("usage: write_toy_shard.py PATH N SEED MAX_ID")
path, n, seed, max_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if not 2 < max_id <= 2**31:
    sys.exit("write_toy_shard: MAX_ID must be in (2, 2^31], got %d" % max_id)
if n < 1:
    sys.exit("write_toy_shard: N must be at least 1, got %d" % n)
r = random.Random(seed)
toks = [1] + [r.randrange(2, max_id) for _ in range(n)]
wide = max_id > 65536
magic, version = (20240801, 7) if wide else (20240520, 1)
body = array.array("I" if wide else "H", toks)
if sys.byteorder != "little":
    body.byteswap()
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *([magic, version, len(toks)] + [0] * 253)))
    f.write(body.tobytes())
