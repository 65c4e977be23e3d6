package lab

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// BusyOptions tune the busy scenario.
type BusyOptions struct {
	Options
	// Workers run point selects as fast as they go (default 4).
	Workers int
	// Statements stops the workers after this many point selects in all
	// (0: they run until the slow statements are done).
	Statements int
	// Slow statements run on their own connection, SlowEvery apart
	// (default 10 of SlowSQL, 500 ms apart).
	Slow      int
	SlowEvery time.Duration
	SlowSQL   string
	// HistoryLongSize sets performance_schema_events_statements_history_long_size
	// (0: the server's default, 1,000 rows on MariaDB).
	HistoryLongSize int
	// CloseWorkers closes the workers' connections as soon as they are
	// done, as a pool closing idle connections after a burst does: their
	// threads are gone before watch reads their last rows, so the join
	// must find each thread's connection from the wire.
	CloseWorkers bool
}

func (o *BusyOptions) defaults() {
	if o.Workers <= 0 {
		o.Workers = 4
	}
	if o.SlowEvery <= 0 {
		o.SlowEvery = 500 * time.Millisecond
	}
	if o.SlowSQL == "" {
		o.SlowSQL = "SELECT SLEEP(0.2)"
	}
}

// BusyStats is what the busy scenario ran and what watch saw of it.
type BusyStats struct {
	// Sent: point selects the workers completed; Seen/Joined: what watch
	// reported of the workers' connections.
	Sent, Seen, Joined int64
	// Unnoted: statements reported unjoined without a note saying why;
	// BadSums: joined statements whose parts do not sum to client_us;
	// Withheld: statements whose split the guard withheld (unexplained
	// delivery).
	Unnoted, BadSums, Withheld int64
	// QueueUS of the joined background statements.
	QueueUS []int64
	// Slow are the slow statements watch reported, in order.
	Slow    []event.Statement
	SlowRan int
	// AllEvents / AllJoined count every statement watch reported.
	AllEvents, AllJoined int64
	Elapsed              time.Duration
}

// Busy is the case of a new user on a busy server: connections running
// point selects as fast as they go turn the statement history_long ring
// over in tens of milliseconds, while another connection runs a few slow
// statements. watch at its default flags must see every statement and join
// every slow one (from its thread's own history), however few of the fast
// ones it joins.
func Busy(ctx context.Context, o BusyOptions) (*Result, *BusyStats, error) {
	o.defaults()
	if o.Slow <= 0 && o.Statements <= 0 {
		return nil, nil, fmt.Errorf("lab busy: with no slow statements, a number of point selects must bound the run")
	}
	started := time.Now()
	r := &Result{Scenario: "busy", Settings: []string{"performance_schema=ON", "statement consumers current, history, history_long ON"}}
	args := slices.Clone(psArgs)
	if o.HistoryLongSize > 0 {
		args = append(args, "--performance-schema-events-statements-history-long-size="+strconv.Itoa(o.HistoryLongSize))
		r.Settings = append(r.Settings, fmt.Sprintf("events_statements_history_long_size=%d", o.HistoryLongSize))
	} else {
		r.Settings = append(r.Settings, "events_statements_history_long_size default (1,000 rows)")
	}
	// The server runs at sandbox.LabNice: the workers saturate the host by
	// design, and at equal priority their own threads and watch's kept the
	// server's threads off the CPU after a request arrived, a real queue the
	// lab would then report. It measures watch's join on a busy server, not
	// this host's scheduler.
	inst, err := startSandbox(ctx, o.Options, r, sandbox.Options{ServerArgs: args, Nice: sandbox.LabNice})
	if err != nil {
		return nil, nil, err
	}
	defer inst.Stop()
	db, err := inst.Open("")
	if err != nil {
		return nil, nil, err
	}
	defer db.Close()
	if err := prepareBusyTable(ctx, db); err != nil {
		return nil, nil, err
	}
	monitor, err := createMonitor(ctx, inst, false)
	if err != nil {
		return nil, nil, err
	}
	st := &BusyStats{}
	tally := newBusyTally()
	wopts := watch.DefaultOptions() // the user's defaults: budget included
	wopts.DSN, wopts.Ports, wopts.Iface, wopts.KeepLiterals = monitor, []uint16{uint16(inst.Port)}, "lo", o.KeepLiterals
	wopts.Sinks = []watch.Sink{watch.StatementFunc(tally.add)}
	o.step(r, "the server runs at nice %d, its clients and watch at this process's; watching port %d on lo at watch's default flags (--cpu-budget %g%%)", sandbox.LabNice, inst.Port, 100*wopts.CPUBudget)
	s, err := startWatch(ctx, wopts)
	if err != nil {
		return nil, nil, err
	}
	work, err := inst.Open("") // connections opened under watch: their handshakes are seen
	if err != nil {
		s.stop()
		return nil, nil, err
	}
	defer work.Close()
	runErr := runBusy(ctx, o, r, work, tally, st)
	time.Sleep(time.Second) // the last rows reach the history
	res, err := s.stop()
	if err != nil {
		return nil, nil, err
	}
	if runErr != nil {
		return nil, nil, runErr
	}
	tally.result(st)
	st.Elapsed = time.Since(started)
	r.Watch, r.Findings, r.Statements = res, res.Findings, st.Slow
	r.Marked = map[string]event.Statement{}
	for i, sl := range st.Slow {
		r.Marked["slow "+strconv.Itoa(i+1)] = sl
	}
	busySeen(r, st, res)
	r.Elapsed = time.Since(started)
	return r, st, nil
}

func prepareBusyTable(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS busy",
		"CREATE TABLE IF NOT EXISTS busy.t (id INT PRIMARY KEY, v INT)",
		"INSERT IGNORE INTO busy.t SELECT seq, seq FROM busy.seq_1_to_1000",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("preparing the busy table: %w", err)
		}
	}
	return nil
}

// runBusy runs the workers and the slow connection; the workers stop once
// the slow statements are done (or after o.Statements point selects).
func runBusy(ctx context.Context, o BusyOptions, r *Result, db *sql.DB, tally *busyTally, st *BusyStats) error {
	db.SetMaxOpenConns(o.Workers + 2)
	if o.CloseWorkers {
		db.SetMaxIdleConns(0) // a connection given back is closed
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var sent atomic.Int64
	left := atomic.Int64{}
	left.Store(int64(o.Statements))
	var wg sync.WaitGroup
	errs := make(chan error, o.Workers+1)
	for w := range o.Workers {
		c, err := db.Conn(ctx)
		if err != nil {
			return err
		}
		tally.background(connID(ctx, c))
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer c.Close()
			errs <- pointSelects(ctx, c, w, &sent, &left, o.Statements > 0)
		}()
	}
	began := time.Now()
	if o.Slow > 0 {
		o.step(r, "%d connections run point selects as fast as they go; another runs %d x %s, %s apart", o.Workers, o.Slow, o.SlowSQL, o.SlowEvery)
		n, err := slowStatements(ctx, db, o, tally)
		st.SlowRan = n
		if err != nil {
			cancel()
			wg.Wait()
			return err
		}
		cancel()
	} else {
		o.step(r, "%d connections run %d point selects in all, as fast as they go", o.Workers, o.Statements)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil && ctx.Err() == nil {
			return err
		}
	}
	st.Sent = sent.Load()
	el := time.Since(began)
	o.step(r, "the workers completed %d point selects in %s (%.0f/s)", st.Sent, el.Round(time.Millisecond), float64(st.Sent)/el.Seconds())
	return nil
}

// pointSelects runs point selects on c until ctx ends or, when bounded,
// until left runs out.
func pointSelects(ctx context.Context, c *sql.Conn, w int, sent, left *atomic.Int64, bounded bool) error {
	for i := 0; ; i++ {
		if bounded && left.Add(-1) < 0 {
			return nil
		}
		var v int
		q := "SELECT v FROM busy.t WHERE id = " + strconv.Itoa(1+(w*7919+i)%1000)
		if err := c.QueryRowContext(ctx, q).Scan(&v); err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		sent.Add(1)
	}
}

func slowStatements(ctx context.Context, db *sql.DB, o BusyOptions, tally *busyTally) (int, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	tally.slowConn(connID(ctx, c))
	tick := time.NewTicker(o.SlowEvery)
	defer tick.Stop()
	for i := range o.Slow {
		if _, err := c.ExecContext(ctx, o.SlowSQL); err != nil {
			return i, fmt.Errorf("slow statement %d: %w", i+1, err)
		}
		select {
		case <-ctx.Done():
			return i + 1, ctx.Err()
		case <-tick.C:
		}
	}
	return o.Slow, nil
}

func connID(ctx context.Context, c *sql.Conn) uint64 {
	var id uint64
	_ = c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id)
	return id
}

// busyTally counts what watch reported, by connection, as it reports it.
type busyTally struct {
	mu                         sync.Mutex
	bg                         map[uint64]bool
	slow                       uint64
	seen, joined               int64
	all, allJoined             int64
	unnoted, badSums, withheld int64
	queues                     []int64
	slowStmts                  []event.Statement
}

func newBusyTally() *busyTally { return &busyTally{bg: map[uint64]bool{}} }

func (t *busyTally) background(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.bg[id] = true
}

func (t *busyTally) slowConn(id uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.slow = id
}

func (t *busyTally) add(s *event.Statement) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.all++
	if s.Joined {
		t.allJoined++
	}
	if s.Joined && s.RequestUS+s.QueueUS+s.ExecUS+s.SendStallUS+s.DeliveryUS != s.ClientUS {
		t.badSums++
	}
	if !s.Joined && !s.HasNotes() {
		t.unnoted++
	}
	if s.Why == event.UnexplainedDelivery {
		t.withheld++
	}
	switch {
	case s.ConnID != 0 && s.ConnID == t.slow && s.Cmd == "COM_QUERY":
		t.slowStmts = append(t.slowStmts, *s)
	case t.bg[s.ConnID] && s.Cmd == "COM_QUERY" && strings.Contains(s.SQL, "busy.t"):
		t.seen++
		if s.Joined {
			t.joined++
			t.queues = append(t.queues, s.QueueUS)
		}
	}
}

func (t *busyTally) result(st *BusyStats) {
	t.mu.Lock()
	defer t.mu.Unlock()
	st.Seen, st.Joined, st.Unnoted, st.BadSums, st.Withheld = t.seen, t.joined, t.unnoted, t.badSums, t.withheld
	st.AllEvents, st.AllJoined = t.all, t.allJoined
	st.QueueUS = slices.Clone(t.queues)
	for _, s := range t.slowStmts {
		if s.ClientUS >= 100_000 { // the slow statements, not the CONNECTION_ID() before them
			st.Slow = append(st.Slow, s)
		}
	}
}

// busySeen says what watch saw, for the report.
func busySeen(r *Result, st *BusyStats, res *watch.Result) {
	r.Seen = append(r.Seen, fmt.Sprintf("point selects: %d completed, %d seen by watch (%.2f%%), %d joined (%.2f%%)",
		st.Sent, st.Seen, pct(st.Seen, st.Sent), st.Joined, pct(st.Joined, st.Sent)))
	joined := 0
	for _, s := range st.Slow {
		if s.Joined {
			joined++
		}
		r.Seen = append(r.Seen, fmt.Sprintf("slow statement: %s [%s]", describe(s), s.JoinSource))
	}
	if st.SlowRan > 0 {
		r.Seen = append(r.Seen, fmt.Sprintf("slow statements: %d ran, %d seen, %d joined", st.SlowRan, len(st.Slow), joined))
	}
	r.Seen = append(r.Seen, res.Coverage.Summary())
}

func pct(a, b int64) float64 {
	if b == 0 {
		return 0
	}
	return 100 * float64(a) / float64(b)
}
