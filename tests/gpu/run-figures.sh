# shellcheck shell=bash disable=SC2154,SC2034
# Sourced by tests/gpu/run.sh: the figures and sanitizer pass (GPU_CHECK=figures). Benchmark goals
# are reported, not failed. Order: the cheap figures first, then compute-sanitizer on the kernel
# tests (code that has never run on a GPU before), then the rest of the figures and the sanitizers
# on a short training; what the budget leaves out is NOT RUN.

# The value of one figure ("name value unit" in $figures), empty when it was not measured.
fig() { awk -v k="$1" '$1 == k { v = $2 } END { if (v != "") print v }' "$figures"; }
# a / b with 2 decimals, empty unless both are numbers and b > 0.
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a != "" && b != "" && b + 0 > 0) printf "%.2f", a / b }'; }
rx() {
  local r
  r=$(ratio "$1" "$2")
  echo "${r:--}"
}
# A file the carried build brings (pack.sh packs the scripts and projects beside the binaries),
# else the source tree's.
src() { if [ "$carried" = 1 ] && [ -f "$build/$1" ]; then echo "$build/$1"; else echo "$root/$1"; fi; }

figures_pass() {
  echo "== figures and sanitizers"
  py="" sanitizer=""
  local c
  # Where no GPU is usable every step below is skipped: no need to look for their tools.
  [ "$gpu_state" = no ] || for c in python3 /opt/torch/.venv/bin/python3 /usr/bin/python3 /usr/local/bin/python3 /opt/conda/bin/python3; do
    if command -v "$c" >/dev/null 2>&1 && timeout 60 "$c" -c 'import torch' >/dev/null 2>&1; then py=$c; break; fi
  done
  [ "$gpu_state" = no ] || for c in "${CUDA_HOME:-/nonexistent}/bin/compute-sanitizer" "$(command -v compute-sanitizer 2>/dev/null)" \
    "$(dirname "$(command -v nvcc 2>/dev/null || echo /nonexistent/nvcc)")/compute-sanitizer" \
    /usr/local/cuda/bin/compute-sanitizer /usr/local/cuda-*/bin/compute-sanitizer /opt/cuda/bin/compute-sanitizer; do
    if [ -n "$c" ] && [ -x "$c" ]; then sanitizer=$c; break; fi
  done
  [ -n "$sanitizer" ] && echo "using $sanitizer ($("$sanitizer" --version 2>/dev/null | grep -m1 -i version))"
  # The kernel tests that launch the plugin's kernels, not those that provoke CUDA errors or an
  # out-of-memory on purpose (the sanitizer would count them).
  local tests=${SANITIZER_FILTER:-'Gpu.Dense*:Gpu.BiasGradient*:Gpu.Activations*:Gpu.Softmax*:Gpu.Losses*:Gpu.Metrics*:Gpu.Dropout*:Gpu.Optimizers*:Gpu.LocalAllReduce*:Gpu.CountNonfinite*:Gpu.PinnedIndices*:Gpu.AnEmptyBatch*:Gpu.Tf32*:Gpu.Conv2D*:Gpu.Pooling*:Gpu.GlobalAveragePooling*:Gpu.BatchNorm*:Gpu.BinaryCrossentropy*:Gpu.BinaryAccuracy*'}
  local kernels=("$build/tests/gpu/test_gpu_kernels" --gtest_color=no "--gtest_filter=$tests")
  local cli=("$build/app/mirrorlab-cli" train "$(src tests/gpu/sanitize-spirals.json)" --devices gpu:0x4 --no-record)

  gpu_bench_run
  cli_scale "MLP step gpu:0, batch 256" scale-b256 "gpu:0" 256 100
  cli_scale "MLP step gpu:0, batch 4096" scale-b4096 "gpu:0" 4096 40
  cli_scale "MLP gpu:0, 0x2, 0x4, batch 1024" scale-logical "gpu:0;0x2;0x4" 1024 60
  local tool
  for tool in memcheck racecheck synccheck; do sanitize $tool "kernel tests" kernels "${kernels[@]}"; done
  # Mixed precision's tensor cores against float32 (the batch 4096 row above), same model and steps.
  cli_scale "MLP step gpu:0, b4096, mixed_bfloat16" scale-b4096-bf16 "gpu:0" 4096 40 mixed_bfloat16
  cli_scale "MLP step gpu:0, b4096, mixed_float16" scale-b4096-fp16 "gpu:0" 4096 40 mixed_float16
  torch_run
  for tool in memcheck racecheck synccheck; do sanitize $tool "CLI gpu:0x4, 6 steps" cli "${cli[@]}"; done
}

# bench/gpu/gpu_bench: the MLP's own GEMMs in cuBLAS, copy bandwidths, the all-reduces.
gpu_bench_run() {
  local name="gpu_bench: GEMMs, copies, sums" bench=$build/bench/gpu/gpu_bench t lim rc
  gpu_skip "$name" && return
  t=$(now)
  lim=$(limit "$bench_seconds")
  if [ ! -x "$bench" ]; then row "$name" FAIL 0 "not built"; fail; return; fi
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  running=$name
  run_step "$lim" "$logs/gpu_bench.log" "$bench"
  rc=$?
  grep -E '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/gpu_bench.log" >>"$figures"
  if [ $rc = 0 ] && grep -q '^no GPU: ' "$logs/gpu_bench.log"; then
    row "$name" FAIL $(($(now) - t)) "$(grep -m1 '^no GPU: ' "$logs/gpu_bench.log" | cut -c1-140)"
    fail
  elif [ $rc = 0 ]; then
    row "$name" ok $(($(now) - t)) "$(grep -cE '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/gpu_bench.log") figures$(grep '^skip ' "$logs/gpu_bench.log" | cut -d' ' -f2- | sed 's/^/; skipped /' | tr '\n' ' ' | cut -c1-100)"
  elif timed_out $rc; then
    row "$name" INCOMPLETE $(($(now) - t)) "out of its ${lim}s (BENCH_SECONDS) after $(grep -cE '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/gpu_bench.log") figures"
  else
    row "$name" FAIL $(($(now) - t)) "exit $rc: $(grep -m1 'gpu_bench: ' "$logs/gpu_bench.log" | cut -c1-120)"
    fail
  fi
}

# `mirrorlab-cli scale` over a device sweep: each row's step time (median after warm-up), samples/s
# and sync share become figures mirrorlab_{step,samples_per_s,sync_share}_<devices>_b<global batch>.
cli_scale() { # row-name log-name devices batch steps [precision]
  local name=$1 log=$logs/$2.log devices=$3 batch=$4 steps=$5 precision=${6:-} t lim rc project suffix="" found
  gpu_skip "$name" && return
  t=$(now)
  lim=$(limit 40)
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  running=$name
  project=$(src bench/gpu/mlp-blobs.json)
  if [ -n "$precision" ]; then
    suffix="_$precision"
    sed "s/\"training\": {/\"training\": {\"precision\": \"$precision\", /" "$project" >"$logs/mlp-blobs-$precision.json"
    project=$logs/mlp-blobs-$precision.json
  fi
  run_step "$lim" "$log" "$build/app/mirrorlab-cli" scale "$project" --devices "$devices" --batch-size "$batch" --steps "$steps" --no-record
  rc=$?
  found=$(awk -v x="$suffix" '$1 ~ /^gpu:/ && NF >= 8 { d = $1; gsub(/[:;]/, "", d); s = $8; sub(/%$/, "", s);
    printf "mirrorlab_step_%s_b%s%s %s ms\nmirrorlab_samples_per_s_%s_b%s%s %s samples/s\nmirrorlab_sync_share_%s_b%s%s %s %%\n",
      d, $2, x, $4, d, $2, x, $5, d, $2, x, s }' "$log")
  [ -n "$found" ] && echo "$found" >>"$figures"
  if [ $rc = 0 ] && [ -n "$found" ]; then
    row "$name" ok $(($(now) - t)) "$(awk '$1 ~ /^gpu:/ && NF >= 8 { printf "%s%s: %s ms, %s samples/s, sync %s", n++ ? "; " : "", $1, $4, $5, $8 }' "$log")"
  elif timed_out $rc; then
    row "$name" INCOMPLETE $(($(now) - t)) "out of its ${lim}s"
  else
    row "$name" FAIL $(($(now) - t)) "exit $rc: $(grep -m1 '^error' "$log" | cut -c1-120)"
    fail
  fi
}

# The same model in PyTorch on the same GPU; a reference that fails is reported, not failed.
torch_run() {
  local name="PyTorch MLP step, batch 256, 4096" t lim rc
  gpu_skip "$name" && return
  t=$(now)
  lim=$(limit "$bench_seconds")
  if [ -z "$py" ]; then row "$name" SKIP 0 "no python3 that imports torch"; return; fi
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  running=$name
  run_step "$lim" "$logs/torch.log" "$py" "$(src bench/gpu/torch_mlp_gpu.py)" --batches 256 4096
  rc=$?
  grep -E '^[a-z0-9_]+ [-+0-9.e]+ [^ ]+$' "$logs/torch.log" >>"$figures"
  if grep -q '^skip torch ' "$logs/torch.log"; then
    row "$name" SKIP $(($(now) - t)) "$(grep -m1 '^skip torch ' "$logs/torch.log" | cut -d' ' -f2- | cut -c1-140)"
  elif [ $rc = 0 ]; then
    row "$name" ok $(($(now) - t)) "$(grep -m1 '^# torch' "$logs/torch.log" | cut -c3-140)"
  else
    row "$name" SKIP $(($(now) - t)) "the PyTorch script failed: exit $rc: $(tail -1 "$logs/torch.log" | cut -c1-100)"
  fi
}

# compute-sanitizer TOOL on one program. racecheck and synccheck instrument the plugin's own kernels
# only (--kernel-name kns=mlcuda: every one is in namespace mlcuda::kernels; cuBLAS's and cuDNN's
# shared memory is theirs to check, and instrumenting them would not fit the time); memcheck all of
# them, since a wrong size passed to cuBLAS shows as a bad access in cuBLAS's kernel. PASS with 0
# errors; FAIL with the count and the first report; INCOMPLETE when out of time with none by then.
sanitize() { # tool what log-name command...
  local tool=$1 what=$2 log=$logs/sanitizer-$1-$3.log t lim rc
  shift 3
  local name="$tool: $what" errors warnings api first so_far
  local -a only=()
  [ "$tool" = memcheck ] || only=(--kernel-name kns=mlcuda)
  gpu_skip "$name" && return
  t=$(now)
  if [ -z "$sanitizer" ]; then row "$name" SKIP 0 "compute-sanitizer not found (CUDA_HOME, PATH, beside nvcc, /usr/local/cuda*/bin)"; return; fi
  lim=$(limit "$sanitizer_seconds")
  if [ "$lim" = 0 ]; then no_time "$name"; return; fi
  running=$name
  run_step "$lim" "$log" env MIRRORLAB_REQUIRE_GPU=1 "$sanitizer" --tool "$tool" "${only[@]}" --print-limit 10 "$@"
  rc=$?
  # memcheck, synccheck: "ERROR SUMMARY: N errors"; racecheck: "RACECHECK SUMMARY: H hazards displayed (E errors, W warnings)".
  errors=$(grep -oP 'ERROR SUMMARY: \K[0-9]+' "$log" | tail -1)
  [ -z "$errors" ] && errors=$(grep -oP 'RACECHECK SUMMARY: .*\(\K[0-9]+(?= errors?)' "$log" | tail -1)
  warnings=$(grep -oP 'RACECHECK SUMMARY: .*, \K[0-9]+(?= warnings?)' "$log" | tail -1)
  api=$(grep -c '^========= Program hit' "$log")
  local reports='^========= +(Invalid|Program hit|Race|Barrier|Error|.*[Hh]azard|Uninitialized|Misaligned|Out of bounds)'
  first=$(grep -m1 -E "$reports" "$log" | sed -E 's/^=+ +//' | cut -c1-110)
  so_far=$(grep -cE "$reports" "$log")
  local extra=""
  [ -n "$warnings" ] && [ "$warnings" != 0 ] && extra=", $warnings warnings"
  if timed_out $rc && [ "$so_far" = 0 ]; then
    row "$name" INCOMPLETE $(($(now) - t)) "out of its ${lim}s (SANITIZER_SECONDS) with no error reported by then"
  elif timed_out $rc; then
    row "$name" FAIL $(($(now) - t)) "out of its ${lim}s, $so_far error report(s) by then; first: $first"
    fail
  elif [ -z "$errors" ]; then
    row "$name" FAIL $(($(now) - t)) "no error summary, exit $rc: $(tail -1 "$log" | cut -c1-100)"
    fail
  elif [ "$errors" != 0 ]; then
    row "$name" FAIL $(($(now) - t)) "$errors errors ($api CUDA API errors)$extra; first: $first"
    fail
  elif [ $rc != 0 ]; then
    row "$name" FAIL $(($(now) - t)) "0 errors$extra, but the program exited $rc (see sanitizer-$tool-$3.log)"
    fail
  else
    row "$name" PASS $(($(now) - t)) "0 errors$extra"
  fi
}

# The figures and their ratios, read from $figures (a line saying so where nothing was measured).
report_figures() {
  local any=0 b g s r tr tp goal
  for b in 256 4096; do
    s=$(fig mirrorlab_step_gpu0_b$b) g=$(fig gemms_b${b}_fp32) tr=$(fig torch_step_b${b}_resident) tp=$(fig torch_step_b${b}_pageable)
    [ -z "$s$g$tr" ] && continue
    any=1
    r=$(ratio "$s" "$g")
    goal=""
    [ $b = 4096 ] && [ -n "$r" ] && goal=$(awk -v r="$r" 'BEGIN { print (r <= 1.4 ? " (goal <= 1.4x: met)" : " (goal <= 1.4x: NOT met)") }')
    echo "  MLP 784-512-512-10, batch $b: Mirrorlab gpu:0 step ${s:--} ms; its 8 GEMMs in cuBLAS FP32 ${g:--} ms" \
      "(TF32 $(rx "$(fig gemms_b${b}_tf32)" 1) ms): step/GEMMs ${r:--}x$goal"
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
