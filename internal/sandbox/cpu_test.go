package sandbox

import (
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A mariadbd line from this host, with a name holding a space and a
	// parenthesis to show fields are counted after the last ')'.
	stat := "24548 (maria db) d) S 24388 24548 24388 0 -1 4194560 31270 0 0 0 1234 567 0 0 30 10 43 0 160012 8591361680 136835 18446744073709551615"
	got, err := parseStatCPU(stat)
	if err != nil || got != (1234+567)*10*time.Millisecond {
		t.Fatalf("parseStatCPU = %v, %v; want 18.01s", got, err)
	}
	for _, bad := range []string{"", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 u 12"} {
		if _, err := parseStatCPU(bad); err == nil {
			t.Errorf("parseStatCPU(%q): no error", bad)
		}
	}
}
