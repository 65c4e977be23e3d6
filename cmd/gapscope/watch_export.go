package main

import (
	"context"
	"io"
	"net/http"
	"time"

	"github.com/gapscope/gapscope/internal/export"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/gapscope/gapscope/internal/web"
	"github.com/go-sql-driver/mysql"
	"github.com/spf13/pflag"
)

// exportFlags are watch's exporters: Prometheus and the live page over
// HTTP, OpenTelemetry over OTLP.
type exportFlags struct {
	http         string
	httpLinger   time.Duration
	otlpEndpoint string
	topDigests   int
	traceRatio   float64
	traceSlow    time.Duration
	webConfig    string
}

func (f *exportFlags) register(fl *pflag.FlagSet) {
	fl.StringVar(&f.http, "http", "", "serve /metrics (Prometheus) and the live web view / on this address; a bare port or :PORT listens on loopback only, another interface only when named (0.0.0.0:PORT)")
	fl.DurationVar(&f.httpLinger, "http-linger", 0, "with --http: keep serving this long after the run ends, so that a last scrape sees the final counts")
	fl.StringVar(&f.webConfig, "web-config", "", "with --http: TLS and basic-auth settings for /metrics and the live view, in the Prometheus exporters' web configuration format (tls_server_config: cert_file, key_file, client_ca_file, client_auth_type; basic_auth_users: user: bcrypt hash); read again on each request and connection")
	fl.StringVar(&f.otlpEndpoint, "otlp-endpoint", "", "send OpenTelemetry traces and metrics over OTLP/HTTP to this base URL (http://host:4318); the standard OTEL_EXPORTER_OTLP_* variables work too")
	fl.IntVar(&f.topDigests, "top-digests", export.DefaultTopDigests, "digests with their own Prometheus series (top by client time); the rest count as digest=\"other\"")
	fl.Float64Var(&f.traceRatio, "trace-ratio", 0.01, "share of ordinary statements sent as traces (slow, failed and application-sampled ones always are)")
	fl.DurationVar(&f.traceSlow, "trace-slow", 100*time.Millisecond, "a statement this slow is always traced")
}

func (f *exportFlags) check() error {
	if f.http != "" && f.topDigests < 1 {
		return usagef("--top-digests must be 1 or more, not %d", f.topDigests)
	}
	if f.traceRatio < 0 || f.traceRatio > 1 {
		return usagef("--trace-ratio is a share between 0 and 1, not %g", f.traceRatio)
	}
	if f.httpLinger < 0 || f.traceSlow < 0 {
		return usagef("--http-linger and --trace-slow must not be negative")
	}
	if f.otlpEndpoint != "" {
		if err := export.CheckEndpoint(f.otlpEndpoint); err != nil {
			return usageError{err}
		}
	}
	if f.http != "" {
		if _, err := export.ListenAddr(f.http); err != nil {
			return usageError{err}
		}
	}
	if f.webConfig != "" && f.http == "" {
		return usagef("--web-config secures the --http server: give --http too")
	}
	return nil
}

// exporters are the running sinks and the HTTP server. The sinks close
// with watch's run (the OTLP exporters flush then); the server outlives
// it, serving the final snapshot until stop.
type exporters struct {
	sinks  []watch.Sink
	srv    *export.Server
	linger time.Duration
}

// startExporters starts what the flags ask for; the HTTP listener is open
// when it returns, so a bad address fails before watch starts.
func startExporters(ctx context.Context, errOut io.Writer, f exportFlags, cfg *mysql.Config) (*exporters, error) {
	x := &exporters{linger: f.httpLinger}
	if f.http != "" {
		mux := http.NewServeMux()
		x.sinks = append(x.sinks, mount(mux, "GET /metrics", export.NewPrometheus(f.topDigests)))
		x.sinks = append(x.sinks, mount(mux, "/", web.New()))
		srv, err := export.Serve(errOut, f.http, f.webConfig, mux)
		if err != nil {
			return nil, err
		}
		x.srv = srv
	}
	if export.OTelConfigured(f.otlpEndpoint) {
		host, port := export.ServerAddress(cfg)
		o, err := export.NewOTel(ctx, export.OTelOptions{Endpoint: f.otlpEndpoint, TraceRatio: f.traceRatio,
			SlowUS: f.traceSlow.Microseconds(), ServerAddress: host, ServerPort: port})
		if err != nil {
			x.stop()
			return nil, err
		}
		x.sinks = append(x.sinks, o)
	}
	return x, nil
}

// servedSink is a sink the HTTP server serves.
type servedSink interface {
	watch.Sink
	Handler() http.Handler
}

// mount serves k's handler at pattern and returns k.
func mount(mux *http.ServeMux, pattern string, k servedSink) watch.Sink {
	mux.Handle(pattern, k.Handler())
	return k
}

// stop lingers if asked (the HTTP server keeps the final snapshot), then
// closes the server.
func (x *exporters) stop() error {
	if x.srv == nil {
		return nil
	}
	return x.srv.Stop(x.linger)
}
