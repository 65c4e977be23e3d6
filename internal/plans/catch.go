package plans

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/go-sql-driver/mysql"
)

// catchLive reads the plan of a statement running over the threshold. It
// reports whether this execution needs no further attempt (caught, or
// ended before it could be).
func (c *Catcher) catchLive(ctx context.Context, p collect.Process, elapsed time.Duration, now time.Time) bool {
	digest, st := c.state(p.Info)
	if !c.allow("live", digest) {
		return false
	}
	source, query := SourceShowExplain, fmt.Sprintf("%s SHOW EXPLAIN FOR %d", collect.Mark, p.ID)
	if !c.info.MariaDB() {
		source, query = SourceExplainForCon, fmt.Sprintf("%s EXPLAIN FOR CONNECTION %d", collect.Mark, p.ID)
	}
	c.count(func(s *Stats) { s.LivePlans++ })
	plan, explained, err := c.queryPlan(ctx, query)
	if err != nil {
		return c.liveFailed(err)
	}
	if len(plan.Rows) == 0 {
		return true
	}
	if !sameStatement(explained, p.Info) {
		// The connection moved on: this plan is its next statement's.
		c.count(func(s *Stats) { s.Ended++ })
		return true
	}
	slow := Caught{TimeUS: now.UnixMicro(), ConnID: p.ID, Schema: p.DB, Digest: digest, DigestText: st.text,
		Source: source, Role: "slow", ElapsedUS: elapsed.Microseconds(), Signature: plan.Signature(), Plan: plan}
	c.record(slow)
	st.lastSlow = &slow
	c.evaluate(ctx, digest, st, slow, p.Info)
	return true
}

func (c *Catcher) liveFailed(err error) bool {
	if statementEnded(err) {
		c.count(func(s *Stats) { s.Ended++ })
		return true
	}
	c.failed(err)
	return false
}

// queryPlan sends a live plan statement, bounded by LiveTimeout, and
// returns the text of the statement the plan belongs to when the server
// says it (MariaDB's SHOW EXPLAIN/ANALYZE FOR leave it in a 1003 note).
// The target connection may have moved on to its next statement between
// the processlist read and this call; that text is how the caller knows.
func (c *Catcher) queryPlan(ctx context.Context, query string) (Plan, string, error) {
	ctx, cancel := context.WithTimeout(ctx, c.opts.LiveTimeout)
	defer cancel()
	conn, err := c.db.Conn(ctx)
	if err != nil {
		return Plan{}, "", err
	}
	defer conn.Close()
	plan, err := scanQuery(ctx, conn, query)
	if err != nil || !c.info.MariaDB() {
		return plan, "", err
	}
	return plan, explainedText(ctx, conn), nil
}

func scanQuery(ctx context.Context, conn *sql.Conn, query string) (Plan, error) {
	rows, err := conn.QueryContext(ctx, query)
	if err != nil {
		return Plan{}, err
	}
	defer rows.Close()
	return ScanPlan(rows)
}

// explainedText reads the 1003 note a live plan statement leaves; "" when
// there is none (an empty plan, or a server that does not leave it).
func explainedText(ctx context.Context, conn *sql.Conn) string {
	rows, err := conn.QueryContext(ctx, collect.Mark+" SHOW WARNINGS")
	if err != nil {
		return ""
	}
	defer rows.Close()
	var level, msg string
	var code int
	for rows.Next() {
		if rows.Scan(&level, &code, &msg) == nil && code == 1003 {
			return msg
		}
	}
	return ""
}

// sameStatement reports whether the statement a live plan belongs to is
// the one the processlist showed. Unknown ("") counts as the same: MySQL's
// EXPLAIN FOR CONNECTION leaves no note. A note may be cut short, so a
// long prefix of the processlist text is accepted.
func sameStatement(explained, listed string) bool {
	explained, listed = strings.TrimSpace(explained), strings.TrimSpace(listed)
	switch {
	case explained == "" || explained == listed:
		return true
	case len(explained) >= 256:
		return strings.HasPrefix(listed, explained)
	}
	return false
}

// fast handles a completed execution (or, without statement history, a
// running one under the threshold): it gives the digest its usual plan,
// or rechecks an open flip.
func (c *Catcher) fast(ctx context.Context, sqlText, schema string, us int64, slow bool) {
	if !Classify(sqlText).Explainable {
		return
	}
	digest, st := c.state(sqlText)
	switch {
	case st.flip != nil:
		c.recheck(ctx, digest, st, sqlText, schema, us)
	case slow:
	case st.usual == nil || c.opts.Now().Sub(time.UnixMicro(st.usual.TimeUS)) > c.opts.BaselineTTL:
		c.baseline(ctx, digest, st, sqlText, schema, us)
	}
}

// baseline EXPLAINs a fast execution's text for the digest's usual plan,
// then judges a slow plan caught before the usual one was known.
func (c *Catcher) baseline(ctx context.Context, digest string, st *digestState, sqlText, schema string, us int64) {
	p, ok := c.explainCaught(ctx, digest, st, sqlText, schema, us, "usual")
	if !ok {
		return
	}
	c.mu.Lock()
	st.usual = &p
	c.mu.Unlock()
	if s := st.lastSlow; s != nil && p.TimeUS-s.TimeUS < c.opts.BaselineTTL.Microseconds() {
		c.evaluate(ctx, digest, st, *s, sqlText)
	}
}

// recheck EXPLAINs a later execution of a flipped digest: when it plans
// as usual again (statistics fixed), the flip closes.
func (c *Catcher) recheck(ctx context.Context, digest string, st *digestState, sqlText, schema string, us int64) {
	p, ok := c.explainCaught(ctx, digest, st, sqlText, schema, us, "recheck")
	if !ok || st.usual == nil {
		return
	}
	if !compare(st.usual.Plan, p.Plan, c.opts.CollapseRatio, c.opts.CollapseFloor).flipped {
		c.clear(st)
	}
}

func (c *Catcher) explainCaught(ctx context.Context, digest string, st *digestState, sqlText, schema string, us int64, role string) (Caught, bool) {
	if !c.allow("explain", digest) {
		return Caught{}, false
	}
	c.count(func(s *Stats) { s.Explains++ })
	plan, err := explainOn(ctx, c.expl, schema, sqlText)
	if err != nil {
		c.explainFailed(ctx, err)
		return Caught{}, false
	}
	p := Caught{TimeUS: c.opts.Now().UnixMicro(), Schema: schema, Digest: digest, DigestText: st.text,
		Source: SourceExplain, Role: role, ElapsedUS: us, Signature: plan.Signature(), Plan: plan}
	c.record(p)
	return p, true
}

// explainFailed counts the error and replaces the EXPLAIN connection when
// the connection itself failed (a server error leaves it usable).
func (c *Catcher) explainFailed(ctx context.Context, err error) {
	c.failed(err)
	var me *mysql.MySQLError
	if errors.As(err, &me) || errors.Is(err, ErrNotExplainable) || ctx.Err() != nil {
		return
	}
	c.expl.Close()
	if conn, err := c.db.Conn(ctx); err == nil {
		c.expl = conn
		c.boundSession(ctx)
	}
}

// evaluate compares a slow plan with the usual one and opens, or closes,
// the digest's flip.
func (c *Catcher) evaluate(ctx context.Context, digest string, st *digestState, slow Caught, sqlText string) {
	if st.usual == nil {
		return
	}
	c.count(func(s *Stats) { s.Compared++ })
	ch := compare(st.usual.Plan, slow.Plan, c.opts.CollapseRatio, c.opts.CollapseFloor)
	if !ch.flipped {
		c.clear(st)
		return
	}
	actual := c.analyze(ctx, digest, st, slow, sqlText)
	f := c.flipFinding(ctx, digest, st, slow, ch, actual, sqlText)
	c.mu.Lock()
	prev := st.flip
	if prev != nil && f.Evidence["trace"] == nil && prev.Evidence["trace"] != nil {
		f.Evidence["trace"] = prev.Evidence["trace"] // traced once per PerDigestEvery: keep the last one
	}
	st.flip = &f // an open flip takes the latest slow execution as evidence
	if prev == nil {
		c.stats.Flips++
	}
	c.mu.Unlock()
	if prev == nil && c.opts.OnFlip != nil {
		c.opts.OnFlip(f)
	}
}

func (c *Catcher) clear(st *digestState) {
	c.mu.Lock()
	if st.flip != nil {
		st.flip = nil
		c.stats.Cleared++
	}
	c.mu.Unlock()
}

// analyze reads SHOW ANALYZE FOR (MariaDB 10.9+) of a flipped execution
// still running: the rows it actually read beside the estimates. The
// statement may have ended; that only leaves the evidence without them.
func (c *Catcher) analyze(ctx context.Context, digest string, st *digestState, slow Caught, sqlText string) map[string]float64 {
	if slow.ConnID == 0 || !c.info.MariaDB() || !c.info.AtLeast(10, 9, 0) || !c.allow("analyze", digest) {
		return nil
	}
	c.count(func(s *Stats) { s.LiveAnalyzes++ })
	plan, explained, err := c.queryPlan(ctx, fmt.Sprintf("%s SHOW ANALYZE FOR %d", collect.Mark, slow.ConnID))
	if err != nil || plan.Signature() != slow.Signature || !sameStatement(explained, sqlText) {
		if err != nil {
			c.liveFailed(err)
		}
		return nil
	}
	p := slow
	p.TimeUS, p.Source, p.Plan = c.opts.Now().UnixMicro(), SourceShowAnalyze, plan
	c.record(p)
	return plan.Actual()
}

// flipFinding builds the PLAN_FLIP finding with both plans, their
// estimates, the statistics of the tables involved, and the fix.
func (c *Catcher) flipFinding(ctx context.Context, digest string, st *digestState, slow Caught, ch change, actual map[string]float64, sqlText string) event.Finding {
	ev := map[string]any{
		"digest": digest, "digest_text": st.text, "schema": slow.Schema, "conn_id": slow.ConnID,
		"reason":          ch.reason,
		"usual_signature": st.usual.Signature, "slow_signature": slow.Signature,
		"usual_rows": st.usual.Plan.Estimates(), "slow_rows": slow.Plan.Estimates(),
		"usual_plan_at": time.UnixMicro(st.usual.TimeUS).UTC().Format(time.RFC3339Nano),
		"slow_plan_at":  time.UnixMicro(slow.TimeUS).UTC().Format(time.RFC3339Nano),
		"running_ms":    slow.ElapsedUS / 1000,
		"slow_source":   slow.Source,
	}
	if actual != nil {
		ev["slow_actual_rows"] = actual
	}
	stats, err := readStatistics(ctx, c.db, slow.Schema, tablesNamed(slow.Plan, sqlText))
	if err != nil {
		ev["statistics_error"] = err.Error()
	}
	ev["statistics"] = stats
	if vars, err := readStatsVariables(ctx, c.db); err == nil {
		ev["settings"] = vars
	}
	if tr, ok := c.trace(ctx, digest, slow.Schema, sqlText); ok {
		ev["trace"] = tr.Summary()
	}
	return event.Finding{Code: CodePlanFlip, Severity: event.SeverityWarning, Evidence: ev,
		Summary: fmt.Sprintf("a slow execution (%s when caught) of %q ran another plan than its fast executions: %s",
			time.Duration(slow.ElapsedUS)*time.Microsecond, clip(st.text, 120), ch.reason),
		Fix: c.fix(stats)}
}

func (c *Catcher) trace(ctx context.Context, digest, schema, sqlText string) (Trace, bool) {
	if !c.opts.TraceReplay || !Classify(sqlText).Explainable || !c.allow("trace", digest) {
		return Trace{}, false
	}
	c.count(func(s *Stats) { s.Traces++ })
	tr, err := TraceReplay(ctx, c.db, schema, sqlText)
	if err != nil {
		c.failed(err)
		return Trace{}, false
	}
	return tr, true
}

// fix names the statements that rebuild the statistics of the tables.
func (c *Catcher) fix(stats []TableStatistics) string {
	names := make([]string, 0, len(stats))
	for _, s := range stats {
		names = append(names, quoteName(s.Schema)+"."+quoteName(s.Table))
	}
	list := strings.Join(names, ", ")
	if list == "" {
		list = "the tables of the statement"
	}
	if c.info.MariaDB() {
		return "refresh the statistics the optimizer trusts: ANALYZE TABLE " + list + " PERSISTENT FOR ALL " +
			"(engine-independent statistics and histograms, which win over InnoDB's with use_stat_tables=PREFERABLY*); " +
			"keep innodb_stats_persistent=ON and innodb_stats_auto_recalc=ON, and raise innodb_stats_persistent_sample_pages for large tables"
	}
	return "refresh the statistics: ANALYZE TABLE " + list + "; add histograms on the filtered columns (ANALYZE TABLE t UPDATE HISTOGRAM ON col); " +
		"keep innodb_stats_persistent=ON and innodb_stats_auto_recalc=ON, and raise innodb_stats_persistent_sample_pages for large tables"
}

func clip(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
