package report

// rng is a splitmix64 generator: deterministic across Go releases, so that
// golden files built from it never change by themselves.
type rng struct{ s uint64 }

func (r *rng) next() uint64 {
	r.s += 0x9e3779b97f4a7c15
	z := r.s
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// float returns a uniform value in [0, 1).
func (r *rng) float() float64 { return float64(r.next()>>11) / (1 << 53) }

func (r *rng) str() string {
	const alphabet = "ab\"\\<>&\n\x00é日\u2028\xff "
	n := int(r.next() % 6)
	b := make([]byte, 0, n*3)
	for range n {
		i := int(r.next() % uint64(len(alphabet)))
		b = append(b, alphabet[i])
	}
	return string(b)
}
