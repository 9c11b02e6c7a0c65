#!/usr/bin/env bash
# Makes sure the Python used by the project's scripts can import torch, numpy, matplotlib and
# sentencepiece. Debian's packages (a CPU build of PyTorch) are the light way: pip's
# torch pulls gigabytes of CUDA libraries. Idempotent and quick when already there.
# Prints the interpreter to use on its last line (stdout). An install prints one line on
# stderr with its time and the path of its log (scripts/ensure_lib.sh: runs/install_logs/);
# when nothing works it prints the log's last lines and exits non-zero.
set -euo pipefail
want="import torch, numpy, sentencepiece, matplotlib, PIL"  # PIL (a matplotlib dependency) decodes the DiT GIFs in make test
for py in "${LLMC_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$py" ] || continue
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "$want" >/dev/null 2>&1; then
    echo "$py"; exit 0
  fi
done
source "$(dirname "$0")/ensure_lib.sh"
log=$(install_log_file ensure_python_deps)
debs=(python3-torch python3-numpy python3-sentencepiece python3-matplotlib)
if command -v apt-get >/dev/null 2>&1; then
  install_quiet ensure_python_deps "${debs[*]}" apt-get "$log" apt_get_install "${debs[@]}" || true
else
  echo "ensure_python_deps: no apt-get for ${debs[*]}" >&2
fi
if /usr/bin/python3 -c "$want" >/dev/null 2>&1; then echo /usr/bin/python3; exit 0; fi
pip_install() { python3 -m pip install numpy sentencepiece matplotlib && python3 -m pip install torch; }
install_quiet ensure_python_deps "numpy sentencepiece matplotlib torch" "pip, as apt-get did not do it" "$log" pip_install || true
if ! python3 -c "$want" >/dev/null 2>&1; then
  echo "ensure_python_deps: could not make torch, numpy, sentencepiece, matplotlib importable" >&2
  install_log_tail "$log"; exit 1
fi
echo python3
