// Command connhold opens many client connections to a MySQL/MariaDB server,
// runs one statement on each, keeps them all open and idle, then runs a
// light query load on a few of them, and holds everything open until it is
// told to stop. scripts/bench-watch.sh uses it to measure what `gapscope
// watch` costs in memory with 10k connections tracked (issue 4).
//
//	go run ./testdata/gen/connhold -dsn 'root@tcp(127.0.0.1:3307)/' -conns 10000 \
//	    -idle 5s -active 200 -qps 1000 -load 10s
//
// It prints one line per phase on stdout; the last one, "connhold: holding",
// means the load is over and every connection is still open. It then waits
// for SIGINT/SIGTERM (or -hold) and closes them. Any connection that fails
// to open fails the run (exit 1): a benchmark of "10k connections" must
// have them all. The process raises its own open-files limit to the hard
// limit (the Go runtime does this); the server needs max_connections and
// open_files_limit above -conns.
//
// It lives under testdata so that `go build ./...` ignores it.
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-sql-driver/mysql"
)

// config is what the command line chooses.
type config struct {
	dsn      string
	conns    int
	parallel int
	idle     time.Duration
	active   int
	qps      int
	load     time.Duration
	hold     time.Duration
}

func main() {
	cfg, err := parseFlags(os.Args[1:])
	if err != nil {
		fmt.Fprintln(os.Stderr, "connhold:", err)
		os.Exit(2)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if err := run(ctx, cfg); err != nil {
		fmt.Fprintln(os.Stderr, "connhold:", err)
		os.Exit(1)
	}
}

func parseFlags(args []string) (config, error) {
	var c config
	fs := flag.NewFlagSet("connhold", flag.ContinueOnError)
	fs.StringVar(&c.dsn, "dsn", "", "server: user[:pass]@tcp(host:port)/ (go-sql-driver form)")
	fs.IntVar(&c.conns, "conns", 10000, "connections to open and hold")
	fs.IntVar(&c.parallel, "parallel", 32, "connections opened at once")
	fs.DurationVar(&c.idle, "idle", 5*time.Second, "how long all connections stay idle before the load")
	fs.IntVar(&c.active, "active", 200, "connections that run the light load")
	fs.IntVar(&c.qps, "qps", 1000, "statements per second of the light load, over all active connections")
	fs.DurationVar(&c.load, "load", 10*time.Second, "how long the light load runs")
	fs.DurationVar(&c.hold, "hold", 0, "how long to hold the connections after the load (0: until SIGINT/SIGTERM)")
	if err := fs.Parse(args); err != nil {
		return c, err
	}
	switch {
	case c.dsn == "":
		return c, errors.New("-dsn is required")
	case c.conns <= 0 || c.parallel <= 0:
		return c, errors.New("-conns and -parallel must be positive")
	case c.active < 0 || c.active > c.conns:
		return c, fmt.Errorf("-active must be between 0 and -conns (%d)", c.conns)
	case c.active > 0 && c.qps <= 0:
		return c, errors.New("-qps must be positive when -active is")
	}
	return c, nil
}

func run(ctx context.Context, cfg config) error {
	db, err := openDB(cfg.dsn)
	if err != nil {
		return err
	}
	defer db.Close()
	started := time.Now()
	conns, err := openAll(ctx, db, cfg)
	defer closeAll(conns)
	if err != nil {
		return err
	}
	fmt.Printf("connhold: opened %d connections in %.1fs, one statement each\n", len(conns), time.Since(started).Seconds())
	if err := reportServer(ctx, conns[0]); err != nil {
		return err
	}
	if !sleep(ctx, cfg.idle) {
		return nil
	}
	fmt.Printf("connhold: idle %s done\n", cfg.idle)
	n, errs := runLoad(ctx, conns[:cfg.active], cfg)
	fmt.Printf("connhold: load ran %d statements on %d connections in %s (%.0f/s), %d errors\n",
		n, cfg.active, cfg.load, float64(n)/cfg.load.Seconds(), errs)
	fmt.Printf("connhold: holding %d connections\n", len(conns))
	if cfg.hold > 0 {
		sleep(ctx, cfg.hold)
	} else {
		<-ctx.Done()
	}
	return nil
}

// openDB makes a pool that never closes what it hands out: every
// connection is taken with db.Conn and kept.
func openDB(dsn string) (*sql.DB, error) {
	mc, err := mysql.ParseDSN(dsn)
	if err != nil {
		return nil, fmt.Errorf("parsing -dsn: %w", err)
	}
	mc.Timeout = 30 * time.Second
	connector, err := mysql.NewConnector(mc)
	if err != nil {
		return nil, fmt.Errorf("parsing -dsn: %w", err)
	}
	db := sql.OpenDB(connector)
	db.SetMaxOpenConns(0)
	db.SetMaxIdleConns(0)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	return db, nil
}

// openAll opens cfg.conns connections, cfg.parallel at a time, and runs
// one statement on each (so that each is a real, used session). It returns
// what it opened even on error, for closing.
func openAll(ctx context.Context, db *sql.DB, cfg config) ([]*sql.Conn, error) {
	conns := make([]*sql.Conn, cfg.conns)
	var next atomic.Int64
	var firstErr error
	var mu sync.Mutex
	var wg sync.WaitGroup
	for range cfg.parallel {
		wg.Go(func() {
			for i := int(next.Add(1) - 1); i < cfg.conns; i = int(next.Add(1) - 1) {
				c, err := openOne(ctx, db)
				if err != nil {
					mu.Lock()
					firstErr = firstOf(firstErr, fmt.Errorf("opening connection %d of %d: %w", i+1, cfg.conns, err))
					mu.Unlock()
					return
				}
				conns[i] = c
			}
		})
	}
	wg.Wait()
	opened := conns[:0]
	for _, c := range conns {
		if c != nil {
			opened = append(opened, c)
		}
	}
	return opened, firstErr
}

func firstOf(old, next error) error {
	if old != nil {
		return old
	}
	return next
}

func openOne(ctx context.Context, db *sql.DB) (*sql.Conn, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var one int
	if err := c.QueryRowContext(ctx, "SELECT 1").Scan(&one); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

func closeAll(conns []*sql.Conn) {
	for _, c := range conns {
		c.Close()
	}
}

// reportServer prints the server's own count of connections, so the log
// shows the server really holds them.
func reportServer(ctx context.Context, c *sql.Conn) error {
	var name string
	var threads int
	if err := c.QueryRowContext(ctx, "SHOW GLOBAL STATUS LIKE 'Threads_connected'").Scan(&name, &threads); err != nil {
		return fmt.Errorf("reading Threads_connected: %w", err)
	}
	fmt.Printf("connhold: server Threads_connected=%d\n", threads)
	return nil
}

// runLoad runs `SELECT 1` on each active connection at qps/active per
// second for cfg.load; it returns the statements run and the errors.
func runLoad(ctx context.Context, active []*sql.Conn, cfg config) (int64, int64) {
	if len(active) == 0 {
		return 0, 0
	}
	ctx, cancel := context.WithTimeout(ctx, cfg.load)
	defer cancel()
	every := time.Duration(float64(time.Second) * float64(len(active)) / float64(cfg.qps))
	var done, failed atomic.Int64
	var wg sync.WaitGroup
	for _, c := range active {
		wg.Go(func() {
			t := time.NewTicker(every)
			defer t.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-t.C:
				}
				var one int
				if err := c.QueryRowContext(context.Background(), "SELECT 1").Scan(&one); err != nil {
					failed.Add(1)
					continue
				}
				done.Add(1)
			}
		})
	}
	wg.Wait()
	return done.Load(), failed.Load()
}

// sleep waits d or until ctx ends; false when ctx ended.
func sleep(ctx context.Context, d time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(d):
		return true
	}
}
