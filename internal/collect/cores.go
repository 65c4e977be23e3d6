package collect

import (
	"net"
	"runtime"

	"github.com/go-sql-driver/mysql"
)

// LocalCores is this host's CPU count when the server runs here (unix
// socket or loopback), else 0: unknown.
func LocalCores(cfg *mysql.Config) int {
	if cfg.Net == "unix" {
		return runtime.NumCPU()
	}
	host, _, err := net.SplitHostPort(cfg.Addr)
	if err != nil {
		return 0
	}
	if ip := net.ParseIP(host); host == "localhost" || (ip != nil && ip.IsLoopback()) {
		return runtime.NumCPU()
	}
	return 0
}
