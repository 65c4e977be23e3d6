package collect

import (
	"context"
	"database/sql"
	"strings"
	"testing"
	"time"
)

// A join cursor reads the start of each statement's text (the join
// compares no more), but a unix-socket client's statement is reported with
// its own text: the cursor reads that one again whole. A text the server
// cut (performance_schema_max_sql_text_length, 1,024 by default) says so;
// a cursor told to read texts whole (a run without the wire) reads every
// one whole.
func TestJoinCursorTextsSandbox(t *testing.T) {
	inst := server(t)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	mon := monitor(t)
	join, whole := NewJoinCursor(SourceHistoryLong), NewJoinCursor(SourceHistoryLong)
	whole.WholeText()
	for _, c := range []*StatementCursor{join, whole} {
		if err := c.Prime(ctx, mon); err != nil {
			t.Fatal(err)
		}
	}
	tcp, tcpID := app(t)
	sock, sockID := socketConn(t, inst.SocketDSN(""))
	tcpText := "SELECT '" + strings.Repeat("t", 300) + "' AS tcp_text"
	sockText := "SELECT '" + strings.Repeat("é", 300) + "' AS socket_text /* via_socket */"
	longText := "SELECT '" + strings.Repeat("l", 1500) + "' AS long_text"
	execAll(t, tcp, tcpText)
	execAll(t, sock, sockText, longText)

	rows := map[*StatementCursor][]ServerStatement{}
	for _, c := range []*StatementCursor{join, whole} {
		for deadline := time.Now().Add(20 * time.Second); len(ofConn(rows[c], sockID)) < 3 && time.Now().Before(deadline); {
			got, _, err := c.Poll(ctx, mon, Clock{})
			if err != nil {
				t.Fatal(err)
			}
			rows[c] = append(rows[c], got...)
			time.Sleep(20 * time.Millisecond)
		}
	}
	// find is the row of conn whose text starts with the literal's first
	// character.
	find := func(c *StatementCursor, conn uint64, lead string) ServerStatement {
		t.Helper()
		for _, r := range ofConn(rows[c], conn) {
			if strings.HasPrefix(r.SQLText, "SELECT '"+lead) {
				return r
			}
		}
		t.Fatalf("no row of connection %d starting SELECT '%s among %d", conn, lead, len(rows[c]))
		return ServerStatement{}
	}
	// The join cursor: a TCP client's text cut to its start, a socket
	// client's whole, or as whole as the server kept it.
	if r := find(join, tcpID, "t"); r.TextCut != TextCutByRead || len([]rune(r.SQLText)) != joinTextPrefix || !strings.HasPrefix(tcpText, r.SQLText) {
		t.Errorf("TCP row through the join cursor: cut %v, %d characters %q", r.TextCut, len([]rune(r.SQLText)), r.SQLText)
	}
	if r := find(join, sockID, "é"); !r.Socket || r.TextCut != TextWhole || r.SQLText != sockText {
		t.Errorf("socket row through the join cursor: socket %v cut %v text %q", r.Socket, r.TextCut, r.SQLText)
	}
	if r := find(join, sockID, "l"); r.TextCut != TextCutByServer || !strings.HasSuffix(r.SQLText, "...") ||
		len(r.SQLText) > defaultMaxSQLText || !strings.HasPrefix(longText, strings.TrimSuffix(r.SQLText, "...")) {
		t.Errorf("a text longer than the server keeps: cut %v, %d bytes, ends %q", r.TextCut, len(r.SQLText), r.SQLText[max(len(r.SQLText)-8, 0):])
	}
	// Told to read texts whole, every row is.
	if r := find(whole, tcpID, "t"); r.TextCut != TextWhole || r.SQLText != tcpText {
		t.Errorf("TCP row through a whole-text cursor: cut %v, %d bytes", r.TextCut, len(r.SQLText))
	}
	if r := find(whole, sockID, "l"); r.TextCut != TextCutByServer {
		t.Errorf("the long text through a whole-text cursor: cut %v", r.TextCut)
	}
}

// socketConn opens one connection through the server's unix socket and
// returns it with its connection id.
func socketConn(t *testing.T, dsn string) (*sql.Conn, uint64) {
	t.Helper()
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var id uint64
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return conn, id
}
