package watch

import "github.com/gapscope/gapscope/internal/event"

// stmtRing keeps the last size statements for the diagnosis. It grows in
// fixed chunks and never copies what it holds: a slice grown by append
// moved every statement about twice while watch started, a visible share
// of its CPU then (docs/performance.md, "Copies in watch's first seconds").
// Each statement is held as a
// windowStmt, the fields the diagnosis and the labs read, in place in
// its chunk: the statement itself, and what only the join and the sinks
// needed of it, are left to the collector.
type stmtRing struct {
	chunks [][]windowStmt
	size   int
	added  int64
}

// windowStmt is what the window keeps of a statement: the fields the
// diagnosis rules read, the decomposition, and why a statement was left
// unjoined (its notes and reason) or its rows unknown (RowsBy). It leaves out what only the join, the
// sinks and the events file use (the request's and response's other
// ends, the transit time, the zero-window spans, the server's lock time
// and rows examined, the fingerprint, the text hash, the tags and the
// parts of a multi-statement request); a statement taken back from the
// window (last) has them zero. The strings, the error and the pool group
// are the statement's own, shared.
type windowStmt struct {
	conn, user, db, cmd, sql, digest, digestText, joinSource string

	connID     uint64
	tReqFirst  int64
	tRespLast  int64
	parts      event.Parts
	serverUS   int64
	rows       int64
	reqBytes   int64
	respBytes  int64
	zeroWindow int64
	err        *event.Error
	notes      []string
	poolGroup  *int
	// txn and lock place it in its transaction and name its lock wait
	// (the diagnosis's LOCK_WAIT and the labs read them); the lock wait
	// is never changed once set, so it is shared.
	txn  event.TxnInfo
	lock *event.LockWait

	retransmits int32
	joined      bool
	outlier     bool
	why         event.Reason
	rowsBy      event.RowsSource
	known       event.Counters
}

func toWindow(s *event.Statement) windowStmt {
	return windowStmt{
		conn: s.Conn, user: s.User, db: s.DB, cmd: s.Cmd, sql: s.SQL, digest: s.Digest, digestText: s.DigestText,
		joinSource: s.JoinSource, connID: s.ConnID, tReqFirst: s.TReqFirst, tRespLast: s.TRespLast,
		parts: s.Parts, serverUS: s.ServerUS, rows: s.Rows, reqBytes: s.ReqBytes, respBytes: s.RespBytes,
		zeroWindow: s.ZeroWindowUS, err: s.Error, notes: s.Notes, poolGroup: s.PoolGroup, txn: s.TxnInfo, lock: s.LockWait,
		retransmits: int32(min(s.Retransmits, 1<<31-1)), joined: s.Joined, outlier: s.Outlier, why: s.Why, rowsBy: s.RowsBy, known: s.Known,
	}
}

func (w *windowStmt) statement() event.Statement {
	return event.Statement{
		Conn: w.conn, User: w.user, DB: w.db, Cmd: w.cmd, SQL: w.sql, Digest: w.digest, DigestText: w.digestText,
		JoinSource: w.joinSource, ConnID: w.connID, TReqFirst: w.tReqFirst, TRespLast: w.tRespLast,
		Parts: w.parts, ServerUS: w.serverUS, Rows: w.rows, ReqBytes: w.reqBytes, RespBytes: w.respBytes,
		ZeroWindowUS: w.zeroWindow, Error: w.err, Notes: w.notes, PoolGroup: w.poolGroup, TxnInfo: w.txn, LockWait: w.lock,
		Retransmits: int(w.retransmits), Joined: w.joined, Outlier: w.outlier, Why: w.why, RowsBy: w.rowsBy, Known: w.known,
	}
}

// ringChunk is how many statements one chunk holds.
const ringChunk = 1024

func newStmtRing(size int) *stmtRing { return &stmtRing{size: max(size, 1)} }

func (r *stmtRing) add(s *event.Statement) {
	i := int(r.added % int64(r.size))
	c := i / ringChunk
	if c == len(r.chunks) { // slots fill in order before they wrap
		r.chunks = append(r.chunks, make([]windowStmt, min(ringChunk, r.size-c*ringChunk)))
	}
	r.chunks[c][i%ringChunk] = toWindow(s)
	r.added++
}

// len is how many statements the ring holds.
func (r *stmtRing) len() int { return int(min(r.added, int64(r.size))) }

// at returns the j-th oldest statement held.
func (r *stmtRing) at(j int) *windowStmt {
	first := 0
	if r.added > int64(r.size) {
		first = int(r.added % int64(r.size))
	}
	i := (first + j) % r.size
	return &r.chunks[i/ringChunk][i%ringChunk]
}

// last returns the newest n statements, oldest first.
func (r *stmtRing) last(n int) []event.Statement {
	held := r.len()
	n = min(n, held)
	out := make([]event.Statement, 0, n)
	for j := held - n; j < held; j++ {
		out = append(out, r.at(j).statement())
	}
	return out
}
