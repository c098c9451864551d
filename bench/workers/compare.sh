#!/usr/bin/env bash
# Several workers, end to end, side by side in one run on Fashion-MNIST (issue 17's benchmark):
#   mpi      mirrorlab-cli --workers 2 --devices cpu:1   (2 processes x 1 replica, MPI all-reduce)
#   threads  mirrorlab-cli --devices cpu:2               (1 process x 2 replicas, in-process ring)
#   ddp      PyTorch DistributedDataParallel, gloo, 2 processes x 1 thread (bench/e2e/torch_mlp.py)
# for the Keras-tutorial MLP (784-128-10, batch 128) and the large one (784-512-512-10, batch
# 256). Prints seconds per epoch (median of the epochs after the first, then the median over the
# rounds, spread beside it), the sync share (all-reduce incl. the MPI hop + waiting), the
# all-reduce time per step, and the ratios mpi/ddp (goal: 2x or more) and mpi/threads.
#   bench/workers/compare.sh [EPOCHS] [ROUNDS]      (default 3 epochs, 2 rounds; a few minutes)
# First, bench_workers_allreduce: the all-reduce alone at 8 B, 64 KiB and the large MLP's 2.7 MB.
set -euo pipefail
cd "$(dirname "$0")/../.."
if [ "${KEEP_OPENBLAS_ENV:-0}" != 1 ]; then unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; fi
EPOCHS=${1:-3}
ROUNDS=${2:-2}
scripts/deps.sh python3-torch libopenblas0-openmp >/dev/null
[ "${NO_BUILD:-0}" = 1 ] || scripts/build.sh >/dev/null
CLI=build/app/mirrorlab-cli
OUT=$(mktemp -d)
PY=/usr/bin/python3
OMP_BLAS=/usr/lib/x86_64-linux-gnu/openblas-openmp

# ml TAG PROJECT ARGS...: median epoch seconds, sync share, all-reduce ms per step
ml() {
  local tag=$1 proj=$2; shift 2
  "$CLI" train "$proj" --epochs "$EPOCHS" --threads-per-device 1 --quiet --no-record --report "$OUT/$tag.json" "$@" >/dev/null
  $PY - "$OUT/$tag.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
e = r["epochs"][1:] if len(r["epochs"]) > 2 else r["epochs"]
secs = sorted(x["seconds"] for x in e)
mid = secs[len(secs) // 2]
sync = sorted(x["allreduce_share"] + x["wait_share"] for x in e)[len(e) // 2]
steps = len(r["step_loss"]) / len(r["epochs"])
ar = sorted(x["allreduce_share"] * x["seconds"] / steps * 1e3 for x in e)[len(e) // 2]
print(mid, sync, ar)
PY
}
ddp() { # TAG ARGS...: median epoch seconds
  local tag=$1; shift
  LD_LIBRARY_PATH=$OMP_BLAS OMP_NUM_THREADS=1 $PY bench/e2e/torch_mlp.py --epochs "$EPOCHS" --threads 1 --ddp 2 "$@" > "$OUT/$tag.json"
  $PY -c 'import json,sys; e=json.load(open(sys.argv[1]))["epoch_seconds"]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2], 0, 0)' "$OUT/$tag.json"
}
rec() { echo "$1 $2 $3 $4 $5" >> "$OUT/rounds.txt"; }
echo "== the all-reduce alone: MPI (2 processes) against the in-process ring (2 threads)"
root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
MIRRORLAB_MPI_PLUGIN=$PWD/build/app/libmirrorlab_mpi.so mpirun "${root[@]}" --bind-to none -x MIRRORLAB_MPI_PLUGIN -np 2 \
  build/bench/workers/bench_workers_allreduce 50
echo "== end to end"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg); $(nproc) cores; $(mpirun --version | head -1)"
for round in $(seq 1 "$ROUNDS"); do
  for m in default wide; do
    if [ $m = default ]; then proj=projects/fashion-mlp.json; args=(--hidden 128 --batch 128)
    else proj=bench/e2e/wide-mlp.json; args=(--hidden 512 512 --batch 256); fi
    order=$(echo "mpi threads ddp" | tr ' ' '\n' | $PY -c "import sys,random; r=[l.strip() for l in sys.stdin]; random.Random($round).shuffle(r); print(' '.join(r))")
    for r in $order; do
      case $r in
        mpi) v=$(ml mpi-$m-$round $proj --workers 2 --devices cpu:1) ;;
        threads) v=$(ml threads-$m-$round $proj --devices cpu:2) ;;
        ddp) v=$(ddp ddp-$m-$round "${args[@]}") ;;
      esac
      rec "$round" "$r-$m" $v
    done
  done
  echo "round $round done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
$PY - "$OUT/rounds.txt" <<'PY'
import sys, statistics as st
from collections import defaultdict
v = defaultdict(list)
for line in open(sys.argv[1]):
    r, k, s, sync, ar = line.split(); v[k].append((float(s), float(sync), float(ar)))
med = lambda k, i: st.median(x[i] for x in v[k])
spread = lambda k: "%.3g-%.3g" % (min(x[0] for x in v[k]), max(x[0] for x in v[k]))
names = {"mpi": "mirrorlab 2 workers x cpu:1 (MPI)", "threads": "mirrorlab 1 worker x cpu:2 (ring)",
         "ddp": "pytorch DDP gloo 2 proc x 1 thread"}
print("\n%-20s %-36s %9s %13s %10s %14s" % ("model", "runner", "s/epoch", "spread", "sync", "all-reduce/step"))
for m, label in (("default", "784-128-10 b128"), ("wide", "784-512-512-10 b256")):
    for r in ("mpi", "threads", "ddp"):
        k = r + "-" + m
        sync = "%.1f%%" % (100 * med(k, 1)) if r != "ddp" else "-"
        ar = "%.3f ms" % med(k, 2) if r != "ddp" else "-"
        print("%-20s %-36s %9.3f %13s %10s %14s" % (label, names[r], med(k, 0), spread(k), sync, ar))
        label = ""
    print("    mpi vs pytorch DDP: %.2fx faster (goal 2x); mpi vs in-process ring: %.2fx" %
          (med("ddp-" + m, 0) / med("mpi-" + m, 0), med("threads-" + m, 0) / med("mpi-" + m, 0)))
PY
echo "raw reports: $OUT"
