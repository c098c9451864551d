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

# refusedCheck WHAT HOST FIX OUT RC TOOK DB: exit 2, one error line naming HOST and FIX, in time,
# nothing stored.
refusedCheck() {
  local what=$1 host=$2 fix=$3 out=$4 rc=$5 took=$6 db=$7
  [ "$rc" = 2 ] && ok || bad "$what: exit $rc (want 2): $out"
  has "$out" "$host" && has "$out" "$fix" && ok || bad "$what: the message does not name $host and '$fix': $out"
  [ "$(grep -c "^error:" <<<"$out")" = 1 ] && ok || bad "$what: not exactly one error line: $out"
  [ "$took" -lt 90 ] && ok || bad "$what took $took s (--worker-timeout 5)"
  { [ ! -s "$db" ] || [ -z "$(runs "$db")" ]; } && ok || bad "$what stored a run: $(runs "$db")"
}
# refusedRun WHAT HOST FIX COMMAND...: COMMAND on host 1, then refusedCheck.
refusedRun() {
  local what=$1 host=$2 fix=$3 start rc
  shift 3
  start=$(date +%s)
  out=$(on 1 timeout 300 "$@" 2>&1)
  rc=$?
  refusedCheck "$what" "$host" "$fix" "$out" $rc $(($(date +%s) - start)) "$T/r.sqlite"
  [ -z "$(workersLeft)" ] || waitNoWorkers 60 && ok || bad "$what left workers running: $(workersLeft)"
}

refused() {
  "$CLUSTER" up 2 >/dev/null || { bad "cluster.sh up 2 failed"; return; }
  local h1=${MIRRORLAB_CLUSTER}1 h2=${MIRRORLAB_CLUSTER}2 args
  args=(train "$T/sp.json" --workers 2 --devices cpu:1 --db "$T/r.sqlite" --worker-timeout 5)
  # A hostfile naming a host that does not exist, then one whose link is down.
  printf '%s slots=1\n%s9 slots=1\n' "$h1" "$MIRRORLAB_CLUSTER" >"$T/hosts-typo"
  refusedRun "an unknown host" "host ${MIRRORLAB_CLUSTER}9" "remove it from the hostfile" "$CLI" "${args[@]}" --hostfile "$T/hosts-typo"
  "$CLUSTER" link 2 down
  refusedRun "an unreachable host" "host $h2" "true\` works without a password" "$CLI" "${args[@]}"
  "$CLUSTER" link 2 up
  # Another Mirrorlab on host 2 (its own build at the same path): found before mpirun starts, and
  # by the workers themselves under a plain mpirun.
  $PY -c 'import sys; b = open(sys.argv[1], "rb").read(); assert b.count(b"0.1.0\0") >= 1; open(sys.argv[2], "wb").write(b.replace(b"0.1.0\0", b"0.1.9\0"))' \
    "$CLI" "$T/other-cli"
  chmod +x "$T/other-cli"
  "$CLUSTER" overlay 2 "$T/other-cli" "$CLI"
  refusedRun "another Mirrorlab on a host" "host $h2 runs mirrorlab-cli 0.1.9" "install the same Mirrorlab on every host" \
    "$CLI" "${args[@]}"
  refusedRun "another Mirrorlab under mpirun" "worker 2 of 2 on host $h2 runs mirrorlab-cli 0.1.9" \
    "install the same Mirrorlab on every host" mpirun --allow-run-as-root -np 2 "$CLI" train "$T/sp.json" --devices cpu:1 \
    --db "$T/r.sqlite" --worker-timeout 5
  "$CLUSTER" overlay 2 --clear
  # Another project file at the same path on host 2.
  sed 's/"learning_rate": 0.01/"learning_rate": 0.02/' "$T/sp.json" >"$T/sp-other.json"
  "$CLUSTER" overlay 2 "$T/sp-other.json" "$T/sp.json"
  refusedRun "another project on a host" "worker 2 of 2 on host $h2 read another project from $T/sp.json" \
    "copy $T/sp.json from ${MIRRORLAB_CLUSTER}1 to the same path on $h2" "$CLI" "${args[@]}"
  "$CLUSTER" overlay 2 --clear
  # Open MPI's TCP ports (20000-20999 on this cluster) blocked on host 2 by a firewall.
  "$CLUSTER" block 2 20000:20999
  refusedRun "blocked ports" "cannot reach worker 2 of 2 on host $h2" "Open the TCP ports" "$CLI" "${args[@]}"
  "$CLUSTER" unblock 2
  # Unblocked, the same command trains: the refusals above were the hosts', not the command's.
  out=$(on 1 "$CLI" train "$T/sp.json" --workers 2 --devices cpu:1 --no-record --quiet --worker-timeout 5 2>&1) && ok ||
    bad "after the refusals, the cluster does not train: $out"
}

# A 20-epoch run (200 steps) on 2 hosts in the background, recorded in DB: its subshell in $bg.
# The links run at 200 Mbit/s (40 ms a step for the 1 MB of gradients, 7 s for the 175 steps after
# step 25): the fault lands mid-run however slowly this script is scheduled; no timing is asserted.
startLong() {
  local db=$1
  shift
  rm -f "$T/bg.rc"
  "$CLUSTER" shape --rate 200mbit >/dev/null
  start=$(date +%s)
  (
    on 1 timeout 300 "$CLI" train "$T/long.json" --workers 2 --devices cpu:1 --db "$db" --worker-timeout 3 --quiet "$@" \
      >"$T/bg.out" 2>&1
    echo $? >"$T/bg.rc"
  ) &
  bg=$!
}
stepRows() { $PY -c 'import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute("SELECT count(*) FROM steps").fetchone()[0])' "$1" 2>/dev/null || echo 0; }
waitRows() { # DB N: true once the store holds N step rows (a bound on a hang, not a timing)
  local i
  for ((i = 0; i < 1200; i++)); do
    [ "$(stepRows "$1")" -ge "$2" ] && return 0
    [ -f "$T/bg.rc" ] && return 1
    sleep 0.1
  done
  return 1
}
finishLong() {
  wait "$bg"
  rc=$(cat "$T/bg.rc" 2>/dev/null || echo none)
  out=$(cat "$T/bg.out")
  took=$(($(date +%s) - start))
}
# faultCheck WHAT DB TEXT: failed (exit 1) within the bound, naming worker 2 and its host and TEXT,
# stored failed with one row per step it counts, and no worker left on any host.
faultCheck() {
  local what=$1 db=$2 text=$3
  [ "$rc" = 1 ] && ok || bad "$what: exit $rc (want 1): $out"
  has "$out" "worker 2 of 2 on host ${MIRRORLAB_CLUSTER}2" && has "$out" "$text" && ok ||
    bad "$what: the message does not name worker 2, its host and '$text': $out"
  # --worker-timeout 3: the documented bound is the timeout and about 15 s more; 90 s only bounds a hang.
  [ "$took" -lt 90 ] && ok || bad "$what took $took s to end"
  local r
  r=$(runs "$db")
  read -r id status steps rows _ <<<"$r"
  [ "$id" = 1 ] && [ "$status" = failed ] && [ "$steps" = "$rows" ] && [ "$rows" -ge 20 ] && ok ||
    bad "$what: the store holds: $r (want run 1 failed, its steps equal to its step rows)"
  waitNoWorkers 60 && ok || bad "$what: workers still running a minute later: $(workersLeft)"
}

faults() {
  "$CLUSTER" up 2 >/dev/null || { bad "cluster.sh up 2 failed"; return; }
  # 20 epochs of 10 steps, and 1 MB of gradients a step (2-512-512-3): on a link that drops 30% of
  # its packets one step's all-reduce then takes far longer than --worker-timeout.
  sed 's/"epochs": 2/"epochs": 20/; s/"units": 24, "activation": "tanh"}/"units": 512, "activation": "tanh"}, {"type": "Dense", "units": 512, "activation": "relu"}/; s/"bucket_bytes": 256/"bucket_bytes": 262144/' \
    "$T/sp.json" >"$T/long.json"
  local h2=${MIRRORLAB_CLUSTER}2
  # The uninterrupted run a resumed one must equal, bit for bit.
  out=$(on 1 timeout 300 "$CLI" train "$T/long.json" --workers 2 --devices cpu:1 --no-record --quiet \
    --save-weights "$T/whole.npz" 2>&1) || bad "the uninterrupted 2-host run failed: $out"

  # Host 2's link cut mid-run: worker 1 names it once --worker-timeout passes.
  startLong "$T/cut.sqlite"
  waitRows "$T/cut.sqlite" 25 || bad "the run to cut did not get going: $(cat "$T/bg.out")"
  "$CLUSTER" link 2 down
  finishLong
  faultCheck "a cut link" "$T/cut.sqlite" "stopped answering"
  "$CLUSTER" link 2 up
  "$CLUSTER" shape --rate none >/dev/null
  # The failed run resumes on both hosts from its last checkpoint, to the uninterrupted weights.
  out=$(on 1 timeout 300 "$CLI" train --resume 1 --db "$T/cut.sqlite" --worker-timeout 3 --save-weights "$T/resumed.npz" 2>&1)
  rc=$?
  [ $rc -eq 0 ] && ok || bad "the resumed run exited $rc: $out"
  has "$out" "resuming run 1 from" && has "$out" "2 replicas in all on 2 hosts" && ok || bad "the resume did not restart both hosts: $out"
  cmp -s "$T/resumed.npz" "$T/whole.npz" && ok || bad "the resumed run's weights differ from the uninterrupted run's"
  [ "$(runs "$T/cut.sqlite" | cut -d' ' -f1-4)" = "1 finished 200 200" ] && ok || bad "the store after the resume: $(runs "$T/cut.sqlite")"

  # A worker on host 2 killed (SIGKILL) mid-run.
  startLong "$T/kill.sqlite"
  waitRows "$T/kill.sqlite" 25 || bad "the run to kill did not get going: $(cat "$T/bg.out")"
  victim=$(workersLeft | awk -v h="$h2" '$1 == h {print $2}')
  [ -n "$victim" ] && kill -9 $victim
  finishLong
  faultCheck "a killed worker" "$T/kill.sqlite" "stopped answering"

  # Worker 1 itself killed (as Open MPI may stop it when a peer's connection breaks mid-send): the
  # process that started mpirun, on the same host, stores the run failed and says which to resume.
  startLong "$T/lead.sqlite"
  waitRows "$T/lead.sqlite" 25 || bad "the run whose worker 1 is killed did not get going: $(cat "$T/bg.out")"
  local mpirunPid lead
  mpirunPid=$("$CLUSTER" pids 1 | awk '$3 == "mpirun" {print $2}')
  lead=$(pgrep -P "$mpirunPid" | head -1)
  [ -n "$lead" ] && kill -9 "$lead"
  finishLong
  [ "$rc" = 1 ] && has "$out" "worker 1 of 2 on host ${MIRRORLAB_CLUSTER}1 ended before it recorded" &&
    has "$out" "worker 2 of 2 on host $h2" && has "$out" "train --resume 1" && ok || bad "worker 1 killed (exit $rc): $out"
  r=$(runs "$T/lead.sqlite")
  read -r id status steps rows _ <<<"$r"
  [ "$status" = failed ] && [ "$steps" = "$rows" ] && ok || bad "worker 1 killed: the store holds $r"
  waitNoWorkers 60 && ok || bad "worker 1 killed: workers still running a minute later: $(workersLeft)"

  # Host 2's link dropping 30% of its packets.
  startLong "$T/loss.sqlite"
  waitRows "$T/loss.sqlite" 25 || bad "the run to disturb did not get going: $(cat "$T/bg.out")"
  "$CLUSTER" shape --host 2 --loss 0.3 >/dev/null
  finishLong
  # The loss is named from this host's TCP retransmissions or the heartbeats' gaps; when the sum
  # times out before either shows (seen once under load), the message names the same connection
  # as where progress stopped. Either way: worker 2, its host, and what happened on the link.
  if has "$out" "lost"; then
    faultCheck "a lossy link" "$T/loss.sqlite" "lost"
  else
    faultCheck "a lossy link" "$T/loss.sqlite" "stopped making progress between host ${MIRRORLAB_CLUSTER}1 and"
  fi
  "$CLUSTER" shape --host 2 --loss 0 >/dev/null
}

case $MODE in
  hosts) hosts ;;
  faults) faults ;;
  refused) refused ;;
  *) echo "usage: cluster_test.sh hosts|faults|refused CLI SRC"; exit 2 ;;
esac
echo "cluster_test $MODE: $passes passed, $fails failed"
[ $fails -eq 0 ]
