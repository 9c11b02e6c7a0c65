#!/usr/bin/env bash
# Makes sure the C build's optional libraries are installed, so that make builds the
# multi-process CPU trainers (Open MPI: openmpi-bin, libopenmpi-dev) with the CPU matrix
# products on OpenBLAS (libopenblas-openmp-dev: the OpenMP build of OpenBLAS, which shares
# the trainer's OpenMP threads instead of competing with them). Debian's packages through
# apt-get; idempotent and quick when already there. make test and the main jobs (make
# tinystories, dit, compare, sweep) call it first; an install's time is printed apart, so
# that it is not mistaken for the job's. Where apt-get is missing it says what is missing
# and what that costs: the build then makes one-process trainers with the blocked-loop
# matmul, and the README's times (measured with OpenBLAS) do not hold.
set -euo pipefail
have_mpi() { command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; }
have_blas() { ls /usr/lib/*/openblas-openmp/pkgconfig/openblas.pc >/dev/null 2>&1; }
if have_mpi && have_blas; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  echo "ensure_build_deps: installing openmpi-bin libopenmpi-dev libopenblas-openmp-dev (apt-get)" >&2
  t0=$(date +%s)
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q >&2 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q openmpi-bin libopenmpi-dev libopenblas-openmp-dev >&2
  echo "ensure_build_deps: installed in $(( $(date +%s) - t0 )) s (package install, not part of the job's time)" >&2
else
  have_blas || echo "ensure_build_deps: no OpenBLAS and no apt-get: the CPU matrix products use the blocked loops of" \
    "llmc/cpu/matmul.h, several times slower (the README's times assume OpenBLAS); install libopenblas-openmp-dev" >&2
  have_mpi || echo "ensure_build_deps: no Open MPI and no apt-get: one-process trainers only (no mpirun runs);" \
    "install openmpi-bin libopenmpi-dev" >&2
fi
