#!/usr/bin/env python3
"""Independent float64 PyTorch reference of the video DiT (docs/design.md 9.1-9.3) that
writes one DREF reference state file (docs/design.md 9.4) for test_dit --ref.

Usage (interpreter: the one `bash scripts/ensure_python_deps.sh` prints):

    python3 dev/ref/reference_dit.py --out dev/ref/x.dref \\
        --C 3 --Fr 4 --Hi 6 --Wi 8 --pt 2 --ph 2 --pw 2 \\
        --D 20 --L 2 --H 2 --FF 36 --NC 3 --B 3 --n-steps 3 --seed 1
        [--rope-theta 10000] [--lr 1e-3] [--beta1 0.9] [--beta2 0.95]
        [--adam-eps 1e-8] [--weight-decay 0.1] [--grad-clip 1.0 (0 = none)] [--quiet]
    python3 dev/ref/reference_dit.py --check dev/ref/x.dref [--tol 1e-6]
        # re-read a file (any writer), recompute v_pred, loss, grads and the step losses
        # in float64 from its params and inputs, print the max relative error of each
    dev/test/make_dit_refs.sh                       # regenerate dev/ref/dit_*.dref
    /usr/bin/python3 dev/test/test_reference_dit.py   # cross-checks of this file

Bad sizes (a patch size that does not divide its axis, D % H != 0, odd head dim,
non-positive sizes, NC < 1) print a message and exit 2.  Computed in float64 on the
CPU with one thread, so the bytes are reproducible.  The model, written from docs/design.md 9.3:

    x_t = (1 - t) x0 + t noise;  v = noise - x0
    e   = [cos(1000 t f_i), sin(1000 t f_i)], f_i = exp(-ln(10000) i / 128), i < 128
    c   = t2(silu(t1(e))) + class_emb[y]          (row NC of class_emb: the null class)
    h   = patchify(x_t) patch_w^T + patch_b       (tokens frame, row, column major)
    per block l: sh1 sc1 g1 sh2 sc2 g2 = split6(silu(c) ada_w[l]^T + ada_b[l])
        a = LN(h)(1 + sc1) + sh1                  (LN: no affine, biased variance, eps 1e-6)
        q, k, v = split3(a qkv_w^T + qkv_b)       (feature = head*hd + d)
        q = rmsnorm(q) q_norm, k = rmsnorm(k) k_norm   (over hd, eps 1e-6, shared by heads)
        q, k = rope3d(q), rope3d(k)
        h = h + g1 (softmax(q k^T / sqrt(hd)) v proj_w^T + proj_b)   (full attention)
        m = LN(h)(1 + sc2) + sh2
        h = h + g2 (gelu_tanh(m fc1_w^T + fc1_b) fc2_w^T + fc2_b)
    shf scf = split2(silu(c) fada_w^T + fada_b)
    v_pred = unpatchify((LN(h)(1 + scf) + shf) final_w^T + final_b)
    loss = mean over B*C*Fr*Hi*Wi of (v_pred - v)^2
    rope3d: head dim in parts (t, h, w) of dt = hd - 2 dh, dh = dw = 2 floor(hd/6); each
    part rotates its adjacent pairs (x[2i], x[2i+1]) by pos * theta^(-2i/d_part), pos the
    token's frame, row or column index in patches; a part of size 0 does nothing.

Parameters are random, not DiT's adaLN-Zero init (whose zero ada, fada and final
weights would leave most gradients zero): one torch.Generator seeded with --seed draws
the tensors in 9.2 order, each as one block: weights normal(0, 1/fan_in) (fan_in = the
last dim), biases 0.1 * normal, class_emb 0.5 * normal, q_norm and k_norm
1 + 0.1 * normal; so activations stay O(1).  Then, from the same generator: x0 uniform
in [-1, 1), noise normal(0, 1), t = sigmoid(normal) per sample, y uniform in [0, NC]
(when B >= 2 at least one null label NC and one real class are forced).  Everything is
rounded to float32 and back before use, as are the float hyperparameters (the header
stores them so): the file holds exactly the numbers the reference starts from.

Training (losses[n_steps]): on the same x0, noise, t, y, step i computes loss_i
(losses[0] == loss), backward, then when grad_clip > 0 scales all grads by
min(1, grad_clip / (norm + 1e-6)) with norm the L2 norm over all of them
(torch.nn.utils.clip_grad_norm_), then AdamW as torch.optim.AdamW with constant lr;
per element, t = step number from 1, wd = weight_decay on the weight matrices and
class_emb, 0 on biases, q_norm and k_norm (docs/design.md 9.2):
    p *= 1 - lr*wd;  m = b1 m + (1-b1) g;  v = b2 v + (1-b2) g^2;
    p -= lr/(1-b1^t) * m / (sqrt(v)/sqrt(1-b2^t) + eps)
The grads written are step 0's, before clipping.
"""

import argparse
import math
import os
import sys

import numpy as np
import torch

sys.dont_write_bytecode = True  # no __pycache__ in dev/ref/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import dref  # noqa: E402

torch.set_num_threads(1)
DT = torch.float64
NORM_EPS = 1e-6  # LayerNorm and QK RMSNorm, fixed by docs/design.md 9.3


# ----------------------------------------------------------------------------- model

def grid(c):
    """(Fn, Hn, Wn): the token grid in patches."""
    return c["Fr"] // c["pt"], c["Hi"] // c["ph"], c["Wi"] // c["pw"]


def patchify(x, c):
    """[B, C, Fr, Hi, Wi] -> [B, N, P]; token (ft*Hn + hy)*Wn + wx, value ((c*pt + dt)*ph + dy)*pw + dx."""
    B, C = x.shape[0], c["C"]
    pt, ph, pw = c["pt"], c["ph"], c["pw"]
    Fn, Hn, Wn = grid(c)
    x = x.reshape(B, C, Fn, pt, Hn, ph, Wn, pw)
    x = x.permute(0, 2, 4, 6, 1, 3, 5, 7)  # B, Fn, Hn, Wn, C, pt, ph, pw
    return x.reshape(B, Fn * Hn * Wn, C * pt * ph * pw)


def unpatchify(p, c):
    """[B, N, P] -> [B, C, Fr, Hi, Wi], the exact inverse of patchify."""
    B, C = p.shape[0], c["C"]
    pt, ph, pw = c["pt"], c["ph"], c["pw"]
    Fn, Hn, Wn = grid(c)
    x = p.reshape(B, Fn, Hn, Wn, C, pt, ph, pw)
    x = x.permute(0, 4, 1, 5, 2, 6, 3, 7)  # B, C, Fn, pt, Hn, ph, Wn, pw
    return x.reshape(B, C, Fn * pt, Hn * ph, Wn * pw)


def token_positions(c):
    """(frame, row, column) index in patches of each token, each int64 [N]."""
    Fn, Hn, Wn = grid(c)
    ft, hy, wx = torch.meshgrid(torch.arange(Fn), torch.arange(Hn), torch.arange(Wn), indexing="ij")
    return ft.reshape(-1), hy.reshape(-1), wx.reshape(-1)


def rope3d_parts(hd):
    """Sizes (dt, dh, dw) of the time, row and column parts of the head dim."""
    dh = 2 * (hd // 6)
    return hd - 2 * dh, dh, dh


def rotate_pairs(x, pos, theta):
    """x: [B, N, H, d]; rotate adjacent pairs (x[2i], x[2i+1]) by pos[n] * theta^(-2i/d)."""
    d = x.shape[-1]
    i = torch.arange(d // 2, dtype=DT)
    ang = pos.to(DT)[:, None] * theta ** (-(2.0 * i) / d)  # [N, d/2]
    cos = torch.cos(ang)[None, :, None, :]
    sin = torch.sin(ang)[None, :, None, :]
    x0, x1 = x[..., 0::2], x[..., 1::2]
    return torch.stack([x0 * cos - x1 * sin, x0 * sin + x1 * cos], dim=-1).reshape(x.shape)


def rope3d(x, positions, theta):
    """x: [B, N, H, hd]; positions: (frame, row, column) [N] each."""
    out, start = [], 0
    for d, pos in zip(rope3d_parts(x.shape[-1]), positions):
        if d > 0:
            out.append(rotate_pairs(x[..., start:start + d], pos, theta))
        start += d
    return torch.cat(out, dim=-1)


def timestep_embedding(t):
    """t: [B] in [0, 1] -> [B, 256]: cos then sin of 1000 t f_i, f_i = exp(-ln(10000) i/128)."""
    half = dref.TIMESTEP_DIM // 2
    freqs = torch.exp(-math.log(10000.0) * torch.arange(half, dtype=DT) / half)
    arg = (1000.0 * t)[:, None] * freqs[None]
    return torch.cat([torch.cos(arg), torch.sin(arg)], dim=-1)


def silu(x):
    return x * torch.sigmoid(x)


def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def layernorm(x):
    """Over the last dim, no affine, biased variance."""
    mu = x.mean(dim=-1, keepdim=True)
    var = ((x - mu) ** 2).mean(dim=-1, keepdim=True)
    return (x - mu) / torch.sqrt(var + NORM_EPS)


def rmsnorm(x, w):
    return x * torch.rsqrt((x * x).mean(dim=-1, keepdim=True) + NORM_EPS) * w


def linear(x, w, b):
    return x @ w.t() + b


def modulate(x, shift, scale):
    """x: [B, N, D]; shift, scale: [B, D]."""
    return x * (1.0 + scale[:, None, :]) + shift[:, None, :]


def attention(q, k, v):
    """q, k, v: [B, N, H, hd]; full (non-causal) softmax attention; returns [B, N, H, hd]."""
    hd = q.shape[-1]
    s = torch.einsum("bnhd,bmhd->bhnm", q, k) / math.sqrt(hd)
    p = torch.softmax(s, dim=-1)
    return torch.einsum("bhnm,bmhd->bnhd", p, v)


def conditioning(P, t, y):
    """c [B, D] from the timestep and the class label."""
    e = timestep_embedding(t)
    return linear(silu(linear(e, P["t1_w"], P["t1_b"])), P["t2_w"], P["t2_b"]) + P["class_emb"][y]


def block(P, l, h, sc, positions, c):
    """One single-stream DiT block; sc = silu(c) [B, D]."""
    B, N, D = h.shape
    H = c["H"]
    hd = D // H
    sh1, sc1, g1, sh2, sc2, g2 = linear(sc, P["ada_w"][l], P["ada_b"][l]).chunk(6, dim=-1)
    a = modulate(layernorm(h), sh1, sc1)
    q, k, v = linear(a, P["qkv_w"][l], P["qkv_b"][l]).chunk(3, dim=-1)
    q = rmsnorm(q.reshape(B, N, H, hd), P["q_norm"][l])
    k = rmsnorm(k.reshape(B, N, H, hd), P["k_norm"][l])
    v = v.reshape(B, N, H, hd)
    q = rope3d(q, positions, c["rope_theta"])
    k = rope3d(k, positions, c["rope_theta"])
    o = attention(q, k, v).reshape(B, N, D)
    h = h + g1[:, None, :] * linear(o, P["proj_w"][l], P["proj_b"][l])
    m = modulate(layernorm(h), sh2, sc2)
    f = linear(gelu_tanh(linear(m, P["fc1_w"][l], P["fc1_b"][l])), P["fc2_w"][l], P["fc2_b"][l])
    return h + g2[:, None, :] * f


def forward(P, x_t, t, y, c):
    """P: dict of float64 tensors (9.2 shapes); x_t [B, C, Fr, Hi, Wi]; t [B]; y int64 [B].
    Returns v_pred [B, C, Fr, Hi, Wi]."""
    sc = silu(conditioning(P, t, y))
    positions = token_positions(c)
    h = linear(patchify(x_t, c), P["patch_w"], P["patch_b"])
    for l in range(c["L"]):
        h = block(P, l, h, sc, positions, c)
    shf, scf = linear(sc, P["fada_w"], P["fada_b"]).chunk(2, dim=-1)
    out = linear(modulate(layernorm(h), shf, scf), P["final_w"], P["final_b"])
    return unpatchify(out, c)


def flow_inputs(x0, noise, t):
    """Rectified flow: x_t = (1 - t) x0 + t noise and the velocity target v = noise - x0."""
    tb = t.reshape(-1, 1, 1, 1, 1)
    return (1.0 - tb) * x0 + tb * noise, noise - x0


def loss_fn(v_pred, v):
    return ((v_pred - v) ** 2).mean()


def model_loss(P, x0, noise, t, y, c):
    """(loss, v_pred) for one batch."""
    x_t, v = flow_inputs(x0, noise, t)
    v_pred = forward(P, x_t, t, y, c)
    return loss_fn(v_pred, v), v_pred


# ------------------------------------------------------------------------ setup

def f32(x):
    """Round to float32 and back (a Python float or a float64 tensor)."""
    if isinstance(x, torch.Tensor):
        return x.to(torch.float32).to(DT)
    return float(np.float32(x))


def make_cfg(a):
    c = {k: int(getattr(a, k)) for k in dref.INT_FIELDS}
    for k in dref.FLOAT_FIELDS:
        c[k] = f32(getattr(a, k))
    return c


def init_params(c, g):
    """Random parameters with O(1) activations (module docstring), float32-exact."""
    P = {}
    for name, shp in dref.param_shapes(c).items():
        z = torch.randn(shp, generator=g, dtype=DT)
        if name in ("q_norm", "k_norm"):
            p = 1.0 + 0.1 * z
        elif name == "class_emb":
            p = 0.5 * z
        elif name.endswith("_b"):
            p = 0.1 * z
        else:
            p = z / math.sqrt(shp[-1])
        P[name] = f32(p)
    return P


def draw_inputs(c, g):
    """x0, noise, t, y for one batch, float32-exact (module docstring)."""
    B, NC = c["B"], c["NC"]
    shape = dref.clip_shape(c)
    x0 = f32(2.0 * torch.rand(shape, generator=g, dtype=DT) - 1.0)
    noise = f32(torch.randn(shape, generator=g, dtype=DT))
    t = f32(torch.sigmoid(torch.randn(B, generator=g, dtype=DT)))
    y = torch.randint(0, NC + 1, (B,), generator=g, dtype=torch.int64)
    if B >= 2:
        if not (y == NC).any():
            y[B - 1] = NC
        if (y == NC).all():
            y[0] = int(torch.randint(0, NC, (1,), generator=g))
    return x0, noise, t, y


def make_state(c, seed):
    g = torch.Generator().manual_seed(seed)
    P0 = init_params(c, g)
    return (P0,) + draw_inputs(c, g)


def leaves(P):
    return {k: v.detach().clone().requires_grad_(True) for k, v in P.items()}


def clip_coef(grads, grad_clip):
    """(coefficient, global L2 norm), as torch.nn.utils.clip_grad_norm_."""
    norm = math.sqrt(sum(float((g * g).sum()) for g in grads.values()))
    if grad_clip <= 0:
        return 1.0, norm
    return min(1.0, grad_clip / (norm + 1e-6)), norm


def adamw_update(P, grads, m, v, step, c):
    """One AdamW step in place on the float64 dicts P, m, v; step counts from 1."""
    b1, b2, lr, eps = c["beta1"], c["beta2"], c["lr"], c["adam_eps"]
    for k in P:
        g = grads[k]
        wd = c["weight_decay"] if k in dref.DECAYED else 0.0
        P[k] = P[k] * (1.0 - lr * wd)
        m[k] = b1 * m[k] + (1.0 - b1) * g
        v[k] = b2 * v[k] + (1.0 - b2) * g * g
        denom = torch.sqrt(v[k]) / math.sqrt(1.0 - b2 ** step) + eps
        P[k] = P[k] - lr / (1.0 - b1 ** step) * m[k] / denom


def loss_and_grads(P0, x0, noise, t, y, c):
    P = leaves(P0)
    loss, v_pred = model_loss(P, x0, noise, t, y, c)
    loss.backward()
    return loss.item(), v_pred.detach(), {k: p.grad.detach().clone() for k, p in P.items()}


def run_reference(c, P0, x0, noise, t, y, verbose=False):
    """Forward/backward at P0, then n_steps of clipped AdamW. Returns float64 results."""
    loss, v_pred, grads = loss_and_grads(P0, x0, noise, t, y, c)
    res = {"v_pred": v_pred, "loss": loss, "grads": grads, "losses": [], "clipped": False}
    P = {k: p.clone() for k, p in P0.items()}
    m = {k: torch.zeros_like(p) for k, p in P0.items()}
    v = {k: torch.zeros_like(p) for k, p in P0.items()}
    for step in range(1, c["n_steps"] + 1):
        l, _, g = loss_and_grads(P, x0, noise, t, y, c)
        res["losses"].append(l)
        coef, norm = clip_coef(g, c["grad_clip"])
        res["clipped"] |= coef < 1.0
        if verbose:
            print("  step %d: loss %.9f  grad norm %.6f  clip coef %.6f" % (step - 1, l, norm, coef),
                  file=sys.stderr)
        adamw_update(P, {k: gk * coef for k, gk in g.items()}, m, v, step, c)
    return res


def write_file(path, c, P0, x0, noise, t, y, res):
    np64 = lambda d: {k: x.numpy() for k, x in d.items()}  # noqa: E731
    dref.write_dref(path, c, np64(P0), x0.numpy(), noise.numpy(), t.numpy(), y.numpy(),
                    res["v_pred"].numpy(), res["loss"], np64(res["grads"]), res["losses"])


# ------------------------------------------------------------------------ check

def check_file(path, tol=1e-6):
    """Re-read a file, recompute everything in float64 from its params and inputs,
    report the max relative error (max abs diff / max abs value) of each quantity."""
    try:
        r = dref.read_dref(path)
    except (dref.DrefError, OSError) as e:
        print("check: FAIL: %s" % e, file=sys.stderr)
        return 1
    c = r["cfg"]
    print("check: %s: %s" % (path, dref.describe(r)))
    P0 = {k: torch.from_numpy(p.astype(np.float64)) for k, p in r["params"].items()}
    x0, noise, t = (torch.from_numpy(r[k].astype(np.float64)) for k in ("x0", "noise", "t"))
    y = torch.from_numpy(r["y"].astype(np.int64))
    res = run_reference(c, P0, x0, noise, t, y)
    fails = 0
    worst = 0.0

    def cmp(name, got32, want64):
        nonlocal fails, worst
        got = np.asarray(got32, dtype=np.float64).reshape(-1)
        want = np.asarray(want64, dtype=np.float64).reshape(-1)
        err = float(np.max(np.abs(got - want)))
        scale = float(np.max(np.abs(want)))
        rel = err / scale if scale > 0 else (0.0 if err == 0 else math.inf)
        worst = max(worst, rel)
        ok = rel <= tol
        fails += not ok
        print("  %-14s n=%-7d max|x|=%.3e  max abs diff=%.3e  rel=%.2e  %s"
              % (name, got.size, scale, err, rel, "ok" if ok else "FAIL"))

    cmp("v_pred", r["v_pred"], res["v_pred"].numpy())
    cmp("loss", [r["loss"]], [res["loss"]])
    for k in r["grads"]:
        cmp("grad " + k, r["grads"][k], res["grads"][k].numpy())
    cmp("losses", r["losses"], res["losses"])
    cmp("losses[0]-loss", r["losses"][:1], [r["loss"]])
    print("check: max relative error %.3e (tolerance %.1e): %s"
          % (worst, tol, "OK" if fails == 0 else "%d FAILED" % fails))
    return 0 if fails == 0 else 1


# ------------------------------------------------------------------------ main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", metavar="FILE")
    ap.add_argument("--check", metavar="FILE")
    ap.add_argument("--tol", type=float, default=1e-6,
                    help="--check: max relative error allowed per quantity (1e-6)")
    for k in ("C", "Fr", "Hi", "Wi", "pt", "ph", "pw", "D", "L", "H", "FF", "NC", "B"):
        ap.add_argument("--" + k, type=int)
    ap.add_argument("--n-steps", dest="n_steps", type=int)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--rope-theta", dest="rope_theta", type=float, default=10000.0)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--adam-eps", dest="adam_eps", type=float, default=1e-8)
    ap.add_argument("--weight-decay", dest="weight_decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", dest="grad_clip", type=float, default=1.0, help="0 = none")
    ap.add_argument("--quiet", action="store_true")
    a = ap.parse_args()

    if a.check:
        return check_file(a.check, a.tol)
    if not a.out:
        print("reference_dit: --out FILE (or --check FILE) is required", file=sys.stderr)
        return 2
    missing = [k for k in dref.INT_FIELDS if getattr(a, k) is None]
    if missing:
        print("reference_dit: missing size arguments: %s" % " ".join(
            "--" + k.replace("_", "-") for k in missing), file=sys.stderr)
        return 2
    c = make_cfg(a)
    errs = dref.validate_cfg(c)
    if errs:
        print("reference_dit: invalid config: %s" % "; ".join(errs), file=sys.stderr)
        return 2

    P0, x0, noise, t, y = make_state(c, a.seed)
    res = run_reference(c, P0, x0, noise, t, y, verbose=not a.quiet)
    write_file(a.out, c, P0, x0, noise, t, y, res)
    if not a.quiet:
        print("wrote %s (%d bytes, %d params, %d tokens): loss %.6f, losses %s, y %s, clipping %s" % (
            a.out, os.path.getsize(a.out), dref.num_params(c), dref.num_tokens(c), res["loss"],
            " ".join("%.6f" % x for x in res["losses"]), y.tolist(),
            "active" if res["clipped"] else ("inactive" if c["grad_clip"] > 0 else "off")))
    return 0


if __name__ == "__main__":
    sys.exit(main())
