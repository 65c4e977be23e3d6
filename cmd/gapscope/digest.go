package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
	"github.com/gapscope/gapscope/internal/event"
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
databases, users and hosts, the slow log's plan fields when it has them, the
query-time histogram and its slowest call. Percentiles are exact while a
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
	var endUS int64
	if co.Relative() {
		end, err := slowLogEnd(ctx, files, opts)
		if err != nil {
			return err
		}
		endUS = end
	}
	// Grouped by fingerprint, a statement's digest text is needed only for
	// the events file, a filter and the classes' samples: the sink makes it
	// for those, not for every statement.
	lazy := co.Fingerprint && f.events == "" && co.Filter == nil
	sink, err := newDigestSink(f.events, co, endUS, lazyText(lazy, opts.Convert))
	if err != nil {
		return err
	}
	opts.Convert.LazyText = lazy
	var inputs slowLogInputs
	stats, interrupted, err := readSlowLogs(ctx, errOut, files, opts, sink.add, inputs.add)
	if err != nil {
		sink.Close()
		return err
	}
	eventsErr := sink.Close() // reported after the result, which it does not cost
	wrong := inputs.check(errOut)
	if len(wrong) > 0 && stats.Events == 0 {
		return wrong
	}
	for _, n := range append(digestNotes(stats, interrupted), sink.sel.Notes()...) {
		sink.Profile.AddNote(n)
	}
	res := sink.result(stats)
	co.Rank(res.ProfileResult, f.format != "json", f.top)
	if f.format == "json" {
		err = report.WriteJSON(out, res)
	} else {
		err = writeDigestText(out, res, co)
	}
	if err == nil && len(wrong) > 0 {
		return wrong // the others' profile is printed, the mistake still fails the run
	}
	if err != nil {
		return err
	}
	return resultCompleteBut(eventsErr)
}

// readSlowLogs reads the files in order, with one progress line over all of
// them. A Ctrl-C ends reading without an error: what was read is reported.
func readSlowLogs(ctx context.Context, errOut io.Writer, files []string, opts slowlog.ReadOptions,
	emit slowlog.EmitFunc, onFile func(string, slowlog.FileStats)) (slowlog.FileStats, bool, error) {
	sizes, total := fileSizes(files)
	prog := report.NewProgress(errOut, total, "reading")
	defer prog.Done()
	var stats slowlog.FileStats
	var before int64
	for i, path := range files {
		opts.Progress = func(done, _ int64) { prog.Set(before + done) }
		st, err := slowlog.ReadFile(ctx, path, opts, emit)
		stats.Add(st)
		before += sizes[i]
		if err == nil {
			onFile(path, st)
		}
		switch {
		case errors.Is(err, context.Canceled):
			return stats, true, nil
		case err != nil:
			return stats, false, err // it names the file
		}
	}
	return stats, false, nil
}

// fileSizes are the on-disk sizes, for progress (0 for stdin and pipes).
func fileSizes(files []string) ([]int64, int64) {
	sizes := make([]int64, len(files))
	var total int64
	for i, f := range files {
		if st, err := os.Stat(f); err == nil && f != "-" && st.Mode().IsRegular() {
			sizes[i] = st.Size()
			total += st.Size()
		}
	}
	return sizes, total
}

// digestNotes says what the parser dropped or noticed, so that counts are
// never silently short.
func digestNotes(st slowlog.FileStats, interrupted bool) []string {
	var notes []string
	if interrupted {
		notes = append(notes, "interrupted: results cover the events read so far")
	}
	if d := st.Dropped(); d > 0 {
		notes = append(notes, fmt.Sprintf("%d slow-log events dropped: %d header without statement, %d statement text without header, %d unreadable Query_time",
			d, st.HeaderOnly, st.Orphans, st.Malformed))
	}
	if st.BadValues > 0 {
		notes = append(notes, fmt.Sprintf("%d header values unreadable and ignored", st.BadValues))
	}
	if st.TruncatedLines > 0 {
		notes = append(notes, fmt.Sprintf("%d statements longer than --max-line, cut", st.TruncatedLines))
	}
	if st.Own > 0 {
		notes = append(notes, fmt.Sprintf("%d of gapscope's own statements left out", st.Own))
	}
	if st.Restarts > 0 {
		notes = append(notes, fmt.Sprintf("the server reopened the log %d times (restart or FLUSH SLOW LOGS)", st.Restarts))
	}
	if st.Events == 0 && st.Lines > 0 {
		notes = append(notes, fmt.Sprintf("no slow-log event in %d lines: is this a MySQL/MariaDB slow query log?", st.Lines))
	}
	return notes
}

// digestSink is a statement sink fed by the slow-log reader: it selects
// statements (--filter, --since/--until), classes them and passes on what
// the slow log says beyond event.Statement.
type digestSink struct {
	*report.StatementSink
	sel   *report.Selector
	extra slowExtra
}

// newDigestSink returns a sink; text, when not nil, fills the text of the
// statements the reader leaves without (slowlog.ConvertOptions.LazyText).
func newDigestSink(eventsPath string, co report.ClassOptions, endUS int64, text *slowlog.Converter) (*digestSink, error) {
	s, err := report.NewStatementSink(eventsPath, report.ServerLatency)
	if err != nil {
		return nil, err
	}
	d := &digestSink{StatementSink: s, sel: co.Selector(endUS), extra: newSlowExtra(co.Fingerprint)}
	if text != nil {
		d.extra.text = text
		d.extra.fill = d.extra.fillText // bound once: no allocation per statement
	}
	return d, nil
}

// lazyText is the converter that fills statements' text when lazy.
func lazyText(lazy bool, opts slowlog.ConvertOptions) *slowlog.Converter {
	if !lazy {
		return nil
	}
	return slowlog.NewConverter(opts)
}

func (s *digestSink) add(st *event.Statement, ev *slowlog.Event) {
	x := s.extra.of(st, ev)
	if !s.sel.Keep(st, x) {
		return
	}
	s.Profile.AddExtra(st, x)
	s.Events.Write(st)
}

// digestResult is the profile's JSON object plus the parser's counts.
type digestResult struct {
	*report.ProfileResult
	SlowLog slowlog.FileStats `json:"slowlog"`
}

func (s *digestSink) result(st slowlog.FileStats) *digestResult {
	return &digestResult{ProfileResult: s.Profile.Result(), SlowLog: st}
}

func writeDigestText(w io.Writer, r *digestResult, co report.ClassOptions) error {
	if err := co.WriteClassText(w, r.ProfileResult); err != nil {
		return err
	}
	st := r.SlowLog
	_, err := fmt.Fprintf(w, "\nslow log: %d events in %d lines (%d bytes), %d dropped, %d administrator commands\n",
		st.Events, st.Lines, st.Bytes, st.Dropped(), st.AdminCommands)
	return err
}
