package selfprof

import (
	"bytes"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

func TestCPUAndHeapWriteProfiles(t *testing.T) {
	dir := t.TempDir()
	stop, err := CPU(filepath.Join(dir, "cpu.prof"))
	if err != nil {
		t.Fatal(err)
	}
	stop()
	var warnings bytes.Buffer
	heap := filepath.Join(dir, "heap.prof")
	stopHeap := Heap(heap, &warnings)
	if err := syscall.Kill(os.Getpid(), syscall.SIGUSR1); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		if st, err := os.Stat(heap + ".1"); err == nil && st.Size() > 0 {
			break
		}
	}
	stopHeap()
	for _, name := range []string{"cpu.prof", "heap.prof.1", "heap.prof"} {
		if st, err := os.Stat(filepath.Join(dir, name)); err != nil || st.Size() == 0 {
			t.Errorf("%s: %v (empty or missing)", name, err)
		}
	}
	if warnings.Len() > 0 {
		t.Errorf("warnings: %s", warnings.String())
	}
	if _, err := CPU(filepath.Join(dir, "absent", "cpu.prof")); err == nil {
		t.Error("a CPU profile in a missing directory: no error")
	}
}
