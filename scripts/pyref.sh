#!/usr/bin/env bash
# Builds the reference environment once: a virtual environment (default build/pyref) holding the
# pinned TensorFlow (CPU), Keras 3, ONNX Runtime, TensorBoard, NumPy and h5py of
# scripts/pyref-requirements.txt, from Python's package index. Reused while the pins are unchanged
# (a stamp holds their hash); pip's cache (~/.cache/pip, or PIP_CACHE_DIR) is kept, so a rebuild
# downloads nothing. Prints the environment's python on the last line.
# Exit 2, with one message naming the package, when the index cannot be reached or a wheel fails.
set -euo pipefail
cd "$(dirname "$0")/.."
ENV_DIR=${MIRRORLAB_PYREF:-build/pyref}
REQ=scripts/pyref-requirements.txt
PY=${MIRRORLAB_PYREF_BASE_PYTHON:-/usr/bin/python3}
hash=$(sha256sum "$REQ" | cut -c1-16)
if [ -f "$ENV_DIR/.stamp" ] && [ "$(cat "$ENV_DIR/.stamp")" = "$hash" ] && [ -x "$ENV_DIR/bin/python" ]; then
  echo "$(cd "$ENV_DIR" && pwd)/bin/python"
  exit 0
fi
if ! "$PY" -c 'import venv, ensurepip' 2>/dev/null; then
  scripts/deps.sh python3-venv >&2
fi
echo "== Reference environment: $ENV_DIR (TensorFlow, Keras, ONNX Runtime, TensorBoard; once)" >&2
rm -rf "$ENV_DIR"
mkdir -p "$(dirname "$ENV_DIR")"
"$PY" -m venv "$ENV_DIR" >&2
log=$(mktemp)
trap 'rm -f "$log"' EXIT
if ! "$ENV_DIR/bin/python" -m pip install --progress-bar off -q -r "$REQ" >"$log" 2>&1; then
  # Name the package pip was working on and why it stopped, in one message.
  pkg=$(grep -oE "requirement [A-Za-z0-9_.-]+==[0-9A-Za-z.+-]+" "$log" | tail -1 | cut -d' ' -f2 || true)
  why=$(grep -E "^ERROR" "$log" | tail -1 | cut -c1-300 || true)
  if grep -qiE "from versions: none|NewConnectionError|name resolution|Network is unreachable|ConnectTimeout|ProxyError|Max retries" "$log"; then
    echo "error: the reference environment could not fetch ${pkg:-its packages} from Python's package index (unreachable, or no such version). Check the network, or set PIP_INDEX_URL to a mirror, then run scripts/test.sh again; once built, $ENV_DIR is reused offline." >&2
  else
    echo "error: installing ${pkg:-the reference environment's packages} into $ENV_DIR failed (${why:-see pip's output}). Fix or change that pin in $REQ, then run scripts/test.sh again." >&2
  fi
  rm -rf "$ENV_DIR"
  exit 2
fi
TF_CPP_MIN_LOG_LEVEL=3 "$ENV_DIR/bin/python" - >&2 <<'PYEOF'
import tensorflow as tf, keras, onnxruntime, tensorboard, numpy, h5py
print(f"   TensorFlow {tf.__version__}, Keras {keras.__version__}, ONNX Runtime {onnxruntime.__version__}, "
      f"TensorBoard {tensorboard.__version__}, NumPy {numpy.__version__}")
PYEOF
echo "$hash" > "$ENV_DIR/.stamp"
echo "$(cd "$ENV_DIR" && pwd)/bin/python"
