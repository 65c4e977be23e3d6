package collect

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// The lock tests start private MariaDB instances of their own (the shared
// one's settings are other tests'): real clients hold and wait for locks,
// each test waits until the server shows the waiter waiting, then reads.

// Server options of the lock tests.
var (
	// psMDL: performance_schema on, with the metadata lock instrument.
	psMDL = []string{"--performance-schema=ON", "--performance-schema-instrument=wait/lock/metadata/sql/mdl=ON"}
	// psDefault: performance_schema on as MariaDB sets it up (MDL off).
	psDefault = []string{"--performance-schema=ON"}
	// MariaDB's default: performance_schema off.
	psOff []string
)

// lockServer starts a sandbox with lk.t (InnoDB, ids 1-10) and lk.m
// (MyISAM, one row), and returns it with a monitor pool as collect.Open
// makes it.
func lockServer(t testing.TB, args []string) (*sandbox.Instance, *sql.DB) {
	t.Helper()
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: args})
	mon, err := NewSecrets().Open(inst.DSN(""), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { mon.Close() })
	for _, q := range []string{
		"CREATE DATABASE lk",
		"CREATE TABLE lk.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"INSERT INTO lk.t VALUES (1,0),(2,0),(3,0),(4,0),(5,0),(6,0),(7,0),(8,0),(9,0),(10,0)",
		"CREATE TABLE lk.m (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=MyISAM",
		"INSERT INTO lk.m VALUES (1,0)",
	} {
		if _, err := mon.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	return inst, mon
}

// lockClient opens one application connection (database lk) and returns
// it with its connection id.
func lockClient(t testing.TB, inst *sandbox.Instance) (*sql.Conn, uint64) {
	t.Helper()
	db, err := inst.Open("lk")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	conn, err := db.Conn(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var id uint64
	// A test that fails leaves no waiter behind for long.
	if _, err := conn.ExecContext(context.Background(), "SET SESSION lock_wait_timeout = 300, innodb_lock_wait_timeout = 300"); err != nil {
		t.Fatal(err)
	}
	if err := conn.QueryRowContext(context.Background(), "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		t.Fatal(err)
	}
	return conn, id
}

// goExec runs q on conn in a goroutine; its error arrives on the channel.
func goExec(conn *sql.Conn, q string) <-chan error {
	done := make(chan error, 1)
	go func() {
		rows, err := conn.QueryContext(context.Background(), q)
		if err == nil {
			for rows.Next() {
			}
			err = rows.Err()
			rows.Close()
		}
		done <- err
	}()
	return done
}

// waitFor polls q (one value, for args) until it reads want.
func waitFor(t testing.TB, mon *sql.DB, want, q string, args ...any) {
	t.Helper()
	var got sql.NullString
	for range 4000 { // 20 s at most: a deadline for a broken test, not a timing check
		err := mon.QueryRow(q, args...).Scan(&got)
		if err != nil && err != sql.ErrNoRows {
			t.Fatal(err)
		}
		if got.String == want {
			return
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s %v: still %q, never %q", q, args, got.String, want)
}

// lockExec runs statements on conn, reading any rows.
func lockExec(t testing.TB, conn *sql.Conn, stmts ...string) {
	t.Helper()
	for _, s := range stmts {
		rows, err := conn.QueryContext(context.Background(), s)
		if err != nil {
			t.Fatalf("%s: %v", s, err)
		}
		for rows.Next() {
		}
		rows.Close()
	}
}

func waitState(t testing.TB, mon *sql.DB, id uint64, state string) {
	t.Helper()
	waitFor(t, mon, state, "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?", id)
}

// waitRowLockWaits waits until n connections wait for InnoDB row locks,
// read from the live counter: INNODB_TRX and INNODB_LOCK_WAITS are a
// cache InnoDB refreshes only once unread for 100 ms, which polling them
// would keep stale.
func waitRowLockWaits(t testing.TB, mon *sql.DB, n int) {
	t.Helper()
	waitFor(t, mon, fmt.Sprint(n), "SELECT VARIABLE_VALUE FROM information_schema.GLOBAL_STATUS WHERE VARIABLE_NAME = 'INNODB_ROW_LOCK_CURRENT_WAITS'")
}

func sourcesOf(t testing.TB, mon *sql.DB) LockSources {
	t.Helper()
	info, err := DetectServer(context.Background(), mon)
	if err != nil {
		t.Fatal(err)
	}
	return DetectLockSources(context.Background(), mon, info)
}

func waitsOf(waits []LockWait, waiter uint64) []LockWait {
	var out []LockWait
	for _, w := range waits {
		if w.WaiterID == waiter {
			out = append(out, w)
		}
	}
	return out
}

func mustEnd(t testing.TB, what string, done <-chan error) {
	t.Helper()
	if err := <-done; err != nil {
		t.Errorf("%s: %v", what, err)
	}
}

// TestLockWaitsRowSandbox: A updates row 7 in an open transaction and goes
// idle; B's same update waits. The reader names B waiting on A for a row
// lock, A idle (trx_query NULL, Sleep).
func TestLockWaitsRowSandbox(t *testing.T) {
	inst, mon := lockServer(t, psMDL)
	ctx := context.Background()
	a, aID := lockClient(t, inst)
	b, bID := lockClient(t, inst)
	lockExec(t, a, "BEGIN", "UPDATE t SET v = v + 1 WHERE id = 7")
	done := goExec(b, "UPDATE t SET v = v + 1 WHERE id = 7")
	waitRowLockWaits(t, mon, 1)

	src := sourcesOf(t, mon)
	if src.Rows != SrcInnoDBLockWaits || src.MDL != SrcMetadataLocks || !src.TableHandles || !src.InnoDBTrx {
		t.Errorf("sources = %+v", src)
	}
	waits, err := ReadLockWaits(ctx, mon, src)
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 {
		t.Fatalf("waits = %+v, want B on A only", waits)
	}
	w := waits[0]
	t.Logf("%+v", w)
	if w.WaiterID != bID || w.BlockerID != aID || w.RootID != aID || w.Kind != event.LockRow || w.LockType != "RECORD" {
		t.Errorf("wait: %d on %d (root %d), kind %s/%s; want %d on %d, row", w.WaiterID, w.BlockerID, w.RootID, w.Kind, w.LockType, bID, aID)
	}
	if w.Schema != "lk" || w.Table != "t" || w.Index != "PRIMARY" || w.LockData != "7" || w.RequestedMode != "X" || w.HeldMode != "X" {
		t.Errorf("lock: %s.%s %s [%s] %s/%s", w.Schema, w.Table, w.Index, w.LockData, w.RequestedMode, w.HeldMode)
	}
	if !w.BlockerTrx || w.BlockerTrxQuery != "" || w.BlockerTrxState != "RUNNING" || w.BlockerTrxStarted.IsZero() || !w.BlockerIdle() {
		t.Errorf("blocker's transaction: %v %q %q %v, want RUNNING, idle (trx_query NULL)", w.BlockerTrx, w.BlockerTrxState, w.BlockerTrxQuery, w.BlockerTrxStarted)
	}
	if w.Blocker.Command != "Sleep" || !w.Waiter.Read || w.Waiter.Command != "Query" || w.WaitStarted.IsZero() || w.WaitSeconds < 0 {
		t.Errorf("processes: waiter %+v blocker %+v, wait started %v (%d s)", w.Waiter, w.Blocker, w.WaitStarted, w.WaitSeconds)
	}
	if w.Ambiguous || w.Inferred || !strings.Contains(w.Source, SrcInnoDBLockWaits) {
		t.Errorf("ambiguous %v, inferred %v, source %q", w.Ambiguous, w.Inferred, w.Source)
	}
	lockExec(t, a, "ROLLBACK")
	mustEnd(t, "B's update", done)
}

// TestLockWaitsSharedHolderSandbox: the holder of a shared row lock is a
// read-only transaction, which MariaDB lists with trx_id 0 like every
// other read-only transaction: the reader names each one that locks rows
// as a candidate, marked ambiguous, the real holder among them.
func TestLockWaitsSharedHolderSandbox(t *testing.T) {
	inst, mon := lockServer(t, psOff)
	a, aID := lockClient(t, inst)
	other, otherID := lockClient(t, inst)
	idle, _ := lockClient(t, inst)
	b, bID := lockClient(t, inst)
	lockExec(t, a, "BEGIN", "SELECT * FROM t WHERE id = 7 LOCK IN SHARE MODE")
	lockExec(t, other, "BEGIN", "SELECT * FROM t WHERE id = 8 LOCK IN SHARE MODE")
	lockExec(t, idle, "BEGIN", "SELECT * FROM t WHERE id = 9") // no lock: no candidate
	done := goExec(b, "DELETE FROM t WHERE id = 7")
	waitRowLockWaits(t, mon, 1)
	waits, err := ReadLockWaits(context.Background(), mon, sourcesOf(t, mon))
	if err != nil {
		t.Fatal(err)
	}
	var blockers []uint64
	for _, w := range waits {
		if w.WaiterID != bID || !w.Ambiguous || w.HeldMode != "S" || w.Kind != event.LockRow {
			t.Errorf("wait = %+v, want B ambiguous on an S lock", w)
		}
		blockers = append(blockers, w.BlockerID)
	}
	slices.Sort(blockers)
	if want := []uint64{min(aID, otherID), max(aID, otherID)}; !slices.Equal(blockers, want) {
		t.Errorf("candidates %v, want %v (both read-only transactions that lock rows)", blockers, want)
	}
	lockExec(t, a, "ROLLBACK")
	mustEnd(t, "B's delete", done)
	lockExec(t, other, "ROLLBACK")
	lockExec(t, idle, "ROLLBACK")
}

// pileUp builds the metadata lock pile-up: idle holds SHARED_READ on lk.t
// from a read in its open transaction; an ALTER waits for it; two selects
// (one naming lk.t, one t in database lk) wait behind the ALTER. undo
// commits the idle transaction and waits for all three to finish.
func pileUp(t *testing.T, inst *sandbox.Instance, mon *sql.DB) (idleID, alterID uint64, selects []uint64, undo func()) {
	t.Helper()
	idle, idleID := lockClient(t, inst)
	alter, alterID := lockClient(t, inst)
	s1, s1ID := lockClient(t, inst)
	s2, s2ID := lockClient(t, inst)
	lockExec(t, idle, "BEGIN", "SELECT * FROM t WHERE id = 1")
	alterDone := goExec(alter, "ALTER TABLE t ADD COLUMN w INT")
	waitState(t, mon, alterID, "Waiting for table metadata lock")
	s1Done := goExec(s1, "SELECT v FROM lk.t WHERE id = 7")
	s2Done := goExec(s2, "SELECT * FROM t")
	waitState(t, mon, s1ID, "Waiting for table metadata lock")
	waitState(t, mon, s2ID, "Waiting for table metadata lock")
	return idleID, alterID, []uint64{s1ID, s2ID}, func() {
		lockExec(t, idle, "COMMIT")
		mustEnd(t, "ALTER", alterDone)
		mustEnd(t, "select 1", s1Done)
		mustEnd(t, "select 2", s2Done)
	}
}

// checkPileUp checks the pile-up as read: each select's immediate blocker
// is the ALTER (its pending EXCLUSIVE goes first), the ALTER's the idle
// transaction, which is everyone's root.
func checkPileUp(t *testing.T, waits []LockWait, idleID, alterID uint64, selects []uint64) {
	t.Helper()
	for _, w := range waits {
		t.Logf("%d -> %d (root %d) %s %s %s.%s %s/%s pending=%v inferred=%v [%s]", w.WaiterID, w.BlockerID, w.RootID, w.Kind,
			w.LockType, w.Schema, w.Table, w.RequestedMode, w.HeldMode, w.BlockerPending, w.Inferred, w.Source)
	}
	if len(waits) != 3 {
		t.Errorf("%d waits, want 3 (the ALTER and two selects)", len(waits))
	}
	aw := waitsOf(waits, alterID)
	if len(aw) != 1 || aw[0].BlockerID != idleID || aw[0].RootID != idleID || aw[0].RequestedMode != "EXCLUSIVE" || aw[0].HeldMode != "SHARED_READ" {
		t.Errorf("the ALTER's waits = %+v, want one on the idle transaction %d", aw, idleID)
	} else if a := aw[0]; !a.BlockerIdle() || a.Blocker.Command != "Sleep" || !a.BlockerTrx || a.BlockerTrxStarted.IsZero() || a.BlockerPending {
		t.Errorf("the ALTER's blocker should be idle in its transaction: %+v", a)
	}
	for _, s := range selects {
		sw := waitsOf(waits, s)
		if len(sw) != 1 || sw[0].BlockerID != alterID || sw[0].RootID != idleID || !sw[0].BlockerPending ||
			sw[0].RequestedMode != "SHARED_READ" || sw[0].HeldMode != "EXCLUSIVE" {
			t.Errorf("select %d's waits = %+v, want one behind the ALTER %d, root %d", s, sw, alterID, idleID)
			continue
		}
		w := sw[0]
		if w.Kind != event.LockMetadata || w.LockType != "TABLE" || w.Schema != "lk" || w.Table != "t" ||
			w.Blocker.State != "Waiting for table metadata lock" || w.Waiter.State != "Waiting for table metadata lock" {
			t.Errorf("select %d's wait = %+v", s, w)
		}
	}
}

// TestLockWaitsMetadataPileUpSandbox reads the pile-up from
// performance_schema.metadata_locks (instrument enabled).
func TestLockWaitsMetadataPileUpSandbox(t *testing.T) {
	inst, mon := lockServer(t, psMDL)
	idleID, alterID, selects, undo := pileUp(t, inst, mon)
	defer undo()
	src := sourcesOf(t, mon)
	if src.MDL != SrcMetadataLocks {
		t.Fatalf("MDL source = %q, want %s (%v)", src.MDL, SrcMetadataLocks, src.Notes)
	}
	waits, err := ReadLockWaits(context.Background(), mon, src)
	if err != nil {
		t.Fatal(err)
	}
	checkPileUp(t, waits, idleID, alterID, selects)
	for _, w := range waits {
		if w.Inferred || !strings.HasPrefix(w.Source, SrcMetadataLocks) {
			t.Errorf("wait %d: inferred %v, source %q", w.WaiterID, w.Inferred, w.Source)
		}
	}
}

// TestLockWaitsMetadataFallbackSandbox reads the pile-up with the
// instrument off (MariaDB's default, performance_schema off): first from
// the processlist alone (blockers unknown), then, the metadata_lock_info
// plugin installed, from METADATA_LOCK_INFO.
func TestLockWaitsMetadataFallbackSandbox(t *testing.T) {
	inst, mon := lockServer(t, psOff)
	idleID, alterID, selects, undo := pileUp(t, inst, mon)
	defer undo()
	ctx := context.Background()

	src := sourcesOf(t, mon)
	if src.MDL != SrcProcesslist || src.TableHandles {
		t.Fatalf("sources = %+v, want the processlist for metadata locks", src)
	}
	t.Logf("notes: %q", src.Notes)
	waits, err := ReadLockWaits(ctx, mon, src)
	if err != nil {
		t.Fatal(err)
	}
	var waiters []uint64
	for _, w := range waits {
		waiters = append(waiters, w.WaiterID)
		if w.BlockerID != 0 || w.RootID != 0 || w.Kind != event.LockMetadata || w.LockType != "TABLE" ||
			!strings.Contains(w.Source, "blocker unknown") || w.Waiter.State != "Waiting for table metadata lock" {
			t.Errorf("processlist only: %+v", w)
		}
	}
	slices.Sort(waiters)
	want := append([]uint64{alterID}, selects...)
	slices.Sort(want)
	if !slices.Equal(waiters, want) {
		t.Errorf("waiters %v, want %v", waiters, want)
	}

	if _, err := mon.ExecContext(ctx, "INSTALL SONAME 'metadata_lock_info'"); err != nil {
		t.Fatalf("installing metadata_lock_info: %v", err)
	}
	src = sourcesOf(t, mon)
	if src.MDL != SrcMetadataLockInfo {
		t.Fatalf("MDL source = %q after INSTALL SONAME, want %s", src.MDL, SrcMetadataLockInfo)
	}
	waits, err = ReadLockWaits(ctx, mon, src)
	if err != nil {
		t.Fatal(err)
	}
	checkPileUp(t, waits, idleID, alterID, selects)
	for _, w := range waits {
		if !w.Inferred || !strings.Contains(w.Source, SrcMetadataLockInfo) {
			t.Errorf("wait %d: inferred %v, source %q", w.WaiterID, w.Inferred, w.Source)
		}
	}
}

// TestLockWaitsTableLevelSandbox: a MyISAM UPDATE runs (WRITE lock) and a
// SELECT waits for the table-level lock; table_handles names the writer.
func TestLockWaitsTableLevelSandbox(t *testing.T) {
	inst, mon := lockServer(t, psDefault)
	w, wID := lockClient(t, inst)
	r, rID := lockClient(t, inst)
	wDone := goExec(w, "UPDATE m SET v = SLEEP(300)")
	waitState(t, mon, wID, "User sleep")
	rDone := goExec(r, "SELECT * FROM m")
	waitState(t, mon, rID, "Waiting for table level lock")
	waits, err := ReadLockWaits(context.Background(), mon, sourcesOf(t, mon))
	if err != nil {
		t.Fatal(err)
	}
	if len(waits) != 1 {
		t.Errorf("waits = %+v, want the reader's", waits)
	} else if lw := waits[0]; lw.WaiterID != rID || lw.BlockerID != wID || lw.Kind != event.LockTable || lw.Schema != "lk" ||
		lw.Table != "m" || lw.RequestedMode != "READ" || lw.HeldMode != "WRITE" || lw.Blocker.State != "User sleep" {
		t.Errorf("wait = %+v, want %d on %d's WRITE on lk.m", lw, rID, wID)
	}
	if _, err := mon.Exec(fmt.Sprintf("KILL QUERY %d", wID)); err != nil {
		t.Fatal(err)
	}
	<-wDone // interrupted: its error is the point
	mustEnd(t, "the reader", rDone)
}

// TestLockWaitsNoneSandbox: open transactions, a sleeping statement and
// idle connections, nobody waiting: nothing, and no error, from every
// source configuration.
func TestLockWaitsNoneSandbox(t *testing.T) {
	for name, args := range map[string][]string{"metadata_locks": psMDL, "performance_schema off": psOff} {
		t.Run(name, func(t *testing.T) {
			inst, mon := lockServer(t, args)
			a, _ := lockClient(t, inst)
			b, bID := lockClient(t, inst)
			lockExec(t, a, "BEGIN", "UPDATE t SET v = v + 1 WHERE id = 1", "SELECT * FROM m")
			done := goExec(b, "SELECT SLEEP(300)")
			waitState(t, mon, bID, "User sleep")
			waits, err := ReadLockWaits(context.Background(), mon, sourcesOf(t, mon))
			if err != nil || len(waits) != 0 {
				t.Errorf("ReadLockWaits = %+v, %v; want nothing", waits, err)
			}
			if _, err := mon.Exec(fmt.Sprintf("KILL QUERY %d", bID)); err != nil {
				t.Fatal(err)
			}
			<-done
			lockExec(t, a, "ROLLBACK")
		})
	}
}

// BenchmarkReadLockWaits1000Txns measures one ReadLockWaits against a
// sandbox holding 1,000 open transactions (each in BEGIN; SELECT ... FOR
// UPDATE on a row of its own), three row-lock waits on three of them, and
// a metadata lock pile-up (an idle reader, an ALTER, two selects): with
// the metadata_locks instrument on, and with performance_schema off and
// METADATA_LOCK_INFO installed. docs/performance.md, "Lock-wait reads".
func BenchmarkReadLockWaits1000Txns(b *testing.B) {
	for _, c := range []struct {
		name    string
		args    []string
		install bool
	}{
		{"metadata_locks", psMDL, false},
		{"metadata_lock_info", psOff, true},
	} {
		b.Run(c.name, func(b *testing.B) {
			const txns = 1000
			inst, mon := lockServer(b, append(slices.Clone(c.args), "--max-connections=1200"))
			ctx := context.Background()
			if c.install {
				if _, err := mon.Exec("INSTALL SONAME 'metadata_lock_info'"); err != nil {
					b.Fatal(err)
				}
			}
			if _, err := mon.Exec("INSERT INTO lk.t SELECT seq, 0 FROM lk.seq_11_to_1100"); err != nil {
				b.Fatal(err)
			}
			if _, err := mon.Exec("CREATE TABLE lk.u (id INT PRIMARY KEY) ENGINE=InnoDB"); err != nil {
				b.Fatal(err)
			}
			app, err := inst.Open("lk")
			if err != nil {
				b.Fatal(err)
			}
			defer app.Close()
			conns := make([]*sql.Conn, txns)
			var wg sync.WaitGroup
			errs := make(chan error, txns)
			for w := range 8 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := w; i < txns; i += 8 {
						c, err := app.Conn(ctx)
						if err == nil {
							_, err = c.ExecContext(ctx, "BEGIN")
						}
						if err == nil {
							var id int
							err = c.QueryRowContext(ctx, "SELECT id FROM t WHERE id = ? FOR UPDATE", i+1).Scan(&id)
						}
						if err != nil {
							errs <- err
							return
						}
						conns[i] = c
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				b.Fatal(err)
			}
			defer func() {
				for _, c := range conns {
					c.ExecContext(ctx, "ROLLBACK")
					c.Close()
				}
			}()
			var waiting []<-chan error
			for i, row := range []int{1, 500, 1000} {
				c, _ := lockClient(b, inst)
				waiting = append(waiting, goExec(c, fmt.Sprintf("UPDATE t SET v = v + 1 WHERE id = %d", row)))
				waitRowLockWaits(b, mon, i+1)
			}
			idle, _ := lockClient(b, inst)
			lockExec(b, idle, "BEGIN", "SELECT * FROM u")
			alter, alterID := lockClient(b, inst)
			waiting = append(waiting, goExec(alter, "ALTER TABLE u ADD COLUMN w INT"))
			waitState(b, mon, alterID, "Waiting for table metadata lock")
			for range 2 {
				c, id := lockClient(b, inst)
				waiting = append(waiting, goExec(c, "SELECT * FROM u"))
				waitState(b, mon, id, "Waiting for table metadata lock")
			}
			src := sourcesOf(b, mon)
			waits, err := ReadLockWaits(ctx, mon, src)
			if err != nil {
				b.Fatal(err)
			}
			var kinds []string
			for _, w := range waits {
				if w.BlockerID == 0 {
					b.Fatalf("blocker unknown: %+v", w)
				}
				kinds = append(kinds, w.Kind)
			}
			if len(waits) != 6 || strings.Count(strings.Join(kinds, ","), event.LockRow) != 3 {
				b.Fatalf("read %d waits (%v), want 3 row and 3 metadata lock waits", len(waits), kinds)
			}
			// Each call MinLockWaitsInterval after the previous one, as
			// watch makes them: InnoDB then refills its lock-wait cache
			// (walking every transaction) at each call, as it would in use.
			var took []time.Duration
			for b.Loop() {
				b.StopTimer()
				time.Sleep(MinLockWaitsInterval)
				b.StartTimer()
				t0 := time.Now()
				if _, err := ReadLockWaits(ctx, mon, src); err != nil {
					b.Fatal(err)
				}
				took = append(took, time.Since(t0))
			}
			b.StopTimer()
			// The spread of single calls, beside the mean (ns/op).
			slices.Sort(took)
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(took[0]), "min-ms")
			b.ReportMetric(ms(took[len(took)/2]), "p50-ms")
			b.ReportMetric(ms(took[len(took)*9/10]), "p90-ms")
			b.ReportMetric(ms(took[len(took)-1]), "max-ms")
			b.ReportMetric(txns, "txns")
			lockExec(b, idle, "COMMIT")
			for _, c := range conns {
				c.ExecContext(ctx, "ROLLBACK")
			}
			for _, w := range waiting {
				<-w
			}
		})
	}
}
