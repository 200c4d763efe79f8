#!/usr/bin/env bash
# Puts together a CUDA 12.4 toolkit, for building a tda that runs on NVIDIA drivers 525-575
# (CUDA 12.x; this machine's toolkit is 13.0, which needs driver 580 or newer: docs/cuda.md), on
# a machine without one and without root: nvcc and its compiler passes from Debian's
# nvidia-cuda-toolkit 12.4 (trixie, non-free; downloaded with apt-get under a private apt
# configuration, nothing is installed), headers and libraries from NVIDIA's PyPI wheels (cudart,
# CCCL, cuBLAS/cuBLASLt, NCCL; pip download, no install). Prints the prefix, usable as CUDA_HOME:
#   CUDA_HOME=$(scripts/cuda12_toolkit.sh) scripts/build_cuda.sh
# A cluster with a CUDA 12 module needs none of this: CUDA_HOME=$CUDA_HOME scripts/build_cuda.sh.
# About 700 MB of downloads, 1.2 GB on disk; a second run finds the finished prefix and returns.
# Usage: scripts/cuda12_toolkit.sh [PREFIX]   (default ~/.cache/tda/cuda-12.4)
set -euo pipefail

VERSION=12.4
PREFIX=${1:-${CUDA12_PREFIX:-$HOME/.cache/tda/cuda-$VERSION}}
DEB_VERSION="12.4.131~12.4.1-2"
WHEELS=(nvidia-cuda-runtime-cu12==12.4.127 nvidia-cuda-nvcc-cu12==12.4.131
        nvidia-cuda-cccl-cu12==12.4.127.post1 nvidia-cublas-cu12==12.4.5.8
        nvidia-nccl-cu12==2.21.5)
STAMP="$PREFIX/.tda-toolkit"
LAYOUT=2  # bump when the prefix's layout changes: an older one is rebuilt
log() { echo "[cuda12_toolkit] $*" >&2; }

if [ -f "$STAMP" ] && [ "$(cat "$STAMP")" = "$LAYOUT $DEB_VERSION ${WHEELS[*]}" ]; then
  echo "$PREFIX"
  exit 0
fi
work="$PREFIX.download"
rm -rf "$PREFIX" "$work"
mkdir -p "$work/apt/lists/partial" "$work/apt/cache/archives/partial" "$work/deb" "$work/whl"

# nvcc, cicc, cudafe++, ptxas, fatbinary, nvlink: Debian's package of NVIDIA's binaries. A
# private apt state (lists, cache, no status) so the system's sources and packages are untouched.
cat >"$work/apt/sources.list" <<'EOF'
deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] http://deb.debian.org/debian trixie non-free
EOF
APT=(-o "Dir::Etc::SourceList=$work/apt/sources.list" -o Dir::Etc::SourceParts=/dev/null
     -o "Dir::State::Lists=$work/apt/lists" -o "Dir::Cache=$work/apt/cache"
     -o Dir::State::status=/dev/null -o APT::Architecture=amd64 -o APT::Sandbox::User=root
     -o Debug::NoLocking=1)
log "apt-get download nvidia-cuda-toolkit=$DEB_VERSION (Debian trixie non-free)"
apt-get "${APT[@]}" -qq update >&2
(cd "$work/deb" && apt-get "${APT[@]}" -qq download "nvidia-cuda-toolkit=$DEB_VERSION" >&2)
dpkg-deb -x "$work"/deb/nvidia-cuda-toolkit_*.deb "$work/deb/x"

log "pip download ${WHEELS[*]}"
python3 -m pip download -q --no-deps --disable-pip-version-check -d "$work/whl" "${WHEELS[@]}" >&2

# Lay out the prefix as NVIDIA's installer does: bin/, nvvm/, include/, lib64/.
deb="$work/deb/x/usr"
mkdir -p "$PREFIX/bin/crt" "$PREFIX/nvvm/bin" "$PREFIX/nvvm/libdevice" "$PREFIX/include" \
  "$PREFIX/lib64"
cp "$deb/lib/nvidia-cuda-toolkit/bin/nvcc" "$PREFIX/bin/"
for b in cudafe++ ptxas fatbinary nvlink bin2c nvprune cuobjdump nvdisasm cu++filt; do
  cp "$deb/bin/$b" "$PREFIX/bin/"
done
cp "$deb"/lib/nvidia-cuda-toolkit/bin/crt/* "$PREFIX/bin/crt/"
cp "$deb/lib/nvidia-cuda-toolkit/bin/cicc" "$PREFIX/nvvm/bin/"
cp "$deb/lib/nvidia-cuda-toolkit/libdevice/libdevice.10.bc" "$PREFIX/nvvm/libdevice/"
# nvcc finds its passes, headers and libraries through the nvcc.profile beside it.
cat >"$PREFIX/bin/nvcc.profile" <<'EOF'
TOP              = $(_HERE_)/..
NVVMIR_LIBRARY_DIR = $(TOP)/nvvm/libdevice
LD_LIBRARY_PATH += $(TOP)/lib64:
PATH            += $(TOP)/nvvm/bin:$(_HERE_):
INCLUDES        +=  "-I$(TOP)/include" $(_SPACE_)
LIBRARIES        =+ $(_SPACE_) "-L$(TOP)/lib64/stubs" "-L$(TOP)/lib64"
CUDAFE_FLAGS    +=
PTXAS_FLAGS     +=
EOF
for w in "$work"/whl/*.whl; do
  python3 - "$w" "$PREFIX" <<'EOF'
# A wheel's nvidia/<pkg>/include/** goes to PREFIX/include; the libraries tda links (cudart,
# cuBLASLt, NCCL) to PREFIX/lib64.
import os, sys, zipfile
wheel, prefix = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(wheel) as z:
    for name in z.namelist():
        parts = name.split("/")
        if len(parts) < 4 or parts[0] != "nvidia" or parts[-1] in ("", "__init__.py"):
            continue
        if parts[2] == "include":
            dest = os.path.join(prefix, "include", *parts[3:])
        elif parts[2] == "lib" and parts[-1].startswith(("libcudart.so", "libcublasLt.so",
                                                         "libnccl.so")):
            dest = os.path.join(prefix, "lib64", parts[-1])
        else:
            continue
        os.makedirs(os.path.dirname(dest), exist_ok=True)
        with z.open(name) as src, open(dest, "wb") as out:
            out.write(src.read())
EOF
done
# The link-time names (-lcudart, -lcublasLt, -lnccl). The wheels have no static runtime:
# libcudart_static.a is a linker script naming the shared one and libcudadevrt.a an empty
# archive, so that what links them by default (CMake's CUDA compiler checks, which otherwise
# fail and then lose the host's implicit include directories) links.
(cd "$PREFIX/lib64" && for l in lib*.so.*; do ln -sf "$l" "${l%%.so.*}.so"; done)
echo "INPUT(-lcudart)" >"$PREFIX/lib64/libcudart_static.a"
printf '!<arch>\n' >"$PREFIX/lib64/libcudadevrt.a"
rm -rf "$work"

if ! "$PREFIX/bin/nvcc" --version | grep -q "release $VERSION"; then
  log "FAILED: $PREFIX/bin/nvcc is not CUDA $VERSION"
  exit 1
fi
echo "$LAYOUT $DEB_VERSION ${WHEELS[*]}" >"$STAMP"
log "ok: CUDA $VERSION in $PREFIX"
echo "$PREFIX"
