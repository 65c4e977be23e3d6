package watch

import (
	"context"
	"database/sql"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
)

// historyReader reads the server's statement history (history_long, or
// the table the consumers allow) into the joiner, or into the tally as
// server statements when the run has no wire. Its pace: every PollInterval
// on a busy server, halving while the ring fills between reads
// (nextInterval), sooner when the wire counts the ring's share filled
// (ringpace.go), every idleEvery on an idle one. It reads the threads of
// new connections while they live (learnEvery), and owns the link to the
// server: a lost server is retried with back-off and as soon as its port
// answers, a restarted one gets a new clock, consumers and cursor
// (link.go). A run without a statement cursor has no historyReader.
type historyReader struct {
	historyDeps
	// connsSeen is the wire stage's count of connections opened at the
	// last look (a change: threads to learn).
	connsSeen int64
	// answered is set by the port probe when a lost server's port
	// accepts a connection again.
	answered *atomic.Bool

	text *join.ServerText // the server-only statements' text

	every      time.Duration // the interval now (nextInterval)
	tickAt     time.Time     // when the regular pace is next due
	wasActive  bool          // the server was active at the last look
	lastPollAt int64         // when history_long was last read (Unix µs)
	ring       ringPace
	link       serverLink
}

// historyDeps is what a historyReader reads with and hands rows to:
// addr is the server's, for the port probe of an outage; the clock is
// re-calibrated on a reconnection; the tally takes the rows without a
// wire; the cursor reads the history incrementally, a restart replacing
// it (cursorRef.set), and the targets reader asks it which rows it
// returned.
type historyDeps struct {
	db              *sql.DB
	addr            string
	own             *ownAddrs
	clock           *collect.Recalibrator
	joiner          *join.Joiner
	tally           *tally
	sample          *joinSample
	side            *serverSide
	notes           *noteList
	losses          *lossLog
	known           *known
	conns           *connReader
	consumers       *consumerSettings
	cursor          *cursorRef
	wire            *wireStage
	wake            chan struct{}
	pollEvery       time.Duration
	minPollEvery    time.Duration
	enableConsumers bool
	noWire          bool
	keepLiterals    bool
}

// newHistoryReader makes the history reader, its ring's pace armed when
// it reads the server-wide ring beside a wire.
func newHistoryReader(d historyDeps) *historyReader {
	h := &historyReader{historyDeps: d, answered: &atomic.Bool{},
		text: join.NewServerText(d.keepLiterals), every: d.pollEvery, tickAt: time.Now().Add(d.pollEvery),
		wasActive: true, link: serverLink{wake: d.wake}}
	if d.noWire {
		d.cursor.get().WholeText() // opened before the capture said whether there is a wire
	}
	h.ring = newRingPace(d.wire, d.cursor.get(), d.known.info, d.noWire)
	h.noteRingRead()
	return h
}

func (h *historyReader) next(now time.Time) (time.Duration, bool) {
	wait := max(h.tickAt.Sub(now), 0)
	if now.Before(h.known.unseenUntil) {
		wait = min(wait, max(h.known.learn.at.Add(unseenLearnEvery).Sub(now), 0))
	}
	if h.known.learn.pending {
		wait = min(wait, max(h.known.learn.at.Add(learnEvery).Sub(now), 0))
	}
	return wait, true
}

func (h *historyReader) read(ctx context.Context, now time.Time) {
	k := h.known
	if n := h.wire.connsSeen.Load(); n != h.connsSeen { // the wire saw connections open
		h.connsSeen = n
		k.act.mark(now)
		k.learn.want()
	}
	ring := h.ringDue(now) // the ring would turn over before the regular pace
	if ring {
		k.act.mark(now) // the wire's statements filled it: not idle
	}
	active := k.act.active(now)
	woke := active && !h.wasActive // the first sign of activity: read at once
	h.wasActive = active
	answered := h.answered.Swap(false)
	if answered {
		h.link.retryNow()
	}
	if ring || woke || answered || !now.Before(h.tickAt) {
		if active || nowUS()-h.lastPollAt >= idleEvery.Microseconds() {
			h.readOnce(ctx)
		}
		h.tickAt = time.Now().Add(h.every)
	}
	h.learnThreads(ctx)
	h.rearmRing() // watch's own statements fill the ring too
}

// final reads what the server recorded of the last statements, after it
// had a regular interval to record them.
func (h *historyReader) final(ctx context.Context) {
	time.Sleep(h.pollEvery)
	h.pollStatements(ctx)
}

// readOnce reads history_long once: rows are a sign of activity.
func (h *historyReader) readOnce(ctx context.Context) {
	rows, lost := h.pollStatements(ctx)
	if rows > 0 || lost > 0 {
		h.known.act.mark(time.Now())
	}
	h.every = h.nextInterval(h.every, rows, lost)
}

// learnThreads reads the threads of the connections the wire saw open,
// at most every learnEvery, and every unseenLearnEvery while the server
// opens connections the wire does not see.
func (h *historyReader) learnThreads(ctx context.Context) {
	l := &h.known.learn
	unseen := time.Now().Before(h.known.unseenUntil) && time.Since(l.at) >= unseenLearnEvery
	if !unseen && (!l.pending || time.Since(l.at) < learnEvery) {
		return
	}
	l.pending, l.at = false, time.Now()
	h.side.serverM.Lock()
	h.side.server.ThreadReads++
	h.side.serverM.Unlock()
	c := h.cursor.get()
	if c.LearnThreads(ctx, h.db) == nil { // a failure: the next history read looks them up itself
		h.joiner.ObserveThread(c.NewestThread())
	}
}

// nextInterval adapts polling to the statement rate: history_long is a
// ring (1,000 rows by default on MariaDB), so a busy server overwrites rows
// before a slow poll reads them (docs/performance.md). A poll that lost
// rows or came back more than half full halves the interval; a quiet one
// lets it grow back to the configured value.
func (h *historyReader) nextInterval(every time.Duration, rows int, lost int64) time.Duration {
	ring := h.known.info.HistoryLongSize
	if ring <= 0 {
		ring = 1000
	}
	if h.sample.on() {
		// A sampled poll returns only the sample's rows, but every
		// connection's statements fill the ring: judge by the server's rate.
		rows = max(rows, int(h.known.queryRate*every.Seconds()))
	}
	switch {
	case lost > 0 || rows*2 > ring:
		if every > h.minPollEvery {
			every = max(every/2, h.minPollEvery)
			h.notes.add("statement history ring (%d rows) fills between polls: polling faster; raise performance_schema_events_statements_history_long_size (startup option) on busy servers", ring)
		}
	case rows*8 < ring && every < h.pollEvery:
		every = min(every*2, h.pollEvery)
	}
	return every
}

// pollStatements reads new statement history rows into the joiner. When
// the server is lost it backs off and resumes (re-calibrating, and starting
// a new cursor if the server restarted); statements in the gap stay
// unjoined, and the gap is noted. The capture is never held up. It returns
// the rows the server sent (before a sample drops any: what fills the
// ring) and the rows the ring lost.
func (h *historyReader) pollStatements(ctx context.Context) (rows int, lost int64) {
	if !h.link.ready(time.Now()) {
		return 0, 0
	}
	if h.link.down && !h.resume(ctx) {
		h.linkFailed(ctx)
		return 0, 0
	}
	clock, _ := h.clock.Clock()
	c := h.cursor.get()
	c.ExceptConns(h.sample.skipped()) // nil when following all: none left out
	from := h.lastPollAt
	h.lastPollAt = nowUS()
	h.noteRingRead()
	got, lost, err := c.Poll(ctx, h.db, clock)
	h.countPoll(len(got), lost, err)
	if lost > 0 {
		// The first read's loss covers every statement captured before it:
		// watch captures from its start, and reads the ring only once it
		// has connected and learnt the server's clock.
		h.losses.add(max(from-lossSlackUS, 0), h.lastPollAt)
	}
	if err != nil {
		if ctx.Err() == nil {
			h.notes.add("lost the server at %s (%v): statements in the gap stay unjoined; retrying with backoff, and as soon as its port answers", time.Now().Format(time.TimeOnly), err)
			h.linkFailed(ctx)
		}
		return 0, 0
	}
	read := len(got)
	if h.sample.on() {
		got = h.sample.keepRows(got, func() { h.conns.read(ctx) })
	}
	sampledOut := read - len(got)
	got, dups := h.cursor.dropFed(got)
	h.side.serverM.Lock()
	h.side.server.SampledOutRows += int64(sampledOut)
	h.side.server.DuplicateRows += int64(dups)
	h.side.serverM.Unlock()
	h.hand(got, lost > 0)
	return read, lost
}

// countPoll counts a read of the history in the server-side figures.
func (h *historyReader) countPoll(rows int, lost int64, err error) {
	h.side.serverM.Lock()
	defer h.side.serverM.Unlock()
	h.side.server.Polls++
	if err != nil {
		h.side.server.PollErrors++
		return
	}
	h.side.server.Rows += int64(rows)
	h.side.server.RingLost += lost
}

// hand gives the rows read to the joiner, or to the tally as server
// statements when there is no wire to join them with.
func (h *historyReader) hand(got []collect.ServerStatement, lost bool) {
	switch {
	case h.noWire:
		for i := range got {
			h.tally.add(join.ServerOnly(&got[i], event.NoCapture, h.text))
		}
	case lost: // the ring overwrote rows: what ended before its oldest is gone
		h.joiner.AddServerLost(got, h.lastPollAt)
	default:
		h.joiner.AddServer(got, h.lastPollAt) // when the read began: what ended before is in it
	}
}

// cursorRef holds the run's statement cursor, which a server's restart
// replaces (history owns it), with the rows the targeted reads fed already
// (targets owns those): both on the poller's goroutine.
type cursorRef struct {
	c *collect.StatementCursor
	// gen counts the cursors: a new one means the server restarted and
	// its thread ids start over.
	gen int
	fed map[rowKey]time.Time
}

func newCursorRef(c *collect.StatementCursor) *cursorRef {
	return &cursorRef{c: c, fed: map[rowKey]time.Time{}}
}

func (r *cursorRef) get() *collect.StatementCursor { return r.c }

func (r *cursorRef) set(c *collect.StatementCursor) {
	r.c = c
	r.gen++
}

// dropFed drops the rows a targeted read fed already, returning the rest
// and how many it dropped.
func (c *cursorRef) dropFed(rows []collect.ServerStatement) ([]collect.ServerStatement, int) {
	if len(c.fed) == 0 {
		return rows, 0
	}
	n := len(rows)
	rows = slices.DeleteFunc(rows, func(r collect.ServerStatement) bool {
		_, ok := c.fed[rowKey{r.ThreadID, r.EventID}]
		return ok
	})
	return rows, n - len(rows)
}

// openHistory opens the read of the server's statements from table ("":
// none, wire only) from now on; nil when there is none.
func openHistory(ctx context.Context, db *sql.DB, table string, notes *noteList) *collect.StatementCursor {
	if table == "" {
		return nil
	}
	c, err := newJoinCursor(ctx, db, table, true, false)
	if err != nil {
		notes.add("reading %s failed (%v): wire only", table, err)
		return nil
	}
	return c
}

// newJoinCursor is a cursor on table for the join (a slow statement's row
// read on every connection, whatever the join sample): from the history's
// start, or from now on when primed. Without the wire every row is a
// statement of its own, reported with its text, so the text is read whole
// (a join reads its start only).
func newJoinCursor(ctx context.Context, db *sql.DB, table string, prime, noWire bool) (*collect.StatementCursor, error) {
	c := collect.NewJoinCursor(table)
	c.ExceptBelow(outlierFloor)
	if noWire {
		c.WholeText()
	}
	if prime {
		if err := c.Prime(ctx, db); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// slowRowPS: history_long rows this long on the server are read and kept
// whatever the join sample (their statements are outliers, joined on every
// connection): what the per-thread history of a busy connection has
// overwritten by the time watch reads it, the long ring may still hold.
var slowRowPS = uint64(outlierFloor.Nanoseconds()) * 1000
