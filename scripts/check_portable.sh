#!/usr/bin/env bash
# Checks that a CMake build's host code runs on any x86-64 CPU of the project's GPU baseline,
# x86-64-v2 (SSE4.2, POPCNT), so that a binary built on a login node does not die with SIGILL on
# an older compute node:
#  1. no compile command in BUILD_DIR/compile_commands.json says -march=native;
#  2. no object of BUILD_DIR (host code of the .cu files included) and not the tda binary
#     contains an instruction beyond x86-64-v2: AVX, AVX2, AVX-512 and FMA are VEX/EVEX-encoded
#     (mnemonics starting with 'v'), BMI1/BMI2, LZCNT and MOVBE are named. (Shared libraries
#     such as OpenBLAS and cuBLASLt choose their code paths at run time and are not ours.)
# Usage: scripts/check_portable.sh BUILD_DIR
set -euo pipefail
dir=${1:?usage: scripts/check_portable.sh BUILD_DIR}
cc="$dir/compile_commands.json"
if [ ! -f "$cc" ]; then
  echo "[check_portable] $cc missing (configure with CMAKE_EXPORT_COMPILE_COMMANDS)" >&2
  exit 1
fi
if grep -q -- '-march=native' "$cc"; then
  echo "[check_portable] -march=native in $cc (a GPU build must be portable: TDA_NATIVE=OFF):" >&2
  grep -o '"file": "[^"]*"' "$cc" | head -3 >&2
  exit 1
fi
if [ "$(uname -m)" != x86_64 ]; then
  echo "[check_portable] ok: no -march=native ($(uname -m): no instruction scan)"
  exit 0
fi
# VMX and VERR/VERW are the only 'v' mnemonics older than AVX; objdump prints TZCNT for the
# REP BSF that GCC emits for ctz on any CPU, so TZCNT is not on the list.
beyond='^(v[a-z0-9]+|andn|bextr|blsi|blsmsk|blsr|bzhi|mulx|pdep|pext|rorx|sarx|shlx|shrx|lzcnt|movbe)$'
vmx='^(vmcall|vmlaunch|vmresume|vmxoff|vmxon|vmread|vmwrite|vmptrld|vmptrst|vmclear|vmfunc|verr|verw)$'
mapfile -t objs < <(find "$dir" -path '*CMakeFiles*' -name '*.o' | sort)
[ -x "$dir/tda" ] && objs+=("$dir/tda")
if [ ${#objs[@]} -eq 0 ]; then
  echo "[check_portable] no objects under $dir" >&2
  exit 1
fi
bad=0
for o in "${objs[@]}"; do
  hits=$(objdump -d --no-show-raw-insn "$o" | awk -F'\t' 'NF >= 2 { split($2, w, " "); print w[1] }' |
    grep -E "$beyond" | grep -vE "$vmx" | sort | uniq -c | sort -rn | head -3 | tr -s ' ' | tr '\n' ';' || true)
  if [ -n "$hits" ]; then
    echo "[check_portable] ${o#"$dir"/}: beyond x86-64-v2:$hits" >&2
    bad=1
  fi
done
if [ $bad -ne 0 ]; then
  echo "[check_portable] FAILED: host code needs a newer CPU than x86-64-v2 (TDA_HOST_ARCH)" >&2
  exit 1
fi
echo "[check_portable] ok: ${#objs[@]} objects and binaries, no -march=native, nothing beyond x86-64-v2"
