#!/usr/bin/env bash
# What a hostile or unlucky user meets, through the real mirrorlab-cli:
#   exit codes  one table: 0 done, 1 the run failed, 2 refused input or usage (CLI11's own parse
#               errors included), 130 interrupted by Ctrl-C;
#   NaN         weights holding NaN or inf (.mlw and .npz, valid checksums) are refused by evaluate,
#               predict and export (onnx, keras, torch) with exit 2, naming the layer and the file,
#               writing nothing; a checkpoint holding NaN, or global_batch -7, is refused on resume;
#   checksums   a .mlw's checksum is standard FNV-1a 64 (recomputed here independently); version 1
#               files (the old basis) still load;
#   messages    a NUL in a CSV cell is escaped, not the message's end; duplicate CSV columns;
#               epochs 1e20 names the real range; one IDX label 200 among 0..9 is damage; an .mlw
#               whose count is corrupted is damaged, not "another architecture";
#   store       temporary checkpoint files a kill left are removed when the run is resumed;
#               `runs list` and `runs show` work on a read-only store and change nothing;
#   lessons     a broken lesson is named and the valid ones beside it listed; a copied shipped
#               lesson finds its project.
# Usage: reliability_test.sh CLI SRC
set -u
CLI=$1; SRC=$2
T=$(mktemp -d)
MNT=""
cleanup() { [ -n "$MNT" ] && umount "$MNT" 2>/dev/null; rm -rf "$T"; }
trap cleanup EXIT
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
has() { grep -qF -- "$2" <<<"$1"; }
# expect RC TEXT LABEL -- the last command's exit status and output ($rc, $out)
expect() { [ "$rc" -eq "$1" ] && has "$out" "$2" && ok || bad "$3: exit $rc (want $1), output: $(head -c 600 <<<"$out")"; }

cat > "$T/sp.json" <<JSON
{"schema_version": 1, "name": "reliability spirals",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 8, "activation": "tanh"},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": 3, "batch_size": 24, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 5},
 "distribute": {"devices": "cpu:1"}}
JSON
export MIRRORLAB_DB=$T/runs.sqlite

# ---- exit codes -----------------------------------------------------------------------------
out=$("$CLI" train "$T/sp.json" --steps 5 --save-weights "$T/w.mlw" 2>&1); rc=$?
expect 0 "weights saved" "a short run"
out=$("$CLI" train "$T/sp.json" --no-record --devices cpu:2 --inject nan:cpu:1@step=3 2>&1); rc=$?
expect 1 "run diverged" "a diverged run"
for args in "no-such-command" "train --no-such-option" "train $T/sp.json --steps abc" "evaluate $T/sp.json" \
            "train $T/sp.json --steps 0" "train $T/missing.json" "runs show 999"; do
  # shellcheck disable=SC2086
  out=$("$CLI" $args 2>&1); rc=$?
  expect 2 "" "refused usage '$args'"
done
out=$("$CLI" --help 2>&1); rc=$?
expect 0 "Exit status:" "--help"
for line in "0    done" "1    the run failed" "2    refused input or usage" "130  interrupted by Ctrl-C"; do
  has "$out" "$line" && ok || bad "--help's exit-status table lacks '$line'"
done
# Ctrl-C: a long run, interrupted once its first step is stored, exits 130 and is recorded cancelled.
sed 's/"epochs": 3/"epochs": 100000/' "$T/sp.json" > "$T/long.json"
"$CLI" train "$T/long.json" --db "$T/int.sqlite" --quiet >/dev/null 2>&1 &
pid=$!
for _ in $(seq 600); do
  n=$(python3 -c "import sqlite3,sys; print(sqlite3.connect('file:$T/int.sqlite?mode=ro', uri=True).execute('SELECT count(*) FROM steps').fetchone()[0])" 2>/dev/null)
  [ "${n:-0}" -gt 0 ] && break
  sleep 0.1
done
kill -INT $pid; wait $pid; rc=$?
[ $rc -eq 130 ] && ok || bad "Ctrl-C exited $rc, not 130"
out=$("$CLI" runs list --db "$T/int.sqlite" 2>&1)
has "$out" "cancelled" && ok || bad "the interrupted run is not recorded cancelled: $out"

# ---- checksums: standard FNV-1a 64; version 1 still loads ----------------------------------
# mlw.py FILE fnv|nan INDEX OUT|v1 OUT|count OUT: checks or rewrites a weights file (format in WeightsFile.h).
cat > "$T/mlw.py" <<'PY'
import struct, sys
raw = open(sys.argv[1], 'rb').read()
L = struct.unpack('<I', raw[12:16])[0]
n = struct.unpack('<Q', raw[16 + L:24 + L])[0]
params = raw[24 + L:24 + L + 4 * n]
def fnv(d, h=0xcbf29ce484222325):  # FNV-1a 64, the published offset basis and prime
    for b in d:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h
stored = struct.unpack('<Q', raw[24 + L + 4 * n:])[0]
what = sys.argv[2]
if what == 'fnv':
    print('standard' if fnv(params) == stored else 'other')
elif what == 'nan':
    v = list(struct.unpack('<%df' % n, params)); v[int(sys.argv[3])] = float('nan')
    p = struct.pack('<%df' % n, *v)
    open(sys.argv[4], 'wb').write(raw[:24 + L] + p + struct.pack('<Q', fnv(p)))
elif what == 'v1':
    open(sys.argv[3], 'wb').write(raw[:8] + struct.pack('<I', 1) + raw[12:24 + L] + params +
                                  struct.pack('<Q', fnv(params, 1469598103934665603)))
elif what == 'count':
    open(sys.argv[3], 'wb').write(raw[:16 + L] + struct.pack('<Q', n + 1) + raw[24 + L:])
PY
[ "$(python3 "$T/mlw.py" "$T/w.mlw" fnv)" = standard ] && ok || bad "the .mlw checksum is not standard FNV-1a 64"
python3 "$T/mlw.py" "$T/w.mlw" v1 "$T/v1.mlw"
out=$("$CLI" evaluate "$T/sp.json" --weights "$T/v1.mlw" 2>&1); rc=$?
expect 0 "loss:" "a version 1 weights file (old checksum basis)"
python3 "$T/mlw.py" "$T/w.mlw" count "$T/count.mlw"
out=$("$CLI" evaluate "$T/sp.json" --weights "$T/count.mlw" 2>&1); rc=$?
expect 2 "does not match its own architecture, which has 51 parameters" "an .mlw with a corrupted count"
has "$out" "another architecture" && bad "a corrupted count was called another architecture: $out" || ok

# ---- NaN weights: refused everywhere with exit 2, naming the layer and the file --------------
python3 "$T/mlw.py" "$T/w.mlw" nan 30 "$T/nan.mlw"
printf 'a,b\n0.1,0.2\n-0.5,0.3\n' > "$T/in.csv"
named="weights file '$T/nan.mlw' holds NaN in layer 2 'dense_1' (Dense), value 7 of its 27"
out=$("$CLI" evaluate "$T/sp.json" --weights "$T/nan.mlw" 2>&1); rc=$?
expect 2 "$named" "evaluate with NaN weights"
out=$("$CLI" predict "$T/sp.json" --weights "$T/nan.mlw" --input "$T/in.csv" --output "$T/p.csv" 2>&1); rc=$?
expect 2 "$named" "predict with NaN weights"
[ ! -e "$T/p.csv" ] && ok || bad "predict wrote predictions from NaN weights"
for f in onnx:m.onnx keras:m.weights.h5 keras:m.keras torch:m.npz; do
  out=$("$CLI" export "$T/sp.json" --weights "$T/nan.mlw" --format "${f%%:*}" --output "$T/${f#*:}" 2>&1); rc=$?
  expect 2 "$named" "export --format ${f%%:*} with NaN weights"
  [ ! -e "$T/${f#*:}" ] && ok || bad "export ${f%%:*} wrote a model from NaN weights"
done
# The same in NumPy arrays (--save-weights FILE.npz), read back by another program's numpy.
"$CLI" train "$T/sp.json" --steps 5 --no-record --save-weights "$T/w.npz" >/dev/null 2>&1 || bad "saving .npz weights failed"
if python3 -c 'import numpy' 2>/dev/null; then
  python3 - "$T/w.npz" "$T/inf.npz" <<'PY'
import numpy as np, sys
a = dict(np.load(sys.argv[1]))
a['dense_1/kernel'][1, 2] = np.inf
np.savez(sys.argv[2], **a)
PY
  out=$("$CLI" evaluate "$T/sp.json" --weights "$T/inf.npz" 2>&1); rc=$?
  expect 2 "array 'dense_1/kernel' in npz file '$T/inf.npz' holds +inf (value 6 of its 24)" "evaluate with inf .npz weights"
  out=$("$CLI" export "$T/sp.json" --weights "$T/inf.npz" --format onnx --output "$T/inf.onnx" 2>&1); rc=$?
  expect 2 "array 'dense_1/kernel' in npz file '$T/inf.npz' holds +inf" "export from inf .npz weights"
  [ ! -e "$T/inf.onnx" ] && ok || bad "export wrote a model from inf .npz weights"
fi

# ---- checkpoints: NaN weights or an impossible header refused on resume; temp files cleaned ---
{ ( exec "$CLI" train "$T/sp.json" --db "$T/ck.sqlite" --inject kill@step=15 --checkpoint-every 4steps --quiet >/dev/null 2>&1 ); } 2>/dev/null
"$CLI" runs list --db "$T/ck.sqlite" >/dev/null 2>&1
dir=$T/ck.sqlite.checkpoints/run-1
newest=$(ls "$dir"/*.mlck | tail -1)
cp "$newest" "$T/good.mlck"
# ck.py IN OUT nan|batch: rewrites a checkpoint with a valid checksum (format in Checkpoint.h).
cat > "$T/ck.py" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], 'rb').read()
body = bytearray(raw[8:-8])
L = struct.unpack('<I', body[4:8])[0]
head = json.loads(bytes(body[8:8 + L]))
if sys.argv[3] == 'batch':
    head['global_batch'] = -7
    h = json.dumps(head).encode()
    body = body[:4] + struct.pack('<I', len(h)) + h + body[8 + L:]
else:
    at = 8 + L + 8 + 4 * 28  # parameter 29: the second layer's fifth
    body[at:at + 4] = struct.pack('<f', float('nan'))
def fnv(d, h=0xcbf29ce484222325):
    for b in d:
        h = ((h ^ b) * 0x100000001b3) & 0xffffffffffffffff
    return h
open(sys.argv[2], 'wb').write(raw[:8] + bytes(body) + struct.pack('<Q', fnv(body)))
PY
python3 "$T/ck.py" "$T/good.mlck" "$newest" nan
out=$("$CLI" train --resume 1 --db "$T/ck.sqlite" 2>&1); rc=$?
expect 2 "holds NaN in layer 2 'dense_1' (Dense), value 5 of its 27" "resume from a NaN checkpoint"
has "$out" "$newest" && ok || bad "the NaN checkpoint's message does not name its file: $out"
has "$out" "learning rate" && has "$out" "lower the learning rate" && bad "the refusal blamed the learning rate: $out" || ok
python3 "$T/ck.py" "$T/good.mlck" "$newest" batch
out=$("$CLI" train --resume 1 --db "$T/ck.sqlite" 2>&1); rc=$?
expect 2 "its header says global_batch -7" "resume from a checkpoint with global_batch -7"
cp "$T/good.mlck" "$newest"
# A kill while a checkpoint was being written leaves .step-N.mlck.tmp-PID-K: the resume removes it.
touch "$dir/.step-00000016.mlck.tmp-4242-0" "$dir/.step-00000020.mlck.tmp-4242-1"
out=$("$CLI" train --resume 1 --db "$T/ck.sqlite" 2>&1); rc=$?
expect 0 "resuming run 1" "resume from the intact checkpoint"
[ -z "$(ls -A "$dir" | grep '\.tmp-')" ] && ok || bad "temporary checkpoint files survived the resume: $(ls -A "$dir")"

# ---- messages ---------------------------------------------------------------------------------
csvproj() { sed "s#\"kind\": \"spirals\", \"samples\": 300, \"classes\": 3, \"noise\": 0.1, \"seed\": 3#\"kind\": \"csv\", \"path\": \"$1\", \"label_column\": \"label\"#" "$T/sp.json"; }
printf 'label,a,b,a\n0,1,2,3\n1,4,5,6\n' > "$T/dup.csv"
csvproj "$T/dup.csv" > "$T/dup.json"
out=$("$CLI" train "$T/dup.json" --no-record 2>&1); rc=$?
expect 2 "has two columns named 'a' (columns 2 and 4)" "duplicate CSV header names"
printf 'label,x\n1,ab\000cd\n' > "$T/nul.csv"
csvproj "$T/nul.csv" > "$T/nul.json"
out=$("$CLI" train "$T/nul.json" --no-record 2>&1); rc=$?
expect 2 "holds text ('ab\\x00cd')" "a NUL byte in a CSV cell"
sed 's/"epochs": 3/"epochs": 1e20/' "$T/sp.json" > "$T/e20.json"
out=$("$CLI" train "$T/e20.json" --no-record 2>&1); rc=$?
expect 2 "must be at least 1 and at most 1000000, got 1e+20" "epochs 1e20"
has "$out" "2147483647" && bad "epochs 1e20 quoted the type's range: $out" || ok
python3 - "$T" <<'PY'
import struct, sys
n = 300
labels = bytearray(i % 10 for i in range(n)); labels[57] = 200
open(sys.argv[1] + '/img.idx', 'wb').write(struct.pack('>IIII', 0x803, n, 2, 2) + bytes(4 * n))
open(sys.argv[1] + '/lbl.idx', 'wb').write(struct.pack('>II', 0x801, n) + bytes(labels))
PY
sed "s#\"kind\": \"spirals\", \"samples\": 300, \"classes\": 3, \"noise\": 0.1, \"seed\": 3#\"kind\": \"idx\", \"train_images\": \"$T/img.idx\", \"train_labels\": \"$T/lbl.idx\"#; s#\"input_shape\": \[2\]#\"input_shape\": [2, 2]#" "$T/sp.json" > "$T/idx.json"
out=$("$CLI" train "$T/idx.json" --no-record 2>&1); rc=$?
expect 2 "sample 58 has label 200, far outside the labels 0..9" "one IDX label 200 among 0..9"
has "$out" "Units to 201" && bad "a damaged label asked for 201 units: $out" || ok

# ---- a read-only store: runs list and runs show work and change nothing ---------------------
mkdir -p "$T/ro"
cp "$T/runs.sqlite" "$T/ro/runs.sqlite"
RO=(env)
if mount -t tmpfs -o size=4m tmpfs "$T/ro" 2>/dev/null; then
  MNT=$T/ro
  cp "$T/runs.sqlite" "$T/ro/runs.sqlite"
  mount -o remount,ro "$T/ro" || bad "cannot remount the test tmpfs read-only"
  how="a read-only file system"
elif [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null; then
  chmod 755 "$T"; chmod 555 "$T/ro"; chmod 444 "$T/ro/runs.sqlite"
  RO=(setpriv --reuid=65534 --regid=65534 --clear-groups)  # root writes through permissions
  how="a read-only folder (as nobody)"
else
  chmod 555 "$T/ro"; chmod 444 "$T/ro/runs.sqlite"
  how="a read-only folder"
fi
before=$(md5sum < "$T/ro/runs.sqlite")
out=$("${RO[@]}" "$CLI" runs list --db "$T/ro/runs.sqlite" 2>&1); rc=$?
expect 0 "reliability spirals" "runs list on $how"
out=$("${RO[@]}" "$CLI" runs show 1 --db "$T/ro/runs.sqlite" 2>&1); rc=$?
expect 0 "Run 1" "runs show on $how"
out=$("${RO[@]}" "$CLI" runs rename 1 x --db "$T/ro/runs.sqlite" 2>&1); rc=$?
expect 2 "cannot be written" "runs rename on $how"
[ "$(md5sum < "$T/ro/runs.sqlite")" = "$before" ] && ok || bad "the read-only store changed"
[ -z "$(ls -A "$T/ro" | grep -v '^runs.sqlite$')" ] && ok || bad "files appeared beside the read-only store: $(ls -A "$T/ro")"

# ---- lessons ----------------------------------------------------------------------------------
mkdir -p "$T/lessons"
cp "$SRC/projects/lessons/01-copies-and-shards.json" "$SRC/projects/lessons/07-one-slow-device.json" "$T/lessons/"
echo '{"id": "broken", "title": ' > "$T/lessons/05-broken.json"
out=$("$CLI" learn list --dir "$T/lessons" 2>&1); rc=$?
expect 2 "05-broken.json" "learn list with a broken lesson"
has "$out" "copies-and-shards" && has "$out" "one-slow-device" && ok ||
  bad "the valid (copied, shipped) lessons were not listed beside the broken one: $out"
rm "$T/lessons/05-broken.json"
out=$("$CLI" learn list --dir "$T/lessons" 2>&1); rc=$?
expect 0 "one-slow-device" "copied shipped lessons find their project"

echo "reliability_test: $passes passed, $fails failed"
[ $fails -eq 0 ]
