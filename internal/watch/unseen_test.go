package watch

import (
	"strconv"
	"testing"
	"time"
)

// A burst of new connections that the wire counts a little after the
// server (it counts at the first statement) buys a short probation of the
// fast thread reads, not unseenFor; connections the wire never sees keep
// the reads going for unseenFor from the second read that misses them.
func TestNoteUnseenForgivesALaggingWire(t *testing.T) {
	p := &statusReader{statusDeps: statusDeps{wire: testWire(), known: &known{}}}
	wire := &p.wire.connsSeen
	server := int64(100)
	read := func(serverNew, wireNew int64) time.Duration {
		server += serverNew
		wire.Add(wireNew)
		p.noteUnseen(map[string]string{"Connections": strconv.FormatInt(server, 10)})
		return time.Until(p.known.unseenUntil)
	}
	read(0, 0) // the first read is the baseline
	if left := read(40, 30); left <= 0 || left > unseenProbation {
		t.Fatalf("a burst the wire lags behind: fast reads for %s, want a probation of at most %s", left, unseenProbation)
	}
	if left := read(0, 10); left > unseenProbation {
		t.Fatalf("the wire caught up: fast reads for %s, want no more than the probation", left)
	}
	if p.unseenOwed != 0 {
		t.Fatalf("owed %d after the wire caught up, want 0", p.unseenOwed)
	}
	p.known.unseenUntil = time.Time{}
	read(6, 0) // unix-socket clients: the wire never sees them
	if left := read(6, 0); left <= unseenProbation {
		t.Fatalf("connections still unseen at the next read: fast reads for %s, want %s", left, unseenFor)
	}
	read(0, 0)
	p.known.unseenUntil = time.Time{}
	for range 5 { // watch's own connections (within the slack) and a steady churn the wire keeps up with
		if left := read(22, 20); left > 0 {
			t.Fatalf("a shortfall within the slack started the fast reads (%s)", left)
		}
	}
	// A connection-per-request churn of 120 a second that the wire runs a
	// few behind, catching up in bursts: no fast reads.
	for i := range 10 {
		wireNew := int64(120)
		if i%4 == 3 {
			wireNew = 129 // the lag made up
		}
		if left := read(123, wireNew); left > 0 {
			t.Fatalf("read %d: a lagging wire under churn started the fast reads (%s)", i, left)
		}
	}
	// Socket clients within that churn (30 a second the wire never sees)
	// are still found.
	read(150, 120)
	if left := read(150, 120); left <= unseenProbation {
		t.Fatalf("socket clients within a churn: fast reads for %s, want %s", left, unseenFor)
	}
}
