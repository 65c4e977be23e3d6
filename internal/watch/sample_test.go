package watch

import (
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
)

func TestConnSampleFollowsTheProcesslist(t *testing.T) {
	off := newJoinSample(capture.All, noBudget{}, newOwnAddrs())
	rows := []collect.ServerStatement{{ConnID: 1}, {ConnID: 2}}
	if kept, _ := off.keep(rows, 0); off.on() || off.skipped() != nil || len(kept) != 2 {
		t.Fatal("sampling on without --sample > 1")
	}
	c := newJoinSample(capture.Sample{N: 4}, noBudget{}, newOwnAddrs())
	hosts := map[uint64]string{}
	var out []uint64
	for id := uint64(1); id <= 64; id++ {
		port := uint16(40000 + 2*id)
		hosts[id] = "127.0.0.1:" + strconv.Itoa(int(port))
		if !(capture.Sample{N: 4}).Follows(port) {
			out = append(out, id)
		}
	}
	hosts[99] = "localhost" // a socket client: never on the wire
	out = append(out, 99)
	c.replace(hosts)
	if got := c.skipped(); !slices.Equal(got, out) {
		t.Fatalf("skipped %v, want %v", got, out)
	}
	if len(out) < 40 || len(out) > 56 {
		t.Errorf("%d of 64 connections skipped at 1 in 4", len(out)-1)
	}
	var batch []collect.ServerStatement
	for id := uint64(1); id <= 100; id++ { // 65-100: opened since the read
		batch = append(batch, collect.ServerStatement{ConnID: id})
	}
	batch = append(batch, collect.ServerStatement{ConnID: out[0], TimerWait: 20_000_000_000}) // a slow one: kept
	kept, unknown := c.keep(batch, 10_000_000_000)
	for i, r := range kept {
		if slices.Contains(out, r.ConnID) && i != len(kept)-1 {
			t.Errorf("row of skipped connection %d kept", r.ConnID)
		}
	}
	if last := kept[len(kept)-1]; last.ConnID != out[0] || last.TimerWait == 0 {
		t.Errorf("the slow row of a skipped connection was dropped")
	}
	kept = kept[:len(kept)-1]
	if len(kept) != 100-len(out) || !unknown {
		t.Errorf("kept %d rows (unknown connections: %v), want %d and true: new connections are kept until classified",
			len(kept), unknown, 100-len(out))
	}
	if _, unknown := c.keep([]collect.ServerStatement{{ConnID: 1}, {ConnID: 2}}, 0); unknown {
		t.Error("connections of the processlist read reported unknown")
	}
	now := time.Now()
	c.replaceAt(map[uint64]string{}, now) // every connection closed
	if got := c.skipped(); !slices.Equal(got, out) {
		t.Errorf("just closed: skipped %v, want still %v (their last rows may be read next)", got, out)
	}
	c.replaceAt(map[uint64]string{}, now.Add(closedGrace+time.Second))
	if got := c.skipped(); len(got) != 0 {
		t.Errorf("closed long ago: still skipped %v", got)
	}
}

func TestStatementRate(t *testing.T) {
	prev := map[string]string{"Queries": "1000", "Questions": "900"}
	cur := map[string]string{"Queries": "26000", "Questions": "25000"}
	if r := statementRate(prev, cur, time.Second); r != 25000 {
		t.Errorf("rate %v, want 25000 (Queries)", r)
	}
	if r := statementRate(nil, cur, time.Second); r != 0 {
		t.Errorf("rate without a previous read %v", r)
	}
	if r := statementRate(map[string]string{"Questions": "10"}, map[string]string{"Questions": "30"}, 2*time.Second); r != 10 {
		t.Errorf("Questions fallback rate %v, want 10", r)
	}
	if r := statementRate(cur, prev, time.Second); r != 0 { // counters reset (restart)
		t.Errorf("rate across a reset %v", r)
	}
}

// The pivot a budgeted sample is keyed on is an application connection on
// the wire (not watch's own, not a socket client), a busy one before an
// idle one, and it stays while the processlist lists it.
func TestChoosePivot(t *testing.T) {
	p := newJoinSample(capture.All, noBudget{}, newOwnAddrs())
	p.own.add("127.0.0.1:40010")
	procs := []collect.Process{
		{ID: 1, Host: "localhost", Command: "Query"},
		{ID: 2, Host: "127.0.0.1:40010", Command: "Query"}, // watch's own
		{ID: 3, Host: "127.0.0.1:40020", Command: "Sleep"},
		{ID: 4, Host: "127.0.0.1:40030", Command: "Execute"},
		{ID: 5, Host: "127.0.0.1:40040", Command: "Query"},
	}
	p.choosePivot(procs)
	if p.pivotHost != "127.0.0.1:40030" || p.pivotKey != capture.PortKey(40030) {
		t.Fatalf("pivot %q key %d, want the busy connection with the lowest id", p.pivotHost, p.pivotKey)
	}
	procs[3].Command = "Sleep"
	p.choosePivot(procs)
	if p.pivotHost != "127.0.0.1:40030" {
		t.Fatalf("pivot moved to %q while still listed", p.pivotHost)
	}
	p.choosePivot(append(procs[:3:3], procs[4]))
	if p.pivotHost != "127.0.0.1:40040" || p.pivotKey != capture.PortKey(40040) {
		t.Fatalf("pivot %q after it closed, want the busy one left", p.pivotHost)
	}
	p.choosePivot([]collect.Process{{ID: 1, Host: "localhost"}})
	if p.pivotHost != "127.0.0.1:40040" {
		t.Fatal("no candidate: the pivot must stay")
	}
	// A server that resolves names lists our 127.0.0.1 connection as
	// localhost:port: still ours, never the pivot.
	q := newJoinSample(capture.All, noBudget{}, newOwnAddrs())
	q.own.add("127.0.0.1:40010")
	q.choosePivot([]collect.Process{{ID: 1, Host: "localhost:40010", Command: "Query"}, {ID: 2, Host: "localhost:40020", Command: "Sleep"}})
	if q.pivotHost != "localhost:40020" {
		t.Fatalf("pivot %q, want the application's connection, not ours written as localhost:port", q.pivotHost)
	}
}

// A budgeted sample of any depth follows the pivot: the estimate of what
// it follows never drops to nothing while the pivot is listed.
func TestBudgetSampleFollowsThePivot(t *testing.T) {
	p := newJoinSample(capture.All, noBudget{}, newOwnAddrs())
	p.own.add("127.0.0.1:40000")
	procs := []collect.Process{{ID: 99, Host: "127.0.0.1:40000", Command: "Query"}} // watch's own: not counted
	for id := uint64(1); id <= 8; id++ {
		procs = append(procs, collect.Process{ID: id, Host: "127.0.0.1:" + strconv.Itoa(int(41000+2*id)), Command: "Execute"})
	}
	p.learn(procs)
	for n := uint16(2); n <= maxBudgetSample; n *= 2 {
		if got := p.followedRate(n, 8000); got < 1000 {
			t.Fatalf("1 in %d follows an estimated %.0f statements/s, want at least the pivot's 1000", n, got)
		}
		if port, _ := hostPort(p.pivotHost); !p.budgetSample(n).Follows(port) {
			t.Fatalf("1 in %d leaves the pivot out", n)
		}
	}
	if held, wired := p.followedConns(p.budgetSample(maxBudgetSample)); held < 1 || wired != 8 {
		t.Errorf("the deepest sample follows %d of %d connections, want at least 1 of 8", held, wired)
	}
	if p.budgetSample(1) != capture.All {
		t.Error("1 in 1 is not every connection")
	}
}

func TestHostPort(t *testing.T) {
	for in, want := range map[string]int{
		"10.0.0.1:40312": 40312, "[::1]:3306": 3306, "h:0": 0, "h:65535": 65535,
		"h:65536": -1, "h": -1, "h:": -1, "h:12a": -1, "localhost": -1, "h:1234567": -1,
	} {
		port, ok := hostPort(in)
		if got := map[bool]int{true: int(port), false: -1}[ok]; got != want {
			t.Errorf("hostPort(%q) = %d, %v; want %d", in, port, ok, want)
		}
	}
}
