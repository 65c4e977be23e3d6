package main

import (
	"fmt"
	"os"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
)

// eventsFile is an --events file: one JSON statement per line. Write errors
// are kept and reported by close, so a full disk is never silent.
type eventsFile struct {
	file   *os.File
	events *report.EventWriter
	err    error
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
	return &eventsFile{file: f, events: report.NewEventWriter(f)}, nil
}

func (e *eventsFile) write(st *event.Statement) {
	if e != nil && e.err == nil {
		e.err = e.events.Write(st)
	}
}

// close flushes and closes the file and returns the first error.
func (e *eventsFile) close() error {
	if e == nil {
		return nil
	}
	if e.err == nil {
		e.err = e.events.Flush()
	}
	if err := e.file.Close(); e.err == nil && err != nil {
		e.err = fmt.Errorf("writing events: %w", err)
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
