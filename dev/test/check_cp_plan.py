#!/usr/bin/env python3
"""Holds train_llama's memory plan under context parallelism against docs/memory.md section 11.

    python3 dev/test/check_cp_plan.py ./train_llama_cpu ./train_dit_cpu [./build/train_llama ...]

For a grid of shapes, cp in {2, 4, 8}, --cp-mode ring / ulysses / hybrid, tp 1 and 2, dp 1
and 2 with --zero, and memory flags rotating, the plan of rank 0 (`--plan-only 1 --cp C
--tp T --dp D`, no MPI needed) must have:
  - every activation, offload and scratch entry of the one-process formulas
    (check_memory_plan.expected_plan) at T/cp tokens a sample, but the RoPE table (the
    model's max_seq_len) and the attention's delta scratch (CP's own);
  - CP's named buffers, section 11.2;
  - the parameter, gradient and optimizer entries of the data-parallel formulas over the
    dp x cp gradient group, and every comm count of section 10.4 with that group, plus
    the all-to-all and send-recv bytes of section 11.3;
and the per-layer block must be the one-process block at T/cp. Layouts that cannot work
(T not splitting into the chunks, heads not splitting over the Ulysses ways) must be
refused. Prints a summary line and one line per failure; exits non-zero on any.
"""
import itertools
import os
import sys
import tempfile
from fractions import Fraction

import plan_json
import check_memory_plan as M
import check_dit_plan as DP

# shapes whose T splits into 2 x 8 chunks; GQA with fewer kv heads than some Ulysses ways
CP_MODELS = [
    dict(V=512, D=64, L=4, H=8, KV=2, F=176, B=2, T=64, tied=1),
    dict(V=997, D=96, L=3, H=8, KV=8, F=250, B=1, T=128, tied=0),
    dict(V=32000, D=288, L=6, H=8, KV=4, F=768, B=4, T=256, tied=0),   # stories15M with H 8, KV 4
    dict(V=128256, D=2048, L=16, H=32, KV=8, F=8192, B=1, T=2048, tied=1),  # llama3-1B
]
LAYOUTS = []  # (cp, mode, U, tp)
for cp in (2, 4, 8):
    LAYOUTS += [(cp, "ring", 1, 1), (cp, "ulysses", cp, 1)]
    if cp >= 4:
        LAYOUTS.append((cp, "hybrid", 2, 1))
LAYOUTS += [(2, "ring", 1, 2), (2, "ulysses", 2, 2), (4, "hybrid", 2, 2)]
DPZ = [(1, 0), (2, 1), (1, 0), (2, 0)]


def cp_shape(c, cp, U, tp):
    """(chunks, C, Cr, Hl, KVl, Hu, KVu) of rank 0, or None where the layout cannot exist"""
    R = cp // U
    chunks = 2 if R > 1 else 1
    Hl, KVl, _ = M.tp_shares(c, tp)
    if c["T"] % (chunks * cp) or Hl % U or (KVl % U and U % KVl):
        return None
    C = c["T"] // (chunks * cp)
    return chunks, C, C * U, Hl, KVl, Hl // U, (KVl // U if KVl % U == 0 else 1)


def cp_entries(c, cp, U, s, shape, f):
    """section 11.2: the named recycled buffers and the fp32 scratch of rank 0"""
    chunks, C, Cr, Hl, KVl, Hu, KVu = shape
    R, B, hd = cp // U, c["B"], c["D"] // c["H"]
    rows = chunks * B * C
    qn, kvn = rows * U * Hu * hd, rows * U * KVu * hd
    qc, kvc = qn // chunks, kvn // chunks
    u, r = U > 1, R > 1
    return {
        "cp all-to-all send": max(qn, kvn) * s if u else 0, "cp all-to-all receive": max(qn, kvn) * s if u else 0,
        "cp heads q|k|v": (qn + 2 * kvn) * s if u else 0, "cp heads out|dout": 2 * qn * s if u else 0,
        "cp heads dq|dk|dv": (qn + 2 * kvn) * s if u else 0,
        "cp ring k|v block A": 2 * kvn * s if r else 0, "cp ring k|v block B": 2 * kvn * s if r else 0,
        "cp ring partial": (qc + 2 * kvc) * s if r else 0,
        **({"cp ring out|dq sums (fp32)": 4 * qn, "cp ring partial lse": 4 * B * Hu * Cr,
            "cp ring dk|dv sums A (fp32)": 8 * kvn, "cp ring dk|dv sums B (fp32)": 8 * kvn,
            "cp ring dk|dv received (fp32)": 8 * kvn} if r else {}),
        # the tensor-core backward's scratch for one call (a ring chunk, or the whole sample under
        # Ulysses alone); the fp32 attention needs none
        "cp attention backward scratch": M.backward_scratch(f, B, Cr if r else c["T"], Hu, KVu, hd),
    }, qn, kvn


def cp_comm(c, cp, U, s, qn, kvn, k, recompute):
    """section 11.3: bytes a rank sends per step in CP's exchanges (k micro-steps)"""
    R, L = cp // U, c["L"]
    fwd, bwd = k * L * (1 + (recompute >= 2)), k * L
    out = {}
    if U > 1:
        out["ulysses all-to-all"] = Fraction(U - 1, U) * s * (fwd * (2 * qn + 2 * kvn) + bwd * (4 * qn + 4 * kvn))
    if R > 1:
        out["ring send-recv"] = Fraction((fwd + bwd) * (R - 1) * 2 * kvn * s + bwd * R * 2 * kvn * 4)
    return out


def layout_args(f, lay, dpz):
    """the memory flags, the attention and the parallel layout of a plan's command line"""
    cp, mode, U, tp = lay
    dp, zero = dpz
    args = ["--ffn-chunks", str(f["ffn_chunks"]), "--ffn-chunk-dim", "seq" if f["ffn_seq"] else "hidden",
            "--offload-act", str(f["offload"]), "--recompute", str(f["recompute"]), "--attention", f.get("attention", "fp32"),
            "--cp", str(cp), "--cp-mode", mode, "--tp", str(tp), "--dp", str(dp), "--zero", str(zero)]
    return args + (["--cp-ulysses", str(U)] if mode == "hybrid" else [])


def run(binary, c, f, lay, dpz, path):
    cmd = [binary, "--plan-only", "1", "--plan-json", path, "--V", str(c["V"]), "--D", str(c["D"]), "--L", str(c["L"]),
           "--H", str(c["H"]), "--KV", str(c["KV"]), "--F", str(c["F"]), "--max-seq-len", str(c["T"]),
           "--batch", str(c["B"]), "--seq", str(c["T"]), "--tied", str(c["tied"]), "--ce-chunks", str(f["ce_chunks"])]
    cmd += layout_args(f, lay, dpz)
    return cmd, plan_json.run_plan(cmd, path, keep_stdout=True)


def check(plan, c, f, lay, dpz):
    cp, mode, U, tp = lay
    dp, zero = dpz
    s = plan["sizeof_floatX"]
    master = 1 if s == 2 else 0
    shape = cp_shape(c, cp, U, tp)
    local = dict(c, T=c["T"] // cp)
    tpl = M.TP(tp)
    block, dev_want, host_want, _ = M.expected_plan(local, c["B"], local["T"], f, s, tpl)
    hd = c["D"] // c["H"]
    dev_want["rope cos + sin"] = 4 * max(c["T"], 8) * hd  # the whole sample's positions
    dev_want["attention backward scratch (tc, tc2)"] = 0  # CP has its own (cp attention backward scratch)
    ring = cp // U > 1  # a call's tokens: a ring chunk, or the whole sample under Ulysses alone
    dev_want["attention workspace (cudnn)"] = M.cudnn_workspace(f, c["B"], shape[2] if ring else c["T"], shape[5], hd)
    cpe, qn, kvn = cp_entries(c, cp, U, s, shape, f)
    dev_want.update(cpe)
    g = dp * cp  # the gradient group
    n_local, n_opt, want_p = M.tp_formula(c, tp, g, zero, 0, s, master, 0) if tp > 1 else \
        M.dp_formula(c, g, zero, 0, s, master, 0)
    dev_want.update(want_p)
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    got_host = {e["name"]: e["bytes"] for e in plan["host"]["entries"]}
    errs = [f"{k}: plan {got.get(k)} formula {v}" for k, v in dev_want.items() if got.get(k) != v]
    errs += [f"host {k}: plan {got_host.get(k)} formula {v}" for k, v in host_want.items() if got_host.get(k) != v]
    unknown = [k for k in got if k not in dev_want]
    if unknown:
        errs.append(f"entries no formula names: {unknown}")
    kinds = {e["name"]: e["kind"] for e in plan["device"]["entries"]}
    errs += [f"{k}: kind {kinds.get(k)}, want comm" for k in cpe if kinds.get(k) != "comm"]
    if plan["act_block_bytes"] != block:
        errs.append(f"per-layer block: plan {plan['act_block_bytes']}, one-process formula at T/cp {block}")
    for k, v in (("cp", cp), ("cp_ulysses", U), ("dp", dp), ("tp", tp), ("n_local", n_local), ("n_opt", n_opt)):
        if plan.get(k) != v:
            errs.append(f"{k}: plan {plan.get(k)} want {v}")
    comm = M.comm_formula(local, c["B"], local["T"], 1, tpl, f, g, zero, 0, s)
    for k, v in cp_comm(c, cp, U, s, qn, kvn, 1, f["recompute"]).items():
        comm[k] += v
    errs += M.check_comm(plan, comm)
    return errs


# DiT shapes (non-causal: one chunk a rank); tokens 64 and 256 split into 8; H 4 and 8
DIT_MODELS = [
    dict(C=1, Fr=4, Hi=8, Wi=8, pt=1, ph=2, pw=2, D=32, L=2, H=4, FF=48, NC=3, B=2),
    dict(C=3, Fr=4, Hi=16, Wi=16, pt=1, ph=2, pw=2, D=96, L=3, H=8, FF=250, NC=5, B=1),
]
DIT_LAYOUTS = [(2, "ring", 1, 1), (4, "ring", 1, 1), (8, "ring", 1, 1), (2, "ulysses", 2, 1), (4, "ulysses", 4, 1),
               (4, "hybrid", 2, 1), (8, "hybrid", 4, 1), (2, "ring", 1, 2), (2, "ulysses", 2, 2)]


def dit_run(binary, c, f, lay, dpz, path):
    cmd = [binary, "--plan-only", "1", "--plan-json", path] + DP.shape_args(c, c["B"]) + layout_args(f, lay, dpz)
    return cmd, plan_json.run_plan(cmd, path, keep_stdout=True)


def dit_check(plan, c, f, lay, dpz):
    cp, mode, U, tp = lay
    dp, zero = dpz
    s = plan["sizeof_floatX"]
    fd = dict(f, dp=dp, zero=zero, gacc=0, tp=tp)
    dev_want, host_want, _ = DP.expected_plan(c, c["B"], fd, s, 1 if s == 2 else 0, cp)
    Nt = DP.tokens(c)
    shape_c = dict(c, T=Nt, KV=c["H"])
    chunks, C, Cr = 1, Nt // cp, Nt // cp * U
    Hl = c["H"] // tp
    cpe, qn, kvn = cp_entries(shape_c, cp, U, s, (chunks, C, Cr, Hl, Hl, Hl // U, Hl // U), f)
    dev_want.update(cpe)
    dev_want["cp patches (whole clips)"] = dev_want["cp gathered patches"] = c["B"] * Nt * DP.patch_dim(c) * s
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    errs = [f"{k}: plan {got.get(k)} formula {v}" for k, v in dev_want.items() if got.get(k) != v]
    unknown = [k for k in got if k not in dev_want]
    if unknown:
        errs.append(f"entries no formula names: {unknown}")
    comm = plan.get("comm_bytes_per_step", {})
    for k, v in cp_comm(shape_c, cp, U, s, qn, kvn, 1, f["recompute"]).items():
        if abs(comm.get(k, -1) - v) > Fraction(1, 2) + v / 10**9:
            errs.append(f"comm {k}: plan {comm.get(k)} formula {float(v):.1f}")
    return errs


def refusals(binary):
    c = CP_MODELS[0]
    base = [binary, "--plan-only", "1", "--V", "512", "--D", "64", "--L", "2", "--H", "8", "--KV", "2", "--F", "176",
            "--max-seq-len", "64", "--batch", "1"]
    cases = [("T 60 does not split into 2 x 4 ring chunks", base + ["--seq", "60", "--cp", "4"]),
             ("T 62 does not split over cp 4 (ulysses)", base + ["--seq", "62", "--cp", "4", "--cp-mode", "ulysses"]),
             ("8 heads over tp 2 do not split into 8 ways", base + ["--seq", "64", "--cp", "8", "--cp-mode", "ulysses", "--tp", "2"]),
             ("hybrid ways 3 do not divide cp 4", base + ["--seq", "64", "--cp", "4", "--cp-mode", "hybrid", "--cp-ulysses", "3"])]
    errs = []
    for what, cmd in cases:
        rc, msg = plan_json.run_fails(cmd)
        if rc == 0:
            errs.append(f"{what}: accepted (exit 0), must be refused")
    return errs, len(cases)


def grid(binary):
    """(jobs, run, check) of one binary: the Llama grid or the DiT grid, every layout that can exist"""
    if "dit" in os.path.basename(binary):
        jobs = [(c, M.FLAGS[(5 * i) % len(M.FLAGS)], lay, DPZ[i % len(DPZ)])
                for i, (c, lay) in enumerate(itertools.product(DIT_MODELS, DIT_LAYOUTS))]
        return jobs, dit_run, dit_check
    jobs = [(c, M.FLAGS[(7 * i) % len(M.FLAGS)], lay, DPZ[i % len(DPZ)])
            for i, (c, lay) in enumerate(itertools.product(CP_MODELS, LAYOUTS)) if cp_shape(c, lay[0], lay[2], lay[3])]
    if not os.path.basename(binary).endswith("_cpu"):
        # the CUDA build: the tensor-core attentions where the head dim allows (llama3-1B's 64),
        # tc and tc2 alternately, for CP's own backward scratch
        jobs = [(c, dict(f, attention="tc2" if i % 2 else "tc") if c["D"] // c["H"] == 64 else f, lay, dpz)
                for i, (c, f, lay, dpz) in enumerate(jobs)]
    return jobs, run, check


def main():
    binaries = sys.argv[1:] or ["./train_llama_cpu"]
    bad = n = 0
    with tempfile.TemporaryDirectory() as tmp:
        for binary in binaries:
            jobs, run_one, check_one = grid(binary)
            results = plan_json.run_all(lambda i: run_one(binary, *jobs[i], os.path.join(tmp, f"p{i}.json")), len(jobs),
                                        max(2, min(8, os.cpu_count() or 2)))
            entries = 0
            for (c, f, lay, dpz), (cmd, (plan, err)) in zip(jobs, results):
                errs = [err] if err else check_one(plan, c, f, lay, dpz)
                n += 1
                if errs:
                    bad += 1
                    print(f"FAIL {' '.join(cmd[5:])}:\n    " + "\n    ".join(errs[:6]))
                else:
                    entries += len(plan["device"]["entries"]) + len(plan["host"]["entries"])
            what = f"{len(jobs)} context-parallel plans ({entries} entries equal to the formulas of docs/memory.md section 11)"
            if run_one is run:
                errs, k = refusals(binary)
                n += 1
                if errs:
                    bad += 1
                    print("FAIL refusals:\n    " + "\n    ".join(errs))
                what += f", {k} refusals"
            print(f"{os.path.basename(binary)}: {what}")
    print(f"{'PASS' if bad == 0 else 'FAIL'}: {n} checks, {bad} failed")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
