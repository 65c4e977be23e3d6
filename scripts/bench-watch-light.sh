#!/usr/bin/env bash
# bench-watch-light.sh: what `gapscope watch` costs at light load and just
# after it, where its polls, not the statements, are most of its CPU. On
# a private sandbox (the statement consumers on, as bench_oltp_lab makes
# it) watch runs at its defaults (--iface lo, JSON at the end); sysbench
# oltp_read_write then runs at each of RATES transactions a second in
# turn, and watch's CPU (user + system ticks of /proc) and its threads'
# context switches are read over WINDOW seconds of each, 5 s into it. A
# rate of 0 is no load: within a minute of the last statement the server
# counts as active and watch keeps its busy pace (docs/design.md). At the
# end it prints the running scans made and skipped, the history_long reads
# and the statements seen and joined (the JSON report).
#
# Usage: scripts/bench-watch-light.sh [BINARY]
# Environment: RATES ("25 250 0"), WINDOW (15), THREADS (8). Needs root
# (capture), sysbench and the mariadb client.
set -euo pipefail
cd "$(dirname "$0")/.."
RATES=${RATES:-25 250 0}; WINDOW=${WINDOW:-15}; THREADS=${THREADS:-8}
WORK=$(mktemp -d /tmp/gapscope-light.XXXXXX)
BENCH=bench-watch-light
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
GAPSCOPE=${1:-}
bench_binary
WATCH_PID=
trap bench_cleanup EXIT
bench_oltp_lab
switches() { cat /proc/"$1"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
"$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --format json >"$WORK/w.json" 2>"$WORK/w.err" &
WATCH_PID=$!
sleep 5 # watch connects, calibrates and opens the capture first
echo "$BENCH: watch's CPU and context switches over ${WINDOW} s at each rate (tx/s)"
for rate in $RATES; do
  sb=
  if [ "$rate" != 0 ]; then
    "${SB[@]}" --rate="$rate" --time=$((WINDOW + 10)) run >/dev/null & sb=$!
    sleep 5
  fi
  t0=$(ticks "$WATCH_PID"); c0=$(switches "$WATCH_PID")
  sleep "$WINDOW"
  t1=$(ticks "$WATCH_PID"); c1=$(switches "$WATCH_PID")
  printf 'rate %4s: watch %4d ms of CPU, %4d context switches a second\n' "$rate" $(((t1 - t0) * 10)) $(((c1 - c0) / WINDOW))
  [ -z "$sb" ] || wait "$sb"
done
kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch failed: $(tail -3 "$WORK/w.err")"
WATCH_PID=
python3 -c 'import json, sys
r = json.load(open(sys.argv[1]))
def find(o):
    if isinstance(o, dict):
        if "running_scans" in o: return o
        for v in o.values():
            f = find(v)
            if f: return f
    if isinstance(o, list):
        for v in o:
            f = find(v)
            if f: return f
s = find(r) or {}
print("running scans made %s, skipped %s" % (s.get("running_scans"), s.get("running_scans_skipped", 0)))
c = r.get("coverage", {})
print("history_long reads %s (ring lost %s rows); statements seen %s, joined %s" % (s.get("polls"), s.get("ring_lost"), c.get("seen"), c.get("joined")))' "$WORK/w.json"
