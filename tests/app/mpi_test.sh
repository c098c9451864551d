#!/usr/bin/env bash
# More than one process: mirrorlab-cli under Open MPI's mpirun on localhost (as root in CI, hence
# --allow-run-as-root; --oversubscribe: more workers than this machine's 2 cores).
#   invariant  mpirun -np 2 x cpu:2 and -np 3 x cpu:2 (batch 25: uneven shards, accumulation 2)
#              give the weights of one process on cpu:1 to float rounding; -np 2 --allreduce mpi
#              (flat) too, and synchronized BatchNorm over 2 workers; --workers 2 gives the bits of
#              mpirun -np 2; worker 1 alone prints and
#              records one finished run holding every step, its replicas named per worker;
#   failure    a replica failing on worker 2 (fail fault): every worker stops, the run is stored
#              failed with worker 2's message; a worker hanging (hang fault) is named within
#              --worker-timeout and the run is stored failed;
#   bad input  workers with different devices, a project missing on one worker, a missing MPI
#              plugin, the flat form with 2 local replicas: one message naming the thing and the
#              fix, a non-zero exit, nothing stored.
# Usage: mpi_test.sh CLI SRC
set -u
CLI=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
has() { grep -qF -- "$2" <<<"$1"; }
command -v mpirun >/dev/null || { echo "FAIL: mpirun not found (scripts/deps.sh installs openmpi-bin)"; exit 1; }
[ -f "$(dirname "$CLI")/libmirrorlab_mpi.so" ] || { echo "FAIL: the MPI plugin was not built beside $CLI"; exit 1; }
MPI=(mpirun --oversubscribe --bind-to none -x MIRRORLAB_DB -x MIRRORLAB_MPI_PLUGIN)
[ "$(id -u)" = 0 ] && MPI+=(--allow-run-as-root)
export MIRRORLAB_DB=$T/default.sqlite
export MIRRORLAB_MPI_PLUGIN=${MIRRORLAB_MPI_PLUGIN:-}
# Open MPI in containers: no ptrace for single-copy shared memory.
export OMPI_MCA_btl_vader_single_copy_mechanism=none

cat > "$T/sp.json" <<'JSON'
{"schema_version": 1, "name": "workers spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 24, "activation": "tanh"},
                                         {"type": "Dropout", "rate": 0.2},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 2, "batch_size": 25, "accumulate": 2, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 5},
 "distribute": {"devices": "cpu:1", "bucket_bytes": 128}}
JSON

# close A.npz B.npz: max |a-b| / max |b| over every array below 1e-5.
close() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
worst = max(float(np.max(np.abs(a[k] - b[k])) / max(float(np.max(np.abs(b[k]))), 1e-30)) for k in b.files)
print("%.3g" % worst)
sys.exit(0 if worst < 1e-5 else 1)
PY
}
# closeAll A.npz B.npz: max |a-b| over every array / max |b| over all of them below 2e-5 (arrays whose
# values are all near zero, such as a BatchNorm beta after a few steps, are held to the model's scale).
closeAll() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import sys, numpy as np
a, b = np.load(sys.argv[1]), np.load(sys.argv[2])
assert sorted(a.files) == sorted(b.files), (a.files, b.files)
scale = max(float(np.max(np.abs(b[k]))) for k in b.files)
worst = max(float(np.max(np.abs(a[k] - b[k]))) for k in b.files) / max(scale, 1e-30)
print("%.3g" % worst)
sys.exit(0 if worst < 2e-5 else 1)
PY
}
runs() { # DB: one line per run: id status steps step_rows
  /usr/bin/python3 - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True)
for rid, status, steps in c.execute('SELECT id, status, steps FROM runs ORDER BY id'):
    n = c.execute('SELECT count(DISTINCT step) FROM steps WHERE run_id=?', (rid,)).fetchone()[0]
    print(rid, status, steps, n)
PY
}

# --- invariant ---------------------------------------------------------------------------------
"$CLI" train "$T/sp.json" --devices cpu:1 --no-record --quiet --save-weights "$T/one.npz" || bad "the one-process reference failed"
out=$("${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:2 --db "$T/a.sqlite" --save-weights "$T/w2x2.npz" 2>&1)
rc=$?
[ $rc -eq 0 ] || bad "mpirun -np 2 --devices cpu:2 exited $rc: $out"
has "$out" "worker 1 of 2 on host $(hostname), 2 local replicas; 4 replicas in all on 1 host (Open MPI" && ok || bad "no worker line: $out"
has "$out" "all-reduce: hierarchical: the 2 local replicas sum in memory into replica 0, which all-reduces across 2 workers" && ok ||
  bad "the all-reduce line does not say hierarchical: $out"
[ "$(grep -c "recorded as run" <<<"$out")" = 1 ] && ok || bad "not exactly one 'recorded as run' line: $out"
[ "$(grep -c "^Epoch 1/2" <<<"$out")" = 1 ] && ok || bad "progress printed by more than worker 1: $out"
d=$(close "$T/w2x2.npz" "$T/one.npz") && ok || bad "2 workers x cpu:2 differ from one replica by $d"
# 300 samples, 20% validation: 240 / 25 = 10 steps per epoch, 2 epochs.
[ "$(runs "$T/a.sqlite")" = "1 finished 20 20" ] && ok || bad "the store after 2 workers: $(runs "$T/a.sqlite")"
devs=$(/usr/bin/python3 -c "import sqlite3,sys; c=sqlite3.connect(sys.argv[1]); print(c.execute('SELECT config_json FROM runs').fetchone()[0])" "$T/a.sqlite" 2>/dev/null)
has "$devs" "\"workers\":2" && ok || bad "the stored configuration does not say 2 workers: $devs"
list=$("$CLI" runs list --db "$T/a.sqlite" 2>&1)
has "$list" "2 workers x cpu:2" && ok || bad "runs list does not show the workers: $list"
has "$devs" "/worker2/cpu:1" && ok || bad "the stored device names do not name worker 2's replicas: $devs"

# what-if from the stored 2-worker run: its workers by default, the cross-worker ring over a
# network preset, and the hop it measured beside the model.
out=$("$CLI" what-if 1 --db "$T/a.sqlite" --devices 1,2 --cross-link ib-hdr 2>&1) || bad "what-if of a 2-worker run failed: $out"
has "$out" "2 workers (machines), each with the device counts below, joined by InfiniBand HDR" && ok || bad "what-if: $out"
has "$out" "cross-worker hop measured in run 1 (2 workers, MPI)" && ok || bad "what-if does not show the measured hop: $out"
out=$("${MPI[@]}" -np 3 "$CLI" train "$T/sp.json" --devices cpu:2 --no-record --save-weights "$T/w3x2.npz" 2>&1) || bad "-np 3 failed: $out"
d=$(close "$T/w3x2.npz" "$T/one.npz") && ok || bad "3 workers x cpu:2 (batch 25, 2 micro-batches) differ from one replica by $d"
out=$("${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:1 --allreduce mpi --no-record --save-weights "$T/flat.npz" 2>&1) ||
  bad "the flat form failed: $out"
has "$out" "mpi: one replica per worker" && ok || bad "the flat form does not say so: $out"
d=$(close "$T/flat.npz" "$T/one.npz") && ok || bad "flat 2 x cpu:1 differs from one replica by $d"

# Synchronized BatchNormalization across processes: its sums span both workers, so 2 workers x
# cpu:1 give the weights (and moving statistics) of one replica.
cat > "$T/bn.json" <<'JSON'
{"schema_version": 1, "name": "workers batchnorm",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 16, "activation": "tanh"},
                                         {"type": "Reshape", "target_shape": [4, 4, 1]},
                                         {"type": "Conv2D", "filters": 3, "kernel_size": 2, "padding": "same"},
                                         {"type": "BatchNormalization", "synchronized": true},
                                         {"type": "Activation", "activation": "relu"},
                                         {"type": "Flatten"},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 1, "batch_size": 15, "optimizer": {"name": "sgd", "learning_rate": 0.05, "momentum": 0.9}, "seed": 5},
 "distribute": {"devices": "cpu:1"}}
JSON
"$CLI" train "$T/bn.json" --devices cpu:1 --no-record --quiet --save-weights "$T/bn1.npz" || bad "the BatchNorm reference failed"
out=$("${MPI[@]}" -np 2 "$CLI" train "$T/bn.json" --devices cpu:1 --no-record --save-weights "$T/bn2.npz" 2>&1) ||
  bad "synchronized BatchNorm under mpirun -np 2 failed: $out"
d=$(closeAll "$T/bn2.npz" "$T/bn1.npz") && ok || bad "synchronized BatchNorm, 2 workers x cpu:1, differs from one replica by $d"

# --workers starts mpirun itself: the same bits as mpirun -np 2.
if [ "$(id -u)" = 0 ]; then :; fi
out=$("$CLI" train "$T/sp.json" --devices cpu:2 --workers 2 --no-record --save-weights "$T/self.npz" 2>&1) || bad "--workers 2 failed: $out"
cmp -s "$T/self.npz" "$T/w2x2.npz" && ok || bad "--workers 2 did not give the bits of mpirun -np 2"

# A project that asks for 2 workers (distribute.workers) starts them itself; mpirun with another
# count is refused; a program that trains in one process (scale) says how to run it.
sed 's/"bucket_bytes": 128}/"bucket_bytes": 128, "workers": 2}/' "$T/sp.json" > "$T/sp2.json"
out=$("$CLI" train "$T/sp2.json" --no-record --save-weights "$T/proj2.npz" 2>&1) || bad "a project with 2 workers failed: $out"
has "$out" "worker 1 of 2 on host" && ok || bad "a project with 2 workers did not start 2: $out"
cmp -s "$T/proj2.npz" "$T/flat.npz" && ok || bad "distribute.workers 2 x cpu:1 differs from mpirun -np 2 x cpu:1"
out=$("${MPI[@]}" -np 3 "$CLI" train "$T/sp2.json" --no-record 2>&1)
rc=$?
[ $rc -eq 2 ] && has "$out" "the project asks for 2 workers" && ok || bad "mpirun -np 3 of a 2-worker project (exit $rc): $out"
out=$("$CLI" scale "$T/sp2.json" --devices cpu:1,2 --steps 3 --no-record 2>&1)
rc=$?
[ $rc -ne 0 ] && has "$out" "workers" && has "$out" "mirrorlab-cli train" && ok || bad "scale of a 2-worker project (exit $rc): $out"

# --- failures during training --------------------------------------------------------------------
out=$("${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:2 --db "$T/f.sqlite" --inject fail:cpu:1@step=4@worker=2 2>&1)
rc=$?
[ $rc -ne 0 ] && ok || bad "a failing worker exited 0"
has "$out" "worker 2 of 2 on host $(hostname): an injected failure on cpu:1 in step 4" && ok || bad "the failure does not name worker 2: $out"
# The store holds the 3 steps before the one that failed, and the run says 3 steps.
[ "$(runs "$T/f.sqlite")" = "1 failed 3 3" ] && ok || bad "the store after a failure: $(runs "$T/f.sqlite")"

start=$(date +%s)
out=$("${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:1 --db "$T/h.sqlite" --hang-seconds 120 --worker-timeout 2 \
      --inject hang:cpu:0@step=3@worker=2 2>&1)
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && ok || bad "a hanging worker: exit 0"
has "$out" "worker 2 of 2 on host $(hostname) is alive but has not reached the all-reduce of step 3" && ok || bad "the hang does not name worker 2: $out"
has "$out" "stuck in backward of step 3" && ok || bad "the hang does not say where worker 2 is: $out"
[ $took -lt 60 ] && ok || bad "the hang took $took s to end with --worker-timeout 2"
r=$(runs "$T/h.sqlite")
[ "${r%% *}" = 1 ] && has "$r" "failed" && ok || bad "the store after a hang: $r"

# The hang on worker 2 found by its own watchdog first (--hang-seconds shorter than
# --worker-timeout): worker 2 votes to stop, and every worker ends failed with its reason, named
# with worker and host; worker 1's watchdog leaves the wait across workers to the worker group.
out=$("${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:1 --db "$T/h2.sqlite" --hang-seconds 2 --worker-timeout 5 \
      --inject hang:cpu:0@step=3@worker=2 2>&1)
rc=$?
[ $rc -eq 1 ] && ok || bad "a hang found by worker 2's watchdog: exit $rc"
has "$out" "worker 2 of 2 on host $(hostname): replica 1 (" && has "$out" "has not finished backward of step 3" && ok ||
  bad "the hang found by worker 2's watchdog is not named with its worker and host: $out"
r=$(runs "$T/h2.sqlite")
read -r id status steps rows <<<"$r"
[ "$status" = failed ] && [ "$steps" = "$rows" ] && ok || bad "the store after worker 2's watchdog: $r"

# A worker killed (SIGKILL) after step 3. Under --workers (mpirun --enable-recovery) the
# survivor names it after --worker-timeout and records the run failed; with a plain mpirun, which
# kills every worker a second later, the run is stored failed or (if the kill was faster)
# interrupted, never finished or left running.
start=$(date +%s)
out=$("$CLI" train "$T/sp.json" --workers 2 --devices cpu:1 --db "$T/k.sqlite" --worker-timeout 3 \
      --inject kill@step=3@worker=2 2>&1)
rc=$?
took=$(( $(date +%s) - start ))
[ $rc -ne 0 ] && ok || bad "a killed worker: exit 0"
has "$out" "worker 2 of 2 on host $(hostname) stopped answering" && ok || bad "the killed worker is not named: $out"
[ $took -lt 60 ] && ok || bad "a killed worker took $took s to end with --worker-timeout 3"
r=$(runs "$T/k.sqlite")
has "$r" "1 failed" && ok || bad "the store after a killed worker: $r"
"${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:1 --db "$T/k2.sqlite" --inject kill@step=3@worker=2 >/dev/null 2>&1 &&
  bad "a killed worker under plain mpirun: exit 0"
"$CLI" runs list --db "$T/k2.sqlite" >/dev/null 2>&1  # opening marks a run left running interrupted
r=$(runs "$T/k2.sqlite")
{ has "$r" "1 failed" || has "$r" "1 interrupted"; } && ok || bad "the store after a killed worker under plain mpirun: $r"

# --- bad input: one message, non-zero exit, nothing stored -------------------------------------------
out=$("${MPI[@]}" -np 1 "$CLI" train "$T/sp.json" --devices cpu:1 --db "$T/b.sqlite" : \
      -np 1 "$CLI" train "$T/sp.json" --devices cpu:2 --db "$T/b.sqlite" 2>&1)
rc=$?
[ $rc -ne 0 ] && ok || bad "workers with different devices: exit 0"
has "$out" "the workers do not train the same thing: worker 1 of 2 on host $(hostname) has devices cpu:1" && ok || bad "different devices: $out"
[ "$(grep -c "error:" <<<"$out")" = 1 ] && ok || bad "the error is not printed once: $out"
[ ! -s "$T/b.sqlite" ] || [ -z "$(runs "$T/b.sqlite")" ] && ok || bad "a refused start stored a run"

out=$("${MPI[@]}" -np 1 "$CLI" train "$T/sp.json" --no-record : -np 1 "$CLI" train "$T/missing.json" --no-record 2>&1)
rc=$?
[ $rc -eq 2 ] && ok || bad "a project missing on worker 2: exit $rc"
has "$out" "worker 2 of 2 on host $(hostname): " && has "$out" "missing.json" && ok || bad "a project missing on worker 2: $out"

out=$(MIRRORLAB_MPI_PLUGIN=$T/nothing.so "${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --no-record 2>&1)
rc=$?
[ $rc -ne 0 ] && ok || bad "a missing MPI plugin: exit 0"
has "$out" "MIRRORLAB_MPI_PLUGIN" && has "$out" "nothing.so" && ok || bad "a missing plugin is not named: $out"

out=$("${MPI[@]}" -np 2 "$CLI" train "$T/sp.json" --devices cpu:2 --allreduce mpi --no-record 2>&1)
rc=$?
[ $rc -eq 2 ] && ok || bad "flat mpi with 2 local replicas: exit $rc"
has "$out" "one replica per worker (--devices cpu:1)" && ok || bad "flat mpi with 2 local replicas: $out"

out=$("$CLI" train "$T/sp.json" --allreduce mpi --no-record 2>&1)
rc=$?
[ $rc -eq 2 ] && has "$out" "mpirun -np W" && ok || bad "--allreduce mpi in one process (exit $rc): $out"

echo "mpi_test: $passes passed, $fails failed"
[ $fails -eq 0 ]
