package lab

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/sandbox"
)

// DefaultDir is where `lab up` keeps its sandbox unless --dir says.
func DefaultDir() string {
	if d := os.Getenv("XDG_RUNTIME_DIR"); d != "" {
		return filepath.Join(d, "gapscope-lab")
	}
	return filepath.Join(os.TempDir(), "gapscope-lab")
}

// SetsPerfSchema reports whether the user turned performance_schema itself
// on or off (not one of its sizing options, which we keep beside ours).
func SetsPerfSchema(opts []string) bool {
	for _, o := range opts {
		name, _, _ := strings.Cut(strings.ReplaceAll(o, "_", "-"), "=")
		if name == "--performance-schema" || name == "--skip-performance-schema" {
			return true
		}
	}
	return false
}

// WatchReadyArgs are what `lab up` turns on unless --bare or the user set
// performance_schema: the statement history watch joins (the scenarios'
// psArgs), with a ring large enough for a busy sandbox between two polls.
var WatchReadyArgs = append(slices.Clone(psArgs), "--performance-schema-events-statements-history-long-size=10000")

// Up starts the persistent sandbox of `lab up` in dir, refusing when one
// runs there already.
func Up(ctx context.Context, dir string, opts sandbox.Options) (*sandbox.Instance, error) {
	if inst, err := sandbox.LoadState(dir); err == nil {
		return nil, fmt.Errorf("a lab sandbox already runs in %s (%s); stop it first with: gapscope lab down --dir %s",
			dir, inst.DSN(""), dir)
	}
	// A dir left by a killed server or an interrupted start: clear it.
	if err := sandbox.StopDir(dir); err != nil && !errors.Is(err, sandbox.ErrNotRunning) {
		return nil, err
	}
	opts.Dir = dir
	inst, err := sandbox.Start(ctx, opts)
	if err != nil {
		// Interrupted (Ctrl-C) or failed: leave nothing behind.
		_ = sandbox.StopDir(dir)
		return nil, err
	}
	return inst, nil
}

// PrintUp says how to connect to the sandbox Up started, and how to stop it.
func PrintUp(w io.Writer, inst *sandbox.Instance) {
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
