package store

import (
	"cmp"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// WriterOptions bound how much a Writer holds before committing.
type WriterOptions struct {
	// BatchRows commits once this many rows are pending. Default 1000.
	BatchRows int
	// FlushEvery commits pending rows at least this often. Default 200 ms.
	FlushEvery time.Duration
	// OnFlush, when set, is told after every commit how many rows it held
	// and the error, if any (progress, metrics, tests).
	OnFlush func(rows int, err error)
	// SampleEvery keeps the row of 1 in SampleEvery ordinary statements
	// (0 or 1: every one). Slow, failed, outlier and unjoined statements
	// (with a reason of their own, not a deliberate one: the join sample,
	// a run without statement history or without capture) always keep
	// theirs, and every statement is counted in its digest's minute.
	SampleEvery int
	// SlowUS: a statement whose client or server time reaches it is slow
	// (DefaultSlowUS if 0).
	SlowUS int64
	// Limits bound the file; checked after every commit.
	Limits Limits
	// Now is the clock that ages rows (time.Now if nil): tests pass a
	// fake one.
	Now func() time.Time
}

// DefaultSlowUS is the time from which a statement is always stored.
const DefaultSlowUS = 100_000

// Writer batches rows of one run into transactions: a commit every
// BatchRows rows or FlushEvery after the first row queued, whichever comes
// first. Nothing queued, nothing wakes it: a timer that ticked every
// FlushEvery whatever it had was five wakes a second of an idle watch
// (docs/performance.md). Safe for concurrent
// use. After a failed commit (a full disk) it queues nothing more, so that
// a long run does not hold every later row in memory, and returns the
// error from every later call; Dropped counts the rows refused.
type Writer struct {
	s     *Store
	run   int64
	opts  WriterOptions
	mu    sync.Mutex
	stmts []event.Statement
	samps []event.Sample
	finds []findingRow
	txns  []event.Transaction
	args  []any // reused across commits
	err   error
	// dropped counts rows refused after a failed commit.
	dropped int64
	// timer commits what was queued FlushEvery after its first row; nil
	// while nothing waits for it.
	timer   *time.Timer
	minutes minutes
	ordinal int64 // ordinary statements seen, for SampleEvery
	closing bool  // the last flush: every pending minute is written
	limits  limiter
	trimErr error // the last trim's failure, nil once one works
}

// TrimError returns the last failure to hold the store within its
// limits (nil when the last check worked).
func (w *Writer) TrimError() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.trimErr
}

type findingRow struct {
	t        int64
	f        event.Finding
	evidence string
}

// NewWriter starts a writer for run.
func (s *Store) NewWriter(run int64, opts WriterOptions) *Writer {
	opts.BatchRows = cmp.Or(opts.BatchRows, 1000)
	opts.FlushEvery = cmp.Or(opts.FlushEvery, 200*time.Millisecond)
	opts.SlowUS = cmp.Or(opts.SlowUS, DefaultSlowUS)
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Writer{s: s, run: run, opts: opts, stmts: make([]event.Statement, 0, opts.BatchRows),
		limits: limiter{s: s, lim: opts.Limits}}
}

// Add counts a statement in its digest's minute and queues its row when
// the sample keeps it (WriterOptions.SampleEvery). It copies the
// statement, so the caller may reuse it.
func (w *Writer) Add(st *event.Statement) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refuseLocked() {
		return w.err
	}
	kept := w.keep(st)
	w.minutes.add(st, kept) // a minute it completes is written at the next commit
	if kept {
		w.stmts = append(w.stmts, *st)
	}
	return w.maybeFlushLocked()
}

// keep decides whether st gets a row: always when it is one a reader
// looks for (slow, failed, an outlier, waited for a lock, unjoined for a
// reason of its own, not event.Reason.Deliberate), else 1 in SampleEvery.
func (w *Writer) keep(st *event.Statement) bool {
	if w.opts.SampleEvery <= 1 || st.Error != nil || st.Outlier || st.LockWaitTime() > 0 ||
		st.ClientUS >= w.opts.SlowUS || st.ServerUS >= w.opts.SlowUS {
		return true
	}
	if !st.Joined && st.Why != event.ReasonNone && !st.Why.Deliberate() {
		return true
	}
	w.ordinal++
	return w.ordinal%int64(w.opts.SampleEvery) == 1
}

// AddSample queues a server-side sample.
func (w *Writer) AddSample(sm *event.Sample) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refuseLocked() {
		return w.err
	}
	w.samps = append(w.samps, *sm)
	return w.maybeFlushLocked()
}

// AddFinding queues a finding made at tUS. Evidence that does not marshal
// to JSON is refused here, so one bad finding never blocks the batch.
func (w *Writer) AddFinding(tUS int64, f *event.Finding) error {
	ev, err := json.Marshal(f.Evidence)
	if err != nil {
		return fmt.Errorf("storing finding %s: evidence: %w", f.Code, err)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refuseLocked() {
		return w.err
	}
	w.finds = append(w.finds, findingRow{tUS, *f, string(ev)})
	return w.maybeFlushLocked()
}

// AddTransaction queues a finished transaction (watch's sink hands
// them over, a few per second at most beside thousands of statements:
// every one gets a row, bounded by the store's Limits as the rest). It
// copies the transaction; its Tags map is shared, read only.
func (w *Writer) AddTransaction(t *event.Transaction) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.refuseLocked() {
		return w.err
	}
	w.txns = append(w.txns, *t)
	return w.maybeFlushLocked()
}

// refuseLocked counts a row that a failed writer will not queue.
func (w *Writer) refuseLocked() bool {
	if w.err == nil {
		return false
	}
	w.dropped++
	return true
}

// Dropped returns how many rows were refused after a failed commit.
func (w *Writer) Dropped() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.dropped
}

func (w *Writer) pending() int { return len(w.stmts) + len(w.samps) + len(w.finds) + len(w.txns) }

// maybeFlushLocked commits once BatchRows rows are pending, and otherwise
// sees that the timer will.
func (w *Writer) maybeFlushLocked() error {
	if w.err != nil {
		return w.err
	}
	if w.pending() < w.opts.BatchRows {
		w.armLocked()
		return nil
	}
	return w.flushLocked()
}

// armLocked sets the timer that commits what was queued, unless it is set
// or the writer is closing.
func (w *Writer) armLocked() {
	if w.timer == nil && !w.closing {
		w.timer = time.AfterFunc(w.opts.FlushEvery, w.timed)
	}
}

// timed is the timer's commit. The error sticks and surfaces on the next
// call.
func (w *Writer) timed() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.timer = nil
	if !w.closing {
		_ = w.flushLocked()
	}
}

// Flush commits every pending row now.
func (w *Writer) Flush() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.flushLocked()
}

// Close stops the timer and commits what is pending, every pending
// minute included. A timer that fired meanwhile finds the writer closing
// and leaves it be.
func (w *Writer) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	if w.timer != nil {
		w.timer.Stop()
		w.timer = nil
	}
	return w.flushLocked()
}

func (w *Writer) flushLocked() error {
	n := w.pending()
	if w.err != nil || (n == 0 && !w.minutes.done(w.closing)) {
		return w.err
	}
	err := w.commit()
	if err == nil {
		w.minutes.forget(w.closing)
		// A failed trim leaves the rows (the file may outgrow its limit
		// until the next one works); it does not stop the recording.
		w.trimErr = w.limits.check(context.Background(), w.opts.Now())
	}
	if w.opts.OnFlush != nil {
		w.opts.OnFlush(n, err)
	}
	if err != nil {
		w.err = fmt.Errorf("writing %d rows to store %s: %w", n, w.s.path, err)
		return w.err
	}
	clear(w.txns) // let their strings go
	w.stmts, w.samps, w.finds, w.txns = w.stmts[:0], w.samps[:0], w.finds[:0], w.txns[:0]
	return nil
}

// commit writes every pending row in one transaction.
func (w *Writer) commit() error {
	ctx := context.Background()
	tx, err := w.s.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	err = errors.Join(w.insertStatements(ctx, tx), w.insertSamples(ctx, tx), w.insertFindings(ctx, tx),
		w.insertTransactions(ctx, tx), w.minutes.write(ctx, tx, w.run, w.closing))
	if err != nil {
		tx.Rollback()
		return err
	}
	return tx.Commit()
}

// statementColumns are the statements columns a Writer fills, in order.
const statementColumns = `run_id, conn, conn_id, user, db, cmd, sql, digest, digest_text,
 t_req_first, t_req_last, t_resp_first, t_resp_last, client_us, request_us, queue_us, exec_us, send_stall_us,
 delivery_us, server_us, "rows", req_bytes, resp_bytes, error_code, error_state, error_msg, zero_window_us,
 retransmits, pool_group, joined, notes, txn, txn_end, txn_idle_before_us, txn_start, lock_wait_us,
 blocker_conn_id, blocker_kind, blocker_state, blocker_confidence, root_conn_id, blocked_by`

const statementArity = 42

var insertStatement = "INSERT INTO statements (" + statementColumns + ") VALUES (" +
	strings.TrimSuffix(strings.Repeat("?,", statementArity), ",") + ")"

// insertStatements runs one prepared single-row INSERT per statement: with
// this driver that beat 16- and 64-row INSERTs (docs/performance.md, "The
// store's inserts"), binding many parameters costing more than executing
// many statements.
func (w *Writer) insertStatements(ctx context.Context, tx *sql.Tx) error {
	if len(w.stmts) == 0 {
		return nil
	}
	ps, err := tx.PrepareContext(ctx, insertStatement)
	if err != nil {
		return err
	}
	defer ps.Close()
	for i := range w.stmts {
		w.args = appendStatementArgs(w.args[:0], w.run, &w.stmts[i])
		if _, err := ps.ExecContext(ctx, w.args...); err != nil {
			return err
		}
	}
	clear(w.args) // let the batch's strings go
	return nil
}

func appendStatementArgs(args []any, run int64, s *event.Statement) []any {
	var code, state, msg, group, notes any
	if s.Error != nil {
		code, state, msg = int64(s.Error.Code), s.Error.State, s.Error.Msg
	}
	if s.PoolGroup != nil {
		group = int64(*s.PoolGroup)
	}
	if s.HasNotes() { // as written: the rows' and the reason's sentences too
		b, _ := json.Marshal(slices.Collect(s.AllNotes())) // []string always marshals
		notes = string(b)
	}
	args = append(args, run, s.Conn, int64(s.ConnID), s.User, s.DB, s.Cmd, s.SQL, s.Digest, s.DigestText,
		s.TReqFirst, s.TReqLast, s.TRespFirst, s.TRespLast, s.ClientUS, s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS,
		s.DeliveryUS, s.ServerUS, s.Rows, s.ReqBytes, s.RespBytes, code, state, msg, s.ZeroWindowUS,
		int64(s.Retransmits), group, s.Joined, notes, int64(s.TxnSeq), s.TxnEnd.String(), s.TxnIdleBeforeUS, s.TxnStartUS)
	return appendLockWaitArgs(args, s.LockWait)
}

// appendLockWaitArgs appends the lock wait's columns: all NULL without
// one, the blocker's NULL without a blocker.
func appendLockWaitArgs(args []any, lw *event.LockWait) []any {
	var wait, connID, kind, state, confidence, root, blocker any
	if lw != nil {
		wait = lw.LockWaitUS
		if b := lw.BlockedBy; b != nil {
			connID, kind, state, confidence = int64(b.ConnID), b.Kind, b.State, b.Confidence
			if b.Root != nil {
				root = int64(b.Root.ConnID)
			}
			if j, err := json.Marshal(b); err == nil { // strings and integers: always marshals
				blocker = string(j)
			}
		}
	}
	return append(args, wait, connID, kind, state, confidence, root, blocker)
}

func (w *Writer) insertSamples(ctx context.Context, tx *sql.Tx) error {
	if len(w.samps) == 0 {
		return nil
	}
	ps, err := tx.PrepareContext(ctx, "INSERT INTO samples (run_id, t_us, source, name, value, labels) VALUES (?,?,?,?,?,?)")
	if err != nil {
		return err
	}
	defer ps.Close()
	for _, sm := range w.samps {
		var labels any
		if len(sm.Labels) > 0 {
			b, _ := json.Marshal(sm.Labels)
			labels = string(b)
		}
		if _, err := ps.ExecContext(ctx, w.run, sm.TimeUS, sm.Source, sm.Name, sm.Value, labels); err != nil {
			return err
		}
	}
	return nil
}

// transactionColumns are the transactions columns a Writer fills, in order.
const transactionColumns = `run_id, conn, conn_id, user, db, txn, t_start, t_end, "end", statements, open_us,
 joined, server_us, in_app_us, max_idle_us, lock_wait_us, first_digest, first_sql, lead_digest, lead_sql, route,
 tags, blocked`

var insertTransaction = "INSERT INTO transactions (" + transactionColumns + ") VALUES (" +
	strings.TrimSuffix(strings.Repeat("?,", 23), ",") + ")"

func (w *Writer) insertTransactions(ctx context.Context, tx *sql.Tx) error {
	if len(w.txns) == 0 {
		return nil
	}
	ps, err := tx.PrepareContext(ctx, insertTransaction)
	if err != nil {
		return err
	}
	defer ps.Close()
	for i := range w.txns {
		t := &w.txns[i]
		var tags any
		if len(t.Tags) > 0 {
			b, _ := json.Marshal(t.Tags) // map[string]string always marshals
			tags = string(b)
		}
		if _, err := ps.ExecContext(ctx, w.run, t.Conn, int64(t.ConnID), t.User, t.DB, int64(t.Seq), t.Start, t.End,
			t.EndKind, t.Statements, t.OpenUS, t.Joined, t.ServerUS, t.InAppUS, t.MaxIdleUS, t.LockWaitUS,
			t.FirstDigest, t.FirstSQL, t.LeadDigest, t.LeadSQL, t.Tags["route"], tags, t.Blocked); err != nil {
			return err
		}
	}
	return nil
}

func (w *Writer) insertFindings(ctx context.Context, tx *sql.Tx) error {
	for _, fr := range w.finds {
		if _, err := tx.ExecContext(ctx, "INSERT INTO findings (run_id, t_us, code, severity, summary, evidence, fix) VALUES (?,?,?,?,?,?,?)",
			w.run, fr.t, fr.f.Code, string(fr.f.Severity), fr.f.Summary, fr.evidence, fr.f.Fix); err != nil {
			return err
		}
	}
	return nil
}
