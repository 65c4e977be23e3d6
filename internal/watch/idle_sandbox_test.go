package watch

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestIdleCost runs watch at its default options beside an idle sandbox
// and bounds what it costs the host: under 1.5% of a core over 20 s and
// under 60 MB resident (the child process's: watch and the test binary's
// runtime). The CPU bound is generous so that a loaded machine cannot
// make the test flake; the measured figures (targets 0.2% and 60 MB) and
// their command are in docs/performance.md. Reads of the server that stop
// waiting for activity (ten running scans a second took ~0.8%), a capture
// ring of the old 64 MiB at the start (84-94 MB resident in all), or a
// heap that grows when nothing happens, fails it.
func TestIdleCost(t *testing.T) {
	if dsn := os.Getenv(idleChildDSN); dsn != "" {
		idleChild(t, dsn)
		return
	}
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs})
	// watch runs in a process of its own (this test binary, re-run as the
	// child above): the test process's own RSS carries every test before
	// it (a 20 MB INSERT's buffers), which is not watch's idle cost.
	child := sandbox.StartChild(t, "TestIdleCost", []string{idleChildDSN + "=" + inst.DSN("")}, idleReady)
	time.Sleep(startActiveFor + 5*time.Second) // startup's reads (variables, calibration) settle; a run starts active
	const span = 20 * time.Second
	pid := child.Cmd.Process.Pid
	t0 := procTicks(t, pid)
	time.Sleep(span)
	ticks := procTicks(t, pid) - t0
	rssKB := sandbox.StatusKB(pid, "VmRSS:")
	share := float64(ticks) / 100 / span.Seconds() // USER_HZ is 100 on Linux
	t.Logf("idle watch at defaults: %d ticks in %s (%.2f%% of a core), RSS %d kB", ticks, span, 100*share, rssKB)
	if share >= 0.015 {
		t.Errorf("idle watch used %.2f%% of a core (bound 1.5%%)", 100*share)
	}
	if rssKB >= 60_000 {
		t.Errorf("idle watch's process resident %d kB (bound 60 MB)", rssKB)
	}
}

// The child's environment variable (the server's DSN) and the line it
// prints once watch is ready.
const (
	idleChildDSN = "GAPSCOPE_IDLE_CHILD_DSN"
	idleReady    = "gapscope-idle-child-ready"
)

// idleChild runs watch at its defaults until the parent kills it.
func idleChild(t *testing.T, dsn string) {
	opts := DefaultOptions()
	opts.DSN, opts.Iface = dsn, "lo"
	opts.Ready = func(Started) { fmt.Println(idleReady) }
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	if _, err := Run(ctx, opts); err != nil {
		t.Fatal(err)
	}
}

// procTicks is a process's user + system clock ticks (/proc/PID/stat).
func procTicks(t *testing.T, pid int) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	// Fields after the command's closing parenthesis: state is field 3,
	// utime 14 and stime 15.
	f := strings.Fields(string(b[strings.LastIndexByte(string(b), ')')+2:]))
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return u + s
}

// TestIdleWatchWakesForASocketClient: once its start is behind it, watch
// beside an idle server reads only the status each second (no running
// scans; history_long, the pool groups and the processlist every
// idleEvery), and a unix-socket client, which no capture sees, wakes it
// through the server's counters: its statement is read running and its
// thread while it lives, so it is reported as the socket's, with the
// server's time. Counted, not timed: running scans at their busy pace
// through the idle span would be ten a second.
func TestIdleWatchWakesForASocketClient(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var mu sync.Mutex
	var got []event.Statement
	sink := StatementFunc(func(s *event.Statement) {
		if strings.Contains(s.DigestText, "SLEEP") { // the server's digest text (sql is redacted: "select sleep(?)")
			mu.Lock()
			got = append(got, *s)
			mu.Unlock()
		}
	})
	const idleSpan = 20 * time.Second
	var busySpan time.Duration
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", Sinks: []Sink{sink}}, func() error {
		time.Sleep(startActiveFor + idleSpan)
		began := time.Now()
		defer func() { busySpan = time.Since(began) }()
		db, err := sql.Open("mysql", inst.SocketDSN(""))
		if err != nil {
			return err
		}
		defer db.Close()
		_, err = db.ExecContext(ctx, "SELECT SLEEP(2.5)")
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	if len(got) != 1 {
		t.Fatalf("the socket client's statement reported %d times, want once: %+v", len(got), got)
	}
	if s := got[0]; s.Why != event.UnixSocket || s.ServerUS < 2_400_000 {
		t.Errorf("the socket client's statement after an idle span: why %v, server %d µs; want unix_socket and the server's 2.5 s", s.Why, s.ServerUS)
	}
	// Ten a second while active: the start, and from the status read that
	// saw the client (within a second of its start) to the end.
	active := (startActiveFor + busySpan + time.Second).Seconds()
	if bound := int64(active*10) + 10; res.ServerSide.RunningScans > bound {
		t.Errorf("%d running scans, at most %d: they ran through the idle span (%.0fs active of %.0fs)",
			res.ServerSide.RunningScans, bound, active, (startActiveFor + idleSpan + busySpan).Seconds())
	}
	t.Logf("running scans %d, history polls %d", res.ServerSide.RunningScans, res.ServerSide.Polls)
}

// TestOwnRecalibrationIsNotActivity: the clock's recalibration runs its
// marker statements through watch's pool on a goroutine of its own, once
// a minute. The server counts a statement when it takes it and watch when
// it is answered, so a status read made meanwhile saw one of watch's own
// as someone else's and kept the poller at its busy pace for a minute,
// until the next recalibration (before: 107 of 400 reads judged active
// with the recalibration running back to back). Here it runs back to back
// beside the status reads of an otherwise idle server: no read may be
// judged active, and a client's statement between reads still is.
func TestOwnRecalibrationIsNotActivity(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	own := newOwnAddrs()
	db, _, err := openServer(ctx, Options{DSN: inst.DSN(""), Iface: "lo", Secrets: collect.NewSecrets()}, own)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	clock := &collect.Recalibrator{DB: db, Options: collect.CalibrateOptions{KeepWaitTimer: true}}
	calibrating, stop := make(chan int), make(chan struct{})
	go func() {
		n := 0
		defer func() { calibrating <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			if err := clock.Once(ctx); err != nil {
				t.Error(err)
				return
			}
			n++
		}
	}()
	p := &statusReader{statusDeps: statusDeps{db: db, own: own, known: &known{}, wire: testWire()}}
	const reads = 300
	active := 0
	for range reads {
		if _, now, err := p.readStatus(ctx); err != nil {
			t.Fatal(err)
		} else if p.known.act.active(now) {
			active++
			p.known.act.until = time.Time{}
		}
		time.Sleep(2 * time.Millisecond)
	}
	close(stop)
	calibrations := <-calibrating
	t.Logf("%d status reads beside %d calibrations: %d judged active", reads, calibrations, active)
	if calibrations == 0 {
		t.Fatal("no calibration ran beside the reads")
	}
	if active > 0 {
		t.Errorf("%d of %d status reads took watch's own recalibration for someone else's statements", active, reads)
	}
	// A client on the unix socket (no wire) is still seen.
	client, err := sql.Open("mysql", inst.SocketDSN(""))
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	if _, err := client.ExecContext(ctx, "DO 1"); err != nil {
		t.Fatal(err)
	}
	if _, now, err := p.readStatus(ctx); err != nil || !p.known.act.active(now) {
		t.Errorf("a socket client's statement after the calibrations was not seen (err %v)", err)
	}
}
