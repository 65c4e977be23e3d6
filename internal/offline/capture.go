package offline

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/txn"
)

// AnalyzeOptions say what Analyze reads and how it selects.
type AnalyzeOptions struct {
	Capture    capture.Options
	Events     string // also write every selected statement to this events file ("": none)
	Txns       string // write every transaction to this file, one JSON line each ("": none)
	PortsGiven bool   // the ports were given by the user: one that saw no connection is noted
	Class      report.ClassOptions
}

// Analyze reads the capture files in order as one capture into a profile
// of the statements Class selects, and the findings of the rules that need
// only the wire, from every statement. Progress and notes go to errOut. A
// Ctrl-C ends reading without an error: the result covers what was read.
// A failed events file does not cost the result: its error is eventsErr.
func Analyze(ctx context.Context, errOut io.Writer, files []string, o AnalyzeOptions) (res *AnalyzeResult, eventsErr, err error) {
	if err := CheckCaptureFiles(files); err != nil {
		return nil, nil, err
	}
	sink, err := report.NewStatementSink(o.Events, report.ClientLatency)
	if err != nil {
		return nil, nil, err
	}
	txns, err := report.OpenEvents(o.Txns)
	if err != nil {
		sink.Close()
		return nil, nil, err
	}
	opts := o.Capture
	prog := report.NewProgress(errOut, totalSize(files), "reading")
	opts.Progress = func(done, _ int64) { prog.Set(done) }
	var wire diagnose.WireWindow
	sel := o.Class.Selector(0)
	var x report.Extra
	kept := newTxnKeep(txns, &wire)
	locks := newLockPass(kept.add, func(s *event.Statement) {
		wire.Add(s) // the wire's findings see every statement, whatever the report shows
		x = report.Extra{Host: clientHost(s.Conn)}
		if sel.Keep(s, &x) {
			sink.Profile.AddExtra(s, &x)
			sink.Events.Write(s)
		}
	})
	stats, err := capture.ReadFiles(ctx, files, opts, locks.add)
	locks.flush()
	prog.Done()
	interrupted := errors.Is(err, context.Canceled)
	if err != nil && !interrupted {
		sink.Close()
		txns.Close()
		return nil, nil, err
	}
	eventsErr = errors.Join(sink.Close(), txns.Close())
	if err := noMySQLInCapture(stats, opts, interrupted); err != nil {
		return nil, eventsErr, err
	}
	for _, n := range inputNotes(errOut, stats, o.PortsGiven, opts) {
		sink.Profile.AddNote(n)
	}
	for _, n := range append(analyzeNotes(stats, interrupted), sel.Notes()...) {
		sink.Profile.AddNote(n)
	}
	if stats.Statements > 0 {
		sink.Profile.AddNote(diagnose.WireOnlyNote())
	}
	res = &AnalyzeResult{ProfileResult: sink.Profile.Result(), Findings: wire.Findings(), NotJudged: diagnose.NotJudgedOnWire(),
		Transactions: txn.Summarize(kept.txns, kept.count)}
	if res.Findings == nil {
		res.Findings = []event.Finding{}
	}
	return res, eventsErr, nil
}

// AnalyzeResult is analyze's JSON: the profile, and the findings of the
// rules that need only the wire (as in watch's result), with the codes of
// those that could not be judged without the server's side.
type AnalyzeResult struct {
	*report.ProfileResult
	Findings  []event.Finding `json:"findings"`
	NotJudged []string        `json:"not_judged"`
	// Transactions sums the transactions the wire shows.
	Transactions txn.Summary `json:"transactions"`
}

// Write ranks the result as co says and prints it: JSON, or the class
// report (the top classes) and the wire findings.
func (r *AnalyzeResult) Write(out io.Writer, co report.ClassOptions, json bool, top int) error {
	co.Rank(r.ProfileResult, !json, top)
	if json {
		return report.WriteJSON(out, r)
	}
	if err := co.WriteClassText(out, r.ProfileResult); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nfindings from the wire alone:\n\n")
	return report.WriteFindingsBrief(out, r.Findings)
}

// clientHost is the client's address without its port, from a captured
// connection's "client:port>server:port" ("[v6]:port" for IPv6).
func clientHost(conn string) string {
	cli, _, _ := strings.Cut(conn, ">")
	if i := strings.LastIndexByte(cli, ':'); i > 0 {
		cli = cli[:i]
	}
	return strings.TrimSuffix(strings.TrimPrefix(cli, "["), "]")
}

// analyzeNotes adds what the reader noticed and what the user should know.
func analyzeNotes(st capture.Stats, interrupted bool) []string {
	notes := st.Notes
	if interrupted {
		notes = append(notes, "interrupted: results cover the packets read so far")
	}
	return notes
}

// totalSize is the bytes to read, for the progress bar (0 when unknown).
func totalSize(files []string) int64 {
	var n int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			n += st.Size()
		}
	}
	return n
}

// CheckCaptureFiles refuses, before reading anything, a file analyze cannot
// read, saying what it is instead: a directory, an empty file, a slow log,
// text. Standard input ("-") is read as it comes.
func CheckCaptureFiles(files []string) error {
	for _, path := range files {
		if path == "-" {
			continue
		}
		k, err := SniffInput(path)
		if err != nil {
			return fmt.Errorf("opening capture: %w", err)
		}
		if k.Format != "capture" {
			return fmt.Errorf("%s is %s, not a pcap or pcapng capture (optionally gzip-compressed)%s", path, k.What, k.Advice())
		}
	}
	return nil
}

// noMySQLInCapture is the error of a capture in which no MySQL connection
// was found: an empty table would look like an idle server.
func noMySQLInCapture(st capture.Stats, opts capture.Options, interrupted bool) error {
	if st.Flows > 0 || st.Packets == 0 || interrupted {
		return nil
	}
	return fmt.Errorf("no MySQL connection in %d packets on port %s; %s: is the server on another --port?",
		st.Packets, portList(opts.Ports), describePorts(st.PortsSeen))
}

// inputNotes says, on stderr and in the report, what a capture without
// statements held, and which --port given saw no connection at all.
func inputNotes(errOut io.Writer, st capture.Stats, portsGiven bool, opts capture.Options) []string {
	var notes []string
	if st.Packets == 0 {
		notes = append(notes, "the capture holds no packet (a header only): nothing to profile")
	} else if st.Statements == 0 {
		notes = append(notes, fmt.Sprintf("%d MySQL connections but no statement in them", st.Flows))
	}
	if portsGiven && st.Packets > 0 {
		for _, p := range opts.Ports {
			if st.PortsSeen[p] == 0 {
				notes = append(notes, fmt.Sprintf("--port %d: no connection on that port in the capture; %s", p, describePorts(st.PortsSeen)))
			}
		}
	}
	for _, n := range notes {
		fmt.Fprintln(errOut, "gapscope: note:", n)
	}
	return notes
}

// describePorts lists the ports of a capture's connections, busiest first.
func describePorts(seen map[uint16]int64) string {
	if len(seen) == 0 {
		return "it holds no TCP connection"
	}
	ports := make([]uint16, 0, len(seen))
	for p := range seen {
		ports = append(ports, p)
	}
	slices.SortFunc(ports, func(a, b uint16) int {
		if c := cmp.Compare(seen[b], seen[a]); c != 0 {
			return c
		}
		return cmp.Compare(a, b)
	})
	parts := make([]string, 0, 5)
	for i, p := range ports {
		if i == 5 {
			parts = append(parts, fmt.Sprintf("%d more", len(ports)-5))
			break
		}
		parts = append(parts, fmt.Sprintf("%d (%s)", p, plural(seen[p], "connection")))
	}
	return "its TCP connections are on ports " + strings.Join(parts, ", ")
}

func portList(ports []uint16) string {
	s := make([]string, len(ports))
	for i, p := range ports {
		s[i] = fmt.Sprint(p)
	}
	return strings.Join(s, ",")
}

// plural is "1 connection", "2 connections".
func plural(n int64, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}
