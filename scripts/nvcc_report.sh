#!/usr/bin/env bash
# nvcc with ptxas's report kept: runs `NVCC ARGS... -Xptxas -v -keep` and writes what ptxas says
# of the source's kernels (registers, spills, shared memory; stderr) to REPORT_DIR/logs/NAME.log,
# followed by one `ptx: <arch> maxntid x y z <entry>` line per kernel with __launch_bounds__ (ptxas
# -v does not print them; the PTX does: .maxntid after an .entry's parameters), for
# scripts/launch_resources.py. The object is copied to REPORT_DIR/NAME.o and the PTX kept in
# REPORT_DIR/ptx/NAME/ (scripts/bench/sass_tiles.py reads the SASS of the objects).
# scripts/build_cuda.sh runs it as CMake's CUDA compiler launcher, so that the report describes
# the very objects linked into build-cuda/tda, each source compiled once.
# Usage: scripts/nvcc_report.sh REPORT_DIR NVCC ARGS...   (ARGS hold -c SRC.cu and -o OBJ)
set -uo pipefail
dir=$1 nvcc=$2
shift 2
src="" obj="" prev=""
for a in "$@"; do
  case $prev in -c) src=$a ;; -o) obj=$a ;; esac
  prev=$a
done
# Not a compile of a .cu file (CMake's own probes): nvcc as asked.
case $src in *.cu) ;; *) exec "$nvcc" "$@" ;; esac
root=$(cd "$(dirname "$0")/.." && pwd)
rel=${src#"$root"/}
name=$(basename "${src%.cu}")
keep="$dir/ptx/$name"
log="$dir/logs/$name.log"
rm -rf "$keep" "$log.failed" && mkdir -p "$keep" "$dir/logs"
echo "=== $rel" >"$log"
if ! "$nvcc" "$@" -Xptxas -v -keep -keep-dir "$keep" >>"$log" 2>&1; then
  : >"$log.failed"
  echo "[nvcc_report] FAILED: $rel" >&2
  cat "$log" >&2
  exit 1
fi
for ptx in "$keep"/*.ptx; do
  [ -e "$ptx" ] || continue
  awk '
    /^\.target / { arch = $2; sub(/,$/, "", arch) }
    /^(\.visible )?\.entry / { sub(/\($/, "", $NF); entry = $NF }
    /^\.maxntid / { gsub(",", ""); y = $3 == "" ? 1 : $3; z = $4 == "" ? 1 : $4
                     print "ptx: " arch " maxntid " $2 " " y " " z " " entry }
  ' "$ptx" >>"$log"
done
find "$keep" -type f ! -name '*.ptx' -delete
[ -z "$obj" ] || [ "$obj" -ef "$dir/$name.o" ] || cp "$obj" "$dir/$name.o"
