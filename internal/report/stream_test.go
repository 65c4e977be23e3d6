package report

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// A replica's binlog stream (an events file's, or analyze's) is no
// statement: the profile leaves it out of its counts, connections, rows
// and latencies, and says in a note how many it saw.
func TestProfileLeavesReplicaStreamsOut(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ClientLatency})
	p.Add(&event.Statement{Conn: "10.0.0.5:40000>10.0.0.1:3306", ConnID: 9, Cmd: "COM_QUERY", SQL: "select ?", DigestText: "select ?",
		Digest: "d1", TReqFirst: 100, TRespLast: 900, Parts: event.Parts{ClientUS: 800}})
	for _, conn := range []uint64{12, 13} {
		p.Add(&event.Statement{Conn: "10.0.0.7:41000>10.0.0.1:3306", ConnID: conn, Cmd: "COM_BINLOG_DUMP", TReqFirst: 200, TRespLast: 375,
			Parts: event.Parts{ClientUS: 175}, Why: event.ReplicaStream, Notes: []string{event.ReplicaStream.Text()}})
	}
	r := p.Result()
	if r.Statements != 1 || r.Connections != 1 || len(r.Digests) != 1 || r.TotalUS != 800 || r.ByCommand["COM_BINLOG_DUMP"] != 0 {
		t.Errorf("statements %d, connections %d, digests %d, total %d µs, by command %v: the streams must stay out",
			r.Statements, r.Connections, len(r.Digests), r.TotalUS, r.ByCommand)
	}
	if len(r.Notes) != 1 || !strings.HasPrefix(r.Notes[0], "2 replica binlog streams (COM_BINLOG_DUMP)") {
		t.Errorf("notes %q, want one that counts the streams", r.Notes)
	}
	s := NewStatementSummary()
	s.Add(&event.Statement{Cmd: "COM_BINLOG_DUMP", TRespLast: 375, Why: event.ReplicaStream})
	if s.Len() != 0 {
		t.Errorf("the HTML summary counts %d statements, want none", s.Len())
	}
}
