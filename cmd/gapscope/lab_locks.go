package main

import (
	"context"
	"time"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/spf13/cobra"
)

func init() { registerLab(newLabLocksCmd) }

func newLabLocksCmd() *cobra.Command {
	var f labFlags
	var o lab.LocksOptions
	cmd := &cobra.Command{
		Use:   "locks",
		Short: "Lock waits inside exec: a row lock behind an idle transaction, the metadata-lock pile-up, a contention-free baseline",
		Long: `locks starts a sandbox and runs four cases, each under its own watch:

  row       a transaction updates a row and its application sits idle 1.3 s
            before COMMIT; another connection's update of the row waits
  short     the same with a 200 ms idle: over before any read of the lock
            tables, so gapscope attributes it from the wire after the fact
  mdl       a transaction reads table m and idles 1.5 s; an ALTER TABLE m
            waits for it; 20 point selects of m queue behind the ALTER
  baseline  four clients run short transactions on rows of their own:
            nothing may be attributed

The clients time every statement; each victim's wait as its client measured it
is printed beside gapscope's lock_wait_us, and the blocker gapscope names (the
root of the chain, whether its application was idle in its transaction, for
how long) beside the truth.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if o.Selects < 0 || o.Hold < 0 || o.ShortHold < 0 || o.MDLHold < 0 {
				return usagef("--selects and the holds may not be negative")
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, lo lab.Options) (*lab.Result, error) {
				o.Options = lo
				r, err := lab.Locks(ctx, o)
				if err != nil {
					return nil, err
				}
				return r.Result, nil
			})
		},
	}
	f.add(cmd)
	cmd.Flags().DurationVar(&o.Hold, "hold", 1300*time.Millisecond, "how long the row case's application idles in its transaction")
	cmd.Flags().DurationVar(&o.ShortHold, "short-hold", 200*time.Millisecond, "the short case's idle (under watch's 500 ms lock-table read)")
	cmd.Flags().DurationVar(&o.MDLHold, "mdl-hold", 1500*time.Millisecond, "how long the metadata-lock case's transaction idles")
	cmd.Flags().IntVar(&o.Selects, "selects", 20, "point selects queued behind the ALTER")
	return cmd
}
