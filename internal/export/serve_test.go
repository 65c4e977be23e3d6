package export

import "testing"

// --http listens on loopback unless another interface is named.
func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{"9464": "127.0.0.1:9464", ":9464": "127.0.0.1:9464",
		"0.0.0.0:9464": "0.0.0.0:9464", "[::1]:80": "[::1]:80", "localhost:1": "localhost:1"} {
		if got, err := ListenAddr(in); err != nil || got != want {
			t.Errorf("ListenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "host", "host:port", ":99999", "1.2.3.4"} {
		if got, err := ListenAddr(bad); err == nil {
			t.Errorf("ListenAddr(%q) = %q, want an error", bad, got)
		}
	}
}
