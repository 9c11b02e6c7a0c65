#!/usr/bin/env bash
# Regenerates the committed video DiT reference state files dev/ref/dit_*.dref
# (docs/design.md 9.4) with dev/ref/reference_dit.py, then re-reads and recomputes each one
# (--check). Deterministic: the same bytes on every run (float64, one thread, fixed
# seeds). The exact commands are the `ref` lines below; each file stays under 200 KB
# (t1_w alone is [D, 256], so D is kept small).
# Usage: dev/test/make_dit_refs.sh [OUTDIR]   (default dev/ref)
set -euo pipefail
cd "$(dirname "$0")/../.."
PY=$(bash scripts/ensure_python_deps.sh | tail -n 1)
OUT=${1:-dev/ref}
mkdir -p "$OUT"
ref() { # name, then reference_dit.py arguments
  local name=$1; shift
  "$PY" dev/ref/reference_dit.py --quiet --out "$OUT/$name.dref" "$@"
  "$PY" dev/ref/reference_dit.py --check "$OUT/$name.dref" >/dev/null \
    || { echo "make_dit_refs: --check failed on $OUT/$name.dref" >&2; exit 1; }
  echo "$OUT/$name.dref"
}
# clip patches pt=2 (2 x 3 x 4 tokens), Hi != Wi, hd=10 (rope3d parts 6, 2, 2: not a
# multiple of 6), C=3, B=3 with a null label; grad_clip 5 is on but above the grad norm
ref dit_pt2_hw      --C 3 --Fr 4 --Hi 6 --Wi 8 --pt 2 --ph 2 --pw 2 --D 20 --L 2 --H 2 --FF 28 --NC 3 \
    --B 3 --n-steps 3 --seed 1 --grad-clip 5.0
# NC=1 (labels 0 and the null class 1), one channel, hd=8 (parts 4, 2, 2), no clipping
ref dit_nc1_hd8     --C 1 --Fr 3 --Hi 4 --Wi 4 --pt 1 --ph 2 --pw 2 --D 16 --L 2 --H 2 --FF 40 --NC 1 \
    --B 2 --n-steps 2 --seed 2 --grad-clip 0
# hd=12 (parts 4, 4, 4) in one head, L=3, pw=3, 2 x 4 x 2 tokens; clipping active (0.5)
ref dit_hd12_clip   --C 2 --Fr 2 --Hi 8 --Wi 6 --pt 1 --ph 2 --pw 3 --D 12 --L 3 --H 1 --FF 20 --NC 4 \
    --B 2 --n-steps 3 --seed 3 --grad-clip 0.5
# hd=4 (parts 4, 0, 0: the row and column parts are empty), H=4, B=1, ph=Hi (one row
# of patches), odd Fr and Wi, and every hyperparameter away from its default
ref dit_h4_hd4_hparams --C 2 --Fr 3 --Hi 3 --Wi 5 --pt 1 --ph 3 --pw 1 --D 16 --L 1 --H 4 --FF 24 --NC 2 \
    --B 1 --n-steps 4 --seed 4 --rope-theta 500 --lr 3e-3 --beta1 0.8 --beta2 0.99 --adam-eps 1e-7 \
    --weight-decay 0.05 --grad-clip 2.0
