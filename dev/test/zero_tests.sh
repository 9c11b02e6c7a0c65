#!/usr/bin/env bash
# Full sharding under Open MPI on the CPU build (make test runs it through dev/test/run_tests.sh):
# --zero 2 (the layers' gradients kept only as each rank's shard) and --zero 3 (their parameters
# too, gathered where each layer runs), in both trainers, against the references, against
# --zero 1 over 20 training steps, across stages in checkpoints, and with faults.
#
#   bash dev/test/zero_tests.sh PYTHON WORKDIR [REF...]
#
# REF: fresh reference files (.lref, .dref: configs not in dev/ref) that run at np 2 under
# --zero 3 and --zero 2 in turn (with --offload-optim on every other one).
#
# Prints "PASS name" / "FAIL name: why"; exit status non-zero when anything failed. make test
# samples the reference flag sets (every other one, alternating); TEST_FULL=1 runs them all.
set -u
PY=$1; W=$2; shift 2
FRESH_REFS=("$@")
cd "$(dirname "$0")/../.."
mkdir -p "$W"
source dev/test/mpi_lib.sh  # MPIRUN, run_np, run, passes_np, pass, fail, agree
source dev/test/expect_error.sh
FULL=${TEST_FULL:-0}
for b in test_llama_cpu train_llama_cpu test_dit_cpu train_dit_cpu; do
  [ -x "./$b" ] || { fail "build_$b" "./$b is missing (make $b)"; exit 1; }
done
name_of() { echo "$*" | sed 's/ -1/ all/g; s/\.[a-z]*ref//; s|[^ ]*/||' | tr -d ' -'; }

# ---------------------------------------------------------------------------
# the test programs against their references: NP REF FLAGS. deep_l5 has an odd number of
# layers (the two recycled buffers alternate by parity); micro64_b64 splits over 4 ranks with
# micro-steps, summed per micro-step after each reduction, in fp32 or in floatX
LSETS=(
  "2 dev/ref/gqa_h4kv2_tied.lref --zero 2"
  "2 dev/ref/gqa_h4kv2_tied.lref --zero 3"
  "2 dev/emu/ref/deep_l5_gqa.lref --zero 3 --shard-vocab 1"
  "2 dev/ref/mha_untied_small.lref --zero 2 --shard-vocab 1 --ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
  "2 dev/ref/mha_untied_small.lref --zero 3 --ffn-chunks 2 --ffn-chunk-dim seq --recompute 2 --offload-act 1"
  "2 dev/ref/mha_untied_small.lref --zero 3 --zero-reshard 0 --ffn-chunks 3 --offload-act -1 --recompute 2 --shard-vocab 1"
  "4 dev/emu/ref/micro64_b64.lref --zero 3 --zero-reshard 0 --tp 2 --micro-batch 4"
  "4 dev/emu/ref/micro64_b64.lref --zero 3 --micro-batch 4 --fp32-grad-accum 1"
  "4 dev/emu/ref/micro64_b64.lref --zero 2 --micro-batch 8 --fp32-grad-accum 0 --shard-vocab 1"
  "4 dev/ref/gqa_h4kv2_tied.lref --zero 3 --tp 2"
  "4 dev/ref/gqa_h4kv2_tied.lref --zero 2 --tp 2 --tp-mode reducescatter --recompute 2"
  "4 dev/ref/mha_untied_small.lref --zero 3 --tp 2 --tp-mode reducescatter --shard-vocab 1 --tp-recompute-allgather 0"
  "4 dev/ref/gqa_h4kv2_tied.lref --zero 3 --cp 2 --cp-mode ring"
  "4 dev/ref/gqa_h4kv2_tied.lref --zero 2 --cp 2 --cp-mode ulysses --micro-batch 1"
  "2 dev/ref/gqa_h4kv2_tied.lref --zero 3 --offload-optim 1"
  "2 dev/ref/mha_untied_small.lref --zero 2 --shard-vocab 1 --offload-optim 1"
)
DSETS=(
  "2 dev/ref/dit_nc1_hd8.dref --zero 2"
  "2 dev/ref/dit_nc1_hd8.dref --zero 3"
  "2 dev/emu/ref/dit_deep_l5.dref --zero 3 --zero-reshard 0 --micro-batch 1 --recompute 1"
  "2 dev/emu/ref/dit_deep_l5.dref --zero 3 --offload-act -1 --recompute 1 --ffn-chunks 3"
  "2 dev/ref/dit_nc1_hd8.dref --zero 2 --ffn-chunks 2 --ffn-chunk-dim seq --recompute 2 --micro-batch 1"
  "2 dev/ref/dit_pt2_hw.dref --zero 3 --tp 2 --tp-mode reducescatter --recompute 2"
  "4 dev/ref/dit_nc1_hd8.dref --zero 3 --tp 2 --micro-batch 1 --fp32-grad-accum 1"
  "4 dev/ref/dit_nc1_hd8.dref --zero 2 --tp 2 --tp-mode reducescatter --ffn-chunks 2"
  "4 dev/ref/dit_nc1_hd8.dref --zero 3 --cp 2 --cp-mode ulysses"
  "2 dev/ref/dit_nc1_hd8.dref --zero 3 --offload-optim 1"
)
i=0
for spec in "${LSETS[@]}" "${DSETS[@]}"; do
  i=$((i + 1))
  [ "$FULL" != 1 ] && [ $((i % 2)) -eq 0 ] && continue
  set -- $spec; np=$1; ref=$2; shift 2
  prog=./test_llama_cpu; case $ref in *.dref) prog=./test_dit_cpu ;; esac
  passes_np "zero_np${np}_$(name_of "$ref" "$@")" "$np" "$prog" --ref "$ref" "$@"
done

j=0
for ref in "${FRESH_REFS[@]}"; do
  [ -f "$ref" ] || continue
  case $ref in *.dref) prog=./test_dit_cpu; B=$("$PY" -c "import struct; print(struct.unpack('<16i', open('$ref','rb').read(64))[14])") ;;
               *) prog=./test_llama_cpu; B=$("$PY" -c "import struct; print(struct.unpack('<32i', open('$ref','rb').read(128))[9])") ;; esac
  [ $((B % 2)) -eq 0 ] || continue
  j=$((j + 1)); fl=(--zero $((2 + j % 2))); [ $((j % 4)) -lt 2 ] && fl+=(--offload-optim 1)
  passes_np "zero_np2_fresh_$(name_of "$ref" "${fl[@]}")" 2 "$prog" --ref "$ref" "${fl[@]}"
done

# a layer computing on a parameter buffer already given back (poisoned): the checks must fail
for prog in "./test_llama_cpu --ref dev/ref/gqa_h4kv2_tied.lref" "./test_dit_cpu --ref dev/ref/dit_nc1_hd8.dref"; do
  name=zero3_planted_bug_fails_$(basename "${prog%% *}" _cpu)
  run_np 2 $prog --zero 3 --test-plant-zero-bug 1 >"$W/$name.log" 2>&1
  rc=$?
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -q "^FAIL" "$W/$name.log"; then pass "$name"
  else fail "$name" "exit $rc: the planted bug went unnoticed"; fi
done
expect_error zero_out_of_range "--zero must 3 got 4" ./train_llama_cpu --zero 4 --plan-only 1
expect_error zero_reshard_needs_zero3 "--zero-reshard 0 --zero 1 --zero 3" ./train_dit_cpu --zero 1 --zero-reshard 0 --plan-only 1

# --fit-memory searches the stage (--zero 0..3) where the parameters' group has ranks: a model whose static
# state dominates, with a budget that only --zero 2 or 3 meets (64 MiB: the CPU build's reserve); the stages
# cost the same but for --zero 3's exposed gathers; a --zero given on the command line stays
FIT=(./train_llama_cpu --V 512 --D 256 --L 8 --H 4 --KV 4 --F 704 --max-seq-len 16 --seq 16 --batch 1 --dp 4 --plan-only 1)
"${FIT[@]}" --zero 1 --plan-json "$W/fit_z1.json" >/dev/null 2>&1 && "${FIT[@]}" --zero 3 --plan-json "$W/fit_z3.json" >/dev/null 2>&1
budget=$("$PY" -c "import json; a, b = (json.load(open('$W/fit_z%d.json' % z))['device']['total'] for z in (1, 3)); print(((a + b) / 2 + 64 * 2**20) / 2**30)")
"${FIT[@]}" --fit-memory "$budget" --fit-candidates "$W/fit.jsonl" >"$W/fit.log" 2>&1
"$PY" - "$W/fit.jsonl" "$W/fit.log" "$W/fit_z3.json" > "$W/fit.check" 2>&1 <<'PYEOF'
import json, sys
c = [json.loads(l) for l in open(sys.argv[1])]
assert sorted({x["zero"] for x in c}) == [0, 1, 2, 3], sorted({x["zero"] for x in c})
assert all(x["zero"] >= 2 for x in c if x["fits"]), "a --zero 0 or 1 candidate fits the budget"
key = lambda x: (x["B"], x["ffn_chunks"], x["ce_chunks"], x["recompute"], x["offload_act"])
by = {}
for x in c: by.setdefault(key(x), {})[x["zero"]] = x
for k, z in by.items():
    assert z[0]["seconds"] == z[1]["seconds"] == z[2]["seconds"] <= z[3]["seconds"], (k, [z[i]["seconds"] for i in range(4)])
    assert z[3]["bytes"] < z[2]["bytes"] < z[1]["bytes"] <= z[0]["bytes"], (k, [z[i]["bytes"] for i in range(4)])
plan3 = json.load(open(sys.argv[3]))["device"]["total"]
flagfree = by[(1, 1, 1, 0, 0)][3]["bytes"]
assert flagfree == plan3, (flagfree, plan3)
chosen = open(sys.argv[2]).read().split("chose ")[1].split(":")[0]
assert " --zero 2 " in chosen + " " or " --zero 3 " in chosen + " ", chosen
print("chose:", chosen)
PYEOF
if [ $? -eq 0 ]; then pass "fit_memory_searches_zero ($(tail -n 1 "$W/fit.check"))"; else fail fit_memory_searches_zero "$(tail -n 1 "$W/fit.check")"; fi
expect_error fit_memory_keeps_given_zero "nothing fits" "${FIT[@]}" --zero 1 --fit-memory "$budget"
# a slower link (--fit-dp-gbs) costs --zero 3 more and the other stages nothing more
"${FIT[@]}" --fit-memory "$budget" --fit-dp-gbs 0.5 --fit-candidates "$W/fit_slow.jsonl" >/dev/null 2>&1
if "$PY" - "$W/fit.jsonl" "$W/fit_slow.jsonl" <<'PYEOF'
import json, sys
a, b = ([json.loads(l) for l in open(p)] for p in sys.argv[1:3])
assert len(a) == len(b)
for x, y in zip(a, b):
    assert (y["seconds"] > x["seconds"]) if x["zero"] == 3 else (y["seconds"] == x["seconds"]), (x, y)
PYEOF
then pass fit_dp_gbs_costs_zero3_gathers; else fail fit_dp_gbs_costs_zero3_gathers "--fit-dp-gbs 0.5 did not raise (only) --zero 3's cost"; fi

# ---------------------------------------------------------------------------
# training: 20 steps under each stage at the same layout. Without micro-steps the arithmetic
# is the same (the same reductions of the same sums, the same AdamW on the same shards): the
# checkpoints equal --zero 1's byte for byte, but for the header's zero field and the checksum.
# With micro-steps --zero 2 and 3 reduce every micro-step, summing in another order: within
# the one-process tolerance.
"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 1 500 >/dev/null && "$PY" dev/test/write_toy_shard.py "$W/val.bin" 5000 2 500 >/dev/null
toy_tokenizer "$W/tok512.bin"  # (the samplers run each layer's forward too: every rank, gathering under --zero 3)
LCOMMON=(--model tiny --V 512 --seq 32 --steps 20 --warmup 2 --val-every 10 --val-batches 2 --sample-every 20 --sample-len 8
         --tokenizer "$W/tok512.bin" --train-data "$W/train.bin" --val-data "$W/val.bin")
DCOMMON=(--D 24 --L 3 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --steps 20 --warmup 2 --val-every 10
         --val-clips 6 --total-batch 8 --sample-every 20 --sample-steps 3)
# same_state NAME A B: two checkpoints hold the same state (the bytes after the header, less the checksum)
same_state() {
  local n=$(( $(stat -c %s "$2") - 1024 - 8 ))
  if [ "$(stat -c %s "$2")" = "$(stat -c %s "$3")" ] && cmp -s -i 1024 -n "$n" "$2" "$3"; then pass "$1"
  else fail "$1" "$(cmp -i 1024 -n "$n" "$2" "$3" 2>&1 | head -n 1)"; fi
}
TOL=1e-5
for prog in llama dit; do
  if [ $prog = llama ]; then one=(--batch 2 --total-batch 128); micro=(--batch 2 --total-batch 256)
  else one=(--batch 4); micro=(--batch 2); fi
  run $prog 2 "$W/${prog}_z1" --zero 1 "${one[@]}" --ckpt-every 20
  for z in 2 3 3k; do  # (3k: --zero 3 --zero-reshard 0, each layer's parameters kept from forward to backward)
    zf=(--zero ${z%k}); [ "$z" = 3k ] && zf+=(--zero-reshard 0)
    run $prog 2 "$W/${prog}_z$z" "${zf[@]}" "${one[@]}" --ckpt-every 20 \
      && same_state "${prog}_zero${z}_20_steps_bitwise_zero1" "$W/${prog}_z1/ckpt_000020.bin" "$W/${prog}_z$z/ckpt_000020.bin"
  done
  # the optimizer on the CPU (--offload-optim 1) writes the same file
  run $prog 2 "$W/${prog}_z3_offload_optim" --zero 3 --offload-optim 1 "${one[@]}" --ckpt-every 20 \
    && same_ckpts "${prog}_zero3_offload_optim_ckpt_identical" "$W/${prog}_z3" "$W/${prog}_z3_offload_optim"
  # with micro-steps (sampled: --zero 3 for one trainer and 2 for the other; TEST_FULL=1 every stage)
  stages=(2 3 3k); [ "$FULL" != 1 ] && { [ $prog = llama ] && stages=(3) || stages=(2); }
  run $prog 2 "$W/${prog}_z1_micro" --zero 1 "${micro[@]}"
  for z in "${stages[@]}"; do
    zf=(--zero ${z%k}); [ "$z" = 3k ] && zf+=(--zero-reshard 0)
    run $prog 2 "$W/${prog}_z${z}_micro" "${zf[@]}" "${micro[@]}" \
      && agree "${prog}_zero${z}_micro_steps_vs_zero1" "$W/${prog}_z1_micro" "$W/${prog}_z${z}_micro" 1 $TOL
  done
  # the bytes a step sends, counted, equal the formula's (zero 3: two gathers of every layer a micro-step, one when kept)
  for z in "${stages[@]}"; do
    log="$W/${prog}_z${z}_micro.log"
    pred=$(grep -m1 "^comm per step, predicted" "$log" | sed 's/.*sends): //'); got=$(grep -m1 "^comm per step, counted" "$log" | sed 's/.*sent): //')
    if [ -n "$pred" ] && [ "$pred" = "$got" ]; then pass "${prog}_zero${z}_comm_bytes_counted"
    else fail "${prog}_zero${z}_comm_bytes_counted" "predicted '$pred', counted '$got'"; fi
  done
done

# ---------------------------------------------------------------------------
# checkpoints across stages and layouts: zero 3 at dp 4 resumed at one process and at zero 1 tp 2 x dp 2,
# and a zero 1 tp 2 x dp 2 checkpoint resumed at zero 3 dp 4 (the same global batch; metrics agree from step 11)
run llama 4 "$W/l_z3_dp4" --zero 3 --batch 1 --total-batch 128 --ckpt-every 10
run llama 1 "$W/l_z3_to_1" --batch 4 --total-batch 128 --resume "$W/l_z3_dp4/ckpt_000010.bin" \
  && agree llama_zero3_dp4_ckpt_resumed_at_one_process "$W/l_z3_dp4" "$W/l_z3_to_1" 11 $TOL
run llama 4 "$W/l_z3_to_tp2" --zero 1 --tp 2 --batch 2 --total-batch 128 --ckpt-every 10 --resume "$W/l_z3_dp4/ckpt_000010.bin" \
  && agree llama_zero3_dp4_ckpt_resumed_at_zero1_tp2xdp2 "$W/l_z3_dp4" "$W/l_z3_to_tp2" 11 $TOL
run llama 4 "$W/l_tp2_to_z3" --zero 3 --batch 1 --total-batch 128 --resume "$W/l_z3_to_tp2/ckpt_000020.bin" --steps 22 \
  && "$PY" - "$W/l_tp2_to_z3/metrics.jsonl" > "$W/l_tp2_to_z3.cmp" 2>&1 <<'PYEOF' \
  && pass llama_zero1_tp2xdp2_ckpt_resumed_at_zero3_dp4 || fail llama_zero1_tp2xdp2_ckpt_resumed_at_zero3_dp4 "$(tail -n 1 "$W/l_tp2_to_z3.cmp")"
import json, math, sys
r = [json.loads(l) for l in open(sys.argv[1])]
assert [x["step"] for x in r if "loss" in x] == [21, 22], [x["step"] for x in r]
assert all(math.isfinite(x["loss"]) for x in r if "loss" in x)
PYEOF
if [ "$FULL" = 1 ]; then  # (sampled: the same store moves the DiT's state; train_llama's runs above)
  run dit 4 "$W/d_z3_dp4" --zero 3 --batch 2 --ckpt-every 10
  run dit 1 "$W/d_z3_to_1" --batch 8 --resume "$W/d_z3_dp4/ckpt_000010.bin" \
    && agree dit_zero3_dp4_ckpt_resumed_at_one_process "$W/d_z3_dp4" "$W/d_z3_to_1" 11 $TOL
fi

# bit-exact resume under --zero 3 (dev/test/check_resume.sh: 2 steps + resume == 4 steps)
if env PYTHON="$PY" LAUNCH="${MPIRUN[*]} -np 2" bash dev/test/check_resume.sh ./train_llama_cpu "$W/resume_z3" --zero 3 --shard-vocab 1 \
    >"$W/resume_z3.log" 2>&1; then pass resume_zero3_bitexact; else fail resume_zero3_bitexact "$(tail -n 2 "$W/resume_z3.log" | tr '\n' ' ')"; fi

# ---------------------------------------------------------------------------
# a rank that stops (SIGSTOP) under --zero 3 after step 3, mid-step, where every layer's forward and backward
# waits on a gather: the other gives up after --comm-timeout with a message naming the collective
d="$W/z3_hang"; rm -rf "$d"
"${MPIRUN[@]}" -np 2 ./train_llama_cpu "${LCOMMON[@]}" --batch 2 --steps 100000 --val-every 0 --sample-every 0 --zero 3 \
  --comm-timeout 3 --run-dir "$d" >"$d.log" 2>&1 &
mp=$!
for _ in $(seq 1 300); do grep -q "^step  *3/" "$d.log" 2>/dev/null && break; sleep 0.1; done
signal_one_rank $mp STOP train_llama_cpu
if [ $ended = 1 ] && [ $rc -ne 0 ] && grep -q "did not complete within 3 s" "$d.log"; then
  pass "zero3_rank_hangs_timeout (in ${secs}s: $(grep -o '[a-z -]* of [0-9]* elements over the [a-z]* group' "$d.log" | head -n 1))"
else fail zero3_rank_hangs_timeout "ended $ended after ${secs}s, exit $rc: $(grep -m1 error "$d.log")"; fi

# a non-finite update under --zero 3 (planted into a rank's parameter shard after step 7) stops the run
# before the next update, with the last checkpoint intact and loadable
d="$W/z3_nan"; rm -rf "$d"
run_np 2 ./train_llama_cpu "${LCOMMON[@]}" --batch 2 --steps 30 --val-every 0 --sample-every 0 --zero 3 --test-nan-update 7 \
  --ckpt-every 5 --run-dir "$d" >"$d.log" 2>&1
rc=$?
last=$(ls "$d"/ckpt_*.bin 2>/dev/null | sort | tail -n 1)
if [ $rc -ne 0 ] && [ $rc -lt 128 ] && grep -q "non-finite" "$d.log" && [ -n "$last" ] && grep -q "$(basename "$last") is untouched" "$d.log" \
    && run_np 2 ./train_llama_cpu "${LCOMMON[@]}" --batch 2 --steps "$(basename "$last" .bin | sed 's/ckpt_0*//')" --val-every 0 \
         --sample-every 0 --zero 3 --run-dir "$d/check" --resume "$last" >"$d.check.log" 2>&1; then pass zero3_nan_stop
else fail zero3_nan_stop "exit $rc; $(grep -m1 -E 'error|non-finite' "$d.log"); last checkpoint: ${last:-none}"; fi
exit $failed
