package report

import (
	"fmt"
	"os"
	"os/signal"
	"sync"
	"syscall"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/eventlog"
)

// EventsFile is an --events file: one JSON statement per line. The first
// write error is kept (later statements are not written), handed to the
// onFail given to OpenEventLog, and returned by Close, so a full disk is
// never silent. A nil *EventsFile does nothing.
type EventsFile struct {
	path   string
	mu     sync.Mutex // Write, the flusher and Close
	file   *eventlog.File
	events *EventWriter
	err    error
	onFail func(error)
	stop   chan struct{} // closed by Close; nil without a flusher
	done   chan struct{}
	hup    chan os.Signal // SIGHUP while ReopenOnHangup runs
}

// OpenEvents creates path, unbounded; an empty path gives a nil
// *EventsFile whose methods do nothing.
func OpenEvents(path string) (*EventsFile, error) {
	return OpenEventLog(path, eventlog.Options{}, nil)
}

// OpenEventLog creates path, rotated by size as opts says; onFail, when
// not nil, is told of the first write error when it happens.
func OpenEventLog(path string, opts eventlog.Options, onFail func(error)) (*EventsFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := eventlog.Create(path, opts)
	if err != nil {
		return nil, fmt.Errorf("creating events file: %w", err)
	}
	return &EventsFile{path: path, file: f, events: NewEventWriter(f), onFail: onFail}, nil
}

// ReopenOnHangup reopens the file on SIGHUP, as daemons do for log
// rotators that move the file away (logrotate without copytruncate),
// until Close.
func (e *EventsFile) ReopenOnHangup() {
	if e == nil || e.hup != nil {
		return
	}
	e.hup = make(chan os.Signal, 1)
	signal.Notify(e.hup, syscall.SIGHUP)
	go func() {
		for range e.hup {
			e.reopen()
		}
	}()
}

// reopen writes out what is buffered and continues in a new file under
// the same name.
func (e *EventsFile) reopen() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.Flush())
	}
	if e.err == nil {
		e.failed(e.file.Reopen())
	}
}

// Write appends st, unless an earlier write failed.
func (e *EventsFile) Write(st *event.Statement) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.Write(st))
	}
}

// WriteTxn appends a transaction (a --txns file), unless an earlier
// write failed.
func (e *EventsFile) WriteTxn(t *event.Transaction) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.WriteTxn(t))
	}
}

// Transaction is WriteTxn, as a watch sink that takes transactions.
func (e *EventsFile) Transaction(t *event.Transaction) { e.WriteTxn(t) }

// failed keeps err, the first one, and tells onFail.
func (e *EventsFile) failed(err error) {
	if err == nil || e.err != nil {
		return
	}
	e.err = fmt.Errorf("events file %s: %w", e.path, err)
	if e.onFail != nil {
		e.onFail(e.err)
	}
}

// FlushEvery writes buffered lines through every interval until Close, so
// that a process killed without a chance to close loses at most that much
// (and the line being written, which readers recognise as torn).
func (e *EventsFile) FlushEvery(interval time.Duration) {
	if e == nil || e.stop != nil {
		return
	}
	e.stop, e.done = make(chan struct{}), make(chan struct{})
	go func() {
		defer close(e.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-e.stop:
				return
			case <-t.C:
				e.flush()
			}
		}
	}()
}

func (e *EventsFile) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.Flush())
	}
}

// Close flushes and closes the file and returns the first error.
func (e *EventsFile) Close() error {
	if e == nil {
		return nil
	}
	if e.stop != nil {
		close(e.stop)
		<-e.done
	}
	if e.hup != nil {
		signal.Stop(e.hup)
		close(e.hup)
	}
	e.flush()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.file.Close(); err != nil {
		e.failed(err)
	}
	return e.err
}

// StatementSink feeds a profile and, optionally, an events file; analyze
// and digest use it from their reader's goroutine.
type StatementSink struct {
	Profile *Profile
	Events  *EventsFile
}

// NewStatementSink profiles by metric and writes to eventsPath ("" for no
// events file).
func NewStatementSink(eventsPath string, metric Metric) (*StatementSink, error) {
	ev, err := OpenEvents(eventsPath)
	if err != nil {
		return nil, err
	}
	return &StatementSink{Profile: NewProfile(ProfileOptions{Metric: metric}), Events: ev}, nil
}

// Close closes the events file and returns its first error.
func (s *StatementSink) Close() error { return s.Events.Close() }
