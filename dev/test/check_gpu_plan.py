#!/usr/bin/env python3
"""Checks the plan of scripts/gpu_check.sh (GPU_CHECK_DRY=1 ... plan) against its promises.

    python3 dev/test/check_gpu_plan.py PLAN_TSV [--headline-by S] [--max-files N]

PLAN_TSV has one line per event: call, kind, name, seconds, detail. A step's seconds are
its time limit, taken as its estimate (the worst case: every step before it ran to its
limit); a machine's start-up is listed per call but not counted in the call's own time,
which its budget bounds. Prints the plan as a table, then one PASS/FAIL line per promise:

  * headline: call 1 writes the llama3-1B row (ours with --attention tc, beside torch.compile)
    within the first S seconds (300) of its estimated time
  * files: no call leaves more than N files (8) in $OUT, the device tool's limit
  * data: every benchmark row reads data that an earlier step of the same call provides
    (each call starts on a bare machine: nothing from ../shared, nothing from another call)
  * tc: the headline's llama3-1B row uses --attention tc
  * order: no step is listed after call 1's headline that the headline needs (the
    tests with --attention tc come before it)
  * same call: every PyTorch row (bench_X_torch_*) has ours' row of its config (bench_X_ours)
    earlier in the same call, so that no ratio spans two machines
  * backends: every config with PyTorch rows has them with SDPA auto and with flash and
    cudnn by name
  * dit compile: call 2 has dit-B and dit-XL each against torch.compile

Exit status 1 when any promise fails, so adding or reordering a step can fail make test.

--planted: instead, plants one defect at a time into the plan (a 10 s step before the
headline, a ninth file in call 2, a benchmark whose data no step provides, the llama3-1B
row without --attention tc, the tc tests moved after the headline, a PyTorch row whose ours
row is gone, the cudnn rows gone, dit-XL without torch.compile) and prints PASS for each
defect the checks catch, FAIL for one they let through.
"""
import argparse
import re
import sys

# the tests of --attention tc (not tc2, its second design, which is tested after the headline)
TC_TEST = re.compile(r"attention_tc$")
TC_FLAG = re.compile(r"--attention tc(\s|$)")


def read_plan(path):
    ev = []
    for line in open(path):
        if line.strip():
            call, kind, name, sec, detail = (line.rstrip("\n").split("\t") + [""] * 5)[:5]
            ev.append((call, kind, name, int(sec), detail))
    return ev


def planted(ev, a):
    """Each defect must make check() fail."""
    def first(pred):
        return next(i for i, e in enumerate(ev) if pred(e))
    head = first(lambda e: e[0] == "1" and e[1] == "headline")
    tc = [i for i, e in enumerate(ev) if e[0] == "1" and e[1] == "step" and TC_TEST.search(e[2])]
    defects = {
        "slow_step_before_headline": ev[:head] + [("1", "step", "planted_step", 10, "")] + ev[head:],
        "ninth_file_in_call2": ev + [("2", "out", "planted_%d.txt" % i, 0, "") for i in range(6)],
        "benchmark_without_data": [e for e in ev if not (e[0] == "1" and e[1] == "provides")],
        "llama3_1B_without_tc": [e[:4] + (e[4].replace("--attention tc", ""),) if e[1] == "bench" else e for e in ev],
        "tc_tests_after_headline": [e for i, e in enumerate(ev) if i not in tc][:head - len(tc) + 1]
        + [ev[i] for i in tc] + [e for i, e in enumerate(ev) if i not in tc][head - len(tc) + 1:],
        "peer_row_without_ours": [e for e in ev if not (e[1] == "bench" and e[2] == "bench_dit_XL_ours")],
        "peer_rows_without_cudnn": [e for e in ev if not (e[1] == "bench" and e[2].endswith("_cudnn"))],
        "dit_XL_without_compile": [e for e in ev if not (e[1] == "bench" and e[2] == "bench_dit_XL_torch_compile")],
    }
    bad = 0
    for name, mutated in defects.items():
        caught = check(mutated, a, quiet=True) != 0
        print("%s gpu_plan_planted.%s%s" % ("PASS" if caught else "FAIL", name, "" if caught else " (not caught)"))
        bad += not caught
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("plan")
    ap.add_argument("--headline-by", type=int, default=300)
    ap.add_argument("--max-files", type=int, default=8)
    ap.add_argument("--planted", action="store_true")
    a = ap.parse_args()
    ev = read_plan(a.plan)
    return planted(ev, a) if a.planted else check(ev, a)


def check(ev, a, quiet=False):
    out = print if not quiet else (lambda *x, **k: None)
    calls = sorted({e[0] for e in ev})
    ok = True

    def verdict(good, what):
        nonlocal ok
        ok = ok and bool(good)
        out("%s gpu_plan.%s" % ("PASS" if good else "FAIL", what))

    out("| call | step | limit (s) | estimated end (s) | note |")
    out("|---|---|---|---|---|")
    headline_at = None
    for c in calls:
        t = 0
        budget = None
        for call, kind, name, sec, detail in ev:
            if call != c:
                continue
            if kind == "budget":
                budget = sec
            elif kind == "startup":
                out("| %s | (%s) | %d | - | before the call's own time |" % (c, name, sec))
            elif kind == "step":
                t += sec
                note = "SKIP here: " + detail[6:] if detail.startswith("SKIP:") else ""
                if budget is not None and t > budget:  # reached only when the steps before it end early
                    note = (note + "; " if note else "") + "past the %d s budget if every step before ran to its limit" % budget
                out("| %s | %s | %d | %d | %s |" % (c, name, sec, t, note))
            elif kind == "cond":
                out("| %s | %s | %d | - | %s |" % (c, name, sec, detail))
            elif kind == "headline":
                out("| %s | **headline written** | | %d | %s |" % (c, t, name))
                if c == "1" and headline_at is None:
                    headline_at = t
        out("| %s | **total** | | %d | budget %s s, plus start-up |" % (c, t, budget))

    verdict(headline_at is not None and headline_at <= a.headline_by,
            "headline_within_%ds (call 1 writes it at %s s)" % (a.headline_by, headline_at))
    for c in calls:
        files = sorted({e[2] for e in ev if e[0] == c and e[1] == "out"})
        verdict(len(files) <= a.max_files, "call%s_files_at_most_%d (%d: %s)" % (c, a.max_files, len(files), ", ".join(files)))
    for c in calls:
        provided, missing = set(), []
        for call, kind, name, sec, detail in ev:
            if call != c:
                continue
            if kind == "provides":
                provided.add(name)
            elif kind == "needs" and name not in provided:
                missing.append(name)
        verdict(not missing, "call%s_every_benchmark_has_data%s" % (c, " (missing: %s)" % ", ".join(missing) if missing else ""))
    # the headline row: the llama3-1B run of ours that comes before the headline is written
    cut1 = next((i for i, e in enumerate(ev) if e[0] == "1" and e[1] == "headline"), len(ev))
    head = [e for e in ev[:cut1] if e[0] == "1" and e[1] == "bench" and "llama3-1B" in e[4] and e[2].endswith("_ours")]
    verdict(bool(head) and all(TC_FLAG.search(e[4]) for e in head), "llama3_1B_row_uses_attention_tc")
    names = [e[2] for e in ev if e[0] == "1" and e[1] in ("step", "headline")]
    if headline_at is not None:
        cut = [i for i, e in enumerate(ev) if e[0] == "1" and e[1] == "headline"][0]
        before = {e[2] for e in ev[:cut] if e[0] == "1"}
        needed = [n for n in names if TC_TEST.search(n)]
        verdict(all(n in before for n in needed) and needed, "call1_tc_tests_before_headline (%d)" % len(needed))
    # the PyTorch rows: each beside ours in its call, with its SDPA backends named
    peer = re.compile(r"^bench_(.+)_torch_(eager|compile)(?:_(flash|cudnn|efficient|math))?$")
    lonely, unnamed = [], []
    for c in calls:
        seen_ours, backends = set(), {}
        for call, kind, name, sec, detail in ev:
            if call != c or kind != "bench":
                continue
            if name.endswith("_ours"):
                seen_ours.add(name[len("bench_"):-len("_ours")])
            m = peer.match(name)
            if m:
                if m.group(1) not in seen_ours:
                    lonely.append(name)
                backends.setdefault(m.group(1), set()).add(m.group(3) or "auto")
        unnamed += ["%s (call %s: %s)" % (x, c, ", ".join(sorted(b))) for x, b in backends.items()
                    if not {"auto", "flash", "cudnn"} <= b]
    verdict(not lonely, "peer_rows_beside_ours_in_their_call%s" % (" (alone: %s)" % ", ".join(lonely) if lonely else ""))
    verdict(not unnamed, "peer_rows_with_sdpa_auto_flash_cudnn%s" % (" (missing in %s)" % "; ".join(unnamed) if unnamed else ""))
    comp = {e[2] for e in ev if e[0] == "2" and e[1] == "bench"}
    verdict(all("bench_%s_torch_compile" % m in comp and "bench_%s_ours" % m in comp for m in ("dit_B", "dit_XL")),
            "call2_dit_B_and_dit_XL_against_torch_compile")
    out("gpu_plan: %s" % ("every promise holds" if ok else "a promise is broken"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
