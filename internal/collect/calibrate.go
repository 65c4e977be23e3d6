package collect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// ErrNoStatementHistory means neither events_statements_history nor
// _history_long is being filled, so statement timers cannot be read back.
var ErrNoStatementHistory = errors.New("performance_schema keeps no statement history: enable the events_statements_current " +
	"and events_statements_history consumers (UPDATE performance_schema.setup_consumers SET ENABLED='YES' " +
	"WHERE NAME IN ('events_statements_current','events_statements_history'))")

// CalibrateOptions tune CalibrateWith; the zero value is the default.
type CalibrateOptions struct {
	// Rounds is how many marker round trips to make (default 16).
	Rounds int
	// KeepWaitTimer leaves a CYCLE wait timer alone instead of switching it
	// to NANOSECOND (which needs UPDATE on performance_schema.setup_timers).
	KeepWaitTimer bool
	// Now is the wall clock (time.Now when nil), for tests.
	Now func() time.Time
}

// CalibrateWith finds the Unix origin of performance_schema's statement
// timers. It runs marker statements on one connection, noting our wall clock
// just before sending each and just after its answer, and reads back the
// marker's TIMER_START: the server started the statement after we sent it
// and before it answered, so origin lies in [before-TIMER_START,
// after-TIMER_START]. (TIMER_END is no bound: the server ends a statement
// after cleanup that follows the answer.) The narrowest bracket, or the
// intersection of all when narrower and consistent, gives the origin at its
// midpoint; ErrorUS is half its width, at most half the best round trip.
// The server's UNIX_TIMESTAMP(NOW(6)) gives ServerOffsetUS as a cross-check.
// Where the wait timer is CYCLE it is switched to NANOSECOND unless
// opts.KeepWaitTimer (CYCLE drifts ~0.1% and has its own origin).
func CalibrateWith(ctx context.Context, db *sql.DB, opts CalibrateOptions) (Clock, error) {
	if opts.Rounds <= 0 {
		opts.Rounds = 16
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	conn, err := db.Conn(ctx)
	if err != nil {
		return Clock{}, fmt.Errorf("calibrating: %w", err)
	}
	defer conn.Close()
	table, err := statementHistoryTable(ctx, conn)
	if err != nil {
		return Clock{}, err
	}
	tid, err := OwnThreadID(ctx, conn)
	if err != nil {
		return Clock{}, err
	}
	var rounds []bracket
	for i := 0; i < opts.Rounds; i++ {
		b, err := markerRound(ctx, conn, table, tid, opts.Now)
		if err != nil {
			return Clock{}, err
		}
		rounds = append(rounds, b)
	}
	rtt, err := pathRoundTrip(ctx, conn, opts.Rounds, opts.Now)
	if err != nil {
		return Clock{}, err
	}
	clock := fitOriginAcross(rounds, rtt)
	clock.CalibratedAtUS = opts.Now().UnixMicro()
	clock.Wait = waitClock(ctx, conn, opts.KeepWaitTimer)
	return clock, nil
}

// bracket is one marker round, in nanoseconds: our wall clock before and
// after, the server's timers, and the server's own NOW(6).
type bracket struct {
	beforeNS, afterNS int64
	startNS, endNS    int64 // TIMER_START/END in ns
	serverNowNS       int64 // UNIX_TIMESTAMP(NOW(6)) in ns
}

func (b bracket) lo() int64 { return b.beforeNS - b.startNS }
func (b bracket) hi() int64 { return b.afterNS - b.startNS }

// fitOrigin turns marker rounds into a Clock (pure; unit-tested).
func fitOrigin(rounds []bracket) Clock {
	best := rounds[0]
	lo, hi := best.lo(), best.hi()
	for _, b := range rounds[1:] {
		if b.hi()-b.lo() < best.hi()-best.lo() {
			best = b
		}
		lo, hi = max(lo, b.lo()), min(hi, b.hi())
	}
	if !(lo <= hi && hi-lo < best.hi()-best.lo()) {
		lo, hi = best.lo(), best.hi() // clocks moved between rounds: trust one
	}
	originNS := lo + (hi-lo)/2
	c := Clock{
		OriginUS: originNS / 1000,
		ErrorUS:  (hi - lo + 1999) / 2000, // half the width, rounded up to µs
		Samples:  len(rounds),
	}
	if best.serverNowNS != 0 {
		c.ServerOffsetUS = (best.serverNowNS - best.startNS - originNS) / 1000
	}
	return c
}

// LinkRTTFloorNS is the round trip from which the calibrating connection
// is taken to cross a network. Below it (a local socket) the round trip is
// mostly the two processes' own work, not a transit that could be split in
// halves, so brackets stay as measured.
const LinkRTTFloorNS = 1_000_000

// pathRoundTrip returns the smallest of n COM_PING round trips on conn, in
// ns: the network's round trip plus the server's least work.
func pathRoundTrip(ctx context.Context, conn *sql.Conn, n int, now func() time.Time) (int64, error) {
	best := int64(-1)
	for i := 0; i < n; i++ {
		before := now().UnixNano()
		if err := conn.PingContext(ctx); err != nil {
			return 0, fmt.Errorf("calibrating: timing the connection's round trip: %w", err)
		}
		if rt := now().UnixNano() - before; best < 0 || rt < best {
			best = rt
		}
	}
	return max(best, 0), nil
}

// fitOriginAcross is fitOrigin for a calibrating connection whose smallest
// round trip is rttNS: across a network each marker's bracket loses half
// the round trip at both ends (a transit each way, assumed equal), which
// turns a bracket as wide as the network's round trip into one as wide as
// the server's own time.
func fitOriginAcross(rounds []bracket, rttNS int64) Clock {
	if rttNS >= LinkRTTFloorNS {
		half := rttNS / 2
		narrowed := make([]bracket, len(rounds))
		for i, b := range rounds {
			b.beforeNS += half
			b.afterNS = max(b.afterNS-half, b.beforeNS)
			narrowed[i] = b
		}
		rounds = narrowed
	}
	c := fitOrigin(rounds)
	c.PathRTTUS = rttNS / 1000
	return c
}

func markerRound(ctx context.Context, conn *sql.Conn, table string, tid uint64, now func() time.Time) (bracket, error) {
	nonce := rand.Uint64() >> 1
	marker := fmt.Sprintf("%s SELECT %d AS gapscope_calibration, UNIX_TIMESTAMP(NOW(6))", Mark, nonce)
	var b bracket
	var echo uint64
	var serverNow string
	b.beforeNS = now().UnixNano()
	err := conn.QueryRowContext(ctx, marker).Scan(&echo, &serverNow)
	b.afterNS = now().UnixNano()
	if err != nil {
		return b, fmt.Errorf("calibrating: running marker: %w", err)
	}
	b.serverNowNS = parseUnixNS(serverNow)
	var start uint64
	q := fmt.Sprintf("%s SELECT TIMER_START FROM performance_schema.%s WHERE THREAD_ID = %d AND SQL_TEXT = '%s'",
		Mark, table, tid, marker)
	err = conn.QueryRowContext(ctx, q).Scan(&start)
	if errors.Is(err, sql.ErrNoRows) {
		return b, fmt.Errorf("calibrating: marker not found in performance_schema.%s (statement instruments off, or setup_actors excludes this user?)", table)
	}
	if err != nil {
		return b, fmt.Errorf("calibrating: reading marker timers: %w", err)
	}
	b.startNS = int64(start / 1000)
	return b, nil
}

// parseUnixNS parses "1795304997.094600" into nanoseconds.
func parseUnixNS(s string) int64 {
	sec, frac, _ := strings.Cut(s, ".")
	ns := int64(atoiOr(sec, 0)) * 1e9
	frac = (frac + "000000000")[:9]
	return ns + int64(atoiOr(frac, 0))
}

// statementHistoryTable picks the table to read markers back from. History
// tables are filled only while events_statements_current is on too (the
// consumer hierarchy; measured on MariaDB 10.11).
func statementHistoryTable(ctx context.Context, db queryer) (string, error) {
	on, err := readPairs(ctx, db, Mark+" SELECT NAME, ENABLED FROM performance_schema.setup_consumers", "setup_consumers")
	if err != nil {
		return "", fmt.Errorf("calibrating: %w", err)
	}
	if !isOn(on["events_statements_current"]) || !isOn(on["thread_instrumentation"]) || !isOn(on["global_instrumentation"]) {
		return "", ErrNoStatementHistory
	}
	for _, t := range []string{"events_statements_history", "events_statements_history_long"} {
		if isOn(on[t]) {
			return t, nil
		}
	}
	return "", ErrNoStatementHistory
}

// waitClock switches a CYCLE wait timer to NANOSECOND where the server has
// setup_timers and lets us, and reports which timer waits now use. A
// NANOSECOND wait timer shares the statement timer's origin.
func waitClock(ctx context.Context, conn *sql.Conn, keep bool) WaitClock {
	timers, err := readTimers(ctx, conn)
	if err != nil || timers == nil {
		return WaitClock{Timer: "NANOSECOND"} // MySQL 8.0+: fixed timers, no setup_timers
	}
	w := WaitClock{Timer: timers["wait"]}
	if w.Timer == "CYCLE" && !keep {
		_, err := conn.ExecContext(ctx, Mark+" UPDATE performance_schema.setup_timers SET TIMER_NAME = 'NANOSECOND' WHERE NAME = 'wait'")
		if err == nil {
			w.Timer = "NANOSECOND"
		}
	}
	return w
}

// Recalibrator keeps a Clock fresh: it calibrates at once, then every
// Interval, and serves the latest good Clock to any goroutine.
type Recalibrator struct {
	DB       *sql.DB
	Interval time.Duration // default 5 minutes
	Options  CalibrateOptions

	mu    sync.Mutex
	clock Clock
	err   error
}

// Clock returns the latest calibration (zero before the first succeeded)
// and the error of the latest attempt.
func (r *Recalibrator) Clock() (Clock, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.clock, r.err
}

// Once calibrates now. A new origin replaces the old one unless it is much
// less certain (a busy moment), so one noisy round cannot degrade the clock.
// Set replaces the clock whatever its error: after a server restart the
// timers have a new origin, and the old clock is wrong, not just less sure.
func (r *Recalibrator) Set(c Clock) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.clock, r.err = c, nil
}

func (r *Recalibrator) Once(ctx context.Context) error {
	c, err := CalibrateWith(ctx, r.DB, r.Options)
	r.mu.Lock()
	defer r.mu.Unlock()
	r.err = err
	if err != nil {
		return err
	}
	if r.clock.OriginUS == 0 || c.ErrorUS <= max(2*r.clock.ErrorUS, 100) {
		r.clock = c
	}
	return nil
}

// Run calibrates at once and then every Interval until ctx ends. It returns
// the first calibration's error, or nil when ctx ends.
func (r *Recalibrator) Run(ctx context.Context) error {
	if err := r.Once(ctx); err != nil {
		return err
	}
	every := r.Interval
	if every <= 0 {
		every = 5 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
			_ = r.Once(ctx) // kept in r.err; the previous clock stays in use
		}
	}
}
