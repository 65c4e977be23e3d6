package store

import (
	"context"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// Recorder is one command's run in a store: the run starts when the
// recorder opens and ends when it closes. A recorder opened without a path
// records nothing, so that a command without --store needs no checks.
type Recorder struct {
	st   *Store
	w    *Writer
	opts WriterOptions
	run  int64
}

// Record opens the store at path and starts a run of command against
// target (a DSN without its password); path "" records nothing. Rows go
// through a Writer with opts, made on first use.
func Record(ctx context.Context, path, command, target string, opts WriterOptions) (*Recorder, error) {
	if path == "" {
		return &Recorder{}, nil
	}
	st, err := Open(ctx, path)
	if err != nil {
		return nil, err
	}
	run, err := st.StartRun(ctx, command, target, time.Now().UnixMicro())
	if err != nil {
		st.Close()
		return nil, err
	}
	return &Recorder{st: st, run: run, opts: opts}, nil
}

// On reports whether the recorder writes to a store.
func (r *Recorder) On() bool { return r.st != nil }

// Store is the open store (nil when off).
func (r *Recorder) Store() *Store { return r.st }

// Run is the run's id.
func (r *Recorder) Run() int64 { return r.run }

// Writer is the run's batched writer, made on first use (nil when off).
func (r *Recorder) Writer() *Writer {
	if r.st != nil && r.w == nil {
		r.w = r.st.NewWriter(r.run, r.opts)
	}
	return r.w
}

// AddFindings queues the findings, stamped now; it stops at the first
// error.
func (r *Recorder) AddFindings(fs []event.Finding) error {
	if r.st == nil {
		return nil
	}
	now := time.Now().UnixMicro()
	for i := range fs {
		if err := r.Writer().AddFinding(now, &fs[i]); err != nil {
			return err
		}
	}
	return nil
}

// Close commits what the writer holds, ends the run with notes and closes
// the store; it returns the first error.
func (r *Recorder) Close(notes string) error {
	err := r.CloseWriter()
	if eerr := r.End(notes); err == nil {
		err = eerr
	}
	return err
}

// CloseWriter commits what the writer holds and stops it.
func (r *Recorder) CloseWriter() error {
	if r.w == nil {
		return nil
	}
	return r.w.Close()
}

// End ends the run with notes and closes the store; it returns the first
// error of the two.
func (r *Recorder) End(notes string) error {
	if r.st == nil {
		return nil
	}
	err := r.st.EndRun(context.Background(), r.run, time.Now().UnixMicro(), notes)
	if cerr := r.st.Close(); err == nil {
		err = cerr
	}
	return err
}
