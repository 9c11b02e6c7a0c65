#!/usr/bin/env bash
# Regenerates the committed Llama reference state files in dev/ref/ (docs/design.md 5.3)
# with dev/ref/reference_llama.py, then re-reads and recomputes each one (--check).
# Deterministic: the same bytes on every run (float64, one thread, fixed seeds).
# Usage: dev/test/make_refs.sh [OUTDIR]   (default dev/ref)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=$(bash scripts/ensure_python_deps.sh | tail -n 1)
OUT=${1:-dev/ref}
mkdir -p "$OUT"
ref() { # name, then reference_llama.py arguments
  local name=$1; shift
  "$PY" dev/ref/reference_llama.py --quiet --out "$OUT/$name.lref" "$@"
  "$PY" dev/ref/reference_llama.py --check "$OUT/$name.lref" >/dev/null \
    || { echo "make_refs: --check failed on $OUT/$name.lref" >&2; exit 1; }
  echo "$OUT/$name.lref"
}
# MHA, untied, T == max_seq_len, clipping active (grad norm ~1.5 > 1)
ref mha_untied_small  --V 64 --D 32 --L 2 --H 4 --KV 4 --F 96  --max-seq-len 16 --B 2 --T 16 --n-steps 4 --tied 0 --seed 1 --grad-clip 1.0
# MHA, tied, odd sizes: V=67, hd=8 with H=3, F=61, T=7 < max_seq_len=16; clipping active
ref mha_tied_odd      --V 67 --D 24 --L 2 --H 3 --KV 3 --F 61  --max-seq-len 16 --B 3 --T 7  --n-steps 4 --tied 1 --seed 2 --grad-clip 1.0
# GQA H=4 KV=2, tied, L=3, hd=12; grad_clip 5 is above the grad norm (clip on but inactive)
ref gqa_h4kv2_tied    --V 96 --D 48 --L 3 --H 4 --KV 2 --F 128 --max-seq-len 32 --B 2 --T 20 --n-steps 5 --tied 1 --seed 3 --grad-clip 5.0
# MQA H=6 KV=1, untied, B=1, no clipping
ref mqa_h6kv1_untied_noclip --V 80 --D 48 --L 2 --H 6 --KV 1 --F 100 --max-seq-len 16 --B 1 --T 9 --n-steps 3 --tied 0 --seed 4 --grad-clip 0
# GQA H=6 KV=2, untied, hd=6, odd V/F, T=5 < 8, and every hyperparameter away from its default
ref gqa_h6kv2_untied_hparams --V 53 --D 36 --L 2 --H 6 --KV 2 --F 70 --max-seq-len 8 --B 3 --T 5 --n-steps 5 --tied 0 --seed 5 \
    --rope-theta 500000 --norm-eps 1e-6 --lr 3e-3 --beta1 0.8 --beta2 0.99 --adam-eps 1e-7 --weight-decay 0.05 --grad-clip 0.5
