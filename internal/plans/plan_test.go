package plans

import (
	"os"
	"strings"
	"testing"
	"time"
)

func plan(rows ...Row) Plan { return Plan{Rows: rows} }

var (
	usualPlan = plan(
		Row{ID: 1, SelectType: "SIMPLE", Table: "u", Type: "ref", Key: "y", Rows: 10, RRows: -1},
		Row{ID: 1, SelectType: "SIMPLE", Table: "t", Type: "ref", Key: "k", Rows: 4, RRows: -1})
	flippedPlan = plan(
		Row{ID: 1, SelectType: "SIMPLE", Table: "u", Type: "ref", Key: "y", Rows: 10, RRows: -1},
		Row{ID: 1, SelectType: "SIMPLE", Table: "t", Type: "ALL", Rows: 200000, RRows: 73873})
)

func TestSignatureAndEstimates(t *testing.T) {
	if got := usualPlan.Signature(); got != "u:ref(y) > t:ref(k)" {
		t.Errorf("signature %q", got)
	}
	if got := flippedPlan.Signature(); got != "u:ref(y) > t:ALL" {
		t.Errorf("signature %q", got)
	}
	sub := plan(Row{ID: 1, Table: "t", Type: "ALL", Rows: 5}, Row{ID: 2, Table: "u", Type: "eq_ref", Key: "PRIMARY", Rows: 1},
		Row{ID: 1, Type: "", Rows: -1, Extra: "Impossible WHERE"})
	if got := sub.Signature(); got != "t:ALL > #2 u:eq_ref(PRIMARY) > -:none" {
		t.Errorf("signature %q", got)
	}
	e := sub.Estimates()
	if len(e) != 2 || e["t"] != 5 || e["#2 u"] != 1 {
		t.Errorf("estimates %v", e)
	}
	if a := flippedPlan.Actual(); a["t"] != 73873 || len(a) != 1 {
		t.Errorf("actual %v", a)
	}
	if usualPlan.Actual() != nil {
		t.Error("a plan without r_rows has actual rows")
	}
	if txt := flippedPlan.Text(); !strings.Contains(txt, "t\tALL\t\t\t200000\t73873") {
		t.Errorf("text:\n%s", txt)
	}
}

func TestCompare(t *testing.T) {
	cases := []struct {
		name        string
		usual, slow Plan
		flipped     bool
		reason      string
	}{
		{"same plan", usualPlan, usualPlan, false, ""},
		{"other access type", usualPlan, flippedPlan, true, "t:ALL instead of"},
		{"other join order", usualPlan, plan(usualPlan.Rows[1], usualPlan.Rows[0]), true, "plan changed"},
		{"estimates move with literals", plan(Row{Table: "t", Type: "range", Key: "k", Rows: 5000}),
			plan(Row{Table: "t", Type: "range", Key: "k", Rows: 900}), false, ""},
		{"estimate collapses (the plan-flip case)", plan(Row{Table: "t", Type: "ALL", Rows: 197451683}),
			plan(Row{Table: "t", Type: "ALL", Rows: 1}), true, "t 197451683 -> 1"},
		{"small tables never collapse", plan(Row{Table: "t", Type: "ALL", Rows: 500}),
			plan(Row{Table: "t", Type: "ALL", Rows: 1}), false, ""},
	}
	for _, c := range cases {
		got := compare(c.usual, c.slow, 100, 1000)
		if got.flipped != c.flipped || !strings.Contains(got.reason, c.reason) {
			t.Errorf("%s: got %+v", c.name, got)
		}
	}
}

func TestLimiterPerKeyAndGlobal(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	l := NewLimiter(10*time.Second, 2, 4)
	if !l.Allow("a", t0) || l.Allow("a", t0.Add(9*time.Second)) {
		t.Fatal("per-key: want one per 10 s")
	}
	if !l.Allow("a", t0.Add(10*time.Second)) {
		t.Fatal("per-key: the key's token did not come back after 10 s")
	}
	// Global: burst 4, then 2 per second, over any number of keys.
	l = NewLimiter(10*time.Second, 2, 4)
	allowed := 0
	for i := range 64 {
		if l.Allow(string(rune('A'+i)), t0) {
			allowed++
		}
	}
	if allowed != 4 {
		t.Fatalf("64 keys at once: %d allowed, want the burst of 4", allowed)
	}
	allowed = 0
	for i := range 64 {
		if l.Allow(string(rune('a'+i)), t0.Add(time.Second)) {
			allowed++
		}
	}
	if allowed != 2 {
		t.Fatalf("one second later: %d allowed, want 2", allowed)
	}
}

func TestLimiterForgetsIdleKeys(t *testing.T) {
	t0 := time.Unix(1_700_000_000, 0)
	l := NewLimiter(time.Second, 1e9, 1<<30)
	l.MaxKeys = 100
	for i := range 1000 {
		l.Allow(strings.Repeat("x", i), t0.Add(time.Duration(i)*10*time.Millisecond))
	}
	if len(l.keys) > 200 {
		t.Errorf("limiter keeps %d keys, want them bounded near MaxKeys", len(l.keys))
	}
}

func TestParseTraceMariaDB(t *testing.T) {
	b, err := os.ReadFile("testdata/trace-mariadb-10.11-flipped.json")
	if err != nil {
		t.Fatal(err)
	}
	tr, err := ParseTrace(b)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Join(tr.JoinOrder, ",") != "u,t" || len(tr.Tables) != 2 {
		t.Fatalf("join order %v, tables %d", tr.JoinOrder, len(tr.Tables))
	}
	tt := tr.Tables[1]
	if tt.Table != "t" || tt.ScanRows != 200000 || tt.ScanCost != 1185 {
		t.Errorf("t: %+v", tt)
	}
	var chosen, rejected []string
	for _, p := range tt.Paths {
		if p.Chosen {
			chosen = append(chosen, p.String())
		} else {
			rejected = append(rejected, p.String())
		}
	}
	// At prefix [u] the optimizer weighed ref(k) at cost 35755 against a
	// scan at 1185 and took the scan.
	if len(chosen) != 1 || chosen[0] != "scan rows 200000 cost 1185" {
		t.Errorf("chosen %v", chosen)
	}
	if len(rejected) != 1 || rejected[0] != "ref(k) rows 200000 cost 35755.30058" {
		t.Errorf("rejected %v", rejected)
	}
	if s := tr.Summary(); s["join_order"] == nil || len(s["tables"].([]map[string]any)) != 2 {
		t.Errorf("summary %v", s)
	}
}

func TestParseTraceRejectsGarbage(t *testing.T) {
	if _, err := ParseTrace([]byte("{not json")); err == nil {
		t.Error("no error for a broken trace")
	}
	tr, err := ParseTrace([]byte(`{"steps": []}`))
	if err != nil || len(tr.Tables) != 0 {
		t.Errorf("empty trace: %+v %v", tr, err)
	}
}

func TestTablesNamed(t *testing.T) {
	got := tablesNamed(flippedPlan, "SELECT COUNT(*) FROM `lab`.`t` AS a JOIN u b ON a.k = b.x, orders o WHERE b.y = 3")
	want := "u,t,orders"
	if strings.Join(got, ",") != want {
		t.Errorf("tablesNamed = %v, want %s", got, want)
	}
}

// A live plan read after the connection moved on belongs to its next
// statement; the 1003 note's text tells them apart.
func TestSameStatement(t *testing.T) {
	long := "SELECT " + strings.Repeat("c, ", 200) + "1 FROM t"
	for _, tc := range []struct {
		explained, listed string
		want              bool
	}{
		{"", "SELECT 1", true}, // no note (MySQL): cannot tell, trust it
		{"SELECT c FROM sbtest1 WHERE id = 5", "SELECT c FROM sbtest1 WHERE id = 5", true},
		{"SELECT c FROM sbtest1 WHERE id = 5 ", " SELECT c FROM sbtest1 WHERE id = 5", true},
		{"SELECT COUNT(*) FROM sbtest1 WHERE pad <> ''", "SELECT c FROM sbtest1 WHERE id = 5", false},
		{"SELECT c FROM sbtest1 WHERE id = 6", "SELECT c FROM sbtest1 WHERE id = 5", false},
		{long[:300], long, true},  // a note cut short
		{long[:100], long, false}, // too short a prefix to trust
	} {
		if got := sameStatement(tc.explained, tc.listed); got != tc.want {
			t.Errorf("sameStatement(%.40q, %.40q) = %v, want %v", tc.explained, tc.listed, got, tc.want)
		}
	}
}
