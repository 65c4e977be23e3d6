package report

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// TestReportStatementPagingAcrossTies: statements are read a page at a
// time; many share a start time across page boundaries, and none may be
// lost or counted twice.
func TestReportStatementPagingAcrossTies(t *testing.T) {
	start := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()
	ctx := context.Background()
	st, err := store.Open(ctx, filepath.Join(t.TempDir(), "ties.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	run, err := st.StartRun(ctx, "watch", "", start)
	if err != nil {
		t.Fatal(err)
	}
	w := st.NewWriter(run, store.WriterOptions{BatchRows: 5000})
	const n = 2*statementPage + 1234
	for i := range n {
		// runs of 7 share a time; one run of 6000 straddles two pages
		tq := start + int64(i/7)
		if i >= 3000 && i < 9000 {
			tq = start + 3000
		}
		s := event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "d", DigestText: "SELECT ?", TReqFirst: tq, Parts: event.Parts{ClientUS: 1, ExecUS: 1}, Joined: true}
		if err := w.Add(&s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}
	sum, err := summarizeStoredStatements(ctx, st, store.Query{})
	if err != nil {
		t.Fatal(err)
	}
	if sum == nil || sum.Len() != n {
		t.Fatalf("read %v statements, want %d", sum, n)
	}
	if rows := sum.TopDecomposed(10); len(rows) != 1 || rows[0].Calls != n {
		t.Errorf("digest rows %+v", rows)
	}
}
