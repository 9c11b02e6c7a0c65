#!/usr/bin/env bash
# The BLAS candidates for the CPU build, compared in one run (dev/bench/blas_compare.c;
# the report: docs/results/cpu_blas_choice.md).
#
#   dev/bench/bench_blas.sh [--mkl] [--rounds R] [--out FILE.md] [--step | --step-only] [--rt]
#
# Installs what is missing (idempotent, quick when present): Debian's OpenBLAS (OpenMP
# build, what the Makefile linked before), BLIS and oneDNN with apt-get; PyPI's
# scipy-openblas32 with pip into build/blas_cands/pypi (no system Python touched); with
# --mkl, PyPI's mkl wheel unpacked into build/blas_cands/mkl (a 221 MB download, 655 MB
# unpacked). Then builds build/bench/blas_compare and runs every candidate found, in
# interleaved rounds, on 2 threads (all cores here) and 1 thread. Nothing here sets the
# processor type of any library: each one detects it by itself. With --step, then the
# training step itself with each library (dev/bench/bench_blas_step.py: stories15M,
# stories260K, dit-tiny; written to FILE_step.md). With --rt the measuring processes run
# under SCHED_RR (chrt -r 10, root) with a pause between them: on a machine that other
# sessions load, a 2-thread OpenMP program otherwise waits for time slices, and its time
# says more about the other processes than about the library (docs/results/cpu_blas_choice.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
MKL=0; ROUNDS=5; OUT=""; STEP=0; COMPARE=1; RT=""
while [ $# -gt 0 ]; do
  case "$1" in
    --mkl) MKL=1 ;;
    --rounds) ROUNDS="$2"; shift ;;
    --out) OUT="$2"; shift ;;
    --step) STEP=1 ;;
    --step-only) STEP=1; COMPARE=0 ;;
    --rt) RT="chrt -r 10" ;;
    *) echo "usage: dev/bench/bench_blas.sh [--mkl] [--rounds R] [--out FILE.md] [--step | --step-only] [--rt]" >&2; exit 2 ;;
  esac
  shift
done
ARCH=$(gcc -print-multiarch 2>/dev/null || echo x86_64-linux-gnu)
L=/usr/lib/$ARCH
SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"

# Debian's packages
need=()
[ -e $L/openblas-openmp/libopenblas.so.0 ] || need+=(libopenblas-openmp-dev)
[ -e $L/blis-openmp/libblis.so.4 ] || need+=(libblis-openmp-dev)
[ -e $L/libdnnl.so.2 ] || need+=(libdnnl-dev)
if [ ${#need[@]} -gt 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "bench_blas: apt-get install ${need[*]}" >&2
  $SUDO apt-get update -q >&2 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "${need[@]}" >&2
fi

# PyPI's wheels, into build/ (a pip of any Python: the wheels hold C libraries)
PIP=""
for py in python3 /usr/bin/python3; do
  if "$py" -m pip --version >/dev/null 2>&1; then PIP="$py -m pip"; break; fi
done
SOBL=build/blas_cands/pypi/scipy_openblas32/lib/libscipy_openblas.so
if [ ! -e $SOBL ] && [ -n "$PIP" ]; then
  echo "bench_blas: pip install scipy-openblas32 into build/blas_cands/pypi" >&2
  $PIP install -q --disable-pip-version-check --target build/blas_cands/pypi scipy-openblas32 >&2 || true
fi
MKLRT=build/blas_cands/mkl/lib/libmkl_rt.so.3
if [ $MKL = 1 ] && [ ! -e $MKLRT ] && [ -n "$PIP" ]; then
  echo "bench_blas: pip download mkl, unpacked into build/blas_cands/mkl" >&2
  rm -rf build/blas_cands/mkl_dl build/blas_cands/mkl && mkdir -p build/blas_cands/mkl_dl build/blas_cands/mkl
  $PIP download -q --disable-pip-version-check --no-deps -d build/blas_cands/mkl_dl mkl >&2
  (cd build/blas_cands/mkl && python3 -m zipfile -e ../mkl_dl/mkl-*.whl . && mv mkl-*.data/data/lib lib)
  rm -rf build/blas_cands/mkl_dl
fi

mkdir -p build/bench
g++ -O3 -march=native -fopenmp -std=c++17 -DLLMC_CPU -Wall -Wextra -Wno-unused-function -I. -x c++ \
    dev/bench/blas_compare.c -o build/bench/blas_compare -ldl -lm

cands=()
[ -e $L/openblas-openmp/libopenblas.so.0 ] && cands+=("debian-openblas@openblas=$L/openblas-openmp/libopenblas.so.0")
[ -e $SOBL ] && cands+=("scipy-openblas32@scipy-openblas=$PWD/$SOBL")
[ -e $L/blis-openmp/libblis.so.4 ] && cands+=("debian-blis@blis=$L/blis-openmp/libblis.so.4")
[ -e $L/libdnnl.so.2 ] && cands+=("debian-onednn@dnnl=$L/libdnnl.so.2")
[ -e $MKLRT ] && cands+=("pypi-mkl@mkl=$PWD/$MKLRT")
# libmkl_rt finds its other libraries on the loader's path
export LD_LIBRARY_PATH="$PWD/build/blas_cands/mkl/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"

[ $COMPARE = 1 ] && {
  echo "Machine: $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores (nproc),"\
       "$(grep -o -m1 -w -E 'avx512f' /proc/cpuinfo >/dev/null && echo AVX-512 || echo 'AVX2, no AVX-512');"\
       "$(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git rev-parse --short HEAD 2>/dev/null || echo ?)."
  echo
  echo "Command: \`dev/bench/bench_blas.sh$([ $MKL = 1 ] && echo ' --mkl') --rounds $ROUNDS${RT:+ --rt}\` ="\
       "\`${RT:+$RT }build/bench/blas_compare$([ -n "$RT" ] && echo ' --pause 3') --rounds $ROUNDS --jsonl ... ${cands[*]}\`"
  echo
  echo "Installed sizes (dpkg Installed-Size, KiB): $(dpkg-query -W -f='${Package} ${Installed-Size}; ' \
       libopenblas0-openmp libopenblas-openmp-dev libblis4-openmp libblis-openmp-dev libdnnl2 libdnnl-dev 2>/dev/null)"\
       "scipy-openblas32 (pip): $(du -sh build/blas_cands/pypi 2>/dev/null | cut -f1);"\
       "mkl (pip wheel unpacked): $(du -sh build/blas_cands/mkl 2>/dev/null | cut -f1)"
  echo
  $RT build/bench/blas_compare $([ -n "$RT" ] && echo --pause 3) --rounds "$ROUNDS" --jsonl "$(dirname "${OUT:-build/bench/blas_compare.md}")/$(basename "${OUT:-build/bench/blas_compare.md}" .md).jsonl" "${cands[@]}"
} | tee "${OUT:-build/bench/blas_compare.md}"
true

if [ $STEP = 1 ]; then
  # the same libraries inside the trainers (MKL left out: 655 MB, and slower than the rest here)
  steps=()
  [ -e $L/openblas-openmp/libopenblas.so.0 ] && steps+=("debian-openblas=-DUSE_BLAS -I/usr/include/$ARCH/openblas-openmp;-L$L/openblas-openmp -lopenblas -Wl,-rpath,$L/openblas-openmp")
  [ -e $SOBL ] && steps+=("scipy-openblas32=-DUSE_BLAS -DBLAS_SYMBOL_PREFIX=scipy_ -I$PWD/$(dirname $(dirname $SOBL))/include;$PWD/$SOBL -Wl,-rpath,$PWD/$(dirname $SOBL)")
  [ -e $L/blis-openmp/libblis.so.4 ] && steps+=("debian-blis=-DUSE_BLAS -DUSE_BLIS -isystem /usr/include/$ARCH/blis-openmp;-L$L/blis-openmp -lblis -Wl,-rpath,$L/blis-openmp")
  [ -e $L/libdnnl.so.2 ] && steps+=("debian-onednn=-DUSE_DNNL;-ldnnl")
  STEP_OUT="$(dirname "${OUT:-build/bench/blas_compare.md}")/$(basename "${OUT:-build/bench/blas_compare.md}" .md)_step.md"
  PY=$(command -v python3 || echo /usr/bin/python3)
  "$PY" dev/bench/bench_blas_step.py "$STEP_OUT" --rounds "$ROUNDS" ${RT:+--rt} "${steps[@]}"
fi
