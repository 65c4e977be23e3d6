package collect

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// Lock-wait reads: who blocks a statement that has been running for long.
// watch calls ReadLockWaits only while some statement has run longer than
// a threshold; it maps each blocker's processlist id to its wire
// connection. The reader only reads the server (docs/performance.md,
// "Lock-wait reads", for its cost).

// The tables a LockWait can come from (LockWait.Source, LockSources).
const (
	SrcInnoDBLockWaits  = "information_schema.INNODB_LOCK_WAITS"
	SrcDataLockWaits    = "performance_schema.data_lock_waits"
	SrcMetadataLocks    = "performance_schema.metadata_locks"
	SrcMetadataLockInfo = "information_schema.METADATA_LOCK_INFO"
	SrcTableHandles     = "performance_schema.table_handles"
	SrcProcesslist      = "processlist"
	SrcInnoDBTrx        = "information_schema.INNODB_TRX"
)

// LockWait is one waiting connection and one connection it waits for.
// A waiter blocked by several connections has one LockWait for each.
type LockWait struct {
	// WaiterID is the waiting connection's processlist id (CONNECTION_ID()).
	WaiterID uint64
	// BlockerID is the processlist id of the immediate blocker: a
	// connection holding a conflicting lock, or (metadata locks) one whose
	// request waits ahead and takes priority (BlockerPending). 0: unknown.
	BlockerID uint64
	// RootID is the head of the chain: following blockers from the waiter,
	// the first one that does not itself wait (Roots). 0: unknown, or the
	// chain only loops.
	RootID uint64
	// Kind is event.LockRow, event.LockMetadata or event.LockTable.
	Kind string
	// LockType is InnoDB's lock type (RECORD, TABLE) for InnoDB locks, the
	// namespace (TABLE, SCHEMA, BACKUP, ...) for metadata locks, "" for
	// table-level locks.
	LockType string
	// The object waited for, as far as the server tells.
	Schema, Table, Index string
	// LockData is InnoDB's description of the locked record (its key
	// values, "supremum pseudo-record"), when given.
	LockData string
	// RequestedMode is the waiter's requested mode (X, S,GAP, SHARED_READ,
	// EXCLUSIVE, READ, ...); HeldMode the blocker's conflicting mode (for
	// a pending blocker, the mode it waits for). "" when unknown.
	RequestedMode, HeldMode string
	// BlockerPending: the blocker holds no conflicting lock but its own
	// pending request comes first (a metadata lock's priority: an ALTER's
	// pending EXCLUSIVE blocks later SHARED_READ requests).
	BlockerPending bool
	// Ambiguous: the server names the blocker only as one of several
	// transactions (MariaDB shows trx_id 0 for every read-only transaction,
	// so a shared lock's holder is one of them): each candidate has its
	// own LockWait, all marked.
	Ambiguous bool
	// Inferred: the object or the requested mode was inferred from the
	// waiter's statement text, the server naming neither (the
	// METADATA_LOCK_INFO fallback).
	Inferred bool
	// WaitStarted is when the wait began by the server's clock (InnoDB's
	// trx_wait_started, one-second resolution); zero when the server does
	// not say. WaitSeconds is the server's NOW() minus it; -1 when unknown
	// (see Waiter.TimeMS, how long the waiter's statement has run).
	WaitStarted time.Time
	WaitSeconds int64
	// The blocker's InnoDB transaction (INNODB_TRX), when read:
	// BlockerTrx says it was. BlockerTrxQuery "" is NULL: no statement
	// running, the application holds the transaction open (idle).
	BlockerTrx        bool
	BlockerTrxStarted time.Time
	BlockerTrxState   string
	BlockerTrxQuery   string
	// Waiter and Blocker are the connections' processlist rows.
	Waiter, Blocker ProcessState
	// Source names the tables read for this wait.
	Source string
}

// ProcessState is a connection's processlist COMMAND, STATE and TIME.
type ProcessState struct {
	Read    bool // the row was read (false: not asked, or gone)
	Command string
	State   string
	TimeMS  int64
}

// BlockerIdle reports whether the blocker held its lock with nothing
// running: its transaction had no statement (trx_query NULL) or its
// connection slept.
func (w LockWait) BlockerIdle() bool {
	if w.BlockerTrx && w.BlockerTrxQuery == "" {
		return true
	}
	return w.Blocker.Read && w.Blocker.Command == "Sleep"
}

// LockSources says which lock tables this server has, decided once by
// DetectLockSources.
type LockSources struct {
	// Rows: SrcInnoDBLockWaits (MariaDB, MySQL 5.7), SrcDataLockWaits
	// (MySQL 8.0+), or "" (no InnoDB, or unreadable).
	Rows string
	// MDL: SrcMetadataLocks (performance_schema on and its instrument
	// wait/lock/metadata/sql/mdl enabled), SrcMetadataLockInfo (MariaDB's
	// metadata_lock_info plugin), or SrcProcesslist (waiters only, their
	// blocker unknown).
	MDL string
	// TableHandles: performance_schema.table_handles can name the holder
	// of a table-level lock (performance_schema on, wait/lock/table/sql/
	// handler enabled).
	TableHandles bool
	// InnoDBTrx: information_schema.INNODB_TRX exists (the blockers'
	// transactions).
	InnoDBTrx bool
	// Notes say why a better source is not used.
	Notes []string
	// timeMS: the processlist has TIME_MS (MariaDB).
	timeMS bool
}

// DetectLockSources decides which sources ReadLockWaits uses on this
// server; info is DetectServer's. A check that fails leaves that source
// out (with a note), never the others.
func DetectLockSources(ctx context.Context, db queryer, info ServerInfo) LockSources {
	src := LockSources{MDL: SrcProcesslist}
	has := func(schema, table string) bool { return tableExists(ctx, db, schema, table) }
	src.InnoDBTrx = has("information_schema", "INNODB_TRX")
	ps := info.PerformanceSchema
	switch {
	case ps && !info.MariaDB() && has("performance_schema", "data_lock_waits"):
		src.Rows = SrcDataLockWaits
	case has("information_schema", "INNODB_LOCK_WAITS") && src.InnoDBTrx:
		src.Rows = SrcInnoDBLockWaits
	default:
		src.Notes = append(src.Notes, "no InnoDB lock-wait table: row-lock waits are not read")
	}
	mdlOn := ps && instrumentEnabled(ctx, db, "wait/lock/metadata/sql/mdl")
	switch {
	case mdlOn && has("performance_schema", "metadata_locks"):
		src.MDL = SrcMetadataLocks
	case has("information_schema", "METADATA_LOCK_INFO"):
		src.MDL = SrcMetadataLockInfo
		src.Notes = append(src.Notes, metadataLocksOff(ps)+"; metadata-lock blockers come from METADATA_LOCK_INFO (granted locks only): a waiter's object and mode are inferred from its statement")
	default:
		src.Notes = append(src.Notes, metadataLocksOff(ps)+" and METADATA_LOCK_INFO is not installed (MariaDB: INSTALL SONAME 'metadata_lock_info'): metadata-lock waiters are read from the processlist, their blocker unknown")
	}
	src.TableHandles = ps && instrumentEnabled(ctx, db, "wait/lock/table/sql/handler") && has("performance_schema", "table_handles")
	if !src.TableHandles {
		src.Notes = append(src.Notes, "performance_schema.table_handles unusable: table-level lock waiters are read from the processlist, their blocker unknown")
	}
	if cols, err := LoadColumns(ctx, db, "information_schema", "PROCESSLIST"); err == nil {
		src.timeMS = cols.Has("PROCESSLIST", "TIME_MS")
	}
	return src
}

func metadataLocksOff(ps bool) string {
	if !ps {
		return "performance_schema is off"
	}
	return "the instrument wait/lock/metadata/sql/mdl is disabled"
}

func instrumentEnabled(ctx context.Context, db queryer, name string) bool {
	var en string
	err := db.QueryRowContext(ctx, Mark+" SELECT ENABLED FROM performance_schema.setup_instruments WHERE NAME = ?", name).Scan(&en)
	return err == nil && isOn(en)
}

// MinLockWaitsInterval is the least time between two ReadLockWaits calls
// that each see the present. InnoDB serves INNODB_TRX, INNODB_LOCKS and
// INNODB_LOCK_WAITS (and MySQL 8's sys views join INNODB_TRX) from one
// cache that it refills only once nobody has read it for 100 ms
// (trx0i_s.cc, CACHE_MIN_IDLE_TIME_NS): read more often, by gapscope or
// by any other client of the server, it keeps returning the snapshot of
// the first read.
const MinLockWaitsInterval = 150 * time.Millisecond

// ReadLockWaits reads who waits for whom now: InnoDB row locks, metadata
// locks and table-level locks, each from the best source src names, and
// the connections' processlist rows. RootID is set on every wait. A source
// that fails does not stop the others: the waits read are returned with
// the errors joined. Nothing waiting: nil, nil. Calls closer together than
// MinLockWaitsInterval see the same InnoDB snapshot.
func ReadLockWaits(ctx context.Context, db queryer, src LockSources) ([]LockWait, error) {
	var waits []LockWait
	var errs []error
	switch src.Rows {
	case SrcInnoDBLockWaits, SrcDataLockWaits:
		w, err := readRowWaits(ctx, db, src.Rows)
		waits = append(waits, w...)
		errs = append(errs, err)
	}
	var mdlLocks []mdlLock
	if src.MDL == SrcMetadataLocks {
		var err error
		mdlLocks, err = readMetadataLocks(ctx, db)
		errs = append(errs, err)
	}
	ids := make([]uint64, 0, 2*len(waits)+len(mdlLocks))
	for _, w := range waits {
		ids = append(ids, w.WaiterID, w.BlockerID)
	}
	for _, l := range mdlLocks {
		ids = append(ids, l.Conn)
	}
	procs, err := readLockProcesses(ctx, db, src.timeMS, ids)
	errs = append(errs, err)

	// Metadata locks.
	var mdlWaiters []lockProcess
	var tableWaiters []lockProcess
	for _, p := range procs {
		switch waitKindOfState(p.State) {
		case event.LockMetadata:
			mdlWaiters = append(mdlWaiters, p)
		case event.LockTable:
			tableWaiters = append(tableWaiters, p)
		}
	}
	switch {
	case src.MDL == SrcMetadataLocks:
		waits = append(waits, mdlWaits(dropGranted(mdlLocks, procs), SrcMetadataLocks+"+threads")...)
		// A request made before the instrument was enabled is not listed.
		var unlisted []lockProcess
		for _, p := range mdlWaiters {
			if !slices.ContainsFunc(waits, func(w LockWait) bool { return w.WaiterID == p.ID }) {
				unlisted = append(unlisted, p)
			}
		}
		waits = append(waits, unknownBlocker(unlisted, event.LockMetadata,
			SrcProcesslist+" (not in "+SrcMetadataLocks+": blocker unknown)")...)
	case len(mdlWaiters) > 0 && src.MDL == SrcMetadataLockInfo:
		held, err := readMetadataLockInfo(ctx, db)
		errs = append(errs, err)
		if err == nil {
			locks, unresolved := inferPending(held, mdlWaiters)
			source := SrcProcesslist + "+" + SrcMetadataLockInfo
			for _, w := range mdlWaits(locks, source) {
				w.Inferred = true
				waits = append(waits, w)
			}
			waits = append(waits, unknownBlocker(unresolved, event.LockMetadata,
				source+" (the waiter's object not found in its statement: blocker unknown)")...)
		} else {
			waits = append(waits, unknownBlocker(mdlWaiters, event.LockMetadata, SrcProcesslist+" (METADATA_LOCK_INFO failed: blocker unknown)")...)
		}
	case len(mdlWaiters) > 0:
		waits = append(waits, unknownBlocker(mdlWaiters, event.LockMetadata,
			SrcProcesslist+" (blocker unknown: no metadata_locks instrument, no METADATA_LOCK_INFO)")...)
	}

	// Table-level locks.
	if len(tableWaiters) > 0 {
		if src.TableHandles {
			handles, err := readTableHandles(ctx, db)
			errs = append(errs, err)
			waits = append(waits, tableLockWaits(tableWaiters, handles)...)
		} else {
			waits = append(waits, unknownBlocker(tableWaiters, event.LockTable,
				SrcProcesslist+" (blocker unknown: performance_schema.table_handles unusable)")...)
		}
	}
	if len(waits) == 0 {
		return nil, errors.Join(errs...)
	}

	// The blockers found from lock tables and their processlist rows.
	byID := make(map[uint64]lockProcess, len(procs))
	for _, p := range procs {
		byID[p.ID] = p
	}
	var missing []uint64
	for _, w := range waits {
		for _, id := range [2]uint64{w.WaiterID, w.BlockerID} {
			if _, ok := byID[id]; !ok && id != 0 && !slices.Contains(missing, id) {
				missing = append(missing, id)
			}
		}
	}
	if len(missing) > 0 {
		more, err := readLockProcesses(ctx, db, src.timeMS, missing)
		errs = append(errs, err)
		for _, p := range more {
			byID[p.ID] = p
		}
	}
	var noTrx []uint64
	for i := range waits {
		w := &waits[i]
		if p, ok := byID[w.WaiterID]; ok {
			w.Waiter = p.state()
		}
		if p, ok := byID[w.BlockerID]; ok {
			w.Blocker = p.state()
		}
		if (w.Blocker.Read || w.Waiter.Read) && !strings.HasPrefix(w.Source, SrcProcesslist) {
			w.Source += ", " + SrcProcesslist
		}
		if !w.BlockerTrx && w.BlockerID != 0 && !slices.Contains(noTrx, w.BlockerID) {
			noTrx = append(noTrx, w.BlockerID)
		}
	}
	if len(noTrx) > 0 && src.InnoDBTrx {
		trx, err := readTrxOf(ctx, db, noTrx)
		errs = append(errs, err)
		for i := range waits {
			w := &waits[i]
			if t, ok := trx[w.BlockerID]; ok && !w.BlockerTrx {
				w.BlockerTrx, w.BlockerTrxStarted, w.BlockerTrxState, w.BlockerTrxQuery = true, t.started, t.state, t.query
				w.Source += ", " + SrcInnoDBTrx
			}
		}
	}
	roots := Roots(waits)
	for i := range waits {
		waits[i].RootID = roots[waits[i].WaiterID]
	}
	return waits, errors.Join(errs...)
}

// Roots maps each waiter to the head of its chain: following its blockers
// (in the order of waits), the first connection reached that does not
// itself wait. A waiter whose every chain ends in an unknown blocker (0)
// or loops back (a deadlock not yet broken) maps to 0.
func Roots(waits []LockWait) map[uint64]uint64 {
	blockers := map[uint64][]uint64{}
	for _, w := range waits {
		if !slices.Contains(blockers[w.WaiterID], w.BlockerID) {
			blockers[w.WaiterID] = append(blockers[w.WaiterID], w.BlockerID)
		}
	}
	roots := make(map[uint64]uint64, len(blockers))
	for waiter := range blockers {
		roots[waiter] = rootOf(waiter, blockers, map[uint64]bool{})
	}
	return roots
}

// rootOf is the first non-waiting connection reached from id, depth
// first; seen holds the connections on the path and already explored.
func rootOf(id uint64, blockers map[uint64][]uint64, seen map[uint64]bool) uint64 {
	seen[id] = true
	for _, b := range blockers[id] {
		if b == 0 || seen[b] {
			continue
		}
		if _, waiting := blockers[b]; !waiting {
			return b
		}
		if r := rootOf(b, blockers, seen); r != 0 {
			return r
		}
	}
	return 0
}

// --- Row locks ---------------------------------------------------------

// rowWaitQueries select, in one order, the waiter, the blocker, the lock
// and both transactions. MariaDB (and MySQL 5.7): INNODB_LOCK_WAITS with
// INNODB_LOCKS and INNODB_TRX. The waiter is matched on its requested lock
// as well as its trx_id: MariaDB shows trx_id 0 for every read-only
// transaction. MySQL 8.0/8.4: performance_schema.data_lock_waits with
// data_locks, threads (processlist ids) and INNODB_TRX (transactions).
var rowWaitQueries = map[string]string{
	SrcInnoDBLockWaits: Mark + ` SELECT r.trx_mysql_thread_id, b.trx_mysql_thread_id, b.trx_id,
 rl.lock_type, NULL, rl.lock_table, rl.lock_index, rl.lock_mode, bl.lock_mode, rl.lock_data,
 UNIX_TIMESTAMP(r.trx_wait_started), TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW()),
 UNIX_TIMESTAMP(b.trx_started), b.trx_state, b.trx_query, b.trx_rows_locked
FROM information_schema.INNODB_LOCK_WAITS w
JOIN information_schema.INNODB_TRX r ON r.trx_id = w.requesting_trx_id AND r.trx_requested_lock_id = w.requested_lock_id
JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id
LEFT JOIN information_schema.INNODB_LOCKS rl ON rl.lock_id = w.requested_lock_id
LEFT JOIN information_schema.INNODB_LOCKS bl ON bl.lock_id = w.blocking_lock_id`,
	SrcDataLockWaits: Mark + ` SELECT rt.PROCESSLIST_ID, bt.PROCESSLIST_ID, w.BLOCKING_ENGINE_TRANSACTION_ID,
 rl.LOCK_TYPE, rl.OBJECT_SCHEMA, rl.OBJECT_NAME, rl.INDEX_NAME, rl.LOCK_MODE, bl.LOCK_MODE, rl.LOCK_DATA,
 UNIX_TIMESTAMP(r.trx_wait_started), TIMESTAMPDIFF(SECOND, r.trx_wait_started, NOW()),
 UNIX_TIMESTAMP(b.trx_started), b.trx_state, b.trx_query, b.trx_rows_locked
FROM performance_schema.data_lock_waits w
JOIN performance_schema.data_locks rl ON rl.ENGINE = w.ENGINE AND rl.ENGINE_LOCK_ID = w.REQUESTING_ENGINE_LOCK_ID
JOIN performance_schema.data_locks bl ON bl.ENGINE = w.ENGINE AND bl.ENGINE_LOCK_ID = w.BLOCKING_ENGINE_LOCK_ID
LEFT JOIN performance_schema.threads rt ON rt.THREAD_ID = w.REQUESTING_THREAD_ID
LEFT JOIN performance_schema.threads bt ON bt.THREAD_ID = w.BLOCKING_THREAD_ID
LEFT JOIN information_schema.INNODB_TRX r ON r.trx_id = w.REQUESTING_ENGINE_TRANSACTION_ID
LEFT JOIN information_schema.INNODB_TRX b ON b.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID`,
}

var rowWaitSources = map[string]string{
	SrcInnoDBLockWaits: SrcInnoDBLockWaits + "+INNODB_LOCKS+INNODB_TRX",
	SrcDataLockWaits:   SrcDataLockWaits + "+data_locks+threads, " + SrcInnoDBTrx,
}

func readRowWaits(ctx context.Context, db queryer, src string) ([]LockWait, error) {
	rows, err := db.QueryContext(ctx, rowWaitQueries[src])
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	defer rows.Close()
	var raw []rowWait
	for rows.Next() {
		r, err := scanRowWait(rows)
		if err != nil {
			return nil, fmt.Errorf("reading %s: %w", src, err)
		}
		raw = append(raw, r)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", src, err)
	}
	return rowWaits(raw, rowWaitSources[src]), nil
}

// rowWait is one row of a rowWaitQueries query.
type rowWait struct {
	waiter, blocker                sql.NullInt64
	blockerTrxID                   sql.NullString
	lockType, schema, table, index sql.NullString
	reqMode, heldMode, lockData    sql.NullString
	waitStarted, waitSeconds       sql.NullInt64
	trxStarted                     sql.NullInt64
	trxState, trxQuery             sql.NullString
	rowsLocked                     sql.NullInt64
}

func scanRowWait(rows *sql.Rows) (rowWait, error) {
	var r rowWait
	err := rows.Scan(&r.waiter, &r.blocker, &r.blockerTrxID, &r.lockType, &r.schema, &r.table, &r.index,
		&r.reqMode, &r.heldMode, &r.lockData, &r.waitStarted, &r.waitSeconds, &r.trxStarted, &r.trxState,
		&r.trxQuery, &r.rowsLocked)
	return r, err
}

// rowWaits maps scanned rows to LockWaits. A blocking transaction id that
// several transactions share (MariaDB's 0 for read-only ones) makes every
// one of them a candidate: those that lock rows, or all when none says so.
func rowWaits(raw []rowWait, source string) []LockWait {
	type key struct {
		waiter uint64
		trx    string
	}
	cands := map[key][]int{}
	var order []key
	for i, r := range raw {
		k := key{uint64(r.waiter.Int64), r.blockerTrxID.String}
		if _, ok := cands[k]; !ok {
			order = append(order, k)
		}
		if !slices.ContainsFunc(cands[k], func(j int) bool { return raw[j].blocker == r.blocker }) {
			cands[k] = append(cands[k], i)
		}
	}
	var out []LockWait
	for _, k := range order {
		idx := cands[k]
		if len(idx) > 1 {
			locking := slices.DeleteFunc(slices.Clone(idx), func(i int) bool { return raw[i].rowsLocked.Int64 <= 0 })
			if len(locking) > 0 {
				idx = locking
			}
		}
		for _, i := range idx {
			w := raw[i].lockWait(source)
			w.Ambiguous = len(idx) > 1
			if !slices.ContainsFunc(out, func(o LockWait) bool { return o.WaiterID == w.WaiterID && o.BlockerID == w.BlockerID }) {
				out = append(out, w)
			}
		}
	}
	return out
}

func (r rowWait) lockWait(source string) LockWait {
	w := LockWait{
		WaiterID: uint64(r.waiter.Int64), BlockerID: uint64(r.blocker.Int64),
		Kind: event.LockRow, LockType: r.lockType.String,
		Schema: r.schema.String, Table: r.table.String, Index: r.index.String, LockData: r.lockData.String,
		RequestedMode: r.reqMode.String, HeldMode: r.heldMode.String,
		WaitSeconds: -1, Source: source,
	}
	if w.LockType == "TABLE" {
		w.Kind = event.LockTable // an InnoDB table lock (LOCK TABLES, AUTO-INC)
	}
	if w.Schema == "" {
		// MariaDB's lock_table: `schema`.`table`, maybe followed by a
		// partition comment.
		w.Schema, w.Table = splitQuotedName(w.Table)
	}
	if r.waitStarted.Valid {
		w.WaitStarted = time.Unix(r.waitStarted.Int64, 0)
		w.WaitSeconds = max(r.waitSeconds.Int64, 0)
	}
	if r.trxState.Valid {
		w.BlockerTrx, w.BlockerTrxState, w.BlockerTrxQuery = true, r.trxState.String, r.trxQuery.String
		if r.trxStarted.Valid {
			w.BlockerTrxStarted = time.Unix(r.trxStarted.Int64, 0)
		}
	}
	return w
}

// splitQuotedName reads `schema`.`table` (backquotes doubled inside a
// name); anything else is returned whole as the table.
func splitQuotedName(s string) (schema, table string) {
	first, rest, ok := readQuoted(s)
	if !ok {
		return "", s
	}
	if !strings.HasPrefix(rest, ".") {
		return "", first
	}
	second, _, ok := readQuoted(rest[1:])
	if !ok {
		return "", s
	}
	return first, second
}

// readQuoted reads one backquoted identifier at the start of s.
func readQuoted(s string) (name, rest string, ok bool) {
	if !strings.HasPrefix(s, "`") {
		return "", s, false
	}
	var b strings.Builder
	for i := 1; i < len(s); i++ {
		if s[i] != '`' {
			b.WriteByte(s[i])
			continue
		}
		if i+1 < len(s) && s[i+1] == '`' {
			b.WriteByte('`')
			i++
			continue
		}
		return b.String(), s[i+1:], true
	}
	return "", s, false
}

// --- Metadata locks ----------------------------------------------------

// mdlLock is one metadata lock, granted or pending.
type mdlLock struct {
	Conn                    uint64 // processlist id; 0 for a background thread
	Namespace, Schema, Name string // OBJECT_TYPE (TABLE, SCHEMA, BACKUP, ...), OBJECT_SCHEMA, OBJECT_NAME
	Mode                    string // LOCK_TYPE without MDL_: SHARED_READ, EXCLUSIVE, BACKUP_DDL, ...
	Granted                 bool
}

func (l mdlLock) sameObject(o mdlLock) bool {
	return l.Namespace == o.Namespace && l.Schema == o.Schema && l.Name == o.Name
}

// metadataLocksQuery reads the locks on every object someone waits for:
// nothing when no request is pending.
const metadataLocksQuery = Mark + ` SELECT m.OBJECT_TYPE, m.OBJECT_SCHEMA, m.OBJECT_NAME, m.LOCK_TYPE, m.LOCK_STATUS, t.PROCESSLIST_ID
FROM performance_schema.metadata_locks m
JOIN (SELECT DISTINCT OBJECT_TYPE, OBJECT_SCHEMA, OBJECT_NAME FROM performance_schema.metadata_locks WHERE LOCK_STATUS = 'PENDING') p
 ON p.OBJECT_TYPE = m.OBJECT_TYPE AND p.OBJECT_SCHEMA <=> m.OBJECT_SCHEMA AND p.OBJECT_NAME <=> m.OBJECT_NAME
LEFT JOIN performance_schema.threads t ON t.THREAD_ID = m.OWNER_THREAD_ID`

func readMetadataLocks(ctx context.Context, db queryer) ([]mdlLock, error) {
	rows, err := db.QueryContext(ctx, metadataLocksQuery)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcMetadataLocks, err)
	}
	defer rows.Close()
	var out []mdlLock
	for rows.Next() {
		var ns, schema, name, mode, status sql.NullString
		var conn sql.NullInt64
		if err := rows.Scan(&ns, &schema, &name, &mode, &status, &conn); err != nil {
			return nil, fmt.Errorf("reading %s: %w", SrcMetadataLocks, err)
		}
		out = append(out, mdlLock{Conn: uint64(conn.Int64), Namespace: ns.String, Schema: schema.String, Name: name.String,
			Mode: strings.TrimPrefix(mode.String, "MDL_"), Granted: status.String == "GRANTED"})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcMetadataLocks, err)
	}
	return out, nil
}

// dropGranted leaves out the pending requests whose connection the
// processlist shows not waiting for a lock: performance_schema lists a
// request as PENDING for the instant before it is granted. A connection
// absent from procs (not read) is kept.
func dropGranted(locks []mdlLock, procs []lockProcess) []mdlLock {
	state := make(map[uint64]string, len(procs))
	for _, p := range procs {
		state[p.ID] = p.State
	}
	return slices.DeleteFunc(slices.Clone(locks), func(l mdlLock) bool {
		s, ok := state[l.Conn]
		return !l.Granted && ok && waitKindOfState(s) == ""
	})
}

// mdlWaits derives who blocks each pending request, as the server's MDL
// grants: a granted lock of another connection incompatible with the
// request, or another connection's pending request that takes priority
// over it. A pending request nobody explains gets blocker 0.
func mdlWaits(locks []mdlLock, source string) []LockWait {
	var out []LockWait
	for _, p := range locks {
		if p.Granted {
			continue
		}
		n := len(out)
		add := func(b mdlLock, pending bool) {
			if slices.ContainsFunc(out[n:], func(w LockWait) bool { return w.BlockerID == b.Conn }) {
				return
			}
			out = append(out, LockWait{WaiterID: p.Conn, BlockerID: b.Conn, Kind: event.LockMetadata,
				LockType: p.Namespace, Schema: p.Schema, Table: p.Name, RequestedMode: p.Mode, HeldMode: b.Mode,
				BlockerPending: pending, WaitSeconds: -1, Source: source})
		}
		for _, g := range locks {
			if g.Granted && g.Conn != p.Conn && g.sameObject(p) && mdlConflicts(p.Namespace, p.Mode, g.Mode, true) {
				add(g, false)
			}
		}
		for _, q := range locks {
			if !q.Granted && q.Conn != p.Conn && q.sameObject(p) && mdlConflicts(p.Namespace, p.Mode, q.Mode, false) {
				add(q, true)
			}
		}
		if len(out) == n {
			out = append(out, LockWait{WaiterID: p.Conn, Kind: event.LockMetadata, LockType: p.Namespace,
				Schema: p.Schema, Table: p.Name, RequestedMode: p.Mode, WaitSeconds: -1,
				Source: source + " (no conflicting lock listed: blocker unknown)"})
		}
	}
	return out
}

// Metadata lock modes, as performance_schema names them (LOCK_TYPE).
const (
	mdlIX   = "INTENTION_EXCLUSIVE"
	mdlS    = "SHARED"
	mdlSH   = "SHARED_HIGH_PRIO"
	mdlSR   = "SHARED_READ"
	mdlSW   = "SHARED_WRITE"
	mdlSWLP = "SHARED_WRITE_LOW_PRIO" // MySQL 8
	mdlSU   = "SHARED_UPGRADABLE"
	mdlSRO  = "SHARED_READ_ONLY"
	mdlSNW  = "SHARED_NO_WRITE"
	mdlSNRW = "SHARED_NO_READ_WRITE"
	mdlX    = "EXCLUSIVE"
)

// mdlMatrix says, for a requested mode, which granted modes of other
// connections it must wait for (granted) and which pending modes go
// before it (waiting). Written from the servers' documented matrices
// (MDL_object_lock, MDL_scoped_lock, MariaDB's MDL_backup_lock).
type mdlMatrix struct{ granted, waiting map[string][]string }

var objectMDL = mdlMatrix{
	granted: map[string][]string{
		mdlIX:   nil,
		mdlS:    {mdlX},
		mdlSH:   {mdlX},
		mdlSR:   {mdlX, mdlSNRW},
		mdlSW:   {mdlX, mdlSNRW, mdlSNW, mdlSRO},
		mdlSWLP: {mdlX, mdlSNRW, mdlSNW, mdlSRO},
		mdlSU:   {mdlX, mdlSNRW, mdlSNW, mdlSU},
		mdlSRO:  {mdlX, mdlSNRW, mdlSW, mdlSWLP},
		mdlSNW:  {mdlX, mdlSNRW, mdlSNW, mdlSU, mdlSW, mdlSWLP},
		mdlSNRW: {mdlX, mdlSNRW, mdlSNW, mdlSRO, mdlSU, mdlSW, mdlSWLP, mdlSR},
		mdlX:    {mdlX, mdlSNRW, mdlSNW, mdlSRO, mdlSU, mdlSW, mdlSWLP, mdlSR, mdlSH, mdlS},
	},
	waiting: map[string][]string{
		mdlIX:   nil,
		mdlS:    {mdlX},
		mdlSH:   nil,
		mdlSR:   {mdlX, mdlSNRW},
		mdlSW:   {mdlX, mdlSNRW, mdlSNW},
		mdlSWLP: {mdlX, mdlSNRW, mdlSNW, mdlSRO},
		mdlSU:   {mdlX},
		mdlSRO:  {mdlX, mdlSNRW, mdlSW},
		mdlSNW:  {mdlX},
		mdlSNRW: {mdlX},
		mdlX:    nil,
	},
}

var scopedMDL = mdlMatrix{
	granted: map[string][]string{
		mdlIX: {mdlX, mdlS},
		mdlS:  {mdlX, mdlIX},
		mdlX:  {mdlX, mdlS, mdlIX},
	},
	waiting: map[string][]string{
		mdlIX: {mdlX, mdlS},
		mdlS:  {mdlX},
		mdlX:  nil,
	},
}

// MariaDB's BACKUP namespace (FLUSH TABLES WITH READ LOCK, BACKUP STAGE,
// and the BACKUP_* lock every DML and DDL takes).
const (
	bStart      = "BACKUP_START"
	bFlush      = "BACKUP_FLUSH"
	bWaitFlush  = "BACKUP_WAIT_FLUSH"
	bWaitDDL    = "BACKUP_WAIT_DDL"
	bWaitCommit = "BACKUP_WAIT_COMMIT"
	bFTWRL1     = "BACKUP_FTWRL1"
	bFTWRL2     = "BACKUP_FTWRL2"
	bDML        = "BACKUP_DML"
	bTransDML   = "BACKUP_TRANS_DML"
	bSysDML     = "BACKUP_SYS_DML"
	bDDL        = "BACKUP_DDL"
	bBlockDDL   = "BACKUP_BLOCK_DDL"
	bAlterCopy  = "BACKUP_ALTER_COPY"
	bCommit     = "BACKUP_COMMIT"
)

var backupMDL = mdlMatrix{
	granted: map[string][]string{
		bStart:      {bStart, bFlush, bWaitFlush, bWaitDDL, bWaitCommit, bBlockDDL},
		bFlush:      {bStart},
		bWaitFlush:  {bStart, bDML},
		bWaitDDL:    {bStart, bDML, bDDL},
		bWaitCommit: {bStart, bDML, bSysDML, bDDL, bCommit},
		bFTWRL1:     {bDML, bTransDML, bSysDML, bDDL, bAlterCopy},
		bFTWRL2:     {bDML, bTransDML, bSysDML, bDDL, bAlterCopy, bCommit},
		bDML:        {bFlush, bWaitFlush, bWaitDDL, bWaitCommit, bFTWRL1, bFTWRL2},
		bTransDML:   {bFTWRL1, bFTWRL2},
		bSysDML:     {bWaitCommit, bFTWRL1, bFTWRL2},
		bDDL:        {bWaitDDL, bWaitCommit, bFTWRL1, bFTWRL2, bBlockDDL},
		bBlockDDL:   {bStart, bFlush, bWaitFlush, bWaitDDL, bWaitCommit, bBlockDDL, bDDL},
		bAlterCopy:  {bFTWRL1, bFTWRL2},
		bCommit:     {bWaitCommit, bFTWRL2},
	},
	waiting: map[string][]string{
		bStart:     {bFlush, bWaitFlush, bWaitDDL, bWaitCommit, bBlockDDL},
		bDML:       {bFlush, bWaitFlush, bWaitDDL, bWaitCommit, bFTWRL1, bFTWRL2},
		bTransDML:  {bFTWRL1, bFTWRL2},
		bSysDML:    {bWaitCommit, bFTWRL1, bFTWRL2},
		bDDL:       {bWaitDDL, bWaitCommit, bFTWRL1, bFTWRL2, bBlockDDL},
		bBlockDDL:  {bStart},
		bAlterCopy: {bFTWRL1, bFTWRL2},
		bCommit:    {bWaitCommit, bFTWRL2},
	},
}

// mdlMatrixOf picks the matrix of a namespace (performance_schema's
// OBJECT_TYPE): scoped for schemas and MySQL's global, commit, tablespace
// and backup locks, MariaDB's own for BACKUP, per-object for the rest.
func mdlMatrixOf(namespace string) mdlMatrix {
	switch namespace {
	case "SCHEMA", "GLOBAL", "COMMIT", "TABLESPACE", "BACKUP LOCK":
		return scopedMDL
	case "BACKUP":
		return backupMDL
	}
	return objectMDL
}

// mdlConflicts reports whether a request for mode req waits for other's
// mode: granted, or pending ahead of it. A mode the matrix does not know
// is taken as exclusive: it waits for every granted lock, and no pending
// request goes before it.
func mdlConflicts(namespace, req, other string, granted bool) bool {
	m := mdlMatrixOf(namespace)
	if granted {
		incompat, ok := m.granted[req]
		if !ok {
			return true
		}
		if _, known := m.granted[other]; !known {
			return true // an unknown held mode: take it as exclusive
		}
		return slices.Contains(incompat, other)
	}
	return slices.Contains(m.waiting[req], other)
}

// --- The metadata_lock_info fallback ------------------------------------

// metadataLockInfoQuery reads every granted metadata lock: the plugin
// lists no pending request.
const metadataLockInfoQuery = Mark + " SELECT THREAD_ID, LOCK_MODE, LOCK_TYPE, TABLE_SCHEMA, TABLE_NAME FROM information_schema.METADATA_LOCK_INFO"

func readMetadataLockInfo(ctx context.Context, db queryer) ([]mdlLock, error) {
	rows, err := db.QueryContext(ctx, metadataLockInfoQuery)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcMetadataLockInfo, err)
	}
	defer rows.Close()
	var out []mdlLock
	for rows.Next() {
		var id uint64
		var mode, typ, schema, name sql.NullString
		if err := rows.Scan(&id, &mode, &typ, &schema, &name); err != nil {
			return nil, fmt.Errorf("reading %s: %w", SrcMetadataLockInfo, err)
		}
		out = append(out, mdlLock{Conn: id, Namespace: lockInfoNamespace(typ.String), Schema: schema.String,
			Name: name.String, Mode: strings.TrimPrefix(mode.String, "MDL_"), Granted: true})
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcMetadataLockInfo, err)
	}
	return out, nil
}

// lockInfoNamespace names METADATA_LOCK_INFO's LOCK_TYPE ("Table metadata
// lock", "Schema metadata lock", "Backup lock", ...) as
// performance_schema's OBJECT_TYPE.
func lockInfoNamespace(typ string) string {
	t := strings.TrimSuffix(strings.TrimSuffix(typ, " lock"), " metadata")
	switch t {
	case "Stored function":
		return "FUNCTION"
	case "Stored procedure":
		return "PROCEDURE"
	case "Stored package body":
		return "PACKAGE BODY"
	}
	return strings.ToUpper(t)
}

// upgradable are the modes a DDL holds while it waits to upgrade to
// EXCLUSIVE (ALTER TABLE holds SHARED_UPGRADABLE, then SHARED_NO_WRITE
// while it copies).
var upgradable = []string{mdlSU, mdlSNW, mdlSNRW}

// inferPending adds to the granted locks held (METADATA_LOCK_INFO) a
// pending request for each processlist waiter of a table metadata lock:
// on the tables its statement names that someone holds a lock on (or
// the one it holds an upgradable lock on: a DDL waiting to upgrade), in
// the mode its statement asks. Waiters whose table is not found are
// returned apart.
func inferPending(held []mdlLock, waiters []lockProcess) (locks []mdlLock, unresolved []lockProcess) {
	locks = slices.Clone(held)
	for _, w := range waiters {
		if w.State != "Waiting for table metadata lock" {
			unresolved = append(unresolved, w)
			continue
		}
		var tables []mdlLock
		upgrade := false
		for _, h := range held {
			if h.Conn == w.ID && h.Namespace == "TABLE" && slices.Contains(upgradable, h.Mode) {
				tables, upgrade = []mdlLock{h}, true
				break
			}
		}
		if !upgrade {
			named := statementTables(w.Info, w.DB)
			for _, h := range held {
				if h.Namespace == "TABLE" && h.Conn != w.ID && named[tableKey{strings.ToLower(h.Schema), strings.ToLower(h.Name)}] &&
					!slices.ContainsFunc(tables, h.sameObject) {
					tables = append(tables, h)
				}
			}
		}
		if len(tables) == 0 {
			unresolved = append(unresolved, w)
			continue
		}
		mode := statementMode(w.Info, upgrade)
		for _, t := range tables {
			locks = append(locks, mdlLock{Conn: w.ID, Namespace: "TABLE", Schema: t.Schema, Name: t.Name, Mode: mode})
		}
	}
	return locks, unresolved
}

// statementMode is the table metadata lock a statement asks for, from its
// first keyword; "" (taken as exclusive) when unknown.
func statementMode(info string, upgrade bool) string {
	if upgrade {
		return mdlX
	}
	words := strings.Fields(strings.ToUpper(stripLeadingComments(info)))
	if len(words) == 0 {
		return ""
	}
	switch words[0] {
	case "SELECT", "WITH", "(SELECT":
		if slices.Contains(words, "UPDATE") && slices.Contains(words, "FOR") {
			return mdlSW
		}
		return mdlSR
	case "INSERT", "UPDATE", "DELETE", "REPLACE":
		return mdlSW
	case "ALTER", "OPTIMIZE", "ANALYZE", "REPAIR":
		return mdlSU
	case "CREATE":
		if slices.Contains(words, "INDEX") {
			return mdlSU
		}
		return mdlX
	case "DROP", "TRUNCATE", "RENAME":
		return mdlX
	case "LOCK":
		if slices.Contains(words, "WRITE") {
			return mdlSNRW
		}
		return mdlSRO
	}
	return ""
}

func stripLeadingComments(s string) string {
	for {
		s = strings.TrimSpace(s)
		if !strings.HasPrefix(s, "/*") {
			return s
		}
		end := strings.Index(s, "*/")
		if end < 0 {
			return ""
		}
		s = s[end+2:]
	}
}

type tableKey struct{ schema, name string }

// statementTables are the tables a statement may name: each identifier
// (plain or backquoted, lower-cased) as a table of the connection's
// database, and each a.b as table b of schema a. It over-reads (columns
// and aliases count too): only tables somebody holds a lock on are
// matched against it.
func statementTables(info, db string) map[tableKey]bool {
	out := map[tableKey]bool{}
	var prev string
	afterDot := false
	for i := 0; i < len(info); {
		c := info[i]
		var ident string
		switch {
		case c == '`':
			name, rest, ok := readQuoted(info[i:])
			if !ok {
				return out
			}
			ident, i = name, len(info)-len(rest)
		case isIdentByte(c):
			j := i
			for j < len(info) && isIdentByte(info[j]) {
				j++
			}
			ident, i = info[i:j], j
		case c == '\'' || c == '"':
			j := i + 1 // skip a string literal
			for j < len(info) && info[j] != c {
				if info[j] == '\\' {
					j++
				}
				j++
			}
			i, prev, afterDot = j+1, "", false
			continue
		case c == '.':
			afterDot = prev != ""
			i++
			continue
		default:
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' {
				prev, afterDot = "", false
			}
			i++
			continue
		}
		ident = strings.ToLower(ident)
		if afterDot {
			out[tableKey{prev, ident}] = true
		}
		if db != "" {
			out[tableKey{strings.ToLower(db), ident}] = true
		}
		prev, afterDot = ident, false
	}
	return out
}

func isIdentByte(c byte) bool {
	return c == '_' || c == '$' || c >= '0' && c <= '9' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= 0x80
}

// unknownBlocker reports each waiter with blocker 0.
func unknownBlocker(waiters []lockProcess, kind, source string) []LockWait {
	out := make([]LockWait, 0, len(waiters))
	for _, p := range waiters {
		lt := ""
		if kind == event.LockMetadata {
			lt = stateNamespace(p.State)
		}
		out = append(out, LockWait{WaiterID: p.ID, Kind: kind, LockType: lt, WaitSeconds: -1, Source: source})
	}
	return out
}

// --- Table-level locks ---------------------------------------------------

type tableHandle struct {
	Conn          uint64
	Schema, Name  string
	Internal, Ext string
}

const tableHandlesQuery = Mark + ` SELECT t.PROCESSLIST_ID, h.OBJECT_SCHEMA, h.OBJECT_NAME, h.INTERNAL_LOCK, h.EXTERNAL_LOCK
FROM performance_schema.table_handles h JOIN performance_schema.threads t ON t.THREAD_ID = h.OWNER_THREAD_ID
WHERE h.INTERNAL_LOCK IS NOT NULL AND t.PROCESSLIST_ID IS NOT NULL`

func readTableHandles(ctx context.Context, db queryer) ([]tableHandle, error) {
	rows, err := db.QueryContext(ctx, tableHandlesQuery)
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcTableHandles, err)
	}
	defer rows.Close()
	var out []tableHandle
	for rows.Next() {
		var h tableHandle
		var schema, name, in, ext sql.NullString
		if err := rows.Scan(&h.Conn, &schema, &name, &in, &ext); err != nil {
			return nil, fmt.Errorf("reading %s: %w", SrcTableHandles, err)
		}
		h.Schema, h.Name, h.Internal, h.Ext = schema.String, name.String, in.String, ext.String
		out = append(out, h)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcTableHandles, err)
	}
	return out, nil
}

// tableLockWaits names the blockers of table-level lock waiters: other
// connections' handles on a table the waiter has a handle on, with an
// SQL-level lock that conflicts (a waiter's handle already shows the lock
// it asks for). Connections not themselves waiting for a table-level lock
// are preferred; when none conflicts, the waiter's blocker is unknown.
func tableLockWaits(waiters []lockProcess, handles []tableHandle) []LockWait {
	waiting := map[uint64]bool{}
	for _, w := range waiters {
		waiting[w.ID] = true
	}
	var out []LockWait
	for _, w := range waiters {
		var found, fromWaiters []LockWait
		for _, mine := range handles {
			if mine.Conn != w.ID {
				continue
			}
			for _, h := range handles {
				if h.Conn == w.ID || h.Schema != mine.Schema || h.Name != mine.Name || !thrLockConflicts(mine.Internal, h.Internal) {
					continue
				}
				lw := LockWait{WaiterID: w.ID, BlockerID: h.Conn, Kind: event.LockTable, Schema: h.Schema, Table: h.Name,
					RequestedMode: mine.Internal, HeldMode: h.Internal, WaitSeconds: -1,
					Source: SrcProcesslist + "+" + SrcTableHandles + "+threads"}
				dup := func(o LockWait) bool { return o.BlockerID == h.Conn }
				if waiting[h.Conn] {
					if !slices.ContainsFunc(fromWaiters, dup) {
						fromWaiters = append(fromWaiters, lw)
					}
				} else if !slices.ContainsFunc(found, dup) {
					found = append(found, lw)
				}
			}
		}
		if len(found) == 0 {
			found = fromWaiters
		}
		if len(found) == 0 {
			found = unknownBlocker([]lockProcess{w}, event.LockTable,
				SrcProcesslist+"+"+SrcTableHandles+" (no conflicting handle: blocker unknown)")
		}
		out = append(out, found...)
	}
	return out
}

// thrLockConflicts reports whether two SQL-level table locks
// (table_handles.INTERNAL_LOCK: READ, READ WITH SHARED LOCKS, READ HIGH
// PRIORITY, READ NO INSERT, WRITE ALLOW WRITE, WRITE CONCURRENT INSERT,
// WRITE LOW PRIORITY, WRITE, ...) exclude each other.
func thrLockConflicts(a, b string) bool {
	aw, bw := strings.HasPrefix(a, "WRITE"), strings.HasPrefix(b, "WRITE")
	switch {
	case !aw && !bw:
		return false
	case a == "WRITE ALLOW WRITE" && b == "WRITE ALLOW WRITE":
		return false
	case a == "WRITE CONCURRENT INSERT" && !bw && b != "READ NO INSERT",
		b == "WRITE CONCURRENT INSERT" && !aw && a != "READ NO INSERT":
		return false
	}
	return true
}

// --- The processlist ------------------------------------------------------

// lockProcess is a processlist row as the lock reader needs it.
type lockProcess struct {
	ID             uint64
	DB             string
	Command, State string
	TimeMS         int64
	Info           string
}

func (p lockProcess) state() ProcessState {
	return ProcessState{Read: true, Command: p.Command, State: p.State, TimeMS: p.TimeMS}
}

// waitKindOfState classifies a processlist STATE: event.LockMetadata for
// metadata lock waits ("Waiting for table metadata lock", "... schema
// metadata lock", "Waiting for backup lock", "Waiting for global read
// lock", "Waiting for commit lock"), event.LockTable for "Waiting for
// table level lock", "" for anything else (InnoDB row-lock waiters show
// their statement's state, "Updating", "Sending data", ...).
func waitKindOfState(state string) string {
	if !strings.HasPrefix(state, "Waiting for ") || !strings.HasSuffix(state, " lock") {
		return ""
	}
	if state == "Waiting for table level lock" {
		return event.LockTable
	}
	return event.LockMetadata
}

// stateNamespace is the metadata lock namespace a waiting state names.
func stateNamespace(state string) string {
	s := strings.TrimSuffix(strings.TrimPrefix(state, "Waiting for "), " lock")
	s = strings.TrimSuffix(s, " metadata")
	switch s {
	case "backup":
		return "BACKUP"
	case "global read":
		return "GLOBAL"
	case "stored function":
		return "FUNCTION"
	case "stored procedure":
		return "PROCEDURE"
	case "stored package body":
		return "PACKAGE BODY"
	}
	return strings.ToUpper(s)
}

// readLockProcesses reads the processlist rows of ids and of every
// connection waiting for a metadata or table-level lock (gapscope's own
// excepted). Its statement text is read for the lock waiters only.
func readLockProcesses(ctx context.Context, db queryer, timeMS bool, ids []uint64) ([]lockProcess, error) {
	timeExpr := "TIME * 1000"
	if timeMS {
		timeExpr = "TIME_MS"
	}
	cond := "STATE LIKE 'Waiting for %lock'"
	var list []string
	for _, id := range ids {
		if id != 0 && !slices.Contains(list, strconv.FormatUint(id, 10)) {
			list = append(list, strconv.FormatUint(id, 10))
		}
	}
	if len(list) > 0 {
		cond = "(" + cond + " OR ID IN (" + strings.Join(list, ",") + "))"
	}
	q := Mark + " SELECT ID, DB, COMMAND, " + timeExpr + ", STATE, IF(STATE LIKE 'Waiting for %lock', INFO, NULL) FROM information_schema.PROCESSLIST WHERE " +
		cond + " AND ID <> CONNECTION_ID()"
	rows, err := db.QueryContext(ctx, q)
	if err != nil {
		return nil, fmt.Errorf("reading processlist: %w", err)
	}
	defer rows.Close()
	var out []lockProcess
	for rows.Next() {
		var p lockProcess
		var dbName, cmd, state, info sql.NullString
		var t sql.NullFloat64
		if err := rows.Scan(&p.ID, &dbName, &cmd, &t, &state, &info); err != nil {
			return nil, fmt.Errorf("reading processlist: %w", err)
		}
		if strings.Contains(info.String, Mark) {
			continue // gapscope's own
		}
		p.DB, p.Command, p.State, p.TimeMS, p.Info = dbName.String, cmd.String, state.String, int64(t.Float64), info.String
		out = append(out, p)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading processlist: %w", err)
	}
	return out, nil
}

// --- Blockers' transactions ----------------------------------------------

type trxInfo struct {
	started      time.Time
	state, query string
}

// readTrxOf reads the InnoDB transactions of connections ids.
func readTrxOf(ctx context.Context, db queryer, ids []uint64) (map[uint64]trxInfo, error) {
	list := make([]string, len(ids))
	for i, id := range ids {
		list[i] = strconv.FormatUint(id, 10)
	}
	rows, err := db.QueryContext(ctx, Mark+" SELECT trx_mysql_thread_id, UNIX_TIMESTAMP(trx_started), trx_state, trx_query FROM information_schema.INNODB_TRX WHERE trx_mysql_thread_id IN ("+strings.Join(list, ",")+")")
	if err != nil {
		return nil, fmt.Errorf("reading %s: %w", SrcInnoDBTrx, err)
	}
	defer rows.Close()
	out := map[uint64]trxInfo{}
	for rows.Next() {
		var id uint64
		var started sql.NullInt64
		var state, query sql.NullString
		if err := rows.Scan(&id, &started, &state, &query); err != nil {
			return nil, fmt.Errorf("reading %s: %w", SrcInnoDBTrx, err)
		}
		t := trxInfo{state: state.String, query: query.String}
		if started.Valid {
			t.started = time.Unix(started.Int64, 0)
		}
		out[id] = t
	}
	return out, rows.Err()
}
