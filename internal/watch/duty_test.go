package watch

import (
	"testing"
	"time"
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
