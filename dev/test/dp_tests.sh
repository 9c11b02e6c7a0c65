#!/usr/bin/env bash
# Multi-process tests of the CPU build under Open MPI (make test runs them through
# dev/test/run_tests.sh): data parallelism, ZeRO-1, the sharded vocabulary, checkpoints
# across layouts, --resume auto, corrupted checkpoints, the non-finite stop and faults.
#
#   bash dev/test/dp_tests.sh PYTHON WORKDIR [REF...]
#
# REF: reference files for test_llama under mpirun (dev/ref/*.lref and fresh ones).
# Prints one line per check, "PASS name" or "FAIL name: why"; exit status non-zero when
# anything failed. Every rank runs one OpenMP thread; mpirun may oversubscribe the cores
# and run as root (CI does). Of the flag sets on the references, make test runs the plain one
# and one other in turn per reference and rank count; TEST_FULL=1 runs all of them.
set -u
PY=$1; W=$2; shift 2
REFS=("$@")
cd "$(dirname "$0")/../.."
mkdir -p "$W"
source dev/test/mpi_lib.sh  # MPIRUN, run_np, pass, fail, agree
source dev/test/expect_error.sh  # expect_error, expect_mismatch

# ---------------------------------------------------------------------------
# llmc/parallel/comm.h: every collective at 3 ranks (odd sizes), and a rank that skips one
if [ -x build/test_comm ]; then
  run_np 3 build/test_comm > "$W/test_comm.log" 2>&1; rc=$?
  while IFS= read -r line; do
    case "$line" in PASS\ *) pass "comm3/${line#PASS }" ;; FAIL\ *) fail "comm3/${line#FAIL }" ;; esac
  done < "$W/test_comm.log"
  [ $rc -eq 0 ] || fail comm3 "exit $rc"
  run_np 3 build/test_comm --hang 1 > "$W/test_comm_hang.log" 2>&1; rc=$?
  if [ $rc -ne 0 ] && grep -q "did not complete within 1 s" "$W/test_comm_hang.log" && ! grep -q "^FAIL" "$W/test_comm_hang.log"; then
    pass comm3/skipped_collective_times_out
  else fail comm3/skipped_collective_times_out "exit $rc: $(grep -m1 -E 'error|FAIL' "$W/test_comm_hang.log")"; fi
else fail comm3 "build/test_comm is missing (make build/test_comm)"; fi

# ---------------------------------------------------------------------------
# test_llama with the reference batch split over the DP ranks
DPFLAGS=(
  ""
  "--zero 1"
  "--shard-vocab 1"
  "--zero 1 --shard-vocab 1"
  "--zero 1 --shard-vocab 1 --ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
  "--shard-vocab 1 --ffn-chunks 4 --ffn-chunk-dim seq --ce-chunks 3 --recompute 2"
  "--zero 1 --shard-vocab 1 --offload-optim 1"
)
for np in 2 4; do
  for f in "${REFS[@]}"; do
    base=$(basename "$f" .lref)
    B=$("$PY" -c "import struct; print(struct.unpack('<32i', open('$f','rb').read(128))[9])")
    if [ $((B % np)) -ne 0 ]; then
      # a batch that does not split: a clear error, not a crash or a hang
      run_np "$np" ./test_llama_cpu --ref "$f" >"$W/np${np}_$base.log" 2>&1
      rc=$?
      if [ $rc -ne 0 ] && grep -q "multiple of the number of ranks" "$W/np${np}_$base.log"; then pass "np${np}_${base}_B${B}_does_not_split"
      else fail "np${np}_${base}_B${B}_does_not_split" "exit $rc without the clear error"; fi
      continue
    fi
    pick_flagsets "${DPFLAGS[@]}"  # sampled: plain and one set in turn (mpi_lib.sh)
    for fl in "${PICKED[@]}"; do
      passes_np "np${np}_${base}_$(echo "${fl:-plain}" | tr -d ' -')" "$np" ./test_llama_cpu --ref "$f" $fl
    done
  done
done

# --offload-optim 1 (the optimizer state on the host, AdamW on the CPU) with ZeRO-1, at every
# make test: the state after the reference's steps bitwise that of the device update
passes_np np2_gqa_h4kv2_tied_zero1_offload_optim 2 ./test_llama_cpu --ref dev/ref/gqa_h4kv2_tied.lref --zero 1 --offload-optim 1

# gradient accumulation under data parallelism: each rank's 32 (or 16) rows of the 64-row
# reference as micro-steps, summed in the fp32 accumulator, with the reductions, ZeRO-1 and the
# sharded vocabulary (whose rows accumulate outside the buckets) of the last micro-step
for spec in "2 8 --zero 1 --shard-vocab 1" "4 4 --zero 1 --ffn-chunks 2"; do
  set -- $spec; np=$1; mb=$2; shift 2
  passes_np "np${np}_micro64_b64_microbatch${mb}_fp32acc$(echo "$*" | tr -d ' -')" "$np" \
    ./test_llama_cpu --ref dev/emu/ref/micro64_b64.lref --micro-batch "$mb" --fp32-grad-accum 1 "$@"
done

# ---------------------------------------------------------------------------
# train_llama
"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 1 500 >/dev/null && "$PY" dev/test/write_toy_shard.py "$W/val.bin" 5000 2 500 >/dev/null
COMMON=(--model tiny --V 512 --seq 32 --steps 6 --warmup 2 --val-every 3 --val-batches 2 --sample-every 0
        --train-data "$W/train.bin" --val-data "$W/val.bin")

train() {  # train NP RUN_DIR FLAGS...: a run that must succeed
  local np=$1 dir=$2; shift 2
  if [ "$np" = 1 ]; then ./train_llama_cpu "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1
  else run_np "$np" ./train_llama_cpu "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1; fi
  local rc=$?
  [ $rc -eq 0 ] || { echo "    run $dir failed (exit $rc):"; tail -n 4 "$dir.log" | sed 's/^/    /'; }
  return $rc
}
TOL=1e-5  # the one-process reference tolerance of test_llama (fp32)

# dp=2 and dp=4 against dp=1 at the same total batch (the same global micro-batch: same data)
train 1 "$W/dp1" --batch 4 --total-batch 256 --ckpt-every 3
train 2 "$W/dp2" --batch 2 --total-batch 256 && agree dp2_vs_dp1 "$W/dp1" "$W/dp2" 1 $TOL
train 2 "$W/dp2_zero_shard" --batch 2 --total-batch 256 --zero 1 --shard-vocab 1 && agree dp2_zero_shard_vs_dp1 "$W/dp1" "$W/dp2_zero_shard" 1 $TOL
train 4 "$W/dp4_zero" --batch 1 --total-batch 256 --zero 1 --ckpt-every 3 && agree dp4_zero_vs_dp1 "$W/dp1" "$W/dp4_zero" 1 $TOL
train 2 "$W/dp2_flags" --batch 2 --total-batch 256 --zero 1 --ffn-chunks 2 --ce-chunks 3 --offload-act -1 --recompute 1 \
  && agree dp2_memory_flags_vs_dp1 "$W/dp1" "$W/dp2_flags" 1 $TOL
# --offload-optim 1: the CPU's AdamW is the device's arithmetic, so the checkpoints are the same files
train 1 "$W/dp1_offload_optim" --batch 4 --total-batch 256 --ckpt-every 3 --offload-optim 1 \
  && same_ckpts dp1_offload_optim_ckpts_identical "$W/dp1" "$W/dp1_offload_optim"
train 4 "$W/dp4_zero_offload_optim" --batch 1 --total-batch 256 --zero 1 --ckpt-every 3 --offload-optim 1 \
  && same_ckpts dp4_zero_offload_optim_ckpts_identical "$W/dp4_zero" "$W/dp4_zero_offload_optim"

# bit-exact resume at dp=2 with --zero 1 (and the sharded vocabulary)
if env PYTHON="$PY" LAUNCH="${MPIRUN[*]} -np 2" bash dev/test/check_resume.sh ./train_llama_cpu "$W/resume_dp2" --zero 1 --shard-vocab 1 \
    >"$W/resume_dp2.log" 2>&1; then pass resume_dp2_zero_bitexact; else fail resume_dp2_zero_bitexact "$(tail -n 2 "$W/resume_dp2.log" | tr '\n' ' ')"; fi

# a dp=4 --zero 1 checkpoint resumed at dp=2 (with and without --zero) and at dp=1; and back
train 2 "$W/dp4_to_dp2" --batch 2 --total-batch 256 --zero 1 --resume "$W/dp4_zero/ckpt_000003.bin" \
  && agree dp4_ckpt_resumed_at_dp2_zero "$W/dp4_zero" "$W/dp4_to_dp2" 4 $TOL
train 2 "$W/dp4_to_dp2_nozero" --batch 2 --total-batch 256 --resume "$W/dp4_zero/ckpt_000003.bin" \
  && agree dp4_ckpt_resumed_at_dp2 "$W/dp4_zero" "$W/dp4_to_dp2_nozero" 4 $TOL
train 1 "$W/dp4_to_dp1" --batch 4 --total-batch 256 --resume "$W/dp4_zero/ckpt_000003.bin" \
  && agree dp4_ckpt_resumed_at_dp1 "$W/dp4_zero" "$W/dp4_to_dp1" 4 $TOL
train 4 "$W/dp1_to_dp4" --batch 1 --total-batch 256 --zero 1 --shard-vocab 1 --resume "$W/dp1/ckpt_000003.bin" \
  && agree dp1_ckpt_resumed_at_dp4_zero_shard "$W/dp1" "$W/dp1_to_dp4" 4 $TOL
if grep -q "data order restarts" "$W/dp4_to_dp2.log"; then fail dp4_ckpt_keeps_data_position "the loader position was not restored"
else pass dp4_ckpt_keeps_data_position; fi

# each rank writes its own pieces into the one file: the one-process checkpoint loaded at dp 4 --zero 1 (and with
# --shard-vocab 1 at dp 2, whose vocabulary rows each rank writes) and written again at once
# (LLMC_TEST_CKPT_AT_RESUME) is the same file but for the header's layout fields and the checksum
same_file() {  # same_file NAME NP FLAGS...
  local name=$1 np=$2 c="$W/dp1/ckpt_000003.bin"; shift 2
  local s; s=$(stat -c %s "$c")
  if LLMC_TEST_CKPT_AT_RESUME=1 train "$np" "$W/$name" --steps 3 --total-batch 256 --resume "$c" "$@" \
      && cmp -i 1024 -n $((s - 1032)) "$c" "$W/$name/ckpt_000003.bin" >"$W/$name.cmp" 2>&1; then pass "$name"
  else fail "$name" "$(cat "$W/$name.cmp" 2>/dev/null)"; fi
}
same_file ckpt_written_at_dp4_zero_is_the_one_process_file 4 --batch 1 --zero 1
same_file ckpt_written_at_dp2_shard_vocab_is_the_one_process_file 2 --batch 2 --shard-vocab 1
# a rank that cannot open the temporary file rank 0 made (LLMC_TEST_CKPT_UNSEEN_RANK: rank 1 opens another name,
# as where --run-dir is not on a file system every rank sees): every rank stops, naming the rank, its host and the
# file, and nothing is left in the run directory
rm -rf "$W/unseen"
LLMC_TEST_CKPT_UNSEEN_RANK=1 expect_error ckpt_tmp_unseen_by_a_rank "rank.1.on.host cannot.open.the.temporary every.rank.sees temporary.file.was.removed" \
  run_np 2 ./train_llama_cpu "${COMMON[@]}" --batch 2 --ckpt-every 3 --run-dir "$W/unseen"
if ls "$W/unseen" | grep -q ckpt_; then fail ckpt_tmp_unseen_leaves_nothing "$(ls "$W/unseen" | tr '\n' ' ')"; else pass ckpt_tmp_unseen_leaves_nothing; fi

# --resume auto: fresh start when there is no checkpoint, else the newest good one
mkdir -p "$W/auto"
train 2 "$W/auto" --batch 2 --resume auto --ckpt-every 3 --zero 1 && grep -q "no checkpoint" "$W/auto.log" \
  && pass resume_auto_fresh || fail resume_auto_fresh "$(tail -n 2 "$W/auto.log")"
cp -r "$W/auto" "$W/auto_full"
rm -f "$W/auto/ckpt_000006.bin"
head -c 1000 "$W/auto/ckpt_000003.bin" > "$W/auto/ckpt_000005.bin"   # a truncated newer one is skipped
: > "$W/auto/ckpt_000009.bin.tmp"                                     # a temporary file is never taken
"$PY" - "$W/auto/metrics.jsonl" <<'PYEOF'
import sys
p = sys.argv[1]; lines = open(p).read().splitlines()[:3]; open(p, "w").write("\n".join(lines) + "\n")
PYEOF
if train 2 "$W/auto" --batch 2 --resume auto --ckpt-every 3 --zero 1 && grep -q "resumed from .*ckpt_000003.bin" "$W/auto.log" \
    && grep -q "skips .*ckpt_000005.bin" "$W/auto.log"; then
  "$PY" - "$W/auto_full/metrics.jsonl" "$W/auto/metrics.jsonl" > "$W/auto.cmp" 2>&1 <<'PYEOF'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]; b = [json.loads(l) for l in open(sys.argv[2])]
assert [r["step"] for r in b] == [1, 2, 3, 4, 5, 6], [r["step"] for r in b]
for x, y in zip(a, b):
    for k in ("loss", "grad_norm", "val_loss"):
        assert x.get(k) == y.get(k), (x["step"], k, x.get(k), y.get(k))
PYEOF
  [ $? -eq 0 ] && pass resume_auto_newest_bitexact || fail resume_auto_newest_bitexact "$(tail -n 1 "$W/auto.cmp")"
else fail resume_auto_newest_bitexact "$(grep -E 'error|resumed|skips' "$W/auto.log" | head -n 3 | tr '\n' ' ')"; fi

# corrupted and truncated checkpoints are rejected with a clear message
C3="$W/dp1/ckpt_000003.bin"
cp "$C3" "$W/flipped.bin"
"$PY" - "$W/flipped.bin" <<'PYEOF'
import sys
p = sys.argv[1]; b = bytearray(open(p, "rb").read())
for i in (5000, 5001, len(b) // 2): b[i] ^= 0x5A
open(p, "wb").write(b)
PYEOF
head -c $(( $(stat -c %s "$C3") - 100 )) "$C3" > "$W/truncated.bin"
expect_error ckpt_corrupted_rejected "checksum corrupted" ./train_llama_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/rej1" --resume "$W/flipped.bin"
expect_error ckpt_truncated_rejected "truncated" ./train_llama_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/rej2" --resume "$W/truncated.bin"
expect_error ckpt_corrupted_rejected_dp2 "checksum corrupted" run_np 2 ./train_llama_cpu "${COMMON[@]}" --batch 2 --run-dir "$W/rej3" --resume "$W/flipped.bin"
# a NaN with a checksum that holds: every rank stops, naming the file (rank 0 finds it, the others are told)
"$PY" dev/test/nan_checkpoint.py "$C3" "$W/nan.bin"
expect_error ckpt_nan_rejected_dp2 "holds a non-finite parameter" run_np 2 ./train_llama_cpu "${COMMON[@]}" --batch 2 --run-dir "$W/rej4" --resume "$W/nan.bin"
# each rank checks its own pieces: NaNs in AdamW m that ranks 2 and 3 read under --zero 1; all name the first
first=$("$PY" dev/test/nan_checkpoint.py "$C3" "$W/nan_m.bin" m 0.9 0.6)
expect_error ckpt_nan_rejected_dp4_zero_first_index "holds.a.non-finite.AdamW.m.at.element.$first.(a" \
  run_np 4 ./train_llama_cpu "${COMMON[@]}" --batch 1 --zero 1 --run-dir "$W/rej5" --resume "$W/nan_m.bin"

# a write that fails (the file size limit stands in for a full disk) removes its temporary file
mkdir -p "$W/full_disk"
( trap '' XFSZ; ulimit -f 600; exec ./train_llama_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/full_disk" --ckpt-every 3 ) >"$W/full_disk.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "temporary file was removed" "$W/full_disk.log" && ! ls "$W/full_disk"/*.tmp >/dev/null 2>&1 \
    && ! ls "$W/full_disk"/ckpt_*.bin >/dev/null 2>&1; then pass ckpt_failed_write_cleans_up
else fail ckpt_failed_write_cleans_up "exit $rc; $(ls "$W/full_disk" | tr '\n' ' '); $(grep -m1 error "$W/full_disk.log")"; fi

# a non-finite loss stops the run before the update, with the last checkpoint intact (the NaN planted by
# --test-nan-update into the parameters after step 7 reaches the loss of step 8: no checkpoint step checks it first)
for np in 1 2; do
  d="$W/nan_np$np"; rm -rf "$d"
  if [ "$np" = 1 ]; then ./train_llama_cpu "${COMMON[@]}" --batch 4 --steps 30 --val-every 0 --test-nan-update 7 --ckpt-every 5 --run-dir "$d" >"$d.log" 2>&1
  else run_np 2 ./train_llama_cpu "${COMMON[@]}" --batch 2 --steps 30 --val-every 0 --test-nan-update 7 --ckpt-every 5 --run-dir "$d" >"$d.log" 2>&1; fi
  rc=$?
  last=$(ls "$d"/ckpt_*.bin 2>/dev/null | sort | tail -n 1)
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "non-finite" "$d.log" && [ -n "$last" ] && grep -q "$(basename "$last") is untouched" "$d.log" \
      && ./train_llama_cpu "${COMMON[@]}" --batch $((4 / np)) --steps "$(basename "$last" .bin | sed 's/ckpt_0*//')" --val-every 0 \
           --run-dir "$d/check" --resume "$last" >"$d.check.log" 2>&1; then pass "nan_stop_np$np"
  else fail "nan_stop_np$np" "exit $rc; $(grep -m1 -E 'error|non-finite' "$d.log"); last checkpoint: ${last:-none}"; fi
done

# ---------------------------------------------------------------------------
# faults
# mismatched flags across ranks: a clear error naming the field
expect_error mismatched_flags "disagree lr rank" "${MPIRUN[@]}" -np 1 ./train_llama_cpu "${COMMON[@]}" --batch 2 --run-dir "$W/mm" --lr 1e-3 : \
  -np 1 ./train_llama_cpu "${COMMON[@]}" --batch 2 --run-dir "$W/mm" --lr 2e-3
# every flag is compared, before the groups are split (a different --cp-mode would split them differently)
expect_mismatch mismatched_cp_mode cp-mode ring ulysses ./train_llama_cpu "${COMMON[@]}" --batch 2 --cp 2 --run-dir "$W/mm2"
expect_mismatch mismatched_attention attention auto fp32 ./train_llama_cpu "${COMMON[@]}" --batch 2 --run-dir "$W/mm3"
expect_mismatch mismatched_ffn_chunks ffn-chunks 1 2 ./train_llama_cpu "${COMMON[@]}" --batch 2 --run-dir "$W/mm4"

# fault NAME SIGNAL CKPT TIMEOUT: a 2-rank run until checkpoint CKPT exists, then SIGNAL to
# one rank; waits up to 30 s for the job to end. Sets ended (1 when it did), rc, secs, victim.
fault() {
  local name=$1 sig=$2 ckpt=$3 timeout=$4 d="$W/$1"
  rm -rf "$d"
  "${MPIRUN[@]}" -np 2 ./train_llama_cpu "${COMMON[@]}" --batch 2 --steps 100000 --val-every 0 --ckpt-every 2 \
    --comm-timeout "$timeout" --run-dir "$d" >"$d.log" 2>&1 &
  local mp=$! _
  for _ in $(seq 1 300); do [ -f "$d/$ckpt" ] && break; sleep 0.1; done
  signal_one_rank $mp "$sig" train_llama_cpu
}

# a rank killed with kill -9 mid-run: the job ends within the timeout, the last checkpoint is intact
fault kill KILL ckpt_000004.bin 20
last=$(ls "$W/kill"/ckpt_*.bin 2>/dev/null | sort | tail -n 1)
if [ -n "$victim" ] && [ $ended = 1 ] && [ $rc -ne 0 ] && [ -n "$last" ] \
    && ./train_llama_cpu "${COMMON[@]}" --batch 4 --steps "$(basename "$last" .bin | sed 's/ckpt_0*//')" --val-every 0 \
         --run-dir "$W/kill/check" --resume "$last" >"$W/kill.check.log" 2>&1; then
  pass "rank_killed_job_ends (in ${secs}s, exit $rc, $(basename "$last") intact)"
else fail rank_killed_job_ends "victim ${victim:-none}, ended $ended after ${secs}s, exit $rc, last ${last:-none}"; fi

# a rank that hangs (stopped): the others give up after --comm-timeout with a message naming the collective
fault hang STOP ckpt_000002.bin 3
if [ $ended = 1 ] && [ $rc -ne 0 ] && grep -q "did not complete within 3 s" "$W/hang.log"; then
  pass "rank_hangs_timeout (in ${secs}s: $(grep -o '[a-z -]* of [0-9]* elements over the [a-z]* group' "$W/hang.log" | head -n 1))"
else fail rank_hangs_timeout "ended $ended after ${secs}s, exit $rc: $(grep -m1 error "$W/hang.log")"; fi

# the one-process build without MPI runs alone, and refuses to be one of several ranks
if [ -x build/train_llama_cpu_nompi ]; then
  if ./build/train_llama_cpu_nompi "${COMMON[@]}" --batch 4 --steps 2 --run-dir "$W/nompi" >"$W/nompi.log" 2>&1; then pass nompi_build_runs
  else fail nompi_build_runs "$(tail -n 2 "$W/nompi.log")"; fi
  expect_error nompi_build_under_mpirun "no MPI" run_np 2 ./build/train_llama_cpu_nompi "${COMMON[@]}" --batch 2 --steps 2 --run-dir "$W/nompi2"
fi
exit $failed
