package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/probe"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/store"
)

func TestProbeUsage(t *testing.T) {
	for _, args := range [][]string{
		{"probe"},
		{"probe", "--dsn", "x@tcp(127.0.0.1:1)/", "--format", "yaml"},
		{"probe", "--dsn", "x@tcp(127.0.0.1:1)/", "--every", "0s"},
		{"probe", "--dsn", "x@tcp(127.0.0.1:1)/", "--repeat", "0"},
		{"probe", "--dsn", "x@tcp(127.0.0.1:1)/", "--workload", "/no/such.sql"},
	} {
		if _, err := runCmd(t, args...); exitCode(err) != exitUsage {
			t.Errorf("%v: exit %d (%v)", args, exitCode(err), err)
		}
	}
	_, err := runCmd(t, "probe", "--dsn", "app:hunter2@tcp(127.0.0.1:1)/", "--count", "1")
	if exitCode(err) != exitFailure || strings.Contains(err.Error(), "hunter2") {
		t.Errorf("unreachable server: exit %d (%v)", exitCode(err), err)
	}
}

func TestProbeStoresRuns(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{})
	db := filepath.Join(t.TempDir(), "probe.db")
	out, err := runCmd(t, "probe", "--dsn", inst.DSN(""), "--count", "2", "--every", "100ms", "--repeat", "2",
		"--inserts", "5", "--store", db, "--format", "json")
	if err != nil {
		t.Fatalf("probe: %v\n%s", err, out)
	}
	var res probe.Result
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(res.Series.Points) != 2 || res.Series.Name != "canary" || len(res.Caps) == 0 || res.Knee.Reason == "" {
		t.Errorf("result: %+v", res)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	runs, _ := st.Runs(context.Background())
	probes, _ := st.ProbeResults(context.Background(), store.Query{})
	samples, _ := st.Samples(context.Background(), store.Query{})
	if len(runs) != 1 || runs[0].Command != "probe" || runs[0].EndUS == 0 {
		t.Errorf("runs: %+v", runs)
	}
	if len(probes) != 2 || probes[0].Calls != 2 || probes[0].MedianUS <= 0 || probes[0].TimeUS != res.Series.Points[0].TimeUS {
		t.Errorf("probe results: %+v", probes)
	}
	if len(samples) != 8 || samples[0].Source != "probe" || samples[0].Labels["probe"] != "canary" {
		t.Errorf("samples: %+v", samples)
	}
}
