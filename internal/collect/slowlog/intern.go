package slowlog

// maxInterned bounds the strings an Interner keeps for reuse.
const maxInterned = 10_000

// Interner gives one string for equal byte slices read from the log (users,
// databases, hosts, commands), so that a profile of millions of events
// holds each value once. It keeps at most maxInterned values: it saves
// allocations, never changes a result. Not safe for concurrent use.
type Interner struct {
	m map[string]string
}

// String returns b as a string, shared with earlier equal values.
func (in *Interner) String(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if s, ok := in.m[string(b)]; ok {
		return s
	}
	s := string(b)
	if in.m == nil {
		in.m = make(map[string]string)
	}
	if len(in.m) < maxInterned {
		in.m[s] = s
	}
	return s
}
