#!/usr/bin/env bash
# `runs show` and `runs compare` of a multi-worker run (2 workers on hosts a and b, 2 replicas
# each) as rank 0 records it: the workers line, and the network time of the cross-worker hop next
# to the all-reduce; a one-worker run shows neither.
set -u
CLI=$1; WRITE=$2
T=$(mktemp -d); trap 'rm -rf "$T"' EXIT
export MIRRORLAB_DB=$T/runs.sqlite
fails=0; passes=0
ok() { passes=$((passes+1)); }
bad() { echo "FAIL: $*"; fails=$((fails+1)); }
expect_contains() { # name output needle
  if grep -qF -- "$3" <<<"$2"; then ok; else bad "$1: output lacks '$3'"; echo "$2" | head -40; fi
}
expect_row() { # name output extended-regex (one whole line)
  if grep -qE -- "$3" <<<"$2"; then ok; else bad "$1: no line matches '$3'"; echo "$2" | tail -12; fi
}
expect_lacks() { # name output needle
  if grep -qF -- "$3" <<<"$2"; then bad "$1: output has '$3'"; else ok; fi
}

two=$("$WRITE" "$MIRRORLAB_DB" 2) || bad "writing the two-worker run"
one=$("$WRITE" "$MIRRORLAB_DB" 1) || bad "writing the one-worker run"

out=$("$CLI" runs show "$two" 2>&1)
expect_contains "show workers" "$out" "  workers   2 on a, b (2 replicas each)"
expect_contains "show devices" "$out" "b/worker2/cpu:1 (simulated)"
expect_row "show network column" "$out" '^ +REPLICA +DEVICE +STEPS +SAMPLES +COMPUTE +ALLREDUCE +NETWORK +WAIT +COMPUTE % +ALLREDUCE % +NETWORK % +WAIT %$'
# Replica 0 carries the hop: 10 steps x 4 ms = 0.040 s of 0.200 s, 20.0%; replica 1 waits instead.
# Columns: compute, all-reduce, network, wait, then their shares.
expect_row "replica 0 row" "$out" '^ +0 +a/worker1/cpu:0 \(simulated\) +10 +160 +0\.140 s +0\.020 s +0\.040 s +0\.000 s +70\.0% +10\.0% +20\.0% +0\.0%$'
expect_row "replica 1 row" "$out" '^ +1 +a/worker1/cpu:1 \(simulated\) +10 +160 +0\.140 s +0\.020 s +0\.000 s +0\.040 s +70\.0% +10\.0% +0\.0% +20\.0%$'
expect_row "replica 2 row" "$out" '^ +2 +b/worker2/cpu:0 \(simulated\) +10 +160 +0\.140 s +0\.020 s +0\.040 s +0\.000 s +70\.0% +10\.0% +20\.0% +0\.0%$'

out=$("$CLI" runs show "$one" 2>&1)
expect_lacks "one worker: no workers line" "$out" "replicas each"
expect_lacks "one worker: no network column" "$out" "NETWORK"
expect_row "one worker: replicas" "$out" '^ +REPLICA +DEVICE +STEPS +SAMPLES +COMPUTE +ALLREDUCE +WAIT +COMPUTE % +ALLREDUCE % +WAIT %$'

out=$("$CLI" runs compare "$one" "$two" 2>&1)
expect_row "compare workers" "$out" '^ +workers +1 +2$'

echo "runs workers: $passes passed, $fails failed"
[ $fails -eq 0 ]
