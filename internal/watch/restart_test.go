package watch

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestWatchSurvivesServerRestart: the server restarts under watch; the
// wire decoding goes on, the gap is noted, the clock and cursor start over
// (new timer origin, new thread ids) and statements after the restart are
// joined again.
func TestWatchSurvivesServerRestart(t *testing.T) {
	opts := sandbox.Options{ServerArgs: serverArgs}
	inst := sandbox.ForTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var seen []event.Statement
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
		KeepLiterals: true, Sinks: []Sink{StatementFunc(func(s *event.Statement) { seen = append(seen, *s) })}}, func() error {
		if err := queryOnce(ctx, inst, "SELECT 'before restart'"); err != nil {
			return err
		}
		time.Sleep(300 * time.Millisecond)
		if err := inst.Restart(ctx, opts); err != nil {
			return err
		}
		time.Sleep(2 * time.Second) // the poller notices, backs off, resumes
		return queryOnce(ctx, inst, "SELECT 'after restart'")
	})
	before, after := findSQL(seen, "before restart"), findSQL(seen, "after restart")
	if before == nil || after == nil {
		t.Fatalf("statements missing on the wire: before=%v after=%v", before != nil, after != nil)
	}
	if !before.Joined || !after.Joined {
		t.Errorf("joined before=%v after=%v; notes %v; join %+v", before.Joined, after.Joined, res.Notes, res.Join)
		for _, s := range seen {
			t.Logf("seen %s joined=%v conn=%s id=%d", s.SQL, s.Joined, s.Conn, s.ConnID)
		}
	}
	if res.ServerSide.Reconnects < 1 {
		t.Errorf("no reconnect counted: %+v", res.ServerSide)
	}
	if !anyContains(res.Notes, "restarted") || !anyContains(res.Notes, "lost the server") {
		t.Errorf("the gap and the restart are not in the notes: %v", res.Notes)
	}
}

func queryOnce(ctx context.Context, inst *sandbox.Instance, q string) error {
	db, err := sql.Open("mysql", inst.DSN(""))
	if err != nil {
		return err
	}
	defer db.Close()
	var s string
	return db.QueryRowContext(ctx, q).Scan(&s)
}

func findSQL(stmts []event.Statement, sub string) *event.Statement {
	for i := range stmts {
		if strings.Contains(stmts[i].SQL, sub) {
			return &stmts[i]
		}
	}
	return nil
}

func anyContains(list []string, sub string) bool {
	for _, s := range list {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// TestWatchResumesAfterServerCrash: the server is killed (SIGKILL) and
// started again 2 s later. Watch notices the port answering again and
// reconnects within moments; the statements run as soon as the server is
// back, before watch has reconnected, are joined (the restarted server's
// history holds them, read from its start), and the noted gap is close to
// the real outage.
func TestWatchResumesAfterServerCrash(t *testing.T) {
	opts := sandbox.Options{ServerArgs: serverArgs}
	inst := sandbox.ForTest(t, opts)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var seen []event.Statement
	const after = 10
	var outage time.Duration
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 250 * time.Millisecond, KeepLiterals: true,
		Sinks: []Sink{StatementFunc(func(s *event.Statement) { mu.Lock(); seen = append(seen, *s); mu.Unlock() })}}, func() error {
		if err := queryOnce(ctx, inst, "SELECT 'before crash'"); err != nil {
			return err
		}
		time.Sleep(500 * time.Millisecond)
		killed := time.Now()
		if err := inst.Kill(); err != nil {
			return err
		}
		up := portUp(ctx, inst.Addr())
		time.Sleep(2 * time.Second)
		if err := inst.Restart(ctx, opts); err != nil {
			return err
		}
		outage = (<-up).Sub(killed)
		db, err := sql.Open("mysql", inst.DSN(""))
		if err != nil {
			return err
		}
		defer db.Close()
		for i := range after { // at once: before watch can have reconnected
			var s string
			if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT 'after crash %d'", i)).Scan(&s); err != nil {
				return err
			}
		}
		time.Sleep(2 * time.Second) // the rows are read and joined
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	joined := 0
	for i := range after {
		if s := findSQL(seen, fmt.Sprintf("'after crash %d'", i)); s != nil && s.Joined {
			joined++
		}
	}
	if joined != after {
		t.Errorf("%d of %d statements run right after the restart joined; notes %v; join %+v", joined, after, res.Notes, res.Join)
	}
	gap, ok := noteGap(res.Notes)
	if !ok || !anyContains(res.Notes, "from the start of its history") {
		t.Fatalf("no restart note with its gap: %v", res.Notes)
	}
	// The outage runs from the kill until the port accepts again; the gap
	// from the first failed poll to the reconnection: less than the outage
	// by up to a poll (and by how late a loaded host runs the test's own
	// port dialling), more by the port probe's period and the
	// reconnection's own reads.
	if d := gap - outage; d < -1500*time.Millisecond || d > time.Second {
		t.Errorf("noted gap %s, real outage %s", gap, outage)
	}
	t.Logf("outage %s, noted gap %s, %d/%d joined", outage, gap, joined, after)
}

// portUp dials addr every 20 ms and sends the time it first accepts.
func portUp(ctx context.Context, addr string) <-chan time.Time {
	up := make(chan time.Time, 1)
	go func() {
		for ctx.Err() == nil {
			if c, err := net.DialTimeout("tcp", addr, 20*time.Millisecond); err == nil {
				up <- time.Now()
				c.Close()
				return
			}
			time.Sleep(20 * time.Millisecond)
		}
		up <- time.Now()
	}()
	return up
}

// noteGap returns the gap the "server back at ... after D" note gives.
func noteGap(notes []string) (time.Duration, bool) {
	for _, n := range notes {
		_, rest, ok := strings.Cut(n, "server back at ")
		if !ok {
			continue
		}
		_, rest, ok = strings.Cut(rest, " after ")
		if !ok {
			continue
		}
		d, err := time.ParseDuration(strings.Fields(rest)[0])
		return d, err == nil
	}
	return 0, false
}

// probePort signals once the port it dials starts accepting, and not
// before.
func TestProbePortSignalsWhenThePortAnswers(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the port is closed: the probe keeps dialling
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	wake, answered := make(chan struct{}, 1), &atomic.Bool{}
	go probePort(ctx, addr, answered, wake)
	time.Sleep(3 * portProbeEvery)
	select {
	case <-wake:
		t.Fatal("signalled while the port was closed")
	default:
	}
	if ln, err = net.Listen("tcp", addr); err != nil {
		t.Skipf("the port was taken meanwhile: %v", err)
	}
	defer ln.Close()
	select {
	case <-wake:
		if !answered.Load() {
			t.Error("woke the poller without saying the port answered")
		}
	case <-time.After(30 * time.Second): // a hang guard, not a timing assertion
		t.Fatal("no signal after the port started accepting")
	}
}
