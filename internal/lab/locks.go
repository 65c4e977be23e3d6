package lab

import (
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// LocksOptions tune the locks scenario.
type LocksOptions struct {
	Options
	// Hold is how long the row-lock case's application sits idle in its
	// transaction after its UPDATE (default 1.3 s); ShortHold the
	// sub-second case's (default 200 ms), shorter than watch's live
	// lock-table reads wait for.
	Hold, ShortHold time.Duration
	// MDLHold is how long the metadata-lock case's transaction idles
	// after reading the table (default 1.5 s); Selects how many point
	// selects queue behind the ALTER (default 20).
	MDLHold time.Duration
	Selects int
	// Baseline is how long the contention-free OLTP runs (default 3 s).
	Baseline time.Duration
}

func (o *LocksOptions) defaults() {
	if o.Hold <= 0 {
		o.Hold = 1300 * time.Millisecond
	}
	if o.ShortHold <= 0 {
		o.ShortHold = 200 * time.Millisecond
	}
	if o.MDLHold <= 0 {
		o.MDLHold = 1500 * time.Millisecond
	}
	if o.Selects <= 0 {
		o.Selects = 20
	}
	if o.Baseline <= 0 {
		o.Baseline = 3 * time.Second
	}
}

// LockTruth is what a client measured of one wait, beside what gapscope
// said of it.
type LockTruth struct {
	Case string `json:"case"`
	// Victim and Blocker are the server's connection ids; Root the head
	// of the chain (the idle transaction).
	Victim, Blocker, Root uint64
	// WaitUS is the victim's statement as its client timed it (for the
	// pile-up's ALTER, which works once it has the lock: from its sending
	// to the blocker's COMMIT returning, as the two clients timed them);
	// IdleUS the
	// time the blocker's application sat idle in its transaction before
	// its COMMIT, as that client timed it.
	WaitUS, IdleUS int64
	// BlockerSQL is the statement the blocker's transaction ran.
	BlockerSQL string
	// Seen is the victim's statement as watch reported it (zero when not
	// found).
	Seen  event.Statement
	Found bool
}

// LocksResult is the scenario's outcome, per case.
type LocksResult struct {
	*Result
	// Row, Short and MDL are the victims of the row-lock case, the
	// sub-second case and the metadata-lock pile-up; Alter is the ALTER of
	// the pile-up (it waits for the idle transaction too).
	Row, Short LockTruth
	Alter      LockTruth
	MDL        []LockTruth
	// Baseline is watch's result over the contention-free OLTP.
	Baseline *watch.Result
	// ByCase are watch's results of each case.
	ByCase map[string]*watch.Result
}

// Locks reproduces what exec hides: (a) a statement waits 1.3 s for a row
// lock held by a transaction whose application sits idle before its
// COMMIT, and (a') the same for 200 ms; (b) the metadata-lock pile-up: a
// transaction read table m and idles, an ALTER TABLE m waits for it, and
// point selects of m queue behind the ALTER; (c) a contention-free OLTP
// baseline, where nothing may be attributed. Each case runs under its own
// watch; the clients time every statement, which is the truth the lab
// prints beside gapscope's.
func Locks(ctx context.Context, o LocksOptions) (*LocksResult, error) {
	o.defaults()
	started := time.Now()
	r := &LocksResult{Result: &Result{Scenario: "locks", Settings: []string{"performance_schema=ON", "statement history consumers ON",
		"innodb_lock_wait_timeout=50 (default)"}}, ByCase: map[string]*watch.Result{}}
	inst, err := startSandbox(ctx, o.Options, r.Result, sandbox.Options{ServerArgs: psArgs})
	if err != nil {
		return nil, err
	}
	defer inst.Stop()
	db, err := inst.Open("")
	if err != nil {
		return nil, err
	}
	defer db.Close()
	// Each case's clients open their connections while its watch runs
	// (none is reused from an earlier case): the capture sees each one
	// from its handshake, as the cases assume.
	db.SetMaxIdleConns(0)
	if err := prepareLockTables(ctx, db); err != nil {
		return nil, err
	}
	monitor, err := createMonitor(ctx, inst, false)
	if err != nil {
		return nil, err
	}
	wopts := watch.Options{DSN: monitor, Ports: []uint16{uint16(inst.Port)}, Iface: "lo",
		PollInterval: 100 * time.Millisecond, KeepLiterals: o.KeepLiterals}
	cases := []struct {
		name string
		run  func(context.Context) error
	}{
		{"row", func(ctx context.Context) (err error) {
			r.Row, err = rowLockCase(ctx, db, "row", 7, o.Hold)
			return err
		}},
		{"short", func(ctx context.Context) (err error) {
			r.Short, err = rowLockCase(ctx, db, "short", 3, o.ShortHold)
			return err
		}},
		{"mdl", func(ctx context.Context) (err error) {
			r.Alter, r.MDL, err = mdlCase(ctx, db, o.MDLHold, o.Selects)
			return err
		}},
		{"baseline", func(ctx context.Context) error { return baselineCase(ctx, db, o.Baseline) }},
	}
	for _, c := range cases {
		o.step(r.Result, "case %s: watching port %d on lo", c.name, inst.Port)
		s, err := startWatch(ctx, wopts)
		if err != nil {
			return nil, err
		}
		// watch runs a while before the case, as it would on a server:
		// its readings of the server's counters precede the waits.
		time.Sleep(1500 * time.Millisecond)
		runErr := c.run(ctx)
		time.Sleep(700 * time.Millisecond) // the server rows reach history_long; the last transactions end
		res, err := s.stop()
		if err != nil {
			return nil, err
		}
		if runErr != nil {
			return nil, fmt.Errorf("case %s: %w", c.name, runErr)
		}
		r.ByCase[c.name] = res
		r.Findings = append(r.Findings, res.Findings...)
		if c.name != "baseline" { // the baseline's tens of thousands are summed in Seen
			r.Statements = append(r.Statements, res.Window...)
		}
		switch c.name {
		case "row":
			find(&r.Row, res.Window)
		case "short":
			find(&r.Short, res.Window)
		case "mdl":
			find(&r.Alter, res.Window)
			for i := range r.MDL {
				find(&r.MDL[i], res.Window)
			}
		case "baseline":
			r.Baseline = res
		}
	}
	locksSeen(r)
	r.Marked = map[string]event.Statement{}
	for _, t := range append([]LockTruth{r.Row, r.Short, r.Alter}, r.MDL...) {
		if t.Found {
			r.Marked[fmt.Sprintf("%s conn %d", t.Case, t.Victim)] = t.Seen
		}
	}
	r.Elapsed = time.Since(started)
	return r, nil
}

func prepareLockTables(ctx context.Context, db *sql.DB) error {
	for _, q := range []string{
		"CREATE DATABASE IF NOT EXISTS f",
		"CREATE TABLE IF NOT EXISTS f.t (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS f.m (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"CREATE TABLE IF NOT EXISTS f.o (id INT PRIMARY KEY, v INT NOT NULL) ENGINE=InnoDB",
		"INSERT IGNORE INTO f.t SELECT seq, 0 FROM mysql.seq_1_to_100",
		"INSERT IGNORE INTO f.m SELECT seq, 0 FROM mysql.seq_1_to_100",
		"INSERT IGNORE INTO f.o SELECT seq, 0 FROM mysql.seq_1_to_1000",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("preparing the tables: %w", err)
		}
	}
	return nil
}

// conn is one client connection with its server id.
type conn struct {
	*sql.Conn
	id uint64
}

func openConn(ctx context.Context, db *sql.DB) (*conn, error) {
	c, err := db.Conn(ctx)
	if err != nil {
		return nil, err
	}
	var id uint64
	if err := c.QueryRowContext(ctx, "SELECT CONNECTION_ID()").Scan(&id); err != nil {
		c.Close()
		return nil, err
	}
	return &conn{Conn: c, id: id}, nil
}

// timed runs q on c and returns how long the client waited for it.
func (c *conn) timed(ctx context.Context, q string) (time.Duration, error) {
	t0 := time.Now()
	_, err := c.ExecContext(ctx, q)
	return time.Since(t0), err
}

// waitState waits until connection id's processlist state contains
// state: the victim is then waiting, not on its way.
func waitState(ctx context.Context, db *sql.DB, id uint64, state string) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var st sql.NullString
		err := db.QueryRowContext(ctx, "SELECT STATE FROM information_schema.PROCESSLIST WHERE ID = ?", id).Scan(&st)
		if err == nil && strings.Contains(st.String, state) {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("connection %d never reached state %q", id, state)
}

// waitRowLock waits until connection id's transaction waits for a lock.
func waitRowLock(ctx context.Context, db *sql.DB, id uint64) error {
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		var n int
		err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id = ? AND trx_state = 'LOCK WAIT'", id).Scan(&n)
		if err == nil && n > 0 {
			return nil
		}
		time.Sleep(5 * time.Millisecond)
	}
	return fmt.Errorf("connection %d never waited for its row lock", id)
}

// rowLockCase: a transaction updates row id and its application idles
// hold before COMMIT; another connection's update of the row waits.
func rowLockCase(ctx context.Context, db *sql.DB, name string, id int, hold time.Duration) (LockTruth, error) {
	a, err := openConn(ctx, db)
	if err != nil {
		return LockTruth{}, err
	}
	defer a.Close()
	b, err := openConn(ctx, db)
	if err != nil {
		return LockTruth{}, err
	}
	defer b.Close()
	update := fmt.Sprintf("UPDATE f.t SET v = v + 1 WHERE id = %d", id)
	if _, err := a.ExecContext(ctx, "BEGIN"); err != nil {
		return LockTruth{}, err
	}
	if _, err := a.ExecContext(ctx, update); err != nil {
		return LockTruth{}, err
	}
	idleFrom := time.Now()
	truth := LockTruth{Case: name, Victim: b.id, Blocker: a.id, Root: a.id, BlockerSQL: update}
	var wg sync.WaitGroup
	var wait time.Duration
	var werr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		wait, werr = b.timed(ctx, update)
	}()
	if err := waitRowLock(ctx, db, b.id); err != nil {
		return truth, err
	}
	time.Sleep(time.Until(idleFrom.Add(hold)))
	truth.IdleUS = time.Since(idleFrom).Microseconds()
	if _, err := a.ExecContext(ctx, "COMMIT"); err != nil {
		return truth, err
	}
	wg.Wait()
	truth.WaitUS = wait.Microseconds()
	return truth, werr
}

// mdlCase: a transaction reads m and idles hold; an ALTER of m waits for
// its metadata lock; selects of m queue behind the ALTER.
func mdlCase(ctx context.Context, db *sql.DB, hold time.Duration, selects int) (LockTruth, []LockTruth, error) {
	a, err := openConn(ctx, db)
	if err != nil {
		return LockTruth{}, nil, err
	}
	defer a.Close()
	d, err := openConn(ctx, db)
	if err != nil {
		return LockTruth{}, nil, err
	}
	defer d.Close()
	victims := make([]*conn, selects)
	for i := range victims {
		if victims[i], err = openConn(ctx, db); err != nil {
			return LockTruth{}, nil, err
		}
		defer victims[i].Close()
	}
	read := "SELECT v FROM f.m WHERE id = 1"
	if _, err := a.ExecContext(ctx, "BEGIN"); err != nil {
		return LockTruth{}, nil, err
	}
	if _, err := a.ExecContext(ctx, read); err != nil {
		return LockTruth{}, nil, err
	}
	idleFrom := time.Now()
	alter := LockTruth{Case: "mdl-alter", Victim: d.id, Blocker: a.id, Root: a.id, BlockerSQL: read}
	var wg sync.WaitGroup
	var alterErr error
	alterSent := time.Now()
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, alterErr = d.timed(ctx, "ALTER TABLE f.m ADD COLUMN x"+fmt.Sprint(a.id)+" INT")
	}()
	if err := waitState(ctx, db, d.id, "metadata lock"); err != nil {
		return alter, nil, err
	}
	truths := make([]LockTruth, selects)
	errs := make([]error, selects)
	for i, v := range victims {
		truths[i] = LockTruth{Case: "mdl-select", Victim: v.id, Blocker: d.id, Root: a.id, BlockerSQL: read}
		wg.Add(1)
		go func() {
			defer wg.Done()
			w, err := v.timed(ctx, fmt.Sprintf("SELECT v FROM f.m WHERE id = %d", i+2))
			truths[i].WaitUS, errs[i] = w.Microseconds(), err
		}()
	}
	for _, v := range victims {
		if err := waitState(ctx, db, v.id, "metadata lock"); err != nil {
			return alter, truths, err
		}
	}
	time.Sleep(time.Until(idleFrom.Add(hold)))
	alter.IdleUS = time.Since(idleFrom).Microseconds()
	for i := range truths {
		truths[i].IdleUS = alter.IdleUS
	}
	if _, err := a.ExecContext(ctx, "COMMIT"); err != nil {
		return alter, truths, err
	}
	// The ALTER waited until the COMMIT let the table go; what it did then
	// (its own work) is not a wait. Its client cannot see the instant, the
	// blocker's can: both clients share the host's clock.
	alter.WaitUS = time.Since(alterSent).Microseconds()
	wg.Wait()
	if alterErr != nil {
		return alter, truths, alterErr
	}
	for _, err := range errs {
		if err != nil {
			return alter, truths, err
		}
	}
	return alter, truths, nil
}

// baselineCase: four clients run short transactions on rows of their own
// (no two ever touch the same row) for d.
func baselineCase(ctx context.Context, db *sql.DB, d time.Duration) error {
	const clients = 4
	var wg sync.WaitGroup
	errs := make([]error, clients)
	until := time.Now().Add(d)
	for c := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			cn, err := openConn(ctx, db)
			if err != nil {
				errs[c] = err
				return
			}
			defer cn.Close()
			for i := 0; time.Now().Before(until); i++ {
				id := 1 + c*250 + i%250
				for _, q := range []string{"BEGIN", fmt.Sprintf("SELECT v FROM f.o WHERE id = %d", id),
					fmt.Sprintf("UPDATE f.o SET v = v + 1 WHERE id = %d", id), "COMMIT"} {
					if _, err := cn.ExecContext(ctx, q); err != nil {
						errs[c] = err
						return
					}
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// find fills t.Seen with the victim's statement: its connection's slowest
// UPDATE, SELECT or ALTER of the case.
func find(t *LockTruth, window []event.Statement) {
	for _, s := range window {
		if s.ConnID != t.Victim || s.Cmd != "COM_QUERY" {
			continue
		}
		u := strings.ToUpper(s.SQL)
		if !strings.HasPrefix(u, "UPDATE") && !strings.HasPrefix(u, "SELECT V") && !strings.HasPrefix(u, "ALTER") {
			continue
		}
		if !t.Found || s.ClientUS > t.Seen.ClientUS {
			t.Seen, t.Found = s, true
		}
	}
}

// locksSeen writes what each case's victim waited beside what gapscope
// said.
func locksSeen(r *LocksResult) {
	line := func(t LockTruth) {
		if !t.Found {
			r.Seen = append(r.Seen, fmt.Sprintf("%s: conn %d waited %s at its client; not seen on the wire", t.Case, t.Victim, ms(t.WaitUS)))
			return
		}
		s := t.Seen
		if s.LockWait == nil || s.BlockedBy == nil {
			r.Seen = append(r.Seen, fmt.Sprintf("%s: conn %d waited %s at its client (blocker conn %d); gapscope: exec %s, no lock wait named",
				t.Case, t.Victim, ms(t.WaitUS), t.Blocker, ms(s.ExecUS)))
			return
		}
		b := s.BlockedBy
		root := b.RootOrSelf()
		r.Seen = append(r.Seen, fmt.Sprintf("%s: conn %d waited %s at its client, gapscope %s (%s lock, %s); blocker conn %d (truth %d), root conn %d %s idle %s (truth %d, idle %s)",
			t.Case, t.Victim, ms(t.WaitUS), ms(s.LockWaitUS), b.Kind, b.Confidence, b.ConnID, t.Blocker, root.ConnID, root.State, ms(root.IdleUS), t.Root, ms(t.IdleUS)))
	}
	line(r.Row)
	line(r.Short)
	line(r.Alter)
	for _, t := range r.MDL {
		line(t)
	}
	if r.Baseline != nil {
		n := 0
		for _, s := range r.Baseline.Window {
			if s.LockWait != nil {
				n++
			}
		}
		r.Seen = append(r.Seen, fmt.Sprintf("baseline: %d statements, %d transactions, %d lock waits attributed",
			len(r.Baseline.Window), r.Baseline.Transactions.Count, n))
	}
}

func ms(us int64) string { return fmt.Sprintf("%.1f ms", float64(us)/1000) }
