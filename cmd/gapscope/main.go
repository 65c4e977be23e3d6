// Command gapscope shows where a MySQL/MariaDB query's time goes between the
// application and the server. This package only parses flags and wires the
// internal packages together; one file per subcommand.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes (DESIGN §1).
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks errors caused by bad flags or arguments (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// subcommands lists constructors registered by each subcommand's file.
var subcommands []func() *cobra.Command

func register(f func() *cobra.Command) { subcommands = append(subcommands, f) }

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "gapscope",
		Short: "Where a MySQL/MariaDB query's time really goes, between the app and the server",
		Long: `gapscope captures MySQL/MariaDB traffic on the wire, reads performance_schema,
joins the two per statement and splits each statement's time into
request / queue / exec / send-stall / delivery, then names the cause.

Offline:  gapscope analyze capture.pcap     gapscope digest slow.log
Live:     gapscope watch --dsn DSN          gapscope check --dsn DSN
Labs:     gapscope lab threadpool           (private sandbox, no setup)`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error { return usageError{err} })
	for _, f := range subcommands {
		root.AddCommand(f())
	}
	return root
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	err := newRootCmd().ExecuteContext(ctx)
	os.Exit(exitCode(err))
}

func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	fmt.Fprintln(os.Stderr, "gapscope:", err)
	var u usageError
	if errors.As(err, &u) || isCobraUsage(err) {
		return exitUsage
	}
	return exitFailure
}

// isCobraUsage recognises cobra's own argument errors (unknown command,
// wrong number of args), which it does not type.
func isCobraUsage(err error) bool {
	msg := err.Error()
	for _, p := range []string{"unknown command", "unknown flag", "accepts ", "requires at least", "requires exactly", "invalid argument"} {
		if len(msg) >= len(p) && containsFold(msg, p) {
			return true
		}
	}
	return false
}
