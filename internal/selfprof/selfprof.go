// Package selfprof profiles gapscope itself (watch --cpuprofile and
// --memprofile), to measure what it costs.
package selfprof

import (
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime"
	"runtime/pprof"
	"sync"
	"syscall"
)

// Heap writes a heap profile to path.N on each SIGUSR1 and to
// path when the returned stop runs (at exit). Each write follows a GC, so
// the in-use figures are the live heap at that moment.
func Heap(path string, errOut io.Writer) (stop func()) {
	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for n := 1; ; n++ {
			select {
			case <-done:
				return
			case <-usr1:
				if err := writeHeapProfile(fmt.Sprintf("%s.%d", path, n)); err != nil {
					fmt.Fprintf(errOut, "warning: %v\n", err)
				}
			}
		}
	}()
	return func() {
		signal.Stop(usr1)
		close(done)
		wg.Wait()
		if err := writeHeapProfile(path); err != nil {
			fmt.Fprintf(errOut, "warning: %v\n", err)
		}
	}
}

func writeHeapProfile(path string) error {
	pf, err := os.Create(path)
	if err != nil {
		return fmt.Errorf("creating heap profile: %w", err)
	}
	runtime.GC()
	err = pprof.Lookup("heap").WriteTo(pf, 0)
	if cerr := pf.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("writing heap profile %s: %w", path, err)
	}
	return nil
}

// CPU profiles gapscope until the returned function runs.
func CPU(path string) (stop func(), err error) {
	pf, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("creating CPU profile: %w", err)
	}
	if err := pprof.StartCPUProfile(pf); err != nil {
		pf.Close()
		return nil, fmt.Errorf("starting CPU profile: %w", err)
	}
	return func() { pprof.StopCPUProfile(); pf.Close() }, nil
}
