package report

import (
	"bytes"
	"encoding/xml"
	"errors"
	"io"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

// htmlFixtureStart is the fixture's first probe round: 2025-03-01 12:00:00 UTC.
var htmlFixtureStart = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).UnixMicro()

// htmlFixture is a deterministic report: a probe ramp in the style of the concurrency-cap case
// (1 to 64 running threads, latency flat up to 8 and exploding beyond),
// its knee finding, joined statements over two pool groups, an overhead
// table, a plan that flips, and text that must be escaped.
func htmlFixture() *HTMLData {
	r := &rng{s: 42}
	var probe []ProbePoint
	for i := range 32 {
		running := int64(1 + i*2)
		base := 800 + r.float()*200
		if running > 8 {
			base *= float64(running-8) * 3
		}
		probe = append(probe, ProbePoint{TimeUS: htmlFixtureStart + int64(i)*60e6, Name: "canary", Calls: 100,
			MinUS: int64(base * 0.6), MedianUS: int64(base), AvgUS: int64(base * 1.4), MaxUS: int64(base * 6),
			ThreadsRunning: running, ThreadsConnected: running + 4})
	}
	return &HTMLData{
		Title:      "gapscope report <test & \"quotes\">",
		Generated:  time.Date(2025, 3, 1, 13, 0, 0, 0, time.UTC),
		Source:     "/tmp/fixture.db",
		Runs:       []RunInfo{{ID: 1, StartUS: htmlFixtureStart, EndUS: htmlFixtureStart + 32*60e6, Command: "probe", DSN: "monitor:***@tcp(db1:3306)/"}},
		Probe:      probe,
		Statements: summarize(fixtureStatements(r)),
		Findings:   fixtureFindings(),
		Overhead: []OverheadRow{
			{Config: "ps-off", Verdict: VerdictBaseline, Rounds: 6, Pairs: 6, MedianTPS: 1982, MinTPS: 1900, MaxTPS: 2050, Ratio: 1, RatioLow: 1, RatioHigh: 1, AvgLatencyUS: 2010, P95LatencyUS: 3900},
			{Config: "ps-default", Verdict: VerdictWithin, Rounds: 6, Pairs: 6, MedianTPS: 1963, MinTPS: 1700, MaxTPS: 2100, Ratio: 0.99, RatioLow: 0.86, RatioHigh: 1.12, AvgLatencyUS: 2040, P95LatencyUS: 4100},
			{Config: "ps-all", Rounds: 6, Pairs: 6, MedianTPS: 1400, MinTPS: 1350, MaxTPS: 1460, Ratio: 0.71, RatioLow: 0.66, RatioHigh: 0.75, AvgLatencyUS: 2850, P95LatencyUS: 5600, Verdict: VerdictAbove},
			{Config: "optimizer-trace", Rounds: 6, Pairs: 6, MedianTPS: 1237, MinTPS: 1190, MaxTPS: 1300, Ratio: 0.62, RatioLow: 0.58, RatioHigh: 0.67, AvgLatencyUS: 3230, P95LatencyUS: 6400, Verdict: VerdictAbove},
			{Config: "gapscope-watch", Rounds: 6, Pairs: 6, MedianTPS: 1900, MinTPS: 1500, MaxTPS: 2200, Ratio: 0.96, RatioLow: 0.78, RatioHigh: 1.18, AvgLatencyUS: 2100, P95LatencyUS: 4300, Verdict: VerdictUnknown},
		},
		Plans: []PlanEntry{
			{TimeUS: htmlFixtureStart + 60e6, Digest: "d1", DigestText: "SELECT * FROM t JOIN u ON t.k = u.x WHERE u.y = ?", Source: "EXPLAIN",
				Plan: "id select_type table type key rows\n1 SIMPLE u ref y 10\n1 SIMPLE t ref k 1", ExecUS: 7000, RowsExamined: 20},
			{TimeUS: htmlFixtureStart + 600e6, ConnID: 17, Digest: "d1", DigestText: "SELECT * FROM t JOIN u ON t.k = u.x WHERE u.y = ?", Source: "SHOW EXPLAIN FOR",
				Plan: "id select_type table type key rows\n1 SIMPLE t index k 200000\n1 SIMPLE u eq_ref PRIMARY 1", ExecUS: 104000, RowsExamined: 200000},
		},
	}
}

// fixtureStatements: three digests over two pool groups for three minutes;
// group 0 queues (the thread-pool case), one digest stalls on its client (the slow-client case).
func fixtureStatements(r *rng) []event.Statement {
	texts := []string{"SELECT c FROM sbtest1 WHERE id = ?", "SELECT * FROM big_table", "UPDATE sbtest1 SET k = k + ? WHERE id = ? <script>alert(1)</script>"}
	var out []event.Statement
	for i := range 600 {
		d := i % 3
		g := i % 2
		st := event.Statement{Conn: "10.0.0.2:4000>10.0.0.1:3306", Cmd: "COM_QUERY", Digest: texts[d][:6] + string(rune('a'+d)),
			DigestText: texts[d], TReqFirst: htmlFixtureStart + int64(i)*300_000, Joined: i%7 != 0, PoolGroup: &g}
		st.RequestUS = 20 + int64(r.next()%30)
		st.ExecUS = 300 + int64(r.next()%500)
		if g == 0 && i > 200 && i < 400 {
			st.QueueUS = int64(r.next() % 2_000_000)
		}
		if d == 1 {
			st.SendStallUS = int64(r.next() % 900_000)
			st.DeliveryUS = 5000
		}
		st.ClientUS = st.RequestUS + st.QueueUS + st.ExecUS + st.SendStallUS + st.DeliveryUS
		st.TReqLast = st.TReqFirst + st.RequestUS
		st.TRespLast = st.TReqFirst + st.ClientUS
		out = append(out, st)
	}
	return out
}

func fixtureFindings() []event.Finding {
	return []event.Finding{
		{Code: "INSTRUMENTATION_COST", Severity: event.SeverityInfo, Summary: "ps-all costs 29% TPS",
			Evidence: map[string]any{"ratio": 0.71, "config": "ps-all"}, Fix: "Keep only the consumers you read."},
		{Code: "CONCURRENCY_KNEE", Severity: event.SeverityCritical,
			Summary:  "canary latency climbs above 8 running threads; thread_pool_size*(oversubscribe+1) = 8",
			Evidence: map[string]any{"knee_threads": 8.0, "cap_threads": 8.0, "cap_variable": "thread_pool_size*(thread_pool_oversubscribe+1)", "confidence": 0.93},
			Fix:      "Raise thread_pool_size or lower the application's concurrency."},
		{Code: "POOL_QUEUE", Severity: event.SeverityWarning, Summary: "statements waited in group 0's queue </td><b>",
			Evidence: map[string]any{"groups": []any{map[string]any{"group": 0.0, "max_queue_us": 1999000.0}}, "nul": "a\x00b"},
			Fix:      "SET GLOBAL thread_pool_stall_limit = 100"},
	}
}

func renderFixture(t *testing.T, d *HTMLData) string {
	t.Helper()
	var b bytes.Buffer
	if err := WriteHTML(&b, d); err != nil {
		t.Fatal(err)
	}
	return b.String()
}

func TestWriteHTMLGolden(t *testing.T) {
	htmlGolden(t, "report.html.golden", renderFixture(t, htmlFixture()))
}

func TestWriteHTMLEmptyGolden(t *testing.T) {
	htmlGolden(t, "report-empty.html.golden", renderFixture(t, &HTMLData{Generated: time.Date(2025, 3, 1, 13, 0, 0, 0, time.UTC)}))
}

// htmlGolden compares got with testdata/name, or rewrites it under -update.
func htmlGolden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if got != string(want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it); first difference at byte %d", name, firstDiff(got, string(want)))
	}
}

func firstDiff(a, b string) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

var svgRE = regexp.MustCompile(`(?s)<svg .*?</svg>`)

// TestHTMLChartsAreWellFormedSVG parses every chart as XML and checks it
// draws what its section promises.
func TestHTMLChartsAreWellFormedSVG(t *testing.T) {
	page := renderFixture(t, htmlFixture())
	svgs := svgRE.FindAllString(page, -1)
	want := map[string]struct {
		polylines, minRects, minCircles int
		texts                           []string
	}{
		"canary latency and threads over time":                         {3, 64, 96, []string{"canary latency (log)", "threads", "time (UTC)", "knee: 8 running = thread_pool_size*(thread_pool_oversubscribe+1)", "1 ms", "12:00", "Threads_running"}},
		"canary latency against Threads_running":                       {0, 0, 64, []string{"Threads_running", "canary latency (log)", "knee: 8"}},
		"decomposition of client time per digest":                      {0, 10, 0, []string{"queue", "send stall", "SELECT * FROM big_table", "total client time of joined statements"}},
		"queue wait per thread-pool group over time":                   {2, 0, 20, []string{"group 0", "group 1", "worst queue wait", "time (UTC)"}},
		"throughput ratio to the baseline per instrumentation setting": {0, 5, 0, []string{"ps-all", "optimizer-trace", "gapscope-watch", "TPS ratio to baseline (1 = no cost)"}},
	}
	if len(svgs) != len(want) {
		t.Fatalf("%d charts, want %d", len(svgs), len(want))
	}
	for _, svg := range svgs {
		c := parseSVG(t, svg)
		w, ok := want[c.label]
		if !ok {
			t.Errorf("unexpected chart %q", c.label)
			continue
		}
		if c.count["polyline"] < w.polylines || c.count["rect"] < w.minRects || c.count["circle"] < w.minCircles || c.count["path"] < 4 {
			t.Errorf("%s: %v elements, want at least %d polylines, %d rects, %d circles, 4 paths", c.label, c.count, w.polylines, w.minRects, w.minCircles)
		}
		for _, txt := range w.texts {
			if !c.texts[txt] {
				t.Errorf("%s: no text %q", c.label, txt)
			}
		}
		delete(want, c.label)
	}
}

type parsedSVG struct {
	label string
	count map[string]int
	texts map[string]bool
}

// parseSVG decodes svg strictly, checks every drawing element has non-empty
// geometry, and counts elements and collects text.
func parseSVG(t *testing.T, svg string) parsedSVG {
	t.Helper()
	p := parsedSVG{count: map[string]int{}, texts: map[string]bool{}}
	dec := xml.NewDecoder(strings.NewReader(svg))
	var stack []string
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("chart is not well-formed XML: %v", err)
		}
		switch x := tok.(type) {
		case xml.StartElement:
			p.count[x.Name.Local]++
			stack = append(stack, x.Name.Local)
			for _, a := range x.Attr {
				if x.Name.Local == "svg" && a.Name.Local == "aria-label" {
					p.label = a.Value
				}
				if (a.Name.Local == "d" || a.Name.Local == "points") && strings.TrimSpace(a.Value) == "" {
					t.Errorf("empty %s in <%s>", a.Name.Local, x.Name.Local)
				}
				if strings.Contains(a.Value, "NaN") || strings.Contains(a.Value, "Inf") {
					t.Errorf("<%s %s=%q>", x.Name.Local, a.Name.Local, a.Value)
				}
			}
		case xml.CharData:
			if len(stack) > 0 && stack[len(stack)-1] == "text" {
				p.texts[string(x)] = true
			}
		case xml.EndElement:
			stack = stack[:len(stack)-1]
		}
	}
	return p
}

// TestHTMLIsSelfContainedAndEscaped: no script, nothing fetched, and text
// from the data (digests, summaries, titles) cannot inject markup.
func TestHTMLIsSelfContainedAndEscaped(t *testing.T) {
	page := renderFixture(t, htmlFixture())
	for _, bad := range []string{"<script", "<b>", "</td><b>", "\x00", "src=", "@import", "url("} {
		if strings.Contains(page, bad) {
			t.Errorf("page contains %q", bad)
		}
	}
	links := regexp.MustCompile(`https?://[^"'\s<]+`).FindAllString(page, -1)
	for _, l := range links {
		if l != "http://www.w3.org/2000/svg" {
			t.Errorf("page refers to %s", l)
		}
	}
	for _, want := range []string{
		"&lt;script&gt;alert(1)&lt;/script&gt;", // digest text in the table, escaped
		"gapscope report &lt;test &amp; &#34;quotes&#34;&gt;",
		`<code>CONCURRENCY_KNEE</code> <span class="sev critical">critical</span>`,
		"thread_pool_size*(thread_pool_oversubscribe+1)",
		"the plan changed", "<details open>", "&#34;max_queue_us&#34;: 1999000",
	} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q", want)
		}
	}
	// most severe first
	if c, w, i := strings.Index(page, "CONCURRENCY_KNEE</code>"), strings.Index(page, "POOL_QUEUE</code>"), strings.Index(page, "INSTRUMENTATION_COST</code>"); !(c < w && w < i) {
		t.Errorf("findings not ordered by severity: %d %d %d", c, w, i)
	}
}

func TestHTMLLeavesOutEmptySections(t *testing.T) {
	page := renderFixture(t, &HTMLData{})
	for _, absent := range []string{"<svg", `id="probe"`, `id="statements"`, `id="overhead"`, `id="plans"`} {
		if strings.Contains(page, absent) {
			t.Errorf("empty report contains %q", absent)
		}
	}
	if !strings.Contains(page, "No findings.") {
		t.Error("empty report should say there are no findings")
	}
	// statements, none joined: the section explains why there is no chart
	unjoined := summarize([]event.Statement{{Conn: "c", Cmd: "COM_QUERY", SQL: "SELECT 1", TReqFirst: 1, Parts: event.Parts{ClientUS: 5}}})
	page = renderFixture(t, &HTMLData{Statements: unjoined})
	if !strings.Contains(page, "No statement was joined") || strings.Contains(page, "<svg") {
		t.Error("unjoined statements: want the explanation and no chart")
	}
}

func TestKneeFrom(t *testing.T) {
	fs := fixtureFindings()
	k := KneeFrom(fs)
	if k == nil || k.Threads != 8 || k.CapThreads != 8 || k.CapVariable != "thread_pool_size*(thread_pool_oversubscribe+1)" {
		t.Fatalf("KneeFrom = %+v", k)
	}
	fresh := []event.Finding{{Code: "CONCURRENCY_KNEE", Evidence: map[string]any{"knee_threads": 32}}}
	if k := KneeFrom(fresh); k == nil || k.Threads != 32 || k.CapVariable != "" {
		t.Errorf("int evidence: %+v", k)
	}
	broken := []event.Finding{{Code: "CONCURRENCY_KNEE", Evidence: map[string]any{"knee_threads": "many"}}}
	if k := KneeFrom(broken); k != nil {
		t.Errorf("non-numeric knee: %+v", k)
	}
}

func TestStatementSummaryQueueBounded(t *testing.T) {
	s := NewStatementSummary()
	var total int64
	g := 3
	for i := range 100_000 {
		q := int64(i % 1000)
		total += q
		s.Add(&event.Statement{Conn: "c", Cmd: "COM_QUERY", Digest: "x", DigestText: "SELECT ?", Joined: true,
			PoolGroup: &g, TReqFirst: htmlFixtureStart + int64(i)*1e6, Parts: event.Parts{QueueUS: q, ClientUS: q + 10, ExecUS: 10}})
	}
	series := s.PoolQueue()
	if len(series) != 1 || series[0].Group != 3 {
		t.Fatalf("series %+v", series)
	}
	gq := series[0]
	if len(gq.Points) > maxQueuePoints || gq.WidthUS <= 1e6 {
		t.Errorf("%d buckets of %d µs: not bounded", len(gq.Points), gq.WidthUS)
	}
	var sum, calls int64
	for _, p := range gq.Points {
		sum, calls = sum+p.TotalUS, calls+p.Calls
	}
	if sum != total || calls != 100_000 || gq.MaxUS != 999 {
		t.Errorf("coarsening lost data: total %d want %d, calls %d, max %d", sum, total, calls, gq.MaxUS)
	}
	rows := s.TopDecomposed(10)
	if len(rows) != 1 || rows[0].Parts.QueueUS != total {
		t.Errorf("decomposition %+v", rows)
	}
}

func BenchmarkWriteHTML(b *testing.B) {
	d := htmlFixture()
	b.ReportAllocs()
	for b.Loop() {
		if err := WriteHTML(io.Discard, d); err != nil {
			b.Fatal(err)
		}
	}
}

// TestWriteHTMLOddInputs: degenerate data (one round, equal times, zeros,
// negative and huge values, NaN ratios) still gives well-formed charts with
// finite coordinates.
func TestWriteHTMLOddInputs(t *testing.T) {
	g := -1
	cases := map[string]*HTMLData{
		"one round":   {Probe: []ProbePoint{{TimeUS: htmlFixtureStart, Name: "c", MedianUS: 500, AvgUS: 600, MaxUS: 900, ThreadsRunning: 3}}},
		"all zero":    {Probe: []ProbePoint{{Name: "c"}, {Name: "c"}}},
		"same time":   {Probe: []ProbePoint{{TimeUS: 5, Name: "c", MaxUS: 10}, {TimeUS: 5, Name: "c", MaxUS: 1e12}}},
		"negative":    {Probe: []ProbePoint{{TimeUS: -5e6, Name: "c", MedianUS: -3, MaxUS: -1, ThreadsRunning: -2}, {TimeUS: 1e6, Name: "c"}}},
		"decades":     {Probe: []ProbePoint{{TimeUS: 0, Name: "c", MaxUS: 1}, {TimeUS: 40 * 365 * 86400e6, Name: "c", MaxUS: 1}}},
		"extremes":    {Probe: []ProbePoint{{TimeUS: math.MinInt64, Name: "c", MaxUS: math.MaxInt64}, {TimeUS: math.MaxInt64, Name: "c", MaxUS: 1}}},
		"nan ratios":  {Overhead: []OverheadRow{{Config: "x", Ratio: math.NaN(), RatioLow: math.Inf(-1), RatioHigh: math.Inf(1)}}},
		"zero ratios": {Overhead: []OverheadRow{{Config: "x"}, {Config: "y", Ratio: -1}}},
		"knee beyond data": {Probe: []ProbePoint{{TimeUS: 1, Name: "c", MaxUS: 10}, {TimeUS: 2, Name: "c", MaxUS: 20}},
			Findings: []event.Finding{{Code: "CONCURRENCY_KNEE", Evidence: map[string]any{"knee_threads": 1e6, "cap_threads": math.NaN()}}}},
		"zero-time statements": {Statements: summarize([]event.Statement{
			{Conn: "c", Cmd: "COM_QUERY", Digest: "a", Joined: true, PoolGroup: &g, Parts: event.Parts{QueueUS: 5, ClientUS: 5}},
			{Conn: "c", Cmd: "COM_QUERY", Digest: "b", Joined: true, PoolGroup: &g, TReqFirst: -9e6, Parts: event.Parts{QueueUS: 7, ClientUS: 7}}})},
	}
	for name, d := range cases {
		page := renderFixture(t, d)
		for _, svg := range svgRE.FindAllString(page, -1) {
			if c := parseSVG(t, svg); c.count["text"] > 200 {
				t.Errorf("%s: %d labels in %q", name, c.count["text"], c.label)
			}
		}
		if t.Failed() {
			t.Fatalf("%s: bad chart", name)
		}
	}
}

// summarize is NewStatementSummary plus Add of each statement.
func summarize(sts []event.Statement) *StatementSummary {
	s := NewStatementSummary()
	for i := range sts {
		s.Add(&sts[i])
	}
	return s
}
