package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
)

var update = flag.Bool("update", false, "rewrite testdata/migrations.sum after adding a migration")

func openTemp(t testing.TB) *Store {
	t.Helper()
	s, err := Open(context.Background(), filepath.Join(t.TempDir(), "gapscope.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// statement returns a fully populated statement i, so a round trip checks
// every column.
func statement(i int) event.Statement {
	g := i % 3
	s := event.Statement{
		Conn: fmt.Sprintf("10.0.0.1:%d>10.0.0.2:3306", 40000+i%50), ConnID: uint64(i), User: "app", DB: "shop",
		Cmd: "COM_QUERY", SQL: "SELECT * FROM t WHERE id = ?", Digest: "9f86d081884c7d65", DigestText: "SELECT * FROM `t` WHERE `id` = ?",
		TReqFirst: 1_795_304_997_000_000 + int64(i)*1000, TReqLast: 1_795_304_997_000_010 + int64(i)*1000,
		TRespFirst: 1_795_304_997_000_400 + int64(i)*1000, TRespLast: 1_795_304_997_000_500 + int64(i)*1000,
		Parts: event.Parts{ClientUS: 500, RequestUS: 10, QueueUS: 40, ExecUS: 350, SendStallUS: 0, DeliveryUS: 100}, ServerUS: 350,
		Rows: 1, ReqBytes: 33, RespBytes: 61, ZeroWindowUS: int64(i % 7), Retransmits: i % 2, PoolGroup: &g, Joined: true,
		Notes: []string{"note " + fmt.Sprint(i)},
	}
	if i%5 == 0 {
		s.Error = &event.Error{Code: 1064, State: "42000", Msg: "You have an error in your SQL syntax"}
		s.PoolGroup, s.Notes, s.Joined = nil, nil, false
	}
	return s
}

func TestOpenMigratesOnceAndReopens(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	ms, _ := migrations()
	if v, err := s.Version(ctx); err != nil || v != len(ms) || v < 1 {
		t.Fatalf("version %d (%v), want %d", v, err, len(ms))
	}
	var mode string
	s.db.QueryRow("PRAGMA journal_mode").Scan(&mode)
	if mode != "wal" {
		t.Errorf("journal_mode %q, want wal", mode)
	}
	s.Close()
	s, err = Open(ctx, path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	var n int
	s.db.QueryRow("SELECT COUNT(*) FROM schema_migrations").Scan(&n)
	if n != len(ms) {
		t.Errorf("%d migration rows after reopening, want %d (applied once)", n, len(ms))
	}
}

func TestNewerSchemaIsRefused(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "g.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.db.Exec("INSERT INTO schema_migrations VALUES (999, '0999_future.sql', 0)")
	s.Close()
	if _, err := Open(ctx, path); !errors.Is(err, ErrNewerSchema) {
		t.Fatalf("want ErrNewerSchema, got %v", err)
	}
}

func TestBadPathIsRefused(t *testing.T) {
	for _, p := range []string{"", filepath.Join(t.TempDir(), "no", "such", "dir", "x.db")} {
		if s, err := Open(context.Background(), p); err == nil {
			s.Close()
			t.Errorf("Open(%q) succeeded", p)
		}
	}
}

// TestMigrationsAreAppendOnly fails when a shipped migration is edited:
// add a new numbered file instead, then run with -update.
func TestOddPathCharacters(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "a?b#c%20 d.db")
	s, err := Open(ctx, path)
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("store not created at the literal path: %v", err)
	}
}

func TestMigrationsAreAppendOnly(t *testing.T) {
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for _, m := range ms {
		fmt.Fprintf(&b, "%x  %s\n", sha256.Sum256([]byte(m.SQL)), m.Name)
	}
	const sum = "testdata/migrations.sum"
	if *update {
		os.WriteFile(sum, []byte(b.String()), 0o644)
	}
	want, err := os.ReadFile(sum)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(b.String(), string(want)) {
		t.Fatalf("a shipped migration changed; migrations are append-only.\nhave:\n%s\nrecorded:\n%s", b.String(), want)
	}
	if b.String() != string(want) {
		t.Errorf("new migration not recorded: run go test -run AppendOnly -update")
	}
}

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	run, err := s.StartRun(ctx, "watch", "app:s3cret@tcp(db:3306)/shop", 1_795_304_997_000_000)
	if err != nil {
		t.Fatal(err)
	}
	w := s.NewWriter(run, WriterOptions{})
	var want []event.Statement
	for i := range 25 {
		st := statement(i)
		want = append(want, st)
		if err := w.Add(&st); err != nil {
			t.Fatal(err)
		}
	}
	sample := event.Sample{TimeUS: 1_795_304_997_000_100, Source: "thread_pool_groups", Name: "queue_length", Value: 3, Labels: map[string]string{"group": "0"}}
	finding := event.Finding{Code: "POOL_QUEUE", Severity: event.SeverityCritical, Summary: "1 request waited 23.29 s",
		Evidence: map[string]any{"queue_us": 23289830, "saturated_groups": []int{0}, "settings": map[string]string{"thread_pool_size": "2"}}, Fix: "SET GLOBAL thread_pool_stall_limit=500"}
	if err := errors.Join(w.AddSample(&sample), w.AddSample(&event.Sample{TimeUS: 5, Source: "status", Name: "Threads_running", Value: 2}),
		w.AddFinding(1_795_304_997_000_200, &finding), w.Close()); err != nil {
		t.Fatal(err)
	}
	if err := s.EndRun(ctx, run, 1_795_304_998_000_000, "dropped 0"); err != nil {
		t.Fatal(err)
	}
	got, err := s.Statements(ctx, Query{RunID: run})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("statements differ after a round trip:\ngot  %+v\nwant %+v", got[0], want[0])
	}
	samples, err := s.Samples(ctx, Query{})
	if err != nil || len(samples) != 2 || !reflect.DeepEqual(samples[1], sample) || samples[0].Labels != nil {
		t.Fatalf("samples %+v (%v)", samples, err)
	}
	fs, err := s.Findings(ctx, Query{RunID: run})
	if err != nil || len(fs) != 1 {
		t.Fatalf("findings %+v (%v)", fs, err)
	}
	a, _ := json.Marshal(fs[0])
	b, _ := json.Marshal(finding)
	if string(a) != string(b) {
		t.Errorf("finding differs:\n%s\n%s", a, b)
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].DSN != "app:***@tcp(db:3306)/shop" || runs[0].EndUS == 0 || runs[0].Notes != "dropped 0" {
		t.Fatalf("runs %+v (%v)", runs, err)
	}
}

func TestFindingWithBadEvidenceIsRefusedAlone(t *testing.T) {
	s := openTemp(t)
	w := s.NewWriter(1, WriterOptions{})
	if err := w.AddFinding(1, &event.Finding{Code: "X", Evidence: map[string]any{"c": make(chan int)}}); err == nil {
		t.Fatal("evidence that cannot be JSON was accepted")
	}
	st := statement(1)
	if err := errors.Join(w.Add(&st), w.Close()); err != nil {
		t.Fatalf("the writer broke after refusing a finding: %v", err)
	}
}

func TestQueryFilters(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	for run := int64(1); run <= 2; run++ {
		w := s.NewWriter(run, WriterOptions{})
		for i := range 10 {
			st := statement(i)
			w.Add(&st)
		}
		if err := w.Close(); err != nil {
			t.Fatal(err)
		}
	}
	base := statement(0).TReqFirst
	cases := []struct {
		q    Query
		want int
	}{
		{Query{}, 20}, {Query{RunID: 2}, 10}, {Query{FromUS: base + 5000}, 10},
		{Query{FromUS: base + 2000, ToUS: base + 4000}, 4}, {Query{RunID: 1, Limit: 3}, 3},
	}
	for _, c := range cases {
		got, err := s.Statements(ctx, c.q)
		if err != nil || len(got) != c.want {
			t.Errorf("%+v: %d statements (%v), want %d", c.q, len(got), err, c.want)
		}
		for i := 1; i < len(got); i++ {
			if got[i].TReqFirst < got[i-1].TReqFirst {
				t.Errorf("%+v: not in time order", c.q)
			}
		}
	}
}

func TestWriterFlushesByRowsAndByTime(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	w := s.NewWriter(1, WriterOptions{BatchRows: 10, FlushEvery: time.Hour})
	for i := range 25 {
		st := statement(i)
		w.Add(&st)
	}
	if got, _ := s.Statements(ctx, Query{}); len(got) != 20 {
		t.Fatalf("after 25 adds with batches of 10: %d stored; want 20", len(got))
	}
	w.Close()

	flushed := make(chan int, 10)
	w = s.NewWriter(2, WriterOptions{BatchRows: 1000, FlushEvery: 20 * time.Millisecond, OnFlush: func(n int, err error) { flushed <- n }})
	defer w.Close()
	st := statement(1)
	w.Add(&st)
	select {
	case n := <-flushed:
		if n != 1 {
			t.Errorf("timer flushed %d rows, want 1", n)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the timer never flushed a pending row")
	}
	if got, _ := s.Statements(ctx, Query{RunID: 2}); len(got) != 1 {
		t.Errorf("%d rows of run 2 stored, want 1", len(got))
	}
}

func TestWriterErrorSticks(t *testing.T) {
	s := openTemp(t)
	w := s.NewWriter(1, WriterOptions{FlushEvery: time.Hour})
	st := statement(1)
	w.Add(&st)
	s.db.Close()
	err := w.Flush()
	if err == nil || !strings.Contains(err.Error(), "writing 1 rows to store") {
		t.Fatalf("flush on a closed store: %v", err)
	}
	if err2 := w.Add(&st); err2 == nil {
		t.Error("Add after a failed commit should report the failure")
	}
}

func TestRetention(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	now := time.UnixMicro(statement(0).TReqFirst + 10_000)
	old, _ := s.StartRun(ctx, "watch", "", now.Add(-48*time.Hour).UnixMicro())
	s.EndRun(ctx, old, now.Add(-47*time.Hour).UnixMicro(), "")
	cur, _ := s.StartRun(ctx, "watch", "", now.Add(-time.Hour).UnixMicro())
	killed, _ := s.StartRun(ctx, "watch", "", now.Add(-72*time.Hour).UnixMicro()) // never ended, rows still recent
	w := s.NewWriter(old, WriterOptions{})
	for i := range 5 {
		st := statement(i)
		st.TReqFirst = now.Add(-47*time.Hour).UnixMicro() - int64(i)
		w.Add(&st)
		w.AddSample(&event.Sample{TimeUS: st.TReqFirst, Source: "status", Name: "x"})
	}
	w.Close()
	for _, run := range []int64{cur, killed} {
		w = s.NewWriter(run, WriterOptions{})
		st := statement(7)
		w.Add(&st)
		w.Close()
	}
	n, err := s.Retain(ctx, 24*time.Hour, now)
	// 5 statements, 5 samples, their digest's minute, the run.
	if err != nil || n != 12 {
		t.Fatalf("deleted %d (%v), want 10 rows, 1 digest minute + 1 run", n, err)
	}
	got, _ := s.Statements(ctx, Query{})
	runs, _ := s.Runs(ctx)
	if len(got) != 2 || len(runs) != 2 || runs[0].ID != cur || runs[1].ID != killed {
		t.Errorf("after retention: %d statements, runs %+v", len(got), runs)
	}
	if _, err := s.Retain(ctx, 0, now); err == nil {
		t.Error("zero retention accepted")
	}
}

func TestProbesAndPlans(t *testing.T) {
	ctx := context.Background()
	s := openTemp(t)
	p := ProbeResult{RunID: 1, TimeUS: 10, Name: "canary", Calls: 20, Errors: 1, MinUS: 900, AvgUS: 1500, MedianUS: 1200, MaxUS: 16_000_000, ThreadsConnected: 60, ThreadsRunning: 33}
	plan := Plan{RunID: 1, TimeUS: 11, ConnID: 42, Digest: "ab", DigestText: "SELECT ...", Source: "SHOW EXPLAIN FOR", Plan: `{"table":"t","type":"ALL","rows":1}`, ExecUS: 300_000_000, RowsExamined: 197451683}
	if err := errors.Join(s.AddProbe(ctx, p), s.AddPlan(ctx, plan)); err != nil {
		t.Fatal(err)
	}
	ps, err1 := s.ProbeResults(ctx, Query{RunID: 1})
	pl, err2 := s.Plans(ctx, Query{})
	if err := errors.Join(err1, err2); err != nil || len(ps) != 1 || ps[0] != p || len(pl) != 1 || pl[0] != plan {
		t.Fatalf("probes %+v plans %+v (%v)", ps, pl, err)
	}
}

func TestScrubDSN(t *testing.T) {
	for in, want := range map[string]string{
		"app:s3cret@tcp(10.0.0.1:3306)/shop":    "app:***@tcp(10.0.0.1:3306)/shop",
		"app:p@ss:w/rd@tcp(h:3306)/db?tls=true": "app:***@tcp(h:3306)/db?tls=true",
		"root@tcp(127.0.0.1:3306)/":             "root@tcp(127.0.0.1:3306)/",
		"app:***@tcp(h:1)/":                     "app:***@tcp(h:1)/",
		"/":                                     "/",
		"":                                      "",
		"u:pw@unix(/run/mysqld/mysqld.sock)/x?a=b/c": "u:***@unix(/run/mysqld/mysqld.sock)/x?a=b/c",
	} {
		if got := scrubDSN(in); got != want {
			t.Errorf("scrubDSN(%q) = %q, want %q", in, got, want)
		}
	}
}

func TestAddIsAllocationFree(t *testing.T) {
	s := openTemp(t)
	w := s.NewWriter(1, WriterOptions{BatchRows: 1 << 20, FlushEvery: time.Hour})
	defer w.Close()
	st := statement(3)
	if a := testing.AllocsPerRun(1000, func() { w.Add(&st) }); a != 0 {
		t.Errorf("Writer.Add allocates %.1f times per call between commits, want 0", a)
	}
}

func BenchmarkWriter(b *testing.B) {
	s := openTemp(b)
	w := s.NewWriter(1, WriterOptions{BatchRows: 1000, FlushEvery: time.Hour})
	st := statement(3)
	b.ReportAllocs()
	b.ResetTimer()
	for i := range b.N {
		st.ConnID = uint64(i)
		if err := w.Add(&st); err != nil {
			b.Fatal(err)
		}
	}
	if err := w.Close(); err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "inserts/s")
}

func TestOpenNotAStoreSaysSo(t *testing.T) {
	path := filepath.Join(t.TempDir(), "slow.log")
	body := []byte("# Time: 2024-05-06T07:08:09\n# Query_time: 0.1 Lock_time: 0 Rows_sent: 1 Rows_examined: 1\nSELECT 1;\n" + strings.Repeat("x", 4096))
	if err := os.WriteFile(path, body, 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Open(context.Background(), path)
	if err == nil || !strings.Contains(err.Error(), "not a gapscope store") {
		t.Fatalf("Open(non-store) = %v, want an error saying it is not a gapscope store", err)
	}
	after, _ := os.ReadFile(path)
	if !bytes.Equal(after, body) {
		t.Error("Open changed a file that is not a store")
	}
}

// TestWriterSleepsWithNothingQueued: the writer's timer is set by the first
// row queued and gone once it committed them, so that an idle watch's store
// wakes nothing (a ticker every FlushEvery was five wakes a second).
func TestWriterSleepsWithNothingQueued(t *testing.T) {
	s := openTemp(t)
	flushed := make(chan int, 10)
	w := s.NewWriter(1, WriterOptions{BatchRows: 1000, FlushEvery: 20 * time.Millisecond, OnFlush: func(n int, err error) { flushed <- n }})
	defer w.Close()
	armed := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return w.timer != nil
	}
	if armed() {
		t.Fatal("a new writer set its timer with nothing queued")
	}
	for round := range 2 {
		st := statement(round)
		if err := w.Add(&st); err != nil {
			t.Fatal(err)
		}
		if !armed() {
			t.Fatalf("round %d: a row queued and no timer to commit it", round)
		}
		select {
		case n := <-flushed:
			if n != 1 {
				t.Errorf("round %d: the timer committed %d rows, want 1", round, n)
			}
		case <-time.After(10 * time.Second):
			t.Fatalf("round %d: the timer never committed the row", round)
		}
		if armed() {
			t.Errorf("round %d: the timer set again with nothing queued", round)
		}
	}
}
