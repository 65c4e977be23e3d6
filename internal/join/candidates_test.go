package join

import (
	"math/rand/v2"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// The span index only narrows which connections connOfRows tries: on
// random bursts of short-lived and long-running connections (answered
// statements, one still unanswered, a long one, threads of several rows)
// it attributes every ended thread exactly as trying every connection
// does.
func TestCandidatesAttributeAsEveryConnection(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	attributed, ambiguous := 0, 0
	for round := range 50 {
		j := New(Options{CalibrationErrorUS: 20}, func(*event.Statement) {})
		var groups [][]anonRow
		for conn := uint64(1); conn <= 60; conn++ {
			at := 1_000_000 + rnd.Int64N(200_000)
			var group []anonRow
			for k := range 1 + rnd.IntN(12) {
				service := 50 + rnd.Int64N(400)
				if rnd.IntN(40) == 0 {
					service = 2_000_000 // a long statement among the short
				}
				w := wire(conn, "COM_QUERY", "SELECT ?", at, at+service)
				if k == 0 && rnd.IntN(30) == 0 {
					w.TRespFirst, w.TRespLast = 0, 0 // no answer yet
				}
				j.AddWire(w, 0)
				r := row(conn, "statement/sql/select", "SELECT 1", at+5+rnd.Int64N(20), at+service-5)
				r.ConnID = 0
				group = append(group, anonRow{r: r})
				at += service + rnd.Int64N(300)
			}
			if rnd.IntN(3) == 0 {
				groups = append(groups, group)
			}
		}
		for g, group := range groups {
			j.thr.spans.exhaustive = false
			got := j.connOfRows(group)
			j.thr.spans.exhaustive = true
			want := j.connOfRows(group)
			if want.id != 0 {
				attributed++
			} else {
				ambiguous++
			}
			if got != want {
				t.Fatalf("round %d, thread %d (%d rows): the index attributed it to %+v, trying every connection to %+v", round, g, len(group), got, want)
			}
		}
	}
	if attributed == 0 || ambiguous == 0 {
		t.Fatalf("%d threads attributed, %d left: the test must exercise both", attributed, ambiguous)
	}
	t.Logf("%d threads attributed, %d left unattributed", attributed, ambiguous)
}
