package watch

import (
	"context"
	"database/sql"
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
)

// engine holds one run's moving parts.
type engine struct {
	opts    Options
	own     *ownAddrs
	db      *sql.DB
	addr    string
	info    collect.ServerInfo
	caps    collect.Capabilities
	clock   *collect.Recalibrator
	cursor  *collect.StatementCursor
	joiner  *join.Joiner
	sink    *sink
	wire    chan *event.Statement
	notes   noteList
	server  ServerSideStats
	serverM sync.Mutex // guards server, pool, status
	pool    []collect.PoolGroup
	status  map[string]string
	// statusAt is when status was read; queryRate the server's statements
	// per second since the read before (guarded by serverM).
	statusAt  time.Time
	queryRate float64
	drops     atomic.Int64
	ownHits   atomic.Int64
	restore   func(context.Context)
	plans     *plans.Catcher
	sample    *connSample
	procs     collect.ProcesslistReader // poller goroutine only (and connect, before it)
	hosts     map[uint64]string         // the last processlist read: HOST by id (same goroutines)
	// appPorts are the client ports of the application's connections on
	// the wire (not watch's own) in that read: what the governor's
	// estimates count, for every sample it weighs.
	appPorts []uint16
	// pivotHost is the connection a budgeted sample is keyed on
	// (choosePivot), pivotKey its key.
	pivotHost string
	pivotKey  uint32
	live      *capture.Live // nil without a capture
	gov       *governor     // nil without a CPU budget (poller goroutine only)
	sockets   *socketWatch  // nil unless the server runs on this host
	// sampleReadAt is when a sampled poll last re-read the processlist
	// (poller goroutine only).
	sampleReadAt time.Time
	trim         historyTrim // poller goroutine only (and connect, before it)
	duty         dutyState   // poller goroutine only
	// link belongs to the poller goroutine; startedAt (the server's start,
	// Unix seconds, to tell a restart from a lost connection) is guarded by
	// serverM.
	link      serverLink
	startedAt int64
	// live view state, on the main loop's goroutine
	liveFindings   []event.Finding
	liveFindingsAt time.Time
	liveVars       map[string]string
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
	opts = opts.withDefaults()
	e := &engine{opts: opts, own: newOwnAddrs(), sample: newConnSample(capture.Sample{N: opts.Sample})}
	if err := e.connect(ctx); err != nil {
		return nil, err
	}
	defer e.db.Close()
	defer e.restoreSettings()
	runCtx, stop := ctx, context.CancelFunc(func() {})
	if opts.Duration > 0 {
		runCtx, stop = context.WithTimeout(ctx, opts.Duration)
	}
	defer stop()
	started, startCPU := time.Now(), ownCPU()
	capDone, err := e.startCapture(runCtx)
	if err != nil {
		return nil, err
	}
	pollDone := e.startPoller(runCtx)
	plansDone := e.startPlans(runCtx)
	if opts.Ready != nil {
		opts.Ready()
	}
	e.loop(runCtx)
	capStats := e.finish(capDone, pollDone)
	<-plansDone
	return e.result(capStats, started, startCPU), nil
}

// connect opens the server connection and prepares the server side:
// flavour, consumers, clock, statement cursor, joiner.
func (e *engine) connect(ctx context.Context) error {
	db, addr, err := openServer(ctx, e.opts, e.own)
	if err != nil {
		return err
	}
	e.db, e.addr = db, addr
	if e.caps, err = collect.GatherCapabilities(ctx, db); err != nil {
		db.Close()
		return err
	}
	e.info = e.caps.Server
	table := e.prepareConsumers(ctx)
	// watch reads no waits: it leaves the server's wait timer as it is.
	e.clock = &collect.Recalibrator{DB: db, Interval: time.Minute, Options: collect.CalibrateOptions{KeepWaitTimer: true}}
	if err := e.clock.Once(ctx); err != nil && table != "" {
		e.notes.add("clock calibration failed (%v): server times cannot be aligned; statements stay unjoined", err)
		table = ""
	}
	e.sink = newSink(e.opts.WindowSize, e.opts.OnStatement)
	e.wire = make(chan *event.Statement, e.opts.QueueLen)
	clock, _ := e.clock.Clock()
	e.joiner = join.New(join.Options{MaxWait: e.opts.MaxWait, CalibrationErrorUS: clock.ErrorUS,
		ThreadPoolSize: e.poolSize()}, func(s *event.Statement) { e.sink.add(s) })
	if table != "" {
		e.cursor = collect.NewJoinCursor(table)
		if err := e.cursor.Prime(ctx, db); err != nil {
			e.notes.add("reading %s failed (%v): wire only", table, err)
			e.cursor = nil
		}
	}
	e.mapExistingConns(ctx)
	e.startedAt, _ = e.serverStart(ctx)
	e.watchSockets()
	e.liveVars = e.poolVars(ctx)
	return nil
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

// poolSize is the thread-pool size when connections are served by a pool
// (group = connection id mod size on MariaDB), else 0.
func (e *engine) poolSize() int {
	if e.info.ThreadPool && e.info.ThreadPoolSize > 0 {
		return e.info.ThreadPoolSize
	}
	return 0
}

// neededConsumers are what watch reads: the long history, for statements
// and the clock's marker statement, and current, without which the history
// stays empty. The per-thread history is not needed: every consumer on
// costs the server a copy of every statement.
var neededConsumers = []string{"events_statements_current", "events_statements_history_long"}

// prepareConsumers returns the statement history table to read, enabling
// missing consumers when allowed (restored on exit), or "" (wire only) with
// a note saying how to enable them.
func (e *engine) prepareConsumers(ctx context.Context) string {
	if !e.info.PerformanceSchema {
		e.notes.add("performance_schema is OFF: wire only (no queue/exec split); enable with performance_schema=ON in my.cnf and restart")
		return ""
	}
	var missing []string
	for _, c := range neededConsumers {
		if !e.caps.Consumers[c] {
			missing = append(missing, c)
		}
	}
	if len(missing) == 0 {
		return "events_statements_history_long"
	}
	list := "'" + strings.Join(missing, "','") + "'"
	enable := "UPDATE performance_schema.setup_consumers SET ENABLED='YES' WHERE NAME IN (" + list + ")"
	if !e.opts.EnableConsumers {
		e.notes.add("performance_schema consumers off: %s: wire only; enable them with: %s (or run watch with --enable-consumers)", strings.Join(missing, ", "), enable)
		return ""
	}
	if _, err := e.db.ExecContext(ctx, collect.Mark+" "+enable); err != nil {
		e.notes.add("could not enable consumers %s (%v): wire only", strings.Join(missing, ", "), err)
		return ""
	}
	for _, c := range missing { // the diagnosis judges the run, not the server before it
		e.caps.Consumers[c] = true
	}
	e.restore = func(ctx context.Context) {
		_, _ = e.db.ExecContext(ctx, collect.Mark+" UPDATE performance_schema.setup_consumers SET ENABLED='NO' WHERE NAME IN ("+list+")")
	}
	e.notes.add("enabled consumers %s for this run; restored on exit", strings.Join(missing, ", "))
	return "events_statements_history_long"
}

func (e *engine) restoreSettings() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	e.trim.restore(ctx, e.db)
	if e.restore != nil {
		e.restore(ctx)
	}
}

// trimHistory keeps the server's statement history to the connections the
// sample follows (historyTrim), when watch may change the server's
// performance_schema settings (--enable-consumers) and reads the history.
// Watch's own connections keep theirs: the clock's marker is read there.
func (e *engine) trimHistory(ctx context.Context) {
	if !e.opts.EnableConsumers || e.cursor == nil {
		return
	}
	out := map[uint64]bool{}
	for _, id := range e.sample.skipped() {
		if host, open := e.hosts[id]; open && !e.own.isOwn(host) {
			out[id] = true
		}
	}
	if e.duty.paused() { // a duty cycle's pause: none followed
		for id, host := range e.hosts {
			if _, wired := hostPort(host); wired && !e.own.isOwn(host) {
				out[id] = true
			}
		}
	}
	open := func(id uint64) bool { _, ok := e.hosts[id]; return ok }
	if err := e.trim.sync(ctx, e.db, out, open); err != nil {
		if ctx.Err() == nil {
			e.notes.add("could not keep the statement history to the followed connections (%v): every connection's statements fill the history ring, so fewer of the followed ones join", err)
		}
		return
	}
	if e.trim.active() {
		e.notes.add("kept the statement history to the followed connections while sampling (performance_schema.threads.HISTORY off for the others; digests and summaries still count every statement); restored on exit")
	}
}

// mapExistingConns tells the joiner the connection ids of connections
// opened before the capture started (their handshake is not on the wire).
func (e *engine) mapExistingConns(ctx context.Context) {
	procs, err := e.procs.Read(ctx, e.db)
	if err != nil {
		if ctx.Err() != nil {
			return // stopping: nothing is missed
		}
		e.notes.add("processlist unreadable (%v): connections opened before watch started stay unjoined", err)
		return
	}
	e.learnConns(procs)
	for _, p := range procs {
		if _, ok := hostPort(p.Host); ok {
			e.joiner.MapConn(p.Host, p.ID)
		}
	}
	e.sample.replace(e.hosts)
	e.trimHistory(ctx)
}

// learnConns keeps what the sampling needs of a processlist read: HOST by
// id, the application's client ports on the wire, and the pivot.
func (e *engine) learnConns(procs []collect.Process) {
	e.choosePivot(procs)
	e.hosts = make(map[uint64]string, len(procs))
	e.appPorts = e.appPorts[:0]
	for _, p := range procs {
		e.hosts[p.ID] = p.Host // sockets and background threads: never sampled
		if port, ok := hostPort(p.Host); ok && !e.own.isOwn(p.Host) {
			e.appPorts = append(e.appPorts, port)
		}
	}
}

// startCapture opens the live capture; without permission it degrades to
// server-only and says so.
func (e *engine) startCapture(ctx context.Context) (<-chan capture.Stats, error) {
	done := make(chan capture.Stats, 1)
	if e.opts.NoCapture {
		e.notes.add("no capture (--no-capture): server-side times only, no queue or delivery")
		done <- capture.Stats{}
		return done, nil
	}
	iface := e.opts.Iface
	if iface == "" {
		var err error
		if iface, err = pickIface(hostOf(e.addr)); err != nil {
			return nil, err
		}
	}
	ports := e.opts.Ports
	if len(ports) == 0 {
		ports = []uint16{portOf(e.addr)}
	}
	sample := capture.Sample{N: e.opts.Sample}
	if !e.sample.on() && e.opts.CPUBudget > 0 {
		e.gov = newGovernor(e.opts.CPUBudget, time.Now(), ownCPU())
		sample = e.startingSample(ctx)
	}
	live, err := capture.OpenLive(iface, capture.LiveOptions{Options: capture.Options{Ports: ports, KeepLiterals: e.opts.KeepLiterals},
		RingMB: e.opts.RingMB, Sample: sample})
	if err != nil {
		e.gov = nil
		e.sample.set(capture.All)
		e.notes.add("no capture on %s (%v): server-side times only; run as root or grant CAP_NET_RAW", iface, err)
		e.opts.NoCapture = true
		done <- capture.Stats{}
		return done, nil
	}
	e.live = live
	if e.gov == nil && e.sample.on() {
		e.notes.add("sampling 1 in %d connections (--sample %d, chosen by a hash of the client port): counts and rates are the sample's, latencies and their parts are exact for every statement shown", e.opts.Sample, e.opts.Sample)
	}
	go func() {
		st, err := live.Run(ctx, e.onWire)
		if err != nil {
			e.notes.add("capture stopped: %v", err)
		}
		done <- st
	}()
	return done, nil
}

// startingSample reads the server's statement rate (Queries over
// rateProbe) and returns the sample a budgeted run starts with; the rate
// also seeds the poller's.
func (e *engine) startingSample(ctx context.Context) capture.Sample {
	first, err := collect.GlobalStatusOf(ctx, e.db, rateStatus...)
	if err != nil {
		return capture.All
	}
	at := time.Now()
	select {
	case <-ctx.Done():
		return capture.All
	case <-time.After(rateProbe):
	}
	second, err := collect.GlobalStatusOf(ctx, e.db, rateStatus...)
	if err != nil {
		return capture.All
	}
	rate := statementRate(first, second, time.Since(at))
	e.serverM.Lock()
	e.queryRate, e.status, e.statusAt = rate, second, time.Now()
	e.serverM.Unlock()
	e.gov.key = e.pivotKey
	every, shift := startSample(e.gov.budget, e.gov.cpus, e.followedRate)
	n := e.budgetSample(every)
	if n.On() || shift > 0 {
		e.gov.start(time.Now(), n.N, shift, rate*perStatementCPU.Seconds()/float64(e.gov.cpus))
		e.serverFollows(n)
	}
	return n
}

// rateProbe is how long startingSample measures the server's rate.
const rateProbe = 300 * time.Millisecond

// onWire runs on the capture's tracker goroutine: it must never block.
func (e *engine) onWire(s *event.Statement) {
	if e.own.isOwn(s.Conn) {
		e.ownHits.Add(1)
		return
	}
	select {
	case e.wire <- s:
	default:
		e.drops.Add(1)
	}
}

// startPlans runs the plan catcher beside the poller when asked.
func (e *engine) startPlans(ctx context.Context) <-chan struct{} {
	done := make(chan struct{})
	if !e.opts.Plans {
		close(done)
		return done
	}
	e.plans = plans.NewCatcher(e.db, plans.Options{Threshold: e.opts.PlansThreshold})
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
	flush := time.NewTicker(joinEvery)
	defer flush.Stop()
	var draw <-chan time.Time // no live view: no wake-up for it
	if e.opts.Live != nil {
		live := time.NewTicker(e.opts.LiveEvery)
		defer live.Stop()
		draw = live.C
	}
	for {
		select {
		case <-flush.C:
			e.takeWire()
			e.joiner.Flush(nowUS())
		case <-draw:
			e.drawLive()
		case <-ctx.Done():
			return
		}
	}
}

// joinEvery is how often loop hands queued wire statements to the joiner:
// as often as the server's rows can come (MinPollInterval's default), since
// a wire statement waits for its row anyway. Every wake of an idle watch
// costs it more than the wake (see capture's blockTimeout).
const joinEvery = 250 * time.Millisecond

// takeWire hands the joiner the wire statements queued now (not those that
// keep arriving meanwhile: a busy capture must not hold the loop).
func (e *engine) takeWire() {
	now := nowUS()
	for n := len(e.wire); n > 0; n-- {
		e.joiner.AddWire(<-e.wire, now)
	}
}

// finish stops the capture, drains what it queued, gives the server rows of
// the last statements time to appear, and flushes the joiner.
func (e *engine) finish(capDone <-chan capture.Stats, pollDone <-chan struct{}) capture.Stats {
	st := <-capDone
	<-pollDone
	e.takeWire()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	time.Sleep(e.opts.PollInterval)
	e.pollStatements(ctx)
	_ = e.sockets.poll()
	e.joiner.FlushAll()
	return st
}

func (e *engine) result(st capture.Stats, started time.Time, startCPU time.Duration) *Result {
	elapsed := time.Since(started)
	own := e.ownCost(elapsed, ownCPU()-startCPU)
	if e.gov != nil {
		if n := e.gov.note(started.UnixMicro(), time.Now().UnixMicro()); n != "" {
			e.notes.add("%s", n)
		}
	}
	window, groups := e.sink.snapshot()
	clock, _ := e.clock.Clock()
	e.serverM.Lock()
	server := e.server
	server.QueueDrops = e.drops.Load()
	server.OwnFiltered = e.ownHits.Load()
	pool := e.pool
	e.serverM.Unlock()
	e.noteLosses(st, server)
	res := &Result{Server: e.info, Capture: st, Join: e.joiner.Stats(), ServerSide: server, Clock: clock,
		Groups: groups, Window: window, ElapsedUS: elapsed.Microseconds(), Own: own}
	e.sink.mu.Lock()
	for _, n := range e.notes.all() {
		e.sink.profile.AddNote(n)
	}
	res.Profile = e.sink.profile.Result()
	e.sink.mu.Unlock()
	res.Findings = diagnose.Run(e.diagnoseWindow(window, pool))
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
	if e.gov != nil {
		o.Budget, o.Steps = e.gov.budget, e.gov.steps
		if e.live != nil {
			o.FollowedConns, o.AppConns = e.followedConns(e.live.Sample().Resumed())
		}
	}
	return o
}

func (e *engine) noteLosses(st capture.Stats, server ServerSideStats) {
	if d := st.KernelDrops + st.QueueDrops; d > 0 {
		e.notes.add("capture dropped %d packets (kernel %d, queue %d): some statements are missing or incomplete", d, st.KernelDrops, st.QueueDrops)
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
	w, err := diagnose.ServerWindow(ctx, e.db, e.caps, cores)
	if err != nil {
		e.notes.add("server settings unreadable (%v): configuration rules skipped", err)
		w = &diagnose.Window{Flavor: e.info.Flavor, Version: e.info.Version}
	}
	w.Statements = window
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
	if !collect.IsLocalHost(hostOf(e.addr)) {
		return
	}
	ports := e.opts.Ports
	if len(ports) == 0 {
		ports = []uint16{portOf(e.addr)}
	}
	e.sockets = newSocketWatch(ports)
	if err := e.sockets.poll(); err != nil {
		e.notes.add("server sockets' TCP_INFO unreadable (%v): stalls come from the wire only", err)
		e.sockets = nil
	}
}
