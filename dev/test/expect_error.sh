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
