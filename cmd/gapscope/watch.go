package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/capture"
	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/eventlog"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/selfprof"
	"github.com/gapscope/gapscope/internal/store"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/gapscope/gapscope/internal/watchtext"
	"github.com/spf13/cobra"
)

func init() { registerConnecting(newWatchCmd) }

type watchFlags struct {
	secrets                   *collect.Secrets // learns the passwords of the target and masks with them
	dsn, defaultsFile, iface  string
	ports                     []uint
	duration, poll, maxWait   time.Duration
	minPoll                   time.Duration
	events, storePath, format string
	txns                      string
	keepLiterals, noCapture   bool
	noDefaults                bool
	enableConsumers, noLive   bool
	plans                     bool
	plansThreshold            time.Duration
	ringMB, ringMaxMB         int
	sample                    uint16
	cpuBudget                 float64
	cpuProfile, memProfile    string
	top                       int
	exp                       exportFlags
	capturePoint, source      string
	storeMax, eventsMax       byteSize
	storeRetain               retention
	storeSample, eventsKeep   int
}

func newWatchCmd(secrets *collect.Secrets) *cobra.Command {
	f := watchFlags{secrets: secrets}
	cmd := &cobra.Command{
		Use:   "watch --dsn DSN",
		Short: "Live: capture the wire, poll performance_schema, split each statement's time",
		Long: `watch captures the server's traffic (AF_PACKET, needs root or CAP_NET_RAW;
on loopback a header-only eBPF capture where CAP_BPF and CAP_NET_ADMIN allow, --capture),
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
degrades to what it can measure and says so in the notes. Without the
wire the profile is the server's time and what the wire would add is
shown as unknown. A failed --events or --store write is reported when it
happens; watch goes on, prints its result and exits 1.

Memory is bounded whatever the SQL: the profile keeps its own row for the
10,000 digests with the most client time (exact totals, mergeable
sketches); the rest are counted together as "(other)", and a digest whose
time there outgrows the smallest row takes that row's place. What the
server sends is bounded the same way: 100,000 connections tracked on the
wire, 65,536 statements queued for the join and 100,000 statements and
rows waiting for each other (at most --max-wait), 16,384 rows of ended
threads, 20,000 digests' outlier sketches, 20,000 connections' tallies,
the last 50,000 statements for the diagnosis; past a bound watch gives
up the oldest or turns the newest away, and counts what it dropped where
a result depends on it. The capture ring is --ring-mb, grown up to
--ring-max-mb on drops (a header-only eBPF ring is a power of two: 32 MiB
for 24); the Go heap's soft limit is 120 MiB less the ring watch opened,
96 MiB with the default AF_PACKET ring (GOMEMLIMIT overrides it).`,
		Example: `  gapscope watch --dsn 'monitor:secret@tcp(127.0.0.1:3306)/' --duration 60s
  gapscope watch --dsn 'root@tcp(db1:3306)/' --iface eth0 --events stmts.jsonl --store watch.db
  MYSQL_PWD=secret gapscope watch --dsn 'monitor@tcp(127.0.0.1:3306)/' --enable-consumers`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runWatch(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	d := watch.DefaultOptions()
	fl.StringVar(&f.dsn, "dsn", "", "server to watch: user[:pass]@tcp(host:port)/ (password also from MYSQL_PWD)")
	fl.StringVar(&f.defaultsFile, "defaults-file", "", "my.cnf whose [client], [mysql] or [gapscope] group names the server (default ~/.my.cnf)")
	addNoDefaultsFlag(fl, &f.noDefaults)
	fl.StringVar(&f.iface, "iface", "", "capture interface (default: the one that reaches the server)")
	fl.UintSliceVar(&f.ports, "port", nil, "server port on the wire (repeatable; default: the DSN's port)")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	fl.DurationVar(&f.poll, "poll", d.PollInterval, "longest performance_schema poll interval while the server is in use (it halves, down to --min-poll, while the history ring fills faster than it is read; an idle server is read once a second for its status only, its history every 30 s, until the first statement)")
	fl.DurationVar(&f.minPoll, "min-poll", d.MinPollInterval, "shortest poll interval while the ring fills (each poll scans the ring on the server: faster costs its throughput); a ring of under 5,000 rows is read sooner, once half of it filled, when reads that often keep it from turning over (the default 1,000 rows: every 50 ms at most)")
	fl.DurationVar(&f.maxWait, "max-wait", d.MaxWait, "how long a statement waits for its other half before it is reported unjoined")
	fl.StringVar(&f.events, "events", "", "write one JSON statement event per line to this file (written through every second, so a killed watch leaves all but its last second)")
	fl.StringVar(&f.txns, "txns", "", "write one JSON transaction per line to this file: its statements, how long it was open, how long its application held it idle, the lock waits of its statements (docs/events.md)")
	fl.StringVar(&f.storePath, "store", "", "record statements and findings in this SQLite file")
	f.storeMax, f.storeRetain = 1<<30, retention(7*24*time.Hour)
	fl.Var(&f.storeMax, "store-max-size", "bound the --store file (with its write-ahead log): past it the oldest statement rows go first, down to 90% (0: no bound)")
	fl.Var(&f.storeRetain, "store-retain", "remove --store rows older than this (7d, 36h; 0: keep all)")
	fl.IntVar(&f.storeSample, "store-sample", 10, "store the row of 1 in N ordinary statements; slow (100 ms+), failed, outlier and unjoined ones always, and every statement in its digest's per-minute totals (1: every row)")
	fl.Var(&f.eventsMax, "events-max-size", "rotate the --events file at this size: F.jsonl becomes F.1.jsonl, ... (0: no rotation); SIGHUP reopens it for outside rotators")
	fl.IntVar(&f.eventsKeep, "events-keep", eventlog.DefaultKeep, "rotated --events files kept beside the current one")
	fl.StringVar(&f.format, "format", "text", "final report: text or json")
	fl.BoolVar(&f.keepLiterals, "keep-literals", false, "keep SQL literals and the values server error messages quote (default: redacted)")
	fl.BoolVar(&f.noCapture, "no-capture", false, "do not capture: the profile ranks by the server's time (performance_schema); queue, delivery and client time are unknown")
	fl.BoolVar(&f.enableConsumers, "enable-consumers", false, "turn on the performance_schema consumers watch needs for this run (events_statements_current, _history_long, and _history, where slow statements are read); restored on exit")
	fl.BoolVar(&f.noLive, "no-live", false, "no live view, only the final report")
	fl.BoolVar(&f.plans, "plans", false, "catch the live plan of statements slower than --plans-threshold and report PLAN_FLIP")
	fl.DurationVar(&f.plansThreshold, "plans-threshold", d.PlansThreshold, "with --plans: a statement running this long is slow")
	fl.IntVar(&f.ringMB, "ring-mb", d.RingMB, "kernel capture ring in MiB at the start (resident all the time; the default holds a 20 MB request whole)")
	fl.IntVar(&f.ringMaxMB, "ring-max-mb", d.MaxRingMB, "when the kernel drops packets, re-open the capture ring at twice its size, up to this many MiB (--ring-mb or less: a ring of fixed size)")
	fl.Float64Var(&f.cpuBudget, "cpu-budget", 100*d.CPUBudget, "keep watch's own CPU under this percentage of the host's CPUs on average: every statement is always captured and counted, and every slow one joined; on a server too busy for the budget, the fast statements of only 1 in 2, 4, 8... connections (by client port, always at least one busy connection) are joined and decomposed, and the report says so; 0: join every connection whatever it costs")
	fl.Uint16Var(&f.sample, "sample", d.Sample, "join the fast statements of a fixed 1 in N connections (chosen by a hash of the client port) instead of letting --cpu-budget choose; every connection is still captured; 1: all, as the budget allows")
	fl.StringVar(&f.cpuProfile, "cpuprofile", "", "write a Go CPU profile of gapscope itself to this file (to measure its cost)")
	fl.StringVar(&f.memProfile, "memprofile", "", "write a Go heap profile of gapscope itself to this file on exit, and to FILE.1, FILE.2... on each SIGUSR1 (diff two with go tool pprof -base)")
	fl.IntVar(&f.top, "top", 20, "digests in the final text report (0: all)")
	f.exp.register(fl)
	fl.StringVar(&f.source, "capture", "", "live capture: packet (the AF_PACKET ring, every byte), ebpf (a header-only eBPF program: cheaper; a long answer's rows unknown unless joined) or auto (ebpf on loopback when performance_schema's statement rows are read and the kernel and capabilities allow, else packet: elsewhere eBPF stamps leaving packets before the interface's queue, and without the server's rows a long answer's rows would stay unknown; the report says which ran); default: $"+capture.SourceEnv+", else "+capture.DefaultSource)
	fl.StringVar(&f.capturePoint, "capture-point", capture.PointAuto, "where the capture runs: server (the server's host), client (the application's host), between (a tap), or auto (from this host's addresses); off the server's host the network transit measured from TCP goes to request and delivery, never to queue")
	return cmd
}

// checkIface refuses an --iface this host does not have: a typo would
// otherwise fail only once capturing starts, and watch would fall back to
// the server's side alone with a note about capture rights.
func checkIface(iface string, noCapture bool) error {
	if iface == "" || noCapture {
		return nil
	}
	if _, err := net.InterfaceByName(iface); err == nil {
		return nil
	}
	var names []string
	if all, err := net.Interfaces(); err == nil {
		for _, i := range all {
			names = append(names, i.Name)
		}
	}
	return usagef("--iface %q: no such interface on this host (a live capture takes one of: %s)", iface, strings.Join(names, ", "))
}

func (f *watchFlags) options() (watch.Options, error) {
	defaultsFile, err := resolveTarget(f.secrets, "watch", f.dsn, f.defaultsFile, f.noDefaults)
	if err != nil {
		return watch.Options{}, err
	}
	if f.format != "text" && f.format != "json" {
		return watch.Options{}, usagef("--format must be text or json, not %q", f.format)
	}
	if f.capturePoint == capture.PointUnknown || !capture.ValidCapturePoint(f.capturePoint) {
		return watch.Options{}, usagef("--capture-point must be server, client, between or auto, not %q", f.capturePoint)
	}
	if src := capture.SourceOf(f.source); src != capture.SourcePacket && src != capture.SourceEBPF && src != capture.SourceAuto {
		return watch.Options{}, usagef("--capture (or $%s) must be packet, ebpf or auto, not %q", capture.SourceEnv, src)
	}
	if f.sample == 0 {
		return watch.Options{}, usagef("--sample must be 1 (every connection) or more")
	}
	if f.cpuBudget < 0 || f.cpuBudget > 100 {
		return watch.Options{}, usagef("--cpu-budget is a percentage of the host's CPUs, between 0 (no bound) and 100, not %g", f.cpuBudget)
	}
	if f.ringMB < 2 || f.ringMB > 4096 || f.ringMaxMB > 4096 {
		return watch.Options{}, usagef("--ring-mb must be between 2 and 4096, not %d, and --ring-max-mb at most 4096", f.ringMB)
	}
	if f.duration < 0 || f.poll <= 0 || f.minPoll <= 0 || f.maxWait <= 0 {
		return watch.Options{}, usagef("--duration, --poll, --min-poll and --max-wait must be positive")
	}
	if err := checkIface(f.iface, f.noCapture); err != nil {
		return watch.Options{}, err
	}
	if err := f.exp.check(); err != nil {
		return watch.Options{}, err
	}
	if f.storeSample < 1 || f.eventsKeep < 1 {
		return watch.Options{}, usagef("--store-sample and --events-keep must be 1 or more")
	}
	o := watch.Options{DSN: f.dsn, DefaultsFile: defaultsFile, Secrets: f.secrets, Iface: f.iface, Duration: f.duration,
		PollInterval: f.poll, MinPollInterval: f.minPoll, MaxWait: f.maxWait, KeepLiterals: f.keepLiterals, NoCapture: f.noCapture,
		EnableConsumers: f.enableConsumers, Plans: f.plans, PlansThreshold: f.plansThreshold, RingMB: f.ringMB, MaxRingMB: f.ringMaxMB,
		Sample: f.sample, CPUBudget: f.cpuBudget / 100, CapturePoint: f.capturePoint, Capture: f.source}
	o.Ports, err = tcpPorts(f.ports)
	return o, err
}

func runWatch(ctx context.Context, out, errOut io.Writer, f watchFlags) error {
	opts, err := f.options()
	if err != nil {
		return err
	}
	if f.cpuProfile != "" {
		stop, err := selfprof.CPU(f.cpuProfile)
		if err != nil {
			return err
		}
		defer stop()
	}
	if f.memProfile != "" {
		defer selfprof.Heap(f.memProfile, errOut)()
	}
	// The banner names the server the driver will reach (the defaults
	// file's socket, say), and a DSN gapscope cannot use is refused before
	// any output is opened.
	cfg, err := f.secrets.Config(opts.DSN, opts.DefaultsFile)
	if err != nil {
		return err
	}
	outs, err := report.OpenRunOutputs(ctx, errOut, report.RunOutputOptions{Command: "watch", Target: f.secrets.Target(cfg),
		Events: f.events, EventsLog: eventlog.Options{MaxSize: int64(f.eventsMax), Keep: f.eventsKeep},
		Store: f.storePath, StoreWriter: store.WriterOptions{SampleEvery: f.storeSample,
			Limits: store.Limits{MaxBytes: int64(f.storeMax), Retain: time.Duration(f.storeRetain)}}})
	if err != nil {
		return err
	}
	outputs := &outputsSink{RunOutputs: outs}
	opts.Sinks = append(opts.Sinks, outputs)
	txns, err := openTxnFile(f.txns)
	if err != nil {
		_ = watch.AbandonSinks(opts.Sinks)
		return err
	}
	opts.Sinks = append(opts.Sinks, txnsSink{txns})
	exp, err := startExporters(ctx, errOut, f.exp, cfg)
	if err != nil {
		_ = watch.AbandonSinks(opts.Sinks)
		return err
	}
	opts.Sinks = append(opts.Sinks, exp.sinks...)
	opts.Ready = func(s watch.Started) { processReady(s, errOut) }
	if !f.noLive && report.IsTerminal(out) && f.format == "text" {
		opts.Sinks = append(opts.Sinks, watch.NewTerminalView(out))
	} else {
		fmt.Fprintf(errOut, "watching %s ... (Ctrl-C to stop)\n", f.secrets.Target(cfg))
	}
	if os.Getenv("GOMAXPROCS") == "" && opts.Sample <= 1 { // the user's setting wins
		runtime.GOMAXPROCS(watch.BudgetProcs(opts.CPUBudget, runtime.NumCPU()))
	}
	if os.Getenv("GOGC") == "" { // the user's setting wins
		debug.SetGCPercent(watch.GCPercent)
	}
	res, err := watch.Run(ctx, opts) // it closes the sinks, whatever happens
	err = reportWatch(out, res, err, outputs, f)
	// A sink that could not finish (the --txns file, an exporter) does not
	// undo what watch measured: a warning, not a failure.
	if res != nil {
		for _, cerr := range res.CloseErrors {
			fmt.Fprintf(errOut, "warning: %v\n", cerr)
		}
	}
	// After the report: --http-linger keeps serving the final snapshot.
	if xerr := exp.stop(); xerr != nil {
		fmt.Fprintf(errOut, "warning: exporters: %v\n", xerr)
	}
	return err
}

// processReady fits the process to the run that started: the Go
// runtime's memory limit leaves room for the capture's ring (unless the
// user set GOMEMLIMIT), and the memory the start used goes back to the
// system at once (it read the server's whole history ring to prime the
// cursor and calibrated the clock: left to the scavenger, an idle watch
// started beside a busy server's full ring stays tens of MB larger).
// These are process-wide settings, the command's to make: labs run watch
// in-process.
func processReady(s watch.Started, errOut io.Writer) {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(watch.MemoryLimitFor(s))
	}
	debug.FreeOSMemory()
	fmt.Fprintln(errOut, watch.ReadyLine)
}

// reportWatch prints the run's result; the outputs were closed by watch.
func reportWatch(out io.Writer, res *watch.Result, err error, outs *outputsSink, f watchFlags) error {
	cerr := outs.closeErr
	if err != nil {
		return errors.Join(err, cerr)
	}
	// A failed output was reported when it failed; the run's result is
	// whole all the same, so it is printed before the failure's exit code.
	if err := writeWatchResult(out, res, f); err != nil {
		return err
	}
	if cerr != nil && len(outs.Failed()) == 0 { // failed on close, not reported yet
		return fmt.Errorf("the result above is complete, but: %w", cerr)
	}
	if cerr != nil {
		// The failure and its path were reported when they happened.
		return fmt.Errorf("the result above is complete, but the %s stopped recording during the run (reported above)",
			strings.Join(outs.Failed(), " and "))
	}
	return nil
}

func writeWatchResult(out io.Writer, res *watch.Result, f watchFlags) error {
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	return watchtext.Write(out, res, f.top, report.TextWidth(0, out))
}
