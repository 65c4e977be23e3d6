package watch

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/txn"
)

// Lock waits and transactions in watch: the ledger (package txn) is fed
// every application statement on the wire stage (txn.Ledger.Wire) and
// every finished one in the tally (txn.Ledger.Finished), which attributes
// lock waits before the statement is counted or written. The poller owns
// the server's side: the row-lock counter's readings, which guard the
// wire's attributions, and the reads of the lock tables while a statement
// runs long.

// rowLockStatus is the counter of row-lock waits the server began.
const rowLockStatus = "Innodb_row_lock_waits"

// rowLockSamples are the counter's readings, oldest first, bounded.
type rowLockSamples struct {
	mu    sync.Mutex
	at    []int64 // Unix µs
	waits []int64
}

const maxRowLockSamples = 512

// add records a reading taken at atUS.
func (r *rowLockSamples) add(atUS, waits int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := len(r.at); n > 0 && atUS <= r.at[n-1] {
		return
	}
	if len(r.at) >= maxRowLockSamples {
		half := maxRowLockSamples / 2
		r.at = append(r.at[:0], r.at[half:]...)
		r.waits = append(r.waits[:0], r.waits[half:]...)
	}
	r.at = append(r.at, atUS)
	r.waits = append(r.waits, waits)
}

// between is how many row-lock waits began between the last reading at or
// before from and the first at or after to; known when both exist (a
// server restart, which resets the counter, reads as unknown).
func (r *rowLockSamples) between(from, to int64) (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	i0, i1 := -1, -1
	for i, at := range r.at {
		if at <= from {
			i0 = i
		}
		if at >= to && i1 < 0 {
			i1 = i
		}
	}
	if i0 < 0 || i1 < 0 || r.waits[i1] < r.waits[i0] {
		return 0, false
	}
	return r.waits[i1] - r.waits[i0], true
}

// noteRowLocks records the counter from a status read.
func (r *rowLockSamples) noteStatus(at time.Time, status map[string]string) {
	if v, err := strconv.ParseInt(status[rowLockStatus], 10, 64); err == nil {
		r.add(at.UnixMicro(), v)
	}
}

// readNow reads the counter at once: an outlier's wait is judged against a
// reading taken after it ended, not up to a second later.
func (r *rowLockSamples) readNow(ctx context.Context, db *sql.DB) {
	st, err := collect.GlobalStatusOf(ctx, db, rowLockStatus)
	if err == nil {
		r.noteStatus(time.Now(), st)
	}
}

// txnTally keeps the recent transactions for the diagnosis and hands each
// to the run's sinks. The ledger calls add from the wire's goroutine and
// the join's: its own lock.
type txnTally struct {
	out  *outputQueue
	mu   sync.Mutex
	txns []event.Transaction
	all  int64
}

// maxRecentTxns bounds the transactions kept for the diagnosis.
const maxRecentTxns = 4096

// add takes a finished transaction (the ledger's Emit).
func (k *txnTally) add(t *event.Transaction) {
	k.mu.Lock()
	if len(k.txns) >= maxRecentTxns {
		k.txns = append(k.txns[:0], k.txns[maxRecentTxns/2:]...)
	}
	k.txns = append(k.txns, *t)
	k.all++
	k.mu.Unlock()
	k.out.putTxn(t)
}

// recent copies the transactions kept, and counts all.
func (k *txnTally) recent() ([]event.Transaction, int64) {
	k.mu.Lock()
	defer k.mu.Unlock()
	return slices.Clone(k.txns), k.all
}

// newLedger makes the run's ledger; its transactions go to tally, its
// wish for a fresh reading of the row-lock counter sets want and wakes
// the poller (the status reader serves it).
func newLedger(tally *txnTally, samples *rowLockSamples, want *atomic.Bool, wake chan struct{}) *txn.Ledger {
	return txn.New(txn.Options{Emit: tally.add, RowLockWaits: samples.between, WantCounter: func() {
		want.Store(true)
		signal(wake)
	}})
}

// last is the latest reading's time.
func (r *rowLockSamples) last() (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) == 0 {
		return 0, false
	}
	return r.at[len(r.at)-1], true
}

// lockReadAfter is how long a statement must have run before watch reads
// the server's lock tables for it: shorter waits are attributed after
// the fact, from the wire (txn.Ledger).
const lockReadAfter = 500 * time.Millisecond

// lockReader reads the server's lock tables while statements run long
// (the running scans and the processlist find them), on the poller's
// goroutine. Nothing is read while nothing runs long.
type lockReader struct {
	db     *sql.DB
	ledger *txn.Ledger // what the tables show goes there
	notes  *noteList
	src    collect.LockSources
	// covered are the long statements a read already looked at, by the
	// connection's server id: their start (Unix µs).
	covered map[uint64]int64
	last    time.Time
	reads   int64
	noted   bool
}

func newLockReader(db *sql.DB, src collect.LockSources, ledger *txn.Ledger, notes *noteList) *lockReader {
	return &lockReader{db: db, ledger: ledger, notes: notes, src: src, covered: map[uint64]int64{}}
}

// longStatement is a statement seen running for lockReadAfter or more.
type longStatement struct {
	connID  uint64
	startUS int64
}

// read reads the lock tables when a long statement no read has
// looked at is running, no sooner than collect.MinLockWaitsInterval after
// the last read (the InnoDB tables are a snapshot refreshed no faster),
// and hands what it finds to the ledger.
func (l *lockReader) read(ctx context.Context, long []longStatement) {
	now := time.Now()
	fresh := false
	for _, s := range long {
		if at, ok := l.covered[s.connID]; !ok || abs64(at-s.startUS) > 200_000 {
			fresh = true
			break
		}
	}
	if !fresh || now.Sub(l.last) < collect.MinLockWaitsInterval {
		return
	}
	l.last = now
	waits, err := collect.ReadLockWaits(ctx, l.db, l.src)
	l.reads++
	if len(l.covered) > 4096 {
		clear(l.covered)
	}
	for _, s := range long {
		l.covered[s.connID] = s.startUS
	}
	if err != nil && len(waits) == 0 {
		l.notes.add("lock tables unreadable (%v): lock waits are attributed from the wire only", err)
		return
	}
	if !l.noted {
		l.noted = true
		l.notes.add("lock waits of statements running over %s read from %s", lockReadAfter, l.describe())
	}
	l.ledger.Observe(now.UnixMicro(), seenOf(waits))
}

// describe names the sources a read uses.
func (l *lockReader) describe() string {
	var parts []string
	if l.src.Rows != "" {
		parts = append(parts, l.src.Rows+" (row locks)")
	}
	if l.src.MDL != "" {
		parts = append(parts, l.src.MDL+" (metadata locks)")
	}
	if len(parts) == 0 {
		return "no lock table this server offers"
	}
	return strings.Join(parts, " and ")
}

// seenOf turns the server's waits into the ledger's: one per waiter (its
// first blocker), with whether its blocker and its root were idle.
func seenOf(waits []collect.LockWait) []txn.Seen {
	idle := map[uint64]bool{}
	for _, w := range waits {
		if w.BlockerID != 0 && w.BlockerIdle() {
			idle[w.BlockerID] = true
		}
	}
	var out []txn.Seen
	seen := map[uint64]bool{}
	for _, w := range waits {
		if seen[w.WaiterID] || w.WaiterID == 0 {
			continue
		}
		seen[w.WaiterID] = true
		root := w.RootID
		if root == 0 {
			root = w.BlockerID
		}
		out = append(out, txn.Seen{WaiterID: w.WaiterID, BlockerID: w.BlockerID, RootID: root, Kind: w.Kind,
			Source: w.Source, BlockerIdle: w.BlockerIdle(), RootIdle: idle[root], BlockerQuery: w.BlockerTrxQuery})
	}
	return out
}

func abs64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
