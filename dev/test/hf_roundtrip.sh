#!/usr/bin/env bash
# Hugging Face export and import (scripts/export_hf.py, scripts/import_hf.py; docs/hf.md).
#
#   bash dev/test/hf_roundtrip.sh [PYTHON [WORKDIR]]
#
# PYTHON: an interpreter with the pinned transformers (default: scripts/ensure_hf_deps.sh,
# which installs it). WORKDIR: kept for inspection (default: a temporary directory).
# Trains two small models with train_llama_cpu (tied with GQA 4/2 heads; untied with one kv
# head, rope_theta 5e5 and norm_eps 1e-6, so every config field differs from the defaults),
# exports them, loads them with transformers and compares with the project's PyTorch
# reference (scripts/pytorch_llama.py) on the same checkpoint: logits within 1e-5 of the
# largest |logit| and the same 20-token greedy continuation; the export without the RoPE
# permutation must fail that comparison. Then imports them back (and what transformers'
# save_pretrained writes of them, sharded too) and requires the parameters bitwise equal,
# has train_llama start from the imported checkpoints, and feeds both scripts bad input.
# Prints "PASS name" or "FAIL name: why" per check and a count; exit status non-zero when
# anything failed (make test runs it through dev/test/run_tests.sh).
set -u
cd "$(dirname "$0")/../.." || exit 1
# one thread for the tiny models: OpenMP teams that wait on busy cores (make test runs
# beside other work) make a 5 ms step take 100 ms
export OMP_NUM_THREADS=1
t_start=$(date +%s)
PY=${1:-$(bash scripts/ensure_hf_deps.sh | tail -n1)}
if [ -n "${2:-}" ]; then W=$2; mkdir -p "$W"
else W=$(mktemp -d "${TMPDIR:-/tmp}/hf_roundtrip.XXXXXX"); trap 'rm -rf "$W"' EXIT; fi
passed=0; failed=0
pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); }
finish() { echo "hf_roundtrip: $passed passed, $failed failed ($(( $(date +%s) - t_start )) s)"; exit $((failed > 0)); }
source dev/test/expect_error.sh

[ -x ./train_llama_cpu ] || make -s train_llama_cpu >"$W/build.log" 2>&1 || { fail build "make train_llama_cpu: $(tail -n 3 "$W/build.log")"; finish; }
"$PY" -c "import transformers, safetensors" 2>/dev/null || { fail hf_deps "$PY cannot import transformers (bash scripts/ensure_hf_deps.sh)"; finish; }

# A repeating random sequence of period 50 (and BOS): a few dozen steps teach the models
# to continue it, so the greedy continuations below are sequences, not one repeated token.
"$PY" - "$W/pattern.bin" <<'PYEOF'
import random, struct, sys
period = random.Random(7).sample(range(3, 512), 50)
toks = [1] + period * 400
open(sys.argv[1], "wb").write(struct.pack("<256i", *([20240520, 1, len(toks)] + [0] * 253)) + struct.pack("<%dH" % len(toks), *toks))
PYEOF
declare -A SHAPE=(
  [tied]="--L 2 --H 4 --KV 2 --F 128 --tied 1"
  [untied]="--L 3 --H 4 --KV 1 --F 96 --tied 0 --rope-theta 500000 --norm-eps 1e-6"
)
model_flags() { read -ra FLAGS <<< "--model tiny --V 512 --D 64 --max-seq-len 64 ${SHAPE[$1]}"; }  # -> FLAGS
STEPS=40
for m in tied untied; do
  model_flags $m
  if ./train_llama_cpu "${FLAGS[@]}" --batch 4 --seq 32 --steps $STEPS --lr 3e-3 --warmup 4 --ckpt-every $STEPS --val-every 0 \
       --train-data "$W/pattern.bin" --run-dir "$W/$m" >"$W/train_$m.log" 2>&1; then pass "train_$m"
  else fail "train_$m" "$(grep -m 2 -i error "$W/train_$m.log")"; continue; fi
  ck=$(printf "%s/%s/ckpt_%06d.bin" "$W" "$m" $STEPS)
  if "$PY" scripts/export_hf.py "$ck" "$W/${m}_hf" >"$W/export_$m.log" 2>&1; then pass "export_$m"
  else fail "export_$m" "$(tail -n 2 "$W/export_$m.log")"; fi
  if "$PY" scripts/import_hf.py "$W/${m}_hf" "$W/${m}_back.bin" >"$W/import_$m.log" 2>&1; then pass "import_$m"
  else fail "import_$m" "$(tail -n 2 "$W/import_$m.log")"; fi
done

# transformers against the reference, the round trips, and import's refusals, in one process
"$PY" - "$W" $STEPS >"$W/check.log" 2>&1 <<'PYEOF'
import json, os, shutil, sys
import numpy as np
import torch
sys.dont_write_bytecode = True
sys.path.insert(0, "scripts")
import export_hf, import_hf  # noqa: E402
from pytorch_llama import Llama, read_checkpoint  # noqa: E402
from safetensors import safe_open  # noqa: E402
from safetensors.torch import load_file, save_file  # noqa: E402
import transformers  # noqa: E402
from transformers import LlamaForCausalLM  # noqa: E402

transformers.logging.set_verbosity_error()
W, STEPS = sys.argv[1], int(sys.argv[2])
TOL = 1e-5       # max |logit difference| / max(1, max |logit|): fp32 rounding, ~100x what is seen
NEW_TOKENS = 20


def report(name, ok, detail):
    print("%s %s: %s" % ("PASS" if ok else "FAIL", name, detail), flush=True)


def blocks(path):
    """(int32 header, parameter bytes, AdamW moment bytes) of a checkpoint."""
    b = open(path, "rb").read()
    h = np.frombuffer(b[:1024], dtype="<i4")
    n = int(h[18]) | (int(h[19]) << 31)
    return h, b[1024:1024 + 4 * n], b[1024 + 4 * n:1024 + 12 * n]


def load_hf(d):
    return LlamaForCausalLM.from_pretrained(d, torch_dtype=torch.float32, attn_implementation="eager",
                                            output_loading_info=True)


def import_bitwise(src_dir, ck, out):
    """Imports src_dir and compares the parameters with checkpoint ck's, bit for bit."""
    import_hf.convert(src_dir, out)
    h0, p0, _ = blocks(ck)
    h1, p1, m1 = blocks(out)
    same_cfg = list(h0[2:10]) == list(h1[2:10]) and bytes(h0[32:34]) == bytes(h1[32:34])
    export_hf.verify_checkpoint(out)  # raises when size or checksum is off
    return p0 == p1 and same_cfg and m1 == bytes(len(m1)) and h1[10] == 0, len(p0) // 4


torch.manual_seed(0)
g = torch.Generator().manual_seed(1234)
for m in ("tied", "untied"):
    ck = os.path.join(W, m, "ckpt_%06d.bin" % STEPS)
    d = os.path.join(W, m + "_hf")
    if not os.path.isfile(os.path.join(d, "model.safetensors")):
        report("transformers_" + m, False, "no export to check")
        continue
    c, _, params, _ = read_checkpoint(ck)
    ref = Llama(c, torch.device("cpu"))
    ref.load_5_2(params)

    cfg = json.load(open(os.path.join(d, "config.json")))
    with safe_open(os.path.join(d, "model.safetensors"), framework="pt") as f:
        keys = set(f.keys())
    want = {"vocab_size": c["V"], "hidden_size": c["D"], "num_hidden_layers": c["L"], "num_attention_heads": c["H"],
            "num_key_value_heads": c["KV"], "intermediate_size": c["F"], "max_position_embeddings": c["max_seq_len"],
            "tie_word_embeddings": bool(c["tied"]), "hidden_act": "silu", "rope_scaling": None,
            "attention_bias": False, "mlp_bias": False}
    bad = {k: cfg.get(k) for k in want if cfg.get(k) != want[k]}
    bad.update({k: cfg[k] for k, ours in (("rope_theta", "rope_theta"), ("rms_norm_eps", "norm_eps"))
                if np.float32(cfg[k]) != np.float32(c[ours])})
    if c["tied"] and "lm_head.weight" in keys:
        bad["lm_head.weight"] = "present in a tied export"
    report("config_" + m, not bad, "mismatched %s" % bad if bad else
           "config.json matches the header (tie_word_embeddings %s, KV %d of H %d, rope_theta %g, rms_norm_eps %g)"
           % (cfg["tie_word_embeddings"], c["KV"], c["H"], cfg["rope_theta"], cfg["rms_norm_eps"]))

    hf, info = load_hf(d)
    hf.eval()
    emb, head = hf.model.embed_tokens.weight, hf.lm_head.weight
    problems = {k: v for k, v in info.items() if v}
    if c["tied"]:  # transformers must tie, and tying must leave the embedding as exported
        tie_ok = head.data_ptr() == emb.data_ptr() and np.array_equal(emb.detach().numpy(), params["tok_embeddings"])
    else:
        tie_ok = head.data_ptr() != emb.data_ptr() and np.array_equal(head.detach().numpy(), params["output"])
    report("load_" + m, not problems and tie_ok, "loading info %s, lm_head %s" % (problems or "clean",
           ("is the embedding" if c["tied"] else "is output") if tie_ok else "WRONG"))

    # logits: a batch of random ids over every position, and windows of the training sequence
    x = torch.randint(0, c["V"], (2, c["max_seq_len"]), generator=g)
    pat = torch.from_numpy(np.fromfile(os.path.join(W, "pattern.bin"), dtype="<u2", offset=1024)[:4 * 64].astype(np.int64))
    x = torch.cat([x, pat.view(4, 64)[:2]])
    with torch.no_grad():
        want_logits = ref.logits(x)
        got = hf(x).logits
    scale = max(1.0, want_logits.abs().max().item())
    err = (got - want_logits).abs().max().item() / scale
    report("logits_" + m, err <= TOL, "max |diff| / max(1, max |logit| = %.2f) = %.2e over %s tokens, tolerance %.0e"
           % (scale, err, "x".join(map(str, x.shape)), TOL))

    # greedy: transformers' generate (KV cache) against the reference's full recompute
    prompt = pat.view(4, 64)[2:, 5:17].clone()
    with torch.no_grad():
        out = hf.generate(prompt, attention_mask=torch.ones_like(prompt), max_new_tokens=NEW_TOKENS, do_sample=False,
                          eos_token_id=None, pad_token_id=0)[:, prompt.shape[1]:]
        seq, margin = prompt, float("inf")
        for _ in range(NEW_TOKENS):
            top2 = ref.logits(seq)[:, -1].topk(2, dim=-1).values
            margin = min(margin, (top2[:, 0] - top2[:, 1]).min().item())
            seq = torch.cat([seq, ref.logits(seq)[:, -1].argmax(-1, keepdim=True)], 1)
    ref_new = seq[:, prompt.shape[1]:]
    report("greedy_" + m, torch.equal(out, ref_new), "%d prompts x %d new tokens %s (first: %s), smallest top-2 logit "
           "margin %.3f" % (prompt.shape[0], NEW_TOKENS, "equal" if torch.equal(out, ref_new) else
                            "DIFFER: hf %s ref %s" % (out.tolist(), ref_new.tolist()), out[0, :8].tolist(), margin))

    # the permutation matters: q and k rows in our adjacent-pair order change the logits
    with torch.no_grad():
        for l, layer in enumerate(hf.model.layers):
            layer.self_attn.q_proj.weight.copy_(torch.from_numpy(params["wq"][l]))
            layer.self_attn.k_proj.weight.copy_(torch.from_numpy(params["wk"][l]))
        unperm = (hf(x).logits - want_logits).abs().max().item() / scale
    report("unpermuted_differs_" + m, unperm > 100 * TOL, "without the q/k permutation max |diff| / scale = %.2e "
           "(must exceed 100x the tolerance, %.0e)" % (unperm, 100 * TOL))

    # back: our export, then what transformers itself saves of it (sharded for the untied one)
    try:
        ok, n = import_bitwise(d, ck, os.path.join(W, m + "_back.bin"))
        report("roundtrip_bitwise_" + m, ok, "%d parameters and the header's model fields %s; moments zero, step 0, "
               "checksum holds" % (n, "bitwise equal" if ok else "DIFFER"))
        hf2, _ = load_hf(d)
        saved = os.path.join(W, m + "_saved")
        hf2.save_pretrained(saved, max_shard_size="100KB" if not c["tied"] else "5GB")
        shards = sorted(f for f in os.listdir(saved) if f.endswith(".safetensors"))
        ok, n = import_bitwise(saved, ck, os.path.join(W, m + "_saved.bin"))
        report("save_pretrained_roundtrip_" + m, ok, "transformers' save_pretrained (%d file%s) imported back: "
               "parameters %s" % (len(shards), "s" if len(shards) > 1 else "", "bitwise equal" if ok else "DIFFER"))
    except export_hf.ConversionError as e:
        report("roundtrip_" + m, False, str(e))

# bfloat16 weights (most published models) import as their exact float32 values; --max-seq-len
ck = os.path.join(W, "untied", "ckpt_%06d.bin" % STEPS)
c, _, params, _ = read_checkpoint(ck)
hf3, _ = load_hf(os.path.join(W, "untied_hf"))
hf3.to(torch.bfloat16).save_pretrained(os.path.join(W, "untied_bf16"))
try:
    import_hf.convert(os.path.join(W, "untied_bf16"), os.path.join(W, "untied_bf16.bin"), max_seq_len=32)
    h, p, _ = blocks(os.path.join(W, "untied_bf16.bin"))
    want = np.concatenate([torch.from_numpy(params[k]).bfloat16().float().numpy().ravel() for k in params])
    ok = p == want.tobytes() and h[8] == 32
    report("import_bfloat16", ok, "bfloat16 save_pretrained imported: parameters %s the checkpoint's rounded to "
           "bfloat16; max_seq_len %d (--max-seq-len 32)" % ("equal" if p == want.tobytes() else "DIFFER from", h[8]))
except export_hf.ConversionError as e:
    report("import_bfloat16", False, str(e))

# export: into a directory with another model's weights, no; the token ids it is given
d = os.path.join(W, "foreign")
os.makedirs(d, exist_ok=True)
open(os.path.join(d, "pytorch_model.bin"), "wb").close()
try:
    export_hf.export(ck, d)
    report("export_refuses_foreign_weights", False, "exported next to pytorch_model.bin")
except export_hf.ConversionError as e:
    report("export_refuses_foreign_weights", "pytorch_model.bin" in str(e) and
           not os.path.exists(os.path.join(d, "model.safetensors")), str(e))
export_hf.export(ck, os.path.join(W, "ids_hf"), bos_id=128000, eos_id=128001)
ids = json.load(open(os.path.join(W, "ids_hf", "config.json")))
report("export_token_ids", (ids["bos_token_id"], ids["eos_token_id"]) == (128000, 128001),
       "bos_token_id %d, eos_token_id %d as given" % (ids["bos_token_id"], ids["eos_token_id"]))

# the Python checksum fold agrees with llmc/io/checkpoint.h's (through the compiled one)
ck = os.path.join(W, "untied", "ckpt_%06d.bin" % STEPS)
b = open(ck, "rb").read()
py = export_hf.ckpt_hash_py(export_hf.ckpt_hash_py(export_hf.HASH_INIT, b[:1024]), b[1024:-8])
cc = export_hf.ckpt_hash(export_hf.ckpt_hash(export_hf.HASH_INIT, b[:1024]), b[1024:-8])
stored = int.from_bytes(b[-8:], "little")
report("checksum_python_fold", py == stored == cc and export_hf._compiled_hash() is not None,
       "Python %016x, compiled %016x, stored by train_llama %016x" % (py, cc, stored))

# import refuses what this model cannot express, naming the reason
src = os.path.join(W, "tied_hf")
base = json.load(open(os.path.join(src, "config.json")))
cases = [("rope_scaling", {"rope_scaling": {"rope_type": "llama3", "factor": 8.0}}, ["rope_scaling"], None),
         ("bias_and_act", {"attention_bias": True, "hidden_act": "gelu"}, ["attention_bias", "hidden_act"], None),
         ("head_dim", {"head_dim": 32}, ["head_dim"], None),
         ("model_type", {"model_type": "mistral"}, ["model_type"], None),
         ("shape", {"intermediate_size": 100}, ["shape", "gate_proj"], None),
         ("missing_tensor", {}, ["lacks", "layers.1.mlp.up_proj"], "drop"),
         ("pickle_only", {}, ["safetensors"], "bin")]
for name, change, words, weights in cases:
    d = os.path.join(W, "bad_" + name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    json.dump(dict(base, **change), open(os.path.join(d, "config.json"), "w"))
    if weights is None:
        shutil.copy(os.path.join(src, "model.safetensors"), d)
    elif weights == "drop":
        t = load_file(os.path.join(src, "model.safetensors"))
        del t["model.layers.1.mlp.up_proj.weight"]
        save_file(t, os.path.join(d, "model.safetensors"), metadata={"format": "pt"})
    else:
        open(os.path.join(d, "pytorch_model.bin"), "wb").close()
    try:
        import_hf.convert(d, os.path.join(d, "out.bin"))
        report("import_rejects_" + name, False, "imported without an error")
    except export_hf.ConversionError as e:
        lacking = [w for w in words if w not in str(e)]
        report("import_rejects_" + name, not lacking and not os.path.exists(os.path.join(d, "out.bin")),
               str(e).replace("\n", " ") if not lacking else "message lacks %s: %s" % (lacking, e))
PYEOF
rc=$?
while IFS= read -r line; do
  case "$line" in PASS\ *) pass "${line#PASS }" ;; FAIL\ *) fail "${line#FAIL }" ;; esac
done < "$W/check.log"
[ $rc -eq 0 ] || fail transformers_checks "exit $rc: $(tail -n 3 "$W/check.log" | tr '\n' ' ')"

# train_llama starts from the imported checkpoints: --init-from, and --resume at step 0
for m in tied untied; do
  [ -f "$W/${m}_back.bin" ] || continue
  model_flags $m
  if ./train_llama_cpu "${FLAGS[@]}" --batch 2 --seq 16 --steps 2 --val-every 0 --train-data "$W/pattern.bin" \
       --run-dir "$W/init_$m" --init-from "$W/${m}_back.bin" >"$W/init_$m.log" 2>&1 &&
     grep -q "parameters from .*${m}_back.bin (its step 0)" "$W/init_$m.log"; then pass "train_llama_init_from_$m"
  else fail "train_llama_init_from_$m" "$(grep -m 2 -i error "$W/init_$m.log")"; fi
done
model_flags tied
if [ -f "$W/tied_back.bin" ] && ./train_llama_cpu "${FLAGS[@]}" --batch 2 --seq 16 --steps 2 --val-every 0 \
     --train-data "$W/pattern.bin" --run-dir "$W/resume_tied" --resume "$W/tied_back.bin" >"$W/resume_tied.log" 2>&1 &&
   grep -q "resumed from .*tied_back.bin at step 0" "$W/resume_tied.log"; then pass train_llama_resume_tied
else fail train_llama_resume_tied "$(grep -m 2 -i error "$W/resume_tied.log" 2>/dev/null)"; fi

# bad input on the command line: a message and exit 1, never a traceback
ck=$(printf "%s/tied/ckpt_%06d.bin" "$W" $STEPS)
head -c 5000 "$ck" > "$W/truncated.bin"
cp "$ck" "$W/flipped.bin"
printf '\x01' | dd of="$W/flipped.bin" bs=1 seek=3000 conv=notrunc status=none
expect_error export_missing_checkpoint "cannot open" "$PY" scripts/export_hf.py "$W/none.bin" "$W/none_hf"
expect_error export_truncated_checkpoint "truncated" "$PY" scripts/export_hf.py "$W/truncated.bin" "$W/trunc_hf"
expect_error export_corrupted_checkpoint "checksum corrupted" "$PY" scripts/export_hf.py "$W/flipped.bin" "$W/flip_hf"
expect_error export_not_a_checkpoint "not a train_llama checkpoint" "$PY" scripts/export_hf.py "$W/pattern.bin" "$W/pat_hf"
expect_error import_missing_dir "config.json" "$PY" scripts/import_hf.py "$W/none_hf" "$W/none.bin"
expect_error import_unsupported_config "rope_scaling cannot express" "$PY" scripts/import_hf.py "$W/bad_rope_scaling" "$W/rs.bin"
for log in "$W"/export_*_checkpoint.log "$W"/import_missing_dir.log "$W"/import_unsupported_config.log; do
  if grep -q Traceback "$log"; then fail "no_traceback_$(basename "$log" .log)" "a traceback instead of a message"; fi
done
finish
