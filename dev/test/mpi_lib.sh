# Shared by the multi-process test scripts (dp_tests.sh, tp_tests.sh), sourced after they set
# PY and W: the Open MPI launcher as the tests run it (one OpenMP thread per rank, may
# oversubscribe the cores and run as root, as CI does), the PASS/FAIL lines and the
# metrics comparison.
# --mca odls_base_sigkill_timeout 0: when a rank ends the job (every expected-error check does), the
# others are killed at once instead of after Open MPI's default second (measured: 1.06 s -> 0.07 s
# for `mpirun -np 2 sh -c 'exit 1'`; about 20 such runs a make test). The trainers do handle
# SIGTERM (a checkpoint of the step, exit 75: llmc/core/signals.h), but these runs are checks of
# an error that already ended the job, with nothing to save; a real run under mpirun sets the
# timeout long enough for the checkpoint (README, "Signals"), and dev/test/signal_tests.sh tests that.
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca odls_base_sigkill_timeout 0 -x OMP_NUM_THREADS=1)
export OMP_NUM_THREADS=1
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; failed=1; }
# make test samples the flag sets of a layout matrix; TEST_FULL=1 (make test-full, CI) runs them
# all. pick_flagsets SETS... sets PICKED to the sets to run at one layout and reference: all of
# them in full; sampled, the first (the plain run) and one other in turn, so that every set runs
# at several layouts (the rotation is global, across the script's loops)
FULL=${TEST_FULL:-0}
PICK_TURN=0
pick_flagsets() {
  if [ "$FULL" = 1 ] || [ $# -le 2 ]; then PICKED=("$@"); return; fi
  local sets=("$@")
  PICKED=("$1" "${sets[$((1 + PICK_TURN % ($# - 1)))]}")
  PICK_TURN=$((PICK_TURN + 1))
}
# a hung collective must cost one check, not the whole make test
RUN_LIMIT=${RUN_LIMIT:-180}
# (each run's wall time goes to $W/run_times, for finding where the minutes go)
run_np() {
  local np=$1 t=$(date +%s.%N) rc; shift
  timeout -k 10 "$RUN_LIMIT" "${MPIRUN[@]}" -np "$np" "$@"; rc=$?
  awk -v a="$t" -v b="$(date +%s.%N)" -v c="np$np $*" 'BEGIN { printf "%.2f %s\n", b - a, c }' >> "$W/run_times"
  return $rc
}
# passes_np NAME NP CMD...: CMD (a test program) under mpirun -np NP must end with its PASS line
passes_np() {
  local name=$1 np=$2; shift 2
  if run_np "$np" "$@" >"$W/$name.log" 2>&1 && grep -q "^PASS" "$W/$name.log"; then pass "$name"
  else fail "$name" "$(grep -E 'FAIL|error' "$W/$name.log" | head -n 3 | tr '\n' ' ')"; fi
}
# agree NAME A_DIR B_DIR FIRST_STEP TOL: their metrics.jsonl agree from FIRST_STEP on (compare_metrics.py)
agree() {
  if "$PY" dev/test/compare_metrics.py "$2/metrics.jsonl" "$3/metrics.jsonl" "$4" "$5" >"$W/$1.cmp" 2>&1; then pass "$1"
  else fail "$1" "$(tail -n 1 "$W/$1.cmp")"; fi
}
# run PROGRAM NP RUN_DIR FLAGS...: ./train_PROGRAM_cpu (llama, dit) with the caller's LCOMMON or DCOMMON
# flags, on NP ranks, its log beside the run directory: a run that must succeed (its log's tail when not)
run() {
  local prog=$1 np=$2 dir=$3 common; shift 3
  if [ "$prog" = llama ]; then common=("${LCOMMON[@]}"); else common=("${DCOMMON[@]}"); fi
  rm -rf "$dir"
  if [ "$np" = 1 ]; then "./train_${prog}_cpu" "${common[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1
  else run_np "$np" "./train_${prog}_cpu" "${common[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1; fi
  local rc=$?
  [ $rc -eq 0 ] || { echo "    run $dir failed (exit $rc):"; tail -n 4 "$dir.log" | sed 's/^/    /'; }
  return $rc
}
# same_ckpts NAME A_DIR B_DIR: every checkpoint of A_DIR is in B_DIR, byte for byte (a flag that
# leaves the arithmetic as it is, such as --offload-optim 1, must leave the files as they are)
same_ckpts() {
  local n=0 c why=""
  for c in "$2"/ckpt_*.bin; do
    [ -f "$c" ] || continue
    n=$((n + 1))
    cmp -s "$c" "$3/$(basename "$c")" || why="${why:-$(basename "$c") differs or is missing}"
  done
  [ $n -gt 0 ] || why="no checkpoint in $2"
  if [ -z "$why" ]; then pass "$1 ($n checkpoints)"; else fail "$1" "$why"; fi
}
# signal_one_rank MPIRUN_PID SIGNAL PROGRAM: sends SIGNAL to one rank (PROGRAM) of the job, waits up to
# 30 s for the job to end, then clears up. Sets victim, ended (1 when the job ended), rc and secs.
signal_one_rank() {
  local mp=$1 sig=$2 prog=$3 t0 _
  victim=$(pgrep -P "$mp" -f "$prog" | tail -n 1)
  t0=$(date +%s)
  [ -n "$victim" ] && kill "-$sig" "$victim"
  ended=0
  for _ in $(seq 1 300); do kill -0 "$mp" 2>/dev/null || { ended=1; break; }; sleep 0.1; done
  [ -n "$victim" ] && kill -9 "$victim" 2>/dev/null
  [ $ended = 1 ] || kill -9 "$mp" 2>/dev/null
  wait "$mp"; rc=$?
  secs=$(( $(date +%s) - t0 ))
}
# toy_tokenizer PATH: a llama2.c tokenizer of 512 pieces " t<id>", which keeps sampled stories printable
toy_tokenizer() {
  "$PY" - "$1" <<'PYEOF'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", 16))
    for i in range(512):
        p = b" t%d" % i
        f.write(struct.pack("<fi", -float(i), len(p)) + p)
PYEOF
}
if ! command -v mpirun >/dev/null 2>&1; then
  fail mpi_available "mpirun not found (apt-get install openmpi-bin libopenmpi-dev; .ci/run installs them)"; exit 1
fi
