#!/usr/bin/env python3
"""The helper of dev/test/compare_outputs.sh (read its header first): the shared input data,
the masks and the comparison of one case's two run directories. Standard library only, so
any python3 runs it.

    compare_outputs.py data DIR
        writes DIR/train.bin, DIR/val.bin (token shards, as scripts/write_toy_shard.py
        writes them: BOS then ids from random.Random(seed) in [2, 500)), DIR/tok512.bin (a
        llama2.c tokenizer of 512 pieces " t<id>", as dev/test/mpi_lib.sh's toy_tokenizer) and
        DIR/clips.bin (a uint8 RGB clip file, docs/formats.md: 30 clips 3x4x8x8, 3 classes)
    compare_outputs.py compare NAME KIND NCMD BASE_DIR NEW_DIR [--sub PATH=TOKEN]...
        compares every file of the two case directories (KIND: ok, or error when the case's
        last command must fail on both sides; NCMD: the case's commands, each of which must
        have run: an earlier command failing is not the expected error); prints "PASS NAME" or
        "FAIL NAME: <file>: <first difference, both sides>"; exit status 0 on PASS
    compare_outputs.py selftest
        the masks on made-up lines: timing and measured memory masked, every other digit
        of a step line (loss, lr, norm, tokens) still compared; exit status 0 when they hold
"""
import os
import random
import re
import struct
import sys

# ---------------------------------------------------------------------------
# what is masked (and nothing else): read a real main.log of each trainer before changing it

# metrics.jsonl: the keys that hold wall time or measured memory (llmc/step_loop.h: ms,
# peak_mem; train_llama: tok_per_s; train_dit: clips_per_s, tok_per_s). Removed from the line's
# text; every other key is compared as printed (%.9g), not parsed.
METRICS_DROP = re.compile(r', "(ms|tok_per_s|clips_per_s|peak_mem)": [-+0-9.eEinfa]+')

# the step line (llmc/step_loop.h step_log), whole, or it is not masked at all:
#   step     1/4 | loss 6.253532 | lr 5.000e-04 | norm 0.9161 | 61.3 ms | 4174 tok/s | 0.3K tok | ETA 0s | peak 18.6 MiB
#   step     1/4 | loss 1.651915 | lr 5.000e-04 | norm 1.3248 | 56.4 ms | 70.9 clips/s 2269 tok/s | ETA 0s | peak 12.9 MiB
# masked: the ms, the rates (tok/s, clips/s), the ETA and the measured peak; kept: step, loss,
# lr, norm, the tokens seen ("0.3K tok"), "(largest rank)"
STEP_LINE = re.compile(r'^(step +\d+/\d+ \| loss \S+ \| lr \S+ \| norm \S+ \| )\d+\.\d ms( \| .* \| ETA )[0-9hms]+'
                       r'( \| peak )\d+\.\d( MiB(?: \(largest rank\))?)$')
RATE = re.compile(r'\b\d+(?:\.\d+)? (tok/s|clips/s)')
# the run's last line (llmc/step_loop.h step_loop_done): the measured peak only, the planned arena kept
DONE_LINE = re.compile(r'^(done: peak memory measured )\d+\.\d( MiB \()')
# where a fatal error was raised (llmc/common.h fail_at: "  (at FILE:LINE)"): a refactor that
# moves code (or a file into a sub-folder) moves it; the message above it is compared
FAIL_AT = re.compile(r'^  \(at \S+:\d+\)$')
# Open MPI's own words when a job fails (never in a passing case): job ids, pids, host names
MPI_JOB = re.compile(r'\[\[\d+,\d+\],\d+\]')
MPI_PID = re.compile(r'\b(PID|pid|Process ID:?) \d+')


def mask_log_line(line, subs):
    for path, token in subs:
        line = line.replace(path, token)
    m = STEP_LINE.match(line)
    if m:
        line = m.group(1) + '<ms> ms' + RATE.sub(r'<rate> \1', m.group(2)) + '<eta>' + m.group(3) + '<mem>' + m.group(4)
    line = DONE_LINE.sub(r'\1<mem>\2', line)
    if FAIL_AT.match(line):
        line = '  (at <source location>)'
    line = MPI_JOB.sub('[[<job>]]', line)
    line = MPI_PID.sub(r'\1 <pid>', line)
    return line


def mask_metrics_line(line, subs):
    for path, token in subs:
        line = line.replace(path, token)
    return METRICS_DROP.sub('', line)


def is_log(rel):
    base = os.path.basename(rel)
    return base == 'main.log' or re.match(r'^(out|err)_\d+\.txt$', base) is not None


def is_metrics(rel):
    return os.path.basename(rel) == 'metrics.jsonl'


# ---------------------------------------------------------------------------
# data

def write_shard(path, n, seed, max_id):
    r = random.Random(seed)
    toks = [1] + [r.randrange(2, max_id) for _ in range(n)]
    with open(path, 'wb') as f:
        f.write(struct.pack('<256i', *([20240520, 1, len(toks)] + [0] * 253)))
        f.write(struct.pack('<%dH' % len(toks), *toks))


def write_tokenizer(path):
    with open(path, 'wb') as f:
        f.write(struct.pack('<i', 16))
        for i in range(512):
            p = b' t%d' % i
            f.write(struct.pack('<fi', -float(i), len(p)) + p)


def write_clips(path, n=30, C=3, Fr=4, Hi=8, Wi=8, nc=3, seed=7):
    # smooth-ish moving blobs, so that the clips are not pure noise; uint8 encoding
    r = random.Random(seed)
    with open(path, 'wb') as f:
        f.write(struct.pack('<256i', *([20261125, 1, n, C, Fr, Hi, Wi, nc, 0] + [0] * 247)))
        for i in range(n):
            label = i % nc
            cy, cx, vy, vx = r.uniform(0, Hi), r.uniform(0, Wi), r.uniform(-1, 1), r.uniform(-1, 1)
            vals = bytearray()
            for c in range(C):
                for t in range(Fr):
                    for y in range(Hi):
                        for x in range(Wi):
                            d2 = (y - cy - t * vy) ** 2 + (x - cx - t * vx) ** 2
                            v = 255.0 / (1.0 + d2 / (2.0 + label)) * (0.5 + 0.25 * c) + r.uniform(0, 20)
                            vals.append(max(0, min(255, int(v))))
            f.write(struct.pack('<i', label) + bytes(vals))


def cmd_data(out):
    os.makedirs(out, exist_ok=True)
    write_shard(os.path.join(out, 'train.bin'), 20000, 1, 500)
    write_shard(os.path.join(out, 'val.bin'), 5000, 2, 500)
    write_tokenizer(os.path.join(out, 'tok512.bin'))
    write_clips(os.path.join(out, 'clips.bin'))
    return 0


# ---------------------------------------------------------------------------
# comparison

def files_of(root):
    out = set()
    for d, dirs, files in os.walk(root):
        dirs.sort()
        for f in files:
            out.add(os.path.relpath(os.path.join(d, f), root))
        for x in dirs:  # an empty directory is an output too (a run directory made and left empty)
            p = os.path.join(d, x)
            if not os.listdir(p):
                out.add(os.path.relpath(p, root) + '/')
    return out


def short(s, n=150):
    s = s.rstrip('\n')
    return s if len(s) <= n else s[:n] + '...'


def first_text_diff(a_lines, b_lines):
    for i in range(max(len(a_lines), len(b_lines))):
        a = a_lines[i] if i < len(a_lines) else None
        b = b_lines[i] if i < len(b_lines) else None
        if a != b:
            fa = '<no line: file ends>' if a is None else repr(short(a))
            fb = '<no line: file ends>' if b is None else repr(short(b))
            return 'line %d: base %s | new %s' % (i + 1, fa, fb)
    return None


def first_byte_diff(a, b):
    n = min(len(a), len(b))
    # whole 64 KiB blocks first: checkpoints are megabytes
    i = 0
    while i < n and a[i:i + 65536] == b[i:i + 65536]:
        i += 65536
    while i < n and a[i] == b[i]:
        i += 1
    if i < n:
        return 'byte %d of %d/%d: base 0x%02x | new 0x%02x' % (i, len(a), len(b), a[i], b[i])
    return 'sizes differ: base %d bytes | new %d bytes (equal up to byte %d)' % (len(a), len(b), n)


def compare_file(rel, pa, pb, subs):
    with open(pa, 'rb') as f:
        a = f.read()
    with open(pb, 'rb') as f:
        b = f.read()
    if is_log(rel) or is_metrics(rel):
        mask = mask_metrics_line if is_metrics(rel) else mask_log_line
        la = [mask(l, subs) for l in a.decode('utf-8', 'replace').split('\n')]
        lb = [mask(l, subs) for l in b.decode('utf-8', 'replace').split('\n')]
        return first_text_diff(la, lb)
    if a == b:
        return None
    return first_byte_diff(a, b)


def rc_of(d, k):
    try:
        with open(os.path.join(d, 'rc_%d.txt' % k)) as f:
            return int(f.read().strip())
    except (OSError, ValueError):
        return None


def err_tail(d, k):
    try:
        with open(os.path.join(d, 'err_%d.txt' % k), errors='replace') as f:
            lines = [l.strip() for l in f if l.strip()]
    except OSError:
        return ''
    pick = [l for l in lines if l.startswith('error')] or lines[-1:]
    return short(pick[0], 200) if pick else ''


def check_exits(kind, ncmd, a_dir, b_dir):
    """None when every command ran and ended as the case says, else why not."""
    ka = sorted(int(m.group(1)) for f in os.listdir(a_dir) for m in [re.match(r'^rc_(\d+)\.txt$', f)] if m)
    kb = sorted(int(m.group(1)) for f in os.listdir(b_dir) for m in [re.match(r'^rc_(\d+)\.txt$', f)] if m)
    if not ka or not kb:
        return 'no command ran (base %d, new %d commands; a broken case?)' % (len(ka), len(kb))
    for side, d, ks in (('base', a_dir, ka), ('new', b_dir, kb)):
        for k in ks:
            rc = rc_of(d, k)
            last = k == ncmd
            if kind == 'error' and last:
                if rc == 0:
                    return 'command %d: %s exit 0, but the case expects an error' % (k, side)
                if rc is None or rc >= 124:
                    return 'command %d: %s exit %s: a crash, time-out or signal, not a clean error' % (k, side, rc)
            elif rc != 0:
                return 'command %d: %s exit %s: %s' % (k, side, rc, err_tail(d, k))
        if ks != list(range(1, ncmd + 1)):
            return '%s ran %d of the case\'s %d commands' % (side, len(ks), ncmd)
    return None


def cmd_compare(name, kind, ncmd, a_dir, b_dir, subs):
    why = check_exits(kind, ncmd, a_dir, b_dir)
    if why:
        print('FAIL %s: %s' % (name, why))
        return 1
    fa, fb = files_of(a_dir), files_of(b_dir)
    # the logs and metrics first (a loss line says more than a checkpoint's byte), then the rest
    order = sorted(fa | fb, key=lambda r: (not (is_log(r) or is_metrics(r)), r.count('/'), r))
    diffs = []
    for rel in order:
        if rel not in fb:
            diffs.append('%s: only in base' % rel)
        elif rel not in fa:
            diffs.append('%s: only in new' % rel)
        elif not rel.endswith('/'):
            d = compare_file(rel, os.path.join(a_dir, rel), os.path.join(b_dir, rel), subs)
            if d:
                diffs.append('%s: %s' % (rel, d))
    if diffs:
        more = ' (and %d more files differ)' % (len(diffs) - 1) if len(diffs) > 1 else ''
        print('FAIL %s: %s%s' % (name, diffs[0], more))
        return 1
    print('PASS %s' % name)
    return 0


# ---------------------------------------------------------------------------
# the masks' own check: what they hide and what they must not

def cmd_selftest():
    subs = [('/tmp/x/runs/base/c', '<CASE>'), ('/tmp/x', '<TMP>')]
    L = 'step     3/4 | loss 6.262319 | lr 5.500e-04 | norm 0.9520 | 28.9 ms | 8850 tok/s | 0.8K tok | ETA 0s | peak 18.8 MiB'
    D = ('step    12/300 | loss 1.663857 | lr 5.500e-04 | norm 1.4507 | 1.4 ms | 2916.9 clips/s 93341 tok/s | ETA 1m15s | '
         'peak 13.0 MiB (largest rank)')
    same = [  # pairs the masks must make equal
        (L, L.replace('28.9 ms', '31.0 ms').replace('8850 tok/s', '912 tok/s').replace('peak 18.8', 'peak 120.5')),
        (D, D.replace('1.4 ms', '100.4 ms').replace('2916.9 clips/s 93341', '29.9 clips/s 9341').replace('1m15s', '2h01m')),
        ('done: peak memory measured 18.8 MiB (process resident set after each step), arena 5.8 MiB planned',
         'done: peak memory measured 25.1 MiB (process resident set after each step), arena 5.8 MiB planned'),
        ('  (at llmc/story_sampler.h:36)', '  (at llmc/sampling/story_sampler.h:41)'),
        ('checkpoint: /tmp/x/runs/base/c/run/ckpt_000002.bin', 'checkpoint: <CASE>/run/ckpt_000002.bin'),
    ]
    differ = [  # pairs that must stay different: every digit that is not time or measured memory
        (L, L.replace('loss 6.262319', 'loss 6.262318')),
        (L, L.replace('lr 5.500e-04', 'lr 5.501e-04')),
        (L, L.replace('norm 0.9520', 'norm 0.9521')),
        (L, L.replace('0.8K tok', '0.9K tok')),
        (L, L.replace('step     3/4', 'step     4/4')),
        (D, D.replace('loss 1.663857', 'loss 1.663858')),
        (D, D.replace(' (largest rank)', '')),
        (L, L.replace('28.9 ms', '28.9 s')),  # a changed format is not a time to hide
        ('done: peak memory measured 18.8 MiB (process resident set after each step), arena 5.8 MiB planned',
         'done: peak memory measured 18.8 MiB (process resident set after each step), arena 5.9 MiB planned'),
        ('step     2 | val loss 6.246078', 'step     2 | val loss 6.246079'),
        ('error: --tp 4 must divide KV 2', 'error: --tp 4 must divide KV 3'),
        ('  (at llmc/story_sampler.h:36) extra', '  (at llmc/story_sampler.h:37) extra'),
    ]
    m_same = [('{"step": 1, "loss": 6.25353241, "ms": 61.333016, "tok_per_s": 4173.93464, "tokens": 256, "peak_mem": 19484672}',
               '{"step": 1, "loss": 6.25353241, "ms": 1.3, "tok_per_s": 3.9, "tokens": 256, "peak_mem": 1}')]
    m_differ = [('{"step": 1, "loss": 6.25353241, "ms": 61.333016, "arena_bytes": 6100736}',
                 '{"step": 1, "loss": 6.25353242, "ms": 61.333016, "arena_bytes": 6100736}'),
                ('{"step": 1, "loss": 6.25353241, "arena_bytes": 6100736}', '{"step": 1, "loss": 6.25353241, "arena_bytes": 6100737}'),
                ('{"step": 2, "val_loss": 1.62101362, "val_loss_low_t": 1.61149728}',
                 '{"step": 2, "val_loss": 1.62101362, "val_loss_low_t": 1.61149729}')]
    bad = 0
    for a, b in same:
        if mask_log_line(a, subs) != mask_log_line(b, subs):
            print('selftest: should be equal after masking:\n  %s\n  %s' % (mask_log_line(a, subs), mask_log_line(b, subs)))
            bad += 1
    for a, b in differ:
        if mask_log_line(a, subs) == mask_log_line(b, subs):
            print('selftest: the masks hide a real difference:\n  %s\n  %s' % (a, b))
            bad += 1
    for a, b in m_same:
        if mask_metrics_line(a, subs) != mask_metrics_line(b, subs):
            print('selftest: metrics should be equal after dropping the timing keys:\n  %s\n  %s' % (a, b))
            bad += 1
    for a, b in m_differ:
        if mask_metrics_line(a, subs) == mask_metrics_line(b, subs):
            print('selftest: the metrics mask hides a real difference:\n  %s\n  %s' % (a, b))
            bad += 1
    n = len(same) + len(differ) + len(m_same) + len(m_differ)
    print('mask selftest: %d of %d pairs as expected' % (n - bad, n))
    return 1 if bad else 0


def main(argv):
    if len(argv) >= 2 and argv[0] == 'data':
        return cmd_data(argv[1])
    if argv[:1] == ['selftest']:
        return cmd_selftest()
    if len(argv) >= 6 and argv[0] == 'compare':
        subs = []
        rest = argv[6:]
        while rest:
            if rest[0] != '--sub' or len(rest) < 2 or '=' not in rest[1]:
                sys.exit('compare_outputs.py: bad argument %r' % rest[0])
            p, t = rest[1].split('=', 1)
            subs.append((p, t))
            rest = rest[2:]
        subs.sort(key=lambda s: -len(s[0]))  # the longest path first
        if argv[2] not in ('ok', 'error'):
            sys.exit('compare_outputs.py: KIND must be ok or error, got %r' % argv[2])
        return cmd_compare(argv[1], argv[2], int(argv[3]), argv[4], argv[5], subs)
    sys.exit(__doc__)


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))
