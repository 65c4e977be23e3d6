package store

import (
	"context"
	"path/filepath"
	"reflect"
	"testing"
)

func TestOverheadRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "overhead.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	old, _ := s.StartRun(ctx, "overhead", "root@tcp(127.0.0.1:3306)/", 1)
	run, _ := s.StartRun(ctx, "overhead", "root@tcp(127.0.0.1:3306)/", 2)
	s.AddOverhead(ctx, OverheadRow{RunID: old, Config: "ps-off", TPS: 1})
	// Stored out of order: the reader returns rotation order.
	want := []OverheadRow{
		{RunID: run, TimeUS: 10, Config: "ps-off", Position: 0, Round: 0, TPS: 1982.5, QPS: 39650, LatAvgUS: 2017, LatP95US: 3500, CPUPerTxNS: 951_000},
		{RunID: run, TimeUS: 20, Config: "ps-all", Position: 1, Round: 0, TPS: 1400.25, QPS: 28005, LatAvgUS: 2856, LatP95US: 4900, Errors: 3, CPUPerTxNS: 1_073_000},
		{RunID: run, TimeUS: 30, Config: "ps-off", Position: 0, Round: 1, TPS: 1990, QPS: 39800, LatAvgUS: 2010, LatP95US: 3400},
		{RunID: run, TimeUS: 40, Config: "ps-all", Position: 1, Round: 1, TPS: 1390, QPS: 27800, LatAvgUS: 2877, LatP95US: 5000},
	}
	for _, i := range []int{2, 0, 3, 1} {
		if err := s.AddOverhead(ctx, want[i]); err != nil {
			t.Fatal(err)
		}
	}
	s.Close()
	// Reopen: what was committed is what a reader (the HTML report) sees.
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	for _, id := range []int64{run, 0} {
		got, err := s.OverheadRows(ctx, id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("OverheadRows(%d):\n got %+v\nwant %+v", id, got, want)
		}
	}
	if got, _ := s.OverheadRows(ctx, old); len(got) != 1 || got[0].Config != "ps-off" {
		t.Fatalf("old run: %+v", got)
	}
	if got, err := s.OverheadRows(ctx, 999); err != nil || len(got) != 0 {
		t.Fatalf("unknown run: %+v %v", got, err)
	}
}
