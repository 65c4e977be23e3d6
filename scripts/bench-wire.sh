#!/usr/bin/env bash
# bench-wire.sh: what gapscope's wire-only path costs (live capture ->
# tracker -> MySQL decoding -> one statement event each, with client
# timing, digest, bytes, errors, zero-window), measured with
# benchmarks/wirebench against a private sandbox.
#
# MODE=cpu (default): sysbench oltp_point_select on THREADS connections at
#   RATE statements/s (one point select per sysbench transaction); in each of
#   ROUNDS rounds wirebench captures for WINDOW seconds after SETTLE. Prints
#   per round the statements decoded, their rate, the capture's CPU
#   (user + system), µs of CPU per statement and the kernel drops,
#   then the median and spread of µs/statement.
# MODE=tap: the kernel tap's share of the server's loss. sysbench runs
#   WINDOW seconds per side (saturating, or at TAP_RATE statements/s), the
#   sides rotated each round: SIDES (default "none;tap;tap-snap;decode"):
#   no capture; a ring read and thrown away (the tap alone); the same with
#   server answers cut to SNAP bytes in the kernel filter; the wire-only
#   decode; tcx-tap: the tap through an eBPF program at the interface's tcx
#   hook copying each packet into a BPF ring buffer, read and thrown away;
#   tcx-count: that program counting the port's packets, copying none (the
#   least any in-kernel design costs); tcx-head, tcx-head-N: the program
#   writing a fixed-size record per packet (TCP/IP header fields, payload
#   length, timestamp, the payload's first N bytes, 64 for tcx-head, and
#   last TAIL, default 16), no wake-up per record, read in place. Prints per side and round the TPS, the server's CPU per
#   statement (mysqld's user + system ticks) and sysbench's, then each
#   side's medians. On loopback the tap runs in the sender's context: its
#   cost shows in the server's (answers) and sysbench's (requests) CPU, which
#   a shared host's noise hides far less than TPS.
#
# Environment: MODE, ROUNDS (5), RATE (20000), THREADS (4), SETTLE (3),
# MODE=perf: the tap's share measured inside the kernel, which noise does
#   not hide: at TAP_RATE (default RATE) statements/s, for each side of
#   SIDES (default "tap;tap-snap;decode"), `perf record -a -g` for WINDOW
#   seconds and the share of mariadbd's and sysbench's CPU samples whose
#   stack holds tpacket_rcv (the kernel filter and the copy into the ring).
#
# WORKLOAD (sysbench script, default oltp_point_select; with
# oltp_read_only, rates are transactions of 14 statements), PS_MODE
# (sysbench --db-ps-mode: auto = prepared statements, disable = text with
# literals), WINDOW (10), SNAP (128), TAP_RATE (0: saturate), BLOCK_KB (ring block size, capture's default when
# unset), SIDES, PROFILE (a file: CPU profile of the last cpu round).
# Needs root (capture) and sysbench.
set -euo pipefail
cd "$(dirname "$0")/.."

MODE=${MODE:-cpu}; ROUNDS=${ROUNDS:-5}; RATE=${RATE:-20000}; THREADS=${THREADS:-4}
SETTLE=${SETTLE:-3}; WINDOW=${WINDOW:-10}; SNAP=${SNAP:-128}; BLOCK_KB=${BLOCK_KB:-0}
sides_default="none;tap;tap-snap;decode"
[ "$MODE" = perf ] && sides_default="tap;tap-snap;decode"
SIDES=${SIDES:-$sides_default}; PROFILE=${PROFILE:-}; TAP_RATE=${TAP_RATE:-0}; TAIL=${TAIL:-16}
WORKLOAD=${WORKLOAD:-oltp_point_select}; PS_MODE=${PS_MODE:-auto}
[ "$MODE" = perf ] && [ "$TAP_RATE" = 0 ] && TAP_RATE=$RATE
WORK=$(mktemp -d /tmp/gapscope-bench-wire.XXXXXX)
BENCH=bench-wire
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
bench_binary
go build -o "$WORK/wirebench" ./benchmarks/wirebench
trap bench_cleanup EXIT

bench_lab
SB=(sysbench "$WORKLOAD" --db-ps-mode="$PS_MODE" --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
    --mysql-db=sbtest --tables=4 --table-size=10000 --threads="$THREADS")
mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE sbtest"
"${SB[@]}" prepare >/dev/null
WB=("$WORK/wirebench" -iface lo -port "$PORT" -block-kb "$BLOCK_KB")

# median_spread: "median min max" of the numbers on stdin.
median_spread() { sort -g | awk '{v[NR] = $1} END {m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2; printf "%.3f %.3f %.3f\n", m, v[1], v[NR]}'; }

cpu_rounds() {
  echo "bench-wire cpu: sysbench $WORKLOAD (--db-ps-mode=$PS_MODE), $THREADS connections at $RATE statements/s; $SETTLE s settle, $WINDOW s window; load $(cut -d' ' -f1-3 /proc/loadavg)"
  printf "%6s %11s %12s %8s %14s %13s\n" round statements statements/s "CPU s" "µs/statement" kernel_drops
  : >"$WORK/per"
  for r in $(seq 1 "$ROUNDS"); do
    "${SB[@]}" --rate="$RATE" --time=$((SETTLE + WINDOW + 3)) run >"$WORK/sb.txt" 2>&1 &
    sb=$!
    sleep "$SETTLE"
    prof=()
    [ -n "$PROFILE" ] && [ "$r" = "$ROUNDS" ] && prof=(-cpuprofile "$PROFILE")
    "${WB[@]}" -mode decode -duration "${WINDOW}s" "${prof[@]}" >"$WORK/wb.json"
    # A host too loaded for the rate makes sysbench give up ("event queue
    # is full"): the round still counts what was captured, at its own rate.
    wait "$sb" || echo "  sysbench: $(grep -m1 FATAL "$WORK/sb.txt" || tail -1 "$WORK/sb.txt")" >&2
    python3 - "$r" "$WORK/wb.json" >>"$WORK/per" <<'PY'
import json, sys
d = json.load(open(sys.argv[2]))
print(f"{sys.argv[1]:>6} {d['statements']:11d} {d['statements'] / d['seconds']:12.0f} {d['cpu_seconds']:8.2f} {d['us_per_statement']:14.3f} {d['kernel_drops']:13d}")
PY
    tail -1 "$WORK/per"
  done
  read -r med lo hi < <(awk '{print $5}' "$WORK/per" | median_spread)
  echo "µs CPU per statement: median $med (min $lo, max $hi) over $ROUNDS rounds; kernel drops: $(awk '{k += $6} END {print k + 0}' "$WORK/per")"
}

tap_rounds() {
  IFS=';' read -r -a sides <<<"$SIDES"
  local rate=() what="saturating"
  [ "$TAP_RATE" != 0 ] && rate=(--rate="$TAP_RATE") && what="at $TAP_RATE statements/s"
  echo "bench-wire tap: sysbench $WORKLOAD $what, $THREADS connections, $WINDOW s per side, sides rotated; snap $SNAP; load $(cut -d' ' -f1-3 /proc/loadavg)"
  printf "%5s %-9s %10s %17s %17s %13s\n" round side TPS "server µs/stmt" "sysbench µs/stmt" kernel_drops
  : >"$WORK/tps"
  for r in $(seq 1 "$ROUNDS"); do
    n=${#sides[@]}
    for i in $(seq 0 $((n - 1))); do
      side=${sides[$(((i + r) % n))]}
      wb=
      case $side in
        none) ;;
        tcx-count) "${WB[@]}" -mode tcx-count -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        tcx-tap) "${WB[@]}" -mode tcx-tap -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        tcx-head) "${WB[@]}" -mode tcx-head -head 64 -tail "$TAIL" -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        tcx-head-*) "${WB[@]}" -mode tcx-head -head "${side#tcx-head-}" -tail "$TAIL" -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        tap) "${WB[@]}" -mode tap -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        tap-snap) "${WB[@]}" -mode tap -answer-snap "$SNAP" -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        decode) "${WB[@]}" -mode decode -duration $((WINDOW + 4))s >"$WORK/wb.json" & wb=$! ;;
        *) die "unknown side $side" ;;
      esac
      sleep 1
      s0=$(ticks "$SERVER_PID")
      /usr/bin/time -f "%U %S" -o "$WORK/sbtime" "${SB[@]}" "${rate[@]}" --time="$WINDOW" run >"$WORK/sb.txt" 2>&1 ||
        die "sysbench failed: $(tail -3 "$WORK/sb.txt")"
      s1=$(ticks "$SERVER_PID")
      if [ -n "$wb" ]; then
        kill -INT "$wb" 2>/dev/null || true
        wait "$wb" || die "wirebench failed"
      fi
      read -r tps tx < <(sb_result "$WORK/sb.txt")
      drops=0
      [ -n "$wb" ] && drops=$(python3 -c "import json; print(json.load(open('$WORK/wb.json'))['kernel_drops'])")
      read -r su ss <"$WORK/sbtime"
      line=$(awk -v r="$r" -v side="$side" -v tps="$tps" -v tx="$tx" -v st=$((s1 - s0)) -v su="$su" -v ss="$ss" -v d="$drops" \
        'BEGIN {printf "%5d %-9s %10.0f %17.2f %17.2f %13d", r, side, tps, st * 1e4 / tx, (su + ss) * 1e6 / tx, d}')
      echo "$line"
      echo "$line" >>"$WORK/tps"
    done
  done
  base=$(awk '$2 == "none" {print $3}' "$WORK/tps" | median_spread | cut -d' ' -f1)
  sbase=$(awk '$2 == "none" {print $4}' "$WORK/tps" | median_spread | cut -d' ' -f1)
  for side in "${sides[@]}"; do
    read -r med lo hi < <(awk -v s="$side" '$2 == s {print $3}' "$WORK/tps" | median_spread)
    read -r smed slo shi < <(awk -v s="$side" '$2 == s {print $4}' "$WORK/tps" | median_spread)
    read -r cmed _ _ < <(awk -v s="$side" '$2 == s {print $5}' "$WORK/tps" | median_spread)
    awk -v s="$side" -v m="$med" -v lo="$lo" -v hi="$hi" -v b="$base" -v sm="$smed" -v slo="$slo" -v shi="$shi" -v sb="$sbase" -v cm="$cmed" \
      'BEGIN {printf "%-9s median %7.0f TPS (%.0f..%.0f) x%.3f of none; server %.2f µs/stmt (%.2f..%.2f, %+.2f vs none); sysbench %.2f µs/stmt\n", s, m, lo, hi, (b > 0 ? m / b : 0), sm, slo, shi, sm - sb, cm}'
  done
}

# tap_share PERFDATA: per command with enough samples, the share of its
# CPU samples whose kernel stack holds the packet tap (tpacket_rcv: the
# filter, the copy into the ring).
tap_share() {
  perf script -i "$1" -F comm,ip,sym 2>/dev/null | awk '
    function flush() { if (c != "") { tot[c]++; if (tp) tap[c]++ } }
    /^[^\t]/ { flush(); c = $1; tp = 0; next }
    /tpacket_rcv/ { tp = 1 }
    END {
      flush()
      for (k in tot) if (k ~ /^(mariadbd|mysqld|sysbench)$/) printf " %s %.2f%% of %d samples;", k, 100 * tap[k] / tot[k], tot[k]
      srv = tot["mariadbd"] + tot["mysqld"]
      if (srv > 0) printf " wirebench itself %d samples (%.2f%% of the server'"'"'s);", tot["wirebench"], 100 * tot["wirebench"] / srv
    }'
}

perf_rounds() {
  command -v perf >/dev/null || die "perf not found"
  IFS=';' read -r -a sides <<<"$SIDES"
  echo "bench-wire perf: $WORKLOAD at $TAP_RATE statements/s, $THREADS connections, perf record -a -g for $WINDOW s per side; snap $SNAP; load $(cut -d' ' -f1-3 /proc/loadavg)"
  for r in $(seq 1 "$ROUNDS"); do
    for side in "${sides[@]}"; do
      args=()
      case $side in
        none) ;;
        tap) args=(-mode tap) ;;
        tap-snap) args=(-mode tap -answer-snap "$SNAP") ;;
        decode) args=(-mode decode) ;;
        *) die "unknown side $side" ;;
      esac
      "${SB[@]}" --rate="$TAP_RATE" --time=$((WINDOW + 5)) run >"$WORK/sb.txt" 2>&1 &
      sb=$!
      wb=
      if [ ${#args[@]} -gt 0 ]; then
        "${WB[@]}" "${args[@]}" -duration $((WINDOW + 3))s >"$WORK/wb.json" &
        wb=$!
      fi
      sleep 1
      perf record -q -a -g -o "$WORK/perf.data" -- sleep "$WINDOW" >/dev/null 2>&1
      [ -n "$wb" ] && { wait "$wb" || die "wirebench failed"; }
      wait "$sb" || die "sysbench failed: $(tail -3 "$WORK/sb.txt")"
      drops=0
      [ -n "$wb" ] && drops=$(python3 -c "import json; print(json.load(open('$WORK/wb.json'))['kernel_drops'])")
      printf "round %d %-9s tap share:%s kernel drops %s\n" "$r" "$side" "$(tap_share "$WORK/perf.data")" "$drops"
    done
  done
}

case $MODE in
  cpu) cpu_rounds ;;
  tap) tap_rounds ;;
  perf) perf_rounds ;;
  *) die "MODE must be cpu, tap or perf" ;;
esac
