#!/usr/bin/env bash
# run_under_wm.sh PROGRAM [ARGS...]: runs a Qt program in Xvfb (1600x1000) under the openbox window
# manager, as a desktop would: the window manager frames the window and enforces its size hints.
# Fails (status 2) when openbox is missing or does not take the screen.
set -u
command -v xvfb-run >/dev/null && command -v openbox >/dev/null && command -v xprop >/dev/null ||
  { echo "run_under_wm.sh: needs xvfb-run, openbox and xprop (scripts/deps.sh installs them)" >&2; exit 2; }
if [ -z "${RUN_UNDER_WM_INNER:-}" ]; then
  export XDG_RUNTIME_DIR=${XDG_RUNTIME_DIR:-$(mktemp -d)}
  RUN_UNDER_WM_INNER=1 exec xvfb-run -a -s "-screen 0 1600x1000x24" "$0" "$@"
fi
openbox --sm-disable >/dev/null 2>&1 &
wm=$!
trap 'kill $wm 2>/dev/null; wait $wm 2>/dev/null' EXIT
# A window manager announces itself with _NET_SUPPORTING_WM_CHECK on the root window.
for _ in $(seq 1 50); do
  xprop -root _NET_SUPPORTING_WM_CHECK 2>/dev/null | grep -q "window id" && break
  sleep 0.1
done
xprop -root _NET_SUPPORTING_WM_CHECK 2>/dev/null | grep -q "window id" || { echo "run_under_wm.sh: openbox did not start" >&2; exit 2; }
QT_QPA_PLATFORM=xcb MIRRORLAB_REQUIRE_WM=1 "$@"
