package workload

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/go-sql-driver/mysql"
)

// Pinned is a connection whose id puts it in a known thread-pool group.
type Pinned struct {
	Conn  *sql.Conn
	ID    uint64
	Group int
}

// PoolSize reads @@thread_pool_size (0 when the server has no thread pool
// or does not use it).
func PoolSize(ctx context.Context, db *sql.DB) (int, error) {
	var handling string
	if err := db.QueryRowContext(ctx, "SELECT @@thread_handling").Scan(&handling); err != nil {
		return 0, fmt.Errorf("workload: reading thread_handling: %w", err)
	}
	if handling != "pool-of-threads" {
		return 0, nil
	}
	var size int
	if err := db.QueryRowContext(ctx, "SELECT @@thread_pool_size").Scan(&size); err != nil {
		return 0, fmt.Errorf("workload: reading thread_pool_size: %w", err)
	}
	return size, nil
}

// OpenInGroup opens connections until one lands in group (MariaDB assigns
// group = connection id mod thread_pool_size), closes the others and
// returns it. Connections the pool hands back are reused only when their
// id fits, so the loop ends after about size new connections.
func OpenInGroup(ctx context.Context, db *sql.DB, group, size int) (*Pinned, error) {
	if size <= 0 || group < 0 || group >= size {
		return nil, fmt.Errorf("workload: group %d outside a thread pool of size %d", group, size)
	}
	var spare []*sql.Conn
	defer func() {
		for _, c := range spare {
			discard(c)
		}
	}()
	for range 8*size + 8 {
		c, err := db.Conn(ctx)
		if err != nil {
			return nil, fmt.Errorf("workload: opening a connection: %w", err)
		}
		id, err := connID(ctx, c)
		if err != nil {
			c.Close()
			return nil, err
		}
		if int(id%uint64(size)) == group {
			return &Pinned{Conn: c, ID: id, Group: group}, nil
		}
		spare = append(spare, c)
	}
	return nil, fmt.Errorf("workload: no connection landed in thread-pool group %d of %d", group, size)
}

// discard closes a pinned connection for good: returned to the pool, it
// would come back from the next db.Conn with the same (wrong) id.
func discard(c *sql.Conn) {
	_ = c.Raw(func(any) error { return driver.ErrBadConn })
	_ = c.Close()
}

// isUnknownThread: KILL of a connection that already ended (ER_NO_SUCH_THREAD).
func isUnknownThread(err error) bool {
	var me *mysql.MySQLError
	return errors.As(err, &me) && me.Number == 1094
}

// HogOptions configure ThreadPoolHog.
type HogOptions struct {
	// Conns is how many CPU-bound connections to run (default 2).
	Conns int
	// Group is the thread-pool group to saturate.
	Group int
	// PoolSize is thread_pool_size; read from the server when 0.
	PoolSize int
	// Iterations of MD5 per BENCHMARK() call (default 5,000,000, a few
	// seconds here); each connection repeats the call until stopped.
	Iterations int64
	// AdminDSN is used to KILL the hog's queries on Stop; give the thread
	// pool's extra port (or another group) so the kill is not queued behind
	// the hog. Default: the main DSN, with a connection opened outside
	// Group before the hog starts.
	AdminDSN string
}

// Hog is a running ThreadPoolHog.
type Hog struct {
	ConnIDs []uint64
	Group   int

	cancel  context.CancelFunc
	wg      sync.WaitGroup
	db      *sql.DB
	admin   *sql.DB
	adminC  *sql.Conn
	mu      sync.Mutex
	queries int64
	ends    []time.Time
	err     error
	started time.Time
}

// HogResult is what a hog did.
type HogResult struct {
	ConnIDs []uint64
	Queries int64       // BENCHMARK() calls that completed
	Ends    []time.Time // when each completed
	Elapsed time.Duration
}

// ThreadPoolHog starts N connections in one thread-pool group, each running
// SELECT BENCHMARK(n, MD5('x')) in a loop: with thread_pool_oversubscribe
// small and stall_limit large, requests of other connections of that group
// wait in the pool's queue (the thread-pool case of docs/field-reports.md). Stop ends it.
func ThreadPoolHog(ctx context.Context, dsn string, opts HogOptions) (*Hog, error) {
	if opts.Conns <= 0 {
		opts.Conns = 2
	}
	if opts.Iterations <= 0 {
		opts.Iterations = 5_000_000
	}
	db, err := open(ctx, dsn, opts.Conns+1)
	if err != nil {
		return nil, err
	}
	h := &Hog{db: db, Group: opts.Group}
	if err := h.setup(ctx, opts); err != nil {
		h.close()
		return nil, err
	}
	return h, nil
}

func (h *Hog) setup(ctx context.Context, opts HogOptions) error {
	size := opts.PoolSize
	if size == 0 {
		var err error
		if size, err = PoolSize(ctx, h.db); err != nil {
			return err
		}
		if size == 0 {
			return errors.New("workload: the server does not use a thread pool (thread_handling is not pool-of-threads)")
		}
	}
	if err := h.openAdmin(ctx, opts, size); err != nil {
		return err
	}
	var pinned []*Pinned
	for range opts.Conns {
		p, err := OpenInGroup(ctx, h.db, opts.Group, size)
		if err != nil {
			for _, q := range pinned {
				q.Conn.Close()
			}
			return err
		}
		pinned = append(pinned, p)
		h.ConnIDs = append(h.ConnIDs, p.ID)
	}
	runCtx, cancel := context.WithCancel(context.Background())
	h.cancel, h.started = cancel, time.Now()
	query := "SELECT BENCHMARK(" + strconv.FormatInt(opts.Iterations, 10) + ", MD5('x'))"
	for _, p := range pinned {
		h.wg.Add(1)
		go h.loop(runCtx, p.Conn, query)
	}
	return nil
}

// openAdmin prepares the connection Stop kills the hog's queries from.
func (h *Hog) openAdmin(ctx context.Context, opts HogOptions, size int) error {
	if opts.AdminDSN != "" {
		db, err := open(ctx, opts.AdminDSN, 1)
		if err != nil {
			return err
		}
		h.admin = db
		c, err := db.Conn(ctx)
		if err != nil {
			return fmt.Errorf("workload: opening admin connection: %w", err)
		}
		h.adminC = c
		return nil
	}
	if size < 2 {
		return errors.New("workload: thread_pool_size 1: give HogOptions.AdminDSN (the extra port) so the hog can be stopped")
	}
	p, err := OpenInGroup(ctx, h.db, (opts.Group+1)%size, size)
	if err != nil {
		return err
	}
	h.adminC = p.Conn
	return nil
}

func (h *Hog) loop(ctx context.Context, c *sql.Conn, query string) {
	defer h.wg.Done()
	defer c.Close()
	for ctx.Err() == nil {
		var v int
		// Not ctx: a query the server finished just as Stop cancelled must
		// still count as ended (victims are checked against these ends);
		// Stop ends a running query with KILL QUERY instead.
		err := c.QueryRowContext(context.WithoutCancel(ctx), query).Scan(&v)
		h.mu.Lock()
		if err == nil {
			h.queries++
			h.ends = append(h.ends, time.Now())
		} else if ctx.Err() == nil && h.err == nil {
			h.err = fmt.Errorf("workload: hog query: %w", err)
		}
		h.mu.Unlock()
		if err != nil {
			return
		}
	}
}

// Stop kills the hog's running queries, waits for its connections to end
// and returns what it did.
func (h *Hog) Stop() (HogResult, error) {
	h.cancel()
	done := make(chan struct{})
	go func() { h.wg.Wait(); close(done) }()
	var killErr error
	// A loop may start one more query after the cancel: kill until all end.
	for stopped := false; !stopped; {
		killErr = h.killQueries()
		select {
		case <-done:
			stopped = true
		case <-time.After(200 * time.Millisecond):
		}
	}
	h.close()
	h.mu.Lock()
	defer h.mu.Unlock()
	res := HogResult{ConnIDs: h.ConnIDs, Queries: h.queries, Ends: h.ends, Elapsed: time.Since(h.started)}
	return res, errors.Join(h.err, killErr)
}

// killQueries ends the hog's running queries (an ended one is fine).
func (h *Hog) killQueries() error {
	var killErr error
	for _, id := range h.ConnIDs {
		if _, err := h.adminC.ExecContext(context.Background(), "KILL QUERY "+strconv.FormatUint(id, 10)); err != nil && !isUnknownThread(err) {
			killErr = fmt.Errorf("workload: stopping hog: %w", err)
		}
	}
	return killErr
}

func (h *Hog) close() {
	if h.adminC != nil {
		h.adminC.Close()
	}
	if h.admin != nil {
		h.admin.Close()
	}
	h.db.Close()
}

// VictimOptions configure a Victim.
type VictimOptions struct {
	Group    int
	PoolSize int    // read from the server when 0
	Query    string // default "SELECT 1"
}

// Victim is a connection in a chosen thread-pool group whose statements
// are timed from the client. Open it before the hog starts: opening a
// connection in a saturated group waits too.
type Victim struct {
	ID    uint64
	Group int
	db    *sql.DB
	conn  *sql.Conn
	query string
}

// NewVictim opens the victim's connection.
func NewVictim(ctx context.Context, dsn string, opts VictimOptions) (*Victim, error) {
	if opts.Query == "" {
		opts.Query = "SELECT 1"
	}
	db, err := open(ctx, dsn, 1)
	if err != nil {
		return nil, err
	}
	size := opts.PoolSize
	if size == 0 {
		if size, err = PoolSize(ctx, db); err == nil && size == 0 {
			err = errors.New("workload: the server does not use a thread pool")
		}
		if err != nil {
			db.Close()
			return nil, err
		}
	}
	p, err := OpenInGroup(ctx, db, opts.Group, size)
	if err != nil {
		db.Close()
		return nil, err
	}
	return &Victim{ID: p.ID, Group: p.Group, db: db, conn: p.Conn, query: opts.Query}, nil
}

// VictimRun is one timed statement.
type VictimRun struct {
	Start, End time.Time
}

// Latency is the client-seen time of the statement.
func (r VictimRun) Latency() time.Duration { return r.End.Sub(r.Start) }

// Run executes the victim's query once and times it from the client.
func (v *Victim) Run(ctx context.Context) (VictimRun, error) {
	start := time.Now()
	rows, err := v.conn.QueryContext(ctx, v.query)
	if err == nil {
		for rows.Next() {
		}
		err = rows.Close()
	}
	if err != nil {
		return VictimRun{}, fmt.Errorf("workload: victim query: %w", err)
	}
	return VictimRun{Start: start, End: time.Now()}, nil
}

// Close closes the victim's connection.
func (v *Victim) Close() error {
	v.conn.Close()
	return v.db.Close()
}
