#!/usr/bin/env bash
# Lists commit subjects of 72 characters or more in a range (default: the last 50 commits).
# Usage: scripts/check-commits.sh [RANGE]. Exit 1 when there is one. The hook in .githooks/
# refuses such a subject at commit time (git config core.hooksPath .githooks).
set -euo pipefail
cd "$(dirname "$0")/.."
range=${1:-HEAD~50..HEAD}
long=$(git log --format='%h %s' "$range" | awk '{ s = $0; sub(/^[^ ]+ /, "", s); if (length(s) >= 72) print }')
[ -z "$long" ] && exit 0
echo "commit subjects of 72 characters or more (put the detail in the body):" >&2
echo "$long" >&2
exit 1
