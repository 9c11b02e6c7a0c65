#!/usr/bin/env bash
# Makes sure the C build's optional libraries are installed, so that make builds the
# multi-process CPU trainers (Open MPI: openmpi-bin, libopenmpi-dev) with the CPU matrix
# products on oneDNN's dnnl_sgemm (libdnnl-dev: it detects the processor itself and runs on
# the trainer's OpenMP threads; chosen by measurement, docs/results/cpu_blas_choice.md).
# Where libdnnl-dev cannot be installed it installs the OpenMP build of OpenBLAS
# (libopenblas-openmp-dev), the Makefile's fallback. Debian's packages through apt-get;
# idempotent and quick when already there. make test and the main jobs (make tinystories,
# dit, compare, sweep) call it first; an install's time is printed apart, so that it is not
# mistaken for the job's. Where apt-get is missing it says what is missing and what that
# costs: one-process trainers without Open MPI, the blocked-loop matmul without a BLAS.
set -euo pipefail
have_mpi() { command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; }
have_dnnl() { [ -e /usr/include/oneapi/dnnl/dnnl.h ] && ls /usr/lib/*/libdnnl.so >/dev/null 2>&1; }
have_openblas() { ls /usr/lib/*/openblas-openmp/pkgconfig/openblas.pc >/dev/null 2>&1; }
if have_mpi && have_dnnl; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  apt() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$@" >&2; }
  echo "ensure_build_deps: installing openmpi-bin libopenmpi-dev libdnnl-dev (apt-get)" >&2
  t0=$(date +%s)
  $SUDO apt-get update -q >&2 || true
  have_mpi || apt openmpi-bin libopenmpi-dev
  if ! have_dnnl && ! apt libdnnl-dev; then
    echo "ensure_build_deps: libdnnl-dev could not be installed; the CPU build falls back to OpenBLAS" >&2
    have_openblas || apt libopenblas-openmp-dev
  fi
  echo "ensure_build_deps: installed in $(( $(date +%s) - t0 )) s (package install, not part of the job's time)" >&2
else
  have_dnnl || have_openblas || echo "ensure_build_deps: no oneDNN, no OpenBLAS and no apt-get: the CPU matrix products" \
    "use the blocked loops of llmc/cpu/matmul.h, about 2-4x slower (the README's times assume a BLAS); install libdnnl-dev" >&2
  have_mpi || echo "ensure_build_deps: no Open MPI and no apt-get: one-process trainers only (no mpirun runs);" \
    "install openmpi-bin libopenmpi-dev" >&2
fi
