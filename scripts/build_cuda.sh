#!/usr/bin/env bash
# Compiles every kernels/*.cu and src/backend/cuda/*.cu (the CUDA backend) with nvcc for sm_80 (A100) and sm_90 (H100), warnings as errors,
# and keeps ptxas's register/spill report in build-cuda/ptxas.log. Needs the CUDA toolkit, not a
# GPU. Usage: scripts/build_cuda.sh   (NVCC=/path/to/nvcc and BUILD_DIR=... override)
set -euo pipefail
cd "$(dirname "$0")/.."

NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
BUILD_DIR=${BUILD_DIR:-build-cuda}
if [ ! -x "$NVCC" ]; then
  echo "[build_cuda] nvcc not found (set NVCC=...)" >&2
  exit 1
fi
mkdir -p "$BUILD_DIR"
LOG="$BUILD_DIR/ptxas.log"
: >"$LOG"

shopt -s nullglob
sources=(kernels/*.cu src/backend/cuda/*.cu)
if [ ${#sources[@]} -eq 0 ]; then
  echo "[build_cuda] no kernels/*.cu to compile"
  exit 0
fi

# -Werror all-warnings covers nvcc's own diagnostics; -Xcompiler covers the host pass.
FLAGS=(-std=c++17 -O3 -Isrc
       -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
       -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings -Xptxas -v)

status=0
for src in "${sources[@]}"; do
  obj="$BUILD_DIR/$(basename "${src%.cu}").o"
  echo "[build_cuda] $src"
  echo "=== $src" >>"$LOG"
  # ptxas -v reports on stderr; keep it all in the log and show it only if the build fails.
  if ! "$NVCC" "${FLAGS[@]}" -c "$src" -o "$obj" >>"$LOG" 2>&1; then
    echo "[build_cuda] FAILED: $src (see $LOG)" >&2
    status=1
  fi
done
if [ $status -ne 0 ]; then
  cat "$LOG" >&2
  exit $status
fi
# A short summary of what reviewers look for: registers and any spill per kernel and arch.
grep -E "Compiling entry|Used [0-9]+ registers|spill" "$LOG" || true
echo "[build_cuda] ok: ${#sources[@]} file(s), ptxas report in $LOG"
