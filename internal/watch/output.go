package watch

import (
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// outputQueue holds the finished statements and transactions on their way
// to the run's sinks (the events file, the store, the exporters), so that
// a slow disk or a slow exporter delays only the sinks: the joiner, which
// finishes statements with its lock held, and the poller and the main
// loop behind it never wait for them. It is bounded; a statement that
// finds it full is counted (Coverage.OutputDropped) and reaches no sink,
// while watch's own accounting (profile, window, coverage) has it already.
//
// put is called by whichever goroutine finishes a statement; the queue is
// under mu, held only to append or swap. The output stage drains it.
type outputQueue struct {
	takes   Takes // what some sink takes: nothing else is queued
	mu      sync.Mutex
	queue   []*event.Statement
	txns    []*event.Transaction
	closed  bool
	wake    chan struct{} // a put into an empty queue, or close
	dropped atomic.Int64
}

// maxOutputQueued bounds the statements waiting for the sinks: at 100,000
// statements a second, over half a second of a stalled disk.
const maxOutputQueued = 64 << 10

// newOutputQueue is the queue to sinks.
func newOutputQueue(sinks []Sink) *outputQueue {
	return &outputQueue{takes: takesOf(sinks), wake: make(chan struct{}, 1)}
}

// put queues s for the sinks, never waiting for them. It ends s's life
// (event.Statement.Release): at once when no sink takes statements or the
// queue turns it away, else once the sinks had it.
func (q *outputQueue) put(s *event.Statement) {
	if q.takes&TakesStatements == 0 || !enqueue(q, &q.queue, s) {
		s.Release()
	}
}

// putTxn queues a finished transaction for the sinks that take them; like
// put, it never waits.
func (q *outputQueue) putTxn(t *event.Transaction) {
	if q.takes&TakesTransactions != 0 {
		enqueue(q, &q.txns, t)
	}
}

// enqueue appends x to list, one of q's, and wakes the stage when q was
// empty. A full or closed queue turns x away (false), counted as dropped.
func enqueue[T any](q *outputQueue, list *[]T, x T) bool {
	q.mu.Lock()
	if len(*list) >= maxOutputQueued || q.closed {
		q.mu.Unlock()
		q.dropped.Add(1)
		return false
	}
	first := len(q.queue)+len(q.txns) == 0
	*list = append(*list, x)
	q.mu.Unlock()
	if first {
		signal(q.wake)
	}
	return true
}

// take swaps the queued statements for spare (emptied) and takes the
// queued transactions.
func (q *outputQueue) take(spare []*event.Statement) ([]*event.Statement, []*event.Transaction) {
	q.mu.Lock()
	defer q.mu.Unlock()
	batch, txns := q.queue, q.txns
	q.queue, q.txns = spare[:0], nil
	return batch, txns
}

// close refuses what is put from now on, counting it as dropped: the
// count of what reached no sink is final.
func (q *outputQueue) close() {
	q.mu.Lock()
	q.closed = true
	q.mu.Unlock()
}

// drops is how many statements and transactions reached no sink.
func (q *outputQueue) drops() int64 { return q.dropped.Load() }

// outputStage is the goroutine that calls the run's sinks, and alone
// calls them: it drains the queue, in the order statements were put,
// hands out a snapshot at its start and every LiveEvery when a sink
// takes them, and at the end the final snapshot to every sink's Close.
type outputStage struct {
	q     *outputQueue
	sinks []Sink
	// stmts, txns and snaps are the sinks that take each.
	stmts, txns, snaps []Sink
	src                *snapshotSource
	every              time.Duration
	// end takes the run's result, once the queue is closed; closed
	// carries what the sinks' Close returned.
	end    chan *Result
	closed chan []error
}

// startOutput starts the stage draining q into sinks, with snapshots from
// src every LiveEvery when a sink takes them.
func startOutput(q *outputQueue, sinks []Sink, src *snapshotSource, every time.Duration) *outputStage {
	o := &outputStage{q: q, sinks: sinks, src: src, every: every, end: make(chan *Result), closed: make(chan []error, 1)}
	for _, k := range sinks {
		t := k.Takes()
		o.stmts = appendIf(o.stmts, t&TakesStatements != 0, k)
		o.txns = appendIf(o.txns, t&TakesTransactions != 0, k)
		o.snaps = appendIf(o.snaps, t&TakesSnapshots != 0, k)
	}
	go o.run()
	return o
}

// run delivers what is queued as it comes, and snapshots on the tick,
// until the run's result comes: then it delivers what is left and closes
// the sinks. Without a sink that takes snapshots there is no tick, and
// none is built: building one copies the latest statements and runs the
// statement rules on them, which an idle watch would pay for nobody.
func (o *outputStage) run() {
	var tick <-chan time.Time
	if len(o.snaps) > 0 {
		t := time.NewTicker(o.every)
		defer t.Stop()
		tick = t.C
		o.snapshot(o.src.live()) // sinks learn the server before its first statement
	}
	var spare []*event.Statement
	for {
		select {
		case <-o.q.wake:
			spare = o.deliver(spare)
		case <-tick:
			o.snapshot(o.src.live())
		case res := <-o.end:
			o.deliver(spare)
			o.closed <- closeSinks(o.sinks, o.src.final(res))
			return
		}
	}
}

// deliver hands the queued statements and transactions to the sinks that
// take them, a batch at a time, until the queue is empty; it returns the
// batch's memory for the next one.
func (o *outputStage) deliver(spare []*event.Statement) []*event.Statement {
	for {
		batch, txns := o.q.take(spare)
		for _, s := range batch {
			for _, k := range o.stmts {
				k.Statement(s)
			}
			s.Release() // a sink keeps what it needs as a copy (Sink)
		}
		for _, t := range txns {
			for _, k := range o.txns {
				k.Transaction(t)
			}
		}
		clear(batch)
		spare = batch
		if len(batch) == 0 && len(txns) == 0 {
			return spare
		}
	}
}

// snapshot hands snap to the sinks that take snapshots.
func (o *outputStage) snapshot(snap *Snapshot) {
	for _, k := range o.snaps {
		k.Snapshot(snap)
	}
}

func appendIf(sinks []Sink, takes bool, k Sink) []Sink {
	if takes {
		return append(sinks, k)
	}
	return sinks
}

// close hands the stage the run's result once the queue is closed:
// everything queued reaches the sinks, then the final snapshot their
// Close. It returns what Close returned.
func (o *outputStage) close(res *Result) []error {
	o.end <- res
	return <-o.closed
}

// closeSinks closes every sink with final, and returns their errors.
func closeSinks(sinks []Sink, final *Snapshot) []error {
	var errs []error
	for _, k := range sinks {
		if err := k.Close(final); err != nil {
			errs = append(errs, err)
		}
	}
	return errs
}

// AbandonSinks closes the sinks of a run that could not start, with an
// empty final snapshot (Run does when it fails to start; a command that
// fails before Run does it for the sinks it made).
func AbandonSinks(sinks []Sink) error {
	return errors.Join(closeSinks(sinks, &Snapshot{TimeUS: nowUS(), Final: true})...)
}
