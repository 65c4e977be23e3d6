package overhead

import (
	"context"
	"fmt"

	"github.com/gapscope/gapscope/internal/watch"
)

// watchRun is the watch engine running during a gapscope-watch round.
type watchRun struct {
	cancel context.CancelFunc
	done   chan struct{}
	res    *watch.Result
	err    error
}

// startWatch runs the real watch engine in-process, as `gapscope watch
// --enable-consumers` would (its default CPU budget included), and returns
// once it captures and polls.
func startWatch(ctx context.Context, s *session) error {
	if s.watch != nil {
		return nil
	}
	wctx, cancel := context.WithCancel(ctx)
	w := &watchRun{cancel: cancel, done: make(chan struct{})}
	ready := make(chan struct{})
	opts := watch.Options{DSN: s.dsn, Secrets: s.opts.Secrets, Iface: s.opts.WatchIface, EnableConsumers: true, CPUBudget: watch.DefaultCPUBudget, Ready: func(watch.Started) { close(ready) }}
	go func() {
		defer close(w.done)
		w.res, w.err = watch.Run(wctx, opts)
	}()
	s.watch = w
	select {
	case <-ready:
		return nil
	case <-w.done:
		s.watch = nil
		cancel()
		return fmt.Errorf("starting gapscope watch: %w", w.err)
	}
}

// stopWatch ends the watch, notes what it saw (a watch that captured
// nothing would measure nothing), and restores what it changed: the
// consumers it enabled and the wait timer it switched to NANOSECOND.
func stopWatch(ctx context.Context, s *session) error {
	if w := s.watch; w != nil {
		w.cancel()
		<-w.done
		s.watch = nil
		if w.err != nil {
			s.note("gapscope-watch: watch ended with: %v", w.err)
		} else if w.res != nil {
			s.watchWire += w.res.Join.Wire
			s.watchJoined += w.res.Join.Joined
			s.watchDropped += w.res.Capture.KernelDrops
		}
	}
	if s.orig.Consumers == nil { // performance_schema was never on
		return nil
	}
	if err := restoreConsumers(ctx, s.db, s.orig.Consumers); err != nil {
		return err
	}
	return restoreTimers(ctx, s.db, s.orig.Timers)
}
