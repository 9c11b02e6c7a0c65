# Shared by the multi-process test scripts (dp_tests.sh, tp_tests.sh), sourced after they set
# PY and W: the Open MPI launcher as the tests run it (one OpenMP thread per rank, may
# oversubscribe the cores and run as root, as CI does), the PASS/FAIL lines and the
# metrics comparison.
MPIRUN=(mpirun --oversubscribe --allow-run-as-root --bind-to none -x OMP_NUM_THREADS=1)
export OMP_NUM_THREADS=1
failed=0
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1${2:+: $2}"; failed=1; }
# a hung collective must cost one check, not the whole make test
RUN_LIMIT=${RUN_LIMIT:-180}
run_np() { local np=$1; shift; timeout -k 10 "$RUN_LIMIT" "${MPIRUN[@]}" -np "$np" "$@"; }
# passes_np NAME NP CMD...: CMD (a test program) under mpirun -np NP must end with its PASS line
passes_np() {
  local name=$1 np=$2; shift 2
  if run_np "$np" "$@" >"$W/$name.log" 2>&1 && grep -q "^PASS" "$W/$name.log"; then pass "$name"
  else fail "$name" "$(grep -E 'FAIL|error' "$W/$name.log" | head -n 3 | tr '\n' ' ')"; fi
}
# agree NAME A_DIR B_DIR FIRST_STEP TOL: their metrics.jsonl agree from FIRST_STEP on (compare_metrics.py)
agree() {
  if "$PY" dev/test/compare_metrics.py "$2/metrics.jsonl" "$3/metrics.jsonl" "$4" "$5" >"$W/$1.cmp" 2>&1; then pass "$1"
  else fail "$1" "$(tail -n 1 "$W/$1.cmp")"; fi
}
# toy_tokenizer PATH: a llama2.c tokenizer of 512 pieces " t<id>", which keeps sampled stories printable
toy_tokenizer() {
  "$PY" - "$1" <<'PYEOF'
import struct, sys
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("<i", 16))
    for i in range(512):
        p = b" t%d" % i
        f.write(struct.pack("<fi", -float(i), len(p)) + p)
PYEOF
}
if ! command -v mpirun >/dev/null 2>&1; then
  fail mpi_available "mpirun not found (apt-get install openmpi-bin libopenmpi-dev; .ci/run installs them)"; exit 1
fi
