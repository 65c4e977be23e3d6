package lab

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// appStmt is watch's statement whose request's last byte left at reqLast.
func appStmt(conn, sql string, reqLast, queue int64) event.Statement {
	return event.Statement{Conn: conn, User: remoteApp, Cmd: "COM_QUERY", SQL: sql, TReqLast: reqLast, Parts: event.Parts{QueueUS: queue}, Joined: true}
}

func serverSide(conn, sql string, reqLast, respFirst int64) event.Statement {
	return event.Statement{Conn: conn, User: remoteApp, Cmd: "COM_QUERY", SQL: sql, TReqFirst: reqLast, TReqLast: reqLast, TRespFirst: respFirst}
}

// Watch's queue is held to the server side's own time per statement,
// paired by connection and order; a request the link itself held longer
// than its usual 5 ms is not counted against watch, a transit watch
// misjudged on every request is.
func TestCheckWitness(t *testing.T) {
	watched := []event.Statement{
		appStmt("c1", "select 1", -4000, 50),    // server side 200 us: fine
		appStmt("c1", "select 2", 0, 30_000),    // server side 31 ms: a real wait
		appStmt("c1", "select 3", 35_000, 6000), // server side 300 us: transit as queue
		appStmt("c2", "select 1", 50_000, 0),    // no server-side twin
		appStmt("c1", "select 4", 60_000, 3200), // the link held it 3 ms: server side 200 us
		appStmt("c1", "select 5", 70_000, 100),  // fine
		{Conn: "c1", User: "other", Cmd: "COM_QUERY", SQL: "x", Parts: event.Parts{QueueUS: 99_999}, Joined: true},
	}
	side := []event.Statement{
		serverSide("c1", "select 1", 1000, 1200),
		serverSide("c1", "select 2", 5000, 36_000),
		serverSide("c1", "select 3", 40_000, 40_300),
		serverSide("c1", "select 4", 68_000, 68_200),
		serverSide("c1", "select 5", 75_000, 75_200),
	}
	c := checkWitness(watched, side)
	if c.Matched != 5 || c.Exceeding != 1 || c.MaxExcessUS != 5700 || c.Confirmed != 1 || c.LinkHeld != 1 || c.MaxLinkHeldUS != 3000 {
		t.Errorf("witness %+v, want 5 matched, 1 exceeding by 5700 us, 1 confirmed, 1 held 3000 us by the link", c)
	}
	// Every request shifted by a transit watch misjudged: the median moves
	// with them and nothing is excused.
	for i := range watched {
		watched[i].QueueUS += 4000
	}
	if c := checkWitness(watched, side); c.Exceeding != 5 {
		t.Errorf("queue 4 ms too long on every statement: %d exceeding, want all 5", c.Exceeding)
	}
}

func TestMediansOfJoined(t *testing.T) {
	stmts := []event.Statement{
		{Joined: true, Parts: event.Parts{ClientUS: 10, RequestUS: 4, QueueUS: 1, ExecUS: 1, DeliveryUS: 4}},
		{Joined: true, Parts: event.Parts{ClientUS: 12, RequestUS: 5, QueueUS: 2, ExecUS: 1, DeliveryUS: 4}},
		{Joined: true, Parts: event.Parts{ClientUS: 30, RequestUS: 5, QueueUS: 20, ExecUS: 1, DeliveryUS: 4}},
		{Joined: false, Parts: event.Parts{ClientUS: 99}},
	}
	m := medians(stmts)
	if m.Seen != 4 || m.Joined != 3 || m.ClientUS != 12 || m.QueueUS != 2 || m.TransferUS != 9 || m.MaxQueueUS != 20 {
		t.Errorf("medians %+v", m)
	}
}
