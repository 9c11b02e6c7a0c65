#!/usr/bin/env python3
"""The per-kernel profile of one step (--profile-step N, llmc/kernels/profile.h), held to its promise.

    python3 dev/test/check_profile.py STEP GROUP,GROUP,... -- TRAINER ARGS...

Runs the trainer (which must be given --profile-step STEP) and checks the table it prints
after step STEP: every named launch group is in it, the groups' times add up to the
"timed" total, which is no more than the step's wall time, and only that one step was
profiled. Exit status non-zero on any failure.
"""
import re
import subprocess
import sys


def main():
    step, want = sys.argv[1], sys.argv[2].split(",")
    cmd = sys.argv[sys.argv.index("--") + 1:]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout
    head = re.search(r"profile of step %s: ([0-9.]+) ms wall, ([0-9.]+) ms in the timed groups" % step, out)
    assert head, "no profile header for step %s" % step
    wall, timed = float(head.group(1)), float(head.group(2))
    rows = {m.group(1).strip(): float(m.group(2))
            for m in re.finditer(r"^\| ([a-z0-9 ()]+?) +\| +\d+ \| +([0-9.]+) \|", out, re.M)}
    missing = [w for w in want if w not in rows]
    assert not missing, ("groups missing from the table", missing, sorted(rows))
    assert 0 < timed <= wall * 1.05, (timed, wall)
    assert abs(sum(rows.values()) - timed) < 0.05 * timed + 0.01, (sum(rows.values()), timed)
    assert out.count("profile of step") == 1, "profiled more than the one step"
    print("profile: %d groups, %.1f of %.1f ms timed" % (len(rows), timed, wall))


if __name__ == "__main__":
    main()
