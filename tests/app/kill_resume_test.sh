#!/usr/bin/env bash
# A run killed (SIGKILL) between its two writes, over and over, keeps one stored step row per
# step. A checkpoint is two writes: the store's commit of the steps it covers, then the file. The
# process dies at the exact point between them (kill:before-checkpoint@step=N: the store holds the
# steps, the file is not there) or just after both (kill:after-checkpoint@step=N: the file is in
# place, its CheckpointSaved not yet recorded), alternately, CYCLES times in one run; each time it
# is resumed. After every kill: the newest checkpoint is never ahead of the stored steps, and the
# rows are exactly steps 1..M once each. At the end: finished, steps 1..T once each, every epoch,
# the final weights byte-identical to a straight run's, and `--report` of the last resume holds
# every step and epoch of the run. No sleeps: the kills are injected at those points.
# Usage: kill_resume_test.sh CLI [CYCLES]
set -u
CLI=$1; CYCLES=${2:-100}
T=$(mktemp -d)
trap 'rm -rf "$T"' EXIT
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }

EVERY=2        # a checkpoint every 2 steps
SPE=10         # 240 samples / batch 24
EPOCHS=$(( CYCLES * 2 * EVERY / SPE + 2 ))  # room for every cycle's kill (at most 2 checkpoints ahead)
TOTAL=$((EPOCHS * SPE))
cat > "$T/p.json" <<JSON
{"schema_version": 1, "name": "kill resume",
 "model": {"input_shape": [2], "layers": [{"type": "Dense", "units": 8, "activation": "tanh"},
                                         {"type": "Dense", "units": 3, "activation": "softmax"}]},
 "data": {"kind": "spirals", "samples": 300, "classes": 3, "noise": 0.1, "seed": 3, "validation_split": 0.2},
 "training": {"epochs": $EPOCHS, "batch_size": 24, "optimizer": {"name": "adam", "learning_rate": 0.01}, "seed": 5},
 "distribute": {"devices": "cpu:1"}}
JSON
DB=$T/k.sqlite
CK=$T/k.sqlite.checkpoints/run-1

# Prints "rows distinct min max epochs status steps" of run 1.
state() {
  python3 - "$DB" <<'PY'
import sqlite3, sys
c = sqlite3.connect('file:%s?mode=ro' % sys.argv[1], uri=True)
n, d, lo, hi = c.execute('SELECT count(*), count(DISTINCT step), coalesce(min(step),0), coalesce(max(step),0) FROM steps WHERE run_id=1').fetchone()
e = c.execute('SELECT count(*) FROM epochs WHERE run_id=1').fetchone()[0]
status, steps = c.execute('SELECT status, steps FROM runs WHERE id=1').fetchone()
print(n, d, lo, hi, e, status, steps)
PY
}
newest_checkpoint() { ls "$CK" 2>/dev/null | grep -oP '^step-0*\K[0-9]+(?=\.mlck$)' | sort -n | tail -1; }

"$CLI" train "$T/p.json" --db "$T/straight.sqlite" --save-weights "$T/straight.mlw" --quiet >/dev/null || bad "the straight run failed"

# kill_at SPEC ARGS...: the process must die by SIGKILL; then the store and the checkpoints agree.
kill_at() {
  local spec=$1; shift
  { ( exec "$CLI" train "$@" --db "$DB" --inject "$spec" --quiet >/dev/null 2>"$T/err" ); } 2>/dev/null
  local rc=$?
  [ $rc -eq 137 ] || { bad "$spec: exit $rc, not 137 (SIGKILL): $(tail -3 "$T/err")"; return 1; }
  "$CLI" runs list --db "$DB" >/dev/null  # marks the dead run interrupted
  local s ck; s=$(state); ck=$(newest_checkpoint)
  read -r n d lo hi e status steps <<<"$s"
  if [ "$n" = "$d" ] && [ "$n" = "$hi" ] && { [ "$n" = 0 ] || [ "$lo" = 1 ]; } && [ "$status" = interrupted ] && [ "$steps" = "$hi" ]; then
    ok
  else
    bad "$spec: store after the kill: rows $n, distinct $d, steps $lo..$hi, status $status, steps=$steps (want rows 1..M once each)"
  fi
  # The invariant that keeps a resume whole: no checkpoint ahead of the stored steps.
  if [ -n "$ck" ] && [ "$ck" -gt "$hi" ]; then bad "$spec: checkpoint at step $ck but the store holds steps 1..$hi"; else ok; fi
  RESUME_FROM=${ck:-0}
  return 0
}

# The first process dies at its first checkpoint's file; each resume goes one or two checkpoints
# further and dies before or after the file, in turn.
RESUME_FROM=0
kill_at "kill:after-checkpoint@step=$EVERY" "$T/p.json" --checkpoint-every ${EVERY}steps
cycles=1
for i in $(seq 2 "$CYCLES"); do
  if [ $((i % 2)) = 0 ]; then where=before; else where=after; fi
  at=$((RESUME_FROM + EVERY * (1 + i % 3 / 2)))
  [ "$at" -lt "$TOTAL" ] || { bad "cycle $i: the run is too short for its kills (step $at of $TOTAL)"; break; }
  prev=$RESUME_FROM
  kill_at "kill:$where-checkpoint@step=$at" --resume 1 || break
  cycles=$((cycles + 1))
  # Killed before its file, the checkpoint is the previous one; after it, the new one.
  want=$([ $where = after ] && echo "$at" || echo "$((at - EVERY))")
  [ "$RESUME_FROM" = "$want" ] && ok || bad "cycle $i ($where step $at, from $prev): newest checkpoint $RESUME_FROM, want $want"
done

out=$("$CLI" train --resume 1 --db "$DB" --save-weights "$T/resumed.mlw" --report "$T/report.json" 2>&1) ||
  bad "the last resume failed: $(tail -3 <<<"$out")"
read -r n d lo hi e status steps <<<"$(state)"
[ "$n $d $lo $hi $e $status $steps" = "$TOTAL $TOTAL 1 $TOTAL $EPOCHS finished $TOTAL" ] && ok ||
  bad "the finished run holds rows $n (distinct $d, steps $lo..$hi), $e epochs, $status, steps=$steps; want $TOTAL rows and $EPOCHS epochs"
cmp -s "$T/straight.mlw" "$T/resumed.mlw" && ok || bad "the weights after $cycles kills differ from the straight run's"
rep=$(python3 -c "
import json, sys
r = json.load(open(sys.argv[1]))
print(len(r['step_loss']), len(r['step_lr']), [e['epoch'] for e in r['epochs']] == list(range(1, int(sys.argv[2]) + 1)), r['steps'])
" "$T/report.json" "$EPOCHS")
[ "$rep" = "$TOTAL $TOTAL True $TOTAL" ] && ok || bad "--report after the resumes holds (step losses, lrs, epochs 1..$EPOCHS, steps) = $rep"
# A sweep killed in its first point (the project's own kill fault): its process gone, it reads
# interrupted, not running, and `sweep --resume` takes it up again (and dies at the same fault).
python3 - "$T/p.json" "$T/killed.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
p['distribute']['faults'] = ['kill@step=3']
json.dump(p, open(sys.argv[2], 'w'))
PY
SW=$T/sweep.sqlite
{ ( exec "$CLI" sweep "$T/killed.json" --lr 0.01,0.02 --epochs 1 --db "$SW" >/dev/null 2>&1 ); } 2>/dev/null
rc=$?; [ $rc -eq 137 ] && ok || bad "the sweep with kill@step=3 exited $rc, not 137"
out=$("$CLI" sweep --list --db "$SW" 2>&1)
grep -q "interrupted" <<<"$out" && ! grep -q "running" <<<"$out" && ok || bad "a killed sweep is listed as: $out"
out=$("$CLI" sweep --show 1 --db "$SW" 2>&1)
grep -q "interrupted" <<<"$out" && ok || bad "the killed sweep's point is not interrupted: $out"
{ ( exec "$CLI" sweep --resume 1 --db "$SW" >/dev/null 2>&1 ); } 2>/dev/null
rc=$?; [ $rc -eq 137 ] && ok || bad "sweep --resume of the interrupted sweep exited $rc (want it to run, and die at its fault: 137)"

echo "kill-resume: $cycles kill -9 cycles between a checkpoint's two writes, a run of $TOTAL steps"
echo "kill-resume: $passes passed, $fails failed"
[ $fails -eq 0 ]
