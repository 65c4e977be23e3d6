package export

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/gapscope/gapscope/internal/event"
	"github.com/gapscope/gapscope/internal/watch"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlpmetric/otlpmetrichttp"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/exemplar"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// OTelOptions configure the OpenTelemetry exporter.
type OTelOptions struct {
	// Endpoint is the OTLP/HTTP base URL (http://host:4318); traces go to
	// its /v1/traces, metrics to /v1/metrics. "" leaves it to the standard
	// OTEL_EXPORTER_OTLP_* environment variables.
	Endpoint string
	// TraceRatio is the share of ordinary statements traced; slow and
	// flagged ones always are.
	TraceRatio float64
	// SlowUS: a statement this slow (client time, µs) is always traced.
	SlowUS int64
	// System is db.system.name: "mariadb" or "mysql"; "" learns it from
	// the server.
	System string
	// ServerAddress and ServerPort are the server as the DSN names it.
	ServerAddress string
	ServerPort    int
	// MetricInterval is how often metrics are pushed (default 10 s).
	MetricInterval time.Duration
}

// OTelConfigured reports whether OTLP export is asked for, by the flag or
// by the standard environment variables.
func OTelConfigured(endpoint string) bool {
	if endpoint != "" {
		return true
	}
	for _, v := range []string{"OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT"} {
		if os.Getenv(v) != "" {
			return true
		}
	}
	return false
}

// CheckEndpoint validates an --otlp-endpoint value.
func CheckEndpoint(endpoint string) error {
	u, err := url.Parse(endpoint)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("--otlp-endpoint must be an http:// or https:// URL such as http://127.0.0.1:4318, not %q", endpoint)
	}
	return nil
}

// OTel is a watch Sink that sends one CLIENT span per traced statement,
// with a child span per non-zero part, and the client-duration and phase
// histograms, over OTLP/HTTP.
type OTel struct {
	opts   OTelOptions
	tp     *sdktrace.TracerProvider
	mp     *sdkmetric.MeterProvider
	tracer trace.Tracer
	dur    metric.Float64Histogram
	phase  metric.Float64Histogram
	lock   metric.Float64Histogram // lock waits, by gapscope.lock.kind
	idle   metric.Float64Histogram // transactions' time in the application
	prop   propagation.TraceContext
	flavor atomic.Value // db.system.name learnt from the snapshots

	mu    sync.Mutex // the attribute-set cache
	sets  map[metricKey]metric.MeasurementOption
	phSet map[phaseKey]metric.MeasurementOption
	// kvSet caches the attribute sets of the lock and transaction
	// histograms: one per lock kind and per transaction end.
	kvSet map[attribute.KeyValue]metric.MeasurementOption
}

// metricKey keys the duration's attribute sets by digest: a digest has
// one operation, so the verb is parsed once per digest, not per statement.
type metricKey struct{ digest, namespace, status string }
type phaseKey struct {
	namespace string
	phase     int
}

// durationBoundaries are the OpenTelemetry database conventions' bucket
// boundaries for db.client.operation.duration.
var durationBoundaries = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10}

// idleBoundaries are the transaction idle histogram's, 1 ms to 60 s.
var idleBoundaries = []float64{0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 10, 30, 60}

// NewOTel starts the OTLP exporters.
func NewOTel(ctx context.Context, opts OTelOptions) (*OTel, error) {
	if opts.MetricInterval <= 0 {
		opts.MetricInterval = 10 * time.Second
	}
	res, err := resource.New(ctx, resource.WithAttributes(attribute.String("service.name", "gapscope")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil {
		return nil, fmt.Errorf("opentelemetry resource: %w", err)
	}
	o := newOTel(opts)
	base := strings.TrimRight(opts.Endpoint, "/")
	if os.Getenv("OTEL_TRACES_EXPORTER") != "none" {
		if err := o.startTraces(ctx, res, base); err != nil {
			return nil, err
		}
	}
	if os.Getenv("OTEL_METRICS_EXPORTER") != "none" {
		if err := o.startMetrics(ctx, res, base); err != nil {
			_ = o.Shutdown(ctx)
			return nil, err
		}
	}
	return o, nil
}

func newOTel(opts OTelOptions) *OTel {
	return &OTel{opts: opts, sets: map[metricKey]metric.MeasurementOption{}, phSet: map[phaseKey]metric.MeasurementOption{},
		kvSet: map[attribute.KeyValue]metric.MeasurementOption{}}
}

// startTraces sends spans in batches (the SDK drops them when its queue
// is full rather than hold the joiner).
func (o *OTel) startTraces(ctx context.Context, res *resource.Resource, base string) error {
	var topts []otlptracehttp.Option
	if base != "" {
		topts = append(topts, otlptracehttp.WithEndpointURL(base+"/v1/traces"))
	}
	texp, err := otlptracehttp.New(ctx, topts...)
	if err != nil {
		return fmt.Errorf("otlp traces: %w", err)
	}
	// Sampling is decided here (sampled), not by the SDK: every span
	// started is one gapscope chose to keep, whatever the application's
	// trace flags say.
	o.tp = sdktrace.NewTracerProvider(sdktrace.WithResource(res), sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(texp))
	o.tracer = o.tp.Tracer("github.com/gapscope/gapscope")
	return nil
}

func (o *OTel) startMetrics(ctx context.Context, res *resource.Resource, base string) error {
	var mopts []otlpmetrichttp.Option
	if base != "" {
		mopts = append(mopts, otlpmetrichttp.WithEndpointURL(base+"/v1/metrics"))
	}
	mexp, err := otlpmetrichttp.New(ctx, mopts...)
	if err != nil {
		return fmt.Errorf("otlp metrics: %w", err)
	}
	return o.startMeter(sdkmetric.NewPeriodicReader(mexp, sdkmetric.WithInterval(o.opts.MetricInterval)), res)
}

// startMeter creates the instruments on a meter provider reading through
// reader.
func (o *OTel) startMeter(reader sdkmetric.Reader, res *resource.Resource) error {
	// No exemplars: the statements' spans are sampled by gapscope, and
	// looking for a span context on every recording costs more than it tells.
	o.mp = sdkmetric.NewMeterProvider(sdkmetric.WithResource(res), sdkmetric.WithReader(reader),
		sdkmetric.WithExemplarFilter(exemplar.AlwaysOffFilter))
	meter := o.mp.Meter("github.com/gapscope/gapscope")
	var err error
	if o.dur, err = meter.Float64Histogram("db.client.operation.duration", metric.WithUnit("s"),
		metric.WithDescription("Duration of database client operations, as seen on the wire."),
		metric.WithExplicitBucketBoundaries(durationBoundaries...)); err != nil {
		return err
	}
	if o.phase, err = meter.Float64Histogram("gapscope.statement.phase.duration", metric.WithUnit("s"),
		metric.WithDescription("Time joined statements spent in each part of their client time (gapscope.phase); a statement counts in the parts it spent time in."),
		metric.WithExplicitBucketBoundaries(durationBoundaries...)); err != nil {
		return err
	}
	if o.lock, err = meter.Float64Histogram("gapscope.lock.wait.duration", metric.WithUnit("s"),
		metric.WithDescription("Time statements waited for a lock another connection held (part of their exec time), by gapscope.lock.kind."),
		metric.WithExplicitBucketBoundaries(idleBoundaries...)); err != nil {
		return err
	}
	o.idle, err = meter.Float64Histogram("gapscope.transaction.idle.duration", metric.WithUnit("s"),
		metric.WithDescription("Time each finished transaction sat open in its application between a response and the next request, by gapscope.transaction.end."),
		metric.WithExplicitBucketBoundaries(idleBoundaries...))
	return err
}

// Shutdown flushes what is queued and stops the exporters.
func (o *OTel) Shutdown(ctx context.Context) error {
	var errs []error
	if o.tp != nil {
		errs = append(errs, o.tp.Shutdown(ctx))
	}
	if o.mp != nil {
		errs = append(errs, o.mp.Shutdown(ctx))
	}
	return errors.Join(errs...)
}

var _ watch.Sink = (*OTel)(nil)

// Takes is part of watch.Sink: OTel records statements and transactions,
// and takes the server's flavor from the snapshots.
func (o *OTel) Takes() watch.Takes {
	return watch.TakesStatements | watch.TakesTransactions | watch.TakesSnapshots
}

// shutdownWait bounds how long Close waits for the OTLP exporters to send
// what is queued.
const shutdownWait = 10 * time.Second

// Close is part of watch.Sink: it flushes what is queued and stops the
// exporters (Shutdown), waiting at most shutdownWait.
func (o *OTel) Close(*watch.Snapshot) error {
	ctx, cancel := context.WithTimeout(context.Background(), shutdownWait)
	defer cancel()
	if err := o.Shutdown(ctx); err != nil {
		return fmt.Errorf("OpenTelemetry exporters: %w", err)
	}
	return nil
}

// Snapshot takes the server's flavor for db.system.name (watch hands out
// a snapshot before the first statement).
func (o *OTel) Snapshot(s *watch.Snapshot) {
	if s.Flavor == "mariadb" {
		o.flavor.Store("mariadb")
	} else if s.Flavor != "" {
		o.flavor.Store("mysql") // Percona Server is MySQL to the conventions
	}
}

// Statement records s's metrics and, when sampled, its spans.
func (o *OTel) Statement(s *event.Statement) {
	if !s.HasResponse() || s.Why == event.ReplicaStream {
		return // COM_QUIT and the like, a replica's binlog stream: no operation to time
	}
	if o.mp != nil {
		o.record(s)
	}
	if o.tp != nil && o.sampled(s) {
		o.span(s)
	}
}

// sampled keeps every slow statement, every failed one and every one whose
// application trace is sampled, and TraceRatio of the rest.
func (o *OTel) sampled(s *event.Statement) bool {
	switch {
	case o.opts.SlowUS > 0 && s.ClientUS >= o.opts.SlowUS, s.Error != nil:
		return true
	case strings.HasSuffix(s.Tags["traceparent"], "-01"):
		return true
	}
	return o.opts.TraceRatio > 0 && rand.Float64() < o.opts.TraceRatio
}

// Transaction records t's time in the application (watch calls it for
// each transaction when it ends, or is still open at a connection's close
// or the run's end).
func (o *OTel) Transaction(t *event.Transaction) {
	if o.mp == nil {
		return
	}
	end := t.EndKind
	if !slices.Contains(TxnEnds[:], end) {
		end = "unknown"
	}
	o.idle.Record(context.Background(), float64(max(t.InAppUS, 0))/1e6, o.kvSetOf(attribute.String("gapscope.transaction.end", end)))
}

// kvSetOf is the attribute set of db.system.name and kv, built once.
func (o *OTel) kvSetOf(kv attribute.KeyValue) metric.MeasurementOption {
	o.mu.Lock()
	defer o.mu.Unlock()
	if set, ok := o.kvSet[kv]; ok {
		return set
	}
	set := metric.WithAttributeSet(attribute.NewSet(attribute.String("db.system.name", o.system()), kv))
	o.kvSet[kv] = set
	return set
}

func (o *OTel) record(s *event.Statement) {
	ctx := context.Background()
	o.dur.Record(ctx, float64(s.ClientUS)/1e6, o.durationSet(s))
	if lw := s.LockWaitTime(); lw > 0 {
		o.lock.Record(ctx, float64(lw)/1e6, o.kvSetOf(attribute.String("gapscope.lock.kind", LockKind(s))))
	}
	if !s.Joined {
		return
	}
	for i, us := range PhaseUS(s) {
		if us > 0 { // a statement counts in the parts it spent time in
			o.phase.Record(ctx, float64(us)/1e6, o.phaseSet(s.DB, i))
		}
	}
}

// durationSet returns the attribute set of s's duration, built once per
// schema, operation and status (an attribute set per statement would
// cost more than the recording).
func (o *OTel) durationSet(s *event.Statement) metric.MeasurementOption {
	k := metricKey{s.Fingerprint, s.DB, ""}
	if s.Error != nil {
		k.status = statusCode(s)
	}
	o.mu.Lock()
	defer o.mu.Unlock()
	if set, ok := o.sets[k]; ok {
		return set
	}
	if len(o.sets) >= maxAttributeSets {
		clear(o.sets) // many digests: start over rather than grow
	}
	attrs := []attribute.KeyValue{attribute.String("db.system.name", o.system()), attribute.String("db.operation.name", Operation(s))}
	if k.namespace != "" {
		attrs = append(attrs, attribute.String("db.namespace", k.namespace))
	}
	if k.status != "" {
		attrs = append(attrs, attribute.String("db.response.status_code", k.status), attribute.String("error.type", k.status))
	}
	attrs = append(attrs, o.serverAttrs(s)...)
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	o.sets[k] = set
	return set
}

// maxAttributeSets bounds the cache of duration attribute sets.
const maxAttributeSets = 10_000

func (o *OTel) phaseSet(namespace string, phase int) metric.MeasurementOption {
	k := phaseKey{namespace, phase}
	o.mu.Lock()
	defer o.mu.Unlock()
	if set, ok := o.phSet[k]; ok {
		return set
	}
	attrs := []attribute.KeyValue{attribute.String("db.system.name", o.system()), attribute.String("gapscope.phase", Phases[phase])}
	if namespace != "" {
		attrs = append(attrs, attribute.String("db.namespace", namespace))
	}
	set := metric.WithAttributeSet(attribute.NewSet(attrs...))
	o.phSet[k] = set
	return set
}

func (o *OTel) system() string {
	if o.opts.System != "" {
		return o.opts.System
	}
	if f, ok := o.flavor.Load().(string); ok {
		return f
	}
	return "mysql"
}

// serverAttrs are server.address/port: the DSN's, else the wire's.
func (o *OTel) serverAttrs(s *event.Statement) []attribute.KeyValue {
	host, port := o.opts.ServerAddress, o.opts.ServerPort
	if host == "" {
		host, port = peerOf(s.Conn)
	}
	if host == "" {
		return nil
	}
	return []attribute.KeyValue{attribute.String("server.address", host), attribute.Int("server.port", port)}
}

// peerOf returns the server side of a wire connection "client>server".
func peerOf(conn string) (string, int) {
	_, server, ok := strings.Cut(conn, ">")
	if !ok {
		return "", 0
	}
	h, p, err := net.SplitHostPort(server)
	if err != nil {
		return "", 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

func statusCode(s *event.Statement) string {
	if s.Error == nil {
		return ""
	}
	return strconv.Itoa(int(s.Error.Code))
}

// span sends s as a CLIENT span from its capture timestamps, a child of
// the application's trace when its comment carries a W3C traceparent, with
// one child span per non-zero part laid end to end in the parts' order.
func (o *OTel) span(s *event.Statement) {
	ctx := context.Background()
	if tp := s.Tags["traceparent"]; tp != "" {
		carrier := propagation.MapCarrier{"traceparent": tp}
		if ts := s.Tags["tracestate"]; ts != "" {
			carrier["tracestate"] = ts
		}
		ctx = o.prop.Extract(ctx, carrier)
	}
	start, end := time.UnixMicro(s.TReqFirst), time.UnixMicro(s.TRespLast)
	ctx, sp := o.tracer.Start(ctx, SpanName(s), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithTimestamp(start), trace.WithAttributes(o.spanAttrs(s)...))
	if s.Error != nil {
		sp.SetStatus(codes.Error, s.Error.State)
	}
	if s.Joined {
		at := start
		for i, us := range PhaseUS(s) {
			if us <= 0 {
				continue
			}
			next := at.Add(time.Duration(us) * time.Microsecond)
			cctx, child := o.tracer.Start(ctx, Phases[i], trace.WithTimestamp(at),
				trace.WithAttributes(attribute.String("gapscope.phase", Phases[i])))
			if Phases[i] == "exec" {
				o.lockSpan(cctx, s, at, us)
			}
			child.End(trace.WithTimestamp(next))
			at = next
		}
	}
	sp.End(trace.WithTimestamp(end))
}

// LockWaitSpan is the name of the span of a statement's lock wait, a
// child of its exec span.
const LockWaitSpan = "lock_wait"

// lockSpan sends s's lock wait, if any, as a child of its exec span, which
// starts at execStart and lasts execUS: laid at the start of exec (a
// statement waits for its lock before it can read or change the rows; the
// length is known, the position is not), never longer than exec.
func (o *OTel) lockSpan(ctx context.Context, s *event.Statement, execStart time.Time, execUS int64) {
	lw := min(s.LockWaitTime(), execUS)
	if lw <= 0 {
		return
	}
	_, sp := o.tracer.Start(ctx, LockWaitSpan, trace.WithTimestamp(execStart), trace.WithAttributes(LockAttrs(s)...))
	sp.End(trace.WithTimestamp(execStart.Add(time.Duration(lw) * time.Microsecond)))
}

// LockAttrs are the attributes of s's lock wait: its kind and length
// first, then the blocker gapscope attributed it to with how sure that is,
// and the head of the blocker's chain when it is another. Statement text
// is the blocker's redacted text, as every statement's.
func LockAttrs(s *event.Statement) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("gapscope.lock.kind", LockKind(s)),
		attribute.Int64("gapscope.lock.wait_us", s.LockWaitTime()),
	}
	b := s.BlockedBy
	if b == nil {
		return attrs
	}
	attrs = append(attrs, blockerAttrs("gapscope.lock.blocker.", b)...)
	if r := b.RootOrSelf(); r != b {
		attrs = append(attrs, blockerAttrs("gapscope.lock.blocker.root.", r)...)
	}
	return attrs
}

// blockerAttrs are one blocker's attributes under prefix; empty fields are
// left out.
func blockerAttrs(prefix string, b *event.Blocker) []attribute.KeyValue {
	var attrs []attribute.KeyValue
	str := func(k, v string) {
		if v != "" {
			attrs = append(attrs, attribute.String(prefix+k, v))
		}
	}
	num := func(k string, v int64) {
		if v > 0 {
			attrs = append(attrs, attribute.Int64(prefix+k, v))
		}
	}
	str("conn", b.Conn)
	num("conn_id", int64(b.ConnID))
	str("user", b.User)
	str("state", b.State)
	str("digest", b.Digest)
	str("sql", b.SQL)
	num("held_us", b.HeldUS)
	num("idle_us", b.IdleUS)
	str("source", b.Source)
	str("confidence", b.Confidence)
	return attrs
}

func (o *OTel) spanAttrs(s *event.Statement) []attribute.KeyValue {
	attrs := []attribute.KeyValue{
		attribute.String("db.system.name", o.system()),
		attribute.String("db.operation.name", Operation(s)),
		attribute.String("db.query.summary", Summary(s)),
		attribute.String("gapscope.digest", Fingerprint(s)),
		attribute.String("gapscope.cause", Cause(s)),
		attribute.Bool("gapscope.joined", s.Joined),
		attribute.String("gapscope.conn", s.Conn),
	}
	if s.SQL != "" {
		attrs = append(attrs, attribute.String("db.query.text", s.SQL)) // literals redacted unless --keep-literals
	}
	if s.DB != "" {
		attrs = append(attrs, attribute.String("db.namespace", s.DB))
	}
	if c := statusCode(s); c != "" {
		attrs = append(attrs, attribute.String("db.response.status_code", c), attribute.String("error.type", c))
	}
	attrs = append(attrs, o.serverAttrs(s)...)
	if h, p := peerOf(s.Conn); h != "" {
		attrs = append(attrs, attribute.String("network.peer.address", h), attribute.Int("network.peer.port", p),
			attribute.String("network.transport", "tcp"))
	}
	if s.Joined {
		for i, us := range PhaseUS(s) {
			attrs = append(attrs, attribute.Int64("gapscope."+Phases[i]+"_us", us))
		}
	}
	if s.LockWaitTime() > 0 {
		lock := LockAttrs(s)
		if s.Joined {
			lock = lock[:2] // kind and wait; the blocker is on the lock wait span under exec
		}
		attrs = append(attrs, lock...)
	}
	return attrs
}
