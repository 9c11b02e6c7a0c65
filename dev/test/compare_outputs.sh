#!/usr/bin/env bash
# compare_outputs.sh: the safety net of a behaviour-preserving refactor of train_llama and
# train_dit. It proves that two revisions of the trainers write the same checkpoints, plans,
# samples and logs, byte for byte (logs up to the masks below), over a set of cases covering
# every flag and layout of both trainers (one process, dp, ZeRO-1, tp in both modes, cp in each
# mode, their products; resume, init-from, validation, sampling, plans at scale, --fit-memory;
# expected errors).
#
#   bash dev/test/compare_outputs.sh [--base REV] [--new REV | --new-tree] [--cases REGEX] [--keep DIR] [--list]
#
#   --base REV     the reference revision (default HEAD), built in a temporary `git worktree add --detach`
#   --new REV      the revision under test, built in a second temporary worktree
#   --new-tree     the working tree as it is, uncommitted changes included, built in place (the default):
#                  the tree of the repository this script is in (copy the two compare_outputs files into
#                  another worktree to test that one)
#   --cases REGEX  only the cases whose name matches (grep -E)
#   --keep DIR     keep the data, both sides' run directories and the build logs in DIR (new or empty)
#   --list         print the cases (name, kind, commands) and exit
#
# Prints one line per case, "PASS name" or "FAIL name: <file>: <first differing line, both sides>",
# then the times and "N passed, N failed"; the exit status is non-zero on any failure (and 2 when a
# side does not build). Without --keep the directories of failed cases are kept (the path is
# printed at the end), the rest is removed.
#
# How it runs. Each side's CPU trainers (make -j2 train_llama_cpu train_dit_cpu, with Open MPI and
# oneDNN as make test builds them: scripts/ensure_build_deps.sh of the base revision runs first)
# are built once, copied out of the tree (a tree edited during the run changes nothing), and the
# worktrees are removed at the end (a stale one left by a killed run, whose owner process is gone,
# is removed at the start; `git worktree prune` drops the registrations of deleted ones). The
# input data (token shards, a 512-piece toy tokenizer, an RGB uint8 clip file) is generated once
# by compare_outputs.py, not by either revision's scripts, and shared by both sides. Every case
# runs with each side's binaries, one at a time, in its own directory $WORK/runs/<side>/<case>,
# which is the commands' working directory: the run directories are relative (`--run-dir run`
# unless the case names one), so both sides print the same paths. One-process runs use
# OMP_NUM_THREADS=2 (the threaded loops and oneDNN's 2-thread split are covered; both are
# deterministic at a fixed thread count: 6 runs on a busy machine gave the same bits) with
# OMP_WAIT_POLICY=passive (numerically the same; on a machine busy with other work, threads
# that spin at every barrier made one-process runs 5x slower); mpirun runs 1 thread a rank
# (mpirun --oversubscribe --allow-run-as-root --bind-to none, as dev/test/mpi_lib.sh). Each
# command's stdout, stderr and exit status are kept as out_K.txt, err_K.txt and rc_K.txt beside
# the run directories and are compared too.
#
# What is compared, per case: every file in both case directories, and the same set of files.
#   - the exit statuses: every command must exit 0 on both sides, except in a case declared as an
#     expected error ("error"), whose last command must fail (exit 1..123) on both sides; its
#     error message is then compared as part of err_K.txt. A case that fails on both sides is a
#     FAIL, never a pass.
#   - checkpoints (ckpt_*.bin), plan JSON, --fit-candidates JSON lines, sampled GIFs, PNGs and
#     .clips files, and anything else not named below: byte for byte.
#   - main.log, out_K.txt, err_K.txt: line by line after the masks.
#   - metrics.jsonl: line by line with the keys ms, tok_per_s, clips_per_s and peak_mem removed
#     from the text; every other key (loss, lr, grad_norm, tokens, arena_bytes, val_loss, the
#     DiT's per-t val losses, ...) is compared as printed.
# What is masked, and why (read from real logs of both trainers; compare_outputs.py holds the
# regular expressions and checks them on made-up lines at every start: `compare_outputs.py selftest`):
#   - in a step line ("step N/M | loss | lr | norm | X ms | rate | [tokens |] ETA | peak Y MiB"),
#     matched whole: the step's milliseconds, the tok/s and clips/s rates, the ETA and the measured
#     peak (wall time and the resident set vary run to run); loss, lr, norm, the tokens seen and
#     "(largest rank)" are compared. A step line whose format changed is not masked at all.
#   - "done: peak memory measured X MiB": X (the resident set); the planned arena is compared.
#   - "  (at FILE:LINE)" under a fatal error (fail_at in llmc's common.h): where it is raised, which any
#     refactor that moves code or files changes; the message itself is compared.
#   - the temporary directory's path (<TMP>) and each case's directory (<CASE>), should one be
#     printed; Open MPI's job ids, pids and the host's name, which appear only in its words about a
#     failed job.
#   Nothing prints dates, host names or pids in a passing case (the trainers never do).
# The per-kernel profile table (all timing) is in no case.
#
# Proof that it can fail (2026-11-29). `--base HEAD --new HEAD` passes all 65 cases (two worktrees of
# one commit: the harness's own noise is nil). Then, in scratch worktrees of HEAD (7f7b72f; never
# /work/main's files), three planted changes, each run from the scratch tree with --base HEAD (new:
# that tree, the change uncommitted):
#   (1) AdamW's bias correction of v (llmc/kernels/cpu/adamw.h: 1 - beta2^t made 1 - beta2^(t+1)):
#       57 FAIL, every case that trains, first at its step-2 loss line ("loss 6.260142" against
#       "loss 6.260586"); the 8 that pass are the 5 plans and the 3 errors raised before any update;
#   (2) train_dit's validation line printing its loss with %.5f instead of %.6f (llmc/train/flow_batch.h):
#       26 FAIL, every train_dit case that trains ("val loss 1.621673" against "val loss 1.62167");
#       all 36 train_llama cases pass;
#   (3) ring attention's log-sum-exp merge written as m + log1p(exp(-|a - b|)) instead of
#       m + log(exp(a - m) + exp(b - m)) (llmc/kernels/cpu/attention_merge.h; the same sum, other
#       roundings): 7 FAIL, exactly the cases with a ring (llama cp2_ring, cp2_hybrid (U=1), cp4_hybrid,
#       tp2xcp2; dit cp2_ring, cp4_hybrid, tp2xcp2), each at its checkpoint's bytes: the printed losses
#       (6 and 9 digits) did not move; the Ulysses cases, dit_cp2_hybrid (U=2, no ring) among them, pass.
# And af4ed17 (the layout commit 7f7b72f, llmc/ into folders, and the one after it) against c7b4220,
# the commit before them: 40 pass, and the 25
# train_dit cases that train fail on one line only, "data: moving digits, generated (llmc/video_data.h)"
# become "(llmc/io/video_data.h)" in stdout and main.log: a printed string, not masked (it is output);
# every checkpoint, sample, plan and metric was byte-identical.
#
# Runtime on the 2-core development machine, measured while it also ran other jobs (load average 9-11):
# 3:12 to 3:53 in all, of which the two builds 69-125 s (about 60 s of CPU together) and the 65 cases
# 106-121 s (the slowest, llama_resume_dp2_zero: 5 s for both sides).
set -u
{  # the whole script is read before it runs: an edit of this file during a run changes nothing
SCRIPT_DIR=$(cd "$(dirname "$0")" && pwd)
ROOT=$(git -C "$SCRIPT_DIR" rev-parse --show-toplevel) || { echo "compare_outputs: not inside a git repository" >&2; exit 2; }
T0=$(date +%s)

BASE_REV=HEAD; NEW_REV=; CASES_RE=; KEEP=; LIST=0
usage() { sed -n '2,/^set -u/p' "$0" | sed -n '/^#   bash/,/^#   --list/p' | sed 's/^# \{0,1\}//'; }
while [ $# -gt 0 ]; do
  case $1 in
    --base) BASE_REV=${2:?--base needs a revision}; shift 2 ;;
    --new) NEW_REV=${2:?--new needs a revision}; shift 2 ;;
    --new-tree) NEW_REV=; shift ;;
    --cases) CASES_RE=${2:?--cases needs a regular expression}; shift 2 ;;
    --keep) KEEP=${2:?--keep needs a directory}; shift 2 ;;
    --list) LIST=1; shift ;;
    -h|--help) usage; exit 0 ;;
    *) echo "compare_outputs: unknown argument '$1'" >&2; usage >&2; exit 2 ;;
  esac
done

# ---------------------------------------------------------------------------
# The cases: NAME | KIND | COMMANDS. KIND ok: every command exits 0 on both sides; error: the last
# one fails on both sides (its message compared). COMMANDS: bash, run in the case's directory;
#   llama NP ARGS / dit NP ARGS        the trainer with the common arguments below, then ARGS (a flag
#                                      given twice: the last one counts), under mpirun when NP > 1
#   llama_raw NP ARGS / dit_raw NP ARGS  the trainer with ARGS alone
# each with --run-dir run unless ARGS name one. $DATA is the shared data directory.
# train_llama: tiny with 4 heads, 2 kv heads (tp 2, cp ulysses 2 and hybrid 2 split them) and F=170
# (F not a multiple of the chunks); 4 steps of 128 tokens unless the case sets the batch; validation
# at steps 2 and 4, a sampled story at 4 (temperature 1: the sampler's random numbers), a checkpoint at 4.
# train_dit: 2 blocks, 2 heads on 4x8x8 moving digits (32 tokens a clip), 2 clips a micro-batch,
# 4 steps, validation at 2 and 4 (by t bucket), GIF, PNG and .clips samples and a checkpoint at 4.
CASES=$(cat <<'EOF'
llama_plain                 | ok    | llama 1 --batch 4
llama_microsteps            | ok    | llama 1 --batch 2 --total-batch 256
llama_fp32_grad_accum       | ok    | llama 1 --batch 2 --total-batch 256 --fp32-grad-accum 1
llama_ffn_chunks_hidden     | ok    | llama 1 --batch 4 --ffn-chunks 3
llama_ffn_chunks_seq        | ok    | llama 1 --batch 4 --ffn-chunks 4 --ffn-chunk-dim seq
llama_ce_chunks             | ok    | llama 1 --batch 4 --ce-chunks 3
llama_offload_2             | ok    | llama 1 --batch 4 --offload-act 2
llama_offload_all           | ok    | llama 1 --batch 4 --offload-act -1
llama_recompute_1           | ok    | llama 1 --batch 4 --recompute 1
llama_recompute_2           | ok    | llama 1 --batch 4 --recompute 2
llama_memory_flags_untied   | ok    | llama 1 --batch 2 --total-batch 256 --tied 0 --ffn-chunks 2 --ce-chunks 2 --offload-act -1 --recompute 1 --fp32-grad-accum 0
llama_resume                | ok    | llama 1 --batch 4 --ckpt-every 2 --resume auto --run-dir a && llama 1 --batch 4 --resume a/ckpt_000002.bin --run-dir b && llama 1 --batch 4 --ckpt-every 2 --steps 6 --resume auto --run-dir a
llama_init_from_sample      | ok    | llama 1 --batch 4 --steps 2 --run-dir a && llama 1 --batch 2 --seq 16 --steps 2 --save-init 1 --init-from a/ckpt_000002.bin --run-dir b && llama 1 --batch 2 --steps 0 --init-from a/ckpt_000002.bin --sample-every 1 --sample-len 20 --temperature 0.5 --run-dir c
llama_fit_memory            | ok    | llama 1 --seq 64 --total-batch 2048 --fit-memory 0.08 --steps 2 --fit-candidates cand.jsonl && llama_raw 1 --model llama3-8B --seq 8192 --fit-memory 80 --dp 8 --zero 1 --shard-vocab 1 --plan-only 1 --fit-candidates cand_8B.jsonl
llama_dp2                   | ok    | llama 2 --batch 2
llama_dp2_zero              | ok    | llama 2 --batch 2 --zero 1
llama_dp2_shard_vocab       | ok    | llama 2 --batch 2 --shard-vocab 1
llama_dp2_zero_shard_untied_microsteps | ok | llama 2 --batch 1 --total-batch 256 --zero 1 --shard-vocab 1 --tied 0 --fp32-grad-accum 0
llama_tp2_allreduce         | ok    | llama 2 --batch 4 --tp 2 --tp-mode allreduce
llama_tp2_reducescatter_regather1 | ok | llama 2 --batch 4 --tp 2 --tp-mode reducescatter --tp-recompute-allgather 1
llama_tp2_reducescatter_regather0_shard_vocab | ok | llama 2 --batch 4 --tp 2 --tp-mode reducescatter --tp-recompute-allgather 0 --shard-vocab 1
llama_tp2_allreduce_memory_flags | ok | llama 2 --batch 4 --tp 2 --tp-mode allreduce --shard-vocab 1 --ffn-chunks 2 --ce-chunks 2 --offload-act -1 --recompute 2
llama_tp2xdp2               | ok    | llama 4 --batch 2 --tp 2 --tp-mode reducescatter --zero 1 --shard-vocab 1
llama_cp2_ring              | ok    | llama 2 --batch 4 --cp 2 --cp-mode ring
llama_cp2_ulysses           | ok    | llama 2 --batch 4 --cp 2 --cp-mode ulysses
llama_cp2_hybrid            | ok    | llama 2 --batch 4 --cp 2 --cp-mode hybrid --cp-ulysses 1
llama_cp4_hybrid            | ok    | llama 4 --batch 4 --cp 4 --cp-mode hybrid --cp-ulysses 2 --recompute 2 --ffn-chunks 2
llama_tp2xcp2               | ok    | llama 4 --batch 4 --tp 2 --tp-mode reducescatter --cp 2 --cp-mode ring --shard-vocab 1
llama_dp2xcp2_zero          | ok    | llama 4 --batch 2 --cp 2 --cp-mode ulysses --zero 1 --shard-vocab 1 --offload-act -1
llama_resume_dp2_zero       | ok    | llama 2 --batch 2 --zero 1 --shard-vocab 1 --ckpt-every 2 --run-dir a && llama 2 --batch 2 --zero 1 --shard-vocab 1 --resume a/ckpt_000002.bin --run-dir b && llama 1 --batch 4 --resume a/ckpt_000002.bin --run-dir c
llama_plan_8B               | ok    | llama_raw 1 --model llama3-8B --seq 8192 --batch 1 --dp 8 --zero 1 --shard-vocab 1 --ce-chunks 8 --recompute 1 --plan-only 1 --plan-json plan.json
llama_plan_70B_tp8          | ok    | llama_raw 1 --model llama3-70B --seq 8192 --batch 1 --tp 8 --dp 4 --tp-mode reducescatter --shard-vocab 1 --zero 1 --plan-only 1 --plan-json plan.json
llama_plan_8B_cp8           | ok    | llama_raw 1 --model llama3-8B --seq 131072 --max-seq-len 131072 --batch 1 --cp 8 --cp-mode ulysses --zero 1 --recompute 2 --ffn-chunks 8 --ffn-chunk-dim seq --ce-chunks 16 --offload-act -1 --plan-only 1 --plan-json plan.json
llama_error_tp_splits_kv    | error | llama 1 --tp 4 --plan-only 1
llama_error_tp_needs_ranks  | error | llama 1 --batch 4 --tp 2 --steps 1
llama_error_resume_mismatch | error | llama 1 --batch 4 --steps 2 --run-dir a && llama 1 --batch 4 --D 128 --resume a/ckpt_000002.bin --run-dir b
dit_plain                   | ok    | dit 1
dit_grad_accum              | ok    | dit 1 --grad-accum 2
dit_fp32_grad_accum         | ok    | dit 1 --total-batch 6 --fp32-grad-accum 1
dit_ffn_chunks_hidden       | ok    | dit 1 --ffn-chunks 3
dit_ffn_chunks_seq          | ok    | dit 1 --ffn-chunks 4 --ffn-chunk-dim seq
dit_offload_1               | ok    | dit 1 --offload-act 1
dit_offload_all             | ok    | dit 1 --offload-act -1
dit_recompute_1             | ok    | dit 1 --recompute 1
dit_recompute_2             | ok    | dit 1 --recompute 2
dit_memory_flags            | ok    | dit 1 --grad-accum 2 --ffn-chunks 2 --ffn-chunk-dim seq --offload-act 1 --recompute 2
dit_samples                 | ok    | dit 1 --sample-every 2 --sample-clips 2 --sample-steps 4 --cfg-scale 1.5 --gif-scale 3 --label-dropout 0.3
dit_clip_file_rgb           | ok    | dit 1 --data "$DATA/clips.bin" --channels 3
dit_resume                  | ok    | dit 1 --ckpt-every 2 --resume auto --run-dir a && dit 1 --resume a/ckpt_000002.bin --run-dir b && dit 1 --ckpt-every 2 --steps 6 --resume auto --run-dir a && dit 2 --batch 4 --tp 2 --resume a/ckpt_000002.bin --run-dir c
dit_init_from_sample        | ok    | dit 1 --steps 2 --run-dir a && dit 1 --batch 3 --steps 2 --save-init 1 --init-from a/ckpt_000002.bin --run-dir b && dit 1 --steps 0 --init-from a/ckpt_000002.bin --run-dir c
dit_fit_memory              | ok    | dit_raw 1 --D 32 --L 3 --H 2 --FF 96 --frames 4 --height 8 --width 8 --NC 3 --steps 2 --val-every 2 --val-clips 4 --fit-memory 0.075 --fit-candidates cand.jsonl && dit_raw 1 --model dit-S --fit-memory 4 --dp 4 --zero 1 --plan-only 1 --fit-candidates cand_S.jsonl
dit_dp2                     | ok    | dit 2
dit_dp2_zero                | ok    | dit 2 --zero 1 --grad-accum 2
dit_tp2_allreduce           | ok    | dit 2 --batch 4 --tp 2 --tp-mode allreduce
dit_tp2_reducescatter_regather1 | ok | dit 2 --batch 4 --tp 2 --tp-mode reducescatter --tp-recompute-allgather 1
dit_tp2_reducescatter_regather0_flags | ok | dit 2 --batch 4 --tp 2 --tp-mode reducescatter --tp-recompute-allgather 0 --ffn-chunks 2 --ffn-chunk-dim seq --recompute 1 --offload-act -1
dit_tp2xdp2                 | ok    | dit 4 --tp 2 --tp-mode reducescatter --zero 1 --ffn-chunks 2
dit_cp2_ring                | ok    | dit 2 --cp 2 --cp-mode ring
dit_cp2_ulysses             | ok    | dit 2 --cp 2 --cp-mode ulysses
dit_cp2_hybrid              | ok    | dit 2 --cp 2 --cp-mode hybrid --cp-ulysses 2
dit_cp4_hybrid              | ok    | dit 4 --cp 4 --cp-mode hybrid --cp-ulysses 2 --recompute 2
dit_tp2xcp2                 | ok    | dit 4 --tp 2 --tp-mode reducescatter --cp 2 --cp-mode ring
dit_plan_hunyuan_cp8        | ok    | dit_raw 1 --model hunyuan-13B --batch 1 --cp 8 --cp-mode ulysses --dp 2 --zero 1 --ffn-chunks 4 --recompute 1 --offload-act -1 --plan-only 1 --plan-json plan.json
dit_plan_xl_tp2_cp4_hybrid  | ok    | dit_raw 1 --model dit-XL --frames 64 --batch 2 --tp 2 --tp-mode reducescatter --cp 4 --cp-mode hybrid --cp-ulysses 2 --dp 2 --zero 1 --offload-act 8 --plan-only 1 --plan-json plan.json
dit_error_hybrid_without_ulysses | error | dit 1 --cp 2 --cp-mode hybrid --plan-only 1
EOF
)

NAMES=(); KINDS=(); CMDS=()
while IFS= read -r line; do
  [ -n "${line// }" ] || continue
  IFS='|' read -r n k c <<<"$line"
  n=$(echo $n); k=$(echo $k); c=$(echo "$c" | sed 's/^ *//; s/ *$//')
  if [ -n "$CASES_RE" ] && ! grep -qE -- "$CASES_RE" <<<"$n"; then continue; fi
  NAMES+=("$n"); KINDS+=("$k"); CMDS+=("$c")
done <<<"$CASES"
if [ "$LIST" = 1 ]; then
  for i in "${!NAMES[@]}"; do printf '%-46s %-5s %s\n' "${NAMES[$i]}" "${KINDS[$i]}" "${CMDS[$i]}"; done
  echo "${#NAMES[@]} cases"
  exit 0
fi
[ ${#NAMES[@]} -gt 0 ] || { echo "compare_outputs: no case matches --cases '$CASES_RE'" >&2; exit 2; }

# ---------------------------------------------------------------------------
# the revisions, the temporary directories, stale worktrees
resolve() { git -C "$ROOT" rev-parse --verify --quiet "$1^{commit}" || { echo "compare_outputs: no such revision '$1'" >&2; exit 2; }; }
BASE_SHA=$(resolve "$BASE_REV") || exit 2
NEW_SHA=; if [ -n "$NEW_REV" ]; then NEW_SHA=$(resolve "$NEW_REV") || exit 2; fi

PY=/usr/bin/python3; [ -x "$PY" ] || PY=python3  # compare_outputs.py needs the standard library only
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca odls_base_sigkill_timeout 0 -x OMP_NUM_THREADS=1)
THREADS=2       # OpenMP threads of a one-process run (waiting passively: see the header)
LIMIT=180       # seconds a command may take (a hung collective costs one case)

TREES=$(mktemp -d "${TMPDIR:-/tmp}/llmc_compare_outputs.XXXXXX") || exit 2
echo $$ > "$TREES/owner.pid"
WORKTREES=()
FAILED_KEPT=
cleanup() {
  local wt
  for wt in ${WORKTREES[@]+"${WORKTREES[@]}"}; do git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1; done
  git -C "$ROOT" worktree prune >/dev/null 2>&1
  rm -rf "$TREES"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
if [ -n "$KEEP" ]; then
  mkdir -p "$KEEP" && [ -z "$(ls -A "$KEEP")" ] || { echo "compare_outputs: --keep $KEEP must be a new or empty directory" >&2; exit 2; }
  WORK=$(cd "$KEEP" && pwd)
else
  WORK=$TREES/work
fi
DATA=$WORK/data; RUNS=$WORK/runs; LOGS=$WORK/logs; BIN=$TREES/bin
mkdir -p "$DATA" "$RUNS/base" "$RUNS/new" "$LOGS" "$BIN/base" "$BIN/new"
cp "$SCRIPT_DIR/compare_outputs.py" "$TREES/compare_outputs.py"  # this run's copy: the tree may change under it
HELPER=$TREES/compare_outputs.py

# worktrees of an earlier run that was killed (its owner process gone): removed, with their directory
git -C "$ROOT" worktree prune >/dev/null 2>&1
while IFS= read -r wt; do
  d=$(dirname "$wt")
  [ "$d" = "$TREES" ] && continue
  pid=$(cat "$d/owner.pid" 2>/dev/null)
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then continue; fi  # another comparison is running
  echo "compare_outputs: removing the stale worktree $wt"
  git -C "$ROOT" worktree remove --force "$wt" >/dev/null 2>&1
  rm -rf "$d"
done < <(git -C "$ROOT" worktree list --porcelain | sed -n 's/^worktree //p' | grep -E '/llmc_compare_outputs\.[^/]+/tree_(base|new)$')
git -C "$ROOT" worktree prune >/dev/null 2>&1

elapsed() { local e=$(( $(date +%s) - T0 )); printf '%d:%02d' $((e / 60)) $((e % 60)); }

"$PY" "$HELPER" selftest || { echo "compare_outputs: the masks fail their own check (compare_outputs.py selftest)"; exit 2; }

# ---------------------------------------------------------------------------
# build each side once
add_worktree() {  # SIDE SHA: a detached worktree at $TREES/tree_SIDE
  local wt=$TREES/tree_$1
  git -C "$ROOT" worktree add --detach "$wt" "$2" >"$LOGS/worktree_$1.log" 2>&1 \
    || { echo "FAIL build_$1: git worktree add $2: $(tail -n 1 "$LOGS/worktree_$1.log")"; exit 2; }
  WORKTREES+=("$wt")
}
add_worktree base "$BASE_SHA"
BASE_TREE=$TREES/tree_base
if [ -n "$NEW_SHA" ]; then add_worktree new "$NEW_SHA"; NEW_TREE=$TREES/tree_new; NEW_DESC="$NEW_REV (${NEW_SHA:0:12})"
else NEW_TREE=$ROOT; NEW_DESC="the working tree $ROOT (uncommitted changes included)"; fi
echo "base: $BASE_REV (${BASE_SHA:0:12}) | new: $NEW_DESC | ${#NAMES[@]} cases | work: $WORK"

# Open MPI and oneDNN, as make test has them (idempotent, quick when installed)
if [ -f "$BASE_TREE/scripts/ensure_build_deps.sh" ]; then bash "$BASE_TREE/scripts/ensure_build_deps.sh" >"$LOGS/build_deps.log" 2>&1; fi
command -v mpirun >/dev/null 2>&1 || { echo "FAIL mpi: mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"; exit 2; }

# both sides at once, each make -j2: the same CPU time as one after the other on an idle machine,
# and a fairer share of the cores on a machine busy with other work
build_side() {  # SIDE TREE: the status goes to $LOGS/build_SIDE.rc
  make -C "$2" -j2 train_llama_cpu train_dit_cpu >"$LOGS/build_$1.log" 2>&1
  echo $? >"$LOGS/build_$1.rc"
}
t_build=$(date +%s)
echo "== [$(elapsed)] building both sides (make -j2 train_llama_cpu train_dit_cpu in $BASE_TREE and in $NEW_TREE)"
build_side base "$BASE_TREE" & pid_base=$!
build_side new "$NEW_TREE" & pid_new=$!
wait "$pid_base" "$pid_new"
BUILD_S=$(( $(date +%s) - t_build ))
for s in base new; do
  tree=$BASE_TREE; [ $s = new ] && tree=$NEW_TREE
  if [ "$(cat "$LOGS/build_$s.rc" 2>/dev/null)" != 0 ]; then
    echo "FAIL build_$s: make -j2 train_llama_cpu train_dit_cpu in $tree:"; tail -n 15 "$LOGS/build_$s.log" | sed 's/^/    /'
    exit 2
  fi
  cp "$tree/train_llama_cpu" "$tree/train_dit_cpu" "$BIN/$s/"
done
for s in base new; do  # a build without MPI would run mpirun's ranks as separate one-process runs
  ldd "$BIN/$s/train_llama_cpu" | grep -q libmpi \
    || { echo "FAIL build_$s: the trainers were built without MPI (make info; scripts/ensure_build_deps.sh)"; exit 2; }
done

"$PY" "$HELPER" data "$DATA" || { echo "FAIL data: compare_outputs.py data $DATA"; exit 2; }

# ---------------------------------------------------------------------------
# the cases
LLAMA_COMMON=(--model tiny --V 512 --H 4 --KV 2 --F 170 --seq 32 --steps 4 --warmup 2 --val-every 2 --val-batches 2
  --train-data "$DATA/train.bin" --val-data "$DATA/val.bin" --sample-every 4 --sample-len 12 --tokenizer "$DATA/tok512.bin"
  --ckpt-every 4)
DIT_COMMON=(--D 24 --L 2 --H 2 --FF 40 --frames 4 --height 8 --width 8 --NC 3 --batch 2 --steps 4 --warmup 2 --val-every 2
  --val-clips 6 --sample-every 4 --sample-steps 3 --gif-scale 2 --ckpt-every 4)

# run_cmd NP BINARY ARGS...: one command of a case, in the case's directory; stdout, stderr and the
# exit status go to out_K.txt, err_K.txt and rc_K.txt (K counts the case's commands from 1)
run_cmd() {
  local np=$1 bin=$2 rc; shift 2
  K=$((K + 1))
  local rd=(--run-dir run) a
  for a in "$@"; do [ "$a" = --run-dir ] && rd=(); done
  if [ "$np" = 1 ]; then
    OMP_NUM_THREADS=$THREADS OMP_WAIT_POLICY=passive timeout -k 5 "$LIMIT" "$bin" "$@" "${rd[@]}" >"out_$K.txt" 2>"err_$K.txt"
  else
    timeout -k 5 "$LIMIT" "${MPIRUN[@]}" -np "$np" "$bin" "$@" "${rd[@]}" >"out_$K.txt" 2>"err_$K.txt"
  fi
  rc=$?
  echo "$rc" >"rc_$K.txt"
  return $rc
}
llama() { local np=$1; shift; run_cmd "$np" "$LLAMA_BIN" "${LLAMA_COMMON[@]}" "$@"; }
llama_raw() { local np=$1; shift; run_cmd "$np" "$LLAMA_BIN" "$@"; }
dit() { local np=$1; shift; run_cmd "$np" "$DIT_BIN" "${DIT_COMMON[@]}" "$@"; }
dit_raw() { local np=$1; shift; run_cmd "$np" "$DIT_BIN" "$@"; }

run_case() {  # SIDE NAME COMMANDS
  local dir=$RUNS/$1/$2
  rm -rf "$dir"; mkdir -p "$dir"
  ( cd "$dir" && K=0 && LLAMA_BIN=$BIN/$1/train_llama_cpu && DIT_BIN=$BIN/$1/train_dit_cpu && eval "$3" ) >/dev/null 2>&1
}

# the host's name, should Open MPI print it (only about a failed job): masked when it cannot be mistaken
# for other text (6 characters or more, a letter among them)
HOST_SUB=(); h=$(hostname 2>/dev/null); [ ${#h} -ge 6 ] && [[ $h == *[A-Za-z]* ]] && HOST_SUB=(--sub "$h=<host>")
passed=0; failed=0; failed_names=""
T_CASES=$(date +%s)
for i in "${!NAMES[@]}"; do
  n=${NAMES[$i]}
  echo "== [$(elapsed)] $((i + 1))/${#NAMES[@]} $n"
  t_case=$(date +%s.%N)
  run_case base "$n" "${CMDS[$i]}"
  run_case new "$n" "${CMDS[$i]}"
  awk -v a="$t_case" -v b="$(date +%s.%N)" -v n="$n" 'BEGIN { printf "%6.1f %s\n", b - a, n }' >> "$LOGS/case_times"
  ncmd=$(( $(grep -o ' && ' <<<"${CMDS[$i]}" | wc -l) + 1 ))
  if "$PY" "$HELPER" compare "$n" "${KINDS[$i]}" "$ncmd" "$RUNS/base/$n" "$RUNS/new/$n" \
      --sub "$RUNS/base/$n=<CASE>" --sub "$RUNS/new/$n=<CASE>" --sub "$WORK=<TMP>" --sub "$TREES=<TMP>" \
      --sub "$BASE_TREE=<TREE>" --sub "$NEW_TREE=<TREE>" ${HOST_SUB[@]+"${HOST_SUB[@]}"}; then
    passed=$((passed + 1))
    [ -n "$KEEP" ] || rm -rf "$RUNS/base/$n" "$RUNS/new/$n"
  else
    failed=$((failed + 1)); failed_names="$failed_names $n"
  fi
done
CASES_S=$(( $(date +%s) - T_CASES ))

if [ "$failed" -gt 0 ] && [ -z "$KEEP" ]; then
  FAILED_KEPT=$(mktemp -d "${TMPDIR:-/tmp}/llmc_compare_failed.XXXXXX")
  mv "$RUNS/base" "$FAILED_KEPT/base"; mv "$RUNS/new" "$FAILED_KEPT/new"; cp -r "$LOGS" "$FAILED_KEPT/logs"
fi
echo
echo "the slowest cases (seconds, both sides): $(sort -rn "$LOGS/case_times" | head -n 5 | awk '{ printf "%s%s %s s", (NR > 1 ? ", " : ""), $2, $1 }')"
[ "$failed" -eq 0 ] || echo "failed:$failed_names"
[ -z "$FAILED_KEPT" ] || echo "the failed cases' directories (base/NAME, new/NAME; delete when done): $FAILED_KEPT"
[ -z "$KEEP" ] || echo "kept: $WORK (data, runs/base, runs/new, logs)"
echo "time: $(elapsed) (minutes:seconds; builds ${BUILD_S} s, cases ${CASES_S} s)"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
exit
}
