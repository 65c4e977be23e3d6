package watch

import (
	"fmt"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// Unjoined reasons add up per reason when more of them alternate than the
// tally keeps pending, and again after a read in the middle.
func TestCoverageTallyCountsReasons(t *testing.T) {
	var c coverageTally
	reasons := make([]string, 6)
	for i := range reasons {
		reasons[i] = fmt.Sprintf("not joined: reason %d", i)
	}
	want := map[string]int64{}
	for round := range 5 {
		for i, r := range reasons[:2+round] {
			for range i + 1 {
				c.add(&event.Statement{Notes: []string{"mid-stream", r}})
				want[r]++
			}
		}
		if round == 2 {
			c.unjoinedByReason()
		}
	}
	c.add(&event.Statement{Joined: true, JoinSource: "history_long"})
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
