package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/overhead"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/store"
	"github.com/spf13/cobra"
)

func init() { register(newReportCmd) }

type reportFlags struct {
	storePath, out, title string
	events                []string
	run                   int64
}

func newReportCmd() *cobra.Command {
	var f reportFlags
	cmd := &cobra.Command{
		Use:   "report --store FILE.db | --events FILE.jsonl [-o report.html]",
		Short: "Write a self-contained HTML report (SVG charts, no network) from a store",
		Long: `report reads what probe, watch, overhead and plans recorded in a store and
writes one HTML file that needs nothing else: inline CSS and SVG, no script,
nothing fetched. Sections appear when their data is there:
  findings            each with its evidence and fix
  canary              latency max/avg/median (log axis) beside Threads_connected
                      and Threads_running, the concurrency knee, latency against
                      Threads_running
  where the time went the five parts per digest (top 10), queue wait per
                      thread-pool group over time
  overhead            throughput ratio per instrumentation setting, with intervals
  plan history        plans caught per digest, changes marked`,
		Example: `  gapscope probe --dsn 'monitor@tcp(db1:3306)/' --store probe.db
  gapscope report --store probe.db -o probe.html
  gapscope report --store watch.db --run 3 -o - > run3.html`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if f.storePath == "" && len(f.events) == 0 {
				return usagef("report needs --store FILE.db or --events FILE.jsonl")
			}
			if f.out == "" {
				return usagef("-o must name a file, or - for standard output")
			}
			if f.run < 0 {
				return usagef("--run must be a run id (see the runs in the report), not %d", f.run)
			}
			return runReport(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.storePath, "store", "", "store written by probe, watch, overhead or plans (--store of those commands)")
	fl.StringVarP(&f.out, "output", "o", "report.html", "HTML file to write, - for standard output")
	fl.StringSliceVar(&f.events, "events", nil, "statement events (JSON lines of watch/analyze --events) to chart, repeatable")
	fl.Int64Var(&f.run, "run", 0, "only this run (default: every run in the store)")
	fl.StringVar(&f.title, "title", "", "page title (default: gapscope report: FILE)")
	return cmd
}

func runReport(ctx context.Context, stdout, errOut io.Writer, f reportFlags) error {
	data := &report.HTMLData{Title: f.title, Generated: time.Now()}
	if f.storePath != "" {
		if err := loadStore(ctx, data, f); err != nil {
			return err
		}
	}
	if len(f.events) > 0 {
		if err := loadEvents(data, f.events, errOut); err != nil {
			return err
		}
	}
	if data.Title == "" {
		data.Title = "gapscope report: " + filepath.Base(data.Source)
	}
	if f.out == "-" {
		return report.WriteHTML(stdout, data)
	}
	return writeFileAtomic(f.out, func(w io.Writer) error { return report.WriteHTML(w, data) })
}

func loadStore(ctx context.Context, data *report.HTMLData, f reportFlags) error {
	// store.Open creates missing files: a mistyped path must not become an
	// empty report.
	if _, err := os.Stat(f.storePath); err != nil {
		return fmt.Errorf("reading store: %w", err)
	}
	st, err := store.Open(ctx, f.storePath)
	if err != nil {
		return err
	}
	defer st.Close()
	return loadHTMLData(ctx, st, f, data)
}

// loadEvents adds the statements of JSON-lines event files to the
// statement charts.
func loadEvents(data *report.HTMLData, paths []string, errOut io.Writer) error {
	if data.Statements == nil {
		data.Statements = report.NewStatementSummary()
	}
	for _, p := range paths {
		note, err := readEventFile(p, data.Statements)
		if err != nil {
			return err
		}
		if note != "" {
			fmt.Fprintln(errOut, "note:", note)
			data.Notes = append(data.Notes, note)
		}
	}
	data.Source = strings.TrimPrefix(data.Source+", "+filepath.Base(paths[0]), ", ")
	if len(paths) > 1 {
		data.Source += fmt.Sprintf(" and %d more", len(paths)-1)
	}
	return nil
}

// readEventFile adds the statements of one events file to sum and returns
// a note when its last line was torn ("" when not).
func readEventFile(path string, sum *report.StatementSummary) (string, error) {
	fh, err := os.Open(path)
	if err != nil {
		return "", fmt.Errorf("reading events: %w", err)
	}
	defer fh.Close()
	read, err := report.ReadEvents(fh, sum.Add)
	var bad *report.LineError
	if errors.As(err, &bad) {
		return "", fmt.Errorf("reading events %s:%d: %w", path, bad.Line, bad.Err)
	}
	if err != nil {
		return "", fmt.Errorf("reading events %s: %w", path, err)
	}
	if read.Statements == 0 {
		// Empty, or one unterminated line of something else (read as a
		// torn tail): a report from it would chart nothing and say nothing.
		return "", fmt.Errorf("%s holds no statement event (%d bytes unreadable): report reads the JSON lines written by watch, analyze or digest --events", path, read.TornBytes)
	}
	return read.TornNote(path), nil
}

// loadHTMLData reads every section's data for the run selected (all runs
// when f.run is 0).
func loadHTMLData(ctx context.Context, st *store.Store, f reportFlags, d *report.HTMLData) error {
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	if f.run != 0 {
		i := slices.IndexFunc(runs, func(r store.Run) bool { return r.ID == f.run })
		if i < 0 {
			return fmt.Errorf("run %d is not in %s (%d runs)", f.run, f.storePath, len(runs))
		}
		runs = runs[i : i+1]
	}
	d.Source, d.Runs = f.storePath, runInfos(runs)
	h, err := st.Holdings(ctx)
	if err != nil {
		return err
	}
	d.Notes = append(d.Notes, holdingsNotes(h)...)
	q := store.Query{RunID: f.run}
	if d.Findings, err = st.Findings(ctx, q); err != nil {
		return err
	}
	probe, err := st.ProbeResults(ctx, q)
	if err != nil {
		return err
	}
	d.Probe = probePoints(probe)
	plans, err := st.Plans(ctx, q)
	if err != nil {
		return err
	}
	d.Plans = planEntries(plans)
	if d.Statements, err = summarizeStoredStatements(ctx, st, q); err != nil {
		return err
	}
	d.Overhead, err = storedOverhead(ctx, st, f.run)
	return err
}

// storedOverhead rebuilds the overhead table of run (0: the latest
// overhead run) from its stored rounds.
func storedOverhead(ctx context.Context, st *store.Store, run int64) ([]report.OverheadRow, error) {
	rounds, err := st.OverheadRows(ctx, run)
	if err != nil || len(rounds) == 0 {
		return nil, err
	}
	table := overheadTableFromStore(rounds, overhead.DefaultResolution)
	out := make([]report.OverheadRow, len(table))
	for i, r := range table {
		out[i] = report.OverheadRow{Config: r.Config, Rounds: r.Rounds, Pairs: r.Pairs, MedianTPS: r.TPS, MinTPS: r.TPSMin,
			MaxTPS: r.TPSMax, Ratio: r.Ratio, RatioLow: r.RatioLow, RatioHigh: r.RatioHigh,
			AvgLatencyUS: r.LatAvgMS * 1000, P95LatencyUS: r.LatP95MS * 1000, Verdict: r.AboveNoise}
	}
	return out, nil
}

func runInfos(runs []store.Run) []report.RunInfo {
	out := make([]report.RunInfo, len(runs))
	for i, r := range runs {
		out[i] = report.RunInfo{ID: r.ID, StartUS: r.StartUS, EndUS: r.EndUS, Command: r.Command, DSN: r.DSN, Notes: r.Notes}
	}
	return out
}

func probePoints(rs []store.ProbeResult) []report.ProbePoint {
	out := make([]report.ProbePoint, len(rs))
	for i, p := range rs {
		out[i] = report.ProbePoint{TimeUS: p.TimeUS, Name: p.Name, Calls: p.Calls, Errors: p.Errors,
			MinUS: p.MinUS, AvgUS: p.AvgUS, MedianUS: p.MedianUS, MaxUS: p.MaxUS,
			ThreadsConnected: p.ThreadsConnected, ThreadsRunning: p.ThreadsRunning}
	}
	return out
}

func planEntries(ps []store.Plan) []report.PlanEntry {
	out := make([]report.PlanEntry, len(ps))
	for i, p := range ps {
		out[i] = report.PlanEntry{TimeUS: p.TimeUS, ConnID: p.ConnID, Digest: p.Digest, DigestText: p.DigestText,
			Source: p.Source, Plan: p.Plan, ExecUS: p.ExecUS, RowsExamined: p.RowsExamined}
	}
	return out
}

// holdingsNotes say from when a bounded store holds what: a watch --store
// keeps per-minute digest totals for its whole retention, statement rows
// for a sample and for as long as its size allows.
func holdingsNotes(h store.Holdings) []string {
	var out []string
	if h.Calls > h.Kept {
		out = append(out, fmt.Sprintf("the store kept a row for %d of the %d statements its per-minute digest totals count (--store-sample: every slow, failed, outlier and unjoined one, a sample of the rest); the statement charts are drawn from those rows",
			h.Kept, h.Calls))
	}
	if h.Trims == 0 {
		return out
	}
	stamp := func(us int64) string { return time.UnixMicro(us).UTC().Format("2006-01-02 15:04:05 UTC") }
	held := "no statement rows"
	if h.StatementsFromUS > 0 {
		held = "statement rows from " + stamp(h.StatementsFromUS)
	}
	if h.MinutesFromUS > 0 {
		held += ", per-minute digest totals from " + stamp(h.MinutesFromUS)
	}
	why := map[string]string{"age": "--store-retain", "size": "--store-max-size"}[h.LastReason]
	out = append(out, fmt.Sprintf("the store was trimmed to its limits %d times (%d rows removed, the last at %s by %s): it holds %s",
		h.Trims, h.RemovedRows, stamp(h.LastTrimUS), cmp.Or(why, h.LastReason), held))
	return out
}

// statementPage is how many statements one read holds in memory.
const statementPage = 5000

// summarizeStoredStatements streams the statements q selects through a
// report.StatementSummary one page at a time, so a store of millions of
// statements costs a page of memory. Pages continue from the last
// statement's time; the rows at that very time that were already read are
// skipped (the store orders by time, then id, so they come first again).
// Returns nil when there are none.
func summarizeStoredStatements(ctx context.Context, st *store.Store, q store.Query) (*report.StatementSummary, error) {
	sum := report.NewStatementSummary()
	skip := 0
	for {
		q.Limit = statementPage + skip
		rows, err := st.Statements(ctx, q)
		if err != nil {
			return nil, err
		}
		if len(rows) <= skip {
			break
		}
		for i := skip; i < len(rows); i++ {
			sum.Add(&rows[i])
		}
		last := rows[len(rows)-1].TReqFirst
		if last == q.FromUS {
			skip = len(rows) // every row so far shares the page's start time
		} else {
			q.FromUS, skip = last, countAtEnd(rows, last)
		}
		if len(rows) < q.Limit {
			break
		}
	}
	if sum.Len() == 0 {
		return nil, nil
	}
	return sum, nil
}

// countAtEnd counts the trailing rows whose request started at t.
func countAtEnd(rows []event.Statement, t int64) int {
	n := 0
	for i := len(rows) - 1; i >= 0 && rows[i].TReqFirst == t; i-- {
		n++
	}
	return n
}

// writeFileAtomic writes through a temporary file beside path and renames
// it into place, so a failed or interrupted report never leaves half a
// file where the last good one was.
func writeFileAtomic(path string, write func(io.Writer) error) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	defer os.Remove(tmp.Name()) // after a successful rename there is nothing left to remove
	if err := write(tmp); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Chmod(0o644); err != nil && !errors.Is(err, fs.ErrPermission) {
		tmp.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
