package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/diagnose"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() { register(newAnalyzeCmd) }

type analyzeFlags struct {
	format       string
	events       string
	ports        []uint
	keepLiterals bool
	top          int
	portsGiven   bool // --port was on the command line
	class        classFlags
}

func newAnalyzeCmd() *cobra.Command {
	var f analyzeFlags
	cmd := &cobra.Command{
		Use:   "analyze FILE...",
		Short: "Profile MySQL/MariaDB statements in packet captures (pcap, pcapng, .gz)",
		Long: `analyze decodes MySQL/MariaDB traffic from tcpdump/tshark/Wireshark captures and
prints a profile per statement digest, ranked by total client-seen time: the
time from the request's first byte to the response's last byte, as the
capture point saw it. Text and server-side prepared statements
(COM_STMT_EXECUTE) are both decoded; literals are redacted unless
--keep-literals. Several files are read in order as one capture (rotated
tcpdump -C/-G files keep their connections).

The text report is a profile table (rank, ID, response time and share,
calls, time per call, variance-to-mean, digest text cut to the line width)
and, per digest, its attributes (time percentiles exact up to 128 calls,
rows, bytes, zero window, errors by code), databases, users, client hosts,
the query-time histogram and its slowest call; --format json holds the same
with full texts.

Capture with:  tcpdump -U -i any -s 0 -w mysql.pcap port 3306

` + report.FilterHelp,
		Example: `  gapscope analyze mysql.pcap
  gapscope analyze --port 3307 --top 10 a.pcapng b.pcapng.gz
  gapscope analyze --format json --events statements.jsonl mysql.pcap`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			f.portsGiven = c.Flags().Changed("port")
			opts, err := f.captureOptions()
			if err != nil {
				return err
			}
			co, err := f.class.options(report.ClientLatency, time.UTC)
			if err != nil {
				return err
			}
			if co.Relative() {
				return usagef("analyze takes --since/--until as absolute times (2024-05-06T07:08:09Z), not durations")
			}
			return runAnalyze(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), args, opts, f, co)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "text", "output: text or json")
	fl.StringVar(&f.events, "events", "", "also write one JSON statement event per line to this file")
	fl.UintSliceVar(&f.ports, "port", []uint{3306}, "server port (repeatable)")
	fl.BoolVar(&f.keepLiterals, "keep-literals", false, "keep SQL literals, and the values server error messages quote, in events (default: redacted)")
	fl.IntVar(&f.top, "top", 20, "digests to show in text output (0: all)")
	f.class.register(cmd, false)
	return cmd
}

// captureOptions validates the flags.
func (f *analyzeFlags) captureOptions() (capture.Options, error) {
	if f.format != "text" && f.format != "json" {
		return capture.Options{}, usagef("--format must be text or json, not %q", f.format)
	}
	if f.top < 0 {
		return capture.Options{}, usagef("--top must be 0 or more, not %d", f.top)
	}
	opts := capture.Options{KeepLiterals: f.keepLiterals}
	for _, p := range f.ports {
		if p == 0 || p > 65535 {
			return capture.Options{}, usagef("--port %d is not a TCP port", p)
		}
		opts.Ports = append(opts.Ports, uint16(p))
	}
	return opts, nil
}

func runAnalyze(ctx context.Context, out, errOut io.Writer, files []string, opts capture.Options, f analyzeFlags, co report.ClassOptions) error {
	if err := checkCaptureFiles(files); err != nil {
		return err
	}
	sink, err := report.NewStatementSink(f.events, report.ClientLatency)
	if err != nil {
		return err
	}
	prog := report.NewProgress(errOut, totalSize(files), "reading")
	opts.Progress = func(done, _ int64) { prog.Set(done) }
	var wire diagnose.WireWindow
	sel := co.Selector(0)
	var x report.Extra
	stats, err := capture.ReadFiles(ctx, files, opts, func(s *event.Statement) {
		wire.Add(s) // the wire's findings see every statement, whatever the report shows
		x = report.Extra{Host: clientHost(s.Conn)}
		if sel.Keep(s, &x) {
			sink.Profile.AddExtra(s, &x)
			sink.Events.Write(s)
		}
	})
	prog.Done()
	interrupted := errors.Is(err, context.Canceled)
	if err != nil && !interrupted {
		sink.Close()
		return err
	}
	// A failed events file does not cost the result: it is printed, and
	// the run still fails at the end.
	eventsErr := sink.Close()
	if err := noMySQLInCapture(stats, opts, interrupted); err != nil {
		return err
	}
	for _, n := range inputNotes(errOut, stats, f.portsGiven, opts) {
		sink.Profile.AddNote(n)
	}
	for _, n := range append(analyzeNotes(stats, opts, interrupted), sel.Notes()...) {
		sink.Profile.AddNote(n)
	}
	if stats.Statements > 0 {
		sink.Profile.AddNote(diagnose.WireOnlyNote())
	}
	if err := writeAnalyzeResult(out, sink.Profile.Result(), wire.Findings(), f, co); err != nil {
		return err
	}
	return resultCompleteBut(eventsErr)
}

// writeAnalyzeResult prints the profile and the wire findings.
func writeAnalyzeResult(out io.Writer, profile *report.ProfileResult, findings []event.Finding, f analyzeFlags, co report.ClassOptions) error {
	res := analyzeResult{ProfileResult: profile, Findings: findings, NotJudged: diagnose.NotJudgedOnWire()}
	if res.Findings == nil {
		res.Findings = []event.Finding{}
	}
	co.Rank(res.ProfileResult, f.format != "json", f.top)
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	if err := co.WriteClassText(out, res.ProfileResult); err != nil {
		return err
	}
	fmt.Fprintf(out, "\nfindings from the wire alone:\n\n")
	return report.WriteFindingsBrief(out, res.Findings)
}

// analyzeResult is analyze's JSON: the profile, and the findings of the
// rules that need only the wire (as in watch's result), with the codes of
// those that could not be judged without the server's side.
type analyzeResult struct {
	*report.ProfileResult
	Findings  []event.Finding `json:"findings"`
	NotJudged []string        `json:"not_judged"`
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
func analyzeNotes(st capture.Stats, opts capture.Options, interrupted bool) []string {
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
