#!/usr/bin/env bash
# bench-watch-idle.sh: what an idle `gapscope watch` costs at the service's
# settings (issue 43). Each run starts a fresh private server like a user's
# (performance_schema and its statement consumers on, history_long at its
# default 1,000 rows, no client), then watch with gapscope.service's flags
# (packaging/gapscope.service and packaging/default: --no-live,
# --defaults-file, --http on loopback, --store; TestIdleAtTheUnitsFlags
# reads them from there) and measures it from FROM to UNTIL seconds after
# its start: CPU ticks of /proc (user + system), the share of a core, its
# threads' voluntary context switches a second (its wakes, steadier than
# ticks on a shared host) and its resident size at the end. After watch
# stopped (counting them earlier would be a client it wakes for), it counts
# watch's own statements in that window by kind in
# events_statements_history_long. The binaries given run in turn within
# each round, so that the host's drift favours none; at the end, the
# median and range of each binary's figures.
#
# AS=service runs watch as the unit does: an unprivileged user (nobody)
# with CAP_NET_RAW alone, so that --capture auto runs the AF_PACKET ring;
# AS=root (the default) lets auto pick the header-only eBPF capture.
#
# Usage: scripts/bench-watch-idle.sh BINARY...
# Environment: ROUNDS (3), FROM (40), UNTIL (100), AS (root). Needs root,
# mariadbd, mariadb-install-db and the mariadb client (and setpriv for
# AS=service).
set -euo pipefail
ROUNDS=${ROUNDS:-3}; FROM=${FROM:-40}; UNTIL=${UNTIL:-100}; AS=${AS:-root}
[ $# -gt 0 ] || { echo "usage: $0 BINARY..." >&2; exit 2; }
WORK=$(mktemp -d /tmp/gapscope-idle.XXXXXX)
chmod 755 "$WORK"
SPID= WPID=
cleanup() {
  [ -z "$WPID" ] || kill -KILL "$WPID" 2>/dev/null || true
  [ -z "$SPID" ] || kill "$SPID" 2>/dev/null || true
  wait 2>/dev/null || true
  rm -rf "$WORK"
}
trap cleanup EXIT

ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
switches() { cat /proc/"$1"/task/*/status | awk '/^voluntary_ctxt_switches/ {s += $2} END {print s}'; }
sql() { mariadb -S "$D/s.sock" -u root -N -e "$1"; }

# one BINARY OUT: a fresh server, watch at the unit's flags, the figures
# in OUT ("ticks share switches rss") and OUT.kinds (count kind).
one() {
  D=$(mktemp -d "$WORK/run.XXXXXX")
  chmod 777 "$D"
  local port
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  mariadb-install-db --no-defaults --datadir="$D/data" --user=root --auth-root-authentication-method=normal \
    --skip-test-db >/dev/null 2>&1
  mariadbd --no-defaults --datadir="$D/data" --socket="$D/s.sock" --port="$port" --bind-address=127.0.0.1 \
    --user=root --pid-file="$D/p.pid" --log-error="$D/err.log" --performance-schema=ON \
    --performance-schema-consumer-events-statements-current=ON \
    --performance-schema-consumer-events-statements-history=ON \
    --performance-schema-consumer-events-statements-history-long=ON 2>/dev/null &
  SPID=$!
  for _ in $(seq 300); do sql 'DO 1' 2>/dev/null && break; sleep 0.1; done
  sql 'DO 1' || { tail -5 "$D/err.log" >&2; exit 1; }
  printf '[client]\nhost = 127.0.0.1\nport = %s\nuser = root\n' "$port" >"$D/my.cnf"
  chmod 644 "$D/my.cnf"
  # The server's statement timer at watch's start, to place the window.
  local t0
  t0=$(sql "SELECT 'gapscope idle bench start'; SELECT TIMER_START FROM performance_schema.events_statements_history
    WHERE THREAD_ID = (SELECT THREAD_ID FROM performance_schema.threads WHERE PROCESSLIST_ID = CONNECTION_ID())
    AND SQL_TEXT LIKE '%idle bench start%'" | tail -1)
  local as=()
  [ "$AS" = service ] && as=(setpriv --reuid=65534 --regid=65534 --clear-groups --inh-caps=-all,+net_raw
    --ambient-caps=-all,+net_raw --bounding-set=-all,+net_raw --)
  "${as[@]}" "$1" watch --no-live --defaults-file="$D/my.cnf" --http="127.0.0.1:$((9000 + RANDOM % 1000))" \
    --store "$D/watch.db" >"$D/w.out" 2>"$D/w.err" &
  WPID=$!
  sleep "$FROM"
  local a b c0 c1
  a=$(ticks "$WPID"); c0=$(switches "$WPID")
  sleep $((UNTIL - FROM))
  b=$(ticks "$WPID"); c1=$(switches "$WPID")
  local rss
  rss=$(awk '/^VmRSS/ {print $2}' "/proc/$WPID/status")
  kill -INT "$WPID"; wait "$WPID" || true; WPID=
  echo "$((b - a)) $(awk -v t=$((b - a)) -v s=$((UNTIL - FROM)) 'BEGIN {printf "%.2f", t / s}') \
$(((c1 - c0) / (UNTIL - FROM))) $rss" >"$2"
  sql "SELECT h.THREAD_ID, h.EVENT_NAME, REPLACE(COALESCE(h.SQL_TEXT, ''), '\n', ' ')
    FROM performance_schema.events_statements_history_long h
    WHERE h.TIMER_START >= $t0 + $FROM * 1000000000000 AND h.TIMER_START < $t0 + $UNTIL * 1000000000000
    AND h.THREAD_ID IN (SELECT DISTINCT THREAD_ID FROM performance_schema.events_statements_history_long
      WHERE SQL_TEXT LIKE '/* gapscope */%')" | awk -F'\t' '
    { k = "other" }
    $2 ~ /Ping$/ { k = "ping" }
    $3 ~ /gapscope_calibration/ { k = "calibration" }
    $3 ~ /SHOW GLOBAL STATUS/ { k = "status" }
    $3 ~ /FROM performance_schema.events_statements_history_long h/ { k = "history_long" }
    $3 ~ /FROM performance_schema.events_statements_current/ { k = "running_scans" }
    $3 ~ /FROM information_schema.PROCESSLIST/ { k = "processlist" }
    $3 ~ /THREAD_POOL_GROUPS/ { k = "pool_groups" }
    { n[k]++ } END { for (k in n) print n[k], k }' | sort -k2 >"$2.kinds"
  kill "$SPID"; wait "$SPID" || true; SPID=
}

echo "bench-watch-idle: watch at the unit's flags (as $AS) on a fresh idle server, from ${FROM} s to ${UNTIL} s after its start"
for r in $(seq "$ROUNDS"); do
  i=0
  for bin in "$@"; do
    i=$((i + 1))
    one "$bin" "$WORK/r$r-b$i"
    read -r t share sw rss <"$WORK/r$r-b$i"
    printf 'round %d %-20s %3d ticks (%s%% of a core) %4d switches/s RSS %6d kB | %s\n' "$r" "$bin" "$t" "$share" "$sw" "$rss" \
      "$(tr '\n' ' ' <"$WORK/r$r-b$i.kinds")"
  done
done
i=0
for bin in "$@"; do
  i=$((i + 1))
  cat "$WORK"/r*-b$i | python3 -c 'import sys, statistics as st
rows = [l.split() for l in sys.stdin if l.strip()]
col = lambda j: [float(r[j]) for r in rows]
f = lambda j, fmt: "%s [%s-%s]" % (fmt % st.median(col(j)), fmt % min(col(j)), fmt % max(col(j)))
print("median %-19s %s%% of a core, %s switches/s, RSS %s kB (%d rounds)" % (sys.argv[1], f(1, "%.2f"), f(2, "%.0f"), f(3, "%.0f"), len(rows)))' "$bin"
done
