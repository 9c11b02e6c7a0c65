#!/usr/bin/env bash
# The run directory's rules (llmc/train/run_open.h, llmc/core/run_dir.h) through the trainers, one
# process and under mpirun: a fresh run refused where a run lives, --start-over setting the
# earlier run aside byte for byte, --keep-last, a second job refused while one holds the
# directory, the lock released at the end, and the main jobs' choice of a new directory on a
# second run (scripts/fresh_run_dir.sh). The hostile states (links, FIFOs, long paths, thousands
# of checkpoints, lock records) are the fuzz stage's rundir kind (dev/test/fuzz.py).
#   bash dev/test/run_dir_tests.sh PY WORKDIR
set -u
PY=$1
W=$2
cd "$(dirname "$0")/../.."
mkdir -p "$W"
source dev/test/mpi_lib.sh
"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 3 511
L=(./train_llama_cpu --model tiny --V 512 --batch 2 --seq 32 --val-every 0 --train-data "$W/train.bin" --log-every 10)

# refused_with NAME WORDS CMD...: exits 1..123 and the output names every word
refused_with() {
  local name=$1 words=$2 rc w; shift 2
  "$@" >"$W/$name.log" 2>&1; rc=$?
  for w in $words; do
    grep -qi -- "$w" "$W/$name.log" || { fail "$name" "exit $rc, the message lacks '$w': $(head -c 300 "$W/$name.log")"; return; }
  done
  if [ $rc -ge 1 ] && [ $rc -le 123 ]; then pass "$name"; else fail "$name" "exit $rc"; fi
}
# same_tree NAME A B: the two directories hold the same files, byte for byte
same_tree() {
  if diff -r "$2" "$3" >"$W/$1.diff" 2>&1; then pass "$1"; else fail "$1" "$(head -n 3 "$W/$1.diff" | tr '\n' ' ')"; fi
}

# --- one process
R=$W/one
"${L[@]}" --steps 4 --ckpt-every 2 --run-dir "$R" >"$W/first.log" 2>&1 || fail first_run "exit $?"
cp -r "$R" "$W/one.before"
refused_with fresh_run_refused "already holds --resume --start-over" "${L[@]}" --steps 2 --run-dir "$R"
same_tree fresh_run_refused_untouched "$W/one.before" "$R"
refused_with other_seed_refused "another seed" "${L[@]}" --steps 6 --seed 9 --run-dir "$R" --resume auto
same_tree other_seed_refused_untouched "$W/one.before" "$R"
if "${L[@]}" --steps 3 --ckpt-every 1 --run-dir "$R" --start-over 1 >"$W/over.log" 2>&1 &&
   grep -q "moved to .*set_aside/1/" "$W/over.log"; then pass start_over
else fail start_over "$(tail -n 3 "$W/over.log" | tr '\n' ' ')"; fi
same_tree start_over_kept_earlier_run "$W/one.before" "$R/set_aside/1"
[ ! -e "$R/run.lock" ] && pass lock_released_at_end || fail lock_released_at_end "run.lock is still there"
"${L[@]}" --steps 7 --ckpt-every 1 --keep-last 2 --run-dir "$R" --resume auto >"$W/keep.log" 2>&1
kept=$(cd "$R" && ls ckpt_*.bin | tr '\n' ' ')
[ "$kept" = "ckpt_000006.bin ckpt_000007.bin " ] && pass keep_last || fail keep_last "left: $kept"

# --- the main jobs: a second run goes to a new directory, said on screen
source scripts/fresh_run_dir.sh
first=$(fresh_run_dir "$R" 2>"$W/fresh.err")
[ "$first" = "$R.2" ] && grep -q "holds an earlier run" "$W/fresh.err" && pass main_job_new_directory ||
  fail main_job_new_directory "got '$first'"

# --- under mpirun: rank 0 decides, every rank stops with it; a second job is refused while one holds the directory
M=$W/mpi
run_np 2 "${L[@]}" --steps 3 --ckpt-every 1 --run-dir "$M" >"$W/np2.log" 2>&1 || fail np2_first_run "exit $?"
cp -r "$M" "$W/mpi.before"
refused_with np2_fresh_run_refused "already holds" run_np 2 "${L[@]}" --steps 3 --run-dir "$M"
same_tree np2_fresh_run_refused_untouched "$W/mpi.before" "$M"
run_np 2 "${L[@]}" --steps 100000 --run-dir "$M" --resume auto >"$W/holder.log" 2>&1 &
holder=$!
for _ in $(seq 200); do grep -q "^step" "$W/holder.log" 2>/dev/null && break; sleep 0.05; done
refused_with np2_second_job_refused "in use pid" run_np 2 "${L[@]}" --steps 5 --run-dir "$M" --resume auto
kill -INT "$holder" 2>/dev/null; pkill -f -- "--run-dir $M --resume auto" 2>/dev/null; wait "$holder" 2>/dev/null
if run_np 2 "${L[@]}" --steps 4 --ckpt-every 1 --run-dir "$M" --resume auto >"$W/np2_resume.log" 2>&1 &&
   grep -q "resumed from" "$W/np2_resume.log"; then pass np2_resume_after_holder
else fail np2_resume_after_holder "$(tail -n 3 "$W/np2_resume.log" | tr '\n' ' ')"; fi
exit $failed
