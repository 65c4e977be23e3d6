package slowlog

import (
	"strings"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

// ConvertOptions configure a Converter.
type ConvertOptions struct {
	// KeepLiterals puts the raw statement text in Statement.SQL; by default
	// SQL is the digest text, literals redacted.
	KeepLiterals bool
	// CacheSize bounds the normalizer's cache (sqltext default when zero).
	CacheSize int
	// LazyText leaves Statement.SQL, DigestText and Digest empty, for a
	// caller that groups by another key and needs the text of few
	// statements: it fills them with its own Converter's Text.
	LazyText bool
}

// Converter turns events into gapscope statement events. It reuses its
// buffers and caches, so it is not safe for concurrent use.
type Converter struct {
	norm   *sqltext.Normalizer
	keep   bool
	lazy   bool
	intern Interner
	// waits is the rest of the block the statements' lock waits are
	// handed out from (lockWaitOf).
	waits []event.LockWait
}

// lockWaitBlock is how many lock waits one allocation holds.
const lockWaitBlock = 64

// NewConverter returns a Converter.
func NewConverter(opts ConvertOptions) *Converter {
	return &Converter{
		norm: sqltext.NewNormalizer(opts.CacheSize),
		keep: opts.KeepLiterals,
		lazy: opts.LazyText,
	}
}

// Statement fills dst from ev (overwriting every field) and reports whether
// it is a statement to report: gapscope's own statements are not. Strings
// are shared and immutable, so dst may be kept; with the default options it
// allocates nothing for a statement text seen before.
func (c *Converter) Statement(ev *Event, dst *event.Statement) bool {
	if sqltext.IsOwn(ev.Query) {
		return false
	}
	*dst = event.Statement{
		ConnID:       ev.ConnID,
		User:         c.str(ev.User),
		DB:           c.str(ev.Schema),
		Cmd:          "COM_QUERY",
		TReqFirst:    ev.StartUS,
		ServerUS:     ev.QueryTimeUS,
		LockUS:       ev.LockTimeUS,
		Rows:         ev.RowsSent,
		RowsExamined: ev.RowsExamined,
		RespBytes:    ev.BytesSent,
		ReqBytes:     ev.BytesRecv,
		Known:        known(ev),
	}
	if ev.Admin {
		dst.Cmd = c.adminCmd(ev.AdminCommand)
	}
	if !c.lazy {
		c.Text(ev, dst)
	}
	if ev.Errno != 0 {
		dst.Error = &event.Error{Code: uint16(ev.Errno)}
	}
	if len(ev.Notes) > 0 {
		dst.Notes = append([]string(nil), ev.Notes...)
	}
	c.lockWaitOf(ev, dst)
	return true
}

// NoteLockWaitCut is the note of a statement whose InnoDB_rec_lock_wait
// was longer than its Query_time: the wait is cut to the statement's time.
const NoteLockWaitCut = "slowlog: InnoDB_rec_lock_wait longer than Query_time, cut to it"

// lockWaitOf sets the statement's lock wait from Percona Server's
// InnoDB_rec_lock_wait when the statement waited: a row lock, its blocker
// unknown (the log does not say). A 0 the log wrote is no wait, and a log
// without the field (MariaDB's, MySQL's) says nothing: LockWait stays nil
// either way; the slow log's own record (Event) keeps which it was.
func (c *Converter) lockWaitOf(ev *Event, dst *event.Statement) {
	us := ev.InnoDBRecLockWaitUS
	if us <= 0 || !ev.Has(EngineRecLockWait) {
		return
	}
	if us > ev.QueryTimeUS {
		us = ev.QueryTimeUS
		dst.Notes = append(dst.Notes, NoteLockWaitCut)
		if us == 0 {
			return
		}
	}
	if len(c.waits) == 0 {
		// Never reused: the statements that hold them may be kept.
		c.waits = make([]event.LockWait, lockWaitBlock)
	}
	w := &c.waits[0]
	c.waits = c.waits[1:]
	*w = event.LockWait{LockWaitUS: us}
	dst.LockWait = w
}

// known marks the counters the event's log had: Query_time always (an
// event without it is not emitted), the others when their field was there,
// so a 0 the log wrote is written as 0 and a field it lacked stays absent.
func known(ev *Event) event.Counters {
	k := event.KnowsServerUS
	if ev.HasLockTime {
		k |= event.KnowsLockUS
	}
	if ev.HasRowsExamined {
		k |= event.KnowsRowsExamined
	}
	if ev.HasBytesRecv {
		k |= event.KnowsReqBytes
	}
	return k
}

// Text fills dst's digest text and digest and its SQL: the digest text,
// or the statement as written with KeepLiterals and for administrator
// commands.
func (c *Converter) Text(ev *Event, dst *event.Statement) {
	dst.DigestText, dst.Digest = c.norm.Normalize(ev.Query)
	dst.SQL = dst.DigestText
	if c.keep || ev.Admin {
		dst.SQL = string(ev.Query)
	}
}

// str returns b as a string, shared between events with the same value.
func (c *Converter) str(b []byte) string { return c.intern.String(b) }

// adminCommands maps the names the server writes in "# administrator
// command: X;" to the protocol command names gapscope uses elsewhere.
var adminCommands = map[string]string{
	"Quit": "COM_QUIT", "Init DB": "COM_INIT_DB", "Field List": "COM_FIELD_LIST",
	"Refresh": "COM_REFRESH", "Shutdown": "COM_SHUTDOWN", "Statistics": "COM_STATISTICS",
	"Processlist": "COM_PROCESS_INFO", "Connect": "COM_CONNECT", "Kill": "COM_PROCESS_KILL",
	"Debug": "COM_DEBUG", "Ping": "COM_PING", "Change user": "COM_CHANGE_USER",
	"Binlog Dump": "COM_BINLOG_DUMP", "Register Slave": "COM_REGISTER_SLAVE",
	"Prepare": "COM_STMT_PREPARE", "Execute": "COM_STMT_EXECUTE",
	"Long Data": "COM_STMT_SEND_LONG_DATA", "Close stmt": "COM_STMT_CLOSE",
	"Reset stmt": "COM_STMT_RESET", "Set option": "COM_SET_OPTION", "Fetch": "COM_STMT_FETCH",
	"Reset connection": "COM_RESET_CONNECTION", "Binlog Dump GTID": "COM_BINLOG_DUMP_GTID",
}

func (c *Converter) adminCmd(name []byte) string {
	if cmd, ok := adminCommands[string(name)]; ok {
		return cmd
	}
	return c.str([]byte("COM_" + strings.ToUpper(strings.ReplaceAll(string(name), " ", "_"))))
}
