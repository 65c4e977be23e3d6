package watch

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// A slow statement that ends just before watch stops is still joined from
// its thread's own history (the run's end reads the threads of the
// outliers the poller had no time for), at watch's default flags.
func TestOutlierJoinedAtTheEnd(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, inst), "lo"
	var mu sync.Mutex
	var slow []event.Statement
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(strings.ToUpper(s.SQL), "SLEEP") {
			slow = append(slow, *s)
		}
	}))
	ready := make(chan struct{})
	opts.Ready = func(Started) { close(ready) }
	wctx, stop := context.WithCancel(ctx)
	done := make(chan *Result, 1)
	go func() {
		res, err := Run(wctx, opts)
		if err != nil {
			t.Error(err)
		}
		done <- res
	}()
	<-ready
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "SELECT SLEEP(0.15)"); err != nil {
		t.Fatal(err)
	}
	// The capture hands over a partly filled block after 100 ms at a
	// trickle; stop just after that.
	time.Sleep(150 * time.Millisecond)
	stop()
	res := <-done
	mu.Lock()
	defer mu.Unlock()
	if len(slow) != 1 {
		t.Fatalf("%d SLEEP statements reported, want 1", len(slow))
	}
	s := slow[0]
	t.Logf("%+v; server side %+v", s, res.ServerSide)
	if !s.Joined || !s.Outlier || !slices.Contains([]string{collect.SourceHistory, collect.SourceCurrent}, s.JoinSource) {
		t.Errorf("the last slow statement: joined %v, outlier %v, source %q, notes %v", s.Joined, s.Outlier, s.JoinSource, s.Notes)
	}
	if s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS || s.ExecUS < 140_000 {
		t.Errorf("parts %+v", s)
	}
}

// A client that quits right after a slow statement takes its thread's
// history with it, and a busy server's history_long turns over: the row
// read while the statement ran joins it, its end taken from the wire.
func TestOutlierOfAConnectionThatQuit(t *testing.T) {
	args := append(slices.Clone(serverArgs), "--performance-schema-events-statements-history-long-size=10")
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: args})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, inst), "lo"
	var mu sync.Mutex
	var slow []event.Statement
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(strings.ToUpper(s.SQL), "SLEEP") {
			slow = append(slow, *s)
		}
	}))
	res := runDuring(t, ctx, opts, func() error {
		quitter, err := inst.Open("")
		if err != nil {
			return err
		}
		if _, err := quitter.ExecContext(ctx, "SELECT SLEEP(0.3)"); err != nil {
			return err
		}
		quitter.Close() // the thread ends at once
		busy, err := inst.Open("")
		if err != nil {
			return err
		}
		defer busy.Close()
		for i := range 200 { // turn the 10-row history_long over many times
			if _, err := busy.ExecContext(ctx, "SELECT "+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		time.Sleep(time.Second)
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	if len(slow) != 1 {
		t.Fatalf("%d SLEEP statements reported, want 1", len(slow))
	}
	s := slow[0]
	t.Logf("%+v; server side %+v", s, res.ServerSide)
	// SLEEP(0.3) runs longer on a loaded host: its exec is bounded by the
	// client's time, not by a figure.
	if !s.Joined || s.ExecUS < 290_000 || s.ExecUS > s.ClientUS {
		t.Errorf("the slow statement of a connection that quit: joined %v, exec %d µs, source %q, notes %v", s.Joined, s.ExecUS, s.JoinSource, s.Notes)
	}
	if s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS {
		t.Errorf("parts do not sum: %+v", s)
	}
}

// A pool closes its connections right after a burst, before watch reads
// the burst's rows: performance_schema no longer says which connection
// each thread served, and four busy connections' rows each fit several of
// them. Every statement still joins, each thread read while alive or
// identified from the wire statements its rows fit. A connection that stays open runs
// a few statements first, read and joined before the burst, as on a
// server watch has been following: the joiner has learnt the clock's
// offset from them (rows of ended threads alone cannot teach it).
func TestBurstOfClosedConnectionsJoined(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, inst), "lo"
	// The first read after the start comes after the burst is over.
	opts.PollInterval, opts.MinPollInterval = 3*time.Second, 3*time.Second
	var mu sync.Mutex
	var sel []event.Statement
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		defer mu.Unlock()
		if strings.ToUpper(s.SQL) == "SELECT ? + ?" {
			sel = append(sel, *s)
		}
	}))
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	db.SetMaxIdleConns(0) // a connection given back is closed
	const workers, each = 4, 300
	res := runDuring(t, ctx, opts, func() error {
		keep, err := db.Conn(ctx) // held: open until the run ends
		if err != nil {
			return err
		}
		defer keep.Close()
		for i := range 50 {
			if _, err := keep.ExecContext(ctx, "DO "+strconv.Itoa(i)); err != nil {
				return err
			}
		}
		time.Sleep(opts.PollInterval + 500*time.Millisecond) // the first read joins them
		var g errgroup
		for w := range workers {
			g.Go(func() error {
				c, err := db.Conn(ctx)
				if err != nil {
					return err
				}
				defer c.Close()
				for i := range each {
					var v int64
					if err := c.QueryRowContext(ctx, "SELECT "+strconv.Itoa(w)+" + "+strconv.Itoa(i)).Scan(&v); err != nil {
						return err
					}
				}
				return nil
			})
		}
		err = g.Wait()
		time.Sleep(opts.PollInterval + time.Second) // the next read, then the join
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	t.Log(res.Coverage.Summary())
	var joined int
	for _, s := range sel {
		if s.Joined {
			joined++
		}
	}
	if joined != len(sel) {
		logFirstUnjoined(t, sel)
	}
	if len(sel) != workers*each || joined != len(sel) {
		t.Errorf("%d of %d statements seen, %d joined", len(sel), workers*each, joined)
	}
	// The poller reads a new connection's thread as soon as the wire sees
	// its handshake, and can win the race with a burst this short: then
	// the join had the threads already and the identification from the
	// wire (its logic is held by the join package's tests) was not needed.
	if res.Coverage.ThreadsFromWire == 0 {
		t.Logf("every burst thread was read while alive: the identification from the wire was not exercised")
	}
}

// errgroup runs functions and keeps the first error.
type errgroup struct {
	wg   sync.WaitGroup
	once sync.Once
	err  error
}

func (g *errgroup) Go(f func() error) {
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		if err := f(); err != nil {
			g.once.Do(func() { g.err = err })
		}
	}()
}

func (g *errgroup) Wait() error {
	g.wg.Wait()
	return g.err
}

// logFirstUnjoined shows the first unjoined statement among its
// connection's neighbours: a misaligned join shows as rows shifted by one.
func logFirstUnjoined(t *testing.T, sel []event.Statement) {
	i := slices.IndexFunc(sel, func(s event.Statement) bool { return !s.Joined })
	if i < 0 {
		return
	}
	for k := max(i-3, 0); k < min(i+4, len(sel)); k++ {
		if x := sel[k]; x.ConnID == sel[i].ConnID {
			t.Logf("conn %d req %d resp %d..%d joined %v: queue %d exec %d delivery %d server %d, notes %v",
				x.ConnID, x.TReqFirst, x.TRespFirst, x.TRespLast, x.Joined, x.QueueUS, x.ExecUS, x.DeliveryUS, x.ServerUS, x.Notes)
		}
	}
}

// A slow statement on a busy connection: the connection runs point selects
// back to back and, every ~300 ms, a 30 ms SLEEP, so that ten statements
// follow each SLEEP within milliseconds and its thread's 10-row history has
// moved past it by the time watch reads it. history_long (1,000 rows, read
// every 3 s) holds each SLEEP for a few percent of that time only, but
// gives the joiner enough consecutive rows to learn the server's clock.
// The row read while the SLEEP ran joins it, its end taken from the wire;
// only the first may be missed (the running scans speed up once a busy
// connection's outlier was found rolled over).
func TestOutlierOfABusyConnectionJoined(t *testing.T) {
	args := append(slices.Clone(serverArgs), "--performance-schema-events-statements-history-long-size=1000")
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: args})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	setup, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{"CREATE DATABASE busy", "CREATE TABLE busy.t (id INT PRIMARY KEY, v INT)",
		"INSERT INTO busy.t SELECT seq, seq FROM busy.seq_1_to_100"} {
		if _, err := setup.ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	setup.Close()
	opts := DefaultOptions()
	opts.DSN, opts.Iface = monitorDSN(t, inst), "lo"
	opts.PollInterval, opts.MinPollInterval = 3*time.Second, 3*time.Second
	var mu sync.Mutex
	var slow []event.Statement
	var fast int
	opts.Sinks = append(opts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		defer mu.Unlock()
		if strings.Contains(strings.ToUpper(s.SQL), "SLEEP") {
			slow = append(slow, *s)
		} else if strings.HasPrefix(s.SQL, "select v from busy.t") {
			fast++
		}
	}))
	const slowCount, sleepUS = 20, 30_000
	res := runDuring(t, ctx, opts, func() error {
		db, err := inst.Open("")
		if err != nil {
			return err
		}
		defer db.Close()
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		defer c.Close()
		next := time.Now().Add(300 * time.Millisecond)
		for i, sent := 0, 0; sent < slowCount; i++ {
			q := "SELECT v FROM busy.t WHERE id = " + strconv.Itoa(1+i%100)
			if time.Now().After(next) {
				q, next = "SELECT SLEEP(0.03)", time.Now().Add(300*time.Millisecond)
				sent++
			}
			if _, err := c.ExecContext(ctx, q); err != nil {
				return err
			}
		}
		for range 20 { // the statements that push the last SLEEP out of its thread's history
			if _, err := c.ExecContext(ctx, "SELECT v FROM busy.t WHERE id = 1"); err != nil {
				return err
			}
		}
		time.Sleep(time.Second)
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	t.Log(res.Coverage.Summary())
	var joined, wrong int
	for _, s := range slow {
		if !s.Joined {
			continue
		}
		joined++
		// A loaded host may oversleep: the statement's own client time
		// bounds its exec then.
		if s.ExecUS < sleepUS*9/10 || s.ExecUS > max(sleepUS*11/10, s.ClientUS) || s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS {
			wrong++
			t.Errorf("SLEEP joined from %q: exec %d µs, parts %d+%d+%d+%d+%d of %d µs", s.JoinSource, s.ExecUS,
				s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS, s.ClientUS)
		}
	}
	t.Logf("%d point selects seen; %d of %d SLEEP statements joined (%d with wrong parts); by source %v",
		fast, joined, len(slow), wrong, res.Coverage.JoinedBySource)
	if len(slow) != slowCount {
		t.Fatalf("%d SLEEP statements reported, want %d", len(slow), slowCount)
	}
	if fast < 100*slowCount {
		t.Errorf("%d point selects, want at least %d: too few to push each SLEEP out of its thread's history", fast, 100*slowCount)
	}
	if joined < slowCount-1 {
		for _, s := range slow {
			if !s.Joined {
				t.Logf("unjoined: client %d µs, notes %v", s.ClientUS, s.Notes)
				break
			}
		}
		t.Errorf("%d of %d slow statements of a busy connection joined, want at least %d", joined, slowCount, slowCount-1)
	}
}
