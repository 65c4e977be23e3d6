package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/gapscope/gapscope/internal/export"
	"github.com/gapscope/gapscope/internal/watch"
	"github.com/gapscope/gapscope/internal/web"
	"github.com/go-sql-driver/mysql"
	toolkit "github.com/prometheus/exporter-toolkit/web"
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
		if _, err := listenAddr(f.http); err != nil {
			return usageError{err}
		}
	}
	if f.webConfig != "" && f.http == "" {
		return usagef("--web-config secures the --http server: give --http too")
	}
	return nil
}

// listenAddr turns --http into a listen address: a bare port or ":PORT"
// listens on loopback; any other host only when the user names it.
func listenAddr(flag string) (string, error) {
	if _, err := strconv.ParseUint(flag, 10, 16); err == nil {
		return net.JoinHostPort("127.0.0.1", flag), nil
	}
	host, port, err := net.SplitHostPort(flag)
	if err != nil {
		return "", fmt.Errorf("--http takes PORT, :PORT or HOST:PORT, not %q", flag)
	}
	if _, err := strconv.ParseUint(port, 10, 16); err != nil {
		return "", fmt.Errorf("--http: %q is not a port", port)
	}
	if host == "" {
		host = "127.0.0.1"
	}
	return net.JoinHostPort(host, port), nil
}

// exporters are the running sinks and the HTTP server.
type exporters struct {
	sinks  []watch.Sink
	otel   *export.OTel
	srv    *http.Server
	served chan error
	linger time.Duration
}

// startExporters starts what the flags ask for; the HTTP listener is open
// when it returns, so a bad address fails before watch starts.
func startExporters(ctx context.Context, errOut io.Writer, f exportFlags, cfg *mysql.Config) (*exporters, error) {
	x := &exporters{linger: f.httpLinger}
	if f.http != "" {
		if err := x.serve(errOut, f); err != nil {
			return nil, err
		}
	}
	if export.OTelConfigured(f.otlpEndpoint) {
		host, port := serverOf(cfg)
		o, err := export.NewOTel(ctx, export.OTelOptions{Endpoint: f.otlpEndpoint, TraceRatio: f.traceRatio,
			SlowUS: f.traceSlow.Microseconds(), ServerAddress: host, ServerPort: port})
		if err != nil {
			x.stop()
			return nil, err
		}
		x.otel = o
		x.sinks = append(x.sinks, o)
	}
	return x, nil
}

func (x *exporters) serve(errOut io.Writer, f exportFlags) error {
	sec, err := loadWebConfig(f.webConfig)
	if err != nil {
		return err
	}
	addr, _ := listenAddr(f.http)
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--http: %w", err)
	}
	prom, view := export.NewPrometheus(f.topDigests), web.New()
	x.sinks = append(x.sinks, prom, view)
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", prom.Handler())
	mux.Handle("/", view.Handler())
	// The toolkit's and net/http's own messages (a failed TLS handshake, a
	// web config that no longer parses) go to stderr at warning level; a
	// rejected password is answered 401 and never logged.
	logger := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	x.srv = &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}
	x.served = make(chan error, 1)
	flags := &toolkit.FlagConfig{WebListenAddresses: &[]string{addr}, WebConfigFile: &f.webConfig}
	go func() { x.served <- toolkit.Serve(ln, x.srv, flags, logger) }()
	scheme := sec.scheme()
	fmt.Fprintf(errOut, "serving %s://%s/ (live view) and %s://%s/metrics%s\n", scheme, ln.Addr(), scheme, ln.Addr(), sec.describe())
	return nil
}

// serverOf is the server's host and port as the DSN names them (for
// server.address), or "" over a socket.
func serverOf(cfg *mysql.Config) (string, int) {
	if cfg == nil || cfg.Net != "tcp" {
		return "", 0
	}
	h, p, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return "", 0
	}
	n, _ := strconv.Atoi(p)
	return h, n
}

// stop lingers if asked (the HTTP server keeps the final snapshot), then
// flushes the OTLP exporters and closes the server.
func (x *exporters) stop() error {
	var errs []error
	if x.otel != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		errs = append(errs, x.otel.Shutdown(ctx))
		cancel()
	}
	if x.srv != nil {
		time.Sleep(x.linger)
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		_ = x.srv.Shutdown(ctx) // long polls of the page end here
		cancel()
		if err := <-x.served; !errors.Is(err, http.ErrServerClosed) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
