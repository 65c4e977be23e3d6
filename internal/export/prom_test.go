package export

import (
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
	dto "github.com/prometheus/client_model/go"
)

func stmt(fp string, clientUS int64, joined bool) *event.Statement {
	s := &event.Statement{Conn: "10.0.0.1:5000>10.0.0.2:3306", Cmd: "COM_QUERY", DB: "app", Fingerprint: fp,
		DigestText: "select * from t" + fp, SQL: "select * from t" + fp, Parts: event.Parts{ClientUS: clientUS}, TReqFirst: 1, TRespLast: 1 + clientUS}
	if joined {
		s.Joined, s.Digest = true, "server-"+fp
		s.RequestUS, s.QueueUS, s.ExecUS, s.SendStallUS, s.DeliveryUS = 1, clientUS/4, clientUS/2, 0, clientUS-1-clientUS/4-clientUS/2
	}
	return s
}

// gather returns the metric families by name.
func gather(t *testing.T, p *Prometheus) map[string]*dto.MetricFamily {
	t.Helper()
	mfs, err := p.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]*dto.MetricFamily{}
	for _, mf := range mfs {
		out[mf.GetName()] = mf
	}
	return out
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// byDigest sums a family's counters (or histogram counts) per digest.
func byDigest(mf *dto.MetricFamily) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		switch {
		case m.Histogram != nil:
			out[label(m, "digest")] += float64(m.GetHistogram().GetSampleCount())
		case m.Counter != nil:
			out[label(m, "digest")] += m.GetCounter().GetValue()
		case m.Gauge != nil:
			out[label(m, "digest")] += m.GetGauge().GetValue()
		}
	}
	return out
}

func TestPrometheusCountsAndPhases(t *testing.T) {
	p := NewPrometheus(10)
	for range 3 {
		p.Statement(stmt("aaaa", 4000, true))
	}
	p.Statement(stmt("aaaa", 2000, false))
	mfs := gather(t, p)
	if got := byDigest(mfs["gapscope_statement_duration_seconds"])["aaaa"]; got != 4 {
		t.Errorf("histogram count %v, want 4 (joined or not)", got)
	}
	if got := byDigest(mfs["gapscope_statements_joined_total"])["aaaa"]; got != 3 {
		t.Errorf("joined %v, want 3", got)
	}
	phases := map[string]float64{}
	for _, m := range mfs["gapscope_statement_phase_seconds_total"].GetMetric() {
		phases[label(m, "phase")] = m.GetCounter().GetValue()
	}
	want := map[string]float64{"request": 3e-6, "queue": 3e-3, "exec": 6e-3, "send_stall": 0, "delivery": 3 * 999e-6}
	for ph, w := range want {
		if d := phases[ph] - w; d > 1e-12 || d < -1e-12 {
			t.Errorf("phase %s = %v, want %v", ph, phases[ph], w)
		}
	}
	info := mfs["gapscope_digest_info"].GetMetric()
	if len(info) != 1 || label(info[0], "server_digest") != "server-aaaa" || label(info[0], "digest_text") != "select * from taaaa" {
		t.Errorf("digest info: %v", info)
	}
	h := mfs["gapscope_statement_duration_seconds"].GetMetric()[0].GetHistogram()
	if len(h.GetBucket()) != len(durationBuckets) || h.GetSchema() == 0 && h.GetZeroThreshold() == 0 {
		t.Errorf("histogram: %d classic buckets, native schema %d: want both", len(h.GetBucket()), h.GetSchema())
	}
}

// Past K digests, the smaller ones count as "other"; a digest that grows
// past twice the least kept takes its own series at once, and the one it
// displaces loses its series at the next snapshot.
func TestPrometheusTopK(t *testing.T) {
	p := NewPrometheus(2)
	p.Statement(stmt("aaaa", 1000, true))
	p.Statement(stmt("bbbb", 500, true))
	p.Statement(stmt("cccc", 100, true))
	got := byDigest(gather(t, p)["gapscope_statement_duration_seconds"])
	if got["aaaa"] != 1 || got["bbbb"] != 1 || got[OtherDigest] != 1 || got["cccc"] != 0 {
		t.Fatalf("before re-ranking: %v", got)
	}
	for range 9 {
		p.Statement(stmt("cccc", 100, true)) // 1000 µs: not past twice bbbb's 500
	}
	if d := seriesDigests(p); len(d) != 2 || d[0] != "aaaa" || d[1] != "bbbb" {
		t.Fatalf("series digests at twice the bar: %v", d)
	}
	p.Statement(stmt("cccc", 100, true)) // 1100 µs: its series now
	if d := seriesDigests(p); len(d) != 3 || d[2] != "cccc" {
		t.Fatalf("series digests past twice the bar: %v", d)
	}
	p.Snapshot(&watch.Snapshot{})
	if d := seriesDigests(p); len(d) != 2 || d[0] != "aaaa" || d[1] != "cccc" {
		t.Fatalf("series digests after re-ranking: %v", d)
	}
	p.Statement(stmt("cccc", 100, true))
	p.Statement(stmt("bbbb", 100, true))
	mfs := gather(t, p)
	got = byDigest(mfs["gapscope_statement_duration_seconds"])
	if _, ok := got["bbbb"]; ok || got["cccc"] != 2 || got[OtherDigest] != 11 {
		t.Errorf("after re-ranking: %v (want bbbb's series deleted, cccc's new)", got)
	}
	for _, name := range []string{"gapscope_statement_phase_seconds_total", "gapscope_statements_joined_total", "gapscope_digest_info"} {
		if _, ok := byDigest(mfs[name])["bbbb"]; ok {
			t.Errorf("%s keeps the evicted digest's series", name)
		}
	}
}

// An endless stream of distinct digests (an alias per call): at most top
// of them keep series however many are ranked, forgotten and re-ranked,
// and a digest that rises above them after a re-rank gets its series.
func TestPrometheusTopKUnderDistinctDigests(t *testing.T) {
	p := NewPrometheus(5)
	for i := range 20_000 {
		p.Statement(stmt(fmt.Sprintf("%08x", i), int64(1+i%997), true))
		if i%3000 == 0 {
			p.Snapshot(&watch.Snapshot{})
		}
		if i%2500 == 0 {
			if n := len(seriesDigests(p)); n > 5 {
				t.Fatalf("after %d digests: %d digests have series, want at most 5", i+1, n)
			}
		}
	}
	for range 50 {
		p.Statement(stmt("big", 100_000, true))
	}
	p.Snapshot(&watch.Snapshot{})
	d := seriesDigests(p)
	if len(d) != 5 || !slices.Contains(d, "big") || p.tops != len(d) {
		t.Errorf("series digests after the last re-rank: %v (counted %d), want 5 with big", d, p.tops)
	}
	if len(p.digests) > p.maxTracked() {
		t.Errorf("%d digests ranked, bound %d", len(p.digests), p.maxTracked())
	}
}

// A heavy digest first seen after one-off digests took every slot is on
// /metrics from its first statement, with no snapshot between (a live
// watch's snapshot can come after all of its statements); heavy digests
// arriving together hold at most K plus the slack series, the lightest
// losing theirs when the slack is passed.
func TestPrometheusHeavyDigestTakesSeriesAtOnce(t *testing.T) {
	p := NewPrometheus(8)
	for i := range 500 {
		p.Statement(stmt(fmt.Sprintf("oneoff%04d", i), int64(100+i%50), true))
	}
	for range 3 {
		p.Statement(stmt("heavy", 50_000, true))
	}
	got := byDigest(gather(t, p)["gapscope_statement_duration_seconds"])
	if got["heavy"] != 3 {
		t.Fatalf("heavy digest's statements on its own series: %v, want 3 (%v)", got["heavy"], got)
	}
	for i := range 20 {
		p.Statement(stmt(fmt.Sprintf("heavy%02d", i), int64(10_000*(i+1)), true))
		if n := len(seriesDigests(p)); n > 8+p.slack() {
			t.Fatalf("after %d heavy digests: %d with series, bound %d", i+1, n, 8+p.slack())
		}
	}
	d := seriesDigests(p)
	if !slices.Contains(d, "heavy") || slices.ContainsFunc(d, func(n string) bool { return strings.HasPrefix(n, "oneoff") }) {
		t.Errorf("series digests after the heavy ones: %v, want heavy and no one-off", d)
	}
	p.Snapshot(&watch.Snapshot{})
	if d := seriesDigests(p); len(d) != 8 || !slices.Contains(d, "heavy19") || !slices.Contains(d, "heavy") {
		t.Errorf("series digests after a snapshot: %v, want the 8 heaviest", d)
	}
}

func TestPrometheusFindingsAndHealth(t *testing.T) {
	p := NewPrometheus(0)
	f := []event.Finding{{Code: "POOL_QUEUE", Severity: event.SeverityWarning}}
	h := watch.Health{Statements: 7, Joined: 5, Unjoined: map[string]int64{event.RingLost.String(): 2}, RingLost: 3, CPUSeconds: 1.5}
	p.Snapshot(&watch.Snapshot{Findings: f, Health: h})
	p.Snapshot(&watch.Snapshot{Findings: f, Health: h}) // still there: not raised again
	p.Snapshot(&watch.Snapshot{Health: h})
	p.Snapshot(&watch.Snapshot{Findings: f, Health: h}) // raised again
	mfs := gather(t, p)
	if got := mfs["gapscope_findings_total"].GetMetric()[0].GetCounter().GetValue(); got != 2 {
		t.Errorf("findings_total %v, want 2", got)
	}
	for name, want := range map[string]float64{"gapscope_statements_seen_total": 7, "gapscope_statements_joined_all_total": 5,
		"gapscope_ring_rows_lost_total": 3, "gapscope_cpu_seconds_total": 1.5} {
		if got := mfs[name].GetMetric()[0].GetCounter().GetValue(); got != want {
			t.Errorf("%s = %v, want %v", name, got, want)
		}
	}
	var series []string
	for _, m := range mfs["gapscope_statements_unjoined_total"].GetMetric() {
		series = append(series, label(m, "reason"))
		if want := map[string]float64{event.RingLost.String(): 2}[label(m, "reason")]; m.GetCounter().GetValue() != want {
			t.Errorf("unjoined %s = %v, want %v", label(m, "reason"), m.GetCounter().GetValue(), want)
		}
	}
	// A series for every reason a wire statement reads unjoined for, 0
	// included, wherever it sits in the table; docs/export.md names each.
	doc, err := os.ReadFile("../../docs/export.md")
	if err != nil {
		t.Fatal(err)
	}
	line := regexp.MustCompile("(?m)^\\| `gapscope_statements_unjoined_total` .*$").FindString(string(doc))
	for _, r := range event.Reasons() {
		if got, want := slices.Contains(series, r.String()), r.ReadsUnjoined(); got != want {
			t.Errorf("reason %s (%s): a series %v, want %v", r, r.Kind(), got, want)
		}
		if got, want := regexp.MustCompile(`\b`+r.String()+`\b`).MatchString(line), r.ReadsUnjoined(); got != want {
			t.Errorf("docs/export.md's unjoined line names %s: %v, want %v", r, got, want)
		}
	}
}

// seriesDigests returns the digests that have their own series now.
func seriesDigests(p *Prometheus) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out []string
	for _, d := range p.digests {
		if d.top {
			out = append(out, d.name)
		}
	}
	slices.Sort(out)
	return out
}

// counters returns a counter family's values by the label's value.
func counters(mf *dto.MetricFamily, name string) map[string]float64 {
	out := map[string]float64{}
	for _, m := range mf.GetMetric() {
		out[label(m, name)] = m.GetCounter().GetValue()
	}
	return out
}

func lockStmt(fp string, waitUS int64, kind string) *event.Statement {
	s := stmt(fp, 4*waitUS, true)
	s.ExecUS = 2 * waitUS
	s.LockWait = &event.LockWait{LockWaitUS: waitUS}
	if kind != "" {
		s.BlockedBy = &event.Blocker{Kind: kind, ConnID: 7, State: event.BlockerIdleInTxn, Confidence: event.ConfidenceCertain}
	}
	return s
}

// The lock wait and transaction series: every known kind and end from the
// start at zero, then the waits fed by statements and the transactions'
// time in the application.
func TestPrometheusLockWaitAndTransactions(t *testing.T) {
	p := NewPrometheus(10)
	mfs := gather(t, p)
	for name, label := range map[string]string{"gapscope_lock_wait_seconds_total": "kind", "gapscope_lock_waits_total": "kind", "gapscope_transactions_total": "end"} {
		got := counters(mfs[name], label)
		want := map[string]float64{"row": 0, "metadata": 0, "table": 0}
		if label == "end" {
			want = map[string]float64{"commit": 0, "rollback": 0, "implicit": 0, "open": 0}
		}
		if fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s at start: %v, want %v", name, got, want)
		}
	}
	h := mfs["gapscope_transaction_idle_seconds"].GetMetric()
	if len(h) != 1 || h[0].GetHistogram().GetSampleCount() != 0 || len(h[0].GetHistogram().GetBucket()) != len(idleBuckets) {
		t.Fatalf("idle histogram at start: %v", h)
	}

	p.Statement(lockStmt("aaaa", 250_000, event.LockRow))
	p.Statement(lockStmt("aaaa", 250_000, event.LockRow))
	p.Statement(lockStmt("bbbb", 1_500_000, event.LockMetadata))
	p.Statement(lockStmt("cccc", 10_000, ""))
	p.Statement(stmt("dddd", 5_000, true))
	for _, tx := range []event.Transaction{
		{EndKind: "commit", InAppUS: 3_000}, {EndKind: "rollback", InAppUS: 2_500_000},
		{EndKind: "open", InAppUS: 0}, {EndKind: "", InAppUS: 40_000_000},
	} {
		p.Transaction(&tx)
	}
	mfs = gather(t, p)
	secs, waits := counters(mfs["gapscope_lock_wait_seconds_total"], "kind"), counters(mfs["gapscope_lock_waits_total"], "kind")
	for k, want := range map[string]float64{"row": 0.5, "metadata": 1.5, "table": 0, LockKindUnknown: 0.01} {
		if d := secs[k] - want; d > 1e-12 || d < -1e-12 {
			t.Errorf("lock wait seconds %s = %v, want %v", k, secs[k], want)
		}
	}
	if fmt.Sprint(waits) != fmt.Sprint(map[string]float64{"row": 2, "metadata": 1, "table": 0, LockKindUnknown: 1}) {
		t.Errorf("lock waits %v", waits)
	}
	if got := byDigest(mfs["gapscope_statement_duration_seconds"]); got["aaaa"] != 2 || got["dddd"] != 1 {
		t.Errorf("statements with a lock wait still count as statements: %v", got)
	}
	ends := counters(mfs["gapscope_transactions_total"], "end")
	if fmt.Sprint(ends) != fmt.Sprint(map[string]float64{"commit": 1, "rollback": 1, "implicit": 0, "open": 1, "unknown": 1}) {
		t.Errorf("transactions %v", ends)
	}
	hist := mfs["gapscope_transaction_idle_seconds"].GetMetric()[0].GetHistogram()
	if hist.GetSampleCount() != 4 || hist.GetSampleSum() != 0.003+2.5+40 {
		t.Errorf("idle histogram count %d sum %v", hist.GetSampleCount(), hist.GetSampleSum())
	}
	cum := map[float64]uint64{}
	for _, b := range hist.GetBucket() {
		cum[b.GetUpperBound()] = b.GetCumulativeCount()
	}
	for le, want := range map[float64]uint64{0.001: 1, 0.005: 2, 1: 2, 2.5: 3, 30: 3, 60: 4} {
		if cum[le] != want {
			t.Errorf("idle bucket le=%v holds %d, want %d", le, cum[le], want)
		}
	}
}

// A replica's binlog stream is no statement: it has no client time in the
// duration histogram (nor has a statement without a response: COM_QUIT, a
// server-only statement), and the unjoined counter has its zero series
// from the first scrape, counting it when the snapshot does.
func TestPrometheusReplicaStream(t *testing.T) {
	p := NewPrometheus(0)
	p.Statement(stmt("a", 800, true))
	stream := stmt("dump", 175, false)
	stream.Cmd, stream.Why = "COM_BINLOG_DUMP", event.ReplicaStream
	p.Statement(stream)
	serverOnly := stmt("a", 0, false)
	serverOnly.TRespLast, serverOnly.Why, serverOnly.ServerUS = 0, event.UnixSocket, 150_000
	p.Statement(serverOnly)
	p.Snapshot(&watch.Snapshot{})
	mfs := gather(t, p)
	if got := byDigest(mfs["gapscope_statement_duration_seconds"]); len(got) != 1 || got["a"] != 1 {
		t.Errorf("duration histogram by digest %v, want only the statement with a response", got)
	}
	reasons := func() map[string]float64 {
		out := map[string]float64{}
		for _, m := range gather(t, p)["gapscope_statements_unjoined_total"].GetMetric() {
			out[label(m, "reason")] = m.GetCounter().GetValue()
		}
		return out
	}
	if got, ok := reasons()["replica_stream"]; !ok || got != 0 {
		t.Errorf("unjoined replica_stream = %v (present %v), want a zero series", got, ok)
	}
	p.Snapshot(&watch.Snapshot{Health: watch.Health{Statements: 3, Joined: 1, Unjoined: map[string]int64{"replica_stream": 1}}})
	if got := reasons()["replica_stream"]; got != 1 {
		t.Errorf("unjoined replica_stream = %v, want 1", got)
	}
}
