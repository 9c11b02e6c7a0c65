#!/usr/bin/env bash
# Multi-process tests of context parallelism (--cp, llmc/parallel/context_parallel.h) in the
# CPU build under Open MPI (make test runs them through dev/test/run_tests.sh):
#   a. test_llama at cp 2 and cp 4 in each mode (ring, ulysses), hybrid cp 4 = 2 ways x 2 ring
#      members, tp 2 x cp 2 (both --tp-mode), dp 2 x cp 2 with --zero 1, with the memory flags,
#      --shard-vocab and gradient accumulation, on fresh references whose T splits into 2 x cp
#      chunks (GQA ratios 2 and 4, kv heads fewer than the Ulysses ways) and on the committed
#      references that split;
#   b. the ring's overwritten-block bug planted: must fail;
#   c. train_llama under cp against one process (1e-5 over 20 steps, also with gradient
#      accumulation), the comm bytes counted against the formula, the stories, checkpoints
#      resumed across layouts (cp 4 -> cp 1, tp 2 x cp 2, dp 2; cp 1 -> cp 2), bit-exact resume;
#   d. clear errors for layouts that cannot work;
#   e. the measured peak saves what the plan saves against cp 1, within 5%;
#   f. test_dit and train_dit likewise (plain ring, ulysses, hybrid, with tp and dp; the GIFs
#      identical to one process; checkpoints across layouts).
#
#   bash dev/test/cp_tests.sh PYTHON WORKDIR
#
# TEST_FULL=1 runs every flag set at every layout; otherwise each layout runs a sample of
# them (every flag set still runs at some layout). Prints "PASS name" / "FAIL name: why".
set -u
PY=$1; W=$2
cd "$(dirname "$0")/../.."
mkdir -p "$W"
t_start=$(date +%s)
source dev/test/mpi_lib.sh  # MPIRUN, run_np, pass, fail, agree
source dev/test/expect_error.sh
for b in test_llama_cpu train_llama_cpu; do
  [ -x "./$b" ] || { fail "build_$b" "./$b is missing (make $b)"; exit 1; }
done

# tl NAME NP ARGS...: test_llama under mpirun ends with its PASS line, at the cp layout asked for
tl() {
  local name=$1 np=$2; shift 2
  run_np "$np" ./test_llama_cpu "$@" >"$W/$name.log" 2>&1
  local rc=$? cp=1 mode=ring a
  for ((a = 1; a <= $#; a++)); do
    case ${!a} in --cp) b=$((a + 1)); cp=${!b} ;; --cp-mode) b=$((a + 1)); mode=${!b} ;; esac
  done
  if [ $rc -eq 0 ] && grep -q "^PASS" "$W/$name.log" && ! grep -q "^FAIL" "$W/$name.log" \
      && grep -q "^context parallelism: cp $cp --cp-mode $mode" "$W/$name.log"; then pass "$name"
  else fail "$name" "exit $rc; $(grep -E 'FAIL|error|context' "$W/$name.log" | head -n 3 | tr '\n' ' ')"; fi
}
flagname() { echo "${1:-plain}" | sed 's/ -1/ all/g' | tr -d ' -'; }

# ---------------------------------------------------------------------------
# fresh references: name V D L H KV F max_seq_len B T n_steps tied seed
#   cp_gqa4_kv2: GQA ratio 4, 2 kv heads (fewer than 4 Ulysses ways: replicated), T 16 = 2 x 4 x 2
#   cp_gqa2_kv2_tied: ratio 2, tied, B 4 (dp 2 x cp 2 with micro-steps), T 16
#   cp_mha_h4_t24: H = KV = 4, odd V and F, T 24 (cp 2 ring: 4 chunks of 6; hybrid: 8 of 3)
while read -r name V D L H KV F S B T N tied seed; do
  if ! "$PY" dev/ref/reference_llama.py --quiet --out "$W/$name.lref" --V "$V" --D "$D" --L "$L" --H "$H" --KV "$KV" \
      --F "$F" --max-seq-len "$S" --B "$B" --T "$T" --n-steps "$N" --tied "$tied" --seed "$seed" >"$W/gen_$name.log" 2>&1; then
    fail "fresh_$name" "reference_llama.py failed: $(tail -n 2 "$W/gen_$name.log" | tr '\n' ' ')"
  fi
done <<'CONFIGS'
cp_gqa4_kv2 67 64 2 8 2 90 16 2 16 3 0 51
cp_gqa2_kv2_tied 50 32 2 4 2 45 24 4 16 3 1 52
cp_mha_h4_t24 61 32 2 4 4 57 24 2 24 2 0 53
CONFIGS
G4=$W/cp_gqa4_kv2.lref; G2=$W/cp_gqa2_kv2_tied.lref; MH=$W/cp_mha_h4_t24.lref; C=dev/ref/gqa_h4kv2_tied.lref

# ---------------------------------------------------------------------------
# a. test_llama
FLAGSETS=(
  ""
  "--ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
  "--shard-vocab 1 --ffn-chunks 4 --ffn-chunk-dim seq --ce-chunks 3 --recompute 2"
  "--zero 1 --offload-act 1 --recompute 2"
)
for spec in \
    "2 $G4 --cp 2 --cp-mode ring" "2 $G4 --cp 2 --cp-mode ulysses" \
    "4 $G4 --cp 4 --cp-mode ring" "4 $G4 --cp 4 --cp-mode ulysses" "4 $G4 --cp 4 --cp-mode hybrid --cp-ulysses 2" \
    "2 $G2 --cp 2 --cp-mode ring" "4 $G2 --cp 4 --cp-mode ulysses" \
    "4 $MH --cp 2 --cp-mode ring --tp 2" "4 $MH --cp 2 --cp-mode ulysses --tp 2 --tp-mode reducescatter" \
    "4 $G2 --cp 2 --cp-mode ring --zero 1" "4 $G2 --cp 2 --cp-mode ulysses --zero 1" \
    "4 $MH --cp 4 --cp-mode hybrid --cp-ulysses 2" \
    "2 $C --cp 2 --cp-mode ring" "4 $C --cp 4 --cp-mode ulysses" "4 $C --cp 2 --cp-mode ring --tp 2 --tp-mode reducescatter"; do
  set -- $spec; np=$1; f=$2; shift 2
  lay=$(echo "np$np $*" | sed 's/--cp-ulysses /u/; s/--cp-mode //; s/--tp-mode reducescatter/rs/; s/--//g; s/ /_/g')
  pick_flagsets "${FLAGSETS[@]}"  # sampled: the plain run and one set in turn (mpi_lib.sh)
  for fl in "${PICKED[@]}"; do
    tl "${lay}_$(basename "$f" .lref)_$(flagname "$fl")" "$np" --ref "$f" "$@" $fl
  done
done
# gradient accumulation: each DP rank's 2 samples as micro-steps of 1, summed in the fp32 accumulator
tl np4_cp2xdp2_ring_G2_microbatch1_fp32acc_shardvocab 4 --ref "$G2" --cp 2 --cp-mode ring --micro-batch 1 --fp32-grad-accum 1 \
  --shard-vocab 1 --zero 1
tl np4_cp2xdp2_ulysses_G2_microbatch1 4 --ref "$G2" --cp 2 --cp-mode ulysses --micro-batch 1

# ---------------------------------------------------------------------------
# b. the ring's received block overwritten before backward reads it: the check must fail
for spec in "2 $G4 --cp 2 --cp-mode ring" "4 $G4 --cp 4 --cp-mode hybrid --cp-ulysses 2"; do
  set -- $spec; np=$1; f=$2; shift 2
  name=planted_cp_bug_np${np}_$(echo "$*" | tr -d ' -')
  run_np "$np" ./test_llama_cpu --ref "$f" "$@" --test-plant-cp-bug 1 >"$W/$name.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && grep -q "^FAIL" "$W/$name.log" \
      && grep -q "PLANTED BUG" "$W/$name.log"; then pass "${name}_fails"
  else fail "${name}_fails" "exit $rc: the planted bug went unnoticed"; fi
done

# ---------------------------------------------------------------------------
# c. train_llama: the same model and global batch at every layout (256 tokens a step)
"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 1 500 >/dev/null && "$PY" dev/test/write_toy_shard.py "$W/val.bin" 5000 2 500 >/dev/null
toy_tokenizer "$W/tok512.bin"
COMMON=(--model tiny --V 512 --H 4 --KV 2 --F 170 --seq 32 --total-batch 256 --steps 20 --warmup 2 --val-every 10 --val-batches 2
        --train-data "$W/train.bin" --val-data "$W/val.bin" --sample-every 20 --sample-len 23 --tokenizer "$W/tok512.bin")
# run_trainer BINARY COMMON_ARRAY NP RUN_DIR FLAGS...: a run that must succeed (one process without mpirun)
run_trainer() {
  local bin=$1 np=$3 dir=$4
  local -n common=$2
  shift 4
  if [ "$np" = 1 ]; then "$bin" "${common[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1
  else run_np "$np" "$bin" "${common[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1; fi
  local rc=$?
  [ $rc -eq 0 ] || fail "train_$(basename "$dir")" "exit $rc: $(grep -m 2 -iE 'error|fail' "$dir.log" | tr '\n' ' ')"
  return $rc
}
train() { run_trainer ./train_llama_cpu COMMON "$@"; }
stories() { awk '/^--- sample ---$/ {on = 1; next} /^--------------$/ {on = 0} on' "$1"; }
TOL=1e-5
train 1 "$W/cp1" --batch 4 --ckpt-every 10
train 1 "$W/cp1_ga" --batch 2 --ckpt-every 0
for spec in "2 cp2_ring --batch 4 --cp 2 --cp-mode ring --ckpt-every 10" \
            "2 cp2_ulysses --batch 4 --cp 2 --cp-mode ulysses" \
            "4 cp4_ring --batch 4 --cp 4 --cp-mode ring --ckpt-every 10" \
            "4 cp4_hybrid_u2 --batch 4 --cp 4 --cp-mode hybrid --cp-ulysses 2 --recompute 2 --ffn-chunks 2" \
            "4 tp2xcp2_ring_rs --batch 4 --cp 2 --cp-mode ring --tp 2 --tp-mode reducescatter --shard-vocab 1" \
            "4 dp2xcp2_ulysses_zero --batch 2 --cp 2 --cp-mode ulysses --zero 1 --shard-vocab 1 --offload-act -1" \
            "2 cp2_ring_ga --batch 2 --cp 2 --cp-mode ring --fp32-grad-accum 1" \
            "4 cp4_ulysses_ga --batch 2 --cp 4 --cp-mode ulysses --ce-chunks 2"; do
  set -- $spec; np=$1; n=$2; shift 2
  train "$np" "$W/$n" "$@" || continue
  ref=cp1; [ "${n%_ga}" != "$n" ] && ref=cp1_ga
  agree "train_${n}_vs_one_process" "$W/$ref" "$W/$n" 1 $TOL
  pred=$(grep -m 1 "^comm per step, predicted" "$W/$n.log" | sed 's/.*: //')
  got=$(grep -m 1 "^comm per step, counted" "$W/$n.log" | sed 's/.*: //')
  if [ -n "$pred" ] && [ "$pred" = "$got" ] && grep -qE "(ring send-recv|ulysses all-to-all)" <<<"$pred"; then pass "comm_bytes_${n}_equal_formula"
  else fail "comm_bytes_${n}_equal_formula" "predicted '$pred', counted '$got'"; fi
  if [ -n "$(stories "$W/$n.log")" ] && [ "$(stories "$W/$n.log")" = "$(stories "$W/$ref.log")" ]; then pass "train_${n}_stories_match_one_process"
  else fail "train_${n}_stories_match_one_process" "$(stories "$W/$n.log" | head -c 80) vs $(stories "$W/$ref.log" | head -c 80)"; fi
done

# checkpoints in the reference layout: cp 4 resumed at cp 1, tp 2 x cp 2 and dp 2; cp 1 resumed at cp 2
if [ -f "$W/cp4_ring/ckpt_000010.bin" ]; then
  for spec in "1 cp4_to_cp1 --batch 4" "4 cp4_to_tp2xcp2 --batch 4 --cp 2 --tp 2" "2 cp4_to_dp2 --batch 2"; do
    set -- $spec; np=$1; n=$2; shift 2
    train "$np" "$W/$n" "$@" --resume "$W/cp4_ring/ckpt_000010.bin" || continue
    agree "ckpt_${n}_vs_uninterrupted" "$W/cp1" "$W/$n" 11 $TOL
    if grep -q "data order restarts" "$W/$n.log"; then fail "ckpt_${n}_keeps_data_position" "the loader position was not restored"
    else pass "ckpt_${n}_keeps_data_position"; fi
  done
else fail ckpt_cp4_written "no ckpt_000010.bin in $W/cp4_ring"; fi
if [ -f "$W/cp1/ckpt_000010.bin" ]; then
  train 2 "$W/cp1_to_cp2" --batch 4 --cp 2 --cp-mode ulysses --resume "$W/cp1/ckpt_000010.bin" \
    && agree ckpt_cp1_to_cp2_vs_uninterrupted "$W/cp1" "$W/cp1_to_cp2" 11 $TOL
fi
# bit-exact resume with the same layout (cp 2 ring x dp 2, ZeRO-1)
if env PYTHON="$PY" LAUNCH="timeout -k 10 $RUN_LIMIT ${MPIRUN[*]} -np 4" bash dev/test/check_resume.sh ./train_llama_cpu "$W/resume_cp2dp2" \
    --cp 2 --cp-mode ring --zero 1 >"$W/resume_cp2dp2.log" 2>&1; then pass resume_cp2xdp2_bitexact
else fail resume_cp2xdp2_bitexact "$(tail -n 2 "$W/resume_cp2dp2.log" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------------------
# f. train_dit and test_dit (non-causal: a plain split of each clip's tokens, the ring without
# zigzag; 3-D RoPE by each rank's first token; the loss summed over the CP group)
[ -x ./test_dit_cpu ] && [ -x ./train_dit_cpu ] || fail build_dit "./test_dit_cpu or ./train_dit_cpu is missing"
DF=$W/cp_dit_h4_n64.dref
"$PY" dev/ref/reference_dit.py --quiet --out "$DF" --C 1 --Fr 4 --Hi 8 --Wi 8 --pt 1 --ph 2 --pw 2 --D 32 --L 2 --H 4 --FF 48 \
  --NC 3 --B 2 --n-steps 2 --seed 54 >"$W/gen_dit.log" 2>&1 || fail fresh_cp_dit "reference_dit.py failed: $(tail -n 1 "$W/gen_dit.log")"
td() {  # td NAME NP ARGS...: test_dit under mpirun ends with its PASS line at the cp asked for
  local name=$1 np=$2; shift 2
  run_np "$np" ./test_dit_cpu "$@" >"$W/$name.log" 2>&1
  local rc=$?
  if [ $rc -eq 0 ] && grep -q "^PASS" "$W/$name.log" && ! grep -q "^FAIL" "$W/$name.log" \
      && grep -q "^context parallelism: cp [24] " "$W/$name.log"; then pass "$name"
  else fail "$name" "exit $rc; $(grep -E 'FAIL|error' "$W/$name.log" | head -n 3 | tr '\n' ' ')"; fi
}
td dit_np2_cp2_ring_hd12 2 --ref dev/ref/dit_hd12_clip.dref --cp 2 --cp-mode ring
td dit_np4_cp4_ring_hd12_flags 4 --ref dev/ref/dit_hd12_clip.dref --cp 4 --cp-mode ring --ffn-chunks 2 --offload-act -1 --recompute 1
td dit_np2_cp2_ulysses_nc1 2 --ref dev/ref/dit_nc1_hd8.dref --cp 2 --cp-mode ulysses --recompute 2
td dit_np2_cp2_ulysses_pt2_flags 2 --ref dev/ref/dit_pt2_hw.dref --cp 2 --cp-mode ulysses --ffn-chunks 3 --ffn-chunk-dim seq
td dit_np4_cp4_ulysses_fresh 4 --ref "$DF" --cp 4 --cp-mode ulysses
td dit_np4_cp4_hybrid_fresh_flags 4 --ref "$DF" --cp 4 --cp-mode hybrid --cp-ulysses 2 --ffn-chunks 2 --recompute 1
td dit_np4_tp2xcp2_rs_pt2 4 --ref dev/ref/dit_pt2_hw.dref --cp 2 --tp 2 --tp-mode reducescatter
td dit_np4_tp2xcp2_ar_fresh 4 --ref "$DF" --cp 2 --cp-mode ulysses --tp 2
td dit_np4_dp2xcp2_zero_fresh 4 --ref "$DF" --cp 2 --zero 1 --micro-batch 1 --fp32-grad-accum 1
run_np 2 ./test_dit_cpu --ref "$DF" --cp 2 --test-plant-cp-bug 1 >"$W/dit_planted.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -q "^FAIL" "$W/dit_planted.log" && grep -q "PLANTED BUG" "$W/dit_planted.log"; then
  pass dit_planted_cp_bug_fails
else fail dit_planted_cp_bug_fails "exit $rc: the planted bug went unnoticed"; fi

DCOMMON=(--D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --steps 20 --warmup 2 --val-every 10
         --val-clips 6 --total-batch 8 --sample-every 20 --sample-steps 3)
dtrain() { run_trainer ./train_dit_cpu DCOMMON "$@"; }
dtrain 1 "$W/dit_cp1" --batch 2 --ckpt-every 10
for spec in "2 dit_cp2_ring --batch 2 --cp 2 --cp-mode ring --ckpt-every 10" "2 dit_cp2_ulysses --batch 2 --cp 2 --cp-mode ulysses" \
            "4 dit_cp4_hybrid --batch 2 --cp 4 --cp-mode hybrid --cp-ulysses 2 --recompute 2" \
            "4 dit_tp2xcp2_rs --batch 2 --cp 2 --tp 2 --tp-mode reducescatter" \
            "4 dit_dp2xcp2_zero --batch 1 --cp 2 --cp-mode ulysses --zero 1 --ffn-chunks 2"; do
  set -- $spec; np=$1; n=$2; shift 2
  dtrain "$np" "$W/$n" "$@" || continue
  agree "train_${n}_vs_one_process" "$W/dit_cp1" "$W/$n" 1 $TOL
  pred=$(grep -m 1 "^comm per step, predicted" "$W/$n.log" | sed 's/.*: //')
  got=$(grep -m 1 "^comm per step, counted" "$W/$n.log" | sed 's/.*: //')
  if [ -n "$pred" ] && [ "$pred" = "$got" ] && grep -qE "(ring send-recv|ulysses all-to-all)" <<<"$pred"; then pass "comm_bytes_${n}_equal_formula"
  else fail "comm_bytes_${n}_equal_formula" "predicted '$pred', counted '$got'"; fi
  # the GIFs and PNGs of rank 0 (not the float32 clip file: oneDNN rounds with the thread count)
  if [ -d "$W/$n/samples" ] && diff -r -x '*.clips' "$W/dit_cp1/samples" "$W/$n/samples" >/dev/null; then pass "train_${n}_samples_identical"
  else fail "train_${n}_samples_identical" "$(diff -rq -x '*.clips' "$W/dit_cp1/samples" "$W/$n/samples" 2>&1 | head -n 2 | tr '\n' ' ')"; fi
done
if [ -f "$W/dit_cp2_ring/ckpt_000010.bin" ]; then
  dtrain 1 "$W/dit_cp2_to_cp1" --batch 2 --resume "$W/dit_cp2_ring/ckpt_000010.bin" \
    && agree ckpt_dit_cp2_resumed_at_one_process "$W/dit_cp1" "$W/dit_cp2_to_cp1" 11 $TOL
fi
if [ -f "$W/dit_cp1/ckpt_000010.bin" ]; then
  dtrain 4 "$W/dit_cp1_to_cp4" --batch 2 --cp 4 --cp-mode ring --resume "$W/dit_cp1/ckpt_000010.bin" \
    && agree ckpt_dit_one_process_resumed_at_cp4 "$W/dit_cp1" "$W/dit_cp1_to_cp4" 11 $TOL
fi
expect_error dit_cp_15_tokens_do_not_split "15 tokens split 2 equal chunks" run_np 2 ./test_dit_cpu \
  --ref dev/ref/dit_h4_hd4_hparams.dref --cp 2
expect_error dit_cp_ulysses_heads_do_not_split "query heads split Ulysses" ./train_dit_cpu --D 24 --H 2 --frames 4 --height 8 \
  --width 8 --cp 4 --cp-mode ulysses --plan-only 1

# ---------------------------------------------------------------------------
# e. memory, measured: at 4096 tokens a sample the activations dominate a rank's plan; what
# cp 2 (ring) and cp 4 (ulysses, hybrid) save in the measured peak (the resident set) against
# cp 1 must be what their plans save, within 5% (the one-process run under mpirun too, so
# that every run carries MPI's own memory)
"$PY" dev/test/write_toy_shard.py "$W/long.bin" 100000 1 500 >/dev/null
MEM=(--model tiny --V 512 --H 4 --KV 2 --F 170 --seq 4096 --max-seq-len 4096 --batch 2 --steps 1 --warmup 1 --val-every 0
     --sample-every 0 --train-data "$W/long.bin")
last_mem() { tail -n 1 "$1/metrics.jsonl" | "$PY" -c "import json, sys; r = json.loads(sys.stdin.read()); print(r['arena_bytes'], r['peak_mem'])"; }
if run_np 1 ./train_llama_cpu "${MEM[@]}" --run-dir "$W/mem_cp1" >"$W/mem_cp1.log" 2>&1; then
  read -r a1 p1 < <(last_mem "$W/mem_cp1")
  for spec in "2 cp2_ring --cp 2 --cp-mode ring" "4 cp4_ulysses --cp 4 --cp-mode ulysses" "4 cp4_hybrid --cp 4 --cp-mode hybrid --cp-ulysses 2"; do
    set -- $spec; np=$1; n=$2; shift 2
    if ! run_np "$np" ./train_llama_cpu "${MEM[@]}" "$@" --run-dir "$W/mem_$n" >"$W/mem_$n.log" 2>&1; then
      fail "memory_${n}_saving_as_planned" "exit: $(grep -m 1 -i error "$W/mem_$n.log")"; continue
    fi
    read -r a p < <(last_mem "$W/mem_$n")
    if "$PY" -c "import sys; a1, p1, a, p = map(float, sys.argv[1:]); R = (p1 - p) / (a1 - a)
print('planned saving %.1f MiB, measured %.1f MiB, R = %.3f' % ((a1 - a) / 2**20, (p1 - p) / 2**20, R)); assert abs(R - 1) <= 0.05" \
        "$a1" "$p1" "$a" "$p" >"$W/mem_$n.R" 2>&1; then pass "memory_${n}_saving_as_planned ($(cat "$W/mem_$n.R"))"
    else fail "memory_${n}_saving_as_planned" "$(tail -n 1 "$W/mem_$n.R")"; fi
  done
else fail memory_cp1 "$(grep -m 1 -i error "$W/mem_cp1.log")"; fi

# ---------------------------------------------------------------------------
# d. layouts that cannot work end with a clear message
expect_error cp_ring_T20_does_not_split_8 "split 8 equal chunks zigzag" run_np 4 ./test_llama_cpu --ref "$C" --cp 4 --cp-mode ring
expect_error plan_cp8_ulysses_H4_rejected "query heads split Ulysses" ./train_llama_cpu --model tiny --H 4 --KV 4 --seq 32 \
  --cp 8 --cp-mode ulysses --plan-only 1
expect_error plan_cp4_ulysses_KV3_rejected "key/value heads Ulysses divide" ./train_llama_cpu --model tiny --D 48 --H 6 --KV 3 --seq 32 \
  --cp 2 --cp-mode ulysses --plan-only 1
expect_error cp_larger_than_np "--cp divide ranks" run_np 2 ./test_llama_cpu --ref "$G4" --cp 4
expect_error cp_hybrid_needs_ways "--cp-ulysses divid" ./test_llama_cpu --ref "$G4" --cp 4 --cp-mode hybrid --cp-ulysses 3
expect_error cp_ways_without_hybrid "--cp-ulysses hybrid" ./test_llama_cpu --ref "$G4" --cp 2 --cp-mode ring --cp-ulysses 2
expect_error cp_mode_unknown "--cp-mode ring ulysses hybrid" ./test_llama_cpu --ref "$G4" --cp-mode zigzag
expect_error train_cp_seq_does_not_split "split equal chunks" run_np 2 ./train_llama_cpu "${COMMON[@]}" --seq 30 --batch 1 \
  --total-batch 30 --steps 1 --cp 2 --run-dir "$W/rej_seq"

echo "cp_tests: $(( $(date +%s) - t_start )) s"
[ $failed -eq 0 ]
