#!/usr/bin/env python3
"""Writes a train_llama checkpoint from a Hugging Face transformers Llama directory.

    python3 scripts/import_hf.py HF_DIR OUT_CHECKPOINT [--max-seq-len N]

HF_DIR: a LlamaForCausalLM directory (config.json and model.safetensors, or the shards of
model.safetensors.index.json), as scripts/export_hf.py or save_pretrained writes it; float32,
float16 or bfloat16 weights, all stored as float32. OUT_CHECKPOINT: a version-2 checkpoint
(docs/formats.md) at step 0 with zero AdamW moments and no data position, checksummed, which
train_llama starts from with --init-from (the command is printed at the end). Interpreter:
`bash scripts/ensure_hf_deps.sh`. docs/hf.md is the user's guide.

The tensor names and the RoPE row permutation (undone here) are export_hf.py's, read in the
other direction; the parameters of an exported checkpoint come back bit for bit.

--max-seq-len N: the checkpoint's max_seq_len instead of max_position_embeddings (which is
131072 for some published models): RoPE on positions below N is the same either way.

A model this one cannot compute the same way is an error naming every reason: a model
type other than llama, an activation other than silu, biases, rope_scaling, a head_dim that
is not hidden_size / num_attention_heads, quantized weights.
"""

import argparse
import contextlib
import json
import os
import sys

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dev", "ref"))  # lref.py, dref.py: the layouts
from export_hf import (HASH_INIT, HF_FLOATS, HF_SIZES, ConversionError, ckpt_hash,  # noqa: E402
                       ckpt_hash_zeros, float32_json, hf_layout, rope_from_hf)
from lref import num_params, param_shapes  # noqa: E402
from pytorch_llama import CKPT_MAGIC, CKPT_VERSION  # noqa: E402

# LlamaConfig's defaults for the keys a config.json may leave out (transformers 4.45)
HF_DEFAULTS = {"hidden_act": "silu", "rms_norm_eps": 1e-6, "rope_theta": 10000.0, "tie_word_embeddings": False,
               "max_position_embeddings": 2048, "attention_bias": False, "mlp_bias": False, "rope_scaling": None}


def model_config(hf, where, max_seq_len=None):
    """Our config dict (V D L H KV F max_seq_len tied rope_theta norm_eps) from a config.json
    dict; raises with every reason when this model cannot compute what transformers would."""
    def g(key):
        return hf.get(key, HF_DEFAULTS.get(key))

    why = []
    if hf.get("model_type") != "llama":
        why.append("model_type is %r; only 'llama' is supported" % hf.get("model_type"))
    archs = hf.get("architectures") or ["LlamaForCausalLM"]
    if "LlamaForCausalLM" not in archs:
        why.append("architectures is %s, not LlamaForCausalLM" % archs)
    if g("hidden_act") != "silu":
        why.append("hidden_act is %r; this model's FFN is SwiGLU with silu" % g("hidden_act"))
    for k in ("attention_bias", "mlp_bias"):
        if g(k):
            why.append("%s is true; this model has no biases" % k)
    rs = g("rope_scaling")
    if rs and (rs.get("rope_type") or rs.get("type")) != "default":
        why.append("rope_scaling is %s; this model has plain RoPE (rope_theta only)" % json.dumps(rs))
    if hf.get("quantization_config"):
        why.append("the weights are quantized (quantization_config); this model trains float32 weights")
    missing = [hf_key for ours, hf_key in HF_SIZES if hf_key not in hf and ours not in ("KV", "max_seq_len")]
    if missing:
        why.append("config.json lacks %s" % ", ".join(missing))
    else:
        c = {ours: int(g(hf_key)) for ours, hf_key in HF_SIZES if ours not in ("KV", "max_seq_len")}
        c["KV"] = int(hf.get("num_key_value_heads") or c["H"])  # absent or null: one kv head per head
        c["max_seq_len"] = int(max_seq_len or g("max_position_embeddings"))
        if min(c.values()) <= 0:
            why.append("sizes must be positive: %s" % c)
        elif c["D"] % c["H"] or (c["D"] // c["H"]) % 2 or c["H"] % c["KV"]:
            why.append("hidden_size %d, num_attention_heads %d, num_key_value_heads %d: this model needs an even "
                       "head dim hidden_size/num_attention_heads and heads a multiple of kv heads" % (c["D"], c["H"], c["KV"]))
        elif hf.get("head_dim") not in (None, c["D"] // c["H"]):
            why.append("head_dim is %d; this model's is hidden_size / num_attention_heads = %d"
                       % (hf["head_dim"], c["D"] // c["H"]))
    if why:
        raise ConversionError("%s describes a model train_llama cannot express:\n  - %s" % (where, "\n  - ".join(why)))
    c["tied"] = int(bool(g("tie_word_embeddings")))
    for ours, hf_key in HF_FLOATS:
        c[ours] = float(np.float32(g(hf_key)))  # the checkpoint stores float32
    return c


def open_weights(hf_dir, stack):
    """{key: open safetensors file holding it}, for model.safetensors or a sharded index."""
    from safetensors import safe_open  # the pinned package of scripts/ensure_hf_deps.sh

    single = os.path.join(hf_dir, "model.safetensors")
    index = os.path.join(hf_dir, "model.safetensors.index.json")
    if os.path.isfile(single):
        files = [single]
    elif os.path.isfile(index):
        with open(index) as f:
            files = [os.path.join(hf_dir, n) for n in sorted(set(json.load(f)["weight_map"].values()))]
    elif any(n.startswith("pytorch_model") for n in os.listdir(hf_dir)):
        raise ConversionError("%s has PyTorch pickle weights (pytorch_model*.bin) only; this script reads safetensors: "
                              "load the model with transformers and save_pretrained it (safe_serialization, the "
                              "default) first" % hf_dir)
    else:
        raise ConversionError("%s has no model.safetensors or model.safetensors.index.json" % hf_dir)
    where = {}
    for path in files:
        try:
            sf = stack.enter_context(safe_open(path, framework="pt"))
        except Exception as e:  # noqa: BLE001 (safetensors raises its own error types)
            raise ConversionError("cannot read %s: %s" % (path, e))
        for k in sf.keys():
            where[k] = sf
    return where


def load_params(c, hf_dir):
    """The checkpoint's float32 parameter block (docs/design.md 5.2 order) from the safetensors files."""
    shapes = param_shapes(c)
    flat = np.empty(num_params(c), dtype=np.float32)
    views, off = {}, 0
    for name, shp in shapes.items():
        k = int(np.prod(shp))
        views[name] = flat[off:off + k].reshape(shp)
        off += k
    layout = list(hf_layout(c))
    with contextlib.ExitStack() as stack:
        where = open_weights(hf_dir, stack)
        missing = [key for _, _, key, _ in layout if key not in where]
        if missing:
            raise ConversionError("%s lacks %d tensors of the model config.json describes: %s"
                                  % (hf_dir, len(missing), ", ".join(missing[:6]) + (" ..." if len(missing) > 6 else "")))
        # old exports carry RoPE's inverse frequencies, computed again from rope_theta here
        extra = sorted(k for k in set(where) - {key for _, _, key, _ in layout} if not k.endswith("rotary_emb.inv_freq"))
        if c["tied"] and "lm_head.weight" in extra:
            extra.remove("lm_head.weight")  # transformers ties it to the embedding on load, and so do we
            print("import_hf: note: tie_word_embeddings is true: lm_head.weight is ignored, as transformers does",
                  file=sys.stderr)
        if extra:
            raise ConversionError("%s has tensors this model does not have: %s"
                                  % (hf_dir, ", ".join(extra[:6]) + (" ..." if len(extra) > 6 else "")))
        for name, layer, key, heads in layout:
            dst = views[name] if layer is None else views[name][layer]
            t = where[key].get_tensor(key)
            if tuple(t.shape) != dst.shape:
                raise ConversionError("%s: %s has shape %s, the config implies %s" % (hf_dir, key, tuple(t.shape), dst.shape))
            if not t.is_floating_point() or t.element_size() > 4:
                raise ConversionError("%s: %s is %s; float32, float16 or bfloat16 expected" % (hf_dir, key, t.dtype))
            w = t.float().numpy()  # exact from float16 and bfloat16
            dst[...] = rope_from_hf(w, heads) if heads else w
    return flat


def write_checkpoint(path, c, flat):
    """A version-2 checkpoint (docs/formats.md) at step 0: these parameters, zero AdamW
    moments and no dataloader state, written to PATH.tmp and renamed, like llmc/io/checkpoint.h."""
    n = flat.size
    h = np.zeros(256, dtype="<i4")
    h[0], h[1] = CKPT_MAGIC, CKPT_VERSION
    h[2:10] = [c["V"], c["D"], c["L"], c["H"], c["KV"], c["F"], c["max_seq_len"], c["tied"]]
    # [10] step 0; [11] dp 1 (train_llama requires >= 1); [12..14] B, T, grad_accum 0 and
    # [15] no dataloader state: no run wrote it, so a resumed run starts its own data order
    h[11] = 1
    h[18], h[19] = n & 0x7fffffff, n >> 31
    hf = h.view("<f4")
    hf[32], hf[33] = c["rope_theta"], c["norm_eps"]
    hsh = ckpt_hash(HASH_INIT, h)
    hsh = ckpt_hash(hsh, flat)
    hsh = ckpt_hash_zeros(ckpt_hash_zeros(hsh, 4 * n), 4 * n)  # adam_m, adam_v
    tmp = path + ".tmp"
    try:
        with open(tmp, "wb") as f:
            f.write(h.tobytes())
            flat.tofile(f)
            zeros = np.zeros(min(n, 1 << 24), dtype=np.float32)
            for _ in range(2):
                left = n
                while left:
                    k = min(left, zeros.size)
                    zeros[:k].tofile(f)
                    left -= k
            f.write(hsh.to_bytes(8, "little"))
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except OSError as e:
        with contextlib.suppress(OSError):
            os.remove(tmp)
        raise ConversionError("cannot write %s: %s (hint: disk full?)" % (path, e))


def train_flags(c):
    """train_llama flags of this model: --init-from needs the checkpoint's shape."""
    return ("--V %d --D %d --L %d --H %d --KV %d --F %d --max-seq-len %d --tied %d --rope-theta %s --norm-eps %s"
            % (c["V"], c["D"], c["L"], c["H"], c["KV"], c["F"], c["max_seq_len"], c["tied"],
               repr(float32_json(c["rope_theta"])), repr(float32_json(c["norm_eps"]))))


def convert(hf_dir, out, max_seq_len=None):
    cfg_path = os.path.join(hf_dir, "config.json")
    try:
        with open(cfg_path) as f:
            hf = json.load(f)
    except OSError as e:
        raise ConversionError("cannot read %s: %s" % (cfg_path, e.strerror or e))
    except ValueError as e:
        raise ConversionError("%s is not valid JSON: %s" % (cfg_path, e))
    c = model_config(hf, cfg_path, max_seq_len)
    flat = load_params(c, hf_dir)
    write_checkpoint(out, c, flat)
    return c


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("hf_dir", help="transformers Llama directory (config.json, *.safetensors)")
    ap.add_argument("out", help="checkpoint to write (e.g. runs/imported/ckpt_000000.bin)")
    ap.add_argument("--max-seq-len", dest="max_seq_len", type=int, default=None,
                    help="the checkpoint's max_seq_len (default: max_position_embeddings)")
    a = ap.parse_args(argv)
    if a.max_seq_len is not None and a.max_seq_len < 1:
        ap.error("--max-seq-len must be >= 1")
    try:
        c = convert(a.hf_dir, a.out, a.max_seq_len)
    except ConversionError as e:
        print("import_hf: error: %s" % e, file=sys.stderr)
        return 1
    print("import_hf: %s -> %s (step 0, %d parameters, %s)" % (a.hf_dir, a.out, num_params(c),
                                                                "tied" if c["tied"] else "untied"))
    print("continue training it with:\n  ./train_llama --init-from %s %s --train-data 'SHARDS'" % (a.out, train_flags(c)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
