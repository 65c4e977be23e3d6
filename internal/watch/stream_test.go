package watch

import (
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// A replica's binlog stream is reported and counted by its reason (seen =
// joined + unjoined still holds), but it is no statement: it stays out of
// the profile, the slowest statements, the connections' times, the
// diagnosis window, and the coverage's and notes' sentences name it as a
// replica's stream; its server row, without the wire, likewise.
func TestSinkCountsReplicaStreamsApart(t *testing.T) {
	for _, serverOnly := range []bool{false, true} {
		k := testTally(10, newOutputQueue(nil), serverOnly)
		stmt := &event.Statement{Conn: "10.0.0.5:40000>10.0.0.1:3306", ConnID: 9, Cmd: "COM_QUERY", SQL: "select ?",
			TReqFirst: 100, TReqLast: 100, TRespFirst: 300, TRespLast: 400, Parts: event.Parts{ClientUS: 300},
			Joined: true, JoinSource: "events_statements_history_long"}
		stream := &event.Statement{Conn: "10.0.0.7:41000>10.0.0.1:3306", ConnID: 12, Cmd: "COM_BINLOG_DUMP",
			TReqFirst: 200, TReqLast: 200, TRespFirst: 375, TRespLast: 375, Parts: event.Parts{ClientUS: 175},
			Why: event.ReplicaStream, Notes: []string{event.ReplicaStream.Text()}}
		row := &event.Statement{ConnID: 13, Cmd: "COM_BINLOG_DUMP", TReqFirst: 200, TReqLast: 200, ServerUS: 9_000_000,
			Why: event.ReplicaStream, Notes: []string{event.ReplicaStream.Text()}} // its server row (ServerOnly)
		for _, s := range []*event.Statement{stmt, stream, row} {
			k.add(s)
		}
		p := k.profile.Result()
		if p.Statements != 1 || len(p.Digests) != 1 || p.ByCommand["COM_BINLOG_DUMP"] != 0 {
			t.Errorf("server only %v: the profile counts %d statements, %d digests, by command %v: the streams must stay out",
				serverOnly, p.Statements, len(p.Digests), p.ByCommand)
		}
		if k.window.len() != 1 || len(k.worst) != 1 || k.worst[0].Cmd != "COM_QUERY" || len(k.conns) != 1 || k.unseen != nil {
			t.Errorf("server only %v: window %d, worst %d, conns %d, unseen %v: the streams must stay out", serverOnly, k.window.len(), len(k.worst), len(k.conns), k.unseen)
		}
		if k.total != 3 || k.cov.seen != 3 || k.cov.unjoinedByReason()["replica_stream"] != 2 {
			t.Errorf("server only %v: total %d, seen %d, unjoined %v: streams are reported and counted by their reason",
				serverOnly, k.total, k.cov.seen, k.cov.unjoinedByReason())
		}
		note := k.streamsNote()
		if !strings.HasPrefix(note, "2 replica binlog streams (COM_BINLOG_DUMP)") || !strings.Contains(note, "10.0.0.7:41000>10.0.0.1:3306, connection 13") {
			t.Errorf("server only %v: note %q", serverOnly, note)
		}
		c := Coverage{Seen: k.cov.seen, Unjoined: k.cov.unjoinedByReason(), ReplicaStreams: 2}
		if sum := c.Summary(); !strings.Contains(sum, "replicas: 2 replica binlog streams") || strings.Contains(sum, "not joined") {
			t.Errorf("server only %v: coverage summary:\n%s", serverOnly, sum)
		}
	}
}
