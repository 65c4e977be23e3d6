#!/usr/bin/env bash
# perf-watch-share.sh: the share of the whole host's CPU that capturing
# costs, measured inside the kernel with perf rather than through TPS
# (which a shared 2-core VM's noise moves by +-10% a round). While sysbench
# oltp_read_write saturates a private sandbox, each round records
# `perf record -a -g` for WINDOW seconds beside each side of SIDES, the
# sides' order alternating:
#   tap:   gapscope's ring read and thrown away (benchmarks/wirebench -mode
#          tap): the floor of any capture of these packets;
#   watch: gapscope watch at its default flags;
#   tcx-tap, tcx-count: the eBPF floors (benchmarks/wirebench): a program at
#          lo's tcx hooks copying the port's packets into a BPF ring buffer
#          read and thrown away, or only counting them;
#   tcx-head, tcx-head-N: the header-only eBPF floor (wirebench -mode
#          tcx-head): the same program writing one fixed-size record per
#          packet (TCP/IP header fields, payload length, timestamp, the
#          payload's first N bytes, 64 for tcx-head, and last TAIL) into the
#          ring buffer with no wake-up per record, the records read in place.
# Prints per round and side the share of all CPU samples in the kernel's
# packet tap (stacks holding tpacket_rcv, the filter and the copy into the
# ring, or for the tcx sides the eBPF program; on loopback both run in the
# sending process's context), in the capturing process itself, and their
# sum, and the packets per second the side saw; then each side's medians
# and ranges, and for the wirebench sides the same as ns of CPU per packet
# (the share of the host's CPUs over the packet rate: the load moves the
# rate, and the share with it).
# The server's own work for watch's queries is in mariadbd's samples and
# not counted here (scripts/bench-watch-ab.sh measures it).
#
# Usage: scripts/perf-watch-share.sh [BINARY]
# Environment: ROUNDS (3), WINDOW (seconds recorded, 10), THREADS (8),
# SIDES ("tap watch"; also tcx-tap, tcx-count, tcx-head, tcx-head-N), TAIL
# (16), WAKE_KB (1024: a record submitted while this much waits wakes the
# reader, which otherwise reads every 100 ms; 0: the timer alone),
# KEEP_PERF (a directory: each window's perf.data is kept there as
# ROUND-SIDE.data, to break a side's kernel part down with perf report).
# Needs root, perf, sysbench and the mariadb client.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}; WINDOW=${WINDOW:-10}; THREADS=${THREADS:-8}; SIDES=${SIDES:-tap watch}
TAIL=${TAIL:-16}; WAKE_KB=${WAKE_KB:-1024}; KEEP_PERF=${KEEP_PERF:-}
WORK=$(mktemp -d /tmp/gapscope-perf-share.XXXXXX)
BENCH=perf-watch-share
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
command -v perf >/dev/null || die "perf not found (apt-get install linux-perf)"
GAPSCOPE=${1:-}
bench_binary
WATCH_PID=
trap bench_cleanup EXIT
go build -o "$WORK/wirebench" ./benchmarks/wirebench
bench_oltp_lab

# share SIDE FILE: "TAP PROCESS" percentages of all samples in FILE.
share() {
  local comm=wirebench
  [ "$1" = watch ] && comm=$(basename "$GAPSCOPE")
  local tap proc
  # The kernel's part is the AF_PACKET ring's tap (tpacket_rcv, its socket
  # filter included) or else the eBPF programs at the hooks (summed, each
  # counted with what it calls): watch runs either source (--capture).
  # (awk reads to the end: perf report must not die of a closed pipe)
  tap=$(perf report -i "$2" --children --sort sym --stdio -g none 2>/dev/null |
    awk '$1 ~ /%$/ { p = $1; sub("%", "", p) }
      $1 ~ /%$/ && $NF == "tpacket_rcv" { tp += p }
      $1 ~ /%$/ && $NF ~ /^bpf_prog_[0-9a-f]+$/ { bp += p }
      END { printf "%.2f\n", (tp > 0 ? tp : bp) }')
  proc=$(perf report -i "$2" --no-children --sort comm --stdio -g none 2>/dev/null |
    awk -v c="$comm" '$1 ~ /%$/ && $2 == substr(c, 1, 15) && v == "" {v = $1} END {sub("%", "", v); print v}')
  echo "${tap:-0} ${proc:-0}"
}

# run SIDE ROUND: one recorded window beside sysbench.
run() {
  "${SB[@]}" --time=$((WINDOW + 8)) run >"$WORK/sb.txt" &
  local sb=$!
  if [ "$1" != watch ]; then
    local args=(-mode "$1")
    case $1 in
      tcx-head) args=(-mode tcx-head -head 64 -tail "$TAIL" -wake-kb "$WAKE_KB") ;;
      tcx-head-*) args=(-mode tcx-head -head "${1#tcx-head-}" -tail "$TAIL" -wake-kb "$WAKE_KB") ;;
    esac
    "$WORK/wirebench" "${args[@]}" -iface lo -port "$PORT" -duration $((WINDOW + 6))s >"$WORK/wb.json" 2>"$WORK/w.err" &
  else
    "$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --format json --duration $((WINDOW + 6))s >/dev/null 2>"$WORK/w.err" &
  fi
  WATCH_PID=$!
  sleep 4 # the capture (watch: and its server reads) is running
  perf record -q -a -g -o "$WORK/perf.data" -- sleep "$WINDOW" >/dev/null 2>&1
  wait "$WATCH_PID" || die "$1 failed: $(tail -3 "$WORK/w.err" 2>/dev/null)"
  WATCH_PID=
  wait "$sb" || die "sysbench failed: $(tail -3 "$WORK/sb.txt")"
  read -r tap proc < <(share "$1" "$WORK/perf.data")
  [ -n "$KEEP_PERF" ] && mkdir -p "$KEEP_PERF" && cp "$WORK/perf.data" "$KEEP_PERF/$2-$1.data"
  # The packets the side saw per second: the load moves the throughput,
  # and with it the share; ns of CPU per packet does not move with it.
  local rate=0 extra=
  if [ "$1" != watch ]; then
    read -r rate extra < <(python3 -c "import json; d = json.load(open('$WORK/wb.json')); print(f\"{d['packets'] / d['seconds']:.0f} ({d['packets'] / d['seconds']:.0f} packets/s, {d['kernel_drops']} dropped)\")")
  fi
  printf "round %d %-12s kernel tap %5.2f%%, process %5.2f%%, together %5.2f%% of the host's CPU; load %s %s\n" \
    "$2" "$1" "$tap" "$proc" "$(python3 -c "print($tap + $proc)")" "$(cut -d' ' -f1 /proc/loadavg)" "$extra"
  echo "$1 $tap $proc $rate" >>"$WORK/results"
}

echo "$BENCH: $GAPSCOPE; sysbench oltp_read_write, $THREADS threads, saturating; perf record -a -g for $WINDOW s per side; load $(cut -d' ' -f1-3 /proc/loadavg)"
read -r -a sides <<<"$SIDES"
for r in $(seq 1 "$ROUNDS"); do
  if [ $((r % 2)) -eq 0 ]; then
    for ((i = ${#sides[@]} - 1; i >= 0; i--)); do run "${sides[i]}" "$r"; done
  else
    for s in "${sides[@]}"; do run "$s" "$r"; done
  fi
done
python3 - "$WORK/results" "$(nproc)" <<'EOF'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    side, tap, proc, rate = line.split()
    by.setdefault(side, []).append((float(tap), float(proc), float(rate)))
cpus = int(sys.argv[2])
def ms(xs, f):
    return f"{f(statistics.median(xs))} ({f(min(xs))}-{f(max(xs))})"
pct = lambda x: f"{x:.2f}%"
ns = lambda x: f"{x:.0f}"
for side, v in by.items():
    taps, procs = [t for t, _, _ in v], [p for _, p, _ in v]
    tot = [t + p for t, p, _ in v]
    line = (f"{side}: median kernel tap {ms(taps, pct)}, process {ms(procs, pct)}, "
            f"together {ms(tot, pct)} of the host's CPU over {len(v)} rounds")
    if all(r > 0 for _, _, r in v):
        # share of cpus x 1 s of CPU per packet seen
        per = lambda i: [x[i] / 100 * cpus * 1e9 / x[2] for x in v]
        line += f"; ns of CPU per packet: kernel {ms(per(0), ns)}, process {ms(per(1), ns)}"
    print(line)
EOF
echo "load at the end $(cut -d' ' -f1-3 /proc/loadavg)"
