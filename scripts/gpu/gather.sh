#!/usr/bin/env bash
# The GPU kit, step 1 (docs/gpu.md): on a networked Debian machine (bookworm, like ours), collect
# what building tda needs on a GPU node that has the CUDA toolkit, CMake, a C++ compiler and
# PyTorch but neither our Debian -dev packages nor a network, into ONE git-ignored folder
# (default .gpukit/, under 64 MiB: the device tool's `carry` limit). scripts/gpu/build.sh unpacks
# it there with `dpkg -x` into a prefix inside the repository, never into /.
#
#   debs/       the .deb files (apt-get download: this machine's apt sources and versions)
#   data/       data/tinyshakespeare/*.bin (git-ignored, so they do not travel with the tree;
#               the tiny configs and the gpu tests read them)
#   cudnn-frontend.tar.gz  cuDNN's header-only C++ frontend (from .venv), for cuDNN attention
#   MANIFEST    one line per file: name, bytes, sha256
#
# Not gathered: MPI (libopenmpi-dev pulls in gfortran, hwloc, fabric, ucx...: far over the
# limit; the kit's CPU build is configured without it and the CUDA build takes it only when the
# node has it), the CUDA toolkit, NCCL, OpenMP (the node's compiler has it).
# Usage: scripts/gpu/gather.sh [--out DIR] [--refresh]   (KIT_MAX_MB=64: the size it must stay
# under). A package whose .deb is already in DIR/debs is not downloaded again unless --refresh.
# Exit codes: 0 ok; 1 a check failed (size, a missing file); 3 apt-get could not download
# (no network or no apt lists: the tests skip on 3).
set -euo pipefail
cd "$(dirname "$0")/../.."

OUT=.gpukit
REFRESH=0
while [ $# -gt 0 ]; do
  case "$1" in
    --out) OUT=$2; shift 2 ;;
    --refresh) REFRESH=1; shift ;;
    -h|--help) sed -n '2,20p' "$0"; exit 0 ;;
    *) echo "gather: unknown argument '$1' (--out DIR)" >&2; exit 2 ;;
  esac
done
MAX_MB=${KIT_MAX_MB:-64}

# What CMakeLists.txt finds, and what those need at run time (Depends of the -dev packages,
# apt-cache show). find_package: nlohmann_json, spdlog (+ fmt), cxxopts, Catch2; pkg-config:
# openblas (Debian's pthread flavour: the library, its headers and .pc) and libpcre2-8; plus
# pkgconf itself, which a bare node may not have.
PACKAGES=(
  nlohmann-json3-dev
  libspdlog-dev libspdlog1.10 libfmt-dev libfmt9
  libcxxopts-dev
  catch2
  libopenblas-dev libopenblas0 libopenblas-pthread-dev libopenblas0-pthread libgfortran5
  libquadmath0
  libpcre2-dev libpcre2-8-0 libpcre2-16-0 libpcre2-32-0 libpcre2-posix3
  pkgconf pkgconf-bin libpkgconf3
)

mkdir -p "$OUT/debs" "$OUT/data"
[ "$REFRESH" = 1 ] && rm -f "$OUT"/debs/*.deb
missing=()
for p in "${PACKAGES[@]}"; do
  compgen -G "$OUT/debs/${p}_*.deb" >/dev/null || missing+=("$p")
done
# apt-get download writes into the current directory, as the _apt user where it can.
if [ ${#missing[@]} -gt 0 ] &&
  ! (cd "$OUT/debs" && apt-get download "${missing[@]}") >"$OUT/gather.log" 2>&1; then
  echo "gather: apt-get download failed (no network, or no apt lists: apt-get update):" >&2
  grep -E "^(E|Err):" "$OUT/gather.log" | head -5 >&2 || tail -5 "$OUT/gather.log" >&2
  exit 3
fi
for p in "${PACKAGES[@]}"; do
  compgen -G "$OUT/debs/${p}_*.deb" >/dev/null || { echo "gather: $p: no .deb downloaded" >&2; exit 1; }
done

shopt -s nullglob
bins=(data/tinyshakespeare/*.bin)
if [ ${#bins[@]} -eq 0 ]; then
  echo "gather: data/tinyshakespeare/*.bin missing: run scripts/prepare_default_data.py first" >&2
  exit 1
fi
cp "${bins[@]}" "$OUT/data/"
# cuDNN's C++ frontend headers (0.4 MB packed), for the GPU build's cuDNN attention on a node whose
# Python has no nvidia-cudnn-frontend: from .venv (scripts/setup.sh). cuDNN itself (libcudnn,
# cudnn.h) is not carried: PyTorch's wheel brings it (scripts/gpu/build.sh finds it there).
fe=$(ls -d .venv/lib/python3*/site-packages/include 2>/dev/null | head -1)
rm -f "$OUT/cudnn-frontend.tar.gz"
if [ -n "$fe" ] && [ -f "$fe/cudnn_frontend.h" ]; then
  tar czf "$OUT/cudnn-frontend.tar.gz" -C "$(dirname "$fe")" include
else
  echo "gather: no cudnn-frontend in .venv (run scripts/setup.sh): the kit's GPU build goes" \
    "without cuDNN attention unless the node has the frontend" >&2
fi

(cd "$OUT" && for f in debs/*.deb data/* cudnn-frontend.tar.gz; do
  [ -e "$f" ] || continue
  printf '%s %s %s\n' "$f" "$(stat -c %s "$f")" "$(sha256sum "$f" | cut -d' ' -f1)"
done) >"$OUT/MANIFEST"

bytes=$(du -sb "$OUT" | cut -f1)
mb=$(awk -v b="$bytes" 'BEGIN { printf "%.1f", b / 1048576 }')
echo "gather: $OUT holds ${#PACKAGES[@]} packages and ${#bins[@]} data files: $mb MiB (limit $MAX_MB MiB)"
if [ "$bytes" -gt $((MAX_MB * 1048576)) ]; then
  echo "gather: $OUT is $mb MiB, over the $MAX_MB MiB limit (the device tool's carry limit)" >&2
  exit 1
fi
