package watch

import (
	"context"
	"database/sql"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/join"
)

// statusReader reads, once a second or every PollInterval when that is
// longer, the server's counters (rateStatus):
// the statement rate, the connections the wire did not see, the
// statements it did not take, whether anyone but watch uses the server,
// and the row-lock counter; then, on a busy server (an idle one every
// idleEvery), the thread-pool groups and the processlist; then the host's
// sockets, and the CPU budget's policy, which sets the join sample. It
// also reads the row-lock counter at once when the ledger asks
// (wantCounter).
type statusReader struct {
	statusDeps

	status     map[string]string // the last read of rateStatus
	statusAt   time.Time         // when it was read
	readAt     time.Time         // when the last status read was due
	idleReadAt time.Time         // when the reads an idle server skips were last made
	// connsAt and wireConnsAt are the counts at the last status read;
	// unseenOwed is its shortfall, judged at the next (noteUnseen).
	connsAt, wireConnsAt int64
	unseenOwed           int64
	// shortAt holds the counts at the last status read (noteShortfall).
	shortAt shortfallCounts
}

// statusDeps is what a statusReader reads with and reports to: rowLocks
// takes the row-lock counter's readings, wantCounter is set when the
// ledger waits for a fresh one; the wire stage counts the connections it
// saw open and the statements it took.
type statusDeps struct {
	db          *sql.DB
	own         *ownAddrs
	joiner      *join.Joiner
	sample      *joinSample
	side        *serverSide
	known       *known
	conns       *connReader
	host        hostSockets
	rowLocks    *rowLockSamples
	wantCounter *atomic.Bool
	wire        *wireStage
	// every is how often the counters are read: slowPollEvery, or the
	// history's regular pace when that is longer (a user's --poll), so
	// that the reads that follow them (the processlist, the pool groups)
	// take the poller's goroutine from the running scans no more often
	// than the history's reads do.
	every time.Duration
}

// newStatusReader makes the status reader; its first read is a second
// after the run starts (the run's start read the server already).
func newStatusReader(d statusDeps) *statusReader {
	return &statusReader{statusDeps: d, readAt: time.Now()}
}

// rateStatus are the status variables watch reads every slowPollEvery:
// the statement rate and the server's start. The diagnosis reads the whole
// status once, at the end.
var rateStatus = []string{"Queries", "Questions", "Uptime", "Connections", rowLockStatus}

// slowPollEvery is how often thread-pool groups, status and the processlist
// mapping are read.
const slowPollEvery = time.Second

func (r *statusReader) next(now time.Time) (time.Duration, bool) {
	return max(r.readAt.Add(r.every).Sub(now), 0), true
}

func (r *statusReader) read(ctx context.Context, now time.Time) {
	if r.wantCounter.Swap(false) {
		// The ledger matched a statement to a release on the wire and waits
		// for a reading past its end, which the regular read would give
		// only up to a second later.
		r.rowLocks.readNow(ctx, r.db)
	}
	if now.Sub(r.readAt) < r.every {
		return
	}
	r.readAt = now
	r.poll(ctx)
}

func (r *statusReader) final(context.Context) {
	_ = r.host.readNow()
}

// poll reads status and thread-pool groups, and maps connections that
// appeared without a visible handshake. An idle server's pool groups and
// processlist are read every idleEvery only.
func (r *statusReader) poll(ctx context.Context) {
	k := r.known
	status, now, err := r.readStatus(ctx)
	if err == nil {
		r.noteUnseen(status)
		r.noteShortfall(status, now)
		r.rowLocks.noteStatus(now, status)
		k.queryRate = statementRate(r.status, status, time.Since(r.statusAt))
		r.status, r.statusAt = status, time.Now()
		if start, ok := startFromUptime(status); ok && k.startedAt == 0 {
			k.startedAt = start
		}
	} else {
		k.act.mark(now) // not known to be idle
		r.noteShortfall(nil, now)
	}
	k.act.noteWire(now, r.wire.taken.Load())
	if k.act.active(now) || now.Sub(r.idleReadAt) >= idleEvery {
		r.idleReadAt = now
		if k.info.ThreadPoolTables {
			if pool, _ := collect.ThreadPoolGroups(ctx, r.db); pool != nil {
				r.side.serverM.Lock()
				r.side.pool = pool
				r.side.serverM.Unlock()
			}
		}
		r.conns.read(ctx) // the connections the governor's estimates count
	}
	if r.sample.govern(time.Now(), ProcessCPU(), k.queryRate) {
		r.joiner.SetPartial(r.sample.on())
	}
	_ = r.host.poll() // a failed read keeps the earlier ones
}

// readStatus reads rateStatus and judges from it whether anyone but watch
// uses the server (activity), taking watch's own statements and
// connections from its pool's counts before and after the read: the
// clock's recalibration runs its statements on another goroutine, and one
// of them under way during the read may be counted by the server and not
// yet by watch (quietAround). It returns the status and when it was read.
func (r *statusReader) readStatus(ctx context.Context) (map[string]string, time.Time, error) {
	before := r.own.counts()
	status, err := collect.GlobalStatusOf(ctx, r.db, rateStatus...)
	after := r.own.counts()
	now := time.Now()
	if err == nil && r.known.act.noteStatus(now, status, after, quietAround(before, after)) {
		r.known.learn.want() // name the new connections while they live
	}
	return status, now, err
}

// noteUnseen compares the server's Connections counter with the
// connections the wire saw open since the last status read: more on the
// server (beyond watch's own few) means clients the capture cannot see.
//
// The wire counts a connection at its first statement, after the server
// did, so a burst of new connections (connection-per-request clients)
// shows a shortfall at one read that the wire makes up by the next. A
// shortfall beyond the slack buys a probation of the fast thread reads;
// the next read judges it: what the wire did not make up by then was
// connections it cannot see, and the reads go on for unseenFor. A lagging
// wire's burst costs two seconds of reads, not ten; clients that are
// really unseen are read from the first shortfall.
func (r *statusReader) noteUnseen(status map[string]string) {
	conns, err := strconv.ParseInt(status["Connections"], 10, 64)
	if err != nil {
		return
	}
	wire := r.wire.connsSeen.Load()
	if r.connsAt > 0 {
		opened := conns - r.connsAt
		gap := opened - (wire - r.wireConnsAt)
		unrepaid := r.unseenOwed - max(0, -gap) // the last read's shortfall the wire did not make up
		r.unseenOwed = max(0, gap-unseenSlack(opened))
		now := time.Now()
		switch {
		case unrepaid > 0:
			r.known.unseenUntil = now.Add(unseenFor)
		case r.unseenOwed > 0:
			r.known.unseenUntil = later(r.known.unseenUntil, now.Add(unseenProbation))
		}
	}
	r.connsAt, r.wireConnsAt = conns, wire
}

// ownConnsSlack: connections watch itself may open between two status
// reads (its pool's, the plan catcher's), which the wire stage drops.
const ownConnsSlack = 2

// unseenSlack is the shortfall between two status reads that is not yet
// evidence of clients the wire cannot see: watch's own few, and under a
// connection-per-request churn a share of what opened, which the wire,
// counting each connection at its first statement a capture's lag later,
// makes up only over several reads (judged per read, a loaded host's
// churn kept the fast thread reads on for good: docs/performance.md).
func unseenSlack(opened int64) int64 { return max(ownConnsSlack, opened/unseenShare) }

// unseenShare: a shortfall of one connection in unseenShare of those that
// opened is within the wire's lag.
const unseenShare = 20

// shortfallCounts are the server's and the wire's statement counts at a
// status read.
type shortfallCounts struct {
	known                 bool
	server, wire, ownSent int64
}

// noteShortfall compares the statements the server counted since the last
// status read with those the wire took and watch's own. More on the
// server, beyond the wire's lag (shortfallSlack), means clients the
// capture does not see (a unix socket, another interface, a flow it could
// not follow): only the running scans find their long statements while
// they run, so the scans keep their pace for unseenFor. A read without
// the counters, or the first, cannot tell, and holds them until the next.
func (r *statusReader) noteShortfall(status map[string]string, now time.Time) {
	k := r.known
	server, ok := statusInt(status, "Questions", "Queries")
	if !ok {
		r.shortAt.known = false
		k.shortUntil = later(k.shortUntil, now.Add(2*slowPollEvery))
		return
	}
	cur := shortfallCounts{known: true, server: server, wire: r.wire.taken.Load(), ownSent: r.own.pool.Statements()}
	switch prev := r.shortAt; {
	case !prev.known:
		k.shortUntil = later(k.shortUntil, now.Add(2*slowPollEvery))
	case shortfall(prev, cur) > shortfallSlack(cur.server-prev.server):
		k.shortUntil = later(k.shortUntil, now.Add(unseenFor))
	}
	r.shortAt = cur
}

// shortfall is how many more statements the server counted between two
// reads than the wire took and watch sent.
func shortfall(prev, cur shortfallCounts) int64 {
	return (cur.server - prev.server) - (cur.wire - prev.wire) - (cur.ownSent - prev.ownSent)
}

// shortfallSlack is the shortfall a wire that sees every client still
// shows: the statements between its last look and the read (the capture
// hands them over tens of milliseconds late), a tenth of a second's worth
// and a few more.
func shortfallSlack(server int64) int64 { return 20 + server/10 }

// statementRate is the server's statements per second between two status
// reads (Queries counts stored programs' statements too, as the history
// does); 0 when unknown.
func statementRate(prev, cur map[string]string, elapsed time.Duration) float64 {
	if prev == nil || elapsed <= 0 {
		return 0
	}
	for _, name := range []string{"Queries", "Questions"} {
		a, errA := strconv.ParseInt(prev[name], 10, 64)
		b, errB := strconv.ParseInt(cur[name], 10, 64)
		if errA == nil && errB == nil && b >= a {
			return float64(b-a) / elapsed.Seconds()
		}
	}
	return 0
}

// serverStart returns the server's start as Unix seconds.
func serverStart(ctx context.Context, db *sql.DB) (int64, bool) {
	status, err := collect.GlobalStatus(ctx, db)
	if err != nil {
		return 0, false
	}
	return startFromUptime(status)
}

func startFromUptime(status map[string]string) (int64, bool) {
	up, err := strconv.ParseInt(status["Uptime"], 10, 64)
	if err != nil {
		return 0, false
	}
	return time.Now().Unix() - up, true
}
