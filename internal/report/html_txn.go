package report

import (
	"cmp"
	"context"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// TxnReport is what a store kept of its runs' transactions: their sums
// and those the application held open longest without a statement
// running.
type TxnReport struct {
	store.TxnTotals
	// LongestIdle are the transactions with the longest idle gap
	// (event.Transaction.MaxIdleUS), longest first.
	LongestIdle []event.Transaction
}

// LockWaitRow is one digest's lock waits: LockWaits of its Calls waited
// for a lock, LockWaitUS in all, a part of ExecUS.
type LockWaitRow struct {
	Digest, DigestText           string
	Calls, LockWaits, LockWaitUS int64
	ExecUS                       int64
}

// topIdleTxns and topLockDigests bound the report's tables.
const (
	topIdleTxns    = 10
	topLockDigests = 10
)

// loadTransactions reads the transactions q selects (nil when there are
// none) and the digests that waited for locks, from the per-minute totals
// (every statement counted, sampled or not).
func loadTransactions(ctx context.Context, st *store.Store, q store.Query) (*TxnReport, []LockWaitRow, error) {
	tot, err := st.TransactionTotals(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	var txns *TxnReport
	if tot.Count > 0 {
		txns = &TxnReport{TxnTotals: tot}
		if txns.LongestIdle, err = st.LongestIdle(ctx, q, topIdleTxns); err != nil {
			return nil, nil, err
		}
	}
	q.Limit = topLockDigests
	waits, err := st.LockWaitsByDigest(ctx, q)
	if err != nil {
		return nil, nil, err
	}
	var rows []LockWaitRow
	for _, w := range waits {
		rows = append(rows, LockWaitRow{Digest: w.Digest, DigestText: w.DigestText, Calls: w.Calls,
			LockWaits: w.LockWaits, LockWaitUS: w.LockWaitUS, ExecUS: w.ExecUS})
	}
	return txns, rows, nil
}

// lockWaitsOf are the digests of a statement summary that waited for
// locks (an events file's, where no per-minute totals exist), most lock
// wait first.
func lockWaitsOf(s *StatementSummary) []LockWaitRow {
	var rows []LockWaitRow
	for _, d := range s.profile.Result().Digests {
		if d.LockWaits == 0 {
			continue
		}
		r := LockWaitRow{Digest: d.Digest, DigestText: cmp.Or(d.DigestText, d.Digest), Calls: d.Calls, LockWaits: d.LockWaits, LockWaitUS: d.LockWaitUS}
		if d.Parts != nil {
			r.ExecUS = d.Parts.ExecUS
		}
		rows = append(rows, r)
	}
	slices.SortStableFunc(rows, func(a, b LockWaitRow) int { return cmp.Compare(b.LockWaitUS, a.LockWaitUS) })
	return rows[:min(len(rows), topLockDigests)]
}

// txnText is what names a transaction in the report: its lead statement
// (the first after BEGIN), else its first.
func txnText(t event.Transaction) string {
	return cmp.Or(t.LeadSQL, t.FirstSQL, t.LeadDigest, t.FirstDigest)
}

// share is part/whole as a percentage ("" when whole is 0).
func share(part, whole int64) string {
	if whole <= 0 {
		return ""
	}
	return fmtNum(float64(part*1000/whole)/10) + "%"
}
