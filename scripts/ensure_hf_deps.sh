#!/usr/bin/env bash
# Makes sure the project's Python (scripts/ensure_python_deps.sh: Debian's python3 with its
# CPU build of torch) can import the pinned Hugging Face packages that scripts/export_hf.py,
# scripts/import_hf.py and dev/test/hf_roundtrip.sh use. Idempotent and quick when they are
# there. Prints the interpreter to use on its last line (stdout). An install prints one line on
# stderr with its time and the path of its log (scripts/ensure_lib.sh: runs/install_logs/); a
# failed one prints the log's last lines and exits non-zero.
#
# Why these versions: Debian 12's python3-torch is torch 1.13 on Python 3.11.
# transformers 4.45.2 is the newest release whose LlamaForCausalLM, from_pretrained and
# generate() run on it: 4.46 added an FSDP check to generate() that imports
# torch.distributed.fsdp, which torch 1.13 cannot import under Python 3.11. It has
# attn_implementation="eager" and head_dim in LlamaConfig, and needs tokenizers
# 0.20.x and huggingface_hub >= 0.23.2; safetensors 0.4.5 is the release of the same
# weeks. None of them depends on torch, and the constraints below make pip fail rather
# than replace the installed torch or numpy.
set -euo pipefail
cd "$(dirname "$0")/.."
PINS=(transformers==4.45.2 tokenizers==0.20.3 safetensors==0.4.5 huggingface_hub==0.26.2)

PY=$(bash scripts/ensure_python_deps.sh | tail -n1)
check='import sys, transformers, safetensors
from transformers import LlamaForCausalLM, LlamaConfig
want = {"transformers": "4.45.2", "safetensors": "0.4.5"}
have = {"transformers": transformers.__version__, "safetensors": safetensors.__version__}
sys.exit(0 if have == want else "have %s, want %s" % (have, want))'
if "$PY" -c "$check" >/dev/null 2>&1; then echo "$PY"; exit 0; fi

source scripts/ensure_lib.sh
log=$(install_log_file ensure_hf_deps)
if ! "$PY" -m pip --version >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1; then
    install_quiet ensure_hf_deps python3-pip apt-get "$log" apt_get_install python3-pip || true
  fi
  if ! "$PY" -m pip --version >/dev/null 2>&1; then
    echo "ensure_hf_deps: $PY has no pip (apt-get install python3-pip)" >&2
    [ ! -s "$log" ] || install_log_tail "$log"
    exit 1
  fi
fi
# keep the installed torch and numpy: pip must satisfy everything around them or fail
cons=$(mktemp)
trap 'rm -f "$cons"' EXIT
"$PY" - > "$cons" <<'PYEOF'
import importlib.metadata as md
for name in ("torch", "numpy"):
    try:
        print("%s==%s" % (name, md.version(name)))
    except md.PackageNotFoundError:
        pass
PYEOF
where=()  # outside a virtual environment and not root: the user's site-packages
if [ "$(id -u)" != 0 ] && "$PY" -c 'import sys; sys.exit(sys.prefix != sys.base_prefix)'; then where=(--user); fi
# Debian marks its Python as externally managed (PEP 668); pip then installs into
# /usr/local, next to (not over) apt's packages. Older pips ignore these variables.
if ! PIP_BREAK_SYSTEM_PACKAGES=1 PIP_ROOT_USER_ACTION=ignore PIP_DISABLE_PIP_VERSION_CHECK=1 \
    install_quiet ensure_hf_deps "${PINS[*]} for $PY" pip "$log" "$PY" -m pip install "${where[@]}" -c "$cons" "${PINS[@]}"; then
  install_log_tail "$log"; exit 1
fi
if ! err=$("$PY" -c "$check" 2>&1); then
  echo "ensure_hf_deps: after pip install, $PY still cannot import the pinned transformers: $err" >&2
  exit 1
fi
echo "$PY"
