#!/usr/bin/env bash
# The WHOLE CUDA build of both trainers under the host emulator, no GPU: test_llama and
# train_llama, test_dit and train_dit (the video DiT).
# From anywhere:
#     bash dev/emu/run_trainer.sh          (dev/emu/run.sh runs it as its last stage)
# 1. transforms llmc/kernels/*.cuh (transform.py) into dev/emu/build/trainer/src/llmc, next to copies
#    of llmc's other files (the same tree), train_llama.cu, test_llama.cu, train_dit.cu and test_dit.cu; the
#    copies get `#include "trainer_emu.h"` appended after their last line (line numbers
#    unchanged), which installs the kernel table and reads the EMU_* environment;
# 2. builds the four programs with g++ against the emulator (no -DLLMC_CPU: the CUDA host
#    code paths, device.cuh, the cuBLASLt calls), in fp32 (-DENABLE_FP32) and in bf16 (bf16
#    params/activations, fp32 master weights); only the binaries that the selected runs use
#    (EMU_TRAINER_FILTER), nproc compilers at a time; a program that does not build fails its
#    own runs, not the other trainer's;
# 3. runs test_llama on every dev/ref/*.lref and dev/emu/ref/*.lref (an L=5 model, so that
#    activation offload reuses its two device slots) with flag sets that cover every memory
#    flag, against the committed references, at test_llama's own tolerances:
#        none | --ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1
#             | --ffn-chunks 2 --ffn-chunk-dim seq --recompute 2 | --offload-act 1
#    No flags on every reference, in both precisions; the three flag sets on two
#    references per precision (fp32: the L=5 GQA one and MHA tied with odd sizes; bf16:
#    the L=5 one and GQA untied with other hyperparameters).
#    The same for test_dit on every dev/ref/*.dref and dev/emu/ref/dit_deep_l5.dref (L=5),
#    at test_dit's own tolerances, with the flag sets
#        none | --ffn-chunks 3 --offload-act -1 --recompute 1
#             | --ffn-chunks 2 --ffn-chunk-dim seq --recompute 2 | --offload-act 1
#    (fp32: dit_deep_l5; bf16: dit_deep_l5 and dit_hd12_clip; make test runs every flag set
#    on every reference in the CPU build, whose host code is fp32).
#    EMU_TRAINER_FULL=1 runs every flag set on every reference in both precisions.
#    --offload-optim 1 on deep_l5_gqa and dit_deep_l5 in both precisions (the state after the
#    steps bitwise that of the device kernel), and test_llama's under mpirun with --zero 1.
#    With Open MPI present, test_llama and train_llama are built with MPI, and test_llama
#    also runs under mpirun -np 2 with --comm mpi (collectives staged through pinned host
#    memory, the path that lets ranks share a GPU) with --zero 1 --shard-vocab 1, alone
#    and with the memory flags, in both precisions: the data-parallel CUDA orchestration
#    without a GPU; and test_llama and test_dit (bf16) with --cp 2, ring and Ulysses. They are built with NCCL too,
#    which is include/nccl.h here (non-blocking NCCL emulated on MPI), and test_llama runs
#    with --comm nccl: --zero 1 --shard-vocab 1 in both precisions (bitwise the downloads
#    of the --comm mpi run), --offload-optim 1 with its copy stream eager, --tp 2 in both --tp-modes, --cp 2 as ulysses and as ring
#    (comm.h's all-to-all and send-recv: grouped ncclSend/ncclRecv), --pp 2 (its transfers, and offload's
#    slots handed over across micro-batches), --zero 3 with the memory flags and
#    --zero 2 with micro-steps (the gathers and reduce-scatters ordered by events, in the lazy stream
#    model), a layer computing on a released parameter buffer that must FAIL; planted faults (EMU_NCCL_FAULT)
#    must end in comm.h's messages; nccl_selftest.cpp plants one misuse per shim rule;
# 4. for both test programs: checks that the results do not depend on the stream model or
#    the thread schedule (sync / lazy / lazy with eager copy streams / reverse thread
#    order: same downloaded bytes), that the cuBLASLt fallback kernel path passes too, and
#    that a missing prefetch (--test-skip-prefetch 1) FAILS;
# 5. (EMU_TRAINER_RESUME=0 skips it) train_llama on a tiny synthetic shard (bf16: head dim 64 on
#    --attention tc, fp32: head dim 8 on the fp32 attention): 6 steps with a
#    checkpoint at 3, then a run resumed from it must give bit-identical metrics for
#    steps 4-6; and --offload-act -1 --recompute 2 must give bit-identical metrics to the
#    plain run (L=4: 3 offloaded layers share 2 slots). train_dit likewise on generated
#    moving-digit clips (L=4): 4 steps, checkpoint and validation at 2, samples at 4;
#    resumed from step 2, steps 3-4 (loss, grad_norm, lr, every val_loss) and the step-4
#    sample GIFs and PNGs must be bit-identical, and so must the offloaded run's. Both
#    precisions.
# Every process runs in the LAZY stream model unless said otherwise (dev/emu/emu.h,
# "Streams and events"), with cuBLASLt replaced by the MODEL of its documented contract
# (include/cublasLt.h; EMU_LT_MODE=1): this checks the host code's calls, not cuBLASLt.
# Prints one line per run:  PASS <name>  or  FAIL <name>: why;  exit status non-zero when
# anything failed. Outputs: dev/emu/build/trainer/out/<name>.out (stdout and stderr).
# Environment: EMU_SRC_DIR (llmc sources, default llmc), EMU_TRAINER_SRC (directory with
# the trainers' .cu files, default the repository root; a file it lacks is taken from the
# repository), EMU_TRAINER_FULL, EMU_TRAINER_SAMPLE (1: leave the job_full variants out, as make test
# does), EMU_TRAINER_RESUME, EMU_TRAINER_FILTER (only runs whose
# name contains it, a shell pattern: e.g. test_dit, .bf16. or test_*.bf16.), CXX, and EMU_H2D_ASYNC=0 (emu.h: by default a
# synchronous cudaMemcpy from pageable memory to the device returns before its copy lands,
# as CUDA documents it may; 0 turns that off).
set -u
cd "$(dirname "$0")/../.."
T0=$(date +%s.%N)
LLMC=${EMU_SRC_DIR:-llmc}
TSRC=${EMU_TRAINER_SRC:-.}
B=dev/emu/build/trainer
CXX=${CXX:-g++}
PY=$(command -v python3 || command -v python)
NJ=$(nproc 2>/dev/null || echo 2)
TIMEOUT_S=${EMU_TRAINER_TIMEOUT:-300}
elapsed() { awk -v a="$1" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }'; }
rm -rf "$B"
mkdir -p "$B/src/llmc" "$B/bin" "$B/out" "$B/jobs" "$B/data"
np=0; nf=0
pass() { echo "PASS $1"; np=$((np + 1)); }
fail() { echo "FAIL $1: $2"; nf=$((nf + 1)); }
finish() { rm -rf /tmp/emu_ompi.$$.*; echo "trainer: $np passed, $nf failed in $(elapsed "$T0") s (llmc: $LLMC, trainer: $TSRC)"; [ "$nf" -eq 0 ]; exit $?; }

# 1. sources
if "$PY" dev/emu/transform.py "$LLMC" "$B/src/llmc" >"$B/transform.log" 2>&1; then pass trainer.transform
else fail trainer.transform "$(tail -n 1 "$B/transform.log")"; finish; fi
for f in train_llama.cu test_llama.cu train_dit.cu test_dit.cu; do
  src="$TSRC/$f"
  # a copy made for one trainer (EMU_TRAINER_SRC) need not hold the other one's files
  [ -e "$src" ] || { echo "trainer: $TSRC has no $f, the repository's is used"; src=$f; }
  { cat "$src"; printf '\n#include "trainer_emu.h"\n'; } > "$B/src/$f"
done

# 2. the runs: one small script per run (run in parallel after the build)
job() {  # job NAME ENV COMMAND...: writes $B/jobs/NAME.sh
  local name=$1 env=$2; shift 2
  case "$name" in *${EMU_TRAINER_FILTER:-}*) ;; *) return ;; esac  # (a glob: "test_*.bf16.")
  { echo "cd '$PWD'"; printf 'env %s timeout %s' "$env" "$TIMEOUT_S"; printf ' %q' "$@"
    echo " > '$B/out/$name.out' 2>&1"; echo "echo \$? > '$B/out/$name.rc'"; } > "$B/jobs/$name.sh"
}
# job_full NAME ENV COMMAND...: a job make test's sample (EMU_TRAINER_SAMPLE=1) leaves to test-full:
# a variant of a path another sampled job runs
job_full() { [ "${EMU_TRAINER_SAMPLE:-0}" = 1 ] || job "$@"; }
# with Open MPI, train_llama, test_llama and test_dit are built with MPI so that the data-parallel CUDA
# orchestration (--comm mpi: collectives staged through pinned host memory) runs under mpirun,
# and with NCCL, which is include/nccl.h here: non-blocking NCCL emulated on MPI (--comm nccl)
MPIFLAGS=()
if command -v mpicxx >/dev/null 2>&1 && command -v mpirun >/dev/null 2>&1; then
  MPIFLAGS=(-DUSE_MPI -DUSE_NCCL -DOMPI_SKIP_MPICXX $(mpicxx --showme:compile) $(mpicxx --showme:link | sed 's/-lmpi_cxx//'))
fi
# The copy streams, by id (EMU_EAGER_STREAMS, in creation order): per model, llmc/parallel/offload.h's
# offload_bind creates the offload copy stream and the prefetch stream, then the trainer its
# compute stream; test_llama and test_dit build the model under test, then, with a memory
# flag, the flag-off model; both create their communication stream before either. The
# verdict checks that these streams ran work and launched no kernel (eager_ops, eager_compute).
EAGER_COPIES_test_llama=2,3,5,6
EAGER_COPIES_test_dit=2,3,5,6

# 2a. test_llama and train_llama
REFS=$(ls dev/ref/*.lref dev/emu/ref/*.lref)
SETS=("none|" "chunks3_ce5_offloadall_rc1|--ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1"
      "seqchunks2_rc2|--ffn-chunks 2 --ffn-chunk-dim seq --recompute 2" "offload1|--offload-act 1")
FLAG_REFS_fp32="dev/emu/ref/deep_l5_gqa.lref dev/ref/mha_tied_odd.lref"
FLAG_REFS_bf16="dev/emu/ref/deep_l5_gqa.lref dev/ref/gqa_h6kv2_untied_hparams.lref"
for p in fp32 bf16; do
  for r in $REFS; do
    rn=$(basename "$r" .lref)
    for s in "${SETS[@]}"; do
      sn=${s%%|*}; fl=${s#*|}
      if [ "$sn" != none ] && [ "${EMU_TRAINER_FULL:-0}" != 1 ]; then
        fr=FLAG_REFS_$p
        case " ${!fr} " in *" $r "*) ;; *) continue ;; esac
      fi
      job "test_llama.$p.$rn.$sn" "" "$B/bin/test_llama.$p" --ref "$r" $fl
    done
  done
  # the same run under every stream model and the reverse thread order: same downloads
  DR=dev/emu/ref/deep_l5_gqa.lref
  # (the lazy model's run is the flag-set run above with the same flags)
  DF=(--ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1)
  job "test_llama.$p.models.sync" "EMU_STREAMS=sync" "$B/bin/test_llama.$p" --ref $DR "${DF[@]}"
  job "test_llama.$p.models.lazy_eager_copies" "EMU_STREAMS=lazy EMU_EAGER_STREAMS=$EAGER_COPIES_test_llama" "$B/bin/test_llama.$p" --ref $DR "${DF[@]}"
  job "test_llama.$p.models.rev_schedule" "EMU_SCHEDULE=rev" "$B/bin/test_llama.$p" --ref $DR "${DF[@]}"
  # --offload-optim 1: the optimizer on the host; its copy stream in the lazy model, and the state
  # after the steps bitwise that of the device kernel (test_llama's check_offload_state)
  job_full "test_llama.$p.deep_l5_gqa.offload_optim" "" "$B/bin/test_llama.$p" --ref $DR --offload-optim 1
  # cuBLASLt finds no algorithm: llmc's fallback kernel does every product
  job "test_llama.$p.mha_tied_odd.fallback_matmul" "EMU_LT_MODE=0" "$B/bin/test_llama.$p" --ref dev/ref/mha_tied_odd.lref
done
# data parallelism in the CUDA build: 2 ranks, --comm mpi (the path that lets ranks share a GPU)
if [ ${#MPIFLAGS[@]} -gt 0 ]; then
  MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1 -np 2)
  # every mpirun gets a session directory of its own: Open MPI 4 creates /tmp/ompi.<host>.<uid>
  # on start, and two mpiruns starting at once can race on it ("mkdir ... File exists",
  # orte_init failed); run by the job script, removed by finish()
  OMPI_TMP="OMPI_MCA_orte_tmpdir_base=\$(mktemp -d /tmp/emu_ompi.$$.XXXXXX)"
  for p in fp32 bf16; do
    job "test_llama.$p.dp2.zero_shard" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.$p" --comm mpi --ref dev/ref/gqa_h4kv2_tied.lref \
      --zero 1 --shard-vocab 1
    job "test_llama.$p.dp2.zero_shard_flags" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.$p" --comm mpi --ref dev/ref/mha_untied_small.lref \
      --zero 1 --shard-vocab 1 --ffn-chunks 3 --ce-chunks 5 --offload-act -1 --recompute 1
    job_full "test_llama.$p.dp2.zero_offload_optim" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.$p" --comm mpi --ref dev/ref/gqa_h4kv2_tied.lref \
      --zero 1 --offload-optim 1
    # --comm nccl (include/nccl.h): the same run must download the same bytes (nccl2.same_as_mpi)
    job "test_llama.$p.nccl2.zero_shard" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.$p" --comm nccl --ref dev/ref/gqa_h4kv2_tied.lref \
      --zero 1 --shard-vocab 1
    # full sharding (llmc/parallel/param_store.h): the gathers and reduce-scatters on the communication
    # stream, each layer's compute ordered after its own gather by an event (the lazy stream model runs
    # a consumer that is not ordered after its producer on what the buffer held before)
    job "test_llama.$p.nccl2.zero3_flags" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.$p" --comm nccl --ref dev/ref/mha_untied_small.lref \
      --zero 3 --shard-vocab 1 --ffn-chunks 3 --offload-act -1 --recompute 1
    job_full "test_llama.$p.dp2.zero2_micro" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.$p" --comm mpi --ref dev/emu/ref/deep_l5_gqa.lref \
      --zero 2 --micro-batch 1 --fp32-grad-accum 1
  done
  job_full "test_llama.bf16.nccl2.zero3_kept" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm nccl --ref dev/emu/ref/deep_l5_gqa.lref \
    --zero 3 --zero-reshard 0 --recompute 2
  job "test_llama.bf16.nccl2.zero2_micro_floatx" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm nccl --ref dev/emu/ref/deep_l5_gqa.lref \
    --zero 2 --micro-batch 1 --fp32-grad-accum 0
  # a layer computing on a parameter buffer already given back (poisoned with NaN in test builds): must FAIL
  job "test_llama.fp32.zero3_planted.catches_released_params" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.fp32" --comm nccl \
    --ref dev/ref/gqa_h4kv2_tied.lref --zero 3 --test-plant-zero-bug 1
  # the gradient copies to the host after reductions on NCCL's own stream: with the optimizer's
  # copy stream eager (stream 5: the comm stream, the offload copy and prefetch streams and the
  # compute stream come first), a copy not ordered after its reduce-scatter reads the unreduced
  # gradients (measured: dropping the copy stream's wait on the communication stream fails it)
  job_full "test_llama.bf16.nccl2.zero_shard_offload_optim_eager_copies" "$OMPI_TMP" "${MPIRUN[@]}" -x EMU_EAGER_STREAMS=5 \
    "$B/bin/test_llama.bf16" --comm nccl --ref dev/ref/gqa_h4kv2_tied.lref --zero 1 --shard-vocab 1 --offload-optim 1
  # under --zero 3 a layer's shard is summed on NCCL's stream after each reduce-scatter: the copy follows that
  job "test_llama.bf16.nccl2.zero3_offload_optim_eager_copies" "$OMPI_TMP" "${MPIRUN[@]}" -x EMU_EAGER_STREAMS=5 \
    "$B/bin/test_llama.bf16" --comm nccl --ref dev/ref/gqa_h4kv2_tied.lref --zero 3 --offload-optim 1
  # tensor parallelism over NCCL, both modes (mha_untied_small: TP runs cost about 8 CPU-s per rank
  # here, most of it the per-tensor global-norm launches; gqa_h4kv2_tied would take twice that)
  for mode in allreduce reducescatter; do
    job "test_llama.bf16.nccl2.tp2_$mode" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm nccl --ref dev/ref/mha_untied_small.lref \
      --tp 2 --tp-mode $mode --shard-vocab 1
  done
  # context parallelism over NCCL (llmc/parallel/context_parallel.h): Ulysses' all-to-alls and the ring's
  # send-recvs, comm.h's groups of ncclSend/ncclRecv (in the lazy stream model, a consumer not
  # ordered after its exchange reads what the buffer held before)
  for mode in ulysses ring; do
    job "test_llama.bf16.nccl2.cp2_$mode" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm nccl --ref dev/ref/mha_untied_small.lref \
      --cp 2 --cp-mode $mode
  done
  # and under --comm mpi, staged through the model's pinned host buffer: the forward's first
  # exchange comes before any other collective has attached that buffer to the communicator
  # (the sample: llama's ring, the DiT's Ulysses; test-full both modes of each)
  job_full "test_llama.bf16.mpi2.cp2_ulysses" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm mpi --ref dev/ref/mha_untied_small.lref \
    --cp 2 --cp-mode ulysses
  job "test_llama.bf16.mpi2.cp2_ring" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm mpi --ref dev/ref/mha_untied_small.lref \
    --cp 2 --cp-mode ring
  job_full "test_dit.bf16.mpi2.cp2_ring" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_dit.bf16" --comm mpi --ref dev/ref/dit_hd12_clip.dref \
    --cp 2 --cp-mode ring
  job "test_dit.bf16.mpi2.cp2_ulysses" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_dit.bf16" --comm mpi --ref dev/ref/dit_nc1_hd8.dref \
    --cp 2 --cp-mode ulysses
  # pipeline parallelism (llmc/parallel/pipeline.h): the 1f1b schedule's transfers as grouped ncclSend/ncclRecv
  # and, under --comm mpi, staged through the 4 halves' host buffers; with every layer offloaded the two device
  # slots are handed from tenant to tenant on events across micro-batches (in the lazy stream model a write or
  # a prefetch not ordered after the slot's last release reads or clobbers what it held)
  job "test_llama.bf16.nccl2.pp2_offload" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.bf16" --comm nccl \
    --ref dev/emu/ref/deep_l5_gqa.lref --pp 2 --offload-act -1 --recompute 1
  job_full "test_llama.fp32.mpi2.pp2_interleaved" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_llama.fp32" --comm mpi \
    --ref dev/emu/ref/deep_l5_gqa.lref --pp 2 --pp-schedule interleaved --pp-virtual 2 --pp-layers 1,1,2,1 --offload-act 1
  job "test_dit.bf16.nccl2.pp2_offload" "$OMPI_TMP" "${MPIRUN[@]}" "$B/bin/test_dit.bf16" --comm nccl \
    --ref dev/emu/ref/dit_deep_l5.dref --pp 2 --offload-act -1
  # comm.h's error handling, through faults the shim plants (EMU_NCCL_FAULT, on both ranks; the 3rd
  # collective is the first gradient reduce-scatter): each run must FAIL with its message
  NF=(--comm nccl --ref dev/ref/mha_untied_small.lref --zero 1 --comm-timeout 2)
  for f in call_error:3 run_error:3 stuck:3 no_finalize; do
    job "test_llama.bf16.nccl2.catches_${f%%:*}" "$OMPI_TMP" "${MPIRUN[@]}" -x "EMU_NCCL_FAULT=$f" "$B/bin/test_llama.bf16" "${NF[@]}"
  done
  # the shim's own rules, one planted misuse per case (nccl_selftest.cpp), the cases side by side
  # (each is an mpirun of two short processes that mostly wait)
  job nccl_selftest "" bash -c 'for k in $("$1" --list); do ( export OMPI_MCA_orte_tmpdir_base=$(mktemp -d "/tmp/emu_ompi.$3.XXXXXX")
    "${@:4}" "$1" "$k" > "$2.$k.out" 2>&1; echo $? > "$2.$k.rc" ) & done; wait' \
    nccl_selftest "$B/bin/nccl_selftest.fp32" "$B/out/nccl_selftest" "$$" "${MPIRUN[@]}"
fi
# gradient accumulation over many micro-steps (the risk: bf16 sums swamp the small late
# contributions): micro64_b64.lref's 64 rows as 64 micro-steps of one row, the gradients
# summed in the bf16 buffer (--fp32-grad-accum 0) and in an fp32 buffer (1). The fp32 run
# must pass test_llama's bf16 tolerances and land closer to the float64 reference than the
# bf16 sum on every gradient tensor's total (the verdict below compares them).
for g in 0 1; do
  job "test_llama.bf16.micro64_b64.microsteps64_gradacc$g" "" "$B/bin/test_llama.bf16" --ref dev/emu/ref/micro64_b64.lref \
    --micro-batch 1 --fp32-grad-accum $g
done
# --attention tc (the tensor-core kernels, RoPE fused into their tile loads) through the whole
# bf16 CUDA build: it was first written for head dims 64 and 128, which no committed reference has, so
# small float64 references with hd 64 are made here (GQA ratio 2, T = 70: two query tiles, the
# second ragged). test_llama alone and with the memory flags (recompute and offload re-run the
# fused kernels on saved unrotated q, k), and test_dit (non-causal, 3-D RoPE).
REF_PY=$(bash scripts/ensure_python_deps.sh 2>/dev/null | tail -n 1)
if "$REF_PY" dev/ref/reference_llama.py --quiet --out "$B/data/hd64_tc.lref" --V 64 --D 128 --L 2 --H 2 --KV 1 --F 64 \
     --max-seq-len 72 --B 1 --T 70 --n-steps 2 --tied 0 --seed 31 > "$B/data/ref_hd64_tc.log" 2>&1; then
  job "test_llama.bf16.hd64_tc.attention_tc" "" "$B/bin/test_llama.bf16" --ref "$B/data/hd64_tc.lref" --attention tc
  job "test_llama.bf16.hd64_tc.attention_tc_flags" "" "$B/bin/test_llama.bf16" --ref "$B/data/hd64_tc.lref" --attention tc \
    --ffn-chunks 2 --offload-act 1 --recompute 2
  # tc2 (the second design: one-pass backward through its planned dQ workspace) with the memory flags
  job "test_llama.bf16.hd64_tc.attention_tc2_flags" "" "$B/bin/test_llama.bf16" --ref "$B/data/hd64_tc.lref" \
    --attention tc2 --ffn-chunks 2 --offload-act 1 --recompute 2
  if [ "${EMU_TRAINER_SAMPLE:-0}" != 1 ]; then
    job "test_llama.bf16.hd64_tc.attention_tc2" "" "$B/bin/test_llama.bf16" --ref "$B/data/hd64_tc.lref" --attention tc2
  fi
else fail "trainer.test_llama.bf16.hd64_tc" "reference_llama.py failed: $(tail -n 1 "$B/data/ref_hd64_tc.log")"; fi
if "$REF_PY" dev/ref/reference_dit.py --quiet --out "$B/data/dit_hd64_tc.dref" --C 1 --Fr 2 --Hi 8 --Wi 8 --pt 1 --ph 2 \
     --pw 2 --D 128 --L 2 --H 2 --FF 64 --NC 2 --B 1 --n-steps 2 --seed 32 > "$B/data/ref_dit_hd64_tc.log" 2>&1; then
  job "test_dit.bf16.dit_hd64_tc.attention_tc" "" "$B/bin/test_dit.bf16" --ref "$B/data/dit_hd64_tc.dref" --attention tc \
    --offload-act 1 --recompute 1
  job_full "test_dit.bf16.dit_hd64_tc.attention_tc2" "" "$B/bin/test_dit.bf16" --ref "$B/data/dit_hd64_tc.dref" --attention tc2 \
    --offload-act 1 --recompute 1
else fail "trainer.test_dit.bf16.dit_hd64_tc" "reference_dit.py failed: $(tail -n 1 "$B/data/ref_dit_hd64_tc.log")"; fi
# dit-XL's head dim 72 (tc runs it zero-padded to 80; no GPU has run it): test_dit on tc and tc2, full runs only
if [ "${EMU_TRAINER_SAMPLE:-0}" != 1 ]; then
  if "$REF_PY" dev/ref/reference_dit.py --quiet --out "$B/data/dit_hd72_tc.dref" --C 1 --Fr 2 --Hi 8 --Wi 8 --pt 1 --ph 2 \
       --pw 2 --D 144 --L 2 --H 2 --FF 64 --NC 2 --B 1 --n-steps 2 --seed 33 > "$B/data/ref_dit_hd72_tc.log" 2>&1; then
    job "test_dit.bf16.dit_hd72_tc.attention_tc" "" "$B/bin/test_dit.bf16" --ref "$B/data/dit_hd72_tc.dref" --attention tc
    job "test_dit.bf16.dit_hd72_tc.attention_tc2" "" "$B/bin/test_dit.bf16" --ref "$B/data/dit_hd72_tc.dref" --attention tc2
  else fail "trainer.test_dit.bf16.dit_hd72_tc" "reference_dit.py failed: $(tail -n 1 "$B/data/ref_dit_hd72_tc.log")"; fi
fi
# must fail: backward reads offload slots that were never prefetched (poisoned)
job "test_llama.fp32.catches_missing_prefetch" "" "$B/bin/test_llama.fp32" --ref $DR --offload-act -1 --test-skip-prefetch 1
if [ "${EMU_TRAINER_RESUME:-1}" != 0 ]; then
  "$PY" dev/test/write_toy_shard.py "$B/data/train.bin" 4000 1 128 && "$PY" dev/test/write_toy_shard.py "$B/data/val.bin" 1000 2 128
  TR=(--model tiny --V 128 --D 32 --L 4 --H 4 --KV 2 --F 64 --batch 2 --seq 16 --total-batch 64 --steps 6 --warmup 2
      --val-every 3 --val-batches 2 --ckpt-every 3 --train-data "$B/data/train.bin" --val-data "$B/data/val.bin")
  # bf16: head dim 64 on the tensor-core attention, so that resume and offload are bit-exact on tc too
  TR_TC=(--D 128 --H 2 --KV 1 --F 256 --attention tc)
  for p in fp32 bf16; do
    TRP=("${TR[@]}"); [ $p = bf16 ] && TRP+=("${TR_TC[@]}")
    job "train_llama.$p.full" "" "$B/bin/train_llama.$p" "${TRP[@]}" --run-dir "$B/out/run_llama.$p.full"
    job "train_llama.$p.offload" "" "$B/bin/train_llama.$p" "${TRP[@]}" --offload-act -1 --recompute 2 --run-dir "$B/out/run_llama.$p.offload"
  done
  # --attention auto at hd 64 causal: tc2 (timed faster than tc on a GPU) where its plan fits the
  # emulated 80 GiB device, tc where --fit-reserve leaves no room for it (the runner's step down)
  TA=(--model tiny --V 128 --D 128 --L 2 --H 2 --KV 1 --F 256 --batch 2 --seq 16 --total-batch 32 --steps 2 --warmup 1
      --train-data "$B/data/train.bin" --val-data "$B/data/val.bin" --attention auto)
  job "train_llama.bf16.auto_fits" "" "$B/bin/train_llama.bf16" "${TA[@]}" --run-dir "$B/out/run_llama.bf16.auto_fits"
  job "train_llama.bf16.auto_steps_down" "" "$B/bin/train_llama.bf16" "${TA[@]}" --fit-reserve 81919.9 \
    --run-dir "$B/out/run_llama.bf16.auto_steps_down"
  # the same on 2 ranks (--comm mpi): the ranks agree on one kernel through a host all-reduce
  [ ${#MPIFLAGS[@]} -gt 0 ] && job_full "train_llama.bf16.mpi2_auto_steps_down" "$OMPI_TMP" "${MPIRUN[@]}" \
    "$B/bin/train_llama.bf16" "${TA[@]}" --total-batch 64 --comm mpi --fit-reserve 81919.9 \
    --run-dir "$B/out/run_llama.bf16.mpi2_auto_steps_down"
fi

# 2b. test_dit and train_dit (dev/emu/ref/dit_deep_l5.dref: L=5, so that offload reuses its slots)
DREFS=$(ls dev/ref/*.dref dev/emu/ref/*.dref)
DSETS=("none|" "chunks3_offloadall_rc1|--ffn-chunks 3 --offload-act -1 --recompute 1"
       "seqchunks2_rc2|--ffn-chunks 2 --ffn-chunk-dim seq --recompute 2" "offload1|--offload-act 1")
DFLAG_REFS_fp32="dev/emu/ref/dit_deep_l5.dref"
DFLAG_REFS_bf16="dev/emu/ref/dit_deep_l5.dref dev/ref/dit_hd12_clip.dref"
for p in fp32 bf16; do
  for r in $DREFS; do
    rn=$(basename "$r" .dref)
    for s in "${DSETS[@]}"; do
      sn=${s%%|*}; fl=${s#*|}
      if [ "$sn" != none ] && [ "${EMU_TRAINER_FULL:-0}" != 1 ]; then
        fr=DFLAG_REFS_$p
        case " ${!fr} " in *" $r "*) ;; *) continue ;; esac
      fi
      job "test_dit.$p.$rn.$sn" "" "$B/bin/test_dit.$p" --ref "$r" $fl
    done
  done
  DDR=dev/emu/ref/dit_deep_l5.dref
  DDF=(--ffn-chunks 3 --offload-act -1 --recompute 1)
  job "test_dit.$p.models.sync" "EMU_STREAMS=sync" "$B/bin/test_dit.$p" --ref $DDR "${DDF[@]}"
  job "test_dit.$p.models.lazy_eager_copies" "EMU_STREAMS=lazy EMU_EAGER_STREAMS=$EAGER_COPIES_test_dit" "$B/bin/test_dit.$p" --ref $DDR "${DDF[@]}"
  job "test_dit.$p.models.rev_schedule" "EMU_SCHEDULE=rev" "$B/bin/test_dit.$p" --ref $DDR "${DDF[@]}"
  job "test_dit.$p.dit_pt2_hw.fallback_matmul" "EMU_LT_MODE=0" "$B/bin/test_dit.$p" --ref dev/ref/dit_pt2_hw.dref
  job "test_dit.$p.dit_deep_l5.offload_optim" "" "$B/bin/test_dit.$p" --ref $DDR --offload-optim 1
done
job "test_dit.fp32.catches_missing_prefetch" "" "$B/bin/test_dit.fp32" --ref $DDR --offload-act -1 --test-skip-prefetch 1
if [ "${EMU_TRAINER_RESUME:-1}" != 0 ]; then
  # moving-digit clips generated in the process; L=4, so --offload-act -1 puts 3 layers on 2 slots;
  # the step-4 samples (3 Euler steps with guidance) run the sampler
  TRD=(--model dit-tiny --D 16 --L 4 --H 2 --FF 32 --frames 4 --height 8 --width 8 --NC 2 --batch 2 --steps 4 --warmup 1
       --val-every 2 --val-clips 6 --ckpt-every 2 --sample-every 4 --sample-steps 3)
  for p in fp32 bf16; do
    job "train_dit.$p.full" "" "$B/bin/train_dit.$p" "${TRD[@]}" --run-dir "$B/out/run_dit.$p.full"
    job "train_dit.$p.offload" "" "$B/bin/train_dit.$p" "${TRD[@]}" --offload-act -1 --recompute 2 --run-dir "$B/out/run_dit.$p.offload"
  done
fi

# 3. build what the runs need (NJ compilers at a time); a failed build fails its runs only
FLAGS=(-std=c++17 -O1 -g0 -pthread -Idev/emu/include -Idev/emu -I"$B/src/llmc/kernels" -Wall -Wno-unused-function -Wno-unknown-pragmas -Wno-comment)
echo 'int main(){return 0;}' > "$B/probe.cpp"
"$CXX" -ftrivial-auto-var-init=pattern "$B/probe.cpp" -o "$B/probe" 2>/dev/null && FLAGS+=(-ftrivial-auto-var-init=pattern)
BINS=$(cat "$B"/jobs/*.sh 2>/dev/null | grep -oE "$B/bin/[a-z_]+\.(fp32|bf16)" | sed "s|$B/bin/||" | sort -u)
for x in $BINS; do
  t=${x%.*}; p=${x##*.}
  d=(); [ $p = fp32 ] && d=(-DENABLE_FP32)
  m=(); case $t in *_llama|test_dit|nccl_selftest) m=(${MPIFLAGS[@]+"${MPIFLAGS[@]}"}) ;; esac
  src="$B/src/$t.cu"; [ "$t" = nccl_selftest ] && src=dev/emu/nccl_selftest.cpp
  while [ "$(jobs -rp | wc -l)" -ge "$NJ" ]; do wait -n; done
  ( "$CXX" "${FLAGS[@]}" ${d[@]+"${d[@]}"} -x c++ "$src" -o "$B/bin/$x" ${m[@]+"${m[@]}"} >"$B/build.$x.log" 2>&1
    echo $? > "$B/build.$x.rc" ) &
done
wait
for x in $BINS; do
  if [ "$(cat "$B/build.$x.rc")" = 0 ]; then pass "trainer.build.$x"
  else
    fail "trainer.build.$x" "$CXX failed: $(grep -m1 -E 'error' "$B/build.$x.log")"
    grep -lF "$B/bin/$x " "$B"/jobs/*.sh | xargs -r rm -f
  fi
done
echo "trainer: transform and build took $(elapsed "$T0") s"

# 4. run (in parallel)
ls "$B"/jobs/*.sh 2>/dev/null | xargs -r -P "$NJ" -n 1 bash
echo "trainer: first runs done after $(elapsed "$T0") s"
# the resumed runs need the full runs' checkpoints
if [ "${EMU_TRAINER_RESUME:-1}" != 0 ]; then
  rm -f "$B"/jobs/*.sh
  for p in fp32 bf16; do
    TRP=("${TR[@]}"); [ $p = bf16 ] && TRP+=("${TR_TC[@]}")
    [ -x "$B/bin/train_llama.$p" ] && job "train_llama.$p.resumed" "" "$B/bin/train_llama.$p" "${TRP[@]}" \
      --run-dir "$B/out/run_llama.$p.resumed" --resume "$B/out/run_llama.$p.full/ckpt_000003.bin"
    [ -x "$B/bin/train_dit.$p" ] && job "train_dit.$p.resumed" "" "$B/bin/train_dit.$p" "${TRD[@]}" \
      --run-dir "$B/out/run_dit.$p.resumed" --resume "$B/out/run_dit.$p.full/ckpt_000002.bin"
  done
  ls "$B"/jobs/*.sh 2>/dev/null | xargs -r -P "$NJ" -n 1 bash
fi

# 5. verdicts
field() { grep -o "$2=[^ ]*" "$1" | tail -n 1 | cut -d= -f2; }
# emulator-level problems of one run's output; prints the reason, empty when fine
emu_problem() {
  local o=$1
  if grep -q '^EMU_ERROR' "$o"; then grep -m1 '^EMU_ERROR' "$o" | cut -c1-300; return; fi
  if ! grep -q '^EMU_REPORT' "$o"; then echo "no EMU_REPORT line (crash? exit $(cat "${o%.out}.rc"))"; return; fi
  [ "$(field "$o" guards)" = ok ] || { echo "device memory guard zones damaged: $(grep -o 'guards=.*covered' "$o")"; return; }
  # work left queued is a finding only when the program ended normally (FAIL() exits at once)
  [ "$(field "$o" pending)" = 0 ] || [ "$(cat "${o%.out}.rc")" != 0 ] ||
    echo "$(field "$o" pending) stream operations never ran (issued, never synchronised)"
}
for o in "$B"/out/test_llama.*.out "$B"/out/test_dit.*.out; do
  [ -e "$o" ] || continue
  n=$(basename "$o" .out); rc=$(cat "$B/out/$n.rc")
  prob=$(emu_problem "$o"); extra=""
  case "$n" in
    *.nccl2.catches_*)
      # a fault the NCCL shim planted (EMU_NCCL_FAULT): the run must end in comm.h's message for it
      # (no_finalize: in the shim's own error, since comm.h must finalize before it destroys)
      case "$n" in
        *catches_stuck) want='NCCL: [^ ]+\(.*\) did not complete within 2 s \(--comm-timeout\); communicator aborted' ;;
        *catches_no_finalize) want='^EMU_ERROR emulated NCCL: ncclCommDestroy of communicator [0-9]+ \(rank [0-9]+ of [0-9]+\) without ncclCommFinalize' ;;
        # at a settle, in the call itself, or in comm_synchronize's poll
        *) want='NCCL: ([^ ]+\(.*\)( failed)?|the [a-z]+ communicator failed): remote process exited or there was a network error' ;;
      esac
      if [ -n "$prob" ] && ! grep -q '^EMU_ERROR' "$o"; then fail "trainer.$n" "$prob"
      elif [ "$rc" != 0 ] && grep -qE "$want" "$o" && { [[ $n == *no_finalize ]] || ! grep -q '^EMU_ERROR' "$o"; }; then
        pass "trainer.$n[exit $rc: $(grep -m1 -oE "$want" "$o" | sed -E 's/\((.*)\)(( failed)?: remote| did not)/(...)\2/' | cut -c1-110)]"
      else fail "trainer.$n" "the planted fault did not end in its message (exit $rc; $(grep -m1 -E '^error|^EMU_ERROR|^(PASS|FAIL):' "$o" | cut -c1-200))"; fi ;;
    *.nccl2.*)
      # on top of the usual verdict: on every rank every communicator finalized and destroyed, every
      # collective run, and some calls answered ncclInProgress (the non-blocking protocol was used)
      if [ -z "$prob" ]; then
        if [ "$(grep -c '^EMU_NCCL ' "$o")" != 2 ]; then prob="$(grep -c '^EMU_NCCL ' "$o") EMU_NCCL lines, not one per rank"
        else prob=$(grep '^EMU_NCCL ' "$o" | awk '{ delete v; for (i = 2; i <= NF; i++) { split($i, kv, "="); v[kv[1]] = kv[2] }
            if (v["destroyed"] != v["comms"] || v["finalized"] != v["comms"] || v["aborted"] != 0 || v["ran"] != v["calls"] ||
                v["calls"] == 0 || v["in_progress"] == 0) { print "NCCL shim: " $0; exit } }')
          extra="; rank 0: $(field "$o" comms | head -n 1) communicators, $(grep -m1 '^EMU_NCCL ' "$o" | grep -o 'calls=[0-9]*' | cut -d= -f2) collectives, $(grep -m1 '^EMU_NCCL ' "$o" | grep -o 'in_progress=[0-9]*' | cut -d= -f2) calls in progress"
          ng=$(grep -m1 '^EMU_NCCL ' "$o" | grep -o 'groups=[0-9]*' | cut -d= -f2)
          [ "${ng:-0}" = 0 ] || extra="$extra; $ng of the collectives ncclSend/ncclRecv groups"
        fi
      fi ;;&
    *_eager_copies)
      # the eager streams must be the copy streams (stream ids follow the creation order)
      if [ -z "$prob" ] && { [ "$(field "$o" eager_compute)" != 0 ] || [ "$(field "$o" eager_ops)" = 0 ]; }; then
        prob="EMU_EAGER_STREAMS does not name the copy streams: $(field "$o" eager_ops) operations on them, $(field "$o" eager_compute) of them kernels or products (stream creation order changed? see EAGER_COPIES_${n%%.*})"
      fi ;;&
    *.microsteps64_gradacc0)
      # the bf16 sum may miss the tolerance: that is what the comparison below measures
      if [ -n "$prob" ]; then fail "trainer.$n" "$prob"
      else pass "trainer.$n[ran; $(grep -m1 -oE '^(PASS|FAIL): [0-9]+ checks, [0-9]+ failed' "$o")]"; fi ;;
    *.catches_released_params)
      if [ "$rc" != 0 ] && grep -q 'FAIL (not finite)' "$o"; then
        pass "trainer.$n[$(grep -c 'FAIL (not finite)' "$o") tensors not finite, as they must be]"
      else fail "trainer.$n" "a layer computing on a released parameter buffer was not caught (exit $rc)"; fi ;;
    *.catches_missing_prefetch)
      if [ -n "$prob" ] && ! grep -q '^EMU_ERROR' "$o"; then fail "trainer.$n" "$prob"
      elif [ "$rc" = 1 ] && grep -q '^FAIL: ' "$o" && grep -q 'FAIL (not finite)' "$o"; then
        pass "trainer.$n[$(grep -c 'FAIL (not finite)' "$o") tensors not finite, as they must be]"
      else fail "trainer.$n" "a backward that skips the prefetch was not caught (exit $rc; $(grep -m1 -E '^(PASS|FAIL):' "$o"))"; fi ;;
    *)
      if [ -n "$prob" ]; then fail "trainer.$n" "$prob"
      elif [ "$rc" = 0 ] && grep -q '^PASS: .* 0 failed' "$o"; then pass "trainer.$n[$(grep -m1 -oE '^PASS: [0-9]+ checks' "$o" | cut -c7-)$extra]"
      else
        why=$(grep -E ' FAIL|^FAIL|^error|^emu[: ]|required: FAIL' "$o" | head -n 3 | sed 's/  */ /g' | tr '\n' ';')
        fail "trainer.$n" "exit $rc: ${why:-$(tail -n 1 "$o")}"
      fi ;;
  esac
done
# --comm nccl against --comm mpi on the same run: every rank's downloads bitwise equal (the
# shim reduces in rank order with one rounding per addition, as comm.h's bf16 MPI operation does)
for p in fp32 bf16; do
  a="$B/out/test_llama.$p.dp2.zero_shard"; b="$B/out/test_llama.$p.nccl2.zero_shard"
  [ -e "$a.out" ] && [ -e "$b.out" ] || continue
  ha=$(grep -o 'd2h_hash=[0-9a-f]*' "$a.out" | sort | tr '\n' ' '); hb=$(grep -o 'd2h_hash=[0-9a-f]*' "$b.out" | sort | tr '\n' ' ')
  if [ "$(cat "$a.rc")" = 0 ] && [ "$(cat "$b.rc")" = 0 ] && [ "$(echo $ha | wc -w)" = 2 ] && [ "$ha" = "$hb" ]; then
    pass "trainer.test_llama.$p.nccl2.same_as_mpi[gqa_h4kv2_tied --zero 1 --shard-vocab 1: both ranks downloaded bitwise the same $(field "$b.out" d2h_bytes) bytes with --comm nccl as with --comm mpi]"
  else fail "trainer.test_llama.$p.nccl2.same_as_mpi" "the downloads differ (or a run failed): mpi: ${ha:-none} nccl: ${hb:-none}"; fi
done
# the NCCL shim's self-test: the correct case passes, each planted misuse ends in its error
NST="$B/bin/nccl_selftest.fp32"
if [ -e "$B/out/nccl_selftest.rc" ]; then
  for k in $("$NST" --list); do
    o="$B/out/nccl_selftest.$k.out"; rc=$(cat "$B/out/nccl_selftest.$k.rc" 2>/dev/null || echo none)
    if [ "$k" = ok ]; then
      if [ "$rc" = 0 ] && [ "$(grep -c ': ok (' "$o")" = 2 ]; then pass "trainer.nccl_selftest.ok[$(grep -m1 -o 'ok (.*)' "$o" | cut -c5- | tr -d ')') on rank 0, exact]"
      else fail "trainer.nccl_selftest.ok" "exit $rc: $(grep -m1 -E 'nccl_selftest|error' "$o")"; fi
    elif want=$("$NST" --expect "$k") && [ "$rc" != 0 ] && [ "$rc" != none ] && grep -qF "$want" "$o"; then
      pass "trainer.nccl_selftest.catches_$k"
    else fail "trainer.nccl_selftest.catches_$k" "the planted misuse was not caught (exit $rc): $(grep -m1 -E 'error|nccl_selftest' "$o" | cut -c1-200)"; fi
  done
fi
# models_identical PROG PREC LAZY_RUN WHAT: the stream-model runs downloaded the same bytes
models_identical() {
  local prog=$1 p=$2 lazy=$3 what=$4 hs="" m o
  for m in sync lazy lazy_eager_copies rev_schedule; do
    o="$B/out/$prog.$p.models.$m.out"
    [ $m = lazy ] && o="$B/out/$prog.$p.$lazy.out"
    [ -e "$o" ] || return
    hs="$hs $m=$(field "$o" d2h_hash)"
  done
  if [ "$(echo "$hs" | tr ' ' '\n' | grep . | cut -d= -f2 | sort -u | wc -l)" = 1 ]; then
    pass "trainer.$prog.$p.models.identical[$what under sync, lazy, lazy+eager copy streams, rev schedule: $(field "$B/out/$prog.$p.models.sync.out" d2h_bytes) bytes downloaded, bitwise equal]"
  else fail "trainer.$prog.$p.models.identical" "the downloads differ between stream models/schedules:$hs"; fi
}
# the fp32 accumulator against the bf16 sum: the rms over the gradient tensors of test_llama's
# relative error ||got - ref|| / ||ref||
grad_rms() { awk '/^gradients:/ {g = 1; next} /^[^ ]/ {g = 0} g && / rel / { for (i = 1; i < NF; i++) if ($i == "rel") { s += $(i + 1) ^ 2; n++ } }
                  END { if (n) printf "%.4g", sqrt(s / n) }' "$1"; }
GA="$B/out/test_llama.bf16.micro64_b64.microsteps64_gradacc"
if [ -e "${GA}0.out" ] && [ -e "${GA}1.out" ]; then
  e0=$(grad_rms "${GA}0.out"); e1=$(grad_rms "${GA}1.out")
  if [ -n "$e0" ] && [ -n "$e1" ] && awk -v a="$e1" -v b="$e0" 'BEGIN { exit !(a < b) }'; then
    pass "trainer.test_llama.bf16.micro64_b64.fp32_accumulation_tracks_better[64 micro-steps: rms gradient error $e1 with the fp32 accumulator, $e0 summed in bf16]"
  else fail "trainer.test_llama.bf16.micro64_b64.fp32_accumulation_tracks_better" "rms gradient error ${e1:-?} with the fp32 accumulator is not below ${e0:-?} summed in bf16"; fi
fi
for p in fp32 bf16; do
  models_identical test_llama $p deep_l5_gqa.chunks3_ce5_offloadall_rc1 "deep_l5_gqa with chunks, offload and recompute"
  models_identical test_dit $p dit_deep_l5.chunks3_offloadall_rc1 "dit_deep_l5 with chunks, offload and recompute"
done
if [ "${EMU_TRAINER_RESUME:-1}" != 0 ]; then
  for prog in train_llama train_dit; do
    ck=3; [ $prog = train_dit ] && ck=2  # the checkpoint the resumed run starts from
    run=run_${prog#train_}
    for p in fp32 bf16; do
      for n in full offload resumed; do
        o="$B/out/$prog.$p.$n.out"; [ -e "$o" ] || continue
        prob=$(emu_problem "$o"); rc=$(cat "$B/out/$prog.$p.$n.rc")
        if [ -n "$prob" ]; then fail "trainer.$prog.$p.$n" "$prob"
        elif [ "$rc" != 0 ]; then fail "trainer.$prog.$p.$n" "exit $rc: $(grep -m1 -E '^(error|FAIL)' "$o")"
        elif grep -qiE '^step .*loss -?(nan|inf)' "$o"; then fail "trainer.$prog.$p.$n" "non-finite loss: $(grep -m1 -iE '^step .*loss -?(nan|inf)' "$o")"
        else pass "trainer.$prog.$p.$n[$(grep -cE "^step +[0-9]+/[0-9]+ " "$o") steps, $(grep -c "^checkpoint:" "$o") checkpoints written]"; fi
      done
      F="$B/out/$run.$p.full"
      if [ $prog = train_llama ] && [ $p = bf16 ]; then
        for n in auto_fits auto_steps_down mpi2_auto_steps_down; do
          o="$B/out/$prog.$p.$n.out"; [ -e "$o" ] || continue
          want="^attention: tc2 \(--attention auto\)"; [ $n != auto_fits ] && want="^attention: tc \(--attention auto\)"
          prob=$(emu_problem "$o"); rc=$(cat "$B/out/$prog.$p.$n.rc")
          if [ -n "$prob" ]; then fail "trainer.$prog.$p.$n" "$prob"
          elif [ "$rc" != 0 ]; then fail "trainer.$prog.$p.$n" "exit $rc: $(grep -m1 -E '^(error|FAIL)' "$o")"
          elif ! grep -qE "$want" "$o"; then fail "trainer.$prog.$p.$n" "no line matching '$want': $(grep -m1 '^attention:' "$o")"
          elif [ $n != auto_fits ] && ! grep -q "tc2's plan .* does not fit this device" "$o"; then
            fail "trainer.$prog.$p.$n" "the step down is not explained in the log"
          else pass "trainer.$prog.$p.$n[$(grep -m1 '^attention:' "$o"); $(grep -cE "^step +[0-9]+/[0-9]+ " "$o") steps]"; fi
        done
      fi
      for cmp in resumed offload; do
        G="$B/out/$run.$p.$cmp"
        # compared only when both runs ended normally (a failed run has its own FAIL line)
        [ "$(cat "$B/out/$prog.$p.full.rc" 2>/dev/null)" = 0 ] && [ "$(cat "$B/out/$prog.$p.$cmp.rc" 2>/dev/null)" = 0 ] || continue
        if msg=$("$PY" - "$F" "$G" "$cmp" "$ck" 2>&1 <<'PYEOF'
import json, os, sys
full_dir, other_dir, what, ck = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
full = {r["step"]: r for r in map(json.loads, open(full_dir + "/metrics.jsonl"))}
other = [json.loads(l) for l in open(other_dir + "/metrics.jsonl")]
want = [s for s in sorted(full) if s > ck] if what == "resumed" else sorted(full)
assert [r["step"] for r in other] == want, ("steps", [r["step"] for r in other])
n = 0
for r in other:
    # the loss, the schedule, the norm and every validation loss (train_dit: per t range too)
    for k in sorted(set(r) | set(full[r["step"]])):
        if k in ("loss", "grad_norm", "lr") or k.startswith("val_loss"):
            assert r.get(k) == full[r["step"]].get(k), (r["step"], k, r.get(k), full[r["step"]].get(k))
            n += 1
# train_dit's last samples (GIF and PNG bytes of the sampler's output) must be the same too
samples = ""
if os.path.isdir(full_dir + "/samples"):
    last = sorted(f for f in os.listdir(full_dir + "/samples") if f.startswith("step_%06d_" % want[-1]))
    assert last, "the full run wrote no samples at step %d" % want[-1]
    for f in last:
        assert os.path.exists(other_dir + "/samples/" + f), ("missing sample", f)
        assert open(full_dir + "/samples/" + f, "rb").read() == open(other_dir + "/samples/" + f, "rb").read(), ("sample differs", f)
    samples = ", %d sample files byte-identical" % len(last)
print("steps %d-%d bit-identical (%d values)%s, last loss %.9g" % (want[0], want[-1], n, samples, other[-1]["loss"]))
PYEOF
        ); then pass "trainer.$prog.$p.$cmp.identical[$msg]"
        else fail "trainer.$prog.$p.$cmp.identical" "$(echo "$msg" | tail -n 1)"; fi
      done
    done
  done
fi
# the worst relative errors that test_llama and test_dit printed, per precision (information only)
for prog in test_llama test_dit; do
  for p in fp32 bf16; do
    ls "$B"/out/$prog.$p.*.out >/dev/null 2>&1 || continue
    awk -v p="$prog $p" '
      /^  [a-z_0-9]+ +n=/ { for (i = 1; i <= NF; i++) if ($i == "rel") { v = $(i + 1) + 0; k = ($1 == "logits" || $1 == "v_pred") ? $1 : "grads";
                            if (v > w[k]) { w[k] = v; at[k] = $1 " in " FILENAME } } }
      /^  (loss|step [0-9]+ loss) / { for (i = 1; i <= NF; i++) if ($i == "rel") { v = $(i + 1) + 0; k = ($1 == "loss") ? "loss" : "step_loss";
                            if (v > w[k]) { w[k] = v; at[k] = FILENAME } } }
      END { for (k in w) { sub(/.*\//, "", at[k]); printf "trainer: %s worst rel %-9s %.3e (%s)\n", p, k, w[k], at[k] == "" ? "all equal" : at[k] } }' \
      $(ls "$B"/out/$prog.$p.*.out | grep -v catches_) | sort
  done
done
finish
