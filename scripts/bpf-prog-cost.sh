#!/usr/bin/env bash
# bpf-prog-cost.sh: what watch's eBPF program costs per packet on a live
# host, from the kernel's own accounting (kernel.bpf_stats_enabled: the
# time each run of a program takes and how many ran), beside the floor
# every capture program pays (benchmarks/wirebench -mode tcx-count: the
# same hook and header match, counting the port's packets, writing
# nothing). While sysbench oltp_read_write saturates a private sandbox,
# each round runs both sides in turn (the order alternating) and reads the
# programs' counters over WINDOW seconds. Prints per round and side the
# packets a second, ns per packet, and the share of the host's CPUs that
# makes; then each side's medians. The kernel's accounting adds two clock
# readings per run to what it measures (both sides alike), and it counts
# the program alone, not the hook that calls it. BenchmarkHeaderProgram
# (internal/capture) times the same program with warm caches.
#
# Usage: scripts/bpf-prog-cost.sh [BINARY]
# Environment: ROUNDS (3), WINDOW (seconds, 8), THREADS (8). Needs root,
# bpftool, sysbench and the mariadb client.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-3}; WINDOW=${WINDOW:-8}; THREADS=${THREADS:-8}
WORK=$(mktemp -d /tmp/gapscope-bpf-cost.XXXXXX)
BENCH=bpf-prog-cost
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
command -v bpftool >/dev/null || die "bpftool not found (make deps installs it)"
GAPSCOPE=${1:-}
bench_binary
go build -o "$WORK/wirebench" ./benchmarks/wirebench
WATCH_PID=
STATS_WAS=$(cat /proc/sys/kernel/bpf_stats_enabled)
trap 'echo "$STATS_WAS" >/proc/sys/kernel/bpf_stats_enabled; bench_cleanup' EXIT
CPUS=$(nproc)
bench_oltp_lab
"${SB[@]}" --time=3 run >/dev/null # warm the buffer pool first

# side NAME: starts the side in the background (WATCH_PID).
side() {
  case $1 in
    watch) "$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --format json >"$WORK/side.out" 2>"$WORK/side.err" & ;;
    tcx-count) "$WORK/wirebench" -port "$PORT" -mode tcx-count -duration 1h >"$WORK/side.out" 2>"$WORK/side.err" & ;;
  esac
  WATCH_PID=$!
}

# progs FILE: the scheduler-class programs' run counters now.
progs() { bpftool prog show -j >"$1"; }

for r in $(seq 1 "$ROUNDS"); do
  order="watch tcx-count"
  [ $((r % 2)) -eq 0 ] && order="tcx-count watch"
  for s in $order; do
    side "$s"
    sleep 4 # the side attaches its program (watch connects and calibrates first)
    "${SB[@]}" --time=$((WINDOW + 4)) run >"$WORK/sb.txt" &
    sb=$!
    sleep 2
    echo 1 >/proc/sys/kernel/bpf_stats_enabled
    progs "$WORK/p0.json"
    sleep "$WINDOW"
    progs "$WORK/p1.json"
    echo "$STATS_WAS" >/proc/sys/kernel/bpf_stats_enabled
    wait "$sb"
    kill -INT "$WATCH_PID"; wait "$WATCH_PID" || true
    WATCH_PID=
    python3 - "$WORK/p0.json" "$WORK/p1.json" "$WINDOW" "$CPUS" "$s" "$r" "$ROUNDS" <<'PY' | tee -a "$WORK/results"
import json, sys
before = {p["id"]: p for p in json.load(open(sys.argv[1]))}
runs = ns = 0
for p in json.load(open(sys.argv[2])):
    q = before.get(p["id"])
    if q is None or p.get("type") != "sched_cls":
        continue
    runs += p.get("run_cnt", 0) - q.get("run_cnt", 0)
    ns += p.get("run_time_ns", 0) - q.get("run_time_ns", 0)
window, cpus, side, r, rounds = float(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6], sys.argv[7]
if runs == 0:
    sys.exit(f"bpf-prog-cost: {side} ran no program in round {r}")
print(f"round {r}/{rounds} {side}: {runs / window:.0f} packets/s, {ns / runs:.0f} ns per packet, {100 * ns / (window * 1e9 * cpus):.2f}% of the host")
PY
  done
done
python3 - "$WORK/results" <<'PY'
import re, statistics, sys
by = {}
for line in open(sys.argv[1]):
    m = re.match(r"round \S+ (\S+): (\d+) packets/s, (\d+) ns per packet, ([\d.]+)% of the host", line)
    if m:
        by.setdefault(m[1], []).append((int(m[3]), float(m[4])))
for side, v in by.items():
    ns, share = [x[0] for x in v], [x[1] for x in v]
    print(f"{side}: median {statistics.median(ns):.0f} ns per packet ({min(ns)}-{max(ns)}), {statistics.median(share):.2f}% of the host ({min(share):.2f}-{max(share):.2f}%), {len(v)} rounds")
PY
