#!/usr/bin/env bash
# bench-watch-cpu.sh: what `gapscope watch` itself costs the host, by
# per-process accounting rather than throughput (which this VM's noise
# swamps). A private sandbox runs sysbench oltp_read_write at a fixed rate
# (not saturating: RATE transactions/s) while watch runs with each of
# SETTINGS; after SETTLE seconds the script reads, over WINDOW seconds,
# watch's CPU (user + system ticks of 10 ms, /proc) and its context switches
# (all threads), then stops watch and reads how many wire statements it
# reported: CPU per statement followed, and the share of them joined.
#
# Environment: SETTINGS (watch flag sets separated by ";", "defaults" for
# none; default "--sample 1024;--cpu-budget 0;defaults"),
# ROUNDS (2), RATE (600), THREADS (8), SETTLE (8), WINDOW (10),
# GAPSCOPE (binary; built into a temp dir when unset: set it to compare two
# commits). Needs root (capture) and sysbench.
set -euo pipefail
cd "$(dirname "$0")/.."

SETTINGS=${SETTINGS:---sample 1024;--cpu-budget 0;defaults}
ROUNDS=${ROUNDS:-2}; RATE=${RATE:-600}; THREADS=${THREADS:-8}; SETTLE=${SETTLE:-8}; WINDOW=${WINDOW:-10}
WORK=$(mktemp -d /tmp/gapscope-bench-cpu.XXXXXX)
BENCH=bench-watch-cpu
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
bench_binary
LAB="$WORK/lab"
WATCH_PID=
cleanup() {
  [ -n "$WATCH_PID" ] && kill -INT "$WATCH_PID" 2>/dev/null || true
  pkill -f "sysbench.*--mysql-port=${PORT:-none}" 2>/dev/null || true
  "$GAPSCOPE" lab down --dir "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

bench_lab --opt=--performance-schema=ON
SB=(sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
    --mysql-db=sbtest --tables=4 --table-size=20000 --threads="$THREADS" --rate="$RATE")
mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE sbtest"
"${SB[@]}" prepare >/dev/null

switches() { cat /proc/"$1"/task/*/status 2>/dev/null | awk '/ctxt_switches/ {s += $2} END {print s}'; }

echo "bench-watch-cpu: sysbench $THREADS threads at $RATE tx/s; $SETTLE s settle, $WINDOW s window; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-22s %10s %14s %16s %14s %8s\n" "watch flags" "ticks/s" "% of $(nproc) CPUs" "ctx switches/s" "µs/statement" "joined"
IFS=';' read -r -a sets <<<"$SETTINGS"
for r in $(seq 1 "$ROUNDS"); do
  for flags in "${sets[@]}"; do
    [ "$flags" = defaults ] && flags=""
    "${SB[@]}" --time=$((SETTLE + WINDOW + 4)) run >/dev/null &
    sb=$!
    # shellcheck disable=SC2086 # flags are words
    "$GAPSCOPE" watch --dsn "$DSN" --iface lo --enable-consumers --no-live --format json $flags >"$WORK/w.json" 2>"$WORK/w.err" &
    WATCH_PID=$!
    sleep "$SETTLE"
    kill -0 "$WATCH_PID" 2>/dev/null || die "watch exited: $(cat "$WORK/w.err")"
    t0=$(ticks "$WATCH_PID"); c0=$(switches "$WATCH_PID")
    sleep "$WINDOW"
    t1=$(ticks "$WATCH_PID"); c1=$(switches "$WATCH_PID")
    kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch failed: $(tail -3 "$WORK/w.err")"
    WATCH_PID=
    wait "$sb" || true
    read -r cpu wire joined < <(python3 -c "import json; d = json.load(open('$WORK/w.json')); print(d['own']['cpu_seconds'], d['join']['Wire'], d['join']['Joined'])")
    python3 - "$flags" "$t0" "$t1" "$c0" "$c1" "$WINDOW" "$(nproc)" "$cpu" "$wire" "$joined" <<'PY'
import sys
flags, t0, t1, c0, c1, win, cpus, cpu, wire, joined = sys.argv[1], *map(float, sys.argv[2:])
tps = (t1 - t0) / win
per = cpu * 1e6 / wire if wire else float("nan")
share = 100 * joined / wire if wire else float("nan")
print(f"{flags or '(defaults)':<22} {tps:10.1f} {tps / cpus:13.2f}% {(c1 - c0) / win:16.0f} {per:14.1f} {share:7.1f}%")
PY
  done
done
