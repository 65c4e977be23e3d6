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
	var off *connSample
	rows := []collect.ServerStatement{{ConnID: 1}, {ConnID: 2}}
	if kept, _ := off.keep(rows); off.on() || newConnSample(1).on() || off.skipped() != nil || len(kept) != 2 {
		t.Fatal("sampling on without --sample > 1")
	}
	c := newConnSample(4)
	hosts := map[uint64]string{}
	var out []uint64
	for id := uint64(1); id <= 64; id++ {
		port := uint16(40000 + 2*id)
		hosts[id] = "127.0.0.1:" + strconv.Itoa(int(port))
		if !capture.SampledPort(port, 4) {
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
	kept, unknown := c.keep(batch)
	for _, r := range kept {
		if slices.Contains(out, r.ConnID) {
			t.Errorf("row of skipped connection %d kept", r.ConnID)
		}
	}
	if len(kept) != 100-len(out) || !unknown {
		t.Errorf("kept %d rows (unknown connections: %v), want %d and true: new connections are kept until classified",
			len(kept), unknown, 100-len(out))
	}
	if _, unknown := c.keep([]collect.ServerStatement{{ConnID: 1}, {ConnID: 2}}); unknown {
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
