package watch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
	"github.com/gapscope/gapscope/internal/plans"
	"github.com/gapscope/gapscope/internal/txn"
)

// engine holds one run's moving parts. A run is a pipeline of stages,
// each owned by one goroutine:
//
//  1. capture (capture.Live, its own goroutines) decodes every statement
//     of every connection on the watched ports;
//  2. wire statements (wireStage, on the capture's goroutine): watch's
//     own connections dropped, the outlier rule applied, outliers and new
//     connections signalled to the poller, every statement queued for the
//     join, without ever blocking the capture;
//  3. join (loop and the poller, through the Joiner's lock): the loop
//     hands queued statements to the joiner, or straight on when the join
//     sample (joinSample) leaves their connection out; the poller (poller,
//     on its own goroutine) reads history_long on its schedule and, for
//     each outlier, its thread's own history and current statement
//     (targets), and lets the CPU budget's policy (governor) set the
//     join sample, which it owns;
//  4. window and diagnosis (sink): every finished statement, joined or
//     not, reaches tally.add exactly once: the profile, the window the
//     diagnosis reads, the live view's tallies and the coverage;
//  5. sinks: the output stage (outputStage) hands each statement to
//     Options.Sinks (events file, store, exporters, live views) on its own
//     goroutine, off the joiner's lock, and their snapshots; and the
//     Result at the end.
//
// The wire statements stage and the poller are objects of their own
// (wireStage, poller) that hold no engine: each one's state is touched by
// its goroutine alone (the poller's also before it starts, by build, and
// after it ended, by finish and the result). build makes every stage
// complete before any goroutine starts. What they hand on leaves
// through channels (the wire's, to the loop and the poller) and atomic
// counters; what they share is in types that carry their own lock
// (serverSide, the joiner, the tally, the join sample, notes, losses). The
// main loop's own state is viewStage (the live view), embedded here.
type engine struct {
	// Set by build before any goroutine starts; read-only after (the
	// pointers' targets are safe for concurrent use).
	opts   Options
	own    *ownAddrs
	db     *sql.DB
	addr   string
	clock  *collect.Recalibrator
	joiner *join.Joiner
	tally  *tally
	plans  *plans.Catcher
	// readsRows: the server's statement history is read this run (a
	// cursor opened); when not, every wire statement goes to the tally
	// unjoined. A reconnection never changes it.
	readsRows bool
	// outlierMiss is the note of an outlier that stayed unjoined: why its
	// thread could not hold its row, given the consumers at the start.
	outlierMiss string
	// sample is the join sample: the connections whose fast statements
	// are joined (the CPU budget's policy; all without a budget). The
	// poller owns it; the engine reads it through get (and, after the
	// poller ended, what the budget did).
	sample  *joinSample
	live    capture.Source // nil without a capture
	sockets *socketWatch   // nil unless the server runs on this host
	path    *pathWatch     // nil when the server runs on this host
	// noWire: no capture this run (--no-capture, or it could not open).
	noWire bool
	// work wakes an idle loop: the wire's first statement into an empty
	// queue, or the poller's rows handed to the joiner.
	work chan struct{}

	// wire is the wire statements stage, on the capture's goroutine: its
	// channels are the hand-offs to the loop (every statement) and to the
	// poller (outliers, new connections).
	wire *wireStage
	// poll is the poller stage, on its own goroutine (poller.start): the
	// engine reads its state only before it starts or after it ended.
	poll *poller
	// side is what the poller learns of the server, under its lock.
	side *serverSide

	// txns keeps the run's transactions for the diagnosis (its own lock);
	// rowLocks the server's row-lock counter readings, which the poller
	// takes and the ledger reads (its own lock).
	txns     *txnTally
	rowLocks *rowLockSamples

	notes  noteList // its own lock
	losses lossLog  // its own lock: the polls whose reads found the ring had turned over
	viewStage
}

// serverSide is what the poller learns of the server, read by the loop
// and the result; all of it guarded by serverM.
type serverSide struct {
	serverM sync.Mutex
	server  ServerSideStats
	pool    []collect.PoolGroup
	// flavor and version name the server for the sinks' snapshots (a
	// restart can bring another version).
	flavor, version string
}

// viewStage is what the live views' snapshots read of the server, set by
// build (snapshotSource).
type viewStage struct {
	liveVars map[string]string
}

// noteList collects the run's notes (degraded modes, gaps), deduplicated.
type noteList struct {
	mu   sync.Mutex
	list []string
}

func (n *noteList) add(format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	n.mu.Lock()
	defer n.mu.Unlock()
	for _, x := range n.list {
		if x == s {
			return
		}
	}
	n.list = append(n.list, s)
}

func (n *noteList) all() []string {
	n.mu.Lock()
	defer n.mu.Unlock()
	return append([]string(nil), n.list...)
}

func nowUS() int64 { return time.Now().UnixMicro() }

// Run watches until ctx ends or opts.Duration passes, then returns what it
// saw. Cancelling ctx (Ctrl-C) is the normal way to stop: what was captured
// is joined, diagnosed and returned, not lost.
func Run(ctx context.Context, opts Options) (*Result, error) {
	e, err := build(ctx, opts.withDefaults())
	if err != nil {
		return nil, errors.Join(err, abandonSinks(opts.Sinks))
	}
	defer e.db.Close()
	defer e.poll.restoreSettings()
	runCtx, stop := ctx, context.CancelFunc(func() {})
	if e.opts.Duration > 0 {
		runCtx, stop = context.WithTimeout(ctx, e.opts.Duration)
	}
	defer stop()
	started, startCPU := time.Now(), ProcessCPU()
	capDone := e.startCapture(runCtx)
	pollDone := e.poll.start(runCtx)
	plansDone := e.startPlans(runCtx)
	// The start read the server's whole history ring (up to 10,000 rows of
	// text, to prime the cursor) and calibrated the clock: give the memory
	// back now, not when the scavenger gets to it, or a watch started
	// beside a busy server's full ring stays ~30 MB larger while idle.
	debug.FreeOSMemory()
	if e.opts.Ready != nil {
		e.opts.Ready()
	}
	out := startOutput(e.tally.out, e.opts.Sinks, e.snapshots(), e.opts.LiveEvery)
	e.loop(runCtx)
	capStats := e.finish(capDone, pollDone)
	<-plansDone
	res := e.result(capStats, started, startCPU)
	res.ServerOnly = e.noWire
	res.CloseErrors = out.close(res)
	return res, nil
}

// build makes every stage of a run, complete, in the order they depend on
// each other; no stage is changed after it is made. What a stage needs is
// made before it:
//
//  1. the server connection and what it offers (caps);
//  2. the consumers the reads need (enabled when allowed), which decide
//     the table to read;
//  3. the clock, calibrated on the server (its marker statement needs the
//     consumers);
//  4. the statement cursor (needs the table and the clock): whether server
//     rows are read at all;
//  5. the wire stage (it hands outliers to the poller only when rows are
//     read) and the capture, opened but not started: without one the run
//     is server-only;
//  6. the tally (a server-only run's profile ranks by the server's time)
//     and the joiner (the clock's error, the pool's size);
//  7. the join sample, with the CPU budget's governor when the run has
//     both a capture and rows to join;
//  8. the socket or path watch;
//  9. the poller, with all of the above; then its first reads (the
//     connections already open, the server's start).
//
// A stage that is off is not made: no cursor, no capture, no governor,
// no socket watch, no plan catcher.
func build(ctx context.Context, opts Options) (*engine, error) {
	own := newOwnAddrs()
	db, addr, err := openServer(ctx, opts, own)
	if err != nil {
		return nil, err
	}
	caps, err := collect.GatherCapabilities(ctx, db)
	if err != nil {
		db.Close()
		return nil, err
	}
	e := &engine{opts: opts, own: own, db: db, addr: addr, side: &serverSide{}}
	table, restore := prepareConsumers(ctx, db, caps, opts.EnableConsumers, &e.notes)
	// watch reads no waits: it leaves the server's wait timer as it is.
	e.clock = &collect.Recalibrator{DB: db, Interval: time.Minute, Options: collect.CalibrateOptions{KeepWaitTimer: true}}
	if err := e.clock.Once(ctx); err != nil && table != "" {
		e.notes.add("clock calibration failed (%v): server times cannot be aligned; statements stay unjoined", err)
		table = ""
	}
	cursor := openHistory(ctx, db, table, &e.notes)
	e.readsRows = cursor != nil
	e.work = make(chan struct{}, 1)
	out := newOutputQueue(opts.Sinks)
	e.txns, e.rowLocks = &txnTally{out: out}, &rowLockSamples{}
	wantCounter := make(chan struct{}, 1)
	ledger := newLedger(e.txns, e.rowLocks, wantCounter)
	e.wire = newWireStage(own, opts.QueueLen, e.readsRows, ledger)
	e.wire.work = e.work
	if e.live, e.noWire, err = e.openCapture(); err != nil {
		if restore != nil { // the consumers this run enabled
			restore(ctx)
		}
		db.Close()
		return nil, err
	}
	fitCursor(cursor, e.noWire)
	e.fitMemoryLimit()
	e.tally = newTally(opts.WindowSize, out, e.noWire, ledger)
	e.tally.lost = e.lostReason
	clock, _ := e.clock.Clock()
	e.joiner = join.New(join.Options{MaxWait: opts.MaxWait, CalibrationErrorUS: clock.ErrorUS, ThreadPoolSize: poolSize(caps.Server),
		KeepLiterals: opts.KeepLiterals}, e.joined)
	e.sample = e.newJoinSample()
	e.joiner.SetPartial(e.sample.on()) // a fixed --sample; a budget's cuts say so as they come
	e.watchSockets()
	targets := newTargets(caps.Consumers[collect.SourceHistory], caps.Consumers[collect.SourceCurrent])
	e.outlierMiss = targets.missNote()
	e.poll = &poller{db: db, addr: addr, own: own, clock: e.clock, joiner: e.joiner, tally: e.tally, sample: e.sample,
		side: e.side, notes: &e.notes, losses: &e.losses, sockets: e.sockets, path: e.path,
		slow: e.wire.slow, newConns: e.wire.newConns, work: e.work, wireConns: &e.wire.connsSeen, wireTaken: &e.wire.taken,
		wireInFlight: e.wireInFlight(), wireDown: &e.wire.down,
		pollEvery: opts.PollInterval, minPollEvery: opts.MinPollInterval, enableConsumers: opts.EnableConsumers,
		noWire: e.noWire, keepLiterals: opts.KeepLiterals, info: caps.Server, caps: caps, restore: restore, cursor: cursor, targets: targets,
		rowLocks: e.rowLocks, ledger: ledger, wantCounter: wantCounter, locks: newLockReads(collect.DetectLockSources(ctx, db, caps.Server))}
	e.poll.act.until = time.Now().Add(startActiveFor) // a run starts as if busy (activity)
	e.poll.startRingPace(e.wire)
	if e.sockets != nil && e.live != nil { // the server runs here and the wire is read
		e.poll.accepts, _ = openAcceptWatch(ctx, db) // without it the scans keep their pace
	}
	e.poll.setIdentity()
	e.poll.mapExistingConns(ctx)
	e.poll.learnStart(ctx)
	e.liveVars = e.poolVars(ctx)
	if opts.Plans {
		e.plans = plans.NewCatcher(db, plans.Options{Threshold: opts.PlansThreshold})
	}
	return e, nil
}

// wireInFlight is the capture's count of commands awaiting their answer,
// nil without a capture (nothing then gates the running scans).
func (e *engine) wireInFlight() *atomic.Int64 {
	if e.live == nil {
		return nil
	}
	return &e.wire.inFlight
}

// newJoinSample is the run's join sample: a fixed --sample, or every
// connection; with a CPU budget, a governor that changes it, when there
// is something to join (a capture and the server's rows). A run without
// a capture joins nothing, and samples nothing.
func (e *engine) newJoinSample() *joinSample {
	switch {
	case e.noWire:
		return newJoinSample(capture.All, nil, e.own)
	case e.opts.Sample > 1:
		e.notes.add("joining the fast statements of 1 in %d connections (--sample %d, chosen by a hash of the client port): every statement is captured and counted, slow ones joined on every connection; the queue/exec split of fast ones is the sample's", e.opts.Sample, e.opts.Sample)
		return newJoinSample(capture.Sample{N: e.opts.Sample}, nil, e.own)
	case e.opts.CPUBudget > 0 && e.readsRows:
		return newJoinSample(capture.All, newGovernor(e.opts.CPUBudget, time.Now(), ProcessCPU()), e.own)
	}
	return newJoinSample(capture.All, nil, e.own)
}

// poolVars reads the settings the statement rules name (thread pool), for
// the live view's findings.
func (e *engine) poolVars(ctx context.Context) map[string]string {
	vars, err := collect.GlobalVariables(ctx, e.db)
	if err != nil {
		return nil
	}
	out := map[string]string{}
	for k, v := range vars {
		if k = strings.ToLower(k); strings.HasPrefix(k, "thread_pool") || k == "thread_handling" {
			out[k] = v
		}
	}
	return out
}

// fitMemoryLimit sets the runtime's soft memory limit to the run's goal
// less the ring the capture mapped (Options.MemoryGoal).
func (e *engine) fitMemoryLimit() {
	if e.opts.MemoryGoal <= 0 {
		return
	}
	var ring int64
	if e.live != nil {
		ring = e.live.RingBytes()
	}
	debug.SetMemoryLimit(e.opts.MemoryGoal - ring)
}

// openCapture opens the live capture of every connection on the watched
// ports (not started: startCapture runs it); without one (--no-capture,
// no permission) the run is server-only, and a note says why.
// An interface that cannot be chosen is an error: the user names one.
func (e *engine) openCapture() (live capture.Source, noWire bool, err error) {
	if e.opts.NoCapture {
		e.noteServerOnly("no capture (--no-capture)")
		return nil, true, nil
	}
	iface := e.opts.Iface
	if iface == "" {
		if iface, err = pickIface(hostOf(e.addr)); err != nil {
			return nil, true, err
		}
	}
	ports := e.opts.Ports
	if len(ports) == 0 {
		ports = []uint16{portOf(e.addr)}
	}
	live, err = capture.OpenSource(iface, capture.LiveOptions{Options: capture.Options{Ports: ports, KeepLiterals: e.opts.KeepLiterals,
		CapturePoint: e.opts.CapturePoint, LocalAddrs: localAddrs(), Stalls: &e.wire.stalls, InFlight: &e.wire.inFlight},
		RingMB: e.opts.RingMB, MaxRingMB: e.opts.MaxRingMB, Source: e.opts.Capture, ServerRows: e.readsRows})
	if err != nil {
		e.noteServerOnly(fmt.Sprintf("no capture on %s (%v; run as root or grant CAP_NET_RAW)", iface, err))
		err = nil
		return nil, true, nil
	}
	if capture.SourceOf(e.opts.Capture) != capture.SourcePacket {
		e.notes.add("capture: %s", live.Describe())
	}
	return live, false, nil
}

// startCapture runs the capture, if the run has one, until ctx ends; its
// statistics come on the channel it returns.
func (e *engine) startCapture(ctx context.Context) <-chan capture.Stats {
	done := make(chan capture.Stats, 1)
	if e.live == nil {
		done <- capture.Stats{}
		return done
	}
	go func() {
		st, err := e.live.Run(ctx, e.wire.take)
		e.wire.down.Store(true)
		if err != nil {
			e.notes.add("capture stopped: %v", err)
		}
		done <- st
	}()
	return done
}

// startPlans runs the plan catcher beside the poller when asked.
func (e *engine) startPlans(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if e.plans == nil {
		close(done)
		return done
	}
	go func() {
		defer close(done)
		if err := e.plans.Run(ctx); err != nil && ctx.Err() == nil {
			e.notes.add("plan catcher stopped: %v", err)
		}
	}()
	return done
}

// loop feeds wire statements to the joiner and expires old ones until ctx
// ends. It takes the queued statements in batches, every joinEvery, rather
// than waking for each one: a wake-up per statement (a futex call and a
// context switch on both sides) cost more CPU than the join itself, and
// the server's rows come at most every PollInterval/4 anyway.
func (e *engine) loop(ctx context.Context) {
	flush := time.NewTimer(joinEvery)
	defer flush.Stop()
	armed := true // flush is set; an idle loop waits for work instead
	for {
		select {
		case <-flush.C:
			armed = e.handOver(flush)
		case <-e.work:
			if !armed {
				flush.Reset(joinEvery)
				armed = true
			}
		case <-ctx.Done():
			return
		}
	}
}

// handOver hands the queued wire statements to the joiner and gives up
// what waited too long, then sets flush for the next look while
// statements are queued or held. It reports whether flush is set: when
// not, the loop waits for work (the wire's first statement into an empty
// queue, the poller's rows), and an idle watch does not wake for it.
func (e *engine) handOver(flush *time.Timer) bool {
	e.takeWire()
	e.joiner.Flush(nowUS())
	if len(e.wire.out) == 0 && !e.joiner.Holds() {
		return false
	}
	flush.Reset(joinEvery)
	return true
}

// joinEvery is how often loop hands queued wire statements to the joiner:
// as often as the server's rows can come (MinPollInterval's default), since
// a wire statement waits for its row anyway. Every wake of an idle watch
// costs it more than the wake (see capture's blockTimeout): with nothing
// queued or held, loop does not look until there is work.
const joinEvery = 250 * time.Millisecond

// takeWire hands the joiner the wire statements queued now (not those that
// keep arriving meanwhile: a busy capture must not hold the loop). Those
// that cannot be joined go straight to the tally, with their reason: no
// server rows are read, or the join sample leaves their connection out
// (never an outlier's).
func (e *engine) takeWire() {
	now := nowUS()
	sample := e.sample.get()
	for n := len(e.wire.out); n > 0; n-- {
		s := <-e.wire.out
		if s.ConnID == 0 && (!e.readsRows || !s.Outlier) {
			s.ConnID = e.joiner.ConnOf(s.Conn) // the joiner fills it for what it takes
		}
		switch {
		case s.Why == event.ReplicaStream:
			e.tally.add(s) // a replica's binlog stream: no statement, its row comes when the replica leaves
		case !e.readsRows:
			s.Why = event.NoServer // never handed to the joiner
			e.tally.add(s)
		case !s.Outlier && !joins(sample, s.Conn):
			s.Why = event.SampledOut
			e.tally.add(s)
		default:
			e.joiner.AddWire(s, now)
		}
	}
}

// joined is the joiner's output, on whichever goroutine fed it. An
// outlier the join gave up without its row gets the note that says why
// watch's read of its thread did not find it; its reason is decided in the
// sink (lostReason knows what the joiner cannot).
func (e *engine) joined(s *event.Statement) {
	if s.Outlier && s.Why.Kind() == event.KindUnjoined {
		s.Notes = append(s.Notes, e.outlierMiss)
	}
	e.tally.add(s)
}

// lostReason is why the row of a statement the join waited for never came,
// when watch knows and the joiner cannot (the tally's decideReason asks):
// its connection was cut out of the join sample after the joiner took it,
// so the poller dropped its row since (or its connection was out when its
// row was read, and a later cut, another pivot or another share, holds it
// again); or the ring lost rows over its time. ReasonNone: nothing known.
func (e *engine) lostReason(s *event.Statement) event.Reason {
	switch {
	case !s.Outlier && (!joins(e.sample.get(), s.Conn) || e.sample.lostToSample(s.ConnID, s.TReqFirst)):
		return event.SampledOut
	case e.losses.covers(s.TRespLast):
		return event.RingLost
	}
	return event.ReasonNone
}

// finish stops the capture, drains what it queued, gives the server rows of
// the last statements time to appear, and flushes the joiner. The poller's
// last reads run here, its goroutine having ended.
func (e *engine) finish(capDone <-chan capture.Stats, pollDone <-chan struct{}) capture.Stats {
	st := <-capDone
	<-pollDone
	e.takeWire()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.poll.flushTargets(ctx)
	time.Sleep(e.opts.PollInterval)
	e.poll.pollStatements(ctx)
	_ = e.sockets.readNow()
	_ = e.path.readNow()
	e.joiner.FlushAll()
	e.tally.ledger.Close() // the transactions still open, as open
	e.tally.out.close()    // nothing reaches the sinks after this: what did not is counted
	return st
}

// result assembles the run's Result; the poller's goroutine has ended.
func (e *engine) result(st capture.Stats, started time.Time, startCPU time.Duration) *Result {
	elapsed := time.Since(started)
	own := e.ownCost(elapsed, ProcessCPU()-startCPU)
	if g := e.sample.gov; g != nil {
		if n := g.note(started.UnixMicro(), time.Now().UnixMicro()); n != "" {
			e.notes.add("%s", n)
		}
	}
	window, groups := e.tally.snapshot()
	clock, _ := e.clock.Clock()
	e.side.serverM.Lock()
	server := e.side.server
	server.QueueDrops = e.wire.queueDrops.Load()
	server.OwnFiltered = e.wire.ownHits.Load()
	server.SlowDrops = e.wire.slowDrops.Load()
	server.PollerWakes = e.poll.wakes
	server.TargetedMissed = e.poll.targets.missedCount()
	server.LockReads = e.poll.locks.reads
	pool := e.side.pool
	e.side.serverM.Unlock()
	e.noteLosses(st, server)
	if n := pathNote(st.Path, clock.ErrorUS); n != "" {
		e.notes.add("%s", n)
	}
	res := &Result{Server: e.poll.info, Capture: st, Join: e.joiner.Stats(), ServerSide: server, Clock: clock,
		Groups: groups, Window: window, ElapsedUS: elapsed.Microseconds(), Own: own, KernelPath: e.path.summary()}
	res.Coverage = e.coverage(res.Join, server)
	txns, txnCount := e.txns.recent()
	res.Transactions = txn.Summarize(txns, txnCount)
	res.Profile, res.NotOnWire = e.tally.finalProfile(&e.notes)
	res.Findings = diagnose.Run(e.diagnoseWindow(window, pool), diagnose.WatchRules()...)
	if e.plans != nil {
		res.Findings = append(res.Findings, e.plans.Findings()...)
	}
	res.Notes = e.notes.all()
	return res
}

// ownCost is watch's own CPU over the run; the governor's steps with it.
func (e *engine) ownCost(elapsed, cpu time.Duration) OwnCost {
	o := OwnCost{CPUSeconds: cpu.Seconds(), CPUs: max(runtime.NumCPU(), 1)}
	if elapsed > 0 {
		o.Share = cpu.Seconds() / elapsed.Seconds() / float64(o.CPUs)
	}
	e.sample.cost(&o)
	return o
}

func (e *engine) noteLosses(st capture.Stats, server ServerSideStats) {
	if st.KernelDrops > 0 {
		e.notes.add("capture dropped %d packets (the kernel's ring was full; a larger --ring-mb, or --ring-max-mb to grow to, rides out longer stalls): some statements are missing or incomplete", st.KernelDrops)
	}
	if server.QueueDrops > 0 {
		e.notes.add("joiner queue overflowed: %d wire statements dropped", server.QueueDrops)
	}
	if server.RingLost > 0 {
		e.notes.add("performance_schema ring lost %d statements before they were read: poll faster or raise performance_schema_events_statements_history_long_size", server.RingLost)
	}
}

// diagnoseWindow gathers what the rules look at: the statements seen, the
// settings and status now, and the pool groups of the last slow poll.
func (e *engine) diagnoseWindow(window []event.Statement, pool []collect.PoolGroup) *diagnose.Window {
	cores := 0
	if collect.IsLocalHost(hostOf(e.addr)) {
		cores = runtime.NumCPU()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	w, err := diagnose.ServerWindow(ctx, e.db, e.poll.caps, cores)
	if err != nil {
		e.notes.add("server settings unreadable (%v): configuration rules skipped", err)
		w = &diagnose.Window{Flavor: e.poll.info.Flavor, Version: e.poll.info.Version}
	}
	w.Statements = window
	w.Transactions, w.TxnSeen = e.txns.recent()
	w.RwndLimitedUS = e.sockets.limited()
	if pool != nil {
		w.PoolGroups = diagnose.PoolGroupsFrom(pool)
	}
	return w
}

// watchSockets starts following the server's sockets' receive-window
// limits when the server runs on this host (sock_diag sees only local
// sockets). It says so when the kernel cannot tell.
func (e *engine) watchSockets() {
	ports := e.opts.Ports
	if len(ports) == 0 {
		ports = []uint16{portOf(e.addr)}
	}
	if !collect.IsLocalHost(hostOf(e.addr)) {
		e.path = newPathWatch(ports, &e.wire.taken) // the application's side: its sockets' round trips
		if err := e.path.readNow(); err != nil {
			e.path = nil
		}
		return
	}
	e.sockets = newSocketWatch(ports, &e.wire.stalls)
	if err := e.sockets.readNow(); err != nil {
		e.notes.add("server sockets' TCP_INFO unreadable (%v): stalls come from the wire only", err)
		e.sockets = nil
	}
}
