#!/usr/bin/env bash
# Long runs survive, driven through the real mirrorlab-cli (a tiny model: seconds):
#   exact     3 epochs straight vs a process killed with SIGKILL during epoch 2 (kill@step=15, a
#             checkpoint every epoch; and every 4 steps) + `train --resume`, on cpu:1 and cpu:3:
#             the final weights files are byte-identical and the store holds one finished run
#             with every step once;
#   devices   killed on cpu:3, resumed on cpu:2 with the same global batch: equal to float
#             rounding; with a per-device batch (the global batch would change) refused;
#   refusals  a damaged, another run's and another architecture's checkpoint, a finished run and a
#             run without checkpoints: refused with the reason, exit non-zero, the store unchanged;
#   hang      an injected hang with --hang-seconds 0.5: failed with the diagnosis, exit 1.
# Usage: resume_test.sh CLI SRC
set -u
CLI=$1
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
has() { grep -qF -- "$2" <<<"$1"; }

project() { # file units per_device
  local batch='"batch_size": 24'
  [ "$3" = yes ] && batch='"batch_size": 8, "per_device_batch": true'
  cat > "$1" <<JSON
{"schema_version": 1, "name": "resume spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": $2, "activation": "tanh"},
                                         {"type": "Dropout", "rate": 0.2},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 3, $batch, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 5},
 "distribute": {"devices": "cpu:1"}}
JSON
}
project "$T/sp.json" 16 no
project "$T/wide.json" 20 no
project "$T/pd.json" 16 yes

# One line per run: id, status, steps, step rows, distinct steps, epochs, tags, checkpoint artifacts.
fingerprint() {
  python3 - "$1" <<'PY'
import sqlite3, sys
c = sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True)
for rid, status, steps in c.execute('SELECT id, status, steps FROM runs ORDER BY id'):
    n, d = c.execute('SELECT count(*), count(DISTINCT step) FROM steps WHERE run_id=?', (rid,)).fetchone()
    e = c.execute('SELECT count(*) FROM epochs WHERE run_id=?', (rid,)).fetchone()[0]
    tags = ','.join(t for (t,) in c.execute('SELECT tag FROM tags WHERE run_id=? ORDER BY tag', (rid,)))
    a = c.execute("SELECT count(*) FROM artifacts WHERE run_id=? AND kind='checkpoint'", (rid,)).fetchone()[0]
    print(rid, status, steps, n, d, e, tags or '-', a)
PY
}

# kill_run DB PROJECT DEVICES [extra...]: a run that dies by SIGKILL after step 15 (epoch 2 of 3).
kill_run() {
  local db=$1 proj=$2 dev=$3; shift 3
  { ( exec "$CLI" train "$proj" --devices "$dev" --db "$db" --inject kill@step=15 --quiet "$@" >/dev/null 2>&1 ); } 2>/dev/null
  local rc=$?
  [ $rc -eq 137 ] || bad "a run injected with kill@step=15 exited $rc, not 137 (SIGKILL)"
  "$CLI" runs list --db "$db" >/dev/null  # opening the store marks the dead run interrupted
}

exact() { # devices checkpoint-every label
  local dev=$1 every=$2 d="$T/exact-$3"
  mkdir -p "$d"
  "$CLI" train "$T/sp.json" --devices "$dev" --db "$d/straight.sqlite" --save-weights "$d/straight.mlw" --quiet >/dev/null ||
    bad "$3: the straight run failed"
  kill_run "$d/killed.sqlite" "$T/sp.json" "$dev" --checkpoint-every "$every"
  local out
  out=$("$CLI" train --resume 1 --db "$d/killed.sqlite" --save-weights "$d/resumed.mlw" 2>&1) || bad "$3: resume failed: $out"
  has "$out" "resuming run 1" || bad "$3: resume did not say what it resumed: $out"
  if cmp -s "$d/straight.mlw" "$d/resumed.mlw"; then ok; else bad "$3: resumed weights differ from the straight run's"; fi
  local fp
  fp=$(fingerprint "$d/killed.sqlite")
  # one run, finished, 30 steps, each stored once, 3 epochs, tagged, at most 3 checkpoints kept
  if [[ "$fp" =~ ^1\ finished\ 30\ 30\ 30\ 3\ fault\ injected\ [1-3]$ ]]; then ok; else bad "$3: store after resume: $fp"; fi
  local files
  files=$(ls "$d/killed.sqlite.checkpoints/run-1" | wc -l)
  [ "$files" -ge 1 ] && [ "$files" -le 3 ] && ok || bad "$3: $files checkpoint files kept (want 1..3)"
}
exact cpu:1 1epoch cpu1-epoch
exact cpu:3 1epoch cpu3-epoch
exact cpu:3 4steps cpu3-steps

# Another device count, same global batch (24 on cpu:3 and on cpu:2): equal to float rounding.
d="$T/devices"; mkdir -p "$d"
"$CLI" train "$T/sp.json" --devices cpu:3 --db "$d/straight.sqlite" --save-weights "$d/straight.mlw" --quiet >/dev/null
kill_run "$d/killed.sqlite" "$T/sp.json" cpu:3
out=$("$CLI" train --resume 1 --devices cpu:2 --db "$d/killed.sqlite" --save-weights "$d/resumed.mlw" --quiet 2>&1) ||
  bad "resume on cpu:2 failed: $out"
diff=$(python3 - "$d/straight.mlw" "$d/resumed.mlw" <<'PY'
import struct, sys
def params(p):
    b = open(p, 'rb').read()
    L = struct.unpack_from('<I', b, 12)[0]
    n = struct.unpack_from('<Q', b, 16 + L)[0]
    return struct.unpack_from('<%df' % n, b, 24 + L)
a, b = params(sys.argv[1]), params(sys.argv[2])
print(max(abs(x - y) for x, y in zip(a, b)) if len(a) == len(b) else 'sizes differ')
PY
)
python3 -c "import sys; d=float(sys.argv[1]); sys.exit(0 if d < 1e-4 else 1)" "$diff" 2>/dev/null && ok ||
  bad "resumed on cpu:2 vs straight on cpu:3: max |difference| $diff (want < 1e-4, float rounding)"
echo "devices: cpu:3 -> cpu:2 max |weight difference| $diff"

# A per-device batch: cpu:3 x 8 = 24, cpu:2 x 8 = 16: refused, nothing changed.
d="$T/pd"; mkdir -p "$d"
kill_run "$d/s.sqlite" "$T/pd.json" cpu:3
before=$(fingerprint "$d/s.sqlite")
out=$("$CLI" train --resume 1 --devices cpu:2 --db "$d/s.sqlite" 2>&1); rc=$?
[ $rc -ne 0 ] && has "$out" "would change the global batch from 24" && ok || bad "global batch change: exit $rc: $out"
[ "$(fingerprint "$d/s.sqlite")" = "$before" ] && ok || bad "a refused resume changed the store"

# refuse DB RUN EXPECTED WHAT: resume refused with EXPECTED in the message, the store unchanged.
refuse() {
  local db=$1 run=$2 want=$3 what=$4 before out rc
  before=$(fingerprint "$db")
  out=$("$CLI" train --resume "$run" --db "$db" 2>&1); rc=$?
  [ $rc -ne 0 ] && has "$out" "$want" && ok || bad "$what: exit $rc, message: $out"
  [ "$(fingerprint "$db")" = "$before" ] && ok || bad "$what: the refused resume changed the store"
}
d="$T/bad"; mkdir -p "$d"
kill_run "$d/s.sqlite" "$T/sp.json" cpu:2      # run 1
kill_run "$d/s.sqlite" "$T/wide.json" cpu:2    # run 2, another architecture
kill_run "$d/wide.sqlite" "$T/wide.json" cpu:2 # run 1 of another store: another architecture, same id
"$CLI" train "$T/sp.json" --devices cpu:2 --db "$d/s.sqlite" --quiet >/dev/null  # run 3, finished
kill_run "$d/s.sqlite" "$T/sp.json" cpu:2 --checkpoint-every 3epochs  # run 4, killed before its first checkpoint
C1="$d/s.sqlite.checkpoints/run-1"
newest=$(ls "$C1" | tail -1)
cp "$C1/$newest" "$d/good.mlck"
python3 - "$C1/$newest" <<'PY'
import sys
p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x40; open(p, 'wb').write(b)
PY
refuse "$d/s.sqlite" 1 "is damaged (checksum mismatch)" "a damaged checkpoint"
cp "$d/good.mlck" "$C1/$newest"
cp "$d/s.sqlite.checkpoints/run-2/$(ls "$d/s.sqlite.checkpoints/run-2" | tail -1)" "$C1/step-99999998.mlck"
refuse "$d/s.sqlite" 1 "belongs to run 2, not to run 1" "another run's checkpoint"
rm "$C1/step-99999998.mlck"
cp "$d/wide.sqlite.checkpoints/run-1/$(ls "$d/wide.sqlite.checkpoints/run-1" | tail -1)" "$C1/step-99999999.mlck"
refuse "$d/s.sqlite" 1 "belongs to another architecture" "another architecture's checkpoint"
rm "$C1/step-99999999.mlck"
refuse "$d/s.sqlite" 3 "finished: there is nothing to resume" "a finished run"
refuse "$d/s.sqlite" 4 "has no checkpoints" "a run without checkpoints"
# After the refusals the good checkpoint still resumes run 1.
"$CLI" train --resume 1 --db "$d/s.sqlite" --quiet >/dev/null 2>&1 && ok || bad "run 1 does not resume after the refusals"
# Deleting a run deletes its checkpoints.
"$CLI" runs delete 1 --db "$d/s.sqlite" >/dev/null && [ ! -e "$C1" ] && ok || bad "runs delete left $C1"

# The watchdog through the CLI: an injected hang with T = 0.5 s ends the run failed with the
# diagnosis on stderr and in the store, exit 1, well before any outer timeout.
d="$T/hang"; mkdir -p "$d"
out=$(timeout 60 "$CLI" train "$T/sp.json" --devices cpu:3 --db "$d/s.sqlite" --inject hang:cpu:1@step=5 --hang-seconds 0.5 --quiet 2>&1); rc=$?
[ $rc -eq 1 ] && has "$out" "replica 1 (cpu:1) has not finished backward of step 5 for" &&
  has "$out" "the other 2 replicas are waiting in the all-reduce of bucket 1" && ok || bad "hang: exit $rc: $out"
row=$(python3 -c "import sqlite3,sys; print(sqlite3.connect(sys.argv[1]).execute('SELECT status, error FROM runs').fetchone())" "$d/s.sqlite")
has "$row" "'failed', 'replica 1 (cpu:1) has not finished backward of step 5" && ok || bad "hang: stored as $row"

echo "resume_test: $passes passed, $fails failed"
[ $fails -eq 0 ]
