#!/usr/bin/env bash
# The script for a GPU machine (docs/design.md 6, 7), in three calls of the device tool, each of
# which starts on a bare machine and writes its results under $OUT as it goes:
#
#   bash scripts/gpu_check.sh 1   # <= 8 min: tests with --attention tc on fresh hd-64/128
#                                 #   references, then the headline: llama3-1B T=2048 --attention tc
#                                 #   with --profile-step beside PyTorch (torch.compile, eager) on the
#                                 #   same batches; right after it the tc attention at hd 64, 72 and 128
#                                 #   (ladder v6, test_dit hd 72), then tc2 (ladder v7 and v8, the same
#                                 #   tests, its llama3-1B row) and cudnn (the tests, its llama3-1B
#                                 #   rows with each backward), the fp32 tests; then stories110M T=1024
#   bash scripts/gpu_check.sh 2   # <= 9 min: every dev/ref file in both builds, bit-exact resume,
#                                 #   --comm mpi with 2 ranks, compute-sanitizer (memcheck, racecheck,
#                                 #   synccheck) on the tensor-core kernels, while the DiT peers'
#                                 #   torch.compile caches fill in the background; then dit-B and
#                                 #   dit-XL at 16K tokens (ours on tc, tc2 and cudnn) against
#                                 #   scripts/pytorch_dit.py (eager and torch.compile with SDPA auto),
#                                 #   the attention ladder, racecheck on tc2, the DiT peers eager with
#                                 #   flash and cudnn, the other ladders
#   bash scripts/gpu_check.sh 3   # <= 6 min: loss curves (stories15M, ours vs PyTorch from the same
#                                 #   initial weights), the memory sweep, largest-batch searches last
#
# Binaries: built on this machine before the GPU session (`make gpu-bin`: gpu_bin/ with the
# same nvcc, sm_90, no MPI or NCCL to load, the bf16 programs linked with cuDNN for --attention
# cudnn, whose library each call takes from PyTorch's wheel; gpu_bin/nocudnn/ the bf16 programs
# without it, used when libcudnn.so.9 cannot be loaded; gpu_bin/mpi/ with MPI and NCCL when
# mpicxx is here; the ladders in dev/cuda/build) and carried, so no call waits on a compile of train_llama.cu.
# Each call checks them first (nvcc version recorded in gpu_bin/BUILD_INFO, every shared
# library found); only when they cannot run does it build on the GPU machine (make, retried
# with MPI=0 NCCL=0 when NCCL or MPI does not link). `make gpu-bin` also packs both folders into
# gpu_carry/carry.tar.xz (9.7 MB on 2026-11-30; 91 MB unpacked, past the device tool's 64 MiB).
# With the device tool, calls 1 and 2 in one run as on 2026-11-30 (docs/results/gpu_h200_2026-11-30.md):
#
#   run(command="tar xJf gpu_carry/carry.tar.xz && S=$SECONDS && GPU_CHECK_SCRATCH=/tmp/gcs1
#       GPU_CHECK_BUDGET=290 bash scripts/gpu_check.sh 1 > $OUT/stdout_call1.txt 2>&1;
#       cp /tmp/gcs1/steps_call1.tsv /tmp/done1.tsv; GPU_CHECK_SCRATCH=/tmp/gcs2
#       GPU_CHECK_BUDGET=$((565-SECONDS+S)) bash scripts/gpu_check.sh 2 > $OUT/stdout_call2.txt 2>&1;
#       cp /tmp/gcs2/steps_call2.tsv /tmp/done2.tsv", carry=["gpu_carry"])
#
# and, on the same machine while it is warm (30 s), what call 2 did not reach:
#
#   run(command="GPU_CHECK_DONE=/tmp/done2.tsv GPU_CHECK_SCRATCH=/tmp/gcs2b bash scripts/gpu_check.sh 2", carry=["gpu_carry"])
#
# (call 3 also carries data/tinystories for its curves)
#
# Data: nothing depends on ../shared (it does not travel). Every benchmark reads synthetic
# token shards that the call writes itself (dev/test/write_toy_shard.py; uint32 for llama3's
# vocabulary), the same files for train_llama and PyTorch. The loss curves of call 3 use
# carried TinyStories shards (data/tinystories, `make data` here) when present, else the
# synthetic ones; the summary names the data each row used.
#
# Every step has a time limit, which is also its estimate in the plan, and each call a
# budget (GPU_CHECK_BUDGET overrides it); a step that fails, times out or finds no time
# left is recorded as FAIL / TIMEOUT / SKIP and the call goes on. Exit status: 0 when
# every step passed, 1 otherwise. The limits add up to more than the budgets; what the
# steps took on the H200 (2026-11-26: the tests 1-16 s each, a PyTorch run 12-28 s eager and
# 49-106 s compiled) puts call 1 near 6 min and call 2 near its 9: call 2's last steps, the
# other ladders and the extra compiled runs, are the ones a tight budget skips.
#
# Ours against PyTorch: every PyTorch row runs in the same call as ours' row of its config,
# after it, on the same batches, so that no ratio spans two machines; the peer runs eager
# with SDPA auto (PyTorch's choice, recorded) and with flash and cudnn by name (a SKIP
# where PyTorch cannot run one), compiled with auto, and compiled again with the fastest
# eager backend when auto ran another. The summary gives tok/s of the mean and the median
# step for both sides, the backend that ran, and ours' ratio to each PyTorch row.
#
# Output under $OUT (at most 8 files per call; tables are folded into the summary):
#   gpu_check_callN.log     every step's command and full output, in order, each ending with
#                           its SM clock range, median and throttle reasons (nvidia-smi, 4 Hz)
#   summary_callN.md        checks table, throughput table, profile, gap and sweep tables;
#                           rewritten after every benchmark row, so a call cut short keeps them
#   bench_callN.jsonl       one line per benchmark row: name, tok_per_s, peak_mem_bytes, mfu, data
#   call 3 also: loss_stories15M.png, ours_stories15M.jsonl, torch_stories15M.jsonl,
#                sweep_stories110M.png, sweep_llama3-1B.png (the dry runs say tiny)
# Run directories, checkpoints and references go to a scratch directory (GPU_CHECK_SCRATCH,
# default a mktemp dir) that is not copied back.
#
# Two runs without a GPU, both in make test:
#   GPU_CHECK_CPU=1 bash scripts/gpu_check.sh N   executes call N's steps on the CPU build with
#       tiny models, so that every step, file and table is exercised before GPU time is spent
#       (its numbers are CPU numbers and say nothing about a GPU)
#   GPU_CHECK_DRY=1 bash scripts/gpu_check.sh plan   runs nothing: lists every call and step with
#       its time limit as its estimate, plus each call's start-up, into $OUT/plan.tsv and a
#       table, and dev/test/check_gpu_plan.py asserts the plan's promises (headline within the
#       first 300 s of call 1, at most 8 files a call, every benchmark row with data, the
#       llama3-1B row on --attention tc)
#
# Environment: OUT, PYTHON (default python3, with CUDA torch), GPU_CHECK_BUDGET, CUDA_ARCH
# (default 90), PEAK_FLOPS (default 989e12, H100 SXM bf16 dense), GPU_CHECK_HP (hyperparameter
# flags given to both trainers in the loss-curve run), GPU_CHECK_DATA (a uint16 shard glob for
# the loss curves instead of data/tinystories), GPU_CHECK_SWEEP=0 (skip call 3's sweep),
# GPU_CHECK_SCRATCH (the scratch directory), GPU_CHECK_DONE (a copy of an earlier run's
# $GPU_CHECK_SCRATCH/steps_callN.tsv: the same call again runs only what that one did not reach).
set -u -o pipefail

cd "$(dirname "$0")/.." || exit 2
ROOT=$(pwd)
CALL=${1:-${GPU_CHECK_CALL:-}}
case $CALL in
  1|2|3|plan) ;;
  *) echo "usage: bash scripts/gpu_check.sh 1|2|3   (GPU_CHECK_DRY=1 ... plan: the plan of all three)" >&2; exit 2 ;;
esac
PLAN=${GPU_CHECK_DRY:-0}
CPU=${GPU_CHECK_CPU:-0}
if [ "$CALL" = plan ] && [ "$PLAN" != 1 ]; then echo "gpu_check: 'plan' needs GPU_CHECK_DRY=1" >&2; exit 2; fi
OUT=${OUT:-./gpu_out}
mkdir -p "$OUT" || exit 2
OUT=$(cd "$OUT" && pwd)
PY=${PYTHON:-python3}
ARCH=${CUDA_ARCH:-90}
PEAK=${PEAK_FLOPS:-989e12}
STARTUP_EST=120   # seconds: a bare machine's start and the transfer of the tree (device README), not in the budget
RESERVE=10        # seconds kept for the last summary
MIN_STEP=5        # a step with less time than this left is skipped
JOBS=$(nproc 2>/dev/null || echo 8)
read -r -a HP <<< "${GPU_CHECK_HP:---lr 1e-3 --warmup 30 --min-lr-frac 0.1 --weight-decay 0.1 --grad-clip 1.0 --seed 1337}"
T0=$SECONDS

SCRATCH=${GPU_CHECK_SCRATCH:-$(mktemp -d "${TMPDIR:-/tmp}/gpu_check.XXXXXX")}
mkdir -p "$SCRATCH/logs" "$SCRATCH/data" "$SCRATCH/fresh"

# ---------------------------------------------------------------- the machinery
# The plan (GPU_CHECK_DRY=1): one line per event, call TAB kind TAB name TAB seconds TAB detail.
# kinds: startup, step, cond (only when something before it failed), headline (results written
# here), out (a file the call leaves in $OUT), provides / needs (a data file), bench (a row).
PLAN_TSV=$OUT/plan.tsv
plan() { local d=${4:-}; d=${d//$'\n'/ }; printf '%s\t%s\t%s\t%s\t%s\n' "$CUR" "$1" "$2" "$3" "${d//$'\t'/ }" >> "$PLAN_TSV"; }

say() { echo "[gpu_check call $CUR $(( SECONDS - T0 ))s] $*"; [ "$PLAN" = 1 ] || echo "[gpu_check $(( SECONDS - T0 ))s] $*" >> "$LOG"; }
record() { printf '%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "${4:-}" >> "$STEPS"; }

# one line of a step's clock samples (nvidia-smi: SM MHz, W, the throttle reasons' bit mask)
clock_line() {
  sort -t, -k1,1n "$1" | awk -F', *' '{ c[NR] = $1; p += $2; if ($3 != "0x0000000000000000") t[$3]++ }
    END { if (!NR) exit; printf "clocks: SM %d-%d MHz, median %d over %d samples; power mean %.0f W; throttle reasons", c[1], c[NR], c[int((NR + 1) / 2)], NR, p / NR
          n = 0; for (k in t) { printf " %s (%d samples)", k, t[k]; n++ } if (!n) printf " none"; printf "\n" }'
}

# run_step NAME MAX_SECONDS COMMAND...: COMMAND under a limit of MAX_SECONDS (less when the
# call's budget runs out), its output into the log; returns its status (99: skipped for time)
run_step() {
  local name=$1 max=$2; shift 2
  if [ "$PLAN" = 1 ]; then plan step "$name" "$max" "$*"; return 0; fi
  local left=$(( BUDGET - (SECONDS - T0) - RESERVE ))
  # on the CPU (GPU_CHECK_CPU=1) the limits, sized for the GPU, get twice the time: make test
  # runs the call beside its other lanes on 2 cores, where a tiny eager peer run can take 30 s
  [ "$CPU" = 1 ] && max=$(( max * 2 ))
  local t=$max
  if ran_before "$name"; then
    record "$name" SKIP 0 "ran in the previous call (GPU_CHECK_DONE)"
    echo "==== $name: SKIP (ran in the previous call, GPU_CHECK_DONE)" >> "$LOG"
    return 99
  fi
  if (( left < t )); then t=$left; fi
  local slog="$SCRATCH/logs/$name.log"
  if (( t < MIN_STEP )); then
    record "$name" SKIP 0 "time budget spent"
    say "SKIP $name (time budget spent)"
    echo "==== $name: SKIP (time budget spent)" >> "$LOG"
    return 99
  fi
  local t1=$SECONDS rc=0 sampler=""
  # the SM clock and power through the step: a kernel timed slower inside a trainer's step than
  # alone in its ladder may only be running at a lower clock (the GEMMs' power draw)
  if [ "$CPU" != 1 ] && command -v nvidia-smi >/dev/null 2>&1; then
    nvidia-smi --query-gpu=clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader,nounits -lms 250 \
      > "$slog.clocks" 2>/dev/null & sampler=$!
  fi
  timeout -k 10 "$t" "$@" > "$slog" 2>&1 || rc=$?
  [ -n "$sampler" ] && { kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null; }
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
    [ -s "$slog.clocks" ] && clock_line "$slog.clocks"
    echo
  } >> "$LOG"
  record "$name" "$st" "$dt" "$note"
  echo "[gpu_check call $CUR $(( SECONDS - T0 ))s] $st $name (${dt}s)"
  if [[ $st != PASS ]]; then tail -n 5 "$slog" | cut -c1-200 | sed 's/^/    | /'; fi
  return "$rc"
}

# GPU_CHECK_DONE=FILE: the steps file of an earlier call of the same number on this machine (a
# continuation when the lease did not let one call finish): every step that file records as run
# (PASS, FAIL or TIMEOUT) is skipped here, except the set-up that later steps need
ran_before() {
  [ -n "${GPU_CHECK_DONE:-}" ] && [ -f "$GPU_CHECK_DONE" ] || return 1
  case $1 in env|carried_binaries*|build_here|build_cpu|synthetic_data|fresh_refs_*) return 1 ;; esac
  awk -F'\t' -v n="$1" '$1 == n && $2 != "SKIP" { found = 1 } END { exit !found }' "$GPU_CHECK_DONE"
}

# skip NAME WHY: a step that cannot run here, with the reason in the table
skip() {
  if [ "$PLAN" = 1 ]; then plan step "$1" 0 "SKIP: $2"; return 0; fi
  record "$1" SKIP 0 "$2"; say "SKIP $1 ($2)"
}

# out FILE: a file this call leaves in $OUT (the plan counts them; the CPU run checks them)
out() { if [ "$PLAN" = 1 ]; then plan out "$1" 0; else echo "$1" >> "$SCRATCH/declared_call$CUR"; fi; return 0; }

# On the CPU, where each call has an $OUT of its own as on the device: every file the call
# left there was declared with out (what the plan counts), and there are at most 8
check_out_files() {
  local extra n
  extra=$(ls "$OUT" | grep -vxF -f "$SCRATCH/declared_call$CUR")
  n=$(ls "$OUT" | wc -l)
  if [ -n "$extra" ] || (( n > 8 )); then
    record out_files FAIL 0 "$n files; not declared: $(echo $extra)"; say "FAIL out_files: $n files; not declared: $(echo $extra)"
  else record out_files PASS 0 "$n files, each declared"; fi
}

status_of() { case $1 in 0) echo PASS ;; 124|137) echo TIMEOUT ;; 99) echo SKIP ;; *) echo FAIL ;; esac; }

# add_row CONFIG MODEL T IMPL STATUS KIND PATH DATA: a throughput row; KIND ours (PATH = the
# trainer's metrics.jsonl), torch (PATH = the PyTorch peer's --out file), dit_ours, dit_torch
add_row() {
  [ "$PLAN" = 1 ] && return 0
  printf '{"config": "%s", "model": "%s", "T": %s, "impl": "%s", "status": "%s", "kind": "%s", "path": "%s", "data": "%s"}\n' \
    "$1" "$2" "$3" "$4" "$5" "$6" "$7" "$8" >> "$ROWS"
}

# ---------------------------------------------------------------- per-call set-up
CUR=$CALL
setup_call() {  # CALL: the files, the budget, the device and the binaries of one call
  CUR=$1
  case $CUR in 1) BUDGET=480 ;; 2) BUDGET=540 ;; 3) BUDGET=360 ;; esac
  BUDGET=${GPU_CHECK_BUDGET:-$BUDGET}
  LOG=$OUT/gpu_check_call$CUR.log
  SUMMARY=$OUT/summary_call$CUR.md
  BENCH=$OUT/bench_call$CUR.jsonl
  STEPS=$SCRATCH/steps_call$CUR.tsv
  ROWS=$SCRATCH/rows_call$CUR.jsonl
  EXTRA=$SCRATCH/extra_call$CUR.md    # profile, gap and sweep tables folded into the summary
  [ "$PLAN" = 1 ] || : > "$SCRATCH/declared_call$CUR"
  out "gpu_check_call$CUR.log"; out "summary_call$CUR.md"; out "bench_call$CUR.jsonl"
  if [ "$PLAN" = 1 ]; then plan startup "machine start and transfer" "$STARTUP_EST"; plan budget budget "$BUDGET"; return 0; fi
  : > "$LOG"; : > "$STEPS"; : > "$ROWS"; : > "$EXTRA"
  rm -f "$SUMMARY" "$BENCH"
  say "call $CUR: repo $ROOT, out $OUT, scratch $SCRATCH, python $PY, budget ${BUDGET}s$([ "$CPU" = 1 ] && echo ', ON THE CPU (GPU_CHECK_CPU=1)')"
}

# which programs and models: the GPU's, or the CPU stand-ins of GPU_CHECK_CPU=1
if [ "$CPU" = 1 ]; then
  DEVICE=cpu; SFX=_cpu
  HEAD=(tiny 2 128); SMALL=(tiny 4 64); CURVE=(tiny 4 64 40 20); DIT_BENCH=(--model dit-tiny --batch 2)
  DIT_MODELS=(dit-tiny); DIT_CLIP=(--batch 2); DIT_LIMITS=(60 60 120)
  SWEEP=(tiny 64 2 tiny 128 1); LLAMA_V=512; MAXB=4; SWEEP_ONLY=(--only "baseline,recompute 2")
else
  DEVICE=cuda; SFX=""
  # torch.compile's on-disk caches, which the background warm-ups of call 2 fill (on by default
  # in recent PyTorch; said here so that an older one uses them too)
  export TORCHINDUCTOR_FX_GRAPH_CACHE=1 TORCHINDUCTOR_AUTOGRAD_CACHE=1
  HEAD=(llama3-1B 4 2048); SMALL=(stories110M 16 1024); CURVE=(stories15M 32 256 1000 100)
  # 16 x 32 x 32 = 16,384 tokens a clip
  DIT_BENCH=(--model dit-B --frames 16 --height 64 --width 64 --batch 1)
  DIT_MODELS=(dit-B dit-XL); DIT_CLIP=(--frames 16 --height 64 --width 64 --batch 1)
  # seconds: ours, one eager peer run, one compiled (dit-XL's compile took 106 s on the H200)
  DIT_LIMITS=(30 45 120)
  SWEEP=(stories110M 1024 8 llama3-1B 2048 1); LLAMA_V=128256; MAXB=64; SWEEP_ONLY=()
fi

# binaries: BIN holds train_llama, test_llama, ... (the CPU build: the _cpu names in the root);
# BF16_BIN the bf16 programs: BIN's own (with cuDNN when gpu_bin/BUILD_INFO says so), or
# gpu_bin/nocudnn's where cuDNN cannot be loaded
BIN=.
BF16_BIN=.
CUDNN_BIN=0   # 1: the bf16 programs have --attention cudnn and their libcudnn loads here
# cuDNN for the carried bf16 programs (make gpu-bin links them with -lcudnn): PyTorch's wheel
# brings the library (nvidia/cudnn/lib, or torch/lib in wheels that bundle it; 9.19 with torch
# 2.11); every step after this one finds it through LD_LIBRARY_PATH
cudnn_library_path() {
  if [ "$PLAN" = 1 ] || [ "$CPU" = 1 ]; then return 0; fi
  local dirs
  dirs=$("$PY" - <<'PYEOF' 2>/dev/null
import glob, os, site
roots = site.getsitepackages() + [site.getusersitepackages()]
found = []
for r in roots:
    for sub in ("nvidia/cudnn/lib", "torch/lib", "nvidia/cuda_nvrtc/lib"):
        p = os.path.join(r, sub)
        if glob.glob(os.path.join(p, "libcudnn.so.9*")) or (found and glob.glob(os.path.join(p, "libnvrtc*"))):
            found.append(p)
print(":".join(dict.fromkeys(found)))
PYEOF
)
  if [ -n "$dirs" ]; then
    export LD_LIBRARY_PATH="$dirs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    say "cuDNN: PyTorch's libcudnn.so.9 from $dirs (LD_LIBRARY_PATH)"
  else
    say "cuDNN: no libcudnn.so.9 in $PY's site-packages: the system's, if any"
  fi
}
resolve_binaries() {
  if [ "$CPU" = 1 ]; then
    run_step build_cpu 240 make -j"$JOBS" train_llama_cpu test_llama_cpu train_dit_cpu test_dit_cpu
    return
  fi
  cudnn_library_path
  if run_step carried_binaries 15 bash scripts/gpu_bin_check.sh gpu_bin; then
    BIN=gpu_bin; BF16_BIN=gpu_bin
    grep -q '^cudnn: [0-9]' gpu_bin/BUILD_INFO 2>/dev/null && CUDNN_BIN=1
    [ "$PLAN" = 1 ] || return
  fi
  # the bf16 programs built with cuDNN cannot load it here: the set built without it
  if [ "$PLAN" = 1 ]; then
    plan cond carried_binaries_nocudnn 15 "GPU_BIN_BF16=nocudnn gpu_bin_check.sh (only when carried_binaries failed)"
  elif [ -d gpu_bin/nocudnn ] && run_step carried_binaries_nocudnn 15 env GPU_BIN_BF16=nocudnn bash scripts/gpu_bin_check.sh gpu_bin; then
    BIN=gpu_bin; BF16_BIN=gpu_bin/nocudnn
    say "cuDNN: the bf16 programs built with it cannot run here: gpu_bin/nocudnn's, --attention cudnn steps skip"
    return
  fi
  # only when the carried binaries cannot run here: build them (NCCL or MPI missing: without them)
  if [ "$PLAN" = 1 ]; then
    plan cond build_here 300 "make -j$JOBS gpu-bin, retried with MPI=0 NCCL=0 (only when carried_binaries failed)"
    return
  fi
  BIN=gpu_bin; BF16_BIN=gpu_bin
  run_step build_here 300 make -j"$JOBS" gpu-bin CUDA_ARCH="$ARCH" || \
    run_step build_here_no_mpi 300 make -j"$JOBS" gpu-bin CUDA_ARCH="$ARCH" MPI=0 NCCL=0
  grep -q '^cudnn: [0-9]' gpu_bin/BUILD_INFO 2>/dev/null && CUDNN_BIN=1
}
b() { case $1 in *_fp32) echo "$BIN/$1$SFX" ;; *) echo "$BF16_BIN/$1$SFX" ;; esac; }   # the path of a program

env_step() {
  if [ "$CPU" = 1 ]; then
    GPU_NAME="none: on the CPU ($(nproc) cores), numbers are CPU numbers"
    run_step env 15 "$PY" -c "import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda)"
  else
    run_step env 15 bash -c "nvidia-smi; nvcc --version | tail -n 2; command -v mpirun; command -v compute-sanitizer; \
      $PY -c \"import torch; print('torch', torch.__version__, 'cuda', torch.version.cuda, torch.cuda.get_device_name(0))\""
    [ "$PLAN" = 1 ] || GPU_NAME=$(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -n 1)
  fi
  [ "$PLAN" = 1 ] || say "device: ${GPU_NAME:-unknown}"
}

# synthetic shards: the same files for train_llama and PyTorch; uint32 above 65536 ids
SYN_LLAMA=$SCRATCH/data/syn_v${LLAMA_V}.bin
SYN_32K=$SCRATCH/data/syn_v32000.bin
data_step() {
  local ids=$LLAMA_V n=600000
  if [ "$CPU" = 1 ]; then n=40000; fi
  run_step synthetic_data 10 bash -c "$PY dev/test/write_toy_shard.py $SYN_LLAMA $n 7 $ids && $PY dev/test/write_toy_shard.py $SYN_32K $n 8 32000"
  [ "$PLAN" = 1 ] && { plan provides "$SYN_LLAMA" 0; plan provides "$SYN_32K" 0; }
  return 0
}

# ---------------------------------------------------------------- the summary, after every row
write_summary() {
  [ "$PLAN" = 1 ] && return 0
  local commit header
  # the device tool copies the working tree, perhaps without .git: then the commit the
  # carried binaries were built from (gpu_bin/BUILD_INFO)
  commit=$(git rev-parse --short HEAD 2>/dev/null || sed -n 's/^commit: //p' gpu_bin/BUILD_INFO 2>/dev/null)
  commit=${commit:-unknown}
  header="device: ${GPU_NAME:-unknown}; commit: $commit; binaries: $BIN; $(grep -m1 '^torch ' "$SCRATCH/logs/env.log" 2>/dev/null | cut -d' ' -f1-4); $(date -u '+%Y-%m-%d %H:%M UTC'); call $CUR used $(( SECONDS - T0 ))s of ${BUDGET}s"
  timeout 30 "$PY" scripts/gpu_summary.py "$STEPS" "$ROWS" "$EXTRA" "$SUMMARY" "$BENCH" "$PEAK" "$header" >> "$LOG" 2>&1 || {
    say "summary builder failed; raw results follow"
    { echo "# gpu_check call $CUR (raw: the summary builder failed)"; echo; echo "$header"; echo
      cat "$STEPS"; echo; cat "$ROWS"; echo; cat "$EXTRA"; } > "$SUMMARY"
  }
}

# ---------------------------------------------------------------- benchmarks
# bench_ours NAME MODEL B T MAXSEC DATA [flags]: train_llama, 12 steps (profile of step 12)
bench_ours() {
  local name=$1 model=$2 bb=$3 t=$4 max=$5 data=$6 rc=0; shift 6
  local rd=$SCRATCH/bench_$name
  rm -rf "$rd"
  [ "$PLAN" = 1 ] && plan needs "$data" 0 && plan bench "bench_${name}_ours" 0 "$model B=$bb T=$t $*"
  run_step "bench_${name}_ours" "$max" "$(b train_llama)" --model "$model" --batch "$bb" --seq "$t" --steps 12 \
    --val-every 0 --sample-every 0 --train-data "$data" --run-dir "$rd" --profile-step 12 "$@" || rc=$?
  add_row "$model B=$bb T=$t" "$model" "$t" "train_llama $*" "$(status_of $rc)" ours "$rd/metrics.jsonl" "$(basename "$data")"
  if [ "$PLAN" != 1 ] && [ -f "$SCRATCH/logs/bench_${name}_ours.log" ]; then
    { echo; echo "### profile of one step: $model B=$bb T=$t, train_llama $*"; echo; echo '```'
      sed -n '/^profile of step/,/^step /p' "$SCRATCH/logs/bench_${name}_ours.log"; echo '```'; } >> "$EXTRA"
  fi
}
# The PyTorch rows. Each runs in the same call as ours' row of its config, right after it, so
# that a ratio never spans two machines. SDPA names PyTorch's attention kernel (auto: its own
# choice); the peer's summary records which one ran.
# peer_step STEP MAXSEC SDPA COMMAND...: one peer run; the step's status on stdout. A named
# backend is a CUDA kernel (a SKIP on the CPU); a peer that exits 3 found it unable to run
# this attention, a SKIP with the peer's reason.
peer_step() {
  local step=$1 max=$2 sdpa=$3 rc=0; shift 3
  if [ "$sdpa" != auto ] && [ "$CPU" = 1 ]; then skip "$step" "on the CPU (flash and cudnn are CUDA kernels)" >&2; echo SKIP; return; fi
  run_step "$step" "$max" "$@" --sdpa-backend "$sdpa" >&2 || rc=$?
  if (( rc == 3 )) && [ "$PLAN" != 1 ]; then
    sed -i '$d' "$STEPS"
    record "$step" SKIP 0 "$(grep -m1 -- '--sdpa-backend' "$SCRATCH/logs/$step.log" | cut -c1-200)"
    echo SKIP; return
  fi
  status_of $rc
}

# bench_torch NAME MODEL B T COMPILE MAXSEC DATA [SDPA]: scripts/pytorch_llama.py on ours' batches
bench_torch() {
  local name=$1 model=$2 bb=$3 t=$4 comp=$5 max=$6 data=$7 sdpa=${8:-auto} mode=eager
  (( comp )) && mode=compile
  local step=bench_${name}_torch_$mode; [ "$sdpa" = auto ] || step=${step}_$sdpa
  local o=$SCRATCH/$step.jsonl st
  [ "$PLAN" = 1 ] && plan needs "$data" 0 && plan bench "$step" 0 "$model B=$bb T=$t sdpa $sdpa"
  st=$(peer_step "$step" "$max" "$sdpa" "$PY" scripts/pytorch_llama.py --model "$model" --batch "$bb" --seq "$t" --steps 15 \
    --bench --bench-warmup 5 --compile "$comp" --device "$DEVICE" --train-data "$data" --peak-flops "$PEAK" --print-every 5 --out "$o")
  add_row "$model B=$bb T=$t" "$model" "$t" "pytorch $mode, sdpa $sdpa" "$st" torch "$o" "$(basename "$data")"
}

# fastest_compile NAME MAXSEC RUN...: after the eager rows with auto, flash and cudnn and the
# compiled one with auto, torch.compile again with the fastest eager backend when it is not
# the one auto ran (RUN... runs the peer: bench_torch or bench_dit_torch with their leading
# arguments, less COMPILE, MAXSEC and the rest)
fastest_compile() {
  local name=$1 max=$2 fast; shift 2
  if [ "$PLAN" = 1 ]; then
    plan cond "bench_${name}_torch_compile_FASTEST" "$max" "torch.compile with the fastest eager SDPA backend, only when auto ran another"
    return 0
  fi
  [ "$CPU" = 1 ] && return 0
  local e=$SCRATCH/bench_${name}_torch_eager
  fast=$("$PY" scripts/gpu_summary.py --fastest-sdpa "$SCRATCH/bench_${name}_torch_compile.jsonl" "$e.jsonl" "${e}_flash.jsonl" \
    "${e}_cudnn.jsonl" 2>> "$LOG")
  [ -n "$fast" ] && "$@" "$fast"
  return 0
}

# test_ref NAME BINARY REF [flags]: one test program against one reference
test_ref() {
  local name=$1 bin=$2 ref=$3; shift 3
  if [ "$PLAN" = 1 ] || [[ -f $ref ]]; then run_step "$name" "${REF_LIMIT:-15}" "$bin" --ref "$ref" "$@"
  else record "$name" FAIL 0 "reference $ref missing (its step failed?)"; fi
}

# The fresh references of the tensor-core attention: head dims 64 and 128 (where it passed on
# an H200), which no committed reference has; causal with GQA and a T that is not a multiple
# of the tiles (test_llama), non-causal (test_dit); and dit-XL's 72 (test_dit), which it
# runs zero-padded to 80 and no GPU has run yet. Written in parallel, float64 on the CPU.
fresh_refs() {
  local f=$SCRATCH/fresh
  run_step fresh_refs_hd64_hd128 30 bash -c "
    $PY dev/ref/reference_llama.py --quiet --out $f/hd64_gqa.lref --V 211 --D 256 --L 2 --H 4 --KV 2 --F 320 \
      --max-seq-len 160 --B 2 --T 150 --n-steps 2 --tied 0 --seed 21 & p1=\$!
    $PY dev/ref/reference_llama.py --quiet --out $f/hd128.lref --V 173 --D 256 --L 2 --H 2 --KV 2 --F 320 \
      --max-seq-len 200 --B 1 --T 197 --n-steps 2 --tied 1 --seed 22 & p2=\$!
    $PY dev/ref/reference_dit.py --quiet --out $f/dit_hd64.dref --C 1 --Fr 4 --Hi 16 --Wi 16 --pt 1 --ph 2 --pw 2 \
      --D 128 --L 2 --H 2 --FF 256 --NC 3 --B 2 --n-steps 2 --seed 23 & p3=\$!
    $PY dev/ref/reference_llama.py --quiet --out $f/cp_hd64.lref --V 101 --D 256 --L 2 --H 4 --KV 2 --F 256 \
      --max-seq-len 128 --B 1 --T 128 --n-steps 2 --tied 0 --seed 24 & p4=\$!
    $PY dev/ref/reference_dit.py --quiet --out $f/dit_hd72.dref --C 1 --Fr 4 --Hi 16 --Wi 16 --pt 1 --ph 2 --pw 2 \
      --D 144 --L 2 --H 2 --FF 288 --NC 3 --B 2 --n-steps 2 --seed 25 & p5=\$!
    wait \$p1 && wait \$p2 && wait \$p3 && wait \$p4 && wait \$p5"
}

# tests of one attention kernel on the fresh references (the CPU build has only its own kernel)
attention_tests() {
  local att=$1 f=$SCRATCH/fresh
  if [ "$CPU" = 1 ]; then  # the CPU build has one attention: test it once
    [ "$att" = tc ] && test_ref "test_llama_hd64_gqa" "$(b test_llama)" "$f/hd64_gqa.lref"
    [ "$att" = tc ] && test_ref "test_dit_hd64" "$(b test_dit)" "$f/dit_hd64.dref"
    return 0
  fi
  # cuDNN builds each graph (heuristics, perhaps a runtime compile) at its first call: more time
  local REF_LIMIT=15; [ "$att" = cudnn ] && REF_LIMIT=25
  if [ "$att" = cudnn ] && [ "$PLAN" != 1 ] && [ "$CUDNN_BIN" != 1 ]; then
    skip test_attention_cudnn "the bf16 programs here have no cuDNN ($BF16_BIN; gpu_bin/BUILD_INFO: $(sed -n 's/^cudnn: //p' gpu_bin/BUILD_INFO 2>/dev/null))"
    return 0
  fi
  test_ref "test_llama_hd64_gqa_attention_$att" "$(b test_llama)" "$f/hd64_gqa.lref" --attention "$att"
  test_ref "test_llama_hd128_attention_$att" "$(b test_llama)" "$f/hd128.lref" --attention "$att"
  test_ref "test_dit_hd64_attention_$att" "$(b test_dit)" "$f/dit_hd64.dref" --attention "$att"
  if [ "$att" = cudnn ]; then
    # the default backward too (not reproducible, the same tolerances), and which cuDNN was loaded
    test_ref test_llama_hd64_gqa_attention_cudnn_nondeterministic "$(b test_llama)" "$f/hd64_gqa.lref" \
      --attention cudnn --cudnn-deterministic 0
    [ "$PLAN" = 1 ] || say "cuDNN loaded: $(grep -m1 -o 'cuDNN [0-9.]* loaded (built with [0-9.]*)' \
      "$SCRATCH/logs/test_llama_hd64_gqa_attention_cudnn.log" 2>/dev/null || echo 'not reported (see the step logs)')"
  fi
}

# ---------------------------------------------------------------- call 1: the headline first
call_1() {
  setup_call 1
  env_step
  resolve_binaries
  data_step
  fresh_refs
  attention_tests tc
  # the headline: llama3-1B at T=2048 on the tensor cores, beside torch.compile, same batches
  local att=(--attention tc); [ "$CPU" = 1 ] && att=()
  bench_ours head "${HEAD[@]}" 60 "$SYN_LLAMA" "${att[@]}"
  write_summary
  bench_torch head "${HEAD[@]}" 1 120 "$SYN_LLAMA"
  write_summary
  [ "$PLAN" = 1 ] && plan headline "llama3-1B tok/s and MFU: ours (--attention tc) beside torch.compile" 0
  # first after the headline: the tensor-core attention at every head dim it is to be judged
  # at next (64 and 128, where it passed on the H200, and dit-XL's 72, where no GPU has run
  # it): the ladder's version 6 against the CPU twin, then its TFLOP/s at llama3-1B's and
  # dit-XL's shapes (the predictions in dev/cuda/attention.cu), and test_dit at hd 72 on tc
  if [ "$CPU" = 1 ]; then skip ladder_attention_v6_hd64_72_128 "on the CPU (ladders need a GPU)"
  else run_step ladder_attention_v6_hd64_72_128 45 env ATTENTION_LADDER_HDS=64,72,128 dev/cuda/build/bf16/attention 6; fi
  test_ref test_dit_hd72_tc "$(b test_dit)" "$SCRATCH/fresh/dit_hd72.dref" "${att[@]}"
  # then the two attentions that have never run on a GPU, each checked before its llama3-1B row:
  # tc2 (the ladder's versions 7, its one-pass backward, and 8, its forward, against the CPU
  # twin and timed at the same head dims; the tests; test_dit at hd 72), then cuDNN's
  if [ "$CPU" = 1 ]; then skip ladder_attention_v7_v8_hd64_72_128 "on the CPU (ladders need a GPU)"
  else run_step ladder_attention_v7_v8_hd64_72_128 60 bash -c "ATTENTION_LADDER_HDS=64,72,128 dev/cuda/build/bf16/attention 7 \
    && ATTENTION_LADDER_HDS=64,72,128 dev/cuda/build/bf16/attention 8"; fi
  attention_tests tc2
  [ "$CPU" = 1 ] || test_ref test_dit_hd72_tc2 "$(b test_dit)" "$SCRATCH/fresh/dit_hd72.dref" --attention tc2
  [ "$CPU" = 1 ] || { bench_ours head_tc2 "${HEAD[@]}" 60 "$SYN_LLAMA" --attention tc2; write_summary; }
  attention_tests cudnn
  if [ "$CPU" != 1 ] && { [ "$PLAN" = 1 ] || [ "$CUDNN_BIN" = 1 ]; }; then
    bench_ours head_cudnn "${HEAD[@]}" 60 "$SYN_LLAMA" --attention cudnn; write_summary
    # cuDNN's default backward (not reproducible run to run): what the deterministic one costs
    bench_ours head_cudnn_nondet "${HEAD[@]}" 60 "$SYN_LLAMA" --attention cudnn --cudnn-deterministic 0; write_summary
  fi
  # the quick correctness steps before the slower benchmarks: the fp32 kernels
  attention_tests fp32
  # --attention auto on a device: its fastest candidate at hd 64 causal (cudnn where the binaries
  # have it, else tc2), and tc where --fit-reserve leaves that plan no room (the runner's step down)
  if [ "$CPU" != 1 ]; then
    local want=tc2; [ "$CUDNN_BIN" = 1 ] && want=cudnn
    local a="--model tiny --V $LLAMA_V --D 128 --L 2 --H 2 --KV 1 --F 256 --batch 2 --seq 64 --steps 2 --val-every 0 \
--sample-every 0 --train-data $SYN_LLAMA --attention auto"
    run_step attention_auto_on_device 40 bash -c "set -e; $(b train_llama) $a --run-dir $SCRATCH/auto_fits > $SCRATCH/auto_fits.log 2>&1; \
$(b train_llama) $a --fit-reserve 1000000 --run-dir $SCRATCH/auto_down > $SCRATCH/auto_down.log 2>&1; \
grep -A2 '^attention:' $SCRATCH/auto_fits.log $SCRATCH/auto_down.log; \
grep -q '^attention: $want (--attention auto)' $SCRATCH/auto_fits.log; grep -q '^attention: tc (--attention auto)' $SCRATCH/auto_down.log"
  fi
  # every memory flag on each tensor-core attention, in both trainers, and the optimizer on the host
  if [ "$CPU" != 1 ]; then
    local a atts=(tc tc2); { [ "$PLAN" = 1 ] || [ "$CUDNN_BIN" = 1 ]; } && atts+=(cudnn)
    for a in "${atts[@]}"; do
      test_ref "test_llama_hd64_${a}_memory_flags" "$(b test_llama)" "$SCRATCH/fresh/hd64_gqa.lref" --attention "$a" \
        --ffn-chunks 3 --ce-chunks 4 --offload-act -1 --recompute 2
      test_ref "test_dit_hd64_${a}_memory_flags" "$(b test_dit)" "$SCRATCH/fresh/dit_hd64.dref" --attention "$a" \
        --ffn-chunks 2 --offload-act -1 --recompute 2
    done
    test_ref test_llama_hd64_tc_offload_optim "$(b test_llama)" "$SCRATCH/fresh/hd64_gqa.lref" --attention tc --offload-optim 1
  fi
  bench_torch head "${HEAD[@]}" 0 60 "$SYN_LLAMA"
  write_summary
  bench_ours small "${SMALL[@]}" 30 "$SYN_32K" "${att[@]}"
  bench_torch small "${SMALL[@]}" 1 75 "$SYN_32K"
  bench_torch small "${SMALL[@]}" 0 30 "$SYN_32K"
  write_summary
  # PyTorch's attention by name: flash and cuDNN each, eager, beside auto (what auto ran is in its row)
  local be
  for be in flash cudnn; do
    bench_torch head "${HEAD[@]}" 0 45 "$SYN_LLAMA" "$be"
    bench_torch small "${SMALL[@]}" 0 30 "$SYN_32K" "$be"
  done
  write_summary
  fastest_compile head 120 bench_torch head "${HEAD[@]}" 1 120 "$SYN_LLAMA"
  fastest_compile small 75 bench_torch small "${SMALL[@]}" 1 75 "$SYN_32K"
  write_summary
  # the headline again on the fp32 attention: the profile that says what tc gains
  [ "$CPU" = 1 ] || { bench_ours head_fp32attn "${HEAD[@]}" 40 "$SYN_LLAMA" --attention fp32; write_summary; }
}

# ---------------------------------------------------------------- call 2: sanitizers, DiT, the rest
call_2() {
  setup_call 2
  env_step
  resolve_binaries
  data_step
  # torch.compile's caches for the DiT peers filled in the background while the correctness
  # steps below run (their timing does not matter); the compiled rows then read them
  local model
  for model in "${DIT_MODELS[@]}"; do
    warm_compile "${model//-/_}" "$PY" scripts/pytorch_dit.py --model "$model" "${DIT_CLIP[@]}" --steps 2 --bench --bench-warmup 1 \
      --compile 1 --device "$DEVICE" --peak-flops "$PEAK" --out "$SCRATCH/warm_${model//-/_}.jsonl" --sdpa-backend auto
  done
  fresh_refs
  # every committed reference in both builds (one step per program; it stops at the first failure)
  local progs=(test_llama test_dit); [ "$CPU" = 1 ] || progs=(test_llama test_llama_fp32 test_dit test_dit_fp32)
  local p
  for p in "${progs[@]}"; do
    local ext=lref; [[ $p == test_dit* ]] && ext=dref
    run_step "all_refs_$p" 20 bash -c "for f in dev/ref/*.$ext; do echo \"== \$f\"; $(b "$p") --ref \$f || exit 1; done"
  done
  # the FP32 build on the fresh references with every memory flag
  if [ "$CPU" != 1 ]; then
    test_ref test_llama_fp32_hd64_memory_flags "$(b test_llama_fp32)" "$SCRATCH/fresh/hd64_gqa.lref" \
      --ffn-chunks 3 --ce-chunks 4 --offload-act -1 --recompute 2
    test_ref test_dit_fp32_hd64_memory_flags "$(b test_dit_fp32)" "$SCRATCH/fresh/dit_hd64.dref" \
      --ffn-chunks 2 --offload-act -1 --recompute 2
  fi
  # bit-exact resume in each build, plain and with the memory flags; the bf16 build at head
  # dim 64 on the tensor-core attention (the tiny model's head dim 16 runs only fp32)
  local rbins=(train_llama); [ "$CPU" = 1 ] || rbins=(train_llama train_llama_fp32)
  local bin fl
  for bin in "${rbins[@]}"; do
    for fl in plain flags; do
      local extra=(); [ $fl = flags ] && extra=(--ffn-chunks 2 --ce-chunks 3 --offload-act -1 --recompute 1)
      [ "$CPU" != 1 ] && [ $bin = train_llama ] && extra+=(--D 128 --H 2 --KV 1 --attention tc)
      run_step "resume_${bin}_$fl" 25 env PYTHON="$PY" bash dev/test/check_resume.sh "$(b "$bin")" "$SCRATCH/resume_${bin}_$fl" "${extra[@]}"
    done
  done
  # 2 ranks on the one GPU through --comm mpi (NCCL refuses two ranks on one device)
  if [ "$CPU" = 1 ]; then skip comm_mpi_2ranks "on the CPU (make test runs every layout under mpirun)"
  elif ! command -v mpirun > /dev/null 2>&1 && [ "$PLAN" != 1 ]; then skip comm_mpi_2ranks "mpirun not found on this machine"
  elif [[ ! -x $BIN/mpi/test_llama ]] && [ "$PLAN" != 1 ]; then skip comm_mpi_2ranks "no MPI build ($BIN/mpi)"
  else
    local mp=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -np 2)
    local r=dev/ref/gqa_h4kv2_tied.lref
    run_step mpi2_test_llama_zero_shard 30 "${mp[@]}" "$BIN/mpi/test_llama" --comm mpi --ref "$r" --zero 1 --shard-vocab 1 \
      --ffn-chunks 2 --ce-chunks 3 --offload-act -1
    local mode
    for mode in allreduce reducescatter; do
      run_step "mpi2_test_llama_tp2_$mode" 30 "${mp[@]}" "$BIN/mpi/test_llama" --comm mpi --ref "$r" --tp 2 --tp-mode "$mode" \
        --shard-vocab 1 --ffn-chunks 2 --ce-chunks 3 --recompute 1
    done
    # context parallelism (llmc/parallel/context_parallel.h): ring and Ulysses, on the tensor cores at hd 64 (T 128: 4 ring
    # chunks of 32) and on the fp32 kernel; the staged all-to-all and send-recv of --comm mpi
    for mode in ring ulysses; do
      run_step "mpi2_test_llama_cp2_${mode}_tc" 30 "${mp[@]}" "$BIN/mpi/test_llama" --comm mpi --ref "$SCRATCH/fresh/cp_hd64.lref" \
        --cp 2 --cp-mode "$mode" --attention tc --ffn-chunks 2 --recompute 1
      run_step "mpi2_test_llama_cp2_${mode}_fp32" 30 "${mp[@]}" "$BIN/mpi/test_llama" --comm mpi --ref "$r" --cp 2 --cp-mode "$mode"
    done
    # the DiT's (non-causal, a plain split of each clip's tokens): on the tensor cores at hd 64 (256 tokens, 2 heads:
    # one a rank under Ulysses) and on the fp32 kernel (hd 12, and hd 8 with 1 channel)
    if [[ -x $BIN/mpi/test_dit ]] || [ "$PLAN" = 1 ]; then
      for mode in ring ulysses; do
        run_step "mpi2_test_dit_cp2_${mode}_tc" 30 "${mp[@]}" "$BIN/mpi/test_dit" --comm mpi --ref "$SCRATCH/fresh/dit_hd64.dref" \
          --cp 2 --cp-mode "$mode" --attention tc --ffn-chunks 2 --recompute 1
      done
      run_step mpi2_test_dit_cp2_ring_fp32 30 "${mp[@]}" "$BIN/mpi/test_dit" --comm mpi --ref dev/ref/dit_hd12_clip.dref --cp 2 --cp-mode ring
      run_step mpi2_test_dit_cp2_ulysses_fp32 30 "${mp[@]}" "$BIN/mpi/test_dit" --comm mpi --ref dev/ref/dit_nc1_hd8.dref --cp 2 --cp-mode ulysses
    else skip mpi2_test_dit_cp2 "no MPI build of test_dit ($BIN/mpi)"; fi
  fi
  # compute-sanitizer on the tensor-core kernels (hd 64, every memory flag: offload's three
  # streams); racecheck instruments only our attention kernels, which keeps it inside its limit
  local san
  san=$(command -v compute-sanitizer || ls /usr/local/cuda/bin/compute-sanitizer 2>/dev/null)
  local sref=$SCRATCH/fresh/hd64_gqa.lref flags=(--attention tc --ffn-chunks 2 --ce-chunks 3 --offload-act -1 --recompute 1)
  if [ "$CPU" = 1 ]; then skip sanitizers "on the CPU (compute-sanitizer needs a GPU)"
  elif [ -z "$san" ] && [ "$PLAN" != 1 ]; then skip sanitizers "compute-sanitizer not found"
  else
    san=${san:-compute-sanitizer}
    sanitize memcheck 60 "$san" --tool memcheck --error-exitcode 3 "$(b test_llama)" --ref "$sref" "${flags[@]}"
    # racecheck on the attention ladder's version 4 (llmc/kernels/attention_tc.cuh, validation shapes
    # only): under racecheck cuBLASLt's Hopper GEMMs failed to launch in test_llama ("failed to
    # handle a hardware exception", H200, 2026-11-26), and the ladder has no cuBLASLt
    sanitize racecheck 90 env LADDER_QUICK=1 "$san" --tool racecheck --error-exitcode 3 dev/cuda/build/bf16/attention 4
    sanitize synccheck 45 "$san" --tool synccheck --error-exitcode 3 "$(b test_llama)" --ref "$sref" "${flags[@]}"
  fi
  wait_compile
  # the DiT benchmark: train_dit against scripts/pytorch_dit.py, same model and clips, eager and
  # compiled with SDPA auto
  bench_dit
  # the attention ladder: every version against the CPU twin at every head dim, TFLOP/s of each;
  # then racecheck on tc2 (the ladder's versions 8, its forward, and 7, its backward)
  if [ "$CPU" = 1 ]; then skip ladder_attention "on the CPU (ladders need a GPU)"
  else run_step ladder_attention 60 bash scripts/gpu_ladder.sh attention; fi
  if [ "$CPU" != 1 ] && { [ -n "$san" ] || [ "$PLAN" = 1 ]; }; then
    sanitize racecheck_tc2_forward 60 env LADDER_QUICK=1 "$san" --tool racecheck --error-exitcode 3 dev/cuda/build/bf16/attention 8
    sanitize racecheck_tc2_backward 60 env LADDER_QUICK=1 "$san" --tool racecheck --error-exitcode 3 dev/cuda/build/bf16/attention 7
  fi
  bench_dit_by_name
  if [ "$CPU" = 1 ]; then skip ladders_rest "on the CPU"
  else run_step ladders_rest 90 bash scripts/gpu_ladder.sh all-but-attention; fi
  write_summary
  bench_dit_fastest
}

# warm_compile NAME COMMAND...: COMMAND (a short compiled peer run) in the background, to fill
# torch.compile's on-disk caches (inductor's FX graphs and AOTAutograd's, Triton's kernels) for
# the timed compiled row of the same config; wait_compile waits for every one started. A warm-up
# that fails costs nothing but its time: the timed row then compiles from scratch.
WARM_PIDS=()
warm_compile() {
  local name=$1; shift
  if [ "$PLAN" = 1 ]; then plan step "warm_compile_$name" 0 "in the background: $*"; return 0; fi
  [ "$CPU" = 1 ] && return 0
  ran_before "bench_${name}_torch_compile" && return 0
  ( t1=$SECONDS; rc=0; timeout -k 10 240 "$@" > "$SCRATCH/logs/warm_compile_$name.log" 2>&1 || rc=$?
    echo "warm_compile_$name: exit $rc after $(( SECONDS - t1 ))s" >> "$SCRATCH/logs/warm_compile_$name.log" ) &
  WARM_PIDS+=($!)
  say "torch.compile caches for $name: warming in the background"
}
wait_compile() {
  if [ "$PLAN" = 1 ]; then plan step wait_compile 60 "until the background warm-ups end (each limited to 240 s)"; return 0; fi
  (( ${#WARM_PIDS[@]} )) || return 0
  local t1=$SECONDS p f
  for p in "${WARM_PIDS[@]}"; do wait "$p"; done
  WARM_PIDS=()
  for f in "$SCRATCH"/logs/warm_compile_*.log; do
    { echo "==== $(basename "$f" .log) (background)"; tail -n 20 "$f"; echo; } >> "$LOG"
    say "$(tail -n 1 "$f")"
  done
  say "waited $(( SECONDS - t1 ))s for the warm-ups"
}

# sanitize TOOL MAXSEC COMMAND...: one compute-sanitizer step; a runtime that refuses the
# device (the H200 kind's gVisor answers "Device not supported") is a SKIP with that reason
sanitize() {
  local tool=$1 max=$2; shift 2
  run_step "sanitizer_$tool" "$max" "$@" && return 0
  [ "$PLAN" = 1 ] && return 0
  if grep -qi 'device not supported\|not supported on this platform' "$SCRATCH/logs/sanitizer_$tool.log"; then
    sed -i '$d' "$STEPS"
    record "sanitizer_$tool" SKIP 0 "compute-sanitizer refused the device (gVisor?): run call 2 on the nvidia-h100-x1 kind"
  fi
}

bench_dit() {
  local model
  for model in "${DIT_MODELS[@]}"; do bench_dit_model "$model"; done
}
# the DiT peers eager with SDPA flash and cudnn by name (auto's rows say which one it ran)
bench_dit_by_name() {
  local model be
  for model in "${DIT_MODELS[@]}"; do
    for be in flash cudnn; do bench_dit_torch "${model//-/_}" "--model $model ${DIT_CLIP[*]}" 0 "$be"; done
  done
  write_summary
}

# torch.compile with the fastest eager SDPA backend, where auto ran another: last in call 2,
# after the ladders, since the eager rows already name PyTorch's fastest attention
bench_dit_fastest() {
  local model
  for model in "${DIT_MODELS[@]}"; do
    fastest_compile "${model//-/_}" "${DIT_LIMITS[2]}" bench_dit_torch "${model//-/_}" "--model $model ${DIT_CLIP[*]}" 1
  done
  write_summary
}

# bench_dit_model MODEL: train_dit, then the peer beside it: eager and torch.compile with SDPA
# auto (bench_dit runs the eager flash and cudnn rows after both models)
bench_dit_model() {
  local model=$1 name=${1//-/_}
  local cfg=(--model "$model" "${DIT_CLIP[@]}")
  # ours on each tensor-core attention (the CPU build has one attention): tc, its second design
  # tc2, and cuDNN's where the binaries have it
  if [ "$CPU" = 1 ]; then bench_dit_ours "$name" ""
  else
    bench_dit_ours "$name" tc
    bench_dit_ours "${name}_tc2" tc2
    if [ "$PLAN" = 1 ] || [ "$CUDNN_BIN" = 1 ]; then
      bench_dit_ours "${name}_cudnn" cudnn
      bench_dit_ours "${name}_cudnn_nondet" cudnn --cudnn-deterministic 0
    fi
  fi
  bench_dit_torch "$name" "${cfg[*]}" 0 auto
  bench_dit_torch "$name" "${cfg[*]}" 1 auto
  write_summary
}

# bench_dit_ours NAME ATTENTION [FLAGS...]: train_dit on the model's clips (cfg of bench_dit_model),
# --attention ATTENTION unless empty, and FLAGS
bench_dit_ours() {
  local name=$1 att=() rc=0 rd=$SCRATCH/bench_$1
  [ -n "$2" ] && att=(--attention "$2")
  att+=("${@:3}")
  rm -rf "$rd"
  [ "$PLAN" = 1 ] && plan bench "bench_${name}_ours" 0 "${cfg[*]} ${att[*]} (generated clips)"
  run_step "bench_${name}_ours" "${DIT_LIMITS[0]}" "$(b train_dit)" "${cfg[@]}" "${att[@]}" --steps 12 --val-every 0 \
    --sample-every 0 --run-dir "$rd" --profile-step 12 || rc=$?
  add_row "${cfg[*]}" dit 0 "train_dit ${att[*]}" "$(status_of $rc)" dit_ours "$rd/metrics.jsonl" "generated clips"
  if [ "$PLAN" != 1 ] && [ -f "$SCRATCH/logs/bench_${name}_ours.log" ]; then
    { echo; echo "### profile of one step: train_dit ${cfg[*]} ${att[*]}"; echo; echo '```'
      sed -n '/^profile of step/,/^step /p' "$SCRATCH/logs/bench_${name}_ours.log"; echo '```'; } >> "$EXTRA"
  fi
}

# bench_dit_torch NAME "CONFIG FLAGS" COMPILE SDPA: scripts/pytorch_dit.py on train_dit's clips and draws
bench_dit_torch() {
  local name=$1 comp=$3 sdpa=$4 mode=eager lim=${DIT_LIMITS[1]} st
  local cfg; read -r -a cfg <<< "$2"
  if (( comp )); then mode=compile; lim=${DIT_LIMITS[2]}; fi
  local step=bench_${name}_torch_$mode; [ "$sdpa" = auto ] || step=${step}_$sdpa
  local o=$SCRATCH/$step.jsonl
  [ "$PLAN" = 1 ] && plan bench "$step" 0 "$2 sdpa $sdpa (generated clips)"
  st=$(peer_step "$step" "$lim" "$sdpa" "$PY" scripts/pytorch_dit.py "${cfg[@]}" --steps 12 --bench --bench-warmup 4 \
    --compile "$comp" --device "$DEVICE" --peak-flops "$PEAK" --out "$o")
  add_row "$2" dit 0 "pytorch $mode, sdpa $sdpa" "$st" dit_torch "$o" "generated clips"
}

# ---------------------------------------------------------------- call 3: curves, sweep
call_3() {
  setup_call 3
  env_step
  resolve_binaries
  data_step
  local model=${CURVE[0]} bb=${CURVE[1]} t=${CURVE[2]} steps=${CURVE[3]} every=${CURVE[4]}
  out "loss_$model.png"; out "ours_$model.jsonl"; out "torch_$model.jsonl"
  # the loss curves: TinyStories when carried, else the synthetic shard (then a flat curve:
  # the comparison of the two trainers still holds, the learning does not show)
  local train=$SYN_32K val=$SYN_32K dname="synthetic tokens (no TinyStories carried)"
  if [ -n "${GPU_CHECK_DATA:-}" ]; then train=$GPU_CHECK_DATA; val=$GPU_CHECK_DATA; dname=$GPU_CHECK_DATA
  elif [ "$PLAN" != 1 ] && compgen -G "data/tinystories/tinystories_train_*.bin" > /dev/null; then
    train="data/tinystories/tinystories_train_*.bin"; val="data/tinystories/tinystories_val_*.bin"; dname="TinyStories (carried data/tinystories)"
  fi
  [ "$PLAN" = 1 ] && plan needs "$train" 0
  local rd=$SCRATCH/curve_$model rc=0
  rm -rf "$rd"
  [ "$PLAN" = 1 ] && plan bench curve_ours 0 "$model B=$bb T=$t, $steps steps"
  run_step curve_ours 90 "$(b train_llama)" --model "$model" --batch "$bb" --seq "$t" --steps "$steps" --val-every "$every" \
    --sample-every 0 --train-data "$train" --val-data "$val" --run-dir "$rd" --save-init 1 "${HP[@]}" || rc=$?
  add_row "$model B=$bb T=$t, $steps steps" "$model" "$t" train_llama "$(status_of $rc)" ours "$rd/metrics.jsonl" "$dname"
  [ "$PLAN" = 1 ] || { [[ -f $rd/metrics.jsonl ]] && cp "$rd/metrics.jsonl" "$OUT/ours_$model.jsonl"; }
  rc=0
  [ "$PLAN" = 1 ] && plan bench curve_torch 0 "$model from ours' initial checkpoint"
  run_step curve_torch 90 "$PY" scripts/pytorch_llama.py --init-from "$rd/ckpt_000000.bin" --steps "$steps" --train-data "$train" \
    "${HP[@]}" --device "$DEVICE" --compile 0 --print-every "$every" --peak-flops "$PEAK" --out "$OUT/torch_$model.jsonl" || rc=$?
  add_row "$model B=$bb T=$t, $steps steps" "$model" "$t" "pytorch eager" "$(status_of $rc)" torch "$OUT/torch_$model.jsonl" "$dname"
  if run_step plot_loss 20 "$PY" scripts/plot_loss.py "$OUT/ours_$model.jsonl" "$OUT/torch_$model.jsonl" \
       --labels train_llama pytorch --title "$model, B=$bb T=$t, $dname" --out "$OUT/loss_$model.png" && [ "$PLAN" != 1 ]; then
    { echo; echo "### loss overlay ($model, $dname)"; echo; grep -h '^max_abs_gap' "$SCRATCH/logs/plot_loss.log"; } >> "$EXTRA"
  fi
  write_summary
  # the memory sweep per flag set, the largest-batch searches last (they take longest)
  if [ "${GPU_CHECK_SWEEP:-1}" = 0 ]; then skip sweep "GPU_CHECK_SWEEP=0"; write_summary; return; fi
  sweep_run "${SWEEP[3]}" "${SWEEP[4]}" "${SWEEP[5]}" 0 80
  sweep_run "${SWEEP[0]}" "${SWEEP[1]}" "${SWEEP[2]}" 0 60
  sweep_run "${SWEEP[0]}" "${SWEEP[1]}" "${SWEEP[2]}" 1 70
  sweep_run "${SWEEP[3]}" "${SWEEP[4]}" "${SWEEP[5]}" 1 90
  write_summary
  # the DiT's largest micro-batch at 16K tokens, ours (the first B whose run fails to
  # allocate ends the doubling) and PyTorch's (scripts/pytorch_dit.py --find-max-batch)
  if [ "$CPU" = 1 ]; then skip dit_largest_batch "on the CPU (no device memory to fill)"
  else
    run_step dit_largest_batch_ours 90 bash -c "best=0; for bb in 1 2 3 4 6 8 12 16 24 32; do \
      rm -rf $SCRATCH/dit_max_\$bb; $(b train_dit) ${DIT_BENCH[*]:0:8} --batch \$bb --steps 2 --val-every 0 --sample-every 0 --run-dir $SCRATCH/dit_max_\$bb \
      > /dev/null 2>&1 || break; best=\$bb; done; echo \"largest batch that ran: \$best\"; [ \$best -gt 0 ]"
    run_step dit_largest_batch_torch 90 "$PY" scripts/pytorch_dit.py "${DIT_BENCH[@]:0:8}" --find-max-batch --max-batch-limit 64 \
      --device "$DEVICE"
    { echo; echo "### DiT largest micro-batch (${DIT_BENCH[*]:0:8})"; echo
      grep -h 'largest batch' "$SCRATCH/logs/dit_largest_batch_ours.log" 2>/dev/null | sed 's/^/- train_dit: /'
      tail -n 2 "$SCRATCH/logs/dit_largest_batch_torch.log" 2>/dev/null | sed 's/^/- pytorch: /'; } >> "$EXTRA"
    write_summary
  fi
}

# sweep_run MODEL T B FIND MAXSEC: scripts/sweep_memory.py; its table goes into the summary,
# its PNG into $OUT (one per model: the largest-batch run overwrites the plain one's)
sweep_run() {
  local sm=$1 st=$2 sb=$3 find=$4 lim=$5
  local data=$SYN_LLAMA; [ "$sm" = stories110M ] && data=$SYN_32K
  local pre=$SCRATCH/sweep_${sm}_find$find
  out "sweep_$sm.png"
  [ "$PLAN" = 1 ] && plan needs "$data" 0
  local extra=("${SWEEP_ONLY[@]}"); [ "$find" = 1 ] && extra=(--find-max-batch 1 --max-batch-limit "$MAXB" --only "baseline,smallest: ffn 4 + ce 8 + recompute 2")
  if run_step "sweep_${sm}_find$find" "$lim" "$PY" scripts/sweep_memory.py --binary "$(b train_llama)" --model "$sm" --seq "$st" \
       --batch "$sb" --steps 4 --train-data "$data" --out "$pre" "${extra[@]}" && [ "$PLAN" != 1 ]; then
    { echo; echo "### memory sweep: $sm T=$st B=$sb$([ "$find" = 1 ] && echo ', largest batch')"; echo; cat "$pre.md"; } >> "$EXTRA"
    [[ -f $pre.png ]] && cp "$pre.png" "$OUT/sweep_$sm.png"
    cat "$pre.jsonl" >> "$LOG" 2>/dev/null
  fi
}

# ---------------------------------------------------------------- run
if [ "$CALL" = plan ]; then
  : > "$PLAN_TSV"
  call_1; call_2; call_3
  "$PY" dev/test/check_gpu_plan.py "$PLAN_TSV"
  exit $?
fi
"call_$CALL"
if [ "$CPU" = 1 ]; then check_out_files; write_summary; fi
say "call $CALL done in $(( SECONDS - T0 ))s; log $LOG, summary $SUMMARY"
echo
cat "$SUMMARY"
# every step must pass; on the CPU the steps skipped by design ("on the CPU") are allowed
if awk -F'\t' '$2 != "PASS" && !($2 == "SKIP" && $4 ~ /on the CPU/) { bad = 1 } END { exit !bad }' "$STEPS"; then exit 1; fi
exit 0
