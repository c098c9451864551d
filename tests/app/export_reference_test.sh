#!/usr/bin/env bash
# Exports and imports against the real programs, in the reference environment (scripts/pyref.sh):
#  - Keras 3 opens `export --format keras` archives of the MLP (from .npz weights), the CNN, the CNN
#    with BatchNormalization and a model of every layer kind, and predicts what `predict` predicts
#    on 1,000 test images (1e-5, batches of 1 and 256);
#  - ONNX Runtime runs the ONNX exports of the MLP, CNN and CNN with BatchNormalization (1e-5,
#    batches of 1 and 256);
#  - models built and trained by TensorFlow here, imported with `mirrorlab-cli import`, evaluate in
#    Mirrorlab to Keras' evaluate (1e-5); bad .keras files refused with exit 2, nothing written;
#  - two recorded runs exported with `runs export --tensorboard`, read back by TensorBoard's own
#    loaders and compared value by value with the run store.
set -u
CLI=$1; SRC=$2; PYREF=$3
CHECKS=$SRC/tests/core/export
DATA=/usr/share/datasets/fashion-mnist
if [ ! -x "$PYREF" ]; then
  echo "FAIL: the reference environment's python ($PYREF) is missing: run scripts/pyref.sh (or pass -DMIRRORLAB_PYREF_PYTHON)"
  exit 1
fi
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export MIRRORLAB_DB=$T/runs.sqlite
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
run_check() { # name cmd...: a checker must exit 0; its output is echoed for the log
  local name=$1; shift
  local out; if out=$("$@" 2>&1); then ok; echo "$out"; else bad "$name: $out"; fi
}
expect_refused() { # name needle cmd...: exit 2 and the message holds needle
  local name=$1 needle=$2; shift 2
  local out rc; out=$("$@" 2>&1); rc=$?
  if [ $rc -ne 2 ]; then bad "$name: exit $rc: $out"; elif ! grep -qF -- "$needle" <<<"$out"; then bad "$name: message lacks '$needle': $out"; else ok; echo "$name: $out"; fi
}
listing() { (cd "$1" && ls -A | sort); }

"$PYREF" - "$DATA/t10k-images-idx3-ubyte.gz" "$T/t1k.idx" <<'PY'
import gzip, sys
raw = gzip.open(sys.argv[1]).read()
open(sys.argv[2], "wb").write(raw[:4] + (1000).to_bytes(4, "big") + raw[8:16] + raw[16:16 + 1000 * 28 * 28])
PY

# Every layer kind: Reshape, Conv2D (strides, same padding, no bias), BatchNormalization over images
# and over a (49, 4) sample, both poolings with "same" and "valid", Dropout, Activation, GlobalAveragePooling2D
# is in the imported kinds model; a softmax over a (2, 5) sample (Keras: Softmax(axis=[1, 2])).
cat > "$T/kinds.json" <<'JSON'
{"schema_version": 1, "name": "Every layer kind",
 "model": {"input_shape": [28, 28], "layers": [
   {"type": "Reshape", "target_shape": [28, 28, 1]},
   {"type": "Conv2D", "filters": 4, "kernel_size": 3, "strides": 2, "padding": "same", "activation": "tanh", "use_bias": false,
    "kernel_initializer": "he_normal"},
   {"type": "BatchNormalization", "center": false, "momentum": 0.9},
   {"type": "AveragePooling2D", "pool_size": 3, "strides": 1, "padding": "same"},
   {"type": "MaxPooling2D", "pool_size": 2},
   {"type": "Activation", "activation": "sigmoid"},
   {"type": "Dropout", "rate": 0.2},
   {"type": "Reshape", "target_shape": [49, -1]},
   {"type": "BatchNormalization", "scale": false},
   {"type": "Flatten"},
   {"type": "Dense", "units": 32, "activation": "relu", "use_bias": false},
   {"type": "Dense", "units": 10, "activation": "linear", "bias_initializer": "ones"},
   {"type": "Reshape", "target_shape": [2, 5]},
   {"type": "Activation", "activation": "softmax"}]},
 "data": {"kind": "fashion-mnist", "path": "/usr/share/datasets/fashion-mnist"},
 "training": {"epochs": 1, "batch_size": 64, "optimizer": {"name": "sgd", "learning_rate": 0.05, "momentum": 0.9},
              "loss": "sparse_categorical_crossentropy", "metrics": ["accuracy"], "seed": 3},
 "distribute": {"devices": "cpu:2"}}
JSON

# Train a few steps, predict 1,000 test images, export. The MLP keeps .npz weights: export reads them.
declare -A PROJECT=([mlp]=$SRC/projects/fashion-mlp.json [cnn]=$SRC/projects/fashion-cnn.json
                    [cnn_bn]=$SRC/projects/fashion-cnn-bn.json [kinds]=$T/kinds.json)
declare -A WEIGHTS=([mlp]=$T/mlp.npz [cnn]=$T/cnn.mlw [cnn_bn]=$T/cnn_bn.mlw [kinds]=$T/kinds.mlw)
keras_args=(); onnx_args=()
for m in mlp cnn cnn_bn kinds; do
  out=$("$CLI" train "${PROJECT[$m]}" --steps 20 --save-weights "${WEIGHTS[$m]}" --no-record 2>&1) || bad "train $m: $out"
  "$CLI" predict "${PROJECT[$m]}" --weights "${WEIGHTS[$m]}" --input "$T/t1k.idx" --output "$T/$m.csv" 2>/dev/null || bad "predict $m"
  out=$("$CLI" export "${PROJECT[$m]}" --weights "${WEIGHTS[$m]}" --format keras --output "$T/$m.keras" 2>&1) || bad "export keras $m: $out"
  grep -qF "Keras 3 model (configuration and weights)" <<<"$out" && ok || bad "export keras $m said: $out"
  keras_args+=("$T/$m.keras" "$T/t1k.idx" "$T/$m.csv")
  if [ $m != kinds ]; then  # ONNX normalises axis 1: the (49, 4) BatchNormalization has no ONNX form
    out=$("$CLI" export "${PROJECT[$m]}" --weights "${WEIGHTS[$m]}" --output "$T/$m.onnx" 2>&1) || bad "export onnx $m: $out"
    onnx_args+=("$T/$m.onnx" "$T/t1k.idx" "$T/$m.csv")
  fi
done
run_check "keras load_model vs predict" "$PYREF" "$CHECKS/keras_load.py" "${keras_args[@]}"
run_check "onnxruntime vs predict" "$PYREF" "$CHECKS/onnx_runtime.py" "${onnx_args[@]}"

# The output's name must fit the format, with the fix in the message; nothing is written.
before=$(listing "$T")
expect_refused "onnx to .npz" "or pass --format torch (PyTorch weights) for that name" \
  "$CLI" export "${PROJECT[mlp]}" --weights "$T/mlp.npz" --format onnx --output "$T/a.npz"
expect_refused "keras to .h5" "name it '*.keras' (the whole model) or '*.weights.h5'" \
  "$CLI" export "${PROJECT[mlp]}" --weights "$T/mlp.npz" --format keras --output "$T/a.h5"
[ "$(listing "$T")" = "$before" ] && ok || bad "refused exports wrote files"

# Import: TensorFlow builds and trains the models, Keras evaluates them; Mirrorlab imports and evaluates.
mkdir -p "$T/k"
run_check "keras models" "$PYREF" "$CHECKS/keras_models.py" "$DATA" "$T/k"
for m in mlp cnn_bn kinds; do
  out=$("$CLI" import "$T/k/$m.keras" 2>&1) || bad "import $m: $out"
  echo "$out"
  ev=$("$CLI" evaluate "$T/k/$m.json" --weights "$T/k/$m.mlw" --json 2>&1) || bad "evaluate $m: $ev"
  run_check "import $m: evaluate vs keras" python3 - "$T/k/keras_evaluate.json" "$m" "$ev" <<'PY'
import json, sys
keras = json.load(open(sys.argv[1]))[sys.argv[2]]
ml = json.loads(sys.argv[3].strip().splitlines()[-1])
dl, da = abs(ml["loss"] - keras["loss"]), abs(ml["accuracy"] - keras["accuracy"])
print(f"{sys.argv[2]}: mirrorlab loss {ml['loss']:.8f} accuracy {ml['accuracy']:.5f} on {ml['samples']}, keras loss "
      f"{keras['loss']:.8f} accuracy {keras['accuracy']:.5f}: |dloss|={dl:.2g} |dacc|={da:.2g}")
sys.exit(0 if dl <= 1e-5 and da <= 1e-5 and ml["samples"] == 10000 else 1)
PY
done
grep -q '"nesterov": true' "$T/k/cnn_bn.json" && grep -q '"name": "sgd"' "$T/k/cnn_bn.json" && ok || bad "cnn_bn's SGD settings not imported"

# Mirrorlab's own archive comes back as the same model: evaluate gives the same numbers.
out=$("$CLI" import "$T/kinds.keras" --output-project "$T/back.json" --output-weights "$T/back.npz" 2>&1) || bad "import back: $out"
a=$("$CLI" evaluate "$T/kinds.json" --weights "$T/kinds.mlw" --json 2>&1); b=$("$CLI" evaluate "$T/back.json" --weights "$T/back.npz" --json 2>&1)
[ -n "$a" ] && [ "${a#*\"loss\"}" = "${b#*\"loss\"}" ] && ok || bad "exported then imported model evaluates differently: $a / $b"

before=$(listing "$T/k")
expect_refused "functional" "$T/k/functional.keras' holds a Functional model" "$CLI" import "$T/k/functional.keras"
expect_refused "layer Mirrorlab lacks" "layernorm.keras': layer 3 'norm' (LayerNormalization) has no counterpart" "$CLI" import "$T/k/layernorm.keras"
expect_refused "setting Mirrorlab lacks" "regularized.keras': layer 2 'hidden' (Dense) sets kernel_regularizer={\"class_name\":\"L2\"" "$CLI" import "$T/k/regularized.keras"
expect_refused "newer keras" "was saved by Keras 4.0.0, newer than" "$CLI" import "$T/k/newer.keras"
expect_refused "damaged" "$T/k/damaged.keras' is damaged" "$CLI" import "$T/k/damaged.keras"
expect_refused "legacy h5" "is an HDF5 file" "$CLI" import "$T/k/legacy.h5"
expect_refused "missing" "no such file" "$CLI" import "$T/k/none.keras"
[ "$(listing "$T/k")" = "$before" ] && ok || bad "refused imports wrote files: $(listing "$T/k")"

# TensorBoard: two recorded runs (two replicas with validation; one replica with loss scaling).
"$CLI" train "$SRC/projects/spirals.json" --epochs 2 >/dev/null 2>&1 || bad "train run 1"
"$CLI" train "$SRC/projects/spirals.json" --epochs 1 --devices cpu:1 --precision mixed_float16 >/dev/null 2>&1 || bad "train run 2"
out=$("$CLI" runs export 1 2 --tensorboard "$T/tb" 2>&1) || bad "runs export --tensorboard: $out"
echo "$out"
run_check "tensorboard reads the store's values" "$PYREF" "$CHECKS/tensorboard_check.py" "$MIRRORLAB_DB" "$T/tb" 1 2
expect_refused "tensorboard of a missing run" "has no run 9" "$CLI" runs export 1 9 --tensorboard "$T/tb2"
[ ! -e "$T/tb2" ] && ok || bad "a refused TensorBoard export made its folder"

echo "export references: $passes passed, $fails failed"
[ $fails -eq 0 ]
