package main

import (
	"context"
	"fmt"
	"io"
	"sync"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/plans"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() { registerConnecting(newPlansCmd) }

type plansFlags struct {
	secrets                              *collect.Secrets // learns the passwords of the target and masks with them
	dsn, defaultsFile, storePath, format string
	noDefaults                           bool
	duration                             time.Duration
	opts                                 plans.Options
}

func newPlansCmd(secrets *collect.Secrets) *cobra.Command {
	f := plansFlags{secrets: secrets}
	cmd := &cobra.Command{
		Use:   "plans --dsn DSN [--threshold 1s] [--duration D] [--store FILE.db]",
		Short: "Catch the plans of slow executions while they run and compare them with the usual plan",
		Long: `plans polls the server's running statements. When a SELECT has run longer than
--threshold it reads the plan it is running (MariaDB SHOW EXPLAIN FOR and, on a
flip, SHOW ANALYZE FOR; MySQL EXPLAIN FOR CONNECTION). From fast executions it
keeps each digest's usual plan (EXPLAIN of read-only SELECTs only: writes,
locking reads, SELECT ... INTO and multi-statements are never planned, and
nothing is executed again). A slow execution that ran another plan, or on
collapsed row estimates, raises PLAN_FLIP with both plans, the table statistics
and the fix. Plan statements are limited per digest and overall.

Fast executions come from performance_schema statement history when it is on
(events_statements_current plus history or history_long consumers).`,
		Example: `  gapscope plans --dsn 'monitor@tcp(db1:3306)/' --threshold 500ms --duration 10m --store plans.db
  gapscope plans --dsn 'root@tcp(127.0.0.1:3306)/' --trace-replay --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return runPlans(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f)
		},
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "server to watch, e.g. 'user@tcp(host:3306)/' (password from MYSQL_PWD)")
	fl.StringVar(&f.defaultsFile, "defaults-file", "", "my.cnf whose [client], [mysql] or [gapscope] group names the server (default ~/.my.cnf)")
	addNoDefaultsFlag(fl, &f.noDefaults)
	fl.DurationVar(&f.opts.Threshold, "threshold", time.Second, "a statement running longer than this is slow: its live plan is caught")
	fl.DurationVar(&f.duration, "duration", 0, "stop after this long (default: until Ctrl-C)")
	fl.StringVar(&f.storePath, "store", "", "SQLite store to record plans and findings in")
	fl.StringVar(&f.format, "format", "text", "output: text or json")
	fl.BoolVar(&f.opts.TraceReplay, "trace-replay", false, "on a flip, plan the SELECT again with optimizer_trace on and show the costs of the chosen and rejected access paths")
	fl.DurationVar(&f.opts.PerDigestEvery, "per-digest", 10*time.Second, "at most one live plan and one EXPLAIN per digest in this interval")
	fl.Float64Var(&f.opts.Rate, "rate", 2, "at most this many plan statements per second over all digests")
	fl.IntVar(&f.opts.Burst, "burst", 4, "plan statements allowed at once over all digests")
	fl.DurationVar(&f.opts.PollInterval, "interval", 0, "processlist poll interval (default: threshold/4, within 10ms-250ms)")
	return cmd
}

func (f *plansFlags) check() error {
	var err error
	if f.defaultsFile, err = resolveTarget(f.secrets, "plans", f.dsn, f.defaultsFile, f.noDefaults); err != nil {
		return err
	}
	switch {
	case f.format != "text" && f.format != "json":
		return usagef("--format must be text or json, not %q", f.format)
	case f.opts.Threshold <= 0:
		return usagef("--threshold must be positive, not %s", f.opts.Threshold)
	case f.duration < 0 || f.opts.PerDigestEvery <= 0 || f.opts.Rate <= 0 || f.opts.Burst <= 0 || f.opts.PollInterval < 0:
		return usagef("--duration, --per-digest, --rate, --burst and --interval must be positive")
	}
	return nil
}

func runPlans(ctx context.Context, out, errOut io.Writer, f plansFlags) error {
	cfg, err := f.secrets.Config(f.dsn, f.defaultsFile)
	if err != nil {
		return err
	}
	db, err := f.secrets.OpenConfig(ctx, cfg)
	if err != nil {
		return err
	}
	defer db.Close()
	rec, err := plans.Record(ctx, f.storePath, f.secrets.RedactDSN(cfg.FormatDSN()))
	if err != nil {
		return err
	}
	var mu sync.Mutex
	var raised []event.Finding
	f.opts.OnPlan = func(p plans.Caught) {
		rec.Plan(ctx, p)
		if f.format == "text" && p.Role == "slow" {
			fmt.Fprintf(errOut, "  · caught %s after %s: %s\n", p.Source, time.Duration(p.ElapsedUS)*time.Microsecond, p.Signature)
		}
	}
	f.opts.OnFlip = func(fl event.Finding) {
		mu.Lock()
		raised = append(raised, fl)
		mu.Unlock()
		rec.Finding(fl)
	}
	c := plans.NewCatcher(db, f.opts)
	err = runFor(ctx, f.duration, c.Run)
	if cerr := rec.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("recording plans in %s: %w", f.storePath, cerr)
	}
	if err != nil {
		return err
	}
	doc := plans.Output{Stats: c.Stats(), Plans: c.Caught(), Raised: raised, Findings: c.Findings()}
	if f.format == "json" {
		return report.WriteJSON(out, doc)
	}
	return doc.WriteText(out)
}

// runFor runs run until d passes (0: until ctx ends, e.g. Ctrl-C).
func runFor(ctx context.Context, d time.Duration, run func(context.Context) error) error {
	if d > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	return run(ctx)
}
