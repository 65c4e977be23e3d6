package slowlog

// Event is one slow-log entry. Byte-slice fields are owned by the parser and
// valid until the next call to Parser.Next; copy what you keep. Durations
// are microseconds, times Unix microseconds; a field the log does not carry
// is zero (see the Has* flags where zero is a valid value).
type Event struct {
	// Line is the 1-based line number of the event's first line.
	Line int64

	User, Host, IP []byte
	// ConnID is the connection (thread) id: "Id:" of User@Host, or
	// "Thread_id:" of MariaDB and log_slow_extra.
	ConnID uint64
	// Schema is the "Schema:" field, or else the current database from the
	// log's "use db;" lines.
	Schema []byte

	QueryTimeUS, LockTimeUS int64
	RowsSent, RowsExamined  int64
	RowsAffected            int64
	BytesSent, BytesRecv    int64
	// Errno is log_slow_extra's Errno or Percona's Last_errno.
	Errno  int
	Killed int

	// StartUS is the statement's start (see the package doc for the source
	// order); 0 when the log says nothing about it. EndUS is log_slow_extra's
	// End, or StartUS + QueryTimeUS when StartUS is known.
	StartUS, EndUS int64
	// TimeUS is the "# Time:" in force for this event (possibly carried over
	// from an earlier event); SetTimestamp the "SET timestamp=N" seconds.
	TimeUS       int64
	SetTimestamp int64

	// Query plan fields (MariaDB log_slow_verbosity=query_plan, Percona).
	TmpTables, TmpDiskTables int64
	FullScan, FullJoin       bool
	TmpTable, TmpTableOnDisk bool
	Filesort, FilesortOnDisk bool
	MergePasses              int64
	QCHit                    bool
	// Percona Server's InnoDB fields (log_slow_verbosity=innodb or full):
	// InnoDB_IO_r_ops, InnoDB_IO_r_bytes, InnoDB_IO_r_wait (page reads and
	// the time spent waiting for them), InnoDB_rec_lock_wait (row-lock
	// wait), InnoDB_queue_wait (waiting for or in InnoDB's concurrency
	// queue), InnoDB_pages_distinct. Waits are microseconds.
	InnoDBIOReadOps     int64
	InnoDBIOReadBytes   int64
	InnoDBIOReadWaitUS  int64
	InnoDBRecLockWaitUS int64
	InnoDBQueueWaitUS   int64
	InnoDBPagesDistinct int64
	// MariaDB's log_slow_verbosity=engine (or innodb, its older name)
	// fields: "# Pages_accessed: N  Pages_read: N  Pages_prefetched: N
	// Pages_updated: N  Old_rows_read: N" and "# Pages_read_time: MS
	// Engine_time: MS", the times written in milliseconds, kept here in
	// microseconds. MariaDB has no row-lock wait field: a wait is inside
	// Engine_time (and not in Lock_time).
	PagesAccessed, PagesRead  int64
	PagesPrefetched           int64
	PagesUpdated, OldRowsRead int64
	PagesReadTimeUS           int64
	EngineTimeUS              int64
	// EngineFields marks the engine fields above the event had (Engine*
	// bits), so a 0 the log wrote is told from a field it lacks.
	EngineFields uint16

	// HasPlan: the event carried query-plan or storage-engine fields.
	HasPlan                   bool
	RateLimit                 int64 // Percona Log_slow_rate_limit: 1 in N logged
	ExplainLines              int
	HasQueryTime, HasLockTime bool
	HasRowsExamined, HasErrno bool
	// HasBytesRecv: the event had a Bytes_received field.
	HasBytesRecv bool

	// Admin is set for "# administrator command: X;" events; AdminCommand is X.
	Admin        bool
	AdminCommand []byte
	// Query is the statement text without the server's trailing ";".
	Query []byte
	// Truncated: a line of the statement was longer than MaxLineBytes.
	Truncated bool
	// Notes are constant strings about how the event was read.
	Notes []string

	// parser state for this event
	hasUserHost, hasTime, hasSet, hasUse, inQuery, badQueryTime bool
	timeHasFraction, timeHasZone                                bool
	timeThisEvent                                               int64
	terminated                                                  bool
	semicolon                                                   bool // last statement line ended with ";"
}

// Notes attached to events.
const (
	NoteTruncated     = "slowlog: statement line longer than the line limit, cut"
	NoteUnterminated  = "slowlog: statement not terminated (log cut short?)"
	NoteStartUnknown  = "slowlog: start time unknown"
	NoteStartFromTime = "slowlog: start time from a carried-over # Time line"
)

func (e *Event) reset() {
	user, host, ip, schema, admin, query, notes := e.User[:0], e.Host[:0], e.IP[:0], e.Schema[:0], e.AdminCommand[:0], e.Query[:0], e.Notes[:0]
	if cap(query) > keepBufferBytes {
		query = nil
	}
	*e = Event{User: user, Host: host, IP: ip, Schema: schema, AdminCommand: admin, Query: query, Notes: notes}
}

// started reports whether any line of an event has been seen.
func (e *Event) started() bool {
	return e.hasTime || e.hasUserHost || e.HasQueryTime || e.badQueryTime || e.inQuery || e.hasSet || e.hasUse
}

// complete reports whether the event is one the parser emits.
func (e *Event) complete() bool { return e.HasQueryTime && e.inQuery }

// Engine* are the bits of Event.EngineFields, one per engine field, in
// the order report.Plan.Known uses: the first eleven as they were first
// read, the two added later after them.
const (
	EngineIOReadOps       uint16 = 1 << iota // InnoDB_IO_r_ops
	EngineIOReadWait                         // InnoDB_IO_r_wait
	EngineRecLockWait                        // InnoDB_rec_lock_wait
	EngineQueueWait                          // InnoDB_queue_wait
	EnginePagesDistinct                      // InnoDB_pages_distinct
	EnginePagesAccessed                      // Pages_accessed
	EnginePagesRead                          // Pages_read
	EnginePagesUpdated                       // Pages_updated
	EngineOldRowsRead                        // Old_rows_read
	EnginePagesReadTime                      // Pages_read_time
	EngineTime                               // Engine_time
	EngineIOReadBytes                        // InnoDB_IO_r_bytes
	EnginePagesPrefetched                    // Pages_prefetched
)

// Has reports whether the event had every engine field of f (Engine*
// bits): a field the log did not write is unknown, not 0.
func (e *Event) Has(f uint16) bool { return e.EngineFields&f == f }
