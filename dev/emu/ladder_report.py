#!/usr/bin/env python3
"""
Turns the outputs of the dev/cuda ladders run under the emulator (dev/emu/run_ladders.sh)
into one line per check:

    PASS ladder.<prec>.<ladder>.v<N>[<shape>]           every check of that shape passed
    FAIL ladder.<prec>.<ladder>.v<N>[<shape>]: why      under the fwd or the rev schedule
    PASS ladder.<prec>.<ladder>.v<N>.schedules[...]      fwd and rev downloaded bitwise-equal data
    FAIL ladder.<prec>.<ladder>.v<N>.run: why            the program stopped early (emulator
                                                         error, FAIL(), crash, timeout)
    PASS ladder.coverage.<ladder>[...]                   every kernel of the ladder was launched

Usage: ladder_report.py OUT_DIR KERNELS_FILE
  OUT_DIR holds <prec>.<ladder>.v<N>[.<tag>].<sched>.{out,err,rc} for sched in fwd, rev;
  KERNELS_FILE is what `transform.py --ladders` printed ("ladder k1 k2 ...").

A "shape" is one header line of the ladder's output ("  v3 B=1 T=70 H=2 KV=2 hd=64") and
the check lines under it ("    forward out  n=...  PASS"). The verdicts are the ladder's
own: its check() compares with its own CPU reference at its own tolerances.
"""
import os
import re
import sys

# kernels that the ladders launch only outside LADDER_QUICK (too large to emulate)
NOT_LAUNCHED_OK = {
    ('adamw', 'fill_kernel'): 'fills the n > 2^31 buffer of the large-n norm test, skipped under LADDER_QUICK',
}

CHECK = re.compile(r'^    (\S.*?)\s{2,}(n=\d+.*|bitwise identical on a second run: (PASS|FAIL))')


def parse(path):
    """-> (groups, report, error): groups = [(name, [(check, ok, detail)])]"""
    groups, report, error, skipped = [], None, None, 0
    cur = None
    try:
        lines = open(path, errors='replace').read().splitlines()
    except OSError:
        lines = []
    for ln in lines:
        if ln.startswith('EMU_REPORT '):
            report = dict(kv.split('=', 1) for kv in ln.split()[1:])
        elif ln.startswith('EMU_ERROR '):
            error = ln[len('EMU_ERROR '):]
        elif ln.startswith('    '):
            m = CHECK.match(ln)
            if not m or cur is None:
                continue
            what = m.group(1).strip()
            rest = m.group(2)
            if m.group(3) is None:
                ok = re.search(r'\)\s+PASS\s*$', rest) is not None
            else:
                ok = m.group(3) == 'PASS'
            cur[1].append((what, ok, rest))
        elif ln.startswith('  ') and not ln.startswith('   '):
            h = ln.strip()
            if h.startswith('(') or h.startswith('note:'):
                continue
            if re.search(r': skipped \(', h):
                skipped += 1
                continue
            h = re.sub(r'\([^)]*\)', '', h)
            h = re.sub(r'^v\d+\s+', '', h).strip()
            cur = (','.join(h.split()), [])
            groups.append(cur)
    return groups, report, error, skipped


def why_check(what, detail):
    m = re.search(r'max abs (\S+).*worst err/tol (\S+)\)\s+FAIL\s*(\[.*\])?', detail)
    if m:
        return '%s: max abs %s, worst err/tol %s %s' % (what, m.group(1), m.group(2), m.group(3) or '')
    return '%s: %s' % (what, detail.strip())


def tail_reason(base):
    err = ''
    try:
        err = open(base + '.err', errors='replace').read()
    except OSError:
        pass
    lines = [l.strip() for l in err.splitlines() if l.strip()]
    for l in lines:
        if l.startswith('error:') or l.startswith('emu error:') or 'launch of' in l:
            return l
    return lines[-1] if lines else '(no message)'


def main():
    out_dir, kfile = sys.argv[1], sys.argv[2]
    own = {}
    for ln in open(kfile):
        p = ln.split()
        if p:
            own[p[0]] = p[1:]
    runs = {}
    for f in sorted(os.listdir(out_dir)):
        m = re.match(r'^(\w+)\.(\w+)\.v(\d+)((?:\.[\w-]+)?)\.(fwd|rev)\.rc$', f)
        if m:
            runs.setdefault((m.group(1), m.group(2), int(m.group(3)), m.group(4)), {})[m.group(5)] = \
                os.path.join(out_dir, f[:-3])
    lines, covered, skipped = [], {}, 0
    order = {'fp32': 0, 'bf16': 1}
    for key in sorted(runs, key=lambda k: (order.get(k[0], 9), k[1], k[2], k[3])):
        prec, lad, ver, tag = key
        base = 'ladder.%s.%s.v%d%s' % (prec, lad, ver, tag)
        res = {}
        for sched in ('fwd', 'rev'):
            b = runs[key].get(sched)
            if b is None:
                lines.append('FAIL %s.run: no %s run' % (base, sched))
                continue
            try:
                rc = int(open(b + '.rc').read().strip() or '-1')
            except (OSError, ValueError):
                rc = -1
            groups, report, error, sk = parse(b + '.out')
            if sched == 'fwd':
                skipped += sk
            res[sched] = (rc, groups, report, error, b)
            if report:
                for k in report.get('covered', '').split(','):
                    if k:
                        covered.setdefault(lad, set()).add(k)
        names = []
        for sched in ('fwd', 'rev'):
            for g in res.get(sched, (0, []))[1]:
                if g[0] not in names:
                    names.append(g[0])
        for name in names:
            verdict = None
            for sched in ('fwd', 'rev'):
                if sched not in res:
                    continue
                gs = [g for g in res[sched][1] if g[0] == name]
                if not gs:
                    verdict = verdict or 'missing under the %s schedule (the run stopped before it)' % sched
                    continue
                bad = [c for c in gs[0][1] if not c[1]]
                if bad:
                    verdict = verdict or '[%s schedule] %s' % (sched, why_check(bad[0][0], bad[0][2]))
                elif not gs[0][1]:
                    verdict = verdict or 'no check ran under the %s schedule' % sched
                elif gs[0] is res[sched][1][-1] and (res[sched][2] is None or res[sched][3]):
                    # the last group of a run that stopped: its checks may be incomplete
                    verdict = verdict or 'the %s run stopped during this shape' % sched
            lines.append(('FAIL %s[%s]: %s' % (base, name, verdict)) if verdict else ('PASS %s[%s]' % (base, name)))
        for sched in ('fwd', 'rev'):
            if sched not in res:
                continue
            rc, groups, report, error, b = res[sched]
            failed_checks = any(not c[1] for g in groups for c in g[1])
            if error:
                lines.append('FAIL %s.run[%s]: emulator: %s' % (base, sched, error))
            elif report is None:
                lines.append('FAIL %s.run[%s]: exit %d without the emulator report (crash or timeout): %s' % (
                    base, sched, rc, tail_reason(b)))
            elif rc != 0 and not (rc == 1 and failed_checks):
                lines.append('FAIL %s.run[%s]: exit %d: %s' % (base, sched, rc, tail_reason(b)))
        if all(s in res and res[s][2] and not res[s][3] for s in ('fwd', 'rev')):
            hf, hr = res['fwd'][2], res['rev'][2]
            if not names:
                pass  # every shape skipped by the ladder (e.g. v3 in fp32): nothing to compare
            elif hf['d2h_hash'] == hr['d2h_hash'] and hf['d2h_bytes'] == hr['d2h_bytes']:
                lines.append('PASS %s.schedules[fwd and rev bitwise identical, %s bytes downloaded, %s launches]' % (
                    base, hf['d2h_bytes'], hf['launches']))
            else:
                lines.append('FAIL %s.schedules: the downloaded results differ between the fwd and rev schedules '
                             '(a race or an order-dependent reduction)' % base)
    for lad in sorted(own):
        missing = [k for k in own[lad] if k not in covered.get(lad, set()) and (lad, k) not in NOT_LAUNCHED_OK]
        excused = [k for k in own[lad] if k not in covered.get(lad, set()) and (lad, k) in NOT_LAUNCHED_OK]
        note = ''.join('; %s not launched: %s' % (k, NOT_LAUNCHED_OK[(lad, k)]) for k in excused)
        if missing:
            lines.append('FAIL ladder.coverage.%s: kernels never launched: %s' % (lad, ', '.join(missing)))
        else:
            lines.append('PASS ladder.coverage.%s[%d kernels of dev/cuda/%s.cu launched%s]' % (
                lad, len(own[lad]) - len(excused), lad, note))
    for l in lines:
        print(l)
    print('ladders: %d shape(s) skipped by the ladders themselves (see the .out files)' % skipped)


if __name__ == '__main__':
    main()
