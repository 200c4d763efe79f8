#!/usr/bin/env bash
# Builds build-cuda/tda, the real CUDA backend (cudart + cuBLASLt + NCCL), with CMake
# -DTDA_CUDA=ON: every kernels/*.cu and src/backend/cuda/*.cu compiled once by nvcc for sm_80 (A100)
# and sm_90 (H100), warnings as errors, through scripts/nvcc_report.sh, which keeps ptxas's
# register/spill report (build-cuda/ptxas.log, checked against the emulator's launch-resource table
# by scripts/launch_resources.py). Host code for a portable CPU baseline (x86-64-v2, checked by
# scripts/check_portable.sh). Also compiles the NCCL communicator
# (src/distributed/nccl_communicator.cpp) against the real <nccl.h> and links it into a shared
# object with -lnccl -lcudart, checking that every NCCL/CUDA function it calls is exported by the
# installed libraries (scripts/check_nccl_symbols.sh), and checks that a CUDA build configures
# without Catch2 and MPI. Needs the CUDA toolkit and NCCL, not a GPU.
# The toolkit decides which NVIDIA drivers the binary runs on (docs/cuda.md): CUDA 13 needs
# driver 580+, CUDA 12.x any 525+: CUDA_HOME=$(scripts/cuda12_toolkit.sh) scripts/build_cuda.sh
# Usage: scripts/build_cuda.sh   (CUDA_HOME=... or NVCC=/path/to/nvcc, BUILD_DIR=..., NCCL_HOME=...,
#                                SKIP_LINK=1, CMAKE_ARGS=..., JOBS=N, LINK_ONLY=1)
# SKIP_LINK=1: nvcc on each source with the report, no CMake, no host code (quick register checks).
# LINK_ONLY=1: only the CMake build of $BUILD_DIR/tda, with JOBS jobs (the GPU kit on a node:
# no per-file ptxas report, no NCCL symbol, portability or MPI-less checks; CI runs those).
set -euo pipefail
cd "$(dirname "$0")/.."

NVCC=${NVCC:-${CUDA_HOME:+$CUDA_HOME/bin/nvcc}}
NVCC=${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}
BUILD_DIR=${BUILD_DIR:-build-cuda}
if [ ! -x "$NVCC" ]; then
  echo "[build_cuda] nvcc not found (set NVCC=...)" >&2
  exit 1
fi
mkdir -p "$BUILD_DIR"
LOG="$BUILD_DIR/ptxas.log"
: >"$LOG"

# The defaults are explicit, so a build directory the GPU kit configured (one architecture, no
# -Werror: scripts/gpu/build.sh) is set back; CMAKE_ARGS, later on the line, overrides them.
link_tda() {
  echo "[build_cuda] linking $BUILD_DIR/tda (cmake -DTDA_CUDA=ON)"
  cmake -S . -B "$BUILD_DIR/cmake" -DTDA_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCUDAToolkit_ROOT="$CUDA_HOME" \
    -DTDA_NATIVE="${TDA_NATIVE:-OFF}" -DTDA_CUDA_ARCHS="80;90" -DTDA_WERROR=ON \
    -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON -DCMAKE_CUDA_COMPILER_LAUNCHER="${LAUNCHER:-}" \
    ${CMAKE_ARGS:-} >"$BUILD_DIR/cmake.log" 2>&1 || { cat "$BUILD_DIR/cmake.log" >&2; exit 1; }
  # With the report launcher every .cu is compiled again, so that each has its log (make would
  # keep an object built before the launcher was set, and its report would be missing).
  if [ -n "${LAUNCHER:-}" ] && [ -d "$BUILD_DIR/cmake/CMakeFiles/tda_cuda.dir" ]; then
    find "$BUILD_DIR/cmake/CMakeFiles/tda_cuda.dir" -name '*.o' -delete
  fi
  cmake --build "$BUILD_DIR/cmake" -j"${JOBS:-2}" --target tda >>"$BUILD_DIR/cmake.log" 2>&1 ||
    { tail -50 "$BUILD_DIR/cmake.log" >&2; exit 1; }
  cp "$BUILD_DIR/cmake/tda" "$BUILD_DIR/tda"
  grep -h "tda: cuDNN attention" "$BUILD_DIR/cmake.log" | sed 's/^-- /[build_cuda] /' || true
  echo "[build_cuda] ok: $BUILD_DIR/tda (links $(ldd "$BUILD_DIR/tda" | grep -oE 'lib(cudart|cublas|nccl)[^ ]*' | sort -u | tr '\n' ' '))"
}
if [ "${LINK_ONLY:-0}" = 1 ]; then
  CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)
  link_tda
  exit 0
fi

shopt -s nullglob
sources=(kernels/*.cu src/backend/cuda/*.cu)
if [ ${#sources[@]} -eq 0 ]; then
  echo "[build_cuda] no kernels/*.cu to compile"
  exit 0
fi

# ptxas's report comes from scripts/nvcc_report.sh (registers, spills, shared memory and
# __launch_bounds__ per kernel and arch, one log per source, the object copied to
# $BUILD_DIR/NAME.o for scripts/bench/sass_tiles.py). It runs as CMake's CUDA compiler launcher,
# so the report describes the objects linked into $BUILD_DIR/tda, each source compiled once.
echo "nvcc: $("$NVCC" --version | grep release)" >>"$LOG"
rm -rf "$BUILD_DIR/logs" "$BUILD_DIR/ptx" && mkdir -p "$BUILD_DIR/logs"
REPORT="$PWD/scripts/nvcc_report.sh;$(cd "$BUILD_DIR" && pwd)"
CUDA_HOME=$(cd "$(dirname "$NVCC")/.." && pwd)

# The GPU binary: CMake with TDA_CUDA=ON compiles the sources with nvcc and links tda against
# cudart + cuBLASLt + NCCL (compile and link only; running it needs a GPU). Host code for the
# portable baseline (TDA_NATIVE=OFF: the binary runs on the compute nodes, not here); no Catch2
# (the CUDA build has no tests).
[ "${SKIP_LINK:-0}" = 1 ] || LAUNCHER=$REPORT link_tda

# What CMake did not compile (emu_selftest.cu, which only its emulator test includes; every
# source with SKIP_LINK=1) is compiled here with the same nvcc flags. -Werror all-warnings covers
# nvcc's own diagnostics, -Xcompiler the host pass.
FLAGS=(-std=c++17 -O3 -DNDEBUG -Isrc
       -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90
       -Xcompiler -Wall,-Wextra,-Werror -Werror all-warnings)
for src in "${sources[@]}"; do
  [ ! -e "$BUILD_DIR/logs/$(basename "${src%.cu}").log" ] || continue
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-2}" ]; do wait -n || true; done
  echo "[build_cuda] $src"
  bash "${REPORT%;*}" "${REPORT#*;}" "$NVCC" "${FLAGS[@]}" -c "$src" \
    -o "$BUILD_DIR/$(basename "${src%.cu}").o" 2>/dev/null &
done
wait
# One report in source order, whatever compiled first.
status=0
for src in "${sources[@]}"; do
  log="$BUILD_DIR/logs/$(basename "${src%.cu}").log"
  cat "$log" >>"$LOG"
  [ ! -e "$log.failed" ] || status=1
done
if [ $status -ne 0 ]; then
  cat "$LOG" >&2
  exit $status
fi
# The emulator checks every launch against a committed table of these numbers (CI runs the tests
# before nvcc): it must say what this build says.
python3 scripts/launch_resources.py --check "$LOG"

NVCC="$NVCC" BUILD_DIR="$BUILD_DIR" bash scripts/check_nccl_symbols.sh

# A short summary of what reviewers look for: registers and any spill per kernel and arch.
grep -E "Compiling entry|Used [0-9]+ registers|spill" "$LOG" || true
echo "[build_cuda] ok: ${#sources[@]} file(s), ptxas report in $LOG"

if [ "${SKIP_LINK:-0}" != 1 ]; then
  [ "${TDA_NATIVE:-OFF}" = ON ] || bash scripts/check_portable.sh "$BUILD_DIR/cmake"

  # A GPU node may lack MPI's development files: the CUDA build must configure without MPI (and
  # Catch2), and the code that then stands in for MPI must compile.
  echo "[build_cuda] configure without Catch2 and MPI"
  cmake -S . -B "$BUILD_DIR/cmake-nompi" -DTDA_CUDA=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_CUDA_COMPILER="$NVCC" -DCUDAToolkit_ROOT="$CUDA_HOME" \
    -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON ${CMAKE_ARGS:-} >"$BUILD_DIR/cmake-nompi.log" 2>&1 ||
    { cat "$BUILD_DIR/cmake-nompi.log" >&2; exit 1; }
  cmake --build "$BUILD_DIR/cmake-nompi" --target src/distributed/communicator.cpp.o \
    src/distributed/launch.cpp.o >>"$BUILD_DIR/cmake-nompi.log" 2>&1 ||
    { tail -30 "$BUILD_DIR/cmake-nompi.log" >&2; exit 1; }
  echo "[build_cuda] ok: a CUDA build configures and compiles its MPI-less launch code"
fi
