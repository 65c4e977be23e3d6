package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

func init() { register(newVersionCmd) }

func newVersionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print gapscope's version (also: gapscope --version)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			_, err := fmt.Fprintln(cmd.OutOrStdout(), "gapscope", versionString())
			return err
		},
	}
}

// versionString is the module version the binary was built at ("v1.2.0" from
// go install, a pseudo-version or "(devel)" from a checkout), with the VCS
// revision and a "+modified" mark when the build recorded them and the
// version does not already hold them.
func versionString() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "(unknown: built without module information)"
	}
	return describeBuild(bi)
}

// buildRevision is set by the Makefile's linker flags, for builds where go
// records no VCS information (a git worktree): "0123456789ab[+modified]".
var buildRevision string

func describeBuild(bi *debug.BuildInfo) string {
	v := bi.Main.Version
	if v == "" {
		v = "(devel)"
	}
	var rev, modified, at string
	for _, s := range bi.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		case "vcs.time":
			at = s.Value
		}
	}
	if rev == "" {
		if buildRevision != "" {
			return v + " " + buildRevision
		}
		return v
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if modified == "true" {
		rev += "+modified"
	}
	if strings.Contains(v, rev[:12]) {
		// A pseudo-version (go 1.24+ derives one from the VCS) already
		// holds the revision and its time; go marks it +dirty when modified.
		return v
	}
	if at != "" {
		return fmt.Sprintf("%s %s (%s)", v, rev, at)
	}
	return v + " " + rev
}
