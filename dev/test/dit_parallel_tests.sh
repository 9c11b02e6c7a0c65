#!/usr/bin/env bash
# Data parallelism, ZeRO-1 and tensor parallelism of train_dit under Open MPI (make test
# runs this through dev/test/run_tests.sh): test_dit with the reference batch split over
# 2 and 4 ranks and at tp 2, tp 4 and tp 2 x dp 2, with the memory flags; sequence
# parallelism (--tp-mode reducescatter) at tp 2, tp 4 and tp 2 x dp 2, with memory flags,
# --tp-recompute-allgather 0 and 1 bitwise equal, nanotron #203's bug planted (must fail);
# train_dit at dp 2, dp 4, tp 2 (both modes) and tp 2 x dp 2 (both modes) against one
# process over 20 steps (losses, validation by t bucket, samples); the bytes sent against
# the formula; checkpoints resumed across layouts; bit-exact resume at dp 2 --zero 1; clear
# errors for a batch that does not split, tokens that do not split over --tp, heads that
# do not split, two programs in one launch and a build without MPI.
#
#   bash dev/test/dit_parallel_tests.sh PYTHON WORKDIR [DREF...]
#
# DREF: fresh reference files (configs not in dev/ref) to run under mpirun besides
# dev/ref/*.dref. Prints one line per check, "PASS name" or "FAIL name: why".
set -u
PY=$1; W=$2; shift 2
EXTRA=("$@")
cd "$(dirname "$0")/../.."
mkdir -p "$W"
source dev/test/mpi_lib.sh  # MPIRUN, run_np, pass, fail, agree
source dev/test/expect_error.sh

# ---------------------------------------------------------------------------
# test_dit: the file's batch split over the DP ranks. Fresh references with B = 4 split over
# 2 and 4 ranks; the committed ones (B = 1, 2, 3) where they split, a clear error where not.
refs=(dev/ref/*.dref "${EXTRA[@]}")
while read -r name C Fr Hi Wi pt ph pw D L H FF NC B N clip seed; do
  if "$PY" dev/ref/reference_dit.py --quiet --out "$W/$name.dref" --C "$C" --Fr "$Fr" --Hi "$Hi" --Wi "$Wi" --pt "$pt" \
      --ph "$ph" --pw "$pw" --D "$D" --L "$L" --H "$H" --FF "$FF" --NC "$NC" --B "$B" --n-steps "$N" \
      --grad-clip "$clip" --seed "$seed" >"$W/gen_$name.log" 2>&1; then refs+=("$W/$name.dref")
  else fail "gen_$name" "reference_dit.py failed: $(tail -n 2 "$W/gen_$name.log")"; fi
done <<'CONFIGS'
dp_b4_nc4 1 4 8 8 2 2 2 16 2 2 36 4 4 3 1.0 31
dp_b4_ff_odd 2 2 6 4 1 3 2 24 2 4 30 3 4 2 0.5 32
tp_ff9 1 2 4 4 1 2 2 12 2 2 9 2 2 2 1.0 33
CONFIGS

DPFLAGS=(
  ""
  "--zero 1"
  "--zero 1 --ffn-chunks 3"
  "--ffn-chunks 2 --ffn-chunk-dim seq --recompute 2"
  "--zero 1 --offload-act -1 --recompute 1"
  "--zero 1 --offload-optim 1"
)
for np in 2 4; do
  for f in "${refs[@]}"; do
    base=$(basename "$f" .dref)
    B=$("$PY" -c "import struct; print(struct.unpack('<16i', open('$f','rb').read(64))[14])")
    if [ $((B % np)) -ne 0 ]; then
      expect_error "dit_np${np}_${base}_B${B}_does_not_split" "multiple of the number of ranks" run_np "$np" ./test_dit_cpu --ref "$f"
      continue
    fi
    pick_flagsets "${DPFLAGS[@]}"  # sampled: plain and one set in turn (mpi_lib.sh)
    for fl in "${PICKED[@]}"; do
      [ "$np" = 4 ] && [ -n "$fl" ] && [ "$fl" != "--zero 1" ] && [ "$base" != dp_b4_nc4 ] && continue  # np 4: the flags on one file
      passes_np "dit_np${np}_${base}_$(echo "${fl:-plain}" | sed 's/ -1/ all/' | tr -d ' -')" "$np" ./test_dit_cpu --ref "$f" $fl
    done
  done
done
# --offload-optim 1 with ZeRO-1 at every make test: the state after the steps bitwise that of the device update
passes_np dit_np2_nc1_hd8_zero1_offload_optim 2 ./test_dit_cpu --ref dev/ref/dit_nc1_hd8.dref --zero 1 --offload-optim 1
# micro-steps on each rank, summed in the fp32 accumulator, then the DP reduction of the last
for spec in "2 1 --zero 1" "4 1 --zero 1 --ffn-chunks 2"; do
  set -- $spec; np=$1; mb=$2; shift 2
  passes_np "dit_np${np}_dp_b4_nc4_microbatch${mb}_fp32acc$(echo "$*" | tr -d ' -')" "$np" \
    ./test_dit_cpu --ref "$W/dp_b4_nc4.dref" --micro-batch "$mb" --fp32-grad-accum 1 "$@"
done

# ---------------------------------------------------------------------------
# test_dit under tensor parallelism (--tp-mode allreduce): qkv and fc1 column-parallel, proj and
# fc2 row-parallel, each rank its heads and FFN units. tp_ff9 splits FF = 9 into 5 + 4, so that
# with --ffn-chunks 3 (chunks of 2 units) rank 1's last hidden chunk is empty.
TPSETS=(
  "2 --tp 2"
  "2 --tp 2 --ffn-chunks 3"
  "2 --tp 2 --ffn-chunks 2 --ffn-chunk-dim seq"
  "2 --tp 2 --recompute 1 --offload-act -1"
  "2 --tp 2 --recompute 2"
  "2 --tp 2 --recompute 2 --ffn-chunks 3"
  "4 --tp 2 --zero 1"
  "4 --tp 2 --zero 1 --ffn-chunks 2 --recompute 1 --micro-batch 1 --fp32-grad-accum 1"
  "4 --tp 4"
  "4 --tp 4 --ffn-chunks 3 --recompute 2 --offload-act 1"
)
j=0
for f in "$W/dp_b4_nc4.dref" "$W/dp_b4_ff_odd.dref" "$W/tp_ff9.dref" dev/ref/dit_h4_hd4_hparams.dref; do
  [ -f "$f" ] || continue
  base=$(basename "$f" .dref); j=$((j + 1)); i=0
  read -r B H < <("$PY" -c "import struct; h = struct.unpack('<16i', open('$f','rb').read(64)); print(h[14], h[11])")
  for spec in "${TPSETS[@]}"; do
    i=$((i + 1))
    # sampled: every other set on each file, alternating between files (TEST_FULL=1: all)
    [ "$FULL" != 1 ] && [ $(((i + j) % 2)) -ne 0 ] && continue
    set -- $spec; np=$1; shift; tp=$2
    [ $((H % tp)) -ne 0 ] && continue
    [ $((B % (np / tp))) -ne 0 ] && continue
    passes_np "dit_tp_np${np}_${base}_$(echo "$*" | sed 's/ -1/ all/' | tr -d ' -')" "$np" ./test_dit_cpu --ref "$f" "$@"
  done
done
expect_error dit_tp_heads_do_not_split "tp 2 divide heads H=1" run_np 2 ./test_dit_cpu --ref dev/ref/dit_hd12_clip.dref --tp 2

# ---------------------------------------------------------------------------
# test_dit under sequence parallelism (--tp-mode reducescatter): each rank of a TP group
# holds 1/tp of the micro-batch's tokens in the residual stream. dit_pt2_hw's 3 clips of 24
# tokens cut into 36 rows per rank (a clip split between the ranks); dit_nc1_hd8 at tp 2 x
# dp 2 and dp_b4_ff_odd at tp 4 with --micro-batch 1: a rank's rows inside one clip.
SPSETS=(
  "2 dit_pt2_hw --tp 2"
  "2 dit_pt2_hw --tp 2 --ffn-chunks 2 --ffn-chunk-dim seq --recompute 1 --offload-act -1"
  "2 dit_pt2_hw --tp 2 --ffn-chunks 3 --recompute 2"
  "2 dit_pt2_hw --tp 2 --tp-recompute-allgather 0 --ffn-chunks 3 --micro-batch 1"
  "2 dit_nc1_hd8 --tp 2 --tp-recompute-allgather 0 --offload-act 1"
  "4 dit_nc1_hd8 --tp 2 --zero 1"
  "4 dit_nc1_hd8 --tp 2 --zero 1 --ffn-chunks 2 --ffn-chunk-dim seq --tp-recompute-allgather 0"
  "4 dp_b4_ff_odd --tp 4 --micro-batch 1 --fp32-grad-accum 1 --ffn-chunks 2"
  "4 dp_b4_ff_odd --tp 4 --micro-batch 1 --recompute 1"
)
for spec in "${SPSETS[@]}"; do
  set -- $spec; np=$1; base=$2; shift 2
  f=dev/ref/$base.dref; [ -f "$f" ] || f=$W/$base.dref
  passes_np "dit_sp_np${np}_${base}_$(echo "$*" | sed 's/ -1/ all/' | tr -d ' -')" "$np" ./test_dit_cpu --ref "$f" \
    --tp-mode reducescatter "$@"
done
# nanotron #203's bug planted (backward reads the recycled all-gather buffer): must fail
run_np 2 ./test_dit_cpu --ref dev/ref/dit_pt2_hw.dref --tp 2 --tp-mode reducescatter --test-plant-tp-bug 1 \
  >"$W/dit_sp_planted.log" 2>&1
rc=$?
if [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -q "^FAIL" "$W/dit_sp_planted.log"; then pass dit_sp_tp203_planted_bug_fails
else fail dit_sp_tp203_planted_bug_fails "exit $rc: the planted bug went unnoticed"; fi
expect_error dit_sp_tokens_do_not_split "reducescatter 15 tokens 2 equal blocks" \
  run_np 2 ./test_dit_cpu --ref dev/ref/dit_h4_hd4_hparams.dref --tp 2 --tp-mode reducescatter
expect_error dit_sp_val_batch_does_not_split "reducescatter val-clips last batch does not split" \
  run_np 2 ./train_dit_cpu --tp 2 --tp-mode reducescatter --val-clips 5 --batch 2 --frames 1 --pt 1 --height 2 --width 2 \
  --ph 2 --pw 2 --steps 1 --run-dir "$W/e_sp_val"

# ---------------------------------------------------------------------------
# train_dit: 20 steps at dp 1, 2 and 4 with the same 8 clips per step
COMMON=(--D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --steps 20 --warmup 2 --val-every 10
        --val-clips 6 --total-batch 8 --sample-every 20 --sample-steps 3)
train() {  # train NP RUN_DIR FLAGS...: a run that must succeed
  local np=$1 dir=$2; shift 2
  if [ "$np" = 1 ]; then ./train_dit_cpu "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1
  else run_np "$np" ./train_dit_cpu "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1; fi
  local rc=$?
  [ $rc -eq 0 ] || { echo "    run $dir failed (exit $rc):"; tail -n 4 "$dir.log" | sed 's/^/    /'; }
  return $rc
}
TOL=1e-5
train 1 "$W/dit_dp1" --batch 2 --ckpt-every 10
train 1 "$W/dit_dp1_offload_optim" --batch 2 --ckpt-every 10 --offload-optim 1 \
  && same_ckpts dit_dp1_offload_optim_ckpts_identical "$W/dit_dp1" "$W/dit_dp1_offload_optim"
train 2 "$W/dit_dp2" --batch 2 && agree dit_dp2_vs_dp1_20_steps "$W/dit_dp1" "$W/dit_dp2" 1 $TOL
train 4 "$W/dit_dp4_zero" --batch 2 --zero 1 --ckpt-every 10 && agree dit_dp4_zero_vs_dp1_20_steps "$W/dit_dp1" "$W/dit_dp4_zero" 1 $TOL
train 2 "$W/dit_dp2_flags" --batch 2 --zero 1 --ffn-chunks 2 --offload-act -1 --recompute 1 \
  && agree dit_dp2_zero_memory_flags_vs_dp1 "$W/dit_dp1" "$W/dit_dp2_flags" 1 $TOL
train 2 "$W/dit_dp2_b1" --batch 1 --fp32-grad-accum 1 && agree dit_dp2_batch1_accumulated_vs_dp1 "$W/dit_dp1" "$W/dit_dp2_b1" 1 $TOL
train 2 "$W/dit_tp2" --batch 4 --tp 2 && agree dit_tp2_vs_dp1_20_steps "$W/dit_dp1" "$W/dit_tp2" 1 $TOL
train 4 "$W/dit_tp2_dp2_zero" --batch 2 --tp 2 --zero 1 --ffn-chunks 2 --ckpt-every 10 \
  && agree dit_tp2xdp2_zero_vs_dp1_20_steps "$W/dit_dp1" "$W/dit_tp2_dp2_zero" 1 $TOL
# sequence parallelism: the residual stream, patch embedding and final layer on 1/2 of the tokens
train 2 "$W/dit_sp2" --batch 4 --tp 2 --tp-mode reducescatter --ckpt-every 10 \
  && agree dit_sp2_vs_dp1_20_steps "$W/dit_dp1" "$W/dit_sp2" 1 $TOL
train 4 "$W/dit_sp2_dp2_zero" --batch 2 --tp 2 --tp-mode reducescatter --zero 1 --ffn-chunks 2 --ffn-chunk-dim seq \
  --recompute 2 && agree dit_sp2xdp2_zero_memory_flags_vs_dp1_20_steps "$W/dit_dp1" "$W/dit_sp2_dp2_zero" 1 $TOL
# --tp-recompute-allgather 0 (keep the gathered a1, a2) and 1 (gather again): the same bits
for rg in 0 1; do
  train 2 "$W/dit_sp2_rg$rg" --batch 4 --tp 2 --tp-mode reducescatter --tp-recompute-allgather $rg --steps 6 --val-every 0 \
    --sample-every 0 --ckpt-every 6
done
if cmp -s "$W/dit_sp2_rg0/ckpt_000006.bin" "$W/dit_sp2_rg1/ckpt_000006.bin"; then
  agree dit_sp2_recompute_allgather_0_vs_1_bitwise "$W/dit_sp2_rg0" "$W/dit_sp2_rg1" 1 0
else fail dit_sp2_recompute_allgather_0_vs_1_bitwise "the checkpoints after 6 steps differ"; fi
# the same per-rank batch as dp1's micro-batch: two-term gradient sums (a + b = b + a), and the
# sampled GIFs and PNGs (written by rank 0 alone) byte for byte. Not the float32 clip file of
# the same samples: dp1 runs one process of 2 threads and dp2 two of 1, and oneDNN's GEMMs
# round differently with the thread count, which the 8-bit images do not show (the same
# checkpoint sampled at dp 1, 2 and 4, below, gives every file byte for byte)
if [ -d "$W/dit_dp2/samples" ] && diff -r -x '*.clips' "$W/dit_dp1/samples" "$W/dit_dp2/samples" >/dev/null; then
  pass dit_dp2_samples_identical_to_dp1
else fail dit_dp2_samples_identical_to_dp1 "$(diff -rq -x '*.clips' "$W/dit_dp1/samples" "$W/dit_dp2/samples" 2>&1 | head -n 2 | tr '\n' ' ')"; fi
# one checkpoint evaluated and sampled (--steps at the checkpoint's step: no training) at dp 1, 2
# and 4: the validation losses by t bucket and the GIFs identical, whatever the layout
for np in 1 2 4; do
  train "$np" "$W/dit_eval_np$np" --batch 2 --resume "$W/dit_dp1/ckpt_000020.bin"
done
v1=$(grep "val loss" "$W/dit_eval_np1/main.log"); v2=$(grep "val loss" "$W/dit_eval_np2/main.log"); v4=$(grep "val loss" "$W/dit_eval_np4/main.log")
if [ -n "$v1" ] && [ "$v1" = "$v2" ] && [ "$v1" = "$v4" ] && diff -r "$W/dit_eval_np1/samples" "$W/dit_eval_np2/samples" >/dev/null \
    && diff -r "$W/dit_eval_np1/samples" "$W/dit_eval_np4/samples" >/dev/null; then
  pass "dit_eval_and_samples_identical_dp1_dp2_dp4 ($v1)"
else fail dit_eval_and_samples_identical_dp1_dp2_dp4 "'$v1' / '$v2' / '$v4'"; fi
grep -q "peak .* MiB (largest rank)" "$W/dit_dp2.log" && grep -q "dp 2 " "$W/dit_dp2.log" \
  && pass dit_dp2_logs_layout_and_largest_rank || fail dit_dp2_logs_layout_and_largest_rank "$(grep -m1 parallel "$W/dit_dp2.log")"
n_logs=$(ls "$W/dit_dp2" | grep -c -E "main.log|metrics.jsonl")
[ "$n_logs" = 2 ] && [ "$(grep -c '"step"' "$W/dit_dp2/metrics.jsonl")" = 20 ] && pass dit_dp2_rank0_alone_writes \
  || fail dit_dp2_rank0_alone_writes "$(ls "$W/dit_dp2" | tr '\n' ' ')"

# the bytes each rank sent in the first step, counted by llmc/parallel/comm.h, equal the plan's formula
for d in dit_dp2 dit_dp4_zero dit_tp2 dit_tp2_dp2_zero dit_sp2 dit_sp2_dp2_zero dit_sp2_rg0; do
  pred=$(grep -m 1 "^comm per step, predicted" "$W/$d.log" | sed 's/.*: //')
  got=$(grep -m 1 "^comm per step, counted" "$W/$d.log" | sed 's/.*: //')
  if [ -n "$pred" ] && [ "$pred" = "$got" ] && grep -qE "(dp|tp) (all|reduce)" <<<"$pred"; then pass "comm_bytes_${d}_equal_formula"
  else fail "comm_bytes_${d}_equal_formula" "predicted '$pred', counted '$got'"; fi
done

# checkpoints resume across layouts: dp4 --zero 1 at one process, one process at dp 2 --zero 1
train 1 "$W/dit_dp4_to_dp1" --batch 2 --resume "$W/dit_dp4_zero/ckpt_000010.bin" \
  && agree dit_dp4_zero_ckpt_resumed_at_dp1 "$W/dit_dp4_zero" "$W/dit_dp4_to_dp1" 11 $TOL
train 2 "$W/dit_dp1_to_dp2" --batch 2 --zero 1 --resume "$W/dit_dp1/ckpt_000010.bin" \
  && agree dit_dp1_ckpt_resumed_at_dp2_zero "$W/dit_dp1" "$W/dit_dp1_to_dp2" 11 $TOL
train 1 "$W/dit_tp2dp2_to_dp1" --batch 2 --resume "$W/dit_tp2_dp2_zero/ckpt_000010.bin" \
  && agree dit_tp2xdp2_zero_ckpt_resumed_at_dp1 "$W/dit_tp2_dp2_zero" "$W/dit_tp2dp2_to_dp1" 11 $TOL
train 2 "$W/dit_dp1_to_tp2" --batch 4 --tp 2 --resume "$W/dit_dp1/ckpt_000010.bin" \
  && agree dit_dp1_ckpt_resumed_at_tp2 "$W/dit_dp1" "$W/dit_dp1_to_tp2" 11 $TOL
train 1 "$W/dit_sp2_to_dp1" --batch 2 --resume "$W/dit_sp2/ckpt_000010.bin" \
  && agree dit_sp2_ckpt_resumed_at_dp1 "$W/dit_sp2" "$W/dit_sp2_to_dp1" 11 $TOL
if env PYTHON="$PY" LAUNCH="${MPIRUN[*]} -np 2" bash dev/test/check_dit_resume.sh ./train_dit_cpu "$W/dit_resume_dp2" --zero 1 \
    >"$W/dit_resume_dp2.log" 2>&1; then pass dit_resume_dp2_zero_bitexact
else fail dit_resume_dp2_zero_bitexact "$(tail -n 2 "$W/dit_resume_dp2.log" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------------------
# clear errors
expect_error dit_total_batch_not_multiple "total-batch multiple" run_np 2 ./train_dit_cpu "${COMMON[@]}" --batch 3 --run-dir "$W/e1"
expect_error dit_grad_accum_disagrees "disagree" ./train_dit_cpu "${COMMON[@]}" --batch 2 --grad-accum 3 --run-dir "$W/e2"
expect_error dit_mismatched_flags "disagree lr rank" "${MPIRUN[@]}" -np 1 ./train_dit_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/e3" \
  --lr 1e-3 : -np 1 ./train_dit_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/e3" --lr 2e-3
# every flag is compared, before the groups are split (a different --cp-mode would split them differently)
expect_mismatch dit_mismatched_cp_mode cp-mode ring ulysses ./train_dit_cpu "${COMMON[@]}" --batch 4 --cp 2 --run-dir "$W/e5"
expect_mismatch dit_mismatched_attention attention auto fp32 ./train_dit_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/e6"
expect_mismatch dit_mismatched_ffn_chunks ffn-chunks 1 2 ./train_dit_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/e7"
expect_error two_programs_one_launch "different programs train_llama train_dit" "${MPIRUN[@]}" -np 1 ./train_llama_cpu \
  --steps 2 --run-dir "$W/e4" : -np 1 ./train_dit_cpu "${COMMON[@]}" --batch 4 --run-dir "$W/e4"
if [ -x build/train_dit_cpu_nompi ]; then
  expect_error dit_nompi_build_under_mpirun "no MPI" run_np 2 ./build/train_dit_cpu_nompi "${COMMON[@]}" --batch 4 --run-dir "$W/e5"
else fail dit_nompi_build_under_mpirun "build/train_dit_cpu_nompi is missing (make build/train_dit_cpu_nompi)"; fi
exit $failed
