#!/usr/bin/env bash
# bench-watch-defaults.sh: what `gapscope watch` at its default flags costs
# a saturated server, and whether it still sees every statement and joins
# every slow one. On a private sandbox (statement consumers current,
# history and history_long on, history_long at its default 1,000 rows)
# sysbench oltp_read_write saturates the host while another connection
# runs SELECT SLEEP(0.2) back to back; each round runs it without watch
# and with watch (no flags but the DSN, --iface lo and --format json), the
# order alternating from round to round so that the machine's drift favours
# neither. Prints per round the TPS of both, the statements watch saw of
# those sysbench and the sleeper completed, and the slow statements it
# joined; at the end the median TPS ratio (watch's cost) and the totals.
# On a shared or 2-core machine single rounds spread by +-10%: compare
# medians of many rounds, never one.
# FLOOR adds a third run per round, a capture floor, the three runs' order
# rotating: FLOOR=tap is gapscope's own ring and kernel filter, read and
# thrown away (benchmarks/wirebench -mode tap: what any capture of these
# packets costs before decoding one); FLOOR=tcpdump is tcpdump writing
# the port's packets to /dev/null (a capture tool a DBA already trusts).
#
# Usage: scripts/bench-watch-defaults.sh [BINARY]
# Environment: ROUNDS (12), DURATION (seconds per run, 12), WARMUP (3),
# THREADS (8), FLOOR (none), KEEP (a directory: each round's watch result,
# JSON, kept there as watch-ROUND.json, and its statement events as
# events-ROUND.jsonl, to see why a statement was not joined; writing the
# events costs watch CPU, so KEEP is for diagnosis, not for figures). Needs root (capture), sysbench and the mariadb
# client (and tcpdump for FLOOR=tcpdump).
set -euo pipefail
cd "$(dirname "$0")/.."
ROUNDS=${ROUNDS:-12}; DURATION=${DURATION:-12}; WARMUP=${WARMUP:-3}; THREADS=${THREADS:-8}; FLOOR=${FLOOR:-}
KEEP=${KEEP:-}
[ -z "$KEEP" ] || mkdir -p "$KEEP"
WORK=$(mktemp -d /tmp/gapscope-bench-defaults.XXXXXX)
BENCH=bench-watch-defaults
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
GAPSCOPE=${1:-}
bench_binary
WATCH_PID=
trap bench_cleanup EXIT
case $FLOOR in
  "") ;;
  tcpdump) command -v tcpdump >/dev/null || die "FLOOR=tcpdump needs tcpdump" ;;
  tap) go build -o "$WORK/wirebench" ./benchmarks/wirebench ;;
  *) die "FLOOR is tap or tcpdump, not $FLOOR" ;;
esac

bench_oltp_lab

# sleeper N: one connection running N x SELECT SLEEP(0.2), back to back.
sleeper() {
  local q=""
  for _ in $(seq 1 "$1"); do q+="SELECT SLEEP(0.2);"; done
  mariadb -h 127.0.0.1 -P "$PORT" -u root -N -e "$q" >/dev/null
}

# queries FILE: the statements a sysbench run completed.
queries() { sed -n 's/^ *total: *\([0-9]*\)$/\1/p' "$1" | head -1; }

# run none|watch|floor: one measured sysbench run beside the sleeper; prints
# "TPS STATEMENTS_RUN SEEN SLEEPS SLEEPS_JOINED OUTLIERS OUTLIERS_JOINED DROPPED"
# (DROPPED: packets the capture dropped plus statements the join queue did)
# (SEEN.. 0 without watch).
run() {
  if [ "$1" = watch ]; then
    local keep=()
    [ -z "$KEEP" ] || keep=(--events "$KEEP/events-$r.jsonl" --events-max-size 0)
    "$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --format json "${keep[@]}" >"$WORK/w.json" 2>"$WORK/w.err" &
    WATCH_PID=$!
    sleep 4 # watch connects, calibrates and opens the capture first (seconds on a loaded host)
  elif [ "$1" = floor ]; then
    if [ "$FLOOR" = tcpdump ]; then
      tcpdump -i lo -w /dev/null -U "tcp port $PORT" 2>/dev/null &
    else
      "$WORK/wirebench" -mode tap -iface lo -port "$PORT" -duration 1h >/dev/null &
    fi
    WATCH_PID=$!
    sleep 1
  fi
  local sleeps=$(((WARMUP + DURATION) * 5 - 5))
  sleeper "$sleeps" &
  local sl=$!
  "${SB[@]}" --time="$WARMUP" run >"$WORK/warm.txt"
  "${SB[@]}" --time="$DURATION" run >"$WORK/sb.txt"
  wait "$sl"
  local tps tx run_q seen=0 slept=0 outliers=0 joined=0 dropped=0
  read -r tps tx < <(sb_result "$WORK/sb.txt")
  run_q=$(($(queries "$WORK/warm.txt") + $(queries "$WORK/sb.txt") + sleeps))
  if [ "$1" = floor ]; then
    kill -INT "$WATCH_PID"; wait "$WATCH_PID" || true
    WATCH_PID=
  elif [ -n "$WATCH_PID" ]; then
    kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch failed: $(tail -3 "$WORK/w.err")"
    WATCH_PID=
    [ -z "$KEEP" ] || cp "$WORK/w.json" "$KEEP/watch-$r.json"
    read -r seen slept outliers joined dropped < <(python3 -c '
import json, sys
res = json.load(open(sys.argv[1]))
c = res["coverage"]
slept = sum(d.get("joined", 0) for d in res["profile"]["digests"] if "SLEEP" in d.get("digest_text", "").upper())
print(c["seen"], slept, c["outliers"], c["outliers_joined"], res["capture"].get("KernelDrops", 0) + res["server_side"]["queue_drops"])' "$WORK/w.json")
  fi
  echo "$tps $run_q $seen $sleeps $slept $outliers $joined $dropped"
}

echo "bench-watch-defaults: $GAPSCOPE at its default flags; sysbench $THREADS threads, ${DURATION} s runs; load $(cut -d' ' -f1-3 /proc/loadavg)"
# order R: the runs of round R, rotated so that each comes first as often.
order() {
  if [ -n "$FLOOR" ]; then
    case $(($1 % 3)) in 1) echo "none watch floor" ;; 2) echo "watch floor none" ;; 0) echo "floor none watch" ;; esac
  elif [ $(($1 % 2)) -eq 1 ]; then echo "none watch"; else echo "watch none"; fi
}

for r in $(seq 1 "$ROUNDS"); do
  order=$(order "$r")
  floor=0
  for m in $order; do
    case $m in
      none) none=$(run none) ;;
      watch) with=$(run watch) ;;
      floor) read -r floor _ < <(run floor) ;;
    esac
  done
  read -r tps_n _ <<<"$none"
  read -r tps_w ran seen sleeps slept outliers joined dropped <<<"$with"
  extra=""; [ -n "$FLOOR" ] && extra=", $FLOOR $floor"
  echo "round $r/$ROUNDS ($order): TPS none $tps_n, watch $tps_w$extra; watch saw $seen of $ran statements (dropped $dropped); $slept of $sleeps sleeps joined; $joined of $outliers outliers joined"
  echo "$tps_n $tps_w $ran $seen $sleeps $slept $outliers $joined $floor" >>"$WORK/rounds.txt"
done
python3 - "$WORK/rounds.txt" "$FLOOR" <<'PY'
import statistics, sys
rows = [list(map(float, l.split())) for l in open(sys.argv[1]) if l.strip()]
ratios = [r[1] / r[0] for r in rows if r[0] > 0]
ran, seen = sum(r[2] for r in rows), sum(r[3] for r in rows)
print(f"watch at its defaults: median x{statistics.median(ratios):.3f} of TPS without watch "
      f"(cost {100 * (1 - statistics.median(ratios)):.1f}%; range x{min(ratios):.3f}-x{max(ratios):.3f}, {len(ratios)} rounds); "
      f"saw {seen:.0f} of {ran:.0f} statements run ({100 * seen / max(ran, 1):.2f}%, watch's own and the sleeper's handshake queries included); "
      f"sleeps joined {sum(r[5] for r in rows):.0f} of {sum(r[4] for r in rows):.0f}; outliers joined {sum(r[7] for r in rows):.0f} of {sum(r[6] for r in rows):.0f}")
floor = [r[8] / r[0] for r in rows if r[0] > 0 and r[8] > 0]
if floor:
    what = {"tap": "gapscope's ring read and thrown away", "tcpdump": "tcpdump -w /dev/null"}[sys.argv[2]]
    print(f"capture floor ({what}): median x{statistics.median(floor):.3f} of TPS without it "
          f"(cost {100 * (1 - statistics.median(floor)):.1f}%; range x{min(floor):.3f}-x{max(floor):.3f})")
PY
