package report

import (
	"bufio"
	"bytes"
	"fmt"
	"io"

	"github.com/gapscope/gapscope/internal/event"
)

// EventWriter writes statements as JSON lines, buffered, each line led by
// the events schema version ("v", event.SchemaVersion); docs/events.md
// describes every field. Lines are appended by event.Statement's own
// encoder (AppendLine), allocation-free, which writes a counter the
// statement knows even when it is 0. It is not safe for concurrent use.
type EventWriter struct {
	bw   *bufio.Writer
	line []byte
	err  error // first write error; later calls return it
}

// NewEventWriter buffers 64 KiB at a time to w.
func NewEventWriter(w io.Writer) *EventWriter {
	return &EventWriter{bw: bufio.NewWriterSize(w, 64<<10)}
}

// Write appends one statement as a line.
func (e *EventWriter) Write(s *event.Statement) error {
	if e.err != nil {
		return e.err
	}
	e.line = append(s.AppendLine(e.line[:0]), '\n')
	if _, err := e.bw.Write(e.line); err != nil {
		e.err = fmt.Errorf("writing events: %w", err)
	}
	return e.err
}

// WriteTxn appends one transaction as a line (a --txns file).
func (e *EventWriter) WriteTxn(t *event.Transaction) error {
	if e.err != nil {
		return e.err
	}
	e.line = append(t.AppendLine(e.line[:0]), '\n')
	if _, err := e.bw.Write(e.line); err != nil {
		e.err = fmt.Errorf("writing transactions: %w", err)
	}
	return e.err
}

// Flush writes buffered lines through.
func (e *EventWriter) Flush() error {
	if e.err != nil {
		return e.err
	}
	if err := e.bw.Flush(); err != nil {
		e.err = fmt.Errorf("writing events: %w", err)
	}
	return e.err
}

// checkVersion refuses a line written with a newer events schema than
// event.SchemaVersion: its fields may no longer mean what this gapscope
// thinks they mean.
func checkVersion(v int) error {
	if v > event.SchemaVersion {
		return fmt.Errorf("events schema v%d is newer than this gapscope reads (v%d): use a newer gapscope", v, event.SchemaVersion)
	}
	return nil
}

// EventsRead says what ReadEvents found in a file.
type EventsRead struct {
	// Statements is the number of whole lines read.
	Statements int
	// TornBytes is the length of a last line cut short by a writer that
	// stopped mid-line (killed, or its disk full): left out, 0 when none.
	TornBytes int
}

// TornNote says what a torn tail means for the reader; "" when none.
func (r EventsRead) TornNote(path string) string {
	if r.TornBytes == 0 {
		return ""
	}
	return fmt.Sprintf("%s: the last line is torn (%d bytes without an end: its writer stopped mid-line); read the %d whole lines before it",
		path, r.TornBytes, r.Statements)
}

// LineError is a line of an events file that does not parse.
type LineError struct {
	Line int
	Err  error
}

func (e *LineError) Error() string { return fmt.Sprintf("line %d: %v", e.Line, e.Err) }
func (e *LineError) Unwrap() error { return e.Err }

// ReadEvents reads JSON-lines statements (EventWriter's output) from r and
// calls fn with each. Lines without "v" (written before the schema was
// versioned) read as version 1; a line of a newer version than this
// gapscope knows is a *LineError, not a statement half understood. A last line that has no newline and does not parse is
// a torn tail, what a writer killed mid-write leaves: it is counted in
// TornBytes and left out, since every line before it is whole. Any other
// line that does not parse is a *LineError.
func ReadEvents(r io.Reader, fn func(*event.Statement)) (EventsRead, error) {
	var res EventsRead
	br := bufio.NewReaderSize(r, 64<<10)
	for line := 1; ; line++ {
		b, err := br.ReadBytes('\n')
		if err != nil && err != io.EOF {
			return res, err
		}
		last := err == io.EOF
		if len(bytes.TrimSpace(b)) > 0 {
			st := new(event.Statement)
			v, jerr := event.DecodeLine(b, st)
			if jerr != nil {
				if last { // no newline: the writer stopped inside this line
					res.TornBytes = len(b)
					return res, nil
				}
				return res, &LineError{Line: line, Err: jerr}
			}
			if verr := checkVersion(v); verr != nil {
				return res, &LineError{Line: line, Err: verr}
			}
			res.Statements++
			fn(st)
		}
		if last {
			return res, nil
		}
	}
}
