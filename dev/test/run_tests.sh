#!/usr/bin/env bash
# make test: every CPU test, one line per check, ending with "N passed, N failed".
# Each check runs in its own process, so a crash or an exit(1) is one failed check,
# never the end of the run. Exit status: non-zero when anything failed.
set -u
cd "$(dirname "$0")/../.."
PY=$(bash scripts/ensure_python_deps.sh | tail -n1)
TMP=$(mktemp -d "${TMPDIR:-/tmp}/llmc_test.XXXXXX")
# (the background jobs below, if still running, are stopped with the run)
trap 'for p in ${LANE_PID:-} ${CP_PID:-}; do pkill -P "$p" 2>/dev/null; kill "$p" 2>/dev/null; done; rm -rf "$TMP"' EXIT
passed=0; failed=0; failed_names=""
T0=$(date +%s)
# make test samples (a developer's loop of about 7 minutes on 2 cores); TEST_FULL=1 (make test-full, which CI
# runs) runs all of it: the dev/cuda ladders compiled and under the emulator, the emulated CUDA
# trainers in fp32 (sampled: bf16), calls 2 and 3 of scripts/gpu_check.sh on the CPU (sampled: the
# plan and call 1), every flag set at every layout of the multi-process tests (sampled: the plain
# run and one set in turn, dev/test/mpi_lib.sh), the Hugging Face round trip, the SLURM cluster and
# the CPU step yardstick
FULL=${TEST_FULL:-0}
# a section header, with the minutes and seconds make test has run so far (the whole run must stay under 20 minutes)
section() { local e=$(( $(date +%s) - T0 )); printf '== [%d:%02d] %s\n' $((e / 60)) $((e % 60)) "$1"; }

pass() { echo "PASS $1"; passed=$((passed + 1)); }
fail() { echo "FAIL $1${2:+: $2}"; failed=$((failed + 1)); failed_names="$failed_names $1"; }

# each check's wall time, for the slowest-checks table at the end (where make test's minutes go)
now() { date +%s.%N; }
# times_line START END NAME: one row of that table
times_line() { awk -v a="$1" -v b="$2" -v n="$3" 'BEGIN { printf "%.1f %s\n", b - a, n }' >> "$TMP/times"; }
timed() { times_line "$1" "$(now)" "$2"; }
# check NAME CMD...: passes when CMD exits 0; its output is kept in $TMP/NAME.log
check() {
  local name=$1 t=$(now); shift
  if "$@" >"$TMP/$name.log" 2>&1; then pass "$name"; else fail "$name" "exit $? ($*)"; tail -n 15 "$TMP/$name.log" | sed 's/^/    /'; fi
  timed "$t" "$name"
}
# check_error NAME "WORDS" CMD...: passes when CMD exits non-zero and prints every word
# (case-insensitive) of WORDS: bad input must end with a clear message, not a crash
check_error() {
  local name=$1 words=$2 t=$(now); shift 2
  "$@" >"$TMP/$name.log" 2>&1
  local rc=$?
  timed "$t" "$name"
  local missing=""
  for w in $words; do grep -qi -- "$w" "$TMP/$name.log" || missing="$missing $w"; done
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ -z "$missing" ]; then pass "$name"
  elif [ $rc -eq 0 ]; then fail "$name" "exit 0, expected an error"
  elif [ $rc -ge 128 ]; then fail "$name" "crashed (exit $rc) instead of a clear error"
  else fail "$name" "exit $rc but the message lacks:$missing"; head -n 5 "$TMP/$name.log" | sed 's/^/    /'; fi
}
# a sub-test that prints its own PASS/FAIL lines: each line counts
sub_tests() {
  local name=$1 t=$(now); shift
  "$@" >"$TMP/$name.log" 2>&1
  local rc=$?
  timed "$t" "$name (sub-tests)"
  count_sub_tests "$name" $rc
}
# count_sub_tests NAME RC: the PASS/FAIL lines of $TMP/NAME.log, and a non-zero RC without any FAIL line
count_sub_tests() {
  local name=$1 rc=$2 line
  while IFS= read -r line; do
    case "$line" in
      PASS\ *) pass "$name/${line#PASS }" ;;
      FAIL\ *) fail "$name/${line#FAIL }" ;;
    esac
  done < "$TMP/$name.log"
  [ $rc -eq 0 ] || grep -q '^FAIL' "$TMP/$name.log" || fail "$name" "exit $rc"
}

# The background lane, started now beside the CPU checks (most of which keep one of the two
# cores busy, not both): the CUDA compile (nvcc, one at a time, about 20 s of one core a
# program), then the emulator stage (dev/emu: every llmc kernel against its twin, the emulated
# CUDA trainers), then the Hugging Face round trip (test-full only: it installs transformers).
# test-full: then gpu_check's calls on the CPU (make test runs its call 1 in the foreground after
# its own checks). The run waits for the lane at its end and counts the lane's results there.
NVCC_PATH=$(bash -c 'command -v nvcc || ls /usr/local/cuda/bin/nvcc' 2>/dev/null | head -n1)
# Sampled: four of the six CUDA programs (train_llama and train_dit in bf16, whose code
# test_llama.cu and test_dit.cu include, and both test programs in FP32); the emulator's kernel
# harness in bf16 (every kernel, its coverage check included; the tensor-core attention at a
# sample of its head dims, EMU_HARNESS_SAMPLE=1) and of its emulated CUDA trainers the bf16
# test programs; no dev/cuda ladders. test-full: all of it.
CUDA_SET=(build/train_llama build/train_dit build/test_llama_fp32 build/test_dit_fp32)
EMU_ENV=(EMU_PRECISIONS=bf16 EMU_LADDERS=0 EMU_TRAINER=1 "EMU_TRAINER_FILTER=test_*.bf16." EMU_TRAINER_SAMPLE=1
         EMU_HARNESS_SAMPLE=1)
if [ "$FULL" = 1 ]; then CUDA_SET=(cuda-compile); EMU_ENV=(); fi
# gpu_call_on_cpu N: call N of scripts/gpu_check.sh on the CPU build with tiny models (its own
# $OUT, as on the device): every step, file and table; the CPU's numbers say nothing about a GPU.
# Sampled: call 1 (the headline call); test-full: all three. Run by the background lane.
GPU_CALLS="1"; [ "$FULL" = 1 ] && GPU_CALLS="1 2 3"
gpu_call_on_cpu() {
  local call=$1
  bash -c "GPU_CHECK_CPU=1 PYTHON=$PY OUT=$TMP/gpu_call$call \
    GPU_CHECK_SCRATCH=$TMP/gpu_call${call}_scratch bash scripts/gpu_check.sh $call && $PY - $TMP/gpu_call$call $call <<'PYEOF'
import json, os, re, sys
out, call = sys.argv[1], sys.argv[2]
files = os.listdir(out)
assert len(files) <= 8, files
for f in ('summary_call%s.md' % call, 'gpu_check_call%s.log' % call, 'bench_call%s.jsonl' % call):
    assert os.path.getsize(os.path.join(out, f)) > 0, f
bench = [json.loads(l) for l in open(os.path.join(out, 'bench_call%s.jsonl' % call))]
want = {'1': 6, '2': 3, '3': 2}[call]
assert len(bench) == want and all(b['tok_per_s'] > 0 and b['data'] for b in bench), bench
summary = open(os.path.join(out, 'summary_call%s.md' % call)).read()
if call == '3':
    gap = re.search(r'max_abs_gap ([0-9.e+-]+)', summary)
    assert gap and float(gap.group(1)) < 1e-3, 'train_llama and the PyTorch peer disagree: %s' % gap
    assert 'memory sweep' in summary
print('call %s: %d throughput rows, %d files' % (call, len(bench), len(files)))
PYEOF"
}
# every call of $GPU_CALLS, each with its log and exit status; the start time in gpu_calls.start
gpu_calls_on_cpu() {
  now > "$TMP/gpu_calls.start"
  for call in $GPU_CALLS; do gpu_call_on_cpu "$call" > "$TMP/gpu_check_cpu_call$call.log" 2>&1; echo $? > "$TMP/gpu_check_cpu_call$call.rc"; done
  now > "$TMP/gpu_calls.end"
}
LANE_T0=$(now)
(
  # the bf16 programs with cuDNN's attention (USE_CUDNN=1) where cuDNN and its frontend's headers can be had
  # (compiled and linked only: nothing here can run cuDNN, the emulator included)
  if [ -n "$NVCC_PATH" ]; then
    cudnn=$(make -s --no-print-directory cudnn-available 2> "$TMP/cuda_compile.log"); echo "${cudnn:-0}" > "$TMP/cuda_compile.cudnn"
    make -s -j1 "${CUDA_SET[@]}" CUDA_ARCH=90 USE_CUDNN="${cudnn:-0}" >> "$TMP/cuda_compile.log" 2>&1; echo $? > "$TMP/cuda_compile.rc"
  fi
  now > "$TMP/cuda_compile.end"
  env ${EMU_ENV[@]+"${EMU_ENV[@]}"} bash dev/emu/run.sh > "$TMP/emu.log" 2>&1; echo $? > "$TMP/emu.rc"
  now > "$TMP/emu.end"
  # the Hugging Face round trip (mostly one Python process importing transformers; make test-full and CI)
  if [ "$FULL" = 1 ]; then
    if PY_HF=$(bash scripts/ensure_hf_deps.sh 2>"$TMP/hf_deps.log" | tail -n1) && [ -n "$PY_HF" ]; then
      bash dev/test/hf_roundtrip.sh "$PY_HF" "$TMP/hf" > "$TMP/hf.log" 2>&1; echo $? > "$TMP/hf.rc"
    else
      echo "FAIL deps: scripts/ensure_hf_deps.sh could not install the pinned transformers: $(tail -n 2 "$TMP/hf_deps.log" | tr '\n' ' ')" > "$TMP/hf.log"
      echo 1 > "$TMP/hf.rc"
    fi
  fi
  now > "$TMP/hf.end"
  # test-full: the three calls after the whole emulator (both precisions, every ladder), where
  # they have a core to themselves; beside it their CPU steps outran their limits
  if [ "$FULL" = 1 ]; then gpu_calls_on_cpu; fi
) &
LANE_PID=$!
# the lane's wall time from its start, into the slowest-checks table
lane_timed() { times_line "$1" "$(cat "$2")" "$3"; }

section "test_llama against the committed references (dev/ref)"
for f in dev/ref/*.lref; do check "ref_$(basename "$f" .lref)" ./test_llama_cpu --ref "$f"; done

section "test_llama against fresh references (configs not in dev/ref)"
# name V D L H KV F max_seq_len B T n_steps tied seed
while read -r name V D L H KV F S B T N tied seed; do
  if "$PY" dev/ref/reference_llama.py --quiet --out "$TMP/$name.lref" --V "$V" --D "$D" --L "$L" --H "$H" --KV "$KV" \
      --F "$F" --max-seq-len "$S" --B "$B" --T "$T" --n-steps "$N" --tied "$tied" --seed "$seed" >"$TMP/gen_$name.log" 2>&1; then
    check "fresh_$name" ./test_llama_cpu --ref "$TMP/$name.lref"
    FRESH="${FRESH:-} $TMP/$name.lref"
  else fail "fresh_$name" "reference_llama.py failed: $(tail -n 2 "$TMP/gen_$name.log")"; fi
done <<'CONFIGS'
gqa8x2_odd 101 48 3 8 2 77 24 2 13 3 0 11
mqa_tied_long 50 32 1 2 1 45 40 1 37 2 1 12
mha_wide_ff 73 30 2 5 5 130 10 4 10 3 0 13
gqa_tied_b4 75 24 2 6 2 40 12 4 11 3 1 14
CONFIGS

section "memory flags: same results as the reference, bitwise where the arithmetic order is unchanged"
FLAGSETS=(
  "--ffn-chunks 3"
  "--ffn-chunks 5 --ffn-chunk-dim seq"
  "--ce-chunks 5"
  "--ce-chunks 2"
  "--offload-act -1"
  "--offload-act 1"
  "--offload-act 3"
  "--recompute 1"
  "--recompute 2"
  "--ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
  "--ffn-chunks 4 --ffn-chunk-dim seq --ce-chunks 3 --offload-act 2 --recompute 2"
  "--ffn-chunks 2 --ce-chunks 7 --recompute 2"
  "--offload-optim 1"
  "--offload-optim 1 --ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
)
for f in dev/ref/*.lref ${FRESH:-}; do
  base=$(basename "$f" .lref)
  L=$("$PY" -c "import struct, sys; print(struct.unpack('<13i', open(sys.argv[1], 'rb').read(52))[4])" "$f")  # header word 4
  for fl in "${FLAGSETS[@]}"; do
    # --offload-act N beyond the model's L is a user error, tested below; skip it here
    n=$(echo "$fl" | sed -n 's/.*--offload-act \([0-9]*\).*/\1/p')
    [ -n "$n" ] && [ "$n" -gt "$L" ] && continue
    check "flags_${base}_$(echo "$fl" | sed 's/ -1/ all/g' | tr -d ' -' )" ./test_llama_cpu --ref "$f" $fl
  done
done

section "offload poison: a backward that skips the prefetch must fail the gradient check"
for f in dev/ref/mha_untied_small.lref dev/ref/gqa_h4kv2_tied.lref; do
  check_error "poison_$(basename "$f" .lref)" "FAIL" ./test_llama_cpu --ref "$f" --offload-act -1 --test-skip-prefetch 1
done

section "memory plan against the formulas of docs/memory.md"
check memory_plan "$PY" dev/test/check_memory_plan.py ./train_llama_cpu
check memory_plan_cp "$PY" dev/test/check_cp_plan.py ./train_llama_cpu ./train_dit_cpu
# each pipeline stage's plan (--plan-rank) against docs/memory.md section 12
check memory_plan_pp "$PY" dev/test/check_pp_plan.py ./train_llama_cpu
# the plan of every rank (--plan-only's summary, the JSON's rank_plans): an FFN of 251 split over tp 2 gives the
# even TP ranks one more hidden unit than the odd ones, so two distinct plans; with 250, one
check rank_plans bash -c "./train_llama_cpu --plan-only 1 --dp 2 --tp 2 --F 251 --D 64 --H 4 --KV 2 --L 2 --V 1001 --zero 1 \
    --plan-json '$TMP/rank_plans.json' > '$TMP/rank_plans.out' && grep -q 'the plans of all 4 ranks: 2 distinct' '$TMP/rank_plans.out' &&
  '$PY' -c \"import json; p = json.load(open('$TMP/rank_plans.json'))['rank_plans']; \
assert [x['ranks'] for x in p['plans']] == ['0, 2', '1, 3'] and p['plans'][0]['device'] > p['plans'][1]['device'] and p['largest'] == 0 and p['unlisted'] == 0, p\" &&
  ./train_llama_cpu --plan-only 1 --dp 2 --tp 2 --F 250 --D 64 --H 4 --KV 2 --L 2 --V 1001 --zero 1 | grep -q 'the plans of all 4 ranks: 1 distinct'"

section "dataloader and tokenizer"
sub_tests dataloader ./build/test_dataloader
sub_tests bad_shards bash dev/test/bad_shards.sh ./build/test_dataloader
if [ -f ../shared/data/tinystories/tokenizer/tokenizer.bin ]; then
  sub_tests tokenizer ./build/test_tokenizer ../shared/data/tinystories/tokenizer/tokenizer.bin
else
  echo "(../shared/data/tinystories is absent: the decoder is checked on a synthetic file with the same ids)"
  sub_tests tokenizer ./build/test_tokenizer --synthetic
fi

if [ -d ../shared/data/tinystories ]; then
  # the TinyStories text's mojibake repaired at data preparation (data/text_repair.py): none left in any file or
  # prepared story, known examples exact, clean text unchanged; --planted (the unrepaired text) must fail
  sub_tests text_repair "$PY" dev/test/test_text_repair.py
  check_error text_repair_planted "FAIL" "$PY" dev/test/test_text_repair.py --planted
  # the 512-piece tokenizer of stories260K: trained twice (deterministic), decoded by the C tokenizer piece by piece
  if "$PY" data/prepare_tinystories.py --vocab-size 512 --out-dir "$TMP/sp512" --decode-fixture "$TMP/tok512_fixture.txt" \
        >"$TMP/prep512.log" 2>&1 &&
     "$PY" data/prepare_tinystories.py --vocab-size 512 --out-dir "$TMP/sp512_again" >>"$TMP/prep512.log" 2>&1; then
    sub_tests tokenizer512 ./build/test_tokenizer --fixture "$TMP/tok512_fixture.txt" "$TMP/sp512/tok512.bin"
    check tokenizer512_deterministic cmp "$TMP/sp512/tok512.model" "$TMP/sp512_again/tok512.model"
    check tokenizer512_shards_deterministic cmp "$TMP/sp512/tinystories_train_000000.bin" "$TMP/sp512_again/tinystories_train_000000.bin"
  else fail tokenizer512 "prepare_tinystories.py --vocab-size 512: $(tail -n 2 "$TMP/prep512.log")"; fi
  check english_words_real_text sh -c "head -c 20000 ../shared/data/tinystories/valid_first1000.txt | '$PY' scripts/english_words.py --min 0.99"
  check_error english_words_below_min "FAIL" sh -c "printf 'Once upon a time blorf xqzt gnarp.\n' | '$PY' scripts/english_words.py --min 0.97"
fi

section "initialisation: llmc/core/rand.h's parallel fills, bit for bit and in time (dev/test/test_rand.c)"
sub_tests rand ./build/test_rand
# 1.24e8 normals (a tenth of llama3-1B) on 2 threads: 1.5-1.7 s measured on 2 free cores, 3.2-3.5 s
# with one of them busy elsewhere (7 s at a load of 8); the bound is 3.5x the busy case, not to be
# flaky on a shared machine. It catches a fill gone badly wrong (a seek per number, say), not a
# lost thread.
check rand_fill_time ./build/test_rand --time 1.24e8 2 12

section "context parallelism: ring attention's log-sum-exp merge against whole attention (dev/test/test_attention_merge.c)"
# the CPU twins (llmc/kernels/cpu/attention_merge.h, attention.h): blocks merged = whole, forward and
# backward, causal and full, 50 shapes; under a second (one thread: the shapes are tiny)
sub_tests attention_merge ./build/test_attention_merge

section "pipeline parallelism: the 1f1b and interleaved schedules simulated rank by rank (dev/test/test_pp_schedule.c)"
# every rank's op list run together with blocking transfers: no deadlock, every dependency, the activations
# held and the bubble against the formulas, four broken schedules caught, bad --pp-layers refused; 0.1 s
sub_tests pp_schedule ./build/test_pp_schedule

section "bad input: a clear message and a non-zero exit"
R=dev/ref/mha_untied_small.lref
head -c 3000 "$R" > "$TMP/truncated.lref"
{ printf '\x01\x02\x03\x04'; tail -c +5 "$R"; } > "$TMP/badmagic.lref"
# header with D=30, H=4 (D % H != 0), else intact
"$PY" - "$R" "$TMP/badcfg.lref" <<'PYEOF'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read()); struct.pack_into('<i', b, 3 * 4, 30); open(sys.argv[2], 'wb').write(b)
PYEOF
check_error ref_missing_file "cannot open" ./test_llama_cpu --ref "$TMP/no_such.lref"
check_error ref_truncated "truncated" ./test_llama_cpu --ref "$TMP/truncated.lref"
check_error ref_bad_magic "magic" ./test_llama_cpu --ref "$TMP/badmagic.lref"
check_error ref_bad_config "divisible" ./test_llama_cpu --ref "$TMP/badcfg.lref"
"$PY" - "$R" "$TMP/nan_params.lref" <<'PYEOF'
import struct, sys
b = bytearray(open(sys.argv[1], 'rb').read()); struct.pack_into('<f', b, 1024 + 4 * 17, float('nan')); open(sys.argv[2], 'wb').write(b)
PYEOF
check_error ref_nan_params "non-finite parameters" ./test_llama_cpu --ref "$TMP/nan_params.lref"
check_error ref_no_args "usage" ./test_llama_cpu
check_error test_unknown_flag "unknown flag" ./test_llama_cpu --ref "$R" --frobnicate 1
check_error train_unknown_flag "unknown flag" ./train_llama_cpu --frobnicate 1
check_error train_flag_without_value "needs a value" ./train_llama_cpu --steps
check_error train_bad_int "integer" ./train_llama_cpu --steps ten
check_error train_unknown_model "unknown --model" ./train_llama_cpu --model gpt5
# the published Llama 3 8B and 70B shapes, for plans at scale: their parameter counts (8.03B, 70.55B)
check preset_llama3_8B_70B bash -c './train_llama_cpu --model llama3-8B --seq 8192 --batch 1 --plan-only 1 | grep -q "8030.26M parameters" &&
  ./train_llama_cpu --model llama3-70B --seq 8192 --batch 1 --plan-only 1 --dp 32 --zero 1 | grep -q "70553.71M parameters"'

check_error config_D_not_div_H "divisible" ./train_llama_cpu --D 30 --H 4 --plan-only 1
check_error config_H_not_div_KV "divisible" ./train_llama_cpu --H 4 --KV 3 --plan-only 1
check_error config_odd_head_dim "even" ./train_llama_cpu --D 60 --H 4 --KV 4 --plan-only 1
check_error config_T_too_long "max_seq_len" ./train_llama_cpu --seq 512 --plan-only 1
check_error flag_bad_recompute "recompute" ./train_llama_cpu --recompute 3 --plan-only 1
check_error flag_bad_offload "offload" ./train_llama_cpu --offload-act 9 --plan-only 1
check_error flag_bad_chunk_dim "ffn-chunk-dim" ./train_llama_cpu --ffn-chunk-dim rows --plan-only 1
check_error flag_total_batch "multiple" ./train_llama_cpu --batch 4 --seq 64 --total-batch 1000 --plan-only 1
check_error flag_total_batch_dp "multiple" ./train_llama_cpu --batch 4 --seq 64 --total-batch 256 --dp 2 --plan-only 1
check_error flag_bad_zero "zero" ./train_llama_cpu --zero 4 --plan-only 1
check_error flag_bad_shard_vocab "shard-vocab" ./train_llama_cpu --shard-vocab 3 --plan-only 1
check_error flag_bad_offload_optim "--offload-optim must be 0 or 1" ./train_llama_cpu --offload-optim 2 --plan-only 1
check_error dit_flag_bad_offload_optim "--offload-optim must be 0 or 1" ./train_dit_cpu --offload-optim -1 --plan-only 1
check_error flag_bad_comm "comm" ./train_llama_cpu --comm gloo --plan-only 1
check_error flag_bad_comm_timeout "comm-timeout" ./train_llama_cpu --comm-timeout 0 --plan-only 1
check_error flag_tp_splits_kv_heads "kv heads" ./train_llama_cpu --tp 4 --plan-only 1
check_error flag_bad_tp_mode "tp-mode" ./train_llama_cpu --tp 2 --tp-mode ring --plan-only 1
check_error flag_bad_tp_regather "tp-recompute-allgather" ./train_llama_cpu --tp 2 --tp-recompute-allgather 2 --plan-only 1
check_error flag_tp_needs_ranks "number of ranks" ./train_llama_cpu --tp 2 --steps 1
check_error flag_dp_without_plan "plan-only" ./train_llama_cpu --dp 2 --steps 1
# the one table of ranges (llmc/core/flags.h FLAG_BOUNDS), in every program: the edge cases of each range
check_error flag_range_batch "--batch 65536 2147483647" ./train_llama_cpu --batch 2147483647 --plan-only 1
check_error flag_range_lr "--lr must" ./train_llama_cpu --lr 0 --plan-only 1
check_error flag_range_beta2 "--beta2 must" ./train_dit_cpu --beta2 1 --plan-only 1
check_error flag_range_adam_eps "--adam-eps must" ./train_dit_cpu --adam-eps 0 --plan-only 1
check_error flag_range_weight_decay "--weight-decay must" ./train_llama_cpu --weight-decay -0.1 --plan-only 1
check_error flag_range_min_lr_frac "--min-lr-frac must" ./train_dit_cpu --min-lr-frac 1.5 --plan-only 1
check_error flag_range_grad_clip "--grad-clip must" ./train_llama_cpu --grad-clip -1 --plan-only 1
check_error flag_range_switch "--save-init 0 or" ./train_dit_cpu --save-init 2 --plan-only 1
check_error flag_range_test_llama "--micro-batch must" ./test_llama_cpu --ref "$R" --micro-batch 0
check_error flag_range_test_dit "--tp must" ./test_dit_cpu --ref dev/ref/dit_pt2_hw.dref --tp 0
check_error flag_product_tokens "tokens per micro-step 2^31" ./train_llama_cpu --batch 65536 --seq 65536 --max-seq-len 65536 --plan-only 1
check_error train_missing_data "no" ./train_llama_cpu --train-data "$TMP/none_*.bin" --run-dir "$TMP/run_missing"
# a shard whose token ids do not fit a smaller vocabulary
"$PY" - "$TMP/big_ids.bin" <<'PYEOF'
import struct, sys
toks = [1] + [500 + i % 300 for i in range(4000)]
h = [20240520, 1, len(toks)] + [0] * 253
open(sys.argv[1], 'wb').write(struct.pack('<256i', *h) + struct.pack('<%dH' % len(toks), *toks))
PYEOF
check_error train_token_ge_V "vocab" ./train_llama_cpu --V 256 --train-data "$TMP/big_ids.bin" --val-every 0 --run-dir "$TMP/run_bigids"
check_error resume_missing "cannot open" ./train_llama_cpu --resume "$TMP/none.bin" --train-data "$TMP/big_ids.bin" --val-every 0 --run-dir "$TMP/run_noresume"
# A full disk, as a file-size limit (ulimit -f 200: 200 KiB): the trainers ignore SIGXFSZ (llmc/core/logger.h), so the
# checkpoint write past the limit fails with EFBIG and the writer's error path runs: the file named, exit 1, no .tmp
# left, and the step-2 checkpoint of the run before (written without a limit) still the one --resume auto loads
XF="$TMP/xfsz"; mkdir -p "$XF"
"$PY" dev/test/write_toy_shard.py "$XF/train.bin" 20000 1 500 && "$PY" dev/test/write_toy_shard.py "$XF/cut.bin" 20000 3 500 &&
  "$PY" dev/test/write_toy_shard.py "$XF/cut_train.bin" 20000 4 500
XF_llama=(--model tiny --V 512 --batch 2 --seq 32 --total-batch 128 --train-data "$XF/train.bin")
XF_dit=(--D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --batch 2 --warmup 1)
for t in llama dit; do
  case $t in llama) args=("${XF_llama[@]}") ;; dit) args=("${XF_dit[@]}") ;; esac
  args+=(--val-every 0 --ckpt-every 2 --run-dir "$XF/$t")
  check "ulimit_f_${t}_first_run" ./train_${t}_cpu "${args[@]}" --steps 2
  check_error "ulimit_f_${t}_checkpoint" "ckpt_000004.bin write failed too large" \
    bash -c 'ulimit -f 200; exec "$@"' _ ./train_${t}_cpu "${args[@]}" --steps 4 --resume auto
  check "ulimit_f_${t}_no_tmp_ckpt_intact" bash -c '! ls "$1"/*.tmp 2>/dev/null && "${@:2}" | grep "resumed from .*ckpt_000002.bin at step 2"' \
    _ "$XF/$t" ./train_${t}_cpu "${args[@]}" --steps 2 --resume auto
done
# a log write past the limit (no checkpoint to fail first) stops the run naming the file (llmc/core/logger.h), where it
# used to go on with a cut main.log and exit 0; only the trainer runs under the limit, tail keeps its message
for t in llama dit; do
  case $t in llama) args=("${XF_llama[@]}") ;; dit) args=("${XF_dit[@]}") ;; esac
  check_error "ulimit_f_${t}_log_write" "main.log failed too large" bash -c '(ulimit -f 2; exec "$@") 2>&1 | tail -n 3; exit ${PIPESTATUS[0]}' \
    _ ./train_${t}_cpu "${args[@]}" --steps 200 --val-every 0 --ckpt-every 0 --run-dir "$XF/logs_$t"
done
# A shard cut while training reads it: the dataloader reads with pread (llmc/io/dataloader.h), so a short read, not SIGBUS:
# in the unit (cut after init, deterministic), then in train_llama (cut to its header once step 1 is done)
check_error shard_cut_after_init "cut.bin ended early truncated" ./build/test_dataloader --truncate "$XF/cut.bin" 4 64 21024
shard_cut_while_training() {
  local out="$XF/cut_train.out" i
  timeout 300 ./train_llama_cpu --model tiny --V 512 --batch 2 --seq 32 --total-batch 64 --steps 100000 --val-every 0 \
    --train-data "$XF/cut_train.bin" --run-dir "$XF/cut_run" >"$out" 2>&1 &
  local pid=$!
  for i in $(seq 1200); do grep -q '^step  *1/' "$out" && break; sleep 0.1; done
  truncate -s 1024 "$XF/cut_train.bin"
  wait $pid; local rc=$?
  cat "$out"; return $rc
}
check_error shard_cut_while_training "cut_train.bin ended early truncated" shard_cut_while_training

# the Llama's update making NaN (planted by --test-nan-update: --adam-eps 0, which made 0/0 where a gradient is zero, is
# out of range now): the run stops before writing the checkpoint (it used to write one full of NaN and call it untouched)
check_error nan_update "update made non-finite parameters no checkpoint" ./train_llama_cpu --model tiny --V 512 --tied 0 \
  --batch 2 --seq 32 --steps 4 --test-nan-update 1 --ckpt-every 1 --val-every 0 --train-data "$XF/train.bin" --run-dir "$TMP/nan_update"
check nan_update_no_checkpoint bash -c "! ls '$TMP'/nan_update/ckpt_* 2>/dev/null"

# the fuzz stage (dev/test/fuzz.py): malformed checkpoints of both trainers (checksums made to hold), token shards,
# clip files, LREF/DREF files and every flag's bad values, each under 20 s and 4 GiB: exit 1..123 with a message that
# names the problem, no signal, no hang, no raw control byte printed, and a run directory that already held
# checkpoints left byte-identical. Sampled (800 of about 5700 cases, the named regressions and, in full, the 28 of
# kind inputs: FIFOs, /dev/full, control bytes in names; ~30 s on 2 cores); TEST_FULL=1 runs all (~2.5 min)
check fuzz_stage "$PY" dev/test/fuzz.py --cases "$([ "$FULL" = 1 ] && echo 0 || echo 800)"

section "files that are not files, text that is not text: FIFOs and /dev/full for every input and output flag, control bytes escaped, ranks with different flags (dev/test/inputs_tests.sh)"
sub_tests inputs bash dev/test/inputs_tests.sh "$PY" "$TMP/inputs"
section "checkpoint resume continues bit-exactly (dev/test/check_resume.sh)"
# a small shard for the tests below, so they need no prepared data: ids below the tiny model's V
"$PY" dev/test/write_toy_shard.py "$TMP/train.bin" 20000 1 500 && "$PY" dev/test/write_toy_shard.py "$TMP/val.bin" 5000 2 500
check resume_plain env PYTHON="$PY" bash dev/test/check_resume.sh ./train_llama_cpu "$TMP/resume_plain"
check resume_flags env PYTHON="$PY" bash dev/test/check_resume.sh ./train_llama_cpu "$TMP/resume_flags" \
  --ffn-chunks 2 --ce-chunks 3 --offload-act -1 --recompute 1
# gradient accumulation: the reference batch as micro-steps whose gradients add up, summed
# in the gradient buffer and in the fp32 accumulator (--fp32-grad-accum 1: in the CPU build
# the gradients are fp32 anyway, so this checks the accumulator's bookkeeping: every bucket,
# the vocabulary rows, the last micro-step's write-back), alone and with the memory flags
check grad_accum_microsteps ./test_llama_cpu --ref dev/ref/mha_tied_odd.lref --micro-batch 1
check grad_accum_fp32 ./test_llama_cpu --ref dev/ref/mha_tied_odd.lref --micro-batch 1 --fp32-grad-accum 1
check grad_accum_fp32_flags ./test_llama_cpu --ref dev/emu/ref/micro64_b64.lref --micro-batch 8 --fp32-grad-accum 1 \
  --ffn-chunks 3 --ce-chunks 2 --offload-act -1 --recompute 1
check resume_fp32_grad_accum env PYTHON="$PY" bash dev/test/check_resume.sh ./train_llama_cpu "$TMP/resume_gacc" --fp32-grad-accum 1
check_error grad_accum_bad_micro_batch "micro-batch divide" ./test_llama_cpu --ref dev/ref/mha_tied_odd.lref --micro-batch 2
check_error fp32_grad_accum_bad "fp32-grad-accum" ./train_llama_cpu --fp32-grad-accum 2 --plan-only 1
check_error attention_tc_cpu "tensor cores" ./train_llama_cpu --attention tc --plan-only 1
check_error attention_bad "expected auto fp32 tc cudnn" ./train_dit_cpu --attention flash --plan-only 1
check_error attention_cudnn_cpu "cudnn USE_CUDNN=1" ./train_llama_cpu --attention cudnn --plan-only 1
# the per-kernel profile of one step (--profile-step): every launch group of the step is in
# its table, and the groups' times add up to no more than the step's wall time
check profile_step "$PY" dev/test/check_profile.py 2 "qkv matmul fwd,attention fwd,attention bwd,ffn w1 w3 matmul fwd,\
swiglu bwd,rmsnorm fwd,head matmul bwd,crossentropy,adamw,grad norm" -- ./train_llama_cpu --model tiny --V 512 --batch 2 \
  --seq 32 --total-batch 128 --steps 3 --profile-step 2 --val-every 0 --train-data "$TMP/train.bin" --run-dir "$TMP/profile"
check_error resume_config_mismatch "checkpoint has" ./train_llama_cpu --model tiny --V 512 --D 128 --batch 2 --seq 32 --steps 6 \
  --train-data "$TMP/train.bin" --val-every 0 --run-dir "$TMP/mismatch" --resume "$TMP/resume_plain/full/ckpt_000003.bin"

section "--init-from: a new run from a checkpoint's weights, bitwise (step 0, fresh optimizer, any batch)"
check init_from bash -c "./train_llama_cpu --model tiny --V 512 --batch 2 --seq 32 --steps 3 --ckpt-every 3 --val-every 0 \
    --train-data $TMP/train.bin --run-dir $TMP/init_src >/dev/null &&
  ./train_llama_cpu --model tiny --V 512 --batch 4 --seq 16 --steps 2 --save-init 1 --val-every 0 \
    --train-data $TMP/train.bin --run-dir $TMP/init_dst --init-from $TMP/init_src/ckpt_000003.bin > $TMP/init_dst.log &&
  grep -q 'parameters from .*ckpt_000003.bin (its step 3)' $TMP/init_dst.log && grep -q '^step     1/2' $TMP/init_dst.log &&
  $PY - $TMP/init_src/ckpt_000003.bin $TMP/init_dst/ckpt_000000.bin <<'PYEOF'
import struct, sys
a, b = (open(p, 'rb').read() for p in sys.argv[1:3])
n = struct.unpack_from('<i', a, 18 * 4)[0] | (struct.unpack_from('<i', a, 19 * 4)[0] << 31)
assert a[1024:1024 + 4 * n] == b[1024:1024 + 4 * n], 'parameters differ'
assert b[1024 + 4 * n:1024 + 12 * n] == bytes(8 * n), 'the optimizer moments are not fresh zeros'
print('init-from: %d parameters bitwise equal, moments zero' % n)
PYEOF"
# --steps 0: evaluate and sample a checkpoint, no training (decoded with the 512-piece tokenizer when it was built above)
check sample_only bash -c "./train_llama_cpu --model tiny --V 512 --batch 2 --seq 32 --steps 0 --init-from $TMP/init_src/ckpt_000003.bin \
    --train-data $TMP/train.bin --val-data $TMP/val.bin --val-batches 2 --sample-every 1 --sample-len 8 --temperature 0 \
    \$([ -f $TMP/sp512/tok512.bin ] && echo --tokenizer $TMP/sp512/tok512.bin) --run-dir $TMP/sample_only > $TMP/sample_only.log &&
  grep -q '^step     0 | val loss' $TMP/sample_only.log && ! grep -q '^step     1' $TMP/sample_only.log &&
  { [ ! -f $TMP/sp512/tok512.bin ] || grep -q -- '--- sample ---' $TMP/sample_only.log; }"
check_error steps0_without_checkpoint "init-from" ./train_llama_cpu --steps 0 --plan-only 1
check_error bad_temperature "temperature" ./train_llama_cpu --temperature -1 --plan-only 1
# a --tokenizer the user names must work when samples are asked for (the default one may be absent: a warning)
check_error unusable_tokenizer "tokenizer cannot be used sample-every" ./train_llama_cpu --model tiny --V 512 --batch 2 \
  --seq 32 --steps 1 --val-every 0 --sample-every 1 --tokenizer "$TMP/no_such_tokenizer.bin" --train-data "$TMP/train.bin" \
  --run-dir "$TMP/bad_tok"
# a directory where a file belongs says so
check_error resume_is_directory "is a directory not a checkpoint file" ./train_llama_cpu --model tiny --V 512 --batch 2 \
  --seq 32 --steps 2 --val-every 0 --train-data "$TMP/train.bin" --run-dir "$TMP/resume_dir" --resume "$TMP"
check_error dit_resume_is_directory "is a directory not a checkpoint file" ./train_dit_cpu --steps 2 --run-dir "$TMP/dit_resume_dir" \
  --resume "$TMP"
check_error dit_data_is_directory "is a directory clips_to_bin" ./train_dit_cpu --data "$TMP" --steps 1 --run-dir "$TMP/dit_data_dir"
check_error init_from_and_resume "pick one" ./train_llama_cpu --init-from a.bin --resume b.bin --plan-only 1
check_error init_from_mismatch "init-from" ./train_llama_cpu --model tiny --V 512 --D 128 --batch 2 --seq 32 --steps 2 \
  --train-data "$TMP/train.bin" --val-every 0 --run-dir "$TMP/init_bad" --init-from "$TMP/init_src/ckpt_000003.bin"

section "every flag has a check: dev/test/flag_index.md is the index the programs and the test sources give (dev/test/flag_index.py)"
sub_tests flag_index "$PY" dev/test/flag_index.py --check
section "--fit-memory: the cheapest flags that fit, from the plan (dev/test/test_fit_memory.py)"
sub_tests fit_memory "$PY" dev/test/test_fit_memory.py ./train_llama_cpu
check_error fit_memory_impossible "needs a budget of at least" ./train_llama_cpu --model stories15M --fit-memory 0.01 --plan-only 1
check fit_memory_trains bash -c "./train_llama_cpu --model tiny --V 512 --seq 64 --total-batch 2048 --fit-memory 0.08 \
    --steps 3 --val-every 0 --train-data $TMP/train.bin --run-dir $TMP/fit_run > $TMP/fit_run.log &&
  grep -q 'chose --batch' $TMP/fit_run.log && grep -q 'runner-up' $TMP/fit_run.log &&
  $PY -c \"import json; r=[json.loads(l) for l in open('$TMP/fit_run/metrics.jsonl')]; assert len(r) == 3; \
  print('arena', r[-1]['arena_bytes'], 'measured', r[-1]['peak_mem'], 'budget', 0.08 * 2**30); \
  assert r[-1]['arena_bytes'] + 64 * 2**20 <= 0.08 * 2**30 and r[-1]['peak_mem'] <= 0.08 * 2**30\""

section "a short training run learns (loss falls on a repeating toy corpus)"
"$PY" - "$TMP/pattern.bin" <<'PYEOF'
import struct, sys
toks = ([1] + list(range(10, 60))) * 200
open(sys.argv[1], 'wb').write(struct.pack('<256i', *([20240520, 1, len(toks)] + [0] * 253)) + struct.pack('<%dH' % len(toks), *toks))
PYEOF
check learns bash -c "./train_llama_cpu --model tiny --V 64 --batch 4 --seq 32 --steps 60 --lr 3e-3 --warmup 5 \
  --train-data $TMP/pattern.bin --val-data $TMP/pattern.bin --val-every 60 --val-batches 2 --run-dir $TMP/learn >/dev/null &&
  $PY -c \"import json; r=[json.loads(l) for l in open('$TMP/learn/metrics.jsonl')]; print(r[0]['loss'], r[-1]['loss'], r[-1]['val_loss']); assert r[-1]['loss'] < 0.3 * r[0]['loss'] and r[-1]['val_loss'] < 0.3 * r[0]['loss']\""

section "the run directory: one run per directory, --start-over, --keep-last, a second job refused (dev/test/run_dir_tests.sh)"
sub_tests run_dir bash dev/test/run_dir_tests.sh "$PY" "$TMP/run_dir"
section "data parallelism under mpirun (2 and 4 ranks): test_llama, train_llama, checkpoints, faults (dev/test/dp_tests.sh)"
sub_tests dp bash dev/test/dp_tests.sh "$PY" "$TMP/dp" dev/ref/*.lref ${FRESH:-}

section "signals: a stop signal writes a checkpoint and exits 75, resumed bit-exactly; a second ends at once; closed stdout; file-size limit; MPI start-up timeout (dev/test/signal_tests.sh)"
sub_tests signals bash dev/test/signal_tests.sh "$PY" "$TMP/signals"

section "tensor and sequence parallelism under mpirun (tp 2, tp 4, tp 2 x dp 2): test_llama, train_llama, checkpoints (dev/test/tp_tests.sh)"
sub_tests tp bash dev/test/tp_tests.sh "$PY" "$TMP/tp"

# context parallelism (dev/test/cp_tests.sh, about 1 minute alone) runs in the background from here,
# beside the DiT checks below, and is counted at the end. Its mpiruns get a session directory of
# their own: two mpiruns starting at once in Open MPI's default one can race on creating it.
mkdir -p "$TMP/cp_ompi"
CP_T0=$(now)
( OMPI_MCA_orte_tmpdir_base="$TMP/cp_ompi" bash dev/test/cp_tests.sh "$PY" "$TMP/cp" > "$TMP/cp.log" 2>&1
  echo $? > "$TMP/cp.rc"; now > "$TMP/cp.end" ) &
CP_PID=$!

section "scripts/gpu_check.sh: the plan of the three GPU calls, then each call executed on the CPU"
# the plan: every step's limit as its estimate; the headline within call 1's first 300 s, at
# most 8 files a call, data for every benchmark, llama3-1B on --attention tc (no GPU, no data
# directory, no ../shared: the plan needs none of them); then the same checks on planted defects
sub_tests gpu_plan bash -c "GPU_CHECK_DRY=1 OUT=$TMP/gpu_plan PYTHON=$PY bash scripts/gpu_check.sh plan && \
  $PY dev/test/check_gpu_plan.py --planted $TMP/gpu_plan/plan.tsv"
# (each call executed on the CPU build: by the background lane, counted at the end)

section "train_dit: test_dit against the committed DiT references (dev/ref/*.dref)"
for f in dev/ref/*.dref; do check "dit_ref_$(basename "$f" .dref)" ./test_dit_cpu --ref "$f"; done
sub_tests reference_dit "$PY" dev/test/test_reference_dit.py

section "train_dit: fresh DiT references (configs not in dev/ref)"
# name C Fr Hi Wi pt ph pw D L H FF NC B n_steps grad_clip seed
DIT_FRESH=""
while read -r name C Fr Hi Wi pt ph pw D L H FF NC B N clip seed; do
  if "$PY" dev/ref/reference_dit.py --quiet --out "$TMP/$name.dref" --C "$C" --Fr "$Fr" --Hi "$Hi" --Wi "$Wi" --pt "$pt" \
      --ph "$ph" --pw "$pw" --D "$D" --L "$L" --H "$H" --FF "$FF" --NC "$NC" --B "$B" --n-steps "$N" \
      --grad-clip "$clip" --seed "$seed" >"$TMP/gen_$name.log" 2>&1; then
    check "dit_fresh_$name" ./test_dit_cpu --ref "$TMP/$name.dref"
    DIT_FRESH="$DIT_FRESH $TMP/$name.dref"
  else fail "dit_fresh_$name" "reference_dit.py failed: $(tail -n 2 "$TMP/gen_$name.log")"; fi
done <<'CONFIGS'
pt3_odd 2 3 4 6 3 2 3 18 2 3 30 2 2 2 1.0 21
hd14_b3 1 2 6 4 1 3 2 28 1 2 36 5 3 3 0 22
l3_tall 3 2 9 3 2 3 1 12 3 2 16 1 2 2 0.3 23
CONFIGS

section "train_dit memory flags: same results as the reference, bitwise where the arithmetic order is unchanged"
DIT_FLAGSETS=(
  "--ffn-chunks 3"
  "--ffn-chunks 4 --ffn-chunk-dim seq"
  "--offload-act -1"
  "--offload-act 1"
  "--recompute 1"
  "--recompute 2"
  "--ffn-chunks 3 --offload-act -1 --recompute 1"
  "--ffn-chunks 2 --ffn-chunk-dim seq --offload-act 1 --recompute 2"
  "--offload-optim 1"
)
for f in dev/ref/*.dref $DIT_FRESH; do
  base=$(basename "$f" .dref)
  L=$("$PY" -c "import sys; sys.path.insert(0,'dev/ref'); import dref; print(dref.read_dref('$f')['cfg']['L'])")
  for fl in "${DIT_FLAGSETS[@]}"; do
    n=$(echo "$fl" | sed -n 's/.*--offload-act \([0-9]*\).*/\1/p')
    [ -n "$n" ] && [ "$n" -gt "$L" ] && continue
    check "dit_flags_${base}_$(echo "$fl" | sed 's/ -1/ all/' | tr -d ' -')" ./test_dit_cpu --ref "$f" $fl
  done
done
for f in dev/ref/dit_pt2_hw.dref dev/ref/dit_hd12_clip.dref; do
  check_error "dit_poison_$(basename "$f" .dref)" "FAIL" ./test_dit_cpu --ref "$f" --offload-act -1 --test-skip-prefetch 1
done

section "train_dit: bad reference files and bad flags end with a clear message"
"$PY" - dev/ref/dit_nc1_hd8.dref "$TMP" <<'PYEOF'
import struct, sys
src, out = sys.argv[1], sys.argv[2]
good = bytearray(open(src, "rb").read())
def put(name, data): open(f"{out}/bad_{name}.dref", "wb").write(data)
b = bytearray(good); b[0:4] = struct.pack("<i", 1234); put("magic", b)
put("truncated", good[:-7])
b = bytearray(good); b[20 * 4:21 * 4] = struct.pack("<i", 5); put("reserved", b)
b = bytearray(good); b[11 * 4:12 * 4] = struct.pack("<i", 3); put("heads", b)   # H=3 does not divide D=16
b = bytearray(good); b[1024:1028] = struct.pack("<f", float("nan")); put("nan", b)
put("empty", b"")
b = bytearray(good); b[2 * 4:6 * 4] = struct.pack("<4i", 65536, 65536, 65536, 65536); put("huge", b)  # C Fr Hi Wi
PYEOF
check_error dit_ref_bad_magic "magic" ./test_dit_cpu --ref "$TMP/bad_magic.dref"
check_error dit_ref_truncated "truncated" ./test_dit_cpu --ref "$TMP/bad_truncated.dref"
check_error dit_ref_reserved "header word 20 must be zero" ./test_dit_cpu --ref "$TMP/bad_reserved.dref"
check_error dit_ref_bad_heads "multiple of H" ./test_dit_cpu --ref "$TMP/bad_heads.dref"
check_error dit_ref_nan "non-finite" ./test_dit_cpu --ref "$TMP/bad_nan.dref"
check_error dit_ref_empty "too short" ./test_dit_cpu --ref "$TMP/bad_empty.dref"
check_error dit_ref_huge_clip "tokens holds at most" ./test_dit_cpu --ref "$TMP/bad_huge.dref"
check_error dit_ref_missing "cannot open" ./test_dit_cpu --ref "$TMP/no_such.dref"
check_error dit_bad_model "unknown --model" ./train_dit_cpu --model dit-huge --plan-only 1
check_error dit_bad_patch "patch 2x2x3 must divide" ./train_dit_cpu --pw 3 --plan-only 1
check_error dit_bad_heads "multiple of H" ./train_dit_cpu --H 5 --plan-only 1
check_error dit_grad_accum_overflow "clips per step at most" ./train_dit_cpu --batch 128 --dp 16 --grad-accum 1048576 --plan-only 1
# dimensions whose products wrap a 32-bit int (dit_tokens used to: a segfault, and "N=0 tokens" from --plan-only),
# each within its flag's range
check_error dit_huge_clip "tokens holds at most" ./train_dit_cpu --channels 4096 --frames 65536 --height 65536 \
  --width 65536 --D 32 --L 2 --H 2 --FF 64 --steps 3 --run-dir "$TMP/dit_huge"
check_error dit_huge_clip_plan "tokens holds at most" ./train_dit_cpu --channels 4096 --frames 65536 --height 65536 \
  --width 65536 --D 32 --L 2 --H 2 --FF 64 --plan-only 1
check_error dit_product_overflow "exceeds 2^31" ./train_dit_cpu --D 65536 --H 2 --FF 65536 --plan-only 1
check_error dit_bad_chunks "ffn-chunks" ./train_dit_cpu --ffn-chunks 0 --plan-only 1
check_error dit_bad_chunk_dim "ffn-chunk-dim" ./train_dit_cpu --ffn-chunk-dim rows --plan-only 1
check_error dit_bad_save_init "save-init must be 0 or 1" ./train_dit_cpu --save-init 2 --plan-only 1
check_error dit_bad_recompute "recompute" ./train_dit_cpu --recompute 3 --plan-only 1
check_error dit_bad_offload "offload-act" ./train_dit_cpu --offload-act 9 --plan-only 1
check_error dit_bad_number "integer" ./train_dit_cpu --batch eight
check_error dit_bad_flag "unknown flag" ./train_dit_cpu --epochs 3
check_error dit_bad_data "cannot open" ./train_dit_cpu --data "$TMP/no_such_clips.bin" --steps 1
check_error dit_bad_gif_scale "gif-scale GIF holds at most 65535" ./train_dit_cpu --gif-scale 1024 --height 64 --width 64 --steps 1 --run-dir "$TMP/dit_gif"
check dit_bad_gif_scale_writes_nothing test ! -e "$TMP/dit_gif"
# an update that makes NaN (planted: --adam-eps 0, which did it, is out of range now) stops the run before a checkpoint holds it
check_error dit_nan_update "update made non-finite parameters no checkpoint" ./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 \
  --frames 4 --height 8 --width 8 --NC 3 --batch 2 --steps 4 --test-nan-update 1 --ckpt-every 1 --val-every 0 --run-dir "$TMP/dit_nan"
check dit_nan_update_no_checkpoint bash -c "! ls '$TMP'/dit_nan/ckpt_* 2>/dev/null"
check_error dit_bad_resume "not a train_dit checkpoint" ./train_dit_cpu --resume dev/ref/dit_nc1_hd8.dref --steps 1 --run-dir "$TMP/dit_bad_resume"

section "train_dit: training (loss falls, GIF samples), bit-exact resume, --plan-only for hunyuan-13B"
DT="$TMP/dit_train"
check dit_train_short ./train_dit_cpu --D 32 --L 2 --H 2 --FF 64 --frames 4 --height 8 --width 8 --NC 3 --batch 4 \
  --steps 40 --warmup 5 --lr 3e-3 --val-every 20 --val-clips 12 --sample-every 40 --sample-steps 4 --gif-scale 2 \
  --sample-clips 2 --run-dir "$DT"
# every sampled clip (3 classes x --sample-clips 2) in a clip file with its class, which the digit classifier reads
check dit_samples_clipfile bash -c "'$PY' scripts/dit_digits.py classify '$DT/samples/step_000040.clips' --real-clips 200 \
  --json '$TMP/dit_digits.json' && '$PY' -c \"import json, sys; d = json.load(open('$TMP/dit_digits.json'))
sys.exit(0 if d['labels_given'] == [0, 1, 2, 0, 1, 2] and sum(d['samples_total']) == 6 else 1)\""
check dit_loss_falls "$PY" -c "
import json, sys
rows = [json.loads(l) for l in open('$DT/metrics.jsonl')]
first, last = rows[0]['loss'], sum(r['loss'] for r in rows[-5:]) / 5
print('loss', first, '->', last, '| val', [r['val_loss'] for r in rows if 'val_loss' in r])
val = [r['val_loss'] for r in rows if 'val_loss' in r]
sys.exit(0 if last < 0.75 * first and len(val) == 2 and val[1] < val[0] and all('val_loss_high_t' in r for r in rows if 'val_loss' in r) else 1)"
check dit_samples_decode "$PY" -c "
import glob, sys
from PIL import Image
gifs = sorted(glob.glob('$DT/samples/step_000040_class_*.gif')); pngs = glob.glob('$DT/samples/step_000040_class_*.png')
frames = [Image.open(g).n_frames for g in gifs]
print(len(gifs), 'gifs', frames, len(pngs), 'pngs')
sys.exit(0 if len(gifs) == 3 and len(pngs) == 3 and all(n == 4 for n in frames) else 1)"
# --label-dropout reaches the training batches: 5 steps with every class kept (0) and with every class the null
# class (1) train on other labels, so their losses differ (from step 3 on: adaLN-Zero's first steps do not see the
# class; about 1 s). What the dropout draws is dev/test/test_flow_batch.c's.
check dit_label_dropout_trains bash -c "for p in 0 1; do ./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 \
  --width 8 --NC 3 --batch 2 --steps 5 --warmup 1 --lr 1e-2 --val-every 0 --label-dropout \$p --run-dir '$TMP/dit_dropout'\$p \
  > '$TMP/dit_dropout'\$p.log || exit 1; grep -o '\"loss\": [^,]*' '$TMP/dit_dropout'\$p/metrics.jsonl > '$TMP/dit_dropout'\$p.loss; done
  [ \$(wc -l < '$TMP/dit_dropout0.loss') = 5 ] && ! cmp -s '$TMP/dit_dropout0.loss' '$TMP/dit_dropout1.loss'"
# --cfg-scale: at 0 the samples ignore the class (only the null-class velocity), at 1 they follow it, and they are
# affine in the scale, x(3) - x(1) = 2 (x(1) - x(0)) with one Euler step (dev/test/check_dit_cfg.py; 5 tiny runs, 2-9 s)
sub_tests dit_cfg_scale "$PY" dev/test/check_dit_cfg.py ./train_dit_cpu "$TMP/dit_cfg"
check dit_resume_plain env PYTHON="$PY" bash dev/test/check_dit_resume.sh ./train_dit_cpu "$TMP/dit_resume_plain"
check dit_resume_flags env PYTHON="$PY" bash dev/test/check_dit_resume.sh ./train_dit_cpu "$TMP/dit_resume_flags" \
  --ffn-chunks 3 --offload-act -1 --recompute 1
check dit_resume_auto bash -c "./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 \
  --batch 2 --grad-accum 2 --steps 6 --warmup 2 --val-every 3 --val-clips 5 --run-dir '$TMP/dit_resume_plain/full' \
  --resume auto | grep 'resumed from .*ckpt_000006.bin at step 6'"
# --resume auto with every checkpoint corrupt starts fresh, but appends to the logs (the earlier run's 6 metrics
# lines stay) and names the checkpoints it skipped in main.log
check dit_resume_auto_all_corrupt bash -c "rm -rf '$TMP/dit_corrupt' && cp -r '$TMP/dit_resume_plain/full' '$TMP/dit_corrupt' &&
  for f in '$TMP'/dit_corrupt/ckpt_*.bin; do head -c 2000 \"\$f\" > \"\$f.cut\" && mv \"\$f.cut\" \"\$f\"; done &&
  ./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --batch 2 --steps 2 --val-every 0 \
    --run-dir '$TMP/dit_corrupt' --resume auto > '$TMP/dit_corrupt.log' &&
  grep -q 'no checkpoint' '$TMP/dit_corrupt/main.log' && grep -q 'skips .*ckpt_000006.bin' '$TMP/dit_corrupt/main.log' &&
  [ \$(wc -l < '$TMP/dit_corrupt/metrics.jsonl') = 8 ]"
# a sample that cannot be written is a warning, never a lost checkpoint: samples/ is a file (no directory), then a
# directory where the first GIF goes (written under a temporary name, its rename fails); the run ends with exit 0,
# both checkpoints on disk, nothing half-written left. (--resume auto: a directory with samples/ holds a run, which
# a fresh run would be refused; with no checkpoint there, auto starts fresh)
check dit_sample_write_fails_is_warning bash -c "rm -rf '$TMP/dit_sw' && mkdir -p '$TMP/dit_sw/a' '$TMP/dit_sw/b/samples/step_000002_class_0.gif' &&
  touch '$TMP/dit_sw/a/samples' && for r in a b; do ./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 \
  --NC 3 --batch 2 --steps 4 --val-every 0 --ckpt-every 2 --sample-every 2 --sample-steps 2 --run-dir '$TMP/dit_sw/'\$r \
  --resume auto > '$TMP/dit_sw/'\$r.log || exit 1; grep -q 'samples of step 2 were not written' '$TMP/dit_sw/'\$r/main.log &&
  test -f '$TMP/dit_sw/'\$r/ckpt_000002.bin && test -f '$TMP/dit_sw/'\$r/ckpt_000004.bin || exit 1; done &&
  ! ls '$TMP/dit_sw/b/samples/'*.tmp* 2>/dev/null"
# a checkpoint holding a NaN (its checksum made to hold) is refused by name, not resumed
check_error dit_resume_nan_checkpoint "holds a non-finite parameter" bash -c "'$PY' dev/test/nan_checkpoint.py \
  '$TMP/dit_resume_plain/full/ckpt_000003.bin' '$TMP/dit_nan.bin' && ./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 --frames 4 \
  --height 8 --width 8 --NC 3 --batch 2 --steps 6 --val-every 0 --run-dir '$TMP/dit_nan_resume' --resume '$TMP/dit_nan.bin'"
check dit_plan_hunyuan ./train_dit_cpu --model hunyuan-13B --batch 1 --plan-only 1 --ffn-chunks 4 --recompute 1 --offload-act -1
# --fit-memory through the shared search (llmc/train/fit_memory.h): the choice is the cheapest candidate that fits,
# and a plain --plan-only run of the chosen flags plans exactly the bytes the search counted
check dit_fit_memory "$PY" - "$TMP" <<'PYEOF'
import json, re, subprocess, sys
tmp = sys.argv[1]
shape = ["--D", "32", "--L", "3", "--H", "2", "--FF", "96", "--frames", "4", "--height", "8", "--width", "8", "--NC", "3"]
out = subprocess.run(["./train_dit_cpu", *shape, "--fit-memory", "0.075", "--fit-candidates", tmp + "/dit_fit.jsonl",
                      "--plan-only", "1"], capture_output=True, text=True, check=True).stdout
m = re.search(r"chose --batch (\d+) --ffn-chunks (\d+) --recompute (\d+) --offload-act (\d+)", out)
assert m, out
B, K, R, O = map(int, m.groups())
cands = [json.loads(l) for l in open(tmp + "/dit_fit.jsonl")]
fit = [c for c in cands if c["fits"]]
same_b = [c for c in fit if c["B"] == B]
best = min(same_b, key=lambda c: c["seconds"])
assert (best["ffn_chunks"], best["recompute"], best["offload_act"]) == (K, R, O), (best, (K, R, O))
assert not any(c["B"] > B for c in fit), "a larger batch fits"
subprocess.run(["./train_dit_cpu", *shape, "--batch", str(B), "--ffn-chunks", str(K), "--recompute", str(R), "--offload-act",
                str(O), "--plan-only", "1", "--plan-json", tmp + "/dit_fit_plan.json"], capture_output=True, check=True)
plan = json.load(open(tmp + "/dit_fit_plan.json"))
total = plan["device"]["total"] + plan["host"]["total"]
assert total == best["bytes"] and total + 64 * 2**20 <= 0.075 * 2**30, (total, best["bytes"])
print("chose B=%d K=%d R=%d O=%d: %d bytes of %d candidates, %d fit" % (B, K, R, O, total, len(cands), len(fit)))
PYEOF
check_error dit_fit_memory_impossible "needs a budget of at least" ./train_dit_cpu --fit-memory 0.01 --plan-only 1
# the per-kernel profile of a DiT step, through the same llmc/kernels/profile.h (both trainers' launch groups are bracketed)
check dit_profile_step "$PY" dev/test/check_profile.py 2 "layernorm modulate fwd,qkv matmul fwd,qk norm rope fwd,\
attention fwd,proj matmul fwd,gated residual fwd,ffn fc1 matmul fwd,gelu fwd,ffn fc2 matmul fwd,ffn fc2 matmul bwd,\
gelu bwd,ffn fc1 matmul bwd,attention bwd,qkv matmul bwd,adaln matmul bwd,conditioning fwd,final layer bwd,loss,adamw,\
grad norm" -- ./train_dit_cpu --D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --batch 2 --steps 3 \
  --profile-step 2 --val-every 0 --run-dir "$TMP/dit_profile"
# the CPU step against the best sgemm of any installed library (dev/bench/bench_cpu_step.py --yardstick,
# docs/results/cpu_step_yardstick.md), in a quick run: every library's yardstick and both
# trainers' fractions recomputed from the raw numbers (FLOP per token from the shapes the trainers print),
# each fraction in (0, 1.5); a fraction not from the measured numbers and a yardstick that is not the
# fastest library's, planted, must fail. Under SCHED_RR where chrt may (root), as the benchmark runs.
# (about 60 s on 2 cores: make test-full and CI only)
if [ "$FULL" = 1 ]; then
mkdir -p "$TMP/yard"
check yardstick_quick "$PY" dev/bench/bench_cpu_step.py "$TMP/yard/yard.md" --models stories260K,dit-tiny --steps 2 \
  --yardstick --yard-repeats 3 --no-loops $(chrt -r 10 true 2>/dev/null && echo --rt)
check yardstick_arithmetic "$PY" dev/test/check_yardstick.py "$TMP/yard/yard.jsonl" --llama-trainer ./train_llama_cpu \
  --dit-trainer ./train_dit_cpu
for p in fraction yardstick round; do
  check_error "yardstick_planted_$p" "FAILED" "$PY" dev/test/check_yardstick.py "$TMP/yard/yard.jsonl" --plant $p
done
# the tool that shows why a round's step time is a median (the real-time throttling's stops) still builds
check rt_gaps_builds gcc -O2 -Wall -Wextra -Werror dev/bench/rt_gaps.c -o "$TMP/yard/rt_gaps"
fi

section "train_dit: the PyTorch peer (scripts/pytorch_dit.py) against the DREF references and train_dit's first steps"
# (1) every committed DREF in fp32: v_pred, loss and each gradient at test_dit's 1e-5 (measured
# <= 1.2e-6), the AdamW step losses at 1e-5; a swapped adaLN gate and a 3-D RoPE with the row
# and column positions exchanged must fail it
check dit_peer_dref "$PY" scripts/pytorch_dit.py --device cpu --check-dref dev/ref/*.dref
for bug in gate-swap rope-axis; do
  check_error "dit_peer_dref_planted_$bug" "FAILED" "$PY" scripts/pytorch_dit.py --device cpu --check-dref dev/ref/*.dref \
    --plant-bug "$bug"
done
# (2) train_dit's first steps from its --save-init weights, then the peer from the same weights on
# the same clips, noise, t and labels: each step's loss within 1e-5 relative (fp32 rounding only,
# measured <= 1e-6). lr 1e-2 wakes the adaLN-Zero blocks within a few steps, so that a wrong RoPE
# axis shows (from step 4); a noise stream read one value late shows from step 1. Then the same
# on a uint8 clip file, 2 micro-batches a step over several epochs of its Feistel order.
PD="$TMP/dit_peer"
PEER=(--batch 4 --steps 10 --lr 1e-2 --warmup 1)
check dit_peer_train_dit ./train_dit_cpu --model dit-tiny --frames 4 "${PEER[@]}" --save-init 1 --val-every 0 --run-dir "$PD"
check dit_peer_steps "$PY" scripts/pytorch_dit.py --device cpu --init-from "$PD/ckpt_000000.bin" "${PEER[@]}" \
  --compare-metrics "$PD/metrics.jsonl"
for bug in rope-axis noise-shift; do
  check_error "dit_peer_steps_planted_$bug" "FAILED" "$PY" scripts/pytorch_dit.py --device cpu \
    --init-from "$PD/ckpt_000000.bin" "${PEER[@]}" --compare-metrics "$PD/metrics.jsonl" --plant-bug "$bug"
done
# --sdpa-backend: math runs on the CPU and its summary records the backend that ran; the CUDA
# kernels named on the CPU end with a clear message (exit 3), not a silent fallback
check dit_peer_sdpa_math bash -c "'$PY' scripts/pytorch_dit.py --device cpu --model dit-tiny --batch 2 --steps 2 \
  --sdpa-backend math | grep -q '\"sdpa_backend\": \"math\"'"
check_error dit_peer_sdpa_flash_on_cpu "flash CUDA cpu" "$PY" scripts/pytorch_dit.py --device cpu --model dit-tiny --steps 1 \
  --sdpa-backend flash
PEER_FILE=(--data "$PD/clips.bin" --val-clips 2 --batch 3 --grad-accum 2 --steps 4 --lr 1e-2 --warmup 1)
check dit_peer_clip_file bash -c "'$PY' scripts/clips_to_bin.py --synthetic-demo '$PD/demo' && \
  '$PY' scripts/clips_to_bin.py '$PD/demo' --out '$PD/clips.bin' --frames 4"
check dit_peer_file_train_dit ./train_dit_cpu --model dit-tiny --channels 3 --frames 4 --height 12 --width 16 --NC 3 \
  "${PEER_FILE[@]}" --save-init 1 --val-every 0 --run-dir "$PD/file"
check dit_peer_file_steps "$PY" scripts/pytorch_dit.py --device cpu --init-from "$PD/file/ckpt_000000.bin" "${PEER_FILE[@]}" \
  --compare-metrics "$PD/file/metrics.jsonl"

section "train_dit data and tensor parallelism, ZeRO-1 under mpirun (2 and 4 ranks): test_dit, train_dit, checkpoints (dev/test/dit_parallel_tests.sh)"
sub_tests dit_parallel bash dev/test/dit_parallel_tests.sh "$PY" "$TMP/dit_parallel" $DIT_FRESH
section "full sharding under mpirun (--zero 2 and 3, --offload-optim, both trainers): the committed and fresh references, 20 steps bitwise against --zero 1, checkpoints across stages, faults (dev/test/zero_tests.sh)"
sub_tests zero bash dev/test/zero_tests.sh "$PY" "$TMP/zero" ${FRESH:-} $DIT_FRESH

section "pipeline parallelism under mpirun (--pp, 1f1b and interleaved, both trainers): fresh references at every layout, a planted slot bug, 20 steps against one process, checkpoints across layouts, the bubble against the schedule, a stage that hangs (dev/test/pp_tests.sh)"
sub_tests pp bash dev/test/pp_tests.sh "$PY" "$TMP/pp"

section "train_dit memory plan against the formulas of docs/memory.md section 9"
check dit_memory_plan "$PY" dev/test/check_dit_plan.py ./train_dit_cpu

section "video data: moving digits, clip files, GIF and PNG (llmc/io/video_data.h, llmc/io/image_write.h, scripts/clips_to_bin.py)"
V="$TMP/video"; mkdir -p "$V/img"
sub_tests video_data ./build/test_video_data
# train_dit --label-dropout in llmc/train/flow_batch.h: p = 0 none, p = 1 all, p = 0.25 a binomial fraction of 20000
# labels (5 sigma), the kept labels the source's, the same seed the same labels (dev/test/test_flow_batch.c; about 1 s)
sub_tests flow_batch ./build/test_flow_batch
sub_tests clips_to_bin "$PY" dev/test/check_clips.py ./build/test_video_data "$V/clips"
check images_write ./build/test_video_data --images "$V/img"
sub_tests images "$PY" dev/test/check_images.py "$V/img"
check_error image_unwritable "cannot write x.gif.tmp" ./build/test_video_data --write-gif "$V/no_such_dir/x.gif"
check_error clipgen_frame_too_small "too small Hi Wi" ./build/test_video_data --gen 1 4 7 6 10
check_error clipgen_too_many_classes "classes 1 to 10" ./build/test_video_data --gen 1 4 16 16 11
check_error clipfile_missing "cannot open" ./build/test_video_data --open "$V/no_such.bin"
if "$PY" dev/test/check_clips.py --make-bad "$V/clips/f32.bin" "$V/bad" >"$TMP/make_bad.log" 2>&1; then
  # name: the words the message must have
  while read -r name words; do
    check_error "clipfile_$name" "$name.bin $words" ./build/test_video_data --open "$V/bad/$name.bin"
  done <<'BAD'
magic bad magic
version version
reserved reserved 100
zero_clips clips > 0
negative_width Wi > 0
encoding encoding
truncated truncated
trailing trailing
label clip 1 label outside
negative_label label -1
value_range clip 1 1.5 finite
nan nan finite
BAD
  check_error clipfile_no_val_clips "validation" ./build/test_video_data --open "$V/clips/f32.bin" 1 0
  check_error clipfile_all_val "none is left" ./build/test_video_data --open "$V/clips/f32.bin" 0 9
  check_error clipfile_model_shape "Wi=16 model expects Wi=12" ./build/test_video_data --open "$V/clips/f32.bin" 0 2 3 5 12 12 3
else fail clipfile_bad "check_clips.py --make-bad: $(tail -n 2 "$TMP/make_bad.log")"; fi
# the digit classifier that labels make dit's samples (scripts/dit_digits.py): >= 0.95 on held-out real
# clips, near chance against shuffled labels (its self-test), and a bar it cannot reach must fail
check dit_digits_real "$PY" scripts/dit_digits.py check --real-clips 300 --self-test
check_error dit_digits_bar_unreachable "below --min-real" "$PY" scripts/dit_digits.py check --real-clips 100 --min-real 1.01

# ---------------------------------------------------------------------------
# the background jobs' results (they ran beside everything above)
wait "$CP_PID"
# make test: gpu_check's call 1 on the CPU in the foreground once its own checks and the CP tests
# are done, beside the lane's (sampled) emulator; after it, in the lane, it made the lane the run's
# critical path
[ "$FULL" = 1 ] || gpu_calls_on_cpu
section "context parallelism under mpirun (cp 2, cp 4: ring, ulysses, hybrid; with tp and dp): test_llama, train_llama, checkpoints (dev/test/cp_tests.sh; in the background)"
lane_timed "$CP_T0" "$TMP/cp.end" "cp (sub-tests; in the background, after the TP tests)"
count_sub_tests cp "$(cat "$TMP/cp.rc" 2>/dev/null || echo 1)"

wait "$LANE_PID"
section "scripts/gpu_check.sh's calls executed on the CPU"
for call in $GPU_CALLS; do
  if [ "$(cat "$TMP/gpu_check_cpu_call$call.rc" 2>/dev/null)" = 0 ]; then pass "gpu_check_cpu_call$call"
  else
    fail "gpu_check_cpu_call$call" "exit $(cat "$TMP/gpu_check_cpu_call$call.rc" 2>/dev/null)"
    # the steps that did not pass (with their limits), then the end of the call's output
    grep -hE '^==== .*: (FAIL|TIMEOUT|SKIP)' "$TMP/gpu_call$call"/gpu_check_call$call.log 2>/dev/null | grep -v 'on the CPU' | sed 's/^/    /'
    tail -n 15 "$TMP/gpu_check_cpu_call$call.log" | sed 's/^/    /'
  fi
done
lane_timed "$(cat "$TMP/gpu_calls.start")" "$TMP/gpu_calls.end" "gpu_check_cpu_call $GPU_CALLS ($([ "$FULL" = 1 ] && echo "background lane, after the emulator and the HF round trip" || echo "after the other foreground checks"))"

section "the CUDA kernels of llmc/kernels/*.cuh run in the host emulator against their CPU twins (dev/emu; background lane)"
lane_timed "$LANE_T0" "$TMP/cuda_compile.end" "cuda_compile (background lane, from the start)"
lane_timed "$(cat "$TMP/cuda_compile.end")" "$TMP/emu.end" "emu (sub-tests; background lane, after the compile)"
count_sub_tests emu "$(cat "$TMP/emu.rc" 2>/dev/null || echo 1)"
grep -h "took\|in [0-9.]* s" "$TMP/emu.log" | sed "s/^/  /"  # where the emulator stage's minutes go

if [ "$FULL" = 1 ]; then
  section "Hugging Face: transformers loads the export, the import gives back the same bits (dev/test/hf_roundtrip.sh; background lane)"
  lane_timed "$(cat "$TMP/emu.end")" "$TMP/hf.end" "hf (sub-tests; background lane, after the emulator)"
  count_sub_tests hf "$(cat "$TMP/hf.rc" 2>/dev/null || echo 1)"
else
  echo "(Hugging Face round trip skipped: make test-full and CI run dev/test/hf_roundtrip.sh, which installs transformers)"
fi

if [ -n "$NVCC_PATH" ]; then
  section "CUDA build compiles (sm_90, bf16 and FP32: ${CUDA_SET[*]}; bf16 with cuDNN where it is here); it cannot run here"
  # (compiled by the background lane at its start)
  if [ "$(cat "$TMP/cuda_compile.rc" 2>/dev/null)" = 0 ]; then pass cuda_compile
  else fail cuda_compile "make cuda-compile: exit $(cat "$TMP/cuda_compile.rc" 2>/dev/null)"; tail -n 15 "$TMP/cuda_compile.log" | sed 's/^/    /'; fi
  if [ "$(cat "$TMP/cuda_compile.cudnn" 2>/dev/null)" = 1 ]; then
    echo "  (the bf16 programs compiled and linked with cuDNN's attention, USE_CUDNN=1; not run: no GPU)"
    # its workspace in the plan (--plan-only needs no device; cuDNN loads at start and says its version)
    [ -x build/train_llama ] && check memory_plan_cudnn_bf16 "$PY" dev/test/check_memory_plan.py --cudnn-only ./build/train_llama
  else
    echo "  (without cuDNN: $(grep -m1 'cuDNN\|cudnn' "$TMP/cuda_compile.log" 2>/dev/null || echo 'not found'))"
  fi
  [ "$FULL" = 1 ] && check cuda_ladders_compile make -s -j2 -C dev/cuda compile CUDA_ARCH=90
  # ptxas' report of every kernel, kept by cuda-compile: spills, registers and shared memory
  # against each kernel's occupancy, dynamic shared memory opt-ins, coverage; then planted
  # defects, every one of which the gate must catch (dev/test/ptxas_gate.py)
  PTXAS=(build/train_{llama,dit}.ptxas build/test_{llama,dit}_fp32.ptxas); [ "$FULL" = 1 ] && PTXAS+=(build/test_{llama,dit}.ptxas)
  sub_tests ptxas_gate "$PY" dev/test/ptxas_gate.py "${PTXAS[@]}"
  sub_tests ptxas_gate_planted "$PY" dev/test/ptxas_gate.py --planted "$NVCC_PATH"
  # --plan-only touches no device, so the CUDA build's bf16 plan is checked here too
  # (sampled: the CP and DiT plans of the bf16 build; test-full also every plan of check_memory_plan.py, 35 s)
  [ "$FULL" = 1 ] && [ -x build/train_llama ] && check memory_plan_bf16 "$PY" dev/test/check_memory_plan.py ./build/train_llama
  [ -x build/train_llama ] && [ -x build/train_dit ] && check memory_plan_cp_bf16 "$PY" dev/test/check_cp_plan.py ./build/train_llama ./build/train_dit
  [ "$FULL" = 1 ] && [ -x build/train_llama ] && check memory_plan_pp_bf16 "$PY" dev/test/check_pp_plan.py ./build/train_llama
  # the DiT plan (docs/memory.md section 9); the CUDA build loads cuBLAS at each start (0.2 s a plan): 2 of the 6 shapes, every flag set
  [ -x build/train_dit ] && check dit_memory_plan_bf16 "$PY" dev/test/check_dit_plan.py --shapes 2 ./build/train_dit
  # the issue's seed configurations, planned by the bf16 build (docs/memory.md 7.1): llama3-8B on 4 ranks of 24 GB
  # (T = 2048, one sequence a rank) fits only with the optimizer on the host, and --fit-memory finds it; hunyuan-13B at
  # 118,800 tokens on 8 ranks within 32 GB at --zero 3 and within 16 GB with --offload-optim 1 (1.5 GiB of reserve),
  # on --attention tc: what auto takes on such a device, where tc2's dQ workspace (2.9 GiB here) does not fit
  # (--plan-only has no device and plans auto's fastest; the emulated train_llama.bf16.auto_steps_down runs the step down)
  if [ -x build/train_llama ] && [ -x build/train_dit ]; then
    check seed_configs_fit_bf16 bash -c 'set -e
      dev() { local x; x=$("$@" --plan-only 1 2>&1 | grep "the largest is rank" | grep -o "(device [0-9.]* MiB)" | tr -dc "0-9."); [ -n "$x" ] || return 1; echo "$x"; }
      l8=(./build/train_llama --model llama3-8B --seq 2048 --batch 1 --dp 4 --shard-vocab 1)
      f=$("${l8[@]}" --fit-memory 24 --plan-only 1 2>&1 | grep "chose"); echo "$f"
      echo "$f" | grep -q -- "--offload-optim 1:"
      a=$(dev "${l8[@]}" --zero 3 --offload-optim 1 --recompute 2 --ce-chunks 8 --offload-act -1)
      h=(./build/train_dit --model hunyuan-13B --batch 1 --cp 8 --cp-mode ulysses --zero 3 --recompute 2 --ffn-chunks 8 --ffn-chunk-dim seq
         --attention tc)
      b=$(dev "${h[@]}"); c=$(dev "${h[@]}" --offload-optim 1)
      echo "llama3-8B dp 4 zero 3 offload-optim: $a MiB; hunyuan-13B cp 8 zero 3: $b MiB, with offload-optim: $c MiB"
      awk -v a="$a" -v b="$b" -v c="$c" "BEGIN { r = 1536; exit !(a + r <= 24 * 1024 && b + r <= 32 * 1024 && c + r <= 16 * 1024) }"'
  fi
fi

# a real scheduler: a private one-node SLURM cluster (its own slurm.conf, munge key and socket, ports, all in a
# temporary directory), installed from Debian when missing; make test-full and CI only (about 30 s on 2 cores)
if [ "$FULL" = 1 ] || [ "${CI:-}" = true ]; then
  section "SLURM: scripts/train_llama.sbatch and train_dit.sbatch on 2 ranks of a private cluster, a requeued job resumes bit-exactly (dev/test/slurm_cluster.sh)"
  sub_tests slurm bash dev/test/slurm_cluster.sh "$PY"
  grep -h '^SKIP' "$TMP/slurm.log" || true  # packages that cannot be installed, or not root: said, nothing failed
else
  echo "(SLURM cluster test skipped: make test-full or CI=true runs dev/test/slurm_cluster.sh)"
fi

echo
echo "the slowest checks (seconds of wall time; their sum is $(awk '{ s += $1 } END { printf "%.0f", s }' "$TMP/times") s):"
sort -rn "$TMP/times" | head -n 15 | sed 's/^/  /'
mkdir -p build && sort -rn "$TMP/times" > build/test_times.txt  # all of them, kept after the run
[ $failed -eq 0 ] || echo "failed:$failed_names"
e=$(( $(date +%s) - T0 ))
printf 'make test%s: %d:%02d (minutes:seconds)\n' "$([ "$FULL" = 1 ] && echo ' (full: TEST_FULL=1)' || echo ' (sampled; make test-full runs all)')" $((e / 60)) $((e % 60))
echo "$passed passed, $failed failed"
[ $failed -eq 0 ]
