#!/usr/bin/env python3
"""Writes a train_llama checkpoint as a Hugging Face transformers LlamaForCausalLM directory.

    python3 scripts/export_hf.py CHECKPOINT OUT_DIR

CHECKPOINT: a ckpt_NNNNNN.bin of train_llama (version 2, docs/formats.md), checked (size,
checksum) before use. OUT_DIR gets config.json and model.safetensors (float32), loadable with
LlamaForCausalLM.from_pretrained(OUT_DIR). Interpreter: `bash scripts/ensure_hf_deps.sh`.
docs/hf.md is the user's guide; scripts/import_hf.py is the way back.

The mapping (docs/design.md 5.2 -> transformers), for every layer l:
    tok_embeddings -> model.embed_tokens.weight     attn_norm[l] -> model.layers.l.input_layernorm.weight
    wq[l], wk[l]   -> self_attn.q_proj / k_proj, rows permuted (below)
    wv[l], wo[l]   -> self_attn.v_proj / o_proj     ffn_norm[l]  -> post_attention_layernorm.weight
    w1, w3, w2     -> mlp.gate_proj / up_proj / down_proj
    norm           -> model.norm.weight             output       -> lm_head.weight (absent when tied)

RoPE: this model rotates adjacent pairs (x[2i], x[2i+1]) of each head (llama2.c, Meta);
transformers rotates the two halves (x[i], x[i + hd/2]) with the same frequency for i. So
each head's rows of wq and wk are reordered to put the even rows first, then the odd ones:
HF row j*hd/2 + i = our row 2i + j. q and k get the same reordering, so every dot product q.k,
and with it the attention, is unchanged; v, wo and everything else keep their order. This is
the permutation of transformers' own convert_llama_weights_to_hf.py.

This file also holds what import_hf.py shares with it: the tensor and config name tables,
the permutation both ways, and the checkpoint checksum of llmc/io/checkpoint.h.
"""

import argparse
import ctypes
import json
import os
import subprocess
import sys
import tempfile
from collections import OrderedDict

import numpy as np

sys.dont_write_bytecode = True  # no __pycache__ in scripts/
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "dev", "ref"))  # lref.py, dref.py: the layouts
from lref import num_params  # noqa: E402
from pytorch_llama import CKPT_MAGIC, CKPT_VERSION, read_checkpoint  # noqa: E402

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BOS_ID, EOS_ID = 1, 2  # the Llama 2 / llama2.c SentencePiece ids; shards start every story with BOS


class ConversionError(Exception):
    """Something the user must fix; the scripts print it as 'error: ...' and exit 1."""


# ----------------------------------------------------------------------------- names

def hf_layout(c):
    """(5.2 tensor, layer or None, transformers key, heads whose rows RoPE permutes or 0),
    in docs/design.md 5.2 order, so that walking it fills the checkpoint's parameter block in order."""
    yield "tok_embeddings", None, "model.embed_tokens.weight", 0
    per_layer = (("attn_norm", "input_layernorm.weight", 0),
                 ("wq", "self_attn.q_proj.weight", c["H"]),
                 ("wk", "self_attn.k_proj.weight", c["KV"]),
                 ("wv", "self_attn.v_proj.weight", 0),
                 ("wo", "self_attn.o_proj.weight", 0),
                 ("ffn_norm", "post_attention_layernorm.weight", 0),
                 ("w1", "mlp.gate_proj.weight", 0),
                 ("w2", "mlp.down_proj.weight", 0),
                 ("w3", "mlp.up_proj.weight", 0))
    for name, key, heads in per_layer:  # tensor-major: every layer's attn_norm, then every wq, ...
        for l in range(c["L"]):
            yield name, l, "model.layers.%d.%s" % (l, key), heads
    yield "norm", None, "model.norm.weight", 0
    if not c["tied"]:
        yield "output", None, "lm_head.weight", 0


# our config key -> LlamaConfig's
HF_SIZES = (("V", "vocab_size"), ("D", "hidden_size"), ("F", "intermediate_size"), ("L", "num_hidden_layers"),
            ("H", "num_attention_heads"), ("KV", "num_key_value_heads"), ("max_seq_len", "max_position_embeddings"))
HF_FLOATS = (("rope_theta", "rope_theta"), ("norm_eps", "rms_norm_eps"))


def float32_json(x):
    """The shortest decimal that reads back as the same float32 (1e-05, not 9.99999974e-06):
    the checkpoint stores float32, and import_hf.py must get the same bits back."""
    return float(str(np.float32(x)))


def hf_config(c, bos_id=BOS_ID, eos_id=EOS_ID):
    """config.json of a LlamaForCausalLM equal to the model of config c (every field that
    changes the computation is written out, not left to LlamaConfig's defaults). The
    checkpoint knows no tokenizer: the token ids are the caller's."""
    cfg = {"architectures": ["LlamaForCausalLM"], "model_type": "llama"}
    cfg.update({hf: int(c[ours]) for ours, hf in HF_SIZES})
    cfg.update({hf: float32_json(c[ours]) for ours, hf in HF_FLOATS})
    cfg.update({"head_dim": c["D"] // c["H"], "hidden_act": "silu", "rope_scaling": None,
                "attention_bias": False, "mlp_bias": False, "attention_dropout": 0.0, "pretraining_tp": 1,
                "tie_word_embeddings": bool(c["tied"]), "bos_token_id": bos_id, "eos_token_id": eos_id,
                "initializer_range": 0.02, "torch_dtype": "float32", "use_cache": True})
    return cfg


# ----------------------------------------------------------------------------- RoPE order

def rope_to_hf(w, n_heads):
    """wq or wk [n_heads*hd, D]: per head, rows 0,2,4,.. then 1,3,5,.. (adjacent pairs -> halves)."""
    rows, cols = w.shape
    hd = rows // n_heads
    return w.reshape(n_heads, hd // 2, 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


def rope_from_hf(w, n_heads):
    """The inverse of rope_to_hf (halves -> adjacent pairs); a pure reordering, so bit-exact."""
    rows, cols = w.shape
    hd = rows // n_heads
    return w.reshape(n_heads, 2, hd // 2, cols).transpose(0, 2, 1, 3).reshape(rows, cols)


# ----------------------------------------------------------------------------- checksum

HASH_INIT, HASH_PRIME, MASK64 = 0xcbf29ce484222325, 0x100000001b3, (1 << 64) - 1


def ckpt_hash_py(h, data):
    """llmc/io/checkpoint.h's ckpt_hash in Python: fold the 64-bit little-endian words of data
    (the last one zero-padded). About 5 M words/s; the compiled one below is ~100x faster."""
    b = memoryview(data).cast("B")
    n8 = len(b) // 8 * 8
    for w in np.frombuffer(b[:n8], dtype="<u8").tolist():
        h = ((h ^ w) * HASH_PRIME) & MASK64
    if n8 < len(b):
        h = ((h ^ int.from_bytes(bytes(b[n8:]), "little")) * HASH_PRIME) & MASK64
    return h


_c_hash = []  # [function or None], built on first use


def _compiled_hash():
    """ckpt_hash from llmc/io/checkpoint.h itself, built as a tiny shared library with the C
    compiler that built train_llama: the fold is sequential, and in Python a 1B-parameter
    checkpoint would take minutes. None when no compiler works (then the Python fold)."""
    if not _c_hash:
        fn = None
        src = ('#define LLMC_CPU\n#include "checkpoint.h"\n'
               "uint64_t llmc_ckpt_hash(uint64_t h, const void* p, size_t n) { return ckpt_hash(h, p, n); }\n")
        with tempfile.TemporaryDirectory() as tmp:
            lib = os.path.join(tmp, "ckpt_hash.so")
            cmd = [os.environ.get("CC", "cc"), "-O2", "-shared", "-fPIC", "-I", os.path.join(REPO, "llmc", "io"),
                   "-x", "c", "-", "-o", lib]
            try:
                subprocess.run(cmd, input=src.encode(), check=True, capture_output=True)
                fn = ctypes.CDLL(lib).llmc_ckpt_hash  # stays loaded after the file is gone
                fn.restype = ctypes.c_uint64
                fn.argtypes = (ctypes.c_uint64, ctypes.c_void_p, ctypes.c_size_t)
            except (OSError, subprocess.CalledProcessError):
                print("note: no C compiler for the checkpoint checksum; using the slower Python fold",
                      file=sys.stderr)
        _c_hash.append(fn)
    return _c_hash[0]


def ckpt_hash(h, data):
    """Folds one block (bytes or a contiguous numpy array) into h, as llmc/io/checkpoint.h does."""
    fn = _compiled_hash()
    if fn is None:
        return ckpt_hash_py(h, data)
    a = np.ascontiguousarray(np.frombuffer(data, dtype=np.uint8) if isinstance(data, (bytes, bytearray)) else data)
    return fn(h, a.ctypes.data, a.nbytes)


def ckpt_hash_zeros(h, nbytes):
    """A block of nbytes zero bytes: each word leaves h ^ 0 = h, so it multiplies h by the
    prime once per word (AdamW moments of a fresh start, without 8 GB of zeros)."""
    return (h * pow(HASH_PRIME, (nbytes + 7) // 8, 1 << 64)) & MASK64


def verify_checkpoint(path):
    """Checks a train_llama checkpoint as train_llama does before loading it (magic, version,
    the size its header implies, the checksum); returns the int32 header, else raises."""
    try:
        size = os.path.getsize(path)
        f = open(path, "rb")
    except OSError as e:
        raise ConversionError("cannot open checkpoint %s: %s" % (path, e.strerror or e))
    with f:
        hb = f.read(1024)
        if len(hb) < 1024:
            raise ConversionError("%s: %d bytes, too short for a checkpoint header (truncated)" % (path, size))
        h = np.frombuffer(hb, dtype="<i4")
        if h[0] != CKPT_MAGIC or h[1] != CKPT_VERSION:
            raise ConversionError("%s is not a train_llama checkpoint: magic %d version %d (expected %d version %d)"
                                  % (path, h[0], h[1], CKPT_MAGIC, CKPT_VERSION))
        n = int(h[18]) | (int(h[19]) << 31)
        ds = int(h[15])
        want = 1024 + 3 * 4 * n + ds + 8
        if h[18] < 0 or h[19] < 0 or not 0 <= ds <= 512 or size != want:
            raise ConversionError("%s has %d bytes but its header implies %d: truncated or not a complete checkpoint"
                                  % (path, size, want))
        hsh = ckpt_hash(HASH_INIT, hb)
        chunk = 1 << 26  # a multiple of 8 bytes, as llmc/io/checkpoint.h requires within a block
        for block in (4 * n, 4 * n, 4 * n, ds):
            while block:
                k = min(block, chunk)
                hsh = ckpt_hash(hsh, f.read(k))
                block -= k
        stored = int.from_bytes(f.read(8), "little")
    if stored != hsh:
        raise ConversionError("%s: checksum mismatch (stored %016x, computed %016x): the file is corrupted"
                              % (path, stored, hsh))
    return h


# ----------------------------------------------------------------------------- export

def hf_tensors(c, params):
    """OrderedDict transformers key -> contiguous float32 array, from the 5.2 arrays."""
    out = OrderedDict()
    for name, layer, key, heads in hf_layout(c):
        w = params[name] if layer is None else params[name][layer]
        out[key] = np.ascontiguousarray(rope_to_hf(w, heads) if heads else w, dtype=np.float32)
    return out


OURS = ("config.json", "model.safetensors")


def export(ckpt, out_dir, bos_id=BOS_ID, eos_id=EOS_ID):
    from safetensors.numpy import save_file  # the pinned package of scripts/ensure_hf_deps.sh

    h = verify_checkpoint(ckpt)
    c, hdr, params, _ = read_checkpoint(ckpt)
    assert num_params(c) == (int(h[18]) | (int(h[19]) << 31))
    # weights of another model left in OUT_DIR would be loaded instead of, or with, ours
    if os.path.isdir(out_dir):
        other = sorted(f for f in os.listdir(out_dir) if f not in OURS and
                       (f.endswith((".safetensors", ".bin", ".pt", ".pth", ".msgpack", ".h5")) or ".index." in f))
        if other:
            raise ConversionError("%s already holds other weight files (%s); export into an empty directory"
                                  % (out_dir, ", ".join(other)))
    try:
        os.makedirs(out_dir, exist_ok=True)
        tmp = os.path.join(out_dir, "model.safetensors.tmp")
        # metadata "format": "pt" is what from_pretrained requires of a safetensors file
        save_file(hf_tensors(c, params), tmp, metadata={"format": "pt", "train_llama_step": str(hdr["step"])})
        os.replace(tmp, os.path.join(out_dir, "model.safetensors"))
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(hf_config(c, bos_id, eos_id), f, indent=2, sort_keys=True)
            f.write("\n")
    except OSError as e:
        raise ConversionError("cannot write %s: %s" % (out_dir, e))
    print("export_hf: %s (step %d: V=%d D=%d L=%d H=%d KV=%d F=%d max_seq_len=%d, %s, %d parameters) -> %s"
          % (ckpt, hdr["step"], c["V"], c["D"], c["L"], c["H"], c["KV"], c["F"], c["max_seq_len"],
             "tied" if c["tied"] else "untied", num_params(c), out_dir))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__)
    ap.add_argument("checkpoint", help="train_llama checkpoint (ckpt_NNNNNN.bin)")
    ap.add_argument("out_dir", help="directory for config.json and model.safetensors")
    ap.add_argument("--bos-id", dest="bos_id", type=int, default=BOS_ID,
                    help="bos_token_id of config.json (default %d: the Llama 2 tokenizer's)" % BOS_ID)
    ap.add_argument("--eos-id", dest="eos_id", type=int, default=EOS_ID,
                    help="eos_token_id of config.json (default %d)" % EOS_ID)
    a = ap.parse_args(argv)
    try:
        export(a.checkpoint, a.out_dir, a.bos_id, a.eos_id)
    except ConversionError as e:
        print("export_hf: error: %s" % e, file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
