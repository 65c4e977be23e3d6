package report

import (
	"bytes"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/sqltext"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the current output")

// shape is one synthetic statement kind.
type shape struct {
	sql       string
	cmd       string
	minUS     int64   // fastest call
	spanUS    int64   // slowest call is minUS+spanUS
	skew      int     // u^skew: higher, longer tail
	rows      int64   // per call
	bytes     int64   // per call
	errEvery  int     // every n-th call fails (0: never)
	joined    bool    // joined with the server: parts are filled
	queueFrac float64 // of client time, when joined
	stallFrac float64
}

var shapes = []shape{
	{sql: "SELECT c FROM sbtest1 WHERE id = %d", cmd: "COM_QUERY", minUS: 80, spanUS: 4_000, skew: 6, rows: 1, bytes: 180, joined: true, queueFrac: 0.1},
	{sql: "SELECT 1", cmd: "COM_QUERY", minUS: 40, spanUS: 23_290_000, skew: 40, rows: 1, bytes: 61, joined: true, queueFrac: 0.97},
	{sql: "SELECT * FROM big WHERE k IN (%d, %d, 7)", cmd: "COM_QUERY", minUS: 2_000, spanUS: 5_100_000, skew: 8, rows: 38_000, bytes: 4_120_000, joined: true, queueFrac: 0.01, stallFrac: 0.8},
	{sql: "UPDATE sbtest2 SET k = k + 1 WHERE id = %d", cmd: "COM_QUERY", minUS: 300, spanUS: 60_000, skew: 5, errEvery: 50},
	{sql: "INSERT INTO t (a, b) VALUES (%d, 'x'), (%d, 'y')", cmd: "COM_STMT_EXECUTE", minUS: 500, spanUS: 2_000, skew: 2, rows: 0, bytes: 11},
	{cmd: "COM_PING", minUS: 20, spanUS: 100, skew: 1, bytes: 11},
}

// synthetic returns a deterministic statement set: every shape interleaved
// over 12 connections and 60 seconds, some joined, some failing.
func synthetic(n int) []*event.Statement {
	r := &rng{42}
	norm := sqltext.NewNormalizer(0)
	const t0 = 1795304997000000
	out := make([]*event.Statement, 0, n)
	for i := range n {
		sh := shapes[r.next()%uint64(len(shapes))]
		u := r.float()
		lat := sh.minUS + int64(float64(sh.spanUS)*math.Pow(u, float64(sh.skew)))
		s := &event.Statement{
			Conn:      fmt.Sprintf("10.0.0.%d:5%04d>10.0.0.1:3306", 2+i%3, i%12),
			ConnID:    uint64(100 + i%12),
			Cmd:       sh.cmd,
			TReqFirst: t0 + int64(i)*60_000_000/int64(n),
			Parts:     event.Parts{ClientUS: lat},
			Rows:      sh.rows,
			RespBytes: sh.bytes,
		}
		s.TReqLast = s.TReqFirst + 5
		s.TRespLast = s.TReqFirst + lat
		if sh.sql != "" {
			args := []any{r.next() % 1000, r.next() % 1000}
			raw := fmt.Sprintf(sh.sql, args[:strings.Count(sh.sql, "%d")]...)
			s.DigestText, s.Digest = norm.Normalize([]byte(raw))
			s.SQL = s.DigestText
		}
		if sh.errEvery > 0 && i%sh.errEvery == 0 {
			s.Error = &event.Error{Code: 1213, State: "40001", Msg: "Deadlock found when trying to get lock"}
		}
		if sh.joined {
			join(s, sh)
		}
		if i%97 == 0 {
			s.Notes = []string{"retransmission in response"}
		}
		out = append(out, s)
	}
	return out
}

// join fills the five parts so that they sum to ClientUS, as join does.
func join(s *event.Statement, sh shape) {
	s.Joined = true
	s.RequestUS = min(5, s.ClientUS)
	rest := s.ClientUS - s.RequestUS
	s.QueueUS = int64(float64(rest) * sh.queueFrac)
	s.SendStallUS = int64(float64(rest) * sh.stallFrac)
	s.DeliveryUS = min(rest-s.QueueUS-s.SendStallUS, 10)
	s.ExecUS = rest - s.QueueUS - s.SendStallUS - s.DeliveryUS
	s.ServerUS = s.ExecUS + s.SendStallUS
	if sh.stallFrac > 0 {
		s.ZeroWindowUS = s.SendStallUS
	}
}

func syntheticProfile(t *testing.T) *Profile {
	t.Helper()
	p := NewProfile(ProfileOptions{})
	for _, s := range synthetic(3000) {
		p.Add(s)
	}
	p.AddNote("capture: 3 packets dropped by the kernel")
	p.AddNote("capture: 3 packets dropped by the kernel")
	return p
}

func golden(t *testing.T, name string, got []byte) {
	t.Helper()
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.MkdirAll("testdata", 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, got, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test -update to create it)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, got)
	}
}

func TestProfileGolden(t *testing.T) {
	res := syntheticProfile(t).Result()
	var text, js bytes.Buffer
	if err := WriteProfileText(&text, res, 10, DefaultWidth); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	golden(t, "profile.txt", text.Bytes())
	golden(t, "profile.json", js.Bytes())
}

func TestEventsGolden(t *testing.T) {
	var b bytes.Buffer
	w := NewEventWriter(&b)
	for _, s := range synthetic(3000)[:25] {
		if err := w.Write(s); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	golden(t, "events.jsonl", b.Bytes())
}

// TestProfileTotals checks the aggregates against sums computed here.
func TestProfileTotals(t *testing.T) {
	stmts := synthetic(3000)
	p := NewProfile(ProfileOptions{})
	type sums struct{ calls, total, rows, bytes, errs, max int64 }
	want := map[string]*sums{}
	for _, s := range stmts {
		p.Add(s)
		d, _ := digestOf(s)
		if want[d] == nil {
			want[d] = &sums{}
		}
		w := want[d]
		w.calls++
		w.total += s.ClientUS
		w.rows += s.Rows
		w.bytes += s.RespBytes
		w.max = max(w.max, s.ClientUS)
		if s.Error != nil {
			w.errs++
		}
	}
	res := p.Result()
	if res.Statements != 3000 || res.Connections != 12 || len(res.Digests) != len(shapes) {
		t.Fatalf("statements %d connections %d digests %d, want 3000 12 %d", res.Statements, res.Connections, len(res.Digests), len(shapes))
	}
	for i, d := range res.Digests {
		w := want[d.Digest]
		got := sums{d.Calls, d.TotalUS, d.Rows, d.RespBytes, d.Errors, d.MaxUS}
		if got != *w {
			t.Errorf("%s: got %+v, want %+v", d.DigestText, got, *w)
		}
		if i > 0 && d.TotalUS > res.Digests[i-1].TotalUS {
			t.Errorf("digest %d has more total time than %d: not sorted", i, i-1)
		}
		if !(d.P50US <= d.P95US && d.P95US <= d.P99US && d.P99US <= d.MaxUS) {
			t.Errorf("%s: quantiles out of order: %d %d %d max %d", d.DigestText, d.P50US, d.P95US, d.P99US, d.MaxUS)
		}
		if d.Parts != nil {
			p := d.Parts
			if sum := p.RequestUS + p.QueueUS + p.ExecUS + p.SendStallUS + p.DeliveryUS; sum != p.ClientUS || p.ClientUS != d.TotalUS {
				t.Errorf("%s: parts sum %d, client %d, total %d", d.DigestText, sum, p.ClientUS, d.TotalUS)
			}
		}
	}
	if res.ByCommand["COM_PING"] == 0 || res.ByCommand["COM_STMT_EXECUTE"] == 0 {
		t.Errorf("by_command %v misses commands", res.ByCommand)
	}
}

// TestQuantileAccuracy: the sketch's quantiles are within 1% of the exact
// ones on random data spanning five orders of magnitude.
func TestQuantileAccuracy(t *testing.T) {
	r := &rng{7}
	p := NewProfile(ProfileOptions{})
	vals := make([]int64, 100_000)
	for i := range vals {
		// log-uniform from 100 µs to 10 s
		vals[i] = int64(100 * math.Pow(10, 5*r.float()))
		p.Add(&event.Statement{Cmd: "COM_QUERY", DigestText: "select ?", Parts: event.Parts{ClientUS: vals[i]}})
	}
	slices.Sort(vals)
	d := p.Result().Digests[0]
	for _, c := range []struct {
		q   float64
		got int64
	}{{0.50, d.P50US}, {0.95, d.P95US}, {0.99, d.P99US}} {
		exact := vals[int(c.q*float64(len(vals)-1))]
		if diff := math.Abs(float64(c.got - exact)); diff > 0.01*float64(exact)+1 {
			t.Errorf("p%.0f = %d, exact %d: off by %.2f%%", c.q*100, c.got, exact, 100*diff/float64(exact))
		}
	}
	if d.MaxUS != vals[len(vals)-1] {
		t.Errorf("max %d, want %d", d.MaxUS, vals[len(vals)-1])
	}
}

// TestDigestCap: beyond the budget, statements go to "(other)" until a
// digest's time there surely exceeds the smallest row's; it then takes
// that row's place. Every statement is counted once, in a row or in
// "(other)".
func TestDigestCap(t *testing.T) {
	p := NewProfile(ProfileOptions{MaxDigests: 3})
	for i := range 10 {
		for range i + 1 {
			p.Add(&event.Statement{Cmd: "COM_QUERY", DigestText: fmt.Sprintf("select c%d from t", i), Parts: event.Parts{ClientUS: 100}})
		}
	}
	res := p.Result()
	if len(res.Digests) != 4 {
		t.Fatalf("%d rows, want 3 digests + (other)", len(res.Digests))
	}
	var calls int64
	for _, d := range res.Digests {
		calls += d.Calls
	}
	if calls != 55 || res.Statements != 55 {
		t.Errorf("rows hold %d calls of %d statements, want 55", calls, res.Statements)
	}
	if top := res.Digests[0].DigestText; top != "select c9 from t" {
		t.Errorf("top row %q, want the digest with most time, select c9 from t", top)
	}
	if other := res.Digests[3]; other.DigestText != otherText {
		t.Errorf("last row %q, want %s", other.DigestText, otherText)
	}
	notes := strings.Join(res.Notes, "\n")
	if !strings.Contains(notes, "digests beyond the 3-digest limit") || !strings.Contains(notes, "got a row of their own") {
		t.Errorf("notes %q say neither the limit nor the promotions", res.Notes)
	}
}

// TestDigestBudgetHighCardinality builds 500,000 distinct digests (an ORM
// naming aliases per call) through a profile at the default budget: the
// heap stays bounded and a slow digest that starts late ranks first.
func TestDigestBudgetHighCardinality(t *testing.T) {
	const distinct = 500_000
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	p := NewProfile(ProfileOptions{})
	addDistinctDigests(p, distinct)
	runtime.GC()
	runtime.ReadMemStats(&after)
	res := p.Result()
	if top := res.Digests[0]; top.Digest != plantedDigest {
		t.Errorf("top row %s (%d calls, %d µs), want the planted slow digest", top.Digest, top.Calls, top.TotalUS)
	}
	if n := len(res.Digests); n != DefaultMaxDigests+1 {
		t.Errorf("%d rows, want the %d-digest budget and (other)", n, DefaultMaxDigests)
	}
	// Measured 28 MB (about 2 KB a row, a few MB of hashes); a profile
	// that kept every digest held 10x more.
	const bound = 64 << 20
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if grew > bound {
		t.Errorf("heap grew %d MB for %d distinct digests, bound %d MB", grew>>20, distinct, bound>>20)
	}
	runtime.KeepAlive(p)
}

const plantedDigest = "planted-slow"

// addDistinctDigests adds n distinct digests of 1 to 3 calls of 50-500 µs,
// from as many connections, and from the middle on one slow digest every
// 1,000 statements.
func addDistinctDigests(p *Profile, n int) {
	r := &rng{7}
	s := &event.Statement{Cmd: "COM_QUERY", User: "app", DB: "shop", TReqFirst: 1795304997000000, Joined: true}
	slow := &event.Statement{Cmd: "COM_QUERY", Digest: plantedDigest, DigestText: "select sleep(?)", Parts: event.Parts{ClientUS: 20_000},
		Conn: "10.0.0.9:4000>10.0.0.2:3306", TReqFirst: s.TReqFirst}
	for i := range n {
		s.Digest = fmt.Sprintf("%032x", i)
		s.DigestText = fmt.Sprintf("select a%d from t where id = ?", i)
		s.SQL = s.DigestText
		s.Conn = fmt.Sprintf("10.%d.%d.%d:3306>10.0.0.2:3306", i>>16&255, i>>8&255, i&255)
		for range 1 + r.next()%3 {
			s.TReqFirst++
			s.ClientUS = 50 + int64(r.next()%450)
			p.Add(s)
		}
		if i > n/2 && i%1000 == 0 {
			p.Add(slow)
		}
	}
}

// TestDigestPromotion: a digest that turns hot after the budget filled
// gets its row; the statements it had in "(other)" stay there.
func TestDigestPromotion(t *testing.T) {
	p := NewProfile(ProfileOptions{MaxDigests: 2})
	add := func(digest string, us int64, n int) {
		for range n {
			p.Add(&event.Statement{Cmd: "COM_QUERY", Digest: digest, DigestText: digest, Parts: event.Parts{ClientUS: us}})
		}
	}
	add("a", 100, 10) // weight 1,010
	add("b", 100, 20) // 2,020
	add("c", 100, 5)  // 505 beyond the budget: not above a's 1,010, to (other)
	add("c", 1000, 1) // 1,506: surely above a's, promoted; a goes to (other)
	res := p.Result()
	rows := map[string]DigestRow{}
	for _, d := range res.Digests {
		rows[d.DigestText] = d
	}
	if _, ok := rows["a"]; ok {
		t.Errorf("a kept its row: %+v", res.Digests)
	}
	if c := rows["c"]; c.Calls != 1 || c.TotalUS != 1000 {
		t.Errorf("c's row: %d calls %d µs, want the 1 call after its promotion", c.Calls, c.TotalUS)
	}
	if o := rows[otherText]; o.Calls != 15 || o.TotalUS != 1500 {
		t.Errorf("(other): %d calls %d µs, want a's 10 and c's first 5", o.Calls, o.TotalUS)
	}
	// a comes back: its weight (1,010) went back to the candidates, so
	// one more call of it surely outweighs c's row (1,506 with its credit)
	// only once it passes it.
	add("a", 100, 5)
	if _, ok := p.digests["a"]; !ok {
		t.Errorf("a (1,515 with its past) did not take c's place (1,506)")
	}
}

func TestNotesBounded(t *testing.T) {
	p := NewProfile(ProfileOptions{})
	// Letters, not numbers: statement notes are counted by kind, numbers
	// folded (TestProfileCountsNoteKinds).
	noteN := func(i int) string { return "note " + strings.Repeat("x", i+1) }
	for i := range maxNotes + 10 {
		p.AddNote(noteN(i))
		p.AddNote(noteN(0))
	}
	p.Add(&event.Statement{Cmd: "COM_QUERY", Notes: []string{noteN(1)}})
	notes := p.Result().Notes
	if len(notes) != maxNotes+1 {
		t.Fatalf("%d notes, want %d + a summary", len(notes), maxNotes)
	}
	if notes[0] != noteN(0) || notes[1] != noteN(1)+" (1 statement)" || !strings.HasPrefix(notes[maxNotes], "10 more notes") {
		t.Errorf("notes %q ... %q", notes[:2], notes[maxNotes])
	}
}

// TestSlowLogGolden: a server-latency profile (slow log) shows rows
// examined and lock time instead of zero-window time.
func TestSlowLogGolden(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	for i, s := range synthetic(600) {
		s.ServerUS = s.ClientUS / 2
		s.Conn, s.Joined, s.ClientUS = "", false, 0
		s.LockUS = int64(i % 7 * 10)
		s.RowsExamined = s.Rows * 3
		p.Add(s)
	}
	res := p.Result()
	var text, js bytes.Buffer
	if err := WriteProfileText(&text, res, 0, DefaultWidth); err != nil {
		t.Fatal(err)
	}
	if err := WriteJSON(&js, res.Digests[0]); err != nil {
		t.Fatal(err)
	}
	golden(t, "slowlog.txt", text.Bytes())
	golden(t, "slowlog-digest.json", js.Bytes())
}

func TestServerLatencyMetric(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	p.Add(&event.Statement{Cmd: "COM_QUERY", DigestText: "select ?", Parts: event.Parts{ClientUS: 900}, ServerUS: 300, ConnID: 8, TReqFirst: 1_000_000})
	p.Add(&event.Statement{Cmd: "COM_QUERY", DigestText: "select ?", ServerUS: 100, ConnID: 9, TReqFirst: 2_000_000})
	res := p.Result()
	d := res.Digests[0]
	if res.Metric != "server" || d.TotalUS != 400 || d.MaxUS != 300 || res.Connections != 2 {
		t.Errorf("metric %s total %d max %d conns %d, want server 400 300 2", res.Metric, d.TotalUS, d.MaxUS, res.Connections)
	}
	if res.FirstUS != 1_000_000 || res.LastUS != 2_000_100 {
		t.Errorf("span %d..%d", res.FirstUS, res.LastUS)
	}
	if d.Digest != sqltext.Digest("select ?") {
		t.Errorf("digest %s not computed from the text", d.Digest)
	}
}

func TestDuration(t *testing.T) {
	for us, want := range map[int64]string{
		0: "0µs", 999: "999µs", 1000: "1.00ms", 12_345: "12.3ms", 999_499: "999ms", 999_500: "1.00s",
		1_234_567: "1.23s", 59_949_999: "59.9s", 59_950_000: "1m00s", 123_000_000: "2m03s", 3_723_000_000: "1h02m",
	} {
		if got := duration(us); got != want {
			t.Errorf("duration(%d) = %q, want %q", us, got, want)
		}
	}
	for n, want := range map[int64]string{0: "0", 999: "999", 1000: "1,000", 999_999: "999,999", 1_234_567: "1.23M", 2_000_000_000: "2.00G"} {
		if got := count(n); got != want {
			t.Errorf("count(%d) = %q, want %q", n, got, want)
		}
	}
}

func TestFitText(t *testing.T) {
	if got := fit("select\n*\tfrom t", 40); got != "select * from t" {
		t.Errorf("fit kept control characters: %q", got)
	}
	if got := fit("select é from a_long_table_name", 10); got != "select é …" {
		t.Errorf("fit = %q", got)
	}
}

func TestFindingsGolden(t *testing.T) {
	findings := []event.Finding{
		{Code: "INSTRUMENTATION_COST", Severity: event.SeverityInfo, Summary: "performance_schema consumers cost 29% TPS",
			Evidence: map[string]any{"ratio": 0.71, "tps_off": 1982.0, "tps_all": 1400}, Fix: "Enable only the statements consumers."},
		{Code: "POOL_QUEUE", Severity: event.SeverityCritical, Summary: "SELECT 1 waited 23.3 s in thread-pool group 0\nbefore it ran",
			Evidence: map[string]any{"queue_us": int64(23_289_000), "exec_us": 120, "group": 0, "stall_limit_ms": "60000"},
			Fix:      "Lower thread_pool_stall_limit or raise thread_pool_size."},
		{Code: "CLIENT_BACKPRESSURE", Severity: event.SeverityWarning, Summary: "the client stopped reading for 5.0 s",
			Evidence: map[string]any{"send_stall_us": 5_034_000, "bytes_before_stall": "4.12MB", "tiny": 0.000123}},
	}
	var b bytes.Buffer
	if err := WriteFindingsText(&b, findings); err != nil {
		t.Fatal(err)
	}
	golden(t, "findings.txt", b.Bytes())
	b.Reset()
	WriteFindingsText(&b, nil)
	if b.String() != "no findings\n" {
		t.Errorf("no findings: %q", b.String())
	}
}

func TestProfileAddNoAlloc(t *testing.T) {
	stmts := synthetic(500)
	p := NewProfile(ProfileOptions{})
	for _, s := range stmts {
		p.Add(s) // warm: rows, connections, sketch bins exist
	}
	i := 0
	allocs := testing.AllocsPerRun(2000, func() {
		p.Add(stmts[i%len(stmts)])
		i++
	})
	if allocs != 0 {
		t.Errorf("Profile.Add allocates %.2f times per known statement, want 0", allocs)
	}
}

func TestEmptyProfile(t *testing.T) {
	res := NewProfile(ProfileOptions{}).Result()
	var js, text bytes.Buffer
	if err := WriteJSON(&js, res); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(js.String(), `"digests": []`) || !strings.Contains(js.String(), `"notes": []`) {
		t.Errorf("empty profile JSON has null lists:\n%s", js.String())
	}
	if err := WriteProfileText(&text, res, 5, DefaultWidth); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(text.String(), "# 0 statements, 0 connections, 0 digests") {
		t.Errorf("empty profile text:\n%s", text.String())
	}
}
