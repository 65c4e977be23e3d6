#!/usr/bin/env bash
# bench-watch-overhead.sh: what `gapscope watch` costs a busy server (issue 4:
# median cost <= 3% of TPS on sysbench oltp_read_write). On a private sandbox
# (performance_schema=ON, its defaults), the real sysbench runs in rounds that
# alternate without and with `gapscope watch --enable-consumers` running as a
# separate process (capture on lo + performance_schema polling; the consumers
# it turns on are part of its cost). Rounds come in pairs, in ABBA order
# (without-with, then with-without) so that the machine's drift over minutes
# does not favour one mode; the script prints per mode the median TPS and
# min-max, the median of the paired ratios with their range, the server's
# CPU per transaction in each mode (/proc, both cores' work) and the host's
# (every process plus softirq, where loopback capture is paid), watch's own
# CPU as it reports it, and what watch saw (statements joined, packets
# dropped, the connections its CPU budget let it follow) so that a watch
# that saw nothing cannot pass for a cheap one.
#
# Environment: ROUNDS (pairs, default 6), DURATION (seconds per round, 15),
# WATCH_ARGS (extra watch flags, e.g. "--sample 4" or "--cpu-budget 0"),
# THREADS (8), TABLES (4), ROWS (20000), WARMUP (seconds before each round, 3),
# GAPSCOPE (binary; built into a temp dir when unset), FSYNC (1: the server
# flushes its log at every commit; default 0: innodb_flush_log_at_trx_commit=2,
# so that this VM's disk latency, which varies by the second, does not drown
# the comparison: the run is CPU-bound, the worst case for watch's share).
# Needs root or CAP_NET_RAW (live capture) and sysbench. The machine's other
# load is noise: the script prints the load average before and after.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-6}
DURATION=${DURATION:-15}
THREADS=${THREADS:-8}
TABLES=${TABLES:-4}
ROWS=${ROWS:-20000}
WARMUP=${WARMUP:-3}
WORK=$(mktemp -d /tmp/gapscope-bench-watch.XXXXXX)
LAB="$WORK/lab"
BENCH=bench-watch-overhead
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
command -v python3 >/dev/null || die "python3 not found"
bench_binary

WATCH_PID=
cleanup() {
  if [ -n "$WATCH_PID" ]; then kill -INT "$WATCH_PID" 2>/dev/null || true; wait "$WATCH_PID" 2>/dev/null || true; fi
  "$GAPSCOPE" lab down --dir "$LAB" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}
trap cleanup EXIT

FLUSH=2
[ "${FSYNC:-0}" = 1 ] && FLUSH=1
bench_lab --opt=--performance-schema=ON --opt=--innodb-flush-log-at-trx-commit=$FLUSH
SB=(sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
    --mysql-db=sbtest --tables="$TABLES" --table-size="$ROWS" --threads="$THREADS")

mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE sbtest"
echo "bench-watch-overhead: sandbox on port $PORT; preparing $TABLES x $ROWS rows"
"${SB[@]}" prepare >/dev/null

# busy_ticks: the host's busy clock ticks, all CPUs (user, nice, system,
# irq, softirq; not idle, iowait or steal). Packet capture costs softirq
# time on loopback that no process is charged with.
busy_ticks() { awk 'NR == 1 {print $2 + $3 + $4 + $7 + $8}' /proc/stat; }

# run_round MODE I: warm up, then one measured sysbench run; prints its TPS
# and the server's CPU ticks per 1,000 transactions.
run_round() {
  local mode=$1 i=$2
  if [ "$mode" = with ]; then
    "$GAPSCOPE" watch --dsn "$DSN" --iface lo --enable-consumers --no-live ${WATCH_ARGS:-} >"$WORK/watch-$i.txt" 2>"$WORK/watch-$i.err" &
    WATCH_PID=$!
  fi
  sleep 2 # watch connects, calibrates, starts the capture; both modes rest alike (InnoDB purges meanwhile)
  if [ "$mode" = with ]; then
    kill -0 "$WATCH_PID" 2>/dev/null || die "gapscope watch exited: $(cat "$WORK/watch-$i.err")"
  fi
  [ "$WARMUP" -gt 0 ] && "${SB[@]}" --time="$WARMUP" run >/dev/null
  local t0 b0; t0=$(ticks "$SERVER_PID"); b0=$(busy_ticks)
  "${SB[@]}" --time="$DURATION" run >"$WORK/sb-$mode-$i.txt"
  local t1 b1; t1=$(ticks "$SERVER_PID"); b1=$(busy_ticks)
  if [ "$mode" = with ]; then
    kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "gapscope watch failed: $(tail -3 "$WORK/watch-$i.err")"
    WATCH_PID=
  fi
  local tps tx
  read -r tps tx < <(sb_result "$WORK/sb-$mode-$i.txt")
  echo "$tps $(( (t1 - t0) * 1000 / tx )) $(( (b1 - b0) * 1000 / tx ))"
}

echo "bench-watch-overhead: load average before: $(cut -d' ' -f1-3 /proc/loadavg)"
for i in $(seq 1 "$ROUNDS"); do
  if [ $((i % 2)) -eq 1 ]; then
    off=$(run_round without "$i"); on=$(run_round with "$i")
  else
    on=$(run_round with "$i"); off=$(run_round without "$i")
  fi
  seen=$(grep -o 'joined [0-9]* of [0-9]* wire statements' "$WORK/watch-$i.txt" || echo "watch summary missing")
  drops=$(grep -io '[0-9]* dropped' "$WORK/watch-$i.txt" | head -1 || true)
  own=$(sed -n 's/^watch itself: //p' "$WORK/watch-$i.txt")
  read -r off_tps off_srv off_all <<<"$off"
  read -r on_tps on_srv on_all <<<"$on"
  echo "pair $i/$ROUNDS: without $off_tps TPS (server $off_srv, host $off_all ticks/1k tx), with watch $on_tps TPS (server $on_srv, host $on_all ticks/1k tx); $seen${drops:+, $drops}; watch itself: ${own:-?}"
  echo "$off $on" >>"$WORK/pairs.txt"
done
echo "bench-watch-overhead: load average after: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$WORK/pairs.txt" "$DURATION" "$THREADS" "$TABLES" "$ROWS" <<'PY'
import statistics, sys
rows = [tuple(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
pairs = [(r[0], r[3]) for r in rows]
off, on = [p[0] for p in pairs], [p[1] for p in pairs]
ratios = [b / a for a, b in pairs if a > 0]
cpu_off, cpu_on = [r[1] for r in rows], [r[4] for r in rows]
host_off, host_on = [r[2] for r in rows], [r[5] for r in rows]
print(f"\nsysbench oltp_read_write, {sys.argv[4]} tables x {sys.argv[5]} rows, {sys.argv[3]} threads, "
      f"{len(pairs)} alternating pairs of {sys.argv[2]} s")
print(f"  without watch: median {statistics.median(off):.1f} TPS (min-max {min(off):.1f}-{max(off):.1f})")
print(f"  with watch:    median {statistics.median(on):.1f} TPS (min-max {min(on):.1f}-{max(on):.1f})")
med = statistics.median(ratios)
print(f"  paired ratio with/without: median x{med:.3f} (range x{min(ratios):.3f}-x{max(ratios):.3f})")
print(f"  median cost: {(1 - med) * 100:.1f}% of TPS (target <= 3%)")
print(f"  server CPU per 1,000 transactions (ticks of 10 ms): without median {statistics.median(cpu_off):.0f}, "
      f"with {statistics.median(cpu_on):.0f}")
# At saturation TPS is the host's CPU over the CPU a transaction takes, all
# of it (server, sysbench, watch, the kernel's packet work): the same cost
# seen without the VM's swings in speed, which move TPS but not CPU per
# transaction as much.
host_ratios = [a / b for a, b in zip(host_off, host_on) if b > 0]
print(f"  host CPU per 1,000 transactions (all processes and softirq): without median {statistics.median(host_off):.0f}, "
      f"with {statistics.median(host_on):.0f}; paired: median cost {(1 - statistics.median(host_ratios)) * 100:.1f}% "
      f"(range {(1 - max(host_ratios)) * 100:.1f}% to {(1 - min(host_ratios)) * 100:.1f}%)")
PY
