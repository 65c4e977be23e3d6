package watch

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// Unjoined statements are counted by their reason's name, as the tally
// decided it, the reasons adding up to what was seen but not joined.
func TestCoverageTallyCountsReasons(t *testing.T) {
	var c coverageTally
	reasons := []event.Reason{event.NoRow, event.Expired, event.RingLost, event.SampledOut, event.TLS, event.UnixSocket}
	want := map[string]int64{}
	for round := range 5 {
		for i, r := range reasons[:2+round] {
			for range i + 1 {
				c.add(&event.Statement{TRespLast: 1, Why: r})
				want[r.String()]++
			}
		}
	}
	c.add(&event.Statement{Joined: true, JoinSource: "history_long"})
	// The tally decided these reasons before counting (decideReason).
	c.add(&event.Statement{Cmd: "COM_QUIT", Why: event.NoResponse})
	want[event.NoResponse.String()]++
	c.add(&event.Statement{TRespLast: 1, Why: event.NoReason})
	want[event.NoReason.String()]++
	got := c.unjoinedByReason()
	if len(got) != len(want) || c.seen != 1+sum(want) || c.joined != 1 {
		t.Fatalf("unjoined %v (seen %d), want %v", got, c.seen, want)
	}
	for r, n := range want {
		if got[r] != n {
			t.Errorf("%q: %d, want %d", r, got[r], n)
		}
	}
}

func sum(m map[string]int64) int64 {
	var n int64
	for _, v := range m {
		n += v
	}
	return n
}
