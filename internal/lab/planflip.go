package lab

import (
	"context"
	"database/sql"
	"fmt"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/plans"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// PlanFlipOptions tune the planflip scenario.
type PlanFlipOptions struct {
	Options
	// Rows of the big table t (default 200,000: a full scan takes ~0.3 s
	// here, the usual plan a few ms).
	Rows int
	// Threshold over which an execution is slow (default: a quarter of
	// the flipped plan's full scan as timed on this machine, between 5 and
	// 50 ms, so that the catcher sees the scan running with time left to
	// read its plan on a fast machine as on a slow one).
	Threshold time.Duration
	// Trace adds the optimizer trace of the flipped plan (default on: the
	// lab shows what it costs to look).
	NoTrace bool
}

// planFlipQuery is the plan flip as measured on MariaDB 10.11: u -> t by ref
// while the statistics are right, a full scan of t once they say that
// every value of t.k repeats 200,000 times.
const planFlipQuery = "SELECT COUNT(*), SUM(LENGTH(t.pad)) FROM t JOIN u ON t.k = u.x WHERE u.y = %d"

// planFlipOutcome is what the scenario saw, for its tests.
type planFlipOutcome struct {
	flip     *event.Finding  // the PLAN_FLIP raised while the statistics were wrong
	afterFix []event.Finding // open findings once ANALYZE TABLE fixed them
	stats    plans.Stats
}

// PlanFlip reproduces the plan-flip case on MariaDB: the same SELECT runs in
// milliseconds, then, after its table statistics go wrong, as a full scan.
// gapscope catches the slow execution's plan while it runs, compares it
// with the usual plan, shows the statistics, and sees the flip close after
// ANALYZE TABLE ... PERSISTENT FOR ALL.
func PlanFlip(ctx context.Context, o PlanFlipOptions) (*Result, error) {
	r, _, err := planFlip(ctx, o)
	return r, err
}

func planFlip(ctx context.Context, o PlanFlipOptions) (*Result, planFlipOutcome, error) {
	var out planFlipOutcome
	o.defaults()
	started := time.Now()
	r := &Result{Scenario: "planflip", Settings: []string{"performance_schema=ON", "statement history consumers ON",
		"use_stat_tables=PREFERABLY_FOR_QUERIES (default)"}, Marked: map[string]event.Statement{}}
	// A private tmpdir: the optimizer's internal temporary tables (SHOW
	// EXPLAIN uses them) must not share /tmp with whatever cleans it.
	tmp, err := os.MkdirTemp("", "gapscope-planflip-")
	if err != nil {
		return nil, out, fmt.Errorf("creating the sandbox tmpdir: %w", err)
	}
	defer os.RemoveAll(tmp)
	args := append(slices.Clone(psArgs), "--tmpdir="+tmp)
	inst, err := startSandbox(ctx, o.Options, r, sandbox.Options{ServerArgs: args})
	if err != nil {
		return nil, out, err
	}
	defer inst.Stop()
	app, mon, err := openPair(ctx, inst)
	if err != nil {
		return nil, out, err
	}
	defer app.Close()
	defer mon.Close()
	if err := loadPlanFlipTables(ctx, app, o, r); err != nil {
		return nil, out, err
	}
	if o.Threshold <= 0 {
		if o.Threshold, err = scanThreshold(ctx, app, o, r); err != nil {
			return nil, out, err
		}
	}
	f := &flipRun{o: o, r: r, app: app}
	catcher := plans.NewCatcher(mon, plans.Options{Threshold: o.Threshold, PollInterval: 10 * time.Millisecond,
		PerDigestEvery: time.Second, TraceReplay: !o.NoTrace})
	cctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- catcher.Run(cctx) }()
	err = f.phases(ctx, catcher, &out)
	stop()
	if cerr := <-done; err == nil {
		err = cerr
	}
	out.stats = catcher.Stats()
	r.Elapsed = time.Since(started)
	return r, out, err
}

func (o *PlanFlipOptions) defaults() {
	if o.Rows <= 0 {
		o.Rows = 200_000
	}
}

// scanThreshold times the plan the broken statistics will choose (u, then
// a full scan of t), forced by hints while the statistics are still
// right, and returns a quarter of the fastest of three runs, between 5 and
// 50 ms.
func scanThreshold(ctx context.Context, db *sql.DB, o PlanFlipOptions, r *Result) (time.Duration, error) {
	q := "SELECT COUNT(*), SUM(LENGTH(t.pad)) FROM u STRAIGHT_JOIN t IGNORE INDEX (k) ON t.k = u.x WHERE u.y = 1"
	best := time.Duration(1 << 62)
	for range 3 {
		start := time.Now()
		var n, sum sql.NullInt64
		if err := db.QueryRowContext(ctx, q).Scan(&n, &sum); err != nil {
			return 0, fmt.Errorf("timing the full scan: %w", err)
		}
		best = min(best, time.Since(start))
	}
	th := min(max(best/4, 5*time.Millisecond), 50*time.Millisecond).Round(time.Millisecond)
	o.step(r, "the flipped plan's full scan takes %s here: slow threshold %s", best.Round(time.Millisecond), th)
	return th, nil
}

// openPair opens gapscope's pool and the application's, in database lab.
func openPair(ctx context.Context, inst *sandbox.Instance) (app, mon *sql.DB, err error) {
	if mon, err = inst.Open(""); err != nil {
		return nil, nil, err
	}
	mon.SetMaxOpenConns(4)
	if _, err = mon.ExecContext(ctx, "CREATE DATABASE lab"); err != nil {
		mon.Close()
		return nil, nil, fmt.Errorf("creating database lab: %w", err)
	}
	if app, err = inst.Open("lab"); err != nil {
		mon.Close()
		return nil, nil, err
	}
	app.SetMaxOpenConns(1) // one application session, as in the field report
	return app, mon, nil
}

// loadPlanFlipTables creates t (o.Rows rows, 10 per value of k) and u
// (1,000 rows, 10 per value of y) with MariaDB's sequence engine.
func loadPlanFlipTables(ctx context.Context, db *sql.DB, o PlanFlipOptions, r *Result) error {
	o.step(r, "creating lab.t (%d rows, KEY k) and lab.u (1,000 rows, KEY y)", o.Rows)
	conn, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("connecting to the sandbox: %w", err)
	}
	defer conn.Close()
	for _, q := range []string{
		"CREATE TABLE u (id INT PRIMARY KEY, x INT NOT NULL, y INT NOT NULL, KEY y (y))",
		"CREATE TABLE t (id INT AUTO_INCREMENT PRIMARY KEY, k INT NOT NULL, pad CHAR(60) NOT NULL DEFAULT 'x', KEY k (k))",
		"INSERT INTO u SELECT seq, seq, seq % 100 FROM seq_1_to_1000",
		fmt.Sprintf("INSERT INTO t (k) SELECT seq %% %d FROM seq_1_to_%d", max(o.Rows/10, 1), o.Rows),
		"ANALYZE TABLE t, u",
	} {
		if _, err := conn.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("preparing the lab tables (%s): %w", q, err)
		}
	}
	return nil
}

// flipRun drives the application side of the scenario.
type flipRun struct {
	o   PlanFlipOptions
	r   *Result
	app *sql.DB
	n   int
}

// phases: usual plan, broken statistics, fix.
func (f *flipRun) phases(ctx context.Context, c *plans.Catcher, out *planFlipOutcome) error {
	if err := f.usual(ctx, c); err != nil {
		return err
	}
	if err := f.breakStats(ctx); err != nil {
		return err
	}
	flip, err := f.untilFlip(ctx, c)
	if err != nil {
		return err
	}
	out.flip = flip
	f.r.Findings = []event.Finding{*flip}
	f.describeFlip(flip)
	out.afterFix, err = f.fix(ctx, c)
	return err
}

// usual runs the query fast until gapscope has its usual plan.
func (f *flipRun) usual(ctx context.Context, c *plans.Catcher) error {
	f.o.step(f.r, "running the query with healthy statistics until gapscope has its usual plan")
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		s, err := f.exec(ctx, "fast")
		if err != nil {
			return err
		}
		if p, ok := lastCaught(c, "usual"); ok {
			f.r.Seen = append(f.r.Seen, fmt.Sprintf("usual plan (EXPLAIN of a fast execution, %s at the client): %s, rows %v",
				report.Micros(s.ClientUS), p.Signature, p.Plan.Estimates()))
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("planflip: gapscope caught no usual plan in 15 s (stats %+v)", c.Stats())
}

// breakStats makes the engine-independent statistics claim every value of
// t.k repeats 200,000 times; FLUSH TABLES makes the optimizer reload them.
func (f *flipRun) breakStats(ctx context.Context) error {
	f.o.step(f.r, "breaking the statistics: ANALYZE TABLE t PERSISTENT FOR ALL; UPDATE mysql.index_stats SET avg_frequency=200000 (index k); FLUSH TABLES")
	for _, q := range []string{
		"ANALYZE TABLE t PERSISTENT FOR ALL",
		"UPDATE mysql.index_stats SET avg_frequency = 200000 WHERE db_name = 'lab' AND table_name = 't' AND index_name = 'k'",
		"FLUSH TABLES",
	} {
		if _, err := f.app.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("breaking statistics (%s): %w", q, err)
		}
	}
	return nil
}

// untilFlip runs the query until gapscope raises PLAN_FLIP.
func (f *flipRun) untilFlip(ctx context.Context, c *plans.Catcher) (*event.Finding, error) {
	f.o.step(f.r, "running the same query again (threshold %s) until gapscope catches a slow execution's plan", f.o.Threshold)
	for range 30 {
		if _, err := f.exec(ctx, "slow"); err != nil {
			return nil, err
		}
		if fl := planFlips(c.Findings()); len(fl) > 0 {
			return &fl[0], nil
		}
	}
	return nil, fmt.Errorf("planflip: no PLAN_FLIP after 30 slow executions (stats %+v)", c.Stats())
}

// fix refreshes the statistics and runs the query until the flip closes
// (or 15 s pass); it returns the findings still open.
func (f *flipRun) fix(ctx context.Context, c *plans.Catcher) ([]event.Finding, error) {
	f.o.step(f.r, "fixing: ANALYZE TABLE t PERSISTENT FOR ALL")
	if _, err := f.app.ExecContext(ctx, "ANALYZE TABLE t PERSISTENT FOR ALL"); err != nil {
		return nil, fmt.Errorf("fixing statistics: %w", err)
	}
	deadline := time.Now().Add(15 * time.Second)
	for {
		s, err := f.exec(ctx, "fixed")
		if err != nil {
			return nil, err
		}
		open := planFlips(c.Findings())
		if len(open) == 0 {
			f.r.Seen = append(f.r.Seen, fmt.Sprintf("after ANALYZE TABLE: the query runs in %s again and the PLAN_FLIP cleared (a later execution plans as usual)", report.Micros(s.ClientUS)))
			return open, nil
		}
		if time.Now().After(deadline) {
			f.r.Seen = append(f.r.Seen, "after ANALYZE TABLE: the PLAN_FLIP is still open after 15 s")
			return open, nil
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// exec runs the query once with the next value of u.y and keeps it as a
// statement of the result, marked by role (the last of each role).
func (f *flipRun) exec(ctx context.Context, role string) (event.Statement, error) {
	f.n++
	q := fmt.Sprintf(planFlipQuery, f.n%100)
	start := time.Now()
	var n, sum sql.NullInt64
	if err := f.app.QueryRowContext(ctx, q).Scan(&n, &sum); err != nil {
		return event.Statement{}, fmt.Errorf("running the lab query: %w", err)
	}
	end := time.Now()
	text := sqltext.NewNormalizer(1)
	dt, digest := text.Normalize([]byte(q))
	s := event.Statement{Cmd: "COM_QUERY", SQL: dt, Digest: digest, DigestText: dt, DB: "lab", Rows: 1,
		TReqFirst: start.UnixMicro(), TRespLast: end.UnixMicro(), Parts: event.Parts{ClientUS: end.Sub(start).Microseconds()},
		Notes: []string{"timed by the lab's client, role " + role}}
	if f.o.KeepLiterals {
		s.SQL = q
	}
	f.r.Statements = append(f.r.Statements, s)
	f.r.Marked[role] = s
	return s, nil
}

func (f *flipRun) describeFlip(fl *event.Finding) {
	ev := fl.Evidence
	f.r.Seen = append(f.r.Seen,
		fmt.Sprintf("slow execution caught while running (%v ms, %v): %v, rows %v", ev["running_ms"], ev["slow_source"], ev["slow_signature"], ev["slow_rows"]))
	if a, ok := ev["slow_actual_rows"]; ok {
		f.r.Seen = append(f.r.Seen, fmt.Sprintf("rows actually read so far (SHOW ANALYZE r_rows): %v", a))
	}
	if st, ok := ev["statistics"].([]plans.TableStatistics); ok {
		for _, s := range st {
			f.r.Seen = append(f.r.Seen, fmt.Sprintf("statistics of %s.%s: TABLE_ROWS %d, innodb n_rows %d (%s), engine-independent cardinality %d, avg_frequency %v",
				s.Schema, s.Table, s.TableRows, s.InnoDBRows, s.InnoDBUpdated, s.Cardinality, s.AvgFrequency))
		}
	}
	if tr, ok := ev["trace"].(map[string]any); ok {
		f.r.Seen = append(f.r.Seen, "optimizer trace of the flipped plan: "+traceLine(tr))
	}
}

func traceLine(tr map[string]any) string {
	var parts []string
	tables, _ := tr["tables"].([]map[string]any)
	for _, t := range tables {
		parts = append(parts, fmt.Sprintf("%v chosen %v, rejected %v", t["table"], t["chosen"], t["rejected"]))
	}
	return strings.Join(parts, "; ")
}

func planFlips(fs []event.Finding) []event.Finding {
	var out []event.Finding
	for _, f := range fs {
		if f.Code == plans.CodePlanFlip {
			out = append(out, f)
		}
	}
	return out
}

func lastCaught(c *plans.Catcher, role string) (plans.Caught, bool) {
	all := c.Caught()
	for i := len(all) - 1; i >= 0; i-- {
		if all[i].Role == role {
			return all[i], true
		}
	}
	return plans.Caught{}, false
}
