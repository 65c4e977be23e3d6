package diagnose

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/gapscope/gapscope/internal/event"
)

// kindTally is the lock wait of one lock kind.
type kindTally struct {
	Kind       string `json:"kind"` // event.Lock*, "unknown" without a blocker
	Statements int    `json:"statements"`
	LockWaitUS int64  `json:"lock_wait_us"`
	MaxUS      int64  `json:"max_lock_wait_us"`
}

// blockerTally is one root blocker — the head of the chains its victims
// waited in — and what it cost them.
type blockerTally struct {
	Conn   string `json:"conn,omitempty"`
	ConnID uint64 `json:"conn_id,omitempty"`
	User   string `json:"user,omitempty"`
	// State is the blocker's state (event.Blocker*) as seen for most of
	// the wait it caused; "" when unknown.
	State string `json:"state,omitempty"`
	// Digest and SQL are the statement it ran (or last ran in the
	// transaction that held the lock), redacted as every statement.
	Digest string `json:"digest,omitempty"`
	SQL    string `json:"sql,omitempty"`
	// Kinds are the kinds of lock its victims waited for.
	Kinds         []string `json:"kinds"`
	Victims       int      `json:"victims"`
	LockWaitUS    int64    `json:"lock_wait_us"`
	MaxLockWaitUS int64    `json:"max_lock_wait_us"`
	// HeldUS and IdleUS are the longest seen: how long its transaction had
	// been open, and its application idle, when a wait ended.
	HeldUS int64 `json:"held_us,omitempty"`
	IdleUS int64 `json:"idle_us,omitempty"`
	// Confidence is the weakest of its attributions, each as sure as the
	// weakest link of its chain; Evidence says what was seen for that one.
	Confidence string   `json:"confidence"`
	Sources    []string `json:"sources,omitempty"`
	Evidence   string   `json:"evidence,omitempty"`
	// Via are the blockers between the victims and this root (an ALTER
	// waiting for it while selects waited for the ALTER), "conn: sql".
	Via []string `json:"via,omitempty"`

	byState map[string]int64
	conf    int
}

// confidenceRank orders confidences; an unknown one ranks lowest.
func confidenceRank(c string) int {
	switch c {
	case event.ConfidenceCertain:
		return 3
	case event.ConfidenceHigh:
		return 2
	case event.ConfidenceLow:
		return 1
	}
	return 0
}

// confidenceName is the name of a rank; an unknown confidence is "low":
// what is not known to be sure is not presented as sure.
func confidenceName(rank int) string {
	switch rank {
	case 3:
		return event.ConfidenceCertain
	case 2:
		return event.ConfidenceHigh
	}
	return event.ConfidenceLow
}

// chainConfidence is the rank of the weakest link from b to its root, and
// the evidence of that link.
func chainConfidence(b *event.Blocker) (int, string) {
	rank, ev := confidenceRank(b.Confidence), b.Evidence
	for l := b.Root; l != nil; l = l.Root {
		if r := confidenceRank(l.Confidence); r < rank {
			rank, ev = r, l.Evidence
		}
	}
	return rank, ev
}

// lockWaitOf is s's lock wait, never negative.
func lockWaitOf(s *event.Statement) int64 { return max(s.LockWaitTime(), 0) }

// checkLockWait names statements that waited for a lock another connection
// held, and the connections at the heads of those chains: what they ran,
// whether they were running or their application sat idle in its
// transaction, and how sure the attribution is.
func checkLockWait(w *Window) []event.Finding {
	var victims []*event.Statement
	var total, maxWait, exec int64
	for i := range w.Statements {
		s := &w.Statements[i]
		if wait := lockWaitOf(s); wait > 0 {
			victims = append(victims, s)
			total += wait
			maxWait = max(maxWait, wait)
			exec += max(s.ExecUS, 0)
		}
	}
	if len(victims) == 0 || total < w.limits().LockWaitUS {
		return nil
	}
	kinds := kindTallies(victims)
	roots, unattributed := blockerTallies(victims)
	f := event.Finding{
		Code:     CodeLockWait,
		Severity: event.SeverityWarning,
		Summary:  lockSummary(victims, total, maxWait, exec, kinds, roots, unattributed),
		Evidence: map[string]any{
			"victims":          len(victims),
			"lock_wait_us":     total,
			"max_lock_wait_us": maxWait,
			"exec_us":          exec,
			"kinds":            kinds,
			"blockers":         roots[:min(len(roots), maxListed)],
			"unattributed":     unattributed,
			"attribution":      attributionCounts(victims),
			"digests":          digestTallies(victims, lockWaitOf),
			"examples":         topExamples(victims, lockWaitOf),
		},
		Fix: lockFix(w, victims),
	}
	if exec > 0 {
		f.Evidence["lock_wait_share"] = round3(share(total, exec))
	}
	for _, v := range []string{"innodb_lock_wait_timeout", "lock_wait_timeout"} {
		if val, ok := w.Vars[v]; ok {
			f.Evidence[v] = val
		}
	}
	if total >= 1_000_000 {
		f.Severity = event.SeverityCritical
	}
	return []event.Finding{f}
}

// victimKind is the kind of lock s waited for.
func victimKind(s *event.Statement) string {
	if s.BlockedBy == nil || s.BlockedBy.Kind == "" {
		return "unknown"
	}
	return s.BlockedBy.Kind
}

func kindTallies(victims []*event.Statement) []kindTally {
	by := map[string]*kindTally{}
	for _, s := range victims {
		k := victimKind(s)
		t := by[k]
		if t == nil {
			t = &kindTally{Kind: k}
			by[k] = t
		}
		t.Statements++
		t.LockWaitUS += lockWaitOf(s)
		t.MaxUS = max(t.MaxUS, lockWaitOf(s))
	}
	out := make([]kindTally, 0, len(by))
	for _, t := range by {
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b kindTally) int {
		return cmp.Or(cmp.Compare(b.LockWaitUS, a.LockWaitUS), cmp.Compare(a.Kind, b.Kind))
	})
	return out
}

// blockerTallies groups the victims by the root of their chain (its
// connection and statement), most wait first, and counts the victims with
// no known blocker.
func blockerTallies(victims []*event.Statement) ([]blockerTally, int) {
	type key struct {
		conn   string
		id     uint64
		digest string
	}
	by := map[key]*blockerTally{}
	unattributed := 0
	for _, s := range victims {
		if s.BlockedBy == nil {
			unattributed++
			continue
		}
		r := s.BlockedBy.RootOrSelf()
		k := key{r.Conn, r.ConnID, cmp.Or(r.Digest, r.SQL)}
		t := by[k]
		if t == nil {
			t = &blockerTally{Conn: r.Conn, ConnID: r.ConnID, User: r.User, Digest: r.Digest, SQL: r.SQL,
				byState: map[string]int64{}, conf: 4}
			by[k] = t
		}
		wait := lockWaitOf(s)
		t.Victims++
		t.LockWaitUS += wait
		t.MaxLockWaitUS = max(t.MaxLockWaitUS, wait)
		t.HeldUS, t.IdleUS = max(t.HeldUS, r.HeldUS), max(t.IdleUS, r.IdleUS)
		t.byState[r.State] += wait
		if kind := victimKind(s); !slices.Contains(t.Kinds, kind) {
			t.Kinds = append(t.Kinds, kind)
		}
		for b := s.BlockedBy; b != nil; b = b.Root {
			if b.Source != "" && !slices.Contains(t.Sources, b.Source) {
				t.Sources = append(t.Sources, b.Source)
			}
			if b != r {
				if v := viaName(b); !slices.Contains(t.Via, v) && len(t.Via) < maxExamples {
					t.Via = append(t.Via, v)
				}
			}
		}
		if rank, ev := chainConfidence(s.BlockedBy); rank < t.conf {
			t.conf, t.Evidence = rank, ev
		}
	}
	out := make([]blockerTally, 0, len(by))
	for _, t := range by {
		t.Confidence = confidenceName(t.conf)
		t.State = heaviestState(t.byState)
		slices.Sort(t.Kinds)
		slices.Sort(t.Sources)
		out = append(out, *t)
	}
	slices.SortFunc(out, func(a, b blockerTally) int {
		return cmp.Or(cmp.Compare(b.LockWaitUS, a.LockWaitUS), cmp.Compare(a.Conn, b.Conn), cmp.Compare(a.ConnID, b.ConnID), cmp.Compare(a.Digest, b.Digest))
	})
	return out, unattributed
}

// heaviestState is the state under which the most wait was caused.
func heaviestState(by map[string]int64) string {
	best, at := int64(-1), ""
	for st, us := range by {
		if us > best || (us == best && st < at) {
			best, at = us, st
		}
	}
	return at
}

// viaName names a blocker of a chain that is not its root.
func viaName(b *event.Blocker) string {
	return cmp.Or(connName(b.Conn, b.ConnID), "unknown connection") + ": " + cmp.Or(b.SQL, b.Digest, "(statement unknown)")
}

// connName names a connection for a sentence.
func connName(conn string, id uint64) string {
	switch {
	case id != 0:
		return fmt.Sprintf("connection %d", id)
	case conn != "":
		return "connection " + conn
	}
	return ""
}

// attributionCounts counts the victims by how sure their attribution is.
func attributionCounts(victims []*event.Statement) map[string]int {
	out := map[string]int{}
	for _, s := range victims {
		if s.BlockedBy == nil {
			out["none"]++
			continue
		}
		rank, _ := chainConfidence(s.BlockedBy)
		out[confidenceName(rank)]++
	}
	return out
}

func lockSummary(victims []*event.Statement, total, maxWait, exec int64, kinds []kindTally, roots []blockerTally, unattributed int) string {
	ks := make([]string, 0, len(kinds))
	for _, k := range kinds {
		ks = append(ks, fmt.Sprintf("%s %d (%s)", k.Kind, k.Statements, dur(k.LockWaitUS)))
	}
	of := ""
	if exec > 0 {
		of = fmt.Sprintf(", %s of their execution", pct(share(total, exec)))
	}
	out := fmt.Sprintf("%d statement(s) waited %s for locks held by other connections (max %s%s; by kind: %s)",
		len(victims), dur(total), dur(maxWait), of, strings.Join(ks, ", "))
	if len(roots) > 0 {
		r := roots[0]
		out += fmt.Sprintf("; %s of it behind %s", dur(r.LockWaitUS), describeRoot(r))
		if len(roots) > 1 {
			out += fmt.Sprintf(", and %d other blocker(s)", len(roots)-1)
		}
	}
	if unattributed > 0 {
		out += fmt.Sprintf("; %d wait(s) have no known blocker", unattributed)
	}
	return out
}

// describeRoot says who a root blocker was, what it ran and how sure
// gapscope is: an attribution that is not at least high is "likely", with
// its evidence.
func describeRoot(r blockerTally) string {
	who := cmp.Or(connName(r.Conn, r.ConnID), "an unknown connection")
	if r.User != "" {
		who += " (user " + r.User + ")"
	}
	if r.conf < confidenceRank(event.ConfidenceHigh) {
		who = "likely " + who
	}
	sql := cmp.Or(r.SQL, r.Digest)
	switch r.State {
	case event.BlockerIdleInTxn:
		who += ", idle in its transaction"
		if r.HeldUS > 0 {
			who += fmt.Sprintf(" (open %s", dur(r.HeldUS))
			if r.IdleUS > 0 {
				who += fmt.Sprintf(", its application silent for %s", dur(r.IdleUS))
			}
			who += ")"
		}
		if sql != "" {
			who += fmt.Sprintf(" after %q", sql)
		}
	case event.BlockerRunning:
		if sql != "" {
			who += fmt.Sprintf(", running %q", sql)
		}
	default:
		if sql != "" {
			who += fmt.Sprintf(", whose transaction ran %q", sql)
		}
	}
	if len(r.Via) > 0 {
		who += " (through " + strings.Join(r.Via, "; ") + ")"
	}
	if r.conf < confidenceRank(event.ConfidenceHigh) {
		who += fmt.Sprintf(" [%s confidence", r.Confidence)
		if r.Evidence != "" {
			who += ": " + r.Evidence
		}
		who += "]"
	}
	return who
}

// lockCase is one kind of lock trouble with its fix and the wait it
// explains.
type lockCase struct {
	waitUS int64
	fix    string
}

// lockFix fits the fix to the case, the one that cost the most wait
// first: an application idle in its transaction, a running statement that
// locks too many rows, DDL behind (or in front of) a metadata lock, waits
// with no known blocker; then the timeouts that bound the waits.
func lockFix(w *Window, victims []*event.Statement) string {
	var idle, running, meta, unknown int64
	var rowOrTable bool
	for _, s := range victims {
		wait := lockWaitOf(s)
		switch {
		case s.BlockedBy == nil:
			unknown += wait
		case s.BlockedBy.Kind == event.LockMetadata:
			meta += wait
		case s.BlockedBy.RootOrSelf().State == event.BlockerIdleInTxn:
			idle += wait
		default:
			running += wait
		}
		if k := victimKind(s); k == event.LockRow || k == event.LockTable || k == "unknown" {
			rowOrTable = true
		}
	}
	cases := []lockCase{
		{idle, "the lock was held by a transaction its application left open and idle: commit (or roll back) before slow application work — remote calls, file or user I/O, long computations — and begin the transaction only when its statements are ready; keep transactions short (IDLE_IN_TRANSACTION ranks where applications hold them open)"},
		{running, "the blocker was running: give its statement an index so that it locks fewer rows (InnoDB locks every index record a locking read, UPDATE or DELETE scans), change rows in smaller transactions (batches committed one by one), and take rows in the same order everywhere"},
		{meta, "DDL and a metadata lock: find and end the idle or long transaction that holds the table first (the blockers in the evidence; sys.schema_table_lock_waits on MySQL, information_schema.METADATA_LOCK_INFO on MariaDB), then run the DDL with a short lock_wait_timeout (SET SESSION lock_wait_timeout=5, and retry; ALTER TABLE … WAIT 5 on MariaDB) so that it gives up instead of queueing every later statement on the table behind it, and use an online schema change tool (gh-ost, pt-online-schema-change) for large tables"},
		{unknown, "for waits with no known blocker, read sys.innodb_lock_waits (MySQL) or information_schema.INNODB_LOCK_WAITS (MariaDB) while they happen"},
	}
	slices.SortStableFunc(cases, func(a, b lockCase) int { return cmp.Compare(b.waitUS, a.waitUS) })
	var parts []string
	for _, c := range cases {
		if c.waitUS > 0 {
			parts = append(parts, c.fix)
		}
	}
	if rowOrTable {
		now := ""
		if v, ok := w.Vars["innodb_lock_wait_timeout"]; ok {
			now = " (now " + v + " s)"
		}
		parts = append(parts, "innodb_lock_wait_timeout"+now+" bounds each row lock wait: a lower value makes a victim fail with error 1205 (retry it) rather than pile up behind the blocker; lock_wait_timeout bounds table and metadata lock waits")
	}
	return strings.Join(parts, "; ")
}
