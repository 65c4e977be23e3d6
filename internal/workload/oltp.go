package workload

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// OLTPOptions configure OLTP: sysbench oltp_read_write's parameters and
// defaults.
type OLTPOptions struct {
	Schema    string // default "sbtest"
	Tables    int    // default 1
	TableSize int    // rows per table, default 10,000
	Threads   int    // default 1
	// Duration and Events (transactions in all) bound the run; at least
	// one must be set.
	Duration time.Duration
	Events   int64

	PointSelects, SimpleRanges, SumRanges, OrderRanges, DistinctRanges int // default 10,1,1,1,1
	IndexUpdates, NonIndexUpdates, DeleteInserts                       int // default 1,1,1
	RangeSize                                                          int // default 100
	// SkipTrx runs the statements in autocommit instead of BEGIN/COMMIT.
	SkipTrx bool
	// Rate caps the transactions per second (sysbench --rate; 0: as fast
	// as the server goes). Only the sysbench driver honours it.
	Rate int
	// Seed makes the random choices repeatable (0: time-based).
	Seed uint64
}

func (o *OLTPOptions) defaults() {
	if o.Schema == "" {
		o.Schema = "sbtest"
	}
	o.Tables, o.TableSize, o.Threads = max(o.Tables, 1), max(o.TableSize, 0), max(o.Threads, 1)
	if o.TableSize == 0 {
		o.TableSize = 10_000
	}
	if o.PointSelects == 0 && o.SimpleRanges == 0 && o.SumRanges == 0 && o.OrderRanges == 0 && o.DistinctRanges == 0 &&
		o.IndexUpdates == 0 && o.NonIndexUpdates == 0 && o.DeleteInserts == 0 {
		o.PointSelects, o.SimpleRanges, o.SumRanges, o.OrderRanges, o.DistinctRanges = 10, 1, 1, 1, 1
		o.IndexUpdates, o.NonIndexUpdates, o.DeleteInserts = 1, 1, 1
	}
	if o.RangeSize <= 0 {
		o.RangeSize = 100
	}
}

// OLTPResult is what an OLTP run measured, in sysbench's terms.
type OLTPResult struct {
	Transactions, Queries, Reads, Writes, Other, Errors int64
	Elapsed                                             time.Duration
	TPS, QPS                                            float64
	Latency                                             Latency // per transaction
	// Driver is "builtin" or "sysbench".
	Driver string
}

func (r *OLTPResult) rates() {
	if s := r.Elapsed.Seconds(); s > 0 {
		r.TPS, r.QPS = float64(r.Transactions)/s, float64(r.Queries)/s
	}
}

// OLTPPrepare creates Tables sbtestN tables of TableSize rows with
// sysbench's schema and data shape (the secondary index is added after
// the load, as sysbench does).
func OLTPPrepare(ctx context.Context, dsn string, opts OLTPOptions) error {
	opts.defaults()
	if !schemaName.MatchString(opts.Schema) {
		return fmt.Errorf("workload: bad schema name %q", opts.Schema)
	}
	db, err := open(ctx, dsn, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE DATABASE IF NOT EXISTS `"+opts.Schema+"`"); err != nil {
		return fmt.Errorf("workload: creating schema: %w", err)
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 1))
	for t := 1; t <= opts.Tables; t++ {
		if err := prepareTable(ctx, db, opts, t, rng); err != nil {
			return err
		}
	}
	return nil
}

func prepareTable(ctx context.Context, db *sql.DB, opts OLTPOptions, n int, rng *rand.Rand) error {
	table := tableName(opts.Schema, n)
	for _, s := range []string{"DROP TABLE IF EXISTS " + table,
		"CREATE TABLE " + table + " (id INTEGER NOT NULL AUTO_INCREMENT, k INTEGER DEFAULT '0' NOT NULL, " +
			"c CHAR(120) DEFAULT '' NOT NULL, pad CHAR(60) DEFAULT '' NOT NULL, PRIMARY KEY (id)) ENGINE=InnoDB"} {
		if _, err := db.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("workload: creating %s: %w", table, err)
		}
	}
	err := bulkInsert(ctx, db, table, "(id, k, c, pad)", opts.TableSize, func(b *strings.Builder, i int) {
		fmt.Fprintf(b, "(%d, %d, '%s', '%s')", i, 1+rng.IntN(opts.TableSize), digits(rng, 10), digits(rng, 5))
	})
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE INDEX k_"+strconv.Itoa(n)+" ON "+table+" (k)"); err != nil {
		return fmt.Errorf("workload: indexing %s: %w", table, err)
	}
	return nil
}

// OLTPCleanup drops the schema OLTPPrepare filled.
func OLTPCleanup(ctx context.Context, dsn string, opts OLTPOptions) error {
	opts.defaults()
	if !schemaName.MatchString(opts.Schema) {
		return fmt.Errorf("workload: bad schema name %q", opts.Schema)
	}
	db, err := open(ctx, dsn, 1)
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "DROP DATABASE IF EXISTS `"+opts.Schema+"`"); err != nil {
		return fmt.Errorf("workload: dropping %s: %w", opts.Schema, err)
	}
	return nil
}

func tableName(schema string, n int) string {
	return "`" + schema + "`.sbtest" + strconv.Itoa(n)
}

// digits returns sysbench's c/pad shape: groups of 11 digits joined by
// '-' (10 groups for c, 119 chars; 5 for pad, 59 chars).
func digits(rng *rand.Rand, groups int) string {
	var b strings.Builder
	for g := range groups {
		if g > 0 {
			b.WriteByte('-')
		}
		for range 11 {
			b.WriteByte(byte('0' + rng.IntN(10)))
		}
	}
	return b.String()
}

// OLTP runs the sysbench oltp_read_write transaction mix with Threads
// connections on tables made by OLTPPrepare, using server-side prepared
// statements as sysbench does. Deadlocks and lock wait timeouts roll the
// transaction back and count as errors (sysbench ignores and retries them).
func OLTP(ctx context.Context, dsn string, opts OLTPOptions) (OLTPResult, error) {
	opts.defaults()
	if opts.Duration <= 0 && opts.Events <= 0 {
		return OLTPResult{}, errors.New("workload: OLTP needs a Duration or Events")
	}
	db, err := open(ctx, dsn, opts.Threads)
	if err != nil {
		return OLTPResult{}, err
	}
	defer db.Close()
	runCtx := ctx
	if opts.Duration > 0 {
		var cancel context.CancelFunc
		runCtx, cancel = context.WithTimeout(ctx, opts.Duration)
		defer cancel()
	}
	res := OLTPResult{Driver: "builtin"}
	var mu sync.Mutex
	var lat []time.Duration
	var wg sync.WaitGroup
	var budget = newBudget(opts.Events)
	var firstErr error
	start := time.Now()
	for w := range opts.Threads {
		wg.Add(1)
		go func() {
			defer wg.Done()
			wr := newOLTPWorker(opts, uint64(w))
			err := wr.run(runCtx, db, budget)
			mu.Lock()
			defer mu.Unlock()
			res.add(&wr.res)
			lat = append(lat, wr.lat...)
			if err != nil && firstErr == nil {
				firstErr = err
			}
		}()
	}
	wg.Wait()
	res.Elapsed = time.Since(start)
	res.rates()
	res.Latency = Summarize(lat)
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return res, firstErr
}

func (r *OLTPResult) add(o *OLTPResult) {
	r.Transactions += o.Transactions
	r.Queries += o.Queries
	r.Reads += o.Reads
	r.Writes += o.Writes
	r.Other += o.Other
	r.Errors += o.Errors
}

// budget hands out transactions when the run is bounded by Events.
type budget struct {
	mu   sync.Mutex
	left int64 // -1: unbounded
}

func newBudget(events int64) *budget {
	if events <= 0 {
		return &budget{left: -1}
	}
	return &budget{left: events}
}

func (b *budget) take() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.left < 0 {
		return true
	}
	if b.left == 0 {
		return false
	}
	b.left--
	return true
}

// oltpWorker is one sysbench thread: its connection, prepared statements
// and counters.
type oltpWorker struct {
	opts  OLTPOptions
	rng   *rand.Rand
	stmts map[string]*sql.Stmt
	res   OLTPResult
	lat   []time.Duration
}

func newOLTPWorker(opts OLTPOptions, id uint64) *oltpWorker {
	seed := opts.Seed
	if seed == 0 {
		seed = uint64(time.Now().UnixNano())
	}
	return &oltpWorker{opts: opts, rng: rand.New(rand.NewPCG(seed, id+1)), stmts: map[string]*sql.Stmt{}}
}

func (w *oltpWorker) run(ctx context.Context, db *sql.DB, b *budget) error {
	c, err := db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("workload: opening a connection: %w", err)
	}
	defer c.Close()
	defer func() {
		for _, s := range w.stmts {
			s.Close()
		}
	}()
	for ctx.Err() == nil && b.take() {
		t0 := time.Now()
		err := w.transaction(ctx, c)
		switch {
		case stopped(ctx, err):
			return nil
		case retryable(err):
			w.res.Errors++
			c.ExecContext(ctx, "ROLLBACK")
			continue
		case err != nil:
			return err
		}
		w.res.Transactions++
		w.lat = append(w.lat, time.Since(t0))
	}
	return nil
}

// retryable: deadlock or lock wait timeout, which sysbench ignores.
func retryable(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && (me.Number == 1213 || me.Number == 1205)
}

// transaction runs one oltp_read_write event.
func (w *oltpWorker) transaction(ctx context.Context, c *sql.Conn) error {
	o := &w.opts
	if !o.SkipTrx {
		if err := w.other(ctx, c, "BEGIN"); err != nil {
			return err
		}
	}
	steps := []struct {
		n int
		f func(context.Context, *sql.Conn) error
	}{
		{o.PointSelects, w.pointSelect}, {o.SimpleRanges, w.rangeQuery("SELECT c FROM %s WHERE id BETWEEN ? AND ?")},
		{o.SumRanges, w.rangeQuery("SELECT SUM(k) FROM %s WHERE id BETWEEN ? AND ?")},
		{o.OrderRanges, w.rangeQuery("SELECT c FROM %s WHERE id BETWEEN ? AND ? ORDER BY c")},
		{o.DistinctRanges, w.rangeQuery("SELECT DISTINCT c FROM %s WHERE id BETWEEN ? AND ? ORDER BY c")},
		{o.IndexUpdates, w.indexUpdate}, {o.NonIndexUpdates, w.nonIndexUpdate}, {o.DeleteInserts, w.deleteInsert},
	}
	for _, st := range steps {
		for range st.n {
			if err := st.f(ctx, c); err != nil {
				return err
			}
		}
	}
	if !o.SkipTrx {
		return w.other(ctx, c, "COMMIT")
	}
	return nil
}

func (w *oltpWorker) other(ctx context.Context, c *sql.Conn, q string) error {
	if _, err := c.ExecContext(ctx, q); err != nil {
		return err
	}
	w.res.Other++
	w.res.Queries++
	return nil
}

// table returns a random table of the run, as sysbench picks one per query.
func (w *oltpWorker) table() string { return tableName(w.opts.Schema, 1+w.rng.IntN(w.opts.Tables)) }

// stmt returns the worker's prepared statement for q, preparing it once.
func (w *oltpWorker) stmt(ctx context.Context, c *sql.Conn, q string) (*sql.Stmt, error) {
	if s := w.stmts[q]; s != nil {
		return s, nil
	}
	s, err := c.PrepareContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("workload: preparing %s: %w", q, err)
	}
	w.stmts[q] = s
	return s, nil
}

func (w *oltpWorker) id() int { return 1 + w.rng.IntN(w.opts.TableSize) }

func (w *oltpWorker) read(ctx context.Context, c *sql.Conn, q string, args ...any) error {
	s, err := w.stmt(ctx, c, q)
	if err != nil {
		return err
	}
	if err := drain(s.QueryContext(ctx, args...)); err != nil {
		return err
	}
	w.res.Reads++
	w.res.Queries++
	return nil
}

func (w *oltpWorker) write(ctx context.Context, c *sql.Conn, q string, args ...any) error {
	s, err := w.stmt(ctx, c, q)
	if err != nil {
		return err
	}
	if _, err := s.ExecContext(ctx, args...); err != nil {
		return err
	}
	w.res.Writes++
	w.res.Queries++
	return nil
}

func (w *oltpWorker) pointSelect(ctx context.Context, c *sql.Conn) error {
	return w.read(ctx, c, "SELECT c FROM "+w.table()+" WHERE id = ?", w.id())
}

// rangeQuery returns a step running format (with %s for the table) over
// RangeSize consecutive ids.
func (w *oltpWorker) rangeQuery(format string) func(context.Context, *sql.Conn) error {
	return func(ctx context.Context, c *sql.Conn) error {
		lo := w.id()
		return w.read(ctx, c, fmt.Sprintf(format, w.table()), lo, lo+w.opts.RangeSize-1)
	}
}

func (w *oltpWorker) indexUpdate(ctx context.Context, c *sql.Conn) error {
	return w.write(ctx, c, "UPDATE "+w.table()+" SET k = k + 1 WHERE id = ?", w.id())
}

func (w *oltpWorker) nonIndexUpdate(ctx context.Context, c *sql.Conn) error {
	return w.write(ctx, c, "UPDATE "+w.table()+" SET c = ? WHERE id = ?", digits(w.rng, 10), w.id())
}

// deleteInsert deletes a row and puts it back, keeping the table's size
// (both on the same table, as sysbench does).
func (w *oltpWorker) deleteInsert(ctx context.Context, c *sql.Conn) error {
	table, id := w.table(), w.id()
	if err := w.write(ctx, c, "DELETE FROM "+table+" WHERE id = ?", id); err != nil {
		return err
	}
	return w.write(ctx, c, "INSERT INTO "+table+" (id, k, c, pad) VALUES (?, ?, ?, ?)", id, w.id(), digits(w.rng, 10), digits(w.rng, 5))
}
