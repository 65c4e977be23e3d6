package capture

import (
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/mysqlproto"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// Transactions from the wire. Every OK and EOF packet carries the server's
// status flags; SERVER_STATUS_IN_TRANS says whether the connection is in
// a transaction once the statement is done. Comparing it before and after
// each statement gives where transactions begin and end, and the gaps in
// between are the time the application held one open, with no SQL parsed.
const statusInTrans = 0x0001

// txnTrack is one connection's transaction state.
type txnTrack struct {
	in    bool
	seq   uint32
	start int64 // the first statement's first request byte
	// lastResp is the last response byte of the transaction's latest
	// statement: the application holds the transaction from then until
	// its next request.
	lastResp int64
}

// statusKnown reports whether ex's response ended with the server's status
// flags: an OK or EOF, not an error, an unfinished answer, a prepare's
// answer (its packets carry none without EOFs) or a stream.
func statusKnown(ex *mysqlproto.Exchange) bool {
	if ex.NoResponse || ex.Incomplete || ex.Err != nil || ex.RespLast == 0 || ex.Results == 0 {
		return false
	}
	switch ex.Cmd {
	case comStmtPrepare, comStatistics, comBinlogDump, comBinlogDumpGTID:
		return false
	}
	return true
}

const (
	comStatistics     = 0x09
	comBinlogDump     = 0x12
	comBinlogDumpGTID = 0x1e
)

// place puts s in its connection's transactions and advances the state.
// A statement whose response carried no status (an error, say) stays in
// the transaction it ran in and changes nothing: the next status tells.
func (t *txnTrack) place(s *event.Statement, ex *mysqlproto.Exchange) {
	known := statusKnown(ex)
	after := known && ex.Status&statusInTrans != 0
	if t.in && known && after && beginsTxn(ex) {
		// BEGIN inside a transaction commits the open one first: the
		// statement begins the next (the ledger ends the previous one as
		// implicit when it sees the new number).
		t.in = false
	}
	switch {
	case t.in:
		s.TxnSeq, s.TxnStartUS = t.seq, t.start
		s.TxnIdleBeforeUS = max(0, s.TReqFirst-t.lastResp)
		if known && !after {
			s.TxnEnd = endKind(ex)
			t.in = false
		}
	case after:
		t.seq++
		t.in, t.start = true, s.TReqFirst
		s.TxnSeq, s.TxnStartUS = t.seq, t.start
	}
	if t.in && s.TRespLast != 0 {
		t.lastResp = s.TRespLast
	}
}

// endKind names how a statement that left its transaction ended it, from
// its text's first keyword.
func endKind(ex *mysqlproto.Exchange) event.TxnEnd {
	switch firstKeyword(ex) {
	case "commit":
		return event.TxnEndCommit
	case "rollback":
		return event.TxnEndRollback
	}
	return event.TxnEndImplicit
}

// beginsTxn: the statement's text is BEGIN or START TRANSACTION.
func beginsTxn(ex *mysqlproto.Exchange) bool {
	switch firstKeyword(ex) {
	case "begin", "start":
		return true
	}
	return false
}

// firstKeyword is the first keyword of a query's text, lower-cased
// (sqltext.FirstKeyword), and "" for other commands.
func firstKeyword(ex *mysqlproto.Exchange) string {
	if ex.Cmd != comQuery && ex.Cmd != comStmtExecute {
		return ""
	}
	return sqltext.FirstKeyword(ex.SQL)
}
