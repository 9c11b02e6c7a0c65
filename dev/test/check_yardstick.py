#!/usr/bin/env python3
"""dev/bench/bench_cpu_step.py --yardstick, held to its arithmetic (make test runs it on a quick run).

    python3 dev/test/check_yardstick.py OUT.jsonl [--llama-trainer ./train_llama_cpu] [--dit-trainer ./train_dit_cpu]
                                        [--plant fraction|yardstick|round]

Checks, from the raw numbers in the .jsonl alone: each library's yardstick speed is the median
of the calls its measurements timed (2 M N K over that median, M N K = 2048 32000 288), its
sampled outputs agree with double-precision dot products (the sgemm computed the product);
the yardstick every step is held to is the fastest library's; each round's step time is the
median of that run's step times (the first step left out; their mean beside it), each model's the
median of its rounds, tok/s and FLOP/s follow from it, the fraction is FLOP/s over the
yardstick and lies in (0, 1.5); the target is the project's (stories15M 0.70, others 0.40) and
the verdict follows from it. With the trainers given, FLOP per token is recomputed from the
shapes and parameter counts the trainer itself prints (--plan-only 1): 6N + 6LDT for the
Llama, 6 x weight multiply-adds per token + 12 L N^2 D / N for the DiT. --plant changes one
number the way a wrong script would (a fraction not from the measured numbers, a yardstick
that is not the fastest library's, a round's time that is not the median of its steps) and must
then fail. Exit status 1 on any failure.
"""
import argparse
import json
import re
import statistics
import subprocess
import sys

YARD = (2048, 32000, 288)


def close(a, b, rel=1e-6):
    return abs(a - b) <= rel * max(abs(a), abs(b), 1e-30)


def llama_flop(trainer, model, T):
    out = subprocess.run([trainer, "--model", model, "--plan-only", "1"], capture_output=True, text=True).stdout
    m = re.search(r"model: V=(\d+) D=(\d+) L=(\d+)", out)
    p = re.search(r"^parameters: (.*)$", out, re.M)
    assert m and p, "no model line or parameters line in %s --plan-only 1" % trainer
    D, L = int(m.group(2)), int(m.group(3))
    N = sum(int(x) for x in re.findall(r"\b(\d+)\b", p.group(1)))
    return 6 * N + 6 * L * D * T, N


def dit_flop(trainer, model):
    out = subprocess.run([trainer, "--model", model, "--plan-only", "1"], capture_output=True, text=True).stdout
    m = re.search(r"model: D=(\d+) L=(\d+) H=\d+ \(hd \d+\) FF=(\d+).*N=(\d+) tokens of P=(\d+)", out)
    assert m, "no model line in %s --plan-only 1" % trainer
    D, L, FF, N, P = (int(x) for x in m.groups())
    return 6 * (P * D + L * (4 * D * D + 2 * D * FF) + D * P) + 12 * L * N * D


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("jsonl")
    ap.add_argument("--llama-trainer")
    ap.add_argument("--dit-trainer")
    ap.add_argument("--seq", type=int, default=256)
    ap.add_argument("--plant", choices=["fraction", "yardstick", "round"])
    a = ap.parse_args()
    rows = [json.loads(l) for l in open(a.jsonl) if l.strip()]
    libs = [r for r in rows if r.get("kind") == "yardstick_library"]
    meas = [r for r in rows if r.get("kind") == "yardstick_measurement"]
    steps = [r for r in rows if r.get("kind") == "step_vs_yardstick"]
    assert libs and meas and steps, "no yardstick rows (libraries %d, measurements %d, steps %d)" % (len(libs), len(meas), len(steps))
    if a.plant == "fraction":
        steps[0]["fraction"] *= 1.05
    elif a.plant == "round":
        steps[0]["rounds_steps_ms"][0] = [x * 1.2 for x in steps[0]["rounds_steps_ms"][0]]
    elif a.plant == "yardstick":
        for s in steps:
            s["yard_gflops"] *= 0.9
    fl = 2.0 * YARD[0] * YARD[1] * YARD[2]
    for lib in libs:
        assert (lib["M"], lib["N"], lib["K"]) == YARD, ("not the yardstick's shape", lib)
        ts = [t for m in meas if m["library"] == lib["library"] for t in m["times_ms"]]
        assert len(ts) == lib["calls"] and ts, ("calls", lib["library"], len(ts), lib["calls"])
        assert all(t > 0 for t in ts), ("a call took no time", lib["library"])
        assert close(statistics.median(ts), lib["median_ms"]), ("median of the calls", lib["library"])
        assert close(fl / lib["median_ms"] / 1e6, lib["median_gflops"]), ("GFLOP/s from the median", lib["library"])
        assert lib["max_rel_err"] < 1e-4, ("the sgemm's product is wrong", lib["library"], lib["max_rel_err"])
        assert lib["threads"] >= 1
    best = max(libs, key=lambda r: r["median_gflops"])
    for s in steps:
        assert close(s["yard_gflops"], best["median_gflops"]) and s["yard_library"] == best["library"], \
            ("the yardstick is not the fastest library's", s["model"], s["yard_gflops"], best["library"], best["median_gflops"])
        assert s["rounds_ms"] and close(statistics.median(s["rounds_ms"]), s["ms_per_step"]), ("median of the rounds", s["model"])
        rs = s["rounds_steps_ms"]
        assert len(rs) == len(s["rounds_ms"]) and all(rs), ("every round's step times", s["model"])
        for r_ms, st in zip(s["rounds_ms"], rs):  # a round's time: the median of its steps (the first left out)
            assert close(statistics.median(st), r_ms), ("a round is not the median of its steps", s["model"], r_ms, st)
        assert close(statistics.median([sum(x) / len(x) for x in rs]), s["ms_per_step_of_means"]), ("the rounds' means", s["model"])
        assert close(s["tokens_per_step"] / (s["ms_per_step_of_means"] / 1e3) * s["flop_per_token"] / 1e9 / s["yard_gflops"],
                     s["fraction_of_means"]), ("the fraction by means", s["model"])
        tok = s["tokens_per_step"] / (s["ms_per_step"] / 1e3)
        assert close(tok, s["tok_per_s"]), ("tok/s", s["model"])
        assert close(tok * s["flop_per_token"] / 1e9, s["gflops"]), ("FLOP/s", s["model"])
        frac = s["gflops"] / s["yard_gflops"]
        assert close(frac, s["fraction"]), ("the fraction is not the step's FLOP/s over the yardstick", s["model"], frac, s["fraction"])
        assert 0 < s["fraction"] < 1.5, ("fraction out of (0, 1.5)", s["model"], s["fraction"])
        target = 0.70 if s["model"] == "stories15M" else 0.40
        assert s["target"] == target and s["met"] == (s["fraction"] >= target), ("target or verdict", s["model"])
        if a.llama_trainer and not s["model"].startswith("dit"):
            want, n = llama_flop(a.llama_trainer, s["model"], a.seq)
            assert s["params"] == n and s["flop_per_token"] == want, ("FLOP per token", s["model"], s["flop_per_token"], want)
        if a.dit_trainer and s["model"].startswith("dit"):
            want = dit_flop(a.dit_trainer, s["model"])
            assert s["flop_per_token"] == want, ("FLOP per token", s["model"], s["flop_per_token"], want)
        print("yardstick: %s %.1f GFLOP/s = %.2f of %.1f (%s), target %.2f: %s" % (
            s["model"], s["gflops"], s["fraction"], s["yard_gflops"], s["yard_library"], target, "met" if s["met"] else "missed"))


if __name__ == "__main__":
    try:
        main()
    except AssertionError as e:
        print("check_yardstick: FAILED: %s" % (e,))
        sys.exit(1)
