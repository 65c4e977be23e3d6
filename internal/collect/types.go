// Package collect reads what the server records: performance_schema
// statements, stages, waits, threads, digests; global status and variables;
// processlist; MariaDB thread-pool tables; InnoDB persistent statistics; slow
// logs (subpackage slowlog). Each reader is small, flavour-gated, and reports
// its own duration and success.
package collect

import (
	"math"

	"github.com/gapscope/gapscope/internal/sqltext"
)

// Picoseconds per unit: performance_schema TIMER_* columns are picoseconds.
const (
	PicosPerMicro = 1_000_000
	PicosPerSec   = 1_000_000_000_000
)

// ServerStatement is one row of events_statements_history(_long) (or
// _current), with its times converted to the wall clock by a Clock.
type ServerStatement struct {
	ThreadID   uint64
	EventID    uint64
	EndEventID uint64
	ConnID     uint64 // threads.PROCESSLIST_ID; 0 for background threads
	// Socket: the client connected through the server's unix socket
	// (threads.CONNECTION_TYPE), which no packet capture sees.
	Socket    bool
	EventName string // statement/sql/select, statement/com/Execute, ...
	SQLText   string
	// TextCut says whether SQLText is the statement's whole text (see
	// TextCut's values): the server keeps at most
	// performance_schema_max_sql_text_length bytes of it, and a join
	// cursor reads only its start.
	TextCut    TextCut
	Digest     string
	DigestText string
	Schema     string
	// TimerStart/TimerEnd/TimerWait are raw picoseconds since server start.
	TimerStart, TimerEnd, TimerWait uint64
	// StartUS/EndUS are Unix microseconds (0 until calibrated).
	StartUS, EndUS int64
	RowsSent       int64
	RowsExamined   int64
	RowsAffected   int64
	Errors         int64
	MySQLErrno     int
	LockTimePS     uint64
	NestingLevel   int // NESTING_EVENT_LEVEL (MySQL 8) / 0 when absent
	NestingType    string
	// NestingEventID is the parent event (a CALL for statements of a stored
	// program); 0 for top-level statements.
	NestingEventID       uint64
	Warnings             int64
	SQLState             string
	MessageText          string
	CreatedTmpDiskTables int64
	CreatedTmpTables     int64
	SelectFullJoin       int64
	SelectScan           int64
	SortRows             int64
	NoIndexUsed          bool
	NoGoodIndexUsed      bool
	CPUTimePS            uint64 // MySQL 8.0.28+; 0 elsewhere
	// Source is the table the row was read from (SourceHistoryLong, ...);
	// "" when the reader did not say.
	Source string
	// Targeted: read for one statement, from its thread's rows
	// (ThreadStatements), not by the cursor that returns each thread's rows
	// in order; the row's statement may have followed ones whose rows the
	// cursor has yet to bring.
	Targeted bool
}

// The tables a statement row can come from (ServerStatement.Source).
const (
	SourceHistoryLong = "events_statements_history_long"
	SourceHistory     = "events_statements_history"
	SourceCurrent     = "events_statements_current"
	// SourceRunning: read from events_statements_current while it still
	// ran, its final row gone before it could be read (the thread ended, or
	// its next statements pushed it out of the thread's history); its end
	// is the caller's (watch takes when the server sent its last answer
	// byte, from the wire).
	SourceRunning = "events_statements_current (read while running; end from the wire)"
)

// Clock converts performance_schema picosecond timers into Unix time.
// OriginUS is the Unix microsecond at which the timers read 0.
type Clock struct {
	OriginUS int64
	// ErrorUS is the calibration's uncertainty (half the marker round trip).
	ErrorUS int64
	// CalibratedAtUS is when the origin was measured.
	CalibratedAtUS int64
	// ServerOffsetUS is the server's own wall clock minus ours, from
	// UNIX_TIMESTAMP(NOW(6)) of the marker (a cross-check: a large value
	// means the server's clock differs, not that the calibration is off).
	ServerOffsetUS int64
	// Samples is how many marker round trips were used.
	Samples int
	// PathRTTUS is the smallest COM_PING round trip of the calibrating
	// connection. From LinkRTTFloorNS on, the connection crosses a network
	// and each marker's bracket was narrowed by half of it at both ends
	// (the request reached the server a transit after it left, the answer
	// left a transit before it came back; both ways assumed equal), which
	// is what ErrorUS then reflects.
	PathRTTUS int64
	// Wait converts wait timers, which run on their own timer (CYCLE on
	// MariaDB by default) with their own origin and rate. Zero value: waits
	// share the statement timer.
	Wait WaitClock
}

// WaitClock maps wait TIMER_* values to Unix microseconds:
// us = OriginUS + ps/1e6 * Rate. Rate 0 means 1.
type WaitClock struct {
	Timer    string  // setup_timers TIMER_NAME for waits ("NANOSECOND", "CYCLE", ...)
	Set      bool    // OriginUS/Rate were measured
	OriginUS int64   // Unix µs at which the wait timer reads 0
	Rate     float64 // wall µs per timer µs
}

// WaitMicros converts a wait timer value into Unix microseconds.
func (c Clock) WaitMicros(ps uint64) int64 {
	if !c.Wait.Set {
		return c.UnixMicros(ps)
	}
	rate := c.Wait.Rate
	if rate == 0 {
		rate = 1
	}
	return c.Wait.OriginUS + int64(math.Round(float64(ps/PicosPerMicro)*rate))
}

// UnixMicros converts a picosecond timer value into Unix microseconds.
func (c Clock) UnixMicros(ps uint64) int64 {
	return c.OriginUS + int64(ps/PicosPerMicro)
}

// Mark is the comment every gapscope query carries, so that gapscope can drop
// its own statements from what it reports (docs/design.md).
const Mark = sqltext.Marker

// ServerInfo describes the server gapscope is connected to: enough to gate
// collectors by flavour and version and to audit instrumentation.
type ServerInfo struct {
	Flavor         string `json:"flavor"` // "mariadb", "mysql" or "percona"
	Version        string `json:"version"`
	VersionComment string `json:"version_comment,omitempty"`
	Major          int    `json:"major"`
	Minor          int    `json:"minor"`
	Patch          int    `json:"patch"`
	Hostname       string `json:"hostname,omitempty"`
	CurrentUser    string `json:"current_user,omitempty"`
	ConnectionID   uint64 `json:"connection_id"`
	UptimeS        int64  `json:"uptime_s"`

	PerformanceSchema bool `json:"performance_schema"`
	// HistorySize and HistoryLongSize are the per-thread and global ring
	// sizes of events_statements_history(_long); -1 when unknown.
	HistorySize     int `json:"history_size"`
	HistoryLongSize int `json:"history_long_size"`
	// Timers maps setup_timers NAME -> TIMER_NAME (empty where the table
	// does not exist, MySQL 8.0+, whose timers are fixed).
	Timers map[string]string `json:"timers,omitempty"`

	ThreadHandling   string `json:"thread_handling,omitempty"`
	ThreadPool       bool   `json:"thread_pool"`        // connections are served by a thread pool
	ThreadPoolTables bool   `json:"thread_pool_tables"` // information_schema.THREAD_POOL_* exist
	ThreadPoolSize   int    `json:"thread_pool_size,omitempty"`
	ExtraPort        int    `json:"extra_port,omitempty"`
}

// AtLeast reports whether the server version is >= major.minor.patch.
func (s ServerInfo) AtLeast(major, minor, patch int) bool {
	if s.Major != major {
		return s.Major > major
	}
	if s.Minor != minor {
		return s.Minor > minor
	}
	return s.Patch >= patch
}

// MariaDB reports whether the server is MariaDB.
func (s ServerInfo) MariaDB() bool { return s.Flavor == "mariadb" }

// Process is one row of the processlist.
type Process struct {
	ID      uint64 `json:"id"`
	User    string `json:"user"`
	Host    string `json:"host"` // ip:port for TCP clients, "localhost" for sockets
	DB      string `json:"db,omitempty"`
	Command string `json:"command"`
	TimeMS  int64  `json:"time_ms"`
	State   string `json:"state,omitempty"`
	Info    string `json:"info,omitempty"`
}

// PoolGroup is one row of MariaDB's information_schema.THREAD_POOL_GROUPS.
type PoolGroup struct {
	GroupID        int  `json:"group_id"`
	Connections    int  `json:"connections"`
	Threads        int  `json:"threads"`
	ActiveThreads  int  `json:"active_threads"`
	StandbyThreads int  `json:"standby_threads"`
	QueueLength    int  `json:"queue_length"`
	HasListener    bool `json:"has_listener"`
	IsStalled      bool `json:"is_stalled"`
}
