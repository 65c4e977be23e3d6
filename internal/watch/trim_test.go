package watch

import (
	"slices"
	"testing"
)

// TestTrimPlan: history goes off for the connections newly out, back on
// only for those watch itself turned off once they are followed again,
// and connections that closed (or were found off already and are now
// followed) are forgotten.
func TestTrimPlan(t *testing.T) {
	open := func(ids ...uint64) func(uint64) bool {
		return func(id uint64) bool { return slices.Contains(ids, id) }
	}
	set := func(ids ...uint64) map[uint64]bool {
		m := map[uint64]bool{}
		for _, id := range ids {
			m[id] = true
		}
		return m
	}
	// First sync: 2, 3 and 4 out (4 already closed), 1 followed.
	off, on, gone := trimPlan(map[uint64]bool{}, set(2, 3, 4), open(1, 2, 3))
	if !slices.Equal(off, []uint64{2, 3}) || len(on) != 0 || len(gone) != 0 {
		t.Fatalf("first sync: off %v on %v gone %v, want off [2 3]", off, on, gone)
	}
	// Watch turned 2 off; 3 was off already. Nothing changed: nothing to do.
	done := map[uint64]bool{2: true, 3: false}
	off, on, gone = trimPlan(done, set(2, 3), open(1, 2, 3))
	if len(off)+len(on)+len(gone) != 0 {
		t.Fatalf("unchanged sample: off %v on %v gone %v, want nothing", off, on, gone)
	}
	// The sample grew: 2 and 3 followed again, 5 opened and is out; 3 is
	// left off (the DBA's), and forgotten so that it is judged anew later.
	off, on, gone = trimPlan(done, set(5), open(1, 2, 3, 5))
	if !slices.Equal(off, []uint64{5}) || !slices.Equal(on, []uint64{2}) || !slices.Equal(gone, []uint64{3}) {
		t.Fatalf("grown sample: off %v on %v gone %v, want off [5] on [2] gone [3]", off, on, gone)
	}
	// 2 closed while out: forgotten, no statement for a thread that is gone.
	off, on, gone = trimPlan(map[uint64]bool{2: true}, set(2), open(1))
	if len(off)+len(on) != 0 || !slices.Equal(gone, []uint64{2}) {
		t.Fatalf("closed connection: off %v on %v gone %v, want gone [2]", off, on, gone)
	}
}

func TestHistoryTrimActive(t *testing.T) {
	tr := historyTrim{off: map[uint64]bool{3: false}}
	if tr.active() {
		t.Error("active with no history turned off by watch")
	}
	tr.off[2], tr.ours = true, 1
	if !tr.active() {
		t.Error("not active with connection 2's history turned off by watch")
	}
	tr.forgetOne(3)
	if !tr.active() {
		t.Error("forgetting a connection watch left alone made it inactive")
	}
	tr.forgetOne(2)
	if tr.active() {
		t.Error("still active once the only connection it turned off is forgotten")
	}
	tr.off[5], tr.ours = true, 1
	tr.forget()
	if tr.active() {
		t.Error("still active after the server restarted")
	}
}
