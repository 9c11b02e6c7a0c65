#!/usr/bin/env bash
# Makes sure the Python used by the project's scripts can import torch, numpy, matplotlib and
# sentencepiece. Debian's packages (a CPU build of PyTorch) are the light way: pip's
# torch pulls gigabytes of CUDA libraries. Idempotent and quick when already there.
# Prints the interpreter to use on its last line.
set -euo pipefail
want="import torch, numpy, sentencepiece, matplotlib, PIL"  # PIL (a matplotlib dependency) decodes the DiT GIFs in make test
for py in "${LLMC_PYTHON:-}" /usr/bin/python3 python3; do
  [ -n "$py" ] || continue
  if command -v "$py" >/dev/null 2>&1 && "$py" -c "$want" >/dev/null 2>&1; then
    echo "$py"; exit 0
  fi
done
echo "ensure_python_deps: installing python3-torch python3-numpy python3-sentencepiece python3-matplotlib (apt-get)" >&2
if command -v apt-get >/dev/null 2>&1; then
  SUDO=""; [ "$(id -u)" = 0 ] || SUDO="sudo"
  $SUDO apt-get update -q >&2 || true
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q python3-torch python3-numpy python3-sentencepiece python3-matplotlib >&2
fi
if /usr/bin/python3 -c "$want" >/dev/null 2>&1; then echo /usr/bin/python3; exit 0; fi
echo "ensure_python_deps: apt did not work; trying pip" >&2
python3 -m pip install -q numpy sentencepiece matplotlib >&2
python3 -m pip install -q torch >&2
python3 -c "$want" >/dev/null 2>&1 || { echo "ensure_python_deps: could not make torch, numpy, sentencepiece, matplotlib importable" >&2; exit 1; }
echo python3
