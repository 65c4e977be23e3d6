#!/usr/bin/env bash
# bench-watch-churn.sh: what connection-per-request clients cost watch. On a
# private sandbox, python3-pymysql opens CONNS connections, three at a time,
# each running 3 point selects and closing (as PHP does); watch runs beside
# it at its defaults (plus WATCH_ARGS) and the script prints watch's CPU
# ticks (10 ms) during the churn and in the 2 s and 5 s after it, the
# connections per second, and the run's coverage (seen, joined) and join
# sample steps from watch's JSON result. Compare two binaries by running it
# with GAPSCOPE set to each, several times: single runs spread widely on a
# 2-core host.
#
# Usage: scripts/bench-watch-churn.sh
# Environment: GAPSCOPE (binary; default: built from this tree), CONNS
# (3000), WATCH_ARGS (e.g. "--cpu-budget 0" to join every connection),
# RING (events_statements_history_long's rows: lab up's 10000 by default;
# "default" for the server's own, 1,000 on MariaDB 10.11).
# Needs root (capture) and python3-pymysql (make deps).
set -euo pipefail
cd "$(dirname "$0")/.."
CONNS=${CONNS:-3000}
read -r -a W_FLAGS <<<"${WATCH_ARGS:-}"
WORK=$(mktemp -d /tmp/gapscope-bench-churn.XXXXXX)
BENCH=bench-watch-churn
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
bench_binary
WATCH_PID=
trap bench_cleanup EXIT
/usr/bin/python3 -c 'import pymysql' 2>/dev/null || die "python3-pymysql not found (make deps installs it)"

case "${RING:-}" in
  "") bench_lab ;;
  default) bench_lab --opt=--performance-schema=ON \
      --opt=--performance-schema-consumer-events-statements-current=ON \
      --opt=--performance-schema-consumer-events-statements-history=ON \
      --opt=--performance-schema-consumer-events-statements-history-long=ON ;;
  *) bench_lab --opt=--performance-schema-events-statements-history-long-size="$RING" ;;
esac
echo "history_long: $(mariadb -h 127.0.0.1 -P "$PORT" -u root -N -e "SELECT @@performance_schema_events_statements_history_long_size") rows"
mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE f; CREATE TABLE f.kv (id INT PRIMARY KEY, v INT); INSERT INTO f.kv VALUES (1,1),(2,2),(3,3)"
cat >"$WORK/churn.py" <<'PY'
import sys, threading, time
import pymysql
port, n, par = int(sys.argv[1]), int(sys.argv[2]), 3
def worker(k):
    for _ in range(n // par):
        c = pymysql.connect(host="127.0.0.1", port=port, user="root")
        cur = c.cursor()
        for j in range(3):
            cur.execute("SELECT v FROM f.kv WHERE id = %d" % (1 + (j + k) % 3))
            cur.fetchall()
        c.close()
t0 = time.time()
ts = [threading.Thread(target=worker, args=(k,)) for k in range(par)]
for t in ts: t.start()
for t in ts: t.join()
print("%.0f connections/s" % (n / (time.time() - t0)))
PY
"$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --duration 20s --format json "${W_FLAGS[@]}" >"$WORK/watch.json" 2>"$WORK/watch.err" &
WATCH_PID=$!
sleep 4
t0=$(ticks "$WATCH_PID")
/usr/bin/python3 "$WORK/churn.py" "$PORT" "$CONNS"
t1=$(ticks "$WATCH_PID"); sleep 2; t2=$(ticks "$WATCH_PID"); sleep 5; t3=$(ticks "$WATCH_PID")
echo "watch ticks: churn $((t1 - t0)), next 2 s $((t2 - t1)), next 5 s $((t3 - t2))"
wait "$WATCH_PID" || die "watch failed: $(cat "$WORK/watch.err")"
WATCH_PID=
/usr/bin/python3 - "$WORK/watch.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
c, o = d["coverage"], d["own"]
print("seen %s, joined %s, unjoined %s" % (c.get("seen"), c.get("joined"), c.get("unjoined", {})))
s = d.get("server_side", {})
print("history_long reads %s, rows %s, ring lost %s, thread reads %s" % (s.get("polls"), s.get("rows"), s.get("ring_lost"), s.get("thread_reads")))
print("watch CPU %.2f s; join sample steps %s" % (o["cpu_seconds"], [(s["sample"], round(100 * s["cpu_share"], 2)) for s in o.get("sample_steps", [])]))
PY
