#!/usr/bin/env bash
# Multi-worker runs across hosts made of network namespaces (scripts/cluster.sh; root), two parts:
#   links     the cross-host all-reduce of one step's gradients (wide MLP, CNN) on 2 and 4 hosts with
#             links shaped to 0.5-25 Gbit/s and unshaped, in ROUNDS interleaved rounds, beside the
#             ring bound (with the measured latency of the path) and the what-if model before and
#             after calibration; the calibration is fitted on 0.5, 2 and 10 Gbit/s and unshaped and
#             checked on the held-out 1, 5 and 25 Gbit/s
#   examples  samples/s and the sync share of the shipped examples on 1, 2 and 4 hosts (one worker
#             of cpu:1 each) at 10 Gbit/s and unshaped, STEPS steps each
#   bench/workers/cluster.sh [links|examples|all] [ROUNDS] [STEPS]    (default: all 3 40)
# Every host shares this machine's cores: on a 2-vCPU VM the hosts compete for CPU, which bounds
# the unshaped rates and the 4-host rows (stated beside the tables in bench/RESULTS.md).
set -euo pipefail
cd "$(dirname "$0")/../.."
WHAT=${1:-all}
ROUNDS=${2:-3}
STEPS=${3:-40}
if [ "${KEEP_OPENBLAS_ENV:-0}" != 1 ]; then unset OPENBLAS_CORETYPE OPENBLAS_L2_SIZE; fi
[ "${NO_BUILD:-0}" = 1 ] || cmake --build build --target mirrorlab-cli mirrorlab_mpi bench_workers_crosshost >/dev/null
export MIRRORLAB_CLUSTER=mlbench
CLUSTER=scripts/cluster.sh
OUT=$(mktemp -d)
trap '"$CLUSTER" down >/dev/null 2>&1 || true' EXIT
"$CLUSTER" down >/dev/null 2>&1 || true
"$CLUSTER" up 4 >/dev/null
eval "$("$CLUSTER" env)"
export MIRRORLAB_MPI_PLUGIN=$PWD/build/app/libmirrorlab_mpi.so
B=$PWD/build/bench/workers/bench_workers_crosshost
CLI=$PWD/build/app/mirrorlab-cli
echo "$(date -u +%F) on $(nproc) cores ($(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')); $(mpirun --version | head -1)"
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"

links() {
  local rates=(500mbit 1gbit 2gbit 5gbit 10gbit 25gbit none)
  for round in $(seq 1 "$ROUNDS"); do
    # A different order every round, so that a slow minute of this shared machine lands on
    # different settings.
    for rate in $(printf '%s\n' "${rates[@]}" | /usr/bin/python3 -c "import sys,random; r=sys.stdin.read().split(); random.Random($round).shuffle(r); print(' '.join(r))"); do
      "$CLUSTER" shape --rate "$rate" >/dev/null
      local bits=0
      [ "$rate" = none ] || bits=$(/usr/bin/python3 -c "import sys; t=sys.argv[1]; print(int(float(t[:-4]) * (1e9 if t.endswith('gbit') else 1e6)))" "$rate")
      for model in wide cnn; do
        local proj=projects/fashion-wide-mlp.json
        [ $model = cnn ] && proj=projects/fashion-cnn.json
        for hosts in 2 4; do
          line=$("$CLUSTER" mpirun -np "$hosts" -x MIRRORLAB_MPI_PLUGIN --bind-to none "$B" measure "$PWD/$proj" 30 2>/dev/null | tail -1)
          read -r h w bytes buckets med p10 hi smallMed smallP10 <<<"$line"
          echo "$model $h $bytes $buckets $bits $med $p10 $smallMed $smallP10" >>"$OUT/samples.txt"
        done
      done
    done
    echo "links: round $round of $ROUNDS done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
  done
  echo "== the cross-host all-reduce of one step's gradients (10th percentile of 30 repeats, median of $ROUNDS rounds)"
  "$B" fit "$OUT/samples.txt" 1gbit,5gbit,25gbit
}

examples() {
  echo "== the shipped examples, $STEPS steps, one worker of cpu:1 per host"
  echo "| example | hosts | links | samples/s | sync share | all-reduce + network ms/step |"
  echo "|---|---|---|---|---|---|"
  for proj in projects/fashion-mlp.json projects/fashion-wide-mlp.json projects/fashion-cnn.json projects/spirals.json; do
    for rate in 10gbit none; do
      "$CLUSTER" shape --rate "$rate" >/dev/null
      for hosts in 1 2 4; do
        [ "$hosts" = 1 ] && [ "$rate" = none ] && continue  # one host has no link: once is enough
        local db=$OUT/ex-$hosts.sqlite args=()
        rm -rf "$db"*
        [ "$hosts" -gt 1 ] && args=(--workers "$hosts")
        (eval "$("$CLUSTER" env)" && "$CLUSTER" run 1 "$CLI" train "$PWD/$proj" "${args[@]}" --devices cpu:1 --steps "$STEPS" \
          --threads-per-device 1 --db "$db" --quiet) >/dev/null 2>&1 || { echo "| $proj | $hosts | $rate | failed | | |"; continue; }
        /usr/bin/python3 - "$db" "$proj" "$hosts" "$rate" <<'PY'
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
# The steps after the first five (warm-up): samples/s over their time; the sync share of a step is
# the time its replicas spend in the all-reduce, on the network and waiting, over the step.
rows = c.execute("SELECT step, samples, step_time FROM steps WHERE run_id = 1 AND step > 5").fetchall()
samples = sum(r[1] for r in rows); secs = sum(r[2] for r in rows)
rep = c.execute("SELECT sum(allreduce_us + network_us + wait_us), sum(allreduce_us + network_us), count(DISTINCT replica) "
                "FROM replica_steps WHERE run_id = 1 AND step > 5").fetchone()
sync = rep[0] / 1e6 / rep[2] / secs
ar = rep[1] / 1e6 / rep[2] / len(rows) * 1e3
name = sys.argv[2].split("/")[-1].replace(".json", "")
print("| %s | %s | %s | %.0f | %.1f%% | %.2f |" % (name, sys.argv[3], "-" if sys.argv[3] == "1" else sys.argv[4], samples / secs, sync * 100, ar))
PY
      done
    done
  done
}

case $WHAT in
  links) links ;;
  examples) examples ;;
  all) links; examples ;;
  *) echo "usage: bench/workers/cluster.sh [links|examples|all] [ROUNDS] [STEPS]" >&2; exit 2 ;;
esac
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg); raw samples: $OUT"
