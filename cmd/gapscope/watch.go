package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/pprof"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/store"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/spf13/cobra"
	"golang.org/x/term"
)

func init() { register(newWatchCmd) }

type watchFlags struct {
	dsn, defaultsFile, iface  string
	ports                     []uint
	duration, poll, maxWait   time.Duration
	minPoll                   time.Duration
	events, storePath, format string
	keepLiterals, noCapture   bool
	enableConsumers, noLive   bool
	plans                     bool
	plansThreshold            time.Duration
	ringMB                    int
	sample                    uint16
	cpuBudget                 float64
	cpuProfile                string
	top                       int
}

func newWatchCmd() *cobra.Command {
	var f watchFlags
	cmd := &cobra.Command{
		Use:   "watch --dsn DSN",
		Short: "Live: capture the wire, poll performance_schema, split each statement's time",
		Long: `watch captures the server's traffic (AF_PACKET, needs root or CAP_NET_RAW),
reads performance_schema's statement history on its own schedule, joins the
two per statement and splits each statement's client-seen time into
  request   the request's own transfer
  queue     waiting before the server started it (thread pool, scheduler)
  exec      the server working
  stall     the server unable to send because the client's window was closed
  delivery  response bytes already sent, still on their way
The five parts sum exactly to the client's time. On exit (Ctrl-C or
--duration) it prints the profile with the parts and the findings.

Without capture rights, with TLS, or with performance_schema off, it
degrades to what it can measure and says so in the notes.`,
		Example: `  gapscope watch --dsn 'monitor:secret@tcp(127.0.0.1:3306)/' --duration 60s
  gapscope watch --dsn 'root@tcp(db1:3306)/' --iface eth0 --events stmts.jsonl --store watch.db
  MYSQL_PWD=secret gapscope watch --dsn 'monitor@tcp(127.0.0.1:3306)/' --enable-consumers`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runWatch(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to watch: user[:pass]@tcp(host:port)/ (password also from MYSQL_PWD)")
	fl.StringVar(&f.defaultsFile, "defaults-file", "", "read [client] user/password/host/port from this my.cnf")
	fl.StringVar(&f.iface, "iface", "", "capture interface (default: the one that reaches the server)")
	fl.UintSliceVar(&f.ports, "port", nil, "server port on the wire (repeatable; default: the DSN's port)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	fl.DurationVar(&f.poll, "poll", time.Second, "longest performance_schema poll interval (it halves, down to --min-poll, while the history ring fills faster than it is read)")
	fl.DurationVar(&f.minPoll, "min-poll", 250*time.Millisecond, "shortest poll interval while the ring fills (each poll scans the ring on the server: faster costs its throughput; a --cpu-budget duty cycle polls every 100ms while it follows and not while paused)")
	fl.DurationVar(&f.maxWait, "max-wait", 5*time.Second, "how long a statement waits for its other half before it is reported unjoined")
	fl.StringVar(&f.events, "events", "", "write one JSON statement event per line to this file")
	fl.StringVar(&f.storePath, "store", "", "record statements and findings in this SQLite file")
	fl.StringVar(&f.format, "format", "text", "final report: text or json")
	fl.BoolVar(&f.keepLiterals, "keep-literals", false, "keep SQL literals (default: redacted)")
	fl.BoolVar(&f.noCapture, "no-capture", false, "do not capture: server-side times only")
	fl.BoolVar(&f.enableConsumers, "enable-consumers", false, "turn on the performance_schema consumers watch needs for this run and, while it follows only some connections, turn the others' statement history off (threads.HISTORY: their digests and summaries still count); all restored on exit")
	fl.BoolVar(&f.noLive, "no-live", false, "no live view, only the final report")
	fl.BoolVar(&f.plans, "plans", false, "catch the live plan of statements slower than --plans-threshold and report PLAN_FLIP")
	fl.DurationVar(&f.plansThreshold, "plans-threshold", time.Second, "with --plans: a statement running this long is slow")
	fl.IntVar(&f.ringMB, "ring-mb", 32, "kernel capture ring in MiB (raise it if the final report shows kernel drops)")
	fl.Float64Var(&f.cpuBudget, "cpu-budget", 100*watch.DefaultCPUBudget, "keep watch's own CPU under this percentage of the host's CPUs: on a server too busy for that it follows 1 in 2, 4, 8... connections (by client port, always at least one busy connection) and, when even one is too many, that one 1 s in every 2, 4... 16 s, and says so; 0: follow every connection whatever it costs")
	fl.Uint16Var(&f.sample, "sample", 1, "follow a fixed 1 in N connections (chosen by a hash of the client port) instead of letting --cpu-budget choose; 1: all, as the budget allows")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of gapscope itself to this file (to measure its cost)")
	fl.IntVar(&f.top, "top", 20, "digests in the final text report (0: all)")
	return cmd
}

func (f *watchFlags) options() (watch.Options, error) {
	if f.dsn == "" && f.defaultsFile == "" {
		return watch.Options{}, usagef("--dsn or --defaults-file is required")
	}
	if f.format != "text" && f.format != "json" {
		return watch.Options{}, usagef("--format must be text or json, not %q", f.format)
	}
	if f.sample == 0 {
		return watch.Options{}, usagef("--sample must be 1 (every connection) or more")
	}
	if f.cpuBudget < 0 || f.cpuBudget > 100 {
		return watch.Options{}, usagef("--cpu-budget is a percentage of the host's CPUs, between 0 (no bound) and 100, not %g", f.cpuBudget)
	}
	if f.ringMB < 2 || f.ringMB > 4096 {
		return watch.Options{}, usagef("--ring-mb must be between 2 and 4096, not %d", f.ringMB)
	}
	if f.duration < 0 || f.poll <= 0 || f.minPoll <= 0 || f.maxWait <= 0 {
		return watch.Options{}, usagef("--duration, --poll, --min-poll and --max-wait must be positive")
	}
	o := watch.Options{DSN: f.dsn, DefaultsFile: f.defaultsFile, Iface: f.iface, Duration: f.duration,
		PollInterval: f.poll, MinPollInterval: f.minPoll, MaxWait: f.maxWait, KeepLiterals: f.keepLiterals, NoCapture: f.noCapture,
		EnableConsumers: f.enableConsumers, Plans: f.plans, PlansThreshold: f.plansThreshold, RingMB: f.ringMB,
		Sample: f.sample, CPUBudget: f.cpuBudget / 100}
	for _, p := range f.ports {
		if p == 0 || p > 65535 {
			return o, usagef("--port %d is not a TCP port", p)
		}
		o.Ports = append(o.Ports, uint16(p))
	}
	return o, nil
}

func runWatch(ctx context.Context, out, errOut io.Writer, f watchFlags) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := startCPUProfile(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	outs, err := openWatchOutputs(ctx, f)
	if err != nil {
		return err
	}
	opts.OnStatement = outs.add
	if !f.noLive && isTerminal(out) && f.format == "text" {
		opts.Live = out
	} else {
		fmt.Fprintf(errOut, "watching %s ... (Ctrl-C to stop)\n", collect.RedactDSN(f.dsn))
	}
	if os.Getenv("GOMAXPROCS") == "" && opts.Sample <= 1 { // the user's setting wins
		runtime.GOMAXPROCS(watch.BudgetProcs(opts.CPUBudget, runtime.NumCPU()))
	}
	res, err := watch.Run(ctx, opts)
	if cerr := outs.close(res); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return writeWatchResult(out, res, f)
}

func writeWatchResult(out io.Writer, res *watch.Result, f watchFlags) error {
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	if err := report.WriteProfileText(out, res.Profile, f.top); err != nil {
		return err
	}
	writeGroupSummary(out, res.Groups)
	fmt.Fprintf(out, "\njoined %d of %d wire statements; server rows %d (unmatched %d); clock error ±%dµs\n",
		res.Join.Joined, res.Join.Wire, res.Join.Server, res.Join.UnmatchedServer, res.Clock.ErrorUS)
	writeOwnCost(out, res.Own)
	return report.WriteFindingsText(out, res.Findings)
}

// writeOwnCost says what watch cost the host: its CPU over the run.
func writeOwnCost(out io.Writer, o watch.OwnCost) {
	fmt.Fprintf(out, "watch itself: %.1f s CPU, %.2f%% of %d CPUs", o.CPUSeconds, 100*o.Share, o.CPUs)
	if o.Budget > 0 {
		fmt.Fprintf(out, " (budget %g%%", 100*o.Budget)
		if n := len(o.Steps); n > 0 {
			fmt.Fprintf(out, "; following 1 in %d connections at the end", o.Steps[n-1].Sample)
			if o.AppConns > 0 {
				fmt.Fprintf(out, ": %d of %d", o.FollowedConns, o.AppConns)
			}
			if c := o.Steps[n-1].Cycle; c > 1 {
				fmt.Fprintf(out, ", 1 s in every %d s", c)
			}
		}
		fmt.Fprint(out, ")")
	}
	fmt.Fprint(out, "\n\n")
}

func writeGroupSummary(out io.Writer, groups []watch.GroupSummary) {
	if len(groups) == 0 {
		return
	}
	fmt.Fprintf(out, "\nthread-pool groups:\n  %-6s %-11s %-14s %-14s\n", "group", "statements", "queue total", "max queue")
	for _, g := range groups {
		fmt.Fprintf(out, "  %-6d %-11d %-14s %-14s\n", g.Group, g.Statements, time.Duration(g.QueueUS)*time.Microsecond, time.Duration(g.MaxQueueUS)*time.Microsecond)
	}
}

func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	return ok && term.IsTerminal(int(f.Fd()))
}

// watchOutputs are the optional event file and store.
type watchOutputs struct {
	events *eventsFile
	st     *store.Store
	writer *store.Writer
	run    int64
	err    error
}

func openWatchOutputs(ctx context.Context, f watchFlags) (*watchOutputs, error) {
	ev, err := openEvents(f.events)
	if err != nil {
		return nil, err
	}
	o := &watchOutputs{events: ev}
	if f.storePath != "" {
		st, err := store.Open(ctx, f.storePath)
		if err != nil {
			o.close(nil)
			return nil, err
		}
		o.st = st
		if o.run, err = st.StartRun(ctx, "watch", f.dsn, time.Now().UnixMicro()); err != nil {
			o.close(nil)
			return nil, err
		}
		o.writer = st.NewWriter(o.run, store.WriterOptions{})
	}
	return o, nil
}

// add runs on the joiner's goroutine (serialised by the engine).
func (o *watchOutputs) add(s *event.Statement) {
	o.events.write(s)
	if o.writer != nil && o.err == nil {
		o.err = o.writer.Add(s)
	}
}

func (o *watchOutputs) close(res *watch.Result) error {
	if err := o.events.close(); o.err == nil {
		o.err = err
	}
	if o.writer != nil {
		if res != nil {
			for i := range res.Findings {
				_ = o.writer.AddFinding(time.Now().UnixMicro(), &res.Findings[i])
			}
		}
		if err := o.writer.Close(); o.err == nil && err != nil {
			o.err = err
		}
		_ = o.st.EndRun(context.Background(), o.run, time.Now().UnixMicro(), "")
		o.st.Close()
	}
	return o.err
}

// startCPUProfile profiles gapscope until the returned function runs.
func startCPUProfile(path string) (func(), error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}
