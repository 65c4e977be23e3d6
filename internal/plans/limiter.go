package plans

import "time"

// bucket is a token bucket: it holds at most burst tokens and gains one
// every interval.
type bucket struct {
	tokens float64
	last   time.Time
}

// Limiter bounds the plan statements gapscope sends: at most one per key
// (digest and kind) every PerKey, and at most Burst at once and Rate per
// second over all keys. A plan statement interrupts the target thread
// (SHOW EXPLAIN) or plans a query (EXPLAIN); 64 connections running the
// same slow query must not become 64 of them per poll.
type Limiter struct {
	PerKey time.Duration
	Rate   float64 // global tokens per second
	Burst  int     // global bucket size
	// MaxKeys bounds memory: when exceeded, keys idle for PerKey (whose
	// buckets are full again) are forgotten.
	MaxKeys int

	global bucket
	keys   map[string]*bucket
}

// NewLimiter returns a limiter with full buckets.
func NewLimiter(perKey time.Duration, rate float64, burst int) *Limiter {
	return &Limiter{PerKey: perKey, Rate: rate, Burst: max(burst, 1), MaxKeys: 10_000,
		global: bucket{tokens: float64(max(burst, 1))}, keys: map[string]*bucket{}}
}

// Allow takes a token for key at now, from the key's bucket and the
// global one, and reports whether both had one. A refusal takes nothing.
func (l *Limiter) Allow(key string, now time.Time) bool {
	l.refillGlobal(now)
	if l.global.tokens < 1 {
		return false
	}
	b := l.keys[key]
	if b != nil && now.Sub(b.last) < l.PerKey {
		return false
	}
	if b == nil {
		l.prune(now)
		b = &bucket{}
		l.keys[key] = b
	}
	b.last = now
	l.global.tokens--
	return true
}

func (l *Limiter) refillGlobal(now time.Time) {
	if !l.global.last.IsZero() {
		l.global.tokens += now.Sub(l.global.last).Seconds() * l.Rate
	}
	l.global.tokens = min(l.global.tokens, float64(l.Burst))
	l.global.last = now
}

func (l *Limiter) prune(now time.Time) {
	if len(l.keys) < l.MaxKeys {
		return
	}
	for k, b := range l.keys {
		if now.Sub(b.last) >= l.PerKey {
			delete(l.keys, k)
		}
	}
}
