package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/eventlog"
	"github.com/gapscope/gapscope/internal/report"
)

// eventsFile is an --events file: one JSON statement per line. The first
// write error is kept (later statements are not written), handed to onFail
// when set, and returned by close, so a full disk is never silent.
type eventsFile struct {
	path   string
	mu     sync.Mutex // write, the flusher and close
	file   *eventlog.File
	events *report.EventWriter
	err    error
	onFail func(error)
	stop   chan struct{} // closed by close; nil without a flusher
	done   chan struct{}
	hup    chan os.Signal // SIGHUP while reopenOnHangup runs
}

// openEvents creates path, unbounded; an empty path gives a nil
// *eventsFile whose methods do nothing.
func openEvents(path string) (*eventsFile, error) {
	return openEventLog(path, eventlog.Options{})
}

// openEventLog creates path, rotated by size as opts says.
func openEventLog(path string, opts eventlog.Options) (*eventsFile, error) {
	if path == "" {
		return nil, nil
	}
	f, err := eventlog.Create(path, opts)
	if err != nil {
		return nil, fmt.Errorf("creating events file: %w", err)
	}
	return &eventsFile{path: path, file: f, events: report.NewEventWriter(f)}, nil
}

// reopenOnHangup reopens the file on SIGHUP, as daemons do for log
// rotators that move the file away (logrotate without copytruncate),
// until close.
func (e *eventsFile) reopenOnHangup() {
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
func (e *eventsFile) reopen() {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.err == nil {
		e.failed(e.events.Flush())
	}
	if e.err == nil {
		e.failed(e.file.Reopen())
	}
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

// byteSize is a --*-max-size flag: a number of bytes with an optional
// unit, KB/MB/GB (powers of 1000) or KiB/MiB/GiB (of 1024); 0: no bound.
type byteSize int64

var sizeUnits = []struct {
	suffix string
	mult   int64
}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"TiB", 1 << 40},
	{"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"TB", 1e12}, {"K", 1 << 10}, {"M", 1 << 20}, {"G", 1 << 30}, {"B", 1}}

func (b *byteSize) Set(v string) error {
	num, mult := strings.TrimSpace(v), int64(1)
	for _, u := range sizeUnits {
		if n, ok := strings.CutSuffix(num, u.suffix); ok {
			num, mult = strings.TrimSpace(n), u.mult
			break
		}
	}
	f, err := strconv.ParseFloat(num, 64)
	if err != nil || f < 0 {
		return fmt.Errorf("%q is not a size (a number with KB, MB, GB, KiB, MiB or GiB)", v)
	}
	*b = byteSize(f * float64(mult))
	return nil
}

func (b *byteSize) String() string {
	for _, u := range sizeUnits[:4] {
		if n := int64(*b); n >= u.mult && n%u.mult == 0 && (n/u.mult < 1024 || u.suffix == "TiB") {
			return fmt.Sprintf("%d%s", n/u.mult, u.suffix)
		}
	}
	return strconv.FormatInt(int64(*b), 10)
}

func (b *byteSize) Type() string { return "size" }

// retention is a --*-retain flag: a Go duration or a number of days (7d).
type retention time.Duration

func (r *retention) Set(v string) error {
	if d, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.ParseFloat(d, 64)
		if err != nil || n < 0 {
			return fmt.Errorf("%q is not a duration (7d, 36h, 90m)", v)
		}
		*r = retention(n * float64(24*time.Hour))
		return nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return fmt.Errorf("%q is not a duration (7d, 36h, 90m)", v)
	}
	*r = retention(d)
	return nil
}

func (r *retention) String() string {
	d := time.Duration(*r)
	if d > 0 && d%(24*time.Hour) == 0 {
		return fmt.Sprintf("%dd", d/(24*time.Hour))
	}
	return d.String()
}

func (r *retention) Type() string { return "duration" }
