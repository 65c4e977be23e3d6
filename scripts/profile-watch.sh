#!/usr/bin/env bash
# profile-watch.sh: watch's own CPU per statement at its default flags while
# sysbench oltp_read_write saturates a private sandbox, and a Go CPU profile
# of it (watch --cpuprofile) to see where that CPU goes. Prints the
# statements sysbench completed, watch's CPU (user + system ticks of 10 ms,
# /proc) over the run, µs per statement and sysbench's TPS. One run: repeat
# it, the VM's speed drifts.
#
# Usage: scripts/profile-watch.sh [BINARY]  (then: go tool pprof -top BINARY OUT/cpu.pprof)
# Environment: DURATION (seconds, 60), THREADS (8), OUT (where the profile
# goes, /tmp/gapscope-profile), PS (on; off: performance_schema off, the
# wire alone). Needs root (capture), sysbench and the
# mariadb client.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-60}; THREADS=${THREADS:-8}; OUT=${OUT:-/tmp/gapscope-profile}
WORK=$(mktemp -d /tmp/gapscope-profile-run.XXXXXX)
BENCH=profile-watch
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
GAPSCOPE=${1:-}
bench_binary
WATCH_PID=
trap bench_cleanup EXIT
mkdir -p "$OUT"
bench_oltp_lab
"$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --format json --cpuprofile "$OUT/cpu.pprof" >"$WORK/w.json" 2>"$WORK/w.err" &
WATCH_PID=$!
sleep 4 # watch connects, calibrates and opens the capture first
t0=$(ticks "$WATCH_PID")
"${SB[@]}" --time="$DURATION" run >"$WORK/sb.txt"
t1=$(ticks "$WATCH_PID")
kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch failed: $(tail -3 "$WORK/w.err")"
WATCH_PID=
q=$(sed -n 's/^ *total: *\([0-9]*\)$/\1/p' "$WORK/sb.txt" | head -1)
read -r tps _ < <(sb_result "$WORK/sb.txt")
python3 -c 'import sys; q, t, tps = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
print(f"statements {q}, watch CPU {t / 100:.2f} s: {t * 10000 / q:.2f} µs per statement; sysbench {tps} TPS; profile in '"$OUT"'/cpu.pprof")' "$q" "$((t1 - t0))" "$tps"
