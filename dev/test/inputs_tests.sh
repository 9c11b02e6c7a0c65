#!/usr/bin/env bash
# Inputs and outputs end with a message, never a hang or a lost file (docs/formats.md, "Files
# a run reads and writes"): every input flag given a FIFO, outputs given a FIFO without a
# reader and /dev/full, control bytes in tokenizer pieces and in file names printed escaped,
# and ranks given different flags under mpirun stopped by the configuration check.
# One PASS/FAIL line a check (run_tests.sh counts them).
#   bash dev/test/inputs_tests.sh PYTHON WORKDIR
# Every run is under `timeout 20`: a blocking open is a failure, not a hung make test.
set -u
PY=$1; W=$2
cd "$(dirname "$0")/../.."
rm -rf "$W"; mkdir -p "$W"
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; failed=1; }
export OMP_NUM_THREADS=1

# expect_error NAME "WORDS" CMD...: CMD exits 1..123 within 20 s and its output holds every
# word of WORDS (case-insensitive; '|' separates words)
expect_error() {
  local name=$1 words=$2 rc missing="" w; shift 2
  timeout 20 "$@" >"$W/$name.log" 2>&1; rc=$?
  IFS='|' read -ra ws <<< "$words"
  for w in "${ws[@]}"; do grep -qiF -- "$w" "$W/$name.log" || missing="$missing '$w'"; done
  if [ $rc -eq 124 ]; then fail "$name" "hung (killed after 20 s)"
  elif [ $rc -eq 0 ]; then fail "$name" "exit 0, expected an error"
  elif [ $rc -gt 123 ]; then fail "$name" "exit $rc (a crash, not a message)"
  elif [ -n "$missing" ]; then fail "$name" "exit $rc but the message lacks:$missing: $(grep -i error "$W/$name.log" | head -n 2 | tr '\n' ' ')"
  else pass "$name"; fi
}

LM=(--model tiny --V 256 --D 32 --L 2 --H 2 --KV 1 --F 64 --max-seq-len 16 --batch 2 --seq 16 --warmup 1 --val-every 0)
DM=(--D 16 --L 2 --H 2 --FF 32 --channels 1 --frames 2 --height 8 --width 8 --NC 2 --batch 2 --warmup 1 --val-clips 2)
"$PY" - "$W/train.bin" <<'PYEOF'
import random, struct, sys
r = random.Random(1)
t = [1] + [r.randrange(2, 256) for _ in range(4000)]
open(sys.argv[1], "wb").write(struct.pack("<256i", 20240520, 1, len(t), *([0] * 253)) + struct.pack("<%dH" % len(t), *t))
PYEOF
# a run directory of each trainer with checkpoints at steps 1 and 2
timeout 60 ./train_llama_cpu "${LM[@]}" --steps 2 --ckpt-every 1 --train-data "$W/train.bin" --run-dir "$W/llama_run" > "$W/llama_run.log" 2>&1 ||
  fail setup_llama_run "$(tail -n 3 "$W/llama_run.log")"
timeout 60 ./train_dit_cpu "${DM[@]}" --steps 2 --ckpt-every 1 --val-every 0 --run-dir "$W/dit_run" > "$W/dit_run.log" 2>&1 ||
  fail setup_dit_run "$(tail -n 3 "$W/dit_run.log")"

# --- every input flag given a FIFO: refused at once, naming the file and what it is
F="$W/input.fifo"
mkfifo "$F"
T=(--train-data "$W/train.bin")
expect_error fifo_train_data "input.fifo|FIFO" ./train_llama_cpu "${LM[@]}" --steps 1 --train-data "$F" --run-dir "$W/r1"
expect_error fifo_val_data "input.fifo|FIFO" ./train_llama_cpu "${LM[@]}" --steps 1 "${T[@]}" --val-every 1 --val-data "$F" --run-dir "$W/r2"
expect_error fifo_tokenizer "--tokenizer|input.fifo|FIFO" ./train_llama_cpu "${LM[@]}" --steps 1 "${T[@]}" --sample-every 1 --tokenizer "$F" --run-dir "$W/r3"
expect_error fifo_llama_resume "input.fifo|FIFO" ./train_llama_cpu "${LM[@]}" --steps 3 "${T[@]}" --resume "$F" --run-dir "$W/r4"
expect_error fifo_llama_init_from "input.fifo|FIFO" ./train_llama_cpu "${LM[@]}" --steps 1 "${T[@]}" --init-from "$F" --run-dir "$W/r5"
expect_error fifo_dit_data "clip file|input.fifo|FIFO" ./train_dit_cpu "${DM[@]}" --steps 1 --data "$F" --run-dir "$W/r6"
expect_error fifo_dit_resume "input.fifo|FIFO" ./train_dit_cpu "${DM[@]}" --steps 3 --resume "$F" --run-dir "$W/r7"
expect_error fifo_dit_init_from "input.fifo|FIFO" ./train_dit_cpu "${DM[@]}" --steps 1 --init-from "$F" --run-dir "$W/r8"
expect_error fifo_test_llama_ref "--ref|input.fifo|FIFO" ./test_llama_cpu --ref "$F"
expect_error fifo_test_dit_ref "--ref|input.fifo|FIFO" ./test_dit_cpu --ref "$F"

# --- --resume auto: a FIFO named like the newest checkpoint refuses the run at once (not a checkpoint it can read,
# never overwritten: llmc/train/run_open.h), naming it; the directory as it was
for prog in llama dit; do
  mkfifo "$W/${prog}_run/ckpt_000009.bin"
  if [ $prog = llama ]; then cmd=(./train_llama_cpu "${LM[@]}" "${T[@]}"); else cmd=(./train_dit_cpu "${DM[@]}" --val-every 0); fi
  before=$(ls -l "$W/${prog}_run" | md5sum)
  timeout 20 "${cmd[@]}" --steps 3 --resume auto --run-dir "$W/${prog}_run" > "$W/auto_$prog.log" 2>&1; rc=$?
  if [ $rc -ge 1 ] && [ $rc -le 123 ] && grep -q "ckpt_000009.bin is not a regular file" "$W/auto_$prog.log" &&
     [ "$(ls -l "$W/${prog}_run" | md5sum)" = "$before" ]
  then pass "resume_auto_refuses_fifo_$prog"
  else fail "resume_auto_refuses_fifo_$prog" "exit $rc: $(grep -i 'skip\|resum\|error' "$W/auto_$prog.log" | head -n 3 | tr '\n' ' ')"; fi
done

# --- outputs: a FIFO without a reader fails at once (ENXIO), a FIFO with one is refused, /dev/full is a failure
O="$W/output.fifo"
mkfifo "$O"
PLAN=(./train_llama_cpu "${LM[@]}" --plan-only 1)
expect_error plan_json_fifo "--plan-json|output.fifo|FIFO" "${PLAN[@]}" --plan-json "$O"
expect_error plan_json_dev_full "--plan-json|/dev/full|No space left on device" "${PLAN[@]}" --plan-json /dev/full
expect_error dit_plan_json_fifo "--plan-json|output.fifo|FIFO" ./train_dit_cpu "${DM[@]}" --plan-only 1 --plan-json "$O"
expect_error fit_candidates_fifo "--fit-candidates|output.fifo|FIFO" "${PLAN[@]}" --fit-memory 1 --fit-candidates "$O"
expect_error fit_candidates_dev_full "--fit-candidates|/dev/full|No space left on device" "${PLAN[@]}" --fit-memory 1 --fit-candidates /dev/full
expect_error test_dump_fifo "--dump|output.fifo|FIFO" ./test_llama_cpu --ref dev/ref/mha_tied_odd.lref --dump "$O"
expect_error test_dump_dev_full "--dump|/dev/full|No space left on device" ./test_llama_cpu --ref dev/ref/mha_tied_odd.lref --dump /dev/full
# with a reader the open succeeds; the FIFO is still refused. (The reader is this shell's own descriptor, opened
# read-write, which on Linux never blocks: a reader started in the background might not have opened it yet.)
exec 3<>"$O"
expect_error plan_json_fifo_with_reader "--plan-json|output.fifo|is a FIFO" "${PLAN[@]}" --plan-json "$O"
exec 3<&-
# /dev/null, a character device, is a valid output
if timeout 20 "${PLAN[@]}" --plan-json /dev/null > "$W/plan_null.log" 2>&1; then pass plan_json_dev_null
else fail plan_json_dev_null "$(grep error "$W/plan_null.log" | head -n 2)"; fi

# --- text a terminal can trust: a tokenizer whose pieces hold ESC, BEL, CR, BS, DEL and C1 CSI (0xc2 0x9b)
"$PY" - "$W/esc_tok.bin" <<'PYEOF'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", 16))
    for i in range(256):
        p = [b"\x1b[31mR%d" % i, b"\xc2\x9b2J%d" % i, b" \x07b\x7f%d" % i, b"\r\x08ok\xe2\x80\x99%d" % i][i % 4]
        f.write(struct.pack("<fi", -float(i), len(p)) + p)
PYEOF
timeout 20 ./train_llama_cpu "${LM[@]}" --steps 1 "${T[@]}" --sample-every 1 --sample-len 24 --tokenizer "$W/esc_tok.bin" \
  --run-dir "$W/esc_run" > "$W/esc_sample.out" 2> "$W/esc_sample.err"; rc=$?
"$PY" - "$rc" "$W/esc_sample.out" "$W/esc_run/main.log" <<'PYEOF'
import re, sys
rc, out, log = int(sys.argv[1]), open(sys.argv[2], "rb").read(), open(sys.argv[3], "rb").read()
sample = re.search(rb"--- sample ---\n(.*?)\n-----", out, re.S)
bad = lambda b: re.search(rb"[\x00-\x08\x0b-\x1f\x7f]|\xc2[\x80-\x9f]", b)
if rc != 0 or not sample:
    print("FAIL tokenizer_escaped: exit %d, sample %s" % (rc, "found" if sample else "missing"))
elif bad(out) or bad(log):
    print("FAIL tokenizer_escaped: a raw control byte on %s" % ("stdout" if bad(out) else "main.log"))
elif sum(s in sample.group(1) for s in [rb"\x1b[31mR", rb"\x07b\x7f", rb"\x0d\x08ok", rb"\xc2\x9b2J"]) < 2:
    print("FAIL tokenizer_escaped: the escaped pieces are not in the sample: %r" % sample.group(1)[:200])
elif (rb"\x0d\x08ok" in sample.group(1) and b"\xe2\x80\x99" not in sample.group(1)) or sample.group(1) not in log:
    print("FAIL tokenizer_escaped: valid UTF-8 changed, or main.log holds other text than stdout")
else:
    print("PASS tokenizer_escaped (stdout and main.log: no raw control byte, the same escaped sample)")
PYEOF
# file names: an error naming a run directory and a data file with ESC and BEL in them
touch "$W/a_file"
ESC=$(printf '\033')
BEL=$(printf '\007')
expect_error esc_in_run_dir_path 'cannot create the run directory|\x1b[2J' ./train_llama_cpu "${LM[@]}" --steps 1 "${T[@]}" --run-dir "$W/a_file/run${ESC}[2Jdir"
expect_error esc_in_data_path '\x1b]0;title\x07' ./train_llama_cpu "${LM[@]}" --steps 1 --train-data "$W/no${ESC}]0;title${BEL}.bin" --run-dir "$W/r9"
for n in esc_in_run_dir_path esc_in_data_path; do
  if grep -q "$ESC\|$BEL" "$W/$n.log"; then fail "${n}_raw_bytes" "a raw control byte in the message"; else pass "${n}_raw_bytes"; fi
done

# --- ranks given different flags: the configuration check's message names the flag (not an MPI
# error at the first collective the flag changes, nor at the first sample after training)
if command -v mpirun >/dev/null 2>&1; then
  MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none --mca odls_base_sigkill_timeout 0 -x OMP_NUM_THREADS=1)
  # rank 1 gets the extra flags of RANK1 (split on spaces)
  cat > "$W/rank_flags.sh" <<'EOF'
#!/usr/bin/env bash
if [ "${OMPI_COMM_WORLD_RANK:-0}" = 1 ]; then exec "$@" $RANK1; else exec "$@"; fi
EOF
  chmod +x "$W/rank_flags.sh"
  LONG=$(printf 'd%.0s' $(seq 1 1100))
  mpi_case() {  # NAME FLAG RANK1_FLAGS [RANK0_FLAGS...]
    local name=$1 flag=$2 r1=$3; shift 3
    export RANK1=$r1
    expect_error "$name" "disagree on the configuration|$flag is" "${MPIRUN[@]}" -x RANK1 -np 2 "$W/rank_flags.sh" \
      ./train_llama_cpu --model tiny --V 256 --D 32 --L 2 --H 4 --KV 2 --F 64 --max-seq-len 16 --batch 2 --seq 16 \
      --steps 1 --val-every 0 "${T[@]}" --run-dir "$W/mpi_$name" "$@"
  }
  mpi_case ranks_differ_cp --cp "--cp 2"
  mpi_case ranks_differ_cp_mode --cp-mode "--cp-mode ulysses" --cp 2
  mpi_case ranks_differ_cp_ulysses --cp-ulysses "--cp-ulysses 2" --cp 2 --cp-mode hybrid --cp-ulysses 1
  mpi_case ranks_differ_sample_len --sample-len "--sample-len 7"
  mpi_case ranks_differ_temperature --temperature "--temperature 0.5"
  mpi_case ranks_differ_tokenizer --tokenizer "--tokenizer $W/other_tok.bin"
  # a path that differs only after 1100 characters is another value (compared whole, not by a cut copy)
  mpi_case ranks_differ_long_path --tokenizer "--tokenizer $W/$LONG/b.bin" --tokenizer "$W/$LONG/a.bin"
else
  fail mpi_available "mpirun not found (apt-get install openmpi-bin libopenmpi-dev)"
fi
exit $failed
