#!/usr/bin/env bash
# The dev/cuda kernel ladders on a GPU, each validated against its CPU twin and timed:
#
#   bash scripts/gpu_ladder.sh attention            # one ladder (or several names)
#   bash scripts/gpu_ladder.sh all-but-attention    # every other ladder
#
# Uses the ladders built before the session and carried (dev/cuda/build/bf16, `make gpu-bin`
# builds them); builds one with make only when it is missing or cannot start here. Exit
# status: 0 when every ladder run passed.
set -u
cd "$(dirname "$0")/../dev/cuda" || exit 2
LADDERS=$(sed -n 's/^LADDERS := //p' Makefile)
if [ "${1:-}" = all-but-attention ]; then
  set -- $(echo "$LADDERS" | tr ' ' '\n' | grep -vx attention)
fi
[ $# -gt 0 ] || { echo "usage: gpu_ladder.sh NAME... | all-but-attention" >&2; exit 2; }
fail=0
for t in "$@"; do
  echo "==== ladder $t"
  if ! ldd "build/bf16/$t" > /dev/null 2>&1 || ldd "build/bf16/$t" 2>/dev/null | grep -q 'not found'; then
    echo "(build/bf16/$t missing or a library not found: building it here)"
    make --no-print-directory "$t" CUDA_ARCH="${CUDA_ARCH:-90}" || { echo "*** $t did not build"; fail=1; continue; }
  fi
  "./build/bf16/$t" || { echo "*** $t FAILED"; fail=1; }
done
exit $fail
