#!/usr/bin/env python3
"""Holds train_llama's memory plan against the formulas of docs/memory.md.

    python3 scripts/check_memory_plan.py ./train_llama_cpu [./build/train_llama ...]

For a grid of model shapes and memory flags, runs `BINARY --plan-only 1 --plan-json F`
(no allocation, no GPU needed) and compares every activation, offload and scratch
entry of the plan with the formula written here from the document, independently of
the C code. A change that silently keeps a buffer alive, or drops one the formula
says must exist, fails. Also checks that each flag lowers the device bytes it claims
to.

Data parallelism (docs/memory.md section 7): for dp in {1, 2, 3, 4, 8}, --zero 0/1 and
--shard-vocab 0/1 and shapes tied and untied, with V and the layer buckets not
divisible by dp, the plan of rank 0 (`--dp N`, no MPI needed) must have exactly the
parameter, gradient, optimizer and comm entries and the n_local/n_opt of the formulas;
its other entries must be those of the dp=1 plan (the batch is per rank); --zero 1
must divide the optimizer state by dp up to at most (L+1)*(dp-1) elements of bucket
padding; and what --shard-vocab 1 saves against --shard-vocab 0 must be the closed
form of the document.

Plans run a few at a time (one process each). Prints a line per data-parallel
configuration and per failing configuration, and exits non-zero on any mismatch
(or on a plan the binary could not write).
"""
import itertools
import os
import sys
import tempfile

import plan_json  # scripts/plan_json.py: run --plan-only, read the JSON

ALIGN = 256


def al(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def cdiv(a, b):
    return (a + b - 1) // b


def field_bytes(c, B, T, s):
    """bytes of each per-layer activation field (docs/memory.md, table 1)"""
    BT, hd = B * T, c["D"] // c["H"]
    return {
        "x": BT * c["D"] * s, "rstd1": BT * 4, "xn1": BT * c["D"] * s,
        "q": BT * c["H"] * hd * s, "k": BT * c["KV"] * hd * s, "v": BT * c["KV"] * hd * s,
        "att": BT * c["H"] * hd * s, "lse": BT * c["H"] * 4,
        "xmid": BT * c["D"] * s, "rstd2": BT * 4, "xn2": BT * c["D"] * s,
        "h1": BT * c["F"] * s, "h3": BT * c["F"] * s, "g": BT * c["F"] * s,
    }


def saved_fields(f):
    """what one layer keeps for backward (docs/memory.md, table 2)"""
    all_f = ["x", "rstd1", "xn1", "q", "k", "v", "att", "lse", "xmid", "rstd2", "xn2", "h1", "h3", "g"]
    if f["recompute"] == 2:
        return ["x"]
    keep = list(all_f)
    if f["recompute"] == 1:
        keep = [x for x in keep if x not in ("xn1", "xn2", "g")]
    if f["ffn_chunks"] > 1:
        keep = [x for x in keep if x not in ("h1", "h3", "g")]
    return keep


def ffn_chunk_width(F, K):
    """--ffn-chunk-dim hidden: ceil(F/K), rounded up to a multiple of 64 when at least 64
    (the chunk GEMMs keep cuBLASLt's fast kernels; train_args.h ffn_chunk_width)"""
    w = cdiv(F, K)
    return min(F, cdiv(w, 64) * 64) if w >= 64 else w


def expected_plan(c, B, T, f, s):
    fb = field_bytes(c, B, T, s)
    keep = saved_fields(f)
    block = sum(al(fb[x]) for x in keep)
    work_fields = [x for x in fb if x not in keep and not (f["ffn_chunks"] > 1 and x in ("h1", "h3", "g"))]
    work = sum(al(fb[x]) for x in work_fields)
    L, BT = c["L"], B * T
    N = L - 1 if f["offload"] == -1 else f["offload"]
    if f["ffn_chunks"] > 1 and f["ffn_seq"]:
        chunk = cdiv(BT, f["ffn_chunks"]) * c["F"] * s
    else:
        chunk = BT * ffn_chunk_width(c["F"], f["ffn_chunks"]) * s
    chunked = f["ffn_chunks"] > 1
    return block, {
        "saved activations (layers)": (L - N) * block,
        "saved activations (x_final)": BT * c["D"] * s,
        "offload slots": min(N, 2) * block,
        "layer work (not saved)": work,
        "ffn chunk h1": chunk if chunked else 0,
        "ffn chunk h3": chunk if chunked else 0,
        "ffn chunk g": chunk if chunked else 0,
        "ffn d(g), d(h1)": chunk,
        "ffn d(h3)": chunk,
        "logits (one CE chunk)": cdiv(BT, f["ce_chunks"]) * c["V"] * s,
    }, {"offloaded activations": N * block}


MODELS = [
    dict(V=512, D=64, L=4, H=4, KV=2, F=176, B=2, T=32),
    dict(V=1000, D=96, L=5, H=6, KV=3, F=250, B=3, T=17),
    dict(V=32000, D=288, L=6, H=6, KV=6, F=768, B=4, T=256),           # stories15M
    dict(V=128256, D=2048, L=16, H=32, KV=8, F=8192, B=1, T=2048),     # llama3-1B
]
FLAGS = [dict(ffn_chunks=k, ffn_seq=sq, ce_chunks=ce, offload=o, recompute=r)
         for k, sq, ce, o, r in itertools.product([1, 3], [0, 1], [1, 4], [0, 2, -1], [0, 1, 2]) if not (k == 1 and sq)]


# --- data parallelism: parameters, gradients, optimizer state, comm buffers -----------

# shapes for the dp sweep, tied and untied: V=1000 is not divisible by 3, V=997 (prime)
# by none of 2..8, and the buckets are padded under --zero 1 (not multiples of dp) at
# dp 3 and 8 (D=100), 4 and 8 (D=90) and 3 (the first and last shapes). D is H times an
# even head dim, so it cannot be odd: D=90 and D=100 are 2 and 4 mod 8 (and dp 2 never
# pads: with D even every bucket is even).
DP_MODELS = [
    dict(V=512, D=64, L=4, H=4, KV=2, F=176, B=2, T=32, tied=1),
    dict(V=1000, D=100, L=5, H=5, KV=1, F=251, B=3, T=17, tied=1),
    dict(V=1000, D=100, L=5, H=5, KV=1, F=251, B=3, T=17, tied=0),
    dict(V=997, D=90, L=3, H=3, KV=1, F=251, B=2, T=9, tied=0),
    dict(V=997, D=90, L=3, H=3, KV=1, F=251, B=2, T=9, tied=1),
    dict(V=32000, D=288, L=6, H=6, KV=6, F=768, B=4, T=256, tied=0),      # stories15M, untied
    dict(V=128256, D=2048, L=16, H=32, KV=8, F=8192, B=1, T=2048, tied=1),  # llama3-1B
]
DPS = [1, 2, 3, 4, 8]
PARAM_ENTRIES = ["parameters", "gradients", "gradient accumulator (fp32)", "master weights (fp32)", "adam m", "adam v",
                 "vocab gather (weights)", "vocab gradient (unsharded)"]
OPT_ENTRIES = ["master weights (fp32)", "adam m", "adam v"]


def dp_formula(c, dp, zero, sv, sx, master, gacc):
    """per-rank parameter/optimizer/comm entries (docs/memory.md, section 7); gacc:
    --fp32-grad-accum 1, an fp32 accumulator as long as the local gradient buffer"""
    V, D, L, H, KV, F = c["V"], c["D"], c["L"], c["H"], c["KV"], c["F"]
    hd = D // H
    ntens = 1 if c["tied"] else 2
    Lb = 2 * D + D * H * hd + 2 * D * KV * hd + H * hd * D + 3 * D * F
    Hb = (0 if sv else V * D) + D + (0 if (sv or c["tied"]) else V * D)

    def pad(x):
        return cdiv(x, dp) * dp if zero else x

    Vs = cdiv(V, dp)
    vocab = Vs * D * ntens if sv else 0
    n_local = L * pad(Lb) + pad(Hb) + vocab
    n_opt = (L * pad(Lb) + pad(Hb)) // dp + vocab if zero else n_local
    gather = Vs * dp * D * sx if sv else 0
    return n_local, n_opt, {
        "parameters": n_local * sx, "gradients": n_local * sx, "gradient accumulator (fp32)": n_local * 4 if gacc else 0,
        "master weights (fp32)": n_opt * 4 if master else 0,
        "adam m": n_opt * 4, "adam v": n_opt * 4,
        "vocab gather (weights)": gather, "vocab gradient (unsharded)": gather,
    }


def shard_vocab_saving(c, dp, zero, sx, master, gacc):
    """device bytes --shard-vocab 1 saves against 0, the closed form of section 7:
    (dp-1)/dp of the embedding/output parameters, gradients and (with --zero 0)
    optimizer state (and the fp32 gradient accumulator, gacc), minus the two [Vs*dp, D]
    buffers; negative means it costs"""
    V, D = c["V"], c["D"]
    ntens = 1 if c["tied"] else 2
    Vs = cdiv(V, dp)
    opt = 4 * (2 + master)           # fp32 m, v (and master) per owned element
    buffers = 2 * Vs * dp * D * sx
    if not zero:
        return ntens * (V - Vs) * D * (2 * sx + 4 * gacc + opt) - buffers
    # --zero 1: the head bucket shrinks from pad(ntens*V*D + D) to pad(D), the owned
    # vocabulary rows come in whole; the optimizer already held 1/dp of the head
    head0, head1 = cdiv(ntens * V * D + D, dp) * dp, cdiv(D, dp) * dp
    return ((2 * sx + 4 * gacc) * (head0 - head1 - ntens * Vs * D) + opt * ((head0 - head1) // dp - ntens * Vs * D)
            - buffers)


def run_plan(binary, c, f, path, dp_flags=()):
    cmd = [binary, "--plan-only", "1", "--plan-json", path, "--V", str(c["V"]), "--D", str(c["D"]), "--L", str(c["L"]),
           "--H", str(c["H"]), "--KV", str(c["KV"]), "--F", str(c["F"]), "--max-seq-len", str(max(c["T"], 8)),
           "--batch", str(c["B"]), "--seq", str(c["T"]), "--ffn-chunks", str(f["ffn_chunks"]),
           "--ffn-chunk-dim", "seq" if f["ffn_seq"] else "hidden", "--ce-chunks", str(f["ce_chunks"]),
           "--offload-act", str(f["offload"]), "--recompute", str(f["recompute"])]
    if "tied" in c:
        cmd += ["--tied", str(c["tied"])]
    cmd += list(dp_flags)
    return plan_json.run_plan(cmd, path)


def run_all(binary, jobs, tmp):
    """runs every (c, f, dp_flags) of jobs, a few processes at a time; returns [(plan, err)]"""
    def one(i):
        c, f, dpf = jobs[i]
        return run_plan(binary, c, f, os.path.join(tmp, f"plan{i}.json"), dpf)
    return plan_json.run_all(one, len(jobs), max(2, min(8, os.cpu_count() or 2)))


def check_activations(plan, c, f):
    s = plan["sizeof_floatX"]
    block, dev_want, host_want = expected_plan(c, c["B"], c["T"], f, s)
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    got_host = {e["name"]: e["bytes"] for e in plan["host"]["entries"]}
    errs = [f"{k}: plan {got.get(k)} formula {v}" for k, v in dev_want.items() if got.get(k) != v]
    errs += [f"host {k}: plan {got_host.get(k)} formula {v}" for k, v in host_want.items() if got_host.get(k) != v]
    if plan["act_block_bytes"] != block:
        errs.append(f"per-layer block: plan {plan['act_block_bytes']} formula {block}")
    for space in ("device", "host"):
        want = sum(al(e["bytes"]) for e in plan[space]["entries"])
        if plan[space]["total"] != want:
            errs.append(f"{space} total {plan[space]['total']} != sum of aligned entries {want}")
    return errs


def check_dp(plan, base, c, dp, zero, sv, gacc):
    """one data-parallel plan against the formulas; base is the dp=1 plan of the shape"""
    errs = []
    s = plan["sizeof_floatX"]
    master = plan.get("master")
    if master != (1 if s == 2 else 0):
        errs.append(f"master {master} with floatX of {s} bytes (bf16 has fp32 master weights, fp32 none)")
        master = 1 if s == 2 else 0
    for k, v in (("dp", dp), ("zero", zero), ("shard_vocab", sv)):
        if plan.get(k) != v:
            errs.append(f"{k}: plan {plan.get(k)} asked {v}")
    ntens = 1 if c["tied"] else 2
    hd = c["D"] // c["H"]
    P = c["V"] * c["D"] * ntens + c["L"] * (2 * c["D"] + 2 * c["D"] * c["H"] * hd + 2 * c["D"] * c["KV"] * hd
                                              + 3 * c["D"] * c["F"]) + c["D"]
    if plan["num_params"] != P:
        errs.append(f"num_params: plan {plan['num_params']} formula {P}")
    n_local, n_opt, want = dp_formula(c, dp, zero, sv, s, master, gacc)
    if plan.get("n_local") != n_local:
        errs.append(f"n_local: plan {plan.get('n_local')} formula {n_local}")
    if plan.get("n_opt") != n_opt:
        errs.append(f"n_opt: plan {plan.get('n_opt')} formula {n_opt}")
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    errs += [f"{k}: plan {got.get(k)} formula {v}" for k, v in want.items() if got.get(k) != v]
    kinds = {e["name"]: e["kind"] for e in plan["device"]["entries"]}
    for k in ("vocab gather (weights)", "vocab gradient (unsharded)"):
        if kinds.get(k) != "comm":
            errs.append(f"{k}: kind {kinds.get(k)}, want comm")
    host = {e["name"]: e["bytes"] for e in plan["host"]["entries"]}
    if host.get("comm staging (--comm mpi)") != 0:
        errs.append(f"host comm staging (--comm mpi): plan {host.get('comm staging (--comm mpi)')}, want 0 in a plan-only run")
    # the rest of the plan does not depend on dp, --zero or --shard-vocab
    rest = lambda p: [(e["name"], e["kind"], e["bytes"]) for e in p["device"]["entries"] if e["name"] not in PARAM_ENTRIES]
    if base is not None and rest(plan) != rest(base):
        diff = [f"{a} vs dp=1 {b}" for a, b in zip(rest(plan), rest(base)) if a != b] or ["the entry lists differ"]
        errs.append("activation/scratch entries depend on dp: " + "; ".join(diff[:3]))
    if base is not None:
        hrest = lambda p: [(e["name"], e["bytes"]) for e in p["host"]["entries"] if e["name"] != "comm staging (--comm mpi)"]
        if hrest(plan) != hrest(base):
            errs.append("host entries (offload) depend on dp")
    return errs


def check_dp_pairs(plans, c, dp, gacc):
    """properties across flags at one dp: what --zero 1 and --shard-vocab 1 save"""
    errs = []
    L = c["L"]
    ntens = 1 if c["tied"] else 2
    for sv in (0, 1):
        p0, p1 = plans.get((0, sv)), plans.get((1, sv))
        if p0 is None or p1 is None:
            continue
        b0 = {e["name"]: e["bytes"] for e in p0["device"]["entries"]}
        b1 = {e["name"]: e["bytes"] for e in p1["device"]["entries"]}
        s = p0["sizeof_floatX"]
        # the owned vocabulary region (already 1/dp of the vocabulary) is not divided again
        vocab = b0["vocab gather (weights)"] // s // dp * ntens if sv else 0
        for k in OPT_ENTRIES:
            if b0[k] == 0 and b1[k] == 0:
                continue
            bound = (b0[k] - 4 * vocab) / dp + 4 * vocab + 4 * (L + 1) * (dp - 1)
            if b1[k] > bound:
                errs.append(f"--zero 1 {k} (sv {sv}): {b1[k]} bytes > {b0[k]}/dp + padding = {bound:.0f}")
        padding = (p1["n_opt"] - vocab) * dp - (p0["n_opt"] - vocab)
        if not 0 <= padding <= (L + 1) * (dp - 1):
            errs.append(f"--zero 1 (sv {sv}): padding {padding} elements, want 0..(L+1)*(dp-1) = {(L + 1) * (dp - 1)}")
        lpad = p1["n_local"] - p0["n_local"]
        if lpad != padding:
            errs.append(f"--zero 1 (sv {sv}): local buffer grows by {lpad} elements, optimizer padding is {padding}")
    for zero in (0, 1):
        p0, p1 = plans.get((zero, 0)), plans.get((zero, 1))
        if p0 is None or p1 is None:
            continue
        tot = lambda p: sum(e["bytes"] for e in p["device"]["entries"])
        saving = tot(p0) - tot(p1)
        want = shard_vocab_saving(c, dp, zero, p0["sizeof_floatX"], p0["master"], gacc)
        if saving != want:
            errs.append(f"--shard-vocab 1 (zero {zero}) saves {saving} bytes, the closed form says {want}")
    return errs


def main():
    binaries = sys.argv[1:] or ["./train_llama_cpu"]
    bad = 0
    total = 0
    first_fail = []
    with tempfile.TemporaryDirectory() as tmp:
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                print(f"FAIL {binary}: not an executable")
                return 1
            name = os.path.basename(binary)
            # 1. activations, offload and scratch over shapes and memory flags (dp = 1)
            grid = list(itertools.product(MODELS, FLAGS))
            results = run_all(binary, [(c, f, ()) for c, f in grid], tmp)
            s = None
            n = 0
            for (c, f), (plan, err) in zip(grid, results):
                errs = [err] if err else check_activations(plan, c, f)
                s = plan["sizeof_floatX"] if plan else s
                n += 1
                if errs:
                    bad += 1
                    first_fail[:] = first_fail or [f"{name} {c} {f}: {errs[0]}"]
                    print(f"FAIL {name} {c} {f}:\n    " + "\n    ".join(errs))
            print(f"{name} (floatX {s} bytes): {n} activation plans checked")
            total += n
            # 2. data parallelism: every dp, --zero, --shard-vocab, with one memory-flag set per shape
            jobs, keys = [], []
            for i, c in enumerate(DP_MODELS):
                f = FLAGS[(7 * i) % len(FLAGS)]
                for dp, zero, sv in itertools.product(DPS, (0, 1), (0, 1)):
                    # every other shape with the fp32 gradient accumulator
                    jobs.append((c, f, ("--dp", str(dp), "--zero", str(zero), "--shard-vocab", str(sv),
                                        "--fp32-grad-accum", str(i % 2))))
                    keys.append((i, dp, zero, sv))
            results = dict(zip(keys, run_all(binary, jobs, tmp)))
            n = 0
            for i, c in enumerate(DP_MODELS):
                f = FLAGS[(7 * i) % len(FLAGS)]
                base, _ = results[(i, 1, 0, 0)]
                shape = (f"V={c['V']} D={c['D']} L={c['L']} H={c['H']} KV={c['KV']} F={c['F']} "
                         f"{'tied' if c['tied'] else 'untied'}")
                for dp in DPS:
                    plans = {}
                    for zero, sv in itertools.product((0, 1), (0, 1)):
                        plan, err = results[(i, dp, zero, sv)]
                        errs = [err] if err else check_dp(plan, base, c, dp, zero, sv, i % 2) + check_activations(plan, c, f)
                        if plan is not None:
                            plans[(zero, sv)] = plan
                        n += 1
                        tag = f"{name} dp {dp} zero {zero} shard-vocab {sv} {shape}"
                        if errs:
                            bad += 1
                            first_fail[:] = first_fail or [f"{tag}: {errs[0]}"]
                            print(f"FAIL {tag}:\n    " + "\n    ".join(errs))
                        else:
                            print(f"ok   {tag}: n_local {plan['n_local']} n_opt {plan['n_opt']}")
                    perrs = check_dp_pairs(plans, c, dp, i % 2) if len(plans) == 4 else [
                        f"not checked: {4 - len(plans)} of the 4 --zero/--shard-vocab plans failed"]
                    n += 1
                    if perrs:
                        bad += 1
                        first_fail[:] = first_fail or [f"{name} dp {dp} {shape}: {perrs[0]}"]
                        print(f"FAIL {name} dp {dp} {shape} (--zero/--shard-vocab savings):\n    " + "\n    ".join(perrs))
            print(f"{name} (floatX {s} bytes): {n} data-parallel checks ({len(jobs)} plans, {len(DP_MODELS) * len(DPS)} --zero/--shard-vocab savings)")
            total += n
    print(f"memory plan vs formula: {total - bad} agree, {bad} differ")
    if first_fail:
        print(f"first difference: {first_fail[0]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
