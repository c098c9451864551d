#!/usr/bin/env bash
# mirrorlab-cli end to end: summary figures, a short recorded training run with replicas, weights
# saved and used by evaluate and predict (output shape), scale's table, and every bad input giving
# one clear message and a non-zero exit without touching the store.
set -u
CLI=$1; SRC=$2
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export MIRRORLAB_DB=$T/runs.sqlite
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
expect_contains() { # name output needle
  if grep -qF -- "$3" <<<"$2"; then ok; else bad "$1: output lacks '$3'"; echo "$2" | head -20; fi
}
expect_fail() { # name needle cmd...
  local name=$1 needle=$2; shift 2
  local out rc; out=$("$@" 2>&1); rc=$?
  if [ $rc -eq 0 ]; then bad "$name: exit 0"; elif ! grep -qF -- "$needle" <<<"$out"; then bad "$name: message lacks '$needle': $out"; else ok; fi
}

out=$("$CLI" summary "$SRC/projects/fashion-mlp.json")
expect_contains summary "$out" "Total params: 101,770"
expect_contains summary "$out" "dense_1 (Dense)             (None, 10)                1,290"

# A spirals project small enough for CI: 3 replicas, unequal shards, accumulation.
cat > "$T/sp.json" <<JSON
{"schema_version": 1, "name": "cli spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 32, "activation": "tanh"},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 900, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 3, "batch_size": 50, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 1},
 "distribute": {"devices": "cpu:3"}}
JSON
out=$("$CLI" train "$T/sp.json" --accumulate 2 --lr-scaling sqrt --save-weights "$T/w.mlw" 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "train exit $rc: $out"
expect_contains train "$out" "3 replicas on cpu:0..2, simulated"
expect_contains train "$out" "global batch 50, per-replica batch 8-9, 2 micro-batches of 25"
# The rule follows the global batch: 50 here whatever the devices, so sqrt scaling keeps the rate ...
expect_contains train "$out" "learning rate 0.01 (0.01 was set for a global batch of 50 and the global batch is still 50, so sqrt scaling changes nothing)"
expect_contains train "$out" "replicas in sync (equal weight checksums)"
expect_contains train "$out" "val_accuracy"
# ... while 16 per device on 3 devices is a global batch of 48, three times the 16 the rate was set for.
out=$("$CLI" train "$T/sp.json" --epochs 1 --per-device-batch 16 --lr-scaling linear 2>&1)
expect_contains lr-scaling "$out" "learning rate 0.03 (0.01 was set for a global batch of 16; the global batch is 48, so linear scaling gives 0.01 x 3 = 0.03)"
expect_contains train "$out" "recorded as run 2"

# The sharded optimizer update (ZeRO stage 1): said at start, replicas still in sync, stored in the config.
out=$("$CLI" train "$T/sp.json" --epochs 1 --shard-optimizer 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "train --shard-optimizer exit $rc: $out"
expect_contains shard "$out" "optimizer sharded (ZeRO stage 1): each replica updates 1/3 of the parameters with 1/3 of the optimizer state"
expect_contains shard "$out" "replicas in sync (equal weight checksums)"
# Without a spare core per replica for a communication thread (2 x 3 > cores), the exchange is fused into the update.
if [ "$(nproc)" -lt 6 ]; then
  expect_contains shard "$out" "reduce-scattered by the sharded update itself"
  expect_contains shard "$out" "updates them and writes them into the others, tile by tile, in one pass after backward"
fi
expect_contains shard "$("$CLI" runs show 3 2>&1)" "shard_optimizer"
# TF32 is a GPU setting: on CPU devices the start line says it changes nothing.
out=$("$CLI" train "$T/sp.json" --epochs 1 --tf32 --no-record 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "train --tf32 exit $rc: $out"
expect_contains tf32 "$out" "TF32 is for GPUs: CPU devices compute their float32 products in float32"

out=$("$CLI" runs list --json)
expect_contains "runs list" "$out" '"status": "finished"'
out=$("$CLI" evaluate "$T/sp.json" --weights "$T/w.mlw" --devices cpu:2)
expect_contains evaluate "$out" "180 samples on 2 replicas"
printf '0.1,0.2\n-0.5,0.3\n0.9,-0.9\n0,0\n' > "$T/in.csv"
"$CLI" predict "$T/sp.json" --weights "$T/w.mlw" --input "$T/in.csv" --output "$T/p.csv" --devices cpu:3 2> "$T/p.err"
rows=$(($(wc -l < "$T/p.csv") - 1)); cols=$(head -1 "$T/p.csv" | tr ',' '\n' | wc -l)
[ "$rows" = 4 ] && [ "$cols" = 3 ] && ok || bad "predict shape ($rows, $cols), want (4, 3)"
expect_contains predict "$(cat "$T/p.err")" "predicted (4, 3) probabilities"
sum=$(awk -F, 'NR>1 {s=0; for(i=1;i<=NF;i++) s+=$i; if (s<0.999||s>1.001) bad=1} END {print bad?"bad":"ok"}' "$T/p.csv")
[ "$sum" = ok ] && ok || bad "predicted rows do not sum to 1"

out=$("$CLI" scale "$T/sp.json" --devices cpu:1,2 --steps 20 --no-record)
expect_contains scale "$out" "speed-up"
expect_contains scale "$out" "cpu:2"

before=$(md5sum < "$MIRRORLAB_DB")
expect_fail "missing project" "cannot open project file" "$CLI" train "$T/none.json"
echo '{"model": ' > "$T/bad.json"
expect_fail "invalid json" "not valid JSON" "$CLI" train "$T/bad.json"
sed 's/"units": 32/"unitz": 32/' "$T/sp.json" > "$T/b2.json"
expect_fail "unknown argument" "Model screen › layer 1 'dense' (Dense) (entry 1 of layers in the file's model section): unknown argument 'unitz'" "$CLI" train "$T/b2.json"
sed 's/"epochs": 3/"epochs": "three"/' "$T/sp.json" > "$T/b3.json"
expect_fail "wrong type" "Training screen › Epochs (epochs in the file's training section) must be a positive integer" "$CLI" train "$T/b3.json"
sed 's/"units": 3,/"units": 4,/' "$T/sp.json" > "$T/b4.json"
expect_fail "wrong output size" "Set its Units to 3" "$CLI" train "$T/b4.json"
expect_fail "impossible batch" "larger than the training set (720 samples): set Training screen › Batch size (batch_size in the file's training section) to at most 720" "$CLI" train "$T/sp.json" --batch-size 5000
expect_fail "missing data set" "dataset-fashion-mnist" "$CLI" train "$SRC/projects/fashion-mlp.json" --data-path "$T/nowhere"
expect_fail "bad devices" "use cpu:N" "$CLI" train "$T/sp.json" --devices cpu:zero
# GPU devices: without a GPU the refusal carries the probe's reason (as `devices` prints it); with
# GPUs, a device past the last one is named.
gpus=$("$CLI" devices)
if reason=$(grep -oP '^GPUs: none\. \K.*' <<<"$gpus"); then
  expect_fail "gpu without a GPU" "$reason" "$CLI" train "$T/sp.json" --devices gpu:0
  expect_fail "logical gpus without a GPU" "$reason" "$CLI" train "$T/sp.json" --devices gpu:0x4
else
  expect_fail "gpu that does not exist" "gpu:63 does not exist: this machine has" "$CLI" train "$T/sp.json" --devices gpu:63
fi
expect_fail "weights of another model" "another architecture" "$CLI" evaluate "$SRC/projects/spirals.json" --weights "$T/w.mlw"
echo "not a database" > "$T/foreign.sqlite"
f_before=$(md5sum < "$T/foreign.sqlite")
expect_fail "foreign store" "foreign.sqlite" "$CLI" train "$T/sp.json" --db "$T/foreign.sqlite"
[ "$(md5sum < "$T/foreign.sqlite")" = "$f_before" ] && ok || bad "foreign store was modified"
[ "$(md5sum < "$MIRRORLAB_DB")" = "$before" ] && ok || bad "failed commands modified the run store"

# sweep: a 2x2 grid on the spirals, 4 runs tagged with the sweep, table, CSV; bad grids refused.
SDB=$T/sweep.sqlite
out=$("$CLI" sweep "$SRC/projects/spirals.json" --batch-size 32,64 --lr 3e-3,1e-2 --devices cpu:1 --epochs 2 --target 0.5 \
      --db "$SDB" --csv "$T/sweep.csv" 2>&1)
expect_contains sweep "$out" "4 of 4 points finished"
expect_contains sweep "$out" "* best: #"
tagged=$("$CLI" runs list --db "$SDB" --tag sweep:1 2>&1 | grep -c "finished")
[ "$tagged" = 4 ] && ok || bad "sweep: $tagged runs tagged sweep:1, expected 4"
[ "$(wc -l < "$T/sweep.csv")" = 5 ] && ok || bad "sweep CSV: expected a header and 4 rows"
sd_before=$(md5sum < "$SDB")
expect_fail "sweep empty list" "--lr: the list is empty" "$CLI" sweep "$SRC/projects/spirals.json" --lr "" --db "$SDB"
expect_fail "sweep not a number" "'abc' is not a number" "$CLI" sweep "$SRC/projects/spirals.json" --batch-size 32,abc --db "$SDB"
expect_fail "sweep too big" "--max-points 12" "$CLI" sweep "$SRC/projects/spirals.json" --batch-size 8,16,32,64 --lr 1,2,3 --max-points 10 --db "$SDB"
expect_fail "sweep unsplittable" "cannot be split across the 2 replicas" "$CLI" sweep "$SRC/projects/spirals.json" --batch-size 1,32 --devices cpu:2 --db "$SDB"
expect_fail "sweep resume unknown" "there is no sweep 99" "$CLI" sweep --resume 99 --db "$SDB"
[ "$(md5sum < "$SDB")" = "$sd_before" ] && ok || bad "refused sweeps modified the run store"
# A sweep in which no point trains (a fault fails every run at step 2) failed: exit 1, the first
# point's reason, the way to resume; its points are stored failed.
sed 's/"devices": "cpu:3"/"devices": "cpu:3", "faults": ["fail:cpu:0@step=2"]/' "$T/sp.json" > "$T/failing.json"
out=$("$CLI" sweep "$T/failing.json" --batch-size 32,64 --lr 1e-2 --devices cpu:1 --epochs 1 --db "$T/fsweep.sqlite" 2>&1); rc=$?
[ $rc -eq 1 ] && ok || bad "sweep with no point trained: exit $rc, expected 1: $out"
expect_contains "sweep failed" "$out" "no point trained (the first: "
expect_contains "sweep failed reason" "$out" "in step 2 (fail fault)"
expect_contains "sweep failed resume" "$out" "mirrorlab-cli sweep --resume 1"
expect_contains "sweep failed list" "$("$CLI" sweep --list --db "$T/fsweep.sqlite" 2>&1)" "failed"

# Gradients sent as bfloat16 (distribute.allreduce_dtype): said at start, replicas in sync, stored
# in the run's config, and the what-if counts two bytes per parameter (195 of them: 780 or 390 bytes).
BDB=$T/bf.sqlite
out=$(MIRRORLAB_DB=$BDB "$CLI" train "$T/sp.json" --epochs 1 --allreduce-dtype bfloat16 2>&1); rc=$?
[ $rc -eq 0 ] && ok || bad "train --allreduce-dtype bfloat16 exit $rc: $out"
expect_contains wire "$out" "ring over host memory, bfloat16 on the wire"
expect_contains wire "$out" "gradients cross between replicas as bfloat16: half the bytes of float32"
expect_contains wire "$out" "replicas in sync (equal weight checksums)"
expect_contains wire "$(MIRRORLAB_DB=$BDB "$CLI" runs show 1 2>&1)" "allreduce_dtype          bfloat16"
out=$("$CLI" what-if 1 --db "$BDB" --devices 1,2 2>&1)
expect_contains "wire what-if" "$out" "all-reduce of 0.4 KiB of bfloat16 gradients"
out=$("$CLI" what-if 1 --db "$BDB" --devices 1,2 --allreduce-dtype float32 2>&1)
expect_contains "wire what-if" "$out" "all-reduce of 0.8 KiB of float32 gradients"
sed 's/"devices": "cpu:3"/"devices": "cpu:3", "allreduce_dtype": "fp8"/' "$T/sp.json" > "$T/fp8.json"
expect_fail "wire bad dtype" "Devices screen › Gradients on the wire" "$CLI" train "$T/fp8.json" --no-record
expect_fail "wire bad option" "--allreduce-dtype" "$CLI" train "$T/sp.json" --allreduce-dtype float16 --no-record

echo "cli: $passes passed, $fails failed"
[ $fails -eq 0 ]
