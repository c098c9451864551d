#!/usr/bin/env bash
# Faults a user meets, driven through the real mirrorlab-cli:
#   full-disk   the store and the outputs on a small file system that fills up (a tmpfs mount when
#               this user may mount, else a file-size limit, RLIMIT_FSIZE): the run stops with the
#               reason and a non-zero exit, nothing half-written is left, old files survive, the
#               store stays intact (PRAGMA integrity_check) and opens again, and every run that
#               printed "recorded" is complete;
#   concurrent  two trainings create the same new store at once, 20 times: both succeed and both
#               runs are complete.
# Usage: fault_test.sh CLI SRC full-disk|concurrent
set -u
CLI=$1; SRC=$2; WHICH=$3
T=$(mktemp -d)
MNT=""
cleanup() { [ -n "$MNT" ] && umount "$MNT" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
has() { grep -qF -- "$2" <<<"$1"; }

cat > "$T/sp.json" <<JSON
{"schema_version": 1, "name": "fault spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 16, "activation": "tanh"},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 600, "classes": 3, "noise": 0.1, "seed": 3},
 "training": {"epochs": 200, "batch_size": 8, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 1},
 "distribute": {"devices": "cpu:2"}}
JSON

# Checks a store with SQLite itself: integrity, and every run the CLI called recorded (ids given)
# complete: finished, every step and per-replica row, every epoch. Other runs must be marked
# failed or interrupted with as many steps as the store holds. Prints problems; exit 1 on any.
check_store() { # db recorded_ids...
  python3 - "$@" <<'PY'
import sqlite3, sys
db, recorded = sys.argv[1], {int(x) for x in sys.argv[2:]}
c = sqlite3.connect('file:%s?mode=ro' % db, uri=True)
bad = []
ic = c.execute('PRAGMA integrity_check').fetchone()[0]
if ic != 'ok': bad.append('integrity_check: ' + ic)
for rid, status, steps, total, epochs, replicas in c.execute(
        'SELECT id, status, steps, total_steps, epochs, replicas FROM runs').fetchall():
    n, last = c.execute('SELECT count(*), max(step) FROM steps WHERE run_id=?', (rid,)).fetchone()
    rep = c.execute('SELECT count(*) FROM replica_steps WHERE run_id=?', (rid,)).fetchone()[0]
    eps = c.execute('SELECT count(*) FROM epochs WHERE run_id=?', (rid,)).fetchone()[0]
    if rid in recorded:
        if status != 'finished' or steps != total or n != total or last != total or rep != total * replicas or eps != epochs:
            bad.append('run %d said "recorded" but is %s, steps %s/%s, rows %d (replica rows %d), epochs %d/%s'
                       % (rid, status, steps, total, n, rep, eps, epochs))
    elif status not in ('failed', 'interrupted') or (steps or 0) != n:
        bad.append('run %d was not recorded whole but is %s with steps=%s and %d step rows' % (rid, status, steps, n))
print('; '.join(bad) if bad else 'store ok')
sys.exit(1 if bad else 0)
PY
}

recorded_id() { grep -oP 'recorded as run \K[0-9]+' <<<"$1"; }

full_disk() {
  local D=$T/disk mode
  mkdir -p "$D"
  if mount -t tmpfs -o size=1m tmpfs "$D" 2>/dev/null; then
    MNT=$D; mode=tmpfs
  else
    mode=rlimit  # no mount allowed: a file-size limit makes the writes fail the same way (EFBIG)
  fi
  echo "full-disk test on a $mode file system"
  export MIRRORLAB_DB=$D/runs.sqlite
  # Fills the file system up to its last KEEP KiB (tmpfs), or sets the file-size limit (rlimit).
  limited() { # keep_kib cmd...
    local keep=$1; shift
    if [ $mode = tmpfs ]; then
      rm -f "$D/filler"
      dd if=/dev/zero of="$D/filler" bs=4k 2>/dev/null
      local total; total=$(stat -c %s "$D/filler")
      truncate -s $((total > keep * 1024 ? total - keep * 1024 : 0)) "$D/filler"
      "$@"
    else
      ( trap '' XFSZ; ulimit -f $(( ($(stat -c %s "$MIRRORLAB_DB" 2>/dev/null || echo 0) / 1024) + keep )); "$@" )
    fi
  }
  # For the output files: no room at all (tmpfs), or no byte may be written (rlimit).
  limited_out() {
    if [ $mode = tmpfs ]; then limited 0 "$@"; else ( trap '' XFSZ; ulimit -f 0; "$@" ); fi
  }
  free_all() { rm -f "$D/filler"; }

  # 1. A short run while there is room: recorded and complete; weights saved for later.
  out=$("$CLI" train "$T/sp.json" --steps 30 --save-weights "$D/w.mlw" 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || bad "first run exit $rc: $out"
  id1=$(recorded_id "$out"); [ -n "$id1" ] && ok || bad "first run not recorded: $out"
  w_md5=$(md5sum < "$D/w.mlw")

  # 2. A long run with the disk nearly full: it must stop with the reason, non-zero, and never
  #    claim to be recorded.
  out=$(limited 48 "$CLI" train "$T/sp.json" 2>&1); rc=$?
  [ $rc -ne 0 ] && ok || bad "run on a full disk exited 0"
  has "$out" "could not record this run" && ok || bad "no recording failure reported: $(tail -5 <<<"$out")"
  has "$out" "recorded as run" && bad "a failed recording was reported as recorded" || ok
  # It stops at the first write the full disk refuses: a step row, or the epoch's checkpoint.
  { has "$out" "training stopped after step" || has "$out" "writing checkpoint"; } && ok ||
    bad "the run did not stop when recording failed: $(tail -5 <<<"$out")"
  if [ $mode = tmpfs ]; then has "$out" "disk is full" && ok || bad "the reason is not the full disk: $(tail -5 <<<"$out")"; fi
  # 2b. Without checkpoints the store's step rows are what fails: the run stops within one step
  #     of the last stored one (it waits for each step's commit), not a commit interval later.
  out=$(limited 256 "$CLI" train "$T/sp.json" --checkpoint-every 100000epochs 2>&1); rc=$?
  trained=$(grep -oP 'training stopped after step \K[0-9]+' <<<"$out" | head -1)
  stored=$(grep -oP 'holds steps 1\.\.\K[0-9]+' <<<"$out" | head -1)
  if [ $rc -ne 0 ] && [ -n "$trained" ] && [ -n "$stored" ] && [ "$stored" -ge 1 ] && [ "$trained" -le $((stored + 1)) ]; then ok
  else bad "a failed store write: exit $rc, trained through step ${trained:-?}, stored 1..${stored:-?}: $(tail -4 <<<"$out")"; fi
  echo "full disk: training stopped after step ${trained:-?}, the store holds steps 1..${stored:-?}"
  # 2c. A sweep on the full disk: its points fail with the store's reason, and once its process
  #     is gone it never reads "running" (whether or not the disk let it say how it ended).
  out=$(limited 48 "$CLI" sweep "$T/sp.json" --batch-size 8,16 --epochs 50 2>&1)
  has "$out" "disk is full" || has "$out" "failed" && ok || bad "the sweep on a full disk said: $(tail -3 <<<"$out")"
  out=$(limited 256 "$CLI" sweep --list 2>&1)
  has "$out" "fault spirals sweep" && ! has "$out" "running" && ok || bad "the sweep stopped by the full disk is listed as: $out"

  # 3. With the disk full to the last byte, SQLite cannot even create its -shm file: the store is
  #    reported as on a full disk, never as damaged, and nobody is told to move it away.
  out=$(limited 0 "$CLI" runs list 2>&1); rc=$?
  { [ $rc -eq 0 ] || has "$out" "disk holding it is full"; } && ok || bad "runs list on the full disk exit $rc: $out"
  has "$out" "damaged" && bad "an intact store was called damaged: $out" || ok
  has "$out" "move it away" && bad "advised moving an intact store away: $out" || ok
  # With a little room it opens and lists the first run.
  out=$(limited 256 "$CLI" runs list 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || bad "runs list with 256 KiB free exit $rc: $out"

  # 4. Outputs on the full disk: an error naming the file and the reason, the old weights intact,
  #    no empty or partial file left behind.
  out=$(limited_out "$CLI" train "$T/sp.json" --steps 5 --no-record --save-weights "$D/w.mlw" 2>&1); rc=$?
  [ $rc -ne 0 ] && ok || bad "saving weights on a full disk exited 0"
  has "$out" "writing weights file" && ok || bad "no weights error: $out"
  has "$out" "weights saved" && bad "claimed the weights were saved: $out" || ok
  [ "$(md5sum < "$D/w.mlw")" = "$w_md5" ] && ok || bad "the old weights file was damaged"
  printf '0.1,0.2\n-0.5,0.3\n' > "$T/in.csv"
  for i in $(seq 2000); do printf '0.1,0.2\n'; done >> "$T/in.csv"
  out=$(limited_out "$CLI" predict "$T/sp.json" --weights "$D/w.mlw" --input "$T/in.csv" --output "$D/p.csv" 2>&1); rc=$?
  [ $rc -ne 0 ] && ok || bad "predict on a full disk exited 0"
  has "$out" "writing predictions file" && ok || bad "no predictions error: $out"
  [ ! -e "$D/p.csv" ] && ok || bad "predict left $(stat -c %s "$D/p.csv") bytes in p.csv"
  [ -z "$(ls -A "$D" | grep '\.tmp-')" ] && ok || bad "temporary files left: $(ls -A "$D")"
  out=$("$CLI" train "$T/sp.json" --steps 5 --no-record --report "$T/no/such/folder/r.json" 2>&1); rc=$?
  [ $rc -ne 0 ] && ok || bad "--report into a missing folder exited 0"
  has "$out" "does not exist" && ok || bad "no missing-folder message: $out"
  has "$out" "Epoch" && bad "trained before refusing the report path" || ok

  # 5. With room again: the store opens, SQLite finds it intact, the recorded run is complete and
  #    the stopped one is marked with what the store holds.
  free_all
  out=$("$CLI" runs list --json 2>&1); rc=$?
  [ $rc -eq 0 ] && ok || bad "runs list after freeing space exit $rc: $out"
  has "$out" '"status": "finished"' && ok || bad "the first run is not listed as finished: $out"
  res=$(check_store "$MIRRORLAB_DB" $id1); [ $? -eq 0 ] && ok || bad "$res"
  out=$("$CLI" train "$T/sp.json" --steps 10 2>&1); rc=$?
  id3=$(recorded_id "$out")
  [ $rc -eq 0 ] && [ -n "$id3" ] && ok || bad "a run after the full disk failed: $out"
  res=$(check_store "$MIRRORLAB_DB" $id1 $id3); [ $? -eq 0 ] && ok || bad "$res"
}

concurrent() {
  local i ids
  for i in $(seq 20); do
    local db=$T/c$i/runs.sqlite
    "$CLI" train "$T/sp.json" --steps 15 --db "$db" > "$T/a$i.out" 2>&1 & local pa=$!
    "$CLI" train "$T/sp.json" --steps 15 --db "$db" > "$T/b$i.out" 2>&1 & local pb=$!
    wait $pa; local ra=$?; wait $pb; local rb=$?
    ids=""
    for f in a b; do
      local o; o=$(cat "$T/$f$i.out")
      local id; id=$(recorded_id "$o")
      if [ -z "$id" ]; then bad "try $i: training $f did not record: $(tail -3 <<<"$o")"; else ids="$ids $id"; fi
    done
    [ $ra -eq 0 ] && [ $rb -eq 0 ] && ok || bad "try $i: exit codes $ra and $rb"
    res=$(check_store "$db" $ids); [ $? -eq 0 ] && ok || bad "try $i: $res"
    [ "$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('select count(*) from runs').fetchone()[0])" "$db")" = 2 ] \
      && ok || bad "try $i: the store does not hold 2 runs"
  done
}

case $WHICH in
  full-disk) full_disk ;;
  concurrent) concurrent ;;
  *) echo "unknown test $WHICH"; exit 2 ;;
esac
echo "$WHICH: $passes passed, $fails failed"
[ $fails -eq 0 ]
