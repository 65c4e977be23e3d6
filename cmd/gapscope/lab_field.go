package main

import (
	"fmt"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/gapscope/gapscope/internal/report"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/spf13/cobra"
)

func init() { registerLab(newLabFieldCmd) }

func newLabFieldCmd() *cobra.Command {
	var f labFlags
	var o lab.FieldOptions
	var budget float64
	cmd := &cobra.Command{
		Use:   "field",
		Short: "Real clients from Debian (pymysql, MySQLdb, DBD::mysql, the mariadb CLI) against watch at its default flags: per condition, the client's time beside watch's",
		Long: `field starts one sandbox with TLS (certificates made for the run) and IPv6, runs
gapscope watch at its default flags, and has real clients do what production
applications do: TLS from pymysql and from short mariadb CLI connections,
stored procedures (MySQLdb), the compressed protocol, server-side prepared
statements (Perl DBD::mysql, mysql_server_prepare=1), a statement timeout
(error 1969), IPv6, LOAD DATA LOCAL INFILE, COM_CHANGE_USER, unix-socket
clients, a multi-statement request, connection churn (connect, 3 point
selects, close) and a 20 MB INSERT. Per condition it prints what the client
measured beside what watch reported (joined, reason, the five parts) and
whether the condition holds. The clients are python3-pymysql,
python3-mysqldb, libdbd-mysql-perl and mariadb-client
(scripts/install-deps.sh). About a minute.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if err := f.check(); err != nil {
				return err
			}
			if o.Churn < 0 || o.Parallel < 0 {
				return usagef("--churn and --parallel may not be negative")
			}
			if budget < 0 || budget > 100 {
				return usagef("--cpu-budget is a percentage of the host's CPUs, between 0 and 100, not %g", budget)
			}
			o.CPUBudget = budget / 100
			if budget == 0 {
				o.CPUBudget = -1 // no bound
			}
			o.Options = f.options(c.ErrOrStderr())
			r, rep, err := lab.Field(c.Context(), o)
			if err != nil {
				return err
			}
			if f.format == "json" {
				return report.WriteJSON(c.OutOrStdout(), struct {
					*lab.Result
					Field *lab.FieldReport `json:"field"`
				}{r, rep})
			}
			if err := r.WriteText(c.OutOrStdout()); err != nil {
				return err
			}
			_, err = fmt.Fprintf(c.OutOrStdout(), "%d of %d conditions hold\n", rep.Held(), len(rep.Conditions))
			return err
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&o.Churn, "churn", 300, "connections of the churn condition (connect, 3 point selects, close)")
	cmd.Flags().IntVar(&o.Parallel, "parallel", 3, "churn connections at a time")
	cmd.Flags().Float64Var(&budget, "cpu-budget", 100*watch.DefaultOptions().CPUBudget, "watch's --cpu-budget (percent of the host's CPUs); a small one makes the budget cut the join sample early, as on a busy host")
	cmd.Flags().BoolVar(&o.DefaultRing, "default-ring", false, "run the server with its default events_statements_history_long size (1,000 rows on MariaDB 10.11) instead of lab up's 10,000")
	cmd.Flags().StringSliceVar(&o.Only, "only", nil, "run only these conditions (comma-separated; default all)")
	return cmd
}
