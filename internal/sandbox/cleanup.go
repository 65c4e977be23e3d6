package sandbox

import (
	"os"
	"os/signal"
	"sync"
	"syscall"
)

// live holds the instances ForTest started, so that an interrupted test run
// (Ctrl-C, SIGTERM from a CI timeout) still stops them and removes their
// dirs: t.Cleanup does not run when the test binary is signalled.
var live = struct {
	sync.Mutex
	set  map[*Instance]bool
	once sync.Once
}{set: map[*Instance]bool{}}

func track(inst *Instance) {
	live.once.Do(func() {
		ch := make(chan os.Signal, 1)
		signal.Notify(ch, os.Interrupt, syscall.SIGTERM)
		go func() {
			sig := <-ch
			stopAllTracked()
			signal.Stop(ch)
			if s, ok := sig.(syscall.Signal); ok {
				os.Exit(128 + int(s))
			}
			os.Exit(1)
		}()
	})
	live.Lock()
	live.set[inst] = true
	live.Unlock()
}

func untrack(inst *Instance) {
	live.Lock()
	delete(live.set, inst)
	live.Unlock()
}

func stopAllTracked() {
	live.Lock()
	insts := make([]*Instance, 0, len(live.set))
	for inst := range live.set {
		insts = append(insts, inst)
	}
	live.Unlock()
	var wg sync.WaitGroup
	for _, inst := range insts {
		wg.Add(1)
		go func() { defer wg.Done(); _ = inst.Stop() }()
	}
	wg.Wait()
}
