# shellcheck shell=bash
# The launch that scripts/train_llama.sbatch and scripts/train_dit.sbatch share: sourced by
# them (not run on its own) once they have set TRAINER (the program's name, for messages and the
# default run directory) and BIN (the binary), with the trainer's flags as "$@". Starts one rank
# per SLURM task through srun with the MPI's PMI support, in the run directory, with
# --resume auto, so that a requeued job continues from its newest complete checkpoint.
#
# Environment it reads (all optional):
#   RUN_DIR     the run directory (runs/$SLURM_JOB_NAME)
#   MPI_PLUGIN  srun --mpi=... (pmix: Open MPI is built with PMIx; `srun --mpi=list` shows the choice)
#   NCCL_*      passed to the ranks (srun exports the environment); NCCL_DEBUG defaults to WARN
RUN_DIR=${RUN_DIR:-runs/${SLURM_JOB_NAME:-$TRAINER}}
MPI_PLUGIN=${MPI_PLUGIN:-pmix}
if [ ! -x "$BIN" ]; then
  echo "$TRAINER: $BIN is not an executable (build it on the cluster first: make $TRAINER; or name the binary" \
       "in TRAIN_LLAMA_BIN / TRAIN_DIT_BIN)" >&2
  exit 1
fi
mkdir -p "$RUN_DIR"

# NCCL (the CUDA build; the CPU build ignores these): the interfaces and fabric of your cluster.
# These are starting points: NCCL_DEBUG=WARN prints why a communicator failed (INFO: which
# transports and rings it chose); set NCCL_SOCKET_IFNAME to the interface that connects the
# nodes (ip -br addr), and NCCL_IB_HCA on InfiniBand clusters when NCCL picks the wrong adapters.
# A hung or dead rank is the trainer's business, not NCCL's: it runs NCCL in non-blocking mode and
# ends the job when a collective does not complete within --comm-timeout seconds (600 here).
export NCCL_DEBUG=${NCCL_DEBUG:-WARN}
# export NCCL_SOCKET_IFNAME=ib0
# export NCCL_IB_HCA=mlx5
# OpenMP threads of each rank (the CPU build's matmuls and loops; the CUDA build's host code):
# the CPUs SLURM gave the task (--cpus-per-task), 8 when it says nothing
export OMP_NUM_THREADS=${SLURM_CPUS_PER_TASK:-8}

echo "$TRAINER on ${SLURM_JOB_NUM_NODES:-?} nodes, ${SLURM_NTASKS:-?} ranks" \
     "($(scontrol show hostnames "${SLURM_JOB_NODELIST:-}" 2>/dev/null | paste -sd, -)), OMP_NUM_THREADS=$OMP_NUM_THREADS," \
     "restart ${SLURM_RESTART_COUNT:-0}"
# --cpu-bind=cores: each rank on its own cores where the cluster binds tasks (task/affinity or
# task/cgroup; a cluster without task binding says so on stderr and runs unbound)
# Before the time limit SLURM sends SIGUSR1 to every rank (#SBATCH --signal=USR1@600 in the sbatch
# scripts; scancel --signal=USR1 or TERM does the same at any time): each rank finishes its step,
# they write that step's checkpoint and exit 75 (llmc/core/signals.h), and srun returns 75. The
# job is then requeued, and the requeued job's --resume auto continues from that checkpoint.
# (`|| rc=$?`: under set -e a bare failing srun would end this script before the check.)
rc=0
srun --mpi="$MPI_PLUGIN" --kill-on-bad-exit=1 --cpu-bind=cores \
  "$BIN" --run-dir "$RUN_DIR" --resume auto --comm-timeout 600 "$@" || rc=$?
if [ "$rc" -eq 75 ] && [ -n "${SLURM_JOB_ID:-}" ]; then
  echo "$TRAINER: stopped by a signal after writing a checkpoint (exit 75); requeueing job $SLURM_JOB_ID: it" \
       "continues from the checkpoint (--resume auto)"
  scontrol requeue "$SLURM_JOB_ID" || { echo "$TRAINER: scontrol requeue $SLURM_JOB_ID failed: resubmit the job;" \
                                               "--resume auto continues from $RUN_DIR" >&2; exit 75; }
fi
exit "$rc"
