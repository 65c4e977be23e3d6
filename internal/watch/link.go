package watch

import (
	"context"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
)

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
func (p *poller) linkFailed(ctx context.Context) {
	p.link.failed(time.Now(), p.pollEvery)
	if p.link.answered == nil {
		p.link.answered = make(chan struct{}, 1)
	}
	if p.link.stopProbe != nil {
		p.link.stopProbe()
	}
	pctx, stop := context.WithCancel(ctx)
	p.link.stopProbe = stop
	go probePort(pctx, p.addr, p.link.answered)
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
		signal(answered)
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
func (p *poller) resume(ctx context.Context) bool {
	if err := p.db.PingContext(ctx); err != nil {
		return false
	}
	prev, _ := p.clock.Clock()
	c, calErr := collect.CalibrateWith(ctx, p.db, collect.CalibrateOptions{KeepWaitTimer: true})
	moved := calErr == nil && absInt64(c.OriginUS-prev.OriginUS) > restartJumpUS
	started, known := p.serverRestarted(ctx)
	restarted := started || moved || !known || calErr != nil
	if restarted {
		// Only a restart seen for sure has a history of new rows only; when
		// it cannot be told, reading the whole ring again could repeat rows.
		if !p.restartCursor(ctx, started || moved) {
			return false
		}
	}
	if calErr != nil { // history was off until the consumers came back
		if c, calErr = collect.CalibrateWith(ctx, p.db, collect.CalibrateOptions{KeepWaitTimer: true}); calErr != nil {
			return false
		}
	}
	p.clock.Set(c)
	if restarted {
		// The timer's origin is the server's start: what the wire saw since
		// then belongs to the new server (connection and thread ids start over).
		p.joiner.ResetSince(c.OriginUS, nowUS())
		p.targets.forget() // thread ids start over too
	}
	p.side.serverM.Lock()
	p.side.server.Reconnects++
	p.side.serverM.Unlock()
	what := "reconnected"
	if restarted {
		what = "the server had restarted: re-calibrated the clock and restarted the statement cursor"
		if started || moved {
			what += " from the start of its history, emptied by the restart"
		}
	}
	p.notes.add("server back at %s after %s (%s)", time.Now().Format(time.TimeOnly), time.Since(p.link.since).Round(time.Millisecond), what)
	p.link.up()
	return true
}

// restartJumpUS: a timer origin that moved more than this means a restart
// (calibration error is tens of µs).
const restartJumpUS = 100_000

// restartCursor re-reads what the server offers and starts a new cursor:
// from the history's start when fromStart (a restart emptied it, so every
// row is new), else from now on.
func (p *poller) restartCursor(ctx context.Context, fromStart bool) bool {
	caps, err := collect.GatherCapabilities(ctx, p.db)
	if err != nil {
		return false
	}
	p.caps, p.info = caps, caps.Server
	p.setIdentity()
	table, restore := prepareConsumers(ctx, p.db, p.caps, p.enableConsumers, p.notes)
	if restore != nil {
		p.restore = restore
	}
	if table == "" {
		return false
	}
	c, err := newJoinCursor(ctx, p.db, table, !fromStart)
	if err != nil {
		return false
	}
	fitCursor(c, p.noWire)
	p.cursor = c
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
func (p *poller) serverRestarted(ctx context.Context) (restarted, known bool) {
	start, ok := p.serverStart(ctx)
	if !ok {
		return false, false
	}
	known = p.startedAt != 0
	restarted = known && start-p.startedAt > restartSlackS
	p.startedAt = start
	return restarted, known
}

// restartSlackS absorbs Uptime's one-second resolution.
const restartSlackS = 2

// learnStart records the server's start, against which a lost connection
// is told from a restart.
func (p *poller) learnStart(ctx context.Context) {
	p.startedAt, _ = p.serverStart(ctx)
}

// serverStart returns the server's start as Unix seconds.
func (p *poller) serverStart(ctx context.Context) (int64, bool) {
	status, err := collect.GlobalStatus(ctx, p.db)
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
