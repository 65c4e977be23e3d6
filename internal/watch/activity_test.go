package watch

import (
	"strconv"
	"testing"
	"time"
)

func statusOf(queries, conns int64) map[string]string {
	return map[string]string{"Questions": strconv.FormatInt(queries, 10), "Connections": strconv.FormatInt(conns, 10)}
}

// TestActivityFromTheServersCounters: the server's counters mark activity
// only beyond what watch itself sent and opened; unknown counters count
// as activity; the wire's statements do.
func TestActivityFromTheServersCounters(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var a activity
	a.noteStatus(t0, statusOf(100, 10), 5, 1) // the first read: a base, no verdict
	if a.active(t0) {
		t.Fatal("active after the first read")
	}
	t1 := t0.Add(time.Second)
	if a.noteStatus(t1, statusOf(103, 11), 8, 2); a.active(t1) {
		t.Fatal("watch's own 3 statements and 1 connection counted as someone else's")
	}
	t2 := t1.Add(time.Second)
	if conns := a.noteStatus(t2, statusOf(105, 11), 9, 2); !a.active(t2) || conns {
		t.Fatalf("a statement beyond watch's own: active %v (want true), new connections %v (want false)", a.active(t2), conns)
	}
	if !a.active(t2.Add(activeFor-time.Millisecond)) || a.active(t2.Add(activeFor)) {
		t.Fatalf("one sign keeps the poller busy for activeFor, no more")
	}
	t3 := t2.Add(2 * activeFor)
	if conns := a.noteStatus(t3, statusOf(106, 12), 10, 2); !conns || !a.active(t3) {
		t.Fatal("a connection watch did not open (a unix-socket client) was not seen")
	}
	t4 := t3.Add(2 * activeFor)
	if a.noteStatus(t4, map[string]string{"Uptime": "5"}, 10, 2); !a.active(t4) {
		t.Fatal("a status without the counters counted as idle")
	}
	t5 := t4.Add(2 * activeFor)
	if a.noteStatus(t5, statusOf(107, 12), 11, 2); a.active(t5) {
		t.Fatal("the read after unknown counters judged against a stale base")
	}
	t6 := t5.Add(time.Second)
	a.noteWire(t6, 0)
	if a.noteWire(t6, 3); !a.active(t6) {
		t.Fatal("statements on the wire did not count")
	}
}
