package main

import (
	"context"
	"encoding/json"
	"math"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/overhead"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/store"
)

func TestOverheadUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"overhead"},
		{"overhead", "--sandbox", "--dsn", "root@tcp(127.0.0.1:1)/"},
		{"overhead", "--sandbox", "--configs", "ps-off"},
		{"overhead", "--sandbox", "--configs", "ps-off,bogus"},
		{"overhead", "--sandbox", "--format", "xml"},
		{"overhead", "--sandbox", "--driver", "mysqlslap"},
		{"overhead", "--sandbox", "--rounds", "0"},
		{"overhead", "--sandbox", "--duration", "0s"},
		{"overhead", "--sandbox", "--resolution", "1.5"},
		{"lab", "overhead", "--driver", "nope"},
	} {
		out, err := runCmd(t, args...)
		if exitCode(err) != exitUsage {
			t.Errorf("%v: exit %d (%v), want %d\n%s", args, exitCode(err), err, exitUsage, out)
		}
	}
}

// TestOverheadCmdOnServer drives the command against a server it does not
// own: refusals first (nothing changes), then a consented run recorded in a
// store whose rounds rebuild the same table the JSON printed.
func TestOverheadCmdOnServer(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	dsn := inst.DSN("")
	// --time-limit 0: exactly the two rotations asked for (none added while a
	// row is undecided), so that the stored rounds can be counted.
	small := []string{"--duration", "1s", "--warmup", "0s", "--rounds", "2", "--time-limit", "0", "--tables", "1", "--rows", "500", "--threads", "2"}
	out, err := runCmd(t, append([]string{"overhead", "--dsn", dsn, "--configs", "ps-default,optimizer-trace"}, small...)...)
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "--i-understand-this-changes-settings") {
		t.Fatalf("no consent: %v\n%s", err, out)
	}
	out, err = runCmd(t, append([]string{"overhead", "--dsn", dsn, "--configs", "ps-off,ps-default"}, small...)...)
	if exitCode(err) != exitUsage || !strings.Contains(err.Error(), "restart") {
		t.Fatalf("restart on a foreign server: %v\n%s", err, out)
	}
	db := filepath.Join(t.TempDir(), "o.db")
	args := append([]string{"overhead", "--dsn", dsn, "--configs", "ps-default,optimizer-trace", "--i-understand-this-changes-settings",
		"--store", db, "--format", "json"}, small...)
	out, err = runCmd(t, args...)
	if err != nil {
		t.Fatalf("overhead: %v\n%s", err, out)
	}
	var res struct {
		Table    []overhead.Row    `json:"table"`
		Findings []json.RawMessage `json:"findings"`
		Restored bool              `json:"restored"`
	}
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):]), &res); err != nil {
		t.Fatalf("JSON: %v\n%s", err, out)
	}
	if len(res.Table) != 2 || res.Findings == nil || !res.Restored || res.Table[1].Pairs != 2 {
		t.Fatalf("JSON result: %+v", res)
	}
	st, err := store.Open(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	rows, err := st.OverheadRows(context.Background(), 0)
	if err != nil || len(rows) != 4 {
		t.Fatalf("stored rounds: %d, %v", len(rows), err)
	}
	again := overhead.TableFromStore(rows, overhead.DefaultResolution)
	for i := range again {
		// Latencies are stored in µs, so compare the ratio (TPS are exact).
		if again[i].Config != res.Table[i].Config || math.Abs(again[i].Ratio-res.Table[i].Ratio) > 1e-9 || again[i].AboveNoise != res.Table[i].AboveNoise {
			t.Errorf("row %d from the store %+v, printed %+v", i, again[i], res.Table[i])
		}
	}
}
