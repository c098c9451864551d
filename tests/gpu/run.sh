#!/usr/bin/env bash
# Builds what the GPU backend needs (core, the CUDA plugin, the GPU tests, the CLI) and runs it on
# this machine: every plugin kernel against the CPU layers, mirrored training on GPUs against the CPU
# path, the host-side tests, the plugin's NEEDED check, `mirrorlab-cli devices`, a recorded CLI run on
# logical GPUs, and 200 steps of Fashion-MNIST on gpu:0x4; then prints a summary. Meant for a GPU machine, where a skipped
# kernel test is a failure; MIRRORLAB_ALLOW_NO_GPU=1 accepts skips (a CPU-only machine, CI).
# Budget: under 8 minutes including the build on a 16-core machine.
# Usage: tests/gpu/run.sh [build-dir]          (default: build-gpu at the repository root)
# With no build-dir and a carried build (tests/gpu/pack.sh: build-gpu-carry/carry.tar.xz, or
# MIRRORLAB_GPU_CARRY=folder), nothing is configured or built: the archive is unpacked into build-gpu
# and run as it is, with cuBLAS and the CUDA runtime found on the system or in PyTorch's nvidia-*
# wheels (the plugin uses no cuDNN). NCCL, which the plugin loads itself for runs over several GPUs,
# is looked for the same way either way: where it is only in a wheel, MIRRORLAB_NCCL_LIBRARY names
# that file for the plugin. Each
# step has its own time limit (STEP_SECONDS, default 150). With $OUT set (the device tool), the
# summary and the logs (one archive) are written there too.
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
jobs=$(nproc)
logs=$build/gpu-run
start=$(date +%s)
declare -a rows=()
status=0

now() { date +%s; }
row() { rows+=("$(printf '%-34s %-6s %5ss  %s' "$1" "$2" "$3" "$4")"); }
fail() { status=1; }

carry=${MIRRORLAB_GPU_CARRY:-$root/build-gpu-carry}
carried=0
if [ $# -eq 0 ] && [ -f "$carry/carry.tar.xz" ]; then carried=1; fi
mkdir -p "$build"
rm -rf "$logs"
mkdir -p "$logs"
step_seconds=${STEP_SECONDS:-150}

if [ $carried = 1 ]; then
  echo "== carried build ($carry/carry.tar.xz)"
  t=$(now)
  if xz -dc "$carry/carry.tar.xz" | tar -C "$build" -xf -; then
    row "carried build" ok $(( $(now) - t )) "$(head -1 "$carry/MANIFEST.txt" 2>/dev/null | cut -c1-110)"
  else
    row "carried build" FAIL $(( $(now) - t )) "could not unpack $carry/carry.tar.xz"
    fail
  fi
  export LD_LIBRARY_PATH=$build/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  # The machine's own C++ runtime where it is new enough, else the carried one (which needs a newer glibc).
  need=$(grep -oP '^glibcxx: \K.*' "$carry/MANIFEST.txt" 2>/dev/null || true)
  own=$(ldconfig -p 2>/dev/null | grep -m1 -oP 'libstdc\+\+\.so\.6 \(libc6,x86-64\) => \K.*' || true)
  if [ -n "$need" ] && { [ -z "$own" ] || ! grep -qa "GLIBCXX_$need" "$own"; }; then
    export LD_LIBRARY_PATH=$build/lib/fallback:$LD_LIBRARY_PATH
    row "C++ runtime" ok 0 "carried (the machine's ${own:-none} lacks GLIBCXX_$need)"
  else
    row "C++ runtime" ok 0 "the machine's own, ${own:-?}"
  fi
  # cuBLAS and the runtime: the system's, else the ones PyTorch's wheels bring.
  for pair in cublas:libcublas.so cuda_runtime:libcudart.so; do
    mod=${pair%%:*} lib=${pair#*:}
    where=$(ldconfig -p 2>/dev/null | grep -m1 -oP "$lib[^ ]* => \K.*" || true)
    for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
      if [ -z "$where" ] && compgen -G "$dir/$lib.*" >/dev/null; then
        export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
        where="the toolkit's, $dir"
      fi
    done
    if [ -z "$where" ]; then
      dir=$(python3 -c "import importlib, os; m = importlib.import_module('nvidia.$mod'); print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null || true)
      if [ -n "$dir" ] && [ -d "$dir" ]; then
        export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
        where="PyTorch's wheel, $dir"
      fi
    fi
    row "${lib%.so} found" "$([ -n "$where" ] && echo ok || echo none)" 0 "${where:-not on the system nor in a nvidia-$mod wheel}"
  done
fi

# NCCL (libnccl.so.2), dlopened by the plugin for runs over several physical GPUs: found by the loader
# on the system or in the toolkit; else PyTorch's nvidia-nccl wheel, named by MIRRORLAB_NCCL_LIBRARY
# (the plugin also looks in the usual site-packages, but not in every Python's).
if [ -n "${MIRRORLAB_NCCL_LIBRARY:-}" ]; then
  nccl_where="MIRRORLAB_NCCL_LIBRARY=$MIRRORLAB_NCCL_LIBRARY"
  [ -f "$MIRRORLAB_NCCL_LIBRARY" ] || nccl_where="$nccl_where, which does not exist"
else
  nccl_where=$(ldconfig -p 2>/dev/null | grep -m1 -oP 'libnccl\.so\.2 [^=]*=> \K.*' || true)
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    if [ -z "$nccl_where" ] && [ -f "$dir/libnccl.so.2" ]; then nccl_where="the toolkit's, $dir/libnccl.so.2"; fi
  done
  if [ -z "$nccl_where" ]; then
    dir=$(python3 -c "import importlib, os; m = importlib.import_module('nvidia.nccl'); print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null || true)
    if [ -n "$dir" ] && [ -f "$dir/libnccl.so.2" ]; then
      export MIRRORLAB_NCCL_LIBRARY=$dir/libnccl.so.2
      nccl_where="PyTorch's wheel: MIRRORLAB_NCCL_LIBRARY=$MIRRORLAB_NCCL_LIBRARY"
    fi
  fi
fi
row "libnccl.so.2 found" "$([ -n "$nccl_where" ] && echo ok || echo none)" 0 \
  "${nccl_where:-not on the system nor in a nvidia-nccl wheel: only runs over several GPUs need it}"

if [ $carried = 0 ]; then
  echo "== configure ($build)"
  t=$(now)
  gen=()
  if [ ! -f "$build/CMakeCache.txt" ] && command -v ninja >/dev/null 2>&1; then gen=(-G Ninja); fi
  if cmake -S "$root" -B "$build" "${gen[@]}" -DCMAKE_BUILD_TYPE=Release -DMIRRORLAB_BUILD_UI=OFF \
      -DMIRRORLAB_BUILD_BENCH=OFF -DMIRRORLAB_BUILD_CUDA=ON -DMIRRORLAB_TEST_DIRS=gpu >"$logs/configure.log" 2>&1; then
    plugin_line=$(grep -E "CUDA plugin" "$logs/configure.log" | head -1 | sed 's/^-- //')
    row "configure" ok $(( $(now) - t )) "$plugin_line"
  else
    tail -30 "$logs/configure.log"
    row "configure" FAIL $(( $(now) - t )) "see $logs/configure.log"
    fail
  fi
fi

have_plugin=0
if grep -q "CUDA plugin: CUDA" "$logs/configure.log" 2>/dev/null; then have_plugin=1; fi
if [ $carried = 1 ] && [ -f "$build/app/libmirrorlab_cuda.so" ]; then have_plugin=1; fi
targets=(test_gpu_host test_gpu_kernels test_gpu_training mirrorlab-cli)
if [ $have_plugin = 1 ]; then targets=(mirrorlab_cuda "${targets[@]}"); fi

if [ $status = 0 ] && [ $carried = 0 ]; then
  echo "== build (${targets[*]}, -j$jobs)"
  t=$(now)
  if cmake --build "$build" --target "${targets[@]}" -j "$jobs" >"$logs/build.log" 2>&1; then
    row "build" ok $(( $(now) - t )) "${targets[*]}"
  else
    grep -E "error|Error" "$logs/build.log" | head -30
    row "build" FAIL $(( $(now) - t )) "see $logs/build.log"
    fail
  fi
fi
if [ $have_plugin = 0 ]; then
  row "CUDA plugin" FAIL 0 "not built: $(grep -E 'CUDA plugin not built' "$logs/configure.log" 2>/dev/null | head -1 | sed 's/^-- //')"
  [ "${MIRRORLAB_ALLOW_NO_GPU:-0}" = 1 ] || fail
fi

# Runs one gtest binary and adds a summary row from its own summary lines.
run_gtest() {
  local name=$1 bin=$2 log=$logs/$1.log
  shift 2
  local t
  t=$(now)
  if [ ! -x "$bin" ]; then
    row "$name" FAIL 0 "not built"
    fail
    return
  fi
  timeout -k 10 "$step_seconds" env "$@" "$bin" --gtest_color=no >"$log" 2>&1
  local rc=$?
  local passed failed skipped
  passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  skipped=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  local detail="passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}"
  if [ $rc != 0 ] || [ "${failed:-0}" != 0 ]; then
    grep -E '^\[  FAILED  \]|Failure|error' "$log" | head -40
    row "$name" FAIL $(( $(now) - t )) "$detail (exit $rc, see $log)"
    fail
  else
    row "$name" ok $(( $(now) - t )) "$detail"
  fi
  if [ "${skipped:-0}" != 0 ]; then
    echo "   $name: skipped because:"
    grep -A1 -E ': Skipped$' "$log" | grep -vE ': Skipped$|^--$' | sort -u | head -5 | sed 's/^/     /'
  fi
}

if [ $status = 0 ]; then
  echo "== run"
  require=1
  [ "${MIRRORLAB_ALLOW_NO_GPU:-0}" = 1 ] && require=0
  run_gtest "GPU kernels vs CPU" "$build/tests/gpu/test_gpu_kernels" MIRRORLAB_REQUIRE_GPU=$require
  run_gtest "GPU training vs CPU" "$build/tests/gpu/test_gpu_training" MIRRORLAB_REQUIRE_GPU=$require
  run_gtest "host side (loader, probe, RNG)" "$build/tests/gpu/test_gpu_host"

  # libcuda would keep the plugin from loading without a driver, libnccl without NCCL (it is
  # dlopened), libcudnn without cuDNN (not used).
  plugin=$build/app/libmirrorlab_cuda.so
  if [ -f "$plugin" ]; then
    linked=$(readelf -d "$plugin" | grep NEEDED | grep -oE 'lib(cuda|nccl|cudnn)\.so[^]]*' | tr '\n' ' ')
    if [ -n "$linked" ]; then
      row "plugin links no libcuda/nccl/cudnn" FAIL 0 "NEEDED names $linked"
      fail
    else
      row "plugin links no libcuda/nccl/cudnn" ok 0 "$(readelf -d "$plugin" | grep NEEDED | grep -oP '\[\K[^]]+' | tr '\n' ' ')"
    fi
  fi

  t=$(now)
  if "$build/app/mirrorlab-cli" devices >"$logs/devices.log" 2>&1; then
    gpus=$(grep -c '^gpu:' "$logs/devices.log")
    if [ "$gpus" -gt 0 ]; then
      row "mirrorlab-cli devices" ok $(( $(now) - t )) "$gpus GPU(s) listed"
    elif [ "${MIRRORLAB_ALLOW_NO_GPU:-0}" = 1 ]; then
      row "mirrorlab-cli devices" ok $(( $(now) - t )) "no GPU: $(grep '^GPUs: none' "$logs/devices.log" | cut -c1-140)"
    else
      row "mirrorlab-cli devices" FAIL $(( $(now) - t )) "no GPU listed"
      fail
    fi
  else
    row "mirrorlab-cli devices" FAIL $(( $(now) - t )) "exit non-zero, see $logs/devices.log"
    fail
  fi
  echo "---- mirrorlab-cli devices"
  cat "$logs/devices.log"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "---- nvidia-smi -L"
    nvidia-smi -L 2>&1 | head -16
  fi

  # mirrorlab-cli trains on 2 logical GPUs, records the run, and evaluates the saved weights on gpu:0.
  t=$(now)
  timeout -k 10 "$step_seconds" bash "$root/tests/gpu/cli_gpu_test.sh" "$build/app/mirrorlab-cli" >"$logs/cli_gpu.log" 2>&1
  rc=$?
  if [ $rc = 0 ]; then
    row "CLI run on gpu:0x2, recorded" ok $(( $(now) - t )) "$(tail -1 "$logs/cli_gpu.log")"
  elif [ $rc = 77 ] && [ $require = 0 ]; then
    row "CLI run on gpu:0x2, recorded" skip $(( $(now) - t )) "$(head -1 "$logs/cli_gpu.log")"
  else
    grep -E '^FAIL' "$logs/cli_gpu.log" | head -10
    row "CLI run on gpu:0x2, recorded" FAIL $(( $(now) - t )) "exit $rc, see $logs/cli_gpu.log"
    fail
  fi

  # A real model on real data: 200 steps of the Fashion-MNIST MLP on 4 logical GPUs.
  t=$(now)
  fashion=/usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz
  if [ ! -f "$fashion" ]; then
    row "fashion-mlp gpu:0x4, 200 steps" skip 0 "no data set ($fashion): apt-get install dataset-fashion-mnist"
  elif [ $require = 0 ] && ! grep -q '^gpu:0 ' "$logs/devices.log"; then
    row "fashion-mlp gpu:0x4, 200 steps" skip 0 "no GPU"
  else
    MIRRORLAB_DB="$logs/fashion-runs.sqlite" timeout 300 "$build/app/mirrorlab-cli" train "$root/projects/fashion-mlp.json" \
      --devices gpu:0x4 --steps 200 >"$logs/fashion.log" 2>&1
    rc=$?
    epoch=$(grep -E '^  epoch 1:' "$logs/fashion.log" | tail -1 | sed 's/^  //')
    if [ $rc = 0 ] && grep -q 'replicas in sync' "$logs/fashion.log" && grep -q 'recorded as run' "$logs/fashion.log"; then
      row "fashion-mlp gpu:0x4, 200 steps" ok $(( $(now) - t )) "${epoch:0:150}"
    else
      row "fashion-mlp gpu:0x4, 200 steps" FAIL $(( $(now) - t )) "exit $rc, see $logs/fashion.log"
      fail
    fi
    echo "---- mirrorlab-cli train projects/fashion-mlp.json --devices gpu:0x4 --steps 200"
    grep -vE '^[0-9]+/[0-9]+ \[' "$logs/fashion.log" | tail -12
    grep -E '^[0-9]+/[0-9]+ \[' "$logs/fashion.log" | tail -1 | tr '\r' '\n' | tail -1
  fi
fi

total=$(( $(now) - start ))
summary() {
  echo "==== GPU backend summary ($(hostname), $jobs cores, ${total}s in all; logs in $logs)"
  for r in "${rows[@]}"; do echo "  $r"; done
  if [ $total -gt 480 ]; then echo "  WARNING: took ${total}s, over the 8-minute budget"; fi
  if [ $status = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
}
echo
summary
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then  # the device tool brings back what is under $OUT: two files
  summary >"$OUT/gpu-summary.txt"
  tar -C "$logs" -czf "$OUT/gpu-logs.tar.gz" .
fi
exit $status
