package report

import (
	"context"
	"io"
	"path/filepath"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// TestRunOutputsWrites: a run with neither an events file nor a store
// writes nothing (watch then hands it no statements); either one makes it
// write.
func TestRunOutputsWrites(t *testing.T) {
	dir := t.TempDir()
	for _, c := range []struct {
		name string
		opts RunOutputOptions
		want bool
	}{
		{"none", RunOutputOptions{}, false},
		{"events", RunOutputOptions{Events: filepath.Join(dir, "e.jsonl")}, true},
		{"store", RunOutputOptions{Command: "watch", Store: filepath.Join(dir, "s.db")}, true},
	} {
		o, err := OpenRunOutputs(context.Background(), io.Discard, c.opts)
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if got := o.Writes(); got != c.want {
			t.Errorf("%s: Writes() = %v, want %v", c.name, got, c.want)
		}
		if err := o.Close(nil); err != nil {
			t.Errorf("%s: close: %v", c.name, err)
		}
	}
}

// TestRunOutputsStoreTransactions: the transactions watch hands the run's
// outputs (through the command's sink) reach the store, committed with its statements.
func TestRunOutputsStoreTransactions(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "s.db")
	o, err := OpenRunOutputs(ctx, io.Discard, RunOutputOptions{Command: "watch", Store: path})
	if err != nil {
		t.Fatal(err)
	}
	st := event.Statement{Conn: "c", Cmd: "COM_QUERY", SQL: "UPDATE t SET a = ?", Digest: "d1", TReqFirst: 10, TReqLast: 11, TRespFirst: 500, TRespLast: 510,
		Parts: event.Parts{RequestUS: 1, ExecUS: 489, DeliveryUS: 10, ClientUS: 500}, Joined: true, TxnInfo: event.TxnInfo{TxnSeq: 1, TxnStartUS: 10},
		LockWait: &event.LockWait{LockWaitUS: 400, BlockedBy: &event.Blocker{ConnID: 8, Kind: event.LockRow, State: event.BlockerIdleInTxn, Source: event.LockSourceWire, Confidence: event.ConfidenceHigh}}}
	o.Add(&st)
	o.Transaction(&event.Transaction{Conn: "c", Seq: 1, Start: 10, End: 900, EndKind: "commit", Statements: 2, OpenUS: 890, InAppUS: 380, MaxIdleUS: 380, LockWaitUS: 400})
	if err := o.Close(nil); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	txns, err := s.Transactions(ctx, store.Query{})
	if err != nil || len(txns) != 1 || txns[0].MaxIdleUS != 380 || txns[0].LockWaitUS != 400 {
		t.Fatalf("stored transactions %+v (%v)", txns, err)
	}
	stmts, err := s.Statements(ctx, store.Query{})
	if err != nil || len(stmts) != 1 || stmts[0].LockWaitTime() != 400 || stmts[0].BlockedBy == nil || stmts[0].BlockedBy.ConnID != 8 || stmts[0].TxnSeq != 1 {
		t.Fatalf("stored statements %+v (%v)", stmts, err)
	}
}
