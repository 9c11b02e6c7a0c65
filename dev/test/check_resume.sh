#!/usr/bin/env bash
# Checkpoint resume must continue bit-exactly, in any build of train_llama:
#
#   bash dev/test/check_resume.sh BINARY WORKDIR [train_llama flags...]
#
# Trains the tiny model (V=512) for 6 steps on a synthetic shard written into WORKDIR,
# with gradient accumulation, validation at steps 3 and 6 and a checkpoint every 3 steps;
# then a second run resumes from the step-3 checkpoint. Passes (exit 0) when steps 4-6
# of the resumed run have the same loss, grad_norm, lr and val_loss, to the last bit,
# as the uninterrupted run. The runs are left in WORKDIR/full and WORKDIR/resumed.
# make test runs it on the CPU build (dev/test/run_tests.sh), scripts/gpu_check.sh on
# the bf16 and FP32 CUDA builds. Environment: PYTHON (default python3); LAUNCH, a launcher
# to run the binary under, e.g. LAUNCH="mpirun -np 2" for the check at dp=2.
set -u
if [ $# -lt 2 ]; then echo "usage: check_resume.sh BINARY WORKDIR [train_llama flags...]" >&2; exit 2; fi
BIN=$1; W=$2; shift 2
PY=${PYTHON:-python3}
[ -x "$BIN" ] || { echo "check_resume: $BIN is not an executable (build it first)" >&2; exit 2; }
rm -rf "$W/full" "$W/resumed"
mkdir -p "$W" || exit 2
# token ids below the tiny model's V (dev/test/write_toy_shard.py)
HERE=$(cd "$(dirname "$0")" && pwd)
"$PY" "$HERE/write_toy_shard.py" "$W/train.bin" 20000 1 500 && "$PY" "$HERE/write_toy_shard.py" "$W/val.bin" 5000 2 500 || exit 2
common=(--model tiny --V 512 --batch 2 --seq 32 --total-batch 128 --steps 6 --warmup 2 --val-every 3 --val-batches 2
        --ckpt-every 3 --sample-every 0 --train-data "$W/train.bin" --val-data "$W/val.bin" "$@")
if ! ${LAUNCH:-} "$BIN" "${common[@]}" --run-dir "$W/full" > "$W/full.log" 2>&1; then
  echo "check_resume: the uninterrupted run failed ($W/full.log):"; tail -n 5 "$W/full.log"; exit 1
fi
if ! ${LAUNCH:-} "$BIN" "${common[@]}" --run-dir "$W/resumed" --resume "$W/full/ckpt_000003.bin" > "$W/resumed.log" 2>&1; then
  echo "check_resume: the resumed run failed ($W/resumed.log):"; tail -n 5 "$W/resumed.log"; exit 1
fi
"$PY" - "$W/full/metrics.jsonl" "$W/resumed/metrics.jsonl" <<'PYEOF'
import json, sys
full = {r["step"]: r for r in map(json.loads, open(sys.argv[1])) if "step" in r}
res = [r for r in map(json.loads, open(sys.argv[2])) if "step" in r]
assert [r["step"] for r in res] == [4, 5, 6], "resumed steps: %s" % [r["step"] for r in res]
for r in res:
    for k in ("loss", "grad_norm", "lr", "val_loss"):
        if k in r or k in full[r["step"]]:
            assert r.get(k) == full[r["step"]].get(k), ("step", r["step"], k, r.get(k), full[r["step"]].get(k))
print("check_resume: steps 4-6 bit-identical:", [(r["step"], r["loss"]) for r in res])
PYEOF
