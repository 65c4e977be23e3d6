package watch

import (
	"context"
	"database/sql"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/join"
)

// target is an outlier the wire saw: what the poller needs to find its
// server row in its thread's history, copied (the statement itself moves
// on to the join on another goroutine).
type target struct {
	conn                string
	connID              uint64
	reqFirst, reqLast   int64
	respFirst, respLast int64
	transitUS           int64 // capture point to server, one way (0 on the server's host)
	several             bool  // the request may run several statements (join.MayRunSeveral)
}

func targetOf(s *event.Statement) target {
	return target{conn: s.Conn, connID: s.ConnID, reqFirst: s.TReqFirst, reqLast: s.TReqLast,
		respFirst: join.AnswerStart(s), respLast: s.TRespLast, transitUS: s.TransitUS, several: join.MayRunSeveral(s)}
}

// slowQueue bounds the outliers waiting for the poller; past it they are
// counted (SlowDrops) and joined only if history_long still has them.
const slowQueue = 4096

// retryAfter is when an outlier's thread is read again after a read that
// did not hold its row yet (the server records a statement's end after
// sending its answer, by up to milliseconds on a busy host); after the
// last, the outlier is left to history_long.
var retryAfter = []time.Duration{0, 5 * time.Millisecond, 20 * time.Millisecond, 60 * time.Millisecond, 200 * time.Millisecond, 600 * time.Millisecond}

// fedKeep is how long the rows fed by targeted reads are remembered, so
// that history_long does not feed them a second time (its reads cover a
// few seconds back at most).
const fedKeep = 30 * time.Second

type pendingTarget struct {
	target
	tries int
	next  time.Time
}

// rowKey names a statement row: a thread's EVENT_ID is unique.
type rowKey struct{ thread, event uint64 }

// targets are the outliers whose threads the poller reads. They belong to
// the poller goroutine.
type targets struct {
	history, current bool // the consumers that record what is read
	list             []pendingTarget
	rows             *cursorRef        // the history's cursor, and the rows fed (both readers')
	gen              int               // the cursor's generation when the threads were learnt
	threadOf         map[uint64]uint64 // connection id -> THREAD_ID
	reader           collect.ThreadStatements
	failed           bool // reads kept failing (maxFailures): the note says so
	failures         int  // consecutive failed reads
	// running: per connection, the last statements scanRunning saw
	// running, for an outlier whose own row its thread no longer keeps.
	running   map[uint64][]collect.ServerStatement
	scannedAt time.Time
	busyUntil time.Time // scans run at the busy pace until then (scanPace)
	// missed counts outliers whose row no read found, under missM: the
	// joiner's goroutines read it for their notes.
	missM  sync.Mutex
	missed int64
}

func newTargets(history, current bool, rows *cursorRef) *targets {
	return &targets{history: history, current: current, rows: rows, threadOf: map[uint64]uint64{},
		running: map[uint64][]collect.ServerStatement{}}
}

// targetReader reads the threads of the outliers the wire reports, as
// soon as it does (their thread's history turns over within milliseconds
// on a busy connection), and scans the statements running, with the lock
// tables behind those that run long. A run without a statement cursor has
// none: the wire then reports no outlier.
type targetReader struct {
	t *targets
	targetDeps
}

// targetDeps is what a targetReader reads with and hands rows to; the
// wire stage's slow channel hands it the outliers' identities, and its
// work channel wakes the loop once their rows went to the joiner.
type targetDeps struct {
	db     *sql.DB
	clock  *collect.Recalibrator
	joiner *join.Joiner
	side   *serverSide
	notes  *noteList
	known  *known
	locks  *lockReader
	gauge  wireGauge
	wire   *wireStage
}

func newTargetReader(t *targets, d targetDeps) *targetReader {
	return &targetReader{t: t, targetDeps: d}
}

func (r *targetReader) read(ctx context.Context, now time.Time) {
	if r.t.gen != r.t.rows.gen { // the server restarted: thread ids start over
		r.t.gen = r.t.rows.gen
		r.t.forget()
	}
	if r.takeTargets(now) > 0 {
		r.known.act.mark(now)
	}
	r.readTargets(ctx)
	r.scanRunning(ctx)
}

// next is when the next target is due, or the next running scan while
// the server is active.
func (r *targetReader) next(now time.Time) (time.Duration, bool) {
	t := r.t
	wait, ok := t.wait(now)
	if t.current && !t.failed && r.known.act.active(now) {
		every, _ := t.scanPace(now)
		wait, ok = soonest(wait, ok, max(t.scannedAt.Add(every).Sub(now), 0), true)
	}
	return wait, ok
}

// takeTargets moves the outliers the wire queued into the targets, and
// says how many.
func (r *targetReader) takeTargets(now time.Time) int {
	n := len(r.wire.slow)
	for i := 0; i < n; i++ {
		r.t.add(<-r.wire.slow, now)
	}
	return n
}

// wireGauge says whether the wire sees every client with nothing in
// flight (wireQuiet): a capture beside a server on this host whose
// connections can be watched; without one, never.
type wireGauge interface {
	quiet(now time.Time) bool
}

// captureGauge is the capture's count of commands in flight, whether it
// stopped, and the server's accepted connections.
type captureGauge struct {
	inFlight *atomic.Int64
	down     *atomic.Bool
	accepts  *acceptWatch
}

func (g captureGauge) quiet(now time.Time) bool {
	return !g.down.Load() && g.inFlight.Load() == 0 && !g.accepts.recent(now)
}

// neverQuiet: the run cannot tell that nothing runs.
type neverQuiet struct{}

func (neverQuiet) quiet(time.Time) bool { return false }

func (t *targets) add(tg target, now time.Time) {
	t.list = append(t.list, pendingTarget{target: tg, next: now})
}

// wait is how long until the next target is due (false: none pending).
func (t *targets) wait(now time.Time) (time.Duration, bool) {
	if len(t.list) == 0 {
		return 0, false
	}
	next := t.list[0].next
	for _, p := range t.list[1:] {
		if p.next.Before(next) {
			next = p.next
		}
	}
	return max(next.Sub(now), 0), true
}

// missNote says why an outlier stayed unjoined, for its notes.
func (t *targets) missNote() string {
	switch {
	case !t.history && !t.current:
		return "slow statement (outlier): its thread could not be read, performance_schema consumers events_statements_history and events_statements_current are off (watch --enable-consumers)"
	case !t.history:
		return "slow statement (outlier): its thread ran other statements before watch read it and the per-thread history (events_statements_history consumer) is off"
	}
	return "slow statement (outlier): its row was no longer in its thread's history, its current statement or history_long when watch read them"
}

// readTargets reads the threads of the outliers due now: their per-thread
// history and current statement. The row that fits each outlier goes to
// the joiner (once: history_long's copy is dropped, and a row history_long
// returned already is not fed again); an outlier whose row is not there
// yet is read again later (retryAfter).
func (r *targetReader) readTargets(ctx context.Context) {
	t := r.t
	now := time.Now()
	due := t.due(now)
	if len(due) == 0 {
		return
	}
	if (!t.history && !t.current) || t.failed {
		t.list = t.list[:0] // nothing to read them with: the join notes why
		return
	}
	conns := r.targetConns(due)
	threads, err := t.threadsOf(ctx, r.db, conns)
	// Rows carry collect's calibration, which a loaded host can put off by
	// milliseconds; the joiner learns the true offset from its matches.
	clock, _ := r.clock.Clock()
	js := r.joiner.Stats()
	errUS := 4 * max(clock.ErrorUS, js.OffsetErrorUS)
	off, tol := js.OffsetUS, 2000+errUS
	var rows []collect.ServerStatement
	readAt := nowUS()
	if err == nil {
		rows, err = t.reader.Read(ctx, r.db, threads, clock, earliestStart(due)+off-tol)
	}
	if err != nil {
		if ctx.Err() == nil {
			t.readFailed(r.notes, err)
			t.requeue(due, now) // a transient error: read them again
		}
		return
	}
	t.failures = 0
	var feed []collect.ServerStatement
	cursor := t.rows.get()
	byConn := rowsByConn(rows)
	for _, pt := range due {
		rows := byConn[pt.connID] // what follows looks at the target's connection only
		row, ok := t.rowFor(pt, rows, off, tol, errUS, now)
		if !ok {
			continue
		}
		// A running row has no END_EVENT_ID yet: a statement without
		// nested events ends on its own id.
		key := rowKey{row.ThreadID, row.EventID}
		if _, dup := t.rows.fed[key]; dup || cursor.Returned(row.ThreadID, max(row.EndEventID, row.EventID)) {
			continue
		}
		for _, c := range append([]collect.ServerStatement{row}, companions(pt, rows, row, off, tol)...) {
			key := rowKey{c.ThreadID, c.EventID}
			if _, dup := t.rows.fed[key]; dup || cursor.Returned(c.ThreadID, max(c.EndEventID, c.EventID)) {
				continue
			}
			t.rows.fed[key] = now // history_long's copy, if it returns one, is dropped
			feed = append(feed, c)
		}
	}
	t.requeue(due, now)
	t.pruneFed(now)
	r.side.serverM.Lock()
	r.side.server.TargetedReads++
	r.side.server.TargetedRows += int64(len(feed))
	r.side.serverM.Unlock()
	if len(feed) > 0 {
		r.joiner.AddThreadRows(feed, readAt) // a partial read: a few threads, from some time on
		signal(r.wire.work)
	}
}

// companions are the other statements the outlier's request ran, after
// first (a multi-statement query: its rows follow the first, all starting
// before its answer ended), so that the join spans them all; a request of
// one statement has none.
func companions(p *pendingTarget, read []collect.ServerStatement, first collect.ServerStatement, off, tol int64) []collect.ServerStatement {
	var out []collect.ServerStatement
	for _, r := range read {
		if r.ConnID != p.connID || r.ThreadID != first.ThreadID || r.EventID <= first.EventID || r.EndUS == 0 ||
			r.NestingLevel > 0 || r.NestingType == "STATEMENT" || r.StartUS-off > p.respLast+tol {
			continue
		}
		out = append(out, r)
	}
	return out
}

// earliestStart is the first request byte of the targets (Unix µs, wire
// clock): history_long is read for rows that ended from then on.
func earliestStart(due []*pendingTarget) int64 {
	first := int64(0)
	for _, p := range due {
		if first == 0 || p.reqFirst < first {
			first = p.reqFirst
		}
	}
	return first
}

// flushTargets reads, at the end of a run, the threads of the outliers the
// poller had no time for (the last statements before the stop): at once,
// then after the server had a moment to record them.
func (r *targetReader) final(ctx context.Context) {
	r.takeTargets(time.Now())
	for _, wait := range []time.Duration{0, 20 * time.Millisecond, 100 * time.Millisecond} {
		if len(r.t.list) == 0 || ctx.Err() != nil {
			break
		}
		time.Sleep(wait)
		now := time.Now()
		for i := range r.t.list {
			r.t.list[i].next = now
		}
		r.readTargets(ctx)
	}
	r.t.giveUpAll()
}

// giveUpAll counts every pending target as missed (the run is over).
func (t *targets) giveUpAll() {
	t.missM.Lock()
	t.missed += int64(len(t.list))
	t.missM.Unlock()
	t.list = t.list[:0]
}

// The running scans. Every runningEvery, events_statements_current is read
// for the statements running beyond the outlier floor: one small query, a
// row per thread at most, and a statement of twice that is seen running at
// least once. A busy connection (hundreds of statements a second) pushes a
// slow statement out of its thread's 10-row history within milliseconds,
// before watch can read it, and a busy server turns history_long over in
// tens: once an outlier was lost to both, scans run every
// busyRunningEvery for busyScanFor, with a threshold of busyRunningMin,
// so that a statement just past the outlier floor is seen running too (a
// 30 ms one always, a 10 ms one often). That is at most fifty such queries
// a second, and only while busy connections have outliers; what a scan
// remembers is used only for a statement the wire later finds to be an
// outlier.
const (
	runningEvery     = 100 * time.Millisecond
	busyRunningEvery = 20 * time.Millisecond
	busyRunningMin   = 2 * time.Millisecond
	busyScanFor      = 30 * time.Second
	// runningKept: the statements remembered per connection, the newest;
	// a busy connection's outlier is looked up a few scans after it ran.
	runningKept = 4
)

// scanPace is how often the running scan reads and the least time a
// statement must have run to be remembered.
func (t *targets) scanPace(now time.Time) (every, atLeast time.Duration) {
	if now.Before(t.busyUntil) {
		return busyRunningEvery, busyRunningMin
	}
	return runningEvery, outlierFloor
}

// scanRunning remembers, per connection, the statements running beyond the
// threshold now. A client that quits right after a slow statement takes
// its thread, and the thread's history with it, before watch can read
// them, and a busy connection's next statements push it out of its
// thread's history: what was read while it ran is then all there is.
func (r *targetReader) scanRunning(ctx context.Context) {
	t := r.t
	now := time.Now()
	every, atLeast := t.scanPace(now)
	if !t.current || t.failed || now.Sub(t.scannedAt) < every || !r.known.act.active(now) {
		return // an idle server has nothing running (activity)
	}
	t.scannedAt = now
	if every == runningEvery && r.wireQuiet(now) {
		r.side.serverM.Lock()
		r.side.server.RunningScansSkipped++
		r.side.serverM.Unlock()
		return
	}
	clock, _ := r.clock.Clock()
	rows, err := t.reader.ReadRunning(ctx, r.db, atLeast, clock)
	r.side.serverM.Lock()
	r.side.server.RunningScans++
	r.side.serverM.Unlock()
	if err != nil {
		return // the next scan tries again; outliers are read from their threads anyway
	}
	// A replica's binlog stream runs for the replica's life: no statement
	// to remember, nor a reason to learn threads at every scan.
	rows = slices.DeleteFunc(rows, func(row collect.ServerStatement) bool { return join.StreamEvent(row.EventName) })
	t.remember(rows)
	var long []longStatement
	for _, row := range rows {
		if row.StartUS != 0 && row.ConnID != 0 && nowUS()-row.StartUS >= lockReadAfter.Microseconds() {
			long = append(long, longStatement{connID: row.ConnID, startUS: row.StartUS})
		}
	}
	if len(long) > 0 {
		r.locks.read(ctx, long)
	}
	if len(rows) > 0 {
		// A statement long enough to be seen running may be a unix-socket
		// client's, whose connection can end before the history is read:
		// learn its thread (and its connection's type) while it lives.
		r.known.learn.want()
	}
}

// wireQuiet reports whether a scan at the regular pace can be skipped: the
// capture runs, sees every client the server counts (no shortfall, no
// unseen connections), no client connected within acceptGrace (a server on
// this host: acceptWatch) and no command of theirs is in flight, so
// nothing runs that a scan could find. The wire knows a command when the
// capture reads it, up to its pace (25 ms; 100 ms at a light load) after
// it was sent: a statement is then seen running if it lasts the outlier
// floor, a scan interval and that lag. The busy pace is never skipped: its statements
// are a few milliseconds long, shorter than the lag.
func (r *targetReader) wireQuiet(now time.Time) bool {
	return r.gauge.quiet(now) && !now.Before(r.known.unseenUntil) && !now.Before(r.known.shortUntil)
}

// remember adds the statements a scan saw running to their connections'
// last runningKept (a statement seen by several scans counts once).
func (t *targets) remember(rows []collect.ServerStatement) {
	for _, r := range rows {
		seen := t.running[r.ConnID]
		if slices.ContainsFunc(seen, func(s collect.ServerStatement) bool { return s.ThreadID == r.ThreadID && s.EventID == r.EventID }) {
			continue
		}
		if len(seen) == runningKept {
			seen = slices.Delete(seen, 0, 1)
		}
		t.running[r.ConnID] = append(seen, r)
	}
	if len(t.running) > 10_000 {
		clear(t.running) // a cache: connections come and go
	}
}

// rowFor is the row for p among what the read of its thread returned;
// when its own thread no longer keeps it (rowGone), history_long's copy,
// or else the row a running scan read while it ran. False when there is
// none yet (p.tries says whether it is read again: requeue). A history
// row's start may lie tol outside p's window (the clock's calibration);
// once the thread's rows have moved past p, a row's start only the clock's
// error, since p's neighbours are then all that is left to fit.
func (t *targets) rowFor(p *pendingTarget, read []collect.ServerStatement, off, tol, errUS int64, now time.Time) (collect.ServerStatement, bool) {
	gone, rolled := t.rowGone(p, read, off, errUS)
	if !gone {
		if i := bestRow(read, p, off, tol, errUS+100); i >= 0 {
			p.tries = -1 // done
			return read[i], true
		}
		return collect.ServerStatement{}, false
	}
	p.tries = len(retryAfter) // reading it again cannot help: requeue gives it up unless found now
	if i := bestRowFrom(read, collect.SourceHistoryLong, p, off, errUS+100, errUS+100); i >= 0 {
		p.tries = -1
		return read[i], true // the server's own end: better than a running row's
	}
	if rolled {
		// Only a running scan can still find a busy connection's outliers:
		// scans speed up for a while (scanPace).
		t.busyUntil = now.Add(busyScanFor)
	}
	if r, ok := t.fromRunning(p, off, errUS+100); ok {
		p.tries = -1
		return r, true
	}
	return collect.ServerStatement{}, false
}

// rowsByConn groups a read's rows by connection, in their order: each
// target then looks at its own connection's rows, not at the whole read.
func rowsByConn(rows []collect.ServerStatement) map[uint64][]collect.ServerStatement {
	by := make(map[uint64][]collect.ServerStatement)
	for _, r := range rows {
		by[r.ConnID] = append(by[r.ConnID], r)
	}
	return by
}

// rowGone reports whether p's own row is gone from what its thread keeps,
// given what the last read of it returned: the thread has ended (none of
// its rows came back: a live thread has at least its current statement),
// or its history has moved past p (every row started after p's answer
// began, by more than errUS, the clock's error: the server starts a
// statement before it answers), which rolled reports: a busy connection's.
func (t *targets) rowGone(p *pendingTarget, read []collect.ServerStatement, off, errUS int64) (gone, rolled bool) {
	n := 0
	for _, r := range read {
		if r.ConnID != p.connID || r.Source == collect.SourceHistoryLong {
			continue // the server-wide ring's rows say nothing of what the thread keeps
		}
		if r.StartUS == 0 || r.StartUS-off <= p.respFirst+errUS {
			return false, false // p's own, or its row not recorded yet
		}
		n++
	}
	if n == 0 {
		delete(t.threadOf, p.connID) // a thread id is not reused, but a connection id may be
		return true, false
	}
	return true, true
}

// fromRunning is the row a running scan read while p's statement ran, for
// an outlier whose own row is gone (rowGone): its start is the server's,
// its end when the server sent its answer's last byte (the last byte on the
// wire, less the transit when the capture is off the server's host), and
// its Source says so (collect.SourceRunning). Not the first byte: a large
// result is written as the client reads it, and a client that stops
// reading keeps the statement running on the server (send stall). Its
// start must lie in p's window within tol, the clock's error: not the
// slack a history row gets, as the statement before p, seen running while
// the server finished it after its answer, may have started just before
// p's request.
func (t *targets) fromRunning(p *pendingTarget, off, tol int64) (collect.ServerStatement, bool) {
	seen := t.running[p.connID]
	i := bestRow(seen, p, off, tol, 0)
	if i < 0 {
		return collect.ServerStatement{}, false
	}
	r := seen[i]
	t.running[p.connID] = slices.Delete(seen, i, i+1)
	r.EndUS = max(p.respLast-p.transitUS+off, r.StartUS) // on the server's clock, as the joiner expects
	r.TimerWait = uint64(r.EndUS-r.StartUS) * collect.PicosPerMicro
	return r, true
}

// maxFailures: this many failed reads in a row (no grant, no table) stop
// the targeted reads; fewer are transient (a connection lost and redialled).
const maxFailures = 5

func (t *targets) readFailed(notes *noteList, err error) {
	t.failures++
	notes.add("reading the threads of slow statements failed (%v)", err)
	if t.failures >= maxFailures {
		t.failed = true
		notes.add("reading the threads of slow statements failed %d times in a row: slow statements are joined only while history_long still holds them", t.failures)
	}
}

// targetConns fills in the connection ids of the outliers (the joiner
// learnt those opened before the capture from the processlist).
func (r *targetReader) targetConns(due []*pendingTarget) []uint64 {
	var conns []uint64
	for _, pt := range due {
		if pt.connID == 0 {
			pt.connID = r.joiner.ConnOf(pt.conn)
		}
		if pt.connID != 0 {
			conns = append(conns, pt.connID)
		}
	}
	return conns
}

// due returns the targets to read now.
func (t *targets) due(now time.Time) []*pendingTarget {
	var out []*pendingTarget
	for i := range t.list {
		if !t.list[i].next.After(now) {
			out = append(out, &t.list[i])
		}
	}
	return out
}

// requeue schedules the due targets not found for their next read, and
// gives up those that had their last.
func (t *targets) requeue(due []*pendingTarget, now time.Time) {
	for _, p := range due {
		if p.tries < 0 {
			continue
		}
		p.tries++
		if p.tries >= len(retryAfter) || p.connID == 0 {
			p.tries = -1
			t.missM.Lock()
			t.missed++
			t.missM.Unlock()
			continue
		}
		p.next = now.Add(retryAfter[p.tries])
	}
	t.list = slices.DeleteFunc(t.list, func(p pendingTarget) bool { return p.tries < 0 })
}

// forget drops what was learnt of the server's threads (a restart).
func (t *targets) forget() {
	t.list = t.list[:0]
	clear(t.threadOf)
	clear(t.running)
	t.reader.ForgetThreads()
}

func (t *targets) missedCount() int64 {
	t.missM.Lock()
	defer t.missM.Unlock()
	return t.missed
}

func (t *targets) pruneFed(now time.Time) {
	if len(t.rows.fed) < 256 {
		return
	}
	for k, at := range t.rows.fed {
		if now.Sub(at) > fedKeep {
			delete(t.rows.fed, k)
		}
	}
}

// threadsOf maps the connections to their threads, asking the server only
// for those it does not know yet.
func (t *targets) threadsOf(ctx context.Context, db *sql.DB, conns []uint64) (map[uint64]uint64, error) {
	var unknown []uint64
	for _, c := range conns {
		if _, ok := t.threadOf[c]; !ok {
			unknown = append(unknown, c)
		}
	}
	if len(unknown) > 0 {
		got, err := collect.ThreadsOf(ctx, db, unknown)
		if err != nil {
			return nil, err
		}
		if len(t.threadOf) > 10_000 {
			clear(t.threadOf) // a cache: connections come and go
		}
		for thread, conn := range got {
			t.threadOf[conn] = thread
		}
	}
	out := map[uint64]uint64{}
	for _, c := range conns {
		if thread, ok := t.threadOf[c]; ok {
			out[thread] = c
		}
	}
	return out, nil
}

// bestRow is the row of p's connection whose start (less off, the server
// clock's offset from the capture's) lies closest to the gap between p's
// last request byte and its first answer byte (where the server must have
// started it), within tol; -1 when none does. A row that ended before p's
// request began (by more than endTol, the clock's error) is the statement
// before it, however close its start: the client waited for its answer.
// Of a pipeline (a driver that sends a batch's requests without waiting
// for answers), every earlier statement started within that gap too: of
// the rows that fit, the one that ended closest to p's last answer byte
// is p's (the server ends a statement as it answers it; the one before p
// ended a statement earlier).
func bestRow(rows []collect.ServerStatement, p *pendingTarget, off, tol, endTol int64) int {
	return bestRowFrom(rows, "", p, off, tol, endTol)
}

// bestRowFrom is bestRow among the rows read from source ("": any). It
// copies nothing: a loaded host's read holds thousands of rows for
// hundreds of targets.
func bestRowFrom(rows []collect.ServerStatement, source string, p *pendingTarget, off, tol, endTol int64) int {
	best, bestKey := -1, int64(0)
	for i := range rows {
		r := &rows[i]
		if source != "" && r.Source != source {
			continue
		}
		if r.ConnID != p.connID || r.StartUS == 0 || r.NestingLevel > 0 || r.NestingType == "STATEMENT" {
			continue
		}
		if r.EndUS != 0 && r.EndUS-off < p.reqFirst-endTol {
			continue
		}
		if r.EndUS != 0 && !p.several && r.EndUS-off < p.respFirst-p.transitUS-tol {
			// Ended before the server began to answer p: an earlier
			// statement's (a pipeline's), p's own not recorded yet. (A
			// multi-statement request's first answer leaves with the
			// next: its first row may end before.)
			continue
		}
		start := r.StartUS - off
		// From the first request byte: a long request is read while the
		// statement's timer runs (the join's own rule).
		fit := join.StartMisfit(start, p.reqFirst, p.respFirst)
		if fit > tol {
			continue
		}
		key := fit // a row read while running has no end yet
		if r.EndUS != 0 {
			key += abs(r.EndUS - off - (p.respLast - p.transitUS))
		}
		if best < 0 || key < bestKey {
			best, bestKey = i, key
		}
	}
	return best
}

func abs(v int64) int64 { return max(v, -v) }

// lossLog remembers the spans (Unix µs) over which history_long lost rows
// before watch read them.
type lossLog struct {
	mu    sync.Mutex
	spans []event.Span
}

// maxLossSpans bounds the log (the oldest are forgotten: statements that
// old were given up long ago).
const maxLossSpans = 1024

// lossSlackUS widens a loss span backwards: a read returns the rows that
// ended since the read before, less the cursor's slack, and a read that
// finds the ring turned over may follow reads that lost rows without
// showing it (a read filtered by the join sample sees only per-thread
// gaps).
const lossSlackUS = 1_000_000

func (l *lossLog) add(from, to int64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n := len(l.spans); n > 0 && l.spans[n-1].End >= from {
		l.spans[n-1].End = max(l.spans[n-1].End, to)
		return
	}
	if len(l.spans) == maxLossSpans {
		l.spans = slices.Delete(l.spans, 0, 1)
	}
	l.spans = append(l.spans, event.Span{Start: from, End: to})
}

// covers reports whether the ring lost rows around us.
func (l *lossLog) covers(us int64) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i := len(l.spans) - 1; i >= 0; i-- {
		if sp := l.spans[i]; us >= sp.Start && us <= sp.End {
			return true
		}
	}
	return false
}
