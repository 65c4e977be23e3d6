package diagnose

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// Evidence sums rows over the statements whose rows are known and counts
// the others apart.
func TestEvidenceLeavesUnknownRowsOut(t *testing.T) {
	stmts := []*event.Statement{
		{Digest: "d", DigestText: "select", Rows: 4, Parts: event.Parts{ExecUS: 10}},
		{Digest: "d", DigestText: "select", RowsBy: event.RowsCut, Parts: event.Parts{ExecUS: 20}},
		{Digest: "d", DigestText: "select", Rows: 6, RowsBy: event.RowsFromServer, Parts: event.Parts{ExecUS: 30}},
	}
	var p parts
	for _, s := range stmts {
		p.add(s)
	}
	if p.N != 3 || p.Rows != 10 || p.RowsUnknown != 1 {
		t.Errorf("parts: %d statements, rows %d, unknown %d; want 3, 10, 1", p.N, p.Rows, p.RowsUnknown)
	}
	tallies := digestTallies(stmts, func(s *event.Statement) int64 { return s.ExecUS })
	if len(tallies) != 1 || tallies[0].Rows != 10 || tallies[0].RowsUnknown != 1 {
		t.Errorf("digest tallies %+v: want one with rows 10 and 1 unknown", tallies)
	}
}
