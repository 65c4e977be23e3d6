#!/usr/bin/env bash
# make demo: gapscope's main job on private MariaDB sandboxes. Two field
# reports reproduced and diagnosed: thread-pool queueing the server never
# times (the thread-pool case) and a slow client inflating server time (the
# slow-client case); see docs/field-reports.md.
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "$(id -u)" -ne 0 ]; then
  echo "make demo captures on the loopback interface: run it as root (or give bin/gapscope CAP_NET_RAW:" >&2
  echo "  sudo setcap cap_net_raw+ep bin/gapscope)" >&2
  exit 1
fi
echo "== gapscope lab threadpool: a SELECT 1 that waits seconds in the thread pool's queue =="
bin/gapscope lab threadpool
echo
echo "== gapscope lab slowclient: a client that sleeps before reading its 10 MB result =="
bin/gapscope lab slowclient
