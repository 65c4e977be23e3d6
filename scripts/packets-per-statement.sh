#!/usr/bin/env bash
# packets-per-statement.sh: how many packets carry a statement on loopback
# under sysbench oltp_read_write on a private sandbox: tcpdump records
# DURATION seconds of the server's port while sysbench runs, and tshark
# counts the packets each side sent with a payload and without (pure ACKs),
# beside the statements sysbench completed. What a capture hands over per
# statement sets what any capture design costs: on loopback an answer is
# one packet however many rows it holds (the interface's MTU is 64 KiB).
#
# Usage: scripts/packets-per-statement.sh [BINARY]
# Environment: DURATION (5), THREADS (8). Needs root, sysbench, tcpdump,
# tshark and the mariadb client.
set -euo pipefail
cd "$(dirname "$0")/.."
DURATION=${DURATION:-5}; THREADS=${THREADS:-8}
WORK=$(mktemp -d /tmp/gapscope-packets.XXXXXX)
BENCH=packets-per-statement
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
command -v tshark >/dev/null || die "tshark not found (make deps installs it)"
GAPSCOPE=${1:-}
bench_binary
WATCH_PID=
trap bench_cleanup EXIT
bench_oltp_lab
"${SB[@]}" --time=3 run >/dev/null # warm the buffer pool first
tcpdump -U -i lo -w "$WORK/c.pcap" "tcp port $PORT" 2>/dev/null &
WATCH_PID=$!
sleep 1
"${SB[@]}" --time="$DURATION" run >"$WORK/sb.txt"
sleep 1
kill "$WATCH_PID"; wait "$WATCH_PID" || true
WATCH_PID=
q=$(sed -n 's/^ *total: *\([0-9]*\)$/\1/p' "$WORK/sb.txt" | head -1)
tshark -r "$WORK/c.pcap" -T fields -e tcp.srcport -e tcp.len 2>/dev/null | awk -v port="$PORT" -v q="$q" '
  $1 == port { if ($2 > 0) sd++; else sa++; next }
  { if ($2 > 0) cd++; else ca++ }
  END {
    printf "statements %d; server packets with data %d (%.3f per statement), pure ACKs %d; client packets with data %d (%.3f per statement), pure ACKs %d\n",
      q, sd, sd / q, sa, cd, cd / q, ca
  }'
