#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest), then the threaded core tests
# again under ThreadSanitizer (a separate build of the core tests only).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 600)
if [ "${MIRRORLAB_SKIP_TSAN:-0}" != 1 ]; then
  echo "== ThreadSanitizer build of the threaded core tests"
  if [ ! -f build-tsan/build.ninja ]; then
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMIRRORLAB_TSAN=ON \
      -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF >/dev/null
  fi
  cmake --build build-tsan -j"$(nproc)" --target test_distribute test_train
  (cd build-tsan && TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1" ctest --output-on-failure -R "distribute|train" -j1 --timeout 900)
fi
