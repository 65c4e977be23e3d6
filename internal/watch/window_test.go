package watch

import (
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

// TestStmtRing checks the window keeps the newest statements in arrival
// order across chunk boundaries and wrap-arounds, for sizes on both sides
// of a chunk.
func TestStmtRing(t *testing.T) {
	for _, size := range []int{1, 7, ringChunk - 1, ringChunk, ringChunk + 1, 2*ringChunk + 300} {
		for _, added := range []int{0, 1, size - 1, size, size + 1, 3*size + 5} {
			r := newStmtRing(size)
			for i := range added {
				r.add(&event.Statement{Parts: event.Parts{ClientUS: int64(i)}})
			}
			held := min(added, size)
			if r.len() != held {
				t.Fatalf("size %d after %d: len %d, want %d", size, added, r.len(), held)
			}
			all := r.last(size + 10)
			if len(all) != held {
				t.Fatalf("size %d after %d: last returned %d, want %d", size, added, len(all), held)
			}
			for j, s := range all {
				if want := int64(added - held + j); s.ClientUS != want {
					t.Fatalf("size %d after %d: statement %d is #%d, want #%d", size, added, j, s.ClientUS, want)
				}
			}
			if tail := r.last(3); len(tail) > 0 && tail[len(tail)-1].ClientUS != int64(added-1) {
				t.Fatalf("size %d after %d: newest is #%d, want #%d", size, added, tail[len(tail)-1].ClientUS, added-1)
			}
			if got := len(r.chunks); got > (size+ringChunk-1)/ringChunk {
				t.Fatalf("size %d: %d chunks", size, got)
			}
		}
	}
}
