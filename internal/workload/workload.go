// Package workload holds the built-in workloads gapscope's labs and
// benchmarks run against a server: a thread-pool hog and its victim, a slow
// result reader, the canary of the concurrency-cap case, a mysqlslap-like
// concurrent mix and a sysbench oltp_read_write equivalent (or the real sysbench). Each is a
// function taking a context, a go-sql-driver DSN and an options struct and
// returning what it measured; all stop promptly when the context ends.
package workload

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"time"

	// The workloads talk to MySQL/MariaDB through database/sql.
	_ "github.com/go-sql-driver/mysql"
)

// Latency summarises a set of durations. Quantiles are exact (nearest
// rank) over all samples.
type Latency struct {
	Count                        int
	Min, Avg, P50, P95, P99, Max time.Duration
}

// Summarize computes a Latency; it sorts d in place.
func Summarize(d []time.Duration) Latency {
	if len(d) == 0 {
		return Latency{}
	}
	slices.Sort(d)
	var sum time.Duration
	for _, v := range d {
		sum += v
	}
	return Latency{Count: len(d), Min: d[0], Max: d[len(d)-1], Avg: sum / time.Duration(len(d)),
		P50: rank(d, 0.50), P95: rank(d, 0.95), P99: rank(d, 0.99)}
}

// rank returns the nearest-rank q-quantile of sorted d.
func rank(d []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(d))+0.999999) - 1
	return d[min(max(i, 0), len(d)-1)]
}

// open opens a pool for a workload and checks that the server answers.
func open(ctx context.Context, dsn string, conns int) (*sql.DB, error) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("workload: bad DSN: %w", err)
	}
	db.SetMaxOpenConns(conns + 4)
	db.SetMaxIdleConns(conns + 4)
	if err := db.PingContext(ctx); err != nil {
		db.Close()
		return nil, fmt.Errorf("workload: connecting: %w", err)
	}
	return db, nil
}

// connID returns the server's id of a pinned connection.
func connID(ctx context.Context, c *sql.Conn) (uint64, error) {
	var id uint64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		return 0, fmt.Errorf("workload: reading connection id: %w", err)
	}
	return id, nil
}

// Sleep waits d or until ctx ends; it reports whether the full wait elapsed.
func Sleep(ctx context.Context, d time.Duration) bool {
	if d <= 0 {
		return ctx.Err() == nil
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// stopped reports whether err only says the run was stopped by its context.
func stopped(ctx context.Context, err error) bool {
	return err != nil && ctx.Err() != nil
}
