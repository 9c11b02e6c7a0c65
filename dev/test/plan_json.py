"""Running a trainer with --plan-only 1 --plan-json and reading the plan back, for the
tests that hold plans against the formulas of docs/memory.md (check_memory_plan.py for
train_llama, check_dit_plan.py for train_dit)."""
import concurrent.futures
import json
import os
import subprocess


def run_plan(cmd, path, keep_stdout=False):
    """runs cmd (which writes the plan to path); returns (plan, None) or (None, why); with
    keep_stdout the printed plan comes back too, as plan["stdout"] (what the JSON does not
    say, such as the names of the fields a layer keeps)"""
    r = subprocess.run(cmd, stdout=subprocess.PIPE if keep_stdout else subprocess.DEVNULL, stderr=subprocess.PIPE,
                       text=True)
    if r.returncode != 0 or not os.path.exists(path):
        err = (r.stderr.strip().splitlines() or ["(no message)"])[0]
        return None, f"exit {r.returncode}: {err} | {' '.join(cmd[1:])}"
    with open(path) as fh:
        plan = json.load(fh)
    if keep_stdout:
        plan["stdout"] = r.stdout
    return plan, None


def run_fails(cmd):
    """runs cmd, which must refuse its input; returns (exit code, first line of stderr)"""
    r = subprocess.run(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    return r.returncode, (r.stderr.strip().splitlines() or ["(no message)"])[0]


def run_all(one, n, workers):
    """one(i) for i < n, `workers` at a time; the results in order"""
    with concurrent.futures.ThreadPoolExecutor(workers) as ex:
        return list(ex.map(one, range(n)))
