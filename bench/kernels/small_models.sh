#!/usr/bin/env bash
# The lessons' small models on one replica at 1 thread, 2 threads and the default team (chosen by the
# step's work, nn/TeamSize.h), and on cpu:2: bench_step's BM_SmallModels, interleaved in REPS
# repetitions (default 7); prints the median microseconds per step (min-max), each variant against
# 1 thread, and the goal: the default no more than 1.1x slower than 1 thread.
#   bench/kernels/small_models.sh [REPS]        (after scripts/build.sh)
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BENCH_STEP:-build/bench/kernels/bench_step}
[ -x "$BIN" ] || { echo "small_models.sh: no $BIN: run scripts/build.sh first" >&2; exit 2; }
echo "load before: $(cut -d' ' -f1-3 /proc/loadavg)"
"$BIN" --benchmark_filter='BM_SmallModels' --benchmark_enable_random_interleaving=true \
  --benchmark_repetitions="${1:-7}" --benchmark_format=json 2>/dev/null | python3 -c '
import json, re, statistics as st, sys
from collections import defaultdict
models = {0: "spirals 2-64-64-3 b64", 1: "wine-sized 13-32-3 b32", 2: "breast-cancer-sized 30-32-2 b32"}
variants = {1: "cpu:1 x 1 thread", 2: "cpu:1 x 2 threads", 0: "cpu:1 default team", 3: "cpu:2"}
t, team = defaultdict(list), {}
for b in json.load(sys.stdin)["benchmarks"]:
    if b.get("run_type") != "iteration": continue
    m = re.search(r"model:(\d)/variant:(\d)", b["name"])
    k = (int(m.group(1)), int(m.group(2)))
    t[k].append(b["real_time"])  # microseconds per step
    team[k] = int(b["team_threads"])
worst = 0.0
print("%-32s %-22s %12s %19s %10s" % ("model", "variant", "us/step", "spread", "vs 1 thread"))
for mi, mname in models.items():
    one = st.median(t[(mi, 1)])
    for vi, vname in variants.items():
        x = t[(mi, vi)]
        extra = " (team %s)" % ("every core" if team[(mi, vi)] == 0 else team[(mi, vi)]) if vi == 0 else ""
        print("%-32s %-22s %12.1f %19s %9.2fx%s" % (mname, vname, st.median(x), "%.1f-%.1f" % (min(x), max(x)), st.median(x) / one, extra))
        mname = ""
    worst = max(worst, st.median(t[(mi, 0)]) / one)
print("goal: the default team no more than 1.1x the 1-thread step: worst %.2fx, %s" % (worst, "met" if worst <= 1.1 else "MISSED"))
'
echo "load after: $(cut -d' ' -f1-3 /proc/loadavg)"
