package watch

import (
	"context"
	"database/sql"
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// TestSampledSysbench runs sysbench on 16 connections under watch with
// --sample 2 --enable-consumers: the statements reported come from the
// connections whose client port the sample follows, and only from them,
// and are joined as a full run's are; the server's statement history is
// kept to the followed connections while watch runs (threads.HISTORY) and
// given back to every connection when it stops.
func TestSampledSysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServer(t, 16, 8*time.Second)
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	// Idle connections that outlive the run, some in the sample, some out.
	idle := make([]*sql.Conn, 8)
	for i := range idle {
		if idle[i], err = db.Conn(ctx); err != nil {
			t.Fatal(err)
		}
		defer idle[i].Close()
		if _, err := idle[i].ExecContext(ctx, "USE sbtest"); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	total, joined := 0, 0
	ports := map[uint16]int{}
	var during []threadHistory
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
		Sample: 2, EnableConsumers: true, OnStatement: func(s *event.Statement) {
			mu.Lock()
			defer mu.Unlock()
			total++
			if s.Joined {
				joined++
			}
			ports[clientPort(t, s.Conn)]++
		}}, func() error {
		probe := time.AfterFunc(4*time.Second, func() {
			th := readThreadHistory(t, ctx, db)
			mu.Lock()
			defer mu.Unlock()
			during = th
		})
		defer probe.Stop()
		_, err := workload.Sysbench(ctx, inst.DSN(""), opts, "run")
		return err
	})
	t.Logf("%d statements from %d connections, %d joined; join %+v; notes %v", total, len(ports), joined, res.Join, res.Notes)
	if len(ports) == 0 || len(ports) >= 16 {
		t.Fatalf("statements of %d connections under --sample 2 (16 ran)", len(ports))
	}
	for port, n := range ports {
		if !(capture.Sample{N: 2}).Follows(port) {
			t.Errorf("%d statements of unsampled client port %d", n, port)
		}
	}
	if joined*100 < total*99 {
		t.Errorf("joined %d of %d sampled statements, want >= 99%%", joined, total)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "sampling 1 in 2 connections") || !strings.Contains(notes, "kept the statement history to the followed connections") {
		t.Errorf("the run does not say it sampled and kept the history to the sample: %v", res.Notes)
	}
	mu.Lock()
	defer mu.Unlock()
	checkHistoryFollowsSample(t, during, capture.Sample{N: 2})
	for _, th := range readThreadHistory(t, ctx, db) {
		if !th.history {
			t.Errorf("connection %d (%s) still has its history off after watch stopped", th.id, th.host)
		}
	}
}

// threadHistory is one client connection's performance_schema history flag.
type threadHistory struct {
	id      uint64
	host    string
	history bool
}

// readThreadHistory reads the history flag of the connections in sbtest.
func readThreadHistory(t *testing.T, ctx context.Context, db *sql.DB) []threadHistory {
	rows, err := db.QueryContext(ctx, `SELECT p.ID, p.HOST, t.HISTORY FROM information_schema.PROCESSLIST p
		JOIN performance_schema.threads t ON t.PROCESSLIST_ID = p.ID WHERE p.DB = 'sbtest'`)
	if err != nil {
		t.Error(err)
		return nil
	}
	defer rows.Close()
	var out []threadHistory
	for rows.Next() {
		var th threadHistory
		var flag string
		if err := rows.Scan(&th.id, &th.host, &flag); err != nil {
			t.Error(err)
			return nil
		}
		th.history = flag == "YES"
		out = append(out, th)
	}
	return out
}

// checkHistoryFollowsSample: while watch ran, a connection's history was on
// exactly when the sample followed its client port (connections that
// opened within the last processlist read may not be sorted yet).
func checkHistoryFollowsSample(t *testing.T, during []threadHistory, s capture.Sample) {
	t.Helper()
	in, out := 0, 0
	for _, th := range during {
		port, ok := hostPort(th.host)
		if !ok {
			continue
		}
		if s.Follows(port) {
			in++
		} else {
			out++
		}
		if th.history != s.Follows(port) {
			t.Errorf("connection %d (port %d) had its history on=%v while watch followed it=%v", th.id, port, th.history, s.Follows(port))
		}
	}
	if in == 0 || out == 0 {
		t.Errorf("during the run %d connections in the sample and %d out: the check proves nothing (%+v)", in, out, during)
	}
}

// clientPort reads the client's port from an event's "client>server" Conn.
func clientPort(t *testing.T, conn string) uint16 {
	client, _, ok := strings.Cut(conn, ">")
	ap, err := netip.ParseAddrPort(strings.TrimSpace(client))
	if !ok || err != nil {
		t.Fatalf("cannot read the client port of %q", conn)
	}
	return ap.Port()
}

// TestBudgetedSysbench runs sysbench on 48 connections under watch with a
// CPU budget nothing fits in: watch cuts the connections it follows while
// it runs (the kernel filter and the server reads both), the statements
// reported after a cut come only from connections the sample holds, they
// join as a full run's do, and the run says what the budget did. The
// samples are keyed by a pivot connection, so none leaves every
// connection out; the rate floor (minFollowed) bounds how deep cuts go.
func TestBudgetedSysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServer(t, 48, 14*time.Second)
	opts.Rate = 300 // transactions/s: ~5,400 statements/s
	res, stmts := watchSysbench(t, ctx, inst, opts, Options{DSN: monitorDSN(t, inst), Iface: "lo", PollInterval: 100 * time.Millisecond,
		CPUBudget: 1e-6})
	steps := res.Own.Steps
	t.Logf("%d statements; steps %+v; own %.2f s CPU; join %+v; notes %v", len(stmts), steps, res.Own.CPUSeconds, res.Join, res.Notes)
	if len(steps) == 0 || steps[0].Sample < 2 {
		t.Fatalf("no cut under a budget nothing fits in: steps %+v", steps)
	}
	// Statements that started in the second around a change may be half
	// followed; the others must be in the sample of their time, and joined.
	nearChange := func(us int64) bool {
		for _, s := range steps {
			if us > s.AtUS-1_000_000 && us < s.AtUS+1_000_000 {
				return true
			}
		}
		return false
	}
	after, joined := 0, 0
	for _, s := range stmts {
		if s.TReqFirst < steps[0].AtUS || nearChange(s.TReqFirst) {
			continue
		}
		after++
		if s.Joined {
			joined++
		}
		if port, in := clientPort(t, s.Conn), sampleAt(steps, s.TReqFirst); !in.Follows(port) {
			t.Errorf("statement of client port %d at a time watch followed %+v", port, in)
		}
	}
	if after == 0 {
		t.Fatal("no statement followed after the cut: the test proves nothing")
	}
	if joined*100 < after*99 {
		t.Errorf("joined %d of %d statements followed after the cut, want >= 99%%", joined, after)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "CPU budget") || res.Own.Budget != 1e-6 || res.Own.CPUSeconds <= 0 {
		t.Errorf("the run does not say what the budget did: own %+v, notes %v", res.Own, res.Notes)
	}
	if res.ServerSide.RingLost > int64(res.Join.Wire) {
		t.Errorf("ring loss %d exceeds the %d statements followed: skipped connections counted as lost", res.ServerSide.RingLost, res.Join.Wire)
	}
}

// watchSysbench runs sysbench's run phase (opts) on inst under watch
// (wopts) and returns watch's result and every statement it reported.
func watchSysbench(t *testing.T, ctx context.Context, inst *sandbox.Instance, opts workload.OLTPOptions, wopts Options) (*Result, []event.Statement) {
	t.Helper()
	var mu sync.Mutex
	var stmts []event.Statement
	wopts.OnStatement = func(s *event.Statement) {
		mu.Lock()
		defer mu.Unlock()
		stmts = append(stmts, *s)
	}
	res := runDuring(t, ctx, wopts, func() error {
		_, err := workload.Sysbench(ctx, inst.DSN(""), opts, "run")
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	return res, stmts
}

// sampleAt is the sample a budgeted run followed at us.
func sampleAt(steps []SampleStep, us int64) capture.Sample {
	in := capture.All
	for _, s := range steps {
		if s.AtUS <= us {
			in = capture.Sample{N: s.Sample, Key: s.Key}
		}
	}
	return in
}
