package main

import (
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

func init() { register(newManPagesCmd) }

// newManPagesCmd writes a man page per command (gapscope.1,
// gapscope-watch.1, ...) from the commands' own help, for packages: hidden,
// it is a build step, not something a user runs.
func newManPagesCmd() *cobra.Command {
	return &cobra.Command{
		Use:    "man-pages DIR",
		Short:  "Write a man page per command into DIR (for packaging)",
		Hidden: true,
		Args:   cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			return writeManPages(c.Root(), args[0])
		},
	}
}

// writeManPages dates the pages by $SOURCE_DATE_EPOCH when set, so that a
// package built twice from one commit holds the same pages.
func writeManPages(root *cobra.Command, dir string) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	date := time.Now()
	if s := os.Getenv("SOURCE_DATE_EPOCH"); s != "" {
		sec, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return usagef("SOURCE_DATE_EPOCH must be seconds since 1970, not %q", s)
		}
		date = time.Unix(sec, 0).UTC()
	}
	root.DisableAutoGenTag = true
	preformatLong(root)
	header := &doc.GenManHeader{Section: "1", Date: &date,
		Source: "gapscope " + versionString(), Manual: "gapscope manual"}
	if err := doc.GenManTree(root, header, dir); err != nil {
		return fmt.Errorf("man pages: %w", err)
	}
	return nil
}

// preformatLong keeps the indented or column-aligned lines of each
// command's Long (the five parts listed one a line, a command per line) as
// they are: the man
// generator reads Long as markdown, which would run them into one
// paragraph.
func preformatLong(c *cobra.Command) {
	c.Long = fenceIndented(c.Long)
	for _, sub := range c.Commands() {
		preformatLong(sub)
	}
}

func fenceIndented(s string) string {
	var b strings.Builder
	in := false
	for _, line := range strings.Split(s, "\n") {
		indented := strings.HasPrefix(line, " ") || strings.HasPrefix(line, "\t") || strings.Contains(line, "   ")
		if indented != in {
			if in {
				b.WriteString("```\n\n")
			} else {
				b.WriteString("\n```\n")
			}
			in = indented
		}
		b.WriteString(line + "\n")
	}
	if in {
		b.WriteString("```\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
