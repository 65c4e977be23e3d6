// Package txn follows the transactions applications hold open and the lock
// waits they cause, from the wire first and the server's lock tables when
// watch read them. The capture places each statement in its connection's
// transactions (event.TxnInfo, from the responses' status flags); the
// Ledger here builds one record per transaction, keeps the recent
// releases (a transaction's end, a DDL statement's end) and attributes a
// statement's long server time to another connection's release when the
// evidence says it waited for it (docs/decomposition.md, "Lock waits").
package txn

import (
	"sync"
	"sync/atomic"

	"github.com/gapscope/gapscope/internal/event"
)

// Options tune a Ledger; zero fields take the defaults.
type Options struct {
	// MinWaitUS: a statement's server time must reach this before it is
	// looked at for a lock wait (default 5 ms). Waits shorter than it are
	// not attributed after the fact.
	MinWaitUS int64
	// SlackUS is how long after a release's response a waiter's end may
	// come and still count as woken by it (default 2 ms): the waiter
	// finishes its own work once it has the lock.
	SlackUS int64
	// KeepUS is how long releases are kept for waiters still being
	// joined (default 120 s).
	KeepUS int64
	// MaxReleases bounds the releases kept (default 65,536).
	MaxReleases int
	// MaxConns bounds the connections followed (default 65,536): beyond
	// it the least recently active one is forgotten.
	MaxConns int
	// HoldUS is how long past its end a statement that may have waited
	// for a lock is held for the release to show on the wire (default
	// 150 ms; Finished).
	HoldUS int64
	// CounterHoldUS is how long past its end such a statement is held at
	// most while RowLockWaits cannot yet tell (default 1.5 s: watch reads
	// the server's status each second).
	CounterHoldUS int64
	// GraceUS is how long after a transaction's end it is held before it
	// is written, so that the waiters attributed to it count in Blocked
	// (default 2 s); MaxHoldUS how long at most (default 60 s).
	GraceUS, MaxHoldUS int64
	// Emit receives each transaction once all its statements finished and
	// GraceUS passed, or at Close. It is called with the ledger's lock released, from the
	// goroutine that finished the statement.
	Emit func(*event.Transaction)
	// RowLockWaits, when set, says how many row-lock waits the server
	// counted (Innodb_row_lock_waits) between two instants (Unix µs), and
	// whether its samples cover them: a row-lock wait attributed from the
	// wire needs the server to have counted one (watch passes its status
	// readings; analyze has none).
	RowLockWaits func(fromUS, toUS int64) (waits int64, known bool)
	// WantCounter, when set, is called (with the ledger's lock held: it
	// must not block) when a statement waits for RowLockWaits to know.
	WantCounter func()
}

func (o *Options) defaults() {
	if o.MinWaitUS <= 0 {
		o.MinWaitUS = 5_000
	}
	if o.SlackUS <= 0 {
		o.SlackUS = 2_000
	}
	if o.KeepUS <= 0 {
		o.KeepUS = 120_000_000
	}
	if o.MaxReleases <= 0 {
		o.MaxReleases = 64 << 10
	}
	if o.MaxConns <= 0 {
		o.MaxConns = 64 << 10
	}
	if o.HoldUS <= 0 {
		o.HoldUS = 150_000
	}
	if o.CounterHoldUS <= 0 {
		o.CounterHoldUS = 1_500_000
	}
	if o.GraceUS <= 0 {
		o.GraceUS = 2_000_000
	}
	if o.MaxHoldUS <= 0 {
		o.MaxHoldUS = 60_000_000
	}
}

// Ledger is safe for concurrent use: watch feeds Wire from the capture's
// goroutine and Finished from whichever goroutine finishes a statement,
// and the lock reader's Observe from the poller.
type Ledger struct {
	opts Options

	mu    sync.Mutex
	conns map[string]*connState
	byID  map[uint64]*connState
	// rel are the recent releases in the order the wire saw them (by
	// response time, nearly: connections interleave by a few µs).
	rel releases
	// closing are transactions the wire saw end whose statements have
	// not all finished yet, by connection and number.
	closing map[txnKey]*record
	// ended are the ended transactions not yet written, in the order they
	// ended: each is written once its statements all finished and the
	// wire has gone GraceUS past its end (waiters still being joined may
	// yet be attributed to it), or once it is MaxHoldUS old.
	ended []*record
	// newest is the latest time the wire showed (Unix µs; advance);
	// waiting counts the held statements and ended transactions, for
	// Wire's path without the lock.
	newest  atomic.Int64
	waiting atomic.Int64
	// held are statements waiting for a release the wire may yet show
	// (Finished).
	held []heldStmt
	// live are the waits the server's lock tables showed, by the waiting
	// connection's id (Observe).
	live map[uint64]liveWait
	tick uint64 // orders connections by activity, for eviction
}

type txnKey struct {
	conn string
	seq  uint32
}

// record is a transaction being built: its wire half from Wire, its
// server half from Finished.
type record struct {
	t event.Transaction
	// wireN counts the statements the wire placed in it, doneN those
	// finished; ended: the wire saw its end (wireN is final).
	wireN, doneN int
	ended        bool
	// emitted: handed to Emit, never changed again.
	emitted bool
}

// connState is what the wire knows of one connection.
type connState struct {
	conn   string
	connID uint64
	user   string
	used   uint64
	open   *record // the transaction in progress, nil outside one
	// last is the latest statement of the open transaction that was not
	// its end: what holds locks on its behalf.
	lastDigest, lastSQL string
	lastResp            int64
	// lastTexts are the texts of the open transaction's statements (the
	// first maxTxnTexts/2): the tables they name are what its locks can be
	// on, read only when a waiter needs them.
	lastTexts []string
	// running: a request sent whose response the wire has not yet seen
	// is not known here (the wire hands on finished statements only);
	// lastReq is the latest request start seen.
	lastReq int64
}

// New returns a ledger.
func New(opts Options) *Ledger {
	opts.defaults()
	return &Ledger{
		opts:    opts,
		conns:   make(map[string]*connState),
		byID:    make(map[uint64]*connState),
		closing: make(map[txnKey]*record),
		live:    make(map[uint64]liveWait),
		rel:     releases{max: opts.MaxReleases},
	}
}

func (l *Ledger) connOf(s *event.Statement) *connState {
	c := l.conns[s.Conn]
	if c == nil {
		if len(l.conns) >= l.opts.MaxConns {
			l.evictOldest()
		}
		c = &connState{conn: s.Conn}
		l.conns[s.Conn] = c
	}
	l.tick++
	c.used = l.tick
	if s.ConnID != 0 && c.connID != s.ConnID {
		if c.connID != 0 && l.byID[c.connID] == c {
			delete(l.byID, c.connID)
		}
		c.connID = s.ConnID
		l.byID[s.ConnID] = c
	}
	if s.User != "" {
		c.user = s.User
	}
	return c
}

func (l *Ledger) evictOldest() {
	var old *connState
	for _, c := range l.conns {
		if old == nil || c.used < old.used {
			old = c
		}
	}
	if old == nil {
		return
	}
	delete(l.conns, old.conn)
	if l.byID[old.connID] == old {
		delete(l.byID, old.connID)
	}
}

// LearnConn tells the ledger a wire connection's server id (the join
// learns it for connections whose handshake the capture missed).
func (l *Ledger) LearnConn(conn string, connID uint64) {
	if conn == "" || connID == 0 {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	l.learn(conn, connID)
}

func (l *Ledger) learn(conn string, connID uint64) {
	c := l.conns[conn]
	if c == nil || c.connID == connID {
		return
	}
	if c.connID != 0 && l.byID[c.connID] == c {
		delete(l.byID, c.connID)
	}
	c.connID = connID
	l.byID[connID] = c
}

// Wire takes a statement as the wire finished it, in its connection's
// order. It must be called before Finished for the same statement.
func (l *Ledger) Wire(s *event.Statement) {
	if s.Conn == "" {
		return
	}
	ddl := isDDL(s.DigestText, s.SQL)
	if s.TxnSeq == 0 && !ddl {
		// Outside a transaction (the capture numbers every statement of
		// one, its end and a COM_QUIT inside one included): only the clock
		// moves, without the lock while nothing waits for it (most
		// statements of most applications).
		l.advance(max(s.TReqFirst, s.TRespLast))
		if l.waiting.Load() == 0 {
			return
		}
		l.Tick(0)
		return
	}
	l.mu.Lock()
	var done []*event.Transaction
	c := l.connOf(s)
	c.lastReq = s.TReqFirst
	l.advance(max(s.TReqFirst, s.TRespLast))
	if c.open != nil && (s.TxnSeq != c.open.t.Seq || s.Cmd == "COM_QUIT") {
		// A new number without the old one's end: a BEGIN inside it, or a
		// status the wire missed, ended it; COM_QUIT rolls it back.
		end := event.TxnEndImplicit
		if s.Cmd == "COM_QUIT" || s.TxnSeq == 0 {
			end = event.TxnEndOpen
		}
		done = l.endOpen(c, end, c.lastResp, done)
	}
	if s.TxnSeq != 0 && s.Cmd != "COM_QUIT" {
		if c.open == nil {
			c.open = l.begin(c, s)
		}
		r := c.open
		r.wireN++
		r.t.Statements++
		r.t.InAppUS += s.TxnIdleBeforeUS
		r.t.MaxIdleUS = max(r.t.MaxIdleUS, s.TxnIdleBeforeUS)
		if s.TRespLast != 0 {
			r.t.End = max(r.t.End, s.TRespLast)
		}
		if r.t.LeadDigest == "" && r.wireN > 1 && s.TxnEnd == event.TxnEndNone {
			r.t.LeadDigest, r.t.LeadSQL = s.Digest, s.SQL
		}
		if r.t.Tags == nil && len(s.Tags) > 0 {
			r.t.Tags = s.Tags
		}
		if s.TxnEnd != event.TxnEndNone {
			l.rel.add(release{
				conn: c.conn, connID: c.connID, user: c.user, txn: true,
				start: s.TxnStartUS, reqFirst: s.TReqFirst, reqLast: s.TReqLast, respFirst: respFirst(s),
				idleBefore: s.TxnIdleBeforeUS, digest: c.lastDigest, sql: c.lastSQL,
				texts: c.lastTexts, rec: c.open,
			}, l.opts.KeepUS)
			done = l.endOpen(c, s.TxnEnd, s.TRespLast, done)
		} else {
			c.lastDigest, c.lastSQL = s.Digest, s.SQL
			if len(c.lastTexts) < maxTxnTexts {
				c.lastTexts = append(c.lastTexts, s.DigestText, s.SQL)
			}
			if s.TRespLast != 0 {
				c.lastResp = s.TRespLast
			}
		}
	}
	if ddl && s.TRespLast != 0 {
		// A DDL statement holds its table's metadata lock until it ends:
		// statements queued behind it are released then.
		l.rel.add(release{
			conn: c.conn, connID: c.connID, user: c.user, ddl: true,
			start: s.TReqFirst, reqFirst: s.TReqFirst, reqLast: s.TReqLast, respFirst: respFirst(s),
			digest: s.Digest, sql: s.SQL, texts: []string{s.DigestText, s.SQL},
		}, l.opts.KeepUS)
	}
	hs, done := l.letGo(false, done)
	done = l.due(done)
	l.count()
	l.mu.Unlock()
	l.emit(done)
	runHeld(hs)
}

func respFirst(s *event.Statement) int64 {
	if s.TRespFirst != 0 {
		return s.TRespFirst
	}
	return s.TRespLast
}

// maxTxnTexts bounds the texts remembered of one open transaction.
const maxTxnTexts = 32

func (l *Ledger) begin(c *connState, s *event.Statement) *record {
	c.lastDigest, c.lastSQL, c.lastResp, c.lastTexts = "", "", 0, nil
	start := s.TxnStartUS
	if start == 0 {
		start = s.TReqFirst
	}
	return &record{t: event.Transaction{
		Conn: c.conn, ConnID: c.connID, User: c.user, DB: s.DB, Seq: s.TxnSeq,
		Start: start, FirstDigest: s.Digest, FirstSQL: s.SQL,
	}}
}

// endOpen ends c's open transaction; it is written once its statements
// all finished and the grace passed (due).
func (l *Ledger) endOpen(c *connState, end event.TxnEnd, at int64, done []*event.Transaction) []*event.Transaction {
	r := c.open
	c.open = nil
	c.lastDigest, c.lastSQL, c.lastTexts = "", "", nil
	r.ended = true
	r.t.EndKind = end.String()
	if at > r.t.End {
		r.t.End = at
	}
	r.t.OpenUS = max(0, r.t.End-r.t.Start)
	l.closing[txnKey{c.conn, r.t.Seq}] = r
	l.ended = append(l.ended, r)
	return done
}

// due writes the ended transactions whose time has come, oldest first.
func (l *Ledger) due(done []*event.Transaction) []*event.Transaction {
	n := 0
	for _, r := range l.ended {
		if r.emitted {
			n++
			continue
		}
		old := r.t.End < l.newest.Load()-l.opts.MaxHoldUS || len(l.ended)-n > l.opts.MaxConns
		if !old && (r.doneN < r.wireN || r.t.End > l.newest.Load()-l.opts.GraceUS) {
			break
		}
		delete(l.closing, txnKey{r.t.Conn, r.t.Seq})
		done = r.out(done)
		n++
	}
	if n > 0 {
		m := copy(l.ended, l.ended[n:])
		clear(l.ended[m:])
		l.ended = l.ended[:m]
	}
	return done
}

// Tick tells the ledger the time (Unix µs) when the wire is quiet, so
// that the transactions due are written.
func (l *Ledger) Tick(nowUS int64) {
	l.advance(nowUS)
	l.mu.Lock()
	hs, done := l.letGo(false, nil)
	done = l.due(done)
	l.count()
	l.mu.Unlock()
	l.emit(done)
	runHeld(hs)
}

// out hands r on: from now on nothing changes it.
func (r *record) out(done []*event.Transaction) []*event.Transaction {
	r.emitted = true
	return append(done, &r.t)
}

func (l *Ledger) emit(done []*event.Transaction) {
	if l.opts.Emit == nil {
		return
	}
	for _, t := range done {
		l.opts.Emit(t)
	}
}

// Finished takes a statement once its server half is known (joined or
// not): its lock wait is attributed (its LockWait set when found), its
// transaction's record completed, and then is called with it. A
// statement that may have waited for a lock and found no release yet is
// held until the wire has gone HoldUS past its end (the release's
// response can follow the waiter's: a COMMIT's answer waits for the log,
// an ALTER's for its own end), then tried again; then is called when it
// is let go, from the goroutine that feeds the ledger then (Wire, Tick,
// Close). Nothing is held when hold is false.
func (l *Ledger) Finished(s *event.Statement, hold bool, then func(*event.Statement)) {
	if s.TxnSeq == 0 && s.LockWait == nil && !l.mightWait(s) && !isDDL(s.DigestText, s.SQL) {
		// Outside a transaction, too short (or of a kind) to have waited,
		// no DDL whose connection a waiter may need named: nothing to do
		// (most statements of most applications), without the lock.
		then(s)
		return
	}
	l.mu.Lock()
	if s.ConnID != 0 && s.Conn != "" {
		l.learn(s.Conn, s.ConnID) // the join names connections whose handshake the capture missed
	}
	if s.LockWait == nil {
		l.attribute(s, !hold)
	}
	if hold && s.LockWait == nil && l.mightWait(s) {
		_, to := execSpan(s)
		l.held = append(l.held, heldStmt{s: s, then: then, to: to})
		l.count()
		l.mu.Unlock()
		return
	}
	done := l.finish(s, nil)
	l.count()
	l.mu.Unlock()
	l.emit(done)
	then(s)
}

// heldStmt is a statement held for a release the wire may yet show.
type heldStmt struct {
	s    *event.Statement
	then func(*event.Statement)
	// to is the end of its server time: it is held HoldUS past it for a
	// release to show, CounterHoldUS at most for the server's counter.
	to int64
}

// mightWait: s is long and of a kind that waits for locks.
func (l *Ledger) mightWait(s *event.Statement) bool {
	from, to := execSpan(s)
	return to-from >= l.opts.MinWaitUS && mayWait(s.DigestText, s.SQL)
}

// finish completes s's transaction record.
func (l *Ledger) finish(s *event.Statement, done []*event.Transaction) []*event.Transaction {
	if s.TxnSeq != 0 && s.Conn != "" && s.Cmd != "COM_QUIT" {
		done = l.account(s, done)
	}
	return done
}

// letGo tries the held statements whose time has come (all when every)
// again and returns them, in the order they were held.
func (l *Ledger) letGo(every bool, done []*event.Transaction) ([]heldStmt, []*event.Transaction) {
	if len(l.held) == 0 {
		return nil, done
	}
	var out []heldStmt
	kept := l.held[:0]
	now := l.newest.Load()
	for _, h := range l.held {
		final := every || now >= h.to+l.opts.CounterHoldUS
		undecided := l.attribute(h.s, final)
		switch {
		case h.s.LockWait != nil || final:
		case undecided: // a release found, the server's counter not read past its end yet
			kept = append(kept, h)
			continue
		case now < h.to+l.opts.HoldUS: // no release shown yet
			kept = append(kept, h)
			continue
		}
		done = l.finish(h.s, done)
		out = append(out, h)
	}
	clear(l.held[len(kept):])
	l.held = kept
	return out, done
}

func runHeld(hs []heldStmt) {
	for _, h := range hs {
		h.then(h.s)
	}
}

// account adds s's server half to its transaction.
func (l *Ledger) account(s *event.Statement, done []*event.Transaction) []*event.Transaction {
	var r *record
	if c := l.conns[s.Conn]; c != nil && c.open != nil && c.open.t.Seq == s.TxnSeq {
		r = c.open
	} else if r = l.closing[txnKey{s.Conn, s.TxnSeq}]; r == nil {
		return done
	}
	r.doneN++
	if s.Joined {
		r.t.Joined++
		r.t.ServerUS += s.ExecUS + s.SendStallUS
	}
	r.t.LockWaitUS += s.LockWaitTime()
	if r.t.ConnID == 0 {
		r.t.ConnID = s.ConnID
	}
	return done
}

// Close emits every transaction still held: those still open as open,
// those ended whose statements did not all finish as they are.
func (l *Ledger) Close() {
	l.mu.Lock()
	hs, done := l.letGo(true, nil)
	l.count()
	l.mu.Unlock()
	runHeld(hs)
	l.mu.Lock()
	for _, r := range l.ended {
		if !r.emitted {
			done = r.out(done)
		}
	}
	clear(l.closing)
	l.ended = nil
	for _, c := range l.conns {
		if c.open != nil {
			r := c.open
			c.open = nil
			r.t.EndKind = event.TxnEndOpen.String()
			r.t.OpenUS = max(0, r.t.End-r.t.Start)
			done = r.out(done)
		}
	}
	l.count()
	l.mu.Unlock()
	l.emit(done)
}

// advance moves the wire's clock to us when later.
func (l *Ledger) advance(us int64) {
	for {
		cur := l.newest.Load()
		if us <= cur || l.newest.CompareAndSwap(cur, us) {
			return
		}
	}
}

// count keeps waiting in step with what is held; called with the lock.
func (l *Ledger) count() { l.waiting.Store(int64(len(l.held) + len(l.ended))) }
