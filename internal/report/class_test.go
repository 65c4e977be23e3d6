package report

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
)

func serverStmt(us int64, db, user string) *event.Statement {
	return &event.Statement{Cmd: "COM_QUERY", DigestText: "select ?", SQL: "select ?", ServerUS: us, DB: db, User: user}
}

// A one-call class's percentiles are its only value; two calls 36 µs and
// 275 µs give p95 = p99 = 275 µs, as pt-query-digest reports them.
func TestExactPercentilesSmallClasses(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	p.Add(serverStmt(3_140_000, "a", "u"))
	d := p.Result().Digests[0]
	if d.P50US != 3_140_000 || d.P95US != 3_140_000 || d.P99US != 3_140_000 || d.MinUS != 3_140_000 || d.StddevUS != 0 {
		t.Errorf("one call: p50 %d p95 %d p99 %d min %d stddev %d, want all 3140000 (stddev 0)", d.P50US, d.P95US, d.P99US, d.MinUS, d.StddevUS)
	}
	p = NewProfile(ProfileOptions{Metric: ServerLatency})
	p.Add(serverStmt(36, "a", "u"))
	p.Add(serverStmt(275, "a", "u"))
	d = p.Result().Digests[0]
	if d.P95US != 275 || d.P99US != 275 || d.P50US != 36 || d.MinUS != 36 || d.AvgUS != 156 {
		t.Errorf("two calls: p50 %d p95 %d p99 %d min %d avg %d, want 36 275 275 36 156", d.P50US, d.P95US, d.P99US, d.MinUS, d.AvgUS)
	}
	if d.StddevUS != 120 { // population: |275-36|/2 rounded
		t.Errorf("stddev %d, want 120", d.StddevUS)
	}
}

// Up to exactValues calls percentiles are exact; beyond, the sketch's.
func TestExactPercentilesUpToBound(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	for i := int64(1); i <= exactValues; i++ {
		p.Add(serverStmt(i*1000, "", ""))
	}
	d := p.Result().Digests[0]
	// nearest rank: ceil(0.95*128) = 122, ceil(0.99*128) = 127
	if d.P50US != 64_000 || d.P95US != 122_000 || d.P99US != 127_000 {
		t.Errorf("p50 %d p95 %d p99 %d, want 64000 122000 127000", d.P50US, d.P95US, d.P99US)
	}
	p.Add(serverStmt(129_000, "", ""))
	d = p.Result().Digests[0]
	if d.P95US == 0 || d.P95US > d.MaxUS || d.MaxUS != 129_000 {
		t.Errorf("beyond the bound: p95 %d max %d", d.P95US, d.MaxUS)
	}
	if p.digests[d.Digest].exact != nil {
		t.Error("values still kept beyond the bound: memory would grow with calls")
	}
}

func TestClassDetail(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	lat := []int64{0, 5, 10, 99, 100, 5_000, 999_999, 1_000_000, 10_000_000, 99_000_000}
	for i, us := range lat {
		s := serverStmt(us, "shop", "app")
		s.TReqFirst = int64(1000 + i)
		s.LockUS, s.Rows, s.RowsExamined, s.RespBytes = int64(i), 1, int64(10*i), 100
		if i%3 == 0 {
			s.DB = "crm"
			s.Error = &event.Error{Code: 1146}
		}
		s.SQL = "select " + strconv.Itoa(i)
		p.AddExtra(s, &Extra{Host: "web1", RowsAffected: 2, Plan: &Plan{Statements: 1, FullScan: int64(i % 2)}})
	}
	d := p.Result().Digests[0]
	wantHist := [HistogramBuckets]int64{2, 2, 1, 1, 0, 1, 1, 2}
	if d.Histogram != wantHist {
		t.Errorf("histogram %v, want %v", d.Histogram, wantHist)
	}
	if d.MinUS != 0 || d.MaxUS != 99_000_000 || d.FirstSeenUS != 1000 || d.LastSeenUS != 1009 {
		t.Errorf("min %d max %d first %d last %d", d.MinUS, d.MaxUS, d.FirstSeenUS, d.LastSeenUS)
	}
	if len(d.Databases) != 2 || d.Databases[0] != (Count{"shop", 6}) || d.Databases[1] != (Count{"crm", 4}) {
		t.Errorf("databases %v", d.Databases)
	}
	if len(d.Hosts) != 1 || d.Hosts[0] != (Count{"web1", 10}) || d.Users[0] != (Count{"app", 10}) {
		t.Errorf("hosts %v users %v", d.Hosts, d.Users)
	}
	if len(d.ErrorsByCode) != 1 || d.ErrorsByCode[0] != (ErrorCount{1146, 4}) {
		t.Errorf("errors by code %v", d.ErrorsByCode)
	}
	a := d.Attributes
	if a.LockUS != (Attr{45, 0, 9, 5}) || a.RowsExamined.Sum != 450 || a.RowsAffected.Sum != 20 || a.BytesSent.Sum != 1000 || d.RowsAffected != 20 {
		t.Errorf("attributes %+v", a)
	}
	if d.Sample == nil || d.Sample.SQL != "select 9" || d.Sample.Latency != 99_000_000 {
		t.Errorf("sample %+v, want the slowest call", d.Sample)
	}
	if d.Plan == nil || d.Plan.Statements != 10 || d.Plan.FullScan != 5 {
		t.Errorf("plan %+v", d.Plan)
	}
}

func TestValueCountsBounded(t *testing.T) {
	var v valueCounts
	for i := range maxValueCounts + 10 {
		v.add("db"+strconv.Itoa(i), 1)
	}
	l := v.list()
	if len(l) != maxValueCounts+1 || l[len(l)-1] != (Count{otherText, 10}) {
		t.Errorf("%d counts, last %v", len(l), l[len(l)-1])
	}
}

func TestClassIDGrouping(t *testing.T) {
	p := NewProfile(ProfileOptions{Metric: ServerLatency})
	s1 := serverStmt(10, "", "")
	s1.DigestText, s1.Digest = "select c from sbtest1", "d1"
	s2 := serverStmt(20, "", "")
	s2.DigestText, s2.Digest = "select c from sbtest2", "d2"
	x := &Extra{ClassID: "ID", ClassText: "select c from sbtest?"}
	p.AddExtra(s1, x)
	p.AddExtra(s2, x)
	r := p.Result()
	if len(r.Digests) != 1 || r.Digests[0].Calls != 2 || r.Digests[0].DigestText != "select c from sbtest?" || r.Digests[0].Digest != "ID" {
		t.Errorf("class grouping: %+v", r.Digests)
	}
}

// TestPlanJSONKnownZero: an engine counter a statement of the class had is
// written when 0, one none had is left out, and the keys keep Plan's order.
func TestPlanJSONKnownZero(t *testing.T) {
	p := Plan{Statements: 2, InnoDBIOReadOps: 12, Known: 1<<0 | 1<<3}
	b, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"statements":2,"full_scan":0,"full_join":0,"tmp_table":0,"tmp_table_on_disk":0,"filesort":0,` +
		`"filesort_on_disk":0,"qc_hit":0,"tmp_tables":0,"tmp_disk_tables":0,"merge_passes":0,` +
		`"innodb_io_r_ops":12,"innodb_queue_wait_us":0}`
	if string(b) != want {
		t.Errorf("got  %s\nwant %s", b, want)
	}
	var sum Plan
	sum.add(&Plan{Known: 1 << 10})
	sum.add(&Plan{PagesRead: 3})
	if b, _ := json.Marshal(&sum); !strings.Contains(string(b), `"pages_read":3,"engine_time_us":0}`) {
		t.Errorf("a class's plan: %s, want pages_read 3 and engine_time_us 0", b)
	}
}

// The engine counters added later (InnoDB_IO_r_bytes, Pages_prefetched)
// have their own Known bits (1<<11, 1<<12) and sit beside their kin in
// JSON.
func TestPlanJSONLaterEngineFields(t *testing.T) {
	b, err := json.Marshal(Plan{Statements: 1, InnoDBIOReadOps: 3, PagesRead: 2, Known: 1<<11 | 1<<12})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{`"innodb_io_r_ops":3,"innodb_io_r_bytes":0,"pages_read":2,"pages_prefetched":0}`} {
		if !strings.Contains(string(b), want) {
			t.Errorf("%s\nwant %s", b, want)
		}
	}
}
