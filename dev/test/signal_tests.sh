#!/usr/bin/env bash
# Signals (llmc/core/signals.h): make test runs this through dev/test/run_tests.sh.
#
#   bash dev/test/signal_tests.sh PYTHON WORKDIR
#
# A stop signal (SIGTERM, SIGINT, SIGHUP, SIGUSR1) sent mid-run: exit 75, the log names the
# signal, the stopped step's checkpoint exists, and --resume auto continues to the end with the
# same metrics and a bit-identical final checkpoint as the run never stopped; a second signal
# ends at once (exit 1, a message); the same under mpirun -np 2 (SIGTERM to mpirun, which Open
# MPI passes on after odls_base_sigkill_timeout, and SIGUSR1, which it forwards at once); stdout
# a closed pipe; a file-size limit under mpirun; a rank that never reaches MPI_Init.
# Prints "PASS name" or "FAIL name: why" per check; exit non-zero when anything failed. The
# runs wait for a step line in their output (polled) rather than sleeping a fixed time. make test:
# about 25 s on 2 busy cores; TEST_FULL=1 (about 55 s) adds train_dit on SIGTERM, the resume of the
# SIGTERM-to-mpirun run and the closed stdout under mpirun (mpirun's own
# SIGPIPE policy ends the job: see below).
set -u
PY=$1; W=$2
cd "$(dirname "$0")/../.."
mkdir -p "$W"
source dev/test/mpi_lib.sh  # pass, fail, FULL, OMP_NUM_THREADS=1
T0=$(date +%s.%N)
lap() { awk -v a="$T0" -v b="$(date +%s.%N)" -v n="$1" 'BEGIN { printf "%.1f s: %s\n", b - a, n }' >> "$W/times"; }
: > "$W/times"

"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 1 500 >/dev/null
LLAMA=(./train_llama_cpu --model tiny --V 512 --D 32 --L 2 --H 2 --KV 1 --F 64 --max-seq-len 32 --seq 32 --batch 4
       --warmup 2 --val-every 0 --sample-every 0 --train-data "$W/train.bin" --log-every 50)
DIT=(./train_dit_cpu --D 16 --L 2 --H 2 --FF 32 --channels 1 --frames 2 --height 8 --width 8 --NC 2 --batch 2
     --warmup 1 --val-clips 2 --val-every 0 --sample-every 0 --log-every 50)
# mpirun as a user launches a real run: the kill timeout set (Open MPI 4.1 on SIGTERM sends the
# ranks SIGCONT, waits the timeout, SIGTERM, waits it again, SIGKILL); the tests use a short one
MPI_K=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 --mca odls_base_sigkill_timeout)
mpirun_sig() { "${MPI_K[@]}" "$@"; }  # mpirun_sig KILL_TIMEOUT ARGS...

# wait_step LOG PID: until LOG has a step line (the run is in its loop) or PID is gone
wait_step() {
  local i
  for i in $(seq 600); do
    grep -q "^step" "$1" 2>/dev/null && return 0
    kill -0 "$2" 2>/dev/null || return 1
    sleep 0.05
  done
  return 1
}

# stopped_step DIR SIG: the step main.log says the run stopped after (empty: none)
stopped_step() { sed -n "s/^stopped by SIG$2.* after step \([0-9]*\) of .*/\1/p" "$1/main.log" 2>/dev/null | tail -n 1; }

# resumed_same NAME DIR REF FINAL CMD...: --resume auto finishes (exit 0) with REF's metrics and a
# bit-identical final checkpoint (ckpt_FINAL)
resumed_same() {
  local name=$1 dir=$2 ref=$3 final=$4; shift 4
  "$@" --run-dir "$dir" --resume auto >"$dir.resume.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ]; then fail "${name}_resume" "exit $rc: $(grep -m1 error "$dir.resume.log")"; return; fi
  local f; f=$(printf 'ckpt_%06d.bin' "$final")
  if ! cmp -s "$ref/$f" "$dir/$f"; then fail "${name}_resume" "$dir/$f differs from the uninterrupted run's"; return; fi
  if "$PY" dev/test/compare_metrics.py "$ref/metrics.jsonl" "$dir/metrics.jsonl" 1 0 >"$dir.cmp" 2>&1; then
    pass "${name}_resume"
  else fail "${name}_resume" "$(tail -n 1 "$dir.cmp")"; fi
}

# stop_one NAME SIG REF FINAL CKPT_EVERY CMD...: one process, SIG mid-run
stop_one() {
  local name=$1 sig=$2 ref=$3 final=$4 every=$5; shift 5
  local dir=$W/$name
  rm -rf "$dir"
  "$@" --ckpt-every "$every" --run-dir "$dir" >"$dir.log" 2>&1 &
  local pid=$!
  if ! wait_step "$dir.log" $pid; then wait $pid; fail "$name" "no step line before it ended (exit $?)"; return; fi
  kill -"$sig" $pid
  wait $pid
  local rc=$? k; k=$(stopped_step "$dir" "$sig")
  if [ $rc -eq 0 ]; then fail "$name" "exit 0: it finished before the signal (raise --steps)"; return; fi
  if [ $rc -ne 75 ] || [ -z "$k" ] || ! grep -q "stopped by SIG$sig.*resume auto" "$dir.log"; then
    fail "$name" "exit $rc (75 expected), stop line '$(grep -m1 "stopped by" "$dir/main.log")'"; return; fi
  if [ ! -f "$dir/$(printf 'ckpt_%06d.bin' "$k")" ]; then fail "$name" "no checkpoint of the stopped step $k"; return; fi
  pass "$name"
  resumed_same "$name" "$dir" "$ref" "$final" "$@" $REF_EVERY
}

# (a) one process: each stop signal, train_llama; SIGINT with --ckpt-every 0 (the stop writes one anyway)
STEPS=300
REF_EVERY="--ckpt-every 150"
"${LLAMA[@]}" --steps $STEPS $REF_EVERY --run-dir "$W/llama_ref" >"$W/llama_ref.log" 2>&1 || fail llama_ref "exit $?"
stop_one llama_sigterm TERM "$W/llama_ref" $STEPS 150 "${LLAMA[@]}" --steps $STEPS
stop_one llama_sigint INT "$W/llama_ref" $STEPS 0 "${LLAMA[@]}" --steps $STEPS
stop_one llama_sighup HUP "$W/llama_ref" $STEPS 150 "${LLAMA[@]}" --steps $STEPS
stop_one llama_sigusr1 USR1 "$W/llama_ref" $STEPS 150 "${LLAMA[@]}" --steps $STEPS
# train_dit
DSTEPS=600
"${DIT[@]}" --steps $DSTEPS $REF_EVERY --run-dir "$W/dit_ref" >"$W/dit_ref.log" 2>&1 || fail dit_ref "exit $?"
stop_one dit_sigusr1 USR1 "$W/dit_ref" $DSTEPS 150 "${DIT[@]}" --steps $DSTEPS
[ "$FULL" = 1 ] && stop_one dit_sigterm TERM "$W/dit_ref" $DSTEPS 0 "${DIT[@]}" --steps $DSTEPS

lap "a: one process"
# (b) a second signal ends at once: exit 1 and its message, whatever step it is in (a model
# whose steps take long enough that both signals land in the same one)
rm -rf "$W/second"
./train_llama_cpu --model tiny --V 512 --D 128 --L 2 --H 2 --KV 1 --F 512 --max-seq-len 64 --seq 64 --batch 16 \
  --val-every 0 --sample-every 0 --train-data "$W/train.bin" --steps 200 --run-dir "$W/second" >"$W/second.log" 2>&1 &
pid=$!
if wait_step "$W/second.log" $pid; then
  kill -TERM $pid; kill -INT $pid; wait $pid; rc=$?
  if [ $rc -eq 1 ] && grep -q "second stop signal: ending at once" "$W/second.log"; then pass second_signal
  else fail second_signal "exit $rc, message: $(grep -m1 -i "signal" "$W/second.log")"; fi
else wait $pid; fail second_signal "no step line before it ended (exit $?)"; fi

lap "b: second signal"
# (c) under mpirun -np 2 (--zero 1: the stop's checkpoint gathers every rank's shard, so the ranks
# must have agreed on its step). SIGUSR1 to mpirun: forwarded at once, the ranks exit 75, mpirun
# returns the first non-zero status, 75. SIGTERM to mpirun: the ranks get it only after the kill
# timeout, stop with a checkpoint and exit 75, but mpirun, terminated itself, returns 1.
MSTEPS=500
mpirun_sig 0 -np 2 "${LLAMA[@]}" --zero 1 --steps $MSTEPS $REF_EVERY --run-dir "$W/mpi_ref" >"$W/mpi_ref.log" 2>&1 ||
  fail mpi_ref "exit $?"
stop_np() {  # stop_np NAME SIG KILL_TIMEOUT EXPECTED_RC STEPS REF_DIR (empty: no resume)
  local name=$1 sig=$2 k=$3 want=$4 steps=$5 ref=$6 dir=$W/$1
  rm -rf "$dir"
  "${MPI_K[@]}" "$k" -np 2 "${LLAMA[@]}" --zero 1 --steps "$steps" --ckpt-every 150 --run-dir "$dir" >"$dir.log" 2>&1 &
  local pid=$!
  if ! wait_step "$dir.log" $pid; then wait $pid; fail "$name" "no step line before it ended (exit $?)"; return; fi
  kill -"$sig" $pid
  wait $pid
  local rc=$? s; s=$(stopped_step "$dir" "$sig")
  if [ $rc -ne "$want" ] || [ -z "$s" ] || [ ! -f "$dir/$(printf 'ckpt_%06d.bin' "$s")" ]; then
    fail "$name" "mpirun exit $rc ($want expected), stop line '$(grep -m1 "stopped by" "$dir/main.log")'"; return; fi
  pass "$name"
  [ -n "$ref" ] && resumed_same "$name" "$dir" "$ref" "$steps" mpirun_sig 0 -np 2 "${LLAMA[@]}" --zero 1 --steps "$steps" $REF_EVERY
}
# (the stop's checkpoint and its resume are the same code whichever signal: make test resumes the
# SIGUSR1 case, TEST_FULL=1 the SIGTERM one too; its kill timeout of 1 s, Open MPI's default, makes
# the ranks' SIGTERM come 1 s after mpirun's)
# the SIGTERM run: 2000 steps, so that it still runs when the ranks' SIGTERM comes a second after
# mpirun's, however fast the machine (it stops there: the steps after cost nothing)
stop_np np2_sigusr1_to_mpirun USR1 0 75 $MSTEPS "$W/mpi_ref"
if [ "$FULL" = 1 ]; then
  mpirun_sig 0 -np 2 "${LLAMA[@]}" --zero 1 --steps 2000 $REF_EVERY --run-dir "$W/mpi_ref2000" >"$W/mpi_ref2000.log" 2>&1 ||
    fail mpi_ref2000 "exit $?"
  stop_np np2_sigterm_to_mpirun TERM 1 1 2000 "$W/mpi_ref2000"
else stop_np np2_sigterm_to_mpirun TERM 1 1 2000 ""; fi

lap "c: mpirun"
# (d) stdout a closed pipe: the run goes on (SIGPIPE ignored), exits 0, main.log is whole and says
# once that stdout is gone
rm -rf "$W/pipe"
"${LLAMA[@]}" --steps 200 --ckpt-every 200 --log-every 1 --run-dir "$W/pipe" 2>"$W/pipe.err" | head -c 1 >/dev/null
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ] && grep -q "^done:" "$W/pipe/main.log" && grep -q "^step   200/200" "$W/pipe/main.log" &&
   [ "$(grep -c "stdout is gone" "$W/pipe/main.log")" = 1 ] && [ -f "$W/pipe/ckpt_000200.bin" ]; then pass closed_stdout
else fail closed_stdout "exit $rc; main.log ends '$(tail -n 1 "$W/pipe/main.log")'"; fi
rm -rf "$W/pipe_dit"
"${DIT[@]}" --steps 100 --run-dir "$W/pipe_dit" 2>"$W/pipe_dit.err" | true
rc=${PIPESTATUS[0]}
if [ "$rc" -eq 0 ] && grep -q "^done:" "$W/pipe_dit/main.log"; then pass closed_stdout_dit
else fail closed_stdout_dit "exit $rc; main.log ends '$(tail -n 1 "$W/pipe_dit/main.log")'"; fi
# Under mpirun the ranks' stdout is a pipe to mpirun, which stays open; mpirun's own stdout is the
# closed one, and Open MPI 4.1's mpirun aborts the job after 10 SIGPIPEs ("SIGPIPE detected on fd
# 13 - aborting") and then crashes itself (exit 139 or 1). What the trainer can do: the abort's
# SIGTERM reaches the ranks after the kill timeout and they stop with a checkpoint and the line
# in main.log (the ranks print little: a full pipe to mpirun would block rank 0).
if [ "$FULL" = 1 ]; then
  rm -rf "$W/pipe_np2"
  timeout -k 5 120 bash -c 'mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 \
    --mca odls_base_sigkill_timeout 3 -np 2 "$@" | head -c 1 >/dev/null' x "${LLAMA[@]}" --zero 1 --steps 3000 \
    --log-every 10 --run-dir "$W/pipe_np2" >"$W/pipe_np2.log" 2>&1
  s=$(stopped_step "$W/pipe_np2" TERM)
  if [ -n "$s" ] && [ -f "$W/pipe_np2/$(printf 'ckpt_%06d.bin' "$s")" ]; then pass closed_stdout_np2_stops_with_checkpoint
  else fail closed_stdout_np2_stops_with_checkpoint "main.log ends '$(tail -n 1 "$W/pipe_np2/main.log")'"; fi
fi

lap "d: closed stdout"
# (e) a file-size limit on the ranks under mpirun (ulimit -f 256 KiB: Open MPI's 4 MiB shared
# segment is refused, EFBIG, and it falls back with a warning; then the checkpoint crosses the
# limit): a message naming the file and the limit, exit 1, no death by SIGXFSZ
rm -rf "$W/fsize"
timeout -k 5 60 "${MPI_K[@]}" 0 -np 2 bash -c 'ulimit -f 256; exec "$@"' x "${LLAMA[@]}" --steps 20 --ckpt-every 20 \
  --run-dir "$W/fsize" >"$W/fsize.log" 2>&1
rc=$?
if [ $rc -ge 1 ] && [ $rc -le 123 ] && grep -q "ckpt_000020.bin: write failed: File too large.*ulimit -f" "$W/fsize.log" &&
   [ ! -f "$W/fsize/ckpt_000020.bin.tmp" ]; then pass np2_file_size_limit
else fail np2_file_size_limit "exit $rc: $(grep -m1 -i "error\|signal" "$W/fsize.log")"; fi

lap "e: file size"
# (f) a rank that never reaches MPI_Init (stopped before exec): rank 0 ends within --startup-timeout
# (5 s) plus a few seconds with the start-up message, and mpirun does not hang
cat >"$W/stop_rank1.sh" <<'EOF'
#!/bin/bash
[ "$OMPI_COMM_WORLD_RANK" = 1 ] && kill -STOP $$
exec "$@"
EOF
chmod +x "$W/stop_rank1.sh"
t=$(date +%s)
timeout -k 5 30 "${MPI_K[@]}" 0 -np 2 "$W/stop_rank1.sh" "${LLAMA[@]}" --steps 20 --startup-timeout 5 --run-dir "$W/startup" \
  >"$W/startup.log" 2>&1
rc=$? dt=$(( $(date +%s) - t ))
if [ $rc -eq 3 ] && [ $dt -le 12 ] && grep -q "MPI start-up .* did not complete within 5 s (--startup-timeout)" "$W/startup.log"; then
  pass np2_startup_timeout
else fail np2_startup_timeout "exit $rc after $dt s: $(grep -m1 -i "error" "$W/startup.log")"; fi

lap "f: start-up"
sed 's/^/signal tests: /' "$W/times"
exit $failed
