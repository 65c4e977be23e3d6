package sandbox

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"
)

// Child is the running test binary re-run as a process of its own, to run
// one test alone: what a test measures of it (RSS, CPU) is then the
// child's own, not the sum of every test the parent ran before.
type Child struct {
	Cmd *exec.Cmd
	// Lines are the child's stdout lines after its ready line, closed when
	// it ends (the first 256 are buffered: a child that prints more
	// blocks until they are read).
	Lines <-chan string
}

// StartChild re-runs the test binary to run test alone with env added to
// the environment (the child tells it is the child from it), waits for the
// child to print the line ready on stdout, and kills it when t ends.
func StartChild(t testing.TB, test string, env []string, ready string) *Child {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^"+test+"$", "-test.count=1", "-test.timeout=15m")
	cmd.Env = append(os.Environ(), env...)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	up, lines := make(chan bool, 1), make(chan string, 256)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if sc.Text() == ready {
				up <- true
				continue
			}
			lines <- sc.Text()
		}
		up <- false
	}()
	select {
	case ok := <-up:
		if !ok {
			t.Fatal("the child process ended before it was ready")
		}
	case <-time.After(time.Minute):
		t.Fatal("the child process did not get ready within a minute")
	}
	return &Child{Cmd: cmd, Lines: lines}
}

// StatusKB reads a kB field of /proc/PID/status ("VmRSS:", "VmHWM:"); 0
// when the process or the field is not there.
func StatusKB(pid int, field string) int64 {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0
	}
	for l := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(l, field); ok {
			n, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return n
		}
	}
	return 0
}
