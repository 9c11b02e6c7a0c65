#!/usr/bin/env bash
# Host-emulation check of the llmc CUDA kernels (no GPU needed). From any directory:
#     bash dev/emu/run.sh
# Transforms the CURRENT llmc tree (its kernels/*.cuh) into dev/emu/build/src (rebuilt on every run, never
# committed), builds the emulator self-test and the harness with g++ in fp32
# (-DENABLE_FP32) and bf16, runs them, and prints one line per check:
#     PASS <name>      or      FAIL <name>: why
# then a summary with the time taken. Exit status: non-zero when anything failed.
#
# Environment:
#   EMU_SRC_DIR   the llmc tree to check (kernels/*.cuh, kernels/kernels.h, kernels/cpu/, core/...)
#                 (default: llmc). Used to show that a broken kernel fails.
#   EMU_FILTER    only the checks whose name contains this string (no coverage check)
#   EMU_PRECISIONS the harness builds to run (default "fp32 bf16"; make test's sample: bf16)
#   EMU_HARNESS_SAMPLE 1: the tensor-core attention's checks at a sample of the head dims
#                 other than 64 and 128 (40, 72, 200; make test), else at all of them
#                 (make test-full); the coverage check then skips the kernels left out
#   CXX           the C++ compiler (default g++; C++17 and GNU inline asm on x86-64)
#   EMU_LADDERS   0: skip the last stage, the dev/cuda ladders' validation (run_ladders.sh);
#                 1: run it even when EMU_FILTER is set. EMU_LADDER_DIR (default dev/cuda)
#                 and EMU_LADDER_FILTER are passed on to run_ladders.sh.
#   EMU_PROBE     0: skip the full-size index probe (index_probe.cpp: the first and last blocks
#                 of llama3-8B-sized grids over reserved memory); 1: run it even when EMU_FILTER
#                 is set. EMU_PROBE_FILTER=substring runs only the matching probes.
#   EMU_TRAINER   0: skip the trainer stage, the whole CUDA build of test_llama,
#                 train_llama, test_dit and train_dit under the emulator (run_trainer.sh);
#                 1: run it even when EMU_FILTER is set. EMU_TRAINER_FULL,
#                 EMU_TRAINER_RESUME, EMU_TRAINER_FILTER and EMU_TRAINER_SRC are passed on
#                 to run_trainer.sh.
# Details (errors, tolerances, worst err/tol of every output) are in
# dev/emu/build/{selftest,fp32,bf16,probe}.log.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s.%N)
SRC=${EMU_SRC_DIR:-llmc}
B=dev/emu/build
CXX=${CXX:-g++}
PY=$(command -v python3 || command -v python)
passed=0; failed=0

rm -rf "$B"
mkdir -p "$B/src"
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
count() {  # print and count the PASS/FAIL lines of a file
  local f=$1
  grep -E '^(PASS|FAIL) ' "$f"
  passed=$((passed + $(grep -c '^PASS ' "$f")))
  failed=$((failed + $(grep -c '^FAIL ' "$f")))
}
finish() {
  echo "emu: $passed passed, $failed failed in $(elapsed "$T0") s (sources: $SRC)"
  [ "$failed" -eq 0 ]
  exit $?
}

# 1. transform: fails loudly on any launch or construct it cannot convert
if "$PY" dev/emu/transform.py "$SRC" "$B/src" >"$B/transform.log" 2>&1; then
  echo "PASS emu.transform"; passed=$((passed + 1))
else
  echo "FAIL emu.transform: $(tail -n 1 "$B/transform.log")"; failed=$((failed + 1)); finish
fi

# 2. build: the self-test, the harness in both precisions and the index probe (bf16; -fwrapv:
# an int product that overflows wraps as the GPU's 32-bit multiply does), in parallel
FLAGS=(-std=c++17 -O1 -g0 -pthread -I"$B/src/kernels" -Idev/emu/include -Wall -Wno-unused-function -Wno-unknown-pragmas -Wno-comment)
# uninitialised local variables get a recognisable garbage pattern instead of whatever
# the stack held (GCC >= 12, clang >= 8)
echo 'int main(){return 0;}' > "$B/probe.cpp"
"$CXX" -ftrivial-auto-var-init=pattern "$B/probe.cpp" -o "$B/probe" 2>/dev/null && FLAGS+=(-ftrivial-auto-var-init=pattern)
"$CXX" "${FLAGS[@]}" -DENABLE_FP32 dev/emu/selftest.cpp -o "$B/selftest" >"$B/build_selftest.log" 2>&1 & p0=$!
PRECS=" ${EMU_PRECISIONS:-fp32 bf16} "
BUILDS=("selftest $p0")
case "$PRECS" in *" fp32 "*) "$CXX" "${FLAGS[@]}" -DENABLE_FP32 dev/emu/harness.cpp -o "$B/harness_fp32" >"$B/build_fp32.log" 2>&1 & BUILDS+=("fp32 $!") ;; esac
case "$PRECS" in *" bf16 "*) "$CXX" "${FLAGS[@]}" dev/emu/harness.cpp -o "$B/harness_bf16" >"$B/build_bf16.log" 2>&1 & BUILDS+=("bf16 $!") ;; esac
RUN_PROBE=0
if [ "${EMU_PROBE:-}" = 1 ] || { [ "${EMU_PROBE:-}" != 0 ] && [ -z "${EMU_FILTER:-}" ]; }; then RUN_PROBE=1; fi
if [ $RUN_PROBE = 1 ]; then
  "$CXX" "${FLAGS[@]}" -fwrapv dev/emu/index_probe.cpp -o "$B/index_probe" >"$B/build_probe.log" 2>&1 & p3=$!
  BUILDS+=("probe $p3")
fi
ok=1
for x in "${BUILDS[@]}"; do
  set -- $x
  if wait "$2"; then echo "PASS emu.build_$1"; passed=$((passed + 1))
  else
    echo "FAIL emu.build_$1: $CXX failed: $(grep -m1 -E 'error' "$B/build_$1.log")"; failed=$((failed + 1)); ok=0
    head -n 30 "$B/build_$1.log" | sed 's/^/    /'
  fi
done
echo "emu: transform and build took $(elapsed "$T0") s"
[ $ok -eq 1 ] || finish

# 3. run: the self-test first (it shows that the emulator's own checks can fail), then
# both harnesses in parallel
ARGS=()
[ -n "${EMU_FILTER:-}" ] && ARGS=(--filter "$EMU_FILTER")
if [ -z "${EMU_FILTER:-}" ]; then
  "$B/selftest" >"$B/selftest.out" 2>"$B/selftest.log"; rc0=$?
  count "$B/selftest.out"
  [ $rc0 -eq 0 ] || grep -q '^FAIL' "$B/selftest.out" || { echo "FAIL emu.selftest: exit $rc0"; failed=$((failed + 1)); }
fi
HPIDS=()
for p in $PRECS; do "$B/harness_$p" ${ARGS[@]+"${ARGS[@]}"} >"$B/$p.out" 2>"$B/$p.log" & HPIDS+=("$p $!"); done
for x in "${HPIDS[@]}"; do
  set -- $x
  wait "$2"; rc=$?
  count "$B/$1.out"
  [ $rc -eq 0 ] || grep -q '^FAIL' "$B/$1.out" || { echo "FAIL emu.harness_$1: exit $rc $(tail -n 1 "$B/$1.log")"; failed=$((failed + 1)); }
done

# 3b. the full-size index probe: skipped with EMU_PROBE=0, and when EMU_FILTER is set unless
# EMU_PROBE=1
if [ $RUN_PROBE = 1 ]; then
  T3=$(date +%s.%N)
  PARGS=()
  [ -n "${EMU_PROBE_FILTER:-}" ] && PARGS=(--filter "$EMU_PROBE_FILTER")
  "$B/index_probe" ${PARGS[@]+"${PARGS[@]}"} >"$B/probe.out" 2>"$B/probe.log"; rc5=$?
  count "$B/probe.out"
  [ $rc5 -eq 0 ] || grep -q '^FAIL' "$B/probe.out" || { echo "FAIL emu.index_probe: exit $rc5 $(tail -n 1 "$B/probe.log")"; failed=$((failed + 1)); }
  echo "emu: the index probe took $(elapsed "$T3") s"
fi

# 4. the dev/cuda kernel ladders' validation under the emulator (run_ladders.sh): skipped
# with EMU_LADDERS=0, and when EMU_FILTER is set unless EMU_LADDERS=1
if [ "${EMU_LADDERS:-}" = 1 ] || { [ "${EMU_LADDERS:-}" != 0 ] && [ -z "${EMU_FILTER:-}" ]; }; then
  echo "emu: llmc checks done after $(elapsed "$T0") s; now the dev/cuda ladders"
  bash dev/emu/run_ladders.sh >"$B/ladders.out" 2>"$B/ladders.log"; rc3=$?
  count "$B/ladders.out"
  grep '^ladders:' "$B/ladders.out"
  [ $rc3 -eq 0 ] || grep -q '^FAIL' "$B/ladders.out" || { echo "FAIL emu.ladders: exit $rc3 $(tail -n 1 "$B/ladders.log")"; failed=$((failed + 1)); }
fi

# 5. the whole CUDA build of both trainers and their tests under the emulator (run_trainer.sh):
# skipped with EMU_TRAINER=0, and when EMU_FILTER is set unless EMU_TRAINER=1
if [ "${EMU_TRAINER:-}" = 1 ] || { [ "${EMU_TRAINER:-}" != 0 ] && [ -z "${EMU_FILTER:-}" ]; }; then
  echo "emu: now the trainer stage (test_llama, train_llama, test_dit, train_dit: CUDA build, emulated) after $(elapsed "$T0") s"
  bash dev/emu/run_trainer.sh >"$B/trainer.out" 2>"$B/trainer.log"; rc4=$?
  count "$B/trainer.out"
  grep -E '^trainer: ' "$B/trainer.out"
  [ $rc4 -eq 0 ] || grep -q '^FAIL' "$B/trainer.out" || { echo "FAIL emu.trainer: exit $rc4 $(tail -n 1 "$B/trainer.log")"; failed=$((failed + 1)); }
fi
finish
