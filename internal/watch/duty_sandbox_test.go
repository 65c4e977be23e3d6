package watch

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// TestDutyCycledSysbench runs sysbench on 8 connections under watch
// --enable-consumers with a CPU budget that even one connection exceeds:
// watch follows one connection part of the time, the capture paused in
// between. What it reports comes in bursts no longer than the followed
// part (dutyOn) and apart by the pauses, from the followed connection,
// joined as a full run's are; the run says so; and every connection's
// statement history is on again when it stops.
func TestDutyCycledSysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServer(t, 8, 16*time.Second)
	opts.Rate = 400 // transactions/s: ~7,200 statements/s, 900 a connection
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, stmts := watchSysbench(t, ctx, inst, opts, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
		CPUBudget: 1e-6, EnableConsumers: true})
	steps := res.Own.Steps
	t.Logf("%d statements; steps %+v; own %.2f s CPU; join %+v; server %+v; notes %v", len(stmts), steps, res.Own.CPUSeconds, res.Join, res.ServerSide, res.Notes)
	i := slices.IndexFunc(steps, func(s SampleStep) bool { return s.Cycle > 1 })
	if i < 0 {
		t.Fatalf("no duty cycle under a budget one connection exceeds: steps %+v", steps)
	}
	cycleFrom := steps[i].AtUS
	stmts = slices.DeleteFunc(stmts, func(s event.Statement) bool { return s.TReqFirst < cycleFrom })
	bursts := burstsOf(stmts, 500_000)
	t.Logf("duty cycle from %d: %d bursts (first, last, µs from, to): %v", cycleFrom, len(bursts), bursts)
	if len(bursts) < 3 {
		t.Fatalf("%d bursts of statements in a duty cycle of 16 s at most, from step %+v", len(bursts), steps[i])
	}
	joined, total := 0, 0
	for i, b := range bursts {
		// The poller switches on its rounds (dutyTick), and a statement
		// in flight at a switch may end after it.
		longest := dutyOn + 2*dutyTick
		if slices.ContainsFunc(steps, func(s SampleStep) bool { return s.AtUS >= b.from && s.AtUS <= b.to }) {
			longest += dutyOn // a new cycle length starts a new followed part at once
		}
		if span := b.to - b.from; span > longest.Microseconds() {
			t.Errorf("burst %d spans %d µs: longer than a followed part", i, span)
		}
		for _, s := range stmts[b.first:b.last] {
			total++
			if s.Joined {
				joined++
			}
		}
	}
	ports := map[uint16]bool{}
	for _, s := range stmts {
		ports[clientPort(t, s.Conn)] = true
	}
	if len(ports) != 1 {
		t.Errorf("statements of %d connections while the duty cycle followed one", len(ports))
	}
	if joined*100 < total*99 {
		t.Errorf("joined %d of %d statements followed, want >= 99%%", joined, total)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "1 s in every") {
		t.Errorf("the run does not say it followed part of the time: %v", res.Notes)
	}
	for _, th := range readThreadHistory(t, ctx, db) {
		if !th.history {
			t.Errorf("connection %d (%s) still has its history off after watch stopped", th.id, th.host)
		}
	}
}

// burst is a run of statements with no gap of gapUS or more between them:
// stmts[first:last], requests from..to (µs).
type burst struct {
	first, last int
	from, to    int64
}

// burstsOf sorts stmts by request time and splits them at gaps ≥ gapUS.
func burstsOf(stmts []event.Statement, gapUS int64) []burst {
	slices.SortFunc(stmts, func(a, b event.Statement) int { return int(a.TReqFirst - b.TReqFirst) })
	var out []burst
	for i, s := range stmts {
		if i == 0 || s.TReqFirst-stmts[i-1].TReqFirst >= gapUS {
			out = append(out, burst{first: i, from: s.TReqFirst})
		}
		b := &out[len(out)-1]
		b.last, b.to = i+1, s.TReqFirst
	}
	return out
}
