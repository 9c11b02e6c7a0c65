#!/usr/bin/env bash
# Makes sure the cudnn-frontend C++ headers are here for `make USE_CUDNN=1` (the frontend of
# llmc/kernels/cudnn_attention.cpp). They are not in the repository: NVIDIA publishes them in
# the nvidia-cudnn-frontend wheel on PyPI (include/cudnn_frontend*.h), which this script
# downloads with pip, checks against a pinned sha256 and unpacks, include/ only, into
#   build/cudnn-frontend/VERSION/include      (git-ignored; LLMC_CUDNN_FE_DIR to choose another)
# Pinned: the frontend version the code was written against, and one wheel of it (the headers are
# the same in every wheel of a version; the cp312 manylinux one is taken whatever the local Python).
# Idempotent and silent when the headers are there; an install prints one line, its time and
# its log (scripts/ensure_lib.sh: runs/install_logs/); a failure prints the log's last lines and
# exits non-zero. cuDNN itself (libcudnn, cudnn.h) comes from the CUDA Toolkit or a cuDNN package.
set -euo pipefail
VERSION=1.32.0
WHEEL=nvidia_cudnn_frontend-$VERSION-cp312-cp312-manylinux_2_27_x86_64.manylinux_2_28_x86_64.whl
SHA256=8b354a8e550c083eb247f1eb39a7d69a4a269075f5a01e4fcbd2531680b17239
root=$(cd "$(dirname "$0")/.." && pwd)
dest=${LLMC_CUDNN_FE_DIR:-$root/build/cudnn-frontend/$VERSION}
[ -f "$dest/include/cudnn_frontend.h" ] && [ "$(cat "$dest/VERSION" 2>/dev/null)" = "$VERSION" ] && exit 0

source "$root/scripts/ensure_lib.sh"
log=$(install_log_file ensure_cudnn_frontend)
tmp=$(mktemp -d "${TMPDIR:-/tmp}/cudnn-frontend.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
python=$(command -v python3 || command -v python || true)
[ -n "$python" ] || { echo "ensure_cudnn_frontend: python3 (with pip) is needed to download the cudnn-frontend headers" >&2; exit 1; }

fetch() {
  "$python" -m pip download --no-deps --only-binary=:all: --platform manylinux_2_28_x86_64 --python-version 3.12 \
    --implementation cp --abi cp312 "nvidia-cudnn-frontend==$VERSION" -d "$tmp"
  echo "$SHA256  $tmp/$WHEEL" | sha256sum -c -
  "$python" - "$tmp/$WHEEL" "$tmp/unpacked" <<'EOF'
import sys, zipfile
z = zipfile.ZipFile(sys.argv[1])
names = [n for n in z.namelist() if n.startswith("include/")]
if not any(n == "include/cudnn_frontend.h" for n in names):
    sys.exit("the wheel has no include/cudnn_frontend.h")
z.extractall(sys.argv[2], names)
print(len(names), "entries of include/ unpacked")
EOF
  mkdir -p "$(dirname "$dest")"
  rm -rf "$dest.new"
  mkdir -p "$dest.new"
  mv "$tmp/unpacked/include" "$dest.new/include"
  echo "$VERSION" > "$dest.new/VERSION"
  rm -rf "$dest"
  mv "$dest.new" "$dest"
}
if ! install_quiet ensure_cudnn_frontend "the cudnn-frontend $VERSION headers" "pip download of nvidia-cudnn-frontend, include/ only" \
     "$log" fetch; then
  install_log_tail "$log"; exit 1
fi
