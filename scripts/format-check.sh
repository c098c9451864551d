#!/usr/bin/env bash
# Checks that the C++ sources follow .clang-format (clang-format 14); lists the files that do not
# and exits non-zero. --fix rewrites them in place instead. Needs the clang-format package.
set -euo pipefail
cd "$(dirname "$0")/.."
command -v clang-format >/dev/null || { echo "format-check: clang-format is missing (apt-get install clang-format)" >&2; exit 2; }
mapfile -t files < <(git ls-files -- 'core/*.h' 'core/*.cpp' 'core/*.cu' 'ui/*.h' 'ui/*.cpp' 'app/*.h' 'app/*.cpp' \
                                      'tests/*.h' 'tests/*.cpp' 'bench/*.h' 'bench/*.cpp' 'bench/*.cu' 'fuzz/*.h' 'fuzz/*.cpp')
if [ "${1:-}" = "--fix" ]; then
  clang-format -i "${files[@]}"
  exit 0
fi
bad=()
for f in "${files[@]}"; do
  clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad+=("$f")
done
if [ ${#bad[@]} -gt 0 ]; then
  printf 'not formatted (run scripts/format-check.sh --fix):\n' >&2
  printf '  %s\n' "${bad[@]}" >&2
  exit 1
fi
echo "format-check: ${#files[@]} files follow .clang-format"
