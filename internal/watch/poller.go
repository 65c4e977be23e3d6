package watch

import (
	"context"
	"database/sql"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/txn"
)

// poller is the poller stage. It reads the server on its own schedule
// (history_long, the threads of the outliers the wire reports, the
// statements running, the processlist and status), hands the rows to the
// joiner, and consults the CPU budget's policy (governor) to set the join
// sample. It never touches the capture; a slow or lost server only delays
// joins.
//
// Its state belongs to its goroutine (start): build makes it complete,
// every dependency in place, before the goroutine starts, and finish and
// the result read it after it ended. It holds no engine: what it shares
// with other goroutines is in the fields of the first block, whose types
// are safe for concurrent use (side under serverM; the joiner, the tally,
// the clock, the join sample's get, notes, losses and the socket watches
// each under its own lock; db a pool; own copied on write), and the
// channels it receives from (the wire's hand-offs).
type poller struct {
	// Set by build and never changed after.
	db     *sql.DB
	addr   string // the server's, for the port probe of an outage
	own    *ownAddrs
	clock  *collect.Recalibrator // re-calibrated here (its Run, resume); the result reads it
	joiner *join.Joiner          // where the rows go
	tally  *tally                // where the rows go without a wire (noWire)
	// sample is the join sample and the CPU budget: the poller owns it
	// (learn, govern, keepRows); the loop reads its get.
	sample  *joinSample
	side    *serverSide // what it learns of the server, for the loop and the result
	notes   *noteList
	losses  *lossLog     // the polls whose reads found the ring had turned over
	sockets *socketWatch // nil unless the server runs on this host
	path    *pathWatch   // nil when the server runs on this host
	// rowLocks takes the row-lock counter's readings (locks.go); ledger
	// takes what the lock tables show while a statement runs long.
	rowLocks *rowLockSamples
	ledger   *txn.Ledger
	locks    *lockReads
	// wantCounter: the ledger waits for a reading of the row-lock counter.
	wantCounter chan struct{}
	// slow and newConns are the wire stage's hand-offs: each outlier's
	// identity, and a connection seen for the first time.
	slow     <-chan target
	newConns <-chan struct{}
	// work wakes the loop to give up, in time, what the joiner holds.
	work chan struct{}
	// wireConns counts the connections the wire saw open (the wire
	// stage's atomic), against the server's Connections counter;
	// wireTaken the statements it took, a sign of activity.
	wireConns, wireTaken *atomic.Int64
	// wireInFlight counts the commands the capture saw sent and not yet
	// answered (nil without a capture), wireDown says the capture stopped:
	// the running scans at their regular pace wait for a command in
	// flight while the wire sees every client (wireQuiet).
	wireInFlight *atomic.Int64
	wireDown     *atomic.Bool
	accepts      *acceptWatch // nil: the server's connections cannot be watched
	// pollEvery and minPollEvery bound the interval between reads of
	// history_long (Options.PollInterval, MinPollInterval);
	// enableConsumers lets it turn on the consumers it needs.
	pollEvery, minPollEvery time.Duration
	enableConsumers         bool
	// noWire: no capture this run, the rows go to the tally as they are.
	noWire bool
	// keepLiterals keeps the literals of the server-only statements' text;
	// text gives them their text (made at the first).
	keepLiterals bool
	text         *join.ServerText

	// info and caps are the server as last read (a restart re-reads them);
	// restore undoes the consumers this run enabled.
	info    collect.ServerInfo
	caps    collect.Capabilities
	restore func(context.Context)
	cursor  *collect.StatementCursor // history_long, incremental
	procs   collect.ProcesslistReader
	targets *targets
	// lastPollAt is when history_long was last read; ring paces the
	// reads by the ring's turnover (ringpace.go).
	lastPollAt int64
	ring       ringPace
	learn      threadLearner
	link       serverLink
	// status is the last read of rateStatus, statusAt when it was read;
	// queryRate the server's statements per second since the read before;
	// startedAt the server's start (Unix seconds), to tell a restart from
	// a lost connection.
	status    map[string]string
	statusAt  time.Time
	queryRate float64
	startedAt int64
	// unseenUntil: until then the server opens connections the wire does
	// not see (unix sockets, another port), and the threads are read every
	// unseenLearnEvery to name theirs while they live; connsAt and
	// wireConnsAt are the counts at the last status read.
	// unseenOwed is the last read's shortfall, judged at the next (noteUnseen).
	unseenUntil          time.Time
	connsAt, wireConnsAt int64
	unseenOwed           int64
	// shortUntil: until then the server counted statements the wire did
	// not take (noteShortfall), so the wire's in-flight count cannot gate
	// the running scans; shortAt holds the counts at the last status read.
	shortUntil time.Time
	shortAt    shortfallCounts
	// act says whether anyone but watch uses the server; idleReadAt is
	// when the reads an idle server skips were last made.
	act        activity
	idleReadAt time.Time
	// wakes counts the loop's wake-ups (ServerSide.PollerWakes): what it
	// costs when it has nothing to read must stay bounded by what happens.
	wakes int64
}

// start runs the poller on its own goroutine until ctx ends. The channel
// it returns is closed once the goroutine ended, the poller's state then
// being the caller's.
func (p *poller) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		go func() { _ = p.clock.Run(ctx) }()
		p.run(ctx)
	}()
	return done
}

// run reads the server on its own schedule until ctx ends, and the thread
// of every outlier the wire reports as soon as it does.
func (p *poller) run(ctx context.Context) {
	every := p.pollEvery
	t := time.NewTimer(every)
	defer t.Stop()
	lastSlow := time.Now()
	for {
		var retry <-chan time.Time
		if wait, ok := p.nextWake(time.Now()); ok {
			retry = time.After(wait)
		}
		select {
		case <-ctx.Done():
			return
		case tg := <-p.slow:
			p.act.mark(time.Now())
			p.targets.add(tg, time.Now())
			p.takeTargets()
		case <-p.wantCounter:
			p.readRowLocksWanted(ctx)
		case <-p.newConns:
			p.act.mark(time.Now())
			p.learn.pending = p.cursor != nil // without a cursor no thread is read
		case <-retry:
		case <-p.link.answered:
			p.link.retryNow()
			p.pollHistory(ctx, &every, &lastSlow)
			t.Reset(every)
		case <-t.C:
			p.pollHistory(ctx, &every, &lastSlow)
			t.Reset(every)
		case <-p.ring.wake:
		}
		if p.ringDue(time.Now()) { // the ring would turn over before the timer
			p.act.mark(time.Now()) // the wire's statements filled it: not idle
			p.pollHistory(ctx, &every, &lastSlow)
			t.Reset(every)
		}
		p.wakes++
		p.readTargets(ctx)
		p.learnThreads(ctx)
		p.scanRunning(ctx)
		p.rearmRing()          // watch's own statements fill the ring too
		p.ledger.Tick(nowUS()) // the ended transactions due are written, however quiet the wire
	}
}

// pollHistory reads history_long (and, every slowPollEvery, the slow
// reads), adapting every to what the read found. An idle server's
// history is read every idleEvery, and at once when the status read finds
// the first sign of activity (activity).
func (p *poller) pollHistory(ctx context.Context, every *time.Duration, lastSlow *time.Time) {
	if p.act.active(time.Now()) || nowUS()-p.lastPollAt >= idleEvery.Microseconds() {
		p.readHistory(ctx, every)
	}
	if time.Since(*lastSlow) >= slowPollEvery {
		idle := !p.act.active(time.Now())
		p.pollSlow(ctx)
		*lastSlow = time.Now()
		if idle && p.act.active(*lastSlow) {
			p.readHistory(ctx, every)
		}
	}
}

// readHistory reads history_long once: rows are a sign of activity.
func (p *poller) readHistory(ctx context.Context, every *time.Duration) {
	rows, lost := p.pollStatements(ctx)
	if rows > 0 || lost > 0 {
		p.act.mark(time.Now())
	}
	*every = p.nextInterval(*every, rows, lost)
}

// nextWake is how long the poller may sleep before a target or a thread
// read is due (false: nothing is).
func (p *poller) nextWake(now time.Time) (time.Duration, bool) {
	wait, ok := p.targets.wait(now)
	if p.cursor != nil && p.targets.current && !p.targets.failed && p.act.active(now) {
		every, _ := p.targets.scanPace(now)
		w := max(p.targets.scannedAt.Add(every).Sub(now), 0)
		if !ok || w < wait {
			wait, ok = w, true
		}
	}
	if p.cursor != nil && now.Before(p.unseenUntil) {
		w := max(p.learn.at.Add(unseenLearnEvery).Sub(now), 0)
		if !ok || w < wait {
			wait, ok = w, true
		}
	}
	if p.learn.pending && p.cursor != nil {
		w := max(p.learn.at.Add(learnEvery).Sub(now), 0)
		if !ok || w < wait {
			wait, ok = w, true
		}
	}
	return wait, ok
}

// threadLearner paces the reads of which thread serves which connection.
type threadLearner struct {
	pending bool
	at      time.Time
}

// learnEvery bounds how often new connections make the poller read the
// threads (a storm of short connections costs one read per interval). The
// capture hands statements over a block of packets at a time, tens of
// milliseconds after they ran: the read a block's first new connection
// asks for finds alive only those not closed yet, and the next one, due
// learnEvery later, those of the block still open then. Each read also
// observes the newest thread's id offset, which names the connection of a
// thread that ended before its rows were read when its rows fit two
// connections' statements. At 20 ms connection-per-request clients lost
// joins to such threads (docs/performance.md).
const learnEvery = 5 * time.Millisecond

// While the server opens connections the wire does not see, the threads
// are read every unseenLearnEvery for unseenFor after the last such
// connection: a unix-socket client's statement of 100 ms or more is then
// named by its thread (CONNECTION_TYPE) before the connection ends; a
// shorter one's rows may come back as an unidentified thread's.
const (
	unseenLearnEvery = 50 * time.Millisecond
	unseenFor        = 10 * time.Second
	// unseenProbation covers the next status read (slowPollEvery).
	unseenProbation = 2 * time.Second
)

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
func (p *poller) noteUnseen(status map[string]string) {
	conns, err := strconv.ParseInt(status["Connections"], 10, 64)
	if err != nil || p.wireConns == nil {
		return
	}
	wire := p.wireConns.Load()
	if p.connsAt > 0 {
		opened := conns - p.connsAt
		gap := opened - (wire - p.wireConnsAt)
		unrepaid := p.unseenOwed - max(0, -gap) // the last read's shortfall the wire did not make up
		p.unseenOwed = max(0, gap-unseenSlack(opened))
		now := time.Now()
		switch {
		case unrepaid > 0:
			p.unseenUntil = now.Add(unseenFor)
		case p.unseenOwed > 0:
			p.unseenUntil = later(p.unseenUntil, now.Add(unseenProbation))
		}
	}
	p.connsAt, p.wireConnsAt = conns, wire
}

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// ownConnsSlack: connections watch itself may open between two status
// reads (its pool's, the plan catcher's), which the wire stage drops.
const ownConnsSlack = 2

// unseenSlack is the shortfall between two status reads that is not yet
// evidence of clients the wire cannot see: watch's own few, and under a
// connection-per-request churn a share of what opened, which the wire,
// counting each connection at its first statement a capture's lag later,
// makes up only over several reads (at 120 connections a second on a
// loaded host it ran ~3 behind at most reads and caught up in bursts;
// judged per read, that kept the fast thread reads on for good).
func unseenSlack(opened int64) int64 { return max(ownConnsSlack, opened/unseenShare) }

// unseenShare: a shortfall of one connection in unseenShare of those that
// opened is within the wire's lag.
const unseenShare = 20

// learnThreads reads the threads of the connections the wire saw open,
// at most every learnEvery.
func (p *poller) learnThreads(ctx context.Context) {
	if p.cursor == nil {
		p.learn.pending = false // nothing reads threads: a pending read would wake the loop for ever
		return
	}
	unseen := time.Now().Before(p.unseenUntil) && time.Since(p.learn.at) >= unseenLearnEvery
	if !unseen && (!p.learn.pending || time.Since(p.learn.at) < learnEvery) {
		return
	}
	p.learn.pending, p.learn.at = false, time.Now()
	p.side.serverM.Lock()
	p.side.server.ThreadReads++
	p.side.serverM.Unlock()
	if p.cursor.LearnThreads(ctx, p.db) == nil { // a failure: the next history read looks them up itself
		p.joiner.ObserveThread(p.cursor.NewestThread())
	}
}

// takeTargets moves the outliers queued meanwhile into the targets.
func (p *poller) takeTargets() {
	now := time.Now()
	for n := len(p.slow); n > 0; n-- {
		p.targets.add(<-p.slow, now)
	}
}

// rateStatus are the status variables watch reads every slowPollEvery:
// the statement rate and the server's start. The diagnosis reads the whole
// status once, at the end.
var rateStatus = []string{"Queries", "Questions", "Uptime", "Connections", rowLockStatus}

// slowPollEvery is how often thread-pool groups, status and the processlist
// mapping are read.
const slowPollEvery = time.Second

// nextInterval adapts polling to the statement rate: performance_schema's
// history_long is a ring (1,000 rows by default on MariaDB), so a busy
// server overwrites rows before a 200 ms poll reads them (measured: 25-33%
// joined under sysbench with the default ring). A poll that lost rows or
// came back more than half full halves the interval; a quiet one lets it
// grow back to the configured value.
func (p *poller) nextInterval(every time.Duration, rows int, lost int64) time.Duration {
	ring := p.info.HistoryLongSize
	if ring <= 0 {
		ring = 1000
	}
	if p.sample.on() {
		// A sampled poll returns only the sample's rows, but every
		// connection's statements fill the ring: judge by the server's rate.
		rows = max(rows, int(p.queryRate*every.Seconds()))
	}
	switch {
	case lost > 0 || rows*2 > ring:
		if every > p.minPollEvery {
			every = max(every/2, p.minPollEvery)
			p.notes.add("statement history ring (%d rows) fills between polls: polling faster; raise performance_schema_events_statements_history_long_size (startup option) on busy servers", ring)
		}
	case rows*8 < ring && every < p.pollEvery:
		every = min(every*2, p.pollEvery)
	}
	return every
}

// pollStatements reads new statement history rows into the joiner. When
// the server is lost it backs off and resumes (re-calibrating, and starting
// a new cursor if the server restarted); statements in the gap stay
// unjoined, and the gap is noted. The capture is never held up. It returns
// the rows the server sent (before a sample drops any: what fills the
// ring) and the rows the ring lost.
func (p *poller) pollStatements(ctx context.Context) (rows int, lost int64) {
	if p.cursor == nil || !p.link.ready(time.Now()) {
		return 0, 0
	}
	if p.link.down && !p.resume(ctx) {
		p.linkFailed(ctx)
		return 0, 0
	}
	clock, _ := p.clock.Clock()
	p.cursor.ExceptConns(p.sample.skipped()) // nil when following all: none left out
	from := p.lastPollAt
	p.lastPollAt = nowUS()
	p.noteRingRead()
	got, lost, err := p.cursor.Poll(ctx, p.db, clock)
	p.side.serverM.Lock()
	p.side.server.Polls++
	if err != nil {
		p.side.server.PollErrors++
	} else {
		p.side.server.Rows += int64(len(got))
		p.side.server.RingLost += lost
	}
	p.side.serverM.Unlock()
	if lost > 0 {
		// The first read's loss covers every statement captured before it:
		// watch captures from its start, and reads the ring only once it
		// has connected and learnt the server's clock.
		p.losses.add(max(from-lossSlackUS, 0), p.lastPollAt)
	}
	if err != nil {
		if ctx.Err() == nil {
			p.notes.add("lost the server at %s (%v): statements in the gap stay unjoined; retrying with backoff, and as soon as its port answers", time.Now().Format(time.TimeOnly), err)
			p.linkFailed(ctx)
		}
		return 0, 0
	}
	read := len(got)
	if p.sample.on() {
		got = p.sample.keepRows(got, func() { p.mapExistingConns(ctx) })
	}
	sampledOut := read - len(got)
	got, dups := p.targets.dropFed(got)
	p.side.serverM.Lock()
	p.side.server.SampledOutRows += int64(sampledOut)
	p.side.server.DuplicateRows += int64(dups)
	p.side.serverM.Unlock()
	if p.noWire {
		p.addServerOnly(got) // nothing to join with: buffering them would only cost
	} else {
		if lost > 0 { // the ring overwrote rows: what ended before its oldest is gone
			p.joiner.AddServerLost(got, p.lastPollAt)
		} else {
			p.joiner.AddServer(got, p.lastPollAt) // when the read began: what ended before is in it
		}
		if len(got) > 0 {
			signal(p.work)
		}
	}
	return read, lost
}

// poolSize is the thread-pool size when connections are served by a pool
// (group = connection id mod size on MariaDB), else 0.
func poolSize(info collect.ServerInfo) int {
	if info.ThreadPool && info.ThreadPoolSize > 0 {
		return info.ThreadPoolSize
	}
	return 0
}

// setIdentity publishes the server's flavor and version, as the poller
// last read them, for the sinks' snapshots.
func (p *poller) setIdentity() {
	p.side.serverM.Lock()
	p.side.flavor, p.side.version = p.info.Flavor, p.info.Version
	p.side.serverM.Unlock()
}

// openHistory opens the read of the server's statements from table ("":
// none, wire only) from now on; nil when there is none.
func openHistory(ctx context.Context, db *sql.DB, table string, notes *noteList) *collect.StatementCursor {
	if table == "" {
		return nil
	}
	c, err := newJoinCursor(ctx, db, table, true)
	if err != nil {
		notes.add("reading %s failed (%v): wire only", table, err)
		return nil
	}
	return c
}

// fitCursor makes a join cursor read what the run reports: without the
// wire every row is a statement of its own, reported with its text, so
// the text is read whole (a join reads its start only).
func fitCursor(c *collect.StatementCursor, noWire bool) {
	if c != nil && noWire {
		c.WholeText()
	}
}

// newJoinCursor is a cursor on table for the join (a slow statement's row
// read on every connection, whatever the join sample): from the history's
// start, or from now on when primed.
func newJoinCursor(ctx context.Context, db *sql.DB, table string, prime bool) (*collect.StatementCursor, error) {
	c := collect.NewJoinCursor(table)
	c.ExceptBelow(outlierFloor)
	if prime {
		if err := c.Prime(ctx, db); err != nil {
			return nil, err
		}
	}
	return c, nil
}

// mapExistingConns tells the joiner the connection ids of connections
// opened before the capture started (their handshake is not on the wire).
func (p *poller) mapExistingConns(ctx context.Context) {
	procs, err := p.procs.Read(ctx, p.db)
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: nothing is missed
		}
		p.notes.add("processlist unreadable (%v): connections opened before watch started stay unjoined", err)
		return
	}
	var long []longStatement
	now := time.Now().UnixMicro()
	for _, pr := range procs {
		if _, ok := hostPort(pr.Host); ok {
			p.joiner.MapConn(pr.Host, pr.ID)
		}
		if pr.Command == "Query" && pr.TimeMS >= lockReadAfter.Milliseconds() && !p.own.isOwnHost(pr.Host) {
			long = append(long, longStatement{connID: pr.ID, startUS: now - pr.TimeMS*1000})
		}
	}
	p.sample.learn(procs)
	if len(long) > 0 {
		p.maybeReadLocks(ctx, long)
	}
}

// addServerOnly reports server statements as such when there is no wire.
func (p *poller) addServerOnly(rows []collect.ServerStatement) {
	if p.text == nil {
		p.text = join.NewServerText(p.keepLiterals)
	}
	for i := range rows {
		s := join.ServerOnly(&rows[i], event.NoCapture, p.text)
		p.tally.add(s)
	}
}

// pollSlow reads status and thread-pool groups, and maps connections that
// appeared without a visible handshake. An idle server's pool groups and
// processlist are read every idleEvery only.
func (p *poller) pollSlow(ctx context.Context) {
	status, now, err := p.readStatus(ctx)
	if err == nil {
		p.noteUnseen(status)
		p.noteShortfall(status, now)
		p.rowLocks.noteStatus(now, status)
		p.queryRate = statementRate(p.status, status, time.Since(p.statusAt))
		p.status, p.statusAt = status, time.Now()
		if start, ok := startFromUptime(status); ok && p.startedAt == 0 {
			p.startedAt = start
		}
	} else {
		p.act.mark(now) // not known to be idle
		p.noteShortfall(nil, now)
	}
	if p.wireTaken != nil {
		p.act.noteWire(now, p.wireTaken.Load())
	}
	if p.act.active(now) || now.Sub(p.idleReadAt) >= idleEvery {
		p.idleReadAt = now
		if p.info.ThreadPoolTables {
			if pool, _ := collect.ThreadPoolGroups(ctx, p.db); pool != nil {
				p.side.serverM.Lock()
				p.side.pool = pool
				p.side.serverM.Unlock()
			}
		}
		p.mapExistingConns(ctx) // the connections the governor's estimates count
	}
	if p.sample.govern(time.Now(), ProcessCPU(), p.queryRate) {
		p.joiner.SetPartial(p.sample.on())
	}
	_ = p.sockets.poll() // a failed read keeps the earlier ones
	_ = p.path.poll()
}

// readStatus reads rateStatus and judges from it whether anyone but watch
// uses the server (activity), taking watch's own statements and
// connections from its pool's counts before and after the read: the
// clock's recalibration runs its statements on another goroutine, and one
// of them under way during the read may be counted by the server and not
// yet by watch (quietAround). It returns the status and when it was read.
func (p *poller) readStatus(ctx context.Context) (map[string]string, time.Time, error) {
	before := p.own.counts()
	status, err := collect.GlobalStatusOf(ctx, p.db, rateStatus...)
	after := p.own.counts()
	now := time.Now()
	if err == nil && p.act.noteStatus(now, status, after, quietAround(before, after)) {
		p.learn.pending = p.cursor != nil // name the new connections while they live
	}
	return status, now, err
}

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
func (p *poller) noteShortfall(status map[string]string, now time.Time) {
	server, ok := statusInt(status, "Questions", "Queries")
	if !ok || p.wireTaken == nil {
		p.shortAt.known = false
		p.shortUntil = later(p.shortUntil, now.Add(2*slowPollEvery))
		return
	}
	cur := shortfallCounts{known: true, server: server, wire: p.wireTaken.Load(), ownSent: p.own.pool.Statements()}
	switch prev := p.shortAt; {
	case !prev.known:
		p.shortUntil = later(p.shortUntil, now.Add(2*slowPollEvery))
	case shortfall(prev, cur) > shortfallSlack(cur.server-prev.server):
		p.shortUntil = later(p.shortUntil, now.Add(unseenFor))
	}
	p.shortAt = cur
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

// slowRowPS: history_long rows this long on the server are read and kept
// whatever the join sample (their statements are outliers, joined on every
// connection): what the per-thread history of a busy connection has
// overwritten by the time watch reads it, the long ring may still hold.
var slowRowPS = uint64(outlierFloor.Nanoseconds()) * 1000

// sampleRefresh bounds how often new connections trigger a processlist read.
const sampleRefresh = 200 * time.Millisecond
