package lab

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/gapscope/gapscope/internal/workload"
)

// SlowClientOptions tune the slowclient scenario.
type SlowClientOptions struct {
	Options
	// Rows of the large result (default 100,000 x ~110 B: over 10 MB, more
	// than the socket buffers on loopback can hold).
	Rows int
	// Delay the clients sleep before reading (default 3 s).
	Delay time.Duration
}

// SlowClient reproduces the slow-client case: a client sleeps before reading a large
// result; the server, unable to send, keeps the statement open, and its
// TIMER_WAIT grows by the sleep. A small result with the same sleep fits
// the socket buffers and is not affected.
func SlowClient(ctx context.Context, o SlowClientOptions) (*Result, error) {
	if o.Rows <= 0 {
		o.Rows = 100_000
	}
	if o.Delay <= 0 {
		o.Delay = 3 * time.Second
	}
	started := time.Now()
	r := &Result{Scenario: "slowclient", Settings: []string{"performance_schema=ON", "statement history consumers ON"}}
	inst, err := startSandbox(ctx, o.Options, r, sandbox.Options{ServerArgs: psArgs})
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	o.step(r, "watching port %d on lo", inst.Port)
	monitor, err := createMonitor(ctx, inst, false)
	if err != nil {
		return nil, err
	}
	s, err := startWatch(ctx, watch.Options{DSN: monitor, Ports: []uint16{uint16(inst.Port)}, Iface: "lo",
		PollInterval: 100 * time.Millisecond, KeepLiterals: o.KeepLiterals})
	if err != nil {
		return nil, err
	}
	base, big, small, runErr := runSlowReaders(ctx, o, r, inst)
	time.Sleep(500 * time.Millisecond) // let the server rows reach history_long
	res, err := s.stop()
	if err != nil {
		return nil, err
	}
	if runErr != nil {
		return nil, runErr
	}
	r.Watch, r.Findings, r.Statements = res, res.Findings, res.Window
	r.Marked = map[string]event.Statement{}
	markReader(r, "baseline", base)
	markReader(r, "large", big)
	markReader(r, "small", small)
	r.Elapsed = time.Since(started)
	return r, nil
}

// runSlowReaders runs the large result once read at once (the baseline:
// what the server needs without a slow client), then with the sleep, then a
// small result with the same sleep.
func runSlowReaders(ctx context.Context, o SlowClientOptions, r *Result, inst *sandbox.Instance) (base, big, small workload.SlowReaderResult, err error) {
	base, err = workload.SlowReader(ctx, inst.DSN(""), workload.SlowReaderOptions{Rows: o.Rows, Delay: time.Nanosecond})
	if err != nil {
		return base, big, small, err
	}
	o.step(r, "connection %d: SELECT of %d rows (%s) read at once; total %s at the client (baseline)",
		base.ConnID, base.Rows, mb(base.Bytes), base.Total.Round(time.Millisecond))
	big, err = workload.SlowReader(ctx, inst.DSN(""), workload.SlowReaderOptions{Rows: o.Rows, Delay: o.Delay})
	if err != nil {
		return base, big, small, err
	}
	o.step(r, "connection %d: SELECT of %d rows (%s), client slept %s before reading; total %s at the client",
		big.ConnID, big.Rows, mb(big.Bytes), big.Slept.Round(time.Millisecond), big.Total.Round(time.Millisecond))
	small, err = workload.SlowReader(ctx, inst.DSN(""), workload.SlowReaderOptions{Rows: 100, Delay: o.Delay})
	if err != nil {
		return base, big, small, err
	}
	o.step(r, "connection %d: SELECT of %d rows, same sleep; total %s at the client",
		small.ConnID, small.Rows, small.Total.Round(time.Millisecond))
	return base, big, small, nil
}

func markReader(r *Result, role string, rd workload.SlowReaderResult) {
	// The reader's SELECT is the connection's one recursive query; its row
	// count is not a key, since a header-only capture does not count the
	// rows of an answer it cut.
	for _, s := range r.Statements {
		if s.ConnID == rd.ConnID && s.Cmd == "COM_QUERY" && strings.HasPrefix(strings.ToUpper(s.SQL), "WITH RECURSIVE") {
			r.Marked[role] = s
			r.Seen = append(r.Seen, fmt.Sprintf("%s result, conn %d, %s on the wire: %s", role, rd.ConnID, mb(s.RespBytes), describe(s)))
			return
		}
	}
	r.Seen = append(r.Seen, fmt.Sprintf("%s result, conn %d: statement not seen on the wire", role, rd.ConnID))
}

func mb(n int64) string { return fmt.Sprintf("%.1f MB", float64(n)/1e6) }
