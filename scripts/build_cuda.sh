#!/usr/bin/env bash
# Compiles every kernels/*.cu and src/backend/cuda/*.cu (the CUDA backend) with nvcc for sm_80 (A100) and sm_90 (H100), warnings as errors,
# and keeps ptxas's register/spill report in build-cuda/ptxas.log. Also compiles the NCCL
# communicator (src/dist/nccl_communicator.cpp) against the real <nccl.h> and links it into a
# shared object with -lnccl -lcudart, checking that every NCCL/CUDA function it calls is exported
# by the installed libraries. Then links build-cuda/tda (the real CUDA backend, cudart +
# cuBLASLt) with CMake -DTDA_CUDA=ON. Needs the CUDA toolkit and NCCL, not a GPU.
# Usage: scripts/build_cuda.sh   (NVCC=/path/to/nvcc, BUILD_DIR=..., NCCL_HOME=..., SKIP_LINK=1)
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

# NCCL: headers and library from NCCL_HOME, else next to nvcc (/usr/local/cuda), else the system.
CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
nccl_lib=""
for d in "$NCCL_HOME/lib64" "$NCCL_HOME/lib" /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
  if [ -e "$d/libnccl.so" ] || [ -e "$d/libnccl.so.2" ]; then nccl_lib=$d; break; fi
done
if [ -z "$nccl_lib" ]; then
  echo "[build_cuda] libnccl not found (set NCCL_HOME=...)" >&2
  exit 1
fi
echo "[build_cuda] src/dist/nccl_communicator.cpp (NCCL from $nccl_lib)"
NCCL_FLAGS=(-std=c++17 -O3 -Isrc -I"$NCCL_HOME/include" -DTDA_WITH_NCCL -Xcompiler -fPIC
            -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings)
"$NVCC" "${NCCL_FLAGS[@]}" -c src/dist/nccl_communicator.cpp -o "$BUILD_DIR/nccl_communicator.o"
"$NVCC" -shared "$BUILD_DIR/nccl_communicator.o" -o "$BUILD_DIR/libtda_nccl.so" \
  -L"$nccl_lib" -lnccl -lcudart
# A shared object may leave symbols undefined; make sure the NCCL and CUDA runtime ones exist.
libs=("$nccl_lib"/libnccl.so* "$CUDA_HOME"/lib*/libcudart.so*)
exported=$(for l in "${libs[@]}"; do nm -D --defined-only "$l" 2>/dev/null; done | awk '{print $NF}' | sed 's/@.*//' | sort -u)
missing=0
for sym in $(nm -u "$BUILD_DIR/nccl_communicator.o" | awk '{print $2}' | grep -E '^(nccl|cuda)' | sed 's/@.*//' | sort -u); do
  if ! grep -qx "$sym" <<<"$exported"; then
    echo "[build_cuda] $sym: not exported by libnccl/libcudart" >&2
    missing=1
  fi
done
[ $missing -eq 0 ] || exit 1
echo "[build_cuda] ok: libtda_nccl.so links against $(ls "$nccl_lib"/libnccl.so.* | head -1)"

# A short summary of what reviewers look for: registers and any spill per kernel and arch.
grep -E "Compiling entry|Used [0-9]+ registers|spill" "$LOG" || true
echo "[build_cuda] ok: ${#sources[@]} file(s), ptxas report in $LOG"

# The GPU binary: CMake with TDA_CUDA=ON compiles the same sources with nvcc and links tda
# against cudart + cuBLASLt + NCCL (compile and link only; running it needs a GPU).
if [ "${SKIP_LINK:-0}" != 1 ]; then
  echo "[build_cuda] linking $BUILD_DIR/tda (cmake -DTDA_CUDA=ON)"
  cmake -S . -B "$BUILD_DIR/cmake" -DTDA_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$NVCC" ${CMAKE_ARGS:-} >"$BUILD_DIR/cmake.log" 2>&1 ||
    { cat "$BUILD_DIR/cmake.log" >&2; exit 1; }
  cmake --build "$BUILD_DIR/cmake" -j"${JOBS:-2}" --target tda >>"$BUILD_DIR/cmake.log" 2>&1 ||
    { tail -50 "$BUILD_DIR/cmake.log" >&2; exit 1; }
  cp "$BUILD_DIR/cmake/tda" "$BUILD_DIR/tda"
  echo "[build_cuda] ok: $BUILD_DIR/tda (links $(ldd "$BUILD_DIR/tda" | grep -oE 'lib(cudart|cublas|nccl)[^ ]*' | sort -u | tr '\n' ' '))"
fi
