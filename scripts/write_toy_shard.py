#!/usr/bin/env python3
"""A synthetic token shard for tests that need no prepared data.

    python3 scripts/write_toy_shard.py PATH N SEED MAX_ID

Writes BOS (1) then N token ids drawn uniformly from [2, MAX_ID) with random.Random(SEED),
in the uint16 shard format of docs/formats.md (header: magic 20240520, version 1, count).
Used by make test, scripts/check_resume.sh and dev/emu/run_trainer.sh.
"""
import random
import struct
import sys

if len(sys.argv) != 5:
    sys.exit("usage: write_toy_shard.py PATH N SEED MAX_ID")
path, n, seed, max_id = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
if not 2 < max_id <= 65536:
    sys.exit("write_toy_shard: MAX_ID must be in (2, 65536], got %d" % max_id)
r = random.Random(seed)
toks = [1] + [r.randrange(2, max_id) for _ in range(n)]
with open(path, "wb") as f:
    f.write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)))
    f.write(struct.pack("<%dH" % len(toks), *toks))
