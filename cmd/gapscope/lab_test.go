package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/spf13/cobra"
)

func runCmd(t *testing.T, args ...string) (string, error) {
	t.Helper()
	root := newRootCmd(collect.NewSecrets())
	var out bytes.Buffer
	root.SetOut(&out)
	root.SetErr(&out)
	root.SetArgs(args)
	err := root.ExecuteContext(context.Background())
	return out.String(), err
}

func TestLabUpDown(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "lab")
	t.Cleanup(func() { runCmd(t, "lab", "down", "--dir", dir) })
	out, err := runCmd(t, "lab", "up", "--dir", dir, "--opt=--performance-schema=ON", "--opt=--thread-handling=pool-of-threads")
	if err != nil {
		t.Fatalf("lab up: %v\n%s", err, out)
	}
	for _, want := range []string{"DSN:", "root@tcp(127.0.0.1:", "mariadb -h 127.0.0.1 -P ", "lab down --dir " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("lab up output lacks %q:\n%s", want, out)
		}
	}
	dsn := between(out, "DSN:     ", "\n")
	// check against the lab: the options were applied.
	cout, err := runCmd(t, "check", "--dsn", dsn, "--format", "json")
	if err != nil {
		t.Fatalf("check: %v\n%s", err, cout)
	}
	if !strings.Contains(cout, `"performance_schema": true`) || !strings.Contains(cout, `"thread_pool": true`) ||
		!strings.Contains(cout, `"findings": [`) {
		t.Errorf("check JSON:\n%s", cout)
	}
	// A second up on the same dir refuses.
	if _, err := runCmd(t, "lab", "up", "--dir", dir); err == nil || exitCode(err) != exitFailure {
		t.Errorf("second lab up: %v", err)
	}
	if out, err := runCmd(t, "lab", "down", "--dir", dir); err != nil || !strings.Contains(out, "stopped and removed") {
		t.Fatalf("lab down: %v %s", err, out)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("%s still exists after lab down", dir)
	}
}

func between(s, from, to string) string {
	_, rest, _ := strings.Cut(s, from)
	v, _, _ := strings.Cut(rest, to)
	return strings.TrimSpace(v)
}

func TestLabRegistersScenarios(t *testing.T) {
	saved := labScenarios
	t.Cleanup(func() { labScenarios = saved })
	registerLab(func() *cobra.Command {
		return &cobra.Command{Use: "zz-demo", RunE: func(*cobra.Command, []string) error { return nil }}
	})
	out, err := runCmd(t, "lab", "--help")
	if err != nil || !strings.Contains(out, "zz-demo") || !strings.Contains(out, "up") || !strings.Contains(out, "down") {
		t.Fatalf("lab help (%v):\n%s", err, out)
	}
}

func TestCheckUsageAndUnreachable(t *testing.T) {
	if _, err := runCmd(t, "check"); exitCode(err) != exitUsage {
		t.Errorf("check without --dsn: exit %d (%v)", exitCode(err), err)
	}
	if _, err := runCmd(t, "check", "--dsn", "x@tcp(127.0.0.1:1)/", "--format", "yaml"); exitCode(err) != exitUsage {
		t.Errorf("bad --format: exit %d", exitCode(err))
	}
	_, err := runCmd(t, "check", "--dsn", "app:hunter2@tcp(127.0.0.1:1)/", "--timeout", "3s")
	if exitCode(err) != exitFailure {
		t.Fatalf("unreachable server: exit %d (%v)", exitCode(err), err)
	}
	if strings.Contains(err.Error(), "hunter2") || !strings.Contains(err.Error(), "127.0.0.1:1") {
		t.Errorf("error = %v", err)
	}
}
