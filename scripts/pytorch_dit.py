#!/usr/bin/env python3
"""PyTorch peer of train_dit: the same video DiT (docs/design.md 9.1-9.3), the same training
step, the same clips and the same noise, t and label-dropout draws, written for speed as
a PyTorch user would (bf16 autocast on CUDA, F.scaled_dot_product_attention, fused AdamW,
optional torch.compile). It is train_dit's side-by-side baseline, as scripts/pytorch_llama.py
is train_llama's.

Usage (interpreter: `bash scripts/ensure_python_deps.sh` here; plain python3 on a GPU box):

  # train_dit's first steps, then the peer from the same weights on the same data
  ./train_dit_cpu --model dit-tiny --steps 5 --save-init 1 --val-every 0 --run-dir RUN
  python3 scripts/pytorch_dit.py --init-from RUN/ckpt_000000.bin --steps 5 --device cpu \\
      --compare-metrics RUN/metrics.jsonl --out torch.jsonl
  # throughput (tok/s and clips/s after --bench-warmup untimed steps, peak memory)
  python3 scripts/pytorch_dit.py --model dit-XL --frames 16 --height 64 --width 64 --batch 1 \\
      --steps 12 --bench --bench-warmup 4 --compile 1 --out bench.jsonl
  # the largest micro-batch that fits (doubles, then bisects, until CUDA OOM)
  python3 scripts/pytorch_dit.py --model dit-XL --frames 16 --height 64 --width 64 --find-max-batch
  # forward/backward and the AdamW steps against DREF reference files (dev/ref/*.dref)
  python3 scripts/pytorch_dit.py --check-dref dev/ref/*.dref --device cpu

Flags mirror train_dit's (same names, same defaults): --model (dit-tiny, dit-S, dit-B,
dit-XL, hunyuan-13B) and the overrides --channels --frames --height --width --pt --ph
--pw --D --L --H --FF --NC --rope-theta; --data synthetic|FILE, --val-clips (how many of
a clip file's last clips are held out, which decides the training split), --batch
--grad-accum --steps --lr --min-lr-frac --warmup --weight-decay --beta1 --beta2
--adam-eps --grad-clip --label-dropout --seed, --init-from CKPT.

Model (9.3), one nn.Module per block: c = t2(silu(t1(temb(t)))) + class_emb[y];
h = patchify(x_t) patch^T; per block (sh1 sc1 g1 sh2 sc2 g2) = ada(silu(c)),
h += g1 proj(attn(rope3d(rmsnorm(q)), rope3d(rmsnorm(k)), v)) on LN(h)(1+sc1)+sh1,
h += g2 fc2(gelu_tanh(fc1(LN(h)(1+sc2)+sh2))); v_pred = unpatchify(final(LN(h)(1+scf)+shf)).
LayerNorm, RMSNorm, RoPE, the timestep embedding and the loss in fp32; the residual
stream stays fp32 under autocast (only the linear layers and attention run in bf16).
Loss: mean (v_pred - (noise - x0))^2 at x_t = (1 - t) x0 + t noise.

Step (as train_dit): grad_accum micro-batches of --batch clips, each loss / grad_accum;
global-norm clipping (torch.nn.utils.clip_grad_norm_, which train_dit copies); AdamW
(torch.optim.AdamW, train_dit's formula) with decay on the weight matrices and class_emb
only (docs/design.md 9.2); lr(step) of llmc/train/schedule.h (linear warmup, cosine to min_lr_frac*lr).

Data, bit for bit as train_dit (llmc/io/video_data.h, llmc/train/flow_batch.h flow_batch_fill): micro-batch m of
step s holds the source's clips first .. first+B-1, first = ((s-1)*grad_accum + m)*B.
  synthetic  the moving-digits generator, ported (integer geometry, exact);
  FILE       a clip file (docs/formats.md): the last --val-clips clips are held out, clip i
             of training reads file clip perm(i mod n_train) of epoch i / n_train (the
             4-round Feistel permutation of video_data.h, seeded by --seed).
Per clip, --draws trainer (default) replays llmc/core/rand.h: an xorshift64* stream seeded by
seed ^ 0x7261696e ^ (index * 0x9E3779B97F4A7C15) gives, through Box-Muller, the clip's
C*Fr*Hi*Wi noise values, then n with t = sigmoid(n), then one uniform u: the label
becomes the null class NC when u < --label-dropout. The streams are computed all at once
with xorshift's jump-ahead (it is linear over GF(2)), so even 16K-token clips cost well
under a second per step (60 ms a clip of 16 x 64 x 64 x 3). Checked against the C code bit
for bit (label, x0, noise, t, dropout of 22 clips up to that size, odd seeds and indices);
a last-bit difference could only come from libm's log/sin/cos/exp. --draws torch draws them with torch's generator on the device
instead (same distributions, not the same numbers; no host work).

Output lines (--out, JSON): per step {step, loss, lr, grad_norm, ms, clips_per_s, tok_per_s,
peak_mem_allocated, peak_mem_reserved}; then {"summary": true, ...} with tok_per_s and
clips_per_s (timed steps only with --bench) from the mean step and their _median twins from
the median step, sdpa_backend (which of PyTorch's attention kernels ran, --sdpa-backend:
scripts/peer_common.py), flops_per_token = 6 W + 12 L N D, W the
multiply-adds of the weights per token (patch P*D, per block 4D^2 + 2 D FF, final D*P;
the per-clip conditioning and adaLN not counted), N the tokens per clip (so 12 L N^2 D per
clip for attention, forward and backward), flops_per_clip = N * flops_per_token, mfu
against --peak-flops (989e12: H100 SXM bf16 dense), peak memory
(torch.cuda.max_memory_allocated / max_memory_reserved; null on the CPU), the config.

Checkpoint read by --init-from (train_dit's, docs/formats.md): int32 header[256]: [0] magic
20261126 [1] version 1 [2..13] C Fr Hi Wi pt ph pw D L H FF NC [14] step [15] n & 0x7fffffff
[16] n >> 31; float32 [32] rope_theta; then float32 params (9.2 order), adam m, adam v (n
each), an 8-byte checksum (not verified here: the size is). Only the params are used; AdamW
and the data start fresh at step 1, as train_dit --init-from.

--check-dref FILE...: loads each DREF's config, parameters and batch, runs forward and
backward in --dtype (fp32 on the CPU), compares v_pred, the loss and every gradient tensor
with the file's float64 values (||got - ref|| / ||ref|| per tensor, as test_dit; tolerance
--tol, default test_dit's: 1e-5 in fp32, 5e-2 in bf16), then the file's n_steps of clipped
AdamW (constant lr) against its step losses (max abs error, --steps-tol, default 1e-5 in
fp32, 2e-2 in bf16). Measured on the CPU with dev/ref/*.dref: fp32 at most 1.2e-6 per
tensor and 4.8e-7 on the step losses; bf16 autocast 3.3e-2 and 4.8e-3.
--compare-metrics METRICS.jsonl: after training, each step's loss against train_dit's
metrics.jsonl (relative difference, --compare-tol, default 1e-5), exit 1 beyond it. Both in
fp32 on the CPU from the same --save-init weights and data, they differ only by rounding
(other summation orders), which AdamW carries on: measured 6e-8 at step 1 and at most
9.2e-7 over 12 steps at lr 1e-2 (dit-tiny); so 1e-5 has a 10x margin, and the defects
below that reach the loss show as 1e-4 and more.

--plant-bug NAME (tests only) plants a known defect, so that the checks can be seen to fail:
gate-swap (the FFN branch gated by gate1, the attention branch by gate2), rope-axis (3-D
RoPE with the row and column positions exchanged), noise-shift (the noise stream read one
value late). From adaLN-Zero's init, gate-swap cannot show in the losses at all: with ada
all zero, the swapped model is the right one with gate1's and gate2's rows of ada relabelled,
and follows the same trajectory; --check-dref (random weights) is what catches it.
"""

import argparse
import json
import math
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dev", "ref"))  # lref.py, dref.py: the layouts
import dref  # noqa: E402  (one definition of docs/design.md 9.2's layout and the DREF reader)
import peer_common  # noqa: E402  (what this peer shares with scripts/pytorch_llama.py)
from peer_common import (HAVE_SDPA, MASK64, apply_rope, device_name, rand_below, rmsnorm,  # noqa: E402
                         splitmix64)

# train_dit.cu's DIT_PRESETS: (C, Fr, Hi, Wi, pt, ph, pw, D, L, H, FF, NC, rope_theta)
PRESETS = OrderedDict([
    ("dit-tiny", (1, 8, 16, 16, 2, 2, 2, 64, 4, 4, 256, 10, 10000.0)),
    ("dit-S", (3, 16, 32, 32, 1, 2, 2, 384, 12, 6, 1536, 10, 10000.0)),
    ("dit-B", (3, 16, 32, 32, 1, 2, 2, 768, 12, 12, 3072, 10, 10000.0)),
    ("dit-XL", (3, 16, 32, 32, 1, 2, 2, 1152, 28, 16, 4608, 10, 10000.0)),
    ("hunyuan-13B", (16, 33, 90, 160, 1, 2, 2, 3072, 60, 24, 12288, 1, 256.0)),
])
CFG_KEYS = ("C", "Fr", "Hi", "Wi", "pt", "ph", "pw", "D", "L", "H", "FF", "NC", "rope_theta")
# the command-line names of the overrides (train_dit's: --channels --frames --height --width)
CFG_FLAGS = OrderedDict([("C", "channels"), ("Fr", "frames"), ("Hi", "height"), ("Wi", "width"), ("pt", "pt"),
                         ("ph", "ph"), ("pw", "pw"), ("D", "D"), ("L", "L"), ("H", "H"), ("FF", "FF"),
                         ("NC", "NC"), ("rope_theta", "rope-theta")])
TEMB = dref.TIMESTEP_DIM     # 256, the sinusoidal timestep embedding
EPS = 1e-6                   # LayerNorm and QK RMSNorm (docs/design.md 9.3)
LN_10000 = 9.210340371976184  # the double train_dit's timestep embedding uses
CKPT_MAGIC, CKPT_VERSION = 20261126, 1
SALT_TRAIN = 0x7261696E      # llmc/train/flow_batch.h: separates the training draws from validation's
GOLDEN = 0x9E3779B97F4A7C15
PLANTS = ("none", "gate-swap", "rope-axis", "noise-shift")

die, log = peer_common.messages("pytorch_dit")


def preset_cfg(name):
    if name not in PRESETS:
        die("unknown --model %s (one of %s)" % (name, ", ".join(PRESETS)))
    return dict(zip(CFG_KEYS, PRESETS[name]))


def n_tokens(c):
    return (c["Fr"] // c["pt"]) * (c["Hi"] // c["ph"]) * (c["Wi"] // c["pw"])


def patch_dim(c):
    return c["C"] * c["pt"] * c["ph"] * c["pw"]


def clip_values(c):
    return c["C"] * c["Fr"] * c["Hi"] * c["Wi"]


def weight_macs_per_token(c):
    """Multiply-adds of the weight matrices per token: patch, per block qkv + proj + fc1 + fc2, final."""
    D, FF, P = c["D"], c["FF"], patch_dim(c)
    return P * D + c["L"] * (4 * D * D + 2 * D * FF) + D * P


def flops_per_token(c):
    """6 W (forward + backward of the weights) + 12 L N D (attention: 12 L N^2 D per clip)."""
    return 6 * weight_macs_per_token(c) + 12 * c["L"] * n_tokens(c) * c["D"]


def validate_cfg(c):
    errs = dref.validate_cfg(dict(((k, c[k]) for k in CFG_KEYS[:-1]), B=1, n_steps=1))
    if not c["rope_theta"] > 0:
        errs.append("rope_theta must be > 0")
    if errs:
        die("bad model shape: %s" % "; ".join(errs))


# ----------------------------------------------------------------------------- random streams
# Ports of llmc/core/rand.h (Rng: xorshift64*, Box-Muller) and of the splitmix64 streams of
# llmc/io/video_data.h (splitmix64 and rand_below, clipgen_below_, are peer_common's). Python
# ints masked to 64 bits for the few scalar draws; numpy uint64 (which wraps) for the long
# noise streams.

def rng_init(seed):
    """Rng state of rng_init(seed): splitmix64 of the seed, forced odd."""
    return splitmix64(seed & MASK64)[1] | 1


def _xorshift_cols():
    """The xorshift step (x ^= x >> 12; x ^= x << 25; x ^= x >> 27) as a GF(2) matrix:
    column j is the image of bit j (the step is linear, so that defines it)."""
    x = np.left_shift(np.uint64(1), np.arange(64, dtype=np.uint64))
    x ^= x >> np.uint64(12)
    x ^= x << np.uint64(25)
    x ^= x >> np.uint64(27)
    return x


def _byte_tables(cols):
    """Per byte b of the input, the 256 XORs of its bits' columns: applying the matrix is
    then 8 table look-ups instead of 64 bit tests."""
    tabs = np.zeros((8, 256), dtype=np.uint64)
    for b in range(8):
        for bit in range(8):
            v = np.arange(256)
            tabs[b, (v >> bit) & 1 == 1] ^= cols[8 * b + bit]
    return tabs


def _apply(tabs, x):
    out = np.zeros_like(x)
    for b in range(8):
        out ^= tabs[b][((x >> np.uint64(8 * b)) & np.uint64(0xFF)).astype(np.intp)]
    return out


def xorshift_outputs(states, n):
    """rng_u64's first n outputs for each initial state: uint64 [len(states), n].
    State k+1 = A^(k+1) state_0; by doubling, the next `have` states are A^have applied
    to the first `have` (A^have by squaring), so the cost is O(n) vectorised work."""
    s = np.asarray(states, dtype=np.uint64).reshape(-1, 1)
    A = _xorshift_cols()
    out = _apply(_byte_tables(A), s)  # state after the first step
    P = A  # A^have with have = 1
    while out.shape[1] < n:
        have = out.shape[1]
        tabs = _byte_tables(P)
        out = np.concatenate([out, _apply(tabs, out[:, :min(have, n - have)])], axis=1)
        P = _apply(tabs, P)  # A^(2 have): column j of P o P is P applied to column j of P
    with np.errstate(over="ignore"):
        return out[:, :n] * np.uint64(0x2545F4914F6CDD1D)


def clip_draws(seed, indices, n_values, label_dropout, plant="none"):
    """train_dit's flow_batch_fill draws for the clips with these global indices: noise float32
    [len, n_values], t float32 [len], dropped bool [len] (label -> null class)."""
    states = [rng_init((seed ^ SALT_TRAIN ^ ((i * GOLDEN) & MASK64)) & MASK64) for i in indices]
    n_normals = n_values + 1                  # the clip's noise, then the n of t
    n_pairs = (n_normals + 1) // 2            # Box-Muller gives them two at a time
    u = xorshift_outputs(states, 2 * n_pairs + 1)  # + the uniform of the label dropout
    u1 = ((u[:, 0:2 * n_pairs:2] >> np.uint64(11)).astype(np.float64) + 1.0) / 9007199254740993.0
    u2 = (u[:, 1:2 * n_pairs:2] >> np.uint64(11)).astype(np.float64) / 9007199254740992.0
    rad = np.sqrt(-2.0 * np.log(u1))
    ang = 6.283185307179586 * u2
    normals = np.empty((len(states), 2 * n_pairs), dtype=np.float32)
    normals[:, 0::2] = rad * np.cos(ang)  # the cos one first, the sin one is the spare
    normals[:, 1::2] = rad * np.sin(ang)
    off = 1 if plant == "noise-shift" else 0
    noise = np.ascontiguousarray(normals[:, off:off + n_values])
    # t = 1 / (1 + expf(-n)) in float32; exp in double rounded once is expf to the last bit
    e = np.exp(-normals[:, n_values].astype(np.float64)).astype(np.float32)
    t = np.float32(1.0) / (np.float32(1.0) + e)
    uni = (u[:, 2 * n_pairs] >> np.uint64(40)).astype(np.float32) / np.float32(16777216.0)
    return noise, t, uni < np.float32(label_dropout)


# ----------------------------------------------------------------------------- clip sources

def stream_of(seed, index):
    """clipgen_stream_: the splitmix64 state of clip `index` of generator `seed`."""
    _, a = splitmix64(seed & MASK64)
    return splitmix64(a ^ ((index * 0xD1B54A32D192ED03) & MASK64))[1]


# the digits 0-9 of clipgen_font, 7 rows of 5 bits (bit 4 = leftmost column), as [10, 7, 5]
_FONT = [[0x0E, 0x11, 0x13, 0x15, 0x19, 0x11, 0x0E], [0x04, 0x0C, 0x04, 0x04, 0x04, 0x04, 0x0E],
         [0x0E, 0x11, 0x01, 0x02, 0x04, 0x08, 0x1F], [0x1F, 0x02, 0x04, 0x02, 0x01, 0x11, 0x0E],
         [0x02, 0x06, 0x0A, 0x12, 0x1F, 0x02, 0x02], [0x1F, 0x10, 0x1E, 0x01, 0x01, 0x11, 0x0E],
         [0x06, 0x08, 0x10, 0x1E, 0x11, 0x11, 0x0E], [0x1F, 0x01, 0x02, 0x04, 0x08, 0x08, 0x08],
         [0x0E, 0x11, 0x11, 0x0E, 0x11, 0x11, 0x0E], [0x0E, 0x11, 0x11, 0x0F, 0x01, 0x02, 0x0C]]
FONT_BITS = np.array([[[(row >> (4 - col)) & 1 for col in range(5)] for row in d] for d in _FONT], dtype=np.int64)


class MovingDigits:
    """The moving-digits generator of llmc/io/video_data.h (ClipGenerator), training split:
    clip `index` is a pure function of (seed, index). All geometry is integer arithmetic in
    1/64 pixel, so this port gives the same bits; the glyph's coverage of each pixel is
    oy @ font @ ox^T, the per-pixel sum of the C code as one exact int64 product."""

    Q = 64  # CLIPGEN_SUBPIXELS

    def __init__(self, C, Fr, Hi, Wi, NC, seed):
        if not 1 <= NC <= 10:
            die("the moving-digits generator has 1 to 10 classes (--NC %d)" % NC)
        if Hi < 8 or Wi < 6:
            die("a %dx%d frame is too small for the moving digits (need Hi >= 8, Wi >= 6)" % (Hi, Wi))
        self.C, self.Fr, self.Hi, self.Wi, self.NC, self.seed = C, Fr, Hi, Wi, NC, seed & MASK64
        Q = self.Q
        m = min(Hi, Wi)
        self.S = max(Q, m * Q // 14)                     # a font pixel's side
        self.rx, self.ry = Wi * Q - 5 * self.S, Hi * Q - 7 * self.S  # the corner's room
        self.b = max(Q, m * Q // 16)                     # typical speed

    def _speed(self, s, room):
        s, r = rand_below(s, self.b + 1)
        v = min(self.b // 2 + r, max(room // 2, 1))
        s, sign = rand_below(s, 2)
        return s, (-v if sign else v)

    @staticmethod
    def _bounce(p, L):
        m = p % (2 * L)  # Python's % is already non-negative here
        return m if m <= L else 2 * L - m

    def _overlaps(self, pix0, pix1, g0, n):
        """[pixels, n]: the overlap of pixel p with font cell k along one axis."""
        Q, S = self.Q, self.S
        p = np.arange(pix0, pix1, dtype=np.int64)[:, None]
        k = np.arange(n, dtype=np.int64)[None, :]
        lo = np.maximum(p * Q, g0 + k * S)
        hi = np.minimum((p + 1) * Q, g0 + (k + 1) * S)
        return np.maximum(hi - lo, 0)

    def clip(self, index):
        """(x0 float32 [C, Fr, Hi, Wi], label)."""
        s = stream_of(self.seed, index)
        s, label = rand_below(s, self.NC)
        level = [255, 255, 255]
        if self.C == 3:
            for ch in range(3):
                s, r = rand_below(s, 128)
                level[ch] = 128 + r
            s, which = rand_below(s, 3)
            level[which] = 255
        s, x0 = rand_below(s, self.rx + 1)
        s, y0 = rand_below(s, self.ry + 1)
        s, vx = self._speed(s, self.rx)
        s, vy = self._speed(s, self.ry)
        Q, S = self.Q, self.S
        N = Q * Q * 255
        out = np.full((self.C, self.Fr, self.Hi, self.Wi), -1.0, dtype=np.float32)
        for f in range(self.Fr):
            gx, gy = self._bounce(x0 + f * vx, self.rx), self._bounce(y0 + f * vy, self.ry)
            px0, px1 = gx // Q, min((gx + 5 * S + Q - 1) // Q, self.Wi)
            py0, py1 = gy // Q, min((gy + 7 * S + Q - 1) // Q, self.Hi)
            cov = self._overlaps(py0, py1, gy, 7) @ FONT_BITS[label] @ self._overlaps(px0, px1, gx, 5).T
            lit = cov > 0
            for ch in range(self.C):
                n = cov * (level[ch] if self.C == 3 else 255)
                # (float)(2n - N) / (float)N: both exact in float32, one rounded division
                v = (2 * n - N).astype(np.float32) / np.float32(N)
                out[ch, f, py0:py1, px0:px1][lit] = v[lit]
        return out, label


def feistel_permute(i, n, key):
    """clipsource_permute_: a bijection of [0, n), a 4-round Feistel network on 2h bits,
    cycle-walked into [0, n)."""
    h = 1
    while h < 31 and (1 << (2 * h)) < n:
        h += 1
    mask = (1 << h) - 1
    while True:
        L, R = i >> h, i & mask
        for r in range(4):
            st = key ^ ((r * GOLDEN) & MASK64) ^ ((R * 0xD6E8FEB86659FD93) & MASK64)
            t = L ^ (splitmix64(st)[1] & mask)
            L, R = R, t
        i = (L << h) | R
        if i < n:
            return i


def clip_file_header(path):
    """(n, C, Fr, Hi, Wi, NC, value dtype, bytes per record) of a clip file (docs/formats.md),
    its header and size checked as llmc/io/video_data.h does; exits naming the file otherwise."""
    try:
        size = os.path.getsize(path)
        h = np.fromfile(path, dtype="<i4", count=256)
    except OSError as e:
        die("cannot open clip file %s: %s" % (path, e), 1)
    if len(h) < 256 or h[0] != 20261125 or h[1] != 1 or np.any(h[9:] != 0):
        die("%s is not a clip file (magic 20261125, version 1, reserved words zero)" % path, 1)
    n, C, Fr, Hi, Wi, NC, enc = (int(v) for v in h[2:9])
    if min(n, C, Fr, Hi, Wi, NC) <= 0 or enc not in (0, 1):
        die("clip file %s: bad header %s" % (path, h[2:9].tolist()), 1)
    dtype = np.dtype("u1" if enc == 0 else "<f4")
    rec = 4 + C * Fr * Hi * Wi * dtype.itemsize
    if size != 1024 + n * rec:
        die("clip file %s: %d bytes, the header implies %d" % (path, size, 1024 + n * rec), 1)
    return n, C, Fr, Hi, Wi, NC, dtype, rec


def decode_clip_values(v, dtype):
    """A record's values as float32 in [-1, 1]: uint8 as (2 b - 255) / 255.0f, float32 as is."""
    if dtype.kind == "u":
        return (2 * v.astype(np.int32) - 255).astype(np.float32) / np.float32(255.0)
    return v.astype(np.float32)


class ClipFile:
    """A clip file (docs/formats.md), training split, read as llmc/io/video_data.h does."""

    def __init__(self, path, n_val, shuffle_seed):
        self.n, self.C, self.Fr, self.Hi, self.Wi, self.NC, self.dtype, rec = clip_file_header(path)
        self.values = self.C * self.Fr * self.Hi * self.Wi
        if not 0 <= n_val < self.n:
            die("clip file %s: %d clips, %d held out for validation: none left to train on" % (path, self.n, n_val))
        self.n_train = self.n - n_val
        self.seed = shuffle_seed & MASK64
        self.raw = np.memmap(path, dtype="u1", mode="r", offset=1024, shape=(self.n, rec))
        self._key_epoch, self._key = None, None

    def source_index(self, i):
        """clipsource_source_index: file clip of training index i (a new order each epoch)."""
        epoch, pos = divmod(i, self.n_train)
        if epoch != self._key_epoch:
            self._key_epoch = epoch
            self._key = stream_of(self.seed, splitmix64(epoch & MASK64)[1])
        return feistel_permute(pos, self.n_train, self._key)

    def clip(self, index):
        r = self.raw[self.source_index(index)]
        label = int(r[:4].view("<i4")[0])
        if not 0 <= label < self.NC:
            die("clip file: label %d outside [0, %d)" % (label, self.NC), 1)
        x = decode_clip_values(r[4:].view(self.dtype), self.dtype)
        return x.reshape(self.C, self.Fr, self.Hi, self.Wi), label


def open_source(a, c):
    if a.data == "synthetic":
        return MovingDigits(c["C"], c["Fr"], c["Hi"], c["Wi"], c["NC"], a.seed)
    src = ClipFile(a.data, a.val_clips, a.seed)
    got = (src.C, src.Fr, src.Hi, src.Wi, src.NC)
    want = tuple(c[k] for k in ("C", "Fr", "Hi", "Wi", "NC"))
    if got != want:
        die("clip file %s has C Fr Hi Wi NC = %s, the model %s" % (a.data, got, want))
    return src


class Batches:
    """Micro-batch m of step s: clips ((s-1)*grad_accum + m)*B .. +B-1 of the source, with
    their noise, t and label dropout (llmc/train/flow_batch.h flow_batch_fill)."""

    def __init__(self, source, c, a, device):
        self.src, self.c, self.a, self.device = source, c, a, device
        self.values = clip_values(c)
        if a.draws == "torch":
            self.g = torch.Generator(device=device).manual_seed(a.seed)

    def get(self, step, micro):
        a, B = self.a, self.a.batch
        first = ((step - 1) * a.grad_accum + micro) * B
        idx = list(range(first, first + B))
        # the generator's training split is indices mod 2^63 (video_data.h); a file wraps by epochs
        xs, ys = zip(*(self.src.clip(i & (2**63 - 1)) for i in idx))
        x0 = np.stack(xs)
        y = np.array(ys, dtype=np.int64)
        if a.draws == "trainer":
            noise, t, drop = clip_draws(a.seed, idx, self.values, a.label_dropout, a.plant_bug)
            y[drop] = self.c["NC"]
            return x0, noise.reshape(x0.shape), t, y
        # torch's own draws, on the device: the same distributions, no host work
        noise = torch.randn(x0.shape, generator=self.g, device=self.device)
        t = torch.sigmoid(torch.randn(B, generator=self.g, device=self.device))
        drop = torch.rand(B, generator=self.g, device=self.device) < a.label_dropout
        return x0, noise, t, np.where(drop.cpu().numpy(), self.c["NC"], y)


# ----------------------------------------------------------------------------- model

def patchify(x, c):
    """[B, C, Fr, Hi, Wi] -> [B, N, P]: token (ft*Hn + hy)*Wn + wx, value ((c*pt + dt)*ph + dy)*pw + dx."""
    B, C, pt, ph, pw = x.shape[0], c["C"], c["pt"], c["ph"], c["pw"]
    Fn, Hn, Wn = c["Fr"] // pt, c["Hi"] // ph, c["Wi"] // pw
    x = x.reshape(B, C, Fn, pt, Hn, ph, Wn, pw).permute(0, 2, 4, 6, 1, 3, 5, 7)
    return x.reshape(B, Fn * Hn * Wn, C * pt * ph * pw)


def unpatchify(p, c):
    B, C, pt, ph, pw = p.shape[0], c["C"], c["pt"], c["ph"], c["pw"]
    Fn, Hn, Wn = c["Fr"] // pt, c["Hi"] // ph, c["Wi"] // pw
    x = p.reshape(B, Fn, Hn, Wn, C, pt, ph, pw).permute(0, 4, 1, 5, 2, 6, 3, 7)
    return x.reshape(B, C, Fn * pt, Hn * ph, Wn * pw)


def rope3d_tables(c, plant="none"):
    """cos, sin [N, hd/2] as llmc/kernels/rope3d.h: pair j of the head rotates by pos * theta^(-2i/d)
    with (pos, i, d) from the time, row or column part (dt = hd - 2 dh, dh = dw = 2 floor(hd/6))."""
    hd = c["D"] // c["H"]
    dh = 2 * (hd // 6)
    dt = hd - 2 * dh
    Fn, Hn, Wn = c["Fr"] // c["pt"], c["Hi"] // c["ph"], c["Wi"] // c["pw"]
    ft, hy, wx = np.meshgrid(np.arange(Fn), np.arange(Hn), np.arange(Wn), indexing="ij")
    ft, hy, wx = ft.reshape(-1, 1), hy.reshape(-1, 1), wx.reshape(-1, 1)
    if plant == "rope-axis":
        hy, wx = wx, hy
    j = np.arange(hd // 2)
    in_t, in_h = 2 * j < dt, (2 * j >= dt) & (2 * j < dt + dh)
    pos = np.where(in_t, ft, np.where(in_h, hy, wx)).astype(np.float64)
    i = np.where(in_t, j, np.where(in_h, j - dt // 2, j - (dt + dh) // 2))
    d = np.where(in_t, dt, np.where(in_h, dh, dh))
    ang = pos * np.power(float(c["rope_theta"]), -2.0 * i / np.maximum(d, 1))
    return torch.from_numpy(np.cos(ang).astype(np.float32)), torch.from_numpy(np.sin(ang).astype(np.float32))


# rmsnorm (eps EPS here) and apply_rope (the pairs (x[2j], x[2j+1]) of token n rotated by
# these tables' angle j; fp32 in, fp32 out) are peer_common's.

def modulated_norm(h, shift, scale):
    """LN(h)(1 + scale) + shift: LayerNorm without affine, fp32 statistics; shift, scale [B, 1, D]."""
    n = F.layer_norm(h.float(), (h.shape[-1],), eps=EPS)
    return n * (1.0 + scale.float()) + shift.float()


def full_attention(q, k, v):
    """q, k, v [B, H, N, hd]: non-causal softmax attention, scale 1/sqrt(hd)."""
    if HAVE_SDPA:
        return F.scaled_dot_product_attention(q, k, v)
    s = torch.matmul(q, k.transpose(-1, -2)).float() / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(s, dim=-1).to(v.dtype), v)


def timestep_embedding(t):
    """[B] -> [B, 256]: cos then sin of 1000 t f_i, f_i = exp(-ln(10000) i/128); computed in
    double and rounded once, as train_dit (an fp32 angle of up to 1000 rad would be off by 1e-4)."""
    half = TEMB // 2
    freqs = torch.exp(-LN_10000 * torch.arange(half, dtype=torch.float64, device=t.device) / half)
    ang = 1000.0 * t.double()[:, None] * freqs[None]
    return torch.cat([torch.cos(ang), torch.sin(ang)], dim=-1).float()


class DiTBlock(nn.Module):
    def __init__(self, c, plant):
        super().__init__()
        D, FF = c["D"], c["FF"]
        self.H, self.hd, self.plant = c["H"], D // c["H"], plant
        self.ada = nn.Linear(D, 6 * D)
        self.qkv = nn.Linear(D, 3 * D)
        self.q_norm = nn.Parameter(torch.ones(self.hd))
        self.k_norm = nn.Parameter(torch.ones(self.hd))
        self.proj = nn.Linear(D, D)
        self.fc1 = nn.Linear(D, FF)
        self.fc2 = nn.Linear(FF, D)

    def forward(self, h, sc, cos, sin):
        B, N, D = h.shape
        sh1, sc1, g1, sh2, sc2, g2 = self.ada(sc).unsqueeze(1).chunk(6, dim=-1)
        if self.plant == "gate-swap":
            g1, g2 = g2, g1
        a = modulated_norm(h, sh1, sc1)
        q, k, v = self.qkv(a).view(B, N, 3, self.H, self.hd).unbind(2)
        q = apply_rope(rmsnorm(q, self.q_norm, EPS), cos, sin).to(v.dtype).transpose(1, 2)
        k = apply_rope(rmsnorm(k, self.k_norm, EPS), cos, sin).to(v.dtype).transpose(1, 2)
        o = full_attention(q, k, v.transpose(1, 2)).transpose(1, 2).reshape(B, N, D)
        h = h + g1 * self.proj(o)  # fp32 residual + bf16 branch -> fp32
        m = modulated_norm(h, sh2, sc2)
        return h + g2 * self.fc2(F.gelu(self.fc1(m), approximate="tanh"))


class DiT(nn.Module):
    # the docs/design.md 9.2 tensors stacked over the blocks ([L, ...]), and those decayed by AdamW
    STACKED = ("ada_w", "ada_b", "qkv_w", "qkv_b", "q_norm", "k_norm", "proj_w", "proj_b",
               "fc1_w", "fc1_b", "fc2_w", "fc2_b")

    def __init__(self, c, plant="none"):
        super().__init__()
        self.c = c
        D, P = c["D"], patch_dim(c)
        self.patch = nn.Linear(P, D)
        self.t1 = nn.Linear(TEMB, D)
        self.t2 = nn.Linear(D, D)
        self.class_emb = nn.Embedding(c["NC"] + 1, D)  # row NC: the null class
        self.blocks = nn.ModuleList([DiTBlock(c, plant) for _ in range(c["L"])])
        self.fada = nn.Linear(D, 2 * D)
        self.final = nn.Linear(D, P)
        cos, sin = rope3d_tables(c, plant)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def velocity(self, x_t, t, y):
        """v_pred [B, C, Fr, Hi, Wi] (fp32) for x_t at times t, classes y."""
        cvec = self.t2(F.silu(self.t1(timestep_embedding(t)))) + self.class_emb(y)
        sc = F.silu(cvec)
        h = self.patch(patchify(x_t, self.c)).float()  # the residual stream stays fp32
        for blk in self.blocks:
            h = blk(h, sc, self.rope_cos, self.rope_sin)
        shf, scf = self.fada(sc).unsqueeze(1).chunk(2, dim=-1)
        return unpatchify(self.final(modulated_norm(h, shf, scf)).float(), self.c)

    def forward(self, x0, noise, t, y):
        """The rectified-flow loss of one batch, in fp32."""
        tb = t.view(-1, 1, 1, 1, 1)
        x_t = (1.0 - tb) * x0 + tb * noise
        return F.mse_loss(self.velocity(x_t, t, y), noise - x0)

    def tensors_9_2(self):
        """OrderedDict name -> list of the parameters holding it (one per block for stacked ones)."""
        t = OrderedDict()
        for name, mod in (("patch", self.patch), ("t1", self.t1), ("t2", self.t2)):
            t[name + "_w"], t[name + "_b"] = [mod.weight], [mod.bias]
        t["class_emb"] = [self.class_emb.weight]
        for name in ("ada", "qkv"):
            t[name + "_w"] = [getattr(b, name).weight for b in self.blocks]
            t[name + "_b"] = [getattr(b, name).bias for b in self.blocks]
        t["q_norm"] = [b.q_norm for b in self.blocks]
        t["k_norm"] = [b.k_norm for b in self.blocks]
        for name in ("proj", "fc1", "fc2"):
            t[name + "_w"] = [getattr(b, name).weight for b in self.blocks]
            t[name + "_b"] = [getattr(b, name).bias for b in self.blocks]
        for name in ("fada", "final"):
            t[name + "_w"] = [getattr(self, name).weight]
            t[name + "_b"] = [getattr(self, name).bias]
        return t

    @torch.no_grad()
    def load_9_2(self, arrays):
        """arrays: name -> float32 numpy array of the 9.2 shape."""
        shapes = dref.param_shapes(self.c)
        for name, plist in self.tensors_9_2().items():
            a = np.asarray(arrays[name], dtype=np.float32).reshape(shapes[name])
            parts = [a[l] for l in range(len(plist))] if name in self.STACKED else [a]
            for p, x in zip(plist, parts):
                p.copy_(torch.from_numpy(np.ascontiguousarray(x)))

    def grads_9_2(self):
        out = OrderedDict()
        for name, plist in self.tensors_9_2().items():
            gs = [p.grad.detach().double().cpu().numpy() for p in plist]
            out[name] = np.stack(gs) if name in self.STACKED else gs[0]
        return out

    @torch.no_grad()
    def init_weights(self, seed):
        """DiT's adaLN-Zero (docs/design.md 9.3), from torch's generator (not train_dit's numbers:
        use --init-from for those)."""
        g = torch.Generator(device=self.patch.weight.device).manual_seed(seed)
        for name, plist in self.tensors_9_2().items():
            for p in plist:
                if name in ("patch_w", "qkv_w", "proj_w", "fc1_w", "fc2_w"):
                    bound = math.sqrt(6.0 / (p.shape[0] + p.shape[1]))
                    p.uniform_(-bound, bound, generator=g)
                elif name in ("t1_w", "t2_w", "class_emb"):
                    p.normal_(0.0, 0.02, generator=g)
                elif name in ("q_norm", "k_norm"):
                    p.fill_(1.0)
                else:
                    p.zero_()


# ----------------------------------------------------------------------------- checkpoint

def read_checkpoint(path):
    """(cfg, step, params name -> numpy) of a train_dit checkpoint."""
    size, hi, hf = peer_common.read_header(
        path, CKPT_MAGIC, CKPT_VERSION, "%s is not a train_dit checkpoint (magic %d version %d, expected %d version %d)",
        die)
    c = dict(zip(CFG_KEYS[:-1], (int(v) for v in hi[2:14])))
    c["rope_theta"] = float(hf[32])
    validate_cfg(c)
    n = int(hi[15]) | (int(hi[16]) << 31)
    if n != dref.num_params(c) or size != 1024 + 3 * 4 * n + 8:
        die("bad checkpoint %s: %d bytes and %d params; the header's model has %d params, %d bytes"
            % (path, size, n, dref.num_params(c), 1024 + 3 * 4 * dref.num_params(c) + 8), 1)
    return c, int(hi[14]), peer_common.read_params(path, n, dref.param_shapes(c))


# ----------------------------------------------------------------------------- training

# lr_at_step, the step (peer_common.Trainer), build, the loop, the summary and the
# find-max-batch search are peer_common's; here, what is the DiT's.

def make_optimizer(model, a, device):
    """AdamW, decay on the weight matrices and class_emb only (dref.DECAYED, docs/design.md 9.2)."""
    decay, no_decay = [], []
    for name, plist in model.tensors_9_2().items():
        (decay if name in dref.DECAYED else no_decay).extend(plist)
    return peer_common.adamw(decay, no_decay, a, device)


class Trainer(peer_common.Trainer):
    """Micro-batches (x0, noise, t, y), numpy or (--draws torch) tensors; fwd(x0, noise, t, y)
    is the loss."""

    def on_device(self, batch):
        x0, noise, t, y = batch
        x0, noise, t = (self.to_device(v, torch.float32) for v in (x0, noise, t))
        return x0, noise, t, self.to_device(y, torch.int64)


def build(a, c, device):
    model = DiT(c, a.plant_bug).to(device)
    return peer_common.build(a, model, model.load_9_2, make_optimizer, device, log)


def compare_metrics(path, losses, norms, tol):
    """Per step, |loss - train_dit's| / train_dit's (and the grad norm's); 0 when within tol."""
    try:
        ours = {r["step"]: r for r in (json.loads(l) for l in open(path) if l.strip())}
    except (OSError, ValueError) as e:
        log("--compare-metrics %s: %s" % (path, e))
        return 1
    worst, bad = 0.0, 0
    print("step | train_dit loss | pytorch loss | rel diff | train_dit norm | pytorch norm | rel diff")
    for s, (l, g) in enumerate(zip(losses, norms), start=1):
        if s not in ours:
            log("--compare-metrics: step %d missing from %s" % (s, path))
            return 1
        rl = abs(l - ours[s]["loss"]) / abs(ours[s]["loss"])
        rg = abs(g - ours[s]["grad_norm"]) / max(abs(ours[s]["grad_norm"]), 1e-30)
        worst = max(worst, rl)
        bad += rl > tol
        print("%4d | %.9f | %.9f | %.2e %s | %.6g | %.6g | %.2e" % (s, ours[s]["loss"], l, rl,
              "FAIL" if rl > tol else "ok", ours[s]["grad_norm"], g, rg))
    print("compare-metrics: %d steps, worst relative loss difference %.3e (tolerance %.1e): %s"
          % (len(losses), worst, tol, "OK" if bad == 0 else "%d FAILED" % bad))
    return 0 if bad == 0 else 1


def train(a, c, device, out):
    model, fwd, opt, compiled, opt_kind = build(a, c, device)
    data = Batches(open_source(a, c), c, a, device)
    tr = Trainer(model, fwd, opt, a, device)
    N, clips_per_step = n_tokens(c), a.batch * a.grad_accum
    fpt = flops_per_token(c)
    npar = dref.num_params(c)
    log("model %s: %s, %.2fM params, N=%d tokens/clip, B=%d grad_accum=%d (%d clips, %d tokens/step), %s, %s%s, "
        "AdamW %s, data %s, draws %s, device %s" % (
            a.model, {k: c[k] for k in CFG_KEYS}, npar / 1e6, N, a.batch, a.grad_accum, clips_per_step,
            clips_per_step * N, a.dtype, "compile" if compiled else "eager", " (SDPA)" if HAVE_SDPA else "",
            opt_kind, a.data, a.draws, device_name(device)))

    def rates(ms):
        cps = clips_per_step / (ms / 1e3)
        return [("clips_per_s", cps), ("tok_per_s", cps * N)], "%.2f clips/s %.0f tok/s" % (cps, cps * N)

    # the batches are host work, outside the timing
    run = peer_common.timed_steps(a, tr, lambda step: [data.get(step, m) for m in range(a.grad_accum)], out, log,
                                  rates)
    cps = peer_common.rate(clips_per_step, run.timed_ms)
    cps_med = peer_common.rate_median(clips_per_step, run.timed_ms)
    peer_common.log_rates(log, run, "tok", clips_per_step * N)
    summ = peer_common.summary(
        a, run, compiled, opt_kind, device,
        sizes=[("B", a.batch), ("grad_accum", a.grad_accum), ("N", N), ("T", N), ("cfg", {k: c[k] for k in CFG_KEYS})],
        rates=[("clips_per_s", cps), ("tok_per_s", cps * N), ("clips_per_s_median", cps_med),
               ("tok_per_s_median", cps_med * N)],
        costs=[("n_params", npar), ("flops_per_token", fpt), ("flops_per_clip", fpt * N)],
        mfu=cps * N * fpt / a.peak_flops, extra=[("data", a.data), ("draws", a.draws)])
    rc = peer_common.finish(summ, out, run.losses)
    if a.compare_metrics:
        rc |= compare_metrics(a.compare_metrics, run.losses, run.norms, a.compare_tol)
    return rc


def find_max_batch(a, c, device, out):
    """The largest B of --frames x --height x --width clips (peer_common.find_max_batch)."""
    N = n_tokens(c)

    def setup():
        model, fwd, opt, compiled, _ = build(a, c, device)
        tr = Trainer(model, fwd, opt, a, device)
        src = open_source(a, c)

        def batches_for(b):
            a.batch = b
            data = Batches(src, c, a, device)
            return lambda s: data.get(s, 0)
        return tr, compiled, batches_for

    return peer_common.find_max_batch(a, device, out, log, setup, [("N", N), ("T", N)], "N=%d" % N)


# ----------------------------------------------------------------------------- DREF check

def check_dref(a, device):
    """Each DREF (docs/design.md 9.4): v_pred, loss and every gradient at --tol (||got - ref|| / ||ref||
    of each tensor), then the file's clipped AdamW step losses at --steps-tol."""
    bf16 = a.dtype == "bf16"
    tol = a.tol if a.tol is not None else (5e-2 if bf16 else 1e-5)  # test_dit's TOL_GRADS
    steps_tol = a.steps_tol if a.steps_tol is not None else (2e-2 if bf16 else 1e-5)
    fails = 0
    for path in a.check_dref:
        try:
            r = dref.read_dref(path)
        except (dref.DrefError, OSError) as e:
            print("check-dref %s: FAIL: %s" % (path, e))
            fails += 1
            continue
        rc = r["cfg"]
        c = {k: rc[k] for k in CFG_KEYS}
        model = DiT(c, a.plant_bug).to(device)
        model.load_9_2(r["params"])
        x0, noise, t = (torch.from_numpy(r[k]).to(device) for k in ("x0", "noise", "t"))
        y = torch.from_numpy(r["y"].astype(np.int64)).to(device)
        tb = t.view(-1, 1, 1, 1, 1)
        with torch.autocast(device_type=device.type, dtype=torch.bfloat16, enabled=bf16):
            v_pred = model.velocity((1.0 - tb) * x0 + tb * noise, t, y)
            loss = F.mse_loss(v_pred, noise - x0)
        loss.backward()
        items = [("v_pred", v_pred.detach().double().cpu().numpy(), r["v_pred"]),
                 ("loss", np.array([loss.item()]), np.array([r["loss"]]))]
        items += [("grad " + k, g, r["grads"][k]) for k, g in model.grads_9_2().items()]
        worst, worst_name = 0.0, ""
        for name, got, want in items:
            # ||got - ref|| / ||ref||, test_dit's measure (a max-abs ratio is noisier in bf16)
            want = np.asarray(want, dtype=np.float64)
            err = float(np.linalg.norm(got - want)) / max(float(np.linalg.norm(want)), 1e-30)
            if err > worst:
                worst, worst_name = err, name
            if err > tol or not math.isfinite(err):
                print("  %s: %s rel err %.3e > %.1e FAIL" % (os.path.basename(path), name, err, tol))
                worst = max(worst, math.inf if not math.isfinite(err) else err)
        # the file's training steps: clipped AdamW at constant lr on the same batch
        got = peer_common.reference_losses(model, rc, a.dtype, device, make_optimizer, Trainer,
                                           (r["x0"], r["noise"], r["t"], r["y"].astype(np.int64)))
        lerr = float(np.max(np.abs(got - np.asarray(r["losses"], dtype=np.float64))))
        if lerr > steps_tol:
            print("  %s: AdamW step losses %s vs reference %s FAIL" % (os.path.basename(path), got, r["losses"]))
        ok = worst <= tol and lerr <= steps_tol
        fails += not ok
        print("check-dref %s (%s, %s): worst rel err %.2e (%s; tol %.0e), %d AdamW step losses max abs err "
              "%.2e (tol %.0e): %s" % (path, device.type, a.dtype, worst, worst_name, tol, rc["n_steps"], lerr,
                                       steps_tol, "ok" if ok else "FAIL"))
    print("check-dref: %s" % ("all %d passed" % len(a.check_dref) if fails == 0 else "%d FAILED" % fails))
    return 0 if fails == 0 else 1


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model", default=None, help="|".join(PRESETS) + " (default dit-tiny, or the checkpoint's)")
    for k, flag in CFG_FLAGS.items():
        ap.add_argument("--" + flag, dest="cfg_" + k, type=float if k == "rope_theta" else int, default=None,
                        metavar=k, help="override the preset's %s" % k)
    ap.add_argument("--data", default="synthetic", help="'synthetic' (moving digits) or a clip file")
    ap.add_argument("--val-clips", dest="val_clips", type=int, default=48,
                    help="a clip file's last clips held out by train_dit (decides the training split; default 48)")
    ap.add_argument("--draws", default="trainer", choices=("trainer", "torch"),
                    help="noise, t and label dropout: train_dit's numbers (default) or torch's generator")
    ap.add_argument("--batch", type=int, default=8, help="clips per micro-batch (default 8)")
    ap.add_argument("--grad-accum", dest="grad_accum", type=int, default=1)
    ap.add_argument("--steps", type=int, default=300)
    ap.add_argument("--lr", type=float, default=1e-3)
    ap.add_argument("--min-lr-frac", dest="min_lr_frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=20)
    ap.add_argument("--weight-decay", dest="weight_decay", type=float, default=0.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.999)
    ap.add_argument("--adam-eps", dest="adam_eps", type=float, default=1e-8)
    ap.add_argument("--grad-clip", dest="grad_clip", type=float, default=1.0, help="0 = off")
    ap.add_argument("--label-dropout", dest="label_dropout", type=float, default=0.1)
    ap.add_argument("--seed", type=int, default=1337, help="data order, draws and (without --init-from) init")
    peer_common.add_run_flags(ap, compile_help="1: torch.compile the model",
                              init_help="train_dit checkpoint (its parameters)", max_batch_limit=128)
    ap.add_argument("--compare-metrics", dest="compare_metrics", default=None, metavar="METRICS_JSONL",
                    help="after training, compare each step's loss with train_dit's metrics.jsonl")
    ap.add_argument("--compare-tol", dest="compare_tol", type=float, default=1e-5,
                    help="relative loss difference allowed per step (default 1e-5: fp32 on both sides)")
    ap.add_argument("--check-dref", dest="check_dref", nargs="+", default=None, metavar="DREF")
    ap.add_argument("--tol", type=float, default=None, help="--check-dref: per-tensor tolerance")
    ap.add_argument("--steps-tol", dest="steps_tol", type=float, default=None,
                    help="--check-dref: AdamW step losses, max abs error")
    ap.add_argument("--plant-bug", dest="plant_bug", default="none", choices=PLANTS, help="tests only")
    a = ap.parse_args()

    device = peer_common.setup_device(a, die)

    if a.check_dref:
        return check_dref(a, device)

    overrides = {k: getattr(a, "cfg_" + k) for k in CFG_KEYS if getattr(a, "cfg_" + k) is not None}
    a._init_params = None
    if a.init_from:
        c, step, a._init_params = read_checkpoint(a.init_from)
        if a.model and a.model != "checkpoint":
            base = dict(preset_cfg(a.model), **overrides)
            diff = [k for k in CFG_KEYS if base[k] != c[k]]
            if diff:
                die("--model %s (with its overrides) does not match the checkpoint in %s" % (a.model, ", ".join(diff)))
        a.model = next((n for n in PRESETS if preset_cfg(n) == c), a.model or "checkpoint")
        diff = [k for k in overrides if overrides[k] != c[k]]
        if diff:
            die("the checkpoint has %s; --%s differ" % ({k: c[k] for k in diff},
                                                        " --".join(CFG_FLAGS[k] for k in diff)))
        if step != 0:
            log("warning: checkpoint is at step %d; only its params are used (AdamW, the data and the lr "
                "schedule start fresh, as train_dit --init-from)" % step)
        log("init from %s (step %d)" % (a.init_from, step))
    else:
        a.model = a.model or "dit-tiny"
        c = dict(preset_cfg(a.model), **overrides)
    validate_cfg(c)
    if a.batch < 1 or a.grad_accum < 1 or a.steps < 1:
        die("--batch, --grad-accum and --steps must be >= 1")
    if not 0.0 <= a.label_dropout <= 1.0:
        die("--label-dropout must be in [0, 1]")

    attn = dict(B=a.batch, H=c["H"], KV=c["H"], T=n_tokens(c), hd=c["D"] // c["H"], causal=False)
    return peer_common.run(a, c, device, find_max_batch, train, attn, log, die)


if __name__ == "__main__":
    sys.exit(main())
