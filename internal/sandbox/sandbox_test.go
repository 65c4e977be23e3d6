package sandbox

import (
	"context"
	"os"
	"strings"
	"testing"
)

func TestStartQueryStop(t *testing.T) {
	inst := ForTest(t, Options{ServerArgs: []string{"--performance-schema=ON"}})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var version, ps string
	if err := db.QueryRow("SELECT VERSION(), @@performance_schema").Scan(&version, &ps); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(strings.ToLower(version), "mariadb") && !strings.HasPrefix(version, "8") {
		t.Errorf("unexpected version %q", version)
	}
	if ps != "1" {
		t.Errorf("performance_schema = %q, want 1 (server args not applied)", ps)
	}
	dir := inst.Dir
	inst.Stop()
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("sandbox dir %s still exists after Stop", dir)
	}
}

func TestStartFailureShowsErrorLog(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	_, err := Start(context.Background(), Options{ServerArgs: []string{"--no-such-option-gapscope"}})
	if err == nil {
		t.Fatal("start with a bad option succeeded")
	}
	if !strings.Contains(err.Error(), "no-such-option-gapscope") {
		t.Errorf("error does not show the error log: %v", err)
	}
}
