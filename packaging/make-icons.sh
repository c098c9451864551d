#!/usr/bin/env bash
# Renders the application icon (resources/icons/mirrorlab.svg) as the PNG sizes the hicolor theme
# and AppStream want. Run after changing the SVG; the PNGs are committed so a build needs no SVG
# renderer. Needs rsvg-convert (Debian package librsvg2-bin).
set -euo pipefail
cd "$(dirname "$0")/.."
for s in 16 22 24 32 48 64 128 256 512; do
  rsvg-convert -w "$s" -h "$s" resources/icons/mirrorlab.svg -o "packaging/icons/mirrorlab-$s.png"
done
