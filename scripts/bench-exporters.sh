#!/usr/bin/env bash
# What the exporters cost per statement, in CPU (user + system, every
# goroutine: the OTLP SDK batches, encodes and sends on its own), beside
# watch's own per-statement cost. Runs BenchmarkExporters' variants as
# whole processes over N statements, alternating rounds so that machine
# load hits all alike, and prints the median CPU per statement each adds
# over the no-exporter baseline.
#
#   scripts/bench-exporters.sh [ROUNDS] [STATEMENTS]   (default 5, 1000000)
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-5}
n=${2:-1000000}
[ -x /usr/bin/time ] || { echo "needs /usr/bin/time (make deps)" >&2; exit 1; }
bin=$(mktemp -d)/export.test
trap 'rm -rf "$(dirname "$bin")"' EXIT
go test -c -o "$bin" ./internal/export/
variants=(none prometheus otel-metrics otel-1pct all-1pct)
declare -A cpu
for ((r = 0; r < rounds; r++)); do
  for v in "${variants[@]}"; do
    t=$( { /usr/bin/time -f "%U %S" "$bin" -test.run '^$' -test.bench "BenchmarkExporters/$v\$" \
      -test.benchtime "${n}x" >/dev/null; } 2>&1 | tail -1)
    cpu[$v]+="$(awk '{print $1 + $2}' <<<"$t") "
  done
done
median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
base=$(median <<<"${cpu[none]}")
printf "%-12s %10s %16s   (%d statements, %d rounds, runs: CPU s)\n" variant "CPU s" "added per stmt" "$n" "$rounds"
for v in "${variants[@]}"; do
  m=$(median <<<"${cpu[$v]}")
  printf "%-12s %10.2f %13.0f ns   %s\n" "$v" "$m" "$(awk -v m="$m" -v b="$base" -v n="$n" 'BEGIN {print (m - b) / n * 1e9}')" "${cpu[$v]}"
done
