# shellcheck shell=bash
# Sourced by the main jobs (make tinystories, make dit): fresh_run_dir BASE prints the run
# directory a new run of the job uses. A trainer refuses a fresh run in a directory that
# holds another run (llmc/train/run_open.h), so a second `make tinystories` goes to BASE.2,
# then BASE.3, ..., and says so on stderr; RUN_DIR names the directory instead (with
# ARGS="--resume auto" to continue the run there, or ARGS="--start-over 1" to set it aside).
fresh_run_dir() {
  local base=$1 dir n=1
  if [ -n "${RUN_DIR:-}" ]; then echo "$RUN_DIR"; return; fi
  dir=$base
  while [ -e "$dir/run.json" ] || [ -e "$dir/main.log" ]; do
    n=$((n + 1))
    dir=$base.$n
  done
  if [ "$dir" != "$base" ]; then
    echo "$base holds an earlier run (kept as it is): this one goes to $dir (RUN_DIR=$base ARGS=\"--resume auto\"" \
         "would continue that one instead)" >&2
  fi
  echo "$dir"
}
