package lab

import "testing"

func TestSetsPerfSchema(t *testing.T) {
	cases := map[string]bool{
		"--performance-schema=OFF": true, "--performance_schema=ON": true, "--skip-performance-schema": true,
		"--performance-schema-events-statements-history-long-size=10000": false, "--thread-handling=pool-of-threads": false,
	}
	for opt, want := range cases {
		if got := SetsPerfSchema([]string{opt}); got != want {
			t.Errorf("SetsPerfSchema(%q) = %v, want %v", opt, got, want)
		}
	}
}
