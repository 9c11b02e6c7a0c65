#!/usr/bin/env bash
# Can the CUDA binaries carried to this GPU machine run here? (scripts/gpu_check.sh's first
# step of every call.)  bash scripts/gpu_bin_check.sh DIR
# Passes when DIR/BUILD_INFO names this machine's nvcc release (a binary linked against
# another CUDA's cuBLASLt may load the wrong library), every program is there and every
# shared library it needs is found, and each program starts (prints its usage). Fails
# with the reason otherwise, and gpu_check.sh then builds on this machine.
set -u
D=${1:-gpu_bin}
[ -f "$D/BUILD_INFO" ] || { echo "no $D/BUILD_INFO: the binaries were not carried (make gpu-bin here, then carry $D)"; exit 1; }
cat "$D/BUILD_INFO"
want=$(sed -n 's/^nvcc: //p' "$D/BUILD_INFO")
have=$(nvcc --version 2>/dev/null | grep -o 'release [0-9.]*' | head -n1)
echo "nvcc here: ${have:-none}"
if [ -n "$have" ] && [ "$want" != "$have" ]; then echo "built with nvcc $want, this machine has $have: rebuild"; exit 1; fi
# GPU_BIN_BF16=nocudnn: the bf16 programs from $D/nocudnn (built without cuDNN), the FP32 ones from $D
sub=${GPU_BIN_BF16:+$GPU_BIN_BF16/}
for p in ${sub}train_llama ${sub}test_llama ${sub}train_dit ${sub}test_dit train_llama_fp32 test_llama_fp32 test_dit_fp32; do
  [ -x "$D/$p" ] || { echo "missing $D/$p"; exit 1; }
  if ldd "$D/$p" | grep 'not found'; then echo "$D/$p: a shared library is missing here"; exit 1; fi
  "$D/$p" --help > /dev/null 2>&1; rc=$?
  if (( rc > 2 )); then echo "$D/$p does not start (exit $rc)"; "$D/$p" --help 2>&1 | tail -n 3; exit 1; fi
done
ldd "$D/${sub}test_llama" | grep -i 'libcudnn\.' || echo "($D/${sub}test_llama is built without cuDNN)"
if [ -d "$D/mpi" ]; then
  for p in "$D"/mpi/*; do
    if ldd "$p" | grep -q 'not found'; then echo "note: $p needs libraries this machine lacks (no Open MPI?): the 2-rank steps skip"; fi
  done
fi
echo "carried binaries usable"
