#!/usr/bin/env bash
# The dev/cuda kernel ladders' VALIDATION under the host emulator (no GPU). From anywhere:
#     bash dev/emu/run_ladders.sh          (dev/emu/run.sh runs it as its last stage)
# 1. transforms dev/cuda/*.cu and the llmc sources they include (transform.py --ladders)
#    into dev/emu/build/ladders/src; the ladders themselves are not changed;
# 2. builds every ladder with g++ against the emulator, in fp32 (-DENABLE_FP32) and bf16,
#    linked with the CPU reference (cpu_reference.cpp, -DLLMC_CPU, as dev/cuda/Makefile);
# 3. runs every version of every ladder with LADDER_QUICK=1 (the ladders' own switch:
#    validation only, no benchmarks, no multi-GB test), once per schedule (fwd, rev), each
#    version in a process of its own;
# 4. prints one line per ladder version and shape (ladder_report.py):
#       PASS ladder.bf16.attention.v3[B=1,T=70,H=2,KV=2,hd=64]
#       FAIL ladder.bf16.attention.v3[...]: [fwd schedule] forward out: max abs ..., worst err/tol ...
#    plus a fwd/rev bitwise comparison per version and a coverage line per ladder.
# The verdicts are the ladders' own checks (their CPU reference, their tolerances).
# The matmul ladder's versions 2 and 3 (cuBLASLt) run against the cuBLASLt MODEL of
# include/cublasLt.h (EMU_LT_MODE=1): it checks argument mapping, not cuBLASLt.
# Environment: EMU_SRC_DIR (llmc sources, default llmc), EMU_LADDER_DIR (default dev/cuda),
# EMU_LADDER_FILTER (only the ladders whose name contains it), CXX.
# Exit status: non-zero when anything failed. Outputs: dev/emu/build/ladders/out/.
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s.%N)
LLMC=${EMU_SRC_DIR:-llmc}
CUDA=${EMU_LADDER_DIR:-dev/cuda}
B=dev/emu/build/ladders
CXX=${CXX:-g++}
PY=$(command -v python3 || command -v python)
NJ=$(nproc 2>/dev/null || echo 2)
# a hang guard, per (ladder, version, schedule) run: the attention ladder's version 3 (WMMA,
# every validation shape it takes, hd up to 200) runs ~55 s alone and about twice that beside
# make test-full's other checks on 2 cores
TIMEOUT_S=${EMU_LADDER_TIMEOUT:-300}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
rm -rf "$B"
mkdir -p "$B/bin" "$B/out" "$B/log"

if "$PY" dev/emu/transform.py --ladders "$LLMC" "$CUDA" "$B/src" >"$B/kernels.txt" 2>"$B/log/transform.log"; then
  echo "PASS ladder.transform"
else
  echo "FAIL ladder.transform: $(tail -n 1 "$B/log/transform.log")"; exit 1
fi
LADDERS=$(awk '{print $1}' "$B/kernels.txt")
if [ -n "${EMU_LADDER_FILTER:-}" ]; then
  LADDERS=$(printf '%s\n' $LADDERS | grep -F -- "$EMU_LADDER_FILTER")
  grep -F -- "$EMU_LADDER_FILTER" "$B/kernels.txt" > "$B/kernels.sel"; mv "$B/kernels.sel" "$B/kernels.txt"
fi

# build: the CPU reference once, then every ladder in both precisions, in parallel
FLAGS="-std=c++17 -O1 -g0 -pthread -Idev/emu/include -Idev/emu -Wall -Wno-unused-function -Wno-unknown-pragmas -Wno-comment"
echo 'int main(){return 0;}' > "$B/probe.cpp"
"$CXX" -ftrivial-auto-var-init=pattern "$B/probe.cpp" -o "$B/probe" 2>/dev/null && FLAGS="$FLAGS -ftrivial-auto-var-init=pattern"
if ! "$CXX" -O2 -std=c++17 -DLLMC_CPU -fopenmp -c "$B/src/dev/cuda/cpu_reference.cpp" -o "$B/cpu_reference.o" \
     >"$B/log/build_cpu_reference.log" 2>&1; then
  echo "FAIL ladder.build_cpu_reference: $(grep -m1 error "$B/log/build_cpu_reference.log")"; exit 1
fi
export CXX FLAGS B
for p in fp32 bf16; do for l in $LADDERS; do echo "$p $l"; done; done |
  xargs -P "$NJ" -n 2 sh -c '
    d=""; [ "$0" = fp32 ] && d=-DENABLE_FP32
    if $CXX $FLAGS $d -x c++ "$B/src/dev/cuda/$1.cu" -x none "$B/cpu_reference.o" -fopenmp -o "$B/bin/$1.$0" \
         >"$B/log/build.$0.$1.log" 2>&1; then echo "PASS ladder.build.$0.$1"
    else echo "FAIL ladder.build.$0.$1: $CXX failed: $(grep -m1 -E "error" "$B/log/build.$0.$1.log")"; fi' > "$B/build.txt"
sort "$B/build.txt"
echo "ladders: transform and build took $(elapsed "$T0") s"

# run: every version of every ladder that built, under both schedules
for p in fp32 bf16; do
  for l in $LADDERS; do
    [ -x "$B/bin/$l.$p" ] || continue
    nv=$(sed -n 's/.*ladder_init([^,]*,[^,]*,[^,]*, *\([0-9][0-9]*\)).*/\1/p' "$CUDA/$l.cu" | head -n 1)
    [ -n "$nv" ] || { echo "FAIL ladder.$p.$l: cannot find the number of versions (ladder_init) in $CUDA/$l.cu"; continue; }
    for v in $(seq 1 "$nv"); do
      env=""; tag=""
      # versions 2 and 3 of matmul are cuBLASLt (3: with the algorithm cache and the residual product)
      if [ "$l" = matmul ] && [ "$v" -ge 2 ]; then env="EMU_LT_MODE=1"; tag=".cublaslt-model"; fi
      for s in fwd rev; do echo "$p $l $v $s ${env:-EMU_LT_MODE=0} $tag"; done
    done
  done
done > "$B/jobs.txt"
grep '^FAIL' "$B/jobs.txt" >/dev/null 2>&1 && grep '^FAIL' "$B/jobs.txt"
grep -v '^FAIL' "$B/jobs.txt" | while read -r p l v s e tag; do echo "$p $l $v $s $e ${tag:-.}"; done |
  TIMEOUT_S=$TIMEOUT_S xargs -P "$NJ" -L 1 sh -c '
    t=$5; [ "$t" = . ] && t=""
    o="$B/out/$0.$1.v$2$t.$3"
    env LADDER_QUICK=1 OMP_NUM_THREADS=1 EMU_SCHEDULE=$3 $4 timeout "$TIMEOUT_S" "$B/bin/$1.$0" "$2" >"$o.out" 2>"$o.err"
    echo $? > "$o.rc"'
"$PY" dev/emu/ladder_report.py "$B/out" "$B/kernels.txt" > "$B/report.txt"
cat "$B/report.txt"
np=$(cat "$B/build.txt" "$B/report.txt" | grep -c '^PASS '); np=$((np + 1))
nf=$(cat "$B/build.txt" "$B/report.txt" "$B/jobs.txt" | grep -c '^FAIL ')
echo "ladders: $np passed, $nf failed in $(elapsed "$T0") s (ladders: $CUDA, llmc: $LLMC)"
[ "$nf" -eq 0 ]
