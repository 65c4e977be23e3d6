package watch

import (
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
)

// A duty cycle follows for dutyOn at the start of every cycle; a new
// cycle length starts a new cycle, followed; without one, always.
func TestDutyFollowsTheStartOfEveryCycle(t *testing.T) {
	var d dutyState
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	for _, c := range []struct {
		ms     int
		cycle  time.Duration
		follow bool
	}{
		{0, 0, true}, {500, 0, true},
		{1000, 4 * time.Second, true}, // starts a 4 s cycle
		{1900, 4 * time.Second, true},
		{2000, 4 * time.Second, false},
		{4900, 4 * time.Second, false},
		{5000, 4 * time.Second, true},
		{6200, 4 * time.Second, false},
		{6300, 2 * time.Second, true}, // a new length: followed from its start
		{7300, 2 * time.Second, false},
		{8300, 2 * time.Second, true},
		{8400, 0, true},
	} {
		if got := d.followNow(at(c.ms), c.cycle); got != c.follow {
			t.Errorf("at %d ms, cycle %v: follow %v, want %v", c.ms, c.cycle, got, c.follow)
		}
	}
}

// The poller reads the history every dutyPoll while a duty cycle follows,
// wakes every dutyTick while it pauses (reading nothing once the server
// side paused too), and keeps its own interval without a cycle.
func TestDutyPollPacing(t *testing.T) {
	e := &engine{}
	if got := e.pollDelay(time.Second); got != time.Second {
		t.Errorf("no budget: %v", got)
	}
	e.gov = newGovernor(0.01, time.Unix(1000, 0), 0)
	if got := e.pollDelay(time.Second); got != time.Second {
		t.Errorf("budget, no cycle: %v", got)
	}
	e.gov.dutyShift = 2
	if got := e.pollDelay(time.Second); got != dutyPoll {
		t.Errorf("cycle, following: %v, want %v", got, dutyPoll)
	}
	if got := e.pollDelay(50 * time.Millisecond); got != 50*time.Millisecond {
		t.Errorf("cycle, following, faster interval: %v", got)
	}
	e.duty.pausedAt = time.Unix(1001, 0)
	if got := e.pollDelay(time.Second); got != dutyTick || e.duty.quiet() {
		t.Errorf("paused in its grace: %v, quiet %v", got, e.duty.quiet())
	}
	e.duty.serverPaused = true
	if !e.duty.quiet() {
		t.Error("paused on both sides: not quiet")
	}
}

// A history read that shows more than twice what the last known rate says
// the sample follows is a load the budget was not sized for.
func TestLoadJumped(t *testing.T) {
	e := &engine{sample: newConnSample(capture.All)}
	if e.loadJumped(10_000, time.Second) {
		t.Error("no budget: a jump reported")
	}
	e.gov = newGovernor(0.01, time.Unix(1000, 0), 0)
	e.queryRate = 2000
	for _, c := range []struct {
		rows    int
		elapsed time.Duration
		want    bool
	}{
		{500, 250 * time.Millisecond, false},  // 2,000/s: as known
		{1000, 250 * time.Millisecond, false}, // 4,000/s: under twice the known rate plus minFollowed
		{1000, 200 * time.Millisecond, true},  // 5,000/s
		{1000, 0, false},
	} {
		if got := e.loadJumped(c.rows, c.elapsed); got != c.want {
			t.Errorf("%d rows in %v against 2,000/s known: jumped %v, want %v", c.rows, c.elapsed, got, c.want)
		}
	}
}

// The live view says what is followed: nothing to say for every
// connection, 1 in N, or a duty cycle's pause.
func TestFollowingNote(t *testing.T) {
	for _, c := range []struct {
		s    capture.Sample
		want string
	}{
		{capture.All, ""},
		{capture.Sample{N: 8, Key: 3}, "  following 1 in 8 connections"},
		{capture.Sample{N: 8, Key: 3, Paused: true}, "  capture paused (CPU budget: following 1 in 8 connections part of the time)"},
		{capture.Sample{N: 1, Paused: true}, "  capture paused (CPU budget: following every connection part of the time)"},
	} {
		if got := followingNoteOf(c.s); got != c.want {
			t.Errorf("%+v: %q, want %q", c.s, got, c.want)
		}
	}
}
