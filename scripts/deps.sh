#!/usr/bin/env bash
# Installs what Mirrorlab needs to build, test and run on Debian 12, only what is missing.
# Uses sudo when not root. Fast (no apt at all) when everything is present.
set -euo pipefail
PKGS=(cmake ninja-build openbox g++ pkg-config qt6-base-dev qt6-base-dev-tools libqt6sql6-sqlite
      libqcustomplot-dev libqcustomplot2.1-qt6 libsqlite3-dev libopenblas-dev zlib1g-dev
      libgtest-dev libbenchmark-dev nlohmann-json3-dev libcli11-dev dataset-fashion-mnist
      xvfb xauth x11-apps x11-utils imagemagick fonts-dejavu-core libqt6svg6 clang-format
      libonnx-dev libprotobuf-dev libhdf5-dev help2man desktop-file-utils appstream dpkg-dev man-db
      openmpi-bin libopenmpi-dev libdnnl-dev iptables)
EXTRA=("$@")
missing=()
for p in "${PKGS[@]}" "${EXTRA[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0
SUDO=""
[ "$(id -u)" -ne 0 ] && SUDO="sudo"
echo "installing: ${missing[*]}"
$SUDO apt-get update -qq
DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
