#!/usr/bin/env python3
"""Holds each pipeline stage's memory plan (--pp) against closed formulas.

    python3 dev/test/check_pp_plan.py ./train_llama_cpu [./train_llama ...]

For pp in {2, 3, 4}, L in {4, 6, 7}, tied and untied, M in {1, 2, 4, 8} micro-batches a
step (fewer than the stages included), --recompute 0/2 and --dp 1 / --dp 2 --zero 1, the
plan of every stage (`--plan-only 1 --plan-rank R --plan-json F`, no MPI needed) must have:
  - the split the log prints ("layers a stage: ...") equal to the weighted one: the first
    stage also carries the embedding and the last the final norm and output (a tied
    embedding: at both ends), in units of one layer's parameters, boundary p at
    round(p*U/P - w_first) clamped to leave every piece a layer, U = L + w_first + w_last;
    --pp-layers exactly as given;
  - min(pp - s, M) micro-batches' slots on stage s (1f1b): the saved layers L_s x slots x
    the one-process block of check_memory_plan (cross-checked at --pp 1: L x block), the
    inputs and targets a slot each, the received output gradient, the head's buffers on
    the last stage only, every other activation and scratch entry of the one-process plan;
  - the parameters, gradients and optimizer state of the stage's layers plus the embedding
    on stage 0 and the final norm and output on the last (tied: the embedding there too),
    per bucket padded to a multiple of dp under --zero 1 with 1/dp of the optimizer state;
  - every comm_bytes_per_step count: the activations and gradients sent to the neighbours,
    the tied embedding's gradient summed over the two end stages, the stage's buckets over
    DP, the norm over the world;
  - rank_plans: every stage's ranks in the entry of its --plan-rank plan's totals (the
    runner lists distinct totals, so stages whose plans come out equal, the middle ones
    holding as many slots, share one entry, "stage": -1), the largest named right, and
    stage 0 the largest where the activations dominate.
Also two --pp-layers splits, a vocabulary of 5.5 layers' parameters (the weighted split
moves the boundaries, and clamps them), --tp 2 reducescatter (rows / tp, TP's sums of the
stage's replicated gradients) and allreduce, and the interleaved schedule, whose saved
layers must be the sum over the stage's chunks of the chunk's layers x its most
micro-batches in flight, counted over Megatron's interleaved order built here. The CUDA
build (bf16: master weights, an fp32 accumulator with --fp32-grad-accum 1) runs a quarter
of the grid, the --recompute/--dp pair rotating.

Prints a line per configuration group and "N configurations, M failed"; exits non-zero on
any mismatch.
"""
import itertools
import os
import re
import sys
import tempfile
from fractions import Fraction

import plan_json
import check_memory_plan as CM
from check_memory_plan import al, expected_plan, stage_want, tp_shares, TP

SHAPE = dict(V=97, D=32, H=4, KV=2, F=88, B=2, T=16)
GROUPS = ("world", "tp", "dp", "ulysses", "ring", "pp", "pp-ends")
HEAD = ("final norm output", "final norm rstd", "d final norm output", "logits (one CE chunk)")


def layer_params(c, t=1):
    """one layer's parameters on a TP rank (the whole layer at t = 1)"""
    D, hd = c["D"], c["D"] // c["H"]
    Hl, KVl, Fl = tp_shares(c, t)
    return 2 * D + D * Hl * hd + 2 * D * KVl * hd + Hl * hd * D + 3 * D * Fl


def split_formula(c, L, P, custom=None):
    """layers of each of the P pieces: the embedding counts V*D/layer layers at the front,
    the final norm and the output (or the tied embedding again) (D + V*D)/layer at the back,
    and every piece takes U/P of the whole, at least one layer each"""
    if custom:
        return list(custom)
    if P == 1:
        return [L]
    lay = layer_params(c)
    wf, wl = Fraction(c["V"] * c["D"], lay), Fraction(c["D"] + c["V"] * c["D"], lay)
    U = L + wf + wl
    first = [0]
    for p in range(1, P):
        x = p * U / P - wf + Fraction(1, 2)
        b = x.numerator // x.denominator  # floor
        first.append(min(max(b, first[-1] + 1), L - (P - p)))
    first.append(L)
    return [first[p + 1] - first[p] for p in range(P)]


def virtual(pp, V, k, backward):
    """Megatron's interleaved order: virtual step k runs (micro-batch, chunk); groups of pp
    micro-batches through chunk 0, 1, ... (backward: the last chunk first)"""
    group, i = divmod(k, pp * V)
    chunk = i // pp
    return group * pp + i % pp, (V - 1 - chunk if backward else chunk)


def in_flight(pp, V, M, s, interleaved):
    """each chunk's most micro-batches held at once on stage s: its forwards live until their
    backwards, over the op order (warmup forwards, then a forward and a backward each, then
    the remaining backwards)"""
    total = M * V
    W = min((pp - s - 1) * 2 + (V - 1) * pp if interleaved else pp - s - 1, total)
    ops = [("f", k) for k in range(W)]
    for k in range(total - W):
        ops += [("f", W + k), ("b", k)]
    ops += [("b", k) for k in range(total - W, total)]
    live, most = [0] * V, [0] * V
    for kind, k in ops:
        _, ch = virtual(pp, V, k, kind == "b")
        live[ch] += 1 if kind == "f" else -1
        most[ch] = max(most[ch], live[ch])
    return most


class Cfg:
    """one pipeline configuration: shape, stages, schedule, flags"""
    def __init__(self, pp, L, tied, M, rec, dp, zero, tp=1, sp=0, custom=None, virt=1, gacc=0, B=None, V=None):
        self.c = dict(SHAPE, L=L, tied=tied)
        if B:
            self.c["B"] = B
        if V:
            self.c["V"] = V
        self.pp, self.L, self.tied, self.M, self.rec = pp, L, tied, M, rec
        self.dp, self.zero, self.tp, self.sp, self.custom, self.virt, self.gacc = dp, zero, tp, sp, custom, virt, gacc
        self.f = dict(ffn_chunks=1, ffn_seq=0, ce_chunks=1, offload=0, recompute=rec)

    def args(self, stage, path):
        c = self.c
        a = ["--plan-only", "1", "--plan-json", path, "--V", str(c["V"]), "--D", str(c["D"]), "--L", str(self.L),
             "--H", str(c["H"]), "--KV", str(c["KV"]), "--F", str(c["F"]), "--max-seq-len", str(c["T"]),
             "--seq", str(c["T"]), "--batch", str(c["B"]), "--tied", str(self.tied), "--recompute", str(self.rec),
             "--pp", str(self.pp), "--dp", str(self.dp), "--zero", str(self.zero), "--fp32-grad-accum", str(self.gacc),
             "--total-batch", str(self.M * c["B"] * c["T"] * self.dp)]
        if self.tp > 1:
            a += ["--tp", str(self.tp), "--tp-mode", "reducescatter" if self.sp else "allreduce"]
        if self.custom:
            a += ["--pp-layers", ",".join(map(str, self.custom))]
        if self.virt > 1:
            a += ["--pp-schedule", "interleaved", "--pp-virtual", str(self.virt)]
        if self.pp > 1:  # DP rank 0's rank of the stage, TP rank 0 (tp innermost)
            a += ["--plan-rank", str(stage * self.tp)]
        return a

    def tag(self):
        t = f"pp {self.pp} L {self.L} {'tied' if self.tied else 'untied'} M {self.M} --recompute {self.rec} --dp {self.dp} --zero {self.zero}"
        if self.tp > 1:
            t += f" --tp {self.tp} {'reducescatter' if self.sp else 'allreduce'}"
        if self.custom:
            t += f" --pp-layers {','.join(map(str, self.custom))}"
        if self.virt > 1:
            t += f" interleaved x{self.virt}"
        return t + (" --fp32-grad-accum 1" if self.gacc else "")


def stage_layers(cfg, split, s):
    """layers of each of stage s's chunks"""
    return [split[ch * cfg.pp + s] for ch in range(cfg.virt)]


def head_bucket(cfg, s):
    """the stage's parameters outside the layers: the embedding on stage 0, the final norm
    and the output (tied: the embedding again) on the last"""
    V, D = cfg.c["V"], cfg.c["D"]
    if cfg.pp == 1:
        return V * D + D + (0 if cfg.tied else V * D)
    return (V * D if s == 0 else 0) + (D + V * D if s == cfg.pp - 1 else 0)


def comm_want(cfg, s, Ls, sx):
    """bytes stage s sends a step, {"group kind": Fraction}, ring convention: an all-reduce
    of S bytes over g ranks sends 2(g-1)/g S, a reduce-scatter or all-gather (g-1)/g S, a
    send-recv what leaves the rank"""
    out = {f"{g} {k}": Fraction(0) for g in GROUPS for k in CM.KINDS}
    ring = lambda g: Fraction(g - 1, g)
    c, pp, dp, t, M = cfg.c, cfg.pp, cfg.dp, cfg.tp, cfg.M
    BT, D, V = c["B"] * c["T"], c["D"], c["V"]
    S = BT * D * sx
    rows = BT // t if cfg.sp else BT
    pad = lambda x: -(-x // dp) * dp if cfg.zero else x
    buckets = [pad(layer_params(c, t))] * Ls + [pad(head_bucket(cfg, s))]
    for b in buckets:
        if cfg.zero:
            out["dp reduce-scatter"] += ring(dp) * b * sx
            out["dp all-gather"] += ring(dp) * b * sx
        else:
            out["dp all-reduce"] += 2 * ring(dp) * b * sx
    out["world all-reduce"] += 2 * ring(dp * pp * t) * 4
    if pp > 1:
        out["pp send-recv"] += M * rows * D * sx * ((s < pp - 1) + (s > 0))
        if cfg.tied and s in (0, pp - 1):  # the embedding's two copies' gradients summed
            out["pp-ends all-reduce"] += 2 * ring(2) * V * D * sx
    if t > 1:
        re2 = 1 if cfg.rec == 2 else 0
        if cfg.sp:
            out["tp all-gather"] += ring(t) * M * Ls * (4 + re2 + 2) * S
            out["tp reduce-scatter"] += ring(t) * M * Ls * (4 + re2) * S
            # every replicated tensor's gradient saw only this rank's rows: the layers' two norms
            # and the stage's tensors outside the layers
            out["tp all-reduce"] += 2 * ring(t) * (2 * Ls * D + head_bucket(cfg, s)) * sx
        else:
            out["tp all-reduce"] += 2 * ring(t) * M * Ls * (4 + re2) * S
    return out


def check_stage(cfg, plan, s, split, block_pp1):
    """one stage's plan against the formulas; returns the errors"""
    errs = []
    c, pp = cfg.c, cfg.pp
    sx = plan["sizeof_floatX"]
    master = 1 if sx == 2 else 0
    if plan.get("master") != master:
        errs.append(f"master {plan.get('master')} with floatX of {sx} bytes")
    m = re.search(r"layers a (stage|chunk): ([\d,]+)", plan.get("stdout", ""))
    got_split = [int(x) for x in m.group(2).split(",")] if m else None
    if pp > 1 and got_split != split:
        errs.append(f"split: plan prints {got_split}, formula {split}")
    tp = TP(cfg.tp, cfg.sp, 1, 0, cfg.rec)
    block, dev_want, host_want, keep = expected_plan(c, c["B"], c["T"], cfg.f, sx, tp)
    if plan["act_block_bytes"] != block:
        errs.append(f"per-layer block: plan {plan['act_block_bytes']} formula {block}")
    if block_pp1 is not None and block != block_pp1:
        errs.append(f"per-layer block: formula {block}, the --pp 1 plan's {block_pp1}")
    chunks = stage_layers(cfg, split, s)
    if cfg.virt > 1:
        most = in_flight(pp, cfg.virt, cfg.M, s, True)
    else:
        most = [min(pp - s, cfg.M) if pp > 1 else 1]
    Ls = sum(chunks)
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    saved = sum(n * k for n, k in zip(chunks, most)) * block
    if got.get("saved activations (layers)") != saved:
        errs.append(f"saved activations (layers): plan {got.get('saved activations (layers)')} formula {saved} "
                    f"(layers {chunks} x in flight {most} x block {block})")
    if cfg.virt > 1:  # the interleaved schedule: its saved layers only
        return errs
    BT = c["B"] * c["T"]
    rows = BT // cfg.tp if cfg.sp else BT
    slots = most[0]
    dev_want["saved activations (layers)"] = saved
    del dev_want["inputs + targets"]
    dev_want["inputs + targets (a slot each)" if slots > 1 else "inputs + targets"] = slots * 2 * BT * 4
    if pp > 1:  # (a recycled buffer, planned only where there are stages to receive from)
        dev_want["d stage output (--pp, received)"] = rows * c["D"] * sx
    last = s == pp - 1
    for k in HEAD:
        dev_want[k] *= last
    # parameters, gradients, optimizer state: the stage's buckets
    dp, zero = cfg.dp, cfg.zero
    pad = lambda x: -(-x // dp) * dp if zero else x
    lb = [pad(layer_params(c, cfg.tp))] * Ls
    n_local = sum(lb) + pad(head_bucket(cfg, s))
    n_opt = n_local // dp if zero else n_local
    for k, v in (("n_local", n_local), ("n_opt", n_opt)):
        if plan.get(k) != v:
            errs.append(f"{k}: plan {plan.get(k)} formula {v}")
    pw = stage_want(lb, dp, n_local, n_opt, zero, sx, master, cfg.gacc)
    pw.update({"vocab gather (weights)": 0, "vocab gradient (unsharded)": 0})
    want = dict(dev_want, **pw)
    errs += [f"{k}: plan {got.get(k)} formula {v}" for k, v in want.items() if got.get(k) != v]
    unknown = [k for k in got if k not in want and k not in CM.PARAM_ENTRIES]
    if unknown:
        errs.append(f"entries no formula names: {unknown}")
    got_host = {e["name"]: e["bytes"] for e in plan["host"]["entries"]}
    if got_host != host_want:
        errs.append(f"host entries {got_host}, formula {host_want}")
    for space, w in (("device", want), ("host", host_want)):
        if plan[space]["total"] != sum(al(v) for v in w.values()):
            errs.append(f"{space} total {plan[space]['total']}, formula {sum(al(v) for v in w.values())}")
    names = CM.kept_names(plan)
    if names != " ".join(keep).split():
        errs.append(f"kept fields: plan {names}, formula {keep}")
    errs += CM.check_comm(plan, comm_want(cfg, s, Ls, sx))
    return errs


def rank_list(text):
    """the ranks of "0, 2-3" """
    out = []
    for part in text.split(","):
        a, _, b = part.strip().partition("-")
        out += list(range(int(a), int(b or a) + 1))
    return out


def check_rank_plans(cfg, plans, dominate):
    """the JSON's rank_plans (any stage's plan carries them): the distinct plans by their
    device and host totals, each stage's ranks in the one equal to its --plan-rank plan's
    totals (named by its stage, or -1 when stages share the totals), the largest the first
    rank of the largest stage"""
    errs = []
    rp = plans[0].get("rank_plans")
    if not rp:
        return ["no rank_plans in the JSON"]
    if any(p.get("rank_plans") != rp for p in plans):
        errs.append("rank_plans differ between the stages' JSON files")
    world = cfg.dp * cfg.pp * cfg.tp
    if rp["ranks"] != world or rp["unlisted"] != 0:
        errs.append(f"rank_plans: ranks {rp['ranks']} unlisted {rp['unlisted']}, want {world} and 0")
    totals = [(p["device"]["total"], p["host"]["total"]) for p in plans]
    # rank = ((d*pp + s)*cp + k)*tp + t, cp 1
    stage_of = lambda r: (r // cfg.tp) % cfg.pp
    want = {}
    for r in range(world):
        want.setdefault(totals[stage_of(r)], []).append(r)
    got = {(e["device"], e["host"]): e for e in rp["plans"]}
    if len(got) != len(rp["plans"]) or set(got) != set(want):
        errs.append(f"rank_plans: totals {[(e['device'], e['host']) for e in rp['plans']]}, the stages' plans "
                    f"{sorted(want)}")
        return errs
    for t, ranks in want.items():
        e = got[t]
        stages = {stage_of(r) for r in ranks}
        st = stages.pop() if len(stages) == 1 else -1
        if (rank_list(e["ranks"]), e["count"], e["first"], e["stage"]) != (ranks, len(ranks), ranks[0], st):
            errs.append(f"rank_plans entry {e}: want ranks {ranks}, stage {st}")
    dev = [t[0] for t in totals]
    top = dev.index(max(dev))
    if rp["largest"] != top * cfg.tp:
        errs.append(f"rank_plans: largest rank {rp['largest']}, the stages' totals {dev} say rank {top * cfg.tp}")
    if dominate and not all(dev[0] > d for d in dev[1:]):
        errs.append(f"activations dominate, 1f1b: stage 0 must be the largest, the totals are {dev}")
    return errs


def configs(bf16):
    """(group, cfg, dominate) for the grid, the --pp-layers, tp and interleaved cases"""
    out = []
    j = 0
    for pp, L in itertools.product((2, 3, 4), (4, 6, 7)):
        for tied, M, rec, (dp, zero) in itertools.product((0, 1), (1, 2, 4, 8), (0, 2), ((1, 0), (2, 1))):
            j += 1
            # (bf16: a quarter, the --recompute/--dp pair rotating over the rest)
            if bf16 and j % 4 != (j // 4 + j // 32) % 4:
                continue
            out.append((f"pp {pp} L {L}", Cfg(pp, L, tied, M, rec, dp, zero, gacc=(j // 8) % 2 if bf16 else 0), False))
    out.append(("--pp-layers", Cfg(3, 7, 0, 4, 0, 1, 0, custom=(1, 4, 2)), False))
    out.append(("--pp-layers", Cfg(2, 6, 1, 2, 2, 2, 1, custom=(5, 1)), False))
    for M, rec, tied in ((1, 0, 1), (4, 2, 0), (8, 0, 1)) if not bf16 else ((4, 2, 1),):
        out.append(("--tp 2 reducescatter", Cfg(3, 6, tied, M, rec, 1, 0, tp=2, sp=1), False))
    out.append(("--tp 2 allreduce", Cfg(2, 4, 1, 4, 0, 2, 1, tp=2, sp=0), False))
    for pp, tied, M in ((2, 1, 2), (3, 0, 4), (4, 1, 8), (4, 0, 3)):  # the embedding and head 5.5 layers each: the split moves
        out.append(("V 1999", Cfg(pp, 8, tied, M, 0, 2, 1, V=1999), False))
    for pp in (2, 3, 4):  # B 8: the activations outweigh the embedding and the head
        out.append(("activations dominate", Cfg(pp, 8, 1, 8, 0, 1, 0, B=8), True))
    for pp, L, M in ((2, 7, 4), (3, 6, 6), (4, 8, 8), (2, 4, 2)):
        out.append(("interleaved", Cfg(pp, L, 1, M, 0, 1, 0, virt=2), False))
    return out


def main():
    binaries = sys.argv[1:] or ["./train_llama_cpu"]
    n = bad = 0
    first = None
    with tempfile.TemporaryDirectory() as tmp:
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                print(f"FAIL {binary}: not an executable")
                return 1
            name = os.path.basename(binary)
            # the floatX of the build: one --pp 1 plan
            probe, err = plan_json.run_plan([binary] + Cfg(1, 4, 1, 1, 0, 1, 0).args(0, os.path.join(tmp, "probe.json")),
                                            os.path.join(tmp, "probe.json"))
            if err:
                print(f"FAIL {name}: {err}")
                return 1
            bf16 = probe["sizeof_floatX"] == 2
            cfgs = configs(bf16)
            # the --pp 1 plans of each (L, tied, recompute, B): L x block, the block the stages use
            base_keys = sorted({(cf.L, cf.tied, cf.rec, cf.c["B"], cf.c["V"]) for _, cf, _ in cfgs})
            jobs = [(Cfg(1, k[0], k[1], 1, k[2], 1, 0, B=k[3], V=k[4]), 0) for k in base_keys]
            jobs += [(cf, s) for _, cf, _ in cfgs for s in range(cf.pp)]

            def one(i):
                cf, s = jobs[i]
                path = os.path.join(tmp, f"p{i}.json")
                return plan_json.run_plan([binary] + cf.args(s, path), path, keep_stdout=True)
            results = plan_json.run_all(one, len(jobs), max(2, min(8, os.cpu_count() or 2)))
            base = {}
            for k, (plan, err) in zip(base_keys, results):
                cf = Cfg(1, k[0], k[1], 1, k[2], 1, 0, B=k[3], V=k[4])
                n += 1
                if err:
                    errs = [err]
                else:
                    block = plan["act_block_bytes"]
                    errs = check_stage(cf, plan, 0, [k[0]], None)
                    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
                    if got.get("saved activations (layers)") != k[0] * block:
                        errs.append(f"--pp 1 saved activations (layers) {got.get('saved activations (layers)')} != L x block")
                    base[k] = block
                if errs:
                    bad += 1
                    first = first or f"{name} --pp 1 L {k[0]}: {errs[0]}"
                    print(f"FAIL {name} --pp 1 L {k[0]} tied {k[1]} --recompute {k[2]}:\n    " + "\n    ".join(errs))
            print(f"{name} (floatX {probe['sizeof_floatX']} bytes): {len(base_keys)} --pp 1 plans, L x block")
            at = len(base_keys)
            groups = {}
            for group, cf, dominate in cfgs:
                plans, errs = [], []
                split = split_formula(cf.c, cf.L, cf.pp * cf.virt, cf.custom)
                for s in range(cf.pp):
                    plan, err = results[at]
                    at += 1
                    if err:
                        errs.append(err)
                        continue
                    plans.append(plan)
                    b = base.get((cf.L, cf.tied, cf.rec, cf.c["B"], cf.c["V"])) if cf.tp == 1 else None
                    errs += [f"stage {s}: {e}" for e in check_stage(cf, plan, s, split, b)]
                if not errs:
                    errs += check_rank_plans(cf, plans, dominate)
                n += 1
                g = groups.setdefault(group, [0, 0, 0, set()])
                g[0] += 1
                g[1] += cf.pp
                g[3].add(",".join(map(str, split)))
                if errs:
                    bad += 1
                    g[2] += 1
                    first = first or f"{name} {cf.tag()}: {errs[0]}"
                    print(f"FAIL {name} {cf.tag()}:\n    " + "\n    ".join(errs))
            for group, (k, stages, failed, splits) in groups.items():
                print(f"{'FAIL' if failed else 'ok  '} {name} {group}: {k} configurations ({stages} stage plans), "
                      f"{failed} failed; splits {' '.join(sorted(splits))}")
    print(f"{n} configurations, {bad} failed")
    if first:
        print(f"first difference: {first}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
