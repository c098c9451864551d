#!/usr/bin/env bash
# Builds the Debian packages in build/packages/: mirrorlab-cli (CLI, examples, lessons; no Qt),
# mirrorlab (the studio, its launcher entry and icons) and, where CUDA is found, mirrorlab-cuda.
# Install with: sudo apt install ./build/packages/mirrorlab*_amd64.deb
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
rm -rf build/packages
(cd build && cpack -G DEB)
ls -l build/packages/*.deb
