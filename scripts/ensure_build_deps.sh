#!/usr/bin/env bash
# Makes sure the C build's optional libraries are installed, so that make builds the
# multi-process CPU trainers (Open MPI: openmpi-bin, libopenmpi-dev) with the CPU matrix
# products on OpenBLAS (libopenblas-openmp-dev: the OpenMP build of OpenBLAS, which shares
# the trainer's OpenMP threads instead of competing with them). Debian's packages through
# apt-get; idempotent and quick when already there. Where apt-get is missing it only
# warns: the build then makes one-process trainers with the blocked-loop matmul.
set -euo pipefail
have_mpi() { command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; }
have_blas() { ls /usr/lib/*/openblas-openmp/pkgconfig/openblas.pc >/dev/null 2>&1; }
if have_mpi && have_blas; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  echo "ensure_build_deps: installing openmpi-bin libopenmpi-dev libopenblas-openmp-dev (apt-get)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q >&2 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q openmpi-bin libopenmpi-dev libopenblas-openmp-dev >&2
else
  echo "ensure_build_deps: no apt-get here; install Open MPI and OpenBLAS by hand for multi-process runs and a fast CPU build" >&2
fi
