#!/usr/bin/env bash
# Multi-process tests of tensor and sequence parallelism in the CPU build under Open MPI
# (make test runs them through dev/test/run_tests.sh):
#   a. test_llama at tp 2 (-np 2), tp 4 (-np 4) and tp 2 x dp 2 (-np 4), --tp-mode allreduce and
#      reducescatter, with and without --shard-vocab 1 and with the memory flags, on every
#      dev/ref/*.lref whose heads split (a clear --tp error for the others) and on fresh
#      references shaped for TP (odd V, an F that tp does not divide, KV = 4, tied and untied);
#   b. --tp-recompute-allgather 0 and 1: bitwise the same logits, loss, gradients and steps;
#   c. nanotron #203's bug planted (backward reads a recycled all-gather buffer): must fail;
#   d. train_llama at tp 2, tp 2 x dp 2 and tp 4 against the one-process run, and
#      checkpoints written at tp 2 x dp 2 resumed at tp 1 and tp 4 (and back), samples;
#   e. clear errors for layouts that cannot work.
#
#   bash dev/test/tp_tests.sh PYTHON WORKDIR
#
# PYTHON must import torch and numpy (fresh references). Prints one line per check,
# "PASS name" or "FAIL name: why"; exit status non-zero when anything failed. The matrix is
# chosen so that every case above runs at least once, not the full cross product; of the flag
# sets in a., make test runs the plain one and one other in turn at each layout and reference
# (TEST_FULL=1 all of them: about 2 min on 2 cores). Every rank runs one OpenMP thread; mpirun may oversubscribe and run as root.
set -u
PY=$1; W=$2
cd "$(dirname "$0")/../.."
mkdir -p "$W"
t_start=$(date +%s)
source dev/test/mpi_lib.sh  # MPIRUN, run_np (each run at most 180 s), pass, fail, agree
source dev/test/expect_error.sh
for b in test_llama_cpu train_llama_cpu; do
  [ -x "./$b" ] || { fail "build_$b" "./$b is missing (make $b)"; exit 1; }
done

# layout ARGS...: "T MODE", the --tp and --tp-mode among a command's arguments (defaults 1, allreduce)
layout() {
  local tp=1 mode=allreduce
  while [ $# -gt 0 ]; do case $1 in --tp) tp=$2; shift ;; --tp-mode) mode=$2; shift ;; esac; shift; done
  echo "$tp $mode"
}
# tl NAME NP ARGS...: test_llama under mpirun must end with its PASS line, having run the
# layout asked for (a flag that is parsed and then ignored passes nothing)
tl() {
  local name=$1 np=$2; shift 2
  run_np "$np" ./test_llama_cpu "$@" >"$W/$name.log" 2>&1
  local rc=$? tp mode
  read -r tp mode < <(layout "$@")
  if [ $rc -eq 0 ] && grep -q "^PASS" "$W/$name.log" && ! grep -q "^FAIL" "$W/$name.log" \
      && grep -q "^tensor parallelism: tp $tp --tp-mode $mode" "$W/$name.log"; then pass "$name"
  elif [ $rc -eq 0 ] && grep -q "^PASS" "$W/$name.log"; then fail "$name" "passed, but not at tp $tp --tp-mode $mode"
  else fail "$name" "exit $rc; $(grep -E 'FAIL|error' "$W/$name.log" | head -n 3 | tr '\n' ' ')"; fi
}
flagname() { echo "${1:-plain}" | sed 's/ -1/ all/g' | tr -d ' -'; }
# V D L H KV F max_seq_len B T n_steps tied of an LREF file (header words 2..12)
lref_cfg() { "$PY" -c "import struct, sys; print(*struct.unpack('<13i', open(sys.argv[1], 'rb').read(52))[2:])" "$1"; }

# ---------------------------------------------------------------------------
# fresh references shaped for TP, next to the committed ones (whose KV is 1, 2, 3 or 4)
# name V D L H KV F max_seq_len B T n_steps tied seed
#   tp_v67_f89_tied: V and F odd (padded vocabulary shards, FFN parts that differ by one at
#     tp 2 and 4), KV = 4, B*T = 24 splits at tp 4 and at tp 2 x dp 2
#   tp_gqa8x4_l3: H 8 over KV 4 (GQA groups stay whole at tp 4), F = 4k+2, V = 4k+1, L = 3
#   tp_v50_f45_rows10: one row of 10 tokens: reducescatter works at tp 2 and is refused at tp 4
REFS=(dev/ref/*.lref)
while read -r name V D L H KV F S B T N tied seed; do
  if "$PY" dev/ref/reference_llama.py --quiet --out "$W/$name.lref" --V "$V" --D "$D" --L "$L" --H "$H" --KV "$KV" \
      --F "$F" --max-seq-len "$S" --B "$B" --T "$T" --n-steps "$N" --tied "$tied" --seed "$seed" >"$W/gen_$name.log" 2>&1; then
    REFS+=("$W/$name.lref")
  else fail "fresh_$name" "reference_llama.py failed: $(tail -n 2 "$W/gen_$name.log" | tr '\n' ' ')"; fi
done <<'CONFIGS'
tp_v67_f89_tied 67 32 2 4 4 89 16 2 12 3 1 41
tp_gqa8x4_l3 101 48 3 8 4 130 8 4 6 3 0 42
tp_v50_f45_rows10 50 32 2 4 4 45 12 1 10 2 0 43
CONFIGS
F1=$W/tp_v67_f89_tied.lref; F2=$W/tp_gqa8x4_l3.lref

# ---------------------------------------------------------------------------
# a. test_llama: every reference at every layout, both modes, with the flag sets below
TPFLAGS=(
  ""
  "--shard-vocab 1"
  "--zero 1 --shard-vocab 1 --ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
  "--shard-vocab 1 --ffn-chunks 4 --ffn-chunk-dim seq --ce-chunks 3 --recompute 2"
  "--zero 1 --ffn-chunks 2 --ce-chunks 2 --offload-act 1 --recompute 2"
)
for layout in "2 2" "4 4" "4 2"; do
  set -- $layout; np=$1; tp=$2; dp=$((np / tp))
  lay="np${np}_tp${tp}"; [ $dp -gt 1 ] && lay="${lay}xdp${dp}"
  for f in "${REFS[@]}"; do
    base=$(basename "$f" .lref)
    read -r V D L H KV F S B T N tied < <(lref_cfg "$f")
    if [ $((H % tp)) -ne 0 ] || [ $((KV % tp)) -ne 0 ]; then
      # heads that do not split: a clear error (once per tp, at dp 1)
      [ $dp -eq 1 ] && expect_error "${lay}_${base}_H${H}KV${KV}_rejected" "--tp KV" run_np "$np" ./test_llama_cpu --ref "$f" --tp "$tp"
      continue
    fi
    if [ $((B % dp)) -ne 0 ]; then
      expect_error "${lay}_${base}_B${B}_does_not_split" "multiple of the number of ranks" \
        run_np "$np" ./test_llama_cpu --ref "$f" --tp "$tp"
      continue
    fi
    rows=$((B / dp * T))
    for mode in allreduce reducescatter; do
      m=ar; [ $mode = reducescatter ] && m=rs
      if [ $mode = reducescatter ] && [ $((rows % tp)) -ne 0 ]; then
        # sequence parallelism shards each rank's B/dp*T rows over the TP group
        expect_error "${lay}_rs_${base}_rows${rows}_rejected" "reducescatter" \
          run_np "$np" ./test_llama_cpu --ref "$f" --tp "$tp" --tp-mode reducescatter
        continue
      fi
      pick_flagsets "${TPFLAGS[@]}"  # sampled: plain and one set in turn (mpi_lib.sh)
      for fl in "${PICKED[@]}"; do
        tl "${lay}_${m}_${base}_$(flagname "$fl")" "$np" --ref "$f" --tp "$tp" --tp-mode "$mode" $fl
      done
    done
  done
done

# gradient accumulation: each DP rank's 32 rows of the 64-row reference as micro-steps of 8 rows
# (8 x T=4 rows sequence-sharded over tp 2), summed in the fp32 accumulator
tl np4_tp2xdp2_rs_micro64_b64_microbatch8_fp32acc_shardvocab 4 --ref dev/emu/ref/micro64_b64.lref --tp 2 \
  --tp-mode reducescatter --micro-batch 8 --fp32-grad-accum 1 --shard-vocab 1 --zero 1
# five layers: offload of some layers only, and the recycled buffers crossing more layers
tl np2_tp2_rs_deep_l5_gqa_offload2_recompute1 2 --ref dev/emu/ref/deep_l5_gqa.lref --tp 2 --tp-mode reducescatter \
  --offload-act 2 --recompute 1 --ffn-chunks 3

# ---------------------------------------------------------------------------
# b. --tp-recompute-allgather 0 (the gathered input kept as a saved activation) and 1 (gathered
# again in backward) do the same arithmetic: the dumps of rank 0 (gathered logits, loss,
# gradients in the reference layout, step losses) must be identical to the last bit
cat > "$W/check_dump.py" <<'PYEOF'
import sys
import numpy as np
sys.path.insert(0, "dev/ref")
from lref import read_lref
ref = read_lref(sys.argv[1])
d = np.fromfile(sys.argv[2], dtype="<f4")
want = [ref["logits"].ravel(), np.array([ref["loss"]], dtype=np.float32),
        np.concatenate([g.ravel() for g in ref["grads"].values()]), ref["losses"].ravel()]
n = sum(w.size for w in want)
assert d.size == n, "dump has %d floats, expected %d (logits, loss, gradients, step losses)" % (d.size, n)
off = 0
for name, w in zip(("logits", "loss", "gradients", "step losses"), want):
    got = d[off:off + w.size].astype(np.float64); off += w.size
    err = np.linalg.norm(got - w) / max(np.linalg.norm(w), 1e-30)
    assert np.isfinite(got).all() and err <= 1e-5, "dump %s: relative error %.3e" % (name, err)
print("dump holds the reference's logits, loss, gradients and step losses")
PYEOF
dump_pair() {  # dump_pair NAME NP REF ARGS...
  local name=$1 np=$2 f=$3; shift 3
  local ok=1 ra
  for ra in 0 1; do
    rm -f "$W/$name.ra$ra.dump"
    run_np "$np" ./test_llama_cpu --ref "$f" --tp-mode reducescatter --tp-recompute-allgather $ra \
      --dump "$W/$name.ra$ra.dump" "$@" >"$W/$name.ra$ra.log" 2>&1
    local rc=$?
    if [ $rc -ne 0 ] || ! grep -q "^PASS" "$W/$name.ra$ra.log"; then
      fail "$name" "--tp-recompute-allgather $ra: exit $rc; $(grep -E 'FAIL|error' "$W/$name.ra$ra.log" | head -n 2 | tr '\n' ' ')"
      ok=0; break
    fi
    # an empty or wrong dump would compare equal without comparing anything: it must hold
    # what test_llama checked (logits, loss, gradients, step losses) at the reference tolerance
    if ! "$PY" "$W/check_dump.py" "$f" "$W/$name.ra$ra.dump" >"$W/$name.ra$ra.dumpcheck" 2>&1; then
      fail "$name" "--tp-recompute-allgather $ra: $(tail -n 1 "$W/$name.ra$ra.dumpcheck")"; ok=0; break
    fi
  done
  [ $ok = 1 ] || return
  if cmp "$W/$name.ra0.dump" "$W/$name.ra1.dump" >"$W/$name.cmp" 2>&1; then pass "$name"
  else fail "$name" "dumps differ: $(head -n 1 "$W/$name.cmp")"; fi
}
dump_pair recompute_allgather_bitwise_np2_tp2_gqa8x4 2 "$F2" --tp 2
# (the kept gathered copies live in the saved blocks: here they go to the host and back through the offload slots)
dump_pair recompute_allgather_bitwise_np2_tp2_gqa8x4_flags 2 "$F2" --tp 2 --shard-vocab 1 --ffn-chunks 3 --ce-chunks 2 \
  --offload-act -1
dump_pair recompute_allgather_bitwise_np4_tp4_v67_flags 4 "$F1" --tp 4 --shard-vocab 1 --ffn-chunks 4 --ffn-chunk-dim seq \
  --recompute 2
dump_pair recompute_allgather_bitwise_np4_tp2xdp2_mha_flags 4 dev/ref/mha_untied_small.lref --tp 2 --zero 1 --ce-chunks 3 \
  --offload-act 1
dump_pair recompute_allgather_bitwise_np4_tp2xdp2_gqa_tied 4 dev/ref/gqa_h4kv2_tied.lref --tp 2 --shard-vocab 1

# ---------------------------------------------------------------------------
# c. nanotron #203: backward reads the all-gathered input of a column-parallel GEMM from the
# recycled buffer, which later layers overwrote (and which is poisoned with NaN on release):
# the check must fail; the same command without the planted bug passes
plant() {  # plant NAME NP ARGS...
  local name=$1 np=$2; shift 2
  local args=(--tp-mode reducescatter --tp-recompute-allgather 1 "$@")
  run_np "$np" ./test_llama_cpu "${args[@]}" --test-plant-tp-bug 1 >"$W/$name.planted.log" 2>&1
  local rc=$?
  if [ $rc -ne 0 ] && [ $rc -ne 124 ] && [ $rc -ne 137 ] && grep -q "^FAIL" "$W/$name.planted.log"; then pass "${name}_planted_bug_fails"
  else fail "${name}_planted_bug_fails" "exit $rc, $(grep -c '^FAIL' "$W/$name.planted.log") FAIL lines: the planted bug went unnoticed"; fi
  tl "${name}_without_bug_passes" "$np" "${args[@]}"
}
plant tp203_np2_tp2_gqa8x4_l3 2 --ref "$F2" --tp 2
plant tp203_np2_tp2_gqa_h4kv2_tied 2 --ref dev/ref/gqa_h4kv2_tied.lref --tp 2 --shard-vocab 1
plant tp203_np4_tp4_v67_tied 4 --ref "$F1" --tp 4 --ffn-chunks 2

# ---------------------------------------------------------------------------
# e. layouts that cannot work end with a clear message
M=dev/ref/mha_untied_small.lref
expect_error tp_larger_than_np "--tp divide ranks" run_np 2 ./test_llama_cpu --ref "$M" --tp 4
expect_error tp_does_not_divide_np "--tp divide ranks" run_np 3 ./test_llama_cpu --ref "$M" --tp 2
expect_error tp_mode_unknown "--tp-mode ring" ./test_llama_cpu --ref "$M" --tp-mode ring
# (tp not dividing KV and reducescatter rows not dividing by tp: in the matrix above)

# ---------------------------------------------------------------------------
# d. train_llama: tiny with 4 KV heads (so tp 4 splits them) and F = 4k+2, the same shape for
# every run; all runs see the same global batch of 256 tokens per step
"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 1 500 >/dev/null && "$PY" dev/test/write_toy_shard.py "$W/val.bin" 5000 2 500 >/dev/null
COMMON=(--model tiny --V 512 --H 4 --KV 4 --F 170 --seq 32 --total-batch 256 --steps 6 --warmup 2 --val-every 3 --val-batches 2
        --sample-every 0 --train-data "$W/train.bin" --val-data "$W/val.bin")

train() {  # train NP RUN_DIR FLAGS...: a run that must succeed
  local np=$1 dir=$2; shift 2
  if [ "$np" = 1 ]; then ./train_llama_cpu "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1
  else run_np "$np" ./train_llama_cpu "${COMMON[@]}" --run-dir "$dir" "$@" >"$dir.log" 2>&1; fi
  local rc=$? tp mode
  read -r tp mode < <(layout "$@")
  if [ $rc -ne 0 ]; then fail "train_$(basename "$dir")" "exit $rc: $(grep -m 2 -iE 'error|fail' "$dir.log" | tr '\n' ' ')"
  elif ! grep -q "world $np = dp $((np / tp)) x tp $tp (--tp-mode $mode" "$dir.log"; then
    fail "train_$(basename "$dir")" "did not run at dp $((np / tp)) x tp $tp --tp-mode $mode: $(grep -m 1 'parallel:' "$dir.log")"; rc=1
  fi
  return $rc
}
TOL=1e-5  # the one-process reference tolerance of test_llama (fp32)

train 1 "$W/tp1" --batch 4 --ckpt-every 3
train 2 "$W/tp2_ar" --batch 4 --tp 2 --tp-mode allreduce && agree train_tp2_allreduce_vs_tp1 "$W/tp1" "$W/tp2_ar" 1 $TOL
train 2 "$W/tp2_rs_flags" --batch 4 --tp 2 --tp-mode reducescatter --shard-vocab 1 --ffn-chunks 2 --ce-chunks 3 \
  --offload-act -1 --recompute 1 && agree train_tp2_reducescatter_shardvocab_memflags_vs_tp1 "$W/tp1" "$W/tp2_rs_flags" 1 $TOL
train 4 "$W/tp2dp2" --batch 2 --tp 2 --tp-mode reducescatter --zero 1 --ckpt-every 3 \
  && agree train_tp2xdp2_reducescatter_zero_vs_tp1 "$W/tp1" "$W/tp2dp2" 1 $TOL
train 4 "$W/tp2dp2_ar" --batch 2 --tp 2 --tp-mode allreduce --zero 1 --shard-vocab 1 --ffn-chunks 3 --ffn-chunk-dim seq \
  && agree train_tp2xdp2_allreduce_zero_shardvocab_vs_tp1 "$W/tp1" "$W/tp2dp2_ar" 1 $TOL
train 4 "$W/tp4_rs" --batch 4 --tp 4 --tp-mode reducescatter --tp-recompute-allgather 0 --shard-vocab 1 \
  && agree train_tp4_reducescatter_keepgather_shardvocab_vs_tp1 "$W/tp1" "$W/tp4_rs" 1 $TOL
train 4 "$W/tp4_ar" --batch 4 --tp 4 --tp-mode allreduce --recompute 2 --ce-chunks 2 \
  && agree train_tp4_allreduce_recompute2_vs_tp1 "$W/tp1" "$W/tp4_ar" 1 $TOL

# the bytes each rank sent in the first step, counted by llmc/parallel/comm.h, equal the plan's formula
# (docs/memory.md section 10.4) for every layout and flag set above
for d in tp2_ar tp2_rs_flags tp2dp2 tp2dp2_ar tp4_rs tp4_ar; do
  pred=$(grep -m 1 "^comm per step, predicted" "$W/$d.log" | sed 's/.*: //')
  got=$(grep -m 1 "^comm per step, counted" "$W/$d.log" | sed 's/.*: //')
  if [ -n "$pred" ] && [ "$pred" = "$got" ] && grep -q "tp all-" <<<"$pred"; then pass "comm_bytes_${d}_equal_formula"
  else fail "comm_bytes_${d}_equal_formula" "predicted '$pred', counted '$got'"; fi
done

# checkpoints are layout-independent: the tp 2 x dp 2 checkpoint resumed at tp 1 and at tp 4,
# and the one-process checkpoint resumed at tp 2 x dp 2
if [ -f "$W/tp2dp2/ckpt_000003.bin" ]; then
  train 1 "$W/tp2dp2_to_tp1" --batch 4 --resume "$W/tp2dp2/ckpt_000003.bin" \
    && agree ckpt_tp2xdp2_resumed_at_tp1 "$W/tp2dp2" "$W/tp2dp2_to_tp1" 4 $TOL \
    && agree ckpt_tp2xdp2_resumed_at_tp1_vs_uninterrupted_tp1 "$W/tp1" "$W/tp2dp2_to_tp1" 4 $TOL
  if grep -q "data order restarts" "$W/tp2dp2_to_tp1.log"; then fail ckpt_tp2xdp2_keeps_data_position "the loader position was not restored"
  else pass ckpt_tp2xdp2_keeps_data_position; fi
  train 4 "$W/tp2dp2_to_tp4" --batch 4 --tp 4 --tp-mode reducescatter --resume "$W/tp2dp2/ckpt_000003.bin" \
    && agree ckpt_tp2xdp2_resumed_at_tp4 "$W/tp2dp2" "$W/tp2dp2_to_tp4" 4 $TOL
else fail ckpt_tp2xdp2_written "no ckpt_000003.bin in $W/tp2dp2"; fi
if [ -f "$W/tp1/ckpt_000003.bin" ]; then
  train 4 "$W/tp1_to_tp2dp2" --batch 2 --tp 2 --tp-mode allreduce --zero 1 --shard-vocab 1 --resume "$W/tp1/ckpt_000003.bin" \
    && agree ckpt_tp1_resumed_at_tp2xdp2 "$W/tp1" "$W/tp1_to_tp2dp2" 4 $TOL
  # each rank writes its own pieces (TP's column shards as strided rows, a TP-replicated tensor once): the
  # one-process checkpoint loaded at tp 2 x dp 2 --zero 1 and at tp 4 with the vocabulary sharded over TP and
  # written again at once (LLMC_TEST_CKPT_AT_RESUME) is the same file but for the header's layout fields and the checksum
  s=$(stat -c %s "$W/tp1/ckpt_000003.bin")
  for spec in "tp2xdp2_zero|--batch 2 --tp 2 --tp-mode reducescatter --zero 1" "tp4_shardvocab|--batch 4 --tp 4 --shard-vocab 1"; do
    name=ckpt_written_at_${spec%%|*}_is_the_one_process_file
    if LLMC_TEST_CKPT_AT_RESUME=1 train 4 "$W/$name" --steps 3 --resume "$W/tp1/ckpt_000003.bin" ${spec#*|} \
        && cmp -i 1024 -n $((s - 1032)) "$W/tp1/ckpt_000003.bin" "$W/$name/ckpt_000003.bin" >"$W/$name.cmp" 2>&1; then pass "$name"
    else fail "$name" "$(cat "$W/$name.cmp" 2>/dev/null)"; fi
  done
fi

# sampling: every rank runs the model on a growing prefix (padded to a multiple of tp under
# reducescatter) and the sharded head; the stories must be those of one process. A tokenizer
# whose pieces are " t<id>" keeps the text printable.
toy_tokenizer "$W/tok512.bin"
SAMPLE=(--steps 3 --sample-every 3 --sample-len 23 --tokenizer "$W/tok512.bin")
stories() { awk '/^--- sample ---$/ {on = 1; next} /^--------------$/ {on = 0} on' "$1"; }
if train 1 "$W/sample_tp1" --batch 4 "${SAMPLE[@]}" && [ -n "$(stories "$W/sample_tp1.log")" ]; then
  for spec in "4 tp4_rs --batch 4 --tp 4 --tp-mode reducescatter" "4 tp2xdp2_ar_shardvocab --batch 2 --tp 2 --shard-vocab 1"; do
    set -- $spec; np=$1; n=$2; shift 2
    train "$np" "$W/sample_$n" "$@" "${SAMPLE[@]}" || continue
    if [ "$(stories "$W/sample_$n.log")" = "$(stories "$W/sample_tp1.log")" ]; then pass "train_${n}_samples_match_tp1"
    else fail "train_${n}_samples_match_tp1" "$(stories "$W/sample_$n.log" | head -c 120) vs $(stories "$W/sample_tp1.log" | head -c 120)"; fi
  done
else fail train_tp1_samples "no story in $W/sample_tp1.log"; fi

# bit-exact resume with the same layout (tp 2 x dp 2, sequence parallel, ZeRO-1, sharded vocabulary)
if env PYTHON="$PY" LAUNCH="timeout -k 10 $RUN_LIMIT ${MPIRUN[*]} -np 4" bash dev/test/check_resume.sh ./train_llama_cpu "$W/resume_tp2dp2" \
    --tp 2 --tp-mode reducescatter --zero 1 --shard-vocab 1 >"$W/resume_tp2dp2.log" 2>&1; then pass resume_tp2xdp2_bitexact
else fail resume_tp2xdp2_bitexact "$(tail -n 2 "$W/resume_tp2dp2.log" | tr '\n' ' ')"; fi

# e. (train_llama) layouts that cannot work; the plan of a layout without MPI
expect_error train_tp4_kv2_rejected "--tp KV" run_np 4 ./train_llama_cpu --model tiny --V 512 --seq 32 --batch 1 --steps 1 \
  --tp 4 --train-data "$W/train.bin" --val-every 0 --run-dir "$W/rej_kv"
expect_error train_tp_larger_than_np "--tp divide ranks" run_np 2 ./train_llama_cpu "${COMMON[@]}" --batch 1 --steps 1 --tp 4 --run-dir "$W/rej_np"
expect_error train_reducescatter_rows_rejected "reducescatter" run_np 2 ./train_llama_cpu "${COMMON[@]}" --seq 31 --batch 1 \
  --total-batch 31 --steps 1 --tp 2 --tp-mode reducescatter --run-dir "$W/rej_rows"
expect_error train_plan_tp4_kv2_rejected "--tp KV" ./train_llama_cpu --model tiny --tp 4 --plan-only 1
if ./train_llama_cpu --model tiny --H 4 --KV 4 --tp 4 --dp 2 --tp-mode reducescatter --plan-only 1 >"$W/plan_tp4dp2.log" 2>&1 \
    && grep -q "dp 2 x tp 4" "$W/plan_tp4dp2.log"; then pass plan_only_tp4xdp2_without_mpi
else fail plan_only_tp4xdp2_without_mpi "$(grep -m 2 -iE 'error|parallel' "$W/plan_tp4dp2.log" | tr '\n' ' ')"; fi

echo "tp_tests: $(( $(date +%s) - t_start )) s"
[ $failed -eq 0 ]
