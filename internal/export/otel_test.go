package export

import (
	"context"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

// testOTel is an OTel sink writing spans to memory and metrics to a
// manual reader.
func testOTel(t *testing.T, opts OTelOptions) (*OTel, *tracetest.InMemoryExporter, *sdkmetric.ManualReader) {
	t.Helper()
	spans := tracetest.NewInMemoryExporter()
	reader := sdkmetric.NewManualReader()
	o := newOTel(opts)
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithSyncer(spans))
	o.tracer = o.tp.Tracer("test")
	if err := o.startMeter(reader, resource.Empty()); err != nil {
		t.Fatal(err)
	}
	o.Snapshot(&watch.Snapshot{Flavor: "mariadb"})
	return o, spans, reader
}

func joinedStmt() *event.Statement {
	return &event.Statement{Conn: "10.0.0.1:40000>10.0.0.2:3306", Cmd: "COM_QUERY", DB: "shop",
		SQL:        "select * from orders where id = ? /*traceparent='00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01'*/",
		DigestText: "select * from orders where id = ?", Fingerprint: "0123456789abcdef", Joined: true,
		TReqFirst: 1_700_000_000_000_000, TRespLast: 1_700_000_000_010_000, Parts: event.Parts{ClientUS: 10_000, RequestUS: 0, QueueUS: 6_000, ExecUS: 3_000, SendStallUS: 0, DeliveryUS: 1_000},

		Tags: map[string]string{"traceparent": "00-5bd66ef5095369c7b0d1f8f4bd33716a-c532cb4098ac3dd2-01"}}
}

// Close (the end of watch's run) flushes and stops the exporters: what
// was recorded was sent, and nothing is after.
func TestOTelClose(t *testing.T) {
	o, spans, _ := testOTel(t, OTelOptions{})
	o.Statement(joinedStmt())
	if n := len(spans.GetSpans()); n == 0 {
		t.Fatal("no spans before Close")
	}
	if err := o.Close(&watch.Snapshot{Final: true}); err != nil {
		t.Fatal(err)
	}
	o.Statement(joinedStmt())
	if n := len(spans.GetSpans()); n != 0 { // the exporter's Shutdown empties it
		t.Errorf("%d spans after Close: the exporters were not shut down", n)
	}
}

func TestOTelSpan(t *testing.T) {
	o, spans, _ := testOTel(t, OTelOptions{})
	o.Statement(joinedStmt())
	got := spans.GetSpans()
	if len(got) != 4 { // statement + queue, exec, delivery (request and stall are 0)
		t.Fatalf("%d spans, want 4: %v", len(got), got)
	}
	var parent tracetest.SpanStub
	names := map[string]tracetest.SpanStub{}
	for _, s := range got {
		names[s.Name] = s
		if s.SpanKind == trace.SpanKindClient {
			parent = s
		}
	}
	if parent.Name != "SELECT orders" || parent.Parent.SpanID().String() != "c532cb4098ac3dd2" ||
		parent.SpanContext.TraceID().String() != "5bd66ef5095369c7b0d1f8f4bd33716a" {
		t.Fatalf("statement span %q parent %s trace %s: want SELECT orders under the application's span",
			parent.Name, parent.Parent.SpanID(), parent.SpanContext.TraceID())
	}
	if parent.StartTime != time.UnixMicro(1_700_000_000_000_000) || parent.EndTime != time.UnixMicro(1_700_000_000_010_000) {
		t.Errorf("statement span %v..%v: want the capture's times", parent.StartTime, parent.EndTime)
	}
	attrs := attribute.NewSet(parent.Attributes...)
	for k, want := range map[string]string{"db.system.name": "mariadb", "db.namespace": "shop", "db.operation.name": "SELECT",
		"db.query.summary": "SELECT orders", "gapscope.cause": "queue", "server.address": "10.0.0.2", "network.peer.address": "10.0.0.2"} {
		if v, _ := attrs.Value(attribute.Key(k)); v.Emit() != want {
			t.Errorf("%s = %q, want %q", k, v.Emit(), want)
		}
	}
	if v, _ := attrs.Value("gapscope.queue_us"); v.AsInt64() != 6000 {
		t.Errorf("gapscope.queue_us = %v", v.Emit())
	}
	q, e, d := names["queue"], names["exec"], names["delivery"]
	if q.Parent.SpanID() != parent.SpanContext.SpanID() || q.StartTime != parent.StartTime ||
		e.StartTime != q.EndTime || d.EndTime != parent.EndTime || e.EndTime.Sub(e.StartTime) != 3*time.Millisecond {
		t.Errorf("part spans not laid end to end under the statement: queue %v..%v exec %v..%v delivery %v..%v",
			q.StartTime, q.EndTime, e.StartTime, e.EndTime, d.StartTime, d.EndTime)
	}
}

func TestOTelSampling(t *testing.T) {
	o, spans, _ := testOTel(t, OTelOptions{SlowUS: 100_000})
	fast := joinedStmt()
	fast.Tags = nil
	o.Statement(fast)
	if n := len(spans.GetSpans()); n != 0 {
		t.Fatalf("a fast statement with trace ratio 0 gave %d spans", n)
	}
	slow := joinedStmt()
	slow.Tags, slow.ClientUS = nil, 200_000
	o.Statement(slow)
	failed := joinedStmt()
	failed.Tags, failed.Joined, failed.Error = nil, false, &event.Error{Code: 1146, State: "42S02"}
	o.Statement(failed)
	var kinds int
	for _, s := range spans.GetSpans() {
		if s.SpanKind == trace.SpanKindClient {
			kinds++
		}
	}
	if kinds != 2 {
		t.Errorf("%d statement spans, want the slow and the failed one", kinds)
	}
}

func TestOTelMetrics(t *testing.T) {
	o, _, reader := testOTel(t, OTelOptions{})
	o.Statement(joinedStmt())
	unjoined := joinedStmt()
	unjoined.Joined = false
	o.Statement(unjoined)
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	counts := map[string]uint64{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h, ok := m.Data.(metricdata.Histogram[float64])
			if !ok {
				t.Fatalf("%s is %T", m.Name, m.Data)
			}
			for _, dp := range h.DataPoints {
				counts[m.Name] += dp.Count
				if m.Name == "db.client.operation.duration" && len(dp.Bounds) != len(durationBoundaries) {
					t.Errorf("duration bounds %v", dp.Bounds)
				}
			}
		}
	}
	if counts["db.client.operation.duration"] != 2 || counts["gapscope.statement.phase.duration"] != 3 {
		t.Errorf("histogram counts %v: want 2 durations and the joined statement's 3 non-zero phases", counts)
	}
}

// lockedStmt is joinedStmt whose 3 ms of exec held lockUS of waiting for
// a metadata lock: an ALTER waiting for an idle transaction held it.
func lockedStmt(lockUS int64) *event.Statement {
	s := joinedStmt()
	s.LockWait = &event.LockWait{LockWaitUS: lockUS, BlockedBy: &event.Blocker{
		Conn: "10.0.0.3:47000>10.0.0.2:3306", ConnID: 90, User: "dba", Kind: event.LockMetadata, State: event.BlockerRunning,
		Digest: "d-alter", SQL: "ALTER TABLE orders ADD COLUMN note TEXT", Source: "performance_schema.metadata_locks",
		Confidence: event.ConfidenceCertain,
		Root: &event.Blocker{Conn: "10.0.0.7:45000>10.0.0.2:3306", ConnID: 77, Kind: event.LockMetadata, State: event.BlockerIdleInTxn,
			SQL: "UPDATE orders SET status = ? WHERE id = ?", HeldUS: 9_000_000, IdleUS: 8_000_000, Source: event.LockSourceWire, Confidence: event.ConfidenceLow},
	}}
	return s
}

func spanAttrs(s tracetest.SpanStub) attribute.Set { return attribute.NewSet(s.Attributes...) }

func TestOTelLockWaitSpan(t *testing.T) {
	o, spans, _ := testOTel(t, OTelOptions{})
	o.Statement(lockedStmt(2_000))
	names := map[string]tracetest.SpanStub{}
	for _, s := range spans.GetSpans() {
		names[s.Name] = s
	}
	if len(names) != 5 {
		t.Fatalf("spans %v: want the statement, queue, exec, delivery and the lock wait", names)
	}
	exec, lock, stmt := names["exec"], names[LockWaitSpan], names["SELECT orders"]
	if lock.Parent.SpanID() != exec.SpanContext.SpanID() || lock.SpanContext.TraceID() != stmt.SpanContext.TraceID() {
		t.Fatalf("lock wait span's parent %s, want the exec span %s", lock.Parent.SpanID(), exec.SpanContext.SpanID())
	}
	if lock.StartTime != exec.StartTime || lock.EndTime.Sub(lock.StartTime) != 2*time.Millisecond {
		t.Errorf("lock wait span %v..%v, want the first 2 ms of exec %v..%v", lock.StartTime, lock.EndTime, exec.StartTime, exec.EndTime)
	}
	attrs := spanAttrs(lock)
	for k, want := range map[string]string{
		"gapscope.lock.kind": "metadata", "gapscope.lock.wait_us": "2000",
		"gapscope.lock.blocker.conn": "10.0.0.3:47000>10.0.0.2:3306", "gapscope.lock.blocker.conn_id": "90",
		"gapscope.lock.blocker.user": "dba", "gapscope.lock.blocker.state": "running", "gapscope.lock.blocker.digest": "d-alter",
		"gapscope.lock.blocker.sql": "ALTER TABLE orders ADD COLUMN note TEXT", "gapscope.lock.blocker.confidence": "certain",
		"gapscope.lock.blocker.source":    "performance_schema.metadata_locks",
		"gapscope.lock.blocker.root.conn": "10.0.0.7:45000>10.0.0.2:3306", "gapscope.lock.blocker.root.conn_id": "77",
		"gapscope.lock.blocker.root.state": "idle_in_transaction", "gapscope.lock.blocker.root.confidence": "low",
		"gapscope.lock.blocker.root.held_us": "9000000", "gapscope.lock.blocker.root.idle_us": "8000000",
	} {
		if v, ok := attrs.Value(attribute.Key(k)); !ok || v.Emit() != want {
			t.Errorf("lock wait span %s = %q (set %v), want %q", k, v.Emit(), ok, want)
		}
	}
	if _, ok := attrs.Value("gapscope.lock.blocker.held_us"); ok {
		t.Error("a zero held_us is left out")
	}
	st := spanAttrs(stmt)
	if v, _ := st.Value("gapscope.lock.wait_us"); v.AsInt64() != 2000 {
		t.Errorf("statement span's gapscope.lock.wait_us = %v", v.Emit())
	}
	if _, ok := st.Value("gapscope.lock.blocker.conn"); ok {
		t.Error("a joined statement's blocker belongs on its lock wait span")
	}
}

// A lock wait longer than exec (inconsistent input) is cut to exec; an
// unjoined statement has no exec span, so its statement span carries the
// blocker.
func TestOTelLockWaitClampedAndUnjoined(t *testing.T) {
	o, spans, _ := testOTel(t, OTelOptions{})
	o.Statement(lockedStmt(9_000))
	for _, s := range spans.GetSpans() {
		if s.Name == LockWaitSpan && s.EndTime.Sub(s.StartTime) != 3*time.Millisecond {
			t.Errorf("lock wait span lasts %v, want exec's 3 ms", s.EndTime.Sub(s.StartTime))
		}
	}
	spans.Reset()
	s := lockedStmt(2_000)
	s.Joined = false
	o.Statement(s)
	got := spans.GetSpans()
	if len(got) != 1 {
		t.Fatalf("unjoined statement: %d spans, want 1", len(got))
	}
	attrs := spanAttrs(got[0])
	if v, _ := attrs.Value("gapscope.lock.blocker.root.conn_id"); v.AsInt64() != 77 {
		t.Errorf("unjoined statement span lacks the blocker: %v", got[0].Attributes)
	}
}

func TestOTelLockAndTransactionMetrics(t *testing.T) {
	o, _, reader := testOTel(t, OTelOptions{})
	o.Statement(lockedStmt(2_000))
	o.Statement(lockedStmt(1_000))
	o.Statement(joinedStmt())
	for _, tx := range []event.Transaction{{EndKind: "commit", InAppUS: 3_000}, {EndKind: "commit", InAppUS: 2_000_000}, {EndKind: "bogus", InAppUS: 1}} {
		o.Transaction(&tx)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	type point struct {
		count uint64
		sum   float64
	}
	got := map[string]point{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			h := m.Data.(metricdata.Histogram[float64])
			for _, dp := range h.DataPoints {
				var attr string
				for _, k := range []attribute.Key{"gapscope.lock.kind", "gapscope.transaction.end"} {
					if v, ok := dp.Attributes.Value(k); ok {
						attr = v.Emit()
					}
				}
				if sys, _ := dp.Attributes.Value("db.system.name"); sys.Emit() != "mariadb" {
					t.Errorf("%s: db.system.name %q", m.Name, sys.Emit())
				}
				if attr != "" && len(dp.Bounds) != len(idleBoundaries) {
					t.Errorf("%s bounds %v", m.Name, dp.Bounds)
				}
				got[m.Name+"/"+attr] = point{dp.Count, dp.Sum}
			}
		}
	}
	want := map[string]point{
		"gapscope.lock.wait.duration/metadata":       {2, 0.003},
		"gapscope.transaction.idle.duration/commit":  {2, 2.003},
		"gapscope.transaction.idle.duration/unknown": {1, 1e-6},
	}
	for k, w := range want {
		if g := got[k]; g.count != w.count || g.sum-w.sum > 1e-12 || w.sum-g.sum > 1e-12 {
			t.Errorf("%s = %+v, want %+v", k, g, w)
		}
	}
}
