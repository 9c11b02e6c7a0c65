#!/usr/bin/env bash
# Pipeline parallelism under Open MPI on the CPU build (make test runs it through dev/test/run_tests.sh):
# --pp N with the 1f1b and interleaved schedules in both trainers, against the references at every
# layout (with --tp, --cp, --zero 1, memory flags, uneven splits), a planted slot bug that the checks
# must catch, 20 training steps against one process, checkpoints across pipeline layouts, the bytes
# a stage sends counted against the formula, the bubble measured against the schedule's prediction,
# each stage's plan, a stage killed mid-step, and the refusals.
#
#   bash dev/test/pp_tests.sh PYTHON WORKDIR
#
# It writes its own fresh references (4 to 6 layers: configs not in dev/ref). Prints "PASS name" /
# "FAIL name: why"; exit status non-zero when anything failed. make test samples the reference
# layouts (every other one, alternating) and the training runs; TEST_FULL=1 runs them all.
set -u
PY=$1; W=$2; shift 2
cd "$(dirname "$0")/../.."
mkdir -p "$W"
source dev/test/mpi_lib.sh  # MPIRUN, run_np, run, passes_np, pass, fail, agree, same_ckpts, signal_one_rank
source dev/test/expect_error.sh
FULL=${TEST_FULL:-0}
for b in test_llama_cpu train_llama_cpu test_dit_cpu train_dit_cpu; do
  [ -x "./$b" ] || { fail "build_$b" "./$b is missing (make $b)"; exit 1; }
done
name_of() { echo "$*" | sed 's/\.[a-z]*ref//; s|[^ ]*/||g' | tr -d ' ,-'; }

# ---------------------------------------------------------------------------
# fresh references: llama untied L4 B4, tied L6 B8 (odd vocabulary, GQA), DiT L4 B4
L4="$W/pp_l4.lref"; L6="$W/pp_l6_tied.lref"; D4="$W/pp_dit_l4.dref"
"$PY" dev/ref/reference_llama.py --quiet --out "$L4" --V 61 --D 32 --L 4 --H 4 --KV 2 --F 40 --max-seq-len 16 --B 4 --T 8 \
  --n-steps 3 --tied 0 --seed 21 >"$W/gen_l4.log" 2>&1 || fail pp_fresh_llama_l4 "$(tail -n 2 "$W/gen_l4.log")"
"$PY" dev/ref/reference_llama.py --quiet --out "$L6" --V 53 --D 24 --L 6 --H 6 --KV 2 --F 36 --max-seq-len 12 --B 8 --T 8 \
  --n-steps 2 --tied 1 --seed 23 >"$W/gen_l6.log" 2>&1 || fail pp_fresh_llama_l6 "$(tail -n 2 "$W/gen_l6.log")"
"$PY" dev/ref/reference_dit.py --quiet --out "$D4" --C 1 --Fr 4 --Hi 8 --Wi 8 --pt 2 --ph 2 --pw 2 --D 16 --L 4 --H 2 --FF 36 \
  --NC 4 --B 4 --n-steps 3 --grad-clip 1.0 --seed 41 >"$W/gen_d4.log" 2>&1 || fail pp_fresh_dit_l4 "$(tail -n 2 "$W/gen_d4.log")"

# ---------------------------------------------------------------------------
# the test programs against their references: NP REF FLAGS (a micro-batch of one sample by default
# under --pp: the reference batch is the step's micro-batches)
SETS=(
  "2 $L4 --pp 2"
  "4 $L4 --pp 4"
  "2 $L4 --pp 2 --pp-layers 1,3"
  "4 $L4 --pp 2 --tp 2"
  "4 $L4 --pp 2 --tp 2 --tp-mode reducescatter --micro-batch 2"
  "4 $L4 --pp 2 --zero 1"
  "2 $L4 --pp 2 --pp-schedule interleaved --pp-virtual 2"
  "2 $L4 --pp 2 --recompute 2 --ffn-chunks 3 --ce-chunks 3 --offload-optim 1"
  "2 $L4 --pp 2 --offload-act -1"
  "4 $L4 --pp 4 --offload-act -1 --recompute 1"
  "2 $L4 --pp 2 --pp-schedule interleaved --pp-virtual 2 --offload-act 1"
  "2 $L6 --pp 2"
  "4 $L6 --pp 4 --pp-layers 1,2,2,1"
  "4 $L6 --pp 2 --tp 2 --tp-mode reducescatter --shard-vocab 1"
  "4 $L6 --pp 2 --cp 2"
  "4 $L6 --pp 2 --shard-vocab 1 --zero 1 --fp32-grad-accum 1"
  "4 $L4 --pp 2 --shard-vocab 1"
  "4 $L6 --pp 2 --zero 1 --fp32-grad-accum 1 --recompute 1"
  "2 $L6 --pp 2 --pp-schedule interleaved --pp-virtual 3"
  "4 $L6 --pp 2 --pp-schedule interleaved --pp-virtual 2 --tp 2"
  "2 dev/emu/ref/deep_l5_gqa.lref --pp 2 --ffn-chunks 2 --ffn-chunk-dim seq"
  "2 $D4 --pp 2"
  "4 $D4 --pp 4"
  "2 $D4 --pp 2 --pp-layers 3,1 --recompute 2"
  "4 $D4 --pp 2 --tp 2 --tp-mode reducescatter"
  "4 $D4 --pp 2 --zero 1 --ffn-chunks 2"
  "4 $D4 --pp 2 --cp 2 --cp-mode ulysses"
  "2 $D4 --pp 2 --pp-schedule interleaved --pp-virtual 2"
  "2 $D4 --pp 2 --offload-act -1 --ffn-chunks 2"
  "2 $D4 --pp 2 --pp-schedule interleaved --pp-virtual 2 --offload-act -1 --recompute 2"
  "2 dev/emu/ref/dit_deep_l5.dref --pp 2 --recompute 1"
)
i=0
for spec in "${SETS[@]}"; do
  i=$((i + 1))
  [ "$FULL" != 1 ] && [ $((i % 2)) -eq 0 ] && continue
  set -- $spec; np=$1; ref=$2; shift 2
  prog=./test_llama_cpu; case $ref in *.dref) prog=./test_dit_cpu ;; esac
  passes_np "pp_np${np}_$(name_of "$ref" "$@")" "$np" "$prog" --ref "$ref" "$@"
done

# every micro-batch's activations in one slot (--test-plant-pp-bug 1): stage 0 of a 1f1b pipeline holds two
# micro-batches at once, so the first one's backward reads the second one's activations; and an offloaded
# block's prefetch left out (--test-skip-prefetch 1) under the schedule: the checks must fail
for prog in "./test_llama_cpu --ref $L4" "./test_dit_cpu --ref $D4"; do
  for plant in "--test-plant-pp-bug 1" "--offload-act -1 --test-skip-prefetch 1"; do
    name=pp_planted_$(name_of "${plant%% 1}")_fails_$(basename "${prog%% *}" _cpu)
    run_np 2 $prog --pp 2 $plant >"$W/$name.log" 2>&1
    rc=$?
    if [ $rc -ne 0 ] && [ $rc -lt 124 ] && grep -q "^FAIL" "$W/$name.log"; then pass "$name"
    else fail "$name" "exit $rc: the planted bug went unnoticed"; fi
  done
done

# ---------------------------------------------------------------------------
# training: 20 steps at pp 2, pp 4 and interleaved against one process with the same global batch
"$PY" dev/test/write_toy_shard.py "$W/train.bin" 20000 1 500 >/dev/null && "$PY" dev/test/write_toy_shard.py "$W/val.bin" 5000 2 500 >/dev/null
toy_tokenizer "$W/tok512.bin"
LCOMMON=(--model tiny --V 512 --L 4 --seq 32 --steps 20 --warmup 2 --val-every 10 --val-batches 2 --sample-every 20 --sample-len 8
         --tokenizer "$W/tok512.bin" --train-data "$W/train.bin" --val-data "$W/val.bin" --total-batch 256)
DCOMMON=(--D 24 --L 4 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --steps 20 --warmup 2 --val-every 10
         --val-clips 6 --total-batch 8 --sample-every 20 --sample-steps 3)
# comm_counted NAME LOG: the bytes this rank sent in the first step equal the plan's formula
comm_counted() {
  local pred got
  pred=$(grep -m1 "^comm per step, predicted" "$2" | sed 's/.*sends): //'); got=$(grep -m1 "^comm per step, counted" "$2" | sed 's/.*sent): //')
  if [ -n "$pred" ] && [ "$pred" = "$got" ] && echo "$pred" | grep -q "pp send-recv"; then pass "$1"
  else fail "$1" "predicted '$pred', counted '$got'"; fi
}
TOL=1e-5  # the one-process reference tolerance (fp32): the gradient norm's partial sums and a tied embedding's
          # two parts are summed per stage, another order than one process's
for prog in llama dit; do
  b1=(--batch 1); [ $prog = dit ] && b1=(--batch 2)
  run $prog 1 "$W/${prog}_one" "${b1[@]}" --ckpt-every 10
  LAYOUTS=("pp2 2 --pp 2" "pp4 4 --pp 4 --ckpt-every 10" "interleaved 2 --pp 2 --pp-schedule interleaved --pp-virtual 2")
  LAYOUTS+=("pp2_offload 2 --pp 2 --offload-act -1")
  [ "$FULL" = 1 ] && LAYOUTS+=("pp2_sp2 4 --pp 2 --tp 2 --tp-mode reducescatter" "pp2_cp2_zero1 4 --pp 2 --cp 2 --zero 1 --recompute 2")
  # (dp 2: each rank validates --val-batches of its own rows, so 1 a rank is one process's 2)
  [ "$FULL" = 1 ] && [ $prog = llama ] && LAYOUTS+=("pp2_dp2_shard_vocab 4 --pp 2 --shard-vocab 1 --zero 1 --val-batches 1")
  for lay in "${LAYOUTS[@]}"; do
    set -- $lay; name=${prog}_$1; np=$2; shift 2
    run $prog "$np" "$W/$name" "${b1[@]}" "$@" && agree "${name}_20_steps_vs_one_process" "$W/${prog}_one" "$W/$name" 1 $TOL \
      && comm_counted "${name}_comm_bytes_counted" "$W/$name.log"
  done
done
# the samples: every stage takes the same sampler steps on the last stage's logits (velocities): the same
# story as one process's, and the DiT's GIFs byte for byte
s1=$(grep -A1 -- "--- sample ---" "$W/llama_one.log" | tail -n 1); s2=$(grep -A1 -- "--- sample ---" "$W/llama_pp2.log" | tail -n 1)
if [ -n "$s1" ] && [ "$s1" = "$s2" ]; then pass llama_pp2_sample_as_one_process; else fail llama_pp2_sample_as_one_process "'$s1' / '$s2'"; fi
if [ -d "$W/dit_pp2/samples" ] && diff -r -x '*.clips' "$W/dit_one/samples" "$W/dit_pp2/samples" >/dev/null; then pass dit_pp2_samples_as_one_process
else fail dit_pp2_samples_as_one_process "$(diff -rq -x '*.clips' "$W/dit_one/samples" "$W/dit_pp2/samples" 2>&1 | head -n 2 | tr '\n' ' ')"; fi
if [ "$(grep "val loss" "$W/llama_one/main.log")" = "$(grep "val loss" "$W/llama_pp2/main.log")" ]; then pass llama_pp2_validation_as_one_process
else fail llama_pp2_validation_as_one_process "$(grep "val loss" "$W/llama_pp2/main.log" | head -n 1)"; fi

# ---------------------------------------------------------------------------
# checkpoints across pipeline layouts: the pp 4 checkpoint resumed at one process and at tp 2 x dp 2, and a
# tp 2 x dp 2 checkpoint resumed at pp 4 (the same global micro-batch B x dp, whose data position a checkpoint
# carries: the metrics agree from step 11)
run llama 1 "$W/llama_pp4_to_1" --batch 1 --resume "$W/llama_pp4/ckpt_000010.bin" \
  && agree llama_pp4_ckpt_resumed_at_one_process "$W/llama_pp4" "$W/llama_pp4_to_1" 11 $TOL
run dit 1 "$W/dit_pp4_to_1" --batch 2 --resume "$W/dit_pp4/ckpt_000010.bin" \
  && agree dit_pp4_ckpt_resumed_at_one_process "$W/dit_pp4" "$W/dit_pp4_to_1" 11 $TOL
run dit 4 "$W/dit_pp4_to_tp2dp2" --tp 2 --batch 1 --resume "$W/dit_pp4/ckpt_000010.bin" \
  && agree dit_pp4_ckpt_resumed_at_tp2xdp2 "$W/dit_pp4" "$W/dit_pp4_to_tp2dp2" 11 $TOL
run llama 4 "$W/l_pp4b2" --pp 4 --batch 2 --ckpt-every 10
run llama 4 "$W/l_pp4_to_tp2dp2" --tp 2 --batch 1 --ckpt-every 10 --resume "$W/l_pp4b2/ckpt_000010.bin" \
  && agree llama_pp4_ckpt_resumed_at_tp2xdp2 "$W/l_pp4b2" "$W/l_pp4_to_tp2dp2" 11 $TOL
run llama 4 "$W/l_tp2dp2" --tp 2 --batch 1 --ckpt-every 10
run llama 4 "$W/l_tp2dp2_to_pp4" --pp 4 --batch 2 --resume "$W/l_tp2dp2/ckpt_000010.bin" \
  && agree llama_tp2xdp2_ckpt_resumed_at_pp4 "$W/l_tp2dp2" "$W/l_tp2dp2_to_pp4" 11 $TOL

# the pp 4 checkpoint is the one-process file (each element written once: a tied embedding by stage 0)
c="$W/llama_one/ckpt_000010.bin"
if [ -f "$c" ] && LLMC_TEST_CKPT_AT_RESUME=1 run llama 4 "$W/l_ckpt_same" --pp 4 --batch 1 --steps 10 --resume "$c" \
    && cmp -i 1024 -n $(( $(stat -c %s "$c") - 1032 )) "$c" "$W/l_ckpt_same/ckpt_000010.bin" >"$W/l_ckpt_same.cmp" 2>&1; then
  pass llama_ckpt_written_at_pp4_is_the_one_process_file
else fail llama_ckpt_written_at_pp4_is_the_one_process_file "$(cat "$W/l_ckpt_same.cmp" 2>/dev/null)"; fi

# ---------------------------------------------------------------------------
# the bubble on 2 ranks on 2 cores: the step against the schedule run with the measured costs, within 20%
# (a model whose compute dominates the transfers), and each stage's plan: stage 0 holds 2 micro-batches' activations
rm -rf "$W/bubble"
run_np 2 ./train_llama_cpu --V 512 --D 256 --L 8 --H 4 --KV 4 --F 704 --max-seq-len 128 --seq 128 --batch 1 --total-batch 1024 \
  --steps 4 --warmup 2 --val-every 0 --sample-every 0 --train-data "$W/train.bin" --pp 2 --run-dir "$W/bubble" >"$W/bubble.log" 2>&1
ratio=$(grep -o "ratio [0-9.]*" "$W/bubble.log" | head -n 1 | cut -d' ' -f2)
if [ -n "$ratio" ] && "$PY" -c "import sys; sys.exit(0 if 0.8 <= float('$ratio') <= 1.2 else 1)"; then
  pass "pp2_bubble_step_within_20_percent_of_the_schedule (ratio $ratio)"
else fail pp2_bubble_step_within_20_percent_of_the_schedule "ratio '${ratio:-none}': $(grep -m1 'pipeline, measured' "$W/bubble.log")"; fi
if grep -q "micro-batches in flight per stage: 2 1" "$W/bubble.log" && grep -q "layers a stage: 4,4" "$W/bubble.log"; then
  pass pp2_plan_line_in_flight
else fail pp2_plan_line_in_flight "$(grep -m1 '^pipeline:' "$W/bubble.log")"; fi

# --fit-memory under --pp: every stage's plan must fit (stage 0 holds 2 micro-batches, stage 1 one: a budget
# between their flag-free plans, 130 MiB with the CPU build's 64 MiB reserve, needs flags on stage 0 only); with
# --fit-per-stage each stage searches its own: stage 1 keeps the flag-free plan. The run with the per-stage
# flags trains as the flag-free pp 2 run (the memory flags leave the arithmetic within the tolerance)
FITC=(--V 512 --D 256 --L 8 --H 4 --KV 4 --F 704 --max-seq-len 128 --seq 128 --batch 1 --total-batch 1024 --pp 2)
./train_llama_cpu "${FITC[@]}" --plan-only 1 --fit-memory 0.127 --plan-json "$W/fit_pp.json" >"$W/fit_pp.log" 2>&1
./train_llama_cpu "${FITC[@]}" --plan-only 1 --fit-memory 0.127 --fit-per-stage 1 --plan-json "$W/fit_pps.json" >"$W/fit_pps.log" 2>&1
if "$PY" - "$W/fit_pp.json" "$W/fit_pps.json" "$W/fit_pps.log" > "$W/fit_pp.check" 2>&1 <<'PYEOF'
import json, re, sys
budget = 0.127 * 2**30 - 64 * 2**20
uni, per = (json.load(open(f))["rank_plans"]["plans"] for f in sys.argv[1:3])
assert all(x["device"] <= budget for x in uni + per), [x["device"] / 2**20 for x in uni + per]
log = open(sys.argv[3]).read()
st = {int(m.group(1)): m.group(2) for m in re.finditer(r"pipeline stage (\d), its own flags: .*?chose (.*?): plan", log)}
assert sorted(st) == [0, 1], st
assert "--recompute 0 --offload-act 0" in st[1] and "--ffn-chunks 1" in st[1], st[1]
assert st[0] != st[1], st
print("stage 0:", st[0], "| stage 1:", st[1])
PYEOF
then pass "pp2_fit_memory_every_stage_and_per_stage ($(tail -n 1 "$W/fit_pp.check"))"
else fail pp2_fit_memory_every_stage_and_per_stage "$(tail -n 1 "$W/fit_pp.check")"; fi
rm -rf "$W/fit_run"
run_np 2 ./train_llama_cpu "${FITC[@]}" --steps 4 --warmup 2 --val-every 0 --sample-every 0 --train-data "$W/train.bin" \
  --fit-memory 0.127 --fit-per-stage 1 --run-dir "$W/fit_run" >"$W/fit_run.log" 2>&1 \
  && agree pp2_fit_per_stage_run_as_flag_free "$W/bubble" "$W/fit_run" 1 $TOL

# --plan-only: each stage's plan, the largest named; stage 0 of 1f1b holds the most activations
# (--plan-rank 7: the last stage of the second pipeline, its plan in full, the same total as the summary's)
./train_llama_cpu --model llama3-8B --seq 4096 --batch 1 --total-batch 32768 --pp 4 --dp 2 --plan-only 1 \
  --plan-json "$W/plan_pp4.json" >"$W/plan_pp4.log" 2>&1
./train_llama_cpu --model llama3-8B --seq 4096 --batch 1 --total-batch 32768 --pp 4 --dp 2 --plan-only 1 --plan-rank 7 \
  --plan-json "$W/plan_pp4_r7.json" >"$W/plan_pp4_r7.log" 2>&1
if "$PY" - "$W/plan_pp4.json" "$W/plan_pp4_r7.json" > "$W/plan_pp4.check" 2>&1 <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))["rank_plans"]
r7 = json.load(open(sys.argv[2]))
assert r7["device"]["total"] == [x["device"] for x in p["plans"] if x["stage"] == 3][0], r7["device"]["total"]
assert p["ranks"] == 8 and len(p["plans"]) == 4, p
st = {x["stage"]: x["device"] for x in p["plans"]}
assert sorted(st) == [0, 1, 2, 3], st
assert st[0] > st[1] > st[2], st
assert p["largest"] == 0, p["largest"]
print("device MiB by stage:", [round(st[s] / 2**20) for s in range(4)])
PYEOF
then pass "pp4_plan_only_each_stage ($(tail -n 1 "$W/plan_pp4.check"))"; else fail pp4_plan_only_each_stage "$(tail -n 1 "$W/plan_pp4.check")"; fi

# ---------------------------------------------------------------------------
# --offload-act -1 under --pp: Megatron #1752's rule, the model's last layer resident on the last stage, every
# other layer of every micro-batch slot on the host (the plan's entries, per stage)
./train_llama_cpu --model llama3-8B --seq 4096 --batch 1 --total-batch 32768 --pp 2 --offload-act -1 --plan-only 1 \
  --plan-json "$W/plan_off_r0.json" >/dev/null 2>&1
./train_llama_cpu --model llama3-8B --seq 4096 --batch 1 --total-batch 32768 --pp 2 --offload-act -1 --plan-only 1 \
  --plan-rank 1 --plan-json "$W/plan_off_r1.json" >/dev/null 2>&1
if "$PY" - "$W/plan_off_r0.json" "$W/plan_off_r1.json" > "$W/plan_off.check" 2>&1 <<'PYEOF'
import json, sys
def entry(p, name):
    return sum(e["bytes"] for e in p["device"]["entries"] + p["host"]["entries"] if e["name"] == name)
r0, r1 = (json.load(open(f)) for f in sys.argv[1:3])
b = r0["act_block_bytes"]
# stage 0: 16 layers x 2 micro-batches, all offloaded; stage 1: 16 x 1, its last layer resident
assert entry(r0, "saved activations (layers)") == 0 and entry(r0, "offloaded activations") == 32 * b, entry(r0, "offloaded activations") / b
assert entry(r1, "saved activations (layers)") == 1 * b and entry(r1, "offloaded activations") == 15 * b
assert entry(r0, "offload slots") == 2 * b == entry(r1, "offload slots")
print("stage 0: 32 blocks on the host; stage 1: 15 on the host, its last layer resident")
PYEOF
then pass "pp2_offload_plan_megatron_rule ($(tail -n 1 "$W/plan_off.check"))"; else fail pp2_offload_plan_megatron_rule "$(tail -n 1 "$W/plan_off.check")"; fi

# a stage that stops (SIGSTOP) mid-run: its neighbour gives up after --comm-timeout with a message naming
# the pipeline's transfer or a collective
d="$W/pp_hang"; rm -rf "$d"
"${MPIRUN[@]}" -np 2 ./train_llama_cpu "${LCOMMON[@]}" --batch 1 --steps 100000 --val-every 0 --sample-every 0 --pp 2 \
  --comm-timeout 3 --run-dir "$d" >"$d.log" 2>&1 &
mp=$!
for _ in $(seq 1 300); do grep -q "^step  *3/" "$d.log" 2>/dev/null && break; sleep 0.1; done
signal_one_rank $mp STOP train_llama_cpu
if [ $ended = 1 ] && [ $rc -ne 0 ] && grep -q "did not complete within 3 s" "$d.log"; then
  pass "pp_stage_hangs_timeout (in ${secs}s: $(grep -o '[a-z -]* of [0-9]* elements over the [a-z-]* group' "$d.log" | head -n 1))"
else fail pp_stage_hangs_timeout "ended $ended after ${secs}s, exit $rc: $(grep -m1 error "$d.log")"; fi

# refusals, each with a message naming the flags
expect_error pp_zero2_refused "--zero 2 --pp 2 DeepSpeed --zero 1" run_np 2 ./train_llama_cpu "${LCOMMON[@]}" --pp 2 --zero 2 --run-dir "$W/e1"
expect_error pp_more_stages_than_layers "--pp 8 stages at least one layer 4 layers" run_np 8 ./train_llama_cpu "${LCOMMON[@]}" --pp 8 --run-dir "$W/e2"
expect_error pp_layers_bad_sum "--pp-layers '1,2' sums to 3" run_np 2 ./train_llama_cpu "${LCOMMON[@]}" --pp 2 --pp-layers 1,2 --run-dir "$W/e3"
expect_error pp_interleaved_micro_multiple "interleaved groups of --pp multiple" run_np 2 ./train_llama_cpu "${LCOMMON[@]}" \
  --pp 2 --pp-schedule interleaved --pp-virtual 2 --batch 1 --total-batch 96 --run-dir "$W/e4"
expect_error pp_world_not_divisible "--pp 2 must divide the number of ranks 3" run_np 3 ./train_llama_cpu "${LCOMMON[@]}" --pp 2 --run-dir "$W/e6"
expect_error pp_virtual_needs_interleaved "--pp-virtual 2 is for --pp-schedule interleaved" ./train_llama_cpu --pp 2 --pp-virtual 2 --plan-only 1
exit $failed
