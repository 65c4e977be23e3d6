package main

import (
	"context"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/spf13/cobra"
)

func init() { registerLab(newLabConcurrencyCmd) }

func newLabConcurrencyCmd() *cobra.Command {
	var f labFlags
	var noControl bool
	var runs int
	cmd := &cobra.Command{
		Use:   "concurrency",
		Short: "The concurrency-cap case: canary latency explodes above a concurrency cap; gapscope finds the knee and names the setting",
		Long: `concurrency starts a sandbox whose thread pool caps concurrency
(thread_pool_size=2, thread_pool_max_threads=10: 8 statements at once, each
group keeping a listener), ramps a load of SELECT SLEEP(0.02) connections
from 1 to 64 while gapscope probe times the canary at each step, fits the
latency knee against Threads_running and ties it to the cap. A control ramp
on one thread per connection follows: it must show no knee tied to a
setting. About a minute.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if runs <= 0 {
				return usagef("--runs must be positive")
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, o lab.Options) (*lab.Result, error) {
				r, _, err := lab.Concurrency(ctx, lab.ConcurrencyOptions{Options: o, NoControl: noControl, RunsPerStep: runs})
				return r, err
			})
		},
	}
	f.add(cmd)
	cmd.Flags().BoolVar(&noControl, "no-control", false, "skip the one-thread-per-connection control ramp")
	cmd.Flags().IntVar(&runs, "runs", 2, "probe runs per load step")
	return cmd
}
