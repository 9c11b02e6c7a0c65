#!/usr/bin/env bash
# Checkpoint resume of train_dit must continue bit-exactly, in any build:
#
#   bash dev/test/check_dit_resume.sh BINARY WORKDIR [train_dit flags...]
#
# Trains a small DiT on generated clips for 6 steps (2 micro-batches each, validation at
# 3 and 6, a checkpoint every 3 steps), then resumes a second run from the step-3
# checkpoint. Passes (exit 0) when steps 4-6 of the resumed run have the same loss,
# grad_norm, lr and validation losses, to the last bit, as the uninterrupted run. The
# data, the noise, t and the label dropout are functions of (seed, step), so the
# checkpoint needs only the model and the optimizer state. Environment: PYTHON; LAUNCH, a
# launcher to run the binary under, e.g. LAUNCH="mpirun -np 2" for the check at dp=2.
set -u
if [ $# -lt 2 ]; then echo "usage: check_dit_resume.sh BINARY WORKDIR [train_dit flags...]" >&2; exit 2; fi
BIN=$1; W=$2; shift 2
PY=${PYTHON:-python3}
[ -x "$BIN" ] || { echo "check_dit_resume: $BIN is not an executable (build it first)" >&2; exit 2; }
rm -rf "$W/full" "$W/resumed"
mkdir -p "$W" || exit 2
common=(--D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --batch 2 --grad-accum 2 --steps 6
        --warmup 2 --val-every 3 --val-clips 5 --ckpt-every 3 "$@")
if ! ${LAUNCH:-} "$BIN" "${common[@]}" --run-dir "$W/full" > "$W/full.log" 2>&1; then
  echo "check_dit_resume: the uninterrupted run failed ($W/full.log):"; tail -n 5 "$W/full.log"; exit 1
fi
if ! ${LAUNCH:-} "$BIN" "${common[@]}" --run-dir "$W/resumed" --resume "$W/full/ckpt_000003.bin" > "$W/resumed.log" 2>&1; then
  echo "check_dit_resume: the resumed run failed ($W/resumed.log):"; tail -n 5 "$W/resumed.log"; exit 1
fi
"$PY" - "$W/full/metrics.jsonl" "$W/resumed/metrics.jsonl" <<'PYEOF'
import json, sys
def load(p): return {r["step"]: r for r in map(json.loads, open(p))}
full, res = load(sys.argv[1]), load(sys.argv[2])
keys = ["loss", "grad_norm", "lr", "val_loss", "val_loss_low_t", "val_loss_mid_t", "val_loss_high_t"]
bad = [(s, k, full[s].get(k), res.get(s, {}).get(k)) for s in (4, 5, 6) for k in keys if full[s].get(k) != res.get(s, {}).get(k)]
if bad or sorted(res) != [4, 5, 6]:
    print("check_dit_resume: the resumed run differs:", bad or sorted(res)); sys.exit(1)
print("check_dit_resume: steps 4-6 bit-identical:", [(s, full[s]["loss"]) for s in (4, 5, 6)])
PYEOF
