#!/usr/bin/env bash
# make sweep: tok/s and peak memory of train_llama across memory-flag combinations on one
# model and batch (scripts/sweep_memory.py), as a table (docs/results/*.md and .jsonl)
# and a PNG of peak memory against tok/s. With a GPU and nvcc: the CUDA build, stories110M
# at B=8, T=1024; otherwise the CPU build, stories15M at B=8, T=256 (about 4 minutes on
# 2 cores). MODEL, SEQ, BATCH, STEPS and OUT override the defaults.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=$(bash scripts/ensure_python_deps.sh | tail -n1)
bash scripts/ensure_build_deps.sh  # Open MPI and the CPU BLAS, as make test does (an install is timed apart)
if bash scripts/have_cuda_gpu.sh; then
  make -s train_llama
  bin=./train_llama; model=${MODEL:-stories110M}; seq=${SEQ:-1024}; batch=${BATCH:-8}; steps=${STEPS:-8}
  gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -n1 | tr ' ' '_')
  out=${OUT:-docs/results/sweep_${model}_${gpu}}
else
  echo "no GPU found: the CPU build (train_llama_cpu)"
  make -s train_llama_cpu
  bin=./train_llama_cpu; model=${MODEL:-stories15M}; seq=${SEQ:-256}; batch=${BATCH:-8}; steps=${STEPS:-6}
  out=${OUT:-docs/results/cpu_sweep_${model}}
fi
set -x
"$PY" scripts/sweep_memory.py --binary "$bin" --model "$model" --seq "$seq" --batch "$batch" --steps "$steps" --out "$out"
