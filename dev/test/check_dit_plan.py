#!/usr/bin/env python3
"""Holds train_dit's memory plan against the formulas of docs/memory.md, section 9.

    python3 dev/test/check_dit_plan.py ./train_dit_cpu [./build/train_dit ...]
    python3 dev/test/check_dit_plan.py --shapes 2 ./build/train_dit   # the first 2 shapes only
    python3 dev/test/check_dit_plan.py --table ./build/train_dit   # section 9's worked example

For a grid of model and clip shapes (odd sizes, head dims that are not powers of two,
several clip/patch shapes, B = 1..3) and memory flags (--ffn-chunks 1/3 along hidden and
seq, --recompute 0/1/2, --offload-act 0/1/2/-1/L), runs `BINARY --plan-only 1 --plan-json F`
(no allocation, no GPU needed) and compares EVERY entry of the plan, by name and size,
with the formulas written here from the document, independently of the C code:
parameters, gradients, optimizer state, the saved activations, the offload slots and
host blocks, every scratch buffer, the per-block size and the totals. An entry the
formulas do not name, or one they name that the plan lacks, fails too. sizeof(floatX)
comes from the plan (4 in the CPU and FP32 builds, 2 in the bf16 CUDA build, which also
has fp32 master weights) and is checked against the build's precision.

Then, per shape, each flag must lower the device bytes it claims to (section 9.6): the
difference between the plan with the flag and the plan without it must be exactly the
closed form of the document, and positive where the document says it saves.
Plans with --offload-optim 1 (one process, and dp 3 under ZeRO-1) must hold the optimizer
entries on the host with the staging of section 7, and none of them on the device.

--table prints the hunyuan-13B example of section 9.7 from the formulas and checks every
entry of the binary's plan behind it (2^14..2^17 tokens and the preset's 118,800).

--shapes K keeps the first K shapes (all their flag sets): the CUDA build takes about
0.2 s to start (it loads cuBLAS, NCCL and MPI), so make test checks it on 2 shapes.

Plans run two at a time (one process each). Prints one line per failing configuration
and a summary, and exits non-zero on any mismatch (or on a plan the binary could not
write).
"""
import itertools
import os
import sys
import tempfile

import plan_json  # dev/test/plan_json.py: run --plan-only, read the JSON
from check_memory_plan import stage_want  # the --zero stages' entries, the same for every model (docs/memory.md 7.1)

ALIGN = 256  # ARENA_ALIGN: every field of a block and every arena entry starts on it
TEMB = 256   # the sinusoidal timestep embedding


def al(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def cdiv(a, b):
    return (a + b - 1) // b


# --- the formulas of docs/memory.md, section 9 --------------------------------------

def tokens(c):
    return (c["Fr"] // c["pt"]) * (c["Hi"] // c["ph"]) * (c["Wi"] // c["pw"])


def patch_dim(c):
    return c["C"] * c["pt"] * c["ph"] * c["pw"]


def block_params(c):
    """section 9.1: a block's 10 D^2 + 2 D FF + 11 D + FF + 2 hd"""
    D, FF, hd = c["D"], c["FF"], c["D"] // c["H"]
    return 10 * D * D + 2 * D * FF + 11 * D + FF + 2 * hd


def num_params(c):
    """section 9.1: L blocks, and the rest"""
    D, L, P = c["D"], c["L"], patch_dim(c)
    return L * block_params(c) + 3 * D * D + 2 * P * D + (c["NC"] + 262) * D + P


def shard(c, tp):
    """section 9.8: what TP rank 0 holds (the plan --plan-only prints): H/tp heads of hd, so
    Dl = H/tp * hd wide q, k, v, o; ceil(FF/tp) FFN units (the first FF % tp ranks hold one
    more); FFmax, the largest rank's, sets the number of hidden chunks"""
    hd = c["D"] // c["H"]
    Hl = c["H"] // tp
    return Hl, Hl * hd, cdiv(c["FF"], tp), cdiv(c["FF"], tp)


def local_params(c, dp, zero, tp=1):
    """section 9.8: this rank's parameters and optimizer state: one bucket per block (its
    share under TP: qkv and fc1 by rows, proj and fc2 by columns, the rest replicated) and one
    for the rest, each padded to a multiple of dp under --zero 1, which owns 1/dp of each"""
    pad = (lambda n: cdiv(n, dp) * dp) if zero else (lambda n: n)  # (also the layer buckets, for --zero 2, 3)
    D, hd = c["D"], c["D"] // c["H"]
    _, Dl, FFl, _ = shard(c, tp)
    blk = 6 * D * D + 6 * D + 3 * Dl * D + 3 * Dl + 2 * hd + D * Dl + D + 2 * FFl * D + FFl + D
    rest = num_params(c) - c["L"] * block_params(c)
    n_local = c["L"] * pad(blk) + pad(rest)
    return n_local, n_local // dp if zero else n_local, [pad(blk)] * c["L"]


# the per-block fields of table 9.2, in the order of the block layout
FIELDS = ["h", "mean1", "rstd1", "a1", "qp", "kp", "qrstd", "krstd", "q", "k", "v", "o", "lse", "y1", "hmid",
          "mean2", "rstd2", "a2", "u", "g", "y2", "a1 gathered", "a2 gathered"]
GATHERED = ("a1 gathered", "a2 gathered")
FFN_INTERMEDIATE = ("u", "g", "y2")


def sp_of(f):
    """section 9.8: sequence parallelism (--tp-mode reducescatter), and whether the gathered
    a1, a2 are kept (--tp-recompute-allgather 0 with --recompute 0)"""
    sp = f.get("sp", 0) and f.get("tp", 1) > 1
    return sp, sp and f.get("regather", 1) == 0 and f["recompute"] == 0


def field_bytes(c, B, N, s, tp=1, sp=0, keep=0):
    """bytes of each field of one block (table 9.2), on TP rank 0 (section 9.8); under
    sequence parallelism the residual stream's fields hold this rank's BN/tp rows"""
    BN = B * N
    own = BN // tp if sp else BN
    Hl, Dl, FFl, _ = shard(c, tp)
    fb = {x: own * c["D"] * s for x in FIELDS}      # the D-wide fields, in floatX: h, y1, hmid, y2
    for x in ("a1", "a2"):                          # views of their gathered copies when those are kept
        fb[x] = 0 if keep else own * c["D"] * s
    for x in GATHERED:
        fb[x] = BN * c["D"] * s if keep else 0
    for x in ("qp", "kp", "q", "k", "v", "o"):      # this rank's heads, all rows
        fb[x] = BN * Dl * s
    for x in ("mean1", "rstd1", "mean2", "rstd2"):  # LayerNorm statistics, fp32
        fb[x] = 4 * own
    for x in ("qrstd", "krstd", "lse"):             # one fp32 per token and head
        fb[x] = 4 * BN * Hl
    fb["u"] = fb["g"] = BN * FFl * s               # the FFN intermediate
    return fb


def in_chunk(f):
    """the chunked FFN's fields, one chunk at a time (sequence parallelism keeps y2)"""
    if f["ffn_chunks"] == 1:
        return ()
    return ("u", "g") if sp_of(f)[0] else FFN_INTERMEDIATE


def kept_fields(f):
    """table 9.3: what a block keeps for backward under the flags"""
    if f["recompute"] == 2:
        return ["h"] + list(GATHERED)  # (the gathered copies: 0 bytes unless kept, never under --recompute 2)
    keep = list(FIELDS)
    if f["recompute"] == 1:
        keep = [x for x in keep if x not in ("a1", "a2", "g", "q", "k")]
    return [x for x in keep if x not in in_chunk(f)]


def work_fields(f):
    """the shared work buffer: the fields not kept, less the chunked FFN intermediate"""
    keep = kept_fields(f)
    return [x for x in FIELDS if x not in keep and x not in in_chunk(f)]


def block_bytes(c, B, N, f, s):
    fb = field_bytes(c, B, N, s, f.get("tp", 1), *sp_of(f))
    return sum(al(fb[x]) for x in kept_fields(f))


def n_offloaded(f, L):
    return L - 1 if f["offload"] == -1 else f["offload"]


def ffn_chunk_shape(c, B, N, f):
    """rows x columns of one FFN chunk (section 9.5; under TP of this rank's units, 9.8)"""
    K = f["ffn_chunks"]
    _, _, FFl, FFmax = shard(c, f.get("tp", 1))
    if K > 1 and f["ffn_seq"]:
        return cdiv(N, K), FFl               # a chunk never spans two clips
    w = cdiv(FFmax, K)  # rounded up to a multiple of 64 when at least 64 (train_args.h ffn_chunk_width)
    return B * N, (min(FFmax, cdiv(w, 64) * 64) if w >= 64 else w)


def expected_plan(c, B, f, s, master, cp=1):
    """every device and host entry of the plan, by name (sections 9.1, 9.4, 9.5); under
    context parallelism (cp > 1, section 11) N is this rank's 1/cp of a clip's tokens and
    the gradient group dp x cp (CP's own buffers: dev/test/check_cp_plan.py)"""
    D, L, H, FF, hd = c["D"], c["L"], c["H"], c["FF"], c["D"] // c["H"]
    N, P = tokens(c) // cp, patch_dim(c)
    BN, np_ = B * N, num_params(c)
    tp = f.get("tp", 1)
    sp, keep = sp_of(f)
    own = BN // tp if sp else BN  # this rank's rows of the residual stream (9.8)
    Hl, Dl, _, _ = shard(c, tp)
    dpg = f.get("dp", 1) * cp
    n_local, n_opt, layer_buckets = local_params(c, dpg, f.get("zero", 0), tp)
    fb = field_bytes(c, B, N, s, tp, sp, keep)
    block = block_bytes(c, B, N, f, s)
    work = sum(al(fb[x]) for x in work_fields(f))
    off = n_offloaded(f, L)
    chunked = f["ffn_chunks"] > 1
    rows, cols = ffn_chunk_shape(c, B, N, f)
    chunk = rows * cols * s
    act = own * D * s
    clip = B * c["C"] * c["Fr"] * c["Hi"] * c["Wi"] * s
    patches = BN * P * s
    bd = B * D * s
    # the parameters, gradients and optimizer state of every --zero stage (docs/memory.md 7.1, 9.8)
    dev = stage_want(layer_buckets, dpg, n_local, n_opt, f.get("zero", 0), s, master, f.get("gacc", 0), f.get("keep", 0))
    dev.update({
        "saved activations (layers)": (L - off) * block,
        "offload slots": min(off, 2) * block,
        "saved activations (h_final)": act,
        "block work (not saved)": work,
        "ffn chunk u": chunk if chunked else 0,
        "ffn chunk g": chunk if chunked else 0,
        "ffn chunk y2": rows * D * s if chunked and not sp else 0,  # sequence parallelism: in the staging
        "ffn d(g), d(u)": chunk,
        "d residual": act,
        "d modulated input": act,
        "d gated branch": act,
        "d attention output": BN * Dl * s,  # this rank's heads (9.8)
        "dq": BN * Dl * s,
        "dk": BN * Dl * s,
        "dv": BN * Dl * s,
        "dq before norm": BN * Dl * s,
        "dk before norm": BN * Dl * s,
        # --recompute 1 only: mean and rstd of one LayerNorm, and BN*Hl for the q/k rstd (9.5)
        "norm statistics (recompute)": 4 * (2 * own + BN * Hl) if f["recompute"] == 1 else 0,
        # tensor parallelism's recycled buffers: none in allreduce mode, all rows each under
        # sequence parallelism (9.8)
        "tp gathered input": BN * D * s if sp else 0,
        "tp gathered gradient": BN * D * s if sp else 0,
        "tp reduce-scatter staging": BN * D * s if sp else 0,
        "clips x0": clip,
        "noise": clip,
        "x_t": clip,
        "target v": clip,
        "v_pred": clip,
        "d v_pred": clip,
        "patches of x_t": patches,
        "final layer output": patches,
        "d final layer output": patches,
        "final norm output": act,
        "final norm statistics": 4 * 2 * own,
        "t, y, per-clip losses": 4 * 3 * B,
        "conditioning (t emb, c)": B * TEMB * s + 4 * bd,
        "adaLN vectors (all blocks)": 6 * L * bd + 2 * bd,
        "d conditioning": 11 * bd,
        "rope3d cos + sin": 4 * 2 * tokens(c) * (hd // 2),  # every position of a clip
        "grad norm": 4,
        "attention backward scratch (tc, tc2)": 0,  # --attention auto and fp32: the fp32 kernels need none
        "attention workspace (cudnn)": 0,    # the same (cuDNN's: check_memory_plan.cudnn_workspace)
        # fp32 partials of the two-stage column sums (chunks of 256 rows): the biases' (up to
        # BN rows of the widest of D, Dl, FFl, P) or the adaLN's (2 arrays, B samples of N rows)
        "column-sum partials (bias, adaLN backward)":
            4 * max(cdiv(BN, 256) * max(D, Dl, shard(c, tp)[2], P), 2 * B * cdiv(N, 256) * D),
    })
    host = {"comm staging (--comm mpi)": 0,  # a plan has no launcher: no staging (the CUDA build's --comm mpi at run time)
            "offloaded activations": off * block}
    if f.get("offload_optim"):  # section 7: the optimizer state on the host, with the staging of the CPU update
        host.update({k: dev.pop(k) for k in ("master weights (fp32)", "adam m", "adam v")})
        host.update({"optimizer staging (grads)": n_opt * s, "optimizer staging (params)": n_opt * s})
    meta = {"act_block_bytes": block, "n_offload": off, "num_params": np_, "N": N, "P": P,
            "sizeof_floatX": s, "master": master, "dp": f.get("dp", 1), "tp": tp, "tp_sp": int(sp),
            "keep_gathered": int(keep), "zero": f.get("zero", 0), "offload_optim": f.get("offload_optim", 0),
            "n_local": n_local, "n_opt": n_opt}
    return dev, host, meta


# --- running the binary ----------------------------------------------------------------

def flag_args(f):
    par = ["--dp", str(f["dp"]), "--zero", str(f["zero"]), "--fp32-grad-accum", str(f["gacc"])] if "dp" in f else []
    par += ["--zero-reshard", "0"] if f.get("keep") else []
    par += ["--tp", str(f["tp"])] if "tp" in f else []
    par += ["--offload-optim", "1"] if f.get("offload_optim") else []
    par += ["--tp-mode", "reducescatter", "--tp-recompute-allgather", str(f.get("regather", 1))] if f.get("sp") else []
    return ["--ffn-chunks", str(f["ffn_chunks"]), "--ffn-chunk-dim", "seq" if f["ffn_seq"] else "hidden",
            "--recompute", str(f["recompute"]), "--offload-act", str(f["offload"])] + par


def shape_args(c, B):
    return ["--channels", str(c["C"]), "--frames", str(c["Fr"]), "--height", str(c["Hi"]), "--width", str(c["Wi"]),
            "--pt", str(c["pt"]), "--ph", str(c["ph"]), "--pw", str(c["pw"]), "--D", str(c["D"]), "--L", str(c["L"]),
            "--H", str(c["H"]), "--FF", str(c["FF"]), "--NC", str(c["NC"]), "--batch", str(B)]


def run_plan(binary, c, B, f, path):
    return plan_json.run_plan([binary, "--plan-only", "1", "--plan-json", path] + shape_args(c, B) + flag_args(f), path)


def run_all(binary, jobs, tmp):
    """runs every (c, B, f) of jobs, two processes at a time (make test shares 2 cores)"""
    def one(i):
        c, B, f = jobs[i]
        return run_plan(binary, c, B, f, os.path.join(tmp, f"plan{i}.json"))
    return plan_json.run_all(one, len(jobs), 2)


# --- the checks --------------------------------------------------------------------------

def check_plan(plan, c, B, f):
    """every entry of one plan against the formulas"""
    s = plan["sizeof_floatX"]
    master = 1 if s == 2 else 0  # the bf16 build keeps fp32 master weights, fp32 builds do not
    errs = []
    if s not in (2, 4):
        errs.append(f"sizeof_floatX {s}, want 2 (bf16) or 4 (fp32)")
    if plan.get("master") != master:
        errs.append(f"master {plan.get('master')} with floatX of {s} bytes (bf16 has fp32 master weights, fp32 none)")
    dev, host, meta = expected_plan(c, B, f, s, master)
    for k, v in meta.items():
        if plan.get(k) != v:
            errs.append(f"{k}: plan {plan.get(k)} formula {v}")
    for space, want in (("device", dev), ("host", host)):
        entries = plan[space]["entries"]
        got = {e["name"]: e["bytes"] for e in entries}
        if len(got) != len(entries):
            errs.append(f"{space}: an entry name appears twice")
        errs += [f"{space} '{k}': plan {got.get(k)} formula {v}" for k, v in want.items() if got.get(k) != v]
        errs += [f"{space} '{k}' ({got[k]} bytes): not in the formulas" for k in got if k not in want]
        total = sum(al(e["bytes"]) for e in entries)
        if plan[space]["total"] != total:
            errs.append(f"{space} total {plan[space]['total']} != sum of aligned entries {total}")
    return errs


def device_acts(plan):
    """the device bytes the flags act on: resident blocks, offload slots, the work buffer"""
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    return sum(got.get(k, 0) for k in ("saved activations (layers)", "offload slots", "block work (not saved)"))


def claimed_saving(c, B, base, flag, s):
    """section 9.6: what `flag` saves against `base` (the same flags without it), as
    (device activation bytes: resident blocks + offload slots + work buffer, whole device arena)"""
    N, L, D, FF = tokens(c), c["L"], c["D"], c["FF"]
    fb = field_bytes(c, B, N, s)
    off = n_offloaded(base, L)
    on_device = L - off + min(off, 2)  # blocks the device holds: the resident ones and the slots
    aligned = lambda names: sum(al(fb[x]) for x in names)
    if flag == "ffn":  # --ffn-chunks K > 1 against 1
        if base["recompute"] == 0:    # every block stops keeping u, g, y2
            act = on_device * aligned(("u", "g", "y2"))
        elif base["recompute"] == 1:  # u and y2 leave every block, g (already work) leaves the work buffer
            act = on_device * aligned(("u", "y2")) + aligned(("g",))
        else:                         # only the work buffer keeps them under 2
            act = aligned(("u", "g", "y2"))
        rows, cols = ffn_chunk_shape(c, B, N, dict(base, ffn_chunks=3))
        chunk = rows * cols * s
        # the backward's d(g) shrinks from [BN, FF] to one chunk; u, g, y2 of one chunk appear
        scratch = al(B * N * FF * s) - al(chunk) - 2 * al(chunk) - al(rows * D * s)
        return act, act + scratch
    if flag == "rec1":  # --recompute 1 against 0: a1, a2, q, k (and g unchunked) move to the work buffer
        moved = ("a1", "a2", "q", "k") + (() if base["ffn_chunks"] > 1 else ("g",))
        act = (on_device - 1) * aligned(moved)
        stats = al(4 * (2 * B * N + B * N * c["H"]))  # the recomputed norms' statistics (scratch)
        return act, act - stats
    if flag == "rec2":  # --recompute 2 against 0: all but h moves to the work buffer
        act = (on_device - 1) * (block_bytes(c, B, N, base, s) - al(fb["h"]))
        return act, act
    raise ValueError(flag)


def check_savings(plans, c, B, s):
    """each flag against the plan without it: the closed forms of section 9.6"""
    errs = []
    n = 0
    tot = lambda p: p["device"]["total"]
    L = c["L"]
    for key, p in plans.items():
        if key[0] == "dp":
            continue  # the flag savings are compared within one layout, the single-process one
        ffn, seq, rec, off = key
        base = dict(ffn_chunks=ffn, ffn_seq=seq, recompute=rec, offload=off)
        # --ffn-chunks 3 against 1, along hidden and seq, under every --recompute
        if ffn == 1:
            for sq in (0, 1):
                q = plans.get((3, sq, rec, off))
                if q is None:
                    continue
                act, total = claimed_saving(c, B, dict(base, ffn_seq=sq), "ffn", s)
                got_act, got_tot = device_acts(p) - device_acts(q), tot(p) - tot(q)
                n += 1
                if got_act != act or got_tot != total:
                    errs.append(f"--ffn-chunks 3 ({'seq' if sq else 'hidden'}) on {key}: saves {got_act} activation / "
                                f"{got_tot} device bytes, the closed form says {act} / {total}")
                elif act <= 0:
                    errs.append(f"--ffn-chunks 3 on {key}: saves {act} activation bytes, not positive")
        # --recompute 1 and 2 against 0
        if rec == 0:
            for r, name in ((1, "rec1"), (2, "rec2")):
                q = plans.get((ffn, seq, r, off))
                if q is None:
                    continue
                act, total = claimed_saving(c, B, base, name, s)
                got_act, got_tot = device_acts(p) - device_acts(q), tot(p) - tot(q)
                n += 1
                on_device = L - n_offloaded(base, L) + min(n_offloaded(base, L), 2)
                if got_act != act or got_tot != total:
                    errs.append(f"--recompute {r} on {key}: saves {got_act} activation / {got_tot} device bytes, "
                                f"the closed form says {act} / {total}")
                elif on_device > 1 and act <= 0:
                    errs.append(f"--recompute {r} on {key}: saves {act} bytes with {on_device} blocks on the device")
        # --offload-act N against 0: (N - min(N, 2)) blocks leave the device, N reach the host
        if off == 0:
            for o in (1, 2, -1, L):
                q = plans.get((ffn, seq, rec, o))
                if q is None:
                    continue
                N = n_offloaded(dict(offload=o), L)
                blk = block_bytes(c, B, tokens(c), base, s)
                got_act, got_tot = device_acts(p) - device_acts(q), tot(p) - tot(q)
                host = q["host"]["total"] - p["host"]["total"]
                n += 1
                if got_act != (N - min(N, 2)) * blk or got_tot != (N - min(N, 2)) * blk or host != N * blk:
                    errs.append(f"--offload-act {o} on {key}: device saves {got_act} (arena {got_tot}), host grows "
                                f"{host}; the closed form says {(N - min(N, 2)) * blk} and {N * blk}")
                elif N > 2 and got_act <= 0:
                    errs.append(f"--offload-act {o} on {key}: saves nothing with {N} blocks offloaded")
    return n, errs


# --- the grid ---------------------------------------------------------------------------

# D = H x an even head dim: hd 30, 20, 12, 16, 22, 8; FF mostly not a multiple of 3
# (--ffn-chunks 3 leaves a short last chunk); clip/patch shapes with N = 75, 36, 15, 256,
# 45, 64 tokens (seq chunks of ceil(N/3) rows, a short one where 3 does not divide N) and
# P = 12, 72, 14, 8, 6, 4 values per patch; B = 1, 2, 3
SHAPES = [
    (dict(C=3, Fr=5, Hi=6, Wi=10, pt=1, ph=2, pw=2, D=90, L=3, H=3, FF=173, NC=4), 2),
    (dict(C=4, Fr=6, Hi=9, Wi=12, pt=3, ph=3, pw=2, D=100, L=4, H=5, FF=250, NC=1), 3),
    (dict(C=2, Fr=7, Hi=5, Wi=3, pt=7, ph=1, pw=1, D=84, L=5, H=7, FF=199, NC=7), 1),
    (dict(C=1, Fr=8, Hi=16, Wi=16, pt=2, ph=2, pw=2, D=64, L=4, H=4, FF=256, NC=10), 3),  # dit-tiny's shape
    (dict(C=3, Fr=5, Hi=3, Wi=6, pt=1, ph=1, pw=2, D=66, L=6, H=3, FF=97, NC=2), 2),
    (dict(C=1, Fr=4, Hi=8, Wi=8, pt=1, ph=2, pw=2, D=72, L=3, H=9, FF=288, NC=3), 1),
]
FLAGSETS = [dict(ffn_chunks=k, ffn_seq=sq, recompute=r, offload=o)
            for (k, sq), r, o in itertools.product([(1, 0), (3, 0), (3, 1)], [0, 1, 2], [0, 1, 2, -1])]


def grid_flags(c, B):
    """the flag sets of one shape: the grid, plus offloading every block (--offload-act L)"""
    extra = [dict(ffn_chunks=k, ffn_seq=sq, recompute=r, offload=c["L"]) for (k, sq), r in
             itertools.product([(1, 0), (3, 1)], [0, 2])]
    # data parallelism (section 9.8): the plan of one rank of dp, with ZeRO-1 and the fp32 accumulator
    par = [dict(ffn_chunks=1, ffn_seq=0, recompute=0, offload=0, dp=dp, zero=z, gacc=g)
           for dp, z, g in ((2, 0, 0), (2, 1, 0), (3, 1, 1), (4, 1, 0), (7, 1, 1), (2, 2, 0), (3, 2, 1), (4, 3, 1), (7, 3, 0))]
    par += [dict(ffn_chunks=1, ffn_seq=0, recompute=1, offload=0, dp=3, zero=3, gacc=0, keep=1)]  # --zero-reshard 0
    # --offload-optim 1 (section 7): the optimizer entries on the host, one process and under ZeRO 1, 2 and 3
    par += [dict(ffn_chunks=1, ffn_seq=0, recompute=r, offload=o, dp=dp, zero=z, gacc=0, offload_optim=1)
            for dp, z, r, o in ((1, 0, 0, 0), (3, 1, 1, 1), (2, 2, 0, 0), (4, 3, 1, 1))]
    # tensor parallelism (section 9.8): rank 0 of every tp that divides H, alone, with the
    # memory flags, and beside dp 2 under ZeRO-1
    for tp in [t for t in range(2, c["H"] + 1) if c["H"] % t == 0][:2]:
        par += [dict(ffn_chunks=k, ffn_seq=sq, recompute=r, offload=o, dp=dp, zero=z, gacc=0, tp=tp)
                for (k, sq, r, o, dp, z) in ((1, 0, 0, 0, 1, 0), (3, 0, 1, 1, 1, 0), (2, 1, 2, -1, 1, 0), (1, 0, 0, 0, 2, 1), (3, 0, 1, 0, 2, 3))]
        # sequence parallelism (9.8) where the B*N rows split into tp blocks: --tp-recompute-allgather 1 and 0
        # (the gathered a1, a2 kept: with --recompute 0 only), the memory flags, beside dp 2
        if B * tokens(c) % tp == 0:
            par += [dict(ffn_chunks=k, ffn_seq=sq, recompute=r, offload=o, dp=dp, zero=z, gacc=0, tp=tp, sp=1, regather=g)
                    for (k, sq, r, o, dp, z, g) in ((1, 0, 0, 0, 1, 0, 1), (1, 0, 0, 1, 1, 0, 0), (3, 0, 1, 1, 1, 0, 0),
                                                    (3, 1, 0, 0, 1, 0, 0), (2, 1, 2, -1, 1, 0, 1), (3, 0, 2, 0, 2, 1, 1), (1, 0, 0, 0, 2, 2, 1))]
    return FLAGSETS + extra + par


def key_of(f):
    """the memory flags (the flag savings compare those); a DP plan is kept apart"""
    k = (f["ffn_chunks"], f["ffn_seq"], f["recompute"], f["offload"])
    return k if "dp" not in f else ("dp", f["dp"], f["zero"], f["gacc"], f.get("tp", 1), f.get("sp", 0), f.get("regather", 1),
                                    f.get("keep", 0), f.get("offload_optim", 0)) + k


def check_binary(binary, tmp, shapes):
    name = os.path.basename(binary)
    jobs = [(c, B, f) for c, B in shapes for f in grid_flags(c, B)]
    results = run_all(binary, jobs, tmp)
    bad = n = 0
    first = None
    s = None
    by_shape = {}
    for (c, B, f), (plan, err) in zip(jobs, results):
        errs = [err] if err else check_plan(plan, c, B, f)
        n += 1
        if plan is not None:
            s = plan["sizeof_floatX"]
            by_shape.setdefault(id(c), (c, B, {}))[2][key_of(f)] = plan
        if errs:
            bad += 1
            tag = f"{name} {describe(c, B)} {flag_text(f)}"
            first = first or f"{tag}: {errs[0]}"
            print(f"FAIL {tag}:\n    " + "\n    ".join(errs))
    print(f"{name} (floatX {s} bytes): {n} plans checked entry by entry, {n - bad} agree")
    ns = bad_s = 0
    for c, B, plans in by_shape.values():
        k, errs = check_savings(plans, c, B, plans[next(iter(plans))]["sizeof_floatX"])
        ns += k
        if errs:
            bad_s += len(errs)
            first = first or f"{name} {describe(c, B)}: {errs[0]}"
            print(f"FAIL {name} {describe(c, B)} (flag savings):\n    " + "\n    ".join(errs))
    print(f"{name} (floatX {s} bytes): {ns} flag savings checked against the closed forms, {ns - bad_s} agree")
    return n + ns, bad + bad_s, first


def describe(c, B):
    return (f"C={c['C']} clip {c['Fr']}x{c['Hi']}x{c['Wi']} patch {c['pt']}x{c['ph']}x{c['pw']} D={c['D']} "
            f"L={c['L']} H={c['H']} FF={c['FF']} B={B}")


def flag_text(f):
    return " ".join(flag_args(f))


# --- section 9.7: hunyuan-13B at 2^14..2^17 tokens -------------------------------------

HUNYUAN = dict(C=16, Fr=33, Hi=90, Wi=160, pt=1, ph=2, pw=2, D=3072, L=60, H=24, FF=12288, NC=1)
# clips of exactly 2^14..2^17 tokens with patch 1x2x2: 16 frames of 64x64, 64x128, 128x128,
# 128x256; and the preset's own 33 x 90 x 160 (118,800 tokens)
HUNYUAN_CLIPS = [("2^14", 16, 64, 64), ("2^15", 16, 64, 128), ("2^16", 16, 128, 128), ("118,800", 33, 90, 160),
                 ("2^17", 16, 128, 256)]
TABLE_FLAGS = [
    ("no flag", dict(ffn_chunks=1, ffn_seq=0, recompute=0, offload=0)),
    ("--ffn-chunks 4", dict(ffn_chunks=4, ffn_seq=0, recompute=0, offload=0)),
    ("--recompute 1", dict(ffn_chunks=1, ffn_seq=0, recompute=1, offload=0)),
    ("--ffn-chunks 4 --recompute 1", dict(ffn_chunks=4, ffn_seq=0, recompute=1, offload=0)),
    ("--recompute 2", dict(ffn_chunks=1, ffn_seq=0, recompute=2, offload=0)),
    ("--offload-act -1", dict(ffn_chunks=1, ffn_seq=0, recompute=0, offload=-1)),
    ("--ffn-chunks 4 --offload-act -1", dict(ffn_chunks=4, ffn_seq=0, recompute=0, offload=-1)),
    ("--ffn-chunks 4 --recompute 1 --offload-act -1", dict(ffn_chunks=4, ffn_seq=0, recompute=1, offload=-1)),
    ("--recompute 2 --offload-act -1", dict(ffn_chunks=1, ffn_seq=0, recompute=2, offload=-1)),
]


def table(binary, tmp):
    """the worked example from the formulas, every number checked against the binary's plan"""
    jobs, keys = [], []
    for label, f in TABLE_FLAGS:
        for name, Fr, Hi, Wi in HUNYUAN_CLIPS:
            jobs.append((dict(HUNYUAN, Fr=Fr, Hi=Hi, Wi=Wi), 1, f))
            keys.append((label, name))
    results = dict(zip(keys, run_all(binary, jobs, tmp)))
    gib = 2.0 ** 30
    bad = 0
    cells = {}
    for (c, B, f), key in zip(jobs, keys):
        plan, err = results[key]
        s = plan["sizeof_floatX"] if plan else 2
        dev, host, meta = expected_plan(c, B, f, s, 1 if s == 2 else 0)
        errs = [err] if err else check_plan(plan, c, B, f)
        if errs:
            bad += 1
            print(f"FAIL {key}: " + "; ".join(errs[:3]))
        cells[key] = dict(block=meta["act_block_bytes"] / gib,
                          device=(dev["saved activations (layers)"] + dev["offload slots"]) / gib,
                          host=host["offloaded activations"] / gib, work=dev["block work (not saved)"] / gib,
                          total=sum(al(v) for v in dev.values()) / gib, static=sum(
                              dev[k] for k in ("parameters", "gradients", "master weights (fp32)", "adam m",
                                               "adam v")) / gib, params=meta["num_params"], N=meta["N"])
    head = "| flags | " + " | ".join(f"N = {n}" for n, *_ in HUNYUAN_CLIPS) + " |"
    rule = "|---|" + "---|" * len(HUNYUAN_CLIPS)
    for title, fmt in (("saved activations per block (GiB)", lambda x: f"{x['block']:.3f}"),
                       ("saved activations of all 60 blocks on the device, resident blocks + offload slots (GiB); "
                        "with offload, + the host's share", lambda x: f"{x['device']:.2f}" +
                        (f" + {x['host']:.2f} host" if x["host"] else "")),
                       ("block work buffer, scratch shared by all blocks (GiB)", lambda x: f"{x['work']:.3f}"),
                       ("whole device plan, static + activations + scratch (GiB)", lambda x: f"{x['total']:.2f}")):
        print(f"\n{title}:\n\n{head}\n{rule}")
        for label, _ in TABLE_FLAGS:
            print(f"| {label} | " + " | ".join(fmt(cells[(label, n)]) for n, *_ in HUNYUAN_CLIPS) + " |")
    one = cells[(TABLE_FLAGS[0][0], HUNYUAN_CLIPS[0][0])]
    print(f"\nparameters {one['params']:,}; static (parameters, gradients, master, m, v) {one['static']:.2f} GiB")
    print(f"{len(jobs)} plans of {os.path.basename(binary)}: {len(jobs) - bad} equal to the formulas")
    return 1 if bad else 0


def main():
    args = sys.argv[1:]
    with tempfile.TemporaryDirectory() as tmp:
        if args and args[0] == "--table":
            return table(args[1] if len(args) > 1 else "./build/train_dit", tmp)
        shapes = SHAPES
        if args and args[0] == "--shapes":
            shapes = SHAPES[:int(args[1])]
            args = args[2:]
        binaries = args or ["./train_dit_cpu"]
        total = bad = 0
        first = None
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                print(f"FAIL {binary}: not an executable")
                return 1
            n, b, f = check_binary(binary, tmp, shapes)
            total += n
            bad += b
            first = first or f
    print(f"dit memory plan vs formula: {total - bad} agree, {bad} differ")
    if first:
        print(f"first difference: {first}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
