#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz with clang (-O1, ASan + UBSan, only the reader
# sources) and runs each for SECONDS (default 60) from its seed corpus, JOBS at a time (default
# nproc). Exits non-zero on a finding; the input that caused it is kept in $BUILD/crashes/<target>/ (tests/fuzz/README.md
# says how to replay and minimise it). Usage: scripts/fuzz.sh [SECONDS] [TARGET...]
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
shift || true
TARGETS=("$@")
[ ${#TARGETS[@]} -gt 0 ] || TARGETS=(shard safetensors config tokenizer eval_jsonl)
BUILD=${FUZZ_BUILD_DIR:-build-fuzz}
LAUNCHER=()
command -v ccache >/dev/null && LAUNCHER=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
cmake -S tests/fuzz -B "$BUILD" -DCMAKE_CXX_COMPILER=clang++ "${LAUNCHER[@]}" >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
# Targets run JOBS at a time (default: one per core), each for the full SECONDS.
run_target() {
  local t=$1
  # New inputs go to the build folder's corpus (first directory); the seeds stay as they are.
  mkdir -p "$BUILD/corpus/$t" "$BUILD/crashes/$t"
  rm -f "$BUILD/$t.found"
  "$BUILD/fuzz_$t" -max_total_time="$SECS" -timeout=10 -rss_limit_mb=2048 -max_len=4096 \
    -artifact_prefix="$BUILD/crashes/$t/" -print_final_stats=1 \
    "$BUILD/corpus/$t" "tests/fuzz/corpus/$t" 2>"$BUILD/$t.log" || : >"$BUILD/$t.found"
}
for t in "${TARGETS[@]}"; do
  while [ "$(jobs -rp | wc -l)" -ge "${JOBS:-$(nproc)}" ]; do wait -n || true; done
  echo "[fuzz] $t: ${SECS}s"
  run_target "$t" &
done
wait
found=0
for t in "${TARGETS[@]}"; do
  if [ -e "$BUILD/$t.found" ]; then
    tail -40 "$BUILD/$t.log"
    echo "[fuzz] $t: FOUND A CRASH (input in $BUILD/crashes/$t/)"
    found=1
    continue
  fi
  echo "[fuzz] $t: $(grep -E "^stat::number_of_executed_units|^stat::peak_rss_mb" "$BUILD/$t.log" | tr '\n' ' ')"
done
[ $found -eq 0 ] || exit 1
echo "[fuzz] no crashes"
