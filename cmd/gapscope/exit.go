package main

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes, as the README states them.
const (
	exitOK      = 0
	exitFailure = 1
	exitUsage   = 2
)

// usageError marks errors caused by bad flags or arguments (exit 2).
type usageError struct{ err error }

func (u usageError) Error() string { return u.err.Error() }
func (u usageError) Unwrap() error { return u.err }

// UsageError is the mark exitCode looks for; other packages (the DSN parser)
// give their errors the same method so that a mistyped DSN is bad usage too.
func (u usageError) UsageError() bool { return true }

func usagef(format string, a ...any) error { return usageError{fmt.Errorf(format, a...)} }

// usageMarked is what a usage error of any package implements.
type usageMarked interface{ UsageError() bool }

// exitCode maps an error to the exit code by its type only: the text of an
// error (a wrapped EINVAL says "invalid argument") never decides it.
func exitCode(err error) int {
	if err == nil {
		return exitOK
	}
	var u usageMarked
	if errors.As(err, &u) && u.UsageError() {
		return exitUsage
	}
	return exitFailure
}

// typeArgErrors makes every command's positional-argument check return a
// usage error: cobra's validators (NoArgs, MinimumNArgs...) return plain
// errors.
func typeArgErrors(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		// A group (completion): cobra would print its help for an unknown
		// subcommand and exit 0.
		c.Args = rootArgs
		c.RunE = func(c *cobra.Command, _ []string) error { return c.Help() }
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil {
				return usageError{err}
			}
			return nil
		}
	}
	for _, sub := range c.Commands() {
		typeArgErrors(sub)
	}
}

// rootArgs refuses any word that is not a subcommand of c, with cobra's
// suggestions.
func rootArgs(c *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], c.CommandPath())
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		msg += "; did you mean " + strings.Join(s, " or ") + "?"
	}
	return usagef("%s", msg)
}

// lowerFormatFlag lower-cases the command's --format value, if it has one,
// before the command validates it.
func lowerFormatFlag(c *cobra.Command) error {
	f := c.Flags().Lookup("format")
	if f == nil || !f.Changed {
		return nil
	}
	if low := strings.ToLower(f.Value.String()); low != f.Value.String() {
		return f.Value.Set(low)
	}
	return nil
}
