// Package probe runs a small canary workload on a schedule, records its
// latency beside the concurrency the server reported at the same instants,
// and finds the concurrency knee: the number of running threads above
// which latency explodes, tied to the setting that caps concurrency there
// (the concurrency-cap case of docs/field-reports.md). The fit is pure
// (FitKnee, CapsFromSettings, KneeFinding); Run does the I/O.
package probe

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/workload"
)

// Options configure Run.
type Options struct {
	// DSN is what the canary connects with: the path the application takes
	// (through the thread pool, not its extra port).
	DSN string
	// Monitor reads status, variables and the thread pool's groups; with a
	// thread pool, open it on the extra port so reads do not queue.
	Monitor *sql.DB
	// Every is the time between the starts of two runs (default 60 s).
	Every time.Duration
	// Count stops after this many runs; 0 runs until ctx ends.
	Count int
	// Canary configures the default workload (the concurrency-cap case's canary).
	Canary workload.CanaryOptions
	// Script, when set, replaces the canary: its statements run in order on
	// one connection, Canary.Repeat times, each repetition timed.
	Script     []workload.Statement
	ScriptName string
	// SampleEvery is the time between status reads during a run (default
	// 250 ms; one more is taken at the start and the end).
	SampleEvery time.Duration
	// Cores is the server host's CPU count (0: unknown).
	Cores int
	// Knee tunes the fit; Tolerance ties a knee to a cap (default 0.2).
	Knee      KneeOptions
	Tolerance float64
	// OnPoint is called after each completed run (store, progress); an
	// error stops the probe.
	OnPoint func(Point) error
	// OnDiscard is told about a run that did not complete.
	OnDiscard func(err error)
	// Load, when set, is recorded in each point (labs: the ramp step).
	Load func() int
}

// Result is what a probe measured and concluded.
type Result struct {
	Series   Series          `json:"series"`
	Knee     Knee            `json:"knee"`
	Caps     []Cap           `json:"caps"`
	Findings []event.Finding `json:"findings"`
	// Discarded counts runs cut short by Ctrl-C or failed.
	Discarded int `json:"discarded"`
	// Settings are the variables the caps were computed from.
	Settings map[string]string `json:"settings"`
}

// maxFailures ends a probe after this many consecutive failed runs: the
// server is gone or the canary cannot work there.
const maxFailures = 3

// Run probes until Count runs are done or ctx ends; a run in progress at
// cancel is discarded, and the result (with its knee fit over the runs
// completed) is returned without error. ctx's end is not an error.
func Run(ctx context.Context, o Options) (*Result, error) {
	if o.Monitor == nil || o.DSN == "" {
		return nil, errors.New("probe: a DSN and a monitor connection are required")
	}
	o.Every = cmp.Or(o.Every, time.Minute)
	o.SampleEvery = cmp.Or(o.SampleEvery, 250*time.Millisecond)
	o.Tolerance = cmp.Or(o.Tolerance, DefaultTolerance)
	info, err := collect.DetectServer(ctx, o.Monitor)
	if err != nil {
		return nil, err
	}
	m := &monitor{db: o.Monitor, pool: info.ThreadPool && info.ThreadPoolTables}
	res := &Result{Series: Series{Name: workloadName(o)}}
	err = loop(ctx, o, m, res)
	if err2 := conclude(o, res); err == nil {
		err = err2
	}
	return res, err
}

// loop runs the schedule.
func loop(ctx context.Context, o Options, m *monitor, res *Result) error {
	start, failures := time.Now(), 0
	for i := 0; o.Count == 0 || i < o.Count; i++ {
		if i > 0 && !waitUntil(ctx, start.Add(time.Duration(i)*o.Every)) {
			return nil
		}
		p, err := runOnce(ctx, o, m)
		if ctx.Err() != nil {
			res.Discarded++
			return nil
		}
		if err != nil {
			res.Discarded++
			if o.OnDiscard != nil {
				o.OnDiscard(err)
			}
			if failures++; failures >= maxFailures {
				return fmt.Errorf("probe: %d runs in a row failed, last: %w", failures, err)
			}
			continue
		}
		failures = 0
		res.Series.Points = append(res.Series.Points, p)
		if o.OnPoint != nil {
			if err := o.OnPoint(p); err != nil {
				return err
			}
		}
	}
	return nil
}

// conclude reads the settings in force at the end (they may have changed
// during the probe) and fits the knee. It uses its own context: after a
// Ctrl-C the summary is still wanted.
func conclude(o Options, res *Result) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	vars, err := collect.GlobalVariables(ctx, o.Monitor)
	if err != nil {
		return err
	}
	res.Settings = capSettings(vars)
	res.Knee, res.Caps, res.Findings = Analyze(res.Series, vars, o.Cores, o.Knee, o.Tolerance)
	return nil
}

// Analyze fits the knee of s and ties it to the caps that vars (global
// variables) and cores impose; findings is empty when there is no knee.
func Analyze(s Series, vars map[string]string, cores int, ko KneeOptions, tolerance float64) (Knee, []Cap, []event.Finding) {
	caps := CapsFromSettings(vars, cores)
	k := s.Knee(ko)
	var findings []event.Finding
	if f := KneeFinding(k, caps, cmp.Or(tolerance, DefaultTolerance)); f != nil {
		findings = append(findings, *f)
	}
	return k, caps, findings
}

// capSettings keeps the variables caps are computed from, for evidence.
func capSettings(vars map[string]string) map[string]string {
	out := map[string]string{}
	for _, k := range []string{"thread_handling", "thread_pool_size", "thread_pool_oversubscribe",
		"thread_pool_max_threads", "thread_pool_stall_limit", "innodb_thread_concurrency", "max_connections"} {
		if v, ok := vars[k]; ok {
			out[k] = v
		}
	}
	return out
}

func workloadName(o Options) string {
	if o.Script != nil {
		return cmp.Or(o.ScriptName, "script")
	}
	return "canary"
}

// waitUntil sleeps until t; false when ctx ended first.
func waitUntil(ctx context.Context, t time.Time) bool {
	d := time.Until(t)
	if d <= 0 {
		return ctx.Err() == nil
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	select {
	case <-timer.C:
		return true
	case <-ctx.Done():
		return false
	}
}
