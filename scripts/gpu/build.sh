#!/usr/bin/env bash
# The GPU kit, step 2 (docs/gpu.md): on the GPU node, build build/tda + build/tda_tests (the CPU
# build: the gpu tests compare build-cuda/tda against it) and build-cuda/tda (scripts/build_cuda.sh,
# CMake -DTDA_CUDA=ON) with all cores, the two at once.
#
# Packages: KIT_MODE=auto (default) configures against the node's own packages first (a cluster
# with its modules loaded) and falls back to the kit; KIT_MODE=kit uses the kit's .debs
# (scripts/gpu/gather.sh) at once; KIT_MODE=system never does. The kit is unpacked with `dpkg -x`
# (or ar + tar) into build-kit/prefix inside the repository (git-ignored; never into /, nor into
# KIT, which travels with the device tool's `carry` and must stay small): its pkg-config files get
# their /usr paths moved into the prefix, absolute symlinks are re-pointed into it, and CMake
# gets CMAKE_PREFIX_PATH and PKG_CONFIG_PATH there. KIT_ISOLATE=1 (the tests on a machine that
# has the packages in /usr) also ignores /usr for find_package and pkg-config and uses the kit's
# own pkgconf, so a configure that succeeds found everything in the prefix.
#
# Writes build-kit/env.sh (LD_LIBRARY_PATH for the kit's libraries and NCCL, TDA_CUDNN_LIBRARY for
# cuDNN attention, found by find_cudnn below): source it before running the binaries. NCCL: NCCL_HOME, the toolkit, /usr, else the python3 package nvidia-nccl
# (PyTorch's wheel: libnccl.so.2 without the libnccl.so link CMake looks for, so one is made in
# build-kit/nccl).
#
# Usage: scripts/gpu/build.sh [--kit DIR] [--into DIR] [--jobs N] [--what cpu|cuda|both]
#        [--configure-only] [--unpack-only] [--log-dir DIR]   (--into: build-kit)
# Env: KIT_MODE, KIT_ISOLATE, KIT_UNPACKER (dpkg, or ar: ar + tar, what runs without dpkg-deb),
# BUILD_DIR (build), CUDA_BUILD_DIR (build-cuda), TDA_CUDA_ARCHS (the GPU's own, from
# nvidia-smi; else "80;90"), WERROR (OFF: a newer compiler's new warning must
# not cost the check; the warnings are counted in the log).
# Exit: 0 all asked builds ok; 1 one failed (its log says why); 2 bad arguments or no kit.
set -uo pipefail
cd "$(dirname "$0")/../.."
ROOT=$(pwd)

KIT=.gpukit
INTO=build-kit
JOBS=$(nproc)
WHAT=both
CONFIGURE_ONLY=0
UNPACK_ONLY=0
LOG_DIR=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kit) KIT=$2; shift 2 ;;
    --into) INTO=$2; shift 2 ;;
    --jobs) JOBS=$2; shift 2 ;;
    --what) WHAT=$2; shift 2 ;;
    --configure-only) CONFIGURE_ONLY=1; shift ;;
    --unpack-only) UNPACK_ONLY=1; shift ;;
    --log-dir) LOG_DIR=$2; shift 2 ;;
    -h|--help) sed -n '2,28p' "$0"; exit 0 ;;
    *) echo "build: unknown argument '$1'" >&2; exit 2 ;;
  esac
done
case "$WHAT" in cpu|cuda|both) ;; *) echo "build: --what must be cpu, cuda or both" >&2; exit 2 ;; esac
KIT=$(mkdir -p "$KIT" && cd "$KIT" && pwd)
INTO=$(mkdir -p "$INTO" && cd "$INTO" && pwd)
LOG_DIR=${LOG_DIR:-$INTO/logs}
mkdir -p "$LOG_DIR"
BUILD_DIR=${BUILD_DIR:-build}
CUDA_BUILD_DIR=${CUDA_BUILD_DIR:-build-cuda}
KIT_MODE=${KIT_MODE:-auto}
WERROR=${WERROR:-OFF}
PREFIX=$INTO/prefix
say() { echo "[gpu-build] $*"; }

# --- the kit's prefix ---------------------------------------------------------------------------
unpack_kit() {
  shopt -s nullglob
  local debs=("$KIT"/debs/*.deb)
  if [ ${#debs[@]} -eq 0 ]; then
    echo "build: no .deb files in $KIT/debs (run scripts/gpu/gather.sh on a networked machine)" >&2
    exit 2
  fi
  rm -rf "$PREFIX"
  mkdir -p "$PREFIX"
  for d in "${debs[@]}"; do
    if [ "${KIT_UNPACKER:-dpkg}" = dpkg ] && command -v dpkg-deb >/dev/null; then
      dpkg-deb -x "$d" "$PREFIX" || { echo "build: dpkg-deb -x $d failed" >&2; exit 2; }
    else  # a .deb is an ar archive holding data.tar.{xz,zst,gz}
      local member
      member=$(ar t "$d" | grep '^data\.tar') || { echo "build: $d: no data.tar" >&2; exit 2; }
      local z=""
      case "$member" in *.xz) z=-J ;; *.zst) z=--zstd ;; *.gz) z=-z ;; *.bz2) z=-j ;; esac
      ar p "$d" "$member" | tar -x $z -f - -C "$PREFIX" ||
        { echo "build: cannot unpack $d ($member)" >&2; exit 2; }
    fi
  done
  rm -rf "$PREFIX/usr/share/doc" "$PREFIX/usr/share/man"
  # pkg-config files name /usr (prefix=/usr, openblas.pc's libdir=/usr/lib/...): move into the
  # prefix. CMake package files compute their prefix from their own location (relocatable).
  find "$PREFIX" -name '*.pc' -print0 | xargs -0 -r sed -i -E \
    "s#(^[A-Za-z_]+=|-I|-L|[[:space:]])/usr(/|\$)#\1$PREFIX/usr\2#g"
  # Absolute symlinks would point at the node's /usr (missing, or another version).
  find "$PREFIX" -type l -print0 | while IFS= read -r -d '' l; do
    local t
    t=$(readlink "$l")
    case "$t" in /*) ln -sfn "$PREFIX$t" "$l" ;; esac
  done
}

lib_dirs() {  # every directory of the prefix holding a shared library, ':'-joined
  find "$PREFIX" -name '*.so*' \( -type f -o -type l \) -printf '%h\n' | sort -u | paste -sd:
}

pc_dirs() {
  find "$PREFIX" -type d -name pkgconfig | sort | paste -sd:
}

# NCCL for the CUDA build: prints the NCCL_HOME to use (empty: CMake's own search will do).
find_nccl() {
  if [ -n "${NCCL_HOME:-}" ]; then echo "$NCCL_HOME"; return; fi
  local cuda
  cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
  if [ -f "$cuda/include/nccl.h" ] || [ -f /usr/include/nccl.h ]; then return; fi
  local py
  py=$(python3 -c 'import nvidia.nccl, os; print(list(nvidia.nccl.__path__)[0])' 2>/dev/null) || return
  [ -f "$py/include/nccl.h" ] || return
  local so
  so=$(ls "$py"/lib/libnccl.so* 2>/dev/null | head -1)
  [ -n "$so" ] || return
  mkdir -p "$INTO/nccl/lib"
  ln -sfn "$py/include" "$INTO/nccl/include"
  ln -sfn "$so" "$INTO/nccl/lib/libnccl.so"
  ln -sfn "$so" "$INTO/nccl/lib/$(basename "$so")"
  echo "$INTO/nccl"
}

# cuDNN attention (docs/cuda.md): cudnn.h and libcudnn.so.9 from CUDNN_HOME, the toolkit, or the
# node's PyTorch wheel (python3's nvidia.cudnn); the frontend headers from CUDNN_FRONTEND_HOME,
# the node's pip package, or the kit's cudnn-frontend.tar.gz (unpacked into INTO). Sets
# CUDNN_CMAKE_ARGS and CUDNN_LIB (the library, for TDA_CUDNN_LIBRARY in env.sh); without them the
# build goes without cuDNN attention and says so in its configure line.
CUDNN_CMAKE_ARGS=""
CUDNN_LIB=""
find_cudnn() {
  local cuda inc="" lib="" fe="" py
  cuda=$(dirname "$(dirname "$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)")")
  for d in "${CUDNN_HOME:-/nonexistent}" "$cuda" /usr; do
    if [ -f "$d/include/cudnn.h" ]; then inc=$d/include; break; fi
  done
  py=$(python3 -c 'import nvidia.cudnn; print(list(nvidia.cudnn.__path__)[0])' 2>/dev/null) || py=""
  [ -z "$inc" ] && [ -n "$py" ] && [ -f "$py/include/cudnn.h" ] && inc=$py/include
  for l in "${CUDNN_HOME:-/nonexistent}"/lib*/libcudnn.so.9 "$cuda"/lib*/libcudnn.so.9 \
    /usr/lib/x86_64-linux-gnu/libcudnn.so.9 "$py"/lib/libcudnn.so.9; do
    if [ -e "$l" ]; then lib=$l; break; fi
  done
  py=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null) || py=""
  for d in "${CUDNN_FRONTEND_HOME:-/nonexistent}/include" "$py/include"; do
    if [ -f "$d/cudnn_frontend.h" ]; then fe=$d; break; fi
  done
  if [ -z "$fe" ] && [ -f "$KIT/cudnn-frontend.tar.gz" ]; then
    rm -rf "$INTO/cudnn-frontend" && mkdir -p "$INTO/cudnn-frontend"
    tar xzf "$KIT/cudnn-frontend.tar.gz" -C "$INTO/cudnn-frontend" && fe=$INTO/cudnn-frontend/include
  fi
  say "cuDNN: cudnn.h ${inc:-not found}; libcudnn.so.9 ${lib:-not found}; frontend ${fe:-not found}"
  [ -n "$inc" ] && CUDNN_CMAKE_ARGS="-DCUDNN_INCLUDE_DIR=$inc"
  [ -n "$fe" ] && CUDNN_CMAKE_ARGS="$CUDNN_CMAKE_ARGS -DCUDNN_FRONTEND_INCLUDE_DIR=$fe"
  CUDNN_LIB=$lib
}

CMAKE_KIT_ARGS=()
kit_cmake_args() {
  CMAKE_KIT_ARGS=(-DCMAKE_PREFIX_PATH="$PREFIX/usr")
  if [ "${KIT_ISOLATE:-0}" = 1 ]; then
    CMAKE_KIT_ARGS+=("-DCMAKE_IGNORE_PREFIX_PATH=/usr;/" -DPKG_CONFIG_EXECUTABLE="$PREFIX/usr/bin/pkgconf")
  elif ! command -v pkg-config >/dev/null; then
    CMAKE_KIT_ARGS+=(-DPKG_CONFIG_EXECUTABLE="$PREFIX/usr/bin/pkgconf")
  fi
}

write_env() {  # $1: kit used (1/0), $2: NCCL_HOME or ""
  {
    [ -n "$CUDNN_LIB" ] && echo "export TDA_CUDNN_LIBRARY=\"$CUDNN_LIB\""
    echo "# written by scripts/gpu/build.sh: source before running build/tda or build-cuda/tda"
    local dirs=""
    if [ "$1" = 1 ]; then
      dirs=$(lib_dirs)
      if [ "${KIT_ISOLATE:-0}" = 1 ]; then
        echo "export PKG_CONFIG_LIBDIR=\"$(pc_dirs)\""
      else
        echo "export PKG_CONFIG_PATH=\"$(pc_dirs)\${PKG_CONFIG_PATH:+:\$PKG_CONFIG_PATH}\""
      fi
    fi
    [ -n "$2" ] && dirs="${dirs:+$dirs:}$2/lib"
    [ -n "$dirs" ] && echo "export LD_LIBRARY_PATH=\"$dirs\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}\""
    [ -n "$2" ] && echo "export NCCL_HOME=\"$2\""
    echo "export TDA_KIT_USED=$1"
  } >"$INTO/env.sh"
}

# --- configure ----------------------------------------------------------------------------------
generator_args() {  # Ninja for a new build directory when there is one
  if [ ! -f "$1/CMakeCache.txt" ] && command -v ninja >/dev/null; then echo "-G Ninja"; fi
}

configure_cpu() {  # $@: extra CMake arguments; log in LOG_DIR/configure-cpu.log
  # shellcheck disable=SC2046
  cmake -S . -B "$BUILD_DIR" $(generator_args "$BUILD_DIR") -DCMAKE_BUILD_TYPE=Release \
    -DTDA_WERROR="$WERROR" -DTDA_REQUIRE_MPI=OFF "$@" >"$LOG_DIR/configure-cpu.log" 2>&1
}

if [ "$UNPACK_ONLY" = 1 ]; then
  unpack_kit
  write_env 1 ""
  say "kit unpacked into $PREFIX; environment in $INTO/env.sh"
  exit 0
fi
used_kit=0
if [ "$KIT_MODE" != kit ] && configure_cpu; then
  say "packages: the node's own (KIT_MODE=$KIT_MODE)"
elif [ "$KIT_MODE" = system ]; then
  say "configure failed with the node's packages (KIT_MODE=system): $LOG_DIR/configure-cpu.log"
  tail -20 "$LOG_DIR/configure-cpu.log" >&2
  exit 1
else
  [ "$KIT_MODE" = auto ] && say "the node's packages do not configure: unpacking the kit"
  rm -rf "$BUILD_DIR/CMakeCache.txt" "$BUILD_DIR/CMakeFiles"
  unpack_kit
  used_kit=1
  say "kit unpacked into $PREFIX ($(du -sh "$PREFIX" | cut -f1))"
fi
NCCL=$(find_nccl)
find_cudnn
write_env "$used_kit" "$NCCL"
# shellcheck disable=SC1091
. "$INTO/env.sh"
if [ "$used_kit" = 1 ]; then
  kit_cmake_args
  # The kit's build has no MPI: the gpu tests need none, and the node has no MPI -dev files.
  if ! configure_cpu -DCMAKE_DISABLE_FIND_PACKAGE_MPI=ON "${CMAKE_KIT_ARGS[@]}"; then
    say "configure of $BUILD_DIR failed with the kit: $LOG_DIR/configure-cpu.log"
    tail -30 "$LOG_DIR/configure-cpu.log" >&2
    exit 1
  fi
fi
say "configured $BUILD_DIR"
[ "$CONFIGURE_ONLY" = 1 ] && exit 0

# --- build --------------------------------------------------------------------------------------
ARCHS=${TDA_CUDA_ARCHS:-$(nvidia-smi --query-gpu=compute_cap --format=csv,noheader 2>/dev/null |
  tr -d . | sort -u | paste -sd';')}
ARCHS=${ARCHS:-80;90}
t0=$(date +%s)
pids=()
if [ "$WHAT" != cuda ]; then
  (cmake --build "$BUILD_DIR" -j"$JOBS" --target tda tda_tests >"$LOG_DIR/build-cpu.log" 2>&1) &
  pids+=("cpu:$!")
fi
if [ "$WHAT" != cpu ]; then
  (LINK_ONLY=1 JOBS=$JOBS BUILD_DIR=$CUDA_BUILD_DIR NCCL_HOME=$NCCL \
    CMAKE_ARGS="-DTDA_WERROR=$WERROR -DTDA_CUDA_ARCHS=$ARCHS ${CMAKE_KIT_ARGS[*]} $CUDNN_CMAKE_ARGS" \
    bash scripts/build_cuda.sh >"$LOG_DIR/build-cuda.log" 2>&1) &
  pids+=("cuda:$!")
fi
status=0
for p in "${pids[@]}"; do
  name=${p%%:*}
  log=$LOG_DIR/build-$name.log
  [ "$name" = cuda ] && cp "$CUDA_BUILD_DIR/cmake.log" "$LOG_DIR/build-cuda-cmake.log" 2>/dev/null
  if wait "${p#*:}"; then
    say "$name build ok in $(($(date +%s) - t0)) s ($(cat "$LOG_DIR"/build-"$name"*.log | grep -c 'warning:') compiler warnings; $log)"
  else
    say "$name build FAILED after $(($(date +%s) - t0)) s: $log"
    grep -m5 -E 'error|Error' "$log" >&2
    tail -15 "$log" >&2
    status=1
  fi
done
[ "$WHAT" != cpu ] && say "CUDA architectures: $ARCHS"
cd "$ROOT"
exit $status
