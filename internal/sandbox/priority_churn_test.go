package sandbox

import (
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// TestRestoreCatchesThreadsBeingCreated: while goroutines keep making the
// runtime start new threads, restore leaves no thread at the raised nice.
// A thread cloned from a raised creator appears in /proc/self/task only
// after it copied the creator's nice; without the pause between passes
// this failed in about 1 run in 5.
func TestRestoreCatchesThreadsBeingCreated(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("lowering nice needs root")
	}
	orig := ownNice()
	var stop atomic.Bool
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !stop.Load() {
				done := make(chan struct{})
				go func() {
					// A goroutine that exits locked takes its thread with it,
					// so the runtime keeps creating threads.
					runtime.LockOSThread()
					close(done)
				}()
				<-done
			}
		}()
	}
	bad := 0
	for range 100 {
		restore, err := RaiseProcessPriority(orig - 3)
		if err != nil {
			stop.Store(true)
			wg.Wait()
			t.Fatal(err)
		}
		restore()
		for tid, n := range threadNices(t) {
			if n != orig {
				bad++
				t.Logf("thread %d at nice %d after restore", tid, n)
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if bad > 0 {
		t.Errorf("%d threads left at the raised nice after restore", bad)
	}
}
