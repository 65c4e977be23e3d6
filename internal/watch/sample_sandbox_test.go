package watch

import (
	"net/netip"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/workload"
)

// TestSampledSysbench runs sysbench on 16 connections under watch with
// --sample 2: the statements reported come from the connections whose
// client port SampledPort accepts, and only from them, and are joined as
// a full run's are.
func TestSampledSysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServer(t, 16, 8*time.Second)
	var mu sync.Mutex
	total, joined := 0, 0
	ports := map[uint16]int{}
	res := runDuring(t, ctx, Options{DSN: monitorDSN(t, inst), Iface: "lo", PollInterval: 100 * time.Millisecond,
		Sample: 2, OnStatement: func(s *event.Statement) {
			mu.Lock()
			defer mu.Unlock()
			total++
			if s.Joined {
				joined++
			}
			ports[clientPort(t, s.Conn)]++
		}}, func() error {
		_, err := workload.Sysbench(ctx, inst.DSN(""), opts, "run")
		return err
	})
	t.Logf("%d statements from %d connections, %d joined; join %+v; notes %v", total, len(ports), joined, res.Join, res.Notes)
	if len(ports) == 0 || len(ports) >= 16 {
		t.Fatalf("statements of %d connections under --sample 2 (16 ran)", len(ports))
	}
	for port, n := range ports {
		if !capture.SampledPort(port, 2) {
			t.Errorf("%d statements of unsampled client port %d", n, port)
		}
	}
	if joined*100 < total*99 {
		t.Errorf("joined %d of %d sampled statements, want >= 99%%", joined, total)
	}
	if !strings.Contains(strings.Join(res.Notes, "\n"), "sampling 1 in 2 connections") {
		t.Errorf("the run does not say it sampled: %v", res.Notes)
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
