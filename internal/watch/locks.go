package watch

import (
	"context"
	"database/sql"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/txn"
)

// Lock waits and transactions in watch: the ledger (package txn) is fed
// every application statement on the wire stage (txn.Ledger.Wire) and
// every finished one in the sink (txn.Ledger.Finished), which attributes
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
	if r == nil {
		return
	}
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
	out  *outputStage
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

// newLedger makes the run's ledger; its transactions go to tally.
func newLedger(tally *txnTally, samples *rowLockSamples) *txn.Ledger {
	opts := txn.Options{Emit: tally.add}
	if samples != nil {
		opts.RowLockWaits = samples.between
	}
	return txn.New(opts)
}

// TxnSink is a Sink that also takes each finished transaction.
type TxnSink interface {
	Transaction(t *event.Transaction)
}

// readRowLocksAfter reads the row-lock counter for an outlier whose server
// time may have been a lock wait (txn.Options.MinWaitUS and more): the
// ledger attributes a wire-only wait only when a reading after its end
// shows that the server counted one. The poller reads it before the
// outlier's thread, so that the reading precedes the outlier's join.
func (p *poller) readRowLocksAfter(ctx context.Context, tg target) {
	if p.rowLocks == nil || tg.respFirst-tg.reqLast < minLockWaitUS {
		return
	}
	if last, ok := p.rowLocks.last(); ok && last >= tg.respFirst {
		return // a reading after its end exists
	}
	p.rowLocks.readNow(ctx, p.db)
}

// minLockWaitUS is the ledger's default MinWaitUS.
const minLockWaitUS = 5_000

// last is the latest reading's time.
func (r *rowLockSamples) last() (int64, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(r.at) == 0 {
		return 0, false
	}
	return r.at[len(r.at)-1], true
}
