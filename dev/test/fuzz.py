#!/usr/bin/env python3
"""Fuzz stage of make test: malformed inputs must end with a clear message, never a crash.

    python3 dev/test/fuzz.py [--seed S] [--cases N] [--only KIND[,KIND]] [--case NAME]...
                             [--bin-dir DIR] [--jobs J] [--timeout S] [--mem-gib G]
                             [--keep DIR] [--report FILE] [--list] [-v]

Generates malformed inputs from valid ones, runs each against the CPU programs and
judges the outcome. Standard library only. Kinds (--only):

  llama_ckpt        train_llama checkpoints (--resume FILE, --init-from FILE, --resume auto)
  dit_ckpt          train_dit checkpoints (the same three ways)
  shard             token shards for train_llama (--train-data, --val-data)
  clips             clip files for train_dit (--data)
  lref              LREF reference files for test_llama (--ref)
  dref              DREF reference files for test_dit (--ref)
  llama_flags       every flag of train_llama (its --help)
  dit_flags         every flag of train_dit (its --help)
  test_llama_flags  every flag of test_llama (its argument parser)
  test_dit_flags    every flag of test_dit (its --help)
  rundir            run-directory states (llmc/train/run_open.h): another run there, another trainer's,
                    seed or data; checkpoints that cannot be read (a directory, a FIFO, another
                    trainer's); symbolic links where the run's files go; paths of 1,095 to 5,000
                    characters; 4,200 checkpoints; a second run at once; lock records left behind
                    (and the no-flock path); --start-over, --keep-last, --resume FILE, a full disk
                    (a fixed list, run in full by every --cases N: it is never sampled)
  inputs            files that are not files: a FIFO for every input flag of the four programs,
                    a FIFO without a reader and /dev/full for every output flag, control bytes
                    in file names and tokenizer pieces (a short fixed list, run in full by
                    every --cases N: it is never sampled)
  signals           stop signals mid-run, a second signal, a closed stdout (llmc/core/signals.h);
                    a fixed list run in full whatever --cases, judged by its own rules (below)

Inputs. Nothing is committed but dev/test/fuzz_corpus/regressions.txt: the valid inputs are
made at start-up in a temporary directory, the same bytes whatever --seed: a token shard
(4001 ids below 256), a uint8 and a float32 clip file (6 clips 1x2x8x8, 2 classes), a run
directory of each trainer from a 2-step tiny run with a checkpoint at steps 1 and 2, and
the smallest committed references (dev/ref/mha_tied_odd.lref, dev/ref/dit_h4_hd4_hparams.dref).
Every start-up run must succeed, or the harness stops (exit 2): a broken base would make
every case meaningless.

Cases. Each kind has a systematic list with stable names (every header word of a file
against a set of values, truncations, appended bytes, payload values, sizes that agree
with a lying header, a header whose implied size wraps in 64 bits to the file's; every
flag against -1, 0, 1, 2^31-1, a huge-but-divisible number, out-of-int numbers, 1e38,
3.5e38, 1e308, nan, inf, garbage, an empty string, a 4096-character string and a missing
value at the end of the command line; every integer flag again in a --plan-only run; the
products the trainers form of several flags (batch x seq x dp, batch x dp x grad-accum)
at 2^31 and 2^32) and --seed adds random ones (random header words and values, random
truncations, random bit flips in the payload, random pairs of flag values). A
checkpoint mutation recomputes the checksum (llmc/io/checkpoint.h: per block, 64-bit
little-endian words folded as h = (h ^ w) * 0x100000001b3 from 0xcbf29ce484222325), so
that the check under test is the one after the checksum; a few keep the stale checksum.
Every case names what it expects:

  error   the input is invalid: exit 1..123 with a message, before training begins
  ok      the mutation is a valid input (a float that stays finite, an informational
          header word, a valid flag value): exit 0
  either  either one is right (an informational field of a checkpoint, a payload value
          that may or may not blow up training, a --plan-only of absurd sizes, a flag
          whose range is a matter of taste), but no crash, no hang, and an error has a
          clear message

The flags' valid ranges are llmc/core/flags.h's FLAG_BOUNDS, read from the source (the one
table the four programs check against): a value outside its row must be an error. Inside
it, the tables LLAMA_FLAGS, DIT_FLAGS, LOOP_FLAGS, TEST_LLAMA_FLAGS and TEST_DIT_FLAGS
below say more (sizes the small test models need to divide, values that run for hours). Valid flag values that would run for hours (--steps 2147483647) are
listed but not run.

Pass, for every case: no timeout (--timeout, 20 s), no signal, exit code <= 123 (the
process runs with OMP_NUM_THREADS=1, an address-space limit of --mem-gib GiB and a 512 MiB
file-size limit), no raw control byte in its output (C0 but newline and tab, DEL, C1: what the
programs print is escaped, llmc/core/term.h). When it exits non-zero: a message (a line with "error", "FAIL", "cannot",
"must", ...) that mentions the problem: the flag's name, the input file's name or the
header field (for inputs too large for memory, "memory" or "at most" do); a run that
stops once training began (a NaN: "error: step N: ...") is judged by its message alone. A
case that expects an error fails on exit 0, and when the program refuses it only after
training began (found out by a NaN rather than by a check).

Run directories. Every trainer case runs with --run-dir a copy of a run directory that
already holds checkpoints (ckpt_000001.bin, ckpt_000002.bin, main.log, metrics.jsonl,
run.json); a case that does not resume gets --start-over 1 (a fresh run is refused in a
directory that holds another run, llmc/train/run_open.h; with the flag that run's files
move to set_aside/N/ once the inputs are accepted).
When the run fails before its first training step, every file in it must be
byte-identical afterwards and no file may be added: an input that is refused must not cost
the earlier run its logs, appended lines included (docs/formats.md has --resume append to
the logs, but a refused --resume is not a resumed run; this is the strict reading of
"nothing written into a run directory that already held checkpoints"). When the run fails
after training began, its log lines may stay but the existing checkpoints must be
byte-identical and no .tmp may be left. A run that succeeds may write what it likes.

Signals (kind signals, every case every time: FULL_KINDS). Each trainer on a long run (--ckpt-every
0), sent SIGTERM, SIGINT, SIGHUP or SIGUSR1 once its output has a step line, must exit 75 with
the line "stopped by SIG...: checkpoint ... written; --resume auto ..." and that checkpoint on
disk; SIGTERM then SIGINT at once must exit 1 with the second signal's message; stdout a closed
pipe must exit 0 with main.log whole and saying once that stdout is gone. No .tmp may be left.

Sampling. --cases N (default 800) runs N cases drawn with --seed, the same share from
every kind, plus every case named in dev/test/fuzz_corpus/regressions.txt (one case per
root cause found so far, and guards for checks that hold); --cases 0 runs all of them
(make test-full: about 5300 cases, 2 minutes on 2 cores). --case NAME (repeatable; shell globs) runs the named ones:
with --keep DIR the case's files stay in DIR/cases/NAME and its command line is printed,
so a failure reproduces with

    python3 dev/test/fuzz.py --seed S --case 'NAME' --keep /tmp/fuzz_repro

Output: per failure what went wrong, the input, its command line, the fuzz.py line that
reproduces it and the first lines of its message; then the failures counted by problem,
then "fuzz: N cases, F failures" (exit 1 when F > 0, 2 when the harness itself cannot
start). --report FILE writes every result as a JSON line.
"""
import argparse
import concurrent.futures
import fnmatch
import hashlib
import json
import math
import os
import random
import re
import shlex
import shutil
import signal
import stat
import struct
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", ".."))
KINDS = ["llama_ckpt", "dit_ckpt", "shard", "clips", "lref", "dref", "llama_flags", "dit_flags", "test_llama_flags",
         "test_dit_flags", "rundir", "inputs"]
PROGS = {"train_llama": "train_llama_cpu", "train_dit": "train_dit_cpu", "test_llama": "test_llama_cpu",
         "test_dit": "test_dit_cpu"}

I32_MAX, I32_MIN = 2147483647, -2147483648
STEPS_MAX = 1 << 30  # llmc/core/flags.h FLAG_STEPS_MAX: the largest --steps, and the largest step a checkpoint may hold
LLAMA_CKPT_MAGIC, DIT_CKPT_MAGIC = 20261123, 20261126
LREF_MAGIC, DREF_MAGIC, CLIP_MAGIC = 20261121, 20261124, 20261125
SHARD_MAGIC16, SHARD_MAGIC32 = 20240520, 20240801

# the tiny models every case runs (fast: a step is under a millisecond)
LLAMA_MODEL = ["--model", "tiny", "--V", "256", "--D", "32", "--L", "2", "--H", "2", "--KV", "1", "--F", "64",
               "--max-seq-len", "16", "--batch", "2", "--seq", "16", "--warmup", "1"]
DIT_MODEL = ["--D", "16", "--L", "2", "--H", "2", "--FF", "32", "--channels", "1", "--frames", "2", "--height", "8",
             "--width", "8", "--NC", "2", "--batch", "2", "--warmup", "1", "--val-clips", "2"]
CLIP_SHAPE = (1, 2, 8, 8)  # C Fr Hi Wi of the clip files, the DiT model's clip
CLIP_CLASSES, CLIP_COUNT = 2, 6
SHARD_TOKENS = 4000        # plus the BOS
LREF_FILE, DREF_FILE = "dev/ref/mha_tied_odd.lref", "dev/ref/dit_h4_hd4_hparams.dref"

# ----------------------------------------------------------------------------
# bytes


def i32(b, w):
    return struct.unpack_from("<i", b, 4 * w)[0]


def put_i32(b, w, v):
    b = bytearray(b)
    struct.pack_into("<I", b, 4 * w, v & 0xFFFFFFFF)
    return bytes(b)


def put_f32(b, off, v):
    b = bytearray(b)
    struct.pack_into("<f", b, off, v)
    return bytes(b)


def put_u32_bits(b, off, bits):
    b = bytearray(b)
    struct.pack_into("<I", b, off, bits & 0xFFFFFFFF)
    return bytes(b)


def f32_at(b, off):
    return struct.unpack_from("<f", b, off)[0]


MASK64 = (1 << 64) - 1


def ckpt_fold(h, data):
    """llmc/io/checkpoint.h's ckpt_hash: 64-bit little-endian words, the tail zero-padded."""
    data = bytes(data) + b"\0" * (-len(data) % 8)
    for (w,) in struct.iter_unpack("<Q", data):
        h = ((h ^ w) * 0x100000001B3) & MASK64
    return h


def ckpt_checksum(header, blocks):
    h = ckpt_fold(0xCBF29CE484222325, header)
    for b in blocks:
        h = ckpt_fold(h, b)
    return h


class Ckpt:
    """A checkpoint split into its header, blocks and checksum (docs/formats.md)."""

    def __init__(self, raw, llama):
        self.llama = llama
        self.header = raw[:1024]
        h = struct.unpack("<256i", self.header)
        if llama:
            n = h[18] | (h[19] << 31)
            ds = h[15]
        else:
            n = h[15] | (h[16] << 31)
            ds = 0
        self.n, self.ds = n, ds
        at = 1024
        self.blocks = []
        for size in [4 * n] * 3 + ([ds] if llama else []):
            self.blocks.append(raw[at:at + size])
            at += size
        assert at + 8 == len(raw), "checkpoint layout: %d + 8 != %d" % (at, len(raw))

    def build(self, header=None, blocks=None, checksum="recompute"):
        header = self.header if header is None else header
        blocks = self.blocks if blocks is None else blocks
        body = header + b"".join(blocks)
        if checksum == "recompute":
            return body + struct.pack("<Q", ckpt_checksum(header, blocks))
        return body + struct.pack("<Q", ckpt_checksum(self.header, self.blocks))  # the original file's: stale

    def with_word(self, w, v, checksum="recompute"):
        return self.build(header=put_i32(self.header, w, v), checksum=checksum)

    def with_float_word(self, w, v):
        return self.build(header=put_f32(self.header, 4 * w, v))

    def with_block_f32(self, k, index, value=None, bits=None):
        blocks = list(self.blocks)
        blocks[k] = put_f32(blocks[k], 4 * index, value) if bits is None else put_u32_bits(blocks[k], 4 * index, bits)
        return self.build(blocks=blocks)


def f32_bits_finite(bits):
    return (bits >> 23) & 0xFF != 0xFF


# ----------------------------------------------------------------------------
# cases


@dataclass
class Case:
    kind: str
    name: str            # stable within a --seed; systematic cases: whatever the seed
    prog: str            # key of PROGS
    args: list           # {C}: the case directory, {R}: its run directory, {W}: the shared work directory
    expect: str          # error | ok | either
    keywords: list       # an error's message must mention one of these (case-insensitive)
    note: str            # what the mutation is
    files: dict = field(default_factory=dict)  # file name in the case directory -> bytes
    run: str = ""        # the pristine run directory copied to {R} and protected ("llama" | "dit" | "")
    skip: str = ""       # not run, and why (a valid value that would run for hours)
    auto_ckpt: object = None  # --resume auto: these bytes go into {R} as ckpt_000009.bin
    setup: object = None      # run-directory states: setup(rdir, cdir, ctx) before the snapshot
    post: object = None       # and post(rdir, cdir, output) -> problems, after the judge
    env: dict = field(default_factory=dict)  # added to the environment
    fifos: list = field(default_factory=list)  # paths in the case directory made FIFOs ("run/..." inside {R})


# --- run-directory states (llmc/train/run_open.h, llmc/core/run_dir.h)


def _outside(cdir):
    """A file outside the run directory that a link points to: it must stay as it is."""
    p = os.path.join(cdir, "outside.txt")
    with open(p, "wb") as f:
        f.write(b"not the run's\n")
    return p


def _outside_intact(rdir, cdir, output):
    p = os.path.join(cdir, "outside.txt")
    with open(p, "rb") as f:
        return [] if f.read() == b"not the run's\n" else ["the file outside the run directory was written through a link"]


def _link(name, is_dir=False):
    def setup(rdir, cdir, ctx):
        target = _outside(cdir)
        if is_dir:
            target = os.path.join(cdir, "outside_dir")
            os.makedirs(target, exist_ok=True)
        p = os.path.join(rdir, name)
        if os.path.lexists(p):
            os.rename(p, p + ".was")  # (kept: the snapshot protects it)
        os.symlink(target, p)
    return setup


def _lock_record(host, pid, job="-", start=None):
    def setup(rdir, cdir, ctx):
        st = start
        if st is None:
            st = 0
            try:
                with open("/proc/%d/stat" % pid) as f:
                    st = int(f.read().rsplit(")", 1)[1].split()[19])
            except (OSError, IndexError, ValueError):
                pass
        with open(os.path.join(rdir, "run.lock"), "w") as f:
            f.write("program=train_llama host=%s pid=%d start=%d job=%s since=2026-01-01 00:00:00\n" % (host, pid, st, job))
    return setup


def _holder(rdir, cdir, ctx):
    """A run that holds the directory while the case runs (stopped by _holder_stop)."""
    argv = [ctx.bins["train_llama"]] + LLAMA_MODEL + ["--steps", "1000000", "--val-every", "0", "--ckpt-every", "0",
                                                      "--train-data", ctx.work + "/train.bin", "--run-dir", rdir,
                                                      "--resume", "auto"]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    ctx.holders[rdir] = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)
    t0 = time.time()
    while not os.path.exists(os.path.join(rdir, "run.lock")) and time.time() - t0 < 20:
        time.sleep(0.05)


def _holder_stop(rdir, cdir, output):
    p = HOLDERS.pop(rdir, None)
    if p is None:
        return ["the holding run never started"]
    p.kill()
    p.wait()
    return []


HOLDERS = {}


def _expect_in_output(*words):
    def post(rdir, cdir, output):
        return [] if all(w in output for w in words) else ["the output lacks %r" % [w for w in words if w not in output]]
    return post


def _both(*posts):
    def post(rdir, cdir, output):
        return [p for f in posts for p in f(rdir, cdir, output)]
    return post


def _listing(sub, want):
    def post(rdir, cdir, output):
        d = os.path.join(rdir, sub)
        have = sorted(os.listdir(d)) if os.path.isdir(d) else []
        return [] if have == sorted(want) else ["%s holds %s, expected %s" % (sub or "the run directory", have, want)]
    return post


def rundir_cases(ctx):
    """Run-directory states: each case names what the run must do with the directory it finds."""
    ctx.holders = HOLDERS
    L = LLAMA_MODEL + ["--val-every", "0", "--train-data", "{W}/train.bin"]
    D = DIT_MODEL + ["--val-every", "0"]
    auto = ["--run-dir", "{R}", "--resume", "auto"]
    cases = []

    def add(name, prog, args, expect, kw, note, run="train_llama", **kv):
        cases.append(Case("rundir", "rundir/" + name, prog, args, expect, kw, note, run=run, **kv))

    for prog, other, M in [("train_llama", "train_dit", L), ("train_dit", "train_llama", D)]:
        add("fresh_in_used/" + prog, prog, M + ["--steps", "2", "--run-dir", "{R}", "--start-over", "0"], "error",
            ["already holds", "--resume auto", "--start-over"], "a fresh run where another run lives", run=prog)
        add("other_trainer/" + prog, prog, M + ["--steps", "3"] + auto, "error", ["another run", "program"],
            "--resume auto in %s's run directory" % other, run=other)
        add("other_trainer_start_over/" + prog, prog, M + ["--steps", "1", "--run-dir", "{R}", "--start-over", "1"], "ok",
            [], "--start-over 1 in %s's run directory: its files move to set_aside/1/" % other, run=other,
            post=_listing("set_aside/1", ["ckpt_000001.bin", "ckpt_000002.bin", "main.log", "metrics.jsonl", "run.json"]))
    add("other_seed_auto", "train_llama", L + ["--steps", "3", "--seed", "7"] + auto, "error", ["seed", "another run"],
        "--resume auto with another --seed")
    add("other_data_auto", "train_llama", L[:-1] + ["{C}/other.bin", "--steps", "3"] + auto, "error",
        ["training data", "another run"], "--resume auto on other data", files={"other.bin": ctx.other_shard})
    # (train_dit: train_llama's data loader refuses another seed or data in its saved position itself)
    add("other_seed_file", "train_dit", D + ["--steps", "3", "--seed", "7", "--run-dir", "{R}", "--resume",
                                             "{R}/ckpt_000002.bin"], "ok", [],
        "--resume FILE with another --seed: continued, said", run="train_dit", post=_expect_in_output("continues the run"))
    add("moved_data_auto", "train_llama", L[:-1] + ["{C}/copy.bin", "--steps", "3"] + auto, "ok", [],
        "--resume auto on a copy of the data elsewhere: the same data", files={"copy.bin": ctx.shard_bytes})
    add("newest_is_directory", "train_llama", L + ["--steps", "3"] + auto, "error", ["ckpt_000009.bin", "regular file"],
        "a directory named ckpt_000009.bin", setup=lambda r, c, x: os.mkdir(os.path.join(r, "ckpt_000009.bin")))
    add("newest_is_fifo", "train_llama", L + ["--steps", "3"] + auto, "error", ["ckpt_000009.bin", "regular file"],
        "a FIFO named ckpt_000009.bin", setup=lambda r, c, x: os.mkfifo(os.path.join(r, "ckpt_000009.bin")))
    add("newest_other_trainer", "train_llama", L + ["--steps", "3"] + auto, "error", ["ckpt_000009.bin", "cannot be used"],
        "train_dit's checkpoint as the newest of a train_llama run", auto_ckpt=ctx.ckpt_bytes["train_dit"])
    flipped = bytearray(ctx.ckpt_bytes["train_llama"])
    flipped[2000] ^= 1
    add("newest_corrupted", "train_llama", L + ["--steps", "3", "--ckpt-every", "1"] + auto, "ok", [],
        "a corrupted newest checkpoint of this run: skipped and set aside, never overwritten",
        auto_ckpt=bytes(flipped), post=_listing("set_aside/1", ["ckpt_000009.bin"]))
    add("run_json_garbage", "train_llama", L + ["--steps", "3"] + auto, "error", ["run.json"], "an unreadable run.json",
        setup=lambda r, c, x: open(os.path.join(r, "run.json"), "w").write("{not json"))
    for name in ["main.log", "metrics.jsonl", "run.json", "run.lock", "ckpt_000009.bin", "ckpt_000002.bin"]:
        add("symlink/" + name, "train_llama", L + ["--steps", "3"] + auto, "error", ["symbolic link", name],
            "%s a link to a file outside" % name, setup=_link(name), post=_outside_intact)
        add("symlink_fresh/" + name, "train_llama", L + ["--steps", "1", "--run-dir", "{R}", "--start-over", "1"], "error",
            ["symbolic link", name], "%s a link to a file outside, a fresh run" % name, setup=_link(name),
            post=_outside_intact)
    for name in ["samples", "set_aside"]:
        add("symlink/" + name, "train_llama", L + ["--steps", "3"] + auto, "error", ["symbolic link", name],
            "%s a link to a directory outside" % name, setup=_link(name, True), post=_outside_intact)
    for n in [1095, 1200, 3000]:
        deep = "/".join(["d" * 200] * (n // 201)) + "/" + "e" * (n % 201 or 1)
        add("long_path/%d" % n, "train_llama", L + ["--steps", "2", "--ckpt-every", "1", "--run-dir", "{C}/" + deep], "ok",
            [], "a --run-dir of about %d characters" % n, run="",
            post=lambda r, c, o, deep=deep: _listing(os.path.join(c, deep), ["ckpt_000001.bin", "ckpt_000002.bin",
                                                                            "main.log", "metrics.jsonl", "run.json"])(
                "", c, o))
    deep = "/".join(["d" * 200] * 25)
    add("long_path/5000", "train_llama", L + ["--steps", "2", "--run-dir", "{C}/" + deep], "error", ["PATH_MAX", "run-dir"],
        "a --run-dir past PATH_MAX", run="", post=lambda r, c, o: [] if not os.path.exists(os.path.join(c, "dddd" * 50))
        else ["a directory was made for a refused --run-dir"])

    def many(rdir, cdir, ctx):
        src = os.path.join(rdir, "ckpt_000002.bin")
        for i in range(3, 4201):
            os.link(src, os.path.join(rdir, "ckpt_%06d.bin" % i))
    add("many_checkpoints", "train_llama", L + ["--steps", "3", "--run-dir", "{C}/many", "--resume", "auto"], "ok", [],
        "4,200 checkpoints (past the 4,096 names once read): the newest by number is taken", run="",
        setup=lambda r, c, x: (shutil.copytree(x.pristine["train_llama"], os.path.join(c, "many")),
                               many(os.path.join(c, "many"), c, x)),
        post=_expect_in_output("ckpt_004200.bin at step 2"))
    add("concurrent", "train_llama", L + ["--steps", "3", "--run-dir", "{C}/busy", "--resume", "auto"], "error",
        ["in use", "pid"], "a second run while another holds the directory", run="",
        setup=lambda r, c, x: _holder(os.path.join(c, "busy"), c, x),
        post=lambda r, c, o: _holder_stop(os.path.join(c, "busy"), c, o))
    host = os.uname().nodename
    add("stale_lock", "train_llama", L + ["--steps", "3"] + auto, "ok", [], "run.lock of a killed run (flock free)",
        setup=_lock_record(host, 4194000), post=_expect_in_output("taken over"))
    add("stale_lock_other_host", "train_llama", L + ["--steps", "3"] + auto, "error", ["in use", "run.lock"],
        "run.lock of another host, flock free here (a shared file system whose flock may be per node): refused",
        setup=_lock_record("elsewhere", 12))
    nf = {"LLMC_RUN_DIR_NO_FLOCK": "1"}
    add("noflock/stale", "train_llama", L + ["--steps", "3"] + auto, "ok", [],
        "no flock: a record whose pid is gone is taken over", setup=_lock_record(host, 4194000), env=nf,
        post=_expect_in_output("no longer running"))
    add("noflock/live", "train_llama", L + ["--steps", "3"] + auto, "error", ["in use", "live"],
        "no flock: a record of a live process refuses the run", setup=_lock_record(host, os.getpid()), env=nf)
    add("noflock/other_host", "train_llama", L + ["--steps", "3"] + auto, "error", ["in use", "run.lock"],
        "no flock: a record of another host refuses the run", setup=_lock_record("elsewhere", 12), env=nf)
    add("noflock/same_job", "train_llama", L + ["--steps", "3"] + auto, "ok", [],
        "no flock: a record of this SLURM job (requeued) is taken over",
        setup=_lock_record("elsewhere", 12, job="4242"), env=dict(nf, SLURM_JOB_ID="4242"),
        post=_expect_in_output("requeued"))
    add("start_over", "train_llama", L + ["--steps", "1", "--run-dir", "{R}", "--start-over", "1"], "ok", [],
        "--start-over 1: the earlier run moves to set_aside/1/",
        post=_both(_listing("set_aside/1", ["ckpt_000001.bin", "ckpt_000002.bin", "main.log", "metrics.jsonl", "run.json"]),
                   _listing("", ["main.log", "metrics.jsonl", "run.json", "set_aside"])))
    add("keep_last", "train_llama", L + ["--steps", "5", "--ckpt-every", "1", "--keep-last", "2"] + auto, "ok", [],
        "--keep-last 2: the newest two stay", post=_listing("", ["ckpt_000004.bin", "ckpt_000005.bin", "main.log",
                                                                 "metrics.jsonl", "run.json"]))
    add("resume_file_supersedes", "train_llama", L + ["--steps", "2", "--run-dir", "{R}", "--resume", "{R}/ckpt_000001.bin"],
        "ok", [], "--resume of an older checkpoint: the newer one moves aside",
        post=_listing("set_aside/1", ["ckpt_000002.bin"]))
    # (a stop once training began: judged by its message, the checkpoints there byte-identical, no temporary file)
    add("disk_full", "train_llama", L + ["--steps", "3", "--ckpt-every", "1"] + auto, "either", ["free", "untouched"],
        "too little free space for the next checkpoint", env={"LLMC_TEST_FREE_BYTES": "4096"})

    def stale_tmp(rdir, cdir, ctx):
        for n in ["ckpt_000003.bin.tmp", "ckpt_000003.bin.tmp.0123456789abcdef"]:
            with open(os.path.join(rdir, n), "wb") as f:
                f.write(b"half")
    add("stale_tmp", "train_llama", L + ["--steps", "3"] + auto, "ok", [], "temporary files a killed writer left",
        setup=stale_tmp, post=_expect_in_output("ckpt_000003.bin.tmp.0123456789abcdef", "interrupted writer"))
    return cases



# --- checkpoints


def llama_ckpt_word_expect(w, v, orig):
    """What train_llama must do with header word w set to v (the checksum recomputed)."""
    if v == orig:
        return "ok"
    if w in (0, 1):
        return "error"                      # magic, version
    if 2 <= w <= 9:
        return "error"                      # the model: V D L H KV F max_seq_len tied must match the run
    if w == 10:
        return "error" if v < 0 or v > STEPS_MAX else "ok"  # step: negative or past --steps' range is no step
    if w == 11:
        return "error" if v < 1 else "ok"   # dp at save: informational, but >= 1
    if w in (12, 13, 14):
        return "either"                     # B, T, grad_accum at save: a mismatch restarts the data order
    if w in (15, 18, 19):
        return "error"                      # loader bytes, num_params: the size no longer agrees
    if w in (16, 17, 20):
        return "either"                     # --zero, --shard-vocab, tp at save: informational
    if w in (32, 33):
        return "error"                      # rope_theta, norm_eps bits must match
    return "either"                         # reserved: 0 in the files written, not required by the reader


def dit_ckpt_word_expect(w, v, orig):
    if v == orig:
        return "ok"
    if w in (0, 1):
        return "error"
    if 2 <= w <= 13:
        return "error"                      # C Fr Hi Wi pt ph pw D L H FF NC must match
    if w == 14:
        return "error" if v < 0 or v > STEPS_MAX else "ok"
    if w in (15, 16):
        return "error"                      # num_params
    if w == 32:
        return "error"                      # rope_theta
    return "either"


INT_POOL = [0, 1, -1, 2, 3, 7, 255, 256, 1023, 1024, 65535, 65536, 1 << 24, 1 << 30, I32_MAX, I32_MIN, I32_MIN + 1]


def value_set(orig):
    vals = [0, -1, orig + 1, orig - 1, orig * 2, I32_MAX, I32_MIN, 65536]
    out = []
    for v in vals:
        v = ((v + (1 << 31)) % (1 << 32)) - (1 << 31)
        if v not in out:
            out.append(v)
    return out


def ckpt_cases(ctx, rng, llama):
    kind = "llama_ckpt" if llama else "dit_ckpt"
    prog = "train_llama" if llama else "train_dit"
    ck = Ckpt(ctx.ckpt_bytes[prog], llama)
    word_expect = llama_ckpt_word_expect if llama else dit_ckpt_word_expect
    if llama:
        base = LLAMA_MODEL + ["--steps", "3", "--val-every", "0", "--ckpt-every", "1", "--train-data", "{W}/train.bin",
                              "--run-dir", "{R}"]
        named_words = list(range(0, 21)) + [21, 25, 31, 32, 33, 34, 100, 255]
    else:
        base = DIT_MODEL + ["--steps", "3", "--val-every", "0", "--ckpt-every", "1", "--run-dir", "{R}"]
        named_words = list(range(0, 17)) + [17, 24, 31, 32, 33, 100, 255]
    hdr = struct.unpack("<256i", ck.header)
    cases = []

    def add(name, data, expect, note, modes=("resume", "init"), kw=()):
        for mode in modes:
            flag = {"resume": "--resume", "init": "--init-from"}[mode]
            e = expect
            if mode == "init" and isinstance(expect, tuple):
                e = expect[1]
            elif isinstance(expect, tuple):
                e = expect[0]
            cases.append(Case(kind, "%s/%s/%s" % (kind, mode, name), prog, base + [flag, "{C}/mut.bin"], e,
                              ["mut.bin"] + list(kw), note + " (" + flag + ")", files={"mut.bin": data}, run=prog))

    def add_auto(name, data, note):
        # the mutant as the newest checkpoint of the run directory: --resume auto skips it (size, checksum) or
        # uses it; either way no crash, no hang, and the older checkpoints stay as they are
        cases.append(Case(kind, "%s/auto/%s" % (kind, name), prog, base + ["--resume", "auto"], "either",
                          ["ckpt_000009.bin"], note + " (--resume auto, the newest checkpoint)", run=prog,
                          auto_ckpt=data))

    # header words against a set of values, the checksum made to hold
    for w in named_words:
        orig = hdr[w]
        for v in value_set(orig):
            if w in (32, 33) or (not llama and w == 32):
                continue
            e = word_expect(w, v, orig)
            if (llama and w in (10, 11, 12, 13, 14, 15, 16, 17, 20)) or (not llama and w == 14):
                # --init-from reads the parameters alone: the step and the loader fields do not matter
                bad_step = v < 0 or v > STEPS_MAX  # the header check refuses it for --init-from too
                e_init = "error" if (w in (15, 18, 19) or (llama and w == 11 and v < 1) or (w == 10 and llama and bad_step)
                                     or (not llama and w == 14 and bad_step)) else ("either" if e == "either" else "ok")
                e = (e, e_init)
            add("hdr%d=%d" % (w, v), ck.with_word(w, v), e, "header word %d %d -> %d" % (w, orig, v))
        if w in (0, 2, 10 if llama else 14, 18 if llama else 15):
            add("hdr%d=%d_stale_checksum" % (w, orig + 1), ck.with_word(w, orig + 1, checksum="stale"), "error",
                "header word %d %d -> %d, checksum not updated" % (w, orig, orig + 1))
            add_auto("hdr%d=%d" % (w, orig + 1), ck.with_word(w, orig + 1), "header word %d -> %d" % (w, orig + 1))
    # float header words: rope_theta (and norm_eps)
    fwords = [32, 33] if llama else [32]
    for w in fwords:
        for v in [float("nan"), float("inf"), -1.0, 0.0, f32_at(ck.header, 4 * w) * 2, 1e-30]:
            add("hdrf%d=%r" % (w, v), ck.with_float_word(w, v), "error", "header float %d -> %r" % (w, v))
    # the magic of the other trainer's checkpoint and of the reference files
    other = DIT_CKPT_MAGIC if llama else LLAMA_CKPT_MAGIC
    for v in [other, LREF_MAGIC, DREF_MAGIC, CLIP_MAGIC, SHARD_MAGIC16]:
        add("magic=%d" % v, ck.with_word(0, v), "error", "magic of another format")
    # sizes: truncated, bytes appended
    raw = ck.build()
    L = len(raw)
    for cut in sorted(set([0, 1, 4, 100, 1023, 1024, 1025, 1031, 1032, L // 2, L - 9, L - 8, L - 1])):
        add("truncate=%d" % cut, raw[:cut], "error", "truncated to %d of %d bytes" % (cut, L))
        if cut in (0, 1024, L // 2, L - 1):
            add_auto("truncate=%d" % cut, raw[:cut], "truncated to %d bytes" % cut)
    for extra in [1, 7, 8, 1024]:
        add("append=%d" % extra, raw + bytes(extra), "error", "%d zero bytes appended" % extra)
        add("append=%d_ff" % extra, raw + b"\xff" * extra, "error", "%d 0xff bytes appended" % extra)
    add("empty", b"", "error", "an empty file")
    add("header_only", raw[:1024], "error", "the header alone")
    # num_params that agrees with the file size (two values more in each block), checksum holding
    nw = (18, 19) if llama else (15, 16)
    for dn, name in [(2, "plus2"), (-ck.n, "zero")]:
        n2 = ck.n + dn
        h2 = put_i32(put_i32(ck.header, nw[0], n2 & 0x7FFFFFFF), nw[1], n2 >> 31)
        blocks = [(b + bytes(8)) if dn > 0 else b"" for b in ck.blocks[:3]] + ck.blocks[3:]
        add("num_params_consistent_%s" % name, ck.build(header=h2, blocks=blocks), "error",
            "num_params %d -> %d with the blocks resized to agree and the checksum holding" % (ck.n, n2))
    if llama:
        # the dataloader state: no state (header word 15 = 0), or 512 bytes of it; the run restarts the data order
        h2 = put_i32(ck.header, 15, 0)
        add("loader_state_none", ck.build(header=h2, blocks=ck.blocks[:3] + [b""]), "ok",
            "no dataloader state, size and checksum agreeing (as import_hf.py writes)")
        h2 = put_i32(ck.header, 15, 512)
        add("loader_state_512", ck.build(header=h2, blocks=ck.blocks[:3] + [ck.blocks[3] + bytes(512 - ck.ds)]), "either",
            "512 bytes of dataloader state (the most the reader takes)")
        h2 = put_i32(ck.header, 15, 513)
        add("loader_state_513", ck.build(header=h2, blocks=ck.blocks[:3] + [ck.blocks[3] + bytes(513 - ck.ds)]), "error",
            "513 bytes of dataloader state (over the reader's limit)")
        # its 16 words: magic, version, B T rank world mode seed shards tokens must match; rng, position, count free
        st = ck.blocks[3]
        for wi, e in [(0, "error"), (1, "error"), (2, "error"), (3, "error"), (4, "error"), (5, "error"), (6, "error"),
                      (7, "error"), (8, "error"), (9, "error"), (10, "ok"), (11, "either"), (12, "ok"), (13, "either"),
                      (15, "either")]:
            for v in [0, 1 << 63, MASK64]:
                old = struct.unpack_from("<Q", st, 8 * wi)[0]
                if v == old:
                    continue
                ee = e
                if wi == 11:
                    ee = "ok" if v == 0 else "error"  # the next window of a sequential loader; the training loader has none
                s2 = bytearray(st)
                struct.pack_into("<Q", s2, 8 * wi, v)
                add("loader_word%d=%#x" % (wi, v), ck.build(blocks=ck.blocks[:3] + [bytes(s2)]), (ee, "ok"),
                    "dataloader state word %d -> %#x" % (wi, v), kw=["dataloader state", "saved state"])
    # payload values, the checksum holding: non-finite must be refused, finite ones are data
    names = ["params", "adam_m", "adam_v"]
    for k in range(3):
        for idx in [0, ck.n - 1, ck.n // 2]:
            for v, e in [(float("nan"), "error"), (float("inf"), "error"), (float("-inf"), "error")]:
                # --init-from takes the parameters alone: a NaN in the moments may be ignored there
                add("%s[%d]=%r" % (names[k], idx, v), ck.with_block_f32(k, idx, v), (e, e if k == 0 else "either"),
                    "%s[%d] = %r" % (names[k], idx, v))
        add("%s[0]=3e38" % names[k], ck.with_block_f32(k, 0, 3e38), "either", "%s[0] = 3e38" % names[k])
        add("%s[0]=-1" % names[k], ck.with_block_f32(k, 0, -1.0), "either", "%s[0] = -1" % names[k])
        add("%s[0]=nan_payload" % names[k], ck.with_block_f32(k, 0, bits=0x7FC00001), (
            "error", "error" if k == 0 else "either"), "%s[0] = a NaN with a payload" % names[k])
    for v in [0.0, 1e-45, -0.0]:
        add("adam_v[1]=%r" % v, ck.with_block_f32(2, 1, v), "ok", "adam_v[1] = %r (valid)" % v)
    # random: header words and payload bits (--seed)
    for i in range(40):
        w = rng.choice(named_words + [rng.randrange(0, 256)])
        if w in fwords:
            continue
        v = rng.choice(INT_POOL + [hdr[w] + 1, rng.randrange(I32_MIN, I32_MAX)])
        e = word_expect(w, v, hdr[w])
        add("rand%d_hdr%d=%d" % (i, w, v), ck.with_word(w, v), (e, "either" if e == "ok" else e),
            "random: header word %d %d -> %d" % (w, hdr[w], v), modes=("resume",))
    for i in range(40):
        k = rng.randrange(3)
        blocks = list(ck.blocks)
        b = bytearray(blocks[k])
        nflip = rng.choice([1, 1, 2, 4, 8, 32])
        bad = False
        for _ in range(nflip):
            bit = rng.randrange(len(b) * 8)
            b[bit // 8] ^= 1 << (bit % 8)
        for (bits,) in struct.iter_unpack("<I", bytes(b)):
            if not f32_bits_finite(bits):
                bad = True
                break
        blocks[k] = bytes(b)
        add("rand%d_flip%d_%s" % (i, nflip, names[k]), ck.build(blocks=blocks),
            ("error" if bad else "either", ("error" if bad else "either") if k == 0 else "either"),
            "random: %d bits flipped in %s (%s)" % (nflip, names[k], "non-finite" if bad else "finite"), modes=("resume",))
    return cases


# --- token shards


def shard_bytes(tokens, magic=SHARD_MAGIC16, version=1, count=None, wide=False):
    h = [magic, version, len(tokens) if count is None else count] + [0] * 253
    body = struct.pack("<%d%s" % (len(tokens), "I" if wide else "H"), *tokens)
    return struct.pack("<256I", *[x & 0xFFFFFFFF for x in h]) + body


def shard_cases(ctx, rng):
    toks = ctx.tokens
    n = len(toks)
    good16 = shard_bytes(toks)
    good32 = shard_bytes(toks, SHARD_MAGIC32, 7, wide=True)
    train = LLAMA_MODEL + ["--steps", "2", "--val-every", "0", "--ckpt-every", "0", "--run-dir", "{R}"]
    cases = []

    def add(name, data, expect, note, how="train", extra=None):
        if how == "train":
            args = train + ["--train-data", "{C}/shard.bin"]
        else:  # validation shard, valid training data
            args = train + ["--train-data", "{W}/train.bin", "--val-every", "1", "--val-batches", "1",
                            "--val-data", "{C}/shard.bin"]
        files = {"shard.bin": data} if data is not None else {}
        files.update(extra or {})
        cases.append(Case("shard", "shard/%s/%s" % (how, name), "train_llama", args, expect, ["shard.bin"], note,
                          files=files, run="train_llama"))

    for how in ["train", "val"]:
        add("valid_u32", good32, "ok", "a valid uint32 shard", how)
        for v in [0, 1, -1, SHARD_MAGIC16 + 1, LLAMA_CKPT_MAGIC, SHARD_MAGIC32]:
            add("magic=%d" % v, put_i32(good16, 0, v), "error", "magic -> %d" % v, how)
        for v in [0, 2, 7, -1, I32_MAX]:
            add("version=%d" % v, put_i32(good16, 1, v), "error", "version -> %d" % v, how)
        add("u32_version1", put_i32(good32, 1, 1), "error", "uint32 magic with version 1", how)
        for v in [0, -1, 1, 16, n - 1, n + 1, 2 * n, I32_MAX, I32_MIN, 1 << 30]:
            add("count=%d" % v, put_i32(good16, 2, v), "error", "token count %d -> %d" % (n, v), how)
            add("u32_count=%d" % v, put_i32(good32, 2, v), "error", "uint32 shard: token count %d -> %d" % (n, v), how)
        for m in [1, 16]:
            add("consistent_short=%d" % m, shard_bytes(toks[:m]), "error", "%d tokens, count agreeing (< T+1)" % m, how)
        add("consistent_17", shard_bytes(toks[:17]), "ok", "17 tokens = one window of T+1", how)
        add("count0_empty", shard_bytes([]), "error", "no tokens, count 0", how)
        L = len(good16)
        for cut in [0, 3, 4, 8, 1023, 1024, 1025, L - 1, L - 2, L // 2]:
            add("truncate=%d" % cut, good16[:cut], "error", "truncated to %d of %d bytes" % (cut, L), how)
        for extra in [1, 2, 4096]:
            add("append=%d" % extra, good16 + bytes(extra), "error", "%d bytes appended" % extra, how)
        for pos in [0, n // 2, n - 1]:
            for v, e in [(256, "error"), (65535, "error"), (255, "ok")]:
                t2 = list(toks)
                t2[pos] = v
                add("token[%d]=%d" % (pos, v), shard_bytes(t2), e, "token %d -> %d (V = 256)" % (pos, v), how)
            for v, e in [(256, "error"), (1 << 31, "error"), (MASK64 & 0xFFFFFFFF, "error"), (255, "ok")]:
                t2 = list(toks)
                t2[pos] = v
                add("u32_token[%d]=%d" % (pos, v), shard_bytes(t2, SHARD_MAGIC32, 7, wide=True), e,
                    "uint32 shard: token %d -> %d" % (pos, v), how)
        for w in [3, 100, 255]:
            add("reserved%d=1" % w, put_i32(good16, w, 1), "ok", "header word %d non-zero (llm.c's format keeps "
                "no reserved words)" % w, how)
    # patterns
    cases.append(Case("shard", "shard/train/no_match", "train_llama", train + ["--train-data", "{C}/nothing_*.bin"],
                      "error", ["nothing_"], "a pattern that matches no file", run="train_llama"))
    cases.append(Case("shard", "shard/train/directory", "train_llama", train + ["--train-data", "{C}/adir"], "error",
                      ["adir"], "a directory as the pattern", files={"adir/x.bin": good16}, run="train_llama"))
    cases.append(Case("shard", "shard/train/bad_among_good", "train_llama", train + ["--train-data", "{C}/s_*.bin"],
                      "error", ["s_001.bin"], "a truncated shard among good ones",
                      files={"s_000.bin": good16, "s_001.bin": good16[:-3], "s_002.bin": good16}, run="train_llama"))
    cases.append(Case("shard", "shard/train/mixed_widths", "train_llama", train + ["--train-data", "{C}/m_*.bin"],
                      "ok", [], "a uint16 and a uint32 shard under one pattern",
                      files={"m_000.bin": good16, "m_001.bin": good32}, run="train_llama"))
    # random
    for i in range(30):
        how = rng.choice(["train", "val"])
        op = rng.randrange(3)
        if op == 0:
            w = rng.choice([0, 1, 2])
            v = rng.choice(INT_POOL + [rng.randrange(I32_MIN, I32_MAX)])
            orig = i32(good16, w)
            if v == orig:
                continue
            add("rand%d_hdr%d=%d" % (i, w, v), put_i32(good16, w, v), "error", "random: header word %d -> %d" % (w, v), how)
        elif op == 1:
            cut = rng.randrange(len(good16))
            add("rand%d_truncate=%d" % (i, cut), good16[:cut], "error", "random: truncated to %d bytes" % cut, how)
        else:
            t2 = list(toks)
            pos = rng.randrange(n)
            t2[pos] = rng.randrange(256, 65536)
            add("rand%d_token[%d]=%d" % (i, pos, t2[pos]), shard_bytes(t2), "error", "random: token id >= V", how)
    return cases


# --- clip files


def clip_bytes(labels, values, enc, shape=CLIP_SHAPE, classes=CLIP_CLASSES, count=None, hdr=None):
    h = [CLIP_MAGIC, 1, len(labels) if count is None else count] + list(shape) + [classes, enc] + [0] * 247
    for w, v in (hdr or {}).items():
        h[w] = v
    out = [struct.pack("<256I", *[x & 0xFFFFFFFF for x in h])]
    per = len(values) // max(len(labels), 1)
    for i, lab in enumerate(labels):
        out.append(struct.pack("<i", lab))
        chunk = values[i * per:(i + 1) * per]
        out.append(bytes(chunk) if enc == 0 else struct.pack("<%df" % len(chunk), *chunk))
    return b"".join(out)


def clip_cases(ctx, rng):
    n = CLIP_COUNT
    per = CLIP_SHAPE[0] * CLIP_SHAPE[1] * CLIP_SHAPE[2] * CLIP_SHAPE[3]
    labels = ctx.clip_labels
    u8, f32 = ctx.clip_u8, ctx.clip_f32
    args = DIT_MODEL + ["--data", "{C}/clips.bin", "--steps", "2", "--val-every", "2", "--ckpt-every", "0",
                        "--run-dir", "{R}"]
    cases = []

    def add(name, data, expect, note, extra_args=()):
        cases.append(Case("clips", "clips/%s" % name, "train_dit", args + list(extra_args), expect, ["clips.bin"], note,
                          files={"clips.bin": data}, run="train_dit"))

    good_u8 = clip_bytes(labels, u8, 0)
    good_f32 = clip_bytes(labels, f32, 1)
    add("valid_u8", good_u8, "ok", "the valid uint8 file")
    add("valid_f32", good_f32, "ok", "the valid float32 file")
    for enc, good, tag in [(0, good_u8, "u8"), (1, good_f32, "f32")]:
        for w, vals in [(0, [0, -1, CLIP_MAGIC + 1, DREF_MAGIC]), (1, [0, 2, -1]),
                        (2, [0, -1, n - 1, n + 1, I32_MAX, I32_MIN, 1 << 30]),
                        (3, [0, -1, 2, 3, I32_MAX, 65536]), (4, [0, -1, 1, 4, I32_MAX, 65536]),
                        (5, [0, -1, 4, 16, I32_MAX, 65536]), (6, [0, -1, 4, 16, I32_MAX, 65536]),
                        (7, [0, -1, 1, 3, 10, 11, I32_MAX]), (8, [2, -1, 1 - enc, I32_MAX]),
                        (9, [1, -1]), (10, [1]), (100, [1]), (255, [I32_MIN])]:
            for v in vals:
                add("%s/hdr%d=%d" % (tag, w, v), put_i32(good, w, v), "error", "%s: header word %d -> %d" % (tag, w, v))
        L = len(good)
        for cut in [0, 4, 1023, 1024, 1028, L - 1, L - (L - 1024) // n, L // 2]:
            add("%s/truncate=%d" % (tag, cut), good[:cut], "error", "%s: truncated to %d of %d bytes" % (tag, cut, L))
        for extra in [1, 4, 1 + 4 * per]:
            add("%s/append=%d" % (tag, extra), good + bytes(extra), "error", "%s: %d bytes appended" % (tag, extra))
        # a header that agrees with the size but not with the model
        for shp in [(1, 4, 4, 8), (1, 2, 4, 16), (2, 1, 8, 8), (1, 1, 8, 16)]:
            add("%s/shape=%s" % (tag, "x".join(map(str, shp))), clip_bytes(labels, u8 if enc == 0 else f32, enc, shape=shp),
                "error", "%s: clips of %s (same size), the model's are %s" % (tag, shp, CLIP_SHAPE))
        add("%s/classes=3" % tag, clip_bytes(labels, u8 if enc == 0 else f32, enc, classes=3), "error",
            "%s: 3 classes, the model has 2" % tag)
        # counts that agree with the size
        vals = u8 if enc == 0 else f32
        add("%s/consistent_count=%d" % (tag, n - 1), clip_bytes(labels[:-1], vals[:-per], enc), "ok",
            "%s: one clip fewer, count agreeing" % tag)
        add("%s/consistent_count=2" % tag, clip_bytes(labels[:2], vals[:2 * per], enc), "error",
            "%s: 2 clips, all held out for validation" % tag)
        add("%s/consistent_count=0" % tag, clip_bytes([], [], enc), "error", "%s: no clips, count 0" % tag)
        # labels
        for ci in [0, n - 1]:
            for v, e in [(-1, "error"), (CLIP_CLASSES, "error"), (I32_MAX, "error"), (I32_MIN, "error"), (1, "ok")]:
                l2 = list(labels)
                l2[ci] = v
                add("%s/label[%d]=%d" % (tag, ci, v), clip_bytes(l2, vals, enc), e, "%s: clip %d label -> %d" % (tag, ci, v))
    # float32 values
    for ci in [0, n - 1]:
        for v, e in [(float("nan"), "error"), (float("inf"), "error"), (float("-inf"), "error"), (1.0000001, "error"),
                     (-1.5, "error"), (1e30, "error"), (1.0, "ok"), (-1.0, "ok"), (-0.0, "ok"), (1e-45, "ok")]:
            v2 = list(f32)
            v2[ci * per + per // 2] = v
            add("f32/value[clip%d]=%r" % (ci, v), clip_bytes(labels, v2, 1), e, "f32: a value of clip %d -> %r" % (ci, v))
    # the validation split against the file
    for vc, e in [(CLIP_COUNT, "error"), (CLIP_COUNT + 1, "error"), (CLIP_COUNT - 1, "ok")]:
        add("val_clips=%d" % vc, good_u8, e, "--val-clips %d of a %d-clip file" % (vc, CLIP_COUNT),
            extra_args=["--val-clips", str(vc)])
    # a header whose C*Fr*Hi*Wi is 2^64 + 128: a size computed in 64 bits wraps to the 128 values each record holds
    a, b, c = 128 * 9 * 571, 174763, 160465489  # 128 (2^57 + 1) = 2^64 + 128
    add("u8/size_wrap_2^64+128", clip_bytes(labels, u8, 0, shape=(a, b, c, 1)), "error",
        "u8: C*Fr*Hi*Wi = %dx%dx%dx1 = 2^64 + 128 (the record size wraps to the real one)" % (a, b, c))
    cases.append(Case("clips", "clips/directory", "train_dit", args + ["--data", "{C}/adir"], "error",
                      ["adir"], "a directory as --data", files={"adir/x.bin": good_u8}, run="train_dit"))
    cases.append(Case("clips", "clips/missing", "train_dit", args + ["--data", "{C}/nothing.bin"], "error",
                      ["nothing.bin"], "a file that does not exist", run="train_dit"))
    # random
    for i in range(30):
        tag, good, enc = rng.choice([("u8", good_u8, 0), ("f32", good_f32, 1)])
        op = rng.randrange(3)
        if op == 0:
            w = rng.randrange(0, 12)
            v = rng.choice(INT_POOL + [rng.randrange(I32_MIN, I32_MAX)])
            if v == i32(good, w):
                continue
            add("rand%d_%s_hdr%d=%d" % (i, tag, w, v), put_i32(good, w, v), "error", "random: header word %d -> %d" % (w, v))
        elif op == 1:
            cut = rng.randrange(len(good))
            add("rand%d_%s_truncate=%d" % (i, tag, cut), good[:cut], "error", "random: truncated to %d" % cut)
        else:
            b = bytearray(good)
            k = rng.randrange(n)
            off = 1024 + k * (4 + per * (4 if enc else 1))
            b[off:off + 4] = struct.pack("<i", rng.choice([-5, CLIP_CLASSES + 3, 1 << 20]))
            add("rand%d_%s_label_clip%d" % (i, tag, k), bytes(b), "error", "random: a label out of range")
    return cases


# --- reference files


def ref_cases(ctx, rng, llama):
    kind = "lref" if llama else "dref"
    prog = "test_llama" if llama else "test_dit"
    good = ctx.lref if llama else ctx.dref
    h = struct.unpack("<256i", good[:1024])
    cases = []

    # a message must name the file or the field (a config check names the dimension, not the file)
    fields = {0: ["magic"], 1: ["version"]}
    names = (["V", "D", "L", "H", "KV", "F", "max_seq_len", "B", "T", "n_steps", "tied"] if llama else
             ["C", "Fr", "Hi", "Wi", "pt", "ph", "pw", "D", "L", "H", "FF", "NC", "B", "n_steps"])
    long = {"C": "channels", "Fr": "frames", "Hi": "height", "Wi": "width", "pt": "patch", "ph": "patch",
            "pw": "patch", "B": "batch", "V": "vocab"}
    for i, nm in enumerate(names):
        fields[2 + i] = [nm] + ([long[nm]] if nm in long else [])
    fields[32] = ["rope"]
    if llama:
        fields[33] = ["eps"]

    def add(name, data, expect, note, word=None):
        kw = ["mut.ref"] + fields.get(word, [])
        if expect == "either":
            kw.append("FAIL")  # a reference the run disagrees with: the comparison fails, as it should
        cases.append(Case(kind, "%s/%s" % (kind, name), prog, ["--ref", "{C}/mut.ref"], expect, kw, note,
                          files={"mut.ref": data}))

    def hdr_expect(w, v):
        if llama and w == 8 and v >= h[10]:
            return "ok" if v <= 1 << 20 else "either"  # max_seq_len only sizes the RoPE table: any value >= T
        return "error"

    add("valid", good, "ok", "the committed reference, unchanged")
    if llama:
        int_words = list(range(0, 13))   # magic version V D L H KV F max_seq_len B T n_steps tied
        zero_words = list(range(13, 32))
        float_words = list(range(32, 40))  # rope_theta norm_eps lr beta1 beta2 adam_eps weight_decay grad_clip
        free_words = [40, 100, 255]        # documented as 0, not checked by the reader
    else:
        int_words = list(range(0, 16))   # magic version C Fr Hi Wi pt ph pw D L H FF NC B n_steps
        zero_words = list(range(16, 32))
        float_words = list(range(32, 39))  # rope_theta lr beta1 beta2 adam_eps weight_decay grad_clip
        free_words = [39, 100, 255]
    for w in int_words:
        for v in value_set(h[w]) + [1 << 20]:
            if v == h[w]:
                continue
            add("hdr%d=%d" % (w, v), put_i32(good, w, v), hdr_expect(w, v), "header word %d %d -> %d" % (w, h[w], v), w)
    for w in zero_words[:3] + zero_words[-1:]:
        for v in [1, -1]:
            add("hdr%d=%d" % (w, v), put_i32(good, w, v), "error", "reserved header word %d -> %d" % (w, v))
    for w in float_words:
        for v in [float("nan"), float("inf"), float("-inf")]:
            add("hdrf%d=%r" % (w, v), put_f32(good, 4 * w, v), "error", "header float %d -> %r" % (w, v), w)
        for v in [-1.0, 0.0, 3e38]:
            # the config's rope_theta (norm_eps) must be > 0; other values make a reference the run disagrees with
            e = "error" if (w == 32 or (llama and w == 33)) and v <= 0 else "either"
            add("hdrf%d=%r" % (w, v), put_f32(good, 4 * w, v), e, "header float %d -> %r" % (w, v), w)
    for w in free_words:
        add("hdr%d=1" % w, put_i32(good, w, 1), "either", "header word %d (unchecked padding) -> 1" % w)
    L = len(good)
    for cut in [0, 1, 4, 1023, 1024, 1025, L // 2, L - 4, L - 1]:
        add("truncate=%d" % cut, good[:cut], "error", "truncated to %d of %d bytes" % (cut, L))
    for extra in [1, 4, 4096]:
        add("append=%d" % extra, good + bytes(extra), "error", "%d bytes appended" % extra)
    # payload: every array's first value non-finite, token ids / labels out of range
    if llama:
        V, D, Lr, H, KV, F, S, B, T, ns, tied = h[2:13]
        hd = D // H
        P = V * D + Lr * (D + H * hd * D + 2 * KV * hd * D + D * H * hd + D + 3 * F * D) + D + (0 if tied else V * D)
        BT = B * T
        offs = {"params": 1024, "inputs": 1024 + 4 * P, "targets": 1024 + 4 * (P + BT),
                "logits": 1024 + 4 * (P + 2 * BT), "loss": 1024 + 4 * (P + 2 * BT + BT * V),
                "grads": 1024 + 4 * (P + 2 * BT + BT * V + 1), "losses": 1024 + 4 * (P + 2 * BT + BT * V + 1 + P)}
        assert offs["losses"] + 4 * ns == L, (offs, L)
        for arr in ["params", "logits", "loss", "grads", "losses"]:
            for v in [float("nan"), float("inf")]:
                add("%s[0]=%r" % (arr, v), put_f32(good, offs[arr], v), "error", "%s[0] = %r" % (arr, v))
        for arr in ["inputs", "targets"]:
            for v, e in [(-1, "error"), (V, "error"), (I32_MAX, "error"), (V - 1, "either")]:
                add("%s[0]=%d" % (arr, v), put_i32(good, offs[arr] // 4, v), e, "%s[0] = %d (V=%d)" % (arr, v, V))
    else:
        C, Fr, Hi, Wi, pt, ph, pw, D, Lr, H, FF, NC, B, ns = h[2:16]
        clip = C * Fr * Hi * Wi
        np_ = (L - 1024) // 4 - (3 * B * clip + 2 * B + 1 + ns)
        assert np_ % 2 == 0
        np_ //= 2
        nx = B * clip
        offs = {"params": 1024, "x0": 1024 + 4 * np_, "noise": 1024 + 4 * (np_ + nx), "t": 1024 + 4 * (np_ + 2 * nx),
                "y": 1024 + 4 * (np_ + 2 * nx + B), "vpred": 1024 + 4 * (np_ + 2 * nx + 2 * B),
                "loss": 1024 + 4 * (np_ + 3 * nx + 2 * B), "grads": 1024 + 4 * (np_ + 3 * nx + 2 * B + 1),
                "losses": 1024 + 4 * (2 * np_ + 3 * nx + 2 * B + 1)}
        assert offs["losses"] + 4 * ns == L
        for arr in ["params", "x0", "noise", "t", "vpred", "loss", "grads", "losses"]:
            for v in [float("nan"), float("inf")]:
                add("%s[0]=%r" % (arr, v), put_f32(good, offs[arr], v), "error", "%s[0] = %r" % (arr, v))
        for v, e in [(-1, "error"), (NC + 1, "error"), (I32_MAX, "error"), (NC, "either")]:
            add("y[0]=%d" % v, put_i32(good, offs["y"] // 4, v), e, "class y[0] = %d (NC=%d, null class %d)" % (v, NC, NC))
    if llama:
        # the size the header implies, computed in 64 bits, wrapped to the file's size: D = 2^30, H = KV = 2^29,
        # L = 1, F with 3F = -70 (mod 2^31), so that the parameter count is 2^63 and 4 x it is 0 (mod 2^64)
        def lref_params(V, D, Lr, H, KV, F, tied):
            hd = D // H
            return (V * D + Lr * (D + H * hd * D + 2 * KV * hd * D + D * H * hd + D + 3 * F * D) + D +
                    (0 if tied else V * D)) & MASK64
        D2, H2 = 1 << 30, 1 << 29
        F2 = (-70 * pow(3, -1, 1 << 31)) % (1 << 31)
        np2 = lref_params(V, D2, 1, H2, H2, F2, tied)
        BT = B * T
        rest = (1024 + 4 * (2 * np2 + 2 * BT + BT * V + 1)) & MASK64
        n2 = ((L - rest) & MASK64) // 4
        if V * D2 < (1 << 63) and n2 < (1 << 31) and (rest + 4 * n2) & MASK64 == L:
            g2 = good
            for w, v in [(3, D2), (4, 1), (5, H2), (6, H2), (7, F2), (11, n2)]:
                g2 = put_i32(g2, w, v)
            add("size_wrap_params_2^63", g2, "error", "D=2^30 H=KV=2^29 F=%d n_steps=%d: 2^63 parameters, the implied "
                "size wraps to the file's" % (F2, n2))
    # random header words
    for i in range(30):
        w = rng.choice(int_words + zero_words)
        v = rng.choice(INT_POOL + [rng.randrange(I32_MIN, I32_MAX)])
        if v == h[w]:
            continue
        add("rand%d_hdr%d=%d" % (i, w, v), put_i32(good, w, v), hdr_expect(w, v), "random: header word %d -> %d" % (w, v), w)
    return cases


# --- flags

INT_VALUES = ["-1", "0", "1", "2147483647", "2147483644", "-2147483647", "2147483648", "-2147483649",
              "99999999999999999999", "1e308", "nan", "inf", "garbage", "", "0x10", "12abc", " 3"]
FLOAT_VALUES = ["-1", "0", "1e-45", "1e38", "3.5e38", "1e308", "-1e308", "nan", "-nan", "inf", "-inf", "garbage", "",
                "0x1p3", "1e", "1.5.2"]
STR_VALUES = ["-1", "0", "2147483647", "1e308", "nan", "inf", "garbage", "", "a b", "%s%n", "x" * 4096]


def parse_c_int(s):
    """What llmc/core/flags.h's parse_int accepts (strtol base 10, whole string, int32 range but INT_MIN); None if not."""
    if not re.fullmatch(r"\s*[+-]?\d+", s):
        return None
    v = int(s)
    return v if -I32_MAX <= v <= I32_MAX else None


def parse_c_float(s):
    """What parse_float accepts (strtof, whole string, finite, no ERANGE); None if not."""
    t = s.strip()
    if not t or s != s.rstrip():
        return None  # strtof skips leading white space only
    try:
        if re.fullmatch(r"\s*[+-]?0[xX][0-9a-fA-F.]+([pP][+-]?\d+)?", s):
            v = float.fromhex(t)
        elif re.fullmatch(r"\s*[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?", s):
            v = float(t)
        else:
            return None
    except ValueError:
        return None
    if not math.isfinite(v):
        return None
    f = struct.unpack("<f", struct.pack("<f", v))[0] if abs(v) <= 3.4028234663852886e38 else float("inf")
    if not math.isfinite(f):
        return None
    if v != 0 and f == 0:
        return None  # strtof sets ERANGE on underflow to zero
    if v != 0 and abs(f) < 1.1754943508222875e-38:
        return None  # glibc strtof sets ERANGE for denormal results
    return f


def rng_(lo=None, hi=None, huge="error", big=None):
    """An integer flag valid in [lo, hi]; values above `big` are valid but `huge` (error: too large for
    memory or a size limit, skip: would run for hours, ok, either)."""
    def f(v):
        if (lo is not None and v < lo) or (hi is not None and v > hi):
            return "error"
        if big is not None and v > big:
            return huge
        return "ok"
    return f


def one_of(*vals):
    return lambda v: "ok" if v in vals else "error"


def frange(lo=None, hi=None, lo_open=False, hi_open=False, huge=None):
    def f(v):
        if lo is not None and (v < lo or (lo_open and v == lo)):
            return "error"
        if hi is not None and (v > hi or (hi_open and v == hi)):
            return "error"
        if huge is not None and abs(v) > 1e30:
            return huge
        return "ok"
    return f


def choice(*vals):
    return lambda s: "ok" if s in vals else "error"


def path_out(s):
    """An output file (plan JSON, candidates, dump): any name in the case directory is valid, an empty one is not."""
    return "error" if s == "" or len(s) > 255 else "ok"


def path_in(valid=()):
    return lambda s: "ok" if s in valid else "error"


def run_dir_value(s):
    return "error" if s == "" or len(s) > 255 else "ok"


# llmc/parallel/parallel_args.h: the parallel flags both trainers and test_dit append
PARALLEL_FLAGS = [
    ("zero", "i", one_of(0, 1, 2, 3), [], ["zero"]),
    ("zero-reshard", "i", one_of(0, 1), ["--zero", "3"], ["zero-reshard"]),
    ("offload-optim", "i", one_of(0, 1), [], ["offload-optim"]),
    ("comm", "s", choice("nccl", "mpi"), [], ["comm"]),
    ("comm-timeout", "f", frange(0, lo_open=True), [], ["comm-timeout"]),
    ("startup-timeout", "f", frange(0, lo_open=True), [], ["startup-timeout"]),
    ("dp", "i", one_of(0, 1), [], ["dp"]),
    ("fp32-grad-accum", "i", one_of(-1, 0, 1), [], ["fp32-grad-accum"]),
    ("tp", "i", one_of(1), [], ["tp", "ranks"]),
    ("tp-mode", "s", choice("allreduce", "reducescatter"), [], ["tp-mode"]),
    ("tp-recompute-allgather", "i", one_of(0, 1), [], ["tp-recompute-allgather"]),
    # context parallelism: one process is a CP group of one (cp 1 only); hybrid needs its ways
    ("cp", "i", one_of(1), [], ["cp", "ranks"]),
    ("cp-mode", "s", choice("ring", "ulysses"), [], ["cp-mode"]),
    ("cp-ulysses", "i", one_of(0), [], ["cp-ulysses"]),
    # pipeline parallelism: one process is one stage (pp 1 only; its schedule, chunks and split are refused there)
    ("pp", "i", one_of(1), [], ["pp", "ranks"]),
    ("pp-schedule", "s", choice("1f1b"), [], ["pp-schedule", "pp"]),
    ("pp-virtual", "i", one_of(1), [], ["pp-virtual"]),
    ("pp-layers", "s", lambda s: "error", [], ["pp-layers", "pp"]),
    ("plan-rank", "i", one_of(0), [], ["plan-rank", "plan-only"]),
]
# and llmc/train/fit_memory.h: the --fit-memory flags both trainers append too
PARALLEL_FIT_FLAGS = PARALLEL_FLAGS + [
    ("fit-memory", "f", frange(0, huge="either"), [], ["fit-memory", "budget"]),
    ("fit-link-gbs", "f", frange(0, lo_open=True), ["--fit-memory", "1"], ["fit-link-gbs"]),
    ("fit-dp-gbs", "f", frange(0, lo_open=True), ["--fit-memory", "1"], ["fit-dp-gbs"]),
    ("fit-reserve", "f", frange(0, huge="either"), ["--fit-memory", "1"], ["fit-reserve", "budget"]),
    ("fit-candidates", "s", path_out, ["--fit-memory", "1"], ["fit-candidates", "candidates"]),
    ("fit-per-stage", "i", one_of(0, 1), ["--fit-memory", "1"], ["fit-per-stage"]),
]

# each flag: (name, type i|l|f|s, expectation function, extra arguments that make the flag matter, keywords)
# Ranges from --help, docs and the validators (llmc/train/train_args.h, llmc/parallel/parallel_args.h, llmc/train/fit_memory.h).
LLAMA_FLAGS = [
    ("model", "s", choice("tiny", "stories260K", "stories800K", "stories15M", "stories42M", "stories110M", "llama3-1B", "llama3-8B",
                          "llama3-70B"), [], None),
    ("V", "i", rng_(256, None, big=1 << 24), [], ["V", "vocab"]),        # the data's ids are below 256
    ("D", "i", lambda v: "ok" if v >= 4 and v % 4 == 0 and v <= 4096 else "error", [], ["D"]),  # D/H even, H=2
    ("L", "i", rng_(1, None, big=64), [], ["L"]),
    ("H", "i", one_of(1, 2, 4, 8, 16), [], ["H"]),                # D=32, KV=1, head dim even
    ("KV", "i", one_of(1, 2), [], ["KV"]),
    ("F", "i", rng_(1, None, big=1 << 20), [], ["F"]),
    ("max-seq-len", "i", rng_(16, None, big=1 << 20), [], ["max_seq_len", "max-seq-len"]),
    ("tied", "i", one_of(0, 1), [], ["tied"]),
    ("rope-theta", "f", frange(0, lo_open=True), [], ["rope"]),
    ("norm-eps", "f", frange(0, lo_open=True, huge="either"), [], ["eps"]),
    ("batch", "i", rng_(1, None, big=1 << 16), [], ["batch", "B="]),
    ("seq", "i", rng_(1, 16), [], ["seq", "T=", "max_seq_len"]),
    ("total-batch", "i", lambda v: "ok" if (v > 0 and v % 32 == 0 and v <= 1 << 16) else (
        "skip" if v > 0 and v % 32 == 0 else "error"), [], ["total-batch"]),
    ("train-data", "s", path_in(), [], ["train", "match", "pattern"]),
    ("val-data", "s", path_in(), ["--val-every", "1"], ["val", "match", "pattern"]),
    ("val-batches", "i", rng_(1, None, huge="skip", big=1000), ["--val-every", "1", "--val-data", "{W}/train.bin"],
     ["val-batches"]),
    ("sample-every", "i", rng_(0), [], ["sample-every"]),
    ("sample-len", "i", rng_(1), [], ["sample-len"]),
    ("temperature", "f", frange(0), [], ["temperature"]),
    ("tokenizer", "s", path_in(), ["--sample-every", "1"], ["tokenizer"]),
    ("save-init", "i", one_of(0, 1), [], ["save-init"]),
    ("ce-chunks", "i", lambda v: "error" if v < 1 else ("ok" if v <= 32 else "either"), [], ["ce-chunks", "chunk"]),
    ("shard-vocab", "i", one_of(0, 1), [], ["shard-vocab"]),
] + PARALLEL_FIT_FLAGS
DIT_FLAGS = [
    ("model", "s", choice("dit-tiny", "dit-S", "dit-B", "dit-XL", "hunyuan-13B"), [], None),
    ("channels", "i", lambda v: "ok" if v in (1, 3) else ("either" if 1 < v <= 16 else "error"), [], ["C=", "channels"]),
    ("frames", "i", lambda v: "ok" if v >= 2 and v % 2 == 0 and v <= 64 else "error", [], ["Fr", "frames"]),
    ("height", "i", lambda v: "ok" if v >= 8 and v % 2 == 0 and v <= 512 else "error", [], ["Hi", "height"]),
    ("width", "i", lambda v: "ok" if v >= 6 and v % 2 == 0 and v <= 512 else "error", [], ["Wi", "width"]),
    ("pt", "i", one_of(1, 2), [], ["patch", "pt"]),
    ("ph", "i", one_of(1, 2, 4, 8), [], ["patch", "ph"]),
    ("pw", "i", one_of(1, 2, 4, 8), [], ["patch", "pw"]),
    ("D", "i", lambda v: "ok" if v >= 4 and v % 4 == 0 and v <= 4096 else "error", [], ["D"]),
    ("L", "i", rng_(1, None, big=64), [], ["L"]),
    ("H", "i", one_of(1, 2, 4), [], ["H"]),
    ("FF", "i", rng_(1, None, big=1 << 20), [], ["FF"]),
    ("NC", "i", rng_(1, 10), [], ["NC", "classes"]),
    ("rope-theta", "f", frange(0, lo_open=True), [], ["rope"]),
    ("data", "s", lambda s: "ok" if s == "synthetic" else "error", [], ["data", "clip", "cannot open"]),
    ("batch", "i", rng_(1, 128), [], ["batch"]),
    ("total-batch", "i", lambda v: "ok" if (v > 0 and v % 2 == 0 and v <= 256) else (
        "error" if v <= 0 or v % 2 or v > 1 << 30 else "skip"), [], ["total-batch", "clips per step"]),
    ("grad-accum", "i", lambda v: "ok" if 0 <= v <= 128 else ("error" if v < 0 or v > 1 << 29 else "skip"), [],
     ["grad-accum"]),
    ("label-dropout", "f", frange(0, 1), [], ["label-dropout"]),
    ("val-clips", "i", rng_(1, None, huge="skip", big=4096), ["--val-every", "1"], ["val-clips"]),
    ("sample-every", "i", rng_(0), [], ["sample-every"]),
    ("sample-steps", "i", rng_(1, None, huge="skip", big=1000), ["--sample-every", "2"], ["sample-steps"]),
    ("sample-clips", "i", lambda v: "ok" if 1 <= v <= 4 else ("error" if v < 1 or v > 256 else "skip"),
     ["--sample-every", "2"], ["sample-clips"]),
    ("cfg-scale", "f", frange(huge="either"), ["--sample-every", "2"], ["cfg-scale"]),
    ("gif-scale", "i", lambda v: "ok" if 1 <= v <= 64 else "error", ["--sample-every", "2"], ["gif-scale"]),
    ("save-init", "i", one_of(0, 1), [], ["save-init"]),
] + PARALLEL_FIT_FLAGS
# llmc/train/train_args.h: the flags both trainers share (L = 2 in both tiny models)
# (every numeric value is first held to its row of llmc/core/flags.h's FLAG_BOUNDS; these add what the small
# test models need)
LOOP_FLAGS = [
    ("steps", "i", rng_(1, None, huge="skip", big=1000), [], ["steps"]),
    ("lr", "f", frange(0, huge="either"), [], ["lr"]),
    ("min-lr-frac", "f", frange(0, 1), [], ["min-lr-frac"]),
    ("warmup", "i", rng_(0), [], ["warmup"]),
    ("weight-decay", "f", frange(0, huge="either"), [], ["weight-decay"]),
    ("beta1", "f", frange(0, 1, hi_open=True), [], ["beta1"]),
    ("beta2", "f", frange(0, 1, hi_open=True), [], ["beta2"]),
    ("adam-eps", "f", lambda v: "error" if v < 0 else ("either" if v == 0 or v > 1e30 else "ok"), [], ["adam-eps", "eps"]),
    ("grad-clip", "f", frange(0), [], ["grad-clip"]),
    ("seed", "l", lambda v: "ok", [], ["seed"]),
    ("val-every", "i", rng_(0), [], ["val-every"]),
    ("run-dir", "s", run_dir_value, [], ["run-dir", "directory"]),
    ("ckpt-every", "i", rng_(0), [], ["ckpt-every"]),
    ("resume", "s", lambda s: "ok" if s == "auto" else "error", [], ["resume", "checkpoint"]),
    ("init-from", "s", path_in(), [], ["init-from", "checkpoint"]),
    # the run directory holds an earlier run: 0 refuses the fresh run (it would overwrite that run)
    ("start-over", "i", lambda v: "ok" if v == 1 else "error", [], ["start-over", "run-dir"]),
    ("keep-last", "i", rng_(0), [], ["keep-last"]),
    ("log-every", "i", rng_(1), [], ["log-every"]),
    ("ffn-chunks", "i", lambda v: "error" if v < 1 else ("ok" if v <= 32 else "either"), [], ["ffn-chunks"]),
    ("ffn-chunk-dim", "s", choice("hidden", "seq"), [], ["ffn-chunk-dim"]),
    ("offload-act", "i", rng_(-1, 2), [], ["offload-act"]),
    ("recompute", "i", one_of(0, 1, 2), [], ["recompute"]),
    ("attention", "s", choice("auto", "fp32"), [], ["attention", "tensor cores"]),
    ("cudnn-deterministic", "i", one_of(0, 1), [], ["cudnn-deterministic"]),
    ("plan-only", "i", one_of(0, 1), [], ["plan-only"]),
    ("plan-json", "s", path_out, [], ["plan-json", "plan", "cannot open"]),
    ("profile-step", "i", rng_(0), [], ["profile-step"]),
    # a planted NaN at a step the 2-step run reaches stops it (the guard's message); later steps never come
    ("test-nan-update", "i", lambda v: "either" if 1 <= v <= 2 else "ok", [], ["test-nan-update", "non-finite"]),
]
# test_llama (its own parser, test_llama.cu) and test_dit (llmc/core/flags.h); the references have L = 2 and 1,
# B = 3 and 2
TEST_LLAMA_FLAGS = [
    ("ref", "s", path_in(), [], ["ref", "reference"]),
    ("ffn-chunks", "i", lambda v: "error" if v < 1 else ("ok" if v <= 32 else "either"), [], ["ffn-chunks"]),
    ("ffn-chunk-dim", "s", choice("hidden", "seq"), [], ["ffn-chunk-dim"]),
    ("ce-chunks", "i", lambda v: "error" if v < 1 else ("ok" if v <= 16 else "either"), [], ["ce-chunks"]),
    ("offload-act", "i", rng_(-1, 2), [], ["offload-act"]),
    ("recompute", "i", one_of(0, 1, 2), [], ["recompute"]),
    ("test-skip-prefetch", "i", lambda v: "either", [], ["test-skip-prefetch", "FAIL"]),
    ("test-plant-zero-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-zero-bug", "FAIL"]),
    ("zero", "i", one_of(0, 1, 2, 3), [], ["zero"]),
    ("zero-reshard", "i", one_of(0, 1), ["--zero", "3"], ["zero-reshard"]),
    ("offload-optim", "i", one_of(0, 1), [], ["offload-optim"]),
    ("shard-vocab", "i", one_of(0, 1), [], ["shard-vocab"]),
    ("micro-batch", "i", one_of(0, 1, 3), [], ["micro-batch"]),
    ("fp32-grad-accum", "i", one_of(-1, 0, 1), [], ["fp32-grad-accum"]),
    ("tp", "i", one_of(1), [], ["tp", "ranks"]),
    ("tp-mode", "s", choice("allreduce", "reducescatter"), [], ["tp-mode"]),
    ("tp-recompute-allgather", "i", one_of(0, 1), [], ["tp-recompute-allgather"]),
    ("dump", "s", path_out, [], ["dump", "cannot open"]),
    ("test-plant-tp-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-tp-bug", "FAIL"]),
    ("test-plant-cp-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-cp-bug", "FAIL"]),
    ("cp", "i", one_of(1), [], ["cp", "ranks"]),
    ("cp-mode", "s", choice("ring", "ulysses"), [], ["cp-mode"]),
    ("cp-ulysses", "i", one_of(0), [], ["cp-ulysses"]),
    ("dp", "i", one_of(1), [], ["dp", "plan-only"]),  # a plan's rank count: a test run takes dp from the launcher
    ("comm", "s", choice("nccl", "mpi"), [], ["comm"]),
    ("attention", "s", choice("auto", "fp32"), [], ["attention", "tensor cores"]),
    ("cudnn-deterministic", "i", one_of(0, 1), [], ["cudnn-deterministic"]),
    ("comm-timeout", "f", frange(0, lo_open=True), [], ["comm-timeout"]),
    ("startup-timeout", "f", frange(0, lo_open=True), [], ["startup-timeout"]),
    ("test-plant-pp-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-pp-bug", "FAIL"]),
    # pipeline parallelism: one process is one stage (pp 1 only; its schedule, chunks and split are refused there)
    ("pp", "i", one_of(1), [], ["pp", "ranks"]),
    ("pp-schedule", "s", choice("1f1b"), [], ["pp-schedule", "pp"]),
    ("pp-virtual", "i", one_of(1), [], ["pp-virtual"]),
    ("pp-layers", "s", lambda s: "error", [], ["pp-layers", "pp"]),
    ("plan-rank", "i", one_of(0), [], ["plan-rank", "plan-only"]),
]
TEST_DIT_FLAGS = [
    ("ref", "s", path_in(), [], ["ref", "reference"]),
    ("ffn-chunks", "i", lambda v: "error" if v < 1 else ("ok" if v <= 32 else "either"), [], ["ffn-chunks"]),
    ("ffn-chunk-dim", "s", choice("hidden", "seq"), [], ["ffn-chunk-dim"]),
    ("offload-act", "i", rng_(-1, 1), [], ["offload-act"]),
    ("recompute", "i", one_of(0, 1, 2), [], ["recompute"]),
    ("test-skip-prefetch", "i", lambda v: "either", [], ["test-skip-prefetch", "FAIL"]),
    ("test-plant-zero-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-zero-bug", "FAIL"]),
    ("attention", "s", choice("auto", "fp32"), [], ["attention", "tensor cores"]),
    ("cudnn-deterministic", "i", one_of(0, 1), [], ["cudnn-deterministic"]),
    ("micro-batch", "i", one_of(0, 1, 2), [], ["micro-batch"]),
    ("test-plant-tp-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-tp-bug", "FAIL"]),
    ("test-plant-cp-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-cp-bug", "FAIL"]),
    ("test-plant-pp-bug", "i", lambda v: "ok" if v == 0 else "either", [], ["test-plant-pp-bug", "FAIL"]),
] + PARALLEL_FLAGS


def read_flag_bounds(path=os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "llmc", "core", "flags.h")):
    """llmc/core/flags.h's FLAG_BOUNDS, {name: (lo, hi, ends)}: the one table of every numeric flag's range."""
    text = open(path).read()
    consts = {"FLAG_COUNT_MAX": 1 << 20, "FLAG_STEPS_MAX": 1 << 30}
    for m in re.finditer(r"#define (FLAG_\w+_MAX) \(1 << (\d+)\)", text):
        consts[m.group(1)] = 1 << int(m.group(2))
    body = text[text.index("FLAG_BOUNDS[] = {"):]
    body = body[:body.index("};")]

    def num(t):
        t = t.strip()
        if t in consts:
            return consts[t]
        m = re.fullmatch(r"1 << (\d+)", t)
        return (1 << int(m.group(1))) if m else float(t)
    bounds = {}
    for m in re.finditer(r'\{"([A-Za-z0-9-]+)", ([^,]+), ([^,]+), "([\[(][\])])"\}', body):
        bounds[m.group(1)] = (num(m.group(2)), num(m.group(3)), m.group(4))
    if len(bounds) < 50:
        raise SystemExit("fuzz.py: read only %d rows of llmc/core/flags.h's FLAG_BOUNDS" % len(bounds))
    return bounds


FLAG_BOUNDS = read_flag_bounds()


def in_flag_bounds(name, v):
    lo, hi, ends = FLAG_BOUNDS[name]
    return (v > lo if ends[0] == "(" else v >= lo) and (v < hi if ends[1] == ")" else v <= hi)


def flag_value_expect(ftype, fn, s, name=None):
    """A value outside the flag's row of FLAG_BOUNDS is an error; inside it, the table's own
    function decides (the harness's model: sizes that must divide, values that run for hours)."""
    if ftype in ("i", "l"):
        v = parse_c_int(s)
        if v is None:
            return "error", "not an integer to flags.h"
    elif ftype == "f":
        v = parse_c_float(s)
        if v is None:
            return "error", "not a finite float to flags.h"
    else:
        return fn(s), s
    if name is not None and not in_flag_bounds(name, v):
        return "error", v
    return fn(v), v


def flag_cases(ctx, rng, kind):
    cases = []
    if kind == "llama_flags":
        prog, table = "train_llama", LLAMA_FLAGS + LOOP_FLAGS
        base = LLAMA_MODEL + ["--steps", "2", "--val-every", "0", "--ckpt-every", "0", "--train-data", "{W}/train.bin",
                              "--val-data", "{W}/train.bin", "--val-batches", "1", "--run-dir", "{R}"]
        run = "train_llama"
    elif kind == "dit_flags":
        prog, table = "train_dit", DIT_FLAGS + LOOP_FLAGS
        base = DIT_MODEL + ["--steps", "2", "--val-every", "0", "--ckpt-every", "0", "--run-dir", "{R}"]
        run = "train_dit"
    elif kind == "test_llama_flags":
        prog, table, base, run = "test_llama", TEST_LLAMA_FLAGS, ["--ref", "{W}/ref.lref"], ""
    else:
        prog, table, base, run = "test_dit", TEST_DIT_FLAGS, ["--ref", "{W}/ref.dref"], ""
    for name, ftype, fn, extra, kw in table:
        values = {"i": INT_VALUES, "l": INT_VALUES, "f": FLOAT_VALUES, "s": STR_VALUES}[ftype]
        keywords = ["--" + name] + (kw or [name])
        for s in values:
            e, _ = flag_value_expect(ftype, fn, s, name)
            skip = ""
            if e == "skip":
                e, skip = "ok", "a valid value that would run for hours"
            label = s if len(s) <= 16 else "%s...(%d chars)" % (s[:8], len(s))
            cases.append(Case(kind, "%s/--%s=%r" % (kind, name, label), prog, base + extra + ["--" + name, s], e,
                              keywords, "--%s %r" % (name, label), run=run, skip=skip))
        # the flag at the end of the command line with no value
        cases.append(Case(kind, "%s/--%s_missing_value" % (kind, name), prog, base + extra + ["--" + name], "error",
                          ["--" + name, "needs a value"], "--%s with no value, last on the command line" % name, run=run))
    # products of flags that the trainers multiply in 32 bits: B*T*dp (train_llama), batch*dp*grad-accum
    # (train_dit), at 2^31 and 2^32, alone and with --total-batch (a modulo by the product); --dp only with
    # --plan-only. A real run of these sizes cannot fit: an error; a plan may be printed or refused.
    if kind == "llama_flags":
        combos = [("B*T=2^32", ["--batch", str(1 << 28), "--seq", "16"]),
                  ("B*T=2^31", ["--batch", str(1 << 27), "--seq", "16"]),
                  ("B*T=2^32,total-batch", ["--batch", str(1 << 28), "--seq", "16", "--total-batch", "64"]),
                  ("B*T=2^31,total-batch", ["--batch", str(1 << 27), "--seq", "16", "--total-batch", "64"]),
                  ("B*T=2^32+32,total-batch", ["--batch", str((1 << 28) + 2), "--seq", "16", "--total-batch", "64"]),
                  ("B*T*dp=2^32,plan", ["--plan-only", "1", "--dp", str(1 << 24), "--batch", "16", "--seq", "16",
                                        "--total-batch", "64"]),
                  ("B*T*dp=2^32,plan,no-total", ["--plan-only", "1", "--dp", str(1 << 24), "--batch", "16", "--seq", "16"]),
                  ("dp=2^31-1,plan,zero", ["--plan-only", "1", "--dp", str(I32_MAX), "--zero", "1", "--batch", "1",
                                           "--seq", "1"]),
                  ("dp=2^31-1,plan,shard-vocab", ["--plan-only", "1", "--dp", str(I32_MAX), "--shard-vocab", "1",
                                                  "--batch", "1", "--seq", "1"])]
    elif kind == "dit_flags":
        combos = [("batch*dp=2^32,plan", ["--plan-only", "1", "--dp", str(1 << 25), "--batch", "128"]),
                  ("batch*dp=2^31,plan", ["--plan-only", "1", "--dp", str(1 << 24), "--batch", "128"]),
                  ("batch*dp=2^32,plan,total-batch", ["--plan-only", "1", "--dp", str(1 << 25), "--batch", "128",
                                                      "--total-batch", "256"]),
                  ("batch*dp=2^32,plan,grad-accum", ["--plan-only", "1", "--dp", str(1 << 25), "--batch", "128",
                                                     "--grad-accum", "2"]),
                  ("batch*dp=2^32-2,plan", ["--plan-only", "1", "--dp", str(I32_MAX), "--batch", "2"]),  # -2 clips
                  ("total-batch=2^31-4", ["--total-batch", str(I32_MAX - 3)]),
                  ("total-batch=2^30+2", ["--total-batch", str((1 << 30) + 2)]),
                  ("total-batch=2^31-4,plan", ["--plan-only", "1", "--total-batch", str(I32_MAX - 3)])]
    else:
        combos = []
    for cname, extra in combos:
        # a plan may be printed, but not of a product train_dit itself bounds (2^30 clips a step)
        plan = "--plan-only" in extra and cname != "batch*dp=2^32-2,plan"
        cases.append(Case(kind, "%s/product/%s" % (kind, cname), prog, base + extra, "either" if plan else "error",
                          ["total-batch", "batch", "dp", "at most", "grad-accum"], "product: " + " ".join(extra), run=run))
    # every integer flag in a --plan-only run (no data, no allocation: sizes only): no crash, no hang
    if kind in ("llama_flags", "dit_flags"):
        for name, ftype, fn, extra, kw in table:
            if ftype != "i" or name in ("plan-only",):
                continue
            for s in ["-1", "0", "2147483647", "2147483644", str(1 << 16), str(1 << 24), str(1 << 30)]:
                cases.append(Case(kind, "%s/plan/--%s=%s" % (kind, name, s), prog, base + extra + ["--plan-only", "1",
                                  "--" + name, s], "either", ["--" + name] + (kw or [name]),
                                  "--plan-only 1 --%s %s" % (name, s), run=run))
    # unknown flags, a stray argument
    for s in ["--frobnicate", "-x", "stray", "---steps", "--"]:
        cases.append(Case(kind, "%s/unknown=%r" % (kind, s), prog, base + [s, "1"], "error", [s.lstrip("-") or "--", "unknown",
                          "unexpected"], "unknown argument %r" % s, run=run))
    # random combinations of two bad values
    names = [t for t in table if t[0] not in ("run-dir",)]
    for i in range(20):
        picks = rng.sample(names, 2)
        args = list(base)
        exp = []
        kws = []
        note = []
        for name, ftype, fn, extra, kw in picks:
            values = {"i": INT_VALUES, "l": INT_VALUES, "f": FLOAT_VALUES, "s": STR_VALUES}[ftype]
            s = rng.choice(values)
            e, _ = flag_value_expect(ftype, fn, s, name)
            exp.append(e)
            args += extra + ["--" + name, s]
            kws += ["--" + name] + (kw or [name])
            note.append("--%s %r" % (name, s[:16]))
        if "skip" in exp:
            continue
        e = "error" if "error" in exp else ("either" if "either" in exp or len(set(exp)) > 1 else "either")
        cases.append(Case(kind, "%s/rand%d" % (kind, i), prog, args, e, kws, "random: " + " ".join(note), run=run))
    return cases


# ----------------------------------------------------------------------------
# running


ERROR_RE = re.compile(r"error|fail|cannot|must|expects|needs|unknown|unexpected|invalid|not a |too |exceeds|at most|"
                      r"mismatch|truncated|corrupt|refus|out of range|outside|disagree|does not|no files", re.I)
# training began: a step line, or the trainers' stop at a non-finite step ("error: step N: the loss is nan ...")
STEP_RE = re.compile(r"^step\s+-?\d+/\d+ \||^error: step -?\d+:", re.M)
STEP_LINE_RE = re.compile(r"^step\s+-?\d+/\d+ \|")
# bytes the programs never print raw (llmc/core/term.h): C0 but '\n' and '\t', DEL, and C1 (decoded from 0xc2 0x80..0x9f)
CONTROL_RE = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f]")
MEM_WORDS = ["memory", "malloc", "at most", "exceeds", "too large", "2^31", "overflow", "holds at most"]


def keyword_in(text, k):
    if re.fullmatch(r"[A-Za-z]{1,3}", k):  # a dimension's short name: as a word (D=, --D, 'D')
        return re.search(r"(?<![A-Za-z_])%s(?![A-Za-z_])" % re.escape(k), text) is not None
    return k.lower() in text.lower()


def snapshot(d):
    out = {}
    for root, dirs, files in os.walk(d):
        for name in dirs:
            out[os.path.relpath(os.path.join(root, name), d) + "/"] = None
        for name in files:
            p = os.path.join(root, name)
            st = os.lstat(p)
            if stat.S_ISLNK(st.st_mode):
                out[os.path.relpath(p, d)] = b"symlink -> " + os.readlink(p).encode()
            elif not stat.S_ISREG(st.st_mode):
                out[os.path.relpath(p, d)] = b"special %o" % st.st_mode
            else:
                with open(p, "rb") as f:
                    out[os.path.relpath(p, d)] = f.read()
    return out


TMP_RE = re.compile(r"\.tmp(\.[0-9a-f]+)?$")  # a writer's temporary file (llmc/core/run_dir.h)


def run_dir_problems(before, after, training_began):
    probs = []
    for k, old in before.items():
        if k not in after:
            # --start-over 1 moves the earlier run to set_aside/N/ once training begins: kept, byte for byte
            aside = [a for a in after if re.fullmatch(r"set_aside/\d+/" + re.escape(k), a)]
            if training_began and any(after[a] == old for a in aside):
                continue
            probs.append("%s deleted" % k)
            continue
        new = after[k]
        if old is None or new == old:
            continue
        if training_began and not k.startswith("ckpt_"):
            continue
        if new.startswith(old):
            probs.append("%s appended (+%d bytes)" % (k, len(new) - len(old)))
        else:
            probs.append("%s rewritten (%d -> %d bytes)" % (k, len(old), len(new)))
    for k in after:
        if k not in before:
            if training_began and not TMP_RE.search(k):
                continue
            probs.append("%s created" % k)
    return probs


@dataclass
class Result:
    case: Case
    rc: object
    seconds: float
    output: str
    problems: list
    argv: list
    cdir: str


def shell_cmd(argv, cdir):
    return "cd %s && OMP_NUM_THREADS=1 %s" % (shlex.quote(cdir), " ".join(shlex.quote(a) for a in argv))


def run_case(case, ctx):
    safe = re.sub(r"[^A-Za-z0-9_.=+-]", "_", case.name)[:150]
    cdir = os.path.join(ctx.work, "cases", "%s_%s" % (safe, hashlib.sha1(case.name.encode()).hexdigest()[:8]))
    os.makedirs(cdir, exist_ok=True)
    for fn, data in case.files.items():
        p = os.path.join(cdir, fn)
        os.makedirs(os.path.dirname(p), exist_ok=True)
        with open(p, "wb") as f:
            f.write(data)
    if case.kind == "signals":  # its own runner and judge (the signals block above)
        t0 = time.time()
        rc, output = run_signal_case(case, ctx, cdir)
        problems = judge_signal(case, rc, output, cdir, ctx)
        if not ctx.keep:
            shutil.rmtree(cdir, ignore_errors=True)
        return Result(case, rc, time.time() - t0, output, problems, [ctx.bins[case.prog]] + case.args, cdir)
    rdir = os.path.join(cdir, "run")
    before = None
    if case.run:
        shutil.copytree(ctx.pristine[case.run], rdir)
        if case.auto_ckpt is not None:
            with open(os.path.join(rdir, "ckpt_000009.bin"), "wb") as f:
                f.write(case.auto_ckpt)
    for fn in case.fifos:  # kind inputs: after the run directory's copy, which would try to read them
        os.mkfifo(os.path.join(cdir, fn))
    if case.setup:
        case.setup(rdir, cdir, ctx)
    if case.run:
        before = snapshot(rdir)
    args = list(case.args)
    # the run directory holds an earlier run: a fresh run there must say --start-over 1 (which moves that run aside
    # once the inputs are accepted), or it is refused (llmc/train/run_open.h)
    if case.run and "--resume" not in args and "--start-over" not in args:
        args = ["--start-over", "1"] + args  # (first: a case may end on a flag without its value)
    argv = [ctx.bins[case.prog]] + [a.format(C=cdir, R=rdir, W=ctx.work) for a in args]
    out_path = os.path.join(cdir, "output.txt")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", **case.env)
    # the limits as a wrapper (no preexec_fn under threads): address space, file size; exec keeps rc and signals
    lim = "ulimit -v %d && ulimit -f %d && exec \"$@\"" % (int(ctx.mem_gib * 1024 * 1024), 512 * 1024 * 2)
    t0 = time.time()
    rc = None
    with open(out_path, "wb") as out:
        p = subprocess.Popen(["bash", "-c", lim, "fuzz"] + argv, cwd=cdir, stdout=out, stderr=subprocess.STDOUT,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        try:
            rc = p.wait(timeout=ctx.timeout)
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "timeout"
    secs = time.time() - t0
    with open(out_path, "rb") as f:
        raw = f.read(1 << 20)
    output = raw.decode("utf-8", "replace")
    problems = judge(case, rc, output, rdir if case.run else None, before, ctx)
    if case.post and rc != "timeout":
        problems += case.post(rdir, cdir, output)
    if not ctx.keep:
        shutil.rmtree(cdir, ignore_errors=True)
    return Result(case, rc, secs, output, problems, argv, cdir)


def error_text(output):
    lines = output.splitlines()
    hits = [i for i, l in enumerate(lines) if ERROR_RE.search(l) and not STEP_LINE_RE.match(l)]
    if not hits:
        return ""
    return "\n".join(lines[hits[0]:hits[0] + 6])


def judge(case, rc, output, rdir, before, ctx):
    probs = []
    if rc == "timeout":
        return ["timeout after %g s (hang, or far too slow for its input)" % ctx.timeout]
    if rc < 0:
        try:
            name = signal.Signals(-rc).name
        except ValueError:
            name = str(-rc)
        return ["killed by signal %s" % name]
    if rc > 123:
        probs.append("exit code %d (> 123)" % rc)
    raw = CONTROL_RE.search(output)
    if raw:  # what the programs print is escaped (llmc/core/term.h): a tokenizer or a file name must not drive the terminal
        probs.append("raw control byte %r in the output: ...%r" % (raw.group(0), output[max(0, raw.start() - 40):raw.start() + 10]))
    if rc == 0 and case.expect == "error":
        probs.append("exit 0 on bad input")
    if rc != 0 and case.expect == "ok":
        probs.append("exit %d on a valid input" % rc)
    began = STEP_RE.search(output) is not None
    if rc != 0:
        text = error_text(output)
        if not text.strip():
            probs.append("exit %d without a message" % rc)
        elif case.expect == "error" and began:
            # an invalid input must be refused at start-up, not found out by training on it (a NaN, say)
            probs.append("refused only after training began: " + text.splitlines()[0][:160])
        elif not began:  # a run that fails once training began (a NaN) reports that, not the input's name
            kws = list(case.keywords) + (MEM_WORDS if case.expect != "ok" else [])
            if case.keywords and not any(keyword_in(text, k) for k in kws):
                probs.append("vague message: names none of %s" % ", ".join(repr(k) for k in case.keywords[:4]))
        if rdir is not None:
            rp = run_dir_problems(before, snapshot(rdir), began)
            if rp:
                probs.append("run dir touched: " + "; ".join(rp))
    return probs


# ----------------------------------------------------------------------------
# signals (llmc/core/signals.h): not malformed input but a fault from outside, in its own kind so
# that the other kinds' merges stay apart. A short fixed list, run in full whatever --cases
# (FULL_KINDS): each stop signal once per trainer mid-run (exit 75, the message naming the signal,
# the stopped step's checkpoint written, no .tmp), a second signal (exit 1 at once, its
# message), and stdout a closed pipe (exit 0, main.log whole and saying stdout is gone).

KINDS += ["signals"]
FULL_KINDS = ["rundir", "inputs", "signals"]  # run in full whatever --cases: short, fixed lists
STOP_SIGNALS = ["TERM", "INT", "HUP", "USR1"]
STOPPED_RE = re.compile(r"^stopped by SIG(\w+).* after step (\d+) of \d+: checkpoint (\S+) written; --resume auto", re.M)


def signal_cases(ctx, rng):
    out = []
    for prog, model in (("train_llama", LLAMA_MODEL + ["--train-data", "{W}/train.bin"]), ("train_dit", DIT_MODEL)):
        # steps enough to run for minutes: the signal, not the end, stops it (else: a timeout)
        run = model + ["--val-every", "0", "--log-every", "100", "--run-dir", "{C}/run"]
        long_run = run + ["--steps", "1000000", "--ckpt-every", "0"]
        for sig in STOP_SIGNALS:
            out.append(Case("signals", "signals/%s/SIG%s" % (prog, sig), prog, long_run, "stopped", ["SIG" + sig],
                            "SIG%s after the first step line (--ckpt-every 0: the stop writes one anyway)" % sig))
        out.append(Case("signals", "signals/%s/second_signal" % prog, prog, long_run, "second", ["second stop signal"],
                        "SIGTERM then SIGINT at once: the second ends it without waiting for the step"))
        out.append(Case("signals", "signals/%s/closed_stdout" % prog, prog, run + ["--steps", "30", "--log-every", "1"],
                        "ok", [], "stdout a pipe closed before the first line"))
    return out


def run_signal_case(case, ctx, cdir):
    """Runs a signals case: the program in its own session, its output to a file (stdout a closed
    pipe for closed_stdout); the signals sent once the output has a step line. Returns (rc, output)."""
    argv = [ctx.bins[case.prog]] + [a.format(C=cdir, W=ctx.work) for a in case.args]
    out_path = os.path.join(cdir, "output.txt")
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    closed = case.name.endswith("closed_stdout")
    with open(out_path, "wb") as out:
        p = subprocess.Popen(argv, cwd=cdir, stdout=subprocess.PIPE if closed else out, stderr=out,
                             stdin=subprocess.DEVNULL, env=env, start_new_session=True)
        if closed:
            p.stdout.close()
        t0 = time.time()
        try:
            if not closed:
                while p.poll() is None and time.time() - t0 < ctx.timeout:
                    with open(out_path, "rb") as f:
                        if re.search(r"^step\s+\d+/\d+ \|", f.read().decode("utf-8", "replace"), re.M):
                            break
                    time.sleep(0.02)
                if p.poll() is None:
                    sigs = ["TERM", "INT"] if case.expect == "second" else [case.keywords[0][3:]]
                    for sig in sigs:
                        os.kill(p.pid, getattr(signal, "SIG" + sig))
            rc = p.wait(timeout=max(1.0, ctx.timeout - (time.time() - t0)))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
            rc = "timeout"
    with open(out_path, "rb") as f:
        output = f.read(1 << 20).decode("utf-8", "replace")
    return rc, output


def judge_signal(case, rc, output, cdir, ctx):
    """exit 75 with the stop line and its checkpoint for a stop, exit 1 with its message for a
    second signal, exit 0 with main.log whole for a closed stdout; never a death by a signal."""
    if rc == "timeout":
        return ["timeout after %g s: the signal did not stop it" % ctx.timeout]
    if rc < 0:
        return ["killed by signal %s" % signal.Signals(-rc).name]
    rdir = os.path.join(cdir, "run")
    probs = []
    if case.expect == "stopped":
        m = STOPPED_RE.search(output)
        if rc != 75:
            probs.append("exit %d, expected 75 (stopped by a signal after writing a checkpoint)" % rc)
        if not m or "SIG" + m.group(1) != case.keywords[0]:
            probs.append("no stop line naming %s" % case.keywords[0])
        elif not os.path.exists(os.path.join(rdir, "ckpt_%06d.bin" % int(m.group(2)))):
            probs.append("no checkpoint of the stopped step %s" % m.group(2))
    elif case.expect == "second":
        if rc != 1 or "second stop signal" not in output:
            probs.append("exit %d, expected 1 with the second signal's message" % rc)
    else:
        log = open(os.path.join(rdir, "main.log"), errors="replace").read() if os.path.exists(os.path.join(rdir, "main.log")) else ""
        if rc != 0:
            probs.append("exit %d with stdout closed, expected 0" % rc)
        if "\ndone:" not in log or log.count("stdout is gone") != 1:
            probs.append("main.log is not whole, or does not say once that stdout is gone")
    if os.path.isdir(rdir) and any(n.endswith(".tmp") for n in os.listdir(rdir)):
        probs.append("a .tmp left in the run directory")
    return probs


def select_full_kinds(by_kind, kinds, picked, names):
    """The cases of FULL_KINDS, every one, whatever --cases samples."""
    for k in FULL_KINDS:
        if k in kinds:
            for c in by_kind[k]:
                if c.name not in names:
                    picked.append(c)
                    names.add(c.name)


# ----------------------------------------------------------------------------
# set-up: the valid inputs


class Ctx:
    pass


def must(argv, what, cwd):
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(argv, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env, timeout=120)
    if p.returncode != 0:
        sys.stderr.write(p.stdout.decode("utf-8", "replace")[-3000:])
        sys.exit("fuzz: set-up failed: %s (exit %d): %s" % (what, p.returncode, " ".join(argv)))


def setup(args):
    ctx = Ctx()
    ctx.timeout, ctx.mem_gib, ctx.keep = args.timeout, args.mem_gib, bool(args.keep)
    bin_dir = os.path.abspath(args.bin_dir)
    ctx.bins = {k: os.path.join(bin_dir, v) for k, v in PROGS.items()}
    for k, p in ctx.bins.items():
        if not os.access(p, os.X_OK):
            sys.exit("fuzz: %s is missing (make train_llama_cpu test_llama_cpu train_dit_cpu test_dit_cpu)" % p)
    if args.keep:
        ctx.work = os.path.abspath(args.keep)
        shutil.rmtree(os.path.join(ctx.work, "cases"), ignore_errors=True)
        os.makedirs(ctx.work, exist_ok=True)
    else:
        ctx.work = tempfile.mkdtemp(prefix="llmc_fuzz.")
    W = ctx.work
    base_rng = random.Random(12345)  # the valid inputs: the same bytes whatever --seed
    ctx.tokens = [1] + [base_rng.randrange(2, 256) for _ in range(SHARD_TOKENS)]
    with open(os.path.join(W, "train.bin"), "wb") as f:
        f.write(shard_bytes(ctx.tokens))
    per = CLIP_SHAPE[0] * CLIP_SHAPE[1] * CLIP_SHAPE[2] * CLIP_SHAPE[3]
    ctx.clip_labels = [i % CLIP_CLASSES for i in range(CLIP_COUNT)]
    ctx.clip_u8 = [base_rng.randrange(256) for _ in range(CLIP_COUNT * per)]
    ctx.clip_f32 = [struct.unpack("<f", struct.pack("<f", base_rng.uniform(-1, 1)))[0] for _ in range(CLIP_COUNT * per)]
    with open(os.path.join(REPO, LREF_FILE), "rb") as f:
        ctx.lref = f.read()
    with open(os.path.join(REPO, DREF_FILE), "rb") as f:
        ctx.dref = f.read()
    for name, data in [("ref.lref", ctx.lref), ("ref.dref", ctx.dref), ("clips_u8.bin", clip_bytes(ctx.clip_labels, ctx.clip_u8, 0)),
                       ("clips_f32.bin", clip_bytes(ctx.clip_labels, ctx.clip_f32, 1))]:
        with open(os.path.join(W, name), "wb") as f:
            f.write(data)
    with open(os.path.join(W, "train.bin"), "rb") as f:
        ctx.shard_bytes = f.read()
    other = bytearray(ctx.shard_bytes)
    other[1024] = (other[1024] + 1) % 256  # one token: other data, the same size
    ctx.other_shard = bytes(other)
    ctx.pristine = {"train_llama": os.path.join(W, "pristine_llama"), "train_dit": os.path.join(W, "pristine_dit")}
    ctx.ckpt_bytes = {}
    # made again every time (--keep reuses its directory, and the programs may have changed since)
    shutil.rmtree(ctx.pristine["train_llama"], ignore_errors=True)
    shutil.rmtree(ctx.pristine["train_dit"], ignore_errors=True)
    must([ctx.bins["train_llama"]] + LLAMA_MODEL + ["--steps", "2", "--val-every", "0", "--ckpt-every", "1",
                                                    "--train-data", "train.bin", "--run-dir", ctx.pristine["train_llama"]],
         "the 2-step train_llama run", W)
    must([ctx.bins["train_dit"]] + DIT_MODEL + ["--steps", "2", "--val-every", "0", "--ckpt-every", "1",
                                                "--run-dir", ctx.pristine["train_dit"]], "the 2-step train_dit run", W)
    for prog in ["train_llama", "train_dit"]:
        with open(os.path.join(ctx.pristine[prog], "ckpt_000002.bin"), "rb") as f:
            ctx.ckpt_bytes[prog] = f.read()
    return ctx


def sanity(ctx):
    """The unmutated inputs through the cases' command lines must pass, or nothing below means anything."""
    d = tempfile.mkdtemp(prefix="base.", dir=ctx.work)
    W = ctx.work
    cmds = [
        ([ctx.bins["train_llama"]] + LLAMA_MODEL + ["--steps", "3", "--val-every", "0", "--ckpt-every", "1", "--train-data",
                                                    W + "/train.bin", "--run-dir", d + "/l1", "--resume",
                                                    ctx.pristine["train_llama"] + "/ckpt_000002.bin"], "train_llama --resume"),
        ([ctx.bins["train_dit"]] + DIT_MODEL + ["--steps", "3", "--val-every", "0", "--ckpt-every", "1", "--run-dir",
                                                d + "/d1", "--resume", ctx.pristine["train_dit"] + "/ckpt_000002.bin"],
         "train_dit --resume"),
        ([ctx.bins["train_dit"]] + DIT_MODEL + ["--data", W + "/clips_u8.bin", "--steps", "2", "--val-every", "2",
                                                "--run-dir", d + "/d2"], "train_dit on the uint8 clip file"),
        ([ctx.bins["train_dit"]] + DIT_MODEL + ["--data", W + "/clips_f32.bin", "--steps", "2", "--val-every", "2",
                                                "--run-dir", d + "/d3"], "train_dit on the float32 clip file"),
        ([ctx.bins["test_llama"], "--ref", W + "/ref.lref"], "test_llama on " + LREF_FILE),
        ([ctx.bins["test_dit"], "--ref", W + "/ref.dref"], "test_dit on " + DREF_FILE),
    ]
    for argv, what in cmds:
        must(argv, what, d)
    shutil.rmtree(d, ignore_errors=True)
    # every flag a program lists in --help is in this harness's table (a new flag is fuzzed
    # from the day it lands), and every numeric one has a row in FLAG_BOUNDS
    tables = {"train_llama": LLAMA_FLAGS + LOOP_FLAGS, "train_dit": DIT_FLAGS + LOOP_FLAGS,
              "test_llama": TEST_LLAMA_FLAGS, "test_dit": TEST_DIT_FLAGS}
    for prog, table in tables.items():
        out = subprocess.run([ctx.bins[prog], "--help"], capture_output=True, text=True).stdout
        listed = set(re.findall(r"^  --([A-Za-z0-9-]+)", out, re.M))
        missing = sorted(listed - {t[0] for t in table})
        if not listed or missing:
            raise SystemExit("fuzz: %s --help lists flags this harness does not fuzz: %s (add them to its table)"
                             % (prog, ", ".join(missing) or "(none parsed)"))
        unbounded = [t[0] for t in table if t[1] != "s" and t[0] not in FLAG_BOUNDS]
        if unbounded:
            raise SystemExit("fuzz: numeric flags without a row in llmc/core/flags.h FLAG_BOUNDS: %s" % ", ".join(unbounded))


# --- inputs: files that are not files (llmc/core/files.h), text that is not text (llmc/core/term.h)


def input_cases(ctx, rng):
    """A FIFO for every input flag, a reader-less FIFO and /dev/full for every output flag, control
    bytes in file names and tokenizer pieces. Fixed (rng unused): run in full every time."""
    llama = LLAMA_MODEL + ["--steps", "3", "--val-every", "0", "--ckpt-every", "1", "--run-dir", "{R}"]
    dit = DIT_MODEL + ["--steps", "3", "--val-every", "0", "--ckpt-every", "1", "--run-dir", "{R}"]
    data = ["--train-data", "{W}/train.bin"]
    cases = []

    def add(name, prog, args, expect, kw, note, fifos=(), files=None, run=None):
        if run is None:
            run = prog if prog.startswith("train_") else ""
        cases.append(Case("inputs", "inputs/%s" % name, prog, args, expect, kw, note, files=files or {}, run=run,
                          fifos=list(fifos)))

    # every input flag given a FIFO: refused at once ("... is a FIFO, not a regular file"), never a blocking open
    fifo_in = [("llama_train_data", "train_llama", llama + ["--train-data", "{C}/in.fifo"]),
               ("llama_val_data", "train_llama", llama + data + ["--val-every", "1", "--val-data", "{C}/in.fifo"]),
               ("llama_tokenizer", "train_llama", llama + data + ["--sample-every", "1", "--tokenizer", "{C}/in.fifo"]),
               ("llama_resume", "train_llama", llama + data + ["--resume", "{C}/in.fifo"]),
               ("llama_init_from", "train_llama", llama + data + ["--init-from", "{C}/in.fifo"]),
               ("dit_data", "train_dit", dit + ["--data", "{C}/in.fifo"]),
               ("dit_resume", "train_dit", dit + ["--resume", "{C}/in.fifo"]),
               ("dit_init_from", "train_dit", dit + ["--init-from", "{C}/in.fifo"]),
               ("test_llama_ref", "test_llama", ["--ref", "{C}/in.fifo"]),
               ("test_dit_ref", "test_dit", ["--ref", "{C}/in.fifo"])]
    for name, prog, args in fifo_in:
        add("fifo_in/" + name, prog, args, "error", ["FIFO"], "a FIFO as an input file", fifos=["in.fifo"])
    # --resume auto: a FIFO named like the newest checkpoint refuses the run at once, naming it (never read, never
    # overwritten: llmc/train/run_open.h)
    for prog, args in [("train_llama", llama + data), ("train_dit", dit)]:
        add("fifo_in/%s_resume_auto" % prog, prog, args + ["--resume", "auto"], "error", ["ckpt_000009.bin"],
            "a FIFO named ckpt_000009.bin in the run directory (--resume auto)", fifos=["run/ckpt_000009.bin"])
    # every output flag: a FIFO no process reads fails at once (ENXIO); /dev/full fails at the write or close
    lplan = LLAMA_MODEL + ["--plan-only", "1"]
    dplan = DIT_MODEL + ["--plan-only", "1"]
    outs = [("llama_plan_json", "train_llama", lplan, "--plan-json"),
            ("dit_plan_json", "train_dit", dplan, "--plan-json"),
            ("llama_fit_candidates", "train_llama", lplan + ["--fit-memory", "1"], "--fit-candidates"),
            ("dit_fit_candidates", "train_dit", dplan + ["--fit-memory", "1"], "--fit-candidates"),
            ("test_llama_dump", "test_llama", ["--ref", "{W}/ref.lref"], "--dump")]
    for name, prog, args, flag in outs:
        add("fifo_out/" + name, prog, args + [flag, "{C}/out.fifo"], "error", [flag.lstrip("-")],
            "a FIFO without a reader as " + flag, fifos=["out.fifo"], run="")
        add("dev_full/" + name, prog, args + [flag, "/dev/full"], "error", ["No space left"],
            "/dev/full as " + flag, run="")
    # control bytes in file names: the message names the file, escaped (the judge refuses raw control bytes)
    esc = "\x1b]0;title\x07\x1b[2J\r"
    add("esc_name/llama_train_data", "train_llama", llama + ["--train-data", "{C}/no" + esc + ".bin"], "error",
        ["\\x1b"], "ESC, BEL and CR in a missing shard's name")
    add("esc_name/llama_tokenizer", "train_llama", llama + data + ["--sample-every", "1", "--tokenizer",
                                                                    "{C}/no" + esc + ".bin"], "error",
        ["\\x1b"], "ESC, BEL and CR in a missing tokenizer's name")
    add("esc_name/dit_data", "train_dit", dit + ["--data", "{C}/no" + esc + ".bin"], "error", ["\\x1b"],
        "ESC, BEL and CR in a missing clip file's name")
    add("esc_name/test_llama_ref", "test_llama", ["--ref", "{C}/no" + esc + ".lref"], "error", ["\\x1b"],
        "ESC, BEL and CR in a missing reference's name")
    add("esc_name/run_dir", "train_llama", LLAMA_MODEL + ["--steps", "1", "--val-every", "0", "--run-dir",
                                                          "{C}/plain/run" + esc] + data, "error", ["\\x1b"],
        "ESC, BEL and CR in a run directory that cannot be created (under a regular file)", files={"plain": b""},
        run="")
    # control bytes in a tokenizer's pieces: the sample is printed escaped
    tok = struct.pack("<i", 16)
    for i in range(256):
        p = [b"\x1b[31mR%d" % i, b"\xc2\x9b2J%d" % i, b" \x07b\x7f%d" % i, b"\r\x08ok%d" % i][i % 4]
        tok += struct.pack("<fi", -float(i), len(p)) + p
    add("esc_tokenizer/sample", "train_llama", llama + data + ["--sample-every", "1", "--sample-len", "24",
                                                               "--tokenizer", "{C}/tok.bin"], "ok", ["tok.bin"],
        "a tokenizer whose pieces hold ESC, C1 CSI, BEL, DEL, CR, BS", files={"tok.bin": tok})
    return cases


def all_cases(ctx, seed):
    out = {}
    gens = {
        "llama_ckpt": lambda r: ckpt_cases(ctx, r, True),
        "dit_ckpt": lambda r: ckpt_cases(ctx, r, False),
        "shard": lambda r: shard_cases(ctx, r),
        "clips": lambda r: clip_cases(ctx, r),
        "lref": lambda r: ref_cases(ctx, r, True),
        "dref": lambda r: ref_cases(ctx, r, False),
        "llama_flags": lambda r: flag_cases(ctx, r, "llama_flags"),
        "dit_flags": lambda r: flag_cases(ctx, r, "dit_flags"),
        "test_llama_flags": lambda r: flag_cases(ctx, r, "test_llama_flags"),
        "test_dit_flags": lambda r: flag_cases(ctx, r, "test_dit_flags"),
        "rundir": lambda r: rundir_cases(ctx),
        "inputs": lambda r: input_cases(ctx, r),
    }
    gens["signals"] = lambda r: signal_cases(ctx, r)
    for k in KINDS:
        cases = gens[k](random.Random("%d/%s" % (seed, k)))
        seen = {}
        for c in cases:  # names must be unique: a repeated mutation is run once
            seen.setdefault(c.name, c)
        out[k] = list(seen.values())
    return out


def load_regressions():
    p = os.path.join(HERE, "fuzz_corpus", "regressions.txt")
    if not os.path.exists(p):
        return []
    names = []
    for line in open(p):
        line = line.split("#", 1)[0].strip()
        if line:
            names.append(line)
    return names


def select(by_kind, args):
    kinds = KINDS
    if args.only:
        kinds = [k.strip() for k in args.only.split(",")]
        bad = [k for k in kinds if k not in KINDS]
        if bad:
            sys.exit("fuzz: unknown --only %s (kinds: %s)" % (",".join(bad), ", ".join(KINDS)))
    pool = [c for k in kinds for c in by_kind[k]]
    if args.case:
        return [c for c in pool if any(fnmatch.fnmatchcase(c.name, pat) or c.name == pat for pat in args.case)]
    if args.cases == 0 or args.cases >= len(pool):
        return pool
    rng = random.Random(args.seed)
    queues = {k: rng.sample(by_kind[k], len(by_kind[k])) for k in kinds if k not in FULL_KINDS}
    # the fixed kinds in full, beside the N sampled ones
    picked, names = [], set()
    select_full_kinds(by_kind, kinds, picked, names)
    every = {c.name for k in KINDS for c in by_kind[k]}
    for name in load_regressions():
        if name not in every:
            sys.exit("fuzz: dev/test/fuzz_corpus/regressions.txt names %r, which is no case (see --list)" % name)
        for c in pool:
            if c.name == name and name not in names:
                picked.append(c)
                names.add(name)
    want = len(picked) + args.cases
    while len(picked) < want and any(queues.values()):
        for k in queues:
            if queues[k] and len(picked) < want:
                c = queues[k].pop()
                if c.name not in names:
                    picked.append(c)
                    names.add(c.name)
    return picked


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cases", type=int, default=800, help="cases to sample (0: all)")
    ap.add_argument("--only", help="comma-separated kinds: " + ", ".join(KINDS))
    ap.add_argument("--case", action="append", help="run only the cases of this name (glob); repeatable")
    ap.add_argument("--bin-dir", default=REPO, help="where the *_cpu programs are (default: the repository root)")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 2)
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds per case")
    ap.add_argument("--mem-gib", type=float, default=4.0, help="address-space limit per case")
    ap.add_argument("--keep", help="work in this directory and keep every case's files")
    ap.add_argument("--report", help="write every result as JSON lines to this file")
    ap.add_argument("--list", action="store_true", help="list the selected cases and exit")
    ap.add_argument("-v", "--verbose", action="store_true", help="print every case")
    args = ap.parse_args()
    t0 = time.time()
    ctx = setup(args)
    try:
        sanity(ctx)
        by_kind = all_cases(ctx, args.seed)
        cases = select(by_kind, args)
        if args.list:
            for c in cases:
                print("%-6s %s%s" % (c.expect, c.name, "  (not run: %s)" % c.skip if c.skip else ""))
            print("%d cases (of %d)" % (len(cases), sum(len(v) for v in by_kind.values())))
            return 0
        to_run = [c for c in cases if not c.skip]
        skipped = len(cases) - len(to_run)
        results = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, args.jobs)) as ex:
            for r in ex.map(lambda c: run_case(c, ctx), to_run):
                results.append(r)
                if args.verbose or args.case:
                    print("%s %-6s rc=%s %.2fs %s" % ("FAIL" if r.problems else "ok  ", r.case.expect, r.rc, r.seconds,
                                                      r.case.name))
                    if args.case:
                        print("    " + shell_cmd(r.argv, r.cdir))
                        for l in error_text(r.output).splitlines()[:4]:
                            print("    | " + l)
        failures = [r for r in results if r.problems]
        for r in failures:
            print("FAIL %s: %s" % (r.case.name, "; ".join(r.problems)))
            print("    input: %s; expected %s" % (r.case.note, r.case.expect))
            print("    cmd: " + shell_cmd(r.argv, r.cdir))
            print("    repro: python3 dev/test/fuzz.py --seed %d --case %s --keep /tmp/fuzz_repro" % (
                args.seed, shlex.quote(r.case.name)))
            for l in (error_text(r.output) or r.output.strip()[-400:]).splitlines()[:3]:
                print("    | " + l[:300])
        if args.report:
            with open(args.report, "w") as f:
                for r in results:
                    f.write(json.dumps({"name": r.case.name, "kind": r.case.kind, "expect": r.case.expect,
                                        "rc": r.rc, "seconds": round(r.seconds, 3), "problems": r.problems,
                                        "note": r.case.note, "cmd": shell_cmd(r.argv, r.cdir),
                                        "message": error_text(r.output)[:600]}) + "\n")
        by, what = {}, {}
        for r in failures:
            by[r.case.kind] = by.get(r.case.kind, 0) + 1
            for p in r.problems:
                key = re.sub(r"\(.*|: .*", "", p).strip()
                what[key] = what.get(key, 0) + 1
        if what:
            print("failures by problem (a case may have several):")
            for k, v in sorted(what.items(), key=lambda kv: -kv[1]):
                print("  %5d  %s" % (v, k))
        kinds = ", ".join("%s %d" % (k, v) for k, v in sorted(by.items()))
        print("fuzz: %d cases, %d failures%s (seed %d, %d valid values not run, %.0f s)" % (
            len(results), len(failures), " (" + kinds + ")" if kinds else "", args.seed, skipped, time.time() - t0))
        return 1 if failures else 0
    finally:
        if not args.keep:
            shutil.rmtree(ctx.work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
