#!/usr/bin/env bash
# End-to-end: seconds per epoch of Mirrorlab and PyTorch side by side, in one run, on the same
# data, model, initialisation scheme, optimizer, batch and epochs; prints ratios and GFLOP/s
# against the 2-thread peaks measured in the same run: OpenBLAS' sgemm and oneDNN's matmul.
#   bench/e2e/compare.sh [EPOCHS] [ROUNDS]     (needs python3-torch: scripts/deps.sh python3-torch)
#   MODELS=wide bench/e2e/compare.sh 3 2       (only the large MLP)
#   MODELS=cnn bench/e2e/compare.sh 2 2        (projects/fashion-cnn.json; MODELS="default wide cnn" for all)
# mixed_bfloat16 runs beside float32 on cpu:1 x 2 threads (ml1b) and cpu:2 (ml2b), and PyTorch's
# autocast(bfloat16) beside its float32 (torchb): the ratios are printed per model.
#   RUNNERS="ml1 ml1b torch torchb" bench/e2e/compare.sh 3 3   (a subset of the runners)
# The runners are interleaved in ROUNDS rounds (default 3), each round also measuring the sgemm
# 2048^3 peak on 1 and 2 threads; every figure is the median over the rounds (each round's value
# the median of its epochs after the first), with the spread (min-max) beside it, and the load.
# With the wide MLP each round also runs bench_step's BM_ReplicaProducts: the step's products alone,
# and with the sharded Adam, for 1 replica at 256 and 2 at 128 on their own cores at once, and for
# the 2 replicas with the bytes that must cross between them crossing too (the fused exchange); the
# bound they set on "cpu:2 vs cpu:1 on one core" and on the step's share of the peak is printed
# beside the figures (RUNNERS without torch print "-" for the ratio to PyTorch).
# PyTorch runs on Debian's OpenBLAS OpenMP build (its best here); Mirrorlab on the pthread build
# with explicit thread counts. Medians over the epochs after the first.
set -euo pipefail
cd "$(dirname "$0")/../.."
# Some machines here pin OpenBLAS to its Haswell (AVX2) kernels through these two variables; the
# comparison runs both sides on OpenBLAS' own choice for this CPU (set KEEP_OPENBLAS_ENV=1 to keep them).
if [ "${KEEP_OPENBLAS_ENV:-0}" != 1 ]; then unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; fi
EPOCHS=${1:-4}
ROUNDS=${2:-3}
scripts/deps.sh python3-torch libopenblas0-openmp >/dev/null
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
gflop() { python3 -c "
import sys; sizes=[int(s) for s in sys.argv[1].split('-')]; n=60000
f=sum(2*n*a*b for a,b in zip(sizes,sizes[1:])); print((3*f-2*n*sizes[0]*sizes[1])/1e9)" "$1"; }

# One line per (round, key, value) in $OUT/rounds.txt; summarised at the end.
rec() { echo "$1 $2 $3" >> "$OUT/rounds.txt"; }
RUNNERS=${RUNNERS:-torch ddp ml1 ml2 ml2s ml1c ml1b ml2b torchb}
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  rec "$round" load1 "$(cut -d' ' -f1 /proc/loadavg)"
  rec "$round" peak2 "$(measure_peak 2)"
  rec "$round" peak1 "$(measure_peak 1)"
  # oneDNN's matmul (Dense's kernel wherever it has its blocked kernel, except OpenBLAS' AVX-512 kernels on AMD CPUs).
  dnn2=$(measure_peak 2 BM_OneDnnMatmul || true) dnn1=$(measure_peak 1 BM_OneDnnMatmul || true)
  if [ -n "$dnn2" ] && [ -n "$dnn1" ]; then rec "$round" dnnpeak2 "$dnn2"; rec "$round" dnnpeak1 "$dnn1"; fi
  case " ${MODELS:-default wide} " in *" wide "*) measure_products | while read -r reps adam ms; do rec "$round" "prod$reps$adam" "$ms"; done ;; esac
  for m in ${MODELS:-default wide}; do
    if [ $m = default ]; then proj=projects/fashion-mlp.json; args=(--hidden 128 --batch 128)
    elif [ $m = cnn ]; then proj=projects/fashion-cnn.json; args=(--cnn --batch 64)
    else proj=bench/e2e/wide-mlp.json; args=(--hidden 512 512 --batch 256); fi
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
      esac
      rec "$round" "$r-$m" "$v"
    done
  done
  echo "round $round done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"

# The CNN's training work per epoch: 3 x 2 FLOPs per multiply-add of forward (forward, the input
# gradient, the weight gradient), less the first convolution's input gradient, which nobody computes.
cnn_gflop() { python3 -c "
macs = [26*26*9*32, 11*11*9*32*64, 1600*128, 128*10]; n = 60000
print((6*sum(macs) - 2*macs[0]) * n / 1e9)"; }
python3 - "$OUT/rounds.txt" "$(gflop 784-128-10)" "$(gflop 784-512-512-10)" "$(cnn_gflop)" <<'PY'
import sys, statistics as st
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    r, k, x = line.split(); v[k].append(float(x))
work = {"default": float(sys.argv[2]), "wide": float(sys.argv[3]), "cnn": float(sys.argv[4])}
med = lambda k: st.median(v[k])
spread = lambda k: "%.3g-%.3g" % (min(v[k]), max(v[k]))
p2, p1 = med("peak2"), med("peak1")
print("rounds: %d; load (1-min) per round: %s" % (len(v["peak2"]), " ".join("%.1f" % x for x in v["load1"])))
print("sgemm 2048^3 peak: 2 threads %.0f GFLOP/s (%s), 1 thread %.0f (%s); 2/1 ratio %.2f" % (p2, spread("peak2"), p1, spread("peak1"), p2 / p1))
d2 = med("dnnpeak2") if v.get("dnnpeak2") else None
if d2:
    d1 = med("dnnpeak1")
    print("oneDNN matmul 2048^3 peak: 2 threads %.0f GFLOP/s (%s), 1 thread %.0f (%s); 2/1 ratio %.2f" % (d2, spread("dnnpeak2"), d1, spread("dnnpeak1"), d2 / d1))
    print("'of peak' is against the sgemm's 2-thread peak; 'of best' against the better of the two 2-thread peaks (%.0f)" % max(p2, d2))
best = max(p2, d2) if d2 else p2
names = {"torch": "pytorch 1 process x 2 threads", "ddp": "pytorch DDP gloo 2 proc x 1 thread", "ml1": "mirrorlab cpu:1 x 2 threads",
         "ml2": "mirrorlab cpu:2 (1 core each)", "ml2s": "mirrorlab cpu:2 --shard-optimizer", "ml1c": "mirrorlab cpu:1 x 1 thread",
         "ml1b": "mirrorlab cpu:1 x 2 mixed_bfloat16", "ml2b": "mirrorlab cpu:2 mixed_bfloat16",
         "torchb": "pytorch 1 x 2 autocast bfloat16"}
print("\n%-20s %-36s %9s %15s %9s %8s %8s %8s" % ("model", "runner", "s/epoch", "spread", "vs torch", "GFLOP/s", "of peak", "of best"))
for m, label in (("default", "784-128-10 b128"), ("wide", "784-512-512-10 b256"), ("cnn", "fashion-cnn b64")):
    if not any(k.endswith("-" + m) for k in v): continue  # MODELS left it out
    t = med("torch-" + m) if v.get("torch-" + m) else None  # RUNNERS may leave PyTorch out
    has = lambda r: bool(v.get(r + "-" + m))
    for r in ("torch", "ddp", "ml1", "ml2", "ml2s", "ml1c", "ml1b", "ml2b", "torchb"):
        if not has(r): continue
        k = r + "-" + m; x = med(k)
        vs = "%8.2fx" % (t / x) if t else "%9s" % "-"
        print("%-20s %-36s %9.3f %15s %s %8.0f %7.0f%% %7.0f%%" % (label, names[r], x, spread(k), vs, work[m] / x, 100 * work[m] / x / p2, 100 * work[m] / x / best))
        label = ""
    if m == "wide" and v.get("prod10") and v.get("prod21"):
        # The bound the products set (bench_step's BM_ReplicaProducts, in the same rounds): the same
        # step's eight products for 1 replica at 256 and for 2 at 128 on their own cores at once,
        # alone and with Adam over each replica's half of the parameters (the sharded update).
        b0, b1 = med("prod10") / med("prod20"), med("prod11") / med("prod21")
        print("    the bound the products set: cpu:2 vs cpu:1 on one core at most %.2fx with nothing but the products (%.0f%% of the"
              " sgemm 2/1 ratio), %.2fx with them and the sharded Adam (%.0f%%); the step at most %.0f%% and %.0f%% of the peak" %
              (b0, 100 * b0 / (p2 / p1), b1, 100 * b1 / (p2 / p1), 100 * work[m] * 256 / 60000 / med("prod20") * 1e3 / p2,
               100 * work[m] * 256 / 60000 / med("prod21") * 1e3 / p2))
        if v.get("prod22"):
            b2 = med("prod11") / med("prod22")
            print("    ... and %.2fx (%.0f%% of the ratio) once the bytes that must cross between the cores cross too (each replica"
                  " reads the other's gradient over its half and writes its updated half into the other's weights); the step"
                  " at most %.0f%% of the peak" % (b2, 100 * b2 / (p2 / p1), 100 * work[m] * 256 / 60000 / med("prod22") * 1e3 / p2))
    if has("ml1c") and has("ml2") and has("ml2s"):
        s21 = med("ml1c-" + m) / med("ml2-" + m)
        s21s = med("ml1c-" + m) / med("ml2s-" + m)
        print("    cpu:2 vs cpu:1 on one core: %.2fx (sharded %.2fx) against the sgemm 2/1 ratio %.2f: %.0f%% of it (sharded %.0f%%)" %
              (s21, s21s, p2 / p1, 100 * s21 / (p2 / p1), 100 * s21s / (p2 / p1)))
        if d2:
            print("    ... and against oneDNN's 2/1 ratio %.2f: %.0f%% of it" % (d2 / med("dnnpeak1"), 100 * s21 / (d2 / med("dnnpeak1"))))
    for f32, bf, what in (("ml1", "ml1b", "mirrorlab cpu:1 x 2"), ("ml2", "ml2b", "mirrorlab cpu:2"), ("torch", "torchb", "pytorch 1 x 2")):
        if has(f32) and has(bf):
            print("    bfloat16 vs float32, %s: %.2fx (above 1: bfloat16 faster)" % (what, med(f32 + "-" + m) / med(bf + "-" + m)))
    if has("ml1b") and has("torchb"):
        print("    mirrorlab cpu:1 x 2 mixed_bfloat16 vs pytorch autocast: %.2fx" % (med("torchb-" + m) / med("ml1b-" + m)))
PY
echo "raw reports: $OUT"
