package sandbox

import (
	"fmt"
	"os"
	"strconv"
	"syscall"
	"time"
)

// LabNice is the nice value labs run their sandbox and themselves at: on a
// host busy with other work (two CPU hogs on 2 cores, or other engineers'
// tests at load 12-15) the server's threads and the lab's clients were
// kept off the CPU for tens of milliseconds at a time, noise that a lab
// measuring a thread pool's queue or an instrument's cost must not
// mistake for what it measures. -10 outweighs a nice-0 task 9 to 1 in
// the scheduler.
const LabNice = -10

// RaiseProcessPriority sets every thread of this process to nice (Linux
// nice values are per thread; threads created later inherit their
// creator's) and returns a function that puts every thread back at the
// value the process had. Lowering nice needs root (CAP_SYS_NICE): without
// it the error says so and nothing changed.
func RaiseProcessPriority(nice int) (restore func(), err error) {
	// The raw system call returns 20 - nice.
	before, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return func() {}, fmt.Errorf("sandbox: reading this process's priority: %w", err)
	}
	orig := 20 - before
	if orig <= nice {
		return func() {}, nil
	}
	if err := setAllThreads(nice); err != nil {
		_ = setAllThreads(orig)
		return func() {}, err
	}
	return func() { _ = setAllThreads(orig) }, nil
}

// setAllThreads sets every thread to nice. A thread being created copies
// its creator's nice before it shows in /proc/self/task, so a creator
// changed in one pass can leave a child at the old value that a pass run
// at once does not list yet (CI saw one thread left raised after
// restore). So every pass that changed a thread is followed, a pause
// later, by another, and it stops at the first that changes nothing.
func setAllThreads(nice int) error {
	for range 20 {
		tasks, err := os.ReadDir("/proc/self/task")
		if err != nil {
			return fmt.Errorf("sandbox: listing this process's threads: %w", err)
		}
		changed := false
		for _, t := range tasks {
			tid, err := strconv.Atoi(t.Name())
			if err != nil {
				continue
			}
			if p, err := syscall.Getpriority(syscall.PRIO_PROCESS, tid); err == nil && 20-p == nice {
				continue
			}
			changed = true
			if err := syscall.Setpriority(syscall.PRIO_PROCESS, tid, nice); err != nil && err != syscall.ESRCH {
				return fmt.Errorf("sandbox: setting nice %d: %w", nice, err)
			}
		}
		if !changed {
			return nil
		}
		time.Sleep(2 * time.Millisecond)
	}
	return nil
}

// ownNice is the calling thread's nice value (0 when unknown).
func ownNice() int {
	p, err := syscall.Getpriority(syscall.PRIO_PROCESS, 0)
	if err != nil {
		return 0
	}
	return 20 - p
}
