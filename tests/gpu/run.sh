#!/usr/bin/env bash
# The GPU check: runs the CUDA backend on a GPU machine and writes what ran, after every step, to
# $OUT (the device tool brings back gpu-summary.txt, gpu-figures.txt and gpu-logs.tar.gz; without
# $OUT they stay in <build>/gpu-run). One device call per pass (docs/GPUS.md gives both calls):
#   GPU_CHECK=correctness (default; budget 210 s): every plugin kernel against the CPU layers and
#     mirrored training on GPUs against the CPU path (the two test binaries side by side), the
#     host-side tests, the CLI on gpu:0x2 (recorded, evaluated on gpu:0), Fashion-MNIST on gpu:0x4,
#     a CNN with synchronized BatchNorm on gpu:0x2, mixed precision on gpu:0;
#   GPU_CHECK=figures (budget 240 s): bench/gpu/gpu_bench, `mirrorlab-cli scale` on gpu:0, 0x2, 0x4,
#     PyTorch's step on the same GPU, and compute-sanitizer's memcheck, racecheck and synccheck on
#     the plugin's own kernels (by name) in the kernel tests and in a short gpu:0x4 training;
#   GPU_CHECK=all: both, on a GPU machine of one's own.
# The first row is nvidia-smi's: with no GPU, or a driver older than CUDA 13 needs, the summary
# says why in one line and the GPU steps are SKIPPED (exit 3; 0 with MIRRORLAB_ALLOW_NO_GPU=1).
# Then where the CUDA libraries come from (run-libs.sh). Exit 0 when nothing failed, else 1.
# Each step has its own limit (STEP_SECONDS 120 for the test binaries, BENCH_SECONDS 60,
# SANITIZER_SECONDS 45) inside the pass's budget (GPU_CHECK_SECONDS, counted after the unpacking):
# a step that would start with under 15 s left is NOT RUN, a test binary or sanitizer run that runs
# out of time with no error so far is INCOMPLETE; neither fails the check.
# Usage: tests/gpu/run.sh [build-dir]          (default: build-gpu at the repository root)
# With no build-dir and a carried build (tests/gpu/pack.sh: build-gpu-carry/carry.tar.xz, or
# MIRRORLAB_GPU_CARRY=folder), nothing is built: the archive is unpacked into build-gpu and run.
# Otherwise the GPU targets are configured and built here (a machine with the CUDA toolkit).
set -uo pipefail

root=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:-$root/build-gpu}
pass=${GPU_CHECK:-correctness}
case $pass in correctness | figures | all) ;; *)
  echo "run.sh: GPU_CHECK=$pass: use correctness, figures or all" >&2
  exit 2
  ;;
esac
jobs=$(nproc)
logs=$build/gpu-run
start=$(date +%s)
step_seconds=${STEP_SECONDS:-120}
bench_seconds=${BENCH_SECONDS:-60}
sanitizer_seconds=${SANITIZER_SECONDS:-45}
case $pass in correctness) default_budget=210 ;; figures) default_budget=240 ;; all) default_budget=450 ;; esac
budget=${GPU_CHECK_SECONDS:-$default_budget}
deadline=$((start + budget))

mkdir -p "$build"
rm -rf "$logs"
mkdir -p "$logs"
figures=$logs/figures.txt
: >"$figures"
. "$root/tests/gpu/run-common.sh"
. "$root/tests/gpu/run-libs.sh"
. "$root/tests/gpu/run-correctness.sh"
. "$root/tests/gpu/run-figures.sh"

check_gpu

carry=${MIRRORLAB_GPU_CARRY:-$root/build-gpu-carry}
carried=0
if [ $# -eq 0 ] && [ -f "$carry/carry.tar.xz" ]; then carried=1; fi
if [ $carried = 1 ]; then
  echo "== carried build ($carry/carry.tar.xz)"
  t=$(now)
  running="unpacking the carried build"
  if run_step 300 "$logs/unpack.log" sh -c 'xz -dc "$1" | tar -C "$2" -xf -' sh "$carry/carry.tar.xz" "$build"; then
    row "carried build" ok $(($(now) - t)) "$(head -1 "$carry/MANIFEST.txt" 2>/dev/null | cut -c1-110)"
  else
    row "carried build" FAIL $(($(now) - t)) "could not unpack $carry/carry.tar.xz"
    fail
  fi
  prepend_ld "$build/lib"
  # The machine's own C++ runtime where it is new enough, else the carried one (which needs a newer glibc).
  need=$(grep -oP '^glibcxx: \K.*' "$carry/MANIFEST.txt" 2>/dev/null || true)
  own=$(ldcache | grep -m1 -oP 'libstdc\+\+\.so\.6 \([^)]*x86-64[^)]*\) => \K\S+' || true)
  if [ -n "$need" ] && { [ -z "$own" ] || ! grep -qa "GLIBCXX_$need" "$own"; }; then
    prepend_ld "$build/lib/fallback"
    row "C++ runtime" ok 0 "carried (the machine's ${own:-none} lacks GLIBCXX_$need)"
  else
    row "C++ runtime" ok 0 "the machine's own, ${own:-?}"
  fi
  # The test binaries name the plugin of the machine that built them: point them at the carried one.
  [ -f "$build/app/libmirrorlab_cuda.so" ] && export MIRRORLAB_CUDA_PLUGIN=${MIRRORLAB_CUDA_PLUGIN:-$build/app/libmirrorlab_cuda.so}
else
  echo "== configure and build ($build)"
  t=$(now)
  running="configure and build"
  # A new tree is configured for the GPU check alone; an existing one keeps its own options.
  opts=(-DMIRRORLAB_BUILD_CUDA=ON)
  if [ ! -f "$build/CMakeCache.txt" ]; then
    opts+=(-DCMAKE_BUILD_TYPE=Release -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF -DMIRRORLAB_TEST_DIRS=gpu)
    command -v ninja >/dev/null 2>&1 && opts+=(-G Ninja)
  fi
  targets=(mirrorlab_cuda test_gpu_host test_gpu_kernels test_gpu_training mirrorlab-cli gpu_bench)
  if ! cmake -S "$root" -B "$build" "${opts[@]}" >"$logs/configure.log" 2>&1; then
    tail -30 "$logs/configure.log"
    row "configure" FAIL $(($(now) - t)) "see configure.log"
    fail
  elif ! grep -q "CUDA plugin: CUDA" "$logs/configure.log"; then
    row "configure" FAIL $(($(now) - t)) "$(grep -m1 'CUDA plugin not built' "$logs/configure.log" | sed 's/^-- //')"
    fail
  elif cmake --build "$build" --target "${targets[@]}" -j "$jobs" >"$logs/build.log" 2>&1; then
    row "configure and build" ok $(($(now) - t)) "$(grep -m1 'CUDA plugin: CUDA' "$logs/configure.log" | cut -c4-110)"
  else
    grep -E "error|Error" "$logs/build.log" | head -30
    row "configure and build" FAIL $(($(now) - t)) "see build.log"
    fail
  fi
fi
# The budget counts from here: unpacking or building is not the GPU's time.
deadline=$(($(now) + budget))

running="finding the CUDA libraries"
plugin=$build/app/libmirrorlab_cuda.so
find_cuda_libraries
# libcuda would keep the plugin from loading without a driver; NCCL and cuDNN are dlopened on use.
if [ -f "$plugin" ]; then
  linked=$(readelf -d "$plugin" | grep NEEDED | grep -oE 'lib(cuda|nccl|cudnn)\.so[^]]*' | tr '\n' ' ')
  if [ -n "$linked" ]; then
    row "plugin links no libcuda/nccl/cudnn" FAIL 0 "NEEDED names $linked"
    fail
  else
    row "plugin links no libcuda/nccl/cudnn" ok 0 "$(readelf -d "$plugin" | grep NEEDED | grep -oP '\[\K[^]]+' | tr '\n' ' ')"
  fi
else
  row "CUDA plugin" FAIL 0 "$plugin is missing"
  fail
fi

# The plugin's own view: loaded, and the GPUs it sees (or why none). Where nvidia-smi was not there
# to say, this decides whether the GPU steps run.
t=$(now)
running="mirrorlab-cli devices"
run_step 60 "$logs/devices.log" "$build/app/mirrorlab-cli" devices
rc=$?
gpus=$(grep -c '^gpu:' "$logs/devices.log")
none_line=$(grep -m1 '^GPUs: none' "$logs/devices.log" | sed -E 's/^GPUs: none[.:]? *//' | cut -c1-200)
if [ "$gpu_state" = unknown ]; then
  if [ "$gpus" -gt 0 ]; then gpu_state=yes gpu_line="$(grep -m1 '^gpu:0 ' "$logs/devices.log" | cut -c1-120) (the plugin's probe)"; else
    gpu_state=no gpu_why="${none_line:-mirrorlab-cli devices lists no GPU (exit $rc)}"
  fi
fi
if [ $rc != 0 ]; then
  row "mirrorlab-cli devices" FAIL $(($(now) - t)) "exit $rc: $(tail -1 "$logs/devices.log" | cut -c1-140)"
  fail
elif [ "$gpus" -gt 0 ]; then
  row "mirrorlab-cli devices" ok $(($(now) - t)) "$gpus GPU(s): $(grep -m1 '^gpu:0 ' "$logs/devices.log" | cut -c1-120)"
elif [ "$gpu_state" = yes ]; then
  row "mirrorlab-cli devices" FAIL $(($(now) - t)) "nvidia-smi lists a GPU, the plugin none: ${none_line:-?}"
  fail
else
  row "mirrorlab-cli devices" ok $(($(now) - t)) "no GPU: ${none_line:-?}"
fi
cat "$logs/devices.log"
require=1
[ "$gpu_state" = yes ] || require=0

case $pass in
  correctness) correctness_pass ;;
  figures) figures_pass ;;
  all)
    correctness_pass
    figures_pass
    ;;
esac

finish
if [ $status != 0 ]; then exit 1; fi
if [ "$gpu_state" = no ] && [ "${MIRRORLAB_ALLOW_NO_GPU:-0}" != 1 ]; then exit 3; fi
exit 0
