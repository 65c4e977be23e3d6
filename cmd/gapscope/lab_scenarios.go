package main

import (
	"context"
	"io"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() {
	registerLab(newLabThreadPoolCmd)
	registerLab(newLabSlowClientCmd)
	registerLab(newLabBusyCmd)
}

type labFlags struct {
	format       string
	keepLiterals bool
}

func (f *labFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.format, "format", "text", "output: text or json ({\"scenario\", \"findings\", \"statements\", ...})")
	cmd.Flags().BoolVar(&f.keepLiterals, "keep-literals", false, "keep SQL literals in the statements")
}

func (f *labFlags) check() error {
	if f.format != "text" && f.format != "json" {
		return usagef("--format must be text or json, not %q", f.format)
	}
	return nil
}

func (f *labFlags) options(errOut io.Writer) lab.Options {
	o := lab.Options{KeepLiterals: f.keepLiterals}
	if f.format == "text" {
		o.Progress = errOut
	}
	return o
}

func newLabThreadPoolCmd() *cobra.Command {
	var f labFlags
	var iterations int64
	cmd := &cobra.Command{
		Use:   "threadpool",
		Short: "The thread-pool case: requests wait seconds in the thread pool's queue, the server records microseconds",
		Long: `threadpool starts a sandbox with thread_pool_size=2, thread_pool_oversubscribe=1 and
thread_pool_stall_limit=60000, saturates group 0 with two CPU-bound BENCHMARK()
queries, and times SELECT 1 on a connection of group 0 and one of group 1
while gapscope watches. The wait happens before the server starts the
statement, so the slow log and performance_schema never see it; the wire does.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, o lab.Options) (*lab.Result, error) {
				return lab.ThreadPool(ctx, lab.ThreadPoolOptions{Options: o, HogIterations: iterations})
			})
		},
	}
	f.add(cmd)
	cmd.Flags().Int64Var(&iterations, "iterations", 0, "MD5 iterations per BENCHMARK() of the hog (default: measured for ~4 s per query)")
	return cmd
}

func newLabSlowClientCmd() *cobra.Command {
	var f labFlags
	cmd := &cobra.Command{
		Use:   "slowclient",
		Short: "The slow-client case: a client that does not read its result inflates the server's statement time",
		Long: `slowclient starts a sandbox, then a client runs a ~10 MB SELECT and sleeps 3 s
before reading it, and another runs a 100-row SELECT with the same sleep. The
server blocks on the closed TCP window once the socket buffers are full, so
performance_schema (and the slow log) record the client's sleep as statement
time. gapscope splits it out as send stall.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, o lab.Options) (*lab.Result, error) {
				return lab.SlowClient(ctx, lab.SlowClientOptions{Options: o})
			})
		},
	}
	f.add(cmd)
	return cmd
}

func newLabBusyCmd() *cobra.Command {
	var f labFlags
	var o lab.BusyOptions
	cmd := &cobra.Command{
		Use:   "busy",
		Short: "A busy server: every statement seen and every slow one joined at watch's default flags",
		Long: `busy starts a sandbox with performance_schema's default 1,000-row
events_statements_history_long ring; four connections run point selects as
fast as they go (the ring turns over in tens of milliseconds) while another
runs ten SELECT SLEEP(0.2), half a second apart. gapscope watch runs at its
default flags (CPU budget included) and prints what it saw: every statement
is captured and counted, the slow ones are joined from their thread's own
history, and the fast ones are joined as the budget allows.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if o.Workers < 1 || o.Slow < 0 || o.Statements < 0 || o.HistoryLongSize < 0 {
				return usagef("--workers must be at least 1; --slow, --statements and --history-long-size may not be negative")
			}
			if o.Slow == 0 && o.Statements == 0 {
				return usagef("--slow 0 needs --statements N to bound the run")
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, lo lab.Options) (*lab.Result, error) {
				o.Options = lo
				r, _, err := lab.Busy(ctx, o)
				return r, err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&o.Workers, "workers", 4, "connections running point selects as fast as they go")
	cmd.Flags().IntVar(&o.Slow, "slow", 10, "slow statements on another connection (0: none; then --statements bounds the run)")
	cmd.Flags().IntVar(&o.Statements, "statements", 0, "stop the point selects after this many in all (0: when the slow statements are done)")
	cmd.Flags().IntVar(&o.HistoryLongSize, "history-long-size", 0, "performance_schema_events_statements_history_long_size (0: the server's default, 1,000)")
	return cmd
}

func runLab(ctx context.Context, out, errOut io.Writer, f labFlags, run func(context.Context, lab.Options) (*lab.Result, error)) error {
	res, err := run(ctx, f.options(errOut))
	if err != nil {
		return err
	}
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	return res.WriteText(out)
}
