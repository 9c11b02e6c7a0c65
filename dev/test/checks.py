"""One line per check for the Python checkers that run_tests.sh reads ("PASS name" or
"FAIL name: why"), and the count of failures their exit status comes from."""
import sys

failures = 0


def report(name, ok, why=""):
    global failures
    if ok:
        print("PASS %s" % name)
    else:
        failures += 1
        print("FAIL %s: %s" % (name, why))
    sys.stdout.flush()
