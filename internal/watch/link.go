package watch

import (
	"context"
	"net"
	"strings"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
)

// serverLink tracks a lost server connection and when to retry it.
type serverLink struct {
	down    bool
	since   time.Time
	backoff time.Duration
	retryAt time.Time
	// wake is the poller's: the probe of the last failure (probePort)
	// wakes it when the server's port accepts a connection again, to retry
	// then rather than at the back-off's end; stopProbe ends that probe.
	wake      chan struct{}
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
	*l = serverLink{wake: l.wake}
}

// linkFailed backs off after a failed poll or reconnection and watches the
// server's port meanwhile: a restarted server answers on it first, and
// waiting out a back-off of seconds from then would leave its statements
// unread for as long.
func (h *historyReader) linkFailed(ctx context.Context) {
	h.link.failed(time.Now(), h.pollEvery)
	if h.link.stopProbe != nil {
		h.link.stopProbe()
	}
	pctx, stop := context.WithCancel(ctx)
	h.link.stopProbe = stop
	go probePort(pctx, h.addr, h.answered, h.link.wake)
}

// portProbeEvery is how often probePort dials the server's port while it
// is down.
const portProbeEvery = 200 * time.Millisecond

// probePort dials addr (host:port, or a socket path) every portProbeEvery
// until it accepts a connection, then sets answered and wakes the poller,
// or until ctx ends.
func probePort(ctx context.Context, addr string, answered *atomic.Bool, wake chan struct{}) {
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
		answered.Store(true)
		signal(wake)
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
func (h *historyReader) resume(ctx context.Context) bool {
	if err := h.db.PingContext(ctx); err != nil {
		return false
	}
	prev, _ := h.clock.Clock()
	c, calErr := collect.CalibrateWith(ctx, h.db, collect.CalibrateOptions{KeepWaitTimer: true})
	moved := calErr == nil && absInt64(c.OriginUS-prev.OriginUS) > restartJumpUS
	started, known := h.serverRestarted(ctx)
	restarted := started || moved || !known || calErr != nil
	if restarted {
		// Only a restart seen for sure has a history of new rows only; when
		// it cannot be told, reading the whole ring again could repeat rows.
		if !h.restartCursor(ctx, started || moved) {
			return false
		}
	}
	if calErr != nil { // history was off until the consumers came back
		if c, calErr = collect.CalibrateWith(ctx, h.db, collect.CalibrateOptions{KeepWaitTimer: true}); calErr != nil {
			return false
		}
	}
	h.clock.Set(c)
	if restarted {
		// The timer's origin is the server's start: what the wire saw since
		// then belongs to the new server (connection and thread ids start over).
		h.joiner.ResetSince(c.OriginUS, nowUS())
	}
	h.side.serverM.Lock()
	h.side.server.Reconnects++
	h.side.serverM.Unlock()
	what := "reconnected"
	if restarted {
		what = "the server had restarted: re-calibrated the clock and restarted the statement cursor"
		if started || moved {
			what += " from the start of its history, emptied by the restart"
		}
	}
	h.notes.add("server back at %s after %s (%s)", time.Now().Format(time.TimeOnly), time.Since(h.link.since).Round(time.Millisecond), what)
	h.link.up()
	return true
}

// restartJumpUS: a timer origin that moved more than this means a restart
// (calibration error is tens of µs).
const restartJumpUS = 100_000

// restartCursor re-reads what the server offers and starts a new cursor:
// from the history's start when fromStart (a restart emptied it, so every
// row is new), else from now on.
func (h *historyReader) restartCursor(ctx context.Context, fromStart bool) bool {
	caps, err := collect.GatherCapabilities(ctx, h.db)
	if err != nil {
		return false
	}
	h.known.caps, h.known.info = caps, caps.Server
	h.side.setIdentity(caps.Server)
	table, restore := prepareConsumers(ctx, h.db, caps, h.enableConsumers, h.notes)
	h.consumers.replace(restore)
	if table == "" {
		return false
	}
	c, err := newJoinCursor(ctx, h.db, table, !fromStart, h.noWire)
	if err != nil {
		return false
	}
	h.cursor.set(c) // thread ids start over: the targets forget theirs
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
func (h *historyReader) serverRestarted(ctx context.Context) (restarted, known bool) {
	start, ok := serverStart(ctx, h.db)
	if !ok {
		return false, false
	}
	known = h.known.startedAt != 0
	restarted = known && start-h.known.startedAt > restartSlackS
	h.known.startedAt = start
	return restarted, known
}

// restartSlackS absorbs Uptime's one-second resolution.
const restartSlackS = 2
