//go:build linux

package capture

import (
	"testing"

	"golang.org/x/sys/unix"
)

// The program's monotonic stamps become wall time through an offset read
// between two monotonic readings: a reading the thread was descheduled in
// the middle of (its monotonic readings far apart) must not move the
// offset, or every packet read until the next wait would shift by the gap.
func TestClockOffsetIgnoresAPreemptedReading(t *testing.T) {
	saved := clockReadings
	defer func() { clockReadings = saved }()
	const wall = int64(1_795_000_000_000_000_000) // real − mono, ns
	var readings [][3]int64
	clockReadings = func() (int64, int64, int64) {
		r := readings[0]
		readings = readings[1:]
		return r[0], r[1], r[2]
	}
	s := &BPFRing{}
	readings = [][3]int64{{1_000, 1_500 + wall, 2_000}} // a tight reading
	s.clock()
	if s.offset != wall {
		t.Fatalf("offset %d, want %d", s.offset, wall)
	}
	// Descheduled for 22 ms after the first monotonic reading, three times.
	gap := int64(22_000_000)
	readings = [][3]int64{{10_000, 10_000 + gap + wall, 10_000 + gap + 500}, {20_000, 20_000 + gap + wall, 20_000 + gap + 500},
		{30_000, 30_000 + gap + wall, 30_000 + gap + 500}}
	s.clock()
	if s.offset != wall {
		t.Errorf("after three preempted readings the offset moved by %d ns", s.offset-wall)
	}
	// One preempted reading, then a tight one: the tight one is taken.
	step := int64(3_000_000) // the wall clock stepped by 3 ms
	readings = [][3]int64{{40_000, 40_000 + gap + wall, 40_000 + gap + 500}, {50_000, 50_400 + wall + step, 50_800}}
	s.clock()
	if s.offset != wall+step {
		t.Errorf("offset %d after a step, want %d", s.offset, wall+step)
	}
	if len(readings) != 0 {
		t.Errorf("%d readings left unused", len(readings))
	}
}

// The readings come from the vDSO (no system call): they must be the
// clocks the program and the kernel use, CLOCK_MONOTONIC for
// bpf_ktime_get_ns and CLOCK_REALTIME for the wall, or every packet's
// stamp would be off by the difference.
func TestClockReadingsAreTheKernelClocks(t *testing.T) {
	for range 5 {
		var before, real, after unix.Timespec
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &before)
		_ = unix.ClockGettime(unix.CLOCK_REALTIME, &real)
		m1, r, m2 := clockReadings()
		_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &after)
		if m1 < before.Nano() || m2 > after.Nano() || m2 < m1 {
			t.Fatalf("monotonic readings %d, %d outside the system calls' %d..%d", m1, m2, before.Nano(), after.Nano())
		}
		// Both wall readings lie within [before, after]: their offsets
		// from the monotonic clock differ by at most that window.
		window := after.Nano() - before.Nano()
		if d := (r - m1) - (real.Nano() - before.Nano()); d < -window-1000 || d > window+1000 {
			t.Fatalf("wall − monotonic differs by %d ns between the vDSO and the system call (window %d ns)", d, window)
		}
	}
}
