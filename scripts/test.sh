#!/usr/bin/env bash
# Installs what is missing, builds, and runs every test (ctest), then the install test (a temporary
# prefix and the .deb packages), then the threaded core tests again under ThreadSanitizer (a separate build of the core tests only).
set -euo pipefail
cd "$(dirname "$0")/.."
# The tests also run generated PyTorch programs (Debian's CPU build) and check exported models
# with the ONNX checker and h5py.
scripts/deps.sh python3-torch python3-numpy python3-onnx python3-h5py
scripts/build.sh
(cd build && ctest --output-on-failure -j2 --timeout 600)
echo "== Installed into a temporary prefix, used from outside the source tree, packaged as .deb"
tests/install/install_test.sh build
if [ "${MIRRORLAB_SKIP_TSAN:-0}" != 1 ]; then
  echo "== ThreadSanitizer build of the threaded core tests"
  if [ ! -f build-tsan/build.ninja ]; then
    cmake -S . -B build-tsan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DMIRRORLAB_TSAN=ON \
      -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF >/dev/null
  fi
  cmake --build build-tsan -j"$(nproc)" --target test_distribute test_train test_store
  export TSAN_OPTIONS="halt_on_error=1 second_deadlock_stack=1"
  for t in build-tsan/tests/core/distribute/test_distribute build-tsan/tests/core/train/test_train \
           build-tsan/tests/core/store/test_store; do
    [ -x "$t" ] || continue
    echo "-- $t (ThreadSanitizer)"
    "$t" --gtest_brief=1
  done
fi
