package report

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/eventlog"
	"github.com/gapscope/gapscope/internal/store"
)

// RunOutputs are a run's optional events file and store (gapscope watch's
// --events and --store). A write that fails stops that output only: it is
// reported once, on errOut, when it fails, and the run goes on.
type RunOutputs struct {
	events *EventsFile
	st     *store.Store
	writer *store.Writer
	run    int64
	errMu  sync.Mutex // errOut and failed are used from the joiner's and the writers' goroutines
	errOut io.Writer
	failed []string // the outputs that failed, by name
}

// eventsFlushEvery bounds what a run killed without a chance to close
// (kill -9, a crash) loses of its events file.
const eventsFlushEvery = time.Second

// RunOutputOptions say which outputs a run writes.
type RunOutputOptions struct {
	Command, Target string // the store's run: the command, and the server as collect.Secrets.Target names it (no password)
	Events          string // events file ("": none)
	EventsLog       eventlog.Options
	Store           string // SQLite store ("": none)
	StoreWriter     store.WriterOptions
}

// OpenRunOutputs opens the events file and the store. A failed output is
// reported on errOut.
func OpenRunOutputs(ctx context.Context, errOut io.Writer, opts RunOutputOptions) (*RunOutputs, error) {
	o := &RunOutputs{errOut: errOut}
	ev, err := OpenEventLog(opts.Events, opts.EventsLog, func(err error) { o.fail("events file", err) })
	if err != nil {
		return nil, err
	}
	o.events = ev
	ev.FlushEvery(eventsFlushEvery)
	ev.ReopenOnHangup()
	if opts.Store != "" {
		st, err := store.Open(ctx, opts.Store)
		if err != nil {
			o.Close(nil)
			return nil, err
		}
		o.st = st
		if o.run, err = st.StartRun(ctx, opts.Command, opts.Target, time.Now().UnixMicro()); err != nil {
			o.Close(nil)
			return nil, err
		}
		wo := opts.StoreWriter
		wo.OnFlush = o.storeFlushed
		o.writer = st.NewWriter(o.run, wo)
	}
	return o, nil
}

// fail tells the user at once that an output stopped (in watch's words:
// watch is the command that records to both while it runs).
func (o *RunOutputs) fail(name string, err error) {
	o.errMu.Lock()
	defer o.errMu.Unlock()
	o.failed = append(o.failed, name)
	fmt.Fprintf(o.errOut, "gapscope: %v: no more statements are written there; watch goes on and prints its result at the end\n", err)
}

// Failed names the outputs that failed.
func (o *RunOutputs) Failed() []string {
	o.errMu.Lock()
	defer o.errMu.Unlock()
	return slices.Clone(o.failed)
}

// storeFlushed is the store writer's commit hook: its first failure is the
// only one it reports (a failed writer commits nothing more).
func (o *RunOutputs) storeFlushed(_ int, err error) {
	if err != nil {
		o.fail("store", fmt.Errorf("store %s: %w", o.st.Path(), err))
	}
}

// Writes reports whether the run writes statements anywhere (an events
// file or a store): without either, Add does nothing, and a caller need
// not hand it every statement.
func (o *RunOutputs) Writes() bool { return o.events != nil || o.writer != nil }

// Add writes s to each output; it is called from one goroutine at a time.
// Errors reach the user through fail; the writers keep them for Close.
func (o *RunOutputs) Add(s *event.Statement) {
	o.events.Write(s)
	// A replica's binlog stream is no statement: the store's per-minute
	// digests add latencies up, and its rows are read back as statements.
	if o.writer != nil && s.Why != event.ReplicaStream {
		_ = o.writer.Add(s)
	}
}

// Transaction writes a finished transaction to the store: watch's sink
// calls it on the output stage's goroutine, as it calls Add. The events
// file takes statements only (transactions have their own file, --txns).
// A failed store counts it among its dropped rows.
func (o *RunOutputs) Transaction(t *event.Transaction) {
	if o.writer != nil {
		_ = o.writer.AddTransaction(t)
	}
}

// Close records the run's findings in the store, ends the run and closes
// both outputs; it returns their first errors.
func (o *RunOutputs) Close(findings []event.Finding) error {
	err := o.events.Close()
	if o.writer != nil {
		for i := range findings {
			_ = o.writer.AddFinding(time.Now().UnixMicro(), &findings[i])
		}
		err = errors.Join(err, o.writer.Close())
		_ = o.st.EndRun(context.Background(), o.run, time.Now().UnixMicro(), "")
		o.st.Close()
	}
	return err
}
