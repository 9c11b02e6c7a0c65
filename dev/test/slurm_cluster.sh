#!/usr/bin/env bash
# The SLURM scripts under a real scheduler (make test-full and CI run this through
# dev/test/run_tests.sh): a private one-node SLURM cluster started here, then
#   - scripts/train_llama.sbatch on 2 ranks of the CPU build (srun --mpi=pmix, Open MPI):
#     its run directory (checkpoints, metrics, a log that says world 2 = dp 2, 1 thread a rank);
#   - scripts/train_dit.sbatch at tp 2, against one process of the same run (1e-5);
#   - a missing binary: the job fails with a message naming it;
#   - a train_llama job requeued (scontrol requeue) once its first checkpoint is written and
#     started again: --resume auto continues it, and its metrics and final checkpoint are
#     bitwise those of the uninterrupted job;
#   - train_dit.sbatch given train_llama's RUN_DIR: refused, the llama run byte-identical;
#   - the same job sent SIGUSR1 (scancel --signal=USR1, what #SBATCH --signal sends before the time
#     limit), then SIGTERM (scancel --signal=TERM): a checkpoint of the stopped step, exit 75, the
#     job requeues itself (scripts/slurm_launch.sh) and resumes from that checkpoint, bitwise the
#     uninterrupted job;
#   - the cluster torn down: nothing it started left running, its directory gone, /etc/slurm,
#     /etc/munge and the system's slurm and munge directories untouched.
#
#   bash dev/test/slurm_cluster.sh [PYTHON]
#
# Needs root, the CPU trainers built with MPI (make train_llama_cpu train_dit_cpu) and Debian's
# slurmctld, slurmd, slurm-client and munge, which it installs with apt-get when missing (a line
# "SKIP ..." and exit 0 when they cannot be installed: nothing counts as failed). The cluster is
# private: its slurm.conf (SLURM_CONF), state, spool, logs, pid files, munge key and socket all
# live in one temporary directory, on two free ports that are not SLURM's defaults; munged,
# slurmctld and slurmd are started by hand (no systemd) and stopped by pid at exit. Debian's
# packages, when installed here, may start their own services on the defaults (where the
# init system lets them); this cluster does not use or touch them. About 30 s on 2 cores (and 5-10 s
# more when it installs the packages).
# Prints one line per check, "PASS name" or "FAIL name: why"; exit status non-zero when
# anything failed. SLURM_TEST_KEEP=1 keeps the directory (and says where) for debugging.
set -u
PY=${1:-python3}
cd "$(dirname "$0")/../.." || exit 1
T0=$(date +%s)
failed=0
pass() { echo "PASS $1${2:+: $2}"; }  # PASS name[: what it saw]
fail() { echo "FAIL $1${2:+: $2}"; failed=1; }
skip() { echo "SKIP slurm: $1"; exit 0; }
elapsed() { echo $(( $(date +%s) - T0 )); }
# wait_for SECONDS CMD...: CMD polled every 0.1 s until it succeeds; 1 when the time runs out
wait_for() {
  local end=$(( $(date +%s) + $1 )); shift
  until "$@"; do [ "$(date +%s)" -ge "$end" ] && return 1; sleep 0.1; done
}
tail_of() { tail -n "${2:-4}" "$1" 2>/dev/null | tr '\n' ' ' | cut -c1-400; }

# ---------------------------------------------------------------------------
# what the test needs
[ "$(id -u)" = 0 ] || skip "needs root (slurmd starts the jobs as their user); run make test-full as root, as CI does"
for b in train_llama_cpu train_dit_cpu; do
  [ -x "$b" ] || { fail "slurm_$b" "./$b is missing (make train_llama_cpu train_dit_cpu)"; exit 1; }
done
# a build without MPI would run 2 independent one-process trainers: say so rather than fail later
if ! ldd ./train_llama_cpu 2>/dev/null | grep -q libmpi; then
  fail slurm_mpi_build "train_llama_cpu is built without MPI (bash scripts/ensure_build_deps.sh, then rebuild)"; exit 1
fi
have_slurm() { local c; for c in slurmctld slurmd sbatch srun scontrol squeue scancel sinfo munged munge unmunge; do
  command -v "$c" >/dev/null 2>&1 || return 1; done; }
PKGS="slurmctld slurmd slurm-client munge slurm-wlm-basic-plugins libpmix2"  # basic-plugins: mpi_pmix.so; libpmix2: what it loads
if ! have_slurm; then
  command -v apt-get >/dev/null 2>&1 || skip "slurmctld, slurmd, slurm-client or munge missing and no apt-get to install them"
  echo "installing $PKGS (apt-get)"
  export DEBIAN_FRONTEND=noninteractive
  apt-get install -y -q --no-install-recommends $PKGS >/tmp/llmc_slurm_apt.$$.log 2>&1 ||
    { apt-get update -q >>/tmp/llmc_slurm_apt.$$.log 2>&1; apt-get install -y -q --no-install-recommends $PKGS >>/tmp/llmc_slurm_apt.$$.log 2>&1; }
  if ! have_slurm; then
    msg=$(tail_of /tmp/llmc_slurm_apt.$$.log 2); rm -f /tmp/llmc_slurm_apt.$$.log
    skip "apt-get could not install $PKGS: $msg"
  fi
  rm -f /tmp/llmc_slurm_apt.$$.log
fi

# the system's SLURM and munge directories, to show at the end that nothing here touched them
system_state() {
  ls -la --time-style=full-iso /etc/slurm /etc/slurm-llnl /etc/munge /run/munge /var/run/munge /var/spool/slurmd \
    /var/spool/slurmctld /var/spool/slurm /var/lib/slurm /var/log/slurm /var/log/munge /var/lib/munge 2>&1
}
SYSTEM_BEFORE=$(system_state)

# a job or sbatch of an outer allocation must not steer this cluster's
for v in $(env | sed -n 's/^\(\(SLURM\|SBATCH\|SALLOC\|SRUN\|PMIX\|PMI\)_[A-Za-z0-9_]*\)=.*/\1/p'); do unset "$v"; done

# ---------------------------------------------------------------------------
# the private cluster: everything under $D (short: the munge socket's path must fit 108 bytes)
D=$(mktemp -d /tmp/llmc_slurm.XXXXXX) || { fail slurm_tmpdir "mktemp failed"; exit 1; }
chmod 755 "$D"  # munged wants its socket's directories searchable by all
mkdir -p "$D/munge" "$D/state" "$D/spool" "$D/tmp" "$D/runs"
CONF=$D/slurm.conf
export SLURM_CONF=$CONF  # every slurm command here, the daemons and the jobs: how teardown finds what is ours
PIDS=()                  # munged, slurmctld, slurmd: stopped in reverse order
BG=()                    # background sbatch --wait
torn_down=0
# ours: a process whose environment holds this SLURM_CONF (the daemons, slurmstepd, the job scripts,
# the ranks, a client), other than this script
ours() {
  local p out=""
  for p in /proc/[0-9]*; do
    p=${p#/proc/}
    [ "$p" = "$$" ] && continue
    { tr '\0' '\n' < "/proc/$p/environ"; } 2>/dev/null | grep -qxF "SLURM_CONF=$CONF" && out="$out $p"
  done
  echo $out
}
stop_pid() {  # stop_pid PID: TERM, then KILL after 10 s
  local p=$1
  kill -0 "$p" 2>/dev/null || return 0
  kill -TERM "$p" 2>/dev/null
  wait_for 10 bash -c "! kill -0 $p 2>/dev/null" || kill -KILL "$p" 2>/dev/null
  wait "$p" 2>/dev/null
}
teardown() {
  [ "$torn_down" = 1 ] && return 0
  torn_down=1
  local ids i p
  if [ ${#PIDS[@]} -gt 0 ] && kill -0 "${PIDS[1]:-0}" 2>/dev/null; then
    ids=$(timeout 10 squeue -h -o %i 2>/dev/null)
    [ -n "$ids" ] && timeout 10 scancel $ids 2>/dev/null
    # the jobs gone and their steps ended (slurmstepd leaves a socket per step in the spool)
    wait_for 30 bash -c '[ -z "$(timeout 5 squeue -h -o %i 2>/dev/null)" ] && ! ls "$1"/spool/*_[0-9]* >/dev/null 2>&1' _ "$D"
  fi
  for p in "${BG[@]}"; do stop_pid "$p"; done
  for ((i = ${#PIDS[@]} - 1; i >= 0; i--)); do stop_pid "${PIDS[i]}"; done
  # whatever else of ours is left (a step whose daemon went first): killed by pid
  for p in $(ours); do kill -KILL "$p" 2>/dev/null; done
  if [ "${SLURM_TEST_KEEP:-0}" = 1 ]; then echo "slurm: kept $D"; else rm -rf "$D"; fi
}
trap teardown EXIT
trap 'exit 130' INT TERM

munge_works() { munge -S "$D/munge/munge.socket" -n 2>/dev/null | unmunge -S "$D/munge/munge.socket" >/dev/null 2>&1; }
node_idle() { [ "$(sinfo -h -n "$NODE" -o %T 2>/dev/null)" = idle ]; }
start_cluster() {
  dd if=/dev/urandom of="$D/munge/munge.key" bs=1024 count=1 2>/dev/null && chmod 400 "$D/munge/munge.key" || return 1
  # as root munged wants --force; -F: in the foreground, so that $! is its pid
  munged -F --force --socket="$D/munge/munge.socket" --key-file="$D/munge/munge.key" --pid-file="$D/munge/munged.pid" \
    --log-file="$D/munge/munged.log" --seed-file="$D/munge/munged.seed" >"$D/munge/munged.out" 2>&1 &
  PIDS+=($!)
  wait_for 10 munge_works || { echo "munged did not answer: $(tail_of "$D/munge/munged.out")"; return 1; }
  # two free ports, neither SLURM's default (6817, 6818), so that a system slurm would not clash
  local ports
  ports=$("$PY" - <<'PYEOF'
import random, socket
got = []
while len(got) < 2:
    p = random.randrange(20000, 30000)
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", p)); got.append(p)
    except OSError:
        pass
    finally:
        s.close()
print(*got)
PYEOF
) || return 1
  set -- $ports
  NODE=$(hostname -s)
  local cpus; cpus=$(nproc); [ "$cpus" -ge 2 ] || cpus=2  # -n 2 on one core: config_overrides keeps the node up
  cat > "$CONF" <<EOF
ClusterName=llmctest
SlurmctldHost=$NODE(127.0.0.1)
SlurmctldPort=$1
SlurmdPort=$2
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$D/munge/munge.socket
StateSaveLocation=$D/state
SlurmdSpoolDir=$D/spool
TmpFS=$D/tmp
SlurmctldPidFile=$D/slurmctld.pid
SlurmdPidFile=$D/slurmd.pid
SlurmctldLogFile=$D/slurmctld.log
SlurmdLogFile=$D/slurmd.log
SlurmdParameters=config_overrides
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
MpiDefault=pmix
SwitchType=switch/none
SchedulerType=sched/builtin
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
AccountingStorageType=accounting_storage/none
JobCompType=jobcomp/none
JobAcctGatherType=jobacct_gather/none
ReturnToService=2
MailProg=/bin/true
InactiveLimit=0
KillWait=5
# sbatch --wait polls every 2 s while MinJobAge allows it (a larger one: 2, 8, then 32 s)
MinJobAge=5
NodeName=$NODE NodeAddr=127.0.0.1 CPUs=$cpus State=UNKNOWN
PartitionName=llmctest Nodes=$NODE Default=YES MaxTime=INFINITE State=UP
EOF
  slurmctld -D -f "$CONF" >"$D/slurmctld.out" 2>&1 &
  PIDS+=($!)
  slurmd -D -f "$CONF" -N "$NODE" >"$D/slurmd.out" 2>&1 &
  PIDS+=($!)
  wait_for 30 node_idle || { echo "node $NODE not idle: $(sinfo 2>&1 | tail -n 1) | slurmctld: $(tail_of "$D/slurmctld.out" 2) | slurmd: $(tail_of "$D/slurmd.out" 2)"; return 1; }
}
# (not in a $(...) subshell: PIDS must reach teardown)
if start_cluster >"$D/start.msg" 2>&1; then pass cluster_up "node $NODE idle $(elapsed) s after the start"
else fail cluster_up "$(tail_of "$D/start.msg" 3)"; exit 1; fi
echo "slurm: $(sbatch --version), $(munged --version 2>&1 | head -n1), $(mpirun --version 2>&1 | head -n1)"
if srun --mpi=list 2>&1 | grep -qw pmix; then pass srun_mpi_list_has_pmix
else fail srun_mpi_list_has_pmix "srun --mpi=list: $(srun --mpi=list 2>&1 | tr '\n' ' ')"; exit 1; fi

# ---------------------------------------------------------------------------
# the jobs: 2 tasks of one CPU each on the one node, in place of the scripts' GPU defaults
# (--signal=USR1@5: the scripts' USR1@600 is longer than the jobs' 3 minutes, so SLURM would send
# it at once, at its next periodic check: the run stops with a checkpoint and requeues itself)
SB=(--nodes=1 -n 2 --ntasks-per-node=2 --cpus-per-task=1 --gpus-per-node=0 --time=3 --signal=USR1@5)
WAIT=150  # seconds any one sbatch --wait may take (the jobs take 1-10 s)
"$PY" dev/test/write_toy_shard.py "$D/train.bin" 20000 1 500 >/dev/null && "$PY" dev/test/write_toy_shard.py "$D/val.bin" 5000 2 500 >/dev/null
# 300 steps with a checkpoint every 20: the requeue below lands after the first of them, with
# nearly the whole run still to go however fast the machine is
LLAMA=(--model tiny --V 512 --batch 2 --seq 32 --total-batch 128 --steps 300 --warmup 5 --val-every 100 --val-batches 2
       --ckpt-every 20 --sample-every 0 --train-data "$D/train.bin" --val-data "$D/val.bin")
DIT=(--D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --batch 2 --steps 6 --warmup 1 --val-every 3
     --val-clips 8 --ckpt-every 3 --sample-every 0)
metric_steps() { "$PY" -c "import json,sys; print(len({json.loads(l)['step'] for l in open(sys.argv[1])}))" "$1" 2>/dev/null; }

# train_llama.sbatch on 2 ranks: the run directory's files, a log that says 2 DP ranks of one thread each
R=$D/runs/llama
TRAIN_LLAMA_BIN=./train_llama_cpu RUN_DIR=$R timeout -k 5 $WAIT sbatch --wait --job-name=llama_sbatch \
  --output="$D/llama.out" "${SB[@]}" scripts/train_llama.sbatch "${LLAMA[@]}" >"$D/llama.sbatch" 2>&1
rc=$?
if [ $rc = 0 ]; then pass train_llama_sbatch; else fail train_llama_sbatch "sbatch --wait exit $rc: $(tail_of "$D/llama.sbatch" 2) $(tail_of "$D/llama.out")"; fi
if [ -f "$R/ckpt_000300.bin" ] && [ "$(metric_steps "$R/metrics.jsonl")" = 300 ] &&
   grep -q "world 2 = dp 2 x tp 1" "$R/main.log" && grep -q "^threads: 1 (OpenMP)" "$R/main.log" &&
   grep -q "^train_llama on 1 nodes, 2 ranks" "$D/llama.out" && grep -q "^done:" "$R/main.log"; then
  pass train_llama_sbatch_run_dir
else fail train_llama_sbatch_run_dir "$(ls "$R" 2>&1 | tr '\n' ' ') | $(grep -m1 '^parallel' "$R/main.log" 2>&1) | $(tail_of "$D/llama.out" 2)"; fi

# train_dit.sbatch at tp 2: the run directory, and its losses those of one process (summation order: 1e-5)
R=$D/runs/dit
TRAIN_DIT_BIN=./train_dit_cpu RUN_DIR=$R timeout -k 5 $WAIT sbatch --wait --job-name=dit_sbatch \
  --output="$D/dit.out" "${SB[@]}" scripts/train_dit.sbatch "${DIT[@]}" --tp 2 >"$D/dit.sbatch" 2>&1
rc=$?
if [ $rc = 0 ]; then pass train_dit_sbatch; else fail train_dit_sbatch "sbatch --wait exit $rc: $(tail_of "$D/dit.sbatch" 2) $(tail_of "$D/dit.out")"; fi
if [ -f "$R/ckpt_000006.bin" ] && [ "$(metric_steps "$R/metrics.jsonl")" = 6 ] &&
   grep -q "world 2 = dp 1 x tp 2" "$R/main.log" && grep -q "^threads: 1 (OpenMP)" "$R/main.log" &&
   grep -q "^train_dit on 1 nodes, 2 ranks" "$D/dit.out"; then
  pass train_dit_sbatch_run_dir
else fail train_dit_sbatch_run_dir "$(ls "$R" 2>&1 | tr '\n' ' ') | $(grep -m1 '^parallel' "$R/main.log" 2>&1) | $(tail_of "$D/dit.out" 2)"; fi
if OMP_NUM_THREADS=1 ./train_dit_cpu "${DIT[@]}" --run-dir "$D/runs/dit_one" >"$D/dit_one.log" 2>&1 &&
   "$PY" dev/test/compare_metrics.py "$D/runs/dit_one/metrics.jsonl" "$R/metrics.jsonl" 1 1e-5 >"$D/dit.cmp" 2>&1; then
  pass train_dit_sbatch_tp2_equals_one_process
else fail train_dit_sbatch_tp2_equals_one_process "$(tail_of "$D/dit.cmp" 1) $(tail_of "$D/dit_one.log" 1)"; fi

# the two scripts sharing one RUN_DIR: train_dit.sbatch where train_llama's job ran is refused before
# anything is written (run.json names another program), and the train_llama run stays byte for byte
cp -r "$D/runs/llama" "$D/llama.before"
TRAIN_DIT_BIN=./train_dit_cpu RUN_DIR=$D/runs/llama timeout -k 5 $WAIT sbatch --wait --job-name=dit_in_llama_dir \
  --output="$D/shared.out" "${SB[@]}" scripts/train_dit.sbatch "${DIT[@]}" >"$D/shared.sbatch" 2>&1
rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "holds another run (its program differs)" "$D/shared.out" &&
   diff -r "$D/llama.before" "$D/runs/llama" >"$D/shared.diff" 2>&1; then pass sbatch_shared_run_dir_refused
else fail sbatch_shared_run_dir_refused "sbatch exit $rc: $(tail_of "$D/shared.out" 2) $(head -n 2 "$D/shared.diff")"; fi

# a binary that is not there: the job fails, its output names it
TRAIN_LLAMA_BIN=./no_such_trainer RUN_DIR=$D/runs/nobin timeout -k 5 $WAIT sbatch --wait --job-name=nobin \
  --output="$D/nobin.out" "${SB[@]}" scripts/train_llama.sbatch >"$D/nobin.sbatch" 2>&1
rc=$?
if [ $rc != 0 ] && [ $rc != 124 ] && grep -q "no_such_trainer is not an executable" "$D/nobin.out"; then pass sbatch_missing_binary_is_clear
else fail sbatch_missing_binary_is_clear "sbatch exit $rc: $(tail_of "$D/nobin.out" 2)"; fi

# ---------------------------------------------------------------------------
# requeue: the train_llama job above again, requeued once its first checkpoint is complete (the
# trainer writes it under a temporary name and renames it) while the job runs, then let start
# at once (a requeued job is held back two minutes); --resume auto must continue it, and the
# result must be bitwise that of the uninterrupted job
R=$D/runs/requeue
job_state() { squeue -h -j "$JID" -o %T 2>/dev/null; }
# a requeued job $JID started at once (a requeued job is held back two minutes): StartTime=now until it
# leaves PENDING (an update during the requeue's own completion can be overtaken)
start_now() {
  local i
  for i in $(seq 20); do
    scontrol update JobId="$JID" StartTime=now 2>/dev/null
    wait_for 3 bash -c '[ "$(squeue -h -j "$1" -o %T 2>/dev/null)" != PENDING ]' _ "$JID" && break
  done
  [ "$(job_state)" != PENDING ] || { echo "job $JID still PENDING: $(squeue -h -j "$JID" -o %r)"; return 1; }
}
requeue_job() {
  TRAIN_LLAMA_BIN=./train_llama_cpu RUN_DIR=$R timeout -k 5 $((2 * WAIT)) sbatch --wait --parsable --job-name=llama_requeue \
    --output="$D/requeue.out" "${SB[@]}" scripts/train_llama.sbatch "${LLAMA[@]}" >"$D/requeue.id" 2>"$D/requeue.sbatch" &
  SBPID=$!; BG+=("$SBPID")
  wait_for 30 test -s "$D/requeue.id" || { echo "no job id: $(tail_of "$D/requeue.sbatch")"; return 1; }
  JID=$(cut -d';' -f1 "$D/requeue.id" | head -n1)
  wait_for 120 test -f "$R/ckpt_000020.bin" || { echo "no first checkpoint in 120 s (job $(job_state)): $(tail_of "$D/requeue.out")"; return 1; }
  local st; st=$(job_state)
  [ "$st" = RUNNING ] || { echo "job $JID was $st, not RUNNING, when its first checkpoint was there: too fast to interrupt?"; return 1; }
  scontrol requeue "$JID" || { echo "scontrol requeue $JID failed"; return 1; }
  local ck=("$R"/ckpt_*.bin)
  echo "requeued job $JID at ${#ck[@]} checkpoint(s), $(grep -c '^step .*| loss' "$R/main.log") steps logged"
  wait_for 60 bash -c '[ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = PENDING ]' _ "$JID" ||
    { echo "job $JID not PENDING after the requeue: $(job_state)"; return 1; }
  start_now || return 1
  RESTARTS=$(scontrol show job "$JID" 2>/dev/null | grep -o 'Restarts=[0-9]*')
  wait "$SBPID"; local rc=$?
  [ $rc = 0 ] || { echo "sbatch --wait exit $rc: $(tail_of "$D/requeue.sbatch" 2) $(tail_of "$D/requeue.out")"; return 1; }
}
if requeue_job >"$D/requeue.msg" 2>&1; then pass requeue_job_completes "$(tail -n1 "$D/requeue.msg" | cut -c1-120), $RESTARTS"
else fail requeue_job_completes "$(tail_of "$D/requeue.msg" 3)"; fi
# the first run started fresh and never finished; the second resumed from a checkpoint before the end
resumed=$(sed -n 's/^resumed from .*ckpt_0*\([0-9][0-9]*\)\.bin at step \([0-9]*\)$/\2/p' "$R/main.log" 2>/dev/null)
if grep -q "starting fresh" "$R/main.log" 2>/dev/null && [ "$(echo "$resumed" | grep -c .)" = 1 ] && [ "$resumed" -ge 20 ] &&
   [ "$resumed" -lt 300 ] && [ "$(grep -c '^done:' "$R/main.log")" = 1 ] && grep -q "resumed from" "$D/requeue.out" &&
   grep -q "restart 1$" "$D/requeue.out"; then
  pass requeue_resumed "from the checkpoint of step $resumed"
else fail requeue_resumed "resumed at '${resumed//$'\n'/ }'; $(grep -E 'starting fresh|resumed from|^done:' "$R/main.log" 2>&1 | tr '\n' ' ' | cut -c1-300)"; fi
# steps before the resume were logged twice; each step's last line is the one compared
if "$PY" dev/test/compare_metrics.py "$D/runs/llama/metrics.jsonl" "$R/metrics.jsonl" 1 0 >"$D/requeue.cmp" 2>&1 &&
   cmp "$D/runs/llama/ckpt_000300.bin" "$R/ckpt_000300.bin" >>"$D/requeue.cmp" 2>&1; then
  pass requeue_equals_uninterrupted_bitwise
else fail requeue_equals_uninterrupted_bitwise "$(tail_of "$D/requeue.cmp" 2)"; fi

# ---------------------------------------------------------------------------
# a signal: scancel --signal=USR1 of the running job (what #SBATCH --signal=USR1@600 sends before
# the time limit), then the same with SIGTERM (what an operator's scancel --signal=TERM, or a node's
# shutdown, sends to the job's steps), once its first checkpoint is there: the ranks write the step's checkpoint and
# exit 75, scripts/slurm_launch.sh requeues the job, which resumes from that checkpoint; the
# result is bitwise that of the uninterrupted job
signal_job() {
  local sig=$1
  TRAIN_LLAMA_BIN=./train_llama_cpu RUN_DIR=$R timeout -k 5 $((2 * WAIT)) sbatch --wait --parsable --job-name=llama_signal_$sig \
    --output="$D/signal_$sig.out" "${SB[@]}" scripts/train_llama.sbatch "${LLAMA[@]}" >"$D/signal_$sig.id" 2>"$D/signal_$sig.sbatch" &
  SBPID=$!; BG+=("$SBPID")
  wait_for 30 test -s "$D/signal_$sig.id" || { echo "no job id: $(tail_of "$D/signal_$sig.sbatch")"; return 1; }
  JID=$(cut -d';' -f1 "$D/signal_$sig.id" | head -n1)
  wait_for 120 test -f "$R/ckpt_000020.bin" || { echo "no first checkpoint in 120 s (job $(job_state)): $(tail_of "$D/signal_$sig.out")"; return 1; }
  scancel --signal="$sig" "$JID" || { echo "scancel --signal=$sig $JID failed"; return 1; }
  # the job requeues itself (exit 75 -> scontrol requeue in slurm_launch.sh); then let it start at once
  wait_for 60 bash -c '[ "$(squeue -h -j "$1" -o %T 2>/dev/null)" = PENDING ]' _ "$JID" ||
    { echo "job $JID not PENDING after the signal: $(job_state) $(tail_of "$D/signal_$sig.out" 3)"; return 1; }
  # the stopped step's slurmstepd may still be tearing down its PMIx server when the job is back in
  # the queue (srun returned, the job requeued itself at once); a restart forced before it is gone
  # fails to bind the same socket (a real requeue waits its two minutes)
  wait_for 30 bash -c '! pgrep -f "slurmstepd: \[$1\.0\]" >/dev/null' _ "$JID" ||
    { echo "the stopped step of job $JID is still there after 30 s"; return 1; }
  start_now || return 1
  wait "$SBPID"; local rc=$?
  [ $rc = 0 ] || { echo "sbatch --wait exit $rc: $(tail_of "$D/signal_$sig.sbatch" 2) $(tail_of "$D/signal_$sig.out")"; return 1; }
}
for sig in USR1 TERM; do
  R=$D/runs/signal_$sig
  if signal_job "$sig" >"$D/signal_$sig.msg" 2>&1; then pass "signal_${sig}_job_requeued_and_completes"
  else fail "signal_${sig}_job_requeued_and_completes" "$(tail_of "$D/signal_$sig.msg" 3)"; fi
  stopped=$(sed -n "s/^stopped by SIG$sig.* after step \([0-9]*\) of .*/\1/p" "$R/main.log" 2>/dev/null | head -n1)
  resumed=$(sed -n 's/^resumed from .*ckpt_0*\([0-9][0-9]*\)\.bin at step \([0-9]*\)$/\2/p' "$R/main.log" 2>/dev/null)
  # (the job's output file is rewritten by the restart: its "restart 1" line is the requeue's trace)
  if [ -n "$stopped" ] && [ "$resumed" = "$stopped" ] && grep -q "restart 1$" "$D/signal_$sig.out" &&
     [ "$(grep -c '^done:' "$R/main.log")" = 1 ]; then
    pass "signal_${sig}_stop_checkpoint_resumed" "stopped after step $stopped, resumed from its checkpoint"
  else fail "signal_${sig}_stop_checkpoint_resumed" "stopped '$stopped', resumed '${resumed//$'\n'/ }'; $(grep -E 'stopped by|resumed from|^done:' "$R/main.log" 2>&1 | tr '\n' ' ' | cut -c1-300)"; fi
  if "$PY" dev/test/compare_metrics.py "$D/runs/llama/metrics.jsonl" "$R/metrics.jsonl" 1 0 >"$D/signal_$sig.cmp" 2>&1 &&
     cmp "$D/runs/llama/ckpt_000300.bin" "$R/ckpt_000300.bin" >>"$D/signal_$sig.cmp" 2>&1; then
    pass "signal_${sig}_equals_uninterrupted_bitwise"
  else fail "signal_${sig}_equals_uninterrupted_bitwise" "$(tail_of "$D/signal_$sig.cmp" 2)"; fi
done

# ---------------------------------------------------------------------------
# teardown: nothing of ours left running, the directory gone, the system's files as they were
teardown
left=$(ours)
if [ -z "$left" ] && { [ ! -e "$D" ] || [ "${SLURM_TEST_KEEP:-0}" = 1 ]; }; then pass cluster_torn_down
else fail cluster_torn_down "left running:$(for p in $left; do printf ' %s(%s)' "$p" "$(tr '\0' ' ' < /proc/$p/cmdline 2>/dev/null | cut -c1-40)"; done)"; fi
if [ "$(system_state)" = "$SYSTEM_BEFORE" ]; then pass system_slurm_munge_untouched
else fail system_slurm_munge_untouched "$(diff <(echo "$SYSTEM_BEFORE") <(system_state) | head -n 4 | tr '\n' ' ')"; fi
echo "slurm: $(elapsed) s"
exit $failed
