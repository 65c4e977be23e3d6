package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect"
	"github.com/gapscope/gapscope/internal/sandbox"
	_ "github.com/go-sql-driver/mysql"
)

// watchServerArgs turn on the statement history watch reads.
var watchServerArgs = []string{"--performance-schema=ON",
	"--performance-schema-consumer-events-statements-current=ON",
	"--performance-schema-consumer-events-statements-history-long=ON"}

// sleepEvery runs SELECT SLEEP(0.005) every interval on one connection
// until ctx ends.
func sleepEvery(ctx context.Context, t *testing.T, dsn string, interval time.Duration) {
	db, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Error(err)
		return
	}
	defer db.Close()
	for ctx.Err() == nil {
		var v int
		_ = db.QueryRowContext(ctx, "SELECT SLEEP(0.005)").Scan(&v)
		select {
		case <-ctx.Done():
		case <-time.After(interval):
		}
	}
}

// TestWatchEventsDevFull: the events file fails its first write (a full
// disk); watch says so once, on stderr with the path, when it happens,
// goes on, prints its whole result and exits 1.
func TestWatchEventsDevFull(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: watchServerArgs})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go sleepEvery(loadCtx, t, inst.DSN(""), 20*time.Millisecond)
	out, stderr, err := runCmdSplit(ctx, "watch", "--dsn", inst.DSN(""), "--no-capture", "--no-live", "--duration", "3s",
		"--poll", "200ms", "--events", "/dev/full")
	stopLoad()
	if exitCode(err) != exitFailure {
		t.Fatalf("exit %d (%v), want 1\nstderr: %s", exitCode(err), err, stderr)
	}
	if n := linesWith(stderr+err.Error(), "/dev/full"); n != 1 || !strings.Contains(stderr, "watch goes on") {
		t.Errorf("the write error should be reported once, with its path (%d times):\n%s\nexit message: %v", n, stderr, err)
	}
	if !regexp.MustCompile(`\nserver rows [1-9][0-9]*, no wire`).MatchString(out) {
		t.Errorf("the summary does not count the server rows read:\n%s", out)
	}
	t.Logf("result:\n%s", out)
	// --no-capture: the server's profile, the wire's parts unknown.
	for _, want := range []string{"SLEEP", "watch itself:", "ranked by total server time (performance_schema), no wire",
		"# unknown (not measured, not zero): queue, send stall, delivery, client time", ", no wire: queue, delivery and client time unknown"} {
		if !strings.Contains(out, want) {
			t.Errorf("the result lacks %q after a failed write:\n%s", want, out)
		}
	}
}

// helperArgsEnv carries a re-executed test binary's gapscope arguments.
const helperArgsEnv = "GAPSCOPE_HELPER_ARGS"

// TestHelperGapscope is not a test: re-executed with helperArgsEnv set, it
// runs gapscope with those arguments (separated by \x1f: an environment variable cannot hold NUL) until it ends or is
// killed, so that a test can kill -9 a real gapscope process.
func TestHelperGapscope(t *testing.T) {
	args := os.Getenv(helperArgsEnv)
	if args == "" {
		return
	}
	root := newRootCmd(collect.NewSecrets())
	root.SetOut(os.Stdout)
	root.SetErr(os.Stderr)
	root.SetArgs(strings.Split(args, "\x1f"))
	os.Exit(exitCode(root.ExecuteContext(context.Background())))
}

// TestKilledWatchEventsReadable: a watch writing events is killed with
// SIGKILL, no chance to flush or close. The statements it saw more than a
// second before are in the file (flushed every second), and report reads
// the file, a torn last line included.
func TestKilledWatchEventsReadable(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: watchServerArgs})
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	path := filepath.Join(t.TempDir(), "killed.jsonl")
	args := []string{"watch", "--dsn", inst.DSN(""), "--no-capture", "--no-live", "--poll", "100ms", "--events", path}
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestHelperGapscope$")
	cmd.Env = append(os.Environ(), helperArgsEnv+"="+strings.Join(args, "\x1f"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go sleepEvery(loadCtx, t, inst.DSN(""), 50*time.Millisecond)
	deadline := time.Now().Add(20 * time.Second)
	for countSQL(t, path, "SLEEP") < 20 && time.Now().Before(deadline) {
		time.Sleep(100 * time.Millisecond)
	}
	stopLoad()
	_ = cmd.Process.Kill()
	_ = cmd.Wait()
	seen := countSQL(t, path, "SLEEP")
	if seen < 20 {
		t.Fatalf("a running watch left %d statements in its events file (flushed every second?)\nstderr: %s", seen, stderr.String())
	}
	page, errOut, err := runCmdSplit(ctx, "report", "--events", path, "-o", "-")
	if err != nil {
		t.Fatalf("report on a killed watch's events: %v\n%s", err, errOut)
	}
	if !strings.Contains(page, "statements") {
		t.Errorf("report lacks the statements")
	}
	t.Logf("killed watch: %d SLEEP statements in the file; report's stderr %q", seen, errOut)
}

// countSQL counts the lines of path whose text holds sub.
func countSQL(t *testing.T, path, sub string) int {
	fh, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer fh.Close()
	n := 0
	sc := bufio.NewScanner(fh)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), sub) {
			n++
		}
	}
	return n
}

// linesWith counts the lines of s that hold sub.
func linesWith(s, sub string) int {
	n := 0
	for _, line := range strings.Split(s, "\n") {
		if strings.Contains(line, sub) {
			n++
		}
	}
	return n
}

// smallDisk mounts a tmpfs of size bytes on a temp dir for the test (root
// only, as the live capture tests are).
func smallDisk(t *testing.T, size int) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("mounting a small tmpfs needs root")
	}
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput(); err != nil {
		if strings.Contains(string(out), "permission denied") || strings.Contains(string(out), "not permitted") {
			t.Skipf("this container does not let root mount a tmpfs (%s): the full-disk store test did not run", bytes.TrimSpace(out))
		}
		t.Fatalf("mount tmpfs: %v %s", err, out)
	}
	t.Cleanup(func() { _ = exec.Command("umount", "-l", dir).Run() })
	return dir
}

// fillDisk writes a file into dir until the disk is full.
func fillDisk(t *testing.T, dir string) {
	fh, err := os.Create(filepath.Join(dir, "filler"))
	if err != nil {
		t.Error(err)
		return
	}
	defer fh.Close()
	block := make([]byte, 64<<10)
	for {
		if _, err := fh.Write(block); err != nil {
			return // ENOSPC: full
		}
	}
}

// TestWatchStoreDiskFull: the disk under --store fills up during the run;
// watch says so once, with the store's path, goes on, prints its result
// and exits 1.
func TestWatchStoreDiskFull(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: watchServerArgs})
	dir := smallDisk(t, 8<<20)
	path := filepath.Join(dir, "watch.db")
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	loadCtx, stopLoad := context.WithCancel(ctx)
	defer stopLoad()
	go sleepEvery(loadCtx, t, inst.DSN(""), 10*time.Millisecond)
	go func() {
		time.Sleep(1500 * time.Millisecond) // the run is recording by then
		fillDisk(t, dir)
	}()
	out, stderr, err := runCmdSplit(ctx, "watch", "--dsn", inst.DSN(""), "--no-capture", "--no-live", "--duration", "4s",
		"--poll", "200ms", "--store", path)
	stopLoad()
	if exitCode(err) != exitFailure {
		t.Fatalf("exit %d (%v), want 1\nstderr: %s", exitCode(err), err, stderr)
	}
	if n := linesWith(stderr+err.Error(), path); n != 1 || !strings.Contains(stderr, "watch goes on") {
		t.Errorf("the store's failure should be reported once, with its path (%d times):\n%s", n, stderr)
	}
	for _, want := range []string{"SLEEP", "watch itself:", "server rows"} {
		if !strings.Contains(out, want) {
			t.Errorf("the result lacks %q after the store failed:\n%s", want, out)
		}
	}
	t.Logf("stderr: %s", stderr)
}
