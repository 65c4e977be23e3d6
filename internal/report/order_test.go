package report

import (
	"bytes"
	"strings"
	"testing"
)

func rankedRows() *ProfileResult {
	r := &ProfileResult{Metric: "server", Digests: []DigestRow{
		{Digest: "a", DigestText: "a", Calls: 1, TotalUS: 600, MaxUS: 600, Attributes: ClassAttrs{RowsExamined: Attr{Sum: 5, Max: 5}}},
		{Digest: "b", DigestText: "b", Calls: 10, TotalUS: 300, MaxUS: 50, Attributes: ClassAttrs{RowsExamined: Attr{Sum: 900, Max: 100}}},
		{Digest: "c", DigestText: "c", Calls: 5, TotalUS: 100, MaxUS: 90, Attributes: ClassAttrs{RowsExamined: Attr{Sum: 50, Max: 200}}},
	}}
	r.Digests = append(r.Digests, DigestRow{DigestText: otherText, Calls: 99, TotalUS: 1})
	return r
}

func order(r *ProfileResult) string {
	var ids []string
	for _, d := range r.Digests {
		ids = append(ids, d.DigestText)
	}
	return strings.Join(ids, ",")
}

func TestOrderBy(t *testing.T) {
	for spec, want := range map[string]string{
		"query_time:sum":    "a,b,c,(other)",
		"Query_time:max":    "a,c,b,(other)",
		"query_time:cnt":    "b,c,a,(other)",
		"rows_examined":     "b,c,a,(other)",
		"Rows_examined:max": "c,b,a,(other)",
	} {
		o, err := ParseOrderBy(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		r := rankedRows()
		r.Sort(o)
		if got := order(r); got != want {
			t.Errorf("--order-by %s: %s, want %s", spec, got, want)
		}
	}
	for _, bad := range []string{"speed:sum", "query_time:avg", ""} {
		if _, err := ParseOrderBy(bad); err == nil {
			t.Errorf("--order-by %q accepted", bad)
		}
	}
}

func TestLimit(t *testing.T) {
	for spec, want := range map[string]string{
		"2":     "a,b",
		"10":    "a,b,c,(other)",
		"59%":   "a",
		"89%":   "a,b",
		"95%:1": "a",
		"100%":  "a,b,c,(other)",
	} {
		l, err := ParseLimit(spec)
		if err != nil {
			t.Fatalf("%s: %v", spec, err)
		}
		r := rankedRows()
		l.Apply(r, DefaultOrder)
		if got := order(r); got != want {
			t.Errorf("--limit %s: %s, want %s", spec, got, want)
		}
		if cut := got(r) < 4; cut != strings.Contains(strings.Join(r.Notes, "\n"), "showing") {
			t.Errorf("--limit %s: cut %v but notes %v", spec, cut, r.Notes)
		}
	}
	for _, bad := range []string{"0", "-1", "x", "0%", "101%", "95", "95%:0", "%"} {
		if bad == "95" {
			continue // 95 classes: valid
		}
		if _, err := ParseLimit(bad); err == nil {
			t.Errorf("--limit %q accepted", bad)
		}
	}
}

func got(r *ProfileResult) int { return len(r.Digests) }

func TestClassReportText(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	for i, s := range synthetic(600) {
		s.ServerUS = s.ClientUS / 2
		s.Conn, s.Joined, s.ClientUS = "", false, 0
		s.LockUS = int64(i % 7 * 10)
		s.RowsExamined = s.Rows * 3
		s.User, s.DB = "app", "shop"
		p.AddExtra(s, &Extra{Host: "web" + string(rune('1'+i%2)), RowsAffected: int64(i % 3),
			Plan: &Plan{Statements: 1, FullScan: int64(i % 2), TmpTables: 1}})
	}
	res := p.Result()
	var narrow, wide bytes.Buffer
	if err := WriteClassReport(&narrow, res, ClassTextOptions{Width: 90, Details: 2}); err != nil {
		t.Fatal(err)
	}
	if err := WriteClassReport(&wide, res, ClassTextOptions{Width: 200, Details: 2}); err != nil {
		t.Fatal(err)
	}
	golden(t, "classreport.txt", narrow.Bytes())
	for _, line := range strings.Split(narrow.String(), "\n") {
		if strings.HasPrefix(line, "   ") && len([]rune(line)) > 90 {
			t.Errorf("profile row wider than 90: %q", line)
		}
	}
	// the full digest text shows in the wide profile table, not in the narrow one
	long := "select * from big where k in (...)"
	if !strings.Contains(wide.String(), "  "+long+"\n") || strings.Count(narrow.String(), long) != 1 {
		t.Errorf("item column does not follow the width:\n%s", narrow.String())
	}
	for _, want := range []string{"# profile", "query ID", "V/M", "# class 1: ID 0x", "# query time distribution",
		"#  10ms  ####", "# databases      shop (", "# hosts          web", "# plan           full scan 51%", "95%", "stddev"} {
		if !strings.Contains(narrow.String(), want) {
			t.Errorf("report lacks %q", want)
		}
	}
}
