package main

import (
	"context"
	"time"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/spf13/cobra"
)

func init() { registerLab(newLabRemoteCmd) }

func newLabRemoteCmd() *cobra.Command {
	var f labFlags
	var o lab.RemoteOptions
	cmd := &cobra.Command{
		Use:   "remote [--delay 5ms] [--thread-pool]",
		Short: "The capture on the application's host: network transit measured from TCP, not reported as queue",
		Long: `remote runs the case of a managed database, where gapscope can only capture on
the application's host: MariaDB in one network namespace, the application and
'gapscope watch' in another, joined by a link that holds every packet for
--delay each way (two TUN devices and a forwarder; needs root and
/dev/net/tun). The application runs point selects and SELECT SLEEP(0.05);
watch captures on its side of the link, measures the round trip to the
server from TCP, calibrates its clock across the link and splits each
statement's time: the transit goes to request and delivery, never to queue.
The namespaces and devices are removed on exit, Ctrl-C included.`,
		Example: `  sudo gapscope lab remote --delay 5ms
  sudo gapscope lab remote --delay 5ms --thread-pool --format json`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if o.Delay < 0 || o.Delay > time.Second {
				return usagef("--delay must be between 0 and 1s, not %s", o.Delay)
			}
			if o.PointSelects <= 0 || o.Sleeps <= 0 {
				return usagef("--point-selects and --sleeps must be positive")
			}
			return runLab(c.Context(), c.OutOrStdout(), c.ErrOrStderr(), f, func(ctx context.Context, lo lab.Options) (*lab.Result, error) {
				o.Options = lo
				return lab.Remote(ctx, o)
			})
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.DurationVar(&o.Delay, "delay", 5*time.Millisecond, "one-way delay of the link")
	fl.BoolVar(&o.ThreadPool, "thread-pool", false, "run the server with --thread-handling=pool-of-threads")
	fl.IntVar(&o.PointSelects, "point-selects", 200, "point selects the application runs")
	fl.IntVar(&o.Sleeps, "sleeps", 3, "SELECT SLEEP(0.05) the application runs")
	return cmd
}
