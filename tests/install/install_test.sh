#!/usr/bin/env bash
# Installs Mirrorlab into a temporary prefix and uses it from outside the source tree the way a user
# would: the CLI's version, lessons and a short training run of the installed spirals example, the
# installed studio's first run (welcome page) in a real X window, the launcher entry and AppStream
# data validated, a damaged installed example and lesson named by their paths while the studio still
# starts; then builds the Debian packages and checks that every installed file is in them.
# Usage: tests/install/install_test.sh [BUILD_DIR]   (from scripts/test.sh; about a minute)
set -euo pipefail
SRC=$(cd "$(dirname "$0")/../.." && pwd)
BUILD=$(cd "${1:-$SRC/build}" && pwd)
T=$(mktemp -d /tmp/mirrorlab-install.XXXXXX)
trap 'rm -rf "$T"' EXIT
P=$T/prefix
fail() { echo "install test FAILED: $*" >&2; exit 1; }

cmake --install "$BUILD" --prefix "$P" >/dev/null
cd "$T"  # outside the source and build trees: nothing may be found there
export HOME=$T/home XDG_CONFIG_HOME=$T/home/.config XDG_DATA_HOME=$T/home/.local/share XDG_DATA_DIRS=$T/none
mkdir -p "$HOME"

for f in bin/mirrorlab-cli share/mirrorlab/projects/spirals.json share/mirrorlab/lessons/01-copies-and-shards.json \
         share/man/man1/mirrorlab-cli.1.gz share/bash-completion/completions/mirrorlab-cli; do
  [ -f "$P/$f" ] || fail "$f is not installed"
done
"$P/bin/mirrorlab-cli" --version | grep -q "^mirrorlab-cli [0-9]" || fail "mirrorlab-cli --version"
"$P/bin/mirrorlab-cli" learn list > learn.txt
grep -q "copies" learn.txt || { cat learn.txt; fail "learn list does not show the installed lessons"; }
"$P/bin/mirrorlab-cli" train "$P/share/mirrorlab/projects/spirals.json" --devices cpu:2 --steps 20 --db "$T/runs.sqlite" > train.txt
"$P/bin/mirrorlab-cli" runs list --db "$T/runs.sqlite" | grep -q "finished" || { cat train.txt; fail "the spirals run was not recorded"; }
# Several workers: the installed CLI finds the installed MPI plugin (lib/mirrorlab) under mpirun.
if [ -f "$BUILD/app/libmirrorlab_mpi.so" ]; then
  [ -f "$P/lib/mirrorlab/libmirrorlab_mpi.so" ] || fail "the MPI plugin is not installed in lib/mirrorlab"
  root=(); [ "$(id -u)" = 0 ] && root=(--allow-run-as-root)
  OMPI_MCA_btl_vader_single_copy_mechanism=none mpirun "${root[@]}" --oversubscribe -np 2 "$P/bin/mirrorlab-cli" train \
    "$P/share/mirrorlab/projects/spirals.json" --devices cpu:1 --steps 10 --no-record > mpi.txt 2>&1 ||
    { cat mpi.txt; fail "the installed CLI under mpirun -np 2"; }
  grep -q "worker 1 of 2" mpi.txt || { cat mpi.txt; fail "the installed CLI under mpirun does not run as 2 workers"; }
fi
bash -c "source '$P/share/bash-completion/completions/mirrorlab-cli'; COMP_WORDS=(mirrorlab-cli tr); COMP_CWORD=1; _mirrorlab_cli; [[ \${COMPREPLY[*]} == *train* ]]" \
  || fail "bash completion does not complete 'tr' to train"
man -l "$P/share/man/man1/mirrorlab-cli.1.gz" 2>/dev/null | grep -q "mirrorlab-cli train" || fail "the man page lacks the train command"

shot() {  # shot OUT.png : the installed studio in a real X window (Xvfb), no settings (a first run)
  rm -rf "$XDG_CONFIG_HOME"
  cat > "$T/shot.sh" <<'INNER'
"$1" > "$2.log" 2>&1 & pid=$!
sleep 5
xwd -root -silent | /usr/bin/convert xwd:- "$2"
kill "$pid"; wait "$pid" 2>/dev/null || true
INNER
  MIRRORLAB_DB=$T/runs.sqlite timeout 60 xvfb-run -a -s "-screen 0 1600x1000x24" bash "$T/shot.sh" "$P/bin/mirrorlab" "$1" || true
  [ -s "$1" ] || { cat "$1.log"; fail "no screenshot of the installed studio"; }
  # A real window: many distinct colours, not a blank or single-colour screen.
  local colours
  colours=$(/usr/bin/convert "$1" -format '%k' info:)
  [ "$colours" -gt 200 ] || fail "the screenshot $1 is blank ($colours colours)"
}
if [ -x "$P/bin/mirrorlab" ]; then
  for f in share/applications/io.github.mirrorlab.Mirrorlab.desktop share/metainfo/io.github.mirrorlab.Mirrorlab.metainfo.xml \
           share/icons/hicolor/scalable/apps/io.github.mirrorlab.Mirrorlab.svg share/icons/hicolor/48x48/apps/io.github.mirrorlab.Mirrorlab.png \
           share/icons/hicolor/256x256/apps/io.github.mirrorlab.Mirrorlab.png share/man/man1/mirrorlab.1.gz; do
    [ -f "$P/$f" ] || fail "$f is not installed"
  done
  desktop-file-validate "$P/share/applications/io.github.mirrorlab.Mirrorlab.desktop"
  appstreamcli validate --no-net "$P/share/metainfo/io.github.mirrorlab.Mirrorlab.metainfo.xml" >/dev/null
  shot "$T/studio.png"
  # Bad input: a damaged installed example and lesson. The studio still starts (a real window) and
  # names both files by their paths (the CLI too, exiting non-zero).
  echo '{"schema_version": 1, "name": ' > "$P/share/mirrorlab/projects/fashion-mlp.json"
  echo 'not json' > "$P/share/mirrorlab/lessons/01-copies-and-shards.json"
  if "$P/bin/mirrorlab-cli" learn list > bad.txt 2>&1; then fail "learn list accepted a damaged lesson"; fi
  grep -q "$P/share/mirrorlab/lessons/01-copies-and-shards.json" bad.txt || { cat bad.txt; fail "the damaged lesson is not named"; }
  shot "$T/damaged.png"  # the studio writes what its dialogs and welcome page report to stderr too
  grep -q "$P/share/mirrorlab/projects/fashion-mlp.json" "$T/damaged.png.log" || { cat "$T/damaged.png.log"; fail "the damaged example is not named"; }
  grep -q "$P/share/mirrorlab/lessons/01-copies-and-shards.json" "$T/damaged.png.log" || { cat "$T/damaged.png.log"; fail "the damaged lesson is not named"; }
fi
[ -n "${MIRRORLAB_INSTALL_SHOTS:-}" ] && cp "$T"/*.png "$MIRRORLAB_INSTALL_SHOTS"/

# The Debian packages hold every installed file (the damaged copies above are in $P only).
rm -rf "$BUILD/packages"
(cd "$BUILD" && cpack -G DEB > "$T/cpack.log" 2>&1) || { cat "$T/cpack.log"; fail "cpack"; }
: > contents.txt
for deb in "$BUILD"/packages/*.deb; do
  dpkg-deb -c "$deb" | awk '{print $6}' | sed 's|^\./usr/|/|' >> contents.txt
  dpkg-deb -f "$deb" Package Depends | tr '\n' ' '; echo
done
(cd "$P" && find . -type f | sed 's|^\./|/|') | sort > installed.txt
missing=$(sort contents.txt | comm -23 installed.txt -)
[ -z "$missing" ] || fail "installed but in no .deb: $missing"
echo "install test passed: $(wc -l < installed.txt) files installed and packaged in $(ls "$BUILD"/packages/*.deb | wc -l) packages"
