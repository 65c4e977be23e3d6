package watch

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"runtime"
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

// engine is one run's pipeline, made complete by build before any
// goroutine starts (docs/design.md draws it): the capture and the wire
// stage, the loop that hands wire statements to the joiner, the poller and
// its readers, the tally every finished statement reaches, and the output
// stage. A stage the run does not have is a no-op (the capture, the
// host's sockets, the plan catcher) or absent from a list (the poller's
// readers); none is a nil pointer to check.
type engine struct {
	opts      Options
	db        *sql.DB
	addr      string
	clock     *collect.Recalibrator
	consumers *consumerSettings
	// capture runs the wire (a no-op source without one: noWire); wire is
	// the stage it feeds, on its goroutine.
	capture capture.Source
	noWire  bool
	wire    *wireStage
	// readsRows: the server's statement history is read this run (a
	// cursor opened); when not, every wire statement goes to the tally
	// unjoined. A reconnection never changes it.
	readsRows bool
	joiner    *join.Joiner
	// sample is the join sample: the connections whose fast statements
	// are joined (the CPU budget's policy; all without a budget). The
	// status reader owns it; the loop reads its get.
	sample *joinSample
	tally  *tally
	txns   *txnTally
	host   hostSockets
	plans  planCatcher
	// poll runs the readers; known, targets and locks are theirs, read by
	// the result once the poller ended.
	poll    *poller
	known   *known
	targets *targets
	locks   *lockReader
	// work wakes an idle loop: the wire's first statement into an empty
	// queue, or the poller's rows handed to the joiner.
	work chan struct{}

	// What the stages share, each with its own lock.
	side   *serverSide
	notes  *noteList
	losses *lossLog
	// poolVars are the settings the statement rules name (thread pool),
	// read once by build, for the snapshots' findings.
	poolVars map[string]string
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

func newServerSide(info collect.ServerInfo) *serverSide {
	return &serverSide{flavor: info.Flavor, version: info.Version}
}

// setIdentity publishes the server's flavor and version, as last read,
// for the sinks' snapshots.
func (s *serverSide) setIdentity(info collect.ServerInfo) {
	s.serverM.Lock()
	s.flavor, s.version = info.Flavor, info.Version
	s.serverM.Unlock()
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
		return nil, errors.Join(err, AbandonSinks(opts.Sinks))
	}
	defer e.db.Close()
	defer e.consumers.undo()
	runCtx, stop := ctx, context.CancelFunc(func() {})
	if e.opts.Duration > 0 {
		runCtx, stop = context.WithTimeout(ctx, e.opts.Duration)
	}
	defer stop()
	started, startCPU := time.Now(), ProcessCPU()
	capDone := e.startCapture(runCtx)
	pollDone := e.poll.start(runCtx)
	plansDone := e.startPlans(runCtx)
	e.opts.Ready(Started{RingBytes: e.capture.RingBytes()})
	out := startOutput(e.tally.out, e.opts.Sinks, e.snapshots(), e.opts.LiveEvery)
	e.loop(runCtx)
	capStats := e.finish(capDone, pollDone)
	<-plansDone
	res := e.result(capStats, started, startCPU)
	res.ServerOnly = e.noWire
	res.CloseErrors = out.close(res)
	return res, nil
}

// build makes every stage of a run, complete, each from what it depends
// on, in that order; no stage is changed after it is made:
//
//  1. the server connection and what it offers (caps), the consumers the
//     reads need (enabled when allowed), which decide the table to read,
//     and the clock, calibrated on the server;
//  2. the statement cursor (needs the table and the clock): whether
//     server rows are read at all;
//  3. the ledger, the wire stage, then the capture that feeds it (without
//     one the run is server-only);
//  4. the join sample, the tally and the joiner;
//  5. the host's sockets, the lock and processlist readers, then the
//     poller's readers (status; history and targets when rows are read),
//     whose constructors make their first reads;
//  6. the plan catcher.
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
	notes, side := &noteList{}, newServerSide(caps.Server)
	table, restore := prepareConsumers(ctx, db, caps, opts.EnableConsumers, notes)
	consumers := &consumerSettings{restore: restore}
	clock, table := calibrate(ctx, db, table, notes)
	cursor := openHistory(ctx, db, table, notes)
	readsRows := cursor != nil

	work, pollerWake := make(chan struct{}, 1), make(chan struct{}, 1)
	out := newOutputQueue(opts.Sinks)
	txns, rowLocks, wantCounter := &txnTally{out: out}, &rowLockSamples{}, &atomic.Bool{}
	ledger := newLedger(txns, rowLocks, wantCounter, pollerWake)
	wire := newWireStage(own, opts.QueueLen, readsRows, ledger, work, pollerWake)
	live, noWire, err := openCapture(opts, addr, wire, readsRows, notes)
	if err != nil {
		consumers.undo()
		db.Close()
		return nil, err
	}

	losses := &lossLog{}
	sample := runSample(opts, noWire, readsRows, own, notes)
	targets := newTargets(caps.Consumers[collect.SourceHistory], caps.Consumers[collect.SourceCurrent], newCursorRef(cursor))
	tally := newTally(tallyOptions{windowSize: opts.WindowSize, serverOnly: noWire, outlierMiss: targets.missNote()},
		out, ledger, lostRows{sample: sample, losses: losses}.reason)
	calib, _ := clock.Clock()
	joiner := join.New(join.Options{MaxWait: opts.MaxWait, CalibrationErrorUS: calib.ErrorUS, ThreadPoolSize: poolSize(caps.Server),
		KeepLiterals: opts.KeepLiterals, Partial: sample.on()}, tally.fromJoin)

	k := &known{info: caps.Server, caps: caps, act: activity{until: time.Now().Add(startActiveFor)}} // a run starts as if busy
	k.startedAt, _ = serverStart(ctx, db)
	local := collect.IsLocalHost(hostOf(addr)) // the server runs on this host
	host := watchHost(local, watchedPorts(opts, addr), wire, notes)
	locks := newLockReader(db, collect.DetectLockSources(ctx, db, caps.Server), ledger, notes)
	conns := newConnReader(db, own, joiner, sample, notes, locks)
	conns.read(ctx) // the connections already open: their handshake is not on the wire
	readers := []reader{newStatusReader(statusDeps{db: db, own: own, joiner: joiner, sample: sample, side: side, known: k,
		conns: conns, host: host, rowLocks: rowLocks, wantCounter: wantCounter, wire: wire,
		every: max(slowPollEvery, opts.PollInterval)})}
	if readsRows {
		readers = append(readers,
			newHistoryReader(historyDeps{db: db, addr: addr, own: own, clock: clock, joiner: joiner, tally: tally, sample: sample,
				side: side, notes: notes, losses: losses, known: k, conns: conns, consumers: consumers, cursor: targets.rows,
				wire: wire, wake: pollerWake, pollEvery: opts.PollInterval, minPollEvery: opts.MinPollInterval,
				enableConsumers: opts.EnableConsumers, noWire: noWire, keepLiterals: opts.KeepLiterals}),
			newTargetReader(targets, targetDeps{db: db, clock: clock, joiner: joiner, side: side, notes: notes, known: k,
				locks: locks, gauge: newWireGauge(ctx, db, local && !noWire, wire), wire: wire}))
	}
	return &engine{opts: opts, db: db, addr: addr, clock: clock, consumers: consumers, capture: live, noWire: noWire,
		wire: wire, readsRows: readsRows, joiner: joiner, sample: sample, tally: tally, txns: txns, host: host,
		plans: newPlanCatcher(db, opts), poll: newPoller(pollerWake, clock, ledger, readers...), known: k, targets: targets,
		locks: locks, work: work, side: side, notes: notes, losses: losses,
		poolVars: poolVars(ctx, db)}, nil
}

// calibrate is the run's clock, calibrated on the server; the table to
// read ("" when it cannot be calibrated: server times cannot be aligned).
func calibrate(ctx context.Context, db *sql.DB, table string, notes *noteList) (*collect.Recalibrator, string) {
	// watch reads no waits: it leaves the server's wait timer as it is.
	clock := &collect.Recalibrator{DB: db, Interval: time.Minute, Options: collect.CalibrateOptions{KeepWaitTimer: true}}
	if err := clock.Once(ctx); err != nil && table != "" {
		notes.add("clock calibration failed (%v): server times cannot be aligned; statements stay unjoined", err)
		return clock, ""
	}
	return clock, table
}

// runSample is the run's join sample: a fixed --sample, or every
// connection; with a CPU budget, a governor that changes it, when there
// is something to join (a capture and the server's rows). A run without
// a capture joins nothing, and samples nothing.
func runSample(opts Options, noWire, readsRows bool, own *ownAddrs, notes *noteList) *joinSample {
	switch {
	case noWire:
		return newJoinSample(capture.All, noBudget{}, own)
	case opts.Sample > 1:
		notes.add("joining the fast statements of 1 in %d connections (--sample %d, chosen by a hash of the client port): every statement is captured and counted, slow ones joined on every connection; the queue/exec split of fast ones is the sample's", opts.Sample, opts.Sample)
		return newJoinSample(capture.Sample{N: opts.Sample}, noBudget{}, own)
	case opts.CPUBudget > 0 && readsRows:
		return newJoinSample(capture.All, newGovernor(opts.CPUBudget, time.Now(), ProcessCPU()), own)
	}
	return newJoinSample(capture.All, noBudget{}, own)
}

// newWireGauge is what tells the running scans that nothing runs: the
// capture's commands in flight and the server's accepted connections,
// when the server runs on this host beside a capture (watched); else
// nothing can.
func newWireGauge(ctx context.Context, db *sql.DB, watched bool, wire *wireStage) wireGauge {
	if !watched {
		return neverQuiet{}
	}
	accepts, err := openAcceptWatch(ctx, db)
	if err != nil {
		return neverQuiet{} // the scans keep their pace
	}
	return captureGauge{inFlight: &wire.inFlight, down: &wire.down, accepts: accepts}
}

// poolVars reads the settings the statement rules name (thread pool), for
// the live view's findings.
func poolVars(ctx context.Context, db *sql.DB) map[string]string {
	vars, err := collect.GlobalVariables(ctx, db)
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

// watchedPorts are the server ports the run captures.
func watchedPorts(opts Options, addr string) []uint16 {
	if len(opts.Ports) == 0 {
		return []uint16{portOf(addr)}
	}
	return opts.Ports
}

// openCapture opens the live capture of every connection on the watched
// ports, feeding wire (not started: startCapture runs it); without one
// (--no-capture, no permission) the run is server-only (noCapture), and a
// note says why. An interface that cannot be chosen is an error: the user
// names one.
func openCapture(opts Options, addr string, wire *wireStage, readsRows bool, notes *noteList) (live capture.Source, noWire bool, err error) {
	if opts.NoCapture {
		noteServerOnly(notes, "no capture (--no-capture)")
		return noCapture{}, true, nil
	}
	iface := opts.Iface
	if iface == "" {
		if iface, err = pickIface(hostOf(addr)); err != nil {
			return nil, true, err
		}
	}
	live, err = capture.OpenSource(iface, capture.LiveOptions{Options: capture.Options{Ports: watchedPorts(opts, addr), KeepLiterals: opts.KeepLiterals,
		CapturePoint: opts.CapturePoint, LocalAddrs: localAddrs(), Stalls: &wire.stalls, InFlight: &wire.inFlight},
		RingMB: opts.RingMB, MaxRingMB: opts.MaxRingMB, Source: opts.Capture, ServerRows: readsRows})
	if err != nil {
		noteServerOnly(notes, fmt.Sprintf("no capture on %s (%v; run as root or grant CAP_NET_RAW)", iface, err))
		return noCapture{}, true, nil
	}
	if capture.SourceOf(opts.Capture) != capture.SourcePacket {
		notes.add("capture: %s", live.Describe())
	}
	return live, false, nil
}

// noCapture is the capture of a run without one: it waits for the run's
// end and decodes nothing.
type noCapture struct{}

func (noCapture) Run(ctx context.Context, _ func(*event.Statement)) (capture.Stats, error) {
	<-ctx.Done()
	return capture.Stats{}, nil
}
func (noCapture) Close() error     { return nil }
func (noCapture) Describe() string { return "none" }
func (noCapture) RingBytes() int64 { return 0 }

// startCapture runs the capture until ctx ends; its statistics come on the
// channel it returns.
func (e *engine) startCapture(ctx context.Context) <-chan capture.Stats {
	done := make(chan capture.Stats, 1)
	go func() {
		st, err := e.capture.Run(ctx, e.wire.take)
		e.wire.down.Store(true)
		if err != nil {
			e.notes.add("capture stopped: %v", err)
		}
		done <- st
	}()
	return done
}

// planCatcher catches plan changes beside the poller (--plans); noPlans
// without.
type planCatcher interface {
	Run(ctx context.Context) error
	Findings() []event.Finding
}

func newPlanCatcher(db *sql.DB, opts Options) planCatcher {
	if !opts.Plans {
		return noPlans{}
	}
	return plans.NewCatcher(db, plans.Options{Threshold: opts.PlansThreshold})
}

type noPlans struct{}

func (noPlans) Run(context.Context) error { return nil }
func (noPlans) Findings() []event.Finding { return nil }

// startPlans runs the plan catcher beside the poller.
func (e *engine) startPlans(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
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

// lostRows is what watch knows of the rows the join waited for in vain
// (the tally's decideReason asks), which the joiner cannot.
type lostRows struct {
	sample *joinSample
	losses *lossLog
}

// reason is why the row of s never came: its connection was cut out of
// the join sample after the joiner took it, so the poller dropped its row
// since (or its connection was out when its row was read, and a later
// cut, another pivot or another share, holds it again); or the ring lost
// rows over its time. ReasonNone: nothing known.
func (l lostRows) reason(s *event.Statement) event.Reason {
	switch {
	case !s.Outlier && (!joins(l.sample.get(), s.Conn) || l.sample.lostToSample(s.ConnID, s.TReqFirst)):
		return event.SampledOut
	case l.losses.covers(s.TRespLast):
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
	e.poll.final(ctx)
	e.joiner.FlushAll()
	e.tally.ledger.Close() // the transactions still open, as open
	e.tally.out.close()    // nothing reaches the sinks after this: what did not is counted
	return st
}

// result assembles the run's Result; the poller's goroutine has ended.
func (e *engine) result(st capture.Stats, started time.Time, startCPU time.Duration) *Result {
	elapsed := time.Since(started)
	own := e.ownCost(elapsed, ProcessCPU()-startCPU)
	if n := e.sample.govNote(started.UnixMicro(), time.Now().UnixMicro()); n != "" {
		e.notes.add("%s", n)
	}
	window, groups := e.tally.snapshot()
	clock, _ := e.clock.Clock()
	e.side.serverM.Lock()
	server := e.side.server
	server.QueueDrops = e.wire.queueDrops.Load()
	server.OwnFiltered = e.wire.ownHits.Load()
	server.SlowDrops = e.wire.slowDrops.Load()
	server.PollerWakes = e.poll.wakes.Load()
	server.TargetedMissed = e.targets.missedCount()
	server.LockReads = e.locks.reads
	pool := e.side.pool
	e.side.serverM.Unlock()
	e.noteLosses(st, server)
	if n := pathNote(st.Path, clock.ErrorUS); n != "" {
		e.notes.add("%s", n)
	}
	res := &Result{Server: e.known.info, Capture: st, Join: e.joiner.Stats(), ServerSide: server, Clock: clock,
		Groups: groups, Window: window, ElapsedUS: elapsed.Microseconds(), Own: own, KernelPath: e.host.path()}
	res.Coverage = e.coverage(res.Join, server)
	txns, txnCount := e.txns.recent()
	res.Transactions = txn.Summarize(txns, txnCount)
	res.Profile, res.NotOnWire = e.tally.finalProfile(e.notes)
	res.Findings = diagnose.Run(e.diagnoseWindow(window, pool), diagnose.WatchRules()...)
	res.Findings = append(res.Findings, e.plans.Findings()...)
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
	w, err := diagnose.ServerWindow(ctx, e.db, e.known.caps, cores)
	if err != nil {
		e.notes.add("server settings unreadable (%v): configuration rules skipped", err)
		w = &diagnose.Window{Flavor: e.known.info.Flavor, Version: e.known.info.Version}
	}
	w.Statements = window
	w.Transactions, w.TxnSeen = e.txns.recent()
	w.RwndLimitedUS = e.host.limited()
	if pool != nil {
		w.PoolGroups = diagnose.PoolGroupsFrom(pool)
	}
	return w
}
