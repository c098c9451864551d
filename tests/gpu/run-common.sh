# shellcheck shell=bash disable=SC2154,SC2034
# Sourced by tests/gpu/run.sh: the summary's rows, written out after every row and from a trap (so
# that a call cut off by its time limit still returns what ran), the time budget, and the runner of
# one step (in the background, so that the trap runs at once instead of after the step).

declare -a rows=()
status=0       # 1 once a row has failed
incomplete=0   # steps that ran out of their time (INCOMPLETE) or were not started (the budget)
running=""     # the step under way: a cut-off summary names it
cut=""         # the signal that stopped the run, if one did
finished=0     # the final summary is written
declare -a step_pids=()

now() { date +%s; }
fail() { status=1; }
# row NAME STATUS SECONDS DETAIL: STATUS is ok, PASS, FAIL, SKIP, none, INCOMPLETE or NOT RUN.
row() {
  rows+=("$(printf '%-38s %-10s %4ss  %s' "$1" "$2" "$3" "$4")")
  case $2 in INCOMPLETE | "NOT RUN") incomplete=$((incomplete + 1)) ;; esac
  flush
}

# Seconds a step may run: its own limit, or what is left of the pass's budget; 0 (do not start it)
# when under 15 s are left.
limit() {
  local left=$((deadline - $(now)))
  if [ "$left" -lt 15 ]; then echo 0; elif [ "$left" -lt "$1" ]; then echo "$left"; else echo "$1"; fi
}
no_time() { row "$1" "NOT RUN" 0 "not started: under 15 s left of the ${budget}s budget (GPU_CHECK_SECONDS)"; }
timed_out() { [ "$1" = 124 ] || [ "$1" = 137 ]; }
# Steps that need a GPU: SKIP, with the reason, where none is usable.
gpu_skip() {
  [ "$gpu_state" = no ] || return 1
  row "$1" SKIP 0 "no usable GPU: $gpu_why"
}

# run_step SECONDS LOG COMMAND...: the command under `timeout` (its own process group), waited for
# in a way a trapped signal interrupts. Returns the command's exit status (124/137: timed out).
run_step() {
  local lim=$1 log=$2 rc
  shift 2
  timeout -k 10 "$lim" "$@" >"$log" 2>&1 &
  step_pids=($!)
  wait "$!"
  rc=$?
  step_pids=()
  return $rc
}

result() {
  local r
  if [ $status != 0 ]; then
    r=FAIL
  elif [ "$gpu_state" = no ]; then
    r="NO GPU: $gpu_why (the GPU steps were skipped)"
  elif [ $incomplete -gt 0 ]; then
    r="INCOMPLETE: nothing failed, but $incomplete step(s) ran out of time or were not started"
  else
    r=PASS
  fi
  if [ -n "$cut" ]; then
    [ "$r" = PASS ] && r="nothing failed before"
    r="CUT OFF by $cut during ${running:-the summary}, $(($(now) - start)) s in: only the rows above ran; $r"
  elif [ $finished = 0 ] && [ -n "$running" ]; then
    r="RUNNING: $running (so far: $r)"
  fi
  echo "$r"
}

summary() {
  echo "==== Mirrorlab GPU check, $pass pass ($(hostname), $jobs cores, $(($(now) - start)) s; logs in gpu-logs.tar.gz)"
  case $gpu_state in
    yes) echo "GPU: $gpu_line" ;;
    no) echo "GPU: none usable: $gpu_why; the GPU steps are SKIPPED" ;;
    *) echo "GPU: ${gpu_line:-not yet known}" ;;
  esac
  local r
  for r in "${rows[@]}"; do echo "  $r"; done
  if [ "$pass" != correctness ]; then
    echo "---- GPU figures (medians; every figure in gpu-figures.txt)"
    report_figures
  fi
  echo "RESULT: $(result)"
}

# The summary, the figures and the logs, to $logs and (with the device tool) $OUT: each file
# replaced whole, so that a kill in between leaves the previous complete one.
flush() {
  summary >"$logs/summary.txt.new" && mv -f "$logs/summary.txt.new" "$logs/summary.txt"
  [ -n "${OUT:-}" ] && [ -d "$OUT" ] || return 0
  cp "$logs/summary.txt" "$OUT/gpu-summary.txt.new" && mv -f "$OUT/gpu-summary.txt.new" "$OUT/gpu-summary.txt"
  cp "$figures" "$OUT/gpu-figures.txt.new" && mv -f "$OUT/gpu-figures.txt.new" "$OUT/gpu-figures.txt"
  tar -C "$logs" -czf "$OUT/gpu-logs.tar.gz.new" --exclude=summary.txt.new . 2>/dev/null
  mv -f "$OUT/gpu-logs.tar.gz.new" "$OUT/gpu-logs.tar.gz" 2>/dev/null
  return 0
}

finish() {
  finished=1
  running=""
  flush
  echo
  cat "$logs/summary.txt"
}

# A signal (the device tool's time limit, ^C): stop the step under way, say so, write everything.
on_signal() {
  cut=$1
  trap - TERM INT HUP
  local p
  for p in "${step_pids[@]}"; do kill -TERM -- "-$p" 2>/dev/null || kill -TERM "$p" 2>/dev/null; done
  finished=1
  flush
  echo
  cat "$logs/summary.txt"
  exit 143
}
on_exit() { [ $finished = 1 ] || finish; }
trap 'on_signal SIGTERM' TERM
trap 'on_signal SIGINT' INT
trap 'on_signal SIGHUP' HUP
trap on_exit EXIT

# A gtest binary's row from its log: the counts, the first failures, and (when it ran out of time)
# the test it was in. Timed out with no failure so far: INCOMPLETE.
gtest_row() { # name log rc seconds-allowed started
  local name=$1 log=$2 rc=$3 lim=$4 t=$5 passed failed skipped detail why
  passed=$(grep -oP '^\[  PASSED  \] \K[0-9]+' "$log" | tail -1)
  failed=$(grep -oP '^\[  FAILED  \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  skipped=$(grep -oP '^\[  SKIPPED \] \K[0-9]+(?= tests?, listed below)' "$log" | tail -1)
  why=$(grep -A1 -E ': Skipped$' "$log" | grep -vE ': Skipped$|^--$' | sort | uniq -c | sort -rn | head -2 |
    sed -E 's/^ *([0-9]+) /\1x /' | tr '\n' ';' | cut -c1-160)
  detail="passed ${passed:-0}, failed ${failed:-0}, skipped ${skipped:-0}${why:+ ($why)}"
  if timed_out "$rc"; then
    local ok bad last
    ok=$(grep -c '^\[       OK \]' "$log")
    bad=$(grep -cE '^\[  FAILED  \] [A-Za-z_]+\.' "$log")
    last=$(grep -oP '^\[ RUN      \] \K\S+' "$log" | tail -1)
    detail="ran out of its ${lim}s in ${last:-?}: $ok passed, $bad failed by then"
    if [ "$bad" != 0 ]; then
      row "$name" FAIL $(($(now) - t)) "$detail; first: $(grep -m1 -oP '^\[  FAILED  \] \K\S+' "$log")"
      fail
    else
      row "$name" INCOMPLETE $(($(now) - t)) "$detail"
    fi
  elif [ "$rc" -gt 128 ]; then
    detail="crashed (signal $((rc - 128))) in $(grep -oP '^\[ RUN      \] \K\S+' "$log" | tail -1): $(grep -c '^\[       OK \]' "$log") passed, $(grep -cE '^\[  FAILED  \] [A-Za-z_]+\.' "$log") failed by then"
    row "$name" FAIL $(($(now) - t)) "$detail"
    fail
  elif [ "$rc" != 0 ] || [ "${failed:-0}" != 0 ]; then
    grep -E '^\[  FAILED  \]|Failure$|error:' "$log" | head -40
    row "$name" FAIL $(($(now) - t)) "$detail (exit $rc); first: $(grep -m1 -oP '^\[  FAILED  \] \K\S+' "$log")"
    fail
  else
    row "$name" ok $(($(now) - t)) "$detail"
  fi
}
