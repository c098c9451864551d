# shellcheck shell=bash disable=SC2154,SC2034
# Sourced by tests/gpu/run.sh: the correctness pass (GPU_CHECK=correctness). The kernel tests and
# the training tests run side by side (one GPU holds both; their CPU references share the cores),
# then the CLI and the Fashion-MNIST runs one after another.

correctness_pass() {
  local t lim rc
  echo "== correctness"
  t=$(now)
  running="host-side tests"
  lim=$(limit "$step_seconds")
  if [ "$lim" = 0 ]; then no_time "host side (loader, probe, RNG, locks)"; else
    run_step "$lim" "$logs/test_gpu_host.log" "$build/tests/gpu/test_gpu_host" --gtest_color=no
    gtest_row "host side (loader, probe, RNG, locks)" "$logs/test_gpu_host.log" $? "$lim" "$t"
  fi

  if [ "$gpu_state" = no ]; then
    gpu_skip "GPU kernels vs CPU"
    gpu_skip "GPU training vs CPU"
  else
    gpu_tests
  fi
  if ! gpu_skip "CLI gpu:0x2 recorded, evaluate gpu:0"; then cli_run; fi

  # Real models on real data: the subset the carried build brings (10,000 training and 2,000 test
  # images; no download) or the installed set.
  fashion=""
  local d
  for d in "$build/data/fashion-mnist" /usr/share/datasets/fashion-mnist; do
    if [ -f "$d/train-images-idx3-ubyte" ] || [ -f "$d/train-images-idx3-ubyte.gz" ]; then fashion=$d; break; fi
  done
  fashion_run "fashion-mlp gpu:0x4, 200 steps" fashion fashion-mlp.json --devices gpu:0x4 --steps 200
  fashion_run "fashion-cnn-bn gpu:0x2, 100 steps" fashion-cnn fashion-cnn-bn.json --devices gpu:0x2 --steps 100
  fashion_run "fashion-mlp mixed_bfloat16 gpu:0, 100" fashion-bf16 fashion-mlp.json --devices gpu:0 --steps 100 \
    --precision mixed_bfloat16
  fashion_run "fashion-mlp mixed_float16 gpu:0, 100" fashion-fp16 fashion-mlp.json --devices gpu:0 --steps 100 \
    --precision mixed_float16
}

# test_gpu_kernels and test_gpu_training at once, each under its own limit.
gpu_tests() {
  local t lim kpid tpid krc trc
  t=$(now)
  lim=$(limit "$step_seconds")
  if [ "$lim" = 0 ]; then
    no_time "GPU kernels vs CPU"
    no_time "GPU training vs CPU"
    return
  fi
  running="GPU kernels vs CPU and GPU training vs CPU (side by side)"
  MIRRORLAB_REQUIRE_GPU=$require timeout -k 10 "$lim" "$build/tests/gpu/test_gpu_kernels" --gtest_color=no \
    >"$logs/test_gpu_kernels.log" 2>&1 &
  kpid=$!
  MIRRORLAB_REQUIRE_GPU=$require timeout -k 10 "$lim" "$build/tests/gpu/test_gpu_training" --gtest_color=no \
    >"$logs/test_gpu_training.log" 2>&1 &
  tpid=$!
  step_pids=("$kpid" "$tpid")
  wait "$kpid"
  krc=$?
  wait "$tpid"
  trc=$?
  step_pids=()
  gtest_row "GPU kernels vs CPU" "$logs/test_gpu_kernels.log" "$krc" "$lim" "$t"
  gtest_row "GPU training vs CPU" "$logs/test_gpu_training.log" "$trc" "$lim" "$t"
  grep -E '^TF32 against float32' "$logs/test_gpu_training.log" | sed 's/^/   /'
}

# mirrorlab-cli trains on 2 logical GPUs, records the run, and evaluates the saved weights on gpu:0;
# then a CNN with synchronized BatchNorm and mixed_float16 (tests/gpu/cli_gpu_test.sh).
cli_run() {
  local name="CLI gpu:0x2 recorded, evaluate gpu:0" t lim rc
  t=$(now)
  lim=$(limit "$step_seconds")
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  running=$name
  run_step "$lim" "$logs/cli_gpu.log" bash "$root/tests/gpu/cli_gpu_test.sh" "$build/app/mirrorlab-cli"
  rc=$?
  if [ $rc = 0 ]; then
    row "$name" ok $(($(now) - t)) "$(tail -1 "$logs/cli_gpu.log")"
  elif [ $rc = 77 ] && [ "$require" = 0 ]; then
    row "$name" SKIP $(($(now) - t)) "$(head -1 "$logs/cli_gpu.log" | cut -c1-140)"
  else
    grep -E '^FAIL' "$logs/cli_gpu.log" | head -10
    row "$name" FAIL $(($(now) - t)) "exit $rc$(timed_out $rc && echo ", out of its ${lim}s"): $(grep -m1 '^FAIL' "$logs/cli_gpu.log" | cut -c1-120)"
    fail
  fi
}

# fashion_run NAME LOG PROJECT ARGS...: trains and records the run; a run whose replicas part
# fails by itself (the trainer compares their checksums at every epoch's end).
fashion_run() {
  local name=$1 logname=$2 log=$logs/$2.log project=$3 t lim rc last
  shift 3
  gpu_skip "$name" && return
  t=$(now)
  if [ -z "$fashion" ]; then
    row "$name" SKIP 0 "no data set: neither a carried subset (tests/gpu/pack.sh) nor /usr/share/datasets/fashion-mnist"
    return
  fi
  lim=$(limit 60)
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  running=$name
  run_step "$lim" "$log" env MIRRORLAB_DB="$logs/fashion-runs.sqlite" "$build/app/mirrorlab-cli" train \
    "$root/projects/$project" --data-path "$fashion" "$@"
  rc=$?
  last=$(tr '\r' '\n' <"$log" | grep -E '^  epoch [0-9]+:|^finished [0-9]+ steps' | tail -1 | sed 's/^  //')
  if [ $rc = 0 ] && grep -q 'recorded as run' "$log" && ! grep -q 'OUT OF SYNC' "$log"; then
    row "$name" ok $(($(now) - t)) "${last:0:150}"
  elif timed_out $rc && ! grep -q '^error' "$log"; then
    row "$name" INCOMPLETE $(($(now) - t)) "out of its ${lim}s before the end${last:+; last: $last}"
  else
    row "$name" FAIL $(($(now) - t)) "exit $rc: $(grep -m1 -E '^error|OUT OF SYNC' "$log" | cut -c1-140) (see $logname.log)"
    fail
  fi
  echo "---- mirrorlab-cli train projects/$project $*"
  tr '\r' '\n' <"$log" | grep -vE '^[0-9]+/[0-9]+ ' | tail -8
}
