package report

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// LoadStore fills d with what the store at path recorded: the runs (every
// run when run is 0, else that one), what a bounded store still holds,
// findings, canary rounds, plans, transactions, lock waits by digest and
// statements. The overhead table is
// the overhead package's to rebuild (it owns the statistics).
func LoadStore(ctx context.Context, st *store.Store, path string, run int64, d *HTMLData) error {
	runs, err := st.Runs(ctx)
	if err != nil {
		return err
	}
	if run != 0 {
		i := slices.IndexFunc(runs, func(r store.Run) bool { return r.ID == run })
		if i < 0 {
			return fmt.Errorf("run %d is not in %s (%d runs)", run, path, len(runs))
		}
		runs = runs[i : i+1]
	}
	d.Source, d.Runs = path, runInfos(runs)
	h, err := st.Holdings(ctx)
	if err != nil {
		return err
	}
	d.Notes = append(d.Notes, holdingsNotes(h)...)
	q := store.Query{RunID: run}
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
	if d.Transactions, d.LockWaits, err = loadTransactions(ctx, st, q); err != nil {
		return err
	}
	d.Statements, err = summarizeStoredStatements(ctx, st, q)
	return err
}

func runInfos(runs []store.Run) []RunInfo {
	out := make([]RunInfo, len(runs))
	for i, r := range runs {
		out[i] = RunInfo{ID: r.ID, StartUS: r.StartUS, EndUS: r.EndUS, Command: r.Command, DSN: r.DSN, Notes: r.Notes}
	}
	return out
}

func probePoints(rs []store.ProbeResult) []ProbePoint {
	out := make([]ProbePoint, len(rs))
	for i, p := range rs {
		out[i] = ProbePoint{TimeUS: p.TimeUS, Name: p.Name, Calls: p.Calls, Errors: p.Errors,
			MinUS: p.MinUS, AvgUS: p.AvgUS, MedianUS: p.MedianUS, MaxUS: p.MaxUS,
			ThreadsConnected: p.ThreadsConnected, ThreadsRunning: p.ThreadsRunning}
	}
	return out
}

func planEntries(ps []store.Plan) []PlanEntry {
	out := make([]PlanEntry, len(ps))
	for i, p := range ps {
		out[i] = PlanEntry{TimeUS: p.TimeUS, ConnID: p.ConnID, Digest: p.Digest, DigestText: p.DigestText,
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
	if h.TransactionsFromUS > 0 {
		held += ", transactions from " + stamp(h.TransactionsFromUS)
	}
	why := map[string]string{"age": "--store-retain", "size": "--store-max-size"}[h.LastReason]
	out = append(out, fmt.Sprintf("the store was trimmed to its limits %d times (%d rows removed, the last at %s by %s): it holds %s",
		h.Trims, h.RemovedRows, stamp(h.LastTrimUS), cmp.Or(why, h.LastReason), held))
	return out
}

// statementPage is how many statements one read holds in memory.
const statementPage = 5000

// summarizeStoredStatements streams the statements q selects through a
// StatementSummary one page at a time, so a store of millions of
// statements costs a page of memory. Pages continue from the last
// statement's time; the rows at that very time that were already read are
// skipped (the store orders by time, then id, so they come first again).
// Returns nil when there are none.
func summarizeStoredStatements(ctx context.Context, st *store.Store, q store.Query) (*StatementSummary, error) {
	sum := NewStatementSummary()
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
