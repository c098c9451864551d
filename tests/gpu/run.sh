#!/usr/bin/env bash
# Builds what the GPU backend needs (core, the CUDA plugin, the GPU tests, the CLI, bench/gpu's
# gpu_bench) and runs it on this machine: every plugin kernel against the CPU layers, mirrored
# training on GPUs against the CPU path, the host-side tests, the plugin's NEEDED check,
# `mirrorlab-cli devices`, a recorded CLI run on logical GPUs, 200 steps of Fashion-MNIST on gpu:0x4
# (and 100 of the CNN with BatchNorm, and of the MLP in each mixed precision);
# then the GPU figures (the 784-512-512-10 MLP's step on gpu:0 at batch 256 and 4096 against its own
# GEMMs in cuBLAS and against PyTorch on the same GPU, samples/s and sync share on gpu:0, gpu:0x2 and
# gpu:0x4, copy and all-reduce bandwidths), and compute-sanitizer's memcheck, racecheck and synccheck
# on the kernel tests and on a short gpu:0x4 training; then prints a summary. Meant for a GPU
# machine, where a skipped kernel test is a failure; MIRRORLAB_ALLOW_NO_GPU=1 accepts skips (a
# CPU-only machine, CI). Benchmark goals that are missed are reported, not failed.
# Budget: under 8 minutes on a 16-core machine (GPU_CHECK_SECONDS, default 450, for everything after
# the unpacking or the build: a step that would start with less than 20 s left is skipped, saying so).
# Usage: tests/gpu/run.sh [build-dir]          (default: build-gpu at the repository root)
# With no build-dir and a carried build (tests/gpu/pack.sh: build-gpu-carry/carry.tar.xz, or
# MIRRORLAB_GPU_CARRY=folder), nothing is configured or built: the archive is unpacked into build-gpu
# and run as it is, with cuBLAS and the CUDA runtime found on the system or in PyTorch's nvidia-*
# wheels. NCCL, which the plugin and gpu_bench load themselves for runs over several GPUs, and cuDNN,
# which the plugin loads for the first convolution, are looked for the same way: where one is only in
# a wheel, MIRRORLAB_NCCL_LIBRARY or MIRRORLAB_CUDNN_LIBRARY names that file. The carried
# Fashion-MNIST subset feeds the Fashion-MNIST step. Each step has its own time limit (STEP_SECONDS,
# default 150, for the tests; BENCH_SECONDS, default 90, for each benchmark; SANITIZER_SECONDS,
# default 75, for each compute-sanitizer run). With $OUT set (the device tool), gpu-summary.txt,
# gpu-figures.txt (every figure as "name value unit") and gpu-logs.tar.gz (the logs) are written there.
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

# The Python that has PyTorch (for its nvidia-* wheels' cuBLAS, runtime and NCCL, and the PyTorch reference), if any.
py=""
for c in python3 /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3; do
  if command -v "$c" >/dev/null 2>&1 && "$c" -c 'import torch' >/dev/null 2>&1; then py=$c; break; fi
done

carry=${MIRRORLAB_GPU_CARRY:-$root/build-gpu-carry}
carried=0
if [ $# -eq 0 ] && [ -f "$carry/carry.tar.xz" ]; then carried=1; fi
mkdir -p "$build"
rm -rf "$logs"
mkdir -p "$logs"
step_seconds=${STEP_SECONDS:-150}
bench_seconds=${BENCH_SECONDS:-90}
sanitizer_seconds=${SANITIZER_SECONDS:-75}
budget_seconds=${GPU_CHECK_SECONDS:-450}
figures=$logs/figures.txt
: >"$figures"

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
      dir=$("${py:-python3}" -c "import importlib, os; m = importlib.import_module('nvidia.$mod'); print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null || true)
      if [ -n "$dir" ] && [ -d "$dir" ]; then
        export LD_LIBRARY_PATH=$LD_LIBRARY_PATH:$dir
        where="PyTorch's wheel, $dir"
      fi
    fi
    row "${lib%.so} found" "$([ -n "$where" ] && echo ok || echo none)" 0 "${where:-not on the system nor in a nvidia-$mod wheel}"
  done
  # The test binaries name the plugin of the machine that built them (MIRRORLAB_TEST_CUDA_PLUGIN):
  # point them at the carried one (unless MIRRORLAB_CUDA_PLUGIN names another).
  if [ -f "$build/app/libmirrorlab_cuda.so" ]; then export MIRRORLAB_CUDA_PLUGIN=${MIRRORLAB_CUDA_PLUGIN:-$build/app/libmirrorlab_cuda.so}; fi
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
    dir=$("${py:-python3}" -c "import importlib, os; m = importlib.import_module('nvidia.nccl'); print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null || true)
    if [ -n "$dir" ] && [ -f "$dir/libnccl.so.2" ]; then
      export MIRRORLAB_NCCL_LIBRARY=$dir/libnccl.so.2
      nccl_where="PyTorch's wheel: MIRRORLAB_NCCL_LIBRARY=$MIRRORLAB_NCCL_LIBRARY"
    fi
  fi
fi
row "libnccl.so.2 found" "$([ -n "$nccl_where" ] && echo ok || echo none)" 0 \
  "${nccl_where:-not on the system nor in a nvidia-nccl wheel: only runs over several GPUs need it}"

# cuDNN 9 (libcudnn.so.9), dlopened by the plugin for Conv2D: the same search, PyTorch's nvidia-cudnn
# wheel named by MIRRORLAB_CUDNN_LIBRARY (the plugin also looks in the usual site-packages itself).
if [ -n "${MIRRORLAB_CUDNN_LIBRARY:-}" ]; then
  cudnn_where="MIRRORLAB_CUDNN_LIBRARY=$MIRRORLAB_CUDNN_LIBRARY"
  [ -f "$MIRRORLAB_CUDNN_LIBRARY" ] || cudnn_where="$cudnn_where, which does not exist"
else
  cudnn_where=$(ldconfig -p 2>/dev/null | grep -m1 -oP 'libcudnn\.so\.9 [^=]*=> \K.*' || true)
  for dir in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    if [ -z "$cudnn_where" ] && [ -f "$dir/libcudnn.so.9" ]; then cudnn_where="the toolkit's, $dir/libcudnn.so.9"; fi
  done
  if [ -z "$cudnn_where" ]; then
    dir=$("${py:-python3}" -c "import importlib, os; m = importlib.import_module('nvidia.cudnn'); print(os.path.join(list(m.__path__)[0], 'lib'))" 2>/dev/null || true)
    if [ -n "$dir" ] && [ -f "$dir/libcudnn.so.9" ]; then
      export MIRRORLAB_CUDNN_LIBRARY=$dir/libcudnn.so.9
      cudnn_where="PyTorch's wheel: MIRRORLAB_CUDNN_LIBRARY=$MIRRORLAB_CUDNN_LIBRARY"
    fi
  fi
fi
row "libcudnn.so.9 found" "$([ -n "$cudnn_where" ] && echo ok || echo none)" 0 \
  "${cudnn_where:-not on the system nor in a nvidia-cudnn wheel: the Conv2D tests will fail}"

if [ $carried = 0 ]; then
  echo "== configure ($build)"
  t=$(now)
  # A new tree is configured for the GPU check alone; an existing one (the developer's build/) keeps
  # its own options (the targets below are built either way), so that this does not narrow it.
  opts=(-DMIRRORLAB_BUILD_CUDA=ON)
  if [ ! -f "$build/CMakeCache.txt" ]; then
    opts+=(-DCMAKE_BUILD_TYPE=Release -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF -DMIRRORLAB_TEST_DIRS=gpu)
    if command -v ninja >/dev/null 2>&1; then opts+=(-G Ninja); fi
  fi
  if cmake -S "$root" -B "$build" "${opts[@]}" >"$logs/configure.log" 2>&1; then
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
if grep -q "GPU bench: gpu_bench" "$logs/configure.log" 2>/dev/null; then targets+=(gpu_bench); fi

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

# Seconds a step may run: its own limit, or what is left of the budget; 0 (do not start it) when
# under 20 s are left.
limit() {
  local left=$(( deadline - $(now) ))
  if [ "$left" -lt 20 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
late=0
no_time() { row "$1" skip 0 "not started: under 20 s left of the ${budget_seconds}s budget (GPU_CHECK_SECONDS)"; late=$((late + 1)); }
timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }
# A file the carried build brings (tests/gpu/pack.sh packs the scripts and projects beside the
# binaries), else the source tree's.
src() { if [ $carried = 1 ] && [ -f "$build/$1" ]; then echo "$build/$1"; else echo "$root/$1"; fi; }
# The value of one figure ("name value unit" in $figures), empty when it was not measured.
fig() { awk -v k="$1" '$1 == k { v = $2 } END { if (v != "") print v }' "$figures"; }
# a / b with 2 decimals, empty unless both are numbers and b > 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b + 0 > 0) printf "%.2f", a / b }'; }
rx() { local r; r=$(ratio "$1" "$2"); echo "${r:--}"; }  # the same, or "-"

# Runs one gtest binary and adds a summary row from its own summary lines.
run_gtest() {
  local name=$1 bin=$2 log=$logs/$1.log
  shift 2
  local t lim
  t=$(now)
  if [ ! -x "$bin" ]; then
    row "$name" FAIL 0 "not built"
    fail
    return
  fi
  lim=$(limit "$step_seconds")
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  timeout -k 10 "$lim" env "$@" "$bin" --gtest_color=no >"$log" 2>&1
  local rc=$?
  local passed failed skipped
  passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  skipped=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  local detail="passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}"
  if timed_out $rc; then detail="$detail; timed out after ${lim}s"; fi
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

# `mirrorlab-cli scale` over a device sweep: each row's step time (median after warm-up), samples/s
# and sync share (all-reduce plus waiting for the slowest replica) become figures
# mirrorlab_{step,samples_per_s,sync_share}_<devices>_b<global batch>, e.g. mirrorlab_step_gpu0_b4096.
cli_scale() { # row-name log-name devices batch steps [precision]
  local name=$1 log=$logs/$2.log devices=$3 batch=$4 steps=$5 precision=${6:-} t lim rc
  t=$(now)
  if [ $gpu_listed = 0 ]; then row "$name" skip 0 "no GPU"; return; fi
  lim=$(limit "$bench_seconds")
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  # A precision other than float32: the same project with training.precision set (figures get "_<precision>").
  local project suffix=""
  project=$(src bench/gpu/mlp-blobs.json)
  if [ -n "$precision" ]; then
    suffix="_$precision"
    sed "s/\"training\": {/\"training\": {\"precision\": \"$precision\", /" "$project" >"$logs/mlp-blobs-$precision.json"
    project=$logs/mlp-blobs-$precision.json
  fi
  timeout -k 10 "$lim" "$build/app/mirrorlab-cli" scale "$project" --devices "$devices" \
    --batch-size "$batch" --steps "$steps" --no-record >"$log" 2>&1
  rc=$?
  local found
  found=$(awk -v x="$suffix" '$1 ~ /^gpu:/ && NF >= 8 { d = $1; gsub(/[:;]/, "", d); s = $8; sub(/%$/, "", s);
    printf "mirrorlab_step_%s_b%s%s %s ms\nmirrorlab_samples_per_s_%s_b%s%s %s samples/s\nmirrorlab_sync_share_%s_b%s%s %s %%\n",
      d, $2, x, $4, d, $2, x, $5, d, $2, x, s }' "$log")
  [ -n "$found" ] && echo "$found" >>"$figures"
  if [ $rc = 0 ] && [ -n "$found" ]; then
    row "$name" ok $(( $(now) - t )) "$(awk '$1 ~ /^gpu:/ && NF >= 8 { printf "%s%s: %s ms, %s samples/s, sync %s", n++ ? "; " : "", $1, $4, $5, $8 }' "$log")"
  else
    row "$name" FAIL $(( $(now) - t )) "exit $rc$(timed_out $rc && echo ", timed out after ${lim}s"): $(grep -m1 '^error' "$log" | cut -c1-120) (see $log)"
    fail
  fi
}

# compute-sanitizer TOOL on one program: PASS with 0 errors, FAIL with the count and the first report.
sanitize() { # tool what log-name command...
  local tool=$1 what=$2 log=$logs/sanitizer-$1-$3.log t lim rc
  shift 3
  local name="$tool: $what"
  t=$(now)
  if [ -z "$sanitizer" ]; then row "$name" SKIP 0 "compute-sanitizer not found (\$CUDA_HOME/bin, PATH, beside nvcc, /usr/local/cuda*/bin)"; return; fi
  if [ $gpu_listed = 0 ]; then row "$name" SKIP 0 "no GPU"; return; fi
  lim=$(limit "$sanitizer_seconds")
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  timeout -k 10 "$lim" "$sanitizer" --tool "$tool" --print-limit 10 "$@" >"$log" 2>&1
  rc=$?
  # memcheck, synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
  local errors warnings api first
  errors=$(grep -oP 'ERROR SUMMARY: \K[0-9]+' "$log" | tail -1)
  [ -z "$errors" ] && errors=$(grep -oP 'RACECHECK SUMMARY: .*\(\K[0-9]+(?= errors?)' "$log" | tail -1)
  warnings=$(grep -oP 'RACECHECK SUMMARY: .*, \K[0-9]+(?= warnings?)' "$log" | tail -1)
  api=$(grep -c '^========= Program hit' "$log")
  first=$(grep -m1 -E '^========= +(Invalid|Program hit|Race|Barrier|Error|Warning|.*[Hh]azard|Uninitialized|Misaligned|Out of bounds)' "$log" |
    sed -E 's/^=+ +//' | cut -c1-110)
  local extra=""
  [ -n "$warnings" ] && [ "$warnings" != 0 ] && extra=", $warnings warnings"
  if timed_out $rc; then
    row "$name" FAIL $(( $(now) - t )) "timed out after ${lim}s (${errors:-no} errors reported by then; SANITIZER_SECONDS)"
    fail
  elif [ -z "$errors" ]; then
    row "$name" FAIL $(( $(now) - t )) "no error summary, exit $rc: $(tail -1 "$log" | cut -c1-100)"
    fail
  elif [ "$errors" != 0 ]; then
    row "$name" FAIL $(( $(now) - t )) "$errors errors ($api CUDA API errors)$extra; first: $first"
    fail
  elif [ $rc != 0 ]; then
    row "$name" FAIL $(( $(now) - t )) "0 errors$extra, but the program exited $rc (see $log)"
    fail
  else
    row "$name" PASS $(( $(now) - t )) "0 errors$extra"
  fi
}

gpu_listed=0
require=1
[ "${MIRRORLAB_ALLOW_NO_GPU:-0}" = 1 ] && require=0
deadline=$(( $(now) + budget_seconds ))
if [ $status = 0 ]; then
  echo "== run"
  run_gtest "GPU kernels vs CPU" "$build/tests/gpu/test_gpu_kernels" MIRRORLAB_REQUIRE_GPU=$require
  run_gtest "GPU training vs CPU" "$build/tests/gpu/test_gpu_training" MIRRORLAB_REQUIRE_GPU=$require
  run_gtest "host side (loader, probe, RNG)" "$build/tests/gpu/test_gpu_host"

  # libcuda would keep the plugin from loading without a driver, libnccl without NCCL, libcudnn
  # without cuDNN (both are dlopened on first use).
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
  if grep -q '^gpu:0 ' "$logs/devices.log"; then gpu_listed=1; fi
  echo "---- mirrorlab-cli devices"
  cat "$logs/devices.log"
  if command -v nvidia-smi >/dev/null 2>&1; then
    echo "---- nvidia-smi -L"
    nvidia-smi -L 2>&1 | head -16
  fi

  # mirrorlab-cli trains on 2 logical GPUs, records the run, and evaluates the saved weights on gpu:0.
  t=$(now)
  lim=$(limit "$step_seconds")
  if [ "$lim" = 0 ]; then
    no_time "CLI run on gpu:0x2, recorded"
  else
    timeout -k 10 "$lim" bash "$root/tests/gpu/cli_gpu_test.sh" "$build/app/mirrorlab-cli" >"$logs/cli_gpu.log" 2>&1
    rc=$?
    if [ $rc = 0 ]; then
      row "CLI run on gpu:0x2, recorded" ok $(( $(now) - t )) "$(tail -1 "$logs/cli_gpu.log")"
    elif [ $rc = 77 ] && [ $require = 0 ]; then
      row "CLI run on gpu:0x2, recorded" skip $(( $(now) - t )) "$(head -1 "$logs/cli_gpu.log")"
    else
      grep -E '^FAIL' "$logs/cli_gpu.log" | head -10
      row "CLI run on gpu:0x2, recorded" FAIL $(( $(now) - t )) "exit $rc$(timed_out $rc && echo ", timed out after ${lim}s"), see $logs/cli_gpu.log"
      fail
    fi
  fi

  # Real models on real data, on the subset the carried build brings (10,000 training and 2,000
  # test images; no download) or the installed set: 200 steps of the Fashion-MNIST MLP on 4 logical
  # GPUs; 100 of the CNN with synchronized BatchNorm on 2 (cuDNN, the plugin's pooling and
  # BatchNorm); 100 of the MLP in mixed_bfloat16 and in mixed_float16 (cublasGemmEx, loss scaling).
  fashion=""
  for d in "$build/data/fashion-mnist" /usr/share/datasets/fashion-mnist; do
    if [ -f "$d/train-images-idx3-ubyte" ] || [ -f "$d/train-images-idx3-ubyte.gz" ]; then fashion=$d; break; fi
  done
  # fashion_run NAME LOG PROJECT ARGS...: trains, recorded, and wants the replicas in sync.
  fashion_run() {
    local name=$1 log=$logs/$2.log project=$3
    shift 3
    local t lim rc epoch
    t=$(now)
    lim=$(limit "$step_seconds")
    if [ -z "$fashion" ]; then
      row "$name" skip 0 "no data set: neither a carried subset (tests/gpu/pack.sh) nor /usr/share/datasets/fashion-mnist (dataset-fashion-mnist)"
      return
    elif [ $gpu_listed = 0 ]; then
      row "$name" skip 0 "no GPU (data found: $fashion)"
      return
    elif [ "$lim" = 0 ]; then
      no_time "$name"
      return
    fi
    MIRRORLAB_DB="$logs/fashion-runs.sqlite" timeout -k 10 "$lim" "$build/app/mirrorlab-cli" train "$root/projects/$project" \
      --data-path "$fashion" "$@" >"$log" 2>&1
    rc=$?
    epoch=$(grep -E '^  epoch [0-9]+:' "$log" | tail -1 | sed 's/^  //')
    if [ $rc = 0 ] && grep -q 'replicas in sync' "$log" && grep -q 'recorded as run' "$log"; then
      row "$name" ok $(( $(now) - t )) "${epoch:0:150}"
    else
      row "$name" FAIL $(( $(now) - t )) "exit $rc$(timed_out $rc && echo ", timed out after ${lim}s"), see $log"
      fail
    fi
    echo "---- mirrorlab-cli train projects/$project --data-path $fashion $*"
    grep -vE '^[0-9]+/[0-9]+ \[' "$log" | tail -12
    grep -E '^[0-9]+/[0-9]+ \[' "$log" | tail -1 | tr '\r' '\n' | tail -1
  }
  fashion_run "fashion-mlp gpu:0x4, 200 steps" fashion fashion-mlp.json --devices gpu:0x4 --steps 200
  fashion_run "fashion-cnn-bn gpu:0x2, 100 steps" fashion-cnn fashion-cnn-bn.json --devices gpu:0x2 --steps 100
  fashion_run "fashion-mlp mixed_bfloat16 gpu:0, 100 steps" fashion-bf16 fashion-mlp.json --devices gpu:0 --steps 100 \
    --precision mixed_bfloat16
  fashion_run "fashion-mlp mixed_float16 gpu:0, 100 steps" fashion-fp16 fashion-mlp.json --devices gpu:0 --steps 100 \
    --precision mixed_float16

  echo "== GPU figures"
  # bench/gpu/gpu_bench: the MLP's own GEMMs in cuBLAS, copy bandwidths, the all-reduce over device memory.
  t=$(now)
  name="gpu_bench: GEMMs, copies, sums"
  bench=$build/bench/gpu/gpu_bench
  lim=$(limit "$bench_seconds")
  if [ ! -x "$bench" ]; then
    if [ $have_plugin = 1 ]; then row "$name" FAIL 0 "not built"; fail; else row "$name" skip 0 "not built (no CUDA toolkit)"; fi
  elif [ "$lim" = 0 ]; then
    no_time "$name"
  else
    timeout -k 10 "$lim" "$bench" >"$logs/gpu_bench.log" 2>&1
    rc=$?
    grep -E '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/gpu_bench.log" >>"$figures"
    if [ $rc = 0 ] && grep -q '^no GPU: ' "$logs/gpu_bench.log"; then
      if [ $require = 1 ]; then
        row "$name" FAIL $(( $(now) - t )) "$(grep -m1 '^no GPU: ' "$logs/gpu_bench.log" | cut -c1-140)"
        fail
      else
        row "$name" skip $(( $(now) - t )) "$(grep -m1 '^no GPU: ' "$logs/gpu_bench.log" | cut -c1-140)"
      fi
    elif [ $rc = 0 ]; then
      row "$name" ok $(( $(now) - t )) "$(grep -cE '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/gpu_bench.log") figures$(grep '^skip ' "$logs/gpu_bench.log" | cut -d' ' -f2- | sed 's/^/; skipped /' | tr '\n' ' ' | cut -c1-100)"
    else
      row "$name" FAIL $(( $(now) - t )) "exit $rc$(timed_out $rc && echo ", timed out after ${lim}s"): $(grep -m1 'gpu_bench: ' "$logs/gpu_bench.log" | cut -c1-120)"
      fail
    fi
  fi

  # Mirrorlab's own step times: the MLP on gpu:0 at batch 256 and 4096, and samples/s with the sync
  # share on 1, 2 and 4 logical GPUs at a global batch of 1024.
  cli_scale "MLP step gpu:0, batch 256" scale-b256 "gpu:0" 256 100
  cli_scale "MLP step gpu:0, batch 4096" scale-b4096 "gpu:0" 4096 40
  cli_scale "MLP gpu:0, 0x2, 0x4, batch 1024" scale-logical "gpu:0;0x2;0x4" 1024 60
  # Mixed precision's tensor cores against float32 (the batch 4096 row above), same model and steps.
  cli_scale "MLP step gpu:0, batch 4096, mixed_bfloat16" scale-b4096-bf16 "gpu:0" 4096 40 mixed_bfloat16
  cli_scale "MLP step gpu:0, batch 4096, mixed_float16" scale-b4096-fp16 "gpu:0" 4096 40 mixed_float16

  # The same model in PyTorch on the same GPU.
  t=$(now)
  name="PyTorch MLP step, batch 256, 4096"
  lim=$(limit "$bench_seconds")
  if [ -z "$py" ]; then
    row "$name" skip 0 "no python3 that imports torch (python3, /usr/bin, /usr/local/bin, /opt/conda/bin)"
  elif [ "$lim" = 0 ]; then
    no_time "$name"
  else
    timeout -k 10 "$lim" "$py" "$(src bench/gpu/torch_mlp_gpu.py)" --batches 256 4096 >"$logs/torch.log" 2>&1
    rc=$?
    grep -E '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/torch.log" >>"$figures"
    if grep -q '^skip torch ' "$logs/torch.log"; then
      row "$name" skip $(( $(now) - t )) "$(grep -m1 '^skip torch ' "$logs/torch.log" | cut -d' ' -f2- | cut -c1-140)"
    elif [ $rc = 0 ]; then
      row "$name" ok $(( $(now) - t )) "$(grep -m1 '^# torch' "$logs/torch.log" | cut -c3-140)"
    else
      # A reference that fails is reported, not counted against Mirrorlab.
      row "$name" skip $(( $(now) - t )) "the PyTorch script failed: exit $rc$(timed_out $rc && echo ", timed out after ${lim}s"): $(tail -1 "$logs/torch.log" | cut -c1-100)"
    fi
  fi

  echo "== compute-sanitizer"
  sanitizer=""
  for c in "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" "${CUDA_PATH:-/nonexistent}/bin/compute-sanitizer" \
      "$(command -v compute-sanitizer 2>/dev/null)" "$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")/compute-sanitizer" \
      /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer /opt/cuda/bin/compute-sanitizer; do
    if [ -n "$c" ] && [ -x "$c" ]; then sanitizer=$c; break; fi
  done
  [ -n "$sanitizer" ] && echo "using $sanitizer ($("$sanitizer" --version 2>/dev/null | grep -m1 -i version))"
  # The kernel tests that launch the plugin's kernels (not those that provoke CUDA errors or an
  # out-of-memory on purpose, which the sanitizer would count), and a short training on 4 logical
  # GPUs: cuBLAS, activations, dropout, the fused loss, Adam, the device-memory all-reduce, validation;
  # cuDNN's convolutions, pooling, BatchNormalization and the binary loss and accuracy.
  filter=${SANITIZER_FILTER:-'Gpu.Dense*:Gpu.BiasGradient*:Gpu.Activations*:Gpu.Softmax*:Gpu.Losses*:Gpu.Metrics*:Gpu.Dropout*:Gpu.Optimizers*:Gpu.LocalAllReduce*:Gpu.CountNonfinite*:Gpu.PinnedIndices*:Gpu.AnEmptyBatch*:Gpu.Tf32*:Gpu.Conv2D*:Gpu.Pooling*:Gpu.GlobalAveragePooling*:Gpu.BatchNorm*:Gpu.BinaryCrossentropy*:Gpu.BinaryAccuracy*'}
  for tool in memcheck racecheck synccheck; do
    MIRRORLAB_REQUIRE_GPU=1 sanitize $tool "kernel tests" kernels "$build/tests/gpu/test_gpu_kernels" --gtest_color=no "--gtest_filter=$filter"
    sanitize $tool "CLI gpu:0x4, 6 steps" cli "$build/app/mirrorlab-cli" train "$(src tests/gpu/sanitize-spirals.json)" --devices gpu:0x4 --no-record
  done
fi

# The figures and their ratios, read from $figures (empty lines where nothing was measured).
report_figures() {
  local any=0 b g s r tr tp
  for b in 256 4096; do
    s=$(fig mirrorlab_step_gpu0_b$b) g=$(fig gemms_b${b}_fp32) tr=$(fig torch_step_b${b}_resident) tp=$(fig torch_step_b${b}_pageable)
    [ -z "$s$g$tr" ] && continue
    any=1
    r=$(ratio "$s" "$g")
    local goal=""
    [ $b = 4096 ] && [ -n "$r" ] && goal=$(awk -v r="$r" 'BEGIN { print (r <= 1.4 ? " (goal <= 1.4x: met)" : " (goal <= 1.4x: NOT met)") }')
    echo "  MLP 784-512-512-10, batch $b: Mirrorlab gpu:0 step ${s:--} ms; its 8 GEMMs in cuBLAS FP32 ${g:--} ms" \
      "(TF32 $(t=$(fig gemms_b${b}_tf32); echo "${t:--}") ms): step/GEMMs ${r:--}x$goal"
    if [ -n "$tr$tp" ]; then
      echo "    PyTorch: ${tr:--} ms (data on the GPU), ${tp:--} ms (batches copied from pageable host memory);" \
        "PyTorch/Mirrorlab $(rx "$tr" "$s")x and $(rx "$tp" "$s")x (above 1: Mirrorlab faster; goal: above 1)"
    fi
  done
  local f32 bf fp
  f32=$(fig mirrorlab_step_gpu0_b4096) bf=$(fig mirrorlab_step_gpu0_b4096_mixed_bfloat16) fp=$(fig mirrorlab_step_gpu0_b4096_mixed_float16)
  if [ -n "$bf$fp" ]; then
    any=1
    echo "  MLP batch 4096 on gpu:0, mixed precision: bfloat16 ${bf:--} ms, float16 ${fp:--} ms against float32 ${f32:--} ms:" \
      "float32/bfloat16 $(rx "$f32" "$bf")x, float32/float16 $(rx "$f32" "$fp")x (above 1: the tensor cores pay)"
  fi
  local d line=""
  for d in gpu0 gpu0x2 gpu0x4; do
    s=$(fig mirrorlab_samples_per_s_${d}_b1024)
    [ -n "$s" ] && line="$line ${d/gpu0/gpu:0}: $s samples/s, sync $(fig mirrorlab_sync_share_${d}_b1024)%;"
  done
  [ -n "$line" ] && { any=1; echo "  global batch 1024:${line%;}"; }
  local cp x
  cp=$(fig d2d_copy_256MiB_rw)
  if [ -n "$cp" ]; then
    any=1
    echo "  device copy 256 MiB: $cp GB/s (read + write); logical-GPU all-reduce, 64 MiB per buffer:" \
      "x2 $(fig local_allreduce_x2_64MiB_traffic) GB/s ($(rx "$(fig local_allreduce_x2_64MiB_traffic)" "$cp") of the copy)," \
      "x4 $(fig local_allreduce_x4_64MiB_traffic) GB/s ($(rx "$(fig local_allreduce_x4_64MiB_traffic)" "$cp"));" \
      "the MLP's gradient: x2 $(fig local_allreduce_x2_mlp_gradient) us, x4 $(fig local_allreduce_x4_mlp_gradient) us"
    x=$(awk '$1 ~ /^nccl_allreduce_gpus[0-9]+_64MiB_busbw$/ { print $1 " " $2 " GB/s" }' "$figures" | sed 's/^nccl_allreduce_//; s/_64MiB_busbw//')
    [ -n "$x" ] && echo "  NCCL all-reduce 64 MiB, bus bandwidth: $x"
    echo "  host to device 64 MiB: pageable $(fig h2d_pageable_64MiB) GB/s, pinned $(fig h2d_pinned_64MiB) GB/s; the batch-4096 input" \
      "(12.25 MiB): pageable $(fig h2d_pageable_batch4096_input) ms, pinned $(fig h2d_pinned_batch4096_input) ms"
  fi
  [ $any = 0 ] && echo "  (no figures: nothing was measured on a GPU)"
  return 0
}

total=$(( $(now) - start ))
summary() {
  echo "==== GPU backend summary ($(hostname), $jobs cores, ${total}s in all; logs in $logs)"
  for r in "${rows[@]}"; do echo "  $r"; done
  echo "---- GPU figures (medians; every figure in gpu-figures.txt / $figures)"
  report_figures
  if [ $total -gt 480 ]; then echo "  WARNING: took ${total}s, over the 8-minute budget"; fi
  if [ $late -gt 0 ]; then echo "  WARNING: $late step(s) not started: the ${budget_seconds}s budget was spent"; fi
  if [ $status = 0 ]; then echo "RESULT: PASS"; else echo "RESULT: FAIL"; fi
}
echo
summary
if [ -n "${OUT:-}" ] && [ -d "$OUT" ]; then  # the device tool brings back what is under $OUT: three files
  summary >"$OUT/gpu-summary.txt"
  cp "$figures" "$OUT/gpu-figures.txt"
  tar -C "$logs" -czf "$OUT/gpu-logs.tar.gz" .
fi
exit $status
