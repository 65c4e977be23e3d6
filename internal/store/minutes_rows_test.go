package store

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// A statement whose rows the header-only capture could not count adds
// nothing to its minute's rows (0 there would be a count, not unknown).
func TestMinutesLeaveUnknownRowsOut(t *testing.T) {
	var m minutes
	m.add(&event.Statement{TReqFirst: 1, Digest: "d", DigestText: "select", Rows: 7}, true)
	m.add(&event.Statement{TReqFirst: 2, Digest: "d", DigestText: "select", Rows: 0, RowsBy: event.RowsCut}, true)
	m.add(&event.Statement{TReqFirst: 3, Digest: "d", DigestText: "select", Rows: 5, RowsBy: event.RowsFromServer}, true)
	r := m.rows[minuteKey{0, "d"}]
	if r == nil || r.calls != 3 || r.rows != 12 {
		t.Fatalf("minute row %+v: want 3 calls and 12 rows (the unknown call left out)", r)
	}
}
