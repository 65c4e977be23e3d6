package watch

import (
	"context"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// TestWatchWireOnlyBackpressure: with the statement consumers off the join
// is impossible, yet a client that sleeps before reading a 10 MB result
// shows on the wire: watch names CLIENT_BACKPRESSURE from the closed window,
// with its size, and says the server's time is unknown. The client sleeps
// 2 s so that the closed window passes the rule's second under any load.
func TestWatchWireOnlyBackpressure(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var read workload.SlowReaderResult
	var seen []event.Statement
	res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
		Sinks: []Sink{StatementFunc(func(s *event.Statement) { seen = append(seen, *s) })}},
		func() (err error) {
			read, err = workload.SlowReader(ctx, inst.DSN(""), workload.SlowReaderOptions{Rows: 100_000, RowBytes: 100, Delay: 2 * time.Second})
			return err
		})
	if res.Join.Joined != 0 {
		t.Fatalf("consumers off, yet %d statements joined", res.Join.Joined)
	}
	var bp *event.Finding
	for i := range res.Findings {
		if res.Findings[i].Code == "CLIENT_BACKPRESSURE" {
			bp = &res.Findings[i]
		}
	}
	if bp == nil {
		for _, s := range seen {
			t.Logf("seen: %s client %d µs, zero window %d µs, %d bytes", s.SQL, s.ClientUS, s.ZeroWindowUS, s.RespBytes)
		}
		t.Fatalf("no CLIENT_BACKPRESSURE from the wire; slow reader %+v; findings %v, notes %v", read, res.Findings, res.Notes)
	}
	zw, _ := bp.Evidence["zero_window_us"].(int64)
	bytes, _ := bp.Evidence["resp_bytes"].(int64)
	if zw < int64(read.Slept/time.Microsecond)/2 || bytes < read.Bytes {
		t.Errorf("evidence zero_window_us %d for a %v sleep, resp_bytes %d for %d bytes read: %v", zw, read.Slept, bytes, read.Bytes, bp.Evidence)
	}
	if bp.Evidence["server_side"] == nil {
		t.Errorf("the finding does not say the server's side is unknown: %v", bp.Evidence)
	}
}
