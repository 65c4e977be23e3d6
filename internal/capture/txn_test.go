package capture

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
)

// step is one statement of a connection: its text, response status and
// times (request first byte, response last byte).
type step struct {
	sql       string
	status    uint16
	err       bool
	req, resp int64
	wantSeq   uint32
	wantEnd   event.TxnEnd
	wantIdle  int64
	wantStart int64
}

func TestTxnTrackPlacesStatements(t *testing.T) {
	const inTrans, autocommit = statusInTrans, 0x0002
	steps := []step{
		{sql: "SELECT 1", status: autocommit, req: 0, resp: 10},
		{sql: "begin", status: autocommit | inTrans, req: 20, resp: 30, wantSeq: 1, wantStart: 20},
		{sql: "UPDATE t SET v = v + 1 WHERE id = 7", status: autocommit | inTrans, req: 40, resp: 50, wantSeq: 1, wantIdle: 10, wantStart: 20},
		// an error carries no status: it stays in the transaction
		{sql: "INSERT INTO t VALUES (1)", err: true, req: 1_300_050, resp: 1_300_060, wantSeq: 1, wantIdle: 1_300_000, wantStart: 20},
		{sql: "/* app */ commit", status: autocommit, req: 1_300_070, resp: 1_300_080, wantSeq: 1, wantEnd: event.TxnEndCommit, wantIdle: 10, wantStart: 20},
		{sql: "SELECT 2", status: autocommit, req: 1_300_100, resp: 1_300_110},
		// autocommit off: the first statement opens a transaction
		{sql: "SET autocommit = 0", status: 0, req: 1_300_200, resp: 1_300_210},
		{sql: "SELECT c FROM t WHERE id = 1 FOR UPDATE", status: inTrans, req: 1_300_300, resp: 1_300_310, wantSeq: 2, wantStart: 1_300_300},
		{sql: "START TRANSACTION", status: inTrans, req: 1_300_400, resp: 1_300_410, wantSeq: 3, wantStart: 1_300_400},
		{sql: "rollback", status: 0, req: 1_300_500, resp: 1_300_510, wantSeq: 3, wantEnd: event.TxnEndRollback, wantIdle: 90, wantStart: 1_300_400},
		{sql: "UPDATE t SET v = 1", status: inTrans, req: 1_300_600, resp: 1_300_610, wantSeq: 4, wantStart: 1_300_600},
		{sql: "ALTER TABLE t ADD COLUMN x INT", status: 0, req: 1_300_700, resp: 1_300_710, wantSeq: 4, wantEnd: event.TxnEndImplicit, wantIdle: 90, wantStart: 1_300_600},
	}
	var tr txnTrack
	for i, st := range steps {
		ex := &mysqlproto.Exchange{Cmd: comQuery, SQL: []byte(st.sql), Status: st.status, RespLast: st.resp, Results: 1}
		if st.err {
			ex.Err = &mysqlproto.ErrInfo{Code: 1062}
		}
		s := &event.Statement{TReqFirst: st.req, TRespLast: st.resp}
		tr.place(s, ex)
		got := s.TxnInfo
		want := event.TxnInfo{TxnSeq: st.wantSeq, TxnEnd: st.wantEnd, TxnIdleBeforeUS: st.wantIdle, TxnStartUS: st.wantStart}
		if got != want {
			t.Errorf("step %d (%s): got %+v, want %+v", i, st.sql, got, want)
		}
	}
}

// TestFirstKeywordOfQueriesOnly: a query's or an execution's text has a
// keyword (sqltext.FirstKeyword covers the text); other commands have none.
func TestFirstKeywordOfQueriesOnly(t *testing.T) {
	for cmd, want := range map[byte]string{comQuery: "commit", comStmtExecute: "commit", comStmtPrepare: ""} {
		if got := firstKeyword(&mysqlproto.Exchange{Cmd: cmd, SQL: []byte("/* x */ Commit work")}); got != want {
			t.Errorf("command %#x: got %q, want %q", cmd, got, want)
		}
	}
}
