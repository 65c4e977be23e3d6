package web

import (
	"cmp"
	"slices"
	"sync"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// The page's transactions: watch hands the view every finished
// transaction (the view takes them, watch.TakesTransactions); each is counted in the
// 10-second step it ended in, per (user, db), for the statements' window,
// and each cell keeps its few longest idle. The page shows their count,
// the time their applications held them open and the longest idle ones,
// for the filter's user and db (a transaction has no single digest or
// pool group).
const (
	// maxTxnKeys bounds the (user, db) cells of one step; the rest share
	// one cell.
	maxTxnKeys = 20
	// idleShown is how many of the longest idle transactions a cell keeps
	// and the page lists.
	idleShown = 5
	// txnTextRunes bounds the statement texts a kept transaction holds.
	txnTextRunes = 300
)

// Transaction is part of watch.Sink: it counts t in the view's history.
func (v *View) Transaction(t *event.Transaction) { v.txns.add(t) }

type txnKey struct{ user, db string }

// otherTxnKey is the cell of the (user, db) pairs past maxTxnKeys.
var otherTxnKey = txnKey{user: "(other)", db: "(other)"}

type txnCell struct {
	count, open, statements    int64
	openUS, inAppUS, lockUS    int64
	blocked, maxIdleUS, joined int64
	serverUS                   int64
	idle                       []event.Transaction // the longest idle, longest first
}

// txnHistory is the ring of steps, as history's.
type txnHistory struct {
	mu   sync.Mutex
	ring stepRing[txnKey, txnCell]
}

func (h *txnHistory) add(t *event.Transaction) {
	idx := t.End / stepUS
	k := txnKey{t.User, t.DB}
	h.mu.Lock()
	defer h.mu.Unlock()
	cells := h.ring.slot(idx)
	if cells == nil {
		return // older than the ring
	}
	c := cells[k]
	if c == nil {
		if len(cells) >= maxTxnKeys {
			k = otherTxnKey
		}
		if c = cells[k]; c == nil {
			c = &txnCell{}
			cells[k] = c
		}
	}
	c.count++
	if t.EndKind == event.TxnEndOpen.String() {
		c.open++
	}
	c.statements += int64(t.Statements)
	c.openUS += t.OpenUS
	c.inAppUS += t.InAppUS
	c.lockUS += t.LockWaitUS
	c.blocked += int64(t.Blocked)
	c.joined += int64(t.Joined)
	c.serverUS += t.ServerUS
	c.maxIdleUS = max(c.maxIdleUS, t.MaxIdleUS)
	if t.MaxIdleUS > 0 && (len(c.idle) < idleShown || t.MaxIdleUS > c.idle[len(c.idle)-1].MaxIdleUS) {
		kept := *t
		kept.FirstSQL = sqltext.Clip(kept.FirstSQL, txnTextRunes)
		kept.LeadSQL = sqltext.Clip(kept.LeadSQL, txnTextRunes)
		c.idle = insertIdle(c.idle, kept)
	}
}

// insertIdle puts t in its place among the longest idle, longest first,
// keeping idleShown.
func insertIdle(list []event.Transaction, t event.Transaction) []event.Transaction {
	i, _ := slices.BinarySearchFunc(list, t.MaxIdleUS, func(e event.Transaction, us int64) int { return cmp.Compare(us, e.MaxIdleUS) })
	list = slices.Insert(list, i, t)
	return list[:min(len(list), idleShown)]
}

// TxnLive is what the page shows of the window's transactions.
type TxnLive struct {
	Count int64 `json:"count"`
	// Open counts those still open when their connection closed or the
	// run ended.
	Open       int64 `json:"open"`
	Statements int64 `json:"statements"`
	// OpenUS sums their time open; InAppUS the part their applications
	// held them open with no statement running; ServerUS the server time
	// of their Joined statements; LockWaitUS their statements' lock
	// waits; Blocked the other connections' statements they held up.
	OpenUS     int64 `json:"open_us"`
	InAppUS    int64 `json:"in_app_us"`
	Joined     int64 `json:"joined"`
	ServerUS   int64 `json:"server_us"`
	LockWaitUS int64 `json:"lock_wait_us"`
	Blocked    int64 `json:"blocked"`
	MaxIdleUS  int64 `json:"max_idle_us"`
	// LongestIdle are the transactions with the longest idle gap, longest
	// first.
	LongestIdle []event.Transaction `json:"longest_idle"`
}

// live sums the window that ends at nowUS for f's user and db; nil when
// no transaction ended in it.
func (h *txnHistory) live(f Filter, nowUS int64) *TxnLive {
	last := nowUS / stepUS
	out := &TxnLive{}
	h.mu.Lock()
	defer h.mu.Unlock()
	for idx := last - nSteps + 1; idx <= last; idx++ {
		cells, ok := h.ring.step(idx)
		if !ok {
			continue
		}
		for k, c := range cells {
			if f.User != "" && k.user != f.User || f.DB != "" && k.db != f.DB {
				continue
			}
			out.Count += c.count
			out.Open += c.open
			out.Statements += c.statements
			out.OpenUS += c.openUS
			out.InAppUS += c.inAppUS
			out.Joined += c.joined
			out.ServerUS += c.serverUS
			out.LockWaitUS += c.lockUS
			out.Blocked += c.blocked
			out.MaxIdleUS = max(out.MaxIdleUS, c.maxIdleUS)
			for _, t := range c.idle {
				if len(out.LongestIdle) < idleShown || t.MaxIdleUS > out.LongestIdle[len(out.LongestIdle)-1].MaxIdleUS {
					out.LongestIdle = insertIdle(out.LongestIdle, t)
				}
			}
		}
	}
	if out.Count == 0 {
		return nil
	}
	return out
}
