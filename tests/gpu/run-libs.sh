# shellcheck shell=bash disable=SC2154,SC2034
# Sourced by tests/gpu/run.sh: the GPU row (nvidia-smi and the driver CUDA 13 needs) and the search
# for the CUDA libraries the plugin needs on a machine that has them somewhere of its own: the
# system toolkit, the ldconfig cache, or the Python wheels of the machine's own interpreter (CUDA 13's
# wheels put cuBLAS and the runtime under nvidia/cu13/lib, cuDNN under nvidia/cudnn/lib, NCCL under
# nvidia/nccl/lib). The folder of each copy chosen goes on LD_LIBRARY_PATH (after the carried lib/),
# so that the loader takes that copy; cuDNN and NCCL, which the plugin dlopens, are also named in
# MIRRORLAB_CUDNN_LIBRARY / MIRRORLAB_NCCL_LIBRARY. Each row names the copy used, for the libraries
# the plugin links as the loader resolves them (ldd of the plugin).
#
# Where to look can be narrowed, for the rehearsal (tests/gpu/rehearse.sh) and for odd machines:
#   MIRRORLAB_GPU_CUDA_DIRS        the toolkit folders to look in ("none": none); default below
#   MIRRORLAB_GPU_LDCONFIG_CACHE   a file in `ldconfig -p` format read instead of the machine's cache
#   MIRRORLAB_GPU_PYTHONS          the interpreters whose site-packages are searched; default below
#   MIRRORLAB_GPU_NVIDIA_SMI       the nvidia-smi to ask; default: the one on PATH

# The driver CUDA 13 needs: R580 or newer.
readonly min_driver=580

# gpu_state: yes (nvidia-smi lists a GPU on a new enough driver), no (it lists none, or the driver
# is too old: gpu_why says which), unknown (no nvidia-smi: the plugin's probe decides).
gpu_state=unknown
gpu_why=""
gpu_line=""

check_gpu() {
  local smi=${MIRRORLAB_GPU_NVIDIA_SMI:-$(command -v nvidia-smi 2>/dev/null || true)} out rc t
  t=$(now)
  if [ -z "$smi" ] || [ ! -x "$smi" ]; then
    gpu_line="nvidia-smi not found: the plugin's probe (mirrorlab-cli devices) decides"
    row "GPU (nvidia-smi)" none 0 "$gpu_line"
    return
  fi
  out=$(timeout 30 "$smi" --query-gpu=name,driver_version,memory.total --format=csv,noheader 2>&1)
  rc=$?
  echo "$out" >"$logs/nvidia-smi.txt"
  local first count name driver memory
  first=$(grep -m1 -E '^[^,]+, *[0-9]+\.[0-9.]+, *[0-9]+' <<<"$out" || true)
  count=$(grep -cE '^[^,]+, *[0-9]+\.[0-9.]+, *[0-9]+' <<<"$out")
  if [ $rc != 0 ] || [ -z "$first" ]; then
    gpu_state=no
    gpu_why="nvidia-smi lists no GPU (exit $rc: $(head -1 <<<"$out" | cut -c1-120))"
    row "GPU (nvidia-smi)" SKIP $(($(now) - t)) "$gpu_why"
    return
  fi
  IFS=, read -r name driver memory <<<"$first"
  name=$(xargs <<<"$name") driver=$(xargs <<<"$driver") memory=$(xargs <<<"$memory")
  gpu_line="$name, driver $driver, $memory ($count GPU$([ "$count" = 1 ] || echo s) listed)"
  if [ "${driver%%.*}" -lt "$min_driver" ]; then
    gpu_state=no
    gpu_why="driver $driver is older than R$min_driver, which CUDA 13 needs ($name)"
    row "GPU (nvidia-smi)" SKIP $(($(now) - t)) "$gpu_why"
    return
  fi
  gpu_state=yes
  row "GPU (nvidia-smi)" ok $(($(now) - t)) "$gpu_line"
}

# The machine's ldconfig cache, as `ldconfig -p` lists it.
ldcache() {
  if [ -n "${MIRRORLAB_GPU_LDCONFIG_CACHE:-}" ]; then
    cat "$MIRRORLAB_GPU_LDCONFIG_CACHE"
  else
    { command -v ldconfig >/dev/null && ldconfig -p; } 2>/dev/null || /sbin/ldconfig -p 2>/dev/null
  fi
}
# The 64-bit file the cache names for a soname. Its lines read
#   "	libcublas.so.13 (libc6,x86-64) => /usr/local/cuda-13.0/lib/libcublas.so.13"
# (sometimes with ", OS ABI: ..." inside the brackets).
ldcache_path() { ldcache | grep -m1 -oP "^\s*\Q$1\E \([^)]*x86-64[^)]*\) => \K\S+" || true; }

cuda_dirs() {
  if [ -n "${MIRRORLAB_GPU_CUDA_DIRS+set}" ]; then
    [ "$MIRRORLAB_GPU_CUDA_DIRS" = none ] || echo "$MIRRORLAB_GPU_CUDA_DIRS" | tr ':' ' ' | tr ' ' '\n'
    return
  fi
  local d
  for d in /usr/local/cuda/lib64 /usr/local/cuda/lib /usr/local/cuda/targets/x86_64-linux/lib \
    /usr/local/cuda-13*/lib64 /usr/local/cuda-13*/lib /usr/local/cuda-13*/targets/x86_64-linux/lib; do
    [ -d "$d" ] && echo "$d"
  done
}

# "interpreter<TAB>site-packages folder" for every interpreter that answers; /opt/torch/.venv's
# folders also by name, in case its interpreter does not start.
site_dirs=""
find_site_dirs() {
  local c sp
  local -a pythons
  if [ -n "${MIRRORLAB_GPU_PYTHONS:-}" ]; then
    read -r -a pythons <<<"$MIRRORLAB_GPU_PYTHONS"
  else
    pythons=(python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3)
  fi
  site_dirs=$(
    for c in "${pythons[@]}"; do
      command -v "$c" >/dev/null 2>&1 || continue
      timeout 20 "$c" -c 'import site; print("\n".join(site.getsitepackages()))' 2>/dev/null |
        while read -r sp; do [ -d "$sp/nvidia" ] && printf '%s\t%s\n' "$(command -v "$c")" "$sp"; done
    done
    if [ -z "${MIRRORLAB_GPU_PYTHONS:-}" ]; then
      for sp in /opt/torch/.venv/lib/python3*/site-packages; do [ -d "$sp/nvidia" ] && printf '%s\t%s\n' "(by name)" "$sp"; done
    fi
  )
  site_dirs=$(awk -F'\t' '!seen[$2]++' <<<"$site_dirs")
}

# find_lib SONAME WHEEL-SUBDIRS...: sets lib_path (the file) and lib_how (where it came from), the
# system toolkit first, then the ldconfig cache, then the Python wheels; both empty when absent.
find_lib() {
  local so=$1 d py sp sub
  shift
  lib_path="" lib_how=""
  while read -r d; do
    [ -n "$d" ] && [ -e "$d/$so" ] && { lib_path=$d/$so lib_how="the system toolkit"; return; }
  done < <(cuda_dirs)
  lib_path=$(ldcache_path "$so")
  if [ -n "$lib_path" ] && [ -e "$lib_path" ]; then lib_how="the ldconfig cache"; return; fi
  lib_path=""
  while IFS=$'\t' read -r py sp; do
    [ -n "$sp" ] || continue
    for sub in "$@"; do
      [ -e "$sp/$sub/$so" ] && { lib_path=$sp/$sub/$so lib_how="the wheels of $py"; return; }
    done
  done <<<"$site_dirs"
}

prepend_ld() { case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) ;; *) export LD_LIBRARY_PATH=$1${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} ;; esac; }
append_ld() { case ":${LD_LIBRARY_PATH:-}:" in *":$1:"*) ;; *) export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$1 ;; esac; }

# Where the loader takes a library from for the plugin (ldd follows LD_LIBRARY_PATH, RUNPATH and
# the cache as the program will); "not found" when nowhere.
resolved() { ldd "$1" 2>/dev/null | awk -v so="$2" '$1 == so { print ($3 == "not" ? "not found" : $3); exit }'; }

# One row per library: where it was found and the copy the plugin gets. A library the plugin needs
# that is missing fails the check where a GPU is usable (the plugin cannot load without it).
find_cuda_libraries() {
  local plugin=$build/app/libmirrorlab_cuda.so
  find_site_dirs
  # The runtime: carried (tests/gpu/pack.sh), so that only cuBLAS, cuDNN and NCCL come from here.
  if [ -e "$build/lib/libcudart.so.13" ]; then
    lib_path=$build/lib/libcudart.so.13 lib_how="carried (tests/gpu/pack.sh)"
  else
    find_lib libcudart.so.13 nvidia/cu13/lib nvidia/cuda_runtime/lib
    [ -n "$lib_path" ] && append_ld "$(dirname "$lib_path")"
  fi
  lib_row libcudart.so.13 "$plugin" required
  # cuBLAS (libcublasLt.so.13 beside it): linked by the plugin.
  find_lib libcublas.so.13 nvidia/cu13/lib nvidia/cublas/lib
  [ -n "$lib_path" ] && append_ld "$(dirname "$lib_path")"
  lib_row libcublas.so.13 "$plugin" required
  find_lib libcublasLt.so.13 nvidia/cu13/lib nvidia/cublas/lib
  [ -n "$lib_path" ] && append_ld "$(dirname "$lib_path")"
  lib_row libcublasLt.so.13 "$plugin" required
  # cuDNN 9 and NCCL 2: dlopened by the plugin, from the file named here (cuDNN's sub-libraries
  # from the same folder, hence LD_LIBRARY_PATH too).
  if [ -n "${MIRRORLAB_CUDNN_LIBRARY:-}" ]; then
    lib_path=$MIRRORLAB_CUDNN_LIBRARY lib_how="MIRRORLAB_CUDNN_LIBRARY"
  else
    find_lib libcudnn.so.9 nvidia/cudnn/lib nvidia/cu13/lib
  fi
  if [ -n "$lib_path" ]; then
    export MIRRORLAB_CUDNN_LIBRARY=$lib_path
    append_ld "$(dirname "$lib_path")"
  fi
  lib_row libcudnn.so.9 "" "Conv2D needs it"
  if [ -n "${MIRRORLAB_NCCL_LIBRARY:-}" ]; then
    lib_path=$MIRRORLAB_NCCL_LIBRARY lib_how="MIRRORLAB_NCCL_LIBRARY"
  else
    find_lib libnccl.so.2 nvidia/nccl/lib nvidia/cu13/lib
  fi
  [ -n "$lib_path" ] && export MIRRORLAB_NCCL_LIBRARY=$lib_path
  lib_row libnccl.so.2 "" "only runs over several GPUs need it"
  {
    echo "LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}"
    echo "MIRRORLAB_CUDNN_LIBRARY=${MIRRORLAB_CUDNN_LIBRARY:-}"
    echo "MIRRORLAB_NCCL_LIBRARY=${MIRRORLAB_NCCL_LIBRARY:-}"
    echo "site-packages searched:"
    sed 's/^/  /' <<<"${site_dirs:-(none)}"
  } >"$logs/libraries.txt"
}

# lib_row SONAME PLUGIN-OR-EMPTY NEED: a row from lib_path/lib_how, checked against what the loader
# resolves for the plugin when the plugin links the library (NEED "required").
lib_row() {
  local so=$1 plugin=$2 need=$3 used="" detail
  if [ -n "$plugin" ] && [ -f "$plugin" ]; then used=$(resolved "$plugin" "$so"); fi
  if [ -n "$plugin" ] && [ -f "$plugin" ]; then
    if [ -z "$used" ] || [ "$used" = "not found" ]; then
      detail="the plugin's loader finds no $so (looked in: the system toolkit, the ldconfig cache, the wheels of ${site_dirs:+the interpreters in $logs/libraries.txt}${site_dirs:-no interpreter with an nvidia/ folder})"
      if [ "$gpu_state" = no ]; then row "$so" none 0 "$detail"; else row "$so" FAIL 0 "$detail"; fail; fi
      return
    fi
    detail="$lib_how: $used"
    [ -n "$lib_path" ] && [ "$(readlink -f "$lib_path")" != "$(readlink -f "$used")" ] && detail="$detail (found $lib_path via $lib_how, but the loader takes $used)"
    [ -z "$lib_path" ] && detail="by the loader alone (RUNPATH or LD_LIBRARY_PATH as given): $used"
    row "$so" ok 0 "$detail"
  elif [ -n "$lib_path" ]; then
    row "$so" ok 0 "$lib_how: $lib_path"
  else
    row "$so" none 0 "not in the system toolkit, the ldconfig cache nor a wheel: $need"
  fi
}
