package lab

import (
	"context"
	"fmt"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/overhead"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// OverheadConfigs are what the quick lab compares, baseline first, in an
// order that needs two sandbox restarts per rotation (ps-off, ps-all at
// startup, then everything the default server runs) instead of three, and
// runs ps-all next to the baseline, with ps-all-runtime beside it.
const OverheadConfigs = "ps-off,ps-all,ps-all-runtime,ps-default,optimizer-trace,gapscope-watch"

// OverheadServerArgs start the sandbox with performance_schema on and its
// defaults, as most servers run (ps-off restarts it without). The buffer
// pool is neither dumped at shutdown nor loaded at startup: the run preloads
// the tables itself after a restart, and a background load would compete
// with the first round after each restart.
var OverheadServerArgs = []string{"--performance-schema=ON",
	"--innodb-buffer-pool-dump-at-shutdown=OFF", "--innodb-buffer-pool-load-at-startup=OFF"}

// OverheadOptions tune the overhead scenario; zero values give the quick
// version (at most three minutes here).
type OverheadOptions struct {
	Options
	Configs          string        // default OverheadConfigs
	Rounds           int           // default 3, then added while a row is undecided
	TimeLimit        time.Duration // default 3 minutes (negative: no rounds added)
	Duration, Warmup time.Duration // default 5 s and 2 s (negative warm-up: none)
	Tables, Rows     int           // default 2 x 10,000
	Threads          int           // default 4
	// Driver is sysbench or builtin; default sysbench when installed: it
	// runs in a process of its own, so gapscope's CPU measure holds the
	// server and gapscope only, as on a database host.
	Driver string
}

func (o *OverheadOptions) defaults() {
	if o.Configs == "" {
		o.Configs = OverheadConfigs
	}
	o.Rounds = or(o.Rounds, 3)
	o.Tables, o.Rows, o.Threads = or(o.Tables, 2), or(o.Rows, 10_000), or(o.Threads, 4)
	if o.Duration <= 0 {
		o.Duration = 5 * time.Second
	}
	if o.Warmup == 0 {
		o.Warmup = 2 * time.Second
	}
	if o.TimeLimit == 0 {
		o.TimeLimit = 3 * time.Minute
	}
	if o.Driver == "" {
		o.Driver = "builtin"
		if workload.SysbenchAvailable() {
			o.Driver = "sysbench"
		}
	}
}

func or(v, def int) int {
	if v <= 0 {
		return def
	}
	return v
}

// OverheadResult is the scenario's outcome: the lab fields plus the table.
// Its JSON has "scenario", "findings" (INSTRUMENTATION_COST per setting
// above noise), "statements" (none: this lab measures throughput) and
// "table", "rounds", "method".
type OverheadResult struct {
	Result
	Table    []overhead.Row   `json:"table"`
	Rounds   []overhead.Round `json:"rounds"`
	Method   string           `json:"method"`
	Restored bool             `json:"restored"`
	Overhead *overhead.Result `json:"-"`
}

// Overhead reproduces the overhead case on a sandbox: the OLTP workload under
// performance_schema off, default, all on, optimizer_trace and gapscope
// watch, in rotated rounds; the costs above noise become findings.
func Overhead(ctx context.Context, o OverheadOptions) (*OverheadResult, error) {
	o.defaults()
	started := time.Now()
	cs, err := overhead.ParseConfigs(o.Configs)
	if err != nil {
		return nil, err
	}
	r := &OverheadResult{Result: Result{Scenario: "overhead", Settings: overhead.Names(cs), Statements: []event.Statement{}}}
	restore := raisePriority(o.Options, &r.Result)
	defer restore()
	// The data stays on disk (unlike the concurrency lab's): part of what
	// every instrument costs may be on the file I/O path, which tmpfs makes
	// nearly free. Tried on tmpfs, startup ps-all never decided and was no
	// less noisy than on disk, where its cost shows (docs/performance.md,
	// "The overhead lab's data on disk"; issue 31).
	args := OverheadServerArgs
	inst, err := startSandbox(ctx, o.Options, &r.Result, sandbox.Options{ServerArgs: args, Nice: sandbox.LabNice})
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	o.step(&r.Result, "OLTP read/write (%s), %d tables x %d rows, %d threads: %d rounds of %s per setting, rotated, then more while a setting is undecided (up to %s)",
		o.Driver, o.Tables, o.Rows, o.Threads, o.Rounds, o.Duration, o.TimeLimit)
	res, err := overhead.Run(ctx, overhead.Options{DSN: inst.DSN(""), Sandbox: inst, SandboxArgs: args, Configs: cs,
		Rounds: o.Rounds, TimeLimit: o.TimeLimit, Duration: o.Duration, Warmup: o.Warmup, Driver: o.Driver, WatchIface: "lo",
		Workload: workload.OLTPOptions{Tables: o.Tables, TableSize: o.Rows, Threads: o.Threads},
		Progress: func(p overhead.Progress) {
			if p.Last != nil || p.Table != nil {
				o.step(&r.Result, "%s", overhead.ProgressLine(p))
			}
		}})
	if err != nil {
		return nil, err
	}
	r.fill(res)
	r.Elapsed = time.Since(started)
	return r, nil
}

// fill turns the measurement into the lab's table, findings and lines.
func (r *OverheadResult) fill(res *overhead.Result) {
	r.Overhead, r.Table, r.Rounds, r.Method, r.Restored = res, res.Table, res.Rounds, res.Method, res.Restored
	r.Findings = overhead.Findings(res)
	if r.Findings == nil {
		r.Findings = []event.Finding{}
	}
	for _, row := range res.Table {
		if row.AboveNoise == overhead.VerdictBaseline {
			r.Seen = append(r.Seen, fmt.Sprintf("%s (baseline): median %.0f TPS (%.0f–%.0f)", row.Config, row.TPS, row.TPSMin, row.TPSMax))
			continue
		}
		r.Seen = append(r.Seen, fmt.Sprintf("%s (applied at %s): median %.0f TPS, x%.3f [x%.3f–x%.3f]; capacity (transactions per CPU second) x%.3f [x%.3f–x%.3f]; over %d pairs; above noise (by %s): %s",
			row.Config, row.Applied, row.TPS, row.Ratio, row.RatioLow, row.RatioHigh, row.Capacity, row.CapacityLow, row.CapacityHigh, row.Pairs, row.VerdictOn, row.AboveNoise))
	}
	r.Seen = append(r.Seen, res.Notes...)
}
