package probe

import (
	"context"
	"database/sql"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

var (
	shared     *sandbox.Instance
	sharedOnce sync.Once
)

// server returns one sandbox for the package's tests (with a thread pool,
// so the queue readings are exercised); cleanup is by TestMain.
func server(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	sharedOnce.Do(func() {
		inst, err := sandbox.Start(context.Background(), sandbox.Options{ExtraPort: -1,
			ServerArgs: []string{"--thread-handling=pool-of-threads", "--thread-pool-size=2"}})
		if err != nil {
			t.Fatalf("starting sandbox: %v", err)
		}
		shared = inst
	})
	if shared == nil {
		t.Fatal("sandbox did not start")
	}
	return shared
}

func TestMain(m *testing.M) {
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

func monitorDB(t *testing.T, inst *sandbox.Instance) *sql.DB {
	db, err := sql.Open("mysql", inst.ExtraDSN(""))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func TestRunRecordsPointsAndCleansUp(t *testing.T) {
	inst := server(t)
	var seen []Point
	res, err := Run(context.Background(), Options{DSN: inst.DSN(""), Monitor: monitorDB(t, inst), Every: 200 * time.Millisecond,
		Count: 3, Canary: workload.CanaryOptions{Schema: "probe_t1", Repeat: 3, Inserts: 100}, SampleEvery: 20 * time.Millisecond,
		Cores: 2, OnPoint: func(p Point) error { seen = append(seen, p); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Series.Points) != 3 || len(seen) != 3 || res.Discarded != 0 {
		t.Fatalf("points %d, seen %d, discarded %d", len(res.Series.Points), len(seen), res.Discarded)
	}
	for i, p := range res.Series.Points {
		if p.Calls != 3 || p.MinUS <= 0 || p.MinUS > p.MedianUS || p.MedianUS > p.MaxUS || p.AvgUS > p.MaxUS {
			t.Errorf("point %d latencies: %+v", i, p)
		}
		// The canary's own connection is connected while it runs (100
		// inserts a round, so it spans several 20 ms samples; with 10 a run
		// could fall between two samples), and the
		// one that drops its schema at the end (the monitor, on the extra
		// port, is not counted).
		if p.Samples < 2 || p.ThreadsConnected < 0.5 || p.ThreadsConnected > 2 {
			t.Errorf("point %d thread reads: %+v", i, p)
		}
		// Runs start on a 200 ms grid, or at once when the previous one
		// ran late.
		if off := p.TimeUS - res.Series.Points[0].TimeUS; off < int64(i)*200_000-1000 {
			t.Errorf("run %d started %dµs after the first, before its slot", i, off)
		}
	}
	if res.Settings["thread_handling"] != "pool-of-threads" || len(res.Caps) < 3 {
		t.Errorf("settings %v, caps %+v", res.Settings, res.Caps)
	}
	if res.Knee.Found || len(res.Findings) != 0 {
		t.Errorf("3 idle runs gave a knee: %+v", res.Knee)
	}
	var n int
	if err := monitorDB(t, inst).QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = 'probe_t1'").Scan(&n); err != nil || n != 0 {
		t.Errorf("scratch schema left behind: %d (%v)", n, err)
	}
}

// TestRunStopsCleanlyOnCancel: Ctrl-C during a run discards that run and
// returns the runs done, without error.
func TestRunStopsCleanlyOnCancel(t *testing.T) {
	inst := server(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	res, err := Run(ctx, Options{DSN: inst.DSN(""), Monitor: monitorDB(t, inst), Every: time.Millisecond,
		Canary:  workload.CanaryOptions{Schema: "probe_t2", Repeat: 50, Inserts: 100},
		OnPoint: func(Point) error { time.AfterFunc(300*time.Millisecond, cancel); return nil }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Series.Points) != 1 || res.Discarded != 1 || res.Settings == nil {
		t.Errorf("points %d, discarded %d, settings %v", len(res.Series.Points), res.Discarded, res.Settings)
	}
}

func TestRunScriptWorkload(t *testing.T) {
	inst := server(t)
	script := "SELECT SLEEP(0.01); SELECT 1"
	res, err := Run(context.Background(), Options{DSN: inst.DSN(""), Monitor: monitorDB(t, inst), Every: time.Millisecond,
		Count: 2, Canary: workload.CanaryOptions{Repeat: 4}, Script: workload.StatementsFromSQL(script), ScriptName: "x.sql"})
	if err != nil {
		t.Fatal(err)
	}
	if res.Series.Name != "x.sql" || len(res.Series.Points) != 2 {
		t.Fatalf("%+v", res.Series)
	}
	for _, p := range res.Series.Points {
		if p.Calls != 4 || p.MinUS < 10_000 {
			t.Errorf("each repetition sleeps 10 ms: %+v", p)
		}
	}
	// A failing script: three failed runs in a row end the probe.
	_, err = Run(context.Background(), Options{DSN: inst.DSN(""), Monitor: monitorDB(t, inst), Every: time.Millisecond,
		Script: workload.StatementsFromSQL("SELECT * FROM no_such_db.t")})
	if err == nil {
		t.Fatal("a failing workload did not stop the probe")
	}
}
