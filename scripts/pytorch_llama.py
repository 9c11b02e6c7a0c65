#!/usr/bin/env python3
"""PyTorch peer of train_llama: the same Llama model (docs/design.md 5.2), the same training
step and the same batches, in plain PyTorch (bf16 autocast on CUDA, fp32 on the CPU),
eager or torch.compile. It is the side-by-side baseline of docs/design.md 7.

Usage (interpreter: `bash scripts/ensure_python_deps.sh` here; plain python3 on a GPU box):

  # train, logging one JSON line per step (and a final summary line) to --out
  python3 scripts/pytorch_llama.py --model tiny --batch 4 --seq 64 --steps 20 \\
      --train-data 'data/tinystories/tinystories_train_*.bin' --device cpu --out m.jsonl
  # continue from train_llama's initial checkpoint: same params, same batches (the
  # dataloader state in the checkpoint; B, T and grad accumulation default to it)
  python3 scripts/pytorch_llama.py --init-from RUN/ckpt_000000.bin --steps 300 \\
      --train-data 'data/tinystories/tinystories_train_*.bin' --out torch.jsonl
  # throughput: time the steps after --bench-warmup warm-up steps (tok/s, MFU, peak memory)
  python3 scripts/pytorch_llama.py --model stories110M --batch 16 --seq 1024 --steps 20 --bench --compile 1
  # largest micro-batch that fits (doubles, then bisects, until CUDA OOM)
  python3 scripts/pytorch_llama.py --model llama3-1B --seq 2048 --find-max-batch
  # the first batch of the random-window loader, to compare with llmc/io/dataloader.h
  python3 scripts/pytorch_llama.py --selftest-data 'data/tinystories/*train*.bin' --batch 4 --seq 8 --seed 1337
  # forward/backward against LREF reference files (dev/ref/*.lref): logits, loss, grads
  python3 scripts/pytorch_llama.py --selftest-model dev/ref/*.lref

Model (5.2): h = tok_embeddings[x]; per layer h += wo(attn(rope(wq n), rope(wk n), wv n)) with
n = RMSNorm(h) * attn_norm, then h += w2(silu(w1 n) * w3 n) with n = RMSNorm(h) * ffn_norm;
logits = output(RMSNorm(h) * norm) (tok_embeddings when tied). RMSNorm in fp32; RoPE on
adjacent pairs (x[2i], x[2i+1]) by pos * theta^(-2i/hd); causal attention, scale
1/sqrt(hd), kv head j serves q heads j*H/KV .. (j+1)*H/KV-1, through
F.scaled_dot_product_attention when torch has it (else an explicit softmax). Loss: mean
cross-entropy over all B*T targets, in fp32. The residual stream stays fp32 under autocast.

Step: grad_accum = total_batch / (B*T) micro-batches (each one B x T batch of the loader,
loss scaled by 1/grad_accum); global-norm clipping (torch.nn.utils.clip_grad_norm_) when
grad_clip > 0; torch.optim.AdamW with decay on the 2-D tensors only; lr(step) for step =
1..N: lr*step/warmup while step <= warmup, then min_lr + 0.5*(lr-min_lr)*(1+cos(pi*
(step-warmup)/(N-warmup))), min_lr = lr*min_lr_frac (llmc/train/schedule.h).

Data (llmc/io/dataloader.h, random-window mode, rank 0 of world 1): shards matching the glob
(sorted by name), every row a window of T+1 tokens starting at x - start_begin(shard) for
x uniform in [0, sum over shards of (n - T)), drawn with splitmix64 (unbiased, rejection
sampling) from the state dataloader_initial_rng_(seed, 0), or the state saved in the
--init-from checkpoint. Without --train-data the batches are uniform random tokens.

Output lines (--out, JSON): per step {step, loss, lr, grad_norm, ms, tok_per_s,
peak_mem_allocated, peak_mem_reserved}; then {"summary": true, ...} with tok_per_s (timed
steps only when --bench) from the mean step and tok_per_s_median from the median one
(ms_per_step, ms_per_step_median), sdpa_backend (which of PyTorch's attention kernels ran,
--sdpa-backend: scripts/peer_common.py), mfu = tok_per_s * (6*N + 6*L*D*T) / peak_flops (N = number of
parameters, tied embeddings counted once; peak 989e12 = H100 SXM bf16 dense unless
--peak-flops), peak memory (torch.cuda.max_memory_allocated/max_memory_reserved; null
on the CPU), and the configuration.

Checkpoint read by --init-from (train_llama's version 2, docs/formats.md): int32
header[256]: [0] magic 20261123 [1] version 2 [2] V [3] D [4] L [5] H [6] KV [7] F [8]
max_seq_len [9] tied [10] step [11] dp [12] B per rank [13] T [14] grad_accum_steps [15]
dataloader state bytes; float32 [32] rope_theta [33] norm_eps; then float32 params (5.2
order), adam m, adam v (same count), then the dataloader state, then an 8-byte checksum.
The batch here is the global micro-batch B*dp, which is what train_llama's loader reads.
The dataloader state (16 uint64: "LLMCDL01", version, B, T, rank, world,
random_windows, seed, num_shards, num_tokens, rng state, next window, batches, 0, 0, 0).
Only the params and the dataloader state are used; AdamW starts fresh.
"""

import argparse
import glob
import math
import os
import sys
from collections import OrderedDict

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dev", "ref"))  # lref.py, dref.py: the layouts
from lref import num_params, param_shapes  # noqa: E402  (one definition of docs/design.md 5.2's layout)

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
import peer_common  # noqa: E402  (what this peer shares with scripts/pytorch_dit.py)
# (H100_BF16_PEAK, is_oom, lr_at_step and mem_stats unused here: kept as this module's names)
from peer_common import (H100_BF16_PEAK, HAVE_SDPA, MASK64, apply_rope, device_name, is_oom,  # noqa: E402,F401
                         lr_at_step, mem_stats, rand_below, rmsnorm, splitmix64)

# (V, D, L, H, KV, F, max_seq_len, tied, rope_theta); norm_eps 1e-5 for all
PRESETS = OrderedDict([
    ("tiny", (32000, 64, 4, 4, 2, 176, 256, 1, 1e4)),
    ("stories15M", (32000, 288, 6, 6, 6, 768, 256, 1, 1e4)),
    ("stories42M", (32000, 512, 8, 8, 8, 1376, 1024, 1, 1e4)),
    ("stories110M", (32000, 768, 12, 12, 12, 2048, 1024, 1, 1e4)),
    ("llama3-1B", (128256, 2048, 16, 32, 8, 8192, 8192, 1, 5e5)),
])
CFG_KEYS = ("V", "D", "L", "H", "KV", "F", "max_seq_len", "tied", "rope_theta")
CKPT_MAGIC = 20261123
CKPT_VERSION = 2

die, log = peer_common.messages("pytorch_llama")


def preset_cfg(name):
    if name not in PRESETS:
        die("unknown --model %s (one of %s)" % (name, ", ".join(PRESETS)))
    c = dict(zip(CFG_KEYS, PRESETS[name]))
    c["norm_eps"] = 1e-5
    return c


def flops_per_token(c, T):
    """6N + 6*L*D*T (forward + backward; N = all parameters, tied embeddings once)."""
    return 6 * num_params(c) + 6 * c["L"] * c["D"] * T


def validate_cfg(c):
    if c["D"] % c["H"] or (c["D"] // c["H"]) % 2 or c["H"] % c["KV"]:
        die("bad model shape: need D %% H == 0, even head dim, H %% KV == 0 (D=%d H=%d KV=%d)"
            % (c["D"], c["H"], c["KV"]))


# ----------------------------------------------------------------------------- data
# A port of llmc/io/dataloader.h (rank 0 of world 1 unless told otherwise); its splitmix64
# and rand_below are peer_common's.

def initial_rng(seed, rank=0):
    s = (seed & MASK64) ^ 0x243F6A8885A308D3
    s, a = splitmix64(s)
    t = (rank * 0xD1B54A32D192ED03 + a) & MASK64
    _, v = splitmix64(t)
    return v


class ShardLoader:
    """Batches exactly as llmc/io/dataloader.h: random windows (training) or sequential."""

    def __init__(self, pattern, B, T, seed=0, random_windows=True, rank=0, world=1, V=None):
        paths = sorted(glob.glob(pattern))
        if not paths:
            die("no files match pattern %s (run data/prepare_tinystories.py to make shards?)" % pattern, 1)
        self.B, self.T, self.rank, self.world = B, T, rank, world
        self.random_windows = bool(random_windows)
        self.seed = seed & MASK64
        self.paths, self.tokens = paths, []
        for p in paths:
            self.tokens.append(self._open(p, T))
        if V is not None:
            for p, tok in zip(paths, self.tokens):
                if V <= 65535 or tok.dtype != np.uint16:
                    mx = int(tok.max())
                    if mx >= V:
                        die("bad shard %s: token id %d is out of range for vocab size %d" % (p, mx, V), 1)
        # prefix sums as dataloader_init
        self.num_tokens = 0
        self.win_begin, self.num_windows_sh = [], []
        self.region_lo, self.region_starts, self.start_begin = [], [], []
        win = starts = 0
        for tok in self.tokens:
            n = len(tok)
            self.num_tokens += n
            nw = (n - 1) // T
            self.win_begin.append(win)
            self.num_windows_sh.append(nw)
            win += nw
            lo = n * rank // world
            hi = n * (rank + 1) // world
            rs = hi - lo - T if hi - lo > T else 0
            self.region_lo.append(lo)
            self.region_starts.append(rs)
            self.start_begin.append(starts)
            starts += rs
        self.num_windows = win
        self.rank_windows = (win - rank + world - 1) // world if win > rank else 0
        self.rank_starts = starts
        if not self.random_windows and self.rank_windows == 0:
            die("too little data for pattern %s" % pattern, 1)
        if self.random_windows and starts == 0:
            die("too little data for pattern %s: every shard shorter than T+1 = %d" % (pattern, T + 1), 1)
        self.reset()

    @staticmethod
    def _open(path, T):
        try:
            size = os.path.getsize(path)
            h = np.fromfile(path, dtype="<i4", count=256)
        except OSError as e:
            die("cannot open shard %s: %s" % (path, e), 1)
        if size < 1024 or len(h) < 256:
            die("bad shard %s: %d bytes, smaller than the 1024-byte header" % (path, size), 1)
        magic, version, n = int(h[0]), int(h[1]), int(h[2])
        if magic == 20240520 and version == 1:
            dt = np.dtype("<u2")
        elif magic == 20240801 and version == 7:
            dt = np.dtype("<u4")
        else:
            die("bad shard %s: magic %d version %d (expected 20240520/1 or 20240801/7)" % (path, magic, version), 1)
        if n < 0 or size != 1024 + n * dt.itemsize:
            die("bad shard %s: header says %d tokens but the file has %d bytes" % (path, n, size), 1)
        if n < T + 1:
            die("bad shard %s: too short: %d tokens, shorter than T+1 = %d" % (path, n, T + 1), 1)
        return np.memmap(path, dtype=dt, mode="r", offset=1024, shape=(n,))

    def reset(self):
        self.rng_state = initial_rng(self.seed, self.rank)
        self.next_window = 0
        self.batches = 0

    def set_rng_state(self, state):
        self.rng_state = state & MASK64

    def _find_shard(self, x, by_starts):
        begins = self.start_begin if by_starts else self.win_begin
        counts = self.region_starts if by_starts else self.num_windows_sh
        lo, hi = 0, len(begins) - 1
        while lo < hi:
            mid = (lo + hi + 1) // 2
            if begins[mid] <= x:
                lo = mid
            else:
                hi = mid - 1
        while lo < len(begins) - 1 and not x < begins[lo] + counts[lo]:
            lo += 1
        return lo

    def next_batch(self):
        """Returns (inputs, targets) int64 numpy [B, T] and fills self.rows = [(shard, offset)]."""
        B, T = self.B, self.T
        buf = np.empty((B, T + 1), dtype=np.int64)
        self.rows = []
        for b in range(B):
            if self.random_windows:
                self.rng_state, x = rand_below(self.rng_state, self.rank_starts)
                s = self._find_shard(x, True)
                off = self.region_lo[s] + (x - self.start_begin[s])
            else:
                if self.next_window >= self.rank_windows:
                    self.next_window = 0
                gw = self.rank + self.next_window * self.world
                s = self._find_shard(gw, False)
                off = (gw - self.win_begin[s]) * T
                self.next_window += 1
            buf[b] = self.tokens[s][off:off + T + 1]
            self.rows.append((s, off))
        self.batches += 1
        return buf[:, :-1], buf[:, 1:]


class RandomTokens:
    """Batches of uniform random tokens (benchmarks without data)."""

    def __init__(self, B, T, V, seed):
        self.B, self.T, self.V = B, T, V
        self.g = torch.Generator().manual_seed(seed)

    def next_batch(self):
        t = torch.randint(0, self.V, (self.B, self.T + 1), generator=self.g, dtype=torch.int64).numpy()
        return t[:, :-1], t[:, 1:]


# ----------------------------------------------------------------------------- model
# rmsnorm and apply_rope (adjacent pairs, these tables) are peer_common's.

def rope_tables(T, hd, theta, device):
    i = torch.arange(hd // 2, dtype=torch.float64)
    inv_freq = theta ** (-(2.0 * i) / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * inv_freq[None]
    return torch.cos(ang).float().to(device), torch.sin(ang).float().to(device)


def causal_attention(q, k, v):
    """q: [B, H, T, hd], k, v: [B, KV, T, hd] -> [B, H, T, hd]."""
    H, KV = q.shape[1], k.shape[1]
    if H != KV:  # kv head j serves q heads j*rep .. (j+1)*rep-1
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
    if HAVE_SDPA:
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    T, hd = q.shape[2], q.shape[3]
    s = torch.matmul(q, k.transpose(-1, -2)).float() / math.sqrt(hd)
    mask = torch.ones(T, T, dtype=torch.bool, device=q.device).tril()
    s = s.masked_fill(~mask, float("-inf"))
    p = torch.softmax(s, dim=-1).to(v.dtype)
    return torch.matmul(p, v)


class Block(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        D, H, KV, Fh = c["D"], c["H"], c["KV"], c["F"]
        hd = D // H
        self.H, self.KV, self.hd, self.eps = H, KV, hd, c["norm_eps"]
        kw = dict(bias=False, device=device)
        self.attn_norm = nn.Parameter(torch.ones(D, device=device))
        self.wq = nn.Linear(D, H * hd, **kw)
        self.wk = nn.Linear(D, KV * hd, **kw)
        self.wv = nn.Linear(D, KV * hd, **kw)
        self.wo = nn.Linear(H * hd, D, **kw)
        self.ffn_norm = nn.Parameter(torch.ones(D, device=device))
        self.w1 = nn.Linear(D, Fh, **kw)
        self.w2 = nn.Linear(Fh, D, **kw)
        self.w3 = nn.Linear(D, Fh, **kw)

    def forward(self, h, cos, sin):
        B, T, _ = h.shape
        n = rmsnorm(h, self.attn_norm, self.eps)
        q = apply_rope(self.wq(n).view(B, T, self.H, self.hd), cos, sin).transpose(1, 2)
        k = apply_rope(self.wk(n).view(B, T, self.KV, self.hd), cos, sin).transpose(1, 2)
        v = self.wv(n).view(B, T, self.KV, self.hd).transpose(1, 2)
        a = causal_attention(q, k, v).transpose(1, 2).reshape(B, T, self.H * self.hd)
        h = h + self.wo(a)
        n = rmsnorm(h, self.ffn_norm, self.eps)
        return h + self.w2(F.silu(self.w1(n)) * self.w3(n))


class Llama(nn.Module):
    def __init__(self, c, device):
        super().__init__()
        self.c = c
        self.tok_embeddings = nn.Embedding(c["V"], c["D"], device=device)
        self.layers = nn.ModuleList([Block(c, device) for _ in range(c["L"])])
        self.norm = nn.Parameter(torch.ones(c["D"], device=device))
        self.output = None if c["tied"] else nn.Linear(c["D"], c["V"], bias=False, device=device)
        cos, sin = rope_tables(c["max_seq_len"], c["D"] // c["H"], c["rope_theta"], device)
        self.register_buffer("rope_cos", cos, persistent=False)
        self.register_buffer("rope_sin", sin, persistent=False)

    def forward(self, idx, targets):
        h = self.tok_embeddings(idx)  # fp32 residual stream
        for layer in self.layers:
            h = layer(h, self.rope_cos, self.rope_sin)
        h = rmsnorm(h, self.norm, self.c["norm_eps"])
        w = self.tok_embeddings.weight if self.output is None else self.output.weight
        logits = F.linear(h, w)
        return F.cross_entropy(logits.float().view(-1, logits.size(-1)), targets.reshape(-1))

    def logits(self, idx):
        h = self.tok_embeddings(idx)
        for layer in self.layers:
            h = layer(h, self.rope_cos, self.rope_sin)
        h = rmsnorm(h, self.norm, self.c["norm_eps"])
        w = self.tok_embeddings.weight if self.output is None else self.output.weight
        return F.linear(h, w)

    # the 5.2 tensors as views of / copies into the module parameters
    def tensors_5_2(self):
        """OrderedDict name -> list of parameters (one per layer for stacked tensors)."""
        t = OrderedDict()
        t["tok_embeddings"] = [self.tok_embeddings.weight]
        t["attn_norm"] = [l.attn_norm for l in self.layers]
        for n in ("wq", "wk", "wv", "wo"):
            t[n] = [getattr(l, n).weight for l in self.layers]
        t["ffn_norm"] = [l.ffn_norm for l in self.layers]
        for n in ("w1", "w2", "w3"):
            t[n] = [getattr(l, n).weight for l in self.layers]
        t["norm"] = [self.norm]
        if self.output is not None:
            t["output"] = [self.output.weight]
        return t

    @torch.no_grad()
    def load_5_2(self, arrays):
        """arrays: dict name -> float32 numpy array of the 5.2 shape."""
        shapes = param_shapes(self.c)
        for name, plist in self.tensors_5_2().items():
            a = np.asarray(arrays[name], dtype=np.float32).reshape(shapes[name])
            if len(plist) == 1 and name in ("tok_embeddings", "norm", "output"):
                plist[0].copy_(torch.from_numpy(a.copy()))
            else:
                for l, p in enumerate(plist):
                    p.copy_(torch.from_numpy(a[l].copy()))

    def grads_5_2(self):
        out = OrderedDict()
        for name, plist in self.tensors_5_2().items():
            gs = [p.grad.detach().float().cpu().numpy() for p in plist]
            out[name] = gs[0] if name in ("tok_embeddings", "norm", "output") else np.stack(gs)
        return out

    @torch.no_grad()
    def init_weights(self, seed):
        """normal(0, 0.02); wo and w2 normal(0, 0.02/sqrt(2L)); norm weights ones."""
        g = torch.Generator(device=self.norm.device).manual_seed(seed)
        small = 0.02 / math.sqrt(2 * self.c["L"])
        for name, plist in self.tensors_5_2().items():
            for p in plist:
                if name in ("attn_norm", "ffn_norm", "norm"):
                    p.fill_(1.0)
                else:
                    p.normal_(0.0, small if name in ("wo", "w2") else 0.02, generator=g)


# ----------------------------------------------------------------------------- checkpoint

def read_checkpoint(path):
    """Returns (cfg, header dict, params dict name -> numpy, dataloader state words or None)."""
    size, hi, hf = peer_common.read_header(path, CKPT_MAGIC, CKPT_VERSION,
                                           "bad checkpoint %s: magic %d version %d (expected %d version %d)", die)
    c = {"V": int(hi[2]), "D": int(hi[3]), "L": int(hi[4]), "H": int(hi[5]), "KV": int(hi[6]),
         "F": int(hi[7]), "max_seq_len": int(hi[8]), "tied": int(hi[9]),
         "rope_theta": float(hf[32]), "norm_eps": float(hf[33])}
    hdr = {"B": int(hi[11]) * int(hi[12]), "T": int(hi[13]), "step": int(hi[10]), "grad_accum": int(hi[14]),
           "dl_bytes": int(hi[15])}
    if min(c[k] for k in ("V", "D", "L", "H", "KV", "F", "max_seq_len")) <= 0 or c["tied"] not in (0, 1):
        die("bad checkpoint %s: invalid sizes %s" % (path, c), 1)
    validate_cfg(c)
    n = num_params(c)
    expect = 1024 + 3 * 4 * n + hdr["dl_bytes"] + 8
    if size != expect:
        die("bad checkpoint %s: %d bytes, expected %d (header: %d params, %d dataloader bytes)"
            % (path, size, expect, n, hdr["dl_bytes"]), 1)
    params = peer_common.read_params(path, n, param_shapes(c))
    dl = None
    if hdr["dl_bytes"] >= 128:
        raw = np.fromfile(path, dtype="<u8", count=16, offset=1024 + 3 * 4 * n)
        w = [int(x) for x in raw]
        if w[0] == 0x31304C44434D4C4C and w[1] == 1:
            dl = {"B": w[2], "T": w[3], "rank": w[4], "world": w[5], "random_windows": w[6], "seed": w[7],
                  "num_shards": w[8], "num_tokens": w[9], "rng_state": w[10], "next_window": w[11],
                  "batches": w[12]}
        else:
            log("warning: checkpoint %s: dataloader state has no LLMCDL01 magic; ignored" % path)
    return c, hdr, params, dl


# ----------------------------------------------------------------------------- training

# lr_at_step, the step (peer_common.Trainer), build, the loop, the summary and the
# find-max-batch search are peer_common's; here, what is the Llama's.

def make_optimizer(model, a, device):
    """AdamW, decay on the 2-D tensors only."""
    decay, no_decay = [], []
    for p in model.parameters():
        (decay if p.dim() >= 2 else no_decay).append(p)
    return peer_common.adamw(decay, no_decay, a, device)


class Trainer(peer_common.Trainer):
    """Micro-batches (inputs, targets), int64 [B, T]; fwd(inputs, targets) is the loss."""

    def on_device(self, batch):
        x, y = batch
        return self.to_device(x), self.to_device(y)


def build(a, c, device):
    model = Llama(c, device)
    return peer_common.build(a, model, model.load_5_2, make_optimizer, device, log)


def find_max_batch(a, c, device, out):
    """The largest B at T = --seq, on uniform random tokens (peer_common.find_max_batch)."""
    T = a.seq

    def setup():
        model, fwd, opt, compiled, _ = build(a, c, device)

        def batches_for(b):
            data = RandomTokens(b, T, c["V"], a.seed)
            return lambda s: data.next_batch()
        return Trainer(model, fwd, opt, a, device), compiled, batches_for

    return peer_common.find_max_batch(a, device, out, log, setup, [("T", T)], "T=%d" % T)


def train(a, c, device, out):
    model, fwd, opt, compiled, opt_kind = build(a, c, device)
    B, T = a.batch, a.seq
    if a.total_batch % (B * T):
        die("--total-batch %d is not a multiple of B*T = %d" % (a.total_batch, B * T))
    accum = a.total_batch // (B * T)
    if a.train_data:
        loader = ShardLoader(a.train_data, B, T, seed=a.seed, random_windows=True, V=c["V"])
        if a._dl_state is not None:
            st = a._dl_state
            if st["rank"] != 0 or st["world"] != 1 or not st["random_windows"]:
                log("warning: checkpoint dataloader state is rank %d world %d random %d; using seed %d instead"
                    % (st["rank"], st["world"], st["random_windows"], a.seed))
            else:
                if st["B"] != B or st["T"] != T:
                    log("warning: checkpoint loader had B=%d T=%d, this run B=%d T=%d: batches will differ"
                        % (st["B"], st["T"], B, T))
                if st["num_shards"] != len(loader.paths) or st["num_tokens"] != loader.num_tokens:
                    log("warning: checkpoint loader had %d shards / %d tokens, --train-data has %d / %d: "
                        "batches will differ" % (st["num_shards"], st["num_tokens"], len(loader.paths),
                                                 loader.num_tokens))
                loader.set_rng_state(st["rng_state"])
                log("dataloader: rng state from the checkpoint (seed %d, %d batches served)"
                    % (st["seed"], st["batches"]))
    else:
        loader = RandomTokens(B, T, c["V"], a.seed)
        log("no --train-data: uniform random tokens")
    tr = Trainer(model, fwd, opt, a, device)
    npar = num_params(c)
    fpt = flops_per_token(c, T)
    tokens_per_step = B * T * accum
    log("model %s: %s, %d params, B=%d T=%d grad_accum=%d (%d tokens/step), %s, %s%s, AdamW %s, device %s"
        % (a.model, {k: c[k] for k in CFG_KEYS}, npar, B, T, accum, tokens_per_step, a.dtype,
           "compile" if compiled else "eager", " (SDPA)" if HAVE_SDPA else "", opt_kind, device_name(device)))

    def rates(ms):
        tok_per_s = tokens_per_step / (ms / 1e3)
        return [("tok_per_s", tok_per_s)], "%.0f tok/s" % tok_per_s

    run = peer_common.timed_steps(a, tr, lambda step: [loader.next_batch() for _ in range(accum)], out, log, rates)
    tok_s = peer_common.rate(tokens_per_step, run.timed_ms)
    peer_common.log_rates(log, run, "tok", tokens_per_step)
    summ = peer_common.summary(a, run, compiled, opt_kind, device, sizes=[("B", B), ("T", T), ("grad_accum", accum)],
                               rates=[("tok_per_s", tok_s),
                                      ("tok_per_s_median", peer_common.rate_median(tokens_per_step, run.timed_ms))],
                               costs=[("n_params", npar), ("flops_per_token", fpt)], mfu=tok_s * fpt / a.peak_flops)
    return peer_common.finish(summ, out, run.losses)


# ----------------------------------------------------------------------------- self-checks

def selftest_data(a):
    """Prints the first batch of the random-window loader (and of the sequential one)."""
    B = a.batch or 4
    T = a.seq or 8
    for random_windows in (1, 0):
        dl = ShardLoader(a.selftest_data, B, T, seed=a.seed, random_windows=random_windows)
        x, y = dl.next_batch()
        print("dataloader %s: pattern %s, %d shards, %d tokens, B=%d T=%d seed=%d, initial rng state %d"
              % ("random" if random_windows else "sequential", a.selftest_data, len(dl.paths), dl.num_tokens,
                 B, T, a.seed, initial_rng(a.seed, 0)))
        for b in range(B):
            s, off = dl.rows[b]
            print("  row %d: shard %d offset %d inputs %s target_last %d"
                  % (b, s, off, " ".join(str(int(t)) for t in x[b][:16]), int(y[b][-1])))
        if random_windows:
            print("  rng state after the batch: %d" % dl.rng_state)
    return 0


def selftest_model(a, device):
    """Loads LREF files (docs/design.md 5.3), compares logits, loss, gradients and the n_steps AdamW losses."""
    import lref  # noqa: E402
    fails = 0
    bf16 = a.dtype == "bf16"
    tol = 3e-2 if bf16 else 2e-4  # relative to each tensor's max |x|
    for path in a.selftest_model:
        r = lref.read_lref(path)
        rc = r["cfg"]
        c = {k: rc[k] for k in ("V", "D", "L", "H", "KV", "F", "max_seq_len", "tied", "rope_theta", "norm_eps")}
        model = Llama(c, device)
        model.load_5_2(r["params"])
        x = torch.from_numpy(r["inputs"].astype(np.int64)).to(device)
        y = torch.from_numpy(r["targets"].astype(np.int64)).to(device)
        if bf16:
            with torch.autocast(device_type=device.type, dtype=torch.bfloat16):
                logits = model.logits(x)
                loss = F.cross_entropy(logits.float().view(-1, c["V"]), y.reshape(-1))
        else:
            logits = model.logits(x)
            loss = F.cross_entropy(logits.float().view(-1, c["V"]), y.reshape(-1))
        loss.backward()
        worst = 0.0
        items = [("logits", logits.detach().float().cpu().numpy(), r["logits"]),
                 ("loss", np.array([loss.item()]), np.array([r["loss"]]))]
        items += [("grad " + k, g, r["grads"][k]) for k, g in model.grads_5_2().items()]
        for name, got, want in items:
            scale = max(float(np.max(np.abs(want))), 1e-12)
            err = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64)))) / scale
            worst = max(worst, err)
            if err > tol:
                print("  %s: %s rel err %.3e > %.1e FAIL" % (os.path.basename(path), name, err, tol))
        # the training step: n_steps of clipped AdamW on the same batch, constant lr
        xb, yb = r["inputs"].astype(np.int64), r["targets"].astype(np.int64)
        got = peer_common.reference_losses(model, rc, a.dtype, device, make_optimizer, Trainer, (xb, yb))
        want = np.asarray(r["losses"], dtype=np.float64)
        lerr = float(np.max(np.abs(got - want)))
        ltol = 2e-2 if bf16 else 2e-5
        if lerr > ltol:
            print("  %s: AdamW losses %s vs reference %s FAIL" % (os.path.basename(path), got, want))
        ok = worst <= tol and lerr <= ltol
        fails += not ok
        print("selftest-model %s (%s, %s): worst rel err %.3e, %d AdamW step losses max abs err %.3e %s"
              % (path, device.type, a.dtype, worst, rc["n_steps"], lerr, "ok" if ok else "FAIL"))
    print("selftest-model: %s" % ("all passed" if fails == 0 else "%d FAILED" % fails))
    return 0 if fails == 0 else 1


# ----------------------------------------------------------------------------- main

def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("--model", default=None, help="|".join(PRESETS) + " (default tiny, or the checkpoint's)")
    ap.add_argument("--batch", type=int, default=None, help="micro-batch B (default: checkpoint's, else 4)")
    ap.add_argument("--seq", type=int, default=None, help="sequence length T (default: checkpoint's, else 256)")
    ap.add_argument("--total-batch", dest="total_batch", type=int, default=None,
                    help="tokens per optimizer step (default: B*T*checkpoint's grad accumulation, else B*T)")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=5e-4)
    ap.add_argument("--min-lr-frac", dest="min_lr_frac", type=float, default=0.1)
    ap.add_argument("--warmup", type=int, default=0)
    ap.add_argument("--weight-decay", dest="weight_decay", type=float, default=0.1)
    ap.add_argument("--grad-clip", dest="grad_clip", type=float, default=1.0)
    ap.add_argument("--beta1", type=float, default=0.9)
    ap.add_argument("--beta2", type=float, default=0.95)
    ap.add_argument("--adam-eps", dest="adam_eps", type=float, default=1e-8)
    ap.add_argument("--train-data", dest="train_data", default=None, help="shard glob (none: random tokens)")
    ap.add_argument("--seed", type=int, default=1337, help="init and dataloader seed")
    peer_common.add_run_flags(ap, compile_help=None, init_help="train_llama checkpoint", max_batch_limit=4096)
    ap.add_argument("--selftest-data", dest="selftest_data", default=None, metavar="SHARD_GLOB")
    ap.add_argument("--selftest-model", dest="selftest_model", nargs="+", default=None, metavar="LREF")
    a = ap.parse_args()

    if a.selftest_data:
        return selftest_data(a)

    device = peer_common.setup_device(a, die)

    if a.selftest_model:
        return selftest_model(a, device)

    a._init_params, a._dl_state = None, None
    ck_hdr = None
    if a.init_from:
        c, ck_hdr, params, dl = read_checkpoint(a.init_from)
        if a.model:
            pc = preset_cfg(a.model)
            diff = [k for k in CFG_KEYS if k != "rope_theta" and pc[k] != c[k]]
            if diff:
                die("--model %s does not match the checkpoint in %s" % (a.model, ", ".join(diff)))
        else:
            a.model = next((n for n in PRESETS if all(
                preset_cfg(n)[k] == c[k] for k in CFG_KEYS if k != "rope_theta")), "checkpoint")
        a._init_params, a._dl_state = params, dl
        if ck_hdr["step"] != 0:
            log("warning: checkpoint is at step %d; only its params and data position are used "
                "(AdamW state and the lr schedule start fresh)" % ck_hdr["step"])
        log("init from %s: step %d, B=%d T=%d grad_accum=%d" % (a.init_from, ck_hdr["step"], ck_hdr["B"],
                                                               ck_hdr["T"], ck_hdr["grad_accum"]))
    else:
        a.model = a.model or "tiny"
        c = preset_cfg(a.model)
    validate_cfg(c)
    # an imported checkpoint (scripts/import_hf.py) records no batch: B = T = 0
    if a.batch is None:
        a.batch = ck_hdr["B"] if ck_hdr and ck_hdr["B"] > 0 else 4
    if a.seq is None:
        a.seq = ck_hdr["T"] if ck_hdr and ck_hdr["T"] > 0 else min(256, c["max_seq_len"])
    if a.total_batch is None:
        accum = ck_hdr["grad_accum"] if ck_hdr and ck_hdr["grad_accum"] > 0 else 1
        a.total_batch = a.batch * a.seq * accum
    if a.batch < 1 or a.seq < 1 or a.seq > c["max_seq_len"]:
        die("need B >= 1 and 1 <= T <= max_seq_len = %d (B=%d T=%d)" % (c["max_seq_len"], a.batch, a.seq))
    if a.steps < 1:
        die("--steps must be >= 1")

    attn = dict(B=a.batch, H=c["H"], KV=c["KV"], T=a.seq, hd=c["D"] // c["H"], causal=True)
    return peer_common.run(a, c, device, find_max_batch, train, attn, log, die)


if __name__ == "__main__":
    sys.exit(main())
