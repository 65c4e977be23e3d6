package collect

import (
	"context"
	"strings"
	"testing"
	"time"
)

// calibrate returns the tightest of a few calibrations: on two busy cores
// one calibration can land on a preempted round trip; the bound
// (≤ 100 µs) is about what calibration achieves, asserted on the best.
func calibrate(t *testing.T) Clock {
	t.Helper()
	db := monitor(t)
	var best Clock
	for i := 0; i < 3; i++ {
		c, err := CalibrateWith(context.Background(), db, CalibrateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if best.OriginUS == 0 || c.ErrorUS < best.ErrorUS {
			best = c
		}
	}
	return best
}

func TestCalibrateAccuracySandbox(t *testing.T) {
	clock := calibrate(t)
	if clock.ErrorUS > 100 {
		t.Fatalf("calibration error %d µs, want ≤ 100", clock.ErrorUS)
	}
	// Same host: the server's own NOW(6) agrees with our clock, so the
	// cross-check must agree within the error plus NOW()'s µs rounding.
	if d := clock.ServerOffsetUS; d < -(clock.ErrorUS+5) || d > clock.ErrorUS+5 {
		t.Errorf("server NOW(6) disagrees with calibrated origin by %d µs (error %d)", d, clock.ErrorUS)
	}
	if clock.Wait.Timer != "NANOSECOND" {
		t.Errorf("wait timer = %q, want switched to NANOSECOND", clock.Wait.Timer)
	}

	db := monitor(t)
	cur := NewStatementCursor("events_statements_history_long")
	conn, id := app(t)
	if err := cur.Prime(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	before := time.Now().UnixMicro()
	execAll(t, conn, "SELECT SLEEP(0.2)")
	after := time.Now().UnixMicro()

	got := pollFor(t, cur, clock, id, 1)[0]
	if got.SQLText != "SELECT SLEEP(0.2)" {
		t.Fatalf("got %q", got.SQLText)
	}
	// rt is the part of our round trip that was not the 200 ms sleep
	// (transfer, scheduling, sleep overshoot). The server started the
	// statement after we sent it and at least 200 ms before we had the
	// answer, so, converted with the calibrated clock, the start must lie in
	// [send, send+rt], give or take the calibration error. The end is only
	// bounded below: TIMER_END comes after the server's post-answer cleanup,
	// which took 2 ms on this busy 2-core machine.
	rt := (after - before) - 200_000
	if got.EndUS-got.StartUS < 200_000 || rt < 0 {
		t.Fatalf("SLEEP(0.2) lasted %d µs on the server clock, our round trip %d µs", got.EndUS-got.StartUS, after-before)
	}
	if d := got.StartUS - before; d < -clock.ErrorUS || d > rt+clock.ErrorUS {
		t.Errorf("start %+d µs from send, want within [-%d, %d]", d, clock.ErrorUS, rt+clock.ErrorUS)
	}
	if d := got.EndUS - after; d < -(rt + clock.ErrorUS) {
		t.Errorf("end %+d µs from answer: the statement ended before %d µs ahead of the answer", d, rt+clock.ErrorUS)
	}
	t.Logf("error %d µs, rt %d µs; start %+d µs from send, end %+d µs from answer",
		clock.ErrorUS, rt, got.StartUS-before, got.EndUS-after)
}

// pollFor polls until n statements of connection id arrived (a statement
// reaches history only after the server's post-answer cleanup, so the very
// next poll may miss the last one) and checks that none comes twice.
func pollFor(t *testing.T, cur *StatementCursor, clock Clock, id uint64, n int) []ServerStatement {
	t.Helper()
	db := monitor(t)
	var got []ServerStatement
	seen := map[uint64]bool{}
	for i := 0; i < 200 && len(got) < n; i++ {
		stmts, _, err := cur.Poll(context.Background(), db, clock)
		if err != nil {
			t.Fatal(err)
		}
		for _, s := range ofConn(stmts, id) {
			if seen[s.EventID] {
				t.Fatalf("statement %d (%q) returned twice", s.EventID, s.SQLText)
			}
			seen[s.EventID] = true
			got = append(got, s)
		}
		if len(got) < n {
			time.Sleep(5 * time.Millisecond)
		}
	}
	if len(got) != n {
		t.Fatalf("got %d statements of conn %d, want %d", len(got), id, n)
	}
	return got
}

func TestRecalibratorSandbox(t *testing.T) {
	r := &Recalibrator{DB: monitor(t), Interval: 20 * time.Millisecond}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	var first Clock
	for time.Now().Before(deadline) {
		c, err := r.Clock()
		if err != nil {
			t.Fatal(err)
		}
		if first.OriginUS == 0 {
			first = c
		} else if c.CalibratedAtUS != first.CalibratedAtUS {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	c, _ := r.Clock()
	if c.CalibratedAtUS == first.CalibratedAtUS {
		t.Fatal("Recalibrator did not recalibrate")
	}
	if d := c.OriginUS - first.OriginUS; d > c.ErrorUS+first.ErrorUS+50 || d < -(c.ErrorUS+first.ErrorUS+50) {
		t.Errorf("origin moved %d µs between calibrations (errors %d, %d)", d, first.ErrorUS, c.ErrorUS)
	}
}

func TestStatementCursorSandbox(t *testing.T) {
	for _, table := range []string{"events_statements_history_long", "events_statements_history"} {
		t.Run(table, func(t *testing.T) {
			db := monitor(t)
			cur := NewStatementCursor(table)
			conn, id := app(t)
			if err := cur.Prime(context.Background(), db); err != nil {
				t.Fatal(err)
			}
			want := []string{"SELECT 1", "SELECT 2", "SELECT 'three'", "DO 4", "SELECT 5"}
			execAll(t, conn, want...)
			stmts := pollFor(t, cur, Clock{}, id, len(want))
			var got []string
			for _, s := range stmts {
				got = append(got, s.SQLText)
				if s.ConnID != id || s.ThreadID == 0 || s.TimerWait == 0 || s.EventName == "" {
					t.Errorf("incomplete row %+v", s)
				}
			}
			if strings.Join(got, "|") != strings.Join(want, "|") {
				t.Errorf("statements of app conn = %q, want %q", got, want)
			}
			if cur.Lost != 0 {
				t.Errorf("lost = %d, want 0", cur.Lost)
			}
			again, _, err := cur.Poll(context.Background(), db, Clock{})
			if err != nil {
				t.Fatal(err)
			}
			if n := len(ofConn(again, id)); n != 0 {
				t.Errorf("extra poll returned %d statements of the app again", n)
			}
			for _, s := range again {
				if IsOwnSQL(s.SQLText) {
					t.Errorf("own statement returned: %q", s.SQLText)
				}
			}
		})
	}
}

// TestStatementCursorLossSandbox makes the per-thread ring (10 rows) drop
// statements between two polls and checks the count.
func TestStatementCursorLossSandbox(t *testing.T) {
	db := monitor(t)
	info, err := DetectServer(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	cur := NewStatementCursor("events_statements_history")
	conn, id := app(t)
	execAll(t, conn, "SELECT 0")
	waitSQLInHistory(t, id, "SELECT 0")
	if err := cur.Prime(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	const n = 25
	for i := 1; i < n; i++ {
		execAll(t, conn, "SELECT 1")
	}
	execAll(t, conn, "SELECT 'last'")
	waitSQLInHistory(t, id, "SELECT 'last'")
	stmts, lost, err := cur.Poll(context.Background(), db, Clock{})
	if err != nil {
		t.Fatal(err)
	}
	seen := len(ofConn(stmts, id))
	if seen != info.HistorySize {
		t.Errorf("read %d statements, want the ring's %d", seen, info.HistorySize)
	}
	if want := int64(n - info.HistorySize); lost != want {
		t.Errorf("lost = %d, want %d", lost, want)
	}
}

// TestStatementCursorWrapSandbox overflows the global ring between polls.
func TestStatementCursorWrapSandbox(t *testing.T) {
	db := monitor(t)
	cur := NewStatementCursor("events_statements_history_long")
	conn, id := app(t)
	if err := cur.Prime(context.Background(), db); err != nil {
		t.Fatal(err)
	}
	execAll(t, conn, "SELECT 0")
	pollFor(t, cur, Clock{}, id, 1)
	const n = testLongSize + 100
	for i := 1; i < n; i++ {
		execAll(t, conn, "SELECT 1")
	}
	execAll(t, conn, "SELECT 'last'")
	waitSQLInHistory(t, id, "SELECT 'last'")
	stmts, lost, err := cur.Poll(context.Background(), db, Clock{})
	if err != nil {
		t.Fatal(err)
	}
	seen := int64(len(ofConn(stmts, id)))
	// Only the app ran statements (and our pool, whose rows are in the ring
	// too), so the app's loss is what the ring could not hold.
	if seen+lost != n {
		t.Errorf("read %d + lost %d = %d, want %d", seen, lost, seen+lost, n)
	}
	if cur.Lost != lost {
		t.Errorf("cursor total Lost = %d, want %d", cur.Lost, lost)
	}
}
