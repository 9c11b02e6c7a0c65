"""What the two PyTorch peers share: scripts/pytorch_llama.py (train_llama's) and
scripts/pytorch_dit.py (train_dit's) are the same kind of program around different models,
so the logic that does not depend on the model is written once, here, and a fix to it (the
lr schedule, the timing of a step, the OOM search, a JSON field) reaches both peers.
What depends on the model stays in its script: presets and config checks, FLOPs per
token, the modules and their parameter layout, the data, the checkpoint's layout, the
checks against the reference files, and the command line's model and data flags.

  messages(prog)          (die, log): "PROG: error: MSG" (and exit) / "PROG: MSG" on stderr
  splitmix64, rand_below  the splitmix64 stream and its unbiased draw in [0, n): one
                          generator behind llmc/io/dataloader.h and llmc/io/video_data.h
  lr_at_step              llmc/train/schedule.h's warmup + cosine schedule, in float32 as the C code
  rmsnorm, apply_rope     RMSNorm in fp32; RoPE on the adjacent pairs from cos/sin tables
  adamw                   torch.optim.AdamW on a decayed and an undecayed group (fused on CUDA)
  Trainer                 one optimizer step over micro-batches (a subclass puts them on the device)
  build                   the weights (--init-from or seeded init), torch.compile, AdamW
  read_header, read_params  a checkpoint's 1024-byte header, then its float32 parameters
  reference_losses        the clipped-AdamW steps a reference file (LREF, DREF) records
  timed_steps, summary, finish   the training loop, its JSON lines, the summary line, the exit status
  find_max_batch          the largest micro-batch: doubling, then bisection, until CUDA OOM
  add_run_flags, setup_device, run   the common flags, the device, --out and the dispatch
  sdpa_setup              --sdpa-backend: which of PyTorch's attention kernels runs, checked
                          on the step's attention shape before the first step (below)
  mem_stats, device_name, is_oom, HAVE_SDPA, H100_BF16_PEAK, MASK64

--sdpa-backend auto|flash|cudnn|efficient|math. auto is PyTorch's own choice; a name runs the
steps under torch.nn.attention.sdpa_kernel with that one backend, so PyTorch raises rather
than falls back when it cannot run. Which backend ran is found before the first step by one
forward and backward of F.scaled_dot_product_attention on the step's q, k, v (same batch,
heads, length, head dim, dtype, layout, causality, the same backend flags), read from the
autograd node it leaves (ScaledDotProduct{Cudnn,Flash,Efficient}AttentionBackward0; the
math backend is a composite of matmuls and leaves no node of its own): the node is what the
dispatcher actually chose, where torch._fused_sdp_choice would be a second private
prediction of it. A backend that cannot run there ends the peer with exit status 3 and
PyTorch's reasons. Limits: the probe is one call outside torch.compile; a compiled model
makes the same choice when it is traced under the same flags (the steps run inside them),
but the probe cannot look inside the compiled graph. The node names are PyTorch
internals: an unknown one is recorded as is. On the CPU the named fused backends are
refused (the comparisons they serve are CUDA ones); where torch has no SDPA (before 2.0)
auto and math run the explicit softmax, and the record says so.

Every function takes what differs between the peers as arguments (the program name of
the messages, the model's batches and parameter groups, the JSON fields that only one
peer has), so that each peer's output stays what it was, field for field. Needs torch
and numpy only.
"""

import argparse
import contextlib
import gc
import json
import math
import os
import statistics
import sys
import time
import warnings
from collections import OrderedDict
from types import SimpleNamespace

import numpy as np
import torch
import torch.nn.functional as F

H100_BF16_PEAK = 989e12  # the default --peak-flops: H100 SXM bf16 dense
MASK64 = (1 << 64) - 1
HAVE_SDPA = hasattr(F, "scaled_dot_product_attention")
SDPA_CHOICES = ("auto", "flash", "cudnn", "efficient", "math")
SDPA_MEMBER = {"flash": "FLASH_ATTENTION", "cudnn": "CUDNN_ATTENTION", "efficient": "EFFICIENT_ATTENTION", "math": "MATH"}


def messages(prog):
    """(die, log) of the peer `prog`: die(msg, code=2) prints "prog: error: msg" and exits;
    log(msg) prints "prog: msg". Both on stderr."""

    def die(msg, code=2):
        print("%s: error: %s" % (prog, msg), file=sys.stderr)
        sys.exit(code)

    def log(msg):
        print("%s: %s" % (prog, msg), file=sys.stderr, flush=True)

    return die, log


# ----------------------------------------------------------------------------- random numbers

def splitmix64(state):
    """(new state, value), as dataloader_splitmix64_ and clipgen_splitmix64_."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def rand_below(state, n):
    """(new state, uniform in [0, n)), unbiased by rejection: dataloader_rand_below_, clipgen_below_."""
    threshold = ((1 << 64) - n) % n  # (0 - n) % n in uint64 = 2^64 mod n
    while True:
        state, r = splitmix64(state)
        if r >= threshold:
            return state, r % n


def lr_at_step(step, total, warmup, lr, min_lr_frac):
    """llmc/train/schedule.h lr_at_step (step from 1), in float32 like the C code."""
    f = np.float32
    min_lr = f(lr) * f(min_lr_frac)
    if step <= warmup:
        return float(f(lr) * f(step) / f(warmup))
    if total <= warmup:
        return float(f(lr))
    progress = f(step - warmup) / f(total - warmup)
    return float(min_lr + f(0.5) * (f(lr) - min_lr) * (f(1.0) + f(math.cos(f(3.14159265358979) * progress))))


# ----------------------------------------------------------------------------- model pieces

def rmsnorm(x, w, eps):
    """x / sqrt(mean(x^2) + eps) * w, in fp32 (whatever autocast does around it)."""
    x = x.float()
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + eps) * w.float()


def apply_rope(x, cos, sin):
    """x: [B, T, nh, hd]; rotates the adjacent pairs (x[2i], x[2i+1]) of token t by the angle
    whose cos and sin are cos[t, i], sin[t, i] (the tables say which angle: 1-D positions for
    the Llama, the time/row/column split for the DiT). In fp32, returned in x's dtype."""
    B, T, nh, hd = x.shape
    xf = x.float().reshape(B, T, nh, hd // 2, 2)
    x0, x1 = xf[..., 0], xf[..., 1]
    c = cos[:T].view(1, T, 1, hd // 2)
    s = sin[:T].view(1, T, 1, hd // 2)
    y = torch.stack([x0 * c - x1 * s, x0 * s + x1 * c], dim=-1)
    return y.reshape(B, T, nh, hd).type_as(x)


# ----------------------------------------------------------------------------- device

def setup_device(a, die):
    """torch.device of --device (default cuda when available); --dtype defaults to bf16 on
    CUDA, fp32 elsewhere; --threads; TF32 matmuls on CUDA."""
    dev = a.device or ("cuda" if torch.cuda.is_available() else "cpu")
    if dev.startswith("cuda") and not torch.cuda.is_available():
        die("--device cuda but torch.cuda.is_available() is False")
    device = torch.device(dev)
    if a.dtype is None:
        a.dtype = "bf16" if device.type == "cuda" else "fp32"
    if a.dtype not in ("bf16", "fp32"):
        die("--dtype must be bf16 or fp32")
    if a.threads > 0:
        torch.set_num_threads(a.threads)
    if device.type == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
        torch.backends.cudnn.allow_tf32 = True
    return device


def mem_stats(device):
    """(peak allocated, peak reserved) bytes on CUDA; (None, None) elsewhere."""
    if device.type != "cuda":
        return None, None
    return int(torch.cuda.max_memory_allocated(device)), int(torch.cuda.max_memory_reserved(device))


def device_name(device):
    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return "cpu (%d threads)" % torch.get_num_threads()


def is_oom(e):
    """Whether an exception is CUDA running out of memory (its type, or its message)."""
    oom_t = getattr(torch.cuda, "OutOfMemoryError", None)
    if oom_t is not None and isinstance(e, oom_t):
        return True
    return "out of memory" in str(e).lower()


# ----------------------------------------------------------------------------- training

def adamw(decay, no_decay, a, device):
    """(torch.optim.AdamW, "fused" | "default"): weight decay --weight-decay on the parameters
    `decay`, none on `no_decay` (which ones is the model's rule); --lr --beta1 --beta2 --adam-eps."""
    groups = [{"params": decay, "weight_decay": a.weight_decay}, {"params": no_decay, "weight_decay": 0.0}]
    kw = dict(lr=a.lr, betas=(a.beta1, a.beta2), eps=a.adam_eps)
    if device.type == "cuda":
        try:
            return torch.optim.AdamW(groups, fused=True, **kw), "fused"
        except (TypeError, RuntimeError, ValueError):
            pass
    return torch.optim.AdamW(groups, **kw), "default"


class Trainer:
    """One optimizer step over micro-batches: each one's loss fwd(*args) / n backward (under
    bf16 autocast when a.dtype is bf16), global-norm clipping when a.grad_clip > 0, the
    optimizer step. A subclass defines on_device(batch) -> fwd's arguments on the device."""

    def __init__(self, model, fwd, opt, a, device):
        self.model, self.fwd, self.opt, self.a, self.device = model, fwd, opt, a, device
        self.params = list(model.parameters())
        self.cuda = device.type == "cuda"
        self.use_bf16 = a.dtype == "bf16"
        sd = getattr(a, "_sdpa", None)
        self.sdpa_ctx = sd.ctx if sd is not None else contextlib.nullcontext

    def sync(self):
        if self.cuda:
            torch.cuda.synchronize()

    def to_device(self, x, dtype=None):
        """A numpy array (through pinned memory on CUDA) or a tensor, on the device, in dtype."""
        if isinstance(x, torch.Tensor):
            return x.to(self.device) if dtype is None else x.to(self.device, dtype)
        t = torch.from_numpy(np.ascontiguousarray(x))
        if dtype is not None:
            t = t.to(dtype)
        return t.pin_memory().to(self.device, non_blocking=True) if self.cuda else t

    def on_device(self, batch):
        raise NotImplementedError

    def step(self, batches, lr):
        """One optimizer step over the micro-batches at this lr. Returns (mean loss, grad norm)."""
        for g in self.opt.param_groups:
            g["lr"] = lr
        n = len(batches)
        loss_sum = None
        for batch in batches:
            args = self.on_device(batch)
            with self.sdpa_ctx():
                if self.use_bf16:
                    with torch.autocast(device_type=self.device.type, dtype=torch.bfloat16):
                        loss = self.fwd(*args)
                else:
                    loss = self.fwd(*args)
                (loss / n).backward()
            ld = loss.detach().float()
            loss_sum = ld if loss_sum is None else loss_sum + ld
        if self.a.grad_clip > 0:
            norm = torch.nn.utils.clip_grad_norm_(self.params, self.a.grad_clip)
        else:
            norm = torch.sqrt(sum((p.grad.float() ** 2).sum() for p in self.params if p.grad is not None))
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        return float(loss_sum / n), float(norm)


def build(a, model, load, make_optimizer, device, log):
    """(model, fwd, opt, compiled, opt_kind): the weights from --init-from (load(a._init_params))
    or model.init_weights(a.seed); fwd = torch.compile(model) with --compile 1 (eager, with a
    warning, where torch has none); make_optimizer(model, a, device) -> (opt, kind)."""
    if a._init_params is not None:
        load(a._init_params)
    else:
        model.init_weights(a.seed)
    fwd, compiled = model, False
    if a.compile:
        if hasattr(torch, "compile"):
            fwd, compiled = torch.compile(model), True
        else:
            log("warning: torch %s has no torch.compile; running eager" % torch.__version__)
    opt, opt_kind = make_optimizer(model, a, device)
    return model, fwd, opt, compiled, opt_kind


def reference_losses(model, rc, dtype, device, make_optimizer, trainer, batch):
    """The losses (float64 array) of a reference file's rc["n_steps"] steps of clipped AdamW at
    constant lr on one batch, with the hyperparameters of the file's config rc; make_optimizer
    and trainer are the peer's."""
    hp = argparse.Namespace(lr=rc["lr"], beta1=rc["beta1"], beta2=rc["beta2"], adam_eps=rc["adam_eps"],
                            weight_decay=rc["weight_decay"], grad_clip=rc["grad_clip"], dtype=dtype)
    model.zero_grad(set_to_none=True)
    opt, _ = make_optimizer(model, hp, device)
    tr = trainer(model, model, opt, hp, device)
    return np.array([tr.step([batch], rc["lr"])[0] for _ in range(rc["n_steps"])])


def timed_steps(a, tr, batches_of, out, log, rates):
    """Steps 1..--steps: lr_at_step, batches_of(step) (host work, outside the timing), tr.step
    between two syncs. A JSON line per step to out: step, loss, lr, grad_norm, ms, the fields
    of rates(ms) -> (fields, text), the peak memory; a log line on step 1, the last and every
    --print-every (text after the ms); stops after a non-finite loss. With --bench the first
    --bench-warmup steps (at most steps - 1) are untimed. Returns a namespace: warm, timed_ms,
    losses, norms, wall (seconds of the whole loop)."""
    warm = min(a.bench_warmup, max(a.steps - 1, 0)) if a.bench else 0
    timed_ms, losses, norms = [], [], []
    t_start = time.perf_counter()
    for step in range(1, a.steps + 1):
        lr = lr_at_step(step, a.steps, a.warmup, a.lr, a.min_lr_frac)
        batches = batches_of(step)
        tr.sync()
        t0 = time.perf_counter()
        loss, norm = tr.step(batches, lr)
        tr.sync()
        ms = (time.perf_counter() - t0) * 1e3
        if step > warm:
            timed_ms.append(ms)
        losses.append(loss)
        norms.append(norm)
        alloc, res = mem_stats(tr.device)
        fields, text = rates(ms)
        rec = OrderedDict([("step", step), ("loss", loss), ("lr", lr), ("grad_norm", norm), ("ms", ms)])
        rec.update(fields)
        rec.update([("peak_mem_allocated", alloc), ("peak_mem_reserved", res)])
        if out:
            out.write(json.dumps(rec) + "\n")
            out.flush()
        if step % a.print_every == 0 or step == 1 or step == a.steps:
            log("step %d/%d: loss %.6f lr %.3e norm %.4f %.1f ms %s" % (step, a.steps, loss, lr, norm, ms, text))
        if not math.isfinite(loss):
            log("loss is not finite at step %d; stopping" % step)
            break
    wall = time.perf_counter() - t_start
    return SimpleNamespace(warm=warm, timed_ms=timed_ms, losses=losses, norms=norms, wall=wall)


def rate(per_step, timed_ms):
    """Units (tokens, clips) per second over the timed steps, per_step of them a step; 0 if none."""
    return per_step * len(timed_ms) / (sum(timed_ms) / 1e3) if timed_ms else 0.0


def rate_median(per_step, timed_ms):
    """Units per second of the median timed step: one slow step (a collection, a clock
    change) moves the mean but not this; 0 if none."""
    return per_step / (statistics.median(timed_ms) / 1e3) if timed_ms else 0.0


def log_rates(log, run, unit, per_step):
    """One line beside the summary: the mean and the median step, each with its rate, and
    the SDPA backend the summary records."""
    t = run.timed_ms
    if not t:
        return
    log("timed %d steps: mean %.2f ms (%.0f %s/s), median %.2f ms (%.0f %s/s)" % (
        len(t), sum(t) / len(t), rate(per_step, t), unit, statistics.median(t), rate_median(per_step, t), unit))


def summary(a, run, compiled, opt_kind, device, sizes, rates, costs, mfu, extra=()):
    """The summary line's fields, in order: summary, impl, model, compile, dtype, the peer's
    sizes, steps, timed_steps, warmup_steps_untimed, its rates, ms_per_step, its costs
    (n_params, flops_per_token, ...), peak_flops, mfu, peak memory, first and final loss,
    wall_s, device, torch, sdpa, optimizer, init_from, then its extra fields."""
    alloc, res = mem_stats(device)
    t, losses = run.timed_ms, run.losses
    s = [("summary", True), ("impl", "pytorch"), ("model", a.model), ("compile", int(compiled)), ("dtype", a.dtype)]
    s += list(sizes)
    s += [("steps", len(losses)), ("timed_steps", len(t)), ("warmup_steps_untimed", run.warm)]
    s += list(rates)
    s += [("ms_per_step", (sum(t) / len(t)) if t else None), ("ms_per_step_median", statistics.median(t) if t else None)]
    s += list(costs)
    s += [("peak_flops", a.peak_flops), ("mfu", mfu), ("peak_mem_allocated", alloc), ("peak_mem_reserved", res),
          ("first_loss", losses[0] if losses else None), ("final_loss", losses[-1] if losses else None),
          ("wall_s", run.wall), ("device", device_name(device)), ("torch", torch.__version__),
          ("sdpa", HAVE_SDPA)]
    sd = getattr(a, "_sdpa", None)
    s += [("sdpa_backend_requested", sd.requested if sd else None), ("sdpa_backend", sd.ran if sd else None),
          ("sdpa_probe", sd.probe if sd else None)]
    s += [("optimizer", opt_kind), ("init_from", a.init_from)]
    s += list(extra)
    return OrderedDict(s)


def finish(summ, out, losses):
    """Writes the summary line to out and stdout; 0 when the last loss is finite, else 1."""
    if out:
        out.write(json.dumps(summ) + "\n")
    print(json.dumps(summ), flush=True)
    return 0 if losses and math.isfinite(losses[-1]) else 1


def find_max_batch(a, device, out, log, setup, sizes, label):
    """The largest micro-batch B whose two training steps fit: B = 1, 2, 4, ... up to
    --max-batch-limit until one runs out of CUDA memory, then bisection between the last that
    fit and the first that did not. setup() -> (trainer, compiled, batches_for), after the
    CPU note; batches_for(b) -> get, get(s) the micro-batch of step s = 1, 2 at B = b. One
    JSON line (stdout and out): model, sizes, max_batch, first_oom, ..., every B tried with
    its peak memory; label (say "T=256") goes in each B's log line."""
    if device.type != "cuda":
        log("--find-max-batch on the CPU: nothing runs out of memory; capped at --max-batch-limit %d"
            % a.max_batch_limit)
    tr, compiled, batches_for = setup()
    tried = []

    def fits(b):
        ok = True
        try:
            get = batches_for(b)
            for s in (1, 2):
                tr.step([get(s)], a.lr)
            tr.sync()
        except Exception as e:  # noqa: BLE001 (OOM shows up as several exception types)
            if not is_oom(e):
                raise
            ok = False
        # recover outside the except block, so the traceback's frames are gone
        tr.opt.zero_grad(set_to_none=True)
        gc.collect()
        if device.type == "cuda":
            torch.cuda.empty_cache()
        alloc, res = mem_stats(device)
        tried.append({"batch": b, "fits": ok, "peak_mem_allocated": alloc, "peak_mem_reserved": res})
        log("find-max-batch: B=%d %s %s (peak allocated %s)" % (b, label, "fits" if ok else "OOM", alloc))
        if device.type == "cuda":
            torch.cuda.reset_peak_memory_stats(device)
        return ok

    lo, hi, b = 0, None, 1  # lo fits (0 = nothing yet), hi does not
    while b <= a.max_batch_limit:
        if fits(b):
            lo, b = b, b * 2
        else:
            hi = b
            break
    if hi is not None:
        while hi - lo > 1:
            mid = (lo + hi) // 2
            if fits(mid):
                lo = mid
            else:
                hi = mid
    res = OrderedDict([("find_max_batch", True), ("model", a.model)] + list(sizes) + [
        ("max_batch", lo), ("first_oom", hi), ("compile", int(compiled)), ("dtype", a.dtype),
        ("device", device_name(device)), ("torch", torch.__version__), ("tried", tried)])
    print(json.dumps(res), flush=True)
    if out:
        out.write(json.dumps(res) + "\n")
    return 0


# ----------------------------------------------------------------------------- checkpoints

def read_header(path, magic, version, bad_magic, die):
    """(file size, header as int32 [256], the same bytes as float32 [256]) of a checkpoint whose
    words 0 and 1 must be magic and version; otherwise die(bad_magic % (path, word 0, word 1,
    magic, version))."""
    try:
        size = os.path.getsize(path)
        with open(path, "rb") as f:
            hb = f.read(1024)
    except OSError as e:
        die("cannot read checkpoint %s: %s" % (path, e), 1)
    if len(hb) < 1024:
        die("bad checkpoint %s: %d bytes, smaller than the 1024-byte header" % (path, size), 1)
    hi, hf = np.frombuffer(hb, dtype="<i4"), np.frombuffer(hb, dtype="<f4")
    if int(hi[0]) != magic or int(hi[1]) != version:
        die(bad_magic % (path, hi[0], hi[1], magic, version), 1)
    return size, hi, hf


def read_params(path, n, shapes):
    """The n float32 parameters after the header, as OrderedDict name -> array of shapes[name]."""
    flat = np.fromfile(path, dtype="<f4", count=n, offset=1024)
    params, off = OrderedDict(), 0
    for name, shp in shapes.items():
        k = int(np.prod(shp))
        params[name] = flat[off:off + k].reshape(shp)
        off += k
    return params


# ----------------------------------------------------------------------------- command line

def add_run_flags(ap, compile_help, init_help, max_batch_limit):
    """--device --dtype --compile --init-from --out --bench --bench-warmup --peak-flops
    --find-max-batch --max-batch-limit --print-every --threads, in this order."""
    ap.add_argument("--device", default=None, help="cuda|cpu (default cuda when available)")
    ap.add_argument("--dtype", default=None, help="bf16|fp32 (default bf16 autocast on cuda, fp32 on cpu)")
    ap.add_argument("--compile", type=int, default=0, help=compile_help)
    ap.add_argument("--init-from", dest="init_from", default=None, help=init_help)
    ap.add_argument("--out", default=None, help="metrics JSONL")
    ap.add_argument("--bench", action="store_true", help="time only the steps after --bench-warmup")
    ap.add_argument("--bench-warmup", dest="bench_warmup", type=int, default=5)
    ap.add_argument("--peak-flops", dest="peak_flops", type=float, default=H100_BF16_PEAK)
    ap.add_argument("--find-max-batch", dest="find_max_batch", action="store_true")
    ap.add_argument("--max-batch-limit", dest="max_batch_limit", type=int, default=max_batch_limit)
    ap.add_argument("--print-every", dest="print_every", type=int, default=10)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0 = torch's default)")
    ap.add_argument("--sdpa-backend", dest="sdpa_backend", default="auto", choices=SDPA_CHOICES,
                    help="PyTorch's attention kernel: auto (PyTorch's choice) or one by name; the summary "
                         "records which ran (this module's docstring)")


def run(a, c, device, find_max_batch, train, attn=None, log=None, die=None):
    """--sdpa-backend checked on the attention shape attn (sdpa_setup), then opens --out and
    runs find_max_batch or train(a, c, device, out); their exit status."""
    if attn is not None:
        a._sdpa = sdpa_setup(a, device, attn, log, die)
    out = open(a.out, "w") if a.out else None
    try:
        if a.find_max_batch:
            return find_max_batch(a, c, device, out)
        return train(a, c, device, out)
    finally:
        if out:
            out.close()


# ----------------------------------------------------------------------------- SDPA backend

def _sdpa_name(node):
    """Our name of the backend whose autograd node this is (the module's docstring)."""
    low = (node or "").lower()
    for key in ("cudnn", "flash", "efficient"):
        if key in low and "attention" in low:
            return key + ("_cpu" if "cpu" in low else "")
    return "math"


def sdpa_setup(a, device, attn, log, die):
    """The SDPA backend of --sdpa-backend for attention of shape attn (B, H, KV, T, hd,
    causal): a namespace requested, ran, probe (how ran was found), ctx (the context the
    steps run in). Dies with status 3 where the backend cannot run that attention."""
    want = a.sdpa_backend
    ns = SimpleNamespace(requested=want, ran=None, probe=None, ctx=contextlib.nullcontext)
    if want in ("flash", "cudnn", "efficient") and device.type != "cuda":
        die("--sdpa-backend %s is a CUDA kernel and the device is %s: here only auto or math" % (want, device.type), 3)
    if not HAVE_SDPA:
        if want not in ("auto", "math"):
            die("--sdpa-backend %s: torch %s has no F.scaled_dot_product_attention" % (want, torch.__version__), 3)
        ns.ran = "math"
        ns.probe = "torch %s has no SDPA: the peer's explicit softmax, the math backend's computation" % torch.__version__
        log("sdpa: requested %s, ran %s (%s)" % (want, ns.ran, ns.probe))
        return ns
    if want != "auto":
        try:
            from torch.nn.attention import SDPBackend, sdpa_kernel
        except ImportError:
            die("--sdpa-backend %s needs torch.nn.attention.sdpa_kernel, which torch %s lacks (auto runs)"
                % (want, torch.__version__), 3)
        member = getattr(SDPBackend, SDPA_MEMBER[want], None)
        if member is None:
            die("--sdpa-backend %s: torch %s has no SDPBackend.%s" % (want, torch.__version__, SDPA_MEMBER[want]), 3)
        ns.ctx = lambda: sdpa_kernel([member])
    B, H, KV, T, hd, causal = (attn[k] for k in ("B", "H", "KV", "T", "hd", "causal"))
    dt = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    shape = "B=%d H=%d KV=%d T=%d hd=%d %s %s" % (B, H, KV, T, hd, "causal" if causal else "full", a.dtype)
    # the layouts of the peers' calls: heads transposed out of [B, T, heads, hd], the kv heads
    # repeated to H (a contiguous copy) when there are fewer
    q = torch.randn(B, T, H, hd, device=device, dtype=dt).transpose(1, 2).requires_grad_()
    k = torch.randn(B, T, KV, hd, device=device, dtype=dt).transpose(1, 2).requires_grad_()
    v = torch.randn(B, T, KV, hd, device=device, dtype=dt).transpose(1, 2).requires_grad_()
    kk, vv = (k.repeat_interleave(H // KV, dim=1), v.repeat_interleave(H // KV, dim=1)) if H != KV else (k, v)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            with ns.ctx():
                o = F.scaled_dot_product_attention(q, kk, vv, is_causal=causal)
                node = o.grad_fn.name() if o.grad_fn is not None else ""
                o.float().sum().backward()
            if device.type == "cuda":
                torch.cuda.synchronize(device)
        except RuntimeError as e:
            why = "; ".join(str(w.message).strip().replace("\n", " ") for w in caught)
            die("--sdpa-backend %s cannot run this attention (%s): %s%s" % (
                want, shape, str(e).strip().splitlines()[0], " (PyTorch: %s)" % why if why else ""), 3)
    ns.ran = _sdpa_name(node)
    ns.probe = "autograd node %s of one SDPA forward on %s" % (node or "(none)", shape)
    if want != "auto" and ns.ran != want:
        die("--sdpa-backend %s: PyTorch ran %s instead (%s)" % (want, ns.ran, ns.probe), 3)
    del q, k, v, kk, vv, o
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats(device)
    log("sdpa: requested %s, ran %s (%s)" % (want, ns.ran, ns.probe))
    return ns
