package watch

import (
	"context"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// TestWatchWithConsumersOff: performance_schema is on with its default
// consumers (statement history off). watch alone degrades to the wire and
// gives the SQL that enables them; with EnableConsumers it turns them on,
// joins, does not report the consumers it enabled as missing, and leaves
// the server as it found it.
func TestWatchWithConsumersOff(t *testing.T) {
	inst := sandbox.ForTest(t, sandbox.Options{ServerArgs: []string{"--performance-schema=ON"}})
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(enable bool) (*Result, *event.Statement) {
		var seen []event.Statement
		res := runDuring(t, ctx, Options{DSN: inst.DSN(""), Iface: "lo", PollInterval: 100 * time.Millisecond,
			KeepLiterals: true, EnableConsumers: enable, Sinks: []Sink{StatementFunc(func(s *event.Statement) { seen = append(seen, *s) })}},
			func() error { return queryOnce(ctx, inst, "SELECT 'consumers test'") })
		return res, findSQL(seen, "consumers test")
	}

	res, s := run(false)
	if s == nil || s.Joined {
		t.Fatalf("consumers off: statement %+v, want it on the wire, unjoined", s)
	}
	if !anyContains(res.Notes, "consumers off") || !anyContains(res.Notes, "UPDATE performance_schema.setup_consumers SET ENABLED='YES'") {
		t.Errorf("consumers off: the notes do not say so with the SQL to fix it: %v", res.Notes)
	}

	res, s = run(true)
	if s == nil || !s.Joined {
		t.Fatalf("--enable-consumers: statement %+v, want it joined; notes %v", s, res.Notes)
	}
	if !anyContains(res.Notes, "enabled consumers") {
		t.Errorf("the run does not say it enabled consumers: %v", res.Notes)
	}
	for _, f := range res.Findings {
		if f.Code == "MISSING_CONSUMERS" {
			t.Errorf("MISSING_CONSUMERS reported for consumers the run itself enabled: %s", f.Summary)
		}
	}
	db, err := inst.Open("")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var on int
	if err := db.QueryRowContext(ctx, "SELECT COUNT(*) FROM performance_schema.setup_consumers WHERE NAME LIKE 'events_statements%' AND ENABLED='YES'").Scan(&on); err != nil {
		t.Fatal(err)
	}
	if on != 0 {
		t.Errorf("%d statement consumers left on after the run: not restored", on)
	}
}
