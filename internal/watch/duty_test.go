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
