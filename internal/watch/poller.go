package watch

import (
	"context"
	"slices"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/txn"
)

// poller is the poller stage: a goroutine that runs the run's readers of
// the server, each on its own schedule, and never touches the capture (a
// slow or lost server only delays joins). The readers are a list, made
// complete by build; a reader a run does not need (no statement history,
// no thread to read) is not in it:
//
//   - status (status.go): the statement and connection counters once a
//     second, whether anyone but watch uses the server (activity), the
//     processlist and the thread-pool groups, the row-lock counter, the
//     host's sockets, and the CPU budget's policy;
//   - history (history.go): history_long, paced by the ring's turnover,
//     the threads of new connections, and the link to the server (a lost
//     server, a restart);
//   - targets (targets.go): the threads of the outliers the wire reports,
//     and the statements running, with the lock tables behind the long
//     ones.
//
// The readers share what they learn of the server (known) and nothing
// else; the wire wakes the poller through one channel (wake), and each
// reader looks at what concerns it on every wake.
type poller struct {
	readers []reader
	// wake: something a reader waits for arrived (an outlier, a new
	// connection, the ring's share filled, a lost server's port answered,
	// the ledger's wish for the row-lock counter).
	wake   <-chan struct{}
	clock  *collect.Recalibrator // re-calibrated on its own goroutine beside the readers
	ledger *txn.Ledger           // its ended transactions are written as time passes, however quiet the wire
	// wakes counts the loop's wake-ups (ServerSide.PollerWakes): what it
	// costs when it has nothing to read must stay bounded by what happens.
	wakes atomic.Int64
}

// reader is one of the poller's reads of the server. Its state is its
// own, touched on the poller's goroutine only (and by final, after it
// ended).
type reader interface {
	// read does what is due now.
	read(ctx context.Context, now time.Time)
	// next is how long until the reader is due without a wake (false:
	// only a wake makes it due).
	next(now time.Time) (time.Duration, bool)
	// final makes the run's last reads, after the poller's goroutine ended.
	final(ctx context.Context)
}

// known is what the readers learn of the server and share, on the
// poller's goroutine: each part is written by the reader named beside it
// and read by the others.
type known struct {
	// info and caps are the server as last read (history: a restart
	// re-reads them); startedAt its start, Unix seconds (status, and
	// history on a restart).
	info      collect.ServerInfo
	caps      collect.Capabilities
	startedAt int64
	// act says whether anyone but watch uses the server (status, and a
	// sign any reader sees); queryRate is the server's statements a
	// second at the last status read (status).
	act       activity
	queryRate float64
	// unseenUntil: until then the server opens connections the wire does
	// not see; shortUntil: until then it counted statements the wire did
	// not take (status). Both keep the running scans at their pace.
	unseenUntil, shortUntil time.Time
	// learn: the threads of the connections seen are to be read (asked
	// by any reader, served by history).
	learn threadLearner
}

// newPoller makes the poller stage of readers (in the order they run on a
// wake).
func newPoller(wake <-chan struct{}, clock *collect.Recalibrator, ledger *txn.Ledger, readers ...reader) *poller {
	return &poller{readers: readers, wake: wake, clock: clock, ledger: ledger}
}

// start runs the poller on its own goroutine until ctx ends. The channel
// it returns is closed once the goroutine ended, the readers' state then
// being the caller's.
func (p *poller) start(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	go func() {
		defer close(done)
		go func() { _ = p.clock.Run(ctx) }()
		p.run(ctx)
	}()
	return done
}

// run runs the readers until ctx ends: on a wake, and when the first of
// them is due.
func (p *poller) run(ctx context.Context) {
	t := time.NewTimer(time.Hour)
	defer t.Stop()
	for {
		var due <-chan time.Time
		if wait, ok := p.nextWake(time.Now()); ok {
			t.Reset(wait)
			due = t.C
		}
		select {
		case <-ctx.Done():
			return
		case <-p.wake:
		case <-due:
		}
		p.wakes.Add(1)
		for _, r := range p.readers {
			r.read(ctx, time.Now())
		}
		p.ledger.Tick(nowUS())
	}
}

// nextWake is how long the poller may sleep before a reader is due
// (false: none is until a wake).
func (p *poller) nextWake(now time.Time) (wait time.Duration, ok bool) {
	for _, r := range p.readers {
		if w, due := r.next(now); due && (!ok || w < wait) {
			wait, ok = w, true
		}
	}
	return wait, ok
}

// final makes every reader's last reads, once the goroutine ended, in
// the reverse order: the outliers' threads first, while the server still
// holds their rows, then the history, whose last read drops what they
// fed, then the counters.
func (p *poller) final(ctx context.Context) {
	for _, r := range slices.Backward(p.readers) {
		r.final(ctx)
	}
}

// threadLearner paces the reads of which thread serves which connection.
type threadLearner struct {
	pending bool
	at      time.Time
}

// want asks for a read of the threads (history serves it).
func (l *threadLearner) want() { l.pending = true }

// learnEvery bounds how often new connections make the poller read the
// threads (a storm of short connections costs one read per interval). The
// capture hands statements over a block of packets at a time, tens of
// milliseconds after they ran: the read a block's first new connection
// asks for finds alive only those not closed yet, and the next one, due
// learnEvery later, those of the block still open then. Each read also
// observes the newest thread's id offset, which names the connection of a
// thread that ended before its rows were read when its rows fit two
// connections' statements (docs/performance.md says what shorter and
// longer intervals cost).
const learnEvery = 5 * time.Millisecond

// While the server opens connections the wire does not see, the threads
// are read every unseenLearnEvery for unseenFor after the last such
// connection: a unix-socket client's statement of 100 ms or more is then
// named by its thread (CONNECTION_TYPE) before the connection ends; a
// shorter one's rows may come back as an unidentified thread's.
const (
	unseenLearnEvery = 50 * time.Millisecond
	unseenFor        = 10 * time.Second
	// unseenProbation covers the next status read (slowPollEvery).
	unseenProbation = 2 * time.Second
)

func later(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// soonest is the earlier of two waits, each with whether it is due at all.
func soonest(a time.Duration, aOK bool, b time.Duration, bOK bool) (time.Duration, bool) {
	switch {
	case !aOK:
		return b, bOK
	case !bOK:
		return a, aOK
	}
	return min(a, b), true
}

// poolSize is the thread-pool size when connections are served by a pool
// (group = connection id mod size on MariaDB), else 0.
func poolSize(info collect.ServerInfo) int {
	if info.ThreadPool && info.ThreadPoolSize > 0 {
		return info.ThreadPoolSize
	}
	return 0
}
