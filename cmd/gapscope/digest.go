package main

import (
	"context"
	"io"
	"slices"
	"time"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
	"github.com/gapscope/gapscope/internal/offline"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() { register(newDigestCmd) }

type digestFlags struct {
	format       string
	events       string
	keepLiterals bool
	top          int
	tz           string
	maxLine      int
	class        classFlags
}

func newDigestCmd() *cobra.Command {
	var f digestFlags
	cmd := &cobra.Command{
		Use:   "digest SLOWLOG...",
		Short: "Profile a MySQL/MariaDB slow query log (plain, gzip, or - for stdin)",
		Long: `digest parses slow query logs and prints a profile per statement digest, ranked
by total server time (Query_time), with Lock_time, rows sent and rows examined.
It reads MySQL 5.1-8.x (log_slow_extra too), Percona Server's extended format
and MariaDB 10.x; gzip files are recognised by their content, "-" is stdin.
Several files are read in order as one log (rotated files). Literals are
redacted unless --keep-literals.

Malformed input is counted, never guessed: an event needs its Query_time and
its statement text; header lines without a statement, statement text without
a header (the tail of a rotated file) and events with an unreadable
Query_time are dropped and reported in the notes. Lines longer than
--max-line are cut there. Ctrl-C prints what was read so far.

The text report is a profile table (rank, query ID, response time and share,
calls, time per call, variance-to-mean, the class's text cut to the line
width) and then, per class, its attributes (time: total, min, max, avg, 95%,
99%, stddev, median; lock time, rows sent/examined/affected, bytes sent),
databases, users and hosts, the calls that waited for a row lock and how long
(Percona's InnoDB_rec_lock_wait), the slow log's plan and engine fields when it
has them (Percona's InnoDB_*, MariaDB's log_slow_verbosity=engine Pages_* and
Engine_time), the query-time histogram and its slowest call. Percentiles are exact while a
class has up to 128 calls, within 1% beyond. --format json holds the same,
with full texts. --group-by fingerprint groups as pt-query-digest does
(sbtest1..4 are one class) with its Query IDs, so reports cross-reference.

` + report.FilterHelp,
		Example: `  gapscope digest /var/log/mysql/mysql-slow.log
  gapscope digest --top 10 slow.log.1.gz slow.log
  zcat slow.log.gz | gapscope digest --format json -
  gapscope digest --events statements.jsonl slow.log
  gapscope digest --group-by fingerprint --since 1h --limit 95%:10 slow.log
  gapscope digest --order-by rows_examined:max --filter "db = shop and query_time > 100ms" slow.log`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := f.readOptions()
			if err != nil {
				return err
			}
			co, err := f.class.options(report.ServerLatency, opts.Parse.Location)
			if err != nil {
				return err
			}
			if co.Relative() && slices.Contains(args, "-") {
				return usagef("--since/--until as a duration count back from the log's end, which stdin cannot be read twice to find: give an absolute time")
			}
			return runDigest(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), args, opts, f, co)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "text", "output: text or json")
	fl.StringVar(&f.events, "events", "", "also write one JSON statement event per line to this file")
	fl.BoolVar(&f.keepLiterals, "keep-literals", false, "keep SQL literals in events (default: redacted)")
	fl.IntVar(&f.top, "top", 20, "digests to show in text output (0: all)")
	fl.StringVar(&f.tz, "tz", "Local", `time zone of "# Time:" lines written without one (MySQL 5.x, MariaDB YYMMDD)`)
	fl.IntVar(&f.maxLine, "max-line", slowlog.DefaultMaxLineBytes, "longest line (and statement) kept, bytes; longer ones are cut")
	f.class.register(cmd, true)
	return cmd
}

func (f *digestFlags) readOptions() (slowlog.ReadOptions, error) {
	var opts slowlog.ReadOptions
	if f.format != "text" && f.format != "json" {
		return opts, usagef("--format must be text or json, not %q", f.format)
	}
	if f.top < 0 {
		return opts, usagef("--top must be 0 or more, not %d", f.top)
	}
	if f.maxLine < 1024 {
		return opts, usagef("--max-line must be at least 1024 bytes, not %d", f.maxLine)
	}
	loc, err := time.LoadLocation(f.tz)
	if err != nil {
		return opts, usagef("--tz %q: %v", f.tz, err)
	}
	opts.Parse = slowlog.Options{MaxLineBytes: f.maxLine, Location: loc}
	opts.Convert = slowlog.ConvertOptions{KeepLiterals: f.keepLiterals}
	return opts, nil
}

func runDigest(ctx context.Context, out, errOut io.Writer, files []string, opts slowlog.ReadOptions, f digestFlags, co report.ClassOptions) error {
	res, wrong, eventsErr, err := offline.Digest(ctx, errOut, files, offline.DigestOptions{Read: opts, Events: f.events, Class: co})
	if err != nil {
		return err
	}
	err = res.Write(out, co, f.format == "json", f.top)
	if err == nil && len(wrong) > 0 {
		return wrong // the others' profile is printed, the mistake still fails the run
	}
	if err != nil {
		return err
	}
	return resultCompleteBut(eventsErr)
}
