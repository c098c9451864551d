#!/usr/bin/env bash
# The first GPU call, rehearsed on this machine with no GPU (ctest runs it as gpu.rehearsal). It packs
# the normal build's GPU binaries as pack.sh packs them for the GPU machine (--from-build: no nvcc),
# copies the working tree and the carry into a clean folder as the device tool sends them, hides
# this machine's CUDA libraries from run.sh (no toolkit folders, an ldconfig cache without them, no
# LD_LIBRARY_PATH) and lays out what the GPU machine has instead: a Python environment at
# <tmp>/opt/torch/.venv whose site-packages hold nvidia/cu13/lib (cuBLAS), nvidia/cudnn/lib and
# nvidia/nccl/lib, as symbolic links to this machine's libraries. Then:
#  1. the correctness pass, as docs/GPUS.md's first call runs it, but with MIRRORLAB_ALLOW_NO_GPU=1:
#     it must take the CUDA runtime from the carry and cuBLAS, cuDNN and NCCL from those wheels, and
#     the plugin must resolve them there with the loader's cache ignored (ld.so --inhibit-cache); with
#     no GPU it must say so in one line, skip the GPU steps, pass the host tests on the carried plugin
#     and exit 0; $OUT must hold gpu-summary.txt, gpu-figures.txt and gpu-logs.tar.gz;
#  2. the figures pass with an nvidia-smi that reports a driver older than R580 and an ldconfig cache
#     that lists cuBLAS (in its real format, " (libc6,x86-64) => "): the first row names the driver,
#     every GPU step is SKIPPED, cuBLAS comes from the cache, exit 3.
# Usage: tests/gpu/rehearse.sh BUILD     (exit 77, a skip, where this machine lacks a library or the
# data set to stand in; the build must hold the CLI, the plugin, the GPU tests and gpu_bench)
# shellcheck disable=SC2015
set -uo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
build=$(cd "${1:?usage: rehearse.sh BUILD}" && pwd)
started=$(date +%s)
T=$(mktemp -d "${TMPDIR:-/tmp}/mirrorlab-rehearsal.XXXXXX")
trap 'rm -rf "$T"' EXIT
fails=0
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
ok() { echo "ok: $*"; }
skip() { echo "SKIPPED: $*"; exit 77; }

# This machine's libraries, to stand in for the GPU machine's wheels.
real() { # soname: the file, from the toolkit or the ldconfig cache
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib; do
    [ -e "$d/$1" ] && { echo "$d/$1"; return; }
  done
  ldconfig -p 2>/dev/null | grep -m1 -oP "^\s*\Q$1\E \([^)]*x86-64[^)]*\) => \K\S+"
}
for so in libcublas.so.13 libcublasLt.so.13 libcudnn.so.9 libnccl.so.2; do
  [ -n "$(real $so)" ] || skip "this machine has no $so to stand in for the GPU machine's"
done
[ -f /usr/share/datasets/fashion-mnist/train-images-idx3-ubyte.gz ] || skip "no Fashion-MNIST (dataset-fashion-mnist) for pack.sh"
for f in app/mirrorlab-cli app/libmirrorlab_cuda.so tests/gpu/test_gpu_host tests/gpu/test_gpu_kernels tests/gpu/test_gpu_training bench/gpu/gpu_bench; do
  [ -f "$build/$f" ] || skip "$build/$f is not built (the CUDA toolkit is needed)"
done

echo "== pack (from $build, xz level 0)"
repo=$T/repo
mkdir -p "$repo"
if ! MIRRORLAB_PACK_XZ_LEVEL=0 "$root/tests/gpu/pack.sh" --from-build "$build" "$repo/build-gpu-carry" >"$T/pack.log" 2>&1; then
  cat "$T/pack.log"
  echo "FAIL: pack.sh --from-build"
  exit 1
fi
grep -E '^(packed|carried by)' "$T/pack.log"
grep -q 'of 64 MiB$' "$T/pack.log" && ok "pack.sh printed the carry against the 64 MiB" || bad "pack.sh printed no size against 64 MiB"
grep -q '^carries: the CUDA runtime (lib/libcudart.so.13' "$repo/build-gpu-carry/MANIFEST.txt" && ok "the MANIFEST says the runtime is carried" ||
  bad "the MANIFEST does not say that the CUDA runtime is carried"

# The working tree as the device tool sends it (tracked files and untracked ones git does not ignore).
if git -C "$root" rev-parse --git-dir >/dev/null 2>&1; then
  git -C "$root" ls-files -z --cached --others --exclude-standard |
    (cd "$root" && xargs -0 -r sh -c 'for f; do [ -f "$f" ] && printf "%s\0" "$f"; done' sh) |
    tar -C "$root" --null -T - -cf - | tar -C "$repo" -xf -
else
  mkdir -p "$repo/tests" && cp -r "$root/tests/gpu" "$repo/tests/" && cp -r "$root/projects" "$root/bench" "$repo/"
fi

# The GPU machine's Python: a virtual environment (no pip needed) with CUDA 13's wheel layout.
venv=$T/opt/torch/.venv
/usr/bin/python3 -m venv --without-pip "$venv" 2>"$T/venv.log" || python3 -m venv --without-pip "$venv" 2>>"$T/venv.log" ||
  skip "no Python virtual environment can be made here: $(tail -1 "$T/venv.log")"
sp=$("$venv/bin/python3" -c 'import site; print(site.getsitepackages()[0])')
mkdir -p "$sp/nvidia/cu13/lib" "$sp/nvidia/cudnn/lib" "$sp/nvidia/nccl/lib"
ln -s "$(real libcublas.so.13)" "$sp/nvidia/cu13/lib/libcublas.so.13"
ln -s "$(real libcublasLt.so.13)" "$sp/nvidia/cu13/lib/libcublasLt.so.13"
for f in "$(dirname "$(readlink -f "$(real libcudnn.so.9)")")"/libcudnn*.so.9; do ln -s "$f" "$sp/nvidia/cudnn/lib/$(basename "$f")"; done
ln -s "$(real libnccl.so.2)" "$sp/nvidia/nccl/lib/libnccl.so.2"
# This machine's ldconfig cache without any CUDA library.
ldconfig -p 2>/dev/null | grep -vE '\slib(cu|nccl|nv|cudnn)[A-Za-z_]*\.so' >"$T/ldcache-no-cuda.txt"

# run.sh in a bare environment: the venv's python3 first on PATH (as on the GPU machine), nothing
# of this machine's CUDA.
rehearse() { # out-dir extra-env... -> run.sh's exit status
  local out=$1
  shift
  mkdir -p "$out" "$T/home"
  env -i PATH="$venv/bin:/usr/bin:/bin" HOME="$T/home" OUT="$out" MIRRORLAB_GPU_CUDA_DIRS=none \
    MIRRORLAB_GPU_NVIDIA_SMI="$T/no/nvidia-smi" MIRRORLAB_GPU_LDCONFIG_CACHE="$T/ldcache-no-cuda.txt" "$@" \
    bash "$repo/tests/gpu/run.sh" >"$out.log" 2>&1
}
row() { awk -v n="  $1" 'index($0, n) == 1' "$2/gpu-summary.txt"; } # the summary row whose name starts with $1
expect_row() { # name out-dir needle
  local r
  r=$(row "$1" "$2")
  if grep -qF -- "$3" <<<"$r"; then ok "$1: $3"; else bad "$1: wanted '$3' in: ${r:-(no such row)}"; fi
}

echo "== 1. the correctness pass, no GPU, libraries from the venv's wheels"
rehearse "$T/out1" MIRRORLAB_ALLOW_NO_GPU=1 GPU_CHECK=correctness
rc=$?
[ $rc = 0 ] && ok "run.sh exit 0" || { bad "run.sh exit $rc"; tail -40 "$T/out1.log"; }
for f in gpu-summary.txt gpu-figures.txt gpu-logs.tar.gz; do
  [ -f "$T/out1/$f" ] && ok "\$OUT/$f written" || bad "\$OUT/$f missing"
done
cat "$T/out1/gpu-summary.txt"
first=$(grep -m1 -E '^  [A-Za-z]' "$T/out1/gpu-summary.txt")
grep -q '^  GPU (nvidia-smi) ' <<<"$first" && ok "the first row is nvidia-smi's" || bad "the first row is not nvidia-smi's: $first"
grep -qE '^GPU: none usable: .{20,}; the GPU steps are SKIPPED$' "$T/out1/gpu-summary.txt" && ok "one line says why there is no GPU" ||
  bad "no 'GPU: none usable: <why>' line"
expect_row libcudart.so.13 "$T/out1" "carried (tests/gpu/pack.sh): $repo/build-gpu/lib/libcudart.so.13"
expect_row libcublas.so.13 "$T/out1" "the wheels of $venv/bin/python3: $sp/nvidia/cu13/lib/libcublas.so.13"
expect_row libcublasLt.so.13 "$T/out1" "the wheels of $venv/bin/python3: $sp/nvidia/cu13/lib/libcublasLt.so.13"
expect_row libcudnn.so.9 "$T/out1" "the wheels of $venv/bin/python3: $sp/nvidia/cudnn/lib/libcudnn.so.9"
expect_row libnccl.so.2 "$T/out1" "the wheels of $venv/bin/python3: $sp/nvidia/nccl/lib/libnccl.so.2"
expect_row "host side" "$T/out1" " ok "
expect_row "host side" "$T/out1" "failed 0"
grep -qF "plugin under test: $repo/build-gpu/app/libmirrorlab_cuda.so" "$repo/build-gpu/gpu-run/test_gpu_host.log" &&
  ok "the host tests load the carried plugin" || bad "the host tests did not load the carried plugin"
for r in "GPU kernels vs CPU" "GPU training vs CPU" "CLI gpu:0x2" "fashion-mlp gpu:0x4"; do expect_row "$r" "$T/out1" "SKIP"; done
grep -q '^RESULT: NO GPU: ' "$T/out1/gpu-summary.txt" && ok "RESULT: NO GPU" || bad "the RESULT line does not say NO GPU"
# The loader, its cache ignored, with the environment run.sh made: the plugin's CUDA libraries come
# from the carry and the venv, and nothing is missing.
ldp=$(grep -oP '^LD_LIBRARY_PATH=\K.*' "$repo/build-gpu/gpu-run/libraries.txt")
listing=$(env -i LD_LIBRARY_PATH="$ldp" /lib64/ld-linux-x86-64.so.2 --inhibit-cache --list "$repo/build-gpu/app/libmirrorlab_cuda.so" 2>&1)
if grep -q 'not found' <<<"$listing"; then bad "the loader without its cache misses: $(grep 'not found' <<<"$listing" | xargs)"; fi
for so in libcudart.so.13 libcublas.so.13 libcublasLt.so.13; do
  at=$(awk -v so=$so '$1 == so { print $3 }' <<<"$listing")
  case $at in "$repo/build-gpu/lib/"* | "$sp/"*) ok "loader, cache ignored: $so => $at" ;; *) bad "loader, cache ignored: $so => ${at:-nothing}" ;; esac
done

echo "== 2. the figures pass, a driver older than R580, cuBLAS in the ldconfig cache"
mkdir -p "$T/bin" "$T/sys"
printf '#!/bin/sh\necho "NVIDIA H100 80GB HBM3, 535.104.05, 81559 MiB"\n' >"$T/bin/nvidia-smi"
chmod +x "$T/bin/nvidia-smi"
{
  cat "$T/ldcache-no-cuda.txt"
  for so in libcublas.so.13 libcublasLt.so.13; do
    ln -s "$(real $so)" "$T/sys/$so"
    printf '\t%s (libc6,x86-64) => %s\n' "$so" "$T/sys/$so"
  done
} >"$T/ldcache-cublas.txt"
rehearse "$T/out2" GPU_CHECK=figures MIRRORLAB_GPU_NVIDIA_SMI="$T/bin/nvidia-smi" MIRRORLAB_GPU_LDCONFIG_CACHE="$T/ldcache-cublas.txt"
rc=$?
[ $rc = 3 ] && ok "run.sh exit 3 (no usable GPU)" || { bad "run.sh exit $rc, not 3"; tail -40 "$T/out2.log"; }
cat "$T/out2/gpu-summary.txt"
expect_row "GPU (nvidia-smi)" "$T/out2" "SKIP"
grep -qF 'GPU: none usable: driver 535.104.05 is older than R580, which CUDA 13 needs (NVIDIA H100 80GB HBM3); the GPU steps are SKIPPED' \
  "$T/out2/gpu-summary.txt" && ok "one line names the old driver" || bad "no line names the old driver"
expect_row libcublas.so.13 "$T/out2" "the ldconfig cache: $T/sys/libcublas.so.13"
for r in "gpu_bench: GEMMs" "MLP step gpu:0, batch 256" "memcheck: kernel tests" "racecheck: kernel tests" "synccheck: CLI"; do
  expect_row "$r" "$T/out2" "SKIP"
done
grep -q '^RESULT: NO GPU: driver 535.104.05' "$T/out2/gpu-summary.txt" && ok "RESULT: NO GPU (the driver)" || bad "the RESULT line does not name the driver"

echo "rehearsal: $fails failed, $(($(date +%s) - started)) s in all"
[ $fails = 0 ]
