#!/usr/bin/env bash
# Compiles the NCCL communicator (src/distributed/nccl_communicator.cpp) with nvcc against the real
# <nccl.h> and links it into a shared object with -lnccl -lcudart, then checks that every
# nccl*/cuda* function it calls is exported by those libraries (a shared object may leave
# symbols undefined, so the link alone would not tell). Used by scripts/build_cuda.sh and
# scripts/check_cuda12.sh.
# Usage: NVCC=/path/to/nvcc [NCCL_HOME=prefix] [BUILD_DIR=dir] scripts/check_nccl_symbols.sh
set -euo pipefail
cd "$(dirname "$0")/.."
NVCC=${NVCC:?NVCC=/path/to/nvcc}
BUILD_DIR=${BUILD_DIR:-build-cuda}
mkdir -p "$BUILD_DIR"
# NCCL: headers and library from NCCL_HOME, else next to nvcc (/usr/local/cuda), else the system.
CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
NCCL_HOME=${NCCL_HOME:-$CUDA_HOME}
nccl_lib=""
for d in "$NCCL_HOME/lib64" "$NCCL_HOME/lib" /usr/lib/x86_64-linux-gnu /usr/lib64 /usr/lib; do
  if [ -e "$d/libnccl.so" ] || [ -e "$d/libnccl.so.2" ]; then nccl_lib=$d; break; fi
done
if [ -z "$nccl_lib" ]; then
  echo "[nccl] libnccl not found (set NCCL_HOME=...)" >&2
  exit 1
fi
echo "[nccl] src/distributed/nccl_communicator.cpp (NCCL from $nccl_lib)"
NCCL_FLAGS=(-std=c++17 -O3 -Isrc -I"$NCCL_HOME/include" -DTDA_WITH_NCCL -Xcompiler -fPIC
            -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings)
"$NVCC" "${NCCL_FLAGS[@]}" -c src/distributed/nccl_communicator.cpp -o "$BUILD_DIR/nccl_communicator.o"
"$NVCC" -shared "$BUILD_DIR/nccl_communicator.o" -o "$BUILD_DIR/libtda_nccl.so" \
  -L"$nccl_lib" -L"$CUDA_HOME/lib64" -lnccl -lcudart
libs=("$nccl_lib"/libnccl.so* "$CUDA_HOME"/lib*/libcudart.so*)
exported=$(for l in "${libs[@]}"; do nm -D --defined-only "$l" 2>/dev/null; done | awk '{print $NF}' | sed 's/@.*//' | sort -u)
missing=0
for sym in $(nm -u "$BUILD_DIR/nccl_communicator.o" | awk '{print $2}' | grep -E '^(nccl|cuda)' | sed 's/@.*//' | sort -u); do
  if ! grep -qx "$sym" <<<"$exported"; then
    echo "[nccl] $sym: not exported by libnccl/libcudart" >&2
    missing=1
  fi
done
[ $missing -eq 0 ] || exit 1
echo "[nccl] ok: libtda_nccl.so links against $(ls "$nccl_lib"/libnccl.so.* | head -1)"
