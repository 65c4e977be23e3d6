package main

import (
	"fmt"
	"os"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
)

// eventsFile is an --events file: one JSON statement per line. The first
// write error is kept (later statements are not written), handed to onFail
// when set, and returned by close, so a full disk is never silent.
type eventsFile struct {
	path   string
	mu     sync.Mutex // write, the flusher and close
	file   *os.File
	events *report.EventWriter
	err    error
	onFail func(error)
	stop   chan struct{} // closed by close; nil without a flusher
	done   chan struct{}
}

// openEvents creates path; an empty path gives a nil *eventsFile whose
// methods do nothing.
func openEvents(path string) (*eventsFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating events file: %w", err)
	}
	return &eventsFile{path: path, file: f, events: report.NewEventWriter(f)}, nil
}

func (e *eventsFile) write(st *event.Statement) {
	if e == nil {
		return
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.Write(st))
	}
}

// failed keeps err, the first one, and tells onFail.
func (e *eventsFile) failed(err error) {
	if err == nil || e.err != nil {
		return
	}
	e.err = fmt.Errorf("events file %s: %w", e.path, err)
	if e.onFail != nil {
		e.onFail(e.err)
	}
}

// flushEvery writes buffered lines through every interval until close, so
// that a process killed without a chance to close loses at most that much
// (and the line being written, which readers recognise as torn).
func (e *eventsFile) flushEvery(interval time.Duration) {
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

func (e *eventsFile) flush() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.Flush())
	}
}

// close flushes and closes the file and returns the first error.
func (e *eventsFile) close() error {
	if e == nil {
		return nil
	}
	if e.stop != nil {
		close(e.stop)
		<-e.done
	}
	e.flush()
	e.mu.Lock()
	defer e.mu.Unlock()
	if err := e.file.Close(); err != nil {
		e.failed(err)
	}
	return e.err
}

// statementSink feeds a profile and, optionally, an events file; analyze
// and digest use it from their reader's goroutine.
type statementSink struct {
	profile *report.Profile
	events  *eventsFile
}

func newStatementSink(eventsPath string, metric report.Metric) (*statementSink, error) {
	ev, err := openEvents(eventsPath)
	if err != nil {
		return nil, err
	}
	return &statementSink{profile: report.NewProfile(report.ProfileOptions{Metric: metric}), events: ev}, nil
}

func (s *statementSink) add(st *event.Statement) {
	s.profile.Add(st)
	s.events.write(st)
}

func (s *statementSink) close() error { return s.events.close() }

// resultCompleteBut is the error of a run whose result was printed whole
// while its events file failed (nil when it did not).
func resultCompleteBut(eventsErr error) error {
	if eventsErr == nil {
		return nil
	}
	return fmt.Errorf("the result above is complete, but: %w", eventsErr)
}
