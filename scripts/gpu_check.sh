#!/usr/bin/env bash
# The one script for a GPU machine (DESIGN.md 6, 7): builds the CUDA trainer and tests,
# runs the CUDA gradient checks, bit-exact resume in both builds, compute-sanitizer
# (memcheck, racecheck), the kernel ladders, a short TinyStories run of
# train_llama next to the PyTorch peer from the same initial checkpoint, and a throughput
# benchmark of both; ends with a results table. Run from anywhere, in one call:
#
#   bash scripts/gpu_check.sh            # writes ${OUT:-./gpu_out}
#
# Every step has a time limit and the whole run a budget (GPU_CHECK_BUDGET seconds,
# default 540); a step that fails, times out or finds no time left is recorded as
# FAIL / TIMEOUT / SKIP and the script goes on. The exit status is 0 when every step
# passed, 1 otherwise.
#
# Output under $OUT (few files, flat):
#   gpu_check.log          every step's command and full output, in order
#   summary.md             checks table, loss-overlay gap, throughput table (printed last)
#   loss_stories15M.png    train_llama vs PyTorch loss curves (scripts/plot_loss.py)
#   ours_stories15M.jsonl  train_llama's metrics.jsonl of that run
#   torch_stories15M.jsonl the PyTorch peer's metrics of that run
#                          (the dry run's files say tiny instead of stories15M)
#   bench.jsonl            one line per benchmark: name, tok_per_s, peak_mem_bytes, ...
#   memory.png             peak memory vs tok/s of the benchmarks (scripts/plot_memory.py)
#   profile_*.txt          the per-kernel profile of one step (--profile-step), per attention
# Run directories, checkpoints and fresh reference files go to a scratch directory
# (GPU_CHECK_SCRATCH, default a mktemp dir) that is not copied back.
#
# Data: the TinyStories shards are prepared by data/prepare_tinystories.py, which needs
# sentencepiece and ../shared/data/tinystories. A GPU machine without them can use shards
# prepared elsewhere: run `make data` first and bring data/tinystories along (with the
# device tool: carry ["data/tinystories"], about 3 MB for the shared sample).
#
# Environment: OUT, PYTHON (default python3, with CUDA torch), GPU_CHECK_BUDGET,
# CUDA_ARCH (default 90), GPU_CHECK_HP (hyperparameter flags given to both trainers in
# the loss-curve run), PEAK_FLOPS (default 989e12, H100 SXM bf16 dense),
# GPU_CHECK_DATA (a shard glob to train on instead of preparing TinyStories).
#
# GPU_CHECK_CPU=1 is a dry run of the script itself on a machine without a GPU: the CPU
# build, the PyTorch peer on the CPU and the tiny model everywhere, so that every step,
# file and table of the script is exercised before GPU time is spent on it (make test
# runs it). Its numbers are CPU numbers and say nothing about a GPU.
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
BUDGET=${GPU_CHECK_BUDGET:-540}
ARCH=${CUDA_ARCH:-90}
PEAK=${PEAK_FLOPS:-989e12}
RESERVE=20      # seconds kept for the final table (its two commands have 30 + 20 s limits)
MIN_STEP=8      # a step with less time than this left is skipped
JOBS=$(nproc 2>/dev/null || echo 8)
read -r -a HP <<< "${GPU_CHECK_HP:---lr 1e-3 --warmup 30 --min-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0 --seed 1337}"
TRAIN_GLOB=${GPU_CHECK_DATA:-data/tinystories/tinystories_train_*.bin}
VAL_GLOB=data/tinystories/tinystories_val_*.bin
[ -n "${GPU_CHECK_DATA:-}" ] && VAL_GLOB=$GPU_CHECK_DATA
T0=$SECONDS

# what runs where: the real GPU check, or the dry run of this script on the CPU
DRY=${GPU_CHECK_CPU:-0}
if [ "$DRY" = 1 ]; then
  DEVICE=cpu; TRAIN_BIN=./train_llama_cpu; TEST_BINS=(test_llama_cpu)
  RUN_MODEL=tiny; RUN_B=4; RUN_T=64; RUN_STEPS=40; RUN_VAL=20
  BENCH_SMALL=(tiny 4 64); BENCH_LARGE=(tiny 2 128)
else
  DEVICE=cuda; TRAIN_BIN=./train_llama; TEST_BINS=(test_llama test_llama_fp32)
  RUN_MODEL=stories15M; RUN_B=32; RUN_T=256; RUN_STEPS=300; RUN_VAL=50
  BENCH_SMALL=(stories110M 16 1024); BENCH_LARGE=(llama3-1B 4 2048)
fi

SCRATCH=${GPU_CHECK_SCRATCH:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
mkdir -p "$SCRATCH/logs"
LOG=$OUT/gpu_check.log
STEPS=$SCRATCH/steps.tsv   # name, status, seconds, note
ROWS=$SCRATCH/rows.jsonl   # throughput rows for the final table
GAP=$SCRATCH/gap.txt
: > "$LOG"; : > "$STEPS"; : > "$ROWS"; : > "$GAP"
rm -f "$OUT/summary.md" "$OUT/loss_$RUN_MODEL.png" "$OUT/ours_$RUN_MODEL.jsonl" \
      "$OUT/torch_$RUN_MODEL.jsonl" "$OUT/bench.jsonl" "$OUT/memory.png"

say() { echo "[gpu_check $(( SECONDS - T0 ))s] $*"; echo "[gpu_check $(( SECONDS - T0 ))s] $*" >> "$LOG"; }

record() { # name status seconds note
  printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$STEPS"
}

# run_step NAME MAX_SECONDS COMMAND...: runs COMMAND with a time limit of MAX_SECONDS
# (less when the budget is running out), its output into the log; returns its status
# (99 when skipped for lack of time).
run_step() {
  local name=$1 max=$2; shift 2
  local left=$(( BUDGET - (SECONDS - T0) - RESERVE ))
  local t=$max
  if (( left < t )); then t=$left; fi
  local slog="$SCRATCH/logs/$name.log"
  if (( t < MIN_STEP )); then
    record "$name" SKIP 0 "time budget spent"
    say "SKIP $name (time budget spent)"
    { echo "==== $name: SKIP (time budget spent)"; } >> "$LOG"
    return 99
  fi
  local t1=$SECONDS rc=0
  timeout -k 10 "$t" "$@" > "$slog" 2>&1 || rc=$?
  local dt=$(( SECONDS - t1 )) st=PASS note=""
  if (( rc == 124 || rc == 137 )); then st=TIMEOUT; note="limit ${t}s";
  elif (( rc != 0 )); then st=FAIL; note="exit $rc"; fi
  {
    echo "==== $name: $st ${dt}s (limit ${t}s, exit $rc)"
    echo "\$ $*"
    if (( $(wc -l < "$slog") > 3000 )); then
      head -n 1500 "$slog"; echo "... ($(wc -l < "$slog") lines, middle cut) ..."; tail -n 1500 "$slog"
    else
      cat "$slog"
    fi
    echo
  } >> "$LOG"
  record "$name" "$st" "$dt" "$note"
  echo "[gpu_check $(( SECONDS - T0 ))s] $st $name (${dt}s)"
  if [[ $st != PASS ]]; then tail -n 5 "$slog" | cut -c1-200 | sed 's/^/    | /'; fi
  return "$rc"
}

# add_row CONFIG MODEL T IMPL STATUS KIND PATH: a throughput row; KIND ours (PATH =
# train_llama's metrics.jsonl) or torch (PATH = pytorch_llama.py --out file)
add_row() {
  printf '{"config": "%s", "model": "%s", "T": %s, "impl": "%s", "status": "%s", "kind": "%s", "path": "%s"}\n' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$7" >> "$ROWS"
}

status_of() { # rc -> PASS / TIMEOUT / SKIP / FAIL
  case $1 in 0) echo PASS ;; 124|137) echo TIMEOUT ;; 99) echo SKIP ;; *) echo FAIL ;; esac
}

say "repo $ROOT, out $OUT, scratch $SCRATCH, python $PY, budget ${BUDGET}s$([ "$DRY" = 1 ] && echo ', DRY RUN on the CPU')"

# ---------------------------------------------------------------- (a) device, build
if [ "$DRY" = 1 ]; then
  GPU_NAME="none: dry run on the CPU ($(nproc) cores), numbers are CPU numbers"
  record nvidia_smi SKIP 0 "dry run"
  run_step python_torch 30 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  run_step build_cpu 240 make -j"$JOBS" train_llama_cpu test_llama_cpu
else
  run_step nvidia_smi 20 nvidia-smi
  GPU_NAME=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  run_step python_torch 30 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, 'available', torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else '')"
  run_step build_bf16 240 make -j"$JOBS" train_llama test_llama test_dit CUDA_ARCH="$ARCH"
  # the Makefile names the FP32 targets with a suffix (train_llama_fp32 test_llama_fp32 when PRECISION=FP32)
  run_step build_fp32 180 make -j"$JOBS" train_llama_fp32 test_llama_fp32 PRECISION=FP32 CUDA_ARCH="$ARCH"
fi
say "GPU: ${GPU_NAME:-unknown}"

# ---------------------------------------------------------------- (b) CUDA tests
FRESH=$SCRATCH/fresh
mkdir -p "$FRESH"
run_step fresh_ref_gqa_h8kv2_untied 60 "$PY" scripts/reference_llama.py --quiet --out "$FRESH/gqa_h8kv2_untied.lref" \
  --V 131 --D 64 --L 3 --H 8 --KV 2 --F 96 --max-seq-len 64 --B 3 --T 45 --n-steps 3 --tied 0 --seed 11
run_step fresh_ref_mqa_h4kv1_tied_theta 60 "$PY" scripts/reference_llama.py --quiet --out "$FRESH/mqa_h4kv1_tied_theta.lref" \
  --V 300 --D 80 --L 2 --H 4 --KV 1 --F 200 --max-seq-len 128 --B 2 --T 128 --n-steps 3 --tied 1 --seed 12 \
  --rope-theta 500000 --grad-clip 0.3
REFS=()
for f in dev/ref/*.lref "$FRESH"/*.lref; do [[ -f $f ]] && REFS+=("$f"); done
for f in "${REFS[@]}"; do
  n=$(basename "$f" .lref)
  for bin in "${TEST_BINS[@]}"; do
    if [[ -x ./$bin ]]; then
      run_step "${bin}_$n" 60 "./$bin" --ref "$f"
    else
      record "${bin}_$n" FAIL 0 "./$bin missing (build failed?)"
    fi
  done
done
# the PyTorch peer against the same references, on the GPU in bf16 autocast
if (( ${#REFS[@]} > 0 )); then
  run_step peer_selftest_model 90 "$PY" scripts/pytorch_llama.py --selftest-model "${REFS[@]}" --device "$DEVICE"
fi

# The tensor-core attention (--attention tc, llmc/attention_tc.cuh): never run on a GPU
# before. Its fast path takes head dims 64 and 128, which no committed reference has:
# fresh float64 references, causal (test_llama, with GQA and a T that is not a multiple of
# the tiles) and non-causal (test_dit), each checked at the bf16 tolerances with tc and
# with the fp32 kernel. Passing these and the ladder's version 4 (section c) is the
# evidence that lets `--attention auto` pick tc (llmc/attention_select.h).
if [ "$DRY" = 1 ]; then
  record attention_tc SKIP 0 "dry run (tensor cores need a GPU)"
else
  run_step fresh_ref_hd64_gqa 60 "$PY" scripts/reference_llama.py --quiet --out "$FRESH/hd64_gqa.lref" \
    --V 211 --D 256 --L 2 --H 4 --KV 2 --F 320 --max-seq-len 160 --B 2 --T 150 --n-steps 2 --tied 0 --seed 21
  run_step fresh_ref_hd128 60 "$PY" scripts/reference_llama.py --quiet --out "$FRESH/hd128.lref" \
    --V 173 --D 256 --L 2 --H 2 --KV 2 --F 320 --max-seq-len 200 --B 1 --T 197 --n-steps 2 --tied 1 --seed 22
  run_step fresh_dref_hd64 90 "$PY" scripts/reference_dit.py --quiet --out "$FRESH/dit_hd64.dref" \
    --C 1 --Fr 4 --Hi 16 --Wi 16 --pt 1 --ph 2 --pw 2 --D 128 --L 2 --H 2 --FF 256 --NC 3 --B 2 --n-steps 2 --seed 23
  for att in tc fp32; do
    for n in hd64_gqa hd128; do
      [[ -f $FRESH/$n.lref ]] && run_step "test_llama_${n}_attention_$att" 60 ./test_llama --ref "$FRESH/$n.lref" --attention "$att"
    done
    [[ -f $FRESH/dit_hd64.dref && -x ./test_dit ]] && run_step "test_dit_hd64_attention_$att" 60 ./test_dit --ref "$FRESH/dit_hd64.dref" --attention "$att"
  done
  [[ -f $FRESH/hd64_gqa.lref ]] && run_step test_llama_hd64_tc_flags 60 ./test_llama --ref "$FRESH/hd64_gqa.lref" --attention tc \
    --ffn-chunks 3 --ce-chunks 4 --offload-act -1 --recompute 2
fi

# checkpoint resume continues bit-exactly in each build (plain, and with memory flags)
if [ "$DRY" = 1 ]; then RESUME_BINS=(train_llama_cpu); else RESUME_BINS=(train_llama train_llama_fp32); fi
for bin in "${RESUME_BINS[@]}"; do
  for fl in plain flags; do
    extra=(); [ $fl = flags ] && extra=(--ffn-chunks 2 --ce-chunks 3 --offload-act -1 --recompute 1)
    if [[ -x ./$bin ]]; then
      run_step "resume_${bin}_$fl" 60 env PYTHON="$PY" bash scripts/check_resume.sh "./$bin" "$SCRATCH/resume_${bin}_$fl" "${extra[@]}"
    else
      record "resume_${bin}_$fl" FAIL 0 "./$bin missing (build failed?)"
    fi
  done
done
# data parallelism on the one GPU: 2 ranks share it through --comm mpi (NCCL refuses two
# ranks on one device); needs mpirun and a build that found MPI (make info)
if command -v mpirun >/dev/null 2>&1; then
  for bin in "${TEST_BINS[@]}"; do
    [[ -x ./$bin ]] || continue
    run_step "dp2_${bin}_zero_shard" 90 mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -np 2 \
      "./$bin" --comm mpi --ref dev/ref/gqa_h4kv2_tied.lref --zero 1 --shard-vocab 1 --ffn-chunks 2 --ce-chunks 3 --offload-act -1
    # tensor parallelism's CUDA orchestration (issue 12, item 8): both modes, the recycled
    # buffers and the vocab-parallel head, 2 TP ranks on the one GPU; correctness only
    for mode in allreduce reducescatter; do
      run_step "tp2_${bin}_$mode" 90 mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -np 2 \
        "./$bin" --comm mpi --ref dev/ref/gqa_h4kv2_tied.lref --tp 2 --tp-mode "$mode" --shard-vocab 1 --ffn-chunks 2 \
        --ce-chunks 3 --recompute 1
    done
  done
else
  record dp2_comm_mpi SKIP 0 "mpirun not found on this machine (Open MPI: scripts/ensure_build_deps.sh)"
fi

# compute-sanitizer on one small reference, with every memory flag (offload: three streams)
SANITIZER=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
if [ "$DRY" = 1 ]; then
  record sanitizer SKIP 0 "dry run (needs a GPU)"
elif [ -z "$SANITIZER" ]; then
  record sanitizer FAIL 0 "compute-sanitizer not found"
else
  for tool in memcheck racecheck; do
    run_step "sanitizer_$tool" 120 "$SANITIZER" --tool "$tool" --error-exitcode 3 ./test_llama \
      --ref dev/ref/mha_untied_small.lref --ffn-chunks 2 --ce-chunks 3 --offload-act -1 --recompute 1
  done
fi

# ---------------------------------------------------------------- (c) kernel ladders
if [ "$DRY" = 1 ]; then record kernel_ladders SKIP 0 "dry run (they need a GPU)"
else run_step kernel_ladders 120 make -C dev/cuda run CUDA_ARCH="$ARCH"; fi

# ---------------------------------------------------------------- (d) TinyStories: ours vs PyTorch
HAVE_DATA=0
prep_rc=0
if [ -z "${GPU_CHECK_DATA:-}" ]; then run_step prepare_tinystories 90 "$PY" data/prepare_tinystories.py || prep_rc=$?; fi
if compgen -G "$TRAIN_GLOB" > /dev/null; then
  HAVE_DATA=1
  if (( prep_rc != 0 )); then say "prepare_tinystories failed (exit $prep_rc; sentencepiece or the sample missing?), but shards exist: using them"; fi
else
  say "no TinyStories shards ($TRAIN_GLOB): prepare_tinystories failed (exit $prep_rc; sentencepiece or the sample missing?); skipping the training runs"
  record train15m_ours SKIP 0 "no data"
  record train15m_torch SKIP 0 "no data"
fi
TORCH_DATA=()
if (( HAVE_DATA )); then TORCH_DATA=(--train-data "$TRAIN_GLOB"); fi

# The per-kernel profile of one training step (--profile-step, llmc/profile.h): llama3-1B
# at B=4, T=2048, with each attention; the table (time, share of the step, TFLOP/s or GB/s
# against the peaks measured at start) goes to $OUT/profile_*.txt. Held against the
# predictions of docs/kernel_predictions.md.
if (( HAVE_DATA )); then
  if [ "$DRY" = 1 ]; then PROF=(tiny 4 64); PROF_ATT=(fp32); else PROF=(llama3-1B 4 2048); PROF_ATT=(fp32 tc); fi
  for att in "${PROF_ATT[@]}"; do
    pn=profile_${PROF[0]}_B${PROF[1]}_T${PROF[2]}_$att
    run_step "$pn" 120 "$TRAIN_BIN" --model "${PROF[0]}" --batch "${PROF[1]}" --seq "${PROF[2]}" --steps 3 --profile-step 3 \
      --attention "$att" --val-every 0 --sample-every 0 --train-data "$TRAIN_GLOB" --run-dir "$SCRATCH/$pn"
    sed -n '/^profile of step/,/^step /p' "$SCRATCH/logs/$pn.log" > "$OUT/$pn.txt" 2>/dev/null
    cat "$OUT/$pn.txt" 2>/dev/null
  done
else
  record profile SKIP 0 "no data"
fi

CFG_RUN="$RUN_MODEL B=$RUN_B T=$RUN_T, $RUN_STEPS steps"
if (( HAVE_DATA )); then
  RUN_DIR=$SCRATCH/run_$RUN_MODEL
  rm -rf "$RUN_DIR"
  rc=0
  if [[ -x $TRAIN_BIN ]]; then
    run_step train_ours 150 "$TRAIN_BIN" --model "$RUN_MODEL" --batch "$RUN_B" --seq "$RUN_T" --steps "$RUN_STEPS" \
      --val-every "$RUN_VAL" --sample-every 0 --train-data "$TRAIN_GLOB" --val-data "$VAL_GLOB" --run-dir "$RUN_DIR" --save-init 1 "${HP[@]}" || rc=$?
  else
    rc=1; record train_ours FAIL 0 "$TRAIN_BIN missing"
  fi
  [[ -f $RUN_DIR/metrics.jsonl ]] && cp "$RUN_DIR/metrics.jsonl" "$OUT/ours_$RUN_MODEL.jsonl"
  add_row "$CFG_RUN" "$RUN_MODEL" "$RUN_T" "train_llama" "$(status_of $rc)" ours "$OUT/ours_$RUN_MODEL.jsonl"
  CK=$RUN_DIR/ckpt_000000.bin
  INIT=()
  label="pytorch eager"
  if [[ -f $CK ]]; then
    INIT=(--init-from "$CK")
  else
    say "no initial checkpoint $CK: the PyTorch run starts from its own init (curves not comparable step by step)"
    INIT=(--model "$RUN_MODEL" --batch "$RUN_B" --seq "$RUN_T")
    label="pytorch eager (own init)"
  fi
  rc=0
  run_step train_torch 150 "$PY" scripts/pytorch_llama.py "${INIT[@]}" --steps "$RUN_STEPS" "${TORCH_DATA[@]}" "${HP[@]}" \
    --device "$DEVICE" --compile 0 --bench --bench-warmup 5 --print-every "$RUN_VAL" --peak-flops "$PEAK" \
    --out "$OUT/torch_$RUN_MODEL.jsonl" || rc=$?
  add_row "$CFG_RUN" "$RUN_MODEL" "$RUN_T" "$label" "$(status_of $rc)" torch "$OUT/torch_$RUN_MODEL.jsonl"
  if [[ -s $OUT/ours_$RUN_MODEL.jsonl && -s $OUT/torch_$RUN_MODEL.jsonl ]]; then
    run_step plot_loss 60 "$PY" scripts/plot_loss.py "$OUT/ours_$RUN_MODEL.jsonl" "$OUT/torch_$RUN_MODEL.jsonl" \
      --labels train_llama pytorch --title "$RUN_MODEL, B=$RUN_B T=$RUN_T, TinyStories" --out "$OUT/loss_$RUN_MODEL.png"
    grep -h '^max_abs_gap' "$SCRATCH/logs/plot_loss.log" > "$GAP" 2>/dev/null
    grep -h '^max_abs_gap' "$SCRATCH/logs/plot_loss.log" 2>/dev/null | sed 's/^/    /'
  else
    record plot_loss SKIP 0 "a metrics file is missing"
  fi
fi

# ---------------------------------------------------------------- (e) throughput benchmarks
# bench_ours NAME MODEL B T MAXSEC; bench_torch NAME MODEL B T COMPILE MAXSEC
bench_ours() {
  local name=$1 model=$2 b=$3 t=$4 max=$5 rc=0
  local rd=$SCRATCH/bench_$name
  rm -rf "$rd"
  if [[ -x $TRAIN_BIN ]]; then
    run_step "bench_${name}_ours" "$max" "$TRAIN_BIN" --model "$model" --batch "$b" --seq "$t" --steps 20 \
      --val-every 0 --sample-every 0 "${OURS_DATA[@]}" --run-dir "$rd" || rc=$?
  else
    rc=1; record "bench_${name}_ours" FAIL 0 "$TRAIN_BIN missing"
  fi
  add_row "$model B=$b T=$t" "$model" "$t" "train_llama" "$(status_of $rc)" ours "$rd/metrics.jsonl"
}
bench_torch() {
  local name=$1 model=$2 b=$3 t=$4 comp=$5 max=$6 rc=0 impl="pytorch eager"
  (( comp )) && impl="pytorch compile"
  local o=$SCRATCH/bench_${name}_torch_c$comp.jsonl mode=eager
  if (( comp )); then mode=compile; fi
  run_step "bench_${name}_torch_$mode" "$max" \
    "$PY" scripts/pytorch_llama.py --model "$model" --batch "$b" --seq "$t" --steps 15 --bench --bench-warmup 5 \
    --compile "$comp" --device "$DEVICE" "${TORCH_DATA[@]}" --peak-flops "$PEAK" --print-every 5 --out "$o" || rc=$?
  add_row "$model B=$b T=$t" "$model" "$t" "$impl" "$(status_of $rc)" torch "$o"
}
OURS_DATA=()
if (( HAVE_DATA )); then OURS_DATA=(--train-data "$TRAIN_GLOB"); fi
# cheap runs first, the torch.compile ones (long compile times) last
bench_ours small "${BENCH_SMALL[@]}" 90
bench_torch small "${BENCH_SMALL[@]}" 0 90
bench_ours large "${BENCH_LARGE[@]}" 120
bench_torch large "${BENCH_LARGE[@]}" 0 120
bench_torch small "${BENCH_SMALL[@]}" 1 150
bench_torch large "${BENCH_LARGE[@]}" 1 200

# ---------------------------------------------------------------- (g) memory-flag sweep (opt-in)
# GPU_CHECK_SWEEP=1: the sweep of docs/memory.md's flags (scripts/sweep_memory.py) for
# stories110M T=1024 and llama3-1B T=2048, with the largest micro-batch per flag set.
# It needs most of a call's 10 minutes on its own, so it is off by default: in a second
# call, run the two sweep_memory.py commands below directly after `make train_llama`.
if [ "${GPU_CHECK_SWEEP:-0}" = 1 ]; then
  run_step sweep_110m 240 "$PY" scripts/sweep_memory.py --binary ./train_llama --model stories110M --seq 1024 \
    --batch 8 --steps 6 --find-max-batch 1 --max-batch-limit 128 --out "$OUT/sweep_stories110M"
  run_step sweep_1b 300 "$PY" scripts/sweep_memory.py --binary ./train_llama --model llama3-1B --seq 2048 \
    --batch 1 --steps 6 --find-max-batch 1 --max-batch-limit 64 --out "$OUT/sweep_llama3-1B"
fi

# ---------------------------------------------------------------- (f) summary table
# the table builder: reads the rows and steps, writes summary.md and bench.jsonl
cat > "$SCRATCH/summary.py" <<'PYEOF'
import json, math, os, sys
steps_tsv, rows_jsonl, gap_txt, out_dir, peak, header = sys.argv[1:7]
peak = float(peak)
sys.path.insert(0, "scripts")
try:
    import pytorch_llama as P
except Exception as e:  # noqa: BLE001 (torch missing: no MFU for train_llama)
    P = None
    print("summary: cannot import scripts/pytorch_llama.py (%s): MFU of train_llama left out" % e, file=sys.stderr)

def jl(path):
    out = []
    try:
        with open(path) as f:
            for line in f:
                line = line.strip()
                if line:
                    try:
                        out.append(json.loads(line))
                    except ValueError:
                        pass
    except OSError:
        pass
    return out

def gib(x):
    return "%.2f GiB" % (x / 2**30) if isinstance(x, (int, float)) and x > 0 else "n/a"

def first_key(d, keys):
    for k in keys:
        if isinstance(d.get(k), (int, float)):
            return d[k]
    return None

steps = [l.rstrip("\n").split("\t") for l in open(steps_tsv) if l.strip()]
n_bad = sum(1 for s in steps if s[1] != "PASS")
md = ["# gpu_check", "", header, "",
      "## checks (%d steps, %d not PASS)" % (len(steps), n_bad), "", "| step | status | seconds | note |",
      "|---|---|---|---|"]
md += ["| %s | %s | %s | %s |" % tuple((s + ["", "", "", ""])[:4]) for s in steps]
gap = open(gap_txt).read().strip() if os.path.exists(gap_txt) else ""
md += ["", "## loss overlay (train_llama vs PyTorch, same init and batches)", "",
       gap or "no overlay (a run failed or was skipped)"]

table = ["| config | impl | tok/s | MFU | peak memory | status |", "|---|---|---|---|---|---|"]
bench = []
for r in jl(rows_jsonl):
    tok = mfu = mem = None
    memtxt = "n/a"
    lines = jl(r["path"])
    if r["kind"] == "ours":
        st = [l for l in lines if isinstance(l.get("tok_per_s"), (int, float)) and "step" in l]
        summ = [l for l in lines if l.get("summary") and isinstance(l.get("tok_per_s"), (int, float))]
        if summ:
            tok = summ[-1]["tok_per_s"]
        elif st:
            tail = st[3:] if len(st) > 4 else st[1:] if len(st) > 1 else st
            tail = tail[-10:]
            tok = sum(l["tok_per_s"] for l in tail) / len(tail)
        mems = [first_key(l, ("peak_mem", "peak_mem_bytes", "peak_mem_reserved", "peak_mem_allocated"))
                for l in lines]
        mems = [m for m in mems if m]
        if mems:
            mem = max(mems)
            memtxt = gib(mem)
        if tok is not None and P is not None and r["model"] in P.PRESETS:
            mfu = tok * P.flops_per_token(P.preset_cfg(r["model"]), int(r["T"])) / peak
    else:
        summ = [l for l in lines if l.get("summary")]
        if summ:
            s = summ[-1]
            tok = s.get("tok_per_s")
            mfu = tok * s["flops_per_token"] / peak if tok else None
            mem = s.get("peak_mem_reserved")
            memtxt = "%s alloc / %s reserved" % (gib(s.get("peak_mem_allocated")), gib(mem))
            if s.get("compile") == 0 and "compile" in r["impl"]:
                r["impl"] += " (torch.compile unavailable: ran eager)"
    status = r["status"] if tok else (r["status"] if r["status"] != "PASS" else "FAIL (no tok/s)")
    table.append("| %s | %s | %s | %s | %s | %s |" % (
        r["config"], r["impl"], "%.0f" % tok if tok else ("SKIP" if r["status"] == "SKIP" else "FAIL"), "%.1f%%" % (100 * mfu) if mfu else "n/a",
        memtxt, status))
    if tok:
        bench.append({"name": "%s %s" % (r["config"], r["impl"]), "tok_per_s": tok, "peak_mem_bytes": mem,
                      "mfu": mfu, "config": r["config"], "impl": r["impl"], "status": r["status"]})
md += ["", "## throughput (MFU = tok/s x (6N + 6LDT) / %.4g FLOP/s)" % peak, ""] + table + [""]
with open(os.path.join(out_dir, "summary.md"), "w") as f:
    f.write("\n".join(md))
with open(os.path.join(out_dir, "bench.jsonl"), "w") as f:
    for b in bench:
        f.write(json.dumps(b) + "\n")
PYEOF
COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
TORCH_V=$(grep -m1 '^torch ' "$SCRATCH/logs/python_torch.log" 2>/dev/null | cut -d' ' -f1-4)
HEADER="device: ${GPU_NAME:-unknown}; commit: $COMMIT; ${TORCH_V:-torch unknown}; $(date -u '+%Y-%m-%d %H:%M UTC'); used $(( SECONDS - T0 ))s of a ${BUDGET}s budget"
if ! timeout 30 "$PY" "$SCRATCH/summary.py" "$STEPS" "$ROWS" "$GAP" "$OUT" "$PEAK" "$HEADER" >> "$LOG" 2>&1; then
  say "summary builder failed; raw results follow"
  {
    echo "# gpu_check (raw: the summary builder failed)"; echo; echo "$HEADER"; echo
    echo "| step | status | seconds | note |"; echo "|---|---|---|---|"
    while IFS=$'\t' read -r a b c d; do echo "| $a | $b | $c | $d |"; done < "$STEPS"
    echo; cat "$GAP"; echo; cat "$ROWS"
  } > "$OUT/summary.md"
fi
if [[ -s $OUT/bench.jsonl ]]; then
  timeout 20 "$PY" scripts/plot_memory.py "$OUT/bench.jsonl" --title "peak memory vs tok/s (${GPU_NAME:-GPU})" \
    --out "$OUT/memory.png" >> "$LOG" 2>&1 || say "plot_memory failed (see gpu_check.log)"
fi
if grep -q 'matplotlib is not importable' "$LOG"; then
  say "matplotlib missing: no PNGs (install python3-matplotlib or pip install matplotlib)"
fi
{ echo; echo "==== summary.md"; cat "$OUT/summary.md"; } >> "$LOG"
say "done in $(( SECONDS - T0 ))s; logs in $LOG"
echo
cat "$OUT/summary.md"
# every step must pass; the dry run's only allowed exceptions are the steps it skips by design
if awk -F'\t' '$2 != "PASS" && !($2 == "SKIP" && $4 ~ /^dry run/) { bad = 1 } END { exit !bad }' "$STEPS"; then exit 1; fi
exit 0
