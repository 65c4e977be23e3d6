package main

import "testing"

// --http listens on loopback unless another interface is named.
func TestListenAddr(t *testing.T) {
	for in, want := range map[string]string{"9464": "127.0.0.1:9464", ":9464": "127.0.0.1:9464",
		"0.0.0.0:9464": "0.0.0.0:9464", "[::1]:80": "[::1]:80", "localhost:1": "localhost:1"} {
		if got, err := listenAddr(in); err != nil || got != want {
			t.Errorf("listenAddr(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "host", "host:port", ":99999", "1.2.3.4"} {
		if got, err := listenAddr(bad); err == nil {
			t.Errorf("listenAddr(%q) = %q, want an error", bad, got)
		}
	}
}

func TestExportFlagsCheck(t *testing.T) {
	for _, good := range []exportFlags{{topDigests: 100, traceRatio: 0.01, http: "9464"}, {}} {
		if err := good.check(); err != nil {
			t.Fatalf("%+v: %v", good, err)
		}
	}
	for _, f := range []exportFlags{{topDigests: 0, http: "9464"}, {topDigests: 1, traceRatio: 2},
		{topDigests: 1, otlpEndpoint: "127.0.0.1:4318"}, {topDigests: 1, http: "nope"}} {
		if err := f.check(); err == nil {
			t.Errorf("%+v: no usage error", f)
		} else if _, ok := err.(usageError); !ok {
			t.Errorf("%+v: %v is not a usage error (exit 2)", f, err)
		}
	}
}
