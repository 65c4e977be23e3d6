package offline

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// DigestOptions say what Digest reads and how it selects.
type DigestOptions struct {
	Read   slowlog.ReadOptions
	Events string // also write every selected statement to this events file ("": none)
	Class  report.ClassOptions
}

// Digest reads the slow logs in order as one log into a profile of the
// statements Class selects; progress and notes go to errOut. A Ctrl-C
// ends reading without an error: the result covers what was read. Files
// that held no slow-log event and are something else are wrong (and err
// when no file held an event); a failed events file does not cost the
// result: its error is eventsErr.
func Digest(ctx context.Context, errOut io.Writer, files []string, o DigestOptions) (res *DigestResult, wrong WrongInputs, eventsErr, err error) {
	var endUS int64
	opts := o.Read
	if o.Class.Relative() {
		if endUS, err = slowLogEnd(ctx, files, opts); err != nil {
			return nil, nil, nil, err
		}
	}
	// Grouped by fingerprint, a statement's digest text is needed only for
	// the events file, a filter and the classes' samples: the sink makes it
	// for those, not for every statement.
	lazy := o.Class.Fingerprint && o.Events == "" && o.Class.Filter == nil
	sink, err := newDigestSink(o.Events, &o.Class, endUS, lazyText(lazy, opts.Convert))
	if err != nil {
		return nil, nil, nil, err
	}
	opts.Convert.LazyText = lazy
	var inputs slowLogInputs
	stats, interrupted, err := readSlowLogs(ctx, errOut, files, opts, sink.add, inputs.add)
	if err != nil {
		sink.Close()
		return nil, nil, nil, err
	}
	eventsErr = sink.Close() // reported after the result, which it does not cost
	wrong = inputs.check(errOut)
	if len(wrong) > 0 && stats.Events == 0 {
		return nil, wrong, eventsErr, wrong
	}
	for _, n := range append(digestNotes(stats, interrupted), sink.sel.Notes()...) {
		sink.Profile.AddNote(n)
	}
	return sink.result(stats), wrong, eventsErr, nil
}

// Write ranks the result as co says and prints it: JSON, or the class
// report (the top classes) and the slow log's counts.
func (r *DigestResult) Write(w io.Writer, co report.ClassOptions, json bool, top int) error {
	co.Rank(r.ProfileResult, !json, top)
	if json {
		return report.WriteJSON(w, r)
	}
	if err := co.WriteClassText(w, r.ProfileResult); err != nil {
		return err
	}
	st := r.SlowLog
	_, err := fmt.Fprintf(w, "\nslow log: %d events in %d lines (%d bytes), %d dropped, %d administrator commands\n",
		st.Events, st.Lines, st.Bytes, st.Dropped(), st.AdminCommands)
	return err
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
func newDigestSink(eventsPath string, co *report.ClassOptions, endUS int64, text *slowlog.Converter) (*digestSink, error) {
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

// DigestResult is the profile's JSON object plus the parser's counts.
type DigestResult struct {
	*report.ProfileResult
	SlowLog slowlog.FileStats `json:"slowlog"`
}

func (s *digestSink) result(st slowlog.FileStats) *DigestResult {
	return &DigestResult{ProfileResult: s.Profile.Result(), SlowLog: st}
}

// slowExtra turns what a slow-log event says beyond event.Statement into a
// report.Extra, reusing one Extra and one Plan: the profile keeps nothing
// of them but values and interned strings.
type slowExtra struct {
	fingerprint bool
	x           report.Extra
	plan        report.Plan
	hosts       slowlog.Interner
	fper        sqltext.Fingerprinter // caches classes by the text's shape
	// text fills the current statement's text when the reader left it
	// out; fill is its FillText, bound once.
	text *slowlog.Converter
	fill func()
	st   *event.Statement
	ev   *slowlog.Event
}

func newSlowExtra(fingerprint bool) slowExtra {
	return slowExtra{fingerprint: fingerprint}
}

func (e *slowExtra) of(st *event.Statement, ev *slowlog.Event) *report.Extra {
	e.x = report.Extra{Host: e.host(ev), RowsAffected: ev.RowsAffected, FillText: e.fill}
	e.st, e.ev = st, ev
	if ev.HasPlan {
		e.plan = planOf(ev)
		e.x.Plan = &e.plan
	}
	if e.fingerprint {
		e.x.ClassID, e.x.ClassText = e.class(ev)
	}
	return &e.x
}

// fillText fills the current statement's SQL, digest text and digest.
func (e *slowExtra) fillText() {
	if e.st.DigestText == "" && e.st.SQL == "" {
		e.text.Text(e.ev, e.st)
	}
}

// host is the client's host name, or its IP when the log has no name
// (pt-query-digest does the same), interned.
func (e *slowExtra) host(ev *slowlog.Event) string {
	if len(ev.Host) == 0 {
		return e.hosts.String(ev.IP)
	}
	return e.hosts.String(ev.Host)
}

// class is the event's pt-query-digest class: its Query ID and
// fingerprint ("administrator command: Quit" for those events, as
// pt-query-digest reads them).
func (e *slowExtra) class(ev *slowlog.Event) (id, text string) {
	if ev.Admin {
		fp := "administrator command: " + string(ev.AdminCommand)
		return sqltext.QueryID(fp), fp
	}
	c := e.fper.Class(ev.Query)
	return c.ID, c.Fingerprint
}

func planOf(ev *slowlog.Event) report.Plan {
	return report.Plan{
		Statements: 1, FullScan: yes(ev.FullScan), FullJoin: yes(ev.FullJoin), TmpTable: yes(ev.TmpTable),
		TmpTableOnDisk: yes(ev.TmpTableOnDisk), Filesort: yes(ev.Filesort), FilesortOnDisk: yes(ev.FilesortOnDisk),
		QCHit: yes(ev.QCHit), TmpTables: ev.TmpTables, TmpDiskTables: ev.TmpDiskTables, MergePasses: ev.MergePasses,
		InnoDBIOReadOps: ev.InnoDBIOReadOps, InnoDBIOReadBytes: ev.InnoDBIOReadBytes, InnoDBIOReadWaitUS: ev.InnoDBIOReadWaitUS,
		InnoDBRecLockWaitUS: ev.InnoDBRecLockWaitUS, InnoDBQueueWaitUS: ev.InnoDBQueueWaitUS,
		InnoDBPagesDistinct: ev.InnoDBPagesDistinct, PagesAccessed: ev.PagesAccessed, PagesRead: ev.PagesRead,
		PagesPrefetched: ev.PagesPrefetched,
		PagesUpdated:    ev.PagesUpdated, OldRowsRead: ev.OldRowsRead, PagesReadTimeUS: ev.PagesReadTimeUS,
		EngineTimeUS: ev.EngineTimeUS, Known: ev.EngineFields,
	}
}

func yes(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// slowLogEnd reads the logs once to find their last statement's start,
// which relative --since/--until count back from.
func slowLogEnd(ctx context.Context, files []string, opts slowlog.ReadOptions) (int64, error) {
	var end int64
	for _, path := range files {
		_, err := slowlog.ReadFile(ctx, path, opts, func(s *event.Statement, _ *slowlog.Event) {
			end = max(end, s.TReqFirst)
		})
		if err != nil && !errors.Is(err, context.Canceled) {
			return 0, err
		}
	}
	return end, nil
}

// slowLogInputs remembers each file digest read to the end, to tell a slow
// log with nothing in it from a file that is no slow log at all.
type slowLogInputs struct {
	paths []string
	stats []slowlog.FileStats
}

func (in *slowLogInputs) add(path string, st slowlog.FileStats) {
	in.paths = append(in.paths, path)
	in.stats = append(in.stats, st)
}

// WrongInputs is the error of files that are not slow logs (exit 1).
type WrongInputs []string

func (w WrongInputs) Error() string { return strings.Join(w, "; ") }

// check says on stderr which slow logs held no event and returns the files
// without a single slow-log event that are something else (a capture, a
// database, text...), each with what it looks like and the command that
// reads it.
func (in *slowLogInputs) check(errOut io.Writer) WrongInputs {
	var wrong WrongInputs
	for i, path := range in.paths {
		st := in.stats[i]
		if st.Events > 0 {
			continue
		}
		name, k := path, InputKind{}
		if path == "-" {
			name, k = "standard input", stdinKind(st)
		} else if sniffed, err := SniffInput(path); err == nil {
			k = sniffed
		}
		switch {
		case k.Format == "slowlog":
			fmt.Fprintf(errOut, "gapscope: note: %s is a slow log with no complete event in its %s\n", name, plural(st.Lines, "line"))
		case st.Bytes == 0:
			fmt.Fprintf(errOut, "gapscope: note: %s is empty: no slow query logged\n", name)
		default:
			wrong = append(wrong, fmt.Sprintf("%s holds no slow-log event: it is %s, not a MySQL/MariaDB slow query log%s", name, k.What, k.Advice()))
		}
	}
	return wrong
}

// stdinKind describes standard input, which cannot be read twice, from the
// start of its text as the reader kept it (a file's start is sniffed the
// same way), else from the parser's counts: header lines it could not use
// are a slow log's; statement text alone (what binary data parses as) is not.
func stdinKind(st slowlog.FileStats) InputKind {
	if k := Classify(st.Head); !strings.HasPrefix(k.What, "text") {
		return k
	}
	if st.HeaderOnly > 0 || st.Malformed > 0 || st.AdminCommands > 0 {
		return InputKind{What: "a slow query log", Format: "slowlog"}
	}
	return InputKind{What: fmt.Sprintf("%s (%d bytes) of something else", plural(st.Lines, "line"), st.Bytes)}
}
