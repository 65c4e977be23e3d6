package lab

import (
	"cmp"
	"context"
	"database/sql"
	"fmt"
	"os"
	"runtime"
	"syscall"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/probe"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// ConcurrencySettings cap concurrency with the thread pool. Measured here
// (MariaDB 10.11, 2 cores): statements that wait (SLEEP, locks, I/O) give
// their slot back to the pool, so thread_pool_oversubscribe does not cap
// them; thread_pool_max_threads does, and with it each group keeps one
// thread as its listener while requests queue: 10 threads in 2 groups run
// 8 statements at once. A SLEEP load holds pool threads without using the
// CPU, so the knee is the pool's and not the 2 cores'.
var ConcurrencySettings = []string{
	"--thread-handling=pool-of-threads",
	"--thread-pool-size=2",
	"--thread-pool-oversubscribe=1",
	"--thread-pool-max-threads=10",
	"--max-connections=300",
}

// controlSettings run the same ramp with one thread per connection.
var controlSettings = []string{"--thread-handling=one-thread-per-connection", "--max-connections=300"}

// ConcurrencyOptions tune the concurrency scenario.
type ConcurrencyOptions struct {
	Options
	// Steps are the load's connection counts (default 1..10, 12, 16, 24,
	// 32, 48, 64).
	Steps []int
	// RunsPerStep is the probe runs at each step (default 2).
	RunsPerStep int
	// Load is the statement each load connection repeats (default
	// SELECT SLEEP(0.02): it holds a server thread without using CPU).
	Load string
	// Canary sizes each probe run (default 5 repetitions of TRUNCATE + 5
	// INSERTs: short enough to stay quick when every statement queues, and
	// a run's median still ignores two repetitions that another process
	// on the host held up).
	Canary workload.CanaryOptions
	// NoControl skips the one-thread-per-connection ramp.
	NoControl bool
}

func (o *ConcurrencyOptions) defaults() {
	if len(o.Steps) == 0 {
		o.Steps = []int{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12, 16, 24, 32, 48, 64}
	}
	o.RunsPerStep = cmp.Or(o.RunsPerStep, 2)
	o.Load = cmp.Or(o.Load, "SELECT SLEEP(0.02)")
	o.Canary.Repeat = cmp.Or(o.Canary.Repeat, 5)
	o.Canary.Inserts = cmp.Or(o.Canary.Inserts, 5)
}

// Ramp names, also set as the "ramp" evidence of each finding.
const (
	RampPool    = "thread pool"
	RampControl = "one thread per connection"
)

// ConcurrencyRamp is one ramp's outcome.
type ConcurrencyRamp struct {
	Name     string          `json:"name"`
	Series   probe.Series    `json:"series"`
	Knee     probe.Knee      `json:"knee"`
	Caps     []probe.Cap     `json:"caps"`
	Findings []event.Finding `json:"findings"`
}

// Concurrency reproduces the concurrency-cap case on a thread pool: the load ramps from 1
// to 64 connections while the canary probes at each step; latency against
// Threads_running bends at the pool's cap, and gapscope names the
// variable. The control ramp on one thread per connection must show no
// knee tied to a setting. Findings of both ramps are returned, each with
// evidence "ramp".
func Concurrency(ctx context.Context, o ConcurrencyOptions) (*Result, []ConcurrencyRamp, error) {
	o.defaults()
	started := time.Now()
	r := &Result{Scenario: "concurrency", Settings: ConcurrencySettings}
	restore := raisePriority(o.Options, r)
	defer restore()
	var ramps []ConcurrencyRamp
	pool, err := runRamp(ctx, o, r, RampPool, ConcurrencySettings)
	if err != nil {
		return nil, nil, err
	}
	ramps = append(ramps, pool)
	if !o.NoControl {
		ctl, err := runRamp(ctx, o, r, RampControl, controlSettings)
		if err != nil {
			return nil, nil, err
		}
		ramps = append(ramps, ctl)
	}
	for _, rp := range ramps {
		r.Seen = append(r.Seen, describeRamp(rp)...)
		r.Findings = append(r.Findings, rp.Findings...)
	}
	r.Elapsed = time.Since(started)
	return r, ramps, nil
}

// runRamp starts a sandbox with settings and ramps the load on it.
func runRamp(ctx context.Context, o ConcurrencyOptions, r *Result, name string, settings []string) (ConcurrencyRamp, error) {
	rp := ConcurrencyRamp{Name: name}
	dir, where, cleanup := memoryDir()
	defer cleanup()
	sb := sandbox.Options{ServerArgs: settings, Nice: sandbox.LabNice, Dir: dir}
	if name == RampPool {
		sb.ExtraPort = -1
	}
	o.step(r, "%s: starting a sandbox with %v, its data %s", name, settings, where)
	inst, err := sandbox.Start(ctx, sb)
	if err != nil {
		return rp, err
	}
	defer inst.Stop()
	if r.Server == "" {
		r.Server = inst.Addr()
	}
	monDSN := inst.DSN("")
	if inst.ExtraPort > 0 {
		monDSN = inst.ExtraDSN("") // status reads must not queue in the pool
	}
	mon, err := collect.NewSecrets().Open(monDSN, "")
	if err != nil {
		return rp, err
	}
	defer mon.Close()
	o.step(r, "%s: ramping %d load connections (%s in a loop) over %v, %d probe runs per step",
		name, len(o.Steps), o.Load, o.Steps, o.RunsPerStep)
	for _, n := range o.Steps {
		pts, err := probeStep(ctx, o, inst.DSN(""), mon, n)
		if err != nil {
			return rp, fmt.Errorf("%s ramp, %d connections: %w", name, n, err)
		}
		rp.Series.Points = append(rp.Series.Points, pts...)
		o.progress(name, n, pts)
	}
	return analyzeRamp(ctx, rp, mon)
}

// analyzeRamp fits the knee over the whole ramp.
func analyzeRamp(ctx context.Context, rp ConcurrencyRamp, mon *sql.DB) (ConcurrencyRamp, error) {
	vars, err := collect.GlobalVariables(ctx, mon)
	if err != nil {
		return rp, err
	}
	rp.Series.Name = "canary (" + rp.Name + ")"
	// The sandbox runs on this host, so its cores are ours.
	rp.Knee, rp.Caps, rp.Findings = probe.Analyze(rp.Series, vars, runtime.NumCPU(), probe.KneeOptions{}, 0)
	for i := range rp.Findings {
		rp.Findings[i].Evidence["ramp"] = rp.Name
	}
	return rp, nil
}

// probeStep holds n load connections and probes under them.
func probeStep(ctx context.Context, o ConcurrencyOptions, dsn string, mon *sql.DB, n int) ([]probe.Point, error) {
	loadCtx, stopLoad := context.WithCancel(ctx)
	loadDone := make(chan error, 1)
	go func() {
		_, err := workload.Concurrent(loadCtx, dsn, workload.ConcurrentOptions{Conns: n, Duration: time.Hour,
			Statements: []workload.Statement{{SQL: o.Load}}})
		loadDone <- err
	}()
	defer func() {
		stopLoad()
		<-loadDone
	}()
	// Let every load connection open and start its first statement.
	if !workload.Sleep(ctx, 300*time.Millisecond+time.Duration(n)*5*time.Millisecond) {
		return nil, ctx.Err()
	}
	res, err := probe.Run(ctx, probe.Options{DSN: dsn, Monitor: mon, Every: time.Millisecond, Count: o.RunsPerStep,
		Canary: o.Canary, SampleEvery: 50 * time.Millisecond, Load: func() int { return n }})
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	return res.Series.Points, nil
}

func (o ConcurrencyOptions) progress(ramp string, n int, pts []probe.Point) {
	if o.Progress == nil {
		return
	}
	for _, p := range pts {
		fmt.Fprintf(o.Progress, "    %-26s load %2d: canary median %-9s max %-9s Threads_running %5.1f  pool queue %4.1f\n",
			ramp, n, report.Micros(p.MedianUS), report.Micros(p.MaxUS), p.ThreadsRunning, p.PoolQueue)
	}
}

// describeRamp renders a ramp's outcome for Result.Seen.
func describeRamp(rp ConcurrencyRamp) []string {
	lines := []string{fmt.Sprintf("%s: %d probe runs, latency from %s to %s, Threads_running %.1f to %.1f",
		rp.Name, len(rp.Series.Points), report.Micros(minMedian(rp.Series)), report.Micros(maxMedian(rp.Series)),
		minRunning(rp.Series), rp.Knee.MaxThreads)}
	k := rp.Knee
	if !k.Found {
		return append(lines, fmt.Sprintf("%s: no knee (%s; split at %.1f threads: x%.1f, robust z=%.1f, permutation p=%.2g)", rp.Name, k.Reason, k.Threads, k.Rise, k.Z, k.P))
	}
	return append(lines, fmt.Sprintf("%s: knee at %.1f running threads (80%% range %.1f-%.1f), x%.1f above the trend below, fit improvement %.0f%%, robust z=%.1f, permutation p=%.2g",
		rp.Name, k.Threads, k.Low, k.High, k.Rise, k.Improvement*100, k.Z, k.P))
}

func minMedian(s probe.Series) int64 {
	var m int64
	for i, p := range s.Points {
		if i == 0 || p.MedianUS < m {
			m = p.MedianUS
		}
	}
	return m
}

func maxMedian(s probe.Series) int64 {
	var m int64
	for _, p := range s.Points {
		m = max(m, p.MedianUS)
	}
	return m
}

func minRunning(s probe.Series) float64 {
	var m float64
	for i, p := range s.Points {
		if i == 0 || p.ThreadsRunning < m {
			m = p.ThreadsRunning
		}
	}
	return m
}

// raisePriority runs this process (the canary, the load, the monitor) at
// sandbox.LabNice, as the lab's sandbox: with two CPU hogs on this 2-core
// host the canary's runs below the pool's cap took 17-157 ms instead of
// 2-4, as slow as the queued runs above it, and the knee drowned. The step
// says whether it could (it needs root); restore puts the process back.
func raisePriority(o Options, r *Result) (restore func()) {
	restore, err := sandbox.RaiseProcessPriority(sandbox.LabNice)
	if err != nil {
		o.step(r, "running at normal priority (%v): other load on this host adds to the latencies measured", err)
		return restore
	}
	o.step(r, "running the sandbox and the lab's clients at nice %d, so that other load on this host does not blur what is measured", sandbox.LabNice)
	return restore
}

// memoryDir returns a new directory in memory (tmpfs /dev/shm) for a lab
// sandbox's data, where its fsyncs cost nothing, and a function removing
// it; "" (the sandbox's own temp dir on disk) when there is none. The
// canary commits each INSERT and TRUNCATE makes a file: on this host's
// shared disk its runs below the pool's cap took 12-77 ms instead of 2-4
// (a dsync write took 2-9 ms while other engineers' tests ran), as slow as
// the queued runs above the cap, and the knee drowned. The lab is about
// the pool's queue, not the disk.
func memoryDir() (dir, where string, cleanup func()) {
	const shm = "/dev/shm"
	var st syscall.Statfs_t
	if err := syscall.Statfs(shm, &st); err != nil || st.Type != tmpfsMagic {
		return "", "on disk (no tmpfs at " + shm + ")", func() {}
	}
	d, err := os.MkdirTemp(shm, "gapscope-lab-")
	if err != nil {
		return "", fmt.Sprintf("on disk (%v)", err), func() {}
	}
	return d, "in memory (" + d + ")", func() { _ = os.RemoveAll(d) }
}

// tmpfsMagic is statfs's f_type of tmpfs.
const tmpfsMagic = 0x01021994
