#!/usr/bin/env bash
# make tinystories: train on the prepared TinyStories shards, printing progress, the
# validation loss and sampled stories. On a machine with a GPU and nvcc: the CUDA build
# and stories15M; otherwise the CPU build and the "tiny" model (a falling val loss in
# about 10 minutes on 2 cores). Extra flags for train_llama can be passed in ARGS.
set -euo pipefail
cd "$(dirname "$0")/.."
tok=../shared/data/tinystories/tokenizer/tokenizer.bin
[ -f "$tok" ] || tok=data/tinystories/tokenizer/tokenizer.bin   # fetched by prepare_tinystories.py --download
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 && [ -n "$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)" ]; then
  make -s train_llama
  set -x
  ./train_llama --model stories15M --batch 32 --seq 256 --steps 2000 --lr 5e-4 --warmup 100 \
    --val-every 200 --val-batches 20 --sample-every 500 --sample-len 200 --tokenizer "$tok" \
    --run-dir runs/tinystories_stories15M ${ARGS:-}
else
  echo "no GPU found: the CPU build with the tiny model (D=64, L=4; see README)"
  make -s train_llama_cpu
  set -x
  ./train_llama_cpu --model tiny --batch 8 --seq 256 --steps 600 --lr 3e-3 --warmup 30 \
    --val-every 100 --val-batches 20 --sample-every 300 --sample-len 120 --log-every 10 --tokenizer "$tok" \
    --run-dir runs/tinystories_tiny ${ARGS:-}
fi
