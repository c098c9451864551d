#!/usr/bin/env bash
# End-to-end: seconds per epoch of Mirrorlab and PyTorch side by side, in one run, on the same
# data, model, initialisation scheme, optimizer, batch and epochs; prints ratios and GFLOP/s
# against the 2-thread sgemm peak measured in the same run.
#   bench/e2e/compare.sh [EPOCHS]      (needs python3-torch: scripts/deps.sh python3-torch)
# PyTorch runs on Debian's OpenBLAS OpenMP build (its best here); Mirrorlab on the pthread build
# with explicit thread counts. Medians over the epochs after the first.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Some machines here pin OpenBLAS to its Haswell (AVX2) kernels through these two variables; the
# comparison runs both sides on OpenBLAS' own choice for this CPU (set KEEP_OPENBLAS_ENV=1 to keep them).
if [ "${KEEP_OPENBLAS_ENV:-0}" != 1 ]; then unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; fi
EPOCHS=${1:-4}
scripts/deps.sh python3-torch libopenblas0-openmp >/dev/null
[ "${NO_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
CLI=build/app/mirrorlab-cli
OUT=$(mktemp -d)
OMP_BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp
median() { python3 -c 'import json,sys; v=sorted(json.load(open(sys.argv[1]))[sys.argv[2]]); v=v[1:] if len(v)>2 else v; print(v[len(v)//2])' "$@"; }
ml_epoch() { # project devices threads tag
  "$CLI" train "$1" --epochs "$EPOCHS" --devices "$2" --threads-per-device "$3" --quiet --no-record --report "$OUT/$4.json"
  python3 -c 'import json,sys; e=[x["seconds"] for x in json.load(open(sys.argv[1]))["epochs"]]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2])' "$OUT/$4.json"
}
ml_sync() { python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epochs"][-1]; print(e["allreduce_share"]+e["wait_share"])' "$OUT/$1.json"; }
torch_epoch() { # tag args...
  local tag=$1; shift
  LD_LIBRARY_PATH=$OMP_BLAS OMP_NUM_THREADS=${THREADS:-2} /usr/bin/python3 bench/e2e/torch_mlp.py --epochs "$EPOCHS" "$@" > "$OUT/$tag.json"
  python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epoch_seconds"]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2])' "$OUT/$tag.json"
}
measure_peak() { build/bench/kernels/bench_kernels --benchmark_filter='BM_Sgemm/2048/2' --benchmark_format=json --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true 2>/dev/null | python3 -c 'import json,sys; b=[x for x in json.load(sys.stdin)["benchmarks"] if x.get("aggregate_name")=="median"][0]; print(b["GFLOP/s"]/1e9)'; }
peak=$(measure_peak)
gflop() { python3 -c "
import sys; sizes=[int(s) for s in sys.argv[1].split('-')]; n=60000
f=sum(2*n*a*b for a,b in zip(sizes,sizes[1:])); print((3*f-2*n*sizes[0]*sizes[1])/1e9)" "$1"; }

printf "sgemm 2048^3 peak, 2 threads (OpenBLAS pthread): %.0f GFLOP/s\n\n" "$peak"
printf "%-22s %-34s %10s %10s %9s %8s\n" model runner s/epoch "vs torch" GFLOP/s "of peak"
for m in default wide; do
  if [ $m = default ]; then proj=projects/fashion-mlp.json; args=(--hidden 128 --batch 128); sizes=784-128-10
  else proj=bench/e2e/wide-mlp.json; args=(--hidden 512 512 --batch 256); sizes=784-512-512-10; fi
  work=$(gflop $sizes)
  t_torch=$(THREADS=2 torch_epoch torch-$m "${args[@]}" --threads 2)
  t_ddp=$(THREADS=1 torch_epoch ddp-$m "${args[@]}" --threads 1 --ddp 2)
  t_ml1=$(ml_epoch $proj cpu:1 2 ml1-$m)
  t_ml2=$(ml_epoch $proj cpu:2 1 ml2-$m)
  t_ml1c=$(ml_epoch $proj cpu:1 1 ml1c-$m)
  row() { python3 -c "
import sys; t,ref,w,peak=map(float,sys.argv[3:7]); print('%-22s %-34s %10.3f %9.2fx %9.0f %7.0f%%' % (sys.argv[1],sys.argv[2],t,ref/t,w/t,100*w/t/peak))" "$@"; }
  row "$sizes b${args[-1]}" "pytorch 1 process x 2 threads" $t_torch $t_torch $work $peak
  row "" "pytorch DDP gloo 2 proc x 1 thread" $t_ddp $t_torch $work $peak
  row "" "mirrorlab cpu:1 x 2 threads" $t_ml1 $t_torch $work $peak
  row "" "mirrorlab cpu:2 (1 core each)" $t_ml2 $t_torch $work $peak
  row "" "mirrorlab cpu:1 x 1 thread" $t_ml1c $t_torch $work $peak
  python3 -c "
import sys; ddp,ml2,ml1c=map(float,sys.argv[1:4]); print('    mirrorlab cpu:2 vs pytorch DDP: %.2fx faster; cpu:2 vs cpu:1 (one core): %.2fx samples/s; mirrorlab sync share %.1f%%' % (ddp/ml2, ml1c/ml2, 100*float(sys.argv[4])))" $t_ddp $t_ml2 $t_ml1c "$(ml_sync ml2-$m)"
done
peak2=$(measure_peak)
printf "\nsgemm peak measured again at the end: %.0f GFLOP/s (start: %.0f); fractions above use the start value\n" "$peak2" "$peak"
echo "raw reports: $OUT"
