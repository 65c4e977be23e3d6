package export

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

	"github.com/go-sql-driver/mysql"
	toolkit "github.com/prometheus/exporter-toolkit/web"
)

// ListenAddr turns --http into a listen address: a bare port or ":PORT"
// listens on loopback; any other host only when the user names it.
func ListenAddr(flag string) (string, error) {
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

// Server is watch's HTTP server (/metrics and the live page), secured as
// its --web-config file says.
type Server struct {
	srv    *http.Server
	served chan error
}

// Serve listens on the --http address and serves handler, with TLS and
// basic auth from webConfig ("" for plain HTTP; checked first, so a bad
// file fails before watch starts). It says on errOut where it serves.
func Serve(errOut io.Writer, httpFlag, webConfig string, handler http.Handler) (*Server, error) {
	sec, err := LoadWebConfig(webConfig)
	if err != nil {
		return nil, err
	}
	addr, err := ListenAddr(httpFlag)
	if err != nil {
		return nil, err
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--http: %w", err)
	}
	// The toolkit's and net/http's own messages (a failed TLS handshake, a
	// web config that no longer parses) go to errOut at warning level; a
	// rejected password is answered 401 and never logged.
	logger := slog.New(slog.NewTextHandler(errOut, &slog.HandlerOptions{Level: slog.LevelWarn}))
	s := &Server{served: make(chan error, 1), srv: &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second,
		ErrorLog: slog.NewLogLogger(logger.Handler(), slog.LevelWarn)}}
	flags := &toolkit.FlagConfig{WebListenAddresses: &[]string{addr}, WebConfigFile: &webConfig}
	go func() { s.served <- toolkit.Serve(ln, s.srv, flags, logger) }()
	scheme := sec.Scheme()
	fmt.Fprintf(errOut, "serving %s://%s/ (live view) and %s://%s/metrics%s\n", scheme, ln.Addr(), scheme, ln.Addr(), sec.Describe())
	return s, nil
}

// Stop lingers (the server keeps the final snapshot for a last scrape),
// then closes the server; long polls of the page end here.
func (s *Server) Stop(linger time.Duration) error {
	time.Sleep(linger)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	_ = s.srv.Shutdown(ctx)
	cancel()
	if err := <-s.served; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

// ServerAddress is the server's host and port as the DSN names them (for
// OpenTelemetry's server.address), or "" over a socket.
func ServerAddress(cfg *mysql.Config) (string, int) {
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
