package export

import (
	"context"
	"testing"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
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
	o := &OTel{opts: opts, sets: map[metricKey]metric.MeasurementOption{}, phSet: map[phaseKey]metric.MeasurementOption{}}
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
