package main

import (
	"errors"
	"fmt"

	"github.com/gapscope/gapscope/internal/lab"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/spf13/cobra"
)

// labScenarios lists the scenario subcommands (threadpool, slowclient, ...)
// that other files add to `gapscope lab` with registerLab from their init.
var labScenarios []func() *cobra.Command

func registerLab(f func() *cobra.Command) { labScenarios = append(labScenarios, f) }

func init() { register(newLabCmd) }

func newLabCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Private MariaDB sandboxes: reproduce field reports, or start one to play with",
		Long: `lab starts private MariaDB (or MySQL) servers on 127.0.0.1 that never touch a
system server. 'lab up' leaves one running for manual use; 'lab down' removes it.
Scenario subcommands reproduce a field report and show gapscope's diagnosis.`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
	}
	cmd.AddCommand(newLabUpCmd(), newLabDownCmd())
	for _, f := range labScenarios {
		cmd.AddCommand(f())
	}
	return cmd
}

func newLabUpCmd() *cobra.Command {
	var opts []string
	var dir, flavor string
	var port int
	var bare bool
	cmd := &cobra.Command{
		Use:   "up [--opt=--thread-handling=pool-of-threads ...] [--dir D]",
		Short: "Start a persistent sandbox server and print how to connect to it",
		Example: `  gapscope lab up --opt=--performance-schema=ON --opt=--thread-handling=pool-of-threads
  gapscope check --dsn 'root@tcp(127.0.0.1:PORT)/'
  gapscope lab down`,
		Args: cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			if flavor != "" && flavor != "mariadb" && flavor != "mysql" {
				return usagef("--flavor must be mariadb or mysql, not %q", flavor)
			}
			if !bare && !lab.SetsPerfSchema(opts) {
				opts = append(append([]string{}, lab.WatchReadyArgs...), opts...)
			}
			inst, err := lab.Up(c.Context(), dir, sandbox.Options{ServerArgs: opts, Port: port, Flavor: flavor, Persistent: true})
			if err != nil {
				return err
			}
			lab.PrintUp(c.OutOrStdout(), inst)
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&opts, "opt", nil, "server option, repeatable (e.g. --opt=--thread-handling=pool-of-threads)")
	cmd.Flags().BoolVar(&bare, "bare", false, "start with the server's defaults (performance_schema off on MariaDB) instead of what watch reads")
	cmd.Flags().StringVar(&dir, "dir", lab.DefaultDir(), "directory for the sandbox's datadir, socket and logs")
	cmd.Flags().StringVar(&flavor, "flavor", "", "server to run: mariadb or mysql (default: whichever is installed, MariaDB first)")
	cmd.Flags().IntVar(&port, "port", 0, "TCP port on 127.0.0.1 (default: a free one)")
	return cmd
}

func newLabDownCmd() *cobra.Command {
	var dir string
	cmd := &cobra.Command{
		Use:   "down [--dir D]",
		Short: "Stop the sandbox started by 'lab up' and remove its directory",
		Args:  cobra.NoArgs,
		RunE: func(c *cobra.Command, _ []string) error {
			err := sandbox.StopDir(dir)
			if errors.Is(err, sandbox.ErrNotRunning) {
				fmt.Fprintf(c.OutOrStdout(), "no lab sandbox in %s\n", dir)
				return nil
			}
			if err != nil {
				return err
			}
			fmt.Fprintf(c.OutOrStdout(), "lab sandbox in %s stopped and removed\n", dir)
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", lab.DefaultDir(), "directory given to 'lab up'")
	return cmd
}
