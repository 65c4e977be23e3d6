package watch

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
)

// dutyState is where a budgeted run is in its duty cycle (governor.cycle):
// following its sample, or paused. It belongs to the poller goroutine.
type dutyState struct {
	// from is when the current cycle started (a cycle starts followed).
	from time.Time
	// pausedAt is when the capture was last paused (zero while following);
	// serverPaused, whether the server side followed it (after pauseGrace).
	pausedAt     time.Time
	serverPaused bool
	cycle        time.Duration // the governor's cycle when from was set
}

// dutyTick is the longest the poller sleeps while a duty cycle runs: it
// pauses and resumes the capture on its rounds.
const dutyTick = 250 * time.Millisecond

// dutyPoll is how often the history is read while a duty cycle follows:
// a duty cycle means the followed connection alone is busier than the
// budget, and at a saturated sysbench connection's ~4,700 statements/s
// the 1,000-row ring turns over in ~210 ms (read every 250 ms, about half
// its rows were lost). The pauses are not read at all (quiet), so the
// reads a second stay as many or fewer.
const dutyPoll = 100 * time.Millisecond

// pollDelay is the poller's next sleep: every, except in a duty cycle.
func (e *engine) pollDelay(every time.Duration) time.Duration {
	switch {
	case e.gov.cycle() <= 0:
		return every
	case e.duty.paused():
		return dutyTick
	}
	return min(every, dutyPoll)
}

// quiet reports whether the history needs no reading: the capture paused
// and the server side too (the last rows of the followed part were read in
// the grace before).
func (d *dutyState) quiet() bool { return d.paused() && d.serverPaused }

// paused reports whether the duty cycle has the capture paused.
func (d *dutyState) paused() bool { return !d.pausedAt.IsZero() }

// pauseGrace is how long after the capture pauses the server side still
// reads the sample's statement rows: the last statements captured before
// the pause finished just before it, and their rows come with the next
// reads (dutyTick apart while paused: two or three of them).
const pauseGrace = 600 * time.Millisecond

// followNow reports whether the duty cycle follows the sample at now:
// for dutyOn at the start of every cycle, all the time without one.
func (d *dutyState) followNow(now time.Time, cycle time.Duration) bool {
	if cycle != d.cycle { // a new cycle length starts a new cycle, followed
		d.from, d.cycle = now, cycle
	}
	if cycle <= 0 {
		return true
	}
	return now.Sub(d.from)%cycle < dutyOn
}

// stepDuty pauses or resumes the capture as the duty cycle says. Pausing:
// the kernel filter first (nothing more is captured), then the server's
// history of the followed connections off (when watch trims it), and after
// pauseGrace the server side's sample. Resuming undoes it in the other
// order, the history before the filter, so that every statement captured
// has its row.
func (e *engine) stepDuty(ctx context.Context, now time.Time) {
	if e.gov == nil || e.live == nil {
		return
	}
	cur := e.live.Sample()
	follow := e.duty.followNow(now, e.gov.cycle())
	switch {
	case follow && cur.Paused:
		e.resumeCapture(ctx, cur.Resumed())
	case !follow && !cur.Paused:
		e.pauseCapture(ctx, now, cur)
	case !follow && !e.duty.serverPaused && now.Sub(e.duty.pausedAt) >= pauseGrace:
		e.duty.serverPaused = true
		e.serverFollows(cur)
	}
}

func (e *engine) pauseCapture(ctx context.Context, now time.Time, cur capture.Sample) {
	cur.Paused = true
	if !e.setCapture(cur) {
		return
	}
	e.duty.pausedAt, e.duty.serverPaused = now, false
	e.trimHistory(ctx)
}

func (e *engine) resumeCapture(ctx context.Context, s capture.Sample) {
	e.duty.pausedAt, e.duty.serverPaused = time.Time{}, false
	e.serverFollows(s)
	e.trimHistory(ctx)
	e.setCapture(s)
}

// serverFollows makes the server side follow s: the rows it reads and
// keeps, sorted by the last processlist read (e.hosts).
func (e *engine) serverFollows(s capture.Sample) {
	e.sample.set(s)
	e.sample.replace(e.hosts)
}

// setCapture changes the capture's sample; on failure the budget stops
// changing it (and says so), the capture going on as it is.
func (e *engine) setCapture(s capture.Sample) bool {
	err := e.live.SetSample(s)
	if err == nil {
		return true
	}
	if !errors.Is(err, capture.ErrStopped) {
		e.notes.add("CPU budget: could not change the capture's sample (%v): following %s from then on", err, describeSample(e.live.Sample()))
	}
	e.gov = nil
	return false
}

// describeSample names what a sample follows, for notes and the live view.
func describeSample(s capture.Sample) string {
	switch {
	case s.Paused:
		return "no connection"
	case s.N <= 1:
		return "every connection"
	}
	return "1 in " + strconv.Itoa(int(s.N)) + " connections"
}
