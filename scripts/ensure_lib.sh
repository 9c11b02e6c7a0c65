# Sourced by scripts/ensure_build_deps.sh, ensure_python_deps.sh and ensure_hf_deps.sh: a package
# install prints one line on stderr, what is installed, how, how long it took and where its log is:
#   ensure_build_deps: installing openmpi-bin libopenmpi-dev (apt-get) ... done in 41 s, log: /path/to.log
# apt-get's or pip's own output goes to that log, a new file per run in runs/install_logs/ of
# the repository (git-ignored; LLMC_INSTALL_LOG_DIR to choose another folder; /tmp when it
# cannot be written). A failed install says "failed after N s (exit C)" on that line; the
# scripts then print the log's last lines (install_log_tail) and exit non-zero where the
# install was needed. Nothing here writes to stdout, whose last line the scripts keep for
# their callers (the interpreter to use).

# install_log_file NAME: the path of a new log file for NAME's installs
install_log_file() {
  local dir=${LLMC_INSTALL_LOG_DIR:-$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)/runs/install_logs}
  if ! mkdir -p "$dir" 2>/dev/null || [ ! -w "$dir" ]; then dir=${TMPDIR:-/tmp}; fi
  echo "$dir/$1-$(date +%Y%m%d-%H%M%S)-$$.log"
}

# install_quiet NAME WHAT HOW LOG CMD...: runs CMD (a command or a shell function) with its
# output appended to LOG and stdin from /dev/null, printing the one line; returns CMD's status
install_quiet() {
  local name=$1 what=$2 how=$3 log=$4 t0 rc=0
  shift 4
  printf '%s: installing %s (%s) ... ' "$name" "$what" "$how" >&2
  t0=$(date +%s)
  echo "=== $(date '+%Y-%m-%d %H:%M:%S') $name: $*" >>"$log"
  "$@" >>"$log" 2>&1 </dev/null || rc=$?
  if [ "$rc" = 0 ]; then
    printf 'done in %d s, log: %s\n' $(( $(date +%s) - t0 )) "$log" >&2
  else
    printf 'failed after %d s (exit %d), log: %s\n' $(( $(date +%s) - t0 )) "$rc" "$log" >&2
  fi
  return "$rc"
}

# install_log_tail LOG [N]: the last N (20) lines of LOG on stderr, indented
install_log_tail() {
  echo "  last lines of $1:" >&2
  tail -n "${2:-20}" "$1" | sed 's/^/  | /' >&2
}

# apt_get_install PKG...: apt-get update (once per script; its failure is not fatal: the lists
# may be recent enough) and apt-get install, non-interactive, waiting up to 10 minutes for the
# lock another apt-get or dpkg holds instead of failing at once
apt_get_install() {
  local sudo=""
  [ "$(id -u)" = 0 ] || sudo="sudo"
  if [ -z "${APT_UPDATED:-}" ]; then
    $sudo apt-get -o DPkg::Lock::Timeout=600 update -q || echo "(apt-get update failed: installing from the lists there are)"
    APT_UPDATED=1
  fi
  $sudo env DEBIAN_FRONTEND=noninteractive apt-get -o DPkg::Lock::Timeout=600 install -y -q "$@"
}
