package lab

import (
	"context"
	"database/sql"
	"fmt"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/gapscope/gapscope/internal/workload"
)

// ThreadPoolSettings are the thread-pool case's conditions as measured on MariaDB 10.11: two
// groups, one extra thread per group, and a stall limit so long that the
// pool never rescues a queued request.
var ThreadPoolSettings = []string{
	"--thread-handling=pool-of-threads",
	"--thread-pool-size=2",
	"--thread-pool-oversubscribe=1",
	"--thread-pool-stall-limit=60000",
}

// ThreadPoolOptions tune the threadpool scenario.
type ThreadPoolOptions struct {
	Options
	// HogIterations of MD5 per BENCHMARK(); 0 measures the server's speed
	// first and picks enough for about HogSeconds.
	HogIterations int64
	// HogSeconds is how long one hog query should hold its thread when the
	// iterations are measured (default 4 s; the victim waits about that).
	HogSeconds float64
}

// ThreadPool reproduces the thread-pool case: two CPU-bound queries hold thread-pool
// group 0; a `SELECT 1` on another connection of group 0 waits seconds in
// the pool's queue, which the server never times, while a connection of
// group 1 answers at once. watch sees the wait as queue time.
func ThreadPool(ctx context.Context, o ThreadPoolOptions) (*Result, error) {
	started := time.Now()
	r := &Result{Scenario: "threadpool", Settings: ThreadPoolSettings}
	args := append(append([]string{}, psArgs...), ThreadPoolSettings...)
	inst, err := startSandbox(ctx, o.Options, r, sandbox.Options{ServerArgs: args, ExtraPort: -1})
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	o.step(r, "watching port %d on lo; gapscope polls performance_schema through the extra port %d (outside the pool)", inst.Port, inst.ExtraPort)
	monitor, err := createMonitor(ctx, inst, true)
	if err != nil {
		return nil, err
	}
	s, err := startWatch(ctx, watch.Options{DSN: monitor, Ports: []uint16{uint16(inst.Port)}, Iface: "lo",
		PollInterval: 100 * time.Millisecond, KeepLiterals: o.KeepLiterals})
	if err != nil {
		return nil, err
	}
	if o.HogIterations <= 0 {
		if o.HogIterations, err = hogIterations(ctx, inst, o.HogSeconds); err != nil {
			s.stop()
			return nil, err
		}
	}
	v, runErr := runThreadPoolLoad(ctx, o, r, inst)
	res, err := s.stop()
	if err != nil {
		return nil, err
	}
	if runErr != nil {
		return nil, runErr
	}
	r.Watch, r.Findings, r.Statements = res, res.Findings, res.Window
	markVictims(r, v)
	r.Elapsed = time.Since(started)
	return r, nil
}

// hogIterations times a small BENCHMARK() through the extra port and
// scales it to the wanted seconds: MD5 speed differs by machine and load,
// and the victim's wait is one hog query's run time.
func hogIterations(ctx context.Context, inst *sandbox.Instance, seconds float64) (int64, error) {
	if seconds <= 0 {
		seconds = 4
	}
	db, err := sql.Open("mysql", inst.ExtraDSN(""))
	if err != nil {
		return 0, err
	}
	defer db.Close()
	const probe = 300_000
	start := time.Now()
	var x int
	if err := db.QueryRowContext(ctx, fmt.Sprintf("SELECT BENCHMARK(%d, MD5('x'))", probe)).Scan(&x); err != nil {
		return 0, fmt.Errorf("measuring BENCHMARK speed: %w", err)
	}
	perSec := probe / max(time.Since(start).Seconds(), 0.001)
	return int64(perSec * seconds), nil
}

// victims are the two timed connections: one in the saturated group, one
// in the other.
type victims struct {
	slowID, fastID   uint64
	slowRun, fastRun workload.VictimRun
}

func runThreadPoolLoad(ctx context.Context, o ThreadPoolOptions, r *Result, inst *sandbox.Instance) (victims, error) {
	var v victims
	slow, err := workload.NewVictim(ctx, inst.DSN(""), workload.VictimOptions{Group: 0, PoolSize: 2})
	if err != nil {
		return v, err
	}
	defer slow.Close()
	fast, err := workload.NewVictim(ctx, inst.DSN(""), workload.VictimOptions{Group: 1, PoolSize: 2})
	if err != nil {
		return v, err
	}
	defer fast.Close()
	v.slowID, v.fastID = slow.ID, fast.ID
	o.step(r, "opened victim connection %d (group 0) and control connection %d (group 1)", slow.ID, fast.ID)
	hog, err := workload.ThreadPoolHog(ctx, inst.DSN(""), workload.HogOptions{Conns: 2, Group: 0, PoolSize: 2,
		Iterations: o.HogIterations, AdminDSN: inst.ExtraDSN("")})
	if err != nil {
		return v, err
	}
	o.step(r, "connections %v run SELECT BENCHMARK(%d, MD5('x')) in a loop in group 0", hog.ConnIDs, o.HogIterations)
	time.Sleep(300 * time.Millisecond) // let both hog queries start
	err = timeVictims(ctx, o, r, slow, fast, &v)
	if _, herr := hog.Stop(); err == nil {
		err = herr
	}
	o.step(r, "stopped the hog; waiting for the server's statement history")
	time.Sleep(500 * time.Millisecond)
	return v, err
}

// timeVictims runs SELECT 1 on both connections at the same time.
func timeVictims(ctx context.Context, o ThreadPoolOptions, r *Result, slow, fast *workload.Victim, v *victims) error {
	var wg sync.WaitGroup
	var slowErr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		v.slowRun, slowErr = slow.Run(ctx)
	}()
	time.Sleep(50 * time.Millisecond)
	run, err := fast.Run(ctx)
	v.fastRun = run
	wg.Wait()
	if err == nil {
		err = slowErr
	}
	if err != nil {
		return err
	}
	o.step(r, "SELECT 1 took %s on the victim (group 0) and %s on the control (group 1), timed by the client",
		v.slowRun.Latency().Round(time.Millisecond), v.fastRun.Latency().Round(10*time.Microsecond))
	return nil
}

// markVictims finds the two SELECT 1 statements in what watch saw.
func markVictims(r *Result, v victims) {
	r.Marked = map[string]event.Statement{}
	if s, ok := findStatement(r.Statements, v.slowID, v.slowRun.Start.UnixMicro()); ok {
		r.Marked["victim"] = s
		r.Seen = append(r.Seen, fmt.Sprintf("victim conn %d (group 0): %s", v.slowID, describe(s)))
	} else {
		r.Seen = append(r.Seen, fmt.Sprintf("victim conn %d: statement not seen on the wire", v.slowID))
	}
	if s, ok := findStatement(r.Statements, v.fastID, v.fastRun.Start.UnixMicro()); ok {
		r.Marked["control"] = s
		r.Seen = append(r.Seen, fmt.Sprintf("control conn %d (group 1): %s", v.fastID, describe(s)))
	} else {
		r.Seen = append(r.Seen, fmt.Sprintf("control conn %d: statement not seen on the wire", v.fastID))
	}
}
