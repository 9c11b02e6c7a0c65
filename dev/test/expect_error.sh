# Sourced by the sub-test scripts (dev/test/dp_tests.sh, dev/test/hf_roundtrip.sh), which
# define pass, fail and the work directory W.
# expect_error NAME "WORDS" CMD...: passes when CMD exits non-zero (not a crash) and prints
# every word (case-insensitive) of WORDS: bad input must end with a clear message.
expect_error() {
  local name=$1 words=$2; shift 2
  "$@" >"$W/$name.log" 2>&1
  local rc=$? missing=""
  for w in $words; do grep -qi -- "$w" "$W/$name.log" || missing="$missing $w"; done
  if [ $rc -ne 0 ] && [ $rc -lt 128 ] && [ -z "$missing" ]; then pass "$name"
  else fail "$name" "exit $rc, missing:$missing; $(grep -m 2 -i error "$W/$name.log" | tr '\n' ' ')"; fi
}

# expect_mismatch NAME FLAG V0 V1 PROGRAM ARGS...: two ranks launched MPMD, rank 0 with
# --FLAG V0 and rank 1 with --FLAG V1 on top of ARGS, must end at start (no step line) with
# exit 1..123 and a message naming the flag and which rank has which value
# (llmc/train/same_config.h: every flag compared on the world before any group is formed)
expect_mismatch() {
  local name=$1 flag=$2 v0=$3 v1=$4 prog=$5; shift 5
  "${MPIRUN[@]}" -np 1 "$prog" "$@" --"$flag" "$v0" : -np 1 "$prog" "$@" --"$flag" "$v1" >"$W/$name.log" 2>&1
  local rc=$? why=""
  grep -q -- "disagree on the configuration: --$flag is '$v0' on rank 0; '$v1' on rank 1" "$W/$name.log" || why="no message naming --$flag and the ranks"
  if grep -q '^step  *1/' "$W/$name.log"; then why="$why; it trained"; fi
  if [ $rc -ne 0 ] && [ $rc -lt 124 ] && [ -z "$why" ]; then pass "$name"
  else fail "$name" "exit $rc${why:+, $why}; $(grep -m 1 -i error "$W/$name.log")"; fi
}
