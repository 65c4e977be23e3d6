package overhead

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/sandbox"
	"github.com/gapscope/gapscope/internal/workload"
)

// The end-to-end tests share one sandbox with performance_schema on and its
// defaults, as `gapscope overhead --sandbox` starts it. Tests run one after
// the other: some restart it.
var (
	shared    *sandbox.Instance
	sharedErr error
	baseArgs  = []string{"--performance-schema=ON"}
)

func TestMain(m *testing.M) {
	flag.Parse()
	if !testing.Short() {
		shared, sharedErr = sandbox.Start(context.Background(), sandbox.Options{ServerArgs: baseArgs})
	}
	code := m.Run()
	if shared != nil {
		shared.Stop()
	}
	os.Exit(code)
}

func server(t *testing.T) *sandbox.Instance {
	t.Helper()
	if testing.Short() {
		t.Skip("sandbox test: skipped with -short")
	}
	if sharedErr != nil {
		t.Fatalf("starting sandbox: %v", sharedErr)
	}
	return shared
}

func readBack(t *testing.T, inst *sandbox.Instance) Settings {
	t.Helper()
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	s, err := ReadSettings(context.Background(), db)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// TestApplyRestoreEachRuntimeConfig applies every configuration that
// changes settings at runtime, checks on a separate connection that it took
// effect, restores it and checks that every setting is back.
func TestApplyRestoreEachRuntimeConfig(t *testing.T) {
	inst := server(t)
	ctx := context.Background()
	before := readBack(t, inst)
	if !before.PerfSchema || len(before.Instruments) < 100 || len(before.InnoDBMetrics) == 0 {
		t.Fatalf("sandbox settings look wrong: ps=%v instruments=%d metrics=%d", before.PerfSchema, len(before.Instruments), len(before.InnoDBMetrics))
	}
	s, err := openSession(ctx, Options{DSN: inst.DSN(""), Sandbox: inst, SandboxArgs: baseArgs})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { s.db.Close() }()
	for _, c := range Configs() {
		if !c.Changes {
			continue
		}
		t.Run(c.Name, func(t *testing.T) {
			if err := c.Apply(ctx, s); err != nil {
				t.Fatalf("apply: %v", err)
			}
			applied := readBack(t, inst)
			checkApplied(t, c.Name, before, applied)
			if err := c.Restore(ctx, s); err != nil {
				t.Fatalf("restore: %v", err)
			}
			if d := before.Diff(readBack(t, inst)); len(d) != 0 {
				t.Fatalf("not restored after %s: %v", c.Name, d)
			}
		})
	}
}

// checkApplied verifies what each configuration is meant to change.
func checkApplied(t *testing.T, name string, before, now Settings) {
	t.Helper()
	switch name {
	case "ps-all", "ps-all-runtime": // ps-all's Apply: its runtime form, where restarts are not allowed
		for n, f := range now.Instruments {
			// memory instruments cannot be timed: TIMED stays NO.
			wantTimed := !strings.HasPrefix(n, "memory/")
			if !f.Enabled || (wantTimed && !f.Timed) {
				t.Fatalf("%s: instrument %s = %+v (was %+v)", name, n, f, before.Instruments[n])
			}
		}
		for n, on := range now.Consumers {
			if !on {
				t.Fatalf("%s: consumer %s still off", name, n)
			}
		}
	case "innodb-metrics-all":
		if len(now.InnoDBMetrics) <= len(before.InnoDBMetrics) {
			t.Fatalf("innodb-metrics-all: %d counters on, was %d", len(now.InnoDBMetrics), len(before.InnoDBMetrics))
		}
	case "optimizer-trace":
		if !strings.Contains(now.OptimizerTrace, "enabled=on") {
			t.Fatalf("optimizer_trace = %q", now.OptimizerTrace)
		}
	case "gapscope-watch":
		if !now.Consumers["events_statements_history_long"] || !now.Consumers["events_statements_current"] {
			t.Fatalf("gapscope-watch: watch did not enable its consumers: %v", now.Consumers)
		}
	default:
		t.Fatalf("no check for %s", name)
	}
}

// TestInterruptedRunRestores cancels a run in the middle of a round (once
// the configuration is seen applied on the server) and checks the run
// reports restored settings and that they really are.
func TestInterruptedRunRestores(t *testing.T) {
	inst := server(t)
	before := readBack(t, inst)
	for _, name := range []string{"ps-all-runtime", "optimizer-trace", "innodb-metrics-all", "gapscope-watch"} {
		t.Run(name, func(t *testing.T) {
			cs, err := ParseConfigs("ps-default," + name)
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			go cancelWhenChanged(ctx, cancel, inst, before)
			res, err := Run(ctx, Options{DSN: inst.DSN(""), Sandbox: inst, SandboxArgs: baseArgs, Configs: cs, Rounds: 50,
				Duration: 5 * time.Second, Warmup: -1, Workload: workload.OLTPOptions{Tables: 1, TableSize: 500, Threads: 2}})
			if !errors.Is(err, context.Canceled) {
				t.Fatalf("Run: %v, want context.Canceled", err)
			}
			if res == nil || !res.Restored {
				t.Fatalf("result says not restored: %+v", res)
			}
			if d := before.Diff(readBack(t, inst)); len(d) != 0 {
				t.Fatalf("settings not restored after an interrupted %s round: %v", name, d)
			}
		})
	}
}

// cancelWhenChanged polls the server and cancels as soon as any setting
// differs from before: the configuration is applied, its round under way.
func cancelWhenChanged(ctx context.Context, cancel context.CancelFunc, inst *sandbox.Instance, before Settings) {
	db, err := inst.Open("")
	if err != nil {
		cancel()
		return
	}
	defer db.Close()
	for ctx.Err() == nil {
		if now, err := ReadSettings(ctx, db); err == nil && len(before.Diff(now)) > 0 {
			cancel()
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestInterruptedStaticRestarts interrupts a ps-off round: the sandbox
// must come back with performance_schema on and its settings as before.
func TestInterruptedStaticRestarts(t *testing.T) {
	inst := server(t)
	before := readBack(t, inst)
	cs, err := ParseConfigs("ps-default,ps-off")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go cancelWhenChanged(ctx, cancel, inst, before)
	res, err := Run(ctx, Options{DSN: inst.DSN(""), Sandbox: inst, SandboxArgs: baseArgs, Configs: cs, Rounds: 50,
		Duration: 5 * time.Second, Warmup: -1, Workload: workload.OLTPOptions{Tables: 1, TableSize: 500, Threads: 2}})
	if !errors.Is(err, context.Canceled) || res == nil || !res.Restored {
		t.Fatalf("Run: %v, restored %v", err, res != nil && res.Restored)
	}
	if d := before.Diff(readBack(t, inst)); len(d) != 0 {
		t.Fatalf("not restored: %v", d)
	}
}

// TestRefusals: on a server that is not gapscope's sandbox, configs that
// need a restart are refused, and changes need consent; nothing changes.
func TestRefusals(t *testing.T) {
	inst := server(t)
	before := readBack(t, inst)
	wl := workload.OLTPOptions{Tables: 1, TableSize: 100, Threads: 1}
	for list, want := range map[string]error{"ps-default,ps-off": ErrNeedsRestart, "ps-default,ps-all": ErrNeedsConsent} {
		cs, _ := ParseConfigs(list)
		_, err := Run(context.Background(), Options{DSN: inst.DSN(""), Configs: cs, Duration: time.Second, Workload: wl})
		if !errors.Is(err, want) {
			t.Errorf("%s: %v, want %v", list, err, want)
		}
	}
	if d := before.Diff(readBack(t, inst)); len(d) != 0 {
		t.Fatalf("a refused run changed settings: %v", d)
	}
	if !schemaAbsent(t, inst) {
		t.Fatal("a refused run created the workload schema")
	}
}

// TestRunWithConsentOnPlainServer measures with consent on a server run
// as if it were not ours (no Sandbox): no restarts, rounds paired, settings
// restored and the schema dropped.
func TestRunWithConsentOnPlainServer(t *testing.T) {
	inst := server(t)
	before := readBack(t, inst)
	cs, _ := ParseConfigs("ps-default,optimizer-trace")
	var seen []Progress
	// No rotations added (TimeLimit -1): with 2 pairs the interval is
	// seldom decided, and this test counts a fixed rotation.
	res, err := Run(context.Background(), Options{DSN: inst.DSN(""), AllowChanges: true, Configs: cs, Rounds: 2, TimeLimit: -1,
		Duration: time.Second, Warmup: -1, Workload: workload.OLTPOptions{Tables: 1, TableSize: 500, Threads: 2},
		Progress: func(p Progress) { seen = append(seen, p) }})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rounds) != 4 || len(res.Table) != 2 || res.Table[1].Pairs != 2 || !res.Restored {
		t.Fatalf("result: rounds %d table %+v restored %v", len(res.Rounds), res.Table, res.Restored)
	}
	for i, r := range res.Rounds {
		pos := i % 2
		if i/2%2 == 1 {
			pos = 1 - pos // every other rotation runs in reverse
		}
		if r.Config != cs[pos].Name || r.Index != i/2 || r.TPS <= 0 || r.LatP95 <= 0 {
			t.Errorf("round %d out of rotation or empty: %+v", i, r)
		}
	}
	// Before and after each round, then the table after the second rotation.
	if len(seen) != 9 || seen[7].Step != 4 || seen[7].Left != 0 || seen[7].Last == nil || len(seen[8].Table) != 2 {
		t.Errorf("progress: %d reports, last %+v", len(seen), seen[len(seen)-1])
	}
	if d := before.Diff(readBack(t, inst)); len(d) != 0 {
		t.Fatalf("not restored: %v", d)
	}
	if !schemaAbsent(t, inst) {
		t.Fatal("the workload schema was left behind")
	}
}

func schemaAbsent(t *testing.T, inst *sandbox.Instance) bool {
	t.Helper()
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var n int
	err = db.QueryRow("SELECT COUNT(*) FROM information_schema.SCHEMATA WHERE SCHEMA_NAME = ?", DefaultSchema).Scan(&n)
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		t.Fatal(err)
	}
	return n == 0
}
