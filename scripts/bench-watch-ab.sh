#!/usr/bin/env bash
# bench-watch-ab.sh: two gapscope binaries' cost on a busy server, against
# no watch, in one run. On a private sandbox sysbench oltp_read_write
# saturates the host; each round runs it without watch, with watch from
# binary A and with watch from binary B (flags A_ARGS and B_ARGS, by
# default `--enable-consumers`), the order rotated from round to round so that the
# machine's drift favours none. Prints per round the TPS and the server's
# CPU per 1,000 transactions of each, and at the end the median ratio of A
# and of B to the round's run without watch. Use it to tell whether a
# change to watch cut its cost: on a 2-core VM single rounds spread by
# +-10%, so compare medians of many rounds, never one.
#
# Usage: scripts/bench-watch-ab.sh BINARY_A BINARY_B (the same binary twice
# to compare two flag sets)
# Environment: ROUNDS (6), DURATION (seconds per run, 12), WARMUP (3),
# THREADS (8), A_ARGS and B_ARGS (watch's flags for each, default
# "--enable-consumers"; e.g. A_ARGS="--port 1" is watch attached to the
# wire but following nothing: the capture tap's and the polls' floor).
# Needs root (capture) and sysbench.
set -euo pipefail
cd "$(dirname "$0")/.."
[ $# -eq 2 ] || { echo "usage: $0 BINARY_A BINARY_B" >&2; exit 2; }
A=$1; B=$2
ROUNDS=${ROUNDS:-6}; DURATION=${DURATION:-12}; WARMUP=${WARMUP:-3}; THREADS=${THREADS:-8}
read -r -a A_FLAGS <<<"${A_ARGS---enable-consumers}"
read -r -a B_FLAGS <<<"${B_ARGS---enable-consumers}"
WORK=$(mktemp -d /tmp/gapscope-bench-ab.XXXXXX)
BENCH=bench-watch-ab
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
for g in "$A" "$B"; do [ -x "$g" ] || die "$g is not an executable gapscope binary"; done
GAPSCOPE=$A # for the sandbox
bench_binary
WATCH_PID=
trap bench_cleanup EXIT

bench_lab --opt=--performance-schema=ON --opt=--innodb-flush-log-at-trx-commit=2
SB=(sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
    --mysql-db=sbtest --tables=4 --table-size=20000 --threads="$THREADS")
mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE sbtest"
"${SB[@]}" prepare >/dev/null

# run WHAT [FLAG...]: one measured sysbench run with no watch ("none") or
# watch from the binary WHAT with FLAGs; prints TPS and server ticks per
# 1,000 transactions.
run() {
  if [ "$1" != none ]; then
    "$1" watch --dsn "$DSN" --iface lo --no-live "${@:2}" >"$WORK/w.txt" 2>&1 &
    WATCH_PID=$!
  fi
  sleep 2
  "${SB[@]}" --time="$WARMUP" run >/dev/null
  local t0 t1 tx tps
  t0=$(ticks "$SERVER_PID")
  "${SB[@]}" --time="$DURATION" run >"$WORK/sb.txt"
  t1=$(ticks "$SERVER_PID")
  if [ -n "$WATCH_PID" ]; then
    kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch ($1) failed: $(tail -3 "$WORK/w.txt")"
    WATCH_PID=
  fi
  read -r tps tx < <(sb_result "$WORK/sb.txt")
  echo "$tps $(((t1 - t0) * 1000 / tx))"
}

echo "bench-watch-ab: A=$A ${A_FLAGS[*]-} B=$B ${B_FLAGS[*]-}; sysbench $THREADS threads, ${DURATION} s runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
for r in $(seq 1 "$ROUNDS"); do
  case $((r % 3)) in
    1) order="none A B" ;;
    2) order="A B none" ;;
    0) order="B none A" ;;
  esac
  for m in $order; do
    case $m in
      none) none=$(run none) ;;
      A) a=$(run "$A" ${A_FLAGS[@]+"${A_FLAGS[@]}"}) ;;
      B) b=$(run "$B" ${B_FLAGS[@]+"${B_FLAGS[@]}"}) ;;
    esac
  done
  echo "round $r/$ROUNDS ($order): none $none | A $a | B $b (TPS, server ticks/1k tx)"
  echo "$none $a $b" >>"$WORK/rounds.txt"
done
python3 - "$WORK/rounds.txt" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
for name, col in (("A", 2), ("B", 4)):
    ratios = [r[col] / r[0] for r in rows if r[0] > 0]
    print(f"{name}: median x{statistics.median(ratios):.3f} of TPS without watch (range x{min(ratios):.3f}-x{max(ratios):.3f}), "
          f"server ticks/1k tx median {statistics.median(r[col + 1] for r in rows):.0f} vs {statistics.median(r[1] for r in rows):.0f}")
PY
