package sandbox

import (
	"context"
	"errors"
	"testing"
)

// ForTest starts a sandbox for a test and stops it when the test ends. It
// skips the test under -short (sandbox tests are end-to-end tests) and fails
// it when no server binary is installed, so a missing server is never
// mistaken for a pass. Asking for a specific Flavor ("mysql") skips when that
// flavour is not installed: it is an optional configuration. An interrupted
// test run (SIGINT/SIGTERM) still stops the server and removes its dir.
func ForTest(t testing.TB, opts Options) *Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	inst, err := Start(context.Background(), opts)
	if opts.Flavor != "" && errors.Is(err, ErrNoServer) {
		t.Skipf("sandbox test: %v", err)
	}
	if err != nil {
		t.Fatalf("starting sandbox: %v", err)
	}
	track(inst)
	t.Cleanup(func() { _ = inst.Stop() })
	return inst
}
