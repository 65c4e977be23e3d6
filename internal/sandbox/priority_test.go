package sandbox

import (
	"os"
	"strconv"
	"strings"
	"syscall"
	"testing"
)

// threadNices returns the nice value of every thread of this process.
func threadNices(t *testing.T) map[int]int {
	t.Helper()
	tasks, err := os.ReadDir("/proc/self/task")
	if err != nil {
		t.Fatal(err)
	}
	out := map[int]int{}
	for _, e := range tasks {
		tid, _ := strconv.Atoi(e.Name())
		if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err == nil {
			out[tid] = 20 - p
		}
	}
	return out
}

// TestRaiseProcessPriority: every thread runs at the nice asked for, and
// restore puts every thread back; a sandbox started from a raised process
// runs at that nice, not twice as far (nice(1) is relative).
func TestRaiseProcessPriority(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lowering nice needs root")
	}
	orig := ownNice()
	restore, err := RaiseProcessPriority(orig - 3)
	if err != nil {
		t.Fatal(err)
	}
	for tid, n := range threadNices(t) {
		if n != orig-3 {
			t.Errorf("thread %d at nice %d, want %d", tid, n, orig-3)
		}
	}
	if !testing.Short() {
		inst := ForTest(t, Options{Nice: orig - 3})
		b, err := os.ReadFile("/proc/" + strconv.Itoa(inst.PID) + "/stat")
		if err != nil {
			t.Fatal(err)
		}
		if n := statNice(string(b)); n != orig-3 {
			t.Errorf("sandbox at nice %d, want %d", n, orig-3)
		}
	}
	restore()
	for tid, n := range threadNices(t) {
		if n != orig {
			t.Errorf("thread %d at nice %d after restore, want %d", tid, n, orig)
		}
	}
}

// statNice reads the nice field (19th) of /proc/PID/stat, counting from
// the state after the command name in parentheses (field 3).
func statNice(stat string) int {
	fields := strings.Fields(stat[strings.LastIndexByte(stat, ')')+1:])
	n, _ := strconv.Atoi(fields[19-3])
	return n
}
