package join

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
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
			if latestStart(c, i) >= t0 {
				want = i
				break
			}
		}
		if got := j.firstAnsweredAfter(c, t0); got != want {
			t.Fatalf("t=%d: first %d, the walk finds %d", t0, got, want)
		}
	}
}

// While the clock is learnt, a row votes only for a wire statement of its
// own shape: a SLEEP row is no evidence for the point select beside it,
// though both begin with SELECT. Without a shape on either side, with a
// text the server may have cut, or for a query that may hold several
// statements, the leading keyword decides alone, as it does for matching.
func TestVotesNeedTheRowsShape(t *testing.T) {
	norm := sqltext.NewNormalizer(10)
	shapeOf := func(sql string) string { _, fp := norm.Normalize([]byte(sql)); return fp }
	j := New(Options{}, func(*event.Statement) {})
	wire := func(sql string) *event.Statement {
		return &event.Statement{Cmd: "COM_QUERY", SQL: sql, Fingerprint: shapeOf(sql)}
	}
	row := func(text string) *rowItem { return &rowItem{r: collect.ServerStatement{SQLText: text}} }
	long := "SELECT pad FROM u WHERE k = '" + strings.Repeat("x", maxShapeText) + "'" // another shape, perhaps cut
	for _, tc := range []struct {
		wire *event.Statement
		row  string
		want bool
	}{
		{wire("SELECT c FROM t WHERE id = 5"), "SELECT c FROM t WHERE id = 42", true},
		{wire("SELECT c FROM t WHERE id = 5"), "SELECT SLEEP(0.2)", false},
		{wire("SELECT c FROM t WHERE id = 5"), "SELECT c FROM u WHERE id = 5", false},
		{wire("SELECT c FROM t WHERE id = 5 /* route='/a' */"), "SELECT c FROM t WHERE id = 6 /* route='/b' */", true},
		{&event.Statement{Cmd: "COM_QUERY", SQL: "SELECT c FROM t WHERE id = 5"}, "SELECT SLEEP(0.2)", true},
		{wire("SELECT c FROM t WHERE id = 5"), "", true},
		{wire("SELECT c FROM t WHERE id = 5"), long, true},
		{wire("SELECT 1; SELECT SLEEP(0.2)"), "SELECT SLEEP(0.2)", true},
	} {
		if got := j.sameShape(tc.wire, row(tc.row)); got != tc.want {
			t.Errorf("wire %q, row %.40q: same shape %v, want %v", tc.wire.SQL, tc.row, got, tc.want)
		}
	}
}
