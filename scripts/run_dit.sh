#!/usr/bin/env bash
# make dit: train the video DiT on generated moving-digit clips (nothing to download),
# printing progress and the validation loss per t bucket, and leaving one animated GIF
# (and a PNG strip) per digit class in the run directory's samples/. On a machine with a
# GPU and nvcc: the CUDA build and dit-S on 16x32x32 colour clips; otherwise the CPU
# build and dit-tiny (recipe in scripts/dit_tiny_recipe.sh), 10 min 55 s on 2 quiet cores
# (measured end to end: docs/results/cpu_dit_digits.md). Then a classifier of the generator's
# real clips (scripts/dit_digits.py, shown first to score >= 0.95 on held-out real ones)
# labels the last step's 8 sampled clips per class: the accuracy per class says whether a
# person could name the digits (run_dir/digits.json).
# Extra flags for train_dit can be passed in ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/ensure_build_deps.sh  # Open MPI and the CPU BLAS, as make test does (an install is timed apart)
source scripts/fresh_run_dir.sh    # a second run goes to a new directory (RUN_DIR chooses one)
if bash scripts/have_cuda_gpu.sh; then
  make -s train_dit
  run=$(fresh_run_dir runs/dit_S)
  set -x
  ./train_dit --model dit-S --batch 32 --steps 4000 --lr 1e-3 --warmup 200 --val-every 500 --val-clips 96 \
    --sample-every 1000 --sample-clips 8 --log-every 50 --ckpt-every 1000 --run-dir "$run" ${ARGS:-}
else
  echo "no GPU found: the CPU build with dit-tiny (see README)"
  make -s train_dit_cpu
  source scripts/dit_tiny_recipe.sh
  run=$(fresh_run_dir runs/dit_tiny)
  set -x
  ./train_dit_cpu "${DIT_TINY[@]}" --sample-clips 8 --run-dir "$run" ${ARGS:-}
fi
set +x
last=$(printf %06d "$(ls "$run"/samples | sed -n 's/^step_0*\([0-9]*\)\.clips$/\1/p' | sort -n | tail -n1)")
echo "samples: $run/samples/ (one GIF and one PNG strip per class, the last step's are step_${last}_class_*)"
# the digits named by a classifier of real clips (needs numpy and torch: scripts/ensure_python_deps.sh)
PY=$(bash scripts/ensure_python_deps.sh | tail -n1)
"$PY" scripts/dit_digits.py classify "$run/samples/step_${last}.clips" --json "$run/digits.json" ||
  echo "(the classifier did not reach 0.95 on real clips: its labels of the samples mean little)"
