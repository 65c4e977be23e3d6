package watch

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// serverArgs turn on the statement history watch reads, with a ring large
// enough for sysbench's rate between two polls.
var serverArgs = []string{
	"--performance-schema=ON",
	"--performance-schema-consumer-events-statements-current=ON",
	"--performance-schema-consumer-events-statements-history=ON",
	"--performance-schema-consumer-events-statements-history-long=ON",
	"--performance-schema-events-statements-history-long-size=100000",
	"--max-connections=200",
}

// healthyTally checks each statement as it is emitted.
type healthyTally struct {
	mu       sync.Mutex
	total    int
	joined   int
	badSum   []event.Statement
	queues   []int64
	unjoined []event.Statement
	byConn   map[uint64][2]int // conn -> {unjoined, total}
	byCmd    map[string]int    // unjoined per command
}

func (h *healthyTally) add(s *event.Statement) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.total++
	if h.byConn == nil {
		h.byConn, h.byCmd = map[uint64][2]int{}, map[string]int{}
	}
	c := h.byConn[s.ConnID]
	c[1]++
	if !s.Joined {
		c[0]++
		h.byCmd[s.Cmd]++
	}
	h.byConn[s.ConnID] = c
	if !s.Joined {
		if len(h.unjoined) < 10 {
			h.unjoined = append(h.unjoined, *s)
		}
		return
	}
	h.joined++
	h.queues = append(h.queues, s.QueueUS)
	if s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS && len(h.badSum) < 10 {
		h.badSum = append(h.badSum, *s)
	}
}

// TestHealthySysbench is issue 4's healthy baseline: 30 s of sysbench
// oltp_read_write (server-side prepared statements) under watch.
//
// Healthy means headroom: sysbench is capped at 150 transactions/s, about
// half of what 2 threads reach here. Unbounded, sysbench, the server and
// watch saturate the 2 cores, and queue_us then holds real run-queue waits
// (the server thread is runnable but not running): p99 150 µs alone, 370
// µs beside a one-core busy loop, 1,046 µs in one CI run; capped, 75-82
// µs alone and 208 µs beside the loop. The server runs at
// sandbox.LabNice besides, so that other load on the host does not keep
// its threads off the CPU either. Saturated joins are
// TestSampledSysbench's.
func TestHealthySysbench(t *testing.T) {
	inst, opts, ctx := sysbenchServerAt(t, 2, 30*time.Second, sandbox.LabNice)
	opts.Rate = 150
	monitor := monitorDSN(t, inst)
	var h healthyTally
	stallBefore, psi := cpuPressureUS()
	res := runDuring(t, ctx, Options{DSN: monitor, Iface: "lo", PollInterval: 100 * time.Millisecond,
		Sinks: []Sink{StatementFunc(h.add)}}, func() error {
		_, err := workload.Sysbench(ctx, inst.DSN(""), opts, "run")
		return err
	})
	t.Logf("statements %d, joined %d; join stats %+v; server side %+v; capture drops %d",
		h.total, h.joined, res.Join, res.ServerSide, res.Capture.KernelDrops)
	t.Logf("unjoined by connection {unjoined, total}: %v; by command: %v", h.byConn, h.byCmd)
	if stallAfter, ok := cpuPressureUS(); ok && psi {
		// The host's share of time with a runnable task waiting for a CPU:
		// what a queue_us tail on this test would come from.
		t.Logf("host CPU pressure (some) during the test: %.1f s", float64(stallAfter-stallBefore)/1e6)
	}
	if h.total < 10_000 {
		t.Fatalf("only %d statements seen in 30 s of sysbench", h.total)
	}
	if h.joined*1000 < h.total*999 {
		t.Errorf("joined %d of %d statements (%.3f%%), want >= 99.9%%; first unjoined: %+v",
			h.joined, h.total, 100*float64(h.joined)/float64(h.total), h.unjoined)
	}
	if len(h.badSum) > 0 {
		t.Errorf("parts do not sum to client_us: %+v", h.badSum)
	}
	slices.Sort(h.queues)
	q := func(f float64) int64 { return h.queues[int(float64(len(h.queues)-1)*f)] }
	t.Logf("queue_us p50 %d, p90 %d, p99 %d, p99.9 %d, max %d", q(0.5), q(0.9), q(0.99), q(0.999), q(1))
	if p99 := q(0.99); p99 >= 1000 {
		t.Errorf("p99 queue_us = %d on a healthy server, want < 1 ms", p99)
	}
	// Healthy baseline of issue 5: defaults, no caps, a least-privilege
	// monitor account: no rule may fire.
	for _, f := range res.Findings {
		t.Errorf("healthy run produced %s: %s", f.Code, f.Summary)
	}
}

// sysbenchServer starts a sandbox with sysbench's tables prepared for a
// run of threads connections lasting d; ctx ends the test's waits.
func sysbenchServer(t *testing.T, threads int, d time.Duration) (*sandbox.Instance, workload.OLTPOptions, context.Context) {
	t.Helper()
	return sysbenchServerAt(t, threads, d, 0)
}

// sysbenchServerAt is sysbenchServer with the server's threads at nice
// (0: as this process).
func sysbenchServerAt(t *testing.T, threads int, d time.Duration, nice int) (*sandbox.Instance, workload.OLTPOptions, context.Context) {
	t.Helper()
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: serverArgs, Nice: nice})
	if !workload.SysbenchAvailable() {
		t.Fatal("sysbench is not installed (make deps installs it)")
	}
	ctx, cancel := context.WithTimeout(context.Background(), d+2*time.Minute)
	t.Cleanup(cancel)
	opts := workload.OLTPOptions{Tables: 2, TableSize: 10_000, Threads: threads, Duration: d}
	if _, err := workload.Sysbench(ctx, inst.DSN(""), opts, "prepare"); err != nil {
		t.Fatal(err)
	}
	return inst, opts, ctx
}

// monitorDSN creates the least-privileged account watch needs (PROCESS,
// SELECT on performance_schema) and returns its DSN.
func monitorDSN(t *testing.T, inst *sandbox.Instance) string {
	t.Helper()
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE USER 'monitor'@'127.0.0.1'", "GRANT PROCESS ON *.* TO 'monitor'@'127.0.0.1'",
		"GRANT SELECT ON performance_schema.* TO 'monitor'@'127.0.0.1'"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	return strings.Replace(inst.DSN(""), "root@", "monitor@", 1)
}

// runDuring runs watch while load runs, then stops it.
func runDuring(t *testing.T, ctx context.Context, opts Options, load func() error) *Result {
	t.Helper()
	ready := make(chan struct{})
	opts.Ready = func(Started) { close(ready) }
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	type out struct {
		res *Result
		err error
	}
	done := make(chan out, 1)
	go func() {
		r, err := Run(wctx, opts)
		done <- out{r, err}
	}()
	select {
	case <-ready:
	case o := <-done:
		t.Fatalf("watch did not start: %v", o.err)
	}
	loadErr := load()
	time.Sleep(300 * time.Millisecond)
	stop()
	o := <-done
	if loadErr != nil {
		t.Fatal(loadErr)
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.res
}

// cpuPressureUS reads the kernel's total time some task waited for a CPU
// (/proc/pressure/cpu, "some" line); false where PSI is off.
func cpuPressureUS() (int64, bool) {
	b, err := os.ReadFile("/proc/pressure/cpu")
	if err != nil {
		return 0, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	_, total, ok := strings.Cut(line, "total=")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(strings.TrimSpace(total), 10, 64)
	return n, err == nil
}
