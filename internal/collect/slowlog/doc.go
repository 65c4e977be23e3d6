// Package slowlog is a streaming parser for MySQL and MariaDB slow query
// logs: MySQL 5.1 through 8.x (including log_slow_extra), Percona Server's
// extended fields (InnoDB_IO_r_*, InnoDB_rec_lock_wait, InnoDB_queue_wait,
// InnoDB_pages_distinct), and MariaDB 10.x (YYMMDD and ISO time lines,
// Thread_id/Schema/QC_hit, Rows_affected, query-plan and EXPLAIN lines,
// and log_slow_verbosity=engine's Pages_* and Engine_time lines). It
// reads plain or gzip files (recognised by their magic bytes, not their
// name) and stdin, one line at a time through a fixed-size buffer, reusing
// its buffers from event to event: memory does not grow with the size of the
// file, only with the longest statement in it.
//
// # Events
//
// An event is the header lines that start with "# " (Time, User@Host,
// Query_time, and the dialects' other fields) followed by the statement
// text, which may span many lines. "use db;" and "SET timestamp=N;" lines
// that the server writes between the header and the statement are metadata,
// not statements; only the first of each, before any statement text, is
// taken as such, so that a user's own "USE db" or "SET timestamp=1" after
// them is still the statement. Inside statement text a line starting with
// "#" is text, unless the previous line ended with ";" (the server ends
// every statement with one) and it starts a new event ("# Time:",
// "# User@Host:", "# Query_time:"); that keeps string literals and
// comments with "# ..." lines intact.
// "# administrator command: Quit;" is the statement of an administrator
// command event. The server's restart banner ("... Version: ... started
// with:", "Tcp port: ...", "Time  Id Command  Argument") ends the current
// event and is skipped.
//
// # Malformed events
//
// A slow-log event is a measurement: without its Query_time it cannot be
// ranked, so the parser emits an event only when it has both a Query_time
// and statement text. Everything else is dropped and counted in Stats,
// never silently:
//
//   - HeaderOnly: header lines with no statement before the next event, a
//     banner or the end of the input (a write cut short, or a log truncated
//     by rotation).
//   - Orphans: statement text with no Query_time before it, typically the
//     tail of an event whose header is in the previous file of a rotation,
//     or text after garbage. Its lines are skipped up to the next header.
//   - BadValues: a header field whose value is not a number or time where
//     one is required. The field is ignored; a bad Query_time makes the
//     event Malformed (dropped, counted) instead.
//   - TruncatedLines: a line longer than Options.MaxLineBytes (64 MiB by
//     default) is cut at that length; the rest of the line is read and
//     discarded, so memory stays bounded. The event is still emitted, with
//     Truncated set and a note.
//
// An event whose statement does not end with ";" (the server always writes
// one) is emitted with the note "statement not terminated", which is how a
// log cut off mid-statement shows. Bad input never panics; read errors end
// parsing with an error that wraps the cause.
//
// # Times
//
// Event start (Event.StartUS, Unix microseconds) is taken from, in order:
// the log_slow_extra Start field; an ISO "# Time:" line of this very event
// (MySQL 5.7+ writes one per event, with microseconds, at the end of the
// statement) minus Query_time; the "SET timestamp=N" line (the statement's
// start, whole seconds, absolute); a "# Time:" line carried over from an
// earlier event (MySQL 5.x and MariaDB write one only when the second
// changes) minus Query_time. Time lines without a zone (YYMMDD, or ISO
// without "Z"/offset) are read in Options.Location, time.Local by default.
package slowlog
