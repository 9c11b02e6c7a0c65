"""Reader for the Llama reference state file (LREF, docs/design.md 5.3).

    from lref import read_lref, param_shapes
    ref = read_lref("dev/ref/mha_untied_small.lref")
    ref["cfg"]["V"], ref["params"]["wq"].shape, ref["grads"]["w1"], ref["losses"]

read_lref(path) returns a dict:
    cfg      dict: V D L H KV F max_seq_len B T n_steps tied (ints) and
             rope_theta norm_eps lr beta1 beta2 adam_eps weight_decay grad_clip
             (Python floats holding the exact float32 values of the header)
    params   dict name -> float32 numpy array with the 5.2 shape (order kept)
    inputs   int32 [B, T]      targets  int32 [B, T]
    logits   float32 [B, T, V] loss     float (the float32 value)
    grads    dict like params  losses   float32 [n_steps]
It raises LrefError with a clear message on a malformed file (bad magic or
version, invalid sizes, nonzero reserved words, wrong file length, token ids
out of range).  Only numpy is needed.
"""

import sys
from collections import OrderedDict

import numpy as np

LREF_MAGIC = 20261121
LREF_VERSION = 1
HEADER_INTS = 256

INT_FIELDS = ["V", "D", "L", "H", "KV", "F", "max_seq_len", "B", "T", "n_steps", "tied"]  # header[2..12]
FLOAT_FIELDS = ["rope_theta", "norm_eps", "lr", "beta1", "beta2", "adam_eps",
                "weight_decay", "grad_clip"]  # float32 view [32..39]
FLOAT_BASE = 32


class LrefError(ValueError):
    pass


def validate_cfg(c):
    """Return a list of problems with a config dict (empty when valid)."""
    errs = []
    for k in ["V", "D", "L", "H", "KV", "F", "max_seq_len", "B", "T", "n_steps"]:
        if int(c[k]) <= 0:
            errs.append("%s must be > 0 (got %d)" % (k, c[k]))
    if c["tied"] not in (0, 1):
        errs.append("tied must be 0 or 1 (got %d)" % c["tied"])
    if errs:
        return errs
    if c["D"] % c["H"] != 0:
        errs.append("D (%d) must be divisible by H (%d)" % (c["D"], c["H"]))
    elif (c["D"] // c["H"]) % 2 != 0:
        errs.append("head dim D/H = %d must be even (RoPE rotates pairs)" % (c["D"] // c["H"]))
    if c["H"] % c["KV"] != 0:
        errs.append("H (%d) must be divisible by KV (%d)" % (c["H"], c["KV"]))
    if c["T"] > c["max_seq_len"]:
        errs.append("T (%d) must be <= max_seq_len (%d)" % (c["T"], c["max_seq_len"]))
    if "rope_theta" in c:
        if not c["rope_theta"] > 0: errs.append("rope_theta must be > 0")
        if not c["norm_eps"] > 0: errs.append("norm_eps must be > 0")
        if not c["lr"] >= 0: errs.append("lr must be >= 0")
        if not 0 <= c["beta1"] < 1: errs.append("beta1 must be in [0, 1)")
        if not 0 <= c["beta2"] < 1: errs.append("beta2 must be in [0, 1)")
        if not c["adam_eps"] > 0: errs.append("adam_eps must be > 0")
        if not c["weight_decay"] >= 0: errs.append("weight_decay must be >= 0")
        if not c["grad_clip"] >= 0: errs.append("grad_clip must be >= 0 (0 = none)")
    return errs


def param_shapes(c):
    """OrderedDict name -> shape, in docs/design.md 5.2 order (output absent when tied)."""
    V, D, L, H, KV, F = c["V"], c["D"], c["L"], c["H"], c["KV"], c["F"]
    hd = D // H
    s = OrderedDict()
    s["tok_embeddings"] = (V, D)
    s["attn_norm"] = (L, D)
    s["wq"] = (L, H * hd, D)
    s["wk"] = (L, KV * hd, D)
    s["wv"] = (L, KV * hd, D)
    s["wo"] = (L, D, H * hd)
    s["ffn_norm"] = (L, D)
    s["w1"] = (L, F, D)
    s["w2"] = (L, D, F)
    s["w3"] = (L, F, D)
    s["norm"] = (D,)
    if not c["tied"]:
        s["output"] = (V, D)
    return s


def num_params(c):
    return sum(int(np.prod(s)) for s in param_shapes(c).values())


def expected_bytes(c):
    P = num_params(c)
    BT = c["B"] * c["T"]
    return 4 * (HEADER_INTS + P + BT + BT + BT * c["V"] + 1 + P + c["n_steps"])


def make_header(c):
    """int32[256] header for a config dict (floats stored as float32)."""
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0] = LREF_MAGIC
    h[1] = LREF_VERSION
    for i, k in enumerate(INT_FIELDS):
        h[2 + i] = int(c[k])
    f = h.view("<f4")
    for i, k in enumerate(FLOAT_FIELDS):
        f[FLOAT_BASE + i] = np.float32(c[k])
    return h


def _split_params(flat, shapes):
    out = OrderedDict()
    off = 0
    for name, shp in shapes.items():
        n = int(np.prod(shp))
        out[name] = flat[off:off + n].reshape(shp)
        off += n
    assert off == flat.size
    return out


def read_lref(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 * HEADER_INTS:
        raise LrefError("%s: file too short for the LREF header (%d bytes, need %d)"
                        % (path, len(data), 4 * HEADER_INTS))
    h = np.frombuffer(data, dtype="<i4", count=HEADER_INTS)
    if h[0] != LREF_MAGIC:
        raise LrefError("%s: bad magic %d (expected %d): not an LREF file" % (path, h[0], LREF_MAGIC))
    if h[1] != LREF_VERSION:
        raise LrefError("%s: unsupported LREF version %d (expected %d)" % (path, h[1], LREF_VERSION))
    if np.any(h[13:32] != 0):
        raise LrefError("%s: header words 13..31 must be zero" % path)
    if np.any(h[40:] != 0):
        raise LrefError("%s: header words 40..255 must be zero" % path)
    hf = h.view("<f4")
    c = {k: int(h[2 + i]) for i, k in enumerate(INT_FIELDS)}
    for i, k in enumerate(FLOAT_FIELDS):
        c[k] = float(hf[FLOAT_BASE + i])
    errs = validate_cfg(c)
    if errs:
        raise LrefError("%s: invalid config in header: %s" % (path, "; ".join(errs)))
    want = expected_bytes(c)
    if len(data) != want:
        raise LrefError("%s: file is %d bytes, the header implies %d" % (path, len(data), want))

    shapes = param_shapes(c)
    P = num_params(c)
    B, T, V = c["B"], c["T"], c["V"]
    off = 4 * HEADER_INTS

    def take(dtype, n):
        nonlocal off
        a = np.frombuffer(data, dtype=dtype, count=n, offset=off).copy()
        off += 4 * n
        return a

    params = _split_params(take("<f4", P), shapes)
    inputs = take("<i4", B * T).reshape(B, T)
    targets = take("<i4", B * T).reshape(B, T)
    logits = take("<f4", B * T * V).reshape(B, T, V)
    loss = float(take("<f4", 1)[0])
    grads = _split_params(take("<f4", P), shapes)
    losses = take("<f4", c["n_steps"])
    assert off == len(data)
    for name, a in (("inputs", inputs), ("targets", targets)):
        if a.min() < 0 or a.max() >= V:
            raise LrefError("%s: %s contain token ids outside [0, %d)" % (path, name, V))
    return {"cfg": c, "params": params, "inputs": inputs, "targets": targets,
            "logits": logits, "loss": loss, "grads": grads, "losses": losses}


def describe(ref):
    c = ref["cfg"]
    return ("V=%(V)d D=%(D)d L=%(L)d H=%(H)d KV=%(KV)d F=%(F)d max_seq_len=%(max_seq_len)d "
            "B=%(B)d T=%(T)d n_steps=%(n_steps)d tied=%(tied)d rope_theta=%(rope_theta)g "
            "norm_eps=%(norm_eps)g lr=%(lr)g beta1=%(beta1)g beta2=%(beta2)g "
            "adam_eps=%(adam_eps)g weight_decay=%(weight_decay)g grad_clip=%(grad_clip)g" % c)


if __name__ == "__main__":
    rc = 0
    for p in sys.argv[1:]:
        try:
            r = read_lref(p)
            print("%s: %s params=%d loss=%.6f losses=%s" % (
                p, describe(r), num_params(r["cfg"]), r["loss"],
                " ".join("%.6f" % x for x in r["losses"])))
        except LrefError as e:
            print("error: %s" % e, file=sys.stderr)
            rc = 1
    sys.exit(rc)
