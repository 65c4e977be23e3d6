package watch

import (
	"context"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
)

// startPoller reads the server on its own schedule until ctx ends. It never
// touches the capture; a slow or lost server only delays joins.
func (e *engine) startPoller(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		go func() { _ = e.clock.Run(ctx) }()
		every := e.opts.PollInterval
		t := time.NewTimer(every)
		defer t.Stop()
		lastSlow, lastPoll := time.Now(), time.Now()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			jumped := false
			if !e.duty.quiet() {
				rows, lost := e.pollStatements(ctx)
				every = e.nextInterval(every, rows, lost)
				jumped = e.loadJumped(rows, time.Since(lastPoll)) && time.Since(lastSlow) >= minSlowEvery
				lastPoll = time.Now()
			}
			if jumped || time.Since(lastSlow) >= slowPollEvery {
				e.pollSlow(ctx)
				lastSlow = time.Now()
			}
			e.stepDuty(ctx, time.Now())
			t.Reset(e.pollDelay(every))
		}
	}()
	return done
}

// rateStatus are the status variables watch reads every slowPollEvery:
// the statement rate and the server's start. The diagnosis reads the whole
// status once, at the end.
var rateStatus = []string{"Queries", "Questions", "Uptime"}

// slowPollEvery is how often thread-pool groups, status and the processlist
// mapping are read; minSlowEvery, how often at most when a load jumps
// (loadJumped).
const (
	slowPollEvery = time.Second
	minSlowEvery  = 250 * time.Millisecond
)

// loadJumped reports whether a history read of rows, elapsed after the
// one before, shows a load that the budget's sample was not sized for:
// more than twice the statements per second the server's last known rate
// says it follows. Then the rate is read again at once and the governor
// weighs it (feedForward), so that it cuts in a quarter second rather
// than a second or two: a sysbench started after watch was followed in
// full until then, 38k statements/s overflowing the ring. (A read sees at
// most the ring's rows, so the rows cannot tell the cost themselves.)
func (e *engine) loadJumped(rows int, elapsed time.Duration) bool {
	if e.gov == nil || elapsed <= 0 {
		return false
	}
	seen := float64(rows) / elapsed.Seconds()
	return seen > 2*e.followedRate(e.sample.get().Resumed().N)+minFollowed
}

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
	if e.sample.on() && !e.trim.active() {
		// A sampled poll returns only the sample's rows, but every
		// connection's statements fill the ring: judge by the server's rate.
		// With the history trimmed to the sample, the rows read are what
		// fills it.
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
		e.link.failed(time.Now(), e.opts.PollInterval)
		return 0, 0
	}
	clock, _ := e.clock.Clock()
	e.cursor.ExceptConns(e.sample.skipped()) // nil when following all: none left out
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
	if err != nil {
		if ctx.Err() == nil {
			e.notes.add("lost the server at %s (%v): statements in the gap stay unjoined; retrying with backoff", time.Now().Format(time.TimeOnly), err)
			e.link.failed(time.Now(), e.opts.PollInterval)
		}
		return 0, 0
	}
	read := len(got)
	if e.sample.on() {
		got = e.keepSampled(ctx, got)
	}
	if e.opts.NoCapture {
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

// resume reconnects after a loss. A server that restarted has a new timer
// origin, new thread ids and its startup consumer settings: the clock, the
// consumers and the cursor all start over. The restart shows in the clock
// itself (the origin moves by the downtime) or in Uptime.
func (e *engine) resume(ctx context.Context) bool {
	if err := e.db.PingContext(ctx); err != nil {
		return false
	}
	prev, _ := e.clock.Clock()
	c, calErr := collect.CalibrateWith(ctx, e.db, collect.CalibrateOptions{KeepWaitTimer: true})
	moved := calErr == nil && absInt64(c.OriginUS-prev.OriginUS) > restartJumpUS
	restarted := e.serverRestarted(ctx) || moved || calErr != nil
	if restarted {
		if !e.restartCursor(ctx) {
			return false
		}
		e.joiner.Reset() // connection and thread ids start over
		e.trim.forget()
	}
	if calErr != nil { // history was off until the consumers came back
		if c, calErr = collect.CalibrateWith(ctx, e.db, collect.CalibrateOptions{KeepWaitTimer: true}); calErr != nil {
			return false
		}
	}
	e.clock.Set(c)
	e.serverM.Lock()
	e.server.Reconnects++
	e.serverM.Unlock()
	what := "reconnected"
	if restarted {
		what = "the server had restarted: re-calibrated the clock and restarted the statement cursor"
	}
	e.notes.add("server back at %s after %s (%s)", time.Now().Format(time.TimeOnly), time.Since(e.link.since).Round(time.Millisecond), what)
	e.link = serverLink{}
	return true
}

// restartJumpUS: a timer origin that moved more than this means a restart
// (calibration error is tens of µs).
const restartJumpUS = 100_000

// restartCursor re-reads what the server offers and starts a new cursor.
func (e *engine) restartCursor(ctx context.Context) bool {
	caps, err := collect.GatherCapabilities(ctx, e.db)
	if err != nil {
		return false
	}
	e.caps, e.info = caps, caps.Server
	table := e.prepareConsumers(ctx)
	if table == "" {
		return false
	}
	c := collect.NewJoinCursor(table)
	if err := c.Prime(ctx, e.db); err != nil {
		return false
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
// good to a second) with the last start seen.
func (e *engine) serverRestarted(ctx context.Context) bool {
	start, ok := e.serverStart(ctx)
	if !ok {
		return true // cannot tell: start over, which is always safe
	}
	e.serverM.Lock()
	defer e.serverM.Unlock()
	restarted := e.startedAt == 0 || start-e.startedAt > restartSlackS
	e.startedAt = start
	return restarted
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
	e.govern(ctx)
	_ = e.sockets.poll() // a failed read keeps the earlier ones
}

// govern lets the CPU budget change the connections followed: the kernel
// filter first (the capture), then the server side's sample, into which
// the connections the processlist listed are sorted again.
func (e *engine) govern(ctx context.Context) {
	if e.gov == nil || e.live == nil {
		return
	}
	live := e.live.Sample()
	cur := live.Resumed()
	e.gov.key = e.pivotKey
	now := time.Now()
	next := e.budgetSample(e.gov.observe(now, ownCPU(), cur.N, e.followedRate))
	if next == cur {
		return
	}
	if next.N == cur.N { // the pivot connection went: the same share, other connections
		e.gov.rekey(now, next.N)
	}
	server := next
	if live.Paused { // a duty cycle's pause goes on; the next resume follows next
		next.Paused = true
		server.Paused = e.duty.serverPaused
	}
	if !e.setCapture(next) {
		return
	}
	e.serverFollows(server)
	e.trimHistory(ctx) // the history follows the new sample
}

// budgetSample is the sample a budgeted run follows at 1 in n: keyed by
// the pivot connection, so that however few connections there are and
// whatever their ports hash to, a cut never leaves none followed (with
// eight connections, a sample keyed 0 followed none at 1 in 4 one time in
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
	got, unknown := e.sample.keep(got)
	if unknown && time.Since(e.sampleReadAt) >= sampleRefresh {
		e.sampleReadAt = time.Now()
		e.mapExistingConns(ctx)
		got, _ = e.sample.keep(got)
	}
	return got
}

// sampleRefresh bounds how often new connections trigger a processlist read.
const sampleRefresh = 200 * time.Millisecond
