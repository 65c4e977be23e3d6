package export

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func TestOperationAndSummary(t *testing.T) {
	cases := []struct {
		cmd, text, op, summary string
	}{
		{"COM_QUERY", "select * from orders where id = ?", "SELECT", "SELECT orders"},
		{"COM_QUERY", "/* x */ (select a from `t1` join t2)", "SELECT", "SELECT t1"},
		{"COM_STMT_EXECUTE", "insert into shop.items values (...)", "INSERT", "INSERT shop.items"},
		{"COM_QUERY", "update t set v = v + ? where id = ?", "UPDATE", "UPDATE t"},
		{"COM_QUERY", "select sleep(?)", "SELECT", "SELECT"},
		{"COM_QUERY", "select * from (select 1) x", "SELECT", "SELECT"},
		{"COM_PING", "", "PING", "PING"},
		{"COM_INIT_DB", "", "INIT_DB", "INIT_DB"},
	}
	for _, c := range cases {
		s := &event.Statement{Cmd: c.cmd, DigestText: c.text}
		if op, sum := Operation(s), Summary(s); op != c.op || sum != c.summary {
			t.Errorf("%s %q: %q / %q, want %q / %q", c.cmd, c.text, op, sum, c.op, c.summary)
		}
	}
}

func TestCause(t *testing.T) {
	s := &event.Statement{Joined: true, Parts: event.Parts{QueueUS: 5, ExecUS: 9, DeliveryUS: 2}}
	if got := Cause(s); got != "exec" {
		t.Errorf("cause %q, want exec", got)
	}
	s.SendStallUS = 10
	if got := Cause(s); got != "send_stall" {
		t.Errorf("cause %q, want send_stall", got)
	}
	if got := Cause(&event.Statement{Parts: event.Parts{ExecUS: 5}}); got != "unjoined" {
		t.Errorf("unjoined cause %q", got)
	}
}

func TestFingerprintStableAcrossJoin(t *testing.T) {
	s := &event.Statement{Cmd: "COM_QUERY", Fingerprint: "abc", Digest: "server"}
	if Fingerprint(s) != "abc" {
		t.Errorf("fingerprint %q, want the wire's", Fingerprint(s))
	}
	p1, p2 := Fingerprint(&event.Statement{Cmd: "COM_PING"}), Fingerprint(&event.Statement{Cmd: "COM_PING"})
	if p1 == "" || p1 != p2 || p1 == Fingerprint(&event.Statement{Cmd: "COM_QUIT"}) {
		t.Errorf("commands without text: %q %q", p1, p2)
	}
}
