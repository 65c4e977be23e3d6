package watch

import "github.com/gapscope/gapscope/internal/event"

// stmtRing keeps the last size statements for the diagnosis. It grows in
// fixed chunks and never copies what it holds: a slice grown by append to
// 50k statements moved every statement about twice while watch started
// (runtime.memmove under growslice was 11-14% of watch's CPU in a profile
// of the first 20 s under sysbench). It holds the statements themselves,
// not copies: they are finished when they reach the sink, and nothing
// after it writes them, so a copy of each one would only cost its bytes.
type stmtRing struct {
	chunks [][]*event.Statement
	size   int
	added  int64
}

// ringChunk is how many statements one chunk holds.
const ringChunk = 1024

func newStmtRing(size int) *stmtRing { return &stmtRing{size: max(size, 1)} }

func (r *stmtRing) add(s *event.Statement) {
	i := int(r.added % int64(r.size))
	c := i / ringChunk
	if c == len(r.chunks) { // slots fill in order before they wrap
		r.chunks = append(r.chunks, make([]*event.Statement, min(ringChunk, r.size-c*ringChunk)))
	}
	r.chunks[c][i%ringChunk] = s
	r.added++
}

// len is how many statements the ring holds.
func (r *stmtRing) len() int { return int(min(r.added, int64(r.size))) }

// at returns the j-th oldest statement held.
func (r *stmtRing) at(j int) *event.Statement {
	first := 0
	if r.added > int64(r.size) {
		first = int(r.added % int64(r.size))
	}
	i := (first + j) % r.size
	return r.chunks[i/ringChunk][i%ringChunk]
}

// last returns copies of the newest n statements, oldest first.
func (r *stmtRing) last(n int) []event.Statement {
	held := r.len()
	n = min(n, held)
	out := make([]event.Statement, 0, n)
	for j := held - n; j < held; j++ {
		out = append(out, *r.at(j))
	}
	return out
}
