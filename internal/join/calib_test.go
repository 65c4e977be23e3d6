package join

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// firstAnsweredAfter finds the same first statement as walking the queue
// would, statements without an answer taking the next one's.
func TestFirstAnsweredAfterMatchesWalk(t *testing.T) {
	j := &Joiner{}
	c := &connState{}
	for i := range 50 {
		s := &event.Statement{TReqFirst: int64(i * 100), TReqLast: int64(i*100 + 5)}
		if i%7 != 3 { // every seventh gets no answer (a COM_STMT_CLOSE)
			s.TRespFirst, s.TRespLast = int64(i*100+40), int64(i*100+60)
		}
		c.wires.push(wireItem{s: s})
	}
	for t0 := int64(-100); t0 <= 5100; t0 += 7 {
		want := c.wires.len()
		for i := 0; i < c.wires.len(); i++ {
			if answerStart(c, i) >= t0 {
				want = i
				break
			}
		}
		if got := j.firstAnsweredAfter(c, t0); got != want {
			t.Fatalf("t=%d: first %d, the walk finds %d", t0, got, want)
		}
	}
}
