package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/gapscope/gapscope/internal/capture"
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

Capture with:  tcpdump -U -i any -s 0 -w mysql.pcap port 3306`,
		Example: `  gapscope analyze mysql.pcap
  gapscope analyze --port 3307 --top 10 a.pcapng b.pcapng.gz
  gapscope analyze --format json --events statements.jsonl mysql.pcap`,
		Args: cobra.MinimumNArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts, err := f.captureOptions()
			if err != nil {
				return err
			}
			return runAnalyze(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), args, opts, f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.format, "format", "text", "output: text or json")
	fl.StringVar(&f.events, "events", "", "also write one JSON statement event per line to this file")
	fl.UintSliceVar(&f.ports, "port", []uint{3306}, "server port (repeatable)")
	fl.BoolVar(&f.keepLiterals, "keep-literals", false, "keep SQL literals in events (default: redacted)")
	fl.IntVar(&f.top, "top", 20, "digests to show in text output (0: all)")
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

func runAnalyze(ctx context.Context, out, errOut io.Writer, files []string, opts capture.Options, f analyzeFlags) error {
	sink, err := newStatementSink(f.events, report.ClientLatency)
	if err != nil {
		return err
	}
	prog := report.NewProgress(errOut, totalSize(files), "reading")
	opts.Progress = func(done, _ int64) { prog.Set(done) }
	stats, err := capture.ReadFiles(ctx, files, opts, sink.add)
	prog.Done()
	interrupted := errors.Is(err, context.Canceled)
	if err != nil && !interrupted {
		sink.close()
		return err
	}
	if err := sink.close(); err != nil {
		return err
	}
	for _, n := range analyzeNotes(stats, opts, interrupted) {
		sink.profile.AddNote(n)
	}
	res := sink.profile.Result()
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	return report.WriteProfileText(out, res, f.top)
}

// analyzeNotes adds what the reader noticed and what the user should know.
func analyzeNotes(st capture.Stats, opts capture.Options, interrupted bool) []string {
	notes := st.Notes
	if interrupted {
		notes = append(notes, "interrupted: results cover the packets read so far")
	}
	if st.Flows == 0 && st.Packets > 0 {
		ports := make([]string, len(opts.Ports))
		for i, p := range opts.Ports {
			ports[i] = fmt.Sprint(p)
		}
		notes = append(notes, fmt.Sprintf("no MySQL connection found in %d packets (ports %s): is the server on another --port?",
			st.Packets, strings.Join(ports, ",")))
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
