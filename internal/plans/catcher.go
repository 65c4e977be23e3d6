// Package plans catches the plans of slow executions while they run
// (MariaDB SHOW EXPLAIN FOR / SHOW ANALYZE FOR, MySQL EXPLAIN FOR
// CONNECTION), keeps the usual plan of each digest from its fast
// executions (EXPLAIN of read-only SELECTs only: nothing is ever executed
// again), and raises PLAN_FLIP when a slow execution ran another plan or
// on collapsed row estimates, with the table statistics that explain it.
// Every plan statement is rate-limited per digest and globally.
package plans

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
	"github.com/go-sql-driver/mysql"
)

// CodePlanFlip is the finding code of a plan change on a slow execution.
const CodePlanFlip = "PLAN_FLIP"

// Sources of a caught plan (store.Plan.Source).
const (
	SourceShowExplain   = "SHOW EXPLAIN FOR"
	SourceShowAnalyze   = "SHOW ANALYZE FOR"
	SourceExplainForCon = "EXPLAIN FOR CONNECTION"
	SourceExplain       = "EXPLAIN"
)

// Options tune a Catcher. Zero values take the defaults in brackets.
type Options struct {
	// Threshold: a statement running this long is slow and its live plan
	// is caught; completed statements faster than it give the usual plan
	// [1s].
	Threshold time.Duration
	// PollInterval between processlist reads [Threshold/4, within 10ms-250ms].
	PollInterval time.Duration
	// PerDigestEvery: at most one live plan and one EXPLAIN per digest in
	// this interval [10s].
	PerDigestEvery time.Duration
	// Rate and Burst cap plan statements over all digests [2/s, burst 4].
	Rate  float64
	Burst int
	// CollapseRatio and CollapseFloor: a row estimate that falls by this
	// ratio from at least this many rows is a collapse [100, 1000].
	CollapseRatio float64
	CollapseFloor int64
	// BaselineTTL: a usual plan older than this is refreshed from the next
	// fast execution, unless a flip is open [10m].
	BaselineTTL time.Duration
	// LiveTimeout bounds one SHOW EXPLAIN FOR: MariaDB answers it between
	// two rows of the target, so a target inside a long function call
	// (SLEEP(10) in a select list) keeps it waiting [500ms].
	LiveTimeout time.Duration
	// TraceReplay plans a flipped SELECT again with optimizer_trace on and
	// adds the costs of the chosen and rejected access paths to the
	// finding. Off by default: it costs a traced EXPLAIN per flip.
	TraceReplay bool
	// OnPlan, when set, receives every plan caught (from Run's goroutine).
	OnPlan func(Caught)
	// OnFlip, when set, receives each PLAN_FLIP as it opens (from Run's
	// goroutine; later slow executions of an open flip update its evidence
	// silently); Findings returns only those still open.
	OnFlip func(event.Finding)
	// Now is the clock (tests); time.Now when nil.
	Now func() time.Time
}

func (o *Options) defaults() {
	if o.Threshold <= 0 {
		o.Threshold = time.Second
	}
	if o.PollInterval <= 0 {
		o.PollInterval = min(max(o.Threshold/4, 10*time.Millisecond), 250*time.Millisecond)
	}
	if o.PerDigestEvery <= 0 {
		o.PerDigestEvery = 10 * time.Second
	}
	if o.Rate <= 0 {
		o.Rate = 2
	}
	if o.Burst <= 0 {
		o.Burst = 4
	}
	if o.CollapseRatio <= 1 {
		o.CollapseRatio = 100
	}
	if o.CollapseFloor <= 0 {
		o.CollapseFloor = 1000
	}
	if o.BaselineTTL <= 0 {
		o.BaselineTTL = 10 * time.Minute
	}
	if o.LiveTimeout <= 0 {
		o.LiveTimeout = 500 * time.Millisecond
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Caught is one plan gapscope read.
type Caught struct {
	TimeUS     int64  `json:"t"`
	ConnID     uint64 `json:"conn_id,omitempty"`
	Schema     string `json:"schema,omitempty"`
	Digest     string `json:"digest"`
	DigestText string `json:"digest_text"`
	Source     string `json:"source"`
	// Role: "slow" (live plan of a statement over the threshold),
	// "usual" (EXPLAIN of a fast execution), "recheck" (EXPLAIN of a
	// later execution while a flip is open).
	Role string `json:"role"`
	// ElapsedUS: how long the statement had run when caught (slow), or
	// its server time (usual, recheck).
	ElapsedUS int64  `json:"elapsed_us"`
	Signature string `json:"signature"`
	Plan      Plan   `json:"plan"`
}

// Stats count what a Catcher did.
type Stats struct {
	// History is the statement history table fast executions come from;
	// empty when performance_schema keeps none (then only processlist
	// sightings under the threshold give usual plans, and few are seen).
	History      string `json:"history,omitempty"`
	Polls        int64  `json:"polls"`
	LivePlans    int64  `json:"live_plans"`    // SHOW EXPLAIN FOR / EXPLAIN FOR CONNECTION sent
	LiveAnalyzes int64  `json:"live_analyzes"` // SHOW ANALYZE FOR sent
	Explains     int64  `json:"explains"`      // EXPLAIN of a statement's text sent
	Traces       int64  `json:"traces"`
	Ended        int64  `json:"ended"`        // live plans refused because the statement had ended
	RateLimited  int64  `json:"rate_limited"` // plan statements the limiter held back
	Refused      int64  `json:"refused"`      // statements the guard kept from any plan statement
	Errors       int64  `json:"errors"`
	LastError    string `json:"last_error,omitempty"`
	Compared     int64  `json:"compared"` // slow plans compared with a usual one
	Flips        int64  `json:"flips"`
	Cleared      int64  `json:"cleared"`
}

// digestState is what the Catcher knows about one digest.
type digestState struct {
	text       string
	usual      *Caught
	lastSlow   *Caught
	flip       *event.Finding
	flipSample string // statement text of the flipped execution (for rechecks)
	flipSchema string
}

// Catcher polls running and completed statements and catches plans. Run
// it in one goroutine; Findings, Caught and Stats are safe from any.
type Catcher struct {
	db   *sql.DB
	opts Options
	info collect.ServerInfo

	norm    *sqltext.Normalizer
	limiter *Limiter
	cursor  *collect.StatementCursor
	expl    *sql.Conn
	seen    map[uint64]liveKey // conn id -> statement last caught live
	procs   collect.ProcesslistReader

	mu      sync.Mutex
	digests map[string]*digestState
	caught  []Caught
	stats   Stats
}

type liveKey struct {
	info    string
	startUS int64
}

// NewCatcher returns a Catcher reading db (which should allow a few
// connections: one is kept for EXPLAINs).
func NewCatcher(db *sql.DB, opts Options) *Catcher {
	opts.defaults()
	return &Catcher{db: db, opts: opts, norm: sqltext.NewNormalizer(0),
		limiter: NewLimiter(opts.PerDigestEvery, opts.Rate, opts.Burst),
		seen:    map[uint64]liveKey{}, digests: map[string]*digestState{}}
}

// Run polls until ctx ends. It returns nil when ctx ends, or the error
// that kept it from starting (the server unreachable).
func (c *Catcher) Run(ctx context.Context) error {
	if err := c.start(ctx); err != nil {
		return err
	}
	defer c.expl.Close()
	t := time.NewTicker(c.opts.PollInterval)
	defer t.Stop()
	for {
		if err := c.Poll(ctx); err != nil && ctx.Err() == nil {
			c.failed(err)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

// start detects the server and opens the statement history cursor, when
// performance_schema keeps one (else fast executions are seen only in the
// processlist).
func (c *Catcher) start(ctx context.Context) error {
	info, err := collect.DetectServer(ctx, c.db)
	if err != nil {
		return err
	}
	c.info = info
	c.expl, err = c.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("opening a connection for EXPLAIN: %w", err)
	}
	c.boundSession(ctx)
	for _, table := range []string{"events_statements_history_long", "events_statements_history"} {
		cur := collect.NewStatementCursor(table)
		if info.PerformanceSchema && cur.Prime(ctx, c.db) == nil {
			c.cursor = cur
			c.count(func(s *Stats) { s.History = table })
			break
		}
	}
	return nil
}

// boundSession keeps an EXPLAIN from running long: the optimizer may
// evaluate subqueries while it plans.
func (c *Catcher) boundSession(ctx context.Context) {
	if c.info.MariaDB() {
		_, _ = c.expl.ExecContext(ctx, collect.Mark+" SET SESSION max_statement_time = 2")
	} else {
		_, _ = c.expl.ExecContext(ctx, collect.Mark+" SET SESSION max_execution_time = 2000")
	}
}

// Poll reads running statements, then completed ones, once.
func (c *Catcher) Poll(ctx context.Context) error {
	c.count(func(s *Stats) { s.Polls++ })
	procs, err := c.procs.Read(ctx, c.db)
	if err != nil {
		return err
	}
	now := c.opts.Now()
	live := map[uint64]bool{}
	for _, p := range procs {
		live[p.ID] = true
		c.running(ctx, p, now)
	}
	for id := range c.seen {
		if !live[id] {
			delete(c.seen, id)
		}
	}
	return c.completed(ctx)
}

// running handles one processlist row.
func (c *Catcher) running(ctx context.Context, p collect.Process, now time.Time) {
	if (p.Command != "Query" && p.Command != "Execute") || p.Info == "" {
		return
	}
	if !Classify(p.Info).ReadOnly {
		c.count(func(s *Stats) { s.Refused++ })
		return
	}
	elapsed := time.Duration(p.TimeMS) * time.Millisecond
	if elapsed < c.opts.Threshold {
		if c.cursor == nil { // no statement history: a fast sighting stands in for a completed execution
			c.fast(ctx, p.Info, p.DB, elapsed.Microseconds(), false)
		}
		return
	}
	key := liveKey{info: p.Info, startUS: now.Add(-elapsed).UnixMicro()}
	if prev, ok := c.seen[p.ID]; ok && prev.info == key.info && abs(prev.startUS-key.startUS) < 1_000_000 {
		return // this execution was caught already
	}
	if c.catchLive(ctx, p, elapsed, now) {
		c.seen[p.ID] = key
	}
}

// completed reads statements completed since the last poll: the fast
// executions of a digest give its usual plan, later ones recheck a flip.
func (c *Catcher) completed(ctx context.Context) error {
	if c.cursor == nil {
		return nil
	}
	stmts, _, err := c.cursor.Poll(ctx, c.db, collect.Clock{})
	if err != nil {
		return err
	}
	for _, s := range stmts {
		if s.NestingEventID != 0 || s.MySQLErrno != 0 || s.SQLText == "" {
			continue
		}
		us := int64(s.TimerWait / collect.PicosPerMicro)
		v := Classify(s.SQLText)
		if !v.ReadOnly {
			c.count(func(st *Stats) { st.Refused++ })
			continue
		}
		c.fast(ctx, s.SQLText, s.Schema, us, us >= c.opts.Threshold.Microseconds())
	}
	return nil
}

// failed counts an error and keeps it for Stats.
func (c *Catcher) failed(err error) {
	c.count(func(s *Stats) { s.Errors++; s.LastError = err.Error() })
}

func (c *Catcher) count(f func(*Stats)) {
	c.mu.Lock()
	f(&c.stats)
	c.mu.Unlock()
}

// state returns the digest's state, creating it.
func (c *Catcher) state(sqlText string) (string, *digestState) {
	text, digest := c.norm.Normalize([]byte(sqlText))
	c.mu.Lock()
	defer c.mu.Unlock()
	st := c.digests[digest]
	if st == nil {
		st = &digestState{text: text}
		c.digests[digest] = st
	}
	return digest, st
}

// Findings returns the open PLAN_FLIP findings: a flip closes when a
// later execution of the digest plans as usual again.
func (c *Catcher) Findings() []event.Finding {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []event.Finding
	for _, d := range sortedKeys(c.digests) {
		if f := c.digests[d].flip; f != nil {
			out = append(out, *f)
		}
	}
	return out
}

// Caught returns every plan read so far, oldest first.
func (c *Catcher) Caught() []Caught {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Caught(nil), c.caught...)
}

// Stats returns the counters so far.
func (c *Catcher) Stats() Stats {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.stats
}

func (c *Catcher) record(p Caught) {
	c.mu.Lock()
	c.caught = append(c.caught, p)
	c.mu.Unlock()
	if c.opts.OnPlan != nil {
		c.opts.OnPlan(p)
	}
}

// allow asks the limiter for a plan statement of kind for digest.
func (c *Catcher) allow(kind, digest string) bool {
	if c.limiter.Allow(kind+":"+digest, c.opts.Now()) {
		return true
	}
	c.count(func(s *Stats) { s.RateLimited++ })
	return false
}

// statementEnded reports errors that mean the target finished before the
// plan could be read: unknown thread (1094), or "target is not running an
// EXPLAINable command" (MariaDB 1933, MySQL 3012 / 1295).
func statementEnded(err error) bool {
	var me *mysql.MySQLError
	if !errors.As(err, &me) {
		return false
	}
	switch me.Number {
	case 1094, 1933, 3012, 1295:
		return true
	}
	return false
}

func abs(v int64) int64 {
	if v < 0 {
		return -v
	}
	return v
}
