package event

import (
	"sync"
	"testing"
	"unsafe"
)

// A block comes back only when all of its statements were released, then
// zeroed, and its statements are handed out again; one whose statements
// are not all released is never reused.
func TestSlabsReuseOnlyWholeReleasedBlocks(t *testing.T) {
	p := NewSlabs()
	first := make([]*Statement, SlabLen)
	for i := range first {
		first[i] = p.New()
		first[i].SQL, first[i].Notes = "SELECT 1", []string{"a note"}
	}
	for _, s := range first[:SlabLen-1] {
		s.Release()
	}
	second := p.New() // the first block has one statement live: a new block
	if inBlock(second, first[0]) {
		t.Fatal("a block with a live statement was reused")
	}
	if first[SlabLen-1].SQL != "SELECT 1" {
		t.Fatal("the live statement was cleared")
	}
	first[0].Release() // released already: nothing happens
	if first[SlabLen-1].SQL != "SELECT 1" {
		t.Fatal("a second release of one statement counted as another's")
	}
	first[SlabLen-1].Release()
	for range SlabLen - 1 { // the rest of the second block
		p.New()
	}
	again := p.New()
	if again != first[0] {
		t.Fatalf("the released block was not reused: %p, want %p", again, first[0])
	}
	if again.SQL != "" || again.Notes != nil || again.slab == nil {
		t.Errorf("a reused statement is not zeroed: %q %v", again.SQL, again.Notes)
	}
	(&Statement{}).Release() // not from Slabs: nothing happens
}

func inBlock(s, first *Statement) bool {
	at, start := uintptr(unsafe.Pointer(s)), uintptr(unsafe.Pointer(first))
	return at >= start && at < start+SlabLen*unsafe.Sizeof(Statement{})
}

// Statements released from other goroutines while New runs are never
// handed out while still held (run with -race).
func TestSlabsConcurrentRelease(t *testing.T) {
	p := NewSlabs()
	var mu sync.Mutex
	live := map[*Statement]bool{}
	ch := make(chan *Statement, 256)
	var wg sync.WaitGroup
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for s := range ch {
				if s.ConnID == 0 {
					t.Error("a statement was cleared while held")
				}
				mu.Lock()
				delete(live, s)
				mu.Unlock()
				s.Release()
			}
		}()
	}
	for i := range 100_000 {
		s := p.New()
		mu.Lock()
		if live[s] {
			t.Fatalf("statement %d handed out while held", i)
		}
		live[s] = true
		mu.Unlock()
		if s.ConnID != 0 {
			t.Fatalf("statement %d handed out not zeroed", i)
		}
		s.ConnID = uint64(i + 1)
		ch <- s
	}
	close(ch)
	wg.Wait()
}

// The block fills the allocator's 6,784-byte size class: a statement
// grown past it makes every block a class larger.
func TestSlabFitsItsSizeClass(t *testing.T) {
	if n := unsafe.Sizeof(slab{}); n > 6784 {
		t.Errorf("a block is %d bytes, past the 6,784-byte size class", n)
	}
}
