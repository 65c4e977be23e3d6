#!/usr/bin/env bash
# Run every Fuzz* target in the module for the given time (default 5s).
# Crashers land in the package's testdata/fuzz/ and must be committed.
set -euo pipefail
t=${1:-5s}
cd "$(dirname "$0")/.."
for f in $(grep -rl --include='*_test.go' '^func Fuzz' internal cmd 2>/dev/null); do
  pkg=./$(dirname "$f")
  for target in $(grep -o '^func Fuzz[A-Za-z0-9_]*' "$f" | sed 's/^func //'); do
    echo "fuzz $pkg $target ($t)"
    go test -run '^$' -fuzz "^${target}\$" -fuzztime "$t" "$pkg" >/tmp/gapscope-fuzz.log 2>&1 || { cat /tmp/gapscope-fuzz.log; exit 1; }
  done
done
