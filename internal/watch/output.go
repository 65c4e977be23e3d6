package watch

import (
	"sync"
	"sync/atomic"

	"github.com/gapscope/gapscope/internal/event"
)

// outputStage hands every finished statement to the run's sinks (the
// events file, the store, the exporters) on a goroutine of its own, so
// that a slow disk or a slow exporter delays only the sinks: the joiner,
// which finishes statements with its lock held, and the poller and the
// main loop behind it never wait for them. Its queue is bounded; a
// statement that finds it full is counted (Coverage.OutputDropped) and
// reaches no sink, while watch's own accounting (profile, window,
// coverage) has it already.
//
// put is called by whichever goroutine finishes a statement; its queue is
// under mu, held only to append or swap. run alone calls the sinks, in the
// order statements were put.
type outputStage struct {
	sinks   []Sink
	mu      sync.Mutex
	queue   []*event.Statement
	txns    []*event.Transaction // finished transactions, for the sinks that take them (TxnSink)
	closed  bool
	wake    chan struct{} // a put into an empty queue, or close
	done    chan struct{} // closed when run returned
	dropped atomic.Int64
}

// outputQueue bounds the statements waiting for the sinks: at 100,000
// statements a second, over half a second of a stalled disk.
const outputQueue = 64 << 10

// newOutputStage starts the stage for sinks; without sinks there is no
// stage (nil), and put on it does nothing.
func newOutputStage(sinks []Sink) *outputStage {
	if len(sinks) == 0 {
		return nil
	}
	o := &outputStage{sinks: sinks, wake: make(chan struct{}, 1), done: make(chan struct{})}
	go o.run()
	return o
}

// put queues s for the sinks, never waiting for them. It ends s's life
// (event.Statement.Release): at once when no sink takes it, else once the
// sinks had it.
func (o *outputStage) put(s *event.Statement) {
	if o == nil {
		s.Release()
		return
	}
	o.mu.Lock()
	if len(o.queue) >= outputQueue || o.closed {
		o.mu.Unlock()
		o.dropped.Add(1)
		s.Release()
		return
	}
	o.queue = append(o.queue, s)
	first := len(o.queue) == 1
	o.mu.Unlock()
	if first {
		o.signal()
	}
}

func (o *outputStage) signal() {
	select {
	case o.wake <- struct{}{}:
	default: // a wake is pending: it covers this one
	}
}

// run hands the queued statements to the sinks, a batch at a time, until
// close and the queue is empty.
func (o *outputStage) run() {
	defer close(o.done)
	var spare []*event.Statement
	for range o.wake {
		for {
			o.mu.Lock()
			batch, txns, closed := o.queue, o.txns, o.closed
			o.queue, o.txns = spare[:0], nil
			o.mu.Unlock()
			for _, s := range batch {
				for _, k := range o.sinks {
					k.Statement(s)
				}
				s.Release() // a sink keeps what it needs as a copy (Sink)
			}
			for _, t := range txns {
				for _, k := range o.sinks {
					if ts, ok := k.(TxnSink); ok {
						ts.Transaction(t)
					}
				}
			}
			clear(batch)
			spare = batch
			if len(batch) == 0 && len(txns) == 0 {
				if closed {
					return
				}
				break
			}
		}
	}
}

// putTxn queues a finished transaction for the sinks that take them; like
// put, it never waits (a full queue counts it dropped).
func (o *outputStage) putTxn(t *event.Transaction) {
	if o == nil {
		return
	}
	o.mu.Lock()
	if len(o.txns) >= outputQueue || o.closed {
		o.mu.Unlock()
		o.dropped.Add(1)
		return
	}
	o.txns = append(o.txns, t)
	first := len(o.txns) == 1 && len(o.queue) == 0
	o.mu.Unlock()
	if first {
		o.signal()
	}
}

// close delivers what is queued and waits for it; a statement put after
// close is counted as dropped.
func (o *outputStage) close() {
	if o == nil {
		return
	}
	o.mu.Lock()
	o.closed = true
	o.mu.Unlock()
	o.signal()
	<-o.done
}

// drops is how many statements reached no sink.
func (o *outputStage) drops() int64 {
	if o == nil {
		return 0
	}
	return o.dropped.Load()
}
