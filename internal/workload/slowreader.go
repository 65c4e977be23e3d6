package workload

import (
	"context"
	"database/sql"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// SlowReaderOptions configure SlowReader.
type SlowReaderOptions struct {
	// Rows in the result (default 100,000).
	Rows int
	// RowBytes is the width of the text column of each row (default 100).
	RowBytes int
	// Delay is how long the client sleeps after the result starts arriving
	// and before it reads the first row (default 3 s).
	Delay time.Duration
}

// SlowReaderResult is what the slow reader saw, timed at the client.
type SlowReaderResult struct {
	ConnID uint64
	Rows   int64
	Bytes  int64 // payload bytes read (both columns as text)
	// FirstResponse is from sending the query to having the result's
	// column definitions (go-sql-driver returns from Query there).
	FirstResponse time.Duration
	Slept         time.Duration
	// Drain is from waking up to having read the last row.
	Drain time.Duration
	Total time.Duration
	Query string
}

// SlowReader runs a SELECT returning Rows rows and sleeps Delay before it
// reads them (the slow-client case of docs/field-reports.md): the server fills the socket buffers, then blocks
// on a closed receive window, and its statement time grows by the sleep.
// go-sql-driver reads rows lazily, so sleeping before the first rows.Next
// leaves everything past the first packets in the kernel and the server.
func SlowReader(ctx context.Context, dsn string, opts SlowReaderOptions) (SlowReaderResult, error) {
	if opts.Rows <= 0 {
		opts.Rows = 100_000
	}
	if opts.RowBytes <= 0 {
		opts.RowBytes = 100
	}
	if opts.Delay == 0 {
		opts.Delay = 3 * time.Second
	}
	db, err := open(ctx, dsn, 1)
	if err != nil {
		return SlowReaderResult{}, err
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return SlowReaderResult{}, fmt.Errorf("workload: opening a connection: %w", err)
	}
	defer c.Close()
	res := SlowReaderResult{Query: slowQuery(opts.Rows, opts.RowBytes)}
	if res.ConnID, err = connID(ctx, c); err != nil {
		return res, err
	}
	var version string
	if err := c.QueryRowContext(ctx, "SELECT VERSION()").Scan(&version); err != nil {
		return res, fmt.Errorf("workload: reading the server's version: %w", err)
	}
	if _, err := c.ExecContext(ctx, recursionLimitStatement(version, opts.Rows+1)); err != nil {
		return res, fmt.Errorf("workload: raising the recursive CTE limit: %w", err)
	}
	return res, readSlowly(ctx, c, opts.Delay, &res)
}

// recursionLimitStatement raises the cap on recursive CTE iterations (1000
// by default) to limit with the variable the server has: MariaDB's
// max_recursive_iterations (measured on 10.11: 1001 rows), MySQL 8's
// cte_max_recursion_depth. Trying both would send the wire an error that
// watch counts as the application's.
func recursionLimitStatement(version string, limit int) string {
	if strings.Contains(strings.ToLower(version), "mariadb") {
		return "SET SESSION max_recursive_iterations = " + strconv.Itoa(limit)
	}
	return "SET SESSION cte_max_recursion_depth = " + strconv.Itoa(limit)
}

// slowQuery generates n rows of a sequence number and a w-byte string.
func slowQuery(n, w int) string {
	return "WITH RECURSIVE seq(n) AS (SELECT 1 UNION ALL SELECT n + 1 FROM seq WHERE n < " + strconv.Itoa(n) +
		") SELECT n, REPEAT('x', " + strconv.Itoa(w) + ") FROM seq"
}

func readSlowly(ctx context.Context, c *sql.Conn, delay time.Duration, res *SlowReaderResult) error {
	start := time.Now()
	rows, err := c.QueryContext(ctx, res.Query)
	if err != nil {
		return fmt.Errorf("workload: slow reader query: %w", err)
	}
	defer rows.Close()
	res.FirstResponse = time.Since(start)
	if !Sleep(ctx, delay) {
		return ctx.Err()
	}
	woke := time.Now()
	res.Slept = woke.Sub(start) - res.FirstResponse
	var n, s sql.RawBytes
	for rows.Next() {
		if err := rows.Scan(&n, &s); err != nil {
			return fmt.Errorf("workload: slow reader scan: %w", err)
		}
		res.Rows++
		res.Bytes += int64(len(n) + len(s))
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("workload: slow reader rows: %w", err)
	}
	end := time.Now()
	res.Drain, res.Total = end.Sub(woke), end.Sub(start)
	return nil
}
