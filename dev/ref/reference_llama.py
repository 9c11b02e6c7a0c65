#!/usr/bin/env python3
"""Independent float64 PyTorch reference of the Llama model (docs/design.md 5.2) that
writes one LREF reference state file (docs/design.md 5.3) for test_llama --ref.

Usage (interpreter: the one `bash scripts/ensure_python_deps.sh` prints):

    python3 dev/ref/reference_llama.py --out dev/ref/x.lref \\
        --V 67 --D 24 --L 2 --H 3 --KV 3 --F 61 --max-seq-len 16 \\
        --B 2 --T 7 --n-steps 4 --tied 1 --seed 4 [--rope-theta 10000]
        [--norm-eps 1e-5] [--lr 1e-3] [--beta1 0.9] [--beta2 0.95]
        [--adam-eps 1e-8] [--weight-decay 0.1] [--grad-clip 1.0 (0 = none)]
        [--norm-perturb 0.1]
    python3 dev/ref/reference_llama.py --check dev/ref/x.lref   # re-read, verify sizes, recompute
    python3 dev/ref/reference_llama.py --selftest               # gradcheck, RoPE, attention, AdamW
    dev/test/make_refs.sh                                        # regenerate dev/ref/*.lref

Bad sizes (D % H, H % KV, odd head dim, T > max_seq_len, non-positive sizes)
print a message and exit 2.  The model is written from the math of docs/design.md 5.2,
computed in float64 on the CPU with one thread (so the bytes are reproducible):

    h = tok_embeddings[tokens]
    per layer l:  xn = rmsnorm(h) * attn_norm[l]
                  q = xn wq[l]^T, k = xn wk[l]^T, v = xn wv[l]^T   (feature = head*hd + d)
                  RoPE on q, k: pairs (x[2i], x[2i+1]) rotated by pos * theta^(-2i/hd), pos = 0..T-1
                  causal softmax(q k^T / sqrt(hd)) v; q head h reads kv head h // (H/KV)
                  h = h + att wo[l]^T
                  xn = rmsnorm(h) * ffn_norm[l];  h = h + w2[l](silu(w1[l] xn) * w3[l] xn)
    logits = (rmsnorm(h) * norm) output^T   (tok_embeddings^T when tied)
    rmsnorm(x) = x / sqrt(mean(x^2) + eps);  loss = mean cross-entropy over B*T targets

Initialisation (one torch.Generator seeded with --seed, tensors drawn in 5.2 order,
each one as a whole [L, out, in] block): tok_embeddings, output, wq, wk, wv, w1, w3
~ normal(0, 0.02); wo and w2 (the residual output projections) ~ normal(0,
0.02/sqrt(2L)); norm weights (attn_norm, ffn_norm, norm) = 1 + norm_perturb * normal(0, 1)
with norm_perturb = 0.1 by default (0 gives llama2.c's plain ones; the perturbation
makes the norm weights' part of every gradient visible and is still a valid model).
All initial parameters are then rounded to float32 and back, so the float32 params
in the file are exactly the numbers the reference starts from.  After the params the
same generator draws a (B, T+1) int array uniform in [0, V): inputs = [:, :-1],
targets = [:, 1:].  The float hyperparameters are likewise rounded to float32 (the
header stores them so) before use.  Tied: output is tok_embeddings; its gradient is
the sum of both uses and `output` is absent from the file.

Training (losses[n_steps]): on the same batch, step i computes loss_i (stored as
losses[i], so losses[0] == loss), backward, then, when grad_clip > 0,
torch.nn.utils.clip_grad_norm_(all params, grad_clip) (total L2 norm over all grads;
coef = grad_clip / (norm + 1e-6), clamped at 1), then torch.optim.AdamW step with
constant lr and two groups: weight_decay on the 2-D tensors (tok_embeddings,
output, wq wk wv wo w1 w2 w3), 0 on attn_norm, ffn_norm, norm.  Per element, with
t = step number from 1:  p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps).
The grads written are step 0's, before clipping.
"""

import argparse
import math
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in dev/ref/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import lref  # noqa: E402

torch.set_num_threads(1)
DT = torch.float64

MATRIX_NAMES = ["tok_embeddings", "wq", "wk", "wv", "wo", "w1", "w2", "w3", "output"]
NORM_NAMES = ["attn_norm", "ffn_norm", "norm"]


# ----------------------------------------------------------------------------- model

def rmsnorm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + eps) * w


def rope(x, theta):
    """x: [B, T, nh, hd]; rotate adjacent pairs (x[2i], x[2i+1]) by pos * theta^(-2i/hd)."""
    B, T, nh, hd = x.shape
    i = torch.arange(hd // 2, dtype=DT)
    inv_freq = theta ** (-(2.0 * i) / hd)                      # [hd/2]
    ang = torch.arange(T, dtype=DT)[:, None] * inv_freq[None]  # [T, hd/2]
    cos = torch.cos(ang)[None, :, None, :]
    sin = torch.sin(ang)[None, :, None, :]
    x0 = x[..., 0::2]
    x1 = x[..., 1::2]
    y0 = x0 * cos - x1 * sin
    y1 = x0 * sin + x1 * cos
    return torch.stack([y0, y1], dim=-1).reshape(B, T, nh, hd)


def attention(q, k, v):
    """q: [B, T, H, hd], k, v: [B, T, KV, hd]; causal; returns [B, T, H, hd]."""
    B, T, H, hd = q.shape
    KV = k.shape[2]
    rep = H // KV
    # q head h uses kv head h // rep  (kv head j serves q heads j*rep .. (j+1)*rep-1)
    k = k.repeat_interleave(rep, dim=2)
    v = v.repeat_interleave(rep, dim=2)
    q = q.permute(0, 2, 1, 3)  # [B, H, T, hd]
    k = k.permute(0, 2, 1, 3)
    v = v.permute(0, 2, 1, 3)
    s = torch.matmul(q, k.transpose(-1, -2)) / math.sqrt(hd)  # [B, H, T, T]
    mask = torch.ones(T, T, dtype=torch.bool).tril()
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1)
    o = torch.matmul(p, v)  # [B, H, T, hd]
    return o.permute(0, 2, 1, 3)


def forward(P, tokens, c):
    """P: dict of float64 tensors (5.2 shapes); tokens: int64 [B, T]. Returns logits [B, T, V]."""
    B, T = tokens.shape
    D, L, H, KV = c["D"], c["L"], c["H"], c["KV"]
    hd = D // H
    eps, theta = c["norm_eps"], c["rope_theta"]
    h = P["tok_embeddings"][tokens]  # [B, T, D]
    for l in range(L):
        xn = rmsnorm(h, P["attn_norm"][l], eps)
        q = (xn @ P["wq"][l].t()).reshape(B, T, H, hd)
        k = (xn @ P["wk"][l].t()).reshape(B, T, KV, hd)
        v = (xn @ P["wv"][l].t()).reshape(B, T, KV, hd)
        q = rope(q, theta)
        k = rope(k, theta)
        att = attention(q, k, v).reshape(B, T, H * hd)
        h = h + att @ P["wo"][l].t()
        xn = rmsnorm(h, P["ffn_norm"][l], eps)
        a = xn @ P["w1"][l].t()
        b = xn @ P["w3"][l].t()
        h = h + (F.silu(a) * b) @ P["w2"][l].t()
    h = rmsnorm(h, P["norm"], eps)
    W_out = P["tok_embeddings"] if c["tied"] else P["output"]
    return h @ W_out.t()


def loss_fn(logits, targets):
    V = logits.shape[-1]
    lse = torch.logsumexp(logits.reshape(-1, V), dim=-1)
    picked = logits.reshape(-1, V).gather(1, targets.reshape(-1, 1)).squeeze(1)
    return (lse - picked).mean()


# ------------------------------------------------------------------------ setup

def f32(x):
    """Round a Python float to the nearest float32 value (as a Python float)."""
    return float(np.float32(x))


def make_cfg(a):
    c = {"V": a.V, "D": a.D, "L": a.L, "H": a.H, "KV": a.KV, "F": a.F,
         "max_seq_len": a.max_seq_len, "B": a.B, "T": a.T, "n_steps": a.n_steps,
         "tied": a.tied}
    for k in lref.FLOAT_FIELDS:
        c[k] = f32(getattr(a, k))
    return c


def init_params(c, seed, norm_perturb=0.1):
    g = torch.Generator().manual_seed(seed)
    small = 0.02 / math.sqrt(2 * c["L"])
    P = {}
    for name, shp in lref.param_shapes(c).items():
        z = torch.randn(shp, generator=g, dtype=DT)
        if name in NORM_NAMES:
            t = 1.0 + norm_perturb * z
        elif name in ("wo", "w2"):
            t = small * z
        else:
            t = 0.02 * z
        P[name] = t.to(torch.float32).to(DT)  # exactly representable in float32
    tok = torch.randint(0, c["V"], (c["B"], c["T"] + 1), generator=g, dtype=torch.int64)
    return P, tok[:, :-1].contiguous(), tok[:, 1:].contiguous()


def leaves(P):
    return {k: v.detach().clone().requires_grad_(True) for k, v in P.items()}


def run_reference(c, P0, inputs, targets, verbose=False):
    """Forward/backward at P0, then n_steps of clipped AdamW. Returns float64 results."""
    P = leaves(P0)
    logits = forward(P, inputs, c)
    loss = loss_fn(logits, targets)
    loss.backward()
    res = {"logits": logits.detach().clone(), "loss": loss.item(),
           "grads": {k: v.grad.detach().clone() for k, v in P.items()}}

    P = leaves(P0)
    decay = [P[k] for k in P if k in MATRIX_NAMES]
    no_decay = [P[k] for k in P if k in NORM_NAMES]
    assert len(decay) + len(no_decay) == len(P)
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": c["weight_decay"]},
         {"params": no_decay, "weight_decay": 0.0}],
        lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["adam_eps"])
    plist = list(P.values())
    losses = []
    for step in range(c["n_steps"]):
        opt.zero_grad(set_to_none=True)
        l = loss_fn(forward(P, inputs, c), targets)
        l.backward()
        losses.append(l.item())
        if c["grad_clip"] > 0:
            norm = torch.nn.utils.clip_grad_norm_(plist, c["grad_clip"]).item()
        else:
            norm = torch.sqrt(sum((p.grad * p.grad).sum() for p in plist)).item()
        if verbose:
            coef = min(1.0, c["grad_clip"] / (norm + 1e-6)) if c["grad_clip"] > 0 else 1.0
            print("  step %d: loss %.9f  grad norm %.6f  clip coef %.6f" % (step, losses[-1], norm, coef),
                  file=sys.stderr)
        opt.step()
    res["losses"] = losses
    return res


def write_lref(path, c, P0, inputs, targets, res):
    shapes = lref.param_shapes(c)
    def flat(d):
        return np.concatenate([d[k].detach().numpy().astype("<f4").reshape(-1) for k in shapes])
    parts = [
        lref.make_header(c),
        flat(P0),
        inputs.numpy().astype("<i4").reshape(-1),
        targets.numpy().astype("<i4").reshape(-1),
        res["logits"].numpy().astype("<f4").reshape(-1),
        np.array([res["loss"]], dtype="<f4"),
        flat(res["grads"]),
        np.array(res["losses"], dtype="<f4"),
    ]
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        for p in parts:
            fh.write(p.tobytes())
    os.replace(tmp, path)


# ------------------------------------------------------------------------ check

def check_file(path):
    """Re-read a file, verify its sizes, and recompute everything from its params and batch."""
    try:
        r = lref.read_lref(path)
    except lref.LrefError as e:
        print("check: FAIL: %s" % e, file=sys.stderr)
        return 1
    c = r["cfg"]
    print("check: %s: %s" % (path, lref.describe(r)))
    P0 = {k: torch.from_numpy(v.astype(np.float64)) for k, v in r["params"].items()}
    inputs = torch.from_numpy(r["inputs"].astype(np.int64))
    targets = torch.from_numpy(r["targets"].astype(np.int64))
    res = run_reference(c, P0, inputs, targets)
    fails = 0

    def cmp(name, got32, want64):
        nonlocal fails
        want32 = np.asarray(want64, dtype=np.float64).astype(np.float32)
        got32 = np.asarray(got32, dtype=np.float32)
        err = float(np.max(np.abs(got32.astype(np.float64) - want32.astype(np.float64)))) if got32.size else 0.0
        scale = float(np.max(np.abs(want32))) if want32.size else 0.0
        ok = err <= 1e-6 * max(scale, 1e-30)
        fails += not ok
        print("  %-15s n=%-7d max|x|=%.3e  max abs diff=%.3e  %s" % (name, got32.size, scale, err,
                                                                   "ok" if ok else "FAIL"))

    cmp("logits", r["logits"], res["logits"].numpy())
    cmp("loss", np.array([r["loss"]]), np.array([res["loss"]]))
    for k in r["grads"]:
        cmp("grad " + k, r["grads"][k], res["grads"][k].numpy())
    cmp("losses", r["losses"], np.array(res["losses"]))
    if r["losses"][0] != np.float32(r["loss"]):
        print("  losses[0] != loss  FAIL")
        fails += 1
    print("check: %s" % ("OK" if fails == 0 else "%d FAILED" % fails))
    return 0 if fails == 0 else 1


# ------------------------------------------------------------------------ selftest

def selftest():
    fails = 0

    def report(name, ok, detail=""):
        nonlocal fails
        fails += not ok
        print("selftest: %-55s %s %s" % (name, "ok" if ok else "FAIL", detail))

    g = torch.Generator().manual_seed(123)

    # 1. T == 1: each head's attention output is its kv head's v.
    for H, KV in ((4, 4), (4, 2), (6, 1)):
        q = torch.randn(2, 1, H, 8, generator=g, dtype=DT)
        k = torch.randn(2, 1, KV, 8, generator=g, dtype=DT)
        v = torch.randn(2, 1, KV, 8, generator=g, dtype=DT)
        o = attention(q, k, v)
        want = torch.stack([v[:, :, h // (H // KV)] for h in range(H)], dim=2)
        report("T=1 attention == v (H=%d KV=%d)" % (H, KV), torch.equal(o, want))

    # 2. attention against per-position loops with explicit GQA head mapping.
    B, T, H, KV, hd = 2, 5, 6, 2, 4
    q = torch.randn(B, T, H, hd, generator=g, dtype=DT)
    k = torch.randn(B, T, KV, hd, generator=g, dtype=DT)
    v = torch.randn(B, T, KV, hd, generator=g, dtype=DT)
    o = attention(q, k, v)
    want = torch.zeros_like(o)
    for b in range(B):
        for h in range(H):
            j = h // (H // KV)
            for t in range(T):
                s = torch.tensor([float(q[b, t, h] @ k[b, u, j]) / math.sqrt(hd) for u in range(t + 1)], dtype=DT)
                p = torch.exp(s - s.max()); p = p / p.sum()
                want[b, t, h] = sum(p[u] * v[b, u, j] for u in range(t + 1))
    report("attention == naive loops (H=6 KV=2)", torch.allclose(o, want, rtol=1e-12, atol=1e-13))

    # 3. RoPE against the complex-number formulation (adjacent pairs as complex numbers).
    x = torch.randn(2, 7, 3, 8, generator=g, dtype=DT)
    theta = 10000.0
    freqs = 1.0 / (theta ** (torch.arange(0, 8, 2, dtype=DT) / 8))
    cis = torch.polar(torch.ones(7, 4, dtype=DT), torch.outer(torch.arange(7, dtype=DT), freqs))
    xc = torch.view_as_complex(x.reshape(2, 7, 3, 4, 2).contiguous())
    want = torch.view_as_real(xc * cis[None, :, None, :]).reshape(2, 7, 3, 8)
    report("RoPE == complex formulation", torch.allclose(rope(x, theta), want, rtol=1e-12, atol=1e-13))
    report("RoPE is identity at pos 0", torch.equal(rope(x, theta)[:, 0], x[:, 0]))

    # 4. gradients against finite differences (torch.autograd.gradcheck, float64).
    for tied, H, KV in ((0, 2, 1), (1, 2, 2), (0, 3, 3)):
        c = {"V": 11, "D": 4 * H, "L": 2, "H": H, "KV": KV, "F": 7, "max_seq_len": 8, "B": 2, "T": 3,
             "n_steps": 1, "tied": tied, "rope_theta": 10000.0, "norm_eps": 1e-5}
        P0, inputs, targets = init_params(c, seed=7, norm_perturb=0.1)
        names = list(P0.keys())
        # larger weights than the 0.02 init so every term is well above finite-difference noise
        tensors = tuple((P0[n] * (1.0 if n in NORM_NAMES else 20.0)).requires_grad_(True) for n in names)

        def f(*ts):
            return loss_fn(forward(dict(zip(names, ts)), inputs, c), targets)
        ok = torch.autograd.gradcheck(f, tensors, eps=1e-6, atol=1e-8, rtol=1e-6, raise_exception=False)
        report("gradcheck tied=%d H=%d KV=%d (%d params)" % (tied, H, KV, sum(t.numel() for t in tensors)), ok)

    # 5. tied gradient == sum of the embedding-use and output-use gradients.
    c = {"V": 13, "D": 8, "L": 2, "H": 2, "KV": 1, "F": 6, "max_seq_len": 4, "B": 2, "T": 4,
         "n_steps": 1, "tied": 1, "rope_theta": 10000.0, "norm_eps": 1e-5}
    P0, inputs, targets = init_params(c, seed=3)
    Pt = leaves(P0)
    loss_fn(forward(Pt, inputs, c), targets).backward()
    cu = dict(c, tied=0)
    Pu = leaves(dict(P0, output=P0["tok_embeddings"].clone()))
    loss_fn(forward(Pu, inputs, cu), targets).backward()
    report("tied grad == emb grad + output grad",
           torch.allclose(Pt["tok_embeddings"].grad, Pu["tok_embeddings"].grad + Pu["output"].grad,
                          rtol=1e-12, atol=1e-15))

    # 6. the optimizer path against the written-out AdamW + clipping formula.
    c = {"V": 13, "D": 8, "L": 2, "H": 2, "KV": 1, "F": 6, "max_seq_len": 4, "B": 2, "T": 4,
         "n_steps": 3, "tied": 0, "rope_theta": 10000.0, "norm_eps": 1e-5, "lr": 1e-2,
         "beta1": 0.9, "beta2": 0.95, "adam_eps": 1e-8, "weight_decay": 0.1, "grad_clip": 0.05}
    P0, inputs, targets = init_params(c, seed=5)
    res = run_reference(c, P0, inputs, targets)
    P = {k: v.clone() for k, v in P0.items()}
    m = {k: torch.zeros_like(v) for k, v in P.items()}
    s = {k: torch.zeros_like(v) for k, v in P.items()}
    manual = []
    clipped = False
    for t in range(1, c["n_steps"] + 1):
        Pl = leaves(P)
        l = loss_fn(forward(Pl, inputs, c), targets)
        l.backward()
        manual.append(l.item())
        gr = {k: v.grad for k, v in Pl.items()}
        norm = math.sqrt(sum(float((x * x).sum()) for x in gr.values()))
        coef = min(1.0, c["grad_clip"] / (norm + 1e-6))
        clipped |= coef < 1.0
        for k in P:
            gk = gr[k] * coef
            wd = c["weight_decay"] if k in MATRIX_NAMES else 0.0
            P[k] = P[k] * (1 - c["lr"] * wd)
            m[k] = c["beta1"] * m[k] + (1 - c["beta1"]) * gk
            s[k] = c["beta2"] * s[k] + (1 - c["beta2"]) * gk * gk
            denom = s[k].sqrt() / math.sqrt(1 - c["beta2"] ** t) + c["adam_eps"]
            P[k] = P[k] - c["lr"] / (1 - c["beta1"] ** t) * m[k] / denom
    report("AdamW+clip == hand formula (clipping active: %s)" % clipped,
           clipped and np.allclose(manual, res["losses"], rtol=1e-12, atol=0),
           "losses %s" % " ".join("%.9f" % x for x in manual))
    report("losses[0] == loss", res["losses"][0] == res["loss"])

    # 7. write + read round trip, and --check on it.
    c = {"V": 67, "D": 24, "L": 2, "H": 3, "KV": 1, "F": 61, "max_seq_len": 16, "B": 2, "T": 7,
         "n_steps": 2, "tied": 0, "rope_theta": 10000.0, "norm_eps": f32(1e-5), "lr": f32(1e-3),
         "beta1": f32(0.9), "beta2": f32(0.95), "adam_eps": f32(1e-8), "weight_decay": f32(0.1),
         "grad_clip": 1.0}
    P0, inputs, targets = init_params(c, seed=9)
    res = run_reference(c, P0, inputs, targets)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.lref")
        write_lref(path, c, P0, inputs, targets, res)
        r = lref.read_lref(path)
        ok = all(np.array_equal(r["params"][k], P0[k].numpy().astype(np.float32)) for k in P0)
        ok &= np.array_equal(r["inputs"], inputs.numpy()) and np.array_equal(r["targets"], targets.numpy())
        ok &= os.path.getsize(path) == lref.expected_bytes(c)
        report("write/read round trip", bool(ok))
        report("--check on a written file", check_file(path) == 0)
        # a truncated and a bad-magic file must be rejected
        data = open(path, "rb").read()
        bad = os.path.join(d, "bad.lref")
        rejected = 0
        for blob in (data[:-4], b"\0\0\0\0" + data[4:]):
            open(bad, "wb").write(blob)
            try:
                lref.read_lref(bad)
            except lref.LrefError:
                rejected += 1
        report("malformed files rejected", rejected == 2)

    print("selftest: %s" % ("all passed" if fails == 0 else "%d FAILED" % fails))
    return 0 if fails == 0 else 1


# ------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out")
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--selftest", action="store_true")
    for k in ("V", "D", "L", "H", "KV", "F"):
        ap.add_argument("--" + k, type=int)
    ap.add_argument("--max-seq-len", dest="max_seq_len", type=int)
    ap.add_argument("--B", type=int)
    ap.add_argument("--T", type=int)
    ap.add_argument("--n-steps", dest="n_steps", type=int)
    ap.add_argument("--tied", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rope-theta", dest="rope_theta", type=float, default=10000.0)
    ap.add_argument("--norm-eps", dest="norm_eps", type=float, default=1e-5)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--adam-eps", dest="adam_eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", dest="weight_decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", dest="grad_clip", type=float, default=1.0)
    ap.add_argument("--norm-perturb", dest="norm_perturb", type=float, default=0.1,
                    help="norm weights = 1 + norm_perturb * normal (0 = ones)")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()

    if a.selftest:
        return selftest()
    if a.check:
        return check_file(a.check)
    if not a.out:
        print("reference_llama: --out FILE (or --check FILE, --selftest) is required", file=sys.stderr)
        return 2
    missing = [k for k in ("V", "D", "L", "H", "KV", "F", "max_seq_len", "B", "T", "n_steps")
               if getattr(a, k) is None]
    if missing:
        print("reference_llama: missing size arguments: %s" % " ".join(
            "--" + k.replace("_", "-") for k in missing), file=sys.stderr)
        return 2
    c = make_cfg(a)
    errs = lref.validate_cfg(c)
    if not (math.isfinite(a.norm_perturb) and a.norm_perturb >= 0):
        errs.append("norm_perturb must be >= 0")
    if errs:
        print("reference_llama: invalid config: %s" % "; ".join(errs), file=sys.stderr)
        return 2

    P0, inputs, targets = init_params(c, a.seed, a.norm_perturb)
    res = run_reference(c, P0, inputs, targets, verbose=not a.quiet)
    write_lref(a.out, c, P0, inputs, targets, res)
    if not a.quiet:
        print("wrote %s (%d bytes, %d params): loss %.6f, losses %s" % (
            a.out, os.path.getsize(a.out), lref.num_params(c), res["loss"],
            " ".join("%.6f" % x for x in res["losses"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
