package main

import (
	"context"
	"io"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/offline"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() { register(newAnalyzeCmd) }

type analyzeFlags struct {
	format       string
	events       string
	ports        []uint
	keepLiterals bool
	txns         string
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
	fl.StringVar(&f.txns, "txns", "", "also write one JSON transaction per line to this file: its statements, how long it was open and how long its application held it idle (docs/events.md)")
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
	ports, err := tcpPorts(f.ports)
	if err != nil {
		return capture.Options{}, err
	}
	return capture.Options{KeepLiterals: f.keepLiterals, Ports: ports}, nil
}

// tcpPorts checks the --port values (analyze's and watch's).
func tcpPorts(flag []uint) ([]uint16, error) {
	var ports []uint16
	for _, p := range flag {
		if p == 0 || p > 65535 {
			return nil, usagef("--port %d is not a TCP port", p)
		}
		ports = append(ports, uint16(p))
	}
	return ports, nil
}

func runAnalyze(ctx context.Context, out, errOut io.Writer, files []string, opts capture.Options, f analyzeFlags, co report.ClassOptions) error {
	res, eventsErr, err := offline.Analyze(ctx, errOut, files, offline.AnalyzeOptions{Capture: opts, Events: f.events, Txns: f.txns, PortsGiven: f.portsGiven, Class: co})
	if err != nil {
		return err
	}
	// A failed events file does not cost the result: it is printed, and
	// the run still fails at the end.
	if err := res.Write(out, co, f.format == "json", f.top); err != nil {
		return err
	}
	return resultCompleteBut(eventsErr)
}
