package watch

import "sync/atomic"

// activityGate lets a periodic kernel read skip the rounds in which
// nothing it could learn happened. A sock_diag dump walks the kernel's
// whole established-socket hash table whatever it returns (262,144
// buckets, twice, on a 24 GB host: milliseconds each), so reading it every
// second on an idle server, or on a busy one whose clients never close
// their receive window, was a steady cost for no evidence. The gate opens
// when the counter it follows (a wire stage's atomic) moved since the last
// open; without a counter it is always open.
type activityGate struct {
	count *atomic.Int64
	seen  int64
}

// open reports whether the counter moved since the last time it did, and
// remembers where it stands.
func (g *activityGate) open() bool {
	if g.count == nil {
		return true
	}
	n := g.count.Load()
	if n == g.seen {
		return false
	}
	g.seen = n
	return true
}
