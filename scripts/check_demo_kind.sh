#!/usr/bin/env bash
# CI check of the promise of docs/attention.md, "Adding an attention kind": a kind added as one
# file outside src/ (the demonstration, tests/demo/relu2.cpp) is registered, and then tested by
# every suite that covers all kinds with no other edit. Builds it into build/ (incremental:
# one source and the links), runs every test case of the files that iterate the registry
# (attention_kinds(): gradients, kernels, options, dry runs, emulated CUDA vs CPU, diagnostics,
# the HF export, KV-cache decoding, parameter layout; their [slow], [mpi], [gpu], [net] cases
# aside; their loops over every kind on this kind alone) and the kind's own ctest entries (tiny training on the CPU and the emulated CUDA
# backend), then puts build/ back as the README builds it.
# Usage: scripts/check_demo_kind.sh [KIND_FILE]   (default tests/demo/relu2.cpp)
set -uo pipefail
cd "$(dirname "$0")/.."
FILE=${1:-tests/demo/relu2.cpp}
KIND=$(tr '\n' ' ' <"$FILE" | sed -n 's/.*TDA_REGISTER_ATTENTION( *"\([a-z0-9_]*\)".*/\1/p')
[ -n "$KIND" ] || { echo "check_demo_kind: no TDA_REGISTER_ATTENTION(\"kind\", ...) in $FILE"; exit 1; }

restore() { cmake -S . -B build -DTDA_EXTRA_ATTENTION= >/dev/null && cmake --build build -j2 >/dev/null; }
cmake -S . -B build -DTDA_EXTRA_ATTENTION="$FILE" >/dev/null && cmake --build build -j2 >/dev/null ||
  { echo "check_demo_kind: build with $FILE failed"; restore; exit 1; }
rc=0
if ./build/tda kinds | grep -q "^$KIND "; then echo "[demo] $KIND is registered"; else
  echo "[demo] $KIND is not in 'tda kinds'"; rc=1; fi

spec=""
for f in $(grep -lE "attention_kinds\(\)|test_kinds\(\)" tests/*.cpp); do
  spec="$spec,[#$(basename "${f%.cpp}")]~[slow]~[mpi]~[gpu]~[net]"
done
echo "[demo] the suites that iterate the registry: $(./build/tda_tests -# "${spec#,}" --list-test-names-only | grep -c .) test cases"
# Their loops over every kind run the new kind alone (TDA_TEST_KINDS, tests/test_kinds.h): the
# built-in kinds passed the same suites in the plain run.
TDA_TEST_KINDS="$KIND" ./build/tda_tests -# "${spec#,}" || rc=1
ctest --test-dir build --output-on-failure -j2 -R " $KIND config" -LE net || rc=1
restore || rc=1
exit $rc
