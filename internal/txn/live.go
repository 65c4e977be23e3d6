package txn

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/event"
)

// Seen is one wait the server's lock tables showed while it lasted (watch
// reads them when a statement has run long): the waiting and blocking
// connections by their server ids, and the root of the chain.
type Seen struct {
	WaiterID, BlockerID uint64
	// RootID is the head of the chain (BlockerID when the blocker does
	// not wait itself; 0 when unknown).
	RootID uint64
	Kind   string // event.Lock*
	// Source names the tables read.
	Source string
	// BlockerIdle / RootIdle: the server had no statement running for
	// them (processlist Sleep, or INNODB_TRX with no query).
	BlockerIdle, RootIdle bool
	// BlockerQuery is the statement the blocker was running, when any
	// (the server's text: used only when the wire saw none).
	BlockerQuery string
}

// liveWait is a Seen kept until its waiter finishes.
type liveWait struct {
	Seen
	seenUS int64
}

// Observe records the waits read at atUS (Unix µs). A waiter seen again
// keeps its first sighting.
func (l *Ledger) Observe(atUS int64, seen []Seen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, w := range seen {
		if w.WaiterID == 0 {
			continue
		}
		if old, ok := l.live[w.WaiterID]; ok && old.seenUS >= atUS-60_000_000 && (old.BlockerID == w.BlockerID || w.BlockerID == 0) {
			continue
		}
		l.live[w.WaiterID] = liveWait{Seen: w, seenUS: atUS}
	}
	if len(l.live) > l.opts.MaxConns { // waiters never finished (killed): forget the oldest half
		for id, w := range l.live {
			if w.seenUS < atUS-60_000_000 {
				delete(l.live, id)
			}
		}
	}
}

// attributeLive fills s's lock wait from a wait the lock tables showed.
func (l *Ledger) attributeLive(s *event.Statement, w liveWait, from, to int64) {
	b := l.liveBlocker(w.BlockerID, w.BlockerIdle, w.BlockerQuery, w.Kind, w.seenUS)
	b.Source, b.Confidence = w.Source, event.ConfidenceCertain
	b.Evidence = fmt.Sprintf("read from %s while it waited", w.Source)
	end := to
	if r := l.releaseOf(w.BlockerID, w.seenUS, to); r != nil {
		end = min(to, r.respFirst)
		b.HeldUS = max(b.HeldUS, r.respFirst-r.start)
		r.blocked()
	}
	if w.RootID != 0 && w.RootID != w.BlockerID {
		root := l.liveBlocker(w.RootID, w.RootIdle, "", w.Kind, w.seenUS)
		root.Source, root.Confidence = w.Source, event.ConfidenceCertain
		if r := l.releaseOf(w.RootID, w.seenUS, to); r != nil {
			root.HeldUS = max(root.HeldUS, r.respFirst-r.start)
			r.blocked()
		}
		b.Root = root
	}
	s.LockWait = &event.LockWait{LockWaitUS: clamp(end-from, 0, to-from), BlockedBy: b}
}

// liveBlocker describes the connection with server id id as the wire saw
// it at atUS.
func (l *Ledger) liveBlocker(id uint64, idle bool, query, kind string, atUS int64) *event.Blocker {
	b := &event.Blocker{ConnID: id, Kind: kind, State: event.BlockerRunning}
	c := l.byID[id]
	if idle {
		b.State = event.BlockerIdleInTxn
	}
	if c == nil {
		b.SQL = query
		return b
	}
	b.Conn, b.User = c.conn, c.user
	if c.open != nil {
		b.HeldUS = max(0, atUS-c.open.t.Start)
		b.Digest, b.SQL = c.lastDigest, c.lastSQL
		if idle && c.lastResp != 0 {
			b.IdleUS = max(0, atUS-c.lastResp)
		}
	}
	// The transaction has usually ended by the time the waiter finished:
	// the release that ended it names what it held, and how long its
	// application sat idle before letting it go.
	if r := l.releaseOf(id, atUS, atUS+l.opts.KeepUS); r != nil {
		if b.Digest == "" && b.SQL == "" {
			b.Digest, b.SQL = r.digest, r.sql
		}
		if idle && r.txn {
			b.IdleUS = max(b.IdleUS, r.idleBefore)
		}
	}
	if b.SQL == "" {
		b.SQL = query
	}
	return b
}

// releaseOf is connection id's first release after atUS, up to toUS.
func (l *Ledger) releaseOf(id uint64, atUS, toUS int64) *release {
	c := l.byID[id]
	for i, list := 0, l.rel.live(); i < len(list); i++ {
		r := &list[i]
		if r.respFirst < atUS || r.reqLast > toUS+l.opts.SlackUS {
			continue
		}
		if r.connID == id || (c != nil && r.conn == c.conn) {
			return r
		}
	}
	return nil
}
