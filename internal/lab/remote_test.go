package lab

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func appStmt(conn, sql string, queue int64) event.Statement {
	return event.Statement{Conn: conn, User: remoteApp, Cmd: "COM_QUERY", SQL: sql, Parts: event.Parts{QueueUS: queue}, Joined: true}
}

func serverSide(conn, sql string, reqLast, respFirst int64) event.Statement {
	return event.Statement{Conn: conn, User: remoteApp, Cmd: "COM_QUERY", SQL: sql, TReqFirst: reqLast, TReqLast: reqLast, TRespFirst: respFirst}
}

// Watch's queue is held to the server side's own time per statement,
// paired by connection and order.
func TestCheckWitness(t *testing.T) {
	watched := []event.Statement{
		appStmt("c1", "select 1", 50),     // server side 200 us: fine
		appStmt("c1", "select 2", 30_000), // server side 31 ms: a real wait
		appStmt("c1", "select 3", 6000),   // server side 300 us: transit as queue
		appStmt("c2", "select 1", 0),      // no server-side twin
		{Conn: "c1", User: "other", Cmd: "COM_QUERY", SQL: "x", Parts: event.Parts{QueueUS: 99_999}, Joined: true},
	}
	side := []event.Statement{
		serverSide("c1", "select 1", 1000, 1200),
		serverSide("c1", "select 2", 5000, 36_000),
		serverSide("c1", "select 3", 40_000, 40_300),
	}
	c := checkWitness(watched, side)
	if c.Matched != 3 || c.Exceeding != 1 || c.MaxExcessUS != 5700 || c.Confirmed != 1 {
		t.Errorf("witness %+v, want 3 matched, 1 exceeding by 5700 us, 1 confirmed", c)
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
