// Command gapscope shows where a MySQL/MariaDB query's time goes between the
// application and the server. This package only parses flags and wires the
// internal packages together; one file per subcommand.
package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	secrets := collect.NewSecrets()
	// The driver has one logger for the process: its messages are masked
	// with the passwords this command line gives.
	if err := collect.LogDriverTo(os.Stderr, secrets); err != nil {
		fmt.Fprintln(os.Stderr, "gapscope:", err)
	}
	code := run(ctx, secrets, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes one command line and returns its exit code; the error, if
// any, goes to stderr with every secret the command learned masked.
func run(ctx context.Context, secrets *collect.Secrets, args []string, stdout, stderr io.Writer) int {
	root := newRootCmd(secrets)
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err != nil {
		fmt.Fprintln(stderr, "gapscope:", secrets.Mask(err.Error()))
	}
	return exitCode(err)
}

// subcommands lists constructors registered by each subcommand's file; each
// is given the registry of the passwords the command line gives.
var subcommands []func(*collect.Secrets) *cobra.Command

// register adds a subcommand that connects to no server.
func register(f func() *cobra.Command) {
	subcommands = append(subcommands, func(*collect.Secrets) *cobra.Command { return f() })
}

// registerConnecting adds a subcommand that connects, through secrets.
func registerConnecting(f func(*collect.Secrets) *cobra.Command) {
	subcommands = append(subcommands, f)
}

func newRootCmd(secrets *collect.Secrets) *cobra.Command {
	root := &cobra.Command{
		Use:   "gapscope",
		Short: "Where a MySQL/MariaDB query's time really goes, between the app and the server",
		Long: `gapscope captures MySQL/MariaDB traffic on the wire, reads performance_schema,
joins the two per statement and splits each statement's time into
request / queue / exec / send-stall / delivery, then names the cause.

Offline:  gapscope analyze capture.pcap     gapscope digest slow.log
Live:     gapscope watch --dsn DSN          gapscope check --dsn DSN
Labs:     gapscope lab threadpool           (private sandbox, no setup)`,
		Version:       versionString(),
		SilenceUsage:  true,
		SilenceErrors: true,
		// A root with subcommands and no Args lets cobra report an unknown
		// command as an untyped error; this validator types it.
		Args: rootArgs,
		RunE: func(c *cobra.Command, _ []string) error { return c.Help() },
		// Every command accepts --format in any case: json, JSON, Json.
		PersistentPreRunE: func(c *cobra.Command, _ []string) error { return lowerFormatFlag(c) },
	}
	root.SetVersionTemplate("gapscope {{.Version}}\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	for _, f := range subcommands {
		root.AddCommand(f(secrets))
	}
	root.InitDefaultHelpCmd()
	strictHelp(root)
	root.InitDefaultCompletionCmd()
	typeArgErrors(root)
	return root
}

// strictHelp makes `gapscope help TOPIC` a usage error when TOPIC names no
// command (cobra prints the root's help and exits 0).
func strictHelp(root *cobra.Command) {
	h, _, err := root.Find([]string{"help"})
	if err != nil || h == root {
		return
	}
	h.Run = nil
	h.RunE = func(_ *cobra.Command, args []string) error {
		target, rest, err := root.Find(args)
		if err != nil || len(rest) > 0 {
			return usagef("no help topic %q: gapscope help lists the commands", strings.Join(args, " "))
		}
		return target.Help()
	}
}
