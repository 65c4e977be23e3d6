package probe

import (
	"context"
	"fmt"
	"math"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// Recorder writes runs, samples and findings to a store, if one is given.
type Recorder struct{ rec *store.Recorder }

// Record starts a probe run in the store at path ("" records nothing)
// against target (no password).
func Record(ctx context.Context, path, target string) (*Recorder, error) {
	rec, err := store.Record(ctx, path, "probe", target, store.WriterOptions{})
	if err != nil {
		return nil, err
	}
	return &Recorder{rec: rec}, nil
}

// Add stores one run: its probe_results row (whole thread counts) and,
// as samples at the same instant, the exact means and the pool queue.
func (r *Recorder) Add(o Options, p Point) error {
	if !r.rec.On() {
		return nil
	}
	name := storeName(o)
	err := r.rec.Store().AddProbe(context.Background(), store.ProbeResult{RunID: r.rec.Run(), TimeUS: p.TimeUS, Name: name,
		Calls: int64(p.Calls), MinUS: p.MinUS, AvgUS: p.AvgUS, MedianUS: p.MedianUS, MaxUS: p.MaxUS,
		ThreadsConnected: int64(math.Round(p.ThreadsConnected)), ThreadsRunning: int64(math.Round(p.ThreadsRunning))})
	if err != nil {
		return err
	}
	labels := map[string]string{"probe": name}
	for _, s := range []struct {
		name string
		v    float64
	}{{"threads_running", p.ThreadsRunning}, {"threads_connected", p.ThreadsConnected},
		{"pool_queue", p.PoolQueue}, {"pool_queue_max", float64(p.PoolQueueMax)}} {
		if err := r.rec.Writer().AddSample(&event.Sample{TimeUS: p.TimeUS, Source: "probe", Name: s.name, Value: s.v, Labels: labels}); err != nil {
			return err
		}
	}
	return nil
}

func storeName(o Options) string {
	if o.Script != nil {
		return o.ScriptName
	}
	return "canary"
}

// Close stores the findings and ends the run; it runs after Ctrl-C too.
func (r *Recorder) Close(res *Result) error {
	var err error
	notes := ""
	if res != nil {
		err = r.rec.AddFindings(res.Findings)
		if res.Discarded > 0 {
			notes = fmt.Sprintf("%d run(s) discarded", res.Discarded)
		}
	}
	if cerr := r.rec.Close(notes); err == nil {
		err = cerr
	}
	return err
}
