package plans

import (
	"context"
	"sync"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/store"
)

// Recorder records plans and flips in a store, when one is given. A
// failed write does not stop the catcher: the first is kept for Close.
type Recorder struct {
	rec *store.Recorder
	mu  sync.Mutex // plans and flips arrive from the catcher's goroutines
	err error      // the first failed write
}

// Record starts a plans run in the store at path ("" records nothing)
// against target (no password).
func Record(ctx context.Context, path, target string) (*Recorder, error) {
	rec, err := store.Record(ctx, path, "plans", target, store.WriterOptions{})
	if err != nil {
		return nil, err
	}
	return &Recorder{rec: rec}, nil
}

// Plan stores a caught plan.
func (r *Recorder) Plan(ctx context.Context, c Caught) {
	if !r.rec.On() {
		return
	}
	r.keep(r.rec.Store().AddPlan(context.WithoutCancel(ctx), store.Plan{RunID: r.rec.Run(), TimeUS: c.TimeUS, ConnID: c.ConnID,
		Digest: c.Digest, DigestText: c.DigestText, Source: c.Source, Plan: c.Plan.Text(), ExecUS: c.ElapsedUS}))
}

// Finding stores a flip.
func (r *Recorder) Finding(f event.Finding) {
	r.keep(r.rec.AddFindings([]event.Finding{f}))
}

func (r *Recorder) keep(err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.err == nil {
		r.err = err
	}
}

// Close flushes and closes the store and returns the first write error.
func (r *Recorder) Close() error {
	r.keep(r.rec.Close(""))
	return r.err
}
