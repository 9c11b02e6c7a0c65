#!/usr/bin/env python3
"""Cross-checks of dev/ref/reference_dit.py, the float64 reference of the video DiT
(docs/design.md 9), and of its file format dev/ref/dref.py (9.4).

    /usr/bin/python3 dev/test/test_reference_dit.py

The reference is what test_dit is held to, so it is checked here against things that
do not share its code:
  - gradients against central finite differences (float64) for a sample of the entries
    of every parameter tensor, and every gradient tensor non-zero;
  - the whole forward against a second implementation written with plain loops from
    the text of docs/design.md 9.1 and 9.3 (patch index formula, timestep embedding, LN,
    QK RMSNorm, rope3d pair by pair, softmax per query, final layer, unpatchify);
  - patchify/unpatchify: exact round trip, and patchify == the 9.1 index formula;
  - rope3d: the identity at position 0, norm-preserving, the complex-number
    formulation per part, parts of size 0 (hd = 4) and each axis moving only its part;
  - a constructed case with v_pred == v exactly: loss 0 and every gradient 0;
  - the training loop against torch.optim.AdamW + clip_grad_norm_ with the decay
    groups written from 9.2 ("*_w" and class_emb decayed);
  - the DREF writer/reader round trip (bit-exact, file size), deterministic bytes,
    --check on a written file and on a corrupted one, malformed files rejected,
    invalid sizes rejected on the command line with exit 2.
Prints PASS/FAIL lines; exits non-zero on any failure.  About 10 s on one core.
"""
import math
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..")
sys.dont_write_bytecode = True
sys.path.insert(0, os.path.join(ROOT, "dev", "ref"))
import dref  # noqa: E402
import reference_dit as R  # noqa: E402

DT = torch.float64
FAILS = 0


def report(ok, what):
    global FAILS
    print(("PASS " if ok else "FAIL ") + what)
    FAILS += 0 if ok else 1


def cfg(**kw):
    c = {"C": 2, "Fr": 2, "Hi": 4, "Wi": 6, "pt": 1, "ph": 2, "pw": 3, "D": 20, "L": 2, "H": 2,
         "FF": 10, "NC": 2, "B": 3, "n_steps": 3, "rope_theta": 10000.0, "lr": 1e-2,
         "beta1": 0.9, "beta2": 0.95, "adam_eps": 1e-8, "weight_decay": 0.1, "grad_clip": 0.0}
    c.update(kw)
    assert not dref.validate_cfg(c), dref.validate_cfg(c)
    return c


# ----------------------------------------------------------------- (a) gradients

def test_finite_differences():
    # hd = 10: rope3d parts (6, 2, 2); 2 x 2 x 2 tokens; B = 3 with a null label
    c = cfg()
    P0, x0, noise, t, y = R.make_state(c, seed=11)
    _, _, grads = R.loss_and_grads(P0, x0, noise, t, y, c)
    g = torch.Generator().manual_seed(5)
    eps = 1e-6
    worst, worst_name, checked = 0.0, "", 0
    for name, p in P0.items():
        flat = p.reshape(-1)
        picks = torch.randperm(flat.numel(), generator=g)[:6].tolist()
        for i in picks:
            def loss_at(delta):
                q = dict(P0)
                f = flat.clone()
                f[i] += delta
                q[name] = f.reshape(p.shape)
                return R.model_loss(q, x0, noise, t, y, c)[0].item()
            fd = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
            an = grads[name].reshape(-1)[i].item()
            err = abs(fd - an) / (1e-9 + 1e-6 * abs(an))  # <= 1: within roundoff of the FD
            if err > worst:
                worst, worst_name = err, "%s[%d] fd %.9e autograd %.9e" % (name, i, fd, an)
            checked += 1
    report(worst <= 1, "finite differences: %d entries of all %d tensors, worst |fd - autograd| / "
           "(1e-9 + 1e-6 |autograd|) = %.2f (%s)"
           % (checked, len(P0), worst, worst_name))
    zero = [k for k, gk in grads.items() if not torch.any(gk != 0)]
    report(not zero, "every gradient tensor is non-zero%s" % (": zero " + " ".join(zero) if zero else ""))
    used = sorted(set(y.tolist()))
    rows_ok = all(torch.any(grads["class_emb"][r] != 0) == (r in used) for r in range(c["NC"] + 1))
    report(rows_ok and c["NC"] in used, "class_emb gradient lives in the used rows %s (null class %d among them)"
           % (used, c["NC"]))


# ----------------------------------------------------------------- naive forward

def naive_forward(P, x0, noise, t, y, c):
    """The forward of docs/design.md 9.3 with loops, numpy float64; returns (v_pred, loss)."""
    B, C, Fr, Hi, Wi = x0.shape
    pt, ph, pw, D, H = c["pt"], c["ph"], c["pw"], c["D"], c["H"]
    Fn, Hn, Wn = Fr // pt, Hi // ph, Wi // pw
    N, Pd, hd = Fn * Hn * Wn, C * pt * ph * pw, D // H
    theta = c["rope_theta"]
    xt = np.empty_like(x0)
    for b in range(B):
        xt[b] = (1 - t[b]) * x0[b] + t[b] * noise[b]
    v = noise - x0

    def patch_index(ft, hy, wx, ch, dt, dy, dx):
        return (ft * Hn + hy) * Wn + wx, ((ch * pt + dt) * ph + dy) * pw + dx

    def pixels():
        for ft in range(Fn):
            for hy in range(Hn):
                for wx in range(Wn):
                    for ch in range(C):
                        for dt in range(pt):
                            for dy in range(ph):
                                for dx in range(pw):
                                    yield (ft, hy, wx, ch, dt, dy, dx)

    X = np.zeros((B, N, Pd))
    for b in range(B):
        for (ft, hy, wx, ch, dt, dy, dx) in pixels():
            n, j = patch_index(ft, hy, wx, ch, dt, dy, dx)
            X[b, n, j] = xt[b, ch, ft * pt + dt, hy * ph + dy, wx * pw + dx]

    silu = lambda z: z / (1 + np.exp(-z))  # noqa: E731

    def ln(z):
        mu = sum(z) / len(z)
        var = sum((zi - mu) ** 2 for zi in z) / len(z)
        return (z - mu) / math.sqrt(var + 1e-6)

    def rms(z, w):
        return z / math.sqrt(sum(zi * zi for zi in z) / len(z) + 1e-6) * w

    def rope(z, pos3):
        z = z.copy()
        dh = 2 * (hd // 6)
        off = 0
        for d, pos in zip((hd - 2 * dh, dh, dh), pos3):
            for i in range(d // 2):
                a = pos * theta ** (-2.0 * i / d)
                u, w = z[off + 2 * i], z[off + 2 * i + 1]
                z[off + 2 * i] = u * math.cos(a) - w * math.sin(a)
                z[off + 2 * i + 1] = u * math.sin(a) + w * math.cos(a)
            off += d
        return z

    pos_of = [(n // (Hn * Wn), (n // Wn) % Hn, n % Wn) for n in range(N)]
    out = np.zeros((B, N, Pd))
    for b in range(B):
        s = 1000.0 * t[b]
        e = np.array([math.cos(s * math.exp(-math.log(10000.0) * i / 128)) for i in range(128)] +
                     [math.sin(s * math.exp(-math.log(10000.0) * i / 128)) for i in range(128)])
        cond = P["t2_w"] @ silu(P["t1_w"] @ e + P["t1_b"]) + P["t2_b"] + P["class_emb"][y[b]]
        sc = silu(cond)
        h = np.array([P["patch_w"] @ X[b, n] + P["patch_b"] for n in range(N)])
        for l in range(c["L"]):
            mod = P["ada_w"][l] @ sc + P["ada_b"][l]
            sh1, sc1, g1, sh2, sc2, g2 = (mod[i * D:(i + 1) * D] for i in range(6))
            q, k, vv = np.zeros((N, H, hd)), np.zeros((N, H, hd)), np.zeros((N, H, hd))
            for n in range(N):
                a = ln(h[n]) * (1 + sc1) + sh1
                qkv = P["qkv_w"][l] @ a + P["qkv_b"][l]
                for hh in range(H):
                    q[n, hh] = rope(rms(qkv[hh * hd:(hh + 1) * hd], P["q_norm"][l]), pos_of[n])
                    k[n, hh] = rope(rms(qkv[D + hh * hd:D + (hh + 1) * hd], P["k_norm"][l]), pos_of[n])
                    vv[n, hh] = qkv[2 * D + hh * hd:2 * D + (hh + 1) * hd]
            o = np.zeros((N, D))
            for n in range(N):
                for hh in range(H):
                    sc_ = np.array([q[n, hh] @ k[m, hh] / math.sqrt(hd) for m in range(N)])
                    p = np.exp(sc_ - sc_.max())
                    p /= p.sum()
                    o[n, hh * hd:(hh + 1) * hd] = sum(p[m] * vv[m, hh] for m in range(N))
            for n in range(N):
                h[n] = h[n] + g1 * (P["proj_w"][l] @ o[n] + P["proj_b"][l])
            for n in range(N):
                m_ = ln(h[n]) * (1 + sc2) + sh2
                z = P["fc1_w"][l] @ m_ + P["fc1_b"][l]
                z = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
                h[n] = h[n] + g2 * (P["fc2_w"][l] @ z + P["fc2_b"][l])
        fm = P["fada_w"] @ sc + P["fada_b"]
        shf, scf = fm[:D], fm[D:]
        for n in range(N):
            out[b, n] = P["final_w"] @ (ln(h[n]) * (1 + scf) + shf) + P["final_b"]
    v_pred = np.zeros_like(x0)
    for b in range(B):
        for (ft, hy, wx, ch, dt, dy, dx) in pixels():
            n, j = patch_index(ft, hy, wx, ch, dt, dy, dx)
            v_pred[b, ch, ft * pt + dt, hy * ph + dy, wx * pw + dx] = out[b, n, j]
    return v_pred, float(np.mean((v_pred - v) ** 2))


def test_naive_forward():
    # two configs: pt > 1 with H != W and hd = 8 (parts 4, 2, 2); hd = 12 with pw = 3
    for c in (cfg(C=3, Fr=4, Hi=4, Wi=6, pt=2, ph=2, pw=2, D=16, H=2, FF=12, NC=3, B=2),
              cfg(C=1, Fr=3, Hi=2, Wi=6, pt=1, ph=1, pw=3, D=24, H=2, FF=8, NC=1, B=2, L=1,
                  rope_theta=500.0)):
        P0, x0, noise, t, y = R.make_state(c, seed=3)
        loss, v_pred = R.model_loss(P0, x0, noise, t, y, c)
        Pn = {k: p.numpy() for k, p in P0.items()}
        v_naive, loss_naive = naive_forward(Pn, x0.numpy(), noise.numpy(), t.numpy(), y.numpy(), c)
        err = float(np.max(np.abs(v_pred.detach().numpy() - v_naive)) / np.max(np.abs(v_naive)))
        lerr = abs(loss.item() - loss_naive) / loss_naive
        report(err < 1e-12 and lerr < 1e-12,
               "forward == plain-loop forward of docs/design.md 9.3 (pt=%d ph=%d pw=%d hd=%d, %d tokens): "
               "v_pred rel err %.1e, loss rel err %.1e"
               % (c["pt"], c["ph"], c["pw"], c["D"] // c["H"], dref.num_tokens(c), err, lerr))


# ----------------------------------------------------------------- (b) patches

def test_patchify():
    c = cfg(C=3, Fr=4, Hi=6, Wi=10, pt=2, ph=3, pw=5, B=2)
    x = torch.randn(dref.clip_shape(c), dtype=DT)
    p = R.patchify(x, c)
    report(p.shape == (2, dref.num_tokens(c), dref.patch_dim(c)) and torch.equal(R.unpatchify(p, c), x),
           "patchify -> unpatchify is the exact identity (pt=2 ph=3 pw=5)")
    q = torch.randn(p.shape, dtype=DT)
    report(torch.equal(R.patchify(R.unpatchify(q, c), c), q), "unpatchify -> patchify is the exact identity")
    Fn, Hn, Wn = R.grid(c)
    ok = True
    for b in range(2):
        for ft in range(Fn):
            for hy in range(Hn):
                for wx in range(Wn):
                    n = (ft * Hn + hy) * Wn + wx
                    for ch in range(c["C"]):
                        for dt in range(c["pt"]):
                            for dy in range(c["ph"]):
                                for dx in range(c["pw"]):
                                    j = ((ch * c["pt"] + dt) * c["ph"] + dy) * c["pw"] + dx
                                    ok &= bool(p[b, n, j] == x[b, ch, ft * c["pt"] + dt, hy * c["ph"] + dy,
                                                                 wx * c["pw"] + dx])
    report(ok, "patchify == the docs/design.md 9.1 index formula at every value")
    ft, hy, wx = R.token_positions(c)
    n = torch.arange(dref.num_tokens(c))
    report(torch.equal(ft * Hn * Wn + hy * Wn + wx, n), "token n = (ft*Hn + hy)*Wn + wx")


# ----------------------------------------------------------------- (c) rope3d

def test_rope3d():
    g = torch.Generator().manual_seed(2)
    for hd in (2, 4, 6, 8, 10, 12, 14):
        x = torch.randn(2, 5, 3, hd, generator=g, dtype=DT)
        zeros = (torch.zeros(5, dtype=torch.int64),) * 3
        pos = tuple(torch.randint(0, 9, (5,), generator=g) for _ in range(3))
        y = R.rope3d(x, pos, 10000.0)
        norm_ok = torch.allclose(y.norm(dim=-1), x.norm(dim=-1), rtol=1e-14, atol=0)
        # complex formulation, part by part
        want = []
        start = 0
        for d, p in zip(R.rope3d_parts(hd), pos):
            if d:
                freqs = 10000.0 ** (-torch.arange(0, d, 2, dtype=DT) / d)
                cis = torch.polar(torch.ones(5, d // 2, dtype=DT), p.to(DT)[:, None] * freqs[None])
                xc = torch.view_as_complex(x[..., start:start + d].reshape(2, 5, 3, d // 2, 2).contiguous())
                want.append(torch.view_as_real(xc * cis[None, :, None, :]).reshape(2, 5, 3, d))
            start += d
        want = torch.cat(want, dim=-1)
        cplx_ok = torch.allclose(y, want, rtol=1e-13, atol=1e-14)
        report(torch.equal(R.rope3d(x, zeros, 10000.0), x) and norm_ok and cplx_ok,
               "rope3d hd=%d parts %s: identity at position 0, norms kept, == complex form"
               % (hd, R.rope3d_parts(hd)))
    # each axis moves only its own part: hd = 10 -> t [0, 6), h [6, 8), w [8, 10)
    x = torch.randn(1, 4, 2, 10, generator=g, dtype=DT)
    z = torch.zeros(4, dtype=torch.int64)
    p = torch.tensor([0, 1, 2, 3])
    ok = True
    for axis, (lo, hi) in enumerate(((0, 6), (6, 8), (8, 10))):
        pos = [z, z, z]
        pos[axis] = p
        y = R.rope3d(x, tuple(pos), 10000.0)
        outside = torch.cat([y[..., :lo] - x[..., :lo], y[..., hi:] - x[..., hi:]], dim=-1)
        ok &= bool(torch.all(outside == 0)) and bool(torch.any(y[:, 1:, :, lo:hi] != x[:, 1:, :, lo:hi]))
    report(ok, "rope3d hd=10: frame, row and column positions each rotate only their part")
    report(R.rope3d_parts(10) == (6, 2, 2) and R.rope3d_parts(4) == (4, 0, 0) and R.rope3d_parts(12) == (4, 4, 4),
           "rope3d parts: hd=10 -> (6,2,2), hd=4 -> (4,0,0), hd=12 -> (4,4,4)")


# ----------------------------------------------------------------- (e) v_pred == v

def test_exact_prediction():
    """final_w = 0 makes v_pred the final bias repeated in every token; choose the clips so
    that v = noise - x0 is that same pattern in every token, with dyadic numbers so that
    every operation is exact: the loss and every gradient must be exactly 0."""
    c = cfg(C=2, Fr=4, Hi=4, Wi=6, pt=2, ph=2, pw=3, B=2)
    P0, x0, noise, t, y = R.make_state(c, seed=4)
    g = torch.Generator().manual_seed(9)
    u = torch.randint(-8, 9, (dref.patch_dim(c),), generator=g).to(DT) / 8  # the per-patch velocity
    x0 = torch.randint(-8, 9, x0.shape, generator=g).to(DT) / 8
    v_target = R.unpatchify(u.expand(c["B"], dref.num_tokens(c), -1), c)
    noise = x0 + v_target
    P = dict(P0, final_w=torch.zeros_like(P0["final_w"]), final_b=u.clone())
    loss, v_pred = R.model_loss(P, x0, noise, t, y, c)
    _, _, grads = R.loss_and_grads(P, x0, noise, t, y, c)
    nonzero = [k for k, gk in grads.items() if torch.any(gk != 0)]
    report(loss.item() == 0.0 and torch.equal(v_pred, noise - x0) and not nonzero,
           "constructed v_pred == v: loss %g, grads all zero%s" % (loss.item(), (" except " + " ".join(nonzero))
                                                                  if nonzero else ""))
    # and one changed value gives exactly its squared error over the element count
    P["final_b"] = u.clone()
    P["final_b"][0] += 0.5
    loss1, _ = R.model_loss(P, x0, noise, t, y, c)
    want = 0.25 * c["B"] * dref.num_tokens(c) / np.prod(dref.clip_shape(c))
    report(loss1.item() == want, "one patch value off by 0.5 in every token: loss %g == %g" % (loss1.item(), want))


# ----------------------------------------------------------------- optimizer

def test_adamw():
    for clip in (0.3, 0.0):
        c = cfg(n_steps=4, lr=1e-2, weight_decay=0.5, grad_clip=clip, beta1=0.8, beta2=0.99, adam_eps=1e-7)
        P0, x0, noise, t, y = R.make_state(c, seed=8)
        res = R.run_reference(c, P0, x0, noise, t, y)
        P = R.leaves(P0)
        decay = [p for k, p in P.items() if k.endswith("_w") or k == "class_emb"]
        rest = [p for k, p in P.items() if not (k.endswith("_w") or k == "class_emb")]
        opt = torch.optim.AdamW([{"params": decay, "weight_decay": c["weight_decay"]},
                                 {"params": rest, "weight_decay": 0.0}],
                                lr=c["lr"], betas=(c["beta1"], c["beta2"]), eps=c["adam_eps"])
        losses = []
        for _ in range(c["n_steps"]):
            opt.zero_grad(set_to_none=True)
            l, _ = R.model_loss(P, x0, noise, t, y, c)
            l.backward()
            losses.append(l.item())
            if clip > 0:
                torch.nn.utils.clip_grad_norm_(list(P.values()), clip)
            opt.step()
        ok = np.allclose(losses, res["losses"], rtol=1e-12, atol=0) and res["losses"][0] == res["loss"]
        report(ok and res["clipped"] == (clip > 0),
               "AdamW steps == torch.optim.AdamW%s (decay on *_w and class_emb only): losses %s"
               % (" + clip_grad_norm_ %.1f (active)" % clip if clip else ", no clipping",
                  " ".join("%.9f" % v for v in res["losses"])))


# ----------------------------------------------------------------- (d) files

def test_files():
    c = cfg(C=3, Fr=2, Hi=2, Wi=4, pt=2, ph=1, pw=2, D=16, H=4, FF=12, NC=1, B=2, n_steps=2,
            rope_theta=R.f32(500.0), lr=R.f32(3e-3), grad_clip=R.f32(0.5), adam_eps=R.f32(1e-7),
            weight_decay=R.f32(0.05), beta1=R.f32(0.8), beta2=R.f32(0.99))
    P0, x0, noise, t, y = R.make_state(c, seed=6)
    res = R.run_reference(c, P0, x0, noise, t, y)
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, "t.dref")
        R.write_file(path, c, P0, x0, noise, t, y, res)
        r = dref.read_dref(path)
        f32 = lambda a: np.asarray(a).astype(np.float32)  # noqa: E731
        ok = r["cfg"] == c
        ok &= list(r["params"]) == list(dref.param_shapes(c))
        ok &= all(np.array_equal(r["params"][k], f32(P0[k].numpy())) for k in P0)
        ok &= all(np.array_equal(r["grads"][k], f32(res["grads"][k].numpy())) for k in P0)
        for k, a in (("x0", x0), ("noise", noise), ("t", t), ("v_pred", res["v_pred"])):
            ok &= np.array_equal(r[k], f32(a.numpy()))
        ok &= np.array_equal(r["y"], y.numpy()) and r["y"].dtype == np.int32
        ok &= r["loss"] == float(np.float32(res["loss"])) and np.array_equal(r["losses"], f32(res["losses"]))
        ok &= os.path.getsize(path) == dref.expected_bytes(c)
        data = open(path, "rb").read()
        h = np.frombuffer(data[:1024], dtype="<i4")
        ok &= h[0] == 20261124 and h[1] == 1 and list(h[2:16]) == [3, 2, 2, 4, 2, 1, 2, 16, 2, 4, 12, 1, 2, 2]
        ok &= np.frombuffer(data[:1024], dtype="<f4")[32] == np.float32(500.0)
        ok &= np.frombuffer(data[:1024], dtype="<f4")[38] == np.float32(0.5)
        report(bool(ok), "DREF write/read round trip: every field bit-exact, header words, %d bytes" % len(data))

        path2 = os.path.join(d, "t2.dref")
        P0b, x0b, noiseb, tb, yb = R.make_state(c, seed=6)
        R.write_file(path2, c, P0b, x0b, noiseb, tb, yb, R.run_reference(c, P0b, x0b, noiseb, tb, yb))
        report(open(path2, "rb").read() == data, "the same arguments write the same bytes")

        report(R.check_file(path) == 0, "--check passes on a written file")
        bad = os.path.join(d, "bad.dref")
        off_grads = len(data) - 4 * (dref.num_params(c) + c["n_steps"])
        blob = bytearray(data)
        blob[off_grads + 4 * 10: off_grads + 4 * 11] = np.float32(r["grads"]["patch_w"].reshape(-1)[10] * 1.01 + 1e-3).tobytes()
        open(bad, "wb").write(bytes(blob))
        report(R.check_file(bad) == 1, "--check fails on a file with one gradient changed")

        def header_word(i, value, dtype="<i4"):
            b = bytearray(data)
            b[4 * i:4 * i + 4] = np.array([value], dtype=dtype).tobytes()
            return bytes(b)
        y_off = 4 * (256 + dref.num_params(c) + 2 * x0.numel() + c["B"])
        bad_y = bytearray(data)
        bad_y[y_off:y_off + 4] = np.array([c["NC"] + 1], dtype="<i4").tobytes()
        cases = [("truncated", data[:-4], "bytes"), ("longer", data + b"\0\0\0\0", "bytes"),
                 ("bad magic", header_word(0, 20261121), "magic"),
                 ("bad version", header_word(1, 2), "version"),
                 ("reserved word 20 set", header_word(20, 1), "zero"),
                 ("reserved word 39 set", header_word(39, 1.0, "<f4"), "zero"),
                 ("pw does not divide Wi", header_word(8, 3), "divide"),
                 ("odd head dim", header_word(11, 16), "even"),
                 ("NC = 0", header_word(13, 0), "NC"),
                 ("beta1 = 1", header_word(34, 1.0, "<f4"), "beta1"),
                 ("label > NC", bytes(bad_y), "labels"),
                 ("empty file", b"", "short")]
        for what, blob, word in cases:
            open(bad, "wb").write(blob)
            try:
                dref.read_dref(bad)
                report(False, "malformed DREF rejected: %s (accepted)" % what)
            except dref.DrefError as e:
                report(word.lower() in str(e).lower(), "malformed DREF rejected: %s: %s" % (what, e))

        # invalid sizes on the command line: exit 2 with the reason
        script = os.path.join(ROOT, "dev", "ref", "reference_dit.py")
        args = [sys.executable, script, "--out", os.path.join(d, "x.dref"), "--C", "1", "--Fr", "3", "--Hi", "4",
                "--Wi", "5", "--pt", "1", "--ph", "2", "--pw", "2", "--D", "12", "--L", "1", "--H", "5",
                "--FF", "8", "--NC", "1", "--B", "1", "--n-steps", "1"]
        p = subprocess.run(args, capture_output=True, text=True)
        report(p.returncode == 2 and "pw=2 must divide Wi=5" in p.stderr and "divisible by H" in p.stderr
               and not os.path.exists(os.path.join(d, "x.dref")),
               "reference_dit.py rejects bad sizes with exit 2: %s" % p.stderr.strip())


def main():
    torch.set_num_threads(1)
    test_patchify()
    test_rope3d()
    test_exact_prediction()
    test_naive_forward()
    test_finite_differences()
    test_adamw()
    test_files()
    print("test_reference_dit: %s" % ("all passed" if FAILS == 0 else "%d FAILED" % FAILS))
    return 1 if FAILS else 0


if __name__ == "__main__":
    sys.exit(main())
