#!/usr/bin/env bash
# Install the Debian packages gapscope uses (server for sandboxes, capture
# tools, peers for benchmarks), only those missing. Needs root or sudo.
set -euo pipefail
need=()
command -v mariadbd >/dev/null 2>&1 || [ -x /usr/sbin/mariadbd ] || need+=(mariadb-server)
command -v mariadb >/dev/null 2>&1 || need+=(mariadb-client)
command -v tcpdump >/dev/null 2>&1 || need+=(tcpdump)
# scripts/bpf-prog-cost.sh reads the kernel's per-program counters
command -v bpftool >/dev/null 2>&1 || [ -x /usr/sbin/bpftool ] || need+=(bpftool)
command -v sysbench >/dev/null 2>&1 || need+=(sysbench)
command -v tshark >/dev/null 2>&1 || need+=(tshark)
command -v pt-query-digest >/dev/null 2>&1 || need+=(percona-toolkit)
command -v chromium >/dev/null 2>&1 || need+=(chromium)
command -v prometheus >/dev/null 2>&1 || need+=(prometheus)
command -v openssl >/dev/null 2>&1 || need+=(openssl)
[ -x /usr/bin/time ] || need+=(time)
# lab field: real applications' clients (Debian's python3, not a venv's)
/usr/bin/python3 -c 'import pymysql' >/dev/null 2>&1 || need+=(python3-pymysql)
/usr/bin/python3 -c 'import MySQLdb' >/dev/null 2>&1 || need+=(python3-mysqldb)
perl -MDBD::mysql -e 1 >/dev/null 2>&1 || need+=(libdbd-mysql-perl)
# make deb's test: install the package, read its man page, verify its unit,
# complete with its bash script
command -v man >/dev/null 2>&1 || need+=(man-db)
command -v systemd-analyze >/dev/null 2>&1 || need+=(systemd)
command -v adduser >/dev/null 2>&1 || need+=(adduser)
[ -f /usr/share/bash-completion/bash_completion ] || need+=(bash-completion)
# the race detector (make race) needs cgo, hence a C compiler
command -v gcc >/dev/null 2>&1 || need+=(gcc libc6-dev)
command -v go >/dev/null 2>&1 || [ -x /usr/local/go/bin/go ] || need+=(golang-go)
# pipelined batches from real drivers (internal/watch TestPipelinedBatchJoined):
# MariaDB Connector/J run from source (a JDK), Node's mariadb package (npm)
[ -f /usr/share/java/mariadb-java-client.jar ] || need+=(libmariadb-java)
command -v javac >/dev/null 2>&1 || need+=(default-jdk-headless)
command -v node >/dev/null 2>&1 || need+=(nodejs)
command -v npm >/dev/null 2>&1 || need+=(npm)
sudo=""
[ "$(id -u)" -eq 0 ] || sudo="sudo"
if [ ${#need[@]} -gt 0 ]; then
	echo "installing: ${need[*]}"
	export DEBIAN_FRONTEND=noninteractive
	echo "wireshark-common wireshark-common/install-setuid boolean false" | $sudo debconf-set-selections || true
	$sudo apt-get update -qq
	$sudo apt-get install -y -qq --no-install-recommends "${need[@]}" >/dev/null
fi
if command -v npm >/dev/null 2>&1 && [ ! -f "$(npm root -g)/mariadb/package.json" ]; then
	echo "installing: npm mariadb@3 (global)"
	$sudo npm install -g --silent mariadb@3 >/dev/null
fi
