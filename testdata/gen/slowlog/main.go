// Command slowlog generates real MariaDB slow logs from a private sandbox:
// slow_query_log=1, long_query_time=0, a small sysbench oltp_read_write run,
// then statements chosen to exercise the parser (errors, multi-line text,
// comments, quotes, schema switches, a server restart that writes a banner
// mid-file). It copies the log to -out and writes a sidecar -out.expect with
// the event count and total Query_time computed by awk, independently of the
// gapscope parser, so tests can assert both exactly.
//
// -lock-wait adds a real row-lock wait: one connection locks a row
// (SELECT ... FOR UPDATE in a transaction) and holds it -hold long, idle,
// while a second one updates the same row and waits; then, after the
// restart (whose buffer pool starts cold), a full scan that reads its
// pages from disk. With log_slow_verbosity=engine MariaDB 10.11 logs the
// engine's Pages_* and Engine_time lines; it has no row-lock wait field.
//
//	go run ./testdata/gen/slowlog -out testdata/slowlogs/mariadb-10.11-sysbench.log
//	go run ./testdata/gen/slowlog -out testdata/slowlogs/mariadb-10.11-engine.log \
//	    -verbosity query_plan,explain,engine -events 4 -lock-wait
//	go run ./testdata/gen/slowlog -out /tmp/big.log -events 12000 -verbosity '' -extras=false
//	go run ./testdata/gen/slowlog -expect-only testdata/slowlogs/mysql-5.7.log ...
//
// -expect-only writes the sidecar for hand-written logs (well-formed ones:
// malformed.log's sidecar is counted by hand).
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
)

type config struct {
	out       string
	events    int
	threads   int
	verbosity string
	extras    bool
	restart   bool
	noExpect  bool
	lockWait  bool
	hold      time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.out, "out", "", "where to write the slow log (required)")
	flag.IntVar(&c.events, "events", 30, "sysbench oltp_read_write transactions")
	flag.IntVar(&c.threads, "threads", 2, "sysbench threads")
	flag.StringVar(&c.verbosity, "verbosity", "query_plan,explain", "log_slow_verbosity")
	flag.BoolVar(&c.extras, "extras", true, "run the parser-exercising statements")
	flag.BoolVar(&c.restart, "restart", true, "restart the server mid-log (writes a banner)")
	flag.BoolVar(&c.noExpect, "no-expect", false, "do not write the .expect sidecar")
	flag.BoolVar(&c.lockWait, "lock-wait", false, "add a row-lock wait and, after the restart, a cold full scan")
	flag.DurationVar(&c.hold, "hold", 300*time.Millisecond, "how long -lock-wait's holder keeps the row locked")
	expectOnly := flag.Bool("expect-only", false, "only write .expect sidecars for the logs named as arguments")
	flag.Parse()
	if *expectOnly {
		for _, log := range flag.Args() {
			if err := writeExpect(log); err != nil {
				fmt.Fprintln(os.Stderr, "slowlog:", err)
				os.Exit(1)
			}
		}
		return
	}
	if c.out == "" {
		fmt.Fprintln(os.Stderr, "usage: slowlog -out FILE [-events N] [-verbosity V] [-extras=false]")
		os.Exit(2)
	}
	if err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "slowlog:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, c config) error {
	dir, err := os.MkdirTemp("", "gapscope-slowgen-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	logPath := filepath.Join(dir, "slow.log")
	opts := sandbox.Options{Dir: dir, ServerArgs: []string{
		"--slow-query-log=1", "--slow-query-log-file=" + logPath, "--long-query-time=0",
		"--log-slow-verbosity=" + c.verbosity, "--log-slow-admin-statements=ON",
		// A restart starts with a cold buffer pool: the first reads after
		// it go to disk (Pages_read, Pages_read_time).
		"--innodb-buffer-pool-load-at-startup=OFF",
	}}
	inst, err := sandbox.Start(ctx, opts)
	if err != nil {
		return err
	}
	defer inst.Stop()
	if err := workload(ctx, inst, c, opts); err != nil {
		return err
	}
	// Stopped before the copy: the server writes a statement's entry after
	// its answer, so a copy of a running server's log may miss the last.
	inst.Stop()
	if err := copyFile(logPath, c.out); err != nil {
		return err
	}
	if c.noExpect {
		return nil
	}
	return writeExpect(c.out)
}

func workload(ctx context.Context, inst *sandbox.Instance, c config, opts sandbox.Options) error {
	db, err := inst.Open("")
	if err != nil {
		return err
	}
	if _, err := db.ExecContext(ctx, "CREATE DATABASE sbtest"); err != nil {
		db.Close()
		return err
	}
	db.Close()
	if err := sysbench(ctx, inst, c, "prepare"); err != nil {
		return err
	}
	if err := sysbench(ctx, inst, c, "run"); err != nil {
		return err
	}
	if c.extras {
		if err := extras(ctx, inst); err != nil {
			return err
		}
	}
	if c.lockWait {
		if err := lockWait(ctx, inst, c.hold); err != nil {
			return err
		}
	}
	if c.restart {
		if err := inst.Restart(ctx, opts); err != nil {
			return fmt.Errorf("restarting sandbox: %w", err)
		}
		if c.extras {
			if err := afterRestart(ctx, inst); err != nil {
				return err
			}
		}
		if c.lockWait {
			return coldScan(ctx, inst)
		}
	}
	return nil
}

func sysbench(ctx context.Context, inst *sandbox.Instance, c config, phase string) error {
	args := []string{"oltp_read_write", "--db-driver=mysql", "--mysql-host=127.0.0.1",
		"--mysql-port=" + strconv.Itoa(inst.Port), "--mysql-user=root", "--mysql-db=sbtest",
		"--tables=1", "--table-size=1000", "--threads=" + strconv.Itoa(c.threads),
		"--events=" + strconv.Itoa(c.events), "--time=0", phase}
	cmd := exec.CommandContext(ctx, "sysbench", args...)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("sysbench %s: %w\n%s", phase, err, out)
	}
	return nil
}

// extras are statements the parser must get right; each error is expected
// where the statement is meant to fail, and the server logs it either way.
var extraStatements = []struct {
	sql     string
	wantErr bool
}{
	{"CREATE TABLE sbtest.t2 (id INT PRIMARY KEY, note TEXT)", false},
	{"INSERT INTO sbtest.t2 VALUES (1, 'a'), (2, 'b'), (3, 'line one\nline two\n# not a header\n')", false},
	{"INSERT INTO sbtest.t2 VALUES (1, 'duplicate')", true},
	{"SELEKT broken syntax", true},
	{"SELECT *\n  FROM sbtest.t2\n WHERE id IN (1, 2, 3)\n ORDER BY id", false},
	{"/* leading comment */ SELECT COUNT(*) FROM sbtest.sbtest1 WHERE k > 0", false},
	{"SELECT 'it''s', \"dq\", `id` FROM sbtest.t2 WHERE note LIKE '%;%'", false},
	{"SELECT id FROM sbtest.t2 WHERE note = 'use mysql;'", false},
	{"SELECT * FROM no_such_table", true},
	{"SELECT SLEEP(0.2)", false},
	{"UPDATE sbtest.t2 SET note = CONCAT(note, ';\nSET timestamp=1;') WHERE id = 2", false},
}

func extras(ctx context.Context, inst *sandbox.Instance) error {
	db, err := inst.Open("sbtest")
	if err != nil {
		return err
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	for _, s := range extraStatements {
		_, err := conn.ExecContext(ctx, s.sql)
		if (err != nil) != s.wantErr {
			return fmt.Errorf("%q: error %v, expected error: %v", s.sql, err, s.wantErr)
		}
	}
	// A schema switch on the same connection makes the server log "use".
	if _, err := conn.ExecContext(ctx, "USE mysql"); err != nil {
		return err
	}
	_, err = conn.ExecContext(ctx, "SELECT COUNT(*) FROM user")
	return err
}

func afterRestart(ctx context.Context, inst *sandbox.Instance) error {
	db, err := inst.Open("sbtest")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "SELECT c FROM sbtest1 WHERE id = 7"); err != nil {
		return err
	}
	time.Sleep(10 * time.Millisecond)
	return nil
}

// lockWait makes a real row-lock wait: the holder locks row 1 of
// sbtest.hot in a transaction and keeps it hold long without a statement
// running (an application holding its transaction open); the waiter,
// started once the lock is taken, updates the same row and waits for the
// holder's COMMIT. The waiter's time is checked from the client: a wait
// shorter than half of hold means the workload did not do what it is for.
func lockWait(ctx context.Context, inst *sandbox.Instance, hold time.Duration) error {
	db, err := inst.Open("sbtest")
	if err != nil {
		return err
	}
	defer db.Close()
	if _, err := db.ExecContext(ctx, "CREATE TABLE hot (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB"); err != nil {
		return err
	}
	// 50000 rows: a few hundred pages, for the cold scan after the restart.
	if _, err := db.ExecContext(ctx, "INSERT INTO hot SELECT seq, seq FROM seq_1_to_50000"); err != nil {
		return err
	}
	holder, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer holder.Close()
	waiter, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer waiter.Close()
	tx, err := holder.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	var v int
	if err := tx.QueryRowContext(ctx, "SELECT v FROM hot WHERE id = 1 FOR UPDATE").Scan(&v); err != nil {
		tx.Rollback()
		return err
	}
	waited := make(chan error, 1)
	var waitedFor time.Duration
	go func() {
		start := time.Now()
		_, err := waiter.ExecContext(ctx, "UPDATE hot SET v = v + 1 WHERE id = 1")
		waitedFor = time.Since(start)
		waited <- err
	}()
	time.Sleep(hold)
	if err := tx.Commit(); err != nil {
		return err
	}
	if err := <-waited; err != nil {
		return fmt.Errorf("waiting update: %w", err)
	}
	if waitedFor < hold/2 {
		return fmt.Errorf("the waiting update took %v with the row held %v: it did not wait for the lock", waitedFor, hold)
	}
	// A statement that finds the row free, for contrast.
	_, err = waiter.ExecContext(ctx, "UPDATE hot SET v = v + 1 WHERE id = 2")
	return err
}

// coldScan reads sbtest.hot whole after the restart: its pages come from
// disk, so the engine fields count page reads and their time.
func coldScan(ctx context.Context, inst *sandbox.Instance) error {
	db, err := inst.Open("sbtest")
	if err != nil {
		return err
	}
	defer db.Close()
	var n int
	return db.QueryRowContext(ctx, "SELECT COUNT(*) FROM hot WHERE v > 10").Scan(&n)
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return err
	}
	out, err := os.Create(to)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// awkExpect counts "# Query_time:" header lines and sums their values in
// whole microseconds. It relies on the MariaDB server writing exactly one
// such line per logged statement, which is the fact the parser must match.
const awkExpect = `/^# Query_time: / { n++; us += sprintf("%.0f", $3 * 1000000) }
END { printf "events %d\nquery_time_us %d\n", n, us }`

func writeExpect(log string) error {
	out, err := exec.Command("awk", awkExpect, log).Output()
	if err != nil {
		return fmt.Errorf("awk on %s: %w", log, err)
	}
	return os.WriteFile(log+".expect", out, 0o644)
}
