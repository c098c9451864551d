#!/usr/bin/env bash
# Configures (once) and builds Mirrorlab in build/ (Release). Incremental: fast when nothing changed.
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${MIRRORLAB_BUILD_DIR:-build}
if [ ! -f "$BUILD/build.ninja" ]; then
  cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@"
fi
cmake --build "$BUILD" -j"$(nproc)"
