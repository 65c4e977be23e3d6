package main

import (
	"context"
	"fmt"
	"io"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() {
	registerLab(newLabThreadPoolCmd)
	registerLab(newLabSlowClientCmd)
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
		Short: "Seed 004: requests wait seconds in the thread pool's queue, the server records microseconds",
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
		Short: "Seed 000: a client that does not read its result inflates the server's statement time",
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

func runLab(ctx context.Context, out, errOut io.Writer, f labFlags, run func(context.Context, lab.Options) (*lab.Result, error)) error {
	res, err := run(ctx, f.options(errOut))
	if err != nil {
		return err
	}
	if f.format == "json" {
		return report.WriteJSON(out, res)
	}
	return writeLabText(out, res)
}

func writeLabText(out io.Writer, r *lab.Result) error {
	fmt.Fprintf(out, "\ngapscope lab %s (%s, %s)\n\nsettings: %v\n\nwhat gapscope saw:\n", r.Scenario, r.Server, r.Elapsed.Round(100_000_000), r.Settings)
	for _, s := range r.Seen {
		fmt.Fprintf(out, "  - %s\n", s)
	}
	fmt.Fprintln(out, "\nfindings:")
	if err := report.WriteFindingsBrief(out, r.Findings); err != nil {
		return err
	}
	_, err := fmt.Fprintln(out, "\n(--format json shows every statement and all the evidence)")
	return err
}
