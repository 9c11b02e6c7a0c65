#!/usr/bin/env python3
"""Holds train_llama's memory plan against the formulas of docs/memory.md.

    python3 dev/test/check_memory_plan.py ./train_llama_cpu [./build/train_llama ...]

For a grid of model shapes and memory flags, runs `BINARY --plan-only 1 --plan-json F`
(no allocation, no GPU needed) and compares every activation, offload and scratch
entry of the plan with the formula written here from the document, independently of
the C code. A change that silently keeps a buffer alive, or drops one the formula
says must exist, fails. Also checks that each flag lowers the device bytes it claims
to.

Data parallelism (docs/memory.md section 7): for dp in {1, 2, 3, 4, 8}, --zero 0/1/2/3 and
--shard-vocab 0/1 and shapes tied and untied, with V and the layer buckets not
divisible by dp, the plan of rank 0 (`--dp N`, no MPI needed) must have exactly the
parameter, gradient, optimizer and comm entries, the n_local/n_opt of the formulas and
the comm_bytes_per_step counts of section 10.4 (--zero 2 and 3: the shards and the
recycled layer buffers of section 7.1, the per-micro-step reductions and gathers);
its other entries must be those of the dp=1 plan (the batch is per rank); --zero 1
must divide the optimizer state by dp up to at most (L+1)*(dp-1) elements of bucket
padding; and what --shard-vocab 1 saves against --shard-vocab 0 must be the closed
form of the document. --offload-optim 1 must move exactly the master weights and AdamW
moments from the device to the host and add the staging of the formula there.

Tensor parallelism (docs/memory.md section 10): for tp in {2, 3, 4, 8} (where it divides
H and KV), --tp-mode allreduce/reducescatter, --tp-recompute-allgather 0/1, --shard-vocab
0/1 and --recompute 0/1/2, on shapes with F not divisible by tp, odd V, tied and untied,
with the FFN/CE chunks, offload, dp 1/2, --zero, micro-steps and --fp32-grad-accum
rotating, rank 0's plan (`--tp T --dp D`, no MPI needed) must have every device and host
entry, n_local/n_opt, the kept fields (by name) and every comm_bytes_per_step count of
section 10; --tp-recompute-allgather 0 must add exactly the two gathered norm outputs
less the own rows (and change nothing elsewhere); where tp divides F, H and KV the SP
layer must be exactly the one-process layer / tp; and an indivisible tp or B*T under SP
must be refused. The bf16 CUDA build (0.2 s a start) runs every other (shape, tp) of the
grid, one rotation each, and adds --attention tc or tc2 where the head dim allows.

Plans run a few at a time (one process each). Prints a line per data-parallel
configuration and per failing configuration, and exits non-zero on any mismatch
(or on a plan the binary could not write).
"""
import itertools
import os
from fractions import Fraction
import sys
import tempfile

import plan_json  # dev/test/plan_json.py: run --plan-only, read the JSON

ALIGN = 256


def al(n):
    return (n + ALIGN - 1) // ALIGN * ALIGN


def cdiv(a, b):
    return (a + b - 1) // b


def tp_shares(c, t):
    """this rank's heads, kv heads and FFN hidden units on TP rank 0 (docs/memory.md 10):
    Hl = H/t, KVl = KV/t, Fl = floor(F/t) + (F mod t > 0)"""
    return c["H"] // t, c["KV"] // t, c["F"] // t + (1 if c["F"] % t else 0)


class TP:
    """the tensor-parallel layout of one plan: t ranks, sequence parallelism (sp), the
    gathered norm outputs kept (keep_g: sp, --tp-recompute-allgather 0, --recompute 0),
    vocab-parallel head (vp: --shard-vocab 1 with t > 1); TP() is one process"""
    def __init__(self, t=1, sp=0, regather=1, sv=0, recompute=0):
        self.t, self.sp, self.regather = t, sp, regather
        self.keep_g = 1 if sp and not regather and recompute == 0 else 0
        self.vp = 1 if sv and t > 1 else 0


ONE = TP()
GATHERED = ("xn1 gathered", "xn2 gathered")


def field_bytes(c, B, T, s, tp=ONE):
    """bytes of each per-layer activation field (docs/memory.md, table 1; per TP rank,
    section 10.2: rows = BT/t of the residual stream under sequence parallelism)"""
    BT, hd, D = B * T, c["D"] // c["H"], c["D"]
    Hl, KVl, Fl = tp_shares(c, tp.t)
    rows = BT // tp.t if tp.sp else BT
    fb = {
        "x": rows * D * s, "rstd1": rows * 4, "xn1": 0 if tp.keep_g else rows * D * s,
        "q": BT * Hl * hd * s, "k": BT * KVl * hd * s, "v": BT * KVl * hd * s,
        "att": BT * Hl * hd * s, "lse": BT * Hl * 4,
        "xmid": rows * D * s, "rstd2": rows * 4, "xn2": 0 if tp.keep_g else rows * D * s,
        "h1": BT * Fl * s, "h3": BT * Fl * s, "g": BT * Fl * s,
    }
    if tp.keep_g:  # --tp-recompute-allgather 0: the gathered copies replace the own rows
        fb.update({g: BT * D * s for g in GATHERED})
    return fb


def saved_fields(f, tp=ONE):
    """what one layer keeps for backward (docs/memory.md, table 2; 10.2 for the gathered
    copies, which only --recompute 0 keeps)"""
    all_f = ["x", "rstd1", "xn1", "q", "k", "v", "att", "lse", "xmid", "rstd2", "xn2", "h1", "h3", "g"]
    if f["recompute"] == 2:
        return ["x"]
    keep = list(all_f)
    if f["recompute"] == 1:
        keep = [x for x in keep if x not in ("xn1", "xn2", "g")]
    if f["ffn_chunks"] > 1:
        keep = [x for x in keep if x not in ("h1", "h3", "g")]
    return keep + (list(GATHERED) if tp.keep_g else [])


def tc2_workspace(B, T, H, KV, hd):
    """--attention tc2's backward workspace (docs/memory.md, "attention backward scratch"):
    C fp32 copies of dq for a chunk of C key tiles, one more for the running sum when T has
    more than one chunk, two more for the dK and dV partials of the GQA group's heads (G B T KV
    hd floats each) when H > KV, and delta. Key tiles of 128 up to a padded head dim of 128,
    else 64; C aims at 256 CTAs a chunk (one per q head, sample and key tile), within [4, 16]
    and at most the key tiles there are."""
    hdp = cdiv(hd, 16) * 16 if hd <= 128 else cdiv(hd, 32) * 32
    n_kt = cdiv(T, 128 if hdp <= 128 else 64)
    c = min(max(cdiv(256, B * H), 4), 16, n_kt)
    n = B * T * H * hd
    return 4 * (c * n + (n if cdiv(n_kt, c) > 1 else 0) + (2 * n if H > KV else 0) + B * H * T)


def backward_scratch(f, B, T, H, KV, hd):
    """the tensor-core backward's scratch: tc's delta rows, tc2's workspace (the larger of its
    two modes, which need the same), nothing for fp32 and cudnn"""
    a = f.get("attention")
    return 4 * B * H * T if a == "tc" else tc2_workspace(B, T, H, KV, hd) if a == "tc2" else 0


def cudnn_workspace(f, B, T, H, hd):
    """cuDNN's attention workspace, the documented bound (docs/memory.md, "cuDNN attention
    workspace"): fp32 dQ accumulator and row sums, 16 MiB for the engines' own scratch, and with
    --cudnn-deterministic 1 (the default) dP in bf16 over 128-padded sequence axes."""
    if f.get("attention") != "cudnn":
        return 0
    tp = cdiv(T, 128) * 128
    det = f.get("cudnn_deterministic", 1)
    return 4 * B * H * T * (hd + 1) + (16 << 20) + (2 * B * H * tp * tp if det else 0)


def ffn_chunk_width(F, K):
    """--ffn-chunk-dim hidden: ceil(F/K), rounded up to a multiple of 64 when at least 64
    (the chunk GEMMs keep cuBLASLt's fast kernels; train_args.h ffn_chunk_width)"""
    w = cdiv(F, K)
    return min(F, cdiv(w, 64) * 64) if w >= 64 else w


def expected_plan(c, B, T, f, s, tp=ONE):
    """(block, device entries, host entries, names of the kept fields) of every entry that
    is not parameter, gradient or optimizer state: sections 2 to 4, per TP rank 10.2-10.3"""
    fb = field_bytes(c, B, T, s, tp)
    keep = saved_fields(f, tp)
    block = sum(al(fb[x]) for x in keep)
    work_fields = [x for x in fb if x not in keep and not (f["ffn_chunks"] > 1 and x in ("h1", "h3", "g"))]
    work = sum(al(fb[x]) for x in work_fields)
    L, BT, D, V, K = c["L"], B * T, c["D"], c["V"], f["ce_chunks"]
    hd = D // c["H"]
    Hl, KVl, Fl = tp_shares(c, tp.t)
    rows = BT // tp.t if tp.sp else BT
    N = L - 1 if f["offload"] == -1 else f["offload"]
    if f["ffn_chunks"] > 1 and f["ffn_seq"]:
        chunk = cdiv(BT, f["ffn_chunks"]) * Fl * s
    else:
        chunk = BT * ffn_chunk_width(Fl, f["ffn_chunks"]) * s
    chunked = f["ffn_chunks"] > 1
    # the head: each rank's own rows against the whole vocabulary, or vocab-parallel all
    # BT rows (gathered under SP) against its Vs columns
    hrows, vc = (BT, cdiv(V, tp.t)) if tp.vp else (rows, V)
    recycled = BT * D * s if tp.sp else 0
    return block, {
        "saved activations (layers)": (L - N) * block,
        "saved activations (x_final)": rows * D * s,
        "offload slots": min(N, 2) * block,
        "layer work (not saved)": work,
        "ffn chunk h1": chunk if chunked else 0,
        "ffn chunk h3": chunk if chunked else 0,
        "ffn chunk g": chunk if chunked else 0,
        "ffn d(g), d(h1)": chunk,
        "ffn d(h3)": chunk,
        "d residual": rows * D * s,
        "d normed input": 0 if tp.sp else BT * D * s,
        "final norm output": rows * D * s,
        "d final norm output": rows * D * s if tp.sp else BT * D * s,
        "dq": BT * Hl * hd * s, "d attention output": BT * Hl * hd * s,
        "dk": BT * KVl * hd * s, "dv": BT * KVl * hd * s,
        "rstd (recompute)": 4 * rows, "final norm rstd": 4 * rows,
        "attention backward scratch (tc, tc2)": backward_scratch(f, B, T, Hl, KVl, hd),
        "attention workspace (cudnn)": cudnn_workspace(f, B, T, Hl, hd),
        "logits (one CE chunk)": cdiv(hrows, K) * vc * s,
        "CE row max, sums (vocab-parallel)": 12 * cdiv(hrows, K) if tp.vp else 0,
        "per-token losses": 4 * hrows,
        "inputs + targets": 8 * BT,
        "rope cos + sin": 4 * max(T, 8) * hd,
        "grad norm, loss sum": 8,
        "tp gathered input": recycled, "tp gathered gradient": recycled, "tp reduce-scatter staging": recycled,
    }, {"offloaded activations": N * block, "comm staging (--comm mpi)": 0}, [x for x in keep if fb[x]]


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
ZEROS = (0, 1, 2, 3, "3k")  # 3k: --zero 3 --zero-reshard 0 (the layers' parameters kept from forward to backward)


def zero_args(z):
    """(stage, keep, flags) of a ZEROS entry"""
    keep = z == "3k"
    stage = 3 if keep else z
    return stage, keep, ["--zero", str(stage)] + (["--zero-reshard", "0"] if keep else [])
STAGE_ENTRIES = ["parameters (outside the layers)", "parameter shard (layers)", "layer parameters (even layers)",
                 "layer parameters (odd layers)", "layer parameters (kept for backward)", "gradients (outside the layers)", "gradient shard (layers)",
                 "layer gradients (even layers)", "layer gradients (odd layers)"]
PARAM_ENTRIES = ["parameters", "gradients", "gradient accumulator (fp32)", "master weights (fp32)", "adam m", "adam v",
                 "vocab gather (weights)", "vocab gradient (unsharded)"] + STAGE_ENTRIES
OPT_ENTRIES = ["master weights (fp32)", "adam m", "adam v"]


def stage_want(layer_buckets, dp, n_local, n_opt, zero, sx, master, gacc, keep=0):
    """the entries of section 7.1: what each stage keeps of the parameters and gradients
    (keep: --zero 3 --zero-reshard 0, every layer's parameters in one buffer instead of two)"""
    keep = 1 if keep and zero >= 3 else 0
    layers = sum(layer_buckets)
    opt_layers = layers // dp if zero else layers
    unit = max(layer_buckets) if layer_buckets else 0
    two = 1 if len(layer_buckets) > 1 else 0
    whole_p = n_local - layers if zero >= 3 else n_local
    whole_g = n_local - layers if zero >= 2 else n_local
    want = {
        ("parameters (outside the layers)" if zero >= 3 else "parameters"): whole_p * sx,
        "parameter shard (layers)": opt_layers * sx if zero >= 3 else 0,
        "layer parameters (even layers)": unit * sx if zero >= 3 and not keep else 0,
        "layer parameters (odd layers)": unit * sx * two if zero >= 3 and not keep else 0,
        "layer parameters (kept for backward)": layers * sx if keep else 0,
        ("gradients (outside the layers)" if zero >= 2 else "gradients"): whole_g * sx,
        "gradient shard (layers)": opt_layers * sx if zero >= 2 else 0,
        "layer gradients (even layers)": unit * sx if zero >= 2 else 0,
        "layer gradients (odd layers)": unit * sx * two if zero >= 2 else 0,
        "gradient accumulator (fp32)": (whole_g + (opt_layers if zero >= 2 else 0)) * 4 if gacc else 0,
        "master weights (fp32)": n_opt * 4 if master else 0, "adam m": n_opt * 4, "adam v": n_opt * 4,
    }
    return want


def dp_formula(c, dp, zero, sv, sx, master, gacc, keep=0):
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
    want = stage_want([pad(Lb)] * L, dp, n_local, n_opt, zero, sx, master, gacc, keep)
    want.update({"vocab gather (weights)": gather, "vocab gradient (unsharded)": gather})
    return n_local, n_opt, want


def check_offload(on, off, c, dp, zero, sv, gacc):
    """--offload-optim 1 against the same plan without it (docs/memory.md, section 7): the
    master weights, AdamW m and v leave the device for the host, where the staging of the
    owned gradients and parameters (n_opt floatX each) joins them; nothing else moves"""
    errs = []
    s, master = off["sizeof_floatX"], off["master"]
    if on.get("offload_optim") != 1 or off.get("offload_optim") != 0:
        errs.append(f"offload_optim: plan {on.get('offload_optim')} asked 1 (flag-off plan: {off.get('offload_optim')})")
    stage, keep, _ = zero_args(zero)
    n_local, n_opt, want = dp_formula(c, dp, stage, sv, s, master, gacc, keep)
    moved = {k: want[k] for k in OPT_ENTRIES}
    host_want = dict(moved, **{"optimizer staging (grads)": n_opt * s, "optimizer staging (params)": n_opt * s})
    if sum(host_want.values()) != n_opt * (4 * (2 + master) + 2 * s):
        errs.append(f"host bytes {sum(host_want.values())} != n_opt * (4 * (2 + master) + 2 * floatX)")
    dev_on = [(e["name"], e["bytes"]) for e in on["device"]["entries"] if e["bytes"]]
    dev_off = [(e["name"], e["bytes"]) for e in off["device"]["entries"] if e["bytes"] and e["name"] not in OPT_ENTRIES]
    if dev_on != dev_off:
        errs.append(f"device entries: {sorted(set(dev_on) ^ set(dev_off))[:3]} differ from the flag-off plan's less the optimizer")
    host_on = {e["name"]: e["bytes"] for e in on["host"]["entries"] if e["bytes"]}
    host_off = {e["name"]: e["bytes"] for e in off["host"]["entries"] if e["bytes"]}
    if host_on != dict(host_off, **{k: v for k, v in host_want.items() if v}):
        errs.append(f"host entries {host_on}, want the flag-off plan's {host_off} and {host_want}")
    saved = off["device"]["total"] - on["device"]["total"]
    if saved != sum(al(v) for v in moved.values()):
        errs.append(f"device total drops by {saved}, the formula {sum(al(v) for v in moved.values())}")
    added = on["host"]["total"] - off["host"]["total"]
    if added != sum(al(v) for v in host_want.values()):
        errs.append(f"host total grows by {added}, the formula {sum(al(v) for v in host_want.values())}")
    if "--offload-optim 1:" not in on.get("stdout", ""):
        errs.append("the printed plan has no --offload-optim line")
    return errs


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
           "--offload-act", str(f["offload"]), "--recompute", str(f["recompute"]),
           "--attention", f.get("attention", "fp32")]
    if "cudnn_deterministic" in f:
        cmd += ["--cudnn-deterministic", str(f["cudnn_deterministic"])]
    if "tied" in c:
        cmd += ["--tied", str(c["tied"])]
    cmd += list(dp_flags)
    return plan_json.run_plan(cmd, path, keep_stdout=True)


def run_all(binary, jobs, tmp):
    """runs every (c, f, dp_flags) of jobs, a few processes at a time; returns [(plan, err)]"""
    def one(i):
        c, f, dpf = jobs[i]
        return run_plan(binary, c, f, os.path.join(tmp, f"plan{i}.json"), dpf)
    return plan_json.run_all(one, len(jobs), max(2, min(8, os.cpu_count() or 2)))


def kept_names(plan):
    """the fields the plan says a layer keeps: its line 'saved activations per layer: ...: x rstd1 ...'"""
    for line in plan.get("stdout", "").splitlines():
        if line.startswith("saved activations per layer:"):
            return line.split("):", 1)[1].split() if "):" in line else []
    return None


def check_activations(plan, c, f, tp=ONE):
    """every entry but the parameters, gradients and optimizer state, and the kept fields"""
    s = plan["sizeof_floatX"]
    block, dev_want, host_want, keep = expected_plan(c, c["B"], c["T"], f, s, tp)
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    got_host = {e["name"]: e["bytes"] for e in plan["host"]["entries"]}
    errs = [f"{k}: plan {got.get(k)} formula {v}" for k, v in dev_want.items() if got.get(k) != v]
    errs += [f"host {k}: plan {got_host.get(k)} formula {v}" for k, v in host_want.items() if got_host.get(k) != v]
    unknown = [k for k in got if k not in dev_want and k not in PARAM_ENTRIES]
    unknown += ["host " + k for k in got_host if k not in host_want]
    if unknown:
        errs.append(f"entries no formula of docs/memory.md names: {unknown}")
    kinds = {e["name"]: e["kind"] for e in plan["device"]["entries"]}
    for k in ("tp gathered input", "tp gathered gradient", "tp reduce-scatter staging"):
        if kinds.get(k) != "comm":
            errs.append(f"{k}: kind {kinds.get(k)}, want comm (a recycled communication buffer)")
    if plan["act_block_bytes"] != block:
        errs.append(f"per-layer block: plan {plan['act_block_bytes']} formula {block}")
    # the names: equal sizes could hide one field kept in place of another (xn1 for xn1 gathered)
    names = kept_names(plan)
    want_names = " ".join(keep).split()
    if names != want_names:
        errs.append(f"kept fields: plan {' '.join(names) if names is not None else '(no line)'}, "
                    f"table 2 / 10.2 {' '.join(want_names)}")
    for space in ("device", "host"):
        want = sum(al(e["bytes"]) for e in plan[space]["entries"])
        if plan[space]["total"] != want:
            errs.append(f"{space} total {plan[space]['total']} != sum of aligned entries {want}")
    return errs


def check_dp(plan, base, c, dp, z, sv, gacc):
    """one data-parallel plan against the formulas; base is the dp=1 plan of the shape"""
    errs = []
    zero, keep, _ = zero_args(z)
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
    n_local, n_opt, want = dp_formula(c, dp, zero, sv, s, master, gacc, keep)
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
    errs += check_comm(plan, comm_formula(c, c["B"], c["T"], 1, ONE, None, dp, zero, sv, s, keep))
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


# --- communication bytes per step (docs/memory.md 10.4) ----------------------------------

GROUPS, KINDS = ("world", "tp", "dp", "ulysses", "ring", "pp", "pp-ends"), ("all-reduce", "reduce-scatter", "all-gather", "all-to-all", "send-recv")


def buckets(c, t, sv):
    """the gradient buckets of one TP rank (sections 7 and 10.1): L layer buckets and the
    head bucket; at t = 1 --shard-vocab 1 takes the vocabulary out of the head bucket"""
    V, D, L, H = c["V"], c["D"], c["L"], c["H"]
    hd = D // H
    Hl, KVl, Fl = tp_shares(c, t)
    Lb = 2 * D + D * Hl * hd + 2 * D * KVl * hd + Hl * hd * D + 3 * D * Fl
    ntens = 1 if c["tied"] else 2
    if t == 1:
        Hb = D + (0 if sv else ntens * V * D)
    else:
        Hb = D + ntens * (cdiv(V, t) * D if sv else V * D)
    return [Lb] * L + [Hb]


def comm_formula(c, B, T, k, tp, f, dp, zero, sv, s, keep=0):
    """bytes this rank sends per optimizer step, {"group kind": exact Fraction}, section
    10.4 (ring convention: (g-1)/g of a whole buffer per all-gather or reduce-scatter,
    twice that per all-reduce); k micro-steps per step"""
    out = {f"{g} {kd}": Fraction(0) for g in GROUPS for kd in KINDS}
    ring = lambda g: Fraction(g - 1, g)
    L, D, V, t = c["L"], c["D"], c["V"], tp.t
    BT = B * T
    S = BT * D * s
    ntens = 1 if c["tied"] else 2
    if t > 1:
        re2 = 1 if f["recompute"] == 2 else 0
        rg = 0 if tp.keep_g else 1
        vp = tp.vp
        if not tp.sp:
            out["tp all-reduce"] += 2 * ring(t) * k * (L * (4 + re2) + 2 * vp) * S
        else:
            out["tp all-gather"] += ring(t) * k * (L * (4 + re2 + 2 * rg) + 2 * vp) * S
            out["tp reduce-scatter"] += ring(t) * k * (L * (4 + re2) + 2 * vp) * S
            per = k if zero >= 2 else 1  # a layer's replicated gradients: summed every micro-step under --zero 2, 3
            out["tp all-reduce"] += 2 * ring(t) * (per * 2 * L * D + D + (1 - vp) * ntens * V * D) * s
        out["tp all-reduce"] += 2 * ring(t) * k * vp * 12 * BT
    bs = buckets(c, t, sv)
    for i, b in enumerate(bs):
        pb = cdiv(b, dp) * dp if zero else b
        layer = i < len(bs) - 1
        if zero:  # a layer under --zero 2, 3: reduce-scattered every micro-step; under 3 gathered twice a micro-step
            out["dp reduce-scatter"] += ring(dp) * pb * s * (k if layer and zero >= 2 else 1)
            out["dp all-gather"] += ring(dp) * pb * s * ((1 if keep else 2) * k if layer and zero >= 3 else 1)
        else:
            out["dp all-reduce"] += 2 * ring(dp) * pb * s
    if sv and t == 1:  # section 7's vocabulary over DP: gathered at use, its gradient scattered
        full = cdiv(V, dp) * dp * D * s
        out["dp all-gather"] += ring(dp) * full * (1 if c["tied"] else 2 * k)
        out["dp reduce-scatter"] += ring(dp) * full * ntens * k
    out["world all-reduce"] += 2 * ring(dp * t) * 4
    return out


def check_comm(plan, want):
    """the plan prints each count rounded to a whole byte (%.0f of a double)"""
    got = plan.get("comm_bytes_per_step")
    if not isinstance(got, dict):
        return [f"comm_bytes_per_step: missing ({got!r})"]
    errs = []
    if set(got) != set(want):
        errs.append(f"comm_bytes_per_step keys {sorted(got)}, want {sorted(want)}")
    for key, v in want.items():
        if key in got and abs(got[key] - v) > Fraction(1, 2) + v / 10**9:
            errs.append(f"comm {key}: plan {got[key]} B, formula {float(v):.2f} B")
    return errs


# --- tensor parallelism (docs/memory.md section 10) ---------------------------------------

# Shapes for the tp sweep. tp runs over {2, 3, 4, 8} where it divides H and KV; the F are
# chosen not divisible (F = 251 prime; 300 mod 8 = 4; 200 mod 3 = 2), so TP rank 0 holds
# one more hidden unit; V odd (1001, 997, 513, 5003) or even; tied and untied; B*T
# divisible by every tp of the shape except the last shape, whose tp 3 runs allreduce only
# (sequence parallelism must refuse it). "exact": tp divides F, H and KV and every field of
# the layer is a multiple of 256*tp bytes, so the sequence-parallel layer must be exactly
# 1/tp of the one-process layer, byte for byte, with no al() rounding in the way.
TP_MODELS = [
    dict(V=1001, D=96, L=3, H=24, KV=24, F=251, B=3, T=16, tied=1),
    dict(V=997, D=128, L=2, H=16, KV=8, F=300, B=2, T=12, tied=0),
    dict(V=513, D=72, L=4, H=6, KV=3, F=200, B=1, T=9, tied=0),
    dict(V=32000, D=288, L=6, H=8, KV=4, F=768, B=4, T=256, tied=0, exact=1),     # stories15M, H=8 KV=4
    dict(V=128256, D=2048, L=16, H=32, KV=8, F=8192, B=1, T=2048, tied=1, exact=1),  # llama3-1B
    dict(V=5003, D=384, L=2, H=12, KV=6, F=1536, B=3, T=256, tied=0, exact=1),
    dict(V=513, D=72, L=4, H=6, KV=3, F=200, B=1, T=10, tied=1),
]
TP_SIZES = [2, 3, 4, 8]
# memory flags that rotate through the tp grid: (--ffn-chunks, seq dim, --ce-chunks, --offload-act)
TP_MEM = [(1, 0, 1, 0), (3, 0, 4, 2), (3, 1, 1, -1), (2, 0, 3, 0), (4, 1, 2, 2), (1, 0, 5, -1)]
TP_DPZ = [(1, 0), (2, 1), (2, 0), (1, 1), (2, 1), (2, 2), (2, 3)]   # (dp, --zero)


def tp_formula(c, t, dp, zero, sv, sx, master, gacc):
    """per-rank parameter/optimizer/comm entries under tp > 1 (section 10.1): the TP rank's
    buckets, padded and sharded over its DP group under --zero 1 as in section 7; the
    vocab-parallel head needs no gathered [V, D] buffers"""
    def pad(x):
        return cdiv(x, dp) * dp if zero else x
    bs = buckets(c, t, sv)
    n_local = sum(pad(b) for b in bs)
    n_opt = n_local // dp if zero else n_local
    want = stage_want([pad(b) for b in bs[:-1]], dp, n_local, n_opt, zero, sx, master, gacc)
    want.update({"vocab gather (weights)": 0, "vocab gradient (unsharded)": 0})
    return n_local, n_opt, want


def num_params(c):
    ntens = 1 if c["tied"] else 2
    hd = c["D"] // c["H"]
    return c["V"] * c["D"] * ntens + c["L"] * (2 * c["D"] + 2 * c["D"] * c["H"] * hd + 2 * c["D"] * c["KV"] * hd
                                               + 3 * c["D"] * c["F"]) + c["D"]


def tp_jobs(bf16):
    """the tp grid: every shape x tp x mode x --shard-vocab x --recompute x
    --tp-recompute-allgather, the other flags (memory flags, dp and --zero, micro-steps,
    --fp32-grad-accum) rotating, two rotations per configuration; the two
    --tp-recompute-allgather plans of a configuration differ in nothing else. Returns
    [(key, c, f, args)], key = (shape, t, sp, sv, rec, rotation, rg).
    bf16 (the CUDA build: cuBLAS loads at each start, 0.2 s a plan) keeps every other
    (shape, tp) and adds --attention tc or tc2 (head dims 64, 128, alternately) for their
    backward scratch."""
    jobs = []
    j = 0
    pairs = [(i, t) for i, c in enumerate(TP_MODELS) for t in TP_SIZES if c["H"] % t == 0 and c["KV"] % t == 0]
    if bf16:
        pairs = pairs[::2]
    for i, t in pairs:
        c = TP_MODELS[i]
        for sp, sv, rec in itertools.product((0, 1), (0, 1), (0, 1, 2)):
            if sp and (c["B"] * c["T"]) % t:
                continue
            for rep in range(1 if bf16 else 2):
                k_ffn, sq, ce, off = TP_MEM[j % len(TP_MEM)]
                dp, zero = TP_DPZ[j % len(TP_DPZ)]
                micro, gacc = 1 + (j // 2) % 2, (j // 3) % 2
                tc = bf16 and (c["D"] // c["H"]) in (64, 128) and rec == 0
                # a CE chunk needs at least one row of the head's (BT/t under SP)
                ce = min(ce, c["B"] * c["T"] // (t if sp else 1))
                f = dict(ffn_chunks=k_ffn, ffn_seq=sq, ce_chunks=ce, offload=off, recompute=rec,
                         attention=("tc2" if j % 2 else "tc") if tc else "fp32", dp=dp, zero=zero, micro=micro,
                         gacc=gacc)
                j += 1
                for rg in (0, 1):
                    args = ("--tp", str(t), "--tp-mode", "reducescatter" if sp else "allreduce",
                            "--tp-recompute-allgather", str(rg), "--shard-vocab", str(sv), "--dp", str(dp),
                            "--zero", str(zero), "--fp32-grad-accum", str(gacc),
                            "--total-batch", str(c["B"] * c["T"] * dp * micro))
                    jobs.append(((i, t, sp, sv, rec, rep, rg), c, f, args))
    return jobs


def check_tp(plan, c, f, key):
    """one tensor-parallel plan: every device and host entry, n_local/n_opt, comm bytes"""
    i, t, sp, sv, rec, _, rg = key
    tp = TP(t, sp, rg, sv, rec)
    s = plan["sizeof_floatX"]
    master = 1 if s == 2 else 0
    errs = []
    for k, v in (("tp", t), ("tp_sp", sp), ("tp_regather", rg), ("dp", f["dp"]), ("zero", f["zero"]),
                 ("shard_vocab", sv), ("master", master)):
        if plan.get(k) != v:
            errs.append(f"{k}: plan {plan.get(k)} asked {v}")
    if plan["num_params"] != num_params(c):
        errs.append(f"num_params: plan {plan['num_params']} formula {num_params(c)} (the whole model)")
    n_local, n_opt, want = tp_formula(c, t, f["dp"], f["zero"], sv, s, master, f["gacc"])
    for k, v in (("n_local", n_local), ("n_opt", n_opt)):
        if plan.get(k) != v:
            errs.append(f"{k}: plan {plan.get(k)} formula {v}")
    got = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}
    errs += [f"{k}: plan {got.get(k)} formula {v}" for k, v in want.items() if got.get(k) != v]
    errs += check_activations(plan, c, f, tp)
    errs += check_comm(plan, comm_formula(c, c["B"], c["T"], f["micro"], tp, f, f["dp"], f["zero"], sv, s))
    return errs


def tp_pair_errs(plans, key, c, s):
    """--tp-recompute-allgather 0 against 1 (section 10.2): under SP and --recompute 0 the
    layer keeps the two gathered [BT, D] norm outputs in place of its own rows, exactly
    2*(al(BT*D*s) - al(BT*D*s/t)) bytes more (2*BT*D*s*(t-1)/t when aligned); otherwise
    (allreduce mode, or a recomputed norm output) the flag changes nothing of the plan"""
    i, t, sp, sv, rec, _ = key
    p0, p1 = plans.get(key + (0,)), plans.get(key + (1,))
    if p0 is None or p1 is None:
        return [], None
    BT, D = c["B"] * c["T"], c["D"]
    if sp and rec == 0:
        want = 2 * (al(BT * D * s) - al(BT // t * D * s))
        got = p0["act_block_bytes"] - p1["act_block_bytes"]
        errs = [] if got == want else [f"--tp-recompute-allgather 0 adds {got} bytes per layer, want {want}"]
        closed = Fraction(2 * BT * D * s * (t - 1), t)
        if (BT * D * s) % (ALIGN * t) == 0 and got != closed:
            errs.append(f"--tp-recompute-allgather 0 adds {got} bytes per layer, not 2*BT*D*s*(t-1)/t = {closed}")
        return errs, got
    strip = lambda p: ([(e["name"], e["bytes"]) for e in p["device"]["entries"]], p["act_block_bytes"],
                       p["comm_bytes_per_step"])
    return ([] if strip(p0) == strip(p1) else
            [f"--tp-recompute-allgather changes the plan where section 10 says it cannot (sp {sp}, recompute {rec})"]), 0


def one_over_tp_errs(plan, base, t):
    """TP + SP against one process, same shape and flags, where tp divides F, H, KV and
    alignment is exact: every saved activation 1/tp of the one-process one (10.2)"""
    errs = []
    if plan["act_block_bytes"] * t != base["act_block_bytes"]:
        errs.append(f"SP layer {plan['act_block_bytes']} bytes x tp {t} != one-process layer {base['act_block_bytes']}")
    dev = lambda p: {e["name"]: e["bytes"] for e in p["device"]["entries"]}
    host = lambda p: {e["name"]: e["bytes"] for e in p["host"]["entries"]}
    for name in ("saved activations (layers)", "saved activations (x_final)", "offload slots"):
        if dev(plan)[name] * t != dev(base)[name]:
            errs.append(f"{name}: SP {dev(plan)[name]} x tp {t} != one process {dev(base)[name]}")
    if host(plan)["offloaded activations"] * t != host(base)["offloaded activations"]:
        errs.append(f"offloaded activations: SP {host(plan)['offloaded activations']} x tp {t} != one process "
                    f"{host(base)['offloaded activations']}")
    return errs


def tp_refusals(binary):
    """configurations section 10 says must be refused with a clear error"""
    c = TP_MODELS[6]
    base = [binary, "--plan-only", "1", "--V", str(c["V"]), "--D", str(c["D"]), "--L", str(c["L"]),
            "--H", str(c["H"]), "--KV", str(c["KV"]), "--F", str(c["F"]), "--max-seq-len", "16"]
    cases = [("tp 4 does not divide KV = 3", base + ["--batch", "1", "--seq", "12", "--tp", "4"]),
             ("tp 3: B*T = 10 tokens do not split into 3 blocks under SP",
              base + ["--batch", "1", "--seq", "10", "--tp", "3", "--tp-mode", "reducescatter"])]
    errs = []
    for what, cmd in cases:
        rc, msg = plan_json.run_fails(cmd)
        if rc == 0:
            errs.append(f"{what}: accepted (exit 0), section 10 says it must be refused")
        else:
            print(f"ok   refused, {what}: {msg}")
    return errs


def check_tp_grid(binary, tmp, bf16):
    """returns (checks, failures, first failure)"""
    name = os.path.basename(binary)
    jobs = tp_jobs(bf16)
    # one-process plans of the "exact" shapes, same B, T and memory flags, for the 1/tp check
    base_keys = sorted({(key[0], f["ffn_chunks"], f["ffn_seq"], f["ce_chunks"], f["offload"], f["recompute"])
                        for key, c, f, _ in jobs if c.get("exact") and key[2] and key[6]})
    base_jobs = [(TP_MODELS[b[0]], dict(ffn_chunks=b[1], ffn_seq=b[2], ce_chunks=b[3], offload=b[4], recompute=b[5]), ())
                 for b in base_keys]
    results = run_all(binary, [(c, f, a) for _, c, f, a in jobs] + base_jobs, tmp)
    base = dict(zip(base_keys, results[len(jobs):]))
    plans = {}
    n = bad = 0
    first = None
    agree_entries = 0

    def fail(tag, errs):
        nonlocal bad, first
        bad += 1
        first = first or f"{tag}: {errs[0]}"
        print(f"FAIL {tag}:\n    " + "\n    ".join(errs))

    for (key, c, f, args), (plan, err) in zip(jobs, results):
        tag = f"{name} {' '.join(args[:6])} --shard-vocab {key[3]} --recompute {key[4]} {c}"
        errs = [err] if err else check_tp(plan, c, f, key)
        n += 1
        if plan is not None:
            plans[key] = plan
            if not errs:
                agree_entries += len(plan["device"]["entries"]) + len(plan["host"]["entries"]) + \
                    len(plan["comm_bytes_per_step"])
        if errs:
            fail(tag, errs)
    n_pairs = n_exact = 0
    seen = set()
    for key, c, f, args in jobs:
        k6 = key[:6]
        if k6 in seen:
            continue
        seen.add(k6)
        s = plans[key]["sizeof_floatX"] if key in plans else 4
        errs, extra = tp_pair_errs(plans, k6, c, s)
        n += 1
        n_pairs += 1
        tag = f"{name} tp {key[1]} sp {key[2]} shard-vocab {key[3]} recompute {key[4]} {c}"
        if errs:
            fail(tag + " (--tp-recompute-allgather 0 vs 1)", errs)
        elif extra:
            print(f"ok   {tag}: --tp-recompute-allgather 0 keeps {extra} bytes more per layer")
        if c.get("exact") and key[2]:
            p = plans.get(k6 + (1,))
            b, berr = base[(key[0], f["ffn_chunks"], f["ffn_seq"], f["ce_chunks"], f["offload"], f["recompute"])]
            bf = dict(ffn_chunks=f["ffn_chunks"], ffn_seq=f["ffn_seq"], ce_chunks=f["ce_chunks"], offload=f["offload"],
                      recompute=f["recompute"])
            errs = [berr] if berr else check_activations(b, c, bf) + (one_over_tp_errs(p, b, key[1]) if p else ["no SP plan"])
            n += 1
            n_exact += 1
            if errs:
                fail(tag + " (1/tp of one process)", errs)
            else:
                print(f"ok   {tag}: SP layer {p['act_block_bytes']} = one-process {b['act_block_bytes']} / {key[1]}")
    errs = tp_refusals(binary)
    n += 1
    if errs:
        fail(f"{name} refusals", errs)
    print(f"{name}: {len(jobs)} tensor-parallel plans ({agree_entries} entries and comm counts equal to the formulas), "
          f"{n_pairs} --tp-recompute-allgather pairs, {n_exact} SP layers against one process ({len(base_jobs)} "
          f"one-process plans), 2 refusals")
    return n, bad, first


def report(tag, errs, first_fail, ok_line):
    """prints one configuration's result (ok_line() when it agrees); returns 1 when it does not"""
    if errs:
        first_fail[:] = first_fail or [f"{tag}: {errs[0]}"]
        print(f"FAIL {tag}:\n    " + "\n    ".join(errs))
        return 1
    print(f"ok   {tag}: {ok_line()}")
    return 0


def check_cudnn(binary, tmp, first_fail):
    """cuDNN's attention workspace (a build made with USE_CUDNN=1; others refuse --attention cudnn,
    which is then noted, not failed): three shapes, both backward algorithms. Returns (checks, failures)."""
    name = os.path.basename(binary)
    cjobs = [(c, dict(FLAGS[3 * i], attention="cudnn", cudnn_deterministic=det), ())
             for i, c in enumerate(MODELS[:3]) for det in (0, 1)]
    cres = run_all(binary, cjobs, tmp)
    if all(err and "--attention cudnn:" in err.split(" | ")[0] for _, err in cres):
        print(f"{name}: no --attention cudnn in this build ({cres[0][1].split(' | ')[0]}): workspace not checked")
        return 0, 0
    bad = 0
    for (c, f, _), (plan, err) in zip(cjobs, cres):
        errs = [err] if err else check_activations(plan, c, f)
        ws = {e["name"]: e["bytes"] for e in plan["device"]["entries"]}.get("attention workspace (cudnn)") if plan else None
        bad += report(f"{name} --attention cudnn --cudnn-deterministic {f['cudnn_deterministic']} {c}", errs,
                      first_fail, lambda: f"workspace {ws} bytes")
    print(f"{name}: {len(cjobs)} --attention cudnn plans checked (the workspace bound)")
    return len(cjobs), bad


def main():
    # --cudnn-only: the cuDNN workspace plans alone (make test, on the bf16 build made with USE_CUDNN=1)
    cudnn_only = "--cudnn-only" in sys.argv[1:]
    binaries = [a for a in sys.argv[1:] if a != "--cudnn-only"] or ["./train_llama_cpu"]
    bad = 0
    total = 0
    first_fail = []
    with tempfile.TemporaryDirectory() as tmp:
        for binary in binaries:
            if not os.access(binary, os.X_OK):
                print(f"FAIL {binary}: not an executable")
                return 1
            name = os.path.basename(binary)
            if cudnn_only:
                n, nbad = check_cudnn(binary, tmp, first_fail)
                total += n
                bad += nbad
                continue
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
            n, nbad = check_cudnn(binary, tmp, first_fail)
            total += n
            bad += nbad
            # 2. data parallelism: every dp, --zero, --shard-vocab, with one memory-flag set per shape
            jobs, keys = [], []
            for i, c in enumerate(DP_MODELS):
                f = FLAGS[(7 * i) % len(FLAGS)]
                for dp, zero, sv in itertools.product(DPS, ZEROS, (0, 1)):
                    # every other shape with the fp32 gradient accumulator
                    jobs.append((c, f, ("--dp", str(dp), *zero_args(zero)[2], "--shard-vocab", str(sv),
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
                    for zero, sv in itertools.product(ZEROS, (0, 1)):
                        plan, err = results[(i, dp, zero, sv)]
                        errs = [err] if err else check_dp(plan, base, c, dp, zero, sv, i % 2) + check_activations(plan, c, f)
                        if plan is not None and zero in (0, 1):
                            plans[(zero, sv)] = plan
                        n += 1
                        tag = f"{name} dp {dp} zero {zero} shard-vocab {sv} {shape}"
                        bad += report(tag, errs, first_fail, lambda: f"n_local {plan['n_local']} n_opt {plan['n_opt']}")
                    perrs = check_dp_pairs(plans, c, dp, i % 2) if len(plans) == 4 else [
                        f"not checked: {4 - len(plans)} of the 4 --zero/--shard-vocab plans failed"]
                    n += 1
                    if perrs:
                        bad += 1
                        first_fail[:] = first_fail or [f"{name} dp {dp} {shape}: {perrs[0]}"]
                        print(f"FAIL {name} dp {dp} {shape} (--zero/--shard-vocab savings):\n    " + "\n    ".join(perrs))
            print(f"{name} (floatX {s} bytes): {n} data-parallel checks ({len(jobs)} plans, {len(DP_MODELS) * len(DPS)} --zero/--shard-vocab savings)")
            total += n
            # 2b. --offload-optim 1 against the same plans without it: every shape, dp 1 and one
            # padded dp, every --zero, the sharded vocabulary on every other shape
            off_jobs, off_keys = [], []
            for i, c in enumerate(DP_MODELS):
                f = FLAGS[(7 * i) % len(FLAGS)]
                for dp, zero in itertools.product((1, 3 if i % 2 else 4), ZEROS):
                    sv = i % 2
                    off_jobs.append((c, f, ("--dp", str(dp), *zero_args(zero)[2], "--shard-vocab", str(sv),
                                            "--fp32-grad-accum", str(i % 2), "--offload-optim", "1")))
                    off_keys.append((i, dp, zero, sv))
            n = 0
            for key, (plan, err) in zip(off_keys, run_all(binary, off_jobs, tmp)):
                i, dp, zero, sv = key
                base, berr = results[key]
                errs = [err or berr] if (err or berr) else check_offload(plan, base, DP_MODELS[i], dp, zero, sv, i % 2)
                n += 1
                tag = f"{name} --offload-optim 1 dp {dp} zero {zero} shard-vocab {sv} shape {i}"
                bad += report(tag, errs, first_fail, lambda: f"device -{base['device']['total'] - plan['device']['total']} "
                              f"bytes, host +{plan['host']['total'] - base['host']['total']} bytes")
            print(f"{name}: {n} --offload-optim plans against the flag-off plans")
            total += n
            # 3. tensor parallelism: every entry and the comm bytes of the tp grid
            n, b, first = check_tp_grid(binary, tmp, s == 2)
            total += n
            bad += b
            if first:
                first_fail[:] = first_fail or [first]
    print(f"memory plan vs formula: {total - bad} agree, {bad} differ")
    if first_fail:
        print(f"first difference: {first_fail[0]}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
