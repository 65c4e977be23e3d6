package web

// stepRing keeps the window's 10-second steps, each a map of cells by key:
// the statements' history and the transactions' are both one. A slot is
// taken over by a newer step once its own is older than the window.
type stepRing[K comparable, C any] struct {
	steps  [nSteps + 1]ringStep[K, C]
	newest int64 // the newest step index seen
}

type ringStep[K comparable, C any] struct {
	idx   int64 // Unix time / stepUS; 0: unused
	cells map[K]*C
}

// slot returns the cells of step idx to count in, a new step taking over
// the slot of an older one; nil when idx is older than the ring keeps, or
// its slot holds a newer step.
func (r *stepRing[K, C]) slot(idx int64) map[K]*C {
	if idx <= r.newest-int64(len(r.steps)) {
		return nil
	}
	r.newest = max(r.newest, idx)
	st := &r.steps[idx%int64(len(r.steps))]
	if st.idx != idx {
		if st.idx > idx {
			return nil
		}
		*st = ringStep[K, C]{idx: idx, cells: make(map[K]*C, len(st.cells))}
	}
	return st.cells
}

// step returns the cells of step idx, false when the ring does not hold it
// (nothing was counted then, or it is past).
func (r *stepRing[K, C]) step(idx int64) (map[K]*C, bool) {
	st := &r.steps[idx%int64(len(r.steps))]
	return st.cells, st.idx == idx
}
