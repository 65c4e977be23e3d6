package workload

import (
	"context"
	"database/sql"
	"fmt"
	"regexp"
	"strconv"
	"time"
)

// CanaryOptions configure Canary.
type CanaryOptions struct {
	// Schema is the scratch schema created and dropped (default
	// "gapscope_canary"); it must not hold anything else.
	Schema string
	// Repeat is how many times TRUNCATE + Inserts runs (default 20).
	Repeat int
	// Inserts per repetition (default 100).
	Inserts int
}

// CanaryResult holds the duration of each repetition and their summary.
type CanaryResult struct {
	Reps              []time.Duration
	Max, Avg, Median  time.Duration
	ConnID            uint64
	Started, Finished time.Time
	Statements        int64
}

var schemaName = regexp.MustCompile(`^[A-Za-z0-9_]{1,64}$`)

// Canary runs the canary of the concurrency-cap case (docs/field-reports.md): in a scratch schema, TRUNCATE a small
// InnoDB table and INSERT Inserts rows one by one (autocommit), Repeat
// times; it returns each repetition's time and their max, average and
// median. The schema is created first and dropped at the end, also when
// the context is cancelled.
func Canary(ctx context.Context, dsn string, opts CanaryOptions) (CanaryResult, error) {
	if opts.Schema == "" {
		opts.Schema = "gapscope_canary"
	}
	if !schemaName.MatchString(opts.Schema) {
		return CanaryResult{}, fmt.Errorf("workload: bad canary schema name %q", opts.Schema)
	}
	if opts.Repeat <= 0 {
		opts.Repeat = 20
	}
	if opts.Inserts <= 0 {
		opts.Inserts = 100
	}
	db, err := open(ctx, dsn, 1)
	if err != nil {
		return CanaryResult{}, err
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return CanaryResult{}, fmt.Errorf("workload: opening a connection: %w", err)
	}
	defer c.Close()
	res := CanaryResult{Started: time.Now()}
	if res.ConnID, err = connID(ctx, c); err != nil {
		return res, err
	}
	table := "`" + opts.Schema + "`.canary"
	if err := execAll(ctx, c, "CREATE DATABASE IF NOT EXISTS `"+opts.Schema+"`",
		"CREATE TABLE IF NOT EXISTS "+table+" (id INT PRIMARY KEY, v VARCHAR(64)) ENGINE=InnoDB"); err != nil {
		return res, err
	}
	defer dropSchema(db, opts.Schema)
	for range opts.Repeat {
		d, err := canaryRep(ctx, c, table, opts.Inserts)
		res.Statements += int64(opts.Inserts + 1)
		if err != nil {
			return res, err
		}
		res.Reps = append(res.Reps, d)
	}
	res.Finished = time.Now()
	sum := Summarize(append([]time.Duration(nil), res.Reps...))
	res.Max, res.Avg, res.Median = sum.Max, sum.Avg, sum.P50
	return res, nil
}

func canaryRep(ctx context.Context, c *sql.Conn, table string, inserts int) (time.Duration, error) {
	start := time.Now()
	if _, err := c.ExecContext(ctx, "TRUNCATE TABLE "+table); err != nil {
		return 0, fmt.Errorf("workload: canary truncate: %w", err)
	}
	for i := range inserts {
		// Text protocol, as the seed's canary: one round trip per insert.
		if _, err := c.ExecContext(ctx, "INSERT INTO "+table+" VALUES ("+strconv.Itoa(i)+", 'canary')"); err != nil {
			return 0, fmt.Errorf("workload: canary insert: %w", err)
		}
	}
	return time.Since(start), nil
}

func execAll(ctx context.Context, c *sql.Conn, stmts ...string) error {
	for _, s := range stmts {
		if _, err := c.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("workload: %s: %w", s, err)
		}
	}
	return nil
}

// dropSchema removes a scratch schema, also after a cancel: a fresh
// context, and a pooled connection rather than the workload's own, which
// go-sql-driver closes when a query is cancelled.
func dropSchema(db *sql.DB, schema string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	_, _ = db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+schema+"`")
}
