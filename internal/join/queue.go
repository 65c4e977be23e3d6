package join

// fifo is a slice-backed first-in first-out queue that reuses its storage:
// pushes and pops allocate nothing once the backing array has grown to the
// working-set size, which keeps the joiner's hot path allocation-free.
type fifo[T any] struct {
	items []T
	head  int
}

func (q *fifo[T]) len() int { return len(q.items) - q.head }

func (q *fifo[T]) push(v T) { q.items = append(q.items, v) }

// at returns a pointer to the i-th element from the front.
func (q *fifo[T]) at(i int) *T { return &q.items[q.head+i] }

func (q *fifo[T]) front() *T { return &q.items[q.head] }

func (q *fifo[T]) back() *T { return &q.items[len(q.items)-1] }

// pop removes the front element. The slot is zeroed so that the queue does
// not keep statements alive after they were emitted.
// fifoKeep is the capacity a drained queue keeps for the next items; a
// larger array, grown by a burst, is released.
const fifoKeep = 4096

func (q *fifo[T]) pop() T {
	var zero T
	v := q.items[q.head]
	q.items[q.head] = zero
	q.head++
	if q.head == len(q.items) {
		if cap(q.items) > fifoKeep {
			q.items = nil // a burst's array is not kept once it drained
		}
		q.items, q.head = q.items[:0], 0
	} else if q.head >= 64 && q.head*2 >= len(q.items) {
		n := copy(q.items, q.items[q.head:])
		clear(q.items[n:])
		q.items, q.head = q.items[:n], 0
	}
	return v
}

// sortBack moves the last element back past elements that sort after it;
// arrivals are almost always in order, so this is O(1) in practice. It
// returns the element's position from the front.
func (q *fifo[T]) sortBack(less func(a, b *T) bool) int {
	i := len(q.items) - 1
	for ; i > q.head && less(&q.items[i], &q.items[i-1]); i-- {
		q.items[i], q.items[i-1] = q.items[i-1], q.items[i]
	}
	return i - q.head
}

// removeAt removes the i-th element from the front, keeping the order of
// the others (a copy of those behind it: for the rare removal out of turn).
func (q *fifo[T]) removeAt(i int) T {
	var zero T
	v := q.items[q.head+i]
	copy(q.items[q.head+i:], q.items[q.head+i+1:])
	q.items[len(q.items)-1] = zero
	q.items = q.items[:len(q.items)-1]
	return v
}

// take removes the i-th element from the front: a pop for the front
// (the usual case), removeAt otherwise.
func (q *fifo[T]) take(i int) T {
	if i == 0 {
		return q.pop()
	}
	return q.removeAt(i)
}

// reset empties the queue, keeping its storage.
func (q *fifo[T]) reset() {
	clear(q.items)
	q.items, q.head = q.items[:0], 0
}

// release empties the queue, keeping its storage only when it holds at
// most keep items.
func (q *fifo[T]) release(keep int) {
	if cap(q.items) > keep {
		q.items, q.head = nil, 0
		return
	}
	q.reset()
}

// truncate keeps the first n elements, zeroing the slots it drops.
func (q *fifo[T]) truncate(n int) {
	clear(q.items[q.head+n:])
	q.items = q.items[:q.head+n]
}
