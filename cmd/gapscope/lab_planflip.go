package main

import (
	"context"
	"time"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/spf13/cobra"
)

func init() { registerLab(newLabPlanFlipCmd) }

func newLabPlanFlipCmd() *cobra.Command {
	var f labFlags
	var rows int
	var threshold time.Duration
	var noTrace bool
	cmd := &cobra.Command{
		Use:   "planflip",
		Short: "The plan-flip case: the same SELECT flips to a full scan when its table statistics go wrong",
		Long: `planflip starts a sandbox with t (200,000 rows, KEY k) and u (1,000 rows, KEY y),
runs t JOIN u ON t.k = u.x WHERE u.y = ? fast a few times while gapscope keeps
its usual plan, then breaks the engine-independent statistics (avg_frequency
of t.k = 200,000) so that executions flip to a full scan of t. gapscope catches
a slow execution's plan while it runs (SHOW EXPLAIN FOR / SHOW ANALYZE FOR),
compares it with the usual plan, shows the statistics and the optimizer's
costs, and sees the finding clear after ANALYZE TABLE t PERSISTENT FOR ALL.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if rows < 1000 {
				return usagef("--rows must be at least 1000, not %d", rows)
			}
			if threshold < 0 || c.Flags().Changed("threshold") && threshold == 0 {
				return usagef("--threshold must be positive, not %s", threshold)
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, o lab.Options) (*lab.Result, error) {
				return lab.PlanFlip(ctx, lab.PlanFlipOptions{Options: o, Rows: rows, Threshold: threshold, NoTrace: noTrace})
			})
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&rows, "rows", 200_000, "rows of the big table t")
	cmd.Flags().DurationVar(&threshold, "threshold", 0, "an execution running longer than this is slow (default: a quarter of the flipped plan's full scan timed here, 5-50ms)")
	cmd.Flags().BoolVar(&noTrace, "no-trace", false, "skip the optimizer-trace replay of the flipped plan")
	return cmd
}
