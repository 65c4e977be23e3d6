package main

import (
	"time"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/spf13/cobra"
)

func init() { registerLab(newLabOverheadCmd) }

func newLabOverheadCmd() *cobra.Command {
	var f labFlags
	var o lab.OverheadOptions
	cmd := &cobra.Command{
		Use:   "overhead",
		Short: "The overhead case: what performance_schema, optimizer_trace and gapscope itself cost in throughput",
		Long: `overhead starts a sandbox and runs a short OLTP read/write workload under
performance_schema off (the baseline), default, every instrument and consumer
on at startup (ps-all: the sandbox restarted with the options, as my.cnf would
set them) and the same at runtime (ps-all-runtime), optimizer_trace on, and
gapscope watch running, in rotated rounds; rounds are added while a setting
is undecided, up to --time-limit. It prints each setting's TPS ratio to the
baseline with a 95% interval from the paired rounds, its capacity (the paired
ratio of transactions per CPU second of the server and gapscope, on which the
verdict is decided: other load on the host moves TPS, hardly CPU per
transaction), latencies, how it was applied, and an INSTRUMENTATION_COST
finding for each cost that stands above the noise. At most three minutes of
rounds; 'gapscope overhead --sandbox' is the full-length measurement.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if o.Driver != "" && o.Driver != "builtin" && o.Driver != "sysbench" {
				return usagef("--driver must be builtin or sysbench, not %q", o.Driver)
			}
			o.Options = f.options(c.ErrOrStderr())
			if o.Warmup == 0 {
				o.Warmup = -1
			}
			if o.TimeLimit == 0 {
				o.TimeLimit = -1
			}
			res, err := lab.Overhead(c.Context(), o)
			if err != nil {
				return err
			}
			out := c.OutOrStdout()
			if f.format == "json" {
				return report.WriteJSON(out, res)
			}
			if err := res.Overhead.WriteText(out); err != nil {
				return err
			}
			return res.Result.WriteText(out)
		},
	}
	f.add(cmd)
	fl := cmd.Flags()
	fl.StringVar(&o.Configs, "configs", lab.OverheadConfigs, "configurations, baseline first (see gapscope overhead --help)")
	fl.IntVar(&o.Rounds, "rounds", 3, "rotations every configuration runs before undecided ones get more")
	fl.DurationVar(&o.TimeLimit, "time-limit", 3*time.Minute, "add rotations while a setting is undecided, up to this long (0: none added)")
	fl.DurationVar(&o.Duration, "duration", 5*time.Second, "measured length of each round")
	fl.DurationVar(&o.Warmup, "warmup", 2*time.Second, "unmeasured workload after each change (0: none)")
	fl.StringVar(&o.Driver, "driver", "", "workload: sysbench or builtin (default: sysbench when installed, else builtin, which runs in gapscope's process and so dilutes the CPU measure)")
	return cmd
}
