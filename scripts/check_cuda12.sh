#!/usr/bin/env bash
# CI check that the CUDA code builds with a CUDA 12 toolkit, the one for NVIDIA drivers 525-575
# (docs/cuda.md): every kernels/*.cu and src/backend/cuda/*.cu compiled by CUDA 12.4's nvcc with
# warnings as errors (cuDNN attention included, against the frontend setup.sh installs), and the NCCL communicator compiled against NCCL 2.21's nccl.h with every
# NCCL/CUDA symbol it calls found in that libnccl and libcudart 12.4. Compile only (no ptxas
# report: registers are build_cuda.sh's business, with the main toolkit). One architecture, sm_80,
# while no source has a path of its own for sm_90 (an `__CUDA_ARCH__ >= 900` or the like): sm_90
# would put the same code through the same front end a second time, at the same cost (cicc and
# ptxas ~27 s each per architecture for attention_fwd.cu). Such a path, once written, turns sm_90
# back on here. The full binary is `CUDA_HOME=$(scripts/cuda12_toolkit.sh) scripts/build_cuda.sh`.
# The toolkit comes from scripts/cuda12_toolkit.sh (downloaded once, ~700 MB) unless CUDA12_HOME
# names one. Usage: scripts/check_cuda12.sh   (CUDA12_HOME=..., BUILD_DIR=..., JOBS=2)
set -euo pipefail
cd "$(dirname "$0")/.."
CUDA12_HOME=${CUDA12_HOME:-$(bash scripts/cuda12_toolkit.sh)}
NVCC="$CUDA12_HOME/bin/nvcc"
BUILD_DIR=${BUILD_DIR:-build-cuda12}
rm -rf "$BUILD_DIR"
mkdir -p "$BUILD_DIR"
"$NVCC" --version | tail -2

shopt -s nullglob
sources=(kernels/*.cu src/backend/cuda/*.cu src/backend/cuda/cudnn_sdpa.cpp)
# The flags of scripts/build_cuda.sh, without its ptxas report, for the architectures above.
GENCODE="-gencode arch=compute_80,code=sm_80"
# Any comparison of __CUDA_ARCH__ with a number other than 800, in any CUDA source or header.
if grep -rnE --include='*.cu' --include='*.cuh' --include='*.h' \
  '__CUDA_ARCH__ *[<>=!]+ *[0-9]+' kernels src | grep -vE '__CUDA_ARCH__ *>= *800\b'; then
  echo "[cuda12] an sm_90 path (above): compiling for sm_90 too"
  GENCODE="$GENCODE -gencode arch=compute_90,code=sm_90"
fi
# cuDNN attention (src/backend/cuda/cudnn_sdpa.cpp, host code) as the GPU build compiles it, here
# through nvcc's host pass against CUDA 12.4's runtime headers: the frontend from .venv
# (scripts/setup.sh) and cudnn*.h alone from the main toolkit's cuDNN (its other headers would
# shadow CUDA 12.4's).
CUDNN_FLAGS=""
FE_DIR=$(ls -d .venv/lib/python3*/site-packages/include 2>/dev/null | head -1)
CUDNN_H=${CUDNN_H:-$(ls /usr/local/cuda/include/cudnn.h 2>/dev/null || true)}
if [ -n "$FE_DIR" ] && [ -f "$FE_DIR/cudnn_frontend.h" ] && [ -n "$CUDNN_H" ]; then
  mkdir -p "$BUILD_DIR/cudnn-include"
  cp "$(dirname "$CUDNN_H")"/cudnn*.h "$BUILD_DIR/cudnn-include/"
  CUDNN_FLAGS="-DTDA_CUDA_HOST=1 -DNV_CUDNN_FRONTEND_USE_DYNAMIC_LOADING -DCUDNN_FRONTEND_SKIP_JSON_LIB"
  CUDNN_FLAGS="$CUDNN_FLAGS -isystem $PWD/$FE_DIR -isystem $PWD/$BUILD_DIR/cudnn-include"
  echo "[cuda12] cuDNN attention: frontend in $FE_DIR, cudnn.h from $(dirname "$CUDNN_H")"
else
  echo "[cuda12] FAILED: no cudnn-frontend in .venv (scripts/setup.sh) or no cudnn.h" >&2
  exit 1
fi
export NVCC BUILD_DIR GENCODE CUDNN_FLAGS
compile() {
  local obj="$BUILD_DIR/$(basename "${1%.*}").o" extra=""
  [ "$(basename "$1")" != cudnn_sdpa.cpp ] || extra=$CUDNN_FLAGS
  # shellcheck disable=SC2086
  if "$NVCC" -std=c++17 -O3 -Isrc $GENCODE $extra -Xcompiler -Wall,-Wextra,-Werror \
    -Werror all-warnings -c "$1" -o "$obj" >"$obj.log" 2>&1; then
    echo "[cuda12] $1"
  else
    echo "[cuda12] FAILED: $1" >&2
    cat "$obj.log" >&2
    return 1
  fi
}
export -f compile
start=$(date +%s)
printf '%s\n' "${sources[@]}" | xargs -P "${JOBS:-2}" -I{} bash -c 'compile "$1"' _ {}
echo "[cuda12] ok: ${#sources[@]} CUDA sources in $(( $(date +%s) - start ))s"
NVCC="$NVCC" BUILD_DIR="$BUILD_DIR" bash scripts/check_nccl_symbols.sh
