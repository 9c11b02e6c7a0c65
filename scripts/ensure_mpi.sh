#!/usr/bin/env bash
# Makes sure Open MPI (mpirun, mpicxx and the headers) is installed, so that make builds
# the multi-process CPU trainers and make test can run them. Debian's openmpi-bin and
# libopenmpi-dev through apt-get; idempotent and quick when already there. Where apt-get
# is missing it only warns: the build then makes one-process trainers.
set -euo pipefail
if command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  echo "ensure_mpi: installing openmpi-bin libopenmpi-dev (apt-get)" >&2
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q >&2 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q openmpi-bin libopenmpi-dev >&2
else
  echo "ensure_mpi: no apt-get here; install Open MPI by hand for multi-process runs (one-process builds work without it)" >&2
fi
