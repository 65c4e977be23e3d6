#!/usr/bin/env bash
# Writes internal/sqltext/testdata/fingerprint/queries.expect: the
# fingerprint pt-query-digest computes for each statement of queries.sql
# (statements end with ";\n"), one per line, by loading pt-query-digest as a
# Perl library and calling its QueryRewriter with the options
# pt-query-digest uses by default. sqltext's TestFingerprintMatchesPt reads
# both files.
#
#   testdata/gen/ptfingerprint.sh        (needs pt-query-digest: percona-toolkit)
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=internal/sqltext/testdata/fingerprint
pt=$(command -v pt-query-digest)
perl -e '
  require $ARGV[0];
  my $qr = QueryRewriter->new(QueryParser => QueryParser->new, match_embedded_numbers => 0);
  open my $in, "<", $ARGV[1] or die "$ARGV[1]: $!";
  my @stmts = do { local $/ = ";\n"; map { chomp; $_ } <$in> };
  # fingerprint chomps with the default $/, as in pt-query-digest
  print $qr->fingerprint($_), "\n" for @stmts;
' "$pt" "$dir/queries.sql" >"$dir/queries.expect"
echo "wrote $dir/queries.expect ($(wc -l <"$dir/queries.expect") fingerprints, $(pt-query-digest --version))"
