#!/usr/bin/env bash
# Configures (once) and builds the sanitizer build in build-san/: clang with AddressSanitizer +
# UndefinedBehaviorSanitizer and libFuzzer coverage, no studio, no benchmarks, no CUDA. It holds
# the core tests, the CLI and the fuzz targets; builds the targets given (default: all of them).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MIRRORLAB_SAN_BUILD_DIR:-build-san}
scripts/deps.sh clang libfuzzer-14-dev
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMIRRORLAB_FUZZ=ON \
    -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF -DMIRRORLAB_BUILD_CUDA=OFF \
    -DMIRRORLAB_TEST_DIRS="core/nn;core/data;core/distribute;core/train;core/store;core/project;core/learn;app" >/dev/null
fi
TARGETS=("$@")
if [ ${#TARGETS[@]} -eq 0 ]; then
  TARGETS=(test_nn test_data test_distribute test_train test_store test_project test_learn mirrorlab-cli fuzz_replay
           fuzz_project fuzz_idx fuzz_csv fuzz_weights fuzz_lesson fuzz_store)
fi
cmake --build "$BUILD" -j"$(nproc)" --target "${TARGETS[@]}"
