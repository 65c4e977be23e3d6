# Shared by the watch benchmark scripts (sourced): set BENCH (the script's
# name, for messages) and WORK (its temp dir) first.

die() { echo "$BENCH: $*" >&2; exit 1; }

# bench_binary sets GAPSCOPE: the binary given, or one built into WORK.
bench_binary() {
  command -v sysbench >/dev/null || die "sysbench not found (make deps installs it)"
  GAPSCOPE=${GAPSCOPE:-}
  if [ -z "$GAPSCOPE" ]; then
    go build -o "$WORK/gapscope" ./cmd/gapscope
    GAPSCOPE="$WORK/gapscope"
  fi
}

# bench_lab OPTION...: starts a sandbox in WORK/lab with the given `lab up`
# options and sets LAB, PORT, DSN and SERVER_PID.
bench_lab() {
  LAB="$WORK/lab"
  "$GAPSCOPE" lab up --dir "$LAB" "$@" >"$WORK/up.txt"
  PORT=$(sed -n 's/.*DSN: *root@tcp(127\.0\.0\.1:\([0-9]*\)).*/\1/p' "$WORK/up.txt")
  [ -n "$PORT" ] || die "could not read the sandbox port from: $(cat "$WORK/up.txt")"
  DSN="root@tcp(127.0.0.1:$PORT)/"
  SERVER_PID=$(cat "$LAB/mysqld.pid")
}

# bench_cleanup, the scripts' EXIT trap: stops a watch still running
# (WATCH_PID), the sandbox in WORK/lab, and removes WORK.
bench_cleanup() {
  [ -n "${WATCH_PID:-}" ] && kill -INT "$WATCH_PID" 2>/dev/null || true
  "$GAPSCOPE" lab down --dir "$WORK/lab" >/dev/null 2>&1 || true
  rm -rf "$WORK"
}

# ticks PID: user + system clock ticks (10 ms) the process has used.
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }

# sb_result FILE: "TPS TRANSACTIONS" of a sysbench run's output.
sb_result() {
  sed -n 's/.*transactions: *\([0-9]*\) *(\([0-9.]*\) per sec.*/\2 \1/p' "$1"
}

# bench_oltp_lab: a sandbox (bench_lab) with performance_schema's statement
# consumers on, history_long at its default 1,000 rows, and the sbtest
# tables prepared for sysbench oltp_read_write on THREADS connections; sets
# SB, that sysbench command line without its verb (prepare/run).
# With PS=off, performance_schema is off (MariaDB's default): watch sees
# the wire alone.
bench_oltp_lab() {
  if [ "${PS:-on}" = off ]; then
    bench_lab --opt=--performance-schema=OFF --opt=--innodb-flush-log-at-trx-commit=2
  else
    bench_lab --opt=--performance-schema=ON --opt=--innodb-flush-log-at-trx-commit=2 \
      --opt=--performance-schema-consumer-events-statements-current=ON \
      --opt=--performance-schema-consumer-events-statements-history=ON \
      --opt=--performance-schema-consumer-events-statements-history-long=ON
  fi
  SB=(sysbench oltp_read_write --db-driver=mysql --mysql-host=127.0.0.1 --mysql-port="$PORT" --mysql-user=root
      --mysql-db=sbtest --tables=4 --table-size=20000 --threads="$THREADS")
  mariadb -h 127.0.0.1 -P "$PORT" -u root -e "CREATE DATABASE sbtest"
  "${SB[@]}" prepare >/dev/null
}
