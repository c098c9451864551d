#!/usr/bin/env bash
# Runs every libFuzzer target (project, IDX, CSV, .mlw and .npz/.npy weights, checkpoint and lesson
# readers, store opener) for SECONDS each (default 60) under AddressSanitizer +
# UndefinedBehaviorSanitizer, starting from seeds made by the real writers plus projects/ and
# projects/lessons/. New inputs accumulate in build-san/fuzz/corpus/; a crash stops with the input's path: copy it into tests/corpus/<target>/
# (with a FILE.expect naming the error it must give once fixed) so that ctest replays it forever.
set -euo pipefail
cd "$(dirname "$0")/.."
SECS=${1:-60}
BUILD=${MIRRORLAB_SAN_BUILD_DIR:-build-san}
TARGETS=(project idx csv weights npz checkpoint lesson store)
scripts/build-san.sh fuzz_replay "${TARGETS[@]/#/fuzz_}"
export ASAN_OPTIONS=${ASAN_OPTIONS:-halt_on_error=1:detect_leaks=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
W=$BUILD/fuzz
for b in fuzz_replay "${TARGETS[@]/#/fuzz_}"; do
  [ -x "$W/$b" ] || { echo "fuzz: $W/$b is missing after the build" >&2; exit 1; }
done
rm -rf "$W/seeds"
"$W/fuzz_replay" --write-seeds "$W/seeds"
cp projects/*.json "$W/seeds/project/"
cp projects/lessons/*.json "$W/seeds/lesson/"
failed=0
for t in "${TARGETS[@]}"; do
  mkdir -p "$W/corpus/$t" "$W/crashes/$t"
  log=$W/$t.log
  if "$W/fuzz_$t" -max_total_time="$SECS" -timeout=20 -rss_limit_mb=2560 -max_len=65536 -print_final_stats=1 \
       -artifact_prefix="$W/crashes/$t/" "$W/corpus/$t" "$W/seeds/$t" >"$log" 2>&1; then
    runs=$(grep -oP 'stat::number_of_executed_units:\s*\K[0-9]+' "$log" || echo "?")
    echo "fuzz_$t: $runs inputs in ${SECS}s, no crash"
  else
    failed=1
    echo "fuzz_$t FOUND A PROBLEM (log: $log):"
    grep -E "ERROR|SUMMARY|runtime error|Test unit written|deadly signal" "$log" | head -20
    echo "  copy the input into tests/corpus/$t/ and fix the reader"
  fi
done
exit $failed
