#!/usr/bin/env bash
# Exit status 0 when this machine can build and run the CUDA trainer: a GPU that
# nvidia-smi lists, and nvcc (on PATH or in /usr/local/cuda). The make targets that
# pick the CUDA build over the CPU one (tinystories, sweep) ask this.
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 &&
  [ -n "$(command -v nvcc || ls /usr/local/cuda/bin/nvcc 2>/dev/null)" ]
