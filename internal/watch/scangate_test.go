package watch

import (
	"os"
	"path/filepath"
	"strconv"
	"sync/atomic"
	"testing"
	"time"
)

// TestWireQuietGatesOnlyWhatTheWireSees: a running scan at the regular
// pace is skipped only while the capture runs, sees every client and has
// no command in flight.
func TestWireQuietGatesOnlyWhatTheWireSees(t *testing.T) {
	now := time.Now()
	var inFlight atomic.Int64
	var down atomic.Bool
	stat := filepath.Join(t.TempDir(), "schedstat")
	writeRuns(t, stat, 207)
	accepts := &acceptWatch{path: stat}
	accepts.recent(now.Add(-time.Hour)) // the first read
	quiet := func() *targetReader {
		return &targetReader{targetDeps: targetDeps{gauge: captureGauge{inFlight: &inFlight, down: &down, accepts: accepts}, known: &known{}}}
	}
	if !quiet().wireQuiet(now) {
		t.Fatal("nothing in flight, every client seen: not quiet")
	}
	cases := map[string]func(r *targetReader){
		"no capture, or the server not watched": func(r *targetReader) { r.gauge = neverQuiet{} },
		"capture stopped":                       func(*targetReader) { down.Store(true) },
		"a command inflight":                    func(*targetReader) { inFlight.Store(1) },
		"unseen connections":                    func(r *targetReader) { r.known.unseenUntil = now.Add(time.Second) },
		"statements unseen":                     func(r *targetReader) { r.known.shortUntil = now.Add(time.Second) },
		"a client connected":                    func(*targetReader) { writeRuns(t, stat, 209) },
	}
	for name, change := range cases {
		inFlight.Store(0)
		down.Store(false)
		p := quiet()
		change(p)
		if p.wireQuiet(now) {
			t.Errorf("%s: quiet, want the scan made", name)
		}
	}
}

// TestNoteShortfall: the server counting more statements than the wire
// took and watch sent, beyond the wire's lag, holds the scans' pace for
// unseenFor; within the slack it does not; a first read, or one without
// the counters, holds it until the next.
func TestNoteShortfall(t *testing.T) {
	p := &statusReader{statusDeps: statusDeps{wire: testWire(), own: newOwnAddrs(), known: &known{}}}
	taken := &p.wire.taken
	t0 := time.Now()
	status := func(q int64) map[string]string { return map[string]string{"Questions": strconv.FormatInt(q, 10)} }

	p.noteShortfall(status(1000), t0)
	if !p.known.shortUntil.After(t0.Add(slowPollEvery)) {
		t.Fatalf("first read: short until %v, want past the next read", p.known.shortUntil.Sub(t0))
	}
	// A second later: 1,000 statements, 950 taken by the wire, 10 watch's.
	taken.Add(950)
	p.own.pool.AddStatements(10)
	t1 := t0.Add(3 * time.Second) // past the first read's hold
	p.noteShortfall(status(2000), t1)
	if t1.Before(p.known.shortUntil) {
		t.Errorf("40 short of 1,000 (the lag): held until %v", p.known.shortUntil.Sub(t1))
	}
	// Then 1,000 more, the wire taking 500: clients it does not see.
	taken.Add(500)
	p.noteShortfall(status(3000), t1)
	if got := p.known.shortUntil.Sub(t1); got != unseenFor {
		t.Errorf("500 short of 1,000: held for %v, want %v", got, unseenFor)
	}
	p.known.shortUntil = time.Time{}
	p.noteShortfall(nil, t1)
	if !t1.Before(p.known.shortUntil) {
		t.Error("a read without the counters does not hold the scans")
	}
}

func writeRuns(t *testing.T, path string, runs int) {
	t.Helper()
	if err := os.WriteFile(path, []byte("201372307 1021394 "+strconv.Itoa(runs)+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
}

// TestAcceptWatch: a move of the main thread's run count holds the scans
// for acceptGrace from when it was read; an unreadable file holds them.
func TestAcceptWatch(t *testing.T) {
	stat := filepath.Join(t.TempDir(), "schedstat")
	writeRuns(t, stat, 10)
	a := &acceptWatch{path: stat}
	t0 := time.Now()
	if a.recent(t0) {
		t.Error("the first read counts as a connection")
	}
	writeRuns(t, stat, 12)
	if !a.recent(t0.Add(time.Second)) || !a.recent(t0.Add(time.Second+acceptGrace/2)) {
		t.Error("a connection does not hold the scans for the grace")
	}
	if a.recent(t0.Add(time.Second + acceptGrace)) {
		t.Error("the grace does not end")
	}
	os.Remove(stat)
	if !a.recent(t0.Add(time.Hour)) {
		t.Error("an unreadable count does not hold the scans")
	}
}
