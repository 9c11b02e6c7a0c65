#!/usr/bin/env bash
# Makes sure the C build's optional libraries are installed, so that make builds the
# multi-process CPU trainers (Open MPI: openmpi-bin, libopenmpi-dev) with the CPU matrix
# products on oneDNN's dnnl_sgemm (libdnnl-dev: it detects the processor itself and runs on
# the trainer's OpenMP threads; chosen by measurement, docs/results/cpu_blas_choice.md).
# Where libdnnl-dev cannot be installed it installs the OpenMP build of OpenBLAS
# (libopenblas-openmp-dev), the Makefile's fallback. Debian's packages through apt-get;
# idempotent and quick when already there. make test and the main jobs (make tinystories,
# dit, compare, sweep) call it first; an install prints one line with its time, apart from
# the job's, and the path of its log (scripts/ensure_lib.sh: runs/install_logs/); a failed
# one prints the log's last lines and exits non-zero. Where apt-get is missing it says what
# is missing and what that costs: one-process trainers without Open MPI, the blocked-loop
# matmul without a BLAS.
set -euo pipefail
have_mpi() { command -v mpirun >/dev/null 2>&1 && command -v mpicxx >/dev/null 2>&1; }
have_dnnl() { [ -e /usr/include/oneapi/dnnl/dnnl.h ] && ls /usr/lib/*/libdnnl.so >/dev/null 2>&1; }
have_openblas() { ls /usr/lib/*/openblas-openmp/pkgconfig/openblas.pc >/dev/null 2>&1; }
if have_mpi && have_dnnl; then exit 0; fi
if command -v apt-get >/dev/null 2>&1; then
  # one line per install, apt-get's output in a log file (scripts/ensure_lib.sh)
  source "$(dirname "$0")/ensure_lib.sh"
  log=$(install_log_file ensure_build_deps)
  mpi=(); have_mpi || mpi=(openmpi-bin libopenmpi-dev)
  dnnl=(); have_dnnl || dnnl=(libdnnl-dev)
  if ! install_quiet ensure_build_deps "${mpi[*]}${mpi[*]:+${dnnl[*]:+ }}${dnnl[*]}" "apt-get, not part of the job's time" \
       "$log" apt_get_install "${mpi[@]}" "${dnnl[@]}"; then
    # apt-get installs all or nothing: when both were asked for, each alone. Open MPI is
    # needed (its failure ends the script); without oneDNN the OpenBLAS fallback
    if [ ${#mpi[@]} -gt 0 ] && { [ ${#dnnl[@]} = 0 ] ||
         ! install_quiet ensure_build_deps "${mpi[*]}" apt-get "$log" apt_get_install "${mpi[@]}"; }; then
      install_log_tail "$log"; exit 1
    fi
    if [ ${#dnnl[@]} -gt 0 ] && { [ ${#mpi[@]} = 0 ] ||
         ! install_quiet ensure_build_deps "${dnnl[*]}" apt-get "$log" apt_get_install "${dnnl[@]}"; }; then
      echo "ensure_build_deps: libdnnl-dev could not be installed; the CPU build falls back to OpenBLAS" >&2
      if ! have_openblas && ! install_quiet ensure_build_deps libopenblas-openmp-dev apt-get "$log" \
             apt_get_install libopenblas-openmp-dev; then
        install_log_tail "$log"; exit 1
      fi
    fi
  fi
else
  have_dnnl || have_openblas || echo "ensure_build_deps: no oneDNN, no OpenBLAS and no apt-get: the CPU matrix products" \
    "use the blocked loops of llmc/kernels/cpu/matmul.h, about 2-4x slower (the README's times assume a BLAS); install libdnnl-dev" >&2
  have_mpi || echo "ensure_build_deps: no Open MPI and no apt-get: one-process trainers only (no mpirun runs);" \
    "install openmpi-bin libopenmpi-dev" >&2
fi
