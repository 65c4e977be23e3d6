#!/usr/bin/env bash
# Side-by-side benchmark: `gapscope digest` vs pt-query-digest on the same
# >= 50 MB MariaDB slow log (long_query_time=0 under sysbench), in one run,
# alternating rounds so that machine load hits both alike. Prints events/s
# of each, the ratio, and peak RSS; then gapscope's RSS on the same log
# doubled, to show memory does not grow with file size.
#
#   scripts/bench-digest.sh [ROUNDS]        (default 3 rounds each)
#   GAPSCOPE_ARGS="--group-by fingerprint" scripts/bench-digest.sh 3
#                                           (gapscope groups as pt does)
#
# The log is generated once by testdata/gen/slowlog and cached under
# $GAPSCOPE_BENCH_DIR (default /tmp/gapscope-bench).
set -euo pipefail
cd "$(dirname "$0")/.."
rounds=${1:-3}
dir=${GAPSCOPE_BENCH_DIR:-/tmp/gapscope-bench}
log=$dir/mariadb-sysbench.log
min_bytes=$((50 * 1024 * 1024))
mkdir -p "$dir"

need_pkg() { # command package
  command -v "$1" >/dev/null 2>&1 && return 0
  echo "installing $2" >&2
  sudo=""; [ "$(id -u)" -eq 0 ] || sudo=sudo
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq "$2" >/dev/null
}
need_pkg pt-query-digest percona-toolkit
need_pkg sysbench sysbench
[ -x /usr/bin/time ] || need_pkg /usr/bin/time time

size() { stat -c %s "$1" 2>/dev/null || echo 0; }

if [ "$(size "$log")" -lt "$min_bytes" ] || [ ! -s "$log.expect" ]; then
  echo "generating a >= 50 MB MariaDB slow log in $log (sysbench, long_query_time=0) ..." >&2
  go run ./testdata/gen/slowlog -out "$log" -events 12000 -threads 4 -verbosity '' -extras=false -restart=false
fi
if [ "$(size "$log")" -lt "$min_bytes" ]; then
  echo "generated log is only $(size "$log") bytes; raise -events" >&2
  exit 1
fi
events=$(awk '$1 == "events" {print $2}' "$log.expect")
bin=$dir/gapscope
go build -o "$bin" ./cmd/gapscope

# run LABEL CMD...: one timed run, output to $dir/LABEL.out; prints
# "wall_seconds max_rss_kb cpu_seconds" (cpu = user + system, all threads).
run() {
  local label=$1 tv=$dir/time.out
  shift
  /usr/bin/time -v -o "$tv" "$@" >"$dir/$label.out" 2>"$dir/$label.err" || { cat "$dir/$label.err" >&2; return 1; }
  awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; w = s }
              /Maximum resident set size/ { r = $2 }
              /User time|System time/ { c += $2 }
              END { printf "%.3f %d %.3f\n", w, r, c }' "$tv"
}

echo "log: $log ($(size "$log") bytes, $events events by awk)"
g_walls=(); p_walls=(); g_cpus=(); p_cpus=(); g_rss=0; p_rss=0
for i in $(seq 1 "$rounds"); do
  read -r gw gr gc < <(run gapscope "$bin" digest --format json ${GAPSCOPE_ARGS:-} "$log")
  read -r pw pr pc < <(run pt-query-digest pt-query-digest "$log")
  printf 'round %d: gapscope %6.2fs wall %6.2fs cpu %7d KB | pt-query-digest %6.2fs wall %6.2fs cpu %7d KB\n' \
    "$i" "$gw" "$gc" "$gr" "$pw" "$pc" "$pr"
  g_walls+=("$gw"); p_walls+=("$pw"); g_cpus+=("$gc"); p_cpus+=("$pc")
  [ "$gr" -gt "$g_rss" ] && g_rss=$gr
  [ "$pr" -gt "$p_rss" ] && p_rss=$pr
done

median() { printf '%s\n' "$@" | sort -g | awk '{a[NR] = $1} END {print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2}'; }
gm=$(median "${g_walls[@]}"); pm=$(median "${p_walls[@]}")
gc=$(median "${g_cpus[@]}"); pc=$(median "${p_cpus[@]}")

# gapscope must have seen exactly the events awk counted.
stmts=$(awk -F': ' '/"statements"/ {gsub(/,/, "", $2); print $2; exit}' "$dir/gapscope.out")
if [ "$stmts" != "$events" ]; then
  echo "MISMATCH: gapscope reported $stmts statements, awk counted $events events" >&2
  exit 1
fi

# Memory against file size: the same log twice over (same digests).
double=$dir/mariadb-sysbench-x2.log
[ "$(size "$double")" -eq $((2 * $(size "$log"))) ] || cat "$log" "$log" >"$double"
read -r dw dr dc < <(run gapscope-x2 "$bin" digest --format json ${GAPSCOPE_ARGS:-} "$double")

echo "load average: $(cut -d' ' -f1-3 /proc/loadavg) (wall-clock ratios depend on it; CPU ratios much less)"
awk -v e="$events" -v gm="$gm" -v pm="$pm" -v gc="$gc" -v pc="$pc" -v gr="$g_rss" -v pr="$p_rss" -v dr="$dr" -v dw="$dw" 'BEGIN {
  g = e / gm; p = e / pm
  printf "\nmedian of %s rounds on %d events:\n", ARGV[1], e
  printf "  gapscope digest   %10.0f events/s  (%.2fs wall)  %10.0f events/cpu-s  peak RSS %6.1f MB\n", g, gm, e / gc, gr / 1024
  printf "  pt-query-digest   %10.0f events/s  (%.2fs wall)  %10.0f events/cpu-s  peak RSS %6.1f MB\n", p, pm, e / pc, pr / 1024
  printf "  ratio             %10.1fx wall (target >= 50x)  %10.1fx cpu\n", g / p, pc / gc
  printf "  gapscope on the log doubled: %.0f events/s, peak RSS %.1f MB (%.2fx of the single log)\n", 2 * e / dw, dr / 1024, dr / gr
}' "$rounds"
