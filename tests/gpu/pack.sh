#!/usr/bin/env bash
# Builds on this machine (no GPU needed: the CUDA toolkit compiles) what tests/gpu/run.sh runs on a
# bare, offline GPU machine, for sm_90 only, and packs it into one ignored folder the device tool can
# carry: build-gpu-carry/carry.tar.xz and MANIFEST.txt. The device tool carries 64 MiB in all, the
# working tree included: the archive plus the tree must stay under that (checked and printed).
#
# The archive keeps the build tree's layout (app/mirrorlab-cli, app/libmirrorlab_cuda.so,
# tests/gpu/test_gpu_*, bench/gpu/gpu_bench), so run.sh runs it as it runs a build of its own, with
# the scripts and projects the GPU figures and the sanitizer runs use (bench/gpu/torch_mlp_gpu.py,
# bench/gpu/mlp-blobs.json, tests/gpu/sanitize-spirals.json) and data/fashion-mnist: a Fashion-MNIST
# subset as raw IDX files (the first 10,000 training and 2,000 test images of the installed
# dataset-fashion-mnist; 4.5 MB in the archive) so that the Fashion-MNIST step needs no download.
# lib/ holds every shared library they need that a CUDA image may lack (OpenBLAS and its Fortran
# runtime, oneDNN, SQLite, HDF5, ONNX, libstdc++, ...) and the CUDA runtime (libcudart.so.13, under
# 1 MB): all of their closure but the C library, the driver and the large CUDA libraries, which the
# GPU machine brings: cuBLAS (libcublas.so.13, libcublasLt.so.13: over 500 MB), cuDNN 9 (dlopened for
# Conv2D) and NCCL 2 (dlopened for runs over several GPUs), from its toolkit, its ldconfig cache or
# its Python's nvidia-* wheels (nvidia/cu13/lib, nvidia/cudnn/lib, nvidia/nccl/lib); run.sh says
# which copy it uses. The binaries look in ../lib first (RUNPATH $ORIGIN/../lib); run.sh also puts
# lib/ on LD_LIBRARY_PATH for the libraries' own dependencies.
#
# Usage: tests/gpu/pack.sh [out-dir]      (default: build-gpu-carry at the repository root)
#        tests/gpu/pack.sh --from-build BUILD [out-dir]
#          packs BUILD's binaries as they are (no configure, no nvcc; the normal build's plugin is for
#          sm_80 and sm_90): what the rehearsal (tests/gpu/rehearse.sh) uses; MIRRORLAB_PACK_XZ_LEVEL
#          (default 6) trades the archive's size for time.
# then, on the GPU machine: tests/gpu/run.sh (it finds build-gpu-carry/carry.tar.xz by itself)
set -euo pipefail
# The sm_90 build in $build: the CLI, the plugin, the GPU tests and gpu_bench.
build_for_sm90() {
  export PATH=$PATH:/usr/local/cuda/bin
  if ! command -v nvcc >/dev/null 2>&1; then
    echo "pack: no nvcc (the CUDA toolkit) on this machine: the plugin cannot be built here" >&2
    exit 1
  fi
  echo "== configure $build (sm_90, CLI, CUDA plugin, GPU tests, gpu_bench)"
  mkdir -p "$build"
  cmake -S "$root" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DMIRRORLAB_BUILD_UI=OFF -DMIRRORLAB_BUILD_BENCH=OFF \
    -DMIRRORLAB_BUILD_CUDA=ON -DMIRRORLAB_TEST_DIRS=gpu -DCMAKE_CUDA_ARCHITECTURES=90 \
    '-DCMAKE_BUILD_RPATH=$ORIGIN/../lib' >"$build/pack-configure.log" 2>&1 ||
    { tail -30 "$build/pack-configure.log"; exit 1; }
  if ! grep -q "CUDA plugin: CUDA" "$build/pack-configure.log"; then
    grep -E "CUDA plugin" "$build/pack-configure.log" >&2 || true
    echo "pack: the CUDA plugin would not be built (see $build/pack-configure.log)" >&2
    exit 1
  fi
  if ! grep -q "GPU bench: gpu_bench" "$build/pack-configure.log"; then
    grep -E "GPU bench" "$build/pack-configure.log" >&2 || true
    echo "pack: bench/gpu/gpu_bench would not be built (see $build/pack-configure.log)" >&2
    exit 1
  fi
  grep -E "CUDA plugin|GPU bench" "$build/pack-configure.log" | sed 's/^-- /   /'

  echo "== build"
  cmake --build "$build" --target mirrorlab_cuda mirrorlab-cli test_gpu_host test_gpu_kernels test_gpu_training gpu_bench -j "$(nproc)" \
    >"$build/pack-build.log" 2>&1 || { grep -E "error|Error" "$build/pack-build.log" | head -30; exit 1; }
}

root=$(cd "$(dirname "$0")/../.." && pwd)
from_build=""
if [ "${1:-}" = --from-build ]; then
  from_build=$(cd "${2:?pack: --from-build needs a build folder}" && pwd)
  shift 2
fi
out=${1:-$root/build-gpu-carry}
build=${from_build:-${MIRRORLAB_PACK_BUILD:-$root/build-gpu-pack}}
limit=$((64 * 1024 * 1024))
xz_level=${MIRRORLAB_PACK_XZ_LEVEL:-6}

if [ -z "$from_build" ]; then
  "$root/scripts/deps.sh" >/dev/null
  build_for_sm90
fi

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
files=(app/mirrorlab-cli app/libmirrorlab_cuda.so tests/gpu/test_gpu_host tests/gpu/test_gpu_kernels tests/gpu/test_gpu_training
  bench/gpu/gpu_bench)
for f in "${files[@]}"; do
  [ -f "$build/$f" ] || { echo "pack: $build/$f was not built" >&2; exit 1; }
  mkdir -p "$stage/$(dirname "$f")"
  cp "$build/$f" "$stage/$f"
done
# The scripts and projects run.sh uses with these binaries (it prefers the carried ones).
sources=(bench/gpu/torch_mlp_gpu.py bench/gpu/mlp-blobs.json tests/gpu/sanitize-spirals.json)
for f in "${sources[@]}"; do
  mkdir -p "$stage/$(dirname "$f")"
  cp "$root/$f" "$stage/$f"
done
# Fashion-MNIST for the GPU machine, which is offline: the first 10,000 training and 2,000 test
# images (and labels) of the installed data set, as raw IDX files (xz packs them to 4.5 MB, better
# than gzip), which the fashion-mnist loader reads like the gzipped ones.
fashion=/usr/share/datasets/fashion-mnist
mkdir -p "$stage/data/fashion-mnist"
python3 - "$fashion" "$stage/data/fashion-mnist" <<'PY'
import gzip, struct, sys
src, dst = sys.argv[1:]
for base, n in (("train-images-idx3-ubyte", 10000), ("train-labels-idx1-ubyte", 10000),
                ("t10k-images-idx3-ubyte", 2000), ("t10k-labels-idx1-ubyte", 2000)):
    with gzip.open("%s/%s.gz" % (src, base), "rb") as f:
        head = f.read(8)
        magic, count = struct.unpack(">II", head)
        dims = f.read(8) if magic == 0x803 else b""  # rows, columns
        per = 28 * 28 if magic == 0x803 else 1
        assert magic in (0x801, 0x803) and count >= n, (base, hex(magic), count)
        body = f.read(n * per)
    with open("%s/%s" % (dst, base), "wb") as out:
        out.write(struct.pack(">II", magic, n) + dims + body)
PY

# The closure: every library ldd resolves, less the C library (the GPU machine's own must be used),
# the driver (libcuda must match the machine's kernel module) and the CUDA libraries too large to
# carry (the machine has them). The CUDA runtime is carried: under 1 MB, and one library less to find.
skip='^(libc|libm|libdl|libpthread|librt|libresolv|libutil|ld-linux-x86-64|libcuda|libcublas|libcublasLt|libcudnn.*|libnccl|libnvidia-.*|libnvrtc|libnvJitLink)\.so'
# The C++ runtime goes to lib/fallback: Debian 12's needs glibc 2.36, newer than Ubuntu 22.04's, so
# run.sh uses it only where the machine's own libstdc++ is older than the binaries need.
mkdir -p "$stage/lib/fallback"
for f in "${files[@]}"; do
  ldd "$build/$f" | awk '/=> \// {print $1, $3}'
done | sort -u | while read -r name path; do
  if [[ $name =~ $skip ]]; then continue; fi
  case $name in
    libstdc++.so.*|libgcc_s.so.*) cp -L "$path" "$stage/lib/fallback/$name" ;;
    *) cp -L "$path" "$stage/lib/$name" ;;
  esac
done

# Every binary must then find everything but the skipped libraries inside lib/.
missing=$(for f in "${files[@]}"; do LD_LIBRARY_PATH=$stage/lib:$stage/lib/fallback ldd "$stage/$f"; done | awk '/=> / {print $1, $3}' | sort -u |
  while read -r name path; do
    [[ $name =~ $skip ]] && continue
    [[ $path == "$stage/lib/"* ]] || echo "$name ($path)"
  done)
if [ -n "$missing" ]; then
  echo "pack: found outside the carried lib/: $missing" >&2
  exit 1
fi
cudart=$(ldd "$build/app/libmirrorlab_cuda.so" | awk '$1 == "libcudart.so.13" { print $3 }')
if [ ! -f "$stage/lib/libcudart.so.13" ] || [ -z "$cudart" ]; then
  echo "pack: the plugin's CUDA runtime (libcudart.so.13) was not found to carry: $(ldd "$build/app/libmirrorlab_cuda.so" | grep cudart)" >&2
  exit 1
fi
cudart_from=$(readlink -f "$cudart")
archs=$(strings "$build/app/libmirrorlab_cuda.so" | grep -oP -- '-arch sm_\K[0-9a-z]+' | sort -u | sed 's/^/sm_/' | paste -sd, || true)
nvcc_version=$(awk -F'"' '/^set\(CMAKE_CUDA_COMPILER_VERSION /{ print $2; exit }' "$build"/CMakeFiles/*/CMakeCUDACompiler.cmake 2>/dev/null || true)

# The newest C library symbol version any file needs: the GPU machine's glibc must be at least that.
newest() { sort -t. -k1,1n -k2,2n -k3,3n -u | tail -1; }
glibc=$(for f in "${files[@]/#/$stage/}" "$stage"/lib/*.so*; do objdump -T "$f" 2>/dev/null; done | grep -oP 'GLIBC_\K[0-9.]+' | newest)
glibcxx=$(for f in "${files[@]/#/$stage/}" "$stage"/lib/*.so*; do objdump -T "$f" 2>/dev/null; done | grep -oP 'GLIBCXX_\K[0-9.]+' | newest)
fallback_glibc=$(for f in "$stage"/lib/fallback/*; do objdump -T "$f" 2>/dev/null; done | grep -oP 'GLIBC_\K[0-9.]+' | newest)

echo "== pack"
rm -rf "$out"
mkdir -p "$out"
tar -C "$stage" -cf - . | xz -T0 "-$xz_level" >"$out/carry.tar.xz"
size=$(stat -c %s "$out/carry.tar.xz")
{
  echo "Mirrorlab GPU check, carried build: $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo unknown), $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "built on: $(. /etc/os-release && echo "$PRETTY_NAME"), nvcc ${nvcc_version:-?}, ${archs:-?}${from_build:+ (packed from $from_build)}"
  echo "glibcxx: $glibcxx"
  echo "carries: the CUDA runtime (lib/libcudart.so.13, from $cudart_from), ${sources[*]},"
  echo "  data/fashion-mnist (10,000 training and 2,000 test images of Fashion-MNIST, raw IDX)"
  echo "needs on the GPU machine: glibc $glibc or newer; an NVIDIA driver for CUDA 13 (R580 or newer);"
  echo "  cuBLAS 13 (libcublas.so.13, libcublasLt.so.13); cuDNN 9 (libcudnn.so.9) for Conv2D; NCCL 2 (libnccl.so.2) for runs over"
  echo "  several GPUs: run.sh finds them in the system toolkit, the ldconfig cache or the Python wheels (nvidia/cu13/lib,"
  echo "  nvidia/cudnn/lib, nvidia/nccl/lib) and says which copy it uses;"
  echo "  a libstdc++ with GLIBCXX_$glibcxx, else the carried lib/fallback one (it needs glibc $fallback_glibc)"
  echo "archive: carry.tar.xz, $size bytes; unpacked:"
  (cd "$stage" && find . -type f -printf '%s\t%p\n' | sort -k2)
} >"$out/MANIFEST.txt"
unpacked=$(du -sb "$stage" | cut -f1)
echo "packed $out/carry.tar.xz: $((size / 1024 / 1024)) MiB, $size bytes ($((unpacked / 1024 / 1024)) MiB unpacked, ${#files[@]} binaries," \
  "$(find "$stage/lib" -type f | wc -l) libraries); needs glibc $glibc or newer, and GLIBCXX_$glibcxx (or glibc $fallback_glibc for the carried C++ runtime)"
# The device tool carries 64 MiB in all: this folder and the working tree (tracked files and
# untracked ones git does not ignore) together.
tree=$(git -C "$root" ls-files -z --cached --others --exclude-standard 2>/dev/null | (cd "$root" && xargs -0 -r stat -c %s 2>/dev/null) |
  awk '{ s += $1 } END { print s + 0 }')
folder=$(du -sb "$out" | cut -f1)
mib() { awk -v b="$1" 'BEGIN { printf "%.1f MiB", b / 1048576 }'; }
echo "carried by the device tool: $(basename "$out")/ $(mib "$folder") + the working tree $(mib "$tree") = $(mib $((folder + tree))) of 64 MiB"
if [ $((folder + tree)) -gt "$limit" ]; then
  echo "pack: $((folder + tree)) bytes is over the 64 MiB the device tool carries" >&2
  exit 1
fi
