package probe

import (
	"context"
	"database/sql"
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/workload"
)

// runOnce runs the workload once while the monitor reads the server's
// concurrency, and returns the point.
func runOnce(ctx context.Context, o Options, m *monitor) (Point, error) {
	sctx, stop := context.WithCancel(ctx)
	done := make(chan threadStats, 1)
	go func() { done <- m.sampleUntil(sctx, ctx, o.SampleEvery) }()
	started := time.Now()
	reps, err := runWorkload(ctx, o)
	elapsed := time.Since(started)
	stop()
	st := <-done
	if err != nil {
		return Point{}, err
	}
	if st.n == 0 {
		return Point{}, fmt.Errorf("probe: no status read succeeded during the run: %w", st.err)
	}
	lat := workload.Summarize(reps)
	p := Point{TimeUS: started.UnixMicro(), DurationUS: elapsed.Microseconds(), Calls: lat.Count,
		MinUS: lat.Min.Microseconds(), AvgUS: lat.Avg.Microseconds(), MedianUS: lat.P50.Microseconds(), MaxUS: lat.Max.Microseconds()}
	st.fill(&p)
	if o.Load != nil {
		p.Load = o.Load()
	}
	return p, nil
}

// runWorkload runs the canary or the user's script and returns the time of
// each repetition.
func runWorkload(ctx context.Context, o Options) ([]time.Duration, error) {
	if o.Script != nil {
		return runScript(ctx, o.DSN, o.Script, o.Canary.Repeat)
	}
	res, err := workload.Canary(ctx, o.DSN, o.Canary)
	if err != nil {
		return nil, err
	}
	return res.Reps, nil
}

// runScript runs stmts in order on one connection, repeat times (default
// 20), and times each repetition.
func runScript(ctx context.Context, dsn string, stmts []workload.Statement, repeat int) ([]time.Duration, error) {
	if repeat <= 0 {
		repeat = 20
	}
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		return nil, fmt.Errorf("probe: bad DSN: %w", err)
	}
	defer db.Close()
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, fmt.Errorf("probe: connecting: %w", err)
	}
	defer c.Close()
	reps := make([]time.Duration, 0, repeat)
	for range repeat {
		t0 := time.Now()
		for _, st := range stmts {
			if err := drain(c.QueryContext(ctx, st.SQL)); err != nil {
				return nil, fmt.Errorf("probe: %s: %w", st.SQL, err)
			}
		}
		reps = append(reps, time.Since(t0))
	}
	return reps, nil
}

func drain(rows *sql.Rows, err error) error {
	if err != nil {
		return err
	}
	for rows.Next() {
	}
	return rows.Close()
}

// monitor reads the concurrency figures.
type monitor struct {
	db   *sql.DB
	pool bool // the server runs a thread pool and has its tables
}

// threadStats accumulates the reads of one run.
type threadStats struct {
	n                         int
	running, connected, queue float64
	runningMax, queueMax      int64
	err                       error // the last read's error
}

// sampleUntil reads at once, every `every` until sctx ends, and once more
// at the end unless the whole probe (ctx) was stopped.
func (m *monitor) sampleUntil(sctx, ctx context.Context, every time.Duration) threadStats {
	var st threadStats
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		m.read(sctx, &st)
		select {
		case <-t.C:
		case <-sctx.Done():
			if ctx.Err() == nil {
				m.read(ctx, &st)
			}
			return st
		}
	}
}

// read takes one reading. Threads_running counts the SHOW STATUS that
// reads it, which is taken off. Threads_connected is kept as the server
// reports it: MariaDB leaves extra-port connections out of it, so whether
// it includes the monitor depends on the port the monitor came through.
func (m *monitor) read(ctx context.Context, st *threadStats) {
	status, err := collect.GlobalStatus(ctx, m.db)
	if err != nil {
		st.err = err
		return
	}
	running := max(atoi(status["Threads_running"])-1, 0)
	connected := atoi(status["Threads_connected"])
	var queue int64
	if m.pool {
		groups, err := collect.ThreadPoolGroups(ctx, m.db)
		if err != nil {
			st.err = err
			return
		}
		for _, g := range groups {
			queue += int64(g.QueueLength)
		}
	}
	st.n++
	st.running += float64(running)
	st.connected += float64(connected)
	st.queue += float64(queue)
	st.runningMax = max(st.runningMax, running)
	st.queueMax = max(st.queueMax, queue)
}

func (st threadStats) fill(p *Point) {
	n := float64(st.n)
	p.Samples = st.n
	p.ThreadsRunning = round2(st.running / n)
	p.ThreadsConnected = round2(st.connected / n)
	p.PoolQueue = round2(st.queue / n)
	p.ThreadsRunningMax, p.PoolQueueMax = st.runningMax, st.queueMax
}

func atoi(s string) int64 {
	n, _ := strconv.ParseInt(s, 10, 64)
	return n
}

func round2(v float64) float64 { return math.Round(v*100) / 100 }
