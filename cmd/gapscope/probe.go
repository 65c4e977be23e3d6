package main

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/probe"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/workload"
	"github.com/go-sql-driver/mysql"
	"github.com/spf13/cobra"
)

func init() { registerConnecting(newProbeCmd) }

type probeFlags struct {
	secrets                       *collect.Secrets // learns the passwords of the target and masks with them
	dsn, defaultsFile, monitorDSN string
	noDefaults                    bool
	every                         time.Duration
	repeat, inserts, count, cores int
	workload, storePath, format   string
	schema                        string
}

func newProbeCmd(secrets *collect.Secrets) *cobra.Command {
	f := probeFlags{secrets: secrets}
	cmd := &cobra.Command{
		Use:   "probe --dsn DSN",
		Short: "Canary: time a small workload on schedule beside Threads_running; find the concurrency knee",
		Long: `probe runs the canary of the concurrency-cap case (docs/field-reports.md):
TRUNCATE + 100 single-row INSERTs, --repeat times, in a scratch schema it
creates and drops, every --every, and records
each run's max/avg/median beside the Threads_running, Threads_connected and
thread-pool queue lengths read while it ran. At the end it fits log latency
against Threads_running with two segments, and ties the knee to the setting
that caps concurrency there (thread_pool_max_threads, thread_pool_size x
(oversubscribe+1), innodb_thread_concurrency, max_connections) or to the CPU
count: a CONCURRENCY_KNEE finding.

The canary must take the application's path (through the thread pool); give
--monitor-dsn on the pool's extra port so status reads do not queue.
Ctrl-C discards the run in progress, saves what was done and prints the
summary.`,
		Example: `  gapscope probe --dsn 'app@tcp(db1:3306)/' --every 60s --store probe.db
  gapscope probe --dsn 'app@tcp(db1:3306)/' --monitor-dsn 'monitor@tcp(db1:3307)/' --count 30 --format json
  gapscope probe --dsn 'app@tcp(db1:3306)/shop' --workload checkout.sql --repeat 5`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			return runProbe(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to probe: user[:pass]@tcp(host:port)/ (password also from MYSQL_PWD)")
	fl.StringVar(&f.defaultsFile, "defaults-file", "", "my.cnf whose [client], [mysql] or [gapscope] group names the server (default ~/.my.cnf)")
	addNoDefaultsFlag(fl, &f.noDefaults)
	fl.StringVar(&f.monitorDSN, "monitor-dsn", "", "connection for status reads (default: --dsn); use the thread pool's extra port")
	fl.DurationVar(&f.every, "every", 60*time.Second, "time between the starts of two runs")
	fl.IntVar(&f.repeat, "repeat", 20, "repetitions per run (each timed)")
	fl.IntVar(&f.inserts, "inserts", 100, "canary INSERTs per repetition")
	fl.IntVar(&f.count, "count", 0, "stop after this many runs (default: until Ctrl-C)")
	fl.IntVar(&f.cores, "cores", -1, "CPU cores of the server host (default: this host's when the server is local, else unknown)")
	fl.StringVar(&f.workload, "workload", "canary", "canary, or a .sql file whose statements (;-separated) make one repetition")
	fl.StringVar(&f.schema, "schema", "gapscope_canary", "scratch schema the canary creates and drops")
	fl.StringVar(&f.storePath, "store", "", "record runs and findings in this SQLite file")
	fl.StringVar(&f.format, "format", "text", "output: text or json")
	return cmd
}

func (f *probeFlags) check() error {
	var err error
	if f.defaultsFile, err = resolveTarget(f.secrets, "probe", f.dsn, f.defaultsFile, f.noDefaults); err != nil {
		return err
	}
	switch {
	case f.format != "text" && f.format != "json":
		return usagef("--format must be text or json, not %q", f.format)
	case f.every <= 0:
		return usagef("--every must be positive")
	case f.repeat <= 0 || f.inserts <= 0 || f.count < 0:
		return usagef("--repeat and --inserts must be positive, --count not negative")
	}
	return nil
}

func runProbe(ctx context.Context, out, errOut io.Writer, f probeFlags) error {
	if err := f.check(); err != nil {
		return err
	}
	opts, cfg, err := f.options()
	if err != nil {
		return err
	}
	mon, err := f.openMonitor(ctx, cfg)
	if err != nil {
		return err
	}
	defer mon.Close()
	opts.Monitor = mon
	rec, err := probe.Record(ctx, f.storePath, f.secrets.Target(cfg))
	if err != nil {
		return err
	}
	opts.OnPoint = func(p probe.Point) error {
		if f.format == "text" {
			fmt.Fprintln(errOut, "  "+probe.PointLine(p))
		}
		return rec.Add(opts, p)
	}
	opts.OnDiscard = func(err error) { fmt.Fprintf(errOut, "  run failed, discarded: %v\n", err) }
	fmt.Fprintf(errOut, "probing %s with the %s every %s ... (Ctrl-C to stop)\n", f.secrets.Target(cfg), opts.Name(), f.every)
	res, err := probe.Run(ctx, opts)
	if cerr := rec.Close(res); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	return res.WriteText(out)
}

// options builds the probe's options from the flags (the canary's DSN
// keeps the password, which never reaches output).
func (f *probeFlags) options() (probe.Options, *mysql.Config, error) {
	cfg, err := f.secrets.Config(f.dsn, f.defaultsFile)
	if err != nil {
		return probe.Options{}, nil, err
	}
	o := probe.Options{DSN: cfg.FormatDSN(), Every: f.every, Count: f.count, Cores: f.cores,
		Canary: workload.CanaryOptions{Schema: f.schema, Repeat: f.repeat, Inserts: f.inserts}}
	if f.cores < 0 {
		o.Cores = collect.LocalCores(cfg)
	}
	if f.workload != "canary" {
		data, err := os.ReadFile(f.workload)
		if err != nil {
			return o, nil, usagef("--workload: %v", err)
		}
		o.Script, o.ScriptName = workload.StatementsFromSQL(string(data)), filepath.Base(f.workload)
		if len(o.Script) == 0 {
			return o, nil, usagef("--workload %s holds no statement", f.workload)
		}
	}
	return o, cfg, nil
}

// openMonitor connects for status reads: --monitor-dsn, or the canary's
// server.
func (f *probeFlags) openMonitor(ctx context.Context, cfg *mysql.Config) (*sql.DB, error) {
	if f.monitorDSN != "" {
		mcfg, err := f.secrets.Config(f.monitorDSN, f.defaultsFile)
		if err != nil {
			return nil, err
		}
		cfg = mcfg
	}
	return f.secrets.OpenConfig(ctx, cfg.Clone())
}
