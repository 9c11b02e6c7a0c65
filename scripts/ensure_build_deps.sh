#!/usr/bin/env bash
# Makes sure the C build's optional libraries are installed, so that make builds the
# multi-process CPU trainers (Open MPI: openmpi-bin, libopenmpi-dev) with the CPU matrix
# products on oneDNN's dnnl_sgemm (libdnnl-dev: it detects the processor itself and runs on
# the trainer's OpenMP threads; chosen by measurement, docs/results/cpu_blas_choice.md).
# Where libdnnl-dev cannot be installed it installs the OpenMP build of OpenBLAS
# (libopenblas-openmp-dev), the Makefile's fallback. Debian's packages through apt-get;
# idempotent and quick when already there. Where apt-get is missing it only warns: the
# build then makes one-process trainers with whichever BLAS is there, else the blocked loops.
set -euo pipefail
have_mpi() { command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; }
have_dnnl() { [ -e /usr/include/oneapi/dnnl/dnnl.h ] && ls /usr/lib/*/libdnnl.so >/dev/null 2>&1; }
have_openblas() { ls /usr/lib/*/openblas-openmp/pkgconfig/openblas.pc >/dev/null 2>&1; }
if have_mpi && have_dnnl; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  apt() { DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q "$@" >&2; }
  echo "ensure_build_deps: installing openmpi-bin libopenmpi-dev libdnnl-dev (apt-get)" >&2
  $SUDO apt-get update -q >&2 || true
  have_mpi || apt openmpi-bin libopenmpi-dev
  if ! have_dnnl && ! apt libdnnl-dev; then
    echo "ensure_build_deps: libdnnl-dev could not be installed; the CPU build falls back to OpenBLAS" >&2
    have_openblas || apt libopenblas-openmp-dev
  fi
else
  echo "ensure_build_deps: no apt-get here; install Open MPI and oneDNN (or OpenBLAS) by hand for multi-process runs and a fast CPU build" >&2
fi
