package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

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

// defaultLabDir is where `lab up` keeps its sandbox unless --dir says.
func defaultLabDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "gapscope-lab")
	}
	return filepath.Join(os.TempDir(), "gapscope-lab")
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
			if !bare && !setsPerfSchema(opts) {
				opts = append(append([]string{}, watchReadyArgs...), opts...)
			}
			return labUp(c, dir, sandbox.Options{ServerArgs: opts, Port: port, Flavor: flavor, Persistent: true})
		},
	}
	cmd.Flags().StringArrayVar(&opts, "opt", nil, "server option, repeatable (e.g. --opt=--thread-handling=pool-of-threads)")
	cmd.Flags().BoolVar(&bare, "bare", false, "start with the server's defaults (performance_schema off on MariaDB) instead of what watch reads")
	cmd.Flags().StringVar(&dir, "dir", defaultLabDir(), "directory for the sandbox's datadir, socket and logs")
	cmd.Flags().StringVar(&flavor, "flavor", "", "server to run: mariadb or mysql (default: whichever is installed, MariaDB first)")
	cmd.Flags().IntVar(&port, "port", 0, "TCP port on 127.0.0.1 (default: a free one)")
	return cmd
}

// setsPerfSchema reports whether the user turned performance_schema itself
// on or off (not one of its sizing options, which we keep beside ours).
func setsPerfSchema(opts []string) bool {
	for _, o := range opts {
		name, _, _ := strings.Cut(strings.ReplaceAll(o, "_", "-"), "=")
		if name == "--performance-schema" || name == "--skip-performance-schema" {
			return true
		}
	}
	return false
}

// watchReadyArgs are what `lab up` turns on unless --bare or the user set
// performance_schema: the statement history watch joins, with a ring large
// enough for a busy sandbox between two polls.
var watchReadyArgs = []string{
	"--performance-schema=ON",
	"--performance-schema-consumer-events-statements-current=ON",
	"--performance-schema-consumer-events-statements-history=ON",
	"--performance-schema-consumer-events-statements-history-long=ON",
	"--performance-schema-events-statements-history-long-size=10000",
}

func labUp(c *cobra.Command, dir string, opts sandbox.Options) error {
	if inst, err := sandbox.LoadState(dir); err == nil {
		return fmt.Errorf("a lab sandbox already runs in %s (%s); stop it first with: gapscope lab down --dir %s",
			dir, inst.DSN(""), dir)
	}
	// A dir left by a killed server or an interrupted start: clear it.
	if err := sandbox.StopDir(dir); err != nil && !errors.Is(err, sandbox.ErrNotRunning) {
		return err
	}
	opts.Dir = dir
	inst, err := sandbox.Start(c.Context(), opts)
	if err != nil {
		// Interrupted (Ctrl-C) or failed: leave nothing behind.
		_ = sandbox.StopDir(dir)
		return err
	}
	printLabUp(c.OutOrStdout(), inst)
	return nil
}

func printLabUp(w io.Writer, inst *sandbox.Instance) {
	fmt.Fprintf(w, "%s sandbox running (pid %d) in %s\n", inst.Flavor, inst.PID, inst.Dir)
	fmt.Fprintf(w, "  DSN:     %s\n", inst.DSN(""))
	if inst.ExtraPort > 0 {
		fmt.Fprintf(w, "  extra:   %s   (outside the thread pool)\n", inst.ExtraDSN(""))
	}
	client := "mariadb"
	if inst.Flavor == "mysql" {
		client = "mysql"
	}
	fmt.Fprintf(w, "  connect: %s -h 127.0.0.1 -P %d -u root     (or: %s -S %s -u root)\n", client, inst.Port, client, inst.Socket)
	fmt.Fprintf(w, "  check:   gapscope check --dsn '%s'\n", inst.DSN(""))
	fmt.Fprintf(w, "  watch:   gapscope watch --dsn '%s'\n", inst.DSN(""))
	fmt.Fprintf(w, "  errors:  %s\n", inst.ErrorLog)
	fmt.Fprintf(w, "  stop:    gapscope lab down --dir %s\n", inst.Dir)
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
	cmd.Flags().StringVar(&dir, "dir", defaultLabDir(), "directory given to 'lab up'")
	return cmd
}
