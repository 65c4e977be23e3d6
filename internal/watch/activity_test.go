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
	a.noteStatus(t0, statusOf(100, 10), ownAt(5, 1), true) // the first read: a base, no verdict
	if a.active(t0) {
		t.Fatal("active after the first read")
	}
	t1 := t0.Add(time.Second)
	if a.noteStatus(t1, statusOf(103, 11), ownAt(8, 2), true); a.active(t1) {
		t.Fatal("watch's own 3 statements and 1 connection counted as someone else's")
	}
	t2 := t1.Add(time.Second)
	if conns := a.noteStatus(t2, statusOf(105, 11), ownAt(9, 2), true); !a.active(t2) || conns {
		t.Fatalf("a statement beyond watch's own: active %v (want true), new connections %v (want false)", a.active(t2), conns)
	}
	if !a.active(t2.Add(activeFor-time.Millisecond)) || a.active(t2.Add(activeFor)) {
		t.Fatalf("one sign keeps the poller busy for activeFor, no more")
	}
	t3 := t2.Add(2 * activeFor)
	if conns := a.noteStatus(t3, statusOf(106, 12), ownAt(10, 2), true); !conns || !a.active(t3) {
		t.Fatal("a connection watch did not open (a unix-socket client) was not seen")
	}
	t4 := t3.Add(2 * activeFor)
	if a.noteStatus(t4, map[string]string{"Uptime": "5"}, ownAt(10, 2), true); !a.active(t4) {
		t.Fatal("a status without the counters counted as idle")
	}
	t5 := t4.Add(2 * activeFor)
	if a.noteStatus(t5, statusOf(107, 12), ownAt(11, 2), true); a.active(t5) {
		t.Fatal("the read after unknown counters judged against a stale base")
	}
	t6 := t5.Add(time.Second)
	a.noteWire(t6, 0)
	if a.noteWire(t6, 3); !a.active(t6) {
		t.Fatal("statements on the wire did not count")
	}
}

// ownAt is watch's own counts with nothing under way.
func ownAt(sent, dials int64) ownCounts {
	return ownCounts{begun: sent, sent: sent, dialsBegun: dials, dials: dials}
}

// TestActivityBesideWatchsOwnStatementsUnderWay: a status read made while
// another of watch's statements was under way (the clock's recalibration)
// may find it counted by the server before watch counted it answered. It
// is judged against all that watch began, and does not become the base;
// the next read that ran alone is judged against the last one that did, so
// a client beside the first is seen there if not before.
func TestActivityBesideWatchsOwnStatementsUnderWay(t *testing.T) {
	t0 := time.Unix(1000, 0)
	var a activity
	a.noteStatus(t0, statusOf(100, 10), ownAt(5, 1), true)
	// The server counted the read and the recalibration's marker, watch
	// only the read.
	t1 := t0.Add(time.Second)
	if a.noteStatus(t1, statusOf(102, 10), ownCounts{begun: 7, sent: 6, dialsBegun: 1, dials: 1}, false); a.active(t1) {
		t.Fatal("watch's own statement under way taken for someone else's")
	}
	t2 := t1.Add(time.Second)
	if a.noteStatus(t2, statusOf(103, 10), ownAt(8, 1), true); a.active(t2) {
		t.Fatal("watch's own statements, all answered by the next read alone, taken for someone else's")
	}
	// A client's statement beside a read, one of watch's under way that
	// the server has not counted yet: not seen there, but at the next read
	// alone.
	t3 := t2.Add(time.Second)
	if a.noteStatus(t3, statusOf(105, 10), ownCounts{begun: 10, sent: 9, dialsBegun: 1, dials: 1}, false); a.active(t3) {
		t.Fatal("judged beyond what watch began")
	}
	t4 := t3.Add(time.Second)
	if a.noteStatus(t4, statusOf(107, 10), ownAt(11, 1), true); !a.active(t4) {
		t.Fatal("a client's statement beside a read with watch's own under way was never seen")
	}
	// Beyond all that watch began: seen at once.
	var b activity
	b.noteStatus(t0, statusOf(100, 10), ownAt(5, 1), true)
	if b.noteStatus(t1, statusOf(104, 10), ownCounts{begun: 7, sent: 6, dialsBegun: 1, dials: 1}, false); !b.active(t1) {
		t.Fatal("more statements than watch began were not seen")
	}
	// A connection being opened: the server may have counted it.
	var c activity
	c.noteStatus(t0, statusOf(100, 10), ownAt(5, 1), true)
	if conns := c.noteStatus(t1, statusOf(101, 11), ownCounts{begun: 6, sent: 6, dialsBegun: 2, dials: 1}, false); conns || c.active(t1) {
		t.Fatal("watch's own connection, being opened, taken for someone else's")
	}
}

// TestQuietAround: a read ran alone when nothing of watch's own was under
// way before it, it alone began meanwhile, and all had ended after it.
func TestQuietAround(t *testing.T) {
	before := ownCounts{begun: 10, sent: 10, dialsBegun: 2, dials: 2}
	for _, c := range []struct {
		name          string
		before, after ownCounts
		want          bool
	}{
		{"alone", before, ownCounts{begun: 11, sent: 11, dialsBegun: 2, dials: 2}, true},
		{"one under way before", ownCounts{begun: 11, sent: 10, dialsBegun: 2, dials: 2}, ownCounts{begun: 12, sent: 12, dialsBegun: 2, dials: 2}, false},
		{"another began meanwhile", before, ownCounts{begun: 12, sent: 12, dialsBegun: 2, dials: 2}, false},
		{"one under way after", before, ownCounts{begun: 12, sent: 11, dialsBegun: 2, dials: 2}, false},
		{"a dial meanwhile", before, ownCounts{begun: 11, sent: 11, dialsBegun: 3, dials: 3}, false},
		{"a dial under way", ownCounts{begun: 10, sent: 10, dialsBegun: 3, dials: 2}, ownCounts{begun: 11, sent: 11, dialsBegun: 3, dials: 3}, false},
	} {
		if got := quietAround(c.before, c.after); got != c.want {
			t.Errorf("%s: quietAround %v, want %v", c.name, got, c.want)
		}
	}
}
