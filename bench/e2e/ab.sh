#!/usr/bin/env bash
# Builds against builds: seconds per epoch of two or more mirrorlab-cli binaries (an older commit,
# the default Release build, a MIRRORLAB_NATIVE=ON build...) on the same projects and devices,
# interleaved in rounds with the order changing every round; prints each binary's median over the
# rounds (each round's value the median of its epochs after the first), the spread, and its ratio
# to the first binary (above 1: faster than the first).
#   bench/e2e/ab.sh [-e EPOCHS] [-r ROUNDS] NAME=PATH/TO/mirrorlab-cli NAME=PATH ...
#   CASES="PROJECT:DEVICES ..."   (default: the small and the wide MLP, each on cpu:2 and on cpu:1)
# Every binary runs with --no-record, so the builds never share or migrate a run store.
set -euo pipefail
cd "$(dirname "$0")/../.."
EPOCHS=3
ROUNDS=3
while getopts "e:r:" o; do
  case $o in
    e) EPOCHS=$OPTARG ;;
    r) ROUNDS=$OPTARG ;;
    *) exit 2 ;;
  esac
done
shift $((OPTIND - 1))
[ $# -ge 2 ] || { echo "usage: bench/e2e/ab.sh [-e EPOCHS] [-r ROUNDS] NAME=CLI NAME=CLI ..." >&2; exit 2; }
CASES=${CASES:-"projects/fashion-mlp.json:cpu:2 projects/fashion-mlp.json:cpu:1 bench/e2e/wide-mlp.json:cpu:2 bench/e2e/wide-mlp.json:cpu:1"}
NAMES=()
declare -A CLI
for a in "$@"; do
  n=${a%%=*} p=${a#*=}
  [ -x "$p" ] || { echo "ab.sh: $p (for $n) is not an executable" >&2; exit 2; }
  NAMES+=("$n")
  CLI[$n]=$p
done
OUT=$(mktemp -d)
echo "load at start: $(cut -d' ' -f1-3 /proc/loadavg)"
for round in $(seq 1 "$ROUNDS"); do
  for c in $CASES; do
    proj=${c%%:*} dev=${c#*:}
    order=$(printf '%s\n' "${NAMES[@]}" | python3 -c "import sys,random; r=[l.strip() for l in sys.stdin]; random.Random($round*7+len('$c')).shuffle(r); print(' '.join(r))")
    for n in $order; do
      rep=$OUT/$n-$round-$(basename "$proj" .json)-${dev/:/}.json
      "${CLI[$n]}" train "$proj" --epochs "$EPOCHS" --devices "$dev" --quiet --no-record --report "$rep" >/dev/null
      s=$(python3 -c 'import json,sys; e=[x["seconds"] for x in json.load(open(sys.argv[1]))["epochs"]]; e=sorted(e[1:] if len(e)>2 else e); print(e[len(e)//2])' "$rep")
      echo "$round $c $n $s" >> "$OUT/rounds.txt"
    done
  done
  echo "round $round done (load $(cut -d' ' -f1 /proc/loadavg))" >&2
done
echo "load at end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$OUT/rounds.txt" "${NAMES[@]}" <<'PY'
import sys, statistics as st
from collections import defaultdict
v = defaultdict(list)
cases = []
for line in open(sys.argv[1]):
    r, c, n, s = line.split()
    v[(c, n)].append(float(s))
    if c not in cases: cases.append(c)
names = sys.argv[2:]
print("\n%-36s %-10s %9s %17s %9s" % ("project:devices", "build", "s/epoch", "spread", "vs " + names[0]))
for c in cases:
    base = st.median(v[(c, names[0])])
    label = c
    for n in names:
        x = v[(c, n)]
        print("%-36s %-10s %9.4f %8.4f-%-8.4f %8.3fx" % (label, n, st.median(x), min(x), max(x), base / st.median(x)))
        label = ""
PY
echo "raw: $OUT"
