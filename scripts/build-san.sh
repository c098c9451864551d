#!/usr/bin/env bash
# Configures (once) and builds the sanitizer build in build-san/: clang with AddressSanitizer +
# UndefinedBehaviorSanitizer and libFuzzer coverage, no studio, no benchmarks, no CUDA. It holds
# the core tests (and their helper programs), the CLI and the fuzz targets; builds the targets given
# (default: everything the build holds, so every test ctest lists has its binaries).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MIRRORLAB_SAN_BUILD_DIR:-build-san}
scripts/deps.sh clang libfuzzer-14-dev
if [ ! -f "$BUILD/build.ninja" ]; then
  CC=clang CXX=clang++ cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Debug -DMIRRORLAB_FUZZ=ON \
    -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF -DMIRRORLAB_BUILD_CUDA=OFF \
    -DMIRRORLAB_TEST_DIRS="core/nn;core/data;core/distribute;core/train;core/store;core/project;core/learn;app" >/dev/null
fi
if [ $# -eq 0 ]; then
  cmake --build "$BUILD" -j"$(nproc)"
else
  cmake --build "$BUILD" -j"$(nproc)" --target "$@"
fi
