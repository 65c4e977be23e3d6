package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/lab"
	"github.com/gapscope/gapscope/internal/overhead"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
	"github.com/spf13/cobra"
)

func init() { registerConnecting(newOverheadCmd) }

// Default configurations: a sandbox can be restarted, so performance_schema
// off is the baseline; a user's server is compared with its defaults. The
// sandbox's order restarts it twice per rotation (to ps-all's options, then
// back), not three times, and keeps ps-all-runtime beside ps-all.
const (
	defaultSandboxConfigs = "ps-off,ps-all,ps-all-runtime,ps-default,innodb-metrics-all,optimizer-trace,gapscope-watch"
	defaultServerConfigs  = "ps-default,ps-all,innodb-metrics-all,optimizer-trace,gapscope-watch"
)

type overheadFlags struct {
	secrets                                        *collect.Secrets // learns the passwords of the target and masks with them
	dsn, configs, driver, storePath, format, iface string
	sandbox, consent, keepData                     bool
	rounds, threads, tables, rows                  int
	duration, warmup, timeLimit                    time.Duration
	resolution                                     float64
}

func newOverheadCmd(secrets *collect.Secrets) *cobra.Command {
	f := overheadFlags{secrets: secrets}
	cmd := &cobra.Command{
		Use:   "overhead (--dsn DSN | --sandbox) [--configs A,B,...]",
		Short: "Measure what instrumentation costs: TPS under each setting, rotated rounds, ratio with a confidence interval",
		Long: `overhead runs an OLTP read/write workload (sysbench oltp_read_write's mix) under
each configuration in rotated rounds (A B C, C B A, A B C ...), then prints for
each: how it was applied (startup or runtime), median TPS, min–max, the ratio
to the first configuration (the baseline) with a 95% interval from the paired
rounds, average and p95 latency with their intervals, and whether the
difference stands above the noise. After --rounds rotations, rotations are
added while a row is undecided (its interval neither excludes 1.0 nor lies
within --resolution of it), until --time-limit; decided rows are left out of
them, and so are rows that could not be decided in the time left at their
spread (a note says which). A row still undecided says so with its interval.

On a sandbox it also measures the CPU time the server and gapscope's process
use per transaction, and the capacity: the paired ratio of transactions per
CPU second, what the setting leaves of a CPU-bound server's throughput. Other
load on a shared host moves TPS a lot and CPU per transaction little, so the
verdict is decided on capacity there (on TPS on a server gapscope cannot see
the CPU of). sysbench runs in its own process and is not counted; the builtin
workload runs in gapscope's and dilutes the capacity ratios.

Settings are measured as a DBA leaves them: ps-all, every instrument and
consumer on, is a startup setting (instruments enabled at runtime miss the
mutexes, rwlocks and other objects created at startup, where the cost is), so
on a sandbox it is applied by restarting with the options, same data
directory, then preload and warm-up; ps-all-runtime is the same set with
UPDATE at runtime, for comparison. On a server gapscope may not restart,
ps-all is set at runtime and its row says it understates (runtime*).

Configurations:
  ps-off              performance_schema=OFF (startup option: sandbox restart)
  ps-default          performance_schema=ON, default instruments and consumers
  ps-all              every instrument enabled and timed, every consumer on, at
                      startup: --performance-schema-instrument='%=ON' and the
                      consumer options (sandbox restart)
  ps-all-runtime      the same with UPDATE setup_instruments/setup_consumers
  innodb-metrics-all  SET GLOBAL innodb_monitor_enable='all'
  optimizer-trace     SET GLOBAL optimizer_trace='enabled=on' (new sessions)
  gapscope-watch      gapscope watch running (capture + performance_schema polling)

With --sandbox it starts a private MariaDB server and may restart it. On any
other server it never restarts, and it changes global settings only with
--i-understand-this-changes-settings; the original settings are read first
and restored at the end, Ctrl-C included, then read back and compared.`,
		Example: `  gapscope overhead --sandbox --configs ps-off,ps-default,ps-all,optimizer-trace,gapscope-watch \
      --tables 4 --rows 20000 --threads 4 --duration 20s --rounds 3
  gapscope overhead --dsn 'root@tcp(10.0.0.5:3306)/' --configs ps-default,gapscope-watch \
      --i-understand-this-changes-settings --store overhead.db`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runOverhead(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to measure: user[:pass]@tcp(host:port)/ (password also from MYSQL_PWD)")
	fl.BoolVar(&f.sandbox, "sandbox", false, "measure on a private MariaDB sandbox (may restart it)")
	fl.StringVar(&f.configs, "configs", "", "comma-separated configurations, baseline first (default: "+defaultSandboxConfigs+" with --sandbox, "+defaultServerConfigs+" with --dsn)")
	fl.IntVar(&f.rounds, "rounds", 3, "rotations every configuration runs before undecided ones get more")
	fl.DurationVar(&f.timeLimit, "time-limit", overhead.DefaultTimeLimit, "add rotations while a row is undecided, up to this long (0: none added)")
	fl.DurationVar(&f.duration, "duration", 10*time.Second, "measured length of each round")
	fl.DurationVar(&f.warmup, "warmup", 3*time.Second, "unmeasured workload after each change (0: none)")
	fl.IntVar(&f.threads, "threads", 4, "workload connections")
	fl.IntVar(&f.tables, "tables", 4, "workload tables")
	fl.IntVar(&f.rows, "rows", 20_000, "rows per table")
	fl.StringVar(&f.driver, "driver", "builtin", "workload: builtin (in-process) or sysbench (the real one)")
	fl.StringVar(&f.storePath, "store", "", "record every round in this SQLite file (for gapscope report)")
	fl.StringVar(&f.format, "format", "text", "output: text or json")
	fl.Float64Var(&f.resolution, "resolution", overhead.DefaultResolution, "smallest ratio change worth telling (an interval within ±this of 1.0 says 'no')")
	fl.StringVar(&f.iface, "iface", "", "capture interface for gapscope-watch (default: the one that reaches the server)")
	fl.BoolVar(&f.consent, "i-understand-this-changes-settings", false, "allow global setting changes on a server that is not a sandbox (restored afterwards)")
	fl.BoolVar(&f.keepData, "keep-data", false, "keep the workload's tables (schema "+overhead.DefaultSchema+") after the run")
	return cmd
}

func (f *overheadFlags) check() error {
	switch {
	case f.sandbox == (f.dsn != ""):
		return usagef("give exactly one of --dsn and --sandbox")
	case f.format != "text" && f.format != "json":
		return usagef("--format must be text or json, not %q", f.format)
	case f.driver != "builtin" && f.driver != "sysbench":
		return usagef("--driver must be builtin or sysbench, not %q", f.driver)
	case f.rounds < 1 || f.threads < 1 || f.tables < 1 || f.rows < 1:
		return usagef("--rounds, --threads, --tables and --rows must be at least 1")
	case f.duration <= 0 || f.warmup < 0 || f.timeLimit < 0:
		return usagef("--duration must be positive, --warmup and --time-limit not negative")
	case f.resolution <= 0 || f.resolution >= 1:
		return usagef("--resolution must be between 0 and 1, not %v", f.resolution)
	}
	return nil
}

func (f *overheadFlags) options(errOut io.Writer) (overhead.Options, error) {
	list := f.configs
	if list == "" {
		list = map[bool]string{true: defaultSandboxConfigs, false: defaultServerConfigs}[f.sandbox]
	}
	cs, err := overhead.ParseConfigs(list)
	if err != nil {
		return overhead.Options{}, usagef("--configs: %v", err)
	}
	warmup := f.warmup
	if warmup == 0 {
		warmup = -1 // Options: 0 means the default, negative none
	}
	limit := f.timeLimit
	if limit == 0 {
		limit = -1 // Options: 0 means the default, negative none
	}
	return overhead.Options{DSN: f.dsn, Secrets: f.secrets, AllowChanges: f.consent, Configs: cs, Rounds: f.rounds, TimeLimit: limit, Duration: f.duration,
		Warmup: warmup, Driver: f.driver, KeepData: f.keepData, Resolution: f.resolution, WatchIface: f.iface,
		Workload: workload.OLTPOptions{Tables: f.tables, TableSize: f.rows, Threads: f.threads},
		Progress: overhead.ProgressPrinter(errOut)}, nil
}

// overheadSandboxArgs start the sandbox as most servers run: with
// performance_schema on and its defaults (ps-off restarts it without).
var overheadSandboxArgs = lab.OverheadServerArgs

func runOverhead(ctx context.Context, out, errOut io.Writer, f overheadFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	opts, err := f.options(errOut)
	if err != nil {
		return err
	}
	if f.sandbox {
		fmt.Fprintln(errOut, "starting a private MariaDB sandbox ...")
		inst, err := sandbox.Start(ctx, sandbox.Options{ServerArgs: overheadSandboxArgs})
		if err != nil {
			return err
		}
		defer inst.Stop()
		opts.DSN, opts.Sandbox, opts.SandboxArgs = inst.DSN(""), inst, overheadSandboxArgs
	}
	rec, err := overhead.Record(ctx, f.storePath, f.secrets.RedactDSN(opts.DSN))
	if err != nil {
		return err
	}
	opts.OnRound = rec.Add
	fmt.Fprintf(errOut, "measuring %s on %s ...\n", strings.Join(overhead.Names(opts.Configs), ", "), f.secrets.RedactDSN(opts.DSN))
	res, err := overhead.Run(ctx, opts)
	rec.Close(res)
	if errors.Is(err, overhead.ErrNeedsConsent) || errors.Is(err, overhead.ErrNeedsRestart) {
		return usageError{err}
	}
	if res == nil {
		return err
	}
	if werr := res.WriteReport(out, f.format == "json"); err == nil {
		err = werr
	}
	return err
}
