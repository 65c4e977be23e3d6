package watch

import (
	"context"
	"net/netip"
	"slices"
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
// --sample 2: every connection's statements are reported (capture is
// never sampled), those of the connections whose client port the join
// sample holds are joined as a full run's are, and the others say they
// were left out of the join sample.
func TestSampledSysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServer(t, 16, 8*time.Second)
	// Paced below saturation: a saturated 2-core host starves the
	// poller's reads of history_long (a scan of the whole ring each time)
	// until the ring turns over, and the statements it lost say so
	// (ring_lost) whether sampled or not; what is tested here is the sample.
	opts.Rate = 500 // transactions/s: ~9,000 statements/s
	var mu sync.Mutex
	in, inJoined := 0, 0
	out, outNoted := 0, 0
	ports := map[uint16]int{}
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
		Sample: 2, Sinks: []Sink{StatementFunc(func(s *event.Statement) {
			mu.Lock()
			defer mu.Unlock()
			port := clientPort(t, s.Conn)
			ports[port]++
			if s.Outlier && !(capture.Sample{N: 2}).Follows(port) {
				return // joined from its thread when it kept it: TestBudgetedSysbench
			}
			if (capture.Sample{N: 2}).Follows(port) {
				in++
				if s.Joined {
					inJoined++
				}
				return
			}
			out++
			if !s.Joined && (s.Why == event.SampledOut || s.Why == event.NoResponse && !s.HasResponse()) { // a COM_QUIT has nothing to join anyway
				outNoted++
			}
		})}}, func() error {
		_, err := workload.Sysbench(ctx, inst.DSN(""), opts, "run")
		return err
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("%d connections; in the sample %d statements (%d joined), out %d (%d noted); coverage %+v", len(ports), in, inJoined, out, outNoted, res.Coverage)
	if len(ports) < 16 {
		t.Fatalf("statements of %d connections under --sample 2: every connection must be captured (16 ran)", len(ports))
	}
	if in == 0 || out == 0 {
		t.Fatalf("%d statements in the sample, %d out: the test proves nothing", in, out)
	}
	if inJoined*100 < in*99 {
		t.Errorf("joined %d of %d sampled statements, want >= 99%%", inJoined, in)
	}
	if outNoted != out {
		t.Errorf("%d of %d statements outside the join sample say so", outNoted, out)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "joining the fast statements of 1 in 2 connections") {
		t.Errorf("the run does not say it joined a sample: %v", res.Notes)
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
// CPU budget nothing fits in: watch joins the fast statements of fewer
// connections while it runs, yet reports every statement; after a cut,
// statements of connections the join sample holds are joined as a full
// run's are, the others say they were left out of it, and the run says
// what the budget did. The samples are keyed by a pivot connection, so
// none leaves every connection out.
func TestBudgetedSysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServer(t, 48, 14*time.Second)
	opts.Rate = 300 // transactions/s: ~5,400 statements/s
	res, stmts := watchSysbench(t, ctx, inst, opts, Options{DSN: monitorDSN(t, inst), Iface: "lo", PollInterval: 100 * time.Millisecond,
		CPUBudget: 1e-6})
	steps := res.Own.Steps
	t.Logf("%d statements; steps %+v; own %.2f s CPU; coverage %+v; notes %v", len(stmts), steps, res.Own.CPUSeconds, res.Coverage, res.Notes)
	if len(steps) == 0 || steps[0].Sample < 2 {
		t.Fatalf("no cut under a budget nothing fits in: steps %+v", steps)
	}
	// Statements that started in the second around a change may be half
	// joined; the others must be joined exactly when their sample holds them.
	nearChange := func(us int64) bool {
		for _, s := range steps {
			if us > s.AtUS-1_000_000 && us < s.AtUS+1_000_000 {
				return true
			}
		}
		return false
	}
	in, joined, out, noted, outliers, outliersJoined := 0, 0, 0, 0, 0, 0
	conns := map[uint16]bool{}
	for _, s := range stmts {
		conns[clientPort(t, s.Conn)] = true
		if s.TReqFirst < steps[0].AtUS || nearChange(s.TReqFirst) {
			continue
		}
		switch {
		case sampleAt(steps, s.TReqFirst).Follows(clientPort(t, s.Conn)):
			in++
			if s.Joined {
				joined++
			}
		case s.Outlier:
			// Joined from its thread's history when the thread kept it:
			// never left out of the join, but a busy connection may have
			// overwritten it first (it then says so).
			outliers++
			if s.Joined {
				outliersJoined++
			} else if !slices.ContainsFunc(s.Notes, func(n string) bool { return strings.HasPrefix(n, "slow statement (outlier)") }) {
				t.Errorf("an unjoined outlier does not say why: %v", s.Notes)
			}
		default:
			out++
			if !s.Joined && (s.Why == event.SampledOut || s.Why == event.NoResponse && !s.HasResponse()) { // a COM_QUIT has nothing to join anyway
				noted++
			}
		}
	}
	t.Logf("after the cut: in the join sample %d (%d joined), left out %d, outliers of left-out connections %d (%d joined)", in, joined, out, outliers, outliersJoined)
	if len(conns) < 48 {
		t.Errorf("statements of %d connections reported, 48 ran: every connection must be captured", len(conns))
	}
	if in == 0 || out == 0 {
		t.Fatalf("after the cut %d statements joined-side, %d left out: the test proves nothing", in, out)
	}
	if joined*100 < in*99 {
		t.Errorf("joined %d of %d statements in the join sample after the cut, want >= 99%%", joined, in)
	}
	if noted != out {
		t.Errorf("%d of %d statements left out of the join sample say so", noted, out)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "CPU budget") || res.Own.Budget != 1e-6 || res.Own.CPUSeconds <= 0 {
		t.Errorf("the run does not say what the budget did: own %+v, notes %v", res.Own, res.Notes)
	}
}

// watchSysbench runs sysbench's run phase (opts) on inst under watch
// (wopts) and returns watch's result and every statement it reported.
func watchSysbench(t *testing.T, ctx context.Context, inst *sandbox.Instance, opts workload.OLTPOptions, wopts Options) (*Result, []event.Statement) {
	t.Helper()
	var mu sync.Mutex
	var stmts []event.Statement
	wopts.Sinks = append(wopts.Sinks, StatementFunc(func(s *event.Statement) {
		mu.Lock()
		defer mu.Unlock()
		stmts = append(stmts, *s)
	}))
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
