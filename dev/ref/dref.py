"""Reader and writer of the video DiT reference state file (DREF, docs/design.md 9.4).

    from dref import read_dref, param_shapes
    ref = read_dref("dev/ref/dit_pt2_hw.dref")
    ref["cfg"]["D"], ref["params"]["qkv_w"].shape, ref["grads"]["fc1_w"], ref["losses"]

read_dref(path) returns a dict:
    cfg      dict: C Fr Hi Wi pt ph pw D L H FF NC B n_steps (ints) and
             rope_theta lr beta1 beta2 adam_eps weight_decay grad_clip
             (Python floats holding the exact float32 values of the header)
    params   dict name -> float32 numpy array with the 9.2 shape (order kept)
    x0       float32 [B, C, Fr, Hi, Wi]    noise  float32 [B, C, Fr, Hi, Wi]
    t        float32 [B]                   y      int32 [B] (NC = the null class)
    v_pred   float32 [B, C, Fr, Hi, Wi]    loss   float (the float32 value)
    grads    dict like params              losses float32 [n_steps]
It raises DrefError with a clear message on a malformed file: bad magic or version,
nonzero reserved header words, an invalid config (sizes, patch sizes that do not
divide their axis, D % H, odd head dim, hyperparameters), a file length that
disagrees with the header, labels outside [0, NC], non-finite numbers.
write_dref(path, cfg, ...) writes one (atomically, through a .tmp file).
Only numpy is needed.  `python3 dev/ref/dref.py FILE...` prints a summary of each.
"""

import os
import sys
from collections import OrderedDict

import numpy as np

DREF_MAGIC = 20261124
DREF_VERSION = 1
HEADER_INTS = 256

INT_FIELDS = ["C", "Fr", "Hi", "Wi", "pt", "ph", "pw", "D", "L", "H", "FF", "NC",
              "B", "n_steps"]  # header[2..15]
FLOAT_FIELDS = ["rope_theta", "lr", "beta1", "beta2", "adam_eps", "weight_decay",
                "grad_clip"]  # float32 view [32..38]
INT_BASE = 2
FLOAT_BASE = 32

# AdamW's weight decay applies to these (docs/design.md 9.2); every other tensor (biases,
# q_norm, k_norm) is not decayed.
DECAYED = ["patch_w", "t1_w", "t2_w", "class_emb", "ada_w", "qkv_w", "proj_w",
           "fc1_w", "fc2_w", "fada_w", "final_w"]

TIMESTEP_DIM = 256  # the sinusoidal embedding width, fixed by docs/design.md 9.3


class DrefError(ValueError):
    pass


def validate_cfg(c):
    """Return a list of problems with a config dict (empty when valid)."""
    errs = []
    for k in INT_FIELDS:
        if int(c[k]) <= 0:
            errs.append("%s must be > 0 (got %d)" % (k, c[k]))
    if errs:
        return errs
    for axis, patch in (("Fr", "pt"), ("Hi", "ph"), ("Wi", "pw")):
        if c[axis] % c[patch] != 0:
            errs.append("patch size %s=%d must divide %s=%d" % (patch, c[patch], axis, c[axis]))
    if c["D"] % c["H"] != 0:
        errs.append("D (%d) must be divisible by H (%d)" % (c["D"], c["H"]))
    elif (c["D"] // c["H"]) % 2 != 0:
        errs.append("head dim D/H = %d must be even (rope3d rotates pairs)" % (c["D"] // c["H"]))
    if "rope_theta" in c:
        if not c["rope_theta"] > 0: errs.append("rope_theta must be > 0")
        if not c["lr"] >= 0: errs.append("lr must be >= 0")
        if not 0 <= c["beta1"] < 1: errs.append("beta1 must be in [0, 1)")
        if not 0 <= c["beta2"] < 1: errs.append("beta2 must be in [0, 1)")
        if not c["adam_eps"] > 0: errs.append("adam_eps must be > 0")
        if not c["weight_decay"] >= 0: errs.append("weight_decay must be >= 0")
        if not c["grad_clip"] >= 0: errs.append("grad_clip must be >= 0 (0 = none)")
    return errs


def patch_dim(c):
    return c["C"] * c["pt"] * c["ph"] * c["pw"]


def num_tokens(c):
    return (c["Fr"] // c["pt"]) * (c["Hi"] // c["ph"]) * (c["Wi"] // c["pw"])


def clip_shape(c):
    return (c["B"], c["C"], c["Fr"], c["Hi"], c["Wi"])


def param_shapes(c):
    """OrderedDict name -> shape, in docs/design.md 9.2 order."""
    D, L, FF, NC = c["D"], c["L"], c["FF"], c["NC"]
    P = patch_dim(c)
    hd = D // c["H"]
    s = OrderedDict()
    s["patch_w"] = (D, P);              s["patch_b"] = (D,)
    s["t1_w"] = (D, TIMESTEP_DIM);      s["t1_b"] = (D,)
    s["t2_w"] = (D, D);                 s["t2_b"] = (D,)
    s["class_emb"] = (NC + 1, D)
    s["ada_w"] = (L, 6 * D, D);         s["ada_b"] = (L, 6 * D)
    s["qkv_w"] = (L, 3 * D, D);         s["qkv_b"] = (L, 3 * D)
    s["q_norm"] = (L, hd);              s["k_norm"] = (L, hd)
    s["proj_w"] = (L, D, D);            s["proj_b"] = (L, D)
    s["fc1_w"] = (L, FF, D);            s["fc1_b"] = (L, FF)
    s["fc2_w"] = (L, D, FF);            s["fc2_b"] = (L, D)
    s["fada_w"] = (2 * D, D);           s["fada_b"] = (2 * D,)
    s["final_w"] = (P, D);              s["final_b"] = (P,)
    return s


def num_params(c):
    return sum(int(np.prod(s)) for s in param_shapes(c).values())


def expected_bytes(c):
    P = num_params(c)
    X = int(np.prod(clip_shape(c)))
    B = c["B"]
    # header, params, x0, noise, t, y, v_pred, loss, grads, losses
    return 4 * (HEADER_INTS + P + X + X + B + B + X + 1 + P + c["n_steps"])


def make_header(c):
    """int32[256] header for a config dict (floats stored as float32)."""
    h = np.zeros(HEADER_INTS, dtype="<i4")
    h[0] = DREF_MAGIC
    h[1] = DREF_VERSION
    for i, k in enumerate(INT_FIELDS):
        h[INT_BASE + i] = int(c[k])
    f = h.view("<f4")
    for i, k in enumerate(FLOAT_FIELDS):
        f[FLOAT_BASE + i] = np.float32(c[k])
    return h


def _flat(tensors, shapes):
    """Concatenate a dict of arrays in the order of shapes, checking each shape."""
    parts = []
    for name, shp in shapes.items():
        a = np.asarray(tensors[name], dtype=np.float64)
        if a.shape != tuple(shp):
            raise DrefError("tensor %s has shape %s, expected %s" % (name, a.shape, tuple(shp)))
        parts.append(a.astype("<f4").reshape(-1))
    return np.concatenate(parts)


def write_dref(path, c, params, x0, noise, t, y, v_pred, loss, grads, losses):
    """Write a DREF file; arrays may be float64 (rounded to float32 here)."""
    errs = validate_cfg(c)
    if errs:
        raise DrefError("invalid config: %s" % "; ".join(errs))
    shapes = param_shapes(c)
    X = clip_shape(c)
    y = np.asarray(y)
    if y.shape != (c["B"],) or y.min() < 0 or y.max() > c["NC"]:
        raise DrefError("y must be [B] labels in [0, NC]")
    blocks = [
        make_header(c),
        _flat(params, shapes),
        np.asarray(x0, dtype=np.float64).reshape(X).astype("<f4"),
        np.asarray(noise, dtype=np.float64).reshape(X).astype("<f4"),
        np.asarray(t, dtype=np.float64).reshape(c["B"]).astype("<f4"),
        y.astype("<i4"),
        np.asarray(v_pred, dtype=np.float64).reshape(X).astype("<f4"),
        np.array([loss], dtype="<f4"),
        _flat(grads, shapes),
        np.asarray(losses, dtype=np.float64).reshape(c["n_steps"]).astype("<f4"),
    ]
    tmp = path + ".tmp"
    with open(tmp, "wb") as fh:
        for b in blocks:
            fh.write(np.ascontiguousarray(b).tobytes())
    os.replace(tmp, path)


def _split_params(flat, shapes):
    out = OrderedDict()
    off = 0
    for name, shp in shapes.items():
        n = int(np.prod(shp))
        out[name] = flat[off:off + n].reshape(shp)
        off += n
    assert off == flat.size
    return out


def read_dref(path):
    with open(path, "rb") as fh:
        data = fh.read()
    if len(data) < 4 * HEADER_INTS:
        raise DrefError("%s: file too short for the DREF header (%d bytes, need %d)"
                        % (path, len(data), 4 * HEADER_INTS))
    h = np.frombuffer(data, dtype="<i4", count=HEADER_INTS)
    if h[0] != DREF_MAGIC:
        raise DrefError("%s: bad magic %d (expected %d): not a DREF file" % (path, h[0], DREF_MAGIC))
    if h[1] != DREF_VERSION:
        raise DrefError("%s: unsupported DREF version %d (expected %d)" % (path, h[1], DREF_VERSION))
    int_end = INT_BASE + len(INT_FIELDS)
    float_end = FLOAT_BASE + len(FLOAT_FIELDS)
    if np.any(h[int_end:FLOAT_BASE] != 0):
        raise DrefError("%s: header words %d..%d must be zero" % (path, int_end, FLOAT_BASE - 1))
    if np.any(h[float_end:] != 0):
        raise DrefError("%s: header words %d..%d must be zero" % (path, float_end, HEADER_INTS - 1))
    hf = h.view("<f4")
    c = {k: int(h[INT_BASE + i]) for i, k in enumerate(INT_FIELDS)}
    for i, k in enumerate(FLOAT_FIELDS):
        c[k] = float(hf[FLOAT_BASE + i])
    errs = validate_cfg(c)
    if errs:
        raise DrefError("%s: invalid config in header: %s" % (path, "; ".join(errs)))
    want = expected_bytes(c)
    if len(data) != want:
        raise DrefError("%s: file is %d bytes, the header implies %d" % (path, len(data), want))

    shapes = param_shapes(c)
    P = num_params(c)
    X = clip_shape(c)
    nX = int(np.prod(X))
    B = c["B"]
    off = 4 * HEADER_INTS

    def take(dtype, n):
        nonlocal off
        a = np.frombuffer(data, dtype=dtype, count=n, offset=off).copy()
        off += 4 * n
        return a

    r = {"cfg": c}
    r["params"] = _split_params(take("<f4", P), shapes)
    r["x0"] = take("<f4", nX).reshape(X)
    r["noise"] = take("<f4", nX).reshape(X)
    r["t"] = take("<f4", B)
    r["y"] = take("<i4", B)
    r["v_pred"] = take("<f4", nX).reshape(X)
    r["loss"] = float(take("<f4", 1)[0])
    r["grads"] = _split_params(take("<f4", P), shapes)
    r["losses"] = take("<f4", c["n_steps"])
    assert off == len(data)

    if r["y"].min() < 0 or r["y"].max() > c["NC"]:
        raise DrefError("%s: labels y %s outside [0, NC=%d]" % (path, r["y"].tolist(), c["NC"]))
    blocks = [("params", np.concatenate([p.reshape(-1) for p in r["params"].values()])),
              ("x0", r["x0"]), ("noise", r["noise"]), ("t", r["t"]), ("v_pred", r["v_pred"]),
              ("loss", np.array([r["loss"]])),
              ("grads", np.concatenate([g.reshape(-1) for g in r["grads"].values()])),
              ("losses", r["losses"])]
    for name, a in blocks:
        if not np.all(np.isfinite(a)):
            raise DrefError("%s: %s contains non-finite values" % (path, name))
    return r


def describe(ref):
    c = ref["cfg"]
    return ("C=%(C)d Fr=%(Fr)d Hi=%(Hi)d Wi=%(Wi)d pt=%(pt)d ph=%(ph)d pw=%(pw)d D=%(D)d "
            "L=%(L)d H=%(H)d FF=%(FF)d NC=%(NC)d B=%(B)d n_steps=%(n_steps)d "
            "rope_theta=%(rope_theta)g lr=%(lr)g beta1=%(beta1)g beta2=%(beta2)g "
            "adam_eps=%(adam_eps)g weight_decay=%(weight_decay)g grad_clip=%(grad_clip)g" % c)


if __name__ == "__main__":
    rc = 0
    for p in sys.argv[1:]:
        try:
            r = read_dref(p)
            print("%s: %s params=%d tokens=%d loss=%.6f losses=%s y=%s" % (
                p, describe(r), num_params(r["cfg"]), num_tokens(r["cfg"]), r["loss"],
                " ".join("%.6f" % x for x in r["losses"]), r["y"].tolist()))
        except (DrefError, OSError) as e:
            print("error: %s" % e, file=sys.stderr)
            rc = 1
    sys.exit(rc)
