package collect

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// lockFake is a server that answers each query with the canned rows of
// the first answer whose match the query contains, as go-sql-driver's
// text protocol hands them to database/sql ([]byte, nil for NULL), and
// records the queries.
type lockFake struct {
	mu      sync.Mutex
	answers []lockAnswer
	queries []string
}

type lockAnswer struct {
	match string
	cols  []string
	rows  [][]any // string, int, int64 or nil
}

func (f *lockFake) open(t *testing.T) *sql.DB {
	t.Helper()
	db := sql.OpenDB(lockFakeConnector{f})
	t.Cleanup(func() { db.Close() })
	return db
}

// checkMarked fails t for a query without gapscope's comment.
func (f *lockFake) checkMarked(t *testing.T) {
	t.Helper()
	f.mu.Lock()
	defer f.mu.Unlock()
	for _, q := range f.queries {
		if !strings.HasPrefix(q, Mark+" ") {
			t.Errorf("query without %s: %.80s", Mark, q)
		}
	}
}

type lockFakeConnector struct{ f *lockFake }

func (c lockFakeConnector) Connect(context.Context) (driver.Conn, error) { return lockFakeConn(c), nil }
func (c lockFakeConnector) Driver() driver.Driver                        { return lockFakeDriver{} }

type lockFakeDriver struct{}

func (lockFakeDriver) Open(string) (driver.Conn, error) {
	return nil, errors.New("open through the connector")
}

type lockFakeConn struct{ f *lockFake }

func (lockFakeConn) Prepare(string) (driver.Stmt, error) { return nil, errors.New("fake: no prepare") }
func (lockFakeConn) Close() error                        { return nil }
func (lockFakeConn) Begin() (driver.Tx, error)           { return nil, errors.New("fake: no transactions") }

func (c lockFakeConn) QueryContext(_ context.Context, q string, _ []driver.NamedValue) (driver.Rows, error) {
	c.f.mu.Lock()
	defer c.f.mu.Unlock()
	c.f.queries = append(c.f.queries, q)
	for _, a := range c.f.answers {
		if strings.Contains(q, a.match) {
			return &lockFakeRows{cols: a.cols, rows: a.rows}, nil
		}
	}
	return nil, fmt.Errorf("fake: unexpected query %.100q", q)
}

type lockFakeRows struct {
	cols []string
	rows [][]any
	i    int
}

func (r *lockFakeRows) Columns() []string { return r.cols }
func (r *lockFakeRows) Close() error      { return nil }

func (r *lockFakeRows) Next(dest []driver.Value) error {
	if r.i >= len(r.rows) {
		return io.EOF
	}
	for j, v := range r.rows[r.i] {
		switch v := v.(type) {
		case nil:
			dest[j] = nil
		case string:
			dest[j] = []byte(v)
		case int:
			dest[j] = []byte(strconv.Itoa(v))
		case int64:
			dest[j] = []byte(strconv.FormatInt(v, 10))
		default:
			panic(fmt.Sprintf("fake: value %T", v))
		}
	}
	r.i++
	return nil
}

var rowWaitCols = []string{"waiter", "blocker", "blocker_trx", "lock_type", "schema", "table", "index", "req", "held",
	"data", "wait_started", "wait_s", "trx_started", "trx_state", "trx_query", "rows_locked"}

var processCols = []string{"ID", "DB", "COMMAND", "TIME_MS", "STATE", "INFO"}

func TestRootsFollowsChains(t *testing.T) {
	// The pile-up: 5 holds the table idle, ALTER 6 waits for it, selects
	// 7 and 8 wait behind the ALTER.
	waits := []LockWait{{WaiterID: 7, BlockerID: 6}, {WaiterID: 6, BlockerID: 5}, {WaiterID: 8, BlockerID: 6}}
	want := map[uint64]uint64{6: 5, 7: 5, 8: 5}
	if got := Roots(waits); !maps.Equal(got, want) {
		t.Errorf("Roots = %v, want %v", got, want)
	}
	if got := Roots(nil); len(got) != 0 {
		t.Errorf("Roots(nil) = %v", got)
	}
}

func TestRootsCycleAndUnknown(t *testing.T) {
	waits := []LockWait{
		{WaiterID: 1, BlockerID: 2}, {WaiterID: 2, BlockerID: 1}, // a deadlock not yet broken
		{WaiterID: 3, BlockerID: 1},                              // waits into the cycle
		{WaiterID: 5, BlockerID: 0},                              // blocker unknown
		{WaiterID: 6, BlockerID: 5},                              // behind it
		{WaiterID: 7, BlockerID: 1}, {WaiterID: 7, BlockerID: 9}, // into the cycle, and for 9 (not waiting)
		{WaiterID: 10, BlockerID: 10}, // itself (never reported, still safe)
	}
	want := map[uint64]uint64{1: 0, 2: 0, 3: 0, 5: 0, 6: 0, 7: 9, 10: 0}
	if got := Roots(waits); !maps.Equal(got, want) {
		t.Errorf("Roots = %v, want %v", got, want)
	}
}

// pileUpLocks are performance_schema.metadata_locks rows read during the
// pile-up on MariaDB 10.11 (threads mapped to processlist ids): 5 idle in
// a transaction that read t, ALTER 6 upgrading to EXCLUSIVE, selects 7, 8.
var pileUpLocks = []mdlLock{
	{Conn: 5, Namespace: "TABLE", Schema: "x", Name: "t", Mode: "SHARED_READ", Granted: true},
	{Conn: 6, Namespace: "TABLE", Schema: "x", Name: "t", Mode: "SHARED_UPGRADABLE", Granted: true},
	{Conn: 6, Namespace: "TABLE", Schema: "x", Name: "t", Mode: "EXCLUSIVE"},
	{Conn: 7, Namespace: "TABLE", Schema: "x", Name: "t", Mode: "SHARED_READ"},
	{Conn: 8, Namespace: "TABLE", Schema: "x", Name: "t", Mode: "SHARED_READ"},
}

func TestMDLWaitsPileUp(t *testing.T) {
	waits := mdlWaits(pileUpLocks, "test")
	type edge struct {
		waiter, blocker uint64
		pending         bool
		req, held       string
	}
	var got []edge
	for _, w := range waits {
		got = append(got, edge{w.WaiterID, w.BlockerID, w.BlockerPending, w.RequestedMode, w.HeldMode})
		if w.Kind != event.LockMetadata || w.LockType != "TABLE" || w.Schema != "x" || w.Table != "t" {
			t.Errorf("wait %+v: want a metadata lock on TABLE x.t", w)
		}
	}
	want := []edge{
		{6, 5, false, "EXCLUSIVE", "SHARED_READ"}, // the ALTER waits for the idle reader
		{7, 6, true, "SHARED_READ", "EXCLUSIVE"},  // the selects wait behind the ALTER's request...
		{8, 6, true, "SHARED_READ", "EXCLUSIVE"},  // ...not for the reader: SHARED_READ is compatible
	}
	if !slices.Equal(got, want) {
		t.Errorf("edges = %+v\nwant    %+v", got, want)
	}
	roots := Roots(waits)
	for _, id := range []uint64{6, 7, 8} {
		if roots[id] != 5 {
			t.Errorf("root of %d = %d, want 5 (the idle transaction)", id, roots[id])
		}
	}
}

func TestMDLWaitsMatrices(t *testing.T) {
	lock := func(conn uint64, ns, mode string, granted bool) mdlLock {
		return mdlLock{Conn: conn, Namespace: ns, Schema: "s", Name: "o", Mode: mode, Granted: granted}
	}
	for _, c := range []struct {
		name  string
		locks []mdlLock
		want  []uint64 // blockers of connection 2, in order
	}{
		{"write behind an ALTER copying (SNW)", []mdlLock{lock(1, "TABLE", "SHARED_NO_WRITE", true), lock(2, "TABLE", "SHARED_WRITE", false)}, []uint64{1}},
		{"LOCK TABLES WRITE blocks a read", []mdlLock{lock(1, "TABLE", "SHARED_NO_READ_WRITE", true), lock(2, "TABLE", "SHARED_READ", false)}, []uint64{1}},
		{"a second ALTER waits for the first one's SU", []mdlLock{lock(1, "TABLE", "SHARED_UPGRADABLE", true), lock(3, "TABLE", "SHARED_READ", true), lock(2, "TABLE", "SHARED_UPGRADABLE", false)}, []uint64{1}},
		{"pending SNRW (LOCK TABLES WRITE) goes before a read", []mdlLock{lock(1, "TABLE", "SHARED_WRITE", true), lock(3, "TABLE", "SHARED_NO_READ_WRITE", false), lock(2, "TABLE", "SHARED_READ", false)}, []uint64{3}},
		{"pending SNW does not go before a read", []mdlLock{lock(1, "TABLE", "SHARED_WRITE", true), lock(3, "TABLE", "SHARED_NO_WRITE", false), lock(2, "TABLE", "SHARED_READ", false)}, []uint64{0}},
		{"other objects do not count", []mdlLock{{Conn: 1, Namespace: "TABLE", Schema: "s", Name: "other", Mode: "EXCLUSIVE", Granted: true}, lock(2, "TABLE", "SHARED_READ", false)}, []uint64{0}},
		{"schema: DROP DATABASE (X) waits for a DDL's IX", []mdlLock{lock(1, "SCHEMA", "INTENTION_EXCLUSIVE", true), lock(2, "SCHEMA", "EXCLUSIVE", false)}, []uint64{1}},
		{"schema: IX and IX are compatible", []mdlLock{lock(1, "SCHEMA", "INTENTION_EXCLUSIVE", true), lock(2, "SCHEMA", "INTENTION_EXCLUSIVE", false)}, []uint64{0}},
		{"backup: DML waits for FLUSH TABLES WITH READ LOCK", []mdlLock{lock(1, "BACKUP", "BACKUP_FTWRL1", true), lock(2, "BACKUP", "BACKUP_DML", false)}, []uint64{1}},
		{"backup: FTWRL waits for running DML, not for open transactions", []mdlLock{lock(1, "BACKUP", "BACKUP_DML", true), lock(3, "BACKUP", "BACKUP_TRANS_DML", true), lock(2, "BACKUP", "BACKUP_FTWRL1", false)}, []uint64{1, 3}},
		{"backup: commit waits for FTWRL2", []mdlLock{lock(1, "BACKUP", "BACKUP_FTWRL2", true), lock(3, "BACKUP", "BACKUP_DDL", true), lock(2, "BACKUP", "BACKUP_COMMIT", false)}, []uint64{1}},
		{"an unknown mode is taken as exclusive", []mdlLock{lock(1, "TABLE", "SHARED_READ", true), lock(2, "TABLE", "SOMETHING_NEW", false)}, []uint64{1}},
	} {
		t.Run(c.name, func(t *testing.T) {
			var got []uint64
			for _, w := range mdlWaits(c.locks, "test") {
				if w.WaiterID == 2 {
					got = append(got, w.BlockerID)
				}
			}
			if !slices.Equal(got, c.want) {
				t.Errorf("blockers of 2 = %v, want %v", got, c.want)
			}
		})
	}
}

func TestDropGrantedLeavesInstantPending(t *testing.T) {
	locks := []mdlLock{
		{Conn: 1, Namespace: "TABLE", Mode: "SHARED_READ", Granted: true},
		{Conn: 2, Namespace: "TABLE", Mode: "EXCLUSIVE"},   // waits, as the processlist says
		{Conn: 3, Namespace: "TABLE", Mode: "SHARED_READ"}, // listed PENDING the instant before its grant
		{Conn: 4, Namespace: "TABLE", Mode: "SHARED_READ"}, // not in the processlist read: kept
	}
	procs := []lockProcess{{ID: 2, State: "Waiting for table metadata lock"}, {ID: 3, State: "Opening tables"}}
	var got []uint64
	for _, l := range dropGranted(locks, procs) {
		got = append(got, l.Conn)
	}
	if !slices.Equal(got, []uint64{1, 2, 4}) {
		t.Errorf("kept %v, want [1 2 4]", got)
	}
}

// TestReadLockWaitsMariaDBRowScan runs the MariaDB row-lock path on rows
// as MariaDB 10.11 gave them: an UPDATE waiting for an idle transaction's
// X lock, and a DELETE waiting for a record that two read-only
// transactions (trx_id 0 both, one of them locking rows) may hold.
func TestReadLockWaitsMariaDBRowScan(t *testing.T) {
	f := &lockFake{answers: []lockAnswer{
		{match: "INNODB_LOCK_WAITS", cols: rowWaitCols, rows: [][]any{
			{23, 22, "35", "RECORD", nil, "`x`.`t`", "PRIMARY", "X", "X", "7", 1796171693, 4, 1796171692, "RUNNING", nil, 1},
			{32, 31, "0", "RECORD", nil, "`x`.`t` /* Partition `p1` */", "PRIMARY", "X", "S", "11", 1796171817, 1, 1796171816, "RUNNING", nil, 1},
			{32, 30, "0", "RECORD", nil, "`x`.`t` /* Partition `p1` */", "PRIMARY", "X", "S", "11", 1796171817, 1, 1796171815, "RUNNING", nil, 1},
			{32, 29, "0", "RECORD", nil, "`x`.`t` /* Partition `p1` */", "PRIMARY", "X", "S", "11", 1796171817, 1, 1796171815, "RUNNING", nil, 0},
		}},
		{match: "information_schema.PROCESSLIST", cols: processCols, rows: [][]any{
			{23, "x", "Query", "4005.363", "Updating", nil},
			{22, "x", "Sleep", "4907.568", "", nil},
			{32, "x", "Query", "1200.000", "Updating", nil},
			{31, "x", "Sleep", "3000.000", "", nil},
		}},
	}}
	src := LockSources{Rows: SrcInnoDBLockWaits, MDL: SrcProcesslist, InnoDBTrx: true, timeMS: true}
	waits, err := ReadLockWaits(context.Background(), f.open(t), src)
	if err != nil {
		t.Fatal(err)
	}
	f.checkMarked(t)
	if len(waits) != 3 {
		t.Fatalf("got %d waits, want 3: %+v", len(waits), waits)
	}
	w := waits[0]
	want := LockWait{WaiterID: 23, BlockerID: 22, RootID: 22, Kind: event.LockRow, LockType: "RECORD", Schema: "x", Table: "t",
		Index: "PRIMARY", LockData: "7", RequestedMode: "X", HeldMode: "X",
		WaitStarted: time.Unix(1796171693, 0), WaitSeconds: 4,
		BlockerTrx: true, BlockerTrxStarted: time.Unix(1796171692, 0), BlockerTrxState: "RUNNING",
		Waiter:  ProcessState{Read: true, Command: "Query", State: "Updating", TimeMS: 4005},
		Blocker: ProcessState{Read: true, Command: "Sleep", TimeMS: 4907},
		Source:  "information_schema.INNODB_LOCK_WAITS+INNODB_LOCKS+INNODB_TRX, processlist"}
	if w != want {
		t.Errorf("wait =\n%+v\nwant\n%+v", w, want)
	}
	if !w.BlockerIdle() {
		t.Error("the blocker (trx_query NULL, Sleep) is not idle")
	}
	// Transaction id 0: 31 and 30 lock rows, 29 does not.
	for i, b := range []uint64{31, 30} {
		w := waits[1+i]
		if w.WaiterID != 32 || w.BlockerID != b || !w.Ambiguous || w.Schema != "x" || w.Table != "t" || w.HeldMode != "S" {
			t.Errorf("wait %d = %+v, want 32 waiting on candidate %d (ambiguous) on x.t", 1+i, w, b)
		}
	}
	if waits[2].Blocker.Read {
		t.Errorf("30 is not in the processlist, yet read: %+v", waits[2].Blocker)
	}
}

// TestReadLockWaitsMySQLRowScan runs the MySQL 8 path on rows shaped as
// performance_schema.data_locks documents them (schema and table in
// columns of their own, LOCK_MODE "X,REC_NOT_GAP"). No MySQL server runs
// here: the query itself is checked against MySQL's documented columns
// only.
func TestReadLockWaitsMySQLRowScan(t *testing.T) {
	f := &lockFake{answers: []lockAnswer{
		{match: "performance_schema.data_lock_waits", cols: rowWaitCols, rows: [][]any{
			{48, 47, "1554", "RECORD", "shop", "orders", "PRIMARY", "X,REC_NOT_GAP", "X,REC_NOT_GAP", "1001", 1796000010, 2, 1796000000, "RUNNING", "UPDATE orders SET state = 2 WHERE id = 1002", 2},
			{49, 47, "1554", "TABLE", "shop", "orders", nil, "X", "IX", nil, 1796000011, 1, 1796000000, "RUNNING", "UPDATE orders SET state = 2 WHERE id = 1002", 2},
		}},
		{match: "information_schema.PROCESSLIST", cols: processCols, rows: [][]any{
			{48, "shop", "Query", "2000", "updating", nil},
			{47, "shop", "Query", "10000", "executing", nil},
		}},
	}}
	src := LockSources{Rows: SrcDataLockWaits, MDL: SrcMetadataLocks, InnoDBTrx: true}
	f.answers = append(f.answers, lockAnswer{match: "performance_schema.metadata_locks", cols: []string{"a", "b", "c", "d", "e", "f"}})
	waits, err := ReadLockWaits(context.Background(), f.open(t), src)
	if err != nil {
		t.Fatal(err)
	}
	f.checkMarked(t)
	if len(waits) != 2 {
		t.Fatalf("got %d waits: %+v", len(waits), waits)
	}
	w := waits[0]
	if w.WaiterID != 48 || w.BlockerID != 47 || w.Kind != event.LockRow || w.Schema != "shop" || w.Table != "orders" ||
		w.RequestedMode != "X,REC_NOT_GAP" || w.LockData != "1001" || w.Ambiguous || w.BlockerIdle() ||
		w.BlockerTrxQuery == "" || !w.Waiter.Read || w.Blocker.Command != "Query" || !strings.HasPrefix(w.Source, SrcDataLockWaits) {
		t.Errorf("row wait = %+v", w)
	}
	if waits[1].Kind != event.LockTable || waits[1].LockType != "TABLE" || waits[1].HeldMode != "IX" {
		t.Errorf("InnoDB table lock wait = %+v, want kind table", waits[1])
	}
}

// TestReadLockWaitsMetadataLockInfo runs the fallback on what MariaDB
// 10.11 showed during the pile-up without the metadata_locks instrument:
// METADATA_LOCK_INFO lists granted locks only; the processlist names the
// waiters, their statements the table.
func TestReadLockWaitsMetadataLockInfo(t *testing.T) {
	f := &lockFake{answers: []lockAnswer{
		{match: "METADATA_LOCK_INFO", cols: []string{"THREAD_ID", "LOCK_MODE", "LOCK_TYPE", "TABLE_SCHEMA", "TABLE_NAME"}, rows: [][]any{
			{6, "MDL_BACKUP_ALTER_COPY", "Backup lock", "", ""},
			{6, "MDL_INTENTION_EXCLUSIVE", "Schema metadata lock", "x", ""},
			{5, "MDL_SHARED_READ", "Table metadata lock", "x", "t"},
			{6, "MDL_SHARED_UPGRADABLE", "Table metadata lock", "x", "t"},
			{9, "MDL_SHARED_WRITE", "Table metadata lock", "x", "u"},
		}},
		{match: "INNODB_TRX WHERE", cols: []string{"id", "started", "state", "query"}, rows: [][]any{
			{5, 1796171600, "RUNNING", nil},
		}},
		{match: "information_schema.PROCESSLIST", cols: processCols, rows: [][]any{
			{5, "x", "Sleep", "24150.918", "", nil},
			{6, "x", "Query", "23650.876", "Waiting for table metadata lock", "ALTER TABLE x.t ADD COLUMN w INT"},
			{7, "x", "Query", "23147.065", "Waiting for table metadata lock", "SELECT * FROM t WHERE id = 7"},
			{8, "y", "Query", "23143.880", "Waiting for table metadata lock", "/* app */ SELECT v FROM `x`.`t` JOIN y.z USING (id)"},
			{11, "y", "Query", "100.000", "Waiting for table metadata lock", "SELECT * FROM elsewhere"},
		}},
	}}
	src := LockSources{MDL: SrcMetadataLockInfo, InnoDBTrx: true, timeMS: true}
	waits, err := ReadLockWaits(context.Background(), f.open(t), src)
	if err != nil {
		t.Fatal(err)
	}
	f.checkMarked(t)
	type edge struct {
		waiter, blocker, root uint64
		req                   string
		inferred              bool
	}
	var got []edge
	for _, w := range waits {
		got = append(got, edge{w.WaiterID, w.BlockerID, w.RootID, w.RequestedMode, w.Inferred})
	}
	want := []edge{
		{6, 5, 5, "EXCLUSIVE", true},   // upgrading: it holds SHARED_UPGRADABLE on x.t
		{7, 6, 5, "SHARED_READ", true}, // t in its database x
		{8, 6, 5, "SHARED_READ", true}, // `x`.`t` named in full
		{11, 0, 0, "", false},          // no table someone holds: unknown
	}
	if !slices.Equal(got, want) {
		t.Errorf("edges = %+v\nwant    %+v", got, want)
	}
	alter := waits[0]
	if !alter.BlockerTrx || alter.BlockerTrxQuery != "" || !alter.BlockerIdle() || alter.BlockerTrxStarted != time.Unix(1796171600, 0) {
		t.Errorf("the ALTER's blocker should be the idle transaction: %+v", alter)
	}
	if !waits[1].BlockerPending || waits[1].HeldMode != "EXCLUSIVE" || waits[1].Blocker.State != "Waiting for table metadata lock" {
		t.Errorf("the select's blocker should be the ALTER's pending EXCLUSIVE: %+v", waits[1])
	}
	if !strings.Contains(waits[1].Source, SrcMetadataLockInfo) || !strings.Contains(waits[3].Source, "blocker unknown") {
		t.Errorf("sources: %q, %q", waits[1].Source, waits[3].Source)
	}
}

// TestReadLockWaitsProcesslistOnly: no lock table tells the blockers;
// every waiter is reported with blocker 0, the Source saying why.
func TestReadLockWaitsProcesslistOnly(t *testing.T) {
	f := &lockFake{answers: []lockAnswer{
		{match: "information_schema.PROCESSLIST", cols: processCols, rows: [][]any{
			{6, "x", "Query", "1500", "Waiting for table metadata lock", "ALTER TABLE t ADD COLUMN w INT"},
			{7, "x", "Query", "1000", "Waiting for table metadata lock", "SELECT * FROM t"},
			{8, "x", "Query", "900", "Waiting for table level lock", "SELECT * FROM m"},
			{9, "x", "Query", "800", "Waiting for backup lock", "INSERT INTO t VALUES (1)"},
		}},
	}}
	waits, err := ReadLockWaits(context.Background(), f.open(t), LockSources{MDL: SrcProcesslist, timeMS: true})
	if err != nil {
		t.Fatal(err)
	}
	f.checkMarked(t)
	kinds := map[uint64]string{6: event.LockMetadata, 7: event.LockMetadata, 8: event.LockTable, 9: event.LockMetadata}
	if len(waits) != len(kinds) {
		t.Fatalf("got %d waits: %+v", len(waits), waits)
	}
	for _, w := range waits {
		if w.BlockerID != 0 || w.RootID != 0 || w.Kind != kinds[w.WaiterID] || !strings.Contains(w.Source, "blocker unknown") || !w.Waiter.Read {
			t.Errorf("wait = %+v", w)
		}
	}
	for _, w := range waits {
		if w.WaiterID == 9 && w.LockType != "BACKUP" {
			t.Errorf("backup lock waiter's namespace = %q", w.LockType)
		}
	}
}

func TestReadLockWaitsNothingWaiting(t *testing.T) {
	f := &lockFake{answers: []lockAnswer{
		{match: "INNODB_LOCK_WAITS", cols: rowWaitCols},
		{match: "performance_schema.metadata_locks", cols: []string{"a", "b", "c", "d", "e", "f"}},
		{match: "information_schema.PROCESSLIST", cols: processCols},
	}}
	src := LockSources{Rows: SrcInnoDBLockWaits, MDL: SrcMetadataLocks, TableHandles: true, InnoDBTrx: true}
	waits, err := ReadLockWaits(context.Background(), f.open(t), src)
	if err != nil || waits != nil {
		t.Errorf("ReadLockWaits = %v, %v; want nil, nil", waits, err)
	}
	f.checkMarked(t)
	if len(f.queries) != 3 {
		t.Errorf("%d queries with nothing waiting, want 3: %q", len(f.queries), f.queries)
	}
}

// TestReadLockWaitsKeepsGoing: a source that fails (a missing privilege)
// does not hide what the others read.
func TestReadLockWaitsKeepsGoing(t *testing.T) {
	f := &lockFake{answers: []lockAnswer{
		{match: "information_schema.PROCESSLIST", cols: processCols, rows: [][]any{
			{7, "x", "Query", "1000", "Waiting for table metadata lock", "SELECT * FROM t"},
		}},
	}}
	waits, err := ReadLockWaits(context.Background(), f.open(t), LockSources{Rows: SrcInnoDBLockWaits, MDL: SrcProcesslist})
	if err == nil || !strings.Contains(err.Error(), "INNODB_LOCK_WAITS") {
		t.Errorf("error = %v, want the row source's", err)
	}
	if len(waits) != 1 || waits[0].WaiterID != 7 {
		t.Errorf("waits = %+v, want the metadata lock waiter", waits)
	}
}

func TestTableLockWaits(t *testing.T) {
	// MariaDB 10.11: a MyISAM UPDATE running (WRITE) and a SELECT waiting
	// with its READ handle; 21 also reads, waiting behind 19 too.
	handles := []tableHandle{
		{Conn: 19, Schema: "x", Name: "m", Internal: "WRITE", Ext: "WRITE EXTERNAL"},
		{Conn: 20, Schema: "x", Name: "m", Internal: "READ", Ext: "READ EXTERNAL"},
		{Conn: 21, Schema: "x", Name: "m", Internal: "READ", Ext: "READ EXTERNAL"},
		{Conn: 22, Schema: "x", Name: "other", Internal: "WRITE", Ext: "WRITE EXTERNAL"},
	}
	waiters := []lockProcess{{ID: 20, State: "Waiting for table level lock"}, {ID: 21, State: "Waiting for table level lock"}, {ID: 23, State: "Waiting for table level lock"}}
	waits := tableLockWaits(waiters, handles)
	if len(waits) != 3 {
		t.Fatalf("waits = %+v", waits)
	}
	for i, w := range waits[:2] {
		if w.WaiterID != waiters[i].ID || w.BlockerID != 19 || w.Kind != event.LockTable || w.Table != "m" || w.RequestedMode != "READ" || w.HeldMode != "WRITE" {
			t.Errorf("wait = %+v, want %d blocked by 19's WRITE on x.m", w, waiters[i].ID)
		}
	}
	if waits[2].WaiterID != 23 || waits[2].BlockerID != 0 {
		t.Errorf("no handle: %+v, want blocker unknown", waits[2])
	}
	for _, c := range []struct {
		a, b string
		want bool
	}{{"READ", "READ", false}, {"READ", "WRITE", true}, {"WRITE ALLOW WRITE", "WRITE ALLOW WRITE", false},
		{"READ", "WRITE CONCURRENT INSERT", false}, {"READ NO INSERT", "WRITE CONCURRENT INSERT", true}, {"WRITE LOW PRIORITY", "READ HIGH PRIORITY", true}} {
		if got := thrLockConflicts(c.a, c.b); got != c.want {
			t.Errorf("thrLockConflicts(%q, %q) = %v", c.a, c.b, got)
		}
	}
}

func TestSplitQuotedName(t *testing.T) {
	for in, want := range map[string][2]string{
		"`x`.`t`":                        {"x", "t"},
		"`my``db`.`t.1`":                 {"my`db", "t.1"},
		"`x`.`t` /* Partition `p1` */":   {"x", "t"},
		"`t`":                            {"", "t"},
		"plain":                          {"", "plain"},
		"`unterminated":                  {"", "`unterminated"},
		"`x`.`t` /* Subpartition `s` */": {"x", "t"},
	} {
		s, tb := splitQuotedName(in)
		if [2]string{s, tb} != want {
			t.Errorf("splitQuotedName(%q) = %q, %q; want %q", in, s, tb, want)
		}
	}
}

func TestStatementTablesAndMode(t *testing.T) {
	named := statementTables("SELECT a.v, 'x.t' FROM `Shop`.`Orders` a JOIN items USING (id) WHERE note = \"lk.t\"", "app")
	for _, k := range []tableKey{{"shop", "orders"}, {"app", "items"}, {"app", "orders"}} {
		if !named[k] {
			t.Errorf("%v not found in %v", k, named)
		}
	}
	for _, k := range []tableKey{{"x", "t"}, {"lk", "t"}} {
		if named[k] {
			t.Errorf("%v read from a string literal", k)
		}
	}
	for in, want := range map[string]string{
		"SELECT * FROM t":                "SHARED_READ",
		"/* gapscope */ select 1 from t": "SHARED_READ",
		"SELECT * FROM t FOR UPDATE":     "SHARED_WRITE",
		"update t set v = 1":             "SHARED_WRITE",
		"ALTER TABLE t ADD COLUMN w INT": "SHARED_UPGRADABLE",
		"CREATE INDEX k ON t (v)":        "SHARED_UPGRADABLE",
		"DROP TABLE t":                   "EXCLUSIVE",
		"LOCK TABLES t WRITE":            "SHARED_NO_READ_WRITE",
		"LOCK TABLES t READ":             "SHARED_READ_ONLY",
		"CALL p()":                       "",
	} {
		if got := statementMode(in, false); got != want {
			t.Errorf("statementMode(%q) = %q, want %q", in, got, want)
		}
	}
	if got := statementMode("ALTER TABLE t ADD COLUMN w INT", true); got != "EXCLUSIVE" {
		t.Errorf("an upgrading ALTER asks %q, want EXCLUSIVE", got)
	}
}

func TestWaitStates(t *testing.T) {
	for state, want := range map[string]string{
		"Waiting for table metadata lock":  event.LockMetadata,
		"Waiting for schema metadata lock": event.LockMetadata,
		"Waiting for backup lock":          event.LockMetadata,
		"Waiting for global read lock":     event.LockMetadata,
		"Waiting for table level lock":     event.LockTable,
		"Waiting for table flush":          "",
		"Updating":                         "",
		"":                                 "",
	} {
		if got := waitKindOfState(state); got != want {
			t.Errorf("waitKindOfState(%q) = %q, want %q", state, got, want)
		}
	}
	for state, want := range map[string]string{
		"Waiting for table metadata lock":            "TABLE",
		"Waiting for stored procedure metadata lock": "PROCEDURE",
		"Waiting for backup lock":                    "BACKUP",
		"Waiting for global read lock":               "GLOBAL",
	} {
		if got := stateNamespace(state); got != want {
			t.Errorf("stateNamespace(%q) = %q, want %q", state, got, want)
		}
	}
	for typ, want := range map[string]string{"Table metadata lock": "TABLE", "Schema metadata lock": "SCHEMA", "Backup lock": "BACKUP",
		"Stored function metadata lock": "FUNCTION", "User lock": "USER"} {
		if got := lockInfoNamespace(typ); got != want {
			t.Errorf("lockInfoNamespace(%q) = %q, want %q", typ, got, want)
		}
	}
}
