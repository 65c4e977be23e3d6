package watch

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
)

// startPoller reads the server on its own schedule until ctx ends, and
// the thread of every outlier the wire reports as soon as it does. It
// never touches the capture; a slow or lost server only delays joins.
func (e *engine) startPoller(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		go func() { _ = e.clock.Run(ctx) }()
		every := e.opts.PollInterval
		t := time.NewTimer(every)
		defer t.Stop()
		lastSlow := time.Now()
		for {
			var retry <-chan time.Time
			if wait, ok := e.nextWake(time.Now()); ok {
				retry = time.After(wait)
			}
			select {
			case <-ctx.Done():
				return
			case tg := <-e.wire.slow:
				e.targets.add(tg, time.Now())
				e.takeTargets()
			case <-e.wire.newConns:
				e.learn.pending = true
			case <-retry:
			case <-e.link.answered:
				e.link.retryNow()
				e.pollHistory(ctx, &every, &lastSlow)
				t.Reset(every)
			case <-t.C:
				e.pollHistory(ctx, &every, &lastSlow)
				t.Reset(every)
			}
			e.readTargets(ctx)
			e.learnThreads(ctx)
			e.scanRunning(ctx)
		}
	}()
	return done
}

// pollHistory reads history_long (and, every slowPollEvery, the slow
// reads), adapting every to what the read found.
func (e *engine) pollHistory(ctx context.Context, every *time.Duration, lastSlow *time.Time) {
	rows, lost := e.pollStatements(ctx)
	*every = e.nextInterval(*every, rows, lost)
	if time.Since(*lastSlow) >= slowPollEvery {
		e.pollSlow(ctx)
		*lastSlow = time.Now()
	}
}

// nextWake is how long the poller may sleep before a target or a thread
// read is due (false: nothing is).
func (e *engine) nextWake(now time.Time) (time.Duration, bool) {
	wait, ok := e.targets.wait(now)
	if e.cursor != nil && e.targets.current && !e.targets.failed {
		every, _ := e.targets.scanPace(now)
		w := max(e.targets.scannedAt.Add(every).Sub(now), 0)
		if !ok || w < wait {
			wait, ok = w, true
		}
	}
	if e.learn.pending {
		w := max(e.learn.at.Add(learnEvery).Sub(now), 0)
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
// threads (a storm of short connections costs one read per interval).
const learnEvery = 20 * time.Millisecond

// learnThreads reads the threads of the connections the wire saw open,
// at most every learnEvery.
func (e *engine) learnThreads(ctx context.Context) {
	if !e.learn.pending || e.cursor == nil || time.Since(e.learn.at) < learnEvery {
		return
	}
	e.learn.pending, e.learn.at = false, time.Now()
	_ = e.cursor.LearnThreads(ctx, e.db) // a failure: the next history read looks them up itself
}

// takeTargets moves the outliers queued meanwhile into the targets.
func (e *engine) takeTargets() {
	now := time.Now()
	for n := len(e.wire.slow); n > 0; n-- {
		e.targets.add(<-e.wire.slow, now)
	}
}

// rateStatus are the status variables watch reads every slowPollEvery:
// the statement rate and the server's start. The diagnosis reads the whole
// status once, at the end.
var rateStatus = []string{"Queries", "Questions", "Uptime"}

// slowPollEvery is how often thread-pool groups, status and the processlist
// mapping are read.
const slowPollEvery = time.Second

// nextInterval adapts polling to the statement rate: performance_schema's
// history_long is a ring (1,000 rows by default on MariaDB), so a busy
// server overwrites rows before a 200 ms poll reads them (measured: 25-33%
// joined under sysbench with the default ring). A poll that lost rows or
// came back more than half full halves the interval; a quiet one lets it
// grow back to the configured value.
func (e *engine) nextInterval(every time.Duration, rows int, lost int64) time.Duration {
	ring := e.info.HistoryLongSize
	if ring <= 0 {
		ring = 1000
	}
	if e.sample.on() {
		// A sampled poll returns only the sample's rows, but every
		// connection's statements fill the ring: judge by the server's rate.
		e.serverM.Lock()
		rate := e.queryRate
		e.serverM.Unlock()
		rows = max(rows, int(rate*every.Seconds()))
	}
	switch {
	case lost > 0 || rows*2 > ring:
		if every > e.opts.MinPollInterval {
			every = max(every/2, e.opts.MinPollInterval)
			e.notes.add("statement history ring (%d rows) fills between polls: polling faster; raise performance_schema_events_statements_history_long_size (startup option) on busy servers", ring)
		}
	case rows*8 < ring && every < e.opts.PollInterval:
		every = min(every*2, e.opts.PollInterval)
	}
	return every
}

// pollStatements reads new statement history rows into the joiner. When
// the server is lost it backs off and resumes (re-calibrating, and starting
// a new cursor if the server restarted); statements in the gap stay
// unjoined, and the gap is noted. The capture is never held up. It returns
// the rows the server sent (before a sample drops any: what fills the
// ring) and the rows the ring lost.
func (e *engine) pollStatements(ctx context.Context) (rows int, lost int64) {
	if e.cursor == nil || !e.link.ready(time.Now()) {
		return 0, 0
	}
	if e.link.down && !e.resume(ctx) {
		e.linkFailed(ctx)
		return 0, 0
	}
	clock, _ := e.clock.Clock()
	e.cursor.ExceptConns(e.sample.skipped()) // nil when following all: none left out
	from := e.lastPollAt
	e.lastPollAt = nowUS()
	got, lost, err := e.cursor.Poll(ctx, e.db, clock)
	e.serverM.Lock()
	e.server.Polls++
	if err != nil {
		e.server.PollErrors++
	} else {
		e.server.Rows += int64(len(got))
		e.server.RingLost += lost
	}
	e.serverM.Unlock()
	if lost > 0 && from > 0 {
		e.losses.add(from-lossSlackUS, e.lastPollAt)
	}
	if err != nil {
		if ctx.Err() == nil {
			e.notes.add("lost the server at %s (%v): statements in the gap stay unjoined; retrying with backoff, and as soon as its port answers", time.Now().Format(time.TimeOnly), err)
			e.linkFailed(ctx)
		}
		return 0, 0
	}
	read := len(got)
	if e.sample.on() {
		got = e.keepSampled(ctx, got)
	}
	sampledOut := read - len(got)
	got, dups := e.targets.dropFed(got)
	e.serverM.Lock()
	e.server.SampledOutRows += int64(sampledOut)
	e.server.DuplicateRows += int64(dups)
	e.serverM.Unlock()
	if e.noWire {
		e.addServerOnly(got) // nothing to join with: buffering them would only cost
	} else {
		e.joiner.AddServer(got, nowUS())
	}
	return read, lost
}

// serverLink tracks a lost server connection and when to retry it.
type serverLink struct {
	down    bool
	since   time.Time
	backoff time.Duration
	retryAt time.Time
	// answered gets a value when the server's port accepts a connection
	// again (probePort), to retry then rather than at the back-off's end.
	answered chan struct{}
	// stopProbe ends the probe of the last failure.
	stopProbe context.CancelFunc
}

// maxBackoff caps the wait between reconnection attempts.
const maxBackoff = 5 * time.Second

func (l *serverLink) ready(now time.Time) bool { return !l.down || !now.Before(l.retryAt) }

func (l *serverLink) failed(now time.Time, first time.Duration) {
	if !l.down {
		l.down, l.since, l.backoff = true, now, first
	} else {
		l.backoff = min(2*l.backoff, maxBackoff)
	}
	l.retryAt = now.Add(l.backoff)
}

// retryNow makes the next poll try the server at once.
func (l *serverLink) retryNow() { l.retryAt = time.Time{} }

// up ends the outage: the probe stops, the back-off starts over.
func (l *serverLink) up() {
	if l.stopProbe != nil {
		l.stopProbe()
	}
	*l = serverLink{answered: l.answered}
}

// linkFailed backs off after a failed poll or reconnection and watches the
// server's port meanwhile: a restarted server answers on it first, and
// waiting out a back-off of seconds from then would leave its statements
// unread for as long.
func (e *engine) linkFailed(ctx context.Context) {
	e.link.failed(time.Now(), e.opts.PollInterval)
	if e.link.answered == nil {
		e.link.answered = make(chan struct{}, 1)
	}
	if e.link.stopProbe != nil {
		e.link.stopProbe()
	}
	pctx, stop := context.WithCancel(ctx)
	e.link.stopProbe = stop
	go probePort(pctx, e.addr, e.link.answered)
}

// portProbeEvery is how often probePort dials the server's port while it
// is down.
const portProbeEvery = 200 * time.Millisecond

// probePort dials addr (host:port, or a socket path) every portProbeEvery
// until it accepts a connection, then sends on answered, or until ctx ends.
func probePort(ctx context.Context, addr string, answered chan<- struct{}) {
	network := "tcp"
	if strings.HasPrefix(addr, "/") {
		network = "unix"
	}
	d := net.Dialer{Timeout: portProbeEvery}
	t := time.NewTicker(portProbeEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			continue
		}
		conn.Close()
		select {
		case answered <- struct{}{}:
		default: // a wake-up is pending already
		}
		return
	}
}

// resume reconnects after a loss. A server that restarted has a new timer
// origin, new thread ids and its startup consumer settings: the clock, the
// consumers and the cursor all start over. The restart shows in the clock
// itself (the origin moves by the downtime) or in Uptime. Its statement
// history was emptied by the restart, so all it holds is new: the cursor
// reads it from its start, and the wire statements run since the restart
// wait for those rows.
func (e *engine) resume(ctx context.Context) bool {
	if err := e.db.PingContext(ctx); err != nil {
		return false
	}
	prev, _ := e.clock.Clock()
	c, calErr := collect.CalibrateWith(ctx, e.db, collect.CalibrateOptions{KeepWaitTimer: true})
	moved := calErr == nil && absInt64(c.OriginUS-prev.OriginUS) > restartJumpUS
	started, known := e.serverRestarted(ctx)
	restarted := started || moved || !known || calErr != nil
	if restarted {
		// Only a restart seen for sure has a history of new rows only; when
		// it cannot be told, reading the whole ring again could repeat rows.
		if !e.restartCursor(ctx, started || moved) {
			return false
		}
	}
	if calErr != nil { // history was off until the consumers came back
		if c, calErr = collect.CalibrateWith(ctx, e.db, collect.CalibrateOptions{KeepWaitTimer: true}); calErr != nil {
			return false
		}
	}
	e.clock.Set(c)
	if restarted {
		// The timer's origin is the server's start: what the wire saw since
		// then belongs to the new server (connection and thread ids start over).
		e.joiner.ResetSince(c.OriginUS, nowUS())
		e.targets.forget() // thread ids start over too
	}
	e.serverM.Lock()
	e.server.Reconnects++
	e.serverM.Unlock()
	what := "reconnected"
	if restarted {
		what = "the server had restarted: re-calibrated the clock and restarted the statement cursor"
		if started || moved {
			what += " from the start of its history, emptied by the restart"
		}
	}
	e.notes.add("server back at %s after %s (%s)", time.Now().Format(time.TimeOnly), time.Since(e.link.since).Round(time.Millisecond), what)
	e.link.up()
	return true
}

// restartJumpUS: a timer origin that moved more than this means a restart
// (calibration error is tens of µs).
const restartJumpUS = 100_000

// restartCursor re-reads what the server offers and starts a new cursor:
// from the history's start when fromStart (a restart emptied it, so every
// row is new), else from now on.
func (e *engine) restartCursor(ctx context.Context, fromStart bool) bool {
	caps, err := collect.GatherCapabilities(ctx, e.db)
	if err != nil {
		return false
	}
	e.caps, e.info = caps, caps.Server
	e.setIdentity()
	table := e.prepareConsumers(ctx)
	if table == "" {
		return false
	}
	c := collect.NewJoinCursor(table)
	c.ExceptBelow(outlierFloor)
	if !fromStart {
		if err := c.Prime(ctx, e.db); err != nil {
			return false
		}
	}
	e.cursor = c
	return true
}

func absInt64(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}

// serverRestarted compares when the server says it started (now − Uptime,
// good to a second) with the last start seen; known is false when it
// cannot tell.
func (e *engine) serverRestarted(ctx context.Context) (restarted, known bool) {
	start, ok := e.serverStart(ctx)
	if !ok {
		return false, false
	}
	e.serverM.Lock()
	defer e.serverM.Unlock()
	known = e.startedAt != 0
	restarted = known && start-e.startedAt > restartSlackS
	e.startedAt = start
	return restarted, known
}

// restartSlackS absorbs Uptime's one-second resolution.
const restartSlackS = 2

// serverStart returns the server's start as Unix seconds.
func (e *engine) serverStart(ctx context.Context) (int64, bool) {
	status, err := collect.GlobalStatus(ctx, e.db)
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

// addServerOnly reports server statements as such when there is no wire.
func (e *engine) addServerOnly(rows []collect.ServerStatement) {
	for i := range rows {
		s := serverStatement(&rows[i])
		e.sink.add(s)
	}
}

// pollSlow reads thread-pool groups and status, and maps connections that
// appeared without a visible handshake.
func (e *engine) pollSlow(ctx context.Context) {
	var pool []collect.PoolGroup
	if e.info.ThreadPoolTables {
		pool, _ = collect.ThreadPoolGroups(ctx, e.db)
	}
	status, err := collect.GlobalStatusOf(ctx, e.db, rateStatus...)
	e.serverM.Lock()
	if pool != nil {
		e.pool = pool
	}
	if err == nil {
		e.queryRate = statementRate(e.status, status, time.Since(e.statusAt))
		e.status, e.statusAt = status, time.Now()
		if start, ok := startFromUptime(status); ok && e.startedAt == 0 {
			e.startedAt = start
		}
	}
	e.serverM.Unlock()
	e.mapExistingConns(ctx) // the connections the governor's estimates count
	e.govern()
	_ = e.sockets.poll() // a failed read keeps the earlier ones
	_ = e.path.poll()
}

// govern lets the CPU budget change the join sample: the connections
// whose fast statements are joined (the wire side in takeWire, the server
// side's reads here). The capture always takes every connection.
func (e *engine) govern() {
	if e.gov == nil {
		return
	}
	cur := e.sample.get()
	e.gov.key = e.pivotKey
	now := time.Now()
	next := e.budgetSample(e.gov.observe(now, ownCPU(), cur.N, e.followedRate))
	if next == cur {
		return
	}
	if next.N == cur.N { // the pivot connection went: the same share, other connections
		e.gov.rekey(now, next.N)
	}
	e.serverFollows(next)
}

// budgetSample is the join sample a budgeted run keeps at 1 in n: keyed
// by the pivot connection, so that however few connections there are and
// whatever their ports hash to, a cut never leaves none joined (with
// eight connections, a sample keyed 0 held none at 1 in 4 one time in
// ten, and the governor then had to stay at 1 in 2).
func (e *engine) budgetSample(n uint16) capture.Sample {
	if n <= 1 {
		return capture.All
	}
	return capture.Sample{N: n, Key: e.pivotKey}
}

// choosePivot keeps the pivot connection while the processlist lists it,
// and otherwise picks another: a client on the wire that is not one of
// watch's own, running a command when the processlist was read if one is
// (a busy connection rather than an idle one in a pool), the lowest id
// among equals so that reads agree.
func (e *engine) choosePivot(procs []collect.Process) {
	best, bestBusy := -1, false
	for i, p := range procs {
		if _, ok := hostPort(p.Host); !ok || e.own.isOwn(p.Host) {
			continue
		}
		if p.Host == e.pivotHost {
			return
		}
		busy := p.Command != "Sleep"
		if best < 0 || (busy && !bestBusy) || (busy == bestBusy && p.ID < procs[best].ID) {
			best, bestBusy = i, busy
		}
	}
	if best < 0 {
		return // nothing to pivot on: the key stays
	}
	port, _ := hostPort(procs[best].Host)
	e.pivotHost, e.pivotKey = procs[best].Host, capture.PortKey(port)
}

// followedRate estimates the server's statements per second a 1-in-n
// sample would follow: its rate times the share of the application's
// connections the processlist last listed (on the wire) that the sample
// would hold.
func (e *engine) followedRate(n uint16) float64 {
	e.serverM.Lock()
	rate := e.queryRate
	e.serverM.Unlock()
	held, wired := e.followedConns(e.budgetSample(n))
	if wired == 0 {
		return rate / float64(n)
	}
	return rate * float64(held) / float64(wired)
}

// followedConns counts the application's connections on the wire that
// the processlist last listed, and those s follows.
func (e *engine) followedConns(s capture.Sample) (held, wired int) {
	for _, port := range e.appPorts {
		if s.Follows(port) {
			held++
		}
	}
	return held, len(e.appPorts)
}

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

// keepSampled drops the rows of connections a sampled run does not follow.
// Rows of connections opened since the last processlist read make it read
// the processlist again (at most every sampleRefresh) to classify them.
func (e *engine) keepSampled(ctx context.Context, got []collect.ServerStatement) []collect.ServerStatement {
	got, unknown := e.sample.keep(got, slowRowPS)
	if unknown && time.Since(e.sampleReadAt) >= sampleRefresh {
		e.sampleReadAt = time.Now()
		e.mapExistingConns(ctx)
		got, _ = e.sample.keep(got, slowRowPS)
	}
	return got
}

// slowRowPS: history_long rows this long on the server are read and kept
// whatever the join sample (their statements are outliers, joined on every
// connection): what the per-thread history of a busy connection has
// overwritten by the time watch reads it, the long ring may still hold.
var slowRowPS = uint64(outlierFloor.Nanoseconds()) * 1000

// sampleRefresh bounds how often new connections trigger a processlist read.
const sampleRefresh = 200 * time.Millisecond
