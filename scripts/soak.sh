#!/usr/bin/env bash
# soak.sh: watch left running under churn stays bounded. A private sandbox
# takes ~RATE statements/s of ever-new digests (an alias per statement, as
# an ORM naming aliases per call does) from short-lived connections (one per
# batch of BATCH statements), plus one planted slow digest (SELECT SLEEP)
# per batch. watch runs with --store, --events (small limits) and --http;
# every 10 s this samples watch's RSS, threads, open files, the store's and
# the events files' size, and scrapes /metrics. It fails if, after the
# first WARMUP minutes, RSS (less the capture ring), threads or open files
# grow beyond 10% of their value then, if the ring grows past
# --ring-max-mb, if the store or the events files exceed their limits by
# more than 10%, or if the planted digest does not rank first in the final
# profile and in /metrics. The ring is apart because it grows by design
# when the kernel drops packets (24 MiB doubling up to 64 by default),
# whenever a loaded host first makes it drop: that step is no leak.
#
# Usage: scripts/soak.sh [BINARY]
# Environment: SOAK_MINUTES (30), WARMUP (minutes, 5; at most a third of
# the run), RATE (5000), BATCH (500), STORE_MAX (20MB), EVENTS_MAX (10MB),
# EVENTS_KEEP (2), RING_MAX_MB (64: watch's --ring-max-mb), KEEP_WORK (1: keep the work directory), WATCH_ARGS (more
# watch flags, e.g. "--memprofile /tmp/heap": kill -USR1 takes a profile). Needs root
# (capture), the mariadb client and curl.
set -euo pipefail
cd "$(dirname "$0")/.."
SOAK_MINUTES=${SOAK_MINUTES:-30}; WARMUP=${WARMUP:-5}; RATE=${RATE:-5000}; BATCH=${BATCH:-500}
STORE_MAX=${STORE_MAX:-20MB}; EVENTS_MAX=${EVENTS_MAX:-10MB}; EVENTS_KEEP=${EVENTS_KEEP:-2}; RING_MAX_MB=${RING_MAX_MB:-64}
WORK=$(mktemp -d /tmp/gapscope-soak.XXXXXX)
BENCH=soak
# shellcheck source=lib/bench.sh
. scripts/lib/bench.sh
GAPSCOPE=${1:-}
command -v curl >/dev/null || die "curl not found"
bench_binary
WATCH_PID=; LOAD_PID=
soak_cleanup() {
  [ -n "$LOAD_PID" ] && kill "$LOAD_PID" 2>/dev/null || true
  if [ "${KEEP_WORK:-}" = 1 ]; then echo "work kept in $WORK"; WORK=/nonexistent; fi
  bench_cleanup
}
trap soak_cleanup EXIT
bytes() { python3 -c 'import re,sys; v=sys.argv[1]; m=re.fullmatch(r"([0-9.]+)\s*(KiB|MiB|GiB|KB|MB|GB|B)?",v); print(int(float(m[1])*{"KiB":1<<10,"MiB":1<<20,"GiB":1<<30,"KB":1e3,"MB":1e6,"GB":1e9,"B":1,None:1}[m[2]]))' "$1"; }
store_max=$(bytes "$STORE_MAX"); events_max=$(bytes "$EVENTS_MAX")
warm_s=$(( WARMUP * 60 )); total_s=$(( SOAK_MINUTES * 60 ))
(( warm_s * 3 > total_s )) && warm_s=$(( total_s / 3 ))

bench_lab --opt=--performance-schema=ON --opt=--max-connections=500 \
  --opt=--performance-schema-consumer-events-statements-current=ON \
  --opt=--performance-schema-consumer-events-statements-history=ON \
  --opt=--performance-schema-consumer-events-statements-history-long=ON
HTTP_PORT=$(( PORT + 1000 ))
"$GAPSCOPE" watch --dsn "$DSN" --iface lo --no-live --format json \
  --store "$WORK/soak.db" --store-max-size "$STORE_MAX" \
  --events "$WORK/events.jsonl" --events-max-size "$EVENTS_MAX" --events-keep "$EVENTS_KEEP" \
  --ring-max-mb "$RING_MAX_MB" --http "127.0.0.1:$HTTP_PORT" ${WATCH_ARGS:-} >"$WORK/watch.json" 2>"$WORK/watch.err" &
WATCH_PID=$!
for _ in $(seq 50); do grep -q . "$WORK/watch.err" 2>/dev/null && curl -fs "127.0.0.1:$HTTP_PORT/metrics" >/dev/null && break; sleep 0.2; done

# load: one connection per batch, BATCH statements of new digests each and
# the planted slow one; as many batches per second as RATE asks.
load() {
  local n=0 per_s=$(( (RATE + BATCH - 1) / BATCH ))
  while :; do
    local t0=$SECONDS
    for _ in $(seq "$per_s"); do
      awk -v n="$n" -v b="$BATCH" 'BEGIN { print "SELECT SLEEP(0.05) AS planted_slow;"
        for (i = 0; i < b; i++) printf "SELECT %d AS a%d;\n", i, (n * b + i) % 200000 }' |
        mariadb -h 127.0.0.1 -P "$PORT" -u root --skip-ssl -N >/dev/null &
      n=$(( n + 1 ))
    done
    wait
    (( SECONDS == t0 )) && sleep 0.5
  done
}
load & LOAD_PID=$!

echo "t_s rss_kb threads fds store_bytes events_bytes ring_kb" >"$WORK/samples.txt"
sample() {
  local rss thr fds st ev ring
  rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$WATCH_PID/status")
  # the capture ring: the packet socket's mapping (smaps names it
  # socket:[N]), or the header-only capture's BPF ring buffer (anon_inode:bpf-map)
  ring=$(awk '/^[0-9a-f]+-[0-9a-f]+ / {s = ($6 ~ /^socket:/ || $6 ~ /^anon_inode:bpf-map/)} s && /^Rss:/ {t += $2} END {print t + 0}' "/proc/$WATCH_PID/smaps")
  thr=$(awk '/^Threads:/ {print $2}' "/proc/$WATCH_PID/status")
  fds=$(find "/proc/$WATCH_PID/fd" -mindepth 1 -maxdepth 1 | wc -l)
  st=$(cat "$WORK"/soak.db* 2>/dev/null | wc -c)
  ev=$(cat "$WORK"/events*.jsonl 2>/dev/null | wc -c)
  curl -fs "127.0.0.1:$HTTP_PORT/metrics" >"$WORK/metrics.txt" || true
  echo "$1 $rss $thr $fds $st $ev $ring" >>"$WORK/samples.txt"
}
start=$SECONDS
while (( SECONDS - start < total_s )); do
  sleep 10
  kill -0 "$WATCH_PID" 2>/dev/null || die "watch died: $(tail -3 "$WORK/watch.err")"
  sample $(( SECONDS - start ))
done
kill "$LOAD_PID" 2>/dev/null; wait "$LOAD_PID" 2>/dev/null || true; LOAD_PID=
sleep 2
kill -INT "$WATCH_PID"; wait "$WATCH_PID" || die "watch failed: $(tail -3 "$WORK/watch.err")"
WATCH_PID=

python3 - "$WORK" "$warm_s" "$store_max" "$events_max" "$EVENTS_KEEP" "$RING_MAX_MB" <<'PY'
import json, re, sys
work, warm, store_max, events_max, keep, ring_max = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6])
rows = [list(map(int, l.split())) for l in open(f"{work}/samples.txt").read().splitlines()[1:]]
rows = [r + [r[1] - r[6]] for r in rows]  # [7]: RSS less the capture ring
fail = []
base = [r for r in rows if r[0] <= warm][-1] if any(r[0] <= warm for r in rows) else rows[0]
later = [r for r in rows if r[0] > warm]
print(f"{'RSS (all)':11s} at {base[0]}s {base[1]:>10}  peak after {max((r[1] for r in later), default=base[1]):>10}  (kB, the ring included)")
ring_peak = max(r[6] for r in rows)
verdict = "ok" if ring_peak <= ring_max * 1024 else "OVER"
if verdict != "ok": fail.append(f"the capture ring took {ring_peak} kB, limit {ring_max} MiB")
print(f"{'ring':11s} at {base[0]}s {base[6]:>10}  peak       {ring_peak:>10}  {verdict} (limit {ring_max * 1024} kB)")
for i, name in [(7, "RSS-ring"), (2, "threads"), (3, "open files")]:
    peak = max((r[i] for r in later), default=base[i])
    verdict = "ok" if peak <= base[i] * 1.1 + (1 if i > 1 else 0) else "GREW"
    if verdict != "ok": fail.append(f"{name} grew from {base[i]} to {peak}")
    print(f"{name:11s} at {base[0]}s {base[i]:>10}  peak after {peak:>10}  {verdict}")
st_peak, ev_peak = max(r[4] for r in rows), max(r[5] for r in rows)
ev_limit = events_max * (keep + 1)
for name, peak, limit in [("store", st_peak, store_max), ("events", ev_peak, ev_limit)]:
    verdict = "ok" if peak <= limit * 1.1 else "OVER"
    if verdict != "ok": fail.append(f"{name} took {peak} bytes, limit {limit}")
    print(f"{name:11s} peak {peak / 1e6:8.1f} MB  limit {limit / 1e6:8.1f} MB  {verdict}")
res = json.load(open(f"{work}/watch.json"))
prof = res.get("profile") or res.get("Profile")
digests = prof["digests"]
top = digests[0]["digest_text"]
print(f"statements {prof['statements']}, digest rows {len(digests)}, top: {top!r} ({digests[0]['total_us'] / 1e6:.1f} s)")
if "sleep" not in top.lower(): fail.append(f"the planted slow digest does not rank first in the profile: {top!r}")
tot = {}
for l in open(f"{work}/metrics.txt"):
    m = re.match(r'gapscope_statement_duration_seconds_sum\{([^}]*)\} (\S+)', l)
    if m:
        d = re.search(r'digest="([^"]*)"', m[1])[1]
        tot[d] = tot.get(d, 0) + float(m[2])
info = {re.search(r'digest="([^"]*)"', l)[1]: l for l in open(f"{work}/metrics.txt") if l.startswith("gapscope_digest_info")}
tot.pop("other", None)  # the digests without a series of their own, together
first = max(tot, key=tot.get) if tot else ""
print(f"/metrics: {len(tot)} digest series, most time: {first} {tot.get(first, 0):.1f} s")
if "sleep" not in info.get(first, "").lower(): fail.append(f"the planted slow digest does not rank first in /metrics: {first}")
print("soak: " + ("FAIL: " + "; ".join(fail) if fail else "PASS"))
sys.exit(1 if fail else 0)
PY
