#!/usr/bin/env bash
# bench-watch-server.sh: what `gapscope watch` costs the server per
# transaction, without the throughput noise of a saturated VM. On a private
# sandbox sysbench oltp_read_write runs at a fixed RATE (not saturating)
# under each of SETS in turn, ROUNDS times alternated; each run reads, over
# WINDOW seconds, the server's CPU ticks (/proc), the host's busy ticks and
# softirq ticks (/proc/stat) per 1,000 committed transactions, and watch's
# own ticks.
#   base       nothing but sysbench
#   consumers  the two statement consumers watch enables, without watch
#   watch      watch with its defaults (--enable-consumers)
#   nocapture  watch --no-capture (server reads only)
# DIGESTS=1 also prints, per run, the server time of the top non-sysbench
# statement digests (watch's own queries), from a digest table truncated
# before the run.
# Environment: SETS ("base consumers watch"), ROUNDS (3), RATE (500),
# WINDOW (15), GAPSCOPE (binary; built into a temp dir when unset).
# Needs root (capture) and sysbench.
set -euo pipefail
cd "$(dirname "$0")/.."
SETS=${SETS:-base consumers watch}; ROUNDS=${ROUNDS:-3}; RATE=${RATE:-500}; WINDOW=${WINDOW:-15}
WORK=$(mktemp -d /tmp/gapscope-bench-server.XXXXXX)
BENCH=bench-watch-server
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
bench_binary
WATCH_PID=
trap bench_cleanup EXIT

bench_lab --opt=--performance-schema=ON --opt=--innodb-flush-log-at-trx-commit=2
M=(mariadb -h 127.0.0.1 -P "$PORT" -u root -N)
SB=(sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
    --mysql-db=sbtest --tables=4 --table-size=20000 --threads=8 --rate="$RATE")
"${M[@]}" -e "CREATE DATABASE sbtest"
"${SB[@]}" prepare >/dev/null
CONSUMERS="NAME IN ('events_statements_current','events_statements_history_long')"

host() { awk 'NR == 1 {print $2 + $3 + $4 + $7 + $8, $8}' /proc/stat; } # busy, softirq
commits() { "${M[@]}" -e "SHOW GLOBAL STATUS LIKE 'Com_commit'" | cut -f2; }

echo "bench-watch-server: sysbench 8 threads at $RATE tx/s, ${WINDOW} s windows; load $(cut -d' ' -f1-3 /proc/loadavg)"
printf "%-10s %22s %20s %22s %16s\n" setting "server ticks/1k tx" "host ticks/1k tx" "softirq ticks/1k tx" "watch ticks/s"
for r in $(seq 1 "$ROUNDS"); do
  for s in $SETS; do
    case $s in
      base) ;;
      consumers) "${M[@]}" -e "UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE $CONSUMERS" ;;
      watch) "$GAPSCOPE" watch --dsn "$DSN" --iface lo --enable-consumers --no-live >"$WORK/w.txt" 2>&1 & WATCH_PID=$! ;;
      nocapture) "$GAPSCOPE" watch --dsn "$DSN" --no-capture --enable-consumers --no-live >"$WORK/w.txt" 2>&1 & WATCH_PID=$! ;;
      *) die "unknown setting $s" ;;
    esac
    [ "${DIGESTS:-0}" = 1 ] && "${M[@]}" -e "TRUNCATE performance_schema.events_statements_summary_by_digest"
    sleep 2
    "${SB[@]}" --time=$((WINDOW + 4)) run >/dev/null &
    sb=$!
    sleep 2
    t0=$(ticks "$SERVER_PID"); read -r b0 s0 < <(host); c0=$(commits); w0=0
    [ -n "$WATCH_PID" ] && w0=$(ticks "$WATCH_PID")
    sleep "$WINDOW"
    t1=$(ticks "$SERVER_PID"); read -r b1 s1 < <(host); c1=$(commits); w1=0
    [ -n "$WATCH_PID" ] && w1=$(ticks "$WATCH_PID")
    wait "$sb" || true
    if [ -n "$WATCH_PID" ]; then kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch failed: $(tail -3 "$WORK/w.txt")"; WATCH_PID=; fi
    [ "$s" = consumers ] && "${M[@]}" -e "UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE $CONSUMERS"
    tx=$((c1 - c0))
    [ "$tx" -gt 0 ] || die "no transaction committed in the window"
    printf "%-10s %22d %20d %22d %16.1f\n" "$s" $(((t1 - t0) * 1000 / tx)) $(((b1 - b0) * 1000 / tx)) $(((s1 - s0) * 1000 / tx)) "$(echo "($w1 - $w0) / $WINDOW" | bc -l)"
    if [ "${DIGESTS:-0}" = 1 ]; then
      "${M[@]}" -e "SELECT COUNT_STAR, ROUND(SUM_TIMER_WAIT/1e9,1) AS ms, LEFT(DIGEST_TEXT,70) FROM performance_schema.events_statements_summary_by_digest
        WHERE SCHEMA_NAME IS NULL OR SCHEMA_NAME <> 'sbtest' ORDER BY SUM_TIMER_WAIT DESC LIMIT 5" | sed 's/^/    /'
    fi
  done
done
