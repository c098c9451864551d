#!/usr/bin/env bash
# The main job: installs what is missing, builds, then opens the studio on the default project;
# without a display (or without the studio), trains the default project in the terminal.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/deps.sh
scripts/build.sh
if [ -n "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ] && [ -x build/app/mirrorlab ]; then
  exec build/app/mirrorlab "$@"
fi
exec build/app/mirrorlab-cli train projects/fashion-mlp.json "$@"
