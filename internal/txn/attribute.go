package txn

import (
	"fmt"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// release is an instant at which a connection let go of locks others may
// have waited for: the end of a transaction (its COMMIT, ROLLBACK or
// implicit end) or of a DDL statement (its metadata lock).
type release struct {
	conn   string
	connID uint64
	user   string
	txn    bool // a transaction's end (row and metadata locks)
	ddl    bool // a DDL statement's end (its metadata lock)
	// start is when the locks could first have been taken: the
	// transaction's start, the DDL's request.
	start int64
	// The releasing statement's request and response times: the locks go
	// between its request's arrival and its response.
	reqFirst, reqLast, respFirst int64
	// idleBefore is how long the application sat idle before sending the
	// releasing statement (a COMMIT after slow application work).
	idleBefore int64
	// digest and sql are the statement that held the locks: the
	// transaction's last statement before its end, or the DDL itself.
	digest, sql string
	// texts are the statements' texts behind the locks; tables, read from
	// them when a waiter first needs them (tablesRead), the tables named.
	texts      []string
	tables     []string
	tablesRead bool
	// rec is the transaction it ended (nil for a DDL's end), counted as
	// blocking each waiter attributed to it until it is written.
	rec *record
}

// blocked counts a waiter against r's transaction, if not yet written.
func (r *release) blocked() {
	if r != nil && r.rec != nil && !r.rec.emitted {
		r.rec.t.Blocked++
	}
}

// tablesNamed is the tables r's statements named.
func (r *release) tablesNamed() []string {
	if !r.tablesRead {
		r.tablesRead = true
		for _, t := range r.texts {
			r.tables = append(r.tables, tablesOf(t)...)
		}
	}
	return r.tables
}

// releases is a bounded list in arrival order.
type releases struct {
	list []release
	head int // list[head:] are live
	max  int
}

func (r *releases) add(x release, keepUS int64) {
	// Drop what is older than keepUS behind the newest, and beyond max.
	for r.head < len(r.list) && (len(r.list)-r.head >= r.max || r.list[r.head].respFirst < x.respFirst-keepUS) {
		r.list[r.head] = release{}
		r.head++
	}
	if r.head > len(r.list)/2 && r.head > 64 {
		n := copy(r.list, r.list[r.head:])
		clear(r.list[n:])
		r.list, r.head = r.list[:n], 0
	}
	r.list = append(r.list, x)
}

func (r *releases) live() []release { return r.list[r.head:] }

// execSpan is the statement's server time at the capture point: from the
// server's start to its end when joined, else (wire only) from the
// request's last byte to the response's first.
func execSpan(s *event.Statement) (from, to int64) {
	if s.Joined {
		from = s.TReqLast + s.QueueUS
		return from, from + s.ExecUS + s.SendStallUS
	}
	if s.TRespFirst == 0 {
		return 0, 0
	}
	return s.TReqLast, s.TRespFirst
}

// attribute looks for what s waited for: a wait the server's lock tables
// showed (Observe), else a release on the wire that its end followed.
func (l *Ledger) attribute(s *event.Statement, final bool) (undecided bool) {
	from, to := execSpan(s)
	if to-from < l.opts.MinWaitUS || s.Conn == "" && s.ConnID == 0 || !mayWait(s.DigestText, s.SQL) {
		return false
	}
	var live *liveWait
	if w, ok := l.live[s.ConnID]; ok && s.ConnID != 0 && w.seenUS >= from && w.seenUS <= to+l.opts.SlackUS {
		if w.BlockerID != 0 {
			delete(l.live, s.ConnID)
			l.attributeLive(s, w, from, to)
			return false
		}
		live = &w // the server saw it wait, not for whom: the wire may tell
	}
	// The release is matched on the wire's clock, the waiter's own wire
	// times against the release's (a joined statement's server times
	// carry the clock calibration's error); the wait is measured on the
	// server's span.
	if s.TRespFirst == 0 && s.TRespLast == 0 {
		return false
	}
	r, rivals := l.wireRelease(waiter{s.Conn, s.DigestText, s.SQL, s.TReqLast, respFirst(s) - 2*s.TransitUS})
	if r == nil {
		if live != nil && final {
			delete(l.live, s.ConnID)
			l.attributeLive(s, *live, from, to) // a wait the server showed, its blocker unknown
		}
		return live != nil && !final
	}
	kind := kindOf(s, r)
	confidence := event.ConfidenceLow
	evidence := fmt.Sprintf("its answer left %s after %s's %s reached the server",
		usText(respFirst(s)-2*s.TransitUS-r.releasedFrom()), r.conn, releaseName(r))
	switch {
	case live != nil:
		delete(l.live, s.ConnID)
		kind, confidence = live.Kind, event.ConfidenceHigh
		evidence += fmt.Sprintf("; %s showed it waiting for a %s lock", live.Source, live.Kind)
	case kind == event.LockRow && l.opts.RowLockWaits != nil:
		waits, known := l.opts.RowLockWaits(from, to)
		switch {
		case !known && !final:
			if l.opts.WantCounter != nil {
				l.opts.WantCounter()
			}
			return true // judged once the server's counter has been read past its end
		case !known:
			return false // never attribute what the server's counter could have ruled out
		case waits == 0:
			return false // the server counted no row-lock wait while it ran
		case rivals == 0:
			confidence = event.ConfidenceHigh
			evidence += fmt.Sprintf("; the server counted %d row-lock wait(s) (Innodb_row_lock_waits) meanwhile", waits)
		}
	}
	if rivals > 0 {
		evidence += fmt.Sprintf("; %d other connection(s) released locks as close to its end", rivals)
	}
	b := l.blockerOf(r, kind, from, to)
	b.Source, b.Confidence, b.Evidence = event.LockSourceWire, confidence, evidence
	if r.ddl {
		// The DDL may itself have waited for a transaction: the root.
		if root, _ := l.wireRelease(waiter{conn: r.conn, sql: r.sql, from: r.reqLast, to: r.respFirst}); root != nil {
			root.blocked()
			rb := l.blockerOf(root, event.LockMetadata, r.reqLast, r.respFirst)
			rb.Source, rb.Confidence = event.LockSourceWire, event.ConfidenceLow
			b.Root = rb
		}
	}
	wait := min(r.respFirst, to) - from
	s.LockWait = &event.LockWait{LockWaitUS: clamp(wait, 0, to-from), BlockedBy: b}
	r.blocked()
	return false
}

// waiter is a statement looked at for a lock wait: its connection, text
// and server time [from, to).
type waiter struct {
	conn, digestText, sql string
	from, to              int64
}

// wireRelease finds the release w's server end followed: another
// connection's, whose locks could have been taken before w started, that
// let them go at least MinWaitUS after w started and before w ended, with
// w's end following within the slack (a DDL waiter gets more: it does its
// own work once it has the lock). The closest wins; rivals counts the
// others that also fit. A plain read takes no row locks: only a DDL's end
// can have held it.
func (l *Ledger) wireRelease(w waiter) (*release, int) {
	if isDDL(w.digestText, w.sql) {
		return l.ddlRelease(w), 0
	}
	tables := tablesOfStmt(w.digestText, w.sql)
	plainRead := isPlainRead(w.digestText, w.sql)
	// A woken waiter runs once the host gives it a core: on a busy host
	// that takes longer than SlackUS, so the slack grows with the wait
	// (a twentieth of it).
	slack := max(l.opts.SlackUS, (w.to-w.from)/20)
	if isDDL(w.digestText, w.sql) {
		slack = max(slack, (w.to-w.from)/4)
	}
	var best *release
	var bestGap int64
	rivals := 0
	list := l.rel.live()
	for i := len(list) - 1; i >= 0; i-- {
		r := &list[i]
		if r.respFirst < w.from {
			break // older releases cannot have woken it (the list is nearly in time order)
		}
		// A DDL's end wakes every statement queued on its table at once,
		// which then run on a host that may be busy: its waiters get a
		// quarter of their wait. DDL is rare enough that this costs no
		// false attribution a transaction's end could.
		sl := slack
		if r.ddl {
			sl = max(sl, (w.to-w.from)/4)
		}
		if r.conn == w.conn || r.start >= w.from || r.reqLast > w.to || w.to > r.respFirst+sl {
			continue
		}
		if plainRead && !r.ddl {
			continue
		}
		if r.releasedFrom()-w.from < l.opts.MinWaitUS {
			continue // released too soon after it started to have held it long
		}
		if rt := r.tablesNamed(); len(tables) > 0 && len(rt) > 0 && !overlap(tables, rt) {
			continue
		}
		gap := abs(w.to - r.respFirst)
		if best == nil || gap < bestGap {
			if best != nil {
				rivals++
			}
			best, bestGap = r, gap
		} else {
			rivals++
		}
	}
	return best, rivals
}

// ddlRelease finds what a DDL statement waited for: its exclusive
// metadata lock waits for every transaction holding its table to end, and
// then the DDL does its own work, as long as that takes, so its end says
// nothing of when it got the lock. The last release, during the DDL, of a
// transaction (or DDL) on another connection that began before it and
// named its table, ended its wait.
func (l *Ledger) ddlRelease(w waiter) *release {
	tables := tablesOfStmt(w.digestText, w.sql)
	if len(tables) == 0 {
		return nil
	}
	var best *release
	list := l.rel.live()
	for i := len(list) - 1; i >= 0; i-- {
		r := &list[i]
		if r.respFirst < w.from {
			break
		}
		at := r.releasedFrom()
		if r.conn == w.conn || r.start >= w.from || at > w.to || at-w.from < l.opts.MinWaitUS {
			continue
		}
		if rt := r.tablesNamed(); len(rt) == 0 || !overlap(tables, rt) {
			continue
		}
		if best == nil || at > best.releasedFrom() {
			best = r
		}
	}
	return best
}

// releasedFrom is the earliest the locks can have gone: a transaction's
// as its ending request arrived, a DDL's as it ended.
func (r *release) releasedFrom() int64 {
	if r.ddl {
		return r.respFirst
	}
	return r.reqLast
}

// isPlainRead: a SELECT without FOR UPDATE, FOR SHARE or LOCK IN SHARE
// MODE, which InnoDB runs as a consistent read taking no row locks.
func isPlainRead(digestText, sql string) bool {
	t := digestText
	if t == "" {
		t = sql
	}
	if sqltext.FirstKeyword(t) != "select" {
		return false
	}
	t = strings.ToLower(t)
	return !strings.Contains(t, "for update") && !strings.Contains(t, "for share") && !strings.Contains(t, "lock in share mode")
}

// kindOf guesses the lock's kind from the waiter and the release: DDL on
// either side is a metadata lock; otherwise a row lock.
func kindOf(s *event.Statement, r *release) string {
	if r.ddl || isDDL(s.DigestText, s.SQL) {
		return event.LockMetadata
	}
	return event.LockRow
}

// blockerOf describes the connection behind r as the wire saw it while
// the waiter waited [from, to).
func (l *Ledger) blockerOf(r *release, kind string, from, to int64) *event.Blocker {
	b := &event.Blocker{
		Conn: r.conn, ConnID: r.connID, User: r.user, Kind: kind,
		Digest: r.digest, SQL: r.sql, HeldUS: max(0, r.respFirst-r.start),
	}
	if c := l.conns[r.conn]; c != nil {
		if b.ConnID == 0 {
			b.ConnID = c.connID
		}
		if b.User == "" {
			b.User = c.user
		}
	}
	// Idle in its transaction: the application sent the releasing
	// statement after sitting idle through most of the wait.
	idleFrom := r.reqFirst - r.idleBefore
	if r.txn && r.idleBefore > 0 && overlapLen(idleFrom, r.reqFirst, from, to)*2 >= to-from {
		b.State, b.IdleUS = event.BlockerIdleInTxn, r.idleBefore
	} else {
		b.State = event.BlockerRunning
	}
	return b
}

// mayWait: the statement is one that takes locks and so may wait for
// them. A COMMIT, a ROLLBACK, a SET or a SHOW holds or takes none another
// transaction can hold against it (a COMMIT's time is the log's flush).
func mayWait(digestText, sql string) bool {
	t := digestText
	if t == "" {
		t = sql
	}
	switch sqltext.FirstKeyword(t) {
	case "select", "with", "update", "delete", "insert", "replace", "load", "call", "lock", "do",
		"alter", "create", "drop", "truncate", "rename", "optimize", "repair", "analyze":
		return true
	}
	return false
}

// isDDL: the text begins with a statement that takes an exclusive
// metadata lock.
func isDDL(digestText, sql string) bool {
	t := digestText
	if t == "" {
		t = sql
	}
	w := sqltext.FirstKeyword(t)
	switch w {
	case "alter", "create", "drop", "truncate", "rename", "optimize", "repair", "analyze":
		return true
	}
	return false
}

// tablesOf lists the tables a statement's text names after FROM, JOIN,
// UPDATE, INTO and TABLE (schema and quotes dropped, lower case). It is a
// hint, not a parser: it narrows candidates, it never makes one.
func tablesOf(text string) []string {
	if text == "" {
		return nil
	}
	var out []string
	words := strings.Fields(strings.ToLower(text))
	for i := 0; i+1 < len(words); i++ {
		switch words[i] {
		case "from", "join", "update", "into", "table":
			name := words[i+1]
			// The server's digest text spaces a qualified name: `f` . `m`.
			if i+3 < len(words) && words[i+2] == "." {
				name = words[i+3]
			}
			name = strings.Trim(name, "`\"(),;")
			if j := strings.LastIndexByte(name, '.'); j >= 0 {
				name = strings.Trim(name[j+1:], "`\"")
			}
			if name != "" && name != "?" && name != "if" && name != "select" {
				out = append(out, name)
			}
		}
	}
	return out
}

// tablesOfStmt is the tables of a statement's text and its digest text.
func tablesOfStmt(digestText, sql string) []string {
	return append(tablesOf(sql), tablesOf(digestText)...)
}

func overlap(a, b []string) bool {
	for _, x := range a {
		for _, y := range b {
			if x == y {
				return true
			}
		}
	}
	return false
}

func overlapLen(a0, a1, b0, b1 int64) int64 { return max(0, min(a1, b1)-max(a0, b0)) }

func clamp(v, lo, hi int64) int64 { return max(lo, min(v, hi)) }

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

func releaseName(r *release) string {
	if r.ddl {
		return "DDL statement's end"
	}
	return "transaction end"
}

func usText(us int64) string {
	switch {
	case us < 1000:
		return fmt.Sprintf("%d µs", us)
	case us < 1_000_000:
		return fmt.Sprintf("%.1f ms", float64(us)/1000)
	}
	return fmt.Sprintf("%.2f s", float64(us)/1e6)
}
