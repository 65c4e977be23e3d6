#!/usr/bin/env bash
# bench-watch.sh: the capacity side of `gapscope watch` (issue 4, docs/performance.md):
#   1. rate:  zero dropped packets at >= 20k statements/s. sysbench
#      oltp_point_select (server-side prepared point selects, one statement
#      per event) runs against a private sandbox while `bin/gapscope watch`
#      runs as a separate process. Per round: the statements/s the load
#      achieved, what watch decoded (profile statements), capture drops
#      (kernel ring, capture->tracker queue), joiner queue drops, the join
#      rate, performance_schema ring loss, watch's CPU time and peak RSS.
#      watch runs with --cpu-budget 0 (every connection followed: the
#      capacity, not the budget, is measured). RATES is a ladder of sysbench --rate targets ("max" = unthrottled),
#      so the highest rate with zero drops can be read off the table.
#   2. conns: RSS with 10k open connections tracked. watch starts first; then
#      testdata/gen/connhold opens CONNS connections (each runs SELECT 1, so
#      each is a tracked flow with its handshake on the wire), holds them idle,
#      runs a light SELECT 1 load on CONN_ACTIVE of them, and keeps them all
#      open while watch stops. Peak RSS from /usr/bin/time -v, plus VmRSS
#      sampled at each phase.
#   3. gobench: the Go benchmarks of the engine's in-process path
#      (internal/watch/bench_test.go), -benchmem.
# It ends with a summary table. The machine's other load is noise: the load
# average is printed before and after each part.
#
# Environment:
#   PARTS        which parts to run (default "rate conns gobench")
#   ROUNDS       rounds per rate (default 3); RATE_TIME seconds of load per round (15)
#   RATES        sysbench --rate targets, "max" for unthrottled (default "20000 max")
#   THREADS      sysbench threads (8)
#   HISTORY_LONG performance_schema_events_statements_history_long_size (10000)
#   POLL         watch --poll (200ms)
#   CONNS        connections to hold (10000); CONN_ACTIVE (200), CONN_QPS (1000),
#                CONN_IDLE / CONN_LOAD seconds (5 / 10)
#   WATCH_ENV    extra environment for watch, e.g. "GOGC=50" (Go runtime knobs)
#   KEEP         1 keeps the work directory (JSON results, logs)
# Needs root (live capture on lo), sysbench, python3, /usr/bin/time, mariadbd.
set -euo pipefail
cd "$(dirname "$0")/.."

PARTS=${PARTS:-rate conns gobench}
ROUNDS=${ROUNDS:-3}
RATE_TIME=${RATE_TIME:-15}
RATES=${RATES:-20000 max}
THREADS=${THREADS:-8}
HISTORY_LONG=${HISTORY_LONG:-10000}
POLL=${POLL:-200ms}
CONNS=${CONNS:-10000}
CONN_ACTIVE=${CONN_ACTIVE:-200}
CONN_QPS=${CONN_QPS:-1000}
CONN_IDLE=${CONN_IDLE:-5}
CONN_LOAD=${CONN_LOAD:-10}
WORK=$(mktemp -d /tmp/gapscope-bench-watch-cap.XXXXXX)
LAB="$WORK/lab"
RESULTS="$WORK/results.tsv"

die() { echo "bench-watch: $*" >&2; exit 1; }
say() { echo "bench-watch: $*"; }
loadavg() { cut -d' ' -f1-3 /proc/loadavg; }
has_part() { [[ " $PARTS " == *" $1 "* ]]; }

for tool in sysbench python3 mariadb; do
  command -v "$tool" >/dev/null || die "$tool not found (make deps installs it)"
done
[ -x /usr/bin/time ] || die "/usr/bin/time not found: apt-get install time"
[ "$(id -u)" = 0 ] || die "live capture needs root"

WATCH_TPID= # the /usr/bin/time process wrapping watch
HOLD_PID=
cleanup() {
  [ -n "$HOLD_PID" ] && { kill -TERM "$HOLD_PID" 2>/dev/null || true; wait "$HOLD_PID" 2>/dev/null || true; }
  [ -n "$WATCH_TPID" ] && { kill -INT "$(child_of "$WATCH_TPID")" 2>/dev/null || true; wait "$WATCH_TPID" 2>/dev/null || true; }
  bin/gapscope lab down --dir "$LAB" >/dev/null 2>&1 || true
  if [ "${KEEP:-0}" = 1 ]; then echo "bench-watch: kept $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

go build -o bin/gapscope ./cmd/gapscope
go build -o "$WORK/connhold" ./testdata/gen/connhold

# child_of prints the (single) child of a process: watch under /usr/bin/time.
child_of() { cat "/proc/$1/task/$1/children" 2>/dev/null | awk '{print $1}'; }

# wait_capture waits until process $1 holds an AF_PACKET socket: watch opens
# its capture after connecting and calibrating, then starts polling, so from
# then on the traffic is seen.
wait_capture() {
  local pid=$1 i inodes
  for ((i = 0; i < 600; i++)); do
    kill -0 "$pid" 2>/dev/null || return 1
    inodes=$(awk 'NR > 1 {print "socket:[" $NF "]"}' /proc/net/packet)
    if [ -n "$inodes" ] && ls -l "/proc/$pid/fd" 2>/dev/null | grep -qF -f <(echo "$inodes"); then
      return 0
    fi
    sleep 0.1
  done
  return 1
}

# start_watch NAME: runs watch in the background under /usr/bin/time -v and
# waits for its capture; --duration is only a safety net, the script stops
# watch with SIGINT (its normal stop: what it saw is joined and reported).
start_watch() {
  local name=$1
  env GODEBUG=gctrace=1 ${WATCH_ENV:-} /usr/bin/time -v -o "$WORK/$name.time" bin/gapscope watch --dsn "$DSN" --iface lo --format json --no-live \
    --cpu-budget 0 --poll "$POLL" --duration 600s >"$WORK/$name.json" 2>"$WORK/$name.err" &
  WATCH_TPID=$!
  sleep 0.2
  WATCH_PID=$(child_of "$WATCH_TPID")
  [ -n "$WATCH_PID" ] && wait_capture "$WATCH_PID" || die "watch did not start its capture: $(cat "$WORK/$name.err")"
}

stop_watch() {
  kill -INT "$WATCH_PID"
  wait "$WATCH_TPID" || die "gapscope watch failed: $(tail -3 "$WORK/$1.err")"
  WATCH_TPID=
}

# rss_now prints VmRSS in MB with its anonymous part (Go heap, stacks) and
# its file/shared part (binary, and the capture's mmapped AF_PACKET ring).
rss_now() {
  awk '/^VmRSS/ {t = $2} /^RssAnon/ {a = $2} /^RssFile|^RssShmem/ {f += $2}
       END {printf "%d (anon %d, file+ring %d)", t / 1024, a / 1024, f / 1024}' "/proc/$1/status" 2>/dev/null || echo "?"
}

# watch_stats NAME: one tab-separated line of what watch reported and what
# /usr/bin/time measured.
watch_stats() {
  python3 - "$WORK/$1.json" "$WORK/$1.time" "$WORK/$1.err" <<'PY'
import json, re, sys
r = json.load(open(sys.argv[1]))
t = open(sys.argv[2]).read()
# GODEBUG=gctrace=1 lines: "... A->B->C MB, G MB goal": C is the heap live after the GC.
gcs = [tuple(map(int, m.groups())) for m in re.finditer(r"->(\d+) MB, (\d+) MB goal", open(sys.argv[3]).read())]
num = lambda pat: float(re.search(pat, t).group(1))
cpu = num(r"User time \(seconds\): ([\d.]+)") + num(r"System time \(seconds\): ([\d.]+)")
rss = num(r"Maximum resident set size \(kbytes\): (\d+)") / 1024
c, j, s = r["capture"], r["join"], r["server_side"]
vals = [r["profile"]["statements"], c["KernelDrops"], c["QueueDrops"], s["queue_drops"], j["Joined"], j["Wire"],
        s["ring_lost"], s["polls"], c["Flows"], c["UntrackedPackets"], c["Gaps"], f"{cpu:.2f}", f"{rss:.0f}",
        f"{r['elapsed_us'] / 1e6:.1f}", max((g[0] for g in gcs), default=0), max((g[1] for g in gcs), default=0)]
print("\t".join(map(str, vals)))
PY
}

SERVER_OPTS=(--opt=--performance-schema=ON
  --opt=--performance-schema-consumer-events-statements-current=ON
  --opt=--performance-schema-consumer-events-statements-history=ON
  --opt=--performance-schema-consumer-events-statements-history-long=ON
  "--opt=--performance-schema-events-statements-history-long-size=$HISTORY_LONG"
  "--opt=--max-connections=$((CONNS + 200))"
  "--opt=--open-files-limit=$((CONNS + 2000))")
bin/gapscope lab up --dir "$LAB" "${SERVER_OPTS[@]}" >"$WORK/up.txt"
PORT=$(sed -n 's/.*DSN: *root@tcp(127\.0\.0\.1:\([0-9]*\)).*/\1/p' "$WORK/up.txt")
[ -n "$PORT" ] || die "could not read the sandbox port from: $(cat "$WORK/up.txt")"
DSN="root@tcp(127.0.0.1:$PORT)/"
say "sandbox on port $PORT (history_long_size $HISTORY_LONG, max_connections $((CONNS + 200))); $(nproc) cores"

# ---- 1. rate -------------------------------------------------------------
run_rate_round() {
  local rate=$1 r=$2 name="rate-$1-$2" extra=() qps
  [ "$rate" != max ] && extra=(--rate="$rate")
  start_watch "$name"
  local la; la=$(loadavg)
  "${SB[@]}" --threads="$THREADS" --time="$RATE_TIME" "${extra[@]}" run >"$WORK/$name.sb"
  sleep 1 # the last responses reach the capture
  stop_watch "$name"
  qps=$(sed -n 's/.*queries: *[0-9]* *(\([0-9.]*\) per sec.*/\1/p' "$WORK/$name.sb")
  [ -n "$qps" ] || die "sysbench printed no rate: $(tail -5 "$WORK/$name.sb")"
  printf 'rate\t%s\t%s\t%s\t%s\t%s\n' "$rate" "$r" "$qps" "$(watch_stats "$name")" "${la%% *}" >>"$RESULTS"
  awk -F'\t' 'END {printf "  %-6s round %s: load %7.0f stmt/s, watch decoded %s, drops kernel %s queue %s joiner %s, joined %s, ring lost %s, cpu %ss, rss %s MB (load avg %s)\n",
    $2, $3, $4, $5, $6, $7, $8, $9, $11, $16, $17, $21}' "$RESULTS"
}

if has_part rate; then
  SB=(sysbench oltp_point_select --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
      --mysql-db=sbtest --tables=1 --table-size=10000)
  mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE sbtest"
  "${SB[@]}" prepare >/dev/null
  say "rate: sysbench oltp_point_select, $THREADS threads, $RATE_TIME s per round, rates: $RATES; load average $(loadavg)"
  for r in $(seq 1 "$ROUNDS"); do
    for rate in $RATES; do run_rate_round "$rate" "$r"; done
  done
  say "rate: load average after: $(loadavg)"
fi

# ---- 2. conns ------------------------------------------------------------
# wait_line FILE TEXT: waits until connhold printed TEXT (or exited).
wait_line() {
  until grep -q "$2" "$1"; do
    kill -0 "$HOLD_PID" 2>/dev/null || die "connhold exited: $(cat "$WORK/connhold.out" "$WORK/connhold.err")"
    sleep 0.2
  done
}

if has_part conns; then
  say "conns: $CONNS connections, $CONN_ACTIVE of them run $CONN_QPS SELECT 1/s for $CONN_LOAD s; load average $(loadavg)"
  start_watch conns
  rss_start=$(rss_now "$WATCH_PID")
  ulimit -n "$(ulimit -Hn)"
  "$WORK/connhold" -dsn "$DSN" -conns "$CONNS" -active "$CONN_ACTIVE" -qps "$CONN_QPS" \
    -idle "${CONN_IDLE}s" -load "${CONN_LOAD}s" >"$WORK/connhold.out" 2>"$WORK/connhold.err" &
  HOLD_PID=$!
  wait_line "$WORK/connhold.out" "Threads_connected"
  rss_open=$(rss_now "$WATCH_PID")
  wait_line "$WORK/connhold.out" "holding"
  rss_loaded=$(rss_now "$WATCH_PID")
  sleep 2
  stop_watch conns
  kill -TERM "$HOLD_PID"; wait "$HOLD_PID" || true; HOLD_PID=
  sed 's/^/  /' "$WORK/connhold.out"
  printf 'conns\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$CONNS" "$rss_start" "$rss_open" "$rss_loaded" "$(watch_stats conns)" \
    "$(loadavg | cut -d' ' -f1)" "$(sed -n 's/.*server Threads_connected=\([0-9]*\).*/\1/p' "$WORK/connhold.out")" >>"$RESULTS"
  say "conns: watch VmRSS MB at start ${rss_start}; connections open ${rss_open}; after the load ${rss_loaded}; load average $(loadavg)"
fi

# ---- 3. gobench ----------------------------------------------------------
if has_part gobench; then
  say "gobench: go test -run '^\$' -bench . -benchmem ./internal/watch; load average $(loadavg)"
  go test -run '^$' -bench . -benchmem -count 3 ./internal/watch | tee "$WORK/gobench.txt" | grep -E '^Benchmark' | sed 's/^/  /'
fi

# ---- summary -------------------------------------------------------------
python3 - "$RESULTS" "$WORK/gobench.txt" "$THREADS" "$RATE_TIME" <<'PY'
import os, statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])] if os.path.exists(sys.argv[1]) else []
rate = [r for r in rows if r[0] == "rate"]
def med(v): return statistics.median(v)
def spread(v): return f"{min(v):.0f}-{max(v):.0f}"
if rate:
    print(f"\nrate: sysbench oltp_point_select, {sys.argv[3]} threads, {sys.argv[4]} s/round, watch as a separate process")
    print(f"{'target':>7} {'rounds':>6} {'load stmt/s med (min-max)':>26} {'decoded/load':>12} {'kernel':>6} {'queue':>5} "
          f"{'joiner':>6} {'joined%':>7} {'ring lost':>9} {'cpu s':>6} {'cpu/stmt µs':>11} {'RSS MB':>7} {'heap MB':>7}")
    for target in dict.fromkeys(r[1] for r in rate):
        rs = [r for r in rate if r[1] == target]
        qps = [float(r[3]) for r in rs]
        dec = [float(r[4]) / (float(r[3]) * float(sys.argv[4])) for r in rs]
        kd, qd, jd = ([int(r[i]) for r in rs] for i in (5, 6, 7))
        joined = [100 * int(r[8]) / max(int(r[9]), 1) for r in rs]
        cpu = [float(r[15]) for r in rs]
        per = [1e6 * float(r[15]) / max(float(r[4]), 1) for r in rs]
        print(f"{target:>7} {len(rs):>6} {med(qps):>11.0f} ({spread(qps):>13}) {med(dec):>12.3f} {sum(kd):>6} {sum(qd):>5} "
              f"{sum(jd):>6} {med(joined):>6.1f}% {med([int(r[10]) for r in rs]):>9.0f} {med(cpu):>6.2f} {med(per):>11.1f} "
              f"{max(float(r[16]) for r in rs):>7.0f} {max(int(r[18]) for r in rs):>7}")
    clean = [float(r[3]) for r in rate if int(r[5]) + int(r[6]) + int(r[7]) == 0]
    print(f"highest load rate with zero drops (kernel+queue+joiner) in any round: {max(clean):.0f} stmt/s" if clean
          else "no round without drops")
    print("drops are sums over the rounds; decoded/load = watch profile statements / (sysbench queries/s x seconds);\n"
          "joined% = joined / wire statements; cpu = watch's user+sys over its whole run (connect, load, final join,\n"
          "diagnosis), per decoded statement in cpu/stmt; RSS = peak (/usr/bin/time -v); heap = Go heap live after GC, max")
for r in (r for r in rows if r[0] == "conns"):
    st = r[5:]
    print(f"\nconns: {r[1]} connections (server Threads_connected {r[-1]}), watch tracked {st[8]} flows "
          f"(untracked packets {st[9]}), decoded {st[0]} statements, drops kernel {st[1]} queue {st[2]} joiner {st[3]}")
    print(f"  peak RSS (/usr/bin/time -v): {float(st[12]):.0f} MB (target <= 150 MB); Go heap live after GC max {st[14]} MB "
          f"(GC goal max {st[15]} MB); cpu {st[11]} s")
    print(f"  VmRSS MB at start {r[2]}; connections open {r[3]}; after the load {r[4]}")
if os.path.exists(sys.argv[2]):
    runs = {}
    for l in open(sys.argv[2]):
        f = l.split()
        if l.startswith("Benchmark") and len(f) >= 4:
            m = {f[i + 1]: float(f[i]) for i in range(2, len(f) - 1, 2)}
            runs.setdefault(f[0], []).append(m)
    print("\ngo benchmarks (internal/watch, per statement; median of runs; cpu-ns = process CPU, steadier than wall here)")
    print(f"  {'benchmark':<30} {'runs':>4} {'ns/op':>9} {'cpu-ns/op':>10} {'B/op':>6} {'allocs/op':>9}")
    for name, ms in runs.items():
        get = lambda k: med([m.get(k, 0) for m in ms])
        print(f"  {name:<30} {len(ms):>4} {get('ns/op'):>9.0f} {get('cpu-ns/op'):>10.0f} {get('B/op'):>6.0f} {get('allocs/op'):>9.0f}")
PY
say "load average at the end: $(loadavg)"
