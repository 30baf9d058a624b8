#!/usr/bin/env bash
# Same-run A/B of one bench script between two checkouts, alternating base and new.
#
#   bench/ab_trees.sh BASE_TREE PAIRS bench/SCRIPT.py [ARGS...]
#
# BASE_TREE is another checkout (e.g. `git worktree add /tmp/ab-base <commit>`); each of the
# PAIRS pairs runs the script from the base tree, then from this one, with the same Python
# (PYTHON, default python3), and prints each run's output under a "== base N" / "== new N"
# line. Read the figures of one pair against each other, and the spread over the pairs.
set -euo pipefail
base=$(cd "$1" && pwd)
pairs=$2
shift 2
new=$(cd "$(dirname "$0")/.." && pwd)
py=${PYTHON:-python3}
if [[ $py == */* ]]; then py="$(cd "$(dirname "$py")" && pwd)/$(basename "$py")"; fi
for i in $(seq 1 "$pairs"); do
  for side in base new; do
    tree=$base
    [ "$side" = new ] && tree=$new
    echo "== $side $i ($(git -C "$tree" rev-parse --short HEAD))"
    (cd "$tree" && "$py" "$@" 2>/dev/null) || echo "(exit status $?)"
  done
done
