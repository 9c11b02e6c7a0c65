#!/usr/bin/env bash
# Bad-input checks of llmc/io/dataloader.h, each in its own process (the loader exits(1)).
# Usage: bash dev/test/bad_shards.sh PATH/TO/test_dataloader
# Writes shards to a temp dir, runs `test_dataloader --open ...` on each, and asserts a
# non-zero exit and a message on stderr naming the problem. One line PASS/FAIL per
# check; exits non-zero on any failure.
set -u
bin="${1:-}"
if [ -z "$bin" ] || [ ! -x "$bin" ]; then
  echo "usage: $0 PATH/TO/test_dataloader (compiled dev/test/test_dataloader.c)" >&2
  exit 2
fi
tmp=$(mktemp -d "${TMPDIR:-/tmp}/bad_shards.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
fails=0

# little-endian int32 / uint16 as raw bytes
le32() { local v=$(( $1 & 0xFFFFFFFF )); printf "\\$(printf %03o $((v & 255)))\\$(printf %03o $(((v >> 8) & 255)))\\$(printf %03o $(((v >> 16) & 255)))\\$(printf %03o $(((v >> 24) & 255)))"; }
le16() { local v=$(( $1 & 0xFFFF )); printf "\\$(printf %03o $((v & 255)))\\$(printf %03o $(((v >> 8) & 255)))"; }
# shard FILE MAGIC VERSION HEADER_NTOK [token ...]: header of 256 int32, then the tokens as uint16
shard() {
  local f=$1 magic=$2 version=$3 ntok=$4; shift 4
  { le32 "$magic"; le32 "$version"; le32 "$ntok"; head -c $((253 * 4)) /dev/zero
    for t in "$@"; do le16 "$t"; done; } > "$f"
}
tokens() { local i; for ((i = 0; i < $1; i++)); do echo $(( (i * 7919) % 31000 + 2 )); done; }

# expect NAME WANT(ok|fail) GREP_WORDS -- ARGS...: run the binary with --open ARGS
expect() {
  local name=$1 want=$2 words=$3; shift 4
  "$bin" --open "$@" >"$tmp/out" 2>"$tmp/err"
  local rc=$?
  if [ "$want" = ok ]; then
    if [ $rc -eq 0 ] && grep -q OK "$tmp/out"; then echo "PASS $name"
    else echo "FAIL $name: exit $rc, stderr: $(head -c 300 "$tmp/err")"; fails=$((fails + 1)); fi
    return
  fi
  local missing=""
  for w in $words; do grep -qi -- "$w" "$tmp/err" || missing="$missing $w"; done
  if [ $rc -ne 0 ] && [ -z "$missing" ]; then echo "PASS $name"
  elif [ $rc -eq 0 ]; then echo "FAIL $name: exit 0 (expected an error)"; fails=$((fails + 1))
  else echo "FAIL $name: exit $rc but stderr lacks '${missing# }': $(head -c 300 "$tmp/err")"; fails=$((fails + 1)); fi
}

# a good shard first, so that the failures below are about the defect only
shard "$tmp/good.bin" 20240520 1 200 $(tokens 200)
expect good_shard_opens ok "" -- "$tmp/good.bin" 2 16 32000

shard "$tmp/badmagic.bin" 12345 1 200 $(tokens 200)
expect bad_magic fail "magic badmagic.bin" -- "$tmp/badmagic.bin" 2 16

shard "$tmp/badversion.bin" 20240520 3 200 $(tokens 200)
expect bad_version fail "version badversion.bin" -- "$tmp/badversion.bin" 2 16

shard "$tmp/truncated.bin" 20240520 1 1000 $(tokens 500)
expect truncated_shard fail "truncated truncated.bin 1000" -- "$tmp/truncated.bin" 2 16

head -c 100 "$tmp/good.bin" > "$tmp/header_only.bin"
expect truncated_header fail "header header_only.bin" -- "$tmp/header_only.bin" 2 16

shard "$tmp/short.bin" 20240520 1 10 $(tokens 10)
expect shard_shorter_than_T fail "short short.bin" -- "$tmp/short.bin" 2 16

toks=$(tokens 300 | awk 'NR == 158 { print 40000; next } { print }')
shard "$tmp/bigid.bin" 20240520 1 300 $toks
expect token_id_out_of_vocab fail "vocab 40000 157 bigid.bin" -- "$tmp/bigid.bin" 2 16 32000

expect missing_pattern fail "no.files.match nothing_" -- "$tmp/nothing_*.bin" 2 16

# a bad shard among good ones is found too
mkdir "$tmp/set"; cp "$tmp/good.bin" "$tmp/set/s_000.bin"; cp "$tmp/truncated.bin" "$tmp/set/s_001.bin"
expect bad_shard_in_pattern fail "truncated s_001.bin" -- "$tmp/set/s_*.bin" 2 16

if [ $fails -eq 0 ]; then echo "bad_shards: all passed"; exit 0; fi
echo "bad_shards: $fails failed"; exit 1
