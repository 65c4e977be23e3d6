package workload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync"
	"time"
)

// Statement is one entry of a concurrent mix. Args, when set, draws the
// parameters of each execution (sent as a server-side prepared statement).
type Statement struct {
	SQL  string
	Args func(r *rand.Rand) []any
}

// ConcurrentOptions configure Concurrent.
type ConcurrentOptions struct {
	// Conns is the number of concurrent connections (default 8).
	Conns int
	// Duration bounds the run; Count bounds the statements per connection.
	// At least one must be set; the run ends at whichever comes first.
	Duration time.Duration
	Count    int
	// Statements each connection cycles through, starting at a random
	// offset. Default: DefaultMix over a scratch table in Schema.
	Statements []Statement
	// Schema for the default mix's scratch table (default
	// "gapscope_slap"); created, filled with Rows rows, dropped at the end.
	Schema string
	Rows   int // default 10,000
}

// ConcurrentResult is what a concurrent run measured.
type ConcurrentResult struct {
	Conns      int
	Statements int64
	Errors     int64
	FirstError error
	Elapsed    time.Duration
	QPS        float64
	Latency    Latency // per statement
}

// DefaultMix is a read/write mix on table (id INT PRIMARY KEY, k INT, v
// VARCHAR(64), KEY (k)) holding ids 1..rows: point and range reads, an
// aggregate, updates by primary and secondary key, and an insert+delete
// pair that keeps the table's size.
func DefaultMix(table string, rows int) []Statement {
	id := func(r *rand.Rand) []any { return []any{1 + r.IntN(rows)} }
	return []Statement{
		{SQL: "SELECT v FROM " + table + " WHERE id = ?", Args: id},
		{SQL: "SELECT id, v FROM " + table + " WHERE k BETWEEN ? AND ? + 10", Args: func(r *rand.Rand) []any { k := r.IntN(rows); return []any{k, k} }},
		{SQL: "SELECT COUNT(*), SUM(k) FROM " + table + " WHERE id BETWEEN ? AND ? + 100", Args: func(r *rand.Rand) []any { k := r.IntN(rows); return []any{k, k} }},
		{SQL: "UPDATE " + table + " SET v = CONCAT('u', ?) WHERE id = ?", Args: func(r *rand.Rand) []any { return []any{r.Int(), 1 + r.IntN(rows)} }},
		{SQL: "UPDATE " + table + " SET k = k + 1 WHERE id = ?", Args: id},
		{SQL: "SELECT v FROM " + table + " WHERE id = ?", Args: id},
		{SQL: "INSERT INTO " + table + " (id, k, v) VALUES (?, 0, 'slap') ON DUPLICATE KEY UPDATE v = 'slap'", Args: func(r *rand.Rand) []any { return []any{rows + 1 + r.IntN(rows)} }},
		{SQL: "DELETE FROM " + table + " WHERE id > ? LIMIT 1", Args: func(r *rand.Rand) []any { return []any{rows} }},
	}
}

// StatementsFromSQL splits a script (one statement per ';') into a mix
// without parameters, for user-supplied workloads.
func StatementsFromSQL(script string) []Statement {
	var out []Statement
	for _, s := range strings.Split(script, ";") {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, Statement{SQL: s})
		}
	}
	return out
}

// Concurrent runs Conns connections through a statement mix, like
// mysqlslap, for Duration and/or Count statements per connection.
func Concurrent(ctx context.Context, dsn string, opts ConcurrentOptions) (ConcurrentResult, error) {
	if opts.Conns <= 0 {
		opts.Conns = 8
	}
	if opts.Duration <= 0 && opts.Count <= 0 {
		return ConcurrentResult{}, errors.New("workload: concurrent run needs a Duration or a Count")
	}
	db, err := open(ctx, dsn, opts.Conns)
	if err != nil {
		return ConcurrentResult{}, err
	}
	defer db.Close()
	if opts.Statements == nil {
		drop, err := prepareSlapTable(ctx, db, &opts)
		if err != nil {
			return ConcurrentResult{}, err
		}
		defer drop()
	}
	runCtx := ctx
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	return runConcurrent(runCtx, ctx, db, opts)
}

// prepareSlapTable creates and fills the default mix's table and returns
// its cleanup.
func prepareSlapTable(ctx context.Context, db *sql.DB, opts *ConcurrentOptions) (func(), error) {
	if opts.Schema == "" {
		opts.Schema = "gapscope_slap"
	}
	if !schemaName.MatchString(opts.Schema) {
		return nil, fmt.Errorf("workload: bad schema name %q", opts.Schema)
	}
	if opts.Rows <= 0 {
		opts.Rows = 10_000
	}
	table := "`" + opts.Schema + "`.slap"
	stmts := []string{"CREATE DATABASE IF NOT EXISTS `" + opts.Schema + "`", "DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id INT PRIMARY KEY, k INT NOT NULL, v VARCHAR(64), KEY (k)) ENGINE=InnoDB"}
	for _, s := range stmts {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return nil, fmt.Errorf("workload: preparing slap table: %w", err)
		}
	}
	if err := bulkInsert(ctx, db, table, "(id, k, v)", opts.Rows, func(b *strings.Builder, i int) {
		fmt.Fprintf(b, "(%d, %d, 'v%d')", i, i, i)
	}); err != nil {
		return nil, err
	}
	opts.Statements = DefaultMix(table, opts.Rows)
	return func() { dropSchema(db, opts.Schema) }, nil
}

// bulkInsert fills table with rows 1..n, 1000 per statement.
func bulkInsert(ctx context.Context, db *sql.DB, table, cols string, n int, row func(*strings.Builder, int)) error {
	var b strings.Builder
	for first := 1; first <= n; first += 1000 {
		b.Reset()
		b.WriteString("INSERT INTO " + table + " " + cols + " VALUES ")
		for i := first; i < first+1000 && i <= n; i++ {
			if i > first {
				b.WriteByte(',')
			}
			row(&b, i)
		}
		if _, err := db.ExecContext(ctx, b.String()); err != nil {
			return fmt.Errorf("workload: filling %s: %w", table, err)
		}
	}
	return nil
}

// runConcurrent runs the workers until runCtx ends or each reached Count.
// ctx is the caller's: its end is an interruption, runCtx's is the plan.
func runConcurrent(runCtx, ctx context.Context, db *sql.DB, opts ConcurrentOptions) (ConcurrentResult, error) {
	res := ConcurrentResult{Conns: opts.Conns}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	start := time.Now()
	for w := range opts.Conns {
		wg.Add(1)
		go func() {
			defer wg.Done()
			mine, n, errs, first := slapWorker(runCtx, db, opts, uint64(w))
			mu.Lock()
			lat = append(lat, mine...)
			res.Statements += n
			res.Errors += errs
			if res.FirstError == nil {
				res.FirstError = first
			}
			mu.Unlock()
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.QPS = float64(res.Statements) / res.Elapsed.Seconds()
	res.Latency = Summarize(lat)
	return res, ctx.Err()
}

// slapWorker runs one connection's share and returns its latencies,
// statement count, error count and first error.
func slapWorker(ctx context.Context, db *sql.DB, opts ConcurrentOptions, seed uint64) ([]time.Duration, int64, int64, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, 0, 1, fmt.Errorf("workload: opening a connection: %w", err)
	}
	defer c.Close()
	stmts, err := prepareAll(ctx, c, opts.Statements)
	if err != nil {
		return nil, 0, 1, err
	}
	defer closeAll(stmts)
	rng := rand.New(rand.NewPCG(seed, uint64(time.Now().UnixNano())))
	var lat []time.Duration
	var n, errs int64
	var first error
	i := rng.IntN(len(opts.Statements))
	for ctx.Err() == nil && (opts.Count <= 0 || n < int64(opts.Count)) {
		k := i % len(opts.Statements)
		st := opts.Statements[k]
		i++
		t0 := time.Now()
		var err error
		if st.Args != nil {
			err = drain(stmts[k].QueryContext(ctx, st.Args(rng)...))
		} else {
			err = drain(c.QueryContext(ctx, st.SQL))
		}
		if stopped(ctx, err) {
			break
		}
		lat = append(lat, time.Since(t0))
		n++
		if err != nil {
			errs++
			if first == nil {
				first = fmt.Errorf("workload: %s: %w", st.SQL, err)
			}
		}
	}
	return lat, n, errs, first
}

// drain reads whatever result a statement returned.
func drain(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	return rows.Close()
}

// prepareAll prepares, on one connection, the statements that take
// parameters (server-side prepared statements, executed many times).
func prepareAll(ctx context.Context, c *sql.Conn, list []Statement) ([]*sql.Stmt, error) {
	out := make([]*sql.Stmt, len(list))
	for i, st := range list {
		if st.Args == nil {
			continue
		}
		p, err := c.PrepareContext(ctx, st.SQL)
		if err != nil {
			closeAll(out)
			return nil, fmt.Errorf("workload: preparing %s: %w", st.SQL, err)
		}
		out[i] = p
	}
	return out, nil
}

func closeAll(stmts []*sql.Stmt) {
	for _, s := range stmts {
		if s != nil {
			s.Close()
		}
	}
}
