package txn

import (
	"cmp"
	"slices"

	"github.com/gapscope/gapscope/internal/event"
)

// Summary is what a run saw of transactions: how many ended (or were open
// at the end), the time their applications held them open, and those held
// open longest without a statement running.
type Summary struct {
	Count int64 `json:"count"`
	// Kept is how many of them the sums below cover (the most recent,
	// bounded).
	Kept       int   `json:"kept"`
	OpenUS     int64 `json:"open_us"`
	InAppUS    int64 `json:"in_app_us"`
	LockWaitUS int64 `json:"lock_wait_us"`
	// LongestIdle are the kept transactions with the longest idle gap,
	// longest first.
	LongestIdle []event.Transaction `json:"longest_idle,omitempty"`
}

// longestIdleShown bounds Summary.LongestIdle.
const longestIdleShown = 5

// Summarize sums txns, the kept part of count transactions.
func Summarize(txns []event.Transaction, count int64) Summary {
	s := Summary{Count: count, Kept: len(txns)}
	for i := range txns {
		s.OpenUS += txns[i].OpenUS
		s.InAppUS += txns[i].InAppUS
		s.LockWaitUS += txns[i].LockWaitUS
	}
	idle := slices.Clone(txns)
	slices.SortStableFunc(idle, func(a, b event.Transaction) int { return cmp.Compare(b.MaxIdleUS, a.MaxIdleUS) })
	for _, t := range idle[:min(len(idle), longestIdleShown)] {
		if t.MaxIdleUS > 0 {
			s.LongestIdle = append(s.LongestIdle, t)
		}
	}
	return s
}
