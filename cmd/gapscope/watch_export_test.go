package main

import "testing"

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
