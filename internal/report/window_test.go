package report

import (
	"testing"
	"time"
)

// Numeric zone offsets come as date prints them (+0100) as well as in
// RFC 3339 (+01:00); both name the same instant.
func TestTimeBoundZones(t *testing.T) {
	want := time.Date(2024, 5, 6, 6, 8, 9, 0, time.UTC).UnixMicro()
	for _, s := range []string{"2024-05-06T07:08:09+01:00", "2024-05-06T07:08:09+0100", "2024-05-06 07:08:09+01:00", "2024-05-06 07:08:09 +0100"} {
		b, err := ParseTimeBound("--since", s, time.UTC)
		if err != nil || b.US != want {
			t.Errorf("%q: %v, %d µs, want %d", s, err, b.US, want)
		}
	}
}
