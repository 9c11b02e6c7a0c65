#!/usr/bin/env python3
"""compare_metrics.py A B FIRST TOL: steps FIRST.. of two metrics.jsonl files agree (loss,
grad_norm, val_loss) within TOL relative (0 = bitwise), and B has exactly the steps FIRST..last
of A. Used by dev/test/dp_tests.sh and tp_tests.sh (through mpi_lib.sh's agree)."""
import json
import sys

a = {r["step"]: r for r in map(json.loads, open(sys.argv[1]))}
b = {r["step"]: r for r in map(json.loads, open(sys.argv[2]))}
first, tol = int(sys.argv[3]), float(sys.argv[4])
want = [s for s in sorted(a) if s >= first]
assert want and sorted(b) == want, "steps %s, expected %s" % (sorted(b), want)
worst = 0.0
for s in want:
    for k in ("loss", "grad_norm", "val_loss"):
        if k not in a[s] and k not in b[s]:
            continue
        x, y = a[s][k], b[s][k]
        err = abs(x - y) / max(abs(x), 1e-12)
        worst = max(worst, err)
        assert (x == y) if tol == 0 else err <= tol, "step %d %s: %r vs %r (rel %.2e, tol %g)" % (s, k, x, y, err, tol)
print("agree: steps %s, worst relative difference %.3e" % (want, worst))
