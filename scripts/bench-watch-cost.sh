#!/usr/bin/env bash
# bench-watch-cost.sh: where `gapscope watch`'s cost to a busy server comes
# from. On a private sandbox (performance_schema and the statement history
# consumers on, history_long of RING rows) sysbench oltp_read_write runs for
# SECS seconds under each setting; a baseline run sits between settings and
# each setting is compared with the mean of the baselines around it.
#   capture-ref   tcpdump writing the port's packets to /dev/null
#   poll-1s       watch --no-capture --min-poll 1s (server polling only)
#   poll-250ms    watch --no-capture (default --min-poll 250ms)
#   watch-all     watch --cpu-budget 0 (capture of every connection)
#   watch         watch with its defaults (CPU budget 0.5% of the host)
#   watch-sample4 watch --sample 4 (1 in 4 connections followed)
# Environment: RING (10000), SECS (15), THREADS (8). Needs root and sysbench.
set -euo pipefail
cd "$(dirname "$0")/.."
RING=${RING:-10000}; SECS=${SECS:-15}; THREADS=${THREADS:-8}
go build -o bin/gapscope ./cmd/gapscope
dir=$(mktemp -d /tmp/gapscope-cost.XXXXXX)
trap 'bin/gapscope lab down --dir "$dir/lab" >/dev/null 2>&1 || true; pkill -f "tcpdump -i lo -w /dev/null" || true; rm -rf "$dir"' EXIT
bin/gapscope lab up --dir "$dir/lab" --opt=--performance-schema-events-statements-history-long-size="$RING" >/dev/null
port=$(grep -o '"port": *[0-9]*' "$dir/lab/sandbox.json" | grep -o '[0-9]*$')
dsn="root@tcp(127.0.0.1:$port)/"
mariadb -h127.0.0.1 -P"$port" -uroot -e "CREATE DATABASE sbtest"
sb=(sysbench oltp_read_write --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=root --tables=4 --table-size=20000 --threads="$THREADS")
"${sb[@]}" prepare >/dev/null
tps() { "${sb[@]}" --time="$SECS" run | grep -oE 'transactions: +[0-9]+ +\([0-9.]+' | grep -oE '[0-9.]+$'; }
watch_bg() { bin/gapscope watch --dsn "$dsn" --duration "$((SECS + 4))s" --no-live --format json "$@" >"$dir/w.json" 2>/dev/null & sleep 2; }
summary() { python3 -c "import json;d=json.load(open('$dir/w.json'));j=d['join'];s=d['server_side'];print('polls %d, joined %d of %d wire, ring lost %d' % (s['polls'], j['Joined'], j['Wire'], s['ring_lost']))"; }
echo "bench-watch-cost: history_long $RING rows, sysbench $THREADS threads, ${SECS}s runs; load average $(cut -d' ' -f1-3 /proc/loadavg)"
prev=$(tps); echo "baseline: $prev TPS"
for setting in capture-ref poll-1s poll-250ms watch-all watch watch-sample4; do
  case $setting in
    capture-ref) tcpdump -i lo -w /dev/null -U "port $port" 2>/dev/null & sleep 1 ;;
    poll-1s) watch_bg --no-capture --min-poll 1s ;;
    poll-250ms) watch_bg --no-capture ;;
    watch-all) watch_bg --cpu-budget 0 ;;
    watch) watch_bg ;;
    watch-sample4) watch_bg --sample 4 ;;
  esac
  got=$(tps)
  [ "$setting" = capture-ref ] && pkill -f "tcpdump -i lo -w /dev/null" || sleep 3
  base=$(tps)
  ratio=$(python3 -c "print('x%.3f' % ($got / (($prev + $base) / 2)))")
  extra=""; [ "$setting" != capture-ref ] && extra=" ($(summary))"
  printf '%-12s %8s TPS  %s of the baselines around it (%s, %s)%s\n' "$setting" "$got" "$ratio" "$prev" "$base" "$extra"
  prev=$base
done
echo "bench-watch-cost: load average at the end $(cut -d' ' -f1-3 /proc/loadavg)"
