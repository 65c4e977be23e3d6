package main

import (
	"context"
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/plans"
	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/store"
)

func TestPlansUsage(t *testing.T) {
	for _, args := range [][]string{
		{"plans"},
		{"plans", "--dsn", "root@tcp(127.0.0.1:1)/", "--format", "xml"},
		{"plans", "--dsn", "root@tcp(127.0.0.1:1)/", "--threshold", "0s"},
		{"plans", "--dsn", "root@tcp(127.0.0.1:1)/", "--rate", "-1"},
	} {
		if _, err := runCmd(t, args...); exitCode(err) != exitUsage {
			t.Errorf("%v: %v, want a usage error", args, err)
		}
	}
}

// TestPlansCatchesLivePlan runs `gapscope plans` against a sandbox while
// a slow SELECT runs, and finds its live plan in the JSON and the store.
func TestPlansCatchesLivePlan(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON",
		"--performance-schema-consumer-events-statements-current=ON", "--performance-schema-consumer-events-statements-history-long=ON"}})
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, q := range []string{"CREATE DATABASE pc", "CREATE TABLE pc.r (id INT PRIMARY KEY)", "INSERT INTO pc.r SELECT seq FROM pc.seq_1_to_1000"} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	go func() {
		time.Sleep(500 * time.Millisecond)
		db.ExecContext(context.Background(), "SELECT COUNT(*) FROM pc.r WHERE SLEEP(0.002) = 0")
	}()
	path := filepath.Join(t.TempDir(), "plans.db")
	out, err := runCmd(t, "plans", "--dsn", inst.DSN(""), "--threshold", "200ms", "--duration", "3s", "--format", "json", "--store", path)
	if err != nil {
		t.Fatalf("plans: %v\n%s", err, out)
	}
	var doc plans.Output
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("%v:\n%s", err, out)
	}
	if len(doc.Plans) == 0 || doc.Plans[0].Role != "slow" || doc.Plans[0].Source != "SHOW EXPLAIN FOR" ||
		doc.Plans[0].Signature != "r:index(PRIMARY)" {
		t.Fatalf("no live plan caught: %+v", doc)
	}
	st, err := store.Open(context.Background(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	stored, err := st.Plans(context.Background(), store.Query{})
	if err != nil || len(stored) != len(doc.Plans) || !strings.Contains(stored[0].Plan, "index") {
		t.Errorf("store holds %d plans (%v), output %d: %+v", len(stored), err, len(doc.Plans), stored)
	}
}
