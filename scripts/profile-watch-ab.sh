#!/usr/bin/env bash
# profile-watch-ab.sh: watch's CPU per statement for two or more builds,
# alternated round by round (scripts/profile-watch.sh for each), so that the
# VM's drift, which moves one build's figure by a third across hours, favours
# none. Prints per round and build the µs of CPU per statement and sysbench's
# TPS, then each build's median; every run's CPU profile is kept in
# OUT/NAME-ROUND/cpu.pprof (go tool pprof -top FILE).
#
# Usage: scripts/profile-watch-ab.sh BINARY... (a wrapper script setting
# an environment variable, e.g. GOGC, counts as a build)
# Environment: ROUNDS (3), DURATION (seconds per run, 30), THREADS (8),
# OUT (/tmp/gapscope-profile-ab). Needs what profile-watch.sh needs.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -ge 2 ] || { echo "usage: $0 BINARY BINARY..." >&2; exit 2; }
ROUNDS=${ROUNDS:-3}; OUT=${OUT:-/tmp/gapscope-profile-ab}
export DURATION=${DURATION:-30} THREADS=${THREADS:-8}
RESULTS=$(mktemp /tmp/gapscope-profile-ab.XXXXXX)
trap 'rm -f "$RESULTS"' EXIT
for r in $(seq 1 "$ROUNDS"); do
  for b in "$@"; do
    name=$(basename "$b")
    line=$(OUT="$OUT/$name-$r" scripts/profile-watch.sh "$b" | tail -1)
    us=$(sed -n 's/.*: \([0-9.]*\) µs per statement.*/\1/p' <<<"$line")
    tps=$(sed -n 's/.*sysbench \([0-9.]*\) TPS.*/\1/p' <<<"$line")
    echo "round $r/$ROUNDS $name: $us µs per statement, sysbench $tps TPS"
    echo "$name $us" >>"$RESULTS"
  done
done
python3 - "$RESULTS" "$@" <<'EOF'
import os, statistics, sys
runs = {}
for line in open(sys.argv[1]):
    name, us = line.split()
    runs.setdefault(name, []).append(float(us))
for b in sys.argv[2:]:
    v = runs[os.path.basename(b)]
    print(f"{os.path.basename(b)}: median {statistics.median(v):.2f} µs per statement (min {min(v):.2f}, max {max(v):.2f}) over {len(v)} rounds")
EOF
