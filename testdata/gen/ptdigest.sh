#!/usr/bin/env bash
# Fixtures for the comparison with pt-query-digest (cmd/gapscope's
# TestDigestMatchesPtQueryDigest):
#   - a real MariaDB slow log: a private sandbox with long_query_time=0 and
#     log_slow_verbosity=query_plan,innodb,explain under a small sysbench
#     oltp_read_write run plus statements that exercise the parser
#     (testdata/gen/slowlog), stored gzipped with its awk-counted .expect;
#   - pt-query-digest's JSON report (--output json, every class) of it and
#     of the Percona Server log testdata/slowlogs/percona-5.7.log (Percona's
#     extended format: InnoDB_IO_r_ops, Full_scan, Tmp_tables, ...).
#
#   testdata/gen/ptdigest.sh     (needs mariadbd, sysbench, pt-query-digest)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=testdata/slowlogs
log=$dir/mariadb-10.11-ptdigest.log
command -v pt-query-digest >/dev/null || { echo "needs pt-query-digest (scripts/install-deps.sh)" >&2; exit 1; }

# The restart banner is left out (-restart=false): pt-query-digest reads it
# as part of the statement before it, gapscope as the marker it is.
go run ./testdata/gen/slowlog -out "$log" -events 40 -threads 2 \
  -verbosity query_plan,innodb,explain -restart=false

pt_json() { # LOG OUT: every class (pt's default --limit is 95%:20)
  TZ=UTC pt-query-digest --output json --limit 100%:100000 --no-version-check "$1" |
    sed "s#\"name\" *: *\"[^\"]*/#\"name\":\"#" >"$2"
}
pt_json "$log" "$dir/mariadb-10.11-ptdigest.pt.json"
pt_json "$dir/percona-5.7.log" "$dir/percona-5.7.pt.json"
gzip -9nf "$log"
mv "$log.expect" "$log.gz.expect"
ls -l "$log.gz" "$dir"/*.pt.json
echo "pt-query-digest: $(pt-query-digest --version)"
