#!/usr/bin/env bash
# mirrorlab-cli on GPUs end to end: a recorded training run on 2 logical GPUs (spirals, generated, so
# no data set is needed) that says which all-reduce ran and why, stays in sync, saves weights that
# `evaluate` reads back on gpu:0 (same accuracy as the last validation), and lands in the run store as finished with its GPU devices;
# then the same for a small CNN with synchronized BatchNormalization.
# Exit 77 (a skip for ctest) where `mirrorlab-cli devices` lists no GPU, with its reason.
set -u
CLI=$1
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export MIRRORLAB_DB=$T/runs.sqlite
devices=$("$CLI" devices 2>&1)
if ! grep -q '^gpu:0 ' <<<"$devices"; then
  echo "SKIPPED: $(grep '^GPUs: none' <<<"$devices")"
  exit 77
fi
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
expect_contains() { # name output needle
  if grep -qF -- "$3" <<<"$2"; then ok; else bad "$1: output lacks '$3'"; echo "$2" | head -30; fi
}

cat > "$T/sp.json" <<JSON
{"schema_version": 1, "name": "cli gpu spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 64, "activation": "tanh"},
                                         {"type": "Dropout", "rate": 0.1},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 3000, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 3, "batch_size": 64, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 1},
 "distribute": {"devices": "cpu:1"}}
JSON
out=$("$CLI" train "$T/sp.json" --devices gpu:0x2 --save-weights "$T/w.mlw" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "train on gpu:0x2 exit $rc"
echo "$out" | head -8
expect_contains train "$out" "2 replicas on gpu:0/0,gpu:0/1 (logical GPUs sharing GPU 0)"
expect_contains train "$out" "all-reduce: logical GPUs share GPU 0: NCCL refuses two ranks on one GPU, so Mirrorlab's device-memory all-reduce is used"
expect_contains train "$out" "replicas in sync (equal weight checksums)"
expect_contains train "$out" "float32 products in float32 (TF32 off; --tf32 turns it on"
expect_contains train "$out" "recorded as run 1"
# The start line says where the device samples come from: NVML of GPU 0 for both replicas, or why not.
if grep -qF "GPU telemetry from NVML every 0.5 s, off the training threads: utilization, memory used and temperature of gpu:0 (one sample of the physical GPU for the 2 replicas that share it)" <<<"$out" ||
   grep -qF "as on CPU devices: NVML cannot be read (" <<<"$out"; then ok; else bad "train: no GPU telemetry line"; fi
expect_contains train "$out" "val_accuracy"
last_val=$(grep -oP 'val_accuracy: \K[0-9.]+' <<<"$out" | tail -1)

out=$("$CLI" evaluate "$T/sp.json" --weights "$T/w.mlw" --devices gpu:0 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "evaluate on gpu:0 exit $rc: $out"
expect_contains evaluate "$out" "600 samples on 1 replica on gpu:0"
# The saved weights came from the GPU: evaluating them gives the last epoch's validation accuracy.
acc=$(grep -oP '^loss: [0-9.]+ - accuracy: \K[0-9.]+' <<<"$out")
[ -n "$acc" ] && [ "$acc" = "$last_val" ] && ok || bad "evaluate accuracy '${acc:-none}' != the run's last val_accuracy '$last_val'"

# A convolutional model with synchronized BatchNorm on the GPU (Reshape gives the spirals' hidden
# features an image shape): in sync, and its saved weights (moving statistics included) evaluate on
# gpu:0 to the run's last validation accuracy.
cat > "$T/cnn.json" <<JSON
{"schema_version": 1, "name": "cli gpu cnn",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 16, "activation": "tanh"},
                                         {"type": "Reshape", "target_shape": [4, 4, 1]},
                                         {"type": "Conv2D", "filters": 4, "kernel_size": 2, "padding": "same"},
                                         {"type": "BatchNormalization", "synchronized": true},
                                         {"type": "Activation", "activation": "relu"},
                                         {"type": "MaxPooling2D", "pool_size": 2},
                                         {"type": "Flatten"},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 2000, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 2, "batch_size": 30, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 1},
 "distribute": {"devices": "cpu:1"}}
JSON
out=$("$CLI" train "$T/cnn.json" --devices gpu:0x2 --save-weights "$T/cnn.mlw" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || { bad "cnn train on gpu:0x2 exit $rc"; echo "$out" | tail -5; }
expect_contains "cnn train" "$out" "replicas in sync (equal weight checksums)"
cnn_val=$(grep -oP 'val_accuracy: \K[0-9.]+' <<<"$out" | tail -1)
out=$("$CLI" evaluate "$T/cnn.json" --weights "$T/cnn.mlw" --devices gpu:0 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "cnn evaluate on gpu:0 exit $rc: $out"
acc=$(grep -oP '^loss: [0-9.]+ - accuracy: \K[0-9.]+' <<<"$out")
[ -n "$acc" ] && [ "$acc" = "$cnn_val" ] && ok || bad "cnn evaluate accuracy '${acc:-none}' != the run's last val_accuracy '$cnn_val'"

# Mixed precision on GPUs: the start line names the GPU's kernels, and the replicas stay in sync.
out=$("$CLI" train "$T/sp.json" --devices gpu:0x2 --precision mixed_float16 --epochs 1 --no-record 2>&1); rc=$?
[ $rc -eq 0 ] && ok || { bad "mixed_float16 train on gpu:0x2 exit $rc"; echo "$out" | tail -5; }
expect_contains "mixed_float16" "$out" "precision mixed_float16: Dense and Conv2D layers compute in float16"
expect_contains "mixed_float16" "$out" "products on float16 tensor cores with cublasGemmEx"
expect_contains "mixed_float16" "$out" "replicas in sync (equal weight checksums)"

out=$("$CLI" runs list --json 2>&1)
expect_contains "runs list" "$out" '"status": "finished"'
expect_contains "runs list" "$out" '"devices": "gpu:0x2"'

echo "cli on GPU: $passes passed, $fails failed"
[ $fails -eq 0 ]
