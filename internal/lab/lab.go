// Package lab reproduces the field reports on private MariaDB sandboxes:
// each scenario starts a sandbox with the settings of its report, runs
// gapscope's watch engine on it while a workload (internal/workload)
// recreates the problem, and returns what was done, what was seen and the
// diagnosis. Labs are both the 60-second demo and end-to-end tests.
package lab

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/watch"
)

// Result is a scenario's outcome; its JSON form is the `lab --format json`
// output: {"scenario", "findings", "statements", ...}.
type Result struct {
	Scenario   string            `json:"scenario"`
	Server     string            `json:"server"`
	Settings   []string          `json:"settings"`
	Steps      []string          `json:"steps"`
	Seen       []string          `json:"seen"`
	Findings   []event.Finding   `json:"findings"`
	Statements []event.Statement `json:"statements"`
	// Marked are the statements the scenario is about (victim, control,
	// slow reader ...), by role.
	Marked map[string]event.Statement `json:"marked,omitempty"`
	// Remote is the remote scenario's summary.
	Remote  *RemoteSummary `json:"remote,omitempty"`
	Watch   *watch.Result  `json:"-"`
	Elapsed time.Duration  `json:"elapsed_ns"`
}

// Options tune a scenario run.
type Options struct {
	// Progress receives one line per step as it happens (nil: silent).
	Progress io.Writer
	// KeepLiterals keeps SQL literals in the statements.
	KeepLiterals bool
}

func (o Options) step(r *Result, format string, a ...any) {
	s := fmt.Sprintf(format, a...)
	r.Steps = append(r.Steps, s)
	if o.Progress != nil {
		fmt.Fprintf(o.Progress, "  · %s\n", s)
	}
}

// psArgs turn on what watch reads: statement history (long, per thread,
// current) with every statement instrument timed.
var psArgs = []string{
	"--performance-schema=ON",
	"--performance-schema-consumer-events-statements-current=ON",
	"--performance-schema-consumer-events-statements-history=ON",
	"--performance-schema-consumer-events-statements-history-long=ON",
}

// session is a running watch over a sandbox.
type session struct {
	done   chan struct{}
	cancel context.CancelFunc
	res    *watch.Result
	err    error
}

// startWatch runs the watch engine in the background and returns once it
// sees the wire and the server.
func startWatch(ctx context.Context, opts watch.Options) (*session, error) {
	ctx, cancel := context.WithCancel(ctx)
	s := &session{done: make(chan struct{}), cancel: cancel}
	ready := make(chan struct{})
	opts.Ready = func(watch.Started) { close(ready) }
	go func() {
		defer close(s.done)
		s.res, s.err = watch.Run(ctx, opts)
	}()
	select {
	case <-ready:
		return s, nil
	case <-s.done:
		cancel()
		return nil, fmt.Errorf("starting watch: %w", s.err)
	}
}

// stop ends the watch and returns what it saw.
func (s *session) stop() (*watch.Result, error) {
	s.cancel()
	<-s.done
	return s.res, s.err
}

// startSandbox starts a private server with the scenario's settings.
func startSandbox(ctx context.Context, o Options, r *Result, sb sandbox.Options) (*sandbox.Instance, error) {
	o.step(r, "starting a private MariaDB sandbox with %v", r.Settings)
	inst, err := sandbox.Start(ctx, sb)
	if err != nil {
		return nil, err
	}
	r.Server = inst.Addr()
	return inst, nil
}

// findStatement returns the first statement of connection connID that
// the client sent at or after afterUS (the capture and the client share the
// host clock; 1 ms of slack covers the client's own timing).
func findStatement(window []event.Statement, connID uint64, afterUS int64) (event.Statement, bool) {
	for _, s := range window {
		if s.ConnID == connID && s.TReqFirst >= afterUS-1000 && s.Cmd == "COM_QUERY" {
			return s, true
		}
	}
	return event.Statement{}, false
}

// describe renders a statement's decomposition in one line.
func describe(s event.Statement) string {
	if !s.Joined {
		return fmt.Sprintf("client %s (not joined with the server)", report.Micros(s.ClientUS))
	}
	return fmt.Sprintf("client %s = request %s + queue %s + exec %s + stall %s + delivery %s (server recorded %s)",
		report.Micros(s.ClientUS), report.Micros(s.RequestUS), report.Micros(s.QueueUS), report.Micros(s.ExecUS), report.Micros(s.SendStallUS), report.Micros(s.DeliveryUS), report.Micros(s.ServerUS))
}

// monitorUser is the least-privileged account labs run gapscope with, as a
// DBA should: PROCESS and SELECT on performance_schema, nothing more.
const monitorUser = "gapscope"

// createMonitor creates the monitor account on a sandbox and returns its
// DSN (on the extra port when extra is set, outside the thread pool).
func createMonitor(ctx context.Context, inst *sandbox.Instance, extra bool) (string, error) {
	db, err := inst.Open("")
	if err != nil {
		return "", err
	}
	defer db.Close()
	for _, q := range []string{
		"CREATE USER IF NOT EXISTS '" + monitorUser + "'@'127.0.0.1'",
		"GRANT PROCESS ON *.* TO '" + monitorUser + "'@'127.0.0.1'",
		"GRANT SELECT ON performance_schema.* TO '" + monitorUser + "'@'127.0.0.1'",
	} {
		if _, err := db.ExecContext(ctx, q); err != nil {
			return "", fmt.Errorf("creating the monitor account: %w", err)
		}
	}
	dsn := inst.DSN("")
	if extra {
		dsn = inst.ExtraDSN("")
	}
	return strings.Replace(dsn, "root@", monitorUser+"@", 1), nil
}
