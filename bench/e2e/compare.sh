#!/usr/bin/env bash
# End-to-end: seconds per epoch of Mirrorlab, TensorFlow and PyTorch side by side, in one run, on the
# same data, model, initialisation scheme, optimizer, batch and epochs; prints ratios (Mirrorlab
# against TensorFlow first) and GFLOP/s against the 2-thread peaks measured in the same run
# (OpenBLAS' sgemm and oneDNN's matmul), then each speed goal with its measured ratio.
#   bench/e2e/compare.sh [EPOCHS] [ROUNDS]     (needs scripts/pyref.sh's build/pyref and python3-torch)
#   MODELS=wide bench/e2e/compare.sh 3 2       (only the large MLP)
#   MODELS=cnn bench/e2e/compare.sh 2 2        (projects/fashion-cnn.json; MODELS="default wide cnn" for all)
#   RUNNERS="ml1 ml2 tf tfm" bench/e2e/compare.sh 3 3   (a subset of the runners)
# Runners: tf / tfb: Keras fit on one device, float32 / mixed_bfloat16, with the thread settings
# (intra/inter-op threads, XLA) that a short tuning pass before the rounds found fastest for that
# model (TF_TUNE=0: intra 2, inter 1; TF_TUNE_STEPS: steps per candidate, default 150); tfm / tfmb:
# the same under MirroredStrategy over 2 logical CPU devices (tf_bench.py; oneDNN on, TensorFlow's
# default). ml1 / ml2 / ml2s / ml1c: Mirrorlab cpu:1 x 2 threads, cpu:2, cpu:2 --shard-optimizer,
# cpu:1 x 1 thread; ml1b / ml2b: mixed_bfloat16. torch / ddp / torchb: Debian's PyTorch 1.13
# (OpenBLAS OpenMP build, generic BLAS, no oneDNN): 1 process x 2 threads, DDP gloo 2 x 1, autocast
# bfloat16.
# The runners are interleaved in ROUNDS rounds (default 3), in a different order each round, each
# round also measuring the sgemm 2048^3 peak on 1 and 2 threads; every figure is the median over the
# rounds (each round's value the median of its epochs after the first), with the spread (min-max)
# beside it, and the load (the 1-minute load after each runner, and a fixed loop's time at the start
# and end of each round). With the wide MLP each round also runs bench_step's BM_ReplicaProducts
# (the bound the step's products set on cpu:2 against cpu:1 on one core).
set -euo pipefail
cd "$(dirname "$0")/../.."
# Some machines here pin OpenBLAS to its Haswell (AVX2) kernels through these two variables; the
# comparison runs both sides on OpenBLAS' own choice for this CPU (set KEEP_OPENBLAS_ENV=1 to keep them).
if [ "${KEEP_OPENBLAS_ENV:-0}" != 1 ]; then unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; fi
EPOCHS=${1:-4}
ROUNDS=${2:-3}
scripts/deps.sh python3-torch libopenblas0-openmp >/dev/null
PYREF=${MIRRORLAB_PYREF_PYTHON:-build/pyref/bin/python}
[ -x "$PYREF" ] || { echo "compare.sh: no TensorFlow environment at $PYREF: run scripts/pyref.sh" >&2; exit 2; }
[ "${NO_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
CLI=build/app/mirrorlab-cli
OUT=$(mktemp -d)
OMP_BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp
median() { python3 -c 'import json,sys; v=sorted(json.load(open(sys.argv[1]))[sys.argv[2]]); v=v[1:] if len(v)>2 else v; print(v[len(v)//2])' "$@"; }
ml_epoch() { # project devices threads tag [extra CLI arguments]
  "$CLI" train "$1" --epochs "$EPOCHS" --devices "$2" --threads-per-device "$3" --quiet --no-record --report "$OUT/$4.json" "${@:5}"
  python3 -c 'import json,sys; e=[x["seconds"] for x in json.load(open(sys.argv[1]))["epochs"]]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2])' "$OUT/$4.json"
}
ml_sync() { python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epochs"][-1]; print(e["allreduce_share"]+e["wait_share"])' "$OUT/$1.json"; }
torch_epoch() { # tag args...
  local tag=$1; shift
  LD_LIBRARY_PATH=$OMP_BLAS OMP_NUM_THREADS=${THREADS:-2} /usr/bin/python3 bench/e2e/torch_mlp.py --epochs "$EPOCHS" "$@" > "$OUT/$tag.json"
  python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epoch_seconds"]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2])' "$OUT/$tag.json"
}
# TensorFlow: tf_bench.py with the thread settings tuned for this runner and model.
tf_args() { # runner -> tf_bench.py's device and precision arguments
  case $1 in tf) ;; tfm) echo --devices 2 ;; tfb) echo --precision mixed_bfloat16 ;; tfmb) echo --devices 2 --precision mixed_bfloat16 ;; esac
}
tf_tune() { # runner model args...
  local r=$1 m=$2; shift 2
  mkdir -p "$OUT/tune"
  if [ "${TF_TUNE:-1}" = 1 ]; then
    "$PYREF" bench/e2e/tf_bench.py --tune --tune-steps "${TF_TUNE_STEPS:-150}" "$@" $(tf_args "$r") > "$OUT/tune/$r-$m.json"
  else
    echo '{"best": {"intra": 2, "inter": 1, "jit": false}, "ms_per_step": {}}' > "$OUT/tune/$r-$m.json"
  fi
}
tf_epoch() { # runner model tag args...
  local r=$1 m=$2 tag=$3; shift 3
  local best; best=$(python3 -c 'import json,sys; b=json.load(open(sys.argv[1]))["best"]; print("--intra %d --inter %d%s" % (b["intra"], b["inter"], " --jit" if b["jit"] else ""))' "$OUT/tune/$r-$m.json")
  # shellcheck disable=SC2046
  "$PYREF" bench/e2e/tf_bench.py --epochs "$EPOCHS" "$@" $(tf_args "$r") $best > "$OUT/$tag.json"
  python3 -c 'import json,sys; e=json.load(open(sys.argv[1]))["epoch_seconds"]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2])' "$OUT/$tag.json"
}
measure_peak() { build/bench/kernels/bench_kernels --benchmark_filter="${2:-BM_Sgemm}/2048/${1:-2}(/real_time)?\$" --benchmark_format=json --benchmark_repetitions=3 \
  --benchmark_report_aggregates_only=true 2>/dev/null | python3 -c 'import json,sys; b=[x for x in json.load(sys.stdin)["benchmarks"] if x.get("aggregate_name")=="median"][0]; print(b["GFLOP/s"]/1e9)'; }
# The bound the wide MLP's own products set (bench_step's BM_ReplicaProducts): one line per variant,
# "replicas adam milliseconds" (medians of 3).
measure_products() { build/bench/kernels/bench_step --benchmark_filter='BM_ReplicaProducts/replicas:[12]/batch:256' --benchmark_format=json \
  --benchmark_repetitions=3 --benchmark_report_aggregates_only=true 2>/dev/null | python3 -c '
import json, re, sys
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("aggregate_name") != "median": continue
    m = re.search(r"replicas:(\d+)/batch:256/adam:(\d)", b["name"])
    print(m.group(1), m.group(2), b["real_time"] / 1e6)'; }
# The machine's load as a time: a fixed loop (10^7 additions in Python) on each of the 2 cores at
# once, the slower copy's milliseconds. Against the fastest round (or a quiet machine's figure) it
# says how much of the cores the runners could have had; load1 alone lags by a minute.
# Each copy writes its own file: two copies printing into one pipe can run their lines together.
calibrate() { for c in 1 2; do python3 -c 'import time; t=time.perf_counter(); s=0
for i in range(10**7): s+=i
print((time.perf_counter()-t)*1e3)' > "$OUT/calib.$c" & done; wait; sort -n "$OUT/calib.1" "$OUT/calib.2" | tail -1; }
# One line per (round, key, value) in $OUT/rounds.txt; summarised at the end.
rec() { echo "$1 $2 $3" >> "$OUT/rounds.txt"; }
RUNNERS=${RUNNERS:-tf tfm tfb tfmb ml1 ml2 ml2s ml1c ml1b ml2b torch ddp torchb}
model_args() { # model -> "project|bench arguments"
  case $1 in
    default) echo "projects/fashion-mlp.json|--hidden 128 --batch 128" ;;
    cnn) echo "projects/fashion-cnn.json|--cnn --batch 64" ;;
    *) echo "bench/e2e/wide-mlp.json|--hidden 512 512 --batch 256" ;;
  esac
}
# TensorFlow's thread settings: a short tuning pass per runner and model, before the rounds.
for m in ${MODELS:-default wide}; do
  IFS='|' read -r proj a <<< "$(model_args $m)"
  for r in $RUNNERS; do case $r in tf|tfm|tfb|tfmb) tf_tune $r $m $a ;; esac; done
done
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  rec "$round" load1 "$(cut -d' ' -f1 /proc/loadavg)"
  rec "$round" calib "$(calibrate)"
  rec "$round" peak2 "$(measure_peak 2)"
  rec "$round" peak1 "$(measure_peak 1)"
  # oneDNN's matmul (Dense's kernel wherever it has its blocked kernel, except OpenBLAS' AVX-512 kernels on AMD CPUs).
  dnn2=$(measure_peak 2 BM_OneDnnMatmul || true) dnn1=$(measure_peak 1 BM_OneDnnMatmul || true)
  if [ -n "$dnn2" ] && [ -n "$dnn1" ]; then rec "$round" dnnpeak2 "$dnn2"; rec "$round" dnnpeak1 "$dnn1"; fi
  case " ${MODELS:-default wide} " in *" wide "*) measure_products | while read -r reps adam ms; do rec "$round" "prod$reps$adam" "$ms"; done ;; esac
  for m in ${MODELS:-default wide}; do
    IFS='|' read -r proj a <<< "$(model_args $m)"
    read -r -a args <<< "$a"
    # A different order each round, so no runner always follows the same neighbour.
    order=$(echo $RUNNERS | tr ' ' '\n' | python3 -c "import sys,random; r=[l.strip() for l in sys.stdin]; random.Random($round).shuffle(r); print(' '.join(r))")
    for r in $order; do
      case $r in
        torch) v=$(THREADS=2 torch_epoch torch-$m-$round "${args[@]}" --threads 2) ;;
        ddp) v=$(THREADS=1 torch_epoch ddp-$m-$round "${args[@]}" --threads 1 --ddp 2) ;;
        ml1) v=$(ml_epoch $proj cpu:1 2 ml1-$m-$round) ;;
        ml2) v=$(ml_epoch $proj cpu:2 1 ml2-$m-$round) ;;
        ml2s) v=$(ml_epoch $proj cpu:2 1 ml2s-$m-$round --shard-optimizer) ;;
        ml1c) v=$(ml_epoch $proj cpu:1 1 ml1c-$m-$round) ;;
        ml1b) v=$(ml_epoch $proj cpu:1 2 ml1b-$m-$round --precision mixed_bfloat16) ;;
        ml2b) v=$(ml_epoch $proj cpu:2 1 ml2b-$m-$round --precision mixed_bfloat16) ;;
        torchb) v=$(THREADS=2 torch_epoch torchb-$m-$round "${args[@]}" --threads 2 --autocast) ;;
        tf|tfm|tfb|tfmb) v=$(tf_epoch $r $m $r-$m-$round "${args[@]}") ;;
      esac
      rec "$round" "$r-$m" "$v"
      rec "$round" "load-$r-$m" "$(cut -d' ' -f1 /proc/loadavg)"
    done
  done
  rec "$round" calibend "$(calibrate)"
  echo "round $round done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"

bench/e2e/summarize.py "$OUT/rounds.txt" "$OUT/tune"
echo "raw reports: $OUT"
