package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/collect/slowlog"
	"github.com/gapscope/gapscope/internal/event"
)

const ptdigestLog = slowlogDir + "/mariadb-10.11-ptdigest.log.gz"

type optionsJSON struct {
	Statements int64 `json:"statements"`
	Classes    int64 `json:"classes"`
	TotalUS    int64 `json:"total_us"`
	Digests    []struct {
		Digest     string `json:"digest"`
		DigestText string `json:"digest_text"`
		Calls      int64  `json:"calls"`
		TotalUS    int64  `json:"total_us"`
		MinUS      int64  `json:"min_us"`
		MaxUS      int64  `json:"max_us"`
		Attributes struct {
			RowsExamined struct {
				Max int64 `json:"max"`
			} `json:"rows_examined"`
		} `json:"attributes"`
	} `json:"digests"`
	Notes []string `json:"notes"`
}

func digestJSONWith(t *testing.T, args ...string) optionsJSON {
	t.Helper()
	out, err := runDigestCmd(t, nil, append([]string{"--format", "json", "--tz", "UTC"}, args...)...)
	if err != nil {
		t.Fatalf("digest %v: %v", args, err)
	}
	var r optionsJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	return r
}

// logStarts reads the fixture's statements' start times, independently of
// the profile.
func logStarts(t *testing.T) []int64 {
	t.Helper()
	var starts []int64
	opts := slowlog.ReadOptions{Parse: slowlog.Options{Location: time.UTC}}
	_, err := slowlog.ReadFile(context.Background(), ptdigestLog, opts, func(s *event.Statement, _ *slowlog.Event) {
		starts = append(starts, s.TReqFirst)
	})
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(starts)
	return starts
}

func TestDigestGroupBy(t *testing.T) {
	byDigest := digestJSONWith(t, ptdigestLog)
	byFP := digestJSONWith(t, "--group-by", "fingerprint", ptdigestLog)
	if byFP.Statements != byDigest.Statements || byFP.TotalUS != byDigest.TotalUS {
		t.Errorf("grouping changed the totals: %d/%d statements, %d/%d µs", byFP.Statements, byDigest.Statements, byFP.TotalUS, byDigest.TotalUS)
	}
	// pt-query-digest's classes fold digits in names ("sbtest1" is
	// "sbtest?"); the server-like digest keeps them.
	i := slices.IndexFunc(byFP.Digests, func(d struct {
		Digest     string `json:"digest"`
		DigestText string `json:"digest_text"`
		Calls      int64  `json:"calls"`
		TotalUS    int64  `json:"total_us"`
		MinUS      int64  `json:"min_us"`
		MaxUS      int64  `json:"max_us"`
		Attributes struct {
			RowsExamined struct {
				Max int64 `json:"max"`
			} `json:"rows_examined"`
		} `json:"attributes"`
	}) bool {
		return d.DigestText == "select c from sbtest? where id=?"
	})
	if i < 0 || byFP.Digests[i].Calls != 400 || len(byFP.Digests[i].Digest) != 32 {
		t.Errorf("no 400-call fingerprint class with a 32-digit Query ID: %+v", byFP.Digests)
	}
	if byFP.Classes != int64(len(byFP.Digests)) || byDigest.Classes < byFP.Classes {
		t.Errorf("classes: %d by fingerprint (%d rows), %d by digest", byFP.Classes, len(byFP.Digests), byDigest.Classes)
	}
}

func TestDigestOrderByAndLimit(t *testing.T) {
	r := digestJSONWith(t, "--order-by", "rows_examined:max", ptdigestLog)
	for i := 1; i < len(r.Digests); i++ {
		if r.Digests[i].Attributes.RowsExamined.Max > r.Digests[i-1].Attributes.RowsExamined.Max {
			t.Fatalf("not ranked by rows_examined:max at %d", i)
		}
	}
	r = digestJSONWith(t, "--order-by", "Query_time:cnt", "--limit", "3", ptdigestLog)
	if len(r.Digests) != 3 || r.Classes < 10 || r.Digests[0].Calls < r.Digests[1].Calls {
		t.Errorf("--limit 3 by calls: %d rows of %d classes", len(r.Digests), r.Classes)
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasPrefix(n, "showing 3 of") }) {
		t.Errorf("no note for the cut: %v", r.Notes)
	}
	all := digestJSONWith(t, ptdigestLog)
	r = digestJSONWith(t, "--limit", "50%", ptdigestLog)
	var run int64
	for _, d := range r.Digests {
		run += d.TotalUS
	}
	last := r.Digests[len(r.Digests)-1].TotalUS
	if 2*run < all.TotalUS || 2*(run-last) >= all.TotalUS {
		t.Errorf("--limit 50%%: %d rows make %d of %d µs", len(r.Digests), run, all.TotalUS)
	}
	// text: --limit overrides --top
	out, err := runDigestCmd(t, nil, "--limit", "2", "--top", "5", "--width", "100", ptdigestLog)
	if err != nil || strings.Count(out, "\n# class ") != 2 {
		t.Errorf("text with --limit 2 (%v):\n%s", err, out)
	}
}

func TestDigestFilter(t *testing.T) {
	all := digestJSONWith(t, ptdigestLog)
	r := digestJSONWith(t, "--filter", "query_time >= 1ms and db = 'sbtest*'", ptdigestLog)
	var slow int64
	for _, d := range r.Digests {
		slow += d.Calls
		if d.MinUS < 1000 {
			t.Errorf("%q: min %d µs passed query_time >= 1ms", d.DigestText, d.MinUS)
		}
	}
	if slow == 0 || slow != r.Statements || r.Statements >= all.Statements {
		t.Errorf("filtered %d statements (%d in classes) of %d", r.Statements, slow, all.Statements)
	}
	note := fmt.Sprintf("%d statements left out by --filter", all.Statements-r.Statements)
	if !slices.Contains(r.Notes, note) {
		t.Errorf("notes %v lack %q", r.Notes, note)
	}
}

func TestDigestSinceUntil(t *testing.T) {
	starts := logStarts(t)
	first, end := starts[0], starts[len(starts)-1]
	// the first whole second after the first statement: the log spans a
	// few seconds
	mid := time.UnixMicro(first).UTC().Truncate(time.Second).Add(time.Second)
	count := func(from, to int64) int64 {
		var n int64
		for _, s := range starts {
			if s >= from && (to == 0 || s < to) {
				n++
			}
		}
		return n
	}
	since := digestJSONWith(t, "--since", mid.Format(time.RFC3339), ptdigestLog)
	until := digestJSONWith(t, "--until", mid.Format("2006-01-02 15:04:05"), ptdigestLog)
	if want := count(mid.UnixMicro(), 0); since.Statements != want || want == 0 {
		t.Errorf("--since %s: %d statements, want %d", mid, since.Statements, want)
	}
	if want := count(0, mid.UnixMicro()); until.Statements != want || want == 0 {
		t.Errorf("--until %s: %d statements, want %d", mid, until.Statements, want)
	}
	// a duration counts back from the log's last statement
	rel := digestJSONWith(t, "--since", "500ms", ptdigestLog)
	if want := count(end-500_000, 0); rel.Statements != want || want == 0 {
		t.Errorf("--since 500ms: %d statements, want %d", rel.Statements, want)
	}
	if since.Statements+until.Statements != int64(len(starts)) {
		t.Errorf("since %d + until %d != %d", since.Statements, until.Statements, len(starts))
	}
}

func TestDigestOptionErrors(t *testing.T) {
	for _, c := range []struct {
		args []string
		msg  string
	}{
		{[]string{"--filter", "query_time >"}, "--filter: column 13: expected a value"},
		{[]string{"--filter", "db ~ x"}, "--filter: column 4"},
		{[]string{"--filter", "exec('x') = 1"}, "unknown field"},
		{[]string{"--order-by", "speed:sum"}, "unknown attribute"},
		{[]string{"--order-by", "query_time:avg"}, "not sum, max or cnt"},
		{[]string{"--limit", "0"}, "--limit"},
		{[]string{"--limit", "150%"}, "--limit"},
		{[]string{"--group-by", "table"}, "--group-by"},
		{[]string{"--since", "yesterday"}, "--since"},
		{[]string{"--until", "2024-13-01"}, "--until"},
		{[]string{"--width", "10"}, "--width"},
		// an empty window is a mistake, not an empty profile
		{[]string{"--since", "2024-05-06T10:00:00Z", "--until", "2024-05-06T09:00:00Z"}, "--since is not before --until"},
		{[]string{"--since", "1h", "--until", "2h"}, "--since is not before --until"},
	} {
		_, err := runDigestCmd(t, nil, append(c.args, ptdigestLog)...)
		if exitCode(err) != exitUsage || err == nil || !strings.Contains(err.Error(), c.msg) {
			t.Errorf("digest %v: exit %d (%v), want %d with %q", c.args, exitCode(err), err, exitUsage, c.msg)
		}
	}
	if _, err := runDigestCmd(t, nil, "--since", "1h", "-"); exitCode(err) != exitUsage {
		t.Errorf("relative --since on stdin: exit %d (%v)", exitCode(err), err)
	}
}

func TestAnalyzeReportOptions(t *testing.T) {
	capture := "../../testdata/captures/sysbench-text.pcap.gz"
	port := fixturePort(t, "../../testdata/captures/sysbench-text.expect.json")
	out, err := runAnalyzeCmd(t, "--format", "json", "--port", fmt.Sprint(port), "--limit", "2",
		"--order-by", "bytes_sent:sum", "--filter", "client_time > 100us", capture)
	if err != nil {
		t.Fatal(err)
	}
	var r optionsJSON
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatal(err)
	}
	if len(r.Digests) != 2 || r.Classes <= 2 {
		t.Errorf("--limit 2: %d rows of %d", len(r.Digests), r.Classes)
	}
	for _, d := range r.Digests {
		if d.MinUS <= 100 {
			t.Errorf("%q: min %d µs passed client_time > 100us", d.DigestText, d.MinUS)
		}
	}
	if !slices.ContainsFunc(r.Notes, func(n string) bool { return strings.HasSuffix(n, "left out by --filter") }) {
		t.Errorf("no filter note: %v", r.Notes)
	}
	if _, err := runAnalyzeCmd(t, "--filter", "rows_sent >> 1", capture); exitCode(err) != exitUsage {
		t.Errorf("bad --filter: exit %d (%v)", exitCode(err), err)
	}
	if _, err := runAnalyzeCmd(t, "--since", "1h", capture); exitCode(err) != exitUsage {
		t.Errorf("relative --since: exit %d (%v)", exitCode(err), err)
	}
}

// The profile table's item column follows the terminal's width (COLUMNS
// here; a tty's size otherwise) and --width; piped output keeps 120.
func TestDigestTextWidth(t *testing.T) {
	widest := func(out string) int {
		w := 0
		for _, l := range strings.Split(out, "\n") {
			if strings.HasPrefix(l, "   ") && strings.Contains(l, " 0x") { // profile rows
				w = max(w, len([]rune(l)))
			}
		}
		return w
	}
	t.Setenv("COLUMNS", "")
	out, err := runDigestCmd(t, nil, "--group-by", "fingerprint", ptdigestLog)
	if err != nil || widest(out) != 120 {
		t.Errorf("default width: widest profile row %d (%v)", widest(out), err)
	}
	t.Setenv("COLUMNS", "200")
	out, err = runDigestCmd(t, nil, "--group-by", "fingerprint", ptdigestLog)
	if err != nil || widest(out) != 200 {
		t.Errorf("COLUMNS=200: widest profile row %d (%v)", widest(out), err)
	}
	out, err = runDigestCmd(t, nil, "--group-by", "fingerprint", "--width", "90", "--top", "0", ptdigestLog)
	if err != nil || widest(out) != 90 {
		t.Errorf("--width 90: widest profile row %d (%v)", widest(out), err)
	}
	// the detail sections print every class's text whole
	if !strings.Contains(out, "\ncreate table sbtest?( id integer not ? auto_increment, k integer default ? not ?, c char(?) default ? not ?, pad char(?) default ? not ?, primary key (id) ) /*! engine = innodb */\n") {
		t.Errorf("full class text missing:\n%s", out)
	}
}

// The sample is the slowest call, its literals redacted unless
// --keep-literals.
func TestDigestSampleLiterals(t *testing.T) {
	sample := func(args ...string) string {
		out, err := runDigestCmd(t, nil, append([]string{"--format", "json", "--group-by", "fingerprint", "--limit", "1"}, args...)...)
		if err != nil {
			t.Fatal(err)
		}
		var r struct {
			Digests []struct {
				Sample struct {
					SQL     string `json:"sql"`
					Latency int64  `json:"latency_us"`
				} `json:"sample"`
				MaxUS int64 `json:"max_us"`
			} `json:"digests"`
		}
		if err := json.Unmarshal([]byte(out), &r); err != nil || len(r.Digests) != 1 {
			t.Fatalf("%v: %s", err, out)
		}
		if d := r.Digests[0]; d.Sample.Latency != d.MaxUS {
			t.Errorf("sample latency %d, max %d", d.Sample.Latency, d.MaxUS)
		}
		return r.Digests[0].Sample.SQL
	}
	if got := sample(ptdigestLog); got != "select sleep(?)" {
		t.Errorf("redacted sample %q", got)
	}
	if got := sample("--keep-literals", ptdigestLog); got != "SELECT SLEEP(0.2)" {
		t.Errorf("--keep-literals sample %q", got)
	}
}
