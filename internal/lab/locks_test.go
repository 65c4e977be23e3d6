package lab

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sandbox"
)

// within: gapscope's figure is within max(1 ms, 5%) of the client's.
func within(got, truth int64) bool {
	d := got - truth
	if d < 0 {
		d = -d
	}
	return d <= max(1000, truth/20)
}

// checkVictim asserts what gapscope said of one victim against what its
// clients measured.
func checkVictim(t *testing.T, v LockTruth, kind string) {
	t.Helper()
	if !v.Found {
		t.Errorf("%s: conn %d's statement not seen", v.Case, v.Victim)
		return
	}
	s := v.Seen
	if s.LockWait == nil || s.BlockedBy == nil {
		t.Errorf("%s: conn %d waited %d µs at its client; no lock wait named (exec %d µs, joined %v)", v.Case, v.Victim, v.WaitUS, s.ExecUS, s.Joined)
		return
	}
	if !within(s.LockWaitUS, v.WaitUS) {
		t.Errorf("%s: lock wait %d µs, the client waited %d µs", v.Case, s.LockWaitUS, v.WaitUS)
	}
	b := s.BlockedBy
	if b.ConnID != v.Blocker || b.Kind != kind {
		t.Errorf("%s: blocker conn %d kind %s, want conn %d kind %s (%+v)", v.Case, b.ConnID, b.Kind, v.Blocker, kind, b)
	}
	root := b.RootOrSelf()
	if root.ConnID != v.Root || root.State != event.BlockerIdleInTxn {
		t.Errorf("%s: root conn %d state %s, want conn %d idle in its transaction", v.Case, root.ConnID, root.State, v.Root)
	}
	if !strings.Contains(strings.ToUpper(root.SQL), strings.ToUpper(strings.Fields(v.BlockerSQL)[0])) {
		t.Errorf("%s: root's statement %q, want the %q its transaction ran", v.Case, root.SQL, v.BlockerSQL)
	}
	if !within(root.IdleUS, v.IdleUS) {
		t.Errorf("%s: root idle %d µs, its application idled %d µs", v.Case, root.IdleUS, v.IdleUS)
	}
}

func TestLocksLab(t *testing.T) {
	if testing.Short() || !sandbox.Available() {
		t.Skip("needs a MariaDB sandbox")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	r, err := Locks(ctx, LocksOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range r.Seen {
		t.Log(line)
	}
	checkVictim(t, r.Row, event.LockRow)
	checkVictim(t, r.Short, event.LockRow)
	// Over before watch's lock-table read (500 ms): the wire's attribution.
	// A busy host can stretch the wait past it; then a read may catch it.
	if s := r.Short.Seen; r.Short.WaitUS < 450_000 && s.LockWait != nil && s.BlockedBy != nil && s.BlockedBy.Source != event.LockSourceWire {
		t.Errorf("the sub-second wait was read from %s; the case is the one no read caught", s.BlockedBy.Source)
	}
	checkVictim(t, r.Alter, event.LockMetadata)
	for _, v := range r.MDL {
		checkVictim(t, v, event.LockMetadata)
	}
	// The findings: the wait is named as such with its root blocker, the
	// idle transaction is ranked, and the server's own work is not blamed.
	for _, c := range []string{"row", "mdl"} {
		codes := map[string]event.Finding{}
		for _, f := range r.ByCase[c].Findings {
			codes[f.Code] = f
		}
		if _, ok := codes["SERVER_EXEC"]; ok {
			t.Errorf("%s: SERVER_EXEC fired for time that was lock wait: %s", c, codes["SERVER_EXEC"].Summary)
		}
		if f, ok := codes["LOCK_WAIT"]; !ok {
			t.Errorf("%s: no LOCK_WAIT finding", c)
		} else {
			t.Logf("%s: %s\n  fix: %s", c, f.Summary, f.Fix)
		}
		if _, ok := codes["IDLE_IN_TRANSACTION"]; !ok {
			t.Errorf("%s: no IDLE_IN_TRANSACTION finding", c)
		}
	}
	for _, s := range r.Baseline.Window {
		if s.LockWait != nil {
			t.Errorf("baseline: %s %q attributed a lock wait: %+v", s.Conn, s.SQL, s.BlockedBy)
		}
	}
	if n := r.Baseline.ServerSide.LockReads; n != 0 {
		t.Errorf("baseline: %d reads of the lock tables while nothing ran long", n)
	}
	if n := r.ByCase["row"].ServerSide.LockReads; n == 0 {
		t.Error("row: the 1.3 s wait ran long and no read of the lock tables was made")
	}
	if r.Baseline.Transactions.Count == 0 {
		t.Error("baseline: no transactions seen")
	}
	for _, f := range r.Baseline.Findings {
		if f.Code == "LOCK_WAIT" || f.Code == "IDLE_IN_TRANSACTION" {
			t.Errorf("baseline: finding %s: %s", f.Code, f.Summary)
		}
	}
}
