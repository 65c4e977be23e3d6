package sandbox

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
)

// A persistent sandbox is found again from its dir by another process
// (LoadState), answers on the recorded port, and StopDir stops it and
// removes the dir.
func TestPersistentSandbox(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	dir := filepath.Join(t.TempDir(), "lab")
	inst, err := Start(context.Background(), Options{Dir: dir, Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = StopDir(dir) })
	again, err := LoadState(dir)
	if err != nil {
		t.Fatal(err)
	}
	if again.PID != inst.PID || again.Port != inst.Port || again.Flavor != "mariadb" {
		t.Errorf("state = %+v, want pid %d port %d", again, inst.PID, inst.Port)
	}
	db, err := again.Open("")
	if err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err != nil {
		t.Fatalf("recorded DSN does not answer: %v", err)
	}
	db.Close()
	if err := StopDir(dir); err != nil {
		t.Fatal(err)
	}
	if alive(inst.PID) {
		t.Errorf("server pid %d still alive after StopDir", inst.PID)
	}
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("dir %s still exists", dir)
	}
	if _, err := LoadState(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("LoadState after StopDir: %v", err)
	}
	if err := StopDir(dir); !errors.Is(err, ErrNotRunning) {
		t.Errorf("second StopDir: %v", err)
	}
}

// StopDir refuses to remove a directory that is not a sandbox.
func TestStopDirRefusesForeignDir(t *testing.T) {
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "precious.txt"), []byte("x"), 0o600)
	if err := StopDir(dir); err == nil {
		t.Fatal("StopDir removed a non-sandbox dir")
	}
	if _, err := os.Stat(filepath.Join(dir, "precious.txt")); err != nil {
		t.Fatal("file removed")
	}
}

// Asking for MySQL where only MariaDB is installed skips, and says why.
func TestFlavorMySQL(t *testing.T) {
	_, flavor, err := FindServerFlavor("mysql")
	if errors.Is(err, ErrNoServer) {
		t.Skipf("no MySQL server installed (Debian's mysqld is MariaDB): %v", err)
	}
	if err != nil || flavor != "mysql" {
		t.Fatalf("FindServerFlavor(mysql) = %q, %v", flavor, err)
	}
	inst := ForTest(t, Options{Flavor: "mysql"})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var v string
	if err := db.QueryRow("SELECT VERSION()").Scan(&v); err != nil {
		t.Fatal(err)
	}
}

// A relative --dir works: mariadb-install-db would resolve it against the
// server's basedir (/usr) and fail.
func TestRelativeDir(t *testing.T) {
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	t.Chdir(t.TempDir())
	inst, err := Start(context.Background(), Options{Dir: "lab", Persistent: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = StopDir("lab") })
	if !filepath.IsAbs(inst.DataDir) {
		t.Errorf("datadir %q is not absolute", inst.DataDir)
	}
	if err := StopDir("lab"); err != nil {
		t.Fatal(err)
	}
}
