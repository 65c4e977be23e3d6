#!/usr/bin/env bash
# bench-analyze.sh: `gapscope analyze` side by side with its peers on ONE
# sysbench text-protocol capture, in one run, in alternating rounds:
#   gapscope analyze --format json F
#   tcpdump -r F -x -nn -q -tttt | pt-query-digest --type tcpdump --watch-server 127.0.0.1:P
#   tshark -r F -d tcp.port==P,mysql -Y mysql.query -T fields -e mysql.query
# It prints, per tool: items decoded, median / min-max wall time, items/s,
# peak RSS, and the speed-up of gapscope over each peer (the targets of docs/performance.md:
# >= 100x pt-query-digest, >= 20x tshark).
#
# Environment: ROUNDS (default 3), CAPTURE (reuse a pcap; its sidecar
# NAME.expect.json gives the port, else set PORT), DURATION (default 30s) and
# RATE (sysbench transactions/s, default 100) for a new capture, which goes
# to /tmp/gapscope-bench-analyze/ and is reused by later runs.
# CPU time (user+sys, all processes of a run) is printed beside wall time:
# on a busy machine it is the steadier of the two.
set -euo pipefail
cd "$(dirname "$0")/.."

ROUNDS=${ROUNDS:-3}
DURATION=${DURATION:-30s}
RATE=${RATE:-100}
BENCH_DIR=${BENCH_DIR:-/tmp/gapscope-bench-analyze}
CAPTURE=${CAPTURE:-$BENCH_DIR/bench-text.pcap}
WORK=$(mktemp -d /tmp/gapscope-bench-run.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

die() { echo "bench-analyze: $*" >&2; exit 1; }

for tool in tcpdump tshark pt-query-digest; do
  command -v "$tool" >/dev/null || die "$tool not found (make deps installs it)"
done
[ -x /usr/bin/time ] || die "/usr/bin/time not found: apt-get install time"

# make_capture records ~DURATION of sysbench oltp_read_write, text protocol,
# with the fixture generator (private sandbox, tcpdump -U on lo).
make_capture() {
  echo "bench-analyze: recording a ${DURATION} sysbench text-protocol capture (rate ${RATE} tx/s) into $BENCH_DIR"
  mkdir -p "$BENCH_DIR"
  go run ./testdata/gen/captures -only sysbench-text -duration "$DURATION" -rate "$RATE" \
    -out "$BENCH_DIR" -name bench-text -gzip=false
  CAPTURE=$BENCH_DIR/bench-text.pcap
}

[ -f "$CAPTURE" ] || make_capture
SIDECAR=${CAPTURE%.pcap}.expect.json
if [ -z "${PORT:-}" ]; then
  [ -f "$SIDECAR" ] || die "no $SIDECAR: set PORT for $CAPTURE"
  PORT=$(grep -o '"server_port": *[0-9]*' "$SIDECAR" | grep -o '[0-9]*$')
fi
SIZE_MB=$(( $(stat -c %s "$CAPTURE") / 1048576 ))
PACKETS=$(grep -o '"packets": *[0-9]*' "$SIDECAR" 2>/dev/null | grep -o '[0-9]*$' || echo "?")

# gapscope is benchmarked only once its analyze command exists.
HAVE_GAPSCOPE=0
if go build -o bin/gapscope ./cmd/gapscope 2>"$WORK/build.log" && bin/gapscope analyze --help >/dev/null 2>&1; then
  HAVE_GAPSCOPE=1
else
  echo "bench-analyze: gapscope analyze not available yet (build log: $(head -c 300 "$WORK/build.log")); timing the peers only"
fi

# Each runner writes the number of items it decoded to $WORK/<tool>.count
# and /usr/bin/time -v reports to $WORK/<tool>.time*.
run_gapscope() {
  /usr/bin/time -v -o "$WORK/gapscope.time" bin/gapscope analyze --format json --port "$PORT" "$CAPTURE" >"$WORK/gapscope.out"
  grep -o '"statements": *[0-9]*' "$WORK/gapscope.out" | head -1 | grep -o '[0-9]*$' >"$WORK/gapscope.count"
}

run_pt() {
  /usr/bin/time -v -o "$WORK/pt.time2" tcpdump -r "$CAPTURE" -x -nn -q -tttt "tcp port $PORT" 2>/dev/null |
    /usr/bin/time -v -o "$WORK/pt.time" pt-query-digest --type tcpdump --watch-server "127.0.0.1:$PORT" \
      --output json >"$WORK/pt.out" 2>"$WORK/pt.err"
  # stdout starts with "Reading from STDIN ..." before the JSON; perl is
  # there anyway (pt-query-digest is perl) and JSON::PP is core.
  perl -MJSON::PP -0777 -ne 's/^[^{]*//s; print decode_json($_)->{global}{query_count}, "\n"' \
    "$WORK/pt.out" >"$WORK/pt.count"
}

run_tshark() {
  /usr/bin/time -v -o "$WORK/tshark.time" tshark -n -r "$CAPTURE" -d "tcp.port==$PORT,mysql" -Y mysql.query \
    -T fields -e mysql.query >"$WORK/tshark.out" 2>/dev/null
  wc -l <"$WORK/tshark.out" | tr -d ' ' >"$WORK/tshark.count"
}

now_ns() { date +%s%N; }

# cpu_ms: user+sys CPU time of a run (both processes of the pt pipeline).
cpu_ms() {
  local ms=0 f
  for f in "$WORK/$1.time" "$WORK/$1.time2"; do
    [ -f "$f" ] || continue
    ms=$(( ms + $(awk -F': ' '/(User|System) time \(seconds\)/ {s += $2} END {printf "%d", s * 1000}' "$f") ))
  done
  echo "$ms"
}

# rss_kb: peak RSS of a run; the pt pipeline's two processes run at once,
# so their peaks add up.
rss_kb() {
  local kb=0 f
  for f in "$WORK/$1.time" "$WORK/$1.time2"; do
    [ -f "$f" ] || continue
    kb=$(( kb + $(awk -F': ' '/Maximum resident set size/ {print $2}' "$f") ))
  done
  echo "$kb"
}

tools=(pt tshark)
[ "$HAVE_GAPSCOPE" = 1 ] && tools=(gapscope pt tshark)
n=${#tools[@]}
echo "bench-analyze: $CAPTURE (${SIZE_MB} MB, ${PACKETS} packets, server port $PORT), $ROUNDS rounds of: ${tools[*]}"
for ((r = 0; r < ROUNDS; r++)); do
  for ((i = 0; i < n; i++)); do
    t=${tools[$(((i + r) % n))]} # rotate the order so no tool always runs first (cold cache)
    start=$(now_ns)
    "run_$t"
    end=$(now_ns)
    echo "$(( (end - start) / 1000000 ))" >>"$WORK/$t.ms"
    rss_kb "$t" >>"$WORK/$t.rss"
    cpu_ms "$t" >>"$WORK/$t.cpu"
    printf '  round %d %-9s %7d ms  %s items\n' $((r + 1)) "$t" $(( (end - start) / 1000000 )) "$(cat "$WORK/$t.count")"
  done
done

median() { sort -n "$1" | awk '{a[NR]=$1} END {print (NR%2) ? a[(NR+1)/2] : int((a[NR/2]+a[NR/2+1])/2)}'; }
label() {
  case $1 in
    gapscope) echo "gapscope analyze --format json" ;;
    pt) echo "tcpdump -x | pt-query-digest --type tcpdump" ;;
    tshark) echo "tshark -Y mysql.query -T fields" ;;
  esac
}

echo
printf '%-46s %7s %10s %13s %10s %8s %8s\n' tool items median_ms min-max_ms items/s cpu_ms peak_RSS
for t in "${tools[@]}"; do
  med=$(median "$WORK/$t.ms")
  lo=$(sort -n "$WORK/$t.ms" | head -1)
  hi=$(sort -n "$WORK/$t.ms" | tail -1)
  count=$(cat "$WORK/$t.count")
  rate=$(awk -v c="$count" -v ms="$med" 'BEGIN {printf "%.0f", (ms > 0) ? c * 1000 / ms : 0}')
  rss=$(sort -n "$WORK/$t.rss" | tail -1)
  printf '%-46s %7s %10s %13s %10s %8s %5d MB\n' "$(label "$t")" "$count" "$med" "$lo-$hi" "$rate" \
    "$(median "$WORK/$t.cpu")" $((rss / 1024))
  echo "$med" >"$WORK/$t.med"
done

if [ "$HAVE_GAPSCOPE" = 1 ]; then
  g=$(cat "$WORK/gapscope.med")
  gc=$(median "$WORK/gapscope.cpu")
  for t in pt tshark; do
    awk -v p="$(cat "$WORK/$t.med")" -v g="$g" -v pc="$(median "$WORK/$t.cpu")" -v gc="$gc" -v name="$(label "$t")" \
      'BEGIN {printf "speed-up of gapscope over %s: x%.1f wall, x%.1f CPU (medians)\n", name,
              (g > 0) ? p / g : 0, (gc > 0) ? pc / gc : 0}'
  done
fi
echo "items: gapscope = statements decoded (all commands), pt-query-digest = query_count, tshark = frames with mysql.query"
