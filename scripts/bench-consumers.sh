#!/usr/bin/env bash
# bench-consumers.sh: what the statement consumers watch needs cost by
# themselves. On a private sandbox (performance_schema=ON, consumers off as
# the sandbox starts), sysbench oltp_read_write runs in alternating pairs:
# events_statements_current/history/history_long off, then on. Prints each
# pair's ratio and the median.
# Environment: ROUNDS (pairs, 5), SECS (15), THREADS (8). Needs sysbench.
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-5}; SECS=${SECS:-15}; THREADS=${THREADS:-8}
command -v sysbench >/dev/null || { echo "bench-consumers: sysbench not found (make deps installs it)" >&2; exit 1; }
go build -o bin/gapscope ./cmd/gapscope
dir=$(mktemp -d /tmp/gapscope-consumers.XXXXXX)
trap 'bin/gapscope lab down --dir "$dir/lab" >/dev/null 2>&1 || true; rm -rf "$dir"' EXIT
bin/gapscope lab up --dir "$dir/lab" --opt=--performance-schema=ON >/dev/null
port=$(grep -o '"port": *[0-9]*' "$dir/lab/sandbox.json" | grep -o '[0-9]*$')
m=(mariadb -h127.0.0.1 -P"$port" -uroot)
"${m[@]}" -e "CREATE DATABASE sbtest"
sb=(sysbench oltp_read_write --mysql-host=127.0.0.1 --mysql-port="$port" --mysql-user=root --tables=4 --table-size=20000 --threads="$THREADS")
"${sb[@]}" prepare >/dev/null
tps() { "${sb[@]}" --time="$SECS" run | grep -oE 'transactions: +[0-9]+ +\([0-9.]+' | grep -oE '[0-9.]+$'; }
consumers() { "${m[@]}" -e "UPDATE performance_schema.setup_consumers SET ENABLED='$1' WHERE NAME LIKE 'events_statements%'"; }
ratios=()
for i in $(seq "$ROUNDS"); do
  consumers NO; off=$(tps)
  consumers YES; on=$(tps)
  r=$(python3 -c "print('%.3f' % ($on / $off))")
  ratios+=("$r")
  echo "pair $i/$ROUNDS: consumers off $off TPS, on $on TPS, x$r"
done
python3 -c "import statistics,sys; v=[float(x) for x in sys.argv[1:]]; print('median x%.3f (range x%.3f-x%.3f) over %d pairs' % (statistics.median(v), min(v), max(v), len(v)))" "${ratios[@]}"
